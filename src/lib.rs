//! # maar
//!
//! The maar application: the command line, the console, the engine that owns the
//! cluster, the durable record, file loading and output. The scheduling itself lives
//! in the `maar-scheduler` crate and the simulated demo in `maar-demo`; this crate
//! feeds them and shows them.

pub mod actor;
pub mod agent_cli;
pub mod api;
pub mod args;
pub mod backend;
pub mod backends;
pub mod cli;
pub mod config;
pub mod console;
pub mod engine;
pub mod failure;
pub mod federation;
pub mod fuzzing;
pub mod kube_api;
pub mod load;
/// Local mode: the `maar-local` crate, a driver beside the demo and Kubernetes ones.
pub use maar_local as local;
pub mod live_cli;
pub mod logging;
pub mod metrics_server;
pub mod observe;
pub mod out;
pub mod output;
pub mod record;
pub mod replay_cli;
pub mod roles;
pub mod trace;
pub mod verbs_cli;
