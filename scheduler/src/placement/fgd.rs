//! FGD ("Beware of Fragmentation", ATC'23): the node, and for a shared slice the card,
//! where the fragmentation of the idle GPUs against the typical task shapes grows
//! least, scored `sigmoid(decrease / 1000) x 100` as the published simulator.

use super::{best_option, sigmoid, Ask, Measures, NodeView, Plugin, Verdict};

pub struct Fgd;

/// FGD's score for the fragmentation a placement removes (GPU-milli; negative when it
/// adds some): `sigmoid(removed / 1000) x 100`, an integer as the published simulator's.
/// Near zero one point is 40 GPU-milli; large changes of either sign are compressed
/// (placements that fragment a lot, or clear a lot, score alike).
pub fn fgd_score(removed: f64) -> i64 {
    (sigmoid(removed / 1000.0) * 100.0) as i64
}

impl Plugin for Fgd {
    fn name(&self) -> &'static str {
        "fgd"
    }

    fn reads_fragmentation(&self) -> bool {
        true
    }

    fn score(&self, s: &NodeView, pod: &Ask, m: &mut Measures) -> Verdict {
        let before = m.frag.of(s.model, s.free_cpu, s.free);
        best_option(s, pod, |cpu_after, after| {
            let removed = before - m.frag.of(s.model, cpu_after, after);
            (fgd_score(removed), 0)
        })
    }
}
