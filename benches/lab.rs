//! A simulated 24 hours of the built-in demo/lab.yaml, headless. Figures: BENCHMARKS.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use maar::load::load_scenario;
use maar_demo::Demo;

fn lab_24h(c: &mut Criterion) {
    let sc = load_scenario(None).expect("built-in lab parses");
    let mut g = c.benchmark_group("sim");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    g.bench_function("lab_24h", |b| {
        b.iter(|| {
            let mut sim = Demo::new(sc.clone(), None).unwrap();
            sim.run_until(24 * 3600);
            sim.cluster().next_event_seq()
        })
    });
    g.finish();
}

criterion_group!(benches, lab_24h);
criterion_main!(benches);
