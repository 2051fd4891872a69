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

/// What-if previews: a drain of the busiest node on the demo lab at 2h, and on a full
/// 5,000-node cluster with 50,000 jobs (the copy, the command, the cycles after it and
/// the comparison).
fn what_if(c: &mut Criterion) {
    use maar_scheduler::whatif::what_if;
    use maar_scheduler::{Actor, Command, Core};
    let busiest = |cl: &maar_scheduler::Cluster| {
        cl.nodes
            .iter()
            .max_by_key(|n| n.gpus.iter().filter(|g| !g.allocs.is_empty()).count())
            .map(|n| n.name.clone())
            .unwrap()
    };
    let lab: maar_demo::Scenario = serde_saphyr::from_str(maar_demo::LAB_YAML).unwrap();
    let mut d = maar_demo::Demo::new(lab, None).unwrap();
    d.run_until(2 * 3600);
    let node = busiest(d.cluster());
    let mut g = c.benchmark_group("what_if");
    g.sample_size(10);
    g.bench_function("drain/demo", |b| {
        b.iter(|| {
            what_if(
                &d.core,
                &d.sim,
                Actor::system("bench"),
                Command::DrainNode { node: node.clone() },
            )
        })
    });
    let mut cl = synthetic::cluster(5_000, 8);
    synthetic::submit_single_gpu_jobs(&mut cl, 50_000, 1);
    cl.schedule();
    let node = busiest(&cl);
    let core = Core::new(cl);
    g.measurement_time(Duration::from_secs(30));
    g.bench_function("drain/5000_nodes_50000_jobs", |b| {
        b.iter(|| {
            what_if(
                &core,
                &maar_scheduler::kit::Bare,
                Actor::system("bench"),
                Command::DrainNode { node: node.clone() },
            )
        })
    });
    g.finish();
}

/// Explaining every Pending job of the demo lab at 9h, with its fixes proven on copies
/// (the lab is small enough for every proof).
fn explain_proven(c: &mut Criterion) {
    let lab: maar_demo::Scenario = serde_saphyr::from_str(maar_demo::LAB_YAML).unwrap();
    let mut d = maar_demo::Demo::new(lab, None).unwrap();
    d.run_until(9 * 3600);
    let pending: Vec<_> = d.cluster().pending_jobs().map(|j| j.id).collect();
    assert!(!pending.is_empty());
    let n = pending.len();
    c.bench_function(&format!("explain/lab_9h_all_{n}_pending_proven"), |b| {
        b.iter(|| {
            pending
                .iter()
                .map(|&id| d.cluster().explain(id).suggestions.len())
                .sum::<usize>()
        })
    });
}

/// Explaining on 5,000 nodes where a fix exists (cordoned nodes that would take the
/// job): the fixes are proven on the job's path (the cluster is over `proof_nodes`),
/// for the first job in the queue and for the last (every job ahead asked).
fn explain_path_proven(c: &mut Criterion) {
    let mut cl = synthetic::cluster(5_000, 8);
    for n in 0..4 {
        let name = cl.nodes[n * 1000].name.clone();
        cl.apply(maar_scheduler::Command::CordonNode { node: name })
            .unwrap();
    }
    synthetic::submit_single_gpu_jobs(&mut cl, 50_000, 1);
    cl.schedule();
    let queue = cl.queue();
    let first = queue.first().expect("a queue").0;
    let last = queue.last().expect("a queue").0;
    let ex = cl.explain(first);
    assert!(
        ex.suggestions
            .iter()
            .any(|s| s.starts_with("uncordoning node") && s.ends_with("would start it now")),
        "{:?}",
        ex.suggestions
    );
    c.bench_function("explain/5000_nodes_uncordon_proven_first_in_queue", |b| {
        b.iter(|| cl.explain(first))
    });
    c.bench_function("explain/5000_nodes_uncordon_last_in_queue", |b| {
        b.iter(|| cl.explain(last))
    });
}

/// Ten simulated minutes of the demo lab grown to 100,000 nodes (the documented limit;
/// `synthetic::lab_at_scale`), from its state at one hour: arrivals, ends, faults,
/// telemetry ticks and a cycle each second. A step's cost should follow what changes,
/// not the number of nodes (issue #22: the whole two hours, BENCHMARKS.md).
fn lab_100k(c: &mut Criterion) {
    let yaml = synthetic::lab_at_scale(100_000);
    let sc: maar_demo::Scenario = serde_saphyr::from_str(&yaml).unwrap();
    let mut d = maar_demo::Demo::new(sc, None).unwrap();
    d.run_until(3600);
    let mut g = c.benchmark_group("sim");
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    g.bench_function("lab_100000_nodes_10min_at_1h", |b| {
        b.iter_batched(
            || (d.core.clone(), d.sim.clone()),
            |(mut core, mut sim)| {
                let mut n = 0;
                sim.run_until_into(&mut core, 3600 + 600, &mut |ev| n += ev.len());
                n
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// Start-time estimates for every Pending job at once: 10,000 Pending single-GPU jobs
/// behind 40,000 running ones (each with an estimated runtime) on 5,000 nodes.
fn forecast(c: &mut Criterion) {
    let mut cl = synthetic::cluster(5_000, 8);
    synthetic::submit_single_gpu_jobs(&mut cl, 50_000, 1);
    cl.schedule();
    let f = cl.forecast(maar_scheduler::forecast::Reach::default(), None);
    let known = f.starts.values().filter(|s| s.at.is_some()).count();
    eprintln!(
        "forecast: {} Pending, {known} with a start, {} steps",
        f.starts.len(),
        f.steps
    );
    let mut g = c.benchmark_group("forecast");
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    g.bench_function("5000_nodes_10000_pending", |b| {
        b.iter(|| cl.forecast(maar_scheduler::forecast::Reach::default(), None))
    });
    g.finish();
}

/// One cycle over 5,000 single-GPU pods written as Kubernetes holds them, on 1,000
/// nodes of 8 GPUs in zones z1-z3 (every 10th tainted `dedicated=team-a:NoSchedule`):
/// a third of the pods carry one rule each in turn (a toleration for the taint, a
/// required node affinity to zones z1-z2, a zone spread of skew 1), as workload B of
/// the Kubernetes runs (BENCHMARKS.md) with `--split`.
fn pod_rules(c: &mut Criterion) {
    use maar_scheduler::rules::{Taint, TaintEffect};
    use maar_scheduler::*;
    let mut base = Cluster::new(SchedConfig::default());
    base.add_pool(Pool {
        name: "train".into(),
        kind: PoolKind::Training,
        selector: [(LABEL_ROLE.to_string(), "train".to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    for i in 0..1_000 {
        let name = format!("gpu-node-{i}");
        let labels = [
            (LABEL_ROLE.to_string(), "train".to_string()),
            (LABEL_MODEL.to_string(), "a100".to_string()),
            (LABEL_COUNT.to_string(), "8".to_string()),
            (
                "topology.kubernetes.io/zone".to_string(),
                format!("z{}", i % 3 + 1),
            ),
            ("kubernetes.io/hostname".to_string(), name.clone()),
        ]
        .into();
        let cards = (0..8)
            .map(|g| Gpu::new(g, format!("{name}/{g}"), "a100", 80 << 30, false))
            .collect();
        let mut n = Node::new(name, labels, 64_000, 512 << 30, 1 << 40, cards);
        if i % 10 == 0 {
            n.taints.push(Taint {
                key: "dedicated".into(),
                value: "team-a".into(),
                effect: TaintEffect::NoSchedule,
            });
        }
        base.add_node(n);
    }
    base.add_project(Project {
        name: "bench".into(),
        department: "d".into(),
        quotas: [(0, Quota::default())].into(),
    });
    for i in 0..5_000 {
        let rule = match (i % 3 == 0).then_some((i / 3) % 3) {
            Some(0) => serde_json::json!({"tolerations": [{
                "key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}]}),
            Some(1) => serde_json::json!({"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                    "matchExpressions": [{"key": "topology.kubernetes.io/zone",
                        "operator": "In", "values": ["z1", "z2"]}]}]}}}}),
            Some(_) => serde_json::json!({"topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}}}]}),
            None => serde_json::json!({}),
        };
        let mut spec = serde_json::json!({"containers": [{"name": "main", "image": "img",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]});
        for (k, v) in rule.as_object().cloned().unwrap_or_default() {
            spec[k] = v;
        }
        let spread = i % 3 == 0 && (i / 3) % 3 == 2;
        let pod: maar_scheduler::manifest::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("p{i}"), "namespace": "bench",
                "labels": if spread { serde_json::json!({"app": "spread"}) } else { serde_json::json!({}) },
                "annotations": {"crater.ai/pool": "train"}},
            "spec": spec,
        }))
        .expect("a pod");
        base.submit(pod.to_job_spec().expect("a job"))
            .expect("submitted");
    }
    let mut g = c.benchmark_group("rules");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(5_000));
    g.bench_function("1000_nodes_5000_pods_b_split", |b| {
        b.iter_batched(
            || base.clone(),
            |mut c| {
                // Cycles until every pod is placed (a spread pod may wait a cycle for
                // the others of its cycle).
                let mut cycles = 0;
                while c.pending_jobs().next().is_some() {
                    c.schedule();
                    cycles += 1;
                    assert!(cycles <= 20, "every pod placed within 20 cycles");
                }
                c
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// Where a job goes among 3 clusters of 5,000 nodes x 8 GPUs (`dispatch::choose` over
/// each cluster's `Core::prospect`): with room and nothing waiting (the same search
/// as the cycle's, no copy), with room (20,000 running jobs each, bound, some jobs waiting
/// for one model's cards: a copy and a cycle per cluster), and full (40,000 running and 10,000
/// Pending each, the job waits: the copy's forecast until it starts).
fn dispatch(c: &mut Criterion) {
    use maar_scheduler::dispatch::{choose, Prospect};
    let sites = |jobs: usize| -> Vec<(String, maar_scheduler::Core)> {
        (0..3)
            .map(|i| {
                let mut cl = synthetic::cluster(5_000, 8);
                synthetic::submit_single_gpu_jobs(&mut cl, jobs, i + 1);
                // Scheduled and bound, as a running cluster's jobs are (a driver confirms
                // each bind within a second).
                let mut core = maar_scheduler::Core::new(cl);
                maar_scheduler::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
                (format!("site-{i}"), core)
            })
            .collect()
    };
    let spec = maar_scheduler::JobSpec::train("probe", "project-1", "training-gpu", 1);
    let run = |sites: &[(String, maar_scheduler::Core)]| {
        let ps: Vec<(String, Result<Prospect, String>)> = sites
            .iter()
            .map(|(n, core)| (n.clone(), core.prospect(&spec)))
            .collect();
        choose(&ps)
    };
    // As `maar`'s federation asks (`federation::prospects`): every cluster at once,
    // each by its own thread that owns it (its engine's), then the choice.
    type Ask = (
        maar_scheduler::JobSpec,
        std::sync::mpsc::Sender<Result<Prospect, String>>,
    );
    let engines = |sites: Vec<(String, maar_scheduler::Core)>| {
        sites
            .into_iter()
            .map(|(n, core)| {
                let (tx, rx) = std::sync::mpsc::channel::<Ask>();
                std::thread::spawn(move || {
                    for (spec, reply) in rx {
                        let _ = reply.send(core.prospect(&spec));
                    }
                });
                (n, tx)
            })
            .collect::<Vec<_>>()
    };
    let at_once = |engines: &[(String, std::sync::mpsc::Sender<Ask>)]| {
        let asked: Vec<_> = engines
            .iter()
            .map(|(n, tx)| {
                let (reply, answer) = std::sync::mpsc::channel();
                tx.send((spec.clone(), reply)).expect("an engine");
                (n.clone(), answer)
            })
            .collect();
        let ps: Vec<(String, Result<Prospect, String>)> = asked
            .into_iter()
            .map(|(n, a)| (n, a.recv().expect("an answer")))
            .collect();
        choose(&ps)
    };
    let mut g = c.benchmark_group("dispatch");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    // Nothing waiting (the jobs the first cycle could not place withdrawn): each
    // cluster answers without a copy.
    let mut idle = sites(20_000);
    for (_, core) in &mut idle {
        let mut cl = core.cluster().clone();
        let waiting: Vec<u32> = cl.pending_jobs().map(|j| j.id).collect();
        for id in waiting {
            cl.complete(id, false, "withdrawn for the bench");
        }
        *core = maar_scheduler::Core::new(cl);
    }
    eprintln!(
        "dispatch, room, nothing waiting: {}",
        run(&idle).expect("a site").why
    );
    g.bench_function("3x5000_nodes_starts_now_nothing_waits", |b| {
        b.iter(|| run(&idle))
    });
    drop(idle);
    let roomy = sites(20_000);
    eprintln!("dispatch, room: {}", run(&roomy).expect("a site").why);
    g.bench_function("3x5000_nodes_starts_now", |b| b.iter(|| run(&roomy)));
    let serial = run(&roomy);
    let roomy = engines(roomy);
    assert_eq!(serial, at_once(&roomy), "asked at once, the same choice");
    g.bench_function("3x5000_nodes_starts_now_asked_at_once", |b| {
        b.iter(|| at_once(&roomy))
    });
    drop(roomy);
    let full = sites(50_000);
    eprintln!("dispatch, full: {}", run(&full).expect("a site").why);
    g.bench_function("3x5000_nodes_waits", |b| b.iter(|| run(&full)));
    let full = engines(full);
    g.bench_function("3x5000_nodes_waits_asked_at_once", |b| {
        b.iter(|| at_once(&full))
    });
    g.finish();
}

criterion_group!(
    benches,
    dispatch,
    forecast,
    pod_rules,
    placements,
    explain,
    what_if,
    explain_proven,
    explain_path_proven,
    lab_100k
);
criterion_main!(benches);
