//! The fragmentation measures the policies read, against the workload's typical task
//! shapes: FGD's ([`fragmentation`]) and maar's ([`capacity_fragmentation`]), the
//! shapes that cover 95% of the workload ([`cover_95`]), the demand only a GPU model can
//! serve ([`bound_demand`]), and [`Memo`], which keeps a measure per node state.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

/// A task shape for fragmentation: CPU, GPU-milli per GPU (0 = no GPU), GPU count,
/// allowed models (sorted, lower-case).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Shape {
    pub cpu: u64,
    pub milli: u32,
    pub count: u32,
    pub models: Vec<String>,
}

impl Shape {
    /// Whether an empty node of `cards` GPUs and `cpu_milli` could hold one of this
    /// shape (its model aside).
    pub fn fits_empty(&self, cards: u32, cpu_milli: u64) -> bool {
        cards >= self.count && cpu_milli >= self.cpu
    }
}

/// The most shapes placement measures against, typical ones (and as many scarce ones
/// more, under maar's policy). Each is a term of every node's measure, so a workload of
/// thousands of distinct requests (a hostile user's, or a trace of every size) would
/// make every placement cost thousands of terms; the published openb traces have at
/// most 127 typical shapes (gpuspec33), so none of their results depends on it.
pub const MAX_SHAPES: usize = 256;

/// The most frequent shapes (by the weights counted) until they cover 95% of the total
/// (at most [`MAX_SHAPES`]), with their frequencies renormalised to sum to 1.
pub fn cover_95(counts: BTreeMap<Shape, u64>) -> Vec<(Shape, f64)> {
    normalised(covering_95(counts.into_iter()))
}

/// The most frequent shapes with their counts, until they cover 95% of the total, at
/// most [`MAX_SHAPES`].
fn covering_95(counts: impl Iterator<Item = (Shape, u64)>) -> Vec<(Shape, u64)> {
    let mut v: Vec<(Shape, u64)> = counts.filter(|x| x.1 > 0).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: u64 = v.iter().map(|x| x.1).sum();
    let mut acc = 0u64;
    let mut kept = 0;
    while kept < v.len().min(MAX_SHAPES) && (acc as f64) < 0.95 * total as f64 {
        acc += v[kept].1;
        kept += 1;
    }
    v.truncate(kept);
    v
}

/// Counts as frequencies that sum to 1.
fn normalised(v: Vec<(Shape, u64)>) -> Vec<(Shape, f64)> {
    let total: f64 = v.iter().map(|x| x.1 as f64).sum();
    v.into_iter().map(|(s, c)| (s, c as f64 / total)).collect()
}

/// The share of a cluster's GPU nodes at or under which a GPU shape counts as scarce:
/// few nodes could hold it even empty ([`with_scarce`]).
pub const SCARCE_SHARE: f64 = 0.05;

/// The shapes maar measures fragmentation against: the typical ones ([`cover_95`]),
/// and also every rarer GPU shape that names no model and that at most
/// [`SCARCE_SHARE`] of the GPU nodes (`gpu_nodes()`, asked only when some shape is
/// rare) could hold even empty (`held_by_more(shape, limit)`: whether more than
/// `limit` nodes could), each weighted by its count over the shapes kept.
///
/// Why: the typical shapes leave out the rarest 5% of the workload, and with them the
/// large shapes that only a few nodes can take at all (on the openb multi-GPU traces,
/// 8 GPUs with 120 cores: only the 39 nodes of 128 cores, 3% of 1,213). Measured
/// against the typical shapes alone, those nodes look like any other to a small pod,
/// maar filled them, and the large pods found none empty: maar fell behind FGD there
/// (BENCHMARKS.md). A shape that names its model is left to model pressure.
///
/// `nodes` (every node, at least the GPU nodes) lets a shape that more than 5% of all
/// nodes hold be passed over without counting the GPU nodes.
pub fn with_scarce(
    counts: BTreeMap<Shape, u64>,
    nodes: usize,
    gpu_nodes: impl FnOnce() -> usize,
    held_by_more: impl Fn(&Shape, usize) -> bool,
) -> Vec<(Shape, f64)> {
    let limit_of = |n: usize| (n as f64 * SCARCE_SHARE) as usize;
    let mut kept = covering_95(counts.iter().map(|(s, &c)| (s.clone(), c)));
    let typical: std::collections::BTreeSet<Shape> = kept.iter().map(|x| x.0.clone()).collect();
    let mut gpu_nodes = Some(gpu_nodes);
    let mut limit = 0;
    let most = kept.len() + MAX_SHAPES;
    for (s, c) in counts {
        if kept.len() >= most {
            break;
        }
        if c == 0 || s.milli == 0 || !s.models.is_empty() || typical.contains(&s) {
            continue;
        }
        if held_by_more(&s, limit_of(nodes)) {
            continue;
        }
        if let Some(count) = gpu_nodes.take() {
            limit = limit_of(count());
        }
        if !held_by_more(&s, limit) {
            kept.push((s, c));
        }
    }
    normalised(kept)
}

/// Frequency-weighted idle GPU-milli that the shapes cannot use on a node: all of it for
/// a shape that needs no GPU or cannot use `model`, otherwise `unusable(shape, idle)`.
fn weighted_fragment(
    model: &str,
    free: &[u32],
    shapes: &[(Shape, f64)],
    unusable: impl Fn(&Shape, u64) -> u64,
) -> f64 {
    let total: u64 = free.iter().map(|&f| f as u64).sum();
    if total == 0 {
        return 0.0;
    }
    let mut frag = 0.0;
    for (s, p) in shapes {
        let gpu_here = s.milli > 0 && (s.models.is_empty() || s.models.iter().any(|m| m == model));
        frag += p * if gpu_here { unusable(s, total) } else { total } as f64;
    }
    frag
}

/// Fragmentation of a node (GPU-milli) against typical shapes: for each shape, all
/// idle GPU-milli if the shape needs no GPU, cannot use this model, or does not fit
/// (too few cards with enough free milli, or too little CPU); otherwise the free milli
/// of the cards with less free than the shape needs. Weighted by shape frequency.
pub fn fragmentation(model: &str, free_cpu: u64, free: &[u32], shapes: &[(Shape, f64)]) -> f64 {
    weighted_fragment(model, free, shapes, |s, total| {
        let fits = free.iter().filter(|&&f| f >= s.milli).count() as u32 >= s.count;
        if fits && free_cpu >= s.cpu {
            free.iter()
                .filter(|&&f| f < s.milli)
                .map(|&f| f as u64)
                .sum()
        } else {
            total
        }
    })
}

/// Idle GPU-milli a shape could not use on a node if it were placed there as many times
/// as it fits, weighted by shape frequency. For each shape: all idle milli if the shape
/// needs no GPU or cannot use this model; otherwise the idle milli minus what `k`
/// copies take, `k` bounded by the cards (free whole cards per copy, or slices per
/// card for a shared GPU) and by the free CPU.
///
/// Where [`fragmentation`] asks "does one copy fit?", this asks "how much of what is
/// idle can copies actually use?": a card with 900 free takes one 470 slice, not 900;
/// eight free GPUs beside 24 free cores take two 12-core GPU pods, not eight.
pub fn capacity_fragmentation(
    model: &str,
    free_cpu: u64,
    free: &[u32],
    shapes: &[(Shape, f64)],
) -> f64 {
    weighted_fragment(model, free, shapes, |s, total| {
        let by_gpu: u64 = if s.milli >= 1000 {
            free.iter().filter(|&&f| f >= 1000).count() as u64 / s.count.max(1) as u64
        } else {
            free.iter().map(|&f| (f / s.milli) as u64).sum()
        };
        let by_cpu = free_cpu.checked_div(s.cpu).unwrap_or(u64::MAX);
        let used = by_gpu.min(by_cpu) * s.count as u64 * s.milli as u64;
        total - used.min(total)
    })
}

/// The GPU shapes among `shapes`, frequencies renormalised (capacity fragmentation's).
pub fn gpu_shapes(shapes: &[(Shape, f64)]) -> Vec<(Shape, f64)> {
    let mut gpu: Vec<(Shape, f64)> = shapes.iter().filter(|x| x.0.milli > 0).cloned().collect();
    let sum: f64 = gpu.iter().map(|x| x.1).sum();
    for x in &mut gpu {
        x.1 /= sum;
    }
    gpu
}

/// Per GPU model (indexed as `models`): the typical demand (frequency x GPU-milli) that
/// only that model can serve, a shape restricted to several models sharing it among them.
pub fn bound_demand(shapes: &[(Shape, f64)], models: &[String]) -> Vec<f64> {
    let mut bound = vec![0.0; models.len()];
    for (sh, w) in shapes.iter().filter(|x| x.0.milli > 0) {
        for m in &sh.models {
            if let Some(i) = models.iter().position(|x| x == m) {
                bound[i] += w * (sh.count as f64 * sh.milli as f64) / sh.models.len() as f64;
            }
        }
    }
    bound
}

/// Which fragmentation a [`Memo`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// [`fragmentation`]: FGD's measure.
    Fgd,
    /// [`capacity_fragmentation`]: maar's.
    Capacity,
}

/// A fragmentation measure memoised by node state (model, free CPU, free GPU-milli per
/// card): the replay scores each distinct state once.
pub struct Memo<'a> {
    kind: Measure,
    shapes: Cow<'a, [(Shape, f64)]>,
    models: Cow<'a, [String]>,
    /// States of up to eight cards packed into one integer (the common case: no
    /// allocation or string hashing per lookup); wider states keyed as they are.
    memo: HashMap<u128, f64, BuildHasherDefault<PackedHasher>>,
    memo_wide: HashMap<(u16, u64, Vec<u16>), f64>,
}

/// A node state packed as model (16 bits), free CPU (24 bits) and up to eight cards of
/// 11 bits each; None when it does not fit.
fn pack(model: u16, free_cpu: u64, free: &[u16]) -> Option<u128> {
    // Cards are stored as milli + 1 (so an absent card differs from an empty one).
    if free.len() > 8 || free_cpu >= 1 << 24 || free.iter().any(|&f| f >= (1 << 11) - 1) {
        return None;
    }
    let mut k = (model as u128) << 112 | (free_cpu as u128) << 88;
    for (i, &f) in free.iter().enumerate() {
        k |= (f as u128 + 1) << (11 * i);
    }
    Some(k)
}

/// Multiply-fold hashing for packed states (SipHash costs more than the lookup saves).
#[derive(Default)]
struct PackedHasher(u64);

impl std::hash::Hasher for PackedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u128(&mut self, v: u128) {
        let x = (v as u64) ^ ((v >> 64) as u64).rotate_left(29);
        self.0 = (x ^ (x >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl<'a> Memo<'a> {
    /// A memo of `kind` against `shapes`; `models` names the model ids of the states.
    pub fn new(
        kind: Measure,
        shapes: impl Into<Cow<'a, [(Shape, f64)]>>,
        models: impl Into<Cow<'a, [String]>>,
    ) -> Memo<'a> {
        Memo {
            kind,
            shapes: shapes.into(),
            models: models.into(),
            memo: HashMap::default(),
            memo_wide: HashMap::new(),
        }
    }

    /// The measure of a node state.
    pub fn of(&mut self, model: u16, free_cpu: u64, free: &[u16]) -> f64 {
        let packed = pack(model, free_cpu, free);
        let hit = match packed {
            Some(k) => self.memo.get(&k),
            None => self.memo_wide.get(&(model, free_cpu, free.to_vec())),
        };
        if let Some(v) = hit {
            return *v;
        }
        let milli: Vec<u32> = free.iter().map(|&f| f as u32).collect();
        let m = &self.models[model as usize];
        let frag = match self.kind {
            Measure::Fgd => fragmentation(m, free_cpu, &milli, &self.shapes),
            Measure::Capacity => capacity_fragmentation(m, free_cpu, &milli, &self.shapes),
        };
        match packed {
            Some(k) => self.memo.insert(k, frag),
            None => self
                .memo_wide
                .insert((model, free_cpu, free.to_vec()), frag),
        };
        frag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maar_keeps_rare_shapes_that_few_nodes_can_hold_beside_the_typical_ones() {
        let s = |cpu: u64, milli: u32, count: u32, models: &[&str]| Shape {
            cpu,
            milli,
            count,
            models: models.iter().map(|m| m.to_string()).collect(),
        };
        let small = s(8000, 1000, 1, &[]);
        let big = s(120_000, 1000, 8, &[]);
        let counts: BTreeMap<Shape, u64> = [
            (small.clone(), 96),
            (big.clone(), 1),
            // Rare too, but 40 of 41 nodes hold it.
            (s(88_000, 1000, 8, &[]), 2),
            // Rare and held by one node, but it names its model (pressure's).
            (s(100_000, 1000, 4, &["g3"]), 1),
            (s(64_000, 0, 0, &[]), 1),
        ]
        .into();
        // 96 of 101 is past 95%: the typical shapes are the small one alone.
        assert_eq!(cover_95(counts.clone()), vec![(small.clone(), 1.0)]);
        // 41 GPU nodes: a shape at most 2 of them hold is scarce; only one holds over
        // 96 cores.
        let held_by = |sh: &Shape| if sh.cpu > 96_000 { 1 } else { 41 };
        let got = with_scarce(counts.clone(), 41, || 41, |sh, limit| held_by(sh) > limit);
        assert_eq!(got, vec![(small.clone(), 96.0 / 97.0), (big, 1.0 / 97.0)]);
        // Held by three nodes of 41: not scarce.
        let got = with_scarce(counts.clone(), 41, || 41, |_, limit| 3 > limit);
        assert_eq!(got, vec![(small.clone(), 1.0)]);
        // Nothing rare: the nodes are not counted.
        let typical: BTreeMap<Shape, u64> = [(small.clone(), 96)].into();
        let got = with_scarce(typical, 41, || panic!("counted"), |_, _| panic!("asked"));
        assert_eq!(got, vec![(small.clone(), 1.0)]);
        // Held by more than 5% of all 1,000 nodes: passed over without counting.
        let wide: BTreeMap<Shape, u64> = [(small.clone(), 96), (s(4000, 1000, 2, &[]), 1)].into();
        let got = with_scarce(wide, 1000, || panic!("counted"), |_, limit| limit == 50);
        assert_eq!(got, vec![(small, 1.0)]);
    }

    /// Thousands of distinct requests (every CPU size from 1 to 5,000 cores' milli):
    /// the measure keeps the most frequent [`MAX_SHAPES`], and as many scarce ones more.
    #[test]
    fn a_workload_of_thousands_of_shapes_is_measured_against_a_bounded_few() {
        let shape = |cpu: u64, count: u32| Shape {
            cpu,
            milli: 1000,
            count,
            models: Vec::new(),
        };
        let mut counts: BTreeMap<Shape, u64> = BTreeMap::new();
        for cpu in 1..=5000u64 {
            counts.insert(shape(cpu, 1), 1 + cpu % 3);
            counts.insert(shape(100_000 + cpu, 8), 1);
        }
        let typical = cover_95(counts.clone());
        assert_eq!(typical.len(), MAX_SHAPES);
        let sum: f64 = typical.iter().map(|x| x.1).sum();
        assert!((sum - 1.0).abs() < 1e-9);
        // The most frequent kept (counts of 3 before those of 2 or 1).
        assert!(typical.iter().all(|(s, _)| s.count == 1 && s.cpu % 3 == 2));
        // Every 8-card shape is rare and held by no node: scarce, but at most
        // MAX_SHAPES of them are added.
        let got = with_scarce(counts, 1000, || 1000, |_, _| false);
        assert_eq!(got.len(), 2 * MAX_SHAPES);
    }

    #[test]
    fn packed_states_are_distinct_and_wide_ones_are_refused() {
        let a = pack(3, 16_000, &[1000, 500, 0]).unwrap();
        assert_ne!(
            a,
            pack(3, 16_000, &[1000, 500]).unwrap(),
            "an empty card counts"
        );
        assert_ne!(a, pack(3, 16_001, &[1000, 500, 0]).unwrap());
        assert_ne!(a, pack(4, 16_000, &[1000, 500, 0]).unwrap());
        assert_ne!(a, pack(3, 16_000, &[1000, 0, 500]).unwrap());
        assert_eq!(
            pack(0, (1 << 24) - 1, &[2046; 8]).map(|k| k >> 88),
            Some((1 << 24) - 1)
        );
        assert!(pack(0, 0, &[0; 9]).is_none(), "nine cards");
        assert!(pack(0, 1 << 24, &[0]).is_none(), "CPU beyond 24 bits");
        assert!(pack(0, 0, &[2047]).is_none(), "milli beyond 11 bits");
    }
}
