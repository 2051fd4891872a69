//! The core's one door: typed inputs in, events and decisions out.
//!
//! Everything that changes the cluster reaches the core as an [`Input`]: an
//! [`Observation`] of the world (a node joined, a GPU went unhealthy, a pod finished,
//! telemetry), an operator [`Command`] with its [`Actor`], a clock advance, or the end
//! of an instant (run a scheduling cycle). [`Core::apply`] returns the [`Event`]s the
//! input caused and the [`Decision`]s the driver must carry out (bind these replicas,
//! stop those). A placement stays assumed until the driver confirms it with
//! [`Observation::Bound`]; [`Observation::BindFailed`] or silence past the bind timeout
//! returns the job to the queue.
//!
//! The core does no I/O, starts no thread and reads no clock: the same inputs give the
//! same outputs. Inputs, observations, decisions and events serialise losslessly (JSON
//! round trips are tested), so a driver can record them and a test can replay them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::checkpoint::ClusterState;
use crate::cluster::{Cluster, ClusterError};
use crate::command::Command;
use crate::event::{Event, Severity};
use crate::model::*;

/// Who gave a command: a person (Unix user, from the uid, with the SSH client address
/// when the command came over SSH) or a part of maar (`scenario`, `autoscaler`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub user: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Where the command came from (the SSH client address), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl Actor {
    /// A part of maar acting on its own (e.g. `scenario`).
    pub fn system(name: &str) -> Actor {
        Actor {
            user: name.to_string(),
            uid: None,
            from: None,
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.user)?;
        if let Some(a) = &self.from {
            write!(f, " from {a}")?;
        }
        Ok(())
    }
}

/// Readings of one GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuReading {
    pub util_pct: u8,
    pub mem_used: u64,
    pub temp_c: u8,
    pub power_w: u16,
}

/// Readings of one node's GPUs, in index order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReading {
    pub node: String,
    pub gpus: Vec<GpuReading>,
    /// The host's own use, where it is measured (local mode), not simulated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::model::HostUsage>,
}

/// How a job's run ended, as seen from outside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    Succeeded,
    /// Killed for exceeding its memory limit.
    OomKilled {
        message: String,
    },
    /// Exited with an error.
    Failed {
        message: String,
    },
}

/// Something seen in the world. Jobs are named `project/name`, nodes by name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Observation {
    /// A node joined (its pool follows from its labels).
    NodeJoined { node: Box<Node> },
    /// A project appeared in the world (a Kubernetes namespace): it may use every pool
    /// without limits until quota is set. Nothing changes if it exists.
    ProjectSeen { project: String },
    /// A project's quota in a pool was set (a Kubernetes Quota object); `None` takes it
    /// back to open (no limit). The project is added if new.
    QuotaSet {
        project: String,
        pool: String,
        quota: Option<Quota>,
    },
    /// A pool appeared in the world (a node role not seen before): every project may
    /// use it without limits until quota is set. Nothing changes if it exists.
    PoolSeen { pool: Box<Pool> },
    /// A node's labels changed (it may move to another pool).
    NodeLabels {
        node: String,
        labels: BTreeMap<String, String>,
    },
    /// A node's capacity, devices, labels or taints changed (a Kubernetes Node
    /// updated: the device plugin advertised its GPUs a moment after the kubelet
    /// registered it, or withdrew a card): the node takes them as given, keeping
    /// what runs on the cards that stay; jobs on cards withdrawn are lost.
    NodeUpdated { node: Box<Node> },
    /// A node became Ready (`ready`) or NotReady with a reason; jobs on a node that
    /// goes NotReady are lost, unless `keeps_jobs` (Kubernetes: a pod's fate on a
    /// NotReady node is the node lifecycle controller's, by the pod's tolerations, and
    /// a blip of a few seconds stops nothing).
    NodeCondition {
        node: String,
        ready: bool,
        #[serde(default)]
        reason: String,
        #[serde(default)]
        keeps_jobs: bool,
    },
    /// A running job's world is stopping it (Kubernetes: its pod is being deleted):
    /// it holds its room until it is gone, and is never a victim.
    JobTerminating { job: String },
    /// A waiting job's pool, chosen again by its world (a Kubernetes pod that names no
    /// pool is put where its rules let it on): moved there only while it waits and no
    /// node of its pool lets it on (a Pool changed and took those nodes).
    JobPool { job: String, pool: String },
    /// A GPU's health; jobs on a card that turns unhealthy are lost.
    GpuHealth {
        node: String,
        gpu: u32,
        healthy: bool,
        #[serde(default)]
        reason: String,
    },
    /// Disk used on a node by things other than jobs (images, logs), bytes.
    DiskUsage { node: String, bytes: u64 },
    /// GPU telemetry (utilisation, memory in use, temperature, power).
    Telemetry { nodes: Vec<NodeReading> },
    /// A job appeared (a scenario arrival, a pod created in the cluster).
    JobSubmitted { spec: Box<JobSpec> },
    /// A job found already running (a pod or a TrainJob's pods bound before this maar
    /// started, or bound while maar had taken its placement back): it is added (or, a
    /// job maar holds, placed) as Running with one replica on each of `replicas`,
    /// holding what it asks for, on the cards given (else on the cards a fit picks,
    /// else the first ones), even past what the node has free (the world is as it is).
    JobRunning {
        spec: Box<JobSpec>,
        replicas: Vec<Binding>,
    },
    /// A running job's run ended.
    JobEnded { job: String, outcome: JobOutcome },
    /// GPU memory a job actually uses, percent of what it asked for.
    JobUsage { job: String, used_pct: u32 },
    /// An inference service's GPU-memory usage rate (`crater_gpu_memory_usage_rate`),
    /// percent of what its running replicas can serve; above 100 when demand outruns
    /// them. The autoscaler acts on it.
    ServiceLoad { job: String, usage_pct: f64 },
    /// The driver bound the job's assumed replicas.
    Bound { job: String },
    /// The driver could not bind the job's assumed replicas: they are taken back and
    /// the job is queued again.
    BindFailed { job: String, reason: String },
    /// The world's own cordon of a node, or of one of its GPUs (`kubectl cordon`, the
    /// Node's `spec.unschedulable`, its GPU annotation): a fact the driver saw, not an
    /// operator's command through maar, so no role is checked and no audit row kept.
    Cordoned {
        node: String,
        #[serde(default)]
        gpu: Option<u32>,
        cordoned: bool,
    },
    /// A job's object went away outside maar (its pod or TrainJob deleted, a pod that
    /// another hand bound or ended): it stops, and `why` says so.
    JobGone { job: String, why: String },
    /// A user asked for quota through the world (a QuotaRequest object applied with
    /// kubectl): a request for an admin to decide, as `maar request-quota` opens.
    QuotaAsked {
        project: String,
        pool: String,
        gpus: u32,
        #[serde(default)]
        reserved: bool,
        #[serde(default)]
        reason: String,
    },
    /// The federation that runs this cluster among others says why a job held for it
    /// (its file asks for a cluster, `crater.ai/cluster`) is not sent yet: the
    /// cluster it names refuses it, is none of the federation's, or does not answer.
    /// (Leaving it here is a command: `keep`.)
    NotSent { job: String, why: String },
    /// Something the driver wants the operator to see (a scenario step it could not
    /// carry out, a reading it could not take); logged as an event, changes nothing.
    Note {
        severity: Severity,
        reason: String,
        object: String,
        message: String,
    },
}

/// One input to the core.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// An operator command and who gave it.
    Command { actor: Actor, command: Command },
    /// Something seen in the world.
    Observe(Observation),
    /// The clock moves to `to` (seconds since the start; never back). Time-driven
    /// changes happen here: restart back-offs that elapsed, binds that timed out.
    Advance { to: u64 },
    /// The end of an instant: run one scheduling cycle now.
    Schedule,
}

/// Replicas on one node: where, and on which cards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub node: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<u32>,
}

/// What the driver must carry out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Bind these replicas (all of a gang at once); answer with `Bound` or
    /// `BindFailed`. `start` is true when the job was not running before.
    Bind {
        id: JobId,
        job: String,
        start: bool,
        replicas: Vec<Binding>,
    },
    /// Stop these replicas (evicted, drained, cancelled, scaled down, failed, or a bind
    /// taken back); `reason` says why.
    Stop {
        id: JobId,
        job: String,
        replicas: Vec<Binding>,
        reason: String,
    },
}

/// What one input did.
#[derive(Clone, Debug)]
pub struct Output {
    /// What happened, in words; or why the input was refused (nothing changed then).
    pub result: Result<String, ClusterError>,
    /// The job a submission created.
    pub job: Option<JobId>,
    pub events: Vec<Event>,
    pub decisions: Vec<Decision>,
}

impl Output {
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }
}

/// The scheduler core behind its one door. Whoever owns a `Core` (the engine) changes
/// the cluster only through [`Core::apply`]; readers borrow the cluster.
#[derive(Clone, Debug)]
pub struct Core {
    cluster: Cluster,
}

impl Core {
    /// Makes a copy quiet (see `Cluster::quiet`), wording only `job`'s reason: a
    /// prospect's copy, whose other jobs' reasons, events and bill nobody reads.
    /// (`None` before the job is there: its submit emits no event.)
    pub(crate) fn quiet_but(&mut self, job: Option<JobId>) {
        self.cluster.quiet = true;
        self.cluster.word_only = job;
    }

    /// On a prospect's copy: its cycle may run on past the asked job's turn (see
    /// `Cluster::run_on`).
    pub(crate) fn run_on(&mut self, on: bool) {
        self.cluster.run_on = on;
    }

    pub fn new(mut cluster: Cluster) -> Core {
        // Whatever was built before the core took over is not news to anyone.
        cluster.take_outbox();
        cluster.take_touched();
        Core { cluster }
    }

    /// Sets how nodes are chosen among those that fit (`SchedConfig::placement`): a
    /// setting maar starts with (`maar local --placement`), not an operator command.
    pub fn set_placement(&mut self, policy: crate::placement::Policy) {
        self.cluster.config.placement = policy;
    }

    /// This cluster is `me` among several run by one maar, whose federation sends the
    /// jobs that ask for a cluster (`crater.ai/cluster`): such a job waits here,
    /// untried, until the federation sends it or leaves it here
    /// (`Command::Keep`). `None`: alone, the ask changes nothing.
    pub fn set_federation(&mut self, me: Option<String>) {
        self.cluster.set_federation(me);
    }

    /// Numbers the cluster's events on from `next` (`Cluster::continue_events`): a
    /// restored live cluster whose record holds events after its checkpoint.
    pub fn continue_events(&mut self, next: u64) {
        self.cluster.continue_events(next);
    }

    /// The cluster, to read.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The cluster itself, for a copy whose core nobody keeps (a prospect's forward
    /// run).
    pub(crate) fn into_cluster(self) -> Cluster {
        self.cluster
    }

    pub fn now(&self) -> u64 {
        self.cluster.now
    }

    /// Applies one input. Refused inputs change nothing and say why.
    pub fn apply(&mut self, input: Input) -> Output {
        let mut out = self.apply_held(input);
        out.decisions = self.cluster.decisions();
        out
    }

    /// The decisions held by [`Core::apply_held`] so far, taken.
    pub fn take_held(&mut self) -> Vec<Decision> {
        self.cluster.decisions()
    }

    /// Applies one input, its decisions held for the next [`Core::apply`] (whose
    /// decisions then cover both): for a driver that feeds many observations and
    /// carries out what they decided once, after a cycle. A job released and placed
    /// again as it was in between needs nothing done.
    pub fn apply_held(&mut self, input: Input) -> Output {
        let mut job = None;
        let result = match input {
            Input::Command { actor, command } => {
                let submit = matches!(command, Command::Submit(_));
                let r = self.cluster.apply_by(command, &actor.user);
                if submit && r.is_ok() {
                    job = self.cluster.jobs.iter().next_back().map(|j| j.id);
                }
                r
            }
            Input::Observe(o) => {
                let r = self.observe(o);
                match r {
                    Ok((m, j)) => {
                        job = j;
                        Ok(m)
                    }
                    Err(e) => Err(e),
                }
            }
            Input::Advance { to } => {
                self.cluster.set_time(to);
                let expired = self.cluster.expire_binds();
                let restarted = self.cluster.restart_due();
                self.cluster.settle_alerts();
                Ok(format!(
                    "clock at {to}s; {restarted} restart(s) due, {expired} bind(s) timed out"
                ))
            }
            Input::Schedule => {
                let r = self.cluster.schedule();
                Ok(format!(
                    "cycle: {} started, {} scaled up, {} preempted",
                    r.started.len(),
                    r.scaled_up.len(),
                    r.preempted.len()
                ))
            }
        };
        let events = self.cluster.take_outbox();
        Output {
            result,
            job,
            events,
            decisions: Vec::new(),
        }
    }

    fn observe(&mut self, o: Observation) -> Result<(String, Option<JobId>), ClusterError> {
        let c = &mut self.cluster;
        let done = |m: String| Ok((m, None));
        match o {
            Observation::NodeJoined { node } => {
                if c.node_id(&node.name).is_ok() {
                    return Err(ClusterError::Invalid(format!(
                        "node `{}` already exists",
                        node.name
                    )));
                }
                let name = node.name.clone();
                let id = c.add_node(*node);
                let pool = c.pool_name(c.nodes[id as usize].pool).to_string();
                c.emit(
                    Severity::Normal,
                    "NodeJoined",
                    format!("node/{name}"),
                    format!("node joined pool {pool}"),
                );
                done(format!("node {name} joined"))
            }
            Observation::ProjectSeen { project } => {
                if c.project_id(&project).is_some() {
                    return done(format!("project {project} exists"));
                }
                c.add_open_project(&project);
                c.emit(
                    Severity::Normal,
                    "ProjectAdded",
                    format!("project/{project}"),
                    "project seen: open in every pool until quota is set".to_string(),
                );
                done(format!("project {project} added"))
            }
            Observation::QuotaSet {
                project,
                pool,
                quota,
            } => {
                let pl = c
                    .pool_id(&pool)
                    .ok_or_else(|| ClusterError::UnknownPool(pool.clone()))?;
                let pid = match c.project_id(&project) {
                    Some(p) => p,
                    None => c.add_open_project(&project),
                };
                let q = quota.unwrap_or_default();
                let msg = format!(
                    "quota of project {project} in pool {pool}: reserved {} GPUs, max {}",
                    crate::quantity::fmt_gpus(q.reserved.gpu_milli),
                    q.max
                        .gpu_milli
                        .map(crate::quantity::fmt_gpus)
                        .unwrap_or_else(|| "unlimited".into())
                );
                c.projects[pid as usize].quotas.insert(pl, q);
                c.admission_gen += 1;
                c.emit(
                    Severity::Normal,
                    "QuotaSet",
                    format!("project/{project}"),
                    msg.clone(),
                );
                done(msg)
            }
            Observation::PoolSeen { pool } => {
                let name = pool.name.clone();
                if let Some(id) = c.pool_id(&name) {
                    let was = &c.pools[id as usize];
                    if (&was.selector, was.kind, &was.lend_to, was.overcommit)
                        == (&pool.selector, pool.kind, &pool.lend_to, pool.overcommit)
                    {
                        return done(format!("pool {name} exists"));
                    }
                    // Changed (a Pool object edited): its nodes follow the new
                    // selector; the rest keeps.
                    let members: Vec<NodeId> = c.pool_members[id as usize].clone();
                    for &n in &members {
                        c.account_node(n, false);
                    }
                    c.pools[id as usize] = *pool;
                    for &n in &members {
                        c.account_node(n, true);
                    }
                    c.rehome_nodes();
                    c.emit(
                        Severity::Normal,
                        "PoolChanged",
                        format!("pool/{name}"),
                        "pool changed: its nodes follow its selector".to_string(),
                    );
                    return done(format!("pool {name} changed"));
                }
                let id = c.add_pool(*pool);
                for p in &mut c.projects {
                    p.quotas.insert(id, Quota::default());
                }
                // Nodes its selector matches join it: those in no pool, and those of a
                // node-role pool (see `pool_for_labels`).
                c.rehome_nodes();
                c.emit(
                    Severity::Normal,
                    "PoolAdded",
                    format!("pool/{name}"),
                    "pool seen: open to every project until quota is set".to_string(),
                );
                done(format!("pool {name} added"))
            }
            Observation::NodeUpdated { node } => {
                let n = c.node_id(&node.name)?;
                let name = node.name.clone();
                c.update_node(n, *node);
                done(format!("node {name} updated"))
            }
            Observation::Cordoned {
                node,
                gpu,
                cordoned,
            } => done(c.set_cordon(&node, gpu, cordoned)?),
            Observation::JobGone { job, why } => done(c.stop_job(&job, &why)?),
            Observation::JobTerminating { job } => {
                let id = c.job_id(&job)?;
                if c.jobs[id as usize].phase == Phase::Running && !c.jobs[id as usize].terminating {
                    c.jobs[id as usize].terminating = true;
                    c.touch(id);
                    done(format!("job {job} is terminating"))
                } else {
                    done(format!("job {job} unchanged"))
                }
            }
            Observation::JobPool { job, pool } => done(c.move_waiting(&job, &pool)?),
            Observation::QuotaAsked {
                project,
                pool,
                gpus,
                reserved,
                reason,
            } => done(c.request_quota(&project, &pool, gpus, reserved, &reason)?),
            Observation::NodeLabels { node, labels } => {
                let n = c.node_id(&node)?;
                c.relabel_node(n, labels);
                done(format!("node {node} relabelled"))
            }
            Observation::NodeCondition {
                node,
                ready,
                reason,
                keeps_jobs,
            } => {
                let n = c.node_id(&node)?;
                let cond = if ready {
                    Condition::Ready
                } else {
                    Condition::NotReady(reason)
                };
                c.set_node_condition_keeping(n, cond, keeps_jobs);
                done(format!("node {node} condition set"))
            }
            Observation::GpuHealth {
                node,
                gpu,
                healthy,
                reason,
            } => {
                let n = c.node_id(&node)?;
                if gpu as usize >= c.nodes[n as usize].gpus.len() {
                    return Err(ClusterError::UnknownGpu {
                        node,
                        index: gpu,
                        count: c.nodes[n as usize].gpus.len(),
                    });
                }
                let h = if healthy {
                    Health::Healthy
                } else {
                    Health::Unhealthy(reason)
                };
                c.set_gpu_health(n, gpu, h);
                done(format!("GPU {node}/{gpu} health set"))
            }
            Observation::DiskUsage { node, bytes } => {
                let n = c.node_id(&node)?;
                c.set_disk_external(n, bytes);
                done(format!("node {node} disk usage set"))
            }
            Observation::Telemetry { nodes } => {
                for r in nodes {
                    let n = c.node_id(&r.node)?;
                    let node = &mut c.nodes[n as usize];
                    if r.host.is_some() {
                        node.host = r.host;
                    }
                    for (g, x) in node.gpus.iter_mut().zip(r.gpus) {
                        g.util_pct = x.util_pct.min(100);
                        g.mem_used = x.mem_used.min(g.memory);
                        g.temp_c = x.temp_c;
                        g.power_w = x.power_w;
                    }
                }
                done("telemetry recorded".into())
            }
            Observation::JobSubmitted { spec } => {
                let id = c.submit(*spec)?;
                Ok((format!("job {} submitted", c.job_ref(id)), Some(id)))
            }
            Observation::JobRunning { spec, replicas } => {
                let nodes = replicas
                    .iter()
                    .map(|r| c.node_id(&r.node))
                    .collect::<Result<Vec<_>, _>>()?;
                if nodes.is_empty() {
                    return Err(ClusterError::Invalid(format!(
                        "job {}: running where? no replica given",
                        spec.name
                    )));
                }
                let name = spec.full_name();
                let known = c.job_id(&name).ok().filter(|&id| {
                    matches!(c.jobs[id as usize].phase, Phase::Pending | Phase::Running)
                });
                let id = match known {
                    // A job maar placed, found bound by the world: where maar placed
                    // it, the bind is confirmed; elsewhere (its placement was taken
                    // back and made again), the world wins.
                    Some(id) => {
                        let j = &c.jobs[id as usize];
                        if j.phase == Phase::Running {
                            if c.placed_as(id, &replicas) {
                                let _ = c.confirm_bind(id);
                                return done(format!("job {name} bound"));
                            }
                            c.fail_bind(id, "found bound elsewhere by the world")?;
                            if c.jobs[id as usize].phase != Phase::Pending {
                                return Err(ClusterError::Invalid(format!(
                                    "job {name} runs bound elsewhere already"
                                )));
                            }
                        }
                        id
                    }
                    None => c.submit(*spec)?,
                };
                for (n, r) in nodes.iter().zip(&replicas) {
                    c.adopt(id, *n, &r.gpus);
                }
                c.adopted(id);
                let on: Vec<&str> = replicas.iter().map(|r| r.node.as_str()).collect();
                Ok((
                    format!("job {} running on {}", c.job_ref(id), on.join(", ")),
                    Some(id),
                ))
            }
            Observation::JobEnded { job, outcome } => {
                let id = c.job_id(&job)?;
                if c.jobs[id as usize].phase != Phase::Running {
                    return Err(ClusterError::Invalid(format!(
                        "job {job} is {}, not running",
                        c.jobs[id as usize].phase.name()
                    )));
                }
                match outcome {
                    JobOutcome::Succeeded => c.complete(id, true, "completed"),
                    JobOutcome::OomKilled { message } => c.fail_running(id, "OOMKilled", message),
                    JobOutcome::Failed { message } => c.fail_running(id, "Error", message),
                }
                done(format!("job {job} ended"))
            }
            Observation::JobUsage { job, used_pct } => {
                let id = c.job_id(&job)?;
                let j = &mut c.jobs[id as usize];
                j.used_pct = used_pct;
                j.peak_pct = j.peak_pct.max(used_pct);
                done(format!("job {job} usage {used_pct}%"))
            }
            Observation::ServiceLoad { job, usage_pct } => {
                let id = c.job_id(&job)?;
                if !usage_pct.is_finite() || usage_pct < 0.0 {
                    return Err(ClusterError::Invalid(format!(
                        "usage {usage_pct} of {job} is not a percentage"
                    )));
                }
                c.autoscale(id, usage_pct)?;
                done(format!("job {job} load {usage_pct:.0}%"))
            }
            Observation::Bound { job } => {
                let id = c.job_id(&job)?;
                c.confirm_bind(id)?;
                done(format!("job {job} bound"))
            }
            Observation::Note {
                severity,
                reason,
                object,
                message,
            } => {
                c.emit(severity, reason, object, message);
                done("noted".into())
            }
            Observation::NotSent { job, why } => done(c.not_sent(&job, &why)?),
            Observation::BindFailed { job, reason } => {
                let id = c.job_id(&job)?;
                c.fail_bind(id, &format!("bind failed: {reason}"))?;
                done(format!("job {job} back in the queue: bind failed"))
            }
        }
    }

    /// The state to keep (a checkpoint).
    pub fn checkpoint(&self) -> ClusterState {
        self.cluster.checkpoint()
    }

    /// The checkpoint as JSON, written without a copy of the state
    /// ([`Cluster::checkpoint_json`]).
    pub fn checkpoint_json(&self, with_events: bool) -> String {
        self.cluster.checkpoint_json(with_events)
    }

    /// The checkpoint written to `w` as it is made ([`Cluster::write_checkpoint`]).
    pub fn write_checkpoint(
        &self,
        with_events: bool,
        w: impl std::io::Write,
    ) -> Result<(), serde_json::Error> {
        self.cluster.write_checkpoint(with_events, w)
    }

    /// A core from a checkpoint.
    pub fn restore(state: ClusterState) -> Result<Core, ClusterError> {
        Ok(Core {
            cluster: Cluster::restore(state)?,
        })
    }
}

/// A driver feeds the core: the simulation, the node agent, the Kubernetes watcher.
/// It runs on the engine's thread and changes the core only through inputs.
pub trait Driver: Send {
    /// A short name (`demo`, `local`, `kube`).
    fn kind(&self) -> &'static str;
    /// Advances the world to `to` (the core's clock), feeding what it sees; returns the
    /// events this caused.
    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event>;
    /// Applies an operator command now, and what follows from it (a scheduling cycle,
    /// the driver's own reactions to the decisions).
    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output;
    /// The driver's own state, for a checkpoint (`null` if it keeps none).
    fn save(&self) -> serde_json::Value;
    /// A copy that reacts as this one would, for previews (`what_if`): it must not
    /// touch the world (a real backend's copy decides, binds nothing).
    fn fork(&self) -> Box<dyn Driver>;
    /// Between whole seconds of the clock: what a live world has to say now, fed and
    /// acted on without moving the clock (a new pod is placed at once, not at the next
    /// second). Simulated worlds have nothing to say between seconds: nothing by
    /// default.
    fn poll(&mut self, _core: &mut Core) -> Vec<Event> {
        Vec::new()
    }
    /// A fresh forecast of the Pending jobs' starts (the engine's, made for its
    /// views): a live backend tells it where its users look (Kubernetes: an
    /// annotation on the waiting pod). Nothing by default.
    fn starts(&mut self, _core: &Core, _forecast: &crate::forecast::Forecast) {}
    /// A command as this world would carry it out (local mode runs a manifest in its
    /// one pool and project, and refuses one without a command), or its refusal: what
    /// a dry run checks before it asks the core. The command as it is by default.
    fn localize(&self, _core: &Core, command: Command) -> Result<Command, Output> {
        Ok(command)
    }
    /// Whether its world is read anew at every start (Kubernetes: the API server holds
    /// the cluster): then the record's checkpoints are history and what a reader sees
    /// while no maar runs, never what a start continues from, and the engine writes
    /// them seldom. No, by default: a start continues from the newest checkpoint.
    fn world_read_anew(&self) -> bool {
        false
    }
    /// Whether this maar schedules (a Kubernetes maar standing by on another's lease
    /// watches only). Always, by default.
    fn leading(&self) -> bool {
        true
    }
    /// Why the world does not answer now (a Kubernetes API server that the watches
    /// cannot reach), if it does not. None by default.
    fn unreachable(&self) -> Option<String> {
        None
    }
    /// maar is stopping: release what the driver holds in the world (local processes)
    /// and report it as observations; the events are recorded with the last
    /// checkpoint. Nothing by default.
    fn stop(&mut self, _core: &mut Core) -> Vec<Event> {
        Vec::new()
    }
}

impl Cluster {
    /// Decisions for the jobs whose placements changed since the last call.
    pub(crate) fn decisions(&mut self) -> Vec<Decision> {
        let mut out = Vec::new();
        for (id, before) in self.take_touched() {
            let Some(j) = self.jobs.get(id) else {
                continue;
            };
            let name = j.spec.full_name();
            let key = |p: &Placement| (p.node, p.gpus.clone(), p.cpu, p.mem, p.disk);
            let mut gone: Vec<&Placement> = before.iter().collect();
            let mut new: Vec<&Placement> = Vec::new();
            for p in &j.placements {
                match gone.iter().position(|q| key(q) == key(p)) {
                    Some(i) => {
                        gone.remove(i);
                    }
                    None => new.push(p),
                }
            }
            let binding = |p: &Placement| Binding {
                node: self.nodes[p.node as usize].name.clone(),
                gpus: p.gpus.iter().map(|s| s.gpu).collect(),
            };
            if !gone.is_empty() {
                out.push(Decision::Stop {
                    id,
                    job: name.clone(),
                    replicas: gone.iter().map(|p| binding(p)).collect(),
                    reason: if j.reason.is_empty() {
                        j.phase.name().to_string()
                    } else {
                        j.reason.to_string()
                    },
                });
            }
            if !new.is_empty() {
                out.push(Decision::Bind {
                    id,
                    job: name,
                    // Nothing it held before is held now: a (re)start.
                    start: gone.len() == before.len(),
                    replicas: new.iter().map(|p| binding(p)).collect(),
                });
            }
        }
        out
    }

    /// The driver confirmed a job's assumed placements.
    /// Adds a project open (no limit) in every pool: one the world shows before any
    /// quota is set for it.
    pub(crate) fn add_open_project(&mut self, name: &str) -> ProjectId {
        let quotas = (0..self.pools.len() as PoolId)
            .map(|p| (p, Quota::default()))
            .collect();
        self.add_project(Project {
            name: name.to_string(),
            department: String::new(),
            quotas,
        })
    }

    /// Places one replica of a just-submitted job on node `n` as it already runs there
    /// (see [`Observation::JobRunning`]): on the cards `gpus` when given, else on the
    /// cards a fit picks, else on the first cards.
    pub(crate) fn adopt(&mut self, id: JobId, n: NodeId, gpus: &[u32]) {
        let spec = self.jobs[id as usize].spec.clone();
        let node = &self.nodes[n as usize];
        let fitted = crate::fit::fit(node, n, self.overcommit_of(node), &spec, 1).ok();
        let slot = |g: u32| GpuSlot {
            gpu: g,
            milli: crate::model::GPU_MILLI,
            mem: node.gpus.get(g as usize).map(|c| c.memory).unwrap_or(0),
        };
        // The cards as given (Kubernetes: the pod's `crater.ai/gpu-indices`, which
        // anyone who may edit the pod can change) are taken only when they are whole
        // free cards of this node, each once, as many as it asks; else the job is
        // counted on the cards a fit picks, and that is said.
        let whole = !spec.gpu.shared && spec.gpu.resource.is_none();
        let as_given = {
            let mut seen = std::collections::BTreeSet::new();
            gpus.len() as u32 == spec.gpu.count
                && gpus.iter().all(|&g| {
                    seen.insert(g)
                        && node
                            .gpus
                            .get(g as usize)
                            .is_some_and(|c| c.allocs.is_empty())
                })
        };
        let refused = whole && !gpus.is_empty() && !as_given;
        let cards: Vec<GpuSlot> = if !gpus.is_empty() && !refused {
            gpus.iter()
                .filter(|&&g| (g as usize) < node.gpus.len())
                .map(|&g| slot(g))
                .collect()
        } else if let Some(p) = &fitted {
            p.gpus.clone()
        } else if refused {
            // (No fit: the node cordoned, NotReady, tainted. The job runs there all the
            // same: its cards are free whole ones of its kind, as many as there are,
            // never one another job holds.)
            node.gpus
                .iter()
                .filter(|g| {
                    g.allocs.is_empty() && g.resource.as_deref() == spec.gpu.resource.as_deref()
                })
                .take(spec.gpu.count as usize)
                .map(|g| slot(g.index))
                .collect()
        } else {
            // Free cards first, then the rest: it runs there, as many cards as it asks.
            let mut order: Vec<u32> = node
                .gpus
                .iter()
                .filter(|g| g.allocs.is_empty())
                .map(|g| g.index)
                .collect();
            order.extend(
                node.gpus
                    .iter()
                    .filter(|g| !g.allocs.is_empty())
                    .map(|g| g.index),
            );
            order
                .into_iter()
                .take(spec.gpu.count as usize)
                .map(slot)
                .collect()
        };
        let on_loan = node.pool.is_some() && node.pool != self.jobs[id as usize].pool;
        if refused {
            let said: Vec<String> = gpus.iter().map(u32::to_string).collect();
            let took: Vec<String> = cards.iter().map(|s| s.gpu.to_string()).collect();
            let msg = format!(
                "its cards as given ({}) are not {} free whole card(s) of node {} (out of range, held by another job, or named twice): counted on card(s) {} instead",
                said.join(", "),
                spec.gpu.count,
                node.name,
                if took.is_empty() { "none".to_string() } else { took.join(", ") }
            );
            let job = self.job_ref(id);
            self.emit(Severity::Warning, "GpuIndicesIgnored", job, msg);
        }
        let p = Placement {
            node: n,
            gpus: cards,
            cpu: spec.cpu_milli,
            mem: spec.memory,
            disk: spec.disk,
            on_loan,
            bound: true,
        };
        self.allocate(id, p);
    }

    /// A job whose replicas were all adopted ([`Cluster::adopt`]): Running, bound. An
    /// inference service found with more replicas than it was submitted with wants
    /// them (within its range), so its autoscaler starts from what runs.
    pub(crate) fn adopted(&mut self, id: JobId) {
        if let JobKind::Inference(a) = &self.jobs[id as usize].spec.kind {
            let found = self.jobs[id as usize].placements.len() as u32;
            let want = found.clamp(a.min, a.max.max(a.min));
            if want > self.jobs[id as usize].desired_replicas {
                self.scale(id, want, "(found running)");
            }
        }
        self.set_phase(id, Phase::Running);
        let j = &mut self.jobs[id as usize];
        j.found = true;
        j.remaining_s = j.spec.est_runtime_s;
        j.reason = "".into();
        self.forget_first_ends(id);
        let _ = self.confirm_bind(id);
        let on: Vec<String> = self.jobs[id as usize]
            .placements
            .iter()
            .map(|p| self.nodes[p.node as usize].name.clone())
            .collect();
        self.emit(
            Severity::Normal,
            "Running",
            self.job_ref(id),
            format!("found running on {}", on.join(", ")),
        );
    }

    /// Whether job `id` is placed where the world says it runs: on the same nodes, and
    /// on the same cards where the world names them (a driver that sees its own bind
    /// come back; see [`Observation::JobRunning`]).
    pub fn placed_as(&self, id: JobId, replicas: &[Binding]) -> bool {
        let j = &self.jobs[id as usize];
        let Ok(mut want) = replicas
            .iter()
            .map(|r| Ok((self.node_id(&r.node)?, r.gpus.clone())))
            .collect::<Result<Vec<(NodeId, Vec<u32>)>, ClusterError>>()
        else {
            return false;
        };
        let mut have: Vec<(NodeId, Vec<u32>)> = j
            .placements
            .iter()
            .zip(&want)
            .map(|(p, w)| {
                let cards = if w.1.is_empty() {
                    Vec::new()
                } else {
                    p.gpus.iter().map(|g| g.gpu).collect()
                };
                (p.node, cards)
            })
            .collect();
        for x in want.iter_mut().chain(have.iter_mut()) {
            x.1.sort_unstable();
        }
        want.sort_unstable();
        have.sort_unstable();
        j.placements.len() == want.len() && want == have
    }

    pub(crate) fn confirm_bind(&mut self, id: JobId) -> Result<(), ClusterError> {
        let j = &mut self.jobs[id as usize];
        if !j.placements.iter().any(|p| !p.bound) {
            return Err(ClusterError::Invalid(format!(
                "job {}/{} has no placement waiting for a bind",
                j.spec.project, j.spec.name
            )));
        }
        for p in &mut j.placements {
            p.bound = true;
        }
        self.assumed.remove(&id);
        Ok(())
    }

    /// Takes back a job's assumed placements; the job waits in the queue again unless
    /// bound replicas keep it running (a service's scale-up).
    pub(crate) fn fail_bind(&mut self, id: JobId, why: &str) -> Result<(), ClusterError> {
        let j = &self.jobs[id as usize];
        let unbound: Vec<usize> = (0..j.placements.len())
            .filter(|&i| !j.placements[i].bound)
            .collect();
        if unbound.is_empty() {
            return Err(ClusterError::Invalid(format!(
                "job {}/{} has no placement waiting for a bind",
                j.spec.project, j.spec.name
            )));
        }
        let all = unbound.len() == j.placements.len();
        if all {
            self.release_all(id);
            self.set_phase(id, Phase::Pending);
            let j = &mut self.jobs[id as usize];
            j.remaining_s = j.spec.est_runtime_s;
            j.reason = why.into();
        } else {
            for &i in unbound.iter().rev() {
                self.release_replica(id, i);
            }
        }
        self.emit(
            Severity::Warning,
            "BindFailed",
            self.job_ref(id),
            format!(
                "{why}; {} replica(s) taken back{}",
                unbound.len(),
                if all { ", queued again" } else { "" }
            ),
        );
        Ok(())
    }

    /// Takes back placements not confirmed within the bind timeout. Returns how many
    /// jobs it touched.
    pub(crate) fn expire_binds(&mut self) -> usize {
        let limit = self.config.bind_timeout_s;
        let now = self.now;
        let late: Vec<JobId> = self
            .assumed
            .iter()
            .copied()
            .filter(|&id| {
                self.jobs
                    .get(id)
                    .is_some_and(|j| j.placed_at.saturating_add(limit) < now)
            })
            .collect();
        for &id in &late {
            let _ = self.fail_bind(
                id,
                &format!("bind not confirmed within {limit}s of the placement"),
            );
        }
        late.len()
    }

    /// The autoscaler of an inference service, on one reading of its load: replicas
    /// to `ceil(demand / target)` within `[min, max]`.
    pub(crate) fn autoscale(&mut self, id: JobId, usage_pct: f64) -> Result<(), ClusterError> {
        let j = &self.jobs[id as usize];
        let JobKind::Inference(a) = j.spec.kind.clone() else {
            return Err(ClusterError::Invalid(format!(
                "job {} is not an inference service",
                self.job_ref(id)
            )));
        };
        if j.phase != Phase::Running {
            return Ok(());
        }
        let now = self.now;
        let running = j.running_replicas().max(1) as f64;
        let j = &mut self.jobs[id as usize];
        j.used_pct = usage_pct.min(100.0).round() as u32;
        j.autoscaler.last_usage_pct = Some(usage_pct);
        if j.autoscaler.paused_by.is_some() {
            return Ok(());
        }
        // Replicas' worth of demand at full use, and the replicas that serve it at the
        // target rate.
        let demand = usage_pct * running / 100.0;
        let current = j.desired_replicas;
        let desired = ((demand * 100.0 / a.target_pct as f64).ceil() as u32).clamp(a.min, a.max);
        let h = &mut j.autoscaler.history;
        h.push_back((now, desired));
        while h.front().is_some_and(|&(t, _)| t + a.window_s < now) {
            h.pop_front();
        }
        let eff = if desired >= current {
            desired
        } else {
            h.iter().map(|x| x.1).max().unwrap_or(desired)
        };
        if eff != current {
            // To a tenth, or finer where that reads as the target itself: 60.04% is
            // above a target of 60, and said so (rounded to 60% it read as a scale-up
            // at the target).
            let usage = usage_pct.min(100.0);
            let target = a.target_pct as f64;
            let places = (1..4)
                .find(|&d| {
                    let k = 10f64.powi(d);
                    (usage * k).round() != target * k
                })
                .unwrap_or(1) as usize;
            let shown = format!("{usage:.places$}");
            let why = format!(
                "by autoscaler: GPU memory usage {shown}% vs target {}%{}",
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
            self.scale(id, eff, &why);
        }
        Ok(())
    }

    /// Takes a node's capacity, devices, labels and taints from `new` (the node as the
    /// world has it now). Cards that stay keep their jobs, health and cordons; jobs on
    /// cards withdrawn (fewer, or of another device resource) are lost.
    pub fn update_node(&mut self, n: NodeId, new: Node) {
        let old = &self.nodes[n as usize];
        let name = old.name.clone();
        let gone: Vec<u32> = old
            .gpus
            .iter()
            .filter(|g| {
                new.gpus
                    .get(g.index as usize)
                    .is_none_or(|x| x.resource != g.resource)
            })
            .map(|g| g.index)
            .collect();
        let mut said = Vec::new();
        let (og, ng) = (old.gpus.len(), new.gpus.len());
        if og != ng {
            said.push(format!("GPUs {og} -> {ng}"));
        }
        if old.cpu_milli != new.cpu_milli || old.memory != new.memory || old.disk != new.disk {
            said.push(format!(
                "allocatable {} CPU, {} memory, {} disk",
                crate::quantity::fmt_cpu(new.cpu_milli),
                crate::quantity::fmt_bytes(new.memory),
                crate::quantity::fmt_bytes(new.disk)
            ));
        }
        if old.taints != new.taints {
            said.push(if new.taints.is_empty() {
                "no taints".to_string()
            } else {
                format!(
                    "taints {}",
                    new.taints
                        .iter()
                        .map(crate::rules::Taint::text)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
        }
        for &g in &gone {
            for j in self.jobs_on(n, Some(g)) {
                self.lose(
                    j,
                    n,
                    Some(g),
                    "GpuWithdrawn",
                    format!("GPU {name}/{g} is no longer advertised by the node"),
                );
            }
        }
        let old_pool = self.nodes[n as usize].pool;
        self.account_node(n, false);
        {
            let node = &mut self.nodes[n as usize];
            node.cpu_milli = new.cpu_milli;
            node.memory = new.memory;
            node.disk = new.disk;
            node.max_pods = new.max_pods;
            node.set_labels(new.labels().clone());
            node.taints = new.taints;
            let mut cards = new.gpus;
            for g in &mut cards {
                if let Some(was) = node.gpus.get(g.index as usize) {
                    if was.resource == g.resource {
                        g.allocs = was.allocs.clone();
                        g.health = was.health.clone();
                        g.cordoned = was.cordoned;
                        g.util_pct = was.util_pct;
                        g.mem_used = was.mem_used;
                        g.temp_c = was.temp_c;
                        g.power_w = was.power_w;
                    }
                }
            }
            node.gpus = cards;
        }
        let pool = self.pool_for_labels(self.nodes[n as usize].labels());
        self.nodes[n as usize].pool = pool;
        self.account_node(n, true);
        self.reindex(n);
        if pool != old_pool {
            said.push(format!(
                "pool {} -> {}",
                self.pool_name(old_pool),
                self.pool_name(pool)
            ));
        }
        self.emit(
            Severity::Normal,
            "NodeUpdated",
            format!("node/{name}"),
            if said.is_empty() {
                "node updated".to_string()
            } else {
                said.join("; ")
            },
        );
    }

    /// Nodes whose labels now point at another pool (a pool added or changed) move
    /// there.
    pub fn rehome_nodes(&mut self) {
        let moved: Vec<NodeId> = (0..self.nodes.len() as NodeId)
            .filter(|&n| {
                let node = &self.nodes[n as usize];
                node.pool != self.pool_for_labels(node.labels())
            })
            .collect();
        for n in moved {
            let labels = self.nodes[n as usize].labels().clone();
            self.relabel_node(n, labels);
        }
    }

    /// Sets a node's labels; it moves to the pool its new labels select.
    pub fn relabel_node(&mut self, n: NodeId, labels: BTreeMap<String, String>) {
        let old_pool = self.nodes[n as usize].pool;
        let name = self.nodes[n as usize].name.clone();
        // Take the node's capacity out of its old pool, relabel, and put it back where
        // the labels now point.
        self.account_node(n, false);
        self.nodes[n as usize].set_labels(labels);
        let pool = self.pool_for_labels(self.nodes[n as usize].labels());
        self.nodes[n as usize].pool = pool;
        self.account_node(n, true);
        self.reindex(n);
        let msg = if pool != old_pool {
            format!(
                "labels changed: pool {} -> {}",
                self.pool_name(old_pool),
                self.pool_name(pool)
            )
        } else {
            "labels changed".to_string()
        };
        self.emit(
            Severity::Normal,
            "NodeLabelled",
            format!("node/{name}"),
            msg,
        );
    }
}
