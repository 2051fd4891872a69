//! The discrete-event simulation behind the demo cluster and `maar sim`.
//!
//! Timers (arrivals, completions, faults, operator commands, autoscaler ticks) are
//! processed in (time, insertion) order; after each instant a scheduling cycle runs if
//! anything changed. All randomness comes from one seeded ChaCha generator, so the same
//! scenario and seed give the same event log, byte for byte.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster::{Cluster, ClusterError};
use crate::command::Command;
use crate::event::Severity;
use crate::model::*;
use crate::scenario::{BuildError, FaultKind, Scenario, Traffic};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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

/// A running simulation of a scenario.
pub struct Sim {
    pub cluster: Cluster,
    pub scenario: Scenario,
    pub seed: u64,
    rng: ChaCha8Rng,
    timers: BinaryHeap<Reverse<(u64, u64, Timer)>>,
    seq: u64,
    dirty: bool,
    traffic: BTreeMap<JobId, Traffic>,
    history: BTreeMap<JobId, VecDeque<(u64, u32)>>,
    /// Jobs planned to be OOM-killed once, at this fraction of their runtime.
    oom_plan: BTreeMap<JobId, f64>,
    restart_timers: BTreeSet<(JobId, u64)>,
    generated: Vec<u32>,
    /// Jobs of the generators (random OOM faults pick among these, so a scripted job
    /// meets only the faults its scenario scripts).
    background: BTreeSet<JobId>,
}

impl Sim {
    /// Builds the cluster of a scenario and schedules its timers. `seed` overrides the
    /// scenario's own.
    pub fn new(scenario: Scenario, seed: Option<u64>) -> Result<Sim, BuildError> {
        let cluster = scenario.build()?;
        let seed = seed.unwrap_or(scenario.seed);
        let mut sim = Sim {
            cluster,
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
            timers: BinaryHeap::new(),
            seq: 0,
            dirty: true,
            traffic: BTreeMap::new(),
            history: BTreeMap::new(),
            oom_plan: BTreeMap::new(),
            restart_timers: BTreeSet::new(),
            generated: vec![0; scenario.workload.generators.len()],
            background: BTreeSet::new(),
            scenario,
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
        Ok(sim)
    }

    pub fn now(&self) -> u64 {
        self.cluster.now
    }

    fn push(&mut self, at: u64, t: Timer) {
        self.seq += 1;
        self.timers.push(Reverse((at, self.seq, t)));
    }

    fn interarrival(&mut self, gen: usize) -> u64 {
        let rate = self.scenario.workload.generators[gen].rate_per_hour;
        let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
        ((-u.ln()) / rate * 3600.0).ceil().max(1.0) as u64
    }

    /// Applies an operator command now (console or CLI), then schedules.
    pub fn apply(&mut self, cmd: Command) -> Result<String, ClusterError> {
        let r = self.cluster.apply(cmd);
        if r.is_ok() {
            self.dirty = true;
            self.settle();
        }
        r
    }

    /// Submits a job now with an optional simulated runtime.
    pub fn submit(
        &mut self,
        mut spec: JobSpec,
        runtime_s: Option<u64>,
    ) -> Result<JobId, ClusterError> {
        if runtime_s.is_some() {
            spec.est_runtime_s = runtime_s;
        }
        let id = self.cluster.submit(spec)?;
        self.dirty = true;
        self.settle();
        Ok(id)
    }

    /// Runs every timer up to and including `until`, then leaves the clock at `until`.
    pub fn run_until(&mut self, until: u64) {
        while let Some(&Reverse((t, _, _))) = self.timers.peek() {
            if t > until {
                break;
            }
            self.cluster.set_time(t);
            while let Some(&Reverse((t2, _, timer))) = self.timers.peek() {
                if t2 != t {
                    break;
                }
                self.timers.pop();
                self.fire(timer);
            }
            self.settle();
        }
        self.cluster.set_time(until);
        self.settle();
    }

    /// Runs a scheduling cycle if anything changed, and arms timers for what started.
    fn settle(&mut self) {
        while self.dirty {
            self.dirty = false;
            let report = self.cluster.schedule();
            let now = self.cluster.now;
            for &id in &report.started {
                let j = &self.cluster.jobs[id as usize];
                let (epoch, remaining, train) =
                    (j.epoch, j.remaining_s, j.spec.kind == JobKind::Train);
                if let Some(rem) = remaining {
                    self.push(now + rem.max(1), Timer::Finish(id, epoch));
                    if let Some(frac) = self.oom_plan.get(&id).copied() {
                        self.push(
                            now + ((rem as f64 * frac) as u64).max(1),
                            Timer::Oom(id, epoch),
                        );
                    }
                }
                if !train {
                    let base: u32 = self.rng.gen_range(55..80);
                    self.cluster.jobs[id as usize].used_pct = base;
                } else {
                    let used: u32 = self.rng.gen_range(50..98);
                    self.cluster.jobs[id as usize].used_pct = used;
                }
            }
            let pending_restarts: Vec<(JobId, u64)> = self
                .cluster
                .jobs
                .iter()
                .filter(|j| j.phase == Phase::Restarting)
                .filter_map(|j| j.restart_at.map(|t| (j.id, t)))
                .collect();
            for (id, t) in pending_restarts {
                if self.restart_timers.insert((id, t)) {
                    self.push(t, Timer::Restart(id));
                }
            }
        }
    }

    fn fire(&mut self, timer: Timer) {
        let now = self.cluster.now;
        match timer {
            Timer::Submit(i) => {
                let tj = self.scenario.workload.jobs[i].clone();
                let Ok(mut spec) = tj.manifest.to_job_spec() else {
                    return;
                };
                if let Some(r) = tj.runtime {
                    spec.est_runtime_s = Some(r.0);
                }
                match self.cluster.submit(spec) {
                    Ok(id) => {
                        if let Some(tr) = tj.traffic {
                            self.traffic.insert(id, tr);
                        }
                    }
                    Err(e) => self.refuse(format!("workload.jobs[{i}]: {e}")),
                }
                self.dirty = true;
            }
            Timer::Generate(g) => {
                self.generate(g);
                let stop = self.scenario.workload.generators[g].stop.map(|d| d.0);
                let next = now + self.interarrival(g);
                if stop.is_none_or(|s| next <= s) {
                    self.push(next, Timer::Generate(g));
                }
                self.dirty = true;
            }
            Timer::Finish(id, epoch) => {
                let j = &self.cluster.jobs[id as usize];
                if j.phase == Phase::Running && j.epoch == epoch {
                    self.cluster.complete(id, true, "completed");
                    self.dirty = true;
                }
            }
            Timer::Oom(id, epoch) => {
                let j = &self.cluster.jobs[id as usize];
                if j.phase == Phase::Running && j.epoch == epoch {
                    self.oom_plan.remove(&id);
                    self.oom(id);
                }
            }
            Timer::Fault(i) => {
                let f = self.scenario.faults[i].clone();
                if let Some(g) = f.gpu_unhealthy {
                    if let Ok(n) = self.cluster.node_id(&g.node) {
                        self.cluster.set_gpu_health(
                            n,
                            g.gpu,
                            Health::Unhealthy(format!("XID {}", g.xid)),
                        );
                        if let Some(d) = g.duration {
                            self.push(now + d.0, Timer::GpuRecover(n, g.gpu));
                        }
                    }
                }
                if let Some(nf) = f.node_not_ready {
                    if let Ok(n) = self.cluster.node_id(&nf.node) {
                        self.cluster
                            .set_node_condition(n, Condition::NotReady(nf.reason));
                        if let Some(d) = nf.duration {
                            self.push(now + d.0, Timer::NodeRecover(n));
                        }
                    }
                }
                if let Some(o) = f.oom {
                    match self.cluster.job_id(&o.job) {
                        Ok(id) if self.cluster.jobs[id as usize].phase == Phase::Running => {
                            self.oom(id)
                        }
                        Ok(_) => {
                            self.refuse(format!("faults[{i}].oom: job {} is not running", o.job))
                        }
                        Err(e) => self.refuse(format!("faults[{i}].oom: {e}")),
                    }
                }
                if let Some(df) = f.disk_fill {
                    if let Ok(n) = self.cluster.node_id(&df.node) {
                        let disk = self.cluster.nodes[n as usize].disk;
                        self.cluster
                            .set_disk_external(n, disk * df.percent.min(100) as u64 / 100);
                        if let Some(d) = df.duration {
                            self.push(now + d.0, Timer::DiskRecover(n));
                        }
                    }
                }
                self.dirty = true;
            }
            Timer::GpuRecover(n, g) => {
                self.cluster.set_gpu_health(n, g, Health::Healthy);
                self.dirty = true;
            }
            Timer::NodeRecover(n) => {
                self.cluster.set_node_condition(n, Condition::Ready);
                self.dirty = true;
            }
            Timer::DiskRecover(n) => {
                self.cluster.set_disk_external(n, 0);
                self.dirty = true;
            }
            Timer::RandomFault => {
                self.random_fault();
                if let Some(rf) = &self.scenario.random_faults {
                    let every = rf.every.0.max(1);
                    self.push(now + every, Timer::RandomFault);
                }
                self.dirty = true;
            }
            Timer::Command(i) => {
                let cmd = self.scenario.commands[i].run.clone();
                if let Err(e) = self.cluster.apply(cmd) {
                    self.refuse(format!("commands[{i}]: {e}"));
                }
                self.dirty = true;
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
                if let Err(e) = self.cluster.apply(cmd) {
                    self.refuse(format!("projects[{pi}].requests[{ri}]: {e}"));
                }
            }
            Timer::Restart(id) => {
                self.restart_timers.retain(|&(j, _)| j != id);
                if self.cluster.restart_due() > 0 {
                    self.dirty = true;
                }
            }
            Timer::Tick => {
                self.tick();
                let every = self.scenario.scheduler.tick.0.max(1);
                self.push(now + every, Timer::Tick);
            }
        }
    }

    fn refuse(&mut self, msg: String) {
        self.cluster.emit(
            Severity::Warning,
            "ScenarioRefused",
            "cluster/scenario".into(),
            msg,
        );
    }

    fn oom(&mut self, id: JobId) {
        let j = &self.cluster.jobs[id as usize];
        let msg = format!(
            "container exceeded its memory limit ({}) and was OOM-killed",
            crate::quantity::fmt_bytes(j.spec.memory)
        );
        self.cluster.fail_running(id, "OOMKilled", msg);
        self.dirty = true;
    }

    fn generate(&mut self, g: usize) {
        let gen = self.scenario.workload.generators[g].clone();
        self.generated[g] += 1;
        let n = self.generated[g];
        let total: u32 = gen.shapes.iter().map(|s| s.weight).sum();
        let mut pick = self.rng.gen_range(0..total.max(1));
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
        let runtime = self.rng.gen_range(gen.runtime.min.0..=gen.runtime.max.0);
        let oom = self.rng.gen_bool(gen.oom_probability);
        let frac: f64 = self.rng.gen_range(0.2..0.8);
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
            },
            cpu_milli: shape.cpu.0,
            memory: shape.memory.0,
            disk: shape.disk.map(|d| d.0).unwrap_or(0),
            affinity: match shape.affinity {
                Some(crate::manifest::GpuAffinity::SameNode) => Affinity::SameNode,
                Some(crate::manifest::GpuAffinity::Spread) => Affinity::Spread,
                _ => Affinity::Any,
            },
            restart: gen
                .restart_policy
                .map(|r| r.0)
                .unwrap_or(RestartPolicy::Never),
            est_runtime_s: Some(runtime),
            image: "registry.example.com/ai/train:latest".into(),
        };
        match self.cluster.submit(spec) {
            Ok(id) => {
                self.background.insert(id);
                if oom {
                    self.oom_plan.insert(id, frac);
                }
            }
            Err(e) => self.refuse(format!("workload.generators[{g}]: {e}")),
        }
    }

    fn random_fault(&mut self) {
        let Some(rf) = self.scenario.random_faults.clone() else {
            return;
        };
        if rf.kinds.is_empty() || self.cluster.nodes.is_empty() {
            return;
        }
        let now = self.cluster.now;
        let kind = rf.kinds[self.rng.gen_range(0..rf.kinds.len())];
        match kind {
            FaultKind::GpuUnhealthy => {
                let gpu_nodes: Vec<NodeId> = (0..self.cluster.nodes.len() as NodeId)
                    .filter(|&n| !self.cluster.nodes[n as usize].gpus.is_empty())
                    .collect();
                if gpu_nodes.is_empty() {
                    return;
                }
                let n = gpu_nodes[self.rng.gen_range(0..gpu_nodes.len())];
                let g = self
                    .rng
                    .gen_range(0..self.cluster.nodes[n as usize].gpus.len())
                    as u32;
                let xid = [79u32, 48, 63, 94][self.rng.gen_range(0..4)];
                self.cluster
                    .set_gpu_health(n, g, Health::Unhealthy(format!("XID {xid}")));
                self.push(now + rf.recover_after.0, Timer::GpuRecover(n, g));
            }
            FaultKind::NodeNotReady => {
                let n = self.rng.gen_range(0..self.cluster.nodes.len()) as NodeId;
                self.cluster
                    .set_node_condition(n, Condition::NotReady("KubeletNotReady".into()));
                self.push(now + rf.recover_after.0, Timer::NodeRecover(n));
            }
            FaultKind::Oom => {
                let running: Vec<JobId> = self
                    .cluster
                    .jobs
                    .iter()
                    .filter(|j| j.phase == Phase::Running && j.spec.kind == JobKind::Train)
                    .filter(|j| self.background.contains(&j.id))
                    .map(|j| j.id)
                    .collect();
                if !running.is_empty() {
                    let id = running[self.rng.gen_range(0..running.len())];
                    self.oom(id);
                }
            }
            FaultKind::DiskFill => {
                let n = self.rng.gen_range(0..self.cluster.nodes.len()) as NodeId;
                let pct: u64 = self.rng.gen_range(91..99);
                let disk = self.cluster.nodes[n as usize].disk;
                self.cluster.set_disk_external(n, disk * pct / 100);
                self.push(now + rf.recover_after.0, Timer::DiskRecover(n));
            }
        }
    }

    /// Load of a service now, as a share of its full capacity.
    pub fn load(&self, tr: &Traffic) -> f64 {
        let hour = (self.scenario.start_hour + self.cluster.now as f64 / 3600.0).rem_euclid(24.0);
        let phase = (hour - tr.peak_hour) / 24.0 * std::f64::consts::TAU;
        tr.base + (tr.peak - tr.base) * (1.0 + phase.cos()) / 2.0
    }

    /// Autoscaler and telemetry.
    fn tick(&mut self) {
        let now = self.cluster.now;
        let services: Vec<(JobId, Traffic)> =
            self.traffic.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (id, tr) in services {
            let j = &self.cluster.jobs[id as usize];
            let JobKind::Inference(a) = j.spec.kind.clone() else {
                continue;
            };
            if j.phase != Phase::Running {
                continue;
            }
            let load = self.load(&tr).clamp(0.0, 1.0);
            // Demand in replicas running at 100% of the metric.
            let demand = load * a.max as f64 * a.target_pct as f64 / 100.0;
            let running = j.running_replicas().max(1) as f64;
            let usage = (demand * 100.0 / running).min(100.0);
            self.cluster.jobs[id as usize].used_pct = usage.round() as u32;
            let desired =
                ((demand * 100.0 / a.target_pct as f64).ceil() as u32).clamp(a.min, a.max);
            let h = self.history.entry(id).or_default();
            h.push_back((now, desired));
            while h.front().is_some_and(|&(t, _)| t + a.window_s < now) {
                h.pop_front();
            }
            let current = self.cluster.jobs[id as usize].desired_replicas;
            let eff = if desired >= current {
                desired
            } else {
                h.iter().map(|x| x.1).max().unwrap_or(desired)
            };
            if eff != current {
                let why = format!(
                    "by autoscaler: GPU memory usage {usage:.0}% vs target {}%{}",
                    a.target_pct,
                    if eff < current {
                        format!(
                            " (below target for the {}s stabilization window)",
                            a.window_s
                        )
                    } else {
                        String::new()
                    }
                );
                self.cluster.scale(id, eff, &why);
                self.dirty = true;
            }
        }
        // Telemetry: utilisation and memory in use on allocated cards.
        for n in 0..self.cluster.nodes.len() {
            for g in 0..self.cluster.nodes[n].gpus.len() {
                let allocs = self.cluster.nodes[n].gpus[g].allocs.clone();
                let (util, mem) = if allocs.is_empty() {
                    (0u8, 0u64)
                } else {
                    let mem: u64 = allocs
                        .iter()
                        .map(|a| {
                            a.mem * self.cluster.jobs[a.job as usize].used_pct.min(100) as u64 / 100
                        })
                        .sum();
                    (self.rng.gen_range(35..99u8), mem)
                };
                let gpu = &mut self.cluster.nodes[n].gpus[g];
                gpu.util_pct = util;
                gpu.mem_used = mem;
                // Temperature and power follow utilisation: idle around 32 C and a
                // fifth of the board's power, full load near 80 C and its board power.
                let tdp = board_power_w(&gpu.model);
                gpu.temp_c = 32 + (util as u32 * 48 / 100) as u8;
                gpu.power_w = (tdp / 5 + (tdp - tdp / 5) * util as u32 / 100) as u16;
            }
        }
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
