//! # maar-scheduler
//!
//! The scheduler core of maar: a pure, deterministic model of a heterogeneous GPU
//! cluster and the decisions made on it. No terminal, async runtime, Kubernetes client
//! or file I/O lives here; time comes in as a value, randomness from a seed.
//!
//! - [`model`]: nodes, GPUs, pools, projects, quotas, jobs.
//! - [`cluster`]: the state and the bookkeeping every change goes through.
//! - [`fit`]: can a replica go on a node, and exactly why not.
//! - [`schedule`]: the cycle — queue order, quota, placement, gang, preemption, backfill.
//! - [`explain`]: the full reason a job is Pending.
//! - [`command`]: operator commands.
//! - [`metrics`]: totals, fragmentation, cost and owned snapshots.
//! - [`manifest`], [`scenario`]: the YAML-facing types (parsed by the application).
//! - [`sim`]: the discrete-event simulation that drives the demo cluster.

pub mod cluster;
pub mod command;
pub mod event;
pub mod explain;
pub mod fit;
pub mod manifest;
pub mod metrics;
pub mod model;
pub mod quantity;
pub mod replay;
pub mod scenario;
pub mod schedule;
pub mod sim;
pub mod synthetic;

pub use cluster::{Cluster, ClusterError, SchedConfig};
pub use command::Command;
pub use event::{Event, Severity};
pub use explain::Explanation;
pub use model::*;
pub use scenario::Scenario;
pub use sim::Sim;
