//! The fixes an explanation offers (each proven on a copy) and when a job would start.

use crate::cluster::Cluster;
use crate::fit::{fit, NodeReason};
use crate::model::*;
use crate::quantity::{fmt_bytes, fmt_duration};
use crate::schedule::QuotaVerdict;

use super::*;

impl Cluster {
    /// Whether `replicas` of `spec` would start now in `pool`: the quota admission
    /// (with the project's max raised by `extra_gpu_milli`) and the node filter and
    /// placement, gang included. A suggestion that says "would start now" is one this
    /// says yes to.
    pub(super) fn starts_now(
        &self,
        j: &Job,
        spec: &JobSpec,
        pool: Option<PoolId>,
        replicas: u32,
        extra_gpu_milli: u64,
    ) -> bool {
        self.quota_verdict_for(spec, j.project, pool, replicas, extra_gpu_milli)
            .ok
            && self.fits_now(spec, pool, replicas)
    }

    /// Whether resubmitting job `j` as `spec` (in `pool`) would start it: on clusters
    /// of at most [`PROOF_NODES`] nodes, proven on a copy (the job cancelled, the new
    /// spec submitted, a cycle run: jobs ahead and backfill reservations included);
    /// beyond that, the job's own path after the jobs that would be ahead of it
    /// ([`Cluster::path_after`]).
    pub(super) fn resubmit_starts(
        &self,
        j: &Job,
        spec: &JobSpec,
        pool: Option<PoolId>,
        replicas: u32,
    ) -> bool {
        if !self.starts_now(j, spec, pool, replicas, 0) {
            return false;
        }
        if self.nodes.len() > self.config.proof_nodes {
            // Resubmitted, it queues as the newest job, its waiting not aged yet: every
            // job of at least its priority (aged) and no larger share is ahead of it.
            let items = self.queue_items();
            let Some(me) = items.iter().find(|(k, _)| k.3 == j.id).map(|x| x.0) else {
                return self.path_after(j, spec, pool, replicas, &[], 0, &[]);
            };
            let rank = std::cmp::Reverse(spec.priority as i64);
            let ahead: Vec<_> = items
                .iter()
                .filter(|(k, _)| k.3 != j.id && (k.0, k.1) <= (rank, me.1))
                .collect();
            return self.path_after(j, spec, pool, replicas, &[], 0, &ahead);
        }
        let mut c = self.clone();
        let name = j.spec.full_name();
        let mut s = JobSpec::clone(spec);
        s.name = format!("{}-explain-proof", spec.name);
        if let Some(p) = pool {
            s.pool = self.pools[p as usize].name.clone();
        }
        let new = s.full_name();
        if c.apply(crate::Command::Cancel {
            job: name,
            why: None,
        })
        .is_err()
            || c.apply(crate::Command::Submit(Box::new(s))).is_err()
        {
            return false;
        }
        c.schedule();
        c.job_id(&new)
            .ok()
            .is_some_and(|id| c.jobs[id as usize].phase == Phase::Running)
    }

    /// Nodes lent between `pool` and other pools now: for each (lender, borrower) pair
    /// involving `pool`, the nodes borrowed work runs on.
    pub(super) fn loans_of(&self, pool: Option<PoolId>) -> Vec<String> {
        let Some(pool) = pool else { return Vec::new() };
        // Only where some pool lends at all.
        if self.pools.iter().all(|p| p.lend_to.is_empty()) {
            return Vec::new();
        }
        let mut by: std::collections::BTreeMap<
            (PoolId, PoolId),
            std::collections::BTreeSet<String>,
        > = Default::default();
        for &(_, _, id) in &self.running_by_prio {
            let j = &self.jobs[id as usize];
            let Some(borrower) = j.pool else { continue };
            for p in j.placements.iter().filter(|p| p.on_loan) {
                let n = &self.nodes[p.node as usize];
                let Some(lender) = n.pool else { continue };
                if lender == pool || borrower == pool {
                    by.entry((lender, borrower))
                        .or_default()
                        .insert(n.name.clone());
                }
            }
        }
        by.into_iter()
            .map(|((l, b), nodes)| {
                format!(
                    "pool {} lends {} to pool {} (taken back when its own jobs need them)",
                    self.pools[l as usize].name,
                    nodes.into_iter().collect::<Vec<_>>().join(", "),
                    self.pools[b as usize].name
                )
            })
            .collect()
    }

    /// What running on other models costs, where the scenario gives model speeds and
    /// the job a runtime: the card it would land on, how long it would run there
    /// against its own models, and whether waiting for its own models (room expected
    /// when the backfill reservation says) would finish sooner.
    pub(super) fn other_models_cost(&self, j: &Job, any: &JobSpec, replicas: u32) -> String {
        let Some(est) = j.spec.est_runtime_s else {
            return String::new();
        };
        if self.config.speeds.is_empty() {
            return String::new();
        }
        let mult = if any.affinity == Affinity::SameNode {
            replicas
        } else {
            1
        };
        let pools = self.candidate_pools(j.pool);
        let Some(p) = self.find_node_with(any, mult, &pools, &[], &[], true) else {
            return String::new();
        };
        let node = &self.nodes[p.node as usize];
        let Some(card) = p
            .gpus
            .iter()
            .filter_map(|g| node.gpus.iter().find(|c| c.index == g.gpu))
            .min_by(|a, b| self.speed_of(&a.model).total_cmp(&self.speed_of(&b.model)))
        else {
            return String::new();
        };
        let slow = self.speed_of(&card.model);
        let own = j
            .spec
            .gpu
            .models
            .iter()
            .map(|m| self.speed_of(m))
            .fold(f64::INFINITY, f64::min);
        if slow >= own {
            return String::new();
        }
        let there = Self::scaled_runtime(est, slow);
        let home = Self::scaled_runtime(est, own);
        let mut msg = format!(
            " (on {}, {:.2}x the speed, it runs {} instead of {})",
            card.model,
            slow / own,
            fmt_duration(there),
            fmt_duration(home)
        );
        if let Some(until) = self.reserve(j.id, replicas).and_then(|r| r.until) {
            let wait = until.saturating_sub(self.now);
            if wait + home < there {
                msg.push_str(&format!(
                    "; waiting for [{}] (room expected in {}) finishes sooner: in {} against {}",
                    j.spec.gpu.models.join(","),
                    fmt_duration(wait),
                    fmt_duration(wait + home),
                    fmt_duration(there)
                ));
            }
        }
        msg
    }

    /// A quota request of `gpus` more GPUs (max, or reserved) for the job's project and
    /// pool, and its approval: the change a quota fix stands for.
    pub(super) fn quota_granted(
        &self,
        spec: &JobSpec,
        gpus: u64,
        reserved: bool,
    ) -> [crate::Command; 2] {
        [
            crate::Command::RequestQuota {
                project: spec.project.clone(),
                pool: spec.pool.clone(),
                gpus: gpus as u32,
                reserved,
                reason: "explain".into(),
            },
            crate::Command::ApproveQuota {
                id: self.next_request,
            },
        ]
    }

    /// What a proven change does, in words: a job starts; a service running short of
    /// replicas gets the missing ones.
    pub(super) fn then_starts(j: &Job, replicas: u32) -> String {
        if j.phase == Phase::Running {
            match replicas {
                1 => "its 1 missing replica starts now".to_string(),
                n => format!("its {n} missing replicas start now"),
            }
        } else {
            "it starts now".into()
        }
    }

    /// Replicas a job still asks for: all of them while Pending, the missing ones of a
    /// running service.
    pub(super) fn asked_replicas(j: &Job) -> u32 {
        match j.phase {
            Phase::Running => (j.desired_replicas.saturating_sub(j.running_replicas())).max(1),
            _ => j.desired_replicas.max(1),
        }
    }

    /// Nodes that would take the job once labelled: outside its pool (the pool's
    /// selector unmatched) or with GPUs the labels do not describe. Each says which
    /// labels are missing, how many idle GPUs it holds, and the `maar label` line; only
    /// those proven (on a copy) to start the job, where a copy is taken.
    pub(super) fn label_fixes(&self, j: &Job) -> Vec<String> {
        let Some(pool) = j.pool else {
            return Vec::new();
        };
        let selector = &self.pools[pool as usize].selector;
        let mut out = Vec::new();
        for n in &self.nodes {
            let in_pool = n.pool == Some(pool);
            // Nodes of other pools are theirs: only nodes in no pool are offered.
            if !in_pool && n.pool.is_some() {
                continue;
            }
            let mut set = std::collections::BTreeMap::new();
            if !in_pool {
                for (k, v) in selector {
                    if n.labels().get(k) != Some(v) {
                        set.insert(k.clone(), v.clone());
                    }
                }
            }
            if j.spec.gpu.count > 0 && !n.gpu_labelled() && !n.gpus.is_empty() {
                let g = &n.gpus[0];
                set.insert(LABEL_VENDOR.into(), "nvidia".into());
                set.insert(LABEL_MODEL.into(), g.model.to_lowercase());
                set.insert(LABEL_MEMORY.into(), fmt_bytes(g.memory));
                set.insert(LABEL_COUNT.into(), n.gpus.len().to_string());
            }
            if set.is_empty() || n.condition != Condition::Ready || n.cordoned {
                continue;
            }
            let idle = n.gpus.iter().filter(|g| g.allocs.is_empty()).count();
            let line: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let why = if in_pool {
                format!(
                    "node {}'s {} GPUs are not labelled, so none count",
                    n.name,
                    n.gpus.len()
                )
            } else {
                format!(
                    "node {} is in no pool, {} of its {} GPUs idle (it lacks {})",
                    n.name,
                    idle,
                    n.gpus.len(),
                    selector
                        .iter()
                        .filter(|(k, v)| n.labels().get(*k) != Some(v))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let change = [crate::Command::LabelNode {
                node: n.name.clone(),
                set: set.clone(),
                remove: Vec::new(),
            }];
            if self.proves(j, &change) {
                out.push(format!(
                    "{why}: `maar label {} {}` (or kubectl label node) would start it now",
                    n.name,
                    line.join(" ")
                ));
            }
        }
        out
    }

    pub(super) fn fits_now(&self, spec: &JobSpec, pool: Option<PoolId>, replicas: u32) -> bool {
        let pools = self.candidate_pools(pool);
        if spec.affinity == Affinity::SameNode {
            return self.find_node(spec, replicas, &pools, &[], &[]).is_some();
        }
        let mut seen = Vec::new();
        for _ in 0..replicas.max(1) {
            match self.find_node(spec, 1, &pools, &seen, &[]) {
                Some(p) => seen.push(p.node),
                None => return false,
            }
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn suggestions(
        &self,
        j: &Job,
        replicas: u32,
        quota: &QuotaVerdict,
        hist: &[ReasonCount],
        ok: usize,
        verdicts: &[(NodeId, Result<Placement, NodeReason>)],
        start: Option<&crate::forecast::Start>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let spec = &j.spec;
        let mult = if spec.affinity == Affinity::SameNode {
            replicas
        } else {
            1
        };
        // A job that can never run as asked says so first; then only changes that
        // make it possible follow.
        let never = self.never(j, replicas, mult);
        if let Some(n) = &never {
            out.push(n.clone());
        }
        if !quota.ok {
            if let (Some(pid), Some(pool)) = (j.project, j.pool) {
                let req = spec.replica_request().scaled(replicas as u64);
                let used = self.usage(pid, pool);
                if let Some(q) = self.projects[pid as usize].quotas.get(&pool) {
                    if let Some(max) = q.max.gpu_milli {
                        let need = (used.gpu_milli + req.gpu_milli).saturating_sub(max);
                        if need > 0 {
                            // Jobs of the project ahead of it take raised quota first:
                            // try the least that covers them too, proven on a copy.
                            // (The queue is ordered once, only for a quota-blocked job.)
                            let ahead: u64 = self
                                .queue()
                                .into_iter()
                                .take_while(|q| q.0 != j.id)
                                .filter_map(|q| self.jobs.get(q.0))
                                .filter(|a| a.project == j.project && a.pool == j.pool)
                                .map(|a| {
                                    a.spec
                                        .replica_request()
                                        .scaled(a.desired_replicas.max(1) as u64)
                                        .gpu_milli
                                })
                                .sum();
                            let mut said = false;
                            for extra in [need, need + ahead] {
                                let extra = extra.div_ceil(1000) * 1000;
                                if self.proves(j, &self.quota_granted(spec, extra / 1000, false)) {
                                    out.push(format!(
                                        "request more quota: +{} GPUs for project {} in pool {} (an admin approves it; its max grows from {} to {}); then {}{}",
                                        Dim::Gpu.fmt(extra),
                                        spec.project,
                                        spec.pool,
                                        Dim::Gpu.fmt(max),
                                        Dim::Gpu.fmt(max + extra),
                                        Self::then_starts(j, replicas),
                                        if extra > need.div_ceil(1000) * 1000 {
                                            " (the project's jobs ahead of it take the first of it)"
                                        } else {
                                            ""
                                        }
                                    ));
                                    said = true;
                                    break;
                                }
                            }
                            if !said {
                                let extra = (need + ahead).div_ceil(1000) * 1000;
                                out.push(if self.nodes.len() > self.config.proof_nodes
                                    && self.fits_now(spec, j.pool, replicas)
                                {
                                    // Not replayed on a cluster this large: say only what
                                    // is known.
                                    format!(
                                        "more quota (+{} GPUs for project {} in pool {}) would admit it, but jobs ahead of it could take the room it fits now; not proven to start it",
                                        Dim::Gpu.fmt(extra),
                                        spec.project,
                                        spec.pool
                                    )
                                } else {
                                    format!(
                                        "more quota alone would not start it: with +{} GPUs for project {} in pool {} it still waits for room on the nodes",
                                        Dim::Gpu.fmt(extra),
                                        spec.project,
                                        spec.pool
                                    )
                                });
                            }
                        }
                    }
                    // Refused for borrowing: only a reserved amount is guaranteed room.
                    let above =
                        (used.gpu_milli + req.gpu_milli).saturating_sub(q.reserved.gpu_milli);
                    if quota.message.starts_with("no idle quota to borrow") && above > 0 {
                        let gpus = above.div_ceil(1000);
                        let change = self.quota_granted(spec, gpus, true);
                        let held = self.reserved_gpu_milli(pool);
                        let cap = self.pool_capacity(pool).gpu_milli;
                        if held + gpus * 1000 > cap {
                            // Reservations never promise more than the pool has.
                            out.push(format!(
                                "reserved quota cannot start it: +{gpus} GPUs reserved for project {} would reserve {} GPUs in pool {}, which has {} ({} reserved already)",
                                spec.project,
                                Dim::Gpu.fmt(held + gpus * 1000),
                                spec.pool,
                                Dim::Gpu.fmt(cap),
                                Dim::Gpu.fmt(held),
                            ));
                        } else if self.proves(j, &change) {
                            out.push(format!(
                                "request reserved quota: +{} GPUs reserved for project {} in pool {} (an admin approves it; other projects' reserved GPUs are never lent); then {}",
                                gpus, spec.project, spec.pool, Self::then_starts(j, replicas)
                            ));
                        }
                    }
                }
                // (Waiting for the project's own jobs to end is offered below, only
                // where the forward run shows it starting.)
            } else if j.project.is_none() {
                out.push(format!(
                    "project {} does not exist: use an existing project (namespace)",
                    spec.project
                ));
            } else {
                // A pool forms from the nodes labelled with its role (or a Pool object
                // in Kubernetes).
                let pools: Vec<&str> = self.pools.iter().map(|p| p.name.as_str()).collect();
                out.push(format!(
                    "pool {} does not exist: label nodes {}={} (they form it), or name an existing pool ({})",
                    spec.pool,
                    crate::model::LABEL_ROLE,
                    spec.pool,
                    if pools.is_empty() { "none yet".to_string() } else { pools.join(", ") }
                ));
            }
        }
        if ok >= replicas as usize && quota.ok {
            let (pos, _, ahead) = self.queue_position(j.id);
            out.push(if pos.unwrap_or(1) > 1 && !ahead.is_empty() {
                format!(
                    "it fits now, but the last cycle gave the room to jobs ahead of it (position {} in the queue; EASY backfill holds nodes for the first blocked job): it starts when they start or leave",
                    pos.unwrap_or(1)
                )
            } else {
                "it fits now and starts in the next scheduling cycle".into()
            });
            return out;
        }
        // A smaller GPU count (proven: quota and nodes).
        if spec.gpu.count > 1 {
            for k in (1..spec.gpu.count).rev() {
                let mut s = JobSpec::clone(spec);
                s.gpu.count = k;
                if self.resubmit_starts(j, &s, j.pool, replicas) {
                    out.push(format!(
                        "a smaller request would start now: gpu.count {k} (asked {})",
                        spec.gpu.count
                    ));
                    break;
                }
            }
        }
        // A smaller per-card memory, or other models.
        if let Some(m) = spec.gpu.memory_per_card {
            let biggest = self
                .candidate_pools(j.pool)
                .iter()
                .flat_map(|(p, _)| self.pool_nodes(*p).collect::<Vec<_>>())
                .flat_map(|n| {
                    self.nodes[n as usize]
                        .sched_gpus()
                        .iter()
                        .filter(|g| g.is_free())
                        .map(|g| g.memory)
                        .collect::<Vec<_>>()
                })
                .max()
                .unwrap_or(0);
            // Only when memory is what stops it: asking what the free cards have starts it.
            if biggest > 0 && biggest < m {
                let mut s = JobSpec::clone(spec);
                s.gpu.memory_per_card = Some(biggest);
                if self.resubmit_starts(j, &s, j.pool, replicas) {
                    out.push(format!(
                        "a smaller per-card memory would start now: free cards have at most {} (asked {})",
                        fmt_bytes(biggest),
                        fmt_bytes(m)
                    ));
                }
            }
        }
        // Right-sizing: its earlier runs used far less GPU memory per card than it asks.
        if let (Some(m), Some((peak, runs))) = (spec.gpu.memory_per_card, self.runtimes.peak(spec))
        {
            const GI: u64 = 1 << 30;
            // A quarter above the peak, in whole Gi.
            let enough = (peak + peak / 4).div_ceil(GI).max(1) * GI;
            if peak > 0 && peak * 2 <= m && enough < m {
                let mut s = JobSpec::clone(spec);
                s.gpu.memory_per_card = Some(enough);
                if self.resubmit_starts(j, &s, j.pool, replicas) {
                    out.push(format!(
                        "asked {} per card, its last {runs} run{} peaked at {}: with {} it would start now",
                        fmt_bytes(m),
                        if runs == 1 { "" } else { "s" },
                        fmt_bytes(peak),
                        fmt_bytes(enough)
                    ));
                }
            }
        }
        if !spec.gpu.models.is_empty() {
            let mut s = JobSpec::clone(spec);
            s.gpu.models.clear();
            if self.resubmit_starts(j, &s, j.pool, replicas) {
                out.push(format!(
                    "allowing other GPU models than [{}] would start it now{}",
                    spec.gpu.models.join(","),
                    self.other_models_cost(j, &s, replicas)
                ));
            }
        }
        if spec.affinity == Affinity::SameNode
            && ok == 0
            && replicas == 1
            && spec.gpu.count > 1
            && hist
                .iter()
                .any(|h| h.reason.starts_with("insufficient free GPUs"))
        {
            out.push("without same-node affinity the GPUs could not be split either (one pod runs on one node); try fewer GPUs per pod with more replicas".into());
        }
        // Another pool where the project has quota.
        if let Some(pid) = j.project {
            for (pi, pool) in self.pools.iter().enumerate() {
                let pi = pi as PoolId;
                if Some(pi) == j.pool || !self.projects[pid as usize].quotas.contains_key(&pi) {
                    continue;
                }
                if self.resubmit_starts(j, spec, Some(pi), replicas) {
                    out.push(format!(
                        "pool {} has room for it now (project {} has quota there)",
                        pool.name, spec.project
                    ));
                }
            }
        }
        // Blind spots: nodes the job cannot use only for want of labels (in no pool,
        // or GPUs not labelled), each with the label line that fixes it, proven.
        if j.pool.is_some() {
            out.extend(self.label_fixes(j));
        }
        // Nodes of its pools whose GPU labels disagree with their cards: placement goes
        // by the labels (as kube-scheduler's would), so a job may wait for cards a
        // node has, or be sent to cards it lacks. Said with the label line that makes
        // them true, and "would start it now" where that is proven.
        // Only nodes refused for their (labelled) model can be what the job waits for.
        if spec.gpu.count > 0 {
            for (n, v) in verdicts {
                if !matches!(v, Err(NodeReason::ModelNotAllowed { .. })) {
                    continue;
                }
                if self.labels_agree(*n) {
                    continue;
                }
                let node = &self.nodes[*n as usize];
                let (Some(wrong), Some(g)) =
                    (crate::alerts::label_mismatch(node), node.gpus.first())
                else {
                    continue;
                };
                let set: std::collections::BTreeMap<String, String> = [
                    (LABEL_MODEL.to_string(), g.model.to_lowercase()),
                    (LABEL_COUNT.to_string(), node.gpus.len().to_string()),
                ]
                .into_iter()
                .collect();
                let line = format!(
                    "`maar label {} {LABEL_MODEL}={} {LABEL_COUNT}={}`",
                    node.name,
                    g.model.to_lowercase(),
                    node.gpus.len()
                );
                let change = [crate::Command::LabelNode {
                    node: node.name.clone(),
                    set,
                    remove: Vec::new(),
                }];
                out.push(if self.proves(j, &change) {
                    format!("{wrong}; {line} would start it now")
                } else {
                    format!("{wrong}; {line} makes the labels true")
                });
            }
        }
        // Cordoned cards whose uncordon would give it room, proven.
        if quota.ok {
            for (n, v) in verdicts {
                if let Err(NodeReason::GpusCordoned { free_usable, want }) = v {
                    let node = &self.nodes[*n as usize];
                    let cordoned: Vec<u32> = node
                        .gpus
                        .iter()
                        .filter(|g| {
                            g.cordoned && g.allocs.is_empty() && g.health == Health::Healthy
                        })
                        .map(|g| g.index)
                        .take((*want).saturating_sub(*free_usable) as usize)
                        .collect();
                    if cordoned.is_empty() {
                        continue;
                    }
                    let change: Vec<crate::Command> = cordoned
                        .iter()
                        .map(|&g| crate::Command::UncordonGpu {
                            node: node.name.clone(),
                            gpu: g,
                        })
                        .collect();
                    let gpus: Vec<String> = cordoned.iter().map(|g| g.to_string()).collect();
                    if self.proves(j, &change) {
                        out.push(format!(
                            "uncordoning GPU {} of node {} (`maar uncordon {} --gpu N`) would start it now",
                            gpus.join(","),
                            node.name,
                            node.name
                        ));
                    }
                }
            }
        }
        // Whole cards a whole-card job cannot use because shared slices sit on them.
        if !spec.gpu.shared && spec.gpu.count > 0 {
            let mut sliced = 0usize;
            let mut idle_mem = 0u64;
            let mut holders: Vec<String> = Vec::new();
            for (p, _) in self.candidate_pools(j.pool) {
                for n in self.pool_nodes(p) {
                    // (A node's summary counts its partly used cards: most have none.)
                    if self.summaries[n as usize].partial == 0 {
                        continue;
                    }
                    for g in self.nodes[n as usize].sched_gpus() {
                        let used: u32 = g.allocs.iter().map(|a| a.milli).sum();
                        let its_kind = (spec.gpu.models.is_empty()
                            || spec
                                .gpu
                                .models
                                .iter()
                                .any(|m| m.eq_ignore_ascii_case(&g.model)))
                            && spec.gpu.memory_per_card.is_none_or(|m| g.memory >= m);
                        if its_kind && !g.allocs.is_empty() && used < GPU_MILLI && g.usable() {
                            sliced += 1;
                            idle_mem += g.memory.saturating_sub(g.used_mem());
                            for a in &g.allocs {
                                let r = self.job_ref(a.job);
                                if !holders.contains(&r) {
                                    holders.push(r);
                                }
                            }
                        }
                    }
                }
            }
            if sliced > 0
                && hist
                    .iter()
                    .any(|h| h.reason.starts_with("insufficient free GPUs"))
            {
                out.push(format!(
                    "{sliced} card(s) hold shared slices ({} of their memory idle) that a whole-card job cannot use; moving the shared jobs ({}{}) would free them",
                    fmt_bytes(idle_mem),
                    holders.iter().take(4).cloned().collect::<Vec<_>>().join(", "),
                    if holders.len() > 4 { ", ..." } else { "" }
                ));
            }
        }
        // Cordoned nodes that would fit once uncordoned.
        for (n, v) in verdicts {
            if let Err(NodeReason::Cordoned) = v {
                let node = &self.nodes[*n as usize];
                let mut t = node.clone();
                t.cordoned = false;
                if fit(&t, *n, self.overcommit_of(node), spec, 1).is_ok() && quota.ok {
                    let change = [crate::Command::UncordonNode {
                        node: node.name.clone(),
                    }];
                    if self.proves(j, &change) {
                        out.push(format!("uncordoning node {} would start it now", node.name));
                    }
                }
            }
        }
        // Taints the job does not tolerate: a toleration for the one that keeps it
        // off, proven by resubmitting the job with it.
        let mut taints: Vec<crate::rules::Taint> = Vec::new();
        for (n, v) in verdicts {
            if let Err(NodeReason::Taint { .. }) = v {
                let node = &self.nodes[*n as usize];
                if let Some(t) = crate::rules::untolerated(&node.taints, &spec.rules.tolerations) {
                    if !taints.contains(t) {
                        taints.push(t.clone());
                    }
                }
            }
        }
        for t in taints.iter().take(3) {
            let (operator, value) = if t.value.is_empty() {
                ("Exists", String::new())
            } else {
                ("Equal", format!(", value: {}", t.value))
            };
            let mut s = JobSpec::clone(spec);
            s.rules.tolerations.push(crate::rules::Toleration {
                key: Some(t.key.clone()),
                operator: Some(operator.into()),
                value: (!t.value.is_empty()).then(|| t.value.clone()),
                effect: Some(t.effect),
                toleration_seconds: None,
            });
            if self.resubmit_starts(j, &s, j.pool, replicas) {
                out.push(format!(
                    "a toleration for {} (tolerations: [{{key: {}, operator: {operator}{value}, effect: {}}}]) would start it now",
                    t.text(),
                    t.key,
                    t.effect.name()
                ));
            }
        }
        // Preemption.
        if quota.ok {
            if let Some(v) = self.find_victims(j.id, replicas, !quota.borrowing) {
                let names: Vec<String> = v.iter().map(|&x| self.job_ref(x)).collect();
                out.push(format!("preemption would evict: {}", names.join(", ")));
            } else if spec.priority < PRIORITY_HIGH {
                let mut hi = j.clone();
                std::sync::Arc::make_mut(&mut hi.spec).priority = PRIORITY_HIGH;
                if let Some(v) = self.find_victims_for(&hi, replicas, !quota.borrowing) {
                    let name = spec.full_name();
                    let change = [crate::Command::SetPriority {
                        job: name.clone(),
                        priority: PRIORITY_HIGH,
                    }];
                    if self.proves(j, &change) {
                        let names: Vec<String> = v.iter().map(|&x| self.job_ref(x)).collect();
                        out.push(format!(
                            "at priority high (`maar priority {name} high`) it would start now, preempting: {}",
                            names.join(", ")
                        ));
                    }
                }
            }
        }
        // Waiting is offered only where the forward run shows it starting, with when.
        if let Some(crate::forecast::Start {
            at: Some(t),
            after: Some(a),
            basis,
        }) = start
        {
            if never.is_none() && *t > self.now {
                out.push(format!(
                    "wait: starts in about {}, when {} ends ({})",
                    fmt_duration(t - self.now),
                    self.job_ref(*a),
                    match basis {
                        crate::forecast::Basis::History => "predicted from earlier runs",
                        _ => "its estimate",
                    }
                ));
            }
        }
        if out.is_empty() {
            // Say what holds the room: jobs that never end by themselves (services,
            // other schedulers' pods) or with no end foreseen, and nodes that need
            // repair, where there are such in its pool.
            let nodes: Vec<NodeId> = j
                .pool
                .map(|p| self.pool_nodes(p).collect())
                .unwrap_or_default();
            let broken = nodes
                .iter()
                .filter(|&&n| {
                    let node = &self.nodes[n as usize];
                    !node.ready() || node.cordoned || node.gpus.iter().any(|g| !g.usable())
                })
                .count();
            let endless = nodes
                .iter()
                .flat_map(|&n| self.nodes[n as usize].jobs.iter())
                .filter(|&&v| self.expected_end(&self.jobs[v as usize]).is_none())
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            let mut held = Vec::new();
            if endless > 0 {
                held.push(format!(
                    "{endless} running job(s) there with no end foreseen (services, other schedulers' pods, jobs without an estimated runtime) hold it"
                ));
            }
            if broken > 0 {
                held.push(format!(
                    "{broken} node(s) NotReady, cordoned or with unhealthy GPUs need repair first"
                ));
            }
            out.push(format!(
                "nothing that maar can change now would start it: no node of its pool would have room even once the running jobs with a foreseen end have ended{}",
                if held.is_empty() { String::new() } else { format!("; {}", held.join("; ")) }
            ));
        }
        out
    }
}
