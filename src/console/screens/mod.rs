//! One file per screen (gitui's components are the model): its rows, its own keys and
//! their hints, and its drawing together. The operator's keys on a screen come from
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

/// The current screen's rows (indices into the snapshot, or into `app.alerts`).
pub fn rows(app: &App) -> Vec<usize> {
    match app.screen {
        Screen::Overview => overview::rows(app),
        Screen::Nodes => nodes::rows(app),
        Screen::Jobs => jobs::rows(app),
        Screen::Quotas => quotas::rows(app),
        Screen::Events => events::rows(app),
        Screen::Alerts => (0..app.alerts.len()).collect(),
        Screen::Help => help::rows(app),
        Screen::Cost | Screen::Logs => Vec::new(),
    }
}

/// What row `i` of the current screen is, by name (the selection follows it).
pub fn row_key(app: &App, i: usize) -> String {
    match app.screen {
        Screen::Jobs | Screen::Overview => jobs::row_key(app, i),
        Screen::Nodes => nodes::row_key(app, i),
        Screen::Quotas => quotas::row_key(app, i),
        Screen::Events => events::row_key(app, i),
        Screen::Alerts => alerts::row_key(app, i),
        Screen::Cost | Screen::Logs | Screen::Help => String::new(),
    }
}

/// The current screen's own key (None: not one of its keys).
pub fn key(app: &mut App, k: KeyCode) -> Option<Then> {
    match app.screen {
        Screen::Overview => overview::key(app, k),
        Screen::Nodes => nodes::key(app, k),
        Screen::Jobs => jobs::key(app, k),
        Screen::Alerts => alerts::key(app, k),
        Screen::Quotas | Screen::Events | Screen::Cost | Screen::Logs | Screen::Help => None,
    }
}

/// Draws the current screen.
pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    match app.screen {
        Screen::Overview => overview::draw(f, app, area),
        Screen::Nodes => nodes::draw(f, app, area),
        Screen::Jobs => jobs::draw(f, app, area),
        Screen::Quotas => quotas::draw(f, app, area),
        Screen::Events => events::draw(f, app, area),
        Screen::Alerts => alerts::draw(f, app, area),
        Screen::Cost => cost::draw(f, app, area),
        Screen::Logs => logs::draw(f, app, area),
        Screen::Help => help::draw(f, app, area),
    }
}
