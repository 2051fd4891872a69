//! `--metrics` at 5,000 nodes and 50,000 jobs: what a scrape costs (encoding the
//! families) and what each published view adds to the engine (setting the gauges from
//! it). Figures: BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, Criterion};

use maar::observe::Observe;
use maar_demo::synthetic;

fn metrics(c: &mut Criterion) {
    let mut cl = synthetic::cluster(5_000, 8);
    synthetic::submit_single_gpu_jobs(&mut cl, 50_000, 1);
    cl.schedule();
    let snapshot = cl.snapshot();
    let o = Observe::new();
    o.view(&snapshot, true);
    eprintln!(
        "metrics: {} jobs, {} nodes, a scrape of {} bytes",
        snapshot.jobs.len(),
        snapshot.nodes.len(),
        o.encode().len()
    );
    c.bench_function("metrics/scrape_5000_nodes_50000_jobs", |b| {
        b.iter(|| o.encode())
    });
    c.bench_function("metrics/view_5000_nodes_50000_jobs", |b| {
        b.iter(|| o.view(&snapshot, true))
    });
}

criterion_group!(benches, metrics);
criterion_main!(benches);
