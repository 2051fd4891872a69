//! What makes two queued jobs alike for placement within one cycle. A job's asks (its
//! size and everything `fit` reads of its spec) are interned once and the number kept
//! on the job, since a held job's spec does not change: a cycle then tells a job's
//! shape by a few integers instead of hashing and comparing its lists for every job
//! in the queue (most of a long queue's cost when few jobs can start).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::fxhash::FxHashMap;
use crate::model::{Affinity, AsksCache, Job, JobSpec, PoolId};
use crate::rules::PodRules;

/// Everything of a job's spec that placement reads, in full (interned, so two jobs
/// share a number only when these are equal).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Asks {
    count: u32,
    mem: Option<u64>,
    models: Vec<String>,
    shared: bool,
    milli: Option<u32>,
    cpu: u64,
    memory: u64,
    disk: u64,
    affinity: Affinity,
    node_selector: BTreeMap<String, String>,
    vendor: Option<String>,
    resource: Option<String>,
    rules: PodRules,
}

impl Asks {
    fn of(s: &JobSpec) -> Asks {
        Asks {
            count: s.gpu.count,
            mem: s.gpu.memory_per_card,
            models: s.gpu.models.clone(),
            shared: s.gpu.shared,
            milli: s.gpu.milli,
            cpu: s.cpu_milli,
            memory: s.memory,
            disk: s.disk,
            affinity: s.affinity,
            node_selector: s.node_selector.clone(),
            vendor: s.gpu.vendor.clone(),
            resource: s.gpu.resource.clone(),
            rules: s.rules.clone(),
        }
    }
}

/// The interned asks. Held to a bound: when full it starts afresh under a new epoch,
/// and a number cached on a job under another epoch is looked up again.
///
/// Every table, and every copy of one, has an epoch no other table in the process has
/// had: jobs travel between clusters with their caches (a checkpoint holds the jobs
/// themselves, a forecast copies the cluster and both go on interning), and a number
/// is only trusted by the table that gave it. The epoch's value never decides
/// anything, so the core stays deterministic.
#[derive(Debug)]
pub(crate) struct AsksTable {
    ids: FxHashMap<Asks, u32>,
    epoch: u32,
    /// The epochs of the tables this one was copied from (nearest first, a few), each
    /// with how many numbers it had then: the copy took those numbers along, so a
    /// number cached under one of them and below that count means the same asks here,
    /// and a copy's jobs are not taken for change (copied) to look theirs up again.
    inherited: Vec<(u32, u32)>,
}

/// How many copies back a table trusts its ancestors' numbers.
const INHERITED: usize = 4;

/// Epochs handed out so far (0 is never one: a job's empty cache).
static EPOCHS: AtomicU32 = AtomicU32::new(1);

fn fresh_epoch() -> u32 {
    loop {
        let e = EPOCHS.fetch_add(1, Ordering::Relaxed);
        if e != 0 {
            return e;
        }
    }
}

impl Default for AsksTable {
    fn default() -> Self {
        AsksTable {
            ids: FxHashMap::default(),
            epoch: fresh_epoch(),
            inherited: Vec::new(),
        }
    }
}

impl Clone for AsksTable {
    /// The same numbers under a new epoch, trusting those cached under this one (and
    /// its ancestors) that it had when copied.
    fn clone(&self) -> Self {
        let mut inherited = Vec::with_capacity(INHERITED);
        inherited.push((self.epoch, self.ids.len() as u32));
        inherited.extend(self.inherited.iter().take(INHERITED - 1));
        AsksTable {
            ids: self.ids.clone(),
            epoch: fresh_epoch(),
            inherited,
        }
    }
}

/// Distinct asks held before the table starts afresh.
const MAX_ASKS: usize = 1 << 16;

impl AsksTable {
    /// Job `j`'s asks number as it holds it, if interned in this table's epoch.
    pub(crate) fn cached(&self, j: &Job) -> Option<AsksCache> {
        self.cached_value(j.asks)
    }

    /// As [`AsksTable::cached`], for a copy of a job's number (a queue key's).
    pub(crate) fn cached_value(&self, a: AsksCache) -> Option<AsksCache> {
        if a.epoch == self.epoch {
            return Some(a);
        }
        // A number from before the copy: the same here, told under this epoch (so
        // jobs alike share one shape key whichever table numbered them).
        self.inherited
            .iter()
            .any(|&(e, n)| e == a.epoch && a.id < n)
            .then_some(AsksCache {
                epoch: self.epoch,
                ..a
            })
    }

    /// Job `j`'s asks number (and whether its pod-level rules read what is placed).
    pub(crate) fn intern(&mut self, j: &mut Job) -> AsksCache {
        if let Some(a) = self.cached(j) {
            return a;
        }
        if self.ids.len() >= MAX_ASKS {
            self.ids.clear();
            self.epoch = fresh_epoch();
            self.inherited.clear();
        }
        let next = self.ids.len() as u32;
        let id = *self.ids.entry(Asks::of(&j.spec)).or_insert(next);
        j.asks = AsksCache {
            epoch: self.epoch,
            id,
            looks_at_pods: j.spec.rules.looks_at_pods(),
        };
        j.asks
    }
}

/// A queued job's shape in one cycle: its pool, its asks, how many replicas are
/// placed together, and whether the backfill reservation's nodes are avoided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ShapeKey {
    pool: Option<PoolId>,
    epoch: u32,
    asks: u32,
    replicas: u32,
    avoid: bool,
}

impl ShapeKey {
    /// (pool, asks epoch, asks number, replicas), and whether it keeps off the
    /// reservation's nodes.
    pub(crate) fn parts(&self) -> ((Option<PoolId>, u32, u32, u32), bool) {
        (
            (self.pool, self.epoch, self.asks, self.replicas),
            self.avoid,
        )
    }

    pub(crate) fn new(pool: Option<PoolId>, asks: AsksCache, replicas: u32, avoid: bool) -> Self {
        ShapeKey {
            pool,
            epoch: asks.epoch,
            asks: asks.id,
            replicas,
            avoid,
        }
    }
}

/// A per-cycle map by job shape. An answer for a job whose pod-level rules (pod
/// affinity, spread, host ports) read what is placed holds only while nothing was
/// placed or taken back since (`gen`: the cluster's usage generation).
pub(crate) struct ShapeMap<V> {
    map: FxHashMap<ShapeKey, (u64, V)>,
}

impl<V> ShapeMap<V> {
    pub(crate) fn new() -> Self {
        ShapeMap {
            map: FxHashMap::default(),
        }
    }

    pub(crate) fn get(&self, k: &ShapeKey, looks_at_pods: bool, gen: u64) -> Option<&V> {
        self.map
            .get(k)
            .filter(|(g, _)| !looks_at_pods || *g == gen)
            .map(|(_, v)| v)
    }

    pub(crate) fn insert(&mut self, k: ShapeKey, gen: u64, v: V) {
        self.map.insert(k, (gen, v));
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, f: impl FnOnce(&mut JobSpec)) -> Job {
        let mut c = crate::Cluster::new(Default::default());
        let mut spec = JobSpec::train(&format!("j{id}"), "p", "train", 1);
        f(&mut spec);
        let id = c.submit(spec).expect("submitted");
        c.jobs[id as usize].clone()
    }

    #[test]
    fn alike_jobs_share_a_number_and_any_difference_parts_them() {
        let mut t = AsksTable::default();
        let mut a = job(1, |_| {});
        let mut b = job(2, |_| {});
        let mut c = job(3, |s| {
            s.node_selector.insert("disk".into(), "ssd".into());
        });
        let mut d = job(4, |s| {
            s.rules.labels.insert("app".into(), "x".into());
        });
        let mut e = job(5, |s| s.gpu.models = vec!["a100".into()]);
        let ids: Vec<u32> = [&mut a, &mut b, &mut c, &mut d, &mut e]
            .into_iter()
            .map(|j| t.intern(j).id)
            .collect();
        assert_eq!(ids[0], ids[1]);
        let mut distinct = ids.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "{ids:?}");
        // Kept on the job: asked again, the same number without a lookup.
        assert_eq!(t.intern(&mut a).id, ids[0]);
    }

    #[test]
    fn a_number_is_trusted_only_by_the_table_that_gave_it() {
        // A job interned by one table, then met by another that numbered other asks
        // first (as a restored cluster meets the jobs of its checkpoint).
        let mut first = AsksTable::default();
        let mut a = job(1, |s| s.cpu_milli = 7_000);
        let ka = first.intern(&mut a);
        let mut second = AsksTable::default();
        let mut b = job(2, |s| s.cpu_milli = 9_000);
        let kb = second.intern(&mut b);
        assert_eq!(ka.id, kb.id, "both tables start at number 0");
        let again = second.intern(&mut a);
        assert_ne!(
            ShapeKey::new(None, again, 1, false),
            ShapeKey::new(None, kb, 1, false),
            "unlike asks share no shape in the second table"
        );
        // A copy goes its own way: what it numbers next is not what the original does.
        let mut copy = second.clone();
        let mut c = job(3, |s| s.cpu_milli = 11_000);
        let mut d = job(4, |s| s.cpu_milli = 13_000);
        let kc = copy.intern(&mut c);
        let kd = second.intern(&mut d);
        assert_ne!(
            ShapeKey::new(None, kc, 1, false),
            ShapeKey::new(None, kd, 1, false)
        );
        // What the original numbered before the copy, the copy trusts (the job is not
        // looked up again, so not changed), under the copy's epoch: a job it numbers
        // itself with the same asks shares its shape key.
        let before = (b.asks.epoch, b.asks.id);
        let kb_copy = copy.cached(&b).expect("numbered before the copy");
        assert_eq!((b.asks.epoch, b.asks.id), before);
        assert_eq!(kb_copy.epoch, copy.epoch);
        assert_eq!(kb_copy.id, kb.id);
        let mut b2 = job(5, |s| s.cpu_milli = 9_000);
        b2.asks = Default::default();
        assert_eq!(
            ShapeKey::new(None, copy.intern(&mut b2), 1, false),
            ShapeKey::new(None, kb_copy, 1, false)
        );
        // What either numbered after the copy, the other does not trust: the same
        // number means other asks there.
        assert_eq!(kd.id, kc.id, "both went on from the same count");
        assert!(copy.cached(&d).is_none());
        assert!(second.cached(&c).is_none());
        // A copy of the copy trusts both the copy's numbers and the original's.
        let grandchild = copy.clone();
        assert_eq!(grandchild.cached(&c).map(|k| k.id), Some(kc.id));
        assert_eq!(grandchild.cached(&b).map(|k| k.id), Some(kb.id));
        assert!(grandchild.cached(&d).is_none());
    }

    #[test]
    fn a_full_table_starts_afresh_and_old_numbers_are_not_trusted() {
        let mut t = AsksTable::default();
        let mut first = job(0, |s| s.cpu_milli = 1);
        let k0 = t.intern(&mut first);
        for i in 1..MAX_ASKS as u32 {
            let mut j = job(i, |s| s.cpu_milli = 1 + i as u64);
            t.intern(&mut j);
        }
        let mut last = job(MAX_ASKS as u32, |s| s.cpu_milli = 10_000_000);
        let k1 = t.intern(&mut last);
        assert_ne!(k0.epoch, k1.epoch);
        // The first job's number came from the old epoch: it is interned again, and a
        // key made from it differs from one made before.
        let again = t.intern(&mut first);
        assert_eq!(again.epoch, k1.epoch);
        assert_ne!(
            ShapeKey::new(None, k0, 1, false),
            ShapeKey::new(None, again, 1, false)
        );
    }
}
