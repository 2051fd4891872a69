//! A simulation checkpointed part way (core and simulation, through JSON) and resumed
//! goes on exactly as the one that never stopped.

use maar_demo::{Demo, Scenario, Sim};
use maar_scheduler::{ClusterState, Command, Core};

fn lab() -> Scenario {
    serde_saphyr::from_str(maar_demo::LAB_YAML).expect("the built-in lab parses")
}

fn resumed(d: &Demo) -> Demo {
    let core: ClusterState =
        serde_json::from_str(&serde_json::to_string(&d.core.checkpoint()).unwrap()).unwrap();
    let sim: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&d.sim.save_state()).unwrap()).unwrap();
    Demo::from_parts(
        Core::restore(core).unwrap(),
        Sim::restore(lab(), sim).unwrap(),
    )
    .keep_events()
}

#[test]
fn a_resumed_simulation_goes_on_exactly_as_the_original() {
    for (cut, end, seed) in [(7_200, 6 * 3600, None), (1_234, 4 * 3600, Some(3))] {
        let mut a = Demo::new(lab(), seed).unwrap();
        a.run_until(cut);
        a.apply(Command::CordonNode {
            node: "a100-02".into(),
        })
        .unwrap();
        let mut b = resumed(&a);
        let mut a = a.keep_events();
        assert_eq!(a.core.checkpoint(), b.core.checkpoint());
        a.run_until(end);
        b.run_until(end);
        assert!(a.events().len() > 100, "a busy stretch");
        assert_eq!(a.events(), b.events());
        assert_eq!(a.core.checkpoint(), b.core.checkpoint());
        assert_eq!(a.sim.save_state(), b.sim.save_state());
    }
}

#[test]
fn a_saved_simulation_of_another_scenario_is_refused() {
    let d = Demo::new(lab(), None).unwrap();
    let mut other = lab();
    other.workload.generators.pop();
    assert!(Sim::restore(other, d.sim.save_state()).is_err());
}

#[test]
fn a_checkpoint_written_without_a_copy_is_the_same_json_and_restores() {
    let mut d = Demo::new(lab(), None).unwrap();
    d.run_until(6 * 3600);
    let core = &d.core;
    let with = core.checkpoint_json(true);
    assert_eq!(with, serde_json::to_string(&core.checkpoint()).unwrap());
    let mut st = core.checkpoint();
    st.events.clear();
    let without = core.checkpoint_json(false);
    assert_eq!(without, serde_json::to_string(&st).unwrap());
    let back: ClusterState = serde_json::from_str(&without).unwrap();
    assert_eq!(back, st);
    assert!(Core::restore(back).is_ok());
}
