//! # maar-agent
//!
//! maar's node agent: samples this machine (CPU, memory, load, every mounted
//! filesystem, and every NVIDIA GPU through NVML, loaded at run time) and serves it as
//! Prometheus metrics with DCGM exporter names, as JSON for `maar local`, and as the
//! `crater.ai/*` labels the node should carry.
//!
//! - [`reading`]: the sample as plain data (what tests record and replay).
//! - [`host`]: the host source (sysinfo) behind [`HostSource`].
//! - [`gpu`]: the GPU source (NVML) behind [`GpuSource`]; no driver is a normal state,
//!   not an error.
//! - [`metrics`]: the Prometheus text (prometheus-client).
//! - [`labels`]: labels from the hardware, and where labels disagree with it.
//! - [`serve`]: `/metrics`, `/healthz`, `/sample` over HTTP (axum).

pub mod gpu;
pub mod host;
pub mod labels;
pub mod metrics;
pub mod reading;
pub mod serve;

pub use gpu::{GpuSource, NvmlGpus, RecordedGpus};
pub use host::{HostSource, SysinfoHost};
pub use reading::{GpuReading, HostReading, NodeSample};

/// An agent: a host source and a GPU source, sampled together.
pub struct Agent {
    pub host: Box<dyn HostSource>,
    pub gpus: Box<dyn GpuSource>,
}

impl Agent {
    /// This machine: sysinfo for the host, NVML for the GPUs (none without a driver).
    pub fn local() -> Agent {
        Agent {
            host: Box::new(SysinfoHost::new()),
            gpus: Box::new(NvmlGpus::open()),
        }
    }

    /// One sample of everything, at unix time `at_ms`.
    pub fn sample(&mut self, at_ms: u64) -> NodeSample {
        let host = self.host.sample();
        let g = self.gpus.sample();
        NodeSample {
            at_ms,
            hostname: host.hostname.clone(),
            host,
            gpus: g.gpus,
            gpu_status: g.status,
            driver: g.driver,
        }
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
