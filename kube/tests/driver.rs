//! The watch-to-model mapping and the driver's decisions, fed by hand what a watch
//! delivers (objects in the API's own JSON): nodes join, pods queue, bind, end; a
//! relist after a dropped watch loses nothing; kubectl's cordon is honoured.

use k8s_openapi::api::core::v1::{Node as KNode, Pod as KPod};
use maar_kube::map::Owner;
use maar_kube::world::{ObjectSeen, PodSeen, Seen, Watched, Write};
use maar_kube::KubeDriver;
use maar_scheduler::model::Health;
use maar_scheduler::{Cluster, Core, Phase, SchedConfig};
use serde_json::{json, Value};

fn node(name: &str, gpus: u32, model: &str, extra: Value) -> Box<KNode> {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "crater.ai/node-role": "training",
            "crater.ai/gpu-vendor": "nvidia",
            "crater.ai/gpu-model": model,
            "crater.ai/gpu-memory": "80Gi",
            "crater.ai/gpu-count": gpus.to_string(),
        }},
        "spec": {},
        "status": {
            "capacity": {"cpu": "64", "memory": "528012344Ki", "nvidia.com/gpu": gpus.to_string(), "pods": "110"},
            "allocatable": {"cpu": "63500m", "memory": "527912344Ki", "ephemeral-storage": "900Gi", "nvidia.com/gpu": gpus.to_string(), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    });
    merge(&mut v, extra);
    Box::new(serde_json::from_value(v).expect("a node"))
}

fn pod(ns: &str, name: &str, gpus: u32, extra: Value) -> Box<PodSeen> {
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
        "spec": {
            "schedulerName": "maar",
            "containers": [{"name": "main", "image": "pytorch:2.3",
                "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": gpus.to_string()},
                              "limits": {"nvidia.com/gpu": gpus.to_string()}}}],
        },
        "status": {"phase": "Pending"},
    });
    merge(&mut v, extra);
    let p: KPod = serde_json::from_value(v).expect("a pod");
    Box::new(PodSeen::of(&p))
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    a.remove(&k);
                } else {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (a, b) => *a = b,
    }
}

#[allow(clippy::vec_box)] // the boxes are what the watch delivers
fn lists(nodes: Vec<Box<KNode>>, pods: Vec<Box<PodSeen>>) -> Vec<Seen> {
    let mut s = vec![
        // No Pool or Quota objects: pools come from the nodes' roles, projects are open.
        Seen::Pool(Watched::InitDone),
        Seen::Quota(Watched::InitDone),
        Seen::Object(Owner::TrainJob, Watched::Init),
        Seen::Object(Owner::TrainJob, Watched::InitDone),
        Seen::Object(Owner::InferenceService, Watched::InitDone),
        Seen::Namespace(Watched::Init),
        Seen::Namespace(Watched::InitApply("ml".into())),
        Seen::Namespace(Watched::InitDone),
        Seen::Pod(Watched::Init),
    ];
    // Pods may come before nodes: they wait for the node list.
    s.extend(pods.into_iter().map(|p| Seen::Pod(Watched::InitApply(p))));
    s.push(Seen::Pod(Watched::InitDone));
    s.push(Seen::Node(Watched::Init));
    s.extend(nodes.into_iter().map(|n| Seen::Node(Watched::InitApply(n))));
    s.push(Seen::Node(Watched::InitDone));
    s
}

fn phase(core: &Core, job: &str) -> Phase {
    let c = core.cluster();
    c.jobs[c.job_id(job).unwrap() as usize].phase
}

/// The objects (TrainJobs, InferenceServices) `writes` make.
fn created(writes: &[Write]) -> Vec<&Value> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::CreateObject { object, .. } => Some(object),
            _ => None,
        })
        .collect()
}

/// A training Pool object whose selector is one label.
fn training_pool(name: &str, key: &str, value: &str) -> maar_kube::map::PoolObject {
    maar_kube::map::PoolObject {
        name: name.into(),
        kind: maar_scheduler::model::PoolKind::Training,
        selector: [(key.to_string(), value.to_string())].into(),
        lend_to: vec![],
        overcommit: Default::default(),
    }
}

/// gpu-n3, 8 a100 cards of role `gpu`, and gpu-n1 of `cards` a100 cards and no role
/// (the role pool `training`).
#[allow(clippy::vec_box)] // what `lists` takes
fn role_gpu_n3_and_plain_n1(cards: u32) -> Vec<Box<KNode>> {
    vec![
        node(
            "gpu-n3",
            8,
            "a100",
            json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}}),
        ),
        node("gpu-n1", cards, "a100", json!({})),
    ]
}

fn new_core() -> Core {
    Core::new(Cluster::new(SchedConfig::default()))
}

#[test]
fn pods_are_queued_bound_and_told_why_not() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let seen = lists(
        vec![
            node("gpu-a", 8, "a100", json!({})),
            node("gpu-b", 8, "a100", json!({"spec": {"unschedulable": true}})),
            // A GPU node nobody labelled: in no pool.
            node(
                "gpu-c",
                4,
                "h100",
                json!({"metadata": {"labels": {"crater.ai/node-role": null}}}),
            ),
        ],
        vec![
            pod("ml", "fits", 4, json!({})),
            pod("ml", "never", 16, json!({})),
            pod(
                "ml",
                "kube-scheduled",
                1,
                json!({"spec": {"schedulerName": "default-scheduler"}}),
            ),
        ],
    );
    let (_, writes) = d.step(&mut core, 1, seen);
    let c = core.cluster();
    assert_eq!(c.nodes.len(), 3);
    assert_eq!(c.pool_id("training"), Some(0));
    assert!(c.nodes[c.node_id("gpu-b").unwrap() as usize].cordoned);
    assert_eq!(c.nodes[c.node_id("gpu-a").unwrap() as usize].gpus.len(), 8);
    assert_eq!(
        c.nodes[c.node_id("gpu-a").unwrap() as usize].cpu_milli,
        63_500
    );
    // Only maar's pods are jobs.
    assert_eq!(c.jobs.len(), 2);
    let bind = writes
        .iter()
        .find_map(|w| match w {
            Write::Bind {
                job, node, gpus, ..
            } if job == "ml/fits" => Some((node.clone(), gpus.len())),
            _ => None,
        })
        .expect("the pod that fits is bound");
    assert_eq!(bind, ("gpu-a".to_string(), 4));
    let why = writes
        .iter()
        .find_map(|w| match w {
            Write::Unschedulable {
                job, uid, message, ..
            } if job == "ml/never" => {
                assert_eq!(uid, "uid-never");
                Some(message.clone())
            }
            _ => None,
        })
        .expect("the pod that cannot fit is told why");
    assert!(why.contains("16x GPU") || why.contains("16"), "{why}");

    // The bind is confirmed: the job runs; then the pod is OOMKilled.
    d.step(
        &mut core,
        2,
        vec![Seen::Bound {
            job: "ml/fits".into(),
            result: Ok(()),
        }],
    );
    assert_eq!(phase(&core, "ml/fits"), Phase::Running);
    let oom = pod(
        "ml",
        "fits",
        4,
        json!({"spec": {"nodeName": "gpu-a"}, "status": {"phase": "Failed", "containerStatuses": [{
            "name": "main", "image": "pytorch:2.3", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}}),
    );
    d.step(&mut core, 3, vec![Seen::Pod(Watched::Apply(oom))]);
    let c = core.cluster();
    let j = &c.jobs[c.job_id("ml/fits").unwrap() as usize];
    assert_eq!(j.phase, Phase::Failed);
    assert!(j.reason.contains("OOMKilled"), "{}", j.reason);
    // The waiting pod is not told again within the retell window.
    let (_, writes) = d.step(&mut core, 4, vec![]);
    assert!(
        !writes
            .iter()
            .any(|w| matches!(w, Write::Unschedulable { .. })),
        "{writes:?}"
    );
}

#[test]
fn the_pods_of_the_first_lists_are_bound_at_the_first_poll_not_the_next_second() {
    use maar_scheduler::input::Driver;
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    // As `first_lists` feeds them, before the engine starts: seen, no cycle.
    let (mut events, mut writes) = (Vec::new(), Vec::new());
    let seen = lists(
        vec![node("gpu-a", 8, "a100", json!({}))],
        vec![pod("ml", "p", 2, json!({}))],
    );
    for s in seen {
        d.see(&mut core, s, &mut events, &mut writes);
    }
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Bind { .. })),
        "{writes:?}"
    );
    assert_eq!(phase(&core, "ml/p"), Phase::Pending);
    // The engine's first look between seconds binds it (it waited for the clock's
    // first whole second: a bind about 1 s after the start).
    Driver::poll(&mut d, &mut core);
    let binds: Vec<_> = d
        .take_unsent()
        .into_iter()
        .filter(|w| matches!(w, Write::Bind { job, .. } if job == "ml/p"))
        .collect();
    assert_eq!(binds.len(), 1, "{binds:?}");
    // Nothing new seen after that cycle: the next looks do nothing.
    Driver::poll(&mut d, &mut core);
    std::thread::sleep(maar_kube::driver::POLL_EVERY);
    Driver::poll(&mut d, &mut core);
    assert!(d.take_unsent().is_empty());
}

#[test]
fn a_bind_that_fails_returns_the_job_to_the_queue_and_it_is_bound_again() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![pod("ml", "p", 2, json!({}))],
        ),
    );
    let c = core.cluster();
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Bind { job, .. } if job == "ml/p")),
        "{writes:?} {:?}",
        c.jobs
            .iter()
            .map(|j| (&j.spec.name, j.phase, j.reason.to_string()))
            .collect::<Vec<_>>()
    );
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Bound {
            job: "ml/p".into(),
            result: Err("Operation cannot be fulfilled: 409 Conflict".into()),
        }],
    );
    // Back in the queue, and placed again in the same step.
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Bind { job, .. } if job == "ml/p")),
        "{writes:?}"
    );
}

#[test]
fn kubectl_cordon_a_deleted_node_and_a_deleted_pod_reach_the_core() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    d.step(
        &mut core,
        1,
        lists(
            vec![
                node("gpu-a", 8, "a100", json!({})),
                node("gpu-b", 8, "a100", json!({})),
            ],
            vec![pod("ml", "big", 16, json!({}))],
        ),
    );
    // kubectl cordon gpu-a.
    d.step(
        &mut core,
        2,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            8,
            "a100",
            json!({"spec": {"unschedulable": true}}),
        )))],
    );
    let c = core.cluster();
    assert!(c.nodes[c.node_id("gpu-a").unwrap() as usize].cordoned);
    // The watch drops; the relist no longer has gpu-b: it was deleted meanwhile.
    d.step(
        &mut core,
        3,
        vec![
            Seen::Node(Watched::Init),
            Seen::Node(Watched::InitApply(node(
                "gpu-a",
                8,
                "a100",
                json!({"spec": {"unschedulable": true}}),
            ))),
            Seen::Node(Watched::InitDone),
        ],
    );
    let c = core.cluster();
    let b = &c.nodes[c.node_id("gpu-b").unwrap() as usize];
    assert!(!b.ready(), "{:?}", b.condition);
    // The pod is deleted with kubectl: its job is cancelled.
    d.step(
        &mut core,
        4,
        vec![Seen::Pod(Watched::Delete(pod("ml", "big", 16, json!({}))))],
    );
    assert_eq!(phase(&core, "ml/big"), Phase::Cancelled);
    // Facts of the world, not an operator's commands: the job says what happened to
    // it, and the cordon's event is the node's own.
    let c = core.cluster();
    assert_eq!(
        &*c.jobs[c.job_id("ml/big").unwrap() as usize].reason,
        "its pod was deleted"
    );
    assert!(c
        .events
        .iter()
        .any(|e| e.reason == "NodeCordoned" && e.object == "node/gpu-a"));
}

#[test]
fn a_pod_bound_before_maar_started_holds_its_cards() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![
                pod(
                    "ml",
                    "old",
                    6,
                    json!({"metadata": {"annotations": {"crater.ai/gpu-indices": "2,3,4,5,6,7"}},
                           "spec": {"nodeName": "gpu-a"}, "status": {"phase": "Running"}}),
                ),
                pod("ml", "new", 4, json!({})),
            ],
        ),
    );
    let c = core.cluster();
    let old = &c.jobs[c.job_id("ml/old").unwrap() as usize];
    assert_eq!(old.phase, Phase::Running);
    let cards: Vec<u32> = old.placements[0].gpus.iter().map(|g| g.gpu).collect();
    assert_eq!(cards, vec![2, 3, 4, 5, 6, 7]);
    // Two cards left: the 4-GPU pod waits instead of being bound on top of it.
    assert_eq!(phase(&core, "ml/new"), Phase::Pending);
}

fn trainjob(ns: &str, name: &str, spec: Value) -> Box<ObjectSeen> {
    object(Owner::TrainJob, ns, name, spec)
}

fn object(owner: Owner, ns: &str, name: &str, spec: Value) -> Box<ObjectSeen> {
    let o: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": owner.kind(),
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
            "resourceVersion": "12", "generation": 1,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": spec,
    }))
    .unwrap();
    Box::new(ObjectSeen::of(owner, &o))
}

fn owned_pod(ns: &str, tj: &str, name: &str, node: &str, phase: &str) -> Box<PodSeen> {
    pod(
        ns,
        name,
        2,
        json!({"metadata": {"labels": {"crater.ai/trainjob": tj}},
               "spec": {"nodeName": node}, "status": {"phase": phase}}),
    )
}

#[test]
fn the_users_trainjob_runs_as_pods_made_on_its_nodes_and_ends_with_them() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    // The users' own file, as kubectl applies it.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/examples/trainjob-gpt-finetune.yaml"
    ));
    let Ok(text) = text else {
        eprintln!("skipped: ../shared/examples is not here");
        return;
    };
    let v: Value = serde_saphyr::from_str(&text).unwrap();
    let mut seen = vec![
        // The pool it names, as a Pool object over the users' node labels.
        Seen::Pool(Watched::InitApply(Ok(training_pool(
            "training-gpu",
            "crater.ai/node-role",
            "gpu",
        )))),
        Seen::Pool(Watched::InitDone),
    ];
    seen.extend(lists(
        vec![node(
            "gpu-node-01",
            8,
            "a100",
            json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}}),
        )],
        vec![],
    ));
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(trainjob("ml-prod", "gpt-finetune-demo", v["spec"].clone())),
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    let (replicas, spec) = writes
        .iter()
        .find_map(|w| match w {
            Write::CreatePods {
                job,
                uid,
                spec,
                pods,
                owner: Owner::TrainJob,
                answer: true,
                ..
            } if job == "ml-prod/gpt-finetune-demo" => {
                assert_eq!(uid, "uid-gpt-finetune-demo");
                assert_eq!(pods[0].name, "gpt-finetune-demo-0");
                Some((
                    pods.iter().map(|p| p.at.clone()).collect::<Vec<_>>(),
                    spec.clone(),
                ))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("its pods are made: {writes:?}"));
    assert_eq!(replicas.len(), 1);
    assert_eq!(replicas[0].node, "gpu-node-01");
    assert_eq!(replicas[0].gpus.len(), 2);
    assert_eq!(spec.pool, "training-gpu");
    // The pod maar would create: bound, owned, its cards annotated.
    let body = maar_kube::map::owned_pod(
        Owner::TrainJob,
        &spec,
        "ml-prod",
        "uid-gpt-finetune-demo",
        &Default::default(),
        "gpt-finetune-demo-0",
        0,
        1,
        "gpu-node-01",
        &replicas[0].gpus,
    );
    assert_eq!(body["spec"]["nodeName"], "gpu-node-01");
    assert_eq!(
        body["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "2"
    );
    assert_eq!(
        body["spec"]["containers"][0]["image"],
        "registry.example.com/ai/pytorch-train:2.1"
    );
    assert_eq!(body["metadata"]["ownerReferences"][0]["kind"], "TrainJob");
    let _: k8s_openapi::api::core::v1::Pod = serde_json::from_value(body).expect("a valid pod");

    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Bound {
            job: "ml-prod/gpt-finetune-demo".into(),
            result: Ok(()),
        }],
    );
    assert_eq!(phase(&core, "ml-prod/gpt-finetune-demo"), Phase::Running);
    assert!(
        writes.iter().any(|w| matches!(w, Write::ObjectStatus { phase, nodes, .. } if phase == "Running" && nodes == &["gpu-node-01"])),
        "{writes:?}"
    );
    // Its pod appears (made by maar) and runs, then succeeds: the TrainJob succeeds.
    d.step(
        &mut core,
        3,
        vec![Seen::Pod(Watched::Apply(owned_pod(
            "ml-prod",
            "gpt-finetune-demo",
            "gpt-finetune-demo-0",
            "gpu-node-01",
            "Running",
        )))],
    );
    assert_eq!(phase(&core, "ml-prod/gpt-finetune-demo"), Phase::Running);
    let (_, writes) = d.step(
        &mut core,
        4,
        vec![Seen::Pod(Watched::Apply(owned_pod(
            "ml-prod",
            "gpt-finetune-demo",
            "gpt-finetune-demo-0",
            "gpu-node-01",
            "Succeeded",
        )))],
    );
    assert_eq!(phase(&core, "ml-prod/gpt-finetune-demo"), Phase::Succeeded);
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::ObjectStatus { phase, .. } if phase == "Succeeded")),
        "{writes:?}"
    );
    // Pods that ended are kept (their logs): nothing deleted.
    assert!(
        !writes.iter().any(|w| matches!(w, Write::DeletePods { .. })),
        "{writes:?}"
    );
}

#[test]
fn a_trainjob_in_a_pool_not_here_waits_and_starts_when_the_pool_appears() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let spec = json!({"image": "i", "resources": {"pool": "training-gpu", "gpu": {"count": 1}}});
    let mut seen = lists(vec![node("gpu-a", 8, "a100", json!({}))], vec![]);
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(trainjob("ml", "t", spec)),
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    let why = writes
        .iter()
        .find_map(|w| match w {
            Write::Unschedulable {
                job,
                message,
                object: Some(Owner::TrainJob),
                ..
            } if job == "ml/t" => Some(message.clone()),
            _ => None,
        })
        .expect("told why");
    assert!(why.contains("training-gpu"), "{why}");
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Pool(Watched::Apply(Ok(training_pool(
            "training-gpu",
            "crater.ai/gpu-model",
            "a100",
        ))))],
    );
    // The Pool, defined for itself, takes gpu-a from its role pool `training`; the
    // TrainJob that waited for it gets it at the next cycle and starts there (its pods
    // made), without maar restarting.
    let c = core.cluster();
    let j = &c.jobs[c.job_id("ml/t").unwrap() as usize];
    assert_eq!(j.pool, c.pool_id("training-gpu"));
    assert_eq!(c.nodes[j.placements[0].node as usize].name, "gpu-a");
    assert_eq!(phase(&core, "ml/t"), Phase::Running);
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::CreatePods { job, .. } if job == "ml/t")),
        "{writes:?}"
    );
}

#[test]
fn a_pool_deleted_gives_its_nodes_back_to_their_role_and_keeps_its_jobs() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let pool = training_pool("training-gpu", "crater.ai/gpu-model", "a100");
    let spec = json!({"image": "i", "resources": {"pool": "training-gpu", "gpu": {"count": 1}}});
    let mut seen = lists(vec![node("gpu-a", 8, "a100", json!({}))], vec![]);
    seen.push(Seen::Pool(Watched::Apply(Ok(pool.clone()))));
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(trainjob("ml", "t", spec)),
    ));
    d.step(&mut core, 1, seen);
    let pool_of = |core: &Core, node: &str| {
        let c = core.cluster();
        let n = c.node_id(node).unwrap();
        c.nodes[n as usize]
            .pool
            .map(|p| c.pools[p as usize].name.clone())
    };
    assert_eq!(pool_of(&core, "gpu-a").as_deref(), Some("training-gpu"));
    assert_eq!(phase(&core, "ml/t"), Phase::Running);
    // The Pool object deleted: gpu-a goes back to its role's pool; the job it runs
    // keeps running, in its pool, which stays (now the pool of role training-gpu).
    let (_, writes) = d.step(&mut core, 2, vec![Seen::Pool(Watched::Delete(Ok(pool)))]);
    assert_eq!(pool_of(&core, "gpu-a").as_deref(), Some("training"));
    assert_eq!(phase(&core, "ml/t"), Phase::Running);
    let c = core.cluster();
    let kept = &c.pools[c.pool_id("training-gpu").unwrap() as usize];
    assert_eq!(
        kept.selector.get("crater.ai/node-role").map(String::as_str),
        Some("training-gpu")
    );
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Note { reason, .. } if reason == "PoolDeleted")),
        "{writes:?}"
    );
    // Applied again, then deleted while the watch was away: a relist without it
    // undoes it too.
    let (_, _) = d.step(
        &mut core,
        3,
        vec![Seen::Pool(Watched::Apply(Ok(training_pool(
            "zone-a",
            "crater.ai/gpu-model",
            "a100",
        ))))],
    );
    assert_eq!(pool_of(&core, "gpu-a").as_deref(), Some("zone-a"));
    d.step(
        &mut core,
        4,
        vec![Seen::Pool(Watched::Init), Seen::Pool(Watched::InitDone)],
    );
    assert_eq!(pool_of(&core, "gpu-a").as_deref(), Some("training"));
    // A new job of pool `training` runs on gpu-a again.
    let spec = json!({"image": "i", "resources": {"pool": "training", "gpu": {"count": 1}}});
    d.step(
        &mut core,
        5,
        vec![Seen::Object(
            Owner::TrainJob,
            Watched::Apply(trainjob("ml", "u", spec)),
        )],
    );
    assert_eq!(phase(&core, "ml/u"), Phase::Running);
}

#[test]
fn another_schedulers_bound_pod_holds_its_cards_and_is_never_maars_to_stop() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let theirs = pod(
        "web",
        "kube-scheduled",
        6,
        json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "gpu-a"},
               "status": {"phase": "Running"}}),
    );
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![theirs, pod("ml", "mine", 4, json!({}))],
        ),
    );
    let c = core.cluster();
    let t = &c.jobs[c.job_id("web/kube-scheduled").unwrap() as usize];
    assert_eq!(t.phase, Phase::Running);
    assert_eq!(t.placements[0].gpus.len(), 6);
    // Two cards left: maar's 4-GPU pod waits rather than being bound on top of it.
    assert_eq!(phase(&core, "ml/mine"), Phase::Pending);
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Bind { .. })),
        "{writes:?}"
    );
    // Even a high-priority pod of maar's does not preempt it.
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Pod(Watched::Apply(pod(
            "ml",
            "urgent",
            4,
            json!({"metadata": {"annotations": {"crater.ai/priority": "high"}}}),
        )))],
    );
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Delete { .. })),
        "{writes:?}"
    );
    assert_eq!(phase(&core, "web/kube-scheduled"), Phase::Running);
    // Draining the node in maar leaves their pod alone in Kubernetes.
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("test"),
        maar_scheduler::Command::DrainNode {
            node: "gpu-a".into(),
        },
    );
    assert!(out.is_ok(), "{:?}", out.result);
    // It finishes: its job ends.
    d.step(
        &mut core,
        3,
        vec![Seen::Pod(Watched::Apply(pod(
            "web",
            "kube-scheduled",
            6,
            json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "gpu-a"},
                   "status": {"phase": "Succeeded"}}),
        )))],
    );
    assert_ne!(phase(&core, "web/kube-scheduled"), Phase::Running);
}

/// Another scheduler's running pod deleted leaves maar's books said as what it is (not
/// "its pod was deleted", which tells of maar's own job cancelled), and its cards are
/// free for maar's waiting pod at once.
#[test]
fn another_schedulers_pod_deleted_is_told_as_theirs_and_frees_its_cards() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let theirs = || {
        pod(
            "web",
            "kube-scheduled",
            6,
            json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "gpu-a"},
                   "status": {"phase": "Running"}}),
        )
    };
    d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![theirs(), pod("ml", "mine", 4, json!({}))],
        ),
    );
    assert_eq!(phase(&core, "ml/mine"), Phase::Pending);
    let (_, writes) = d.step(&mut core, 2, vec![Seen::Pod(Watched::Delete(theirs()))]);
    let c = core.cluster();
    let reason = &*c.jobs[c.job_id("web/kube-scheduled").unwrap() as usize].reason;
    assert!(
        reason.contains("another scheduler's pod") && reason.contains("frees what it held"),
        "{reason}"
    );
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Bind { job, .. } if job == "ml/mine")),
        "{writes:?}"
    );
}

#[test]
fn a_quota_object_limits_its_namespace_and_deleting_it_opens_it_again() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let q: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "Quota",
        "metadata": {"name": "ml-training", "namespace": "ml", "uid": "q1"},
        "spec": {"pool": "training", "reserved": {"gpu": 1}, "max": {"gpu": 2, "memory": "1Ti"}},
    }))
    .unwrap();
    let quota = maar_kube::map::quota_of(&q).unwrap();
    assert_eq!(quota.project, "ml");
    assert_eq!(quota.quota.max.gpu_milli, Some(2000));
    // The quota comes before its pool exists (the nodes' role makes it): it waits for it.
    let mut seen = vec![Seen::Quota(Watched::Apply(Ok(quota.clone())))];
    seen.extend(lists(
        vec![node("gpu-a", 8, "a100", json!({}))],
        vec![pod("ml", "four", 4, json!({}))],
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    let c = core.cluster();
    let j = &c.jobs[c.job_id("ml/four").unwrap() as usize];
    assert_eq!(j.phase, Phase::Pending);
    // (4 GPUs where the max is 2: no wait under this quota ends it.)
    assert!(
        j.reason.starts_with(
            "can never run under its quota: it asks 4 GPUs and project ml may use at most 2"
        ),
        "{}",
        j.reason
    );
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Bind { .. })),
        "{writes:?}"
    );
    // A bad Quota is told, not used.
    let bad: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "Quota",
        "metadata": {"name": "bad", "namespace": "ml", "uid": "uid-bad"},
        "spec": {"pool": "training", "reserved": {"gpu": 4}, "max": {"gpu": 2}},
    }))
    .unwrap();
    let e = maar_kube::map::quota_of(&bad).unwrap();
    assert!(
        e.bad
            .as_deref()
            .is_some_and(|b| b.contains("reserved GPUs exceeds max 2")),
        "{e:?}"
    );
    // Never left without a limit: closed until fixed.
    assert_eq!(e.quota.max.gpu_milli, Some(0));
    // The Quota is deleted: the namespace is open again and the pod is bound.
    let (_, writes) = d.step(&mut core, 2, vec![Seen::Quota(Watched::Delete(Ok(quota)))]);
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Bind { job, .. } if job == "ml/four")),
        "{writes:?}"
    );
    // A bad Quota applied is told on the object with its uid (so `kubectl describe`
    // lists it).
    let (_, writes) = d.step(&mut core, 3, vec![Seen::Quota(Watched::Apply(Ok(e)))]);
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Note { regarding, reason, .. }
            if reason == "BadQuota" && regarding.uid.as_deref() == Some("uid-bad"))),
        "{writes:?}"
    );
}

#[test]
fn a_bind_answered_late_is_followed_where_kubernetes_put_the_pod_never_bound_twice() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![
                node("gpu-a", 2, "a100", json!({})),
                node("gpu-b", 2, "a100", json!({})),
            ],
            vec![pod("ml", "p", 2, json!({}))],
        ),
    );
    let first = writes
        .iter()
        .find_map(|w| match w {
            Write::Bind { job, node, .. } if job == "ml/p" => Some(node.clone()),
            _ => None,
        })
        .expect("bound");
    // No answer within the bind timeout: maar takes the placement back and places the
    // pod again (it may pick the other node).
    let (_, _) = d.step(&mut core, 40, vec![]);
    // Meanwhile the first bind went through: the watch shows the pod on `first`.
    let bound = pod(
        "ml",
        "p",
        2,
        json!({"metadata": {"annotations": {"crater.ai/gpu-indices": "0,1"}},
               "spec": {"nodeName": first}, "status": {"phase": "Pending"}}),
    );
    let (_, writes) = d.step(&mut core, 41, vec![Seen::Pod(Watched::Apply(bound))]);
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Bind { .. })),
        "{writes:?}"
    );
    // The second bind, if one was sent, is refused as already assigned: nothing more.
    let (_, writes) = d.step(
        &mut core,
        42,
        vec![Seen::Bound {
            job: "ml/p".into(),
            result: Err("Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"gpu-a\"".into()),
        }],
    );
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Bind { .. })),
        "{writes:?}"
    );
    let c = core.cluster();
    let j = &c.jobs[c.job_id("ml/p").unwrap() as usize];
    assert_eq!(j.phase, Phase::Running);
    assert_eq!(j.placements.len(), 1);
    assert!(j.placements[0].bound);
    assert_eq!(c.nodes[j.placements[0].node as usize].name, first);
    // Later steps leave it alone.
    let (_, writes) = d.step(&mut core, 100, vec![]);
    assert!(writes.is_empty(), "{writes:?}");
}

#[test]
fn a_quota_request_object_is_asked_in_maar_and_its_approval_written_back() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let q: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "Quota",
        "metadata": {"name": "ml-training", "namespace": "ml"},
        "spec": {"pool": "training", "max": {"gpu": 2}},
    }))
    .unwrap();
    let r: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "QuotaRequest",
        "metadata": {"name": "more", "namespace": "ml"},
        "spec": {"pool": "training", "gpus": 4, "reason": "deadline"},
    }))
    .unwrap();
    let mut seen = lists(
        vec![node("gpu-a", 8, "a100", json!({}))],
        vec![pod("ml", "four", 4, json!({}))],
    );
    seen.push(Seen::Quota(Watched::Apply(Ok(maar_kube::map::quota_of(
        &q,
    )
    .unwrap()))));
    seen.push(Seen::QuotaRequest(Watched::InitDone));
    seen.push(Seen::QuotaRequest(Watched::Apply(Ok(
        maar_kube::map::quota_request_of(&r).unwrap(),
    ))));
    let (_, writes) = d.step(&mut core, 1, seen);
    let c = core.cluster();
    assert_eq!(c.quota_requests.len(), 1);
    let id = c.quota_requests[0].id;
    assert!(
        writes.iter().any(|w| matches!(w, Write::QuotaRequestStatus { key, phase, id: i, .. } if key == "ml/more" && phase == "Pending" && *i == id)),
        "{writes:?}"
    );
    assert_eq!(phase(&core, "ml/four"), Phase::Pending);
    // An admin approves it in maar: the object says so, the Quota object gets the new
    // max, and the pod starts.
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("admin"),
        maar_scheduler::Command::ApproveQuota { id },
    );
    assert!(out.is_ok(), "{:?}", out.result);
    assert_eq!(phase(&core, "ml/four"), Phase::Running);
    let writes = d.take_unsent();
    assert!(
        writes.iter().any(|w| matches!(w, Write::QuotaRequestStatus { key, phase, .. } if key == "ml/more" && phase == "Approved")),
        "{writes:?}"
    );
    // The project's own Quota object for the pool gets the new max.
    assert!(
        writes.iter().any(|w| matches!(w, Write::QuotaObject { project, name, pool, max_gpus, .. }
            if project == "ml" && name == "ml-training" && pool == "training" && *max_gpus == Some(6.0))),
        "{writes:?}"
    );
    let c = core.cluster();
    let pool = c.pool_id("training").unwrap();
    let pid = c.project_id("ml").unwrap();
    assert_eq!(
        c.projects[pid as usize].quotas[&pool].max.gpu_milli,
        Some(6000)
    );
    // Seen again (a relist), it is not asked twice.
    d.step(
        &mut core,
        3,
        vec![Seen::QuotaRequest(Watched::Apply(Ok(
            maar_kube::map::quota_request_of(&r).unwrap(),
        )))],
    );
    assert_eq!(core.cluster().quota_requests.len(), 1);
}

fn service_pod(ns: &str, svc: &str, name: &str, node: &str, gpus: &[u32]) -> Box<PodSeen> {
    let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
    pod(
        ns,
        name,
        1,
        json!({"metadata": {"labels": {"crater.ai/inferenceservice": svc},
                            "annotations": {"crater.ai/gpu-indices": list.join(",")}},
               "spec": {"nodeName": node}, "status": {"phase": "Running"}}),
    )
}

/// The pods a CreatePods makes, and whether it is answered as a bind.
fn made(writes: &[Write], job: &str) -> Vec<(Vec<maar_kube::world::NewPod>, bool)> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::CreatePods {
                job: j,
                pods,
                answer,
                owner: Owner::InferenceService,
                ..
            } if j == job => Some((pods.clone(), *answer)),
            _ => None,
        })
        .collect()
}

#[test]
fn an_inference_service_runs_scales_on_its_load_and_keeps_its_replicas() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let mut seen = lists(
        vec![
            node("gpu-a", 2, "a100", json!({})),
            node("gpu-b", 2, "a100", json!({})),
        ],
        vec![],
    );
    seen.push(Seen::Object(
        Owner::InferenceService,
        Watched::Apply(object(
            Owner::InferenceService,
            "ai-service",
            "llm",
            json!({"image": "vllm/vllm-openai:latest",
                   "resources": {"pool": "training", "gpu": {"count": 1}},
                   "replicas": {"min": 1, "max": 4},
                   "autoscale": {"target": 70, "scaleDownStabilization": "300s",
                                 "selector": {"matchLabels": {"app": "llm-infer"}}}}),
        )),
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    let first = made(&writes, "ai-service/llm");
    assert_eq!(first.len(), 1, "{writes:?}");
    assert!(first[0].1, "a new placement is answered as a bind");
    assert_eq!(first[0].0.len(), 1, "min 1 replica");
    assert_eq!(first[0].0[0].name, "llm-0");
    let at0 = first[0].0[0].at.clone();
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![
            Seen::Bound {
                job: "ai-service/llm".into(),
                result: Ok(()),
            },
            Seen::Pod(Watched::Apply(service_pod(
                "ai-service",
                "llm",
                "llm-0",
                &at0.node,
                &at0.gpus,
            ))),
        ],
    );
    assert_eq!(phase(&core, "ai-service/llm"), Phase::Running);
    // Its load is asked for with the selector it gives, every 15 s.
    let asks = |w: &[Write]| {
        w.iter()
            .filter(|w| matches!(w, Write::ReadLoad { job, selector } if job == "ai-service/llm" && selector == "app=llm-infer"))
            .count()
    };
    assert_eq!(asks(&writes), 1, "{writes:?}");
    let (_, writes) = d.step(&mut core, 10, vec![]);
    assert_eq!(asks(&writes), 0, "not again within 15 s");
    // 95% on one replica at a 70% target: two replicas' worth.
    let (_, writes) = d.step(
        &mut core,
        17,
        vec![Seen::Load {
            job: "ai-service/llm".into(),
            value: Ok(Some(95.0)),
        }],
    );
    let up = made(&writes, "ai-service/llm");
    assert_eq!(up.len(), 1, "{writes:?}");
    assert_eq!(up[0].0.len(), 1);
    assert_eq!(up[0].0[0].name, "llm-1", "the next number");
    let at1 = up[0].0[0].at.clone();
    assert_ne!((&at1.node, &at1.gpus), (&at0.node, &at0.gpus));
    let (_, writes) = d.step(
        &mut core,
        18,
        vec![
            Seen::Bound {
                job: "ai-service/llm".into(),
                result: Ok(()),
            },
            Seen::Pod(Watched::Apply(service_pod(
                "ai-service",
                "llm",
                "llm-1",
                &at1.node,
                &at1.gpus,
            ))),
        ],
    );
    let running = |core: &Core| {
        let c = core.cluster();
        c.jobs[c.job_id("ai-service/llm").unwrap() as usize].running_replicas()
    };
    assert_eq!(running(&core), 2);
    assert_eq!(asks(&writes), 1, "asked again once its new pod is made");
    // Someone deletes a replica's pod: made again where it ran, not a new placement.
    let (_, writes) = d.step(
        &mut core,
        19,
        vec![Seen::Pod(Watched::Delete(service_pod(
            "ai-service",
            "llm",
            "llm-1",
            &at1.node,
            &at1.gpus,
        )))],
    );
    let again = made(&writes, "ai-service/llm");
    assert_eq!(again.len(), 1, "{writes:?}");
    assert!(!again[0].1, "not answered as a bind");
    assert_eq!(again[0].0[0].name, "llm-2");
    assert_eq!(again[0].0[0].at, at1);
    assert_eq!(running(&core), 2);
    d.step(
        &mut core,
        20,
        vec![Seen::Pod(Watched::Apply(service_pod(
            "ai-service",
            "llm",
            "llm-2",
            &at1.node,
            &at1.gpus,
        )))],
    );
    // Load falls: one replica is enough, but only after the 300 s window.
    let mut deleted = Vec::new();
    for t in (30..=400).step_by(15) {
        let (_, writes) = d.step(
            &mut core,
            t,
            vec![Seen::Load {
                job: "ai-service/llm".into(),
                value: Ok(Some(10.0)),
            }],
        );
        for w in writes {
            if let Write::DeletePods { job, pods, .. } = w {
                assert_eq!(job, "ai-service/llm");
                deleted.push((t, pods));
            }
        }
    }
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    let (t, pods) = &deleted[0];
    assert!(*t >= 300, "scaled down at {t}, within the window");
    assert_eq!(pods.len(), 1, "one named pod, not all: {pods:?}");
    assert!(pods[0] == "llm-0" || pods[0] == "llm-2", "{pods:?}");
    assert_eq!(running(&core), 1);
    // A load that cannot be read is told, and nothing changes.
    let (events, _) = d.step(
        &mut core,
        500,
        vec![Seen::Load {
            job: "ai-service/llm".into(),
            value: Err("the external metrics API does not serve it (404)".into()),
        }],
    );
    assert!(
        events
            .iter()
            .any(|e| e.message.contains("keeps its replicas")),
        "{events:?}"
    );
    assert_eq!(running(&core), 1);
    // The InferenceService is deleted: its pods go, all of them.
    let (_, writes) = d.step(
        &mut core,
        501,
        vec![Seen::Object(
            Owner::InferenceService,
            Watched::Delete(object(
                Owner::InferenceService,
                "ai-service",
                "llm",
                json!({"resources": {"pool": "training"}}),
            )),
        )],
    );
    // Its pods are the garbage collector's (they name it as their owner); until they
    // are gone, they hold their cards.
    assert!(
        !writes.iter().any(|w| matches!(w, Write::CreatePods { .. })),
        "{writes:?}"
    );
    assert_eq!(phase(&core, "ai-service/llm"), Phase::Running);
    let gone: Vec<Seen> = ["llm-0", "llm-2"]
        .into_iter()
        .map(|name| {
            Seen::Pod(Watched::Delete(service_pod(
                "ai-service",
                "llm",
                name,
                &at1.node,
                &at1.gpus,
            )))
        })
        .collect();
    d.step(&mut core, 502, gone);
    assert_eq!(phase(&core, "ai-service/llm"), Phase::Cancelled);
}

#[test]
fn a_trainjob_served_as_an_inference_service_is_refused_by_its_kind() {
    let o = object(
        Owner::InferenceService,
        "ml",
        "x",
        json!({"image": "i", "resources": {"pool": "p", "gpu": {"count": 1}}}),
    );
    // The object says kind InferenceService: read as one.
    assert!(o.spec.is_ok(), "{:?}", o.spec);
    let mut v: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "TrainJob",
        "metadata": {"name": "x", "namespace": "ml"},
        "spec": {"image": "i", "resources": {"pool": "p"}},
    }))
    .unwrap();
    let seen = ObjectSeen::of(Owner::InferenceService, &v);
    let e = seen.spec.unwrap_err();
    assert_eq!(e.field, "kind");
    v.types.as_mut().unwrap().kind = "InferenceService".into();
    assert!(ObjectSeen::of(Owner::InferenceService, &v).spec.is_ok());
    assert_eq!(
        ObjectSeen::of(Owner::InferenceService, &v).selector,
        "crater.ai/inferenceservice=x"
    );
}

#[test]
fn a_trainjob_whose_node_is_deleted_has_its_other_pods_deleted_too() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let mut seen = lists(
        vec![
            node("gpu-a", 8, "a100", json!({})),
            node("gpu-b", 8, "a100", json!({})),
        ],
        vec![],
    );
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(trainjob(
            "ml",
            "gang",
            json!({"image": "i", "replicas": 2,
                   "resources": {"pool": "training", "gpu": {"count": 8}}}),
        )),
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::CreatePods { pods, .. } if pods.len() == 2)),
        "{writes:?}"
    );
    d.step(
        &mut core,
        2,
        vec![
            Seen::Bound {
                job: "ml/gang".into(),
                result: Ok(()),
            },
            Seen::Pod(Watched::Apply(owned_pod(
                "ml", "gang", "gang-0", "gpu-a", "Running",
            ))),
            Seen::Pod(Watched::Apply(owned_pod(
                "ml", "gang", "gang-1", "gpu-b", "Running",
            ))),
        ],
    );
    assert_eq!(phase(&core, "ml/gang"), Phase::Running);
    // gpu-b goes: the gang cannot go on with half of it, so the pod on gpu-a goes too.
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![Seen::Node(Watched::Delete(node(
            "gpu-b",
            8,
            "a100",
            json!({}),
        )))],
    );
    assert_ne!(phase(&core, "ml/gang"), Phase::Running);
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::DeletePods { job, pods, .. } if job == "ml/gang" && pods.contains(&"gang-0".to_string()))),
        "{writes:?}"
    );
}

/// A pod asking for `n` of device resource `res` (and nothing of whole cards).
fn device_pod(ns: &str, name: &str, res: &str, n: u32) -> Box<PodSeen> {
    pod(
        ns,
        name,
        0,
        json!({"spec": {"containers": [{"name": "main", "image": "vllm",
            "resources": {"requests": {"cpu": "2", "memory": "8Gi", res: n.to_string()},
                          "limits": {res: n.to_string()}}}]}}),
    )
}

#[test]
fn mig_instances_and_time_sliced_replicas_are_cards_only_their_own_pods_take() {
    // An A100 node under the mixed MIG strategy: 2 whole cards, 7 1g.10gb instances,
    // 2 3g.40gb instances (as the NVIDIA device plugin advertises them).
    let mixed = node(
        "a100-mig",
        2,
        "a100",
        json!({"status": {"allocatable": {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"}}}),
    );
    let n = maar_kube::map::node_of(&mixed);
    assert_eq!(n.gpus.len(), 11);
    let of = |r: Option<&str>| n.gpus.iter().filter(|g| g.resource.as_deref() == r).count();
    assert_eq!(of(None), 2);
    assert_eq!(of(Some("nvidia.com/mig-1g.10gb")), 7);
    assert_eq!(of(Some("nvidia.com/mig-3g.40gb")), 2);
    let mem = |r: &str| {
        n.gpus
            .iter()
            .find(|g| g.resource.as_deref() == Some(r))
            .unwrap()
            .memory
    };
    assert_eq!(mem("nvidia.com/mig-1g.10gb"), 10 << 30);
    assert_eq!(mem("nvidia.com/mig-3g.40gb"), 40 << 30);
    assert_eq!(
        maar_kube::map::mig_profile_memory("nvidia.com/mig-1c.3g.20gb"),
        Some(20 << 30),
        "a compute-instance profile's memory"
    );
    // T4s time-sliced 4 ways, renamed: 8 replicas of 2 cards, each a quarter of 16Gi.
    let shared = node(
        "t4-shared",
        0,
        "t4",
        json!({"metadata": {"labels": {"crater.ai/gpu-memory": "16Gi", "crater.ai/gpu-count": "2",
                                       "nvidia.com/gpu.replicas": "4"}},
               "status": {"allocatable": {"nvidia.com/gpu": null, "nvidia.com/gpu.shared": "8"}}}),
    );
    let s = maar_kube::map::node_of(&shared);
    assert_eq!(s.gpus.len(), 8);
    assert!(s
        .gpus
        .iter()
        .all(|g| g.resource.as_deref() == Some("nvidia.com/gpu.shared")));
    assert!(s.gpus.iter().all(|g| g.memory == 4 << 30));
    // Under the single MIG strategy every device is an instance of the product's profile.
    let single = node(
        "a100-single",
        14,
        "a100",
        json!({"metadata": {"labels": {"nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-3g.20gb"}}}),
    );
    let g = maar_kube::map::node_of(&single);
    assert_eq!(g.gpus.len(), 14);
    assert!(g
        .gpus
        .iter()
        .all(|c| c.resource.is_none() && c.memory == 20 << 30));

    // Scheduled through the driver: each pod on cards of its own resource.
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let seen = lists(
        vec![mixed, shared],
        vec![
            device_pod("ml", "small", "nvidia.com/mig-1g.10gb", 2),
            device_pod("ml", "shared", "nvidia.com/gpu.shared", 1),
            pod("ml", "whole", 2, json!({})),
            pod("ml", "too-many", 3, json!({})),
            device_pod("ml", "big", "nvidia.com/mig-7g.80gb", 1),
        ],
    );
    let (_, writes) = d.step(&mut core, 1, seen);
    let bound = |job: &str| {
        writes.iter().find_map(|w| match w {
            Write::Bind {
                job: j, node, gpus, ..
            } if j == job => Some((node.clone(), gpus.clone())),
            _ => None,
        })
    };
    let (node_small, cards) = bound("ml/small").expect("the MIG pod is bound");
    assert_eq!(node_small, "a100-mig");
    assert!(
        cards.iter().all(|c| (2..9).contains(c)),
        "1g.10gb instances: {cards:?}"
    );
    assert_eq!(cards.len(), 2);
    assert_eq!(
        bound("ml/shared").map(|b| b.0).as_deref(),
        Some("t4-shared")
    );
    let (node_whole, cards) = bound("ml/whole").expect("the whole-card pod is bound");
    assert_eq!((node_whole.as_str(), cards), ("a100-mig", vec![0, 1]));
    // Three whole cards: the MIG instances and shared replicas are not whole cards.
    assert!(bound("ml/too-many").is_none());
    let why = |job: &str| {
        writes
            .iter()
            .find_map(|w| match w {
                Write::Unschedulable {
                    job: j, message, ..
                } if j == job => Some(message.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{job} told why: {writes:?}"))
    };
    // Never on these nodes: two whole cards at most, whatever ends.
    let never = why("ml/too-many");
    assert!(
        never.starts_with("can never run as asked: no node of pool training could hold 3x GPU"),
        "{never}"
    );
    assert!(never.contains("a100-mig, has 2 GPUs"), "{never}");
    assert_eq!(never.matches("can never run").count(), 1, "{never}");
    assert!(!never.contains("wait"), "{never}");
    // No node has the device kind at all: the constraint is named, not a size.
    let big = why("ml/big");
    assert!(
        big.starts_with("can never run as asked: every node of pool training keeps it off (2 no nvidia.com/mig-7g.80gb devices)"),
        "{big}"
    );
}

#[test]
fn a_pod_asking_for_two_kinds_of_gpu_device_is_told_which() {
    let p = pod(
        "ml",
        "mixed",
        1,
        json!({"spec": {"containers": [
            {"name": "main", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
            {"name": "side", "image": "i", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}}]}}),
    );
    let e = p.spec.unwrap().unwrap_err();
    assert!(
        e.message.contains("one kind of GPU device per pod"),
        "{e:?}"
    );
    assert!(e.message.contains("nvidia.com/mig-1g.10gb"), "{e:?}");
}

/// Service `ai/llm` (1 to 2 replicas) started on what `seen` lists: its first
/// replica's pod made, bound and seen. Returns where it runs.
fn llm_running(
    core: &mut Core,
    d: &mut KubeDriver,
    mut seen: Vec<Seen>,
) -> maar_scheduler::input::Binding {
    seen.push(llm(1, 2));
    let (_, writes) = d.step(core, 1, seen);
    let at = made(&writes, "ai/llm")[0].0[0].at.clone();
    d.step(
        core,
        2,
        vec![
            Seen::Bound {
                job: "ai/llm".into(),
                result: Ok(()),
            },
            Seen::Pod(Watched::Apply(service_pod(
                "ai", "llm", "llm-0", &at.node, &at.gpus,
            ))),
        ],
    );
    at
}

fn llm(min: u32, max: u32) -> Seen {
    Seen::Object(
        Owner::InferenceService,
        Watched::Apply(object(
            Owner::InferenceService,
            "ai",
            "llm",
            json!({"image": "vllm", "resources": {"pool": "training", "gpu": {"count": 1}},
                   "replicas": {"min": min, "max": max}, "autoscale": {"target": 70}}),
        )),
    )
}

#[test]
fn a_restarted_maar_keeps_the_replicas_it_finds_and_makes_only_the_missing_ones() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let mut seen = lists(
        vec![
            node("gpu-a", 2, "a100", json!({})),
            node("gpu-b", 2, "a100", json!({})),
        ],
        vec![
            service_pod("ai", "llm", "llm-3", "gpu-a", &[0]),
            service_pod("ai", "llm", "llm-5", "gpu-b", &[1]),
        ],
    );
    seen.push(llm(3, 4));
    let (_, writes) = d.step(&mut core, 1, seen);
    let first = made(&writes, "ai/llm");
    assert_eq!(first.len(), 1, "{writes:?}");
    let pods = &first[0].0;
    assert_eq!(pods.len(), 1, "only the third replica is new: {pods:?}");
    assert_eq!(pods[0].name, "llm-6", "numbered after the pods that exist");
    assert!(
        ![("gpu-a", vec![0u32]), ("gpu-b", vec![1])]
            .contains(&(pods[0].at.node.as_str(), pods[0].at.gpus.clone())),
        "not on a card a found replica holds: {pods:?}"
    );
    // Found with more replicas than its minimum: it wants what runs.
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let mut seen = lists(
        vec![node("gpu-a", 4, "a100", json!({}))],
        vec![
            service_pod("ai", "llm", "llm-0", "gpu-a", &[0]),
            service_pod("ai", "llm", "llm-1", "gpu-a", &[1]),
            service_pod("ai", "llm", "llm-2", "gpu-a", &[2]),
        ],
    );
    seen.push(llm(1, 4));
    let (_, writes) = d.step(&mut core, 1, seen);
    assert!(made(&writes, "ai/llm").is_empty(), "{writes:?}");
    let c = core.cluster();
    let j = &c.jobs[c.job_id("ai/llm").unwrap() as usize];
    assert_eq!((j.running_replicas(), j.desired_replicas), (3, 3));
}

#[test]
fn a_trainjob_and_an_inference_service_of_one_name_the_later_is_refused() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let mut seen = lists(vec![node("gpu-a", 8, "a100", json!({}))], vec![]);
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(trainjob(
            "ai",
            "llm",
            json!({"image": "i", "resources": {"pool": "training", "gpu": {"count": 1}}}),
        )),
    ));
    d.step(&mut core, 1, seen);
    assert_eq!(phase(&core, "ai/llm"), Phase::Running);
    for t in 2..4 {
        let (_, writes) = d.step(&mut core, t, vec![llm(1, 2)]);
        assert!(
            writes.iter().any(|w| matches!(w, Write::Unschedulable { job, message, object: Some(Owner::InferenceService), .. } if job == "ai/llm" && message.contains("already a job"))),
            "{writes:?}"
        );
        assert!(made(&writes, "ai/llm").is_empty());
        assert_eq!(
            phase(&core, "ai/llm"),
            Phase::Running,
            "the TrainJob runs on"
        );
    }
}

#[test]
fn a_replica_lost_from_a_cordoned_node_is_not_made_again_there() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let seen = lists(
        vec![
            node("gpu-a", 1, "a100", json!({})),
            node("gpu-b", 1, "a100", json!({})),
        ],
        vec![],
    );
    let at = llm_running(&mut core, &mut d, seen);
    // kubectl drain: the node is cordoned and the pod evicted.
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![
            Seen::Node(Watched::Apply(node(
                &at.node,
                1,
                "a100",
                json!({"spec": {"unschedulable": true}}),
            ))),
            Seen::Pod(Watched::Delete(service_pod(
                "ai", "llm", "llm-0", &at.node, &at.gpus,
            ))),
        ],
    );
    assert!(
        !made(&writes, "ai/llm")
            .iter()
            .any(|(p, _)| p.iter().any(|p| p.at.node == at.node)),
        "not made again on the drained node: {writes:?}"
    );
    // The service restarts by its policy (after its back-off) on the other node.
    let mut elsewhere = false;
    for t in 4..30 {
        let (_, writes) = d.step(&mut core, t, vec![]);
        elsewhere |= made(&writes, "ai/llm")
            .iter()
            .any(|(p, _)| p.iter().any(|p| p.at.node != at.node));
    }
    assert!(elsewhere, "placed again on the other node");
}

#[test]
fn a_replica_pod_gone_while_the_watch_was_down_is_made_again() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let seen = lists(vec![node("gpu-a", 2, "a100", json!({}))], vec![]);
    let at = llm_running(&mut core, &mut d, seen);
    // The watch drops; its relist no longer has llm-0.
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![Seen::Pod(Watched::Init), Seen::Pod(Watched::InitDone)],
    );
    let again = made(&writes, "ai/llm");
    assert_eq!(again.len(), 1, "{writes:?}");
    assert_eq!(
        (again[0].0[0].name.as_str(), &again[0].0[0].at),
        ("llm-1", &at)
    );
}

#[test]
fn scheduled_events_not_written_are_told_to_the_operator_once_with_their_count() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (events, _) = d.step(&mut core, 1, vec![Seen::EventsDropped(3937)]);
    let told: Vec<_> = events
        .iter()
        .filter(|e| e.reason == "EventsNotWritten")
        .collect();
    assert_eq!(told.len(), 1, "{events:?}");
    assert!(
        told[0]
            .message
            .starts_with("3937 bound pod(s) got no Scheduled event"),
        "{}",
        told[0].message
    );
    assert!(told[0].message.contains("kubectl get pods -o wide"));
}

// ----- the cluster as it is now (issue: Kubernetes correctness) ---------------------

fn bound_to<'a>(writes: &'a [Write], job: &str) -> Option<&'a str> {
    writes.iter().find_map(|w| match w {
        Write::Bind { job: j, node, .. } if j == job => Some(node.as_str()),
        _ => None,
    })
}

fn told<'a>(writes: &'a [Write], job: &str) -> Option<&'a str> {
    writes.iter().find_map(|w| match w {
        Write::Unschedulable {
            job: j, message, ..
        } if j == job => Some(message.as_str()),
        _ => None,
    })
}

/// Answers every bind in `writes` as done.
fn bound_all(d: &mut KubeDriver, core: &mut Core, t: u64, writes: &[Write]) -> Vec<Write> {
    let seen: Vec<Seen> = writes
        .iter()
        .filter_map(|w| match w {
            Write::Bind { job, .. } => Some(Seen::Bound {
                job: job.clone(),
                result: Ok(()),
            }),
            _ => None,
        })
        .collect();
    d.step(core, t, seen).1
}

#[test]
fn a_node_whose_device_plugin_comes_later_gets_its_gpus_and_a_withdrawn_card_is_told() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    // Registered by the kubelet: no nvidia.com/gpu yet.
    let bare = node(
        "gpu-a",
        4,
        "a100",
        json!({"status": {"allocatable": {"nvidia.com/gpu": null}, "capacity": {"nvidia.com/gpu": null}}}),
    );
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(vec![bare], vec![pod("ml", "p", 2, json!({}))]),
    );
    assert_eq!(bound_to(&writes, "ml/p"), None);
    assert!(told(&writes, "ml/p").is_some());
    // The device plugin advertises 4 cards: the pod is bound at once.
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            4,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(bound_to(&writes, "ml/p"), Some("gpu-a"));
    bound_all(&mut d, &mut core, 3, &writes);
    assert_eq!(phase(&core, "ml/p"), Phase::Running);
    // The cards under it not advertised for a moment (a device plugin restarting):
    // kept, its pod left alone, the node told.
    let (_, writes) = d.step(
        &mut core,
        4,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            0,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(phase(&core, "ml/p"), Phase::Running);
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Delete { .. })),
        "{writes:?}"
    );
    assert!(core
        .cluster()
        .events
        .iter()
        .any(|e| e.reason == "GpusWithdrawing" && e.message.contains("keeps them for 60 s")));
    d.step(
        &mut core,
        10,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            4,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(phase(&core, "ml/p"), Phase::Running);
    d.step(&mut core, 100, vec![]);
    assert_eq!(
        phase(&core, "ml/p"),
        Phase::Running,
        "back within the grace"
    );
    // A card withdrawn under it for good (4 -> 1): its job's fate is told once the
    // grace is over.
    d.step(
        &mut core,
        200,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            1,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(phase(&core, "ml/p"), Phase::Running, "within the grace");
    d.step(&mut core, 200 + maar_kube::driver::WITHDRAW_GRACE_S, vec![]);
    let c = core.cluster();
    assert_eq!(c.nodes[c.node_id("gpu-a").unwrap() as usize].gpus.len(), 1);
    assert_ne!(phase(&core, "ml/p"), Phase::Running);
    assert!(
        c.events
            .iter()
            .any(|e| e.reason == "GpuWithdrawn" && e.message.contains("no longer advertised")),
        "{:?}",
        c.events.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );
}

#[test]
fn a_card_withdrawn_during_the_grace_is_not_offered_until_it_returns() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 4, "a100", json!({}))],
            vec![pod("ml", "p", 2, json!({}))],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/p"), Some("gpu-a"));
    bound_all(&mut d, &mut core, 2, &writes);
    // The device plugin restarts: no card advertised. Its pod's two cards are kept;
    // the two free ones are not offered to a pod that comes now.
    d.step(
        &mut core,
        3,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            0,
            "a100",
            json!({}),
        )))],
    );
    let (_, writes) = d.step(
        &mut core,
        4,
        vec![Seen::Pod(Watched::Apply(pod("ml", "q", 1, json!({}))))],
    );
    assert_eq!(bound_to(&writes, "ml/q"), None, "{writes:?}");
    assert_eq!(phase(&core, "ml/p"), Phase::Running);
    let c = core.cluster();
    let unoffered: Vec<u32> = c.nodes[c.node_id("gpu-a").unwrap() as usize]
        .gpus
        .iter()
        .filter(|g| g.health != Health::Healthy)
        .map(|g| g.index)
        .collect();
    assert_eq!(unoffered.len(), 2, "the two free cards only");
    // Its pod ends during the grace: the cards it freed are not offered either.
    let p = pod(
        "ml",
        "p",
        2,
        json!({"spec": {"nodeName": "gpu-a"}, "status": {"phase": "Succeeded"}}),
    );
    let (_, writes) = d.step(&mut core, 5, vec![Seen::Pod(Watched::Apply(p))]);
    assert_eq!(bound_to(&writes, "ml/q"), None, "{writes:?}");
    // The plugin is back: every card offered again, the waiting pod bound.
    let (_, writes) = d.step(
        &mut core,
        8,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            4,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(bound_to(&writes, "ml/q"), Some("gpu-a"), "{writes:?}");
    let c = core.cluster();
    assert!(c.nodes[c.node_id("gpu-a").unwrap() as usize]
        .gpus
        .iter()
        .all(|g| g.health == Health::Healthy));
}

#[test]
fn a_pod_deleted_while_it_waits_is_never_bound() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let deleting = json!({"metadata": {"deletionTimestamp": "2026-12-05T07:00:00Z",
                                       "finalizers": ["example.com/keep"]}});
    // Found at start already being deleted (a finalizer holds it): not a job.
    // Another waits for room behind a pod that fills the node.
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 4, "a100", json!({}))],
            vec![
                pod("ml", "big", 4, json!({})),
                pod("ml", "gone", 1, deleting.clone()),
                pod("ml", "later", 1, json!({})),
            ],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/big"), Some("gpu-a"));
    assert_eq!(bound_to(&writes, "ml/gone"), None);
    assert!(core.cluster().job_id("ml/gone").is_err(), "not a job");
    bound_all(&mut d, &mut core, 2, &writes);
    assert_eq!(phase(&core, "ml/later"), Phase::Pending);
    // `kubectl delete pod later` while it waits (its finalizer keeps it a while).
    d.step(
        &mut core,
        3,
        vec![Seen::Pod(Watched::Apply(pod("ml", "later", 1, deleting)))],
    );
    assert_ne!(phase(&core, "ml/later"), Phase::Pending, "out of the queue");
    // Room comes: nothing is bound to either.
    let done = pod(
        "ml",
        "big",
        4,
        json!({"spec": {"nodeName": "gpu-a"}, "status": {"phase": "Succeeded"}}),
    );
    let (_, writes) = d.step(&mut core, 4, vec![Seen::Pod(Watched::Apply(done))]);
    let (_, more) = d.step(&mut core, 5, vec![]);
    for w in writes.iter().chain(&more) {
        assert!(
            !matches!(w, Write::Bind { .. }),
            "nothing left to bind: {w:?}"
        );
    }
}

#[test]
fn a_node_not_ready_for_a_moment_keeps_its_pods_and_takes_no_new_ones() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![pod("ml", "p", 2, json!({}))],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/p"), Some("gpu-a"));
    bound_all(&mut d, &mut core, 2, &writes);
    // The kubelet stops posting for a moment: Ready goes Unknown.
    let unknown = json!({"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}});
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![
            Seen::Node(Watched::Apply(node("gpu-a", 8, "a100", unknown))),
            Seen::Pod(Watched::Apply(pod("ml", "q", 1, json!({})))),
        ],
    );
    // Its pod is Kubernetes's to evict (by its tolerations), not maar's: left alone.
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Delete { .. })),
        "{writes:?}"
    );
    assert_eq!(phase(&core, "ml/p"), Phase::Running);
    // Nothing new goes there meanwhile.
    assert_eq!(bound_to(&writes, "ml/q"), None);
    // Ready again: the waiting pod is bound, the first still runs.
    let (_, writes) = d.step(
        &mut core,
        5,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            8,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(bound_to(&writes, "ml/q"), Some("gpu-a"));
    assert_eq!(phase(&core, "ml/p"), Phase::Running);
}

#[test]
fn a_pod_deleted_and_made_again_under_its_name_is_scheduled_again() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![pod("ml", "reuse", 1, json!({}))],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/reuse"), Some("gpu-a"));
    bound_all(&mut d, &mut core, 2, &writes);
    // `kubectl replace --force`: deleted, then made again with a new uid.
    d.step(
        &mut core,
        3,
        vec![Seen::Pod(Watched::Delete(pod(
            "ml",
            "reuse",
            1,
            json!({"spec": {"nodeName": "gpu-a"}}),
        )))],
    );
    let again = pod(
        "ml",
        "reuse",
        2,
        json!({"metadata": {"uid": "uid-reuse-2"}}),
    );
    let (_, writes) = d.step(&mut core, 4, vec![Seen::Pod(Watched::Apply(again))]);
    assert_eq!(bound_to(&writes, "ml/reuse"), Some("gpu-a"), "{writes:?}");
    assert!(
        !writes
            .iter()
            .any(|w| matches!(w, Write::Unschedulable { message, .. } if message.contains("already exists"))),
        "{writes:?}"
    );
    let c = core.cluster();
    let id = c.job_id("ml/reuse").unwrap();
    assert_eq!(
        c.jobs[id as usize].spec.gpu.count, 2,
        "the name finds the new one"
    );
    assert_eq!(c.job_id("reuse").unwrap(), id);
}

/// A pod of PriorityClass `class` (value `value`), as the API server's Priority
/// admission leaves it, with `extra` merged.
fn classed(name: &str, gpus: u32, class: &str, value: i32, extra: Value) -> Box<PodSeen> {
    let mut v = json!({"spec": {"priorityClassName": class, "priority": value}});
    merge(&mut v, extra);
    pod("ml", name, gpus, v)
}

#[test]
fn a_pod_being_deleted_is_nobodys_victim_and_holds_its_cards_until_gone() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![classed("holder", 8, "low", -10, json!({}))],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/holder"), Some("gpu-a"));
    bound_all(&mut d, &mut core, 2, &writes);
    // `kubectl delete pod holder`, a finalizer holding it.
    let deleting = classed(
        "holder",
        8,
        "low",
        -10,
        json!({"metadata": {"deletionTimestamp": "2026-12-05T07:00:00Z", "finalizers": ["x/hold"]},
               "spec": {"nodeName": "gpu-a"}}),
    );
    d.step(&mut core, 3, vec![Seen::Pod(Watched::Apply(deleting))]);
    // A pod of a higher class comes: it waits for the cards, evicting nobody.
    let (_, writes) = d.step(
        &mut core,
        4,
        vec![Seen::Pod(Watched::Apply(classed(
            "taker",
            1,
            "high",
            1000,
            json!({}),
        )))],
    );
    assert_eq!(bound_to(&writes, "ml/taker"), None, "{writes:?}");
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Delete { .. })),
        "{writes:?}"
    );
    assert_eq!(phase(&core, "ml/holder"), Phase::Running);
    // Gone: the cards are free and the waiting pod is bound.
    let gone = classed(
        "holder",
        8,
        "low",
        -10,
        json!({"spec": {"nodeName": "gpu-a"}}),
    );
    let (_, writes) = d.step(&mut core, 5, vec![Seen::Pod(Watched::Delete(gone))]);
    let (_, more) = d.step(&mut core, 6, vec![]);
    let all: Vec<Write> = writes.into_iter().chain(more).collect();
    assert_eq!(bound_to(&all, "ml/taker"), Some("gpu-a"), "{all:?}");
}

#[test]
fn a_pod_whose_class_never_preempts_waits_and_a_class_beats_the_annotation() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![classed("low", 8, "low", -10, json!({}))],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/low"), Some("gpu-a"));
    bound_all(&mut d, &mut core, 2, &writes);
    // High, but `preemptionPolicy: Never`: it waits.
    let polite = classed(
        "polite",
        8,
        "high-nopreempt",
        100_000,
        json!({"spec": {"preemptionPolicy": "Never"}}),
    );
    // A low class whose pod annotates itself 900000: its class says -10.
    let sneaky = classed(
        "sneaky",
        8,
        "low",
        -10,
        json!({"metadata": {"annotations": {"crater.ai/priority": "900000"}}}),
    );
    // No class, annotated 900000: at most high.
    let loud = pod(
        "ml",
        "loud",
        1,
        json!({"metadata": {"annotations": {"crater.ai/priority": "900000"}}}),
    );
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![
            Seen::Pod(Watched::Apply(polite)),
            Seen::Pod(Watched::Apply(sneaky)),
        ],
    );
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Delete { .. })),
        "nobody evicted: {writes:?}"
    );
    assert_eq!(phase(&core, "ml/low"), Phase::Running);
    // (High may evict low: the annotation's top.)
    d.step(&mut core, 4, vec![Seen::Pod(Watched::Apply(loud))]);
    let c = core.cluster();
    let prio = |n: &str| c.jobs[c.job_id(n).unwrap() as usize].spec.priority;
    assert_eq!(prio("ml/sneaky"), -10);
    assert_eq!(prio("ml/loud"), maar_scheduler::model::PRIORITY_HIGH);
    assert_eq!(prio("ml/polite"), 100_000);
}

#[test]
fn fewer_cards_advertised_than_the_node_had_offers_only_what_the_count_leaves() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    // (Small pods: eight fit the node's CPU.)
    let small = json!({"spec": {"containers": [{"name": "main", "image": "pytorch:2.3",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                      "limits": {"nvidia.com/gpu": "1"}}}]}});
    let pods: Vec<Box<PodSeen>> = (0..8)
        .map(|i| pod("ml", &format!("p{i}"), 1, small.clone()))
        .collect();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(vec![node("gpu-a", 8, "a100", json!({}))], pods),
    );
    bound_all(&mut d, &mut core, 2, &writes);
    let card = |core: &Core, job: &str| {
        let c = core.cluster();
        c.jobs[c.job_id(job).unwrap() as usize].placements[0].gpus[0].gpu
    };
    // The pods on the first four cards end; the node then advertises 4 cards.
    let low: Vec<String> = (0..8)
        .map(|i| format!("p{i}"))
        .filter(|p| card(&core, &format!("ml/{p}")) < 4)
        .collect();
    assert_eq!(low.len(), 4);
    let ended: Vec<Seen> = low
        .iter()
        .map(|p| {
            Seen::Pod(Watched::Delete(pod(
                "ml",
                p,
                1,
                json!({"spec": {"nodeName": "gpu-a"}}),
            )))
        })
        .collect();
    d.step(&mut core, 3, ended);
    d.step(
        &mut core,
        4,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            4,
            "a100",
            json!({}),
        )))],
    );
    // Four cards advertised, four in use: a new pod is not bound there.
    let (_, writes) = d.step(
        &mut core,
        5,
        vec![Seen::Pod(Watched::Apply(pod("ml", "new", 1, json!({}))))],
    );
    assert_eq!(bound_to(&writes, "ml/new"), None, "{writes:?}");
    // Past the grace nothing is lost: the four pods fit the count.
    let (_, writes) = d.step(
        &mut core,
        5 + 2 * maar_kube::driver::WITHDRAW_GRACE_S,
        vec![],
    );
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Delete { .. })),
        "{writes:?}"
    );
    let running = (0..8)
        .filter(|i| {
            core.cluster()
                .job_id(&format!("ml/p{i}"))
                .is_ok_and(|id| core.cluster().jobs[id as usize].phase == Phase::Running)
        })
        .count();
    assert_eq!(running, 4);
    assert_eq!(bound_to(&writes, "ml/new"), None);
    // One of them ends: one card is offered, and the waiting pod is bound.
    let high: Vec<String> = (0..8)
        .map(|i| format!("p{i}"))
        .filter(|p| !low.contains(p))
        .collect();
    let t = 10 + 2 * maar_kube::driver::WITHDRAW_GRACE_S;
    let gone = pod("ml", &high[0], 1, json!({"spec": {"nodeName": "gpu-a"}}));
    let (_, writes) = d.step(&mut core, t, vec![Seen::Pod(Watched::Delete(gone))]);
    let (_, more) = d.step(&mut core, t + 1, vec![]);
    let all: Vec<Write> = writes.into_iter().chain(more).collect();
    assert_eq!(bound_to(&all, "ml/new"), Some("gpu-a"), "{all:?}");
}

#[test]
fn a_preempting_pod_is_bound_once_its_victims_are_gone_from_the_node() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![classed("victim", 8, "low", -10, json!({}))],
        ),
    );
    bound_all(&mut d, &mut core, 2, &writes);
    // A pod of a higher class: the victim is deleted, the new pod not yet bound
    // (the kubelet counts the terminating pod's cards until it is gone).
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![Seen::Pod(Watched::Apply(classed(
            "urgent",
            8,
            "high",
            1000,
            json!({}),
        )))],
    );
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Delete { job, .. } if job == "ml/victim")),
        "{writes:?}"
    );
    assert_eq!(bound_to(&writes, "ml/urgent"), None, "{writes:?}");
    let (_, writes) = d.step(&mut core, 4, vec![]);
    assert_eq!(bound_to(&writes, "ml/urgent"), None, "still terminating");
    // Gone: the bind goes out.
    let gone = classed(
        "victim",
        8,
        "low",
        -10,
        json!({"spec": {"nodeName": "gpu-a"}}),
    );
    let (_, writes) = d.step(&mut core, 5, vec![Seen::Pod(Watched::Delete(gone))]);
    assert_eq!(bound_to(&writes, "ml/urgent"), Some("gpu-a"), "{writes:?}");
}

#[test]
fn a_pod_waiting_beside_an_unlabelled_gpu_node_is_told_to_label_it() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let bare = json!({"metadata": {"labels": {"crater.ai/node-role": null,
        "crater.ai/gpu-model": null, "crater.ai/gpu-count": null, "crater.ai/gpu-memory": null}}});
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![
                node("gpu-a", 2, "a100", json!({})),
                node("bare", 8, "a100", bare),
            ],
            vec![
                pod("ml", "busy", 2, json!({})),
                pod("ml", "two", 2, json!({})),
            ],
        ),
    );
    // (Once the pod ahead of it runs: the room it waits for is not in its pool.)
    let mut later = bound_all(&mut d, &mut core, 2, &writes);
    later.extend(d.step(&mut core, 40, vec![]).1);
    let why = told(&later, "ml/two").expect("told why");
    assert!(
        why.contains("node bare has 8 idle GPUs that maar does not schedule")
            && why.contains(
                "kubectl label node bare crater.ai/gpu-model=MODEL crater.ai/gpu-count=8"
            ),
        "{why}"
    );
}

#[test]
fn a_pod_asking_for_a_resource_maar_does_not_count_is_not_placed_and_told() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let asks = |extra: &str| {
        json!({"spec": {"containers": [{"name": "main", "image": "pytorch:2.3",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1", extra: "1"},
                          "limits": {"nvidia.com/gpu": "1", extra: "1"}}}]}})
    };
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![
                pod("ml", "rdma", 1, asks("rdma/hca_shared_devices_a")),
                pod("ml", "huge", 1, asks("hugepages-2Mi")),
                pod("ml", "plain", 1, json!({})),
            ],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/plain"), Some("gpu-a"));
    for (job, what) in [
        ("ml/rdma", "rdma/hca_shared_devices_a"),
        ("ml/huge", "hugepages-2Mi"),
    ] {
        assert_eq!(bound_to(&writes, job), None, "{writes:?}");
        let why = told(&writes, job).expect("told why");
        assert!(why.contains(&format!("does not count `{what}`")), "{why}");
    }
}

#[test]
fn gpu_indices_that_name_cards_held_or_missing_are_not_trusted_at_a_restart() {
    // A restarted maar finds pods bound, their cards as annotated; two of them were
    // edited by hand: one names another pod's card, one a card the node lacks.
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let bound = |name: &str, cards: &str| {
        pod(
            "ml",
            name,
            1,
            json!({"metadata": {"annotations": {"crater.ai/gpu-indices": cards}},
                   "spec": {"nodeName": "gpu-a"}, "status": {"phase": "Running"}}),
        )
    };
    d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 4, "a100", json!({}))],
            vec![bound("a", "0"), bound("b", "0"), bound("c", "99")],
        ),
    );
    let c = core.cluster();
    let n = &c.nodes[c.node_id("gpu-a").unwrap() as usize];
    let held: Vec<usize> = n.gpus.iter().map(|g| g.allocs.len()).collect();
    assert_eq!(held.iter().sum::<usize>(), 3, "{held:?}");
    assert!(
        held.iter().all(|&h| h <= 1),
        "no card booked twice: {held:?}"
    );
    assert_eq!(
        c.events
            .iter()
            .filter(|e| e.reason == "GpuIndicesIgnored")
            .count(),
        2
    );
    // On a cordoned node (no fit for anyone), the same: never a card twice.
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let on_b = |name: &str, cards: &str| {
        pod(
            "ml",
            name,
            1,
            json!({"metadata": {"annotations": {"crater.ai/gpu-indices": cards}},
                   "spec": {"nodeName": "gpu-b"}, "status": {"phase": "Running"}}),
        )
    };
    d.step(
        &mut core,
        1,
        lists(
            vec![node(
                "gpu-b",
                4,
                "a100",
                json!({"spec": {"unschedulable": true}}),
            )],
            vec![on_b("x", "0"), on_b("y", "0")],
        ),
    );
    let c = core.cluster();
    let n = &c.nodes[c.node_id("gpu-b").unwrap() as usize];
    assert!(
        n.gpus.iter().all(|g| g.allocs.len() <= 1),
        "cordoned: no card twice"
    );
    assert_eq!(n.gpus.iter().map(|g| g.allocs.len()).sum::<usize>(), 2);
}

#[test]
fn a_pod_told_it_waits_hears_what_holds_the_room_and_how_a_missing_pool_is_made() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 2, "a100", json!({}))],
            vec![
                pod(
                    "web",
                    "theirs",
                    2,
                    json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "gpu-a"},
                           "status": {"phase": "Running"}}),
                ),
                pod("ml", "mine", 2, json!({})),
                pod(
                    "ml",
                    "elsewhere",
                    1,
                    json!({"metadata": {"annotations": {"crater.ai/pool": "nosuch"}}}),
                ),
            ],
        ),
    );
    let why = told(&writes, "ml/mine").expect("told why");
    assert!(
        why.contains("no end foreseen") && !why.contains("NotReady"),
        "{why}"
    );
    let why = told(&writes, "ml/elsewhere").expect("told why");
    assert!(
        why.contains("pool nosuch does not exist: label nodes crater.ai/node-role=nosuch"),
        "{why}"
    );
}

#[test]
fn a_gpu_cordon_annotation_with_entries_that_are_not_cards_is_said() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let cordons = json!({"metadata": {"annotations": {"crater.ai/cordoned-gpus": "1,abc,99"}}});
    d.step(
        &mut core,
        1,
        lists(vec![node("gpu-a", 8, "a100", cordons)], vec![]),
    );
    let c = core.cluster();
    let n = &c.nodes[c.node_id("gpu-a").unwrap() as usize];
    assert!(n.gpus[1].cordoned);
    let said: Vec<&str> = c
        .events
        .iter()
        .filter(|e| e.reason == "BadAnnotation")
        .map(|e| e.message.as_str())
        .collect();
    assert!(
        said.len() == 1 && said[0].contains("`abc`, `99` not a GPU of this node (0-7)"),
        "{said:?}"
    );
}

#[test]
fn a_node_takes_no_more_pods_than_its_allocatable_pods() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let tiny = json!({"status": {"allocatable": {"pods": "2"}}});
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("tiny", 8, "a100", tiny)],
            vec![
                pod(
                    "web",
                    "theirs",
                    1,
                    json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "tiny"},
                           "status": {"phase": "Running"}}),
                ),
                pod("ml", "one", 1, json!({})),
                pod("ml", "two", 1, json!({})),
            ],
        ),
    );
    let bound: Vec<&str> = ["ml/one", "ml/two"]
        .into_iter()
        .filter(|j| bound_to(&writes, j).is_some())
        .collect();
    assert_eq!(
        bound.len(),
        1,
        "another scheduler's pod holds one of its 2: {writes:?}"
    );
    let waiting = if bound[0] == "ml/one" {
        "ml/two"
    } else {
        "ml/one"
    };
    let why = told(&writes, waiting).expect("told why");
    assert!(why.contains("too many pods"), "{why}");
}

#[test]
fn taints_on_the_node_object_keep_pods_off_until_tolerated_or_removed() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let taint = json!({"spec": {"taints": [
        {"key": "dedicated", "value": "team-a", "effect": "NoSchedule"},
        {"key": "soft", "effect": "PreferNoSchedule"}
    ]}});
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", taint.clone())],
            vec![
                pod("ml", "plain", 1, json!({})),
                pod(
                    "ml",
                    "team-a",
                    1,
                    json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}]}}),
                ),
            ],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/team-a"), Some("gpu-a"));
    assert_eq!(bound_to(&writes, "ml/plain"), None);
    let why = told(&writes, "ml/plain").expect("told why");
    assert!(
        why.contains("untolerated taint dedicated=team-a:NoSchedule")
            && why.contains("a toleration for dedicated=team-a:NoSchedule"),
        "{why}"
    );
    // `kubectl taint node gpu-a dedicated-`: the node is re-read, the pod bound.
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            8,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(bound_to(&writes, "ml/plain"), Some("gpu-a"));
}

#[test]
fn a_pod_bound_to_a_node_maar_does_not_know_holds_nothing_until_the_node_appears() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 1, "a100", json!({}))],
            vec![
                pod("ml", "stray", 1, json!({"spec": {"nodeName": "gone-node"}})),
                pod("ml", "next", 1, json!({})),
            ],
        ),
    );
    // No phantom: the stray pod is no job, and the one card goes to the next pod.
    assert!(core.cluster().job_id("ml/stray").is_err());
    assert_eq!(bound_to(&writes, "ml/next"), Some("gpu-a"));
    assert!(core
        .cluster()
        .events
        .iter()
        .any(|e| e.reason == "PodOnUnknownNode" && e.message.contains("gone-node")));
    // The node appears: the pod runs there, in maar's books too.
    d.step(
        &mut core,
        2,
        vec![Seen::Node(Watched::Apply(node(
            "gone-node",
            2,
            "a100",
            json!({}),
        )))],
    );
    assert_eq!(phase(&core, "ml/stray"), Phase::Running);
}

#[test]
fn a_pool_object_applied_while_maar_runs_takes_the_nodes_of_its_role() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let gpu_role = json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}});
    d.step(
        &mut core,
        1,
        lists(vec![node("gpu-node-01", 8, "a100", gpu_role)], vec![]),
    );
    let c = core.cluster();
    assert_eq!(c.pool_name(c.nodes[0].pool), "gpu");
    // The README's order: nodes labelled first, the Pool applied after.
    let pool = |sel: &str| {
        Seen::Pool(Watched::Apply(Ok(training_pool(
            "training-gpu",
            "crater.ai/node-role",
            sel,
        ))))
    };
    d.step(&mut core, 2, vec![pool("gpu")]);
    let c = core.cluster();
    assert_eq!(c.pool_name(c.nodes[0].pool), "training-gpu");
    // The Pool edited to select other nodes: this one goes back to its role's pool.
    d.step(&mut core, 3, vec![pool("a100-only")]);
    let c = core.cluster();
    assert_eq!(c.pool_name(c.nodes[0].pool), "gpu");
}

#[test]
fn a_maar_of_one_namespace_counts_the_pods_of_every_namespace() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let raw = |ns: &str, name: &str, extra: Value| {
        let mut v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
            "spec": {"schedulerName": "maar", "containers": [{"name": "m", "image": "i",
                "resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
            "status": {"phase": "Pending"},
        });
        merge(&mut v, extra);
        let p: KPod = serde_json::from_value(v).unwrap();
        Box::new(PodSeen::of_unless(
            &p,
            &mut std::collections::HashSet::new(),
            Some("ml"),
        ))
    };
    // Another namespace's maar pod, bound (by a maar of that namespace): it holds its
    // cards. One waiting there is not this maar's to bind.
    let theirs = raw("other", "theirs", json!({"spec": {"nodeName": "gpu-a"}}));
    assert!(!theirs.ours);
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![
                theirs,
                raw("other", "waits-there", json!({})),
                raw("ml", "mine", json!({})),
                raw("ml", "mine-too", json!({})),
            ],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/mine"), Some("gpu-a"));
    assert_eq!(bound_to(&writes, "other/waits-there"), None);
    // 8 cards: 4 held by the other namespace's pod, 4 by the first of mine.
    assert_eq!(bound_to(&writes, "ml/mine-too"), None);
}

#[test]
fn a_reason_that_failed_to_be_written_is_written_again() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 1, "a100", json!({}))],
            vec![pod("ml", "big", 4, json!({}))],
        ),
    );
    assert!(told(&writes, "ml/big").is_some());
    // Nothing new to tell while it is written.
    let (_, writes) = d.step(&mut core, 2, vec![]);
    assert!(told(&writes, "ml/big").is_none());
    // The write failed (the API server was away): told again a few seconds later.
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![Seen::NotTold {
            job: "ml/big".into(),
        }],
    );
    assert!(told(&writes, "ml/big").is_none());
    let (_, writes) = d.step(&mut core, 3 + maar_kube::driver::RETRY_TELL_S, vec![]);
    assert!(told(&writes, "ml/big").is_some());
}

fn notes<'a>(writes: &'a [Write], reason: &str) -> Vec<(&'a str, &'a str)> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Note {
                regarding,
                reason: r,
                message,
                warning: true,
            } if r == reason => Some((
                regarding.name.as_deref().unwrap_or_default(),
                message.as_str(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_quota_maar_cannot_read_closes_its_namespace_and_is_told_on_the_object() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let bad: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "Quota",
        "metadata": {"name": "typo", "namespace": "ml"},
        "spec": {"pool": "training", "max": {"gpu": "lots"}},
    }))
    .unwrap();
    let q = maar_kube::map::quota_of(&bad).unwrap();
    let mut seen = vec![Seen::Quota(Watched::Apply(Ok(q)))];
    seen.extend(lists(
        vec![node("gpu-a", 8, "a100", json!({}))],
        vec![pod("ml", "p", 1, json!({}))],
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    assert_eq!(bound_to(&writes, "ml/p"), None, "not unlimited: closed");
    let n = notes(&writes, "BadQuota");
    assert!(
        n.iter()
            .any(|(obj, m)| *obj == "typo" && m.contains("may use nothing in pool training")),
        "{writes:?}"
    );
}

#[test]
fn an_edited_trainjob_is_told_that_its_changes_are_not_applied() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let spec = |gpus: u32| {
        json!({"image": "i", "resources": {"pool": "training", "gpu": {"count": gpus},
            "cpu": {"cores": 1}, "memory": {"capacity": "1Gi"}}})
    };
    let mut seen = lists(vec![node("gpu-a", 8, "a100", json!({}))], vec![]);
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(trainjob("ml", "tj", spec(1))),
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    assert!(notes(&writes, "SpecNotApplied").is_empty());
    // Its status written by maar comes back unchanged: nothing said.
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Object(
            Owner::TrainJob,
            Watched::Apply(trainjob("ml", "tj", spec(1))),
        )],
    );
    assert!(notes(&writes, "SpecNotApplied").is_empty());
    // `kubectl edit`: 2 GPUs now. Told once, on the TrainJob.
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![Seen::Object(
            Owner::TrainJob,
            Watched::Apply(trainjob("ml", "tj", spec(2))),
        )],
    );
    let n = notes(&writes, "SpecNotApplied");
    assert_eq!(n.len(), 1, "{writes:?}");
    assert!(n[0].1.contains("delete and re-apply"), "{}", n[0].1);
    let c = core.cluster();
    assert_eq!(
        c.jobs[c.job_id("ml/tj").unwrap() as usize].spec.gpu.count,
        1
    );
}

#[test]
fn pods_found_at_start_queue_oldest_first_not_by_name() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let at = |t: &str| json!({"metadata": {"creationTimestamp": t}});
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 1, "a100", json!({}))],
            vec![
                pod("ml", "a-newest", 1, at("2026-12-02T05:00:03Z")),
                pod("ml", "m-middle", 1, at("2026-12-02T05:00:02Z")),
                pod("ml", "z-oldest", 1, at("2026-12-02T05:00:01Z")),
            ],
        ),
    );
    assert_eq!(bound_to(&writes, "ml/z-oldest"), Some("gpu-a"));
    assert_eq!(bound_to(&writes, "ml/a-newest"), None);
}

#[test]
fn a_pod_that_names_no_pool_goes_to_a_pool_whose_nodes_its_rules_allow() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    // A Pool object for the `gpu` role first (it is the project's first pool), and a
    // node of role `training` the pod's selector names.
    let mut seen = vec![Seen::Pool(Watched::InitApply(Ok(training_pool(
        "training-gpu",
        "crater.ai/node-role",
        "gpu",
    ))))];
    seen.extend(lists(
        role_gpu_n3_and_plain_n1(8),
        vec![pod(
            "ml",
            "on-n1",
            1,
            json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-n1"}}}),
        )],
    ));
    let (_, writes) = d.step(&mut core, 1, seen);
    assert_eq!(bound_to(&writes, "ml/on-n1"), Some("gpu-n1"));
    let c = core.cluster();
    assert_eq!(
        c.jobs[c.job_id("ml/on-n1").unwrap() as usize].spec.pool,
        "training"
    );
}

#[test]
fn a_waiting_pod_whose_pool_lost_its_node_to_a_new_pool_follows_the_node() {
    let pool = |name: &str, key: &str, value: &str| {
        Seen::Pool(Watched::Apply(Ok(training_pool(name, key, value))))
    };
    let holder = || {
        pod(
            "ml",
            "holder",
            1,
            json!({"spec": {"nodeName": "gpu-n1"}, "status": {"phase": "Running"}}),
        )
    };
    // Two pools for project ml: `training-gpu` (gpu-n3) and the role pool `training`
    // (gpu-n1, whose one card `holder` holds); `pod` waits beside it.
    let started = |pod: Box<PodSeen>| {
        let mut core = new_core();
        let mut d = KubeDriver::detached();
        let mut seen = vec![pool("training-gpu", "crater.ai/node-role", "gpu")];
        seen.extend(lists(role_gpu_n3_and_plain_n1(1), vec![holder(), pod]));
        let (_, writes) = d.step(&mut core, 1, seen);
        (core, d, writes)
    };
    let pool_of = |core: &maar_scheduler::input::Core, job: &str| {
        let c = core.cluster();
        c.jobs[c.job_id(job).unwrap() as usize].spec.pool.clone()
    };
    // The pod names no pool and asks for gpu-n1: it waits in `training`, the pool of
    // the only node it may use.
    let on_n1 = json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-n1"}}});
    let (mut core, mut d, writes) = started(pod("ml", "waiter", 1, on_n1.clone()));
    assert_eq!(bound_to(&writes, "ml/waiter"), None, "{writes:?}");
    assert_eq!(pool_of(&core, "ml/waiter"), "training");
    // A Pool applied while it waits takes gpu-n1: `training` has no node left that
    // lets the pod on, so it follows the node (it named no pool).
    d.step(
        &mut core,
        2,
        vec![pool("team-b", "kubernetes.io/hostname", "gpu-n1")],
    );
    assert_eq!(pool_of(&core, "ml/waiter"), "team-b");
    let c = core.cluster();
    let id = c.job_id("ml/waiter").unwrap();
    assert!(
        c.events
            .iter()
            .any(|e| e.reason == "PoolMoved" && e.message.contains("waits in pool team-b now")),
        "{:?}",
        c.jobs[id as usize].reason
    );
    // The card is freed: the pod is bound there.
    let (_, writes) = d.step(&mut core, 3, vec![Seen::Pod(Watched::Delete(holder()))]);
    assert_eq!(bound_to(&writes, "ml/waiter"), Some("gpu-n1"), "{writes:?}");
    // A pod that names its pool stays in it, whatever changes.
    let named = json!({"metadata": {"annotations": {"crater.ai/pool": "training"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-n1"}}});
    let (mut core, mut d, _) = started(pod("ml", "named", 1, named));
    assert_eq!(pool_of(&core, "ml/named"), "training");
    d.step(
        &mut core,
        2,
        vec![pool("team-b", "kubernetes.io/hostname", "gpu-n1")],
    );
    assert_eq!(pool_of(&core, "ml/named"), "training");
    // A node relabelled into another pool takes the pods that wait for it along.
    let (mut core, mut d, _) = started(pod("ml", "waiter", 1, on_n1));
    assert_eq!(pool_of(&core, "ml/waiter"), "training");
    d.step(
        &mut core,
        2,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-n1",
            1,
            "a100",
            json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}}),
        )))],
    );
    assert_eq!(pool_of(&core, "ml/waiter"), "training-gpu");
}

#[test]
fn a_gpu_memory_label_that_is_no_size_is_told_not_taken_as_zero_silently() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node(
                "gpu-a",
                8,
                "a100",
                json!({"metadata": {"labels": {"crater.ai/gpu-memory": "lots"}}}),
            )],
            vec![],
        ),
    );
    let n = notes(&writes, "BadLabel");
    assert_eq!(n.len(), 1, "{writes:?}");
    assert!(
        n[0].1
            .contains("crater.ai/gpu-memory=lots is not a memory size"),
        "{}",
        n[0].1
    );
    // Unchanged labels are not told again.
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            8,
            "a100",
            json!({"metadata": {"labels": {"crater.ai/gpu-memory": "lots"}}}),
        )))],
    );
    assert!(notes(&writes, "BadLabel").is_empty());
}

#[test]
fn a_failed_watch_is_retried_within_seconds_not_half_a_minute() {
    let delays: Vec<std::time::Duration> = maar_kube::world::watch_backoff().take(20).collect();
    assert_eq!(delays.len(), 20, "it never gives up");
    // Jitter adds at most the delay again: never more than 6 s apart.
    assert!(
        delays
            .iter()
            .all(|d| *d <= std::time::Duration::from_secs(6)),
        "{delays:?}"
    );
    assert!(delays[0] <= std::time::Duration::from_secs(1), "{delays:?}");
}

fn expected_start(writes: &[Write], job: &str) -> Option<(Option<u64>, &'static str)> {
    writes.iter().find_map(|w| match w {
        Write::ExpectedStart {
            job: j,
            in_s,
            basis,
            ..
        } if j == job => Some((*in_s, *basis)),
        _ => None,
    })
}

#[test]
fn a_waiting_pod_is_told_when_it_is_expected_to_start_and_told_again_only_when_that_moves() {
    use maar_scheduler::forecast::Reach;
    use maar_scheduler::Driver;
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let runtime = json!({"metadata": {"annotations": {"crater.ai/estimated-runtime": "2h"}}});
    let writes = d
        .step(
            &mut core,
            1,
            lists(
                vec![node("gpu-a", 8, "a100", json!({}))],
                vec![pod("ml", "long", 8, runtime)],
            ),
        )
        .1;
    bound_all(&mut d, &mut core, 2, &writes);
    assert_eq!(phase(&core, "ml/long"), Phase::Running);
    d.step(
        &mut core,
        3,
        vec![Seen::Pod(Watched::Apply(pod("ml", "next", 8, json!({}))))],
    );
    assert_eq!(phase(&core, "ml/next"), Phase::Pending);
    let forecast = |core: &Core| core.cluster().forecast(Reach::default(), None);
    let f = forecast(&core);
    d.starts(&core, &f);
    let (_, writes) = d.step(&mut core, 4, vec![]);
    // It starts when the running pod's two hours are up (it started at 2).
    let (in_s, basis) = expected_start(&writes, "ml/next").expect("told its start");
    assert_eq!(basis, "estimate");
    let in_s = in_s.expect("a time");
    assert!(in_s.abs_diff(2 * 3600 + 2 - 4) <= 60, "{in_s}");
    let uid = writes.iter().find_map(|w| match w {
        Write::ExpectedStart { uid, object, .. } => Some((uid.clone(), *object)),
        _ => None,
    });
    assert_eq!(uid, Some(("uid-next".to_string(), None)));
    // The next forecast says the same: nothing is written again.
    let f = forecast(&core);
    d.starts(&core, &f);
    let (_, writes) = d.step(&mut core, 5, vec![]);
    assert_eq!(expected_start(&writes, "ml/next"), None, "{writes:?}");
    // The write had failed: the next forecast writes it again.
    d.step(
        &mut core,
        6,
        vec![Seen::StartNotTold {
            job: "ml/next".into(),
        }],
    );
    let f = forecast(&core);
    d.starts(&core, &f);
    let (_, writes) = d.step(&mut core, 7, vec![]);
    assert!(expected_start(&writes, "ml/next").is_some(), "{writes:?}");
    // The running pod is deleted: the waiting one is bound, and no longer told a start.
    let gone = pod("ml", "long", 8, json!({"spec": {"nodeName": "gpu-a"}}));
    d.step(&mut core, 8, vec![Seen::Pod(Watched::Delete(gone))]);
    assert_ne!(phase(&core, "ml/next"), Phase::Pending);
    let f = forecast(&core);
    d.starts(&core, &f);
    let (_, writes) = d.step(&mut core, 9, vec![]);
    assert_eq!(expected_start(&writes, "ml/next"), None, "{writes:?}");
}

#[test]
fn an_expected_start_that_moves_little_is_not_written_again() {
    use maar_kube::driver::start_moved;
    // Two hours ahead: ten minutes is within a tenth of it.
    assert!(!start_moved(
        (Some(7200), "estimate"),
        (Some(7800), "estimate"),
        0
    ));
    assert!(start_moved(
        (Some(7200), "estimate"),
        (Some(8100), "estimate"),
        0
    ));
    // Soon: five minutes is the least slack.
    assert!(!start_moved(
        (Some(100), "estimate"),
        (Some(390), "estimate"),
        0
    ));
    assert!(start_moved(
        (Some(100), "estimate"),
        (Some(500), "estimate"),
        0
    ));
    // Another basis, or known against not known, is always told.
    assert!(start_moved(
        (Some(7200), "estimate"),
        (Some(7200), "history"),
        0
    ));
    assert!(start_moved((Some(7200), "estimate"), (None, "unknown"), 0));
    assert!(!start_moved((None, "never"), (None, "never"), 0));
}

#[test]
fn maar_label_writes_the_nodes_labels_in_kubernetes_and_the_waiting_pod_is_bound() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let ssd = json!({"spec": {"nodeSelector": {"disk": "ssd"}}});
    d.step(
        &mut core,
        1,
        lists(
            vec![node(
                "gpu-a",
                8,
                "a100",
                json!({"metadata": {"labels": {"old": "x"}}}),
            )],
            vec![pod("ml", "wants-ssd", 1, ssd)],
        ),
    );
    assert_eq!(phase(&core, "ml/wants-ssd"), Phase::Pending);
    d.take_unsent();
    let label = |set: &[(&str, &str)], remove: &[&str]| maar_scheduler::Command::LabelNode {
        node: "gpu-a".into(),
        set: set
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        remove: remove.iter().map(|k| k.to_string()).collect(),
    };
    // A label maar refuses reaches nothing.
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("op"),
        label(&[("bad key!", "v")], &[]),
    );
    assert!(out.result.is_err());
    assert!(
        !d.take_unsent()
            .iter()
            .any(|w| matches!(w, Write::Labels { .. })),
        "a refused label is not written"
    );
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("op"),
        label(&[("disk", "ssd")], &["old"]),
    );
    assert!(out.is_ok(), "{:?}", out.result);
    let writes = d.take_unsent();
    let labels = writes.iter().find_map(|w| match w {
        Write::Labels { node, set, remove } => Some((node.clone(), set.clone(), remove.clone())),
        _ => None,
    });
    assert_eq!(
        labels,
        Some((
            "gpu-a".to_string(),
            [("disk".to_string(), "ssd".to_string())].into(),
            vec!["old".to_string()]
        ))
    );
    // The pod the label was for is bound with it.
    assert_eq!(bound_to(&writes, "ml/wants-ssd"), Some("gpu-a"));
    // The watch's echo of the labelled node changes nothing.
    let echo = node(
        "gpu-a",
        8,
        "a100",
        json!({"metadata": {"labels": {"disk": "ssd"}}}),
    );
    d.step(&mut core, 2, vec![Seen::Node(Watched::Apply(echo))]);
    let c = core.cluster();
    let n = &c.nodes[c.node_id("gpu-a").unwrap() as usize];
    assert_eq!(n.labels().get("disk").map(String::as_str), Some("ssd"));
    assert!(!n.labels().contains_key("old"));
}

/// A TrainJob file submitted to maar (a dispatch among clusters chose this one) is made
/// in the cluster as written, in its namespace, with why it was sent here; the core
/// does not take it until the watch brings it (as after `kubectl apply`). A pod file,
/// which maar cannot make, is refused with the kubectl line.
#[test]
fn a_submitted_trainjob_file_is_made_in_the_cluster_as_written() {
    let mut d = KubeDriver::detached();
    let mut core = new_core();
    let text = "apiVersion: crater.ai/v1
kind: TrainJob
metadata:
  name: gpt-small
  namespace: ml
  labels: {team: nlp}
spec:
  image: registry.example.com/ai/train:1
  env: {EPOCHS: \"3\"}
  resources:
    pool: training
    gpu: {count: 2}
";
    let m: maar_scheduler::manifest::Manifest = serde_saphyr::from_str(text).unwrap();
    let mut spec = m.to_job_spec().unwrap();
    // As the application's loader keeps it: the file's object.
    spec.manifest = Some(serde_saphyr::from_str::<Value>(text).unwrap());
    spec.dispatched = Some("sent to b: starts now there".into());
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("op"),
        maar_scheduler::Command::Submit(Box::new(spec.clone())),
    );
    assert_eq!(
        out.result.as_deref(),
        Ok("TrainJob ml/gpt-small sent to the cluster: maar schedules it when the watch brings it")
    );
    assert!(core.cluster().job_id("ml/gpt-small").is_err());
    let writes = d.take_unsent();
    let Some(Write::CreateObject {
        job,
        kind,
        plural,
        object,
    }) = writes
        .iter()
        .find(|w| matches!(w, Write::CreateObject { .. }))
    else {
        panic!("no object made: {writes:?}");
    };
    assert_eq!(
        (job.as_str(), kind.as_str(), plural.as_str()),
        ("ml/gpt-small", "TrainJob", "trainjobs")
    );
    // As written: fields maar does not model (env, labels) are kept.
    assert_eq!(object["spec"]["env"]["EPOCHS"], "3");
    assert_eq!(object["metadata"]["labels"]["team"], "nlp");
    assert_eq!(object["metadata"]["namespace"], "ml");
    assert_eq!(
        object["metadata"]["annotations"]["crater.ai/dispatched"],
        "sent to b: starts now there"
    );
    // Once the watch brought it, the same submit is refused as a duplicate: nothing is
    // made twice.
    let seen = lists(
        vec![node("gpu-a", 8, "a100", json!({}))],
        vec![pod("ml", "gpt-small", 1, json!({}))],
    );
    d.step(&mut core, 1, seen);
    assert!(core.cluster().job_id("ml/gpt-small").is_ok());
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("op"),
        maar_scheduler::Command::Submit(Box::new(spec.clone())),
    );
    assert!(matches!(
        out.result,
        Err(maar_scheduler::ClusterError::DuplicateJob { .. })
    ));
    assert!(!d
        .take_unsent()
        .iter()
        .any(|w| matches!(w, Write::CreateObject { .. })));
    // Without the file (a spec built in maar), nothing is made: the kubectl line.
    spec.manifest = None;
    spec.name = "other".into();
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("op"),
        maar_scheduler::Command::Submit(Box::new(spec)),
    );
    assert!(out
        .result
        .unwrap_err()
        .to_string()
        .contains("kubectl apply -f"),);
}

/// A job a federation moves between two Kubernetes clusters: in the first it is a
/// dispatched TrainJob (the annotations say why it was sent and when it was to start)
/// that cannot start; the federation's cancel withdraws it there without a pod made or
/// bound, its reason saying where it went; in the second the TrainJob is made as
/// written, marked as moved, and read back as a job that never moves again.
#[test]
fn a_trainjob_moved_between_two_clusters_runs_in_one_only_and_moves_no_more() {
    let make = |name: &str, ann: Value| -> Box<ObjectSeen> {
        let o: kube::core::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "crater.ai/v1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                "resourceVersion": "12", "generation": 1, "annotations": ann},
            "spec": {"resources": {"pool": "gpu", "gpu": {"count": 2, "models": ["h200"]}}},
        }))
        .unwrap();
        Box::new(ObjectSeen::of(Owner::TrainJob, &o))
    };
    let gpu_node = || {
        node(
            "gpu-a",
            8,
            "a100",
            json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}}),
        )
    };
    // Cluster a: only a100 cards; the job was sent to start now (its H200s are gone).
    let (mut a, mut core_a) = (KubeDriver::detached(), new_core());
    let mut seen = lists(vec![gpu_node()], vec![]);
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(make(
            "moving",
            json!({"crater.ai/dispatched": "sent to a: starts now there",
                   "crater.ai/sent-start-in": "0"}),
        )),
    ));
    let (_, writes) = a.step(&mut core_a, 1, seen);
    assert!(made(&writes, "ml/moving").is_empty(), "{writes:?}");
    let c = core_a.cluster();
    let j = &c.jobs[c.job_id("ml/moving").unwrap() as usize];
    assert_eq!(j.phase, Phase::Pending);
    assert_eq!(j.spec.sent_start_in, Some(0));
    assert_eq!(j.spec.moved_from, None);
    assert!(c.job_view(j).movable);
    let spec = (*j.spec).clone();
    // The federation's withdrawal: nothing made, nothing bound; the reason says where.
    let out = maar_scheduler::Driver::command(
        &mut a,
        &mut core_a,
        maar_scheduler::Actor::system("federation"),
        maar_scheduler::Command::Cancel {
            job: "ml/moving".into(),
            why: Some("moved to b".into()),
        },
    );
    assert!(out.result.is_ok(), "{:?}", out.result);
    let (_, writes) = a.step(&mut core_a, 2, vec![]);
    let mut writes = writes;
    writes.extend(a.take_unsent());
    assert!(made(&writes, "ml/moving").is_empty(), "{writes:?}");
    assert_eq!(bound_to(&writes, "ml/moving"), None);
    assert_eq!(phase(&core_a, "ml/moving"), Phase::Cancelled);
    let c = core_a.cluster();
    let reason = c.jobs[c.job_id("ml/moving").unwrap() as usize]
        .reason
        .to_string();
    assert!(reason.contains("moved to b"), "{reason}");
    // Cluster b: the TrainJob is made once, as written, marked as moved.
    let (mut b, mut core_b) = (KubeDriver::detached(), new_core());
    let mut moved = spec;
    moved.moved_from = Some("a".into());
    moved.dispatched = Some("moved from a (once: ...); sent to b: starts now there".into());
    moved.manifest = Some(json!({
        "apiVersion": "crater.ai/v1", "kind": "TrainJob",
        "metadata": {"name": "moving", "namespace": "ml"},
        "spec": {"resources": {"pool": "gpu", "gpu": {"count": 2, "models": ["h200"]}}},
    }));
    let out = maar_scheduler::Driver::command(
        &mut b,
        &mut core_b,
        maar_scheduler::Actor::system("federation"),
        maar_scheduler::Command::Submit(Box::new(moved)),
    );
    assert!(out.result.is_ok(), "{:?}", out.result);
    let writes = b.take_unsent();
    let objects = created(&writes);
    assert_eq!(objects.len(), 1, "{writes:?}");
    let ann = &objects[0]["metadata"]["annotations"];
    assert_eq!(ann["crater.ai/moved-from"], "a");
    assert_eq!(ann["crater.ai/sent-start-in"], "0");
    // Its watch brings it back: a job moved once, which moves no more.
    let mut seen = lists(
        vec![node(
            "h200-a",
            8,
            "h200",
            json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}}),
        )],
        vec![],
    );
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(make("moving", ann.clone())),
    ));
    b.step(&mut core_b, 1, seen);
    let c = core_b.cluster();
    let j = &c.jobs[c.job_id("ml/moving").unwrap() as usize];
    assert_eq!(j.spec.moved_from.as_deref(), Some("a"));
    assert!(!c.job_view(j).movable);
}

/// A TrainJob applied to the managing cluster with `crater.ai/cluster: auto` (a label,
/// as a user adds it): read as a job the federation is to send, carrying the object as
/// written; an annotation added later (`kubectl annotate`) is no spec change. Sent on, it is
/// made in the other cluster as written with the why, without an earlier dispatch's
/// marks, and read back there as sent (it is not sent again).
#[test]
fn a_trainjob_asking_for_auto_is_made_in_the_cluster_it_is_sent_to_as_written() {
    let obj = |labels: Value, ann: Value| -> Box<ObjectSeen> {
        let o: kube::core::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "crater.ai/v1", "kind": "TrainJob",
            "metadata": {"name": "auto-tj", "namespace": "ml", "uid": "uid-auto-tj",
                "resourceVersion": "7", "generation": 1, "labels": labels, "annotations": ann},
            "spec": {"image": "pytorch:2.3", "resources": {"pool": "gpu",
                "gpu": {"count": 2, "models": ["h200"]}}},
        }))
        .unwrap();
        Box::new(ObjectSeen::of(Owner::TrainJob, &o))
    };
    let gpu_node = |name: &str, model: &str| {
        node(
            name,
            8,
            model,
            json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}}),
        )
    };
    let (mut a, mut core_a) = (KubeDriver::detached(), new_core());
    let mut seen = lists(vec![gpu_node("gpu-a", "a100")], vec![]);
    // Stale marks of an earlier dispatch must not survive a new one.
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(obj(
            json!({"crater.ai/cluster": "auto", "team": "nlp"}),
            json!({}),
        )),
    ));
    a.step(&mut core_a, 1, seen);
    let c = core_a.cluster();
    let j = &c.jobs[c.job_id("ml/auto-tj").unwrap() as usize];
    assert_eq!(j.phase, Phase::Pending);
    assert_eq!(c.job_view(j).to_send.as_deref(), Some("auto"));
    let written = j.spec.manifest.clone().expect("the object as written");
    assert_eq!(written["metadata"]["labels"]["crater.ai/cluster"], "auto");
    assert_eq!(written["spec"]["resources"]["gpu"]["count"], 2);
    assert!(written.get("status").is_none());
    let mut spec = (*j.spec).clone();
    // `kubectl annotate` on it: not a change of its spec (the object as written
    // changed, what maar queued did not).
    let (_, writes) = a.step(
        &mut core_a,
        2,
        vec![Seen::Object(
            Owner::TrainJob,
            Watched::Apply(obj(
                json!({"crater.ai/cluster": "auto", "team": "nlp"}),
                json!({"owner": "someone"}),
            )),
        )],
    );
    assert!(notes(&writes, "SpecNotApplied").is_empty(), "{writes:?}");
    // Sent on (as the federation's mover does): made in cluster b as written.
    spec.dispatched = Some("sent to b: starts now on h200-b there; in a it ...".into());
    spec.sent_start_in = Some(0);
    if let Some(m) = spec.manifest.as_mut() {
        m["metadata"]["annotations"] =
            json!({"crater.ai/sent-start-in": "3600", "crater.ai/moved-from": "z"});
    }
    let (mut b, mut core_b) = (KubeDriver::detached(), new_core());
    b.step(
        &mut core_b,
        1,
        lists(vec![gpu_node("h200-b", "h200")], vec![]),
    );
    let out = maar_scheduler::Driver::command(
        &mut b,
        &mut core_b,
        maar_scheduler::Actor::system("federation"),
        maar_scheduler::Command::Submit(Box::new(spec)),
    );
    assert!(out.result.is_ok(), "{:?}", out.result);
    let writes = b.take_unsent();
    let objects = created(&writes);
    assert_eq!(objects.len(), 1, "{writes:?}");
    let made = objects[0];
    assert_eq!(made["metadata"]["labels"]["team"], "nlp");
    assert_eq!(made["metadata"]["namespace"], "ml");
    assert_eq!(made["spec"]["image"], "pytorch:2.3");
    let ann = &made["metadata"]["annotations"];
    assert!(ann["crater.ai/dispatched"]
        .as_str()
        .unwrap()
        .starts_with("sent to b"));
    assert_eq!(ann["crater.ai/sent-start-in"], "0");
    assert!(ann.get("crater.ai/moved-from").is_none(), "{ann}");
    // Its watch brings it back in b: sent, so not to be sent again; it runs there.
    let back: kube::core::DynamicObject = serde_json::from_value({
        let mut v = made.clone();
        v["metadata"]["uid"] = json!("uid-b");
        v
    })
    .unwrap();
    let (_, writes) = b.step(
        &mut core_b,
        2,
        vec![Seen::Object(
            Owner::TrainJob,
            Watched::Apply(Box::new(ObjectSeen::of(Owner::TrainJob, &back))),
        )],
    );
    let c = core_b.cluster();
    let j = &c.jobs[c.job_id("ml/auto-tj").unwrap() as usize];
    assert_eq!(c.job_view(j).to_send, None);
    assert!(j
        .spec
        .dispatched
        .as_deref()
        .unwrap()
        .starts_with("sent to b"));
    let pods_made = writes
        .iter()
        .filter(|w| matches!(w, Write::CreatePods { job, .. } if job == "ml/auto-tj"))
        .count();
    assert_eq!(pods_made, 1, "{writes:?}");
}

/// A TrainJob asking for `auto` that the federation leaves in this cluster (the
/// `keep` command) is placed by that command's cycle, before any second's step could
/// tell it "waiting for the next scheduling cycle" as a FailedScheduling warning
/// (seen on a real API server when leaving it was an observation and waited for the
/// next cycle). Held, it is told nothing until the federation says why it stays held.
#[test]
fn a_trainjob_the_federation_leaves_here_is_placed_before_it_is_told_it_waits() {
    use maar_scheduler::{Actor, Command, Driver, Input, Observation};
    let mut core = new_core();
    core.set_federation(Some("east".into()));
    let mut d = KubeDriver::detached();
    let o: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ml", "uid": "uid-t",
            "resourceVersion": "12", "generation": 1,
            "annotations": {"crater.ai/cluster": "auto"}},
        "spec": {"image": "i", "resources": {"pool": "gpu", "gpu": {"count": 1}}},
    }))
    .unwrap();
    let mut seen = lists(
        vec![node(
            "gpu-a",
            8,
            "a100",
            json!({"metadata": {"labels": {"crater.ai/node-role": "gpu"}}}),
        )],
        vec![],
    );
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(Box::new(ObjectSeen::of(Owner::TrainJob, &o))),
    ));
    let told = |writes: &[Write]| -> Vec<String> {
        writes
            .iter()
            .filter_map(|w| match w {
                Write::Unschedulable { job, message, .. } if job == "ml/t" => Some(message.clone()),
                _ => None,
            })
            .collect()
    };
    let (_, writes) = d.step(&mut core, 1, seen);
    assert_eq!(phase(&core, "ml/t"), Phase::Pending);
    // Held until the federation decides, which is no failure to tell (a real API server
    // showed a FailedScheduling warning for every such job before).
    assert_eq!(told(&writes), Vec::<String>::new());
    // The federation's word that it is still held (the cluster it names refuses it) is
    // told.
    let refused = "west refused it: no pool gpu there";
    let out = core.apply_held(Input::Observe(Observation::NotSent {
        job: "ml/t".into(),
        why: refused.into(),
    }));
    assert!(out.is_ok(), "{:?}", out.result);
    let (_, writes) = d.step(&mut core, 2, vec![]);
    assert!(
        told(&writes).iter().any(|m| m.starts_with(refused)),
        "{:?}",
        told(&writes)
    );
    // Left here: queued, and placed by the command's own cycle.
    let out = d.command(
        &mut core,
        Actor::system("federation"),
        Command::Keep {
            job: "ml/t".into(),
            why: Some("no other cluster starts it sooner".into()),
        },
    );
    assert!(out.is_ok(), "{:?}", out.result);
    assert_eq!(phase(&core, "ml/t"), Phase::Running);
    let (_, writes) = d.step(&mut core, 3, vec![]);
    assert_eq!(told(&writes), Vec::<String>::new());
}

#[test]
fn a_pod_maar_preempts_leaves_the_queue_and_is_never_bound_again() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    // A low-priority 8-GPU pod of maar's runs on the only node.
    let low = |extra: Value| {
        let mut e = json!({"spec": {"nodeName": "gpu-a"}, "status": {"phase": "Running"},
            "metadata": {"annotations": {"crater.ai/priority": "low"}}});
        merge(&mut e, extra);
        pod("ml", "victim", 8, e)
    };
    d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![low(json!({}))],
        ),
    );
    assert_eq!(phase(&core, "ml/victim"), Phase::Running);
    // A high-priority one preempts it: its pod is deleted, and its job leaves the queue
    // (a deleted pod never comes back to be bound).
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Pod(Watched::Apply(pod(
            "ml",
            "urgent",
            8,
            json!({"metadata": {"annotations": {"crater.ai/priority": "high"}}}),
        )))],
    );
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Delete { job, .. } if job == "ml/victim")),
        "{writes:?}"
    );
    // Said on the victim pod, as kube-scheduler's `Preempted`.
    assert!(
        writes.iter().any(
            |w| matches!(w, Write::Note { regarding, reason, message, .. }
            if reason == "Preempted" && regarding.name.as_deref() == Some("victim")
                && regarding.uid.as_deref() == Some("uid-victim")
                && message.starts_with("deleted by maar: preempted by job/ml/urgent"))
        ),
        "{writes:?}"
    );
    assert!(
        phase(&core, "ml/victim").is_terminal(),
        "{:?}",
        phase(&core, "ml/victim")
    );
    assert_eq!(phase(&core, "ml/urgent"), Phase::Running);
    // The victim terminating (still on its node in the watch), then gone: never taken
    // back as running, never bound again.
    for (t, seen) in [
        (
            3,
            Seen::Pod(Watched::Apply(low(json!({"metadata": {
                "deletionTimestamp": "2026-12-05T06:00:00Z"}})))),
        ),
        (4, Seen::Pod(Watched::Delete(low(json!({}))))),
    ] {
        let (_, writes) = d.step(&mut core, t, vec![seen]);
        assert!(
            !writes
                .iter()
                .any(|w| matches!(w, Write::Bind { job, .. } if job == "ml/victim")),
            "{writes:?}"
        );
        assert!(phase(&core, "ml/victim").is_terminal());
        assert_eq!(phase(&core, "ml/urgent"), Phase::Running);
        let c = core.cluster();
        let held: usize = c.nodes[0].gpus.iter().map(|g| g.allocs.len()).sum();
        assert_eq!(held, 8, "each card held once, by urgent");
    }
}

#[test]
fn a_deleted_trainjob_s_pods_hold_their_cards_until_they_are_gone() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let spec = json!({"image": "i", "resources": {"pool": "training", "gpu": {"count": 2}}});
    let mut seen = lists(vec![node("gpu-a", 8, "a100", json!({}))], vec![]);
    seen.push(Seen::Object(
        Owner::TrainJob,
        Watched::Apply(trainjob("ml", "t", spec.clone())),
    ));
    d.step(&mut core, 1, seen);
    d.step(
        &mut core,
        2,
        vec![
            Seen::Bound {
                job: "ml/t".into(),
                result: Ok(()),
            },
            Seen::Pod(Watched::Apply(owned_pod(
                "ml", "t", "t-0", "gpu-a", "Running",
            ))),
        ],
    );
    assert_eq!(phase(&core, "ml/t"), Phase::Running);
    // The TrainJob deleted; its pod still runs (the garbage collector not through yet,
    // or --cascade=orphan): its cards stay held, and a 7-GPU pod waits.
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![
            Seen::Object(Owner::TrainJob, Watched::Delete(trainjob("ml", "t", spec))),
            Seen::Pod(Watched::Apply(pod("ml", "seven", 7, json!({})))),
        ],
    );
    assert_eq!(phase(&core, "ml/t"), Phase::Running);
    assert_eq!(bound_to(&writes, "ml/seven"), None, "{writes:?}");
    // Its pod gone: the job ends, and the 7-GPU pod is bound.
    let (_, writes) = d.step(
        &mut core,
        4,
        vec![Seen::Pod(Watched::Delete(owned_pod(
            "ml", "t", "t-0", "gpu-a", "Running",
        )))],
    );
    assert!(
        phase(&core, "ml/t").is_terminal(),
        "{:?}",
        phase(&core, "ml/t")
    );
    assert_eq!(bound_to(&writes, "ml/seven"), Some("gpu-a"), "{writes:?}");
}

#[test]
fn the_api_server_answering_again_is_said_where_its_silence_was() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    d.step(
        &mut core,
        1,
        lists(vec![node("gpu-a", 8, "a100", json!({}))], vec![]),
    );
    let (_, writes) = d.step(
        &mut core,
        2,
        vec![Seen::Unanswered("watching pods: connection refused".into())],
    );
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Note { reason, .. } if reason == "KubernetesTrouble")),
        "{writes:?}"
    );
    let (_, writes) = d.step(
        &mut core,
        3,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            8,
            "a100",
            json!({}),
        )))],
    );
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Write::Note { reason, message, .. }
            if reason == "KubernetesBack" && message.starts_with("the API server answers again"))),
        "{writes:?}"
    );
    assert!(d.unreachable().is_none());
}

#[test]
fn a_pod_that_waits_on_another_schedulers_pod_holds_no_cards_from_the_others() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    // Another scheduler's pod on one card: it never ends as far as maar can know.
    let theirs = pod(
        "web",
        "kube-scheduled",
        1,
        json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "gpu-a"},
               "status": {"phase": "Running"}}),
    );
    let hi8 = pod(
        "ml",
        "hi8",
        8,
        json!({"metadata": {"annotations": {"crater.ai/priority": "high"}}}),
    );
    let (_, writes) = d.step(
        &mut core,
        1,
        lists(
            vec![node("gpu-a", 8, "a100", json!({}))],
            vec![theirs, hi8, pod("ml", "small", 1, json!({}))],
        ),
    );
    // hi8 waits; the 7 free cards are not held for it: the small pod is bound.
    assert_eq!(bound_to(&writes, "ml/hi8"), None);
    assert_eq!(bound_to(&writes, "ml/small"), Some("gpu-a"), "{writes:?}");
}

#[test]
fn a_node_deleted_during_its_cards_grace_stays_gone() {
    let mut core = new_core();
    let mut d = KubeDriver::detached();
    let on = pod(
        "ml",
        "p",
        2,
        json!({"spec": {"nodeName": "gpu-a"}, "status": {"phase": "Running"}}),
    );
    d.step(
        &mut core,
        1,
        lists(vec![node("gpu-a", 4, "a100", json!({}))], vec![on]),
    );
    assert_eq!(phase(&core, "ml/p"), Phase::Running);
    d.step(
        &mut core,
        2,
        vec![Seen::Node(Watched::Apply(node(
            "gpu-a",
            0,
            "a100",
            json!({}),
        )))],
    );
    d.step(
        &mut core,
        3,
        vec![Seen::Node(Watched::Delete(node(
            "gpu-a",
            0,
            "a100",
            json!({}),
        )))],
    );
    let ready = |core: &Core| {
        let c = core.cluster();
        c.nodes[c.node_id("gpu-a").unwrap() as usize].condition
            == maar_scheduler::model::Condition::Ready
    };
    assert!(!ready(&core));
    d.step(&mut core, 3 + maar_kube::driver::WITHDRAW_GRACE_S, vec![]);
    assert!(!ready(&core), "not brought back by its grace's end");
}
