//! Entry points for the fuzz targets (fuzz/) and their regression tests: each takes
//! arbitrary bytes, must never panic, hang or allocate without bound, and returns
//! whether the input was accepted.

use std::sync::OnceLock;

use maar_demo::{Demo, Scenario};
use maar_scheduler::{Actor, Command};

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

fn lab() -> &'static Scenario {
    static LAB: OnceLock<Scenario> = OnceLock::new();
    LAB.get_or_init(|| crate::load::load_scenario(None).expect("the built-in lab parses"))
}

/// A job manifest; a valid one is also submitted to the lab and explained.
pub fn manifest(data: &[u8]) -> bool {
    let Some(t) = text(data) else { return false };
    let Ok(spec) = crate::load::parse_manifest("fuzz.yaml", t) else {
        return false;
    };
    let mut d = Demo::new(lab().clone(), None).expect("lab");
    let out = d.command(
        Actor::system("fuzz"),
        Command::Submit(Box::new(spec.clone())),
    );
    if out.result.is_ok() {
        if let Ok(id) = d
            .cluster()
            .job_id(&format!("{}/{}", spec.project, spec.name))
        {
            let _ = d.cluster().explain(id).to_string();
        }
    }
    true
}

/// A scenario; a small valid one is also run for a simulated hour.
pub fn scenario(data: &[u8]) -> bool {
    let Some(t) = text(data) else { return false };
    let Ok(sc) = crate::load::parse_scenario("fuzz.yaml", t) else {
        return false;
    };
    let nodes: u64 = sc.nodes.iter().map(|g| g.count as u64).sum();
    if nodes <= 200
        && sc
            .workload
            .generators
            .iter()
            .all(|g| g.rate_per_hour <= 1000.0)
    {
        if let Ok(mut d) = Demo::new(sc, None) {
            d.run_until(3600);
            let _ = d.cluster().snapshot();
        }
    }
    true
}

/// A trace node list.
pub fn node_csv(data: &[u8]) -> bool {
    let Some(t) = text(data) else { return false };
    crate::trace::parse_nodes("fuzz.csv", t).is_ok()
}

/// A trace pod list.
pub fn pod_csv(data: &[u8]) -> bool {
    let Some(t) = text(data) else { return false };
    crate::trace::parse_pods("fuzz.csv", t).is_ok()
}

/// A state file: opened, and when it is maar's, restored and checked.
pub fn state_file(data: &[u8]) -> bool {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("maar-fuzz-state-{}.db", std::process::id()));
    let clean = |p: &std::path::Path| {
        for s in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{s}", p.display()));
        }
    };
    clean(&path);
    if std::fs::write(&path, data).is_err() {
        return false;
    }
    let ok = match crate::record::Record::open(&path) {
        Ok(rec) => {
            let _ = rec.meta();
            let _ = rec.audit(&Default::default());
            crate::backend::restore(&rec, false).is_ok()
        }
        Err(_) => false,
    };
    clean(&path);
    ok
}
