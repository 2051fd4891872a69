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

mod nodes;
mod objects;
mod pods;
mod quotas;
mod writes;

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
    // Allocatable `pods`.
    u32,
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
    /// The GPU cordon annotation as written (its bad entries are said when it
    /// changes).
    cordons_text: Option<String>,
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
    /// It names no pool and maar chose one (see [`KubeDriver::repool_stranded`]).
    pool_chosen: bool,
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
    /// It names no pool and maar chose one (see [`KubeDriver::repool_stranded`]).
    pool_chosen: bool,
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

/// How long a node may advertise fewer GPUs than its pods hold before maar takes the
/// cards as withdrawn (and their jobs as lost): a device plugin restarting reports
/// none for a moment.
pub const WITHDRAW_GRACE_S: u64 = 60;

/// A Kubernetes cluster feeding the core.
pub struct KubeDriver {
    world: Option<World>,
    nodes: HashMap<String, NodeFacts>,
    pods: HashMap<String, PodFacts>,
    /// Names seen during a relist, per kind (nodes, pods), while one is under way.
    relist_nodes: Option<HashSet<String>>,
    /// Pool objects seen and not deleted, and those a relist has shown so far (a Pool
    /// missing from a relist was deleted while the watch was away).
    pool_objects: HashSet<String>,
    relist_pools: Option<HashSet<String>>,
    relist_pods: Option<HashSet<String>>,
    /// The pods of a (re)list, applied when it is done, oldest first (as
    /// kube-scheduler's queue takes pods of one priority), not in the list's name
    /// order. Boxed as they arrive: each carries its job, and sorting thousands by
    /// value moved megabytes.
    #[allow(clippy::vec_box)]
    pod_batch: Vec<Box<PodSeen>>,
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
    /// Objects deleted while their pods still run (the garbage collector not yet
    /// through, or `--cascade=orphan`): their jobs hold their cards until the last pod
    /// is gone.
    lingering: HashSet<String>,
    /// What each waiting pod was last told, and when.
    told: HashMap<String, (String, u64)>,
    /// When telling a job failed (the API server refused or was away): told again
    /// [`RETRY_TELL_S`] later, until what it shows is the current reason.
    not_told: HashMap<String, u64>,
    /// The last time each trouble was noted.
    troubles: HashMap<String, u64>,
    /// Since when the watches have not reached the API server, and the last error
    /// (cleared by the next object a watch delivers).
    unanswered: Option<(std::time::Instant, String)>,
    /// Other schedulers' pods that maar's decisions stopped (drain): dropped from its
    /// books.
    foreign_stopped: Vec<String>,
    /// Nodes that advertise fewer GPUs than their pods hold, since when (cluster
    /// seconds), and the node as last seen: their cards are taken as withdrawn only
    /// after [`WITHDRAW_GRACE_S`] (a device plugin restarting reports none for a
    /// moment, and Kubernetes stops no pod for it).
    withdrawing: HashMap<String, (u64, Box<KNode>)>,
    /// maar's own pods it deleted (preempted, drained, withdrawn), with why: a deleted
    /// pod never comes back to be bound, so its job leaves the queue too.
    deleted_own: Vec<(String, String)>,
    /// maar's pods Kubernetes shows bound, for the core to follow.
    reconcile: Vec<String>,
    /// Waiting jobs to look at for a pool that no longer lets them on, once the step's
    /// objects are seen (see [`KubeDriver::repool_stranded`]): all of them (a Pool or a
    /// quota changed), or those of these pools (a node's labels or taints changed).
    repool_all: bool,
    repool_pools: BTreeSet<maar_scheduler::model::PoolId>,
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
    /// By node: the pods maar deleted there (preempted, drained, stopped) that are
    /// not gone yet. The kubelet counts a terminating pod's devices and CPU until it
    /// is gone, so a pod for that node waits (as kube-scheduler's nominated pod does).
    vacating: HashMap<String, HashMap<String, u64>>,
    /// Binds and pods made on nodes still being vacated, written once they are clear.
    held_writes: Vec<Write>,
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
            pool_objects: HashSet::new(),
            relist_pools: None,
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
            lingering: HashSet::new(),
            told: HashMap::new(),
            not_told: HashMap::new(),
            troubles: HashMap::new(),
            unanswered: None,
            foreign_stopped: Vec::new(),
            deleted_own: Vec::new(),
            withdrawing: HashMap::new(),
            reconcile: Vec::new(),
            repool_all: false,
            repool_pools: BTreeSet::new(),
            unsent: Vec::new(),
            notes: Vec::new(),
            decided: Vec::new(),
            dirty: false,
            last_cycle: None,
            last_told: None,
            last_poll: None,
            starts: HashMap::new(),
            starts_told: HashMap::new(),
            vacating: HashMap::new(),
            held_writes: Vec::new(),
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
    /// Tells the core job `job` left the cluster (`why`), where its phase is one of
    /// `live` (a job already ended or gone is left as it is).
    fn gone_if(core: &mut Core, job: &str, live: &[Phase], why: String, events: &mut Vec<Event>) {
        let c = core.cluster();
        if c.job_id(job)
            .is_ok_and(|id| live.contains(&c.jobs[id as usize].phase))
        {
            Self::observe(
                core,
                Observation::JobGone {
                    job: job.to_string(),
                    why,
                },
                events,
            );
        }
    }

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

    /// One of maar's objects by its `namespace/name` key and its uid (empty where not
    /// known: `kubectl describe` then does not list the event, `kubectl get events`
    /// does).
    fn crd_ref(kind: &str, key: &str, uid: &str) -> ObjectReference {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        object_ref("crater.ai/v1", kind, ns, name, uid)
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
        match &s {
            Seen::Unanswered(msg) => {
                let since = self
                    .unanswered
                    .as_ref()
                    .map_or_else(std::time::Instant::now, |u| u.0);
                self.unanswered = Some((since, msg.clone()));
            }
            // The API server answered: a watch delivered, or a bind went through.
            Seen::Node(_)
            | Seen::Pod(_)
            | Seen::Namespace(_)
            | Seen::Object(..)
            | Seen::Pool(_)
            | Seen::Quota(_)
            | Seen::QuotaRequest(_)
            | Seen::Bound { result: Ok(()), .. } => {
                // Said where the outage was said: the log, and an event on the Lease.
                if let Some((since, _)) = self.unanswered.take() {
                    let secs = since.elapsed().as_secs();
                    let msg = format!("the API server answers again (after {secs} s)");
                    tracing::info!(target: "maar::kube", "{msg}");
                    self.notes.push(Write::Note {
                        regarding: Self::lease_ref(),
                        warning: false,
                        reason: "KubernetesBack".into(),
                        message: msg,
                    });
                }
            }
            _ => {}
        }
        if self.waits_for(&s).is_some() {
            self.held.push(s);
            return;
        }
        match s {
            Seen::Pool(w) => match w {
                Watched::Init => self.relist_pools = Some(HashSet::new()),
                Watched::Apply(p) | Watched::InitApply(p) => {
                    let name = match &p {
                        Ok(p) => p.name.clone(),
                        Err((name, _)) => name.clone(),
                    };
                    if let Some(set) = &mut self.relist_pools {
                        set.insert(name.clone());
                    }
                    self.pool_objects.insert(name);
                    self.pool_seen(core, p, events);
                    self.pool_appeared(core, events);
                }
                Watched::InitDone => {
                    if let Some(set) = self.relist_pools.take() {
                        let mut gone: Vec<String> = self
                            .pool_objects
                            .iter()
                            .filter(|n| !set.contains(*n))
                            .cloned()
                            .collect();
                        gone.sort();
                        for name in gone {
                            self.pool_deleted(core, &name, events);
                        }
                    }
                    self.listed_now(0, core, events, writes)
                }
                Watched::Delete(Ok(p)) => self.pool_deleted(core, &p.name, events),
                Watched::Delete(Err((name, _))) => self.pool_deleted(core, &name, events),
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
            // (The world hands a batch out one by one; one given whole is seen so.)
            Seen::Many(all) => {
                for s in all {
                    self.see(core, s, events, writes);
                }
            }
            Seen::Trouble(msg) | Seen::Unanswered(msg) => {
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

    /// Scheduling cycles until no more decisions (at most a few), their decisions
    /// written.
    fn settle(&mut self, core: &mut Core, events: &mut Vec<Event>, writes: &mut Vec<Write>) {
        maar_scheduler::kit::settle(core, events, |core, out, events| {
            let mut decisions = std::mem::take(&mut self.decided);
            decisions.extend(out);
            if decisions.is_empty() {
                return false;
            }
            self.carry_out(core, &decisions, writes);
            self.drop_foreign(core, events);
            self.reconcile_all(core, events);
            true
        });
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

    /// A submitted TrainJob's or InferenceService's object as its file gave it, made
    /// for this cluster: its kind, plural, and the object in the job's namespace
    /// (server-set fields dropped), with why it was sent here when a dispatch chose
    /// this cluster (annotation `crater.ai/dispatched`).
    pub fn object_of(
        spec: &maar_scheduler::JobSpec,
    ) -> Option<(&'static str, &'static str, serde_json::Value)> {
        let mut o = spec.manifest.clone()?;
        let (kind, plural) = match o.get("kind")?.as_str()? {
            "TrainJob" => ("TrainJob", "trainjobs"),
            "InferenceService" => ("InferenceService", "inferenceservices"),
            _ => return None,
        };
        let meta = o.get_mut("metadata")?.as_object_mut()?;
        meta.insert("namespace".into(), spec.project.clone().into());
        meta.insert("name".into(), spec.name.clone().into());
        for server_set in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(server_set);
        }
        // maar's own marks of an earlier dispatch are the new one's, or none.
        if let Some(a) = meta.get_mut("annotations").and_then(|a| a.as_object_mut()) {
            for own in [
                crate::map::ANNOTATION_DISPATCHED,
                crate::map::ANNOTATION_SENT_START_IN,
                crate::map::ANNOTATION_MOVED_FROM,
            ] {
                a.remove(own);
            }
        }
        if let Some(why) = &spec.dispatched {
            let ann = meta
                .entry("annotations")
                .or_insert_with(|| serde_json::json!({}));
            if let Some(a) = ann.as_object_mut() {
                a.insert(crate::map::ANNOTATION_DISPATCHED.into(), why.clone().into());
                if let Some(s) = spec.sent_start_in {
                    a.insert(
                        crate::map::ANNOTATION_SENT_START_IN.into(),
                        s.to_string().into(),
                    );
                }
                if let Some(from) = &spec.moved_from {
                    a.insert(
                        crate::map::ANNOTATION_MOVED_FROM.into(),
                        from.clone().into(),
                    );
                }
            }
        }
        Some((kind, plural, o))
    }

    /// The API server has not answered the watches for 3 s or more: the last error and
    /// for how long.
    pub fn unreachable(&self) -> Option<String> {
        let (since, why) = self.unanswered.as_ref()?;
        let secs = since.elapsed().as_secs();
        (secs >= 3).then(|| format!("the API server does not answer (for {secs} s): {why}"))
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
        // Nodes advertising fewer cards than they hold: looked at again each step (a
        // job that ends frees a card, or the last on a card past the count: the node
        // is then taken as advertised).
        let fewer: Vec<Box<KNode>> = self.withdrawing.values().map(|(_, k)| k.clone()).collect();
        for k in fewer {
            self.node_seen(core, &k, &mut events, false);
        }
        // Cards withdrawn for longer than the grace: taken as gone now.
        let now = core.now();
        let due: Vec<Box<KNode>> = self
            .withdrawing
            .values()
            .filter(|(since, _)| now >= since + WITHDRAW_GRACE_S)
            .map(|(_, k)| k.clone())
            .collect();
        for k in due {
            // (Kept, not re-entered: a node whose pods fit the count stays as it is,
            // said once; one with more in use than advertised loses the jobs past it.)
            self.node_seen(core, &k, &mut events, true);
            if k.metadata
                .name
                .as_ref()
                .is_some_and(|n| !self.withdrawing.contains_key(n))
            {
                self.dirty = true;
            }
        }
        // Nodes maar vacates: a pod it deleted that is not gone after the bind timeout
        // (its delete refused, a finalizer that stays) holds the node no longer.
        let stale = now.saturating_sub(core.cluster().config.bind_timeout_s.max(300));
        for pods in self.vacating.values_mut() {
            pods.retain(|_, since| *since > stale);
        }
        self.vacating.retain(|_, pods| !pods.is_empty());
        // Waiting jobs whose pool lost its nodes: once a step, after all it saw (a
        // relist's hundreds of quotas would each ask again), before the cycle.
        if std::mem::take(&mut self.repool_all) {
            self.repool_pools.clear();
            self.repool_stranded(core, &mut events, None);
        }
        for p in std::mem::take(&mut self.repool_pools) {
            self.repool_stranded(core, &mut events, Some(p));
        }
        if !self.leading() {
            // Another maar schedules: this one only follows the watch (and does
            // nothing of what it would decide, nor what it held back while it led).
            core.take_held();
            self.decided.clear();
            self.notes.clear();
            self.held_writes.clear();
            self.vacating.clear();
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
        self.hold_for_vacating(core, &mut writes);
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
    /// The API server holds the cluster: `Kube::open` reads it at every start.
    fn world_read_anew(&self) -> bool {
        true
    }
    fn leading(&self) -> bool {
        KubeDriver::leading(self)
    }

    fn unreachable(&self) -> Option<String> {
        KubeDriver::unreachable(self)
    }

    fn localize(&self, core: &Core, command: Command) -> Result<Command, Output> {
        localize(core, command)
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
        // Nothing new seen: nothing to do, unless no cycle ran yet. The first lists
        // queued every waiting pod before the engine started; they wait for no clock
        // (they waited for the next whole second, a bind about 1 s after the start).
        if seen.is_empty() && !(self.dirty && self.last_cycle.is_none()) {
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
            // maar schedules what is in the cluster: a TrainJob or InferenceService file
            // is made there as written (the watch then brings it, like `kubectl apply`);
            // anything else is the user's to apply. A job of that name already here is
            // refused, as the core refuses it.
            if core
                .cluster()
                .job_id(&format!("{}/{}", spec.project, spec.name))
                .is_ok()
            {
                return Output {
                    result: Err(maar_scheduler::ClusterError::DuplicateJob {
                        project: spec.project.clone(),
                        name: spec.name.clone(),
                    }),
                    job: None,
                    events: Vec::new(),
                    decisions: Vec::new(),
                };
            }
            let Some((kind, plural, object)) = Self::object_of(spec) else {
                return cannot_make(spec);
            };
            let job = format!("{}/{}", spec.project, spec.name);
            // Made now, the API server's answer awaited: a dispatch among clusters
            // learns at once whether the cluster took it (detached: kept to be sent).
            let made = match &self.world {
                Some(w) => w.create_now(&job, kind, plural, &object, CREATE_WITHIN),
                None => {
                    self.unsent.push(Write::CreateObject {
                        job: job.clone(),
                        kind: kind.into(),
                        plural: plural.into(),
                        object,
                    });
                    Ok(())
                }
            };
            let result = match made {
                Ok(()) => Ok(format!(
                    "{kind} {job} sent to the cluster: maar schedules it when the watch brings it"
                )),
                Err(e) => Err(maar_scheduler::ClusterError::Invalid(format!(
                    "{kind} {job} was not made in the cluster: {e}"
                ))),
            };
            return Output {
                result,
                job: None,
                events: Vec::new(),
                decisions: Vec::new(),
            };
        }
        let mut writes = Vec::new();
        let effect = Self::in_cluster(&command);
        // A command on a node is in force in the cluster before it is acknowledged:
        // written now, and refused (nothing applied) when the API server does not
        // take it.
        let mut sent = false;
        // (Only a command the core takes is written: tried on a copy first, so that a
        // refused one changes nothing in the cluster either.)
        let node_write = Self::node_write(core, &command).filter(|_| {
            let mut trial = core.clone();
            trial
                .apply(Input::Command {
                    actor: actor.clone(),
                    command: command.clone(),
                })
                .is_ok()
        });
        if let (Some(w), Some(write)) = (&self.world, node_write) {
            let what = crate::world::describe(&write);
            if let Err(e) = w.write_now(write, NODE_WRITE_WITHIN) {
                // Not acknowledged. A request the server did not answer (or answered
                // with a server error) may still be carried out: the watch then shows
                // it, and maar follows what the cluster shows.
                return Output {
                    result: Err(maar_scheduler::ClusterError::Invalid(format!(
                        "not acknowledged: {what} did not succeed in the cluster ({e}); maar's books are unchanged, and if the API server carries the request out after all, the node shows it and maar follows; give the command again once the API server answers"
                    ))),
                    job: None,
                    events: Vec::new(),
                    decisions: Vec::new(),
                };
            }
            sent = true;
        }
        let mut out = core.apply(Input::Command { actor, command });
        if out.is_ok() {
            self.write_effect(core, effect, sent, &mut writes);
            let mut events = std::mem::take(&mut out.events);
            let decisions = out.decisions.clone();
            self.carry_out(core, &decisions, &mut writes);
            self.drop_foreign(core, &mut events);
            self.settle(core, &mut events, &mut writes);
            self.hold_for_vacating(core, &mut writes);
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
        Box::new(maar_scheduler::kit::Bare)
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
/// A command as a Kubernetes cluster takes it: a submit only of a file maar can make
/// there (a TrainJob or InferenceService), the same live and offline.
fn localize(_: &Core, command: Command) -> Result<Command, Output> {
    match &command {
        Command::Submit(spec) if KubeDriver::object_of(spec).is_none() => Err(cannot_make(spec)),
        _ => Ok(command),
    }
}

/// The refusal of a submitted file maar cannot make in the cluster (a Pod, a
/// Deployment): the user applies it.
fn cannot_make(spec: &maar_scheduler::JobSpec) -> Output {
    Output {
        result: Err(maar_scheduler::ClusterError::Invalid(match &spec.kind {
            // A Deployment (+ HPA): kubectl makes it, and maar sees its pods only when
            // their template names it.
            maar_scheduler::model::JobKind::Inference(_) => format!(
                "job {}: on Kubernetes, maar schedules what is in the cluster: apply the Deployment with `kubectl apply -f`, its pod template with `schedulerName: maar` (without it kube-scheduler places its pods, not maar); or write it as an InferenceService (crater.ai/v1), which `maar submit` makes and maar scales",
                spec.name
            ),
            _ => format!(
                "job {}: on Kubernetes, maar schedules what is in the cluster: apply the pod with `kubectl apply -f`, with `schedulerName: maar`; or write it as a TrainJob (crater.ai/v1), which `maar submit` makes",
                spec.name
            ),
        })),
        job: None,
        events: Vec::new(),
        decisions: Vec::new(),
    }
}

/// How long a command on a node waits for the API server (less than the command
/// line's own wait, so that it hears the refusal).
const NODE_WRITE_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a submit waits for the API server to make its object.
const CREATE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The recorded cluster with no API server attached: a look at its past, a dry run.
/// A command is refused (`world_read_anew`): nothing would carry it out, and the next
/// start reads the cluster anew.
pub fn offline() -> maar_scheduler::kit::Offline {
    maar_scheduler::kit::Offline::new("kube", Some(localize)).read_anew()
}
