//! The state file: what it refuses (foreign, damaged, newer files, left untouched), what
//! it migrates (older schemas), and the lease that keeps two engines apart.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use maar::record::{Meta, Record, RecordError, APPLICATION_ID, SCHEMA_V1};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("maar-record-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn meta() -> Meta {
    Meta {
        backend: "demo".into(),
        cluster: "lab".into(),
        scenario: Some(maar::load::BUILTIN_LAB.into()),
        seed: Some(7),
        created: "2026-11-30T00:00:00.000Z".into(),
    }
}

fn maar(args: &[&str], state_home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_maar"))
        .args(args)
        .env("XDG_STATE_HOME", state_home)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_new_record_opens_again_with_its_meta() {
    let d = dir("new");
    let p = d.join("x.db");
    drop(Record::create(&p, &meta()).unwrap());
    let r = Record::open(&p).unwrap();
    assert_eq!(r.meta().unwrap(), meta());
    assert_eq!(r.command_count().unwrap(), 0);
    // Creating over it is refused.
    assert!(matches!(
        Record::create(&p, &meta()),
        Err(RecordError::Foreign { .. })
    ));
}

/// The file's bytes, to check it was not touched.
fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn foreign_damaged_and_newer_files_are_refused_and_left_untouched() {
    let d = dir("refuse");
    // Not SQLite at all.
    let junk = d.join("junk.db");
    std::fs::write(
        &junk,
        "this is a shopping list, not a database\n".repeat(200),
    )
    .unwrap();
    // SQLite, but another program's.
    let other = d.join("other.db");
    {
        let c = rusqlite::Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
    }
    // maar's, from a newer maar.
    let newer = d.join("newer.db");
    drop(Record::create(&newer, &meta()).unwrap());
    {
        let c = rusqlite::Connection::open(&newer).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    // maar's, cut short.
    let cut = d.join("cut.db");
    drop(Record::create(&cut, &meta()).unwrap());
    let whole = bytes(&cut);
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();

    for (p, want) in [
        (&junk, "not a maar state file (not an SQLite database)"),
        (
            &other,
            "not a maar state file (an SQLite file of another program)",
        ),
        (
            &newer,
            "written by a newer maar (schema 99; this maar reads up to 3)",
        ),
        (&cut, "the state file is damaged"),
    ] {
        let before = bytes(p);
        let e = match Record::open(p) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{} opened", p.display()),
        };
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        assert!(e.contains(want), "{e}");
        assert!(e.contains("left untouched"), "{e}");
        assert_eq!(bytes(p), before, "{} was changed", p.display());
        // The command line says the same, exit 2, and does not touch it either.
        for args in [
            vec!["demo", "--headless", "--state"],
            vec!["demo", "--resume", "--headless", "--state"],
            vec!["cordon", "a100-01", "--state"],
            vec!["audit", "--state"],
            vec!["get", "nodes", "--state"],
        ] {
            let mut a = args.clone();
            a.push(p.to_str().unwrap());
            let o = maar(&a, &d);
            assert_eq!(o.status.code(), Some(2), "{a:?}: {}", text(&o.stderr));
            assert!(text(&o.stderr).contains(want), "{a:?}: {}", text(&o.stderr));
            assert!(!text(&o.stderr).contains("panicked"));
            assert_eq!(bytes(p), before, "{a:?} changed {}", p.display());
        }
    }
}

#[test]
fn an_older_schema_is_migrated() {
    let d = dir("old");
    let p = d.join("v1.db");
    {
        let c = rusqlite::Connection::open(&p).unwrap();
        c.execute_batch(SCHEMA_V1).unwrap();
        c.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        for (k, v) in [
            ("app", "maar"),
            ("backend", "demo"),
            ("cluster", "lab"),
            ("created", "2026-01-01T00:00:00.000Z"),
            ("scenario", maar::load::BUILTIN_LAB),
            ("seed", "7"),
        ] {
            c.execute("INSERT INTO meta(key, value) VALUES (?1, ?2)", [k, v])
                .unwrap();
        }
        // A command recorded by the old maar.
        c.execute(
            "INSERT INTO commands(at_s, wall, actor, uid, origin, action, object, command, result, message)
             VALUES (60, '2026-01-01T00:01:00.000Z', 'bob', 1001, NULL, 'cordon_node', 'node/a100-02',
                     '{\"cordon_node\":{\"node\":\"a100-02\"}}', 'ok', 'node a100-02 cordoned')",
            [],
        )
        .unwrap();
    }
    let r = Record::open(&p).unwrap();
    let v: i32 = rusqlite::Connection::open(&p)
        .unwrap()
        .pragma_query_value(None, "user_version", |x| x.get(0))
        .unwrap();
    assert_eq!(v, maar::record::SCHEMA_VERSION);
    let rows = r.commands_after(0).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].actor.user, "bob");
    assert_eq!(rows[0].request, None);
    drop(r);
    // The migrated record works: its command shows, and new ones go through.
    let o = maar(&["get", "nodes", "--state", p.to_str().unwrap()], &d);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let line = text(&o.stdout)
        .lines()
        .find(|l| l.starts_with("a100-02"))
        .unwrap_or_default()
        .to_string();
    assert!(line.contains("SchedulingDisabled"), "{line}");
    let o = maar(&["uncordon", "a100-02", "--state", p.to_str().unwrap()], &d);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = maar(&["audit", "--state", p.to_str().unwrap(), "-o", "csv"], &d);
    let csv = text(&o.stdout);
    assert!(csv.lines().count() == 3, "{csv}");
    assert!(
        csv.contains(",bob,1001,,cordon_node,node/a100-02,ok,"),
        "{csv}"
    );
}

#[test]
fn only_one_process_holds_the_lease() {
    let d = dir("lease");
    let p = d.join("l.db");
    drop(Record::create(&p, &meta()).unwrap());
    // A lease held by a process that is gone does not count.
    {
        let c = rusqlite::Connection::open(&p).unwrap();
        c.execute(
            "INSERT INTO lease(id, pid, host, since, heartbeat_ms) VALUES (1, 999999999, ?1, 'then', ?2)",
            rusqlite::params![maar::record::hostname(), chrono::Utc::now().timestamp_millis()],
        )
        .unwrap();
    }
    let mut a = Record::open(&p).unwrap();
    assert!(a.holder().unwrap().is_none(), "a dead holder is no holder");
    a.acquire().unwrap();
    assert_eq!(
        a.holder().unwrap().map(|h| h.pid),
        Some(std::process::id() as i64)
    );
    // Another process cannot take it while it is held.
    let o = maar(
        &[
            "demo",
            "--headless",
            "--resume",
            "--state",
            p.to_str().unwrap(),
        ],
        &d,
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!("in use by maar (pid {}", std::process::id())),
        "{}",
        text(&o.stderr)
    );
    a.release().unwrap();
    assert!(a.holder().unwrap().is_none());
}

/// A reader with no maar running meets damage as damage: a page of commands zeroed
/// (the cell count of the commands table's page, as a hostile user did) read as no
/// commands at all, an empty audit and exit 0.
#[test]
fn a_reader_is_told_of_damage_not_shown_a_shorter_history() {
    let d = dir("zeroed");
    let p = d.join("zeroed.db");
    {
        let mut r = Record::create(&p, &meta()).unwrap();
        r.acquire().unwrap();
        let actor = maar_scheduler::Actor::system("t");
        for n in ["a100-01", "a100-02", "a100-03"] {
            r.append_command(
                0,
                &actor,
                &maar_scheduler::Command::CordonNode { node: n.into() },
                &Ok("ok".into()),
                None,
                &[],
                None,
            )
            .unwrap();
        }
        r.release().unwrap();
    }
    let (root, size): (i64, i64) = {
        let c = rusqlite::Connection::open(&p).unwrap();
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;")
            .unwrap();
        (
            c.query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'commands'",
                [],
                |x| x.get(0),
            )
            .unwrap(),
            c.query_row("PRAGMA page_size", [], |x| x.get(0)).unwrap(),
        )
    };
    let o = maar(&["audit", "--state", p.to_str().unwrap()], &d);
    assert!(text(&o.stdout).contains("a100-03"), "{}", text(&o.stdout));
    // Zero the leaf page's cell count (bytes 3-4 of its header).
    let mut b = bytes(&p);
    let at = ((root - 1) * size) as usize + 3;
    b[at] = 0;
    b[at + 1] = 0;
    std::fs::write(&p, &b).unwrap();
    let o = maar(&["audit", "--state", p.to_str().unwrap()], &d);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains("the state file is damaged"),
        "{}",
        text(&o.stderr)
    );
}

/// A checkpoint packed as the core writes it (the engine's way: the whole text never
/// held) reads back as the very text the core makes, and restores the same cluster.
#[test]
fn a_checkpoint_packed_as_it_is_written_reads_back_as_the_cores_text() {
    let d = dir("packed");
    let p = d.join("x.db");
    let mut r = Record::create(&p, &meta()).unwrap();
    r.acquire().unwrap();
    let lab = maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap();
    let mut demo = maar_demo::Demo::new(lab, None).unwrap();
    demo.run_until(3 * 3600);
    assert!(demo.core.cluster().jobs.len() > 10, "a cluster with jobs");
    let core = &demo.core;
    let packed = maar::record::pack_written(|w| core.write_checkpoint(false, w)).unwrap();
    let text = core.checkpoint_json(false);
    // Packed: far smaller than the text.
    assert!(
        packed.len() * 4 < text.len(),
        "{} of {}",
        packed.len(),
        text.len()
    );
    r.checkpoint_packed(0, core.now(), packed, "null").unwrap();
    let row = r.checkpoint_before(None).unwrap().expect("a checkpoint");
    assert_eq!(row.core, text);
    let back =
        maar_scheduler::input::Core::restore(serde_json::from_str(&row.core).unwrap()).unwrap();
    assert_eq!(back.checkpoint_json(false), text);
}
