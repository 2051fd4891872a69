//! Why a job is Pending, exactly: the quota verdict, a per-node reason histogram, the
//! queue position, the nearest node and what would make the job run.
//!
//! Every verdict here comes from the same `fit` and quota code the scheduler uses.

use std::fmt;

use serde::Serialize;

use crate::cluster::Cluster;
use crate::fit::{fit, free_cpu, free_disk, free_mem, NodeReason};
use crate::model::*;
use crate::quantity::{fmt_bytes, fmt_cpu, fmt_duration};
use crate::schedule::QuotaVerdict;

/// A queue item's sort key: (aged priority, reversed), share, submitted, job, scale-up.
type QueueKey = (std::cmp::Reverse<i64>, u64, u64, JobId, bool);

pub use crate::cluster::PROOF_NODES;

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ReasonCount {
    pub reason: String,
    pub nodes: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Nearest {
    pub node: String,
    pub lacks: Vec<String>,
}

/// The full answer to "why is this job not running".
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    pub job: String,
    pub phase: String,
    pub request: String,
    pub pool: String,
    pub quota: QuotaVerdict,
    pub nodes_total: usize,
    pub nodes_available: usize,
    /// `0/12 nodes are available: 5 ..., 4 ...`
    pub summary: String,
    pub histogram: Vec<ReasonCount>,
    pub fragmentation: Option<String>,
    pub gang: Option<String>,
    /// 1-based position among queued jobs, and the jobs ahead (first few).
    pub queue_position: Option<usize>,
    pub queue_length: usize,
    pub ahead: Vec<String>,
    pub nearest: Option<Nearest>,
    pub suggestions: Vec<String>,
    /// For running jobs: where they run.
    pub placement: Vec<String>,
    pub reason: String,
    /// When and why it was last taken off its nodes (preempted, reclaimed by a lending
    /// pool), while it has not run since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evicted: Option<String>,
    /// Nodes on loan between its pool and others: which, from which pool, to which.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub loans: Vec<String>,
    /// For an inference service: its autoscaler, in words (paused by whom, or the last
    /// load it saw).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<String>,
    /// For a Pending job: when it is expected to start, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts: Option<String>,
    /// Seconds on the cluster's clock, or null ([`crate::forecast`]).
    pub expected_start_s: Option<u64>,
    /// `estimate`, `history`, `never` or `unknown`; null for a job that is not Pending.
    pub expected_start_basis: Option<&'static str>,
}

impl Cluster {
    /// Per-node verdict for `mult` replicas of `spec` over the nodes the job may use.
    pub fn node_verdicts(
        &self,
        spec: &JobSpec,
        pool: Option<PoolId>,
        mult: u32,
    ) -> Vec<(NodeId, Result<Placement, NodeReason>)> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let view = self.pod_rules_view(spec);
        for (p, _) in self.candidate_pools(pool) {
            for n in self.pool_nodes(p) {
                let v = match self.short_of_cards(n, spec, mult) {
                    Some(r) => Err(r),
                    None => {
                        let node = &self.nodes[n as usize];
                        fit(node, n, self.overcommit_of(node), spec, mult)
                            .and_then(|p| self.pod_rules(spec, view.as_ref(), n, &[]).map(|_| p))
                    }
                };
                out.push((n, v));
            }
        }
        out
    }

    /// The verdict `fit` would give when a node's only problem is too few free whole
    /// cards, read from the node summary without touching each card. `None` when the
    /// full filter must decide.
    fn short_of_cards(&self, n: NodeId, spec: &JobSpec, mult: u32) -> Option<NodeReason> {
        let want = spec.gpu.count * mult;
        if want == 0 || spec.gpu.shared || spec.gpu.resource.is_some() {
            return None;
        }
        let node = &self.nodes[n as usize];
        // A rule `fit` checks before the cards (a taint, the selector, node affinity,
        // the vendor) is the node's first reason: the full filter says it.
        if crate::fit::node_rules(node, spec).is_err()
            || spec.gpu.vendor.is_some()
            || node.vendor_label().is_some_and(|v| v != "nvidia")
        {
            return None;
        }
        // Cards of several device resources (MIG instances, time-sliced replicas): the
        // summary counts them all; `fit` tells them apart.
        if node.gpus.iter().any(|g| g.resource.is_some()) {
            return None;
        }
        let sum = &self.summaries[n as usize];
        let model_ok = spec.gpu.models.is_empty()
            || node
                .gpu_model()
                .is_some_and(|m| spec.gpu.models.iter().any(|x| x == m));
        // Every card large enough, so "free whole" means "free whole and large enough".
        let mem_ok = spec.gpu.memory_per_card.is_none_or(|m| m <= sum.min_mem);
        (node.ready()
            && !node.cordoned
            && node.gpu_labelled()
            && !node.gpus.is_empty()
            && model_ok
            && mem_ok
            && sum.free_bad == 0
            && sum.free_whole < want)
            .then_some(NodeReason::InsufficientGpus {
                free: sum.free_whole,
                want,
            })
    }

    /// The one-line reason, the cause that must change first: a constraint that
    /// keeps the job off every node for good (`can never run as asked: ...`); else,
    /// when the job's pool has no room for it, what holds the room it could have
    /// (idle cards outside every pool, a lender that took its nodes back, cards held
    /// by shared slices, a job that went ahead of it); then the node counts, over the
    /// nodes it could ever use (`0/4 nodes are available: 4 insufficient free GPUs;
    /// 2 nodes it can never use: ...`), with the gang or fragmentation note.
    pub fn headline(&self, id: JobId, replicas: u32) -> String {
        let j = &self.jobs[id as usize];
        let mult = if j.spec.affinity == Affinity::SameNode {
            replicas.max(1)
        } else {
            1
        };
        if j.pool.is_some() {
            if let Some(never) = self.never(j, replicas, mult) {
                return never;
            }
        }
        let verdicts = self.node_verdicts(&j.spec, j.pool, mult);
        let (summary, _, frag, gang, ok) = self.histogram(j, replicas, &verdicts);
        let line = match (gang, frag) {
            (_, Some(f)) => format!("{summary}; {f}"),
            (Some(g), None) => format!("{summary}; {g}"),
            _ => summary,
        };
        let units = if mult > 1 {
            1
        } else {
            replicas.max(1) as usize
        };
        match (ok < units)
            .then(|| self.lead(j, mult, &verdicts))
            .flatten()
        {
            Some(lead) => format!("{lead}; {line}"),
            None => line,
        }
    }

    /// Why a job with no room in its pool has none, when the room it could use is
    /// held by something the operator can name: idle cards of its kind on nodes in
    /// no pool, its lent nodes taken back, whole cards held by shared slices, or a
    /// job placed at this instant that went ahead of it (by aging too).
    fn lead(
        &self,
        j: &Job,
        mult: u32,
        verdicts: &[(NodeId, Result<Placement, NodeReason>)],
    ) -> Option<String> {
        let spec = &j.spec;
        let want = spec.gpu.count * mult;
        let pool = &spec.pool;
        // A job placed now that holds room the job could use on a node it could use.
        let placed_now = self.last_start == Some(self.now);
        for (n, v) in verdicts.iter().filter(|_| placed_now) {
            let Err(r) = v else { continue };
            if !matches!(
                r,
                NodeReason::InsufficientGpus { .. }
                    | NodeReason::Cpu { .. }
                    | NodeReason::Memory { .. }
                    | NodeReason::NoGpuShare { .. }
            ) {
                continue;
            }
            let node = &self.nodes[*n as usize];
            for &x in &node.jobs {
                let a = &self.jobs[x as usize];
                if a.id == j.id || a.started != Some(self.now) || a.phase != Phase::Running {
                    continue;
                }
                let except = [x];
                let mut e = crate::fit::Except {
                    jobs: &except,
                    ..Default::default()
                };
                for p in a.placements.iter().filter(|p| p.node == *n) {
                    e.cpu += p.cpu;
                    e.mem += p.mem;
                    e.disk += p.disk;
                }
                if crate::fit::fit_except(node, *n, self.overcommit_of(node), spec, mult, &e)
                    .is_err()
                {
                    continue;
                }
                let aged = a.aged;
                return Some(format!(
                    "the room on {} went to {} (priority {}{}), ahead of it in the queue",
                    node.name,
                    self.job_ref(x),
                    priority_name(a.spec.priority),
                    if aged > 0 {
                        format!(", +{aged} for its wait")
                    } else {
                        String::new()
                    }
                ));
            }
        }
        // Its lent nodes taken back, while it has not run since.
        if let Some((t, why)) = &j.evicted {
            if why.contains("on loan from pool") && why.starts_with("evicted to return") {
                return Some(format!(
                    "taken back by the lender at {}: {why}",
                    crate::quantity::fmt_duration(*t)
                ));
            }
        }
        if want == 0 {
            return None;
        }
        let of_kind = |g: &Gpu| card_of_kind(spec, g);
        // Idle cards of its kind on a node in no pool.
        if !spec.gpu.shared {
            let outside = self.nodes.iter().find(|n| {
                n.pool.is_none()
                    && n.ready()
                    && !n.cordoned
                    && crate::fit::node_constraints(n, spec).is_ok()
                    && n.gpus
                        .iter()
                        .filter(|g| g.allocs.is_empty() && g.usable() && of_kind(g))
                        .count() as u32
                        >= want
            });
            if let Some(n) = outside {
                let idle = n
                    .gpus
                    .iter()
                    .filter(|g| g.allocs.is_empty() && g.usable() && of_kind(g))
                    .count();
                return Some(format!(
                    "pool {pool} has no room for it, while node {} has {idle} idle {} GPUs and is in no pool",
                    n.name,
                    n.gpus.first().map(|g| g.model.as_str()).unwrap_or("")
                ));
            }
            // Whole cards it could use, held by shared slices: a node where the
            // partly used cards would make up the room.
            let mut holders: Vec<String> = Vec::new();
            let mut sliced = 0;
            for (n, v) in verdicts {
                if !matches!(v, Err(NodeReason::InsufficientGpus { .. }))
                    || self.summaries[*n as usize].partial == 0
                {
                    continue;
                }
                let node = &self.nodes[*n as usize];
                let cards: Vec<&Gpu> = node
                    .sched_gpus()
                    .iter()
                    .filter(|g| g.usable() && of_kind(g))
                    .collect();
                let free = cards.iter().filter(|g| g.allocs.is_empty()).count() as u32;
                let part: Vec<&&Gpu> = cards
                    .iter()
                    .filter(|g| {
                        !g.allocs.is_empty()
                            && g.allocs.iter().map(|a| a.milli).sum::<u32>() < GPU_MILLI
                    })
                    .collect();
                if free < want && free + part.len() as u32 >= want {
                    sliced += part.len();
                    for g in part {
                        for a in &g.allocs {
                            let r = self.job_ref(a.job);
                            if !holders.contains(&r) {
                                holders.push(r);
                            }
                        }
                    }
                }
            }
            if sliced > 0 {
                return Some(format!(
                    "{sliced} card(s) it could use hold shared slices ({}{}): a whole-card job cannot use them",
                    holders.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                    if holders.len() > 3 { ", ..." } else { "" }
                ));
            }
        }
        None
    }

    /// The node's reason as the first line counts it: a hard constraint of the job's
    /// request (what must change in the request, or in the node's labels and taints)
    /// before the node's state or its room now, so that a node the request excludes
    /// for good is never counted as short of room. `None`: the node could take the
    /// job one day as it is.
    fn hard_cause(
        &self,
        n: NodeId,
        spec: &JobSpec,
        mult: u32,
        r: &NodeReason,
    ) -> Option<NodeReason> {
        use NodeReason as R;
        match r {
            R::Selector { .. }
            | R::NodeAffinity { .. }
            | R::Taint { .. }
            | R::Vendor { .. }
            | R::ModelNotAllowed { .. }
            | R::CardMemory { .. }
            | R::MigSlices { .. }
            | R::NoGpus
            | R::NoGpuResource { .. }
            | R::TooSmall { .. } => return Some(r.clone()),
            // Labels missing: the node's fix, not the job's.
            R::NoGpuLabels { .. } => return None,
            // Short of room now: the filter passed its rules, vendor, kind, model
            // and card memory already; only its whole size is left to ask.
            R::InsufficientGpus { .. }
            | R::Cpu { .. }
            | R::Memory { .. }
            | R::Disk { .. }
            | R::GpusUnhealthy { .. }
            | R::GpusCordoned { .. }
            | R::NoGpuShare { .. } => {
                let node = &self.nodes[n as usize];
                return (!self.size_fits(node, spec, mult)).then(|| self.too_small(node, spec));
            }
            _ => {}
        }
        // Any other state (NotReady, cordoned, a pod rule): the first constraint that
        // keeps it off for good, if one does.
        let node = &self.nodes[n as usize];
        (!self.could_ever_fit(node, spec, mult)).then(|| self.never_cause(node, spec, mult))
    }

    fn too_small(&self, node: &Node, spec: &JobSpec) -> NodeReason {
        let cards = node
            .gpus
            .iter()
            .filter(|g| g.resource.as_deref() == spec.gpu.resource.as_deref())
            .count();
        let mut has = format!(
            "{cards} GPUs, {} CPU, {} memory",
            fmt_cpu(node.cpu_milli),
            fmt_bytes(node.memory)
        );
        if spec.disk > 0 {
            has.push_str(&format!(", {} disk", fmt_bytes(node.disk)));
        }
        NodeReason::TooSmall { has }
    }

    #[allow(clippy::type_complexity)]
    fn histogram(
        &self,
        j: &Job,
        replicas: u32,
        verdicts: &[(NodeId, Result<Placement, NodeReason>)],
    ) -> (
        String,
        Vec<ReasonCount>,
        Option<String>,
        Option<String>,
        usize,
    ) {
        let same = j.spec.affinity == Affinity::SameNode;
        let mult = if same { replicas.max(1) } else { 1 };
        // Group by phrase without building a string per node: few distinct phrases.
        // Nodes the job could use one day are counted apart from those a hard
        // constraint of its request keeps it off for good.
        type Groups<'a> = Vec<(std::borrow::Cow<'a, NodeReason>, u32)>;
        let (mut groups, mut hard): (Groups, Groups) = (Vec::new(), Vec::new());
        let mut ok = 0usize;
        for (n, v) in verdicts {
            match v {
                Ok(_) => ok += 1,
                Err(r) => {
                    let (list, r) = match self.hard_cause(*n, &j.spec, mult, r) {
                        Some(h) => (&mut hard, std::borrow::Cow::Owned(h)),
                        None => (&mut groups, std::borrow::Cow::Borrowed(r)),
                    };
                    match list.iter_mut().find(|g| g.0.same_phrase(&r)) {
                        Some(g) => g.1 += 1,
                        None => list.push((r, 1)),
                    }
                }
            }
        }
        // Ranked by what would unblock the job: the cheapest change first (a reservation,
        // a card to uncordon or repair, a node to repair, jobs to end), then the
        // changes to the job, then nodes that could never take it; ties by node count.
        let rank = |g: &mut Groups| {
            g.sort_by(|a, b| {
                a.0.distance()
                    .cmp(&b.0.distance())
                    .then_with(|| b.1.cmp(&a.1))
            })
        };
        rank(&mut groups);
        rank(&mut hard);
        let counts = |g: &Groups| -> Vec<ReasonCount> {
            g.iter()
                .map(|(r, nodes)| ReasonCount {
                    reason: r.phrase(&j.spec),
                    nodes: *nodes,
                })
                .collect()
        };
        let (soft_hist, hard_hist) = (counts(&groups), counts(&hard));
        let parts = |h: &[ReasonCount]| {
            h.iter()
                .map(|h| format!("{} {}", h.nodes, h.reason))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let never: u32 = hard.iter().map(|g| g.1).sum();
        let could = verdicts.len() - never as usize;
        let mut summary = if j.pool.is_none() {
            format!("pool `{}` does not exist", j.spec.pool)
        } else if could == 0 && never > 0 {
            format!("no node of pool {} can ever take it", j.spec.pool)
        } else {
            format!("{ok}/{could} nodes are available")
        };
        if !soft_hist.is_empty() {
            summary.push_str(": ");
            summary.push_str(&parts(&soft_hist));
        }
        if never > 0 {
            if could == 0 {
                summary.push_str(": ");
            } else {
                summary.push_str(&format!(
                    "; {never} node{} it can never use: ",
                    if never == 1 { "" } else { "s" }
                ));
            }
            summary.push_str(&parts(&hard_hist));
        }
        let hist: Vec<ReasonCount> = soft_hist.into_iter().chain(hard_hist).collect();
        // Fragmentation: enough compatible free GPUs in total, but not on one node.
        let mut frag = None;
        let want = j.spec.gpu.count * mult;
        if want > 1 && !j.spec.gpu.shared && ok == 0 {
            let mut free_total = 0u32;
            let mut best = 0u32;
            let mut holders = 0u32;
            for (_, v) in verdicts {
                if let Err(NodeReason::InsufficientGpus { free, .. }) = v {
                    free_total += free;
                    best = best.max(*free);
                    if *free > 0 {
                        holders += 1;
                    }
                }
            }
            if free_total >= want {
                frag = Some(format!(
                    "fragmentation: {free_total} compatible GPUs are free across {holders} nodes, but at most {best} on any one node, and the job needs {want} on one node"
                ));
            }
        }
        let mut gang = None;
        let hard_spread = j.spec.affinity == Affinity::Spread && !j.is_inference();
        if j.phase == Phase::Running && ok == 0 {
            gang = Some(format!(
                "scale-up: {replicas} more replica(s) wanted, no node can take one now"
            ));
        } else if j.phase == Phase::Pending
            && replicas > 1
            && !same
            && (ok < replicas as usize && hard_spread || ok == 0)
        {
            gang = Some(format!(
                "gang: all {replicas} replicas must start together{}, but only {ok} node(s) can take one now",
                if hard_spread { " on distinct nodes" } else { "" }
            ));
        }
        (summary, hist, frag, gang, ok)
    }

    /// Every shortfall of a node for the job (not just the first), for "nearest node".
    fn lacks(&self, n: NodeId, spec: &JobSpec, mult: u32, first: &NodeReason) -> Vec<String> {
        let node = &self.nodes[n as usize];
        let oc = self.overcommit_of(node);
        let mut v = Vec::new();
        match first {
            NodeReason::InsufficientGpus { .. }
            | NodeReason::GpusUnhealthy { .. }
            | NodeReason::GpusCordoned { .. }
            | NodeReason::NoGpuShare { .. }
            | NodeReason::Cpu { .. }
            | NodeReason::Memory { .. }
            | NodeReason::Disk { .. } => {
                if !matches!(
                    first,
                    NodeReason::Cpu { .. } | NodeReason::Memory { .. } | NodeReason::Disk { .. }
                ) {
                    v.push(first.lack(spec));
                }
                let checks = [
                    (spec.cpu_milli * mult as u64, free_cpu(node, oc), "CPU"),
                    (spec.memory * mult as u64, free_mem(node, oc), "memory"),
                    (spec.disk * mult as u64, free_disk(node), "disk"),
                ];
                for (want, free, what) in checks {
                    if want > free {
                        let f = |x: u64| {
                            if what == "CPU" {
                                fmt_cpu(x)
                            } else {
                                fmt_bytes(x)
                            }
                        };
                        v.push(format!(
                            "{} {what} (has {} free, needs {})",
                            f(want - free),
                            f(free),
                            f(want)
                        ));
                    }
                }
            }
            other => v.push(other.lack(spec)),
        }
        v
    }

    /// Explains any job; most useful for a Pending one. A Pending job's start is
    /// forecast ([`Cluster::forecast`]), and waiting offered only where that shows it.
    pub fn explain(&self, id: JobId) -> Explanation {
        self.explain_with(id, true)
    }

    /// As [`Cluster::explain`], without the forecast (no start time, no wait): for a
    /// driver telling many Pending pods why in one go.
    pub fn explain_now(&self, id: JobId) -> Explanation {
        self.explain_with(id, false)
    }

    fn explain_with(&self, id: JobId, forecast: bool) -> Explanation {
        let j = &self.jobs[id as usize];
        let replicas = match j.phase {
            Phase::Running => (j.desired_replicas.saturating_sub(j.running_replicas())).max(1),
            _ => j.desired_replicas.max(1),
        };
        let complete = j.phase == Phase::Running && j.running_replicas() >= j.desired_replicas;
        let quota = if complete {
            // Nothing more is asked: say what the job holds and where its project stands.
            let held = j.held();
            let (used, limit) = match (j.project, j.pool) {
                (Some(p), Some(pool)) => (
                    self.usage(p, pool).gpu_milli,
                    self.projects[p as usize]
                        .quotas
                        .get(&pool)
                        .and_then(|q| q.max.gpu_milli),
                ),
                _ => (0, None),
            };
            QuotaVerdict {
                ok: true,
                borrowing: j.borrowed,
                message: format!(
                    "holds {} GPUs{}; project {} uses {} GPUs in pool {} (max {})",
                    Dim::Gpu.fmt(held.gpu_milli),
                    if j.borrowed { " (borrowed quota)" } else { "" },
                    j.spec.project,
                    Dim::Gpu.fmt(used),
                    j.spec.pool,
                    limit
                        .map(|m| Dim::Gpu.fmt(m))
                        .unwrap_or_else(|| "unlimited".into())
                ),
            }
        } else {
            self.quota_verdict(id, replicas)
        };
        let mult = if j.spec.affinity == Affinity::SameNode {
            replicas
        } else {
            1
        };
        let verdicts = self.node_verdicts(&j.spec, j.pool, mult);
        let (summary, histogram, fragmentation, gang, ok) = self.histogram(j, replicas, &verdicts);
        // The node with the cheapest change; none while some node fits (then the
        // reason is elsewhere: quota, the queue, a gang).
        let nearest = if ok > 0 {
            None
        } else {
            verdicts
                .iter()
                .filter_map(|(n, v)| v.as_ref().err().map(|r| (r.distance(), *n, r)))
                .min_by_key(|x| (x.0, x.1))
                .map(|(_, n, r)| Nearest {
                    node: self.nodes[n as usize].name.clone(),
                    lacks: self.lacks(n, &j.spec, mult, r),
                })
        };
        let (pos, queue_length, ahead_ids) = self.queue_position(id);
        let ahead: Vec<String> = ahead_ids
            .iter()
            .map(|&q| {
                let a = &self.jobs[q as usize];
                let aged = self.effective_priority(a) - a.spec.priority as i64;
                format!(
                    "{} (priority {}{}, {})",
                    self.job_ref(a.id),
                    priority_name(a.spec.priority),
                    if aged > 0 {
                        format!(" +{aged} for its wait")
                    } else {
                        String::new()
                    },
                    a.spec.shape()
                )
            })
            .collect();
        let placement = j
            .placements
            .iter()
            .map(|p| {
                let gpus: Vec<String> = p.gpus.iter().map(|g| g.gpu.to_string()).collect();
                format!(
                    "{} GPU [{}]{}",
                    self.nodes[p.node as usize].name,
                    gpus.join(","),
                    if p.on_loan { " on loan" } else { "" }
                )
            })
            .collect();
        // When it starts: a forward run on a copy, until it starts (on clusters up to
        // `proof_nodes` nodes: beyond, copying the cluster costs more than an
        // explanation may; `maar get jobs` forecasts every job at once).
        let forecast = forecast && self.nodes.len() <= self.config.proof_nodes;
        let start = (forecast && j.phase == Phase::Pending).then(|| {
            self.forecast(crate::forecast::Reach::default(), Some(id))
                .starts
                .remove(&id)
                .unwrap_or(crate::forecast::Start {
                    at: None,
                    basis: crate::forecast::Basis::Unknown,
                    after: None,
                })
        });
        let suggestions = if j.phase == Phase::Pending
            || (j.phase == Phase::Running && j.desired_replicas > j.running_replicas())
        {
            self.suggestions(
                j,
                replicas,
                &quota,
                &histogram,
                ok,
                &verdicts,
                start.as_ref(),
            )
        } else {
            Vec::new()
        };
        let starts = start.as_ref().map(|s| self.start_text(s));
        Explanation {
            job: self.job_ref(id),
            phase: j.phase.name().into(),
            request: j.spec.shape_with(j.desired_replicas.max(1)),
            pool: j.spec.pool.clone(),
            quota,
            nodes_total: verdicts.len(),
            nodes_available: ok,
            summary,
            histogram,
            fragmentation,
            gang,
            queue_position: pos,
            queue_length,
            ahead,
            nearest,
            suggestions,
            placement,
            reason: j.reason.to_string(),
            evicted: j
                .evicted
                .as_ref()
                .map(|(t, why)| format!("at {}: {why}", crate::quantity::fmt_duration(*t))),
            loans: self.loans_of(j.pool),
            autoscaler: match &j.spec.kind {
                JobKind::Inference(a) => Some(match &j.autoscaler.paused_by {
                    Some(who) => format!(
                        "paused by {who}: replicas held at {} (range {}..{}) until `maar autoscale {}/{}`",
                        j.desired_replicas, a.min, a.max, j.spec.project, j.spec.name
                    ),
                    None => format!(
                        "{} of {}..{} replicas, target {}% GPU memory usage{}",
                        j.desired_replicas,
                        a.min,
                        a.max,
                        a.target_pct,
                        j.autoscaler
                            .last_usage_pct
                            .map(|u| format!(", last seen {:.0}%", u.min(100.0)))
                            .unwrap_or_default()
                    ),
                }),
                JobKind::Train => None,
            },
            starts,
            expected_start_s: start.as_ref().and_then(|s| s.at),
            expected_start_basis: start.as_ref().map(|s| s.basis.name()),
        }
    }

    /// An estimated start in words: `in about 40m (at 3h10m), when job/x ends
    /// (its estimate)`.
    pub fn start_text(&self, s: &crate::forecast::Start) -> String {
        use crate::forecast::Basis;
        let basis = match s.basis {
            Basis::Estimate => "from the running jobs' own estimates",
            Basis::History => "from the durations of earlier jobs like the running ones",
            Basis::Never => "it can never run as asked",
            Basis::Unknown => {
                "not foreseen: it waits for jobs with neither an estimate nor a history of similar runs, for a repair or a quota change, or longer than two weeks"
            }
        };
        match s.at {
            Some(t) if t <= self.now => "now, in the next scheduling cycle".into(),
            Some(t) => format!(
                "in about {} (at {}){} ({basis})",
                fmt_duration(t - self.now),
                fmt_duration(t),
                s.after
                    .map(|a| format!(", when {} ends", self.job_ref(a)))
                    .unwrap_or_default()
            ),
            None => match s.basis {
                Basis::Never => "never as asked".into(),
                _ => format!("unknown ({basis})"),
            },
        }
    }

    /// Whether `replicas` of `spec` would start now in `pool`: the quota admission
    /// (with the project's max raised by `extra_gpu_milli`) and the node filter and
    /// placement, gang included. A suggestion that says "would start now" is one this
    /// says yes to.
    fn starts_now(
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
    fn resubmit_starts(
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
        let name = format!("{}/{}", j.spec.project, j.spec.name);
        let mut s = JobSpec::clone(spec);
        s.name = format!("{}-explain-proof", spec.name);
        if let Some(p) = pool {
            s.pool = self.pools[p as usize].name.clone();
        }
        let new = format!("{}/{}", s.project, s.name);
        if c.apply(crate::Command::Cancel { job: name }).is_err()
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
    fn loans_of(&self, pool: Option<PoolId>) -> Vec<String> {
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

    /// Proves a change to the cluster: does job `j` run after it? On clusters of at
    /// most [`PROOF_NODES`] nodes the change is applied to a copy with one scheduling
    /// cycle after it (the whole path: jobs ahead, quota, filter, placement, gang,
    /// backfill). Larger clusters are not copied whole: the change is applied to copies
    /// of the nodes it touches (or to the quota) and the job's own path is run on them
    /// ([`Cluster::proves_path`]).
    fn proves(&self, j: &Job, change: &[crate::Command]) -> bool {
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
        c.jobs.get(j.id).is_some_and(|j| j.phase == Phase::Running)
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
    fn proves_path(&self, j: &Job, change: &[crate::Command]) -> bool {
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

    /// What running on other models costs, where the scenario gives model speeds and
    /// the job a runtime: the card it would land on, how long it would run there
    /// against its own models, and whether waiting for its own models (room expected
    /// when the backfill reservation says) would finish sooner.
    fn other_models_cost(&self, j: &Job, any: &JobSpec, replicas: u32) -> String {
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
    fn quota_granted(&self, spec: &JobSpec, gpus: u64, reserved: bool) -> [crate::Command; 2] {
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

    /// Replicas a job still asks for: all of them while Pending, the missing ones of a
    /// running service.
    fn asked_replicas(j: &Job) -> u32 {
        match j.phase {
            Phase::Running => (j.desired_replicas.saturating_sub(j.running_replicas())).max(1),
            _ => j.desired_replicas.max(1),
        }
    }

    /// The job's path after a change (see [`Cluster::proves_path`]): `spec` in `pool`
    /// with the nodes in `touched` replaced by their changed copies, the project's max
    /// raised by `extra_milli`, behind the queue items `ahead` (in queue order).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn path_after(
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
            self.pending
                .keys()
                .any(|&id| self.jobs[id as usize].pool == Some(p))
                || self.services.iter().any(|&id| {
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
    fn worst_share(
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
    fn could_preempt_onto(&self, a: &Job, reps: u32, touched: &[(NodeId, Node)]) -> bool {
        let victims = self
            .running_by_prio
            .first()
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
    fn fits_on(
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

    /// Nodes that would take the job once labelled: outside its pool (the pool's
    /// selector unmatched) or with GPUs the labels do not describe. Each says which
    /// labels are missing, how many idle GPUs it holds, and the `maar label` line; only
    /// those proven (on a copy) to start the job, where a copy is taken.
    fn label_fixes(&self, j: &Job) -> Vec<String> {
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

    /// Whether `mult` replicas of `spec` could ever go on node `n`: its whole
    /// capacity (every card healthy and free, nothing placed), not what is free now.
    fn could_ever_fit(&self, n: &Node, spec: &JobSpec, mult: u32) -> bool {
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
    fn size_fits(&self, n: &Node, spec: &JobSpec, mult: u32) -> bool {
        let oc = self.overcommit_of(n);
        let any_card = spec.gpu.models.is_empty()
            && spec.gpu.memory_per_card.is_none()
            && spec.gpu.resource.is_none()
            && n.gpus.iter().all(|g| g.resource.is_none());
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
    fn never_cause(&self, n: &Node, spec: &JobSpec, mult: u32) -> NodeReason {
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
                    model: kind[0].model.as_str().into(),
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
    fn never(&self, j: &Job, replicas: u32, mult: u32) -> Option<String> {
        let spec = &j.spec;
        if let (Some(pid), Some(pool)) = (j.project, j.pool) {
            if let Some(q) = self.projects[pid as usize].quotas.get(&pool) {
                let req = spec.replica_request().scaled(replicas as u64);
                if let Some(max) = q.max.gpu_milli {
                    if req.gpu_milli > max {
                        return Some(format!(
                            "can never run under its quota: it asks {} GPUs and project {} may use at most {} in pool {}",
                            Dim::Gpu.fmt(req.gpu_milli),
                            spec.project,
                            Dim::Gpu.fmt(max),
                            spec.pool
                        ));
                    }
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
            spec.gpu.resource.as_deref().unwrap_or("GPUs"),
            biggest
                .gpus
                .iter()
                .find(|g| g.resource.as_deref() == spec.gpu.resource.as_deref())
                .or(biggest.gpus.first())
                .map(|g| match g.memory {
                    // Memory not labelled (crater.ai/gpu-memory): the model alone.
                    0 => g.model.clone(),
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

    fn fits_now(&self, spec: &JobSpec, pool: Option<PoolId>, replicas: u32) -> bool {
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
    fn suggestions(
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
                                        "request more quota: +{} GPUs for project {} in pool {} (an admin approves it; its max grows from {} to {}); then it starts now{}",
                                        Dim::Gpu.fmt(extra),
                                        spec.project,
                                        spec.pool,
                                        Dim::Gpu.fmt(max),
                                        Dim::Gpu.fmt(max + extra),
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
                                "request reserved quota: +{} GPUs reserved for project {} in pool {} (an admin approves it; other projects' reserved GPUs are never lent); then it starts now",
                                gpus, spec.project, spec.pool
                            ));
                        }
                    }
                }
                // (Waiting for the project's own jobs to end is offered below, only
                // where the forward run shows it starting.)
            } else {
                out.push("use an existing project (namespace) and pool".into());
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
                    let name = format!("{}/{}", spec.project, spec.name);
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
            out.push(
                "nothing that maar can change now would start it: no node of its pool has room even after the running jobs end (NotReady, cordoned or unhealthy nodes need repair first)"
                    .into(),
            );
        }
        out
    }
}

/// Whether card `g` is of the kind `spec` asks for: an allowed model, enough memory,
/// the device resource asked for (whole cards unless a MIG profile or time-sliced
/// replicas are named).
fn card_of_kind(spec: &JobSpec, g: &Gpu) -> bool {
    (spec.gpu.models.is_empty()
        || spec
            .gpu
            .models
            .iter()
            .any(|m| m.eq_ignore_ascii_case(&g.model)))
        && spec.gpu.memory_per_card.is_none_or(|m| g.memory >= m)
        && g.resource.as_deref() == spec.gpu.resource.as_deref()
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Job:       {} ({})", self.job, self.phase)?;
        writeln!(f, "Request:   {} in pool {}", self.request, self.pool)?;
        if !self.placement.is_empty() {
            writeln!(f, "Placement: {}", self.placement.join("; "))?;
        }
        if !self.reason.is_empty() {
            writeln!(f, "Reason:    {}", self.reason)?;
        }
        if let Some(a) = &self.autoscaler {
            writeln!(f, "Autoscale: {a}")?;
        }
        writeln!(f, "Quota:     {}", self.quota.message)?;
        if self.phase == "Running" && self.suggestions.is_empty() {
            // Running with every replica placed: nothing is waiting to be explained.
            return Ok(());
        }
        writeln!(f, "Nodes:     {}", self.summary)?;
        if let Some(g) = &self.gang {
            writeln!(f, "Gang:      {g}")?;
        }
        if let Some(fr) = &self.fragmentation {
            writeln!(f, "Fragments: {fr}")?;
        }
        if let Some(p) = self.queue_position {
            writeln!(f, "Queue:     position {p} of {}", self.queue_length)?;
            for a in &self.ahead {
                writeln!(f, "           ahead: {a}")?;
            }
        }
        if let Some(s) = &self.starts {
            writeln!(f, "Starts:    {s}")?;
        }
        if let Some(e) = &self.evicted {
            writeln!(f, "Evicted:   {e}")?;
        }
        for l in &self.loans {
            writeln!(f, "On loan:   {l}")?;
        }
        if let Some(n) = &self.nearest {
            if n.lacks.iter().any(|l| l == "no GPUs") {
                writeln!(f, "Nearest:   {} has no GPUs", n.node)?;
            } else {
                writeln!(f, "Nearest:   {} lacks {}", n.node, n.lacks.join(", "))?;
            }
        }
        for (i, s) in self.suggestions.iter().enumerate() {
            if i == 0 {
                writeln!(f, "To run:    {s}")?;
            } else {
                writeln!(f, "           {s}")?;
            }
        }
        Ok(())
    }
}
