//! maar's own policy. A GPU pod first stays off GPU models under pressure (the typical
//! demand only that model can serve, per idle GPU, well above the least pressed
//! candidate's: [`super::ease_pressure`]); then FGD's score of the fragmentation
//! removed (against the typical shapes and the rare ones few nodes can hold:
//! [`super::with_scarce`], which the caller builds the measures from); then the
//! capacity fragmentation removed (idle GPU that copies of those GPU shapes could not
//! use: [`super::capacity_fragmentation`]); then what is
//! left over ([`maar_leftover`]: best fit, or for a CPU-only pod the fewest idle GPUs).

use super::fgd::fgd_score;
use super::{best_option, Ask, Measures, NodeView, Plugin, Verdict, MAX_SPEC_CPU, MAX_SPEC_GPU};

pub struct Maar;

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

impl Plugin for Maar {
    fn name(&self) -> &'static str {
        "maar"
    }

    fn reads_fragmentation(&self) -> bool {
        true
    }

    fn eases_pressure(&self) -> bool {
        true
    }

    fn score(&self, s: &NodeView, pod: &Ask, m: &mut Measures) -> Verdict {
        let before = m.frag.of(s.model, s.free_cpu, s.free);
        let cap_before = m.cap.of(s.model, s.free_cpu, s.free);
        best_option(s, pod, |cpu_after, after| {
            maar_order(
                before - m.frag.of(s.model, cpu_after, after),
                cap_before - m.cap.of(s.model, cpu_after, after),
            )
        })
    }

    fn leftover(&self, s: &NodeView, pod: &Ask) -> Option<i64> {
        Some(maar_leftover(pod, s.free_cpu, s.free_total()))
    }
}
