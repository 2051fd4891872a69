//! Connecting to a cluster: the kubeconfig's context (or the in-cluster config when
//! maar runs in a pod), a connect timeout, and a probe of what maar needs (the API
//! server answers, the credentials are taken, maar may list nodes and pods) so that
//! every failure is one line naming the context and what to fix.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// A kubeconfig file; else `$KUBECONFIG` or `~/.kube/config`, else the in-cluster
    /// config.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig; else its current context.
    pub context: Option<String>,
    /// One namespace; `None` for all.
    pub namespace: Option<String>,
    /// How long to wait for the API server to answer.
    pub timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            kubeconfig: None,
            context: None,
            namespace: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why maar could not use the cluster, in one line that names the context.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("kubeconfig: {0}")]
    Config(String),
    #[error("context {context}: the API server at {url} does not answer ({why}); check that it runs and that the kubeconfig's server address is right")]
    Unreachable {
        context: String,
        url: String,
        why: String,
    },
    #[error("context {context}: the API server at {url} did not answer within {secs} s; check that it runs and that the kubeconfig's server address is right")]
    Timeout {
        context: String,
        url: String,
        secs: u64,
    },
    #[error("context {context}: the API server refused the credentials (401 Unauthorized): they may have expired; log in again or refresh the kubeconfig")]
    Unauthorized { context: String },
    #[error("context {context}: maar may not {what} (403 Forbidden: {message}); bind maar's ClusterRole (deploy/rbac.yaml) to this user")]
    Forbidden {
        context: String,
        what: String,
        message: String,
    },
    #[error("context {context}: {what}: {message}")]
    Api {
        context: String,
        what: String,
        message: String,
    },
}

impl KubeError {
    /// A mistake in what maar was given (the kubeconfig, the context), not in the
    /// cluster: a usage error.
    pub fn is_usage(&self) -> bool {
        matches!(self, KubeError::Config(_))
    }
}

/// A connected client and what it is connected to.
#[derive(Clone)]
pub struct Connected {
    pub client: Client,
    /// The context's name (`in-cluster` inside a pod).
    pub context: String,
    pub url: String,
    /// The API server's version (`v1.26.15`).
    pub version: String,
    pub namespace: Option<String>,
}

/// Reads the configuration (no network).
pub async fn config(opts: &ConnectOptions) -> Result<(Config, String), KubeError> {
    let kc = match &opts.kubeconfig {
        Some(path) => Some(
            Kubeconfig::read_from(path)
                .map_err(|e| KubeError::Config(format!("{}: {e}", path.display())))?,
        ),
        None => Kubeconfig::read().ok(),
    };
    let options = KubeConfigOptions {
        context: opts.context.clone(),
        ..Default::default()
    };
    let (mut cfg, context) = match kc {
        Some(kc) => {
            let context = opts
                .context
                .clone()
                .or(kc.current_context.clone())
                .unwrap_or_else(|| "(none)".into());
            if !kc.contexts.iter().any(|c| c.name == context) {
                let known: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
                return Err(KubeError::Config(format!(
                    "no context `{context}` in the kubeconfig (it has: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
            let cfg = Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| KubeError::Config(format!("context {context}: {e}")))?;
            (cfg, context)
        }
        None => {
            if opts.context.is_some() {
                return Err(KubeError::Config(
                    "--context given, but there is no kubeconfig ($KUBECONFIG or ~/.kube/config)"
                        .into(),
                ));
            }
            let cfg = Config::incluster().map_err(|e| {
                KubeError::Config(format!(
                    "no kubeconfig ($KUBECONFIG or ~/.kube/config) and not in a pod ({e})"
                ))
            })?;
            (cfg, "in-cluster".to_string())
        }
    };
    cfg.connect_timeout = Some(opts.timeout);
    Ok((cfg, context))
}

/// The client: kube-rs's stack (base URL, retries of 5xx/429, credentials, extra
/// headers, timeouts), but offering HTTP/2 as client-go does. Where the server takes
/// it, the watches and all writes share one TLS connection, many requests a write
/// (kube-rs's own client speaks HTTP/1.1 only: one connection per request in flight,
/// each request its own TLS record and system call). A server that answers only
/// HTTP/1.1 gets HTTP/1.1 (ALPN decides). kube-rs's per-request tracing span is left
/// out: maar writes one or two requests a pod bound.
pub fn client_of(cfg: Config) -> Result<Client, kube::Error> {
    use kube::client::ConfigExt;
    use tower::ServiceBuilder;
    if let Some(proxy) = &cfg.proxy_url {
        // As kube-rs's client without its proxy features: refused, not bypassed.
        return Err(kube::Error::ProxyProtocolDisabled {
            proxy_url: Box::new(proxy.clone()),
            protocol_feature: "kube/http-proxy",
        });
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(cfg.rustls_client_config()?)
        .https_or_http();
    let builder = match &cfg.tls_server_name {
        Some(name) => {
            let name = rustls_pki_types::ServerName::try_from(name.clone())
                .map_err(|e| kube::Error::Service(format!("tls-server-name {name}: {e}").into()))?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    let https = builder.enable_http1().enable_http2().wrap_connector(http);
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(cfg.connect_timeout);
    connector.set_read_timeout(cfg.read_timeout);
    connector.set_write_timeout(cfg.write_timeout);
    let hyper: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            // As client-go: a ping after 30 s without a frame, the connection given up
            // 15 s later (its watches then list again).
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(15))
            .build(connector);
    let service = ServiceBuilder::new()
        .layer(cfg.base_uri_layer())
        .option_layer(cfg.default_retry.then(|| {
            tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())
        }))
        .option_layer(cfg.auth_layer()?)
        .layer(cfg.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok(Client::new(service, cfg.default_namespace))
}

/// Turns an API error into the one-line error for `what` maar was doing.
pub fn api_error(context: &str, url: &str, what: &str, e: kube::Error) -> KubeError {
    match e {
        kube::Error::Api(s) if s.code == 401 => KubeError::Unauthorized {
            context: context.into(),
        },
        kube::Error::Api(s) if s.code == 403 => KubeError::Forbidden {
            context: context.into(),
            what: what.into(),
            message: s.message,
        },
        kube::Error::Api(s) => KubeError::Api {
            context: context.into(),
            what: what.into(),
            message: format!("{} ({})", s.message, s.code),
        },
        kube::Error::Auth(e) => KubeError::Unauthorized {
            context: format!("{context} ({e})"),
        },
        other => KubeError::Unreachable {
            context: context.into(),
            url: url.into(),
            why: root_cause(&other),
        },
    }
}

/// The innermost cause of an error, which names what really failed (connection
/// refused, certificate unknown).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// Connects and checks that maar can work: the server answers within the timeout, the
/// credentials are taken, maar may list nodes and pods.
pub async fn connect(opts: &ConnectOptions) -> Result<Connected, KubeError> {
    let (cfg, context) = config(opts).await?;
    let url = cfg.cluster_url.to_string();
    let client = client_of(cfg).map_err(|e| KubeError::Config(e.to_string()))?;
    let version = probe(&client, &context, &url, opts).await?;
    Ok(Connected {
        client,
        context,
        url,
        version,
        namespace: opts.namespace.clone(),
    })
}

/// Asks the server what maar needs, each within the timeout: its version, a node, a
/// pod (of the namespace, or of all). Returns the server's version.
pub async fn probe(
    client: &Client,
    context: &str,
    url: &str,
    opts: &ConnectOptions,
) -> Result<String, KubeError> {
    let secs = opts.timeout.as_secs().max(1);
    let late = || KubeError::Timeout {
        context: context.to_string(),
        url: url.to_string(),
        secs,
    };
    let version = tokio::time::timeout(opts.timeout, client.apiserver_version())
        .await
        .map_err(|_| late())?
        .map_err(|e| api_error(context, url, "read the server's version", e))?;
    let one = ListParams::default().limit(1);
    let nodes: Api<Node> = Api::all(client.clone());
    tokio::time::timeout(opts.timeout, nodes.list_metadata(&one))
        .await
        .map_err(|_| late())?
        .map_err(|e| api_error(context, url, "list nodes", e))?;
    let pods: Api<Pod> = match &opts.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    tokio::time::timeout(opts.timeout, pods.list_metadata(&one))
        .await
        .map_err(|_| late())?
        .map_err(|e| {
            let what = match &opts.namespace {
                Some(ns) => format!("list pods in namespace {ns}"),
                None => "list pods in all namespaces".to_string(),
            };
            api_error(context, url, &what, e)
        })?;
    Ok(version.git_version)
}

#[cfg(test)]
mod client_tests {
    use super::*;

    #[tokio::test]
    async fn the_client_is_built_for_a_server_and_a_proxy_is_refused_not_bypassed() {
        let url: http::Uri = "https://127.0.0.1:6443".parse().unwrap();
        let mut cfg = Config::new(url);
        cfg.accept_invalid_certs = true;
        let client = client_of(cfg.clone()).unwrap();
        assert_eq!(client.default_namespace(), "default");
        cfg.proxy_url = Some("http://proxy.example:3128".parse().unwrap());
        let e = client_of(cfg).err().expect("refused");
        assert!(
            matches!(e, kube::Error::ProxyProtocolDisabled { .. }),
            "{e}"
        );
        assert!(e.to_string().contains("proxy.example"), "{e}");
    }
}
