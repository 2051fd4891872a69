//! Headless maar's log: tracing to stderr, plain lines or JSON objects (one a line),
//! at info and above; the engine's Warning and Error events are in it too (as
//! `maar::event`), so an operator reads maar's troubles where they read any daemon's.

use clap::ValueEnum;
use maar_scheduler::{Event, Severity};

/// How the log is written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `2026-12-02T05:00:00.000Z  WARN maar::kube: message`
    #[default]
    Plain,
    /// One JSON object a line (`timestamp`, `level`, `target`, `fields.message`).
    Json,
}

/// Sends tracing's events at info and above to stderr (once; later calls do
/// nothing). The console has a log of its own (the Logs screen).
pub fn to_stderr(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::filter::LevelFilter::INFO;
    let plain = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let layer = match format {
        LogFormat::Plain => plain.with_filter(filter).boxed(),
        LogFormat::Json => plain.json().with_filter(filter).boxed(),
    };
    // Also as a global filter: the HTTP/2 and Kubernetes clients' debug and trace
    // callsites (every frame) are then off at the callsite, not built and dropped.
    let _ = tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(layer).with(filter),
    );
}

/// An event of the core, logged by its severity (Normal ones at debug: a burst of
/// binds would be thousands of lines).
pub fn event(e: &Event) {
    macro_rules! log {
        ($level:expr) => {
            tracing::event!(
                target: "maar::event",
                $level,
                reason = %e.reason,
                object = %e.object,
                "{}",
                e.message
            )
        };
    }
    match e.severity {
        Severity::Error => log!(tracing::Level::ERROR),
        Severity::Warning => log!(tracing::Level::WARN),
        Severity::Normal => log!(tracing::Level::DEBUG),
    }
}
