//! Whether a job can never run as asked, and which constraint says so.

use crate::cluster::Cluster;
use crate::fit::NodeReason;
use crate::model::*;
use crate::quantity::{fmt_bytes, fmt_cpu};

use super::*;

impl Cluster {
    /// Whether `mult` replicas of `spec` could ever go on node `n`: its whole
    /// capacity (every card healthy and free, nothing placed), not what is free now.
    pub(super) fn could_ever_fit(&self, n: &Node, spec: &JobSpec, mult: u32) -> bool {
        // The selector, taints and node affinity hold whatever runs there.
        if crate::fit::node_constraints(n, spec).is_err() {
            return false;
        }
        if spec.gpu.count > 0 {
            let want = spec.gpu.vendor.as_deref().unwrap_or("nvidia");
            if n.labels()
                .get(LABEL_VENDOR)
                .is_some_and(|h| !h.eq_ignore_ascii_case(want))
            {
                return false;
            }
        }
        self.size_fits(n, spec, mult)
    }

    /// Whether the node's whole size could hold `mult` replicas of `spec`, its rules
    /// aside: cards of the job's kind, CPU, memory and disk.
    pub(super) fn size_fits(&self, n: &Node, spec: &JobSpec, mult: u32) -> bool {
        self.size_fits_with(n, spec, mult, || {
            n.gpus.iter().all(|g| g.resource.is_none())
        })
    }

    /// [`Cluster::size_fits`], told by `plain` whether the node has only whole cards
    /// (no device resource), as a node's summary says without reading its cards.
    pub(super) fn size_fits_with(
        &self,
        n: &Node,
        spec: &JobSpec,
        mult: u32,
        plain: impl FnOnce() -> bool,
    ) -> bool {
        let oc = self.overcommit_of(n);
        let any_card = spec.gpu.models.is_empty()
            && spec.gpu.memory_per_card.is_none()
            && spec.gpu.resource.is_none()
            && {
                let p = plain();
                debug_assert_eq!(
                    p,
                    n.gpus.iter().all(|g| g.resource.is_none()),
                    "node {}'s summary went stale",
                    n.name
                );
                p
            };
        let cards = if any_card {
            n.gpus.len()
        } else {
            n.gpus.iter().filter(|g| card_of_kind(spec, g)).count()
        } as u64;
        let need_cards = if spec.gpu.count == 0 {
            0
        } else if spec.gpu.shared {
            1
        } else {
            spec.gpu.count as u64 * mult as u64
        };
        cards >= need_cards
            && (n.cpu_milli as f64 * oc.cpu) as u64 >= spec.cpu_milli * mult as u64
            && (n.memory as f64 * oc.memory) as u64 >= spec.memory * mult as u64
            && n.disk >= spec.disk * mult as u64
    }

    /// The first hard constraint that keeps `spec` off node `n` for good, whatever
    /// runs there: a rule of the node (taint, selector, node affinity), then the GPU
    /// vendor, device kind, model and card memory asked for, then the node's whole
    /// size ([`NodeReason::TooSmall`]).
    pub(super) fn never_cause(&self, n: &Node, spec: &JobSpec, mult: u32) -> NodeReason {
        if let Err(r) = crate::fit::node_constraints(n, spec) {
            return r;
        }
        if spec.gpu.count > 0 {
            let want = spec.gpu.vendor.as_deref().unwrap_or("nvidia");
            if let Some(have) = n.vendor_label().filter(|h| *h != want) {
                return NodeReason::Vendor {
                    have: have.to_string(),
                    want: want.to_string(),
                };
            }
            if n.gpus.is_empty() {
                return NodeReason::NoGpus;
            }
            let kind: Vec<&Gpu> = n
                .gpus
                .iter()
                .filter(|g| g.resource.as_deref() == spec.gpu.resource.as_deref())
                .collect();
            if kind.is_empty() {
                return NodeReason::NoGpuResource {
                    resource: spec
                        .gpu
                        .resource
                        .clone()
                        .unwrap_or_else(|| "whole-GPU".into()),
                };
            }
            if !spec.gpu.models.is_empty()
                && !kind.iter().any(|g| {
                    spec.gpu
                        .models
                        .iter()
                        .any(|m| m.eq_ignore_ascii_case(&g.model))
                })
            {
                return NodeReason::ModelNotAllowed {
                    model: kind[0].model.clone(),
                };
            }
            if let Some(m) = spec.gpu.memory_per_card {
                let have = kind.iter().map(|g| g.memory).max().unwrap_or(0);
                if have < m {
                    return NodeReason::CardMemory { have, want: m };
                }
            }
        }
        debug_assert!(!self.could_ever_fit(n, spec, mult));
        self.too_small(n, spec)
    }

    /// Why the job can never run as asked (no node of its pools could ever hold it, or
    /// it asks more than its project's quota allows even with nothing else running),
    /// with the largest node or the limit named.
    pub(super) fn never(&self, j: &Job, replicas: u32, mult: u32) -> Option<String> {
        let spec = &j.spec;
        if let (Some(pid), Some(pool)) = (j.project, j.pool) {
            if let Some(q) = self.projects[pid as usize].quotas.get(&pool) {
                let req = spec.replica_request().scaled(replicas as u64);
                if let Some((d, max)) = crate::admission::over_max_alone(q, &req) {
                    return Some(crate::admission::never_under_quota(
                        d,
                        req.get(d),
                        max,
                        &spec.project,
                        &spec.pool,
                    ));
                }
            }
        }
        let pools = self.candidate_pools(j.pool);
        let nodes: Vec<NodeId> = pools
            .iter()
            .flat_map(|(p, _)| self.pool_nodes(*p).collect::<Vec<_>>())
            .collect();
        if nodes.is_empty() {
            return None;
        }
        // A gang whose replicas must each have a node of their own forms only where
        // that many nodes could ever hold one (so count up to that many; else one).
        let distinct = spec.affinity == Affinity::Spread && !j.is_inference();
        let enough = if distinct {
            replicas.max(1) as usize
        } else {
            1
        };
        let able: Vec<NodeId> = nodes
            .iter()
            .copied()
            .filter(|&n| self.could_ever_fit(&self.nodes[n as usize], spec, mult))
            .take(enough.max(5))
            .collect();
        if distinct && replicas > 1 && !able.is_empty() && (able.len() as u32) < replicas {
            let names: Vec<&str> = able
                .iter()
                .take(4)
                .map(|&n| self.nodes[n as usize].name.as_str())
                .collect();
            return Some(format!(
                "can never run as asked: its gang of {replicas} replicas ({} each) must start together on distinct nodes, and only {} node{} of pool {} could ever hold one ({}{})",
                spec.shape_with(1),
                able.len(),
                if able.len() == 1 { "" } else { "s" },
                spec.pool,
                names.join(", "),
                if able.len() > 4 { ", ..." } else { "" }
            ));
        }
        if !able.is_empty() {
            return None;
        }
        // Per node, the hard constraint that keeps it off for good (a cordon is
        // lifted: not one): a rule of the node (taint, selector, node affinity), the
        // vendor, model, card memory or device kind it asks for, or its size.
        let causes: Vec<NodeReason> = nodes
            .iter()
            .map(|&n| self.never_cause(&self.nodes[n as usize], spec, mult))
            .collect();
        let ruled: Vec<Option<NodeReason>> = causes
            .iter()
            .map(|c| (!matches!(c, NodeReason::TooSmall { .. })).then(|| c.clone()))
            .collect();
        if ruled.iter().all(Option::is_some) {
            // Whatever their size: the constraints are what must change.
            let mut groups: Vec<(&NodeReason, u32)> = Vec::new();
            for r in ruled.iter().flatten() {
                match groups.iter_mut().find(|g| g.0.same_phrase(r)) {
                    Some(g) => g.1 += 1,
                    None => groups.push((r, 1)),
                }
            }
            groups.sort_by_key(|g| std::cmp::Reverse(g.1));
            return Some(format!(
                "can never run as asked: every node of pool {} keeps it off ({})",
                spec.pool,
                groups
                    .iter()
                    .map(|(r, k)| format!("{k} {}", r.phrase(spec)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // Cards of the device the job asks for (whole cards, a MIG profile).
        let of_kind = |n: &Node| {
            n.gpus
                .iter()
                .filter(|g| g.resource.as_deref() == spec.gpu.resource.as_deref())
                .count()
        };
        // The largest node its rules let it on (a node its selector keeps it off
        // says nothing of its size).
        let allowed: Vec<NodeId> = nodes
            .iter()
            .zip(&ruled)
            .filter(|(_, r)| r.is_none())
            .map(|(&n, _)| n)
            .collect();
        // (The first of equals: `max_by_key` keeps the last, so walk backwards.)
        let biggest = allowed
            .iter()
            .rev()
            .map(|&n| &self.nodes[n as usize])
            .max_by_key(|n| (of_kind(n), n.cpu_milli, n.memory))
            .expect("some node");
        Some(format!(
            "can never run as asked: no node of pool {} could hold {} even empty; the largest{}, {}, has {} {} ({}), {} CPU, {} memory",
            spec.pool,
            spec.shape_with(mult),
            if allowed.len() < nodes.len() {
                " it may use"
            } else {
                ""
            },
            biggest.name,
            of_kind(biggest),
            spec.gpu
                .resource
                .as_deref()
                .unwrap_or(if of_kind(biggest) == 1 { "GPU" } else { "GPUs" }),
            biggest
                .gpus
                .iter()
                .find(|g| g.resource.as_deref() == spec.gpu.resource.as_deref())
                .or(biggest.gpus.first())
                .map(|g| match g.memory {
                    // Memory not labelled (crater.ai/gpu-memory): the model alone.
                    0 => g.model.to_string(),
                    m => format!("{} {}", g.model, fmt_bytes(m)),
                })
                .unwrap_or_else(|| "none".into()),
            fmt_cpu(biggest.cpu_milli),
            fmt_bytes(biggest.memory),
        ) + &if spec.disk > 0 {
            format!(", {} disk", fmt_bytes(biggest.disk))
        } else {
            String::new()
        })
    }
}
