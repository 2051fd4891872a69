//! The alerts as data: an alert as faces show it, its acknowledgement, and the book
//! of acknowledgements the cluster keeps (in checkpoints). What raises an alert is in
//! `alerts.rs`, above the cluster; the book lives below it.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

/// Who acknowledged an alert, and when (cluster time).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertAck {
    pub by: String,
    pub at: u64,
    /// The alert as it was acknowledged (shown once it resolves).
    pub severity: String,
    pub object: String,
    pub message: String,
}

/// An alert as faces show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertView {
    /// Stable while the condition lasts: `notready/NODE`, `disk/NODE`, `gpu/NODE/N`,
    /// `oom/PROJECT/JOB`, `pending/PROJECT/JOB`.
    pub key: String,
    /// `critical` or `warning`.
    pub severity: String,
    /// What it is about: `node/NAME`, `gpu/NODE/N` or `job/PROJECT/NAME`.
    pub object: String,
    pub message: String,
    /// When it started, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_s: Option<u64>,
    /// Occurrences folded into it (OOM kills of one job).
    pub count: u32,
    /// `open`, `acknowledged` or `resolved`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<u64>,
    /// The cluster it is in, where several are listed together; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
}

/// The acknowledgements, and the acknowledged alerts that resolved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AlertBook {
    pub acks: BTreeMap<String, AlertAck>,
    pub resolved: VecDeque<AlertView>,
    /// Cluster time of the last resolution check.
    #[serde(default)]
    pub checked: u64,
}
