//! The first scheduling cycle of the Kubernetes bench's workload B (docs/kube.md,
//! BENCHMARKS.md): 1,000 nodes of 8 A100s in ten zones, 5,000 one-GPU pods read
//! through the manifests' own `Pod`, a third of them with a rule in turn: a
//! toleration, required node affinity for three zones, or a topology spread over the
//! zones (maxSkew 5) with the other spread pods. Everything placed in one cycle, as a
//! maar that starts on a cluster of pending pods does. Figures: BENCHMARKS.md.

use std::collections::BTreeMap;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use maar_scheduler::manifest::Pod;
use maar_scheduler::*;

const NODES: usize = 1000;
const PODS: usize = 5000;

fn node(i: usize) -> Node {
    let name = format!("gpu-node-{i}");
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("topology.kubernetes.io/zone", &format!("z{}", i % 10)),
        (LABEL_ROLE, "gpu"),
        (LABEL_MODEL, "A100"),
        (LABEL_COUNT, "8"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let cards = (0..8)
        .map(|g| Gpu::new(g, format!("{name}/{g}"), "A100", 80 << 30, false))
        .collect();
    Node::new(&name, labels, 64_000, 512 << 30, 1 << 40, cards)
}

/// Pod `i` of workload B, as the bench's script writes it.
fn pod(i: usize) -> JobSpec {
    let res = serde_json::json!({"nvidia.com/gpu": "1", "cpu": "100m", "memory": "128Mi"});
    let mut spec = serde_json::json!({
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": res, "limits": res}}],
    });
    let mut labels = serde_json::json!({"bench": "B"});
    let rule = i
        .is_multiple_of(3)
        .then(|| ["toleration", "affinity", "spread"][(i / 3) % 3]);
    match rule {
        Some("toleration") => {
            spec["tolerations"] = serde_json::json!([{"key": "dedicated", "operator": "Equal",
                "value": "team-a", "effect": "NoSchedule"}]);
        }
        Some("affinity") => {
            spec["affinity"] = serde_json::json!({"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone",
                        "operator": "In", "values": ["z1", "z2", "z3"]}]}]}}});
        }
        Some(_) => {
            labels["app"] = "spread".into();
            spec["topologySpreadConstraints"] = serde_json::json!([{
                "maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}}}]);
        }
        None => {}
    }
    if let Some(r) = rule {
        labels["rule"] = r.into();
    }
    let p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("a-{i:05}"), "namespace": "bench", "labels": labels,
            // The pool the Kubernetes driver fills in for a GPU pod.
            "annotations": {"crater.ai/pool": "gpu"}},
        "spec": spec,
    }))
    .expect("a pod of workload B");
    p.to_job_spec().expect("a job of workload B")
}

fn cluster() -> Cluster {
    let mut c = Cluster::new(SchedConfig::default());
    c.add_pool(Pool {
        name: "gpu".into(),
        kind: PoolKind::Training,
        selector: [(LABEL_ROLE.to_string(), "gpu".to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    for i in 0..NODES {
        c.add_node(node(i));
    }
    // A namespace seen: open (no limit) in the pool, as the Kubernetes driver adds it.
    c.add_project(Project {
        name: "bench".into(),
        department: String::new(),
        quotas: [(0, Quota::default())].into(),
    });
    c
}

fn workload_b(c: &mut Criterion) {
    let empty = cluster();
    let pods: Vec<JobSpec> = (0..PODS).map(pod).collect();
    // Every pod placed, or the bench measures something else.
    let mut once = empty.clone();
    for p in &pods {
        once.submit(p.clone()).expect("submitted");
    }
    once.schedule();
    let waiting = once.pending_jobs().count();
    assert_eq!(waiting, 0, "workload B places every pod in its first cycle");
    let mut g = c.benchmark_group("rules");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("workload_b_first_cycle", |b| {
        b.iter_batched(
            || {
                let mut c = empty.clone();
                for p in &pods {
                    c.submit(p.clone()).expect("submitted");
                }
                c
            },
            |mut c| c.schedule(),
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, workload_b);
criterion_main!(benches);
