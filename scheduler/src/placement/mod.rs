//! Placement: which node a pod goes to, one file per policy (the Kubernetes scheduler
//! framework's plugins and the published simulator's are the model), the measures they
//! read (`measure.rs`), and one ranking loop (`rank.rs`) that the live scheduling cycle
//! (`schedule.rs`) and the trace replay (`replay.rs`) share; this module imports
//! neither.
//!
//! - [`Policy`]: the registry, one line per policy: random, dotprod, gpuclustering,
//!   gpupacking, bestfit (the published simulator's), fgd ("Beware of Fragmentation",
//!   ATC'23) and maar's own. Each is a [`Plugin`]: its score of a pod ([`Ask`]) on a
//!   node state ([`NodeView`]), its normalisation over the candidates, and whether it
//!   reads fragmentation, GPU-clustering tags, model pressure or a last criterion.
//! - [`rank::best`]: every candidate scored, normalised, kept off pressed models, the
//!   best kept; the caller breaks what tie remains (node order, a drawn node).
//! - [`fragmentation`] (FGD's measure) and [`capacity_fragmentation`] (maar's), against
//!   typical [`Shape`]s ([`cover_95`]); [`Memo`] keeps them per node state.

mod bestfit;
mod dotprod;
mod fgd;
mod gpuclustering;
mod gpupacking;
mod maar;
mod measure;
mod random;
pub mod rank;

pub use fgd::fgd_score;
pub use maar::{maar_leftover, maar_order};
pub use measure::{
    bound_demand, capacity_fragmentation, cover_95, fragmentation, gpu_shapes, with_scarce,
    Measure, Memo, Shape, SCARCE_SHARE,
};

/// The policies, one line each: the variant operators name (its lower-case name, as the
/// plugin says it) and its plugin's file. A new policy is its file and its line here.
macro_rules! policies {
    ($($(#[$attr:meta])* $variant:ident => $file:ident::$plugin:ident,)*) => {
        /// Placement policies: the six of the paper, and maar's own.
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(rename_all = "lowercase")]
        pub enum Policy {
            $($(#[$attr])* $variant,)*
        }

        const POLICIES: usize = [$(stringify!($variant)),*].len();

        impl Policy {
            pub const ALL: [Policy; POLICIES] = [$(Policy::$variant),*];

            /// The policy's plugin: its score and what it reads.
            pub fn plugin(self) -> &'static dyn Plugin {
                match self {
                    $(Policy::$variant => &$file::$plugin,)*
                }
            }
        }
    };
}

policies! {
    Random => random::Random,
    DotProd => dotprod::DotProd,
    GpuClustering => gpuclustering::GpuClustering,
    GpuPacking => gpupacking::GpuPacking,
    BestFit => bestfit::BestFit,
    Fgd => fgd::Fgd,
    #[default]
    Maar => maar::Maar,
}

impl Policy {
    pub fn name(self) -> &'static str {
        self.plugin().name()
    }

    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
    }
}

/// A placement policy: how it scores a pod on a node state, and what it reads.
pub trait Plugin: Sync {
    /// The name operators give (`--placement`, `--policy`, a scenario's `placement:`).
    fn name(&self) -> &'static str;

    /// The score of placing `pod` on a node in state `s` (0..=100 as the published
    /// simulator's, larger is better; maar's is its first criterion), and for a shared
    /// slice the card it would take.
    fn score(&self, s: &NodeView, pod: &Ask, m: &mut Measures) -> Verdict;

    /// The scores normalised over every candidate (as they are, unless the policy
    /// normalises).
    fn normalise(&self, _verdicts: &mut [Verdict]) {}

    /// Whether it reads fragmentation ([`Measures`] built against the typical shapes);
    /// otherwise its measures may be empty.
    fn reads_fragmentation(&self) -> bool {
        false
    }

    /// Whether it reads [`NodeView::affinity`] (GPU-clustering tags).
    fn reads_affinity(&self) -> bool {
        false
    }

    /// Whether a GPU pod's candidates on GPU models under pressure are left out first.
    fn eases_pressure(&self) -> bool {
        false
    }

    /// The last criterion among the best scored (smaller is better); none by default.
    fn leftover(&self, _s: &NodeView, _pod: &Ask) -> Option<i64> {
        None
    }
}

/// The fragmentation measures a policy reads: FGD's against the typical shapes, and
/// capacity fragmentation against the typical GPU shapes (each kept per node state).
pub struct Measures<'a> {
    pub frag: Memo<'a>,
    pub cap: Memo<'a>,
}

impl<'a> Measures<'a> {
    /// Against `shapes` (the typical task shapes) and the GPU shapes among them,
    /// `models` naming the model ids of the node states.
    pub fn new(shapes: Vec<(Shape, f64)>, models: Vec<String>) -> Measures<'static> {
        Measures {
            cap: Memo::new(Measure::Capacity, gpu_shapes(&shapes), models.clone()),
            frag: Memo::new(Measure::Fgd, shapes, models),
        }
    }

    /// The same, borrowing shapes kept elsewhere (`gpu` = [`gpu_shapes`] of `shapes`).
    pub fn of(
        shapes: &'a [(Shape, f64)],
        gpu: &'a [(Shape, f64)],
        models: &'a [String],
    ) -> Measures<'a> {
        Measures {
            frag: Memo::new(Measure::Fgd, shapes, models),
            cap: Memo::new(Measure::Capacity, gpu, models),
        }
    }

    /// Measures that hold nothing, for a policy that reads none.
    pub fn none() -> Measures<'static> {
        Measures::of(&[], &[], &[])
    }
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
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeView<'a> {
    pub model: u16,
    pub free_cpu: u64,
    pub free: &'a [u16],
    pub affinity: &'a [u32],
    /// For a shared slice, the card (its free milli) the caller already chose; None:
    /// the policy chooses among the cards it fits. The live cycle chooses by card
    /// memory and MIG profile, which the policies do not see; the trace replay lets
    /// the policy choose, as the published simulator does.
    pub card: Option<u16>,
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

/// maar keeps a GPU pod off models whose pressure (bound demand per idle GPU-milli)
/// is more than this factor above the least pressed model among its candidates.
pub const PRESSURE_SLACK: f64 = 1.5;

/// The distinct free-milli values of the cards a sharing pod could take (a state's
/// cards are sorted, so equal values are adjacent); only the card the caller chose,
/// when it did ([`NodeView::card`]).
fn share_cards(s: &NodeView, pod: &Ask) -> Vec<u16> {
    if let Some(card) = s.card {
        return vec![card];
    }
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

impl Verdict {
    /// A score alone (no second criterion, the default card).
    pub fn plain(score: i64) -> Verdict {
        Verdict {
            score,
            aux: 0,
            card: None,
        }
    }
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

/// The best of the ways `pod` can be placed on `s` (whole cards: the free ones; a slice:
/// each distinct free value among the cards it fits), by `key` of the CPU and cards
/// left after it; the first of equal keys. Larger keys are better.
fn best_option(s: &NodeView, pod: &Ask, mut key: impl FnMut(u64, &[u16]) -> (i64, i64)) -> Verdict {
    let cpu_after = s.free_cpu - pod.cpu.min(s.free_cpu);
    let options: Vec<(Option<u16>, Vec<u16>)> = if pod.sharing() {
        share_cards(s, pod)
            .into_iter()
            .map(|c| (Some(c), take_share(s.free, c, pod.gpu_milli)))
            .collect()
    } else {
        vec![(None, take_whole(s.free, pod.count))]
    };
    let mut best: Option<Verdict> = None;
    for (card, after) in options {
        let (score, aux) = key(cpu_after, &after);
        if best
            .as_ref()
            .is_none_or(|b| (score, aux) > (b.score, b.aux))
        {
            best = Some(Verdict { score, aux, card });
        }
    }
    best.unwrap_or(Verdict::plain(0))
}
