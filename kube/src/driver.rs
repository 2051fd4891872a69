//! [`KubeDriver`]: a Kubernetes cluster as a driver of the engine.
//!
//! What the watch sees becomes observations, in order:
//! - a namespace is a project (`ProjectSeen`, open in every pool until quota is set);
//! - a node role (`crater.ai/node-role`) not seen before is a pool of that name
//!   (`PoolSeen`); a node joins, is relabelled, turns Ready or NotReady, is cordoned
//!   with kubectl (`spec.unschedulable`), has single GPUs cordoned (annotation
//!   `crater.ai/cordoned-gpus`), or is deleted (NotReady, "deleted");
//! - a pod with `schedulerName: maar` is a job: queued while it waits for a node,
//!   added as running where it is already bound (a restart of maar), ended when it
//!   succeeds or fails (OOMKilled told apart), cancelled when it is deleted.
//!
//! The core's decisions become writes ([`crate::world::Write`]): a bind (answered by
//! `Bound` / `BindFailed`: a 409 or a node gone returns the job to the queue), a pod
//! deleted when maar preempts or drains it. A pod that waits gets `PodScheduled=False`
//! and a `FailedScheduling` event with maar's reason and its first proven fix, when
//! the reason changes and at most every [`RETELL_S`] seconds otherwise (kube-scheduler
//! retries with back-off; an event per cycle would flood the API server).
//!
//! TrainJobs and InferenceServices (maar's objects) are jobs too: maar makes their
//! pods on the nodes it chose (all of a gang or none), deletes them when the job
//! stops, and writes the object's status. An InferenceService's replicas follow its
//! autoscaler, which reads the load every [`LOAD_EVERY_S`] seconds from the external
//! metrics API (the metric its HPA read); a replica whose pod is deleted is made again
//! where it ran, as a ReplicaSet would.
//!
//! Operator commands act on the cluster too: a node cordoned in maar is cordoned in
//! Kubernetes (`spec.unschedulable`), a GPU cordon is written to the node's annotation.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use k8s_openapi::api::core::v1::Node as KNode;
use maar_scheduler::model::{Overcommit, Phase, Pool, PoolKind, LABEL_ROLE};
use maar_scheduler::{
    Actor, Command, Core, Decision, Driver, Event, Input, JobOutcome, Observation, Output, Severity,
};

use crate::map::PoolObject;
use crate::map::{self, Owner, PodState};
use crate::world::{object_ref, NewPod, ObjectSeen, PodSeen, Seen, Watched, World, Write};
use k8s_openapi::api::core::v1::ObjectReference;

/// Seconds before an unchanged reason is told again on a waiting pod.
pub const RETELL_S: u64 = 1800;
/// Seconds an expected start may drift before a waiting pod's annotation is written
/// again (or a tenth of how far ahead it is, if more).
pub const START_SLACK_S: u64 = 300;
/// Seconds before a reason or status that failed to be written is written again.
pub const RETRY_TELL_S: u64 = 5;
/// Seconds between cycles when nothing changed.
pub const IDLE_CYCLE_S: u64 = 10;
/// Waiting pods told why per step at most.
pub const MAX_TOLD_PER_STEP: usize = 200;
/// Time a step spends explaining waiting pods at most (binds are written before).
pub const TELL_BUDGET: std::time::Duration = std::time::Duration::from_millis(200);
/// Seconds between reads of an InferenceService's load (an HPA's sync period).
pub const LOAD_EVERY_S: u64 = 15;
/// How often the world is looked at between whole seconds of the clock (what it saw
/// is acted on at once: a pod is bound within this, not at the next second).
pub const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
/// Things seen applied per step at most (the engine answers requests between steps).
const MAX_SEEN_PER_STEP: usize = 20_000;

/// What a node offers: allocatable CPU, memory and disk, its devices (count, memory,
/// resource), its taints.
type Offers = (
    u64,
    u64,
    u64,
    Vec<(u32, u64, Option<String>)>,
    Vec<maar_scheduler::rules::Taint>,
);

/// What the driver last told the core of a node.
#[derive(Clone, Debug, PartialEq)]
struct NodeFacts {
    /// What the node offers: allocatable CPU, memory and disk, its devices, its
    /// taints (re-read on every update: a device plugin advertises GPUs after the
    /// kubelet registered the node).
    offers: Offers,
    labels: BTreeMap<String, String>,
    ready: (bool, String),
    cordoned: bool,
    cordoned_gpus: Vec<u32>,
}

/// What the driver knows of one of maar's pods.
#[derive(Clone, Debug)]
struct PodFacts {
    uid: String,
    /// The core holds it as a job.
    in_core: bool,
    /// Bound to a node in Kubernetes (so stopping it means deleting it).
    bound: bool,
    ended: bool,
    /// Another scheduler's pod: held where it runs, never deleted or bound by maar.
    foreign: bool,
    /// The node Kubernetes has it on (`spec.nodeName`), and its cards as annotated.
    node: Option<(String, Vec<u32>)>,
    /// Its job, while the node it is bound to is not in the cluster (deleted, or not
    /// listed): it holds nothing in maar and is not scheduled again; taken in as
    /// running when the node appears.
    orphan: Option<Box<maar_scheduler::JobSpec>>,
}

/// What the driver knows of a TrainJob or an InferenceService.
#[derive(Clone, Debug)]
struct ObjectFacts {
    owner: Owner,
    uid: String,
    labels: BTreeMap<String, String>,
    /// An InferenceService: its load metric's selector.
    selector: String,
    /// The pods maar made for its current placements: name -> where.
    made: BTreeMap<String, maar_scheduler::input::Binding>,
    /// The number the next pod of an InferenceService takes.
    serial: usize,
    /// When its load was last asked for.
    load_asked: Option<u64>,
    /// When its replicas' pods were last made again in place (an InferenceService).
    replaced: Vec<u64>,
    in_core: bool,
    ended: bool,
    /// The pods of its current start.
    current: BTreeSet<String>,
    /// The status last written: (phase, message).
    status: Option<(String, String)>,
    /// Its job, when the core could not queue it yet (a pool not here): tried again
    /// when a pool appears.
    waiting: Option<maar_scheduler::JobSpec>,
    /// Its spec as first read (an edit is told, not taken).
    spec: Option<maar_scheduler::JobSpec>,
}

/// A pod maar made for one of its objects.
#[derive(Clone, Debug)]
struct OwnedPod {
    node: Option<String>,
    gpus: Vec<u32>,
    state: PodState,
    /// The watch saw it deleted.
    deleted: bool,
}

/// A Kubernetes cluster feeding the core.
pub struct KubeDriver {
    world: Option<World>,
    nodes: HashMap<String, NodeFacts>,
    pods: HashMap<String, PodFacts>,
    /// Names seen during a relist, per kind (nodes, pods), while one is under way.
    relist_nodes: Option<HashSet<String>>,
    relist_pods: Option<HashSet<String>>,
    /// The pods of a (re)list, applied when it is done, oldest first (as
    /// kube-scheduler's queue takes pods of one priority), not in the list's name
    /// order.
    pod_batch: Vec<PodSeen>,
    relist_objects: HashMap<Owner, HashSet<String>>,
    /// The first lists done: pools, nodes (they join pools), pods (they name nodes and
    /// are admitted by quotas), TrainJobs (their pods say where they run), quotas
    /// (they name pools), InferenceServices.
    listed: [bool; 6],
    /// Quotas set from Quota objects, by object (`namespace/name`): (project, pool);
    /// and those whose pool is not here yet.
    quotas: HashMap<String, (String, String)>,
    quotas_waiting: HashMap<String, crate::map::QuotaObject>,
    /// QuotaRequest objects made requests in maar: object -> (request number, the
    /// phase last written).
    requests: HashMap<String, (u32, String)>,
    /// What waits for an earlier list.
    held: Vec<Seen>,
    objects: HashMap<String, ObjectFacts>,
    /// The pods maar made for each object (`namespace/name`), by pod name.
    owned: HashMap<String, BTreeMap<String, OwnedPod>>,
    /// What each waiting pod was last told, and when.
    told: HashMap<String, (String, u64)>,
    /// When telling a job failed (the API server refused or was away): told again
    /// [`RETRY_TELL_S`] later, until what it shows is the current reason.
    not_told: HashMap<String, u64>,
    /// The last time each trouble was noted.
    troubles: HashMap<String, u64>,
    /// Other schedulers' pods that maar's decisions stopped (drain): dropped from its
    /// books.
    foreign_stopped: Vec<String>,
    /// maar's pods Kubernetes shows bound, for the core to follow.
    reconcile: Vec<String>,
    /// Writes of commands made with no cluster attached.
    unsent: Vec<Write>,
    /// maar's own events about objects (a bad Quota or Pool, an edited TrainJob,
    /// trouble with the API server on its Lease), written with the next step's writes.
    notes: Vec<Write>,
    /// Decisions held by the core, taken out before an input whose own decisions are
    /// dropped: carried out with the next cycle's.
    decided: Vec<Decision>,
    /// Something changed since the last cycle.
    dirty: bool,
    last_cycle: Option<u64>,
    last_told: Option<u64>,
    /// When the world was last looked at between whole seconds.
    last_poll: Option<std::time::Instant>,
    /// The latest forecast's starts of waiting pods and objects (seconds on the
    /// core's clock, or none; the basis), not yet compared with what they show.
    starts: HashMap<String, (Option<u64>, &'static str)>,
    /// What each waiting pod's or object's expected start shows (as last written).
    starts_told: HashMap<String, (Option<u64>, &'static str)>,
}

/// Whether an expected start moved enough to be written again: another basis, known
/// or not, or more than [`START_SLACK_S`] or a tenth of how far ahead it is (a
/// forecast every few seconds must not rewrite thousands of pods for a minute's drift).
pub fn start_moved(told: (Option<u64>, &str), new: (Option<u64>, &str), now: u64) -> bool {
    match (told, new) {
        ((Some(a), ba), (Some(b), bb)) => {
            let ahead = a.min(b).saturating_sub(now);
            ba != bb || a.abs_diff(b) > START_SLACK_S.max(ahead / 10)
        }
        ((a, ba), (b, bb)) => a.is_some() != b.is_some() || ba != bb,
    }
}

/// What an operator's command does in Kubernetes, once maar's core took it. Every
/// command is named (no catch-all arm): a new command is a compile error here until
/// it is said how it reaches the cluster.
#[derive(Debug, PartialEq)]
enum InCluster {
    /// The node's `spec.unschedulable`, as `kubectl cordon` / `uncordon`.
    Cordon(String, bool),
    /// The node's `crater.ai/cordoned-gpus` annotation, rewritten whole.
    GpuCordons(String),
    /// The node's labels, as `kubectl label node`.
    Labels {
        node: String,
        set: BTreeMap<String, String>,
        remove: Vec<String>,
    },
    /// Through the core's decisions, which the driver carries out (pods deleted for a
    /// drain, a cancel, a requeue, a preemption; pods made or deleted for a scale).
    Decisions,
    /// Through maar's objects: a quota request's answer and an approved Quota are
    /// written by `answer_requests` after the command.
    Objects,
    /// maar's own books only: its queue order (priority), an autoscaler paused or
    /// resumed, an alert acknowledged. A submit never gets here (refused above).
    MaarsOwn,
}

fn in_cluster(command: &Command) -> InCluster {
    match command {
        Command::CordonNode { node } | Command::DrainNode { node } => {
            InCluster::Cordon(node.clone(), true)
        }
        Command::UncordonNode { node } => InCluster::Cordon(node.clone(), false),
        Command::CordonGpu { node, .. } | Command::UncordonGpu { node, .. } => {
            InCluster::GpuCordons(node.clone())
        }
        Command::LabelNode { node, set, remove } => InCluster::Labels {
            node: node.clone(),
            set: set.clone(),
            remove: remove.clone(),
        },
        Command::Requeue { .. } | Command::Cancel { .. } | Command::Scale { .. } => {
            InCluster::Decisions
        }
        Command::RequestQuota { .. }
        | Command::ApproveQuota { .. }
        | Command::RejectQuota { .. } => InCluster::Objects,
        Command::SetPriority { .. }
        | Command::ResumeAutoscale { .. }
        | Command::AckAlert { .. }
        | Command::Submit(_) => InCluster::MaarsOwn,
    }
}

/// Whether telling `key` failed less than [`RETRY_TELL_S`] ago (it is told again
/// then, not at every step while the API server refuses).
fn retry_later(not_told: &HashMap<String, u64>, key: &str, now: u64) -> bool {
    not_told.get(key).is_some_and(|&t| now < t + RETRY_TELL_S)
}

/// What a relist no longer has: gone while the watch was down.
fn not_in<V>(known: &HashMap<String, V>, relisted: &HashSet<String>) -> Vec<String> {
    known
        .keys()
        .filter(|k| !relisted.contains(*k))
        .cloned()
        .collect()
}

impl KubeDriver {
    /// A driver on a running world (see [`World::start`]).
    pub fn new(world: World) -> KubeDriver {
        KubeDriver {
            world: Some(world),
            ..KubeDriver::detached()
        }
    }

    /// A driver with no cluster attached: what it is fed by hand (tests) or nothing.
    pub fn detached() -> KubeDriver {
        KubeDriver {
            world: None,
            nodes: HashMap::new(),
            pods: HashMap::new(),
            relist_nodes: None,
            relist_pods: None,
            pod_batch: Vec::new(),
            relist_objects: HashMap::new(),
            listed: [false; 6],
            quotas: HashMap::new(),
            quotas_waiting: HashMap::new(),
            requests: HashMap::new(),
            held: Vec::new(),
            objects: HashMap::new(),
            owned: HashMap::new(),
            told: HashMap::new(),
            not_told: HashMap::new(),
            troubles: HashMap::new(),
            foreign_stopped: Vec::new(),
            reconcile: Vec::new(),
            unsent: Vec::new(),
            notes: Vec::new(),
            decided: Vec::new(),
            dirty: false,
            last_cycle: None,
            last_told: None,
            last_poll: None,
            starts: HashMap::new(),
            starts_told: HashMap::new(),
        }
    }

    /// Feeds what the watch saw until nodes, pods and namespaces are listed once (or
    /// `within` passes): the cluster as it is before the console opens. Returns how
    /// many things were seen, whether the lists completed, and the events they caused
    /// (all of them, for the record: the core keeps only its newest few thousand).
    pub fn first_lists(
        &mut self,
        core: &mut Core,
        within: std::time::Duration,
    ) -> (usize, bool, Vec<Event>) {
        let end = std::time::Instant::now() + within;
        let mut n = 0;
        let mut events = Vec::new();
        let mut writes = Vec::new();
        while !self.listed.iter().all(|l| *l) {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            let Some(s) = self.world.as_ref().and_then(|w| w.next_within(left)) else {
                break;
            };
            self.see(core, s, &mut events, &mut writes);
            n += 1;
        }
        self.flush(writes);
        (n, self.listed.iter().all(|l| *l), events)
    }

    /// Which first list a thing waits for (none for pools and namespaces).
    fn waits_for(&self, s: &Seen) -> Option<usize> {
        const POOLS: usize = 0;
        const NODES: usize = 1;
        const PODS: usize = 2;
        const QUOTAS: usize = 4;
        let needs: &[usize] = match s {
            Seen::Node(_) | Seen::Quota(_) => &[POOLS],
            Seen::QuotaRequest(_) => &[POOLS, QUOTAS],
            Seen::Pod(_) => &[POOLS, NODES, QUOTAS],
            Seen::Object(..) => &[POOLS, NODES, QUOTAS, PODS],
            _ => return None,
        };
        needs.iter().copied().find(|&i| !self.listed[i])
    }

    /// A first list is done: what waited for it is fed now.
    fn listed_now(
        &mut self,
        stage: usize,
        core: &mut Core,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        if self.listed[stage] {
            return;
        }
        self.listed[stage] = true;
        for s in std::mem::take(&mut self.held) {
            self.see(core, s, events, writes);
        }
    }

    /// An observation; what it decides (replicas stopped on a node gone, a service
    /// scaled) is carried out after the next cycle.
    fn observe(core: &mut Core, o: Observation, events: &mut Vec<Event>) -> Output {
        let mut out = core.apply_held(Input::Observe(o));
        events.append(&mut out.events);
        out
    }

    /// Something maar notes of the cluster (an event of its own).
    fn note(
        core: &mut Core,
        severity: Severity,
        reason: &str,
        object: impl Into<String>,
        message: impl Into<String>,
        events: &mut Vec<Event>,
    ) {
        Self::observe(
            core,
            Observation::Note {
                severity,
                reason: reason.into(),
                object: object.into(),
                message: message.into(),
            },
            events,
        );
    }

    /// A trouble of maar's own, in the same words as a Warning event on the
    /// Kubernetes object it is about (`kubectl get events` shows it; written with the
    /// next writes) and as an event of maar's record about `object`.
    fn trouble(
        &mut self,
        core: &mut Core,
        events: &mut Vec<Event>,
        regarding: ObjectReference,
        object: String,
        reason: &str,
        message: String,
    ) {
        self.notes.push(Write::Note {
            regarding,
            warning: true,
            reason: reason.into(),
            message: message.clone(),
        });
        Self::note(core, Severity::Warning, reason, object, message, events);
    }

    /// maar's own Lease, which its troubles with the API server are told on.
    fn lease_ref() -> ObjectReference {
        object_ref(
            "coordination.k8s.io/v1",
            "Lease",
            crate::lease::NAMESPACE,
            crate::lease::NAME,
            "",
        )
    }

    /// One of maar's objects by its `namespace/name` key.
    fn crd_ref(kind: &str, key: &str) -> ObjectReference {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        object_ref("crater.ai/v1", kind, ns, name, "")
    }

    /// The pool for a node's role, added when new.
    /// Returns whether a pool was added.
    fn ensure_pool(
        core: &mut Core,
        labels: &BTreeMap<String, String>,
        events: &mut Vec<Event>,
    ) -> bool {
        let Some(role) = labels.get(LABEL_ROLE) else {
            return false;
        };
        // A pool (a Pool object, or one made for this role before) takes the node.
        if core.cluster().pool_id(role).is_some()
            || core.cluster().pool_for_labels(labels).is_some()
        {
            return false;
        }
        let kind = if role.contains("infer") || role.contains("serv") {
            PoolKind::Inference
        } else {
            PoolKind::Training
        };
        Self::observe(
            core,
            Observation::PoolSeen {
                pool: Box::new(Pool {
                    name: role.clone(),
                    kind,
                    selector: BTreeMap::from([(LABEL_ROLE.to_string(), role.clone())]),
                    overcommit: Overcommit::default(),
                    lend_to: Vec::new(),
                }),
            },
            events,
        );
        true
    }

    fn ensure_project(core: &mut Core, ns: &str, events: &mut Vec<Event>) {
        if core.cluster().project_id(ns).is_none() {
            Self::observe(
                core,
                Observation::ProjectSeen {
                    project: ns.to_string(),
                },
                events,
            );
        }
    }

    /// One thing seen, applied to the core.
    pub fn see(
        &mut self,
        core: &mut Core,
        s: Seen,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        self.dirty = true;
        if self.waits_for(&s).is_some() {
            self.held.push(s);
            return;
        }
        match s {
            Seen::Pool(w) => match w {
                Watched::Apply(p) | Watched::InitApply(p) => {
                    self.pool_seen(core, p, events);
                    self.pool_appeared(core, events);
                }
                Watched::InitDone => self.listed_now(0, core, events, writes),
                // A pool is not taken away while maar runs (its jobs would be lost).
                _ => {}
            },
            Seen::QuotaRequest(w) => match w {
                Watched::Apply(r) | Watched::InitApply(r) => {
                    self.quota_request_seen(core, r, events, writes)
                }
                _ => {}
            },
            Seen::Quota(w) => match w {
                Watched::Apply(q) | Watched::InitApply(q) => self.quota_applied(core, q, events),
                Watched::Delete(Ok(q)) => self.quota_deleted(core, &q.key, events),
                Watched::Delete(Err((key, _))) => self.quota_deleted(core, &key, events),
                Watched::InitDone => self.listed_now(4, core, events, writes),
                Watched::Init => {}
            },
            Seen::Object(owner, w) => match w {
                Watched::Init => {
                    self.relist_objects.insert(owner, HashSet::new());
                }
                Watched::InitApply(t) => {
                    if let Some(set) = self.relist_objects.get_mut(&owner) {
                        set.insert(t.key.clone());
                    }
                    self.object_applied(core, *t, events, writes);
                }
                Watched::Apply(t) => self.object_applied(core, *t, events, writes),
                Watched::Delete(t) => self.object_deleted(core, &t.key, events),
                Watched::InitDone => {
                    if let Some(set) = self.relist_objects.remove(&owner) {
                        let gone: Vec<String> = not_in(&self.objects, &set)
                            .into_iter()
                            .filter(|k| self.objects[k].owner == owner)
                            .collect();
                        for k in gone {
                            self.object_deleted(core, &k, events);
                        }
                    }
                    let stage = match owner {
                        Owner::TrainJob => 3,
                        Owner::InferenceService => 5,
                    };
                    self.listed_now(stage, core, events, writes);
                }
            },
            Seen::Load { job, value } => match value {
                Ok(Some(usage_pct)) => {
                    let _ =
                        Self::observe(core, Observation::ServiceLoad { job, usage_pct }, events);
                }
                // No series yet (no replica reports): the replicas stay.
                Ok(None) => {}
                Err(e) => self.see(
                    core,
                    Seen::Trouble(format!(
                        "InferenceService {job} keeps its replicas: its load cannot be read: {e}"
                    )),
                    events,
                    writes,
                ),
            },
            Seen::Namespace(Watched::Apply(ns) | Watched::InitApply(ns)) => {
                Self::ensure_project(core, &ns, events)
            }
            Seen::Namespace(_) => {}
            Seen::Node(w) => match w {
                Watched::Init => self.relist_nodes = Some(HashSet::new()),
                Watched::InitApply(k) => {
                    if let (Some(set), Some(name)) = (&mut self.relist_nodes, &k.metadata.name) {
                        set.insert(name.clone());
                    }
                    self.node_applied(core, &k, events);
                }
                Watched::Apply(k) => self.node_applied(core, &k, events),
                Watched::Delete(k) => {
                    if let Some(name) = &k.metadata.name {
                        self.node_gone(core, name, events);
                    }
                }
                Watched::InitDone => {
                    if let Some(set) = self.relist_nodes.take() {
                        let gone: Vec<String> = self
                            .nodes
                            .iter()
                            .filter(|(n, f)| !set.contains(*n) && f.ready.0)
                            .map(|(n, _)| n.clone())
                            .collect();
                        for n in gone {
                            self.node_gone(core, &n, events);
                        }
                    }
                    self.listed_now(1, core, events, writes);
                }
            },
            Seen::Pod(w) => {
                let done = matches!(w, Watched::InitDone);
                self.pod_seen(core, w, events, writes);
                if done {
                    self.listed_now(2, core, events, writes);
                }
            }
            Seen::Bound { job, result } => {
                let o = match result {
                    Ok(()) => {
                        if let Some(f) = self.pods.get_mut(&job) {
                            f.bound = true;
                        }
                        if let Some(f) = self.objects.get_mut(&job) {
                            f.ended = false;
                        }
                        Observation::Bound { job }
                    }
                    // Bound already (an earlier bind of it went through): the watch
                    // says where, and maar's books follow it.
                    Err(reason) if reason.contains("already assigned") => {
                        if self.pods.get(&job).is_some_and(|f| f.node.is_some()) {
                            self.reconcile.push(job);
                            self.reconcile_all(core, events);
                        }
                        return;
                    }
                    Err(reason) => {
                        // Nothing of it is in the world (a bind is one request, a
                        // TrainJob's pods all or none): what taking it back decides
                        // needs no write, and the cycle that places it again must
                        // bind it again, even on the same cards.
                        self.decided.extend(core.take_held());
                        let mut out = core.apply(Input::Observe(Observation::BindFailed {
                            job: job.clone(),
                            reason,
                        }));
                        events.append(&mut out.events);
                        // An object's pods not made: their names go with the replicas
                        // taken back (the pods that run stay known).
                        if let Some(f) = self.objects.get_mut(&job) {
                            let c = core.cluster();
                            let held: Vec<maar_scheduler::input::Binding> = c
                                .job_id(&job)
                                .map(|id| {
                                    c.jobs[id as usize]
                                        .placements
                                        .iter()
                                        .map(|p| maar_scheduler::input::Binding {
                                            node: c.nodes[p.node as usize].name.clone(),
                                            gpus: p.gpus.iter().map(|s| s.gpu).collect(),
                                        })
                                        .collect()
                                })
                                .unwrap_or_default();
                            f.made.retain(|_, at| held.contains(at));
                            let made = &f.made;
                            f.current.retain(|n| made.contains_key(n));
                        }
                        return;
                    }
                };
                Self::observe(core, o, events);
            }
            Seen::StartNotTold { job } => {
                self.starts_told.remove(&job);
            }
            Seen::NotTold { job } => {
                self.told.remove(&job);
                if let Some(f) = self.objects.get_mut(&job) {
                    f.status = None;
                }
                self.not_told.insert(job, core.now());
            }
            Seen::Lease(msg) => {
                tracing::info!(target: "maar::kube", "{msg}");
                // Not being able to hold the lease at all is trouble; the rest is news.
                if msg.starts_with("cannot") {
                    self.trouble(
                        core,
                        events,
                        Self::lease_ref(),
                        "cluster".into(),
                        "Lease",
                        msg,
                    );
                } else {
                    Self::note(core, Severity::Normal, "Lease", "cluster", msg, events);
                }
            }
            Seen::EventsDropped(n) => {
                let msg = format!(
                    "{n} bound pod(s) got no Scheduled event: more than {} events waited behind binds, and binds go first (kube-scheduler's event queue also drops past 1,000); the pods are bound all the same: `kubectl get pods -o wide` shows their nodes, and maar's own events have each bind",
                    crate::world::MAX_QUEUED_EVENTS
                );
                tracing::info!(target: "maar::kube", "{msg}");
                self.notes.push(Write::Note {
                    regarding: Self::lease_ref(),
                    warning: false,
                    reason: "EventsNotWritten".into(),
                    message: msg.clone(),
                });
                Self::note(
                    core,
                    Severity::Normal,
                    "EventsNotWritten",
                    "cluster",
                    msg,
                    events,
                );
            }
            Seen::Trouble(msg) => {
                let now = core.now();
                let last = self.troubles.get(&msg).copied();
                if last.is_none_or(|t| now >= t + 60) {
                    self.troubles.insert(msg.clone(), now);
                    // Logged with the engine's Warning events (maar::event).
                    self.trouble(
                        core,
                        events,
                        Self::lease_ref(),
                        "cluster".into(),
                        "KubernetesTrouble",
                        msg,
                    );
                }
            }
        }
    }

    fn node_applied(&mut self, core: &mut Core, k: &KNode, events: &mut Vec<Event>) {
        let name = k.metadata.name.clone().unwrap_or_default();
        let as_model = map::node_of(k);
        let labels_before = self.nodes.get(&name).map(|f| f.labels.clone());
        if labels_before.as_ref() != k.metadata.labels.as_ref() {
            for msg in map::label_troubles(k) {
                let node = object_ref("v1", "Node", "", &name, "");
                self.trouble(core, events, node, format!("node/{name}"), "BadLabel", msg);
            }
        }
        let facts = NodeFacts {
            offers: (
                as_model.cpu_milli,
                as_model.memory,
                as_model.disk,
                map::node_devices(k),
                as_model.taints.clone(),
            ),
            labels: map::labels_of(k),
            ready: map::node_ready(k),
            cordoned: map::node_cordoned(k),
            cordoned_gpus: map::cordoned_gpus(k),
        };
        if Self::ensure_pool(core, &facts.labels, events) {
            self.pool_appeared(core, events);
        }
        let before = self.nodes.get(&name).cloned();
        match &before {
            None => {
                Self::observe(
                    core,
                    Observation::NodeJoined {
                        node: Box::new(as_model),
                    },
                    events,
                );
                for &g in &facts.cordoned_gpus {
                    Self::observe(
                        core,
                        Observation::Cordoned {
                            node: name.clone(),
                            gpu: Some(g),
                            cordoned: true,
                        },
                        events,
                    );
                }
            }
            Some(b) => {
                if b.offers != facts.offers {
                    // Capacity, devices or taints changed (labels with them).
                    Self::observe(
                        core,
                        Observation::NodeUpdated {
                            node: Box::new(as_model),
                        },
                        events,
                    );
                } else if b.labels != facts.labels {
                    Self::observe(
                        core,
                        Observation::NodeLabels {
                            node: name.clone(),
                            labels: facts.labels.clone(),
                        },
                        events,
                    );
                }
                if b.ready != facts.ready {
                    Self::observe(
                        core,
                        Observation::NodeCondition {
                            node: name.clone(),
                            ready: facts.ready.0,
                            reason: facts.ready.1.clone(),
                        },
                        events,
                    );
                }
                if b.cordoned != facts.cordoned {
                    Self::observe(
                        core,
                        Observation::Cordoned {
                            node: name.clone(),
                            gpu: None,
                            cordoned: facts.cordoned,
                        },
                        events,
                    );
                }
                for &g in facts
                    .cordoned_gpus
                    .iter()
                    .filter(|g| !b.cordoned_gpus.contains(g))
                {
                    Self::observe(
                        core,
                        Observation::Cordoned {
                            node: name.clone(),
                            gpu: Some(g),
                            cordoned: true,
                        },
                        events,
                    );
                }
                for &g in b
                    .cordoned_gpus
                    .iter()
                    .filter(|g| !facts.cordoned_gpus.contains(g))
                {
                    Self::observe(
                        core,
                        Observation::Cordoned {
                            node: name.clone(),
                            gpu: Some(g),
                            cordoned: false,
                        },
                        events,
                    );
                }
            }
        }
        let joined = before.is_none();
        self.nodes.insert(name.clone(), facts);
        if joined {
            self.adopt_orphans(core, &name, events);
        }
    }

    fn node_gone(&mut self, core: &mut Core, name: &str, events: &mut Vec<Event>) {
        let Some(f) = self.nodes.get_mut(name) else {
            return;
        };
        let reason = "deleted from the cluster".to_string();
        if f.ready != (false, reason.clone()) {
            f.ready = (false, reason.clone());
            Self::observe(
                core,
                Observation::NodeCondition {
                    node: name.to_string(),
                    ready: false,
                    reason,
                },
                events,
            );
        }
    }

    fn pod_seen(
        &mut self,
        core: &mut Core,
        w: Watched<Box<PodSeen>>,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        match w {
            Watched::Init => {
                self.relist_pods = Some(HashSet::new());
                self.pod_batch.clear();
            }
            Watched::InitApply(p) => {
                if let Some(set) = &mut self.relist_pods {
                    set.insert(p.key.clone());
                }
                self.pod_batch.push(*p);
            }
            Watched::Apply(p) => self.pod_applied(core, *p, events, writes),
            Watched::Delete(p) => match &p.owner {
                Some(tj) => {
                    let (ns, name) = p.key.split_once('/').unwrap_or(("default", &p.key));
                    let tj_key = format!("{ns}/{tj}");
                    if let Some(o) = self.owned.get_mut(&tj_key).and_then(|o| o.get_mut(name)) {
                        o.deleted = true;
                    }
                    self.object_check(core, &tj_key, events, writes);
                }
                None => self.pod_deleted(core, &p.key, events),
            },
            Watched::InitDone => {
                let mut batch = std::mem::take(&mut self.pod_batch);
                batch.sort_by(|a, b| (a.created, &a.key).cmp(&(b.created, &b.key)));
                for p in batch {
                    self.pod_applied(core, p, events, writes);
                }
                if let Some(set) = self.relist_pods.take() {
                    let gone = not_in(&self.pods, &set);
                    for k in gone {
                        self.pod_deleted(core, &k, events);
                    }
                    // Pods of maar's objects gone while the watch was down.
                    let mut touched = Vec::new();
                    for (obj, pods) in &mut self.owned {
                        let (ns, _) = obj.split_once('/').unwrap_or(("default", obj));
                        for (name, p) in pods.iter_mut() {
                            if !p.deleted && !set.contains(&format!("{ns}/{name}")) {
                                p.deleted = true;
                                touched.push(obj.clone());
                            }
                        }
                    }
                    touched.dedup();
                    for obj in touched {
                        self.object_check(core, &obj, events, writes);
                    }
                }
            }
        }
    }

    fn pod_applied(
        &mut self,
        core: &mut Core,
        p: PodSeen,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        if let Some(tj) = &p.owner {
            let (ns, name) = p.key.split_once('/').unwrap_or(("default", &p.key));
            let tj_key = format!("{ns}/{tj}");
            self.owned.entry(tj_key.clone()).or_default().insert(
                name.to_string(),
                OwnedPod {
                    node: p.node.clone(),
                    gpus: p.gpus.clone(),
                    state: p.state.clone(),
                    deleted: false,
                },
            );
            self.object_check(core, &tj_key, events, writes);
            return;
        }
        // Another scheduler's pod counts once it is bound (it holds its node's room).
        if !p.ours && p.node.is_none() && !self.pods.contains_key(&p.key) {
            return;
        }
        let key = p.key.clone();
        if let Some(f) = self.pods.get_mut(&key) {
            if f.uid != p.uid {
                // The same name, a new pod: the old one is gone.
                self.pod_deleted(core, &key, events);
            } else {
                if let Some(node) = &p.node {
                    f.bound = true;
                    let now = Some((node.clone(), p.gpus.clone()));
                    if f.node != now {
                        // Bound in Kubernetes: maar's books follow (the bind answer may
                        // come later, or have been taken back meanwhile).
                        f.node = now;
                        if f.in_core && !f.ended && p.state == PodState::Live {
                            self.reconcile.push(key.clone());
                        }
                    }
                }
                let f = self.pods.get_mut(&key).expect("known");
                if f.ended || !f.in_core {
                    self.reconcile_all(core, events);
                    return;
                }
                let outcome = match p.state {
                    PodState::Live => {
                        self.reconcile_all(core, events);
                        return;
                    }
                    PodState::Succeeded => JobOutcome::Succeeded,
                    PodState::Failed { oom: true, message } => JobOutcome::OomKilled { message },
                    PodState::Failed {
                        oom: false,
                        message,
                    } => JobOutcome::Failed { message },
                };
                f.ended = true;
                let running = core
                    .cluster()
                    .job_id(&key)
                    .is_ok_and(|id| core.cluster().jobs[id as usize].phase == Phase::Running);
                if running {
                    Self::observe(core, Observation::JobEnded { job: key, outcome }, events);
                } else {
                    // Ended before maar started it (another hand bound it): no longer
                    // waiting.
                    Self::observe(
                        core,
                        Observation::JobGone {
                            job: key,
                            why:
                                "its pod ended before maar started it (another scheduler bound it)"
                                    .into(),
                        },
                        events,
                    );
                }
                return;
            }
        }
        let mut facts = PodFacts {
            uid: p.uid.clone(),
            in_core: false,
            bound: p.node.is_some(),
            ended: p.state != PodState::Live,
            foreign: !p.ours,
            node: p.node.clone().map(|n| (n, p.gpus.clone())),
            orphan: None,
        };
        if facts.ended {
            // History is Kubernetes's: a pod that ended before maar saw it is not a job.
            self.pods.insert(key, facts);
            return;
        }
        let (ns, _) = key.split_once('/').unwrap_or(("default", &key));
        Self::ensure_project(core, ns, events);
        let mut spec = match p.spec {
            Some(Ok(s)) => s,
            Some(Err(_)) if !p.ours => return,
            Some(Err(e)) => {
                let message = format!("maar cannot read this pod: {}: {}", e.field, e.message);
                writes.push(Write::Unschedulable {
                    job: key.clone(),
                    uid: p.uid.clone(),
                    message,
                    object: None,
                });
                self.pods.insert(key, facts);
                return;
            }
            None => return,
        };
        spec.project = ns.to_string();
        if !p.ours {
            // Never a victim of maar's preemption: it is not maar's to stop.
            spec.priority = maar_scheduler::limits::MAX_PRIORITY;
            spec.pool.clear();
        }
        if let Some(node) = p
            .node
            .as_ref()
            .filter(|n| core.cluster().node_id(n).is_err())
        {
            // Bound to a node maar does not know: not Pending (it is not maar's to
            // place again) and holding nothing (no card is known to be its).
            let name = key.split_once('/').map(|x| x.1).unwrap_or(&key);
            let message = format!(
                "pod {key} is bound to node {node}, which is not in the cluster: it holds nothing in maar until the node appears (`kubectl delete pod -n {ns} {name}` if the node is gone for good)"
            );
            let pod = object_ref("v1", "Pod", ns, name, &p.uid);
            self.trouble(
                core,
                events,
                pod,
                format!("pod/{key}"),
                "PodOnUnknownNode",
                message,
            );
            facts.orphan = Some(Box::new(spec));
            self.pods.insert(key, facts);
            return;
        }
        Self::place_on_node_pool(core, &mut spec, p.node.as_deref());
        let out = match &p.node {
            Some(node) => Self::observe(
                core,
                Observation::JobRunning {
                    spec: Box::new(spec),
                    replicas: vec![maar_scheduler::input::Binding {
                        node: node.clone(),
                        gpus: p.gpus.clone(),
                    }],
                },
                events,
            ),
            None => Self::observe(
                core,
                Observation::JobSubmitted {
                    spec: Box::new(spec),
                },
                events,
            ),
        };
        match out.result {
            Ok(_) => facts.in_core = true,
            Err(_) if !p.ours => {}
            Err(e) => writes.push(Write::Unschedulable {
                job: key.clone(),
                uid: p.uid.clone(),
                message: format!("maar cannot queue this pod: {e}"),
                object: None,
            }),
        }
        self.pods.insert(key, facts);
    }

    /// A pod bound before this maar saw it is in its node's pool unless it names one.
    fn place_on_node_pool(core: &Core, spec: &mut maar_scheduler::JobSpec, node: Option<&str>) {
        if let Some(pool) = node
            .filter(|_| spec.pool.is_empty())
            .and_then(|n| core.cluster().node_id(n).ok())
            .and_then(|n| core.cluster().nodes[n as usize].pool)
        {
            spec.pool = core.cluster().pools[pool as usize].name.clone();
        }
        Self::fill_pool(core, spec);
    }

    /// Pods bound to a node that was not in the cluster, now that it is: running there.
    fn adopt_orphans(&mut self, core: &mut Core, node: &str, events: &mut Vec<Event>) {
        for (key, f) in &mut self.pods {
            let Some((n, gpus)) = f.node.clone().filter(|(n, _)| n == node) else {
                continue;
            };
            if f.in_core || f.ended {
                continue;
            }
            let Some(mut spec) = f.orphan.take() else {
                continue;
            };
            Self::place_on_node_pool(core, &mut spec, Some(&n));
            let out = Self::observe(
                core,
                Observation::JobRunning {
                    spec,
                    replicas: vec![maar_scheduler::input::Binding { node: n, gpus }],
                },
                events,
            );
            if out.is_ok() {
                f.in_core = true;
            } else {
                tracing::warn!(target: "maar::kube", "pod {key} on node {node}: {:?}", out.result);
            }
        }
    }

    fn pod_deleted(&mut self, core: &mut Core, key: &str, events: &mut Vec<Event>) {
        let Some(f) = self.pods.remove(key) else {
            return;
        };
        self.told.remove(key);
        if !f.in_core || f.ended {
            return;
        }
        let live = core.cluster().job_id(key).is_ok_and(|id| {
            matches!(
                core.cluster().jobs[id as usize].phase,
                Phase::Pending | Phase::Running
            )
        });
        if live {
            Self::observe(
                core,
                Observation::JobGone {
                    job: key.to_string(),
                    why: "its pod was deleted".into(),
                },
                events,
            );
        }
    }

    fn pool_seen(
        &mut self,
        core: &mut Core,
        p: Result<PoolObject, (String, String)>,
        events: &mut Vec<Event>,
    ) {
        match p {
            Ok(p) => {
                // New, or changed (the core takes a changed one and re-homes nodes).
                let c = core.cluster();
                let lend_to = p.lend_to.iter().filter_map(|n| c.pool_id(n)).collect();
                Self::observe(
                    core,
                    Observation::PoolSeen {
                        pool: Box::new(Pool {
                            name: p.name,
                            kind: p.kind,
                            selector: p.selector,
                            overcommit: p.overcommit,
                            lend_to,
                        }),
                    },
                    events,
                );
            }
            Err((name, why)) => {
                let pool = object_ref("crater.ai/v1", "Pool", "", &name, "");
                let msg = format!(
                    "Pool {name} is not used: {why}; fix it with `kubectl edit pools.crater.ai {name}`"
                );
                self.trouble(core, events, pool, format!("pool/{name}"), "BadPool", msg);
            }
        }
    }

    /// A QuotaRequest object: asked in maar once (the operator approves it there);
    /// one already answered is history.
    fn quota_request_seen(
        &mut self,
        core: &mut Core,
        r: Result<crate::map::QuotaRequestObject, (String, String)>,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        let r = match r {
            Ok(r) => r,
            Err((key, why)) => {
                writes.push(Write::QuotaRequestStatus {
                    key,
                    phase: "Rejected".into(),
                    id: 0,
                    message: format!("maar cannot read this request: {why}"),
                });
                return;
            }
        };
        if self.requests.contains_key(&r.key)
            || matches!(r.phase.as_deref(), Some("Approved" | "Rejected"))
        {
            return;
        }
        // Asked before this maar started (its status names the request): the same one.
        Self::ensure_project(core, &r.project, events);
        let out = core.apply(Input::Observe(Observation::QuotaAsked {
            project: r.project.clone(),
            pool: r.pool.clone(),
            gpus: r.gpus,
            reserved: r.reserved,
            reason: format!("{} (QuotaRequest {})", r.reason, r.key),
        }));
        let mut out = out;
        events.append(&mut out.events);
        match out.result {
            Ok(_) => {
                let id = core
                    .cluster()
                    .quota_requests
                    .last()
                    .map(|q| q.id)
                    .unwrap_or_default();
                self.requests.insert(r.key.clone(), (id, "Pending".into()));
                writes.push(Write::QuotaRequestStatus {
                    key: r.key,
                    phase: "Pending".into(),
                    id,
                    message: format!(
                        "request #{id} waits for an admin: maar approve {id} (or reject)"
                    ),
                });
            }
            Err(e) => writes.push(Write::QuotaRequestStatus {
                key: r.key,
                phase: "Rejected".into(),
                id: 0,
                message: e.to_string(),
            }),
        }
    }

    /// Requests answered in maar: their objects say so, and an approved one's quota is
    /// written to the project's Quota object for that pool.
    fn answer_requests(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let c = core.cluster();
        for (key, (id, told)) in &mut self.requests {
            let Some(q) = c.quota_requests.iter().find(|q| q.id == *id) else {
                continue;
            };
            let (phase, message) = match &q.status {
                maar_scheduler::model::RequestStatus::Pending => continue,
                maar_scheduler::model::RequestStatus::Approved => (
                    "Approved",
                    format!("request #{id} approved: +{} GPUs", q.gpus),
                ),
                maar_scheduler::model::RequestStatus::Rejected(why) => {
                    ("Rejected", format!("request #{id} rejected: {why}"))
                }
            };
            if told.as_str() == phase {
                continue;
            }
            *told = phase.to_string();
            writes.push(Write::QuotaRequestStatus {
                key: key.clone(),
                phase: phase.into(),
                id: *id,
                message,
            });
            if phase == "Approved" {
                let project = c.projects[q.project as usize].name.clone();
                let pool = c.pools[q.pool as usize].name.clone();
                let quota = c.projects[q.project as usize]
                    .quotas
                    .get(&q.pool)
                    .cloned()
                    .unwrap_or_default();
                // The Quota object that set this quota, else one maar makes.
                let name = self
                    .quotas
                    .iter()
                    .find(|(_, (pr, pl))| *pr == project && *pl == pool)
                    .and_then(|(k, _)| k.split_once('/').map(|(_, n)| n.to_string()))
                    .unwrap_or_else(|| format!("maar-{pool}"));
                writes.push(Write::QuotaObject {
                    project,
                    name,
                    pool,
                    reserved_gpus: quota.reserved.gpu_milli as f64 / 1000.0,
                    max_gpus: quota.max.gpu_milli.map(|m| m as f64 / 1000.0),
                });
            }
        }
    }

    /// A pool appeared: what waited for it (TrainJobs, quotas) is taken now.
    fn pool_appeared(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        self.retry_waiting(core, events);
        for (_, q) in std::mem::take(&mut self.quotas_waiting) {
            self.quota_applied(core, Ok(q), events);
        }
    }

    fn quota_applied(
        &mut self,
        core: &mut Core,
        q: Result<crate::map::QuotaObject, (String, String)>,
        events: &mut Vec<Event>,
    ) {
        let q = match q {
            Ok(q) => q,
            Err((key, why)) => {
                let msg = format!(
                    "Quota {key} is not used: {why}; fix it with `kubectl edit quotas.crater.ai -n {}`",
                    key.replace('/', " ")
                );
                let quota = Self::crd_ref("Quota", &key);
                self.trouble(core, events, quota, format!("quota/{key}"), "BadQuota", msg);
                return;
            }
        };
        if let Some(why) = &q.bad {
            let msg = format!(
                "Quota {} cannot be read ({why}): project {} may use nothing in pool {} until it is fixed (`kubectl edit quotas.crater.ai -n {}`)",
                q.key, q.project, q.pool, q.key.replace('/', " ")
            );
            let quota = Self::crd_ref("Quota", &q.key);
            let object = format!("quota/{}", q.key);
            self.trouble(core, events, quota, object, "BadQuota", msg);
        }
        if core.cluster().pool_id(&q.pool).is_none() {
            // Its pool is not here yet: set when it appears.
            self.quotas_waiting.insert(q.key.clone(), q);
            return;
        }
        let out = Self::observe(
            core,
            Observation::QuotaSet {
                project: q.project.clone(),
                pool: q.pool.clone(),
                quota: Some(q.quota),
            },
            events,
        );
        if out.is_ok() {
            self.quotas.insert(q.key, (q.project, q.pool));
        }
    }

    fn quota_deleted(&mut self, core: &mut Core, key: &str, events: &mut Vec<Event>) {
        self.quotas_waiting.remove(key);
        if let Some((project, pool)) = self.quotas.remove(key) {
            Self::observe(
                core,
                Observation::QuotaSet {
                    project,
                    pool,
                    quota: None,
                },
                events,
            );
        }
    }

    fn object_applied(
        &mut self,
        core: &mut Core,
        t: ObjectSeen,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        let key = t.key.clone();
        if let Some(f) = self.objects.get(&key) {
            if f.owner != t.owner {
                // A TrainJob and an InferenceService of one name: maar's jobs are
                // named by namespace/name, so the later one is refused.
                writes.push(Write::Unschedulable {
                    job: key.clone(),
                    uid: t.uid.clone(),
                    message: format!(
                        "a {} named {key} is already a job in maar; rename this {}",
                        f.owner.kind(),
                        t.owner.kind()
                    ),
                    object: Some(t.owner),
                });
                return;
            }
            if f.uid == t.uid {
                // Edits to a submitted object's spec are not taken (as a pod's): said
                // once per edit, on the object.
                let now = t.spec.as_ref().ok().cloned();
                if f.spec.is_some() && now.is_some() && f.spec != now {
                    let kind = t.owner.kind();
                    let msg = format!(
                        "changes to a submitted {kind} are not applied (maar keeps the spec it queued); delete and re-apply it to run the new one"
                    );
                    self.objects.get_mut(&key).expect("known").spec = now;
                    let object = Self::crd_ref(kind, &key);
                    self.trouble(
                        core,
                        events,
                        object,
                        format!("job/{key}"),
                        "SpecNotApplied",
                        msg,
                    );
                }
                return;
            }
            self.object_deleted(core, &key, events);
        }
        let owner = t.owner;
        let kind = owner.kind();
        // Its pods' numbers go on from those that exist (kept for their logs).
        let serial = self
            .owned
            .get(&key)
            .into_iter()
            .flat_map(|o| o.keys())
            .filter_map(|n| n.rsplit('-').next().and_then(|x| x.parse::<usize>().ok()))
            .map(|x| x + 1)
            .max()
            .unwrap_or(0);
        let mut facts = ObjectFacts {
            owner,
            labels: t.labels.clone(),
            selector: t.selector.clone(),
            made: BTreeMap::new(),
            serial,
            load_asked: None,
            replaced: Vec::new(),
            uid: t.uid.clone(),
            in_core: false,
            ended: false,
            current: BTreeSet::new(),
            status: None,
            waiting: None,
            spec: t.spec.as_ref().ok().cloned(),
        };
        if t.ended {
            // Ended before this maar saw it: history is Kubernetes's.
            facts.ended = true;
            self.objects.insert(key, facts);
            return;
        }
        let (ns, _) = key.split_once('/').unwrap_or(("default", &key));
        Self::ensure_project(core, ns, events);
        let mut spec = match t.spec {
            Ok(s) => s,
            Err(e) => {
                writes.push(Write::Unschedulable {
                    job: key.clone(),
                    uid: t.uid,
                    message: format!("maar cannot read this {kind}: {}: {}", e.field, e.message),
                    object: Some(owner),
                });
                self.objects.insert(key, facts);
                return;
            }
        };
        spec.project = ns.to_string();
        Self::fill_pool(core, &mut spec);
        // Pods of it already running (maar restarted): it runs there.
        let live: Vec<(String, maar_scheduler::input::Binding)> = self
            .owned
            .get(&key)
            .map(|o| {
                o.iter()
                    .filter(|(_, p)| p.state == PodState::Live && !p.deleted)
                    .filter_map(|(n, p)| {
                        p.node.as_ref().map(|node| {
                            (
                                n.clone(),
                                maar_scheduler::input::Binding {
                                    node: node.clone(),
                                    gpus: p.gpus.clone(),
                                },
                            )
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let again = spec.clone();
        let out = if live.is_empty() {
            Self::observe(
                core,
                Observation::JobSubmitted {
                    spec: Box::new(spec),
                },
                events,
            )
        } else {
            facts.current = live.iter().map(|(n, _)| n.clone()).collect();
            facts.made = live.iter().cloned().collect();
            Self::observe(
                core,
                Observation::JobRunning {
                    spec: Box::new(spec),
                    replicas: live.into_iter().map(|(_, b)| b).collect(),
                },
                events,
            )
        };
        match out.result {
            Ok(_) => facts.in_core = true,
            Err(e) => {
                facts.waiting = Some(again);
                writes.push(Write::Unschedulable {
                    job: key.clone(),
                    uid: t.uid,
                    message: format!("maar cannot queue this {kind}: {e}"),
                    object: Some(owner),
                })
            }
        }
        self.objects.insert(key, facts);
    }

    /// TrainJobs the core could not queue (their pool was not here) are tried again.
    fn retry_waiting(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        for (key, f) in &mut self.objects {
            let Some(mut spec) = f.waiting.take() else {
                continue;
            };
            Self::fill_pool(core, &mut spec);
            let again = spec.clone();
            let out = Self::observe(
                core,
                Observation::JobSubmitted {
                    spec: Box::new(spec),
                },
                events,
            );
            if out.is_ok() {
                f.in_core = true;
                self.told.remove(key);
            } else {
                f.waiting = Some(again);
            }
        }
    }

    fn object_deleted(&mut self, core: &mut Core, key: &str, events: &mut Vec<Event>) {
        let Some(f) = self.objects.remove(key) else {
            return;
        };
        self.told.remove(key);
        if !f.in_core {
            return;
        }
        let live = core.cluster().job_id(key).is_ok_and(|id| {
            matches!(
                core.cluster().jobs[id as usize].phase,
                Phase::Pending | Phase::Running | Phase::Restarting
            )
        });
        if live {
            Self::observe(
                core,
                Observation::JobGone {
                    job: key.to_string(),
                    why: "its object was deleted".into(),
                },
                events,
            );
        }
    }

    /// An object's pods changed. A TrainJob ends when one of its current pods fails
    /// (or is deleted) or all of them succeed; an InferenceService's replica whose pod
    /// was deleted or failed is made again where it runs.
    fn object_check(
        &mut self,
        core: &mut Core,
        key: &str,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        let Some(f) = self.objects.get_mut(key) else {
            return;
        };
        if !f.in_core || f.ended || f.current.is_empty() {
            return;
        }
        let running = core
            .cluster()
            .job_id(key)
            .is_ok_and(|id| core.cluster().jobs[id as usize].phase == Phase::Running);
        if !running {
            return;
        }
        let empty = BTreeMap::new();
        let pods = self.owned.get(key).unwrap_or(&empty);
        if f.owner == Owner::InferenceService {
            let lost: Vec<String> = f
                .current
                .iter()
                .filter(|n| {
                    pods.get(*n)
                        .is_some_and(|p| p.deleted || matches!(p.state, PodState::Failed { .. }))
                })
                .cloned()
                .collect();
            if lost.is_empty() {
                return;
            }
            // Made again in place only on a node that takes pods (not cordoned or
            // drained, Ready) and not in a loop (at most 3 a minute); otherwise the
            // service fails and its restart policy places it again (with back-off).
            let now = core.now();
            f.replaced.retain(|&t| t + 60 > now);
            let c = core.cluster();
            let unfit = lost.iter().find_map(|n| {
                let at = f.made.get(n)?;
                let node = c.node_id(&at.node).ok().map(|i| &c.nodes[i as usize]);
                match node {
                    Some(nd) if !nd.cordoned && nd.ready() => None,
                    _ => Some(format!(
                        "pod {n} was lost and node {} takes no pods now",
                        at.node
                    )),
                }
            });
            let looping = (f.replaced.len() + lost.len() > 3).then(|| {
                format!(
                    "its pods were lost {} times within a minute (`kubectl describe pod` says why)",
                    f.replaced.len() + lost.len()
                )
            });
            if let Some(message) = unfit.or(looping) {
                f.ended = true;
                Self::observe(
                    core,
                    Observation::JobEnded {
                        job: key.to_string(),
                        outcome: JobOutcome::Failed { message },
                    },
                    events,
                );
                return;
            }
            f.replaced.extend(std::iter::repeat_n(now, lost.len()));
            let mut again = Vec::new();
            for name in lost {
                f.current.remove(&name);
                let Some(at) = f.made.remove(&name) else {
                    continue;
                };
                let (_, svc) = key.split_once('/').unwrap_or(("default", key));
                let new = format!("{svc}-{}", f.serial);
                f.serial += 1;
                f.current.insert(new.clone());
                f.made.insert(new.clone(), at.clone());
                again.push(NewPod {
                    name: new,
                    index: f.serial - 1,
                    at,
                });
            }
            let (spec, of) = {
                let c = core.cluster();
                let Ok(id) = c.job_id(key) else { return };
                let j = &c.jobs[id as usize];
                (j.spec.clone(), j.desired_replicas as usize)
            };
            Self::note(
                core,
                Severity::Warning,
                "ReplicaReplaced",
                format!("job/{key}"),
                format!(
                    "{} pod(s) deleted or failed: made again where they ran ({})",
                    again.len(),
                    again
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                events,
            );
            writes.push(Write::CreatePods {
                owner: f.owner,
                job: key.to_string(),
                uid: f.uid.clone(),
                labels: f.labels.clone(),
                spec: Box::new(spec),
                pods: again,
                of,
                answer: false,
            });
            return;
        }
        let mut outcome = None;
        let mut succeeded = 0;
        for name in &f.current {
            match pods.get(name).map(|p| (p.deleted, &p.state)) {
                // Made, not seen by the watch yet.
                None => {}
                Some((true, _)) => {
                    outcome = Some(JobOutcome::Failed {
                        message: format!("pod {name} was deleted"),
                    });
                    break;
                }
                Some((_, PodState::Failed { oom: true, message })) => {
                    outcome = Some(JobOutcome::OomKilled {
                        message: format!("pod {name}: {message}"),
                    });
                    break;
                }
                Some((
                    _,
                    PodState::Failed {
                        oom: false,
                        message,
                    },
                )) => {
                    outcome = Some(JobOutcome::Failed {
                        message: format!("pod {name}: {message}"),
                    });
                    break;
                }
                Some((_, PodState::Succeeded)) => succeeded += 1,
                Some((_, PodState::Live)) => {}
            }
        }
        if outcome.is_none() && succeeded == f.current.len() {
            outcome = Some(JobOutcome::Succeeded);
        }
        if let Some(outcome) = outcome {
            f.ended = true;
            Self::observe(
                core,
                Observation::JobEnded {
                    job: key.to_string(),
                    outcome,
                },
                events,
            );
        }
    }

    /// A job's pool when it names none (or one that does not exist here): the pool
    /// its node selector's role names, else its project's default.
    fn fill_pool(core: &Core, spec: &mut maar_scheduler::JobSpec) {
        if !spec.pool.is_empty() && core.cluster().pool_id(&spec.pool).is_some() {
            return;
        }
        let by_role = spec
            .node_selector
            .get(LABEL_ROLE)
            .filter(|r| core.cluster().pool_id(r).is_some())
            .cloned();
        if let Some(p) = by_role.or_else(|| {
            // A pool the manifest names that is not here: the default (the explanation
            // would otherwise only say the pool is unknown).
            (spec.pool.is_empty())
                .then(|| core.cluster().pool_for_unnamed(spec).ok())
                .flatten()
        }) {
            spec.pool = p;
        }
    }

    /// Decisions as writes.
    fn carry_out(&mut self, core: &Core, decisions: &[Decision], writes: &mut Vec<Write>) {
        for d in decisions {
            match d {
                Decision::Bind {
                    job,
                    replicas,
                    start,
                    ..
                } => {
                    // Placements Kubernetes already shows (a pod found running where
                    // it is) need no write.
                    let c = core.cluster();
                    if c.job_id(job)
                        .is_ok_and(|id| c.jobs[id as usize].placements.iter().all(|p| p.bound))
                    {
                        continue;
                    }
                    if let Some(f) = self.objects.get_mut(job) {
                        // An object's pods are made now, already on their nodes: a
                        // TrainJob's numbered by replica and start, a service's in turn.
                        let c = core.cluster();
                        let Ok(id) = c.job_id(job) else { continue };
                        let j = &c.jobs[id as usize];
                        let (_, name) = job.split_once('/').unwrap_or(("default", job));
                        // Replicas Kubernetes already runs (adopted after a restart, in
                        // the same decision as new ones) keep their pods.
                        let bound_at = |at: &maar_scheduler::input::Binding| {
                            j.placements.iter().any(|p| {
                                p.bound
                                    && c.nodes[p.node as usize].name == at.node
                                    && p.gpus.iter().map(|s| s.gpu).eq(at.gpus.iter().copied())
                            })
                        };
                        if *start {
                            f.made.retain(|_, at| bound_at(at));
                            let made = &f.made;
                            f.current.retain(|n| made.contains_key(n));
                        }
                        let mut pods = Vec::new();
                        for (i, at) in replicas.iter().enumerate() {
                            if bound_at(at) {
                                continue;
                            }
                            let (pod, index) = match f.owner {
                                Owner::TrainJob => {
                                    (crate::world::trainjob_pod_name(name, j.restarts, i), i)
                                }
                                Owner::InferenceService => {
                                    f.serial += 1;
                                    (format!("{name}-{}", f.serial - 1), f.serial - 1)
                                }
                            };
                            f.current.insert(pod.clone());
                            f.made.insert(pod.clone(), at.clone());
                            pods.push(NewPod {
                                name: pod,
                                index,
                                at: at.clone(),
                            });
                        }
                        f.ended = false;
                        if !pods.is_empty() {
                            writes.push(Write::CreatePods {
                                owner: f.owner,
                                job: job.clone(),
                                uid: f.uid.clone(),
                                labels: f.labels.clone(),
                                spec: Box::new(j.spec.clone()),
                                pods,
                                of: (j.desired_replicas as usize).max(replicas.len()),
                                answer: true,
                            });
                        }
                    } else if self.pods.get(job).is_some_and(|f| f.node.is_some()) {
                        // Kubernetes has it on a node already: no second bind.
                        self.reconcile.push(job.clone());
                    } else if let Some(r) = replicas.first() {
                        writes.push(Write::Bind {
                            job: job.clone(),
                            uid: self
                                .pods
                                .get(job)
                                .map(|f| f.uid.clone())
                                .unwrap_or_default(),
                            node: r.node.clone(),
                            gpus: r.gpus.clone(),
                        });
                    }
                }
                Decision::Stop {
                    job,
                    reason,
                    replicas,
                    ..
                } => {
                    // Only pods bound in Kubernetes and still running are deleted: a
                    // bind taken back or pods that ended (kept for their logs) need
                    // nothing.
                    if let Some(f) = self.pods.get_mut(job) {
                        if f.foreign {
                            // Not maar's to stop: it leaves maar's books, not the node.
                            self.foreign_stopped.push(job.clone());
                        } else if f.bound && !f.ended {
                            f.ended = true;
                            writes.push(Write::Delete {
                                job: job.clone(),
                                reason: reason.clone(),
                            });
                        }
                    } else if let Some(f) = self.objects.get_mut(job) {
                        if f.current.is_empty() {
                            continue;
                        }
                        // The pods of the replicas stopped (a service scaled down or a
                        // replica preempted); all of them when the job stops.
                        let mut gone = Vec::new();
                        for r in replicas {
                            if let Some(name) = f
                                .made
                                .iter()
                                .find(|(n, at)| *at == r && f.current.contains(*n))
                                .map(|(n, _)| n.clone())
                            {
                                f.current.remove(&name);
                                f.made.remove(&name);
                                gone.push(name);
                            }
                        }
                        // A TrainJob's pods go together: those of its current start (the
                        // failed ones of earlier starts stay for their logs). Named, so a
                        // delete never takes the pods of a start made meanwhile.
                        if f.owner == Owner::TrainJob {
                            gone.extend(std::mem::take(&mut f.current));
                            gone.sort();
                            gone.dedup();
                            f.made.clear();
                        }
                        if f.current.is_empty() {
                            f.ended = true;
                        }
                        // Pods that ended (failed, succeeded) stay for their logs.
                        let owned = self.owned.get(job);
                        gone.retain(|n| {
                            owned
                                .and_then(|o| o.get(n))
                                .is_none_or(|p| p.state == PodState::Live && !p.deleted)
                        });
                        if !gone.is_empty() {
                            writes.push(Write::DeletePods {
                                owner: f.owner,
                                job: job.clone(),
                                pods: gone,
                                reason: reason.clone(),
                            });
                        }
                    }
                }
            }
        }
    }

    /// Scheduling cycles until no more decisions (at most a few), their decisions
    /// written.
    fn settle(&mut self, core: &mut Core, events: &mut Vec<Event>, writes: &mut Vec<Write>) {
        for _ in 0..4 {
            let out = core.apply(Input::Schedule);
            events.extend(out.events);
            let mut decisions = std::mem::take(&mut self.decided);
            decisions.extend(out.decisions);
            if decisions.is_empty() {
                break;
            }
            self.carry_out(core, &decisions, writes);
            self.drop_foreign(core, events);
            self.reconcile_all(core, events);
        }
    }

    /// maar's pods that Kubernetes has bound: the core follows where they are.
    fn reconcile_all(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        for key in std::mem::take(&mut self.reconcile) {
            let Some((node, gpus)) = self.pods.get(&key).and_then(|f| f.node.clone()) else {
                continue;
            };
            let c = core.cluster();
            let Ok(id) = c.job_id(&key) else { continue };
            let spec = c.jobs[id as usize].spec.clone();
            Self::observe(
                core,
                Observation::JobRunning {
                    spec: Box::new(spec),
                    replicas: vec![maar_scheduler::input::Binding { node, gpus }],
                },
                events,
            );
        }
    }

    /// Other schedulers' pods that maar's decisions stopped leave maar's books.
    fn drop_foreign(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        for job in std::mem::take(&mut self.foreign_stopped) {
            if let Some(f) = self.pods.get_mut(&job) {
                f.ended = true;
            }
            Self::observe(
                core,
                Observation::JobGone {
                    job,
                    why: "its pod was stopped for another scheduler's (not maar's) pod".into(),
                },
                events,
            );
        }
    }

    /// Tells waiting pods why (reason changed, or [`RETELL_S`] passed), at most
    /// [`MAX_TOLD_PER_STEP`] a step (each is an explanation and two writes; the rest
    /// are told in the next steps).
    fn tell_waiting(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let now = core.now();
        let c = core.cluster();
        let mut told = 0;
        // Explaining is the dear part (proofs on copies): pods of one shape waiting for
        // one reason share the proven fix, and a step spends at most TELL_BUDGET on it
        // (the rest are told in the next steps).
        let started = std::time::Instant::now();
        let mut fixes: HashMap<String, Option<String>> = HashMap::new();
        for j in c.pending_jobs() {
            if told >= MAX_TOLD_PER_STEP || started.elapsed() > TELL_BUDGET {
                break;
            }
            let key = format!("{}/{}", j.spec.project, j.spec.name);
            let Some((uid, object)) = self.waiting_ref(&key) else {
                continue;
            };
            if j.reason.is_empty() {
                continue;
            }
            // A running service waiting for room to scale up: its status says so.
            if object.is_some() && j.phase != Phase::Pending {
                continue;
            }
            let stale = match self.told.get(&key) {
                None => true,
                Some((r, t)) => r.as_str() != &*j.reason || now >= t + RETELL_S,
            };
            if !stale || retry_later(&self.not_told, &key, now) {
                continue;
            }
            self.not_told.remove(&key);
            let mut message = j.reason.to_string();
            let shape = {
                let mut s = j.spec.clone();
                s.name.clear();
                format!(
                    "{}\u{0}{}",
                    j.reason,
                    serde_json::to_string(&s).unwrap_or_default()
                )
            };
            let fix = match fixes.get(&shape) {
                Some(f) => f.clone(),
                None => {
                    let ex = c.explain_now(j.id);
                    // A proven fix first, else what explain says first.
                    let proven = ex.suggestions.iter().find(|s| {
                        s.contains("would start it now") || s.contains("then it starts now")
                    });
                    let fix = proven.or(ex.suggestions.first()).cloned();
                    // Only a proven fix is the same for a twin (the first suggestion
                    // may name the job's own queue position).
                    if proven.is_some() {
                        fixes.insert(shape, fix.clone());
                    }
                    fix
                }
            };
            // (Not twice: a job that can never run leads with that already.)
            if let Some(fix) = fix.filter(|f| !j.reason.contains(f.as_str())) {
                message.push_str("; ");
                message.push_str(&fix);
            }
            if let Some(f) = self.objects.get_mut(&key) {
                f.status = Some(("Pending".into(), message.clone()));
            }
            writes.push(Write::Unschedulable {
                job: key.clone(),
                uid,
                message,
                object,
            });
            self.told.insert(key, (j.reason.to_string(), now));
            told += 1;
        }
        // Objects that started, scaled or ended: their status.
        for (key, f) in &mut self.objects {
            if !f.in_core {
                continue;
            }
            let Ok(id) = c.job_id(key) else { continue };
            let j = &c.jobs[id as usize];
            // Pending is told with its reason above; Running once its pods are made.
            if j.phase == Phase::Pending
                || (j.phase == Phase::Running && j.placements.iter().any(|p| !p.bound))
            {
                continue;
            }
            let nodes: Vec<String> = j
                .placements
                .iter()
                .map(|p| c.nodes[p.node as usize].name.clone())
                .collect();
            let message = match j.phase {
                Phase::Running if f.owner == Owner::InferenceService => {
                    let running = j.running_replicas();
                    let mut m = format!(
                        "{running} of {} replicas running on {}",
                        j.desired_replicas,
                        nodes.join(", ")
                    );
                    if running < j.desired_replicas && !j.reason.is_empty() {
                        m.push_str(&format!("; the others wait: {}", j.reason));
                    }
                    m
                }
                Phase::Running => format!("running on {}", nodes.join(", ")),
                _ => j.reason.to_string(),
            };
            let status = (j.phase.name().to_string(), message);
            if retry_later(&self.not_told, key, now) {
                continue;
            }
            if f.status.as_ref() != Some(&status) {
                self.not_told.remove(key);
                f.status = Some(status.clone());
                writes.push(Write::ObjectStatus {
                    owner: f.owner,
                    job: key.clone(),
                    phase: status.0,
                    message: status.1,
                    nodes,
                });
            }
        }
    }

    /// The node's cordoned GPUs as the core now has them, written whole.
    fn gpu_cordons(&mut self, core: &Core, node: String, writes: &mut Vec<Write>) {
        let c = core.cluster();
        let Ok(n) = c.node_id(&node) else { return };
        let gpus = c.nodes[n as usize]
            .gpus
            .iter()
            .filter(|g| g.cordoned)
            .map(|g| g.index)
            .collect::<Vec<_>>();
        // What maar writes comes back through the watch as already known.
        if let Some(f) = self.nodes.get_mut(&node) {
            f.cordoned_gpus = gpus.clone();
        }
        writes.push(Write::GpuCordons { node, gpus });
    }

    /// The uid of a waiting pod or maar object by `namespace/name`, and which object
    /// kind it is (`None`: a pod); `None` when maar does not know it.
    fn waiting_ref(&self, key: &str) -> Option<(String, Option<Owner>)> {
        match (self.pods.get(key), self.objects.get(key)) {
            (Some(f), _) => Some((f.uid.clone(), None)),
            (None, Some(f)) => Some((f.uid.clone(), Some(f.owner))),
            (None, None) => None,
        }
    }

    /// Writes the expected starts of the latest forecast that moved (see
    /// [`start_moved`]), at most [`MAX_TOLD_PER_STEP`] a step (the rest in the next
    /// steps, unless a newer forecast came first).
    fn tell_starts(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let now = core.now();
        let c = core.cluster();
        let keys: Vec<String> = self
            .starts
            .keys()
            .take(MAX_TOLD_PER_STEP)
            .cloned()
            .collect();
        for key in keys {
            let Some(new) = self.starts.remove(&key) else {
                continue;
            };
            // Still waiting, still the same pod or object.
            let pending = c
                .job_id(&key)
                .is_ok_and(|id| c.jobs[id as usize].phase == Phase::Pending);
            let Some((uid, object)) = self.waiting_ref(&key).filter(|_| pending) else {
                continue;
            };
            let moved = self
                .starts_told
                .get(&key)
                .is_none_or(|&told| start_moved(told, new, now));
            if !moved {
                continue;
            }
            self.starts_told.insert(key.clone(), new);
            writes.push(Write::ExpectedStart {
                job: key,
                uid,
                object,
                in_s: new.0.map(|t| t.saturating_sub(now)),
                basis: new.1,
            });
        }
    }

    /// Asks for the load of each running InferenceService that autoscales, every
    /// [`LOAD_EVERY_S`] seconds.
    fn ask_loads(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let now = core.now();
        let c = core.cluster();
        for (key, f) in &mut self.objects {
            if f.owner != Owner::InferenceService
                || !f.in_core
                || f.load_asked.is_some_and(|t| now < t + LOAD_EVERY_S)
            {
                continue;
            }
            let Ok(id) = c.job_id(key) else { continue };
            let j = &c.jobs[id as usize];
            let autoscales = matches!(&j.spec.kind, maar_scheduler::model::JobKind::Inference(a) if a.min < a.max);
            // Once its pods are made (a replica on its way reports nothing yet).
            if j.phase != Phase::Running || !autoscales || j.placements.iter().any(|p| !p.bound) {
                continue;
            }
            f.load_asked = Some(now);
            writes.push(Write::ReadLoad {
                job: key.clone(),
                selector: f.selector.clone(),
            });
        }
    }

    /// What the watch saw since the last look, at most [`MAX_SEEN_PER_STEP`].
    fn take_seen(&self) -> Vec<Seen> {
        let mut seen = Vec::new();
        if let Some(w) = &self.world {
            while seen.len() < MAX_SEEN_PER_STEP {
                match w.try_next() {
                    Some(s) => seen.push(s),
                    None => break,
                }
            }
        }
        seen
    }

    /// This maar schedules: it holds the lease (or has no cluster attached).
    pub fn leading(&self) -> bool {
        self.world.as_ref().is_none_or(|w| w.is_leader())
    }

    /// The writes made with no cluster attached (what a command wrote), for a look.
    pub fn take_unsent(&mut self) -> Vec<Write> {
        std::mem::take(&mut self.unsent)
    }

    fn flush(&mut self, writes: Vec<Write>) {
        let Some(w) = &self.world else {
            self.unsent.extend(writes);
            return;
        };
        // A maar that watches only writes nothing.
        if !w.is_leader() {
            return;
        }
        for x in writes {
            w.write(x);
        }
    }

    /// One step: what was seen, a cycle when something changed (or each second), the
    /// waiting pods told. Returns the writes (also sent to the world, when attached).
    pub fn step(&mut self, core: &mut Core, to: u64, seen: Vec<Seen>) -> (Vec<Event>, Vec<Write>) {
        self.step_at(core, Some(to), seen)
    }

    /// A step at the clock's new second `to`, or between seconds (`None`: a poll,
    /// where the clock stays, a cycle runs only when something waits to be placed and
    /// waiting pods are told at the next second).
    fn step_at(
        &mut self,
        core: &mut Core,
        to: Option<u64>,
        seen: Vec<Seen>,
    ) -> (Vec<Event>, Vec<Write>) {
        // What the clock decides (a bind timed out) is carried out after the cycle.
        let mut events = match to {
            Some(to) => core.apply_held(Input::Advance { to }).events,
            None => Vec::new(),
        };
        // The clock moved something (a restart due, a bind timed out).
        if !events.is_empty() {
            self.dirty = true;
        }
        let mut writes = Vec::new();
        for s in seen {
            self.see(core, s, &mut events, &mut writes);
        }
        if !self.leading() {
            // Another maar schedules: this one only follows the watch (and does
            // nothing of what it would decide).
            core.take_held();
            self.decided.clear();
            self.notes.clear();
            return (events, writes);
        }
        let now = core.now();
        let cycle = match to {
            // A cycle when something changed; else one every IDLE_CYCLE_S (a cycle
            // over thousands of waiting pods costs a fraction of a second).
            Some(to) => self.dirty || self.last_cycle.is_none_or(|t| to >= t + IDLE_CYCLE_S),
            // Between seconds only when something waits to be placed (a new pod, a
            // bind refused): the watch's echo of maar's own binds places nothing, and
            // a cycle over thousands of running jobs every 100 ms would cost more than
            // the binds. The rest (held decisions, scale-ups) goes with the next second.
            None => {
                self.dirty
                    && (core.cluster().pending_jobs().next().is_some() || !self.decided.is_empty())
            }
        };
        if cycle {
            self.dirty = false;
            self.last_cycle = Some(now);
            self.settle(core, &mut events, &mut writes);
        }
        // The binds go out before the waiting pods are explained (explaining can take
        // a while: proofs on copies).
        if self.world.is_some() {
            self.flush(std::mem::take(&mut writes));
        }
        if to.is_some() && self.last_told.is_none_or(|t| now > t) {
            self.last_told = Some(now);
            self.tell_waiting(core, &mut writes);
            self.tell_starts(core, &mut writes);
        }
        self.answer_requests(core, &mut writes);
        self.ask_loads(core, &mut writes);
        writes.append(&mut self.notes);
        (events, writes)
    }
}

impl Driver for KubeDriver {
    fn kind(&self) -> &'static str {
        "kube"
    }

    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        let seen = self.take_seen();
        let (events, writes) = self.step(core, to, seen);
        self.flush(writes);
        events
    }

    fn poll(&mut self, core: &mut Core) -> Vec<Event> {
        // At most every POLL_EVERY: a burst of thousands of pods is placed in a few
        // cycles, not one per pod.
        let now = std::time::Instant::now();
        if self.last_poll.is_some_and(|t| now < t + POLL_EVERY) {
            return Vec::new();
        }
        self.last_poll = Some(now);
        let seen = self.take_seen();
        if seen.is_empty() {
            return Vec::new();
        }
        let (events, writes) = self.step_at(core, None, seen);
        self.flush(writes);
        events
    }

    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        if !self.leading() && !matches!(command, Command::AckAlert { .. }) {
            return Output {
                result: Err(maar_scheduler::ClusterError::Invalid(
                    "this maar watches only: another maar holds the scheduling lease (its holder is named in this maar's Lease event); give the command to that maar, or stop it and this one takes over within 15 s".into(),
                )),
                job: None,
                events: Vec::new(),
                decisions: Vec::new(),
            };
        }
        if let Command::Submit(spec) = &command {
            return Output {
                result: Err(maar_scheduler::ClusterError::Invalid(format!(
                    "job {}: on Kubernetes, maar schedules what is in the cluster: apply the manifest with `kubectl apply -f` (a TrainJob, or a pod with `schedulerName: maar`)",
                    spec.name
                ))),
                job: None,
                events: Vec::new(),
                decisions: Vec::new(),
            };
        }
        let mut writes = Vec::new();
        let effect = in_cluster(&command);
        let mut out = core.apply(Input::Command { actor, command });
        if out.is_ok() {
            match effect {
                InCluster::Cordon(node, on) => {
                    if let Some(f) = self.nodes.get_mut(&node) {
                        f.cordoned = on;
                    }
                    writes.push(Write::Cordon { node, on });
                }
                InCluster::GpuCordons(node) => self.gpu_cordons(core, node, &mut writes),
                InCluster::Labels { node, set, remove } => {
                    writes.push(Write::Labels { node, set, remove });
                }
                InCluster::Decisions | InCluster::Objects | InCluster::MaarsOwn => {}
            }
            let mut events = std::mem::take(&mut out.events);
            let decisions = out.decisions.clone();
            self.carry_out(core, &decisions, &mut writes);
            self.drop_foreign(core, &mut events);
            self.settle(core, &mut events, &mut writes);
            self.answer_requests(core, &mut writes);
            out.events = events;
            self.flush(writes);
        }
        out
    }

    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Previews decide; they write nothing to the cluster.
    fn fork(&self) -> Box<dyn Driver> {
        Box::new(maar_scheduler::input::Bare)
    }

    /// The waiting pods' and objects' expected starts, written with the next steps
    /// where they moved (a maar that only watches writes none).
    fn starts(&mut self, core: &Core, forecast: &maar_scheduler::forecast::Forecast) {
        if !self.leading() {
            return;
        }
        let c = core.cluster();
        self.starts.clear();
        for (&id, s) in &forecast.starts {
            let Some(j) = c.jobs.get(id) else {
                continue;
            };
            if j.phase != Phase::Pending {
                continue;
            }
            let key = format!("{}/{}", j.spec.project, j.spec.name);
            if self.pods.contains_key(&key) || self.objects.contains_key(&key) {
                self.starts.insert(key, (s.at, s.basis.name()));
            }
        }
        // What no longer waits needs no memory of its start.
        let starts = &self.starts;
        self.starts_told.retain(|k, _| starts.contains_key(k));
    }

    /// The pods keep running in the cluster; the watch stops.
    fn stop(&mut self, _core: &mut Core) -> Vec<Event> {
        if let Some(w) = self.world.take() {
            w.shutdown();
        }
        Vec::new()
    }
}

/// A Kubernetes cluster's record with no cluster attached (a look at its past, a
/// command given while no `maar kube` runs): commands change the core; nothing is
/// scheduled or written until `maar kube` attaches the cluster again.
#[derive(Clone)]
pub struct Offline;

impl Driver for Offline {
    fn kind(&self) -> &'static str {
        "kube"
    }

    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        core.apply(Input::Advance { to }).events
    }

    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        core.apply(Input::Command { actor, command })
    }

    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn fork(&self) -> Box<dyn Driver> {
        Box::new(Offline)
    }
}
