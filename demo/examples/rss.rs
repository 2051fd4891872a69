//! Peak memory of 10,000 nodes (8 GPUs each) and 100,000 jobs, scheduled once.
//! `cargo run --release -p maar-demo --example rss`; figures in BENCHMARKS.md.

use std::time::Instant;

use maar_demo::synthetic;

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let t = Instant::now();
    let mut c = synthetic::cluster(10_000, 8);
    synthetic::submit_single_gpu_jobs(&mut c, 100_000, 1);
    let report = c.schedule();
    println!(
        "10000 nodes, 100000 jobs: {} started, {} pending, {} events in {:.2}s",
        report.started.len(),
        c.pending_jobs().count(),
        c.next_event_seq(),
        t.elapsed().as_secs_f64()
    );
    println!(
        "VmRSS {} MiB, VmHWM (peak) {} MiB",
        rss_kib("VmRSS:") / 1024,
        rss_kib("VmHWM:") / 1024
    );
}
