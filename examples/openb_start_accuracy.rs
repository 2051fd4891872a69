//! How often a Pending job's estimated start comes true on Alibaba's openb trace
//! replayed in time: its pods arrive at their creation times (divided by `SPEEDUP`, to
//! load the cluster as the FGD paper does with its arrival rates) on the trace's nodes
//! and run for as long as they ran in the trace (deletion less scheduled time). At each
//! pod's first minute Pending its start is forecast with each predictor of running
//! pods' ends: maar's (the pod's own estimate, else the last two runs of its kind),
//! the last-two average alone (Tsafrir et al.), and users' estimates alone (the trace
//! has none: that predictor never gives a time). The predictors see only pods that
//! have ended: a kind is project, image, command and shape, and the trace's pods are
//! one project with no image, so a kind is a shape (CPU, memory, GPUs, share, models).
//! A hit is a start within 20% of the wait, or within 10 minutes.
//!
//! The trace fits its cluster (the FGD paper's 100% arrival is every pod at once): in
//! time, almost no pod waits, so the cluster can be cut to every `EVERY`-th node.
//!
//! `cargo run --release --example openb_start_accuracy -- [OPENB_DIR] [SPEEDUP] [EVERY] [HOURS]`
//! (OPENB_DIR defaults to `$MAAR_OPENB`, else `../shared/data/openb`); figures in
//! BENCHMARKS.md.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::PathBuf;

use maar::trace::{read_nodes, read_pod_times, read_pods};
use maar_scheduler::forecast::{Accuracy, Predictor, Reach};
use maar_scheduler::replay::{trace_cluster, trace_spec};
use maar_scheduler::*;

struct Pod {
    spec: JobSpec,
    created: u64,
    runs_s: u64,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .or_else(|| std::env::var("MAAR_OPENB").ok())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data/openb"));
    let speedup: f64 = args
        .next()
        .map(|a| a.parse().expect("a speed-up"))
        .unwrap_or(1.0);
    let every: usize = args
        .next()
        .map(|a| a.parse().expect("a node step"))
        .unwrap_or(1);
    let hours: Option<u64> = args.next().map(|a| a.parse().expect("hours"));
    let fail = |e: maar::load::InputError| -> ! {
        eprintln!("{e}");
        std::process::exit(2)
    };
    let nodes = read_nodes(&dir.join("openb_node_list_all_node.csv")).unwrap_or_else(|e| fail(e));
    let nodes: Vec<_> = nodes.into_iter().step_by(every.max(1)).collect();
    let mut c = trace_cluster(&nodes, SchedConfig::default());
    let list = dir.join("openb_pod_list_default.csv");
    let times = read_pod_times(&list).unwrap_or_else(|e| fail(e));
    let mut all: Vec<Pod> = read_pods(&list)
        .unwrap_or_else(|e| fail(e))
        .iter()
        .zip(times)
        .map(|(p, t)| Pod {
            spec: trace_spec(p, p.name.clone()),
            created: (t.created as f64 / speedup) as u64,
            runs_s: t.deleted.saturating_sub(t.scheduled).max(1),
        })
        .collect();
    all.sort_by_key(|p| p.created);
    let end = hours.map(|h| h * 3600).unwrap_or(u64::MAX);
    let predictors = [
        (
            "maar (estimate, else last two)",
            Predictor::EstimateThenHistory,
        ),
        ("last-two average", Predictor::History),
        ("user estimates", Predictor::Estimate),
    ];
    // Ends to come: (time, job, its start epoch).
    let mut ends: BinaryHeap<Reverse<(u64, JobId, u32)>> = BinaryHeap::new();
    let mut runs: BTreeMap<JobId, u64> = BTreeMap::new();
    // job -> (first forecast at, forecast per predictor)
    let mut seen: BTreeMap<JobId, (u64, Vec<Option<u64>>)> = BTreeMap::new();
    let mut first_start: BTreeMap<JobId, u64> = BTreeMap::new();
    let (mut max_pending, mut max_running) = (0usize, 0usize);
    let mut next = 0usize;
    let mut last_look = 0u64;
    let wall = std::time::Instant::now();
    loop {
        let arrive = all.get(next).map(|p| p.created);
        let ending = ends.peek().map(|e| e.0 .0);
        if arrive.is_none() && ending.is_none() {
            break;
        }
        // Pods that became Pending are looked at within their first minute.
        let look = last_look + 60;
        let fresh_waiting = c.pending_jobs().any(|j| !seen.contains_key(&j.id));
        let t = [arrive, ending, fresh_waiting.then_some(look)]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = t.filter(|&t| t <= end) else {
            break;
        };
        c.set_time(t);
        while all.get(next).is_some_and(|p| p.created <= t) {
            let p = &all[next];
            match c.submit(p.spec.clone()) {
                Ok(id) => {
                    runs.insert(id, p.runs_s);
                }
                Err(e) => eprintln!("{}: not submitted: {e}", p.spec.name),
            }
            next += 1;
        }
        while let Some(&Reverse((e, id, epoch))) = ends.peek() {
            if e > t {
                break;
            }
            ends.pop();
            let j = &c.jobs[id as usize];
            if j.phase == Phase::Running && j.epoch == epoch {
                c.complete(id, true, "ended as in the trace");
            }
        }
        for id in c.schedule().started {
            let j = &c.jobs[id as usize];
            ends.push(Reverse((t + runs[&id], id, j.epoch)));
            // (Ended jobs leave the core's books after a while: their first start is
            // kept here.)
            first_start.entry(id).or_insert(t);
        }
        max_pending = max_pending.max(c.pending_jobs().count());
        max_running = max_running.max(ends.len());
        if t >= look {
            last_look = t;
            let fresh: Vec<JobId> = c
                .pending_jobs()
                .filter(|j| !seen.contains_key(&j.id))
                .map(|j| j.id)
                .collect();
            if !fresh.is_empty() {
                let starts: Vec<_> = predictors
                    .iter()
                    .map(|(_, p)| {
                        c.forecast(
                            Reach {
                                predictor: *p,
                                ..Reach::default()
                            },
                            None,
                        )
                    })
                    .collect();
                for id in fresh {
                    let at = starts
                        .iter()
                        .map(|f| f.starts.get(&id).and_then(|s| s.at))
                        .collect();
                    seen.insert(id, (t, at));
                }
            }
        }
    }
    let mut acc = Accuracy::new(predictors.len());
    for (&id, (asked, at)) in &seen {
        // (Every pod has one priority: nothing is preempted, nothing restarts.)
        if let Some(&real) = first_start.get(&id) {
            acc.add(*asked, real, at);
        }
    }
    let started = first_start.len();
    println!("at most {max_pending} Pending and {max_running} running at once");
    println!(
        "openb default trace, arrivals x{speedup}, every {every}th node ({} nodes): {} pods submitted, {started} started; {} Pending at their first minute that later started ({:.1}s)",
        c.nodes.len(),
        next,
        acc.jobs,
        wall.elapsed().as_secs_f64()
    );
    let names: Vec<&str> = predictors.iter().map(|p| p.0).collect();
    print!("{}", acc.table(&names));
}
