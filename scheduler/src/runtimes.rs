//! The runtimes of ended jobs, by kind: what start-time forecasts (`forecast.rs`) use
//! for a running job without its own estimate. Plain data kept in the cluster's state
//! (and its checkpoints), below the forecast that reads it.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::model::*;

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

    /// The average of the last two runs of this kind (one, if only one ended).
    pub fn predict(&self, spec: &JobSpec) -> Option<u64> {
        let runs = &self.by_kind.get(&Self::kind(spec))?.runs;
        let last: Vec<u64> = runs.iter().rev().take(2).copied().collect();
        (!last.is_empty()).then(|| last.iter().sum::<u64>() / last.len() as u64)
    }
}
