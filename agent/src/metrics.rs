//! The Prometheus text of a sample (prometheus-client): GPU metrics under the DCGM
//! exporter's names and labels (`gpu`, `UUID`, `modelName`, `Hostname`), the node's
//! CPU, memory, load and filesystems, and `crater_gpu_memory_usage_rate` (GPU memory
//! used / total, in percent, as the users' HPA targets it: `averageValue: "70"`) per GPU
//! and per job where known, the metric inference autoscaling keys on.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::reading::NodeSample;

type Labels = Vec<(String, String)>;
type G = Family<Labels, Gauge<f64, AtomicU64>>;

/// GPU memory a job uses on a card, for the per-job usage rate.
#[derive(Clone, Debug, PartialEq)]
pub struct JobGpuUse {
    pub job: String,
    pub gpu: u32,
    pub used_bytes: u64,
}

struct Families {
    reg: Registry,
}

impl Families {
    fn gauge(&mut self, name: &str, help: &str) -> G {
        let f = G::default();
        // prometheus-client ends the help with a full stop itself.
        self.reg
            .register(name, help.trim_end_matches('.'), f.clone());
        f
    }
}

fn set(f: &G, labels: &Labels, v: f64) {
    f.get_or_create(labels).set(v);
}

/// The metrics of `s` as Prometheus text (OpenMetrics; Prometheus reads it).
pub fn render(s: &NodeSample, jobs: &[JobGpuUse]) -> String {
    let mut m = Families {
        reg: Registry::default(),
    };
    let mib = |b: u64| (b / (1 << 20)) as f64;
    let util = m.gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).");
    let mem_util = m.gauge("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).");
    let fb_used = m.gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).");
    let fb_free = m.gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).");
    let fb_total = m.gauge("DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB).");
    let temp = m.gauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).");
    let power = m.gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).");
    let limit = m.gauge(
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "Power management limit (in W).",
    );
    let sm = m.gauge("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).");
    let memclk = m.gauge("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).");
    let xid = m.gauge(
        "DCGM_FI_DEV_XID_ERRORS",
        "Value of the last XID error encountered.",
    );
    let xids = m.gauge(
        "maar_gpu_xid_errors_seen",
        "XID errors seen since the agent started.",
    );
    let ecc = m.gauge(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "Total number of double-bit (uncorrected) volatile ECC errors.",
    );
    let mig = m.gauge("maar_gpu_mig_enabled", "1 when MIG mode is on.");
    let mig_n = m.gauge("maar_gpu_mig_instances", "MIG instances on the card.");
    let procs = m.gauge("maar_gpu_processes", "Processes using the GPU.");
    let rate = m.gauge(
        "crater_gpu_memory_usage_rate",
        "GPU memory used / total in percent, per GPU (and per job where known).",
    );
    for g in &s.gpus {
        let l: Labels = vec![
            ("gpu".into(), g.index.to_string()),
            ("UUID".into(), g.uuid.clone()),
            ("modelName".into(), g.name.clone()),
            ("Hostname".into(), s.hostname.clone()),
        ];
        if let Some(v) = g.util_sm_pct {
            set(&util, &l, v as f64);
        }
        if let Some(v) = g.util_mem_pct {
            set(&mem_util, &l, v as f64);
        }
        set(&fb_used, &l, mib(g.memory_used_bytes));
        set(
            &fb_free,
            &l,
            mib(g.memory_total_bytes.saturating_sub(g.memory_used_bytes)),
        );
        set(&fb_total, &l, mib(g.memory_total_bytes));
        if let Some(v) = g.temperature_c {
            set(&temp, &l, v as f64);
        }
        if let Some(v) = g.power_w {
            set(&power, &l, v);
        }
        if let Some(v) = g.power_limit_w {
            set(&limit, &l, v);
        }
        if let Some(v) = g.clock_sm_mhz {
            set(&sm, &l, v as f64);
        }
        if let Some(v) = g.clock_mem_mhz {
            set(&memclk, &l, v as f64);
        }
        set(&xid, &l, g.last_xid.unwrap_or(0) as f64);
        set(&xids, &l, g.xid_errors as f64);
        if let Some(v) = g.ecc_uncorrected {
            set(&ecc, &l, v as f64);
        }
        if let Some(v) = g.mig_enabled {
            set(&mig, &l, if v { 1.0 } else { 0.0 });
        }
        set(&mig_n, &l, g.mig_instances as f64);
        set(&procs, &l, g.processes.len() as f64);
        set(&rate, &l, g.memory_usage_rate() * 100.0);
    }
    for j in jobs {
        let Some(g) = s.gpus.iter().find(|g| g.index == j.gpu) else {
            continue;
        };
        let l: Labels = vec![
            ("gpu".into(), g.index.to_string()),
            ("UUID".into(), g.uuid.clone()),
            ("modelName".into(), g.name.clone()),
            ("Hostname".into(), s.hostname.clone()),
            ("job".into(), j.job.clone()),
        ];
        let total = g.memory_total_bytes.max(1) as f64;
        set(&rate, &l, j.used_bytes as f64 * 100.0 / total);
    }
    let host: Labels = vec![("Hostname".into(), s.hostname.clone())];
    let h = &s.host;
    set(
        &m.gauge("maar_node_cpus", "Logical CPUs."),
        &host,
        h.cpus as f64,
    );
    set(
        &m.gauge("maar_node_cpu_usage_percent", "Busy share of all CPUs."),
        &host,
        h.cpu_usage_pct,
    );
    set(
        &m.gauge("maar_node_memory_total_bytes", "Memory installed."),
        &host,
        h.memory_total_bytes as f64,
    );
    set(
        &m.gauge("maar_node_memory_used_bytes", "Memory in use."),
        &host,
        h.memory_used_bytes as f64,
    );
    let load = m.gauge("maar_node_load", "Load average over 1, 5 and 15 minutes.");
    for (w, v) in ["1m", "5m", "15m"].iter().zip(h.load) {
        let mut l = host.clone();
        l.push(("window".into(), w.to_string()));
        set(&load, &l, v);
    }
    let fs_size = m.gauge("maar_node_filesystem_size_bytes", "Filesystem size.");
    let fs_used = m.gauge("maar_node_filesystem_used_bytes", "Filesystem space used.");
    for f in &h.filesystems {
        let mut l = host.clone();
        l.push(("mountpoint".into(), f.mount.clone()));
        l.push(("fstype".into(), f.kind.clone()));
        l.push(("device".into(), f.device.clone()));
        set(&fs_size, &l, f.total_bytes as f64);
        set(&fs_used, &l, f.used_bytes as f64);
    }
    set(
        &m.gauge("maar_node_gpus", "GPUs NVML reports (0 without a driver)."),
        &host,
        s.gpus.len() as f64,
    );
    let mut out = String::new();
    encode(&mut out, &m.reg).expect("writing to a String cannot fail");
    out
}
