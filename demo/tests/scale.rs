//! The demo lab grown to many nodes (`synthetic::lab_at_scale`), and the simulation's
//! telemetry, which reports only the nodes with a busy card now or at the last reading.

use maar_demo::{synthetic, Demo, Scenario};

fn scaled(nodes: u32) -> Scenario {
    serde_saphyr::from_str(&synthetic::lab_at_scale(nodes)).unwrap()
}

#[test]
fn the_lab_grows_to_the_nodes_asked_with_its_workload_scaled() {
    let lab: Scenario = serde_saphyr::from_str(maar_demo::LAB_YAML).unwrap();
    let big = scaled(4_200);
    let count = |s: &Scenario| s.nodes.iter().map(|g| g.count).sum::<u32>();
    assert_eq!(count(&lab), 42);
    assert_eq!(count(&big), 4_200);
    for (a, b) in lab.nodes.iter().zip(&big.nodes) {
        assert_eq!(b.count, a.count * 100, "{}", a.name);
        // What one node has is not scaled.
        assert_eq!((a.cpu.0, a.memory.0), (b.cpu.0, b.memory.0));
        assert_eq!(
            a.gpu.as_ref().map(|g| g.count),
            b.gpu.as_ref().map(|g| g.count)
        );
    }
    for (a, b) in lab.workload.generators.iter().zip(&big.workload.generators) {
        assert_eq!(b.rate_per_hour, a.rate_per_hour * 100.0);
        assert_eq!(b.max_pending, a.max_pending.map(|m| m * 100));
        // A shape's GPUs per job are the lab's.
        let gpus =
            |g: &maar_demo::scenario::Generator| g.shapes.iter().map(|s| s.gpu).collect::<Vec<_>>();
        assert_eq!(gpus(a), gpus(b));
    }
    assert_eq!(big.random_faults.as_ref().unwrap().every.0, 4);
    // The cluster builds (the scripted fault names a node it has) and runs busy.
    let mut d = Demo::new(big, None).unwrap();
    assert_eq!(d.cluster().nodes.len(), 4_200);
    d.run_until(1800);
    let running = d
        .cluster()
        .jobs
        .iter()
        .filter(|j| j.phase == maar_scheduler::model::Phase::Running)
        .count();
    assert!(running > 500, "{running} jobs running");
    let oversize = scaled(100_001);
    assert_eq!(oversize.nodes.iter().map(|g| g.count).sum::<u32>(), 100_001);
    assert_eq!(scaled(1).nodes.iter().map(|g| g.count).sum::<u32>(), 42);
}

/// Telemetry reports only the nodes with a busy card now or at the last reading: the
/// cards read the same as in a simulation resumed just before a tick (whose first
/// telemetry reports every node), every ten minutes, with many cards busy then idle.
#[test]
fn telemetry_of_the_changed_nodes_reads_as_telemetry_of_all() {
    let readings = |d: &Demo| -> Vec<(u8, u64, u8, u16)> {
        d.cluster()
            .nodes
            .iter()
            .flat_map(|n| {
                n.gpus
                    .iter()
                    .map(|g| (g.util_pct, g.mem_used, g.temp_c, g.power_w))
            })
            .collect()
    };
    let mut d = Demo::new(scaled(420), None).unwrap();
    let mut r = Demo::new(scaled(420), None).unwrap();
    let mut busy_then_idle = 0;
    let mut busy_before = vec![false; readings(&d).len()];
    for t in (600..=6 * 3600).step_by(600) {
        d.run_until(t);
        // Resumed just before the tick at `t`, which then reports every node.
        r.run_until(t - 1);
        let sim = maar_demo::Sim::restore(r.sim.scenario.clone(), r.sim.save_state()).unwrap();
        r = Demo::from_parts(r.core.clone(), sim);
        r.run_until(t);
        assert_eq!(readings(&d), readings(&r), "at {t}s");
        let busy: Vec<bool> = d
            .cluster()
            .nodes
            .iter()
            .flat_map(|n| n.gpus.iter().map(|g| !g.allocs.is_empty()))
            .collect();
        for (&now, was) in busy.iter().zip(&mut busy_before) {
            if *was && !now {
                busy_then_idle += 1;
            }
            *was = now;
        }
    }
    assert!(
        busy_then_idle > 10,
        "{busy_then_idle} cards went busy then idle"
    );
}
