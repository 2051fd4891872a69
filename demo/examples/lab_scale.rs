//! The demo lab grown to N nodes (default 100,000, the documented limit), as a scenario
//! file: `cargo run --release -p maar-demo --example lab_scale -- 100000 > big.yaml`,
//! then `maar sim --scenario big.yaml --until 2h` (figures in BENCHMARKS.md).
//!
//! With a second argument, runs it for that many simulated seconds instead and prints
//! the wall time and a digest of every event and of the final state (the same digest
//! before and after a change to the core or the simulation means the same run):
//! `... --example lab_scale -- 100000 7200`.

use std::hash::{Hash, Hasher};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes = args
        .next()
        .map(|a| a.parse().expect("a number of nodes"))
        .unwrap_or(100_000);
    let yaml = maar_demo::synthetic::lab_at_scale(nodes);
    let Some(until) = args.next().map(|a| a.parse::<u64>().expect("seconds")) else {
        print!("{yaml}");
        return;
    };
    let t = Instant::now();
    let sc: maar_demo::Scenario = serde_saphyr::from_str(&yaml).expect("the scaled lab parses");
    let mut d = maar_demo::Demo::new(sc, None).expect("the scaled lab builds");
    let built = t.elapsed().as_secs_f64();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut events = 0u64;
    let mut step = 600;
    while d.now() < until {
        let to = (d.now() + step).min(until);
        d.sim.run_until_into(&mut d.core, to, &mut |ev| {
            for e in ev.iter() {
                events += 1;
                serde_json::to_string(e).unwrap().hash(&mut h);
            }
        });
        step = 600;
        eprintln!(
            "{:>6}s simulated, {:.1}s wall",
            d.now(),
            t.elapsed().as_secs_f64()
        );
    }
    let snap = d.cluster().snapshot();
    serde_json::to_string(&snap.metrics).unwrap().hash(&mut h);
    println!(
        "{nodes} nodes, {until}s: built in {built:.1}s, run in {:.1}s; {events} events, digest {:016x}",
        t.elapsed().as_secs_f64() - built,
        h.finish()
    );
}
