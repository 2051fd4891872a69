//! Per-pod placement cost of the trace replay (FGD and maar score every distinct node
//! state). Needs ../shared/data/openb; figures: BENCHMARKS.md.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use maar::trace::{read_nodes, read_pods};
use maar_scheduler::replay::{typical_shapes, Policy, Replayer, ShapeWeight};

fn per_pod(c: &mut Criterion) {
    let dir = "../shared/data/openb";
    let (Ok(nodes), Ok(pods)) = (
        read_nodes(Path::new(&format!("{dir}/openb_node_list_gpu_node.csv"))),
        read_pods(Path::new(&format!("{dir}/openb_pod_list_default.csv"))),
    ) else {
        eprintln!("skipping: the openb trace is not at {dir}");
        return;
    };
    let shapes = typical_shapes(&pods, ShapeWeight::Pods, true);
    let mut g = c.benchmark_group("replay");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(pods.len() as u64));
    for policy in [Policy::Fgd, Policy::Maar, Policy::BestFit] {
        g.bench_function(format!("place_8152_pods/{}", policy.name()), |b| {
            b.iter(|| {
                let mut r = Replayer::new(&nodes, shapes.clone(), policy, 42);
                pods.iter().filter(|p| r.place(p).is_some()).count()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, per_pod);
criterion_main!(benches);
