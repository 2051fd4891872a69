//! DotProd (Tetris): the dot product of the pod's request and the node's free
//! resources, each normalised by the largest node spec; a smaller product scores higher.
//! A sharing pod is matched against each card it could take.

use super::{share_cards, Ask, Measures, NodeView, Plugin, Verdict, MAX_SPEC_CPU, MAX_SPEC_GPU};

pub struct DotProd;

impl Plugin for DotProd {
    fn name(&self) -> &'static str {
        "dotprod"
    }

    fn score(&self, s: &NodeView, pod: &Ask, _m: &mut Measures) -> Verdict {
        let cpu =
            (pod.cpu as f64 / MAX_SPEC_CPU as f64) * (s.free_cpu as f64 / MAX_SPEC_CPU as f64);
        let groups: Vec<Option<u16>> = if pod.sharing() {
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
}
