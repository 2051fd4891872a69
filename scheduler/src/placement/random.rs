//! Random: every node that fits scores alike; the caller draws one of them (the
//! published simulator's baseline).

use super::{Ask, Measures, NodeView, Plugin, Verdict};

pub struct Random;

impl Plugin for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    fn score(&self, _s: &NodeView, _pod: &Ask, _m: &mut Measures) -> Verdict {
        Verdict::plain(0)
    }
}
