//! # maar-scheduler
//!
//! The scheduler core of maar: a pure, deterministic model of a heterogeneous GPU
//! cluster and the decisions made on it. No terminal, async runtime, Kubernetes client,
//! clock or file I/O lives here; time comes in as an input, randomness from a seed.
//!
//! - [`input`]: the one door: [`Input`]s in (observations, commands with their actor,
//!   clock advances), events and [`Decision`]s out; the [`Core`] that owns the state.
//! - [`alerts`]: what needs an operator now, and their acknowledgements.
//! - [`model`]: nodes, GPUs, pools, projects, quotas, jobs.
//! - [`cluster`]: the state and the bookkeeping every change goes through.
//! - [`jobs`]: the job table (live and recently ended jobs).
//! - [`fit`]: can a replica go on a node, and exactly why not.
//! - [`schedule`]: the cycle — queue order, quota, placement, gang, preemption, backfill.
//! - [`explain`]: the full reason a job is Pending.
//! - [`command`]: operator commands.
//! - [`verbs`]: each operator command declared once (name, arguments, doc, role, keys),
//!   which every face follows.
//! - [`metrics`]: totals, fragmentation, cost and owned snapshots.
//! - [`checkpoint`]: the state as plain data, and back.
//! - [`limits`]: the documented bounds on every count, rate, quantity and duration.
//! - [`manifest`]: the YAML-facing job types (parsed by the application).
//! - [`replay`]: trace replay and the placement policies; [`bound`]: what no placement
//!   of a replay can beat (an LP relaxation).
//! - [`whatif`]: what an operator command would do, computed on a copy.
//! - [`forecast`]: when Pending jobs will start (a forward run on a copy), and the
//!   runtimes of ended jobs that predict it.

pub mod admission;
pub mod alertbook;
pub mod alerts;
pub mod bound;
pub mod checkpoint;
pub mod cluster;
pub mod command;
pub mod dispatch;
pub mod event;
pub mod explain;
pub mod fit;
pub mod forecast;
pub mod fxhash;
pub mod input;
pub mod interpod;
pub mod jobs;
pub mod kit;
pub mod limits;
pub mod manifest;
pub mod metrics;
pub mod model;
pub mod nodes;
pub mod placement;
pub(crate) mod preempt;
pub mod quantity;
pub(crate) mod queue;
pub mod replay;
pub(crate) mod reserve;
pub mod rules;
pub mod runtimes;
pub mod schedule;
pub(crate) mod shape;
pub(crate) mod spread;
#[cfg(test)]
mod testkit;
pub(crate) mod topology;
pub mod verbs;
pub mod verdict;
pub mod whatif;
pub(crate) mod written;

pub use checkpoint::ClusterState;
pub use cluster::{Cluster, ClusterError, SchedConfig};
pub use command::{parse_label_args, Command, Role};
pub use event::{Event, Severity};
pub use explain::Explanation;
pub use input::{Actor, Binding, Core, Decision, Driver, Input, JobOutcome, Observation, Output};
pub use model::*;
