//! Filtering: can one replica of a job go on one node, and if not, exactly why.
//!
//! `fit` is the single answer to "does it fit here" for scheduling, preemption,
//! backfill, explanation and trace replay alike, so their verdicts cannot disagree.

use std::sync::Arc;

use serde::Serialize;

use crate::model::*;
use crate::quantity::{fmt_bytes, fmt_cpu};

/// Why a replica cannot go on a node. Ordered by the precedence in which they are
/// checked: a node is counted once, under the first reason that rules it out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum NodeReason {
    NotReady {
        why: String,
    },
    Cordoned,
    NoGpuLabels {
        physical: u32,
    },
    NoGpus,
    /// The job's allowed models are in its spec; phrases name them.
    ModelNotAllowed {
        model: Arc<str>,
    },
    CardMemory {
        have: u64,
        want: u64,
    },
    MigSlices {
        want: u64,
        card: u64,
    },
    GpusUnhealthy {
        free_usable: u32,
        want: u32,
        why: String,
    },
    GpusCordoned {
        free_usable: u32,
        want: u32,
    },
    InsufficientGpus {
        free: u32,
        want: u32,
    },
    NoGpuShare {
        milli: u32,
        mem: u64,
    },
    Cpu {
        free: u64,
        want: u64,
    },
    Memory {
        free: u64,
        want: u64,
    },
    Disk {
        free: u64,
        want: u64,
    },
    SpreadConflict,
    /// The node takes no more pods (its allocatable `pods`).
    TooManyPods {
        max: u32,
    },
    ReservedForBackfill {
        job: String,
    },
    /// The job's `nodeSelector` asks for a label the node lacks.
    Selector {
        key: String,
        want: String,
    },
    /// The node's GPUs are of another vendor (`crater.ai/gpu-vendor`).
    Vendor {
        have: String,
        want: String,
    },
    /// The node has no cards of the device resource the job asks for (a MIG profile,
    /// time-sliced replicas; or whole cards, when it has only those).
    NoGpuResource {
        resource: String,
    },
    /// A taint (NoSchedule, NoExecute) the job does not tolerate (TaintToleration).
    Taint {
        taint: String,
    },
    /// The job's required node affinity matches no term on the node (NodeAffinity).
    NodeAffinity {
        terms: String,
    },
    /// A host port the job asks for is held on the node (NodePorts).
    HostPort {
        port: u16,
        protocol: String,
    },
    /// A pod the job's required pod affinity asks for is not in the node's domain
    /// (or the node has no such domain).
    PodAffinity {
        term: String,
    },
    /// A pod in the node's domain matches the job's required anti-affinity, or the
    /// job matches a placed pod's (InterPodAffinity).
    PodAntiAffinity {
        term: String,
        /// The placed pod whose anti-affinity refuses the job, when it is that way.
        of: Option<String>,
    },
    /// Placing it here would spread its pods more unevenly than `maxSkew` over the
    /// topology key's domains, or the node lacks the key (PodTopologySpread).
    TopologySpread {
        key: String,
        max_skew: u32,
    },
    /// Even empty the node could not hold the job (too few cards of its kind, CPU,
    /// memory or disk in all). Never from the filter: the first line's reading of a
    /// node that is short of room now and would be short of it always.
    TooSmall {
        /// The node's whole size, in words (`4 GPUs, 32 CPU, 256Gi memory`).
        has: String,
    },
}

impl NodeReason {
    /// The phrase used in the `0/N nodes are available: ...` histogram. Nodes whose
    /// reasons share a phrase are counted together.
    pub fn phrase(&self, spec: &JobSpec) -> String {
        match self {
            NodeReason::NotReady { why } => format!("NotReady ({why})"),
            NodeReason::Cordoned => "cordoned".into(),
            NodeReason::NoGpuLabels { .. } => {
                "GPUs present but crater.ai/gpu-model and gpu-count labels missing (counted as no GPUs)"
                    .into()
            }
            NodeReason::NoGpus => "no GPUs".into(),
            NodeReason::ModelNotAllowed { model } => {
                format!("GPU model {model} not in [{}]", spec.gpu.models.join(","))
            }
            NodeReason::CardMemory { have, want } => format!(
                "GPU memory per card {} < {} requested",
                fmt_bytes(*have),
                fmt_bytes(*want)
            ),
            NodeReason::MigSlices { want, card } => format!(
                "MIG slice for {} exceeds 7/8 of a {} card",
                fmt_bytes(*want),
                fmt_bytes(*card)
            ),
            NodeReason::GpusUnhealthy { why, .. } => format!("GPUs unhealthy ({why})"),
            NodeReason::GpusCordoned { .. } => "GPUs cordoned".into(),
            NodeReason::InsufficientGpus { .. } => "insufficient free GPUs".into(),
            NodeReason::NoGpuShare { .. } => "no GPU with a free share large enough".into(),
            NodeReason::Cpu { .. } => "insufficient CPU".into(),
            NodeReason::Memory { .. } => "insufficient memory".into(),
            NodeReason::Disk { want, .. } => {
                format!("insufficient disk for {} requested", fmt_bytes(*want))
            }
            NodeReason::SpreadConflict => "already runs a replica (spread)".into(),
            NodeReason::TooManyPods { .. } => "too many pods".into(),
            NodeReason::ReservedForBackfill { job } => {
                format!("held for {job} (backfill must not delay it)")
            }
            NodeReason::Selector { key, want } => format!("node selector {key}={want} unmatched"),
            NodeReason::Vendor { have, want } => format!("GPU vendor {have}, not {want}"),
            NodeReason::NoGpuResource { resource } => format!("no {resource} devices"),
            NodeReason::Taint { taint } => format!("untolerated taint {taint}"),
            NodeReason::NodeAffinity { .. } => "node affinity unmatched".into(),
            NodeReason::HostPort { port, protocol } => {
                format!("host port {port}/{protocol} in use")
            }
            NodeReason::PodAffinity { term } => format!("pod affinity unmet ({term})"),
            NodeReason::PodAntiAffinity { term, of: None } => {
                format!("pod anti-affinity ({term})")
            }
            NodeReason::PodAntiAffinity { term, of: Some(p) } => {
                format!("{p}'s pod anti-affinity ({term})")
            }
            NodeReason::TopologySpread { key, max_skew } => {
                format!("topology spread over {key} (maxSkew {max_skew})")
            }
            NodeReason::TooSmall { .. } => "too small for it even empty".into(),
        }
    }

    /// Whether two reasons read the same in the histogram (cheaper than comparing
    /// phrases).
    pub fn same_phrase(&self, o: &NodeReason) -> bool {
        use NodeReason::*;
        match (self, o) {
            (NotReady { why: a }, NotReady { why: b }) => a == b,
            (ModelNotAllowed { model: a }, ModelNotAllowed { model: b }) => a == b,
            (CardMemory { have: a, want: x }, CardMemory { have: b, want: y }) => a == b && x == y,
            (MigSlices { want: a, card: x }, MigSlices { want: b, card: y }) => a == b && x == y,
            (GpusUnhealthy { why: a, .. }, GpusUnhealthy { why: b, .. }) => a == b,
            (Disk { want: a, .. }, Disk { want: b, .. }) => a == b,
            (ReservedForBackfill { job: a }, ReservedForBackfill { job: b }) => a == b,
            (Selector { key: a, want: x }, Selector { key: b, want: y }) => a == b && x == y,
            (Vendor { have: a, .. }, Vendor { have: b, .. }) => a == b,
            (NoGpuResource { resource: a }, NoGpuResource { resource: b }) => a == b,
            (Taint { taint: a }, Taint { taint: b }) => a == b,
            (HostPort { port: a, .. }, HostPort { port: b, .. }) => a == b,
            (PodAffinity { term: a }, PodAffinity { term: b }) => a == b,
            (PodAntiAffinity { term: a, of: x }, PodAntiAffinity { term: b, of: y }) => {
                a == b && x == y
            }
            (TopologySpread { key: a, .. }, TopologySpread { key: b, .. }) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }

    /// What the node lacks, with numbers (for "nearest node").
    pub fn lack(&self, spec: &JobSpec) -> String {
        match self {
            NodeReason::InsufficientGpus { free, want } => {
                format!("{} GPU(s) (has {free} free, needs {want})", want - free)
            }
            NodeReason::GpusUnhealthy {
                free_usable,
                want,
                why,
            } => format!("{} healthy GPU(s) ({why})", want - free_usable),
            NodeReason::GpusCordoned { free_usable, want } => {
                format!("{} uncordoned GPU(s)", want - free_usable)
            }
            NodeReason::Cpu { free, want } => format!(
                "{} CPU (has {} free, needs {})",
                fmt_cpu(want - free),
                fmt_cpu(*free),
                fmt_cpu(*want)
            ),
            NodeReason::Memory { free, want } => format!(
                "{} memory (has {} free, needs {})",
                fmt_bytes(want - free),
                fmt_bytes(*free),
                fmt_bytes(*want)
            ),
            NodeReason::Disk { free, want } => format!(
                "{} disk (has {} free, needs {})",
                fmt_bytes(want - free),
                fmt_bytes(*free),
                fmt_bytes(*want)
            ),
            NodeReason::NodeAffinity { terms } => {
                format!("labels matching its node affinity ({terms})")
            }
            NodeReason::Taint { taint } => format!("a toleration for its taint {taint}"),
            NodeReason::TooSmall { has } => format!("room: too small for it even empty ({has})"),
            NodeReason::TooManyPods { max } => {
                format!("a pod slot (it takes at most {max} pods)")
            }
            other => other.phrase(spec),
        }
    }

    /// Rough distance from fitting: smaller is nearer. Used to pick the nearest node.
    /// How costly the change that clears this reason is, for picking the nearest node:
    /// a reservation or spread first, then one repair an operator can make (uncordon
    /// cards, replace unhealthy ones, uncordon or repair the node, clean its disk),
    /// then jobs ending (CPU, memory, cards held), then changing the job itself, and
    /// last a node that has no GPUs for it at all.
    pub fn distance(&self) -> u64 {
        match self {
            NodeReason::ReservedForBackfill { .. } => 10,
            // Pods placed there end (or move): like resources held.
            NodeReason::HostPort { .. }
            | NodeReason::PodAntiAffinity { .. }
            | NodeReason::TopologySpread { .. } => 1_200,
            NodeReason::PodAffinity { .. } => 1_300,
            NodeReason::Taint { .. } => 1_550_000,
            NodeReason::NodeAffinity { .. } => 1_600_000,
            NodeReason::SpreadConflict => 50,
            NodeReason::GpusCordoned { free_usable, want } => {
                200 + (want - free_usable) as u64 * 10
            }
            NodeReason::GpusUnhealthy {
                free_usable, want, ..
            } => 300 + (want - free_usable) as u64 * 10,
            NodeReason::Cordoned => 400,
            NodeReason::NotReady { .. } => 500,
            NodeReason::Disk { free, want } => 600 + (want - free) * 100 / want.max(&1),
            // Its pods end (or move): like resources held.
            NodeReason::TooManyPods { .. } => 1_100,
            NodeReason::Cpu { free, want } => 1000 + (want - free) * 100 / want.max(&1),
            NodeReason::Memory { free, want } => 1000 + (want - free) * 100 / want.max(&1),
            NodeReason::NoGpuShare { .. } => 1500,
            NodeReason::InsufficientGpus { free, want } => 2000 + (want - free) as u64 * 1000,
            NodeReason::CardMemory { .. } | NodeReason::MigSlices { .. } => 1_400_000,
            NodeReason::TooSmall { .. } => 1_450_000,
            NodeReason::ModelNotAllowed { .. } | NodeReason::Vendor { .. } => 1_500_000,
            NodeReason::Selector { .. } => 1_600_000,
            NodeReason::NoGpuLabels { .. }
            | NodeReason::NoGpus
            | NodeReason::NoGpuResource { .. } => 2_000_000,
        }
    }
}

/// Size of a MIG slice on a card: one eighth of its memory (e.g. 10Gi on an 80Gi A100).
fn mig_slice(card_mem: u64) -> u64 {
    card_mem / 8
}

/// What one card must give a shared replica: (milli, memory) — rounded up to whole
/// MIG slices on MIG-capable cards. `None` when the request cannot fit such a card.
pub fn share_on_card(spec: &JobSpec, g: &Gpu) -> Option<(u32, u64)> {
    let milli = spec.milli_per_card(g.memory);
    let mem = spec
        .gpu
        .memory_per_card
        .unwrap_or((g.memory as u128 * milli as u128 / GPU_MILLI as u128) as u64);
    if g.mig && mig_slice(g.memory) > 0 {
        let slices = mem.div_ceil(mig_slice(g.memory)).max(1);
        if slices > 7 {
            return None;
        }
        let m = ((slices as u32 * GPU_MILLI).div_ceil(7)).min(GPU_MILLI);
        return Some((m.max(milli), slices * mig_slice(g.memory)));
    }
    Some((milli, mem))
}

/// Free CPU on a node after overcommit.
pub fn free_cpu(node: &Node, oc: Overcommit) -> u64 {
    ((node.cpu_milli as f64 * oc.cpu) as u64).saturating_sub(node.alloc_cpu)
}

/// Free memory on a node after overcommit.
pub fn free_mem(node: &Node, oc: Overcommit) -> u64 {
    ((node.memory as f64 * oc.memory) as u64).saturating_sub(node.alloc_mem)
}

pub fn free_disk(node: &Node) -> u64 {
    node.disk.saturating_sub(node.disk_used())
}

/// Jobs to treat as gone from a node (preemption and backfill what-ifs), with what
/// they hold there, so a node can be judged without copying it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Except<'a> {
    pub jobs: &'a [JobId],
    pub cpu: u64,
    pub mem: u64,
    pub disk: u64,
    /// Their replicas on the node.
    pub pods: u32,
}

impl Except<'_> {
    fn skips(&self, a: &GpuAlloc) -> bool {
        self.jobs.contains(&a.job)
    }
    fn used_milli(&self, g: &Gpu) -> u32 {
        g.allocs
            .iter()
            .filter(|a| !self.skips(a))
            .map(|a| a.milli)
            .sum()
    }
    fn free_milli(&self, g: &Gpu) -> u32 {
        GPU_MILLI.saturating_sub(self.used_milli(g))
    }
    fn free_mem(&self, g: &Gpu) -> u64 {
        g.memory.saturating_sub(
            g.allocs
                .iter()
                .filter(|a| !self.skips(a))
                .map(|a| a.mem)
                .sum(),
        )
    }
    fn empty(&self, g: &Gpu) -> bool {
        g.allocs.is_empty() || (!self.jobs.is_empty() && g.allocs.iter().all(|a| self.skips(a)))
    }
}

/// Checks whether `mult` replicas of `spec` fit together on `node`, returning the
/// placement (all `mult` replicas merged) or the first reason they do not.
pub fn fit(
    node: &Node,
    node_id: NodeId,
    oc: Overcommit,
    spec: &JobSpec,
    mult: u32,
) -> Result<Placement, NodeReason> {
    fit_except(node, node_id, oc, spec, mult, &Except::default())
}

/// As [`fit`], as if the jobs in `except` were gone from the node.
pub fn fit_except(
    node: &Node,
    node_id: NodeId,
    oc: Overcommit,
    spec: &JobSpec,
    mult: u32,
    except: &Except,
) -> Result<Placement, NodeReason> {
    if let Condition::NotReady(why) = &node.condition {
        return Err(NodeReason::NotReady { why: why.clone() });
    }
    node_rules(node, spec)?;
    let count = spec.gpu.count * mult;
    if count > 0 {
        // A request without a vendor asks for NVIDIA cards (`nvidia.com/gpu`); GPU
        // nodes without a vendor label hold NVIDIA cards.
        let want = spec.gpu.vendor.as_deref().unwrap_or("nvidia");
        if let Some(have) = node.vendor_label().filter(|h| *h != want) {
            return Err(NodeReason::Vendor {
                have: have.to_string(),
                want: want.to_string(),
            });
        }
    }
    let mut slots = Vec::new();
    if count > 0 {
        let gpus = node.sched_gpus();
        // Cards of the device resource asked for only (whole cards unless a MIG
        // profile or time-sliced replicas are named).
        let want_res = spec.gpu.resource.as_deref();
        let of_res = |g: &&Gpu| g.resource.as_deref() == want_res;
        if !gpus.is_empty() && !gpus.iter().any(|g| of_res(&g)) {
            return Err(NodeReason::NoGpuResource {
                resource: want_res.unwrap_or("whole-GPU").to_string(),
            });
        }
        if gpus.is_empty() {
            return Err(if node.gpus.is_empty() {
                NodeReason::NoGpus
            } else {
                NodeReason::NoGpuLabels {
                    physical: node.gpus.len() as u32,
                }
            });
        }
        let model = node.gpu_model().unwrap_or("");
        if !spec.gpu.models.is_empty() && !spec.gpu.models.iter().any(|m| m == model) {
            return Err(NodeReason::ModelNotAllowed {
                model: node.gpu_model_arc(),
            });
        }
        if let Some(want) = spec.gpu.memory_per_card {
            let have = gpus
                .iter()
                .filter(of_res)
                .map(|g| g.memory)
                .max()
                .unwrap_or(0);
            if have < want {
                return Err(NodeReason::CardMemory { have, want });
            }
        }
        if spec.gpu.shared {
            // Best fit: the most-used card that still has room, so whole cards stay free.
            let mut cands: Vec<(u32, u32, u32, u64)> = Vec::new();
            let mut mig_too_big = None;
            for g in gpus.iter().filter(of_res).filter(|g| g.usable()) {
                match share_on_card(spec, g) {
                    None => mig_too_big = Some(g.memory),
                    Some((m, mem)) if except.free_milli(g) >= m && except.free_mem(g) >= mem => {
                        cands.push((except.free_milli(g), g.index, m, mem))
                    }
                    _ => {}
                }
            }
            if cands.len() < count as usize {
                if let (Some(card), true) = (mig_too_big, cands.is_empty()) {
                    return Err(NodeReason::MigSlices {
                        want: spec.gpu.memory_per_card.unwrap_or(0),
                        card,
                    });
                }
                let first = gpus.iter().find(of_res).unwrap_or(&gpus[0]);
                let (milli, mem) = share_on_card(spec, first).unwrap_or((0, 0));
                return Err(NodeReason::NoGpuShare { milli, mem });
            }
            cands.sort_unstable();
            for &(_, idx, m, mem) in cands.iter().take(count as usize) {
                slots.push(GpuSlot {
                    gpu: idx,
                    milli: m,
                    mem,
                });
            }
        } else {
            let fits_mem = |g: &Gpu| spec.gpu.memory_per_card.is_none_or(|m| g.memory >= m);
            let mut free_usable = 0u32;
            let mut free_unhealthy = 0u32;
            let mut free_cordoned = 0u32;
            let mut unhealthy_why = String::new();
            for g in gpus
                .iter()
                .filter(of_res)
                .filter(|g| fits_mem(g) && except.empty(g))
            {
                match (&g.health, g.cordoned) {
                    (Health::Healthy, false) => free_usable += 1,
                    (Health::Unhealthy(w), _) => {
                        free_unhealthy += 1;
                        if unhealthy_why.is_empty() {
                            unhealthy_why = w.clone();
                        }
                    }
                    (_, true) => free_cordoned += 1,
                }
            }
            if free_usable >= count {
                slots = gpus
                    .iter()
                    .filter(of_res)
                    .filter(|g| fits_mem(g) && except.empty(g) && g.usable())
                    .take(count as usize)
                    .map(|g| GpuSlot {
                        gpu: g.index,
                        milli: GPU_MILLI,
                        mem: g.memory,
                    })
                    .collect();
            } else {
                return Err(
                    if free_usable + free_unhealthy >= count && free_unhealthy > 0 {
                        NodeReason::GpusUnhealthy {
                            free_usable,
                            want: count,
                            why: unhealthy_why,
                        }
                    } else if free_usable + free_unhealthy + free_cordoned >= count {
                        NodeReason::GpusCordoned {
                            free_usable,
                            want: count,
                        }
                    } else {
                        NodeReason::InsufficientGpus {
                            free: free_usable,
                            want: count,
                        }
                    },
                );
            }
        }
    }
    let cpu = spec.cpu_milli * mult as u64;
    let fc = free_cpu(node, oc) + except.cpu;
    if cpu > fc {
        return Err(NodeReason::Cpu {
            free: fc,
            want: cpu,
        });
    }
    let mem = spec.memory * mult as u64;
    let fm = free_mem(node, oc) + except.mem;
    if mem > fm {
        return Err(NodeReason::Memory {
            free: fm,
            want: mem,
        });
    }
    let disk = spec.disk * mult as u64;
    let fd = free_disk(node) + except.disk;
    if disk > fd {
        return Err(NodeReason::Disk {
            free: fd,
            want: disk,
        });
    }
    // Kubernetes' allocatable `pods` (NodeResourcesFit's "Too many pods").
    if node.max_pods > 0 && node.alloc_pods.saturating_sub(except.pods) + mult > node.max_pods {
        return Err(NodeReason::TooManyPods { max: node.max_pods });
    }
    Ok(Placement {
        node: node_id,
        gpus: slots,
        cpu,
        mem,
        disk,
        on_loan: false,
        bound: false,
    })
}

/// The node-level rules, in kube-scheduler's order: NodeUnschedulable (a cordon; in
/// maar absolute, even for a pod that tolerates `node.kubernetes.io/unschedulable`),
/// TaintToleration, the node selector, then NodeAffinity's required terms.
pub fn node_rules(node: &Node, spec: &JobSpec) -> Result<(), NodeReason> {
    if node.cordoned {
        return Err(NodeReason::Cordoned);
    }
    node_constraints(node, spec)
}

/// Whether the node is ready and its node-level rules ([`node_rules`]) let the job on,
/// without saying why not: a placement's search passes over refusing nodes (100
/// tainted nodes before every fresh node in a burst of binds) without writing a reason
/// that nobody reads.
pub fn node_admits(node: &Node, spec: &JobSpec) -> bool {
    node.ready()
        && !node.cordoned
        && crate::rules::untolerated(&node.taints, &spec.rules.tolerations).is_none()
        && node_selected(node, spec)
}

/// The node-level rules that hold whatever runs on the node and whoever cordons it:
/// its taints, the job's node selector and required node affinity. Only a change to
/// the job (or to the node's labels and taints) lifts them.
pub fn node_constraints(node: &Node, spec: &JobSpec) -> Result<(), NodeReason> {
    if let Some(t) = crate::rules::untolerated(&node.taints, &spec.rules.tolerations) {
        return Err(NodeReason::Taint { taint: t.text() });
    }
    if let Some((k, v)) = unmatched_selector(node, spec) {
        return Err(NodeReason::Selector {
            key: k.clone(),
            want: v.clone(),
        });
    }
    if let Some(terms) = &spec.rules.node_affinity {
        if !affinity_matches(node, terms) {
            return Err(NodeReason::NodeAffinity {
                terms: terms
                    .iter()
                    .map(crate::rules::NodeSelectorTerm::text)
                    .collect::<Vec<_>>()
                    .join(" or "),
            });
        }
    }
    Ok(())
}

fn unmatched_selector<'a>(node: &Node, spec: &'a JobSpec) -> Option<(&'a String, &'a String)> {
    spec.node_selector
        .iter()
        .find(|(k, v)| node.labels().get(*k) != Some(*v))
}

fn affinity_matches(node: &Node, terms: &[crate::rules::NodeSelectorTerm]) -> bool {
    terms.iter().any(|t| t.matches(&node.name, node.labels()))
}

/// Whether the node is one the job selects: its node selector and required node
/// affinity (kube-scheduler's NodeAffinity plugin; taints and cordons aside).
pub fn node_selected(node: &Node, spec: &JobSpec) -> bool {
    unmatched_selector(node, spec).is_none()
        && spec
            .rules
            .node_affinity
            .as_deref()
            .is_none_or(|ts| affinity_matches(node, ts))
}

/// Splits a merged placement of `mult` replicas into one placement per replica.
pub fn split(p: Placement, mult: u32, per_replica_gpus: u32) -> Vec<Placement> {
    if mult <= 1 {
        return vec![p];
    }
    let m = mult as u64;
    (0..mult as usize)
        .map(|i| Placement {
            node: p.node,
            gpus: p.gpus[i * per_replica_gpus as usize..(i + 1) * per_replica_gpus as usize]
                .to_vec(),
            cpu: p.cpu / m,
            mem: p.mem / m,
            disk: p.disk / m,
            on_loan: p.on_loan,
            bound: p.bound,
        })
        .collect()
}

/// Whether a node could ever take the job, whatever runs on it: ready, uncordoned,
/// GPUs labelled, an allowed model, cards large enough. Cheap: no allocation.
pub(crate) fn statically_fits(node: &Node, spec: &JobSpec) -> bool {
    node_admits(node, spec) && has_cards_for(node, spec)
}

/// Whether the node's lasting rules let the job on: its node selector, required node
/// affinity and the taints its owners put (not the node lifecycle's own,
/// `node.kubernetes.io/*`: a cordon, NotReady, unreachable or pressure comes and goes).
/// What decides whether a pool could ever run a job, whatever its nodes' state now.
pub fn node_rules_let_on(node: &Node, spec: &JobSpec) -> bool {
    node_selected(node, spec)
        && !node
            .taints
            .iter()
            .any(|t| !t.is_lifecycle() && crate::rules::keeps_off(t, &spec.rules.tolerations))
}

/// Whether the node has cards of the model and memory the job asks for (any number).
pub(crate) fn has_cards_for(node: &Node, spec: &JobSpec) -> bool {
    if spec.gpu.count == 0 {
        return true;
    }
    let model = node.gpu_model().unwrap_or("");
    node.gpu_labelled()
        && !node.gpus.is_empty()
        && (spec.gpu.models.is_empty() || spec.gpu.models.iter().any(|m| m == model))
        && spec
            .gpu
            .memory_per_card
            .is_none_or(|m| node.gpus.iter().any(|g| g.memory >= m))
}
