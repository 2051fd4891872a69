//! Trace replay on small hand-made traces: fragmentation computed by hand, and the
//! placement each policy must make.

use maar_scheduler::replay::*;

fn node(name: &str, gpus: u32, model: &str) -> TraceNode {
    TraceNode {
        name: name.into(),
        cpu_milli: 32_000,
        memory_mib: 131_072,
        gpus,
        model: model.into(),
    }
}

fn pod(name: &str, num_gpu: u32, gpu_milli: u32, cpu: u64) -> TracePod {
    TracePod {
        name: name.into(),
        cpu_milli: cpu,
        memory_mib: 1024,
        num_gpu,
        gpu_milli,
        gpu_spec: vec![],
    }
}

fn shape(cpu: u64, milli: u32, count: u32) -> Shape {
    Shape {
        cpu,
        milli,
        count,
        models: vec![],
    }
}

#[test]
fn fragmentation_by_hand() {
    let shapes = vec![(shape(8000, 1000, 1), 0.5), (shape(4000, 500, 1), 0.5)];
    // Cards free 1000, 300, 0, 0 and 16 cores: both shapes fit; the 300 left on the
    // second card is a fragment for both: 0.5*300 + 0.5*300.
    assert_eq!(
        fragmentation("a100", 16_000, &[1000, 300, 0, 0], &shapes),
        300.0
    );
    // With 2 cores neither shape fits: every idle milli is a fragment.
    assert_eq!(
        fragmentation("a100", 2000, &[1000, 300, 0, 0], &shapes),
        1300.0
    );
    // Nothing idle, nothing fragmented.
    assert_eq!(fragmentation("a100", 16_000, &[0, 0], &shapes), 0.0);
    // A CPU-only shape sees all idle GPU as fragment; so does a shape for another model.
    let cpu = vec![(shape(1000, 0, 0), 1.0)];
    assert_eq!(fragmentation("a100", 16_000, &[1000, 500], &cpu), 1500.0);
    let v100 = vec![(
        Shape {
            cpu: 1000,
            milli: 1000,
            count: 1,
            models: vec!["v100".into()],
        },
        1.0,
    )];
    assert_eq!(fragmentation("a100", 16_000, &[1000, 500], &v100), 1500.0);
    // A 2-GPU shape on a node with one whole card: does not fit, all idle counts.
    assert_eq!(
        fragmentation("a100", 16_000, &[1000, 500], &[(shape(1000, 1000, 2), 1.0)]),
        1500.0
    );
}

#[test]
fn capacity_fragmentation_by_hand() {
    let slice = [(shape(4000, 470, 1), 1.0)];
    // A card with 900 free takes one 470 slice: 430 stays idle. FGD counts the card as
    // usable (900 >= 470), so its fragmentation is 0.
    assert_eq!(
        capacity_fragmentation("a100", 16_000, &[900], &slice),
        430.0
    );
    assert_eq!(fragmentation("a100", 16_000, &[900], &slice), 0.0);
    // Cards 900 and 1000 with 16 cores: 1 + 2 slices by cards, 4 by CPU: 3 x 470 used.
    assert_eq!(
        capacity_fragmentation("a100", 16_000, &[900, 1000], &slice),
        1900.0 - 1410.0
    );
    // Eight free GPUs beside 24 cores take two 12-core GPU pods: 6000 idle for good.
    let gpu12 = [(shape(12_000, 1000, 1), 1.0)];
    assert_eq!(
        capacity_fragmentation("a100", 24_000, &[1000; 8], &gpu12),
        6000.0
    );
    assert_eq!(fragmentation("a100", 24_000, &[1000; 8], &gpu12), 0.0);
    // A 2-GPU shape on seven free cards: three copies, one card left over.
    assert_eq!(
        capacity_fragmentation("a100", 64_000, &[1000; 7], &[(shape(1000, 1000, 2), 1.0)]),
        1000.0
    );
    // No GPU in the shape, or another model: everything idle is a fragment; nothing
    // idle, nothing fragmented.
    let cpu = [(shape(1000, 0, 0), 1.0)];
    assert_eq!(
        capacity_fragmentation("a100", 16_000, &[1000, 500], &cpu),
        1500.0
    );
    let v100 = [(
        Shape {
            cpu: 1000,
            milli: 1000,
            count: 1,
            models: vec!["v100".into()],
        },
        1.0,
    )];
    assert_eq!(
        capacity_fragmentation("a100", 16_000, &[1000], &v100),
        1000.0
    );
    assert_eq!(capacity_fragmentation("a100", 16_000, &[0, 0], &gpu12), 0.0);
    // Weighted by shape frequency.
    let both = [(shape(4000, 470, 1), 0.5), (shape(12_000, 1000, 1), 0.5)];
    assert_eq!(
        capacity_fragmentation("a100", 16_000, &[900], &both),
        0.5 * 430.0 + 0.5 * 900.0
    );
}

/// Four identical nodes; eight 8-core CPU-only pods (which GpuPacking scores 0 on every
/// node). Returns how many nodes they end up on.
fn cpu_pods_spread(ties: Ties, seed: u64) -> usize {
    let nodes: Vec<TraceNode> = (0..4).map(|i| node(&format!("n{i}"), 2, "t4")).collect();
    let mut r = Replayer::new(
        &nodes,
        vec![(shape(1000, 1000, 1), 1.0)],
        Policy::GpuPacking,
        seed,
    )
    .with_ties(ties);
    let mut used = std::collections::BTreeSet::new();
    for i in 0..8 {
        used.insert(r.place(&pod(&format!("c{i}"), 0, 0, 8000)).unwrap());
    }
    used.len()
}

#[test]
fn node_order_ties_fill_one_node_after_another() {
    // The published simulator's tie rule: the first best node of a (seeded) node list,
    // so equally scored pods pack node by node (32 cores: four pods per node).
    for seed in 1..=5 {
        assert_eq!(cpu_pods_spread(Ties::NodeOrder, seed), 2, "seed {seed}");
    }
    // Random ties spread them.
    assert!((1..=5).any(|seed| cpu_pods_spread(Ties::Random, seed) > 2));
}

#[test]
fn maar_keeps_flexible_pods_off_a_model_that_constrained_pods_need() {
    // A quarter of the typical pods can only use T4s, a quarter only A100s. Three T4-only
    // pods have taken three of the four T4s. An unconstrained pod now goes to an A100:
    // the last T4 is the only place left for T4-only pods. FGD's node-local measure sees
    // the same gain on the last T4 as on an A100 and follows the node order.
    let nodes = [
        node("t4-1", 2, "t4"),
        node("t4-2", 2, "t4"),
        node("a100-1", 2, "a100"),
        node("a100-2", 2, "a100"),
    ];
    let only = |m: &str| Shape {
        cpu: 1000,
        milli: 1000,
        count: 1,
        models: vec![m.into()],
    };
    let shapes = vec![
        (only("t4"), 0.25),
        (only("a100"), 0.25),
        (shape(1000, 1000, 1), 0.5),
    ];
    let mut t4_pod = pod("t4-pod", 1, 1000, 1000);
    t4_pod.gpu_spec = vec!["T4".into()];
    let first = [t4_pod.clone(), t4_pod.clone(), t4_pod];
    maar_always_fgd_by_order(&nodes, &shapes, &first, &pod("p", 1, 1000, 1000), "a100");
}

#[test]
fn maar_puts_cpu_pods_where_their_cpu_strands_no_gpu() {
    // Two nodes with four idle GPUs: 16 cores and 64 cores. Typical GPU pods take 8
    // cores a GPU. An 8-core CPU-only pod on the small node would leave one GPU pod's
    // worth of CPU for four GPUs; on the big node it strands nothing. FGD's measure sees
    // both as fine (one GPU pod still fits either way).
    let mut small = node("small", 4, "a100");
    small.cpu_milli = 16_000;
    let mut big = node("big", 4, "a100");
    big.cpu_milli = 64_000;
    let nodes = [small, big];
    let shapes = vec![(shape(8000, 1000, 1), 1.0)];
    maar_always_fgd_by_order(&nodes, &shapes, &[], &pod("cpu", 0, 0, 8000), "big");
}

/// Places `first`, then `last`, under maar and under FGD, for seeds 1 to 8: maar must
/// put `last` on a node whose name starts with `want` every time; FGD, which sees no
/// difference, follows the node order and so lands on both kinds of node.
fn maar_always_fgd_by_order(
    nodes: &[TraceNode],
    shapes: &[(Shape, f64)],
    first: &[TracePod],
    last: &TracePod,
    want: &str,
) {
    let mut fgd_picks = std::collections::BTreeSet::new();
    for seed in 1..=8 {
        let at = |policy| {
            let mut r = Replayer::new(nodes, shapes.to_vec(), policy, seed);
            for p in first {
                r.place(p).unwrap();
            }
            let n = r.place(last).unwrap();
            r.cluster.nodes[n as usize].name.starts_with(want)
        };
        assert!(at(Policy::Maar), "maar, seed {seed}: not on {want}");
        fgd_picks.insert(at(Policy::Fgd));
    }
    assert_eq!(fgd_picks.len(), 2, "FGD follows the node order");
}

#[test]
fn typical_shapes_cover_95_percent_and_renormalise() {
    let mut pods = Vec::new();
    for i in 0..90 {
        pods.push(pod(&format!("a{i}"), 1, 1000, 4000));
    }
    for i in 0..9 {
        pods.push(pod(&format!("b{i}"), 1, 500, 2000));
    }
    pods.push(pod("c", 8, 1000, 64_000));
    pods.push(pod("cpu", 0, 0, 8000));
    // By pods: 90% + 9% reaches 95%; the 8-GPU pod is left out.
    let s = typical_shapes(&pods, ShapeWeight::Pods, false);
    assert_eq!(s.len(), 2);
    assert!((s[0].1 - 90.0 / 99.0).abs() < 1e-9 && (s[1].1 - 9.0 / 99.0).abs() < 1e-9);
    // By GPU demand the 8-GPU pod weighs 8000 of 98,500 milli and is kept.
    let s = typical_shapes(&pods, ShapeWeight::GpuDemand, false);
    assert!(s.iter().any(|(sh, _)| sh.count == 8), "{s:?}");
    assert!((s.iter().map(|x| x.1).sum::<f64>() - 1.0).abs() < 1e-9);
    assert!(
        s.iter().all(|(sh, _)| sh.milli > 0),
        "CPU-only pods left out"
    );
    let with_cpu = typical_shapes(&pods, ShapeWeight::Pods, true);
    assert!(
        with_cpu.iter().all(|(sh, _)| sh.milli > 0),
        "1 CPU pod in 101 is past 95%"
    );
}

/// A one-GPU node and a four-GPU node; a one-GPU pod.
fn small_vs_big(policy: Policy, seed: u64) -> String {
    let nodes = [node("small", 1, "a100"), node("big", 4, "a100")];
    let shapes = vec![(shape(1000, 1000, 4), 1.0)];
    let mut r = Replayer::new(&nodes, shapes, policy, seed);
    let n = r.place(&pod("p", 1, 1000, 1000)).expect("fits");
    r.cluster.nodes[n as usize].name.clone()
}

#[test]
fn each_policy_makes_its_known_best_placement() {
    // BestFit: least left over. GpuPacking: a fully free node with fewer GPUs scores
    // 33-1 > 33-4. DotProd: smaller product with the free vector. GpuClustering: idle
    // node with less GPU left. FGD and maar: on the big node the pod would stop a
    // typical 4-GPU pod from fitting (fragmentation +3000); on the small one it removes
    // 1000 of fragment.
    for p in [
        Policy::BestFit,
        Policy::GpuPacking,
        Policy::DotProd,
        Policy::GpuClustering,
        Policy::Fgd,
        Policy::Maar,
    ] {
        for seed in [1, 2, 3] {
            assert_eq!(small_vs_big(p, seed), "small", "{p:?} seed {seed}");
        }
    }
    // Random: both, over seeds.
    let picks: Vec<String> = (0..60).map(|s| small_vs_big(Policy::Random, s)).collect();
    let small = picks.iter().filter(|n| *n == "small").count();
    assert!((10..=50).contains(&small), "random picked small {small}/60");
}

#[test]
fn sharing_pods_take_the_card_that_keeps_whole_cards_whole() {
    for p in [
        Policy::BestFit,
        Policy::GpuPacking,
        Policy::Fgd,
        Policy::Maar,
    ] {
        let nodes = [node("n", 2, "t4")];
        let shapes = vec![(shape(1000, 1000, 1), 0.5), (shape(1000, 500, 1), 0.5)];
        let mut r = Replayer::new(&nodes, shapes, p, 7);
        r.place(&pod("first", 1, 400, 1000)).unwrap();
        r.place(&pod("second", 1, 500, 1000)).unwrap();
        let free: Vec<u32> = r.cluster.nodes[0]
            .gpus
            .iter()
            .map(|g| g.free_milli())
            .collect();
        assert!(
            free.contains(&1000),
            "{p:?} broke the second card: {free:?}"
        );
        assert!(free.contains(&100), "{p:?}: {free:?}");
    }
}

#[test]
fn pods_that_fit_nowhere_fail_and_capacity_is_never_exceeded() {
    let nodes = [node("a", 2, "a100")];
    let mut r = Replayer::new(&nodes, vec![(shape(1000, 1000, 1), 1.0)], Policy::Fgd, 1);
    assert!(r.place(&pod("p1", 2, 1000, 1000)).is_some());
    assert!(r.place(&pod("p2", 1, 100, 1000)).is_none(), "no GPU left");
    assert!(
        r.place(&pod("cpu-hog", 0, 0, 64_000)).is_none(),
        "more CPU than the node has"
    );
    assert!(r.place(&pod("cpu", 0, 0, 1000)).is_some());
    let mut constrained = pod("v100-only", 1, 1000, 1000);
    constrained.gpu_spec = vec!["V100".into()];
    let nodes = [node("a", 2, "a100"), node("b", 1, "v100")];
    let mut r = Replayer::new(
        &nodes,
        vec![(shape(1000, 1000, 1), 1.0)],
        Policy::BestFit,
        1,
    );
    let n = r.place(&constrained).unwrap();
    assert_eq!(
        r.cluster.nodes[n as usize].name, "b",
        "model constraint honoured"
    );
    assert!(r.place(&constrained).is_none());
    assert_eq!(r.alloc_pct(), 100.0 / 3.0);
}

#[test]
fn replay_records_a_curve_and_is_deterministic() {
    let nodes: Vec<TraceNode> = (0..20)
        .map(|i| node(&format!("n{i}"), [1, 2, 4, 8][i % 4], ["a100", "t4"][i % 2]))
        .collect();
    let pods: Vec<TracePod> = (0..120)
        .map(|i| match i % 5 {
            0 => pod(&format!("p{i}"), 0, 0, 4000),
            1 => pod(&format!("p{i}"), 1, 300 + (i as u32 * 37) % 600, 2000),
            2 => pod(&format!("p{i}"), 2, 1000, 8000),
            _ => pod(&format!("p{i}"), 1, 1000, 4000),
        })
        .collect();
    let cfg = ReplayConfig::new(Policy::Maar, 3);
    let a = replay(&nodes, &pods, &cfg);
    let b = replay(&nodes, &pods, &cfg);
    assert_eq!(a.curve, b.curve);
    assert_eq!(a.curve.first().unwrap().arrived_pct, 0);
    assert_eq!(a.curve.last().unwrap().arrived_pct, 130);
    assert!(
        a.curve.windows(2).all(|w| w[1].alloc_pct >= w[0].alloc_pct),
        "no pod leaves"
    );
    // One pod can carry arrived demand past several whole percents at once (a 2-GPU pod
    // is 2.7% of these 75 GPUs), so allocation may lead a recorded point by that much.
    assert_eq!(a.total_gpus, 75);
    assert!(a
        .curve
        .iter()
        .all(|c| c.alloc_pct <= c.arrived_pct as f64 + 2.7 && c.alloc_pct <= 100.0));
    assert!(a.alloc_pct_at_100 > 50.0);
    // 1.3x the capacity arrives, so some pods must fail; every arrival is counted once.
    assert!(
        a.pods_failed > 0 && a.pods_placed > 60,
        "{} placed, {} failed",
        a.pods_placed,
        a.pods_failed
    );
    let demand: u64 = pods.iter().map(|p| p.gpu_request()).sum();
    assert!(
        a.pods_placed + a.pods_failed >= 120,
        "the trace, plus copies up to 1.3x ({demand} milli)"
    );
}
