//! The async side of the Kubernetes backend: watchers whose events reach the (sync)
//! driver through a channel, and the writes maar makes.
//!
//! - Nodes, pods (one namespace or all) and namespaces are watched with kube-rs's
//!   `watcher` (list, then watch; relisted after a dropped watch, with back-off). A
//!   relist is told to the driver as `Init` .. `InitDone`, so objects deleted while the
//!   watch was down are seen as gone.
//! - Writes run concurrently (at most [`MAX_WRITES`] at once): a bind (the Binding
//!   subresource, the GPU indices riding on it as an annotation), a pod that cannot be
//!   placed (`PodScheduled=False`, reason `Unschedulable`, with maar's explanation, and
//!   a `FailedScheduling` event), a preempted pod deleted. Their outcome comes back on
//!   the same channel.
//! - A bound pod's `Scheduled` event is written after the writes waiting then: binds
//!   first. At most [`MAX_QUEUED_EVENTS`] wait; past that they are not written and
//!   counted ([`Seen::EventsDropped`]), as client-go's event broadcaster (which
//!   kube-scheduler uses) drops events when its queue of 1,000 is full.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node as KNode, ObjectReference, Pod as KPod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::json;

use crate::map::{self, Owner, PodState, ANNOTATION_GPUS};

/// Writes in flight at most.
pub const MAX_WRITES: usize = 64;
/// `Scheduled` events waiting to be written at most (client-go's event broadcaster
/// queues as many); more are not written.
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// Longest event note the API server takes (events.k8s.io/v1 `note`).
const MAX_NOTE: usize = 1024;

/// Writes events (events.k8s.io/v1), as `kubectl describe` shows them. Each is one
/// create: maar tells a waiting pod again only when its reason changes or every few
/// minutes (the driver's rate), so no cache of past events is kept (kube-runtime's
/// `Recorder` scans its whole cache on every event: quadratic over thousands of pods).
#[derive(Clone)]
pub struct Events {
    client: Client,
    instance: String,
}

/// An event's severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl Events {
    pub fn new(client: Client, instance: &str) -> Events {
        Events {
            client,
            instance: instance.to_string(),
        }
    }

    /// Writes one event about `regarding`.
    pub async fn publish(
        &self,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let ns = regarding.namespace.as_deref().unwrap_or("default");
        let now = chrono::Utc::now();
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or("maar"),
            now.timestamp_nanos_opt().unwrap_or_default()
        );
        let note = cut_note(note);
        let ev = EventBody {
            api_version: "events.k8s.io/v1",
            kind: "Event",
            metadata: EventMeta {
                name: &name,
                namespace: ns,
            },
            event_time: now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            type_: match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            },
            reason,
            action,
            note: &note,
            regarding,
            reporting_controller: "maar",
            reporting_instance: &self.instance,
        };
        // Serialized as built (no JSON tree first) and posted; the answer is not
        // parsed: thousands of pods are told at once.
        let body = serde_json::to_vec(&ev).map_err(kube::Error::SerdeError)?;
        let req =
            kube::core::Request::new(format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"))
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)?;
        self.client.request_text(req).await.map(|_| ())
    }
}

/// An events.k8s.io/v1 Event as maar posts it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EventBody<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: EventMeta<'a>,
    event_time: String,
    #[serde(rename = "type")]
    type_: &'static str,
    reason: &'a str,
    action: &'a str,
    note: &'a str,
    regarding: &'a ObjectReference,
    reporting_controller: &'static str,
    reporting_instance: &'a str,
}

#[derive(serde::Serialize)]
struct EventMeta<'a> {
    name: &'a str,
    namespace: &'a str,
}

/// A pod's Binding (the `binding` subresource), with the cards as an annotation (the
/// API server merges the binding's annotations into the pod).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct BindingBody<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: BindingMeta<'a>,
    target: BindingTarget<'a>,
}

#[derive(serde::Serialize)]
struct BindingMeta<'a> {
    name: &'a str,
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<&'static str, String>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct BindingTarget<'a> {
    api_version: &'static str,
    kind: &'static str,
    name: &'a str,
}

/// A change the watch saw, in the order it saw them (per kind).
#[derive(Clone, Debug)]
pub enum Watched<K> {
    /// Added or changed.
    Apply(K),
    /// Deleted.
    Delete(K),
    /// A (re)list starts: what follows until `InitDone` is the whole set.
    Init,
    InitApply(K),
    InitDone,
}

/// What a pod is, as far as maar cares (mapped on the async side so the driver holds
/// no full objects).
#[derive(Clone, Debug)]
pub struct PodSeen {
    /// `namespace/name`.
    pub key: String,
    pub uid: String,
    /// Scheduled by maar (`schedulerName: maar`).
    pub ours: bool,
    pub node: Option<String>,
    pub state: PodState,
    /// The job it is (maar's pods only), or why it cannot be one.
    pub spec: Option<Result<maar_scheduler::JobSpec, maar_scheduler::manifest::SpecError>>,
    /// GPU indices maar annotated when it bound the pod.
    pub gpus: Vec<u32>,
    /// The TrainJob or InferenceService it runs a replica of (maar created it), by
    /// name.
    pub owner: Option<String>,
    /// When it was created (`metadata.creationTimestamp`), in nanoseconds: pods found
    /// at a list queue in this order, as kube-scheduler's queue takes them.
    pub created: i128,
}

impl PodSeen {
    /// The pod, with its job read (maar's pods, and other schedulers' once bound).
    pub fn of(p: &KPod) -> PodSeen {
        Self::of_unless(p, &mut std::collections::HashSet::new(), None)
    }

    /// As [`PodSeen::of`], reading the job only for a pod whose uid is not in `read`
    /// yet (then added): the driver needs a pod's job once, and a pod changes several
    /// times on its way (bound, started, ended). With `scope` (a maar of one
    /// namespace), maar's pods of other namespaces are another maar's: seen as other
    /// schedulers' pods are (what they hold once bound counts).
    pub fn of_unless(
        p: &KPod,
        read: &mut std::collections::HashSet<String>,
        scope: Option<&str>,
    ) -> PodSeen {
        Self::seen(p, read, scope, || map::job_of(p))
    }

    /// As [`PodSeen::of_unless`], for a pod as the watch reads it (its job read from
    /// the spec's text).
    pub fn of_slim(
        mut p: SlimPod,
        read: &mut std::collections::HashSet<String>,
        scope: Option<&str>,
    ) -> PodSeen {
        // Taken, not copied: every watch event passes here.
        let text = p.spec_text.take();
        let pod = p.into_pod();
        Self::seen(&pod, read, scope, || {
            map::job_of_text(&pod.metadata, text.as_deref().map(|t| t.get()))
        })
    }

    fn seen(
        p: &KPod,
        read: &mut std::collections::HashSet<String>,
        scope: Option<&str>,
        job: impl FnOnce() -> Result<maar_scheduler::JobSpec, maar_scheduler::manifest::SpecError>,
    ) -> PodSeen {
        let ours = map::is_ours(p)
            && scope.is_none_or(|ns| p.metadata.namespace.as_deref().unwrap_or("default") == ns);
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let wanted = ours || map::pod_node(p).is_some();
        let first = wanted && (uid.is_empty() || read.insert(uid));
        PodSeen {
            key: map::pod_key(p),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            ours,
            owner: p
                .metadata
                .labels
                .as_ref()
                .and_then(map::pod_owner)
                .map(|(_, name)| name),
            node: map::pod_node(p).map(str::to_string),
            created: p
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_nanosecond())
                .unwrap_or_default(),
            state: map::pod_state(p),
            // maar's pods, and pods of other schedulers once bound (what they hold on
            // their node counts); once.
            spec: first.then(job),
            gpus: p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_GPUS))
                .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
                .unwrap_or_default(),
        }
    }
}

/// A pod as the watch reads it: only the fields maar reads (the `map` functions and,
/// once per pod, its job). The rest (`managedFields` above all, volumes, env, probes)
/// is skipped unread: decoding whole pods was a good part of the CPU a watched pod
/// cost. The spec is kept as the API server's text and read in full only for the
/// pod's job ([`SlimPod::job`]; a pod changes several times on its way, and only its
/// node changes in the spec); otherwise only who schedules it and its node are read.
/// A test checks that a pod read so is seen as the whole pod is.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(try_from = "SlimRead")]
pub struct SlimPod {
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// Its scheduler name and node only.
    pub spec: Option<k8s_openapi::api::core::v1::PodSpec>,
    pub status: Option<k8s_openapi::api::core::v1::PodStatus>,
    spec_text: Option<Box<serde_json::value::RawValue>>,
}

#[derive(serde::Deserialize)]
struct SlimRead {
    #[serde(deserialize_with = "slim_meta", default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    spec: Option<Box<serde_json::value::RawValue>>,
    #[serde(deserialize_with = "slim_status", default)]
    status: Option<k8s_openapi::api::core::v1::PodStatus>,
}

/// The spec fields read on every change: who schedules the pod and its node.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecHead {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    node_name: Option<String>,
}

impl TryFrom<SlimRead> for SlimPod {
    type Error = serde_json::Error;

    fn try_from(r: SlimRead) -> Result<SlimPod, serde_json::Error> {
        let head = match &r.spec {
            Some(text) => Some(serde_json::from_str::<SpecHead>(text.get())?),
            None => None,
        };
        Ok(SlimPod {
            metadata: r.metadata,
            spec: head.map(|h| k8s_openapi::api::core::v1::PodSpec {
                scheduler_name: h.scheduler_name,
                node_name: h.node_name,
                ..Default::default()
            }),
            status: r.status,
            spec_text: r.spec,
        })
    }
}

/// The status fields maar reads: the phase, why it failed, the containers' (last)
/// terminations (an OOMKilled one).
#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct StatusRead {
    phase: Option<String>,
    message: Option<String>,
    reason: Option<String>,
    container_statuses: Option<Vec<ContainerStatusRead>>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatusRead {
    state: Option<k8s_openapi::api::core::v1::ContainerState>,
    last_state: Option<k8s_openapi::api::core::v1::ContainerState>,
}

fn slim_status<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<k8s_openapi::api::core::v1::PodStatus>, D::Error> {
    use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};
    let Some(s) = <Option<StatusRead> as serde::Deserialize>::deserialize(d)? else {
        return Ok(None);
    };
    Ok(Some(PodStatus {
        phase: s.phase,
        message: s.message,
        reason: s.reason,
        container_statuses: s.container_statuses.map(|cs| {
            cs.into_iter()
                .map(|c| ContainerStatus {
                    state: c.state,
                    last_state: c.last_state,
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    }))
}

impl SlimPod {
    /// The pod, its spec cut to its scheduler name and node.
    pub fn into_pod(self) -> KPod {
        KPod {
            metadata: self.metadata,
            spec: self.spec,
            status: self.status,
        }
    }

    /// Its job, read from the spec as the API server sent it (see [`map::job_of`]).
    pub fn job(&self) -> Result<maar_scheduler::JobSpec, maar_scheduler::manifest::SpecError> {
        map::job_of_text(
            &self.metadata,
            self.spec_text
                .as_deref()
                .map(serde_json::value::RawValue::get),
        )
    }
}

/// The metadata fields maar reads (the rest, `managedFields` above all, is skipped
/// unread).
#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetaRead {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

fn slim_meta<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, D::Error> {
    let m = <MetaRead as serde::Deserialize>::deserialize(d)?;
    Ok(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        annotations: m.annotations,
        owner_references: m.owner_references,
        deletion_timestamp: m.deletion_timestamp,
        creation_timestamp: m.creation_timestamp,
        ..Default::default()
    })
}

impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

/// A TrainJob or an InferenceService, as far as maar cares.
#[derive(Clone, Debug)]
pub struct ObjectSeen {
    pub owner: Owner,
    /// `namespace/name`.
    pub key: String,
    pub uid: String,
    pub spec: Result<maar_scheduler::JobSpec, maar_scheduler::manifest::SpecError>,
    /// Its labels (its pods carry them).
    pub labels: BTreeMap<String, String>,
    /// An InferenceService: the selector of its load metric's series.
    pub selector: String,
    /// Its status says it ended (Succeeded, Failed, Cancelled): history, not work.
    pub ended: bool,
}

impl ObjectSeen {
    pub fn of(owner: Owner, o: &DynamicObject) -> ObjectSeen {
        ObjectSeen {
            owner,
            key: format!(
                "{}/{}",
                o.metadata.namespace.as_deref().unwrap_or("default"),
                o.metadata.name.as_deref().unwrap_or_default()
            ),
            uid: o.metadata.uid.clone().unwrap_or_default(),
            spec: map::object_of(o).and_then(|s| {
                // The kind the object says must be the kind watched (a TrainJob's
                // spec is not read as a service's).
                let is_service = matches!(s.kind, maar_scheduler::model::JobKind::Inference(_));
                if is_service == (owner == Owner::InferenceService) {
                    Ok(s)
                } else {
                    Err(maar_scheduler::manifest::SpecError {
                        field: "kind".into(),
                        message: format!("this object is served as a {}", owner.kind()),
                    })
                }
            }),
            labels: o.metadata.labels.clone().unwrap_or_default(),
            selector: map::load_selector(o),
            ended: o
                .data
                .get("status")
                .and_then(|s| s.get("phase"))
                .and_then(|p| p.as_str())
                .is_some_and(|p| matches!(p, "Succeeded" | "Failed" | "Cancelled")),
        }
    }
}

/// What the world tells the driver.
#[derive(Debug)]
pub enum Seen {
    /// A waiting job's reason (its pod's condition and event) or an object's status
    /// could not be written: to be written again.
    NotTold {
        job: String,
    },
    /// A waiting job's expected start could not be written: written with the next
    /// forecast.
    StartNotTold {
        job: String,
    },
    Node(Watched<Box<KNode>>),
    Pod(Watched<Box<PodSeen>>),
    Namespace(Watched<String>),
    /// A TrainJob or an InferenceService (each kind's watch lists on its own).
    Object(Owner, Watched<Box<ObjectSeen>>),
    /// An InferenceService's load: the mean of its metric's series (`None`: no
    /// series), or why it could not be read.
    Load {
        job: String,
        value: Result<Option<f64>, String>,
    },
    /// A Pool object (or why it cannot be one: its name and the error).
    Pool(Watched<Result<map::PoolObject, (String, String)>>),
    /// A Quota object (or why it cannot be one: its `namespace/name` and the error).
    Quota(Watched<Result<map::QuotaObject, (String, String)>>),
    /// A QuotaRequest object (or why it cannot be one).
    QuotaRequest(Watched<Result<map::QuotaRequestObject, (String, String)>>),
    /// A bind's outcome for job `job` (`namespace/name`).
    Bound {
        job: String,
        result: Result<(), String>,
    },
    /// A watch failed (it is retried with back-off) or a write failed.
    Trouble(String),
    /// Who schedules changed (the lease): what is true now.
    Lease(String),
    /// This many bound pods' `Scheduled` events were not written: more than
    /// [`MAX_QUEUED_EVENTS`] waited behind binds (told once the queue is empty).
    EventsDropped(u64),
}

/// A write maar makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Bind pod `job` (`namespace/name`, `uid`) to `node`, on cards `gpus`.
    Bind {
        job: String,
        uid: String,
        node: String,
        gpus: Vec<u32>,
    },
    /// Pod (or maar's object `object`) `job` cannot be placed now: `message` (maar's
    /// explanation).
    Unschedulable {
        job: String,
        uid: String,
        message: String,
        object: Option<Owner>,
    },
    /// Create pods of `owner` `job` (`uid`), bound to their nodes (all or none);
    /// answered as a bind.
    CreatePods {
        owner: Owner,
        job: String,
        uid: String,
        /// The object's labels, which its pods carry.
        labels: BTreeMap<String, String>,
        spec: Box<maar_scheduler::JobSpec>,
        pods: Vec<NewPod>,
        /// How many replicas the job has in all (`MAAR_REPLICAS`).
        of: usize,
        /// Answered as a bind (new placements); else pods made again where the job
        /// already runs (a replica's pod was deleted), whose failure is trouble.
        answer: bool,
    },
    /// Delete pods of `owner` `job`, those named (each by name: a delete never takes a
    /// pod made after it was decided).
    DeletePods {
        owner: Owner,
        job: String,
        pods: Vec<String>,
        reason: String,
    },
    /// Read the load of InferenceService `job`: the external metric
    /// `crater_gpu_memory_usage_rate` over the series `selector` picks (what an HPA
    /// reads); answered with [`Seen::Load`].
    ReadLoad { job: String, selector: String },
    /// A QuotaRequest's status: `phase` (Pending, Approved, Rejected), maar's request
    /// number and what it says.
    QuotaRequestStatus {
        key: String,
        phase: String,
        id: u32,
        message: String,
    },
    /// A project's quota in a pool as maar holds it now (an approved request): written
    /// to the Quota object `name` in the project's namespace (made when there is none).
    QuotaObject {
        project: String,
        name: String,
        pool: String,
        reserved_gpus: f64,
        max_gpus: Option<f64>,
    },
    /// A TrainJob's or InferenceService's status: `phase` (Pending, Running,
    /// Succeeded, Failed, Cancelled), why, its nodes and replicas running.
    ObjectStatus {
        owner: Owner,
        job: String,
        phase: String,
        message: String,
        nodes: Vec<String>,
    },
    /// A waiting pod's (or maar's object's) expected start: in `in_s` seconds from
    /// now (`None`: not known, or never), on `basis` (`estimate`, `history`, `never`,
    /// `unknown`). A pod's annotations [`map::ANNOTATION_EXPECTED_START`] (UTC,
    /// RFC 3339; removed when not known) and [`map::ANNOTATION_EXPECTED_BASIS`]; an
    /// object's `status.expectedStart` and `status.expectedStartBasis`.
    ExpectedStart {
        job: String,
        uid: String,
        object: Option<Owner>,
        in_s: Option<u64>,
        basis: &'static str,
    },
    /// Delete pod `job` (preempted, drained, cancelled by an operator): `reason`.
    Delete { job: String, reason: String },
    /// Cordon (`on`) or uncordon a node: `spec.unschedulable`, as `kubectl cordon`.
    Cordon { node: String, on: bool },
    /// Set and remove labels of a node, as `kubectl label node` does.
    Labels {
        node: String,
        set: BTreeMap<String, String>,
        remove: Vec<String>,
    },
    /// The node's cordoned GPUs, all of them (its `crater.ai/cordoned-gpus`
    /// annotation; removed when empty).
    GpuCordons { node: String, gpus: Vec<u32> },
    /// An event of maar's own about an object (a Quota or Pool it cannot use, an
    /// edited TrainJob, its Lease when it has trouble with the API server).
    Note {
        regarding: ObjectReference,
        warning: bool,
        reason: String,
        message: String,
    },
}

/// One pod to make: its name, its replica number and where it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct NewPod {
    pub name: String,
    pub index: usize,
    pub at: maar_scheduler::input::Binding,
}

fn split(job: &str) -> (&str, &str) {
    job.split_once('/').unwrap_or(("default", job))
}

/// The async side, on a thread and a runtime of its own.
pub struct World {
    /// Stops the runtime's thread (dropped: stops it too).
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    writes: tokio::sync::mpsc::UnboundedSender<Write>,
    seen: mpsc::Receiver<Seen>,
    /// This maar holds the scheduling lease.
    leader: Arc<std::sync::atomic::AtomicBool>,
}

impl World {
    /// Connects (see [`crate::connect()`]) and starts the watchers and the writer, on a
    /// runtime of their own (the client lives on it).
    pub fn connect(
        opts: &crate::ConnectOptions,
    ) -> Result<(World, crate::Connected), crate::KubeError> {
        // One thread runs it all: the watches and writes wait on the API server, not on
        // CPU. Two workers cost about 15% more CPU per bound pod in hand-offs between
        // them, and one worker beside the thread that drives it still more than this
        // (BENCHMARKS.md), for no more binds a second.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| crate::KubeError::Config(format!("cannot start: {e}")))?;
        let conn = rt.block_on(crate::connect(opts))?;
        let (tx, seen) = mpsc::channel();
        let (writes, wrx) = tokio::sync::mpsc::unbounded_channel();
        let leader = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // One lease per scheduler name, whatever namespace a maar schedules: two
        // maars of one name never both lead (kube-scheduler's lease is in kube-system
        // too).
        let lease_ns = crate::lease::NAMESPACE.to_string();
        let me = format!(
            "{}_{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "maar".into()),
            std::process::id()
        );
        let (lease, writes_task) = {
            let _guard = rt.enter();
            spawn_watchers(&conn.client, conn.namespace.clone(), tx.clone());
            let t = tx.clone();
            let lease = tokio::spawn(crate::lease::run(
                conn.client.clone(),
                lease_ns.clone(),
                me.clone(),
                leader.clone(),
                move |m| {
                    let _ = t.send(Seen::Lease(m));
                },
            ));
            let writes = tokio::spawn(writer(
                conn.client.clone(),
                wrx,
                tx,
                WriterLimits::default(),
            ));
            (lease, writes)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (client, held) = (conn.client.clone(), leader.clone());
        let thread = std::thread::Builder::new()
            .name("maar-kube".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
                // No more writes and no more renewals: then the lease is given up, so
                // that another maar schedules at once (not after the lease runs out),
                // and never while this one still writes.
                rt.block_on(async {
                    for task in [writes_task, lease] {
                        task.abort();
                        let _ = task.await;
                    }
                });
                if held.load(std::sync::atomic::Ordering::SeqCst) {
                    let api = Api::namespaced(client, &lease_ns);
                    let release = crate::lease::release(&api, &me);
                    // The timer is made inside the runtime (it needs its clock).
                    let within = async {
                        tokio::time::timeout(std::time::Duration::from_secs(2), release).await
                    };
                    match rt.block_on(within) {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(target: "maar::kube", "giving the lease up: {e}")
                        }
                        Err(_) => {
                            tracing::warn!(target: "maar::kube", "giving the lease up: no answer within 2 s")
                        }
                    }
                }
                rt.shutdown_timeout(std::time::Duration::from_secs(2));
            })
            .map_err(|e| crate::KubeError::Config(format!("cannot start: {e}")))?;
        Ok((
            World {
                stop: Some(stop),
                thread: Some(thread),
                writes,
                seen,
                leader,
            },
            conn,
        ))
    }

    /// This maar holds the scheduling lease (schedules and writes).
    pub fn is_leader(&self) -> bool {
        self.leader.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The next thing seen, if any (never waits).
    pub fn try_next(&self) -> Option<Seen> {
        self.seen.try_recv().ok()
    }

    /// Queues a write.
    pub fn write(&self, w: Write) {
        let _ = self.writes.send(w);
    }

    /// Waits up to `d` for the first thing seen (start-up: the first lists).
    pub fn next_within(&self, d: std::time::Duration) -> Option<Seen> {
        self.seen.recv_timeout(d).ok()
    }

    /// Stops the watchers and drops writes not yet made.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn forward<K, T>(ev: watcher::Event<K>, mut f: impl FnMut(K) -> T) -> Watched<T> {
    match ev {
        watcher::Event::Apply(k) => Watched::Apply(f(k)),
        watcher::Event::Delete(k) => Watched::Delete(f(k)),
        watcher::Event::Init => Watched::Init,
        watcher::Event::InitApply(k) => Watched::InitApply(f(k)),
        watcher::Event::InitDone => Watched::InitDone,
    }
}

/// One of maar's own resources whose watch cannot run (see [`unavailable`]): the
/// message that says its first list is done, and whether a missing CRD is said too (a
/// forbidden one always is).
struct Own {
    kind: &'static str,
    done: Seen,
    say_missing: bool,
}

/// Runs one watch on its own task: each event becomes what `seen` makes of it, a
/// failure is told and retried with back-off; one of maar's own resources (`own`) that
/// cannot be watched at all is done without.
fn spawn_watch<K>(
    api: Api<K>,
    what: &'static str,
    mut own: Option<Own>,
    tx: mpsc::Sender<Seen>,
    mut seen: impl FnMut(watcher::Event<K>) -> Seen + Send + 'static,
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send,
{
    tokio::spawn(async move {
        let mut s = watcher(api, watcher::Config::default())
            .backoff(watch_backoff())
            .boxed();
        while let Some(ev) = s.next().await {
            let msg = match ev {
                Ok(ev) => seen(ev),
                Err(e) => match (own.is_some(), unavailable(&e)) {
                    (true, Some(why)) => {
                        let o = own.take().expect("checked");
                        if o.say_missing || why == UNAVAILABLE_FORBIDDEN {
                            let _ = tx
                                .send(Seen::Trouble(format!("{} are not watched: {why}", o.kind)));
                        }
                        let _ = tx.send(o.done);
                        break;
                    }
                    _ => Seen::Trouble(format!("watching {what}: {e}")),
                },
            };
            if tx.send(msg).is_err() {
                break;
            }
        }
    });
}

/// How a failed watch is retried: from 0.5 s, doubling up to 3 s, with jitter (so at
/// most about 6 s apart), reset after two minutes without an error. kube-rs's default
/// (client-go's reflector: up to 30 s) left maar up to a minute behind an API server
/// that came back after 20 s; a scheduler must see the cluster again within seconds.
pub fn watch_backoff() -> impl kube::runtime::utils::Backoff {
    let b = backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(500))
        .with_max_delay(std::time::Duration::from_secs(3))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    kube::runtime::utils::ResetTimerBackoff::new(
        kube::runtime::watcher::ExponentialBackoff::from(b),
        std::time::Duration::from_secs(120),
    )
}

/// One of maar's resources in the namespace watched, or in all.
fn crd_api(
    client: &Client,
    namespace: &Option<String>,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let r = map::crd(kind, plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

/// An object maar cannot read: its `namespace/name` (its name when cluster-scoped) and
/// the field that is wrong.
fn unreadable(o: &DynamicObject, e: maar_scheduler::manifest::SpecError) -> (String, String) {
    let name = o.metadata.name.clone().unwrap_or_default();
    let key = match &o.metadata.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    };
    (key, format!("{}: {}", e.field, e.message))
}

/// Watches nodes, pods, namespaces and maar's own resources; every event (and every
/// watch error) is sent on.
pub fn spawn_watchers(client: &Client, namespace: Option<String>, tx: mpsc::Sender<Seen>) {
    // Every pod that holds node resources counts, whatever namespace maar schedules:
    // a maar of one namespace that saw only its own would book cards other pods hold.
    let pods: Api<SlimPod> = Api::all(client.clone());
    let scope = namespace.clone();
    spawn_watch(
        Api::<KNode>::all(client.clone()),
        "nodes",
        None,
        tx.clone(),
        |ev| Seen::Node(forward(ev, Box::new)),
    );
    let mut read = std::collections::HashSet::new();
    spawn_watch(pods, "pods", None, tx.clone(), move |ev| match ev {
        watcher::Event::Delete(p) => {
            // Gone: its job is not read, and its uid is forgotten.
            let uid = p.metadata.uid.clone().unwrap_or_default();
            read.remove(&uid);
            let mut skip = std::collections::HashSet::from([uid]);
            Seen::Pod(Watched::Delete(Box::new(PodSeen::of_slim(
                p,
                &mut skip,
                scope.as_deref(),
            ))))
        }
        ev => Seen::Pod(forward(ev, |p| {
            Box::new(PodSeen::of_slim(p, &mut read, scope.as_deref()))
        })),
    });
    for owner in Owner::ALL {
        let what = match owner {
            Owner::TrainJob => "TrainJobs",
            Owner::InferenceService => "InferenceServices",
        };
        spawn_watch(
            crd_api(client, &namespace, owner.kind(), owner.plural()),
            what,
            Some(Own {
                kind: what,
                done: Seen::Object(owner, Watched::InitDone),
                say_missing: true,
            }),
            tx.clone(),
            move |ev| Seen::Object(owner, forward(ev, |o| Box::new(ObjectSeen::of(owner, &o)))),
        );
    }
    // No Pool objects: pools come from the nodes' roles.
    spawn_watch(
        crd_api(client, &None, "Pool", "pools"),
        "pools",
        Some(Own {
            kind: "Pools",
            done: Seen::Pool(Watched::InitDone),
            say_missing: false,
        }),
        tx.clone(),
        |ev| {
            Seen::Pool(forward(ev, |o| {
                map::pool_of(&o).map_err(|e| unreadable(&o, e))
            }))
        },
    );
    // No Quota objects: projects are open.
    spawn_watch(
        crd_api(client, &namespace, "Quota", "quotas"),
        "quotas",
        Some(Own {
            kind: "Quotas",
            done: Seen::Quota(Watched::InitDone),
            say_missing: false,
        }),
        tx.clone(),
        |ev| {
            Seen::Quota(forward(ev, |o| {
                map::quota_of(&o).map_err(|e| unreadable(&o, e))
            }))
        },
    );
    spawn_watch(
        crd_api(client, &namespace, "QuotaRequest", "quotarequests"),
        "quota requests",
        Some(Own {
            kind: "QuotaRequests",
            done: Seen::QuotaRequest(Watched::InitDone),
            say_missing: false,
        }),
        tx.clone(),
        |ev| {
            Seen::QuotaRequest(forward(ev, |o| {
                map::quota_request_of(&o).map_err(|e| unreadable(&o, e))
            }))
        },
    );
    match namespace {
        // One namespace: that is the one project.
        Some(ns) => {
            let _ = tx.send(Seen::Namespace(Watched::Apply(ns)));
        }
        None => spawn_watch(
            Api::<Namespace>::all(client.clone()),
            "namespaces",
            None,
            tx,
            |ev| {
                Seen::Namespace(forward(ev, |n: Namespace| {
                    n.metadata.name.unwrap_or_default()
                }))
            },
        ),
    }
}

const UNAVAILABLE_MISSING: &str =
    "its resource is not installed (kubectl apply -f deploy/crds.yaml)";
const UNAVAILABLE_FORBIDDEN: &str =
    "maar may not list it (403); bind maar's ClusterRole (deploy/rbac.yaml)";

/// Why a watch of one of maar's own resources cannot run at all: its CRD is not
/// installed, or maar may not list it. Such a resource is done without (its first list
/// counts as done, so nothing waits for it), and said once.
fn unavailable(e: &watcher::Error) -> Option<&'static str> {
    let t = e.to_string();
    if t.contains("404") || t.contains("the server could not find the requested resource") {
        Some(UNAVAILABLE_MISSING)
    } else if t.contains("403") || t.to_lowercase().contains("forbidden") {
        Some(UNAVAILABLE_FORBIDDEN)
    } else {
        None
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// How many writes the writer keeps in flight, and how many `Scheduled` events wait.
#[derive(Clone, Copy, Debug)]
pub struct WriterLimits {
    pub in_flight: usize,
    pub queued_events: usize,
}

impl Default for WriterLimits {
    fn default() -> Self {
        WriterLimits {
            in_flight: MAX_WRITES,
            queued_events: MAX_QUEUED_EVENTS,
        }
    }
}

/// Carries out writes, all in this one task (a task a write cost more in hand-offs
/// than the write itself): the writes waiting first, then bound pods' `Scheduled`
/// events (see the module's notes).
pub async fn writer(
    client: Client,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Write>,
    tx: mpsc::Sender<Seen>,
    limits: WriterLimits,
) {
    type Running<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = Option<Scheduled>> + Send + 'a>>;
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "maar".into());
    let recorder = Events::new(client.clone(), &host);
    let (client, recorder, tx) = (&client, &recorder, &tx);
    let mut running: futures::stream::FuturesUnordered<Running<'_>> =
        futures::stream::FuturesUnordered::new();
    let mut events: std::collections::VecDeque<Scheduled> = Default::default();
    let mut dropped = 0u64;
    let mut open = true;
    let in_flight = limits.in_flight.max(1);
    loop {
        // Writes first; an event only when no write waits.
        while running.len() < in_flight {
            if open {
                match rx.try_recv() {
                    Ok(w) => {
                        running.push(Box::pin(write_one(client, recorder, tx, w)));
                        continue;
                    }
                    Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => open = false,
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
                }
            }
            let Some(e) = events.pop_front() else {
                break;
            };
            running.push(Box::pin(async move {
                e.publish(recorder).await;
                None
            }));
        }
        if events.is_empty() && dropped > 0 {
            let _ = tx.send(Seen::EventsDropped(dropped));
            dropped = 0;
        }
        if !open && running.is_empty() {
            break;
        }
        tokio::select! {
            w = rx.recv(), if open && running.len() < in_flight => match w {
                Some(w) => running.push(Box::pin(write_one(client, recorder, tx, w))),
                None => open = false,
            },
            Some(done) = running.next(), if !running.is_empty() => {
                if let Some(e) = done {
                    if events.len() < limits.queued_events {
                        events.push_back(e);
                    } else {
                        dropped += 1;
                    }
                }
            }
        }
    }
}

/// One write, its answer sent back when the driver waits for one. A bind done returns
/// its `Scheduled` event, to be written later.
async fn write_one(
    client: &Client,
    recorder: &Events,
    tx: &mpsc::Sender<Seen>,
    w: Write,
) -> Option<Scheduled> {
    use futures::FutureExt;
    // All writes share one task: one that panics is told (a bind as failed, so that
    // the job goes back to the queue) and the others go on.
    let (bind, what) = match &w {
        Write::Bind { job, .. } => (Some(job.clone()), None),
        w => (None, Some(describe(w))),
    };
    match std::panic::AssertUnwindSafe(write_inner(client, recorder, tx, w))
        .catch_unwind()
        .await
    {
        Ok(e) => e,
        Err(_) => {
            let what =
                what.unwrap_or_else(|| format!("binding pod {}", bind.as_deref().unwrap_or("?")));
            let why = format!("{what}: the write failed inside maar (a bug: please report it)");
            tracing::error!(target: "maar::kube", "{why}");
            let _ = tx.send(match bind {
                Some(job) => Seen::Bound {
                    job,
                    result: Err(why),
                },
                None => Seen::Trouble(why),
            });
            None
        }
    }
}

async fn write_inner(
    client: &Client,
    recorder: &Events,
    tx: &mpsc::Sender<Seen>,
    w: Write,
) -> Option<Scheduled> {
    if let Write::ReadLoad { job, selector } = &w {
        let _ = tx.send(read_load(client, job, selector).await);
        return None;
    }
    if let Write::Bind {
        job,
        uid,
        node,
        gpus,
    } = w
    {
        let result = bind(client, &job, &uid, &node, &gpus).await;
        let ok = result.is_ok();
        let _ = tx.send(Seen::Bound {
            job: job.clone(),
            result,
        });
        return ok.then_some(Scheduled { job, uid, node });
    }
    // Boxed: thousands of binds in flight do not each carry the largest write's state.
    let out = Box::pin(carry_out(client, recorder, &w)).await;
    let msg = match (&w, out) {
        (
            Write::CreatePods {
                job, answer: true, ..
            },
            result,
        ) => Seen::Bound {
            job: job.clone(),
            result,
        },
        (_, Ok(())) => return None,
        (w, Err(e)) => {
            // A waiting pod's reason or an object's status not written: told again.
            if let Write::Unschedulable { job, .. } | Write::ObjectStatus { job, .. } = w {
                let _ = tx.send(Seen::NotTold { job: job.clone() });
            }
            if let Write::ExpectedStart { job, .. } = w {
                let _ = tx.send(Seen::StartNotTold { job: job.clone() });
            }
            Seen::Trouble(format!("{}: {e}", describe(w)))
        }
    };
    let _ = tx.send(msg);
    None
}

/// Carries out a ReadLoad: the answer goes back as [`Seen::Load`].
async fn read_load(client: &Client, job: &str, selector: &str) -> Seen {
    let (ns, _) = split(job);
    let value = external_metric(client, ns, maar_scheduler::manifest::USAGE_METRIC, selector)
        .await
        .map(|v| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64));
    Seen::Load {
        job: job.to_string(),
        value,
    }
}

/// The values of an external metric's series in namespace `ns` that `selector`
/// picks, from the external metrics API (`external.metrics.k8s.io/v1beta1`, served by
/// an adapter such as prometheus-adapter), as an HPA reads them.
pub async fn external_metric(
    client: &Client,
    ns: &str,
    metric: &str,
    selector: &str,
) -> Result<Vec<f64>, String> {
    let url = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector={}",
        form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>()
    );
    let req = http::Request::get(url)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let list: serde_json::Value = match client.request(req).await {
        Ok(v) => v,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return Err(format!(
                "the external metrics API does not serve {metric} (404): install a metrics adapter that serves it (such as prometheus-adapter, as an HPA on this metric needs too)"
            ))
        }
        Err(e) => return Err(e.to_string()),
    };
    let items = list
        .get("items")
        .and_then(|i| i.as_array())
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for i in items {
        let q = i.get("value").and_then(|v| v.as_str()).unwrap_or("");
        out.push(metric_value(q).ok_or_else(|| format!("{metric}: `{q}` is not a quantity"))?);
    }
    Ok(out)
}

/// A metric's value as the API gives it (a quantity: `70`, `70500m`, `0.7`).
fn metric_value(q: &str) -> Option<f64> {
    let q = q.trim();
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<f64>().ok().map(|v| v / 1000.0);
    }
    if let Some(k) = q.strip_suffix('k') {
        return k.parse::<f64>().ok().map(|v| v * 1000.0);
    }
    q.parse::<f64>().ok()
}

fn describe(w: &Write) -> String {
    match w {
        Write::Bind { job, node, .. } => format!("binding pod {job} to {node}"),
        Write::Unschedulable { job, .. } => format!("marking {job} unschedulable"),
        Write::CreatePods { owner, job, .. } => {
            format!("creating the pods of {} {job}", owner.kind())
        }
        Write::DeletePods { owner, job, .. } => {
            format!("deleting the pods of {} {job}", owner.kind())
        }
        Write::ReadLoad { job, .. } => format!("reading the load of InferenceService {job}"),
        Write::ExpectedStart { job, .. } => format!("writing the expected start of {job}"),
        Write::ObjectStatus { owner, job, .. } => {
            format!("writing the status of {} {job}", owner.kind())
        }
        Write::QuotaRequestStatus { key, .. } => format!("answering QuotaRequest {key}"),
        Write::QuotaObject { project, name, .. } => format!("writing Quota {project}/{name}"),
        Write::Delete { job, .. } => format!("deleting pod {job}"),
        Write::Labels { node, .. } => format!("labelling node {node}"),
        Write::Cordon { node, on: true } => format!("cordoning node {node}"),
        Write::Cordon { node, on: false } => format!("uncordoning node {node}"),
        Write::GpuCordons { node, .. } => format!("writing the GPU cordons of node {node}"),
        Write::Note {
            regarding, reason, ..
        } => format!(
            "writing event {reason} on {} {}",
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default()
        ),
    }
}

/// The reference to a pod that events name.
fn pod_ref(ns: &str, name: &str, uid: &str) -> ObjectReference {
    object_ref("v1", "Pod", ns, name, uid)
}

/// The reference to an object that events name (`ns` empty for a cluster-scoped
/// object, `uid` empty when not known).
pub fn object_ref(
    api_version: &str,
    kind: &str,
    ns: &str,
    name: &str,
    uid: &str,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        // Cluster-scoped objects (a Pool) have none (the event goes to `default`).
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        uid: (!uid.is_empty()).then(|| uid.to_string()),
        ..Default::default()
    }
}

/// The name of replica `i`'s pod of TrainJob `name`, on its `attempt`th start (a
/// restart makes new pods; the failed ones stay for their logs).
pub fn trainjob_pod_name(name: &str, attempt: u32, i: usize) -> String {
    if attempt == 0 {
        format!("{name}-{i}")
    } else {
        format!("{name}-r{attempt}-{i}")
    }
}

/// Cuts a note to what the API server takes, on a character boundary.
pub fn cut_note(s: &str) -> String {
    if s.len() <= MAX_NOTE {
        return s.to_string();
    }
    let mut end = MAX_NOTE - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Binds pod `job` (`namespace/name`, `uid`) to `node` on cards `gpus`.
async fn bind(
    client: &Client,
    job: &str,
    uid: &str,
    node: &str,
    gpus: &[u32],
) -> Result<(), String> {
    let (ns, name) = split(job);
    // One request: the API server sets the node and merges the binding's
    // annotations (the cards) into the pod together; the uid makes sure the pod
    // bound is the one maar saw, not another of the same name.
    let binding = BindingBody {
        api_version: "v1",
        kind: "Binding",
        metadata: BindingMeta {
            name,
            namespace: ns,
            uid,
            annotations: (!gpus.is_empty()).then(|| {
                let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
                BTreeMap::from([(ANNOTATION_GPUS, list.join(","))])
            }),
        },
        target: BindingTarget {
            api_version: "v1",
            kind: "Node",
            name: node,
        },
    };
    let body = serde_json::to_vec(&binding).map_err(|e| e.to_string())?;
    let req = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/pods"))
        .create_subresource("binding", name, &PostParams::default(), body)
        .map_err(|e| e.to_string())?;
    // The answer (a Status) is not parsed: an error is.
    client.request_text(req).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// A bound pod's `Scheduled` event, to be written.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduled {
    pub job: String,
    pub uid: String,
    pub node: String,
}

impl Scheduled {
    /// Writes it, as kube-scheduler says it (for `kubectl describe pod`); a failure is
    /// logged only.
    pub async fn publish(&self, recorder: &Events) {
        let (ns, name) = split(&self.job);
        let note = format!("Successfully assigned {ns}/{name} to {}", self.node);
        let reference = pod_ref(ns, name, &self.uid);
        if let Err(e) = recorder
            .publish(EventType::Normal, "Scheduled", "Binding", &note, &reference)
            .await
        {
            tracing::warn!(target: "maar::kube", "event for {}: {e}", self.job);
        }
    }
}

/// One write against the API server.
pub async fn carry_out(client: &Client, recorder: &Events, w: &Write) -> Result<(), String> {
    match w {
        Write::Note {
            regarding,
            warning,
            reason,
            message,
        } => recorder
            .publish(
                if *warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason,
                "Scheduling",
                message,
                regarding,
            )
            .await
            .map_err(|e| e.to_string()),
        Write::Bind {
            job,
            uid,
            node,
            gpus,
        } => {
            bind(client, job, uid, node, gpus).await?;
            Scheduled {
                job: job.clone(),
                uid: uid.clone(),
                node: node.clone(),
            }
            .publish(recorder)
            .await;
            Ok(())
        }
        Write::Unschedulable {
            job,
            uid,
            message,
            object,
        } => {
            let (ns, name) = split(job);
            let reference = if let Some(owner) = object {
                // The object's status says it; its pods do not exist yet.
                let api: Api<DynamicObject> = Api::namespaced_with(
                    client.clone(),
                    ns,
                    &map::crd(owner.kind(), owner.plural()),
                );
                let status = json!({"status": {"phase": "Pending", "message": message}});
                api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .map_err(|e| e.to_string())?;
                object_ref("crater.ai/v1", owner.kind(), ns, name, uid)
            } else {
                let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
                let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let status = json!({"status": {"conditions": [{
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now,
                }]}});
                pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
                    .await
                    .map_err(|e| e.to_string())?;
                pod_ref(ns, name, uid)
            };
            recorder
                .publish(
                    EventType::Warning,
                    "FailedScheduling",
                    "Scheduling",
                    message,
                    &reference,
                )
                .await
                .map_err(|e| e.to_string())
        }
        Write::CreatePods {
            owner,
            job,
            uid,
            labels,
            spec,
            pods: new,
            of,
            ..
        } => {
            let (ns, name) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            let n = new.len();
            let mut made: Vec<&str> = Vec::new();
            for p in new {
                let body = map::owned_pod(
                    *owner, spec, ns, uid, labels, &p.name, p.index, *of, &p.at.node, &p.at.gpus,
                );
                let pod: KPod = serde_json::from_value(body).map_err(|e| e.to_string())?;
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(_) => made.push(&p.name),
                    Err(e) => {
                        // All or nothing: the ones made go.
                        for m in &made {
                            let _ = pods.delete(m, &DeleteParams::default()).await;
                        }
                        return Err(format!("creating pod {}: {e}", p.name));
                    }
                }
            }
            let nodes: Vec<&str> = new.iter().map(|p| p.at.node.as_str()).collect();
            let note = format!("{n} pod(s) created on {}", nodes.join(", "));
            let _ = recorder
                .publish(
                    EventType::Normal,
                    "Scheduled",
                    "Binding",
                    &note,
                    &object_ref("crater.ai/v1", owner.kind(), ns, name, uid),
                )
                .await;
            Ok(())
        }
        Write::DeletePods {
            owner,
            job,
            pods: named,
            reason,
        } => {
            let (ns, _) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            for p in named {
                match pods.delete(p, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(format!("pod {p}: {e}")),
                }
            }
            tracing::info!(target: "maar::kube", "pods of {} {job} deleted: {reason}", owner.kind());
            Ok(())
        }
        // Answered by the writer itself.
        Write::ReadLoad { .. } => Ok(()),
        Write::QuotaRequestStatus {
            key,
            phase,
            id,
            message,
        } => {
            let (ns, name) = split(key);
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                ns,
                &map::crd("QuotaRequest", "quotarequests"),
            );
            let status = json!({"status": {"phase": phase, "request": id, "message": message}});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Write::QuotaObject {
            project,
            name,
            pool,
            reserved_gpus,
            max_gpus,
        } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), project, &map::crd("Quota", "quotas"));
            let mut spec = json!({"pool": pool, "reserved": {"gpu": reserved_gpus}});
            spec["max"] = match max_gpus {
                Some(m) => json!({"gpu": m}),
                None => json!({}),
            };
            let obj = json!({
                "apiVersion": "crater.ai/v1",
                "kind": "Quota",
                "metadata": {"name": name, "namespace": project},
                "spec": spec,
            });
            // Server-side apply: made when absent, its GPU fields set when present.
            api.patch(
                name,
                &PatchParams::apply("maar").force(),
                &Patch::Apply(&obj),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
        }
        Write::ObjectStatus {
            owner,
            job,
            phase,
            message,
            nodes,
        } => {
            let (ns, name) = split(job);
            let tjs: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), ns, &map::crd(owner.kind(), owner.plural()));
            let mut status =
                json!({"status": {"phase": phase, "message": message, "nodes": nodes}});
            if *owner == Owner::InferenceService {
                status["status"]["replicas"] = json!(nodes.len());
            }
            match tjs
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                .await
            {
                Ok(_) => Ok(()),
                // Deleted meanwhile.
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Write::ExpectedStart {
            job,
            uid,
            object,
            in_s,
            basis,
        } => {
            let (ns, name) = split(job);
            let at = in_s.map(|s| {
                (chrono::Utc::now() + chrono::Duration::seconds(s.min(i64::MAX as u64) as i64))
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            });
            let out = match object {
                Some(owner) => {
                    let api: Api<DynamicObject> = Api::namespaced_with(
                        client.clone(),
                        ns,
                        &map::crd(owner.kind(), owner.plural()),
                    );
                    let status = json!({
                        "metadata": {"uid": uid},
                        "status": {"expectedStart": at, "expectedStartBasis": basis},
                    });
                    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                        .await
                        .map(|_| ())
                }
                None => {
                    let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
                    // The uid makes it a precondition: a pod made again under the same
                    // name is not told another's start.
                    let patch = json!({"metadata": {"uid": uid, "annotations": {
                        (map::ANNOTATION_EXPECTED_START): at,
                        (map::ANNOTATION_EXPECTED_BASIS): basis,
                    }}});
                    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| ())
                }
            };
            match out {
                Ok(_) => Ok(()),
                // Deleted meanwhile (or made again: not this one).
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Write::Delete { job, reason } => {
            let (ns, name) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            match pods.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
            tracing::info!(target: "maar::kube", "pod {job} deleted: {reason}");
            Ok(())
        }
        Write::Cordon { node, on } => {
            let nodes: Api<KNode> = Api::all(client.clone());
            let patch =
                json!({"spec": {"unschedulable": if *on { json!(true) } else { json!(null) }}});
            nodes
                .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Write::Labels { node, set, remove } => {
            let nodes: Api<KNode> = Api::all(client.clone());
            let mut labels = serde_json::Map::new();
            for k in remove {
                labels.insert(k.clone(), serde_json::Value::Null);
            }
            for (k, v) in set {
                labels.insert(k.clone(), json!(v));
            }
            let patch = json!({"metadata": {"labels": labels}});
            nodes
                .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Write::GpuCordons { node, gpus } => {
            let nodes: Api<KNode> = Api::all(client.clone());
            let value = if gpus.is_empty() {
                json!(null)
            } else {
                json!(gpus
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","))
            };
            let patch =
                json!({"metadata": {"annotations": {map::ANNOTATION_CORDONED_GPUS: value}}});
            nodes
                .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    }
}
