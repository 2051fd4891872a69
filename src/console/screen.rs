//! The console's screens, by name (`:SCREEN`, the tabs, the keys a verb declares for
//! a screen).

/// The screens, in Tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screen {
    /// Everything at once: GPUs by model, the Pending queue, alerts, events.
    Overview,
    Nodes,
    Jobs,
    Quotas,
    Events,
    Alerts,
    Cost,
    Logs,
    Help,
}

impl Screen {
    pub const ALL: [Screen; 9] = [
        Screen::Overview,
        Screen::Nodes,
        Screen::Jobs,
        Screen::Quotas,
        Screen::Events,
        Screen::Alerts,
        Screen::Cost,
        Screen::Logs,
        Screen::Help,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Screen::Overview => "overview",
            Screen::Nodes => "nodes",
            Screen::Jobs => "jobs",
            Screen::Quotas => "quotas",
            Screen::Events => "events",
            Screen::Alerts => "alerts",
            Screen::Cost => "cost",
            Screen::Logs => "logs",
            Screen::Help => "help",
        }
    }
}

/// What a screen's key asks of the console beyond the screen's own state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    /// Handled.
    Done,
    /// The rows changed (a toggle): compute them again.
    Recompute,
    /// Go to what an object names (`job/NAME`, `node/NAME`, `gpu/NODE/N`).
    Follow(String),
}
