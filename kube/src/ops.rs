//! Operators through the API server: maar's API served behind the Kubernetes API
//! server as an aggregated API (`APIService v1alpha1.ops.maar.crater.ai`), so people
//! act with their Kubernetes identity (`maar cordon --context prod`).
//!
//! - **Who is asking** (delegated authentication, as aggregated API servers and
//!   kube-rbac-proxy do): the front proxy's `X-Remote-User` / `X-Remote-Group` headers,
//!   trusted only from a client certificate the server verified against the
//!   requestheader CA of configmap `kube-system/extension-apiserver-authentication`
//!   (and, when that configmap names allowed names, only from a certificate with one of
//!   them as its common name); else a `Bearer` token, checked with a `TokenReview`.
//! - **What they may do** (delegated authorization): a `SubjectAccessReview` asking
//!   whether the user and groups may `use` `roles` of `ops.maar.crater.ai` named
//!   `viewer`, `operator` or `admin` (the ClusterRoles maar-viewer, maar-operator,
//!   maar-admin of deploy/rbac.yaml grant them).
//! - **The client side**: [`OpsClient`] sends one request body to the aggregated path
//!   with the operator's kubeconfig and returns the answer's body.
//!
//! The wire format of the bodies is maar's (`api::Request` / `api::Reply`); this
//! module knows only bytes, identities and roles.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
pub use kube::{Client, Config};
use maar_scheduler::Role;

use crate::connect::{api_error, client_of, config, ConnectOptions, KubeError};

/// maar's API group.
pub const GROUP: &str = "ops.maar.crater.ai";
/// Its one version.
pub const VERSION: &str = "v1alpha1";
/// The namespace maar runs in (the path's namespace; the request is not namespaced
/// in meaning).
pub const NAMESPACE: &str = "maar-system";
/// The resource a request is posted to.
pub const RESOURCE: &str = "requests";
/// The resource a role check asks about (`use roles/operator`).
pub const ROLES: &str = "roles";
/// The configmap with the front proxy's CA and header names.
pub const AUTH_CONFIGMAP: (&str, &str) = ("kube-system", "extension-apiserver-authentication");

/// The group-version's path (`/apis/ops.maar.crater.ai/v1alpha1`): discovery.
pub fn version_path() -> String {
    format!("/apis/{GROUP}/{VERSION}")
}

/// Where a request is posted.
pub fn requests_path(namespace: &str) -> String {
    format!("{}/namespaces/{namespace}/{RESOURCE}", version_path())
}

/// The discovery document of the group-version (an `APIResourceList`).
pub fn discovery() -> serde_json::Value {
    serde_json::json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [{
            "name": RESOURCE,
            "singularName": "request",
            "namespaced": true,
            "kind": "Request",
            "verbs": ["create"],
        }],
    })
}

/// A Kubernetes `Status` failure body.
pub fn status(code: u16, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

/// How an identity was established.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The API server's front proxy (its headers, behind its verified certificate).
    FrontProxy,
    /// A bearer token the API server reviewed.
    Token,
}

/// A Kubernetes user, as the API server vouches for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    pub via: Via,
}

impl Identity {
    /// The user and its groups in words: `alice (groups maar-viewers,
    /// system:authenticated)`.
    pub fn describe(&self) -> String {
        if self.groups.is_empty() {
            format!("{} (no groups)", self.user)
        } else {
            format!("{} (groups {})", self.user, self.groups.join(", "))
        }
    }
}

/// The front proxy's settings, from the configmap
/// `kube-system/extension-apiserver-authentication`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrontProxy {
    /// PEM: the CA that signs the front proxy's client certificate.
    pub client_ca: String,
    /// Common names a front-proxy certificate may have (empty: any the CA signed).
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
}

/// A JSON list of strings in a configmap value (`["X-Remote-User"]`).
fn string_list(key: &str, v: Option<&String>) -> Result<Vec<String>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(s) if s.trim().is_empty() => Ok(Vec::new()),
        Some(s) => serde_json::from_str(s)
            .map_err(|e| format!("{key} is not a JSON list of strings ({e})")),
    }
}

impl FrontProxy {
    /// The settings in the configmap's data; `None` when it names no requestheader CA
    /// (the API server runs without a front proxy).
    pub fn from_data(
        data: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<FrontProxy>, String> {
        let Some(ca) = data.get("requestheader-client-ca-file") else {
            return Ok(None);
        };
        if ca.trim().is_empty() {
            return Ok(None);
        }
        let mut username_headers = string_list(
            "requestheader-username-headers",
            data.get("requestheader-username-headers"),
        )?;
        if username_headers.is_empty() {
            username_headers.push("X-Remote-User".into());
        }
        let mut group_headers = string_list(
            "requestheader-group-headers",
            data.get("requestheader-group-headers"),
        )?;
        if group_headers.is_empty() {
            group_headers.push("X-Remote-Group".into());
        }
        Ok(Some(FrontProxy {
            client_ca: ca.clone(),
            allowed_names: string_list(
                "requestheader-allowed-names",
                data.get("requestheader-allowed-names"),
            )?,
            username_headers,
            group_headers,
        }))
    }

    /// The identity the front proxy's headers name, from a connection whose client
    /// certificate the server verified against [`FrontProxy::client_ca`] and whose
    /// common name is `cn`.
    pub fn identity(
        &self,
        cn: Option<&str>,
        headers: &http::HeaderMap,
    ) -> Result<Identity, String> {
        if !self.allowed_names.is_empty() {
            match cn {
                Some(cn) if self.allowed_names.iter().any(|n| n == cn) => {}
                Some(cn) => {
                    return Err(format!(
                        "the client certificate's common name {:?} is not one of the front proxy's allowed names ({})",
                        clean(cn),
                        self.allowed_names.join(", ")
                    ))
                }
                None => {
                    return Err(
                        "the client certificate has no common name, and the front proxy's names are restricted"
                            .into(),
                    )
                }
            }
        }
        let mut user = None;
        for h in &self.username_headers {
            if let Some(v) = headers.get(h.as_str()) {
                let v = v
                    .to_str()
                    .map_err(|_| format!("header {h} is not visible ASCII"))?;
                if !v.is_empty() {
                    user = Some(v.to_string());
                    break;
                }
            }
        }
        let user = user.ok_or_else(|| {
            format!(
                "a front-proxy request without a user header ({})",
                self.username_headers.join(", ")
            )
        })?;
        let mut groups = Vec::new();
        for h in &self.group_headers {
            for v in headers.get_all(h.as_str()) {
                let v = v
                    .to_str()
                    .map_err(|_| format!("header {h} is not visible ASCII"))?;
                if !v.is_empty() {
                    groups.push(v.to_string());
                }
            }
        }
        Ok(Identity {
            user,
            groups,
            via: Via::FrontProxy,
        })
    }
}

/// Text from outside as it may be printed: control characters dropped.
pub fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(256).collect()
}

/// Reads the front proxy's settings from the cluster.
pub async fn front_proxy(client: &Client) -> Result<Option<FrontProxy>, String> {
    let (ns, name) = AUTH_CONFIGMAP;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm = cms
        .get(name)
        .await
        .map_err(|e| format!("configmap {ns}/{name}: {}", short(&e)))?;
    FrontProxy::from_data(&cm.data.unwrap_or_default())
        .map_err(|e| format!("configmap {ns}/{name}: {e}"))
}

/// An API error in one line.
fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

/// Who a bearer token belongs to, as the API server's `TokenReview` says; an error
/// says why it is not taken.
pub async fn token_review(client: &Client, token: &str) -> Result<Identity, String> {
    let api: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    let got = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| format!("the token could not be reviewed: {}", short(&e)))?;
    let status = got.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        return Err(match status.error {
            Some(e) if !e.is_empty() => format!("the API server did not take the token: {e}"),
            _ => "the API server did not take the token".into(),
        });
    }
    let user = status.user.unwrap_or_default();
    let name = user.username.unwrap_or_default();
    if name.is_empty() {
        return Err("the token review named no user".into());
    }
    Ok(Identity {
        user: name,
        groups: user.groups.unwrap_or_default(),
        via: Via::Token,
    })
}

/// What the API server decided about one role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub allowed: bool,
    /// The authorizer's reason (RBAC names the binding), or why it was denied.
    pub reason: String,
}

/// Asks the API server whether `who` may use `role` (`use roles/<role>` in
/// ops.maar.crater.ai).
pub async fn may_use(client: &Client, who: &Identity, role: Role) -> Result<Access, String> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(who.user.clone()),
            groups: Some(who.groups.clone()),
            resource_attributes: Some(ResourceAttributes {
                group: Some(GROUP.into()),
                version: Some(VERSION.into()),
                resource: Some(ROLES.into()),
                name: Some(role.to_string()),
                verb: Some("use".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let got = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| format!("SubjectAccessReview failed: {}", short(&e)))?;
    let status = got.status.unwrap_or_default();
    let reason = match (status.reason, status.evaluation_error) {
        (Some(r), _) if !r.is_empty() => r,
        (_, Some(e)) if !e.is_empty() => e,
        _ => "no RBAC rule allows it".into(),
    };
    Ok(Access {
        allowed: status.allowed && status.denied != Some(true),
        reason,
    })
}

/// A person's role as the API server's RBAC decides it, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// None: not even a viewer.
    pub role: Option<Role>,
    pub why: String,
}

/// The role `who` acts with for something that needs `need`: `need` when the API
/// server allows it, else the highest lower role it allows (so a refusal names what
/// the person is). One `SubjectAccessReview` when allowed, one more per lower role
/// otherwise.
pub async fn judge(client: &Client, who: &Identity, need: Role) -> Result<Judgement, String> {
    let first = may_use(client, who, need).await?;
    if first.allowed {
        return Ok(Judgement {
            role: Some(need),
            why: format!(
                "SubjectAccessReview for {}: may use roles/{need} in {GROUP}: {}",
                who.describe(),
                first.reason
            ),
        });
    }
    let mut role = None;
    let mut why = format!(
        "SubjectAccessReview for {}: use of roles/{need} in {GROUP} denied: {}",
        who.describe(),
        first.reason
    );
    for lower in [Role::Admin, Role::Operator, Role::Viewer] {
        if lower >= need {
            continue;
        }
        let a = may_use(client, who, lower).await?;
        if a.allowed {
            role = Some(lower);
            why.push_str(&format!("; roles/{lower} allowed: {}", a.reason));
            break;
        }
    }
    Ok(Judgement { role, why })
}

/// Why an operator's request through the API server did not get an answer from maar.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The API server does not serve maar's group (no APIService, or it is not
    /// available yet).
    #[error("context {context}: the API server at {url} does not serve {GROUP}/{VERSION} ({why}); install maar's API (kubectl apply -f deploy/api.yaml) and run maar with --api-listen (docs/kube.md); a maar run on this machine without it is reached with --state PATH instead (the state file it was started with)")]
    NoApi {
        context: String,
        url: String,
        why: String,
    },
    /// The APIService is there, but maar does not answer behind it.
    #[error("context {context}: the API server at {url} has maar's APIService, but maar does not answer behind it ({why}); check that maar runs with --api-listen and that Service maar-api in {NAMESPACE} reaches it")]
    Unavailable {
        context: String,
        url: String,
        why: String,
    },
    #[error("{0}")]
    Kube(#[from] KubeError),
}

/// A client of the maar serving its API behind the API server of a kubeconfig
/// context. Blocking: it runs its own small runtime.
pub struct OpsClient {
    client: Client,
    rt: tokio::runtime::Runtime,
    pub context: String,
    pub url: String,
    timeout: Duration,
}

impl OpsClient {
    /// Connects with the context's credentials and checks that the API server serves
    /// maar's group (its discovery document).
    pub fn connect(opts: &ConnectOptions) -> Result<OpsClient, OpsError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| KubeError::Config(e.to_string()))?;
        let (cfg, context) = rt.block_on(config(opts))?;
        let url = cfg.cluster_url.to_string();
        let client = rt
            .block_on(async { client_of(cfg) })
            .map_err(|e| KubeError::Config(e.to_string()))?;
        let c = OpsClient {
            client,
            rt,
            context,
            url,
            timeout: opts.timeout,
        };
        c.discover()?;
        Ok(c)
    }

    /// A client on a client `client` makes (tests: a mock), made within the runtime
    /// that drives it (kube-rs's client starts a task of its own).
    pub fn with_client(
        client: impl FnOnce() -> Client,
        context: &str,
        timeout: Duration,
    ) -> OpsClient {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let client = {
            let _in = rt.enter();
            client()
        };
        OpsClient {
            client,
            rt,
            context: context.into(),
            url: "(mock)".into(),
            timeout,
        }
    }

    /// Checks that the API server serves maar's group-version.
    pub fn discover(&self) -> Result<(), OpsError> {
        let req = http::Request::get(version_path())
            .body(Vec::new())
            .map_err(|e| KubeError::Config(e.to_string()))?;
        let got = self
            .rt
            .block_on(async {
                tokio::time::timeout(self.timeout, self.client.request_text(req)).await
            })
            .map_err(|_| OpsError::Unavailable {
                context: self.context.clone(),
                url: self.url.clone(),
                why: format!(
                    "no answer within {} s: the API server or maar behind it does not answer",
                    self.timeout.as_secs().max(1)
                ),
            })?;
        match got {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Err(OpsError::NoApi {
                context: self.context.clone(),
                url: self.url.clone(),
                why: format!("{} (404): no APIService v1alpha1.{GROUP}", s.message),
            }),
            Err(kube::Error::Api(s)) if s.code == 503 => Err(OpsError::Unavailable {
                context: self.context.clone(),
                url: self.url.clone(),
                why: format!("{} (503)", s.message),
            }),
            Err(e) => Err(api_error(
                &self.context,
                &self.url,
                &format!("reach {}", version_path()),
                e,
            )
            .into()),
        }
    }

    /// Posts one request body; the answer's body, read up to `cap` bytes: an answer
    /// past it is refused, not held (the socket's client reads its own maar's
    /// answers within the same bound).
    pub fn ask(&self, body: Vec<u8>, wait: Duration, cap: u64) -> Result<Vec<u8>, KubeError> {
        let req = http::Request::post(requests_path(NAMESPACE))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| KubeError::Config(e.to_string()))?;
        let read = async {
            use futures::AsyncReadExt;
            let answer = self.client.request_stream(req).await?;
            let mut out = Vec::new();
            answer
                .take(cap.saturating_add(1))
                .read_to_end(&mut out)
                .await
                .map_err(kube::Error::ReadEvents)?;
            Ok::<_, kube::Error>(out)
        };
        let got = self
            .rt
            .block_on(async { tokio::time::timeout(wait, read).await })
            .map_err(|_| KubeError::Timeout {
                context: self.context.clone(),
                url: self.url.clone(),
                secs: wait.as_secs(),
            })?;
        if let Ok(out) = &got {
            if out.len() as u64 > cap {
                return Err(KubeError::Api {
                    context: self.context.clone(),
                    what: "read maar's answer".into(),
                    message: format!(
                        "the answer is longer than {}, more than any maar sends; not read",
                        if cap >= 1 << 20 {
                            format!("{} MiB", cap >> 20)
                        } else {
                            format!("{cap} bytes")
                        }
                    ),
                });
            }
        }
        got.map_err(|e| match e {
            kube::Error::Api(s) if s.code == 403 => KubeError::Api {
                context: self.context.clone(),
                what: "not let through to maar".into(),
                message: format!(
                    "{} (403); an admin binds ClusterRole maar-viewer, maar-operator or maar-admin (deploy/rbac.yaml) to this user or a group of it",
                    s.message
                ),
            },
            e => api_error(&self.context, &self.url, "ask maar", e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// An operator's client of maar behind the API server reads an answer up to the
    /// cap it is given: a longer one (a hostile or broken server) is refused with a
    /// message, not read whole; one within it comes back as sent.
    #[test]
    fn an_answer_past_the_cap_is_refused_not_held() {
        type Req = http::Request<kube::client::Body>;
        type Resp = http::Response<kube::client::Body>;
        for (len, cap) in [(4096usize, 1024u64), (1024, 1024)] {
            let (svc, mut handle) = tower_test::mock::pair::<Req, Resp>();
            let server = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let (req, send) = handle.next_request().await.expect("a request");
                    assert_eq!(req.uri().path(), requests_path(NAMESPACE));
                    send.send_response(http::Response::new(kube::client::Body::from(vec![
                        b'x';
                        len
                    ])));
                });
            });
            let ops = OpsClient::with_client(
                move || Client::new(svc, "default"),
                "test",
                Duration::from_secs(5),
            );
            let got = ops.ask(b"{}".to_vec(), Duration::from_secs(5), cap);
            server.join().unwrap();
            if len as u64 > cap {
                let e = got.expect_err("refused").to_string();
                assert!(
                    e.contains("longer than 1024 bytes") && e.contains("not read"),
                    "{e}"
                );
            } else {
                assert_eq!(got.expect("read").len(), len);
            }
        }
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_configmap_gives_the_front_proxy_and_bad_values_are_named() {
        assert_eq!(FrontProxy::from_data(&data(&[])).unwrap(), None);
        let fp = FrontProxy::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
            ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(fp.allowed_names, vec!["front-proxy-client"]);
        let e = FrontProxy::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "front-proxy-client"),
        ]))
        .unwrap_err();
        assert!(e.contains("requestheader-allowed-names"), "{e}");
    }

    #[test]
    fn headers_count_only_from_an_allowed_name() {
        let fp = FrontProxy {
            client_ca: "PEM".into(),
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
        };
        let mut h = http::HeaderMap::new();
        h.insert("x-remote-user", "alice".parse().unwrap());
        h.append("x-remote-group", "maar-viewers".parse().unwrap());
        h.append("x-remote-group", "system:authenticated".parse().unwrap());
        let id = fp.identity(Some("front-proxy-client"), &h).unwrap();
        assert_eq!(id.user, "alice");
        assert_eq!(id.groups, vec!["maar-viewers", "system:authenticated"]);
        assert_eq!(
            id.describe(),
            "alice (groups maar-viewers, system:authenticated)"
        );
        let e = fp.identity(Some("mallory"), &h).unwrap_err();
        assert!(
            e.contains("\"mallory\"") && e.contains("front-proxy-client"),
            "{e}"
        );
        assert!(fp.identity(None, &h).is_err());
        let e = fp
            .identity(Some("front-proxy-client"), &http::HeaderMap::new())
            .unwrap_err();
        assert!(e.contains("X-Remote-User"), "{e}");
        let mut bad = http::HeaderMap::new();
        bad.insert(
            "x-remote-user",
            http::HeaderValue::from_bytes(b"al\xffice").unwrap(),
        );
        let e = fp.identity(Some("front-proxy-client"), &bad).unwrap_err();
        assert!(e.contains("X-Remote-User"), "{e}");
    }
}
