//! The scheduling cycle: order the queue, admit by quota, place (gang, spread, pack),
//! preempt, reclaim loans and backfill.
//!
//! One call to [`Cluster::schedule`] is one cycle at the cluster's current time. It is
//! deterministic: the same state gives the same placements and the same events.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::Serialize;

use crate::cluster::Cluster;
use crate::event::Severity;
use crate::fit::{fit, split};
use crate::model::*;
use crate::placement::{self, Shape};
use crate::quantity::fmt_duration;
use crate::reserve::Reservation;
use crate::shape::{ShapeKey, ShapeMap};

pub use crate::admission::QuotaVerdict;

/// What one cycle did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CycleReport {
    /// Jobs that went from Pending to Running.
    pub started: Vec<JobId>,
    /// Running inference jobs that got more replicas.
    pub scaled_up: Vec<JobId>,
    /// Jobs evicted by preemption or reclaim.
    pub preempted: Vec<JobId>,
    /// Queued jobs a quiet cycle gave no turn: each would have been passed over on
    /// its shape alone.
    #[serde(skip)]
    pub passed_over: usize,
}

/// Adds a placement's usage to a node (shared by real allocation and what-if copies).
pub(crate) fn node_add(node: &mut Node, job: JobId, p: &Placement) {
    node.alloc_cpu += p.cpu;
    node.alloc_pods += 1;
    node.alloc_mem += p.mem;
    node.alloc_disk += p.disk;
    for s in &p.gpus {
        node.gpus[s.gpu as usize].allocs.push(GpuAlloc {
            job,
            milli: s.milli,
            mem: s.mem,
        });
    }
    if !node.jobs.contains(&job) {
        node.jobs.push(job);
    }
}

/// Removes everything `job` holds on `node` (a what-if copy), given its placements.
pub(crate) fn node_remove(node: &mut Node, node_id: NodeId, job: &Job) {
    for p in job.placements.iter().filter(|p| p.node == node_id) {
        node.alloc_cpu -= p.cpu;
        node.alloc_pods = node.alloc_pods.saturating_sub(1);
        node.alloc_mem -= p.mem;
        node.alloc_disk -= p.disk;
    }
    for g in &mut node.gpus {
        g.allocs.retain(|a| a.job != job.id);
    }
    node.jobs.retain(|&j| j != job.id);
}

/// How many fitting nodes per GPU model maar's placement compares.
const MAAR_CANDIDATES: usize = 8;

/// Whether a job keeps off the backfill reservation's nodes: unless it is sure to end
/// (its estimate at the slowest card it accepts, `speed`) before the reserved start.
fn keeps_off(r: &Reservation, now: u64, speed: Option<f64>, est: Option<u64>) -> bool {
    let bound = est.map(|e| speed.map_or(e, |s| Cluster::scaled_runtime(e, s)));
    !matches!((r.until, bound), (Some(t), Some(rt)) if now + rt <= t)
}

/// The workload's typical shapes as placement reads them: the cluster's own, or as
/// they would be with one more job (a prospect that needs no copy:
/// `crate::dispatch`).
pub(crate) struct Typical<'a> {
    pub shapes: &'a [(placement::Shape, f64)],
    pub gpu: &'a [(placement::Shape, f64)],
    pub bound: &'a [f64],
}

impl Cluster {
    /// The node `policy` ranks best among `cands` for `spec` in `pool`: each candidate
    /// is a node, a placement that fits there, and the caller's tie-break (smaller
    /// first, then the node id). The policy's ranking is the loop the trace replay
    /// shares ([`placement::rank::best`]). A shared slice stays on the card the
    /// placement chose (by card memory and MIG profile, which the policies do not see),
    /// and the policy scores that card.
    fn rank_nodes(
        &self,
        spec: &JobSpec,
        pool: PoolId,
        policy: placement::Policy,
        cands: Vec<(u64, NodeId, Placement)>,
        typ: &Typical,
    ) -> Option<Placement> {
        use placement::{Ask, Measures, NodeView};
        let first = &cands.first()?.2;
        let ask = Ask {
            cpu: first.cpu,
            count: first.gpus.len() as u32,
            gpu_milli: first
                .gpus
                .first()
                .map(|g| g.milli)
                .unwrap_or(if spec.gpu.count > 0 { GPU_MILLI } else { 0 }),
        };
        let plugin = policy.plugin();
        let mut measures = if plugin.reads_fragmentation() {
            Measures::of(typ.shapes, typ.gpu, &self.models)
        } else {
            Measures::none()
        };
        // Every candidate's state in two flat buffers (a placement ranks up to a few
        // dozen nodes; two vectors each were most of its allocations).
        let mut free_buf: Vec<u16> = Vec::with_capacity(cands.len() * 8);
        let mut tags_buf: Vec<u32> = Vec::new();
        let spans: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> = cands
            .iter()
            .map(|c| self.policy_state(c.1, plugin.reads_affinity(), &mut free_buf, &mut tags_buf))
            .collect();
        let views = cands.into_iter().zip(spans).map(|(c, (free, tags))| {
            let node = &self.nodes[c.1 as usize];
            let card = c.2.gpus.first().filter(|_| ask.sharing());
            let view = NodeView {
                model: self.node_model_id(node),
                free_cpu: crate::fit::free_cpu(node, self.overcommit_of(node)),
                free: &free_buf[free],
                affinity: &tags_buf[tags],
                card: card.map(|s| node.gpus[s.gpu as usize].free_milli() as u16),
            };
            (c, view)
        });
        let pressure = |model| self.pressure(pool, model, typ.bound);
        let ties = placement::rank::best(policy, &ask, views.collect(), &mut measures, pressure);
        let ((_, _, p), _) = ties.into_iter().min_by_key(|((tie, n, _), _)| (*tie, *n))?;
        Some(p)
    }

    /// A node's GPU model as an id of the cluster's model list (0: none).
    fn node_model_id(&self, node: &Node) -> u16 {
        node.gpu_model()
            .and_then(|m| self.model_id_of(m))
            .unwrap_or(0)
    }

    /// Node `n` as the policies see it, appended to `free` and `tags` (the spans
    /// returned): the free GPU-milli of each card, largest first (a card that cannot be
    /// used has none), and with `with_tags` the GPU-clustering tags of the GPU jobs on
    /// it (sorted, distinct).
    fn policy_state(
        &self,
        n: NodeId,
        with_tags: bool,
        free: &mut Vec<u16>,
        tags: &mut Vec<u32>,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let node = &self.nodes[n as usize];
        let f0 = free.len();
        free.extend(node.sched_gpus().iter().map(|g| {
            if g.usable() {
                g.free_milli() as u16
            } else {
                0
            }
        }));
        free[f0..].sort_unstable_by(|a, b| b.cmp(a));
        let t0 = tags.len();
        if with_tags {
            tags.extend(
                node.jobs
                    .iter()
                    .map(|&j| &self.jobs[j as usize].spec)
                    .filter(|s| s.gpu.count > 0)
                    .map(|s| {
                        placement::affinity_tag(&placement::Ask {
                            cpu: s.cpu_milli,
                            count: s.gpu.count,
                            gpu_milli: s.gpu.milli.filter(|_| s.gpu.shared).unwrap_or(GPU_MILLI),
                        })
                    }),
            );
            tags[t0..].sort_unstable();
            let mut kept = t0;
            for i in t0..tags.len() {
                if kept == t0 || tags[kept - 1] != tags[i] {
                    tags[kept] = tags[i];
                    kept += 1;
                }
            }
            tags.truncate(kept);
        }
        (f0..free.len(), t0..tags.len())
    }

    /// The node a published policy (`config.placement`) picks in `pool`: every node
    /// that fits, ranked as the trace replay ranks it, then the lowest node id (Random:
    /// a node drawn by the job's name).
    fn pick_by_policy(
        &self,
        spec: &JobSpec,
        pool: PoolId,
        try_node: &dyn Fn(NodeId) -> Option<Placement>,
        typ: &Typical,
    ) -> Option<Placement> {
        let policy = self.config.placement;
        let drawn = |n: NodeId| {
            let mut h = crate::fxhash::FxHasher::default();
            std::hash::Hash::hash(&(&spec.name, &spec.project, n), &mut h);
            std::hash::Hasher::finish(&h)
        };
        let all = (pool, 0u16, 0u32, 0u32)..=(pool, u16::MAX, u32::MAX, NodeId::MAX);
        let cands: Vec<(u64, NodeId, Placement)> = self
            .index
            .range(all)
            .filter_map(|k| {
                let p = try_node(k.3)?;
                let tie = if policy == placement::Policy::Random {
                    u64::MAX - drawn(k.3)
                } else {
                    0
                };
                Some((tie, k.3, p))
            })
            .collect();
        self.rank_nodes(spec, pool, policy, cands, typ)
    }

    /// The cluster's typical shapes as placement reads them.
    pub(crate) fn typical_now(&self) -> Typical<'_> {
        Typical {
            shapes: &self.typical,
            gpu: &self.typical_gpu,
            bound: &self.bound_demand,
        }
    }

    /// maar's pressure on a GPU model in a pool: the typical demand only that model can
    /// serve (`bound`, by model), per idle whole card of it.
    fn pressure(&self, pool: PoolId, model: u16, bound: &[f64]) -> f64 {
        let bound = bound.get(model as usize).copied().unwrap_or(0.0);
        let idle = self.idle_by_model.get(&(pool, model)).copied().unwrap_or(0);
        bound / (idle.max(1) * GPU_MILLI as u64) as f64
    }

    /// The workload's typical task shapes (queued and running jobs, CPU-only ones too,
    /// counted per placement as in the published FGD setup, covering 95%), which maar's
    /// placement measures fragmentation against; and what follows from them.
    pub(crate) fn refresh_typical(&mut self) {
        // Kept as jobs come and go (set_phase, scale); recounting them all would cost
        // a pass over the whole queue every cycle.
        debug_assert_eq!(
            self.shape_counts,
            {
                let mut counts: BTreeMap<Shape, u64> = BTreeMap::new();
                let live = self
                    .pending
                    .keys()
                    .chain(self.running_by_prio.iter().map(|k| &k.2));
                for j in live.map(|&id| &self.jobs[id as usize]) {
                    let (s, n) = Self::shape_of(j);
                    *counts.entry(s).or_default() += n;
                }
                counts
            },
            "typical shape counts drifted"
        );
        let counts = self.shape_counts.clone();
        self.typical = self.typical_of(counts);
        self.typical_gpu = placement::gpu_shapes(&self.typical);
        self.bound_demand = placement::bound_demand(&self.typical, &self.models);
    }

    /// The shapes placement measures fragmentation against, from shape counts: the
    /// typical ones ([`placement::cover_95`]); under maar's policy the scarce ones too
    /// ([`placement::with_scarce`]: rare GPU shapes that few of this cluster's nodes
    /// could hold even empty).
    pub(crate) fn typical_of(&self, counts: BTreeMap<Shape, u64>) -> Vec<(Shape, f64)> {
        if self.config.placement != placement::Policy::Maar {
            return placement::cover_95(counts);
        }
        let gpu_nodes = || self.nodes.iter().filter(|n| !n.gpus.is_empty()).count();
        placement::with_scarce(counts, self.nodes.len(), gpu_nodes, |s, limit| {
            self.nodes
                .iter()
                .filter(|n| s.fits_empty(n.gpus.len() as u32, n.cpu_milli))
                .nth(limit)
                .is_some()
        })
    }

    /// Pools a job may be placed in: its own first, then pools that lend to it.
    pub(crate) fn candidate_pools(&self, pool: Option<PoolId>) -> Vec<(PoolId, bool)> {
        let Some(own) = pool else { return Vec::new() };
        let mut v = vec![(own, false)];
        for (i, p) in self.pools.iter().enumerate() {
            if i as PoolId != own && p.lend_to.contains(&own) {
                v.push((i as PoolId, true));
            }
        }
        v
    }

    /// Finds the best node for `mult` replicas of `spec` among `pools`, skipping
    /// `exclude` (spread) and `avoid` (backfill reservation).
    pub(crate) fn find_node(
        &self,
        spec: &JobSpec,
        mult: u32,
        pools: &[(PoolId, bool)],
        exclude: &[NodeId],
        avoid: &[NodeId],
    ) -> Option<Placement> {
        self.find_node_with(spec, mult, pools, exclude, avoid, false)
    }

    /// Where a job would go for real: with `scored`, a few fitting nodes are compared by
    /// maar's key (whole GPUs, shared slices, and CPU-only jobs that must use a GPU
    /// node); without, the first best-fitting node (enough for "does it fit anywhere"
    /// questions, and cheaper).
    pub(crate) fn find_node_with(
        &self,
        spec: &JobSpec,
        mult: u32,
        pools: &[(PoolId, bool)],
        exclude: &[NodeId],
        avoid: &[NodeId],
        scored: bool,
    ) -> Option<Placement> {
        let typ = self.typical_now();
        self.find_node_typed(spec, mult, pools, exclude, avoid, scored, &typ)
    }

    /// [`Cluster::find_node_with`] against the typical shapes `typ`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn find_node_typed(
        &self,
        spec: &JobSpec,
        mult: u32,
        pools: &[(PoolId, bool)],
        exclude: &[NodeId],
        avoid: &[NodeId],
        scored: bool,
        typ: &Typical,
    ) -> Option<Placement> {
        // Preferred node affinity: the nodes that match the most weight are tried
        // first, each level in turn.
        if !spec.rules.preferred.is_empty() {
            let mut levels: Vec<i64> = pools
                .iter()
                .flat_map(|&(p, _)| self.pool_nodes(p))
                .map(|n| {
                    let node = &self.nodes[n as usize];
                    spec.rules.preference(&node.name, node.labels())
                })
                .collect();
            levels.sort_unstable_by(|a, b| b.cmp(a));
            levels.dedup();
            let mut plain = spec.clone();
            plain.rules.preferred.clear();
            for level in levels {
                let mut off: Vec<NodeId> = pools
                    .iter()
                    .flat_map(|&(p, _)| self.pool_nodes(p))
                    .filter(|&n| {
                        let node = &self.nodes[n as usize];
                        spec.rules.preference(&node.name, node.labels()) != level
                    })
                    .collect();
                off.extend_from_slice(exclude);
                if let Some(p) = self.find_node_typed(&plain, mult, pools, &off, avoid, scored, typ)
                {
                    return Some(p);
                }
            }
            return None;
        }
        let view = self.pod_rules_view(spec);
        // Nodes to pass over, as a bit set once there are more than a few: the nodes
        // that constrained jobs need can be most of a large pool, and every candidate
        // is checked.
        let off: Option<Vec<u64>> = (exclude.len() + avoid.len() > 16).then(|| {
            let mut m = vec![0u64; self.nodes.len().div_ceil(64)];
            for &n in exclude.iter().chain(avoid) {
                if let Some(w) = m.get_mut(n as usize / 64) {
                    *w |= 1 << (n % 64);
                }
            }
            m
        });
        let skip = |n: NodeId| match &off {
            Some(m) => m
                .get(n as usize / 64)
                .is_some_and(|w| w >> (n % 64) & 1 == 1),
            None => exclude.contains(&n) || avoid.contains(&n),
        };
        let try_node = |n: NodeId| -> Option<Placement> {
            if skip(n) {
                return None;
            }
            let node = &self.nodes[n as usize];
            if !crate::fit::node_admits(node, spec) {
                return None;
            }
            // The pod-level rules first: a spread pod is refused by most nodes of a
            // zone that holds its share (in workload B, 117 nodes a spread pod), and
            // the rules' answer (a count by domain) costs less than a fit.
            self.pod_rules(spec, view.as_ref(), n, &[]).ok()?;
            fit(node, n, self.overcommit_of(node), spec, mult).ok()
        };
        // maar's candidates: the first few fitting nodes of each model with at least
        // `need` free cards (fewest free cards first), as (free cards, node, placement).
        let first_fits = |pool: PoolId, models: &[u16], need: u32| {
            let mut cands: Vec<(u32, NodeId, Placement)> = Vec::new();
            // Models whose cards all have less memory than asked fit nowhere.
            let want = spec.gpu.memory_per_card;
            for &mid in models.iter().filter(|&&m| self.model_may_hold(m, want)) {
                let range = (pool, mid, need, 0u32)..=(pool, mid, u32::MAX, NodeId::MAX);
                cands.extend(
                    self.index
                        .range(range)
                        .filter_map(|k| try_node(k.3).map(|p| (k.2, k.3, p)))
                        .take(MAAR_CANDIDATES),
                );
            }
            cands
        };
        // The best of them as maar ranks them, then fewer free cards, then node id.
        let best_by_maar = |pool: PoolId, cands: Vec<(u32, NodeId, Placement)>| {
            let cands = cands.into_iter().map(|(free, n, p)| (free as u64, n, p));
            self.rank_nodes(spec, pool, placement::Policy::Maar, cands.collect(), typ)
        };
        for &(pool, on_loan) in pools {
            let all = (pool, 0u16, 0u32, 0u32)..=(pool, u16::MAX, u32::MAX, NodeId::MAX);
            let found = if scored && self.config.placement != placement::Policy::Maar {
                self.pick_by_policy(spec, pool, &try_node, typ)
            } else if spec.gpu.count == 0 {
                // CPU-only: CPU nodes first (they strand no GPU). Then, scored, maar's
                // key over the first few fitting nodes of each GPU model (fewest free
                // cards first): the CPU goes where it leaves idle GPUs most usable.
                // Unscored, the GPU node with the fewest free cards.
                let cpu_nodes = (pool, 0u16, 0u32, 0u32)..=(pool, 0u16, u32::MAX, NodeId::MAX);
                let on_cpu_node = self.index.range(cpu_nodes).find_map(|k| try_node(k.3));
                if on_cpu_node.is_some() || !scored || typ.shapes.is_empty() {
                    on_cpu_node.or_else(|| self.index.range(all).find_map(|k| try_node(k.3)))
                } else {
                    let gpu_models: Vec<u16> = (1..self.models.len() as u16).collect();
                    best_by_maar(pool, first_fits(pool, &gpu_models, 0))
                }
            } else if spec.gpu.shared {
                // Slices: the tightest fits over the pool (least left on the cards
                // taken, then fewest whole cards free). Scored, maar ranks the few
                // tightest; otherwise the tightest wins.
                let maar = scored && !typ.shapes.is_empty();
                let keep = if maar { MAAR_CANDIDATES } else { 1 };
                let mut best: Vec<(u64, NodeId, Placement)> = Vec::new();
                let want = spec.gpu.memory_per_card;
                for k in self
                    .index
                    .range(all)
                    .filter(|k| k.1 != 0 && self.model_may_hold(k.1, want))
                {
                    if let Some(p) = try_node(k.3) {
                        let node = &self.nodes[k.3 as usize];
                        let left: u64 = p
                            .gpus
                            .iter()
                            .map(|s| (node.gpus[s.gpu as usize].free_milli() - s.milli) as u64)
                            .sum::<u64>()
                            * 1000
                            + k.2 as u64;
                        if best.len() < keep || left < best[best.len() - 1].0 {
                            let at = best.partition_point(|b| b.0 <= left);
                            best.insert(at, (left, k.3, p));
                            best.truncate(keep);
                            if !maar && left == 0 {
                                break;
                            }
                        }
                    }
                }
                if maar {
                    self.rank_nodes(spec, pool, placement::Policy::Maar, best, typ)
                } else {
                    best.into_iter().next().map(|b| b.2)
                }
            } else {
                let need = spec.gpu.count * mult;
                let models: Vec<u16> = if spec.gpu.models.is_empty() {
                    (1..self.models.len() as u16).collect()
                } else {
                    spec.gpu
                        .models
                        .iter()
                        .filter_map(|m| self.model_id_of(m))
                        .collect()
                };
                if scored && spec.affinity != Affinity::Spread && !typ.shapes.is_empty() {
                    // maar's placement: among the first few fitting nodes of each model
                    // (fewest free cards first), off models under pressure, the best by
                    // maar's key (fragmentation, capacity fragmentation, best fit).
                    best_by_maar(pool, first_fits(pool, &models, need))
                } else {
                    let mut best: Option<(u32, NodeId, Placement)> = None;
                    let want = spec.gpu.memory_per_card;
                    for mid in models.into_iter().filter(|&m| self.model_may_hold(m, want)) {
                        let range = (pool, mid, need, 0u32)..=(pool, mid, u32::MAX, NodeId::MAX);
                        let hit = if spec.affinity == Affinity::Spread {
                            self.index
                                .range(range)
                                .rev()
                                .find_map(|k| try_node(k.3).map(|p| (k.2, k.3, p)))
                        } else {
                            self.index
                                .range(range)
                                .find_map(|k| try_node(k.3).map(|p| (k.2, k.3, p)))
                        };
                        if let Some((free, n, p)) = hit {
                            let better = match &best {
                                None => true,
                                Some((bf, bn, _)) if spec.affinity == Affinity::Spread => {
                                    (Reverse(free), n) < (Reverse(*bf), *bn)
                                }
                                Some((bf, bn, _)) => (free, n) < (*bf, *bn),
                            };
                            if better {
                                best = Some((free, n, p));
                            }
                        }
                    }
                    best.map(|b| b.2)
                }
            };
            if let Some(mut p) = found {
                p.on_loan = on_loan;
                return Some(p);
            }
        }
        None
    }

    /// Pending jobs whose pool did not exist when they came, given it now that it
    /// does: the pool a job names, once created (a Pool applied after its TrainJob), or
    /// for a job that names none (a pod as users write it), the pool it would be given
    /// now (the first node labelled with a role makes one). Only the jobs with no pool
    /// are looked at (kept apart from the quota's queue keys), so a cycle pays nothing
    /// when every job has one.
    fn pool_homeless(&mut self) {
        let homeless: Vec<JobId> = self
            .pending_loose
            .iter()
            .copied()
            .filter(|&id| {
                let j = &self.jobs[id as usize];
                j.pool.is_none() && j.project.is_some()
            })
            .collect();
        for id in homeless {
            let spec = &self.jobs[id as usize].spec;
            let name = if spec.pool.is_empty() {
                self.pool_for_unnamed(spec).ok()
            } else {
                Some(spec.pool.clone())
            };
            let Some(pool) = name.and_then(|n| self.pool_id(&n).map(|p| (n, p))) else {
                continue;
            };
            self.pending_remove(id);
            let j = &mut self.jobs[id as usize];
            std::sync::Arc::make_mut(&mut j.spec).pool = pool.0;
            j.pool = Some(pool.1);
            self.pending_insert(id);
        }
    }

    /// Places `replicas` replicas of a job, all or none. On success the placements are
    /// committed; on failure nothing changes.
    pub(crate) fn place_gang(
        &mut self,
        id: JobId,
        replicas: u32,
        avoid: &[NodeId],
        gang: bool,
    ) -> u32 {
        let j = &self.jobs[id as usize];
        let spec = j.spec.clone();
        let pools = self.candidate_pools(j.pool);
        if pools.is_empty() || replicas == 0 {
            return 0;
        }
        if spec.affinity == Affinity::SameNode && replicas > 1 {
            let on_node: Vec<NodeId> = Vec::new();
            return match self.find_node_with(&spec, replicas, &pools, &on_node, avoid, true) {
                Some(p) => {
                    for r in split(p, replicas, spec.gpu.count) {
                        self.allocate(id, r);
                    }
                    replicas
                }
                None => 0,
            };
        }
        let before = self.jobs[id as usize].placements.len();
        let mut placed = 0;
        for _ in 0..replicas {
            let exclude: Vec<NodeId> = if spec.affinity == Affinity::Spread {
                self.jobs[id as usize]
                    .placements
                    .iter()
                    .map(|p| p.node)
                    .collect()
            } else {
                Vec::new()
            };
            // Serving replicas prefer distinct nodes but may share one; a TrainJob's
            // explicit spread is a hard rule.
            let soft = matches!(spec.kind, JobKind::Inference(_));
            let found = self
                .find_node_with(&spec, 1, &pools, &exclude, avoid, true)
                .or_else(|| {
                    if soft && !exclude.is_empty() {
                        self.find_node_with(&spec, 1, &pools, &[], avoid, true)
                    } else {
                        None
                    }
                });
            match found {
                Some(p) => {
                    self.allocate(id, p);
                    placed += 1;
                }
                None => {
                    if gang {
                        while self.jobs[id as usize].placements.len() > before {
                            let last = self.jobs[id as usize].placements.len() - 1;
                            self.release_replica(id, last);
                        }
                        return 0;
                    }
                    break;
                }
            }
        }
        placed
    }

    fn placement_summary(&self, id: JobId, from: usize) -> String {
        let j = &self.jobs[id as usize];
        let parts: Vec<String> = j.placements[from..]
            .iter()
            .map(|p| {
                let n = &self.nodes[p.node as usize];
                let mut s = n.name.clone();
                if !p.gpus.is_empty() {
                    let g: Vec<String> = p.gpus.iter().map(|g| g.gpu.to_string()).collect();
                    s.push_str(&format!(" GPU {}", g.join(",")));
                }
                if p.on_loan {
                    s.push_str(&format!(" (on loan from {})", self.pool_name(n.pool)));
                }
                s
            })
            .collect();
        parts.join("; ")
    }

    /// The nodes that waiting jobs with a node selector or a required node affinity
    /// could use, where those are fewer than half of their pools' nodes: jobs that may
    /// go anywhere keep off them while they fit elsewhere (kube-scheduler's spreading
    /// leaves such nodes room by chance; maar's packing would fill them first).
    fn constrained_nodes(&self) -> Vec<NodeId> {
        type Key<'a> = (
            &'a BTreeMap<String, String>,
            &'a Option<Vec<crate::rules::NodeSelectorTerm>>,
            Option<PoolId>,
        );
        let mut seen: Vec<Key> = Vec::new();
        let mut out = Vec::new();
        for &id in &self.pending_constrained {
            let j = &self.jobs[id as usize];
            let s = &j.spec;
            debug_assert!(s.is_constrained());
            let key = (&s.node_selector, &s.rules.node_affinity, j.pool);
            if seen.contains(&key) {
                continue;
            }
            if seen.len() >= 16 {
                break;
            }
            seen.push(key);
            let nodes: Vec<NodeId> = self
                .candidate_pools(j.pool)
                .iter()
                .flat_map(|(p, _)| self.pool_nodes(*p))
                .collect();
            let fit: Vec<NodeId> = nodes
                .iter()
                .copied()
                .filter(|&n| crate::fit::node_selected(&self.nodes[n as usize], s))
                .collect();
            if fit.len() * 2 < nodes.len() {
                out.extend(fit);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Runs one scheduling cycle at the current time.
    pub fn schedule(&mut self) -> CycleReport {
        let mut report = CycleReport::default();
        let usage_before = self.usage_gen;
        self.restart_due();
        // (What the cycle's own placements and evictions change, from here; read only
        // by a loud cycle with backfill, so a forecast's copies, which run a cycle a
        // step, copy nothing for it.)
        let usage_at_start = (!self.quiet && self.config.backfill)
            .then(|| (self.usage_gen, self.project_gen.clone()));
        self.pool_homeless();
        self.refresh_typical();
        let mut queue = self.cycle_queue();
        let mut failed: ShapeMap<Reason> = ShapeMap::new();
        let mut no_victims: ShapeMap<i64> = ShapeMap::new();
        // Runtime bounds by asks and estimate (what the slowest card accepted makes of
        // the estimate: the same for every job that asks alike, all cycle long).
        let mut bounds: crate::fxhash::FxHashMap<(u32, u32), Option<f64>> = Default::default();
        let mut reservation: Option<Reservation> = None;
        let mut strict_block: Option<JobId> = None;
        let constrained = self.constrained_nodes();
        // A quiet copy that words one job's reason (a prospect's) words those of its
        // shape too: a job of the same shape refused earlier in the cycle gives it
        // its reason, as in a loud cycle.
        let worded = match (self.quiet, self.word_only) {
            (true, Some(w)) if self.jobs.get(w).is_some() => {
                let a = self.asks_of(w);
                Some((self.jobs[w as usize].pool, a.epoch, a.id))
            }
            _ => None,
        };

        let mut last = None;
        let mut asked_had_its_turn = false;
        let (mut cut, mut ran_on) = (false, false);
        let mut tried: u64 = 0;
        loop {
            // A prospect's copy stops once its job has had its turn: the jobs after it
            // in the queue change nothing of its fate (a forecast that follows starts
            // with a cycle at the same time, where they come after it again), unless
            // jobs held by their quota are watched (an eviction later in the cycle
            // could let it in again). Where nothing was placed or evicted before its
            // turn and it was not placed (`run_on`), this cycle left the cluster as it
            // found it so far: the forecast's cycle at the same instant would do
            // exactly what the rest of this one does, so it runs on to its end and
            // stands for that one (`again` false).
            if asked_had_its_turn && !queue.watching() {
                if !self.run_on || self.usage_gen != usage_before {
                    cut = true;
                    break;
                }
                ran_on = true;
            }
            // What the last item did to usage may let held jobs in, from here on.
            if let (true, Some(l)) = (queue.watching(), last) {
                self.recheck_held(&mut queue, &l, &report);
            }
            // A quiet cycle ends where every job still to come would be passed over on
            // its shape alone (nothing it does from here changes the cluster).
            if queue.all_passed_over() {
                // (checked in debug builds: each one's shape key found no room)
                #[cfg(debug_assertions)]
                for (item, replicas, carried) in queue.still_to_come() {
                    let k = carried.expect("a queued job's key");
                    let asks = self.asks.cached_value(k.asks).expect("numbered asks");
                    let near = reservation.as_ref().is_none_or(|r| {
                        let speed = self.bound_speed(&self.jobs[item.3 as usize].spec);
                        !keeps_off(r, self.now, speed, k.est)
                    });
                    let key = ShapeKey::new(k.pool, asks, replicas, !near);
                    debug_assert!(
                        failed
                            .get(&key, asks.looks_at_pods, self.usage_gen)
                            .is_some(),
                        "job {} would not be passed over",
                        item.3
                    );
                }
                report.passed_over = queue.still_left();
                break;
            }
            let Some((item, replicas, carried)) = queue.next() else {
                break;
            };
            last = Some(item);
            let (id, scale_up) = (item.3, item.4);
            asked_had_its_turn = self.quiet && self.word_only == Some(id) && !scale_up;
            // On a quiet copy (a forecast's, a prospect's), a queued job's turn first
            // reads its queue key's copy of its pool, estimate and asks number: a job
            // whose shape already found no room is passed over without reading the job
            // (a long queue's turns were mostly cache misses on its jobs). Its phase is
            // read once the turn goes on (a quiet cycle counts no attempts).
            let quick = carried
                .filter(|_| !scale_up && self.quiet)
                .and_then(|k| Some((k.pool, k.est, self.asks.cached_value(k.asks)?)));
            let (phase, pool, est, asks) = match quick {
                Some((pool, est, asks)) => (None, pool, est, asks),
                None => {
                    // Evictions earlier in this cycle may have changed the job.
                    let (phase, pool, est, cached) = {
                        let j = &self.jobs[id as usize];
                        (j.phase, j.pool, j.spec.est_runtime_s, self.asks.cached(j))
                    };
                    let asks = match cached {
                        Some(a) => a,
                        None => self.asks_of(id),
                    };
                    (Some(phase), pool, est, asks)
                }
            };
            let turn_over = |phase: Phase| {
                (scale_up && phase != Phase::Running) || (!scale_up && phase != Phase::Pending)
            };
            if phase.is_some_and(turn_over) {
                continue;
            }
            let replicas = if scale_up {
                let j = &self.jobs[id as usize];
                j.desired_replicas.saturating_sub(j.running_replicas())
            } else {
                replicas
            };
            if replicas == 0 {
                continue;
            }
            tried += 1;
            if let Some(b) = strict_block {
                let msg: Reason =
                    format!("waiting behind {} (backfill is off)", self.job_ref(b)).into();
                self.set_reason(id, &msg);
                continue;
            }
            let looks = asks.looks_at_pods;
            let unworded = self.quiet && worded != Some((pool, asks.epoch, asks.id));
            // Where it lands is not known yet: the slowest card it accepts bounds it.
            // (The slowest card's speed is the same for every job that asks alike.)
            let use_avoid = reservation.as_ref().is_some_and(|r| {
                let speed = *bounds
                    .entry((asks.epoch, asks.id))
                    .or_insert_with(|| self.bound_speed(&self.jobs[id as usize].spec));
                keeps_off(r, self.now, speed, est)
            });
            queue.passed(use_avoid);
            let key = ShapeKey::new(pool, asks, replicas, use_avoid);
            // A forecast's copy tells no reasons, so a job whose shape found no room
            // this cycle ends its turn before its quota is asked: refused by either, it
            // is not placed and nothing else changes (whatever its phase: the turn ends
            // either way).
            if unworded && failed.get(&key, looks, self.usage_gen).is_some() {
                continue;
            }
            if phase.is_none() && turn_over(self.jobs[id as usize].phase) {
                continue;
            }
            let verdict = self.cached_verdict(id, replicas);
            if !verdict.ok {
                if !scale_up {
                    self.set_reason(id, &verdict.message);
                }
                continue;
            }
            if let Some(r) = failed.get(&key, looks, self.usage_gen) {
                if !scale_up {
                    let r = r.clone();
                    self.set_reason(id, &r);
                }
                continue;
            }
            let avoid: Vec<NodeId> = if use_avoid {
                reservation
                    .as_ref()
                    .map(|r| r.nodes.clone())
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            let before = self.jobs[id as usize].placements.len();
            let gang = !scale_up;
            // A job that may go anywhere keeps off the nodes that waiting jobs with a
            // node selector or node affinity need, while it fits elsewhere.
            let loose = !self.jobs[id as usize].spec.is_constrained();
            let mut placed = 0;
            if loose && !constrained.is_empty() {
                let mut soft = avoid.clone();
                soft.extend_from_slice(&constrained);
                placed = self.place_gang(id, replicas, &soft, gang);
            }
            if placed == 0 {
                placed = self.place_gang(id, replicas, &avoid, gang);
            }
            // Preempt (or reclaim) for what is still missing: the whole gang for a
            // start, replica by replica for a scale-up.
            let may_preempt =
                self.config.preemption && !self.jobs[id as usize].spec.rules.never_preempts;
            while placed < replicas && may_preempt && (scale_up || placed == 0) {
                let want = if scale_up { 1 } else { replicas };
                // Evictions never give a job of this shape new victims in this cycle.
                let prio = self.effective_priority(&self.jobs[id as usize]);
                if no_victims
                    .get(&key, looks, self.usage_gen)
                    .is_some_and(|&p| p >= prio)
                {
                    break;
                }
                let Some(victims) = self.find_victims(id, want, !verdict.borrowing) else {
                    no_victims.insert(key, self.usage_gen, prio);
                    break;
                };
                self.evict_for(id, &victims, &mut report);
                failed.clear();
                queue.failed_cleared();
                let got = self.place_gang(id, want, &[], gang);
                if got == 0 {
                    break;
                }
                placed += got;
            }
            if placed > 0 {
                // The real share of shared cards is known only now: hold the quota to it.
                if let Some(over) = self.over_max(id) {
                    while self.jobs[id as usize].placements.len() > before {
                        let last = self.jobs[id as usize].placements.len() - 1;
                        self.release_replica(id, last);
                    }
                    if !scale_up {
                        self.jobs[id as usize].reason = over.into();
                    }
                    continue;
                }
                let borrowing = self.above_reserved(id);
                let summary = if self.quiet {
                    String::new()
                } else {
                    self.placement_summary(id, before)
                };
                if scale_up {
                    if borrowing {
                        self.jobs[id as usize].borrowed = true;
                    }
                    let n = self.jobs[id as usize].running_replicas();
                    self.emit(
                        Severity::Normal,
                        "ScaledUp",
                        self.job_ref(id),
                        format!("now {n} replicas: added {summary}"),
                    );
                    report.scaled_up.push(id);
                } else {
                    self.set_phase(id, Phase::Running);
                    // It runs at its slowest card's speed.
                    let speed = self.placed_speed(id);
                    let j = &mut self.jobs[id as usize];
                    j.remaining_s = j
                        .spec
                        .est_runtime_s
                        .map(|r| Cluster::scaled_runtime(r, speed));
                    j.borrowed = borrowing;
                    self.forget_first_ends(id);
                    let j = &mut self.jobs[id as usize];
                    j.reason = "".into();
                    if !self.quiet {
                        let wait = self.wait_s(&self.jobs[id as usize]);
                        self.emit(
                            Severity::Normal,
                            "Scheduled",
                            self.job_ref(id),
                            format!(
                                "placed on {summary} after {}{}",
                                fmt_duration(wait),
                                if borrowing { " (borrowing quota)" } else { "" }
                            ),
                        );
                    }
                    report.started.push(id);
                }
                continue;
            }
            // Could not place. Say why, and hold a reservation for the first such job.
            let reason = if unworded {
                String::new()
            } else if use_avoid && self.would_fit(id, replicas) {
                let r = reservation
                    .as_ref()
                    .map(|r| self.job_ref(r.job))
                    .unwrap_or_default();
                format!("fits now, but would delay {r} (backfill: its estimated runtime ends after that job's reserved start)")
            } else {
                self.headline(id, if scale_up { 1 } else { replicas })
            };
            let reason: Reason = reason.into();
            failed.insert(key, self.usage_gen, reason.clone());
            queue.failed(&key);
            if !scale_up {
                self.jobs[id as usize].reason = reason;
                if reservation.is_none() {
                    if self.config.backfill {
                        reservation = self.reserve(id, replicas);
                        if let Some(r) = &reservation {
                            queue.reserved(
                                |rep, asks| match bounds.get(&asks) {
                                    Some(&speed) => speed,
                                    None => self.bound_speed(&self.jobs[rep as usize].spec),
                                },
                                |speed, est| keeps_off(r, self.now, speed, est),
                            );
                        }
                    } else {
                        strict_block = Some(id);
                    }
                }
            }
        }
        // A job's first line tells the quota as the cycle leaves it: held keys were
        // told at the start of the cycle (and again only for the jobs whose turn was
        // still to come), and a job refused at its turn for room may be refused by its
        // quota now (a later job of its project started), which the next cycle asks
        // first.
        // (Nothing to tell again where the cycle moved no usage; with backfill off,
        // every job is decided at its turn and keeps that turn's words.)
        if let Some((_, gens)) = usage_at_start.filter(|(gen, _)| *gen != self.usage_gen) {
            self.tell_held_again(&gens);
        }
        // On a prospect's copy, a cycle that ran whole and placed and evicted nothing
        // leaves nothing for another at the same instant to do differently.
        self.again = !self.run_on || cut || (!ran_on && self.usage_gen != usage_before);
        if !self.quiet {
            let a = &mut self.attempts;
            let placed = (report.started.len() + report.scaled_up.len()) as u64;
            a.cycles += 1;
            a.scheduled += placed;
            a.unschedulable += tried.saturating_sub(placed);
        }
        report
    }

    /// Tells the jobs of every queue key its quota refuses the verdict as it stands
    /// (unchanged verdicts cost a lookup).
    fn tell_held_again(&mut self, gens_at_start: &[u64]) {
        // Only the keys of projects whose usage moved during the cycle.
        let moved = |p: usize| gens_at_start.get(p) != self.project_gen.get(p);
        let keys: Vec<_> = self
            .pending_by_key
            .keys()
            .filter(|k| moved(k.0 as usize))
            .copied()
            .collect();
        for key in keys {
            let Some((&rep, rk)) = self.pending_by_key[&key].iter().next() else {
                continue;
            };
            let v = self.cached_verdict(rep, rk.replicas);
            if !v.ok {
                self.tell_key(key, &v.message);
            }
        }
    }

    /// A job's asks number, interned once per table: read where the job holds it, so
    /// that a copy's cycle reading a queue copies none of its (shared) jobs.
    fn asks_of(&mut self, id: JobId) -> crate::model::AsksCache {
        if let Some(a) = self.asks.cached(&self.jobs[id as usize]) {
            return a;
        }
        let j = &mut self.jobs[id as usize];
        self.asks.intern(j)
    }

    /// Whether a job's reason goes unworded: on a quiet copy, all but `word_only`'s.
    fn unworded(&self, id: JobId) -> bool {
        self.quiet && self.word_only != Some(id)
    }

    /// Sets a job's one-line reason (shared, so a queue of jobs refused for one reason
    /// holds one copy and an unchanged reason costs nothing).
    pub(crate) fn set_reason(&mut self, id: JobId, why: &Reason) {
        // A forecast's copy reads no reasons (only starts): a long queue's walk each
        // cycle of the copy is spared the lookup.
        if self.unworded(id) {
            return;
        }
        let j = &mut self.jobs[id as usize];
        if !std::sync::Arc::ptr_eq(&j.reason, why) {
            j.reason = why.clone();
        }
    }

    /// Whether the job would fit right now, ignoring backfill reservations.
    fn would_fit(&self, id: JobId, replicas: u32) -> bool {
        let j = &self.jobs[id as usize];
        let pools = self.candidate_pools(j.pool);
        let mult = if j.spec.affinity == Affinity::SameNode {
            replicas
        } else {
            1
        };
        self.find_node(&j.spec, mult, &pools, &[], &[]).is_some()
    }
}

#[cfg(test)]
mod tests {
    use crate::model::*;
    use crate::placement::{Policy, Shape};
    use crate::testkit::{add_train_node, add_train_node_with_cpu, train_cluster};

    /// 40 nodes of 8 cards and 64 cores, one of 8 cards and 128 cores; 96 one-card jobs
    /// and one that asks for 8 cards and 120 cores (only the large node holds it).
    fn rare_large_job(placement: Policy) -> Vec<(Shape, f64)> {
        let mut c = train_cluster();
        c.config.placement = placement;
        for i in 0..40 {
            add_train_node(&mut c, &format!("n{i}"), "a100", 8);
        }
        add_train_node_with_cpu(&mut c, "large", "a100", 8, 128_000);
        for i in 0..96 {
            let mut s = JobSpec::train(&format!("s{i}"), "p", "train", 1);
            s.cpu_milli = 8000;
            c.submit(s).unwrap();
        }
        let mut s = JobSpec::train("big", "p", "train", 8);
        s.cpu_milli = 120_000;
        c.submit(s).unwrap();
        c.schedule();
        c.typical.clone()
    }

    /// A quiet cycle (a forecast's, a prospect's) ends once every job still to come
    /// would be passed over on its shape alone (near the backfill reservation's nodes
    /// or clear of them, as its estimate says), and leaves the cluster as the whole
    /// cycle does.
    #[test]
    fn a_quiet_cycle_ends_once_every_job_to_come_would_be_passed_over() {
        let mut c = train_cluster();
        add_train_node(&mut c, "a", "a100", 4);
        add_train_node(&mut c, "b", "h100", 4);
        for i in 0..60 {
            let mut s = JobSpec::train(&format!("j{i}"), "p", "train", 1);
            if i % 3 == 0 {
                s.gpu.models = vec!["h100".into()];
            }
            s.est_runtime_s = Some(600 + 60 * i as u64);
            c.submit(s).expect("submitted");
        }
        let mut quiet = c.clone();
        quiet.quiet = true;
        let q = quiet.schedule();
        let loud = c.schedule();
        assert_eq!(q.started, loud.started);
        assert_eq!(loud.started.len(), 8);
        assert!(q.passed_over >= 40, "passed over {}", q.passed_over);
        assert_eq!(loud.passed_over, 0, "a loud cycle words every job's reason");
        for j in c.jobs.iter() {
            let k = &quiet.jobs[j.id as usize];
            assert_eq!(
                (j.phase, &j.placements),
                (k.phase, &k.placements),
                "{}",
                j.id
            );
        }
        // A job of a third shape that fits (no GPU), last in the queue: the cycle runs
        // on to it.
        let mut quiet = c.clone();
        quiet.quiet = true;
        let late = quiet
            .submit(JobSpec::train("late", "p", "train", 0))
            .expect("submitted");
        let q = quiet.schedule();
        assert_eq!(q.started, vec![late]);
        assert_eq!(q.passed_over, 0);
    }

    #[test]
    fn maar_measures_against_a_rare_shape_only_few_nodes_can_hold() {
        let big = |t: &[(Shape, f64)]| t.iter().any(|(s, _)| s.count == 8 && s.cpu == 120_000);
        let maar = rare_large_job(Policy::Maar);
        assert!(big(&maar), "{maar:?}");
        assert!((maar.iter().map(|x| x.1).sum::<f64>() - 1.0).abs() < 1e-9);
        // The published policies read the typical shapes alone, as published.
        let fgd = rare_large_job(Policy::Fgd);
        assert!(!big(&fgd), "{fgd:?}");
        assert_eq!(fgd.len(), 1, "{fgd:?}");
    }
}
