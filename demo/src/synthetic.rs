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
        };
        c.submit(spec).expect("unique names");
    }
}
