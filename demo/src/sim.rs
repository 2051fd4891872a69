//! The discrete-event simulation behind the demo cluster and `maar sim`: a driver of
//! the core.
//!
//! Timers (arrivals, completions, faults, scripted commands, autoscaler and telemetry
//! ticks) are processed in (time, insertion) order. For each instant the simulation
//! advances the core's clock, feeds what happens as observations, then ends the
//! instant with a scheduling cycle if anything changed, and reacts to the decisions
//! (a started job gets its completion timer; every bind is confirmed at once). It
//! touches the core only through [`Input`]s. All randomness comes from one seeded
//! ChaCha generator, so the same scenario and seed give the same event log, byte for
//! byte, however the run is cut into steps; and its whole state serialises, so a
//! checkpoint can be resumed exactly.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use maar_scheduler::input::{GpuReading, JobOutcome, NodeReading};
use maar_scheduler::model::*;
use maar_scheduler::{
    Actor, Cluster, ClusterError, Command, Core, Decision, Driver, Event, Input, Observation,
    Output, Severity,
};

use crate::scenario::{BuildError, FaultKind, Scenario, Traffic};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Timer {
    Submit(usize),
    Generate(usize),
    Finish(JobId, u32),
    Oom(JobId, u32),
    Fault(usize),
    GpuRecover(NodeId, u32),
    NodeRecover(NodeId),
    DiskRecover(NodeId),
    RandomFault,
    Command(usize),
    QuotaRequest(usize, usize),
    Restart(JobId),
    Tick,
}

impl Timer {
    /// A scripted operator's act (a command, a quota request), not the world's.
    fn is_operator(&self) -> bool {
        matches!(self, Timer::Command(_) | Timer::QuotaRequest(..))
    }
}

/// Added to the insertion sequence of operator timers, so that they sort after the
/// world's timers of the same instant.
const OPERATOR_SEQ: u64 = 1 << 62;

/// Everything the simulation keeps besides the scenario (what a checkpoint saves).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SimState {
    seed: u64,
    rng: ChaCha8Rng,
    /// Pending timers as (time, insertion sequence, timer).
    timers: BinaryHeap<Reverse<(u64, u64, Timer)>>,
    seq: u64,
    dirty: bool,
    /// Services with simulated traffic: job -> index of its scenario job.
    traffic: BTreeMap<JobId, usize>,
    /// Jobs planned to be OOM-killed once, at this fraction of their runtime.
    oom_plan: BTreeMap<JobId, f64>,
    restart_timers: BTreeSet<(JobId, u64)>,
    generated: Vec<u32>,
    /// Jobs of the generators, with the generator of each (random OOM faults pick
    /// among these, so a scripted job meets only the faults its scenario scripts).
    background: BTreeMap<JobId, usize>,
    /// When the job sets above were last cleared of jobs the core no longer holds.
    #[serde(default)]
    last_prune: u64,
}

/// A running simulation of a scenario. It holds no cluster: the core does.
#[derive(Clone)]
pub struct Sim {
    pub scenario: Scenario,
    st: SimState,
    /// What the simulation remembers to keep a step's cost to what changed; derived,
    /// never saved (a resumed simulation starts it over and does the same).
    memo: Memo,
}

/// Derived knowledge of the simulation (see [`Sim`]): none of it changes a run.
#[derive(Clone, Debug, Default)]
struct Memo {
    /// The nodes whose last telemetry reported a busy card; empty and `reported` false
    /// until every node has been reported once. A node idle then and now needs no new
    /// reading: it would write what the core already holds.
    busy: Vec<bool>,
    reported: bool,
    /// The nodes with GPUs, in id order (random GPU faults pick among them), for a
    /// cluster of this many nodes.
    gpu_nodes: Option<(usize, Vec<NodeId>)>,
}

/// The actor of scripted commands.
fn scenario_actor() -> Actor {
    Actor::system("scenario")
}

fn name_of(c: &Cluster, id: JobId) -> String {
    let j = &c.jobs[id as usize];
    format!("{}/{}", j.spec.project, j.spec.name)
}

impl Sim {
    /// Builds the cluster of a scenario (to hand to a [`Core`]) and the simulation
    /// that drives it. `seed` overrides the scenario's own.
    pub fn new(scenario: Scenario, seed: Option<u64>) -> Result<(Sim, Cluster), BuildError> {
        let cluster = scenario.build()?;
        let seed = seed.unwrap_or(scenario.seed);
        let mut sim = Sim {
            st: SimState {
                seed,
                rng: ChaCha8Rng::seed_from_u64(seed),
                timers: BinaryHeap::new(),
                seq: 0,
                dirty: true,
                traffic: BTreeMap::new(),
                oom_plan: BTreeMap::new(),
                restart_timers: BTreeSet::new(),
                generated: vec![0; scenario.workload.generators.len()],
                background: BTreeMap::new(),
                last_prune: 0,
            },
            scenario,
            memo: Memo::default(),
        };
        let mut initial: Vec<(u64, Timer)> = Vec::new();
        let sc = &sim.scenario;
        for (i, j) in sc.workload.jobs.iter().enumerate() {
            initial.push((j.at.0, Timer::Submit(i)));
        }
        for (i, f) in sc.faults.iter().enumerate() {
            initial.push((f.at.0, Timer::Fault(i)));
        }
        if let Some(rf) = &sc.random_faults {
            initial.push((rf.every.0.max(1), Timer::RandomFault));
        }
        for (i, c) in sc.commands.iter().enumerate() {
            initial.push((c.at.0, Timer::Command(i)));
        }
        for (pi, p) in sc.projects.iter().enumerate() {
            for (ri, r) in p.requests.iter().enumerate() {
                initial.push((r.at.0, Timer::QuotaRequest(pi, ri)));
            }
        }
        for (at, t) in initial {
            sim.push(at, t);
        }
        for i in 0..sim.scenario.workload.generators.len() {
            let start = sim.scenario.workload.generators[i].start.0;
            let next = start + sim.interarrival(i);
            sim.push(next, Timer::Generate(i));
        }
        sim.push(0, Timer::Tick);
        Ok((sim, cluster))
    }

    pub fn seed(&self) -> u64 {
        self.st.seed
    }

    /// The simulation's own state, for a checkpoint.
    pub fn save_state(&self) -> serde_json::Value {
        serde_json::to_value(&self.st).expect("simulation state serialises")
    }

    /// A simulation of `scenario` resumed from a saved state.
    pub fn restore(scenario: Scenario, state: serde_json::Value) -> Result<Sim, String> {
        let st: SimState = serde_json::from_value(state).map_err(|e| e.to_string())?;
        if st.generated.len() != scenario.workload.generators.len() {
            return Err("the saved simulation does not belong to this scenario".into());
        }
        Ok(Sim {
            scenario,
            st,
            memo: Memo::default(),
        })
    }

    fn push(&mut self, at: u64, t: Timer) {
        self.st.seq += 1;
        // An operator's scripted command comes after everything the world does in
        // its instant, and after the cycle that follows it: it meets the cluster as
        // an operator (or a what-if preview) at that moment would.
        let seq = if t.is_operator() {
            OPERATOR_SEQ | self.st.seq
        } else {
            self.st.seq
        };
        self.st.timers.push(Reverse((at, seq, t)));
    }

    fn interarrival(&mut self, gen: usize) -> u64 {
        let rate = self.scenario.workload.generators[gen].rate_per_hour;
        let u: f64 = self.st.rng.gen_range(f64::EPSILON..1.0);
        ((-u.ln()) / rate * 3600.0).ceil().clamp(1.0, 1e12) as u64
    }

    /// Time of the next timer, if any.
    pub fn next_timer(&self) -> Option<u64> {
        self.st.timers.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Feeds one input, keeping its events; marks the instant dirty when it changed
    /// something (any event means a change).
    fn feed(&mut self, core: &mut Core, input: Input, log: &mut Vec<Event>) -> Output {
        let mut out = core.apply(input);
        if !out.events.is_empty() {
            self.st.dirty = true;
        }
        log.append(&mut out.events);
        out
    }

    fn observe(&mut self, core: &mut Core, o: Observation, log: &mut Vec<Event>) -> Output {
        self.feed(core, Input::Observe(o), log)
    }

    /// Observes a job arriving; its id when the core took it.
    fn observe_submit(
        &mut self,
        core: &mut Core,
        spec: JobSpec,
        log: &mut Vec<Event>,
    ) -> Result<JobId, ClusterError> {
        let out = self.observe(
            core,
            Observation::JobSubmitted {
                spec: Box::new(spec),
            },
            log,
        );
        out.result
            .map(|_| out.job.expect("a submission names its job"))
    }

    /// Runs every timer up to and including `until`, then leaves the clock at `until`.
    /// Returns the events, in order.
    pub fn run_until(&mut self, core: &mut Core, until: u64) -> Vec<Event> {
        let mut all = Vec::new();
        self.run_until_into(core, until, &mut |ev| all.append(ev));
        all
    }

    /// As [`Sim::run_until`], handing the events of each instant to `sink` (so a long
    /// run holds only one instant's events at a time).
    pub fn run_until_into(
        &mut self,
        core: &mut Core,
        until: u64,
        sink: &mut dyn FnMut(&mut Vec<Event>),
    ) {
        let mut log = Vec::new();
        while let Some(t) = self.next_timer() {
            if t > until {
                break;
            }
            self.feed(core, Input::Advance { to: t }, &mut log);
            while let Some(&Reverse((t2, _, timer))) = self.st.timers.peek() {
                if t2 != t {
                    break;
                }
                self.st.timers.pop();
                if timer.is_operator() {
                    self.settle(core, &mut log);
                }
                self.fire(core, timer, &mut log);
            }
            self.settle(core, &mut log);
            sink(&mut log);
            log.clear();
        }
        self.feed(core, Input::Advance { to: until }, &mut log);
        self.settle(core, &mut log);
        sink(&mut log);
    }

    /// Applies a command now, then what follows from it.
    pub fn apply(&mut self, core: &mut Core, actor: Actor, cmd: Command) -> Output {
        let mut log = Vec::new();
        let mut out = core.apply(Input::Command {
            actor,
            command: cmd,
        });
        log.append(&mut out.events);
        if out.is_ok() {
            self.st.dirty = true;
            let decisions = self.settle(core, &mut log);
            out.decisions.extend(decisions);
        }
        out.events = log;
        out
    }

    /// Submits a job now, as a scenario arrival would, with an optional simulated
    /// runtime.
    pub fn submit(
        &mut self,
        core: &mut Core,
        mut spec: JobSpec,
        runtime_s: Option<u64>,
    ) -> (Result<JobId, ClusterError>, Vec<Event>) {
        if runtime_s.is_some() {
            spec.est_runtime_s = runtime_s;
        }
        let mut log = Vec::new();
        let r = self.observe_submit(core, spec, &mut log);
        if r.is_ok() {
            self.st.dirty = true;
            self.settle(core, &mut log);
        }
        (r, log)
    }

    /// Ends the instant: a scheduling cycle if anything changed, and the reactions to
    /// its decisions. Returns the decisions.
    fn settle(&mut self, core: &mut Core, log: &mut Vec<Event>) -> Vec<Decision> {
        let mut all = Vec::new();
        while self.st.dirty {
            self.st.dirty = false;
            let out = self.feed(core, Input::Schedule, log);
            self.st.dirty = false;
            let now = core.now();
            for d in &out.decisions {
                let Decision::Bind { id, job, start, .. } = d else {
                    continue;
                };
                if *start {
                    let j = &core.cluster().jobs[*id as usize];
                    let (epoch, remaining, train) =
                        (j.epoch, j.remaining_s, j.spec.kind == JobKind::Train);
                    if let Some(rem) = remaining {
                        self.push(now + rem.max(1), Timer::Finish(*id, epoch));
                        if let Some(frac) = self.st.oom_plan.get(id).copied() {
                            self.push(
                                now + ((rem as f64 * frac) as u64).max(1),
                                Timer::Oom(*id, epoch),
                            );
                        }
                    }
                    let used: u32 = if train {
                        self.st.rng.gen_range(50..98)
                    } else {
                        self.st.rng.gen_range(55..80)
                    };
                    let o = Observation::JobUsage {
                        job: job.clone(),
                        used_pct: used,
                    };
                    let _ = core.apply(Input::Observe(o));
                }
                // The simulated cluster binds at once.
                let _ = core.apply(Input::Observe(Observation::Bound { job: job.clone() }));
            }
            let restarts: Vec<(JobId, u64)> = core
                .cluster()
                .restarting_jobs()
                .filter_map(|j| j.restart_at.map(|t| (j.id, t)))
                .collect();
            for (id, t) in restarts {
                if self.st.restart_timers.insert((id, t)) {
                    self.push(t, Timer::Restart(id));
                }
            }
            all.extend(out.decisions);
        }
        all
    }

    /// A warning that a scripted step could not be carried out.
    fn refuse(&mut self, core: &mut Core, msg: String, log: &mut Vec<Event>) {
        let o = Observation::Note {
            severity: Severity::Warning,
            reason: "ScenarioRefused".into(),
            object: "cluster/scenario".into(),
            message: msg,
        };
        let mut out = core.apply(Input::Observe(o));
        log.append(&mut out.events);
    }

    fn node_name(core: &Core, n: NodeId) -> String {
        core.cluster().nodes[n as usize].name.clone()
    }

    fn running(core: &Core, id: JobId, epoch: Option<u32>) -> bool {
        core.cluster()
            .jobs
            .get(id)
            .is_some_and(|j| j.phase == Phase::Running && epoch.is_none_or(|e| j.epoch == e))
    }

    fn fire(&mut self, core: &mut Core, timer: Timer, log: &mut Vec<Event>) {
        let now = core.now();
        match timer {
            Timer::Submit(i) => {
                let tj = self.scenario.workload.jobs[i].clone();
                let Ok(mut spec) = tj.manifest.to_job_spec() else {
                    return;
                };
                if let Some(r) = tj.runtime {
                    spec.est_runtime_s = Some(r.0);
                }
                match self.observe_submit(core, spec, log) {
                    Ok(id) => {
                        if tj.traffic.is_some() {
                            self.st.traffic.insert(id, i);
                        }
                    }
                    Err(e) => self.refuse(core, format!("workload.jobs[{i}]: {e}"), log),
                }
                self.st.dirty = true;
            }
            Timer::Generate(g) => {
                // Users whose backlog is full stop submitting for a while.
                let full = self.scenario.workload.generators[g]
                    .max_pending
                    .is_some_and(|max| {
                        // The generator's jobs among the pending ones (the queue is
                        // what waits; the generator's history may be far longer).
                        core.cluster()
                            .pending_jobs()
                            .filter(|j| self.st.background.get(&j.id) == Some(&g))
                            .count()
                            >= max as usize
                    });
                if !full {
                    self.generate(core, g, log);
                }
                let stop = self.scenario.workload.generators[g].stop.map(|d| d.0);
                let next = now + self.interarrival(g);
                if stop.is_none_or(|s| next <= s) {
                    self.push(next, Timer::Generate(g));
                }
                self.st.dirty = true;
            }
            Timer::Finish(id, epoch) => {
                if Self::running(core, id, Some(epoch)) {
                    let o = Observation::JobEnded {
                        job: name_of(core.cluster(), id),
                        outcome: JobOutcome::Succeeded,
                    };
                    self.observe(core, o, log);
                    self.st.dirty = true;
                }
            }
            Timer::Oom(id, epoch) => {
                if Self::running(core, id, Some(epoch)) {
                    self.st.oom_plan.remove(&id);
                    self.oom(core, id, log);
                }
            }
            Timer::Fault(i) => {
                let f = self.scenario.faults[i].clone();
                if let Some(g) = f.gpu_unhealthy {
                    if let Ok(n) = core.cluster().node_id(&g.node) {
                        let o = Observation::GpuHealth {
                            node: g.node.clone(),
                            gpu: g.gpu,
                            healthy: false,
                            reason: format!("XID {}", g.xid),
                        };
                        self.observe(core, o, log);
                        if let Some(d) = g.duration {
                            self.push(now + d.0, Timer::GpuRecover(n, g.gpu));
                        }
                    }
                }
                if let Some(nf) = f.node_not_ready {
                    if let Ok(n) = core.cluster().node_id(&nf.node) {
                        let o = Observation::NodeCondition {
                            node: nf.node.clone(),
                            ready: false,
                            reason: nf.reason.clone(),
                            keeps_jobs: false,
                        };
                        self.observe(core, o, log);
                        if let Some(d) = nf.duration {
                            self.push(now + d.0, Timer::NodeRecover(n));
                        }
                    }
                }
                if let Some(o) = f.oom {
                    match core.cluster().job_id(&o.job) {
                        Ok(id) if Self::running(core, id, None) => self.oom(core, id, log),
                        Ok(_) => self.refuse(
                            core,
                            format!("faults[{i}].oom: job {} is not running", o.job),
                            log,
                        ),
                        Err(e) => self.refuse(core, format!("faults[{i}].oom: {e}"), log),
                    }
                }
                if let Some(df) = f.disk_fill {
                    if let Ok(n) = core.cluster().node_id(&df.node) {
                        let disk = core.cluster().nodes[n as usize].disk;
                        let bytes = (disk as u128 * df.percent.min(100) as u128 / 100) as u64;
                        let o = Observation::DiskUsage {
                            node: df.node.clone(),
                            bytes,
                        };
                        self.observe(core, o, log);
                        if let Some(d) = df.duration {
                            self.push(now + d.0, Timer::DiskRecover(n));
                        }
                    }
                }
                self.st.dirty = true;
            }
            Timer::GpuRecover(n, g) => {
                let o = Observation::GpuHealth {
                    node: Self::node_name(core, n),
                    gpu: g,
                    healthy: true,
                    reason: String::new(),
                };
                self.observe(core, o, log);
                self.st.dirty = true;
            }
            Timer::NodeRecover(n) => {
                let o = Observation::NodeCondition {
                    node: Self::node_name(core, n),
                    ready: true,
                    reason: String::new(),
                    keeps_jobs: false,
                };
                self.observe(core, o, log);
                self.st.dirty = true;
            }
            Timer::DiskRecover(n) => {
                let o = Observation::DiskUsage {
                    node: Self::node_name(core, n),
                    bytes: 0,
                };
                self.observe(core, o, log);
                self.st.dirty = true;
            }
            Timer::RandomFault => {
                self.random_fault(core, log);
                if let Some(rf) = &self.scenario.random_faults {
                    let every = rf.every.0.max(1);
                    self.push(now + every, Timer::RandomFault);
                }
                self.st.dirty = true;
            }
            Timer::Command(i) => {
                let cmd = self.scenario.commands[i].run.clone();
                let out = self.feed(
                    core,
                    Input::Command {
                        actor: scenario_actor(),
                        command: cmd,
                    },
                    log,
                );
                if let Err(e) = out.result {
                    self.refuse(core, format!("commands[{i}]: {e}"), log);
                }
                self.st.dirty = true;
            }
            Timer::QuotaRequest(pi, ri) => {
                let p = &self.scenario.projects[pi];
                let r = &p.requests[ri];
                let cmd = Command::RequestQuota {
                    project: p.name.clone(),
                    pool: r.pool.clone(),
                    gpus: r.gpus,
                    reserved: r.reserved,
                    reason: r.reason.clone(),
                };
                let dirty = self.st.dirty;
                let out = self.feed(
                    core,
                    Input::Command {
                        actor: Actor::system(&p.name),
                        command: cmd,
                    },
                    log,
                );
                // A request changes no placement: it does not call for a cycle.
                self.st.dirty = dirty;
                if let Err(e) = out.result {
                    self.refuse(core, format!("projects[{pi}].requests[{ri}]: {e}"), log);
                }
            }
            Timer::Restart(id) => {
                // The clock advance that brought us here queued the job again.
                self.st.restart_timers.retain(|&(j, _)| j != id);
            }
            Timer::Tick => {
                self.tick(core, log);
                let every = self.scenario.scheduler.tick.0.max(1);
                self.push(now + every, Timer::Tick);
            }
        }
    }

    fn oom(&mut self, core: &mut Core, id: JobId, log: &mut Vec<Event>) {
        let j = &core.cluster().jobs[id as usize];
        let message = format!(
            "container exceeded its memory limit ({}) and was OOM-killed",
            maar_scheduler::quantity::fmt_bytes(j.spec.memory)
        );
        let o = Observation::JobEnded {
            job: name_of(core.cluster(), id),
            outcome: JobOutcome::OomKilled { message },
        };
        self.observe(core, o, log);
        self.st.dirty = true;
    }

    fn generate(&mut self, core: &mut Core, g: usize, log: &mut Vec<Event>) {
        let gen = self.scenario.workload.generators[g].clone();
        self.st.generated[g] += 1;
        let n = self.st.generated[g];
        let total: u32 = gen.shapes.iter().map(|s| s.weight).sum();
        let mut pick = self.st.rng.gen_range(0..total.max(1));
        let shape = gen
            .shapes
            .iter()
            .find(|s| {
                if pick < s.weight {
                    true
                } else {
                    pick -= s.weight;
                    false
                }
            })
            .unwrap_or(&gen.shapes[0])
            .clone();
        let runtime = self.st.rng.gen_range(gen.runtime.min.0..=gen.runtime.max.0);
        let oom = self.st.rng.gen_bool(gen.oom_probability);
        let frac: f64 = self.st.rng.gen_range(0.2..0.8);
        let spec = JobSpec {
            name: format!("{}-{n:05}", gen.name),
            project: gen.project.clone(),
            pool: gen.pool.clone(),
            kind: JobKind::Train,
            priority: shape
                .priority
                .or(gen.priority)
                .map(|p| p.0)
                .unwrap_or(PRIORITY_MEDIUM),
            replicas: 1,
            gpu: GpuRequest {
                count: shape.gpu,
                memory_per_card: shape.gpu_memory.map(|b| b.0),
                models: shape.models.iter().map(|m| m.to_lowercase()).collect(),
                shared: shape.shared,
                milli: None,
                vendor: None,
                resource: None,
            },
            cpu_milli: shape.cpu.0,
            memory: shape.memory.0,
            disk: shape.disk.map(|d| d.0).unwrap_or(0),
            affinity: match shape.affinity {
                Some(maar_scheduler::manifest::GpuAffinity::SameNode) => Affinity::SameNode,
                Some(maar_scheduler::manifest::GpuAffinity::Spread) => Affinity::Spread,
                _ => Affinity::Any,
            },
            restart: gen
                .restart_policy
                .map(|r| r.0)
                .unwrap_or(RestartPolicy::Never),
            est_runtime_s: Some(runtime),
            image: "registry.example.com/ai/train:latest".into(),
            command: Vec::new(),
            node_selector: Default::default(),
            rules: Default::default(),
            dispatched: None,
            sent_start_in: None,
            moved_from: None,
            cluster: None,
            manifest: None,
        };
        match self.observe_submit(core, spec, log) {
            Ok(id) => {
                self.st.background.insert(id, g);
                if oom {
                    self.st.oom_plan.insert(id, frac);
                }
            }
            Err(e) => self.refuse(core, format!("workload.generators[{g}]: {e}"), log),
        }
    }

    fn random_fault(&mut self, core: &mut Core, log: &mut Vec<Event>) {
        let Some(rf) = self.scenario.random_faults.clone() else {
            return;
        };
        let c = core.cluster();
        if rf.kinds.is_empty() || c.nodes.is_empty() {
            return;
        }
        let now = core.now();
        let kind = rf.kinds[self.st.rng.gen_range(0..rf.kinds.len())];
        match kind {
            FaultKind::GpuUnhealthy => {
                // Nodes keep their cards: the list changes only with the node count.
                if self.memo.gpu_nodes.as_ref().map(|g| g.0) != Some(c.nodes.len()) {
                    let list = (0..c.nodes.len() as NodeId)
                        .filter(|&n| !c.nodes[n as usize].gpus.is_empty())
                        .collect();
                    self.memo.gpu_nodes = Some((c.nodes.len(), list));
                }
                let gpu_nodes = &self.memo.gpu_nodes.as_ref().expect("just set").1;
                if gpu_nodes.is_empty() {
                    return;
                }
                let n = gpu_nodes[self.st.rng.gen_range(0..gpu_nodes.len())];
                let g = self.st.rng.gen_range(0..c.nodes[n as usize].gpus.len()) as u32;
                let xid = [79u32, 48, 63, 94][self.st.rng.gen_range(0..4)];
                let o = Observation::GpuHealth {
                    node: Self::node_name(core, n),
                    gpu: g,
                    healthy: false,
                    reason: format!("XID {xid}"),
                };
                self.observe(core, o, log);
                self.push(now + rf.recover_after.0, Timer::GpuRecover(n, g));
            }
            FaultKind::NodeNotReady => {
                let n = self.st.rng.gen_range(0..c.nodes.len()) as NodeId;
                let o = Observation::NodeCondition {
                    node: Self::node_name(core, n),
                    ready: false,
                    reason: "KubeletNotReady".into(),
                    keeps_jobs: false,
                };
                self.observe(core, o, log);
                self.push(now + rf.recover_after.0, Timer::NodeRecover(n));
            }
            FaultKind::Oom => {
                let running: Vec<JobId> = self
                    .st
                    .background
                    .keys()
                    .copied()
                    .filter(|&id| {
                        c.jobs.get(id).is_some_and(|j| {
                            j.phase == Phase::Running && j.spec.kind == JobKind::Train
                        })
                    })
                    .collect();
                if !running.is_empty() {
                    let id = running[self.st.rng.gen_range(0..running.len())];
                    self.oom(core, id, log);
                }
            }
            FaultKind::DiskFill => {
                let n = self.st.rng.gen_range(0..c.nodes.len()) as NodeId;
                let pct: u64 = self.st.rng.gen_range(91..99);
                let disk = c.nodes[n as usize].disk;
                let o = Observation::DiskUsage {
                    node: Self::node_name(core, n),
                    bytes: (disk as u128 * pct as u128 / 100) as u64,
                };
                self.observe(core, o, log);
                self.push(now + rf.recover_after.0, Timer::DiskRecover(n));
            }
        }
    }

    /// Load of a service at `now`, as a share of its full capacity.
    pub fn load(&self, tr: &Traffic, now: u64) -> f64 {
        let hour = (self.scenario.start_hour + now as f64 / 3600.0).rem_euclid(24.0);
        let phase = (hour - tr.peak_hour) / 24.0 * std::f64::consts::TAU;
        tr.base + (tr.peak - tr.base) * (1.0 + phase.cos()) / 2.0
    }

    /// Service load (the autoscaler's metric) and GPU telemetry.
    fn tick(&mut self, core: &mut Core, log: &mut Vec<Event>) {
        let now = core.now();
        // Forget jobs the core no longer holds (hourly: the sets stay small).
        if now >= self.st.last_prune + 3600 {
            self.st.last_prune = now;
            let c = core.cluster();
            self.st.background.retain(|&id, _| c.jobs.get(id).is_some());
            self.st.oom_plan.retain(|&id, _| c.jobs.get(id).is_some());
            self.st.traffic.retain(|&id, _| c.jobs.get(id).is_some());
        }
        let services: Vec<(JobId, usize)> = self.st.traffic.iter().map(|(k, v)| (*k, *v)).collect();
        for (id, idx) in services {
            let Some(tr) = self.scenario.workload.jobs[idx].traffic.clone() else {
                continue;
            };
            let Some(j) = core.cluster().jobs.get(id) else {
                continue;
            };
            let JobKind::Inference(a) = &j.spec.kind else {
                continue;
            };
            if j.phase != Phase::Running {
                continue;
            }
            let load = self.load(&tr, now).clamp(0.0, 1.0);
            // Demand in replicas running at 100% of the metric, as a share of what the
            // running replicas serve.
            let demand = load * a.max as f64 * a.target_pct as f64 / 100.0;
            let running = j.running_replicas().max(1) as f64;
            let o = Observation::ServiceLoad {
                job: name_of(core.cluster(), id),
                usage_pct: demand * 100.0 / running,
            };
            self.observe(core, o, log);
        }
        // Telemetry: utilisation and memory in use on allocated cards. Only the nodes
        // with a busy card now or at the last reading report (after a first reading of
        // all): an idle node's reading is the idle one the core already holds.
        let c = core.cluster();
        let memo = &mut self.memo;
        if memo.busy.len() != c.nodes.len() {
            memo.busy.resize(c.nodes.len(), false);
            memo.reported = false;
        }
        let mut nodes = Vec::new();
        for (i, n) in c.nodes.iter().enumerate() {
            if n.gpus.is_empty() {
                continue;
            }
            let busy = n.gpus.iter().any(|g| !g.allocs.is_empty());
            let was = std::mem::replace(&mut memo.busy[i], busy);
            if memo.reported && !busy && !was {
                continue;
            }
            let mut gpus = Vec::with_capacity(n.gpus.len());
            // The node's cards share a model (the power of the first one serves all).
            let tdp = board_power_w(&n.gpus[0].model);
            for g in &n.gpus {
                let (util, mem) = if g.allocs.is_empty() {
                    (0u8, 0u64)
                } else {
                    let mem: u64 = g
                        .allocs
                        .iter()
                        .map(|a| a.mem * c.jobs[a.job as usize].used_pct.min(100) as u64 / 100)
                        .sum();
                    (self.st.rng.gen_range(35..99u8), mem)
                };
                // Temperature and power follow utilisation: idle around 32 C and a
                // fifth of the board's power, full load near 80 C and its board power.
                let tdp = if g.model == n.gpus[0].model {
                    tdp
                } else {
                    board_power_w(&g.model)
                };
                gpus.push(GpuReading {
                    util_pct: util,
                    mem_used: mem,
                    temp_c: 32 + (util as u32 * 48 / 100) as u8,
                    power_w: (tdp / 5 + (tdp - tdp / 5) * util as u32 / 100) as u16,
                });
            }
            nodes.push(NodeReading {
                node: n.name.clone(),
                gpus,
                host: None,
            });
        }
        self.memo.reported = true;
        // Telemetry changes no placement: it does not call for a cycle.
        let dirty = self.st.dirty;
        self.observe(core, Observation::Telemetry { nodes }, log);
        self.st.dirty = dirty;
    }
}

impl Driver for Sim {
    fn kind(&self) -> &'static str {
        "demo"
    }

    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        self.run_until(core, to)
    }

    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        self.apply(core, actor, command)
    }

    fn save(&self) -> serde_json::Value {
        self.save_state()
    }

    fn fork(&self) -> Box<dyn Driver> {
        Box::new(self.clone())
    }
}

/// Nominal board power of a GPU model, watts (simulated telemetry).
fn board_power_w(model: &str) -> u32 {
    match model {
        m if m.contains("h100") => 700,
        m if m.contains("a100") => 400,
        m if m.contains("4090") => 450,
        m if m.contains("v100") => 300,
        m if m.contains("t4") => 70,
        m if m.contains("l4") => 72,
        _ => 250,
    }
}
