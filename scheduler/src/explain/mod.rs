//! Why a job is Pending, exactly: the quota verdict, a per-node reason histogram, the
//! queue position, the nearest node and what would make the job run.
//!
//! Every verdict here comes from the same `fit` and quota code the scheduler uses.

use std::fmt;

use serde::Serialize;

use crate::cluster::Cluster;
use crate::fit::NodeReason;
use crate::model::*;
use crate::quantity::fmt_duration;
use crate::schedule::QuotaVerdict;

mod fixes;
mod headline;
mod never;
mod proof;

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
    /// The state that keeps it out of use, where one does (`cordoned`, `NotReady
    /// (why)`): what must change there before anything it lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is: Option<String>,
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
    /// Why a federation of clusters sent it here (`crate::dispatch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatched: Option<String>,
    /// Held for the federation (its file asks for another cluster, or `auto`, and it
    /// has been neither sent nor kept): no cycle here tries it, so its quota and nodes
    /// say what it would meet were it kept here (`maar keep`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// Succeeded, failed or cancelled ([`Phase::is_terminal`]): it asks for nothing
    /// any more, so what it would meet now (quota, nodes) is not said of it.
    #[serde(skip)]
    pub ended: bool,
    /// For a Pending job: when it is expected to start, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts: Option<String>,
    /// Seconds on the cluster's clock, or null ([`crate::forecast`]).
    pub expected_start_s: Option<u64>,
    /// `estimate`, `history`, `never` or `unknown`; null for a job that is not Pending.
    pub expected_start_basis: Option<&'static str>,
}

impl Cluster {
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
            let borrowing = self.borrowing(j);
            QuotaVerdict {
                ok: true,
                borrowing,
                message: format!(
                    "holds {} GPUs{}; project {} uses {} GPUs in pool {} (max {})",
                    Dim::Gpu.fmt(held.gpu_milli),
                    if borrowing { " (borrowed quota)" } else { "" },
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
            // Among the nodes that could ever hold it, if any: a cordoned node of
            // another model is near to nothing. Where none could, the nearest is told
            // by what keeps each off for good, not by a cordon or a NotReady that
            // would leave it as far as it is.
            let out_of_use =
                |r: &NodeReason| matches!(r, NodeReason::Cordoned | NodeReason::NotReady { .. });
            let refused: Vec<(NodeId, &NodeReason)> = verdicts
                .iter()
                .filter_map(|(n, v)| v.as_ref().err().map(|r| (*n, r)))
                .collect();
            let ever = |n: NodeId| self.could_ever_fit(&self.nodes[n as usize], &j.spec, mult);
            let any_able = refused.iter().any(|&(n, _)| ever(n));
            // (rank, node, its reason, what it would still lack once back in use)
            type Near = (u64, NodeId, NodeReason, Option<NodeReason>);
            let near: Vec<Near> = refused
                .iter()
                .filter(|&&(n, _)| !any_able || ever(n))
                .map(|&(n, r)| match r {
                    r if out_of_use(r) && !any_able => {
                        let never = self.never_cause(&self.nodes[n as usize], &j.spec, mult);
                        (never.distance(), n, never, None)
                    }
                    r if out_of_use(r) => {
                        // Judged as if it were back in use too: an uncordon alone may
                        // not do, and a node that would still lack much is not near.
                        let mut back = self.nodes[n as usize].clone();
                        back.cordoned = false;
                        back.condition = Condition::Ready;
                        let under =
                            crate::fit::fit(&back, n, self.overcommit_of(&back), &j.spec, mult)
                                .err();
                        let rank = r.distance() + under.as_ref().map_or(0, |u| u.distance());
                        (rank, n, r.clone(), under)
                    }
                    r => (r.distance(), n, r.clone(), None),
                })
                .collect();
            near.into_iter()
                .min_by_key(|x| (x.0, x.1))
                .map(|(_, n, r, under)| {
                    let is = out_of_use(&r).then(|| r.phrase(&j.spec));
                    let lacks = match (&is, under) {
                        (Some(_), Some(u)) => self.lacks(n, &j.spec, mult, &u),
                        (Some(_), None) => Vec::new(),
                        (None, _) => self.lacks(n, &j.spec, mult, &r),
                    };
                    Nearest {
                        node: self.nodes[n as usize].name.clone(),
                        lacks,
                        is,
                    }
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
                    "{}{}{}",
                    self.nodes[p.node as usize].name,
                    if gpus.is_empty() {
                        String::new()
                    } else {
                        format!(" GPU [{}]", gpus.join(","))
                    },
                    if p.on_loan { " on loan" } else { "" }
                )
            })
            .collect();
        // When it starts: a forward run on a copy, until it starts (on clusters up to
        // `proof_nodes` nodes: beyond, copying the cluster costs more than an
        // explanation may; `maar get jobs` forecasts every job at once).
        // A job held for the federation has neither (no cycle here tries it).
        let held = self.held_for_federation(id);
        let forecast = forecast && !held && self.nodes.len() <= self.config.proof_nodes;
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
        let suggestions = if !held && j.phase == Phase::Pending
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
            dispatched: j.spec.dispatched.clone(),
            held,
            ended: j.phase.is_terminal(),
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
                        match j.autoscaler.last_usage_pct {
                            Some(u) => format!(", last seen {:.0}%", u.min(100.0)),
                            // Said, not left to be guessed: an autoscaler with no
                            // reading holds the replicas where they are.
                            None => "; no usage reading yet, so it holds the replicas as they are".into(),
                        }
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
        if let Some(d) = &self.dispatched {
            writeln!(f, "Sent:      {d}")?;
        }
        if !self.placement.is_empty() {
            writeln!(f, "Placement: {}", self.placement.join("; "))?;
        }
        if !self.reason.is_empty() {
            writeln!(f, "Reason:    {}", self.reason)?;
        }
        if let Some(a) = &self.autoscaler {
            writeln!(f, "Autoscale: {a}")?;
        }
        if self.ended {
            // It asks for nothing any more: what it would meet now (quota, nodes) is
            // not about it.
            if let Some(e) = &self.evicted {
                writeln!(f, "Evicted:   {e}")?;
            }
            return Ok(());
        }
        if self.held {
            // Nothing here tries it: what follows is this cluster as it would be for it.
            let job = self.job.trim_start_matches("job/");
            writeln!(
                f,
                "If kept:   were it kept here (`maar keep {job}`), it would meet:"
            )?;
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
            if let Some(is) = &n.is {
                match n.lacks.is_empty() {
                    true => writeln!(f, "Nearest:   {} is {is}", n.node)?,
                    false => writeln!(
                        f,
                        "Nearest:   {} is {is}, and lacks {}",
                        n.node,
                        n.lacks.join(", ")
                    )?,
                }
            } else if n.lacks.iter().any(|l| l == "no GPUs") {
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
