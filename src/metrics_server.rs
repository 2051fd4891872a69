//! The HTTP side of `--metrics ADDR`: `/metrics` (the [`Observe`] families encoded),
//! `/healthz` and `/livez` (the engine thread answers), `/readyz` (the same; the
//! server starts only after the backend's first lists were read), on a thread of its
//! own, bounded as the agent's server is.

use std::sync::Arc;
use std::time::Duration;

use crate::observe::Observe;

/// How long a probe waits for the engine.
const PROBE_WITHIN: Duration = Duration::from_secs(3);

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` for `handle`'s engine,
/// on a thread of its own, bounded as the agent's server is.
pub fn serve(
    listener: std::net::TcpListener,
    observe: Arc<Observe>,
    handle: crate::engine::EngineHandle,
) -> std::io::Result<()> {
    use axum::http::{header, StatusCode};
    use axum::routing::get;
    listener.set_nonblocking(true)?;
    // One answer for all three probes: the server starts only once the backend's
    // first lists were read, so an engine that answers is also ready.
    let probe = move || {
        let handle = handle.clone();
        async move {
            // The engine thread answers (a question through its channel), within
            // a probe's usual timeout.
            let asked = tokio::task::spawn_blocking(move || handle.alive_within(PROBE_WITHIN));
            match asked.await {
                Ok(Ok(v)) if v.status.fatal.is_none() => {
                    let role = if v.status.leading {
                        "leading"
                    } else {
                        "standing by"
                    };
                    (StatusCode::OK, format!("ok: {} {role}\n", v.status.kind))
                }
                Ok(Ok(v)) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("stopped: {}\n", v.status.fatal.clone().unwrap_or_default()),
                ),
                Ok(Err(e)) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the engine did not answer: {e}\n"),
                ),
                Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
            }
        }
    };
    let m = observe.clone();
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = m.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        m.encode(),
                    )
                }
            }),
        )
        .route("/healthz", get(probe.clone()))
        .route("/livez", get(probe.clone()))
        .route("/readyz", get(probe));
    std::thread::Builder::new()
        .name("maar-metrics".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(target: "maar", "metrics server: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => {
                        maar_agent::serve::serve(l, app, maar_agent::serve::Limits::default()).await
                    }
                    Err(e) => tracing::error!(target: "maar", "metrics server: {e}"),
                }
            });
        })?;
    Ok(())
}
