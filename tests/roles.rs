//! Roles: the engine checks every command against its actor's role (from the roles
//! file, or the defaults), refuses with the reason and records the refusal; the console
//! says why on the key; `--read-only` makes a session a viewer.

use std::path::PathBuf;
use std::process::{Command as Proc, Output};
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use maar::console::app::{App, Mode};
use maar::engine::{self, EngineOptions, Refusal};
use maar::record::{AuditFilter, Record};
use maar::roles::Roles;
use maar_scheduler::{Actor, Command, Role};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("maar-roles-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn me() -> String {
    maar::actor::current().user
}

fn maar(d: &std::path::Path, roles: &std::path::Path, args: &[&str]) -> Output {
    Proc::new(env!("CARGO_BIN_EXE_maar"))
        .args(args)
        .env("XDG_STATE_HOME", d)
        .env("MAAR_ROLES", roles)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A recorded demo (stopped) in `d`, its state file.
fn demo(d: &std::path::Path) -> PathBuf {
    let p = d.join("maar").join("lab.db");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let (_, rec) = maar::backend::fresh_demo(
        Some(&p),
        maar::load::BUILTIN_LAB,
        maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap(),
        None,
    )
    .unwrap();
    drop(rec);
    p
}

#[test]
fn the_roles_file_decides_and_refusals_are_recorded_with_the_reason() {
    let d = dir("cli");
    let state = demo(&d);
    let roles = d.join("roles.yaml");
    std::fs::write(&roles, format!("users:\n  {}: viewer\n", me())).unwrap();
    // A viewer may look but not act.
    let o = maar(&d, &roles, &["get", "nodes"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // A preview says so too, exit 1.
    let o = maar(&d, &roles, &["cordon", "a100-01", "--what-if"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    assert!(
        text(&o.stdout).contains("would be refused: cordon node a100-01 needs the operator role")
    );
    let o = maar(&d, &roles, &["cordon", "a100-01"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("needs the operator role")
            && err.contains(&format!("user {} is viewer in {}", me(), roles.display())),
        "{err}"
    );
    // An operator may cordon but not approve quota.
    std::fs::write(&roles, format!("users:\n  {}: operator\n", me())).unwrap();
    let o = maar(&d, &roles, &["cordon", "a100-01"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = maar(
        &d,
        &roles,
        &["request-quota", "platform", "training-gpu", "--gpu", "2"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = maar(&d, &roles, &["approve", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("needs the admin role"));
    // The refusals are in the audit, with who and why.
    let rows = Record::open(&state)
        .unwrap()
        .audit(&AuditFilter::default())
        .unwrap();
    let refused: Vec<_> = rows.iter().filter(|r| r.result.is_err()).collect();
    assert_eq!(refused.len(), 2, "{rows:?}");
    assert!(refused.iter().all(|r| r.actor.user == me()));
    assert!(refused[1]
        .result
        .as_ref()
        .unwrap_err()
        .contains("needs the admin role"));
    // A roles file that does not parse is named, with its line; exit 2.
    std::fs::write(&roles, "users:\n  x: root\n").unwrap();
    let o = maar(&d, &roles, &["cordon", "a100-02"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains(&roles.display().to_string()) && err.contains(":2"),
        "{err}"
    );
    // MAAR_ROLES naming a missing file is an error too, not silently the defaults.
    let o = maar(&d, &d.join("missing.yaml"), &["cordon", "a100-02"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

#[test]
fn nobody_named_is_a_viewer_on_a_shared_file_and_an_admin_on_their_own() {
    let d = dir("default");
    let state = demo(&d);
    let mut rec = Record::open(&state).unwrap();
    rec.acquire().unwrap();
    let loaded = maar::backend::restore(&rec, false).unwrap();
    let h = engine::start(
        loaded,
        Some(rec),
        EngineOptions {
            paused: true,
            roles: Arc::new(Roles::default()),
            ..Default::default()
        },
    );
    let owner = maar::roles::owner(&state).unwrap();
    let stranger = Actor {
        user: "stranger".into(),
        uid: Some(owner.wrapping_add(4242)),
        from: None,
    };
    let r = h.apply(
        stranger.clone(),
        Command::CordonNode {
            node: "a100-01".into(),
        },
    );
    let Err(Refusal::Refused { why, seq }) = r else {
        panic!("a stranger on a shared file is a viewer: {r:?}")
    };
    assert!(
        why.contains("stranger is viewer") && why.contains("shared"),
        "{why}"
    );
    assert!(seq.is_some(), "the refusal is recorded");
    let owner_actor = Actor {
        user: "owner".into(),
        uid: Some(owner),
        from: None,
    };
    h.apply(owner_actor.clone(), Command::ApproveQuota { id: 1 })
        .map(|_| ())
        .or_else(|e| match e {
            // The lab may have no request 1: refused by the core, not by role.
            Refusal::Refused { why, .. } if !why.contains("role") => Ok(()),
            e => Err(e),
        })
        .unwrap();
    // A read-only handle is a viewer whatever the file says.
    let ro = h.capped(Role::Viewer);
    let g = ro.grant(&owner_actor).unwrap();
    assert_eq!(g.role, Role::Viewer);
    assert!(g.why.contains("read-only"));
    let r = ro.apply(
        owner_actor,
        Command::CordonNode {
            node: "a100-01".into(),
        },
    );
    assert!(
        matches!(r, Err(Refusal::Refused { ref why, .. }) if why.contains("read-only")),
        "{r:?}"
    );
    h.shutdown();
}

#[test]
fn a_read_only_console_says_why_on_the_key_and_greys_the_help() {
    let d = dir("console");
    let mut sim = maar_demo::Demo::new(
        maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap(),
        None,
    )
    .unwrap();
    sim.run_until(3600);
    let h = engine::start(
        maar::backend::from_demo(sim),
        None,
        EngineOptions {
            paused: true,
            ..Default::default()
        },
    );
    let _ = d;
    let mut app = App::new(h.capped(Role::Viewer));
    assert_eq!(app.grant.role, Role::Viewer);
    app.command("nodes");
    app.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE));
    assert!(matches!(app.mode, Mode::Normal), "no preview for a viewer");
    assert!(
        app.message.contains("needs the operator role") && app.message.contains("read-only"),
        "{}",
        app.message
    );
    assert!(!app.snapshot.nodes[0].cordoned);
    app.key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE));
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 48)).unwrap();
    t.draw(|f| maar::console::view::draw(f, &app)).unwrap();
    let b = t.backend().buffer().clone();
    let s: String = (0..48)
        .map(|y| (0..160).map(|x| b[(x, y)].symbol()).collect::<String>() + "\n")
        .collect();
    assert!(s.contains("you are") && s.contains("viewer"), "{s}");
    assert!(s.contains("needs operator"), "{s}");
    h.shutdown();
}

/// With no maar running, a preview judges a caller who does not own the state file as
/// on a shared file: its own roles file ($MAAR_ROLES) counts for nothing (found by a
/// hostile second user: `MAAR_ROLES=mine.yaml maar approve 1 --what-if` said
/// "approved ...", exit 0).
#[test]
fn a_preview_by_another_user_ignores_the_roles_file_they_name() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: acting as a second user needs root (setuid for the child)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let d = dir("whatif-stranger");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = demo(&d);
    // As a stopped maar leaves it (rollback journal: a reader needs no write access).
    rusqlite::Connection::open(&state)
        .unwrap()
        .execute_batch("PRAGMA journal_mode=DELETE;")
        .unwrap();
    // Shared for reading: the stranger may look.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mine = d.join("mine.yaml");
    std::fs::write(&mine, "default: admin\n").unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = Proc::new(env!("CARGO_BIN_EXE_maar"))
        .args(["cordon", "a100-01", "--what-if", "--state"])
        .arg(&state)
        .env("MAAR_ROLES", &mine)
        .env("HOME", "/nonexistent")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stdout).contains(
            "would be refused: cordon node a100-01 needs the operator role; nobody is viewer"
        ),
        "{}",
        text(&o.stdout)
    );
}
