//! Console state and key handling.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use maar_scheduler::metrics::Snapshot;
use maar_scheduler::quantity::fmt_duration;
use maar_scheduler::{Command, PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MEDIUM};

use maar_scheduler::verbs::{self, Build, Fill, Key, Verb};

use super::screens::{self, Then};

use crate::engine::{EngineHandle, Refusal, View};

pub use super::screen::Screen;

pub use super::state::{App, Mode, Site};

/// The largest other cluster an explanation asks how a job would fare there (a copy
/// of it and a cycle; 2,000 nodes, as explain's own proofs).
const ELSEWHERE_NODES: usize = 2_000;
/// How often the rows of all clusters are put together at most (`:cluster all`).
const MERGE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

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
            log_view: tui_logger::TuiWidgetState::new(),
            log_back: false,
            page: std::cell::Cell::new(10),
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
            sites: Vec::new(),
            site: 0,
            site_rows: Vec::new(),
            site_versions: Vec::new(),
            site_models: Vec::new(),
            elsewhere: Vec::new(),
            site_snapshot: view.snapshot.clone(),
            all_sites: false,
            merged_at: None,
            merge_due: false,
            joining: None,
            joined_seen: 0,
            joined_read_only: false,
            waiting: Vec::new(),
        }
        .with_rows()
    }

    /// A console on several clusters (`maar demo --clusters 2`): the first is shown;
    /// `C` and `:cluster NAME` go to another; the overview sums them all.
    pub fn with_sites(sites: Vec<Site>) -> App {
        App::with_sites_joining(sites, None, false)
    }

    /// As [`App::with_sites`], with clusters that did not answer at the start and may
    /// join later (each then its row and its engine, a viewer's when `read_only`).
    pub fn with_sites_joining(
        sites: Vec<Site>,
        joining: Option<Arc<crate::federation::Joining>>,
        read_only: bool,
    ) -> App {
        let mut app = App::new(sites[0].engine.clone());
        app.joined_read_only = read_only;
        if sites.len() > 1 || joining.is_some() {
            app.joining = joining;
            app.site_versions = vec![u64::MAX; sites.len()];
            app.site_models = vec![Vec::new(); sites.len()];
            app.sites = sites;
            app.refresh_sites();
            app.recompute();
        }
        app
    }

    /// The cluster shown, in words for the header: `lab (1 of 2)`; empty with one.
    pub fn site_label(&self) -> String {
        match self.sites.get(self.site) {
            // The figures are every cluster's then; actions go to one of them.
            Some(s) if self.sites.len() > 1 && self.all_rows() => {
                format!("all {} clusters (acts in {})", self.sites.len(), s.name)
            }
            Some(s) if self.sites.len() > 1 => {
                format!("{} ({} of {})", s.name, self.site + 1, self.sites.len())
            }
            _ => String::new(),
        }
    }

    /// The tables list every cluster's rows now (`:cluster all`, and not looking at
    /// one cluster's past).
    pub fn all_rows(&self) -> bool {
        self.all_sites && self.past.is_none()
    }

    /// Every cluster's rows in the tables (`:cluster all`), or the shown cluster's.
    pub fn show_all_sites(&mut self, on: bool) {
        if self.sites.len() < 2 {
            return;
        }
        self.all_sites = on;
        self.selected = 0;
        self.merge(true);
        self.recompute();
        self.message = if on {
            format!(
                "every cluster's jobs and nodes ({}): acting on a row acts in its cluster — C for one cluster",
                self.site_label()
            )
        } else {
            format!("cluster {} — C for the next", self.site_label())
        };
        self.dirty = true;
    }

    /// Puts the tables' rows together: every cluster's with `all_sites` (at most once
    /// a second unless `now`; else marked due), the shown cluster's otherwise.
    fn merge(&mut self, now: bool) {
        if !self.all_sites {
            self.snapshot = self.site_snapshot.clone();
            self.merge_due = false;
            return;
        }
        if !now && self.merged_at.is_some_and(|t| t.elapsed() < MERGE_EVERY) {
            self.merge_due = true;
            return;
        }
        self.snapshot = self.with_all_sites();
        self.merged_at = Some(std::time::Instant::now());
        self.merge_due = false;
    }

    /// Goes to cluster `i`: its view shown, actions sent to its engine.
    pub fn switch_site(&mut self, i: usize) {
        let Some(site) = self.sites.get(i).cloned() else {
            return;
        };
        self.site = i;
        self.engine = site.engine;
        self.grant = self
            .engine
            .grant(&self.actor)
            .unwrap_or(crate::roles::Grant {
                role: maar_scheduler::Role::Viewer,
                why: "the engine did not say".into(),
            });
        self.past = None;
        self.history.clear();
        self.selected = 0;
        self.expanded = None;
        self.version = u64::MAX;
        let v = self.engine.view();
        self.adopt(v);
        self.message = format!("cluster {} — C for the next", self.site_label());
        self.dirty = true;
    }

    /// Reads the other clusters' newest views (each frame): their totals and the GPUs
    /// by model over all of them, recomputed when one changed. True when it did.
    pub fn refresh_sites(&mut self) -> bool {
        let mut grown = false;
        let waiting = match self.joining.clone() {
            Some(j) => {
                // Clusters that answer now join: their rows and their engines.
                for s in j.joined_after(self.joined_seen) {
                    self.joined_seen += 1;
                    let engine = if self.joined_read_only {
                        s.engine.capped(maar_scheduler::Role::Viewer)
                    } else {
                        s.engine
                    };
                    self.message = format!("cluster {} answers now and joins", s.name);
                    self.sites.push(Site {
                        name: s.name,
                        engine,
                    });
                    self.site_versions.push(u64::MAX);
                    self.site_models.push(Vec::new());
                    grown = true;
                }
                j.waiting()
            }
            None => Vec::new(),
        };
        if grown && self.all_sites {
            self.merge_due = true;
        }
        if self.sites.len() < 2 && waiting.is_empty() {
            return false;
        }
        let waiting_changed = waiting != self.waiting;
        self.waiting = waiting;
        if self.merge_due
            && self.past.is_none()
            && self.merged_at.is_none_or(|t| t.elapsed() >= MERGE_EVERY)
        {
            self.remerge();
        }
        let views: Vec<Arc<View>> = self.sites.iter().map(|s| s.engine.view()).collect();
        let mut changed = false;
        let mut other = false;
        for (i, v) in views.iter().enumerate() {
            if self.site_versions[i] == v.version {
                continue;
            }
            // Only the clusters whose view changed are counted again.
            self.site_versions[i] = v.version;
            self.site_models[i] = super::rows::model_rows(&v.snapshot);
            changed = true;
            other |= i != self.site;
        }
        if !changed && !waiting_changed {
            return false;
        }
        if other && self.all_sites && self.past.is_none() {
            // Another cluster's rows changed: the tables list them too.
            self.merge_due = true;
            if self.merged_at.is_none_or(|t| t.elapsed() >= MERGE_EVERY) {
                self.remerge();
            }
        }
        self.site_rows = self
            .sites
            .iter()
            .zip(&views)
            .map(|(s, v)| super::rows::site_row(&s.name, v))
            .chain(self.waiting.iter().map(|(name, why)| super::rows::SiteRow {
                name: name.clone(),
                nodes: 0,
                gpu_used_milli: 0,
                gpu_total_milli: 0,
                pending: 0,
                running: 0,
                time_s: 0,
                down: Some(format!(
                    "not answering since the start, tried every {} s: {why}",
                    crate::federation::RETRY_EVERY.as_secs()
                )),
            }))
            .collect();
        if self.screen == Screen::Overview && self.past.is_none() {
            self.models = self.all_models();
        }
        self.dirty = true;
        true
    }

    /// The shown cluster's name, with several (rows are named within their cluster).
    pub fn shown_cluster(&self) -> &str {
        match self.sites.get(self.site) {
            Some(s) if self.sites.len() > 1 => &s.name,
            _ => "",
        }
    }

    /// The shown cluster's view with every cluster's jobs and nodes, each naming its
    /// own (a Pending job's start moved onto the shown cluster's clock); the shown
    /// cluster's view alone with one.
    fn with_all_sites(&self) -> Arc<Snapshot> {
        let shown = &self.site_snapshot;
        if self.sites.len() < 2 {
            return shown.clone();
        }
        let views: Vec<Arc<Snapshot>> = self
            .sites
            .iter()
            .enumerate()
            .map(|(i, site)| {
                if i == self.site {
                    shown.clone()
                } else {
                    site.engine.view().snapshot.clone()
                }
            })
            .collect();
        let parts = self
            .sites
            .iter()
            .zip(&views)
            .map(|(s, v)| (s.name.as_str(), &**v));
        Arc::new(Snapshot::of_clusters(shown, parts))
    }

    /// The rows of all clusters put together again now, the selection kept on its row.
    fn remerge(&mut self) {
        let keep = self.selected_key();
        self.merge(true);
        self.recompute();
        self.reselect(keep);
        self.dirty = true;
    }

    /// Acting on a row of another cluster (Jobs, Nodes): that cluster becomes the one
    /// shown, so the action, its preview and its answer are its own; the selection
    /// stays on the row.
    fn aim(&mut self) {
        if !self.all_rows() {
            return;
        }
        let Some(&row) = self.rows.get(self.selected) else {
            return;
        };
        let cluster = match self.screen {
            Screen::Jobs | Screen::Overview => self.snapshot.jobs.get(row).map(|j| &j.cluster),
            Screen::Nodes => self.snapshot.nodes.get(row).map(|n| &n.cluster),
            Screen::Quotas => self.snapshot.quota_requests.get(row).map(|r| &r.cluster),
            Screen::Alerts => self.alerts.get(row).map(|a| &a.cluster),
            _ => None,
        };
        let Some(i) = cluster.and_then(|c| self.sites.iter().position(|s| &s.name == c)) else {
            return;
        };
        self.focus_site(i);
    }

    /// Cluster `i` becomes the one acted in, the screen, filter and selected row kept
    /// (every cluster's rows still shown).
    fn focus_site(&mut self, i: usize) {
        if i == self.site {
            return;
        }
        let (key, screen, filter) = (self.selected_key(), self.screen, self.filter.clone());
        self.switch_site(i);
        self.screen = screen;
        self.filter = filter;
        self.recompute();
        self.reselect(key);
    }

    /// GPUs by model over every cluster, from each one's rows.
    fn all_models(&self) -> Vec<super::rows::ModelRow> {
        let per: Vec<&[super::rows::ModelRow]> =
            self.site_models.iter().map(|m| m.as_slice()).collect();
        super::rows::merge_model_rows(&per)
    }

    /// How a job of the cluster shown would fare in each of the others, were it sent
    /// there now (none with one cluster).
    pub fn elsewhere_of(&self, job: &str) -> Vec<String> {
        if self.sites.len() < 2 || self.past.is_some() {
            return Vec::new();
        }
        let spec = match self.engine.spec(job) {
            Ok(s) => s,
            Err(e) => return vec![format!("(its spec cannot be read: {e})")],
        };
        self.sites
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.site)
            .map(|(_, s)| {
                // A proof costs a copy of the cluster: on a large one it is left to
                // :submit (explain must stay quick, and the other engine free).
                let nodes = s.engine.view().snapshot.nodes.len();
                if nodes > ELSEWHERE_NODES {
                    // Unless it needs no copy there (nothing waits for room).
                    return match s.engine.prospect_quick(&spec) {
                        Ok(Some(p)) => format!("{}: {}", s.name, p.words()),
                        Err(e) => format!("{}: refuses it: {e}", s.name),
                        Ok(None) => format!(
                            "{}: not asked here ({nodes} nodes, jobs waiting there; :submit asks every cluster)",
                            s.name
                        ),
                    };
                }
                match s.engine.prospect(&spec) {
                    Ok(p) => format!("{}: {}", s.name, p.words()),
                    Err(e) => format!("{}: refuses it: {e}", s.name),
                }
            })
            .collect()
    }

    /// `:submit FILE` with several clusters: each says how the job would fare there,
    /// and it goes where it starts first (`maar_scheduler::dispatch`), the why said
    /// and logged.
    fn dispatch(&mut self, verb: &'static Verb, spec: maar_scheduler::JobSpec) {
        let prospects = crate::federation::prospects(&self.sites, &spec);
        // A file that names its cluster (`crater.ai/cluster`) goes there.
        let named = spec.cluster.clone().filter(|c| c != "auto");
        if let Some(name) = named {
            match maar_scheduler::dispatch::to_send(usize::MAX, &name, &prospects) {
                Ok(Some(choice)) => return self.send_to(verb, spec, &prospects, choice),
                Ok(None) => {}
                Err(e) => {
                    self.message = format!("submit: {e}");
                    return;
                }
            }
        }
        let Some(choice) = maar_scheduler::dispatch::choose(&prospects) else {
            let why: Vec<String> = prospects
                .iter()
                .map(|(n, p)| format!("{n}: {}", p.as_ref().err().cloned().unwrap_or_default()))
                .collect();
            self.message = format!("submit: no cluster takes it: {}", why.join("; "));
            return;
        };
        self.send_to(verb, spec, &prospects, choice);
    }

    /// Submits `spec` to the cluster `choice` names, the why with it.
    fn send_to(
        &mut self,
        verb: &'static Verb,
        mut spec: maar_scheduler::JobSpec,
        prospects: &[(String, Result<maar_scheduler::dispatch::Prospect, String>)],
        choice: maar_scheduler::dispatch::Choice,
    ) {
        tracing::info!(target: "maar", "job/{}/{} {}", spec.project, spec.name, choice.why);
        if choice.index != self.site {
            self.switch_site(choice.index);
        }
        // The why goes with the job: recorded with the submit, shown by explain.
        spec.dispatched = Some(choice.why.clone());
        spec.sent_start_in = prospects[choice.index]
            .1
            .as_ref()
            .ok()
            .and_then(|p| p.start_in);
        self.act_as(verb, Command::Submit(Box::new(spec)));
        // Nothing is sent before `y`: said as what would be.
        self.message = format!("{} — {}", choice.would(), self.message);
    }

    fn with_rows(mut self) -> App {
        self.record_history();
        self.recompute();
        self
    }

    /// Recomputes the current screen's rows and the alerts.
    pub fn recompute(&mut self) {
        self.alerts = screens::alerts::list(self);
        self.rows = screens::rows(self);
        self.models = if self.screen != Screen::Overview {
            Vec::new()
        } else if self.sites.len() > 1 && self.past.is_none() {
            self.all_models()
        } else {
            super::rows::model_rows(&self.snapshot)
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
        self.site_snapshot = v.snapshot.clone();
        self.merge(false);
        self.status = v.status.clone();
        self.paused = v.status.paused;
        self.speed = v.status.speed;
        if moved {
            self.record_history();
        }
        self.recompute();
        self.reselect(keep);
        self.dirty = true;
    }

    /// What row `i` (an index into the snapshot) of the current screen is, by name.
    fn row_key(&self, i: usize) -> String {
        screens::row_key(self, i)
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
        // Rows of every cluster are named within it: the alert's is the one shown.
        let cluster = if self.all_rows() {
            self.shown_cluster()
        } else {
            ""
        };
        let row = format!("{cluster}:{key}");
        match (0..self.rows.len()).find(|&i| self.row_key(self.rows[i]) == row) {
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
        let site = self.shown_cluster().to_string();
        self.message = match r {
            // With several clusters, the one that did it.
            Ok(ack) if !site.is_empty() => format!("{site}: {}", ack.message),
            Ok(ack) => ack.message,
            Err(Refusal::Refused { why, .. }) => format!("refused: {why}"),
            Err(e) => e.to_string(),
        };
        self.refresh();
    }

    /// Pauses or resumes; a pause shows the state at that moment, which is what the
    /// next action acts on.
    pub fn set_paused(&mut self, paused: bool) {
        // Several simulated clusters keep one clock: the others pause and resume too.
        for (i, s) in self.sites.iter().enumerate() {
            if i != self.site {
                let _ = s.engine.set_paused(paused);
            }
        }
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
        // Several simulated clusters keep one clock (the one shown is among them).
        if self.sites.is_empty() {
            self.engine.set_speed(x);
        }
        for s in &self.sites {
            s.engine.set_speed(x);
        }
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
            // The live rows at once (all clusters' too), not after the merge's pause.
            self.merged_at = None;
            self.refresh();
            self.message = "back to now".into();
        }
    }

    /// The cluster time shown.
    pub fn shown_s(&self) -> u64 {
        self.past.as_ref().map(|p| p.at).unwrap_or(self.live_s)
    }

    /// The selection put back on the row named `keep`, where it still is.
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
        let before = self.message.clone();
        self.key_inner(k);
        // A message a narrow terminal's status line cannot show whole is in the log
        // too (the Logs screen scrolls), whole.
        if self.message != before
            && maar_widgets::columns::width_of(&self.message) > super::view::MIN_W as usize
        {
            tracing::info!(target: "maar::console", "{}", self.message);
        }
    }

    fn key_inner(&mut self, k: KeyEvent) {
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
                // The filter kept: the line says so (the message before it was left).
                KeyCode::Enter => {
                    self.message = match (self.filter.is_empty(), self.rows.len()) {
                        (true, _) => String::new(),
                        (false, 0) => "no row matches the filter (Esc clears it)".into(),
                        (false, n) => format!("{n} rows match (Esc clears the filter)"),
                    };
                }
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
        // The Logs screen has no rows: the move keys scroll its log.
        if self.screen == Screen::Logs && screens::logs::scroll(self, k.code) {
            return;
        }
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
            // The digits go to the screens in tab order (1 the overview, ...).
            KeyCode::Char(d @ '1'..='9') => {
                let i = d as usize - '1' as usize;
                if let Some(&s) = Screen::ALL.get(i) {
                    self.switch(s);
                }
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
            KeyCode::PageDown => {
                self.selected = (self.selected + self.page.get()).min(n.saturating_sub(1))
            }
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(self.page.get()),
            KeyCode::Char(' ') => self.set_paused(!self.paused),
            KeyCode::Char('[' | '{') if self.shown_s() == 0 => {
                self.message = "already at the start of the cluster's history".into()
            }
            KeyCode::Char('[') => self.travel(self.shown_s().saturating_sub(STEP_S)),
            KeyCode::Char(']') if self.past.is_some() => self.travel(self.shown_s() + STEP_S),
            KeyCode::Char('{') => self.travel(self.shown_s().saturating_sub(12 * STEP_S)),
            KeyCode::Char('}') if self.past.is_some() => self.travel(self.shown_s() + 12 * STEP_S),
            KeyCode::Char(']' | '}') => self.message = "already at the present".into(),
            KeyCode::Char('>') if self.speed >= 86_400.0 => {
                self.message = "already at the fastest speed, 86400x".into()
            }
            KeyCode::Char('<') if self.speed <= 1.0 => {
                self.message = "already at the slowest speed, 1x (real time)".into()
            }
            KeyCode::Char('>') => self.set_speed((self.speed * 2.0).min(86_400.0)),
            KeyCode::Char('<') => self.set_speed((self.speed / 2.0).max(1.0)),
            // C: the next cluster; past the last, every cluster's rows; then the first.
            KeyCode::Char('C') if self.sites.len() > 1 => {
                if self.all_sites {
                    self.all_sites = false;
                    self.switch_site(0);
                } else if self.site + 1 == self.sites.len() {
                    self.show_all_sites(true);
                } else {
                    self.switch_site(self.site + 1);
                }
            }
            _ => self.screen_key(k),
        }
    }

    fn screen_key(&mut self, k: KeyEvent) {
        self.aim();
        if let KeyCode::Char(c) = k.code {
            if let Some((verb, key)) = verbs::key(self.screen.name(), c) {
                self.key_verb(verb, key);
                return;
            }
        }
        match screens::key(self, k.code) {
            Some(Then::Recompute) => self.recompute(),
            Some(Then::Follow(object)) => self.follow(&object),
            Some(Then::Done) | None => {}
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
            ("debug-stall", 2) if debug_stall_allowed() => {
                self.stall = words[1].parse().ok();
                return;
            }
            ("q" | "quit", 1) => {
                self.quit = true;
                return;
            }
            // As `maar explain JOB`.
            ("explain", 2) => {
                screens::jobs::explain(self, words[1]);
                return;
            }
            ("cluster", 2) => {
                match self.sites.iter().position(|s| s.name == words[1]) {
                    _ if words[1] == "all" && self.sites.len() > 1 => self.show_all_sites(true),
                    Some(i) => {
                        self.all_sites = false;
                        self.switch_site(i)
                    }
                    None if self.sites.is_empty() => {
                        self.message = "cluster: this console shows one cluster".into()
                    }
                    None => {
                        let names: Vec<&str> = self.sites.iter().map(|s| s.name.as_str()).collect();
                        self.message = format!(
                            "cluster: no cluster `{}` here ({}, or all)",
                            maar_scheduler::limits::echo(words[1]),
                            names.join(", ")
                        )
                    }
                }
                return;
            }
            _ => (),
        }
        if verbs::verb(head).is_none() {
            self.message = match head {
                "speed" => "speed: give a number from 1 to 86400 (:speed 600)".into(),
                "at" => "at: give a moment of the history (:at 2h15m)".into(),
                "now" | "pause" | "resume" | "q" | "quit" => format!(":{head} takes no words"),
                "cluster" => "cluster: give a cluster's name (:cluster site-b)".into(),
                "explain" => "explain: give a job (:explain ml-prod/train-7)".into(),
                _ => format!("unknown command `:{line}` — ? lists them"),
            };
            return;
        }
        let words = match shlex::split(&hash_kept(line)) {
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
            Ok((verb, Command::Submit(spec))) if self.sites.len() > 1 && self.past.is_none() => {
                self.dispatch(verb, *spec)
            }
            Ok((verb, cmd)) => {
                if self.focus_its_cluster(&cmd) {
                    self.act_as(verb, cmd)
                }
            }
            Err(e) => self.message = format!("{head}: {e}"),
        }
    }

    /// With every cluster's rows shown, a typed command acts in the cluster whose node
    /// or job it names, as acting on that row would (it went to the focused cluster:
    /// `:cordon l40s-05` was refused as "no node named" while the table listed site-b's
    /// l40s-05). A name in several clusters is not guessed: false, and the message
    /// says which to choose. Elsewhere it acts where it is.
    fn focus_its_cluster(&mut self, cmd: &Command) -> bool {
        if !self.all_rows() {
            return true;
        }
        let object = cmd.object();
        let mut clusters: Vec<String> = match object.split_once('/') {
            Some(("node" | "gpu", rest)) => {
                let node = rest.split('/').next().unwrap_or(rest);
                self.snapshot
                    .nodes
                    .iter()
                    .filter(|n| n.name == node)
                    .map(|n| n.cluster.clone())
                    .collect()
            }
            Some(("job", job)) => self
                .snapshot
                .jobs
                .iter()
                .filter(|j| format!("{}/{}", j.project, j.name) == job || j.name == job)
                .map(|j| j.cluster.clone())
                .collect(),
            // Quota requests are numbered per cluster: a number in both is asked.
            Some(("request", id)) => self
                .snapshot
                .quota_requests
                .iter()
                .filter(|r| r.id.to_string() == id)
                .map(|r| r.cluster.clone())
                .collect(),
            Some(("alert", key)) => self
                .alerts
                .iter()
                .filter(|a| a.key == key)
                .map(|a| a.cluster.clone())
                .collect(),
            _ => return true,
        };
        clusters.sort();
        clusters.dedup();
        match clusters.as_slice() {
            [one] => {
                if let Some(i) = self.sites.iter().position(|s| &s.name == one) {
                    self.focus_site(i);
                }
                true
            }
            [] => true,
            many => {
                self.message = format!(
                    "{object} is in clusters {}: `:cluster NAME` first, then act",
                    many.join(", ")
                );
                false
            }
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

/// A hidden command for tests: with `MAAR_DEBUG_STALL=1`, `:debug-stall N` blocks the
/// event loop for N seconds (to check that signals still restore the terminal).
pub fn debug_stall_allowed() -> bool {
    std::env::var_os("MAAR_DEBUG_STALL").is_some_and(|v| v == "1")
}

/// The line with a `#` that starts a word kept as text (`:approve #7`, as the tables
/// show a request), where a shell would take it for a comment.
fn hash_kept(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 4);
    let (mut quote, mut word_start) = (None, true);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if word_start => out.push('\\'),
            _ => {}
        }
        word_start = quote.is_none() && c.is_whitespace();
        out.push(c);
    }
    out
}
