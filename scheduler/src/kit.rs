//! The driver kit: what every driver of the core shares. [`settle`] (scheduling cycles
//! until one decides nothing, each cycle's decisions carried out before the next),
//! [`Offline`] (a recorded cluster with no world attached: a look at its past, a
//! command given while no maar runs it) and [`Bare`] (no world at all: a synthetic
//! cluster, a benchmark).

use crate::command::Command;
use crate::event::Event;
use crate::input::{Actor, Core, Decision, Driver, Input, Observation, Output};

/// At most this many cycles end an instant (a cycle's decisions may free room, or
/// bind what the next one places around).
pub const SETTLE_ROUNDS: usize = 4;

/// Scheduling cycles until `carry_out` says nothing was done (it returns `false`) or
/// [`SETTLE_ROUNDS`] ran; each cycle's events go to `events`, its decisions to
/// `carry_out` before the next cycle.
pub fn settle(
    core: &mut Core,
    events: &mut Vec<Event>,
    mut carry_out: impl FnMut(&mut Core, Vec<Decision>, &mut Vec<Event>) -> bool,
) {
    for _ in 0..SETTLE_ROUNDS {
        let out = core.apply(Input::Schedule);
        events.extend(out.events);
        if !carry_out(core, out.decisions, events) {
            break;
        }
    }
}

/// What an offline driver does with a command before the core sees it: the command
/// as its world would carry it out, or the refusal.
pub type Localize = fn(&Core, Command) -> Result<Command, Output>;

/// A recorded cluster with no world attached (a look at its past, a command given
/// while no maar runs it): the clock moves and commands change the core; nothing is
/// scheduled, started or written until its driver attaches the world again.
#[derive(Clone)]
pub struct Offline {
    kind: &'static str,
    localize: Option<Localize>,
    read_anew: bool,
}

impl Offline {
    /// The offline driver of a kind (`local`, `kube`), with the world's own reading of
    /// commands (local mode refuses what one machine cannot do), if any.
    pub fn new(kind: &'static str, localize: Option<Localize>) -> Offline {
        Offline {
            kind,
            localize,
            read_anew: false,
        }
    }

    /// Of a world read anew at every start (`Driver::world_read_anew`): a command
    /// recorded while no maar runs would never be carried out.
    pub fn read_anew(self) -> Offline {
        Offline {
            read_anew: true,
            ..self
        }
    }
}

impl Driver for Offline {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        core.apply(Input::Advance { to }).events
    }

    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        match Driver::localize(self, core, command) {
            Ok(command) => core.apply(Input::Command { actor, command }),
            Err(refused) => refused,
        }
    }

    fn localize(&self, core: &Core, command: Command) -> Result<Command, Output> {
        match self.localize {
            Some(f) => f(core, command),
            None => Ok(command),
        }
    }

    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn fork(&self) -> Box<dyn Driver> {
        Box::new(self.clone())
    }

    fn world_read_anew(&self) -> bool {
        self.read_anew
    }
}

/// A driver with no world of its own: the clock and scheduling cycles only, every
/// bind confirmed at once (a synthetic cluster, a benchmark).
pub struct Bare;

impl Bare {
    /// One cycle, every bind confirmed at once (also a recorded live cluster's copy,
    /// run as its world would: a dry run, a prospect).
    pub fn settle(core: &mut Core, events: &mut Vec<Event>, decisions: &mut Vec<Decision>) {
        settle(core, events, |core, out, events| {
            for d in &out {
                if let Decision::Bind { job, .. } = d {
                    let o = core.apply(Input::Observe(Observation::Bound { job: job.clone() }));
                    events.extend(o.events);
                }
            }
            decisions.extend(out);
            false
        });
    }
}

impl Driver for Bare {
    fn kind(&self) -> &'static str {
        "bare"
    }

    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        let mut events = core.apply(Input::Advance { to }).events;
        Self::settle(core, &mut events, &mut Vec::new());
        events
    }

    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        let mut out = core.apply(Input::Command { actor, command });
        if out.is_ok() {
            Self::settle(core, &mut out.events, &mut out.decisions);
        }
        out
    }

    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn fork(&self) -> Box<dyn Driver> {
        Box::new(Bare)
    }
}

/// A job as `driver`'s world would take it if submitted now (local mode: its one pool
/// and project), or why that world refuses it (Kubernetes: a file it cannot make).
pub fn localized(
    driver: &dyn Driver,
    core: &Core,
    spec: &crate::JobSpec,
) -> Result<crate::JobSpec, String> {
    match driver.localize(core, Command::Submit(Box::new(spec.clone()))) {
        Ok(Command::Submit(s)) => Ok(*s),
        Ok(_) => Ok(spec.clone()),
        Err(refused) => Err(refused
            .result
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()),
    }
}

/// Why a live backend could not open its world: its options are wrong (a usage error,
/// exit 2), or the world refused or did not answer (exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    Usage(String),
    No(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Usage(m) | OpenError::No(m) => f.write_str(m),
        }
    }
}

/// The cluster as its record last held it, called for at most once by
/// [`Backend::open`]: the newest checkpoint with the commands after it, and the
/// driver's state saved with that checkpoint.
pub type Restore<'a> = Box<dyn FnOnce() -> Result<(Core, serde_json::Value), String> + 'a>;

/// What the state file held when a live backend opens it again.
pub struct Prior<'a> {
    /// The cluster it records (a Kubernetes context, `local-HOST`).
    pub cluster: String,
    /// The newest moment it recorded (cluster time, seconds).
    pub latest: u64,
    /// The sequence number after the newest event it recorded: a cluster built anew
    /// from the world numbers its events on from here (`Cluster::continue_events`).
    pub next_event: u64,
    /// The recorded cluster, restored when the backend asks for it.
    pub restore: Restore<'a>,
}

/// A live backend's world opened: the core and the driver attached to that world.
pub struct Opened {
    pub core: Core,
    pub driver: Box<dyn Driver>,
    /// The cluster to record (`Meta::cluster`); a state file of another cluster is the
    /// backend's to refuse in `open`.
    pub cluster: String,
    /// What opening caused (nodes joined, jobs found or adopted): history to record.
    pub events: Vec<Event>,
    /// The core was built from the world, not from [`Prior::restore`]: its first
    /// checkpoint, written by the engine, holds it (the commands recorded before it are
    /// history), whatever the record's newest checkpoint says.
    pub fresh: bool,
    /// The world named for the operator: "Kubernetes context a (https://..., v1.26.2)".
    pub what: String,
    /// Something to tell the operator when the console opens.
    pub note: Option<String>,
}

/// A live backend: a world that maar schedules (this machine, a Kubernetes cluster),
/// as its crate gives it to the application. The application keeps the state file,
/// the engine and the faces; a new backend is its crate and one line in the
/// application's list (`src/backends.rs`), where its `Args` become `maar NAME`'s
/// options. Implementations do their I/O in their own crates; the core only names
/// the shape.
pub trait Backend: 'static {
    /// `maar NAME`, and the backend its state files record.
    const NAME: &'static str;
    /// Its own options (a clap `Args` in the application's list).
    type Args: Clone + Send;
    /// The state file's name when none is given (`local-HOST`, `kube-CONTEXT`), made
    /// safe for a file by the application.
    fn state_name(args: &Self::Args) -> Result<String, OpenError>;
    /// The options of each cluster the options name, when they name several (`maar
    /// kube --context a --context b`): one console on them all, each cluster with its
    /// own engine and state file. One by default.
    fn each(args: &Self::Args) -> Vec<Self::Args> {
        vec![args.clone()]
    }
    /// Its recorded cluster with no world attached: a look at its past, a command
    /// given while no maar runs it.
    fn offline() -> Offline;
    /// Connects to its world and builds the cluster, or continues `prior` (the state
    /// file at `state` held one of this backend's clusters).
    fn open(
        args: &Self::Args,
        state: &std::path::Path,
        prior: Option<Prior<'_>>,
    ) -> Result<Opened, OpenError>;
}
