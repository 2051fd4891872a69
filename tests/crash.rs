//! Crash safety, measured: maar is killed with SIGKILL at random moments while
//! operators' commands are being applied. After each restart every acknowledged
//! command is in the record exactly once, and the state restored from the record
//! equals a clean rebuild from every command.
//!
//! `MAAR_CRASH_KILLS` sets the number of kills (8 by default; BENCHMARKS.md has a
//! 60-kill run).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use maar::record::Record;
use rand::{Rng, SeedableRng};

fn maar(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_maar"));
    c.env("XDG_STATE_HOME", home);
    c
}

fn state(home: &Path) -> PathBuf {
    home.join("maar").join("lab.db")
}

/// Starts the engine (fresh the first time); retries while a command-line process
/// holds the state file for a moment.
fn start(home: &Path, resume: bool) -> Child {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let mut args = vec!["demo", "--headless", "--speed", "3600"];
        if resume {
            args.push("--resume");
        }
        let mut child = maar(home)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                assert_eq!(st.code(), Some(1), "the engine failed to start: {st:?}");
                break; // in use: try again
            }
            if let Ok(r) = Record::open(&state(home)) {
                if r.holder()
                    .unwrap()
                    .is_some_and(|h| h.pid == child.id() as i64)
                {
                    return child;
                }
            }
            assert!(Instant::now() < end, "the engine never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The running engine, killed if the test fails while it runs.
struct Engine(Child);

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An acknowledged command: the answer the operator got.
#[derive(Debug)]
struct Acked {
    result: String,
    seq: Option<i64>,
    key: Option<String>,
}

fn random_command(rng: &mut impl Rng) -> Vec<String> {
    let node = format!(
        "{}-0{}",
        ["a100", "h100", "v100", "t4"][rng.gen_range(0..4)],
        rng.gen_range(1..5)
    );
    match rng.gen_range(0..7) {
        // Not idempotent: applied twice, it would leave a second request.
        6 => vec![
            "request-quota".into(),
            "nlp-lab".into(),
            "training-gpu".into(),
            "--gpu".into(),
            rng.gen_range(1..5).to_string(),
        ],
        0 => vec!["cordon".into(), node],
        1 => vec!["uncordon".into(), node],
        2 => vec![
            "cordon".into(),
            node,
            "--gpu".into(),
            rng.gen_range(0..9).to_string(),
        ],
        3 => vec![
            "uncordon".into(),
            node,
            "--gpu".into(),
            rng.gen_range(0..4).to_string(),
        ],
        4 => vec![
            "priority".into(),
            "gpt-finetune-lab".into(),
            ["high", "medium", "low"][rng.gen_range(0..3)].into(),
        ],
        _ => vec!["cordon".into(), "no-such-node".into()],
    }
}

#[test]
fn killed_at_random_the_record_keeps_every_acknowledged_command_once() {
    let kills: usize = std::env::var("MAAR_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let home = std::env::temp_dir().join(format!("maar-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
        std::env::var("MAAR_CRASH_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1),
    );
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    let mut engine = Engine(start(&home, false));
    for round in 0..kills {
        // Operators send commands while the engine runs...
        let stop = Arc::new(AtomicBool::new(false));
        let senders: Vec<_> = (0..2)
            .map(|k| {
                let (home, stop, acked) = (home.clone(), stop.clone(), acked.clone());
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(round as u64 * 7 + k);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let args = random_command(&mut rng);
                        let o = maar(&home)
                            .args(&args)
                            .args(["-o", "json"])
                            .output()
                            .unwrap();
                        match o.status.code() {
                            Some(0) | Some(1) if !o.stdout.is_empty() => {
                                let v: serde_json::Value = serde_json::from_slice(&o.stdout)
                                    .unwrap_or_else(|e| {
                                        panic!("{e}: {}", String::from_utf8_lossy(&o.stdout))
                                    });
                                acked.lock().unwrap().push(Acked {
                                    result: v["result"].as_str().unwrap().to_string(),
                                    seq: v["seq"].as_i64(),
                                    key: v["key"].as_str().map(str::to_string),
                                });
                            }
                            other => panic!(
                                "{args:?}: exit {other:?}: {}",
                                String::from_utf8_lossy(&o.stderr)
                            ),
                        }
                    }
                })
            })
            .collect();
        // ...and it is killed at a random moment.
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..700)));
        let _ = Command::new("kill")
            .args(["-KILL", &engine.0.id().to_string()])
            .status();
        let _ = engine.0.wait();
        // Commands in flight finish (answered by the command line itself, or by the
        // next engine).
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..200)));
        stop.store(true, Ordering::SeqCst);
        for s in senders {
            s.join().unwrap();
        }
        // The record as it is after the crash: restored equals rebuilt.
        let o = maar(&home).args(["state", "verify"]).output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "round {round}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        engine = Engine(start(&home, true));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &engine.0.id().to_string()])
        .status();
    let _ = engine.0.wait();
    // Every acknowledged command is in the record exactly once.
    let rec = Record::open(&state(&home)).unwrap();
    let rows = rec.commands_after(0).unwrap();
    let by_seq: BTreeMap<i64, &maar::record::CommandRow> =
        rows.iter().map(|r| (r.seq, r)).collect();
    let mut per_request: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &rows {
        if let Some(q) = &r.key {
            *per_request.entry(q.as_str()).or_default() += 1;
        }
    }
    assert!(
        per_request.values().all(|&n| n == 1),
        "a request recorded twice"
    );
    let acked = acked.lock().unwrap();
    assert!(
        acked.len() >= kills * 2,
        "only {} commands acknowledged",
        acked.len()
    );
    for a in acked.iter() {
        let seq = a
            .seq
            .unwrap_or_else(|| panic!("acknowledged without a record number: {a:?}"));
        let row = by_seq
            .get(&seq)
            .unwrap_or_else(|| panic!("acknowledged command missing: {a:?}"));
        assert_eq!(row.key, a.key, "{a:?}");
        assert!(a.key.is_some(), "{a:?}");
        assert_eq!(row.result.is_ok(), a.result == "ok", "{a:?}");
    }
    let o = maar(&home).args(["state", "verify"]).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!(
        "{kills} kills, {} commands acknowledged, {} recorded",
        acked.len(),
        rows.len()
    );
}
