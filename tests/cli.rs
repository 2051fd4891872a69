//! The real `maar` binary: exit codes, messages naming file/line/field, output shapes.

use std::process::{Command, Output};

/// Runs maar with its state folder in a fresh temporary place (never the user's).
fn maar(args: &[&str]) -> Output {
    isolated(args).output().expect("run maar")
}

/// The maar command with its state folder in a fresh temporary place: what a test
/// reads never depends on a state file the machine's user left behind.
fn isolated(args: &[&str]) -> Command {
    let state = std::env::temp_dir().join(format!(
        "maar-cli-state-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let mut c = Command::new(env!("CARGO_BIN_EXE_maar"));
    c.args(args).env("XDG_STATE_HOME", &state);
    c
}

/// Runs `c` (a headless maar) until `until` says so or 20 s pass, then interrupts it
/// (SIGTERM) and returns what it printed; the exit is 128 + 15.
fn run_until_interrupted(c: &mut Command, mut until: impl FnMut() -> bool) -> std::process::Output {
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline && !until() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(128 + 15),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tmp(name: &str, body: &str) -> String {
    let dir = std::env::temp_dir().join(format!("maar-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

const JOB: &str = "apiVersion: crater.ai/v1
kind: TrainJob
metadata: {name: probe, namespace: ml-prod}
spec:
  resources:
    pool: training-gpu
    gpu:
      count: 2
      memory: 32Gi
    cpu: {cores: 8}
    memory: {capacity: 64Gi}
";

#[test]
fn bad_quantity_names_file_line_and_field_exit_2() {
    let f = tmp("bad-qty.yaml", &JOB.replace("32Gi", "32Gx"));
    let o = maar(&["submit", "-f", &f, "--dry-run"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains(&format!("{f}:9:")), "{err}");
    assert!(err.contains("spec.resources.gpu.memory"), "{err}");
    assert!(err.contains("32Gx"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn contradiction_and_unknown_field_exit_2() {
    let f = tmp("zero.yaml", &JOB.replace("count: 2", "count: 0"));
    let o = maar(&["submit", "-f", &f, "--dry-run"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("gpu.count is 0"),
        "{}",
        text(&o.stderr)
    );
    let f = tmp(
        "unknown.yaml",
        &JOB.replace("cpu: {cores: 8}", "cpu: {cores: 8, threads: 2}"),
    );
    let o = maar(&["submit", "-f", &f, "--dry-run"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains(":10:") && err.contains("unknown field `threads`"),
        "{err}"
    );
    let f = tmp("broken.yaml", "apiVersion: crater.ai/v1\nkind: [TrainJob\n");
    let o = maar(&["submit", "-f", &f, "--dry-run"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("broken.yaml:"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(maar(&["sim", "--until", "5parsecs"]).status.code(), Some(2));
    assert_eq!(maar(&["get", "pods"]).status.code(), Some(2));
    assert_eq!(maar(&["--no-such-flag"]).status.code(), Some(2));
    // A job that is not there is an answer ("no such job", exit 1), as for every
    // command that names one; not a usage error.
    let o = maar(&["explain", "no-such-job"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("no job named `no-such-job`"));
    let o = maar(&["sim", "--scenario", "/nonexistent/x.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("/nonexistent/x.yaml: cannot read"));
}

#[test]
fn scenario_reference_errors_name_the_field() {
    let sc = "name: t
pools: [{name: p, kind: training}]
nodes: [{name: n, cpu: 4, memory: 8Gi, disk: 10Gi}]
projects: [{name: a, quotas: {nope: {max: {gpu: 1}}}}]
";
    let f = tmp("badref.yaml", sc);
    let o = maar(&["sim", "--scenario", &f]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("projects[0].quotas.nope: no pool named `nope`"),
        "{err}"
    );
}

#[test]
fn submit_dry_run_fits_exit_0_or_explains_exit_1() {
    let ok = maar(&[
        "submit",
        "-f",
        "../shared/examples/trainjob-gpt-finetune.yaml",
        "--dry-run",
    ]);
    if std::path::Path::new("../shared/examples/trainjob-gpt-finetune.yaml").exists() {
        assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
        assert!(text(&ok.stdout).contains("would run now on"));
    }
    let f = tmp(
        "v100.yaml",
        &JOB.replace("probe", "too-big")
            .replace("count: 2", "count: 2\n      models: [v100]"),
    );
    let o = maar(&["submit", "-f", &f, "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    assert!(out.contains("cannot run now"), "{out}");
    assert!(
        out.contains("GPU memory per card 16Gi < 32Gi requested"),
        "{out}"
    );
    // A real submit goes to a recorded cluster; there is none here.
    let o = maar(&["submit", "-f", &f]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("no recorded cluster here"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn sim_json_has_the_documented_fields() {
    let o = maar(&["sim", "--until", "2h", "--output", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in ["jobs", "nodes", "quotas", "metrics", "costs", "events"] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    let jobs = v["jobs"].as_array().unwrap();
    assert!(jobs.len() > 10);
    for j in jobs {
        for k in ["name", "project", "phase", "placement", "wait_s", "reasons"] {
            assert!(j.get(k).is_some(), "job misses {k}: {j}");
        }
    }
    let demo = jobs
        .iter()
        .find(|j| j["name"] == "gpt-finetune-lab")
        .unwrap();
    // Scripted jobs meet only scripted faults (random OOMs pick generated jobs), so the
    // example runs through the first two hours.
    assert_eq!(demo["phase"], "Running", "{demo}");
    assert!(demo["run_s"].as_u64().unwrap() > 0, "{demo}");
    assert_eq!(demo["project"], "ml-prod");
    assert!(v["metrics"]["total"]["gpu_milli"].as_u64().unwrap() > 0);
    assert!(v["costs"]["total"].as_f64().unwrap() > 0.0);
}

#[test]
fn get_outputs_parse() {
    let o = maar(&[
        "get",
        "nodes",
        "-o",
        "json",
        "--scenario",
        "demo/cases/e-model.yaml",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    let o = maar(&[
        "get",
        "jobs",
        "-o",
        "yaml",
        "--scenario",
        "demo/cases/e-model.yaml",
        "--at",
        "5m",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stdout).contains("name: wants-a100"),
        "{}",
        text(&o.stdout)
    );
    let o = maar(&[
        "get",
        "gpus",
        "-o",
        "wide",
        "--scenario",
        "demo/cases/e-model.yaml",
        "--at",
        "5m",
    ]);
    let t = text(&o.stdout);
    assert!(t.lines().next().unwrap().starts_with("NODE"));
    assert!(t.contains("a100-hog"));
    let o = maar(&[
        "explain",
        "wants-a100",
        "--scenario",
        "demo/cases/e-model.yaml",
        "--at",
        "5m",
    ]);
    assert!(
        text(&o.stdout).contains("Nodes:     0/1 nodes are available: 1 insufficient free GPUs; 2 nodes it can never use: 2 GPU model rtx4090 not in [a100]"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn the_console_without_a_terminal_says_so_instead_of_panicking() {
    let o = maar(&["demo"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("the console needs a terminal"), "{err}");
    assert!(err.contains("maar sim"), "{err}");
    assert!(!err.contains("panicked"));
    // Plain `maar` with stdout not a terminal runs the demo headless instead.
    let o = maar(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("scenario lab, seed 7, at 1h00m"));
}

#[test]
fn a_failed_write_exits_1_and_a_closed_pipe_exits_quietly() {
    use std::process::Stdio;
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if let Ok(full) = full {
        for args in [
            vec!["sim", "--until", "2h", "--output", "json"],
            vec!["get", "events", "--at", "1h"],
            vec!["get", "jobs", "-o", "yaml"],
            vec!["explain", "gpt-finetune-lab"],
            vec![
                "submit",
                "-f",
                "../shared/examples/trainjob-gpt-finetune.yaml",
                "--dry-run",
            ],
        ] {
            if args.contains(&"../shared/examples/trainjob-gpt-finetune.yaml")
                && !std::path::Path::new("../shared/examples/trainjob-gpt-finetune.yaml").exists()
            {
                continue;
            }
            let o = isolated(&args)
                .stdout(full.try_clone().unwrap())
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(1), "{args:?}");
            let err = text(&o.stderr);
            assert!(
                err.contains("cannot write the output") && err.contains("No space left"),
                "{args:?}: {err}"
            );
        }
    }
    // A reader that stops early (as `head` does): no message, exit 0.
    let mut child = isolated(&["sim", "--until", "24h", "--output", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(text(&o.stderr), "");
}

#[test]
fn a_scenario_chooses_its_placement_policy_and_a_wrong_one_is_named() {
    let sc = "name: t
scheduler: {placement: gpupacking}
pools: [{name: p, kind: training}]
nodes: [{name: n, cpu: 4, memory: 8Gi, disk: 10Gi}]
projects: [{name: a, quotas: {p: {max: {gpu: 1}}}}]
";
    let f = tmp("placement.yaml", sc);
    let o = maar(&["sim", "--scenario", &f, "--until", "1m"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let f = tmp("badplacement.yaml", &sc.replace("gpupacking", "fdg"));
    let o = maar(&["sim", "--scenario", &f, "--until", "1m"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("badplacement.yaml") && err.contains("fdg"),
        "{err}"
    );
    assert!(
        err.contains("badplacement.yaml:2:") && err.contains("scheduler.placement"),
        "{err}"
    );
    assert!(err.contains("fgd"), "the policies are listed: {err}");
    // And as a flag of the live backends.
    let o = maar(&["local", "--placement", "nope", "--headless"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("`nope` is not a placement policy (random, dotprod, gpuclustering, gpupacking, bestfit, fgd, maar)"), "{}", text(&o.stderr));
}

/// A dry run on a recorded live cluster (no maar running it, so its driver is the
/// offline one, which schedules nothing) says what the running maar's next cycle
/// would do: it runs now where it fits (it said "waiting for the next scheduling
/// cycle" and exit 1), and a job that can never run says why first.
#[test]
fn a_dry_run_on_a_recorded_kubernetes_cluster_runs_its_next_cycle() {
    let dir = std::env::temp_dir().join(format!("maar-cli-kube-rec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("kube-x.db");
    let mut rec = maar::record::Record::create(
        &p,
        &maar::record::Meta {
            backend: "kube".into(),
            cluster: "x".into(),
            scenario: None,
            seed: None,
            created: "2026-12-04T00:00:00Z".into(),
        },
    )
    .unwrap();
    let lab = maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap();
    let demo = maar_demo::Demo::new(lab, None).unwrap();
    rec.checkpoint(
        0,
        demo.core.now(),
        &demo.core.checkpoint_json(false),
        "null",
    )
    .unwrap();
    drop(rec);
    let state = p.display().to_string();
    let f = tmp("fits.yaml", JOB);
    let o = maar(&["submit", "-f", &f, "--state", &state, "--dry-run"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("valid; would run now on "), "{out}");
    let f = tmp(
        "v100-rec.yaml",
        &JOB.replace("count: 2", "count: 2\n      models: [v100]"),
    );
    let o = maar(&["submit", "-f", &f, "--state", &state, "--dry-run"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let reason = out.lines().find(|l| l.starts_with("Reason:")).unwrap_or("");
    assert!(reason.contains("can never run as asked"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recorded live cluster with no maar running (the lab's nodes, with events a maar
/// killed since wrote after its last checkpoint).
fn recorded_live(dir: &std::path::Path, backend: &str) -> (std::path::PathBuf, u64, String) {
    let p = dir.join(format!("{backend}-y.db"));
    let mut rec = maar::record::Record::create(
        &p,
        &maar::record::Meta {
            backend: backend.into(),
            cluster: "y".into(),
            scenario: None,
            seed: None,
            created: "2026-12-06T00:00:00Z".into(),
        },
    )
    .unwrap();
    let lab = maar::load::parse_scenario("lab", maar::load::BUILTIN_LAB).unwrap();
    let demo = maar_demo::Demo::new(lab, None).unwrap();
    let next = demo.core.cluster().next_event_seq();
    rec.checkpoint(
        0,
        demo.core.now(),
        &demo.core.checkpoint_json(false),
        "null",
    )
    .unwrap();
    let after: Vec<maar_scheduler::Event> = (0..3)
        .map(|i| maar_scheduler::Event {
            seq: next + i,
            time: demo.core.now(),
            severity: maar_scheduler::Severity::Normal,
            reason: "Scheduled".into(),
            object: format!("job/team/seen-{i}"),
            message: format!("seen-{i} bound"),
            cluster: String::new(),
        })
        .collect();
    rec.append_events(&after).unwrap();
    let node = demo
        .core
        .cluster()
        .nodes
        .iter()
        .next()
        .unwrap()
        .name
        .clone();
    (p, next, node)
}

/// A command on a recorded local-mode cluster with no maar running keeps the events a
/// maar killed since wrote after its last checkpoint: the world's, which nothing tells
/// again (they were dropped and their numbers taken by the command's events; a demo
/// is rerun, so there they are dropped as before).
#[test]
fn a_command_on_a_recorded_live_cluster_keeps_the_events_after_its_checkpoint() {
    let dir = std::env::temp_dir().join(format!("maar-cli-live-ev-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (p, next, node) = recorded_live(&dir, "local");
    let o = maar(&["cordon", &node, "--state", &p.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = maar::record::Record::open_read_only(&p).unwrap();
    let events = r.events_before(1 << 62, 100_000).unwrap();
    let late = || events.iter().filter(|x| x.seq >= next).collect::<Vec<_>>();
    for i in 0..3 {
        assert!(
            events
                .iter()
                .any(|x| x.seq == next + i && x.message == format!("seen-{i} bound")),
            "event {} lost: {:?}",
            next + i,
            late()
        );
    }
    assert!(
        events
            .iter()
            .any(|x| x.seq > next + 2 && x.object == format!("node/{node}")),
        "the cordon's event, numbered after them: {:?}",
        late()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command on a recorded Kubernetes cluster with no maar running is refused, saying
/// how to act: a start reads the cluster anew from the API server, so a command
/// recorded now would be acknowledged ("node cordoned") and never done in the cluster
/// (it was, and the node stayed as it was). Nothing is recorded.
#[test]
fn a_command_on_a_recorded_kubernetes_cluster_with_no_maar_running_is_refused() {
    let dir = std::env::temp_dir().join(format!("maar-cli-kube-off-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (p, next, node) = recorded_live(&dir, "kube");
    let state = p.display().to_string();
    let o = maar(&["cordon", &node, "--state", &state]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}{}", text(&o.stdout));
    assert!(
        err.contains("no maar is running on the kube cluster y"),
        "{err}"
    );
    assert!(
        err.contains(&format!("maar kube --context y --state {state}")),
        "{err}"
    );
    let r = maar::record::Record::open_read_only(&p).unwrap();
    assert_eq!(r.command_count().unwrap(), 0);
    assert_eq!(r.next_event_seq().unwrap(), next + 3);
    // A dry run still reads it (the next cycle of the recorded cluster).
    let f = tmp("kube-off.yaml", JOB);
    let o = maar(&["submit", "-f", &f, "--state", &state, "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `maar submit --cluster auto` with the config file's `clusters:` (two demo sites,
/// each its state file, no maar running): the job goes to the one where it starts
/// first, the why printed and recorded with the job there; `--cluster NAME` submits
/// to one by name; an unknown name, or no list, is a usage error naming the file.
#[test]
fn submit_to_the_cluster_where_it_starts_first_from_the_config_list() {
    let dir = std::env::temp_dir().join(format!("maar-cli-clusters-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cfg/maar")).unwrap();
    for site in ["lab", "site-b"] {
        let (text, sc) = maar::load::scenario_text(Some(std::path::Path::new(site))).unwrap();
        let (_, rec) =
            maar::backend::fresh_demo(Some(&dir.join(format!("{site}.db"))), &text, sc, None)
                .unwrap();
        drop(rec);
    }
    let cfg = dir.join("cfg/maar/config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "clusters:\n  - {{name: lab, state: {0}/lab.db}}\n  - {{name: site-b, state: {0}/site-b.db}}\n",
            dir.display()
        ),
    )
    .unwrap();
    let job = tmp(
        "on-h200.yaml",
        &JOB.replace("probe", "on-h200").replace(
            "count: 2\n      memory: 32Gi",
            "count: 1\n      models: [h200]",
        ),
    );
    let run = |args: &[&str]| {
        isolated(args)
            .env("XDG_CONFIG_HOME", dir.join("cfg"))
            .output()
            .unwrap()
    };
    // A dry run says where and why, and changes nothing.
    let o = run(&["submit", "-f", &job, "--cluster", "auto", "--dry-run"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(
        out.starts_with("sent to site-b: starts now on h200-"),
        "{out}"
    );
    assert!(out.contains("; in lab it can never run as asked"), "{out}");
    let jobs = |site: &str| {
        let o = run(&[
            "get",
            "jobs",
            "--state",
            &format!("{}/{site}.db", dir.display()),
            "-o",
            "json",
        ]);
        text(&o.stdout)
    };
    assert!(!jobs("site-b").contains("on-h200"));
    // For real: recorded at site-b, with why; nothing at the lab.
    let o = run(&["submit", "-f", &job, "--cluster", "auto"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(jobs("site-b").contains("on-h200"));
    assert!(!jobs("lab").contains("on-h200"));
    // Again: it is in site-b, so it goes nowhere else (refused there as a duplicate).
    let o = run(&["submit", "-f", &job, "--cluster", "auto"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    assert!(
        text(&o.stdout).starts_with("already in site-b: "),
        "{}",
        text(&o.stdout)
    );
    assert!(!jobs("lab").contains("on-h200"));
    let o = run(&[
        "explain",
        "ml-prod/on-h200",
        "--state",
        &format!("{}/site-b.db", dir.display()),
    ]);
    assert!(
        text(&o.stdout).contains("Sent:      sent to site-b"),
        "{}",
        text(&o.stdout)
    );
    // A file that asks for it itself (`crater.ai/cluster: auto`, as a label), given
    // no --cluster, is sent the same way; naming a cluster not listed is refused.
    let labelled = tmp(
        "labelled.yaml",
        &JOB.replace(
            "metadata: {name: probe, namespace: ml-prod}",
            "metadata: {name: labelled, namespace: ml-prod, labels: {crater.ai/cluster: auto}}",
        )
        .replace(
            "count: 2\n      memory: 32Gi",
            "count: 1\n      models: [h200]",
        ),
    );
    let o = run(&["submit", "-f", &labelled]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stdout).starts_with("sent to site-b: starts now on h200-"),
        "{}",
        text(&o.stdout)
    );
    assert!(jobs("site-b").contains("labelled"));
    assert!(!jobs("lab").contains("labelled"));
    // Operators name the cluster they act on, and read its audit, by its name.
    let o = run(&["cordon", "h200-01", "--cluster", "site-b"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let o = run(&["audit", "--cluster", "site-b"]);
    let audit = text(&o.stdout);
    assert!(
        audit.contains("node/h200-01") && audit.contains("job/ml-prod/on-h200"),
        "{audit}"
    );
    let o = run(&["audit", "--cluster", "lab"]);
    assert!(
        !text(&o.stdout).contains("node/h200-01"),
        "{}",
        text(&o.stdout)
    );
    // A preview looks where the command would go.
    let o = run(&["cordon", "h200-02", "--cluster", "site-b", "--what-if"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    // Reading commands name the cluster too; `all` lists every cluster of the list,
    // each row naming its own.
    let o = run(&["get", "jobs", "--cluster", "all"]);
    let all = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{all}{}", text(&o.stderr));
    assert!(all.starts_with("CLUSTER"), "{all}");
    let sent = all.lines().find(|l| l.contains("on-h200")).expect("listed");
    assert!(sent.starts_with("site-b "), "{sent}");
    assert!(all.lines().any(|l| l.starts_with("lab ")), "{all}");
    let o = run(&["get", "nodes", "--cluster", "all", "-o", "json"]);
    let nodes: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes = nodes.as_array().unwrap();
    assert_eq!(nodes.iter().filter(|n| n["cluster"] == "lab").count(), 42);
    assert_eq!(
        nodes.iter().filter(|n| n["cluster"] == "site-b").count(),
        14
    );
    let o = run(&["get", "jobs", "--cluster", "lab"]);
    assert!(
        text(&o.stdout).starts_with("NAMESPACE"),
        "{}",
        text(&o.stdout)
    );
    assert!(!text(&o.stdout).contains("on-h200"));
    // A project's GPUs summed over the clusters: its used and max are the sums of its
    // rows in each (every pool), the clusters named.
    let o = run(&["get", "quotas", "--cluster", "all", "-o", "json"]);
    // (quotas, then requests)
    let both: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let rows = both[0].as_array().unwrap();
    let sum = |field: &str| -> f64 {
        rows.iter()
            .filter(|r| r["project"] == "ml-prod")
            .map(|r| r[field]["gpu_milli"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
            / 1000.0
    };
    let (used, max) = (sum("used"), sum("max"));
    let o = run(&["get", "quotas", "--cluster", "all"]);
    let table = text(&o.stdout);
    let totals = table
        .split("PROJECTS OVER ALL CLUSTERS (summed)\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{table}"));
    let ml = totals
        .lines()
        .find(|l| l.starts_with("ml-prod "))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = ml.split_whitespace().collect();
    assert_eq!(cells[1].parse::<f64>().unwrap(), used, "{ml}");
    assert_eq!(cells[3].parse::<f64>().unwrap(), max, "{ml}");
    assert_eq!(cells[4], "lab,site-b", "{ml}");
    let o = run(&["get", "events", "--cluster", "all"]);
    let events = text(&o.stdout);
    assert!(
        events.starts_with("CLUSTER lab\n") && events.contains("\nCLUSTER site-b\n"),
        "{events}"
    );
    let o = run(&["explain", "on-h200", "--cluster", "all"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("CLUSTER site-b\n"),
        "{}",
        text(&o.stdout)
    );
    let o = run(&["explain", "on-h200", "--cluster", "site-b"]);
    assert!(text(&o.stdout).contains("Sent:      sent to site-b"));
    let o = run(&["explain", "nowhere", "--cluster", "all"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("in none of the clusters read (lab, site-b)"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["get", "jobs", "--cluster", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no such cluster in"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["submit", "-f", &job, "--cluster", "all"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["cordon", "h200-01", "--cluster", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no such cluster in"),
        "{}",
        text(&o.stderr)
    );
    // By name; and names the config knows only.
    let o = run(&["submit", "-f", &job, "--cluster", "lab", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));
    let o = run(&["submit", "-f", &job, "--cluster", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no such cluster in"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains("(lab, site-b, or auto)"),
        "{}",
        text(&o.stderr)
    );
    // `maar clusters`: every listed cluster in one maar (headless here), each
    // continued from its state file, until interrupted.
    let before = |site: &str| {
        maar::record::Record::open_read_only(&dir.join(format!("{site}.db")))
            .unwrap()
            .latest_time()
            .unwrap()
    };
    let (lab0, b0) = (before("lab"), before("site-b"));
    let started = std::time::Instant::now();
    let o = run_until_interrupted(
        isolated(&["clusters", "--headless", "--speed", "3600"])
            .env("XDG_CONFIG_HOME", dir.join("cfg")),
        || started.elapsed() > std::time::Duration::from_millis(2500),
    );
    let out = text(&o.stdout);
    assert!(out.contains("maar: lab: demo lab continued on "), "{out}");
    assert!(
        out.contains("maar: site-b: demo site-b continued on "),
        "{out}"
    );
    assert!(out.contains("maar: 2 clusters"), "{out}");
    // Both ran on (an hour a second) and were checkpointed at the stop.
    assert!(before("lab") > lab0 && before("site-b") > b0);
    // A Kubernetes cluster of the list that does not answer at the start: the others
    // go on, and it is said so (tried again until it answers).
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: gone\n  context: {cluster: gone, user: u}\ncurrent-context: gone\n",
    )
    .unwrap();
    std::fs::write(
        &cfg,
        format!(
            "clusters:\n  - {{name: lab, state: {0}/lab.db}}\n  - {{name: east, context: gone}}\n",
            dir.display()
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let o = run_until_interrupted(
        isolated(&["clusters", "--headless"])
            .env("XDG_CONFIG_HOME", dir.join("cfg"))
            .env("KUBECONFIG", &kubeconfig),
        || started.elapsed() > std::time::Duration::from_millis(2500),
    );
    let out = text(&o.stdout);
    assert!(out.contains("maar: lab: demo lab continued on "), "{out}");
    assert!(
        out.contains("maar: east: not answering, tried again every 10 s: context gone:"),
        "{out}"
    );
    assert!(
        out.contains("maar: 1 cluster, 1 more when they answer"),
        "{out}"
    );
    // With none of them answering, nothing runs.
    std::fs::write(&cfg, "clusters:\n  - {name: east, context: gone}\n").unwrap();
    let o2 = isolated(&["clusters", "--headless"])
        .env("XDG_CONFIG_HOME", dir.join("cfg"))
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert_eq!(o2.status.code(), Some(1), "{}", text(&o2.stderr));
    assert!(
        text(&o2.stderr).contains("no cluster of the list answers (east: "),
        "{}",
        text(&o2.stderr)
    );
    std::fs::write(&cfg, "clusters:\n  - {name: x}\n").unwrap();
    let o = run(&["submit", "-f", &job, "--cluster", "auto"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("config.yaml"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains("give its `state`"),
        "{}",
        text(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two demo sites never share a state file: a first site whose file would be the
/// second's is refused before anything is written twice.
#[test]
fn two_demo_sites_never_share_a_state_file() {
    let o = maar(&[
        "demo",
        "--clusters",
        "2",
        "--scenario",
        "site-b",
        "--headless",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains("the second site's state file would be the first's"),
        "{}",
        text(&o.stderr)
    );
}

/// This machine in the config's list (`local:`, with `maar local`'s options): `maar
/// clusters` runs it beside a demo as `maar local` would, on its own state file, and
/// the reading commands list its node by the cluster's name. One `local` only, and
/// not mixed with a Kubernetes context: said naming the entry.
#[test]
fn this_machine_is_a_cluster_of_the_config_list() {
    let dir = std::env::temp_dir().join(format!("maar-cli-local-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cfg/maar")).unwrap();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let (text_, sc) = maar::load::scenario_text(Some(std::path::Path::new("lab"))).unwrap();
    drop(maar::backend::fresh_demo(Some(&dir.join("lab.db")), &text_, sc, None).unwrap());
    let cfg = dir.join("cfg/maar/config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "clusters:\n  - {{name: lab, state: {0}/lab.db}}\n  - {{name: box, state: {0}/box.db, local: {{labels: {{crater.ai/node-role: gpu}}, workdir: {0}/work}}}}\n",
            dir.display()
        ),
    )
    .unwrap();
    let with_cfg = |args: &[&str]| {
        let mut c = isolated(args);
        c.env("XDG_CONFIG_HOME", dir.join("cfg"));
        c
    };
    // Up once this machine's node is recorded in its state file.
    let nodes = || {
        let o = with_cfg(&["get", "nodes", "--cluster", "box", "-o", "json"])
            .output()
            .unwrap();
        text(&o.stdout)
    };
    let o = run_until_interrupted(&mut with_cfg(&["clusters", "--headless"]), || {
        nodes().contains("\"name\"")
    });
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(128 + 15), "{out}{}", text(&o.stderr));
    assert!(out.contains("maar: lab: demo lab continued on "), "{out}");
    assert!(
        out.contains(&format!(
            "maar: box: this machine's cluster on {}/box.db",
            dir.display()
        )),
        "{out}"
    );
    let host = maar::local::backend::hostname();
    let all = with_cfg(&["get", "nodes", "--cluster", "all"])
        .output()
        .unwrap();
    let listed = text(&all.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("box ") && l.contains(&host)),
        "{listed}"
    );
    assert!(listed.lines().any(|l| l.starts_with("lab ")), "{listed}");
    // Refused entries name themselves.
    for (entry, says) in [
        (
            "clusters:\n  - {name: a, local: {}}\n  - {name: b, local: {}}\n",
            "only one cluster may be `local`",
        ),
        (
            "clusters:\n  - {name: a, context: c, local: {}}\n",
            "`local` (this machine) and a Kubernetes `context` are two clusters",
        ),
        (
            "clusters:\n  - {name: a}\n",
            "or `local: {}` for this machine",
        ),
    ] {
        std::fs::write(&cfg, entry).unwrap();
        let o = with_cfg(&["clusters", "--headless"]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains(says), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("clusters["), "{}", text(&o.stderr));
    }
}
