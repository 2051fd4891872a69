//! The field cases of issue #2, each a scenario in demo/cases/, each asserting on the
//! explanation (or the events) the operator would read.

use std::path::Path;

use maar::load::load_scenario;
use maar_demo::Demo;
use maar_scheduler::Phase;

fn sim(case: &str, at: &str) -> Demo {
    let path = format!("demo/cases/{case}.yaml");
    let sc = load_scenario(Some(Path::new(&path))).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Demo::new(sc, None).unwrap().keep_events();
    sim.run_until(maar_scheduler::quantity::parse_duration_s(at).unwrap());
    sim
}

fn job<'a>(sim: &'a Demo, name: &str) -> &'a maar_scheduler::Job {
    &sim.cluster().jobs[sim.cluster().job_id(name).unwrap() as usize]
}

fn events<'a>(sim: &'a Demo, reason: &str) -> Vec<&'a maar_scheduler::Event> {
    sim.events().iter().filter(|e| e.reason == reason).collect()
}

#[test]
fn a_card_memory_not_insufficient_gpus() {
    let s = sim("a-card-memory", "10m");
    let id = s.cluster().job_id("big-cards").unwrap();
    let ex = s.cluster().explain(id);
    assert_eq!(ex.phase, "Pending");
    // The only node's cards are too small for good: no node counted as available
    // or short of room, and the first line names the constraint and its value.
    assert_eq!(
        ex.summary,
        "no node of pool training-gpu can ever take it: 1 GPU memory per card 16Gi < 32Gi requested"
    );
    assert!(!ex.summary.contains("insufficient free GPUs"));
    assert_eq!(
        &*job(&s, "big-cards").reason,
        "can never run as asked: every node of pool training-gpu keeps it off (1 GPU memory per card 16Gi < 32Gi requested)"
    );
    assert!(ex.quota.ok, "{}", ex.quota.message);
    assert!(
        ex.suggestions
            .iter()
            .any(|x| x.contains("smaller per-card memory") && x.contains("16Gi")),
        "{:?}",
        ex.suggestions
    );
    assert_eq!(ex.reason, *job(&s, "big-cards").reason);
}

#[test]
fn b_not_ready_and_unhealthy_are_named() {
    let s = sim("b-unhealthy", "10m");
    let ex = s
        .cluster()
        .explain(s.cluster().job_id("four-gpus").unwrap());
    assert!(
        ex.summary.starts_with("0/2 nodes are available: "),
        "{}",
        ex.summary
    );
    assert!(
        ex.summary.contains("1 NotReady (KubeletDown)"),
        "{}",
        ex.summary
    );
    assert!(
        ex.summary.contains("1 GPUs unhealthy (XID 79)"),
        "{}",
        ex.summary
    );
    let n = ex.nearest.unwrap();
    assert_eq!(n.node, "a100-xid");
    assert!(
        n.lacks[0].contains("2 healthy GPU(s) (XID 79)"),
        "{:?}",
        n.lacks
    );
}

#[test]
fn c_unlabelled_gpus_count_as_none() {
    let s = sim("c-unlabelled", "10m");
    let ex = s
        .cluster()
        .explain(s.cluster().job_id("needs-gpu").unwrap());
    assert!(
        ex.summary
            .contains("1 GPUs present but crater.ai/gpu-model and gpu-count labels missing"),
        "{}",
        ex.summary
    );
    let snap = s.cluster().snapshot();
    assert_eq!(
        snap.nodes[0].gpus_total, 0,
        "unlabelled GPUs are not schedulable"
    );
    assert_eq!(snap.nodes[0].gpus.len(), 8, "but they are still shown");
    assert_eq!(snap.metrics.total.gpu_milli, 0);
}

#[test]
fn d_quota_exhausted_with_numbers_while_cards_are_free() {
    let s = sim("d-quota", "10m");
    assert_eq!(job(&s, "first").phase, Phase::Running);
    let ex = s.cluster().explain(s.cluster().job_id("second").unwrap());
    assert!(!ex.quota.ok);
    assert!(
        ex.quota
            .message
            .contains("GPUs used 4 + requested 2 = 6 > max 4 (reserved 2)"),
        "{}",
        ex.quota.message
    );
    assert_eq!(ex.nodes_available, 2, "the cluster has free cards");
    assert!(
        ex.suggestions
            .iter()
            .any(|x| x.contains("request more quota: +2 GPUs")),
        "{:?}",
        ex.suggestions
    );
    assert_eq!(&*job(&s, "second").reason, ex.quota.message);
}

#[test]
fn e_hard_model_constraint_waits_and_names_the_model() {
    let s = sim("e-model", "30m");
    assert_eq!(job(&s, "wants-a100").phase, Phase::Pending);
    let ex = s
        .cluster()
        .explain(s.cluster().job_id("wants-a100").unwrap());
    // The two 4090 nodes are never counted as nodes it could use.
    assert_eq!(
        ex.summary,
        "0/1 nodes are available: 1 insufficient free GPUs; 2 nodes it can never use: 2 GPU model rtx4090 not in [a100]"
    );
    assert_eq!(&*job(&s, "wants-a100").reason, ex.summary);
    assert!(
        ex.suggestions
            .iter()
            .any(|x| x.contains("allowing other GPU models")),
        "{:?}",
        ex.suggestions
    );
    // Once the A100s free up it runs there, not on a 4090.
    let s = sim("e-model", "2h05m");
    let j = job(&s, "wants-a100");
    assert_eq!(j.phase, Phase::Running);
    assert_eq!(
        s.cluster().nodes[j.placements[0].node as usize].name,
        "a100"
    );
}

#[test]
fn f_same_node_gang_blocked_by_fragmentation() {
    let s = sim("f-fragmentation", "10m");
    let ex = s
        .cluster()
        .explain(s.cluster().job_id("eight-gpu").unwrap());
    assert_eq!(
        ex.summary,
        "0/4 nodes are available: 4 insufficient free GPUs"
    );
    let f = ex.fragmentation.expect("fragmentation named");
    assert!(
        f.contains("8 compatible GPUs are free across 4 nodes, but at most 2 on any one node"),
        "{f}"
    );
    assert!(job(&s, "eight-gpu").reason.contains("fragmentation"));
}

#[test]
fn g_high_priority_preempts_and_events_name_victims() {
    let s = sim("g-preemption", "30m");
    assert_eq!(job(&s, "urgent").phase, Phase::Running);
    // Fewest victims: one 2-GPU job rather than two 1-GPU jobs.
    let pre = events(&s, "Preempted");
    assert_eq!(pre.len(), 1);
    assert_eq!(pre[0].object, "job/cv/low-1");
    assert_eq!(
        pre[0].message,
        "preempted by job/ml-prod/urgent (priority high)"
    );
    assert_eq!(pre[0].time, 600);
    let ing = events(&s, "Preempting");
    assert!(ing[0].message.contains("job/cv/low-1"));
    assert_eq!(job(&s, "low-1").phase, Phase::Pending);
    assert_eq!(job(&s, "low-2").phase, Phase::Running);
    assert!(
        job(&s, "low-1")
            .reason
            .contains("preempted by job/ml-prod/urgent")
            || job(&s, "low-1").reason.contains("nodes are available")
    );
}

#[test]
fn h_oom_never_fails_on_failure_restarts_with_backoff() {
    let s = sim("h-oom", "1h");
    let a = job(&s, "no-restart");
    assert_eq!(a.phase, Phase::Failed);
    assert_eq!(&*a.reason, "OOMKilled (restart policy Never)");
    let b = job(&s, "with-restart");
    assert_eq!(b.restarts, 2);
    assert_eq!(b.phase, Phase::Failed);
    assert_eq!(&*b.reason, "OOMKilled (restart limit 2 reached)");
    let backoffs: Vec<_> = events(&s, "BackOff")
        .into_iter()
        .map(|e| (e.time, e.message.clone()))
        .collect();
    assert_eq!(
        backoffs,
        vec![
            (600, "restart 1/2 after OOMKilled, back-off 30s".to_string()),
            (
                1200,
                "restart 2/2 after OOMKilled, back-off 60s".to_string()
            ),
        ]
    );
    assert_eq!(events(&s, "OOMKilled").len(), 4);
    // It really ran again after the first back-off.
    let sched: Vec<u64> = s
        .events()
        .iter()
        .filter(|e| e.reason == "Scheduled" && e.object == "job/ml-prod/with-restart")
        .map(|e| e.time)
        .collect();
    assert_eq!(sched, vec![0, 630, 1260]);
}

#[test]
fn i_disk_request_larger_than_free_disk() {
    let s = sim("i-disk", "10m");
    let ex = s
        .cluster()
        .explain(s.cluster().job_id("big-dataset").unwrap());
    assert_eq!(
        ex.summary,
        "no node of pool training-gpu can ever take it: 2 too small for it even empty"
    );
    // 3Ti asked of nodes with 2Ti disks: never, with the largest node's size named
    // (not "insufficient disk", which waiting would seem to cure).
    assert_eq!(
        &*job(&s, "big-dataset").reason,
        "can never run as asked: no node of pool training-gpu could hold 1x GPU, 8 CPU, 64Gi mem, 3Ti disk even empty; the largest, a100-01, has 8 GPUs (a100 80Gi), 64 CPU, 512Gi memory, 2Ti disk"
    );
    assert!(
        !ex.suggestions.iter().any(|x| x.starts_with("wait")),
        "{:?}",
        ex.suggestions
    );
    let n = ex.nearest.unwrap();
    assert!(
        n.lacks
            .iter()
            .any(|l| l.contains("disk (has 2Ti free, needs 3Ti)")),
        "{:?}",
        n.lacks
    );
    assert!(events(&s, "DiskPressure")
        .iter()
        .any(|e| e.object == "node/a100-02" && e.message == "disk 95% used"));
}

#[test]
fn j_inference_scales_down_lends_and_reclaims() {
    // 18:00 at t=0; the night is around t=6h..12h; the peak is 14:00 = t=20h.
    let night = sim("j-diurnal", "10h");
    let chat = job(&night, "chat");
    assert!(
        chat.desired_replicas <= 2,
        "scaled down at night: {}",
        chat.desired_replicas
    );
    let downs = events(&night, "ScaledDown");
    assert!(!downs.is_empty());
    // Never before the 300 s stabilization window has passed since the last scale-up.
    let ups: Vec<u64> = night
        .events()
        .iter()
        .filter(|e| e.reason == "ScaleUpRequested")
        .map(|e| e.time)
        .collect();
    for d in &downs {
        assert!(d.time >= 300, "scaled down inside the first window");
        assert!(
            ups.iter().all(|&u| u > d.time || d.time - u >= 300),
            "down at {} too soon after an up",
            d.time
        );
    }
    // Training borrowed inference GPUs at night.
    let on_loan = night
        .cluster()
        .jobs
        .iter()
        .filter(|j| j.spec.project == "ml-prod" && j.placements.iter().any(|p| p.on_loan))
        .count();
    assert!(on_loan >= 3, "training on loan: {on_loan}");
    // Explain tells lent nodes apart from the pool's own, for both pools.
    let c = night.cluster();
    let borrower = c
        .jobs
        .iter()
        .find(|j| j.spec.project == "ml-prod" && j.placements.iter().any(|p| p.on_loan))
        .unwrap();
    let ex = c.explain(borrower.id);
    assert!(
        ex.loans
            .iter()
            .any(|l| l.contains(" lends ") && l.contains("to pool")),
        "{:?}",
        ex.loans
    );
    // Before the peak inference took them back.
    let peak = sim("j-diurnal", "20h");
    let reclaimed: Vec<_> = events(&peak, "Reclaimed");
    assert!(!reclaimed.is_empty());
    assert!(reclaimed
        .iter()
        .all(|e| e.object.starts_with("job/ml-prod/") && e.time < 20 * 3600));
    assert!(reclaimed
        .iter()
        .all(|e| e.message == "evicted to return borrowed capacity to job/ai-service/chat"));
    // A reclaimed job still Pending keeps saying so after later cycles, with where it
    // ran and whose nodes those were: look minute by minute after the first reclaim.
    let first = reclaimed.iter().map(|e| e.time).min().unwrap();
    let mut d = Demo::new(
        load_scenario(Some(std::path::Path::new("demo/cases/j-diurnal.yaml"))).unwrap(),
        None,
    )
    .unwrap();
    let mut told = false;
    for t in (first + 60..first + 3 * 3600).step_by(60) {
        d.run_until(t);
        let c = d.cluster();
        let hit = c.jobs.iter().find(|j| {
            j.phase == Phase::Pending
                && j.evicted.as_ref().is_some_and(|(at, _)| *at + 60 <= t)
                && j.spec.project == "ml-prod"
        });
        if let Some(j) = hit {
            let ex = c.explain(j.id);
            let ev = ex.evicted.clone().expect("the reclaim is still told");
            assert!(
                ev.contains("evicted to return borrowed capacity to job/ai-service/chat"),
                "{ev}"
            );
            assert!(ev.contains("(on loan from pool"), "{ev}");
            assert!(ex.to_string().contains("Evicted:   at "));
            told = true;
            break;
        }
    }
    assert!(told, "some reclaimed job waited a cycle or more");
    let chat = job(&peak, "chat");
    assert!(
        chat.running_replicas() >= 6,
        "peak replicas {}",
        chat.running_replicas()
    );
    // The lender's own work is never preempted by borrowers.
    assert!(events(&peak, "Preempted")
        .iter()
        .all(|e| e.object != "job/ai-service/chat"));
}

#[test]
fn example_trainjob_runs_as_is_on_the_demo_lab() {
    let text = std::fs::read_to_string("../shared/examples/trainjob-gpt-finetune.yaml");
    let Ok(text) = text else {
        eprintln!("skipping: ../shared/examples is absent");
        return;
    };
    let spec = maar::load::parse_manifest("trainjob-gpt-finetune.yaml", &text).unwrap();
    assert_eq!(
        (
            spec.name.as_str(),
            spec.project.as_str(),
            spec.pool.as_str()
        ),
        ("gpt-finetune-demo", "ml-prod", "training-gpu")
    );
    assert_eq!(spec.gpu.count, 2);
    assert_eq!(spec.gpu.memory_per_card, Some(32 << 30));
    assert_eq!(spec.affinity, maar_scheduler::Affinity::SameNode);
    let mut s = Demo::new(load_scenario(None).unwrap(), None)
        .unwrap()
        .keep_events();
    s.run_until(60);
    // The lab runs the same job under its own name (so the example submits cleanly).
    let j = job(&s, "ml-prod/gpt-finetune-lab");
    assert_eq!(j.phase, Phase::Running);
    assert_eq!(j.placements.len(), 1);
    assert_eq!(j.placements[0].gpus.len(), 2, "both GPUs on one node");
}

#[test]
fn k_gpu_model_speed_sets_runtime_and_explain_says_the_cost() {
    let s = sim("k-speed", "10m");
    assert_eq!(job(&s, "wants-h100").phase, Phase::Pending);
    let ex = s
        .cluster()
        .explain(s.cluster().job_id("wants-h100").unwrap());
    let other = ex
        .suggestions
        .iter()
        .find(|x| x.starts_with("allowing other GPU models than [h100] would start it now"))
        .unwrap_or_else(|| panic!("{:?}", ex.suggestions));
    assert!(
        other.contains("on v100, 0.30x the speed, it runs 3h20m instead of 1h00m"),
        "{other}"
    );
    // The H100 frees at 30m: 20m of waiting plus 1h beats 3h20m on the V100.
    assert!(
        other.contains(
            "waiting for [h100] (room expected in 20m00s) finishes sooner: in 1h20m against 3h20m"
        ),
        "{other}"
    );
    // The job that takes any card landed on a V100 and runs 1h / 0.3.
    let any = job(&s, "any-card");
    assert_eq!(any.phase, Phase::Running);
    assert_eq!(
        s.cluster().nodes[any.placements[0].node as usize].name,
        "v100"
    );
    assert_eq!(any.remaining_s, Some(12_000));
    // It ends 3h20m after its start (2m), not 1h after: the run figures show it.
    let s = sim("k-speed", "3h21m");
    let any = job(&s, "any-card");
    assert_eq!(any.phase, Phase::Running, "still running at 3h21m");
    let s = sim("k-speed", "3h23m");
    let any = job(&s, "any-card");
    assert_eq!(any.phase, Phase::Succeeded);
    assert_eq!(any.run_s, 12_000);
    // The waiting H100 job runs its 1h on the H100 once the hog ends.
    let w = job(&s, "wants-h100");
    assert_eq!(w.phase, Phase::Succeeded);
    assert_eq!(w.run_s, 3600);
}

#[test]
fn speeds_out_of_range_are_refused_with_the_field() {
    let dir = std::env::temp_dir().join(format!("maar-speed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.yaml");
    let text = std::fs::read_to_string("demo/cases/k-speed.yaml")
        .unwrap()
        .replace("v100: 0.3}", "v100: 0}");
    std::fs::write(&p, text).unwrap();
    let e = match load_scenario(Some(&p)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a speed of 0 was accepted"),
    };
    assert!(e.contains("bad.yaml") && e.contains(":6"), "{e}");
    assert!(e.contains("speeds.v100"), "{e}");
}

/// The users' TrainJob with `crater.ai/cluster` added as they would add it (a label,
/// or an annotation, which wins): read as the cluster it asks for; a value that names
/// no cluster is refused naming the field and line. Without it, none.
#[test]
fn a_trainjobs_cluster_is_read_from_its_label_or_annotation() {
    let Ok(text) = std::fs::read_to_string("../shared/examples/trainjob-gpt-finetune.yaml") else {
        eprintln!("skipping: ../shared/examples is absent");
        return;
    };
    let file = "trainjob-gpt-finetune.yaml";
    assert_eq!(
        maar::load::parse_manifest(file, &text).unwrap().cluster,
        None
    );
    let with = |meta: &str| {
        text.replace(
            "  namespace: ml-prod\n",
            &format!("  namespace: ml-prod\n{meta}"),
        )
    };
    let labelled = with("  labels:\n    crater.ai/cluster: auto\n");
    assert_eq!(
        maar::load::parse_manifest(file, &labelled)
            .unwrap()
            .cluster
            .as_deref(),
        Some("auto")
    );
    let both = with(
        "  labels:\n    crater.ai/cluster: auto\n  annotations:\n    crater.ai/cluster: site-b\n",
    );
    assert_eq!(
        maar::load::parse_manifest(file, &both)
            .unwrap()
            .cluster
            .as_deref(),
        Some("site-b")
    );
    let bad = with("  annotations:\n    crater.ai/cluster: \"site b\"\n");
    let e = maar::load::parse_manifest(file, &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("metadata.annotations.crater.ai/cluster"), "{e}");
    assert!(e.contains("is not a cluster: `auto`"), "{e}");
    assert!(e.contains(file), "{e}");
}
