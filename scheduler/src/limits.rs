//! The bounds on every count, rate, quantity and duration maar reads.
//!
//! Each is far above any real cluster and far below what would make a run allocate
//! without bound, spin or overflow. Readers check values against them as they read, so
//! an error names the file, the line and the limit; arithmetic inside the core then
//! cannot overflow. docs/limits.md lists them.

/// Bytes in one quantity of memory or disk (a node's, a job's): 1 EiB.
pub const MAX_BYTES: u64 = 1 << 60;
/// CPU of one node or one job: 1,048,576 cores (in millicores).
pub const MAX_CPU_MILLI: u64 = (1 << 20) * 1000;
/// Any duration (runtimes, delays, `--until`, `--at`): 366 days.
pub const MAX_DURATION_S: u64 = 366 * 86_400;
/// GPUs on one node, and GPUs one replica asks for.
pub const MAX_GPUS_PER_NODE: u32 = 64;
/// Replicas of one job (also an inference service's maximum).
pub const MAX_REPLICAS: u32 = 10_000;
/// Nodes in one cluster (a scenario, a trace).
pub const MAX_NODES: u32 = 100_000;
/// Pods in one trace.
pub const MAX_TRACE_PODS: usize = 2_000_000;
/// Characters of a GPU model's name in a trace (a label value's 63, as Kubernetes
/// allows it), and the models one trace pod may name (`gpu_spec`).
pub const MAX_MODEL_CHARS: usize = 63;
pub const MAX_MODELS_PER_POD: usize = 64;
/// Arrivals per hour of one job generator.
pub const MAX_RATE_PER_HOUR: f64 = 100_000.0;
/// GPUs in one quota amount or quota request.
pub const MAX_QUOTA_GPUS: f64 = 1_000_000.0;
/// Price of one GPU-hour.
pub const MAX_PRICE: f64 = 1_000_000.0;
/// Restarts allowed by a restart policy.
pub const MAX_RESTARTS: u32 = 1_000;
/// Absolute value of a numeric priority: Kubernetes' highest user-definable
/// PriorityClass value, so that every class a cluster's users can make keeps its own
/// value and order in maar (at ±1,000,000 the classes above it were one priority, and
/// a 1,000,000,000 pod could not preempt a 2,000,000 one as kube-scheduler does). The
/// system classes above it are this top, which other schedulers' pods hold too.
pub const MAX_PRIORITY: i32 = 1_000_000_000;
/// Size of one input file (scenario, manifest, trace CSV, theme).
pub const MAX_INPUT_BYTES: u64 = 64 << 20;
/// Characters of a value echoed back in an error message.
pub const MAX_ECHO_CHARS: usize = 60;

/// A value cut to a readable length for an error message.
/// A label key and value as Kubernetes allows them: a key of at most 253 characters
/// before an optional `/` and 63 after, a value of at most 63; letters, digits, `-`,
/// `_`, `.` (and the one `/` in the key).
pub fn label(key: &str, value: &str) -> Result<(), String> {
    let ok = |s: &str, max: usize| {
        s.len() <= max
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
    if name.is_empty() || !ok(name, 63) || !ok(prefix, 253) {
        return Err(format!("`{}` is not a label key", echo(key)));
    }
    if !ok(value, 63) {
        return Err(format!(
            "`{}` is not a label value (for {key})",
            echo(value)
        ));
    }
    Ok(())
}

pub fn echo(v: &str) -> String {
    cut(v, MAX_ECHO_CHARS)
}

/// `v` kept to its first `max` characters, ending in `…` when cut.
pub fn cut(v: &str, max: usize) -> String {
    match v.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &v[..at]),
        None => v.to_string(),
    }
}

/// `Err` naming the limit when `v > max`.
pub fn at_most<T: PartialOrd + std::fmt::Display>(what: &str, v: T, max: T) -> Result<T, String> {
    if v > max {
        Err(format!("{what} {v} is above the limit of {max}"))
    } else {
        Ok(v)
    }
}
