//! `maar agent`: this machine's readings, once or served over HTTP.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use maar_agent::{labels, now_ms, Agent, NodeSample};
use maar_scheduler::quantity::{fmt_bytes, parse_duration_s};

use crate::args::TextOrJson;
use crate::failure::Failure;
use crate::out::Out;

#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// How often to sample, e.g. 1s, 5s (at least 1s).
    #[arg(long, default_value = "1s", value_parser = interval)]
    pub interval: u64,
    /// Where to serve /metrics, /healthz and /sample. The default keeps it on this
    /// machine; give 0.0.0.0:9400 to let Prometheus on another host scrape it.
    #[arg(long, default_value = "127.0.0.1:9400", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Print one sample and exit (no server).
    #[arg(long)]
    pub once: bool,
    /// Print the `kubectl label node` line of the crater.ai labels this node's GPUs
    /// call for, and exit.
    #[arg(long)]
    pub labels: bool,
    /// The node's name, as its samples, its metrics' `Hostname` label and the labels
    /// line give it (this machine's host name by default; in a DaemonSet, where the
    /// host name is the pod's, the node's name: deploy/agent.yaml passes it).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// With --once: `json` prints the sample as `/sample` serves it.
    #[arg(short = 'o', long, value_enum, default_value_t = TextOrJson::Text)]
    pub output: TextOrJson,
}

fn interval(s: &str) -> Result<u64, String> {
    let v = parse_duration_s(s).map_err(|e| e.to_string())?;
    if (1..=3600).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v}s must be within 1s..=1h"))
    }
}

/// A sample in words, for a terminal.
pub fn sample_text(s: &NodeSample) -> String {
    let h = &s.host;
    let mut t = format!(
        "node {}: {} CPUs {:.0}% busy, load {:.2} {:.2} {:.2}, memory {}/{}\n",
        s.hostname,
        h.cpus,
        h.cpu_usage_pct,
        h.load[0],
        h.load[1],
        h.load[2],
        fmt_bytes(h.memory_used_bytes),
        fmt_bytes(h.memory_total_bytes)
    );
    for f in &h.filesystems {
        t.push_str(&format!(
            "  {} ({}, {}): {}/{} used, {:.0}%\n",
            f.mount,
            f.kind,
            f.device,
            fmt_bytes(f.used_bytes),
            fmt_bytes(f.total_bytes),
            f.used_pct()
        ));
    }
    if s.gpus.is_empty() {
        t.push_str(&format!("GPUs: none ({})\n", s.gpu_status));
    }
    for g in &s.gpus {
        t.push_str(&format!(
            "  GPU {} {} {}: {}/{} memory, {}% SM, {}C, {}W/{}W{}{}\n",
            g.index,
            g.name,
            g.uuid,
            fmt_bytes(g.memory_used_bytes),
            fmt_bytes(g.memory_total_bytes),
            g.util_sm_pct.map(|v| v.to_string()).unwrap_or("-".into()),
            g.temperature_c.map(|v| v.to_string()).unwrap_or("-".into()),
            g.power_w.map(|v| format!("{v:.0}")).unwrap_or("-".into()),
            g.power_limit_w
                .map(|v| format!("{v:.0}"))
                .unwrap_or("-".into()),
            if g.mig_enabled == Some(true) {
                format!(", MIG {} instances", g.mig_instances)
            } else {
                String::new()
            },
            if g.processes.is_empty() {
                String::new()
            } else {
                format!(", {} process(es)", g.processes.len())
            }
        ));
    }
    t
}

pub fn run(a: AgentArgs, o: &mut Out) -> Result<i32, Failure> {
    let mut agent = Agent::local();
    if let Some(node) = a.node.as_deref().filter(|n| !n.is_empty()) {
        agent.host = Box::new(maar_agent::host::Named::new(agent.host, node));
    }
    if a.labels {
        let s = agent.sample(now_ms());
        let l = labels::from_hardware(&s.gpus);
        if l.is_empty() {
            o.put(&format!(
                "# {}: no GPUs ({}); a node without GPUs needs no crater.ai GPU labels\n",
                s.hostname, s.gpu_status
            ));
            return Ok(0);
        }
        o.put(&labels::kubectl_line(&s.hostname, &l));
        o.put("\n# crater.ai/node-role is yours to set (e.g. crater.ai/node-role=gpu)\n");
        return Ok(0);
    }
    if a.once {
        // CPU usage needs two readings apart: the first sample primes it.
        std::thread::sleep(Duration::from_millis(250));
        let s = agent.sample(now_ms());
        match a.output {
            TextOrJson::Json => {
                o.put(&serde_json::to_string_pretty(&s).expect("a sample serialises"));
                o.put("\n");
            }
            TextOrJson::Text => o.put(&sample_text(&s)),
        }
        return Ok(0);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| Failure::No(format!("cannot start the agent's runtime: {e}")))?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(a.listen))
        .map_err(|e| Failure::No(format!("cannot listen on {}: {e}", a.listen)))?;
    let shared = maar_agent::serve::start_sampler(agent, Duration::from_secs(a.interval));
    let addr = listener.local_addr().unwrap_or(a.listen);
    o.put(&format!(
        "maar agent: sampling every {}s; http://{addr}/metrics, /healthz, /sample (pid {}); interrupt to stop\n",
        a.interval,
        std::process::id()
    ));
    o.flush();
    let app = maar_agent::serve::router(shared);
    rt.spawn(async move {
        maar_agent::serve::serve(listener, app, maar_agent::serve::Limits::default()).await;
    });
    let sig = crate::console::run::wait_for_signal();
    rt.shutdown_timeout(Duration::from_millis(200));
    Ok(128 + sig)
}
