//! # maar
//!
//! The maar application: the command line, file loading and output. The scheduling
//! itself lives in the `maar-scheduler` crate; this crate feeds it and prints it.

pub mod cli;
pub mod console;
pub mod load;
pub mod output;
pub mod replay_cli;
pub mod trace;
