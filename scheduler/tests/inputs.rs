//! The core's one door: typed inputs round-trip through JSON, decisions say what the
//! driver must do, and a placement stays assumed until the driver confirms it.

use std::collections::BTreeMap;

use maar_scheduler::input::{GpuReading, JobOutcome, NodeReading};
use maar_scheduler::*;
use proptest::prelude::*;

fn node(name: &str, gpus: u32) -> Node {
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_ROLE.to_string(), "train".to_string());
    labels.insert(LABEL_MODEL.to_string(), "a100".to_string());
    labels.insert(LABEL_COUNT.to_string(), gpus.to_string());
    Node::new(
        name,
        labels,
        64_000,
        512 << 30,
        2 << 40,
        (0..gpus)
            .map(|i| Gpu::new(i, format!("{name}-{i}"), "a100", 80 << 30, false))
            .collect(),
    )
}

fn core(nodes: &[(&str, u32)]) -> Core {
    let mut c = Cluster::new(SchedConfig::default());
    let mut sel = BTreeMap::new();
    sel.insert(LABEL_ROLE.to_string(), "train".to_string());
    c.add_pool(Pool {
        name: "train".into(),
        kind: PoolKind::Training,
        selector: sel,
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    for &(n, g) in nodes {
        c.add_node(node(n, g));
    }
    let mut q = BTreeMap::new();
    q.insert(0, Quota::default());
    c.add_project(Project {
        name: "ml".into(),
        department: "d".into(),
        quotas: q,
    });
    Core::new(c)
}

fn job(name: &str, gpus: u32) -> JobSpec {
    JobSpec {
        est_runtime_s: Some(600),
        ..JobSpec::train(name, "ml", "train", gpus)
    }
}

fn submit(c: &mut Core, spec: JobSpec) -> JobId {
    let out = c.apply(Input::Observe(Observation::JobSubmitted {
        spec: Box::new(spec),
    }));
    out.result.unwrap();
    out.job.unwrap()
}

/// A scheduling cycle whose binds the driver confirms.
fn cycle(c: &mut Core) -> Output {
    let out = c.apply(Input::Schedule);
    for d in &out.decisions {
        if let Decision::Bind { job, .. } = d {
            c.apply(Input::Observe(Observation::Bound { job: job.clone() }))
                .result
                .unwrap();
        }
    }
    out
}

fn actor() -> Actor {
    Actor {
        user: "alice".into(),
        uid: Some(1000),
        from: Some("203.0.113.7".into()),
    }
}

/// One of each input, with every field set.
fn samples() -> Vec<Input> {
    let mut spec = job("sample", 2);
    spec.gpu.models = vec!["a100".into()];
    spec.gpu.memory_per_card = Some(40 << 30);
    spec.kind = JobKind::Inference(Autoscale {
        min: 1,
        max: 4,
        target_pct: 70,
        window_s: 300,
    });
    spec.restart = RestartPolicy::OnFailure {
        max_restarts: 3,
        backoff_s: 10,
    };
    let mut n = node("x", 2);
    n.gpus[1].health = Health::Unhealthy("XID 79".into());
    n.condition = Condition::NotReady("KubeletNotReady".into());
    let cmds = vec![
        Command::Submit(Box::new(spec.clone())),
        Command::RequestQuota {
            project: "ml".into(),
            pool: "train".into(),
            gpus: 8,
            reserved: true,
            reason: "deadline".into(),
        },
        Command::ApproveQuota { id: 3 },
        Command::RejectQuota {
            id: 4,
            reason: "no".into(),
        },
        Command::SetPriority {
            job: "ml/a".into(),
            priority: -5,
        },
        Command::CordonGpu {
            node: "x".into(),
            gpu: 1,
        },
        Command::UncordonGpu {
            node: "x".into(),
            gpu: 1,
        },
        Command::CordonNode { node: "x".into() },
        Command::UncordonNode { node: "x".into() },
        Command::DrainNode { node: "x".into() },
        Command::Requeue { job: "a".into() },
        Command::Cancel {
            job: "a".into(),
            why: None,
        },
        Command::Scale {
            job: "a".into(),
            replicas: 3,
        },
        Command::ResumeAutoscale { job: "a".into() },
    ];
    let mut v: Vec<Input> = cmds
        .into_iter()
        .map(|command| Input::Command {
            actor: actor(),
            command,
        })
        .collect();
    let obs = vec![
        Observation::NodeJoined { node: Box::new(n) },
        Observation::NodeLabels {
            node: "x".into(),
            labels: [("a".to_string(), "b".to_string())].into(),
        },
        Observation::NodeCondition {
            node: "x".into(),
            ready: false,
            reason: "gone".into(),
            keeps_jobs: false,
        },
        Observation::GpuHealth {
            node: "x".into(),
            gpu: 0,
            healthy: false,
            reason: "XID 48".into(),
        },
        Observation::DiskUsage {
            node: "x".into(),
            bytes: 1 << 40,
        },
        Observation::Telemetry {
            nodes: vec![NodeReading {
                node: "x".into(),
                gpus: vec![GpuReading {
                    util_pct: 93,
                    mem_used: 7 << 30,
                    temp_c: 71,
                    power_w: 388,
                }],
                host: None,
            }],
        },
        Observation::JobSubmitted {
            spec: Box::new(spec),
        },
        Observation::JobEnded {
            job: "ml/a".into(),
            outcome: JobOutcome::Succeeded,
        },
        Observation::JobEnded {
            job: "ml/a".into(),
            outcome: JobOutcome::OomKilled {
                message: "oom".into(),
            },
        },
        Observation::JobEnded {
            job: "ml/a".into(),
            outcome: JobOutcome::Failed {
                message: "exit 1".into(),
            },
        },
        Observation::JobUsage {
            job: "ml/a".into(),
            used_pct: 80,
        },
        Observation::ServiceLoad {
            job: "ml/a".into(),
            usage_pct: 123.456789,
        },
        Observation::Bound { job: "ml/a".into() },
        Observation::BindFailed {
            job: "ml/a".into(),
            reason: "409 Conflict".into(),
        },
        Observation::Cordoned {
            node: "a".into(),
            gpu: Some(1),
            cordoned: true,
        },
        Observation::JobGone {
            job: "ml/a".into(),
            why: "its pod was deleted".into(),
        },
        Observation::JobPool {
            job: "ml/a".into(),
            pool: "p".into(),
        },
        Observation::QuotaAsked {
            project: "ml".into(),
            pool: "p".into(),
            gpus: 2,
            reserved: true,
            reason: "QuotaRequest ml/more".into(),
        },
        Observation::Note {
            severity: Severity::Warning,
            reason: "ScenarioRefused".into(),
            object: "cluster/scenario".into(),
            message: "m".into(),
        },
        Observation::NotSent {
            job: "ml/sample".into(),
            why: "its file asks for cluster west (crater.ai/cluster), which does not answer".into(),
        },
    ];
    v.extend(obs.into_iter().map(Input::Observe));
    v.push(Input::Advance { to: 86_400 });
    v.push(Input::Schedule);
    v
}

#[test]
fn every_input_round_trips_through_json() {
    for input in samples() {
        let text = serde_json::to_string(&input).unwrap();
        let back: Input = serde_json::from_str(&text).unwrap();
        assert_eq!(back, input, "{text}");
    }
}

#[test]
fn events_and_decisions_round_trip_through_json() {
    let mut c = core(&[("n1", 8), ("n2", 8)]);
    let mut events = Vec::new();
    let mut decisions = Vec::new();
    for i in 0..6 {
        submit(&mut c, job(&format!("j{i}"), 3));
    }
    let out = c.apply(Input::Schedule);
    events.extend(out.events);
    decisions.extend(out.decisions);
    let out = c.apply(Input::Command {
        actor: actor(),
        command: Command::DrainNode { node: "n1".into() },
    });
    events.extend(out.events);
    decisions.extend(out.decisions);
    assert!(events.len() > 5 && decisions.len() >= 4);
    for e in &events {
        let back: Event = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(&back, e);
    }
    for d in &decisions {
        let back: Decision = serde_json::from_str(&serde_json::to_string(d).unwrap()).unwrap();
        assert_eq!(&back, d);
    }
}

proptest! {
    #[test]
    fn arbitrary_texts_in_inputs_round_trip(
        user in ".*",
        from in proptest::option::of(".*"),
        node in ".*",
        reason in ".*",
        gpu in any::<u32>(),
        to in any::<u64>(),
        usage in 0.0f64..1e9,
    ) {
        let inputs = vec![
            Input::Command {
                actor: Actor { user, uid: Some(gpu), from },
                command: Command::CordonGpu { node: node.clone(), gpu },
            },
            Input::Observe(Observation::GpuHealth { node: node.clone(), gpu, healthy: false, reason: reason.clone() }),
            Input::Observe(Observation::ServiceLoad { job: node.clone(), usage_pct: usage }),
            Input::Observe(Observation::BindFailed { job: node, reason }),
            Input::Advance { to },
        ];
        for i in inputs {
            let back: Input = serde_json::from_str(&serde_json::to_string(&i).unwrap()).unwrap();
            prop_assert_eq!(back, i);
        }
    }
}

#[test]
fn a_cycle_decides_binds_and_a_drain_decides_stops() {
    let mut c = core(&[("n1", 4)]);
    let a = submit(&mut c, job("a", 2));
    let out = c.apply(Input::Schedule);
    assert_eq!(
        out.decisions,
        vec![Decision::Bind {
            id: a,
            job: "ml/a".into(),
            start: true,
            replicas: vec![Binding {
                node: "n1".into(),
                gpus: vec![0, 1]
            }],
        }]
    );
    assert!(out.events.iter().any(|e| e.reason == "Scheduled"));
    c.apply(Input::Observe(Observation::Bound { job: "ml/a".into() }))
        .result
        .unwrap();
    let out = c.apply(Input::Command {
        actor: actor(),
        command: Command::DrainNode { node: "n1".into() },
    });
    assert!(out.result.is_ok());
    assert!(matches!(
        &out.decisions[..],
        [Decision::Stop { job, replicas, reason, .. }]
            if job == "ml/a" && replicas[0].node == "n1" && reason.contains("drained")
    ));
}

#[test]
fn a_failed_bind_returns_the_job_to_the_queue_and_frees_its_cards() {
    let mut c = core(&[("n1", 4)]);
    let a = submit(&mut c, job("a", 4));
    c.apply(Input::Schedule);
    let j = &c.cluster().jobs[a as usize];
    assert_eq!(j.phase, Phase::Running);
    assert!(j.placements.iter().all(|p| !p.bound), "assumed until bound");
    assert_eq!(
        c.cluster().nodes[0].free_whole_gpus(),
        0,
        "assumed cards are held"
    );
    let out = c.apply(Input::Observe(Observation::BindFailed {
        job: "ml/a".into(),
        reason: "node n1 is gone (409)".into(),
    }));
    out.result.unwrap();
    let j = &c.cluster().jobs[a as usize];
    assert_eq!(j.phase, Phase::Pending);
    assert!(
        j.reason.contains("bind failed: node n1 is gone (409)"),
        "{}",
        j.reason
    );
    assert_eq!(c.cluster().nodes[0].free_whole_gpus(), 4);
    assert!(out.events.iter().any(|e| e.reason == "BindFailed"));
    assert!(matches!(&out.decisions[..], [Decision::Stop { .. }]));
    // The next cycle places it again; this time the bind is confirmed.
    let out = c.apply(Input::Schedule);
    assert!(matches!(
        &out.decisions[..],
        [Decision::Bind { start: true, .. }]
    ));
    c.apply(Input::Observe(Observation::Bound { job: "ml/a".into() }))
        .result
        .unwrap();
    assert!(c.cluster().jobs[a as usize].placements[0].bound);
    // A confirmed placement cannot fail to bind any more.
    assert!(c
        .apply(Input::Observe(Observation::BindFailed {
            job: "ml/a".into(),
            reason: "late".into()
        }))
        .result
        .is_err());
    assert_eq!(c.cluster().jobs[a as usize].phase, Phase::Running);
}

#[test]
fn an_unconfirmed_bind_times_out_on_the_clock() {
    let mut c = core(&[("n1", 4)]);
    let a = submit(&mut c, job("a", 1));
    c.apply(Input::Schedule);
    assert_eq!(c.cluster().jobs[a as usize].phase, Phase::Running);
    let limit = c.cluster().config.bind_timeout_s;
    c.apply(Input::Advance { to: limit });
    assert_eq!(
        c.cluster().jobs[a as usize].phase,
        Phase::Running,
        "not yet"
    );
    let out = c.apply(Input::Advance { to: limit + 1 });
    assert_eq!(c.cluster().jobs[a as usize].phase, Phase::Pending);
    assert!(out
        .events
        .iter()
        .any(|e| e.reason == "BindFailed" && e.message.contains("bind not confirmed within 30s")));
}

#[test]
fn refused_inputs_change_nothing_and_say_why() {
    let mut c = core(&[("n1", 4)]);
    let before = c.checkpoint();
    for i in [
        Input::Observe(Observation::GpuHealth {
            node: "n1".into(),
            gpu: 9,
            healthy: false,
            reason: "x".into(),
        }),
        Input::Observe(Observation::JobEnded {
            job: "ml/none".into(),
            outcome: JobOutcome::Succeeded,
        }),
        Input::Observe(Observation::ServiceLoad {
            job: "ml/none".into(),
            usage_pct: f64::NAN,
        }),
        Input::Command {
            actor: actor(),
            command: Command::CordonNode { node: "n9".into() },
        },
        Input::Command {
            actor: actor(),
            command: Command::Submit(Box::new(JobSpec {
                pool: "nowhere".into(),
                ..job("a", 1)
            })),
        },
        Input::Command {
            actor: actor(),
            command: Command::Submit(Box::new(JobSpec {
                project: "nobody".into(),
                ..job("a", 1)
            })),
        },
    ] {
        let out = c.apply(i.clone());
        assert!(out.result.is_err(), "{i:?}");
        assert!(out.events.is_empty() && out.decisions.is_empty(), "{i:?}");
    }
    assert_eq!(c.checkpoint(), before);
}

#[test]
fn a_waiting_job_moves_pool_only_when_no_node_of_its_pool_lets_it_on() {
    let mut c = core(&[("n1", 2), ("n2", 2)]);
    let observe = |c: &mut Core, o: Observation| c.apply(Input::Observe(o)).result;
    observe(
        &mut c,
        Observation::PoolSeen {
            pool: Box::new(Pool {
                name: "other".into(),
                kind: PoolKind::Training,
                selector: [(LABEL_ROLE.to_string(), "other".to_string())].into(),
                overcommit: Overcommit::default(),
                lend_to: vec![],
            }),
        },
    )
    .unwrap();
    // n2 takes the role `other` (and so leaves pool train) and the label `disk`.
    let n2 = c.cluster().node_id("n2").unwrap();
    let mut labels = c.cluster().nodes[n2 as usize].labels().clone();
    labels.insert(LABEL_ROLE.into(), "other".into());
    labels.insert("disk".into(), "nvme".into());
    observe(
        &mut c,
        Observation::NodeLabels {
            node: "n2".into(),
            labels,
        },
    )
    .unwrap();
    let mut stuck = job("stuck", 1);
    stuck.node_selector.insert("disk".into(), "nvme".into());
    let stuck = submit(&mut c, stuck);
    let free = submit(&mut c, job("free", 1));
    let pool_of = |c: &Core, id: JobId| c.cluster().jobs[id as usize].spec.pool.clone();
    let to_other = |job: &str| Observation::JobPool {
        job: job.into(),
        pool: "other".into(),
    };
    // A node of its pool lets `free` on: it stays.
    let e = observe(&mut c, to_other("ml/free"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a node there lets it on"), "{e}");
    assert_eq!(pool_of(&c, free), "train");
    cycle(&mut c);
    assert_eq!(c.cluster().jobs[free as usize].phase, Phase::Running);
    assert_eq!(c.cluster().jobs[stuck as usize].phase, Phase::Pending);
    // A running job stays where it runs.
    let e = observe(&mut c, to_other("ml/free"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not waiting"), "{e}");
    // No node of train lets `stuck` on: it moves, and runs on n2.
    assert!(observe(
        &mut c,
        Observation::JobPool {
            job: "ml/stuck".into(),
            pool: "nowhere".into(),
        },
    )
    .is_err());
    let out = c.apply(Input::Observe(to_other("ml/stuck")));
    out.result.unwrap();
    assert!(
        out.events
            .iter()
            .any(|e| e.reason == "PoolMoved" && e.message.contains("no node of pool train")),
        "{:?}",
        out.events
    );
    assert_eq!(pool_of(&c, stuck), "other");
    cycle(&mut c);
    let j = &c.cluster().jobs[stuck as usize];
    assert_eq!(j.phase, Phase::Running, "{}", j.reason);
    assert_eq!(j.placements[0].node, n2);

    // Nor to a pool where no node has the cards it asks for.
    let mut t4 = job("t4", 1);
    t4.node_selector.insert("disk".into(), "nvme".into());
    t4.gpu.models = vec!["t4".into()];
    let t4 = submit(&mut c, t4);
    assert_eq!(c.cluster().stranded(&[t4, free], None), vec![t4]);
    let e = observe(&mut c, to_other("ml/t4")).unwrap_err().to_string();
    assert!(e.contains("no node of pool other could run it"), "{e}");
    assert_eq!(pool_of(&c, t4), "train");

    // A cordon or NotReady (the node lifecycle's taints) strands nobody; a taint its
    // owners put does.
    let big = submit(&mut c, job("big", 2));
    assert!(c.cluster().stranded(&[big], None).is_empty());
    let n1 = c.cluster().node_id("n1").unwrap();
    let taint = |c: &mut Core, key: &str| {
        let mut n = c.cluster().nodes[n1 as usize].clone();
        n.taints = vec![maar_scheduler::rules::Taint {
            key: key.into(),
            value: String::new(),
            effect: maar_scheduler::rules::TaintEffect::NoSchedule,
        }];
        observe(c, Observation::NodeUpdated { node: Box::new(n) }).unwrap();
    };
    taint(&mut c, "node.kubernetes.io/unschedulable");
    assert!(c.cluster().stranded(&[big], None).is_empty());
    assert!(c.cluster().stranded(&[big], Some(0)).is_empty());
    taint(&mut c, "dedicated");
    assert_eq!(c.cluster().stranded(&[big], None), vec![big]);
    // Looked at only for a change to its own pool's nodes.
    let other = c.cluster().pool_id("other").unwrap();
    assert!(c.cluster().stranded(&[big], Some(other)).is_empty());
}

/// A cluster of one 8-card node and the service `ml/svc` (1 to 8 replicas of one card,
/// spread, `target` percent), started with `replicas`.
fn service(target: u32, replicas: u32) -> (Core, JobId) {
    let mut c = core(&[("n1", 8)]);
    let mut svc = job("svc", 1);
    svc.kind = JobKind::Inference(Autoscale {
        min: 1,
        max: 8,
        target_pct: target,
        window_s: 60,
    });
    svc.replicas = replicas;
    svc.affinity = Affinity::Spread;
    svc.est_runtime_s = None;
    let id = submit(&mut c, svc);
    cycle(&mut c);
    (c, id)
}

/// One reading of `ml/svc`'s load.
fn service_load(c: &mut Core, pct: f64) -> Output {
    c.apply(Input::Observe(Observation::ServiceLoad {
        job: "ml/svc".into(),
        usage_pct: pct,
    }))
}

#[test]
fn an_operator_scale_pauses_the_autoscaler_until_resumed() {
    let (mut c, id) = service(50, 2);
    // Operator: 6 replicas. The autoscaler (low load says 1) must not undo it.
    let out = c.apply(Input::Command {
        actor: actor(),
        command: Command::Scale {
            job: "ml/svc".into(),
            replicas: 6,
        },
    });
    assert!(out.result.unwrap().contains("autoscaler is paused"));
    assert!(out
        .events
        .iter()
        .any(|e| e.reason == "AutoscalerPaused" && e.message.contains("alice")));
    cycle(&mut c);
    for t in 1..10 {
        c.apply(Input::Advance { to: t * 30 });
        let out = service_load(&mut c, 5.0);
        assert!(out.events.is_empty(), "{:?}", out.events);
    }
    let j = &c.cluster().jobs[id as usize];
    assert_eq!(j.desired_replicas, 6);
    assert_eq!(j.autoscaler.paused_by.as_deref(), Some("alice"));
    assert_eq!(
        c.cluster().job_view(j).autoscaler_paused_by.as_deref(),
        Some("alice")
    );
    // Resumed: the autoscaler scales it down again (after its window).
    c.apply(Input::Command {
        actor: actor(),
        command: Command::ResumeAutoscale {
            job: "ml/svc".into(),
        },
    })
    .result
    .unwrap();
    for t in 10..20 {
        c.apply(Input::Advance { to: t * 30 });
        service_load(&mut c, 5.0);
        cycle(&mut c);
    }
    let j = &c.cluster().jobs[id as usize];
    assert_eq!((j.desired_replicas, j.running_replicas()), (1, 1));
}

#[test]
fn ended_jobs_beyond_the_retention_leave_memory_but_not_the_counts() {
    let mut c = {
        let mut cl = Cluster::new(SchedConfig {
            retain_ended: 5,
            event_window: 50,
            ..SchedConfig::default()
        });
        let mut sel = BTreeMap::new();
        sel.insert(LABEL_ROLE.to_string(), "train".to_string());
        cl.add_pool(Pool {
            name: "train".into(),
            kind: PoolKind::Training,
            selector: sel,
            overcommit: Overcommit::default(),
            lend_to: vec![],
        });
        cl.add_node(node("n1", 8));
        let mut q = BTreeMap::new();
        q.insert(0, Quota::default());
        cl.add_project(Project {
            name: "ml".into(),
            department: "d".into(),
            quotas: q,
        });
        Core::new(cl)
    };
    for i in 0..40 {
        let name = format!("j{i}");
        submit(&mut c, job(&name, 1));
        c.apply(Input::Schedule);
        c.apply(Input::Observe(Observation::JobEnded {
            job: format!("ml/{name}"),
            outcome: if i % 4 == 0 {
                JobOutcome::Failed {
                    message: "exit 1".into(),
                }
            } else {
                JobOutcome::Succeeded
            },
        }))
        .result
        .unwrap();
    }
    let cl = c.cluster();
    assert_eq!(cl.jobs.len(), 5, "only the newest ended jobs are held");
    assert!(cl.events.len() <= 50);
    assert!(cl.next_event_seq() > 100);
    let m = cl.metrics();
    assert_eq!(m.jobs.succeeded, 30);
    assert_eq!(m.jobs.failed, 10);
    // A dropped job's name is free again; its id is never reused.
    assert!(cl.job_id("ml/j0").is_err());
    let again = submit(&mut c, job("j0", 1));
    assert_eq!(again, 40);
}

#[test]
fn the_worlds_cordons_deletions_and_quota_requests_are_facts_not_commands() {
    // What `kubectl cordon`, a deleted pod and a QuotaRequest object do in the core:
    // the same change as the operator's command, told as what happened.
    let mut c = core(&[("a", 8)]);
    let id = submit(&mut c, job("a", 2));
    let out = c.apply(Input::Observe(Observation::Cordoned {
        node: "a".into(),
        gpu: Some(3),
        cordoned: true,
    }));
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert!(c.cluster().nodes[0].gpus[3].cordoned);
    assert!(out.events.iter().any(|e| e.reason == "GpuCordoned"));
    c.apply(Input::Observe(Observation::Cordoned {
        node: "a".into(),
        gpu: None,
        cordoned: true,
    }))
    .result
    .unwrap();
    assert!(c.cluster().nodes[0].cordoned);
    let out = c.apply(Input::Observe(Observation::JobGone {
        job: "ml/a".into(),
        why: "its pod was deleted".into(),
    }));
    assert!(out.result.is_ok(), "{:?}", out.result);
    let j = &c.cluster().jobs[id as usize];
    assert_eq!(j.phase, Phase::Cancelled);
    assert_eq!(&*j.reason, "its pod was deleted");
    // Gone twice is refused, changing nothing.
    assert!(c
        .apply(Input::Observe(Observation::JobGone {
            job: "ml/a".into(),
            why: "again".into(),
        }))
        .result
        .is_err());
    let out = c.apply(Input::Observe(Observation::QuotaAsked {
        project: "ml".into(),
        pool: "train".into(),
        gpus: 2,
        reserved: false,
        reason: "QuotaRequest ml/more".into(),
    }));
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert_eq!(c.cluster().quota_requests.len(), 1);
    // Limits hold whoever asks.
    assert!(c
        .apply(Input::Observe(Observation::QuotaAsked {
            project: "ml".into(),
            pool: "train".into(),
            gpus: 2_000_000,
            reserved: false,
            reason: String::new(),
        }))
        .result
        .is_err());
}

#[test]
fn a_scale_up_tells_the_usage_that_asked_for_it() {
    let (mut c, id) = service(60, 4);
    let desired = |c: &Core| c.cluster().jobs[id as usize].desired_replicas;
    // 58% of 4 replicas: ceil(3.87) = 4 replicas' worth at 60%, nothing changes.
    let out = service_load(&mut c, 58.0);
    assert!(out.events.is_empty(), "{:?}", out.events);
    assert_eq!(desired(&c), 4);
    // 60.4%: ceil(4 x 60.4 / 60) = 5, and the event says 60.4, not a rounded 60.
    let out = service_load(&mut c, 60.4);
    assert_eq!(desired(&c), 5);
    assert!(
        out.events
            .iter()
            .any(|e| e.message.contains("GPU memory usage 60.4% vs target 60%")),
        "{:?}",
        out.events
    );
}
