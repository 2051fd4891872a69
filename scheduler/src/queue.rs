//! The queue's order: aged priority, fair share, submission; one cycle's queue with the
//! keys the quota holds back, decided again as usage changes during the cycle.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::cluster::{Cluster, QueueKey};
use crate::model::*;
use crate::schedule::CycleReport;
use crate::verdict::VerdictKey;

/// A queue item's sort key: (effective priority, share, submitted, job, scale-up).
pub(crate) type QueueItem = (Reverse<i64>, u64, u64, JobId, bool);

/// A verdict key whose jobs the quota refuses at the start of a cycle.
#[derive(Debug)]
struct Held {
    key: VerdictKey,
    /// The project's usage generation the verdict was made at.
    project_gen: u64,
    message: Reason,
}

/// One cycle's queue: the items and their order (a stack, next last), items that
/// joined during the cycle (a min-heap), and the keys held back by quota.
#[derive(Debug, Default)]
pub(crate) struct CycleQueue {
    /// (key, replicas, the job's queue key where it is a queued job: what its turn
    /// reads before the job itself), in no order.
    items: Vec<(QueueItem, u32, Option<QueueKey>)>,
    /// `items`' indexes in order.
    order: Order,
    extra: BinaryHeap<Reverse<(QueueItem, u32)>>,
    held: Vec<Held>,
    shares: Vec<u64>,
    watch: bool,
    left: Left,
}

/// An item with no shape number in [`Left`].
const NO_SHAPE: u32 = u32::MAX;

/// A cycle's items in queue order.
#[derive(Debug)]
enum Order {
    /// Indexes, the next last.
    Stack(Vec<u32>),
    /// Packed keys (the index in the low `bits`), least first: a quiet cycle, which
    /// may end after a few hundred of ten thousand items (see [`Left`]), orders only
    /// those it takes.
    Heap(BinaryHeap<Reverse<u64>>, u32),
}

impl Default for Order {
    fn default() -> Self {
        Order::Stack(Vec::new())
    }
}

impl Order {
    /// A packed key's item index (its low `bits`).
    fn index(k: u64, bits: u32) -> u32 {
        (k & ((1 << bits) - 1)) as u32
    }

    fn peek(&self) -> Option<u32> {
        match self {
            Order::Stack(v) => v.last().copied(),
            Order::Heap(h, bits) => h.peek().map(|k| Order::index(k.0, *bits)),
        }
    }

    fn pop(&mut self) -> Option<u32> {
        match self {
            Order::Stack(v) => v.pop(),
            Order::Heap(h, bits) => h.pop().map(|k| Order::index(k.0, *bits)),
        }
    }

    fn len(&self) -> usize {
        match self {
            Order::Stack(v) => v.len(),
            Order::Heap(h, _) => h.len(),
        }
    }

    /// The indexes still to come, in no order.
    fn each(&self, mut f: impl FnMut(u32)) {
        match self {
            Order::Stack(v) => v.iter().for_each(|&i| f(i)),
            Order::Heap(h, bits) => h.iter().for_each(|k| f(Order::index(k.0, *bits))),
        }
    }
}

/// A quiet cycle's count of the queued jobs still to come, by shape (pool, asks,
/// replicas), so that it ends once every one of them would be passed over on its shape
/// alone: a forecast's cycle, after its few placements found the cluster full again,
/// spent most of its time passing over thousands of jobs one by one. Kept on quiet
/// copies only (a loud cycle words every job's reason), and only exact: a shape counts
/// as done only when the shape key of each of its jobs still to come (near or clear of
/// the backfill reservation's nodes, as that job's runtime bound says) found no room,
/// and a job whose turn is read otherwise (a scale-up, rules that read placed pods,
/// the prospect's own job, asks not numbered) keeps the cycle going until its turn.
#[derive(Debug, Default)]
struct Left {
    on: bool,
    /// By item: its shape's number, or `NO_SHAPE`.
    of: Vec<u32>,
    shapes: Vec<ShapeLeft>,
    by_shape: crate::fxhash::FxHashMap<(Option<PoolId>, u32, u32, u32), u32>,
    /// Items with no shape number still to come.
    other: usize,
    /// Shapes with a job still to come that would not be passed over.
    live: usize,
    /// The shape of the item just taken, until its turn says whether it keeps off the
    /// reservation's nodes.
    taken: Option<u32>,
}

#[derive(Debug)]
struct ShapeLeft {
    /// A job of the shape and its asks (epoch, number): its runtime bound is the shape's.
    rep: JobId,
    asks: (u32, u32),
    left: u32,
    /// Of those left, the ones that would not keep off the reservation's nodes (all of
    /// them while there is no reservation).
    near: u32,
    /// Whether its shape key found no room this cycle, near the reservation's nodes
    /// and clear of them.
    failed_near: bool,
    failed_clear: bool,
}

impl ShapeLeft {
    fn live(&self) -> bool {
        (self.near > 0 && !self.failed_near) || (self.left > self.near && !self.failed_clear)
    }
}

impl Left {
    /// Shape `c` changed by `f`: the count of live shapes follows.
    fn change(&mut self, c: u32, f: impl FnOnce(&mut ShapeLeft)) {
        let s = &mut self.shapes[c as usize];
        let was = s.live();
        f(s);
        match (was, s.live()) {
            (true, false) => self.live -= 1,
            (false, true) => self.live += 1,
            _ => {}
        }
    }

    fn recount(&mut self) {
        self.live = self.shapes.iter().filter(|s| s.live()).count();
    }
}

impl CycleQueue {
    /// The next item in order.
    pub(crate) fn next(&mut self) -> Option<(QueueItem, u32, Option<QueueKey>)> {
        let extra = |r: Reverse<(QueueItem, u32)>| (r.0 .0, r.0 .1, None);
        let last = self.order.peek().map(|i| self.items[i as usize]);
        self.left.taken = None;
        match (last, self.extra.peek()) {
            (Some(a), Some(Reverse(b))) if (b.0, b.1) < (a.0, a.1) => self.extra.pop().map(extra),
            (Some(a), _) => {
                let i = self.order.pop().expect("an item") as usize;
                if self.left.on {
                    match self.left.of[i] {
                        NO_SHAPE => self.left.other -= 1,
                        c => self.left.taken = Some(c),
                    }
                }
                Some(a)
            }
            (None, _) => self.extra.pop().map(extra),
        }
    }

    /// The item just taken had its turn, keeping off the reservation's nodes or not.
    pub(crate) fn passed(&mut self, keeps_off: bool) {
        if let Some(c) = self.left.taken.take() {
            self.left.change(c, |s| {
                s.left -= 1;
                if !keeps_off {
                    s.near -= 1;
                }
            });
        }
    }

    /// A shape key found no room this cycle.
    pub(crate) fn failed(&mut self, key: &crate::shape::ShapeKey) {
        if !self.left.on {
            return;
        }
        let (shape, keeps_off) = key.parts();
        if let Some(&c) = self.left.by_shape.get(&shape) {
            self.left.change(c, |s| {
                if keeps_off {
                    s.failed_clear = true;
                } else {
                    s.failed_near = true;
                }
            });
        }
    }

    /// Evictions: every shape may find room again.
    pub(crate) fn failed_cleared(&mut self) {
        for s in &mut self.left.shapes {
            s.failed_near = false;
            s.failed_clear = false;
        }
        self.left.recount();
    }

    /// A reservation was made: which of the jobs still to come keep off its nodes, by
    /// `keeps_off(the runtime bound's speed, the job's runtime estimate)`, the speed
    /// of a shape being `speed(a job of it, its asks)`.
    pub(crate) fn reserved(
        &mut self,
        speed: impl Fn(JobId, (u32, u32)) -> Option<f64>,
        keeps_off: impl Fn(Option<f64>, Option<u64>) -> bool,
    ) {
        if !self.left.on {
            return;
        }
        let speeds: Vec<Option<f64>> = self
            .left
            .shapes
            .iter()
            .map(|s| {
                if s.left > 0 {
                    speed(s.rep, s.asks)
                } else {
                    None
                }
            })
            .collect();
        for s in &mut self.left.shapes {
            s.near = 0;
        }
        let (of, items, shapes) = (&self.left.of, &self.items, &mut self.left.shapes);
        self.order.each(|i| {
            let c = of[i as usize];
            if c == NO_SHAPE {
                return;
            }
            let est = items[i as usize].2.and_then(|k| k.est);
            if !keeps_off(speeds[c as usize], est) {
                shapes[c as usize].near += 1;
            }
        });
        self.left.recount();
    }

    /// The items still to come, in no order (debug checks).
    #[cfg(debug_assertions)]
    pub(crate) fn still_to_come(&self) -> Vec<(QueueItem, u32, Option<QueueKey>)> {
        let mut v = Vec::new();
        self.order.each(|i| v.push(self.items[i as usize]));
        v
    }

    /// How many items are still to come (not counting those that joined).
    pub(crate) fn still_left(&self) -> usize {
        self.order.len()
    }

    /// On a quiet cycle, whether every item still to come would be passed over on its
    /// shape alone (see [`Left`]).
    pub(crate) fn all_passed_over(&self) -> bool {
        self.left.on && self.left.live == 0 && self.left.other == 0 && self.extra.is_empty()
    }

    /// Whether held keys may need deciding again.
    pub(crate) fn watching(&self) -> bool {
        self.watch
    }
}

/// The items in queue order (the keys are unique: they hold the job's id). Where each
/// field's spread over the items fits, the keys are packed, with the index, into one
/// number to sort (64 bits where they fit, as a full cluster's queue does, else 128):
/// a cycle over 10,000 queued jobs spent a third of its time moving whole items about
/// in a sort. `lazy` (a quiet cycle, which may end early): 64-bit keys in a heap, taken
/// in order as the cycle goes.
fn order(items: &[(QueueItem, u32, Option<QueueKey>)], lazy: bool) -> Order {
    // Each field as an unsigned number in key order (higher priority first).
    let fields = |k: &QueueItem| -> [u64; 5] {
        [
            !((k.0 .0 as u64) ^ (1 << 63)),
            k.1,
            k.2,
            k.3 as u64,
            k.4 as u64,
        ]
    };
    let mut lo = [u64::MAX; 5];
    let mut hi = [0u64; 5];
    for x in items {
        let f = fields(&x.0);
        for i in 0..5 {
            lo[i] = lo[i].min(f[i]);
            hi[i] = hi[i].max(f[i]);
        }
    }
    let mut width = [0u32; 5];
    for i in 0..5 {
        width[i] = u64::BITS - hi[i].saturating_sub(lo[i]).leading_zeros();
    }
    let index_bits = u32::BITS - (items.len() as u32).leading_zeros();
    let bits: u32 = width.iter().sum::<u32>() + index_bits;
    // The fields above their least, one after another, then the index.
    let pack = |i: usize, k: &QueueItem| -> u128 {
        let f = fields(k);
        let mut key = 0u128;
        for j in 0..5 {
            key = (key << width[j]) | (f[j] - lo[j]) as u128;
        }
        (key << index_bits) | i as u128
    };
    let mask = (1u128 << index_bits) - 1;
    let order = if bits <= 64 {
        let mut keys: Vec<u64> = items
            .iter()
            .enumerate()
            .map(|(i, x)| pack(i, &x.0) as u64)
            .collect();
        if lazy {
            let heap: BinaryHeap<Reverse<u64>> = keys.into_iter().map(Reverse).collect();
            Order::Heap(heap, index_bits)
        } else {
            // (a radix sort: a few passes over the digits that differ)
            radsort::sort(&mut keys);
            Order::Stack(
                keys.iter()
                    .rev()
                    .map(|&k| Order::index(k, index_bits))
                    .collect(),
            )
        }
    } else if bits <= 128 {
        let mut keys: Vec<u128> = items
            .iter()
            .enumerate()
            .map(|(i, x)| pack(i, &x.0))
            .collect();
        keys.sort_unstable();
        Order::Stack(keys.iter().rev().map(|&k| (k & mask) as u32).collect())
    } else {
        let mut order: Vec<u32> = (0..items.len() as u32).collect();
        order.sort_unstable_by_key(|&i| Reverse(items[i as usize].0));
        Order::Stack(order)
    };
    #[cfg(debug_assertions)]
    {
        let mut all: Vec<QueueItem> = items.iter().map(|x| x.0).collect();
        all.sort_unstable();
        let got: Vec<QueueItem> = in_order(&order)
            .iter()
            .map(|&i| items[i as usize].0)
            .collect();
        debug_assert_eq!(all, got, "the packed queue order differs");
    }
    order
}

/// The indexes in the order they are taken (debug checks, tests).
#[cfg(any(test, debug_assertions))]
fn in_order(o: &Order) -> Vec<u32> {
    match o {
        Order::Stack(v) => v.iter().rev().copied().collect(),
        Order::Heap(h, bits) => {
            let mut h = h.clone();
            std::iter::from_fn(|| h.pop().map(|k| Order::index(k.0, *bits))).collect()
        }
    }
}

impl Cluster {
    /// Effective priority, the one notion of priority the queue and preemption both
    /// use: base priority plus one per `aging_s` seconds waited (while Pending), or
    /// what waiting gave it before it started (while Running, [`Job::rank`]).
    pub fn effective_priority(&self, j: &Job) -> i64 {
        if j.phase == Phase::Pending {
            let waited = self.now.saturating_sub(j.queued_since);
            j.spec.priority as i64 + (waited / self.config.aging_s.max(1)) as i64
        } else {
            j.rank() as i64
        }
    }

    /// Dominant resource share per project (parts per million of the cluster).
    pub(crate) fn drf_shares(&self) -> Vec<u64> {
        let total = self.totals;
        (0..self.projects.len())
            .map(|p| {
                let mut used = Resources::default();
                for u in self.usage[p].values() {
                    used.add(u);
                }
                [Dim::Gpu, Dim::Cpu, Dim::Memory]
                    .iter()
                    .map(|&d| {
                        let t = total.get(d);
                        if t == 0 {
                            0
                        } else {
                            (used.get(d) as u128 * 1_000_000 / t as u128) as u64
                        }
                    })
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Queue items with their sort keys: (key, job, replicas to place, is a scale-up).
    #[allow(clippy::type_complexity)]
    pub(crate) fn queue_items(&self) -> Vec<((Reverse<i64>, u64, u64, JobId, bool), u32)> {
        let shares = self.drf_shares();
        let share = |j: &Job| j.project.map(|p| shares[p as usize]).unwrap_or(u64::MAX);
        let mut items = Vec::with_capacity(self.pending.len());
        for (&id, k) in &self.pending {
            if self.pending_held.contains(&id) {
                continue;
            }
            items.push((self.item_key(id, k, &shares), k.replicas));
        }
        for &id in &self.services {
            let j = &self.jobs[id as usize];
            if j.phase == Phase::Running && j.desired_replicas > j.running_replicas() {
                let key = (Reverse(j.rank() as i64), share(j), j.submitted, j.id, true);
                items.push((key, j.desired_replicas - j.running_replicas()));
            }
        }
        items
    }

    /// The queue in scheduling order: (job, replicas to place, is a scale-up).
    /// Priority (with aging), then fair share (lower dominant share first), then age.
    pub fn queue(&self) -> Vec<(JobId, u32, bool)> {
        let mut items = self.queue_items();
        items.sort_unstable();
        items.into_iter().map(|(k, r)| (k.3, r, k.4)).collect()
    }

    /// A pending job's 1-based queue position, the queue's length and the first five
    /// jobs ahead of it, without sorting the whole queue.
    pub fn queue_position(&self, id: JobId) -> (Option<usize>, usize, Vec<JobId>) {
        let items = self.queue_items();
        let Some(me) = items.iter().find(|(k, _)| k.3 == id && !k.4).map(|x| x.0) else {
            return (None, items.len(), Vec::new());
        };
        let mut ahead: BinaryHeap<(Reverse<i64>, u64, u64, JobId, bool)> = BinaryHeap::new();
        let mut count = 0;
        for (k, _) in &items {
            if *k < me {
                count += 1;
                if ahead.len() < 5 {
                    ahead.push(*k);
                } else if ahead.peek().is_some_and(|top| k < top) {
                    ahead.pop();
                    ahead.push(*k);
                }
            }
        }
        (
            Some(count + 1),
            items.len(),
            ahead.into_sorted_vec().into_iter().map(|k| k.3).collect(),
        )
    }

    /// The sort key of a queue item: effective priority (with aging), fair share,
    /// submission time, id, and whether it is a scale-up.
    fn item_key(&self, id: JobId, k: &QueueKey, shares: &[u64]) -> QueueItem {
        let aging = self.config.aging_s.max(1);
        let eff = k.priority as i64 + (self.now.saturating_sub(k.queued_since) / aging) as i64;
        let share = k.project.map(|p| shares[p as usize]).unwrap_or(u64::MAX);
        (Reverse(eff), share, k.submitted, id, false)
    }

    /// This cycle's queue. Quota is decided once per verdict key first: the jobs of a
    /// key the quota refuses are held back whole (told why), the others are ordered.
    /// Held keys are checked again whenever their project's usage changes during the
    /// cycle, so the order and the verdicts are exactly those of deciding every job at
    /// its turn, at a cost that follows the jobs that can move.
    pub(crate) fn cycle_queue(&mut self) -> CycleQueue {
        let shares = self.drf_shares();
        let mut q = CycleQueue::default();
        // (every queued job may be an item: reserved once, not grown by doubling)
        q.items.reserve(self.pending.len() + self.services.len());
        let mut hold = self.config.backfill;
        if !hold {
            // With backfill off, jobs behind the first blocked one wait behind it
            // whatever their quota says: every job is taken in turn.
            q.items = self
                .queue_items()
                .into_iter()
                .map(|(k, r)| (k, r, None))
                .collect();
        } else {
            let keys: Vec<VerdictKey> = self.pending_by_key.keys().copied().collect();
            for key in keys {
                let (&rep, rk) = self.pending_by_key[&key].iter().next().expect("non-empty");
                let v = self.cached_verdict(rep, rk.replicas);
                if v.ok {
                    self.told.remove(&key);
                    for (&id, k) in &self.pending_by_key[&key] {
                        debug_assert_eq!(*k, self.pending[&id], "a queue key's copy went stale");
                        q.items
                            .push((self.item_key(id, k, &shares), k.replicas, Some(*k)));
                    }
                } else {
                    self.tell_key(key, &v.message);
                    q.held.push(Held {
                        key,
                        project_gen: self.project_gen[key.0 as usize],
                        message: v.message.clone(),
                    });
                }
            }
            for &id in &self.pending_loose {
                let k = self.pending[&id];
                q.items
                    .push((self.item_key(id, &k, &shares), k.replicas, Some(k)));
            }
            for &id in &self.services {
                let j = &self.jobs[id as usize];
                if j.phase == Phase::Running && j.desired_replicas > j.running_replicas() {
                    let share = j.project.map(|p| shares[p as usize]).unwrap_or(u64::MAX);
                    let key = (Reverse(j.rank() as i64), share, j.submitted, j.id, true);
                    q.items
                        .push((key, j.desired_replicas - j.running_replicas(), None));
                }
            }
            hold = !q.held.is_empty();
            if self.quiet {
                self.count_shapes(&mut q);
            }
        }
        q.order = order(&q.items, q.left.on);
        q.shares = shares;
        q.watch = hold;
        q
    }

    /// A quiet cycle's queue: its items' shapes counted (see [`Left`]).
    fn count_shapes(&self, q: &mut CycleQueue) {
        let left = &mut q.left;
        left.on = true;
        left.of.reserve(q.items.len());
        let mut last = None;
        for &(item, replicas, carried) in &q.items {
            let shape = carried
                .filter(|_| !item.4 && replicas > 0 && self.word_only != Some(item.3))
                .and_then(|k| Some((k.pool, self.asks.cached_value(k.asks)?)))
                .filter(|(_, a)| !a.looks_at_pods);
            let Some((pool, asks)) = shape else {
                left.of.push(NO_SHAPE);
                left.other += 1;
                continue;
            };
            let shape = (pool, asks.epoch, asks.id, replicas);
            let n = left.shapes.len() as u32;
            // (jobs alike come in runs: the last shape is asked first)
            let c = match last {
                Some((s, c)) if s == shape => c,
                _ => *left.by_shape.entry(shape).or_insert(n),
            };
            last = Some((shape, c));
            if c == n {
                left.shapes.push(ShapeLeft {
                    rep: item.3,
                    asks: (asks.epoch, asks.id),
                    left: 0,
                    near: 0,
                    failed_near: false,
                    failed_clear: false,
                });
            }
            let s = &mut left.shapes[c as usize];
            s.left += 1;
            s.near += 1;
            left.of.push(c);
        }
        left.recount();
    }

    /// Tells every job of a queue key its quota's refusal (once: a key already told
    /// this very message is passed over).
    pub(crate) fn tell_key(&mut self, key: VerdictKey, message: &crate::model::Reason) {
        if self
            .told
            .get(&key)
            .is_some_and(|t| std::sync::Arc::ptr_eq(t, message))
        {
            return;
        }
        let ids: Vec<JobId> = self.pending_by_key[&key].keys().copied().collect();
        for id in ids {
            self.set_reason(id, message);
        }
        self.told.insert(key, message.clone());
    }

    /// After a change of usage: held keys whose project's usage moved are decided
    /// again, for their jobs still to come in the order (those before `at` had their
    /// turn while the key was refused).
    pub(crate) fn recheck_held(
        &mut self,
        q: &mut CycleQueue,
        at: &QueueItem,
        report: &CycleReport,
    ) {
        let mut i = 0;
        while i < q.held.len() {
            let h = &q.held[i];
            let p = h.key.0 as usize;
            if self.project_gen[p] == h.project_gen {
                i += 1;
                continue;
            }
            let key = h.key;
            let old = h.message.clone();
            // Jobs of this key still pending, that were in the queue at the start of
            // the cycle (not this cycle's victims), and whose turn is still to come.
            let ids: Vec<(JobId, QueueKey)> = self
                .pending_by_key
                .get(&key)
                .map(|set| {
                    set.iter()
                        .filter(|(id, _)| !report.preempted.contains(id))
                        .map(|(&id, &k)| (id, k))
                        .collect()
                })
                .unwrap_or_default();
            let Some(&(rep, rk)) = ids.first() else {
                q.held.swap_remove(i);
                continue;
            };
            let v = self.cached_verdict(rep, rk.replicas);
            let later: Vec<(JobId, QueueItem, u32)> = ids
                .iter()
                .map(|&(id, k)| (id, self.item_key(id, &k, &q.shares), k.replicas))
                .filter(|x| x.1 > *at)
                .collect();
            if later.is_empty() {
                q.held.swap_remove(i);
                continue;
            }
            if v.ok {
                // Its jobs take their turns from here on.
                for (_, item, r) in later {
                    q.extra.push(Reverse((item, r)));
                }
                q.held.swap_remove(i);
                continue;
            }
            if !std::sync::Arc::ptr_eq(&old, &v.message) {
                for &(id, _, _) in &later {
                    self.set_reason(id, &v.message);
                }
                // Only the later ones were told: the key's jobs no longer agree.
                self.told.remove(&key);
            }
            let h = &mut q.held[i];
            h.project_gen = self.project_gen[p];
            h.message = v.message;
            i += 1;
        }
        q.watch = !q.held.is_empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted(items: &[(QueueItem, u32, Option<QueueKey>)]) -> Vec<QueueItem> {
        let mut all: Vec<QueueItem> = items.iter().map(|x| x.0).collect();
        all.sort_unstable_by_key(|&k| Reverse(k));
        all
    }

    proptest! {
        /// The packed order is the items' own, whatever their fields' spread: narrow
        /// (packed in 64 or 128 bits) or as wide as the types go (sorted whole).
        #[test]
        fn the_queue_order_is_the_keys_order(
            raw in proptest::collection::vec(
                (any::<i64>(), any::<u64>(), any::<u64>(), any::<bool>()), 0..200),
            spread in 0..3u8,
        ) {
            let items: Vec<(QueueItem, u32, Option<QueueKey>)> = raw
                .iter()
                .enumerate()
                .map(|(i, &(e, s, t, up))| {
                    let id = (i as u32).wrapping_mul(2_654_435_761);
                    match spread {
                        // packed in 64 bits (a full cluster's queue)
                        0 => ((Reverse(e % 5 - 2), s % 4_096, 1_700_000_000 + t % 60_000,
                               id % 65_536, up), 1, None),
                        // packed in 128 bits
                        1 => ((Reverse(e % 5 - 2), s % 1_000_001, 1_700_000_000 + t % 86_400,
                               id, up), 1, None),
                        // as wide as the types go: sorted whole
                        _ => ((Reverse(e), s, t, id, up), 1, None),
                    }
                })
                .collect();
            for lazy in [false, true] {
                let got: Vec<QueueItem> = in_order(&order(&items, lazy))
                    .iter()
                    .rev()
                    .map(|&i| items[i as usize].0)
                    .collect();
                prop_assert_eq!(got, sorted(&items));
            }
        }
    }

    #[test]
    fn extreme_priorities_and_shares_keep_their_order() {
        let items: Vec<(QueueItem, u32, Option<QueueKey>)> = [
            (i64::MIN, u64::MAX, 0, 1, false),
            (i64::MAX, 0, u64::MAX, 2, true),
            (-1, 7, 3, 3, false),
            (0, 7, 3, 4, false),
            (0, 7, 3, 4, true),
        ]
        .iter()
        .map(|&(e, s, t, id, up)| ((Reverse(e), s, t, id, up), 1, None))
        .collect();
        let got: Vec<JobId> = in_order(&order(&items, false))
            .iter()
            .map(|&i| items[i as usize].0 .3)
            .collect();
        assert_eq!(
            got,
            vec![2, 4, 4, 3, 1],
            "highest priority first, last popped first"
        );
    }
}
