//! The operations console: a ratatui view over a live simulated cluster.
//!
//! - [`app`]: state and key handling, pure and testable without a terminal. Actions go
//!   to the core as operator `Command`s; destructive ones wait for a confirmation.
//! - [`view`]: drawing from an owned snapshot; drawing never changes state and builds
//!   only the visible rows.
//! - [`run`]: the terminal, the event loop and the simulation thread.

pub mod app;
pub mod run;
pub mod theme;
pub mod view;

pub use app::App;
