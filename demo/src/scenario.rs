//! Scenario files: a cluster (nodes, pools, projects, quotas, prices), a workload (jobs
//! at given times, generators, inference traffic), faults and operator commands.
//! The format is documented in `docs/scenario.md`.
//!
//! Deserialisation catches structural errors with their line; [`Scenario::build`]
//! checks references between sections and names the offending field.

use std::collections::BTreeMap;

use serde::Deserialize;

use maar_scheduler::manifest::{GpuAffinity, Manifest, Priority, QuotaSpec, RestartSpec};
use maar_scheduler::model::*;
use maar_scheduler::quantity::{Bytes, CpuMilli, Duration};
use maar_scheduler::{Cluster, Command, SchedConfig};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub seed: u64,
    /// Hour of day at time 0 (for diurnal traffic), 0..24.
    #[serde(default)]
    pub start_hour: f64,
    #[serde(default)]
    pub scheduler: SchedulerSettings,
    /// Price per GPU-hour by GPU model.
    #[serde(default)]
    pub prices: BTreeMap<String, f64>,
    /// Relative speed by GPU model (1.0: the card runtimes are given for).
    #[serde(default)]
    pub speeds: BTreeMap<String, f64>,
    pub pools: Vec<PoolSpec>,
    pub nodes: Vec<NodeGroup>,
    #[serde(default)]
    pub projects: Vec<ProjectSpec>,
    #[serde(default)]
    pub workload: Workload,
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    #[serde(default)]
    pub random_faults: Option<RandomFaults>,
    #[serde(default)]
    pub commands: Vec<TimedCommand>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSettings {
    #[serde(default = "d_aging")]
    pub aging: Duration,
    #[serde(default = "d_true")]
    pub backfill: bool,
    #[serde(default = "d_true")]
    pub preemption: bool,
    /// Autoscaler and metrics interval.
    #[serde(default = "d_tick")]
    pub tick: Duration,
    #[serde(default = "d_alert")]
    pub pending_alert: Duration,
    /// How a node is chosen among those that fit: maar (the default), or a published
    /// policy (random, dotprod, gpuclustering, gpupacking, bestfit, fgd) to compare.
    #[serde(default)]
    pub placement: maar_scheduler::placement::Policy,
}

fn d_aging() -> Duration {
    Duration(600)
}
fn d_true() -> bool {
    true
}
fn d_tick() -> Duration {
    Duration(30)
}
fn d_alert() -> Duration {
    Duration(3600)
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            aging: d_aging(),
            backfill: true,
            preemption: true,
            tick: d_tick(),
            pending_alert: d_alert(),
            placement: Default::default(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    pub name: String,
    pub kind: PoolKind,
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    #[serde(default)]
    pub overcommit: OvercommitSpec,
    #[serde(default)]
    pub lend_to: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OvercommitSpec {
    #[serde(default = "one")]
    pub cpu: f64,
    #[serde(default = "one")]
    pub memory: f64,
}

fn one() -> f64 {
    1.0
}

impl Default for OvercommitSpec {
    fn default() -> Self {
        OvercommitSpec {
            cpu: 1.0,
            memory: 1.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    /// Node name; with `count` > 1, names are `name-01`, `name-02`, ...
    pub name: String,
    #[serde(default = "one_u32")]
    pub count: u32,
    /// Sets the `crater.ai/node-role` label.
    #[serde(default)]
    pub role: Option<String>,
    pub cpu: CpuMilli,
    pub memory: Bytes,
    pub disk: Bytes,
    #[serde(default)]
    pub gpu: Option<NodeGpu>,
    /// When false the node has GPUs but no crater.ai GPU labels.
    #[serde(default = "d_true")]
    pub gpu_labels: bool,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub not_ready: Option<String>,
    #[serde(default)]
    pub cordoned: bool,
}

fn one_u32() -> u32 {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGpu {
    pub model: String,
    #[serde(default = "nvidia")]
    pub vendor: String,
    pub count: u32,
    pub memory: Bytes,
    #[serde(default)]
    pub mig: bool,
    /// GPU indices that start unhealthy, with the reason (e.g. `XID 79`).
    #[serde(default)]
    pub unhealthy: BTreeMap<u32, String>,
}

fn nvidia() -> String {
    "nvidia".into()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectSpec {
    pub name: String,
    #[serde(default)]
    pub department: String,
    #[serde(default)]
    pub quotas: BTreeMap<String, QuotaSpec>,
    #[serde(default)]
    pub requests: Vec<QuotaRequestSpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaRequestSpec {
    pub pool: String,
    pub gpus: u32,
    #[serde(default)]
    pub reserved: bool,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub at: Duration,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default)]
    pub jobs: Vec<TimedJob>,
    #[serde(default)]
    pub generators: Vec<Generator>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedJob {
    #[serde(default)]
    pub at: Duration,
    /// Simulated runtime; defaults to the manifest's estimatedRuntime, else runs forever.
    #[serde(default)]
    pub runtime: Option<Duration>,
    /// Diurnal traffic for an InferenceService.
    #[serde(default)]
    pub traffic: Option<Traffic>,
    pub manifest: Manifest,
}

/// Load as a share of the service's full capacity (max replicas at the target rate),
/// following a cosine over the day with its peak at `peak_hour`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traffic {
    pub base: f64,
    pub peak: f64,
    #[serde(default = "d_peak_hour")]
    pub peak_hour: f64,
}

fn d_peak_hour() -> f64 {
    14.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generator {
    pub name: String,
    pub project: String,
    pub pool: String,
    /// Mean arrivals per hour (Poisson).
    pub rate_per_hour: f64,
    #[serde(default)]
    pub start: Duration,
    #[serde(default)]
    pub stop: Option<Duration>,
    pub runtime: RuntimeRange,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub restart_policy: Option<RestartSpec>,
    /// Probability that a generated job is OOM-killed during its run.
    #[serde(default)]
    pub oom_probability: f64,
    /// Arrivals are dropped while this many of the generator's jobs are Pending (users
    /// stop submitting when their backlog is long); no limit when absent.
    #[serde(default)]
    pub max_pending: Option<u32>,
    pub shapes: Vec<ShapeSpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeRange {
    pub min: Duration,
    pub max: Duration,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    #[serde(default = "one_u32")]
    pub weight: u32,
    #[serde(default)]
    pub gpu: u32,
    #[serde(default)]
    pub gpu_memory: Option<Bytes>,
    #[serde(default)]
    pub models: Vec<String>,
    #[serde(default)]
    pub shared: bool,
    pub cpu: CpuMilli,
    pub memory: Bytes,
    #[serde(default)]
    pub disk: Option<Bytes>,
    #[serde(default)]
    pub affinity: Option<GpuAffinity>,
    #[serde(default)]
    pub priority: Option<Priority>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub at: Duration,
    #[serde(default)]
    pub gpu_unhealthy: Option<GpuFault>,
    #[serde(default)]
    pub node_not_ready: Option<NodeFault>,
    #[serde(default)]
    pub oom: Option<OomFault>,
    #[serde(default)]
    pub disk_fill: Option<DiskFault>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuFault {
    pub node: String,
    pub gpu: u32,
    #[serde(default = "d_xid")]
    pub xid: u32,
    /// Healthy again after this long; stays unhealthy if absent.
    #[serde(default)]
    pub duration: Option<Duration>,
}

fn d_xid() -> u32 {
    79
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeFault {
    pub node: String,
    #[serde(default = "d_not_ready")]
    pub reason: String,
    #[serde(default)]
    pub duration: Option<Duration>,
}

fn d_not_ready() -> String {
    "KubeletNotReady".into()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OomFault {
    /// `name` or `project/name`.
    pub job: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskFault {
    pub node: String,
    /// Disk used outside jobs, percent of the node's disk.
    pub percent: u32,
    #[serde(default)]
    pub duration: Option<Duration>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    GpuUnhealthy,
    NodeNotReady,
    Oom,
    DiskFill,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomFaults {
    pub every: Duration,
    pub kinds: Vec<FaultKind>,
    /// How long a random GPU, node or disk fault lasts.
    #[serde(default = "d_recover")]
    pub recover_after: Duration,
}

fn d_recover() -> Duration {
    Duration(900)
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedCommand {
    pub at: Duration,
    /// The command, e.g. `{approve_quota: {id: 1}}` or `{cordon_node: {node: gpu-01}}`.
    pub run: Command,
}

/// A reference in a scenario that points nowhere, or a value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct BuildError {
    pub field: String,
    pub message: String,
}

fn berr(field: impl Into<String>, message: impl Into<String>) -> BuildError {
    BuildError {
        field: field.into(),
        message: message.into(),
    }
}

/// Expanded node names of a group.
pub fn group_names(g: &NodeGroup) -> Vec<String> {
    if g.count <= 1 {
        vec![g.name.clone()]
    } else {
        let w = if g.count >= 100 { 3 } else { 2 };
        (1..=g.count)
            .map(|i| format!("{}-{:0w$}", g.name, i, w = w))
            .collect()
    }
}

/// A number that must be finite and within `lo..=hi`.
fn within(field: impl Into<String>, v: f64, lo: f64, hi: f64) -> Result<(), BuildError> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(berr(field, format!("{v} is not within {lo}..={hi}")))
    }
}

/// A count that must not exceed its limit.
fn at_most(field: impl Into<String>, v: u64, max: u64) -> Result<(), BuildError> {
    if v <= max {
        Ok(())
    } else {
        Err(berr(field, format!("{v} is above the limit of {max}")))
    }
}

impl Scenario {
    /// Checks every number against its documented limit (docs/limits.md), before
    /// anything is built from it.
    pub fn check_limits(&self) -> Result<(), BuildError> {
        use maar_scheduler::limits::{
            MAX_GPUS_PER_NODE, MAX_NODES, MAX_PRICE, MAX_QUOTA_GPUS, MAX_RATE_PER_HOUR,
        };
        within("start_hour", self.start_hour, 0.0, 24.0)?;
        for (m, p) in &self.prices {
            within(format!("prices.{m}"), *p, 0.0, MAX_PRICE)?;
        }
        for (m, v) in &self.speeds {
            within(format!("speeds.{m}"), *v, 0.01, 100.0)?;
        }
        if self.scheduler.tick.0 == 0 {
            return Err(berr("scheduler.tick", "must be at least 1s"));
        }
        let mut total: u64 = 0;
        for (i, g) in self.nodes.iter().enumerate() {
            at_most(
                format!("nodes[{i}].count"),
                g.count as u64,
                MAX_NODES as u64,
            )?;
            total += g.count as u64;
            at_most("nodes", total, MAX_NODES as u64).map_err(|_| {
                berr(
                    format!("nodes[{i}].count"),
                    format!(
                        "the scenario would have {total} nodes, above the limit of {MAX_NODES}"
                    ),
                )
            })?;
            if let Some(gpu) = &g.gpu {
                at_most(
                    format!("nodes[{i}].gpu.count"),
                    gpu.count as u64,
                    MAX_GPUS_PER_NODE as u64,
                )?;
            }
        }
        for (pi, p) in self.projects.iter().enumerate() {
            for (pool, q) in &p.quotas {
                for (what, a) in [("reserved", &q.reserved), ("max", &q.max)] {
                    if let Some(g) = a.gpu {
                        within(
                            format!("projects[{pi}].quotas.{pool}.{what}.gpu"),
                            g,
                            0.0,
                            MAX_QUOTA_GPUS,
                        )?;
                    }
                }
            }
            for (ri, r) in p.requests.iter().enumerate() {
                if r.gpus == 0 {
                    return Err(berr(
                        format!("projects[{pi}].requests[{ri}].gpus"),
                        "must be at least 1",
                    ));
                }
                at_most(
                    format!("projects[{pi}].requests[{ri}].gpus"),
                    r.gpus as u64,
                    MAX_QUOTA_GPUS as u64,
                )?;
            }
        }
        for (i, g) in self.workload.generators.iter().enumerate() {
            let f = |s: &str| format!("workload.generators[{i}].{s}");
            if !(g.rate_per_hour > 0.0 && g.rate_per_hour <= MAX_RATE_PER_HOUR) {
                return Err(berr(
                    f("rate_per_hour"),
                    format!(
                        "{} must be above 0 and at most the limit of {MAX_RATE_PER_HOUR}",
                        g.rate_per_hour
                    ),
                ));
            }
            within(f("oom_probability"), g.oom_probability, 0.0, 1.0)?;
            for (k, sh) in g.shapes.iter().enumerate() {
                at_most(
                    format!("workload.generators[{i}].shapes[{k}].gpu"),
                    sh.gpu as u64,
                    MAX_GPUS_PER_NODE as u64,
                )?;
                at_most(
                    format!("workload.generators[{i}].shapes[{k}].weight"),
                    sh.weight as u64,
                    1_000_000,
                )?;
            }
            if g.shapes.iter().map(|s| s.weight as u64).sum::<u64>() == 0 && !g.shapes.is_empty() {
                return Err(berr(
                    f("shapes"),
                    "at least one shape needs a weight above 0",
                ));
            }
        }
        for (i, j) in self.workload.jobs.iter().enumerate() {
            if let Some(t) = &j.traffic {
                let f = |s: &str| format!("workload.jobs[{i}].traffic.{s}");
                within(f("base"), t.base, 0.0, 1.0)?;
                within(f("peak"), t.peak, 0.0, 1.0)?;
                within(f("peak_hour"), t.peak_hour, 0.0, 24.0)?;
            }
        }
        for (i, fs) in self.faults.iter().enumerate() {
            if let Some(d) = &fs.disk_fill {
                at_most(
                    format!("faults[{i}].disk_fill.percent"),
                    d.percent as u64,
                    100,
                )?;
            }
        }
        if let Some(rf) = &self.random_faults {
            if rf.every.0 == 0 {
                return Err(berr("random_faults.every", "must be at least 1s"));
            }
            if rf.kinds.is_empty() {
                return Err(berr(
                    "random_faults.kinds",
                    "name at least one kind of fault",
                ));
            }
        }
        for (i, c) in self.commands.iter().enumerate() {
            if matches!(c.run, Command::Submit(_)) {
                return Err(berr(
                    format!("commands[{i}].run"),
                    "submit is not a scripted command; put the job under workload.jobs",
                ));
            }
        }
        Ok(())
    }

    /// Builds the initial cluster (nodes, pools, projects) and checks every reference.
    pub fn build(&self) -> Result<Cluster, BuildError> {
        self.check_limits()?;
        let mut c = Cluster::new(SchedConfig {
            aging_s: self.scheduler.aging.0.max(1),
            backfill: self.scheduler.backfill,
            preemption: self.scheduler.preemption,
            pending_alert_s: self.scheduler.pending_alert.0,
            placement: self.scheduler.placement,
            speeds: self
                .speeds
                .iter()
                .map(|(k, v)| (k.to_lowercase(), *v))
                .collect(),
            ..SchedConfig::default()
        });
        c.prices = self
            .prices
            .iter()
            .map(|(k, v)| (k.to_lowercase(), *v))
            .collect();
        for (i, p) in self.pools.iter().enumerate() {
            if c.pool_id(&p.name).is_some() {
                return Err(berr(
                    format!("pools[{i}].name"),
                    format!("duplicate pool `{}`", p.name),
                ));
            }
            for (what, v) in [("cpu", p.overcommit.cpu), ("memory", p.overcommit.memory)] {
                if !(1.0..=4.0).contains(&v) {
                    return Err(berr(
                        format!("pools[{i}].overcommit.{what}"),
                        format!("{v} must be within 1.0..=4.0"),
                    ));
                }
            }
            c.add_pool(Pool {
                name: p.name.clone(),
                kind: p.kind,
                selector: p.selector.clone(),
                overcommit: Overcommit {
                    cpu: p.overcommit.cpu,
                    memory: p.overcommit.memory,
                },
                lend_to: Vec::new(),
            });
        }
        for (i, p) in self.pools.iter().enumerate() {
            for (k, t) in p.lend_to.iter().enumerate() {
                let id = c.pool_id(t).ok_or_else(|| {
                    berr(
                        format!("pools[{i}].lend_to[{k}]"),
                        format!("no pool named `{t}`"),
                    )
                })?;
                c.pools[i].lend_to.push(id);
            }
        }
        for (gi, g) in self.nodes.iter().enumerate() {
            for name in group_names(g) {
                if c.node_id(&name).is_ok() {
                    return Err(berr(
                        format!("nodes[{gi}].name"),
                        format!("duplicate node `{name}`"),
                    ));
                }
                let mut labels = g.labels.clone();
                if let Some(r) = &g.role {
                    labels.insert(LABEL_ROLE.into(), r.clone());
                }
                let mut gpus = Vec::new();
                if let Some(gs) = &g.gpu {
                    let model = gs.model.to_lowercase();
                    // The hardware's labels, unless the group writes its own (as an
                    // operator may have, wrongly: the mismatch alert's story).
                    if g.gpu_labels {
                        for (k, v) in [
                            (LABEL_VENDOR, gs.vendor.clone()),
                            (LABEL_MODEL, model.clone()),
                            (
                                LABEL_MEMORY,
                                maar_scheduler::quantity::fmt_bytes(gs.memory.0),
                            ),
                            (LABEL_COUNT, gs.count.to_string()),
                        ] {
                            labels.entry(k.into()).or_insert(v);
                        }
                    }
                    for (&idx, _) in gs.unhealthy.iter() {
                        if idx >= gs.count {
                            return Err(berr(
                                format!("nodes[{gi}].gpu.unhealthy"),
                                format!("GPU {idx} does not exist (count {})", gs.count),
                            ));
                        }
                    }
                    for idx in 0..gs.count {
                        let mut gpu = Gpu::new(
                            idx,
                            format!("GPU-{name}-{idx}"),
                            model.clone(),
                            gs.memory.0,
                            gs.mig,
                        );
                        if let Some(w) = gs.unhealthy.get(&idx) {
                            gpu.health = Health::Unhealthy(w.clone());
                        }
                        gpus.push(gpu);
                    }
                }
                let mut node = Node::new(name, labels, g.cpu.0, g.memory.0, g.disk.0, gpus);
                node.condition = match &g.not_ready {
                    Some(w) => Condition::NotReady(w.clone()),
                    None => Condition::Ready,
                };
                node.cordoned = g.cordoned;
                c.add_node(node);
            }
        }
        for (pi, p) in self.projects.iter().enumerate() {
            if c.project_id(&p.name).is_some() {
                return Err(berr(
                    format!("projects[{pi}].name"),
                    format!("duplicate project `{}`", p.name),
                ));
            }
            let mut quotas = BTreeMap::new();
            for (pool, q) in &p.quotas {
                let id = c.pool_id(pool).ok_or_else(|| {
                    berr(
                        format!("projects[{pi}].quotas.{pool}"),
                        format!("no pool named `{pool}`"),
                    )
                })?;
                let quota = q
                    .to_quota()
                    .map_err(|m| berr(format!("projects[{pi}].quotas.{pool}"), m))?;
                quotas.insert(id, quota);
            }
            c.add_project(Project {
                name: p.name.clone(),
                department: if p.department.is_empty() {
                    "-".into()
                } else {
                    p.department.clone()
                },
                quotas,
            });
        }
        for (i, tj) in self.workload.jobs.iter().enumerate() {
            let spec = tj.manifest.to_job_spec().map_err(|e| {
                berr(
                    format!("workload.jobs[{i}].manifest.{}", e.field),
                    e.message,
                )
            })?;
            // A job for a project or pool that does not exist could never run.
            if c.project_id(&spec.project).is_none() {
                return Err(berr(
                    format!("workload.jobs[{i}].manifest.metadata.namespace"),
                    format!(
                        "no project named `{}` (projects: {})",
                        spec.project,
                        self.projects
                            .iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            if c.pool_id(&spec.pool).is_none() {
                return Err(berr(
                    format!("workload.jobs[{i}].manifest.spec.resources.pool"),
                    format!("no pool named `{}`", spec.pool),
                ));
            }
        }
        for (i, g) in self.workload.generators.iter().enumerate() {
            let f = |s: &str| format!("workload.generators[{i}].{s}");
            if c.pool_id(&g.pool).is_none() {
                return Err(berr(f("pool"), format!("no pool named `{}`", g.pool)));
            }
            if c.project_id(&g.project).is_none() {
                return Err(berr(
                    f("project"),
                    format!("no project named `{}`", g.project),
                ));
            }
            if g.shapes.is_empty() {
                return Err(berr(f("shapes"), "needs at least one shape"));
            }
            if g.runtime.min.0 > g.runtime.max.0 || g.runtime.max.0 == 0 {
                return Err(berr(f("runtime"), "needs 0 < min <= max"));
            }
            if !(g.rate_per_hour > 0.0 && g.rate_per_hour.is_finite()) {
                return Err(berr(f("rate_per_hour"), "must be positive"));
            }
            if !(0.0..=1.0).contains(&g.oom_probability) {
                return Err(berr(f("oom_probability"), "must be within 0..=1"));
            }
        }
        for (i, fs) in self.faults.iter().enumerate() {
            let set = [
                fs.gpu_unhealthy.is_some(),
                fs.node_not_ready.is_some(),
                fs.oom.is_some(),
                fs.disk_fill.is_some(),
            ];
            if set.iter().filter(|b| **b).count() != 1 {
                return Err(berr(
                    format!("faults[{i}]"),
                    "give exactly one of gpu_unhealthy, node_not_ready, oom, disk_fill",
                ));
            }
            let node = fs
                .gpu_unhealthy
                .as_ref()
                .map(|g| g.node.as_str())
                .or(fs.node_not_ready.as_ref().map(|n| n.node.as_str()))
                .or(fs.disk_fill.as_ref().map(|d| d.node.as_str()));
            if let Some(n) = node {
                let id = c
                    .node_id(n)
                    .map_err(|e| berr(format!("faults[{i}]"), e.to_string()))?;
                if let Some(g) = &fs.gpu_unhealthy {
                    if g.gpu as usize >= c.nodes[id as usize].gpus.len() {
                        return Err(berr(
                            format!("faults[{i}].gpu_unhealthy.gpu"),
                            format!("node {n} has no GPU {}", g.gpu),
                        ));
                    }
                }
            }
        }
        Ok(c)
    }
}
