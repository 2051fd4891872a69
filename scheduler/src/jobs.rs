//! The job table: live jobs and the most recently ended ones, by id.
//!
//! Ids are handed out in submission order and never reused, so iteration is in
//! submission order and a stale id (a job that ended long ago and was dropped) finds
//! nothing rather than another job. Ended jobs beyond the retention are dropped from
//! memory (their history stays in the event log and the durable record), so memory and
//! per-cycle work follow the live cluster, not everything ever submitted.

use std::ops::{Index, IndexMut};
use std::sync::Arc;

use crate::model::{Job, JobId};

type IdMap<V> = crate::fxhash::FxHashMap<JobId, V>;

#[derive(Clone, Debug, Default)]
pub struct Jobs {
    /// Shared with the table's copies (a prospect's, a forecast's) until one of them
    /// changes a job: copying a table of 50,000 jobs copies pointers, not jobs.
    map: IdMap<Arc<Job>>,
    /// The held ids in order (for iteration in submission order), a persistent set
    /// that a copy shares.
    ids: imbl::OrdSet<JobId>,
    next: JobId,
}

impl Jobs {
    /// The job with this id, if it is still held.
    pub fn get(&self, id: JobId) -> Option<&Job> {
        self.map.get(&id).map(|j| &**j)
    }

    /// Held jobs in submission order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Job> + '_ {
        self.ids.iter().map(|id| &*self.map[id])
    }

    /// Held jobs in no particular order (where order does not matter, quicker than
    /// [`Jobs::iter`]).
    pub(crate) fn iter_unordered(&self) -> impl Iterator<Item = &Job> + '_ {
        self.map.values().map(|j| &**j)
    }

    /// How many jobs are held (live and recently ended).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The id the next submitted job gets.
    pub fn next_id(&self) -> JobId {
        self.next
    }

    pub(crate) fn insert(&mut self, job: Job) {
        self.next = self.next.max(job.id.saturating_add(1));
        self.ids.insert(job.id);
        self.map.insert(job.id, Arc::new(job));
    }

    pub(crate) fn remove(&mut self, id: JobId) -> Option<Job> {
        self.ids.remove(&id);
        self.map
            .remove(&id)
            .map(|j| Arc::try_unwrap(j).unwrap_or_else(|shared| Job::clone(&shared)))
    }

    /// Rebuilds the table from stored jobs and the next id.
    pub(crate) fn from_parts(jobs: Vec<Job>, next: JobId) -> Jobs {
        let mut t = Jobs {
            map: IdMap::default(),
            ids: imbl::OrdSet::new(),
            next,
        };
        for j in jobs {
            t.insert(j);
        }
        t
    }
}

impl Index<usize> for Jobs {
    type Output = Job;
    fn index(&self, i: usize) -> &Job {
        match self.map.get(&(i as JobId)) {
            Some(j) => j,
            None => panic!("job {i} is not held (never submitted, or ended and dropped)"),
        }
    }
}

impl IndexMut<usize> for Jobs {
    fn index_mut(&mut self, i: usize) -> &mut Job {
        match self.map.get_mut(&(i as JobId)) {
            // A copy's job is copied the first time it changes.
            Some(j) => Arc::make_mut(j),
            None => panic!("job {i} is not held (never submitted, or ended and dropped)"),
        }
    }
}

impl<'a> IntoIterator for &'a Jobs {
    type Item = &'a Job;
    type IntoIter = Box<dyn DoubleEndedIterator<Item = &'a Job> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}
