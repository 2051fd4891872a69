//! The job table: live jobs and the most recently ended ones, by id.
//!
//! Ids are handed out in submission order and never reused, so iteration is in
//! submission order and a stale id (a job that ended long ago and was dropped) finds
//! nothing rather than another job. Ended jobs beyond the retention are dropped from
//! memory (their history stays in the event log and the durable record), so memory and
//! per-cycle work follow the live cluster, not everything ever submitted.
//!
//! The jobs sit in chunks of [`CHUNK`] consecutive ids, each chunk shared (`Arc`)
//! with the table's copies (a prospect's, a forecast's) until one of them changes a
//! job in it, and each job shared the same way: copying or dropping a table of
//! 50,000 jobs touches 800 chunk pointers, not 50,000 jobs (that was a tenth of a
//! prospect's time with a hash map of the jobs). A job is found by its id's chunk and
//! slot, two reads. Chunks before the oldest held job are let go.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};
use std::sync::Arc;

use crate::model::{Job, JobId};

/// Ids per chunk.
const CHUNK: usize = 64;
const SHIFT: u32 = CHUNK.trailing_zeros();

type Chunk = [Option<Arc<Job>>; CHUNK];

#[derive(Clone, Debug, Default)]
pub struct Jobs {
    /// Chunk `i` holds ids `(base + i) * CHUNK ..`; `None`: no job held there.
    chunks: VecDeque<Option<Arc<Chunk>>>,
    /// The first chunk's number.
    base: u32,
    len: usize,
    next: JobId,
    /// Bumped by every change (a job taken for change, added or removed): what a
    /// cache read from the table is keyed by. A copy starts with its original's.
    gen: u64,
}

impl Jobs {
    fn slot(&self, id: JobId) -> Option<(usize, usize)> {
        let c = (id >> SHIFT).checked_sub(self.base)? as usize;
        (c < self.chunks.len()).then_some((c, id as usize & (CHUNK - 1)))
    }

    fn arc(&self, id: JobId) -> Option<&Arc<Job>> {
        let (c, s) = self.slot(id)?;
        self.chunks[c].as_ref()?[s].as_ref()
    }

    /// The job with this id, if it is still held.
    pub fn get(&self, id: JobId) -> Option<&Job> {
        self.arc(id).map(|j| &**j)
    }

    /// Held jobs in submission order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Job> + '_ {
        self.chunks
            .iter()
            .flatten()
            .flat_map(|c| c.iter().flatten().map(|j| &**j))
    }

    /// Held jobs in no particular order (where order does not matter; today the
    /// same walk as [`Jobs::iter`]).
    pub(crate) fn iter_unordered(&self) -> impl Iterator<Item = &Job> + '_ {
        self.iter()
    }

    /// How many jobs are held (live and recently ended).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The id the next submitted job gets.
    pub fn next_id(&self) -> JobId {
        self.next
    }

    /// Changes so far: equal numbers on one table (or on a copy and the table it
    /// was copied from, before either changed) mean the same jobs.
    pub(crate) fn gen(&self) -> u64 {
        self.gen
    }

    /// The ids whose job differs between this table and `base` (changed in either
    /// since one was copied from the other, or held by one only). Jobs are shared
    /// until one side takes them for change, so this reads the chunks' and the
    /// changed chunks' jobs' pointers, not the jobs.
    pub(crate) fn changed_since(&self, base: &Jobs) -> Vec<JobId> {
        let chunk = |t: &Jobs, k: u32| -> Option<Arc<Chunk>> {
            let c = k.checked_sub(t.base)? as usize;
            t.chunks.get(c)?.clone()
        };
        let first = self.base.min(base.base);
        let end = (self.base + self.chunks.len() as u32).max(base.base + base.chunks.len() as u32);
        let mut out = Vec::new();
        for k in first..end {
            let (a, b) = (chunk(self, k), chunk(base, k));
            if let (Some(a), Some(b)) = (&a, &b) {
                if Arc::ptr_eq(a, b) {
                    continue;
                }
            }
            for s in 0..CHUNK {
                let x = a.as_ref().and_then(|c| c[s].as_ref());
                let y = b.as_ref().and_then(|c| c[s].as_ref());
                let same = match (x, y) {
                    (Some(x), Some(y)) => Arc::ptr_eq(x, y),
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    out.push((k << SHIFT) | s as u32);
                }
            }
        }
        out
    }

    pub(crate) fn insert(&mut self, job: Job) {
        self.gen += 1;
        let id = job.id;
        self.next = self.next.max(id.saturating_add(1));
        let chunk = id >> SHIFT;
        if self.chunks.is_empty() {
            self.base = chunk;
        }
        while chunk < self.base {
            self.chunks.push_front(None);
            self.base -= 1;
        }
        let c = (chunk - self.base) as usize;
        if c >= self.chunks.len() {
            self.chunks.resize(c + 1, None);
        }
        let slots = self.chunks[c].get_or_insert_with(|| Arc::new(std::array::from_fn(|_| None)));
        let slot = &mut Arc::make_mut(slots)[id as usize & (CHUNK - 1)];
        if slot.is_none() {
            self.len += 1;
        }
        *slot = Some(Arc::new(job));
    }

    pub(crate) fn remove(&mut self, id: JobId) -> Option<Job> {
        self.gen += 1;
        let (c, s) = self.slot(id)?;
        let slots = self.chunks[c].as_mut()?;
        slots[s].as_ref()?;
        let slots = Arc::make_mut(slots);
        let j = slots[s].take()?;
        self.len -= 1;
        if slots.iter().all(Option::is_none) {
            self.chunks[c] = None;
        }
        // Let go of the chunks before the oldest held job.
        while let Some(None) = self.chunks.front() {
            self.chunks.pop_front();
            self.base += 1;
        }
        while let Some(None) = self.chunks.back() {
            self.chunks.pop_back();
        }
        Some(Arc::try_unwrap(j).unwrap_or_else(|shared| Job::clone(&shared)))
    }

    /// Rebuilds the table from stored jobs and the next id.
    pub(crate) fn from_parts(jobs: Vec<Job>, next: JobId) -> Jobs {
        let mut t = Jobs::default();
        for j in jobs {
            t.insert(j);
        }
        t.next = t.next.max(next);
        t
    }
}

impl Index<usize> for Jobs {
    type Output = Job;
    fn index(&self, i: usize) -> &Job {
        match u32::try_from(i).ok().and_then(|id| self.arc(id)) {
            Some(j) => j,
            None => panic!("job {i} is not held (never submitted, or ended and dropped)"),
        }
    }
}

impl IndexMut<usize> for Jobs {
    fn index_mut(&mut self, i: usize) -> &mut Job {
        let held = u32::try_from(i)
            .ok()
            .and_then(|id| self.slot(id))
            .filter(|&(c, s)| self.chunks[c].as_ref().is_some_and(|k| k[s].is_some()));
        let Some((c, s)) = held else {
            panic!("job {i} is not held (never submitted, or ended and dropped)")
        };
        self.gen += 1;
        // A copy's chunk, and then its job, are copied the first time it changes.
        let slots = Arc::make_mut(self.chunks[c].as_mut().expect("held"));
        Arc::make_mut(slots[s].as_mut().expect("held"))
    }
}

impl<'a> IntoIterator for &'a Jobs {
    type Item = &'a Job;
    type IntoIter = Box<dyn DoubleEndedIterator<Item = &'a Job> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: JobId) -> Job {
        let mut c = crate::testkit::train_cluster();
        let spec = crate::model::JobSpec::train(&format!("j{id}"), "ml", "training", 1);
        let made = c.submit(spec).expect("submitted");
        let mut j = c.jobs[made as usize].clone();
        j.id = id;
        j
    }

    fn ids(t: &Jobs) -> Vec<JobId> {
        t.iter().map(|j| j.id).collect()
    }

    #[test]
    fn jobs_are_found_by_id_walked_in_id_order_and_gone_once_removed() {
        let mut t = Jobs::default();
        // Across chunks, out of order, and below the first chunk.
        for id in [300, 5, 64, 63, 1000, 0] {
            t.insert(job(id));
        }
        assert_eq!(ids(&t), vec![0, 5, 63, 64, 300, 1000]);
        assert_eq!(t.len(), 6);
        assert_eq!(t.next_id(), 1001);
        assert_eq!(t[300].id, 300);
        assert!(t.get(6).is_none() && t.get(5000).is_none() && t.get(u32::MAX).is_none());
        assert_eq!(t.remove(64).map(|j| j.id), Some(64));
        assert!(t.remove(64).is_none(), "once");
        assert!(t.get(64).is_none());
        // The oldest go: their chunks are let go, the rest found as before.
        for id in [0, 5, 63] {
            t.remove(id);
        }
        assert_eq!(ids(&t), vec![300, 1000]);
        assert_eq!(t.chunks.len(), (1000 / 64 - 300 / 64) + 1);
        assert_eq!(t[1000].id, 1000);
        t.remove(1000);
        t.remove(300);
        assert!(t.is_empty() && t.chunks.is_empty());
        assert_eq!(t.next_id(), 1001, "ids are never reused");
    }

    #[test]
    fn a_copy_shares_its_jobs_until_either_side_changes_one() {
        let mut t = Jobs::default();
        for id in 0..200 {
            t.insert(job(id));
        }
        let mut copy = t.clone();
        copy[70].reason = "changed in the copy".into();
        assert_ne!(
            copy[70].reason, t[70].reason,
            "the copy's change is its own"
        );
        assert!(std::ptr::eq(&copy[71], &t[71]), "the rest still shared");
        assert!(!std::ptr::eq(&copy[70], &t[70]));
        copy.remove(10);
        assert!(t.get(10).is_some() && copy.get(10).is_none());
        assert_eq!(t.len(), 200);
        assert_eq!(copy.len(), 199);
        let back: Vec<JobId> = t.iter().rev().map(|j| j.id).take(3).collect();
        assert_eq!(back, vec![199, 198, 197]);
        let rebuilt = Jobs::from_parts(t.iter().cloned().collect(), 500);
        assert_eq!(ids(&rebuilt), ids(&t));
        assert_eq!(rebuilt.next_id(), 500);
    }

    #[test]
    fn a_copy_tells_the_jobs_changed_since_and_every_change_counts() {
        let mut t = Jobs::default();
        for id in 60..300 {
            t.insert(job(id));
        }
        let mut copy = t.clone();
        assert!(copy.changed_since(&t).is_empty());
        assert_eq!(copy.gen(), t.gen(), "a copy starts where its original is");
        let g = copy.gen();
        copy[70].reason = "changed".into();
        assert!(copy.gen() > g, "taking a job for change counts");
        let g = copy.gen();
        copy.remove(299);
        copy.insert(job(5));
        copy.insert(job(400));
        assert!(copy.gen() >= g + 3, "adding and removing count");
        let mut changed = copy.changed_since(&t);
        changed.sort_unstable();
        assert_eq!(changed, vec![5, 70, 299, 400]);
        let mut back = t.changed_since(&copy);
        back.sort_unstable();
        assert_eq!(back, changed, "either way round");
        // The original changing after the copy was made counts too.
        t[100].reason = "changed here".into();
        let mut changed = copy.changed_since(&t);
        changed.sort_unstable();
        assert_eq!(changed, vec![5, 70, 100, 299, 400]);
    }
}
