//! The first line of an explanation: the cause that must change, from each node's
//! verdict and the reasons' histogram.

use crate::cluster::Cluster;
use crate::fit::{fit, free_cpu, free_disk, free_mem, NodeReason};
use crate::model::*;
use crate::quantity::{fmt_bytes, fmt_cpu};

use super::*;

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
    pub(super) fn short_of_cards(
        &self,
        n: NodeId,
        spec: &JobSpec,
        mult: u32,
    ) -> Option<NodeReason> {
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
        let sum = &self.summaries[n as usize];
        debug_assert_eq!(
            sum.resource_cards as usize,
            node.gpus.iter().filter(|g| g.resource.is_some()).count(),
            "node {n}'s summary went stale"
        );
        if sum.resource_cards > 0 {
            return None;
        }
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
    pub(super) fn lead(
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
                    e.pods += 1;
                }
                if crate::fit::fit_except(node, *n, self.overcommit_of(node), spec, mult, &e)
                    .is_err()
                {
                    continue;
                }
                let aged = a.aged;
                return Some(format!(
                    "the room on {} went to {} (priority {}{}), {}",
                    node.name,
                    self.job_ref(x),
                    priority_name(a.spec.priority),
                    if aged > 0 {
                        format!(", +{aged} for its wait")
                    } else {
                        String::new()
                    },
                    if a.found {
                        // Another scheduler's pod, or one bound before this maar saw
                        // it (by its maker, or by a maar before a restart).
                        "found running there when maar saw it"
                    } else {
                        "ahead of it in the queue"
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
                let what = match n.gpus.first().map(|g| &*g.model) {
                    Some(m) if !m.is_empty() => format!("{idle} idle {m} GPUs"),
                    _ => format!("{idle} idle GPUs"),
                };
                if !n.gpu_labelled() {
                    // Its cards are not maar's to use until the node says what they are.
                    return Some(format!(
                        "pool {pool} has no room for it, while node {} has {what} that maar does not schedule: it lacks the {} and {} labels (`kubectl label node {} {}=MODEL {}={}`, or `maar label`)",
                        n.name,
                        crate::model::LABEL_MODEL,
                        crate::model::LABEL_COUNT,
                        n.name,
                        crate::model::LABEL_MODEL,
                        crate::model::LABEL_COUNT,
                        n.gpus.len()
                    ));
                }
                return Some(format!(
                    "pool {pool} has no room for it, while node {} has {what} and is in no pool",
                    n.name
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
    pub(super) fn hard_cause(
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
                let plain = || self.summaries[n as usize].resource_cards == 0;
                return (!self.size_fits_with(node, spec, mult, plain))
                    .then(|| self.too_small(node, spec));
            }
            _ => {}
        }
        // Any other state (NotReady, cordoned, a pod rule): the first constraint that
        // keeps it off for good, if one does.
        let node = &self.nodes[n as usize];
        (!self.could_ever_fit(node, spec, mult)).then(|| self.never_cause(node, spec, mult))
    }

    pub(super) fn too_small(&self, node: &Node, spec: &JobSpec) -> NodeReason {
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
    pub(super) fn histogram(
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
    pub(super) fn lacks(
        &self,
        n: NodeId,
        spec: &JobSpec,
        mult: u32,
        first: &NodeReason,
    ) -> Vec<String> {
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
}
