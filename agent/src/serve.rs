//! The agent over HTTP (axum): `GET /metrics` (Prometheus text), `GET /healthz`,
//! `GET /sample` (the newest sample as JSON, what `maar local --agent` reads).
//!
//! Served by [`serve`] with bounds a network-facing process needs: a client must send
//! its request headers within [`Limits::header_read`], a connection lives at most
//! [`Limits::connection`], and at most [`Limits::connections`] are open at once (more
//! wait in the kernel's queue until one ends).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::reading::NodeSample;
use crate::{now_ms, Agent};

/// The newest sample, shared by the sampler and the server.
#[derive(Clone)]
pub struct Shared {
    pub sample: Arc<RwLock<NodeSample>>,
    /// How often the sampler runs (a sample older than three of these is stale).
    pub every: Duration,
}

async fn metrics(State(s): State<Shared>) -> impl IntoResponse {
    let text = {
        let sample = s.sample.read().expect("sample lock");
        crate::metrics::render(&sample, &[])
    };
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
}

async fn healthz(State(s): State<Shared>) -> impl IntoResponse {
    let age = now_ms().saturating_sub(s.sample.read().expect("sample lock").at_ms);
    if age <= 3 * s.every.as_millis() as u64 + 1000 {
        (StatusCode::OK, format!("ok: sampled {age} ms ago\n"))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("stale: last sample {age} ms ago\n"),
        )
    }
}

async fn sample(State(s): State<Shared>) -> impl IntoResponse {
    let body = serde_json::to_string(&*s.sample.read().expect("sample lock"))
        .expect("a sample serialises");
    ([(header::CONTENT_TYPE, "application/json")], body)
}

/// The agent's routes.
pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/sample", get(sample))
        .with_state(shared)
}

/// Samples `agent` every `every` on its own thread, into a [`Shared`] (the first
/// sample is taken before this returns).
pub fn start_sampler(mut agent: Agent, every: Duration) -> Shared {
    let first = agent.sample(now_ms());
    let shared = Shared {
        sample: Arc::new(RwLock::new(first)),
        every,
    };
    let s = shared.sample.clone();
    std::thread::Builder::new()
        .name("maar-agent-sampler".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let next = agent.sample(now_ms());
            *s.write().expect("sample lock") = next;
        })
        .expect("start the sampler thread");
    shared
}

/// How the agent's server bounds its clients.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Time to send the request headers (a slow-header client is dropped).
    pub header_read: Duration,
    /// Longest life of one connection.
    pub connection: Duration,
    /// Connections served at once.
    pub connections: usize,
    /// Connections served at once from one address: a client that holds its share
    /// open (slow headers, from one host) leaves the rest to the others (a kubelet's
    /// probes). More from it are closed at once.
    pub per_peer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(5),
            connection: Duration::from_secs(60),
            connections: 64,
            per_peer: 8,
        }
    }
}

/// The next connection, once one of `permits` is free (the permit is held for the
/// connection's life); None when the permits are closed. A failed accept (out of
/// descriptors or the like) is waited out, not returned.
pub async fn accept_capped(
    listener: &tokio::net::TcpListener,
    permits: &Arc<tokio::sync::Semaphore>,
) -> Option<(tokio::net::TcpStream, tokio::sync::OwnedSemaphorePermit)> {
    let permit = permits.clone().acquire_owned().await.ok()?;
    loop {
        match listener.accept().await {
            Ok((s, _)) => return Some((s, permit)),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Serves `app` on `listener` within `limits` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, app: Router, limits: Limits) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.connections.max(1)));
    let peers: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>> =
        Default::default();
    while let Some((stream, permit)) = accept_capped(&listener, &permits).await {
        let Ok(peer) = stream.peer_addr().map(|a| a.ip()) else {
            continue;
        };
        {
            let mut p = peers.lock().unwrap_or_else(|e| e.into_inner());
            let n = p.entry(peer).or_default();
            if *n >= limits.per_peer.max(1) {
                // Its share is in use: closed now, the permit free for others.
                continue;
            }
            *n += 1;
        }
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let peers = peers.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(limits.connection, conn).await;
            let mut p = peers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = p.get_mut(&peer) {
                *n -= 1;
                if *n == 0 {
                    p.remove(&peer);
                }
            }
            drop(permit);
        });
    }
}
