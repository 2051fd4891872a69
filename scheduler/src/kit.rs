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
}

impl Offline {
    /// The offline driver of a kind (`local`, `kube`), with the world's own reading of
    /// commands (local mode refuses what one machine cannot do), if any.
    pub fn new(kind: &'static str, localize: Option<Localize>) -> Offline {
        Offline { kind, localize }
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
        let command = match self.localize {
            Some(f) => match f(core, command) {
                Ok(c) => c,
                Err(refused) => return refused,
            },
            None => command,
        };
        core.apply(Input::Command { actor, command })
    }

    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn fork(&self) -> Box<dyn Driver> {
        Box::new(self.clone())
    }
}

/// A driver with no world of its own: the clock and scheduling cycles only, every
/// bind confirmed at once (a synthetic cluster, a benchmark).
pub struct Bare;

impl Bare {
    /// One cycle, every bind confirmed at once.
    fn settle(core: &mut Core, events: &mut Vec<Event>, decisions: &mut Vec<Decision>) {
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
