//! `--metrics`: what Prometheus and the kubelet read of a running maar. The real
//! binary runs the demo headless; its `/metrics` is parsed with a Prometheus parser
//! (prometheus-parse), twice, and each family is checked to move as the cluster does;
//! the probes answer; a port in use is a usage error.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn home(name: &str) -> PathBuf {
    let h = std::env::temp_dir().join(format!("maar-metrics-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&h);
    std::fs::create_dir_all(&h).unwrap();
    h
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// One HTTP/1.1 GET: (status, body).
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    Ok((status, body.to_string()))
}

/// The samples of a scrape by (name, labels), values summed over histogram buckets'
/// `count` for histograms.
fn scrape(addr: SocketAddr) -> (prometheus_parse::Scrape, BTreeMap<String, f64>) {
    let (status, body) = get(addr, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200, "{body}");
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let s = prometheus_parse::Scrape::parse(lines).expect("Prometheus text parses");
    let mut flat = BTreeMap::new();
    for x in &s.samples {
        let mut labels: Vec<String> = x.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        let v = match &x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(h) => h.last().map(|b| b.count).unwrap_or(0.0),
            prometheus_parse::Value::Summary(_) => 0.0,
        };
        flat.insert(format!("{}{{{}}}", x.metric, labels.join(",")), v);
    }
    (s, flat)
}

fn sum(flat: &BTreeMap<String, f64>, prefix: &str) -> f64 {
    flat.iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

fn maar(home: &PathBuf) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_maar"));
    c.env("XDG_STATE_HOME", home).env_remove("SSH_CONNECTION");
    c
}

#[test]
fn the_metrics_of_a_running_demo_move_with_the_cluster_and_the_probes_answer() {
    let h = home("demo");
    let addr = free_port();
    let state = h.join("lab.db");
    let child = maar(&h)
        .args([
            "demo",
            "--headless",
            "--speed",
            "1200",
            "--state",
            state.to_str().unwrap(),
            "--metrics",
            &addr.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _running = Running(child);
    let end = Instant::now() + Duration::from_secs(30);
    while get(addr, "/healthz").is_err() {
        assert!(Instant::now() < end, "the metrics server never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, body) = get(addr, "/healthz").unwrap();
    assert_eq!((code, body.trim()), (200, "ok: demo leading"));
    let (code, body) = get(addr, "/readyz").unwrap();
    assert_eq!((code, body.trim()), (200, "ok: demo leading"));
    assert_eq!(get(addr, "/nothing").unwrap().0, 404);

    // Let the demo run a while (20 s of it a second), then scrape twice, apart.
    std::thread::sleep(Duration::from_secs(2));
    let (first, a) = scrape(addr);
    std::thread::sleep(Duration::from_secs(4));
    let (second, b) = scrape(addr);

    // Every family is declared with a type and help (a family without a sample yet,
    // such as Pending jobs by reason on an empty queue, is not shown).
    let families: Vec<&str> = second.docs.keys().map(|k| k.as_str()).collect();
    assert!(first.docs.len() <= second.docs.len());
    for f in [
        "scheduler_pending_pods",
        "scheduler_schedule_attempts",
        "scheduler_preemption_attempts",
        "scheduler_preemption_victims",
        "scheduler_pod_scheduling_sli_duration_seconds",
        "maar_job_wait_seconds",
        "maar_scheduling_step_duration_seconds",
        "maar_gpus",
        "maar_gpus_fragmented",
        "maar_quota_gpus",
        "maar_jobs",
        "maar_binds",
        "maar_state_write_duration_seconds",
        "maar_project_cost",
        "maar_project_gpu_hours",
        "maar_leading",
    ] {
        assert!(families.contains(&f), "{f} missing from {families:?}");
    }
    // Counters and histograms grow as the demo runs.
    let grew = |key: &str| {
        let (x, y) = (sum(&a, key), sum(&b, key));
        assert!(y > x, "{key}: {x} then {y}");
    };
    grew("scheduler_schedule_attempts_total{profile=maar,result=scheduled}");
    grew("maar_binds_total{result=placed}");
    grew("scheduler_pod_scheduling_sli_duration_seconds{");
    grew("maar_job_wait_seconds{");
    grew("maar_scheduling_step_duration_seconds{");
    grew("maar_state_write_duration_seconds{what=events}");
    grew("maar_project_gpu_hours{");
    // The GPU gauges account for every card of the lab, in one state each.
    let lab_gpus = sum(&b, "maar_gpus{");
    assert!(lab_gpus >= 100.0, "{lab_gpus}");
    assert_eq!(sum(&a, "maar_gpus{"), lab_gpus);
    assert!(sum(&b, "maar_gpus{model=") > 0.0);
    let allocated: f64 = b
        .iter()
        .filter(|(k, _)| k.starts_with("maar_gpus{") && k.contains("state=allocated"))
        .map(|(_, v)| v)
        .sum();
    assert!(allocated > 0.0 && allocated < lab_gpus, "{allocated}");
    // The jobs by phase: all the lab's jobs; the queue's two parts are the Pending.
    let pending = sum(&b, "maar_jobs{phase=Pending}");
    assert_eq!(sum(&b, "scheduler_pending_pods{"), pending);
    let waiting = sum(&b, "scheduler_pending_pods{queue=unschedulable}");
    assert_eq!(sum(&b, "maar_pending_jobs{"), waiting);
    assert_eq!(families.contains(&"maar_pending_jobs"), waiting > 0.0);
    assert_eq!(sum(&b, "maar_leading{"), 1.0);
}

#[test]
fn a_metrics_port_in_use_is_a_usage_error() {
    let h = home("busy");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let o = maar(&h)
        .args([
            "demo",
            "--headless",
            "--no-state",
            "--metrics",
            &addr.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("--metrics {addr}")), "{err}");
}

/// The questions a face asks the engine (explain, what-if) are timed, one sample each.
#[test]
fn the_engine_times_the_questions_it_answers() {
    use maar::engine::{self, EngineOptions};
    let sc = maar::load::load_scenario(None).unwrap();
    let mut sim = maar_demo::Demo::new(sc, None).unwrap();
    sim.run_until(3600);
    let observe = maar::observe::Observe::new();
    let handle = engine::start(
        maar::backend::from_demo(sim),
        None,
        EngineOptions {
            paused: true,
            observe: Some(observe.clone()),
            ..Default::default()
        },
    );
    let count = |what: &str| {
        let text = observe.encode();
        let key = format!("maar_question_duration_seconds_count{{what=\"{what}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map(|v| v.trim().parse::<u64>().unwrap())
            .unwrap_or(0)
    };
    let v = handle.sync().unwrap();
    let job = &v.snapshot.jobs[0];
    assert_eq!(count("explain"), 0);
    handle
        .explain(&format!("{}/{}", job.project, job.name))
        .unwrap();
    handle
        .explain(&format!("{}/{}", job.project, job.name))
        .unwrap();
    assert_eq!(count("explain"), 2);
    let node = v.snapshot.nodes[0].name.clone();
    handle
        .what_if(
            maar_scheduler::Actor::system("operator"),
            maar_scheduler::Command::CordonNode { node },
        )
        .unwrap();
    assert_eq!(count("what_if"), 1);
    // A paused engine still answers its probes, and publishes its gauges.
    assert!(handle.alive_within(Duration::from_secs(2)).is_ok());
    assert!(observe.encode().contains("maar_gpus{"));
    handle.shutdown();
}
