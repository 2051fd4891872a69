//! Local mode: this machine (its GPUs from readings written from NVML's documented
//! types, and from readings of a real H200) as the cluster; jobs run as real processes
//! with the GPUs they were given, their ends recorded; a wrong GPU label and a full
//! disk raise alerts; the real machine without a driver is a cluster of one GPU-less
//! node.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use maar::local::{build, Feed, LocalDriver, LocalOptions};
use maar_agent::host::RecordedHost;
use maar_agent::{Agent, NodeSample, RecordedGpus, SysinfoHost};
use maar_scheduler::{Actor, Command, Core, Driver, Phase};

const FIXTURE: &str = include_str!("../agent/tests/fixtures/nvml-8xh100.json");
/// Recorded on a real H200 (`maar agent --once -o json` on a lent GPU machine): idle,
/// then with a PyTorch process holding 30 GiB and multiplying matrices.
const H200: &str = include_str!("../agent/tests/fixtures/nvml-1xh200.json");
/// The program that runs each replica: maar itself.
const SHIM: &str = env!("CARGO_BIN_EXE_maar");

fn dir(name: &str) -> std::path::PathBuf {
    // maar's log captured from before any test logs (a callsite first met without a
    // subscriber would stay off).
    captured();
    let d = std::env::temp_dir().join(format!("maar-local-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An 8-GPU machine: the recorded GPUs and host readings, jobs run in `work`.
fn machine(work: &std::path::Path, labels: BTreeMap<String, String>) -> (Core, LocalDriver) {
    let samples: Vec<NodeSample> = serde_json::from_str(FIXTURE).unwrap();
    let mut host = samples[0].host.clone();
    // The work folder's filesystem is the node's disk.
    host.filesystems[0].mount = "/".into();
    let feed = || {
        Feed::Here(Box::new(Agent {
            host: Box::new(RecordedHost::new(vec![host.clone()])),
            gpus: Box::new(RecordedGpus::from_json(FIXTURE).unwrap()),
        }))
    };
    let opts = LocalOptions {
        agents: Vec::new(),
        labels,
        every_s: 1,
        workdir: work.to_path_buf(),
        logs: work.join("logs"),
        shim: SHIM.into(),
    };
    let mut feeds = vec![feed()];
    let (cluster, names) = build(&mut feeds, &opts).unwrap();
    let d = LocalDriver::new(feeds, names, &opts);
    (Core::new(cluster), d)
}

fn submit(core: &mut Core, d: &mut LocalDriver, name: &str, gpus: u32, cmd: &str) {
    submit_spec(core, d, name, gpus, &format!("[sh, -c, '{cmd}']"), "");
}

/// A TrainJob with the command `argv` (YAML flow) and more of its spec (`extra`).
fn submit_spec(
    core: &mut Core,
    d: &mut LocalDriver,
    name: &str,
    gpus: u32,
    argv: &str,
    extra: &str,
) {
    let yaml = format!(
        "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata: {{name: {name}, namespace: ml-prod}}\nspec:\n  command: {argv}\n  resources: {{pool: training-gpu, gpu: {{count: {gpus}}}, cpu: {{cores: 1}}, memory: {{capacity: 1Gi}}}}\n{extra}"
    );
    let spec = maar::load::parse_manifest("job.yaml", &yaml).unwrap();
    let out = d.command(core, Actor::system("test"), Command::Submit(Box::new(spec)));
    assert!(out.is_ok(), "{:?}", out.result);
}

fn phase(core: &Core, job: &str) -> Phase {
    let c = core.cluster();
    c.jobs[c.job_id(job).unwrap() as usize].phase
}

/// Advances second by second until `job` has ended (or fails after 30 s).
fn until_ended(core: &mut Core, d: &mut LocalDriver, job: &str) -> Phase {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let t = core.now() + 1;
        d.advance(core, t);
        let p = phase(core, job);
        if p.is_terminal() || p == Phase::Restarting {
            return p;
        }
        assert!(Instant::now() < end, "{job} never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn jobs_run_as_processes_with_their_gpus_and_their_ends_are_recorded() {
    let work = dir("run");
    let (mut core, mut d) = machine(&work, BTreeMap::new());
    // The users' pool and project do not exist here: the job runs in `local`.
    submit(
        &mut core,
        &mut d,
        "two-gpus",
        2,
        "echo $CUDA_VISIBLE_DEVICES > seen.txt",
    );
    assert_eq!(phase(&core, "default/two-gpus"), Phase::Running);
    let placed: Vec<u32> = core.cluster().jobs
        [core.cluster().job_id("default/two-gpus").unwrap() as usize]
        .placements[0]
        .gpus
        .iter()
        .map(|g| g.gpu)
        .collect();
    assert_eq!(
        until_ended(&mut core, &mut d, "default/two-gpus"),
        Phase::Succeeded
    );
    let seen = std::fs::read_to_string(work.join("seen.txt")).unwrap();
    let want: Vec<String> = placed.iter().map(|g| g.to_string()).collect();
    assert_eq!(
        seen.trim(),
        want.join(","),
        "CUDA_VISIBLE_DEVICES is the GPUs given"
    );
    // A failing command fails, with its exit code.
    submit(&mut core, &mut d, "fails", 1, "exit 3");
    let p = until_ended(&mut core, &mut d, "default/fails");
    assert!(matches!(p, Phase::Failed | Phase::Restarting), "{p:?}");
    assert!(core
        .cluster()
        .events
        .iter()
        .any(|e| e.object == "job/default/fails" && e.message.contains("exited with code 3")));
    // A cancelled job's process is stopped.
    submit(
        &mut core,
        &mut d,
        "sleeper",
        1,
        "echo $$ > sleeper.pid; exec sleep 60",
    );
    let t = core.now() + 1;
    d.advance(&mut core, t);
    std::thread::sleep(Duration::from_millis(300));
    let pid: i32 = std::fs::read_to_string(work.join("sleeper.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let out = d.command(
        &mut core,
        Actor::system("test"),
        Command::Cancel {
            job: "default/sleeper".into(),
            why: None,
        },
    );
    assert!(out.is_ok());
    std::thread::sleep(Duration::from_millis(200));
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ");
    assert!(!alive, "the cancelled job's process is gone");
    // A job without a command cannot run here, and says so.
    let spec = maar::load::parse_manifest(
        "nocmd.yaml",
        "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata: {name: nocmd, namespace: x}\nspec:\n  resources: {pool: p, gpu: {count: 1}}\n",
    )
    .unwrap();
    let out = d.command(
        &mut core,
        Actor::system("test"),
        Command::Submit(Box::new(spec)),
    );
    assert!(out
        .result
        .unwrap_err()
        .to_string()
        .contains("has none (spec.command)"));
}

#[test]
fn readings_feed_the_gpus_and_a_wrong_label_or_a_full_disk_raise_alerts() {
    let work = dir("alerts");
    let labels = BTreeMap::from([("crater.ai/gpu-model".to_string(), "a100".to_string())]);
    let (mut core, mut d) = machine(&work, labels);
    d.advance(&mut core, 1);
    let c = core.cluster();
    let n = &c.nodes[0];
    assert_eq!(n.gpus.len(), 8);
    assert_eq!(&*n.gpus[0].model, "h100");
    assert_eq!(n.gpus[0].util_pct, 97, "telemetry from the readings");
    assert_eq!(n.gpus[4].temp_c, 78);
    // The host's own use, measured.
    let h = n.host.expect("host use measured");
    assert_eq!(h.cpu_busy_pct, 37);
    assert_eq!(h.memory_used, 611 << 30);
    assert_eq!(h.load1_centi, 4120);
    let alerts = c.alerts();
    let keys: Vec<&str> = alerts.iter().map(|a| a.key.as_str()).collect();
    assert!(keys.contains(&"labels/h100-node-07"), "{keys:?}");
    let wrong = alerts
        .iter()
        .find(|a| a.key == "labels/h100-node-07")
        .unwrap();
    assert!(wrong
        .message
        .contains("labelled crater.ai/gpu-model=a100 but its GPUs are h100"));
    // The fixture's /data is 91% full: a warning event; the node's disk (/) is not.
    assert!(c
        .events
        .iter()
        .any(|e| e.reason == "DiskPressure" && e.message.contains("/data")));
    // The second reading has XID 94 on GPU 3: the card is unhealthy.
    d.advance(&mut core, 2);
    let g3 = &core.cluster().nodes[0].gpus[3];
    assert!(
        matches!(&g3.health, maar_scheduler::model::Health::Unhealthy(w) if w == "XID 94"),
        "{:?}",
        g3.health
    );
    assert!(core
        .cluster()
        .alerts()
        .iter()
        .any(|a| a.key == "gpu/h100-node-07/3"));
}

#[test]
fn this_machine_without_a_driver_is_one_node_without_gpus() {
    let work = dir("real");
    let opts = LocalOptions {
        agents: vec!["127.0.0.1:9".into()],
        labels: BTreeMap::new(),
        every_s: 1,
        workdir: work.clone(),
        logs: work.join("logs"),
        shim: SHIM.into(),
    };
    let mut feeds = vec![Feed::Here(Box::new(Agent {
        host: Box::new(SysinfoHost::new()),
        gpus: Box::new(maar_agent::NvmlGpus::open()),
    }))];
    let (cluster, names) = build(&mut feeds, &opts).unwrap();
    assert_eq!(cluster.nodes.len(), 1);
    let n = &cluster.nodes[0];
    assert_eq!(n.name, names[0]);
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    assert!(n.cpu_milli >= cpus * 1000);
    assert!(n.memory > 0 && n.disk > 0);
    // An agent that does not answer yet: this machine opens anyway, and it is said.
    let mut feeds = LocalDriver::feeds(&opts);
    let (cluster, names) = build(&mut feeds, &opts).unwrap();
    assert_eq!(names.len(), 2);
    assert!(names[1].is_empty());
    let mut d = LocalDriver::new(feeds, names, &opts);
    let mut core = Core::new(cluster);
    d.advance(&mut core, 1);
    assert!(core
        .cluster()
        .events
        .iter()
        .any(|e| e.reason == "AgentUnreachable" && e.message.contains("127.0.0.1:9")));
    // Labelled for GPUs it does not have: an alert.
    let opts = LocalOptions {
        agents: Vec::new(),
        labels: BTreeMap::from([
            ("crater.ai/gpu-model".to_string(), "a100".to_string()),
            ("crater.ai/gpu-count".to_string(), "8".to_string()),
        ]),
        ..opts
    };
    let mut feeds = vec![Feed::Here(Box::new(Agent {
        host: Box::new(SysinfoHost::new()),
        gpus: Box::new(RecordedGpus::new(vec![
            maar_agent::reading::GpuStatusSample {
                gpus: Vec::new(),
                status: "no NVIDIA driver".into(),
                driver: None,
            },
        ])),
    }))];
    let (cluster, _) = build(&mut feeds, &opts).unwrap();
    let a = cluster.alerts();
    assert!(
        a.iter()
            .any(|x| x.key.starts_with("labels/") && x.message.contains("but has none")),
        "{a:?}"
    );
}

#[test]
fn stopping_a_job_stops_everything_it_started_and_quitting_records_it() {
    let work = dir("groups");
    let (mut core, mut d) = machine(&work, BTreeMap::new());
    // The shell starts a child of its own; both must go.
    submit(
        &mut core,
        &mut d,
        "tree",
        1,
        "sleep 60 & echo $! > child.pid; wait",
    );
    std::thread::sleep(Duration::from_millis(400));
    let pid: i32 = std::fs::read_to_string(work.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    assert!(alive(pid));
    let out = d.command(
        &mut core,
        Actor::system("test"),
        Command::Cancel {
            job: "default/tree".into(),
            why: None,
        },
    );
    assert!(out.is_ok());
    std::thread::sleep(Duration::from_millis(300));
    assert!(!alive(pid), "the job's child was stopped with it");
    // Quitting stops running jobs and records why.
    submit(&mut core, &mut d, "left", 1, "sleep 60");
    let ev = d.stop(&mut core);
    assert!(
        ev.iter()
            .any(|e| e.object == "job/default/left" && e.message.contains("maar local exited")),
        "{ev:?}"
    );
    assert_ne!(phase(&core, "default/left"), Phase::Running);
}

/// GPUs whose card 0 runs the process whose pid is in `pidfile`, using `used` bytes.
struct OneProcess {
    inner: RecordedGpus,
    pidfile: std::path::PathBuf,
    used: u64,
}

impl maar_agent::GpuSource for OneProcess {
    fn sample(&mut self) -> maar_agent::reading::GpuStatusSample {
        let mut s = self.inner.sample();
        for g in s.gpus.iter_mut() {
            g.processes.clear();
        }
        if let Some(pid) = std::fs::read_to_string(&self.pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            s.gpus[0].processes.push(maar_agent::reading::GpuProcess {
                pid,
                used_bytes: Some(self.used),
            });
        }
        s
    }
}

/// A machine of the recorded `fixture` whose card 0 runs the job `name` (a sleep),
/// using `used` bytes, sampled twice: the job's memory share is read from its process.
fn one_job_using(name: &str, fixture: &str, used: u64) -> Core {
    let work = dir(name);
    let samples: Vec<NodeSample> = serde_json::from_str(fixture).unwrap();
    let opts = LocalOptions {
        agents: Vec::new(),
        labels: BTreeMap::new(),
        every_s: 1,
        workdir: work.clone(),
        logs: work.join("logs"),
        shim: SHIM.into(),
    };
    let mut feeds = vec![Feed::Here(Box::new(Agent {
        host: Box::new(RecordedHost::new(vec![samples
            .last()
            .unwrap()
            .host
            .clone()])),
        gpus: Box::new(OneProcess {
            inner: RecordedGpus::from_json(fixture).unwrap(),
            pidfile: work.join("job.pid"),
            used,
        }),
    }))];
    let (cluster, names) = build(&mut feeds, &opts).unwrap();
    let mut d = LocalDriver::new(feeds, names, &opts);
    let mut core = Core::new(cluster);
    submit(
        &mut core,
        &mut d,
        name,
        1,
        "echo $$ > job.pid; exec sleep 30",
    );
    std::thread::sleep(Duration::from_millis(300));
    for t in 1..=2 {
        d.advance(&mut core, t);
    }
    core
}

#[test]
fn a_jobs_gpu_memory_comes_from_its_processes() {
    let core = one_job_using("uses-half", FIXTURE, 40 << 30);
    let c = core.cluster();
    let j = &c.jobs[c.job_id("default/uses-half").unwrap() as usize];
    // 40 GiB of an 80 GiB card asked for whole: half.
    assert_eq!(j.used_pct, 50);
}

#[test]
fn a_real_h200s_readings_make_the_node_and_charge_a_job_what_its_process_used() {
    let samples: Vec<NodeSample> = serde_json::from_str(H200).unwrap();
    let card = &samples[1].gpus[0];
    // What the card read: 143,771 MiB (nvidia-smi's figure), one process of ~31 GiB.
    assert_eq!(card.memory_total_bytes, 143_771 << 20);
    let used = card.processes[0].used_bytes.unwrap();
    assert!(used > 30 << 30 && used < 32 << 30, "{used}");
    let core = one_job_using("burn", H200, used);
    let c = core.cluster();
    let n = &c.nodes[0];
    assert_eq!(n.gpus.len(), 1);
    assert_eq!(&*n.gpus[0].model, "h200");
    assert_eq!(n.gpus[0].memory, 143_771 << 20);
    assert_eq!(&*n.gpus[0].uuid, card.uuid);
    let j = &c.jobs[c.job_id("default/burn").unwrap() as usize];
    assert_eq!(j.phase, Phase::Running);
    // 31 GiB of a 140.4 GiB card, asked for whole.
    assert_eq!(j.used_pct, (used * 100 / card.memory_total_bytes) as u32);
    assert_eq!(j.used_pct, 22);
    // The card's own reading: the busy sample's utilisation and power.
    assert_eq!((n.gpus[0].util_pct, n.gpus[0].power_w), (100, 690));
}

/// Waits (up to 10 s) for `what` to hold; fails naming it if it never does.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < end, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A /proc/PID/stat field (1-based as in proc(5); 3 is the state).
fn stat_field(pid: i32, n: usize) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3).map(str::to_string)
}

/// Live (not zombie) processes whose environment holds `MAAR_JOB_TOKEN=token`, with
/// their command lines: read here from /proc, not by maar's own code.
fn with_token(token: &str) -> Vec<(i32, String)> {
    let want = format!("MAAR_JOB_TOKEN={token}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| stat_field(p, 3).is_some_and(|s| s != "Z"))
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .any(|e| e == want.as_bytes())
        })
        .map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            (p, String::from_utf8_lossy(&cmd).replace('\0', " "))
        })
        .collect()
}

fn read_trim(path: &std::path::Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn a_jobs_setsid_and_double_forked_descendants_stop_with_it() {
    let work = dir("setsid");
    let (mut core, mut d) = machine(&work, BTreeMap::new());
    // One descendant in a session of its own, one double-forked (its parent gone)
    // and in a session of its own too: neither is in the job's process group.
    submit(
        &mut core,
        &mut d,
        "escapes",
        1,
        "echo $MAAR_JOB_TOKEN > token; setsid sleep 300 & (setsid sh -c \"sleep 301; true\" &); exec sleep 302",
    );
    wait_for("the token written", || {
        !read_trim(&work.join("token")).is_empty()
    });
    let token = read_trim(&work.join("token"));
    wait_for("all three sleeps running", || {
        let p = with_token(&token);
        ["sleep 300", "sleep 301", "sleep 302"]
            .iter()
            .all(|c| p.iter().any(|(_, cmd)| cmd.starts_with(c)))
    });
    let procs = with_token(&token);
    let (shim, _, _) = d.processes()[0].clone();
    let escaped: Vec<i32> = procs
        .iter()
        .filter(|(_, c)| c.starts_with("sleep 300") || c.starts_with("sleep 301"))
        .map(|(p, _)| *p)
        .collect();
    for &p in &escaped {
        assert_ne!(
            stat_field(p, 5).unwrap(),
            shim.to_string(),
            "pid {p} left the job's process group"
        );
    }
    let out = d.command(
        &mut core,
        Actor::system("test"),
        Command::Cancel {
            job: "default/escapes".into(),
            why: None,
        },
    );
    assert!(out.is_ok());
    // Gone when the cancel returns.
    assert_eq!(
        with_token(&token),
        Vec::new(),
        "no process of the job is left"
    );
    // And reaped: the orphans that came to this process (a subreaper) leave no zombies.
    wait_for("the orphans reaped", || {
        let t = core.now() + 1;
        d.advance(&mut core, t);
        escaped
            .iter()
            .all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
    });
}

#[test]
fn a_restarted_maar_adopts_the_jobs_still_running_and_ends_those_that_ended() {
    let work = dir("adopt");
    let (mut core, mut d) = machine(&work, BTreeMap::new());
    // GPUs 0-1, 2, and 3-4 (the fixture's next reading fails GPU 3: the job there
    // ends before that reading).
    submit(
        &mut core,
        &mut d,
        "keeps",
        2,
        "until [ -e done ]; do sleep 0.05; done; echo finished",
    );
    submit(
        &mut core,
        &mut d,
        "unsaved",
        1,
        "until [ -e done ]; do sleep 0.05; done",
    );
    submit(
        &mut core,
        &mut d,
        "gone",
        2,
        "until [ -e go ]; do sleep 0.05; done; exit 4",
    );
    // The checkpoint of the cluster: what a restarted maar finds.
    let checkpoint = core.checkpoint();
    // A job started after it: its process is a stray for the next maar.
    submit(&mut core, &mut d, "stray", 1, "exec sleep 300");
    let mut saved = d.save();
    let pids: BTreeMap<String, i32> = d.processes().into_iter().map(|(j, _, p)| (j, p)).collect();
    assert_eq!(pids.len(), 4);
    // The saved state names each process by pid and start time.
    let rec = saved["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["job"] == "default/keeps")
        .unwrap()
        .clone();
    assert_eq!(rec["pid"], pids["default/keeps"]);
    assert!(rec["start"].as_u64().unwrap() > 0);
    // `unsaved` is left out of the saved state: the next maar finds it by its marks.
    saved["replicas"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["job"] != "default/unsaved");
    // maar is killed: its processes go on without it.
    d.detach();
    drop(d);
    let alive = |p: i32| stat_field(p, 3).is_some_and(|s| s != "Z");
    assert!(pids.values().all(|&p| alive(p)), "detaching stops nothing");
    // One job ends while no maar runs.
    std::fs::write(work.join("go"), "").unwrap();
    wait_for("`gone` ended", || !alive(pids["default/gone"]));

    // The restarted maar.
    let mut core = Core::restore(checkpoint).unwrap();
    let (_, mut d) = machine(&work, BTreeMap::new());
    let events = d.adopt(&mut core, &saved);
    assert_eq!(phase(&core, "default/keeps"), Phase::Running);
    assert_eq!(phase(&core, "default/unsaved"), Phase::Running);
    let adopted: BTreeMap<String, i32> =
        d.processes().into_iter().map(|(j, _, p)| (j, p)).collect();
    assert_eq!(adopted.get("default/keeps"), Some(&pids["default/keeps"]));
    assert_eq!(
        adopted.get("default/unsaved"),
        Some(&pids["default/unsaved"])
    );
    // The one that ended while maar was away ends as it did, and says so.
    assert_eq!(phase(&core, "default/gone"), Phase::Failed);
    assert!(
        events.iter().any(|e| e.object == "job/default/gone"
            && e.message.contains("ended while maar was not running")
            && e.message.contains("exited with code 4")),
        "{events:?}"
    );
    // The stray process of a job this cluster never ran is stopped.
    assert!(!alive(pids["default/stray"]), "the stray was stopped");
    assert!(events.iter().any(|e| e.reason == "StrayProcesses"));
    // The adopted jobs hold their GPUs: 3 of 8 are taken, so 6 more must wait.
    submit(&mut core, &mut d, "waits", 6, "true");
    assert_eq!(phase(&core, "default/waits"), Phase::Pending);
    // Watched until it ends; its end is read from what its shim recorded.
    std::fs::write(work.join("done"), "").unwrap();
    assert_eq!(
        until_ended(&mut core, &mut d, "default/keeps"),
        Phase::Succeeded
    );
    assert_eq!(
        until_ended(&mut core, &mut d, "default/unsaved"),
        Phase::Succeeded
    );
    let log = work.join("logs/default_keeps/replica-0.log");
    assert!(read_trim(&log).ends_with("finished"), "{log:?}");
    // A job's output is its owner's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&log), 0o600);
    assert_eq!(mode(&work.join("logs/default_keeps/replica-0.exit")), 0o600);
    assert_eq!(mode(&work.join("logs/default_keeps")), 0o700);
    // Its GPUs are free again: the waiting job runs.
    let t = core.now() + 1;
    d.advance(&mut core, t);
    assert_ne!(phase(&core, "default/waits"), Phase::Pending);
}

#[test]
fn a_command_that_cannot_start_fails_the_job_once_with_the_reason() {
    let work = dir("nocmd");
    let (mut core, mut d) = machine(&work, BTreeMap::new());
    submit_spec(&mut core, &mut d, "missing", 1, "[no-such-cmd-maar]", "");
    assert_eq!(
        until_ended(&mut core, &mut d, "default/missing"),
        Phase::Failed
    );
    let said = |core: &Core, job: &str| {
        core.cluster()
            .events
            .iter()
            .filter(|e| {
                e.object == format!("job/default/{job}")
                    && e.message
                        .contains("cannot start `no-such-cmd-maar`: No such file or directory")
            })
            .count()
    };
    assert_eq!(said(&core, "missing"), 1);
    // Not tried again.
    for _ in 0..5 {
        let t = core.now() + 1;
        d.advance(&mut core, t);
    }
    assert_eq!(phase(&core, "default/missing"), Phase::Failed);
    assert_eq!(said(&core, "missing"), 1);
    // With a restart policy, the next try waits out its back-off.
    submit_spec(
        &mut core,
        &mut d,
        "retries",
        1,
        "[no-such-cmd-maar, --flag]",
        "  restartPolicy: {policy: OnFailure, maxRestarts: 3, backoff: 30s}\n",
    );
    assert_eq!(
        until_ended(&mut core, &mut d, "default/retries"),
        Phase::Restarting
    );
    for _ in 0..5 {
        let t = core.now() + 1;
        d.advance(&mut core, t);
    }
    assert_eq!(phase(&core, "default/retries"), Phase::Restarting);
    assert_eq!(said(&core, "retries"), 1);
    assert!(core
        .cluster()
        .events
        .iter()
        .any(|e| e.object == "job/default/retries" && e.message.contains("back-off 30s")));
}

/// A writer into a shared buffer (what maar logs, captured).
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What maar logged, all tests together: one subscriber for the whole test process.
fn captured() -> &'static Captured {
    static LOG: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let captured = Captured::default();
        let sink = captured.clone();
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::fmt()
                .with_writer(move || sink.clone())
                .with_ansi(false)
                .finish(),
        );
        captured
    })
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap()
}

#[test]
fn a_100_mb_output_line_goes_to_rotated_log_files_and_only_a_cut_tail_to_maar() {
    let work = dir("huge");
    let captured = captured();
    let (mut core, mut d) = machine(&work, BTreeMap::new());
    let (rss0, hwm0) = (status_kib("VmRSS:"), status_kib("VmHWM:"));
    submit(
        &mut core,
        &mut d,
        "huge",
        1,
        "head -c 100000000 /dev/zero | tr \"\\\\000\" a; echo; echo after",
    );
    assert_eq!(
        until_ended(&mut core, &mut d, "default/huge"),
        Phase::Succeeded
    );
    let (rss1, hwm1) = (status_kib("VmRSS:"), status_kib("VmHWM:"));
    eprintln!("maar's memory around a 100 MB line: VmRSS {rss0} -> {rss1} KiB, VmHWM {hwm0} -> {hwm1} KiB");
    assert!(
        hwm1 < hwm0 + 32 * 1024,
        "the peak grew by {} KiB",
        hwm1 - hwm0
    );
    // The whole output is in the log files: 10 MiB each, three older ones kept.
    let folder = work.join("logs/default_huge");
    let total: u64 = 100_000_007;
    let max = maar::local::supervise::LOG_FILE_MAX;
    let current = std::fs::read(folder.join("replica-0.log")).unwrap();
    assert_eq!(current.len() as u64, total % max);
    assert!(current.ends_with(b"aaa\nafter\n"));
    for i in 1..=3 {
        let f = folder.join(format!("replica-0.log.{i}"));
        let m = std::fs::metadata(&f).unwrap();
        assert_eq!(m.len(), max, "{f:?}");
    }
    assert!(!folder.join("replica-0.log.4").exists());
    assert_eq!(read_trim(&folder.join("replica-0.exit")), "exit 0");
    // maar's own log holds the line cut, and the line after it.
    let wait = || {
        let text = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
        text.lines()
            .filter(|l| l.contains("default/huge: "))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    wait_for("the tail read", || {
        wait().iter().any(|l| l.ends_with("default/huge: after"))
    });
    let lines = wait();
    let cut = lines
        .iter()
        .find(|l| l.ends_with("[cut]"))
        .expect("a cut line");
    assert!(cut.len() < 4096 + 200, "{}", cut.len());
    let all: usize = lines.iter().map(|l| l.len()).sum();
    assert!(all < 64 << 10, "maar kept {all} bytes of its output");
}

#[test]
fn with_cgroup_v2_a_process_that_clears_its_environment_stops_too() {
    if maar::local::supervise::cgroup_base().is_none() {
        eprintln!(
            "skipped: no writable cgroup v2 here (the token and the subreaper are the fence; see a_jobs_setsid_...)"
        );
        return;
    }
    let work = dir("cgroup");
    let (mut core, mut d) = machine(&work, BTreeMap::new());
    // `env -i` drops MAAR_JOB_TOKEN: only the cgroup still holds it.
    submit(
        &mut core,
        &mut d,
        "hides",
        1,
        "env -i setsid sh -c \"echo \\$\\$ > hidden; exec sleep 304\" & exec sleep 305",
    );
    wait_for("the hidden pid written", || {
        !read_trim(&work.join("hidden")).is_empty()
    });
    let hidden: i32 = read_trim(&work.join("hidden")).parse().unwrap();
    let out = d.command(
        &mut core,
        Actor::system("test"),
        Command::Cancel {
            job: "default/hides".into(),
            why: None,
        },
    );
    assert!(out.is_ok());
    wait_for("the hidden process gone", || {
        let t = core.now() + 1;
        d.advance(&mut core, t);
        !std::path::Path::new(&format!("/proc/{hidden}")).exists()
    });
}
