//! Large synthetic clusters and queues for benchmarks and memory measurements.
//! Deterministic: the same sizes and seed build the same cluster.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use maar_scheduler::model::*;
use maar_scheduler::{Cluster, SchedConfig};

const MODELS: [(&str, u64); 5] = [
    ("a100", 80),
    ("h100", 80),
    ("v100", 16),
    ("t4", 16),
    ("rtx4090", 24),
];

/// `nodes` nodes with `gpus` GPUs each (models mixed round-robin), one pool, ten
/// projects with unlimited quota.
pub fn cluster(nodes: usize, gpus: u32) -> Cluster {
    let mut c = Cluster::new(SchedConfig::default());
    c.add_pool(Pool {
        name: "training-gpu".into(),
        kind: PoolKind::Training,
        selector: BTreeMap::new(),
        overcommit: Overcommit {
            cpu: 1.5,
            memory: 1.2,
        },
        lend_to: Vec::new(),
    });
    for i in 0..nodes {
        let (model, mem) = MODELS[i % MODELS.len()];
        let name = format!("node-{i:05}");
        let mut labels = BTreeMap::new();
        labels.insert(LABEL_ROLE.to_string(), "training".to_string());
        labels.insert(LABEL_MODEL.to_string(), model.to_string());
        labels.insert(LABEL_COUNT.to_string(), gpus.to_string());
        let gpus = (0..gpus)
            .map(|g| Gpu::new(g, format!("GPU-{i:05}-{g}"), model, mem << 30, false))
            .collect();
        c.add_node(Node::new(name, labels, 128_000, 1 << 40, 4 << 40, gpus));
    }
    for p in 0..10 {
        let mut quotas = BTreeMap::new();
        quotas.insert(0, Quota::default());
        c.add_project(Project {
            name: format!("project-{p}"),
            department: format!("dept-{}", p % 3),
            quotas,
        });
    }
    c
}

/// Submits `n` single-GPU jobs, a quarter of them restricted to one model.
pub fn submit_single_gpu_jobs(c: &mut Cluster, n: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for i in 0..n {
        let models = if rng.gen_ratio(1, 4) {
            vec![MODELS[rng.gen_range(0..MODELS.len())].0.to_string()]
        } else {
            Vec::new()
        };
        let spec = JobSpec {
            name: format!("job-{i:06}"),
            project: format!("project-{}", i % 10),
            pool: "training-gpu".into(),
            kind: JobKind::Train,
            priority: [PRIORITY_LOW, PRIORITY_MEDIUM, PRIORITY_HIGH][rng.gen_range(0..3)],
            replicas: 1,
            gpu: GpuRequest {
                count: 1,
                memory_per_card: None,
                models,
                shared: false,
                milli: None,
                vendor: None,
                resource: None,
            },
            cpu_milli: 8000,
            memory: 32 << 30,
            disk: 0,
            affinity: Affinity::Any,
            restart: RestartPolicy::Never,
            est_runtime_s: Some(rng.gen_range(600..36_000)),
            image: String::new(),
            command: Vec::new(),
            node_selector: Default::default(),
            rules: Default::default(),
            dispatched: None,
            sent_start_in: None,
            moved_from: None,
            cluster: None,
            manifest: None,
        };
        c.submit(spec).expect("unique names");
    }
}

/// The demo lab (`demo/lab.yaml`) grown to `nodes` nodes (at least the lab's 42): every
/// node group, the generators' arrival rates and backlogs, the quotas and the quota
/// request scaled by the same factor (so the cluster is about as busy as the lab), and
/// random faults as often per node (at most one a second). The YAML text of a scenario,
/// for `maar sim --scenario` and the benchmarks.
pub fn lab_at_scale(nodes: u32) -> String {
    const LAB_NODES: u64 = 42;
    let nodes = (nodes as u64).max(LAB_NODES);
    let scale = |n: u64| (n * nodes / LAB_NODES).max(1);
    let num = |s: &str| -> u64 { s.trim().parse().expect("a whole number in lab.yaml") };
    // Node groups: scaled counts; the first group takes what rounding left over.
    let groups: Vec<u64> = crate::LAB_YAML
        .lines()
        .filter(|l| l.starts_with("  - {name: "))
        .filter_map(|l| l.split_once(", count: "))
        .map(|(_, rest)| num(rest.split(',').next().unwrap_or_default()))
        .collect();
    let mut counts: Vec<u64> = groups.iter().map(|&c| scale(c)).collect();
    let short = nodes - counts.iter().sum::<u64>();
    counts[0] += short;
    // Node names take three digits from 100 nodes in a group on (the first group is
    // the a100s the scripted fault names).
    let a100_03 = if counts[0] >= 100 {
        "a100-003"
    } else {
        "a100-03"
    };
    let mut counts = counts.into_iter();
    let every = (7 * 60 * LAB_NODES / nodes).max(1);
    let mut out = String::new();
    for line in crate::LAB_YAML.lines() {
        let mut l = line.to_string();
        let group = l.starts_with("  - {name: ");
        if let Some((head, rest)) = l.split_once(", count: ").filter(|_| group) {
            let (_, tail) = rest.split_once(',').expect("count, role");
            let c = counts.next().expect("as many groups");
            l = format!("{head}, count: {c},{tail}");
        }
        for key in [
            "rate_per_hour: ",
            "max_pending: ",
            "gpu: ",
            "gpus: ",
            "cpu: ",
        ] {
            let mut done = String::new();
            let mut rest = l.as_str();
            while let Some(i) = rest.find(key) {
                let (before, after) = rest.split_at(i + key.len());
                done.push_str(before);
                let digits = after.chars().take_while(|c| c.is_ascii_digit()).count();
                // Quotas and requests (`gpu: 24}`) scale; what one node or job has does not.
                let quota = l.contains("reserved:")
                    || l.contains("max:")
                    || !matches!(key, "gpu: " | "cpu: ");
                if digits > 0 && quota && !after[digits..].starts_with('.') {
                    done.push_str(&scale(num(&after[..digits])).to_string());
                    rest = &after[digits..];
                } else {
                    rest = after;
                }
            }
            done.push_str(rest);
            l = done;
        }
        if l.trim_start().starts_with("every: ") {
            l = format!("  every: {every}s");
        }
        l = l.replace("node: a100-03,", &format!("node: {a100_03},"));
        if l.starts_with("name: lab") {
            l = format!("name: lab-{nodes}");
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}
