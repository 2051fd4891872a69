//! What the watchers see, as the driver reads it: pods (full or slim), maar's own
//! objects, and every other thing that reaches the driver on the channel.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node as KNode, Pod as KPod};
use kube::api::DynamicObject;

use crate::map::{self, Owner, PodState, ANNOTATION_GPUS};

/// `kube::Resource` for an object of the core group (`v1`) read slim: its kind, plural,
/// scope and metadata, as k8s-openapi's own types have it.
macro_rules! slim_resource {
    ($t:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $t {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                "".into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                "v1".into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
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
    /// Being deleted (`metadata.deletionTimestamp` set): a pod waiting for a node is
    /// no longer to be placed (the API server refuses to bind it, and kube-scheduler
    /// skips it); a bound one holds its node's room until it is gone.
    pub deleting: bool,
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

    /// As [`PodSeen::of_unless`], for a pod as the watch reads it: its spec's text is
    /// read once here. For a pod whose job is read already (every change after the
    /// first), only its scheduler and node; for one not read yet, the whole spec, which
    /// gives its scheduler, its node and its job in one reading.
    pub fn of_slim(
        p: SlimPod,
        read: &mut std::collections::HashSet<String>,
        scope: Option<&str>,
    ) -> PodSeen {
        let SlimPod {
            metadata,
            status,
            spec_text,
        } = p;
        let known = metadata.uid.as_ref().is_some_and(|u| read.contains(u));
        let mut job = None;
        let head = spec_text.as_deref().map(|t| {
            if known {
                return SpecHead::of(t.get());
            }
            match map::spec_of_text(Some(t.get())) {
                Ok(s) => {
                    let head = SpecHead {
                        scheduler_name: s.scheduler_name.clone(),
                        node_name: s.node_name.clone(),
                    };
                    job = Some(Ok(s));
                    head
                }
                Err(e) => {
                    job = Some(Err(e));
                    SpecHead::of(t.get())
                }
            }
        });
        let pod = KPod {
            metadata,
            spec: head.map(SpecHead::into_spec),
            status: status.map(|s| *s),
        };
        Self::seen(&pod, read, scope, || match job {
            Some(spec) => map::job_of_spec(&pod.metadata, spec?),
            None => map::job_of_text(&pod.metadata, None),
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
            deleting: p.metadata.deletion_timestamp.is_some(),
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
/// cost. The spec is kept as the API server's text and read by
/// [`PodSeen::of_slim`]: in full once per pod, for its job (a pod changes several
/// times on its way, and only its node changes in the spec); otherwise only who
/// schedules it and its node. A test checks that a pod read so is seen as the whole
/// pod is.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(from = "SlimRead")]
pub struct SlimPod {
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// The status is boxed, the spec kept as text: a watch event passes by value
    /// through every layer of kube-rs's watcher, and a list holds thousands (a whole
    /// `PodSpec` made each pod 2.2 kB to copy; now about 0.4 kB).
    pub status: Option<Box<k8s_openapi::api::core::v1::PodStatus>>,
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

impl From<SlimRead> for SlimPod {
    fn from(r: SlimRead) -> SlimPod {
        SlimPod {
            metadata: r.metadata,
            status: r.status.map(Box::new),
            spec_text: r.spec,
        }
    }
}

/// The spec fields read on every change: who schedules the pod and its node.
#[derive(Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecHead {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    node_name: Option<String>,
}

impl SpecHead {
    /// Of a spec's text. The text is JSON already (the watch read it whole); a spec
    /// whose scheduler or node is not a string, which no API server sends, has
    /// neither: the pod is taken as another scheduler's, on no node.
    fn of(text: &str) -> SpecHead {
        serde_json::from_str(text).unwrap_or_default()
    }

    /// As a spec with only these two fields.
    fn into_spec(self) -> k8s_openapi::api::core::v1::PodSpec {
        k8s_openapi::api::core::v1::PodSpec {
            scheduler_name: self.scheduler_name,
            node_name: self.node_name,
            ..Default::default()
        }
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
            spec: self.spec_text.map(|t| SpecHead::of(t.get()).into_spec()),
            status: self.status.map(|s| *s),
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

slim_resource!(SlimPod, "Pod", "pods", k8s_openapi::NamespaceResourceScope);

/// A node as the watch reads it: its metadata without `managedFields`, its spec, and of
/// its status only the allocatable resources and the conditions (what
/// [`map::node_of`] and [`map::node_ready`] read). A kubelet's node carries its
/// images (tens of entries), addresses, daemon endpoints and volumes too, decoded and
/// dropped on every status update before. A test checks that a node read so is seen
/// as the whole node is.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct SlimNode {
    #[serde(deserialize_with = "slim_meta", default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    pub spec: Option<k8s_openapi::api::core::v1::NodeSpec>,
    #[serde(deserialize_with = "slim_node_status", default)]
    pub status: Option<k8s_openapi::api::core::v1::NodeStatus>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct NodeStatusRead {
    allocatable: Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    conditions: Option<Vec<k8s_openapi::api::core::v1::NodeCondition>>,
}

fn slim_node_status<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<k8s_openapi::api::core::v1::NodeStatus>, D::Error> {
    let Some(s) = <Option<NodeStatusRead> as serde::Deserialize>::deserialize(d)? else {
        return Ok(None);
    };
    Ok(Some(k8s_openapi::api::core::v1::NodeStatus {
        allocatable: s.allocatable,
        conditions: s.conditions,
        ..Default::default()
    }))
}

impl SlimNode {
    /// The node, cut to what maar reads.
    pub fn into_node(self) -> KNode {
        KNode {
            metadata: self.metadata,
            spec: self.spec,
            status: self.status,
        }
    }
}

slim_resource!(SlimNode, "Node", "nodes", k8s_openapi::ClusterResourceScope);

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
    /// A watch could not reach the API server (retried with back-off): the cluster
    /// does not answer until the watches deliver again.
    Unanswered(String),
    /// Who schedules changed (the lease): what is true now.
    Lease(String),
    /// This many bound pods' `Scheduled` events were not written: more than
    /// [`MAX_QUEUED_EVENTS`] waited behind binds (told once the queue is empty).
    EventsDropped(u64),
    /// Several of the above from one watch, in order (see [`super::SEEN_BATCH`]);
    /// [`super::World`] hands them out one by one.
    Many(Vec<Seen>),
}
