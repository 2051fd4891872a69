//! Rendering one scrape of an 8-GPU node. Figures: BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, Criterion};
use maar_agent::NodeSample;

fn scrape(c: &mut Criterion) {
    let samples: Vec<NodeSample> =
        serde_json::from_str(include_str!("../tests/fixtures/nvml-8xh100.json")).unwrap();
    let s = &samples[0];
    c.bench_function("scrape/8_gpus", |b| {
        b.iter(|| maar_agent::metrics::render(s, &[]).len())
    });
}

criterion_group!(benches, scrape);
criterion_main!(benches);
