//! Trace replay: the placement experiment of "Beware of Fragmentation" (ATC'23) on
//! Alibaba's GPU cluster trace, run on this crate's own cluster model.
//!
//! Nodes become [`Node`]s with crater.ai labels, pods become [`JobSpec`]s, every
//! candidate is checked with [`fit`] and every placement is committed with the same
//! allocation path the scheduler uses. What differs per policy is only the score.
//!
//! Pods arrive one at a time in a seeded shuffled order; random copies are appended
//! until the total GPU request reaches `inflate` x capacity; a pod that fits nowhere
//! fails and is not retried. Each time arrived GPU demand crosses another whole percent
//! of capacity, the allocation and fragmentation are recorded.
//!
//! Scores follow the published simulator: integers in 0..=100, a tie going to the
//! first best node of the node list (which is shuffled once per seed; [`Ties`]). Nodes
//! in the same
//! state (model, free CPU and memory, sorted free GPU-milli) score the same, so each
//! pod is scored once per distinct state, and fragmentation is memoised per state.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::cluster::{Cluster, SchedConfig};
use crate::fit::fit;
use crate::model::*;

/// A node row of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceNode {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpus: u32,
    pub model: String,
}

/// A pod row of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePod {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub num_gpu: u32,
    /// GPU-milli per GPU (< 1000 only for single-GPU sharing pods).
    pub gpu_milli: u32,
    /// Allowed GPU models; empty means any.
    pub gpu_spec: Vec<String>,
}

impl TracePod {
    pub fn gpu_request(&self) -> u64 {
        self.num_gpu as u64 * self.gpu_milli as u64
    }
}

/// Placement policies: the six of the paper, and maar's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Random,
    DotProd,
    GpuClustering,
    GpuPacking,
    BestFit,
    Fgd,
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

/// How a tie between equally scored nodes is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ties {
    /// The tied node that comes first in the node list, which is shuffled once per
    /// seed: what the published simulator does (its scheduler keeps the first best
    /// node). It decides the policies that score many nodes alike: with random ties
    /// GpuPacking and GpuClustering land ~2.8 points lower, because CPU-only pods (which
    /// they score 0 everywhere) then spread over every node and starve GPUs of CPU,
    /// instead of filling one node after another. The Random policy still picks at
    /// random.
    NodeOrder,
    /// Uniformly at random among the tied nodes.
    Random,
}

/// Salt for the seeded node order, so it does not repeat the arrival order's stream.
const NODE_ORDER_SALT: u64 = 0x6e6f_6465_6f72_6472;

#[derive(Clone, Debug)]
pub struct ReplayConfig {
    pub policy: Policy,
    pub seed: u64,
    pub inflate: f64,
    /// How typical shapes are weighted for fragmentation.
    pub shape_weight: ShapeWeight,
    /// Count CPU-only pods among the typical shapes (on in the published setup).
    pub cpu_shapes: bool,
    pub ties: Ties,
}

impl ReplayConfig {
    pub fn new(policy: Policy, seed: u64) -> ReplayConfig {
        ReplayConfig {
            policy,
            seed,
            inflate: 1.3,
            shape_weight: ShapeWeight::Pods,
            cpu_shapes: true,
            ties: Ties::NodeOrder,
        }
    }
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct CurvePoint {
    pub arrived_pct: u32,
    pub alloc_pct: f64,
    pub frag_pct: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReplayResult {
    pub policy: Policy,
    pub seed: u64,
    pub total_gpus: u32,
    pub curve: Vec<CurvePoint>,
    pub alloc_pct_at_100: f64,
    pub unallocated_gpus_at_100: f64,
    pub pods_placed: usize,
    pub pods_failed: usize,
    pub elapsed_ms: u64,
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

impl Shape {
    pub fn of(p: &TracePod) -> Shape {
        let mut models: Vec<String> = p.gpu_spec.iter().map(|m| m.to_lowercase()).collect();
        models.sort();
        Shape {
            cpu: p.cpu_milli,
            milli: if p.num_gpu == 0 { 0 } else { p.gpu_milli },
            count: p.num_gpu,
            models,
        }
    }
}

/// How typical shapes are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeWeight {
    /// Each pod counts once.
    Pods,
    /// Each pod counts by its GPU request (GPU-milli), as the published simulator's
    /// `IsConsideredGpuResWeight`: rare multi-GPU shapes carry their real weight.
    GpuDemand,
}

/// The typical shapes: most frequent first until they cover 95% (by `weight`), with
/// their frequencies renormalised to sum to 1. CPU-only pods count only with `with_cpu`.
///
/// The published setup counts pods (`gpuResWeight: 0`) and includes CPU-only pods
/// (`isInvolvedCpuPods: true`); with it our FGD lands within 0.05 points of the
/// published means (BENCHMARKS.md).
pub fn typical_shapes(pods: &[TracePod], weight: ShapeWeight, with_cpu: bool) -> Vec<(Shape, f64)> {
    let mut counts: BTreeMap<Shape, u64> = BTreeMap::new();
    for p in pods.iter().filter(|p| with_cpu || p.num_gpu > 0) {
        let w = match weight {
            ShapeWeight::Pods => 1,
            ShapeWeight::GpuDemand => p.gpu_request(),
        };
        *counts.entry(Shape::of(p)).or_default() += w;
    }
    cover_95(counts)
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

/// What a node looks like to the policies. Nodes with equal states are interchangeable.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct State {
    model: u16,
    cap_cpu: u64,
    free_cpu: u64,
    free_mem: u64,
    /// Free GPU-milli per card, largest first.
    free: Vec<u16>,
    /// GPU-milli types of the sharing pods on the node (GpuClustering only).
    affinity: Vec<u32>,
}

impl State {
    fn free_total(&self) -> u64 {
        self.free.iter().map(|&f| f as u64).sum()
    }
    fn fully_free(&self) -> u32 {
        self.free.iter().filter(|&&f| f == 1000).count() as u32
    }
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
pub(crate) fn gpu_shapes(shapes: &[(Shape, f64)]) -> Vec<(Shape, f64)> {
    let mut gpu: Vec<(Shape, f64)> = shapes.iter().filter(|x| x.0.milli > 0).cloned().collect();
    let sum: f64 = gpu.iter().map(|x| x.1).sum();
    for x in &mut gpu {
        x.1 /= sum;
    }
    gpu
}

/// Per GPU model (indexed as `models`): the typical demand (frequency x GPU-milli) that
/// only that model can serve, a shape restricted to several models sharing it among them.
pub(crate) fn bound_demand(shapes: &[(Shape, f64)], models: &[String]) -> Vec<f64> {
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

/// Which fragmentation a [`Frag`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FragKind {
    /// [`fragmentation`]: FGD's measure.
    Fgd,
    /// [`capacity_fragmentation`]: maar's.
    Capacity,
}

/// A fragmentation measure memoised by node state.
struct Frag {
    kind: FragKind,
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

impl Frag {
    fn of(&mut self, model: u16, free_cpu: u64, free: &[u16]) -> f64 {
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
            FragKind::Fgd => fragmentation(m, free_cpu, &milli, &self.shapes),
            FragKind::Capacity => capacity_fragmentation(m, free_cpu, &milli, &self.shapes),
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
fn share_cards(s: &State, pod: &TracePod) -> Vec<u16> {
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
fn affinity_tag(p: &TracePod) -> u32 {
    if p.num_gpu == 1 && p.gpu_milli < 1000 {
        0
    } else {
        p.num_gpu
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The policy's verdict on a node state: the score, and which free-milli value of the
/// state's cards a sharing pod should take (None: the default choice).
struct Verdict {
    score: i64,
    /// maar's second criterion (larger is better); 0 for the other policies.
    aux: i64,
    card: Option<u16>,
}

const MAX_SPEC_GPU: u64 = 8000;
const MAX_SPEC_CPU: u64 = 128_000;

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

/// maar compares FGD's fragmentation change in steps of this many GPU-milli, so that
/// near-equal changes tie and its further criteria decide.
pub(crate) const MAAR_STEP: f64 = 50.0;

/// `frag` is FGD's measure; `cap` ([`capacity_fragmentation`]) is read by maar only.
fn score(policy: Policy, s: &State, pod: &TracePod, frag: &mut Frag, cap: &mut Frag) -> Verdict {
    let sharing = pod.num_gpu == 1 && pod.gpu_milli < 1000;
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
            let cpu = (pod.cpu_milli as f64 / MAX_SPEC_CPU as f64)
                * (s.free_cpu as f64 / MAX_SPEC_CPU as f64);
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
            let mut cards: Vec<u16> = s.free.clone();
            cards.sort_unstable();
            let mut need = pod.num_gpu;
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
            let cpu = (s.free_cpu - pod.cpu_milli.min(s.free_cpu)) as f64 / MAX_SPEC_CPU as f64;
            let gpu = (s.free_total() - pod.gpu_request().min(s.free_total())) as f64
                / MAX_SPEC_GPU as f64;
            plain(((1.0 - (0.5 * cpu + 0.5 * gpu)) * 100.0) as i64)
        }
        Policy::Fgd | Policy::Maar => {
            // FGD: the node (and, for a shared slice, the card) where fragmentation
            // grows least, as sigmoid(decrease / 1000) x 100. maar: the same decrease in
            // steps of MAAR_STEP, then the decrease of capacity fragmentation.
            let maar = policy == Policy::Maar;
            let before = frag.of(s.model, s.free_cpu, &s.free);
            let cap_before = if maar {
                cap.of(s.model, s.free_cpu, &s.free)
            } else {
                0.0
            };
            let cpu_after = s.free_cpu - pod.cpu_milli.min(s.free_cpu);
            let mut best: Option<Verdict> = None;
            let options: Vec<(Option<u16>, Vec<u16>)> = if sharing {
                share_cards(s, pod)
                    .into_iter()
                    .map(|c| (Some(c), take_share(&s.free, c, pod.gpu_milli)))
                    .collect()
            } else {
                vec![(None, take_whole(&s.free, pod.num_gpu))]
            };
            for (card, after) in options {
                let delta = before - frag.of(s.model, cpu_after, &after);
                let v = if maar {
                    Verdict {
                        score: (delta / MAAR_STEP).floor() as i64,
                        aux: ((cap_before - cap.of(s.model, cpu_after, &after)) * 1000.0).round()
                            as i64,
                        card,
                    }
                } else {
                    Verdict {
                        score: (sigmoid(delta / 1000.0) * 100.0) as i64,
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

/// Places trace pods one at a time on a cluster built from a node list, under one
/// policy. [`replay`] drives it through the whole experiment; tests drive it pod by pod.
pub struct Replayer {
    pub cluster: Cluster,
    policy: Policy,
    rng: ChaCha8Rng,
    frag: Frag,
    node_model: Vec<u16>,
    affinity: Vec<Vec<u32>>,
    groups: BTreeMap<State, Vec<NodeId>>,
    node_state: Vec<State>,
    capacity: u64,
    serial: u64,
    ties: Ties,
    /// Each node's place in the node list (a seeded shuffle), for [`Ties::NodeOrder`].
    rank: Vec<u32>,
    /// maar's capacity fragmentation, against the GPU shapes among `shapes`.
    cap: Frag,
    /// Per GPU model: idle GPU-milli, and the typical demand that only it can serve
    /// (shapes restricted to it, shared among their allowed models). maar's pressure.
    free_by_model: Vec<u64>,
    bound_demand: Vec<f64>,
}

/// maar keeps a GPU pod off models whose pressure (bound demand per idle GPU-milli)
/// is more than this factor above the least pressed model among its candidates.
pub(crate) const PRESSURE_SLACK: f64 = 1.5;

impl Replayer {
    /// A cluster of `nodes`; fragmentation is measured against `shapes`.
    pub fn new(
        nodes: &[TraceNode],
        shapes: Vec<(Shape, f64)>,
        policy: Policy,
        seed: u64,
    ) -> Replayer {
        let mut c = Cluster::new(SchedConfig {
            backfill: false,
            preemption: false,
            ..SchedConfig::default()
        });
        c.add_pool(Pool {
            name: "trace".into(),
            kind: PoolKind::Training,
            selector: BTreeMap::new(),
            overcommit: Overcommit::default(),
            lend_to: Vec::new(),
        });
        let mut quotas = BTreeMap::new();
        quotas.insert(0, Quota::default());
        c.add_project(Project {
            name: "trace".into(),
            department: "-".into(),
            quotas,
        });
        let mut models: Vec<String> = vec![String::new()];
        let mut node_model: Vec<u16> = Vec::new();
        for n in nodes {
            let model = n.model.to_lowercase();
            let mid = match models.iter().position(|m| *m == model) {
                Some(i) => i,
                None => {
                    models.push(model.clone());
                    models.len() - 1
                }
            } as u16;
            node_model.push(if n.gpus == 0 { 0 } else { mid });
            let mut labels = BTreeMap::new();
            if n.gpus > 0 {
                labels.insert(LABEL_MODEL.to_string(), model.clone());
                labels.insert(LABEL_COUNT.to_string(), n.gpus.to_string());
            }
            let gpus = (0..n.gpus)
                .map(|g| Gpu::new(g, format!("{}-{g}", n.name), model.clone(), 1000, false))
                .collect();
            // Disk is not part of the trace: one pebibyte per node never binds.
            c.add_node(Node::new(
                n.name.clone(),
                labels,
                n.cpu_milli,
                n.memory_mib << 20,
                1 << 50,
                gpus,
            ));
        }
        let cap_shapes = gpu_shapes(&shapes);
        let bound_demand = bound_demand(&shapes, &models);
        let mut free_by_model = vec![0u64; models.len()];
        for (n, &m) in nodes.iter().zip(&node_model) {
            free_by_model[m as usize] += n.gpus as u64 * 1000;
        }
        let mut rank: Vec<u32> = (0..nodes.len() as u32).collect();
        rank.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ NODE_ORDER_SALT));
        let mut r = Replayer {
            capacity: nodes.iter().map(|n| n.gpus as u64 * 1000).sum(),
            cluster: c,
            policy,
            rng: ChaCha8Rng::seed_from_u64(seed),
            cap: Frag {
                kind: FragKind::Capacity,
                shapes: cap_shapes,
                models: models.clone(),
                memo: HashMap::default(),
                memo_wide: HashMap::new(),
            },
            frag: Frag {
                kind: FragKind::Fgd,
                shapes,
                models,
                memo: HashMap::default(),
                memo_wide: HashMap::new(),
            },
            node_model,
            affinity: vec![Vec::new(); nodes.len()],
            groups: BTreeMap::new(),
            node_state: Vec::new(),
            serial: 0,
            ties: Ties::NodeOrder,
            rank,
            free_by_model,
            bound_demand,
        };
        for id in 0..nodes.len() {
            let s = r.state_of(id);
            r.groups.entry(s.clone()).or_default().push(id as NodeId);
            r.node_state.push(s);
        }
        r
    }

    fn state_of(&self, id: usize) -> State {
        let n = &self.cluster.nodes[id];
        let mut free: Vec<u16> = n.gpus.iter().map(|g| g.free_milli() as u16).collect();
        free.sort_unstable_by(|a, b| b.cmp(a));
        let mut affinity = if self.policy == Policy::GpuClustering {
            self.affinity[id].clone()
        } else {
            Vec::new()
        };
        affinity.sort_unstable();
        affinity.dedup();
        State {
            model: self.node_model[id],
            cap_cpu: n.cpu_milli,
            free_cpu: n.cpu_milli - n.alloc_cpu,
            free_mem: n.memory - n.alloc_mem,
            free,
            affinity,
        }
    }

    /// How ties between equally scored nodes are broken (default [`Ties::NodeOrder`]).
    pub fn with_ties(mut self, ties: Ties) -> Replayer {
        self.ties = ties;
        self
    }

    /// Places one pod; returns the node it went to, or None (it is marked Failed).
    pub fn place(&mut self, pod: &TracePod) -> Option<NodeId> {
        self.serial += 1;
        let sharing = pod.num_gpu == 1 && pod.gpu_milli < 1000;
        let spec = JobSpec {
            name: format!("{}-{}", pod.name, self.serial),
            project: "trace".into(),
            pool: "trace".into(),
            kind: JobKind::Train,
            priority: PRIORITY_MEDIUM,
            replicas: 1,
            gpu: GpuRequest {
                count: pod.num_gpu,
                memory_per_card: None,
                models: pod.gpu_spec.iter().map(|m| m.to_lowercase()).collect(),
                shared: sharing,
                milli: sharing.then_some(pod.gpu_milli),
                vendor: None,
                resource: None,
            },
            cpu_milli: pod.cpu_milli,
            memory: pod.memory_mib << 20,
            disk: 0,
            affinity: Affinity::SameNode,
            restart: RestartPolicy::Never,
            est_runtime_s: None,
            image: String::new(),
            command: Vec::new(),
            node_selector: Default::default(),
        };
        let c = &mut self.cluster;
        let job = c.submit(spec).expect("unique pod names");

        // Score each distinct feasible state once.
        let mut cands: Vec<(&State, &Vec<NodeId>, Verdict)> = Vec::new();
        for (s, ids) in &self.groups {
            if s.free_cpu < pod.cpu_milli || s.free_mem < pod.memory_mib << 20 {
                continue;
            }
            if pod.num_gpu > 0
                && (s
                    .free
                    .iter()
                    .filter(|&&f| f as u32 >= pod.gpu_milli)
                    .count() as u32)
                    < pod.num_gpu
            {
                continue;
            }
            let rep = ids[0];
            let node = &c.nodes[rep as usize];
            if fit(
                node,
                rep,
                c.overcommit_of(node),
                &c.jobs[job as usize].spec,
                1,
            )
            .is_err()
            {
                continue;
            }
            let v = score(self.policy, s, pod, &mut self.frag, &mut self.cap);
            cands.push((s, ids, v));
        }
        if self.policy == Policy::BestFit && !cands.is_empty() {
            // The simulator normalises BestFit scores to 0..=100 over the nodes.
            let hi = cands.iter().map(|c| c.2.score).max().unwrap_or(0);
            let lo = cands.iter().map(|c| c.2.score).min().unwrap_or(0);
            for x in &mut cands {
                x.2.score = if hi == lo {
                    0
                } else {
                    (x.2.score - lo) * 100 / (hi - lo)
                };
            }
        }
        if self.policy == Policy::Maar && pod.gpu_request() > 0 {
            // maar, first: stay off GPU models that typical pods restricted to them will
            // need (pressure well above the least pressed candidate model).
            let (bound, free) = (&self.bound_demand, &self.free_by_model);
            let pressure = |m: u16| bound[m as usize] / free[m as usize].max(1) as f64;
            let least = cands
                .iter()
                .map(|x| pressure(x.0.model))
                .fold(f64::INFINITY, f64::min);
            cands.retain(|x| pressure(x.0.model) <= least * PRESSURE_SLACK);
        }
        let top = cands.iter().map(|x| x.2.score).max().unwrap_or(0);
        let mut ties: Vec<&(&State, &Vec<NodeId>, Verdict)> =
            cands.iter().filter(|x| x.2.score == top).collect();
        if self.policy == Policy::Maar {
            // maar, then: FGD's fragmentation change (in steps), the most capacity
            // fragmentation removed; then a CPU-only pod goes where the fewest GPUs are
            // idle (its CPU strands no GPU) and a GPU pod where the fewest resources are
            // left (best fit); then the node order.
            let most = ties.iter().map(|x| x.2.aux).max().unwrap_or(0);
            ties.retain(|x| x.2.aux == most);
            let key = |st: &State| -> i64 {
                let cpu_after = st.free_cpu.saturating_sub(pod.cpu_milli) as i64;
                let gpu_after = st.free_total() as i64 - pod.gpu_request() as i64;
                if pod.num_gpu == 0 {
                    st.free_total() as i64 * 1_000_000 + cpu_after
                } else {
                    cpu_after * MAX_SPEC_GPU as i64 / MAX_SPEC_CPU as i64 + gpu_after
                }
            };
            let best = ties.iter().map(|x| key(x.0)).min().unwrap_or(0);
            ties.retain(|x| key(x.0) == best);
        }
        let picked = if self.policy == Policy::Random || self.ties == Ties::Random {
            pick(&ties, &mut self.rng)
        } else {
            first_in_order(&ties, &self.rank)
        };
        let Some((node_id, card)) = picked else {
            c.complete(job, false, "no node fits (replay: not retried)");
            return None;
        };
        let node = &c.nodes[node_id as usize];
        let mut p = fit(
            node,
            node_id,
            c.overcommit_of(node),
            &c.jobs[job as usize].spec,
            1,
        )
        .expect("the chosen node fits: it was checked in this state");
        let card = if self.policy == Policy::Random && sharing {
            // Random: a random card among those with room.
            let fits: Vec<u16> = node
                .gpus
                .iter()
                .map(|g| g.free_milli() as u16)
                .filter(|&f| f as u32 >= pod.gpu_milli)
                .collect();
            fits.get(self.rng.gen_range(0..fits.len().max(1))).copied()
        } else {
            card
        };
        if let (Some(card), Some(slot)) = (card, p.gpus.first_mut()) {
            // Take the lowest-index card with exactly that much free.
            if let Some(g) = node.gpus.iter().find(|g| g.free_milli() as u16 == card) {
                slot.gpu = g.index;
            }
        }
        self.free_by_model[self.node_model[node_id as usize] as usize] -= pod.gpu_request();
        c.allocate(job, p);
        c.set_phase(job, Phase::Running);
        if self.policy == Policy::GpuClustering && pod.num_gpu > 0 {
            self.affinity[node_id as usize].push(affinity_tag(pod));
        }
        // Move the node to its new state group.
        let old = self.node_state[node_id as usize].clone();
        if let Some(ids) = self.groups.get_mut(&old) {
            ids.retain(|&x| x != node_id);
            if ids.is_empty() {
                self.groups.remove(&old);
            }
        }
        let new = self.state_of(node_id as usize);
        self.groups.entry(new.clone()).or_default().push(node_id);
        self.node_state[node_id as usize] = new;
        Some(node_id)
    }

    /// Allocated GPU-milli as a share of capacity, percent.
    pub fn alloc_pct(&self) -> f64 {
        let allocated: u64 = self
            .cluster
            .nodes
            .iter()
            .flat_map(|n| n.gpus.iter())
            .map(|g| g.used_milli() as u64)
            .sum();
        allocated as f64 * 100.0 / self.capacity.max(1) as f64
    }

    /// Cluster fragmentation as a share of GPU capacity, percent.
    pub fn frag_pct(&mut self) -> f64 {
        let mut sum = 0.0;
        for s in &self.node_state {
            sum += self.frag.of(s.model, s.free_cpu, &s.free);
        }
        sum * 100.0 / self.capacity.max(1) as f64
    }
}

/// Runs one replay.
pub fn replay(nodes: &[TraceNode], pods: &[TracePod], cfg: &ReplayConfig) -> ReplayResult {
    let started = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    // Arrival order: the trace shuffled, then random copies up to inflate x capacity.
    let capacity: u64 = nodes.iter().map(|n| n.gpus as u64 * 1000).sum();
    let mut order: Vec<usize> = (0..pods.len()).collect();
    order.shuffle(&mut rng);
    let mut demand: u64 = pods.iter().map(|p| p.gpu_request()).sum();
    let target = (cfg.inflate * capacity as f64) as u64;
    if pods.iter().any(|p| p.gpu_request() > 0) {
        while demand < target {
            let i = rng.gen_range(0..pods.len());
            demand += pods[i].gpu_request();
            order.push(i);
        }
    }
    let shapes = typical_shapes(pods, cfg.shape_weight, cfg.cpu_shapes);
    let mut r =
        Replayer::new(nodes, shapes, cfg.policy, cfg.seed.wrapping_add(1)).with_ties(cfg.ties);
    let mut curve = Vec::new();
    let mut arrived: u64 = 0;
    let mut next_pct: u32 = 0;
    let (mut placed, mut failed) = (0usize, 0usize);
    for &pi in &order {
        let pod = &pods[pi];
        match r.place(pod) {
            Some(_) => placed += 1,
            None => failed += 1,
        }
        arrived += pod.gpu_request();
        while capacity > 0 && arrived * 100 >= next_pct as u64 * capacity && next_pct <= 130 {
            curve.push(CurvePoint {
                arrived_pct: next_pct,
                alloc_pct: r.alloc_pct(),
                frag_pct: r.frag_pct(),
            });
            next_pct += 1;
        }
    }
    let at100 = curve
        .iter()
        .find(|p| p.arrived_pct == 100)
        .or(curve.last())
        .map(|p| p.alloc_pct)
        .unwrap_or(0.0);
    ReplayResult {
        policy: cfg.policy,
        seed: cfg.seed,
        total_gpus: (capacity / 1000) as u32,
        alloc_pct_at_100: at100,
        unallocated_gpus_at_100: capacity as f64 / 1000.0 * (100.0 - at100) / 100.0,
        curve,
        pods_placed: placed,
        pods_failed: failed,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}

/// The tied node that comes first in the node list.
fn first_in_order(
    ties: &[&(&State, &Vec<NodeId>, Verdict)],
    rank: &[u32],
) -> Option<(NodeId, Option<u16>)> {
    ties.iter()
        .flat_map(|t| t.1.iter().map(move |&id| (rank[id as usize], id, t.2.card)))
        .min_by_key(|x| x.0)
        .map(|(_, id, card)| (id, card))
}

/// Uniformly random node among the tied best states (by node count).
fn pick(
    ties: &[&(&State, &Vec<NodeId>, Verdict)],
    rng: &mut ChaCha8Rng,
) -> Option<(NodeId, Option<u16>)> {
    let total: usize = ties.iter().map(|t| t.1.len()).sum();
    if total == 0 {
        return None;
    }
    let mut r = rng.gen_range(0..total);
    for t in ties {
        if r < t.1.len() {
            return Some((t.1[r], t.2.card));
        }
        r -= t.1.len();
    }
    None
}

/// Workload families of the paper, built from a trace by seeded resampling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VariantKind {
    /// `percent` of GPU pods share a GPU (drawn from the trace's sharing pods).
    Sharing,
    /// `percent` of GPU pods require one GPU model (chosen in proportion to each
    /// model's GPUs in the node list).
    GpuSpec,
    /// `percent` of GPU pods ask for several GPUs (drawn from the trace's multi-GPU pods).
    MultiGpu,
    /// `percent` of all pods are CPU-only (drawn from the trace's CPU-only pods).
    Cpu,
}

/// Builds a workload variant: the same number of pods (GPU pods for all kinds but
/// `Cpu`), each drawn from the matching pool of the original trace. Deterministic in
/// `seed`.
pub fn variant(
    pods: &[TracePod],
    nodes: &[TraceNode],
    kind: VariantKind,
    percent: f64,
    seed: u64,
) -> Vec<TracePod> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let frac = (percent / 100.0).clamp(0.0, 1.0);
    let gpu: Vec<&TracePod> = pods.iter().filter(|p| p.num_gpu > 0).collect();
    let cpu: Vec<&TracePod> = pods.iter().filter(|p| p.num_gpu == 0).collect();
    let pick_from = |pool: &[&TracePod], rng: &mut ChaCha8Rng| -> Option<TracePod> {
        (!pool.is_empty()).then(|| pool[rng.gen_range(0..pool.len())].clone())
    };
    let mut out: Vec<TracePod> = Vec::new();
    match kind {
        VariantKind::Sharing | VariantKind::MultiGpu => {
            let is_in = |p: &TracePod| match kind {
                VariantKind::Sharing => p.num_gpu == 1 && p.gpu_milli < 1000,
                _ => p.num_gpu > 1,
            };
            let inside: Vec<&TracePod> = gpu.iter().copied().filter(|p| is_in(p)).collect();
            let outside: Vec<&TracePod> = gpu.iter().copied().filter(|p| !is_in(p)).collect();
            for _ in 0..gpu.len() {
                let want_in = rng.gen_bool(frac);
                let pool = if want_in && !inside.is_empty() || outside.is_empty() {
                    &inside
                } else {
                    &outside
                };
                out.extend(pick_from(pool, &mut rng));
            }
            out.extend(cpu.iter().map(|p| (*p).clone()));
        }
        VariantKind::GpuSpec => {
            let mut models: Vec<(String, u64)> = Vec::new();
            for n in nodes.iter().filter(|n| n.gpus > 0) {
                match models.iter_mut().find(|m| m.0 == n.model) {
                    Some(m) => m.1 += n.gpus as u64,
                    None => models.push((n.model.clone(), n.gpus as u64)),
                }
            }
            let total: u64 = models.iter().map(|m| m.1).sum();
            for p in pods {
                let mut p = p.clone();
                if p.num_gpu > 0 && total > 0 && rng.gen_bool(frac) {
                    let mut r = rng.gen_range(0..total);
                    for (m, w) in &models {
                        if r < *w {
                            p.gpu_spec = vec![m.clone()];
                            break;
                        }
                        r -= w;
                    }
                }
                out.push(p);
            }
        }
        VariantKind::Cpu => {
            // Keep the GPU pods; CPU-only pods make up `percent` of the whole.
            let n_cpu = if frac >= 1.0 {
                cpu.len()
            } else {
                (gpu.len() as f64 * frac / (1.0 - frac)).round() as usize
            };
            out.extend(gpu.iter().map(|p| (*p).clone()));
            for _ in 0..n_cpu {
                out.extend(pick_from(&cpu, &mut rng));
            }
        }
    }
    out.shuffle(&mut rng);
    for (i, p) in out.iter_mut().enumerate() {
        p.name = format!("{}-v{i:05}", p.name);
    }
    out
}

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
