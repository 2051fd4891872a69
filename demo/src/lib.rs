//! # maar-demo
//!
//! The simulated clusters behind maar's demo, kept out of the core: the scenario
//! format ([`scenario`]), the discrete-event simulation that drives the core as a
//! [`Driver`](maar_scheduler::Driver) ([`sim`]), and large synthetic clusters for
//! benchmarks ([`synthetic`]). The scenario files themselves (`lab.yaml`, `cases/`) sit
//! beside this crate.
//!
//! Like the core, this crate does no I/O, starts no thread and reads no clock.

pub mod scenario;
pub mod sim;
pub mod synthetic;

pub use scenario::Scenario;
pub use sim::Sim;

use maar_scheduler::{Actor, Cluster, ClusterError, Command, Core, Event, JobId, JobSpec, Output};

/// The built-in demo lab (`demo/lab.yaml`).
pub const LAB_YAML: &str = include_str!("../lab.yaml");
/// The demo's second site (`maar demo --clusters 2`), compiled in.
pub const SITE_B_YAML: &str = include_str!("../site-b.yaml");

/// A core and the simulation that drives it, together: what headless commands and
/// tests use. (The console's engine holds the two itself.)
pub struct Demo {
    pub core: Core,
    pub sim: Sim,
    /// Every event of the run, when kept ([`Demo::keep_events`]).
    log: Option<Vec<Event>>,
}

impl Demo {
    pub fn new(scenario: Scenario, seed: Option<u64>) -> Result<Demo, scenario::BuildError> {
        let (sim, cluster) = Sim::new(scenario, seed)?;
        Ok(Demo {
            core: Core::new(cluster),
            sim,
            log: None,
        })
    }

    /// A demo from a core and its simulation (e.g. both restored from a checkpoint).
    pub fn from_parts(core: Core, sim: Sim) -> Demo {
        Demo {
            core,
            sim,
            log: None,
        }
    }

    /// Keeps every event from now on (the core itself keeps only a window).
    pub fn keep_events(mut self) -> Demo {
        self.log = Some(
            self.core
                .cluster()
                .events
                .iter()
                .map(|e| maar_scheduler::Event::clone(e))
                .collect(),
        );
        self
    }

    /// Every event since [`Demo::keep_events`] (empty if not kept).
    pub fn events(&self) -> &[Event] {
        self.log.as_deref().unwrap_or(&[])
    }

    fn note(&mut self, mut ev: Vec<Event>) {
        if let Some(l) = &mut self.log {
            l.append(&mut ev);
        }
    }

    pub fn cluster(&self) -> &Cluster {
        self.core.cluster()
    }

    pub fn now(&self) -> u64 {
        self.core.now()
    }

    pub fn seed(&self) -> u64 {
        self.sim.seed()
    }

    /// Runs the simulation up to `until`.
    pub fn run_until(&mut self, until: u64) {
        let log = &mut self.log;
        self.sim.run_until_into(&mut self.core, until, &mut |ev| {
            if let Some(l) = log {
                l.append(ev);
            }
        });
    }

    /// Applies an operator command now (as the operator `operator`).
    pub fn apply(&mut self, cmd: Command) -> Result<String, ClusterError> {
        self.command(Actor::system("operator"), cmd).result
    }

    /// Applies a command given by `actor` now, and what follows.
    pub fn command(&mut self, actor: Actor, cmd: Command) -> Output {
        let out = self.sim.apply(&mut self.core, actor, cmd);
        self.note(out.events.clone());
        out
    }

    /// Submits a job now, as an arrival, with an optional simulated runtime.
    pub fn submit(&mut self, spec: JobSpec, runtime_s: Option<u64>) -> Result<JobId, ClusterError> {
        let (r, ev) = self.sim.submit(&mut self.core, spec, runtime_s);
        self.note(ev);
        r
    }
}
