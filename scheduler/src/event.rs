//! The event log: every state change the core makes, in order, with time and reason.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Severity {
    Normal,
    Warning,
    Error,
}

impl Severity {
    /// Parses `Normal`, `Warning` or `Error` (any case).
    pub fn parse(s: &str) -> Option<Severity> {
        match s.to_ascii_lowercase().as_str() {
            "normal" => Some(Severity::Normal),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }

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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    /// Seconds since the start of the run.
    pub time: u64,
    pub severity: Severity,
    /// A CamelCase word, e.g. `Scheduled`, `Preempted`, `GpuUnhealthy`.
    pub reason: Cow<'static, str>,
    pub object: String,
    pub message: String,
    /// The cluster it happened in, where several are listed together; empty
    /// otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
}

impl Event {
    /// The object's kind (`job`, `node`, `gpu`, `quota`, `cluster`).
    pub fn kind(&self) -> &str {
        self.object.split('/').next().unwrap_or("")
    }
}
