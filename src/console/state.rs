//! The console's state: what it shows and where the user is. Its behaviour (keys, the
//! `:` line, acting through the engine) is in `app.rs`; the screens (`screens/`) read
//! and change it without reaching back into `app.rs`.

use std::sync::Arc;

use maar_scheduler::alerts::AlertView;
use maar_scheduler::metrics::Snapshot;
use maar_scheduler::whatif::Preview;
use maar_scheduler::{Actor, Command, Explanation};

use super::screen::Screen;
use crate::engine::{EngineHandle, Past, Status};

/// What the bottom line is doing.
#[derive(Clone, Debug)]
pub enum Mode {
    Normal,
    /// `:` typed, collecting a command.
    Command(String),
    /// `/` typed, collecting a filter.
    Filter(String),
    /// An operator action waiting for `y`, with what it would do (scrolled this far).
    Confirm(Command, Box<Preview>, u16),
    /// The explanation of a job, shown over the screen (scrolled this far).
    Explain(Box<Explanation>, u16),
}

/// A cluster of this console when it shows several (`maar demo --clusters 2`): its
/// name and its engine.
pub use crate::federation::Site;

/// The console's state. It holds a handle on the engine and the last view it
/// published; it never touches the core.
pub struct App {
    pub engine: EngineHandle,
    /// Who acts from this console.
    pub actor: Actor,
    pub snapshot: Arc<Snapshot>,
    /// The engine's status with the snapshot.
    pub status: Status,
    /// Version of the view shown.
    pub version: u64,
    pub screen: Screen,
    pub mode: Mode,
    pub selected: usize,
    pub filter: String,
    /// Node whose GPUs are shown.
    pub expanded: Option<String>,
    /// Where the Logs screen's log is scrolled to (tui-logger's page mode), and whether
    /// it is scrolled back from the newest lines.
    pub log_view: tui_logger::TuiWidgetState,
    pub log_back: bool,
    /// Rows the last drawn table showed (PgUp and PgDn move by a page of them).
    pub page: std::cell::Cell<usize>,
    pub paused: bool,
    /// Simulated seconds per real second.
    pub speed: f64,
    pub message: String,
    pub quit: bool,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// Styles to draw with.
    pub theme: super::theme::Theme,
    /// Recent utilisation per GPU (node, index), oldest first, for sparklines.
    pub history: std::collections::HashMap<(String, u32), std::collections::VecDeque<u8>>,
    /// Rows of the current screen (indices into the snapshot), computed once per
    /// snapshot, filter or screen change — never per frame.
    pub rows: Vec<usize>,
    /// Alerts listed on the Alerts screen: the open ones (with `A`, also the
    /// acknowledged and the resolved), through the filter.
    pub alerts: Vec<AlertView>,
    /// Show acknowledged and resolved alerts too.
    pub alerts_all: bool,
    /// GPUs by model (the overview), computed once per snapshot.
    pub models: Vec<super::rows::ModelRow>,
    /// The screen `?` was pressed on (its keys are listed first).
    pub help_for: Screen,
    /// Test hook: the event loop should block this many seconds (`:debug-stall`).
    pub stall: Option<u64>,
    /// The simulation was paused for an open question and resumes after it.
    pub resume_after: bool,
    /// Looking at the cluster's past (time travel): what is shown instead of the live
    /// view. Actions are off while it is set.
    pub past: Option<Past>,
    /// The live cluster's time (the newest view adopted).
    pub live_s: u64,
    /// The role this console acts with, and why (the engine checks every command too).
    pub grant: crate::roles::Grant,
    /// Every cluster of this console when it shows several (empty for one); `engine`
    /// is the one at `site`: the screens show it and actions go to it.
    pub sites: Vec<Site>,
    pub site: usize,
    /// Each cluster's totals (the overview, with several clusters), and the view
    /// versions they were computed from.
    pub site_rows: Vec<super::rows::SiteRow>,
    pub site_versions: Vec<u64>,
    /// Each cluster's GPUs by model, from the view of `site_versions`.
    pub site_models: Vec<Vec<super::rows::ModelRow>>,
    /// With several clusters, the explanation shown ends with how the job would fare
    /// in each of the others: "site-b: starts now on l40s-02, 1.20/GPU-hour".
    pub elsewhere: Vec<String>,
    /// The shown cluster's own view (`snapshot` adds the other clusters' jobs and
    /// nodes to it when `all_sites`).
    pub site_snapshot: Arc<Snapshot>,
    /// Every cluster's rows (`:cluster all`, or `C` past the last): the Jobs and Nodes
    /// screens list all clusters' jobs and nodes with a CLUSTER column (the filter
    /// matches it); acting on a row goes to its cluster, which becomes the one shown
    /// (the header, and the screens of one cluster: quotas, events, alerts, cost).
    pub all_sites: bool,
    /// When the rows of all clusters were last put together, and whether a change
    /// waits for the next time (at most once a second: 3 x 50,000 jobs take a few
    /// hundred milliseconds).
    pub merged_at: Option<std::time::Instant>,
    pub merge_due: bool,
    /// Clusters that did not answer at the start, tried again until they join; how
    /// many joined so far; whether they join as a viewer's; those still waiting.
    pub joining: Option<Arc<crate::federation::Joining>>,
    pub joined_seen: usize,
    pub joined_read_only: bool,
    pub waiting: Vec<(String, String)>,
}
