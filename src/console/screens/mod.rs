//! One file per screen (gitui's components are the model): its rows, its own keys and
//! their hints, and its drawing together, each file with the same five items (`rows`,
//! `row_key`, `key`, `draw`, `KEYS`), dispatched from the one list of screens
//! (`screen.rs`). The operator's keys on a screen come from
//! the verbs ([`maar_scheduler::verbs`]); the console's own keys (moving, filtering,
//! time travel) from `app.rs`. A screen reads and changes the console's state
//! (`state.rs`) and asks for more through [`Then`], never reaching back into `app.rs`
//! or this dispatch.

use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::Frame;

use super::screen::Screen;
pub use super::screen::Then;
use super::state::App;

pub mod alerts;
pub mod cost;
pub mod events;
pub mod help;
pub mod jobs;
pub mod logs;
pub mod nodes;
pub mod overview;
pub mod quotas;

/// What a screen without rows to select or keys of its own has (its file re-exports
/// what it lacks from here: `pub use super::still::{key, row_key, rows};`).
pub mod still {
    use super::{App, KeyCode, Then};

    /// No rows to select.
    pub fn rows(_app: &App) -> Vec<usize> {
        Vec::new()
    }

    /// No row followed by name.
    pub fn row_key(_app: &App, _i: usize) -> String {
        String::new()
    }

    /// No key of its own.
    pub fn key(_app: &mut App, _k: KeyCode) -> Option<Then> {
        None
    }
}

/// The dispatch to each screen's file, from the one list (`screen.rs`).
macro_rules! dispatch {
    ($($(#[$doc:meta])* $variant:ident $file:ident,)*) => {
        /// The current screen's rows (indices into the snapshot, or into `app.alerts`).
        pub fn rows(app: &App) -> Vec<usize> {
            match app.screen {
                $(Screen::$variant => $file::rows(app),)*
            }
        }

        /// What row `i` of the current screen is, by name (the selection follows it).
        pub fn row_key(app: &App, i: usize) -> String {
            match app.screen {
                $(Screen::$variant => $file::row_key(app, i),)*
            }
        }

        /// The current screen's own key (None: not one of its keys).
        pub fn key(app: &mut App, k: KeyCode) -> Option<Then> {
            match app.screen {
                $(Screen::$variant => $file::key(app, k),)*
            }
        }

        /// Draws the current screen.
        pub fn draw(f: &mut Frame, app: &App, area: Rect) {
            match app.screen {
                $(Screen::$variant => $file::draw(f, app, area),)*
            }
        }

        /// A screen's own keys and what they do, for the help.
        pub fn keys(s: Screen) -> &'static [(&'static str, &'static str)] {
            match s {
                $(Screen::$variant => $file::KEYS,)*
            }
        }
    };
}
super::screen::screen_list!(dispatch);
