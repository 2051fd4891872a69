//! Trust (issue 22): the engine is the one door to the state file. Its file and socket
//! are its owner's; callers are known by the kernel (peer credentials), judged by the
//! engine's roles, and a command is recorded at most once per key; an engine that lost
//! its lease (paused past it) or its file (deleted) acknowledges nothing and stops; the
//! file stays bounded (checkpoints thinned with age).

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use maar::api::{Remote, Reply, Request};
use maar::record::{LeaseKind, Record, RecordError};
use maar_scheduler::Command as Cmd;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("maar-trust-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn maar(d: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_maar"));
    c.env("XDG_STATE_HOME", d)
        .env("XDG_CONFIG_HOME", d.join("config"))
        .env_remove("MAAR_ROLES")
        .env_remove("SSH_CONNECTION");
    c
}

fn state(d: &Path) -> PathBuf {
    d.join("maar").join("lab.db")
}

/// A running `maar demo --headless`, killed if the test fails.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    fn signal(&self, sig: &str) {
        assert!(Command::new("kill")
            .args([sig, &self.0.id().to_string()])
            .status()
            .unwrap()
            .success());
    }

    /// Waits for it to end by itself; its exit code and stderr.
    fn ended_within(&mut self, t: Duration) -> (Option<i32>, String) {
        let end = Instant::now() + t;
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.0.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                return (st.code(), err);
            }
            assert!(Instant::now() < end, "it did not stop within {t:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Starts the demo headless in `d` (with `roles` as the engine owner's roles file) and
/// waits until it serves its socket.
fn engine(d: &Path, roles: Option<&Path>) -> Running {
    let mut c = maar(d);
    c.args(["demo", "--headless", "--speed", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(r) = roles {
        c.env("MAAR_ROLES", r);
    }
    let child = Running(c.spawn().unwrap());
    let end = Instant::now() + Duration::from_secs(30);
    while !matches!(Remote::connect(&state(d)), Ok(Some(_))) {
        assert!(Instant::now() < end, "the engine never served its socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// A demo record's meta, for files made by hand.
fn meta() -> maar::record::Meta {
    maar::record::Meta {
        backend: "demo".into(),
        cluster: "lab".into(),
        scenario: None,
        seed: None,
        created: "2026-12-02T00:00:00Z".into(),
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// `maar ARGS` run as another uid (and gid), with `$USER` claiming root.
fn as_uid(d: &Path, uid: u32, args: &[&str]) -> Output {
    maar(d)
        .args(args)
        .env("USER", "root")
        .env("HOME", "/nonexistent")
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap()
}

#[test]
fn a_stranger_reads_through_the_socket_and_cannot_act_by_any_route() {
    if !is_root() {
        eprintln!("skipped: acting as a second user needs root (setuid for the child)");
        return;
    }
    let d = dir("stranger");
    // The binary must be reachable by the second user.
    let roles = d.join("roles.yaml");
    std::fs::write(
        &roles,
        "users:\n  nobody: viewer\nsocket:\n  everyone: true\n",
    )
    .unwrap();
    let mut running = engine(&d, Some(&roles));
    let st = state(&d);
    let s = st.to_str().unwrap();
    // The file is its owner's; the socket admits everyone (the roles decide).
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&st), 0o600);
    assert_eq!(mode(&maar::api::socket_path(&st)), 0o666);
    // nobody (a viewer) reads through the running maar, without access to the file.
    let o = as_uid(&d, 65534, &["get", "nodes", "--state", s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("a100-01"));
    let o = as_uid(&d, 65534, &["audit", "--state", s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // ... and cannot act: not with its own roles file, nor as "root" by $USER.
    let own = d.join("mine.yaml");
    std::fs::write(&own, "default: admin\n").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = maar(&d)
        .args(["cordon", "a100-01", "--state", s])
        .env("MAAR_ROLES", &own)
        .env("USER", "root")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains("needs the operator role") && err.contains("user nobody is viewer"),
        "{err}"
    );
    // A uid with no passwd entry is named by its number, not by $USER=root.
    let o = as_uid(&d, 4_000_123, &["cordon", "a100-01", "--state", s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("uid4000123 is viewer"),
        "{}",
        text(&o.stderr)
    );
    // The file itself: not writable, not even readable, by the stranger.
    let o = Command::new("sh")
        .args(["-c", &format!("cat {s} > /dev/null || echo denied")])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(text(&o.stdout).contains("denied"));
    // The old inbox is not a door: a row claiming to be root is never applied.
    {
        let mut rec = Record::open(&st).unwrap();
        let fake = maar_scheduler::Actor {
            user: "root".into(),
            uid: Some(0),
            from: None,
        };
        rec.inbox_push(
            &fake,
            &Cmd::DrainNode {
                node: "t4-01".into(),
            },
        )
        .unwrap();
    }
    std::thread::sleep(Duration::from_millis(800));
    // The audit: the refusals, by uid, and no drain.
    let o = maar(&d)
        .args(["audit", "-o", "json", "--state", s])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert!(rows
        .iter()
        .any(|r| r["actor"] == "nobody" && r["uid"] == 65534 && r["result"] == "refused"));
    assert!(rows.iter().any(|r| r["actor"] == "uid4000123"));
    assert!(
        !rows.iter().any(|r| r["action"] == "drain_node"),
        "{rows:?}"
    );
    running.signal("-TERM");
    running.ended_within(Duration::from_secs(20));
    // With no maar running: readers need read permission, commands the owner.
    let o = as_uid(&d, 65534, &["get", "nodes", "--state", s]);
    assert_ne!(o.status.code(), Some(0), "the file is private");
    std::fs::set_permissions(&st, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = as_uid(&d, 65534, &["get", "nodes", "--state", s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = as_uid(&d, 65534, &["cordon", "a100-01", "--state", s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("only its owner (root) may change it"),
        "{}",
        text(&o.stderr)
    );
    assert!(Record::open(&st)
        .unwrap()
        .audit(&Default::default())
        .unwrap()
        .iter()
        .all(|r| r.result.is_err()));
}

#[test]
fn a_command_is_recorded_at_most_once_per_key() {
    let d = dir("key");
    let _running = engine(&d, None);
    let r = Remote::connect(&state(&d)).unwrap().unwrap();
    let ask = || {
        r.ask(&Request::Apply {
            command: Cmd::CordonNode {
                node: "t4-02".into(),
            },
            key: "k-1".into(),
            ssh: Some("\u{1b}[2J198.51.100.9".into()),
        })
        .unwrap()
    };
    let (Reply::Applied { result: a, seq: s1 }, Reply::Applied { result: b, seq: s2 }) =
        (ask(), ask())
    else {
        panic!("not applied")
    };
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
    assert_eq!(s1, s2, "the second ask is the first answer");
    // The same key with another command is not a retry: refused, not answered as
    // the first.
    let other = r
        .ask(&Request::Apply {
            command: Cmd::CordonNode {
                node: "t4-03".into(),
            },
            key: "k-1".into(),
            ssh: None,
        })
        .unwrap();
    let Reply::Applied { result, .. } = other else {
        panic!("not answered: {other:?}")
    };
    let why = result.expect_err("refused");
    assert!(
        why.contains("key k-1 was used for another command"),
        "{why}"
    );
    let rows = r.audit(&Default::default()).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].key.as_deref(), Some("k-1"));
    // The actor is who the kernel says; an address that is not one is not kept.
    assert_eq!(rows[0].actor.uid, Some(nix::unistd::getuid().as_raw()));
    assert_eq!(rows[0].actor.from, None);
}

#[test]
fn a_paused_engine_that_lost_its_lease_acknowledges_nothing_and_stops() {
    let d = dir("paused");
    let mut running = engine(&d, None);
    let st = state(&d);
    // Stopped (Ctrl-Z, SIGSTOP, a VM pause) with a request waiting in its socket.
    running.signal("-STOP");
    let path = st.clone();
    let asked = std::thread::spawn(move || {
        let r = Remote::connect(&path).unwrap().unwrap();
        r.ask(&Request::Apply {
            command: Cmd::CordonNode {
                node: "a100-02".into(),
            },
            key: "while-paused".into(),
            ssh: None,
        })
    });
    std::thread::sleep(maar::record::LEASE_STALE + Duration::from_millis(500));
    // The owner's command takes the file over (the stopped maar is not asked).
    let mut took = None;
    // Whether the engine was let run between tries (while it still held the lease).
    let mut let_run = false;
    for _ in 0..5 {
        let o = maar(&d)
            .args(["cordon", "t4-01", "-o", "json"])
            .output()
            .unwrap();
        if o.status.code() == Some(0) {
            took = Some(o);
            break;
        }
        // Stopped in the middle of a write (SQLite's lock): let it finish one.
        assert!(text(&o.stderr).contains("locked"), "{}", text(&o.stderr));
        running.signal("-CONT");
        let_run = true;
        std::thread::sleep(Duration::from_millis(200));
        running.signal("-STOP");
        std::thread::sleep(maar::record::LEASE_STALE + Duration::from_millis(500));
    }
    let o = took.expect("taken over within five tries");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["via"], "file", "{v}");
    // Continued: it finds its lease gone, answers nothing as done, and exits 1.
    running.signal("-CONT");
    let answer = asked.join().unwrap();
    let acked = matches!(answer, Ok(Reply::Applied { result: Ok(_), .. }));
    // Let run between tries, it may have applied the waiting command while its lease
    // was still its own (then it is recorded, below); never after losing it.
    assert!(
        !acked || let_run,
        "acknowledged on a lost lease: {answer:?}"
    );
    let (code, err) = running.ended_within(Duration::from_secs(10));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("taken over") || err.contains("lost the state file"),
        "{err}"
    );
    let rows = Record::open(&st)
        .unwrap()
        .audit(&Default::default())
        .unwrap();
    let recorded = rows
        .iter()
        .filter(|r| r.key.as_deref() == Some("while-paused"))
        .count();
    assert_eq!(
        recorded,
        usize::from(acked),
        "acknowledged once and recorded once: {rows:?}"
    );
    assert_eq!(rows.iter().filter(|r| r.object == "node/t4-01").count(), 1);
    let o = maar(&d).args(["state", "verify"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn a_state_file_deleted_under_a_running_maar_stops_it() {
    let d = dir("deleted");
    let mut running = engine(&d, None);
    let st = state(&d);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", st.display()));
    }
    let t = Instant::now();
    let (code, err) = running.ended_within(Duration::from_secs(5));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("deleted"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // Nothing is acknowledged after: there is no maar and no cluster.
    let o = maar(&d).args(["cordon", "t4-01"]).output().unwrap();
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn resume_waits_for_a_command_holding_the_file() {
    let d = dir("resume");
    let st = state(&d);
    std::fs::create_dir_all(st.parent().unwrap()).unwrap();
    drop(
        maar::backend::fresh_demo(
            Some(&st),
            maar::load::BUILTIN_LAB,
            maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap(),
            None,
        )
        .unwrap()
        .1,
    );
    let mut held = Record::open(&st).unwrap();
    held.acquire_as(LeaseKind::Cli).unwrap();
    let mut running = Running(
        maar(&d)
            .args(["demo", "--headless", "--resume"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        running.0.try_wait().unwrap().is_none(),
        "refused, not waiting"
    );
    held.release().unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while !matches!(Remote::connect(&st), Ok(Some(_))) {
        assert!(Instant::now() < end, "it never took the file");
        assert!(running.0.try_wait().unwrap().is_none());
        std::thread::sleep(Duration::from_millis(20));
    }
    running.signal("-TERM");
    running.ended_within(Duration::from_secs(20));
}

#[test]
fn a_maar_stopped_before_its_engine_started_does_not_take_the_file_back() {
    use maar::engine::{self, EngineOptions};
    let d = dir("taken-at-start");
    let st = state(&d);
    std::fs::create_dir_all(st.parent().unwrap()).unwrap();
    // A maar took the file and restored the cluster, then was stopped before its
    // engine ran; meanwhile a command was applied without it (the lease lapsed).
    let (loaded, rec) = maar::backend::fresh_demo(
        Some(&st),
        maar::load::BUILTIN_LAB,
        maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap(),
        None,
    )
    .unwrap();
    let mut rec = rec.unwrap();
    rec.acquire().unwrap();
    let mut other = Record::open(&st).unwrap();
    other.acquire_as(LeaseKind::Cli).unwrap();
    other.release().unwrap();
    // Woken, its engine starts: it takes nothing back and acknowledges nothing.
    let handle = engine::start(
        loaded,
        Some(rec),
        EngineOptions {
            speed: 60.0,
            paused: false,
            ..Default::default()
        },
    );
    let got = handle.apply(
        maar_scheduler::Actor::system("t"),
        Cmd::CordonNode {
            node: "t4-01".into(),
        },
    );
    assert!(got.is_err(), "acknowledged: {got:?}");
    let why = handle.view().status.fatal.clone().unwrap_or_default();
    assert!(why.contains("taken over"), "said why: {why}");
    assert!(
        Record::open(&st).unwrap().holder().unwrap().is_none(),
        "the lease was not taken again"
    );
    handle.shutdown();
}

#[test]
fn a_roles_file_that_others_may_write_or_replace_is_refused() {
    let d = dir("roles-file");
    let f = d.join("roles.yaml");
    std::fs::write(&f, "users:\n  mallory: admin\n").unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    let start = |d: &Path| {
        let mut child = Running(
            maar(d)
                .env("MAAR_ROLES", &f)
                .args(["demo", "--headless", "--no-state"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let end = Instant::now() + Duration::from_secs(20);
        while child.0.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < end,
                "started with a roles file others may write"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut err = String::new();
        std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        (child.0.wait().unwrap().code(), err)
    };
    mode(&f, 0o644);
    assert!(maar::roles::Roles::from_path(&f, true).is_ok());
    // Writable by others: anyone could name themselves admin.
    mode(&f, 0o666);
    let e = maar::roles::Roles::from_path(&f, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("may be written by other users"), "{e}");
    // The file safe, its folder open to all: anyone could put their own in its place.
    mode(&f, 0o644);
    mode(&d, 0o777);
    let e = maar::roles::Roles::from_path(&f, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("folder") && e.contains("may be written"), "{e}");
    // Sticky (as /tmp): others cannot replace this user's file.
    mode(&d, 0o1777);
    assert!(maar::roles::Roles::from_path(&f, true).is_ok());
    // A maar told to take roles from an unsafe file refuses to start with them.
    mode(&f, 0o666);
    let (code, err) = start(&d);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not trusted"), "{err}");
    mode(&d, 0o755);
}

#[test]
fn a_maar_woken_after_another_took_its_file_leaves_the_new_ones_socket() {
    let d = dir("woken-socket");
    let st = state(&d);
    // (Its log to a file: a pipe nobody reads would fill and stop it.)
    let log = d.join("a.log");
    let start = |resume: bool| {
        let mut c = maar(&d);
        c.args(["demo", "--headless"]);
        let err = if resume {
            c.arg("--resume");
            Stdio::null()
        } else {
            Stdio::from(std::fs::File::create(&log).unwrap())
        };
        Running(c.stdout(Stdio::null()).stderr(err).spawn().unwrap())
    };
    let serving = |within: Duration| {
        let end = Instant::now() + within;
        while !matches!(Remote::connect(&st), Ok(Some(_))) {
            assert!(Instant::now() < end, "no maar serves the file");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mut a = start(false);
    serving(Duration::from_secs(20));
    // Paused past its lease: another maar takes the file over and serves it.
    a.signal("-STOP");
    std::thread::sleep(maar::record::LEASE_STALE + Duration::from_millis(500));
    let b = start(true);
    // (The stopped one's socket still takes connections: wait for the lease.)
    let end = Instant::now() + Duration::from_secs(20);
    while Record::open(&st)
        .ok()
        .and_then(|r| r.holder().ok().flatten())
        .is_none_or(|h| h.pid != b.0.id() as i64)
    {
        assert!(Instant::now() < end, "the second maar never took the file");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut b = b;
    // Woken, the first one stops; the second still serves at the socket.
    a.signal("-CONT");
    a.ended_within(Duration::from_secs(20));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("taken over"), "{err}");
    let o = maar(&d)
        .args(["cordon", "t4-01", "-o", "json", "--state"])
        .arg(&st)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["via"], "socket", "{v}");
    b.signal("-TERM");
    b.ended_within(Duration::from_secs(20));
}

#[test]
fn a_reader_holding_the_file_makes_a_command_wait_then_say_so_not_a_usage_error() {
    let d = dir("reader-lock");
    let st = state(&d);
    std::fs::create_dir_all(st.parent().unwrap()).unwrap();
    let mut rec = maar::backend::fresh_demo(
        Some(&st),
        maar::load::BUILTIN_LAB,
        maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap(),
        None,
    )
    .unwrap()
    .1
    .unwrap();
    rec.acquire().unwrap();
    rec.release().unwrap();
    drop(rec);
    // No maar runs (the file is back in rollback-journal mode): a reader inside a
    // read holds SQLite's shared lock.
    let reader =
        rusqlite::Connection::open_with_flags(&st, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    reader
        .execute_batch("BEGIN; SELECT count(*) FROM commands;")
        .unwrap();
    let _n: i64 = reader
        .query_row("SELECT count(*) FROM commands", [], |r| r.get(0))
        .unwrap();
    let o = maar(&d)
        .args(["uncordon", "t4-01", "--state"])
        .arg(&st)
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "busy, not a usage error: {err}");
    assert!(
        err.contains("locked by another process") && err.contains("fuser"),
        "{err}"
    );
    drop(reader);
}

#[test]
fn a_writer_that_lost_the_lease_writes_nothing() {
    let d = dir("fence");
    let p = d.join("x.db");
    drop(Record::create(&p, &meta()).unwrap());
    let mut a = Record::open(&p).unwrap();
    a.acquire().unwrap();
    // Another process takes the lease (a's lapsed): the same pid here, a new token.
    let mut b = Record::open(&p).unwrap();
    b.acquire().unwrap();
    let actor = maar_scheduler::Actor::system("t");
    let cmd = Cmd::CordonNode { node: "n".into() };
    let e = a
        .append_command(0, &actor, &cmd, &Ok("ok".into()), None, &[], None)
        .unwrap_err();
    assert!(matches!(e, RecordError::LeaseLost { .. }), "{e}");
    assert!(matches!(
        a.checkpoint(0, 0, "{}", "{}"),
        Err(RecordError::LeaseLost { .. })
    ));
    assert!(!a.heartbeat().unwrap());
    assert_eq!(b.command_count().unwrap(), 0);
    b.append_command(0, &actor, &cmd, &Ok("ok".into()), None, &[], None)
        .unwrap();
    assert_eq!(b.command_count().unwrap(), 1);
}

#[test]
fn checkpoints_thin_with_age_hourly_then_daily_then_weekly() {
    let d = dir("thin");
    let p = d.join("x.db");
    let mut r = Record::create(&p, &meta()).unwrap();
    let core = "x".repeat(200_000);
    let days = 120u64;
    // One checkpoint every simulated hour for 120 days.
    for i in 0..=(days * 24) {
        r.checkpoint(0, i * 3600, &core, "{}").unwrap();
    }
    let times = r.checkpoint_times().unwrap();
    let newest = days * 86_400;
    let age = |t: u64| newest - t;
    let hourly: Vec<_> = times.iter().filter(|&&t| age(t) <= 2 * 86_400).collect();
    let daily: Vec<_> = times
        .iter()
        .filter(|&&t| age(t) > 2 * 86_400 && age(t) <= 60 * 86_400)
        .collect();
    let weekly: Vec<_> = times.iter().filter(|&&t| age(t) > 60 * 86_400).collect();
    // Hourly for the last two days, daily for 60 days before, weekly before that.
    assert!((48..=50).contains(&hourly.len()), "{hourly:?}");
    assert!((57..=59).contains(&daily.len()), "{daily:?}");
    assert!((8..=10).contains(&weekly.len()), "{weekly:?}");
    assert_eq!(times[0], 0, "the first is kept");
    assert!(daily.windows(2).all(|w| w[1] - w[0] == 86_400), "{daily:?}");
    assert!(
        weekly.windows(2).all(|w| w[1] - w[0] == 7 * 86_400),
        "{weekly:?}"
    );
    // Packed: 2,881 checkpoints of 200 kB each, kept in a few megabytes.
    drop(r);
    let size = std::fs::metadata(&p).unwrap().len()
        + std::fs::metadata(format!("{}-wal", p.display()))
            .map(|m| m.len())
            .unwrap_or(0);
    assert!(size < 12 << 20, "{size} bytes");
    let r = Record::open(&p).unwrap();
    assert_eq!(r.latest_checkpoint().unwrap().unwrap().core, core);
}

/// Where another user could swap the state file or plant what lies beside it, maar
/// writes nothing (as ssh's StrictModes): a folder others may write to and not sticky,
/// a journal or socket that is a link or another user's, a state file of another user.
/// Found by a hostile second user: in a group-writable folder, or in /tmp before the
/// owner's maar started, a listener at `<state>.sock` took the owner's commands and
/// answered "done"; a forged state file was resumed.
#[test]
fn a_state_file_another_user_could_swap_is_not_written() {
    let d = dir("strict");
    let made = |sub: &str, mode: u32| {
        let f = d.join(sub);
        std::fs::create_dir_all(&f).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        f.join("lab.db")
    };
    let unsafe_why = |r: Result<Record, RecordError>| match r {
        Err(RecordError::Unsafe { why, .. }) => why,
        Err(e) => panic!("another refusal: {e}"),
        Ok(_) => panic!("written"),
    };
    // A folder any user may write to: refused, saying how to mend it.
    let open = made("open", 0o777);
    let why = unsafe_why(Record::create(&open, &meta()));
    assert!(
        why.contains("may be written by other users (mode 777)") && why.contains("chmod go-w"),
        "{why}"
    );
    assert!(!open.exists(), "nothing was made");
    // Sticky (as /tmp) is not enough for the file's own folder: another user may still
    // plant its journal or socket there before SQLite opens it.
    let sticky = made("sticky", 0o1777);
    let why = unsafe_why(Record::create(&sticky, &meta()));
    assert!(
        why.contains("(mode 1777)") && why.contains("(sticky or not)"),
        "{why}"
    );
    // A folder of the owner's own inside a sticky one is: nobody else can rename it.
    let inside = d.join("sticky").join("mine").join("lab.db");
    Record::create(&inside, &meta()).unwrap();
    // A folder of the owner's own under a folder others may write to (not sticky) is
    // not: they could rename it and put their own in its place.
    let team = made("team", 0o777)
        .parent()
        .unwrap()
        .join("alice")
        .join("lab.db");
    let why = unsafe_why(Record::create(&team, &meta()));
    assert!(
        why.contains("above it may be written by other users (mode 777) and is not sticky"),
        "{why}"
    );
    let private = made("private", 0o755);
    // Group-writable, the group this user's alone (a private user group under umask
    // 002; a Kubernetes volume given the pod's fsGroup, 2775): accepted.
    let own_group = made("own-group", 0o2775);
    nix::unistd::chown(
        own_group.parent().unwrap(),
        None,
        Some(nix::unistd::getegid()),
    )
    .unwrap();
    if nix::unistd::Group::from_gid(nix::unistd::getegid())
        .ok()
        .flatten()
        .is_none_or(|g| g.mem.is_empty())
    {
        Record::create(&own_group, &meta()).unwrap();
    }
    // A folder maar makes is writable by its owner alone, whatever the umask.
    let nested = d.join("new").join("deeper").join("lab.db");
    Record::create(&nested, &meta()).unwrap();
    assert_eq!(
        std::fs::metadata(nested.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o022,
        0
    );
    // A journal planted as a link: refused before SQLite follows it.
    let linked = made("linked", 0o755);
    std::os::unix::fs::symlink(d.join("elsewhere"), format!("{}-wal", linked.display())).unwrap();
    assert!(unsafe_why(Record::create(&linked, &meta())).contains("-wal is a symbolic link"));
    // A command on a state file whose folder was opened to all since: refused, exit 2,
    // the file as it was; a read too (its journal could be another user's).
    Record::create(&private, &meta()).unwrap();
    std::fs::set_permissions(
        private.parent().unwrap(),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    for args in [
        vec!["cordon", "a100-01", "--state"],
        vec!["audit", "--state"],
    ] {
        let o = maar(&d).args(&args).arg(&private).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("its folder") && text(&o.stderr).contains("(mode 777)"),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    assert_eq!(
        Record::open_read_only(&private)
            .unwrap()
            .command_count()
            .unwrap(),
        0
    );
    if !is_root() {
        eprintln!("skipped the rest: files of another user need root (chown)");
        return;
    }
    let nobody = nix::unistd::Uid::from_raw(65534);
    // A link on the path that another user owns (they could point it elsewhere between
    // maar's look and SQLite's open): refused, wherever it points.
    let target = made("target", 0o755);
    let link = d.join("via");
    std::os::unix::fs::symlink(target.parent().unwrap(), &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let why = unsafe_why(Record::create(&link.join("lab.db"), &meta()));
    assert!(
        why.contains("the link") && why.contains("belongs to user"),
        "{why}"
    );
    // The owner's own link inside a folder others may write to: refused too (the
    // folder as given is judged, not only where the link leads).
    let team2 = made("team2", 0o777);
    let inner = team2.parent().unwrap().join("maar");
    std::os::unix::fs::symlink(target.parent().unwrap(), &inner).unwrap();
    let why = unsafe_why(Record::create(&inner.join("lab.db"), &meta()));
    assert!(why.contains("(mode 777)"), "{why}");
    // Group-writable for a group another user has (nobody's primary group): refused.
    let shared = made("shared-group", 0o2775);
    nix::unistd::chown(
        shared.parent().unwrap(),
        None,
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .unwrap();
    let why = unsafe_why(Record::create(&shared, &meta()));
    assert!(
        why.contains("may be written by other users (mode 2775)"),
        "{why}"
    );
    // A Kubernetes volume given the pod's fsGroup: group-writable (2775) for a group no
    // user database knows, so nobody else is in it: accepted (deploy/scheduler.yaml).
    let volume = made("fsgroup", 0o2775);
    let unknown = (42_000..43_000)
        .map(nix::unistd::Gid::from_raw)
        .find(|&g| nix::unistd::Group::from_gid(g).ok().flatten().is_none())
        .unwrap();
    nix::unistd::chown(volume.parent().unwrap(), None, Some(unknown)).unwrap();
    Record::create(&volume, &meta()).unwrap();
    // A socket another user planted beside the owner's new state file.
    let planted = made("planted", 0o755);
    let sock = format!("{}.sock", planted.display());
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    nix::unistd::chown(sock.as_str(), Some(nobody), None).unwrap();
    let why = unsafe_why(Record::create(&planted, &meta()));
    assert!(why.contains(".sock belongs to user"), "{why}");
    // A state file of another user: its owner alone runs maar on it.
    let theirs = made("theirs", 0o755);
    drop(Record::create(&theirs, &meta()).unwrap());
    nix::unistd::chown(&theirs, Some(nobody), None).unwrap();
    let why = unsafe_why(Record::open(&theirs));
    assert!(
        why.contains("it belongs to user") && why.contains("only its owner runs maar on it"),
        "{why}"
    );
    // A client sends nothing to a socket whose process is not of the state file's
    // owner (the kernel names the peer): here the state file is nobody's and the
    // listener this test's.
    let sock = format!("{}.sock", theirs.display());
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let sent = std::thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        let (s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut got = Vec::new();
        use std::io::Read;
        let _ = (&s).read_to_end(&mut got);
        got
    });
    let e = match Remote::connect(&theirs) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a planted socket was trusted"),
    };
    assert!(
        e.contains("served by a process of user root, not of")
            && e.contains("nothing was sent to it"),
        "{e}"
    );
    assert!(
        sent.join().unwrap().is_empty(),
        "nothing reached the listener"
    );
}

/// A command too large to take is refused at the door and not recorded: a viewer's
/// refused commands are recorded, and 25 node names of 131 kB each (a hostile second
/// user's) made every later read through the socket (audit, get, explain) longer than
/// an answer may be.
#[test]
fn a_command_too_large_is_refused_unrecorded_and_reads_go_on() {
    let d = dir("large");
    let _e = engine(&d, None);
    let s = state(&d);
    let s = s.to_str().unwrap();
    let huge = "A".repeat(131_000);
    for _ in 0..3 {
        let o = maar(&d)
            .args(["cordon", &huge, "--state", s])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(
                "not taken: a value of the command is 131000 bytes long; at most 16384 are taken"
            ),
            "{}",
            text(&o.stderr)
        );
    }
    let o = maar(&d).args(["audit", "--state", s]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stdout).contains("AAAA"), "not recorded");
    // A name of ordinary length is still judged and recorded.
    let o = maar(&d)
        .args(["cordon", "no-such-node", "--state", s])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let o = maar(&d).args(["audit", "--state", s]).output().unwrap();
    assert!(
        text(&o.stdout).contains("no-such-node"),
        "{}",
        text(&o.stdout)
    );
    // Many refused commands each under the bound (15 kB names, 9 MB in all, as fast
    // as they go): the record keeps each cut short, and at most 60 of one user's a
    // minute; the rest are answered as refused, not recorded. Reads go on.
    let r = Remote::connect(&state(&d)).unwrap().unwrap();
    let name = "B".repeat(15_000);
    let before = std::fs::metadata(state(&d)).unwrap().len();
    let mut unrecorded = 0;
    for i in 0..200 {
        let reply = r
            .ask(&Request::Apply {
                command: Cmd::CordonNode {
                    node: format!("{name}{i}"),
                },
                key: format!("flood-{i}"),
                ssh: None,
            })
            .unwrap();
        match reply {
            Reply::Applied {
                result: Err(why), ..
            } => {
                if why.contains("(not recorded: more than 60 refusals an hour from") {
                    unrecorded += 1;
                }
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(unrecorded >= 200 - 60, "{unrecorded}");
    let o = maar(&d)
        .args(["get", "nodes", "--state", s])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("a100-01"));
    let o = maar(&d)
        .args(["audit", "-o", "json", "--state", s])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("BBBB…") && !out.contains(&"B".repeat(1100)),
        "cut short"
    );
    let grown = std::fs::metadata(state(&d))
        .unwrap()
        .len()
        .saturating_sub(before);
    assert!(grown < 2 << 20, "{grown} bytes for 200 refusals");
    // A map of more than 256 entries: not taken; a refused command's long map keys
    // are cut in the record.
    let wide: std::collections::BTreeMap<String, String> =
        (0..300).map(|i| (format!("k{i}"), "v".into())).collect();
    let reply = r
        .ask(&Request::Apply {
            command: Cmd::LabelNode {
                node: "a100-01".into(),
                set: wide,
                remove: vec![],
            },
            key: "wide".into(),
            ssh: None,
        })
        .unwrap();
    assert!(
        matches!(&reply, Reply::Applied { result: Err(why), .. } if why.contains("has 300 entries; at most 256 are taken")),
        "{reply:?}"
    );
    // A key longer than a key is: not taken.
    let reply = r
        .ask(&Request::Apply {
            command: Cmd::CordonNode {
                node: "a100-01".into(),
            },
            key: "k".repeat(10_000),
            ssh: None,
        })
        .unwrap();
    assert!(
        matches!(&reply, Reply::Applied { result: Err(why), .. } if why.contains("its key is longer than 128 bytes")),
        "{reply:?}"
    );
}

/// A running maar judges by its roles file as it stands: an operator demoted in the
/// file acts no more, without a restart (found by a hostile second user: bob, demoted
/// by `sed -i` in the file, still cordoned nodes). A file that no longer parses leaves
/// the roles as they were.
#[test]
fn a_role_changed_in_the_file_is_in_force_without_a_restart() {
    if !is_root() {
        eprintln!("skipped: acting as a second user needs root (setuid for the child)");
        return;
    }
    let d = dir("reread");
    let (roles, _e) = open_to_nobody(&d, "operator");
    let st = state(&d);
    let s = st.to_str().unwrap();
    let o = as_uid(&d, 65534, &["cordon", "a100-01", "--state", s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // A broken edit: the roles stay as they were (and the log says why).
    std::fs::write(&roles, "users: [\n").unwrap();
    let o = as_uid(&d, 65534, &["uncordon", "a100-01", "--state", s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // Demoted: refused at once, the file named.
    std::fs::write(
        &roles,
        "users:\n  nobody: viewer  \nsocket:\n  everyone: true\n",
    )
    .unwrap();
    let o = as_uid(&d, 65534, &["cordon", "a100-02", "--state", s]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains("needs the operator role") && err.contains("user nobody is viewer"),
        "{err}"
    );
    // Made operator again by an edit of the same size ("viewer  " and "operator"), its
    // modification time put back
    // (as `cp -p` or `rsync -a` leave it): seen all the same.
    let before = d.join("before");
    std::fs::write(&before, "").unwrap();
    assert!(Command::new("touch")
        .args(["-r"])
        .arg(&roles)
        .arg(&before)
        .status()
        .unwrap()
        .success());
    std::fs::write(
        &roles,
        "users:\n  nobody: operator\nsocket:\n  everyone: true\n",
    )
    .unwrap();
    assert!(Command::new("touch")
        .args(["-r"])
        .arg(&before)
        .arg(&roles)
        .status()
        .unwrap()
        .success());
    let o = as_uid(&d, 65534, &["cordon", "a100-02", "--state", s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // The file removed: the defaults (a user named nowhere is a viewer on a shared
    // state file), not the roles it gave.
    std::fs::remove_file(&roles).unwrap();
    let o = as_uid(&d, 65534, &["uncordon", "a100-02", "--state", s]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("needs the operator role"),
        "{}",
        text(&o.stderr)
    );
}

/// The demo in `d` with a roles file making `nobody` (uid 65534) a `role` and the
/// socket open to every local user: the roles file and the running engine.
fn open_to_nobody(d: &Path, role: &str) -> (PathBuf, Running) {
    let roles = d.join("roles.yaml");
    std::fs::write(
        &roles,
        format!("users:\n  nobody: {role}\nsocket:\n  everyone: true\n"),
    )
    .unwrap();
    let e = engine(d, Some(&roles));
    (roles, e)
}

/// `req` (a request's JSON) sent by `nobody` to the socket `sock`, through this test
/// binary's `send_as_another_user_helper`: its output ("ANSWER <line>").
fn send_as_nobody(req: &str, sock: &Path) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "send_as_another_user_helper", "--nocapture"])
        .env("MAAR_TEST_SEND", req)
        .env("MAAR_TEST_SOCKET", sock)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap()
}

/// Not a test by itself: run as another user by `a_key_seen_in_the_audit_...`, it sends
/// the request in `MAAR_TEST_SEND` to the socket in `MAAR_TEST_SOCKET` and prints the
/// answer line.
#[test]
fn send_as_another_user_helper() {
    let (Some(req), Some(sock)) = (
        std::env::var_os("MAAR_TEST_SEND"),
        std::env::var_os("MAAR_TEST_SOCKET"),
    ) else {
        return;
    };
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.write_all(req.to_str().unwrap().as_bytes()).unwrap();
    s.write_all(b"\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(&s).read_line(&mut line).unwrap();
    println!("ANSWER {line}");
}

/// A key answers only its sender: another user who sends a key seen in the audit is
/// judged and recorded as any command, and gets no one else's answer (found by a
/// hostile second user: bob's key brought bob's "cordoned", and the attempt went
/// unrecorded).
#[test]
fn a_key_seen_in_the_audit_answers_only_its_sender() {
    if !is_root() {
        eprintln!("skipped: acting as a second user needs root (setuid for the child)");
        return;
    }
    let d = dir("stolen-key");
    let (_roles, _e) = open_to_nobody(&d, "viewer");
    let st = state(&d);
    let r = Remote::connect(&st).unwrap().unwrap();
    let Reply::Applied { result, .. } = r
        .ask(&Request::Apply {
            command: Cmd::CordonNode {
                node: "t4-02".into(),
            },
            key: "k-owner".into(),
            ssh: None,
        })
        .unwrap()
    else {
        panic!("not applied")
    };
    assert!(result.is_ok(), "{result:?}");
    let stolen = serde_json::to_string(&Request::Apply {
        command: Cmd::Cancel {
            job: "ml-prod/gpt-finetune-lab".into(),
            why: None,
        },
        key: "k-owner".into(),
        ssh: None,
    })
    .unwrap();
    let o = send_as_nobody(&stolen, &maar::api::socket_path(&st));
    let out = text(&o.stdout);
    assert!(
        out.contains("ANSWER")
            && out.contains("needs the operator role")
            && !out.contains("cordoned"),
        "{out}{}",
        text(&o.stderr)
    );
    let rows = r.audit(&Default::default()).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1].actor.user, "nobody");
    assert!(rows[1].result.is_err(), "{:?}", rows[1]);
    assert_eq!(rows[1].key.as_deref(), Some("k-owner@65534"));
    // Its own use of that key is still at most once: asked again, its first answer.
    let o = send_as_nobody(&stolen, &maar::api::socket_path(&st));
    assert!(
        text(&o.stdout).contains("needs the operator role"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(r.audit(&Default::default()).unwrap().len(), 2);
}

/// One user cannot take every connection of a running maar, and a connection that
/// trickles its request is dropped when its time is up (found by a hostile second
/// user: 32 connections sending a byte every 5 s kept everyone out for as long as they
/// liked).
#[test]
fn one_user_cannot_hold_the_door_and_a_trickling_request_is_dropped() {
    if !is_root() {
        eprintln!("skipped: acting as a second user needs root (setuid for the child)");
        return;
    }
    use std::io::{Read, Write};
    let d = dir("door");
    let (_roles, _e) = open_to_nobody(&d, "viewer");
    let st = state(&d);
    let sock = maar::api::socket_path(&st);
    let started = Instant::now();
    let held = hold_the_door(&sock);
    // This user's next request is turned away (once the server has taken the eight:
    // on a busy machine that may take a moment)...
    let remote = Remote::connect(&st).unwrap().unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    let e = loop {
        std::thread::sleep(Duration::from_millis(200));
        match remote.ask_once(&Request::Meta) {
            Err(e) => break e.to_string(),
            Ok(r) => assert!(Instant::now() < end, "still served: {r:?}"),
        }
    };
    assert!(
        e.contains("too many of this user's requests at once"),
        "{e}"
    );
    // ... another's is served.
    let meta = serde_json::to_string(&Request::Meta).unwrap();
    let o = send_as_nobody(&meta, &sock);
    assert!(
        text(&o.stdout).contains("ANSWER {\"meta\""),
        "{}",
        text(&o.stdout)
    );
    // The trickling connections are answered and closed once their time is up (a
    // byte every two seconds keeps none of them).
    let mut first = held.into_iter().next().unwrap();
    let mut got = Vec::new();
    first
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    loop {
        let _ = first.write_all(b" ");
        let mut b = [0u8; 4096];
        match first.read(&mut b) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(_) => {}
        }
        assert!(started.elapsed() < Duration::from_secs(25), "still held");
        std::thread::sleep(Duration::from_millis(1900));
    }
    assert!(text(&got).contains("not sent within 10s"), "{}", text(&got));
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
}

/// A reader who may not read another user's state file, with no maar running on it,
/// is told whose it is and the ways in (SQLite said only "unable to open database
/// file").
#[test]
fn a_reader_without_access_is_told_whose_file_it_is() {
    if !is_root() {
        eprintln!("skipped: acting as a second user needs root (setuid for the child)");
        return;
    }
    let d = dir("unreadable");
    let p = d.join("lab.db");
    drop(Record::create(&p, &meta()).unwrap());
    let o = as_uid(&d, 65534, &["get", "nodes", "--state", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(
        err.contains("this user may not read it (it is root's)") && err.contains("chmod g+r"),
        "{err}"
    );
}

/// Eight connections of this user's that the server holds, each having sent a byte of
/// a request: made, then kept only if the server has not answered them a moment later
/// (one turned away, because an earlier connection of this user's such as the start-up
/// probe's was still being served, is made again).
fn hold_the_door(sock: &std::path::Path) -> Vec<std::os::unix::net::UnixStream> {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut held: Vec<std::os::unix::net::UnixStream> = Vec::new();
    loop {
        while held.len() < maar::api::MAX_CONNECTIONS_PER_USER {
            let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
            // (Turned away and closed at once, the write may find it closed: made
            // again.)
            if s.write_all(b"{").is_ok() {
                held.push(s);
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        held.retain(|s| {
            s.set_nonblocking(true).unwrap();
            let open = matches!((&*s).read(&mut [0u8; 256]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
            s.set_nonblocking(false).unwrap();
            open
        });
        if held.len() == maar::api::MAX_CONNECTIONS_PER_USER {
            return held;
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "never held eight"
        );
    }
}

/// A user's parallel commands beyond the eight served at once wait their turn: the
/// client asks a busy maar again (found by a new user's script: 4 of 12 parallel
/// cordons failed with "try again", unapplied).
#[test]
fn a_request_turned_away_as_busy_is_asked_again_until_served() {
    let d = dir("busy");
    let _e = engine(&d, None);
    let st = state(&d);
    let sock = maar::api::socket_path(&st);
    let held = hold_the_door(&sock);
    let remote = Remote::connect(&st).unwrap().unwrap();
    assert!(remote.ask_once(&Request::Meta).is_err(), "the door is held");
    let asking = std::thread::spawn(move || remote.ask(&Request::Meta));
    std::thread::sleep(Duration::from_millis(700));
    assert!(!asking.is_finished(), "it waits while the door is held");
    drop(held);
    let got = asking.join().unwrap();
    assert!(matches!(got, Ok(Reply::Meta(_))), "{got:?}");
}

/// A reader turned away from a state file others could have swapped is told it was
/// not read (it was told "not written", though it only read).
#[test]
fn a_reader_refused_an_unsafe_folder_is_told_it_was_not_read() {
    let d = dir("unsafe-read");
    let folder = d.join("shared");
    std::fs::create_dir_all(&folder).unwrap();
    let p = folder.join("lab.db");
    drop(Record::create(&p, &meta()).unwrap());
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = maar(&d)
        .args(["get", "jobs", "--state", p.to_str().unwrap()])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains(": not read: "), "{err}");
    assert!(!err.contains("not written"), "{err}");
}
