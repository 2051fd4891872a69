//! GpuPacking: a GPU pod on cards already in use first (the fewest milli left on the
//! cards it takes), then on nodes whose free cards it takes fewest of, empty nodes last.

use super::{Ask, Measures, NodeView, Plugin, Verdict};

pub struct GpuPacking;

impl Plugin for GpuPacking {
    fn name(&self) -> &'static str {
        "gpupacking"
    }

    fn score(&self, s: &NodeView, pod: &Ask, _m: &mut Measures) -> Verdict {
        if pod.gpu_request() == 0 {
            return Verdict::plain(0);
        }
        let fully = s.fully_free();
        if fully as usize == s.free.len() {
            return Verdict::plain((33 - fully as i64).max(fully as i64));
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
            Verdict::plain((50 - fully_used as i64).max(33))
        } else {
            Verdict::plain((100 - ratio / 10).max(50))
        }
    }
}
