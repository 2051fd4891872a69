//! The agent: the no-driver path on this machine for real, the GPU path through
//! readings written from NVML's documented types (and, where a GPU machine was at hand,
//! captured from one), the Prometheus text parsed by a real parser, labels from the
//! hardware, and the HTTP endpoints.

use std::io::{Read, Write};

use maar_agent::host::RecordedHost;
use maar_agent::labels;
use maar_agent::metrics::{render, JobGpuUse};
use maar_agent::{Agent, GpuSource, HostSource, NodeSample, NvmlGpus, RecordedGpus, SysinfoHost};

fn fixture() -> Vec<NodeSample> {
    serde_json::from_str(include_str!("fixtures/nvml-8xh100.json")).unwrap()
}

#[test]
fn without_a_driver_the_agent_reports_no_gpus_and_says_why() {
    let mut g = NvmlGpus::open();
    let s = g.sample();
    if s.status == "ok" {
        // A machine with the driver: readings, each with a name and memory.
        assert!(s
            .gpus
            .iter()
            .all(|g| !g.name.is_empty() && g.memory_total_bytes > 0));
    } else {
        assert!(s.gpus.is_empty());
        assert!(
            s.status.contains("NVIDIA driver") || s.status.contains("NVML"),
            "{}",
            s.status
        );
        assert_eq!(g.why_none(), s.status);
    }
}

#[test]
fn the_host_is_read_truthfully() {
    let mut h = SysinfoHost::new();
    let r = h.sample();
    let cpus = std::thread::available_parallelism().unwrap().get() as u32;
    assert!(r.cpus >= cpus, "{} CPUs read, {cpus} available", r.cpus);
    assert!(r.memory_total_bytes > 0 && r.memory_used_bytes <= r.memory_total_bytes);
    // /proc/meminfo agrees on the total (within a page).
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    assert!((r.memory_total_bytes as i64 - (kb * 1024) as i64).abs() < 1 << 20);
    assert!(!r.filesystems.is_empty(), "some filesystem is mounted");
    assert!(r.filesystems.iter().all(|f| f.used_bytes <= f.total_bytes));
    assert!(r
        .filesystems
        .iter()
        .all(|f| f.kind != "proc" && f.kind != "sysfs"));
}

#[test]
fn recorded_readings_give_the_dcgm_metrics_and_they_parse() {
    let samples = fixture();
    let mut agent = Agent {
        host: Box::new(RecordedHost::new(
            samples.iter().map(|s| s.host.clone()).collect(),
        )),
        gpus: Box::new(RecordedGpus::from_json(include_str!("fixtures/nvml-8xh100.json")).unwrap()),
    };
    let s = agent.sample(1);
    assert_eq!(s.gpus.len(), 8);
    let text = render(
        &s,
        &[JobGpuUse {
            job: "ml-prod/train".into(),
            gpu: 4,
            used_bytes: 40 << 30,
        }],
    );
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("a real Prometheus parser reads it");
    let value = |name: &str, gpu: &str| -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|x| {
                x.metric == name
                    && x.labels.get("gpu") == Some(gpu)
                    && x.labels.get("job").is_none()
            })
            .unwrap_or_else(|| panic!("{name} gpu {gpu} in:\n{text}"));
        match sample.value {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{other:?}"),
        }
    };
    assert_eq!(value("DCGM_FI_DEV_GPU_UTIL", "0"), 97.0);
    assert_eq!(value("DCGM_FI_DEV_FB_USED", "0"), 61.5 * 1024.0);
    assert_eq!(value("DCGM_FI_DEV_FB_FREE", "2"), 80.0 * 1024.0 - 512.0);
    assert_eq!(value("DCGM_FI_DEV_GPU_TEMP", "4"), 78.0);
    assert_eq!(value("DCGM_FI_DEV_POWER_USAGE", "1"), 598.0);
    assert_eq!(value("DCGM_FI_DEV_XID_ERRORS", "3"), 79.0);
    // In percent, as the users' HPA targets it (`averageValue: "70"`).
    assert!((value("crater_gpu_memory_usage_rate", "4") - 79.1 * 100.0 / 80.0).abs() < 1e-9);
    let l = &scrape
        .samples
        .iter()
        .find(|x| x.metric == "DCGM_FI_DEV_GPU_UTIL")
        .unwrap()
        .labels;
    assert_eq!(l.get("modelName"), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(l.get("Hostname"), Some("h100-node-07"));
    assert!(l.get("UUID").unwrap().starts_with("GPU-"));
    // Per job, where known.
    let job = scrape
        .samples
        .iter()
        .find(|x| {
            x.metric == "crater_gpu_memory_usage_rate"
                && x.labels.get("job") == Some("ml-prod/train")
        })
        .expect("a per-job rate");
    assert!(matches!(job.value, prometheus_parse::Value::Gauge(v) if (v - 50.0).abs() < 1e-9));
    // The node: CPU, memory, filesystems.
    assert!(scrape
        .samples
        .iter()
        .any(|x| x.metric == "maar_node_filesystem_used_bytes"
            && x.labels.get("mountpoint") == Some("/data")));
    // The second reading carries the newer XID.
    let s2 = agent.sample(2);
    assert_eq!(s2.gpus[3].last_xid, Some(94));
    assert_eq!(s2.gpus[3].xid_errors, 2);
}

#[test]
fn labels_come_from_the_hardware_and_a_wrong_label_is_named() {
    let s = &fixture()[0];
    let l = labels::from_hardware(&s.gpus);
    assert_eq!(l[labels::MODEL], "h100");
    assert_eq!(l[labels::MEMORY], "80Gi");
    assert_eq!(l[labels::COUNT], "8");
    assert_eq!(l[labels::VENDOR], "nvidia");
    let line = labels::kubectl_line("h100-node-07", &l);
    assert!(line.starts_with("kubectl label node h100-node-07 --overwrite"));
    assert!(line.contains("crater.ai/gpu-model=h100"));
    // The war story: labelled a100, NVML says otherwise.
    let mut wrong = l.clone();
    wrong.insert(labels::MODEL.into(), "a100".into());
    let m = labels::mismatches(&wrong, s);
    assert_eq!(
        m,
        vec!["crater.ai/gpu-model is a100 but the hardware says h100".to_string()]
    );
    assert!(labels::mismatches(&l, s).is_empty());
}

fn get(port: u16, path: &str) -> (String, String) {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

#[test]
fn the_endpoints_serve_metrics_health_and_the_sample() {
    let agent = Agent {
        host: Box::new(SysinfoHost::new()),
        gpus: Box::new(RecordedGpus::from_json(include_str!("fixtures/nvml-8xh100.json")).unwrap()),
    };
    let shared = maar_agent::serve::start_sampler(agent, std::time::Duration::from_millis(200));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = maar_agent::serve::router(shared);
    std::thread::spawn(move || {
        rt.block_on(maar_agent::serve::serve(
            listener,
            app,
            maar_agent::serve::Limits::default(),
        ));
    });
    let (head, body) = get(port, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    assert!(scrape
        .samples
        .iter()
        .any(|s| s.metric == "DCGM_FI_DEV_GPU_UTIL"));
    let (head, body) = get(port, "/healthz");
    assert!(
        head.starts_with("HTTP/1.1 200") && body.starts_with("ok"),
        "{head}{body}"
    );
    let (_, body) = get(port, "/sample");
    let s: NodeSample = serde_json::from_str(&body).unwrap();
    assert_eq!(s.gpus.len(), 8);
    assert!(s.host.cpus > 0);
}

/// `agent` served on a loopback port within `limits`, on a thread of its own.
fn serving(agent: Agent, limits: maar_agent::serve::Limits) -> std::net::SocketAddr {
    let shared = maar_agent::serve::start_sampler(agent, std::time::Duration::from_millis(200));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        rt.block_on(maar_agent::serve::serve(
            listener,
            maar_agent::serve::router(shared),
            limits,
        ));
    });
    addr
}

#[test]
fn slow_header_clients_are_dropped_and_connections_are_capped() {
    use std::time::{Duration, Instant};
    let agent = Agent {
        host: Box::new(SysinfoHost::new()),
        gpus: Box::new(RecordedGpus::from_json(include_str!("fixtures/nvml-8xh100.json")).unwrap()),
    };
    let port = serving(
        agent,
        maar_agent::serve::Limits {
            header_read: Duration::from_millis(600),
            connection: Duration::from_secs(10),
            connections: 2,
            per_peer: 8,
        },
    )
    .port();
    // Two clients that send half a header and stop take both places...
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x").unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // ... so a third waits, and is served once the header timeout drops them.
    let t = Instant::now();
    let (head, _) = get(port, "/healthz");
    let waited = t.elapsed();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
        "served after {waited:?}"
    );
    // The slow clients were closed by the server.
    for mut c in slow {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf);
        assert!(buf.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
    }
}

#[test]
fn one_address_holding_its_share_open_leaves_the_rest_to_others() {
    use std::time::{Duration, Instant};
    let samples = fixture();
    let host = RecordedHost::new(samples.iter().map(|s| s.host.clone()).collect());
    let agent = Agent {
        host: Box::new(host),
        gpus: Box::new(RecordedGpus::from_json(include_str!("fixtures/nvml-8xh100.json")).unwrap()),
    };
    let addr = serving(
        agent,
        maar_agent::serve::Limits {
            header_read: Duration::from_secs(5),
            connection: Duration::from_secs(10),
            connections: 4,
            per_peer: 2,
        },
    );
    // From 127.0.0.1: four slow clients, as many as the server's places; two hold its
    // share, the others are closed (without the cap they would hold all four, and
    // the probe below would wait out their 5 s).
    let slow: Vec<_> = (0..4)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x").unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut third = std::net::TcpStream::connect(addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let t = Instant::now();
    let mut buf = Vec::new();
    let _ = third.read_to_end(&mut buf);
    assert!(
        buf.is_empty() && t.elapsed() < Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    // Another address (a kubelet's probe) is served at once.
    let probe = {
        let c = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let s = tokio::net::TcpSocket::new_v4().unwrap();
                s.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                s.connect(addr).await.unwrap().into_std().unwrap()
            });
        let mut c = c;
        c.set_nonblocking(false).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).expect("answered within 2 s");
        String::from_utf8_lossy(&out).into_owned()
    };
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe}");
    drop(slow);
}

#[test]
fn a_named_agent_labels_its_metrics_with_the_node_it_runs_on() {
    // In a DaemonSet's pod the host name is the pod's; the node's name is given.
    let samples = fixture();
    let host = RecordedHost::new(samples.iter().map(|s| s.host.clone()).collect());
    let mut agent = Agent {
        host: Box::new(maar_agent::host::Named::new(Box::new(host), "gpu-node-7")),
        gpus: Box::new(RecordedGpus::from_json(include_str!("fixtures/nvml-8xh100.json")).unwrap()),
    };
    let s = agent.sample(1);
    assert_eq!(s.hostname, "gpu-node-7");
    assert_eq!(s.host.hostname, "gpu-node-7");
    let text = render(&s, &[]);
    assert!(text.contains("Hostname=\"gpu-node-7\""));
    assert!(!text.contains(&format!("Hostname=\"{}\"", samples[0].host.hostname)));
}

/// Readings recorded on a real H200 on a lent GPU machine (`maar agent --once -o json`,
/// idle and then with a PyTorch process holding 30 GiB), and the `/metrics` the real
/// agent served there a moment later (`h200-metrics.txt`).
const H200: &str = include_str!("fixtures/nvml-1xh200.json");
const H200_METRICS: &str = include_str!("fixtures/h200-metrics.txt");

#[test]
fn a_real_h200_gives_its_labels_and_a_label_as_the_card_is_sold_is_no_mismatch() {
    let samples: Vec<NodeSample> = serde_json::from_str(H200).unwrap();
    let s = &samples[1];
    assert_eq!(s.gpus.len(), 1);
    assert_eq!(s.gpus[0].name, "NVIDIA H200");
    let l = labels::from_hardware(&s.gpus);
    assert_eq!(l[labels::MODEL], "h200");
    // NVML's 143,771 MiB are 140.4 GiB.
    assert_eq!(l[labels::MEMORY], "140Gi");
    assert_eq!(l[labels::COUNT], "1");
    assert!(labels::mismatches(&l, s).is_empty());
    // Sold as 141 GB, labelled so: no alarm. Labelled as an 80 GB card: named.
    let mut sold = l.clone();
    sold.insert(labels::MEMORY.into(), "141Gi".into());
    assert!(
        labels::mismatches(&sold, s).is_empty(),
        "{:?}",
        labels::mismatches(&sold, s)
    );
    let mut wrong = l.clone();
    wrong.insert(labels::MEMORY.into(), "80Gi".into());
    wrong.insert(labels::MODEL.into(), "h100".into());
    assert_eq!(
        labels::mismatches(&wrong, s),
        vec![
            "crater.ai/gpu-model is h100 but the hardware says h200".to_string(),
            "crater.ai/gpu-memory is 80Gi but the hardware says 140Gi".to_string(),
        ]
    );
}

#[test]
fn a_real_h200s_readings_render_the_series_the_real_agent_served() {
    let samples: Vec<NodeSample> = serde_json::from_str(H200).unwrap();
    let parse = |text: &str| {
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("a real Prometheus parser reads it")
    };
    let series = |scrape: &prometheus_parse::Scrape| {
        let mut v: Vec<String> = scrape
            .samples
            .iter()
            .map(|x| {
                let mut l: Vec<String> = x.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                l.sort();
                format!("{}{{{}}}", x.metric, l.join(","))
            })
            .collect();
        v.sort();
        v
    };
    let served = parse(H200_METRICS);
    let ours = parse(&render(&samples[1], &[]));
    // The same series, named and labelled as the agent on the H200 served them.
    assert_eq!(series(&ours), series(&served));
    let value = |scrape: &prometheus_parse::Scrape, name: &str| -> f64 {
        match scrape
            .samples
            .iter()
            .find(|x| x.metric == name)
            .unwrap()
            .value
        {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{other:?}"),
        }
    };
    // What does not move between the two moments agrees exactly; what does, nearly.
    for name in [
        "DCGM_FI_DEV_FB_TOTAL",
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "DCGM_FI_DEV_MEM_CLOCK",
    ] {
        assert_eq!(value(&ours, name), value(&served, name), "{name}");
    }
    assert_eq!(value(&ours, "DCGM_FI_DEV_FB_TOTAL"), 143_771.0);
    let used = (
        value(&ours, "DCGM_FI_DEV_FB_USED"),
        value(&served, "DCGM_FI_DEV_FB_USED"),
    );
    assert!((used.0 - used.1).abs() < 16.0, "{used:?}");
    assert!(value(&ours, "DCGM_FI_DEV_GPU_UTIL") >= 99.0);
}
