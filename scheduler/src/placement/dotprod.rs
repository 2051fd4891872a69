//! DotProd (Tetris), as the published artifact runs it (`-DotProd 1000 -gpusel best
//! -dimext merge -norm max`): the dot product of the pod's request and the node's free
//! resources, CPU and the GPU-milli of all the node's cards together ("merge"), each
//! normalised by the largest node spec ("max"); a smaller product scores higher. A
//! shared slice is scored by the node as a whole and takes the default card, the
//! tightest that fits ("best").

use super::{Ask, Measures, NodeView, Plugin, Verdict, MAX_SPEC_CPU, MAX_SPEC_GPU};

pub struct DotProd;

impl Plugin for DotProd {
    fn name(&self) -> &'static str {
        "dotprod"
    }

    fn score(&self, s: &NodeView, pod: &Ask, _m: &mut Measures) -> Verdict {
        let cpu =
            (pod.cpu as f64 / MAX_SPEC_CPU as f64) * (s.free_cpu as f64 / MAX_SPEC_CPU as f64);
        let gpu = (pod.gpu_request() as f64 / MAX_SPEC_GPU as f64)
            * (s.free_total() as f64 / MAX_SPEC_GPU as f64);
        Verdict::plain(((1.0 - (cpu + gpu) / 2.0) * 100.0) as i64)
    }
}
