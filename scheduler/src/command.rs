//! Operator commands: the one API the console, the CLI and scenarios use to act on
//! the cluster. Each command either changes state and logs an event, or is refused with
//! a reason and changes nothing.

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, ClusterError};
use crate::event::Severity;
use crate::model::*;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Submit a job (from a manifest); not available in scenario files, which have
    /// `workload.jobs` for that.
    Submit(Box<JobSpec>),
    RequestQuota {
        project: String,
        pool: String,
        gpus: u32,
        #[serde(default)]
        reserved: bool,
        #[serde(default)]
        reason: String,
    },
    ApproveQuota {
        id: u32,
    },
    RejectQuota {
        id: u32,
        #[serde(default)]
        reason: String,
    },
    SetPriority {
        job: String,
        priority: i32,
    },
    CordonGpu {
        node: String,
        gpu: u32,
    },
    UncordonGpu {
        node: String,
        gpu: u32,
    },
    CordonNode {
        node: String,
    },
    UncordonNode {
        node: String,
    },
    DrainNode {
        node: String,
    },
    Requeue {
        job: String,
    },
    /// Runs a job held for the federation in this cluster (its file asks for another
    /// cluster, or `auto`): the federation's own choice when no cluster starts it
    /// sooner, or an operator's.
    Keep {
        job: String,
        /// Why, where the federation decided ("no other cluster starts it sooner").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    Cancel {
        job: String,
        /// Why, where not the operator's own wish: a federation moving a Pending job
        /// to another cluster ("moved to site-b: ..."); the job's reason and the
        /// audit say it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
    },
    /// Sets an inference service's replicas by hand; its autoscaler is paused until
    /// resumed, so the operator's choice is never silently reverted.
    Scale {
        job: String,
        replicas: u32,
    },
    /// Hands an inference service back to its autoscaler.
    ResumeAutoscale {
        job: String,
    },
    /// Acknowledges an open alert (by its key, e.g. `oom/ml-prod/gpt`): it leaves the
    /// open list until it happens again.
    AckAlert {
        alert: String,
    },
    /// Sets (or, listed in `remove`, removes) labels of a node, as `kubectl label node`
    /// does; the node moves to the pool its labels now select.
    LabelNode {
        node: String,
        #[serde(default)]
        set: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        remove: Vec<String>,
    },
}

/// What a person may do: look (viewer); act on nodes and jobs (operator); also decide
/// quotas and roles (admin). Ordered: each role may do what the ones before it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The longest text one field of a command may carry (a name, a reason, a line of a
/// submitted job's command), bytes.
pub const MAX_COMMAND_FIELD: usize = 16 << 10;
/// The most a whole command may weigh, as recorded (JSON), bytes.
pub const MAX_COMMAND: usize = 1 << 20;
/// The most entries of one list or map in a command (a node's labels, a job's
/// environment): more is refused unrecorded.
pub const MAX_COMMAND_ENTRIES: usize = 256;

impl Command {
    /// Why the command is too large to be taken (and recorded): a field longer than
    /// [`MAX_COMMAND_FIELD`], or the whole beyond [`MAX_COMMAND`]. A viewer's refused
    /// commands are recorded too, so without a bound 25 names of 131 kB each made every
    /// later read through the socket longer than it may be.
    pub fn too_large(&self) -> Option<String> {
        fn longest(v: &serde_json::Value) -> usize {
            match v {
                serde_json::Value::String(s) => s.len(),
                serde_json::Value::Array(a) => a.iter().map(longest).max().unwrap_or(0),
                serde_json::Value::Object(o) => o
                    .iter()
                    .map(|(k, v)| k.len().max(longest(v)))
                    .max()
                    .unwrap_or(0),
                _ => 0,
            }
        }
        fn widest(v: &serde_json::Value) -> usize {
            match v {
                serde_json::Value::Array(a) => a.iter().map(widest).max().unwrap_or(0).max(a.len()),
                serde_json::Value::Object(o) => {
                    o.values().map(widest).max().unwrap_or(0).max(o.len())
                }
                _ => 0,
            }
        }
        let value = serde_json::to_value(self).ok()?;
        let len = value.to_string().len();
        if len > MAX_COMMAND {
            return Some(format!(
                "the command is {len} bytes long; at most {MAX_COMMAND} are taken"
            ));
        }
        let n = longest(&value);
        if n > MAX_COMMAND_FIELD {
            return Some(format!(
                "a value of the command is {n} bytes long; at most {MAX_COMMAND_FIELD} are taken"
            ));
        }
        let wide = widest(&value);
        (wide > MAX_COMMAND_ENTRIES).then(|| {
            format!("a list or map of the command has {wide} entries; at most {MAX_COMMAND_ENTRIES} are taken")
        })
    }

    /// The command with every text longer than `max` characters cut (ending in `…`) and
    /// every list kept to its first 16 items: what the record keeps of a refused
    /// command, which changed nothing and is kept only to say who tried what (a
    /// viewer's refused submits of 700 kB each grew a state file by 1.5 GB).
    pub fn trimmed(&self, max: usize) -> Command {
        fn trim(v: &mut serde_json::Value, max: usize) {
            match v {
                serde_json::Value::String(s) => *s = crate::limits::cut(s, max),
                serde_json::Value::Array(a) => {
                    a.truncate(16);
                    a.iter_mut().for_each(|x| trim(x, max));
                }
                serde_json::Value::Object(o) => {
                    // Map keys too (a node's labels): a struct's field names are short.
                    let long: Vec<String> = o.keys().filter(|k| k.len() > max).cloned().collect();
                    for k in long {
                        if let Some(v) = o.remove(&k) {
                            o.insert(crate::limits::cut(&k, max), v);
                        }
                    }
                    o.values_mut().for_each(|x| trim(x, max));
                }
                _ => {}
            }
        }
        let Ok(mut v) = serde_json::to_value(self) else {
            return self.clone();
        };
        trim(&mut v, max);
        serde_json::from_value(v).unwrap_or_else(|_| self.clone())
    }

    /// The command in words, for confirmation prompts, logs and the audit.
    pub fn describe(&self) -> String {
        match self {
            Command::Submit(spec) => format!("submit job {}/{}", spec.project, spec.name),
            Command::RequestQuota {
                project,
                pool,
                gpus,
                ..
            } => format!("request +{gpus} GPUs for {project} in {pool}"),
            Command::ApproveQuota { id } => format!("approve quota request #{id}"),
            Command::RejectQuota { id, .. } => format!("reject quota request #{id}"),
            Command::SetPriority { job, priority } => format!(
                "set priority of {job} to {}",
                crate::model::priority_name(*priority)
            ),
            Command::CordonGpu { node, gpu } => format!("cordon GPU {node}/{gpu}"),
            Command::UncordonGpu { node, gpu } => format!("uncordon GPU {node}/{gpu}"),
            Command::CordonNode { node } => format!("cordon node {node}"),
            Command::UncordonNode { node } => format!("uncordon node {node}"),
            Command::DrainNode { node } => {
                format!("drain node {node} (cordon it and requeue its jobs)")
            }
            Command::Requeue { job } => format!("requeue job {job}"),
            Command::Keep { job, .. } => format!("keep job {job} in this cluster"),
            Command::Cancel { job, why: None } => format!("cancel job {job}"),
            Command::Cancel {
                job,
                why: Some(why),
            } => format!("cancel job {job} ({why})"),
            Command::Scale { job, replicas } => {
                format!("scale {job} to {replicas} replicas (its autoscaler pauses until resumed)")
            }
            Command::ResumeAutoscale { job } => format!("hand {job} back to its autoscaler"),
            Command::AckAlert { alert } => format!("acknowledge alert {alert}"),
            Command::LabelNode { node, set, remove } => {
                let mut parts: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
                parts.extend(remove.iter().map(|k| format!("{k}-")));
                format!("label node {node} {}", parts.join(" "))
            }
        }
    }
}

impl Cluster {
    fn gpu_ref(&self, node: &str, gpu: u32) -> Result<NodeId, ClusterError> {
        let n = self.node_id(node)?;
        let count = self.nodes[n as usize].gpus.len();
        if gpu as usize >= count {
            return Err(ClusterError::UnknownGpu {
                node: node.to_string(),
                index: gpu,
                count,
            });
        }
        Ok(n)
    }

    /// Cordons or uncordons a node, or one GPU of it: an operator's command or the
    /// world's own cordon (`kubectl cordon`), the same change and event.
    pub(crate) fn set_cordon(
        &mut self,
        node: &str,
        gpu: Option<u32>,
        on: bool,
    ) -> Result<String, ClusterError> {
        let (n, was, what, object, reason) = match gpu {
            Some(g) => {
                let n = self.gpu_ref(node, g)?;
                let was = self.nodes[n as usize].gpus[g as usize].cordoned;
                self.nodes[n as usize].gpus[g as usize].cordoned = on;
                let reason = if on { "GpuCordoned" } else { "GpuUncordoned" };
                (
                    n,
                    was,
                    format!("GPU {node}/{g}"),
                    format!("gpu/{node}/{g}"),
                    reason,
                )
            }
            None => {
                let n = self.node_id(node)?;
                let was = self.nodes[n as usize].cordoned;
                self.nodes[n as usize].cordoned = on;
                let reason = if on { "NodeCordoned" } else { "NodeUncordoned" };
                (
                    n,
                    was,
                    format!("node {node}"),
                    format!("node/{node}"),
                    reason,
                )
            }
        };
        if was == on {
            return Ok(if on {
                format!("{what} was already cordoned")
            } else {
                format!("{what} was not cordoned")
            });
        }
        self.reindex(n);
        let m = match (on, gpu) {
            (true, Some(_)) => {
                format!("{what} cordoned: running work stays, nothing new is placed")
            }
            (true, None) => format!("{what} cordoned"),
            (false, _) => format!("{what} uncordoned"),
        };
        self.emit(Severity::Normal, reason, object, m.clone());
        Ok(m)
    }

    /// Stops a job that has not ended, saying why (an operator's cancel, or its object
    /// gone in the world).
    pub(crate) fn stop_job(&mut self, job: &str, why: &str) -> Result<String, ClusterError> {
        let id = self.job_id(job)?;
        if self.jobs[id as usize].phase.is_terminal() {
            return Err(ClusterError::Invalid(format!(
                "job {job} already ended ({})",
                self.jobs[id as usize].phase.name()
            )));
        }
        self.release_all(id);
        self.set_phase(id, Phase::Cancelled);
        self.jobs[id as usize].reason = why.into();
        self.emit(Severity::Normal, "Cancelled", self.job_ref(id), why.into());
        Ok(format!("job {job} cancelled"))
    }

    /// Opens a quota request (an operator's `request-quota`, or a QuotaRequest object
    /// applied in the world).
    pub(crate) fn request_quota(
        &mut self,
        project: &str,
        pool: &str,
        gpus: u32,
        reserved: bool,
        reason: &str,
    ) -> Result<String, ClusterError> {
        let (project, pool, reason) = (project.to_string(), pool.to_string(), reason.to_string());

        let pid = self
            .project_id(&project)
            .ok_or_else(|| ClusterError::UnknownProject(project.clone()))?;
        let pl = self
            .pool_id(&pool)
            .ok_or_else(|| ClusterError::UnknownPool(pool.clone()))?;
        // The same limit whichever face sent it (the CLI and the console
        // read it with `verbs`, a socket's client may send any number).
        if gpus == 0 || f64::from(gpus) > crate::limits::MAX_QUOTA_GPUS {
            return Err(ClusterError::Invalid(format!(
                "a quota request needs 1 to {} GPUs, not {gpus}",
                crate::limits::MAX_QUOTA_GPUS
            )));
        }
        let id = self.next_request;
        self.next_request += 1;
        self.quota_requests.push(QuotaRequest {
            id,
            project: pid,
            pool: pl,
            gpus,
            reserved,
            reason: reason.clone(),
            status: RequestStatus::Pending,
            created: self.now,
        });
        let m = format!("quota request #{id}: +{gpus} GPUs for {project} in {pool}: {reason}");
        self.emit(
            Severity::Normal,
            "QuotaRequested",
            format!("quota/{project}/{pool}"),
            m.clone(),
        );
        Ok(m)
    }

    /// Applies an operator command. Returns what happened, in words.
    pub fn apply(&mut self, cmd: Command) -> Result<String, ClusterError> {
        self.apply_by(cmd, "operator")
    }

    /// The pool a job that names none goes to: among the pools where its project has
    /// quota, the first of the kind of work it is (inference or training), else the
    /// first.
    pub fn default_pool(&self, spec: &JobSpec) -> Result<String, ClusterError> {
        let pid = self
            .project_id(&spec.project)
            .ok_or_else(|| ClusterError::UnknownProject(spec.project.clone()))?;
        let want = match spec.kind {
            JobKind::Inference(_) => PoolKind::Inference,
            JobKind::Train => PoolKind::Training,
        };
        let mine: Vec<&Pool> = self
            .pools
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                self.projects[pid as usize]
                    .quotas
                    .contains_key(&(*i as PoolId))
            })
            .map(|(_, p)| p)
            .collect();
        mine.iter()
            .find(|p| p.kind == want)
            .or(mine.first())
            .map(|p| p.name.clone())
            .ok_or_else(|| {
                ClusterError::Invalid(format!(
                    "job {} names no pool, and project {} has quota in none",
                    spec.name, spec.project
                ))
            })
    }

    /// The pool of a job that names none and whose selector names no role (a pod as
    /// users write it): of the project's pools (those for its kind of work first),
    /// the first where it fits now, else the first with a node its rules (selector,
    /// taints, node affinity) let it on, else [`Cluster::default_pool`].
    pub fn pool_for_unnamed(&self, spec: &JobSpec) -> Result<String, ClusterError> {
        let Some(pid) = self.project_id(&spec.project) else {
            return self.default_pool(spec);
        };
        let want = match spec.kind {
            JobKind::Inference(_) => PoolKind::Inference,
            JobKind::Train => PoolKind::Training,
        };
        let mut mine: Vec<PoolId> = (0..self.pools.len() as PoolId)
            .filter(|p| self.projects[pid as usize].quotas.contains_key(p))
            .collect();
        mine.sort_by_key(|&p| self.pools[p as usize].kind != want);
        if mine.len() <= 1 {
            // No choice to make (and no placement to try per pod).
            return self.default_pool(spec);
        }
        let name = |p: PoolId| self.pools[p as usize].name.clone();
        if let Some(&p) = mine
            .iter()
            .find(|&&p| self.find_node(spec, 1, &[(p, false)], &[], &[]).is_some())
        {
            return Ok(name(p));
        }
        if let Some(&p) = mine.iter().find(|&&p| {
            self.pool_nodes(p)
                .any(|n| crate::fit::node_constraints(&self.nodes[n as usize], spec).is_ok())
        }) {
            return Ok(name(p));
        }
        self.default_pool(spec)
    }

    /// Applies a command given by `actor` (named in events where it matters).
    pub fn apply_by(&mut self, cmd: Command, actor: &str) -> Result<String, ClusterError> {
        let msg = match cmd {
            Command::Submit(mut spec) => {
                // A Deployment names no pool: the project's pool for its kind of work
                // (inference, else training), the first where it has quota.
                if spec.pool.is_empty() {
                    spec.pool = self.default_pool(&spec)?;
                }
                let name = spec.full_name();
                // A job for a project or pool that does not exist could never run.
                if self.project_id(&spec.project).is_none() {
                    return Err(ClusterError::UnknownProject(spec.project.clone()));
                }
                if self.pool_id(&spec.pool).is_none() {
                    return Err(ClusterError::UnknownPool(spec.pool.clone()));
                }
                self.submit(*spec)?;
                format!("job {name} submitted")
            }
            Command::RequestQuota {
                project,
                pool,
                gpus,
                reserved,
                reason,
            } => self.request_quota(&project, &pool, gpus, reserved, &reason)?,
            Command::ApproveQuota { id } => {
                let r = self.request_mut(id)?;
                let (pid, pl, gpus, reserved) = (r.project, r.pool, r.gpus, r.reserved);
                let add = gpus as u64 * GPU_MILLI as u64;
                // Reserved GPUs are a promise of room: all projects' reservations
                // together never promise more than the pool has.
                if reserved {
                    let held = self.reserved_gpu_milli(pl);
                    let cap = self.pool_capacity(pl).gpu_milli;
                    if held + add > cap {
                        return Err(ClusterError::Invalid(format!(
                            "quota request #{id} would reserve {} GPUs in pool {}, which has {}: {} are reserved already (approve at most {}, or add nodes to the pool)",
                            Dim::Gpu.fmt(held + add),
                            self.pools[pl as usize].name,
                            Dim::Gpu.fmt(cap),
                            Dim::Gpu.fmt(held),
                            Dim::Gpu.fmt(cap.saturating_sub(held)),
                        )));
                    }
                }
                self.request_mut(id)?.status = RequestStatus::Approved;
                self.admission_gen += 1;
                let q = self.projects[pid as usize].quotas.entry(pl).or_default();
                if let Some(m) = q.max.gpu_milli.as_mut() {
                    *m += add;
                }
                if reserved {
                    q.reserved.gpu_milli += add;
                }
                let obj = format!(
                    "quota/{}/{}",
                    self.projects[pid as usize].name, self.pools[pl as usize].name
                );
                let m = format!(
                    "approved quota request #{id}: +{gpus} GPUs{}",
                    if reserved { " (reserved)" } else { "" }
                );
                self.emit(Severity::Normal, "QuotaApproved", obj, m.clone());
                m
            }
            Command::RejectQuota { id, reason } => {
                let r = self.request_mut(id)?;
                r.status = RequestStatus::Rejected(reason.clone());
                let (pid, pl) = (r.project, r.pool);
                let obj = format!(
                    "quota/{}/{}",
                    self.projects[pid as usize].name, self.pools[pl as usize].name
                );
                let m = format!("rejected quota request #{id}: {reason}");
                self.emit(Severity::Normal, "QuotaRejected", obj, m.clone());
                m
            }
            Command::SetPriority { job, priority } => {
                let id = self.job_id(&job)?;
                // The same limit for every face (and a scripted or socket command).
                if priority.abs() > crate::limits::MAX_PRIORITY {
                    return Err(ClusterError::Invalid(format!(
                        "priority {priority} is beyond ±{}: give high, medium, low or a number within it",
                        crate::limits::MAX_PRIORITY
                    )));
                }
                if self.jobs[id as usize].phase.is_terminal() {
                    return Err(ClusterError::Invalid(format!(
                        "job {job} already ended ({}); requeue it first",
                        self.jobs[id as usize].phase.name()
                    )));
                }
                let j = &mut self.jobs[id as usize];
                let old = j.spec.priority;
                let aged = j.aged;
                let key = |p: i32| {
                    (
                        p.saturating_add(aged),
                        std::cmp::Reverse(j.started.unwrap_or(0)),
                        id,
                    )
                };
                if j.phase == Phase::Running && self.running_by_prio.remove(&key(old)).is_some() {
                    self.running_by_prio.insert(key(priority));
                    crate::cluster::running_base_remove(&mut self.running_base, old);
                    *self.running_base.entry(priority).or_default() += 1;
                }
                std::sync::Arc::make_mut(&mut j.spec).priority = priority;
                self.forget_lowest_prio(id);
                if let Some(k) = self.pending.get_mut(&id) {
                    k.priority = priority;
                    let replicas = k.replicas;
                    // (and its copy, kept with its quota verdict's key)
                    if let Some(k) = self
                        .verdict_key(id, replicas)
                        .and_then(|vk| self.pending_by_key.get_mut(&vk))
                        .and_then(|m| m.get_mut(&id))
                    {
                        k.priority = priority;
                    }
                }
                let m = format!(
                    "priority {} -> {}",
                    priority_name(old),
                    priority_name(priority)
                );
                self.emit(
                    Severity::Normal,
                    "PriorityChanged",
                    self.job_ref(id),
                    m.clone(),
                );
                m
            }
            Command::CordonGpu { node, gpu } => self.set_cordon(&node, Some(gpu), true)?,
            Command::UncordonGpu { node, gpu } => self.set_cordon(&node, Some(gpu), false)?,
            Command::CordonNode { node } => self.set_cordon(&node, None, true)?,
            Command::UncordonNode { node } => self.set_cordon(&node, None, false)?,
            Command::DrainNode { node } => {
                let n = self.node_id(&node)?;
                self.nodes[n as usize].cordoned = true;
                self.reindex(n);
                let victims = self.jobs_on(n, None);
                for &v in &victims {
                    self.evict(
                        v,
                        "Evicted",
                        format!("evicted: node {node} is being drained"),
                    );
                }
                let m = format!(
                    "node {node} drained: cordoned, {} job(s) requeued",
                    victims.len()
                );
                self.emit(
                    Severity::Warning,
                    "NodeDrained",
                    format!("node/{node}"),
                    m.clone(),
                );
                m
            }
            Command::Requeue { job } => {
                let id = self.job_id(&job)?;
                let j = &self.jobs[id as usize];
                // Who asked, as the audit has it (an operator, or maar's federation
                // giving back a job another cluster refused).
                let by = format!("requeued by {actor}");
                match j.phase {
                    Phase::Running => self.evict(id, "Requeued", by),
                    Phase::Failed | Phase::Cancelled | Phase::Restarting => {
                        self.set_phase(id, Phase::Pending);
                        let j = &mut self.jobs[id as usize];
                        j.restarts = 0;
                        j.remaining_s = j.spec.est_runtime_s;
                        // (Held for the federation again, its reason says so.)
                        if !self.pending_held.contains(&id) {
                            self.jobs[id as usize].reason = by.as_str().into();
                        }
                        self.emit(Severity::Normal, "Requeued", self.job_ref(id), by);
                    }
                    p => {
                        return Err(ClusterError::Invalid(format!(
                            "job {job} is {} and cannot be requeued",
                            p.name()
                        )))
                    }
                }
                format!("job {job} requeued")
            }
            Command::Keep { job, why } => self.keep(&job, why.as_deref().unwrap_or(""), actor)?,
            Command::Cancel { job, why } => {
                let why = why.map_or_else(
                    || "cancelled by operator".into(),
                    |w| format!("cancelled: {w}"),
                );
                self.stop_job(&job, &why)?
            }
            Command::Scale { job, replicas } => {
                let id = self.job_id(&job)?;
                let JobKind::Inference(a) = &self.jobs[id as usize].spec.kind else {
                    return Err(ClusterError::Invalid(format!(
                        "job {job} is not an inference service"
                    )));
                };
                if replicas < a.min || replicas > a.max {
                    return Err(ClusterError::Invalid(format!(
                        "replicas {replicas} outside the service's range {}..{}",
                        a.min, a.max
                    )));
                }
                if self.jobs[id as usize].phase.is_terminal() {
                    return Err(ClusterError::Invalid(format!(
                        "job {job} already ended ({})",
                        self.jobs[id as usize].phase.name()
                    )));
                }
                self.scale(id, replicas, &format!("by {actor}"));
                let was = self.jobs[id as usize]
                    .autoscaler
                    .paused_by
                    .replace(actor.to_string());
                if was.is_none() {
                    self.emit(
                        Severity::Normal,
                        "AutoscalerPaused",
                        self.job_ref(id),
                        format!(
                            "autoscaler paused by {actor}: replicas stay at {replicas} until it is resumed"
                        ),
                    );
                }
                format!(
                    "job {job} scaled to {replicas} replicas; its autoscaler is paused until resumed"
                )
            }
            Command::AckAlert { alert } => self.ack_alert(&alert, actor)?,
            Command::LabelNode { node, set, remove } => {
                let n = self.node_id(&node)?;
                if set.is_empty() && remove.is_empty() {
                    return Err(ClusterError::Invalid(
                        "give at least one KEY=VALUE to set or KEY- to remove".into(),
                    ));
                }
                for (k, v) in &set {
                    crate::limits::label(k, v).map_err(ClusterError::Invalid)?;
                }
                let mut labels = self.nodes[n as usize].labels().clone();
                let before_pool = self.nodes[n as usize].pool;
                for k in &remove {
                    labels.remove(k);
                }
                labels.extend(set.clone());
                self.relabel_node(n, labels);
                let after = self.nodes[n as usize].pool;
                if after != before_pool {
                    format!(
                        "node {node} labelled; it moved from pool {} to pool {}",
                        self.pool_name(before_pool),
                        self.pool_name(after)
                    )
                } else if set.keys().any(|k| k == "pool" || k.ends_with("/pool")) {
                    // A label named for the pool is not what chooses it: said, since
                    // nothing moved (a QA pass labelled pool=inference-gpu and saw no
                    // change without a word why).
                    format!(
                        "node {node} labelled (pool {}, unchanged: a node's pool is chosen by the pools' node selectors, such as {}=NAME, not by a `pool` label)",
                        self.pool_name(after),
                        crate::model::LABEL_ROLE
                    )
                } else {
                    format!("node {node} labelled (pool {})", self.pool_name(after))
                }
            }
            Command::ResumeAutoscale { job } => {
                let id = self.job_id(&job)?;
                if !self.jobs[id as usize].is_inference() {
                    return Err(ClusterError::Invalid(format!(
                        "job {job} is not an inference service"
                    )));
                }
                let Some(by) = self.jobs[id as usize].autoscaler.paused_by.take() else {
                    return Err(ClusterError::Invalid(format!(
                        "the autoscaler of {job} is not paused"
                    )));
                };
                self.jobs[id as usize].autoscaler.history.clear();
                self.emit(
                    Severity::Normal,
                    "AutoscalerResumed",
                    self.job_ref(id),
                    format!("autoscaler resumed by {actor} (paused by {by})"),
                );
                format!("autoscaler of {job} resumed")
            }
        };
        Ok(msg)
    }

    /// GPUs (milli) all projects' quotas reserve in `pool`.
    pub fn reserved_gpu_milli(&self, pool: PoolId) -> u64 {
        self.projects
            .iter()
            .filter_map(|p| p.quotas.get(&pool))
            .map(|q| q.reserved.gpu_milli)
            .sum()
    }

    fn request_mut(&mut self, id: u32) -> Result<&mut QuotaRequest, ClusterError> {
        let r = self
            .quota_requests
            .iter_mut()
            .find(|r| r.id == id)
            .ok_or(ClusterError::UnknownRequest(id))?;
        if r.status != RequestStatus::Pending {
            return Err(ClusterError::RequestDecided(id));
        }
        Ok(r)
    }

    /// Sets an inference job's desired replicas; extra replicas are removed newest first,
    /// missing ones are placed by the next cycle.
    pub fn scale(&mut self, id: JobId, replicas: u32, why: &str) {
        let j = &self.jobs[id as usize];
        let old = j.desired_replicas;
        if old == replicas {
            return;
        }
        let live = matches!(
            self.jobs[id as usize].phase,
            Phase::Pending | Phase::Running
        );
        let pending = self.pending.contains_key(&id);
        if live {
            self.shape_remove(id);
        }
        if pending {
            self.pending_remove(id);
        }
        self.jobs[id as usize].desired_replicas = replicas;
        if pending {
            self.pending_insert(id);
        }
        if live {
            self.shape_add(id);
        }
        if self.jobs[id as usize].phase == Phase::Running {
            while self.jobs[id as usize].running_replicas() > replicas {
                let last = self.jobs[id as usize].placements.len() - 1;
                self.release_replica(id, last);
            }
        }
        let (reason, sev) = if replicas < old {
            ("ScaledDown", Severity::Normal)
        } else {
            ("ScaleUpRequested", Severity::Normal)
        };
        self.emit(
            sev,
            reason,
            self.job_ref(id),
            format!("desired replicas {old} -> {replicas} {why}"),
        );
    }
}

/// `[node] NODE KEY=VALUE... KEY-...` (kubectl's `label node` arguments; a line
/// continuation `\` and `--overwrite` are ignored) as a [`Command::LabelNode`]: how every
/// face reads `label`. `Err` says what is wrong.
pub fn parse_label_args<S: AsRef<str>>(args: &[S]) -> Result<Command, String> {
    let mut it = args
        .iter()
        .map(|a| a.as_ref())
        .filter(|a| *a != "\\" && *a != "--overwrite")
        .peekable();
    if it.peek() == Some(&"node") || it.peek() == Some(&"nodes") {
        it.next();
    }
    let node = it.next().ok_or("name the node")?.to_string();
    let mut set = std::collections::BTreeMap::new();
    let mut remove = Vec::new();
    for a in it {
        if let Some((k, v)) = a.split_once('=') {
            crate::limits::label(k, v)?;
            set.insert(k.to_string(), v.to_string());
        } else if let Some(k) = a.strip_suffix('-') {
            remove.push(k.to_string());
        } else {
            return Err(format!(
                "`{}` is neither KEY=VALUE nor KEY-",
                crate::limits::echo(a)
            ));
        }
    }
    if set.is_empty() && remove.is_empty() {
        return Err("give at least one KEY=VALUE (or KEY- to remove)".into());
    }
    Ok(Command::LabelNode { node, set, remove })
}
