//! The engine: one thread owns the core and its driver and applies everything in
//! order; every face (the console, the CLI) holds an [`EngineHandle`].
//!
//! ```text
//!  console ─┐                      ┌──────────── engine thread ─────────────┐
//!  CLI ─────┼─ EngineHandle ──────>│ requests: command, explain, pause, ... │
//!  other    │  (channel)           │ driver.advance(core, t) in steps        │──> record (SQLite):
//!  process ─┴─ socket (api.rs) ───>│ core.apply(input) -> events, decisions  │    commands, events,
//!                                  └──────┬─────────────────────────────────┘    checkpoints, lease
//!                                         └── View (snapshot + status) ──> watch ──> faces
//! ```
//!
//! The simulation advances in bounded steps and the engine answers requests between
//! them, so a face never waits behind a long run; faces read owned snapshots and never
//! lock the core. A command is written to the record before it is acknowledged.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use maar_scheduler::metrics::Snapshot;
use maar_scheduler::whatif::{what_if, Preview};
use maar_scheduler::{Actor, Command, Core, Driver, Event, Explanation};

use crate::backend::Loaded;
use crate::record::{Record, HISTORY_EVERY_S};
use crate::roles::{Grant, Judged, Roles};
use maar_scheduler::quantity::fmt_duration;
use maar_scheduler::Role;

/// Longest simulated step between two looks at the requests, seconds.
pub const MAX_STEP_S: u64 = 60;
/// Real time the engine spends advancing before it looks at requests again.
const STEP_BUDGET: Duration = Duration::from_millis(40);
/// The engine never runs more than this much real time behind the speed asked.
const MAX_LAG: f64 = 0.5;
/// How often the lease is renewed (and the state file looked at: deleted or replaced
/// under the engine, it stops).
const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// How often events are written while running.
const FLUSH_EVERY: Duration = Duration::from_millis(500);
/// How often a checkpoint is written while running (and at every stop).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(5);
/// How often while running for a world read anew at every start (`maar kube`,
/// `Driver::world_read_anew`): no start continues from it, readers asking a running
/// maar get one written at once, and the hour's checkpoint is written all the same.
/// What it bounds is how much of a killed maar's last moments the record shows.
const CHECKPOINT_EVERY_READ_ANEW: Duration = Duration::from_secs(60);
/// `Engine::checkpointed` of a cluster the record holds in no checkpoint yet (no event
/// count or command matches it).
const IN_NO_CHECKPOINT: (u64, i64) = (u64::MAX, -1);
/// Fewest real time between two checkpoints taken for history (a new simulated hour).
const HISTORY_MIN_GAP: Duration = Duration::from_millis(250);
/// Fewest real time between two published snapshots while running.
const PUBLISH_EVERY: Duration = Duration::from_millis(200);
/// How often a headless run publishes (nothing draws; `maar` commands read the record).
pub const HEADLESS_PUBLISH_EVERY: Duration = Duration::from_secs(5);
/// How often a headless run publishes when only its clock moved.
pub const HEADLESS_TICK_PUBLISH_EVERY: Duration = Duration::from_secs(30);
/// How long a face waits for the engine's answer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Simulated seconds per real second (demo).
    pub speed: f64,
    pub paused: bool,
    /// Who may do what (every command is checked against its actor's role).
    pub roles: Arc<Roles>,
    /// How often a changed cluster is published to the faces: 200 ms for a console;
    /// headless runs (no face draws) publish seldom, since a view of a large cluster
    /// costs milliseconds to build.
    pub publish_every: Duration,
    /// How often a cluster whose clock alone moved (no event, no command) is published:
    /// as `publish_every` for a console (its clock and run times tick); seldom
    /// headless, where a large cluster's view would be built every few seconds for
    /// nobody.
    pub tick_publish_every: Duration,
    /// Metrics to feed (`--metrics`).
    pub observe: Option<Arc<crate::observe::Observe>>,
    /// This cluster's name where one maar runs it among several and its federation's
    /// mover sends the jobs whose file asks for a cluster (`crater.ai/cluster`): such
    /// a job is held here until sent or left here (`Core::set_federation`). `None`:
    /// alone, or no mover runs (a viewer's console).
    pub federation: Option<String>,
    /// Whether published views carry the cluster's snapshot. A headless maar that
    /// nothing reads one from (no `--metrics`, no federation's mover) publishes its
    /// status alone, with an empty snapshot: a view of 5,000 jobs took 15-25 ms to
    /// build and one of 50,000 ten times that, every few seconds, for nobody. A face
    /// that asks ([`EngineHandle::sync`], a pause) gets the whole view all the same.
    pub snapshots: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            speed: 60.0,
            paused: false,
            roles: Arc::new(Roles::default()),
            publish_every: PUBLISH_EVERY,
            tick_publish_every: PUBLISH_EVERY,
            observe: None,
            federation: None,
            snapshots: true,
        }
    }
}

/// The engine's own state, shown beside the snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    /// `demo`, `local`, `kube`.
    pub kind: &'static str,
    pub paused: bool,
    /// Speed asked for, and simulated seconds per real second achieved lately.
    pub speed: f64,
    pub achieved: f64,
    /// The state file, when there is one.
    pub state: Option<PathBuf>,
    /// Commands in the record.
    pub recorded: i64,
    /// The last problem with the record, if writing it failed.
    pub record_error: Option<String>,
    /// Why this engine stopped for good (it lost the state file: taken over, deleted or
    /// replaced); the face says so and exits non-zero.
    pub fatal: Option<String>,
    /// This maar schedules (false: a Kubernetes maar standing by on another's lease).
    pub leading: bool,
    /// Why its world does not answer now (a Kubernetes API server out of reach).
    pub unreachable: Option<String>,
}

/// What faces draw: a snapshot of the cluster and the engine's status.
#[derive(Clone, Debug)]
pub struct View {
    /// Empty where the engine publishes its status alone ([`EngineOptions::snapshots`])
    /// and nobody asked for a whole view.
    pub snapshot: Arc<Snapshot>,
    pub status: Status,
    /// Grows with every publication.
    pub version: u64,
}

/// The cluster as it was at a moment of its history, restored from the record: an
/// owned copy to read (nothing in it acts on the live cluster).
pub struct Past {
    /// The moment shown, cluster time.
    pub at: u64,
    /// The live cluster's time when it was asked for.
    pub now: u64,
    pub snapshot: Arc<Snapshot>,
    /// The restored core, to explain jobs as they were.
    pub core: Core,
    /// What the past shown is, when it is not the moment exactly (a live cluster's
    /// past is its newest checkpoint kept).
    pub note: Option<String>,
}

/// Why a command was not acknowledged.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// The core refused it; nothing changed. The refusal is recorded too (`seq`).
    #[error("{why}")]
    Refused { why: String, seq: Option<i64> },
    /// It could not be recorded, so it was undone.
    #[error("not recorded, so not applied: {0}")]
    Record(String),
    /// The engine did not answer in time or is gone.
    #[error("the engine did not answer: {0}")]
    NoAnswer(String),
    /// The cluster changed since the preview: not applied; what it would do now.
    #[error("the cluster changed since the preview; nothing was done")]
    Changed(Box<Preview>),
}

/// An acknowledged command.
#[derive(Clone, Debug, PartialEq)]
pub struct Ack {
    pub message: String,
    /// Its number in the record (when there is one).
    pub seq: Option<i64>,
}

enum Request {
    Command {
        actor: Actor,
        command: Command,
        /// The highest role this face may act with (`--read-only`: viewer).
        cap: Option<Role>,
        /// Apply only if the command would still do what this preview said.
        expect: Option<Box<Preview>>,
        /// The sender's key: a command is applied and recorded at most once per key.
        key: Option<String>,
        /// The role decided outside the roles file (the Kubernetes API server's RBAC).
        judged: Option<Judged>,
        reply: Sender<Result<Ack, Refusal>>,
    },
    Checkpoint {
        reply: Sender<Result<(), String>>,
    },
    Grant {
        actor: Actor,
        cap: Option<Role>,
        reply: Sender<Grant>,
    },
    Explain {
        job: String,
        reply: Sender<Result<Explanation, String>>,
    },
    WhatIf {
        actor: Actor,
        command: Command,
        reply: Sender<Preview>,
    },
    Spec {
        job: String,
        reply: Sender<Result<maar_scheduler::JobSpec, String>>,
    },
    Prospect {
        spec: Box<maar_scheduler::JobSpec>,
        reply: Sender<Result<maar_scheduler::dispatch::Prospect, String>>,
    },
    ProspectQuick {
        spec: Box<maar_scheduler::JobSpec>,
        reply: Sender<Result<Option<maar_scheduler::dispatch::Prospect>, String>>,
    },
    ProspectAgain {
        job: String,
        reply: Sender<Result<maar_scheduler::dispatch::Prospect, String>>,
    },
    NotSent {
        job: String,
        why: String,
        reply: Sender<Result<String, String>>,
    },
    Held {
        reply: Sender<Vec<(String, String)>>,
    },
    At {
        t: u64,
        reply: Sender<Result<Past, String>>,
    },
    Pause {
        paused: bool,
        reply: Sender<Arc<View>>,
    },
    Speed(f64),
    /// Answered at once: the engine thread is alive and not stuck.
    Ping {
        reply: Sender<()>,
    },
    Sync {
        reply: Sender<Arc<View>>,
    },
    Stop,
}

/// A face's handle on the engine. Cloning it is cheap; the engine stops when the last
/// handle asks it to (or is dropped).
#[derive(Clone)]
pub struct EngineHandle {
    /// The highest role commands through this handle act with.
    cap: Option<Role>,
    tx: Sender<Request>,
    views: watch::Receiver<Arc<View>>,
    thread: Arc<std::sync::Mutex<Option<std::thread::JoinHandle<()>>>>,
    /// The ways in served for other processes (the state file's socket, `api.rs`),
    /// closed at shutdown.
    doors: Arc<std::sync::Mutex<Vec<Box<dyn Door>>>>,
}

/// A way in to a running engine that another module serves (the state file's socket:
/// `api::serve`), closed when the engine shuts down. The engine knows no door's kind,
/// so the modules that serve it may use the engine without a circle.
pub trait Door: Send {
    fn close(&mut self);
}

impl EngineHandle {
    fn ask<T>(&self, make: impl FnOnce(Sender<T>) -> Request) -> Result<T, String> {
        self.ask_within(ANSWER_WITHIN, make)
    }

    fn ask_within<T>(
        &self,
        within: Duration,
        make: impl FnOnce(Sender<T>) -> Request,
    ) -> Result<T, String> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(make(tx))
            .map_err(|_| "the engine has stopped".to_string())?;
        rx.recv_timeout(within).map_err(|e| match e {
            RecvTimeoutError::Timeout => format!("no answer within {}s", within.as_secs_f64()),
            RecvTimeoutError::Disconnected => "the engine has stopped".to_string(),
        })
    }

    /// Applies a command; `Ok` only once it is recorded.
    pub fn apply(&self, actor: Actor, command: Command) -> Result<Ack, Refusal> {
        self.send(actor, command, None, None, None)
    }

    /// Applies a command sent with a key: asked again with the same key (its sender
    /// lost the answer), the engine answers with what it recorded, applying nothing.
    pub fn apply_keyed(&self, actor: Actor, command: Command, key: String) -> Result<Ack, Refusal> {
        self.send(actor, command, None, Some(key), None)
    }

    /// Applies a command sent with a key by a person whose role was decided outside
    /// the roles file (the Kubernetes API server's RBAC, `kube_api.rs`): `judged` is
    /// their role for this request and why; the command is checked against it and
    /// recorded, done or refused, as any other.
    pub fn apply_judged(
        &self,
        actor: Actor,
        command: Command,
        key: String,
        judged: Judged,
    ) -> Result<Ack, Refusal> {
        self.send(actor, command, None, Some(key), Some(judged))
    }

    /// Writes a checkpoint now (a reader wants the cluster as it is).
    pub fn checkpoint_now(&self) -> Result<(), String> {
        self.ask(|reply| Request::Checkpoint { reply })?
    }

    /// One command to the engine, with this handle's cap: every `apply*` sends here.
    fn send(
        &self,
        actor: Actor,
        command: Command,
        expect: Option<Box<Preview>>,
        key: Option<String>,
        judged: Option<Judged>,
    ) -> Result<Ack, Refusal> {
        let cap = self.cap;
        self.ask(|reply| Request::Command {
            actor,
            command,
            cap,
            expect,
            key,
            judged,
            reply,
        })
        .map_err(Refusal::NoAnswer)?
    }

    /// Applies a command only if it would still do what `preview` says (evict and
    /// start the same jobs, move quotas the same way); otherwise nothing is done and
    /// the new preview comes back (`Refusal::Changed`).
    pub fn apply_as_previewed(
        &self,
        actor: Actor,
        command: Command,
        preview: Preview,
    ) -> Result<Ack, Refusal> {
        self.send(actor, command, Some(Box::new(preview)), None, None)
    }

    /// A handle whose commands act with at most `role` (`--read-only`: viewer).
    pub fn capped(&self, role: Role) -> EngineHandle {
        let mut h = self.clone();
        h.cap = Some(h.cap.map_or(role, |c| c.min(role)));
        h
    }

    /// The role `actor` acts with through this handle, and why.
    pub fn grant(&self, actor: &Actor) -> Result<Grant, String> {
        let cap = self.cap;
        self.ask(|reply| Request::Grant {
            actor: actor.clone(),
            cap,
            reply,
        })
    }

    /// The explanation of a job, now.
    pub fn explain(&self, job: &str) -> Result<Explanation, String> {
        self.ask(|reply| Request::Explain {
            job: job.to_string(),
            reply,
        })?
    }

    /// What a command would do now, computed on a copy (nothing changes).
    pub fn what_if(&self, actor: Actor, command: Command) -> Result<Preview, String> {
        self.ask(|reply| Request::WhatIf {
            actor,
            command,
            reply,
        })
    }

    /// A job's spec, as submitted (for asking other clusters how it would fare there).
    pub fn spec(&self, job: &str) -> Result<maar_scheduler::JobSpec, String> {
        self.ask(|reply| Request::Spec {
            job: job.to_string(),
            reply,
        })?
    }

    /// How a job would fare here if it were submitted now (placed at once, or its
    /// forecast start and why it waits), evaluated on a copy: what a federation of
    /// clusters dispatches by (`maar_scheduler::dispatch`).
    pub fn prospect(
        &self,
        spec: &maar_scheduler::JobSpec,
    ) -> Result<maar_scheduler::dispatch::Prospect, String> {
        self.ask(|reply| Request::Prospect {
            spec: Box::new(spec.clone()),
            reply,
        })?
    }

    /// [`EngineHandle::prospect`] only where it needs no copy of the cluster (cheap on
    /// a cluster of any size); `None` where a copy must decide.
    pub fn prospect_quick(
        &self,
        spec: &maar_scheduler::JobSpec,
    ) -> Result<Option<maar_scheduler::dispatch::Prospect>, String> {
        self.ask(|reply| Request::ProspectQuick {
            spec: Box::new(spec.clone()),
            reply,
        })?
    }

    /// How a job waiting here would fare were it withdrawn and submitted here again now
    /// (`maar_scheduler::Core::prospect_again`): what a federation compares with the
    /// other clusters when the job's file asks for `auto`.
    pub fn prospect_again(&self, job: &str) -> Result<maar_scheduler::dispatch::Prospect, String> {
        self.ask(|reply| Request::ProspectAgain {
            job: job.to_string(),
            reply,
        })?
    }

    /// The federation says why a job held for it is not sent yet
    /// ([`maar_scheduler::Observation::NotSent`]): its reason here. (Leaving it here is
    /// the `keep` command.)
    pub fn not_sent(&self, job: &str, why: &str) -> Result<String, String> {
        self.ask(|reply| Request::NotSent {
            job: job.to_string(),
            why: why.to_string(),
            reply,
        })?
    }

    /// The jobs held for the federation (`project/name`, the cluster asked for), read
    /// of the core itself: a headless engine publishes its views seldom, and the
    /// mover decides each within a second.
    pub fn held_jobs(&self) -> Result<Vec<(String, String)>, String> {
        self.ask(|reply| Request::Held { reply })
    }

    /// The cluster as it was at cluster time `t`, from the record.
    pub fn at(&self, t: u64) -> Result<Past, String> {
        self.ask(|reply| Request::At { t, reply })?
    }

    /// Pauses or resumes; returns the view at that moment (what actions then act on).
    pub fn set_paused(&self, paused: bool) -> Result<Arc<View>, String> {
        self.ask(|reply| Request::Pause { paused, reply })
    }

    pub fn set_speed(&self, speed: f64) {
        let _ = self.tx.send(Request::Speed(speed));
    }

    /// Waits until the engine has handled everything sent before, and returns a fresh
    /// view.
    pub fn sync(&self) -> Result<Arc<View>, String> {
        self.ask(|reply| Request::Sync { reply })
    }

    /// Whether the engine thread answers within `within` (it handles requests between
    /// bounded steps, so a live engine answers in well under a second); the latest
    /// published view when it does. Nothing is published for it (probes ask often).
    pub fn alive_within(&self, within: Duration) -> Result<Arc<View>, String> {
        self.ask_within(within, |reply| Request::Ping { reply })?;
        Ok(self.view())
    }

    /// The latest published view (never waits).
    pub fn view(&self) -> Arc<View> {
        self.views.borrow().clone()
    }

    /// A receiver that wakes when a new view is published.
    pub fn watch(&self) -> watch::Receiver<Arc<View>> {
        self.views.clone()
    }

    /// Keeps a way in open until the engine shuts down.
    pub fn keep_door(&self, door: Box<dyn Door>) {
        if let Ok(mut d) = self.doors.lock() {
            d.push(door);
        }
    }

    /// Stops the engine (a last checkpoint is written) and waits for it.
    pub fn shutdown(&self) {
        let doors = self
            .doors
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default();
        for mut d in doors {
            d.close();
        }
        let _ = self.tx.send(Request::Stop);
        if let Some(t) = self.thread.lock().expect("join handle").take() {
            let _ = t.join();
        }
    }
}

struct Engine {
    core: Core,
    driver: Box<dyn Driver>,
    record: Option<Record>,
    /// Newest command reflected in the core.
    seq: i64,
    paused: bool,
    speed: f64,
    achieved: f64,
    /// Events not yet written to the record.
    unwritten: Vec<Event>,
    changed: bool,
    version: u64,
    views: watch::Sender<Arc<View>>,
    record_error: Option<String>,
    recorded: i64,
    last_checkpoint: Instant,
    /// Cluster time of the last checkpoint.
    checkpoint_at: u64,
    checkpoint_needed: bool,
    /// What the last checkpoint held: (next event, last command) sequence numbers.
    checkpointed: (u64, i64),
    /// How long the last checkpoint took.
    checkpoint_cost: Duration,
    /// Set when this engine lost the state file (taken over, deleted, replaced):
    /// commands are refused and the engine stops.
    lost: Option<String>,
    roles: Arc<Roles>,
    /// The roles file as it was when read ([`roles_stamp`]).
    roles_stamp: Option<RolesStamp>,
    /// The roles file read at the start, watched for changes.
    roles_watch: Option<std::path::PathBuf>,
    /// Refused commands recorded per user in the current window (its start, how many).
    refusals: std::collections::HashMap<String, (Instant, u32)>,
    publish_every: Duration,
    tick_publish_every: Duration,
    /// See [`EngineOptions::snapshots`].
    snapshots: bool,
    /// Only the clock moved since the last publish.
    ticked: bool,
    observe: Option<Arc<crate::observe::Observe>>,
    /// The owner of the state file (None without one).
    owner: Option<u32>,
    /// The last start-time forecast, and when the next is due (wall clock).
    forecast: Option<(Instant, maar_scheduler::forecast::Forecast)>,
    /// When jobs were last not starting (the forecast waits out a burst of starts).
    forecast_held: Instant,
}

/// How far a reader's cluster may lag the engine's clock when nothing else happened:
/// a reader's fresh checkpoint is written once the clock moved this many seconds.
const READER_CLOCK_S: u64 = 5;

/// The views' start times are forecast again as often as the forecast takes no more
/// than a tenth of the engine's time (a small cluster at high speed gets one with
/// every view, so its starts never lag its clock; one that takes a second waits ten).
const FORECAST_SHARE: u32 = 10;

/// While jobs are starting (a burst of new pods being bound), the forecast of a
/// cluster of more than [`FORECAST_HOLD_JOBS`] jobs waits, up to this long: made then,
/// it would be out of date within the second, and it would cost as much as the cycles
/// that place the burst. (A small cluster's costs little: its views keep up.)
const FORECAST_HOLD: Duration = Duration::from_secs(5);
const FORECAST_HOLD_JOBS: usize = 1_000;

/// Clusters larger than this get no start times in the views (a forecast copies the
/// cluster and runs cycles on the engine's thread); `maar get jobs` and explain still
/// forecast on demand.
const FORECAST_NODES: usize = 2_000;

/// Starts an engine on a loaded cluster.
pub fn start(mut loaded: Loaded, record: Option<Record>, opts: EngineOptions) -> EngineHandle {
    // Before the first cycle: a job waiting for the federation is never started here
    // in between.
    loaded.core.set_federation(opts.federation.clone());
    let owner = record.as_ref().and_then(|r| crate::roles::owner(r.path()));
    let recorded = record
        .as_ref()
        .and_then(|r| r.command_count().ok())
        .unwrap_or(0);
    let start_at = loaded.core.now();
    let loaded_cluster = loaded.meta.cluster.clone();
    // A cluster that is its record's newest checkpoint (restored with no command after
    // it) holds nothing to checkpoint yet; one just read from the world is in none, and
    // gets its first by the rule of every checkpoint (`run`), not before the first cycle.
    let checkpointed = match record.as_ref().map(Record::newest_checkpoint_mark) {
        Some(Ok(Some(mark)))
            if loaded.replayed == 0 && !loaded.fresh && mark == (loaded.after_seq, start_at) =>
        {
            (loaded.core.cluster().next_event_seq(), loaded.after_seq)
        }
        _ => IN_NO_CHECKPOINT,
    };
    let mut e = Engine {
        core: loaded.core,
        driver: loaded.driver,
        record,
        seq: loaded.after_seq,
        paused: opts.paused,
        speed: opts.speed,
        achieved: 0.0,
        unwritten: Vec::new(),
        changed: true,
        forecast: None,
        forecast_held: Instant::now(),
        version: 0,
        views: watch::channel(Arc::new(View {
            snapshot: Arc::new(Snapshot::default()),
            status: Status {
                kind: "demo",
                paused: true,
                speed: 0.0,
                achieved: 0.0,
                state: None,
                recorded: 0,
                record_error: None,
                fatal: None,
                leading: false,
                unreachable: None,
            },
            version: 0,
        }))
        .0,
        record_error: None,
        recorded,
        last_checkpoint: Instant::now(),
        checkpoint_at: start_at,
        checkpoint_needed: loaded.replayed > 0,
        checkpointed,
        checkpoint_cost: Duration::ZERO,
        lost: None,
        owner,
        // The roles file as it stands in this cluster (its own entry, if any).
        roles: Arc::new(opts.roles.in_cluster(&loaded_cluster)),
        roles_stamp: opts.roles.file_path().and_then(roles_stamp),
        roles_watch: opts.roles.file_path().map(std::path::Path::to_path_buf),
        refusals: Default::default(),
        publish_every: opts.publish_every,
        tick_publish_every: opts.tick_publish_every,
        snapshots: opts.snapshots,
        ticked: false,
        observe: opts.observe.clone(),
    };
    e.publish();
    let views = e.views.subscribe();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::Builder::new()
        .name("maar-engine".into())
        .spawn(move || e.run(rx))
        .expect("start the engine thread");
    EngineHandle {
        cap: None,
        tx,
        views,
        thread: Arc::new(std::sync::Mutex::new(Some(t))),
        doors: Arc::new(std::sync::Mutex::new(Vec::new())),
    }
}

impl Engine {
    fn status(&self) -> Status {
        Status {
            kind: self.driver.kind(),
            paused: self.paused,
            speed: self.speed,
            achieved: self.achieved,
            state: self.record.as_ref().map(|r| r.path().to_path_buf()),
            recorded: self.recorded,
            record_error: self.record_error.clone(),
            fatal: self.lost.clone(),
            leading: self.driver.leading(),
            unreachable: self.driver.unreachable(),
        }
    }

    /// This engine lost its state file: it says why, refuses everything after, and
    /// stops (faces exit non-zero).
    fn lose(&mut self, why: String) {
        tracing::error!(target: "maar", "{why}");
        self.record_error = Some(why.clone());
        self.lost = Some(why);
        self.record = None;
        self.changed = true;
    }

    /// Events the core and driver gave in a step begun at `began`: kept for the
    /// record, and counted for the metrics.
    fn took(&mut self, ev: Vec<Event>, began: Instant) {
        if let Some(o) = &self.observe {
            o.step(began.elapsed());
            o.events(&ev, self.core.cluster());
        }
        self.unwritten.extend(ev);
    }

    fn publish(&mut self) {
        self.publish_as(self.snapshots);
    }

    /// Publishes a view: with the cluster's snapshot when `whole`, else the status
    /// with an empty snapshot (the forecast and what the backend tells of it go on
    /// either way).
    fn publish_as(&mut self, whole: bool) {
        self.version += 1;
        let c = self.core.cluster();
        let mut snapshot = if whole {
            c.snapshot()
        } else {
            Snapshot::default()
        };
        if c.nodes.len() <= FORECAST_NODES {
            let now = Instant::now();
            let due = self.forecast.as_ref().is_none_or(|(due, _)| now >= *due);
            // (Only a large cluster's forecast waits; the check walks the queue.)
            let moving = c.jobs.len() > FORECAST_HOLD_JOBS && c.starting_now();
            if !moving {
                self.forecast_held = now;
            }
            if due && !(moving && now < self.forecast_held + FORECAST_HOLD) {
                let f = c.forecast(maar_scheduler::forecast::Reach::default(), None);
                let due = now + now.elapsed() * FORECAST_SHARE;
                // The backend tells its users too (a Kubernetes pod's annotation).
                self.driver.starts(&self.core, &f);
                self.forecast = Some((due, f));
            }
            if let Some((_, f)) = self.forecast.as_ref().filter(|_| whole) {
                c.fill_starts(&mut snapshot.jobs, f);
            }
        }
        if let Some(o) = self.observe.as_ref().filter(|_| whole) {
            o.view(&snapshot, self.driver.leading());
        }
        let v = View {
            snapshot: Arc::new(snapshot),
            status: self.status(),
            version: self.version,
        };
        self.views.send_replace(Arc::new(v));
        self.changed = false;
        self.ticked = false;
    }

    fn run(mut self, rx: Receiver<Request>) {
        let mut last = Instant::now();
        let mut debt = 0.0f64;
        let mut last_beat = Instant::now();
        let mut last_flush = Instant::now();
        let mut last_publish = Instant::now();
        if let Some(r) = &mut self.record {
            // A record handed over with its lease taken (as every maar that starts
            // takes it, before it restores the cluster) is checked, not taken again:
            // a maar stopped in between may have lost the file to a command applied
            // without it, and taking it back would write over that command.
            let held = if r.holds_lease() {
                r.heartbeat()
            } else {
                r.acquire().map(|()| true)
            };
            match held {
                Ok(true) => {}
                Ok(false) => {
                    let why = format!(
                        "{}: taken over by another maar or a command while this one started; this one no longer records, so it acknowledges nothing and stops",
                        r.path().display()
                    );
                    self.lose(why);
                }
                Err(e) => self.record_error = Some(e.to_string()),
            }
        }
        'run: loop {
            if self.lost.is_some() {
                break 'run;
            }
            let wait = if self.paused {
                Duration::from_millis(100)
            } else {
                Duration::from_millis(25)
            };
            match rx.recv_timeout(wait) {
                Ok(r) => {
                    if !self.handle(r) {
                        break 'run;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break 'run,
            }
            while let Ok(r) = rx.try_recv() {
                if !self.handle(r) {
                    break 'run;
                }
            }
            let now = Instant::now();
            let dt = now.duration_since(last).as_secs_f64();
            last = now;
            if !self.paused {
                // Never more than MAX_LAG behind, but always able to reach a whole second.
                debt = (debt + dt * self.speed).min((self.speed * MAX_LAG).max(1.0));
                let start_sim = self.core.now();
                let end = now + STEP_BUDGET;
                while debt >= 1.0 {
                    let step = (debt.floor() as u64).min(MAX_STEP_S);
                    let to = self.core.now() + step;
                    let began = Instant::now();
                    let ev = self.driver.advance(&mut self.core, to);
                    if ev.is_empty() {
                        self.ticked = true;
                    } else {
                        self.changed = true;
                    }
                    self.took(ev, began);
                    debt -= step as f64;
                    while let Ok(r) = rx.try_recv() {
                        if !self.handle(r) {
                            break 'run;
                        }
                    }
                    if self.paused || Instant::now() > end {
                        break;
                    }
                }
                // A live world between whole seconds (new pods placed at once).
                let began = Instant::now();
                let ev = self.driver.poll(&mut self.core);
                if !ev.is_empty() {
                    self.took(ev, began);
                    self.changed = true;
                }
                let took = now.elapsed().as_secs_f64().max(dt);
                let rate = (self.core.now() - start_sim) as f64 / took.max(1e-3);
                self.achieved = 0.8 * self.achieved + 0.2 * rate;
            } else {
                debt = 0.0;
            }
            if self.lost.is_some() {
                break 'run;
            }
            if self.record.is_some() {
                if last_beat.elapsed() >= HEARTBEAT_EVERY {
                    last_beat = Instant::now();
                    let beat = self.record.as_mut().map(|r| {
                        r.still_there().map_err(|e| e.to_string()).and_then(|()| {
                            match r.heartbeat() {
                                Ok(true) => Ok(()),
                                // Another maar took the state file (this one was
                                // stopped too long): stop writing to it.
                                Ok(false) => Err(format!(
                                    "{}: taken over by another maar; this one no longer records, so it acknowledges nothing and stops",
                                    r.path().display()
                                )),
                                Err(e) => {
                                    self.record_error = Some(e.to_string());
                                    Ok(())
                                }
                            }
                        })
                    });
                    if let Some(Err(why)) = beat {
                        self.lose(why);
                        break 'run;
                    }
                }
                if last_flush.elapsed() >= FLUSH_EVERY {
                    last_flush = Instant::now();
                    self.flush();
                }
                // A checkpoint every CHECKPOINT_EVERY (CHECKPOINT_EVERY_READ_ANEW for a
                // world read anew), and one as the cluster enters each
                // hour of its history (so a look back restores near any moment), at
                // most every HISTORY_MIN_GAP at high speeds.
                let new_hour = self.core.now() / HISTORY_EVERY_S
                    != self.checkpoint_at / HISTORY_EVERY_S
                    && self.last_checkpoint.elapsed() >= HISTORY_MIN_GAP;
                // A large cluster's checkpoint costs time (50k jobs: ~50 MB): the next
                // one waits at least 20 times as long as the last took. A cluster in
                // which nothing happened since (no event, no command) gets none, large
                // or small: it would write what the last one holds (an idle Kubernetes
                // cluster of 1,000 nodes and 5,000 pods spent 3 ms of CPU a second on
                // such copies).
                let period = if self.driver.world_read_anew() {
                    CHECKPOINT_EVERY_READ_ANEW
                } else {
                    CHECKPOINT_EVERY
                };
                let every = period.max(self.checkpoint_cost * 20);
                let moved = (self.core.cluster().next_event_seq(), self.seq) != self.checkpointed;
                if self.checkpoint_needed
                    || (!self.paused
                        && moved
                        && (self.last_checkpoint.elapsed() >= every || new_hour))
                {
                    self.checkpoint();
                }
            } else if self.unwritten.len() > 10_000 {
                self.unwritten.clear();
            }
            let due = if self.changed {
                self.publish_every
            } else {
                self.tick_publish_every
            };
            if (self.changed || self.ticked) && (self.paused || last_publish.elapsed() >= due) {
                last_publish = Instant::now();
                self.publish();
            }
        }
        let began = Instant::now();
        let ev = self.driver.stop(&mut self.core);
        self.took(ev, began);
        self.checkpoint();
        if let Some(r) = &mut self.record {
            let _ = r.release();
        }
        if self.lost.is_some() {
            // The faces learn why from the last view.
            self.publish();
        }
    }

    /// Handles one request; false to stop.
    fn handle(&mut self, r: Request) -> bool {
        match r {
            Request::Command {
                actor,
                command,
                cap,
                expect,
                key,
                judged,
                reply,
            } => {
                if let Some(want) = expect {
                    let now = what_if(
                        &self.core,
                        self.driver.as_ref(),
                        actor.clone(),
                        command.clone(),
                    );
                    let same = now.accepted == want.accepted
                        && now.evicted == want.evicted
                        && now.started == want.started
                        && now.quotas == want.quotas;
                    if !same {
                        let _ = reply.send(Err(Refusal::Changed(Box::new(now))));
                        return true;
                    }
                }
                let res = self.command(actor, command, key, cap, judged);
                let _ = reply.send(res);
            }
            Request::Checkpoint { reply } => {
                // A reader wants the cluster as it is: written when it moved since the
                // last one, and at most every HISTORY_MIN_GAP (readers asking without
                // pause made a maar write 43 MB/s of copies of the same cluster); the
                // commands after it reach the reader from the record anyway.
                let moved = (self.core.cluster().next_event_seq(), self.seq) != self.checkpointed;
                // A clock that moved READER_CLOCK_S since counts too: a quiet cluster's
                // waits and runs otherwise read as they were when something last
                // happened (`get jobs` showed WAIT 23s for over a minute).
                let ticked = self.core.now() >= self.checkpoint_at + READER_CLOCK_S;
                // A cluster in no checkpoint yet (read from the world a moment ago) is
                // written at once: the record's newest would be another run's, or none.
                let in_none = self.checkpointed == IN_NO_CHECKPOINT;
                if (moved || ticked)
                    && (in_none || self.last_checkpoint.elapsed() >= HISTORY_MIN_GAP)
                {
                    self.checkpoint();
                } else {
                    self.flush();
                }
                let _ = reply.send(match &self.lost {
                    Some(why) => Err(why.clone()),
                    None => Ok(()),
                });
            }
            Request::Grant { actor, cap, reply } => {
                let _ = reply.send(self.grant(&actor, false, cap));
            }
            Request::Explain { job, reply } => {
                let began = Instant::now();
                let c = self.core.cluster();
                let res = c
                    .job_id(&job)
                    .map(|id| c.explain(id))
                    .map_err(|e| e.to_string());
                if let Some(o) = &self.observe {
                    o.question("explain", began.elapsed());
                }
                let _ = reply.send(res);
            }
            Request::WhatIf {
                actor,
                command,
                reply,
            } => {
                let began = Instant::now();
                let p = what_if(&self.core, self.driver.as_ref(), actor, command);
                if let Some(o) = &self.observe {
                    o.question("what_if", began.elapsed());
                }
                let _ = reply.send(p);
            }
            Request::Spec { job, reply } => {
                let c = self.core.cluster();
                let res = c
                    .job_id(&job)
                    .map(|id| maar_scheduler::JobSpec::clone(&c.jobs[id as usize].spec))
                    .map_err(|e| e.to_string());
                let _ = reply.send(res);
            }
            Request::Prospect { spec, reply } => {
                let began = Instant::now();
                let p = maar_scheduler::kit::localized(self.driver.as_ref(), &self.core, &spec)
                    .and_then(|s| self.core.prospect(&s));
                if let Some(o) = &self.observe {
                    o.question("prospect", began.elapsed());
                }
                let _ = reply.send(p);
            }
            Request::ProspectQuick { spec, reply } => {
                let p = maar_scheduler::kit::localized(self.driver.as_ref(), &self.core, &spec)
                    .map(|s| self.core.prospect_quick(&s));
                let _ = reply.send(p);
            }
            Request::ProspectAgain { job, reply } => {
                let began = Instant::now();
                let p = self.core.prospect_again(&job);
                if let Some(o) = &self.observe {
                    o.question("prospect", began.elapsed());
                }
                let _ = reply.send(p);
            }
            Request::NotSent { job, why, reply } => {
                let began = Instant::now();
                let out = self.core.apply_held(maar_scheduler::Input::Observe(
                    maar_scheduler::Observation::NotSent { job, why },
                ));
                let res = out.result.clone().map_err(|e| e.to_string());
                if !out.events.is_empty() {
                    self.changed = true;
                }
                self.took(out.events, began);
                let _ = reply.send(res);
            }
            Request::Held { reply } => {
                let _ = reply.send(self.core.cluster().held_jobs());
            }
            Request::At { t, reply } => {
                let _ = reply.send(self.past(t));
            }
            Request::Pause { paused, reply } => {
                // The real world does not pause: only a simulation does.
                let paused = paused && self.driver.kind() == "demo";
                if self.paused != paused {
                    self.paused = paused;
                    if paused {
                        self.checkpoint_needed = true;
                    }
                }
                self.publish_as(true);
                let _ = reply.send(self.views.borrow().clone());
            }
            Request::Speed(s) => {
                // A real cluster runs in real time.
                if s.is_finite() && s > 0.0 && self.driver.kind() == "demo" {
                    self.speed = s;
                    self.changed = true;
                }
            }
            Request::Ping { reply } => {
                let _ = reply.send(());
            }
            Request::Sync { reply } => {
                self.publish_as(true);
                let _ = reply.send(self.views.borrow().clone());
            }
            Request::Stop => return false,
        }
        true
    }

    /// Reads the roles file again when it changed since it was read ([`roles_stamp`]):
    /// roles are judged as the file stands. One that no longer parses leaves the roles
    /// as they were, said in the log each time it is looked at.
    fn refresh_roles(&mut self) {
        let Some(path) = self.roles_watch.clone() else {
            return;
        };
        let stamp = roles_stamp(&path);
        if stamp == self.roles_stamp {
            return;
        }
        // Removed: the defaults, as with no roles file (a user named in it no more
        // keeps the role it gave); put back: read again.
        match Roles::read_again(&path, self.roles.cluster().map(str::to_string)) {
            Ok(r) => {
                tracing::info!(target: "maar", "{}: roles read again", path.display());
                self.roles = Arc::new(r);
                self.roles_stamp = stamp;
            }
            Err(e) => {
                tracing::error!(target: "maar", "roles not changed: {e}");
            }
        }
    }

    /// Whether one more refusal of `actor`'s is recorded: at most [`REFUSALS_RECORDED`]
    /// in [`REFUSALS_WINDOW`], counted by uid (a Kubernetes user, who has none, by
    /// name); the first past it is said in the log.
    fn refusal_recorded(&mut self, actor: &Actor) -> bool {
        let who = match actor.uid {
            Some(u) => format!("uid {u}"),
            None => format!("user {}", actor.user),
        };
        let now = Instant::now();
        let w = self.refusals.entry(who).or_insert((now, 0));
        if now.duration_since(w.0) >= REFUSALS_WINDOW {
            *w = (now, 0);
        }
        w.1 += 1;
        if w.1 == REFUSALS_RECORDED + 1 {
            tracing::warn!(target: "maar::action", "{actor}: more than {REFUSALS_RECORDED} refused commands this hour; the rest are not recorded");
        }
        w.1 <= REFUSALS_RECORDED
    }

    /// The role of an actor: maar's own actors in this process (no uid, not sent by
    /// another process) act as admin; people by the roles file.
    fn grant(&mut self, actor: &Actor, sent: bool, cap: Option<Role>) -> Grant {
        self.refresh_roles();
        if actor.uid.is_none() && !sent && cap.is_none() {
            return Grant {
                role: Role::Admin,
                why: format!("{actor} is part of maar"),
            };
        }
        self.roles.grant(actor, self.owner, cap)
    }

    /// Applies a command (if the actor's role allows it) and records it, or its
    /// refusal, before answering.
    fn command(
        &mut self,
        actor: Actor,
        command: Command,
        key: Option<String>,
        cap: Option<Role>,
        judged: Option<Judged>,
    ) -> Result<Ack, Refusal> {
        if let Some(why) = &self.lost {
            return Err(Refusal::Record(why.clone()));
        }
        // Too large to take: refused at the door, said in the log, not recorded (its
        // text is what is too large).
        if key.as_ref().is_some_and(|k| k.len() > MAX_KEY) {
            return Err(Refusal::Refused {
                why: format!("not taken: its key is longer than {MAX_KEY} bytes"),
                seq: None,
            });
        }
        if let Some(why) = command.too_large() {
            tracing::warn!(target: "maar::action", "{actor}: refused a command: {why}");
            return Err(Refusal::Refused {
                why: format!("not taken: {why}"),
                seq: None,
            });
        }
        // Asked again (its sender lost the answer): the first answer, nothing applied.
        // Only to its sender: another user giving a key seen in the audit is judged and
        // recorded as any command (without the key, which is taken).
        // Sent by another process (it carries a key): judged as such, even when the
        // key is dropped below.
        let sent = key.is_some();
        let mut key = key;
        if let (Some(k), Some(r)) = (key.clone(), &self.record) {
            let first = match r.answered(&k) {
                Ok(row) => row,
                Err(e) => return Err(Refusal::Record(e.to_string())),
            };
            // Recorded for another: this sender's own use of that key is kept apart
            // (under the key and its uid), still at most once.
            let row = match first {
                Some(row) if row.actor.uid != actor.uid || row.actor.user != actor.user => {
                    let mine = format!(
                        "{k}@{}",
                        actor
                            .uid
                            .map_or_else(|| actor.user.clone(), |u| u.to_string())
                    );
                    let again = match r.answered(&mine) {
                        Ok(row) => row,
                        Err(e) => return Err(Refusal::Record(e.to_string())),
                    };
                    key = Some(mine);
                    again.filter(|row| row.actor.uid == actor.uid && row.actor.user == actor.user)
                }
                row => row,
            };
            if let Some(row) = row {
                // A key names one command: the same key with another command is a
                // mistake of the sender's, not a retry (it was answered with the first
                // command's result, as if done).
                // (A refused command is recorded trimmed.)
                if row.command != command && row.command != command.trimmed(256) {
                    return Err(Refusal::Refused {
                        why: format!(
                            "not done: key {k} was used for another command (#{}: {}); a key names one command, and a retry sends the same one",
                            row.seq,
                            row.command.describe()
                        ),
                        seq: None,
                    });
                }
                return match row.result {
                    Ok(message) => Ok(Ack {
                        message,
                        seq: Some(row.seq),
                    }),
                    Err(why) => Err(Refusal::Refused {
                        why,
                        seq: Some(row.seq),
                    }),
                };
            }
        }
        let at = self.core.now();
        let what = command.describe();
        // A job named without its project is recorded under its full name.
        let object = command.job_named().and_then(|job| {
            let c = self.core.cluster();
            c.job_id(job).ok().map(|id| c.job_ref(id))
        });
        let need = command.required_role();
        let (role, why) = match judged {
            Some(j) => {
                let j = j.capped(cap);
                (j.role, j.why)
            }
            None => {
                let g = self.grant(&actor, sent, cap);
                (Some(g.role), g.why)
            }
        };
        let result = if role.is_none_or(|r| r < need) {
            let is = match role {
                Some(r) => format!("is {r}"),
                None => "has no maar role".to_string(),
            };
            Err(format!(
                "{what} needs the {need} role; {} {is} ({why})",
                actor.user
            ))
        } else if !self.driver.leading() {
            // A maar standing by on another's Lease writes nothing to its cluster: a
            // command applied here would be acknowledged and never in force.
            Err(format!(
                "{what}: nothing was done: this maar stands by while another holds the scheduler's Lease and schedules; act through that one (its pod is the Lease's holder: `kubectl -n kube-system get lease maar-scheduler`)"
            ))
        } else {
            let began = Instant::now();
            let out = self
                .driver
                .command(&mut self.core, actor.clone(), command.clone());
            self.took(out.events, began);
            out.result.map_err(|e| e.to_string())
        };
        let mut seq = None;
        let began = Instant::now();
        // A refusal changed nothing: the record keeps who tried what, cut short, and
        // at most REFUSALS_RECORDED of one user's an hour (the rest are answered and
        // logged, not recorded), so refusals cannot grow the file without bound.
        let (kept, kept_result, object) = match &result {
            Err(why) => {
                if !self.refusal_recorded(&actor) {
                    return Err(Refusal::Refused {
                        why: format!("{why} (not recorded: more than {REFUSALS_RECORDED} refusals an hour from {})", actor.user),
                        seq: None,
                    });
                }
                (
                    std::borrow::Cow::Owned(command.trimmed(256)),
                    std::borrow::Cow::Owned(Err(maar_scheduler::limits::cut(why, 1024))),
                    object.map(|o| maar_scheduler::limits::cut(&o, 256)),
                )
            }
            Ok(_) => (
                std::borrow::Cow::Borrowed(&command),
                std::borrow::Cow::Borrowed(&result),
                object,
            ),
        };
        if let Some(r) = &mut self.record {
            let appended = r.append_keyed(
                at,
                &actor,
                &kept,
                &kept_result,
                None,
                key.as_deref(),
                &self.unwritten,
                object.as_deref(),
            );
            if let Some(o) = &self.observe {
                o.write("command", began.elapsed());
            }
            match appended {
                Ok(s) => {
                    self.unwritten.clear();
                    self.recorded += 1;
                    self.record_error = None;
                    if result.is_ok() {
                        self.seq = s;
                        self.checkpoint_needed = true;
                    }
                    seq = Some(s);
                }
                Err(e) => {
                    let why = e.to_string();
                    self.record_error = Some(why.clone());
                    if matches!(
                        e,
                        crate::record::RecordError::LeaseLost { .. }
                            | crate::record::RecordError::Gone { .. }
                    ) {
                        // Fenced: another maar holds the file; nothing of this one
                        // is in force, and it stops.
                        self.lose(why.clone());
                        return Err(Refusal::Record(why));
                    }
                    if result.is_ok() {
                        self.undo();
                    }
                    self.changed = true;
                    return Err(Refusal::Record(why));
                }
            }
        }
        self.changed = true;
        match result {
            Ok(message) => {
                tracing::info!(target: "maar::action", "{actor}: {what}: {message}");
                Ok(Ack { message, seq })
            }
            Err(why) => {
                tracing::warn!(target: "maar::action", "{actor}: refused {what}: {why}");
                Err(Refusal::Refused { why, seq })
            }
        }
    }

    /// The cluster at `t`, restored from the record (events not yet written are
    /// written first, so the past's event list is whole).
    fn past(&mut self, t: u64) -> Result<Past, String> {
        let now = self.core.now();
        if t >= now {
            return Err(format!(
                "{} is not in the past (the cluster is at {})",
                fmt_duration(t),
                fmt_duration(now)
            ));
        }
        self.flush();
        let Some(r) = &self.record else {
            return Err(
                "no state file (started with --no-state), so there is no history to look back at"
                    .into(),
            );
        };
        let l = crate::backend::restore_at(r, t).map_err(|e| e.to_string())?;
        Ok(Past {
            at: l.core.now(),
            now,
            snapshot: Arc::new(l.core.cluster().snapshot()),
            note: l.note.clone(),
            core: l.core,
        })
    }

    /// Goes back to what the record holds (a command that could not be written must
    /// not stay applied).
    fn undo(&mut self) {
        let Some(r) = &self.record else { return };
        match crate::backend::restore(r, false) {
            Ok(l) => {
                self.core = l.core;
                self.driver = l.driver;
                self.seq = l.after_seq;
                self.unwritten.clear();
            }
            Err(e) => {
                self.record_error = Some(format!("cannot go back to the record: {e}"));
            }
        }
    }

    /// A write that failed: a fenced one (the lease is another's) loses the file;
    /// anything else is shown and tried again later.
    fn record_failed(&mut self, e: crate::record::RecordError) {
        use crate::record::RecordError::{Gone, LeaseLost};
        if matches!(e, LeaseLost { .. } | Gone { .. }) {
            self.lose(e.to_string());
        } else {
            self.record_error = Some(e.to_string());
        }
    }

    fn flush(&mut self) {
        if self.unwritten.is_empty() {
            return;
        }
        let began = Instant::now();
        if let Some(r) = &mut self.record {
            let written = r.append_events(&self.unwritten);
            if let Some(o) = &self.observe {
                o.write("events", began.elapsed());
            }
            match written {
                Ok(()) => {
                    self.unwritten.iter().for_each(crate::logging::event);
                    self.unwritten.clear()
                }
                Err(e) => self.record_failed(e),
            }
        }
    }

    fn checkpoint(&mut self) {
        self.flush();
        let started = Instant::now();
        self.last_checkpoint = started;
        self.checkpoint_at = self.core.now();
        self.checkpoint_needed = false;
        self.checkpointed = (self.core.cluster().next_event_seq(), self.seq);
        let Some(r) = &mut self.record else { return };
        // Written from the core itself: a large cluster is not held twice meanwhile.
        let driver = self.driver.save().to_string();
        if let Err(e) = r.checkpoint_core(self.seq, &self.core, &driver) {
            self.record_failed(e);
        }
        self.checkpoint_cost = started.elapsed();
        if let Some(o) = &self.observe {
            o.write("checkpoint", self.checkpoint_cost);
        }
    }
}

/// The longest key a command may carry, bytes (maar's own are 32 hex digits).
pub const MAX_KEY: usize = 128;
/// One user's refused commands recorded in [`REFUSALS_WINDOW`]; more are answered
/// and logged, not recorded (a refusal changed nothing; its record says who tried).
pub const REFUSALS_RECORDED: u32 = 60;
/// The window of [`REFUSALS_RECORDED`]: an hour, so one user's refusals grow the file
/// by at most 60 trimmed rows an hour.
pub const REFUSALS_WINDOW: Duration = Duration::from_secs(3600);

/// What tells a roles file changed: its inode (a file put in its place), size,
/// modification and change times (a copy that kept the old modification time, as
/// `cp -p` and `rsync -a` make, still changes the change time).
type RolesStamp = (u64, u64, i64, i64, i64, i64);

fn roles_stamp(path: &std::path::Path) -> Option<RolesStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

pub use maar_scheduler::kit::Bare;
