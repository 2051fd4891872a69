//! Proofs on copies: whether a change lets a job start, and what it starts after.

use crate::cluster::Cluster;
use crate::fit::fit;
use crate::model::*;

use super::*;

impl Cluster {
    /// Proves a change to the cluster: does job `j` run after it? On clusters of at
    /// most [`PROOF_NODES`] nodes the change is applied to a copy with one scheduling
    /// cycle after it (the whole path: jobs ahead, quota, filter, placement, gang,
    /// backfill). Larger clusters are not copied whole: the change is applied to copies
    /// of the nodes it touches (or to the quota) and the job's own path is run on them
    /// ([`Cluster::proves_path`]).
    pub(super) fn proves(&self, j: &Job, change: &[crate::Command]) -> bool {
        if self.nodes.len() > self.config.proof_nodes {
            return self.proves_path(j, change);
        }
        let mut c = self.clone();
        for cmd in change {
            if c.apply(cmd.clone()).is_err() {
                return false;
            }
        }
        c.schedule();
        // A start, or for a service that runs short of replicas, all of them: it ran
        // before the change.
        c.jobs.get(j.id).is_some_and(|after| {
            after.phase == Phase::Running
                && (j.phase != Phase::Running || after.running_replicas() >= after.desired_replicas)
        })
    }

    /// The proof on a large cluster, without a whole copy. The change (labels, an
    /// uncordon of a node or cards, more quota) is applied to copies of the nodes it
    /// touches; then, in the order of one scheduling cycle:
    /// - a job ahead that the change would let in (a touched node it fits, or the raised
    ///   quota admitting a job of the project that fits somewhere) would go first: not
    ///   proven (the proof does not guess what it leaves);
    /// - the first admitted job ahead that still cannot be placed, and that some node
    ///   will take as running jobs end, holds the backfill reservation (or, backfill
    ///   off, the first one blocks every job behind it);
    /// - the job's quota admission and placement, gang included, keeping off the
    ///   reserved nodes unless its estimated runtime ends before the reservation.
    ///
    /// Anything the proof cannot model (another command) is not proven.
    pub(super) fn proves_path(&self, j: &Job, change: &[crate::Command]) -> bool {
        use crate::Command as C;
        let mut touched: Vec<(NodeId, Node)> = Vec::new();
        let mut extra_milli = 0u64;
        for cmd in change {
            let node_named = |name: &str| self.node_by_name.get(name).copied();
            let mut edit = |name: &str, f: &dyn Fn(&mut Node, &Cluster)| -> bool {
                let Some(n) = node_named(name) else {
                    return false;
                };
                let i = match touched.iter().position(|(m, _)| *m == n) {
                    Some(i) => i,
                    None => {
                        touched.push((n, self.nodes[n as usize].clone()));
                        touched.len() - 1
                    }
                };
                f(&mut touched[i].1, self);
                true
            };
            let ok = match cmd {
                C::LabelNode { node, set, remove } => edit(node, &|t, c| {
                    let mut labels = t.labels().clone();
                    for k in remove {
                        labels.remove(k);
                    }
                    for (k, v) in set {
                        labels.insert(k.clone(), v.clone());
                    }
                    t.pool = c.pool_for_labels(&labels);
                    t.set_labels(labels);
                }),
                C::UncordonNode { node } => edit(node, &|t, _| t.cordoned = false),
                C::UncordonGpu { node, gpu } => edit(node, &|t, _| {
                    if let Some(g) = t.gpus.iter_mut().find(|g| g.index == *gpu) {
                        g.cordoned = false;
                    }
                }),
                C::RequestQuota {
                    project,
                    pool,
                    gpus,
                    reserved: false,
                    ..
                } if *project == j.spec.project && *pool == j.spec.pool => {
                    extra_milli += *gpus as u64 * GPU_MILLI as u64;
                    true
                }
                C::ApproveQuota { .. } => true,
                _ => false,
            };
            if !ok {
                return false;
            }
        }
        let replicas = Self::asked_replicas(j);
        let items = self.queue_items();
        let me = items
            .iter()
            .find(|(k, _)| k.3 == j.id)
            .map(|x| x.0)
            .unwrap_or((std::cmp::Reverse(i64::MIN), 0, 0, j.id, false));
        let ahead: Vec<_> = items.iter().filter(|(k, _)| *k < me).collect();
        self.path_after(j, &j.spec, j.pool, replicas, &touched, extra_milli, &ahead)
    }

    /// The job's path after a change (see [`Cluster::proves_path`]): `spec` in `pool`
    /// with the nodes in `touched` replaced by their changed copies, the project's max
    /// raised by `extra_milli`, behind the queue items `ahead` (in queue order).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub(super) fn path_after(
        &self,
        j: &Job,
        spec: &JobSpec,
        pool: Option<PoolId>,
        replicas: u32,
        touched: &[(NodeId, Node)],
        extra_milli: u64,
        ahead: &[&(QueueKey, u32)],
    ) -> bool {
        let pools = self.candidate_pools(pool);
        // A shared slice sized by memory is charged by the card it lands on: the
        // quota must hold its largest share on any card it could take.
        let worst;
        let charged = match self.worst_share(spec, &pools, touched) {
            Some(m) => {
                let mut w = spec.clone();
                w.gpu.milli = Some(m);
                worst = w;
                &worst
            }
            None => spec,
        };
        if !self
            .quota_verdict_for(charged, j.project, pool, replicas, extra_milli)
            .ok
        {
            return false;
        }
        // The job must fit at all before the queue ahead of it is asked.
        if !self.fits_on(spec, &pools, replicas, touched, &[], true) {
            return false;
        }
        // The jobs ahead, in no order: each shape is asked once (jobs of one shape
        // answer alike). Of the shapes admitted but blocked, the first job of each in
        // queue order: the cycle gives the reservation to the first of those it finds
        // room for as running jobs end.
        let mut seen: crate::fxhash::FxHashMap<_, (bool, Option<(QueueKey, JobId, u32)>)> =
            Default::default();
        for item in ahead {
            let (k, reps) = (&item.0, &item.1);
            let Some(a) = self.jobs.get(k.3) else {
                continue;
            };
            if a.id == j.id {
                continue;
            }
            let reps = if k.4 {
                a.desired_replicas.saturating_sub(a.running_replicas())
            } else {
                *reps
            };
            if reps == 0 {
                continue;
            }
            let key = (
                (a.project, a.pool, reps, a.spec.affinity),
                (&a.spec.gpu.models, a.spec.gpu.count, a.spec.gpu.shared),
                (a.spec.gpu.memory_per_card, &a.spec.gpu.vendor),
                (
                    &a.spec.node_selector,
                    a.spec.cpu_milli,
                    a.spec.memory,
                    a.spec.disk,
                ),
            );
            let entry = match seen.get_mut(&key) {
                Some(e) => e,
                None => {
                    let raised = if a.project == j.project && a.pool == j.pool {
                        extra_milli
                    } else {
                        0
                    };
                    let verdict = self.quota_verdict_for(&a.spec, a.project, a.pool, reps, raised);
                    let admitted = verdict.ok;
                    // Let in by the change (a touched node it fits), fitting as things
                    // are (let in by the raised quota, or the state moved since the last
                    // cycle), or making room by preemption: it would take room first,
                    // and the proof does not guess what it leaves.
                    if admitted
                        && (self.fits_on(
                            &a.spec,
                            &self.candidate_pools(a.pool),
                            reps,
                            touched,
                            &[],
                            false,
                        ) || self.fits_now(&a.spec, a.pool, reps)
                            || (self.config.preemption
                                && (self.find_victims(a.id, reps, !verdict.borrowing).is_some()
                                    || self.could_preempt_onto(a, reps, touched))))
                    {
                        return false;
                    }
                    seen.entry(key).or_insert((admitted, None))
                }
            };
            // Only a start (not a service's scale-up) holds the reservation.
            if entry.0 && !k.4 && entry.1.as_ref().is_none_or(|f| *k < f.0) {
                entry.1 = Some((*k, a.id, reps));
            }
        }
        let mut blocked: Vec<(QueueKey, JobId, u32)> =
            seen.into_values().filter_map(|(_, first)| first).collect();
        blocked.sort_unstable_by_key(|b| b.0);
        if !blocked.is_empty() && !self.config.backfill {
            return false;
        }
        let mut avoid: Vec<NodeId> = Vec::new();
        // The first blocked job with a reservation holds it (one that no node will
        // ever take holds none, and the next one's is taken).
        if let Some((b, reps, r)) = blocked
            .iter()
            .find_map(|&(_, b, reps)| self.reserve(b, reps).map(|r| (b, reps, r)))
        {
            // A model the change labels in may be slower than any seen yet.
            let more: Vec<&str> = touched
                .iter()
                .filter(|(_, t)| !t.sched_gpus().is_empty())
                .filter_map(|(_, t)| t.gpu_model())
                .collect();
            let before = match (r.until, self.runtime_bound_with(spec, &more)) {
                (Some(t), Some(rt)) => self.now + rt <= t,
                _ => false,
            };
            if !before {
                avoid = r.nodes;
                // A touched node could become the reservation's once its jobs end.
                let bj = &self.jobs[b as usize];
                let mult = if bj.spec.affinity == Affinity::SameNode {
                    reps
                } else {
                    1
                };
                for (n, t) in touched {
                    if self.could_ever_fit(t, &bj.spec, mult) {
                        avoid.push(*n);
                    }
                }
            }
        }
        // Nodes on loan are taken back in the same cycle when the lender's own work
        // (a job or a service's scale-up, anywhere in the queue) needs them: with such
        // work waiting, only the job's own pool counts.
        let lender_waits = |p: PoolId| {
            self.pending.keys().any(|&id| {
                self.jobs[id as usize].pool == Some(p) && !self.pending_held.contains(&id)
            }) || self.services.iter().any(|&id| {
                let s = &self.jobs[id as usize];
                s.pool == Some(p)
                    && s.phase == Phase::Running
                    && s.desired_replicas > s.running_replicas()
            })
        };
        let pools: Vec<(PoolId, bool)> = pools
            .into_iter()
            .filter(|&(p, loan)| !loan || !lender_waits(p))
            .collect();
        self.fits_on(spec, &pools, replicas, touched, &avoid, true)
    }

    /// For a shared request sized by memory, the largest share (milli) it would be
    /// charged on any usable card of `pools` (touched nodes as changed) that could
    /// take it; `None` for other requests.
    pub(super) fn worst_share(
        &self,
        spec: &JobSpec,
        pools: &[(PoolId, bool)],
        touched: &[(NodeId, Node)],
    ) -> Option<u32> {
        if !spec.gpu.shared || spec.gpu.milli.is_some() || spec.gpu.memory_per_card.is_none() {
            return None;
        }
        let of_node = |n: &Node| -> u32 {
            let model_ok = spec.gpu.models.is_empty()
                || n.gpu_model()
                    .is_some_and(|m| spec.gpu.models.iter().any(|w| w.eq_ignore_ascii_case(m)));
            if !model_ok {
                return 0;
            }
            n.gpus
                .iter()
                .filter_map(|g| crate::fit::share_on_card(spec, g).map(|s| s.0))
                .max()
                .unwrap_or(0)
        };
        let mut worst = 0;
        for &(p, _) in pools {
            for id in self.pool_nodes(p) {
                let n = match touched.iter().find(|(t, _)| *t == id) {
                    Some((_, t)) => t,
                    None => &self.nodes[id as usize],
                };
                worst = worst.max(of_node(n));
            }
        }
        for (_, t) in touched {
            if t.pool.is_some_and(|p| pools.iter().any(|(q, _)| *q == p)) {
                worst = worst.max(of_node(t));
            }
        }
        Some(worst.max(1))
    }

    /// Whether a blocked job could make room by preemption on a node the change touches
    /// (the victims are not searched on the changed copies: any touched node of its
    /// pools that could ever hold it, with a running job of lower priority or on loan
    /// anywhere, counts).
    pub(super) fn could_preempt_onto(
        &self,
        a: &Job,
        reps: u32,
        touched: &[(NodeId, Node)],
    ) -> bool {
        let victims = self
            .running_by_prio
            .get_min()
            .is_some_and(|v| (v.0 as i64) < self.effective_priority(a))
            || self.pools.iter().any(|p| !p.lend_to.is_empty());
        if !victims {
            return false;
        }
        let pools = self.candidate_pools(a.pool);
        let mult = if a.spec.affinity == Affinity::SameNode {
            reps
        } else {
            1
        };
        touched.iter().any(|(_, t)| {
            t.pool.is_some_and(|p| pools.iter().any(|(q, _)| *q == p))
                && self.could_ever_fit(t, &a.spec, mult)
        })
    }

    /// Whether `replicas` of `spec` fit in `pools` (a pool and the pools lending to it,
    /// [`Cluster::candidate_pools`]) with the nodes in `touched` replaced by their
    /// copies, off the nodes in `avoid`: a same-node gang on one node, other replicas
    /// one to a node (as [`Cluster::fits_now`]). With `anywhere` false, only
    /// placements that use a touched node count (what the change lets in).
    pub(super) fn fits_on(
        &self,
        spec: &JobSpec,
        pools: &[(PoolId, bool)],
        replicas: u32,
        touched: &[(NodeId, Node)],
        avoid: &[NodeId],
        anywhere: bool,
    ) -> bool {
        let in_pools = |t: &Node| t.pool.is_some_and(|p| pools.iter().any(|(q, _)| *q == p));
        let ids: Vec<NodeId> = touched.iter().map(|(n, _)| *n).collect();
        let fits_touched = |mult: u32| {
            touched
                .iter()
                .filter(|(n, t)| {
                    in_pools(t)
                        && !avoid.contains(n)
                        && fit(t, *n, self.overcommit_of(t), spec, mult).is_ok()
                })
                .count() as u32
        };
        if spec.affinity == Affinity::SameNode || replicas <= 1 {
            if fits_touched(replicas.max(1)) > 0 {
                return true;
            }
            return anywhere
                && self
                    .find_node(spec, replicas.max(1), pools, &ids, avoid)
                    .is_some();
        }
        let on_touched = fits_touched(1).min(replicas);
        if on_touched == 0 && !anywhere {
            return false;
        }
        let mut used = ids;
        for _ in on_touched..replicas {
            match self.find_node(spec, 1, pools, &used, avoid) {
                Some(p) => used.push(p.node),
                None => return false,
            }
        }
        true
    }
}
