//! GpuClustering: GPU pods of one kind together. A node whose GPU pods are all of the
//! pod's class ([`affinity_tag`]) first, then nodes with that class among others, then
//! empty nodes, then the rest; within a tier, the fuller node.

use super::{affinity_tag, Ask, Measures, NodeView, Plugin, Verdict, MAX_SPEC_GPU};

pub struct GpuClustering;

impl Plugin for GpuClustering {
    fn name(&self) -> &'static str {
        "gpuclustering"
    }

    fn reads_affinity(&self) -> bool {
        true
    }

    fn score(&self, s: &NodeView, pod: &Ask, _m: &mut Measures) -> Verdict {
        if pod.gpu_request() == 0 {
            return Verdict::plain(0);
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
        Verdict::plain(base + tier)
    }
}
