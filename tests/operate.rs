//! Operators acting on a recorded cluster from the command line, alone and beside a
//! running maar: the README's walk-through, two operators at once, the audit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use maar::record::Record;

struct Env {
    home: PathBuf,
}

impl Env {
    fn new(name: &str) -> Env {
        let home = std::env::temp_dir().join(format!("maar-operate-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        Env { home }
    }

    /// The demo's default state file under this environment.
    fn state(&self) -> PathBuf {
        self.home.join("maar").join("lab.db")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_maar"));
        c.args(args)
            .env("XDG_STATE_HOME", &self.home)
            .env_remove("SSH_CONNECTION");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// `maar get jobs -o json` read from the state file, parsed.
    fn jobs_json(&self) -> serde_json::Value {
        let state = self.state();
        let o = self.run(&[
            "get",
            "jobs",
            "-o",
            "json",
            "--state",
            state.to_str().unwrap(),
        ]);
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// Starts `maar demo --headless` and waits until it holds the state file. It stops
    /// when the caller `stop`s it, or is killed when dropped (a failing test).
    #[allow(clippy::zombie_processes)]
    fn engine(&self, extra: &[&str]) -> Running {
        let mut args = vec!["demo", "--headless"];
        args.extend_from_slice(extra);
        let mut child = self
            .cmd(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = Record::open(&self.state()) {
                if r.holder()
                    .ok()
                    .flatten()
                    .is_some_and(|h| h.pid == child.id() as i64)
                {
                    return Running(Some(child));
                }
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the engine never took the state file");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A running `maar demo --headless`, killed if the test fails before stopping it.
struct Running(Option<Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn stop(mut running: Running) {
    let mut child = running.0.take().expect("running");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let end = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the engine did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn node_line(e: &Env, node: &str) -> String {
    let o = e.run(&["get", "nodes", "--state", e.state().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .find(|l| l.starts_with(node))
        .unwrap_or_default()
        .to_string()
}

fn me() -> String {
    maar::actor::current().user
}

#[test]
fn cordon_from_the_cli_survives_quit_and_resume_and_the_audit_says_who() {
    let e = Env::new("readme");
    let demo = e.engine(&["--speed", "600"]);
    let o = e.run(&["cordon", "a100-03"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "node a100-03 cordoned\n");
    stop(demo);
    assert!(node_line(&e, "a100-03").contains("SchedulingDisabled"));
    // A quota approved and a job submitted before quitting survive too.
    let demo = e.engine(&["--resume", "--speed", "600"]);
    let o = e.run(&[
        "request-quota",
        "platform",
        "training-gpu",
        "--gpu",
        "2",
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let msg: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id: String = msg["message"]
        .as_str()
        .unwrap()
        .trim_start_matches("quota request #")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert_eq!(e.run(&["approve", &id]).status.code(), Some(0));
    let job = e.home.join("resume-job.yaml");
    std::fs::write(
        &job,
        "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata: {name: kept, namespace: nlp-lab}\nspec:\n  resources: {pool: training-gpu, gpu: {count: 1}, cpu: {cores: 4}, memory: {capacity: 8Gi}}\n",
    )
    .unwrap();
    assert_eq!(
        e.run(&["submit", "-f", job.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    stop(demo);
    // Reopen the same demo: still cordoned, and the demo goes on from where it was.
    let demo = e.engine(&["--resume", "--speed", "600"]);
    let jobs = e.jobs_json();
    assert!(jobs
        .as_array()
        .unwrap()
        .iter()
        .any(|j| j["name"] == "kept" && j["project"] == "nlp-lab"));
    let o = e.run(&[
        "get",
        "quotas",
        "-o",
        "json",
        "--state",
        e.state().to_str().unwrap(),
    ]);
    assert!(
        text(&o.stdout).contains("\"status\": \"Approved\""),
        "{}",
        text(&o.stdout)
    );
    std::thread::sleep(Duration::from_millis(300));
    let o = e.run(&["priority", "gpt-finetune-lab", "high"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    stop(demo);
    assert!(node_line(&e, "a100-03").contains("SchedulingDisabled"));
    let o = e.run(&["audit"]);
    let audit = text(&o.stdout);
    let cordon = audit.lines().find(|l| l.contains("cordon_node")).unwrap();
    assert!(
        cordon.contains(&me()) && cordon.contains("node/a100-03"),
        "{audit}"
    );
    assert!(cordon.contains("local") && cordon.contains("ok: node a100-03 cordoned"));
    assert!(audit.contains("set_priority"));
    // A fresh demo starts over (the old record is kept aside).
    let demo = e.engine(&[]);
    stop(demo);
    assert!(!node_line(&e, "a100-03").contains("SchedulingDisabled"));
    assert!(e.state().with_extension("db.prev").exists());
}

#[test]
fn a_command_given_beside_a_running_console_takes_effect_within_a_second() {
    let e = Env::new("two");
    let demo = e.engine(&["--speed", "60"]);
    let t = Instant::now();
    let o = e.run(&["cordon", "v100-02", "--gpu", "1", "-o", "json"]);
    let took = t.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["result"], "ok");
    assert_eq!(v["via"], "socket", "it went through the running maar: {v}");
    assert!(took < Duration::from_secs(1), "acknowledged after {took:?}");
    // Seen at once by a reader of the state file.
    let o = e.run(&["get", "gpus", "--state", e.state().to_str().unwrap()]);
    let cols = |node: &str, gpu: &str| -> Vec<String> {
        text(&o.stdout)
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|c| c.len() > 6 && c[0] == node && c[1] == gpu)
            .unwrap_or_default()
    };
    assert_eq!(cols("v100-02", "1")[6], "yes", "{}", text(&o.stdout));
    assert_eq!(cols("v100-02", "0")[6], "no");
    stop(demo);
}

#[test]
fn refusals_exit_1_with_the_reason_and_malformed_commands_exit_2() {
    let e = Env::new("refuse");
    stop(e.engine(&[]));
    for (args, why) in [
        (
            vec!["cordon", "no-such-node"],
            "refused: no node named `no-such-node`",
        ),
        (
            vec!["cordon", "a100-01", "--gpu", "8"],
            "node `a100-01` has no GPU 8 (its GPUs are 0-7)",
        ),
        (vec!["approve", "99"], "no quota request #99"),
        (
            vec!["scale", "gpt-finetune-lab", "3"],
            "is not an inference service",
        ),
        (vec!["autoscale", "llm-infer-lab"], "is not paused"),
        (
            vec!["request-quota", "nobody", "training-gpu", "--gpu", "2"],
            "no project named `nobody`",
        ),
    ] {
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            text(&o.stderr).contains(why),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    for args in [
        vec!["cordon"],
        vec!["priority", "x", "urgent"],
        vec!["request-quota", "ml-prod", "training-gpu", "--gpu", "0"],
        vec!["audit", "--since", "yesterday"],
        vec!["scale", "x", "-1"],
    ] {
        let o = e.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    }
    // The JSON answer has the fields its help names.
    let o = e.run(&["cordon", "no-such-node", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["key", "message", "result", "seq", "via"]);
    let help = text(&e.run(&["cordon", "--help"]).stdout);
    assert!(help.contains("{result, message, seq, key, via}"), "{help}");
    // A bad value is told with its command's own usage line, once.
    let o = e.run(&["priority", "x", "urgent"]);
    let err = text(&o.stderr);
    assert!(err.contains("\n\nUsage: maar priority "), "{err}");
    assert!(
        !err.contains("\n\n\n") && !err.contains("Usage: maar [COMMAND]"),
        "{err}"
    );
    // Refused commands are in the audit too, with their reason.
    let o = e.run(&["audit", "--action", "cordon_node", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["result"], "refused");
    assert_eq!(v[0]["object"], "node/no-such-node");
}

#[test]
fn quota_requests_submissions_and_scaling_from_the_cli() {
    let e = Env::new("quota");
    let demo = e.engine(&["--speed", "1", "--paused"]);
    let o = e.run(&[
        "request-quota",
        "platform",
        "training-gpu",
        "--gpu",
        "4",
        "--reason",
        "load test",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("quota request #"), "{out}");
    let id: String = out
        .trim_start_matches("quota request #")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    // Listed with the quotas, by the id the console shows (`#N` is taken too).
    let o = e.run(&["get", "quotas"]);
    let listed = text(&o.stdout);
    assert!(
        listed.contains("QUOTA REQUESTS") && listed.contains("load test"),
        "{listed}"
    );
    let o = e.run(&["approve", &format!("#{id}")]);
    assert_eq!(
        text(&o.stdout),
        format!("approved quota request #{id}: +4 GPUs\n")
    );
    // A real submit of the users' own example goes in the first time (the demo's own
    // job has another name); the same file again is refused as a duplicate.
    let example = Path::new("../shared/examples/trainjob-gpt-finetune.yaml");
    let job = if example.exists() {
        example.to_path_buf()
    } else {
        let j = e.home.join("job.yaml");
        std::fs::write(
            &j,
            "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata: {name: gpt-finetune-demo, namespace: ml-prod}\nspec:\n  resources: {pool: training-gpu, gpu: {count: 1}, cpu: {cores: 4}, memory: {capacity: 8Gi}}\n",
        )
        .unwrap();
        j
    };
    // Its preview says first how the job itself would fare, then the lists.
    let o = e.run(&["submit", "-f", job.to_str().unwrap(), "--what-if"]);
    let t = text(&o.stdout);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].contains("submit job ml-prod/"), "{t}");
    assert!(lines[1].starts_with("if done: job ml-prod/"), "{t}");
    assert!(
        lines[2].starts_with("ml-prod/")
            && (lines[2].contains(": would start now on ") || lines[2].contains(": would wait: ")),
        "{t}"
    );
    assert!(lines[3].starts_with("would evict"), "{t}");
    let o = e.run(&["submit", "-f", job.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("submitted"), "{}", text(&o.stdout));
    let again = e.run(&["submit", "-f", job.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("already exists"));
    // Scale a service by hand: its autoscaler pauses, visibly, until resumed.
    let o = e.run(&["scale", "llm-infer-lab", "5"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("autoscaler is paused"));
    let jobs = e.jobs_json();
    let svc = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "llm-infer-lab")
        .unwrap();
    assert_eq!(svc["desired_replicas"], 5);
    assert_eq!(svc["autoscaler_paused_by"], me());
    let o = e.run(&["autoscale", "llm-infer-lab"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    stop(demo);
    // The audit filters.
    let count = |args: &[&str]| {
        let mut a = vec!["audit", "-o", "json"];
        a.extend_from_slice(args);
        let o = e.run(&a);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .len()
    };
    let all = 6;
    assert_eq!(count(&[]), all);
    assert_eq!(count(&["--actor", &me()]), all);
    assert_eq!(count(&["--actor", "somebody-else"]), 0);
    assert_eq!(count(&["--action", "submit"]), all - 4);
    assert_eq!(count(&["--object", "llm-infer-lab"]), 2);
    assert_eq!(count(&["--last", "2"]), 2);
    assert_eq!(
        count(&[
            "--since",
            "2000-01-01T00:00:00Z",
            "--until",
            "2100-01-01T00:00:00Z"
        ]),
        all
    );
    assert_eq!(count(&["--since", "2100-01-01T00:00:00Z"]), 0);
    // Local times as the table shows them, and whole days.
    assert_eq!(count(&["--since", "2000-01-01"]), all);
    assert_eq!(count(&["--until", "2000-01-01 00:00"]), 0);
    let today = chrono::Local::now().format("%Y-%m-%d").to_string();
    assert_eq!(count(&["--since", &today, "--until", &today]), all);
    let o = e.run(&["audit", "-o", "csv"]);
    let csv = text(&o.stdout);
    assert!(
        csv.starts_with("seq,wall,cluster_time_s,actor,uid,from,action,object,result,message\n")
    );
    assert_eq!(csv.lines().count(), all + 1);
}

#[test]
fn an_ssh_operator_is_recorded_with_the_client_address() {
    let e = Env::new("ssh");
    stop(e.engine(&[]));
    let o = e
        .cmd(&["drain", "t4-02"])
        .env("SSH_CONNECTION", "198.51.100.23 50522 10.0.0.1 22")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = e.run(&["audit", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["from"], "198.51.100.23 (reported by the client)");
    assert_eq!(v[0]["uid"], nix::unistd::getuid().as_raw());
    assert_eq!(v[0]["action"], "drain_node");
}

#[test]
fn the_consoles_own_actions_are_seen_by_readers_once_acknowledged() {
    use maar::engine::{self, EngineOptions};
    use maar_scheduler::Command as Cmd;
    let e = Env::new("console-acts");
    let (text_, sc) = maar::load::scenario_text(None).unwrap();
    let (loaded, rec) = maar::backend::fresh_demo(Some(&e.state()), &text_, sc, None).unwrap();
    let mut rec = rec.unwrap();
    rec.acquire().unwrap();
    let handle = engine::start(
        loaded,
        Some(rec),
        EngineOptions {
            speed: 600.0,
            paused: false,
            ..Default::default()
        },
    );
    std::thread::sleep(Duration::from_millis(200));
    let ack = handle
        .apply(
            maar_scheduler::Actor::system("console-operator"),
            Cmd::CordonNode {
                node: "h100-02".into(),
            },
        )
        .unwrap();
    assert!(ack.seq.is_some(), "recorded before acknowledged");
    // Right after the acknowledgement, another process reads it.
    assert!(node_line(&e, "h100-02").contains("SchedulingDisabled"));
    let o = e.run(&["audit", "--actor", "console-operator"]);
    assert!(
        text(&o.stdout).contains("node/h100-02"),
        "{}",
        text(&o.stdout)
    );
    handle.shutdown();
}

#[test]
fn a_maar_stopped_too_long_loses_the_state_file_and_writes_no_more() {
    let e = Env::new("stopped");
    let demo = e.engine(&["--speed", "600"]);
    let pid = demo.id().to_string();
    let signal = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success())
    };
    // Past the lease's life the holder counts as gone: the command line takes over.
    // A maar stopped in the middle of writing holds SQLite's lock (the command says
    // "locked by another process"): woken and stopped again, between writes this time.
    let mut o = None;
    for _ in 0..5 {
        signal("-STOP");
        std::thread::sleep(maar::record::LEASE_STALE + Duration::from_millis(500));
        let got = e.run(&["cordon", "t4-01", "-o", "json"]);
        if got.status.code() == Some(0) || !text(&got.stderr).contains("locked by another process")
        {
            o = Some(got);
            break;
        }
        signal("-CONT");
        std::thread::sleep(Duration::from_millis(300));
    }
    let o = o.expect("stopped between writes within five tries");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["via"], "file",
        "applied directly, not through the stopped maar: {v}"
    );
    signal("-CONT");
    // The woken maar notices it lost the file and stops writing to it.
    std::thread::sleep(Duration::from_millis(2500));
    let o = e.run(&["state", "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = e.run(&["state", "show"]);
    assert!(
        text(&o.stdout).contains("running     no"),
        "{}",
        text(&o.stdout)
    );
    assert!(node_line(&e, "t4-01").contains("SchedulingDisabled"));
    stop(demo);
    // Its last checkpoint did not overwrite the command's.
    assert!(node_line(&e, "t4-01").contains("SchedulingDisabled"));
    let o = e.run(&["state", "verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn readers_see_the_running_cluster_as_it_is_now() {
    let e = Env::new("fresh");
    let demo = e.engine(&["--speed", "600"]);
    std::thread::sleep(Duration::from_millis(1500));
    let o = e.run(&["get", "metrics", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // 1.5 s at 600x is 15 simulated minutes; the reader asked for a fresh checkpoint
    // instead of reading one up to 5 s (50 simulated minutes) old.
    let t = m["time_s"].as_u64().unwrap();
    assert!(t >= 600, "the reader saw t={t}s");
    stop(demo);
}

#[test]
fn what_if_previews_a_drain_changes_nothing_and_comes_true() {
    let e = Env::new("whatif");
    let demo = e.engine(&["--speed", "3600"]);
    std::thread::sleep(Duration::from_millis(1500));
    stop(demo);
    let state = e.state();
    let commands = || Record::open(&state).unwrap().command_count().unwrap();
    let before = commands();
    let o = e.run(&["drain", "a100-01", "--what-if", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["accepted"], true);
    for k in ["evicted", "started", "still_pending", "quotas"] {
        assert!(p[k].is_array(), "{k} in {p}");
    }
    assert_eq!(commands(), before, "a preview records nothing");
    let on_node = |jobs: &serde_json::Value| -> Vec<String> {
        let mut v: Vec<String> = jobs
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| {
                j["placement"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p.as_str().unwrap().starts_with("a100-01"))
            })
            .map(|j| {
                format!(
                    "{}/{}",
                    j["project"].as_str().unwrap(),
                    j["name"].as_str().unwrap()
                )
            })
            .collect();
        v.sort();
        v
    };
    let was_there = on_node(&e.jobs_json());
    let mut evicted: Vec<String> = p["evicted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["job"].as_str().unwrap().to_string())
        .collect();
    evicted.sort();
    assert_eq!(evicted, was_there, "the preview names the jobs on the node");
    // The text form says the same.
    let o = e.run(&["drain", "a100-01", "--what-if"]);
    let t = text(&o.stdout);
    assert!(
        t.contains("would evict") && t.contains("would stay Pending"),
        "{t}"
    );
    // Done for real at the same moment: the same jobs leave, the same start.
    let o = e.run(&["drain", "a100-01"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let after = e.jobs_json();
    assert!(on_node(&after).is_empty());
    for s in p["started"].as_array().unwrap() {
        let job = s["job"].as_str().unwrap();
        let place = s["reason"].as_str().unwrap().trim_start_matches("on ");
        let j = after
            .as_array()
            .unwrap()
            .iter()
            .find(|j| {
                format!(
                    "{}/{}",
                    j["project"].as_str().unwrap(),
                    j["name"].as_str().unwrap()
                ) == job
            })
            .unwrap();
        let now: Vec<&str> = j["placement"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        for part in place.split("; ") {
            assert!(now.contains(&part), "{job} on {part}: now {now:?}");
        }
    }
    // On a scenario at a moment, no state file involved; a refusal says so, exit 1.
    let o = e.run(&[
        "cancel",
        "nope",
        "--what-if",
        "--scenario",
        "demo/lab.yaml",
        "--at",
        "2h",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("would be refused: no job named `nope`"));
    let o = e.run(&["cancel", "nope", "--at", "2h"]);
    assert_eq!(o.status.code(), Some(2), "--at needs --what-if");
}

#[test]
fn maar_label_takes_the_users_kubectl_label_line() {
    let e = Env::new("label");
    let demo = e.engine(&["--speed", "600"]);
    stop(demo);
    // The users' own labelling script, as they run it today, aimed at a lab node.
    let script = std::fs::read_to_string("../shared/examples/node-labels.sh").unwrap_or_else(|_| {
        "kubectl label node gpu-node-01 \\\n  crater.ai/node-role=gpu \\\n  crater.ai/gpu-model=a100\n".into()
    });
    let line: String = script
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let args: Vec<&str> = line
        .split_whitespace()
        .skip_while(|w| *w != "label")
        .skip(1)
        .map(|w| if w == "gpu-node-01" { "a100-08" } else { w })
        .collect();
    assert_eq!(args[0], "node");
    let mut full = vec!["label"];
    full.extend(args.iter().copied());
    let o = e.run(&full);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("node a100-08 labelled"),
        "{}",
        text(&o.stdout)
    );
    // The node's role is now `gpu`: no pool of the lab selects it.
    assert!(
        node_line(&e, "a100-08").contains(" gpu "),
        "{}",
        node_line(&e, "a100-08")
    );
    // Removing with KEY-, as kubectl does; bad keys are refused with exit 2.
    let o = e.run(&["label", "a100-08", "crater.ai/node-role-"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = e.run(&["label", "a100-08", "bad key=x"]);
    assert_eq!(o.status.code(), Some(2));
    // Options anywhere, as kubectl takes them, and as explain prints the line: a
    // preview after the labels, `--overwrite` between them, `-o json` in the middle.
    let o = e.run(&["label", "a100-08", "crater.ai/node-role=train", "--what-if"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        !text(&o.stdout).starts_with("node a100-08 labelled"),
        "a preview: {}",
        text(&o.stdout)
    );
    let o = e.run(&[
        "label",
        "node",
        "a100-08",
        "--what-if",
        "-o",
        "json",
        "crater.ai/node-role=train",
        "--overwrite",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["accepted"], true, "{v}");
    // Nothing changed by the previews: two labellings in the audit, as before.
    let o = e.run(&["audit", "--action", "label_node", "-o", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    // A value that looks like an option is still refused, not taken as a label.
    let o = e.run(&["label", "a100-08", "--bogus", "a=b"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A reader of a quiet cluster sees its clock move: a job's wait grows between two
/// reads though nothing else happened (a headless `maar kube` showed WAIT 23s for over
/// a minute).
#[test]
fn a_reader_of_a_quiet_cluster_sees_waits_grow() {
    let e = Env::new("quiet");
    let scenario = e.home.join("quiet.yaml");
    std::fs::write(
        &scenario,
        "name: quiet\npools:\n  - {name: train, kind: training, selector: {crater.ai/node-role: train}}\nnodes:\n  - {name: a100, count: 1, role: train, cpu: 64, memory: 512Gi, disk: 2Ti, gpu: {model: a100, count: 8, memory: 80Gi}}\nprojects:\n  - name: ml\n    quotas:\n      train: {max: {gpu: 16}}\n",
    )
    .unwrap();
    // (Its state file named by the engine's default: lab.db.)
    let state = e.state();
    let demo = e.engine(&[
        "--scenario",
        scenario.to_str().unwrap(),
        "--speed",
        "60",
        "--state",
        state.to_str().unwrap(),
    ]);
    let job = e.home.join("big.yaml");
    std::fs::write(
        &job,
        "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata: {name: big, namespace: ml}\nspec:\n  resources: {pool: train, gpu: {count: 16}, cpu: {cores: 4}, memory: {capacity: 8Gi}}\n",
    )
    .unwrap();
    let o = e.run(&[
        "submit",
        "-f",
        job.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let wait = |e: &Env| {
        e.jobs_json()
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == "big")
            .map(|j| j["wait_s"].as_u64().unwrap())
            .unwrap()
    };
    let first = wait(&e);
    // 60x: at least 12 cluster seconds pass (more than the 5 a reader may lag).
    std::thread::sleep(Duration::from_millis(1200));
    let second = wait(&e);
    assert!(second >= first + 10, "{first} -> {second}");
    stop(demo);
}
