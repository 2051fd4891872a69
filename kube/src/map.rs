//! Kubernetes objects as maar's model: pure functions, tested on recorded objects.
//!
//! - A Node becomes a maar node: its labels as they are (`crater.ai/*` among them), its
//!   allocatable CPU, memory and ephemeral storage, one card per allocatable GPU of its
//!   vendor's resource (`nvidia.com/gpu`, `amd.com/gpu`, `huawei.com/Ascend910`) with
//!   the model and memory its labels give, `Ready` from its Ready condition and
//!   cordoned from `spec.unschedulable` (what `kubectl cordon` sets).
//! - A Pod with `schedulerName: maar` becomes a one-replica job of its namespace's
//!   project ([`maar_scheduler::manifest::Pod`] reads it, so the request rules are the
//!   manifests' own); its phase and container states say how it ended.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node as KNode, Pod as KPod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use maar_scheduler::manifest::SpecError;
use maar_scheduler::model::{Gpu, JobSpec, Node, LABEL_MEMORY, LABEL_MODEL};
use maar_scheduler::quantity::{parse_bytes, parse_cpu_milli};

/// The scheduler name pods give to be scheduled by maar.
pub const SCHEDULER_NAME: &str = "maar";
/// The annotation maar writes on a pod it binds: the GPU indices it was given on the
/// node (`0,3`), for the device plugin.
pub const ANNOTATION_GPUS: &str = "crater.ai/gpu-indices";
/// The annotation that cordons single GPUs of a node (`1,5`): maar skips those cards.
pub const ANNOTATION_CORDONED_GPUS: &str = "crater.ai/cordoned-gpus";
/// On a waiting pod: when maar expects it to start (UTC, RFC 3339), from its forecast
/// of the cycles to come; absent when it cannot say.
pub const ANNOTATION_EXPECTED_START: &str = "crater.ai/expected-start";
/// On a waiting pod: what its expected start rests on: `estimate` (the running jobs'
/// own estimates), `history` (earlier runs of the same kind), `never`, `unknown`.
pub const ANNOTATION_EXPECTED_BASIS: &str = "crater.ai/expected-start-basis";

/// A pod's key: `namespace/name`, which is also its job's name in maar.
pub fn pod_key(p: &KPod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether maar schedules this pod.
pub fn is_ours(p: &KPod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .is_some_and(|s| s == SCHEDULER_NAME)
}

/// The node a pod is bound to, if any.
pub fn pod_node(p: &KPod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// How far a pod has come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Not ended (waiting for a node, or bound and running).
    Live,
    Succeeded,
    /// Failed; `oom` when a container was OOMKilled.
    Failed {
        oom: bool,
        message: String,
    },
}

/// A pod's state from its phase and its containers' last terminations.
pub fn pod_state(p: &KPod) -> PodState {
    let Some(st) = p.status.as_ref() else {
        return PodState::Live;
    };
    let oom = st
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| {
            c.state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .or(c.last_state.as_ref().and_then(|s| s.terminated.as_ref()))
        })
        .find(|t| t.reason.as_deref() == Some("OOMKilled"));
    match st.phase.as_deref() {
        Some("Succeeded") => PodState::Succeeded,
        Some("Failed") => PodState::Failed {
            oom: oom.is_some(),
            message: match oom {
                Some(t) => format!(
                    "OOMKilled (exit code {}){}",
                    t.exit_code,
                    t.message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
                None => st
                    .message
                    .clone()
                    .or(st.reason.clone())
                    .unwrap_or_else(|| "pod failed".into()),
            },
        },
        _ => PodState::Live,
    }
}

/// The pod as maar's job: read through the manifests' own `Pod` (one place for the
/// request rules).
pub fn job_of(p: &KPod) -> Result<JobSpec, SpecError> {
    let text = match &p.spec {
        Some(s) => Some(serde_json::to_string(s).map_err(|e| SpecError {
            field: "spec".into(),
            message: e.to_string(),
        })?),
        None => None,
    };
    job_of_text(&p.metadata, text.as_deref())
}

/// The job of a pod of `meta` whose spec is the JSON `spec` (as the API server sent
/// it): the spec is read straight into the manifests' `PodSpec`.
pub fn job_of_text(meta: &ObjectMeta, spec: Option<&str>) -> Result<JobSpec, SpecError> {
    job_of_spec(meta, spec_of_text(spec)?)
}

/// A pod's spec, the JSON the API server sent (none: the pod has no spec), read into
/// the manifests' `PodSpec`.
pub fn spec_of_text(spec: Option<&str>) -> Result<maar_scheduler::manifest::PodSpec, SpecError> {
    serde_json::from_str(spec.unwrap_or("null")).map_err(|e| SpecError {
        field: "spec".into(),
        message: e.to_string(),
    })
}

/// The job of a pod of `meta` whose spec is read already ([`spec_of_text`]).
pub fn job_of_spec(
    meta: &ObjectMeta,
    spec: maar_scheduler::manifest::PodSpec,
) -> Result<JobSpec, SpecError> {
    maar_scheduler::manifest::Pod {
        metadata: maar_scheduler::manifest::K8sMeta {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
        },
        spec,
    }
    .to_job_spec()
}

/// The node's labels.
pub fn labels_of(k: &KNode) -> BTreeMap<String, String> {
    k.metadata.labels.clone().unwrap_or_default()
}

/// Whether the node is Ready, and why not.
pub fn node_ready(k: &KNode) -> (bool, String) {
    let ready = k
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => (true, String::new()),
        Some(c) => (
            false,
            c.reason
                .clone()
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| format!("Ready={}", c.status)),
        ),
        None => (false, "no Ready condition reported".into()),
    }
}

/// Whether the node is cordoned (`spec.unschedulable`, as `kubectl cordon` sets it).
pub fn node_cordoned(k: &KNode) -> bool {
    k.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Single GPUs cordoned on the node (its `crater.ai/cordoned-gpus` annotation).
/// The GPU cordon annotation as written, when the node has it.
pub fn cordons_text(k: &KNode) -> Option<String> {
    k.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CORDONED_GPUS))
        .cloned()
}

/// What is wrong in the GPU cordon annotation (entries that are not cards of the
/// node, which are passed over): said, not ignored silently.
pub fn cordon_troubles(k: &KNode, cards: usize) -> Option<String> {
    // (A node whose device plugin has not advertised its cards yet: nothing to judge.)
    if cards == 0 {
        return None;
    }
    let text = cordons_text(k)?;
    let bad: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty() && x.parse::<usize>().map_or(true, |g| g >= cards))
        .collect();
    (!bad.is_empty()).then(|| {
        let name = k.metadata.name.as_deref().unwrap_or_default();
        format!(
            "node {name}: annotation {ANNOTATION_CORDONED_GPUS}={text}: {} not a GPU of this node (0-{}), passed over",
            bad.iter().map(|b| format!("`{b}`")).collect::<Vec<_>>().join(", "),
            cards.saturating_sub(1)
        )
    })
}

pub fn cordoned_gpus(k: &KNode) -> Vec<u32> {
    k.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CORDONED_GPUS))
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Allocatable GPUs of the node: (count, vendor resource name), from the first
/// whole-card resource it advertises.
pub fn node_gpus(k: &KNode) -> (u32, Option<String>) {
    let Some(alloc) = k.status.as_ref().and_then(|s| s.allocatable.as_ref()) else {
        return (0, None);
    };
    alloc
        .iter()
        .find(|(r, _)| maar_scheduler::manifest::is_whole_gpu_resource(r))
        .map(|(r, q)| (q.0.parse().unwrap_or(0), Some(r.clone())))
        .unwrap_or((0, None))
}

/// The NVIDIA device plugin's label for time-sliced cards: each card is advertised
/// this many times (GPU feature discovery sets it).
pub const LABEL_GPU_REPLICAS: &str = "nvidia.com/gpu.replicas";
/// GPU feature discovery's product label (`A100-SXM4-40GB-MIG-1g.5gb` under the single
/// MIG strategy).
pub const LABEL_GPU_PRODUCT: &str = "nvidia.com/gpu.product";

/// The memory of a MIG profile from its name (`1g.10gb`, `mig-3g.40gb`,
/// `mig-1c.3g.20gb`, `A100-SXM4-40GB-MIG-1g.5gb`).
pub fn mig_profile_memory(name: &str) -> Option<u64> {
    // The memory is the last part: `1g.10gb`, `1c.3g.20gb` (a compute instance).
    let lower = name.to_lowercase();
    let tail = lower.rsplit("mig-").next()?;
    let gb = tail.rsplit('.').next()?.strip_suffix("gb")?;
    gb.parse::<u64>().ok().map(|g| g << 30)
}

/// The node's devices as cards: (count, memory per card, resource; `None` for whole
/// cards), in the order they are numbered.
///
/// - whole cards (`nvidia.com/gpu`, `amd.com/gpu`, ...), each with the memory the
///   `crater.ai/gpu-memory` label gives; time-sliced (`nvidia.com/gpu.replicas: R`
///   label), each advertised replica is a card with 1/R of the memory; MIG under the
///   single strategy (`nvidia.com/gpu.product` ends in `-MIG-1g.5gb`), each is an
///   instance with the profile's memory;
/// - MIG instances under the mixed strategy (`nvidia.com/mig-1g.10gb: 7`): a card per
///   instance of the profile's memory, taken only by pods asking for that profile;
/// - time-sliced replicas renamed `nvidia.com/gpu.shared`: a card per replica, 1/R of
///   the memory, taken only by pods asking for `nvidia.com/gpu.shared`.
pub fn node_devices(k: &KNode) -> Vec<(u32, u64, Option<String>)> {
    let labels = labels_of(k);
    let Some(alloc) = k.status.as_ref().and_then(|s| s.allocatable.as_ref()) else {
        return Vec::new();
    };
    let card_mem = labels
        .get(LABEL_MEMORY)
        .and_then(|m| parse_bytes(m).ok())
        .unwrap_or(0);
    let replicas: u64 = labels
        .get(LABEL_GPU_REPLICAS)
        .and_then(|r| r.parse().ok())
        .filter(|r| *r > 1)
        .unwrap_or(1);
    let count = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| -> u32 {
        q.0.parse().unwrap_or(0)
    };
    let mut out = Vec::new();
    if let (n, Some(_)) = node_gpus(k) {
        let single_mig = labels
            .get(LABEL_GPU_PRODUCT)
            .filter(|p| p.to_lowercase().contains("-mig-"))
            .and_then(|p| mig_profile_memory(p));
        let mem = single_mig.unwrap_or(card_mem / replicas);
        out.push((n, mem, None));
    }
    for (r, q) in alloc {
        if let Some(profile) = r.strip_prefix("nvidia.com/") {
            if profile.starts_with("mig-") {
                let mem = mig_profile_memory(profile).unwrap_or(0);
                out.push((count(q), mem, Some(r.clone())));
            } else if profile == "gpu.shared" {
                out.push((count(q), card_mem / replicas, Some(r.clone())));
            }
        }
    }
    out.retain(|(n, _, _)| *n > 0);
    out
}

/// What is wrong with the node's `crater.ai/*` labels that maar reads as numbers
/// (`crater.ai/gpu-memory: lots`): said, where the value would otherwise count as 0.
pub fn label_troubles(k: &KNode) -> Vec<String> {
    let labels = labels_of(k);
    let name = k.metadata.name.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    if let Some(m) = labels.get(LABEL_MEMORY) {
        if let Err(e) = parse_bytes(m) {
            out.push(format!(
                "node {name}: label {LABEL_MEMORY}={m} is not a memory size ({e}); its cards count as of unknown memory (jobs asking for a card size do not go there): `kubectl label node {name} {LABEL_MEMORY}=80Gi --overwrite` with the cards' size"
            ));
        }
    }
    if let Some(c) = labels.get(maar_scheduler::model::LABEL_COUNT) {
        if c.parse::<u32>().is_err() {
            out.push(format!(
                "node {name}: label {}={c} is not a number of GPUs; maar counts the GPUs the node advertises",
                maar_scheduler::model::LABEL_COUNT
            ));
        }
    }
    out
}

/// The node's taints (`spec.taints`) with an effect maar knows.
pub fn node_taints(k: &KNode) -> Vec<maar_scheduler::rules::Taint> {
    use maar_scheduler::rules::{Taint, TaintEffect};
    k.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let effect = match t.effect.as_str() {
                "NoSchedule" => TaintEffect::NoSchedule,
                "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
                "NoExecute" => TaintEffect::NoExecute,
                _ => return None,
            };
            Some(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect()
}

/// The node as maar's model (not yet in any pool: the cluster places it by its labels).
pub fn node_of(k: &KNode) -> Node {
    let name = k.metadata.name.clone().unwrap_or_default();
    let labels = labels_of(k);
    let alloc = k.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let get = |r: &str| alloc.and_then(|a| a.get(r)).map(|q| q.0.as_str());
    let cpu = get("cpu")
        .and_then(|q| parse_cpu_milli(q).ok())
        .unwrap_or(0);
    let memory = get("memory").and_then(|q| parse_bytes(q).ok()).unwrap_or(0);
    let disk = get("ephemeral-storage")
        .and_then(|q| parse_bytes(q).ok())
        .unwrap_or(0);
    let model = labels.get(LABEL_MODEL).cloned().unwrap_or_default();
    let mut gpus = Vec::new();
    for (n, mem, resource) in node_devices(k) {
        let res: Option<std::sync::Arc<str>> = resource.map(Into::into);
        for _ in 0..n.min(maar_scheduler::limits::MAX_GPUS_PER_NODE) {
            let i = gpus.len() as u32;
            let mut g = Gpu::new(i, format!("{name}/{i}"), model.clone(), mem, false);
            g.resource = res.clone();
            gpus.push(g);
        }
    }
    gpus.truncate(maar_scheduler::limits::MAX_GPUS_PER_NODE as usize);
    let mut n = Node::new(name, labels, cpu, memory, disk, gpus);
    // NodeResourcesFit counts pods against allocatable `pods` too.
    n.max_pods = get("pods").and_then(|q| q.parse().ok()).unwrap_or(0);
    n.taints = node_taints(k);
    n.cordoned = node_cordoned(k);
    let (ready, why) = node_ready(k);
    if !ready {
        n.condition = maar_scheduler::model::Condition::NotReady(why);
    }
    n
}

/// maar's custom resources (group `crater.ai`, version `v1`; deploy/crds.yaml).
pub fn crd(kind: &str, plural: &str) -> kube::core::ApiResource {
    kube::core::ApiResource {
        group: "crater.ai".into(),
        version: "v1".into(),
        api_version: "crater.ai/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The label on the pods maar creates for a TrainJob: the TrainJob's name.
pub const LABEL_TRAINJOB: &str = "crater.ai/trainjob";
/// The label on the pods maar creates for an InferenceService: its name.
pub const LABEL_SERVICE: &str = "crater.ai/inferenceservice";

/// The kinds of maar's objects that own pods maar makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    TrainJob,
    InferenceService,
}

impl Owner {
    pub const ALL: [Owner; 2] = [Owner::TrainJob, Owner::InferenceService];

    pub fn kind(self) -> &'static str {
        match self {
            Owner::TrainJob => "TrainJob",
            Owner::InferenceService => "InferenceService",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Owner::TrainJob => "trainjobs",
            Owner::InferenceService => "inferenceservices",
        }
    }

    /// The label on its pods, whose value is the object's name.
    pub fn label(self) -> &'static str {
        match self {
            Owner::TrainJob => LABEL_TRAINJOB,
            Owner::InferenceService => LABEL_SERVICE,
        }
    }

    /// Its pods' restart policy: a training worker that fails ends its job (maar
    /// restarts the job by its policy); a serving replica restarts in place, as a
    /// Deployment's does.
    fn restart_policy(self) -> &'static str {
        match self {
            Owner::TrainJob => "Never",
            Owner::InferenceService => "Always",
        }
    }

    fn container(self) -> &'static str {
        match self {
            Owner::TrainJob => "train",
            Owner::InferenceService => "serve",
        }
    }
}

/// The owner of a pod maar made, from its labels: (kind, the object's name).
pub fn pod_owner(labels: &BTreeMap<String, String>) -> Option<(Owner, String)> {
    Owner::ALL
        .iter()
        .find_map(|o| labels.get(o.label()).map(|n| (*o, n.clone())))
}

/// The object as a manifest maar reads: apiVersion, kind, the metadata a user writes
/// (name, namespace, labels, annotations but kubectl's own) and spec; what the API
/// server adds (uid, resourceVersion, managedFields, status) is left out.
fn as_written(o: &kube::core::DynamicObject) -> serde_json::Value {
    let m = &o.metadata;
    let mut annotations = m.annotations.clone().unwrap_or_default();
    annotations.retain(|k, _| !k.starts_with("kubectl.kubernetes.io/"));
    let ty = o.types.clone().unwrap_or_default();
    serde_json::json!({
        "apiVersion": ty.api_version,
        "kind": ty.kind,
        "metadata": {
            "name": m.name.clone().unwrap_or_default(),
            "namespace": m.namespace,
            "labels": m.labels.clone().unwrap_or_default(),
            "annotations": annotations,
        },
        "spec": o.data.get("spec").cloned().unwrap_or(serde_json::Value::Null),
    })
}

/// A TrainJob or InferenceService object as maar's job: read by the manifests' own
/// rules, so a file that `maar submit` takes is taken here as it is.
pub fn object_of(o: &kube::core::DynamicObject) -> Result<JobSpec, SpecError> {
    let mut spec = manifest_of(o)?.to_job_spec()?;
    // Why a federation of clusters sent it here, when one did (explain's `Sent:`).
    let ann = |k: &str| {
        o.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k))
            .cloned()
    };
    // The object as written goes with it: a federation that sends or moves it makes
    // it in another cluster as it is.
    spec.manifest = Some(as_written(o));
    spec.dispatched = ann(ANNOTATION_DISPATCHED);
    if spec.dispatched.is_some() {
        spec.sent_start_in = ann(ANNOTATION_SENT_START_IN).and_then(|s| s.parse().ok());
        spec.moved_from = ann(ANNOTATION_MOVED_FROM);
    }
    Ok(spec)
}

/// The annotation a dispatched object carries: why it was sent to this cluster.
pub const ANNOTATION_DISPATCHED: &str = "crater.ai/dispatched";
/// With it: the seconds it was expected to wait here (past them it may be moved).
pub const ANNOTATION_SENT_START_IN: &str = "crater.ai/sent-start-in";
/// With it: the cluster it was moved from (it moves no more).
pub const ANNOTATION_MOVED_FROM: &str = "crater.ai/moved-from";

fn manifest_of(
    o: &kube::core::DynamicObject,
) -> Result<maar_scheduler::manifest::Manifest, SpecError> {
    serde_json::from_value(as_written(o)).map_err(|e| SpecError {
        field: "spec".into(),
        message: e.to_string(),
    })
}

/// The label selector of an InferenceService's load metric (the pods' series the
/// external metric sums): `spec.autoscale.selector.matchLabels` when given, else
/// the label maar puts on the service's pods. As `key=value,...`.
pub fn load_selector(o: &kube::core::DynamicObject) -> String {
    let given = manifest_of(o)
        .ok()
        .and_then(|m| m.spec.autoscale)
        .and_then(|a| a.selector)
        .map(|s| s.match_labels)
        .filter(|l| !l.is_empty());
    match given {
        Some(l) => l
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        None => format!(
            "{LABEL_SERVICE}={}",
            o.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

/// A Pool object (cluster-scoped): `spec.kind` (training, inference, test),
/// `spec.selector` (labels a node must carry), `spec.lendTo` (pools that may borrow
/// its idle nodes), `spec.overcommit` (`{cpu, memory}`).
#[derive(Clone, Debug, PartialEq)]
pub struct PoolObject {
    pub name: String,
    pub kind: maar_scheduler::model::PoolKind,
    pub selector: BTreeMap<String, String>,
    pub lend_to: Vec<String>,
    pub overcommit: maar_scheduler::model::Overcommit,
}

pub fn pool_of(o: &kube::core::DynamicObject) -> Result<PoolObject, SpecError> {
    use maar_scheduler::model::{Overcommit, PoolKind};
    let bad = |field: &str, message: String| SpecError {
        field: field.into(),
        message,
    };
    let spec = o.data.get("spec").cloned().unwrap_or_default();
    let kind = match spec
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("training")
    {
        "training" => PoolKind::Training,
        "inference" => PoolKind::Inference,
        "test" => PoolKind::Test,
        k => {
            return Err(bad(
                "spec.kind",
                format!("`{k}` is not training, inference or test"),
            ))
        }
    };
    let selector: BTreeMap<String, String> = match spec.get("selector") {
        None => BTreeMap::new(),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| bad("spec.selector", format!("labels as key: value ({e})")))?,
    };
    if selector.is_empty() {
        return Err(bad(
            "spec.selector",
            "a pool needs at least one label its nodes carry".into(),
        ));
    }
    let lend_to: Vec<String> = match spec.get("lendTo") {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| bad("spec.lendTo", format!("a list of pool names ({e})")))?,
    };
    let mut overcommit = Overcommit::default();
    if let Some(oc) = spec.get("overcommit") {
        let get = |k: &str| oc.get(k).and_then(|v| v.as_f64());
        for (k, slot) in [
            ("cpu", &mut overcommit.cpu),
            ("memory", &mut overcommit.memory),
        ] {
            if let Some(x) = get(k) {
                if !(1.0..=4.0).contains(&x) {
                    return Err(bad(
                        &format!("spec.overcommit.{k}"),
                        format!("{x} is outside 1.0..4.0"),
                    ));
                }
                *slot = x;
            }
        }
    }
    Ok(PoolObject {
        name: o.metadata.name.clone().unwrap_or_default(),
        kind,
        selector,
        lend_to,
        overcommit,
    })
}

/// The Kubernetes resource name of a vendor's GPUs.
pub fn gpu_resource(vendor: Option<&str>) -> &'static str {
    match vendor {
        Some("amd") => "amd.com/gpu",
        Some("ascend") => "huawei.com/Ascend910",
        _ => "nvidia.com/gpu",
    }
}

/// The pod maar creates for replica `i` of a TrainJob or an InferenceService, already
/// bound to `node` (a gang's are created together, or none): owned by the object
/// (deleted with it), labelled with its labels and name, its cards annotated, the
/// replica's requests.
#[allow(clippy::too_many_arguments)]
pub fn owned_pod(
    owner: Owner,
    spec: &JobSpec,
    namespace: &str,
    owner_uid: &str,
    labels: &BTreeMap<String, String>,
    pod_name: &str,
    i: usize,
    replicas: usize,
    node: &str,
    gpus: &[u32],
) -> serde_json::Value {
    let gpu_res = spec
        .gpu
        .resource
        .as_deref()
        .unwrap_or_else(|| gpu_resource(spec.gpu.vendor.as_deref()));
    let mut requests = serde_json::Map::new();
    requests.insert("cpu".into(), format!("{}m", spec.cpu_milli).into());
    requests.insert("memory".into(), spec.memory.to_string().into());
    if spec.disk > 0 {
        requests.insert("ephemeral-storage".into(), spec.disk.to_string().into());
    }
    let mut limits = serde_json::Map::new();
    if spec.gpu.count > 0 {
        requests.insert(gpu_res.into(), spec.gpu.count.to_string().into());
        limits.insert(gpu_res.into(), spec.gpu.count.to_string().into());
    }
    let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
    // The object's own labels (what users' selectors know, e.g. `app: llm-infer`),
    // and the owner's label, which maar finds its pods by.
    let mut pod_labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .filter(|(k, _)| !Owner::ALL.iter().any(|o| o.label() == k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    pod_labels.insert(owner.label().into(), spec.name.clone().into());
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": namespace,
            "labels": pod_labels,
            "annotations": {ANNOTATION_GPUS: list.join(",")},
            "ownerReferences": [{
                "apiVersion": "crater.ai/v1",
                "kind": owner.kind(),
                "name": spec.name,
                "uid": owner_uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "nodeName": node,
            "restartPolicy": owner.restart_policy(),
            // A NoExecute taint the job tolerates must not evict its pods.
            "tolerations": spec.rules.tolerations,
            "containers": [{
                "name": owner.container(),
                "image": spec.image,
                "command": spec.command,
                "env": [
                    {"name": "MAAR_REPLICA", "value": i.to_string()},
                    {"name": "MAAR_REPLICAS", "value": replicas.to_string()},
                ],
                "resources": {"requests": requests, "limits": limits},
            }],
        },
    })
}

/// A Quota object (namespaced: the project is its namespace): `spec.pool` and the
/// quota as a scenario writes it (`reserved`, `max`: `gpu`, `gpu_memory`, `cpu`,
/// `memory`, `disk`).
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaObject {
    /// `namespace/name`.
    pub key: String,
    /// The object's uid (events about it name it, so `kubectl describe` lists them).
    pub uid: String,
    pub project: String,
    pub pool: String,
    pub quota: maar_scheduler::model::Quota,
    /// Why maar cannot read the quota itself (its pool it can): the project is then
    /// closed in that pool (a limit of 0) until the object is fixed, never left
    /// without a limit.
    pub bad: Option<String>,
}

pub fn quota_of(o: &kube::core::DynamicObject) -> Result<QuotaObject, SpecError> {
    let bad = |field: &str, message: String| SpecError {
        field: field.into(),
        message,
    };
    let ns = o
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut spec = o.data.get("spec").cloned().unwrap_or_default();
    let pool = spec
        .get("pool")
        .and_then(|p| p.as_str())
        .map(str::to_string)
        .ok_or_else(|| bad("spec.pool", "the pool the quota is for".into()))?;
    if let Some(m) = spec.as_object_mut() {
        m.remove("pool");
    }
    let read = serde_json::from_value::<maar_scheduler::manifest::QuotaSpec>(spec)
        .map_err(|e| e.to_string())
        .and_then(|q| q.to_quota());
    let (quota, bad) = match read {
        Ok(q) => (q, None),
        Err(why) => {
            let zero = Some(0);
            let closed = maar_scheduler::model::Quota {
                reserved: Default::default(),
                max: maar_scheduler::model::Limits {
                    gpu_milli: zero,
                    gpu_mem: zero,
                    cpu_milli: zero,
                    memory: zero,
                    disk: zero,
                },
            };
            (closed, Some(format!("spec: {why}")))
        }
    };
    Ok(QuotaObject {
        key: format!("{ns}/{}", o.metadata.name.as_deref().unwrap_or_default()),
        uid: o.metadata.uid.clone().unwrap_or_default(),
        project: ns,
        pool,
        quota,
        bad,
    })
}

/// A QuotaRequest object (namespaced: the project is its namespace): `spec.pool`,
/// `spec.gpus`, `spec.reserved` (also reserve them), `spec.reason`; its
/// `status.phase` once maar answered (Pending, Approved, Rejected).
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaRequestObject {
    /// `namespace/name`.
    pub key: String,
    pub project: String,
    pub pool: String,
    pub gpus: u32,
    pub reserved: bool,
    pub reason: String,
    pub phase: Option<String>,
}

pub fn quota_request_of(o: &kube::core::DynamicObject) -> Result<QuotaRequestObject, SpecError> {
    let bad = |field: &str, message: &str| SpecError {
        field: field.into(),
        message: message.into(),
    };
    let ns = o
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let spec = o.data.get("spec").cloned().unwrap_or_default();
    let pool = spec
        .get("pool")
        .and_then(|p| p.as_str())
        .ok_or_else(|| bad("spec.pool", "the pool the GPUs are asked in"))?
        .to_string();
    let gpus = spec
        .get("gpus")
        .and_then(|g| g.as_u64())
        .filter(|g| (1..=u64::from(maar_scheduler::limits::MAX_GPUS_PER_NODE) * 1000).contains(g))
        .ok_or_else(|| bad("spec.gpus", "a whole number of GPUs, at least 1"))?
        as u32;
    Ok(QuotaRequestObject {
        key: format!("{ns}/{}", o.metadata.name.as_deref().unwrap_or_default()),
        project: ns,
        pool,
        gpus,
        reserved: spec
            .get("reserved")
            .and_then(|r| r.as_bool())
            .unwrap_or(false),
        reason: spec
            .get("reason")
            .and_then(|r| r.as_str())
            .unwrap_or_default()
            .to_string(),
        phase: o
            .data
            .get("status")
            .and_then(|s| s.get("phase"))
            .and_then(|p| p.as_str())
            .map(str::to_string),
    })
}
