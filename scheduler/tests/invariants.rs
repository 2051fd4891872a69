//! Property tests: random clusters, random jobs, random faults and random operator
//! commands; after every step the core's invariants must hold.

use std::collections::{BTreeMap, BTreeSet};

use maar_scheduler::*;
use proptest::prelude::*;

const MODELS: [&str; 3] = ["a100", "v100", "t4"];

#[derive(Clone, Debug)]
struct NodeSpec {
    gpus: u32,
    model: usize,
    mem_gi: u64,
    mig: bool,
    cpu: u64,
    pool: usize,
    labelled: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Submit {
        project: usize,
        pool: usize,
        gpus: u32,
        mem_gi: Option<u64>,
        model: Option<usize>,
        shared: bool,
        cpu: u64,
        prio: i32,
        replicas: u32,
        affinity: u8,
        inference: bool,
        restart: bool,
    },
    Advance(u64),
    GpuFault {
        node: usize,
        gpu: u32,
        healthy: bool,
    },
    NodeFault {
        node: usize,
        ready: bool,
    },
    Finish {
        job: usize,
        ok: bool,
    },
    Oom {
        job: usize,
    },
    CordonGpu {
        node: usize,
        gpu: u32,
        on: bool,
    },
    CordonNode {
        node: usize,
        on: bool,
    },
    Drain {
        node: usize,
    },
    Requeue {
        job: usize,
    },
    Cancel {
        job: usize,
    },
    Priority {
        job: usize,
        prio: i32,
    },
    Scale {
        job: usize,
        replicas: u32,
    },
    RequestAndApprove {
        project: usize,
        pool: usize,
        gpus: u32,
    },
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        0u32..=8,
        0usize..3,
        prop_oneof![Just(16u64), Just(40), Just(80)],
        any::<bool>(),
        8u64..=64,
        0usize..2,
        prop::bool::weighted(0.9),
    )
        .prop_map(|(gpus, model, mem_gi, mig, cpu, pool, labelled)| NodeSpec {
            gpus,
            model,
            mem_gi,
            mig,
            cpu,
            pool,
            labelled,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..3, 0usize..2, 0u32..=4, prop::option::of(prop_oneof![Just(8u64), Just(20), Just(40), Just(90)]), prop::option::of(0usize..3), prop::bool::weighted(0.25), 1u64..=32, prop_oneof![Just(10), Just(50), Just(100)], 1u32..=3, 0u8..3, prop::bool::weighted(0.2), any::<bool>())
            .prop_map(|(project, pool, gpus, mem_gi, model, shared, cpu, prio, replicas, affinity, inference, restart)| Op::Submit { project, pool, gpus, mem_gi, model, shared, cpu, prio, replicas, affinity, inference, restart }),
        2 => (1u64..3600).prop_map(Op::Advance),
        1 => (0usize..8, 0u32..8, any::<bool>()).prop_map(|(node, gpu, healthy)| Op::GpuFault { node, gpu, healthy }),
        1 => (0usize..8, any::<bool>()).prop_map(|(node, ready)| Op::NodeFault { node, ready }),
        2 => (0usize..40, any::<bool>()).prop_map(|(job, ok)| Op::Finish { job, ok }),
        1 => (0usize..40).prop_map(|job| Op::Oom { job }),
        1 => (0usize..8, 0u32..8, any::<bool>()).prop_map(|(node, gpu, on)| Op::CordonGpu { node, gpu, on }),
        1 => (0usize..8, any::<bool>()).prop_map(|(node, on)| Op::CordonNode { node, on }),
        1 => (0usize..8).prop_map(|node| Op::Drain { node }),
        1 => (0usize..40).prop_map(|job| Op::Requeue { job }),
        1 => (0usize..40).prop_map(|job| Op::Cancel { job }),
        1 => (0usize..40, prop_oneof![Just(10), Just(50), Just(100), Just(200)]).prop_map(|(job, prio)| Op::Priority { job, prio }),
        1 => (0usize..40, 1u32..=4).prop_map(|(job, replicas)| Op::Scale { job, replicas }),
        1 => (0usize..3, 0usize..2, 1u32..=4).prop_map(|(project, pool, gpus)| Op::RequestAndApprove { project, pool, gpus }),
    ]
}

fn build(nodes: &[NodeSpec], quotas: &[(u32, u32, u32, u32)], lend: bool) -> Cluster {
    // Aging fast enough that waiting jobs overtake others within a few operations.
    let mut c = Cluster::new(SchedConfig {
        aging_s: 120,
        ..SchedConfig::default()
    });
    let mut sel = BTreeMap::new();
    sel.insert(LABEL_ROLE.to_string(), "train".to_string());
    c.add_pool(Pool {
        name: "train".into(),
        kind: PoolKind::Training,
        selector: sel,
        overcommit: Overcommit {
            cpu: 1.5,
            memory: 1.2,
        },
        lend_to: vec![],
    });
    let mut sel = BTreeMap::new();
    sel.insert(LABEL_ROLE.to_string(), "infer".to_string());
    c.add_pool(Pool {
        name: "infer".into(),
        kind: PoolKind::Inference,
        selector: sel,
        overcommit: Overcommit::default(),
        lend_to: if lend { vec![0] } else { vec![] },
    });
    for (i, n) in nodes.iter().enumerate() {
        let mut labels = BTreeMap::new();
        labels.insert(
            LABEL_ROLE.to_string(),
            if n.pool == 0 { "train" } else { "infer" }.to_string(),
        );
        if n.labelled && n.gpus > 0 {
            labels.insert(LABEL_MODEL.to_string(), MODELS[n.model].to_string());
            labels.insert(LABEL_COUNT.to_string(), n.gpus.to_string());
        }
        let gpus = (0..n.gpus)
            .map(|g| {
                Gpu::new(
                    g,
                    format!("g{i}-{g}"),
                    MODELS[n.model],
                    n.mem_gi << 30,
                    n.mig,
                )
            })
            .collect();
        c.add_node(Node::new(
            format!("n{i}"),
            labels,
            n.cpu * 1000,
            n.cpu << 33,
            1 << 40,
            gpus,
        ));
    }
    for (p, &(r0, m0, r1, m1)) in quotas.iter().enumerate() {
        let mut q = BTreeMap::new();
        q.insert(
            0u16,
            Quota {
                reserved: Resources {
                    gpu_milli: r0 as u64 * 1000,
                    ..Default::default()
                },
                max: Limits {
                    gpu_milli: Some((r0 + m0) as u64 * 1000),
                    ..Default::default()
                },
            },
        );
        q.insert(
            1u16,
            Quota {
                reserved: Resources {
                    gpu_milli: r1 as u64 * 1000,
                    ..Default::default()
                },
                max: Limits {
                    gpu_milli: Some((r1 + m1) as u64 * 1000),
                    ..Default::default()
                },
            },
        );
        c.add_project(Project {
            name: format!("p{p}"),
            department: "d".into(),
            quotas: q,
        });
    }
    c
}

fn apply(c: &mut Cluster, op: &Op, serial: &mut u32) {
    let jobs = c.jobs.len();
    let nodes = c.nodes.len();
    let name = |c: &Cluster, j: usize| c.job_ref(j as u32).trim_start_matches("job/").to_string();
    match op.clone() {
        Op::Submit {
            project,
            pool,
            gpus,
            mem_gi,
            model,
            shared,
            cpu,
            prio,
            replicas,
            affinity,
            inference,
            restart,
        } => {
            *serial += 1;
            let kind = if inference {
                JobKind::Inference(Autoscale {
                    min: 1,
                    max: 4,
                    target_pct: 70,
                    window_s: 300,
                })
            } else {
                JobKind::Train
            };
            let spec = JobSpec {
                name: format!("j{serial}"),
                project: format!("p{project}"),
                pool: ["train", "infer"][pool].into(),
                kind,
                priority: prio,
                replicas,
                gpu: GpuRequest {
                    count: gpus,
                    memory_per_card: if gpus > 0 {
                        mem_gi.map(|m| m << 30)
                    } else {
                        None
                    },
                    models: model
                        .map(|m| vec![MODELS[m].to_string()])
                        .unwrap_or_default(),
                    shared: shared && gpus > 0,
                    milli: None,
                    vendor: None,
                    resource: None,
                },
                cpu_milli: cpu * 1000,
                memory: cpu << 30,
                disk: 10 << 30,
                affinity: [Affinity::Any, Affinity::SameNode, Affinity::Spread][affinity as usize],
                restart: if restart {
                    RestartPolicy::OnFailure {
                        max_restarts: 2,
                        backoff_s: 10,
                    }
                } else {
                    RestartPolicy::Never
                },
                est_runtime_s: Some(600),
                image: String::new(),
                command: Vec::new(),
                node_selector: Default::default(),
                rules: Default::default(),
                dispatched: None,
                sent_start_in: None,
                moved_from: None,
                cluster: None,
                manifest: None,
            };
            c.submit(spec).unwrap();
        }
        Op::Advance(dt) => {
            let t = c.now + dt;
            c.set_time(t);
        }
        Op::GpuFault { node, gpu, healthy }
            if node < nodes && (gpu as usize) < c.nodes[node].gpus.len() =>
        {
            c.set_gpu_health(
                node as u32,
                gpu,
                if healthy {
                    Health::Healthy
                } else {
                    Health::Unhealthy("XID 79".into())
                },
            );
        }
        Op::NodeFault { node, ready } if node < nodes => {
            c.set_node_condition(
                node as u32,
                if ready {
                    Condition::Ready
                } else {
                    Condition::NotReady("down".into())
                },
            );
        }
        Op::Finish { job, ok } if job < jobs && c.jobs[job].phase == Phase::Running => {
            c.complete(job as u32, ok, "done")
        }
        Op::Oom { job } if job < jobs => c.fail_running(job as u32, "OOMKilled", "oom".into()),
        Op::CordonGpu { node, gpu, on } if node < nodes => {
            let cmd = if on {
                Command::CordonGpu {
                    node: format!("n{node}"),
                    gpu,
                }
            } else {
                Command::UncordonGpu {
                    node: format!("n{node}"),
                    gpu,
                }
            };
            let _ = c.apply(cmd);
        }
        Op::CordonNode { node, on } if node < nodes => {
            let cmd = if on {
                Command::CordonNode {
                    node: format!("n{node}"),
                }
            } else {
                Command::UncordonNode {
                    node: format!("n{node}"),
                }
            };
            let _ = c.apply(cmd);
        }
        Op::Drain { node } if node < nodes => {
            let _ = c.apply(Command::DrainNode {
                node: format!("n{node}"),
            });
        }
        Op::Requeue { job } if job < jobs => {
            let _ = c.apply(Command::Requeue { job: name(c, job) });
        }
        Op::Cancel { job } if job < jobs => {
            let _ = c.apply(Command::Cancel {
                job: name(c, job),
                why: None,
            });
        }
        Op::Priority { job, prio } if job < jobs => {
            let _ = c.apply(Command::SetPriority {
                job: name(c, job),
                priority: prio,
            });
        }
        Op::Scale { job, replicas } if job < jobs => {
            let _ = c.apply(Command::Scale {
                job: name(c, job),
                replicas,
            });
        }
        Op::RequestAndApprove {
            project,
            pool,
            gpus,
        } => {
            let pool = ["train", "infer"][pool].to_string();
            if c.apply(Command::RequestQuota {
                project: format!("p{project}"),
                pool: pool.clone(),
                gpus,
                reserved: gpus % 2 == 0,
                reason: "more".into(),
            })
            .is_ok()
            {
                let id = c.quota_requests.last().unwrap().id;
                let pl = c.pool_id(&pool).unwrap();
                let reserved = |c: &Cluster| -> u64 {
                    c.projects
                        .iter()
                        .filter_map(|p| p.quotas.get(&pl))
                        .map(|q| q.reserved.gpu_milli)
                        .sum()
                };
                let before = reserved(c);
                match c.apply(Command::ApproveQuota { id }) {
                    // Reservations never promise more than the pool has, unless they
                    // already did before (a pool that lost nodes).
                    Ok(_) => assert!(
                        reserved(c) <= c.pool_capacity(pl).gpu_milli || reserved(c) == before,
                        "approved: {} GPUs reserved in a pool of {}",
                        reserved(c),
                        c.pool_capacity(pl).gpu_milli
                    ),
                    Err(e) => assert!(
                        gpus % 2 == 0 && e.to_string().contains("would reserve"),
                        "{e}"
                    ),
                }
            }
        }
        _ => {}
    }
}

fn check(c: &Cluster, started: &[(JobId, usize)]) -> Result<(), TestCaseError> {
    // Capacity: no node or GPU beyond its (overcommitted) capacity, bookkeeping exact.
    for (i, n) in c.nodes.iter().enumerate() {
        let oc = c.overcommit_of(n);
        prop_assert!(
            n.alloc_cpu <= (n.cpu_milli as f64 * oc.cpu) as u64,
            "cpu over on {}",
            n.name
        );
        prop_assert!(
            n.alloc_mem <= (n.memory as f64 * oc.memory) as u64,
            "memory over on {}",
            n.name
        );
        prop_assert!(n.alloc_disk <= n.disk);
        let (mut cpu, mut mem) = (0, 0);
        for j in &c.jobs {
            for p in j.placements.iter().filter(|p| p.node == i as u32) {
                cpu += p.cpu;
                mem += p.mem;
            }
        }
        prop_assert_eq!(cpu, n.alloc_cpu);
        prop_assert_eq!(mem, n.alloc_mem);
        for g in &n.gpus {
            prop_assert!(
                g.used_milli() <= 1000,
                "GPU {}/{} over: {}",
                n.name,
                g.index,
                g.used_milli()
            );
            prop_assert!(g.used_mem() <= g.memory);
            if !n.gpu_labelled() {
                prop_assert!(g.allocs.is_empty(), "unlabelled GPU allocated");
            }
        }
    }
    // A job is in one place: its slots are distinct, mirrored on the GPUs, and only
    // Running jobs hold anything.
    let mut seen = BTreeSet::new();
    for j in &c.jobs {
        if j.phase != Phase::Running {
            prop_assert!(
                j.placements.is_empty(),
                "{} is {:?} but holds resources",
                j.spec.name,
                j.phase
            );
        }
        for p in &j.placements {
            for s in &p.gpus {
                // Replicas of a shared job may take two slices of one card; a whole
                // card is held once.
                prop_assert!(
                    seen.insert((j.id, p.node, s.gpu)) || s.milli < 1000,
                    "job {} twice on one whole GPU",
                    j.spec.name
                );
                let g = &c.nodes[p.node as usize].gpus[s.gpu as usize];
                prop_assert!(g.allocs.iter().any(|a| a.job == j.id));
            }
        }
    }
    for n in &c.nodes {
        for g in &n.gpus {
            for a in &g.allocs {
                prop_assert!(
                    seen.contains(&(a.job, c.node_id(&n.name).unwrap(), g.index)),
                    "orphan allocation"
                );
            }
        }
    }
    // Quota: never above max; above reserved only by jobs marked as borrowing.
    for (pid, p) in c.projects.iter().enumerate() {
        for (&pool, q) in &p.quotas {
            let used = c.usage(pid as ProjectId, pool);
            for d in Dim::ALL {
                if let Some(m) = q.max.get(d) {
                    prop_assert!(
                        used.get(d) <= m,
                        "{} over max in pool {pool}: {} > {m}",
                        p.name,
                        used.get(d)
                    );
                }
            }
            let undeclared: u64 = c
                .jobs
                .iter()
                .filter(|j| {
                    j.project == Some(pid as ProjectId) && j.pool == Some(pool) && !j.borrowed
                })
                .map(|j| j.held().gpu_milli)
                .sum();
            prop_assert!(
                undeclared <= q.reserved.gpu_milli,
                "{} holds {undeclared} undeclared above reserved {}",
                p.name,
                q.reserved.gpu_milli
            );
        }
    }
    // Placed GPUs were healthy, uncordoned, on a Ready uncordoned node.
    for &(id, from) in started {
        for p in &c.jobs[id as usize].placements[from..] {
            let n = &c.nodes[p.node as usize];
            prop_assert!(n.ready() && !n.cordoned);
            for s in &p.gpus {
                prop_assert!(n.gpus[s.gpu as usize].usable(), "placed on an unusable GPU");
            }
        }
    }
    Ok(())
}

/// Runs `ops`; at op `restore_at` the cluster is replaced by one restored from its
/// checkpoint (which must hold everything: the run goes on exactly the same).
fn run(
    nodes: &[NodeSpec],
    quotas: &[(u32, u32, u32, u32)],
    lend: bool,
    ops: &[Op],
    restore_at: Option<usize>,
) -> Result<Vec<Event>, TestCaseError> {
    let mut c = build(nodes, quotas, lend);
    let mut serial = 0;
    for (i, op) in ops.iter().enumerate() {
        if restore_at == Some(i) {
            // Through its text, as the state file keeps it: each field left out for
            // holding its default reads back as it was.
            let cp: ClusterState = serde_json::from_str(&c.checkpoint_json(true))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&cp, &c.checkpoint(), "a checkpoint's text reads back whole");
            let r = Cluster::restore(cp.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&r.checkpoint(), &cp, "a checkpoint restores to itself");
            c = r;
        }
        apply(&mut c, op, &mut serial);
        check(&c, &[])?;
        let before: std::collections::BTreeMap<JobId, usize> =
            c.jobs.iter().map(|j| (j.id, j.placements.len())).collect();
        let report = c.schedule();
        // One notion of priority: a job the cycle places is never the one it evicts.
        for id in report.started.iter().chain(&report.scaled_up) {
            prop_assert!(
                !report.preempted.contains(id),
                "{} placed and evicted in one cycle",
                c.job_ref(*id)
            );
        }
        let started: Vec<(JobId, usize)> = report
            .started
            .iter()
            .map(|&j| (j, 0))
            .chain(report.scaled_up.iter().map(|&j| (j, before[&j])))
            .collect();
        check(&c, &started)?;
        // Explaining never panics and agrees with the phase.
        for j in c.jobs.iter().filter(|j| j.phase == Phase::Pending).take(3) {
            let ex = c.explain(j.id);
            prop_assert_eq!(ex.phase, "Pending");
            // The summarised per-node verdicts agree with the full filter.
            for mult in [1, 2] {
                for (n, v) in c.node_verdicts(&j.spec, j.pool, mult) {
                    let node = &c.nodes[n as usize];
                    let full =
                        maar_scheduler::fit::fit(node, n, c.overcommit_of(node), &j.spec, mult);
                    prop_assert_eq!(v.err(), full.err());
                }
            }
        }
    }
    Ok(c.events.iter().map(|e| Event::clone(e)).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_random_operations(
        nodes in prop::collection::vec(node_spec(), 1..7),
        quotas in prop::collection::vec((0u32..4, 0u32..8, 0u32..4, 0u32..8), 1..4),
        lend in any::<bool>(),
        ops in prop::collection::vec(op(), 1..60),
        cut in 0usize..60,
    ) {
        let a = run(&nodes, &quotas, lend, &ops, None)?;
        // Same inputs, same event log; also when the state is checkpointed and restored
        // part way.
        let b = run(&nodes, &quotas, lend, &ops, Some(cut % ops.len()))?;
        prop_assert_eq!(a, b);
    }
}
