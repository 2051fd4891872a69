//! Job manifests as users write them: `TrainJob` and `InferenceService`
//! (`apiVersion: crater.ai/v1`), and their normalisation into a [`JobSpec`].
//!
//! Structural errors (unknown fields, bad quantities such as `32Gx`, contradictions
//! such as GPU memory with zero GPUs) are raised while deserialising, so the YAML
//! reader reports them with their line. Only pure types live here; reading files is
//! the application's job.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::model::*;
use crate::quantity::{Bytes, CpuMilli, Duration};

pub const API_VERSION: &str = "crater.ai/v1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Kind {
    TrainJob,
    InferenceService,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    pub api_version: String,
    pub kind: Kind,
    pub metadata: Metadata,
    pub spec: ManifestSpec,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ManifestSpec {
    #[serde(default)]
    pub image: String,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Labels a node must carry, as in a pod's `nodeSelector` (e.g. an SSD node).
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    pub resources: ResourcesSpec,
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub scheduler: Option<SchedulerSpec>,
    /// TrainJob: a number of workers; InferenceService: `{min, max}` or a number.
    #[serde(default)]
    pub replicas: Option<Replicas>,
    #[serde(default)]
    pub restart_policy: Option<RestartSpec>,
    /// Expected runtime (backfill; the simulated runtime in scenarios).
    #[serde(default)]
    pub estimated_runtime: Option<Duration>,
    #[serde(default)]
    pub autoscale: Option<AutoscaleSpec>,
    /// Taints its pods tolerate, as in a pod's `tolerations` (a team's reserved nodes).
    #[serde(default)]
    pub tolerations: Vec<crate::rules::Toleration>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourcesSpec {
    pub pool: String,
    #[serde(default)]
    pub gpu: Option<GpuSpec>,
    #[serde(default)]
    pub cpu: Option<CpuSpec>,
    #[serde(default)]
    pub memory: Option<CapacitySpec>,
    #[serde(default)]
    pub disk: Option<CapacitySpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    pub cores: CpuMilli,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacitySpec {
    pub capacity: Bytes,
}

/// GPU request, validated as it is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuSpec {
    pub count: u32,
    pub memory: Option<u64>,
    pub models: Vec<String>,
    pub shared: bool,
    pub share: Option<u32>,
    pub vendor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuSpecRaw {
    count: u32,
    #[serde(default)]
    memory: Option<Bytes>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    shared: bool,
    /// Compute share per card in milli-GPU (1..=1000) for shared cards.
    #[serde(default)]
    share: Option<u32>,
    /// `nvidia` (the default), `amd` or `ascend`.
    #[serde(default)]
    vendor: Option<String>,
}

impl<'de> Deserialize<'de> for GpuSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = GpuSpecRaw::deserialize(d)?;
        crate::limits::at_most("gpu.count", r.count, crate::limits::MAX_GPUS_PER_NODE)
            .map_err(de::Error::custom)?;
        if r.count == 0 && r.memory.is_some() {
            return Err(de::Error::custom(
                "gpu.memory is set but gpu.count is 0: a job without GPUs cannot ask for GPU memory",
            ));
        }
        if r.memory == Some(Bytes(0)) {
            return Err(de::Error::custom("gpu.memory must be more than 0"));
        }
        if let Some(s) = r.share {
            if s == 0 || s > 1000 {
                return Err(de::Error::custom(format!(
                    "gpu.share {s} must be within 1..=1000 (milli-GPU)"
                )));
            }
            if !r.shared {
                return Err(de::Error::custom(
                    "gpu.share is set but gpu.shared is false",
                ));
            }
        }
        let mut models: Vec<String> = r.models.iter().map(|m| m.to_lowercase()).collect();
        if let Some(m) = r.model {
            models.insert(0, m.to_lowercase());
        }
        models.dedup();
        let vendor = match r.vendor.as_deref().map(str::to_lowercase) {
            None => None,
            Some(v) if v == "nvidia" => None,
            Some(v) if v == "amd" || v == "ascend" => Some(v),
            Some(v) => {
                return Err(de::Error::custom(format!(
                    "gpu.vendor `{}` is not nvidia, amd or ascend",
                    crate::limits::echo(&v)
                )))
            }
        };
        Ok(GpuSpec {
            count: r.count,
            memory: r.memory.map(|b| b.0),
            models,
            shared: r.shared,
            share: r.share,
            vendor,
        })
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulerSpec {
    #[serde(default)]
    pub affinity: Option<AffinitySpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AffinitySpec {
    #[serde(default)]
    pub gpu_affinity: Option<GpuAffinity>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuAffinity {
    SameNode,
    Spread,
    Any,
}

/// `high`, `medium`, `low`, or an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority(pub i32);

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Priority;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("high, medium, low or an integer")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Priority, E> {
                match v.to_ascii_lowercase().as_str() {
                    "high" => Ok(Priority(PRIORITY_HIGH)),
                    "medium" => Ok(Priority(PRIORITY_MEDIUM)),
                    "low" => Ok(Priority(PRIORITY_LOW)),
                    _ => match v.parse::<i64>() {
                        Ok(n) => self.visit_i64(n),
                        Err(_) => Err(E::custom(format!(
                            "unknown priority `{}` (expected high, medium, low or an integer)",
                            crate::limits::echo(v)
                        ))),
                    },
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Priority, E> {
                let max = crate::limits::MAX_PRIORITY as i64;
                if !(-max..=max).contains(&v) {
                    return Err(E::custom(format!(
                        "priority {v} is outside the limit of -{max}..={max}"
                    )));
                }
                Ok(Priority(v as i32))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Priority, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
        d.deserialize_any(V)
    }
}

/// `3`, or `{min: 2, max: 8}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replicas {
    pub min: u32,
    pub max: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplicasRange {
    min: u32,
    max: u32,
}

impl<'de> Deserialize<'de> for Replicas {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Replicas;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of replicas or {min, max}")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Replicas, E> {
                let max = crate::limits::MAX_REPLICAS;
                let n = u32::try_from(v).ok().filter(|&n| n <= max).ok_or_else(|| {
                    E::custom(format!("replicas {v} is above the limit of {max}"))
                })?;
                if n == 0 {
                    return Err(E::custom("replicas must be at least 1"));
                }
                Ok(Replicas { min: n, max: n })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Replicas, E> {
                if v < 1 {
                    return Err(E::custom("replicas must be at least 1"));
                }
                self.visit_u64(v as u64)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Replicas, A::Error> {
                let r = ReplicasRange::deserialize(de::value::MapAccessDeserializer::new(map))?;
                crate::limits::at_most("replicas max", r.max, crate::limits::MAX_REPLICAS)
                    .map_err(de::Error::custom)?;
                if r.min == 0 || r.min > r.max {
                    return Err(de::Error::custom(format!(
                        "replicas min {} / max {} must satisfy 1 <= min <= max",
                        r.min, r.max
                    )));
                }
                Ok(Replicas {
                    min: r.min,
                    max: r.max,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `Never`, `OnFailure`, or `{policy: OnFailure, maxRestarts: 3, backoff: 10s}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartSpec(pub RestartPolicy);

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RestartMap {
    policy: String,
    #[serde(default)]
    max_restarts: Option<u32>,
    #[serde(default)]
    backoff: Option<Duration>,
}

fn restart_from<E: de::Error>(
    policy: &str,
    max: Option<u32>,
    backoff: Option<Duration>,
) -> Result<RestartSpec, E> {
    if let Some(m) = max {
        crate::limits::at_most("maxRestarts", m, crate::limits::MAX_RESTARTS).map_err(E::custom)?;
    }
    match policy {
        "Never" => Ok(RestartSpec(RestartPolicy::Never)),
        "OnFailure" => Ok(RestartSpec(RestartPolicy::OnFailure {
            max_restarts: max.unwrap_or(3),
            backoff_s: backoff.map(|d| d.0).unwrap_or(10),
        })),
        other => Err(E::custom(format!(
            "unknown restart policy `{}` (expected Never or OnFailure)",
            crate::limits::echo(other)
        ))),
    }
}

impl<'de> Deserialize<'de> for RestartSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RestartSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("Never, OnFailure or {policy, maxRestarts, backoff}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RestartSpec, E> {
                restart_from(v, None, None)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RestartSpec, A::Error> {
                let r = RestartMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                restart_from(&r.policy, r.max_restarts, r.backoff)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AutoscaleSpec {
    /// Only `gpu-memory-usage-rate` is supported.
    #[serde(default = "default_metric")]
    pub metric: String,
    pub target: u32,
    #[serde(default)]
    pub scale_down_stabilization: Option<Duration>,
    /// On Kubernetes: the labels of the metric's series (as an HPA's external metric
    /// selector); the service's own pod label when absent.
    #[serde(default)]
    pub selector: Option<MetricSelector>,
}

/// A metric's label selector, as an HPA writes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

fn default_metric() -> String {
    "gpu-memory-usage-rate".into()
}

/// A manifest that is well-formed but does not make sense as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    pub field: String,
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> SpecError {
    SpecError {
        field: field.into(),
        message: message.into(),
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

impl Manifest {
    /// Normalises the manifest into the scheduler's job description.
    pub fn to_job_spec(&self) -> Result<JobSpec, SpecError> {
        if self.api_version != API_VERSION {
            return Err(bad(
                "apiVersion",
                format!(
                    "`{}` is not supported (expected {API_VERSION})",
                    self.api_version
                ),
            ));
        }
        if !valid_name(&self.metadata.name) {
            return Err(bad(
                "metadata.name",
                format!(
                    "`{}` must be lower-case letters, digits, '-' or '.'",
                    self.metadata.name
                ),
            ));
        }
        let ns = self
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        if !valid_name(&ns) {
            return Err(bad(
                "metadata.namespace",
                format!("`{ns}` is not a valid namespace"),
            ));
        }
        let s = &self.spec;
        let gpu = s.resources.gpu.clone().unwrap_or(GpuSpec {
            count: 0,
            memory: None,
            models: Vec::new(),
            shared: false,
            share: None,
            vendor: None,
        });
        let affinity = match s
            .scheduler
            .as_ref()
            .and_then(|x| x.affinity.as_ref())
            .and_then(|a| a.gpu_affinity)
        {
            Some(GpuAffinity::SameNode) => Affinity::SameNode,
            Some(GpuAffinity::Spread) => Affinity::Spread,
            Some(GpuAffinity::Any) => Affinity::Any,
            None => match self.kind {
                Kind::TrainJob => Affinity::Any,
                Kind::InferenceService => Affinity::Spread,
            },
        };
        let (kind, replicas) = match self.kind {
            Kind::TrainJob => {
                if s.autoscale.is_some() {
                    return Err(bad(
                        "spec.autoscale",
                        "only an InferenceService autoscales; remove it from a TrainJob",
                    ));
                }
                let r = s.replicas.unwrap_or(Replicas { min: 1, max: 1 });
                if r.min != r.max {
                    return Err(bad(
                        "spec.replicas",
                        "a TrainJob takes a fixed number of replicas, not {min, max}",
                    ));
                }
                (JobKind::Train, r.min)
            }
            Kind::InferenceService => {
                let r = s.replicas.unwrap_or(Replicas { min: 1, max: 1 });
                let (target, window) = match &s.autoscale {
                    Some(a) => {
                        if a.metric != "gpu-memory-usage-rate" {
                            return Err(bad(
                                "spec.autoscale.metric",
                                format!(
                                    "`{}` is not supported (expected gpu-memory-usage-rate)",
                                    a.metric
                                ),
                            ));
                        }
                        if a.target == 0 || a.target > 100 {
                            return Err(bad(
                                "spec.autoscale.target",
                                "must be a percentage in 1..=100",
                            ));
                        }
                        (
                            a.target,
                            a.scale_down_stabilization.map(|d| d.0).unwrap_or(300),
                        )
                    }
                    None => (70, 300),
                };
                (
                    JobKind::Inference(Autoscale {
                        min: r.min,
                        max: r.max,
                        target_pct: target,
                        window_s: window,
                    }),
                    r.min,
                )
            }
        };
        if s.resources.pool.is_empty() {
            return Err(bad("spec.resources.pool", "must name a pool"));
        }
        Ok(JobSpec {
            name: self.metadata.name.clone(),
            project: ns,
            pool: s.resources.pool.clone(),
            kind,
            priority: s.priority.map(|p| p.0).unwrap_or(PRIORITY_MEDIUM),
            replicas,
            gpu: GpuRequest {
                count: gpu.count,
                memory_per_card: gpu.memory,
                models: gpu.models,
                shared: gpu.shared,
                milli: gpu.share,
                vendor: gpu.vendor,
                resource: None,
            },
            cpu_milli: s.resources.cpu.as_ref().map(|c| c.cores.0).unwrap_or(0),
            memory: s
                .resources
                .memory
                .as_ref()
                .map(|c| c.capacity.0)
                .unwrap_or(0),
            disk: s.resources.disk.as_ref().map(|c| c.capacity.0).unwrap_or(0),
            affinity,
            // A service keeps serving: its pods restart unless told otherwise.
            restart: s.restart_policy.map(|r| r.0).unwrap_or(match self.kind {
                Kind::TrainJob => RestartPolicy::Never,
                Kind::InferenceService => RestartPolicy::OnFailure {
                    max_restarts: u32::MAX,
                    backoff_s: 10,
                },
            }),
            est_runtime_s: s.estimated_runtime.map(|d| d.0),
            image: s.image.clone(),
            command: s.command.iter().chain(s.args.iter()).cloned().collect(),
            node_selector: s.node_selector.clone(),
            rules: crate::rules::PodRules {
                tolerations: s.tolerations.clone(),
                labels: self.metadata.labels.clone(),
                ..Default::default()
            },
            dispatched: None,
            sent_start_in: None,
            moved_from: None,
            cluster: cluster_of(&self.metadata)?,
            manifest: None,
        })
    }
}

/// The label or annotation naming the cluster a job is for, among several under one
/// maar: `auto` (where it starts first) or a cluster's name.
pub const LABEL_CLUSTER: &str = "crater.ai/cluster";

/// The cluster a manifest asks for (`crater.ai/cluster`, as an annotation or a label;
/// the annotation when both): `auto` or a name as the config or `--context` gives it.
fn cluster_of(m: &Metadata) -> Result<Option<String>, SpecError> {
    let (field, value) = match (
        m.annotations.get(LABEL_CLUSTER),
        m.labels.get(LABEL_CLUSTER),
    ) {
        (Some(v), _) => ("annotations", v),
        (None, Some(v)) => ("labels", v),
        (None, None) => return Ok(None),
    };
    let v = value.trim();
    if v.is_empty() || v.len() > 253 || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            &format!("metadata.{field}.{LABEL_CLUSTER}"),
            format!(
                "`{}` is not a cluster: `auto` (where it starts first) or a cluster's name",
                value.escape_debug()
            ),
        ));
    }
    Ok(Some(v.to_string()))
}

// ----- Kubernetes objects users deploy inference with today ------------------------

/// Metadata of a Kubernetes object (what maar reads of it).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct K8sMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A Kubernetes quantity: a number (`1`) or a string (`"48Gi"`, `"500m"`).
#[derive(Clone, Debug)]
pub enum K8sQuantity {
    Number(f64),
    Text(String),
}

/// Read as whatever the document holds, number or string. Not `#[serde(untagged)]`:
/// that buffers the value and builds an error for each variant that does not match,
/// and every pod the Kubernetes watch delivers carries its requests as strings.
impl<'de> Deserialize<'de> for K8sQuantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Q;
        impl Visitor<'_> for Q {
            type Value = K8sQuantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity: a number or a string such as \"48Gi\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<K8sQuantity, E> {
                Ok(K8sQuantity::Number(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<K8sQuantity, E> {
                Ok(K8sQuantity::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<K8sQuantity, E> {
                Ok(K8sQuantity::Number(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<K8sQuantity, E> {
                Ok(K8sQuantity::Text(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<K8sQuantity, E> {
                Ok(K8sQuantity::Text(v))
            }
        }
        d.deserialize_any(Q)
    }
}

impl K8sQuantity {
    fn text(&self) -> String {
        match self {
            // A whole number as written (within i64; past it, `1e30` stays `1e30`
            // rather than a saturated 9223372036854775807).
            K8sQuantity::Number(n) if n.fract() == 0.0 && n.abs() < 9.0e18 => {
                format!("{}", *n as i64)
            }
            K8sQuantity::Number(n) => format!("{n}"),
            K8sQuantity::Text(s) => s.clone(),
        }
    }
}

/// An `apps/v1` Deployment. Read leniently: real objects carry many fields maar does
/// not use; those it uses are checked.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    pub api_version: String,
    pub kind: String,
    pub metadata: K8sMeta,
    pub spec: DeploymentSpec,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    #[serde(default)]
    pub replicas: Option<u32>,
    pub template: PodTemplate,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PodTemplate {
    #[serde(default)]
    pub metadata: Option<K8sMeta>,
    pub spec: PodSpec,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub containers: Vec<Container>,
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Run one after another before the containers: the pod needs the most any one
    /// of them asks, if that is more than the containers' sum.
    #[serde(default)]
    pub init_containers: Vec<Container>,
    /// What the pod's runtime class adds to its requests.
    #[serde(default)]
    pub overhead: BTreeMap<String, K8sQuantity>,
    #[serde(default)]
    pub tolerations: Vec<crate::rules::Toleration>,
    #[serde(default)]
    pub affinity: Option<K8sAffinity>,
    #[serde(default)]
    pub topology_spread_constraints: Vec<K8sSpread>,
    /// The priority the API server's Priority admission set from the pod's
    /// PriorityClass.
    #[serde(default)]
    pub priority: Option<i32>,
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// `PreemptLowerPriority` or `Never`, set by the API server from the
    /// PriorityClass.
    #[serde(default)]
    pub preemption_policy: Option<String>,
    /// The scheduler it asks for (`maar` for maar's pods). Read with the rest when a
    /// watched pod's spec is read for its job, so the spec is read once.
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// The node it is bound to, as the API server has it (a user's file has none).
    #[serde(default)]
    pub node_name: Option<String>,
}

/// A pod's `affinity`: node affinity (required terms; preferred as a score), pod
/// affinity and anti-affinity (required terms; preferred ones are not kept).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct K8sAffinity {
    #[serde(default)]
    pub node_affinity: Option<K8sNodeAffinity>,
    #[serde(default)]
    pub pod_affinity: Option<K8sPodAffinity>,
    #[serde(default)]
    pub pod_anti_affinity: Option<K8sPodAffinity>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct K8sNodeAffinity {
    #[serde(default)]
    pub required_during_scheduling_ignored_during_execution: Option<K8sNodeSelector>,
    #[serde(default)]
    pub preferred_during_scheduling_ignored_during_execution: Vec<crate::rules::PreferredTerm>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct K8sNodeSelector {
    #[serde(default)]
    pub node_selector_terms: Vec<crate::rules::NodeSelectorTerm>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct K8sPodAffinity {
    #[serde(default)]
    pub required_during_scheduling_ignored_during_execution: Vec<crate::rules::PodAffinityTerm>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct K8sSpread {
    pub max_skew: u32,
    pub topology_key: String,
    pub when_unsatisfiable: String,
    #[serde(default)]
    pub label_selector: Option<crate::rules::LabelSelector>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default)]
    pub host_port: Option<i64>,
    #[serde(default)]
    pub host_ip: Option<String>,
    #[serde(default)]
    pub protocol: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Container {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub resources: Option<ContainerResources>,
    #[serde(default)]
    pub ports: Vec<ContainerPort>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ContainerResources {
    #[serde(default)]
    pub requests: BTreeMap<String, K8sQuantity>,
    #[serde(default)]
    pub limits: BTreeMap<String, K8sQuantity>,
}

/// What a pod's containers ask for, summed: GPUs (under their vendor's resource name),
/// CPU, memory, ephemeral storage; the first container's image and command.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodRequests {
    pub gpus: u32,
    /// The device resource when it is not the vendor's whole card: a MIG profile
    /// (`nvidia.com/mig-1g.10gb`) or time-sliced replicas (`nvidia.com/gpu.shared`).
    pub resource: Option<String>,
    /// `None` for NVIDIA (what GPU nodes hold unless labelled otherwise).
    pub vendor: Option<String>,
    pub cpu_milli: u64,
    pub memory: u64,
    pub disk: u64,
    pub image: String,
    pub command: Vec<String>,
    /// Other resources asked (extended resources such as `rdma/hca`, hugepages),
    /// which maar does not count on nodes.
    pub uncounted: Vec<String>,
}

/// One container's (or the overhead's) asks: GPUs and their device resource, CPU,
/// memory, disk.
#[derive(Clone, Copy, Default)]
struct ContainerAsks {
    gpus: u64,
    cpu: u64,
    mem: u64,
    disk: u64,
}

impl ContainerAsks {
    fn add(&mut self, o: &ContainerAsks) {
        self.gpus += o.gpus;
        self.cpu = self.cpu.saturating_add(o.cpu);
        self.mem = self.mem.saturating_add(o.mem);
        self.disk = self.disk.saturating_add(o.disk);
    }
    fn max(&mut self, o: &ContainerAsks) {
        self.gpus = self.gpus.max(o.gpus);
        self.cpu = self.cpu.max(o.cpu);
        self.mem = self.mem.max(o.mem);
        self.disk = self.disk.max(o.disk);
    }
}

/// A GPU count as Kubernetes writes it: a whole number (`2`, or `1k` with a decimal
/// suffix); one above the limit is told as such, not as a bad number.
fn gpu_count(t: &str) -> Result<u64, String> {
    let t = t.trim();
    let n = match t.parse::<u128>() {
        Ok(n) => n,
        Err(_) => {
            let whole = t
                .find(|c: char| !c.is_ascii_digit())
                .is_some_and(|i| i > 0 && matches!(&t[i..], "k" | "M" | "G" | "T" | "P"));
            if !whole {
                // A number too large for a count (`1e30`) is said to be too large.
                let max = crate::limits::MAX_GPUS_PER_NODE as f64;
                if let Ok(v) = t.parse::<f64>() {
                    if v.is_finite() && v.fract() == 0.0 && v > max {
                        return Err(format!(
                            "{} GPUs is above the limit of {max} for one pod (no node holds more)",
                            crate::limits::echo(t)
                        ));
                    }
                }
                return Err(format!(
                    "`{}` is not a whole number of GPUs",
                    crate::limits::echo(t)
                ));
            }
            crate::quantity::parse_bytes(t).map_err(|e| e.to_string())? as u128
        }
    };
    let max = crate::limits::MAX_GPUS_PER_NODE as u128;
    if n > max {
        return Err(format!(
            "{n} GPUs is above the limit of {max} for one pod (no node holds more)"
        ));
    }
    Ok(n as u64)
}

impl PodSpec {
    /// What one container asks: a request, else its limit (Kubernetes takes the limit
    /// as the request when only the limit is set). GPUs under their vendors' resource
    /// names; `vendor` and `device` carry the kind the pod's containers agree on.
    fn container_asks(
        r: &ContainerResources,
        field: &dyn Fn(&str) -> String,
        vendor: &mut Option<String>,
        device: &mut Option<String>,
    ) -> Result<ContainerAsks, SpecError> {
        let mut a = ContainerAsks::default();
        let get = |k: &str| r.requests.get(k).or_else(|| r.limits.get(k));
        for k in r.requests.keys().chain(r.limits.keys()) {
            match gpu_vendor(k) {
                Some(v) => {
                    if vendor.as_deref().is_some_and(|x| x != v) {
                        return Err(bad(&field(k), "one job asks for GPUs of one vendor"));
                    }
                    *vendor = Some(v.to_string());
                }
                None if k.ends_with("/gpu") => {
                    return Err(bad(
                        &field(k),
                        format!("`{k}` is not a GPU resource maar knows (nvidia.com/gpu, amd.com/gpu, huawei.com/Ascend910, ...)"),
                    ))
                }
                None => {}
            }
        }
        if let Some(k) = r
            .requests
            .keys()
            .chain(r.limits.keys())
            .find(|k| gpu_vendor(k).is_some())
            .cloned()
        {
            // One kind of device per pod: whole cards, one MIG profile, or
            // time-sliced replicas.
            if let Some(other) = r
                .requests
                .keys()
                .chain(r.limits.keys())
                .chain(device.iter())
                .find(|o| gpu_vendor(o).is_some() && **o != k)
            {
                return Err(bad(
                    &field(&k),
                    format!("one kind of GPU device per pod: `{k}` and `{other}`"),
                ));
            }
            *device = Some(k.clone());
            let t = get(&k).map(|q| q.text()).unwrap_or_default();
            a.gpus = gpu_count(&t).map_err(|m| bad(&field(&k), m))?;
        }
        if let Some(q) = get("cpu") {
            a.cpu = crate::quantity::parse_cpu_milli(&q.text())
                .map_err(|e| bad(&field("cpu"), e.to_string()))?;
        }
        if let Some(q) = get("memory") {
            a.mem = crate::quantity::parse_bytes(&q.text())
                .map_err(|e| bad(&field("memory"), e.to_string()))?;
        }
        if let Some(q) = get("ephemeral-storage") {
            a.disk = crate::quantity::parse_bytes(&q.text())
                .map_err(|e| bad(&field("ephemeral-storage"), e.to_string()))?;
        }
        Ok(a)
    }

    /// The pod's requests as kube-scheduler counts them: the containers' summed, or
    /// the most any one init container asks where that is more, plus the runtime
    /// class's overhead; `at` names the containers' field in errors.
    pub fn requests(&self, at: &str) -> Result<PodRequests, SpecError> {
        let mut vendor: Option<String> = None;
        let mut device: Option<String> = None;
        let mut sum = ContainerAsks::default();
        for (i, c) in self.containers.iter().enumerate() {
            let field = |k: &str| format!("{at}[{i}].resources.{k}");
            let r = c.resources.clone().unwrap_or_default();
            sum.add(&Self::container_asks(&r, &field, &mut vendor, &mut device)?);
        }
        let init_at = at.replace("containers", "initContainers");
        for (i, c) in self.init_containers.iter().enumerate() {
            let field = |k: &str| format!("{init_at}[{i}].resources.{k}");
            let r = c.resources.clone().unwrap_or_default();
            sum.max(&Self::container_asks(&r, &field, &mut vendor, &mut device)?);
        }
        if !self.overhead.is_empty() {
            let at_overhead = at.replace("containers", "overhead");
            let field = |k: &str| format!("{at_overhead}.{k}");
            let r = ContainerResources {
                requests: self.overhead.clone(),
                limits: BTreeMap::new(),
            };
            sum.add(&Self::container_asks(&r, &field, &mut vendor, &mut device)?);
        }
        // Resources maar does not count on nodes (anything but CPU, memory, ephemeral
        // storage and GPU devices), asked in any amount above zero.
        let mut uncounted: Vec<String> = self
            .containers
            .iter()
            .chain(self.init_containers.iter())
            .filter_map(|c| c.resources.as_ref())
            .flat_map(|r| r.requests.iter().chain(r.limits.iter()))
            .chain(self.overhead.iter())
            .filter(|(k, q)| {
                !matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage")
                    && gpu_vendor(k).is_none()
                    && !q.text().trim_start_matches('0').is_empty()
            })
            .map(|(k, _)| k.clone())
            .collect();
        uncounted.sort();
        uncounted.dedup();
        let gpus = crate::limits::at_most(
            "nvidia.com/gpu",
            sum.gpus,
            crate::limits::MAX_GPUS_PER_NODE as u64,
        )
        .map_err(|m| bad(at, m))? as u32;
        let (command, image) = self
            .containers
            .first()
            .map(|c| {
                (
                    c.command.iter().chain(c.args.iter()).cloned().collect(),
                    c.image.clone(),
                )
            })
            .unwrap_or_default();
        Ok(PodRequests {
            gpus,
            resource: device.filter(|d| !is_whole_gpu_resource(d)),
            vendor: vendor.filter(|v| v != "nvidia"),
            cpu_milli: sum.cpu,
            memory: sum.mem,
            disk: sum.disk,
            image,
            command,
            uncounted,
        })
    }

    /// The Kubernetes placement rules the pod carries (tolerations, node affinity,
    /// pod affinity and anti-affinity, topology spread with DoNotSchedule, host
    /// ports) and its labels; `at` names the spec in errors.
    pub fn rules(
        &self,
        labels: &BTreeMap<String, String>,
        at: &str,
    ) -> Result<crate::rules::PodRules, SpecError> {
        let mut r = crate::rules::PodRules {
            tolerations: self.tolerations.clone(),
            labels: labels.clone(),
            never_preempts: self.preemption_policy.as_deref() == Some("Never"),
            ..Default::default()
        };
        if let Some(a) = &self.affinity {
            if let Some(na) = &a.node_affinity {
                r.node_affinity = na
                    .required_during_scheduling_ignored_during_execution
                    .as_ref()
                    .map(|s| s.node_selector_terms.clone());
                r.preferred = na
                    .preferred_during_scheduling_ignored_during_execution
                    .clone();
            }
            if let Some(pa) = &a.pod_affinity {
                r.pod_affinity = pa
                    .required_during_scheduling_ignored_during_execution
                    .clone();
            }
            if let Some(pa) = &a.pod_anti_affinity {
                r.pod_anti_affinity = pa
                    .required_during_scheduling_ignored_during_execution
                    .clone();
            }
        }
        for (i, t) in self.topology_spread_constraints.iter().enumerate() {
            if t.max_skew == 0 {
                return Err(bad(
                    &format!("{at}.topologySpreadConstraints[{i}].maxSkew"),
                    "must be at least 1",
                ));
            }
            if t.when_unsatisfiable == "DoNotSchedule" {
                r.spread.push(crate::rules::SpreadConstraint {
                    max_skew: t.max_skew,
                    topology_key: t.topology_key.clone(),
                    label_selector: t.label_selector.clone(),
                });
            }
        }
        for (i, c) in self.containers.iter().enumerate() {
            for (j, p) in c.ports.iter().enumerate() {
                let Some(port) = p.host_port.filter(|p| *p != 0) else {
                    continue;
                };
                let port = u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| {
                    bad(
                        &format!("{at}.containers[{i}].ports[{j}].hostPort"),
                        format!("{port} is not a port (1-65535)"),
                    )
                })?;
                r.host_ports.push(crate::rules::HostPort {
                    port,
                    protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    ip: p.host_ip.clone().unwrap_or_default(),
                });
            }
        }
        Ok(r)
    }
}

/// A `v1` Pod, as a Kubernetes cluster holds it (read leniently: maar reads the fields
/// below and ignores the rest).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default)]
    pub metadata: K8sMeta,
    pub spec: PodSpec,
}

/// Annotations a pod may carry for maar.
pub const ANNOTATION_POOL: &str = "crater.ai/pool";
pub const ANNOTATION_PRIORITY: &str = "crater.ai/priority";
pub const ANNOTATION_RUNTIME: &str = "crater.ai/estimated-runtime";

impl Pod {
    /// The pod as a one-replica training job of its namespace's project: its
    /// containers' requests, its node selector (a `crater.ai/gpu-model` there is the
    /// model it accepts), and from its annotations the pool (`crater.ai/pool`, else
    /// the node selector's `crater.ai/pool`, else left empty), the priority
    /// (`crater.ai/priority`: high, medium, low or an integer) and the estimated
    /// runtime (`crater.ai/estimated-runtime`, for backfill). Kubernetes restarts its
    /// containers; maar does not resubmit a pod.
    pub fn to_job_spec(&self) -> Result<JobSpec, SpecError> {
        let m = &self.metadata;
        if m.name.is_empty() {
            return Err(bad("metadata.name", "a pod needs a name"));
        }
        let r = self.spec.requests("spec.containers")?;
        // A PriorityClass named: the priority the API server set from it (every class
        // a user can define keeps its value; the system classes above them are the
        // top, which other schedulers' pods hold too, so neither evicts the other).
        // Who may use a class is the cluster's to say (RBAC, ResourceQuota by class),
        // so it wins over the annotation, which anyone who makes a pod writes: that
        // says at most `high` (a pod annotated 900000 evicted pods of higher classes).
        let class = match (&self.spec.priority_class_name, self.spec.priority) {
            (Some(c), Some(p)) if !c.is_empty() => {
                Some(p.clamp(-crate::limits::MAX_PRIORITY, crate::limits::MAX_PRIORITY))
            }
            _ => None,
        };
        let priority = match (class, m.annotations.get(ANNOTATION_PRIORITY)) {
            (Some(p), _) => p,
            (None, None) => PRIORITY_MEDIUM,
            (None, Some(p)) => {
                let field = format!("metadata.annotations.{ANNOTATION_PRIORITY}");
                serde_json::from_value::<Priority>(serde_json::Value::String(p.clone()))
                    .map_err(|e| bad(&field, e.to_string()))?
                    .0
                    .min(PRIORITY_HIGH)
            }
        };
        let est_runtime_s = match m.annotations.get(ANNOTATION_RUNTIME) {
            None => None,
            Some(t) => Some(crate::quantity::parse_duration_s(t).map_err(|e| {
                bad(
                    &format!("metadata.annotations.{ANNOTATION_RUNTIME}"),
                    e.to_string(),
                )
            })?),
        };
        let sel = &self.spec.node_selector;
        Ok(JobSpec {
            name: m.name.clone(),
            project: m.namespace.clone().unwrap_or_else(|| "default".into()),
            pool: m
                .annotations
                .get(ANNOTATION_POOL)
                .or_else(|| sel.get(ANNOTATION_POOL))
                .cloned()
                .unwrap_or_default(),
            kind: JobKind::Train,
            priority,
            replicas: 1,
            gpu: GpuRequest {
                count: r.gpus,
                memory_per_card: None,
                models: sel
                    .get(LABEL_MODEL)
                    .map(|m| vec![m.to_lowercase()])
                    .unwrap_or_default(),
                shared: false,
                milli: None,
                vendor: r.vendor,
                resource: r.resource,
            },
            cpu_milli: r.cpu_milli,
            memory: r.memory,
            disk: r.disk,
            affinity: Affinity::Any,
            restart: RestartPolicy::Never,
            est_runtime_s,
            image: r.image,
            command: r.command,
            node_selector: sel
                .iter()
                .filter(|(k, _)| k.as_str() != ANNOTATION_POOL)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            rules: crate::rules::PodRules {
                uncounted: r.uncounted.clone(),
                ..self.spec.rules(&m.labels, "spec")?
            },
            dispatched: None,
            sent_start_in: None,
            moved_from: None,
            cluster: None,
            manifest: None,
        })
    }
}

/// An `autoscaling/v2` HorizontalPodAutoscaler.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hpa {
    pub api_version: String,
    pub kind: String,
    pub metadata: K8sMeta,
    pub spec: HpaSpec,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaSpec {
    pub scale_target_ref: TargetRef,
    #[serde(default)]
    pub min_replicas: Option<u32>,
    pub max_replicas: u32,
    #[serde(default)]
    pub metrics: Vec<HpaMetric>,
    #[serde(default)]
    pub behavior: Option<HpaBehavior>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct TargetRef {
    pub kind: String,
    pub name: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct HpaMetric {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub external: Option<MetricSource>,
    #[serde(default)]
    pub pods: Option<MetricSource>,
    #[serde(default)]
    pub object: Option<MetricSource>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct MetricSource {
    pub metric: MetricId,
    pub target: MetricTarget,
}

#[derive(Clone, Debug, Deserialize)]
pub struct MetricId {
    pub name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricTarget {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub average_value: Option<K8sQuantity>,
    #[serde(default)]
    pub value: Option<K8sQuantity>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaBehavior {
    #[serde(default)]
    pub scale_down: Option<ScaleRules>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleRules {
    #[serde(default)]
    pub stabilization_window_seconds: Option<u64>,
}

/// The vendor of a Kubernetes GPU resource name: `nvidia.com/gpu` (and its MIG
/// profiles `nvidia.com/mig-*`, its time-sliced `nvidia.com/gpu.shared`) -> nvidia,
/// `amd.com/gpu` -> amd, `huawei.com/Ascend910` (and other Ascend parts) -> ascend.
pub fn gpu_vendor(resource: &str) -> Option<&'static str> {
    match resource {
        "nvidia.com/gpu" | "nvidia.com/gpu.shared" => Some("nvidia"),
        r if r.starts_with("nvidia.com/mig-") => Some("nvidia"),
        "amd.com/gpu" => Some("amd"),
        r if r.starts_with("huawei.com/Ascend") => Some("ascend"),
        _ => None,
    }
}

/// Whether a GPU resource is its vendor's whole card (`nvidia.com/gpu`, `amd.com/gpu`,
/// `huawei.com/Ascend910`), not a MIG profile or time-sliced replicas.
pub fn is_whole_gpu_resource(resource: &str) -> bool {
    gpu_vendor(resource).is_some()
        && resource != "nvidia.com/gpu.shared"
        && !resource.starts_with("nvidia.com/mig-")
}

/// The metric maar's inference autoscaler keys on.
pub const USAGE_METRIC: &str = "crater_gpu_memory_usage_rate";

impl Deployment {
    /// The Deployment (and its HPA, when given) as an inference service: replicas and
    /// the HPA's bounds, target and scale-down window; requests summed over the
    /// containers (`nvidia.com/gpu`, `cpu`, `memory`, `ephemeral-storage`). The pool
    /// is the annotation or node selector `crater.ai/pool`, else left empty (the
    /// project's inference pool is chosen at submit).
    pub fn to_job_spec(&self, hpa: Option<&Hpa>) -> Result<JobSpec, SpecError> {
        if self.kind != "Deployment" {
            return Err(bad("kind", format!("`{}` is not a Deployment", self.kind)));
        }
        if self.metadata.name.is_empty() {
            return Err(bad("metadata.name", "a Deployment needs a name"));
        }
        let replicas = self.spec.replicas.unwrap_or(1);
        crate::limits::at_most("replicas", replicas, crate::limits::MAX_REPLICAS)
            .map_err(|m| bad("spec.replicas", m))?;
        let r = self
            .spec
            .template
            .spec
            .requests("spec.template.spec.containers")?;
        let (min, max, target, window) = match hpa {
            None => (replicas, replicas, 70, 300),
            Some(h) => {
                let s = &h.spec;
                if s.scale_target_ref.kind != "Deployment"
                    || s.scale_target_ref.name != self.metadata.name
                {
                    return Err(bad(
                        "spec.scaleTargetRef",
                        format!(
                            "the HorizontalPodAutoscaler {} scales {} {}, not this Deployment {}",
                            h.metadata.name,
                            s.scale_target_ref.kind,
                            s.scale_target_ref.name,
                            self.metadata.name
                        ),
                    ));
                }
                let m = s
                    .metrics
                    .iter()
                    .filter_map(|m| {
                        m.external
                            .as_ref()
                            .or(m.pods.as_ref())
                            .or(m.object.as_ref())
                    })
                    .find(|m| m.metric.name == USAGE_METRIC)
                    .ok_or_else(|| {
                        bad(
                            "spec.metrics",
                            format!(
                                "maar autoscales on {USAGE_METRIC}; this HPA names no such metric"
                            ),
                        )
                    })?;
                let t = m
                    .target
                    .average_value
                    .as_ref()
                    .or(m.target.value.as_ref())
                    .map(|q| q.text())
                    .unwrap_or_else(|| "70".into());
                let v: f64 = t
                    .trim_end_matches('%')
                    .parse()
                    .map_err(|_| bad("spec.metrics.target", format!("`{t}` is not a number")))?;
                // A rate may be written as a fraction (0.7) or a percentage (70).
                let pct = if v <= 1.0 { v * 100.0 } else { v };
                if !(1.0..=100.0).contains(&pct) {
                    return Err(bad(
                        "spec.metrics.target",
                        format!("{t} is not a usage rate within 0..1 or 1..100"),
                    ));
                }
                crate::limits::at_most("maxReplicas", s.max_replicas, crate::limits::MAX_REPLICAS)
                    .map_err(|m| bad("spec.maxReplicas", m))?;
                let min = s.min_replicas.unwrap_or(1);
                if min == 0 {
                    return Err(bad(
                        "spec.minReplicas",
                        "0: an HPA keeps at least one replica (minReplicas 1 or more)",
                    ));
                }
                if min > s.max_replicas {
                    return Err(bad(
                        "spec.minReplicas",
                        format!("{min} is above maxReplicas {}", s.max_replicas),
                    ));
                }
                let window = s
                    .behavior
                    .as_ref()
                    .and_then(|b| b.scale_down.as_ref())
                    .and_then(|r| r.stabilization_window_seconds)
                    .unwrap_or(300);
                (min, s.max_replicas, pct.round() as u32, window)
            }
        };
        let pool = self
            .metadata
            .annotations
            .get("crater.ai/pool")
            .or_else(|| self.spec.template.spec.node_selector.get("crater.ai/pool"))
            .cloned()
            .unwrap_or_default();
        Ok(JobSpec {
            name: self.metadata.name.clone(),
            project: self
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            pool,
            kind: JobKind::Inference(Autoscale {
                min,
                max,
                target_pct: target,
                window_s: window,
            }),
            priority: PRIORITY_MEDIUM,
            replicas: replicas.clamp(min, max.max(min)),
            gpu: GpuRequest {
                count: r.gpus,
                memory_per_card: None,
                models: self
                    .spec
                    .template
                    .spec
                    .node_selector
                    .get(LABEL_MODEL)
                    .map(|m| vec![m.to_lowercase()])
                    .unwrap_or_default(),
                shared: false,
                milli: None,
                // NVIDIA is what GPU nodes hold unless labelled otherwise.
                vendor: r.vendor.clone(),
                resource: r.resource.clone(),
            },
            cpu_milli: r.cpu_milli,
            memory: r.memory,
            disk: r.disk,
            affinity: Affinity::Spread,
            restart: RestartPolicy::OnFailure {
                max_restarts: u32::MAX,
                backoff_s: 10,
            },
            est_runtime_s: None,
            image: r.image,
            command: r.command,
            node_selector: self
                .spec
                .template
                .spec
                .node_selector
                .iter()
                .filter(|(k, _)| k.as_str() != "crater.ai/pool")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            rules: self.spec.template.spec.rules(
                &self
                    .spec
                    .template
                    .metadata
                    .as_ref()
                    .map(|m| m.labels.clone())
                    .unwrap_or_default(),
                "spec.template.spec",
            )?,
            dispatched: None,
            sent_start_in: None,
            moved_from: None,
            cluster: None,
            manifest: None,
        })
    }
}

/// A project's quota in one pool, as a scenario and a Kubernetes `Quota` object write
/// it: `reserved` (guaranteed) and `max` (the most it may hold, borrowing); each of
/// `gpu` (a number, fractions for shared cards), `gpu_memory`, `cpu`, `memory`,
/// `disk`. A dimension not given in `max` has no limit.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct QuotaSpec {
    #[serde(default)]
    pub reserved: AmountSpec,
    #[serde(default)]
    pub max: AmountSpec,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AmountSpec {
    #[serde(default)]
    pub gpu: Option<f64>,
    #[serde(default)]
    pub gpu_memory: Option<Bytes>,
    #[serde(default)]
    pub cpu: Option<CpuMilli>,
    #[serde(default)]
    pub memory: Option<Bytes>,
    #[serde(default)]
    pub disk: Option<Bytes>,
}

impl AmountSpec {
    /// As amounts (absent: 0) and as limits (absent: none).
    fn amounts(&self) -> Result<(Resources, Limits), String> {
        if let Some(g) = self.gpu {
            if !g.is_finite() || g < 0.0 || g > crate::limits::MAX_GPUS_PER_NODE as f64 * 1e6 {
                return Err(format!("gpu {g} is not a count of GPUs"));
            }
        }
        let gpu = self.gpu.map(|g| (g * 1000.0).round() as u64);
        let r = Resources {
            gpu_milli: gpu.unwrap_or(0),
            gpu_mem: self.gpu_memory.map(|b| b.0).unwrap_or(0),
            cpu_milli: self.cpu.map(|c| c.0).unwrap_or(0),
            memory: self.memory.map(|b| b.0).unwrap_or(0),
            disk: self.disk.map(|b| b.0).unwrap_or(0),
        };
        let l = Limits {
            gpu_milli: gpu,
            gpu_mem: self.gpu_memory.map(|b| b.0),
            cpu_milli: self.cpu.map(|c| c.0),
            memory: self.memory.map(|b| b.0),
            disk: self.disk.map(|b| b.0),
        };
        Ok((r, l))
    }
}

impl QuotaSpec {
    /// The quota; refused when something reserved exceeds its max.
    pub fn to_quota(&self) -> Result<Quota, String> {
        let (reserved, _) = self.reserved.amounts()?;
        let (_, max) = self.max.amounts()?;
        for d in Dim::ALL {
            if let Some(m) = max.get(d) {
                if reserved.get(d) > m {
                    return Err(format!("reserved {} exceeds max {}", d.name(), d.fmt(m)));
                }
            }
        }
        Ok(Quota { reserved, max })
    }
}
