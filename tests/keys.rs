//! Every key on every screen, in every mode, with the engine paused and running: the
//! console never hangs (each key is answered within seconds) and never panics, and
//! every frame draws. Plus the keys that act: `+`/`-` change a job's priority.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use maar::console::app::{App, Mode, Screen};
use maar::console::view;
use maar::engine::{self, EngineOptions};
use maar::load::load_scenario;
use maar_demo::Demo;

fn app(paused: bool) -> App {
    let mut d = Demo::new(load_scenario(None).unwrap(), None).unwrap();
    d.run_until(3600);
    let handle = engine::start(
        maar::backend::from_demo(d),
        None,
        EngineOptions {
            speed: 3600.0,
            paused,
            ..Default::default()
        },
    );
    let mut a = App::new(handle);
    a.actor = maar_scheduler::Actor::system("keys-test");
    a
}

/// Every key a keyboard sends: printable ASCII, the special keys, F-keys, and a few
/// with modifiers.
fn all_keys() -> Vec<KeyEvent> {
    let mut v: Vec<KeyEvent> = (0x20u8..0x7f)
        .map(|c| KeyEvent::new(KeyCode::Char(c as char), KeyModifiers::NONE))
        .collect();
    for code in [
        KeyCode::Enter,
        KeyCode::Esc,
        KeyCode::Tab,
        KeyCode::BackTab,
        KeyCode::Backspace,
        KeyCode::Delete,
        KeyCode::Insert,
        KeyCode::Up,
        KeyCode::Down,
        KeyCode::Left,
        KeyCode::Right,
        KeyCode::Home,
        KeyCode::End,
        KeyCode::PageUp,
        KeyCode::PageDown,
        KeyCode::Null,
    ] {
        v.push(KeyEvent::new(code, KeyModifiers::NONE));
    }
    for n in 1..=12 {
        v.push(KeyEvent::new(KeyCode::F(n), KeyModifiers::NONE));
    }
    for c in ['a', 'z', 'l', 'd', 'u'] {
        v.push(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL));
        v.push(KeyEvent::new(KeyCode::Char(c), KeyModifiers::ALT));
    }
    v.push(KeyEvent::new(KeyCode::Char('é'), KeyModifiers::NONE));
    v.push(KeyEvent::new(KeyCode::Char('漢'), KeyModifiers::NONE));
    v
}

fn draw(app: &App, w: u16, h: u16) {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, app)).unwrap();
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(
        match c {
            '\n' => KeyCode::Enter,
            '\x1b' => KeyCode::Esc,
            c => KeyCode::Char(c),
        },
        KeyModifiers::NONE,
    )
}

/// Brings the app back to a screen in normal mode.
fn reset(app: &mut App, s: Screen) {
    for _ in 0..3 {
        app.key(key('\x1b'));
    }
    app.mode = Mode::Normal;
    app.quit = false;
    app.command(s.name());
    app.filter.clear();
    app.expanded = None;
}

/// Presses every key in every mode on every screen; returns how many were pressed.
fn sweep(app: &mut App, progress: &AtomicUsize, last: &Mutex<String>) -> usize {
    let keys = all_keys();
    let mut n = 0;
    let mut press = |app: &mut App, k: KeyEvent, what: &str| {
        *last.lock().unwrap() = what.to_string();
        app.key(k);
        app.refresh_if_changed();
        if n % 7 == 0 {
            draw(app, 80, 24);
        }
        if n % 13 == 0 {
            draw(app, 250, 70);
        }
        n += 1;
        progress.fetch_add(1, Ordering::SeqCst);
    };
    for s in Screen::ALL {
        // Normal mode: each key on its own.
        for k in &keys {
            reset(app, s);
            // Select something to act on where there are rows.
            press(app, key('j'), "j");
            press(app, *k, &format!("{k:?} on {}", s.name()));
            // Answer a confirmation either way; close what opened.
            if matches!(app.mode, Mode::Confirm(..)) {
                press(app, key('n'), "n (confirm)");
            }
        }
        // Each mode that collects keys, with every key typed into it.
        for (enter, name) in [(':', "command"), ('/', "filter")] {
            reset(app, s);
            press(app, key(enter), name);
            for k in &keys {
                if k.code == KeyCode::Enter || k.code == KeyCode::Esc {
                    continue;
                }
                press(app, *k, &format!("{k:?} in {name} mode on {}", s.name()));
                if !matches!(app.mode, Mode::Command(_) | Mode::Filter(_)) {
                    press(app, key(enter), name);
                }
            }
            press(app, key('\n'), "Enter");
        }
    }
    // A confirmation and an explanation, answered by each key.
    for k in &keys {
        reset(app, Screen::Nodes);
        press(app, key('c'), "c");
        press(app, *k, &format!("{k:?} answering a confirmation"));
        reset(app, Screen::Jobs);
        press(app, key('\n'), "Enter (explain)");
        press(app, *k, &format!("{k:?} in the explanation"));
    }
    // Scrolling far down the explanation and the lists.
    reset(app, Screen::Events);
    for _ in 0..50 {
        press(
            app,
            KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE),
            "PageDown",
        );
    }
    n
}

/// Runs the sweep on its own thread; fails if any key goes unanswered for 10 s.
fn sweep_with_watchdog(paused: bool) -> usize {
    let progress = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(String::new()));
    let t = {
        let (progress, last) = (progress.clone(), last.clone());
        std::thread::spawn(move || {
            let mut a = app(paused);
            let n = sweep(&mut a, &progress, &last);
            a.engine.shutdown();
            n
        })
    };
    let mut seen = 0;
    let mut since = Instant::now();
    loop {
        if t.is_finished() {
            return t.join().expect("a key made the console panic");
        }
        let now = progress.load(Ordering::SeqCst);
        if now != seen {
            seen = now;
            since = Instant::now();
        }
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the console hangs on {} ({} keys in, {} paused)",
            last.lock().unwrap(),
            seen,
            if paused { "engine" } else { "engine not" }
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_key_on_every_screen_paused() {
    let n = sweep_with_watchdog(true);
    assert!(n > 8 * 2 * 100, "{n} keys");
}

#[test]
fn every_key_on_every_screen_running() {
    let n = sweep_with_watchdog(false);
    assert!(n > 8 * 2 * 100, "{n} keys");
}

#[test]
fn plus_and_minus_change_the_selected_jobs_priority() {
    let mut a = app(true);
    a.command("jobs");
    let name = |a: &App| {
        let j = &a.snapshot.jobs[a.rows[a.selected]];
        (format!("{}/{}", j.project, j.name), j.priority.clone())
    };
    // Find a medium-priority job.
    let at = (0..a.rows.len())
        .find(|&i| a.snapshot.jobs[a.rows[i]].priority == "medium")
        .expect("a medium job");
    a.selected = at;
    let (job, p) = name(&a);
    assert_eq!(p, "medium");
    let prio = |a: &App| {
        a.snapshot
            .jobs
            .iter()
            .find(|j| format!("{}/{}", j.project, j.name) == job)
            .unwrap()
            .priority
            .clone()
    };
    a.key(key('+'));
    assert!(
        matches!(a.mode, Mode::Confirm(..)),
        "a priority change previews first"
    );
    a.key(key('y'));
    assert_eq!(a.message, "priority medium -> high");
    assert_eq!(prio(&a), "high");
    a.key(key('+'));
    assert!(
        a.message.contains("already at priority high"),
        "{}",
        a.message
    );
    // The selection follows the job as the list re-sorts.
    a.selected = (0..a.rows.len())
        .find(|&i| {
            let j = &a.snapshot.jobs[a.rows[i]];
            format!("{}/{}", j.project, j.name) == job
        })
        .unwrap();
    a.key(key('-'));
    a.key(key('y'));
    assert_eq!(prio(&a), "medium");
    a.key(key('-'));
    a.key(key('y'));
    assert_eq!(prio(&a), "low");
    a.key(key('-'));
    assert!(
        a.message.contains("already at priority low"),
        "{}",
        a.message
    );
    // The engine holds the same, not only the console's copy.
    let v = a.engine.sync().unwrap();
    let j = v
        .snapshot
        .jobs
        .iter()
        .find(|j| format!("{}/{}", j.project, j.name) == job)
        .unwrap();
    assert_eq!(j.priority, "low");
    a.engine.shutdown();
}
