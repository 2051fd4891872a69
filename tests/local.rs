//! Local mode: this machine (its GPUs from readings recorded from NVML's documented
//! types) as the cluster; jobs run as real processes with the GPUs they were given,
//! their ends recorded; a wrong GPU label and a full disk raise alerts; the real
//! machine without a driver is a cluster of one GPU-less node.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use maar::local::{build, Feed, LocalDriver, LocalOptions};
use maar_agent::host::RecordedHost;
use maar_agent::{Agent, NodeSample, RecordedGpus, SysinfoHost};
use maar_scheduler::{Actor, Command, Core, Driver, Phase};

const FIXTURE: &str = include_str!("../agent/tests/fixtures/nvml-8xh100.json");

fn dir(name: &str) -> std::path::PathBuf {
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
    };
    let mut feeds = vec![feed()];
    let (cluster, names) = build(&mut feeds, &opts).unwrap();
    let d = LocalDriver::new(feeds, names, &opts);
    (Core::new(cluster), d)
}

fn submit(core: &mut Core, d: &mut LocalDriver, name: &str, gpus: u32, cmd: &str) {
    let yaml = format!(
        "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata: {{name: {name}, namespace: ml-prod}}\nspec:\n  command: [sh, -c, '{cmd}']\n  resources: {{pool: training-gpu, gpu: {{count: {gpus}}}, cpu: {{cores: 1}}, memory: {{capacity: 1Gi}}}}\n"
    );
    let spec = maar::load::parse_manifest("job.yaml", &yaml).unwrap();
    let out = d.command(core, Actor::system("test"), Command::Submit(Box::new(spec)));
    assert!(out.is_ok(), "{:?}", out.result);
}

fn phase(core: &Core, job: &str) -> Phase {
    let c = core.cluster();
    c.jobs[c.job_id(job).unwrap() as usize].phase
}

/// Advances second by second until `job` has ended (or fails after 10 s).
fn until_ended(core: &mut Core, d: &mut LocalDriver, job: &str) -> Phase {
    let end = Instant::now() + Duration::from_secs(10);
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
    assert_eq!(n.gpus[0].model, "h100");
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

/// GPUs whose card 0 runs the process whose pid is in `pidfile`, using 40 GiB.
struct OneProcess {
    inner: RecordedGpus,
    pidfile: std::path::PathBuf,
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
                used_bytes: Some(40 << 30),
            });
        }
        s
    }
}

#[test]
fn a_jobs_gpu_memory_comes_from_its_processes() {
    let work = dir("usage");
    let samples: Vec<NodeSample> = serde_json::from_str(FIXTURE).unwrap();
    let opts = LocalOptions {
        agents: Vec::new(),
        labels: BTreeMap::new(),
        every_s: 1,
        workdir: work.clone(),
    };
    let mut feeds = vec![Feed::Here(Box::new(Agent {
        host: Box::new(RecordedHost::new(vec![samples[0].host.clone()])),
        gpus: Box::new(OneProcess {
            inner: RecordedGpus::from_json(FIXTURE).unwrap(),
            pidfile: work.join("job.pid"),
        }),
    }))];
    let (cluster, names) = build(&mut feeds, &opts).unwrap();
    let mut d = LocalDriver::new(feeds, names, &opts);
    let mut core = Core::new(cluster);
    submit(
        &mut core,
        &mut d,
        "uses-half",
        1,
        "echo $$ > job.pid; exec sleep 30",
    );
    std::thread::sleep(Duration::from_millis(300));
    for t in 1..=2 {
        d.advance(&mut core, t);
    }
    let c = core.cluster();
    let j = &c.jobs[c.job_id("default/uses-half").unwrap() as usize];
    // 40 GiB of an 80 GiB card asked for whole: half.
    assert_eq!(j.used_pct, 50);
}
