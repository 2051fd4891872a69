//! How often a Pending job's estimated start comes true, over the demo day: at each
//! job's first minute Pending, its start is forecast with each predictor of running
//! jobs' ends (maar's: the job's own estimate, else the last two similar runs; the
//! last-two average alone, Tsafrir et al.; the users' estimates alone), and compared
//! with when it really started. A hit is a start within 20% of the wait, or within 10
//! minutes. `cargo run --release -p maar-demo --example start_accuracy -- [SEED] [HOURS] [BATCH_PCT]`
//! (figures in BENCHMARKS.md).

use std::collections::BTreeMap;

use maar_scheduler::forecast::{Predictor, Reach};
use maar_scheduler::Phase;

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: Option<u64> = args.next().map(|a| a.parse().expect("a seed"));
    let hours: u64 = args.next().map(|a| a.parse().expect("hours")).unwrap_or(24);
    // Ends batched within this share of the lead (percent), as `Reach::batch_pct`.
    let batch_pct: u64 = args
        .next()
        .map(|a| a.parse().expect("a batch share in percent"))
        .unwrap_or(Reach::default().batch_pct);
    let sc: maar_demo::Scenario = serde_saphyr::from_str(maar_demo::LAB_YAML).expect("the lab");
    let mut d = maar_demo::Demo::new(sc, seed).expect("the lab builds");
    let predictors = [
        (
            "maar (estimate, else last two)",
            Predictor::EstimateThenHistory,
        ),
        ("last-two average", Predictor::History),
        ("user estimates", Predictor::Estimate),
    ];
    // job -> (first seen Pending at, submitted, forecast per predictor)
    let mut seen: BTreeMap<u32, (u64, u64, Vec<Option<u64>>)> = BTreeMap::new();
    let end = hours * 3600;
    let mut t = 0;
    let started = std::time::Instant::now();
    while t < end {
        t += 60;
        d.run_until(t);
        let c = d.cluster();
        let fresh: Vec<u32> = c
            .jobs
            .iter()
            .filter(|j| j.phase == Phase::Pending && !seen.contains_key(&j.id))
            .map(|j| j.id)
            .collect();
        if fresh.is_empty() {
            continue;
        }
        let starts: Vec<_> = predictors
            .iter()
            .map(|(_, p)| {
                c.forecast(
                    Reach {
                        predictor: *p,
                        batch_pct,
                        ..Reach::default()
                    },
                    None,
                )
            })
            .collect();
        for id in fresh {
            let at: Vec<Option<u64>> = starts
                .iter()
                .map(|f| f.starts.get(&id).and_then(|s| s.at))
                .collect();
            seen.insert(id, (t, c.jobs[id as usize].submitted, at));
        }
    }
    let c = d.cluster();
    // Jobs that started by the end (their first start: `started` unless restarted).
    let mut acc = maar_scheduler::forecast::Accuracy::new(predictors.len());
    for (&id, (asked, _submitted, at)) in &seen {
        let Some(j) = c.jobs.get(id) else { continue };
        let Some(real) = j.started else { continue };
        if j.restarts > 0 || j.evicted.is_some() {
            continue;
        }
        acc.add(*asked, real, at);
    }
    println!(
        "demo day, seed {}, {hours}h: {} jobs Pending at their first minute that later started ({:.1}s)",
        d.seed(),
        acc.jobs,
        started.elapsed().as_secs_f64()
    );
    let names: Vec<&str> = predictors.iter().map(|p| p.0).collect();
    print!("{}", acc.table(&names));
}
