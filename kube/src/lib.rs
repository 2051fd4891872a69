//! maar's Kubernetes backend.
//!
//! - [`connect`]: the kubeconfig's context (or in-cluster), a connect timeout, and a
//!   probe so that an unreachable server, expired credentials or missing RBAC is one
//!   line naming the context and the fix.
//! - [`map`]: Nodes and Pods as maar's model (pure; tested on recorded objects).
//! - [`world`]: the async side: watchers (nodes, pods, namespaces) whose events reach
//!   the driver through a channel, and the writes maar makes (bind with the GPU
//!   indices annotated, `PodScheduled=False` with maar's explanation and a
//!   `FailedScheduling` event, delete a preempted pod).
//! - [`lease`]: one maar schedules at a time (a coordination.k8s.io Lease, taken over
//!   when its holder stops renewing it); another watches only.
//! - [`driver`]: [`driver::KubeDriver`], a `Driver` of the engine like the simulation
//!   and local mode: what the watch sees becomes observations, the core's decisions
//!   become writes, their answers come back as `Bound` / `BindFailed`.
//! - [`backend`]: `maar kube` as the application runs it ([`Kube`], a
//!   `kit::Backend`): its options, its state file's name, opening the cluster.

pub mod backend;
pub mod connect;
pub mod driver;
pub mod lease;
pub mod map;
pub mod ops;
pub mod world;

pub use backend::{Kube, KubeArgs};
pub use connect::{connect, ConnectOptions, Connected, KubeError};
pub use driver::KubeDriver;

/// The field manager maar's writes name (in `managedFields`, as kube-scheduler's name
/// its own): two maars' and other controllers' writes are told apart.
pub const FIELD_MANAGER: &str = "maar";

/// Patch parameters of maar's writes ([`FIELD_MANAGER`]).
pub fn patch_params() -> kube::api::PatchParams {
    kube::api::PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// Create and replace parameters of maar's writes ([`FIELD_MANAGER`]).
pub fn post_params() -> kube::api::PostParams {
    kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}
