//! Scheduler core benchmarks. Figures and commands: BENCHMARKS.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use maar_demo::synthetic;

/// One scheduling cycle over 50,000 pending single-GPU jobs on 5,000 nodes with 8
/// mixed GPUs each (40,000 GPUs: 40,000 jobs placed, 10,000 left Pending with a reason).
fn placements(c: &mut Criterion) {
    let mut base = synthetic::cluster(5_000, 8);
    synthetic::submit_single_gpu_jobs(&mut base, 50_000, 1);
    let mut g = c.benchmark_group("schedule");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(50_000));
    g.bench_function("5000_nodes_50000_jobs", |b| {
        b.iter_batched(
            || base.clone(),
            |mut c| c.schedule(),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// Explaining one Pending job on a full 5,000-node cluster.
fn explain(c: &mut Criterion) {
    let mut cl = synthetic::cluster(5_000, 8);
    synthetic::submit_single_gpu_jobs(&mut cl, 50_000, 1);
    cl.schedule();
    let pending = cl.pending_jobs().next().expect("some job stays pending").id;
    c.bench_function("explain/5000_nodes", |b| b.iter(|| cl.explain(pending)));
    // The same job at high priority: the explanation searches for preemption victims.
    let mut hi = cl.clone();
    let name = hi.job_ref(pending).trim_start_matches("job/").to_string();
    hi.apply(maar_scheduler::Command::SetPriority {
        job: name,
        priority: 100,
    })
    .unwrap();
    assert_eq!(hi.explain(pending).phase, "Pending");
    c.bench_function("explain/5000_nodes_high_priority", |b| {
        b.iter(|| hi.explain(pending))
    });
    c.bench_function("headline/5000_nodes", |b| {
        b.iter(|| cl.headline(pending, 1))
    });
}

criterion_group!(benches, placements, explain);
criterion_main!(benches);
