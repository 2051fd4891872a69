//! Scheduling behaviour on small hand-built clusters: backfill, aging, fair share,
//! shared cards and MIG, reclaim of borrowed quota, drain, quota approval, explain.

use std::collections::BTreeMap;

use maar_scheduler::*;

fn node(name: &str, role: &str, gpus: u32, model: &str, mem_gi: u64, mig: bool) -> Node {
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_ROLE.to_string(), role.to_string());
    if gpus > 0 {
        labels.insert(LABEL_MODEL.to_string(), model.to_string());
        labels.insert(LABEL_COUNT.to_string(), gpus.to_string());
    }
    Node::new(
        name,
        labels,
        64_000,
        512 << 30,
        2 << 40,
        (0..gpus)
            .map(|i| Gpu::new(i, format!("{name}-{i}"), model, mem_gi << 30, mig))
            .collect(),
    )
}

fn cluster(nodes: Vec<Node>, projects: &[(&str, u32, Option<u32>)]) -> Cluster {
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
    for n in nodes {
        c.add_node(n);
    }
    for &(name, reserved, max) in projects {
        let mut q = BTreeMap::new();
        q.insert(
            0,
            Quota {
                reserved: Resources {
                    gpu_milli: reserved as u64 * 1000,
                    ..Default::default()
                },
                max: Limits {
                    gpu_milli: max.map(|m| m as u64 * 1000),
                    ..Default::default()
                },
            },
        );
        c.add_project(Project {
            name: name.into(),
            department: "d".into(),
            quotas: q,
        });
    }
    c
}

fn job(name: &str, project: &str, gpus: u32, prio: i32, runtime: Option<u64>) -> JobSpec {
    JobSpec {
        priority: prio,
        affinity: Affinity::SameNode,
        est_runtime_s: runtime,
        ..JobSpec::train(name, project, "train", gpus)
    }
}

fn phase(c: &Cluster, name: &str) -> Phase {
    c.jobs[c.job_id(name).unwrap() as usize].phase
}

#[test]
fn backfill_starts_short_jobs_only_where_they_do_not_delay_the_blocked_one() {
    let mut c = cluster(
        vec![
            node("a", "train", 4, "a100", 80, false),
            node("b", "train", 4, "a100", 80, false),
        ],
        &[("p", 0, None)],
    );
    c.config.preemption = false;
    c.submit(job("runner-a", "p", 3, PRIORITY_MEDIUM, Some(3600)))
        .unwrap();
    c.submit(job("runner-b", "p", 3, PRIORITY_MEDIUM, Some(7200)))
        .unwrap();
    c.schedule();
    // A 4-GPU job is blocked; node a frees first (t=3600), so it is reserved there.
    c.set_time(10);
    c.submit(job("big", "p", 4, PRIORITY_HIGH, Some(3600)))
        .unwrap();
    c.submit(job("long-small", "p", 1, PRIORITY_LOW, Some(10_000)))
        .unwrap();
    c.submit(job("short-small", "p", 1, PRIORITY_LOW, Some(600)))
        .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "big"), Phase::Pending);
    let short = &c.jobs[c.job_id("short-small").unwrap() as usize];
    assert_eq!(
        short.phase,
        Phase::Running,
        "short job backfills: it ends before the reservation"
    );
    let long = &c.jobs[c.job_id("long-small").unwrap() as usize];
    assert_eq!(
        long.phase,
        Phase::Running,
        "long job backfills too, but away from the reserved node"
    );
    assert_eq!(c.nodes[long.placements[0].node as usize].name, "b");
    // Without backfill the small jobs wait behind the big one.
    let mut c2 = cluster(
        vec![
            node("a", "train", 4, "a100", 80, false),
            node("b", "train", 4, "a100", 80, false),
        ],
        &[("p", 0, None)],
    );
    c2.config.preemption = false;
    c2.config.backfill = false;
    c2.submit(job("runner-a", "p", 3, PRIORITY_MEDIUM, Some(3600)))
        .unwrap();
    c2.submit(job("runner-b", "p", 3, PRIORITY_MEDIUM, Some(7200)))
        .unwrap();
    c2.schedule();
    c2.submit(job("big", "p", 4, PRIORITY_HIGH, Some(3600)))
        .unwrap();
    c2.submit(job("short-small", "p", 1, PRIORITY_LOW, Some(600)))
        .unwrap();
    c2.schedule();
    assert_eq!(phase(&c2, "short-small"), Phase::Pending);
    assert!(c2.jobs[c2.job_id("short-small").unwrap() as usize]
        .reason
        .contains("backfill is off"));
}

#[test]
fn backfill_refuses_a_job_that_would_take_the_reserved_node() {
    let mut c = cluster(
        vec![node("a", "train", 4, "a100", 80, false)],
        &[("p", 0, None)],
    );
    c.config.preemption = false;
    c.submit(job("runner", "p", 3, PRIORITY_MEDIUM, Some(3600)))
        .unwrap();
    c.schedule();
    c.submit(job("big", "p", 4, PRIORITY_HIGH, Some(3600)))
        .unwrap();
    c.submit(job("long-small", "p", 1, PRIORITY_LOW, Some(10_000)))
        .unwrap();
    c.schedule();
    let long = &c.jobs[c.job_id("long-small").unwrap() as usize];
    assert_eq!(long.phase, Phase::Pending);
    assert!(
        long.reason.contains("would delay job/p/big"),
        "{}",
        long.reason
    );
    // When the runner ends, the big job gets the node.
    c.set_time(3600);
    let runner = c.job_id("runner").unwrap();
    c.complete(runner, true, "done");
    c.schedule();
    assert_eq!(phase(&c, "big"), Phase::Running);
}

#[test]
fn aging_lets_an_old_low_job_pass_a_new_medium_one() {
    let mut c = cluster(
        vec![node("a", "train", 1, "a100", 80, false)],
        &[("p", 0, None)],
    );
    c.config.aging_s = 60;
    c.config.preemption = false;
    c.submit(job("holder", "p", 1, PRIORITY_HIGH, None))
        .unwrap();
    c.schedule();
    c.submit(job("old-low", "p", 1, PRIORITY_LOW, None))
        .unwrap();
    c.set_time(60 * 50);
    c.submit(job("new-medium", "p", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    let q = c.queue();
    assert_eq!(
        c.jobs[q[0].0 as usize].spec.name, "old-low",
        "waited 50 min at +1 per minute: 10 + 50 > 50"
    );
    c.complete(c.job_id("holder").unwrap(), true, "done");
    c.schedule();
    assert_eq!(phase(&c, "old-low"), Phase::Running);
    assert_eq!(phase(&c, "new-medium"), Phase::Pending);
}

#[test]
fn fair_share_orders_equal_priorities_by_dominant_share() {
    let mut c = cluster(
        vec![node("a", "train", 8, "a100", 80, false)],
        &[("heavy", 0, None), ("light", 0, None)],
    );
    c.config.preemption = false;
    c.submit(job("h1", "heavy", 6, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    c.submit(job("h2", "heavy", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.set_time(5);
    c.submit(job("l1", "light", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    let q = c.queue();
    assert_eq!(
        c.jobs[q[0].0 as usize].spec.name, "l1",
        "the light project goes first though it came later"
    );
    c.schedule();
    assert_eq!(phase(&c, "l1"), Phase::Running);
    assert_eq!(phase(&c, "h2"), Phase::Pending);
}

#[test]
fn shared_slices_pack_onto_used_cards_and_mig_rounds_to_slices() {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, true)],
        &[("p", 0, None)],
    );
    let mut s = job("s1", "p", 1, PRIORITY_MEDIUM, None);
    s.gpu.shared = true;
    s.gpu.memory_per_card = Some(15 << 30);
    c.submit(s.clone()).unwrap();
    s.name = "s2".into();
    c.submit(s).unwrap();
    c.schedule();
    let a = &c.jobs[0].placements[0].gpus[0];
    let b = &c.jobs[1].placements[0].gpus[0];
    assert_eq!(a.gpu, b.gpu, "second slice packs onto the used card");
    assert_eq!(
        a.mem,
        20 << 30,
        "15Gi on an 80Gi MIG card rounds up to two 10Gi slices"
    );
    assert_eq!(a.milli, 286, "two of seven compute slices");
    assert_eq!(
        c.nodes[0].free_whole_gpus(),
        1,
        "the other card stays whole"
    );
    // Eight slices do not exist: a 75Gi slice needs 8 of 8 and is refused.
    let mut big = job("too-big", "p", 1, PRIORITY_MEDIUM, None);
    big.gpu.shared = true;
    big.gpu.memory_per_card = Some(75 << 30);
    let id = c.submit(big).unwrap();
    c.schedule();
    assert_eq!(c.jobs[id as usize].phase, Phase::Pending);
    assert!(
        c.jobs[id as usize].reason.contains("MIG slice"),
        "{}",
        c.jobs[id as usize].reason
    );
}

#[test]
fn reserved_quota_reclaims_borrowed_cards_youngest_first() {
    let mut c = cluster(
        vec![node("a", "train", 4, "a100", 80, false)],
        &[("owner", 2, Some(4)), ("borrower", 0, Some(4))],
    );
    c.submit(job("b-old", "borrower", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    c.set_time(100);
    c.submit(job("b-young", "borrower", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    // borrower may not eat into owner's reserved 2: a third card is refused.
    c.submit(job("b-third", "borrower", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    let third = &c.jobs[c.job_id("b-third").unwrap() as usize];
    assert_eq!(third.phase, Phase::Pending);
    assert!(
        third.reason.contains("no idle quota to borrow"),
        "{}",
        third.reason
    );
    // Reserving 3 for borrower would promise 5 GPUs of a 4-GPU pool (owner holds 2
    // reserved): not offered, said with the numbers; and `approve` refuses it.
    let ex = c.explain(third.id);
    assert!(
        ex.suggestions.iter().any(|s| s
            == "reserved quota cannot start it: +3 GPUs reserved for project borrower would reserve 5 GPUs in pool train, which has 4 (2 reserved already)"),
        "{:?}",
        ex.suggestions
    );
    assert!(!ex
        .suggestions
        .iter()
        .any(|s| s.starts_with("request reserved quota")));
    let mut copy = c.clone();
    copy.apply(Command::RequestQuota {
        project: "borrower".into(),
        pool: "train".into(),
        gpus: 3,
        reserved: true,
        reason: "r".into(),
    })
    .unwrap();
    let id = copy.quota_requests.last().unwrap().id;
    let e = copy
        .apply(Command::ApproveQuota { id })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("would reserve 5 GPUs in pool train, which has 4: 2 are reserved already (approve at most 2"),
        "{e}"
    );
    assert_eq!(
        copy.quota_requests.last().unwrap().status,
        RequestStatus::Pending,
        "a refused approval leaves the request open"
    );
    assert!(c.jobs[0].borrowed && c.jobs[1].borrowed);
    // owner takes 2 (its reserved) and 1 more borrowed; 4 cards, 2 held by borrower.
    c.set_time(200);
    c.submit(job("o-big", "owner", 3, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    assert_eq!(
        phase(&c, "o-big"),
        Phase::Pending,
        "3 > reserved 2: it borrows and may not reclaim"
    );
    c.submit(job("o-two", "owner", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    let two = &c.jobs[c.job_id("o-two").unwrap() as usize];
    assert_eq!(
        two.phase,
        Phase::Pending,
        "o-big holds the backfill reservation"
    );
    assert!(
        two.reason.contains("would delay job/owner/o-big"),
        "{}",
        two.reason
    );
    c.apply(Command::Cancel {
        job: "o-big".into(),
        why: None,
    })
    .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "o-two"), Phase::Running);
    let reclaimed: Vec<&Event> = c
        .events
        .iter()
        .map(|e| &**e)
        .filter(|e| e.reason == "Reclaimed")
        .collect();
    assert_eq!(reclaimed.len(), 0, "two free cards were enough");
    // A reserved owner on a full pool reclaims from the borrower.
    // Reserved cards are never lent, so in-pool reclaim happens when real capacity
    // shrinks: node b goes NotReady while borrowers hold node a.
    let mut c2 = cluster(
        vec![
            node("a", "train", 2, "a100", 80, false),
            node("b", "train", 2, "a100", 80, false),
        ],
        &[("owner", 2, Some(2)), ("borrower", 0, Some(2))],
    );
    c2.submit(job("b-old", "borrower", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    c2.schedule();
    c2.set_time(10);
    c2.submit(job("b-young", "borrower", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    c2.schedule();
    assert!(
        c2.jobs.iter().all(|j| j.placements[0].node == 0),
        "packed onto node a"
    );
    c2.set_node_condition(1, Condition::NotReady("KubeletDown".into()));
    c2.set_time(20);
    c2.submit(job("o-one", "owner", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    c2.schedule();
    assert_eq!(phase(&c2, "o-one"), Phase::Running);
    assert_eq!(
        phase(&c2, "b-young"),
        Phase::Pending,
        "youngest borrower reclaimed first"
    );
    assert_eq!(phase(&c2, "b-old"), Phase::Running);
}

/// Reclaim takes borrowed quota only while it is borrowed: a job admitted above its
/// project's reserved quota is held as reserved work once the project's other jobs
/// ended and it fell back within reserved (it was reclaimed for as long as it ran, and
/// explain called it "borrowed quota" all along).
#[test]
fn reclaim_passes_over_a_job_whose_project_fell_back_within_reserved() {
    let mut c = cluster(
        vec![
            node("a", "train", 4, "a100", 80, false),
            node("b", "train", 4, "a100", 80, false),
        ],
        &[
            ("owner", 2, Some(2)),
            ("team", 2, Some(4)),
            ("guest", 0, Some(2)),
            ("other", 2, Some(2)),
        ],
    );
    c.submit(job("t-first", "team", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    c.submit(job("t-second", "team", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.submit(job("o-filler", "other", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    let second = c.job_id("t-second").unwrap();
    assert!(
        c.jobs[second as usize].borrowed,
        "admitted above team's reserved 2"
    );
    assert!(c.borrowing(&c.jobs[second as usize]));
    // team's first job ends: team holds 2, its reserved, with the second alone.
    c.complete(c.job_id("t-first").unwrap(), true, "done");
    assert!(!c.borrowing(&c.jobs[second as usize]));
    let ex = c.explain(second);
    assert!(!ex.quota.borrowing, "{}", ex.quota.message);
    assert!(
        ex.quota
            .message
            .starts_with("holds 2 GPUs; project team uses 2 GPUs"),
        "{}",
        ex.quota.message
    );
    // A guest borrows the idle unreserved cards at high priority.
    c.set_time(10);
    c.submit(job("g-high", "guest", 2, PRIORITY_HIGH, None))
        .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "g-high"), Phase::Running);
    // The last free cards go out of service: the owner, within its reserved 2, must
    // reclaim. The guest borrows (guest holds 2 > reserved 0); team does not.
    let free: Vec<(String, u32)> = c
        .nodes
        .iter()
        .flat_map(|n| {
            n.gpus
                .iter()
                .filter(|g| g.used_milli() == 0)
                .map(move |g| (n.name.clone(), g.index))
        })
        .collect();
    assert_eq!(free.len(), 2, "{free:?}");
    for (node, gpu) in free {
        c.apply(Command::CordonGpu { node, gpu }).unwrap();
    }
    c.set_time(20);
    c.submit(job("o-mine", "owner", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "o-mine"), Phase::Running);
    assert_eq!(
        phase(&c, "g-high"),
        Phase::Pending,
        "the borrower is reclaimed"
    );
    assert_eq!(
        phase(&c, "t-second"),
        Phase::Running,
        "team is within its reserved quota: its job is not reclaimed, however low its priority"
    );
}

#[test]
fn drain_requeues_and_cordon_gpu_skips_it() {
    let mut c = cluster(
        vec![
            node("a", "train", 2, "a100", 80, false),
            node("b", "train", 2, "a100", 80, false),
        ],
        &[("p", 0, None)],
    );
    c.apply(Command::CordonGpu {
        node: "a".into(),
        gpu: 0,
    })
    .unwrap();
    c.submit(job("j1", "p", 2, PRIORITY_MEDIUM, None)).unwrap();
    c.schedule();
    let j = &c.jobs[0];
    assert_eq!(
        c.nodes[j.placements[0].node as usize].name, "b",
        "node a has a cordoned card"
    );
    let msg = c.apply(Command::DrainNode { node: "b".into() }).unwrap();
    assert!(msg.contains("1 job(s) requeued"));
    assert_eq!(phase(&c, "j1"), Phase::Pending);
    c.schedule();
    assert_eq!(phase(&c, "j1"), Phase::Pending);
    let ex = c.explain(0);
    assert!(
        ex.summary.contains("1 cordoned") && ex.summary.contains("1 GPUs cordoned"),
        "{}",
        ex.summary
    );
    assert!(
        ex.suggestions
            .iter()
            .any(|s| s.contains("uncordoning node b")),
        "{:?}",
        ex.suggestions
    );
    assert!(c
        .events
        .iter()
        .any(|e| e.reason == "GpuCordoned" && e.object == "gpu/a/0"));
    assert!(c
        .apply(Command::CordonGpu {
            node: "a".into(),
            gpu: 9
        })
        .is_err());
    assert!(c.apply(Command::DrainNode { node: "zz".into() }).is_err());
}

#[test]
fn approving_a_quota_request_lets_the_waiting_job_start() {
    let mut c = cluster(
        vec![node("a", "train", 8, "a100", 80, false)],
        &[("p", 0, Some(2))],
    );
    let msg = c
        .apply(Command::Submit(Box::new(job(
            "wants-4",
            "p",
            4,
            PRIORITY_MEDIUM,
            None,
        ))))
        .unwrap();
    assert_eq!(msg, "job p/wants-4 submitted");
    assert!(
        c.apply(Command::Submit(Box::new(job(
            "wants-4",
            "p",
            1,
            PRIORITY_LOW,
            None
        ))))
        .is_err(),
        "duplicate refused"
    );
    c.schedule();
    assert_eq!(phase(&c, "wants-4"), Phase::Pending);
    // The first line names what must change: no wait under this quota ends it.
    let first = c.jobs[0].reason.to_string();
    assert_eq!(
        first,
        "can never run under its quota: it asks 4 GPUs and project p may use at most 2 in pool train"
    );
    let f = c.forecast(forecast::Reach::default(), None);
    assert_eq!(f.starts[&0].basis, forecast::Basis::Never, "{f:?}");
    let s = c.explain(0).suggestions;
    assert!(
        s[0].starts_with("can never run under its quota: it asks 4 GPUs"),
        "{s:?}"
    );
    assert!(
        s.iter()
            .any(|x| x.contains("+2 GPUs") && x.contains("then it starts now")),
        "{s:?}"
    );
    c.apply(Command::RequestQuota {
        project: "p".into(),
        pool: "train".into(),
        gpus: 2,
        reserved: false,
        reason: "deadline".into(),
    })
    .unwrap();
    assert_eq!(phase(&c, "wants-4"), Phase::Pending);
    c.apply(Command::ApproveQuota { id: 1 }).unwrap();
    c.schedule();
    assert_eq!(phase(&c, "wants-4"), Phase::Running);
    assert!(
        c.apply(Command::ApproveQuota { id: 1 }).is_err(),
        "decided once"
    );
    assert!(c.events.iter().any(|e| e.reason == "QuotaApproved"));
}

#[test]
fn explain_reports_queue_position_and_nearest_node() {
    let mut c = cluster(
        vec![
            node("a", "train", 4, "a100", 80, false),
            node("b", "train", 4, "a100", 80, false),
        ],
        &[("p", 0, None)],
    );
    c.config.preemption = false;
    c.submit(job("r1", "p", 3, PRIORITY_MEDIUM, None)).unwrap();
    c.submit(job("r2", "p", 2, PRIORITY_MEDIUM, None)).unwrap();
    c.schedule();
    c.submit(job("first", "p", 4, PRIORITY_HIGH, None)).unwrap();
    c.submit(job("second", "p", 4, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    let ex = c.explain(c.job_id("second").unwrap());
    assert_eq!(ex.queue_position, Some(2));
    assert!(
        ex.ahead[0].starts_with("job/p/first (priority high"),
        "{:?}",
        ex.ahead
    );
    let n = ex.nearest.clone().unwrap();
    assert_eq!(n.node, "b");
    assert_eq!(n.lacks, vec!["2 GPU(s) (has 2 free, needs 4)".to_string()]);
    assert!(
        ex.suggestions.iter().any(|s| s.contains("gpu.count 2")),
        "{:?}",
        ex.suggestions
    );
    let text = ex.to_string();
    assert!(text.contains("Queue:     position 2 of 2"), "{text}");
}

#[test]
fn placement_avoids_stranding_a_gpu_without_cpu() {
    // small: 3 GPUs, 20 cores; big: 3 GPUs, 64 cores. Jobs take 1 GPU and 8 cores.
    let mut small = node("small", "train", 3, "a100", 80, false);
    small.cpu_milli = 20_000;
    let mut c = cluster(
        vec![small, node("big", "train", 3, "a100", 80, false)],
        &[("p", 0, None)],
    );
    let mut first = job("first", "p", 1, PRIORITY_MEDIUM, None);
    first.cpu_milli = 8000;
    c.submit(first).unwrap();
    c.schedule();
    let on = |c: &Cluster, n: &str| {
        c.nodes[c.jobs[c.job_id(n).unwrap() as usize].placements[0].node as usize]
            .name
            .clone()
    };
    assert_eq!(
        on(&c, "first"),
        "small",
        "both keep room for the typical task; best fit breaks the tie"
    );
    let mut second = job("second", "p", 1, PRIORITY_MEDIUM, None);
    second.cpu_milli = 8000;
    c.submit(second).unwrap();
    c.schedule();
    // Best fit would take small (2 cards free against 3) and leave it 1 card with 4
    // cores, too few for the typical 8-core task: a stranded GPU. maar takes big.
    assert_eq!(on(&c, "second"), "big");
}

#[test]
fn placement_keeps_flexible_jobs_off_a_model_that_constrained_jobs_need() {
    // Two T4 nodes and three A100 nodes, two cards each. Three T4-only jobs leave one
    // T4 card; three A100-only jobs leave three A100 cards. A job that can use either
    // goes to an A100: the last T4 card is the only place left for T4-only work.
    // Fragmentation and best fit see no difference (they tie, and the T4 node comes
    // first in node order); the pressure on the T4s decides.
    let nodes = vec![
        node("t4-1", "train", 2, "t4", 16, false),
        node("t4-2", "train", 2, "t4", 16, false),
        node("a100-1", "train", 2, "a100", 80, false),
        node("a100-2", "train", 2, "a100", 80, false),
        node("a100-3", "train", 2, "a100", 80, false),
    ];
    let mut c = cluster(nodes, &[("p", 0, None)]);
    let only = |name: &str, model: &str| {
        let mut j = job(name, "p", 1, PRIORITY_MEDIUM, None);
        j.gpu.models = vec![model.into()];
        j
    };
    for i in 0..3 {
        c.submit(only(&format!("t4-{i}"), "t4")).unwrap();
    }
    c.schedule();
    for i in 0..3 {
        c.submit(only(&format!("a100-{i}"), "a100")).unwrap();
    }
    c.schedule();
    let idle = |c: &Cluster, model: &str| -> usize {
        c.nodes
            .iter()
            .filter(|n| n.gpu_model() == Some(model))
            .flat_map(|n| n.gpus.iter())
            .filter(|g| g.free_milli() == 1000)
            .count()
    };
    assert_eq!((idle(&c, "t4"), idle(&c, "a100")), (1, 3));
    c.submit(job("flexible", "p", 1, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    let j = &c.jobs[c.job_id("flexible").unwrap() as usize];
    let on = &c.nodes[j.placements[0].node as usize];
    assert_eq!(on.gpu_model(), Some("a100"), "placed on {}", on.name);
}

#[test]
fn cpu_only_jobs_go_where_their_cpu_strands_no_gpu() {
    // Two GPU nodes with four idle cards: 16 cores and 64 cores. The workload's typical
    // GPU job takes one card and 8 cores (one is queued, held back by its quota). An
    // 8-core CPU-only job on the small node would leave CPU for one such job beside four
    // idle cards; on the big node it strands nothing. Both have as many free cards, so
    // "fewest free cards first" would take the small node (it comes first).
    let mut small = node("small", "train", 4, "a100", 80, false);
    small.cpu_milli = 16_000;
    let mut c = cluster(
        vec![small, node("big", "train", 4, "a100", 80, false)],
        &[("p", 0, None), ("capped", 0, Some(0))],
    );
    let mut gpu = job("gpu-8c", "capped", 1, PRIORITY_MEDIUM, None);
    gpu.cpu_milli = 8000;
    c.submit(gpu).unwrap();
    let mut cpu = job("cpu-8c", "p", 0, PRIORITY_MEDIUM, None);
    cpu.cpu_milli = 8000;
    c.submit(cpu).unwrap();
    c.schedule();
    assert_eq!(phase(&c, "gpu-8c"), Phase::Pending);
    let j = &c.jobs[c.job_id("cpu-8c").unwrap() as usize];
    assert_eq!(c.nodes[j.placements[0].node as usize].name, "big");
}

/// Where a 2-GPU job goes under `policy`, on three 8-GPU nodes: `a` with 6 cards held,
/// `b` with 2 held, `c` empty.
fn placed_under(policy: placement::Policy) -> String {
    let named = |name: &str| {
        let mut n = node(name, "train", 8, "a100", 80, false);
        let mut l = n.labels().clone();
        l.insert("at".into(), name.into());
        n.set_labels(l);
        n
    };
    let mut c = cluster(vec![named("a"), named("b"), named("c")], &[("p", 0, None)]);
    c.config.placement = policy;
    let pinned = |name: &str, gpus: u32, at: &str| {
        let mut j = job(name, "p", gpus, PRIORITY_MEDIUM, None);
        j.node_selector.insert("at".into(), at.into());
        j
    };
    c.submit(pinned("six", 6, "a")).unwrap();
    c.submit(pinned("two", 2, "b")).unwrap();
    c.schedule();
    let on = |c: &Cluster, name: &str| {
        let j = &c.jobs[c.job_id(name).unwrap() as usize];
        c.nodes[j.placements[0].node as usize].name.clone()
    };
    assert_eq!(phase(&c, "six"), Phase::Running);
    let (six, two) = (on(&c, "six"), on(&c, "two"));
    assert_ne!(six, two, "{policy:?}: 6 + 2 fill a node");
    c.submit(job("new", "p", 2, PRIORITY_MEDIUM, None)).unwrap();
    c.schedule();
    assert_eq!(phase(&c, "new"), Phase::Running, "{policy:?}");
    let new = on(&c, "new");
    if new == six {
        "fullest".into()
    } else if new == two {
        "half".into()
    } else {
        "empty".into()
    }
}

#[test]
fn the_live_core_places_by_the_policy_it_is_given() {
    use placement::Policy;
    // Packing policies fill the fullest node that fits (the 6-GPU one has 2 left).
    assert_eq!(placed_under(Policy::BestFit), "fullest");
    assert_eq!(placed_under(Policy::GpuPacking), "fullest");
    assert_eq!(placed_under(Policy::DotProd), "fullest");
    // maar and FGD take the 2 free cards of the fullest node too: nothing fragments.
    assert_eq!(placed_under(Policy::Maar), "fullest");
    assert_eq!(placed_under(Policy::Fgd), "fullest");
    // The policies are told apart: GpuClustering keeps 2-GPU jobs together (the node
    // that already runs one), not beside the 6-GPU job.
    assert_eq!(placed_under(Policy::GpuClustering), "half");
}

/// One node of 2 cards held by a high job of project q; a low job of p waiting 50 x
/// 600 s behind it (aged to 60), and a fresh medium job `medium` of p submitted then.
fn aged_low_behind_a_hold(medium: &str) -> Cluster {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, None), ("q", 0, None)],
    );
    c.submit(job("hold", "q", 2, PRIORITY_HIGH, None)).unwrap();
    c.schedule();
    c.submit(job("old-low", "p", 2, PRIORITY_LOW, None))
        .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "old-low"), Phase::Pending);
    c.set_time(50 * 600);
    c.submit(job(medium, "p", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c
}

#[test]
fn one_priority_for_the_queue_and_preemption_aged_while_waiting_kept_while_running() {
    // Aging: one priority point per 600 s waited (the default). A low job (10) that
    // waited 50 x 600 s ranks 60 and goes ahead of a fresh medium one (50); once
    // running it keeps that rank, so the medium job does not preempt it (it would
    // have, by base priority: 50 > 10, and the low job would have been placed and
    // preempted for the same ranking).
    let mut c = aged_low_behind_a_hold("new-medium");
    let low = c.job_id("old-low").unwrap();
    let medium = c.job_id("new-medium").unwrap();
    assert_eq!(c.effective_priority(&c.jobs[low as usize]), 60);
    assert_eq!(c.queue()[0].0, low, "the aged job is first in the queue");
    // Explain says why it is ahead: its wait.
    let ex = c.explain(medium);
    assert!(
        ex.ahead[0].starts_with("job/p/old-low (priority low +50 for its wait, "),
        "{:?}",
        ex.ahead
    );
    c.apply(Command::Cancel {
        job: "q/hold".into(),
        why: None,
    })
    .unwrap();
    let r = c.schedule();
    assert_eq!(r.started, vec![low]);
    assert!(r.preempted.is_empty());
    assert_eq!(c.jobs[low as usize].rank(), 60, "its aged rank, kept");
    // Later, the medium job is still below it: no preemption.
    c.set_time(50 * 600 + 60);
    let r = c.schedule();
    assert!(r.preempted.is_empty(), "{:?}", r.preempted);
    assert_eq!(phase(&c, "new-medium"), Phase::Pending);
    let ex = c.explain(medium);
    assert!(
        !ex.suggestions
            .iter()
            .any(|s| s.starts_with("preemption would evict")),
        "{:?}",
        ex.suggestions
    );
    // Waiting alone never lets a job evict one of its own priority: another low job
    // aged far past old-low's 60 stays Pending (no two jobs take turns evicting
    // each other as they age).
    // (new-medium, aged as long, would outrank it by both: 50 > 10 and 150 > 60.)
    let mut d = c.clone();
    d.apply(Command::Cancel {
        job: "p/new-medium".into(),
        why: None,
    })
    .unwrap();
    d.submit(job("patient-low", "p", 2, PRIORITY_LOW, None))
        .unwrap();
    d.set_time(50 * 600 + 60 + 100 * 600);
    let r = d.schedule();
    assert!(r.preempted.is_empty(), "{:?}", r.preempted);
    assert_eq!(phase(&d, "patient-low"), Phase::Pending);
    // A high job (100) outranks the aged 60: it preempts, and says by how much.
    c.set_time(50 * 600 + 120);
    c.submit(job("urgent", "p", 2, PRIORITY_HIGH, None))
        .unwrap();
    let r = c.schedule();
    assert_eq!(r.preempted, vec![low]);
    assert_eq!(phase(&c, "urgent"), Phase::Running);
    // Back in the queue, the low job ages from zero again.
    assert_eq!(c.jobs[low as usize].aged, 0);
    assert_eq!(c.effective_priority(&c.jobs[low as usize]), 10);
}

/// The first line (the job's reason, as explain, `get jobs`, the console and the
/// Kubernetes event show it) names the cause that must change, exactly.
#[test]
fn the_first_line_is_the_cause_that_must_change() {
    let reason =
        |c: &Cluster, name: &str| c.jobs[c.job_id(name).unwrap() as usize].reason.to_string();

    // Idle cards of its kind on a node in no pool, while its pool is full.
    let mut c = cluster(
        vec![
            node("a", "train", 2, "a100", 80, false),
            node("spare", "unassigned", 8, "a100", 80, false),
        ],
        &[("p", 0, None)],
    );
    c.submit(job("hold", "p", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    c.set_time(10);
    c.submit(job("two", "p", 2, PRIORITY_MEDIUM, None)).unwrap();
    c.schedule();
    assert_eq!(
        reason(&c, "two"),
        "pool train has no room for it, while node spare has 8 idle a100 GPUs and is in no pool; 0/1 nodes are available: 1 insufficient free GPUs"
    );

    // Whole cards held by shared slices.
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, None)],
    );
    for i in 0..2 {
        let mut s = job(&format!("slice{i}"), "p", 1, PRIORITY_MEDIUM, None);
        s.gpu.shared = true;
        s.gpu.memory_per_card = Some(20 << 30);
        c.submit(s).unwrap();
        c.schedule();
    }
    // Two slices pack onto one card: one whole card free, one sliced.
    c.set_time(10);
    c.submit(job("whole", "p", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    assert_eq!(
        reason(&c, "whole"),
        "1 card(s) it could use hold shared slices (job/p/slice0, job/p/slice1): a whole-card job cannot use them; 0/1 nodes are available: 1 insufficient free GPUs"
    );

    // A gang that can never form on distinct nodes: 4 replicas of 8 GPUs, and only
    // 3 nodes hold 8 (the 4-GPU nodes are never counted as short of free GPUs).
    let mut c = cluster(
        vec![
            node("a", "train", 8, "a100", 80, false),
            node("b", "train", 8, "a100", 80, false),
            node("c", "train", 8, "a100", 80, false),
            node("d", "train", 4, "a100", 80, false),
            node("e", "train", 4, "a100", 80, false),
        ],
        &[("p", 0, None)],
    );
    let mut g = job("gang", "p", 8, PRIORITY_MEDIUM, None);
    g.replicas = 4;
    g.affinity = Affinity::Spread;
    c.submit(g).unwrap();
    c.schedule();
    let id = c.job_id("gang").unwrap();
    assert_eq!(
        reason(&c, "gang"),
        "can never run as asked: its gang of 4 replicas (8x GPU, 1 CPU, 1Gi mem each) must start together on distinct nodes, and only 3 nodes of pool train could ever hold one (a, b, c)"
    );
    let ex = c.explain(id);
    assert_eq!(
        ex.summary,
        "3/3 nodes are available; 2 nodes it can never use: 2 too small for it even empty"
    );
    assert!(
        !ex.suggestions.iter().any(|s| s.starts_with("wait")),
        "{:?}",
        ex.suggestions
    );

    // A job that aging put ahead took the room at this instant.
    let mut c = aged_low_behind_a_hold("medium");
    c.apply(Command::Cancel {
        job: "q/hold".into(),
        why: None,
    })
    .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "old-low"), Phase::Running);
    assert_eq!(
        reason(&c, "medium"),
        "the room on a went to job/p/old-low (priority low, +50 for its wait), ahead of it in the queue; 0/1 nodes are available: 1 insufficient free GPUs"
    );

    // A job its world placed at this instant (another scheduler's pod found bound)
    // was in no queue of maar's: not said to have gone ahead in it.
    let mut core = input::Core::new(cluster(
        vec![node("a", "train", 8, "a100", 80, false)],
        &[("p", 0, None)],
    ));
    let waits = input::Input::Observe(input::Observation::JobSubmitted {
        spec: Box::new(job("waits", "p", 8, PRIORITY_MEDIUM, None)),
    });
    core.apply(waits).result.unwrap();
    let found = input::Observation::JobRunning {
        spec: Box::new(job("other", "p", 8, PRIORITY_HIGH, None)),
        replicas: vec![input::Binding {
            node: "a".into(),
            gpus: vec![],
        }],
    };
    core.apply(input::Input::Observe(found)).result.unwrap();
    core.apply(input::Input::Schedule);
    assert_eq!(
        reason(core.cluster(), "waits"),
        "the room on a went to job/p/other (priority high), found running there when maar saw it; 0/1 nodes are available: 1 insufficient free GPUs"
    );
}

#[test]
fn right_sizing_from_what_earlier_runs_used_is_offered_when_proven() {
    let c = cluster(
        vec![
            node("big", "train", 1, "a100", 80, false),
            node("small", "train", 2, "a100", 40, false),
        ],
        &[("p", 0, None)],
    );
    let mut core = Core::new(c);
    let spec = |name: &str| {
        let mut s = job(name, "p", 1, PRIORITY_MEDIUM, Some(3600));
        s.gpu.memory_per_card = Some(80 << 30);
        s.image = "trainer:1".into();
        s
    };
    let observe = |core: &mut Core, o: Observation| core.apply(Input::Observe(o)).result.unwrap();
    let cycle = |core: &mut Core| {
        let out = core.apply(Input::Schedule);
        for d in &out.decisions {
            if let Decision::Bind { job, .. } = d {
                core.apply(Input::Observe(Observation::Bound { job: job.clone() }));
            }
        }
    };
    observe(
        &mut core,
        Observation::JobSubmitted {
            spec: Box::new(spec("r1")),
        },
    );
    cycle(&mut core);
    // Telemetry: it used 30%, then 39% of its 80Gi per card; it ends well.
    for pct in [30, 39, 12] {
        observe(
            &mut core,
            Observation::JobUsage {
                job: "p/r1".into(),
                used_pct: pct,
            },
        );
    }
    core.apply(Input::Advance { to: 3600 });
    observe(
        &mut core,
        Observation::JobEnded {
            job: "p/r1".into(),
            outcome: JobOutcome::Succeeded,
        },
    );
    // The 80Gi card is taken; the same kind of job asks 80Gi again.
    let mut hog = job("hog", "p", 1, PRIORITY_MEDIUM, None);
    hog.gpu.memory_per_card = Some(80 << 30);
    observe(
        &mut core,
        Observation::JobSubmitted {
            spec: Box::new(hog),
        },
    );
    cycle(&mut core);
    observe(
        &mut core,
        Observation::JobSubmitted {
            spec: Box::new(spec("r2")),
        },
    );
    cycle(&mut core);
    let c = core.cluster();
    let r2 = c.job_id("p/r2").unwrap();
    assert_eq!(c.jobs[r2 as usize].phase, Phase::Pending);
    let ex = c.explain(r2);
    let line = ex
        .suggestions
        .iter()
        .find(|s| s.starts_with("asked 80Gi per card, its last 1 run peaked at "))
        .unwrap_or_else(|| panic!("{:?}", ex.suggestions));
    assert!(line.ends_with(": with 39Gi it would start now"), "{line}");
    // And it does: the same job asking 39Gi starts on a 40Gi card.
    let mut copy = c.clone();
    let mut s = spec("r2-small");
    s.gpu.memory_per_card = Some(39 << 30);
    copy.apply(Command::Cancel {
        job: "p/r2".into(),
        why: None,
    })
    .unwrap();
    copy.submit(s).unwrap();
    copy.schedule();
    assert_eq!(phase(&copy, "p/r2-small"), Phase::Running);
}

#[test]
fn runtimes_are_kept_in_checkpoints_and_an_unreadable_form_is_dropped_not_fatal() {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, None)],
    );
    c.submit(job("r1", "p", 1, PRIORITY_MEDIUM, Some(600)))
        .unwrap();
    c.schedule();
    c.set_time(600);
    let id = c.job_id("p/r1").unwrap();
    c.complete(id, true, "done");
    let again = job("r2", "p", 1, PRIORITY_MEDIUM, None);
    assert_eq!(c.runtimes.predict(&again), Some(600));
    let mut v = serde_json::to_value(c.checkpoint()).unwrap();
    let kept: ClusterState = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(
        Cluster::restore(kept).unwrap().runtimes.predict(&again),
        Some(600)
    );
    // The form an earlier build wrote (durations straight under each kind).
    v["runtimes"] = serde_json::json!({"by_kind": {"p|||1x GPU": [2460]}, "order": ["p|||1x GPU"]});
    let old: ClusterState = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(
        Cluster::restore(old).unwrap().runtimes.predict(&again),
        None
    );
    // Anything else damaged still is.
    v["jobs"] = serde_json::json!("not jobs");
    assert!(serde_json::from_value::<ClusterState>(v).is_err());
}

#[test]
fn a_checkpoint_writes_each_spec_as_the_last_one_did_and_a_changed_spec_anew() {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, None)],
    );
    for n in ["r1", "r2", "r3"] {
        c.submit(job(n, "p", 1, PRIORITY_MEDIUM, None)).unwrap();
    }
    c.schedule();
    // The state as plain data, serialised whole: what every checkpoint must say.
    let plain = |c: &Cluster| serde_json::to_value(c.checkpoint()).unwrap();
    let first = c.checkpoint_json(true);
    let again = c.checkpoint_json(true);
    assert_eq!(first, again, "the kept texts are the specs' own");
    assert!(
        format!("{c:?}").contains("spec_texts: Texts(3)"),
        "each job's spec is kept as written"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&again).unwrap(),
        plain(&c)
    );
    // A spec changed after a checkpoint is a new spec: written anew, not as kept.
    c.apply(Command::SetPriority {
        job: "p/r3".into(),
        priority: PRIORITY_HIGH,
    })
    .unwrap();
    let after: serde_json::Value = serde_json::from_str(&c.checkpoint_json(true)).unwrap();
    assert_eq!(after, plain(&c));
    let r3 = after["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["spec"]["name"] == "r3")
        .unwrap();
    assert_eq!(r3["spec"]["priority"], PRIORITY_HIGH);
    // A copy (a what-if's) keeps none and writes the same.
    let copy = c.clone();
    assert_eq!(copy.checkpoint_json(true), c.checkpoint_json(true));
    // Restored, it reads back as it was.
    let back = Cluster::restore(serde_json::from_str(&c.checkpoint_json(true)).unwrap()).unwrap();
    assert_eq!(plain(&back)["jobs"], plain(&c)["jobs"]);
}

#[test]
fn a_checkpoint_leaves_out_default_fields_and_reads_version_1_which_wrote_them_all() {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, None)],
    );
    c.submit(job("r1", "p", 1, PRIORITY_MEDIUM, None)).unwrap();
    c.schedule();
    let v: serde_json::Value = serde_json::from_str(&c.checkpoint_json(true)).unwrap();
    assert_eq!(v["version"], 2);
    let j = &v["jobs"][0];
    assert_eq!(j["phase"], "Running");
    for f in ["finished", "restarts", "remaining_s", "wait_s", "reason"] {
        assert!(
            j.get(f).is_none(),
            "a running job's {f} holds its default: {j}"
        );
    }
    let g = &v["nodes"][0]["gpus"][1];
    for f in [
        "util_pct", "mem_used", "mig", "cordoned", "health", "allocs",
    ] {
        assert!(
            g.get(f).is_none(),
            "an idle card's {f} holds its default: {g}"
        );
    }
    // What version 1 wrote: every field, defaults too.
    let mut old = v.clone();
    old["version"] = 1.into();
    let jobs = old["jobs"].as_array_mut().unwrap();
    for (k, d) in [
        ("finished", serde_json::Value::Null),
        ("restart_at", serde_json::Value::Null),
        ("remaining_s", serde_json::Value::Null),
        ("restarts", 0.into()),
        ("borrowed", false.into()),
        ("wait_s", 0.into()),
        ("run_s", 0.into()),
        ("used_pct", 0.into()),
        ("reason", "".into()),
        (
            "autoscaler",
            serde_json::json!({"history": [], "paused_by": null, "last_usage_pct": null}),
        ),
    ] {
        jobs[0].as_object_mut().unwrap().entry(k).or_insert(d);
    }
    let spec = jobs[0]["spec"].as_object_mut().unwrap();
    spec.entry("disk").or_insert(0.into());
    spec.entry("est_runtime_s")
        .or_insert(serde_json::Value::Null);
    let gpu = spec["gpu"].as_object_mut().unwrap();
    for (k, d) in [
        ("memory_per_card", serde_json::Value::Null),
        ("models", serde_json::json!([])),
        ("shared", false.into()),
        ("milli", serde_json::Value::Null),
    ] {
        gpu.entry(k).or_insert(d);
    }
    for p in old["jobs"][0]["placements"].as_array_mut().unwrap() {
        let p = p.as_object_mut().unwrap();
        p.entry("disk").or_insert(0.into());
        p.entry("on_loan").or_insert(false.into());
        p.entry("bound").or_insert(true.into());
    }
    for n in old["nodes"].as_array_mut().unwrap() {
        for g in n["gpus"].as_array_mut().unwrap() {
            let g = g.as_object_mut().unwrap();
            for (k, d) in [
                ("mig", false.into()),
                ("health", serde_json::json!({"status": "Healthy"})),
                ("cordoned", false.into()),
                ("allocs", serde_json::json!([])),
                ("util_pct", 0.into()),
                ("mem_used", 0.into()),
                ("temp_c", 0.into()),
                ("power_w", 0.into()),
            ] {
                g.entry(k).or_insert(d);
            }
        }
        let n = n.as_object_mut().unwrap();
        for (k, d) in [
            ("cordoned", false.into()),
            ("alloc_disk", 0.into()),
            ("disk_external", 0.into()),
            ("host", serde_json::Value::Null),
        ] {
            n.entry(k).or_insert(d);
        }
    }
    assert!(old.to_string().len() > v.to_string().len() + 300);
    let read: ClusterState = serde_json::from_value(old).unwrap();
    assert_eq!(read.version, 1);
    let again = Cluster::restore(read).unwrap();
    let (mut a, mut b) = (again.checkpoint(), c.checkpoint());
    (a.version, b.version) = (0, 0);
    assert_eq!(a, b, "version 1 reads as the same cluster");
    // A newer format than this build reads is refused by its number, also where its
    // fields are not this build's.
    let mut newer = v;
    newer["version"] = 3.into();
    let e = Cluster::restore(ClusterState::from_json(&newer.to_string()).unwrap()).unwrap_err();
    assert!(e.to_string().contains("format version 3"), "{e}");
    newer["jobs"][0]["phase"] = "Sleeping".into();
    let e = ClusterState::from_json(&newer.to_string()).unwrap_err();
    assert!(
        e.starts_with("format version 3 (this maar reads 1 to 2)"),
        "{e}"
    );
    newer["version"] = 2.into();
    let e = ClusterState::from_json(&newer.to_string()).unwrap_err();
    assert!(e.contains("Sleeping"), "{e}");
}

#[test]
fn a_priority_beyond_the_limit_is_refused_by_the_core_whoever_sends_it() {
    let mut c = cluster(
        vec![node("n1", "train", 1, "a100", 80, false)],
        &[("ml", 0, None)],
    );
    c.submit(job("j", "ml", 1, PRIORITY_MEDIUM, None)).unwrap();
    let mut core = Core::new(c);
    let out = core.apply(Input::Command {
        actor: Actor::system("script"),
        command: Command::SetPriority {
            job: "ml/j".into(),
            priority: limits::MAX_PRIORITY + 1,
        },
    });
    let e = out.result.expect_err("refused");
    assert!(e.to_string().contains("beyond ±1000000000"), "{e}");
    assert_eq!(
        core.cluster().jobs[0].spec.priority,
        PRIORITY_MEDIUM,
        "unchanged"
    );
    assert_eq!(parse_priority("high"), Ok(PRIORITY_HIGH));
    assert_eq!(parse_priority("-1000000000"), Ok(-1_000_000_000));
    assert!(parse_priority("1000000001").is_err());
}

/// A Pending job's start is the end it waits for (never earlier), on the basis of the
/// running job's own estimate; once every Pending job has a start the forward run
/// stops (the later ends change no start).
#[test]
fn a_forecast_starts_a_job_at_the_end_it_waits_for_and_stops_when_all_have_started() {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, None)],
    );
    c.config.preemption = false;
    c.submit(job("short", "p", 1, PRIORITY_MEDIUM, Some(1_000)))
        .unwrap();
    c.submit(job("long", "p", 1, PRIORITY_MEDIUM, Some(100_000)))
        .unwrap();
    c.schedule();
    c.set_time(10);
    c.submit(job("waits", "p", 1, PRIORITY_MEDIUM, Some(500)))
        .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "waits"), Phase::Pending);
    let f = c.forecast(forecast::Reach::default(), None);
    let s = &f.starts[&c.job_id("waits").unwrap()];
    assert_eq!(s.at, Some(1_000), "it starts when `short` ends");
    assert_eq!(s.basis, forecast::Basis::Estimate);
    assert_eq!(s.after, c.job_id("short").ok());
    // The first cycle, then the one after `short` ends: not the ends of `long` and of
    // `waits` itself.
    assert_eq!(f.steps, 2);
}

/// Ends close together are one step, within `batch_pct` of how far ahead they are: the
/// start is said at the last end of the batch (never before the end it waits for), and
/// a job that waits for nothing foreseen (a running job without an estimate) is
/// `unknown`.
#[test]
fn a_forecast_batches_close_ends_and_never_says_a_start_before_its_end() {
    let mut c = cluster(
        vec![
            node("a", "train", 1, "a100", 80, false),
            node("b", "train", 1, "a100", 80, false),
            node("c", "train", 1, "h100", 80, false),
        ],
        &[("p", 0, None)],
    );
    c.config.preemption = false;
    let h100 = |mut s: JobSpec| {
        s.gpu.models = vec!["h100".into()];
        s
    };
    c.submit(h100(job("never-ends", "p", 1, PRIORITY_MEDIUM, None)))
        .unwrap();
    c.submit(job("ends-10000", "p", 1, PRIORITY_MEDIUM, Some(10_000)))
        .unwrap();
    c.submit(job("ends-10300", "p", 1, PRIORITY_MEDIUM, Some(10_300)))
        .unwrap();
    c.schedule();
    c.set_time(10);
    c.submit(job("first", "p", 1, PRIORITY_MEDIUM, Some(50)))
        .unwrap();
    c.submit(job("second", "p", 1, PRIORITY_MEDIUM, Some(50)))
        .unwrap();
    c.submit(job("third", "p", 1, PRIORITY_MEDIUM, Some(50)))
        .unwrap();
    c.schedule();
    let f = c.forecast(
        forecast::Reach {
            batch_pct: 5,
            ..Default::default()
        },
        None,
    );
    let at = |n: &str| f.starts[&c.job_id(n).unwrap()].clone();
    // 10,300 is within 5% of 9,990 s ahead: one step at the later end.
    assert_eq!(at("first").at, Some(10_300));
    assert_eq!(at("second").at, Some(10_300));
    // `third` waits for `first` or `second` to end (50 s later) after that step.
    assert_eq!(at("third").at, Some(10_350));
    // The default.
    let f2 = c.forecast(forecast::Reach::default(), None);
    // With 2% (199 s), the two ends are two steps: `first` starts at the first end,
    // `second` when `first` ends, before the second end.
    assert_eq!(f2.starts[&c.job_id("first").unwrap()].at, Some(10_000));
    assert_eq!(f2.starts[&c.job_id("second").unwrap()].at, Some(10_050));
    // A job only node c can take waits for `never-ends`, which has no estimate and no
    // history: its start is not foreseen.
    c.submit(h100(job("on-c", "p", 1, PRIORITY_LOW, Some(50))))
        .unwrap();
    c.schedule();
    let f = c.forecast(forecast::Reach::default(), None);
    let s = &f.starts[&c.job_id("on-c").unwrap()];
    assert_eq!((s.at, s.basis), (None, forecast::Basis::Unknown));
    // Asked about one job, the forward run tells that job's start as the run for every
    // job does, and no other's.
    for n in ["first", "second", "third", "on-c"] {
        let id = c.job_id(n).unwrap();
        let one = c.forecast(forecast::Reach::default(), Some(id));
        assert_eq!(one.starts.len(), 1, "{n}");
        assert_eq!(one.starts[&id], f.starts[&id], "{n}");
    }
}

/// A finished job's explanation says how it ended, not what it would meet now: a QA
/// pass found a Succeeded job explained with "Quota: quota exceeded ...", "Nodes: 0/8
/// nodes are available" and "Nearest: a100-04 lacks cordoned".
#[test]
fn a_finished_job_is_explained_by_how_it_ended_alone() {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, Some(2))],
    );
    c.submit(job("done", "p", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.submit(job("cancelled", "p", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    c.complete(c.job_id("done").unwrap(), true, "completed");
    c.apply(Command::Cancel {
        job: "cancelled".into(),
        why: None,
    })
    .unwrap();
    c.submit(job("filler", "p", 2, PRIORITY_MEDIUM, None))
        .unwrap();
    c.schedule();
    for (name, phase) in [("done", "Succeeded"), ("cancelled", "Cancelled")] {
        let text = c.explain(c.job_id(name).unwrap()).to_string();
        assert!(text.contains(&format!("({phase})")), "{text}");
        assert!(text.contains("Reason:"), "{text}");
        for line in ["Quota:", "Nodes:", "Nearest:", "To run:", "Queue:"] {
            assert!(!text.contains(line), "{name}: {line} in\n{text}");
        }
    }
}

/// Labelling a node `pool=...` moves nothing, and the answer says why (a QA pass saw
/// "node a100-08 labelled (pool training-gpu)" and no change); the role label moves it.
#[test]
fn a_pool_label_says_that_pools_are_chosen_by_their_selectors() {
    let mut c = cluster(
        vec![node("a", "train", 2, "a100", 80, false)],
        &[("p", 0, None)],
    );
    let mut set = BTreeMap::new();
    set.insert("pool".to_string(), "inference".to_string());
    let msg = c
        .apply(Command::LabelNode {
            node: "a".into(),
            set,
            remove: vec![],
        })
        .unwrap();
    assert!(
        msg.contains("unchanged: a node's pool is chosen by the pools' node selectors, such as crater.ai/node-role=NAME"),
        "{msg}"
    );
}

#[test]
fn a_quota_refusal_tells_the_usage_the_cycle_leaves() {
    // p may use 4 GPUs. `big` (3 GPUs, high) runs; `four` (4 GPUs, medium) is refused at
    // 3 used; `one` (1 GPU, low) then starts in the same cycle: 4 used. The first line
    // of `four` tells 4, as `get quotas` and explain's quota line do, not the 3 of its
    // turn.
    let mut c = cluster(
        vec![node("a", "train", 8, "a100", 80, false)],
        &[("p", 0, Some(4))],
    );
    c.submit(job("big", "p", 3, PRIORITY_HIGH, None)).unwrap();
    c.schedule();
    c.submit(job("four", "p", 4, PRIORITY_MEDIUM, None))
        .unwrap();
    c.submit(job("one", "p", 1, PRIORITY_LOW, None)).unwrap();
    c.schedule();
    assert_eq!(phase(&c, "one"), Phase::Running);
    assert_eq!(phase(&c, "four"), Phase::Pending);
    let id = c.job_id("four").unwrap();
    let why = c.jobs[id as usize].reason.to_string();
    assert!(
        why.starts_with(
            "quota exceeded: project p in pool train: GPUs used 4 + requested 4 = 8 > max 4"
        ),
        "{why}"
    );
    assert_eq!(why, c.quota_verdict(id, 1).message);
}

#[test]
fn a_job_refused_for_room_is_told_its_quota_once_the_cycle_fills_it() {
    // p may use 8 GPUs of a 6-card node. `big` (3) runs; `four` (4, medium) finds no
    // room at its turn; `two` (2, low) starts after it: 5 used, and `four` would now
    // pass 8. The next cycle asks the quota first: so does its first line now.
    let mut c = cluster(
        vec![node("a", "train", 6, "a100", 80, false)],
        &[("p", 0, Some(8))],
    );
    c.submit(job("big", "p", 3, PRIORITY_HIGH, Some(3_600)))
        .unwrap();
    c.schedule();
    c.submit(job("four", "p", 4, PRIORITY_MEDIUM, None))
        .unwrap();
    // (It ends before `big`: backfill lets it pass `four`'s reservation.)
    c.submit(job("two", "p", 2, PRIORITY_LOW, Some(60)))
        .unwrap();
    c.schedule();
    assert_eq!(phase(&c, "two"), Phase::Running);
    let id = c.job_id("four").unwrap();
    let why = c.jobs[id as usize].reason.to_string();
    assert!(
        why.starts_with(
            "quota exceeded: project p in pool train: GPUs used 5 + requested 4 = 9 > max 8"
        ),
        "{why}"
    );
}

#[test]
fn a_job_lost_to_oom_raises_an_alert_for_its_hours() {
    // Restart policy Never: the OOM kill ends it Failed, and the alert says so.
    let mut c = cluster(
        vec![node("a", "train", 8, "a100", 80, false)],
        &[("p", 0, None)],
    );
    c.submit(job("gpt", "p", 1, PRIORITY_MEDIUM, None)).unwrap();
    c.schedule();
    c.set_time(420);
    let id = c.job_id("gpt").unwrap();
    c.fail_running(id, "OOMKilled", "exceeded its memory limit".into());
    assert_eq!(phase(&c, "gpt"), Phase::Failed);
    let oom = |c: &Cluster| {
        c.alerts()
            .into_iter()
            .find(|a| a.key == "oom/p/gpt")
            .map(|a| a.message)
    };
    assert_eq!(
        oom(&c).as_deref(),
        Some("p/gpt OOM-killed once, last at 7m00s; it ended Failed")
    );
    c.set_time(420 + alerts::OOM_ALERT_FOR_S);
    assert!(oom(&c).is_some(), "open for its hours");
    c.set_time(421 + alerts::OOM_ALERT_FOR_S);
    assert_eq!(oom(&c), None, "closed after them");
}

#[test]
fn the_nearest_node_is_one_that_could_hold_the_job_said_in_words() {
    // An h100 job: the cordoned a100 node is no nearer for it than anything else.
    let mut c = cluster(
        vec![
            node("a", "train", 8, "a100", 80, false),
            node("h", "train", 8, "h100", 80, false),
        ],
        &[("p", 0, None)],
    );
    c.config.preemption = false;
    c.apply(Command::CordonNode { node: "a".into() }).unwrap();
    let mut full = job("full", "p", 6, PRIORITY_HIGH, None);
    full.gpu.models = vec!["h100".into()];
    c.submit(full).unwrap();
    c.schedule();
    let mut want = job("want", "p", 4, PRIORITY_MEDIUM, None);
    want.gpu.models = vec!["h100".into()];
    c.submit(want).unwrap();
    c.schedule();
    let ex = c.explain(c.job_id("want").unwrap());
    let n = ex.nearest.clone().unwrap();
    assert_eq!(n.node, "h", "{n:?}");
    assert_eq!(n.lacks, vec!["2 GPU(s) (has 2 free, needs 4)".to_string()]);
    // The h100 node cordoned: it is the nearest, and says what it is.
    c.apply(Command::CordonNode { node: "h".into() }).unwrap();
    c.schedule();
    let ex = c.explain(c.job_id("want").unwrap());
    // ... and what it would still lack once uncordoned.
    assert!(
        ex.to_string()
            .contains("Nearest:   h is cordoned, and lacks 2 GPU(s) (has 2 free, needs 4)\n"),
        "{ex}"
    );
}

#[test]
fn more_quota_is_offered_a_service_only_where_all_its_missing_replicas_start() {
    let mut c = cluster(
        vec![node("a", "train", 8, "a100", 80, false)],
        &[("p", 0, Some(4))],
    );
    let mut svc = job("svc", "p", 1, PRIORITY_MEDIUM, None);
    svc.kind = JobKind::Inference(Autoscale {
        min: 1,
        max: 100,
        target_pct: 60,
        window_s: 60,
    });
    svc.replicas = 2;
    svc.affinity = Affinity::Spread;
    c.submit(svc).unwrap();
    c.schedule();
    let id = c.job_id("svc").unwrap();
    assert_eq!(c.jobs[id as usize].running_replicas(), 2);
    // 6 replicas: 4 more, 2 GPUs over the max; the node holds them all.
    c.apply(Command::Scale {
        job: "p/svc".into(),
        replicas: 6,
    })
    .unwrap();
    c.schedule();
    let s = c.explain(id).suggestions;
    assert!(
        s.iter()
            .any(|x| x.starts_with("request more quota: +2 GPUs")
                && x.contains("then its 4 missing replicas start now")),
        "{s:?}"
    );
    // 20 replicas: more quota admits them, but the 8-card node never holds 18 more.
    c.apply(Command::Scale {
        job: "p/svc".into(),
        replicas: 20,
    })
    .unwrap();
    c.schedule();
    let s = c.explain(id).suggestions;
    assert!(
        !s.iter().any(|x| x.starts_with("request more quota")),
        "{s:?}"
    );
}
