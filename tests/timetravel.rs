//! Time travel: the recorded cluster as it was at any moment of its history, in the
//! console (`[`, `]`, `:at`, `:now`) and on the command line (`--at`), equal to a run
//! of the same scenario with the same commands up to that moment.

use std::path::PathBuf;
use std::process::Command as Proc;
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use maar::console::app::{App, Mode};
use maar::engine::{self, EngineOptions};
use maar::record::Record;
use maar_demo::Demo;
use maar_scheduler::{Actor, Command, Core};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("maar-travel-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn lab() -> maar_demo::Scenario {
    maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap()
}

/// The core's state without its event window (history, kept in the record).
fn state(c: &Core) -> serde_json::Value {
    let mut st = c.checkpoint();
    st.events.clear();
    serde_json::to_value(st).unwrap()
}

/// A recorded demo run fast for a while, with a cordon given part way; returns the
/// state file and when the cordon was given.
fn recorded_run(d: &std::path::Path) -> (PathBuf, u64) {
    let p = d.join("lab.db");
    let (loaded, mut rec) =
        maar::backend::fresh_demo(Some(&p), maar::load::BUILTIN_LAB, lab(), None).unwrap();
    rec.as_mut().unwrap().acquire().unwrap();
    let h = engine::start(
        loaded,
        rec,
        EngineOptions {
            speed: 20_000.0,
            paused: false,
            ..Default::default()
        },
    );
    let until = |t: u64| {
        let end = Instant::now() + Duration::from_secs(30);
        while h.sync().unwrap().snapshot.time_s < t {
            assert!(Instant::now() < end, "the demo never reached {t}s");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    until(3 * 3600);
    h.apply(
        Actor::system("test"),
        Command::CordonNode {
            node: "a100-02".into(),
        },
    )
    .unwrap();
    let at = Record::open(&p).unwrap().commands_after(0).unwrap()[0].at_s;
    until(9 * 3600);
    h.shutdown();
    (p, at)
}

#[test]
fn the_past_restored_from_the_record_equals_a_replay_of_that_moment() {
    let d = dir("equal");
    let (p, cordon_at) = recorded_run(&d);
    let rec = Record::open(&p).unwrap();
    let kept: Vec<u64> = {
        let newest = rec.latest_time().unwrap();
        assert!(newest >= 9 * 3600);
        (0..newest).step_by(2467).collect()
    };
    for t in kept {
        let past = maar::backend::restore_at(&rec, t).unwrap();
        assert_eq!(past.core.now(), t);
        let mut want = Demo::new(lab(), None).unwrap();
        if t >= cordon_at {
            want.run_until(cordon_at);
            want.apply(Command::CordonNode {
                node: "a100-02".into(),
            })
            .unwrap();
        }
        want.run_until(t);
        assert_eq!(state(&past.core), state(&want.core), "at {t}s");
        // The event window is the run's, from the record.
        let got = past.core.cluster().events.back().map(|e| e.seq);
        let exp = want.cluster().events.back().map(|e| e.seq);
        assert_eq!(got, exp, "newest event at {t}s");
    }
    // The future is refused.
    let newest = rec.latest_time().unwrap();
    let e = maar::backend::restore_at(&rec, newest + 3600)
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("after the newest moment recorded"),
        "{e}"
    );
    // Hourly checkpoints are kept for it, not only the newest three.
    let o = Proc::new(env!("CARGO_BIN_EXE_maar"))
        .args(["get", "nodes", "--state", p.to_str().unwrap(), "--at", "2h"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.starts_with("a100-02"))
        .unwrap()
        .to_string();
    assert!(
        !line.contains("SchedulingDisabled"),
        "not yet cordoned at 2h: {line}"
    );
    let o = Proc::new(env!("CARGO_BIN_EXE_maar"))
        .args(["get", "nodes", "--state", p.to_str().unwrap(), "--at", "8h"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout)
        .lines()
        .any(|l| l.starts_with("a100-02") && l.contains("SchedulingDisabled")));
    let o = Proc::new(env!("CARGO_BIN_EXE_maar"))
        .args([
            "get",
            "jobs",
            "--state",
            p.to_str().unwrap(),
            "--at",
            "300d",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the past only"));
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn keys(app: &mut App, s: &str) {
    for c in s.chars() {
        let code = match c {
            '\n' => KeyCode::Enter,
            '\x1b' => KeyCode::Esc,
            c => KeyCode::Char(c),
        };
        app.key(KeyEvent::new(code, KeyModifiers::NONE));
    }
}

#[test]
fn the_console_steps_back_shows_a_banner_refuses_actions_and_returns() {
    let d = dir("console");
    let (p, _) = recorded_run(&d);
    let mut rec = Record::open(&p).unwrap();
    rec.acquire().unwrap();
    let loaded = maar::backend::restore(&rec, false).unwrap();
    let live = loaded.core.now();
    let h = engine::start(
        loaded,
        Some(rec),
        EngineOptions {
            speed: 60.0,
            paused: true,
            ..Default::default()
        },
    );
    let mut app = App::new(h.clone());
    app.key(key('['));
    let past = app.past.as_ref().expect("[ goes back");
    assert_eq!(past.at, live - 300);
    assert_eq!(app.snapshot.time_s, live - 300);
    keys(&mut app, ":at 2h15m\n");
    assert_eq!(app.snapshot.time_s, 8100);
    let shown = {
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 35)).unwrap();
        t.draw(|f| maar::console::view::draw(f, &app)).unwrap();
        let b = t.backend().buffer().clone();
        (0..35)
            .map(|y| (0..120).map(|x| b[(x, y)].symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(shown.contains("PAST t=2h15m"), "{shown}");
    // Actions are off in the past.
    keys(&mut app, "c");
    assert!(matches!(app.mode, Mode::Normal));
    assert!(app.message.contains("actions are off"), "{}", app.message);
    // `]` steps forward; Enter on a job explains it as it was.
    app.key(key(']'));
    assert_eq!(app.snapshot.time_s, 8400);
    keys(&mut app, ":jobs\n\n");
    if let Mode::Explain(ex, _) = &app.mode {
        assert!(!ex.job.is_empty());
    }
    keys(&mut app, "\x1b:now\n");
    assert!(app.past.is_none());
    assert_eq!(app.snapshot.time_s, live);
    // ] at the present says so.
    app.key(key(']'));
    assert_eq!(app.message, "already at the present");
    h.shutdown();
}

#[test]
fn a_live_clusters_past_says_it_is_the_newest_checkpoint_kept() {
    // A live cluster (local, kube) cannot rerun its world: a moment between
    // checkpoints is the checkpoint before it, and it says so.
    let d = dir("live-past");
    let p = d.join("local.db");
    let mut rec = Record::create(
        &p,
        &maar::record::Meta {
            backend: "local".into(),
            cluster: "local-x".into(),
            scenario: None,
            seed: None,
            created: "2026-12-02T00:00:00Z".into(),
        },
    )
    .unwrap();
    let mut demo = Demo::new(lab(), None).unwrap();
    demo.run_until(3600);
    let core = demo.core.checkpoint_json(false);
    rec.checkpoint(0, 3600, &core, "{}").unwrap();
    // The record knows later moments (a newer checkpoint, written two days on).
    let mut later_demo = Demo::new(lab(), None).unwrap();
    later_demo.run_until(2 * 86_400);
    rec.checkpoint(0, 2 * 86_400, &later_demo.core.checkpoint_json(false), "{}")
        .unwrap();
    let exact = maar::backend::restore_at(&rec, 3600).unwrap();
    assert_eq!(exact.note, None);
    let later = maar::backend::restore_at(&rec, 3 * 3600).unwrap();
    let note = later.note.expect("a note");
    assert!(
        note.contains("the state at 1h00m") && note.contains("newest kept at or before 3h00m"),
        "{note}"
    );
}
