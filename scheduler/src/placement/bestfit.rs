//! BestFit: the node with the least CPU and GPU left after the pod (each normalised by
//! the largest node spec, weighed equally), the scores normalised to 0..=100 over the
//! candidates as the published simulator normalises them.

use super::{Ask, Measures, NodeView, Plugin, Verdict, MAX_SPEC_CPU, MAX_SPEC_GPU};

pub struct BestFit;

impl Plugin for BestFit {
    fn name(&self) -> &'static str {
        "bestfit"
    }

    fn score(&self, s: &NodeView, pod: &Ask, _m: &mut Measures) -> Verdict {
        let cpu = (s.free_cpu - pod.cpu.min(s.free_cpu)) as f64 / MAX_SPEC_CPU as f64;
        let gpu =
            (s.free_total() - pod.gpu_request().min(s.free_total())) as f64 / MAX_SPEC_GPU as f64;
        Verdict::plain(((1.0 - (0.5 * cpu + 0.5 * gpu)) * 100.0) as i64)
    }

    fn normalise(&self, v: &mut [Verdict]) {
        let hi = v.iter().map(|x| x.score).max().unwrap_or(0);
        let lo = v.iter().map(|x| x.score).min().unwrap_or(0);
        for x in v {
            x.score = if hi == lo {
                0
            } else {
                (x.score - lo) * 100 / (hi - lo)
            };
        }
    }
}
