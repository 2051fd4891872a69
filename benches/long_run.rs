//! Long runs of the demo lab, headless: time per simulated day stays flat over 90
//! days, and memory with it (history is not kept in memory).
//!
//! `cargo bench --bench long_run`; figures in BENCHMARKS.md. Plain timing of one run.

use std::time::Instant;

use maar_demo::Demo;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let sc = maar::load::load_scenario(None).expect("the built-in lab");
    let mut d = Demo::new(sc, None).unwrap();
    let start = Instant::now();
    let mut per_day = Vec::new();
    for day in 1..=90u64 {
        let t = Instant::now();
        d.run_until(day * 86_400);
        per_day.push(t.elapsed().as_secs_f64() * 1000.0);
        if day == 15 || day == 30 {
            println!("{day} days: {:.2} s in all", start.elapsed().as_secs_f64());
        }
        if day.is_multiple_of(30) {
            let m = d.cluster().metrics();
            println!(
                "day {day}: RSS {} MiB, {} jobs held, {} pending, {} events so far",
                rss_kib() / 1024,
                d.cluster().jobs.len(),
                m.jobs.pending,
                d.cluster().next_event_seq()
            );
        }
    }
    println!("ms per simulated day, mean of each ten days:");
    for (i, c) in per_day.chunks(10).enumerate() {
        let mean = c.iter().sum::<f64>() / c.len() as f64;
        println!(
            "  days {:>2}-{:>2}: {mean:.1} ms",
            i * 10 + 1,
            i * 10 + c.len()
        );
    }
    println!("90 days: {:.2} s", start.elapsed().as_secs_f64());
}
