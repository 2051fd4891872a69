//! The durable record: how long a command takes to be acknowledged (applied by the
//! engine and written to SQLite with a full sync before the answer), and how long a
//! restart takes with a 24-hour demo record of thousands of commands, and what a
//! checkpoint of a Kubernetes-sized cluster costs (1,000 nodes of 8 cards, 5,000
//! running pods as a TrainJob's or a bare pod's are read, with the two tolerations
//! every pod gets from the API server).
//!
//! `cargo bench --bench record`; figures in BENCHMARKS.md. Plain timing (percentiles
//! are the point), not criterion.

use std::time::{Duration, Instant};

use maar::backend;
use maar::engine::{self, EngineOptions};
use maar::record::Record;
use maar_scheduler::{Actor, Command};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("maar-bench-record-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An engine on a fresh recorded demo (the state file in its own folder, the lease
/// taken), and the state file's path.
fn demo_engine(name: &str, speed: f64, paused: bool) -> (engine::EngineHandle, std::path::PathBuf) {
    let path = dir(name).join("lab.db");
    let (text, sc) = maar::load::scenario_text(None).unwrap();
    let (loaded, rec) = backend::fresh_demo(Some(&path), &text, sc, None).unwrap();
    let mut rec = rec.unwrap();
    rec.acquire().unwrap();
    let handle = engine::start(
        loaded,
        Some(rec),
        EngineOptions {
            speed,
            paused,
            ..Default::default()
        },
    );
    (handle, path)
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Commands acknowledged by a running engine (the console's path), and by the command
/// line against a running engine (the inbox path).
fn ack_latency() {
    let (handle, _) = demo_engine("ack", 60.0, false);
    let actor = Actor::system("bench");
    let nodes = ["a100-01", "a100-02", "h100-01", "v100-03", "t4-02"];
    let n = 2000;
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let node = nodes[i % nodes.len()].to_string();
        let cmd = if (i / nodes.len()).is_multiple_of(2) {
            Command::CordonNode { node }
        } else {
            Command::UncordonNode { node }
        };
        let t = Instant::now();
        let ack = handle.apply(actor.clone(), cmd).expect("acknowledged");
        lat.push(t.elapsed());
        assert!(ack.seq.is_some());
    }
    let mean = lat.iter().sum::<Duration>() / n as u32;
    println!(
        "command acknowledged durably (engine running at 60x, {n} commands): median {:.2} ms, p99 {:.2} ms, max {:.2} ms, mean {:.2} ms",
        ms(percentile(&mut lat, 0.5)),
        ms(percentile(&mut lat, 0.99)),
        ms(percentile(&mut lat, 1.0)),
        ms(mean)
    );
    handle.shutdown();
}

/// A 24-hour demo with thousands of commands, then a restart.
fn restart() {
    let (handle, path) = demo_engine("restart", 86_400.0, true);
    // 3,000 commands spread over a simulated day: the engine runs between them.
    let actor = Actor::system("bench");
    let started = Instant::now();
    let commands: usize = 3000;
    handle.set_speed(86_400.0);
    for i in 0..commands {
        let node = format!("a100-0{}", 1 + i % 8);
        let cmd = if (i / 8).is_multiple_of(2) {
            Command::CordonNode { node }
        } else {
            Command::UncordonNode { node }
        };
        handle.apply(actor.clone(), cmd).unwrap();
        if i.is_multiple_of(100) {
            // Let a simulated hour pass now and then.
            handle.set_paused(false).unwrap();
            while handle.view().snapshot.time_s < (i as u64 / 100 + 1) * 2880 {
                std::thread::sleep(Duration::from_millis(2));
            }
            handle.set_paused(true).unwrap();
        }
    }
    let at = handle.sync().unwrap().snapshot.time_s;
    handle.shutdown();
    let recording = started.elapsed();
    let rec = Record::open(&path).unwrap();
    let t = Instant::now();
    let restored = backend::restore(&rec, false).unwrap();
    let from_checkpoint = t.elapsed();
    assert_eq!(restored.core.now(), at);
    let t = Instant::now();
    let rebuilt = backend::restore(&rec, true).unwrap();
    let from_scratch = t.elapsed();
    assert_eq!(rebuilt.replayed, commands);
    // Time travel: jumps to moments all over the recorded day (the console's `:at`),
    // each restored from the nearest hourly checkpoint and the commands after it.
    let mut jumps = Vec::new();
    let mut t_s = 97;
    while t_s < at {
        let t = Instant::now();
        let past = backend::restore_at(&rec, t_s).unwrap();
        let _ = past.core.cluster().snapshot();
        jumps.push(t.elapsed());
        assert_eq!(past.core.now(), t_s);
        t_s += 3_131;
    }
    let n_jumps = jumps.len();
    println!(
        "time travel in that record ({n_jumps} jumps, restored and snapshotted): median {:.1} ms, max {:.1} ms",
        ms(percentile(&mut jumps, 0.5)),
        ms(percentile(&mut jumps, 1.0))
    );
    let size: u64 = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    println!(
        "restart with a {:.1}-hour demo record of {commands} commands ({} KiB, recorded in {:.1} s): restored from its checkpoint in {:.1} ms; rebuilt from every command in {:.0} ms",
        at as f64 / 3600.0,
        size / 1024,
        recording.as_secs_f64(),
        ms(from_checkpoint),
        ms(from_scratch)
    );
}

/// A checkpoint of 1,000 nodes of 8 A100s and 5,000 running one-card pods, written as
/// the engine writes it (packed as it is made): its JSON size, packed size, and the
/// median time of 15.
fn checkpoint_cost() {
    use maar_scheduler::rules::{TaintEffect, Toleration};
    use maar_scheduler::*;
    let mut c = Cluster::new(SchedConfig::default());
    c.add_pool(Pool {
        name: "gpu".into(),
        kind: PoolKind::Training,
        selector: [(LABEL_ROLE.to_string(), "gpu".to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    c.add_project(Project {
        name: "bench".into(),
        department: "bench".into(),
        quotas: [(0, Quota::default())].into(),
    });
    for n in 0..1000 {
        let name = format!("gpu-node-{n}");
        let labels = [
            (LABEL_ROLE, "gpu".to_string()),
            (LABEL_MODEL, "A100".to_string()),
            (LABEL_COUNT, "8".to_string()),
            ("crater.ai/gpu-memory", "80Gi".to_string()),
            ("kubernetes.io/arch", "amd64".to_string()),
            ("kubernetes.io/hostname", name.clone()),
            ("kubernetes.io/os", "linux".to_string()),
            ("topology.kubernetes.io/zone", format!("z{}", n % 10)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let gpus = (0..8)
            .map(|g| Gpu::new(g, format!("{name}/{g}"), "A100", 80 << 30, false))
            .collect();
        c.add_node(Node::new(name, labels, 64_000, 512 << 30, 1 << 40, gpus));
    }
    let toleration = |key: &str| Toleration {
        key: Some(key.to_string()),
        operator: Some("Exists".into()),
        value: None,
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: Some(300),
    };
    for i in 0..5000 {
        let mut spec = JobSpec::train(&format!("a-{i:05}"), "bench", "gpu", 1);
        spec.cpu_milli = 100;
        spec.memory = 128 << 20;
        spec.image = "registry.k8s.io/pause:3.9".into();
        spec.rules.tolerations = vec![
            toleration("node.kubernetes.io/not-ready"),
            toleration("node.kubernetes.io/unreachable"),
        ];
        spec.rules.labels = [("bench".to_string(), "A".to_string())].into();
        c.submit(spec).unwrap();
    }
    c.schedule();
    let running = c.jobs.iter().filter(|j| j.phase == Phase::Running).count();
    assert_eq!(running, 5000, "every pod placed");
    let mut json = Vec::new();
    c.write_checkpoint(false, &mut json).unwrap();
    let mut times = Vec::new();
    let mut packed = 0;
    for _ in 0..15 {
        let t = Instant::now();
        let p = maar::record::pack_written(|w| c.write_checkpoint(false, w)).unwrap();
        times.push(t.elapsed());
        packed = p.len();
    }
    println!(
        "checkpoint of 1,000 nodes and 5,000 running pods: {:.1} MB of JSON, {:.2} MB packed, written and packed in {:.1} ms (median of 15)",
        json.len() as f64 / 1e6,
        packed as f64 / 1e6,
        ms(percentile(&mut times, 0.5))
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter (if any) is ignored.
    checkpoint_cost();
    ack_latency();
    restart();
}
