//! Alerts over the demo day: acknowledged ones leave the open list, come back on a new
//! occurrence, and move to the resolved list when their condition ends; a checkpoint
//! keeps the acknowledgements.

use maar_demo::{Demo, Scenario};
use maar_scheduler::{Actor, ClusterState, Command, Core};

fn lab() -> Scenario {
    serde_saphyr::from_str(maar_demo::LAB_YAML).unwrap()
}

#[test]
fn acknowledged_alerts_resolve_and_survive_a_checkpoint() {
    let mut d = Demo::new(lab(), None).unwrap();
    let mut acked = Vec::new();
    let mut resolved_seen = false;
    for t in (0..=24 * 3600).step_by(1800) {
        d.run_until(t);
        // Every key appears once.
        let alerts = d.cluster().alerts();
        let mut keys: Vec<&str> = alerts.iter().map(|a| a.key.as_str()).collect();
        keys.sort();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n, "one line per alert at {t}s");
        // Acknowledge the open node and GPU alerts.
        for a in alerts.iter().filter(|a| {
            a.state == "open" && (a.key.starts_with("gpu/") || a.key.starts_with("notready/"))
        }) {
            let out = d.command(
                Actor::system("alice"),
                Command::AckAlert {
                    alert: a.key.clone(),
                },
            );
            assert!(out.is_ok(), "{:?}", out.result);
            acked.push(a.key.clone());
            let again = d.command(
                Actor::system("bob"),
                Command::AckAlert {
                    alert: a.key.clone(),
                },
            );
            assert!(again
                .result
                .unwrap_err()
                .to_string()
                .contains("already acknowledged by alice"));
        }
        for a in d.cluster().alerts() {
            if acked.contains(&a.key) && a.state == "acknowledged" {
                assert_eq!(a.acked_by.as_deref(), Some("alice"));
            }
        }
        for r in d.cluster().resolved_alerts() {
            assert!(acked.contains(&r.key));
            assert!(r.resolved_at.unwrap() >= r.acked_at.unwrap());
            assert_eq!(r.state, "resolved");
            resolved_seen = true;
        }
        // A checkpoint keeps it all.
        let st: ClusterState =
            serde_json::from_str(&serde_json::to_string(&d.core.checkpoint()).unwrap()).unwrap();
        let back = Core::restore(st).unwrap();
        assert_eq!(back.cluster().alerts(), d.cluster().alerts());
        assert_eq!(
            back.cluster().resolved_alerts(),
            d.cluster().resolved_alerts()
        );
    }
    assert!(!acked.is_empty(), "the demo day has node and GPU faults");
    assert!(
        resolved_seen,
        "some acknowledged fault was repaired within the day"
    );
    // An unknown key is refused, naming the open ones.
    let out = d.command(
        Actor::system("alice"),
        Command::AckAlert {
            alert: "disk/nowhere".into(),
        },
    );
    assert!(out
        .result
        .unwrap_err()
        .to_string()
        .starts_with("no open alert `disk/nowhere`"));
}
