//! The scheduling cycle: order the queue, admit by quota, place (gang, spread, pack),
//! preempt, reclaim loans and backfill.
//!
//! One call to [`Cluster::schedule`] is one cycle at the cluster's current time. It is
//! deterministic: the same state gives the same placements and the same events.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use serde::Serialize;

use crate::cluster::Cluster;
use crate::event::Severity;
use crate::fit::{fit, fit_except, split, Except, NodeReason};
use crate::model::*;
use crate::placement::{self, Shape};
use crate::quantity::fmt_duration;
use crate::shape::{ShapeKey, ShapeMap};

/// The quota decision for a job, with the numbers behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QuotaVerdict {
    pub ok: bool,
    /// Admitted above the project's reserved GPUs (borrowing idle quota).
    pub borrowing: bool,
    pub message: String,
}

pub(crate) use crate::verdict::{CachedVerdict, VerdictKey};

/// A queue item's sort key: (effective priority, share, submitted, job, scale-up).
type QueueItem = (Reverse<i64>, u64, u64, JobId, bool);

/// A verdict key whose jobs the quota refuses at the start of a cycle.
#[derive(Debug)]
struct Held {
    key: VerdictKey,
    /// The project's usage generation the verdict was made at.
    project_gen: u64,
    message: Reason,
}

/// One cycle's queue: the ordered items (a stack, next last), items that joined during
/// the cycle (a min-heap), and the keys held back by quota.
#[derive(Debug, Default)]
struct CycleQueue {
    items: Vec<(QueueItem, u32)>,
    extra: BinaryHeap<Reverse<(QueueItem, u32)>>,
    held: Vec<Held>,
    shares: Vec<u64>,
    watch: bool,
}

impl CycleQueue {
    /// The next item in order.
    fn next(&mut self) -> Option<(QueueItem, u32)> {
        match (self.items.last(), self.extra.peek()) {
            (Some(a), Some(Reverse(b))) if b < a => self.extra.pop().map(|r| r.0),
            (Some(_), _) => self.items.pop(),
            (None, _) => self.extra.pop().map(|r| r.0),
        }
    }

    /// Whether held keys may need deciding again.
    fn watching(&self) -> bool {
        self.watch
    }
}

/// What one cycle did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CycleReport {
    /// Jobs that went from Pending to Running.
    pub started: Vec<JobId>,
    /// Running inference jobs that got more replicas.
    pub scaled_up: Vec<JobId>,
    /// Jobs evicted by preemption or reclaim.
    pub preempted: Vec<JobId>,
}

/// EASY backfill: the first blocked job's reservation.
#[derive(Clone, Debug)]
pub(crate) struct Reservation {
    pub job: JobId,
    /// When it is expected to fit (None: not known, e.g. no runtime estimates).
    pub until: Option<u64>,
    pub nodes: Vec<NodeId>,
}

/// Adds a placement's usage to a node (shared by real allocation and what-if copies).
pub(crate) fn node_add(node: &mut Node, job: JobId, p: &Placement) {
    node.alloc_cpu += p.cpu;
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
        node.alloc_mem -= p.mem;
        node.alloc_disk -= p.disk;
    }
    for g in &mut node.gpus {
        g.allocs.retain(|a| a.job != job.id);
    }
    node.jobs.retain(|&j| j != job.id);
}

/// Whether a node could ever take the job, whatever runs on it: ready, uncordoned,
/// GPUs labelled, an allowed model, cards large enough. Cheap: no allocation.
fn statically_fits(node: &Node, spec: &JobSpec) -> bool {
    if !node.ready() || crate::fit::node_rules(node, spec).is_err() {
        return false;
    }
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

/// How many fitting nodes per GPU model maar's placement compares.
const MAAR_CANDIDATES: usize = 8;

/// maar's ordering key (lower is better): FGD's score of the fragmentation decrease, then
/// the capacity fragmentation removed (both higher first), then what is left.
type MaarKey = (Reverse<i64>, Reverse<i64>, i64);

impl Cluster {
    /// maar's ordering key for placing `p` on node `n`: the fragmentation decrease
    /// against the typical shapes as FGD scores it, then the decrease of capacity
    /// fragmentation (idle GPU that copies of the typical GPU shapes could not use),
    /// then the CPU and GPU left over (best fit).
    fn maar_key(&self, n: NodeId, p: &Placement) -> MaarKey {
        let node = &self.nodes[n as usize];
        let oc = self.overcommit_of(node);
        let model = node.gpu_model().unwrap_or("");
        let cpu = crate::fit::free_cpu(node, oc);
        let free: Vec<u32> = node
            .sched_gpus()
            .iter()
            .map(|g| if g.usable() { g.free_milli() } else { 0 })
            .collect();
        let mut after = free.clone();
        for s in &p.gpus {
            after[s.gpu as usize] -= s.milli;
        }
        let cpu_after = cpu.saturating_sub(p.cpu);
        use placement::{capacity_fragmentation as capacity, fragmentation};
        let fgd = fragmentation(model, cpu, &free, &self.typical)
            - fragmentation(model, cpu_after, &after, &self.typical);
        let cap = capacity(model, cpu, &free, &self.typical_gpu)
            - capacity(model, cpu_after, &after, &self.typical_gpu);
        let (steps, cap) = placement::maar_order(fgd, cap);
        let ask = placement::Ask {
            cpu: p.cpu,
            count: p.gpus.len() as u32,
            gpu_milli: p.gpus.first().map(|s| s.milli).unwrap_or(0),
        };
        let left = placement::maar_leftover(&ask, cpu, free.iter().map(|&f| f as u64).sum());
        (Reverse(steps), Reverse(cap), left)
    }

    /// The node a published policy (`config.placement`) picks in `pool`: every node
    /// that fits scored as the trace replay scores it ([`placement::score`]), the
    /// highest first, then the lowest node id (Random: a node drawn by the job's name);
    /// a shared slice goes on the card the policy chose.
    fn pick_by_policy(
        &self,
        spec: &JobSpec,
        pool: PoolId,
        try_node: &dyn Fn(NodeId) -> Option<Placement>,
    ) -> Option<Placement> {
        use placement::{Ask, Measure, Memo, NodeView, Policy};
        let policy = self.config.placement;
        let memo = |kind, shapes: &[(Shape, f64)]| {
            if policy == Policy::Fgd {
                Memo::new(kind, shapes.to_vec(), self.models.clone())
            } else {
                Memo::new(kind, Vec::new(), Vec::new())
            }
        };
        let (mut frag, mut cap) = (
            memo(Measure::Fgd, &self.typical),
            memo(Measure::Capacity, &self.typical_gpu),
        );
        let ask_of = |spec: &JobSpec, p: &Placement| Ask {
            cpu: p.cpu,
            count: p.gpus.len() as u32,
            gpu_milli: p
                .gpus
                .first()
                .map(|g| g.milli)
                .unwrap_or(if spec.gpu.count > 0 { GPU_MILLI } else { 0 }),
        };
        let drawn = |n: NodeId| {
            let mut h = crate::fxhash::FxHasher::default();
            std::hash::Hash::hash(&(&spec.name, &spec.project, n), &mut h);
            std::hash::Hasher::finish(&h)
        };
        let all = (pool, 0u16, 0u32, 0u32)..=(pool, u16::MAX, u32::MAX, NodeId::MAX);
        // The best so far: (score, maar's aux, the tie-break: larger wins), the
        // placement and the card.
        type Best = ((i64, i64, u64), Placement, Option<u16>);
        let mut best: Option<Best> = None;
        for k in self.index.range(all) {
            let Some(p) = try_node(k.3) else { continue };
            let node = &self.nodes[k.3 as usize];
            let mut free: Vec<u16> = node
                .sched_gpus()
                .iter()
                .map(|g| if g.usable() { g.free_milli() as u16 } else { 0 })
                .collect();
            free.sort_unstable_by(|a, b| b.cmp(a));
            let mut affinity: Vec<u32> = if policy == Policy::GpuClustering {
                node.jobs
                    .iter()
                    .map(|&j| &self.jobs[j as usize].spec)
                    .filter(|s| s.gpu.count > 0)
                    .map(|s| {
                        placement::affinity_tag(&Ask {
                            cpu: s.cpu_milli,
                            count: s.gpu.count,
                            gpu_milli: s.gpu.milli.filter(|_| s.gpu.shared).unwrap_or(GPU_MILLI),
                        })
                    })
                    .collect()
            } else {
                Vec::new()
            };
            affinity.sort_unstable();
            affinity.dedup();
            let view = NodeView {
                model: node
                    .gpu_model()
                    .and_then(|m| self.model_id_of(m))
                    .unwrap_or(0),
                free_cpu: crate::fit::free_cpu(node, self.overcommit_of(node)),
                free: &free,
                affinity: &affinity,
            };
            let v = placement::score(policy, &view, &ask_of(spec, &p), &mut frag, &mut cap);
            let tie = if policy == Policy::Random {
                drawn(k.3)
            } else {
                u64::MAX - k.3 as u64
            };
            let key = (v.score, v.aux, tie);
            if best.as_ref().is_none_or(|b| key > b.0) {
                best = Some((key, p, v.card));
            }
        }
        let (_, mut p, card) = best?;
        if let (Some(card), Some(slot)) = (card, p.gpus.first_mut()) {
            // The policy's card: one of the job's device resource with that much free
            // compute and room for the slice's memory (else fit's own choice stays).
            let node = &self.nodes[p.node as usize];
            let free_mem = |g: &Gpu| {
                g.memory
                    .saturating_sub(g.allocs.iter().map(|a| a.mem).sum::<u64>())
            };
            if let Some(g) = node.sched_gpus().iter().find(|g| {
                g.usable()
                    && g.resource.as_deref() == spec.gpu.resource.as_deref()
                    && g.free_milli() as u16 == card
                    && g.free_milli() >= slot.milli
                    && free_mem(g) >= slot.mem
                    && g.memory == node.gpus[slot.gpu as usize].memory
            }) {
                slot.gpu = g.index;
            }
        }
        Some(p)
    }

    /// maar's pressure on a GPU model in a pool: the typical demand only that model can
    /// serve, per idle whole card of it.
    fn pressure(&self, pool: PoolId, model: u16) -> f64 {
        let bound = self
            .bound_demand
            .get(model as usize)
            .copied()
            .unwrap_or(0.0);
        let idle = self.idle_by_model.get(&(pool, model)).copied().unwrap_or(0);
        bound / (idle.max(1) * GPU_MILLI as u64) as f64
    }

    /// Keeps the candidates whose model is not under pressure (maar's first criterion
    /// for jobs that could use several models).
    fn ease_pressure<T>(&self, pool: PoolId, cands: &mut Vec<T>, node_of: impl Fn(&T) -> NodeId) {
        let model = |c: &T| {
            let node = &self.nodes[node_of(c) as usize];
            node.gpu_model()
                .and_then(|m| self.model_id_of(m))
                .unwrap_or(0)
        };
        if self.bound_demand.iter().all(|&d| d == 0.0) {
            return; // no typical shape is bound to a model: no pressure anywhere
        }
        let mut seen: Vec<(u16, f64)> = Vec::new();
        for c in cands.iter() {
            let m = model(c);
            if !seen.iter().any(|x| x.0 == m) {
                seen.push((m, self.pressure(pool, m)));
            }
        }
        placement::ease_pressure(cands, |c| {
            let m = model(c);
            seen.iter().find(|x| x.0 == m).map(|x| x.1).unwrap_or(0.0)
        });
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
        self.typical = placement::cover_95(counts);
        self.typical_gpu = placement::gpu_shapes(&self.typical);
        self.bound_demand = placement::bound_demand(&self.typical, &self.models);
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

    /// Capacity a pool's quotas are measured against: its own plus what lenders offer.
    pub fn admission_capacity(&self, pool: PoolId) -> Resources {
        let mut cap = self.pool_capacity(pool);
        for (p, loan) in self.candidate_pools(Some(pool)) {
            if loan {
                cap.add(&self.pool_capacity(p));
            }
        }
        cap
    }

    /// Quota admission for `replicas` more replicas of job `id`.
    pub fn quota_verdict(&self, id: JobId, replicas: u32) -> QuotaVerdict {
        let j = &self.jobs[id as usize];
        self.quota_verdict_for(&j.spec, j.project, j.pool, replicas, 0)
    }

    /// The quota verdict for `replicas` of `spec` in a project and pool, with the
    /// project's max GPUs there raised by `extra_gpu_milli` (a quota request granted):
    /// the same admission the cycle makes, for specs and quotas that are not (yet)
    /// the job's.
    pub fn quota_verdict_for(
        &self,
        spec: &JobSpec,
        project: Option<ProjectId>,
        pool: Option<PoolId>,
        replicas: u32,
        extra_gpu_milli: u64,
    ) -> QuotaVerdict {
        let deny = |m: String| QuotaVerdict {
            ok: false,
            borrowing: false,
            message: m,
        };
        let (Some(pid), Some(pool)) = (project, pool) else {
            return deny(
                self.unknown_project_or_pool(&spec.project, &spec.pool)
                    .unwrap_or_else(|| format!("job {} has no project or pool", spec.name)),
            );
        };
        let project = &self.projects[pid as usize];
        let Some(q) = project.quotas.get(&pool) else {
            return deny(format!(
                "project {} has no quota in pool {}",
                project.name, self.pools[pool as usize].name
            ));
        };
        let mut raised;
        let q = if extra_gpu_milli > 0 {
            raised = q.clone();
            raised.max.gpu_milli = raised.max.gpu_milli.map(|m| m + extra_gpu_milli);
            &raised
        } else {
            q
        };
        let req = spec.replica_request().scaled(replicas as u64);
        let used = self.usage(pid, pool);
        let cap = self.admission_capacity(pool);
        let mut borrowing = false;
        for d in Dim::ALL {
            let r = req.get(d);
            if r == 0 {
                continue;
            }
            let new = used.get(d) + r;
            let reserved = q.reserved.get(d);
            if let Some(max) = q.max.get(d) {
                if new > max {
                    return deny(format!(
                        "quota exceeded: project {} in pool {}: {} used {} + requested {} = {} > max {} (reserved {})",
                        project.name,
                        self.pools[pool as usize].name,
                        d.name(),
                        d.fmt(used.get(d)),
                        d.fmt(r),
                        d.fmt(new),
                        d.fmt(max),
                        d.fmt(reserved)
                    ));
                }
            }
            if new > reserved {
                // Borrowing above the reserved amount may use the pool's unreserved
                // capacity only: other projects' reserved amounts are never lent, used
                // or not. Who physically holds the cards is settled by placement,
                // preemption and reclaim, not here. A request larger than the whole pool
                // is left to the node filter, which names the real shortage.
                let others: u64 = self
                    .projects
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i as ProjectId != pid)
                    .map(|(_, p)| p.quotas.get(&pool).map(|q| q.reserved.get(d)).unwrap_or(0))
                    .sum();
                if new <= cap.get(d) && others + new > cap.get(d) {
                    return deny(format!(
                        "no idle quota to borrow: pool {} has {} {}, {} of it reserved by other projects; project {} would hold {} (reserved {})",
                        self.pools[pool as usize].name,
                        d.fmt(cap.get(d)),
                        d.name(),
                        d.fmt(others),
                        project.name,
                        d.fmt(new),
                        d.fmt(reserved)
                    ));
                }
                if d == Dim::Gpu {
                    borrowing = true;
                }
            }
        }
        let gpu_used = used.gpu_milli + req.gpu_milli;
        QuotaVerdict {
            ok: true,
            borrowing,
            message: format!(
                "quota ok: project {} in pool {} would use {} GPUs (reserved {}, max {}){}",
                project.name,
                self.pools[pool as usize].name,
                Dim::Gpu.fmt(gpu_used),
                Dim::Gpu.fmt(q.reserved.gpu_milli),
                q.max
                    .gpu_milli
                    .map(|m| Dim::Gpu.fmt(m))
                    .unwrap_or_else(|| "unlimited".into()),
                if borrowing {
                    ", borrowing idle quota"
                } else {
                    ""
                }
            ),
        }
    }

    /// Effective priority, the one notion of priority the queue and preemption both
    /// use: base priority plus one per `aging_s` seconds waited (while Pending), or
    /// what waiting gave it before it started (while Running, [`Job::rank`]).
    pub fn effective_priority(&self, j: &Job) -> i64 {
        if j.phase == Phase::Pending {
            let waited = self.now.saturating_sub(j.queued_since);
            j.spec.priority as i64 + (waited / self.config.aging_s.max(1)) as i64
        } else {
            j.rank() as i64
        }
    }

    /// Dominant resource share per project (parts per million of the cluster).
    pub(crate) fn drf_shares(&self) -> Vec<u64> {
        let total = self.totals;
        (0..self.projects.len())
            .map(|p| {
                let mut used = Resources::default();
                for u in self.usage[p].values() {
                    used.add(u);
                }
                [Dim::Gpu, Dim::Cpu, Dim::Memory]
                    .iter()
                    .map(|&d| {
                        let t = total.get(d);
                        if t == 0 {
                            0
                        } else {
                            (used.get(d) as u128 * 1_000_000 / t as u128) as u64
                        }
                    })
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Queue items with their sort keys: (key, job, replicas to place, is a scale-up).
    #[allow(clippy::type_complexity)]
    pub(crate) fn queue_items(&self) -> Vec<((Reverse<i64>, u64, u64, JobId, bool), u32)> {
        let shares = self.drf_shares();
        let share = |j: &Job| j.project.map(|p| shares[p as usize]).unwrap_or(u64::MAX);
        let mut items = Vec::with_capacity(self.pending.len());
        for (&id, k) in &self.pending {
            items.push((self.item_key(id, k, &shares), k.replicas));
        }
        for &id in &self.services {
            let j = &self.jobs[id as usize];
            if j.phase == Phase::Running && j.desired_replicas > j.running_replicas() {
                let key = (Reverse(j.rank() as i64), share(j), j.submitted, j.id, true);
                items.push((key, j.desired_replicas - j.running_replicas()));
            }
        }
        items
    }

    /// The queue in scheduling order: (job, replicas to place, is a scale-up).
    /// Priority (with aging), then fair share (lower dominant share first), then age.
    pub fn queue(&self) -> Vec<(JobId, u32, bool)> {
        let mut items = self.queue_items();
        items.sort_unstable();
        items.into_iter().map(|(k, r)| (k.3, r, k.4)).collect()
    }

    /// A pending job's 1-based queue position, the queue's length and the first five
    /// jobs ahead of it, without sorting the whole queue.
    pub fn queue_position(&self, id: JobId) -> (Option<usize>, usize, Vec<JobId>) {
        let items = self.queue_items();
        let Some(me) = items.iter().find(|(k, _)| k.3 == id && !k.4).map(|x| x.0) else {
            return (None, items.len(), Vec::new());
        };
        let mut ahead: BinaryHeap<(Reverse<i64>, u64, u64, JobId, bool)> = BinaryHeap::new();
        let mut count = 0;
        for (k, _) in &items {
            if *k < me {
                count += 1;
                if ahead.len() < 5 {
                    ahead.push(*k);
                } else if ahead.peek().is_some_and(|top| k < top) {
                    ahead.pop();
                    ahead.push(*k);
                }
            }
        }
        (
            Some(count + 1),
            items.len(),
            ahead.into_sorted_vec().into_iter().map(|k| k.3).collect(),
        )
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
                if let Some(p) = self.find_node_with(&plain, mult, pools, &off, avoid, scored) {
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
            let p = fit(node, n, self.overcommit_of(node), spec, mult).ok()?;
            self.pod_rules(spec, view.as_ref(), n, &[]).ok()?;
            Some(p)
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
        // The best of them by maar's key, then fewer free cards, then node id.
        let best_by_maar = |cands: Vec<(u32, NodeId, Placement)>| {
            cands
                .into_iter()
                .map(|(free, n, p)| (self.maar_key(n, &p), free, n, p))
                .min_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)))
                .map(|b| b.3)
        };
        for &(pool, on_loan) in pools {
            let all = (pool, 0u16, 0u32, 0u32)..=(pool, u16::MAX, u32::MAX, NodeId::MAX);
            let found = if scored && self.config.placement != placement::Policy::Maar {
                self.pick_by_policy(spec, pool, &try_node)
            } else if spec.gpu.count == 0 {
                // CPU-only: CPU nodes first (they strand no GPU). Then, scored, maar's
                // key over the first few fitting nodes of each GPU model (fewest free
                // cards first): the CPU goes where it leaves idle GPUs most usable.
                // Unscored, the GPU node with the fewest free cards.
                let cpu_nodes = (pool, 0u16, 0u32, 0u32)..=(pool, 0u16, u32::MAX, NodeId::MAX);
                let on_cpu_node = self.index.range(cpu_nodes).find_map(|k| try_node(k.3));
                if on_cpu_node.is_some() || !scored || self.typical.is_empty() {
                    on_cpu_node.or_else(|| self.index.range(all).find_map(|k| try_node(k.3)))
                } else {
                    let gpu_models: Vec<u16> = (1..self.models.len() as u16).collect();
                    best_by_maar(first_fits(pool, &gpu_models, 0))
                }
            } else if spec.gpu.shared {
                // Slices: the tightest fits over the pool (least left on the cards
                // taken, then fewest whole cards free). Scored, maar ranks the few
                // tightest; otherwise the tightest wins.
                let maar = scored && !self.typical.is_empty();
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
                    if spec.gpu.models.len() != 1 {
                        self.ease_pressure(pool, &mut best, |c| c.1);
                    }
                    best.into_iter()
                        .map(|(left, n, p)| (self.maar_key(n, &p), left, n, p))
                        .min_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)))
                        .map(|b| b.3)
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
                if scored && spec.affinity != Affinity::Spread && !self.typical.is_empty() {
                    // maar's placement: among the first few fitting nodes of each model
                    // (fewest free cards first), off models under pressure, the best by
                    // maar's key (fragmentation, capacity fragmentation, best fit).
                    let mut cands = first_fits(pool, &models, need);
                    if models.len() > 1 {
                        self.ease_pressure(pool, &mut cands, |c| c.1);
                    }
                    best_by_maar(cands)
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

    /// Whether job `j` outranks running job `v` for preemption: a higher priority,
    /// and ahead of it in the queue's aged order (`v`'s rank is what its wait gave it
    /// when it started, [`Job::rank`]). So a job is never preempted by one it went
    /// ahead of, and waiting alone never lets a job evict one of its own priority
    /// (no two jobs take turns evicting each other as they age).
    pub fn outranks(&self, j: &Job, v: &Job) -> bool {
        v.spec.priority < j.spec.priority && (v.rank() as i64) < self.effective_priority(j)
    }

    /// Whether a running job `v` may be evicted for pending job `j` on node `n`.
    fn evictable(&self, j: &Job, v: &Job, n: NodeId, within_reserved: bool) -> bool {
        if v.id == j.id || v.phase != Phase::Running {
            return false;
        }
        // Placed at this instant: the cycle that placed it weighed it against every
        // job then waiting; it is not evicted in the same instant (a reclaim or a
        // lender's job later in the queue waits for the next one).
        if v.started == Some(self.now) {
            return false;
        }
        let on_loan_here = || v.placements.iter().any(|p| p.node == n && p.on_loan);
        let lower = self.outranks(j, v);
        if self.nodes[n as usize].pool != j.pool {
            // A borrower on a lent node never evicts the lender's own work.
            return lower && on_loan_here();
        }
        // Lower (aged) priority; or reclaim: borrowed quota in the same pool, or a
        // loan on this pool's node (a job on loan here is of another pool: asked only
        // then, since the placements' walk is the dear part of a long search).
        lower
            || (within_reserved && v.borrowed && v.pool == j.pool)
            || (v.pool != j.pool && on_loan_here())
    }

    /// The smallest set of running jobs whose eviction lets `replicas` replicas of `id`
    /// start: fewest victims, then lowest priority, then most recently started.
    pub fn find_victims(
        &self,
        id: JobId,
        replicas: u32,
        within_reserved: bool,
    ) -> Option<Vec<JobId>> {
        self.find_victims_for(&self.jobs[id as usize], replicas, within_reserved)
    }

    /// What `victims` hold on node `n`, as an [`Except`] for what-if fits.
    fn except_on<'a>(&self, n: NodeId, victims: &'a [JobId]) -> Except<'a> {
        let mut e = Except {
            jobs: victims,
            ..Default::default()
        };
        for &v in victims {
            for p in self.jobs[v as usize]
                .placements
                .iter()
                .filter(|p| p.node == n)
            {
                e.cpu += p.cpu;
                e.mem += p.mem;
                e.disk += p.disk;
            }
        }
        e
    }

    /// As [`Cluster::find_victims`], for a job that may be a what-if copy.
    pub fn find_victims_for(
        &self,
        j: &Job,
        replicas: u32,
        within_reserved: bool,
    ) -> Option<Vec<JobId>> {
        let spec = &j.spec;
        // Its aged priority, as the queue ranks it; running jobs by theirs.
        let rank = self.effective_priority(j);
        let pools = self.candidate_pools(j.pool);
        let (units, mult) = if spec.affinity == Affinity::SameNode {
            (1, replicas)
        } else {
            (replicas, 1)
        };
        // The placed pods as the job's pod-level rules see them; a candidate set of
        // victims is taken as gone when a node is judged (as kube-scheduler's
        // preemption removes them before running the filters again): a victim's
        // anti-affinity, a pod the job's anti-affinity selects, a spread count.
        let view = self.pod_rules_view(spec);
        let view = view.as_ref();
        // Nobody to evict: every running job outranks this one and no reclaim applies.
        let reclaim = within_reserved
            || j.pool
                .is_some_and(|p| !self.pools[p as usize].lend_to.is_empty());
        // (It outranks only a job of lower base priority and lower aged rank.)
        if !reclaim
            && (self
                .running_by_prio
                .first()
                .is_none_or(|&(p, _, _)| p as i64 >= rank)
                || self
                    .running_base
                    .keys()
                    .next()
                    .is_none_or(|&p| p >= spec.priority))
        {
            return None;
        }
        if units == 1 {
            // Nothing to evict if it fits as things are.
            if self.find_node(spec, mult, &pools, &[], &[]).is_some() {
                return None;
            }
            // Fast path: one victim is the fewest possible, and running jobs are indexed
            // in preference order (lowest priority, then most recent start), so the
            // first that frees enough on its own is the best answer. Past the job's own
            // priority only reclaim can find victims.
            // Nodes that could take the job at all. When a constraint leaves few of
            // them, look only at their jobs; otherwise walk the preference index,
            // which usually stops at its first entry.
            let total: usize = pools
                .iter()
                .map(|&(p, _)| self.pool_members[p as usize].len())
                .sum();
            // Only whether they are few matters once they are not: the count stops
            // at a quarter.
            let mut compatible: Vec<NodeId> = Vec::new();
            // A job that names its models looks only at nodes of those models (the
            // free-GPU index holds each node once under its pool and model).
            let scan: Box<dyn Iterator<Item = NodeId> + '_> =
                if spec.gpu.count > 0 && !spec.gpu.models.is_empty() {
                    let mids: Vec<u16> = spec
                        .gpu
                        .models
                        .iter()
                        .filter_map(|m| self.model_id_of(m))
                        .collect();
                    Box::new(pools.iter().flat_map(move |&(p, _)| {
                        mids.clone().into_iter().flat_map(move |m| {
                            self.index
                                .range((p, m, 0, 0)..=(p, m, u32::MAX, NodeId::MAX))
                                .map(|k| k.3)
                        })
                    }))
                } else {
                    Box::new(pools.iter().flat_map(|&(p, _)| self.pool_nodes(p)))
                };
            for n in scan {
                if compatible.len() * 4 >= total {
                    break;
                }
                if statically_fits(&self.nodes[n as usize], spec) {
                    compatible.push(n);
                }
            }
            let single = |v: JobId, n: NodeId| {
                let node = &self.nodes[n as usize];
                let ex = self.except_on(n, std::slice::from_ref(&v));
                fit_except(node, n, self.overcommit_of(node), spec, mult, &ex).is_ok()
                    && self.pod_rules(spec, view, n, &[v]).is_ok()
            };
            if compatible.len() * 4 < total {
                let mut cands: Vec<(i32, Reverse<u64>, JobId, NodeId)> = Vec::new();
                for &n in &compatible {
                    for &v in &self.nodes[n as usize].jobs {
                        let vj = &self.jobs[v as usize];
                        if self.evictable(j, vj, n, within_reserved) {
                            cands.push((vj.rank(), Reverse(vj.started.unwrap_or(0)), v, n));
                        }
                    }
                }
                cands.sort_unstable();
                if let Some(&(_, _, v, _)) = cands.iter().find(|c| single(c.2, c.3)) {
                    return Some(vec![v]);
                }
                if cands.is_empty() {
                    // Nobody on a node that could take the job may be evicted.
                    return None;
                }
            } else {
                for &(prio, _, v) in &self.running_by_prio {
                    if prio as i64 >= rank && !reclaim {
                        break;
                    }
                    let vj = &self.jobs[v as usize];
                    let mut nodes: Vec<NodeId> = vj.placements.iter().map(|p| p.node).collect();
                    nodes.dedup();
                    for n in nodes {
                        if pools
                            .iter()
                            .any(|(p, _)| Some(*p) == self.nodes[n as usize].pool)
                            && statically_fits(&self.nodes[n as usize], spec)
                            && self.evictable(j, vj, n, within_reserved)
                            && single(v, n)
                        {
                            return Some(vec![v]);
                        }
                    }
                }
            }
        }
        let mut overlay: BTreeMap<NodeId, Node> = BTreeMap::new();
        let mut victims: Vec<JobId> = Vec::new();
        let mut used_nodes: Vec<NodeId> = j.placements.iter().map(|p| p.node).collect();
        let id = j.id;
        for _ in 0..units {
            type Best = ((usize, i32, Reverse<u64>), NodeId, Vec<JobId>, Placement);
            let mut best: Option<Best> = None;
            for &(pool, on_loan) in &pools {
                for n in self.pool_nodes(pool) {
                    if spec.affinity == Affinity::Spread
                        && !j.is_inference()
                        && used_nodes.contains(&n)
                    {
                        continue;
                    }
                    let base = overlay.get(&n).unwrap_or(&self.nodes[n as usize]);
                    if !statically_fits(base, spec) {
                        continue;
                    }
                    let oc = self.overcommit_of(base);
                    match fit(base, n, oc, spec, mult)
                        .and_then(|p| self.pod_rules(spec, view, n, &victims).map(|_| p))
                    {
                        Ok(mut p) => {
                            p.on_loan = on_loan;
                            let key = (0, i32::MIN, Reverse(0));
                            if best.as_ref().is_none_or(|b| key < b.0) {
                                best = Some((key, n, Vec::new(), p));
                            }
                            continue;
                        }
                        Err(
                            NodeReason::NotReady { .. }
                            | NodeReason::Cordoned
                            | NodeReason::NoGpuLabels { .. }
                            | NodeReason::NoGpus
                            | NodeReason::NoGpuResource { .. }
                            | NodeReason::ModelNotAllowed { .. }
                            | NodeReason::CardMemory { .. }
                            | NodeReason::MigSlices { .. },
                        ) => continue,
                        Err(_) => {}
                    }
                    let mut cands: Vec<&Job> = base
                        .jobs
                        .iter()
                        .map(|&v| &self.jobs[v as usize])
                        .filter(|v| {
                            !victims.contains(&v.id) && self.evictable(j, v, n, within_reserved)
                        })
                        .collect();
                    if cands.is_empty() {
                        continue;
                    }
                    cands.sort_by_key(|v| {
                        (v.rank(), Reverse(v.started.unwrap_or(0)), Reverse(v.id))
                    });
                    let try_set = |set: &[JobId]| {
                        fit_except(base, n, oc, spec, mult, &self.except_on(n, set))
                            .and_then(|p| self.pod_rules(spec, view, n, set).map(|_| p))
                    };
                    // One victim if one suffices, else greedily in preference order.
                    let mut set: Vec<JobId> = match cands.iter().find(|v| try_set(&[v.id]).is_ok())
                    {
                        Some(v) => vec![v.id],
                        None => {
                            let mut set = Vec::new();
                            let mut ok = false;
                            for v in &cands {
                                set.push(v.id);
                                if try_set(&set).is_ok() {
                                    ok = true;
                                    break;
                                }
                            }
                            if !ok {
                                continue;
                            }
                            set
                        }
                    };
                    // Reprieve: give back victims not needed, highest priority first.
                    let mut i = set.len();
                    while i > 0 && set.len() > 1 {
                        i -= 1;
                        let mut without = set.clone();
                        without.remove(i);
                        if try_set(&without).is_ok() {
                            set = without;
                        }
                    }
                    let Ok(mut p) = try_set(&set) else { continue };
                    p.on_loan = on_loan;
                    let vs: Vec<&Job> = set.iter().map(|&v| &self.jobs[v as usize]).collect();
                    let key = (
                        set.len(),
                        vs.iter().map(|v| v.rank()).max().unwrap_or(i32::MIN),
                        Reverse(vs.iter().map(|v| v.started.unwrap_or(0)).max().unwrap_or(0)),
                    );
                    if best.as_ref().is_none_or(|b| key < b.0) {
                        best = Some((key, n, set, p));
                    }
                }
            }
            let (_, n, set, p) = best?;
            for &v in &set {
                let mut held: Vec<NodeId> = self.jobs[v as usize]
                    .placements
                    .iter()
                    .map(|q| q.node)
                    .collect();
                held.sort_unstable();
                held.dedup();
                for q in held {
                    let node = overlay
                        .entry(q)
                        .or_insert_with(|| self.nodes[q as usize].clone());
                    node_remove(node, q, &self.jobs[v as usize]);
                }
                victims.push(v);
            }
            let node = overlay
                .entry(n)
                .or_insert_with(|| self.nodes[n as usize].clone());
            node_add(node, id, &p);
            used_nodes.push(n);
        }
        if victims.is_empty() {
            None
        } else {
            Some(victims)
        }
    }

    /// Estimated end of a running job (start + estimate), if it has an estimate.
    pub fn expected_end(&self, v: &Job) -> Option<u64> {
        match (v.started, v.remaining_s) {
            (Some(s), Some(r)) => Some(s + r),
            _ => None,
        }
    }

    /// Backfill reservation for a blocked job: the node(s) where it will fit soonest as
    /// running jobs end.
    pub(crate) fn reserve(&self, id: JobId, replicas: u32) -> Option<Reservation> {
        let j = &self.jobs[id as usize];
        let spec = &j.spec;
        let (units, mult) = if spec.affinity == Affinity::SameNode || replicas == 1 {
            (1usize, replicas)
        } else {
            (replicas as usize, 1)
        };
        let mut found: Vec<(u64, NodeId)> = Vec::new();
        let view = self.pod_rules_view(spec);
        // A node frees room for it no sooner than its first job ends: nodes are tried
        // in that order, and once `units` of them are found, a node whose first end is
        // later than the last of those cannot be among the earliest (ties are still
        // tried, for the same choice of nodes as a full walk).
        let mut order: Vec<(u64, NodeId)> = self
            .candidate_pools(j.pool)
            .iter()
            .flat_map(|&(pool, _)| self.pool_nodes(pool))
            .map(|n| (self.first_end(n), n))
            .collect();
        order.sort_unstable();
        // `found` is kept in order (end, node) as it grows.
        for (first, n) in order {
            if found.len() >= units && first > found[units - 1].0 {
                break;
            }
            let node = &self.nodes[n as usize];
            let oc = self.overcommit_of(node);
            let mut running: Vec<&Job> =
                node.jobs.iter().map(|&v| &self.jobs[v as usize]).collect();
            running.sort_by_key(|v| (self.expected_end(v).unwrap_or(u64::MAX), v.id));
            let mut gone: Vec<JobId> = Vec::new();
            for v in running {
                gone.push(v.id);
                if fit_except(node, n, oc, spec, mult, &self.except_on(n, &gone)).is_ok()
                    && self.pod_rules(spec, view.as_ref(), n, &gone).is_ok()
                {
                    let f = (self.expected_end(v).unwrap_or(u64::MAX), n);
                    found.insert(found.partition_point(|x| *x < f), f);
                    break;
                }
            }
        }
        if found.is_empty() {
            return None;
        }
        let until = found
            .get(units - 1)
            .or(found.last())
            .map(|f| f.0)
            .filter(|&t| t != u64::MAX);
        Some(Reservation {
            job: id,
            until,
            nodes: found.iter().take(units).map(|f| f.1).collect(),
        })
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
        self.restart_due();
        self.refresh_typical();
        let mut queue = self.cycle_queue();
        let mut failed: ShapeMap<Reason> = ShapeMap::new();
        let mut no_victims: ShapeMap<i64> = ShapeMap::new();
        // Runtime bounds by asks and estimate (what the slowest card accepted makes of
        // the estimate: the same for every job that asks alike, all cycle long).
        let mut bounds: crate::fxhash::FxHashMap<(u32, u32, Option<u64>), Option<u64>> =
            Default::default();
        let mut reservation: Option<Reservation> = None;
        let mut strict_block: Option<JobId> = None;
        let constrained = self.constrained_nodes();

        let mut last: Option<QueueItem> = None;
        let mut tried: u64 = 0;
        loop {
            // What the last item did to usage may let held jobs in, from here on.
            if let (true, Some(l)) = (queue.watching(), last) {
                self.recheck_held(&mut queue, &l, &report);
            }
            let Some((item, replicas)) = queue.next() else {
                break;
            };
            last = Some(item);
            let (id, scale_up) = (item.3, item.4);
            // Evictions earlier in this cycle may have changed the job. (What the rest
            // reads of it, read at once: a long queue's cost is mostly these lookups.)
            let (phase, pool, est, asks) = {
                let j = &mut self.jobs[id as usize];
                (j.phase, j.pool, j.spec.est_runtime_s, self.asks.intern(j))
            };
            if (scale_up && phase != Phase::Running) || (!scale_up && phase != Phase::Pending) {
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
            // Where it lands is not known yet: the slowest card it accepts bounds it.
            let use_avoid = reservation.as_ref().is_some_and(|r| {
                let bound = *bounds
                    .entry((asks.epoch, asks.id, est))
                    .or_insert_with(|| self.runtime_bound(&self.jobs[id as usize].spec));
                !matches!((r.until, bound), (Some(t), Some(rt)) if self.now + rt <= t)
            });
            let key = ShapeKey::new(pool, asks, replicas, use_avoid);
            // A forecast's copy tells no reasons, so a job whose shape found no room
            // this cycle ends its turn before its quota is asked: refused by either, it
            // is not placed and nothing else changes.
            if self.quiet && failed.get(&key, looks, self.usage_gen).is_some() {
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
            while placed < replicas && self.config.preemption && (scale_up || placed == 0) {
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
            let reason = if self.quiet {
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
            if !scale_up {
                self.jobs[id as usize].reason = reason;
                if reservation.is_none() {
                    if self.config.backfill {
                        reservation = self.reserve(id, replicas);
                    } else {
                        strict_block = Some(id);
                    }
                }
            }
        }
        if !self.quiet {
            let a = &mut self.attempts;
            let placed = (report.started.len() + report.scaled_up.len()) as u64;
            a.cycles += 1;
            a.scheduled += placed;
            a.unschedulable += tried.saturating_sub(placed);
        }
        report
    }

    /// Sets a job's one-line reason (shared, so a queue of jobs refused for one reason
    /// holds one copy and an unchanged reason costs nothing).
    fn set_reason(&mut self, id: JobId, why: &Reason) {
        // A forecast's copy reads no reasons (only starts): a long queue's walk each
        // cycle of the copy is spared the lookup.
        if self.quiet {
            return;
        }
        let j = &mut self.jobs[id as usize];
        if !std::sync::Arc::ptr_eq(&j.reason, why) {
            j.reason = why.clone();
        }
    }

    /// The quota verdict for `replicas` more replicas of a job, from the cache while
    /// nothing it reads (the project's usage, quotas, pools, capacity) has changed.
    pub(crate) fn cached_verdict(&mut self, id: JobId, replicas: u32) -> CachedVerdict {
        let j = &self.jobs[id as usize];
        let (Some(p), Some(pl)) = (j.project, j.pool) else {
            let v = self.quota_verdict(id, replicas);
            return CachedVerdict {
                admission: self.admission_gen,
                project: 0,
                ok: v.ok,
                borrowing: v.borrowing,
                message: v.message.into(),
            };
        };
        let r = j.spec.replica_request().scaled(replicas as u64);
        let key = (
            p,
            pl,
            [r.gpu_milli, r.gpu_mem, r.cpu_milli, r.memory, r.disk],
        );
        let (adm, proj) = (self.admission_gen, self.project_gen[p as usize]);
        if let Some(v) = self.verdicts.get(&key) {
            if v.admission == adm && v.project == proj {
                debug_assert_eq!(
                    *v.message,
                    *self.quota_verdict(id, replicas).message,
                    "a cached quota verdict went stale"
                );
                return v.clone();
            }
        }
        let v = self.quota_verdict(id, replicas);
        let c = CachedVerdict {
            admission: adm,
            project: proj,
            ok: v.ok,
            borrowing: v.borrowing,
            message: v.message.into(),
        };
        if self.verdicts.len() > 4096 {
            self.verdicts.clear();
        }
        self.verdicts.insert(key, c.clone());
        c
    }

    /// The sort key of a queue item: effective priority (with aging), fair share,
    /// submission time, id, and whether it is a scale-up.
    fn item_key(&self, id: JobId, k: &crate::cluster::QueueKey, shares: &[u64]) -> QueueItem {
        let aging = self.config.aging_s.max(1);
        let eff = k.priority as i64 + (self.now.saturating_sub(k.queued_since) / aging) as i64;
        let share = k.project.map(|p| shares[p as usize]).unwrap_or(u64::MAX);
        (Reverse(eff), share, k.submitted, id, false)
    }

    /// This cycle's queue. Quota is decided once per verdict key first: the jobs of a
    /// key the quota refuses are held back whole (told why), the others are ordered.
    /// Held keys are checked again whenever their project's usage changes during the
    /// cycle, so the order and the verdicts are exactly those of deciding every job at
    /// its turn, at a cost that follows the jobs that can move.
    fn cycle_queue(&mut self) -> CycleQueue {
        let shares = self.drf_shares();
        let mut q = CycleQueue::default();
        let mut hold = self.config.backfill;
        if !hold {
            // With backfill off, jobs behind the first blocked one wait behind it
            // whatever their quota says: every job is taken in turn.
            q.items = self.queue_items();
        } else {
            let keys: Vec<VerdictKey> = self.pending_by_key.keys().copied().collect();
            for key in keys {
                let rep = *self.pending_by_key[&key].iter().next().expect("non-empty");
                let replicas = self.pending[&rep].replicas;
                let v = self.cached_verdict(rep, replicas);
                if v.ok {
                    self.told.remove(&key);
                    for &id in &self.pending_by_key[&key] {
                        let k = self.pending[&id];
                        q.items.push((self.item_key(id, &k, &shares), k.replicas));
                    }
                } else {
                    let same = self
                        .told
                        .get(&key)
                        .is_some_and(|t| std::sync::Arc::ptr_eq(t, &v.message));
                    if !same {
                        let ids: Vec<JobId> = self.pending_by_key[&key].iter().copied().collect();
                        for id in ids {
                            self.set_reason(id, &v.message);
                        }
                        self.told.insert(key, v.message.clone());
                    }
                    q.held.push(Held {
                        key,
                        project_gen: self.project_gen[key.0 as usize],
                        message: v.message.clone(),
                    });
                }
            }
            for &id in &self.pending_loose {
                let k = self.pending[&id];
                q.items.push((self.item_key(id, &k, &shares), k.replicas));
            }
            for &id in &self.services {
                let j = &self.jobs[id as usize];
                if j.phase == Phase::Running && j.desired_replicas > j.running_replicas() {
                    let share = j.project.map(|p| shares[p as usize]).unwrap_or(u64::MAX);
                    let key = (Reverse(j.rank() as i64), share, j.submitted, j.id, true);
                    q.items
                        .push((key, j.desired_replicas - j.running_replicas()));
                }
            }
            hold = !q.held.is_empty();
        }
        q.items.sort_unstable();
        q.items.reverse();
        q.shares = shares;
        q.watch = hold;
        q
    }

    /// After a change of usage: held keys whose project's usage moved are decided
    /// again, for their jobs still to come in the order (those before `at` had their
    /// turn while the key was refused).
    fn recheck_held(&mut self, q: &mut CycleQueue, at: &QueueItem, report: &CycleReport) {
        let mut i = 0;
        while i < q.held.len() {
            let h = &q.held[i];
            let p = h.key.0 as usize;
            if self.project_gen[p] == h.project_gen {
                i += 1;
                continue;
            }
            let key = h.key;
            let old = h.message.clone();
            // Jobs of this key still pending, that were in the queue at the start of
            // the cycle (not this cycle's victims), and whose turn is still to come.
            let ids: Vec<JobId> = self
                .pending_by_key
                .get(&key)
                .map(|set| {
                    set.iter()
                        .filter(|id| !report.preempted.contains(id))
                        .copied()
                        .collect()
                })
                .unwrap_or_default();
            let Some(&rep) = ids.first() else {
                q.held.swap_remove(i);
                continue;
            };
            let v = self.cached_verdict(rep, self.pending[&rep].replicas);
            let later: Vec<(JobId, QueueItem, u32)> = ids
                .iter()
                .map(|&id| {
                    let k = self.pending[&id];
                    (id, self.item_key(id, &k, &q.shares), k.replicas)
                })
                .filter(|x| x.1 > *at)
                .collect();
            if later.is_empty() {
                q.held.swap_remove(i);
                continue;
            }
            if v.ok {
                // Its jobs take their turns from here on.
                for (_, item, r) in later {
                    q.extra.push(Reverse((item, r)));
                }
                q.held.swap_remove(i);
                continue;
            }
            if !std::sync::Arc::ptr_eq(&old, &v.message) {
                for &(id, _, _) in &later {
                    self.set_reason(id, &v.message);
                }
                // Only the later ones were told: the key's jobs no longer agree.
                self.told.remove(&key);
            }
            let h = &mut q.held[i];
            h.project_gen = self.project_gen[p];
            h.message = v.message;
            i += 1;
        }
        q.watch = !q.held.is_empty();
    }

    /// If the job's project now holds more than its max in the job's pool, says so.
    fn over_max(&self, id: JobId) -> Option<String> {
        let j = &self.jobs[id as usize];
        let (pid, pool) = (j.project?, j.pool?);
        let q = self.projects[pid as usize].quotas.get(&pool)?;
        let used = self.usage(pid, pool);
        Dim::ALL.into_iter().find_map(|d| {
            let max = q.max.get(d)?;
            (used.get(d) > max).then(|| {
                format!(
                    "quota exceeded: project {} in pool {}: {} would reach {} with this placement > max {}",
                    self.projects[pid as usize].name,
                    self.pools[pool as usize].name,
                    d.name(),
                    d.fmt(used.get(d)),
                    d.fmt(max)
                )
            })
        })
    }

    /// Whether the job's project holds more GPUs than reserved in its pool.
    fn above_reserved(&self, id: JobId) -> bool {
        let j = &self.jobs[id as usize];
        let (Some(pid), Some(pool)) = (j.project, j.pool) else {
            return false;
        };
        let reserved = self.projects[pid as usize]
            .quotas
            .get(&pool)
            .map(|q| q.reserved.gpu_milli)
            .unwrap_or(0);
        self.usage(pid, pool).gpu_milli > reserved
    }

    /// Evicts `victims` so that job `id` can start, with an event for each.
    fn evict_for(&mut self, id: JobId, victims: &[JobId], report: &mut CycleReport) {
        let me = self.job_ref(id);
        let j = &self.jobs[id as usize];
        let rank = self.effective_priority(j);
        let prio = match rank - j.spec.priority as i64 {
            0 => priority_name(j.spec.priority),
            aged => format!("{}, +{aged} for its wait", priority_name(j.spec.priority)),
        };
        for &v in victims {
            let reclaim = !self.outranks(&self.jobs[id as usize], &self.jobs[v as usize]);
            let (reason, msg) = if reclaim {
                (
                    "Reclaimed",
                    format!("evicted to return borrowed capacity to {me}"),
                )
            } else {
                ("Preempted", format!("preempted by {me} (priority {prio})"))
            };
            self.evict(v, reason, msg);
            report.preempted.push(v);
        }
        let names: Vec<String> = victims.iter().map(|&v| self.job_ref(v)).collect();
        self.emit(
            Severity::Warning,
            "Preempting",
            me,
            format!("evicting {} to make room", names.join(", ")),
        );
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
    use super::*;
    use crate::cluster::SchedConfig;

    /// The reservation as a walk over every node computes it (no pruning by the
    /// nodes' first ends): the reference `reserve` must agree with.
    fn reserve_walking_every_node(
        c: &Cluster,
        id: JobId,
        replicas: u32,
    ) -> Option<(Option<u64>, Vec<NodeId>)> {
        let j = &c.jobs[id as usize];
        let spec = &j.spec;
        let (units, mult) = if spec.affinity == Affinity::SameNode || replicas == 1 {
            (1usize, replicas)
        } else {
            (replicas as usize, 1)
        };
        let mut found: Vec<(u64, NodeId)> = Vec::new();
        for (pool, _) in c.candidate_pools(j.pool) {
            for n in c.pool_nodes(pool) {
                let node = &c.nodes[n as usize];
                let mut running: Vec<&Job> =
                    node.jobs.iter().map(|&v| &c.jobs[v as usize]).collect();
                running.sort_by_key(|v| (c.expected_end(v).unwrap_or(u64::MAX), v.id));
                let mut gone = Vec::new();
                for v in running {
                    gone.push(v.id);
                    let oc = c.overcommit_of(node);
                    if fit_except(node, n, oc, spec, mult, &c.except_on(n, &gone)).is_ok() {
                        found.push((c.expected_end(v).unwrap_or(u64::MAX), n));
                        break;
                    }
                }
            }
        }
        found.sort_unstable();
        if found.is_empty() {
            return None;
        }
        let until = found
            .get(units - 1)
            .or(found.last())
            .map(|f| f.0)
            .filter(|&t| t != u64::MAX);
        Some((until, found.iter().take(units).map(|f| f.1).collect()))
    }

    #[test]
    fn a_reservation_pruned_by_first_ends_is_the_one_a_walk_over_every_node_finds() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut checked = 0;
        for case in 0..300 {
            let mut c = Cluster::new(SchedConfig::default());
            c.add_pool(Pool {
                name: "train".into(),
                kind: PoolKind::Training,
                selector: [(LABEL_ROLE.to_string(), "train".to_string())].into(),
                overcommit: Overcommit::default(),
                lend_to: vec![],
            });
            c.add_project(Project {
                name: "p".into(),
                department: "d".into(),
                quotas: [(0, Quota::default())].into(),
            });
            for i in 0..(2 + rnd(9)) {
                let gpus = 1 + rnd(4) as u32;
                let name = format!("n{i}");
                let count = gpus.to_string();
                let labels = [
                    (LABEL_ROLE, "train"),
                    (LABEL_MODEL, "a100"),
                    (LABEL_COUNT, &count),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
                c.add_node(Node::new(
                    &name,
                    labels,
                    64_000,
                    512 << 30,
                    1 << 40,
                    (0..gpus)
                        .map(|g| Gpu::new(g, format!("{name}/{g}"), "a100", 80 << 30, false))
                        .collect(),
                ));
            }
            let spec =
                |name: String, gpus: u32, replicas: u32, same: bool, rt: Option<u64>| JobSpec {
                    replicas,
                    affinity: if same {
                        Affinity::SameNode
                    } else {
                        Affinity::Any
                    },
                    est_runtime_s: rt,
                    ..JobSpec::train(&name, "p", "train", gpus)
                };
            for k in 0..(5 + rnd(20)) {
                // Few distinct ends, so ties between nodes are common.
                let rt = (rnd(5) != 0).then(|| 600 * (1 + rnd(4)));
                let s = spec(format!("r{k}"), 1 + rnd(2) as u32, 1, false, rt);
                let _ = c.submit(s);
            }
            c.schedule();
            let (gpus, replicas, same) = (1 + rnd(4) as u32, 1 + rnd(3) as u32, rnd(2) == 0);
            let id = c
                .submit(spec(
                    format!("blocked{case}"),
                    gpus,
                    replicas,
                    same,
                    Some(60),
                ))
                .expect("a new name");
            let want = reserve_walking_every_node(&c, id, replicas);
            let got = c.reserve(id, replicas).map(|r| (r.until, r.nodes));
            assert_eq!(got, want, "case {case}");
            checked += usize::from(want.is_some());
        }
        assert!(checked > 100, "{checked} cases had a reservation");
    }

    /// The victim a walk over every job on the job's nodes finds, one by one in the
    /// preference order (lowest rank, most recent start, id, node): the reference
    /// preemption's search among the few nodes a job names must agree with.
    fn first_victim_walking_every_job(c: &Cluster, id: JobId) -> Option<JobId> {
        let j = &c.jobs[id as usize];
        let mut cands = Vec::new();
        for (n, node) in c.nodes.iter().enumerate() {
            let n = n as NodeId;
            if !statically_fits(node, &j.spec) || node.pool != j.pool {
                continue;
            }
            for &v in &node.jobs {
                let vj = &c.jobs[v as usize];
                let lower = vj.spec.priority < j.spec.priority
                    && (vj.rank() as i64) < c.effective_priority(j);
                if vj.phase == Phase::Running && vj.started != Some(c.now) && lower {
                    cands.push((vj.rank(), Reverse(vj.started.unwrap_or(0)), v, n));
                }
            }
        }
        cands.sort_unstable();
        cands
            .into_iter()
            .map(|(_, _, v, n)| (v, n))
            .find_map(|(v, n)| {
                let node = &c.nodes[n as usize];
                let ex = c.except_on(n, std::slice::from_ref(&v));
                fit_except(node, n, c.overcommit_of(node), &j.spec, 1, &ex)
                    .is_ok()
                    .then_some(v)
            })
    }

    #[test]
    fn the_victim_of_one_is_the_first_a_walk_over_every_job_finds() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut found = 0;
        for case in 0..200 {
            let mut c = Cluster::new(SchedConfig::default());
            c.add_pool(Pool {
                name: "train".into(),
                kind: PoolKind::Training,
                selector: [(LABEL_ROLE.to_string(), "train".to_string())].into(),
                overcommit: Overcommit::default(),
                lend_to: vec![],
            });
            c.add_project(Project {
                name: "p".into(),
                department: "d".into(),
                quotas: [(0, Quota::default())].into(),
            });
            // Many nodes of a common model and a few of a rare one, so the job that
            // names the rare one has few nodes it could use.
            let nodes = 12 + rnd(12);
            for i in 0..nodes {
                let model = if i < 1 + rnd(3) { "h100" } else { "t4" };
                let gpus = 1 + rnd(4) as u32;
                let name = format!("n{i}");
                let count = gpus.to_string();
                let labels = [
                    (LABEL_ROLE, "train"),
                    (LABEL_MODEL, model),
                    (LABEL_COUNT, &count),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
                c.add_node(Node::new(
                    &name,
                    labels,
                    64_000,
                    512 << 30,
                    1 << 40,
                    (0..gpus)
                        .map(|g| Gpu::new(g, format!("{name}/{g}"), model, 80 << 30, false))
                        .collect(),
                ));
            }
            // Fill every card with jobs of low and medium priority, started at a few
            // different times (ties in start time are common).
            for k in 0..(4 * nodes) {
                let spec = JobSpec {
                    priority: [PRIORITY_LOW, PRIORITY_MEDIUM][rnd(2) as usize],
                    ..JobSpec::train(&format!("r{k}"), "p", "train", 1 + rnd(2) as u32)
                };
                let _ = c.submit(spec);
                if rnd(4) == 0 {
                    c.set_time(c.now + 60);
                    c.schedule();
                }
            }
            c.set_time(c.now + 60);
            c.schedule();
            c.set_time(c.now + 60);
            let mut spec = JobSpec {
                priority: [PRIORITY_MEDIUM, PRIORITY_HIGH][rnd(2) as usize],
                ..JobSpec::train(&format!("hi{case}"), "p", "train", 1 + rnd(2) as u32)
            };
            spec.gpu.models = vec!["h100".into()];
            let id = c.submit(spec).expect("a new name");
            let want = first_victim_walking_every_job(&c, id);
            if c.find_node(
                &c.jobs[id as usize].spec,
                1,
                &c.candidate_pools(Some(0)),
                &[],
                &[],
            )
            .is_some()
            {
                continue;
            }
            let got = c.find_victims(id, 1, false);
            if want.is_some() {
                assert_eq!(got, want.map(|v| vec![v]), "case {case}");
                found += 1;
            }
        }
        assert!(found > 50, "{found} cases had a victim");
    }
}
