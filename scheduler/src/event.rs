//! The event log: every state change the core makes, in order, with time and reason.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Severity {
    Normal,
    Warning,
    Error,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Normal => "Normal",
            Severity::Warning => "Warning",
            Severity::Error => "Error",
        }
    }
}

/// One event. `object` is `kind/name`, e.g. `job/ml-prod/gpt`, `node/a100-01`,
/// `gpu/a100-01/3`, `quota/ml-prod/training-gpu`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    pub seq: u64,
    /// Seconds since the start of the run.
    pub time: u64,
    pub severity: Severity,
    pub reason: &'static str,
    pub object: String,
    pub message: String,
}

impl Event {
    /// The object's kind (`job`, `node`, `gpu`, `quota`, `cluster`).
    pub fn kind(&self) -> &str {
        self.object.split('/').next().unwrap_or("")
    }
}
