//! Two Kubernetes clusters under one maar, the second's API server answered by kube-rs's
//! mock client: a TrainJob applied to the first with `crater.ai/cluster: auto`, that
//! only the second's cards can run, is withdrawn from the first and made in the second
//! (the POST the API server sees: the object as written, the why as an annotation); a
//! second cluster that refuses to make it is said so, the job made nowhere twice; one
//! sent to the first that waited there past its start is moved once.

use std::pin::pin;

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Node as KNode;
use kube::client::Body;
use maar::engine::{self, EngineHandle, EngineOptions};
use maar::federation::{Moved, Mover, Site};
use maar_kube::map::Owner;
use maar_kube::world::{ObjectSeen, Seen, Watched, World};
use maar_kube::KubeDriver;
use maar_scheduler::{Cluster, Core, SchedConfig};
use serde_json::{json, Value};
use tower_test::mock;

fn node(name: &str, model: &str) -> KNode {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "crater.ai/node-role": "gpu",
            "crater.ai/gpu-vendor": "nvidia",
            "crater.ai/gpu-model": model,
            "crater.ai/gpu-count": "8",
        }},
        "spec": {},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }))
    .unwrap()
}

fn trainjob(labels: Value) -> ObjectSeen {
    trainjob_with(labels, json!({}))
}

fn trainjob_with(labels: Value, annotations: Value) -> ObjectSeen {
    let o: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crater.ai/v1", "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ml", "uid": "uid-tj", "resourceVersion": "3",
            "generation": 1, "labels": labels, "annotations": annotations},
        "spec": {"image": "pytorch:2.3", "resources": {"pool": "gpu",
            "gpu": {"count": 4, "models": ["h200"]}}},
    }))
    .unwrap();
    ObjectSeen::of(Owner::TrainJob, &o)
}

/// What a watch lists at the start: the nodes, namespace `ml`, the objects.
fn lists(nodes: Vec<KNode>, objects: Vec<ObjectSeen>) -> Vec<Seen> {
    let mut s = vec![
        Seen::Pool(Watched::InitDone),
        Seen::Quota(Watched::InitDone),
        Seen::Object(Owner::TrainJob, Watched::Init),
    ];
    s.extend(
        objects
            .into_iter()
            .map(|o| Seen::Object(Owner::TrainJob, Watched::InitApply(Box::new(o)))),
    );
    s.extend([
        Seen::Object(Owner::TrainJob, Watched::InitDone),
        Seen::Object(Owner::InferenceService, Watched::InitDone),
        Seen::Namespace(Watched::Init),
        Seen::Namespace(Watched::InitApply("ml".into())),
        Seen::Namespace(Watched::InitDone),
        Seen::Pod(Watched::Init),
        Seen::Pod(Watched::InitDone),
        Seen::Node(Watched::Init),
    ]);
    s.extend(
        nodes
            .into_iter()
            .map(|n| Seen::Node(Watched::InitApply(Box::new(n)))),
    );
    s.push(Seen::Node(Watched::InitDone));
    s
}

fn started(name: &str, driver: KubeDriver, seen: Vec<Seen>) -> Site {
    started_at(name, driver, seen, 1)
}

/// A cluster fed `seen` at second 1, its clock run on to `until`.
fn started_at(name: &str, mut driver: KubeDriver, seen: Vec<Seen>, until: u64) -> Site {
    let mut core = Core::new(Cluster::new(SchedConfig::default()));
    driver.step(&mut core, 1, seen);
    if until > 1 {
        driver.step(&mut core, until, vec![]);
    }
    let loaded =
        maar::backend::Loaded::new(core, Box::new(driver), maar::record::Meta::of("kube", name));
    let engine: EngineHandle = engine::start(
        loaded,
        None,
        EngineOptions {
            paused: true,
            // As `maar kube --context a --context b` runs them: the mover runs, and a
            // job asking for a cluster waits for it.
            federation: Some(name.into()),
            ..Default::default()
        },
    );
    Site {
        name: name.into(),
        engine,
    }
}

type Handle = mock::Handle<Request<Body>, Response<Body>>;

/// Answers the second API server: a POST of a TrainJob with `create` (its status and
/// body), anything else with an empty object; each TrainJob POST body is sent back.
fn serve(
    handle: Handle,
    create: (u16, Value),
    posted: std::sync::mpsc::Sender<(String, Value)>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut h = pin!(handle);
            while let Some((req, send)) = h.next_request().await {
                let (method, uri) = (req.method().clone(), req.uri().to_string());
                let bytes = req.into_body().collect_bytes().await.unwrap();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let mut r = if method == Method::POST && uri.contains("/trainjobs") {
                    let _ = posted.send((uri, body.clone()));
                    let mut r = Response::new(Body::from(serde_json::to_vec(&create.1).unwrap()));
                    *r.status_mut() = StatusCode::from_u16(create.0).unwrap();
                    r
                } else {
                    Response::new(Body::from(b"{}".to_vec()))
                };
                r.headers_mut()
                    .insert("content-type", "application/json".parse().unwrap());
                send.send_response(r);
            }
        });
    })
}

fn two(create: (u16, Value)) -> (Vec<Site>, std::sync::mpsc::Receiver<(String, Value)>) {
    // The first cluster: a100 cards only, the TrainJob applied to it (recorded objects).
    let first = started(
        "east",
        KubeDriver::detached(),
        lists(
            vec![node("a100-1", "a100")],
            vec![trainjob(
                json!({"crater.ai/cluster": "auto", "team": "nlp"}),
            )],
        ),
    );
    with_second(first, create)
}

/// `first`, and a second cluster of h200 cards whose API server is the mock.
fn with_second(
    first: Site,
    create: (u16, Value),
) -> (Vec<Site>, std::sync::mpsc::Receiver<(String, Value)>) {
    let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let (tx, rx) = std::sync::mpsc::channel();
    serve(handle, create, tx);
    let world = World::writer_only(move || kube::Client::new(svc, "default")).unwrap();
    let second = started(
        "west",
        KubeDriver::new(world),
        lists(vec![node("h200-1", "h200")], vec![]),
    );
    (vec![first, second], rx)
}

fn phase_in(site: &Site, job: &str) -> Option<(String, Vec<String>)> {
    let v = site.engine.sync().unwrap();
    v.snapshot
        .jobs
        .iter()
        .find(|j| format!("{}/{}", j.project, j.name) == job)
        .map(|j| (j.phase.clone(), j.reasons.clone()))
}

#[test]
fn a_trainjob_asking_for_auto_is_made_in_the_cluster_that_starts_it_first() {
    let (sites, posted) = two((
        201,
        json!({"apiVersion": "crater.ai/v1", "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ml", "uid": "uid-west"}}),
    ));
    let (phase, _) = phase_in(&sites[0], "ml/tj").expect("queued in east");
    assert_eq!(phase, "Pending");
    let moved = Mover::default().look(&sites);
    assert_eq!(moved.len(), 1, "{moved:?}");
    let Moved::Done { job, from, to, why } = &moved[0] else {
        panic!("{moved:?}")
    };
    assert_eq!(
        (job.as_str(), from.as_str(), to.as_str()),
        ("ml/tj", "east", "west")
    );
    assert!(
        why.starts_with(
            "sent to west: starts now on h200-1 there; in east it can never run as asked"
        ),
        "{why}"
    );
    // The second API server was asked to make it, as written, with the why.
    let (uri, body) = posted
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    assert!(
        uri.starts_with("/apis/crater.ai/v1/namespaces/ml/trainjobs"),
        "{uri}"
    );
    assert_eq!(body["metadata"]["name"], "tj");
    assert_eq!(body["metadata"]["labels"]["team"], "nlp");
    assert_eq!(body["spec"]["resources"]["gpu"]["count"], 4);
    assert!(body["metadata"].get("uid").is_none(), "{body}");
    assert!(body["metadata"]["annotations"]["crater.ai/dispatched"]
        .as_str()
        .unwrap()
        .starts_with("sent to west"));
    assert_eq!(
        body["metadata"]["annotations"]["crater.ai/sent-start-in"],
        "0"
    );
    // Withdrawn in the first, saying where; asked once only.
    let (phase, reasons) = phase_in(&sites[0], "ml/tj").unwrap();
    assert_eq!(phase, "Cancelled");
    assert!(reasons[0].contains("sent to west"), "{reasons:?}");
    assert!(posted
        .recv_timeout(std::time::Duration::from_millis(300))
        .is_err());
    assert_eq!(Mover::default().look(&sites), vec![]);
    for s in &sites {
        s.engine.shutdown();
    }
}

#[test]
fn a_cluster_that_refuses_to_make_it_is_said_and_nothing_runs_twice() {
    let (sites, posted) = two((
        403,
        json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 403,
            "reason": "Forbidden", "message": "trainjobs.crater.ai is forbidden: User \"maar\" cannot create resource \"trainjobs\" in namespace \"ml\""}),
    ));
    let mut mover = Mover::default();
    let moved = mover.look(&sites);
    assert_eq!(moved.len(), 1, "{moved:?}");
    let Moved::Refused {
        job,
        from,
        to,
        why,
        back,
    } = &moved[0]
    else {
        panic!("{moved:?}")
    };
    assert_eq!(
        (job.as_str(), from.as_str(), to.as_str()),
        ("ml/tj", "east", "west")
    );
    assert!(why.contains("was not made in the cluster"), "{why}");
    assert!(why.contains("forbidden"), "{why}");
    assert!(*back, "given back to the first");
    assert!(
        moved[0].words().contains("it waits in east again"),
        "{}",
        moved[0].words()
    );
    assert!(posted
        .recv_timeout(std::time::Duration::from_secs(5))
        .is_ok());
    // Not in the second (nothing made there), back in the first's queue: in one
    // cluster, not in neither; and not sent again.
    assert_eq!(phase_in(&sites[1], "ml/tj"), None);
    assert_eq!(phase_in(&sites[0], "ml/tj").unwrap().0, "Pending");
    let events = sites[0].engine.sync().unwrap().snapshot.events.clone();
    assert!(
        events
            .iter()
            .any(|e| e.reason == "Requeued" && e.message == "requeued by federation"),
        "{events:?}"
    );
    assert_eq!(mover.look(&sites), vec![]);
    for s in &sites {
        s.engine.shutdown();
    }
}

/// A TrainJob sent to the first cluster to start now that waited there past the grace
/// (its cards gone): moved once to the second, POSTed there marked as moved; looked at
/// again, nothing moves.
#[test]
fn a_trainjob_that_waited_past_its_start_is_moved_once_to_the_cluster_that_starts_it() {
    let first = started_at(
        "east",
        KubeDriver::detached(),
        lists(
            vec![node("a100-1", "a100")],
            vec![trainjob_with(
                json!({}),
                json!({"crater.ai/dispatched": "sent to east: starts now there",
                       "crater.ai/sent-start-in": "0"}),
            )],
        ),
        1 + maar_scheduler::dispatch::MOVE_AFTER_S + 10,
    );
    let (sites, posted) = with_second(
        first,
        (
            201,
            json!({"apiVersion": "crater.ai/v1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "ml", "uid": "uid-west"}}),
        ),
    );
    let moved = Mover::default().look(&sites);
    assert_eq!(moved.len(), 1, "{moved:?}");
    let Moved::Done { to, why, .. } = &moved[0] else {
        panic!("{moved:?}")
    };
    assert_eq!(to, "west");
    assert!(why.starts_with("moved from east (once"), "{why}");
    let (_, body) = posted
        .recv_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    let ann = &body["metadata"]["annotations"];
    assert_eq!(ann["crater.ai/moved-from"], "east");
    assert!(ann["crater.ai/dispatched"]
        .as_str()
        .unwrap()
        .starts_with("moved from east"));
    let (phase, reasons) = phase_in(&sites[0], "ml/tj").unwrap();
    assert_eq!(phase, "Cancelled");
    assert!(reasons[0].contains("moved to west"), "{reasons:?}");
    assert_eq!(Mover::default().look(&sites), vec![]);
    assert!(posted
        .recv_timeout(std::time::Duration::from_millis(300))
        .is_err());
    for s in &sites {
        s.engine.shutdown();
    }
}
