//! The cluster model: nodes and their GPUs, pools, projects with quotas, jobs.
//!
//! Everything here is plain data. Indices (`NodeId`, `JobId`, ...) are positions in the
//! cluster's vectors, so iteration order is insertion order and results are deterministic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::quantity::{fmt_bytes, fmt_cpu, fmt_gpus};

pub const LABEL_VENDOR: &str = "crater.ai/gpu-vendor";
pub const LABEL_MODEL: &str = "crater.ai/gpu-model";
pub const LABEL_MEMORY: &str = "crater.ai/gpu-memory";
pub const LABEL_COUNT: &str = "crater.ai/gpu-count";
pub const LABEL_ROLE: &str = "crater.ai/node-role";

pub type NodeId = u32;
pub type JobId = u32;
pub type PoolId = u16;
pub type ProjectId = u16;

/// A whole GPU in GPU-milli units.
pub const GPU_MILLI: u32 = 1000;

/// Amounts of every schedulable resource. GPUs are counted in milli (1000 = one card)
/// so that shared cards and whole cards add up in one number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub gpu_milli: u64,
    pub gpu_mem: u64,
    pub cpu_milli: u64,
    pub memory: u64,
    pub disk: u64,
}

/// The resource dimensions, in the order they are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    Gpu,
    GpuMemory,
    Cpu,
    Memory,
    Disk,
}

impl Dim {
    pub const ALL: [Dim; 5] = [Dim::Gpu, Dim::GpuMemory, Dim::Cpu, Dim::Memory, Dim::Disk];

    /// The dimension's id in machine output (as serialized): `gpu`, `gpu_memory`, ...
    pub fn id(self) -> &'static str {
        match self {
            Dim::Gpu => "gpu",
            Dim::GpuMemory => "gpu_memory",
            Dim::Cpu => "cpu",
            Dim::Memory => "memory",
            Dim::Disk => "disk",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dim::Gpu => "GPUs",
            Dim::GpuMemory => "GPU memory",
            Dim::Cpu => "CPU",
            Dim::Memory => "memory",
            Dim::Disk => "disk",
        }
    }

    /// Formats an amount of this dimension for people.
    pub fn fmt(self, v: u64) -> String {
        match self {
            Dim::Gpu => fmt_gpus(v),
            Dim::Cpu => fmt_cpu(v),
            _ => fmt_bytes(v),
        }
    }
}

impl Resources {
    pub fn get(&self, d: Dim) -> u64 {
        match d {
            Dim::Gpu => self.gpu_milli,
            Dim::GpuMemory => self.gpu_mem,
            Dim::Cpu => self.cpu_milli,
            Dim::Memory => self.memory,
            Dim::Disk => self.disk,
        }
    }

    pub fn get_mut(&mut self, d: Dim) -> &mut u64 {
        match d {
            Dim::Gpu => &mut self.gpu_milli,
            Dim::GpuMemory => &mut self.gpu_mem,
            Dim::Cpu => &mut self.cpu_milli,
            Dim::Memory => &mut self.memory,
            Dim::Disk => &mut self.disk,
        }
    }

    /// Adds another amount (saturating: amounts are bounded when read, sums of many
    /// cannot wrap).
    pub fn add(&mut self, o: &Resources) {
        for d in Dim::ALL {
            let v = self.get_mut(d);
            *v = v.saturating_add(o.get(d));
        }
    }

    pub fn sub(&mut self, o: &Resources) {
        for d in Dim::ALL {
            let v = self.get_mut(d);
            *v = v.saturating_sub(o.get(d));
        }
    }

    pub fn scaled(&self, n: u64) -> Resources {
        let mut r = *self;
        for d in Dim::ALL {
            let v = r.get_mut(d);
            *v = v.saturating_mul(n);
        }
        r
    }
}

/// Whether a node can run work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason")]
pub enum Condition {
    Ready,
    NotReady(String),
}

/// A GPU's health as the agent (or the simulation) reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason")]
pub enum Health {
    #[default]
    Healthy,
    Unhealthy(String),
}

/// One job's share of a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuAlloc {
    pub job: JobId,
    /// Compute share in milli (1000 = the whole card).
    pub milli: u32,
    /// GPU memory held, bytes.
    pub mem: u64,
}

/// A physical GPU on a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub index: u32,
    /// Shared with the node's copies (a prospect's copy of a node took 16 strings).
    pub uuid: std::sync::Arc<str>,
    pub model: std::sync::Arc<str>,
    pub memory: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub mig: bool,
    #[serde(default, skip_serializing_if = "is_default")]
    pub health: Health,
    #[serde(default, skip_serializing_if = "is_default")]
    pub cordoned: bool,
    /// The jobs' shares of it: most cards hold one job, kept inline (a copied node
    /// copied each card's list).
    #[serde(default, skip_serializing_if = "is_default")]
    pub allocs: smallvec::SmallVec<[GpuAlloc; 1]>,
    /// Utilisation 0-100 and memory in use, as last reported (simulated or measured).
    #[serde(default, skip_serializing_if = "is_default")]
    pub util_pct: u8,
    #[serde(default, skip_serializing_if = "is_default")]
    pub mem_used: u64,
    /// Temperature (Celsius) and board power (watts), as last reported.
    #[serde(default, skip_serializing_if = "is_default")]
    pub temp_c: u8,
    #[serde(default, skip_serializing_if = "is_default")]
    pub power_w: u16,
    /// The device resource this card is (Kubernetes: a MIG instance
    /// `nvidia.com/mig-1g.10gb`, a time-sliced `nvidia.com/gpu.shared` replica); `None`
    /// for a whole card. A job takes cards of the resource it asks for only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<std::sync::Arc<str>>,
}

impl Gpu {
    /// A healthy, uncordoned, unallocated card.
    pub fn new(
        index: u32,
        uuid: impl Into<std::sync::Arc<str>>,
        model: impl Into<std::sync::Arc<str>>,
        memory: u64,
        mig: bool,
    ) -> Gpu {
        Gpu {
            index,
            uuid: uuid.into(),
            model: model.into(),
            memory,
            mig,
            health: Health::Healthy,
            cordoned: false,
            allocs: smallvec::SmallVec::new(),
            util_pct: 0,
            mem_used: 0,
            temp_c: 0,
            power_w: 0,
            resource: None,
        }
    }

    pub fn used_milli(&self) -> u32 {
        self.allocs.iter().map(|a| a.milli).sum()
    }
    pub fn used_mem(&self) -> u64 {
        self.allocs.iter().map(|a| a.mem).sum()
    }
    pub fn free_milli(&self) -> u32 {
        GPU_MILLI.saturating_sub(self.used_milli())
    }
    pub fn free_mem(&self) -> u64 {
        self.memory.saturating_sub(self.used_mem())
    }
    pub fn usable(&self) -> bool {
        self.health == Health::Healthy && !self.cordoned
    }
    /// Whether the whole card is free and usable.
    pub fn is_free(&self) -> bool {
        self.allocs.is_empty() && self.usable()
    }
}

/// A node: capacity, labels, condition and GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "NodeData")]
pub struct Node {
    pub name: String,
    /// Labels; change them with [`Node::set_labels`] so derived facts stay right.
    /// Shared between a cluster and its copies (a prospect's, a forecast's): labels
    /// change seldom and a copy need not copy them.
    labels: std::sync::Arc<BTreeMap<String, String>>,
    /// Derived from the labels: the GPU model label when model and count are set.
    #[serde(skip)]
    gpu_label: Option<std::sync::Arc<str>>,
    /// The `crater.ai/gpu-vendor` label, lower-case; None when absent (NVIDIA).
    #[serde(skip)]
    vendor_label: Option<std::sync::Arc<str>>,
    pub cpu_milli: u64,
    pub memory: u64,
    pub disk: u64,
    pub condition: Condition,
    #[serde(default, skip_serializing_if = "is_default")]
    pub cordoned: bool,
    /// Physical cards. Only counted by the scheduler when the node's GPU labels say so.
    pub gpus: Vec<Gpu>,
    /// Pool whose selector the node matches (first match), if any.
    pub pool: Option<PoolId>,
    /// Requested resources of jobs placed here.
    #[serde(default, skip_serializing_if = "is_default")]
    pub alloc_cpu: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub alloc_mem: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub alloc_disk: u64,
    /// Pods the node takes at most (Kubernetes: allocatable `pods`); 0: no limit.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_pods: u32,
    /// Replicas placed here (counted again from the jobs' placements on restore).
    #[serde(default, skip_serializing_if = "is_default")]
    pub alloc_pods: u32,
    /// Disk used by things other than jobs (images, logs): the "disk filling" fault.
    #[serde(default, skip_serializing_if = "is_default")]
    pub disk_external: u64,
    /// Jobs with at least one replica here, in placement order.
    #[serde(default, skip_serializing_if = "is_default")]
    pub jobs: Vec<JobId>,
    /// What the host itself uses, as last measured (local mode); `None` when not
    /// measured (the simulation).
    #[serde(default, skip_serializing_if = "is_default")]
    pub host: Option<HostUsage>,
    /// Kubernetes taints (`spec.taints`): pods that do not tolerate one with a
    /// NoSchedule or NoExecute effect are kept off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<crate::rules::Taint>,
}

/// A host's measured use: CPU busy share, memory in use, load over a minute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostUsage {
    /// Percent of all CPUs busy, 0-100.
    pub cpu_busy_pct: u8,
    pub memory_used: u64,
    /// Load average over one minute, in hundredths.
    pub load1_centi: u32,
}

impl std::fmt::Display for HostUsage {
    /// As the tables show it: `cpu 12% mem 3.1Gi load 0.42`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cpu {}% mem {} load {:.2}",
            self.cpu_busy_pct,
            crate::quantity::fmt_bytes(self.memory_used),
            self.load1_centi as f64 / 100.0
        )
    }
}

/// A node as stored: the same fields, without those derived from the labels.
#[derive(Deserialize)]
struct NodeData {
    name: String,
    labels: BTreeMap<String, String>,
    cpu_milli: u64,
    memory: u64,
    disk: u64,
    condition: Condition,
    #[serde(default)]
    cordoned: bool,
    gpus: Vec<Gpu>,
    pool: Option<PoolId>,
    #[serde(default)]
    alloc_cpu: u64,
    #[serde(default)]
    alloc_mem: u64,
    #[serde(default)]
    alloc_disk: u64,
    #[serde(default)]
    max_pods: u32,
    #[serde(default)]
    alloc_pods: u32,
    #[serde(default)]
    disk_external: u64,
    #[serde(default)]
    jobs: Vec<JobId>,
    #[serde(default)]
    host: Option<HostUsage>,
    #[serde(default)]
    taints: Vec<crate::rules::Taint>,
}

impl From<NodeData> for Node {
    fn from(d: NodeData) -> Node {
        let mut n = Node {
            name: d.name,
            labels: Default::default(),
            gpu_label: None,
            vendor_label: None,
            cpu_milli: d.cpu_milli,
            memory: d.memory,
            disk: d.disk,
            condition: d.condition,
            cordoned: d.cordoned,
            gpus: d.gpus,
            pool: d.pool,
            alloc_cpu: d.alloc_cpu,
            alloc_mem: d.alloc_mem,
            alloc_disk: d.alloc_disk,
            max_pods: d.max_pods,
            alloc_pods: d.alloc_pods,
            disk_external: d.disk_external,
            jobs: d.jobs,
            host: d.host,
            taints: d.taints,
        };
        n.set_labels(d.labels);
        n
    }
}

/// Bumped by every [`Node::set_labels`] (see [`Node::labels_generation`]).
static LABELS_GEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Node {
    /// A Ready, uncordoned node with nothing placed on it.
    pub fn new(
        name: impl Into<String>,
        labels: BTreeMap<String, String>,
        cpu_milli: u64,
        memory: u64,
        disk: u64,
        gpus: Vec<Gpu>,
    ) -> Node {
        let mut n = Node {
            name: name.into(),
            labels: Default::default(),
            gpu_label: None,
            vendor_label: None,
            cpu_milli,
            memory,
            disk,
            condition: Condition::Ready,
            cordoned: false,
            gpus,
            pool: None,
            alloc_cpu: 0,
            alloc_mem: 0,
            alloc_disk: 0,
            max_pods: 0,
            alloc_pods: 0,
            disk_external: 0,
            jobs: Vec::new(),
            host: None,
            taints: Vec::new(),
        };
        n.set_labels(labels);
        n
    }

    /// Changes each time any node's labels are set, in any cluster: what is derived
    /// from nodes' labels and cached (the pod rules' topology domains) is kept while it
    /// stays the same.
    pub fn labels_generation() -> u64 {
        LABELS_GEN.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// Replaces the labels. (Within a cluster, use `Cluster::relabel_node`, which also
    /// moves the node between pools.)
    pub fn set_labels(&mut self, labels: BTreeMap<String, String>) {
        LABELS_GEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.vendor_label = labels.get(LABEL_VENDOR).map(|v| v.to_lowercase().into());
        self.gpu_label = match (labels.get(LABEL_MODEL), labels.contains_key(LABEL_COUNT)) {
            (Some(m), true) => Some(m.to_lowercase().into()),
            _ => None,
        };
        self.labels = std::sync::Arc::new(labels);
    }

    /// True when the crater.ai labels describe the node's GPUs (model and count).
    /// The node's GPU vendor label, lower-case (None: unlabelled, which means NVIDIA).
    pub fn vendor_label(&self) -> Option<&str> {
        self.vendor_label.as_deref()
    }

    pub fn gpu_labelled(&self) -> bool {
        self.gpu_label.is_some()
    }

    /// GPUs the scheduler may use: none unless the node is labelled.
    pub fn sched_gpus(&self) -> &[Gpu] {
        if self.gpu_labelled() {
            &self.gpus
        } else {
            &[]
        }
    }

    /// The GPU model the scheduler sees (from the label), lower-cased.
    pub fn gpu_model(&self) -> Option<&str> {
        if self.gpus.is_empty() {
            return None;
        }
        self.gpu_label.as_deref()
    }

    /// The GPU model label, shared (cheap to clone into verdicts).
    pub fn gpu_model_arc(&self) -> std::sync::Arc<str> {
        self.gpu_label
            .clone()
            .unwrap_or_else(|| std::sync::Arc::from(""))
    }

    pub fn ready(&self) -> bool {
        self.condition == Condition::Ready
    }

    /// Cards fully free, healthy and not cordoned.
    pub fn free_whole_gpus(&self) -> u32 {
        self.sched_gpus().iter().filter(|g| g.is_free()).count() as u32
    }

    pub fn disk_used(&self) -> u64 {
        self.alloc_disk + self.disk_external
    }
}

/// The kind of work a pool is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolKind {
    Training,
    Inference,
    Test,
}

/// Overcommit ratios per resource. GPUs stay at 1.0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Overcommit {
    pub cpu: f64,
    pub memory: f64,
}

impl Default for Overcommit {
    fn default() -> Self {
        Overcommit {
            cpu: 1.0,
            memory: 1.0,
        }
    }
}

/// A pool of nodes chosen by labels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub name: String,
    pub kind: PoolKind,
    pub selector: BTreeMap<String, String>,
    pub overcommit: Overcommit,
    /// Pools that may borrow this pool's idle nodes (reclaimed when this pool needs them).
    pub lend_to: Vec<PoolId>,
}

/// A project's quota in one pool. `None` in `max` means no limit for that resource.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Quota {
    pub reserved: Resources,
    pub max: Limits,
}

/// Upper limits per dimension, `None` meaning unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub gpu_milli: Option<u64>,
    pub gpu_mem: Option<u64>,
    pub cpu_milli: Option<u64>,
    pub memory: Option<u64>,
    pub disk: Option<u64>,
}

impl Limits {
    pub fn get(&self, d: Dim) -> Option<u64> {
        match d {
            Dim::Gpu => self.gpu_milli,
            Dim::GpuMemory => self.gpu_mem,
            Dim::Cpu => self.cpu_milli,
            Dim::Memory => self.memory,
            Dim::Disk => self.disk,
        }
    }
    pub fn get_mut(&mut self, d: Dim) -> &mut Option<u64> {
        match d {
            Dim::Gpu => &mut self.gpu_milli,
            Dim::GpuMemory => &mut self.gpu_mem,
            Dim::Cpu => &mut self.cpu_milli,
            Dim::Memory => &mut self.memory,
            Dim::Disk => &mut self.disk,
        }
    }
}

/// A tenant. Its namespace in job manifests is its name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Project {
    pub name: String,
    pub department: String,
    /// Quota per pool; a pool absent here admits nothing for this project.
    pub quotas: BTreeMap<PoolId, Quota>,
}

/// A project's request for more quota, waiting for an operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaRequest {
    pub id: u32,
    pub project: ProjectId,
    pub pool: PoolId,
    /// Extra GPUs asked for (added to `max`, and to `reserved` when `reserved` is set).
    pub gpus: u32,
    pub reserved: bool,
    pub reason: String,
    pub status: RequestStatus,
    pub created: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", content = "reason")]
pub enum RequestStatus {
    Pending,
    Approved,
    Rejected(String),
}

/// A job's one-line reason, shared between jobs that have the same one.
pub type Reason = std::sync::Arc<str>;

/// Named priorities; integers may be used too.
pub const PRIORITY_HIGH: i32 = 100;
pub const PRIORITY_MEDIUM: i32 = 50;
pub const PRIORITY_LOW: i32 = 10;

pub fn priority_name(p: i32) -> String {
    match p {
        PRIORITY_HIGH => "high".into(),
        PRIORITY_MEDIUM => "medium".into(),
        PRIORITY_LOW => "low".into(),
        other => other.to_string(),
    }
}

/// A priority as an operator writes it: `high`, `medium`, `low`, or a number within
/// ±[`crate::limits::MAX_PRIORITY`]; `Err` says what is accepted. Every face reads it
/// with this, and the core refuses a number beyond the limit whoever sends it.
pub fn parse_priority(s: &str) -> Result<i32, String> {
    match s {
        "high" => Ok(PRIORITY_HIGH),
        "medium" => Ok(PRIORITY_MEDIUM),
        "low" => Ok(PRIORITY_LOW),
        other => other
            .parse::<i32>()
            .ok()
            .filter(|p| p.abs() <= crate::limits::MAX_PRIORITY)
            .ok_or_else(|| {
                format!(
                    "`{}` is not high, medium, low or a number within ±{}",
                    crate::limits::echo(other),
                    crate::limits::MAX_PRIORITY
                )
            }),
    }
}

/// How the replicas (or the GPUs) of a job are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Affinity {
    /// No constraint: pack for least fragmentation.
    Any,
    /// All replicas on one node.
    SameNode,
    /// Replicas on distinct nodes.
    Spread,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy")]
pub enum RestartPolicy {
    Never,
    OnFailure { max_restarts: u32, backoff_s: u64 },
}

/// GPU request of one replica.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRequest {
    pub count: u32,
    /// Memory needed on each card; `None` means any card size.
    #[serde(default, skip_serializing_if = "is_default")]
    pub memory_per_card: Option<u64>,
    /// Allowed models (lower-case); empty means any.
    #[serde(default, skip_serializing_if = "is_default")]
    pub models: Vec<String>,
    /// Shared cards: the job takes a slice (memory, and compute `milli`) of each card.
    #[serde(default, skip_serializing_if = "is_default")]
    pub shared: bool,
    /// Compute share per card when shared (1..=1000); derived from memory if absent.
    #[serde(default, skip_serializing_if = "is_default")]
    pub milli: Option<u32>,
    /// The GPU vendor (`nvidia`, `amd`, `ascend`), matched against a node's
    /// `crater.ai/gpu-vendor` label; `None` takes any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// The device resource the cards are taken from when it is not the vendor's
    /// whole card (`nvidia.com/mig-1g.10gb`, `nvidia.com/gpu.shared`): only cards of
    /// that resource fit (see [`Gpu::resource`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// Autoscaling of an inference service on GPU-memory usage rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Autoscale {
    pub min: u32,
    pub max: u32,
    /// Target GPU-memory usage rate, percent.
    pub target_pct: u32,
    /// Scale-down stabilization window, seconds.
    pub window_s: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Train,
    Inference(Autoscale),
}

/// A job as the scheduler sees it, normalised from a manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub name: String,
    pub project: String,
    pub pool: String,
    pub kind: JobKind,
    pub priority: i32,
    /// Replicas to start (all or none for training; the initial count for inference).
    pub replicas: u32,
    pub gpu: GpuRequest,
    pub cpu_milli: u64,
    pub memory: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub disk: u64,
    pub affinity: Affinity,
    pub restart: RestartPolicy,
    /// Estimated runtime used by backfill and as the simulated runtime, seconds.
    #[serde(default, skip_serializing_if = "is_default")]
    pub est_runtime_s: Option<u64>,
    pub image: String,
    /// The command and its arguments (`spec.command` then `spec.args`): what local
    /// mode runs; empty when the manifest gives none (the image's own entry point).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Labels a node must carry (`nodeSelector`), e.g. an SSD node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Kubernetes placement rules (tolerations, node and pod affinity, topology
    /// spread, host ports) and the pod's labels: `rules.rs`.
    #[serde(default, skip_serializing_if = "crate::rules::PodRules::is_empty")]
    pub rules: crate::rules::PodRules,
    /// Why it was sent to this cluster among several (`crate::dispatch`): "sent to
    /// site-b: starts now there; in lab it would start in about 2h, ...". Kept with
    /// the job (the record's submit, explain); none when it was submitted here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatched: Option<String>,
    /// Seconds it was expected to wait where it was sent (none: no cluster foresaw a
    /// start); past them by [`crate::dispatch::MOVE_AFTER_S`] it may be moved, once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_start_in: Option<u64>,
    /// The cluster it was moved from: a job is moved at most once, so this one stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
    /// The cluster its file asks for (`crater.ai/cluster`, a label or annotation):
    /// `auto` for the one where it starts first, or a cluster's name. Where several
    /// clusters run under one maar, a job applied to one of them with it is sent
    /// there once ([`crate::dispatch::to_send`]); alone, it runs where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The object as its file gave it (a TrainJob or InferenceService, as JSON), for a
    /// backend that makes it in its world: on Kubernetes a submit (a dispatch among
    /// clusters) creates that object, unchanged, in the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<serde_json::Value>,
}

impl JobSpec {
    /// `project/name`: how the cluster knows the job (`Cluster::job_id`).
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.project, self.name)
    }

    /// Whether it names the nodes it may use: a node selector or a required node
    /// affinity (loose jobs keep off the few nodes such jobs need).
    pub fn is_constrained(&self) -> bool {
        !self.node_selector.is_empty() || self.rules.node_affinity.is_some()
    }

    /// A training job of one replica with `gpus` whole cards of any model, 1 CPU, 1 GiB
    /// of memory, medium priority, no estimate: what tests and tools start from before
    /// setting the fields they care about.
    pub fn train(name: &str, project: &str, pool: &str, gpus: u32) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            project: project.to_string(),
            pool: pool.to_string(),
            kind: JobKind::Train,
            priority: PRIORITY_MEDIUM,
            replicas: 1,
            gpu: GpuRequest {
                count: gpus,
                memory_per_card: None,
                models: Vec::new(),
                shared: false,
                milli: None,
                vendor: None,
                resource: None,
            },
            cpu_milli: 1000,
            memory: 1 << 30,
            disk: 0,
            affinity: Affinity::Any,
            restart: RestartPolicy::Never,
            est_runtime_s: None,
            image: String::new(),
            command: Vec::new(),
            node_selector: BTreeMap::new(),
            rules: Default::default(),
            dispatched: None,
            sent_start_in: None,
            moved_from: None,
            cluster: None,
            manifest: None,
        }
    }

    /// Per-replica GPU milli on one card.
    pub fn milli_per_card(&self, card_memory: u64) -> u32 {
        if !self.gpu.shared {
            return GPU_MILLI;
        }
        if let Some(m) = self.gpu.milli {
            return m.clamp(1, GPU_MILLI);
        }
        match self.gpu.memory_per_card {
            Some(mem) if card_memory > 0 => ((mem as u128 * GPU_MILLI as u128)
                .div_ceil(card_memory as u128) as u32)
                .clamp(1, GPU_MILLI),
            _ => GPU_MILLI,
        }
    }

    /// One replica's request in quota units (whole GPUs as milli; memory as asked, or a
    /// nominal card when no per-card memory is given).
    pub fn replica_request(&self) -> Resources {
        // A shared slice sized by memory depends on the card it lands on; the quota
        // pre-check takes one tenth of a card as a floor and the placement's real
        // share is checked against the quota once it is known.
        let gpu_milli = if self.gpu.shared {
            let per = match (self.gpu.milli, self.gpu.memory_per_card) {
                (Some(m), _) => m,
                (None, Some(_)) => GPU_MILLI / 10,
                (None, None) => GPU_MILLI,
            };
            per as u64 * self.gpu.count as u64
        } else {
            GPU_MILLI as u64 * self.gpu.count as u64
        };
        Resources {
            gpu_milli,
            gpu_mem: self.gpu.memory_per_card.unwrap_or(0) * self.gpu.count as u64,
            cpu_milli: self.cpu_milli,
            memory: self.memory,
            disk: self.disk,
        }
    }

    /// One-line shape, e.g. `2x a100 32Gi, 16 CPU, 64Gi`.
    pub fn shape(&self) -> String {
        self.shape_with(self.replicas)
    }

    /// The shape with `replicas` replicas (a scaled service's current count).
    pub fn shape_with(&self, replicas: u32) -> String {
        let mut s = String::new();
        if self.gpu.count > 0 {
            match &self.gpu.resource {
                Some(r) => s.push_str(&format!("{}x {r}", self.gpu.count)),
                None => s.push_str(&format!("{}x GPU", self.gpu.count)),
            }
            if let Some(v) = &self.gpu.vendor {
                s.push_str(&format!(" {}", v.to_uppercase()));
            }
            if !self.gpu.models.is_empty() {
                s.push_str(&format!(" [{}]", self.gpu.models.join(",")));
            }
            if let Some(m) = self.gpu.memory_per_card {
                s.push_str(&format!(" {}", fmt_bytes(m)));
            }
            if self.gpu.shared {
                s.push_str(" shared");
            }
            s.push_str(", ");
        }
        s.push_str(&format!(
            "{} CPU, {} mem",
            fmt_cpu(self.cpu_milli),
            fmt_bytes(self.memory)
        ));
        if self.disk > 0 {
            s.push_str(&format!(", {} disk", fmt_bytes(self.disk)));
        }
        if replicas > 1 {
            s = format!("{replicas} x ({s})");
        }
        s
    }
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    Pending,
    Running,
    /// Waiting out its restart backoff after a failure.
    Restarting,
    Succeeded,
    Failed,
    Cancelled,
}

impl Phase {
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Cancelled)
    }
    pub fn name(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Restarting => "Restarting",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Cancelled => "Cancelled",
        }
    }
}

/// One GPU slot of a placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSlot {
    pub gpu: u32,
    pub milli: u32,
    pub mem: u64,
}

/// One replica on one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub node: NodeId,
    pub gpus: Vec<GpuSlot>,
    pub cpu: u64,
    pub mem: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub disk: u64,
    /// Placed on a node of another pool that lends to the job's pool.
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_loan: bool,
    /// Confirmed by the driver (bound). Until then the placement is assumed: held, but
    /// taken back if the bind fails or is not confirmed within the bind timeout.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub bound: bool,
}

/// A job and its live state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    /// Written in a checkpoint as the last one wrote it (`written::as_written`).
    #[serde(serialize_with = "crate::written::as_written")]
    pub spec: std::sync::Arc<JobSpec>,
    pub project: Option<ProjectId>,
    pub pool: Option<PoolId>,
    pub phase: Phase,
    pub submitted: u64,
    /// When the job became Pending last (submission, preemption or requeue).
    pub queued_since: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub started: Option<u64>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub finished: Option<u64>,
    pub placements: Vec<Placement>,
    /// Replicas wanted now (inference autoscaling changes it).
    pub desired_replicas: u32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub restarts: u32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub restart_at: Option<u64>,
    /// Admitted above the project's reserved quota (may be reclaimed).
    #[serde(default, skip_serializing_if = "is_default")]
    pub borrowed: bool,
    /// Total seconds spent Pending and Running so far.
    #[serde(default, skip_serializing_if = "is_default")]
    pub wait_s: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub run_s: u64,
    /// Seconds of work left (simulation); `None` runs until stopped.
    #[serde(default, skip_serializing_if = "is_default")]
    pub remaining_s: Option<u64>,
    /// Bumped whenever the job (re)starts, so stale completion timers can be ignored.
    pub epoch: u32,
    /// One-line reason while Pending; the final reason once terminal. Shared: the
    /// jobs a cycle refuses for the same reason hold one copy.
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub reason: Reason,
    /// GPU memory actually in use per card as a fraction of the request, percent.
    #[serde(default, skip_serializing_if = "is_default")]
    pub used_pct: u32,
    /// When the last placement was decided (the bind timeout counts from here).
    #[serde(default, skip_serializing_if = "is_default")]
    pub placed_at: u64,
    /// Time of the last cost accrual.
    #[serde(default, skip_serializing_if = "is_default")]
    pub accrued_at: u64,
    /// The autoscaler of an inference service.
    #[serde(default, skip_serializing_if = "is_default")]
    pub autoscaler: AutoscalerState,
    /// When and why the job was last taken off its nodes (preempted, reclaimed by a
    /// lending pool), kept until it runs again so explain can still say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evicted: Option<(u64, String)>,
    /// The priority a running job gained by waiting (aging), kept while it runs: the
    /// queue ranked it by its priority plus this, and preemption ranks it the same
    /// way, so a job placed ahead of another is never that job's victim.
    #[serde(default, skip_serializing_if = "is_default")]
    pub aged: i32,
    /// The most GPU memory per card seen in use during this run, percent of the
    /// request (telemetry): what right-sizing reads when the run ends well.
    #[serde(default, skip_serializing_if = "is_default")]
    pub peak_pct: u32,
    /// Its file asks for a cluster (`crater.ai/cluster`) and the federation that runs
    /// this cluster among others left it here (`auto`, and no other cluster starts it
    /// sooner; or the one chosen refused it): it queues here, held no more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
    /// Its world is stopping it (Kubernetes: its pod is being deleted, a finalizer or
    /// its grace period holding it): it holds its room until it is gone, and is
    /// nobody's victim (evicting it frees nothing sooner).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminating: bool,
    /// Its world placed it (found running: another scheduler's pod, one bound before
    /// maar saw it): it never went through maar's queue to where it runs. Cleared when
    /// it starts anew.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub found: bool,
    /// The number its asks were interned under (derived: never stored, never
    /// compared; see `shape.rs`).
    #[serde(skip)]
    pub asks: AsksCache,
}

/// A job's asks number in the cluster's table of asks, valid while `epoch` is the
/// table's. Two jobs are equal whatever their caches say.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsksCache {
    pub(crate) epoch: u32,
    pub(crate) id: u32,
    pub(crate) looks_at_pods: bool,
}

impl PartialEq for AsksCache {
    fn eq(&self, _: &AsksCache) -> bool {
        true
    }
}

impl Eq for AsksCache {}

fn yes() -> bool {
    true
}

fn is_true(x: &bool) -> bool {
    *x
}

/// Whether a field holds its type's default: such fields are left out of the JSON
/// written (checkpoints above all) and read back as the default. Most of a
/// running job's and a card's fields are (nothing finished, no restart, no reading
/// yet): leaving them out made a checkpoint of 1,000 nodes and 5,000 pods a third
/// smaller, and as much quicker to write.
pub(crate) fn is_default<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}

/// An inference service's autoscaler: recent recommendations (for the scale-down
/// stabilization window) and whether an operator took over.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoscalerState {
    /// `(time, desired replicas)` recommendations inside the stabilization window.
    pub history: std::collections::VecDeque<(u64, u32)>,
    /// Set when an operator scaled the service by hand: who, and when. The autoscaler
    /// leaves the replica count alone until it is resumed.
    pub paused_by: Option<String>,
    /// Last observed GPU-memory usage rate, percent of the running replicas' capacity
    /// (may exceed 100 when demand outruns them).
    pub last_usage_pct: Option<f64>,
}

impl Job {
    pub fn name(&self) -> &str {
        &self.spec.name
    }
    /// A running job's rank for preemption: its priority plus what it gained by
    /// waiting before it started ([`Job::aged`]).
    pub fn rank(&self) -> i32 {
        self.spec.priority.saturating_add(self.aged)
    }
    /// Effective replica count placed right now.
    pub fn running_replicas(&self) -> u32 {
        self.placements.len() as u32
    }
    pub fn is_inference(&self) -> bool {
        matches!(self.spec.kind, JobKind::Inference(_))
    }
    /// Resources held now, summed over replicas.
    pub fn held(&self) -> Resources {
        let mut r = Resources::default();
        for p in &self.placements {
            r.add(&placement_resources(p));
        }
        r
    }
}

pub fn placement_resources(p: &Placement) -> Resources {
    Resources {
        gpu_milli: p.gpus.iter().map(|g| g.milli as u64).sum(),
        gpu_mem: p.gpus.iter().map(|g| g.mem).sum(),
        cpu_milli: p.cpu,
        memory: p.mem,
        disk: p.disk,
    }
}
