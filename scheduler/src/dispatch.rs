//! Many clusters, one queue: where a job would start first. Each cluster answers for
//! itself with a [`Prospect`] (the job submitted to a copy of it: placed at once, or
//! its forecast start and the first line of why it waits), and [`choose`] takes the
//! cluster where it starts first, ties going to the cheaper card per GPU-hour, then to
//! the first named. Nothing here is guessed: a cluster where the start is not foreseen
//! (`unknown`) or impossible (`never`) comes after every cluster with a known start,
//! and the reason it gives is the one its own explain gives.

use serde::Serialize;

use crate::cluster::Cluster;
use crate::forecast::{Basis, Reach};
use crate::input::{Actor, Core, Input};
use crate::model::{JobSpec, Phase};
use crate::quantity::fmt_duration;

/// How a job would fare in one cluster if it were submitted there now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prospect {
    /// Seconds from now until it starts: 0 when it starts now; `None` when that is not
    /// foreseen or it can never run there.
    pub start_in: Option<u64>,
    /// `estimate`, `history`, `never` or `unknown` (`estimate` when it starts now).
    pub basis: Basis,
    /// Why it waits there: the first line of its explanation (empty when it starts now).
    pub reason: String,
    /// When it would start, in words, as explain says it ("now", "in about 40m, when
    /// job/ml-prod/eval-6 ends").
    pub starts: String,
    /// The nodes it would run on now.
    pub placement: Vec<String>,
    /// The price of a GPU-hour of the cards it would run on now, where priced.
    pub price: Option<f64>,
    /// A job of that name is already here (the prospect is of a copy): a job runs in
    /// one cluster, so it goes nowhere else.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exists: bool,
}

impl Prospect {
    /// Sorts clusters: a known start before none, sooner first, then cheaper.
    fn key(&self) -> (bool, u64, f64) {
        (
            self.start_in.is_none(),
            self.start_in.unwrap_or(u64::MAX),
            self.price.unwrap_or(f64::INFINITY),
        )
    }

    /// In words, for the record and explain: "starts now on n1, 2.50/GPU-hour", "would
    /// start in about 2h, when job/ml-prod/x ends: <why it waits>".
    pub fn words(&self) -> String {
        match self.start_in {
            Some(0) => format!(
                "starts now{}{}",
                if self.placement.is_empty() {
                    String::new()
                } else {
                    format!(" on {}", self.placement.join(", "))
                },
                self.price
                    .map(|p| format!(", {p:.2}/GPU-hour"))
                    .unwrap_or_default()
            ),
            Some(_) => format!("would start {}: {}", self.starts, self.reason),
            // The first line says it: "can never run as asked: ...".
            None if self.basis == Basis::Never => self.reason.clone(),
            None => format!("has no start foreseen: {}", self.reason),
        }
    }
}

impl Core {
    /// How a job waiting here would fare were it withdrawn and submitted here again
    /// now (its twin in the queue would otherwise wait behind it): what a federation
    /// compares with the other clusters' [`Core::prospect`] when the job's file asks
    /// for `auto` ([`to_send`]).
    pub fn prospect_again(&self, job: &str) -> Result<Prospect, String> {
        let c = self.cluster();
        let id = c.job_id(job).map_err(|e| e.to_string())?;
        let spec = JobSpec::clone(&c.jobs[id as usize].spec);
        let mut copy = self.clone();
        let out = copy.apply(Input::Command {
            actor: Actor::system("dispatch"),
            command: crate::command::Command::Cancel {
                job: job.to_string(),
                why: None,
            },
        });
        out.result.map_err(|e| e.to_string())?;
        let mut p = copy.prospect(&spec)?;
        p.exists = false;
        Ok(p)
    }

    /// The job submitted to a copy of this cluster now, with a scheduling cycle (binds
    /// taken as done): placed at once, or when the forward run of the copy shows it
    /// starting ([`crate::forecast`]). Refused (the spec's own error) when this cluster
    /// would refuse the submit: a project or pool it does not have, a bad spec.
    pub fn prospect(&self, spec: &JobSpec) -> Result<Prospect, String> {
        let spec = &*as_sent(spec);
        if let Some(p) = self.prospect_now(spec) {
            // The shortcut answers as the copy would: checked against it in debug
            // builds (every test that asks a prospect).
            #[cfg(debug_assertions)]
            {
                let copied = self.prospect_on_copy(spec);
                debug_assert_eq!(Ok(&p), copied.as_ref(), "a prospect without a copy differs");
            }
            return Ok(p);
        }
        self.prospect_on_copy(spec)
    }

    /// [`Core::prospect`] only where it needs no copy of the cluster (see
    /// `prospect_now`): cheap on a cluster of any size; `None` where a copy must decide.
    pub fn prospect_quick(&self, spec: &JobSpec) -> Option<Prospect> {
        self.prospect_now(&as_sent(spec))
    }

    /// The prospect without a copy, where the copy's cycle would try this job alone
    /// and place it at once: nothing waits but jobs their quota holds (none
    /// restarting, no service short of replicas; backfill on), the job is one plain replica (whole cards, no
    /// node rules) of a project and pool this cluster has, its quota admits it and a
    /// node takes it without preemption, placement scoring against the typical shapes
    /// with this job among them, as the copy's cycle would. That is the node the cycle
    /// picks: the same search on the same state. `None`: the copy decides.
    fn prospect_now(&self, spec: &JobSpec) -> Option<Prospect> {
        use crate::model::{Affinity, JobKind};
        let c = self.cluster();
        if c.job_id(&spec.full_name()).is_ok() {
            return None;
        }
        // Jobs that wait only for their quota are not tried by a cycle (their verdict
        // holds them; placing this job can only add to its own project's use), so the
        // copy would try this job alone. Any other waiting job, the copy decides.
        let tried = !c.pending_loose.is_empty()
            || !c.pending_constrained.is_empty()
            || c.pending_by_key.values().any(|jobs| {
                jobs.iter()
                    .next()
                    .is_some_and(|(&rep, k)| c.quota_verdict(rep, k.replicas).ok)
            });
        if tried || !c.config.backfill || !c.restarting.is_empty() {
            return None;
        }
        let short = c.services.iter().any(|&id| {
            let j = &c.jobs[id as usize];
            j.phase == Phase::Running && j.desired_replicas > j.running_replicas()
        });
        let plain = spec.replicas == 1
            && matches!(spec.kind, JobKind::Train)
            && !spec.gpu.shared
            && spec.affinity == Affinity::Any
            && spec.node_selector.is_empty()
            && spec.rules.is_empty()
            && !spec.pool.is_empty();
        if short || !plain {
            return None;
        }
        let (project, pool) = (c.project_id(&spec.project)?, c.pool_id(&spec.pool)?);
        if !c
            .quota_verdict_for(spec, Some(project), Some(pool), 1, 0)
            .ok
        {
            return None;
        }
        let (shape, n) = Cluster::shape_of_spec(spec, spec.replicas);
        // Placement scores against the typical shapes as the copy's cycle has them:
        // with this job among them.
        let mut counts = c.shape_counts.clone();
        *counts.entry(shape).or_default() += n;
        let shapes = c.typical_of(counts);
        let gpu = crate::placement::gpu_shapes(&shapes);
        let bound = crate::placement::bound_demand(&shapes, &c.models);
        let typ = crate::schedule::Typical {
            shapes: &shapes,
            gpu: &gpu,
            bound: &bound,
        };
        let pools = c.candidate_pools(Some(pool));
        let p = c.find_node_typed(spec, 1, &pools, &[], &[], true, &typ)?;
        Some(Prospect {
            start_in: Some(0),
            basis: Basis::Estimate,
            reason: String::new(),
            starts: "now".into(),
            placement: vec![c.nodes[p.node as usize].name.clone()],
            price: price_of(c, std::slice::from_ref(&p)),
            exists: false,
        })
    }

    /// The job submitted to a copy of this cluster and a cycle run there.
    fn prospect_on_copy(&self, spec: &JobSpec) -> Result<Prospect, String> {
        let quiet = self.prospect_copied(spec, true, true);
        // Quiet, the copy's cycle places as a loud one would, and a first cycle that
        // ran on past the job's turn stands for the forecast's first: checked against
        // a loud copy (whose first cycle runs whole, as the engine's does after a
        // real submit) in debug builds (every test that asks a prospect of a cluster
        // where jobs wait). A copy that stops at the job's turn (`run_on` off) is not
        // the reference: a job behind it that evicts in the forecast's first cycle
        // leaves its victim's end to mark a step, which neither the engine's own
        // forecast nor the loud copy reads (tested).
        #[cfg(debug_assertions)]
        {
            let loud = self.prospect_copied(spec, false, true);
            debug_assert_eq!(quiet, loud, "a quiet prospect's copy differs");
        }
        quiet
    }

    /// The prospect on a copy: the job submitted to it and a cycle run. `quiet`: the
    /// copy words no other job's reason, writes no events and keeps no bill (a cycle
    /// over a long queue spent most of its time wording reasons nobody reads).
    /// `run_on`: the cycle may run on past the job's turn and stand for the forward
    /// run's first (`Cluster::schedule`).
    fn prospect_copied(
        &self,
        spec: &JobSpec,
        quiet: bool,
        run_on: bool,
    ) -> Result<Prospect, String> {
        self.cluster().warm_node_caches();
        let mut copy = self.clone();
        let mut spec = spec.clone();
        // A name already taken here is evaluated as a copy under another name.
        let exists = copy.cluster().job_id(&spec.full_name()).is_ok();
        while copy.cluster().job_id(&spec.full_name()).is_ok() {
            spec.name.push_str("-x");
        }
        // Quiet from the submit on: its event would have copied the event window
        // (thousands of pointers) that the copy shares, for nobody.
        if quiet {
            copy.quiet_but(None);
        }
        let out = copy.apply(Input::Command {
            actor: Actor::system("dispatch"),
            command: crate::command::Command::Submit(Box::new(spec.clone())),
        });
        out.result.map_err(|e| e.to_string())?;
        let id = out.job.ok_or("the copy made no job of it")?;
        if quiet {
            copy.quiet_but(Some(id));
        }
        copy.run_on(run_on);
        crate::kit::Bare::settle(&mut copy, &mut Vec::new(), &mut Vec::new());
        let c = copy.cluster();
        let j = &c.jobs[id as usize];
        if j.phase == Phase::Running {
            return Ok(Prospect {
                start_in: Some(0),
                basis: Basis::Estimate,
                reason: String::new(),
                starts: "now".into(),
                placement: j
                    .placements
                    .iter()
                    .map(|p| c.nodes[p.node as usize].name.clone())
                    .collect(),
                price: price_of(c, &j.placements),
                exists,
            });
        }
        let now = c.now;
        // The first line, as explain gives it (before the forward run, which runs on
        // this copy itself: nobody keeps it).
        let reason = c.jobs[id as usize].reason.to_string();
        let first_done = !c.again;
        let mut c = copy.into_cluster();
        let start = c
            .forecast_in_place(Reach::default(), Some(id), Some(self.cluster()), first_done)
            .starts
            .remove(&id)
            .unwrap_or(crate::forecast::Start {
                at: None,
                basis: Basis::Unknown,
                after: None,
            });
        let after = start.after.map(|a| {
            let s = &c.jobs[a as usize].spec;
            format!(", when job/{}/{} ends", s.project, s.name)
        });
        let starts = match (start.at, start.basis) {
            (Some(t), _) => format!(
                "in about {}{}",
                fmt_duration(t.saturating_sub(now)),
                after.unwrap_or_default()
            ),
            (None, Basis::Never) => "never as asked".into(),
            (None, _) => "not foreseen".into(),
        };
        Ok(Prospect {
            start_in: start.at.map(|t| t.saturating_sub(now)),
            basis: start.basis,
            reason,
            starts,
            placement: Vec::new(),
            price: None,
            exists,
        })
    }
}

impl Cluster {
    /// Why a Pending job waits for the federation rather than in this cluster's queue:
    /// its file asks for another cluster, or for `auto`, and the federation that runs
    /// this cluster among others has neither sent it yet nor left it here (`kept`).
    /// `None`: it queues here (alone, no ask, this cluster asked, sent here, kept).
    pub(crate) fn federation_hold(&self, j: &crate::model::Job) -> Option<crate::model::Reason> {
        let me = self.federation.as_deref()?;
        let wanted = j.spec.cluster.as_deref()?;
        if wanted == me || j.kept || j.spec.dispatched.is_some() {
            return None;
        }
        let label = crate::manifest::LABEL_CLUSTER;
        Some(if wanted == "auto" {
            format!("waiting for the federation to send it where it starts first ({label}: auto); not started in {me} before that").into()
        } else {
            format!("waiting to be sent to cluster {wanted} ({label}: {wanted}); it does not run in {me}").into()
        })
    }

    /// Whether a job waits for the federation ([`Cluster::federation_hold`]).
    pub fn held_for_federation(&self, id: crate::model::JobId) -> bool {
        self.pending_held.contains(&id)
    }

    /// Whether a held job waits for the federation's first word on it (its reason is
    /// still the hold's own): nothing to tell where users look as a scheduling
    /// failure, since the federation decides within a second or two.
    pub fn awaits_federation(&self, id: crate::model::JobId) -> bool {
        self.pending_held.contains(&id)
            && self
                .federation_hold(&self.jobs[id as usize])
                .is_some_and(|r| r == self.jobs[id as usize].reason)
    }

    /// The jobs held for the federation: (`project/name`, the cluster its file asks
    /// for), for the federation's mover to decide.
    pub fn held_jobs(&self) -> Vec<(String, String)> {
        self.pending_held
            .iter()
            .map(|&id| {
                let s = &self.jobs[id as usize].spec;
                (s.full_name(), s.cluster.clone().unwrap_or_default())
            })
            .collect()
    }

    /// This cluster is `me` among several whose federation sends the jobs that ask for
    /// a cluster (`None`: alone); the Pending jobs that ask for one are held or
    /// queued as that says.
    pub(crate) fn set_federation(&mut self, me: Option<String>) {
        if self.federation == me {
            return;
        }
        self.federation = me;
        let asking: Vec<crate::model::JobId> = self
            .pending
            .keys()
            .copied()
            .filter(|&id| self.jobs[id as usize].spec.cluster.is_some())
            .collect();
        for id in asking {
            self.rehold(id);
        }
    }

    /// A Pending job held or queued again as [`Cluster::federation_hold`] now says.
    fn rehold(&mut self, id: crate::model::JobId) {
        if !self.pending.contains_key(&id) {
            return;
        }
        let was = self.pending_held.contains(&id);
        self.pending_remove(id);
        self.pending_insert(id);
        if was && !self.pending_held.contains(&id) {
            self.set_reason(id, &"waiting for the next scheduling cycle".into());
        }
    }

    /// `by` (the federation, or an operator: `maar keep`) keeps a job held for the
    /// federation here: it queues here from now on.
    pub(crate) fn keep(
        &mut self,
        job: &str,
        why: &str,
        by: &str,
    ) -> Result<String, crate::cluster::ClusterError> {
        let id = self.job_id(job)?;
        if !self.pending_held.contains(&id) {
            return Ok(format!(
                "job {job} is not held for the federation: nothing to keep"
            ));
        }
        self.jobs[id as usize].kept = true;
        self.rehold(id);
        let me = self.federation.clone().unwrap_or_default();
        let m = if why.is_empty() {
            format!("kept in {me} by {by}")
        } else {
            format!("kept in {me} by {by}: {why}")
        };
        self.emit(
            crate::event::Severity::Normal,
            "KeptHere",
            format!("job/{job}"),
            m.clone(),
        );
        Ok(m)
    }

    /// The federation says why a job held for it is not sent yet (the cluster its file
    /// names refuses it, is none of the federation's, or does not answer): its reason.
    pub(crate) fn not_sent(
        &mut self,
        job: &str,
        why: &str,
    ) -> Result<String, crate::cluster::ClusterError> {
        let id = self.job_id(job)?;
        if !self.pending_held.contains(&id) {
            return Ok(format!("job {job} is not held for the federation"));
        }
        let why: crate::model::Reason = why.into();
        if self.jobs[id as usize].reason != why {
            self.set_reason(id, &why);
            self.emit(
                crate::event::Severity::Warning,
                "NotSent",
                format!("job/{job}"),
                why.to_string(),
            );
        }
        Ok(format!("job {job} still held: {why}"))
    }
}

/// A job as a federation would send it: its file's ask for a cluster decided (else a
/// prospect's copy of a cluster among several would hold it for the federation).
fn as_sent(spec: &JobSpec) -> std::borrow::Cow<'_, JobSpec> {
    match spec.cluster {
        Some(_) => std::borrow::Cow::Owned(JobSpec {
            cluster: None,
            ..spec.clone()
        }),
        None => std::borrow::Cow::Borrowed(spec),
    }
}

/// The dearest GPU-hour among the cards of `placements` (`None`: no priced card).
fn price_of(c: &Cluster, placements: &[crate::model::Placement]) -> Option<f64> {
    placements
        .iter()
        .flat_map(|p| {
            let node = &c.nodes[p.node as usize];
            p.gpus
                .iter()
                .filter_map(|g| node.gpus.get(g.gpu as usize))
                .filter_map(|g| c.prices.get(&*g.model).copied())
        })
        .reduce(f64::max)
}

/// Where a job goes among clusters, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Choice {
    /// The index of the chosen cluster in the list given.
    pub index: usize,
    pub cluster: String,
    /// "sent to site-b: starts now there; in site-a it would wait about 2h (...): ..."
    pub why: String,
}

impl Choice {
    /// The choice said before it is carried out (a preview, before `y`): "would go to
    /// site-b: starts now there; ...". (`why` is the record's words, once it is sent.)
    pub fn would(&self) -> String {
        match self.why.strip_prefix("sent to ") {
            Some(rest) => format!("would go to {rest}"),
            None => self.why.clone(),
        }
    }
}

/// The cluster where the job starts first (ties: the cheaper GPU-hour, then the first
/// listed), among those that answered; the one that already has a job of that name,
/// if one does (its submit is then refused there, and it runs nowhere else); `None` when none could take it at all (each
/// refused the submit). A cluster whose start is unknown or never is chosen only when
/// no cluster knows a start, and the words say so.
pub fn choose(prospects: &[(String, Result<Prospect, String>)]) -> Option<Choice> {
    // A job already in a cluster stays the one there: never sent to a second.
    if let Some((index, (name, _))) = prospects
        .iter()
        .enumerate()
        .find(|(_, (_, p))| p.as_ref().is_ok_and(|p| p.exists))
    {
        return Some(Choice {
            index,
            cluster: name.clone(),
            why: format!(
                "already in {name}: a job runs in one cluster, so it is not sent to another"
            ),
        });
    }
    let (index, best) = prospects
        .iter()
        .enumerate()
        .filter_map(|(i, (_, p))| p.as_ref().ok().map(|p| (i, p)))
        .min_by(|a, b| {
            a.1.key()
                .partial_cmp(&b.1.key())
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.0.cmp(&b.0))
        })?;
    let name = &prospects[index].0;
    let mut why = format!("sent to {name}: {} there", best.words());
    for (i, (other, p)) in prospects.iter().enumerate() {
        if i == index {
            continue;
        }
        why.push_str(&match p {
            Ok(p) => format!("; in {other} it {}", p.words()),
            Err(e) => format!("; {other} refuses it: {e}"),
        });
    }
    Some(Choice {
        index,
        cluster: name.clone(),
        why,
    })
}

/// A job applied to one cluster (`prospects[here]`) whose file asks for a cluster
/// (`wanted`: `crater.ai/cluster`): where to send it, once, and why; `None` to leave it
/// where it is. `auto` takes [`choose`] over every cluster, its own included (its own
/// prospect as if it were submitted there now: [`Core::prospect_again`]), and sends it
/// only when another is chosen; a name sends it to that cluster unless it is this one
/// (`None`), none of them, or one that refuses it (`Err`: why). `here` out of the
/// list's range: the job is in none of them yet (a submit).
pub fn to_send(
    here: usize,
    wanted: &str,
    prospects: &[(String, Result<Prospect, String>)],
) -> Result<Option<Choice>, String> {
    if wanted == "auto" {
        return Ok(choose(prospects).filter(|c| c.index != here));
    }
    let Some(index) = prospects.iter().position(|(n, _)| n == wanted) else {
        let names: Vec<&str> = prospects.iter().map(|(n, _)| n.as_str()).collect();
        return Err(format!(
            "its file asks for cluster {wanted} (crater.ai/cluster), which is none of {}",
            names.join(", ")
        ));
    };
    if index == here {
        return Ok(None);
    }
    match &prospects[index].1 {
        Ok(p) => Ok(Some(Choice {
            index,
            cluster: wanted.to_string(),
            why: format!(
                "sent to {wanted}: its file asks for it ({}: {wanted}); it {} there",
                crate::manifest::LABEL_CLUSTER,
                p.words()
            ),
        })),
        Err(e) => Err(format!(
            "its file asks for cluster {wanted} (crater.ai/cluster), which refuses it: {e}"
        )),
    }
}

/// How long past the start it was sent for a job may wait where it was sent before it
/// is moved: that cluster's cycles, a pod's image pulled, a forecast's slack.
pub const MOVE_AFTER_S: u64 = 300;
/// How much sooner another cluster must start it for a move to be made.
pub const MOVE_GAIN_S: u64 = 300;

/// A job a federation sent to one cluster (`here`) that still waits there: where to
/// move it, once, and why; `None` to leave it. It moves only when all of these hold:
/// it was sent (not submitted here), it was never moved, it has waited `waited_s` of
/// this cluster's clock, past the start it was sent for by [`MOVE_AFTER_S`] (the
/// cluster could not start it after all), and another cluster would start it at a
/// known time at least [`MOVE_GAIN_S`] sooner than this one now foresees (`here_in`:
/// seconds from now; `None` when it is not foreseen or never); `others` are the other
/// clusters' prospects, `reason` its first line here. A cluster that already has a job
/// of that name takes nothing.
pub fn to_move(
    here: &str,
    spec: &JobSpec,
    waited_s: u64,
    here_in: Option<u64>,
    reason: &str,
    others: &[(String, Result<Prospect, String>)],
) -> Option<Choice> {
    if spec.dispatched.is_none() || spec.moved_from.is_some() {
        return None;
    }
    let sent_for = spec.sent_start_in.unwrap_or(0);
    if waited_s < sent_for.saturating_add(MOVE_AFTER_S) {
        return None;
    }
    if others
        .iter()
        .any(|(_, p)| p.as_ref().is_ok_and(|p| p.exists))
    {
        return None;
    }
    let choice = choose(others)?;
    let best = others[choice.index].1.as_ref().ok()?;
    let sooner = best.start_in?;
    if here_in.is_some_and(|h| h <= sooner.saturating_add(MOVE_GAIN_S)) {
        return None;
    }
    let sent = match spec.sent_start_in {
        Some(0) => "sent to start now".to_string(),
        Some(s) => format!("sent to start in about {}", fmt_duration(s)),
        None => "sent with no start foreseen anywhere".to_string(),
    };
    let now_here = match here_in {
        Some(h) => format!("it would start in about {} there", fmt_duration(h)),
        None => "its start there is not foreseen".to_string(),
    };
    let why = format!(
        "moved from {here} (once: it stays where it goes): {sent}, it waited {} there ({reason}) and {now_here}; {}",
        fmt_duration(waited_s),
        choice.why
    );
    Some(Choice { why, ..choice })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts_in(s: Option<u64>) -> Result<Prospect, String> {
        Ok(Prospect {
            start_in: s,
            basis: if s.is_some() {
                Basis::Estimate
            } else {
                Basis::Never
            },
            reason: if s == Some(0) {
                String::new()
            } else {
                "0/3 nodes are available".into()
            },
            starts: match s {
                Some(0) => "now".into(),
                Some(s) => format!("in about {}", fmt_duration(s)),
                None => "never as asked".into(),
            },
            placement: Vec::new(),
            price: None,
            exists: false,
        })
    }

    /// Submits `s` and runs cycles until nothing more is decided.
    fn submit_settled(core: &mut Core, s: JobSpec) {
        core.apply(Input::Command {
            actor: Actor::system("t"),
            command: crate::command::Command::Submit(Box::new(s)),
        })
        .result
        .unwrap();
        crate::kit::Bare::settle(core, &mut Vec::new(), &mut Vec::new());
    }

    fn sent(start_in: Option<u64>) -> JobSpec {
        let mut s = JobSpec::train("j", "ml", "train", 1);
        s.dispatched = Some("sent to a: starts now there".into());
        s.sent_start_in = start_in;
        s
    }

    #[test]
    fn a_job_whose_file_asks_for_a_cluster_is_sent_once_where_it_says() {
        let list = |a: Option<u64>, b: Option<u64>| {
            vec![
                ("a".to_string(), starts_in(a)),
                ("b".to_string(), starts_in(b)),
            ]
        };
        // auto: the soonest, its own cluster (index 0) included; none when it is its own.
        let c = to_send(0, "auto", &list(Some(3600), Some(0)))
            .unwrap()
            .unwrap();
        assert_eq!(c.cluster, "b");
        assert!(
            c.why
                .starts_with("sent to b: starts now there; in a it would start in about 1h"),
            "{}",
            c.why
        );
        assert_eq!(to_send(0, "auto", &list(Some(0), Some(0))).unwrap(), None);
        assert_eq!(to_send(0, "auto", &list(Some(60), None)).unwrap(), None);
        // A name: that cluster, even when its own would start it sooner.
        let c = to_send(0, "b", &list(Some(0), Some(600))).unwrap().unwrap();
        assert_eq!(c.index, 1);
        assert!(c.why.starts_with("sent to b: its file asks for it (crater.ai/cluster: b); it would start in about 10m"), "{}", c.why);
        // Its own name: it stays; a cluster not listed, or one that refuses: said.
        assert_eq!(to_send(0, "a", &list(None, Some(0))).unwrap(), None);
        let e = to_send(0, "c", &list(None, Some(0))).unwrap_err();
        assert!(
            e.contains("asks for cluster c (crater.ai/cluster), which is none of a, b"),
            "{e}"
        );
        let refusing = vec![
            ("a".to_string(), starts_in(None)),
            ("b".to_string(), Err("no project ml".to_string())),
        ];
        let e = to_send(0, "b", &refusing).unwrap_err();
        assert!(e.contains("which refuses it: no project ml"), "{e}");
        // A submit (in no cluster yet): auto always chooses one.
        assert_eq!(
            to_send(usize::MAX, "auto", &list(Some(0), Some(0)))
                .unwrap()
                .unwrap()
                .index,
            0
        );
    }

    #[test]
    fn a_prospect_without_a_copy_is_the_one_the_copy_gives() {
        use crate::testkit::*;
        let mut c = train_cluster();
        add_train_node(&mut c, "a1", "a100", 8);
        add_train_node(&mut c, "a2", "a100", 8);
        add_train_node(&mut c, "h1", "h100", 4);
        c.prices.insert("h100".into(), 4.5);
        let mut core = Core::new(c);
        // Some running work on the a100s, nothing waiting.
        for i in 0..3 {
            let mut r = JobSpec::train(&format!("r{i}"), "p", "train", 2);
            r.gpu.models = vec!["a100".into()];
            submit_settled(&mut core, r);
        }
        let specs = {
            let mut h100 = JobSpec::train("h", "p", "train", 2);
            h100.gpu.models = vec!["h100".into()];
            let mut big = JobSpec::train("big", "p", "train", 8);
            big.cpu_milli = 4000;
            vec![
                JobSpec::train("one", "p", "train", 1),
                JobSpec::train("cpu", "p", "train", 0),
                h100,
                big,
            ]
        };
        for s in &specs {
            let quick = core.prospect_now(s).expect("taken without a copy");
            assert_eq!(Ok(quick.clone()), core.prospect_on_copy(s), "{}", s.name);
            assert_eq!(quick.start_in, Some(0));
        }
        assert_eq!(core.prospect_now(&specs[2]).unwrap().price, Some(4.5));
        // Not taken: a job that fits nowhere now (the copy's forecast says when), one of
        // several replicas, a project it does not have, a name already here.
        let mut huge = JobSpec::train("huge", "p", "train", 16);
        huge.replicas = 1;
        assert_eq!(core.prospect_now(&huge), None);
        let mut gang = JobSpec::train("gang", "p", "train", 1);
        gang.replicas = 2;
        assert_eq!(core.prospect_now(&gang), None);
        assert_eq!(
            core.prospect_now(&JobSpec::train("x", "nope", "train", 1)),
            None
        );
        assert_eq!(
            core.prospect_now(&JobSpec::train("r0", "p", "train", 1)),
            None
        );
        // Something waiting: the copy decides.
        submit_settled(&mut core, JobSpec::train("waits", "p", "train", 16));
        assert_eq!(core.prospect_now(&specs[0]), None);
        assert!(core.prospect(&specs[0]).is_ok());
    }

    /// A job behind the asked one in the queue that backfills in the forward run (it
    /// delays no reservation: the one ahead of both holds it) takes a card the asked
    /// job would have had at a later end: the prospect says the start the cluster's own
    /// forecast gives the job once submitted, not the earlier one a forward run without
    /// the later jobs would say.
    #[test]
    fn a_prospect_waits_for_a_later_job_that_backfills_before_it_in_the_forward_run() {
        use crate::model::{PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MEDIUM};
        use crate::testkit::*;
        let mut c = train_cluster();
        add_train_node(&mut c, "n", "a100", 3);
        c.config.preemption = false;
        let job = |name: &str, gpus: u32, prio: i32, secs: u64| JobSpec {
            priority: prio,
            est_runtime_s: Some(secs),
            ..JobSpec::train(name, "p", "train", gpus)
        };
        let mut core = Core::new(c);
        // Every card busy: one free at 100 s, one at 200 s, the last at 10,000 s.
        submit_settled(&mut core, job("r1", 1, PRIORITY_LOW, 100));
        submit_settled(&mut core, job("r2", 1, PRIORITY_LOW, 200));
        submit_settled(&mut core, job("r3", 1, PRIORITY_LOW, 10_000));
        // The head wants all three (held for it at 10,000 s); behind the asked job, a
        // long one-card job that ends before that reservation.
        submit_settled(&mut core, job("head", 3, PRIORITY_HIGH, 50));
        submit_settled(&mut core, job("later", 1, PRIORITY_LOW, 5_000));
        let asked = job("asked", 2, PRIORITY_MEDIUM, 50);
        let p = core.prospect(&asked).expect("a prospect");
        // As submitted: the cluster's own forecast of it.
        submit_settled(&mut core, asked);
        let c = core.cluster();
        let id = c.job_id("p/asked").expect("submitted");
        let f = c.forecast(Reach::default(), None);
        let at = f.starts[&id].at.expect("a start");
        // `later` takes the card freed at 100 s; at 200 s one is free, so `asked`
        // waits for `later` to end (5,100 s).
        assert_eq!(at, 5_100);
        assert_eq!(p.start_in, Some(at - c.now), "{}", p.starts);
    }

    /// On random small clusters (models, card counts, priorities, runtimes, a job's
    /// models, preemption on or off, time moving between submits): a prospect says
    /// what the cluster itself does once the job is submitted: it starts now where a
    /// prospect said now, and otherwise the cluster's own forecast of it (every job at
    /// once, no copy of the prospect's shortcuts) gives the start the prospect said.
    #[test]
    fn a_prospect_is_what_the_cluster_does_once_the_job_is_submitted() {
        use crate::model::{PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MEDIUM};
        use crate::testkit::*;
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
        let (mut now, mut later) = (0, 0);
        for case in 0..300 {
            let mut c = train_cluster();
            c.config.preemption = rnd(2) == 0;
            for i in 0..1 + rnd(4) {
                let model = ["a100", "h100"][rnd(2) as usize];
                add_train_node(&mut c, &format!("n{i}"), model, 1 + rnd(4) as u32);
            }
            let rnd_job = |rnd: &mut dyn FnMut(u64) -> u64, name: String| {
                let mut s = JobSpec {
                    priority: [PRIORITY_LOW, PRIORITY_MEDIUM, PRIORITY_HIGH][rnd(3) as usize],
                    est_runtime_s: Some(60 * (1 + rnd(120))),
                    ..JobSpec::train(&name, "p", "train", 1 + rnd(3) as u32)
                };
                if rnd(4) == 0 {
                    s.gpu.models = vec!["h100".into()];
                }
                s
            };
            let mut core = Core::new(c);
            let mut t = 0;
            for k in 0..2 + rnd(12) {
                submit_settled(&mut core, rnd_job(&mut rnd, format!("j{k}")));
                if rnd(3) == 0 {
                    t += 30 * (1 + rnd(20));
                    core.apply(Input::Advance { to: t });
                    crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
                }
            }
            let asked = rnd_job(&mut rnd, "asked".into());
            let p = core.prospect(&asked).expect("a prospect");
            submit_settled(&mut core, asked);
            let c = core.cluster();
            let id = c.job_id("p/asked").expect("submitted");
            if c.jobs[id as usize].phase == Phase::Running {
                assert_eq!(p.start_in, Some(0), "case {case}: {}", p.starts);
                now += 1;
                continue;
            }
            let f = c.forecast(Reach::default(), None);
            let own = f.starts[&id].at.map(|at| at - c.now);
            assert_eq!(p.start_in, own, "case {case}: {} ({})", p.starts, p.reason);
            later += 1;
        }
        assert!(now > 30 && later > 30, "{now} started now, {later} later");
    }

    #[test]
    fn prospect_again_is_the_job_as_if_submitted_anew_not_behind_its_twin() {
        use crate::testkit::*;
        let mut c = train_cluster();
        add_train_node(&mut c, "n1", "a100", 1);
        let mut core = Core::new(c);
        let hour = |name: &str| {
            let mut s = JobSpec::train(name, "p", "train", 1);
            s.est_runtime_s = Some(3600);
            s
        };
        for name in ["busy", "waiting"] {
            let out = core.apply(Input::Command {
                actor: Actor::system("t"),
                command: crate::command::Command::Submit(Box::new(hour(name))),
            });
            out.result.unwrap();
            crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
        }
        let c = core.cluster();
        assert_eq!(
            c.jobs[c.job_id("p/busy").unwrap() as usize].phase,
            Phase::Running
        );
        assert_eq!(
            c.jobs[c.job_id("p/waiting").unwrap() as usize].phase,
            Phase::Pending
        );
        // Asked as a new submit, a copy waits behind the job itself (two hours); asked
        // again, it is the job alone (an hour), and not "already here".
        let twin = core.prospect(&hour("waiting")).unwrap();
        assert!(twin.exists);
        let again = core.prospect_again("p/waiting").unwrap();
        assert!(!again.exists);
        let (t, a) = (twin.start_in.unwrap(), again.start_in.unwrap());
        assert!((3500..=3700).contains(&a), "{a}");
        assert!(t >= a + 3500, "{t} vs {a}");
        // The job itself is untouched; a job not here is said.
        assert_eq!(
            core.cluster().jobs[core.cluster().job_id("p/waiting").unwrap() as usize].phase,
            Phase::Pending
        );
        assert!(core.prospect_again("p/none").is_err());
    }

    /// A job behind the asked one evicts in the copy's first cycle (which ran on past
    /// the asked job's idle turn and stands for the forward run's first): the start
    /// is the one the cluster's own forecast gives once the job is really submitted
    /// (the victim's end marks no step), not the one a copy stopped at the job's turn
    /// gave (its forecast's first cycle evicted, and the victim's end still counted).
    #[test]
    fn an_eviction_behind_the_asked_job_starts_it_as_a_real_submit_would() {
        use crate::model::{PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MEDIUM};
        use crate::testkit::*;
        let mut c = train_cluster();
        add_train_node(&mut c, "h", "h100", 1);
        add_train_node(&mut c, "t", "t4", 1);
        let mut core = Core::new(c);
        let job = |name: &str, model: &str, priority: i32, est: u64| {
            let mut s = JobSpec::train(name, "p", "train", 1);
            s.gpu.models = vec![model.into()];
            s.priority = priority;
            s.est_runtime_s = Some(est);
            s
        };
        let submit = |core: &mut Core, s: JobSpec| {
            core.apply(Input::Command {
                actor: Actor::system("t"),
                command: crate::command::Command::Submit(Box::new(s)),
            })
            .result
            .expect("submitted");
        };
        submit(&mut core, job("r", "h100", PRIORITY_HIGH, 1000));
        submit(&mut core, job("v", "t4", PRIORITY_LOW, 1050));
        crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
        core.apply(Input::Advance { to: 100 });
        // Queued, not yet tried: it evicts v at the next cycle.
        submit(&mut core, job("x", "t4", PRIORITY_MEDIUM, 5000));
        let a = job("a", "h100", PRIORITY_HIGH, 600);
        let p = core.prospect(&a).expect("a prospect");
        // r ends at 1000: a starts then.
        assert_eq!(p.start_in, Some(900), "{}", p.words());
        assert!(p.starts.contains("when job/p/r ends"), "{}", p.starts);
        let stopped = core.prospect_copied(&a, true, false).expect("a prospect");
        assert_eq!(stopped.start_in, Some(950), "{}", stopped.words());
        // Submitted for real, a cycle run: the cluster's own forecast agrees.
        submit(&mut core, a);
        crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
        let c = core.cluster();
        let id = c.job_id("p/a").expect("submitted");
        let f = c.forecast(Reach::default(), Some(id));
        assert_eq!(f.starts[&id].at, Some(1000));
    }

    #[test]
    fn a_job_moves_once_only_when_it_waited_past_its_start_and_another_starts_it_sooner() {
        let b_now = vec![("b".to_string(), starts_in(Some(0)))];
        // Sent to start now, waited past the grace, never foreseen here: moved to b.
        let m =
            to_move("a", &sent(Some(0)), MOVE_AFTER_S, None, "cordoned", &b_now).expect("moved");
        assert_eq!(m.cluster, "b");
        assert!(m.why.starts_with("moved from a (once"), "{}", m.why);
        assert!(
            m.why.contains("sent to start now, it waited 5m"),
            "{}",
            m.why
        );
        assert!(m.why.contains("(cordoned)"), "{}", m.why);
        assert!(m.why.contains("sent to b: starts now there"), "{}", m.why);
        // Not yet past the grace.
        assert_eq!(
            to_move("a", &sent(Some(0)), MOVE_AFTER_S - 1, None, "x", &b_now),
            None
        );
        // Sent expecting an hour's wait: it waits that hour first.
        assert_eq!(
            to_move(
                "a",
                &sent(Some(3600)),
                3600 + MOVE_AFTER_S - 1,
                None,
                "x",
                &b_now
            ),
            None
        );
        assert!(to_move(
            "a",
            &sent(Some(3600)),
            3600 + MOVE_AFTER_S,
            None,
            "x",
            &b_now
        )
        .is_some());
        // Here it starts soon enough after all: it stays.
        assert_eq!(
            to_move("a", &sent(Some(0)), 900, Some(MOVE_GAIN_S), "x", &b_now),
            None
        );
        assert!(to_move("a", &sent(Some(0)), 900, Some(MOVE_GAIN_S + 1), "x", &b_now).is_some());
        // Elsewhere it would start no sooner, or never: it stays.
        let b_later = vec![("b".to_string(), starts_in(Some(7200)))];
        assert_eq!(
            to_move("a", &sent(Some(0)), 900, Some(3600), "x", &b_later),
            None
        );
        let b_never = vec![("b".to_string(), starts_in(None))];
        assert_eq!(to_move("a", &sent(Some(0)), 900, None, "x", &b_never), None);
        let b_refuses = vec![("b".to_string(), Err("no project ml".to_string()))];
        assert_eq!(
            to_move("a", &sent(Some(0)), 900, None, "x", &b_refuses),
            None
        );
        // Moved once already, or never sent: it stays.
        let mut moved = sent(Some(0));
        moved.moved_from = Some("c".into());
        assert_eq!(to_move("a", &moved, 900, None, "x", &b_now), None);
        let here = JobSpec::train("j", "ml", "train", 1);
        assert_eq!(to_move("a", &here, 900, None, "x", &b_now), None);
        // A cluster that already has a job of that name takes nothing.
        let mut exists = starts_in(Some(0)).unwrap();
        exists.exists = true;
        assert_eq!(
            to_move(
                "a",
                &sent(Some(0)),
                900,
                None,
                "x",
                &[("b".into(), Ok(exists))]
            ),
            None
        );
    }

    /// A job whose file asks for another cluster, or for `auto`, is not started where
    /// it was applied while one maar runs several clusters, before the federation
    /// decides: held (no cycle tries it, however much room), its reason saying so,
    /// explain offering no fix or start; kept by the federation it queues; alone the
    /// ask changes nothing; one naming this cluster, or sent here, starts at once.
    #[test]
    fn a_job_asking_for_another_cluster_waits_for_the_federation_not_the_queue() {
        use crate::input::Observation;
        use crate::testkit::*;
        let mut c = train_cluster();
        add_train_node(&mut c, "n1", "a100", 8);
        let mut core = Core::new(c);
        core.set_federation(Some("east".into()));
        let asking = |name: &str, cluster: &str| {
            let mut s = JobSpec::train(name, "p", "train", 1);
            s.cluster = Some(cluster.into());
            s
        };
        submit_settled(&mut core, asking("to-west", "west"));
        submit_settled(&mut core, asking("auto", "auto"));
        submit_settled(&mut core, asking("here", "east"));
        let mut sent = asking("sent", "west");
        sent.dispatched = Some("sent to east: starts now there".into());
        submit_settled(&mut core, sent);
        let phase = |core: &Core, name: &str| {
            let c = core.cluster();
            c.jobs[c.job_id(name).unwrap() as usize].phase
        };
        let reason = |core: &Core, name: &str| {
            let c = core.cluster();
            c.jobs[c.job_id(name).unwrap() as usize].reason.to_string()
        };
        assert_eq!(phase(&core, "p/here"), Phase::Running);
        assert_eq!(phase(&core, "p/sent"), Phase::Running);
        for _ in 0..3 {
            crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
        }
        assert_eq!(phase(&core, "p/to-west"), Phase::Pending);
        assert_eq!(phase(&core, "p/auto"), Phase::Pending);
        assert_eq!(
            reason(&core, "p/to-west"),
            "waiting to be sent to cluster west (crater.ai/cluster: west); it does not run in east"
        );
        assert!(reason(&core, "p/auto")
            .starts_with("waiting for the federation to send it where it starts first"));
        // Explain: the reason first, no fix, no start, no queue place.
        let c = core.cluster();
        let ex = c.explain(c.job_id("p/to-west").unwrap());
        assert_eq!(ex.reason, reason(&core, "p/to-west"));
        assert!(ex.suggestions.is_empty(), "{:?}", ex.suggestions);
        assert_eq!(ex.starts, None);
        assert_eq!(ex.queue_position, None);
        // Its quota and nodes are said as what it would meet were it kept here.
        assert!(ex.held);
        let text = ex.to_string();
        let kept = text
            .find("If kept:   were it kept here (`maar keep p/to-west`), it would meet:")
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            kept < text.find("Quota:").unwrap() && kept < text.find("Nodes:").unwrap(),
            "{text}"
        );
        let here = c.explain(c.job_id("p/here").unwrap());
        assert!(
            !here.held && !here.to_string().contains("If kept"),
            "{here}"
        );
        // The forecast of every job gives it no start (nothing here will start it).
        let f = c.forecast(crate::forecast::Reach::default(), None);
        assert!(!f.starts.contains_key(&c.job_id("p/to-west").unwrap()));
        // The views say which the federation is to send.
        let snap = c.snapshot();
        let to_send = |name: &str| {
            snap.jobs
                .iter()
                .find(|j| j.name == name)
                .and_then(|j| j.to_send.clone())
        };
        assert_eq!(to_send("to-west").as_deref(), Some("west"));
        assert_eq!(to_send("auto").as_deref(), Some("auto"));
        assert_eq!(to_send("sent"), None);
        // A prospect here is of the job as the federation would send it: not held.
        let p = core.prospect(&asking("probe", "auto")).unwrap();
        assert_eq!(p.start_in, Some(0), "{p:?}");
        // The named cluster refuses it: still held, the refusal its reason, an event.
        let refused = "its file asks for cluster west (crater.ai/cluster), which refuses it: no pool train there";
        // The federation's decision, and the event it leaves.
        let decide = |core: &mut Core, job: &str, kept: bool, why: &str, event: &str| {
            let (job, why) = (job.to_string(), why.to_string());
            let out = core.apply(if kept {
                Input::Command {
                    actor: Actor::system("federation"),
                    command: crate::command::Command::Keep {
                        job,
                        why: Some(why),
                    },
                }
            } else {
                Input::Observe(Observation::NotSent { job, why })
            });
            assert!(out.is_ok(), "{:?}", out.result);
            assert!(
                out.events.iter().any(|e| e.reason == event),
                "{:?}",
                out.events
            );
        };
        decide(&mut core, "p/to-west", false, refused, "NotSent");
        crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
        assert_eq!(phase(&core, "p/to-west"), Phase::Pending);
        assert_eq!(reason(&core, "p/to-west"), refused);
        // `auto` left here: it queues and starts; the view no longer asks to send it.
        decide(
            &mut core,
            "p/auto",
            true,
            "no other cluster starts it sooner",
            "KeptHere",
        );
        crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
        assert_eq!(phase(&core, "p/auto"), Phase::Running);
        assert_eq!(
            core.cluster()
                .snapshot()
                .jobs
                .iter()
                .find(|j| j.name == "auto")
                .and_then(|j| j.to_send.clone()),
            None
        );
        // A reader of the state file sees what the engine sees: kept stays kept, the
        // held job held with the reason it was told (no start, no queue place).
        let back = Cluster::restore(core.checkpoint()).expect("restored");
        assert!(back.jobs[back.job_id("p/auto").unwrap() as usize].kept);
        let west = back.job_id("p/to-west").unwrap();
        assert!(back.held_for_federation(west));
        assert_eq!(&*back.jobs[west as usize].reason, refused);
        assert_eq!(back.explain(west).starts, None);
        let json: crate::checkpoint::ClusterState =
            serde_json::from_str(&core.cluster().checkpoint_json(false)).unwrap();
        assert_eq!(json.federation.as_deref(), Some("east"));
        // Alone, the ask changes nothing: the held job queues and starts.
        core.set_federation(None);
        crate::kit::Bare::settle(&mut core, &mut Vec::new(), &mut Vec::new());
        assert_eq!(phase(&core, "p/to-west"), Phase::Running);
    }

    /// An operator (or the federation, recorded as a command) keeps a held job here:
    /// it queues and starts; a job not held has nothing to keep.
    #[test]
    fn keep_runs_a_held_job_here_and_is_said_of_one_not_held() {
        use crate::testkit::*;
        let mut c = train_cluster();
        add_train_node(&mut c, "n1", "a100", 8);
        let mut core = Core::new(c);
        core.set_federation(Some("east".into()));
        let mut s = JobSpec::train("j", "p", "train", 1);
        s.cluster = Some("west".into());
        submit_settled(&mut core, s);
        let id = core.cluster().job_id("p/j").unwrap();
        assert!(core.cluster().held_for_federation(id));
        let keep = |core: &mut Core| {
            let out = core.apply(Input::Command {
                actor: Actor::system("alice"),
                command: crate::command::Command::Keep {
                    job: "p/j".into(),
                    why: None,
                },
            });
            crate::kit::Bare::settle(core, &mut Vec::new(), &mut Vec::new());
            out
        };
        let out = keep(&mut core);
        assert!(
            out.result
                .as_ref()
                .unwrap()
                .contains("kept in east by alice"),
            "{:?}",
            out.result
        );
        assert_eq!(core.cluster().jobs[id as usize].phase, Phase::Running);
        let again = keep(&mut core);
        assert!(again
            .result
            .unwrap()
            .contains("not held for the federation: nothing to keep"));
    }
}
