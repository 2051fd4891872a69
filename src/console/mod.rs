//! The operations console: a ratatui view over a live simulated cluster.
//!
//! - [`state`]: what the console shows and where the user is (`App`, `Mode`).
//! - [`app`]: its behaviour, pure and testable without a terminal: the console's own
//!   keys, the `:` line and the operator's keys read from their declarations
//!   (`maar_scheduler::verbs`), acting through the engine (previewed, confirmed).
//! - [`screens`]: one file per screen: its rows, its own keys and hints, its drawing;
//!   [`table`] the table they draw with, [`rows`] rows computed once per snapshot.
//! - [`screen`]: the screens by name, and what a screen's key asks of the app.
//! - [`view`]: the frame around the screen (header, tabs, bottom line, popups);
//!   drawing never changes state and builds only the visible rows.
//! - [`run`]: the terminal, the event loop and the simulation thread.

pub mod app;
pub mod rows;
pub mod run;
pub mod screen;
pub mod screens;
pub mod state;
pub mod table;
pub mod theme;
pub mod view;

pub use app::App;
