//! Placement: the policies and the fragmentation measures they read, as plain
//! functions over a node's free resources and the workload's typical shapes. The live
//! scheduling cycle (`schedule.rs`) and the trace replay (`replay.rs`) both call them;
//! this module imports neither.
//!
//! - [`Policy`]: random, dotprod, gpuclustering, gpupacking, bestfit (the published
//!   simulator's), fgd ("Beware of Fragmentation", ATC'23) and maar's own.
//! - [`fragmentation`] (FGD's measure) and [`capacity_fragmentation`] (maar's), against
//!   typical [`Shape`]s ([`cover_95`]); [`Memo`] keeps them per node state.
//! - [`score`]: a policy's score for a pod ([`Ask`]) on a node state ([`NodeView`]).
//! - maar's key: model pressure ([`ease_pressure`], [`bound_demand`]), then the
//!   fragmentation removed ([`maar_order`]), then what is left ([`maar_leftover`]).

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use serde::Serialize;

/// Placement policies: the six of the paper, and maar's own.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Random,
    DotProd,
    GpuClustering,
    GpuPacking,
    BestFit,
    Fgd,
    #[default]
    Maar,
}

impl Policy {
    pub const ALL: [Policy; 7] = [
        Policy::Random,
        Policy::DotProd,
        Policy::GpuClustering,
        Policy::GpuPacking,
        Policy::BestFit,
        Policy::Fgd,
        Policy::Maar,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Random => "random",
            Policy::DotProd => "dotprod",
            Policy::GpuClustering => "gpuclustering",
            Policy::GpuPacking => "gpupacking",
            Policy::BestFit => "bestfit",
            Policy::Fgd => "fgd",
            Policy::Maar => "maar",
        }
    }

    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
    }
}

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

/// The most frequent shapes (by the weights counted) until they cover 95% of the total,
/// with their frequencies renormalised to sum to 1.
pub fn cover_95(counts: BTreeMap<Shape, u64>) -> Vec<(Shape, f64)> {
    let mut v: Vec<(Shape, u64)> = counts.into_iter().filter(|x| x.1 > 0).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: f64 = v.iter().map(|x| x.1 as f64).sum();
    let mut out = Vec::new();
    let mut acc = 0.0;
    for (s, c) in v {
        if acc >= 0.95 * total {
            break;
        }
        acc += c as f64;
        out.push((s, c as f64));
    }
    for x in &mut out {
        x.1 /= acc;
    }
    out
}

/// What a pod asks of one node, to the policies: CPU (milli), GPU count and GPU-milli per
/// GPU (below 1000 only for a single shared GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ask {
    pub cpu: u64,
    pub count: u32,
    pub gpu_milli: u32,
}

impl Ask {
    pub fn gpu_request(&self) -> u64 {
        self.count as u64 * self.gpu_milli as u64
    }

    /// A slice of one shared card.
    pub fn sharing(&self) -> bool {
        self.count == 1 && self.gpu_milli < 1000
    }
}

/// A node as the policies see it: its GPU model (an id of the caller's model list; 0 for
/// none), free CPU (milli), free GPU-milli per card (largest first) and, for
/// GpuClustering, the affinity classes ([`affinity_tag`]) of the GPU pods on it (sorted,
/// distinct).
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    pub model: u16,
    pub free_cpu: u64,
    pub free: &'a [u16],
    pub affinity: &'a [u32],
}

impl NodeView<'_> {
    pub fn free_total(&self) -> u64 {
        self.free.iter().map(|&f| f as u64).sum()
    }
    fn fully_free(&self) -> u32 {
        self.free.iter().filter(|&&f| f == 1000).count() as u32
    }
}

/// Keeps the candidates whose GPU model is not under pressure: maar stays off models
/// whose typical demand only they can serve, per idle GPU, is more than
/// [`PRESSURE_SLACK`] times that of the least pressed model among the candidates.
pub fn ease_pressure<T>(cands: &mut Vec<T>, pressure: impl Fn(&T) -> f64) {
    let least = cands.iter().map(&pressure).fold(f64::INFINITY, f64::min);
    cands.retain(|c| pressure(c) <= least * PRESSURE_SLACK);
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
pub struct Memo {
    kind: Measure,
    shapes: Vec<(Shape, f64)>,
    models: Vec<String>,
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

impl Memo {
    /// A memo of `kind` against `shapes`; `models` names the model ids of the states.
    pub fn new(kind: Measure, shapes: Vec<(Shape, f64)>, models: Vec<String>) -> Memo {
        Memo {
            kind,
            shapes,
            models,
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

/// The distinct free-milli values of the cards a sharing pod could take (a state's
/// cards are sorted, so equal values are adjacent).
fn share_cards(s: &NodeView, pod: &Ask) -> Vec<u16> {
    let mut cards: Vec<u16> = s
        .free
        .iter()
        .copied()
        .filter(|&f| f as u32 >= pod.gpu_milli)
        .collect();
    cards.dedup();
    cards
}

/// GpuClustering's affinity classes: 0 for a shared card, k for k whole cards.
pub fn affinity_tag(p: &Ask) -> u32 {
    if p.sharing() {
        0
    } else {
        p.count
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The policy's verdict on a node state: the score, and which free-milli value of the
/// state's cards a sharing pod should take (None: the default choice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub score: i64,
    /// maar's second criterion (larger is better); 0 for the other policies.
    pub aux: i64,
    pub card: Option<u16>,
}

/// The largest node spec the published scores normalise by: 8 GPUs, 128 cores.
pub const MAX_SPEC_GPU: u64 = 8000;
pub const MAX_SPEC_CPU: u64 = 128_000;

/// Removes a whole-GPU pod's cards from a sorted state (takes fully free cards).
fn take_whole(free: &[u16], count: u32) -> Vec<u16> {
    let mut v = free.to_vec();
    let mut left = count;
    for f in v.iter_mut() {
        if left > 0 && *f == 1000 {
            *f = 0;
            left -= 1;
        }
    }
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}

fn take_share(free: &[u16], card: u16, milli: u32) -> Vec<u16> {
    let mut v = free.to_vec();
    if let Some(f) = v.iter_mut().find(|f| **f == card) {
        *f -= milli as u16;
    }
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}

/// FGD's score for the fragmentation a placement removes (GPU-milli; negative when it
/// adds some): `sigmoid(removed / 1000) x 100`, an integer as the published simulator's.
/// Near zero one point is 40 GPU-milli; large changes of either sign are compressed
/// (placements that fragment a lot, or clear a lot, score alike).
pub fn fgd_score(removed: f64) -> i64 {
    (sigmoid(removed / 1000.0) * 100.0) as i64
}

/// maar's first two criteria from the fragmentation a placement removes (FGD's measure
/// and capacity fragmentation, in GPU-milli): FGD's own score, then capacity
/// fragmentation in thousandths, for the placements FGD scores alike. Larger is better.
///
/// FGD's score was once taken linearly, in steps of 50 GPU-milli: on workloads where a
/// third or more of the GPU demand is multi-GPU pods that lost to FGD (BENCHMARKS.md),
/// because it told apart large increases of fragmentation that FGD's sigmoid lumps
/// together (and then leaves to the node order).
pub fn maar_order(fgd_removed: f64, cap_removed: f64) -> (i64, i64) {
    (
        fgd_score(fgd_removed),
        (cap_removed * 1000.0).round() as i64,
    )
}

/// maar's last criterion (smaller is better): a CPU-only pod goes where the fewest GPUs
/// are idle (its CPU strands no GPU), a GPU pod where the fewest resources are left
/// (best fit, CPU weighed as GPUs by the largest node spec).
pub fn maar_leftover(pod: &Ask, free_cpu: u64, free_gpu_milli: u64) -> i64 {
    let cpu_after = free_cpu.saturating_sub(pod.cpu) as i64;
    if pod.count == 0 {
        free_gpu_milli as i64 * 1_000_000 + cpu_after
    } else {
        cpu_after * MAX_SPEC_GPU as i64 / MAX_SPEC_CPU as i64 + free_gpu_milli as i64
            - pod.gpu_request() as i64
    }
}

/// A policy's score for placing `pod` on a node in state `s` (0..=100 as the published
/// simulator's, larger is better; maar's is its first criterion). `frag` is FGD's
/// measure; `cap` ([`capacity_fragmentation`]) is read by maar only.
pub fn score(policy: Policy, s: &NodeView, pod: &Ask, frag: &mut Memo, cap: &mut Memo) -> Verdict {
    let sharing = pod.sharing();
    let plain = |score| Verdict {
        score,
        aux: 0,
        card: None,
    };
    match policy {
        Policy::Random => plain(0),
        Policy::DotProd => {
            // Tetris: dot product of the pod's request and the node's free resources,
            // each normalised by the largest node spec; a smaller product scores higher.
            // A sharing pod is matched against each card it could take.
            let cpu =
                (pod.cpu as f64 / MAX_SPEC_CPU as f64) * (s.free_cpu as f64 / MAX_SPEC_CPU as f64);
            let groups: Vec<Option<u16>> = if sharing {
                share_cards(s, pod).into_iter().map(Some).collect()
            } else {
                vec![None]
            };
            let mut best: Option<(i64, Option<u16>)> = None;
            for g in groups {
                let gpu = match g {
                    Some(card) => (pod.gpu_milli as f64 / 1000.0) * (card as f64 / 1000.0),
                    None => {
                        (pod.gpu_request() as f64 / MAX_SPEC_GPU as f64)
                            * (s.free_total() as f64 / MAX_SPEC_GPU as f64)
                    }
                };
                let sc = ((1.0 - (cpu + gpu) / 2.0) * 100.0) as i64;
                if best.is_none_or(|b| sc > b.0) {
                    best = Some((sc, g));
                }
            }
            let (score, card) = best.unwrap_or((0, None));
            Verdict {
                score,
                aux: 0,
                card,
            }
        }
        Policy::GpuClustering => {
            if pod.gpu_request() == 0 {
                return plain(0);
            }
            let left = s.free_total();
            let base = 25 * (MAX_SPEC_GPU - left.min(MAX_SPEC_GPU)) as i64 / MAX_SPEC_GPU as i64;
            let tag = affinity_tag(pod);
            let tier = if s.affinity.contains(&tag) {
                if s.affinity.len() == 1 {
                    75
                } else {
                    50
                }
            } else if s.affinity.is_empty() {
                25
            } else {
                0
            };
            plain(base + tier)
        }
        Policy::GpuPacking => {
            if pod.gpu_request() == 0 {
                return plain(0);
            }
            let fully = s.fully_free();
            if fully as usize == s.free.len() {
                return plain((33 - fully as i64).max(fully as i64));
            }
            // Cards used: fewest milli left first.
            let mut cards: Vec<u16> = s.free.to_vec();
            cards.sort_unstable();
            let mut need = pod.count;
            let mut fully_used = 0;
            let mut ratio = 0i64;
            for c in cards {
                if need == 0 {
                    break;
                }
                if c as u32 >= pod.gpu_milli {
                    need -= 1;
                    if c == 1000 {
                        fully_used += 1;
                    }
                    ratio += c as i64 * 100 / 1000;
                }
            }
            if fully_used > 0 {
                plain((50 - fully_used as i64).max(33))
            } else {
                plain((100 - ratio / 10).max(50))
            }
        }
        Policy::BestFit => {
            let cpu = (s.free_cpu - pod.cpu.min(s.free_cpu)) as f64 / MAX_SPEC_CPU as f64;
            let gpu = (s.free_total() - pod.gpu_request().min(s.free_total())) as f64
                / MAX_SPEC_GPU as f64;
            plain(((1.0 - (0.5 * cpu + 0.5 * gpu)) * 100.0) as i64)
        }
        Policy::Fgd | Policy::Maar => {
            // FGD: the node (and, for a shared slice, the card) where fragmentation
            // grows least, as sigmoid(decrease / 1000) x 100. maar: the same score, then
            // the decrease of capacity fragmentation.
            let maar = policy == Policy::Maar;
            let before = frag.of(s.model, s.free_cpu, s.free);
            let cap_before = if maar {
                cap.of(s.model, s.free_cpu, s.free)
            } else {
                0.0
            };
            let cpu_after = s.free_cpu - pod.cpu.min(s.free_cpu);
            let mut best: Option<Verdict> = None;
            let options: Vec<(Option<u16>, Vec<u16>)> = if sharing {
                share_cards(s, pod)
                    .into_iter()
                    .map(|c| (Some(c), take_share(s.free, c, pod.gpu_milli)))
                    .collect()
            } else {
                vec![(None, take_whole(s.free, pod.count))]
            };
            for (card, after) in options {
                let delta = before - frag.of(s.model, cpu_after, &after);
                let v = if maar {
                    let (score, aux) =
                        maar_order(delta, cap_before - cap.of(s.model, cpu_after, &after));
                    Verdict { score, aux, card }
                } else {
                    Verdict {
                        score: fgd_score(delta),
                        aux: 0,
                        card,
                    }
                };
                let better = best
                    .as_ref()
                    .is_none_or(|b| (v.score, v.aux) > (b.score, b.aux));
                if better {
                    best = Some(v);
                }
            }
            best.unwrap_or_else(|| plain(0))
        }
    }
}

/// maar keeps a GPU pod off models whose pressure (bound demand per idle GPU-milli)
/// is more than this factor above the least pressed model among its candidates.
pub const PRESSURE_SLACK: f64 = 1.5;

#[cfg(test)]
mod tests {
    use super::pack;

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
