//! Delegated authentication and authorization against kube-rs's mock client: a bearer
//! token is taken only when the API server's TokenReview says so; a role is what the
//! API server's SubjectAccessReview allows (`use roles/<role>` in ops.maar.crater.ai),
//! and a refusal names the role the person does have; the front proxy's settings come
//! from the configmap kube-system/extension-apiserver-authentication.

mod common;
use common::{mock_client, next, ok};
use std::pin::pin;

use http::{Method, Response};
use kube::client::Body;
use maar_kube::ops::{self, Identity, Via};
use maar_scheduler::Role;
use serde_json::{json, Value};

/// The SubjectAccessReview's answer, echoing its spec.
fn sar(spec: &Value, allowed: bool, reason: &str) -> Response<Body> {
    ok(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": spec, "status": {"allowed": allowed, "reason": reason},
    }))
}

fn alice() -> Identity {
    Identity {
        user: "alice".into(),
        groups: vec!["maar-viewers".into(), "system:authenticated".into()],
        via: Via::FrontProxy,
    }
}

#[tokio::test]
async fn a_role_the_api_server_allows_takes_one_review_asking_use_of_that_role() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, body, send) = next(&mut h).await;
        assert_eq!(m, Method::POST);
        assert_eq!(uri, "/apis/authorization.k8s.io/v1/subjectaccessreviews?");
        let spec = &body["spec"];
        assert_eq!(spec["user"], "bob");
        assert_eq!(spec["groups"], json!(["maar-operators"]));
        assert_eq!(
            spec["resourceAttributes"],
            json!({"group": "ops.maar.crater.ai", "version": "v1alpha1",
                   "resource": "roles", "name": "operator", "verb": "use"})
        );
        send.send_response(sar(
            spec,
            true,
            "RBAC: allowed by ClusterRoleBinding \"ops\"",
        ));
    });
    let bob = Identity {
        user: "bob".into(),
        groups: vec!["maar-operators".into()],
        via: Via::Token,
    };
    let j = ops::judge(&client, &bob, Role::Operator).await.unwrap();
    server.await.unwrap();
    assert_eq!(j.role, Some(Role::Operator));
    assert!(j.why.contains("ClusterRoleBinding \"ops\""), "{}", j.why);
}

#[tokio::test]
async fn a_role_denied_names_the_highest_lower_role_allowed_or_none() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        // alice: admin? no. operator? no. viewer? yes.
        for (want, allowed) in [("admin", false), ("operator", false), ("viewer", true)] {
            let (_, _, body, send) = next(&mut h).await;
            let spec = body["spec"].clone();
            assert_eq!(spec["resourceAttributes"]["name"], want);
            send.send_response(sar(
                &spec,
                allowed,
                if allowed {
                    "RBAC: allowed by ClusterRoleBinding \"maar-viewers\""
                } else {
                    ""
                },
            ));
        }
        // Then carol: nothing at all.
        for want in ["operator", "viewer"] {
            let (_, _, body, send) = next(&mut h).await;
            let spec = body["spec"].clone();
            assert_eq!(spec["resourceAttributes"]["name"], want);
            send.send_response(sar(&spec, false, ""));
        }
    });
    let j = ops::judge(&client, &alice(), Role::Admin).await.unwrap();
    assert_eq!(j.role, Some(Role::Viewer));
    assert!(
        j.why.starts_with("SubjectAccessReview for alice (groups maar-viewers, system:authenticated): use of roles/admin in ops.maar.crater.ai denied: no RBAC rule allows it; roles/viewer allowed: RBAC: allowed by ClusterRoleBinding \"maar-viewers\""),
        "{}",
        j.why
    );
    let carol = Identity {
        user: "carol".into(),
        groups: vec![],
        via: Via::Token,
    };
    let j = ops::judge(&client, &carol, Role::Operator).await.unwrap();
    server.await.unwrap();
    assert_eq!(j.role, None);
    assert!(j.why.contains("carol (no groups)"), "{}", j.why);
}

#[tokio::test]
async fn a_token_counts_only_when_the_token_review_authenticates_it() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (_, uri, body, send) = next(&mut h).await;
        assert!(
            uri.starts_with("/apis/authentication.k8s.io/v1/tokenreviews"),
            "{uri}"
        );
        assert_eq!(body["spec"]["token"], "good");
        send.send_response(ok(json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": body["spec"],
            "status": {"authenticated": true, "user": {"username": "bob", "groups": ["maar-operators", "system:authenticated"]}},
        })));
        let (_, _, body, send) = next(&mut h).await;
        send.send_response(ok(json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": body["spec"],
            "status": {"authenticated": false, "error": "invalid bearer token"},
        })));
    });
    let id = ops::token_review(&client, "good").await.unwrap();
    assert_eq!(id.user, "bob");
    assert_eq!(id.groups, vec!["maar-operators", "system:authenticated"]);
    assert_eq!(id.via, Via::Token);
    let e = ops::token_review(&client, "bad").await.unwrap_err();
    server.await.unwrap();
    assert_eq!(
        e,
        "the API server did not take the token: invalid bearer token"
    );
}

#[tokio::test]
async fn the_front_proxy_comes_from_the_configmap_and_a_refusal_to_read_it_is_named() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut h = pin!(handle);
        let (m, uri, _, send) = next(&mut h).await;
        assert_eq!(m, Method::GET);
        assert_eq!(
            uri,
            "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
        );
        send.send_response(ok(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": {
                "client-ca-file": "CLIENT CA",
                "requestheader-client-ca-file": "FRONT PROXY CA",
                "requestheader-allowed-names": "[\"front-proxy-client\"]",
                "requestheader-username-headers": "[\"X-Remote-User\"]",
                "requestheader-group-headers": "[\"X-Remote-Group\"]",
                "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
            },
        })));
        let (_, _, _, send) = next(&mut h).await;
        let mut r = ok(
            json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 403,
            "reason": "Forbidden", "message": "configmaps \"extension-apiserver-authentication\" is forbidden"}),
        );
        *r.status_mut() = http::StatusCode::FORBIDDEN;
        send.send_response(r);
    });
    let fp = ops::front_proxy(&client).await.unwrap().unwrap();
    assert_eq!(fp.client_ca, "FRONT PROXY CA");
    assert_eq!(fp.allowed_names, vec!["front-proxy-client"]);
    assert_eq!(fp.username_headers, vec!["X-Remote-User"]);
    let e = ops::front_proxy(&client).await.unwrap_err();
    server.await.unwrap();
    assert!(
        e.starts_with("configmap kube-system/extension-apiserver-authentication: ")
            && e.contains("forbidden")
            && e.contains("403"),
        "{e}"
    );
}
