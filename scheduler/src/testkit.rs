//! Small clusters the core's unit tests start from.

use crate::cluster::{Cluster, SchedConfig};
use crate::model::*;

/// A cluster of one training pool "train" (nodes labelled for it join it), no projects.
pub(crate) fn train_pool_cluster() -> Cluster {
    let mut c = Cluster::new(SchedConfig::default());
    c.add_pool(Pool {
        name: "train".into(),
        kind: PoolKind::Training,
        selector: [(LABEL_ROLE.to_string(), "train".to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    c
}

/// A cluster of one training pool "train" and one project "p" without limits.
pub(crate) fn train_cluster() -> Cluster {
    let mut c = train_pool_cluster();
    c.add_project(Project {
        name: "p".into(),
        department: "d".into(),
        quotas: [(0, Quota::default())].into(),
    });
    c
}

/// Adds a node of the "train" pool with `gpus` cards of `model` (64 cores).
pub(crate) fn add_train_node(c: &mut Cluster, name: &str, model: &str, gpus: u32) {
    add_train_node_with_cpu(c, name, model, gpus, 64_000);
}

/// As [`add_train_node`], with `cpu_milli` of CPU.
pub(crate) fn add_train_node_with_cpu(
    c: &mut Cluster,
    name: &str,
    model: &str,
    gpus: u32,
    cpu_milli: u64,
) {
    let count = gpus.to_string();
    let labels = [
        (LABEL_ROLE, "train"),
        (LABEL_MODEL, model),
        (LABEL_COUNT, &count),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    c.add_node(Node::new(
        name,
        labels,
        cpu_milli,
        512 << 30,
        1 << 40,
        (0..gpus)
            .map(|g| Gpu::new(g, format!("{name}/{g}"), model, 80 << 30, false))
            .collect(),
    ));
}

/// A small deterministic random source (xorshift64) for randomised tests: each call
/// gives a number below `n`.
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}
