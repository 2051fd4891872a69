//! Cluster state and the bookkeeping every change goes through: allocating and releasing
//! replicas, the free-GPU index, quota usage, events, and time accounting.
//!
//! All mutation of nodes and jobs happens through the methods here, so the invariants
//! (no node or GPU over capacity, a job in one place only) are kept in one spot.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::event::{Event, Severity};
use crate::jobs::Jobs;
use crate::model::*;

/// Clusters up to this many nodes get cluster-level fixes (more quota, an uncordon)
/// proven on a copy; larger ones get them said without the proof's "starts now".
pub const PROOF_NODES: usize = 2_000;

/// Knobs of the scheduling cycle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchedConfig {
    /// Every `aging_s` seconds of waiting raises a job's effective priority by one.
    pub aging_s: u64,
    pub backfill: bool,
    pub preemption: bool,
    /// Pending longer than this raises an alert (console) — seconds.
    pub pending_alert_s: u64,
    /// A placement the driver has not confirmed within this many seconds is taken back
    /// and the job queued again (as kube-scheduler expires an assumed pod).
    #[serde(default = "d_bind_timeout")]
    pub bind_timeout_s: u64,
    /// Ended jobs kept in memory (newest first) for readers; older ones are dropped
    /// (their history stays in the event log and the durable record).
    #[serde(default = "d_retain_ended")]
    pub retain_ended: usize,
    /// Events kept in memory (the newest); the durable record keeps them all.
    #[serde(default = "d_event_window")]
    pub event_window: usize,
    /// Clusters of at most this many nodes get explain's fixes proven on a whole copy
    /// with a scheduling cycle; larger ones on the job's own path
    /// (`docs/explain.md`).
    #[serde(default = "d_proof_nodes")]
    pub proof_nodes: usize,
    /// Relative speed of each GPU model (lowercase id; 1.0 = the card runtimes are
    /// estimated for; unlisted models run at 1.0). A job's estimated runtime is divided
    /// by the speed of the slowest card it is placed on (a gang runs at its slowest
    /// member's pace).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub speeds: BTreeMap<String, f64>,
    /// How a node is chosen among those that fit (`placement/`): maar's own policy by
    /// default, or one of the published policies, to compare on a real cluster.
    #[serde(default, skip_serializing_if = "is_maar")]
    pub placement: crate::placement::Policy,
}

fn is_maar(p: &crate::placement::Policy) -> bool {
    *p == crate::placement::Policy::Maar
}

fn d_bind_timeout() -> u64 {
    30
}
fn d_retain_ended() -> usize {
    1000
}
fn d_event_window() -> usize {
    5000
}
fn d_proof_nodes() -> usize {
    PROOF_NODES
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            aging_s: 600,
            backfill: true,
            preemption: true,
            pending_alert_s: 3600,
            bind_timeout_s: d_bind_timeout(),
            retain_ended: d_retain_ended(),
            event_window: d_event_window(),
            proof_nodes: d_proof_nodes(),
            speeds: BTreeMap::new(),
            placement: Default::default(),
        }
    }
}

/// Running totals over every job and event ever seen, kept as counters so that
/// statistics never need the whole history in memory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub succeeded: usize,
    pub failed: usize,
    pub cancelled: usize,
    /// Wait and restarts of jobs already dropped from memory.
    pub dropped_jobs: usize,
    pub dropped_wait_s: u64,
    pub dropped_max_wait_s: u64,
    pub dropped_restarts: u64,
    pub preemptions: usize,
    pub oom_kills: usize,
}

/// Pool id used for nodes outside every pool.
pub const NO_POOL: PoolId = PoolId::MAX;

/// The whole cluster as the core knows it.
/// What the scheduling cycles tried: each Pending job (or scale-up) looked at in a
/// cycle is one attempt, placed (`scheduled`) or not (`unschedulable`), as
/// kube-scheduler counts `scheduler_schedule_attempts_total`. maar tries every waiting
/// job each cycle (a refusal is remembered per shape within the cycle), so the
/// unschedulable count grows with the queue times the cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attempts {
    pub cycles: u64,
    pub scheduled: u64,
    pub unschedulable: u64,
}

#[derive(Clone, Debug)]
pub struct Cluster {
    pub nodes: crate::nodes::Nodes,
    pub pools: Vec<Pool>,
    pub projects: Vec<Project>,
    pub jobs: Jobs,
    pub quota_requests: Vec<QuotaRequest>,
    /// The newest events (at most `config.event_window`), oldest first; shared with
    /// the cluster's copies, the window itself and each event (a prospect's copy took
    /// 5,000 pointers, and dropped them, when it shared only the events).
    pub events: std::sync::Arc<VecDeque<std::sync::Arc<Event>>>,
    pub config: SchedConfig,
    /// Counters over the whole history.
    pub totals_ever: Totals,
    /// Scheduling attempts since this process started (not checkpointed: a
    /// Prometheus counter starts again with its process).
    pub attempts: Attempts,
    /// Price per GPU-hour by GPU model (lower-case); unknown models cost 0.
    pub prices: BTreeMap<String, f64>,
    /// Current time, seconds since the start.
    pub now: u64,
    /// Quota usage per project per pool.
    pub(crate) usage: Vec<BTreeMap<PoolId, Resources>>,
    /// GPU-milli-seconds used, by (project, GPU model).
    pub(crate) gpu_ms: BTreeMap<(ProjectId, String), u128>,
    pub(crate) models: Vec<String>,
    /// Sequence number of the next event.
    pub(crate) next_event: u64,
    /// Events emitted since the last [`Cluster::take_outbox`].
    pub(crate) outbox: Vec<Event>,
    /// Jobs whose placements changed since the last [`Cluster::take_touched`], with
    /// their placements before the first change (for decisions).
    pub(crate) touched: Vec<(JobId, Vec<Placement>)>,
    /// The jobs in `touched`, to find them without a scan (a cycle may touch tens of
    /// thousands).
    pub(crate) touched_ids: std::collections::HashSet<JobId, crate::fxhash::FxBuild>,
    /// Ended jobs still held, oldest first.
    pub(crate) ended: VecDeque<JobId>,
    /// Running jobs whose placement the driver has not confirmed yet.
    pub(crate) assumed: imbl::OrdSet<JobId>,
    /// Bumped whenever quota usage changes (cached quota verdicts check it).
    pub(crate) usage_gen: u64,
    /// Pending jobs by the key of their quota verdict (project, pool, request), so that
    /// a cycle decides quota once per key, not once per job; with a copy of their queue
    /// keys, so a cycle orders them without looking each up again.
    pub(crate) pending_by_key:
        crate::fxhash::FxHashMap<crate::verdict::VerdictKey, BTreeMap<JobId, QueueKey>>,
    /// Pending jobs without a verdict key (unknown project or pool).
    pub(crate) pending_loose: BTreeSet<JobId>,
    /// Pending jobs with a node selector or a required node affinity (the few whose
    /// nodes loose jobs keep off: a cycle looks at these, not at the whole queue).
    pub(crate) pending_constrained: BTreeSet<JobId>,
    /// Pending jobs held for the federation ([`Cluster::federation_hold`]): in
    /// `pending`, in no queue; no cycle tries them.
    pub(crate) pending_held: BTreeSet<JobId>,
    /// This cluster's name where one maar runs it among several and its federation
    /// sends the jobs whose file asks for a cluster (`crater.ai/cluster`); `None`
    /// alone. Said by whoever runs the federation, each run; kept in checkpoints so a
    /// reader of the state file sees the holds as the engine did.
    pub(crate) federation: Option<String>,
    /// The refusal every pending job of a key was last told (dropped when the key
    /// gains a job), so an unchanged refusal is not told again job by job.
    pub(crate) told: crate::fxhash::FxHashMap<crate::verdict::VerdictKey, Reason>,
    /// Counts of the task shapes of pending and running jobs (maar's typical shapes
    /// follow from them), kept as jobs come and go.
    pub(crate) shape_counts: BTreeMap<crate::placement::Shape, u64>,
    /// Quota verdicts by (project, pool, request), kept while nothing they read has
    /// changed: a long queue of jobs of a few shapes costs a few verdicts.
    pub(crate) verdicts:
        crate::fxhash::FxHashMap<crate::verdict::VerdictKey, crate::verdict::CachedVerdict>,
    /// Bumped when quotas, pools or capacity change.
    pub(crate) admission_gen: u64,
    /// Bumped when a project's usage changes, per project.
    pub(crate) project_gen: Vec<u64>,
    /// (pool, model id, free whole GPUs, node): candidate generation for placement.
    pub(crate) index: BTreeSet<(PoolId, u16, u32, NodeId)>,
    pub(crate) index_key: Vec<(PoolId, u16, u32, NodeId)>,
    /// Idle whole GPUs per (pool, model id): the sum of the free counts in `index`,
    /// kept as it changes (model pressure read it by walking every node of a model at
    /// each placement).
    pub(crate) idle_by_model: crate::fxhash::FxHashMap<(PoolId, u16), u64>,
    /// By node: when its first running job is expected to end (`u64::MAX`: none with
    /// an estimate), once a backfill reservation asked; forgotten whenever the node's
    /// jobs or one of their ends change. A cache: a reservation otherwise reads every
    /// job on every node.
    pub(crate) first_end: Vec<std::cell::Cell<Option<u64>>>,
    /// By node: the lowest base priority among its jobs (`i32::MIN` where one is
    /// there on loan, `i32::MAX` where none is), once preemption asked; forgotten by
    /// `reindex` and when a job on it changes priority. A cache: preemption's search
    /// read every job on every node of a model the job names, to find none lower.
    pub(crate) lowest_prio: Vec<std::cell::Cell<Option<i32>>>,
    /// By node: whether its GPU labels agree with its cards (see
    /// `alerts::label_mismatch`), once explain asked; forgotten by `reindex`, which
    /// every change of a node's labels or cards goes through.
    pub(crate) labels_agree: Vec<std::cell::Cell<Option<bool>>>,
    /// The running jobs' ends in order, as a predictor says, once a forward run asked
    /// (`Cluster::running_ends`): kept while the jobs and their history are the same.
    #[allow(clippy::type_complexity)]
    pub(crate) ends: std::cell::RefCell<
        Option<(
            (u64, u64, crate::runtimes::Predictor),
            std::sync::Arc<Vec<crate::runtimes::End>>,
        )>,
    >,
    /// Jobs' asks, interned (a cycle tells shapes apart by number).
    pub(crate) asks: crate::shape::AsksTable,
    /// By model id: the most memory of a card on any node indexed under the model
    /// (never lowered): a request for more per card need not look at the model's nodes.
    pub(crate) model_max_mem: Vec<u64>,
    /// Names shared with the cluster's copies (a prospect's, a forecast's copy takes
    /// them without copying each string).
    pub(crate) node_by_name: std::sync::Arc<HashMap<std::sync::Arc<str>, NodeId>>,
    /// By `project/name`.
    pub(crate) job_by_name: imbl::HashMap<std::sync::Arc<str>, JobId>,
    /// Jobs in Pending phase (ordered by id for determinism), with the fields the
    /// queue order reads, kept compact so ordering a long queue stays cheap.
    pub(crate) pending: BTreeMap<JobId, QueueKey>,
    /// Jobs in Restarting phase.
    pub(crate) restarting: BTreeSet<JobId>,
    /// Inference services (they scale), by id.
    pub(crate) services: BTreeSet<JobId>,
    /// Jobs with a required pod anti-affinity (a pod placed later must keep off
    /// their domain), by id.
    pub(crate) anti: BTreeSet<JobId>,
    /// Held jobs by their pods' labels (what the pod-level rules' selectors look up).
    pub(crate) by_label: crate::rules::LabelIndex,
    /// Nodes' topology domains, as the spread constraints ask for them (a cache).
    pub(crate) topology: std::cell::RefCell<crate::topology::Topology>,
    /// The pods spread constraints count, per domain (a cache, kept up to date from
    /// the placements made and released).
    pub(crate) spread: std::cell::RefCell<crate::spread::SpreadCounts>,
    /// Durations of jobs that ended well, by kind: predicts running jobs' ends.
    pub runtimes: crate::runtimes::Runtimes,
    /// When a job last started (derived: not kept in checkpoints; a restored cluster
    /// takes its jobs' latest start).
    pub(crate) last_start: Option<u64>,
    /// A copy run ahead by a forecast: its cycles place jobs but do not word the
    /// reasons of those they cannot, emit no events, keep no bill and note no touched
    /// placements (nobody reads them; wording them was most of a forward run's cost).
    pub(crate) quiet: bool,
    /// On a quiet copy, the one job whose reason is still worded (a prospect's job:
    /// its first line is the prospect's reason; the others' are nobody's).
    pub(crate) word_only: Option<JobId>,
    /// On a prospect's copy: its cycle runs on past the asked job's turn where
    /// nothing was placed or evicted before it (see `Cluster::schedule`).
    pub(crate) run_on: bool,
    /// Set by each cycle: whether a cycle at the same instant could still do what
    /// this one did not (false where this one stands for it: see `Cluster::schedule`).
    pub(crate) again: bool,
    /// Running jobs in preemption preference: lowest priority, then most recent start.
    pub(crate) running_by_prio: imbl::OrdSet<(i32, std::cmp::Reverse<u64>, JobId)>,
    /// How many running jobs have each base priority (a job outranks none unless
    /// some running job has a lower one: preemption's quick no).
    pub(crate) running_base: BTreeMap<i32, u32>,
    pub(crate) next_request: u32,
    /// Capacity per pool after overcommit (kept as nodes are added).
    pub(crate) pool_cap: Vec<Resources>,
    /// Per-node GPU summary, kept by `reindex` (fast per-node verdicts).
    pub(crate) summaries: Vec<NodeSummary>,
    /// Nodes of each pool, in id order.
    pub(crate) pool_members: Vec<Vec<NodeId>>,
    /// Schedulable GPUs, CPU and memory of all nodes (fair-share denominators).
    pub(crate) totals: Resources,
    /// Typical task shapes of the workload, for maar's placement (each cycle): all of
    /// them (FGD's measure), the GPU ones (capacity fragmentation), and per GPU model
    /// the typical demand only that model can serve (pressure).
    pub(crate) typical: Vec<(crate::placement::Shape, f64)>,
    pub(crate) typical_gpu: Vec<(crate::placement::Shape, f64)>,
    pub(crate) bound_demand: Vec<f64>,
    /// Operators' acknowledgements of alerts, and the acknowledged ones that resolved.
    pub alert_book: crate::alertbook::AlertBook,
    /// The jobs' specs as the last checkpoint wrote them (`written`).
    pub(crate) spec_texts: crate::written::Texts,
}

/// A pending job's queue-order fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueKey {
    pub priority: i32,
    pub queued_since: u64,
    pub submitted: u64,
    pub project: Option<ProjectId>,
    pub replicas: u32,
    /// What a cycle reads of a queued job at its turn before it looks at the job
    /// itself (a job whose shape already found no room this cycle is passed over on
    /// these alone: a long queue's turns were mostly cache misses on its jobs): its
    /// pool, its own runtime estimate and its asks number (valid while the asks table
    /// says so, else the job is read).
    pub pool: Option<PoolId>,
    pub est: Option<u64>,
    pub asks: AsksCache,
}

/// What the filter needs to know about a node's cards without reading each one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeSummary {
    /// Schedulable cards that are whole, healthy and uncordoned.
    pub free_whole: u32,
    /// Unallocated cards that are unhealthy or cordoned.
    pub free_bad: u32,
    /// Usable cards partly held by shared slices.
    pub partial: u32,
    /// Smallest and largest card memory among schedulable cards.
    pub min_mem: u64,
    pub max_mem: u64,
    /// Cards of a device resource (MIG instances, time-sliced replicas), schedulable
    /// or not: explain's per-node verdicts ask it of 5,000 nodes' cards otherwise.
    pub resource_cards: u32,
}

/// A per-node cache's value: the cell's where it holds, else `read`, kept in the cell.
/// Debug builds always read, and a kept value that differs is a stale cache.
pub(crate) fn node_cached<T: Copy + PartialEq + std::fmt::Debug>(
    cell: Option<&std::cell::Cell<Option<T>>>,
    n: NodeId,
    what: &str,
    read: impl FnOnce() -> T,
) -> T {
    let cached = cell.and_then(|c| c.get());
    if let (Some(v), false) = (cached, cfg!(debug_assertions)) {
        return v;
    }
    let v = read();
    debug_assert!(
        cached.is_none_or(|c| c == v),
        "node {n}'s cached {what} went stale: {cached:?}, now {v:?}"
    );
    if let Some(c) = cell {
        c.set(Some(v));
    }
    v
}

/// `its GPUs are 0-7`, or `it has no GPUs`.
fn gpu_range(count: usize) -> String {
    match count {
        0 => "it has no GPUs".into(),
        1 => "its only GPU is 0".into(),
        n => format!("its GPUs are 0-{}", n - 1),
    }
}

/// Why a cluster change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("no node named `{0}`")]
    UnknownNode(String),
    #[error("node `{node}` has no GPU {index} ({})", gpu_range(*count))]
    UnknownGpu {
        node: String,
        index: u32,
        count: usize,
    },
    #[error("no job named `{0}`")]
    UnknownJob(String),
    #[error("job name `{0}` matches several projects' jobs; write it as project/name")]
    AmbiguousJob(String),
    #[error("a job `{project}/{name}` already exists")]
    DuplicateJob { project: String, name: String },
    #[error("no quota request #{0}")]
    UnknownRequest(u32),
    #[error("quota request #{0} was already decided")]
    RequestDecided(u32),
    #[error("no pool named `{0}`")]
    UnknownPool(String),
    #[error("no project named `{0}`")]
    UnknownProject(String),
    #[error("{0}")]
    Invalid(String),
}

impl Cluster {
    pub fn new(config: SchedConfig) -> Cluster {
        Cluster {
            nodes: crate::nodes::Nodes::new(),
            pools: Vec::new(),
            projects: Vec::new(),
            jobs: Jobs::default(),
            quota_requests: Vec::new(),
            events: Default::default(),
            config,
            totals_ever: Totals::default(),
            prices: BTreeMap::new(),
            now: 0,
            usage: Vec::new(),
            gpu_ms: BTreeMap::new(),
            models: vec![String::new()],
            next_event: 0,
            outbox: Vec::new(),
            touched: Vec::new(),
            touched_ids: Default::default(),
            ended: VecDeque::new(),
            assumed: imbl::OrdSet::new(),
            usage_gen: 0,
            verdicts: Default::default(),
            pending_by_key: Default::default(),
            pending_loose: BTreeSet::new(),
            pending_constrained: BTreeSet::new(),
            pending_held: BTreeSet::new(),
            federation: None,
            told: Default::default(),
            shape_counts: BTreeMap::new(),
            admission_gen: 0,
            project_gen: Vec::new(),
            index: BTreeSet::new(),
            index_key: Vec::new(),
            idle_by_model: Default::default(),
            first_end: Vec::new(),
            lowest_prio: Vec::new(),
            labels_agree: Vec::new(),
            ends: Default::default(),
            asks: Default::default(),
            model_max_mem: Vec::new(),
            node_by_name: Default::default(),
            job_by_name: imbl::HashMap::new(),
            pending: BTreeMap::new(),
            restarting: BTreeSet::new(),
            services: BTreeSet::new(),
            anti: BTreeSet::new(),
            by_label: Default::default(),
            topology: Default::default(),
            spread: Default::default(),
            attempts: Attempts::default(),
            runtimes: Default::default(),
            last_start: None,
            quiet: false,
            word_only: None,
            run_on: false,
            again: true,
            running_by_prio: imbl::OrdSet::new(),
            running_base: BTreeMap::new(),
            next_request: 1,
            pool_cap: Vec::new(),
            summaries: Vec::new(),
            pool_members: Vec::new(),
            totals: Resources::default(),
            typical: Vec::new(),
            typical_gpu: Vec::new(),
            bound_demand: Vec::new(),
            alert_book: Default::default(),
            spec_texts: Default::default(),
        }
    }

    // ----- construction -------------------------------------------------------------

    pub fn add_pool(&mut self, pool: Pool) -> PoolId {
        self.admission_gen += 1;
        self.pools.push(pool);
        self.pool_cap.push(Resources::default());
        self.pool_members.push(Vec::new());
        (self.pools.len() - 1) as PoolId
    }

    pub fn add_project(&mut self, p: Project) -> ProjectId {
        self.admission_gen += 1;
        self.projects.push(p);
        self.usage.push(BTreeMap::new());
        self.project_gen.push(0);
        (self.projects.len() - 1) as ProjectId
    }

    /// Adds a node; its pool is the first pool whose selector its labels match.
    pub fn add_node(&mut self, mut node: Node) -> NodeId {
        let id = self.nodes.len() as NodeId;
        node.pool = self.pool_for_labels(node.labels());
        std::sync::Arc::make_mut(&mut self.node_by_name).insert(node.name.as_str().into(), id);
        self.nodes.push(node);
        self.account_node(id, true);
        self.index_key.push((NO_POOL, 0, 0, id));
        self.first_end.push(Default::default());
        self.lowest_prio.push(Default::default());
        self.labels_agree.push(Default::default());
        self.summaries.push(NodeSummary::default());
        self.reindex(id);
        id
    }

    /// Adds a node's capacity to (or takes it from) the cluster's totals and its pool's
    /// capacity and membership.
    pub(crate) fn account_node(&mut self, id: NodeId, add: bool) {
        self.admission_gen += 1;
        let node = &self.nodes[id as usize];
        let mut r = Resources {
            gpu_milli: node.sched_gpus().len() as u64 * GPU_MILLI as u64,
            gpu_mem: 0,
            cpu_milli: node.cpu_milli,
            memory: node.memory,
            disk: 0,
        };
        let mut cap = Resources::default();
        if let Some(p) = node.pool {
            let oc = self.pools[p as usize].overcommit;
            let g = node.sched_gpus();
            cap.gpu_milli = g.len() as u64 * GPU_MILLI as u64;
            cap.gpu_mem = g.iter().map(|g| g.memory).sum::<u64>();
            cap.cpu_milli = (node.cpu_milli as f64 * oc.cpu) as u64;
            cap.memory = (node.memory as f64 * oc.memory) as u64;
            cap.disk = node.disk;
        }
        let pool = node.pool;
        if add {
            self.totals.add(&r);
            if let Some(p) = pool {
                let members = &mut self.pool_members[p as usize];
                let at = members.partition_point(|&m| m < id);
                members.insert(at, id);
                self.pool_cap[p as usize].add(&cap);
            }
        } else {
            r.gpu_mem = 0;
            self.totals.sub(&r);
            if let Some(p) = pool {
                self.pool_members[p as usize].retain(|&m| m != id);
                self.pool_cap[p as usize].sub(&cap);
            }
        }
    }

    /// The pool a node with these labels is in: the first whose selector they match,
    /// preferring a pool defined for itself over a node-role pool (one named as the
    /// role, selecting `crater.ai/node-role` alone: what a Kubernetes cluster's roles
    /// make before a Pool object names them).
    pub fn pool_for_labels(&self, labels: &BTreeMap<String, String>) -> Option<PoolId> {
        let matching = |p: &&Pool| p.selector.iter().all(|(k, v)| labels.get(k) == Some(v));
        let role_pool =
            |p: &Pool| p.selector.len() == 1 && p.selector.get(LABEL_ROLE) == Some(&p.name);
        self.pools
            .iter()
            .position(|p| matching(&p) && !role_pool(p))
            .or_else(|| self.pools.iter().position(|p| matching(&p)))
            .map(|i| i as PoolId)
    }

    pub(crate) fn model_id(&mut self, model: &str) -> u16 {
        if let Some(i) = self.models.iter().position(|m| m == model) {
            return i as u16;
        }
        self.models.push(model.to_string());
        (self.models.len() - 1) as u16
    }

    /// Whether some node indexed under model `mid` may have a card with `want` bytes
    /// (no request for memory: always).
    pub(crate) fn model_may_hold(&self, mid: u16, want: Option<u64>) -> bool {
        want.is_none_or(|w| {
            self.model_max_mem
                .get(mid as usize)
                .is_some_and(|&m| m >= w)
        })
    }

    pub(crate) fn model_id_of(&self, model: &str) -> Option<u16> {
        self.models
            .iter()
            .position(|m| m == model)
            .map(|i| i as u16)
    }

    /// When node `n`'s first running job is expected to end (`u64::MAX`: none with
    /// an estimate), from the cache where it holds.
    pub(crate) fn first_end(&self, n: NodeId) -> u64 {
        node_cached(self.first_end.get(n as usize), n, "first end", || {
            self.nodes[n as usize]
                .jobs
                .iter()
                .map(|&v| {
                    let j = &self.jobs[v as usize];
                    match (j.started, j.remaining_s) {
                        (Some(s), Some(r)) => s + r,
                        _ => u64::MAX,
                    }
                })
                .min()
                .unwrap_or(u64::MAX)
        })
    }

    /// The lowest base priority among node `n`'s jobs (`i32::MIN` where one is there
    /// on loan, `i32::MAX` where none is), from the cache where it holds: preemption
    /// passes over a node where nobody is lower than the job it seeks room for.
    pub(crate) fn lowest_prio(&self, n: NodeId) -> i32 {
        node_cached(
            self.lowest_prio.get(n as usize),
            n,
            "lowest priority",
            || {
                self.nodes[n as usize]
                    .jobs
                    .iter()
                    .map(|&v| {
                        let j = &self.jobs[v as usize];
                        if j.placements.iter().any(|p| p.node == n && p.on_loan) {
                            i32::MIN
                        } else {
                            j.spec.priority
                        }
                    })
                    .min()
                    .unwrap_or(i32::MAX)
            },
        )
    }

    /// Every node's first end and lowest priority read into the caches, before a copy
    /// is made for a forward run: the copy's reservations and victim searches read
    /// them, and what a copy reads into its own cache is dropped with it (a prospect
    /// read 40,000 jobs again each time).
    pub(crate) fn warm_node_caches(&self) {
        for n in 0..self.nodes.len() {
            self.first_end(n as NodeId);
            self.lowest_prio(n as NodeId);
        }
    }

    /// A running job's priority changed: its nodes' lowest priorities are read again.
    pub(crate) fn forget_lowest_prio(&self, id: JobId) {
        for p in &self.jobs[id as usize].placements {
            if let Some(c) = self.lowest_prio.get(p.node as usize) {
                c.set(None);
            }
        }
    }

    /// A job's expected end changed (it started, or its estimate was set): its nodes'
    /// first ends are read again.
    pub(crate) fn forget_first_ends(&self, id: JobId) {
        for p in &self.jobs[id as usize].placements {
            if let Some(c) = self.first_end.get(p.node as usize) {
                c.set(None);
            }
        }
    }

    /// Recomputes a node's key in the free-GPU index after any change to it.
    pub(crate) fn reindex(&mut self, id: NodeId) {
        if let Some(e) = self.first_end.get(id as usize) {
            e.set(None);
        }
        if let Some(e) = self.labels_agree.get(id as usize) {
            e.set(None);
        }
        if let Some(e) = self.lowest_prio.get(id as usize) {
            e.set(None);
        }
        let node = &self.nodes[id as usize];
        let g = node.sched_gpus();
        self.summaries[id as usize] = NodeSummary {
            free_whole: g.iter().filter(|g| g.is_free()).count() as u32,
            free_bad: g
                .iter()
                .filter(|g| g.allocs.is_empty() && !g.usable())
                .count() as u32,
            partial: g
                .iter()
                .filter(|g| {
                    g.usable()
                        && !g.allocs.is_empty()
                        && g.allocs.iter().map(|a| a.milli).sum::<u32>() < GPU_MILLI
                })
                .count() as u32,
            min_mem: g.iter().map(|g| g.memory).min().unwrap_or(0),
            max_mem: g.iter().map(|g| g.memory).max().unwrap_or(0),
            resource_cards: node.gpus.iter().filter(|g| g.resource.is_some()).count() as u32,
        };
        let free = if node.ready() && !node.cordoned {
            node.free_whole_gpus()
        } else {
            0
        };
        let pool = node.pool.unwrap_or(NO_POOL);
        let mid = if node.sched_gpus().is_empty() {
            0
        } else {
            let model = node.gpu_model().unwrap_or("");
            match self.model_id_of(model) {
                Some(m) => m,
                None => {
                    let model = model.to_string();
                    self.model_id(&model)
                }
            }
        };
        let key = (pool, mid, free, id);
        let max_mem = self.summaries[id as usize].max_mem;
        if self.model_max_mem.len() <= mid as usize {
            self.model_max_mem.resize(mid as usize + 1, 0);
        }
        let m = &mut self.model_max_mem[mid as usize];
        *m = (*m).max(max_mem);
        let old = self.index_key[id as usize];
        if old == key && self.index.contains(&key) {
            return;
        }
        if self.index.remove(&old) {
            *self.idle_by_model.entry((old.0, old.1)).or_default() -= old.2 as u64;
        }
        if self.index.insert(key) {
            *self.idle_by_model.entry((key.0, key.1)).or_default() += key.2 as u64;
        }
        self.index_key[id as usize] = key;
        // (Checked where the walk is short: a large replay would walk a model's nodes
        // at every placement, as pressure did.)
        debug_assert!(
            self.index.len() > 2048 || {
                let walked: u64 = self
                    .index
                    .range((pool, mid, 0, 0)..=(pool, mid, u32::MAX, NodeId::MAX))
                    .map(|k| k.2 as u64)
                    .sum();
                self.idle_by_model.get(&(pool, mid)).copied().unwrap_or(0) == walked
            }
        );
    }

    // ----- lookups ------------------------------------------------------------------

    pub fn node_id(&self, name: &str) -> Result<NodeId, ClusterError> {
        self.node_by_name
            .get(name)
            .copied()
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))
    }

    pub fn pool_id(&self, name: &str) -> Option<PoolId> {
        self.pools
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as PoolId)
    }

    pub fn project_id(&self, name: &str) -> Option<ProjectId> {
        self.projects
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as ProjectId)
    }

    /// Why a job of `project` in `pool` could never be admitted here, naming what
    /// exists; `None` when both are known.
    pub fn unknown_project_or_pool(&self, project: &str, pool: &str) -> Option<String> {
        if self.project_id(project).is_none() {
            let known: Vec<&str> = self.projects.iter().map(|p| p.name.as_str()).collect();
            return Some(format!(
                "namespace `{project}` is not a maar project (projects: {})",
                known.join(", ")
            ));
        }
        if self.pool_id(pool).is_none() {
            let known: Vec<&str> = self.pools.iter().map(|p| p.name.as_str()).collect();
            if pool.is_empty() {
                // A pod as users write it, before any pool could take it.
                return Some(format!(
                    "no pool takes it yet (pools: {}); a node labelled {LABEL_ROLE}=NAME makes pool NAME, and it starts there at the next cycle",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ));
            }
            return Some(format!(
                "pool `{pool}` does not exist (pools: {})",
                known.join(", ")
            ));
        }
        None
    }

    /// Finds a job by `name` or `project/name`.
    pub fn job_id(&self, name: &str) -> Result<JobId, ClusterError> {
        if name.contains('/') {
            return self
                .job_by_name
                .get(name)
                .copied()
                .ok_or_else(|| ClusterError::UnknownJob(name.to_string()));
        }
        // (A job whose name a newer one took is found by its id only.)
        let mut found = self.jobs.iter().filter(|j| {
            j.spec.name == name && self.job_by_name.get(j.spec.full_name().as_str()) == Some(&j.id)
        });
        match (found.next(), found.next()) {
            (Some(j), None) => Ok(j.id),
            (Some(_), Some(_)) => Err(ClusterError::AmbiguousJob(name.to_string())),
            _ => Err(ClusterError::UnknownJob(name.to_string())),
        }
    }

    pub fn job_ref(&self, id: JobId) -> String {
        let j = &self.jobs[id as usize];
        format!("job/{}/{}", j.spec.project, j.spec.name)
    }

    pub fn pool_name(&self, id: Option<PoolId>) -> &str {
        id.and_then(|i| self.pools.get(i as usize))
            .map(|p| p.name.as_str())
            .unwrap_or("-")
    }

    /// Quota usage of a project in a pool.
    pub fn usage(&self, project: ProjectId, pool: PoolId) -> Resources {
        self.usage[project as usize]
            .get(&pool)
            .copied()
            .unwrap_or_default()
    }

    /// Jobs waiting out a restart back-off.
    pub fn restarting_jobs(&self) -> impl Iterator<Item = &Job> {
        self.restarting.iter().map(|&i| &self.jobs[i as usize])
    }

    pub fn pending_jobs(&self) -> impl Iterator<Item = &Job> {
        self.pending.keys().map(|&i| &self.jobs[i as usize])
    }

    /// Node ids of a pool, in id order.
    pub fn pool_nodes(&self, pool: PoolId) -> impl Iterator<Item = NodeId> + '_ {
        self.pool_members
            .get(pool as usize)
            .into_iter()
            .flatten()
            .copied()
    }

    /// Whether a node of the pool, or of a pool that lends to it, lets the job on by
    /// its lasting rules ([`crate::fit::node_rules_let_on`]), however busy, cordoned or
    /// ready it is now.
    pub fn pool_lets_on(&self, pool: PoolId, spec: &JobSpec) -> bool {
        self.any_node_it_draws_on(pool, |node| crate::fit::node_rules_let_on(node, spec))
    }

    /// Whether some node of the pool, or of a pool that lends to it, is `such`.
    fn any_node_it_draws_on(&self, pool: PoolId, such: impl Fn(&Node) -> bool) -> bool {
        self.candidate_pools(Some(pool))
            .iter()
            .any(|&(p, _)| self.pool_nodes(p).any(|n| such(&self.nodes[n as usize])))
    }

    /// Of the jobs `ids`, those waiting and stranded: no node of their pool (or of a
    /// pool that lends to it) lets them on by its lasting rules (see
    /// [`Cluster::pool_lets_on`]). `only`: just the jobs whose pool draws on that pool
    /// (a change to one pool's nodes strands no other's jobs). Jobs alike (one asks
    /// number) in one pool are judged once.
    pub fn stranded(&self, ids: &[JobId], only: Option<PoolId>) -> Vec<JobId> {
        let mut judged: HashMap<(PoolId, u32, u32), bool> = HashMap::new();
        let mut out = Vec::new();
        for &id in ids {
            let Some(j) = self.jobs.get(id).filter(|j| j.phase == Phase::Pending) else {
                continue;
            };
            let Some(p) = j.pool else { continue };
            if only.is_some_and(|o| !self.candidate_pools(Some(p)).iter().any(|c| c.0 == o)) {
                continue;
            }
            let lets_on = match self.asks.cached(j) {
                Some(a) => *judged
                    .entry((p, a.epoch, a.id))
                    .or_insert_with(|| self.pool_lets_on(p, &j.spec)),
                None => self.pool_lets_on(p, &j.spec),
            };
            if !lets_on {
                out.push(id);
            }
        }
        out
    }

    /// Whether the pool could ever run the job: a node of it (or of a pool that lends
    /// to it) that its lasting rules let it on, with cards of the model and memory it
    /// asks for.
    pub fn pool_could_take(&self, pool: PoolId, spec: &JobSpec) -> bool {
        self.any_node_it_draws_on(pool, |node| {
            crate::fit::node_rules_let_on(node, spec) && crate::fit::has_cards_for(node, spec)
        })
    }

    /// Capacity of a pool's nodes (after overcommit), for quota admission.
    pub fn pool_capacity(&self, pool: PoolId) -> Resources {
        self.pool_cap[pool as usize]
    }

    pub fn overcommit_of(&self, node: &Node) -> Overcommit {
        node.pool
            .and_then(|p| self.pools.get(p as usize))
            .map(|p| p.overcommit)
            .unwrap_or_default()
    }

    // ----- events -------------------------------------------------------------------

    pub fn emit(
        &mut self,
        severity: Severity,
        reason: impl Into<std::borrow::Cow<'static, str>>,
        object: String,
        message: String,
    ) {
        let reason = reason.into();
        let seq = self.next_event;
        self.next_event += 1;
        // A forecast's copy: nobody reads its events.
        if self.quiet {
            return;
        }
        match reason.as_ref() {
            "Preempted" | "Reclaimed" => self.totals_ever.preemptions += 1,
            "OOMKilled" => self.totals_ever.oom_kills += 1,
            _ => {}
        }
        let e = Event {
            seq,
            time: self.now,
            severity,
            reason,
            object,
            message,
            cluster: String::new(),
        };
        self.outbox.push(e.clone());
        // (Copied only where a copy shares the window: a quiet one emits nothing.)
        let window = self.config.event_window.max(1);
        let events = std::sync::Arc::make_mut(&mut self.events);
        events.push_back(std::sync::Arc::new(e));
        while events.len() > window {
            events.pop_front();
        }
    }

    /// Events emitted since the last call, in order (the driver and the durable record
    /// take them from here; the in-memory window keeps only the newest).
    pub fn take_outbox(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.outbox)
    }

    /// Sequence number the next event will get (= events ever emitted).
    pub fn next_event_seq(&self) -> u64 {
        self.next_event
    }

    /// Numbers this cluster's events on from `next` (no lower than it numbers them
    /// already): a cluster read anew from its world for a record that holds events up
    /// to `next - 1` (`kit::Prior::next_event`) adds to that history, not over it.
    pub fn continue_events(&mut self, next: u64) {
        self.next_event = self.next_event.max(next);
    }

    /// Notes that a job's placements are about to change (first change only).
    pub(crate) fn touch(&mut self, id: JobId) {
        if !self.quiet && self.touched_ids.insert(id) {
            let before = self.jobs[id as usize].placements.clone();
            self.touched.push((id, before));
        }
    }

    /// Jobs whose placements changed since the last call, in the order of their first
    /// change, with the placements they had before.
    pub(crate) fn take_touched(&mut self) -> Vec<(JobId, Vec<Placement>)> {
        self.touched_ids.clear();
        std::mem::take(&mut self.touched)
    }

    // ----- time ---------------------------------------------------------------------

    /// Whether the queue is moving: jobs started or were queued at this instant (what
    /// waits may start in the next cycle, before any end).
    pub fn starting_now(&self) -> bool {
        self.last_start == Some(self.now) || self.pending_jobs().any(|j| j.queued_since == self.now)
    }

    /// Moves the clock forward. Time never goes back.
    pub fn set_time(&mut self, now: u64) {
        if now > self.now {
            self.now = now;
        }
    }

    /// Adds the GPU time a running job used since its last accrual to its project's bill.
    pub(crate) fn accrue(&mut self, id: JobId) {
        // A forecast's copy keeps no bill.
        if self.quiet {
            return;
        }
        let now = self.now;
        let j = &self.jobs[id as usize];
        let since = j.accrued_at;
        if let (Some(pid), true) = (j.project, now > since) {
            let dt = (now - since) as u128;
            let mut by_model: Vec<(String, u128)> = Vec::new();
            for p in &j.placements {
                let node = &self.nodes[p.node as usize];
                for s in &p.gpus {
                    let model = node.gpus[s.gpu as usize].model.to_string();
                    by_model.push((model, s.milli as u128 * dt));
                }
            }
            for (m, v) in by_model {
                *self.gpu_ms.entry((pid, m)).or_default() += v;
            }
        }
        self.jobs[id as usize].accrued_at = now;
    }

    /// Brings every running job's cost up to now (before reporting).
    pub fn accrue_all(&mut self) {
        let running: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|j| !j.placements.is_empty())
            .map(|j| j.id)
            .collect();
        for id in running {
            self.accrue(id);
        }
    }

    // ----- jobs ---------------------------------------------------------------------

    /// Adds a job in Pending. Unknown projects or pools are kept, Pending, and explained.
    pub fn submit(&mut self, spec: JobSpec) -> Result<JobId, ClusterError> {
        let key: std::sync::Arc<str> = spec.full_name().into();
        // A name is taken while its job is live; an ended job's name may be used again
        // (Kubernetes: a pod deleted and made again, a StatefulSet's): the name then
        // finds the new job, and the old one stays in the history by its id.
        if self
            .job_by_name
            .get(&key)
            .is_some_and(|&old| self.jobs.get(old).is_some_and(|j| !j.phase.is_terminal()))
        {
            return Err(ClusterError::DuplicateJob {
                project: spec.project,
                name: spec.name,
            });
        }
        let id = self.jobs.next_id();
        let project = self.project_id(&spec.project);
        let pool = self.pool_id(&spec.pool);
        let desired = spec.replicas;
        let msg = format!("submitted: {}", spec.shape());
        self.jobs.insert(Job {
            id,
            project,
            pool,
            phase: Phase::Pending,
            submitted: self.now,
            queued_since: self.now,
            started: None,
            finished: None,
            placements: Vec::new(),
            desired_replicas: desired,
            restarts: 0,
            restart_at: None,
            borrowed: false,
            wait_s: 0,
            run_s: 0,
            remaining_s: spec.est_runtime_s,
            epoch: 0,
            reason: "waiting for the next scheduling cycle".into(),
            used_pct: 0,
            placed_at: 0,
            accrued_at: self.now,
            autoscaler: AutoscalerState::default(),
            evicted: None,
            aged: 0,
            peak_pct: 0,
            kept: false,
            terminating: false,
            found: false,
            spec: spec.into(),
            asks: Default::default(),
        });
        self.job_by_name.insert(key, id);
        self.pending_insert(id);
        self.shape_add(id);
        if self.jobs[id as usize].is_inference() {
            self.services.insert(id);
        }
        if !self.jobs[id as usize]
            .spec
            .rules
            .pod_anti_affinity
            .is_empty()
        {
            self.anti.insert(id);
        }
        self.by_label
            .add(id, &self.jobs[id as usize].spec.rules.labels);
        self.emit(Severity::Normal, "Submitted", self.job_ref(id), msg);
        Ok(id)
    }

    /// Commits one replica placement (already checked to fit).
    pub(crate) fn allocate(&mut self, id: JobId, p: Placement) {
        self.touch(id);
        self.usage_gen += 1;
        let n = &mut self.nodes[p.node as usize];
        n.alloc_cpu += p.cpu;
        n.alloc_pods += 1;
        n.alloc_mem += p.mem;
        n.alloc_disk += p.disk;
        for s in &p.gpus {
            n.gpus[s.gpu as usize].allocs.push(GpuAlloc {
                job: id,
                milli: s.milli,
                mem: s.mem,
            });
        }
        if !n.jobs.contains(&id) {
            n.jobs.push(id);
        }
        let node = p.node;
        let res = placement_resources(&p);
        let j = &mut self.jobs[id as usize];
        if let (Some(pr), Some(pl)) = (j.project, j.pool) {
            self.usage[pr as usize].entry(pl).or_default().add(&res);
            self.project_gen[pr as usize] += 1;
        }
        if j.placements.is_empty() {
            j.accrued_at = self.now;
        }
        j.placed_at = self.now;
        self.assumed.insert(id);
        let mut p = p;
        p.bound = false;
        j.placements.push(p);
        self.spread.get_mut().note(&j.spec, node, true);
        self.reindex(node);
    }

    /// Releases one replica (the last one placed when `idx` is None).
    pub(crate) fn release_replica(&mut self, id: JobId, idx: usize) {
        self.accrue(id);
        self.touch(id);
        self.usage_gen += 1;
        let p = self.jobs[id as usize].placements.remove(idx);
        self.spread
            .get_mut()
            .note(&self.jobs[id as usize].spec, p.node, false);
        let still_here = self.jobs[id as usize]
            .placements
            .iter()
            .any(|q| q.node == p.node);
        let n = &mut self.nodes[p.node as usize];
        n.alloc_cpu -= p.cpu;
        n.alloc_pods = n.alloc_pods.saturating_sub(1);
        n.alloc_mem -= p.mem;
        n.alloc_disk -= p.disk;
        for s in &p.gpus {
            let g = &mut n.gpus[s.gpu as usize];
            if let Some(pos) = g
                .allocs
                .iter()
                .position(|a| a.job == id && a.milli == s.milli && a.mem == s.mem)
            {
                g.allocs.remove(pos);
            }
        }
        if !still_here {
            n.jobs.retain(|&j| j != id);
        }
        let res = placement_resources(&p);
        let j = &self.jobs[id as usize];
        if j.placements.iter().all(|q| q.bound) {
            self.assumed.remove(&id);
        }
        if let (Some(pr), Some(pl)) = (j.project, j.pool) {
            if let Some(u) = self.usage[pr as usize].get_mut(&pl) {
                u.sub(&res);
            }
            self.project_gen[pr as usize] += 1;
        }
        self.reindex(p.node);
    }

    /// Releases every replica of a job.
    pub(crate) fn release_all(&mut self, id: JobId) {
        while !self.jobs[id as usize].placements.is_empty() {
            let last = self.jobs[id as usize].placements.len() - 1;
            self.release_replica(id, last);
        }
        self.jobs[id as usize].borrowed = false;
    }

    /// Moves a job to a new phase, keeping the pending/restarting sets and the
    /// wait/run accounting right. Does not touch placements.
    pub(crate) fn set_phase(&mut self, id: JobId, phase: Phase) {
        let live = |p: Phase| matches!(p, Phase::Pending | Phase::Running);
        let was = self.jobs[id as usize].phase;
        if live(was) && !live(phase) {
            self.shape_remove(id);
        }
        self.set_phase_only(id, phase);
        if !live(was) && live(phase) {
            self.shape_add(id);
        }
    }

    fn set_phase_only(&mut self, id: JobId, phase: Phase) {
        let now = self.now;
        let aging = self.config.aging_s.max(1);
        let j = &mut self.jobs[id as usize];
        if phase == Phase::Running {
            j.found = false;
        }
        // What waiting gave it, kept if it starts now (the rank the queue gave it).
        let mut aged = 0;
        match j.phase {
            Phase::Pending => {
                let waited = now.saturating_sub(j.queued_since);
                j.wait_s += waited;
                aged = (waited / aging).min(i32::MAX as u64) as i32;
                self.pending_remove(id);
            }
            Phase::Running => {
                if let Some(s) = j.started {
                    j.run_s += now.saturating_sub(s);
                }
                self.running_by_prio.remove(&(
                    j.rank(),
                    std::cmp::Reverse(j.started.unwrap_or(0)),
                    id,
                ));
                running_base_remove(&mut self.running_base, j.spec.priority);
            }
            Phase::Restarting => {
                self.restarting.remove(&id);
            }
            ended => {
                // Back from an end (an operator requeue): no longer counted as ended.
                let t = &mut self.totals_ever;
                let c = match ended {
                    Phase::Succeeded => &mut t.succeeded,
                    Phase::Failed => &mut t.failed,
                    _ => &mut t.cancelled,
                };
                *c = c.saturating_sub(1);
                self.ended.retain(|&e| e != id);
            }
        }
        let j = &mut self.jobs[id as usize];
        j.phase = phase;
        match phase {
            Phase::Pending => {
                j.queued_since = now;
                j.aged = 0;
                self.pending_insert(id);
            }
            Phase::Running => {
                j.started = Some(now);
                j.epoch += 1;
                j.evicted = None;
                j.aged = aged;
                j.peak_pct = 0;
                self.running_by_prio
                    .insert((j.rank(), std::cmp::Reverse(now), id));
                *self.running_base.entry(j.spec.priority).or_default() += 1;
                self.last_start = Some(now);
                self.forget_first_ends(id);
            }
            Phase::Restarting => {
                self.restarting.insert(id);
            }
            p if p.is_terminal() => {
                j.finished = Some(now);
                match p {
                    Phase::Succeeded => self.totals_ever.succeeded += 1,
                    Phase::Failed => self.totals_ever.failed += 1,
                    _ => self.totals_ever.cancelled += 1,
                }
                self.ended.push_back(id);
                self.prune_ended();
            }
            _ => {}
        }
    }

    /// Drops the oldest ended jobs beyond the retention from memory.
    fn prune_ended(&mut self) {
        // A forecast's copy is dropped whole.
        if self.quiet {
            return;
        }
        while self.ended.len() > self.config.retain_ended {
            let Some(old) = self.ended.pop_front() else {
                break;
            };
            // A requeued job left the ended list; only drop jobs that are still ended.
            let Some(j) = self.jobs.get(old) else {
                continue;
            };
            if !j.phase.is_terminal() {
                continue;
            }
            let j = self.jobs.remove(old).expect("held");
            let t = &mut self.totals_ever;
            t.dropped_jobs += 1;
            t.dropped_wait_s += j.wait_s;
            t.dropped_max_wait_s = t.dropped_max_wait_s.max(j.wait_s);
            t.dropped_restarts += j.restarts as u64;
            // (Unless the name has found a newer job since.)
            let name = j.spec.full_name();
            if self.job_by_name.get(name.as_str()) == Some(&old) {
                self.job_by_name.remove(name.as_str());
            }
            self.services.remove(&old);
            self.anti.remove(&old);
            self.by_label.remove(old, &j.spec.rules.labels);
        }
    }

    /// The key of a job's quota verdict for `replicas` replicas (None when its project
    /// or pool is unknown: such jobs are decided one by one).
    pub(crate) fn verdict_key(
        &self,
        id: JobId,
        replicas: u32,
    ) -> Option<crate::verdict::VerdictKey> {
        let j = &self.jobs[id as usize];
        let (p, pl) = (j.project?, j.pool?);
        let r = j.spec.replica_request().scaled(replicas as u64);
        Some((
            p,
            pl,
            [r.gpu_milli, r.gpu_mem, r.cpu_milli, r.memory, r.disk],
        ))
    }

    /// Puts a job in the pending set and its indexes.
    pub(crate) fn pending_insert(&mut self, id: JobId) {
        // Numbered now, so its queue key carries its asks number.
        if self.asks.cached(&self.jobs[id as usize]).is_none() {
            let j = &mut self.jobs[id as usize];
            self.asks.intern(j);
        }
        let k = self.queue_key(id);
        if let Some(why) = self.federation_hold(&self.jobs[id as usize]) {
            self.pending_held.insert(id);
            self.pending.insert(id, k);
            self.set_reason(id, &why);
            return;
        }
        match self.verdict_key(id, k.replicas) {
            Some(vk) => {
                self.pending_by_key.entry(vk).or_default().insert(id, k);
                self.told.remove(&vk);
            }
            None => {
                self.pending_loose.insert(id);
            }
        }
        if self.jobs[id as usize].spec.is_constrained() {
            self.pending_constrained.insert(id);
        }
        self.pending.insert(id, k);
    }

    /// Takes a job out of the pending set and its indexes.
    pub(crate) fn pending_remove(&mut self, id: JobId) {
        if self.pending_held.remove(&id) {
            self.pending.remove(&id);
            return;
        }
        if let Some(k) = self.pending.remove(&id) {
            match self.verdict_key(id, k.replicas) {
                Some(vk) => {
                    if let Some(set) = self.pending_by_key.get_mut(&vk) {
                        set.remove(&id);
                        if set.is_empty() {
                            self.pending_by_key.remove(&vk);
                            self.told.remove(&vk);
                        }
                    }
                }
                None => {
                    self.pending_loose.remove(&id);
                }
            }
            self.pending_constrained.remove(&id);
        }
    }

    /// Moves a waiting job to `pool` (its world chose the pool and chooses again:
    /// see [`crate::input::Observation::JobPool`]). A job that does not wait keeps its
    /// pool: its placement is in force.
    pub fn move_waiting(&mut self, name: &str, pool: &str) -> Result<String, ClusterError> {
        let id = self.job_id(name)?;
        let to = self
            .pool_id(pool)
            .ok_or_else(|| ClusterError::UnknownPool(pool.to_string()))?;
        let j = &self.jobs[id as usize];
        if j.pool == Some(to) {
            return Ok(format!("job {name} is in pool {pool}"));
        }
        if j.phase != Phase::Pending {
            return Err(ClusterError::Invalid(format!(
                "job {name} is {:?}, not waiting: it stays in pool {}",
                j.phase, j.spec.pool
            )));
        }
        let from = j.spec.pool.clone();
        if j.pool.is_some_and(|p| self.pool_lets_on(p, &j.spec)) {
            return Err(ClusterError::Invalid(format!(
                "job {name} stays in pool {from}: a node there lets it on"
            )));
        }
        if !self.pool_could_take(to, &j.spec) {
            return Err(ClusterError::Invalid(format!(
                "job {name} stays in pool {from}: no node of pool {pool} could run it"
            )));
        }
        self.pending_remove(id);
        let j = &mut self.jobs[id as usize];
        j.pool = Some(to);
        std::sync::Arc::make_mut(&mut j.spec).pool = pool.to_string();
        self.pending_insert(id);
        let m = format!(
            "waits in pool {pool} now: no node of pool {from} lets it on since the pools changed"
        );
        self.emit(Severity::Normal, "PoolMoved", self.job_ref(id), m.clone());
        Ok(format!("job {name}: {m}"))
    }

    /// A job's task shape for maar's placement, and how many placements it counts for
    /// (a same-node gang is placed as one; other replicas one by one).
    pub(crate) fn shape_of(j: &Job) -> (crate::placement::Shape, u64) {
        Self::shape_of_spec(&j.spec, j.desired_replicas)
    }

    /// The typical-shape entry of `replicas` replicas of `spec` (a job submitted now
    /// counts `spec.replicas`).
    pub(crate) fn shape_of_spec(spec: &JobSpec, replicas: u32) -> (crate::placement::Shape, u64) {
        let (mult, placements) = if spec.affinity == Affinity::SameNode {
            (replicas.max(1), 1)
        } else {
            (1, replicas.max(1) as u64)
        };
        let milli = if spec.gpu.count == 0 {
            0
        } else if spec.gpu.shared {
            spec.gpu.milli.unwrap_or(GPU_MILLI / 2)
        } else {
            GPU_MILLI
        };
        let mut models = spec.gpu.models.clone();
        models.sort();
        (
            crate::placement::Shape {
                cpu: spec.cpu_milli * mult as u64,
                milli,
                count: spec.gpu.count * mult,
                models,
            },
            placements,
        )
    }

    /// Counts a job that became pending or running among the typical shapes.
    pub(crate) fn shape_add(&mut self, id: JobId) {
        let (s, n) = Self::shape_of(&self.jobs[id as usize]);
        *self.shape_counts.entry(s).or_default() += n;
    }

    /// Uncounts a job that is no longer pending or running.
    pub(crate) fn shape_remove(&mut self, id: JobId) {
        let (s, n) = Self::shape_of(&self.jobs[id as usize]);
        if let Some(c) = self.shape_counts.get_mut(&s) {
            *c = c.saturating_sub(n);
            if *c == 0 {
                self.shape_counts.remove(&s);
            }
        }
    }

    pub(crate) fn queue_key(&self, id: JobId) -> QueueKey {
        let j = &self.jobs[id as usize];
        QueueKey {
            priority: j.spec.priority,
            queued_since: j.queued_since,
            submitted: j.submitted,
            project: j.project,
            replicas: j.desired_replicas.max(1),
            pool: j.pool,
            est: j.spec.est_runtime_s,
            asks: j.asks,
        }
    }

    /// Seconds the job has waited in total, up to now.
    pub fn wait_s(&self, j: &Job) -> u64 {
        j.wait_s
            + if j.phase == Phase::Pending {
                self.now.saturating_sub(j.queued_since)
            } else {
                0
            }
    }

    /// Seconds the job has run in total, up to now.
    pub fn run_s(&self, j: &Job) -> u64 {
        j.run_s
            + match (j.phase, j.started) {
                (Phase::Running, Some(s)) => self.now.saturating_sub(s),
                _ => 0,
            }
    }

    /// A job completed its work.
    pub fn complete(&mut self, id: JobId, success: bool, reason: &str) {
        if self.jobs[id as usize].phase.is_terminal() {
            return;
        }
        if let (true, Some(s)) = (success, self.jobs[id as usize].started) {
            let ran = self.now.saturating_sub(s);
            self.record_runtime(id, ran);
        }
        self.release_all(id);
        let phase = if success {
            Phase::Succeeded
        } else {
            Phase::Failed
        };
        self.set_phase(id, phase);
        if self.quiet {
            return;
        }
        self.jobs[id as usize].reason = reason.into();
        let (sev, r) = if success {
            (Severity::Normal, "Completed")
        } else {
            (Severity::Warning, "Failed")
        };
        self.emit(sev, r, self.job_ref(id), reason.to_string());
    }

    /// A running job failed (OOM, GPU fault, node loss). With `OnFailure` and restarts
    /// left it waits out an exponential backoff and is queued again; else it fails.
    pub fn fail_running(&mut self, id: JobId, reason: &'static str, message: String) {
        let j = &self.jobs[id as usize];
        if j.phase != Phase::Running {
            return;
        }
        let policy = j.spec.restart;
        let restarts = j.restarts;
        self.release_all(id);
        self.emit(Severity::Warning, reason, self.job_ref(id), message.clone());
        match policy {
            RestartPolicy::OnFailure {
                max_restarts,
                backoff_s,
            } if restarts < max_restarts => {
                let delay = backoff_s.saturating_mul(1u64 << restarts.min(10)).min(3600);
                self.set_phase(id, Phase::Restarting);
                let j = &mut self.jobs[id as usize];
                j.restarts += 1;
                j.restart_at = Some(self.now + delay);
                j.remaining_s = j.spec.est_runtime_s;
                j.reason = format!("{reason}: restarting in {delay}s").into();
                let msg = format!(
                    "restart {}/{} after {reason}, back-off {delay}s",
                    restarts + 1,
                    max_restarts
                );
                self.emit(Severity::Warning, "BackOff", self.job_ref(id), msg);
            }
            _ => {
                self.set_phase(id, Phase::Failed);
                let why = match policy {
                    RestartPolicy::Never => format!("{reason} (restart policy Never)"),
                    RestartPolicy::OnFailure { max_restarts, .. } => {
                        format!("{reason} (restart limit {max_restarts} reached)")
                    }
                };
                self.jobs[id as usize].reason = why.as_str().into();
                self.emit(Severity::Error, "Failed", self.job_ref(id), why);
            }
        }
    }

    /// A replica's node or GPU failed under a job. An inference service with other
    /// replicas left loses just those replicas (the next cycle places replacements);
    /// anything else fails as a whole and follows its restart policy.
    pub(crate) fn lose(
        &mut self,
        id: JobId,
        node: NodeId,
        gpu: Option<u32>,
        reason: &'static str,
        message: String,
    ) {
        let j = &self.jobs[id as usize];
        let hit: Vec<usize> = j
            .placements
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.node == node && gpu.is_none_or(|g| p.gpus.iter().any(|s| s.gpu == g))
            })
            .map(|(i, _)| i)
            .collect();
        if j.is_inference() && j.phase == Phase::Running && hit.len() < j.placements.len() {
            for &i in hit.iter().rev() {
                self.release_replica(id, i);
            }
            let left = self.jobs[id as usize].running_replicas();
            self.emit(
                Severity::Warning,
                "ReplicaLost",
                self.job_ref(id),
                format!(
                    "{message}; {} replica(s) lost, {left} still serving, replacements queued",
                    hit.len()
                ),
            );
        } else {
            self.fail_running(id, reason, message);
        }
    }

    /// Queues Restarting jobs whose backoff has elapsed. Returns how many.
    pub fn restart_due(&mut self) -> usize {
        let due: Vec<JobId> = self
            .restarting
            .iter()
            .copied()
            .filter(|&i| {
                self.jobs[i as usize]
                    .restart_at
                    .is_some_and(|t| t <= self.now)
            })
            .collect();
        for &id in &due {
            self.set_phase(id, Phase::Pending);
            self.jobs[id as usize].restart_at = None;
            self.emit(
                Severity::Normal,
                "Requeued",
                self.job_ref(id),
                "back-off elapsed, queued for restart".into(),
            );
        }
        due.len()
    }

    /// Evicts a running job back to Pending (preemption, reclaim, drain, requeue).
    pub(crate) fn evict(&mut self, id: JobId, reason: &'static str, message: String) {
        if self.jobs[id as usize].placements.is_empty()
            && self.jobs[id as usize].phase != Phase::Running
        {
            return;
        }
        // Where it was (and whether on loan), for explain after the reason moves on.
        let from: Vec<String> = self.jobs[id as usize]
            .placements
            .iter()
            .map(|p| {
                let n = &self.nodes[p.node as usize];
                if p.on_loan {
                    format!("{} (on loan from pool {})", n.name, self.pool_name(n.pool))
                } else {
                    n.name.clone()
                }
            })
            .collect();
        let now = self.now;
        self.release_all(id);
        self.set_phase(id, Phase::Pending);
        let j = &mut self.jobs[id as usize];
        j.remaining_s = j.spec.est_runtime_s;
        j.reason = message.as_str().into();
        j.evicted = Some((
            now,
            if from.is_empty() {
                message.clone()
            } else {
                format!("{message}; it ran on {}", from.join(", "))
            },
        ));
        self.emit(Severity::Warning, reason, self.job_ref(id), message);
    }

    /// Jobs holding a GPU on `node` (optionally only card `gpu`).
    pub fn jobs_on(&self, node: NodeId, gpu: Option<u32>) -> Vec<JobId> {
        let n = &self.nodes[node as usize];
        match gpu {
            None => n.jobs.clone(),
            Some(g) => {
                let mut v: Vec<JobId> = n.gpus[g as usize].allocs.iter().map(|a| a.job).collect();
                v.dedup();
                v
            }
        }
    }

    // ----- faults (from the simulation, the agent, or a real cluster) ---------------

    /// Marks a GPU healthy or not; jobs on a GPU that turns unhealthy fail.
    pub fn set_gpu_health(&mut self, node: NodeId, gpu: u32, health: Health) {
        let n = &mut self.nodes[node as usize];
        let Some(g) = n.gpus.get_mut(gpu as usize) else {
            return;
        };
        if g.health == health {
            return;
        }
        g.health = health.clone();
        let obj = format!("gpu/{}/{}", n.name, gpu);
        match &health {
            Health::Unhealthy(why) => {
                let why = why.clone();
                self.emit(
                    Severity::Error,
                    "GpuUnhealthy",
                    obj,
                    format!("GPU unhealthy: {why}"),
                );
                for j in self.jobs_on(node, Some(gpu)) {
                    let msg = format!(
                        "GPU {}/{} failed under the job: {why}",
                        self.nodes[node as usize].name, gpu
                    );
                    self.lose(j, node, Some(gpu), "GpuFailed", msg);
                }
            }
            Health::Healthy => self.emit(
                Severity::Normal,
                "GpuHealthy",
                obj,
                "GPU healthy again".into(),
            ),
        }
        self.reindex(node);
    }

    /// Sets a node's condition; jobs on a node that goes NotReady fail.
    pub fn set_node_condition(&mut self, node: NodeId, cond: Condition) {
        self.set_node_condition_keeping(node, cond, false)
    }

    /// As [`Cluster::set_node_condition`]; with `keeps_jobs`, jobs on a node that goes
    /// NotReady keep running (nothing new is placed there meanwhile).
    pub fn set_node_condition_keeping(&mut self, node: NodeId, cond: Condition, keeps_jobs: bool) {
        let n = &mut self.nodes[node as usize];
        if n.condition == cond {
            return;
        }
        n.condition = cond.clone();
        let obj = format!("node/{}", n.name);
        let name = n.name.clone();
        match cond {
            Condition::NotReady(why) => {
                let held = self.jobs_on(node, None);
                self.emit(
                    Severity::Error,
                    "NodeNotReady",
                    obj,
                    if keeps_jobs && !held.is_empty() {
                        format!("NotReady: {why}; nothing new is placed there, and its {} job(s) are left to run (their pods' tolerations decide, not maar)", held.len())
                    } else {
                        format!("NotReady: {why}")
                    },
                );
                if keeps_jobs {
                    self.reindex(node);
                    return;
                }
                for j in held {
                    self.lose(
                        j,
                        node,
                        None,
                        "NodeLost",
                        format!("node {name} went NotReady: {why}"),
                    );
                }
            }
            Condition::Ready => self.emit(Severity::Normal, "NodeReady", obj, "Ready".into()),
        }
        self.reindex(node);
    }

    /// Sets disk used outside jobs on a node (a filling disk).
    pub fn set_disk_external(&mut self, node: NodeId, bytes: u64) {
        let n = &mut self.nodes[node as usize];
        n.disk_external = bytes.min(n.disk);
        let pct = if n.disk > 0 {
            (n.disk_used() as u128 * 100).div_ceil(n.disk as u128) as u64
        } else {
            0
        };
        let (sev, reason) = if pct >= 90 {
            (Severity::Warning, "DiskPressure")
        } else {
            (Severity::Normal, "DiskUsage")
        };
        let obj = format!("node/{}", n.name);
        self.emit(sev, reason, obj, format!("disk {pct}% used"));
    }
}

impl Cluster {
    /// The speed of a GPU model (1.0 when not given).
    pub fn speed_of(&self, model: &str) -> f64 {
        let speeds = &self.config.speeds;
        // Model ids are lower-case already; only a reading's own spelling needs folding.
        speeds
            .get(model)
            .or_else(|| {
                model
                    .bytes()
                    .any(|b| b.is_ascii_uppercase())
                    .then(|| speeds.get(&model.to_lowercase()))
                    .flatten()
            })
            .copied()
            .filter(|s| *s > 0.0)
            .unwrap_or(1.0)
    }

    /// `runtime_s` at reference speed, run at `speed`.
    pub fn scaled_runtime(runtime_s: u64, speed: f64) -> u64 {
        ((runtime_s as f64 / speed).round() as u64).max(1)
    }

    /// The speed a running job gets: its slowest placed card's (1.0 without GPUs).
    pub fn placed_speed(&self, id: JobId) -> f64 {
        let j = &self.jobs[id as usize];
        j.placements
            .iter()
            .flat_map(|p| {
                let n = &self.nodes[p.node as usize];
                p.gpus
                    .iter()
                    .filter_map(move |g| n.gpus.iter().find(|c| c.index == g.gpu))
            })
            .map(|g| self.speed_of(&g.model))
            .fold(None, |a: Option<f64>, s| Some(a.map_or(s, |a| a.min(s))))
            .unwrap_or(1.0)
    }

    /// The longest a job of `spec` may run once started: its estimate at the slowest
    /// speed among the models it accepts (all the cluster's models when it names none,
    /// and `more`: a change that labels a node with a model not seen yet).
    pub(crate) fn runtime_bound_with(&self, spec: &JobSpec, more: &[&str]) -> Option<u64> {
        let est = spec.est_runtime_s?;
        Some(match self.bound_speed_with(spec, more) {
            Some(slowest) => Self::scaled_runtime(est, slowest),
            None => est,
        })
    }

    /// The speed of the slowest card a job's asks accept, which its estimate is
    /// scaled by for [`Cluster::runtime_bound_with`]; `None`: not scaled (no GPUs, or no
    /// speeds configured). The same for every job that asks alike.
    pub(crate) fn bound_speed(&self, spec: &JobSpec) -> Option<f64> {
        self.bound_speed_with(spec, &[])
    }

    fn bound_speed_with(&self, spec: &JobSpec, more: &[&str]) -> Option<f64> {
        if spec.gpu.count == 0 || self.config.speeds.is_empty() {
            return None;
        }
        Some(if spec.gpu.models.is_empty() {
            self.models
                .iter()
                .map(String::as_str)
                .chain(more.iter().copied())
                .map(|m| self.speed_of(m))
                .fold(1.0f64, f64::min)
        } else {
            spec.gpu
                .models
                .iter()
                .map(|m| self.speed_of(m))
                .fold(f64::INFINITY, f64::min)
        })
    }
}

/// One running job of base priority `p` fewer.
pub(crate) fn running_base_remove(counts: &mut BTreeMap<i32, u32>, p: i32) {
    if let Some(n) = counts.get_mut(&p) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&p);
        }
    }
}
