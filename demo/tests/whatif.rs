//! A what-if preview comes true: the same command applied at the same moment evicts
//! and starts exactly the jobs the preview named, leaves the same jobs Pending for the
//! same reasons, and moves quotas as it said.

use maar_demo::{Demo, Scenario};
use maar_scheduler::whatif::{what_if, Preview};
use maar_scheduler::{Actor, Command, Phase, PRIORITY_HIGH};

fn scenario(text: &str) -> Scenario {
    serde_saphyr::from_str(text).expect("scenario parses")
}

/// Commands an operator might give at this moment: drain and cordon the busiest node,
/// cordon a GPU in use, raise the last Pending job, requeue and cancel running jobs,
/// approve and reject quota requests, submit a copy of a Pending job.
fn commands(d: &Demo) -> Vec<Command> {
    let c = d.cluster();
    let mut v = Vec::new();
    let busiest = c
        .nodes
        .iter()
        .max_by_key(|n| n.gpus.iter().filter(|g| !g.allocs.is_empty()).count());
    if let Some(n) = busiest {
        v.push(Command::DrainNode {
            node: n.name.clone(),
        });
        v.push(Command::CordonNode {
            node: n.name.clone(),
        });
        if let Some(g) = n.gpus.iter().find(|g| !g.allocs.is_empty()) {
            v.push(Command::CordonGpu {
                node: n.name.clone(),
                gpu: g.index,
            });
        }
    }
    let name = |j: &maar_scheduler::Job| format!("{}/{}", j.spec.project, j.spec.name);
    if let Some(j) = c.jobs.iter().rev().find(|j| j.phase == Phase::Pending) {
        v.push(Command::SetPriority {
            job: name(j),
            priority: PRIORITY_HIGH,
        });
        let mut spec = maar_scheduler::JobSpec::clone(&j.spec);
        spec.name = format!("{}-copy", spec.name);
        v.push(Command::Submit(Box::new(spec)));
    }
    let running: Vec<_> = c
        .jobs
        .iter()
        .filter(|j| j.phase == Phase::Running)
        .collect();
    if let Some(j) = running.first() {
        v.push(Command::Requeue { job: name(j) });
    }
    if let Some(j) = running.last() {
        v.push(Command::Cancel {
            job: name(j),
            why: None,
        });
    }
    for r in &c.quota_requests {
        v.push(Command::ApproveQuota { id: r.id });
        v.push(Command::RejectQuota {
            id: r.id,
            reason: "test".into(),
        });
    }
    v
}

/// Previews every command at `moments`, applies each to its own copy, and compares.
/// Returns how many previews evicted and started something.
fn check(sc: Scenario, moments: &[u64]) -> (usize, usize, usize) {
    let (mut evicting, mut starting, mut n) = (0, 0, 0);
    let mut d = Demo::new(sc, None).unwrap();
    for &t in moments {
        d.run_until(t);
        for cmd in commands(&d) {
            let actor = Actor::system("operator");
            let p = what_if(&d.core, &d.sim, actor.clone(), cmd.clone());
            let mut real = Demo::from_parts(d.core.clone(), d.sim.clone());
            let out = real.command(actor, cmd.clone());
            assert_eq!(p.accepted, out.is_ok(), "at {t}: {cmd:?}: {}", p.message);
            let seen = Preview::between(d.cluster(), real.cluster());
            let what = format!("at {t}s, {}", p.action);
            if p.accepted {
                assert_eq!(p.evicted, seen.evicted, "{what}: evicted");
                assert_eq!(p.started, seen.started, "{what}: started");
                assert_eq!(p.quotas, seen.quotas, "{what}: quotas");
            }
            assert_eq!(p.still_pending, seen.still_pending, "{what}: still Pending");
            evicting += usize::from(!p.evicted.is_empty());
            starting += usize::from(!p.started.is_empty());
            n += 1;
        }
        // The copy's changes never reach the original.
        assert!(d
            .cluster()
            .jobs
            .iter()
            .all(|j| !j.spec.name.ends_with("-copy")));
    }
    (n, evicting, starting)
}

#[test]
fn previews_come_true_over_the_demo_day() {
    let moments: Vec<u64> = (0..=24 * 3600).step_by(45 * 60).collect();
    let (n, evicting, starting) = check(scenario(maar_demo::LAB_YAML), &moments);
    assert!(n > 200, "{n} previews");
    assert!(
        evicting > 30 && starting > 30,
        "{evicting} evicting, {starting} starting of {n}"
    );
}

#[test]
fn previews_come_true_in_every_case() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
    let moments: Vec<u64> = (0..=12 * 3600).step_by(3 * 3600).collect();
    let mut cases = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        check(scenario(&text), &moments);
        cases += 1;
    }
    assert!(cases >= 10);
}

#[test]
fn a_drain_preview_names_the_jobs_on_the_node_and_changes_nothing() {
    let mut d = Demo::new(scenario(maar_demo::LAB_YAML), None).unwrap();
    d.run_until(2 * 3600);
    let before = d.core.checkpoint();
    let node = &d.cluster().nodes[0];
    let on_node: Vec<String> = d
        .cluster()
        .jobs
        .iter()
        .filter(|j| j.placements.iter().any(|p| p.node == 0))
        .map(|j| format!("{}/{}", j.spec.project, j.spec.name))
        .collect();
    assert!(!on_node.is_empty(), "the first node is busy at 2h");
    let p = what_if(
        &d.core,
        &d.sim,
        Actor::system("operator"),
        Command::DrainNode {
            node: node.name.clone(),
        },
    );
    let mut evicted: Vec<String> = p.evicted.iter().map(|e| e.job.clone()).collect();
    evicted.sort();
    let mut want = on_node.clone();
    want.sort();
    assert_eq!(evicted, want);
    assert!(p.text(10).contains("would evict"));
    assert_eq!(d.core.checkpoint(), before, "a preview changes nothing");
}

/// A preview made at an instant and the same command scripted at that instant meet the
/// instant's faults in the same order (the world's events and the cycle after them
/// first): the scripted run ends exactly where the preview said.
#[test]
fn a_preview_and_a_command_scripted_at_the_same_instant_agree_with_its_faults() {
    let base = "name: t
seed: 3
pools: [{name: train, kind: training, selector: {crater.ai/node-role: train}}]
nodes: [{name: a100, count: 4, role: train, cpu: 64, memory: 512Gi, disk: 1Ti, gpu: {model: a100, count: 8, memory: 80Gi}}]
projects: [{name: ml, quotas: {train: {max: {gpu: 64}}}}]
random_faults: {every: 10m, kinds: [gpu_unhealthy, node_not_ready], recover_after: 1h}
workload:
  jobs:
";
    let mut jobs = String::new();
    for i in 0..6 {
        jobs.push_str(&format!(
            "    - {{at: 0s, runtime: 3h, manifest: {{apiVersion: crater.ai/v1, kind: TrainJob, metadata: {{name: j{i}, namespace: ml}}, spec: {{resources: {{pool: train, gpu: {{count: 6}}, cpu: {{cores: 8}}, memory: {{capacity: 64Gi}}}}}}}}}}\n"
        ));
    }
    for (t, node) in [(600, "a100-01"), (1200, "a100-02"), (1800, "a100-03")] {
        let plain = format!("{base}{jobs}");
        let mut d = Demo::new(scenario(&plain), None).unwrap();
        d.run_until(t);
        let cmd = Command::DrainNode { node: node.into() };
        let p = what_if(&d.core, &d.sim, Actor::system("scenario"), cmd);
        let scripted =
            format!("{plain}commands: [{{at: {t}s, run: {{drain_node: {{node: {node}}}}}}}]\n");
        let mut s = Demo::new(scenario(&scripted), None).unwrap();
        s.run_until(t);
        let seen = Preview::between(d.cluster(), s.cluster());
        assert_eq!(p.evicted, seen.evicted, "at {t}s: evicted");
        assert_eq!(p.started, seen.started, "at {t}s: started");
        assert_eq!(
            p.still_pending, seen.still_pending,
            "at {t}s: still Pending"
        );
    }
}
