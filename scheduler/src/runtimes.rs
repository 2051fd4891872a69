//! The runtimes of ended jobs, by kind: what start-time forecasts (`forecast.rs`) use
//! for a running job without its own estimate. Plain data kept in the cluster's state
//! (and its checkpoints), below the forecast that reads it, with the words of what a
//! forecast predicts by ([`Predictor`], [`Basis`]) and a running job's end as the
//! cluster keeps them ([`End`]).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::model::*;

/// Where an estimated start comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Every end it waits for is a job's own runtime estimate (or it starts now).
    Estimate,
    /// Some end it waits for is predicted from the durations of earlier jobs.
    History,
    /// It can never run as asked.
    Never,
    /// It waits for something no estimate or history foresees (a job without either,
    /// a repair, a quota change), or for longer than the forecast looks ahead.
    Unknown,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Estimate => "estimate",
            Basis::History => "history",
            Basis::Never => "never",
            Basis::Unknown => "unknown",
        }
    }
}

/// What predicts a running job's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predictor {
    /// The job's own estimate, else its kind's history (maar's).
    EstimateThenHistory,
    /// Only the job's own estimate (user-declared runtimes, the baseline).
    Estimate,
    /// Only the average of the last two similar runs (Tsafrir et al.).
    History,
}

/// A running job's expected end: (time, job, its start epoch, basis).
pub(crate) type End = (u64, JobId, u32, Basis);

/// How many runs of a kind of job are kept.
const KEPT: usize = 4;
/// Kinds of job kept at most (the oldest-recorded kind goes first).
const KINDS: usize = 10_000;

/// The durations of the jobs that ended well, by kind (project, image and command,
/// shape): what predicts how long a running job without its own estimate will run,
/// and how much GPU memory per card it used. Kept in checkpoints, so in the state file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Runtimes {
    by_kind: BTreeMap<String, Kind>,
    /// Recordings so far (orders the kinds, for the bound).
    recorded: u64,
}

/// The last runs of one kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Kind {
    /// Durations in seconds, oldest first.
    runs: VecDeque<u64>,
    /// The most GPU memory per card each run used (bytes), oldest first; only runs
    /// that asked for card memory and reported usage.
    peaks: VecDeque<u64>,
    /// When the kind was last recorded ([`Runtimes::recorded`]).
    last: u64,
}

fn keep(v: &mut VecDeque<u64>, x: u64) {
    v.push_back(x);
    while v.len() > KEPT {
        v.pop_front();
    }
}

impl Runtimes {
    /// The kind of a job: its project, what it runs and its shape. Jobs that differ
    /// in any of these are not taken to run alike.
    pub fn kind(spec: &JobSpec) -> String {
        format!(
            "{}|{}|{}|{}",
            spec.project,
            spec.image,
            spec.command.join(" "),
            spec.shape_with(1)
        )
    }

    /// A job of this kind ran `secs` seconds and ended well, having used at most
    /// `peak` bytes of GPU memory on a card where that is known.
    pub fn record(&mut self, spec: &JobSpec, secs: u64, peak: Option<u64>) {
        self.recorded += 1;
        let k = self.by_kind.entry(Self::kind(spec)).or_default();
        keep(&mut k.runs, secs);
        if let Some(p) = peak {
            keep(&mut k.peaks, p);
        }
        k.last = self.recorded;
        if self.by_kind.len() > KINDS {
            // The kind recorded longest ago goes (rare: a scan only past the bound).
            if let Some(old) = self
                .by_kind
                .iter()
                .min_by_key(|(_, k)| k.last)
                .map(|(name, _)| name.clone())
            {
                self.by_kind.remove(&old);
            }
        }
    }

    /// The most GPU memory per card the last runs of this kind used, and how many
    /// runs that is.
    pub fn peak(&self, spec: &JobSpec) -> Option<(u64, usize)> {
        let k = self.by_kind.get(&Self::kind(spec))?;
        k.peaks.iter().max().map(|&m| (m, k.peaks.len()))
    }

    /// How many runs were recorded: a different number, a different history.
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded
    }

    /// The average of the last two runs of this kind (one, if only one ended).
    pub fn predict(&self, spec: &JobSpec) -> Option<u64> {
        let runs = &self.by_kind.get(&Self::kind(spec))?.runs;
        let last: Vec<u64> = runs.iter().rev().take(2).copied().collect();
        (!last.is_empty()).then(|| last.iter().sum::<u64>() / last.len() as u64)
    }
}
