//! Preemption and reclaim: which running jobs a waiting one may evict, the fewest that
//! let it start, and their eviction.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::cluster::Cluster;
use crate::event::Severity;
use crate::fit::{fit, fit_except, statically_fits, Except, NodeReason};
use crate::model::*;
use crate::schedule::{node_add, node_remove, CycleReport};

impl Cluster {
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
        if v.id == j.id || v.phase != Phase::Running || v.terminating {
            return false;
        }
        // Placed at this instant (started, or a replica added: a service's lost
        // replica replaced): the cycle that placed it weighed it against every job
        // then waiting; it is not evicted in the same instant (a reclaim or a lender's
        // job later in the queue waits for the next one).
        if v.started == Some(self.now) || v.placed_at == self.now {
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
            || (within_reserved && v.pool == j.pool && self.borrowing(v))
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
    pub(crate) fn except_on<'a>(&self, n: NodeId, victims: &'a [JobId]) -> Except<'a> {
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
                e.pods += 1;
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
                .get_min()
                .is_none_or(|&(p, _, _)| p as i64 >= rank)
                || self
                    .running_base
                    .keys()
                    .next()
                    .is_none_or(|&p| p >= spec.priority))
        {
            return None;
        }
        // Where it may not reclaim, it evicts only a job of lower base priority (or one
        // on loan on that node, counted as the lowest): a node whose lowest is not
        // lower holds nobody it may evict.
        let nobody_lower = |n: NodeId| !within_reserved && self.lowest_prio(n) >= spec.priority;
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
                    if nobody_lower(n) {
                        continue;
                    }
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
                // Jobs started at this instant are never evicted (`evictable`); in the
                // index they come first among their rank (the most recent start first),
                // so each rank's are stepped over at once: after a cycle that placed
                // thousands, a search would otherwise walk them all.
                use std::ops::Bound::{Excluded, Unbounded};
                let mut walk = self
                    .running_by_prio
                    .range::<_, (i32, Reverse<u64>, JobId)>(..);
                let mut anyone = false;
                while let Some(&(prio, Reverse(started), v)) = walk.next() {
                    if prio as i64 >= rank && !reclaim {
                        break;
                    }
                    if started == self.now {
                        let past = (prio, Reverse(started), JobId::MAX);
                        walk = self.running_by_prio.range((Excluded(past), Unbounded));
                        continue;
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
                        {
                            anyone = true;
                            if single(v, n) {
                                return Some(vec![v]);
                            }
                        }
                    }
                }
                // Without reclaim the walk met every job this one may evict (past its
                // rank none is lower): none on a node that could take it, no set of
                // them either.
                if !anyone && !reclaim {
                    return None;
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
                    if !overlay.contains_key(&n) && nobody_lower(n) {
                        continue;
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

    /// Evicts `victims` so that job `id` can start, with an event for each.
    pub(crate) fn evict_for(&mut self, id: JobId, victims: &[JobId], report: &mut CycleReport) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{add_train_node, train_cluster};

    /// The victim a walk over every job on the job's nodes finds, one by one in the
    /// preference order (lowest rank, most recent start, id, node): the reference
    /// preemption's search among the few nodes a job names must agree with; and
    /// whether any job at all may be evicted for it on a node that could take it.
    fn first_victim_walking_every_job(c: &Cluster, id: JobId) -> (Option<JobId>, bool) {
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
        let anyone = !cands.is_empty();
        let first = cands
            .into_iter()
            .map(|(_, _, v, n)| (v, n))
            .find_map(|(v, n)| {
                let node = &c.nodes[n as usize];
                let ex = c.except_on(n, std::slice::from_ref(&v));
                fit_except(node, n, c.overcommit_of(node), &j.spec, 1, &ex)
                    .is_ok()
                    .then_some(v)
            });
        (first, anyone)
    }

    #[test]
    fn the_victim_of_one_is_the_first_a_walk_over_every_job_finds() {
        let mut rnd = crate::testkit::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let (mut found, mut nobody) = (0, 0);
        for case in 0..200 {
            let mut c = train_cluster();
            // Many nodes of a common model and a few of a rare one, so the job that
            // names the rare one has few nodes it could use.
            let nodes = 12 + rnd(12);
            for i in 0..nodes {
                let model = if i < 1 + rnd(3) { "h100" } else { "t4" };
                let gpus = 1 + rnd(4) as u32;
                add_train_node(&mut c, &format!("n{i}"), model, gpus);
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
            // Mostly a minute on; sometimes at the instant of the last cycle, whose
            // jobs may not be evicted (the walk steps over them).
            if rnd(3) > 0 {
                c.set_time(c.now + 60);
            }
            let mut spec = JobSpec {
                priority: [PRIORITY_MEDIUM, PRIORITY_HIGH][rnd(2) as usize],
                ..JobSpec::train(&format!("hi{case}"), "p", "train", 1 + rnd(2) as u32)
            };
            // The rare model (a few nodes: their jobs are looked at), the common one or
            // any (the preference index is walked).
            match rnd(3) {
                0 => spec.gpu.models = vec!["h100".into()],
                1 => spec.gpu.models = vec!["t4".into()],
                _ => {}
            }
            let id = c.submit(spec).expect("a new name");
            let (want, anyone) = first_victim_walking_every_job(&c, id);
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
            } else if !anyone {
                assert_eq!(got, None, "case {case}: nobody may be evicted");
                nobody += 1;
            }
        }
        assert!(found > 50, "{found} cases had a victim");
        assert!(nobody > 5, "{nobody} cases had nobody to evict");
    }

    /// The lowest priority kept per node follows a running job's priority change:
    /// lowered, it is a victim on a node that held nobody lower before.
    #[test]
    fn a_running_job_lowered_becomes_a_victim_where_nobody_was_lower() {
        let mut c = train_cluster();
        add_train_node(&mut c, "rare", "h100", 1);
        for i in 0..4 {
            add_train_node(&mut c, &format!("n{i}"), "t4", 1);
        }
        let on = |name: &str, priority: i32| JobSpec {
            priority,
            gpu: GpuRequest {
                models: vec!["h100".into()],
                ..JobSpec::train(name, "p", "train", 1).gpu
            },
            ..JobSpec::train(name, "p", "train", 1)
        };
        let r = c.submit(on("r", PRIORITY_HIGH)).expect("submitted");
        c.schedule();
        assert_eq!(c.jobs[r as usize].phase, Phase::Running);
        c.set_time(c.now + 60);
        let w = c.submit(on("w", PRIORITY_HIGH)).expect("submitted");
        c.warm_node_caches();
        assert_eq!(
            c.find_victims(w, 1, false),
            None,
            "nobody lower on its one node"
        );
        c.apply(crate::Command::SetPriority {
            job: "p/r".into(),
            priority: PRIORITY_LOW,
        })
        .expect("lowered");
        assert_eq!(c.find_victims(w, 1, false), Some(vec![r]));
        c.apply(crate::Command::SetPriority {
            job: "p/r".into(),
            priority: PRIORITY_HIGH,
        })
        .expect("raised");
        assert_eq!(c.find_victims(w, 1, false), None);
    }
}
