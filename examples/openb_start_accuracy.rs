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

use maar_scheduler::forecast::{Predictor, Reach};
use maar_scheduler::*;

struct Pod {
    spec: JobSpec,
    created: u64,
    runs_s: u64,
}

fn pods(path: &std::path::Path, speedup: f64) -> Vec<Pod> {
    let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let h = r.headers().expect("a header").clone();
    let col = |name: &str| {
        h.iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("{}: no column {name}", path.display()))
    };
    let (name, cpu, mem, ngpu, milli, spec, created, deleted, scheduled) = (
        col("name"),
        col("cpu_milli"),
        col("memory_mib"),
        col("num_gpu"),
        col("gpu_milli"),
        col("gpu_spec"),
        col("creation_time"),
        col("deletion_time"),
        col("scheduled_time"),
    );
    let mut out = Vec::new();
    for rec in r.records() {
        let rec = rec.expect("a row");
        let num = |i: usize| rec.get(i).unwrap_or("").parse::<u64>().unwrap_or(0);
        let count = num(ngpu) as u32;
        let m = num(milli) as u32;
        let shared = count == 1 && m > 0 && m < 1000;
        let models: Vec<String> = rec
            .get(spec)
            .unwrap_or("")
            .split('|')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let start = if rec.get(scheduled).unwrap_or("").is_empty() {
            num(created)
        } else {
            num(scheduled)
        };
        out.push(Pod {
            spec: JobSpec {
                name: rec.get(name).unwrap_or("").to_string(),
                project: "openb".into(),
                pool: "default".into(),
                kind: JobKind::Train,
                priority: PRIORITY_MEDIUM,
                replicas: 1,
                gpu: GpuRequest {
                    count,
                    memory_per_card: None,
                    models,
                    shared,
                    milli: shared.then_some(m),
                    vendor: None,
                    resource: None,
                },
                cpu_milli: num(cpu),
                memory: num(mem) << 20,
                disk: 0,
                affinity: Affinity::Any,
                restart: RestartPolicy::Never,
                est_runtime_s: None,
                image: String::new(),
                command: Vec::new(),
                node_selector: Default::default(),
                rules: Default::default(),
            },
            created: (num(created) as f64 / speedup) as u64,
            runs_s: num(deleted).saturating_sub(start).max(1),
        });
    }
    out
}

fn cluster(path: &std::path::Path, every: usize) -> Cluster {
    let mut c = Cluster::new(SchedConfig::default());
    c.add_pool(Pool {
        name: "default".into(),
        kind: PoolKind::Training,
        selector: [(LABEL_ROLE.to_string(), "default".to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    c.add_project(Project {
        name: "openb".into(),
        department: "alibaba".into(),
        quotas: [(0, Quota::default())].into(),
    });
    let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for rec in r.records().step_by(every) {
        let rec = rec.expect("a row");
        let (name, cpu, mem, gpus, model) = (
            rec.get(0).unwrap_or(""),
            rec.get(1).unwrap_or("0").parse::<u64>().unwrap_or(0),
            rec.get(2).unwrap_or("0").parse::<u64>().unwrap_or(0),
            rec.get(3).unwrap_or("0").parse::<u32>().unwrap_or(0),
            rec.get(4).unwrap_or(""),
        );
        let mut labels: BTreeMap<String, String> =
            [(LABEL_ROLE.to_string(), "default".to_string())].into();
        if gpus > 0 {
            labels.insert(LABEL_MODEL.to_string(), model.to_string());
            labels.insert(LABEL_COUNT.to_string(), gpus.to_string());
        }
        c.add_node(Node::new(
            name,
            labels,
            cpu,
            mem << 20,
            1 << 40,
            (0..gpus)
                .map(|g| Gpu::new(g, format!("{name}/{g}"), model, 32 << 30, false))
                .collect(),
        ));
    }
    c
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
    let mut c = cluster(&dir.join("openb_node_list_all_node.csv"), every.max(1));
    let mut all = pods(&dir.join("openb_pod_list_default.csv"), speedup);
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
    let mut n = 0usize;
    let mut hits = vec![0usize; predictors.len()];
    let mut given = vec![0usize; predictors.len()];
    for (&id, (asked, at)) in &seen {
        // (Every pod has one priority: nothing is preempted, nothing restarts.)
        let Some(&real) = first_start.get(&id) else {
            continue;
        };
        n += 1;
        let wait = real.saturating_sub(*asked);
        for (i, a) in at.iter().enumerate() {
            if let Some(a) = a {
                given[i] += 1;
                let err = a.abs_diff(real);
                if err <= 600 || (err as f64) <= 0.2 * wait as f64 {
                    hits[i] += 1;
                }
            }
        }
    }
    let started = first_start.len();
    println!("at most {max_pending} Pending and {max_running} running at once");
    println!(
        "openb default trace, arrivals x{speedup}, every {every}th node ({} nodes): {} pods submitted, {started} started; {n} Pending at their first minute that later started ({:.1}s)",
        c.nodes.len(),
        next,
        wall.elapsed().as_secs_f64()
    );
    println!("| predictor | estimate given | within 20% or 10 min |");
    println!("|---|---|---|");
    for (i, (name, _)) in predictors.iter().enumerate() {
        println!(
            "| {name} | {} of {n} | {} of {n} ({:.0}%) |",
            given[i],
            hits[i],
            100.0 * hits[i] as f64 / n.max(1) as f64
        );
    }
}
