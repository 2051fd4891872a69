//! maar's API behind the Kubernetes API server, served over HTTPS on a real socket with
//! a demo engine behind it, the API server's answers from kube-rs's mock client: the
//! front proxy's headers count only on a connection whose client certificate the
//! requestheader CA signed; a bearer token only when the TokenReview takes it; a
//! command is judged by the SubjectAccessReview of the role it needs, and recorded
//! (done or refused) naming the Kubernetes user and groups; bad input is a 4xx that
//! names what is wrong.

use std::sync::Arc;

use http::{Request, Response};
use kube::client::Body;
use maar::api::{Reply, Request as ApiRequest};
use maar::kube_api::{self, ApiOptions, Auth};
use maar_kube::ops::FrontProxy;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower_test::mock;

struct Pki {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server: (String, String),
    proxy: (CertificateDer<'static>, PrivateKeyDer<'static>),
    /// A client certificate of another CA, with the front proxy's name.
    stranger: (CertificateDer<'static>, PrivateKeyDer<'static>),
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    cn: &str,
    sans: Vec<String>,
    usage: ExtendedKeyUsagePurpose,
) -> (rcgen::Certificate, KeyPair) {
    let mut p = CertificateParams::new(sans).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    (p.signed_by(&key, issuer).unwrap(), key)
}

fn pki() -> Pki {
    let root = ca("front-proxy-ca");
    let (server, skey) = leaf(
        &root,
        "maar-api",
        vec!["localhost".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (proxy, pkey) = leaf(
        &root,
        "front-proxy-client",
        vec![],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let other = ca("someone-else");
    let (stranger, okey) = leaf(
        &other,
        "front-proxy-client",
        vec![],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let der = |k: &KeyPair| PrivateKeyDer::try_from(k.serialize_der()).unwrap();
    Pki {
        ca_pem: root.pem(),
        ca_der: root.der().clone(),
        server: (server.pem(), skey.serialize_pem()),
        proxy: (proxy.der().clone(), der(&pkey)),
        stranger: (stranger.der().clone(), der(&okey)),
    }
}

/// The API server as maar's mock sees it: SubjectAccessReviews answered by a table
/// (alice is a viewer, bob an operator), TokenReviews by token. Counts the reviews.
async fn api_server(
    handle: mock::Handle<Request<Body>, Response<Body>>,
    count: Arc<std::sync::atomic::AtomicUsize>,
) {
    let mut h = std::pin::pin!(handle);
    while let Some((req, send)) = h.next_request().await {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let uri = req.uri().path().to_string();
        let body: Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        let spec = body["spec"].clone();
        let answer = if uri.ends_with("/subjectaccessreviews") {
            let user = spec["user"].as_str().unwrap_or("");
            let role = spec["resourceAttributes"]["name"].as_str().unwrap_or("");
            let allowed = matches!(
                (user, role),
                ("alice", "viewer") | ("bob", "viewer") | ("bob", "operator")
            );
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": spec, "status": {"allowed": allowed,
                   "reason": if allowed { format!("RBAC: allowed for {user}") } else { String::new() }}})
        } else {
            let good = spec["token"] == "bob-token";
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec,
                   "status": if good { json!({"authenticated": true, "user": {"username": "bob", "groups": ["maar-operators"]}}) }
                             else { json!({"authenticated": false, "error": "invalid bearer token"}) }})
        };
        send.send_response(Response::new(Body::from(
            serde_json::to_vec(&answer).unwrap(),
        )));
    }
}

/// One HTTPS request (HTTP/1.1, the connection closed after it): the status and body.
async fn ask(
    addr: std::net::SocketAddr,
    pki: &Pki,
    client_cert: Option<&(CertificateDer<'static>, PrivateKeyDer<'static>)>,
    headers: &[(&str, &str)],
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der.clone()).unwrap();
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let cfg = match client_cert {
        Some((c, k)) => b
            .with_client_auth_cert(vec![c.clone()], k.clone_key())
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    tls.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    tls.read_to_end(&mut got).await.map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&got).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

const PATH: &str = "/apis/ops.maar.crater.ai/v1alpha1/namespaces/maar-system/requests";

fn apply(node: &str) -> String {
    serde_json::to_string(&ApiRequest::Apply {
        command: maar_scheduler::Command::CordonNode { node: node.into() },
        key: format!("key-{}", rand_suffix()),
        ssh: None,
    })
    .unwrap()
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn operators_are_known_by_the_api_server_and_judged_by_its_rbac() {
    let dir = std::env::temp_dir().join(format!("maar-kube-api-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("kube.db");
    let (text, sc) = maar::load::scenario_text(None).unwrap();
    let (loaded, rec) = maar::backend::fresh_demo(Some(&state), &text, sc, None).unwrap();
    let node = loaded.core.cluster().nodes[0].name.clone();
    let mut rec = rec.unwrap();
    rec.acquire().unwrap();
    let handle = maar::engine::start(
        loaded,
        Some(rec),
        maar::engine::EngineOptions {
            paused: true,
            ..Default::default()
        },
    );

    let pki = pki();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &pki.server.0).unwrap();
    std::fs::write(&key, &pki.server.1).unwrap();
    let opts = ApiOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        cert: Some(cert),
        key: Some(key),
    };
    let fp = FrontProxy {
        client_ca: pki.ca_pem.clone(),
        allowed_names: vec!["front-proxy-client".into()],
        username_headers: vec!["X-Remote-User".into()],
        group_headers: vec!["X-Remote-Group".into()],
    };
    let tls = kube_api::tls_config(&opts, Some(&fp)).unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let reviews = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let addr = rt.block_on(async {
        let (svc, mock_handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(svc, "default");
        tokio::spawn(api_server(mock_handle, reviews.clone()));
        let listener = tokio::net::TcpListener::bind(opts.listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(kube_api::serve(
            listener,
            tls,
            Auth {
                client,
                front_proxy: Some(fp.clone()),
            },
            handle.clone(),
            state.clone(),
        ));
        addr
    });
    let reviewed = || reviews.load(std::sync::atomic::Ordering::SeqCst);
    let proxy = Some(&pki.proxy);
    let as_user =
        |u: &'static str, g: &'static str| vec![("X-Remote-User", u), ("X-Remote-Group", g)];

    rt.block_on(async {
        // alice, a viewer, through the front proxy: refused, naming her role and groups.
        let (code, body) = ask(addr, &pki, proxy, &as_user("alice", "maar-viewers"), PATH, &apply(&node)).await.unwrap();
        assert_eq!(code, 200, "{body}");
        let reply: Reply = serde_json::from_str(&body).unwrap();
        let Reply::Applied { result: Err(why), seq: Some(_) } = reply else { panic!("{body}") };
        assert!(why.contains(&format!("cordon node {node} needs the operator role; alice is viewer (SubjectAccessReview for alice (groups maar-viewers): use of roles/operator")), "{why}");
        assert!(why.contains("roles/viewer allowed: RBAC: allowed for alice"), "{why}");

        // bob, an operator: done.
        let (code, body) = ask(addr, &pki, proxy, &as_user("bob", "maar-operators"), PATH, &apply(&node)).await.unwrap();
        assert_eq!(code, 200, "{body}");
        let Reply::Applied { result: Ok(msg), .. } = serde_json::from_str(&body).unwrap() else { panic!("{body}") };
        assert!(msg.contains("cordoned"), "{msg}");

        // The same headers without a client certificate are nobody: 401, no review.
        let before = reviewed();
        let (code, body) = ask(addr, &pki, None, &as_user("bob", "system:masters"), PATH, &apply(&node)).await.unwrap();
        assert_eq!(code, 401, "{body}");
        assert!(body.contains("no credentials"), "{body}");
        assert_eq!(reviewed(), before);

        // A certificate of another CA: the handshake fails.
        let e = ask(addr, &pki, Some(&pki.stranger), &as_user("bob", "x"), PATH, &apply(&node)).await;
        assert!(e.is_err(), "{e:?}");

        // The front proxy without a user header: 401 naming the header.
        let (code, body) = ask(addr, &pki, proxy, &[], PATH, &apply(&node)).await.unwrap();
        assert_eq!(code, 401, "{body}");
        assert!(body.contains("X-Remote-User"), "{body}");

        // A bearer token: reviewed; a bad one is 401 with the API server's reason.
        let (code, body) = ask(addr, &pki, None, &[("Authorization", "Bearer bob-token")], PATH, r#"{"op":"grant"}"#).await.unwrap();
        assert_eq!(code, 200, "{body}");
        let Reply::Grant { user, role, why } = serde_json::from_str(&body).unwrap() else { panic!("{body}") };
        assert_eq!((user.as_str(), role), ("bob", maar_scheduler::Role::Operator), "{why}");
        let (code, body) = ask(addr, &pki, None, &[("Authorization", "Bearer nope")], PATH, r#"{"op":"grant"}"#).await.unwrap();
        assert_eq!(code, 401, "{body}");
        assert!(body.contains("invalid bearer token"), "{body}");
        let (code, body) = ask(addr, &pki, None, &[("Authorization", "Basic eDp5")], PATH, r#"{"op":"grant"}"#).await.unwrap();
        assert_eq!(code, 401, "{body}");
        assert!(body.contains("Bearer"), "{body}");

        // Bad input: named, never a panic.
        let (code, body) = ask(addr, &pki, proxy, &as_user("bob", "g"), PATH, r#"{"op":"launch"}"#).await.unwrap();
        assert_eq!(code, 400, "{body}");
        assert!(body.contains("unknown variant `launch`"), "{body}");
        let (code, body) = ask(addr, &pki, proxy, &as_user("bob", "g"), PATH, "\u{1b}[2J not json").await.unwrap();
        assert_eq!(code, 400, "{body}");
        assert!(!body.contains('\u{1b}'), "{body}");
        let (code, _) = ask(addr, &pki, proxy, &as_user("bob", "g"), "/apis/ops.maar.crater.ai/v1alpha1/namespaces/x/other", "{}").await.unwrap();
        assert_eq!(code, 404);

        // Reads need a role: carol has none.
        let (code, body) = ask(addr, &pki, proxy, &as_user("carol", "g"), PATH, r#"{"op":"command_count"}"#).await.unwrap();
        assert_eq!(code, 403, "{body}");
        assert!(body.contains("carol has no maar role"), "{body}");

        // The audit, read as alice, names the Kubernetes users and their groups.
        let body = serde_json::to_string(&ApiRequest::Audit { filter: Default::default() }).unwrap();
        let (code, body) = ask(addr, &pki, proxy, &as_user("alice", "maar-viewers"), PATH, &body).await.unwrap();
        assert_eq!(code, 200, "{body}");
        let Reply::Commands(rows) = serde_json::from_str(&body).unwrap() else { panic!("{body}") };
        let who: Vec<(String, Option<String>, bool)> = rows
            .iter()
            .map(|r| (r.actor.user.clone(), r.actor.from.clone(), r.result.is_ok()))
            .collect();
        assert_eq!(
            who,
            vec![
                ("alice".into(), Some("Kubernetes through the API server (groups maar-viewers)".into()), false),
                ("bob".into(), Some("Kubernetes through the API server (groups maar-operators)".into()), true),
            ]
        );
    });
    drop(rt);
    handle.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
