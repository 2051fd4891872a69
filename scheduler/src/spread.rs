//! PodTopologySpread's counts kept from one question to the next: the placed pods a
//! spread constraint counts, per domain, brought up to date from the placements made
//! and released since. Counted afresh for each pod, the thousand replicas of one
//! Deployment with a spread constraint each counted all the others placed before
//! them (quadratic in the pods: a third of a 5,000-pod cycle). A cache the cluster
//! keeps, below the rules that read it; in debug builds every answer is checked
//! against a fresh count (see `interpod`).

use std::sync::Arc;

use crate::jobs::Jobs;
use crate::model::{JobId, JobSpec, NodeId};
use crate::rules::{LabelIndex, LabelSelector};
use crate::topology::Picked;

/// Placements kept in the log at most; then the log and every count are dropped (the
/// next question counts afresh). What every count has taken in is dropped from the
/// log as they are asked, so it seldom holds many (each entry holds its job's spec).
pub(crate) const LOG_KEPT: usize = 4096;
/// Counts kept at most (the oldest is dropped for a new one).
const KEPT: usize = 16;

/// The counts, and the placements made (`true`) and released since the oldest of them
/// was brought up to date. A copy of the cluster (a what-if, a forecast's) starts
/// without: it is a cache, and copies are made often.
#[derive(Debug, Default)]
pub(crate) struct SpreadCounts {
    /// Placements noted in all; `log` holds the last of them.
    noted: u64,
    log: Vec<(Arc<JobSpec>, NodeId, bool)>,
    kept: Vec<Counted>,
}

impl Clone for SpreadCounts {
    fn clone(&self) -> Self {
        SpreadCounts::default()
    }
}

/// One constraint's counts: the pods of `project` that `selector` matches, per domain
/// of the nodes `picked` (one topology key's domains of the nodes a job's node
/// selector and node affinity pick, as the topology cache gave them: the same
/// answer, not an equal one, so that nodes relabelled or joined since, which make
/// the cache answer afresh, count afresh here too).
#[derive(Debug)]
struct Counted {
    project: String,
    selector: LabelSelector,
    picked: Arc<[Option<u32>]>,
    /// Placements noted when last brought up to date.
    at: u64,
    /// By domain index.
    counts: Vec<u64>,
}

/// Whether a spread constraint of a job in `project` with `selector` counts a pod of
/// the job `of`.
fn counts_pod(project: &str, selector: &LabelSelector, of: &JobSpec) -> bool {
    of.project == project && selector.matches(&of.rules.labels)
}

impl SpreadCounts {
    /// Placements in the log now.
    #[cfg(test)]
    pub(crate) fn logged(&self) -> usize {
        self.log.len()
    }

    /// A replica of a job placed (`added`) or released on node `n`.
    pub(crate) fn note(&mut self, spec: &Arc<JobSpec>, n: NodeId, added: bool) {
        self.noted += 1;
        // Nothing kept: nothing to bring up to date.
        if self.kept.is_empty() {
            return;
        }
        if self.log.len() >= LOG_KEPT {
            self.log.clear();
            self.kept.clear();
            return;
        }
        self.log.push((spec.clone(), n, added));
    }

    /// The placed pods a spread constraint of a job in `project` with `selector`
    /// counts per domain of `picked` (the nodes the job's node selector and node
    /// affinity pick, by their domains of the constraint's key), the job's own pods
    /// among them.
    pub(crate) fn count(
        &mut self,
        jobs: &Jobs,
        by_label: &LabelIndex,
        project: &str,
        selector: &LabelSelector,
        picked: &Picked,
    ) -> Vec<u64> {
        let found = self.kept.iter().position(|c| {
            Arc::ptr_eq(&c.picked, &picked.of) && c.project == project && c.selector == *selector
        });
        let from = self.noted - self.log.len() as u64;
        match found {
            Some(i) if self.kept[i].at >= from => {
                let c = &mut self.kept[i];
                for (of, n, added) in &self.log[(c.at - from) as usize..] {
                    let Some(d) = picked.of[*n as usize] else {
                        continue;
                    };
                    if counts_pod(project, selector, of) {
                        let k = &mut c.counts[d as usize];
                        *k = if *added { *k + 1 } else { k.saturating_sub(1) };
                    }
                }
                c.at = self.noted;
                let counts = c.counts.clone();
                // What every kept count has taken in is not needed again.
                let done = self.kept.iter().map(|c| c.at).min().unwrap_or(self.noted);
                let taken = (done.saturating_sub(from) as usize).min(self.log.len());
                self.log.drain(..taken);
                counts
            }
            found => {
                if let Some(i) = found {
                    self.kept.remove(i);
                }
                let counts = fresh(jobs, by_label, project, selector, picked);
                if self.kept.is_empty() {
                    // Nothing was kept, so nothing was logged: the log starts here.
                    self.log.clear();
                }
                if self.kept.len() >= KEPT {
                    self.kept.remove(0);
                }
                self.kept.push(Counted {
                    project: project.to_string(),
                    selector: selector.clone(),
                    picked: picked.of.clone(),
                    at: self.noted,
                    counts: counts.clone(),
                });
                counts
            }
        }
    }
}

/// The placed pods counted afresh: the jobs the label index finds for the selector
/// (every job when it cannot narrow them).
fn fresh(
    jobs: &Jobs,
    by_label: &LabelIndex,
    project: &str,
    selector: &LabelSelector,
    picked: &Picked,
) -> Vec<u64> {
    let mut counts = vec![0; picked.names.len()];
    let mut add = |j: &crate::model::Job| {
        if j.placements.is_empty() || !counts_pod(project, selector, &j.spec) {
            return;
        }
        for p in &j.placements {
            if let Some(d) = picked.of[p.node as usize] {
                counts[d as usize] += 1;
            }
        }
    };
    let mut ids: Vec<JobId> = Vec::new();
    match by_label.candidates(selector, &mut ids) {
        Some(()) => {
            ids.sort_unstable();
            ids.dedup();
            ids.iter().filter_map(|&id| jobs.get(id)).for_each(&mut add)
        }
        None => jobs.iter_unordered().for_each(&mut add),
    }
    counts
}
