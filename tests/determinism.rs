//! The same scenario and seed give the same event log, byte for byte; another seed
//! gives another history.

use maar::load::load_scenario;
use maar_demo::Demo;

fn events_json(seed: u64, until: u64) -> String {
    let mut sim = Demo::new(load_scenario(None).unwrap(), Some(seed))
        .unwrap()
        .keep_events();
    sim.run_until(until);
    serde_json::to_string(sim.events()).unwrap()
}

#[test]
fn same_seed_same_event_log() {
    let a = events_json(42, 6 * 3600);
    let b = events_json(42, 6 * 3600);
    assert!(a.len() > 10_000, "a busy six hours");
    assert_eq!(a, b);
    assert_ne!(a, events_json(43, 6 * 3600));
}

#[test]
fn stepping_in_pieces_matches_one_run() {
    let mut sim = Demo::new(load_scenario(None).unwrap(), Some(9))
        .unwrap()
        .keep_events();
    for t in (600..=3 * 3600).step_by(600) {
        sim.run_until(t);
    }
    let pieces = serde_json::to_string(sim.events()).unwrap();
    assert_eq!(pieces, events_json(9, 3 * 3600));
}
