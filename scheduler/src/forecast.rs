//! When a Pending job will start: a forward run of the core on a copy of the
//! cluster. Running jobs end when they are expected to (the job's own estimate,
//! scaled to the cards it runs on; else the average of the last two runs of the same
//! project, image, command and shape, Tsafrir et al.'s predictor), a scheduling cycle
//! runs after each end, and a Pending job's start is the moment it is placed in that
//! run. Jobs not yet submitted are not foreseen: a job arriving later with a higher
//! priority can delay a start, and the accuracy of these estimates is measured
//! (BENCHMARKS.md) rather than assumed.
//!
//! Nothing here guesses: a job whose start depends on a running job with neither an
//! estimate nor a history has no start (`unknown`); a job that can never run as asked
//! says so (`never`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use serde::Serialize;

use crate::cluster::Cluster;
use crate::model::*;

pub(crate) use crate::runtimes::End;
pub use crate::runtimes::{Basis, Predictor, Runtimes};

/// A Pending job's estimated start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Start {
    /// Seconds on the cluster's clock; `None` for `never` and `unknown`.
    pub at: Option<u64>,
    pub basis: Basis,
    /// The running job whose end lets it start, where one does.
    pub after: Option<JobId>,
}

/// Estimated starts of Pending jobs.
#[derive(Clone, Debug, Default)]
pub struct Forecast {
    pub starts: BTreeMap<JobId, Start>,
    /// Cycles run on the copy.
    pub steps: usize,
}

/// A forward run's ends to come, earliest first (ties by job, epoch, basis): the
/// running jobs' ends as the cluster it was copied from keeps them, in order, but
/// those of the jobs changed on the copy since, which are read again with the ends of
/// the jobs the run starts. The same order as one heap of them all, which a debug
/// build checks.
#[derive(Clone)]
struct Ends {
    /// The base's ends, in order (not yet taken to be no earlier than now).
    kept: std::sync::Arc<Vec<End>>,
    /// The next of `kept` to come.
    next: usize,
    /// Jobs whose entries in `kept` are not theirs now.
    changed: crate::fxhash::FxHashSet<JobId>,
    /// The others: those read again, those past due (at now), those of jobs started
    /// by the run.
    more: BinaryHeap<Reverse<End>>,
}

impl Ends {
    /// The ends of `c`'s running jobs, read from `base`'s where `c` is a copy of it
    /// on the same clock and history (else from `c`'s own).
    fn new(c: &Cluster, base: Option<&Cluster>, p: Predictor) -> Ends {
        let base =
            base.filter(|b| b.now == c.now && b.runtimes.recorded() == c.runtimes.recorded());
        let (kept, changed) = match base {
            Some(b) => (b.running_ends(p), c.jobs.changed_since(&b.jobs)),
            None => (c.running_ends(p), Vec::new()),
        };
        let mut more = BinaryHeap::new();
        for &id in &changed {
            if let Some(j) = c.jobs.get(id).filter(|j| j.phase == Phase::Running) {
                if let Some((t, b)) = c.expected_end_by(j, p) {
                    more.push(Reverse((t, id, j.epoch, b)));
                }
            }
        }
        let changed: crate::fxhash::FxHashSet<JobId> = changed.into_iter().collect();
        // Past due: at now, in the order of their jobs.
        let due = kept.partition_point(|e| e.0 <= c.now);
        for e in &kept[..due] {
            if !changed.contains(&e.1) {
                more.push(Reverse((c.now, e.1, e.2, e.3)));
            }
        }
        let ends = Ends {
            kept,
            next: due,
            changed,
            more,
        };
        #[cfg(debug_assertions)]
        {
            let all = c.sorted_ends(|j| c.expected_end_by(j, p));
            let mut copy = ends.clone();
            let mut read = Vec::new();
            while let Some(e) = copy.pop() {
                read.push(e);
            }
            debug_assert_eq!(all, read, "the kept ends differ from the copy's own");
        }
        ends
    }

    /// The next end to come.
    fn peek(&mut self) -> Option<End> {
        while let Some(e) = self.kept.get(self.next) {
            if !self.changed.contains(&e.1) {
                break;
            }
            self.next += 1;
        }
        match (self.kept.get(self.next), self.more.peek()) {
            (Some(&k), Some(&Reverse(m))) => Some(k.min(m)),
            (Some(&k), None) => Some(k),
            (None, Some(&Reverse(m))) => Some(m),
            (None, None) => None,
        }
    }

    fn pop(&mut self) -> Option<End> {
        let e = self.peek()?;
        if self.kept.get(self.next) == Some(&e) {
            self.next += 1;
        } else {
            self.more.pop();
        }
        Some(e)
    }

    fn push(&mut self, e: End) {
        self.more.push(Reverse(e));
    }
}

/// How far a forecast looks ahead, how many ends it runs a cycle after, and what
/// predicts the ends.
#[derive(Clone, Copy, Debug)]
pub struct Reach {
    pub horizon_s: u64,
    pub max_steps: usize,
    pub predictor: Predictor,
    /// Ends within this share of how far ahead they are (percent; at least a minute)
    /// are taken as one step: a start is never said earlier than the ends it waits
    /// for, and at most this much later. Fewer steps, a quicker forecast.
    pub batch_pct: u64,
}

impl Default for Reach {
    fn default() -> Self {
        Reach {
            horizon_s: 14 * 86_400,
            max_steps: 1_024,
            predictor: Predictor::EstimateThenHistory,
            batch_pct: 2,
        }
    }
}

impl Cluster {
    /// When a running job is expected to end, and on what basis, as predictor `p`
    /// says: its own estimate (scaled to the cards it runs on), its kind's history, or
    /// the one and then the other. A job that has already run past its expected end
    /// is taken to end now.
    fn expected_end_by(&self, j: &Job, p: Predictor) -> Option<(u64, Basis)> {
        self.raw_end_by(j, p).map(|(end, b)| (end.max(self.now), b))
    }

    /// [`Cluster::expected_end_by`] before it is taken to be no earlier than now.
    fn raw_end_by(&self, j: &Job, p: Predictor) -> Option<(u64, Basis)> {
        let started = j.started?;
        let own = j.remaining_s.filter(|_| p != Predictor::History);
        match own {
            Some(r) => Some((started + r, Basis::Estimate)),
            None if p == Predictor::Estimate => None,
            // History is of work done on the cards it ran on: scale as an estimate
            // would be.
            None => Some((started + self.runtimes.predict(&j.spec)?, Basis::History)),
        }
    }

    /// Every running job's expected end as predictor `p` says, before it is taken to
    /// be no earlier than now, in order: from the cache where no job and no history
    /// changed since it was read (a forward run starts from them all: 40,000 jobs read
    /// and put in order, a seventh of a prospect on a full cluster).
    pub(crate) fn running_ends(&self, p: Predictor) -> std::sync::Arc<Vec<End>> {
        let key = (self.jobs.gen(), self.runtimes.recorded(), p);
        if let Some((k, ends)) = &*self.ends.borrow() {
            if *k == key {
                return ends.clone();
            }
        }
        let ends = std::sync::Arc::new(self.sorted_ends(|j| self.raw_end_by(j, p)));
        *self.ends.borrow_mut() = Some((key, ends.clone()));
        ends
    }

    /// Every running job's end as `end_of` reads it, in order.
    fn sorted_ends(&self, end_of: impl Fn(&Job) -> Option<(u64, Basis)>) -> Vec<End> {
        let mut ends: Vec<End> = self
            .jobs
            .iter_unordered()
            .filter(|j| j.phase == Phase::Running)
            .filter_map(|j| {
                let (t, b) = end_of(j)?;
                Some((t, j.id, j.epoch, b))
            })
            .collect();
        ends.sort_unstable();
        ends
    }

    /// A job ended well after running `secs` seconds: its kind's history (its
    /// duration, and the GPU memory per card it used where telemetry said). Not on a
    /// forecast's copy, which nobody keeps.
    pub(crate) fn record_runtime(&mut self, id: JobId, secs: u64) {
        if self.quiet {
            return;
        }
        let j = &self.jobs[id as usize];
        let peak = match (j.spec.gpu.memory_per_card, j.peak_pct) {
            (Some(m), p @ 1..) => Some(m / 100 * p.min(100) as u64),
            _ => None,
        };
        let spec = j.spec.clone();
        self.runtimes.record(&spec, secs, peak);
    }

    /// Estimated starts of every Pending job (or of `job` alone, when given: the run
    /// stops when it starts), by a forward run on a copy: see the module's
    /// documentation.
    pub fn forecast(&self, reach: Reach, job: Option<JobId>) -> Forecast {
        // Nothing waits: nothing to foresee (and no copy to make).
        if self.pending.is_empty() {
            return Forecast::default();
        }
        self.warm_node_caches();
        self.clone()
            .forecast_in_place(reach, job, Some(self), false)
    }

    /// [`Cluster::forecast`] run on this cluster itself, which it leaves as the forward
    /// run ends it: for a copy nobody keeps (a prospect's), spared a second copy.
    /// `base`: the cluster it was copied from, whose running jobs' ends (kept there,
    /// [`Cluster::running_ends`]) it reads but for the jobs changed since.
    /// `first_done`: the cycle at the current instant, with which a forward run
    /// starts, has already run on this copy (a prospect's that stands for it).
    pub(crate) fn forecast_in_place(
        &mut self,
        reach: Reach,
        job: Option<JobId>,
        base: Option<&Cluster>,
        first_done: bool,
    ) -> Forecast {
        let c = self;
        c.quiet = true;
        c.run_on = false;
        // Every step's cycle runs whole, even on a prospect's copy that ended its first
        // one after the asked job's turn: a job behind it may backfill at a step and
        // hold a card it would have had at a later one.
        c.word_only = None;
        let now = c.now;
        // The jobs whose starts are told (Pending now), and whether each can never run
        // as asked (its reason as it stands before the run).
        let never = |j: &Job| j.reason.starts_with("can never run");
        let told: std::collections::HashMap<JobId, bool> = match job {
            Some(id) => c
                .jobs
                .get(id)
                .filter(|j| j.phase == Phase::Pending)
                .map(|j| (id, never(j)))
                .into_iter()
                .collect(),
            // (not those held for the federation: no cycle here tries them)
            None => c
                .jobs
                .iter_unordered()
                .filter(|j| j.phase == Phase::Pending && !c.pending_held.contains(&j.id))
                .map(|j| (j.id, never(j)))
                .collect(),
        };
        let mut out = Forecast::default();
        if told.is_empty() {
            return out;
        }
        // Ends to come: (time, job, its start epoch, basis), in that order.
        let mut ends = Ends::new(c, base, reach.predictor);
        let step = |c: &mut Cluster,
                    ends: &mut Ends,
                    out: &mut Forecast,
                    basis: Basis,
                    after: Option<JobId>| {
            let r = c.schedule();
            out.steps += 1;
            for id in r.started {
                if !out.starts.contains_key(&id) && told.contains_key(&id) {
                    out.starts.insert(
                        id,
                        Start {
                            at: Some(c.now),
                            basis,
                            after,
                        },
                    );
                }
                let j = &c.jobs[id as usize];
                if let Some((t, b)) = c.expected_end_by(j, reach.predictor) {
                    ends.push((t, id, j.epoch, b.max(basis)));
                }
            }
        };
        if first_done {
            // (counted as the step it stands for)
            out.steps += 1;
        } else {
            step(c, &mut ends, &mut out, Basis::Estimate, None);
        }
        // Done when the job asked about has started, or every Pending job has: the
        // ends after that change no start (nothing new is foreseen to arrive).
        let done = |out: &Forecast| out.starts.len() == told.len();
        while !done(&out) && out.steps < reach.max_steps {
            let Some((t, ..)) = ends.peek() else {
                break;
            };
            if t > now.saturating_add(reach.horizon_s) {
                break;
            }
            // Ends close together are taken as one step: within a minute, or
            // `batch_pct` of how far ahead they are (so a start is never said earlier
            // than the ends it waits for, and at most that much later).
            let quantum = 60u64.max((t - now) * reach.batch_pct.min(100) / 100);
            let mut batch = Vec::new();
            while let Some(e) = ends.peek() {
                if e.0 > t + quantum {
                    break;
                }
                ends.pop();
                batch.push(e);
            }
            let last = batch.last().map(|e| e.0).unwrap_or(t);
            c.set_time(last);
            let mut basis = Basis::Estimate;
            let mut after = None;
            for (_, id, epoch, b) in batch {
                let j = &c.jobs[id as usize];
                // Preempted in the copy since, or restarted: not this end.
                if j.phase != Phase::Running || j.epoch != epoch {
                    continue;
                }
                c.complete(id, true, "forecast");
                basis = basis.max(b);
                after.get_or_insert(id);
            }
            if after.is_none() {
                continue;
            }
            step(c, &mut ends, &mut out, basis, after);
        }
        for (id, never) in told {
            out.starts.entry(id).or_insert(Start {
                at: None,
                basis: if never { Basis::Never } else { Basis::Unknown },
                after: None,
            });
        }
        out
    }

    /// Writes a forecast's starts into job views (matched by project and name).
    pub fn fill_starts(&self, jobs: &mut [crate::metrics::JobView], f: &Forecast) {
        let by_name: std::collections::HashMap<(&str, &str), &Start> = f
            .starts
            .iter()
            .filter_map(|(&id, s)| {
                let j = self.jobs.get(id)?;
                Some(((j.spec.project.as_str(), j.spec.name.as_str()), s))
            })
            .collect();
        for v in jobs.iter_mut() {
            if v.phase != "Pending" {
                continue;
            }
            if let Some(s) = by_name.get(&(v.project.as_str(), v.name.as_str())) {
                v.expected_start_s = s.at;
                v.expected_start_basis = Some(s.basis.name().to_string());
            }
        }
    }
}

/// A Pending job's expected start in a few characters, for tables: `now`, `40m`,
/// `never`, `?` (unknown); empty when not forecast or not Pending.
pub fn starts_cell(now: u64, at: Option<u64>, basis: Option<&str>) -> String {
    match (at, basis) {
        (Some(t), _) if t <= now => "now".into(),
        (Some(t), Some("history")) => format!("~{}", crate::quantity::fmt_duration(t - now)),
        (Some(t), _) => crate::quantity::fmt_duration(t - now),
        (None, Some("never")) => "never".into(),
        (None, Some(_)) => "?".into(),
        (None, None) => String::new(),
    }
}

/// How often estimated starts came true, per predictor: a hit is a start within 20%
/// of the wait from when the estimate was made, or within 10 minutes of it.
#[derive(Clone, Debug, Default)]
pub struct Accuracy {
    /// Jobs counted (estimated while Pending, started since).
    pub jobs: usize,
    /// Per predictor: estimates that gave a time, and those that came true.
    pub given: Vec<usize>,
    pub hits: Vec<usize>,
}

impl Accuracy {
    pub fn new(predictors: usize) -> Accuracy {
        Accuracy {
            jobs: 0,
            given: vec![0; predictors],
            hits: vec![0; predictors],
        }
    }

    /// A job estimated at `asked` (one estimate per predictor) that started at `real`.
    pub fn add(&mut self, asked: u64, real: u64, estimates: &[Option<u64>]) {
        self.jobs += 1;
        let wait = real.saturating_sub(asked);
        for (i, e) in estimates.iter().enumerate() {
            if let Some(e) = e {
                self.given[i] += 1;
                let err = e.abs_diff(real);
                if err <= 600 || err as f64 <= 0.2 * wait as f64 {
                    self.hits[i] += 1;
                }
            }
        }
    }

    /// A Markdown table, one row per predictor (named in order).
    pub fn table(&self, names: &[&str]) -> String {
        let n = self.jobs;
        let mut out =
            String::from("| predictor | estimate given | within 20% or 10 min |\n|---|---|---|\n");
        for (i, name) in names.iter().enumerate() {
            out.push_str(&format!(
                "| {name} | {} of {n} | {} of {n} ({:.0}%) |\n",
                self.given[i],
                self.hits[i],
                100.0 * self.hits[i] as f64 / n.max(1) as f64
            ));
        }
        out
    }
}
