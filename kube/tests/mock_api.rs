//! The Kubernetes layer against kube-rs's mock client (request/response pairs, as
//! kube-rs's own tests do): what maar sends for a bind, an unschedulable pod, a
//! preempted pod and a cordon, and how the API's refusals become one-line errors.

mod common;
use common::{mock_client, next, ok};
use std::pin::pin;

use http::{Method, Response, StatusCode};
use kube::client::Body;
use kube::Client;
use maar_kube::map::Owner;
use maar_kube::world::{carry_out, writer, Events, NewPod, Seen, Watched, Write, WriterLimits};
use serde_json::{json, Value};

fn recorder(c: &Client) -> Events {
    Events::new(c.clone(), "test")
}

fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    let mut r = ok(
        json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
        "code": code, "reason": reason, "message": message}),
    );
    *r.status_mut() = StatusCode::from_u16(code).unwrap();
    r
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}})
}

#[tokio::test]
async fn a_bind_posts_the_binding_with_the_gpus_and_says_scheduled() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert!(
            uri.starts_with("/api/v1/namespaces/ml/pods/train-0/binding"),
            "{uri}"
        );
        assert_eq!(body["kind"], "Binding");
        // The cards ride on the binding (merged into the pod with the node), and the
        // uid pins the pod maar saw.
        assert_eq!(
            body["metadata"]["annotations"]["crater.ai/gpu-indices"],
            "2,3"
        );
        assert_eq!(body["metadata"]["uid"], "u-0");
        assert_eq!(body["target"]["kind"], "Node");
        assert_eq!(body["target"]["name"], "gpu-node-1");
        send.send_response(ok(
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
        ));
        // Then the Scheduled event, as kube-scheduler writes it.
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert!(
            uri.starts_with("/apis/events.k8s.io/v1/namespaces/ml/events"),
            "{uri}"
        );
        assert_eq!(body["reason"], "Scheduled");
        assert_eq!(body["type"], "Normal");
        assert_eq!(
            body["note"],
            "Successfully assigned ml/train-0 to gpu-node-1"
        );
        assert_eq!(body["regarding"]["name"], "train-0");
        assert_eq!(body["regarding"]["uid"], "u-0");
        assert_eq!(body["reportingController"], "maar");
        assert!(body["eventTime"].as_str().unwrap().ends_with('Z'));
        send.send_response(ok(body));
    });
    let w = Write::Bind {
        job: "ml/train-0".into(),
        uid: "u-0".into(),
        node: "gpu-node-1".into(),
        gpus: vec![2, 3],
    };
    carry_out(&client, &recorder(&client), &w).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn a_bind_refused_with_a_conflict_is_an_error_the_driver_requeues_on() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, _, _, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        send.send_response(status(
            409,
            "Conflict",
            "Operation cannot be fulfilled on pods/binding \"train-0\": pod train-0 is already assigned to node \"other\"",
        ));
    });
    let w = Write::Bind {
        job: "ml/train-0".into(),
        uid: "u-0".into(),
        node: "gpu-node-1".into(),
        gpus: vec![],
    };
    let e = carry_out(&client, &recorder(&client), &w)
        .await
        .unwrap_err();
    assert!(e.contains("already assigned"), "{e}");
    server.await.unwrap();
}

#[tokio::test]
async fn an_unschedulable_pod_gets_the_condition_and_a_failed_scheduling_event() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PATCH);
        assert!(
            uri.starts_with("/api/v1/namespaces/ml/pods/big/status"),
            "{uri}"
        );
        let c = &body["status"]["conditions"][0];
        assert_eq!(c["type"], "PodScheduled");
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "Unschedulable");
        assert!(c["message"]
            .as_str()
            .unwrap()
            .starts_with("0/3 nodes are available"));
        send.send_response(ok(pod("big")));
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert!(
            uri.starts_with("/apis/events.k8s.io/v1/namespaces/ml/events"),
            "{uri}"
        );
        assert_eq!(body["reason"], "FailedScheduling");
        assert_eq!(body["type"], "Warning");
        assert_eq!(body["regarding"]["kind"], "Pod");
        assert_eq!(body["regarding"]["name"], "big");
        assert_eq!(body["regarding"]["uid"], "u-1");
        assert_eq!(body["reportingController"], "maar");
        assert!(body["note"].as_str().unwrap().contains("gpu.count 4"));
        send.send_response(ok(body));
    });
    let w = Write::Unschedulable {
        job: "ml/big".into(),
        uid: "u-1".into(),
        message: "0/3 nodes are available: 3 insufficient free GPUs; a smaller request would start now: gpu.count 4 (asked 8)".into(),
        object: None,
    };
    carry_out(&client, &recorder(&client), &w).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn an_expected_start_is_an_annotation_on_the_pod_and_a_status_field_on_a_trainjob() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PATCH);
        assert!(uri.starts_with("/api/v1/namespaces/ml/pods/next?"), "{uri}");
        // The uid is a precondition: a pod made again under the name is not told.
        assert_eq!(body["metadata"]["uid"], "u-2");
        let a = &body["metadata"]["annotations"];
        assert_eq!(a["crater.ai/expected-start-basis"], "history");
        let at = a["crater.ai/expected-start"].as_str().expect("a time");
        let at = chrono::DateTime::parse_from_rfc3339(at).expect("RFC 3339");
        let ahead = (at.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds();
        assert!((3590..=3600).contains(&ahead), "{ahead}");
        send.send_response(ok(pod("next")));
        // Not known: the time is removed, the basis says why.
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PATCH);
        assert!(uri.starts_with("/api/v1/namespaces/ml/pods/next?"), "{uri}");
        let a = &body["metadata"]["annotations"];
        assert_eq!(a["crater.ai/expected-start"], Value::Null);
        assert_eq!(a["crater.ai/expected-start-basis"], "never");
        send.send_response(ok(pod("next")));
        // A TrainJob's is in its status.
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PATCH);
        assert!(
            uri.starts_with("/apis/crater.ai/v1/namespaces/ml/trainjobs/tj/status"),
            "{uri}"
        );
        assert_eq!(body["status"]["expectedStartBasis"], "estimate");
        assert!(body["status"]["expectedStart"].as_str().is_some());
        // Gone meanwhile: fine.
        send.send_response(status(404, "NotFound", "trainjobs \"tj\" not found"));
    });
    let w = |in_s, basis, object: Option<maar_kube::map::Owner>| Write::ExpectedStart {
        job: if object.is_some() { "ml/tj" } else { "ml/next" }.into(),
        uid: "u-2".into(),
        object,
        in_s,
        basis,
    };
    for w in [
        w(Some(3600), "history", None),
        w(None, "never", None),
        w(Some(60), "estimate", Some(maar_kube::map::Owner::TrainJob)),
    ] {
        carry_out(&client, &recorder(&client), &w).await.unwrap();
    }
    server.await.unwrap();
}

#[tokio::test]
async fn a_label_is_a_merge_patch_of_the_nodes_labels_with_removed_keys_null() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PATCH);
        assert!(uri.starts_with("/api/v1/nodes/gpu-node-1?"), "{uri}");
        assert_eq!(
            body,
            json!({"metadata": {"labels": {"disk": "ssd", "old": null}}})
        );
        send.send_response(ok(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1"}}),
        ));
    });
    let w = Write::Labels {
        node: "gpu-node-1".into(),
        set: [("disk".to_string(), "ssd".to_string())].into(),
        remove: vec!["old".into()],
    };
    carry_out(&client, &recorder(&client), &w).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn a_preempted_pod_is_deleted_and_one_already_gone_is_fine() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, _, send) = next(&mut h).await;
        assert_eq!(m, Method::DELETE);
        assert!(uri.starts_with("/api/v1/namespaces/ml/pods/low-1"), "{uri}");
        send.send_response(status(404, "NotFound", "pods \"low-1\" not found"));
    });
    let w = Write::Delete {
        job: "ml/low-1".into(),
        reason: "preempted by ml/high-0".into(),
    };
    carry_out(&client, &recorder(&client), &w).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn a_cordon_sets_spec_unschedulable_and_an_uncordon_clears_it() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        for want in [json!(true), Value::Null] {
            let (m, uri, body, send) = next(&mut h).await;
            assert_eq!(m, Method::PATCH);
            assert!(uri.starts_with("/api/v1/nodes/gpu-node-1?"), "{uri}");
            // maar's writes name their field manager (managedFields says who wrote).
            assert!(uri.contains("fieldManager=maar"), "{uri}");
            assert_eq!(body["spec"]["unschedulable"], want);
            send.send_response(ok(
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1"}}),
            ));
        }
    });
    let r = recorder(&client);
    for on in [true, false] {
        let w = Write::Cordon {
            node: "gpu-node-1".into(),
            on,
        };
        carry_out(&client, &r, &w).await.unwrap();
    }
    server.await.unwrap();
}

#[tokio::test]
async fn refusals_at_connect_are_one_line_naming_the_context_and_the_fix() {
    use maar_kube::connect::{probe, ConnectOptions};
    // Expired credentials: the version call is refused.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, uri, _, send) = next(&mut h).await;
        assert_eq!(uri, "/version");
        send.send_response(status(401, "Unauthorized", "Unauthorized"));
    });
    let opts = ConnectOptions::default();
    let e = probe(&client, "prod", "https://10.0.0.1:6443", &opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("context prod: the API server refused the credentials (401"),
        "{e}"
    );
    assert!(!e.contains('\n'));
    server.await.unwrap();

    // Missing RBAC: the version answers, listing pods is forbidden.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(ok(json!({"major": "1", "minor": "26", "gitVersion": "v1.26.15",
            "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""})));
        let (_, uri, _, send) = next(&mut h).await;
        assert!(uri.starts_with("/api/v1/nodes?"), "{uri}");
        send.send_response(ok(json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": {}, "items": []})));
        let (_, uri, _, send) = next(&mut h).await;
        assert!(uri.starts_with("/api/v1/namespaces/ml/pods?"), "{uri}");
        send.send_response(status(403, "Forbidden",
            "pods is forbidden: User \"nobody\" cannot list resource \"pods\" in API group \"\" in the namespace \"ml\""));
    });
    let opts = ConnectOptions {
        namespace: Some("ml".into()),
        ..ConnectOptions::default()
    };
    let e = probe(&client, "prod", "https://10.0.0.1:6443", &opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("context prod: maar may not list pods in namespace ml (403 Forbidden"),
        "{e}"
    );
    assert!(e.contains("deploy/rbac.yaml"), "{e}");
    server.await.unwrap();
}

#[tokio::test]
async fn a_server_that_does_not_answer_times_out_with_its_address() {
    use maar_kube::connect::{probe, ConnectOptions};
    let (client, handle) = mock_client();
    // The handle is held but never answers.
    let opts = ConnectOptions {
        timeout: std::time::Duration::from_millis(200),
        ..ConnectOptions::default()
    };
    let e = probe(&client, "lab", "https://127.0.0.1:6443", &opts)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "context lab: the API server at https://127.0.0.1:6443 did not answer within 1 s; check that it runs and that the kubeconfig's server address is right"
    );
    drop(handle);
}

#[tokio::test]
async fn a_trainjobs_pods_are_made_all_or_none() {
    use maar_scheduler::input::Binding;
    let mut job = maar_kube::map::job_of(
        &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "gang", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "image": "img",
                "resources": {"requests": {"nvidia.com/gpu": "4", "cpu": "8", "memory": "32Gi"}}}]}}))
        .unwrap(),
    )
    .unwrap();
    job.replicas = 2;
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        // The first pod is made, bound to its node.
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert!(uri.starts_with("/api/v1/namespaces/ml/pods?"), "{uri}");
        assert_eq!(body["metadata"]["name"], "gang-r1-0");
        assert_eq!(body["spec"]["nodeName"], "n1");
        assert_eq!(body["metadata"]["labels"]["crater.ai/trainjob"], "gang");
        assert_eq!(
            body["metadata"]["annotations"]["crater.ai/gpu-indices"],
            "0,1,2,3"
        );
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "tj-uid");
        assert_eq!(body["spec"]["containers"][0]["env"][1]["value"], "2");
        send.send_response(ok(body));
        // The second is refused: the first goes.
        let (m, _, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert_eq!(body["metadata"]["name"], "gang-r1-1");
        send.send_response(status(403, "Forbidden", "exceeded quota: gpu"));
        let (m, uri, _, send) = next(&mut h).await;
        assert_eq!(m, Method::DELETE);
        assert!(
            uri.starts_with("/api/v1/namespaces/ml/pods/gang-r1-0"),
            "{uri}"
        );
        send.send_response(ok(pod("gang-r1-0")));
    });
    let w = Write::CreatePods {
        owner: Owner::TrainJob,
        job: "ml/gang".into(),
        uid: "tj-uid".into(),
        labels: Default::default(),
        spec: Box::new(job),
        pods: vec![
            NewPod {
                name: "gang-r1-0".into(),
                index: 0,
                at: Binding {
                    node: "n1".into(),
                    gpus: vec![0, 1, 2, 3],
                },
            },
            NewPod {
                name: "gang-r1-1".into(),
                index: 1,
                at: Binding {
                    node: "n2".into(),
                    gpus: vec![4, 5, 6, 7],
                },
            },
        ],
        of: 2,
        answer: true,
    };
    let e = carry_out(&client, &recorder(&client), &w)
        .await
        .unwrap_err();
    assert!(
        e.contains("gang-r1-1") && e.contains("exceeded quota"),
        "{e}"
    );
    server.await.unwrap();
}

fn lease(holder: &str, renew_s: i64, transitions: i32) -> Value {
    let t = chrono::DateTime::from_timestamp(renew_s, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "maar-scheduler", "namespace": "kube-system", "resourceVersion": "7"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "acquireTime": t, "renewTime": t, "leaseTransitions": transitions}})
}

#[tokio::test]
async fn one_maar_schedules_the_lease_is_taken_held_and_taken_over_from_a_dead_holder() {
    use k8s_openapi::api::coordination::v1::Lease;
    use maar_kube::lease::{step, Step};
    let now = 1_800_000_000;
    // No lease yet: created, held.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, _, send) = next(&mut h).await;
        assert_eq!(m, Method::GET);
        assert!(
            uri.starts_with(
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/maar-scheduler"
            ),
            "{uri}"
        );
        send.send_response(status(
            404,
            "NotFound",
            "leases.coordination.k8s.io \"maar-scheduler\" not found",
        ));
        let (m, _, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert_eq!(body["spec"]["holderIdentity"], "me");
        assert_eq!(body["spec"]["leaseDurationSeconds"], 15);
        send.send_response(ok(body));
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert_eq!(
        step(&api, "kube-system", "me", now).await.unwrap(),
        Step::Held { took_from: None }
    );
    server.await.unwrap();

    // Another maar renewed 5 s ago: it schedules; nothing is written.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(ok(lease("other", now - 5, 0)));
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert_eq!(
        step(&api, "kube-system", "me", now).await.unwrap(),
        Step::Other {
            holder: "other".into()
        }
    );
    server.await.unwrap();

    // It stopped renewing 20 s ago (dead): taken over, one more transition, written
    // against the version read.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(ok(lease("other", now - 20, 3)));
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PUT);
        assert!(
            uri.starts_with(
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/maar-scheduler"
            ),
            "{uri}"
        );
        assert_eq!(body["spec"]["holderIdentity"], "me");
        assert_eq!(body["spec"]["leaseTransitions"], 4);
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        send.send_response(ok(body));
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert_eq!(
        step(&api, "kube-system", "me", now).await.unwrap(),
        Step::Held {
            took_from: Some("other".into())
        }
    );
    server.await.unwrap();

    // Two take over at once: the one that loses the race (409) watches.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(ok(lease("other", now - 20, 3)));
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(status(409, "Conflict", "the object has been modified"));
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert!(matches!(
        step(&api, "kube-system", "me", now).await.unwrap(),
        Step::Other { .. }
    ));
    server.await.unwrap();
}

#[tokio::test]
async fn a_services_load_is_read_from_the_external_metrics_api_as_an_hpa_reads_it() {
    use maar_kube::world::external_metric;
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, _, send) = next(&mut h).await;
        assert_eq!(m, Method::GET);
        assert_eq!(
            uri,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/ai-service/crater_gpu_memory_usage_rate?labelSelector=app%3Dllm-infer"
        );
        // What prometheus-adapter answers: one series per replica, as quantities.
        send.send_response(ok(json!({
            "kind": "ExternalMetricValueList", "apiVersion": "external.metrics.k8s.io/v1beta1",
            "metadata": {},
            "items": [
                {"metricName": "crater_gpu_memory_usage_rate", "metricLabels": {"pod": "llm-0"},
                 "timestamp": "2026-12-01T12:00:00Z", "value": "82"},
                {"metricName": "crater_gpu_memory_usage_rate", "metricLabels": {"pod": "llm-1"},
                 "timestamp": "2026-12-01T12:00:00Z", "value": "61500m"},
            ]
        })));
        // No adapter serves it.
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
        // A value that is not a quantity.
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(ok(json!({"items": [{"value": "lots"}]})));
    });
    let v = external_metric(
        &client,
        "ai-service",
        "crater_gpu_memory_usage_rate",
        "app=llm-infer",
    )
    .await
    .unwrap();
    assert_eq!(v, vec![82.0, 61.5]);
    let e = external_metric(
        &client,
        "ai-service",
        "crater_gpu_memory_usage_rate",
        "app=x",
    )
    .await
    .unwrap_err();
    assert!(e.contains("404") && e.contains("adapter"), "{e}");
    let e = external_metric(
        &client,
        "ai-service",
        "crater_gpu_memory_usage_rate",
        "app=x",
    )
    .await
    .unwrap_err();
    assert!(e.contains("`lots`"), "{e}");
    server.await.unwrap();
}

#[tokio::test]
async fn a_services_scale_down_deletes_the_pods_named_and_a_new_replica_is_owned_by_it() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, _, send) = next(&mut h).await;
        assert_eq!(m, Method::DELETE);
        assert!(uri.starts_with("/api/v1/namespaces/ai/pods/llm-3"), "{uri}");
        send.send_response(ok(pod("llm-3")));
        // Already gone: fine.
        let (m, uri, _, send) = next(&mut h).await;
        assert_eq!(m, Method::DELETE);
        assert!(uri.starts_with("/api/v1/namespaces/ai/pods/llm-4"), "{uri}");
        send.send_response(status(404, "NotFound", "pods \"llm-4\" not found"));
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert!(uri.starts_with("/api/v1/namespaces/ai/pods?"), "{uri}");
        assert_eq!(body["metadata"]["name"], "llm-5");
        assert_eq!(
            body["metadata"]["labels"]["crater.ai/inferenceservice"],
            "llm"
        );
        // The object's own labels ride along (users' selectors know them).
        assert_eq!(body["metadata"]["labels"]["app"], "llm-infer");
        assert_eq!(
            body["metadata"]["ownerReferences"][0]["kind"],
            "InferenceService"
        );
        assert_eq!(body["spec"]["restartPolicy"], "Always");
        send.send_response(ok(body));
        // The event on the InferenceService.
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert!(uri.contains("/events"), "{uri}");
        assert_eq!(body["regarding"]["kind"], "InferenceService");
        send.send_response(ok(body));
    });
    let w = Write::DeletePods {
        owner: Owner::InferenceService,
        job: "ai/llm".into(),
        pods: vec!["llm-3".into(), "llm-4".into()],
        reason: "scaled down".into(),
    };
    carry_out(&client, &recorder(&client), &w).await.unwrap();
    let spec = maar_kube::map::job_of(
        &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "llm", "namespace": "ai"},
            "spec": {"containers": [{"name": "c", "image": "vllm",
                "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}))
        .unwrap(),
    )
    .unwrap();
    let w = Write::CreatePods {
        owner: Owner::InferenceService,
        job: "ai/llm".into(),
        uid: "svc-uid".into(),
        labels: [("app".to_string(), "llm-infer".to_string())].into(),
        spec: Box::new(spec),
        pods: vec![NewPod {
            name: "llm-5".into(),
            index: 5,
            at: maar_scheduler::input::Binding {
                node: "n1".into(),
                gpus: vec![1],
            },
        }],
        of: 3,
        answer: true,
    };
    carry_out(&client, &recorder(&client), &w).await.unwrap();
    server.await.unwrap();
}

fn binds(n: usize) -> Vec<Write> {
    (0..n)
        .map(|i| Write::Bind {
            job: format!("ml/p-{i}"),
            uid: format!("u-{i}"),
            node: "gpu-node-1".into(),
            gpus: vec![i as u32],
        })
        .collect()
}

/// Runs the writer on `writes` (queued before it starts) with `limits`, answering
/// every request with success; returns the requests' paths (events as
/// `event:<pod>`) in the order they came, and what the writer told the driver.
async fn run_writer(writes: Vec<Write>, limits: WriterLimits) -> (Vec<String>, Vec<Seen>) {
    run_writer_as(writes, limits, maar_kube::lease::Leadership::always()).await
}

/// As [`run_writer`], for a maar whose hold on the lease is `leader`.
async fn run_writer_as(
    writes: Vec<Write>,
    limits: WriterLimits,
    leader: maar_kube::lease::Leadership,
) -> (Vec<String>, Vec<Seen>) {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let mut seen = Vec::new();
        while let Some((req, send)) = h.next_request().await {
            let uri = req.uri().path().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap();
            if uri.contains("/events") {
                seen.push(format!(
                    "event:{}",
                    body["regarding"]["name"].as_str().unwrap()
                ));
                send.send_response(ok(body));
            } else {
                seen.push(uri);
                send.send_response(ok(
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
                ));
            }
        }
        seen
    });
    let (wtx, wrx) = tokio::sync::mpsc::unbounded_channel();
    for w in writes {
        wtx.send(w).unwrap();
    }
    drop(wtx);
    let (tx, rx) = std::sync::mpsc::channel();
    writer(client, wrx, tx, limits, std::sync::Arc::new(leader)).await;
    let requests = server.await.unwrap();
    (requests, rx.try_iter().collect())
}

#[tokio::test]
async fn a_maar_that_does_not_hold_the_lease_now_writes_nothing_and_its_binds_fail() {
    // Never renewed (or paused past the lease's life): nothing goes out, and each
    // bind is told as failed so that its job is not taken as placed.
    let (requests, told) = run_writer_as(
        binds(3),
        WriterLimits::default(),
        maar_kube::lease::Leadership::new(),
    )
    .await;
    assert!(requests.is_empty(), "{requests:?}");
    let failed = told
        .iter()
        .filter(|s| matches!(s, Seen::Bound { result: Err(e), .. } if e.contains("lease")))
        .count();
    assert_eq!(failed, 3, "{told:?}");
}

#[test]
fn a_lease_renewed_is_held_until_it_would_run_out_and_not_after_a_pause() {
    use maar_kube::lease::{Leadership, DURATION_S};
    use std::time::{Duration, Instant};
    let l = Leadership::new();
    assert!(!l.held(), "not before a renewal");
    l.renewed(Instant::now());
    assert!(l.held());
    // Woken after a pause of the lease's life: not held until renewed again.
    let woken = Instant::now() + Duration::from_secs(DURATION_S as u64);
    assert!(!l.held_at(woken));
    assert!(l.held_at(Instant::now() + Duration::from_secs(DURATION_S as u64 - 3)));
    l.lost();
    assert!(!l.held());
}

#[tokio::test]
async fn binds_go_before_scheduled_events_and_events_past_the_queue_are_counted_not_written() {
    let limits = WriterLimits {
        in_flight: 1,
        queued_events: 2,
    };
    let (requests, told) = run_writer(binds(5), limits).await;
    let binding = |i: usize| format!("/api/v1/namespaces/ml/pods/p-{i}/binding");
    assert_eq!(
        requests,
        vec![
            binding(0),
            binding(1),
            binding(2),
            binding(3),
            binding(4),
            "event:p-0".into(),
            "event:p-1".into(),
        ]
    );
    // Every bind answered as it was made; the three events not written counted once.
    let bound: Vec<&str> = told
        .iter()
        .filter_map(|s| match s {
            Seen::Bound {
                job,
                result: Ok(()),
            } => Some(job.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(bound, ["ml/p-0", "ml/p-1", "ml/p-2", "ml/p-3", "ml/p-4"]);
    let dropped: Vec<u64> = told
        .iter()
        .filter_map(|s| match s {
            Seen::EventsDropped(n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(dropped, [3]);
}

#[tokio::test]
async fn with_room_in_the_queue_every_bound_pod_gets_its_scheduled_event() {
    let (requests, told) = run_writer(binds(20), WriterLimits::default()).await;
    let events = requests.iter().filter(|r| r.starts_with("event:")).count();
    assert_eq!(events, 20);
    for i in 0..20 {
        assert!(requests.contains(&format!("event:p-{i}")), "{requests:?}");
    }
    assert!(!told.iter().any(|s| matches!(s, Seen::EventsDropped(_))));
    assert_eq!(
        told.iter()
            .filter(|s| matches!(s, Seen::Bound { result: Ok(()), .. }))
            .count(),
        20
    );
}

#[tokio::test]
async fn a_failed_bind_gets_no_scheduled_event() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let mut n = 0;
        while let Some((_, send)) = h.next_request().await {
            n += 1;
            send.send_response(status(
                409,
                "Conflict",
                "pod p-0 is already assigned to node \"other\"",
            ));
        }
        n
    });
    let (wtx, wrx) = tokio::sync::mpsc::unbounded_channel();
    wtx.send(binds(1).remove(0)).unwrap();
    drop(wtx);
    let (tx, rx) = std::sync::mpsc::channel();
    writer(
        client,
        wrx,
        tx,
        WriterLimits::default(),
        std::sync::Arc::new(maar_kube::lease::Leadership::always()),
    )
    .await;
    assert_eq!(server.await.unwrap(), 1, "the binding only");
    match rx.try_recv().unwrap() {
        Seen::Bound {
            job,
            result: Err(e),
        } => {
            assert_eq!(job, "ml/p-0");
            assert!(e.contains("already assigned"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_maar_on_its_way_out_gives_its_lease_up_and_only_its_own() {
    use k8s_openapi::api::coordination::v1::Lease;
    use maar_kube::lease::release;
    let now = 1_800_000_000;
    // Held by this maar: written back without a holder, against the version read.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, _, _, send) = next(&mut h).await;
        assert_eq!(m, Method::GET);
        send.send_response(ok(lease("me", now - 1, 2)));
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PUT);
        assert!(uri.contains("/leases/maar-scheduler"), "{uri}");
        assert!(body["spec"].get("holderIdentity").is_none(), "{body}");
        assert_eq!(body["spec"]["leaseTransitions"], 2);
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        send.send_response(ok(body));
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert!(release(&api, "me").await.unwrap());
    server.await.unwrap();

    // Held by another: nothing is written.
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, _, _, send) = next(&mut h).await;
        send.send_response(ok(lease("other", now - 1, 2)));
        assert!(h.next_request().await.is_none(), "no write");
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert!(!release(&api, "me").await.unwrap());
    drop(api);
    server.await.unwrap();

    // A lease with no holder is taken at the next look (not after 15 s).
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, _, _, send) = next(&mut h).await;
        let mut l = lease("x", now - 1, 2);
        l["spec"].as_object_mut().unwrap().remove("holderIdentity");
        send.send_response(ok(l));
        let (m, _, body, send) = next(&mut h).await;
        assert_eq!(m, Method::PUT);
        assert_eq!(body["spec"]["holderIdentity"], "me");
        send.send_response(ok(body));
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert_eq!(
        maar_kube::lease::step(&api, "kube-system", "me", now)
            .await
            .unwrap(),
        maar_kube::lease::Step::Held { took_from: None }
    );
    server.await.unwrap();
}

#[tokio::test]
async fn writes_that_come_while_the_writer_waits_are_carried_out_and_it_ends_when_told() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let mut paths = Vec::new();
        while let Some((req, send)) = h.next_request().await {
            let path = req.uri().path().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap();
            paths.push(path);
            send.send_response(ok(serde_json::from_slice(&bytes).unwrap()));
        }
        paths
    });
    let (wtx, wrx) = tokio::sync::mpsc::unbounded_channel();
    let (tx, rx) = std::sync::mpsc::channel();
    // A limit of 0 is taken as 1 (not a writer that never writes).
    let limits = WriterLimits {
        in_flight: 0,
        queued_events: 10,
    };
    let w = tokio::spawn(writer(
        client,
        wrx,
        tx,
        limits,
        std::sync::Arc::new(maar_kube::lease::Leadership::always()),
    ));
    for b in binds(3) {
        // The writer is idle (waiting on the channel) when each comes.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        wtx.send(b).unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    drop(wtx);
    tokio::time::timeout(std::time::Duration::from_secs(5), w)
        .await
        .expect("the writer ends once its channel closes and its work is done")
        .unwrap();
    let paths = server.await.unwrap();
    assert_eq!(paths.iter().filter(|p| p.ends_with("/binding")).count(), 3);
    assert_eq!(paths.iter().filter(|p| p.contains("/events")).count(), 3);
    let bound = rx
        .try_iter()
        .filter(|s| matches!(s, Seen::Bound { result: Ok(()), .. }))
        .count();
    assert_eq!(bound, 3);
}

#[tokio::test]
async fn a_restarted_maar_on_the_same_host_waits_for_the_lease_it_held_before() {
    use k8s_openapi::api::coordination::v1::Lease;
    use maar_kube::lease::{identity, step, Step};
    // A container restarted in its pod keeps the host name and, as process 1, its pid:
    // the old process (force-deleted, paused) may still renew. Each process is its own
    // holder, so the new one watches until the old one stops renewing.
    let (before, after) = (identity(), identity());
    assert_ne!(before, after);
    let host = |id: &str| id.rsplit_once('_').map(|x| x.0.to_string());
    assert_eq!(host(&before), host(&after));
    assert!(!host(&before).unwrap().is_empty());
    let now = 1_800_000_000;
    let (client, handle) = mock_client();
    let held = before.clone();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, _, _, send) = next(&mut h).await;
        assert_eq!(m, Method::GET);
        send.send_response(ok(lease(&held, now - 5, 3)));
    });
    let api: kube::Api<Lease> = kube::Api::namespaced(client, "kube-system");
    assert_eq!(
        step(&api, "kube-system", &after, now).await.unwrap(),
        Step::Other { holder: before }
    );
    server.await.unwrap();
}

/// The API server for a node command: the PATCHes of node `gpu-a` answered with
/// `codes` in turn (then 200), each told on `seen`.
fn serve_node_patches(
    handle: common::Handle,
    codes: Vec<u16>,
    seen: std::sync::mpsc::Sender<(String, Value)>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut h = pin!(handle);
            let mut codes = codes.into_iter();
            while let Some((req, send)) = h.next_request().await {
                let uri = req.uri().to_string();
                let bytes = req.into_body().collect_bytes().await.unwrap();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let _ = seen.send((uri.clone(), body));
                let code = if uri.contains("/nodes/gpu-a") {
                    codes.next().unwrap_or(200)
                } else {
                    200
                };
                send.send_response(if code == 200 {
                    ok(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a"}}))
                } else {
                    status(code, "InternalError", "etcdserver: request timed out")
                });
            }
        });
    })
}

#[test]
fn a_cordon_is_acknowledged_only_once_the_api_server_took_it() {
    use maar_kube::world::{Watched, World};
    use maar_kube::KubeDriver;
    use maar_scheduler::{Actor, Cluster, Command, Core, Driver, SchedConfig};
    let (svc, handle) = tower_test::mock::pair::<http::Request<Body>, Response<Body>>();
    let (tx, rx) = std::sync::mpsc::channel();
    let _server = serve_node_patches(handle, vec![500], tx);
    let world = World::writer_only(move || Client::new(svc, "default")).unwrap();
    let mut d = KubeDriver::new(world);
    let mut core = Core::new(Cluster::new(SchedConfig::default()));
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-a", "labels": {"crater.ai/gpu-model": "a100", "crater.ai/gpu-count": "8"}},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap();
    d.step(
        &mut core,
        1,
        vec![
            Seen::Pool(Watched::InitDone),
            Seen::Quota(Watched::InitDone),
            Seen::Object(Owner::TrainJob, Watched::InitDone),
            Seen::Object(Owner::InferenceService, Watched::InitDone),
            Seen::Namespace(Watched::InitDone),
            Seen::Pod(Watched::Init),
            Seen::Pod(Watched::InitDone),
            Seen::Node(Watched::Init),
            Seen::Node(Watched::InitApply(Box::new(node))),
            Seen::Node(Watched::InitDone),
        ],
    );
    let cordoned = |core: &Core| {
        let c = core.cluster();
        c.nodes[c.node_id("gpu-a").unwrap() as usize].cordoned
    };
    let cordon = || Command::CordonNode {
        node: "gpu-a".into(),
    };
    // The API server fails the write: refused, nothing changed in maar either.
    let out = d.command(&mut core, Actor::system("op"), cordon());
    let why = format!("{:?}", out.result);
    assert!(
        out.result.is_err()
            && why.contains("not acknowledged")
            && why.contains("books are unchanged"),
        "{why}"
    );
    assert!(!cordoned(&core));
    // Taken: acknowledged, in force in the cluster before the answer.
    let out = d.command(&mut core, Actor::system("op"), cordon());
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert!(cordoned(&core));
    let patches: Vec<(String, Value)> = rx
        .try_iter()
        .filter(|(uri, _)| uri.contains("/nodes/gpu-a"))
        .collect();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert_eq!(patches[1].1["spec"]["unschedulable"], true);
}

#[tokio::test]
async fn the_first_lists_are_read_from_the_watch_cache_as_client_gos_reflectors_read_them() {
    // Every watcher's list asks for `resourceVersion=0` (served from the API server's
    // cache, one answer), not a quorum read from etcd in pages of 500.
    let (client, handle) = mock_client();
    let (tx, _rx) = std::sync::mpsc::channel();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let mut lists = Vec::new();
        while lists.len() < 3 {
            let Some((req, send)) = h.next_request().await else {
                break;
            };
            let uri = req.uri().clone();
            let query = uri.query().unwrap_or("").to_string();
            if !query.contains("watch=true") {
                lists.push((uri.path().to_string(), query));
            }
            send.send_response(ok(json!({"apiVersion": "v1", "kind": "List",
                "metadata": {"resourceVersion": "7"}, "items": []})));
        }
        lists
    });
    maar_kube::world::spawn_watchers(&client, None, tx);
    let lists = tokio::time::timeout(std::time::Duration::from_secs(5), server)
        .await
        .expect("the watchers list")
        .unwrap();
    assert_eq!(lists.len(), 3, "{lists:?}");
    for (path, query) in &lists {
        assert!(
            query.split('&').any(|p| p == "resourceVersion=0"),
            "{path}?{query}"
        );
    }
    assert!(lists.iter().any(|(p, _)| p == "/api/v1/pods"), "{lists:?}");
}

#[tokio::test]
async fn a_list_reaches_the_driver_as_one_message_in_its_order() {
    // A first list of thousands of pods is one send (and one wake of the driver),
    // not one a pod; its order is kept: the start, each pod, the end.
    let (client, handle) = mock_client();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let mut answered = 0;
        while answered < 20 {
            let Some((req, send)) = h.next_request().await else {
                break;
            };
            let uri = req.uri().clone();
            let watch = uri.query().unwrap_or("").contains("watch=true");
            let items = if uri.path() == "/api/v1/pods" && !watch {
                (0..300).map(|i| pod(&format!("p-{i:03}"))).collect()
            } else {
                Vec::new()
            };
            if watch {
                // No watch events: the lists are what is seen.
                std::mem::forget(send);
                continue;
            }
            send.send_response(ok(json!({"apiVersion": "v1", "kind": "List",
                "metadata": {"resourceVersion": "7"}, "items": items})));
            answered += 1;
        }
    });
    maar_kube::world::spawn_watchers(&client, None, tx);
    // The start of a list goes before the list is asked for; the list, to its end,
    // in one message.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut messages = Vec::new();
    while !messages
        .iter()
        .any(|m: &Vec<String>| m.last().is_some_and(|l| l == "done"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no pod list seen: {messages:?}"
        );
        let name = |s: &Seen| match s {
            Seen::Pod(Watched::Init) => Some("init".to_string()),
            Seen::Pod(Watched::InitApply(p)) => Some(p.key.clone()),
            Seen::Pod(Watched::InitDone) => Some("done".to_string()),
            Seen::Pod(other) => panic!("{other:?}"),
            _ => None,
        };
        match rx.try_recv() {
            Ok(Seen::Many(all)) => {
                let pods: Vec<String> = all.iter().filter_map(name).collect();
                if !pods.is_empty() {
                    assert_eq!(pods.len(), all.len(), "one watch's events only");
                    messages.push(pods);
                }
            }
            Ok(s) => messages.extend(name(&s).map(|n| vec![n])),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
    server.abort();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0], ["init"]);
    let list = &messages[1];
    assert_eq!(list.len(), 301);
    assert_eq!(list[0], "ml/p-000");
    assert_eq!(list[299], "ml/p-299");
    assert_eq!(list[300], "done");
}
