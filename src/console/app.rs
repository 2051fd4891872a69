//! Console state and key handling.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use maar_scheduler::alerts::AlertView;
use maar_scheduler::metrics::Snapshot;
use maar_scheduler::quantity::fmt_duration;
use maar_scheduler::whatif::Preview;
use maar_scheduler::{Actor, Command, Explanation, PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MEDIUM};

use maar_scheduler::verbs::{self, Build, Fill, Key, Verb};

use crate::engine::{EngineHandle, Past, Refusal, Status, View};

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
    pub models: Vec<super::view::ModelRow>,
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
}

/// How far `[` and `]` step through history, seconds; `{` and `}` step an hour.
pub const STEP_S: u64 = 300;

/// A row key per screen: what the selection points at.
fn priority_step(p: i32, up: bool) -> i32 {
    match (p, up) {
        (p, true) if p < PRIORITY_LOW => PRIORITY_LOW,
        (p, true) if p < PRIORITY_MEDIUM => PRIORITY_MEDIUM,
        (_, true) => PRIORITY_HIGH,
        (p, false) if p > PRIORITY_MEDIUM => PRIORITY_MEDIUM,
        (_, false) => PRIORITY_LOW,
    }
}

impl App {
    pub fn new(engine: EngineHandle) -> App {
        let view = engine.sync().unwrap_or_else(|_| engine.view());
        let actor = crate::actor::current();
        App {
            grant: engine.grant(&actor).unwrap_or(crate::roles::Grant {
                role: maar_scheduler::Role::Viewer,
                why: "the engine did not say".into(),
            }),
            engine,
            actor,
            snapshot: view.snapshot.clone(),
            status: view.status.clone(),
            version: view.version,
            screen: Screen::Overview,
            mode: Mode::Normal,
            selected: 0,
            filter: String::new(),
            expanded: None,
            paused: view.status.paused,
            speed: view.status.speed,
            message: "? for help, : for commands, q to quit".into(),
            quit: false,
            dirty: true,
            theme: super::theme::choose(None)
                .unwrap_or_else(|_| super::theme::built_in("dark").expect("dark")),
            history: std::collections::HashMap::new(),
            rows: Vec::new(),
            alerts: Vec::new(),
            alerts_all: false,
            models: Vec::new(),
            help_for: Screen::Overview,
            stall: None,
            resume_after: false,
            past: None,
            live_s: view.snapshot.time_s,
        }
        .with_rows()
    }

    fn with_rows(mut self) -> App {
        self.record_history();
        self.recompute();
        self
    }

    /// Recomputes the current screen's rows and the alerts.
    pub fn recompute(&mut self) {
        self.rows = match self.screen {
            Screen::Overview => self.pending_rows(),
            Screen::Nodes => self.node_rows(),
            Screen::Jobs => self.job_rows(),
            Screen::Quotas => self.request_rows(),
            Screen::Events => self.event_rows(),
            Screen::Alerts => (0..self.alert_rows().len()).collect(),
            Screen::Help => (0..super::view::help_rows(self).len()).collect(),
            _ => Vec::new(),
        };
        self.alerts = self.alert_rows();
        self.models = if self.screen == Screen::Overview {
            super::view::model_rows(&self.snapshot)
        } else {
            Vec::new()
        };
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    /// Shows a view the engine published.
    pub fn adopt(&mut self, v: Arc<View>) {
        if v.version == self.version {
            return;
        }
        self.live_s = v.snapshot.time_s;
        if self.past.is_some() {
            // The past stays on screen; only the engine's status follows.
            self.version = v.version;
            self.status = v.status.clone();
            self.paused = v.status.paused;
            self.speed = v.status.speed;
            self.dirty = true;
            return;
        }
        // The selection follows what it points at (the list may reorder).
        let keep = self.selected_key();
        let moved = v.snapshot.time_s != self.snapshot.time_s;
        self.version = v.version;
        self.snapshot = v.snapshot.clone();
        self.status = v.status.clone();
        self.paused = v.status.paused;
        self.speed = v.status.speed;
        if moved {
            self.record_history();
        }
        self.recompute();
        if let Some(k) = keep {
            if let Some(at) = (0..self.rows.len()).find(|&i| self.row_key(self.rows[i]) == k) {
                self.selected = at;
            }
        }
        self.dirty = true;
    }

    /// What row `i` (an index into the snapshot) of the current screen is, by name.
    fn row_key(&self, i: usize) -> String {
        let s = &self.snapshot;
        match self.screen {
            Screen::Jobs | Screen::Overview => s
                .jobs
                .get(i)
                .map(|j| format!("{}/{}", j.project, j.name))
                .unwrap_or_default(),
            Screen::Nodes => s.nodes.get(i).map(|n| n.name.clone()).unwrap_or_default(),
            Screen::Quotas => s
                .quota_requests
                .get(i)
                .map(|r| r.id.to_string())
                .unwrap_or_default(),
            Screen::Events => s
                .events
                .get(i)
                .map(|e| e.seq.to_string())
                .unwrap_or_default(),
            Screen::Alerts => self
                .alerts
                .get(i)
                .map(|a| a.key.clone())
                .unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// The selected row, by name.
    fn selected_key(&self) -> Option<String> {
        self.rows.get(self.selected).map(|&i| self.row_key(i))
    }

    /// Waits for the engine to catch up and shows its fresh view.
    pub fn refresh(&mut self) {
        match self.engine.sync() {
            Ok(v) => self.adopt(v),
            Err(e) => self.message = format!("engine: {e}"),
        }
    }

    /// The periodic refresh: adopts the newest published view, if it is new (an idle
    /// console neither copies state nor redraws).
    pub fn refresh_if_changed(&mut self) {
        let v = self.engine.view();
        self.adopt(v);
    }

    /// Keeps the last samples of each GPU's utilisation (for the sparklines).
    fn record_history(&mut self) {
        const KEEP: usize = 30;
        for n in &self.snapshot.nodes {
            for g in &n.gpus {
                let h = self.history.entry((n.name.clone(), g.index)).or_default();
                h.push_back(g.util_pct);
                while h.len() > KEEP {
                    h.pop_front();
                }
            }
        }
    }

    /// Jobs as listed on the Jobs screen: Pending in queue order, then Restarting,
    /// Running, and the recently ended ones (newest first, so they can be requeued).
    pub fn job_rows(&self) -> Vec<usize> {
        let f = self.filter.to_lowercase();
        let mut v: Vec<usize> = (0..self.snapshot.jobs.len())
            .filter(|&i| {
                let j = &self.snapshot.jobs[i];
                f.is_empty()
                    || format!(
                        "{}/{} {} {} {} {} {} {}",
                        j.project,
                        j.name,
                        j.phase,
                        j.pool,
                        j.priority,
                        j.kind,
                        j.request,
                        j.reasons.join(" ")
                    )
                    .to_lowercase()
                    .contains(&f)
            })
            .collect();
        let rank = |p: &str| match p {
            "Pending" => 0,
            "Restarting" => 1,
            "Running" => 2,
            _ => 3,
        };
        v.sort_by_key(|&i| {
            let j = &self.snapshot.jobs[i];
            let r = rank(&j.phase);
            let order = match r {
                0 => j.queue_position.unwrap_or(u32::MAX) as i64,
                3 => -(i as i64),
                _ => -(j.wait_s as i64),
            };
            (r, order, i)
        });
        v
    }

    /// Pending jobs in queue order (the overview's queue), through the filter.
    pub fn pending_rows(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .job_rows()
            .into_iter()
            .filter(|&i| self.snapshot.jobs[i].phase == "Pending")
            .collect();
        v.sort_by_key(|&i| (self.snapshot.jobs[i].queue_position.unwrap_or(u32::MAX), i));
        v
    }

    pub fn node_rows(&self) -> Vec<usize> {
        let f = self.filter.to_lowercase();
        (0..self.snapshot.nodes.len())
            .filter(|&i| {
                let n = &self.snapshot.nodes[i];
                f.is_empty()
                    || format!(
                        "{} {} {} {} {} {}",
                        n.name,
                        n.pool,
                        n.role,
                        n.condition,
                        if n.cordoned { "cordoned" } else { "" },
                        n.gpus.first().map(|g| g.model.as_str()).unwrap_or("")
                    )
                    .to_lowercase()
                    .contains(&f)
            })
            .collect()
    }

    /// Events, newest first, through the filter: words `severity:warning`,
    /// `kind:job|node|gpu|quota`, `object:TEXT` match those fields; other words must
    /// appear somewhere in the event. All words must match.
    pub fn event_rows(&self) -> Vec<usize> {
        let f = self.filter.to_lowercase();
        let words: Vec<&str> = f.split_whitespace().collect();
        (0..self.snapshot.events.len())
            .rev()
            .filter(|&i| {
                let e = &self.snapshot.events[i];
                words.iter().all(|w| match w.split_once(':') {
                    Some(("severity" | "sev", v)) => {
                        e.severity.name().to_lowercase().starts_with(v)
                    }
                    Some(("kind", v)) => e.kind() == v,
                    Some(("object" | "obj", v)) => e.object.to_lowercase().contains(v),
                    _ => format!(
                        "{} {} {} {}",
                        e.severity.name(),
                        e.reason,
                        e.object,
                        e.message
                    )
                    .to_lowercase()
                    .contains(w),
                })
            })
            .collect()
    }

    /// The alerts the Alerts screen lists: open ones first (critical first), then with
    /// `A` the acknowledged and the resolved; through the filter.
    pub fn alert_rows(&self) -> Vec<AlertView> {
        let f = self.filter.to_lowercase();
        let s = &self.snapshot;
        s.alerts
            .iter()
            .filter(|a| self.alerts_all || a.state == "open")
            .chain(s.resolved_alerts.iter().filter(|_| self.alerts_all))
            .filter(|a| {
                f.is_empty()
                    || format!("{} {} {} {}", a.severity, a.state, a.key, a.message)
                        .to_lowercase()
                        .contains(&f)
            })
            .cloned()
            .collect()
    }

    /// Open alerts (the header's count).
    pub fn open_alerts(&self) -> usize {
        self.snapshot
            .alerts
            .iter()
            .filter(|a| a.state == "open")
            .count()
    }

    /// Goes to what an alert is about: its job on the Jobs screen, its node (GPUs
    /// shown) on the Nodes screen.
    fn follow(&mut self, object: &str) {
        let mut parts = object.splitn(2, '/');
        let (kind, rest) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let (screen, key) = match kind {
            "job" => (Screen::Jobs, rest.to_string()),
            "node" => (Screen::Nodes, rest.to_string()),
            "gpu" => (
                Screen::Nodes,
                rest.rsplit_once('/')
                    .map(|x| x.0)
                    .unwrap_or(rest)
                    .to_string(),
            ),
            _ => return,
        };
        self.switch(screen);
        match (0..self.rows.len()).find(|&i| self.row_key(self.rows[i]) == key) {
            Some(at) => {
                self.selected = at;
                if screen == Screen::Nodes {
                    self.expanded = Some(key.clone());
                }
                self.message = format!("{object} (from the alert)");
            }
            None => self.message = format!("{object} is no longer listed"),
        }
    }

    /// Pending quota requests (Quotas screen selection).
    pub fn request_rows(&self) -> Vec<usize> {
        (0..self.snapshot.quota_requests.len())
            .filter(|&i| self.snapshot.quota_requests[i].status == "Pending")
            .collect()
    }

    fn row_count(&self) -> usize {
        self.rows.len()
    }

    fn selected_job(&self) -> Option<String> {
        if !matches!(self.screen, Screen::Jobs | Screen::Overview) {
            return None;
        }
        let j = &self.snapshot.jobs[*self.rows.get(self.selected)?];
        Some(format!("{}/{}", j.project, j.name))
    }

    fn selected_node(&self) -> Option<String> {
        if self.screen != Screen::Nodes {
            return None;
        }
        Some(
            self.snapshot.nodes[*self.rows.get(self.selected)?]
                .name
                .clone(),
        )
    }

    /// Applies a command through the engine, showing its result once it is recorded.
    pub fn apply(&mut self, cmd: Command) {
        let r = self.engine.apply(self.actor.clone(), cmd);
        self.answered(r);
    }

    /// Shows the engine's answer to a command.
    fn answered(&mut self, r: Result<crate::engine::Ack, Refusal>) {
        self.message = match r {
            Ok(ack) => ack.message,
            Err(Refusal::Refused { why, .. }) => format!("refused: {why}"),
            Err(e) => e.to_string(),
        };
        self.refresh();
    }

    /// Pauses or resumes; a pause shows the state at that moment, which is what the
    /// next action acts on.
    pub fn set_paused(&mut self, paused: bool) {
        match self.engine.set_paused(paused) {
            Ok(v) => {
                let done = v.status.paused;
                self.adopt(v);
                self.paused = done;
                self.message = match (paused, done) {
                    (true, true) => "simulation paused".into(),
                    (true, false) => format!(
                        "a {} cluster runs in real time: it does not pause",
                        self.status.kind
                    ),
                    _ => "simulation running".into(),
                };
            }
            Err(e) => self.message = format!("engine: {e}"),
        }
    }

    fn set_speed(&mut self, x: f64) {
        if self.status.kind != "demo" {
            self.message = format!("a {} cluster runs in real time", self.status.kind);
            return;
        }
        self.speed = x;
        self.engine.set_speed(x);
        self.message = format!("speed {x}x");
    }

    /// Shows the cluster as it was at `t` (clamped to its start); at or after the
    /// present, returns to it.
    pub fn travel(&mut self, t: u64) {
        if t >= self.live_s {
            let was_past = self.past.is_some();
            self.now();
            if t > self.live_s || !was_past {
                self.message = format!(
                    "{} is not in the past (the cluster is at {}): showing now",
                    fmt_duration(t),
                    fmt_duration(self.live_s)
                );
            }
            return;
        }
        let keep = self.selected_key();
        match self.engine.at(t) {
            Ok(p) => {
                self.message = match &p.note {
                    Some(n) => format!("{n}; :now returns; actions are off"),
                    None => format!(
                        "the cluster at {} ({} ago): [ ] step 5m, {{ }} 1h, :at T jumps, :now returns; actions are off",
                        fmt_duration(p.at),
                        fmt_duration(p.now.saturating_sub(p.at))
                    ),
                };
                self.snapshot = p.snapshot.clone();
                self.past = Some(p);
                self.recompute();
                self.reselect(keep);
            }
            Err(e) => self.message = format!("cannot go back to {}: {e}", fmt_duration(t)),
        }
    }

    /// Back to the live cluster.
    pub fn now(&mut self) {
        if self.past.take().is_some() {
            self.version = 0;
            self.refresh();
            self.message = "back to now".into();
        }
    }

    /// The cluster time shown.
    pub fn shown_s(&self) -> u64 {
        self.past.as_ref().map(|p| p.at).unwrap_or(self.live_s)
    }

    fn reselect(&mut self, keep: Option<String>) {
        if let Some(k) = keep {
            if let Some(at) = (0..self.rows.len()).find(|&i| self.row_key(self.rows[i]) == k) {
                self.selected = at;
            }
        }
    }

    /// Shows what an operator action would do and waits for `y`. A running demo
    /// pauses while the question is open, so the preview is of the moment acted on.
    /// Looking at the past, actions are off.
    fn act(&mut self, cmd: Command) {
        if cmd.required_role() > self.grant.role && self.past.is_none() {
            // No preview: the engine refuses it, says why and records the refusal.
            self.apply(cmd);
            return;
        }
        if let Some(p) = &self.past {
            self.message = format!(
                "looking at the past ({}): actions are off — :now returns to the present",
                fmt_duration(p.at)
            );
            return;
        }
        if !self.paused {
            self.set_paused(true);
            self.resume_after = true;
        }
        match self.engine.what_if(self.actor.clone(), cmd.clone()) {
            Ok(p) if !p.accepted => {
                self.message = format!(
                    "not done: {} would be refused: {}",
                    describe(&cmd),
                    p.message
                );
                self.resume();
            }
            Ok(p) => {
                self.message = format!("{}? y does it, n/Esc keeps as is", describe(&cmd));
                self.mode = Mode::Confirm(cmd, Box::new(p), 0);
            }
            Err(e) => {
                self.message = format!("cannot preview {}: {e}", describe(&cmd));
                self.resume();
            }
        }
    }

    /// Applies a small action at once (an acknowledgement), after the same role and
    /// time checks as [`App::act`].
    fn act_now(&mut self, cmd: Command) {
        if let Some(p) = &self.past {
            self.message = format!(
                "looking at the past ({}): actions are off — :now returns to the present",
                fmt_duration(p.at)
            );
        } else {
            self.apply(cmd);
        }
    }

    /// Resumes the simulation paused for a question.
    fn resume(&mut self) {
        if std::mem::take(&mut self.resume_after) {
            let msg = std::mem::take(&mut self.message);
            self.set_paused(false);
            self.message = msg;
        }
    }

    fn switch(&mut self, s: Screen) {
        self.screen = s;
        self.selected = 0;
        self.filter.clear();
        self.recompute();
    }

    /// Handles one key.
    pub fn key(&mut self, k: KeyEvent) {
        self.dirty = true;
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Confirm(cmd, p, at) => {
                if let Some(at) = scroll(k.code, at) {
                    self.mode = Mode::Confirm(cmd, p, at);
                } else if k.code == KeyCode::Char('y') {
                    match self.engine.apply_as_previewed(
                        self.actor.clone(),
                        cmd.clone(),
                        (*p).clone(),
                    ) {
                        Err(Refusal::Changed(now)) => {
                            // Someone else acted meanwhile: show what it would do now.
                            self.message = format!(
                                "the cluster changed since the preview (another operator?): nothing done; this is what {} would do now — y to do it",
                                describe(&cmd)
                            );
                            self.mode = Mode::Confirm(cmd, now, 0);
                            self.refresh();
                            return;
                        }
                        r => self.answered(r),
                    }
                    self.resume();
                } else {
                    self.message = format!("kept as it was: {} was not done", describe(&cmd));
                    self.resume();
                }
            }
            Mode::Explain(ex, at) => {
                if let Some(at) = scroll(k.code, at) {
                    self.mode = Mode::Explain(ex, at);
                } else if !matches!(k.code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) {
                    self.mode = Mode::Explain(ex, at);
                }
            }
            Mode::Command(mut s) => match k.code {
                KeyCode::Esc => {}
                KeyCode::Enter => self.command(s.trim()),
                KeyCode::Backspace => {
                    s.pop();
                    self.mode = Mode::Command(s);
                }
                KeyCode::Char(c) => {
                    s.push(c);
                    self.mode = Mode::Command(s);
                }
                _ => self.mode = Mode::Command(s),
            },
            Mode::Filter(mut s) => match k.code {
                KeyCode::Esc => {
                    self.filter.clear();
                    self.recompute();
                }
                KeyCode::Enter => {}
                KeyCode::Backspace => {
                    s.pop();
                    self.filter = s.clone();
                    self.recompute();
                    self.mode = Mode::Filter(s);
                }
                KeyCode::Char(c) => {
                    s.push(c);
                    self.filter = s.clone();
                    self.selected = 0;
                    self.recompute();
                    self.mode = Mode::Filter(s);
                }
                _ => self.mode = Mode::Filter(s),
            },
            Mode::Normal => self.normal_key(k),
        }
    }

    fn normal_key(&mut self, k: KeyEvent) {
        let n = self.row_count();
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char(':') => self.mode = Mode::Command(String::new()),
            KeyCode::Char('/') => self.mode = Mode::Filter(self.filter.clone()),
            KeyCode::Char('?') => {
                if self.screen == Screen::Help {
                    self.switch(self.help_for);
                } else {
                    self.help_for = self.screen;
                    self.switch(Screen::Help);
                }
            }
            KeyCode::Esc if self.screen == Screen::Help => self.switch(self.help_for),
            KeyCode::Esc => {
                self.filter.clear();
                self.expanded = None;
                self.recompute();
            }
            KeyCode::Tab => {
                let i = Screen::ALL
                    .iter()
                    .position(|s| *s == self.screen)
                    .unwrap_or(0);
                self.switch(Screen::ALL[(i + 1) % Screen::ALL.len()]);
            }
            KeyCode::BackTab => {
                let i = Screen::ALL
                    .iter()
                    .position(|s| *s == self.screen)
                    .unwrap_or(0);
                self.switch(Screen::ALL[(i + Screen::ALL.len() - 1) % Screen::ALL.len()]);
            }
            KeyCode::Char('j') | KeyCode::Down => {
                self.selected = (self.selected + 1).min(n.saturating_sub(1))
            }
            KeyCode::Char('k') | KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Char('g') | KeyCode::Home => self.selected = 0,
            KeyCode::Char('G') | KeyCode::End => self.selected = n.saturating_sub(1),
            KeyCode::PageDown => self.selected = (self.selected + 10).min(n.saturating_sub(1)),
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(10),
            KeyCode::Char(' ') => self.set_paused(!self.paused),
            KeyCode::Char('[') if self.shown_s() == 0 => {
                self.message = "already at the start of the cluster's history".into()
            }
            KeyCode::Char('[') => self.travel(self.shown_s().saturating_sub(STEP_S)),
            KeyCode::Char(']') if self.past.is_some() => self.travel(self.shown_s() + STEP_S),
            KeyCode::Char('{') => self.travel(self.shown_s().saturating_sub(12 * STEP_S)),
            KeyCode::Char('}') if self.past.is_some() => self.travel(self.shown_s() + 12 * STEP_S),
            KeyCode::Char(']' | '}') => self.message = "already at the present".into(),
            KeyCode::Char('>') => self.set_speed((self.speed * 2.0).min(86_400.0)),
            KeyCode::Char('<') => self.set_speed((self.speed / 2.0).max(1.0)),
            _ => self.screen_key(k),
        }
    }

    fn screen_key(&mut self, k: KeyEvent) {
        if let KeyCode::Char(c) = k.code {
            if let Some((verb, key)) = verbs::key(self.screen.name(), c) {
                self.key_verb(verb, key);
                return;
            }
        }
        match (self.screen, k.code) {
            (Screen::Jobs | Screen::Overview, KeyCode::Enter) => {
                if let Some(name) = self.selected_job() {
                    let ex = match &self.past {
                        Some(p) => {
                            let c = p.core.cluster();
                            c.job_id(&name)
                                .map(|id| c.explain(id))
                                .map_err(|e| e.to_string())
                        }
                        None => self.engine.explain(&name),
                    };
                    match ex {
                        Ok(ex) => self.mode = Mode::Explain(Box::new(ex), 0),
                        Err(e) => self.message = format!("explain {name}: {e}"),
                    }
                }
            }
            (Screen::Nodes, KeyCode::Enter) => {
                let n = self.selected_node();
                self.expanded = if self.expanded == n { None } else { n };
            }
            (Screen::Alerts, KeyCode::Enter) => {
                if let Some(a) = self
                    .rows
                    .get(self.selected)
                    .and_then(|&i| self.alerts.get(i))
                {
                    let object = a.object.clone();
                    self.follow(&object);
                }
            }
            (Screen::Alerts, KeyCode::Char('A')) => {
                self.alerts_all = !self.alerts_all;
                self.recompute();
                self.message = if self.alerts_all {
                    "showing open, acknowledged and resolved alerts (A: open only)".into()
                } else {
                    "showing open alerts (A: also acknowledged and resolved)".into()
                };
            }
            _ => {}
        }
    }

    /// A declared key on this screen: the verb on the selected row.
    fn key_verb(&mut self, verb: &'static Verb, key: &Key) {
        let object = match self.selected_object() {
            Ok(o) => o,
            Err(why) => {
                self.message = why;
                return;
            }
        };
        let mut words = vec![object];
        if let Fill::PriorityStep(up) = key.fill {
            let Some(j) = self
                .rows
                .get(self.selected)
                .map(|&i| &self.snapshot.jobs[i])
            else {
                return;
            };
            let next = priority_step(j.priority_value, up);
            if next == j.priority_value {
                self.message = format!(
                    "{} is already at priority {}",
                    words[0],
                    maar_scheduler::priority_name(next)
                );
                return;
            }
            words.push(next.to_string());
        }
        match verb.read(&words).and_then(|g| verb.command(&g)) {
            Ok(cmd) => self.act_as(verb, cmd),
            Err(e) => self.message = format!("{}: {e}", verb.name),
        }
    }

    /// What the selected row is, as a verb names it: a job, a node, a request's id, an
    /// open alert's key (else why there is nothing to act on).
    fn selected_object(&self) -> Result<String, String> {
        let row = self.rows.get(self.selected).copied();
        match (self.screen, row) {
            (Screen::Jobs | Screen::Overview, Some(_)) => self
                .selected_job()
                .ok_or_else(|| "no job is selected".into()),
            (Screen::Nodes, Some(_)) => self
                .selected_node()
                .ok_or_else(|| "no node is selected".into()),
            (Screen::Quotas, Some(i)) => Ok(self.snapshot.quota_requests[i].id.to_string()),
            (Screen::Quotas, None) => Err("no quota request is pending".into()),
            (Screen::Alerts, Some(i)) => match self.alerts.get(i) {
                Some(a) if a.state == "open" => Ok(a.key.clone()),
                Some(a) => Err(format!("alert {} is already {}", a.key, a.state)),
                None => Err("no alert is selected".into()),
            },
            (s, _) => Err(format!("nothing is selected on {}", s.name())),
        }
    }

    /// Gives a command as its verb says: at once (an acknowledgement) or previewed and
    /// confirmed first.
    fn act_as(&mut self, verb: &Verb, cmd: Command) {
        if verb.at_once {
            self.act_now(cmd);
        } else {
            self.act(cmd);
        }
    }

    /// Mouse (with `--mouse`): the wheel moves the selection.
    pub fn mouse(&mut self, kind: crossterm::event::MouseEventKind) {
        use crossterm::event::MouseEventKind as M;
        let n = self.row_count();
        match kind {
            M::ScrollDown => self.selected = (self.selected + 1).min(n.saturating_sub(1)),
            M::ScrollUp => self.selected = self.selected.saturating_sub(1),
            _ => return,
        }
        self.dirty = true;
    }

    /// `:` commands: screens, and actions by name.
    pub fn command(&mut self, line: &str) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(&head) = words.first() else { return };
        if let Some(s) = Screen::ALL
            .iter()
            .find(|s| s.name() == head || (head == "queue" && **s == Screen::Jobs))
        {
            self.switch(*s);
            return;
        }
        match (head, words.len()) {
            ("speed", 2) => {
                if let Some(x) = words[1]
                    .parse::<f64>()
                    .ok()
                    .filter(|x| *x >= 1.0 && *x <= 86_400.0)
                {
                    self.set_speed(x);
                } else {
                    self.message = "speed: give a number from 1 to 86400".into();
                }
                return;
            }
            ("at", 2) => {
                match maar_scheduler::quantity::parse_duration_s(words[1]) {
                    Ok(t) => self.travel(t),
                    Err(e) => self.message = format!(":at {}: {e} (e.g. :at 2h15m)", words[1]),
                }
                return;
            }
            ("now", 1) => {
                self.now();
                return;
            }
            ("pause", 1) => {
                self.set_paused(true);
                return;
            }
            ("resume", 1) => {
                self.set_paused(false);
                return;
            }
            ("debug-stall", 2) if super::run::debug_stall_allowed() => {
                self.stall = words[1].parse().ok();
                return;
            }
            ("q" | "quit", 1) => {
                self.quit = true;
                return;
            }
            _ => (),
        }
        if verbs::verb(head).is_none() {
            self.message = format!("unknown command `:{line}` — ? lists them");
            return;
        }
        let words = match shlex::split(line) {
            Some(w) => w,
            None => {
                self.message = format!("{head}: a quote is not closed");
                return;
            }
        };
        let read = verbs::read_line(&words).and_then(|(verb, g)| {
            let cmd = match verb.build {
                Build::Words(_) => verb.command(&g)?,
                Build::JobFile => {
                    let file = g.word("file").unwrap_or_default();
                    crate::load::load_manifest(std::path::Path::new(file))
                        .map(|spec| Command::Submit(Box::new(spec)))
                        .map_err(|e| e.to_string())?
                }
            };
            Ok((verb, cmd))
        });
        match read {
            Ok((verb, cmd)) => self.act_as(verb, cmd),
            Err(e) => self.message = format!("{head}: {e}"),
        }
    }
}

/// How a scrolling popup moves on a key (`None`: the key is not a scroll key).
pub fn scroll(k: KeyCode, at: u16) -> Option<u16> {
    match k {
        KeyCode::Char('j') | KeyCode::Down => Some(at.saturating_add(1)),
        KeyCode::Char('k') | KeyCode::Up => Some(at.saturating_sub(1)),
        KeyCode::PageDown | KeyCode::Char(' ') => Some(at.saturating_add(10)),
        KeyCode::PageUp => Some(at.saturating_sub(10)),
        KeyCode::Home | KeyCode::Char('g') => Some(0),
        _ => None,
    }
}

/// A command in words, for the confirmation prompt and the log.
pub fn describe(c: &Command) -> String {
    c.describe()
}
