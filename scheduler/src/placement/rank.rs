//! The one ranking loop: the live scheduling cycle (`schedule.rs`) and the trace replay
//! (`replay.rs`) hand it the nodes (or node states) a pod fits on, and it keeps those
//! the policy ranks best. Each caller breaks what tie remains its own way (the live
//! cycle by its candidates' order, the replay by the node list's order or a draw).

use super::{ease_pressure, Ask, Measures, NodeView, Policy, Verdict};

/// The candidates `policy` ranks best for `pod`, in the order given, with their
/// verdicts: every candidate scored by the policy's plugin; the scores normalised over
/// the candidates (BestFit); for a GPU pod under a policy that eases pressure (maar),
/// the candidates on GPU models under pressure left out (`pressure` of a model id);
/// the highest score, then the highest second criterion; then the smallest leftover
/// where the policy has one (maar). Empty when there is no candidate.
pub fn best<T>(
    policy: Policy,
    pod: &Ask,
    cands: Vec<(T, NodeView)>,
    m: &mut Measures,
    pressure: impl Fn(u16) -> f64,
) -> Vec<(T, Verdict)> {
    let plugin = policy.plugin();
    let mut verdicts = score_all(plugin, pod, cands.iter().map(|c| &c.1), m);
    plugin.normalise(&mut verdicts);
    let mut scored: Vec<(T, NodeView, Verdict)> = cands
        .into_iter()
        .zip(verdicts)
        .map(|((t, view), v)| (t, view, v))
        .collect();
    if plugin.eases_pressure() && pod.gpu_request() > 0 {
        ease_pressure(&mut scored, |c| pressure(c.1.model));
    }
    let top = scored.iter().map(|c| (c.2.score, c.2.aux)).max();
    scored.retain(|c| Some((c.2.score, c.2.aux)) == top);
    if let Some(least) = scored
        .iter()
        .filter_map(|c| plugin.leftover(&c.1, pod))
        .min()
    {
        scored.retain(|c| plugin.leftover(&c.1, pod) == Some(least));
    }
    scored.into_iter().map(|(t, _, v)| (t, v)).collect()
}

/// Each candidate's score by `plugin`, in order. A node in the very state of the one
/// before it scores as that one did (a score is the plugin's of the state alone, the
/// measures a memo): the candidates are often nodes alike, the first few of a model
/// with as many cards free, and scoring a state takes its measures.
fn score_all<'v, 'a: 'v>(
    plugin: &dyn super::Plugin,
    pod: &Ask,
    views: impl Iterator<Item = &'v NodeView<'a>>,
    m: &mut Measures,
) -> Vec<Verdict> {
    let mut out: Vec<Verdict> = Vec::with_capacity(views.size_hint().0);
    let mut prev: Option<(&NodeView, Verdict)> = None;
    for view in views {
        let v = match prev {
            Some((p, v)) if p == view => v,
            _ => plugin.score(view, pod, m),
        };
        out.push(v);
        prev = Some((view, v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_in_the_state_of_the_one_before_scores_as_scored_alone() {
        // Every policy, on candidates alike in runs and apart: the same verdicts as
        // each scored on its own, and nodes that differ in any part of their state
        // (model, CPU, cards, affinity, the chosen card) scored anew.
        let shapes = vec![(
            crate::placement::Shape {
                cpu: 1000,
                milli: 500,
                count: 1,
                models: vec![],
            },
            1.0,
        )];
        let models = vec![String::new(), "a100".to_string(), "t4".to_string()];
        let (a, b, c) = ([1000, 500, 0], [1000, 1000, 0], [500, 500, 500]);
        let (t1, t2) = ([1u32], [2u32]);
        // The tests' view, with GPU-clustering tags and a chosen card.
        fn v<'a>(
            m: u16,
            cpu: u64,
            free: &'a [u16],
            aff: &'a [u32],
            card: Option<u16>,
        ) -> NodeView<'a> {
            NodeView {
                affinity: aff,
                card,
                ..view(m, cpu, free)
            }
        }
        let (a, b, c, t1, t2) = (&a[..], &b[..], &c[..], &t1[..], &t2[..]);
        let views = [
            v(1, 4000, a, t1, None),
            v(1, 4000, a, t1, None),
            v(1, 4000, a, t2, None),
            v(1, 4000, b, t2, None),
            v(1, 4000, b, t2, None),
            v(2, 4000, b, t2, None),
            v(2, 3000, b, t2, None),
            v(2, 3000, b, t2, Some(500)),
            v(2, 3000, c, t2, Some(500)),
            v(1, 4000, a, t1, None),
        ];
        for pod in [
            Ask {
                cpu: 1000,
                count: 1,
                gpu_milli: 500,
            },
            Ask {
                cpu: 1000,
                count: 1,
                gpu_milli: 1000,
            },
        ] {
            for p in Policy::ALL {
                let plugin = p.plugin();
                let alone: Vec<Verdict> = views
                    .iter()
                    .map(|x| plugin.score(x, &pod, &mut Measures::of(&shapes, &shapes, &models)))
                    .collect();
                let mut m = Measures::of(&shapes, &shapes, &models);
                assert_eq!(
                    score_all(plugin, &pod, views.iter(), &mut m),
                    alone,
                    "{}",
                    p.name()
                );
            }
        }
    }

    fn view<'a>(model: u16, free_cpu: u64, free: &'a [u16]) -> NodeView<'a> {
        NodeView {
            model,
            free_cpu,
            free,
            affinity: &[],
            card: None,
        }
    }

    #[test]
    fn every_policy_is_registered_once_under_the_name_it_is_read_by() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.name()), Some(p));
            assert_eq!(Policy::parse(&p.name().to_uppercase()), Some(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(
                json,
                format!("\"{}\"", p.name()),
                "serde and --policy agree"
            );
        }
        let mut names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Policy::ALL.len());
        assert_eq!(Policy::default(), Policy::Maar);
    }

    #[test]
    fn bestfit_ties_after_normalising_over_the_candidates_and_keeps_their_order() {
        // a and b are left alike (one card, 1 core) and normalise to 100; c, the
        // emptiest, to 0. The tie keeps the order given.
        let pod = Ask {
            cpu: 1000,
            count: 1,
            gpu_milli: 1000,
        };
        let (a, b, c) = ([1000, 0], [1000, 0], [1000; 8]);
        let cands = vec![
            ("a", view(1, 2000, &a)),
            ("b", view(1, 2000, &b)),
            ("c", view(1, 64_000, &c)),
        ];
        let best = best(Policy::BestFit, &pod, cands, &mut Measures::none(), |_| 0.0);
        let names: Vec<&str> = best.iter().map(|x| x.0).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(best.iter().all(|x| x.1.score == 100));
    }

    #[test]
    fn dotprod_scores_a_slice_by_the_whole_node_and_leaves_the_card_to_best_fit() {
        // As the published artifact runs DotProd (GPU dimensions merged): a 900-milli
        // slice is matched against the node's free GPU-milli in all, so the node with
        // one free card (1,000 of 8,000) is preferred to the one with eight; matched
        // card by card, both would offer a whole free card and tie.
        let pod = Ask {
            cpu: 1000,
            count: 1,
            gpu_milli: 900,
        };
        let (one, eight) = ([1000, 0, 0, 0, 0, 0, 0, 0], [1000; 8]);
        let cands = vec![
            ("eight", view(1, 32_000, &eight)),
            ("one", view(1, 32_000, &one)),
        ];
        let best = best(Policy::DotProd, &pod, cands, &mut Measures::none(), |_| 0.0);
        assert_eq!(best.iter().map(|x| x.0).collect::<Vec<_>>(), ["one"]);
        assert_eq!(best[0].1.score, 99);
        assert_eq!(
            best[0].1.card, None,
            "the default card: the tightest it fits"
        );
    }

    #[test]
    fn maar_keeps_gpu_pods_off_pressed_models_and_cpu_pods_anywhere() {
        let shapes = vec![(
            crate::placement::Shape {
                cpu: 1000,
                milli: 1000,
                count: 1,
                models: vec![],
            },
            1.0,
        )];
        let models = vec![String::new(), "a100".to_string(), "t4".to_string()];
        let (a, t) = ([1000; 4], [1000; 4]);
        let cands = || vec![("a100", view(1, 8000, &a)), ("t4", view(2, 8000, &t))];
        // The A100s are ten times as pressed as the T4s: a GPU pod goes to the T4.
        let pressure = |m: u16| if m == 1 { 10.0 } else { 1.0 };
        let gpu = Ask {
            cpu: 1000,
            count: 1,
            gpu_milli: 1000,
        };
        let mut m = Measures::new(shapes, models);
        let best_gpu = best(Policy::Maar, &gpu, cands(), &mut m, pressure);
        assert_eq!(best_gpu.iter().map(|x| x.0).collect::<Vec<_>>(), ["t4"]);
        // Without pressure both tie on every criterion and stay, in order.
        let even = best(Policy::Maar, &gpu, cands(), &mut m, |_| 1.0);
        assert_eq!(even.iter().map(|x| x.0).collect::<Vec<_>>(), ["a100", "t4"]);
        // A CPU-only pod reads no pressure.
        let cpu = Ask {
            cpu: 1000,
            count: 0,
            gpu_milli: 0,
        };
        let best_cpu = best(Policy::Maar, &cpu, cands(), &mut m, pressure);
        assert_eq!(best_cpu.len(), 2);
    }

    #[test]
    fn a_slice_goes_where_the_policy_chooses_unless_the_caller_chose_the_card() {
        // FGD against 500-milli slices: a 300 slice on the 600 card leaves 300 (unusable
        // for a 500 slice); on the whole card it leaves 700 and the 600 card usable.
        let shapes = vec![(
            crate::placement::Shape {
                cpu: 0,
                milli: 500,
                count: 1,
                models: vec![],
            },
            1.0,
        )];
        let models = vec![String::new(), "a100".to_string()];
        let free = [1000, 600];
        let pod = Ask {
            cpu: 0,
            count: 1,
            gpu_milli: 300,
        };
        let mut m = Measures::new(shapes, models);
        let chosen = best(
            Policy::Fgd,
            &pod,
            vec![((), view(1, 0, &free))],
            &mut m,
            |_| 0.0,
        );
        assert_eq!(chosen[0].1.card, Some(1000));
        let pinned = NodeView {
            card: Some(600),
            ..view(1, 0, &free)
        };
        let kept = best(Policy::Fgd, &pod, vec![((), pinned)], &mut m, |_| 0.0);
        assert_eq!(kept[0].1.card, Some(600));
        assert!(
            kept[0].1.score < chosen[0].1.score,
            "the pinned card is scored"
        );
    }
}
