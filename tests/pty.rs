//! The real binary in a pseudo-terminal: it draws the console, takes keys, and restores
//! the terminal when it quits.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};

struct Screen {
    parser: vt100::Parser,
    rx: mpsc::Receiver<Vec<u8>>,
    raw: Vec<u8>,
}

impl Screen {
    /// Reads output until `want` is on the screen, or fails after `secs`.
    fn wait_for(&mut self, want: &str, secs: u64) -> String {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let text = self.parser.screen().contents();
            if text.contains(want) {
                return text;
            }
            let left = end.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "`{want}` never appeared; screen:\n{text}");
            if let Ok(bytes) = self.rx.recv_timeout(left.min(Duration::from_millis(200))) {
                self.parser.process(&bytes);
                self.raw.extend_from_slice(&bytes);
            }
        }
    }
}

/// Starts `maar demo` in a 110x30 pseudo-terminal.
fn spawn() -> (
    Box<dyn portable_pty::Child + Send + Sync>,
    Box<dyn Write + Send>,
    Screen,
) {
    spawn_with(&[])
}

/// As `spawn`, with extra environment variables.
fn spawn_with(
    env: &[(&str, &str)],
) -> (
    Box<dyn portable_pty::Child + Send + Sync>,
    Box<dyn Write + Send>,
    Screen,
) {
    spawn_args(&["demo", "--speed", "600", "--no-state"], env)
}

/// `maar ARGS` in a 110x30 pseudo-terminal, with extra environment variables.
fn spawn_args(
    args: &[&str],
    env: &[(&str, &str)],
) -> (
    Box<dyn portable_pty::Child + Send + Sync>,
    Box<dyn Write + Send>,
    Screen,
) {
    let pty = native_pty_system();
    let pair = pty
        .openpty(PtySize {
            rows: 30,
            cols: 110,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_maar"));
    cmd.args(args);
    cmd.cwd(env!("CARGO_MANIFEST_DIR"));
    cmd.env("TERM", "xterm-256color");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = pair.slave.spawn_command(cmd).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let writer = pair.master.take_writer().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _keep = pair.master;
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    (
        child,
        writer,
        Screen {
            parser: vt100::Parser::new(30, 110, 0),
            rx,
            raw: Vec::new(),
        },
    )
}

fn wait_exit(child: &mut Box<dyn portable_pty::Child + Send + Sync>) -> portable_pty::ExitStatus {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < end, "did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` to the child and checks it exits with 128 + the signal number, within
/// `secs`, having left the alternate screen and shown the cursor again.
fn killed_restores(
    child: &mut Box<dyn portable_pty::Child + Send + Sync>,
    s: &mut Screen,
    sig: &str,
    code: u32,
    secs: u64,
) {
    let pid = child.process_id().expect("a pid").to_string();
    let sent = Instant::now();
    assert!(std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap()
        .success());
    let st = wait_exit(child);
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(secs), "{sig}: took {took:?}");
    assert_eq!(
        st.exit_code(),
        code,
        "{sig}: exits 128 + the signal: {st:?}"
    );
    while let Ok(bytes) = s.rx.recv_timeout(Duration::from_millis(300)) {
        s.raw.extend_from_slice(&bytes);
    }
    let raw = String::from_utf8_lossy(&s.raw);
    let left = raw.rfind("\x1b[?1049l").expect("left the alternate screen");
    let entered = raw.rfind("\x1b[?1049h").expect("entered it first");
    assert!(left > entered, "{sig}: the alternate screen was left last");
    assert!(
        raw[left..].contains("\x1b[?25h")
            || raw[..left].rfind("\x1b[?25h") > raw[..left].rfind("\x1b[?25l"),
        "{sig}: cursor shown again"
    );
}

#[test]
fn every_stop_signal_restores_the_terminal() {
    for (sig, code) in [("-INT", 130), ("-TERM", 143), ("-HUP", 129), ("-QUIT", 131)] {
        let (mut child, _writer, mut s) = spawn();
        s.wait_for("latest events", 20);
        killed_restores(&mut child, &mut s, sig, code, 5);
    }
}

#[test]
fn a_signal_restores_the_terminal_even_when_the_event_loop_is_stuck() {
    for (sig, code) in [("-TERM", 143), ("-INT", 130), ("-HUP", 129), ("-QUIT", 131)] {
        let (mut child, mut writer, mut s) = spawn_with(&[("MAAR_DEBUG_STALL", "1")]);
        s.wait_for("latest events", 20);
        // The event loop blocks for a minute: keys, frames and signals wait on it.
        writer.write_all(b":debug-stall 60\r").unwrap();
        writer.flush().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        killed_restores(&mut child, &mut s, sig, code, 4);
        let raw = String::from_utf8_lossy(&s.raw);
        assert!(
            raw.contains("the console did not stop in time; terminal restored"),
            "{sig}: says why it stopped the hard way"
        );
    }
}

#[test]
fn the_console_runs_in_a_terminal_takes_keys_and_restores_it() {
    let (mut child, mut writer, mut s) = spawn();
    let first = s.wait_for("maar demo", 20);
    let first = if first.contains("latest events") {
        first
    } else {
        s.wait_for("latest events", 10)
    };
    assert!(
        first.contains("GPUs by model") && first.contains("queue:"),
        "{first}"
    );
    writer.write_all(b":jobs\r").unwrap();
    writer.flush().unwrap();
    let jobs = s.wait_for("queue (", 10);
    let jobs = if jobs.contains("PRIO") {
        jobs
    } else {
        s.wait_for("PRIO", 10)
    };
    assert!(jobs.contains("gpt-finetune-lab"), "{jobs}");
    // A line pasted longer than the terminal's read buffer (crossterm's edge-triggered
    // reader left what followed the first 1 KiB until the next key: the Enter at its
    // end was not taken) is taken whole, its Enter too.
    let mut long = b":speed 5".to_vec();
    long.extend(std::iter::repeat_n(b'0', 3000));
    long.push(b'\r');
    writer.write_all(&long).unwrap();
    writer.flush().unwrap();
    s.wait_for("speed: give a number from 1 to 86400", 10);
    writer.write_all(b"?").unwrap();
    writer.flush().unwrap();
    s.wait_for("KEYS", 10);
    writer.write_all(b"q").unwrap();
    writer.flush().unwrap();
    let status = wait_exit(&mut child);
    assert!(status.success(), "{status:?}");
    // Drain what is left and check the alternate screen was left.
    while let Ok(bytes) = s.rx.recv_timeout(Duration::from_millis(300)) {
        s.raw.extend_from_slice(&bytes);
    }
    let raw = String::from_utf8_lossy(&s.raw);
    assert!(raw.contains("\x1b[?1049h"), "entered the alternate screen");
    assert!(
        raw.contains("\x1b[?1049l"),
        "left the alternate screen on quit"
    );
}

/// Presses keys and waits for what they should show.
fn press(w: &mut Box<dyn Write + Send>, s: &mut Screen, keys: &[u8], want: &str) -> String {
    w.write_all(keys).unwrap();
    w.flush().unwrap();
    s.wait_for(want, 10)
}

#[test]
fn the_real_console_previews_actions_travels_in_time_and_works_alerts() {
    let home = std::env::temp_dir().join(format!("maar-pty-travel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    let (mut child, mut w, mut s) = spawn_args(
        &["demo", "--speed", "3600"],
        &[("XDG_STATE_HOME", home.to_str().unwrap())],
    );
    s.wait_for("latest events", 20);
    // Let an hour of history be recorded, then pause.
    std::thread::sleep(Duration::from_secs(2));
    press(&mut w, &mut s, b" ", "PAUSED");
    let shown = press(&mut w, &mut s, b":nodes\rd", "would evict");
    assert!(shown.contains("what if"), "{shown}");
    press(&mut w, &mut s, b"n", "kept as it was");
    let past = press(&mut w, &mut s, b"[", "PAST t=");
    assert!(past.contains("actions off"), "{past}");
    press(&mut w, &mut s, b"c", "actions are off");
    press(&mut w, &mut s, b":at 30m\r", "PAST t=30m");
    press(&mut w, &mut s, b":now\r", "back to now");
    press(&mut w, &mut s, b":alerts\r", "alerts: open");
    press(&mut w, &mut s, b"?", "you are");
    w.write_all(b"q").unwrap();
    w.flush().unwrap();
    // `?` toggled help; q quits from any screen.
    let st = wait_exit(&mut child);
    assert!(st.success(), "{st:?}");
    let _ = std::fs::remove_dir_all(&home);
}

/// The process state letter of `pid` (`T`: stopped), from /proc.
fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|r| r.trim_start().chars().next())
        .unwrap_or('?')
}

#[test]
fn suspend_restores_the_terminal_and_continue_takes_it_back() {
    let (mut child, mut w, mut s) = spawn();
    s.wait_for("latest events", 20);
    let pid = child.process_id().expect("a pid");
    let wait_state = |want: char| {
        let end = Instant::now() + Duration::from_secs(5);
        while proc_state(pid) != want {
            assert!(Instant::now() < end, "state {} not {want}", proc_state(pid));
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let kill = |sig: &str| {
        assert!(std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap()
            .success())
    };
    // SIGUSR1 changes nothing (its default would end maar with the terminal raw).
    kill("-USR1");
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGUSR1 ended it");
    // SIGTSTP (kill -TSTP, or a job-control stop): the terminal is given back first.
    for how in ["signal", "ctrl-z"] {
        s.raw.clear();
        match how {
            "signal" => kill("-TSTP"),
            _ => w.write_all(b"\x1a").unwrap(),
        }
        wait_state('T');
        while let Ok(bytes) = s.rx.recv_timeout(Duration::from_millis(300)) {
            s.parser.process(&bytes);
            s.raw.extend_from_slice(&bytes);
        }
        let raw = String::from_utf8_lossy(&s.raw).into_owned();
        assert!(
            raw.contains("\x1b[?1049l"),
            "{how}: left the alternate screen"
        );
        kill("-CONT");
        // Continued: the console is back on its screen and takes keys.
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(bytes) = s.rx.recv_timeout(Duration::from_millis(200)) {
                s.parser.process(&bytes);
                s.raw.extend_from_slice(&bytes);
            }
            let raw = String::from_utf8_lossy(&s.raw);
            if raw.rfind("\x1b[?1049h") > raw.rfind("\x1b[?1049l") {
                break;
            }
            assert!(Instant::now() < end, "{how}: never took the screen back");
        }
        s.wait_for("latest events", 10);
    }
    w.write_all(b"q").unwrap();
    assert_eq!(wait_exit(&mut child).exit_code(), 0);
}
