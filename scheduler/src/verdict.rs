//! A quota verdict as the cluster caches it between cycles (`admission.rs` computes
//! it; `cluster.rs` keeps it, keyed, and drops it when what it read changes).

use crate::model::*;

/// Key of a cached quota verdict: project, pool, and the request in every dimension.
pub(crate) type VerdictKey = (ProjectId, PoolId, [u64; 5]);

/// A quota verdict with the generations it was computed at.
#[derive(Clone, Debug)]
pub(crate) struct CachedVerdict {
    pub admission: u64,
    pub project: u64,
    pub ok: bool,
    pub borrowing: bool,
    pub message: Reason,
}
