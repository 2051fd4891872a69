//! maar's API behind the Kubernetes API server (`maar kube --api-listen ADDR`): the
//! same requests as the engine's socket (`api::Request` → `api::Reply`), served over
//! HTTPS as the aggregated API `ops.maar.crater.ai/v1alpha1` (deploy/api.yaml), so
//! operators act with their Kubernetes identity (`maar cordon --context prod`).
//!
//! - `POST /apis/ops.maar.crater.ai/v1alpha1/namespaces/<ns>/requests`: the body is one
//!   `api::Request` (JSON, at most [`api::MAX_REQUEST`] bytes), the answer one
//!   `api::Reply`. Discovery (`GET /apis/ops.maar.crater.ai/v1alpha1`) and `/healthz`,
//!   `/readyz`, `/livez` are open to anyone.
//! - **Who**: the front proxy's user and group headers, trusted only on a connection
//!   whose client certificate verified against the requestheader CA (and has an
//!   allowed common name); else a `Bearer` token, checked with a `TokenReview`
//!   (`maar_kube::ops`). Nothing else is taken: a request with neither is 401.
//! - **Role**: a `SubjectAccessReview` per request (`use roles/<role>` in
//!   ops.maar.crater.ai); a command is judged by the role it needs, recorded (done or
//!   refused) with the user as its actor and `Kubernetes (groups ...)` as its origin;
//!   reads need viewer (403 otherwise).
//! - **Bounds**: 64 connections at once, a 10 s TLS handshake, a 5 s header read, 60 s
//!   per connection.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, StatusCode};
use maar_kube::ops::{self, FrontProxy, Identity};
use maar_scheduler::{Actor, Role};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::api::{Caller, Reply, Request, MAX_REQUEST};
use crate::engine::EngineHandle;
use crate::roles::Judged;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
const HANDSHAKE: Duration = Duration::from_secs(10);
const HEADER_READ: Duration = Duration::from_secs(5);
const CONNECTION: Duration = Duration::from_secs(60);

/// How the API is served.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    pub listen: SocketAddr,
    /// The server's certificate (PEM, its chain) and key; a self-signed pair made at
    /// start when absent.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// Who may be taken at their word, and how the API server is asked.
#[derive(Clone)]
pub struct Auth {
    pub client: ops::Client,
    /// The front proxy (None: the API server has none; only bearer tokens count).
    pub front_proxy: Option<FrontProxy>,
}

/// The TLS side of a connection that matters to authentication.
#[derive(Clone, Debug, Default)]
pub struct Peer {
    /// A client certificate was presented (and so verified against the front proxy's CA).
    pub verified: bool,
    /// Its common name.
    pub cn: Option<String>,
}

/// The API served; dropped, it stops.
pub struct KubeApi {
    rt: Option<tokio::runtime::Runtime>,
    pub addr: SocketAddr,
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl KubeApi {
    /// Reads the front proxy's settings with `client` (maar's own credentials), binds
    /// `opts.listen` and serves `handle` (whose state file is `state`). A configmap it
    /// may not read is logged, with the RoleBinding it needs, and the API takes bearer
    /// tokens only; errors name what failed: the certificate, the address.
    pub fn start(
        handle: EngineHandle,
        state: &Path,
        cfg: ops::Config,
        opts: &ApiOptions,
    ) -> Result<KubeApi, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("maar-kube-api")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let (listener, tls, auth) = rt.block_on(async {
            // Made on this runtime: the client's worker runs here.
            let client = maar_kube::connect::client_of(cfg).map_err(|e| e.to_string())?;
            // As Kubernetes' own aggregated API servers do: a configmap maar may not
            // read is said, and the API goes on with bearer tokens alone (maar keeps
            // scheduling; without deploy/api.yaml no APIService routes to it anyway).
            let fp = match ops::front_proxy(&client).await {
                Ok(fp) => fp,
                Err(e) => {
                    tracing::warn!(target: "maar::api", "--api-listen: {e}; continuing without the front proxy (only bearer tokens are taken). Usually fixed by deploy/api.yaml: a RoleBinding to extension-apiserver-authentication-reader in kube-system, and system:auth-delegator");
                    None
                }
            };
            if fp.is_none() {
                tracing::warn!(target: "maar::api", "the API server's front proxy is not known (no requestheader CA read from configmap kube-system/extension-apiserver-authentication): only bearer tokens are taken");
            }
            let tls = tls_config(opts, fp.as_ref())?;
            let listener = tokio::net::TcpListener::bind(opts.listen)
                .await
                .map_err(|e| format!("--api-listen {}: {e}", opts.listen))?;
            Ok::<_, String>((
                listener,
                tls,
                Auth {
                    client,
                    front_proxy: fp,
                },
            ))
        })?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let state = state.to_path_buf();
        rt.spawn(serve(listener, tls, auth, handle, state));
        tracing::info!(target: "maar::api", "serving {}/{} on https://{addr}", ops::GROUP, ops::VERSION);
        Ok(KubeApi { rt: Some(rt), addr })
    }
}

/// The server's TLS: its certificate (given, or self-signed now), and client
/// certificates asked for and verified against the front proxy's CA (optional: a
/// client without one may still bring a bearer token).
pub fn tls_config(
    opts: &ApiOptions,
    fp: Option<&FrontProxy>,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (chain, key) = match (&opts.cert, &opts.key) {
        (Some(c), Some(k)) => {
            let chain = CertificateDer::pem_file_iter(c)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("--tls-cert {}: {e}", c.display()))?;
            if chain.is_empty() {
                return Err(format!("--tls-cert {}: no certificate in it", c.display()));
            }
            let key = PrivateKeyDer::from_pem_file(k)
                .map_err(|e| format!("--tls-key {}: {e}", k.display()))?;
            (chain, key)
        }
        (None, None) => self_signed(opts.listen)?,
        _ => return Err("--tls-cert and --tls-key go together".into()),
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match fp {
        Some(fp) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(fp.client_ca.as_bytes()) {
                let c = c.map_err(|e| format!("the front proxy's CA: {e}"))?;
                roots
                    .add(c)
                    .map_err(|e| format!("the front proxy's CA: {e}"))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("the front proxy's CA: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("the server's certificate: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A self-signed certificate for the Service's names (and the address listened on).
fn self_signed(
    listen: SocketAddr,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let mut names: Vec<String> = [
        "maar-api",
        "maar-api.maar-system",
        "maar-api.maar-system.svc",
        "localhost",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !listen.ip().is_unspecified() {
        names.push(listen.ip().to_string());
    }
    let ck = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("a self-signed certificate: {e}"))?;
    let key = PrivateKeyDer::try_from(ck.signing_key.serialize_der())
        .map_err(|e| format!("a self-signed certificate's key: {e}"))?;
    Ok((vec![ck.cert.der().clone()], key))
}

/// Accepts connections until the runtime stops.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    auth: Auth,
    handle: EngineHandle,
    state: PathBuf,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let shared = Arc::new((auth, handle, state));
    while let Some((stream, permit)) = maar_agent::serve::accept_capped(&listener, &permits).await {
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await else {
                return;
            };
            let peer = match tls.get_ref().1.peer_certificates() {
                Some([first, ..]) => Peer {
                    verified: true,
                    cn: common_name(first.as_ref()),
                },
                _ => Peer::default(),
            };
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                let peer = peer.clone();
                async move {
                    let (auth, handle, state) = &*shared;
                    Ok::<_, std::convert::Infallible>(
                        respond(req, &peer, auth, handle, state).await,
                    )
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ)
                .serve_connection(TokioIo::new(tls), service);
            let _ = tokio::time::timeout(CONNECTION, conn).await;
            drop(permit);
        });
    }
}

type Response = hyper::Response<Full<Bytes>>;

fn json(code: StatusCode, v: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_else(|e| e.to_string().into_bytes());
    with_body(code, body)
}

/// A JSON body already encoded.
fn with_body(code: StatusCode, body: Vec<u8>) -> Response {
    hyper::Response::builder()
        .status(code)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
}

fn failure(code: StatusCode, message: &str) -> Response {
    let reason = match code {
        StatusCode::UNAUTHORIZED => "Unauthorized",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
        StatusCode::BAD_REQUEST => "BadRequest",
        StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
        _ => "InternalError",
    };
    json(
        code,
        &ops::status(code.as_u16(), reason, &ops::clean(message)),
    )
}

/// Who is asking: the front proxy's headers on a verified connection, else a bearer
/// token the API server reviews.
pub async fn authenticate(
    auth: &Auth,
    peer: &Peer,
    headers: &http::HeaderMap,
) -> Result<Identity, String> {
    if peer.verified {
        if let Some(fp) = &auth.front_proxy {
            return fp.identity(peer.cn.as_deref(), headers);
        }
    }
    match headers.get(http::header::AUTHORIZATION) {
        Some(v) => {
            let v = v
                .to_str()
                .map_err(|_| "the Authorization header is not visible ASCII".to_string())?;
            let token = v
                .strip_prefix("Bearer ")
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or("the Authorization header is not `Bearer <token>`")?;
            ops::token_review(&auth.client, token).await
        }
        None => Err(
            "no credentials: come through the Kubernetes API server (its front proxy) or bring a bearer token"
                .into(),
        ),
    }
}

/// The actor a Kubernetes identity acts as: the user's name, and its groups as the
/// origin (the audit shows both).
pub fn actor_of(id: &Identity) -> Actor {
    let groups: Vec<String> = id.groups.iter().map(|g| ops::clean(g)).collect();
    let via = match id.via {
        ops::Via::FrontProxy => "through the API server",
        ops::Via::Token => "with a bearer token",
    };
    Actor {
        user: ops::clean(&id.user),
        uid: None,
        from: Some(if groups.is_empty() {
            format!("Kubernetes {via} (no groups)")
        } else {
            format!("Kubernetes {via} (groups {})", groups.join(", "))
        }),
    }
}

/// The role a request needs: a command's own, the caller's role (`Grant`) as high as
/// it goes, reads viewer.
pub fn needs(req: &Request) -> Role {
    match req {
        Request::Apply { command, .. } => command.required_role(),
        Request::Grant => Role::Admin,
        _ => Role::Viewer,
    }
}

async fn respond(
    req: hyper::Request<hyper::body::Incoming>,
    peer: &Peer,
    auth: &Auth,
    handle: &EngineHandle,
    state: &Path,
) -> Response {
    let path = req.uri().path().to_string();
    let version = ops::version_path();
    let method = req.method().clone();
    match (method.clone(), path.as_str()) {
        (Method::GET, "/healthz" | "/readyz" | "/livez") => {
            return hyper::Response::new(Full::new(Bytes::from_static(b"ok")))
        }
        (Method::GET, p) if p == version => return json(StatusCode::OK, &ops::discovery()),
        _ => {}
    }
    let Some(ns) = path
        .strip_prefix(&format!("{version}/namespaces/"))
        .and_then(|r| r.strip_suffix(&format!("/{}", ops::RESOURCE)))
        .filter(|ns| !ns.is_empty() && !ns.contains('/'))
    else {
        return failure(
            StatusCode::NOT_FOUND,
            &format!(
                "{path}: not found; maar serves POST {}",
                ops::requests_path("<namespace>")
            ),
        );
    };
    let _ = ns;
    if method != Method::POST {
        return failure(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{method} {path}: only POST (one maar request as JSON)"),
        );
    }
    let id = match authenticate(auth, peer, req.headers()).await {
        Ok(id) => id,
        Err(why) => return failure(StatusCode::UNAUTHORIZED, &why),
    };
    let body = match Limited::new(req.into_body(), MAX_REQUEST as usize)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return if e.is::<http_body_util::LengthLimitError>() {
                failure(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("request longer than {} MiB", MAX_REQUEST >> 20),
                )
            } else {
                failure(StatusCode::BAD_REQUEST, &format!("request not read: {e}"))
            };
        }
    };
    let request: Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return failure(
                StatusCode::BAD_REQUEST,
                &format!("request not understood: {e}"),
            )
        }
    };
    let need = needs(&request);
    let judged = match ops::judge(&auth.client, &id, need).await {
        Ok(j) => Judged {
            role: j.role,
            why: j.why,
        },
        Err(e) => {
            return failure(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{}'s role could not be decided: {e}", id.user),
            )
        }
    };
    let apply = matches!(request, Request::Apply { .. });
    if !apply && judged.role.is_none() {
        return failure(
            StatusCode::FORBIDDEN,
            &format!(
                "{} has no maar role ({}); bind ClusterRole maar-viewer, maar-operator or maar-admin (deploy/rbac.yaml)",
                id.user, judged.why
            ),
        );
    }
    let caller = Caller::Judged {
        actor: actor_of(&id),
        judged,
    };
    let (handle, state) = (handle.clone(), state.to_path_buf());
    // Answered and encoded off the runtime's threads (an answer may be large).
    tokio::task::spawn_blocking(move || {
        let reply = crate::api::answer(request, &caller, &handle, &state);
        answer_body(reply, crate::api::MAX_REPLY)
    })
    .await
    .unwrap_or_else(|e| {
        failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the request failed: {e}"),
        )
    })
}

/// The answer as the socket would carry it: past `max` bytes, an error saying so.
fn answer_body(reply: Reply, max: u64) -> Response {
    match crate::api::encode_answer(reply, max) {
        Ok(body) => with_body(StatusCode::OK, body),
        Err(e) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the answer could not be encoded: {e}"),
        ),
    }
}

/// One DER element: its tag, its content, what follows it.
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &x| (acc << 8) | x as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The subject's common name of a DER certificate (None when it has none or is not
/// one).
pub fn common_name(der: &[u8]) -> Option<String> {
    const CN: &[u8] = &[0x55, 0x04, 0x03];
    let (0x30, cert, _) = tlv(der)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(cert)? else {
        return None;
    };
    let (tag, _, mut rest) = tlv(tbs)?;
    if tag == 0xa0 {
        rest = tlv(rest)?.2; // the serial number after the version
    }
    // The signature algorithm, the issuer, the validity; then the subject.
    for _ in 0..3 {
        rest = tlv(rest)?.2;
    }
    let (0x30, mut subject, _) = tlv(rest)? else {
        return None;
    };
    while !subject.is_empty() {
        let (_, set, next) = tlv(subject)?;
        subject = next;
        let mut atvs = set;
        while !atvs.is_empty() {
            let (_, atv, next) = tlv(atvs)?;
            atvs = next;
            let (0x06, oid, value) = tlv(atv)? else {
                continue;
            };
            if oid == CN {
                let (_, v, _) = tlv(value)?;
                return std::str::from_utf8(v).ok().map(ops::clean);
            }
        }
    }
    None
}

/// `maar kube --api-listen`: maar's API served behind the API server beside the
/// engine, asking the API server with maar's own credentials (TokenReview,
/// SubjectAccessReview); nothing without `--api-listen`.
pub fn beside(
    args: &dyn std::any::Any,
    handle: &EngineHandle,
    state: &Path,
) -> Result<Option<Box<dyn std::any::Any>>, crate::failure::Failure> {
    use crate::failure::{kube_failure, Failure};
    let Some(a) = args.downcast_ref::<maar_kube::KubeArgs>() else {
        return Err(Failure::No(
            "maar's API behind the API server is Kubernetes' only".into(),
        ));
    };
    let Some(listen) = a.api_listen else {
        return Ok(None);
    };
    let opts = ApiOptions {
        listen,
        cert: a.tls_cert.clone(),
        key: a.tls_key.clone(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::No(e.to_string()))?;
    let (cfg, _) = rt
        .block_on(maar_kube::connect::config(&a.connect_options()))
        .map_err(kube_failure)?;
    drop(rt);
    let api = KubeApi::start(handle.clone(), state, cfg, &opts).map_err(Failure::No)?;
    Ok(Some(Box::new(api)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_name_is_read_from_a_certificate_and_junk_is_none() {
        let mut p = rcgen::CertificateParams::new(vec!["x".into()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "maar");
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "front-proxy-client");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        assert_eq!(
            common_name(cert.der()).as_deref(),
            Some("front-proxy-client")
        );
        let mut none = rcgen::CertificateParams::new(vec!["x".into()]).unwrap();
        none.distinguished_name = rcgen::DistinguishedName::new();
        let cert = none.self_signed(&key).unwrap();
        assert_eq!(common_name(cert.der()), None);
        assert_eq!(common_name(b""), None);
        assert_eq!(common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        let der = cert.der().to_vec();
        for cut in 0..der.len() {
            let _ = common_name(&der[..cut]);
        }
    }

    /// The HTTPS door caps an answer as the socket does (it was serialized whole, of any
    /// size, for any viewer).
    #[tokio::test]
    async fn an_answer_over_the_cap_is_refused_with_the_sockets_message() {
        let body = |r: Response| async move {
            let bytes = r.into_body().collect().await.unwrap().to_bytes();
            serde_json::from_slice::<Reply>(&bytes).unwrap()
        };
        let big = Reply::Error("x".repeat(3 << 20));
        match body(answer_body(big.clone(), 2 << 20)).await {
            Reply::Error(why) => assert!(
                why.starts_with("the answer would be 3 MiB, more than one answer carries (2 MiB)"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        match body(answer_body(big, 4 << 20)).await {
            Reply::Error(why) => assert_eq!(why.len(), 3 << 20),
            other => panic!("{other:?}"),
        }
    }
}
