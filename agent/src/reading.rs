//! A node's sample as plain data: what the sources produce, what `/sample` serves and
//! what tests record (fixtures) and feed back.

use serde::{Deserialize, Serialize};

/// One mounted filesystem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Filesystem {
    pub mount: String,
    /// ext4, xfs, overlay, ...
    pub kind: String,
    pub device: String,
    pub total_bytes: u64,
    pub used_bytes: u64,
    /// Space ordinary users may still write (without the root-reserved part).
    #[serde(default)]
    pub available_bytes: u64,
}

impl Filesystem {
    /// Used share, percent, as `df` reports it: used / (used + available).
    pub fn used_pct(&self) -> f64 {
        let room = self.used_bytes + self.available_bytes;
        if room == 0 {
            if self.total_bytes == 0 {
                0.0
            } else {
                self.used_bytes as f64 * 100.0 / self.total_bytes as f64
            }
        } else {
            self.used_bytes as f64 * 100.0 / room as f64
        }
    }
}

/// The host: CPU, memory, load, filesystems.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostReading {
    pub hostname: String,
    /// Logical CPUs.
    pub cpus: u32,
    /// Busy share of all CPUs since the last sample, percent.
    pub cpu_usage_pct: f64,
    pub memory_total_bytes: u64,
    pub memory_used_bytes: u64,
    pub load: [f64; 3],
    pub filesystems: Vec<Filesystem>,
}

/// A process on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// GPU memory it uses, when the driver says.
    pub used_bytes: Option<u64>,
}

/// One GPU, as NVML reports it. Fields NVML does not support on a card are `None`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    pub index: u32,
    /// As NVML names it, e.g. `NVIDIA H200`.
    pub name: String,
    pub uuid: String,
    pub memory_total_bytes: u64,
    pub memory_used_bytes: u64,
    /// SM (kernel) and memory utilisation, percent.
    pub util_sm_pct: Option<u32>,
    pub util_mem_pct: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    /// Uncorrected ECC errors since the driver loaded.
    pub ecc_uncorrected: Option<u64>,
    /// XID errors seen since the agent started, and the last one.
    pub xid_errors: u64,
    pub last_xid: Option<u64>,
    pub clock_sm_mhz: Option<u32>,
    pub clock_mem_mhz: Option<u32>,
    pub mig_enabled: Option<bool>,
    /// MIG instances (devices) on the card, when MIG is on.
    pub mig_instances: u32,
    pub processes: Vec<GpuProcess>,
}

impl GpuReading {
    /// GPU memory used / total, 0..1 (the card's `crater_gpu_memory_usage_rate` is this in
    /// percent).
    pub fn memory_usage_rate(&self) -> f64 {
        if self.memory_total_bytes == 0 {
            0.0
        } else {
            self.memory_used_bytes as f64 / self.memory_total_bytes as f64
        }
    }
}

/// What the GPU source found this time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuStatusSample {
    pub gpus: Vec<GpuReading>,
    /// `ok`, or why there are no GPU readings (no driver, NVML failed).
    pub status: String,
    /// The NVIDIA driver version, when loaded.
    pub driver: Option<String>,
}

/// Everything sampled at one moment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    /// Unix time of the sample, milliseconds.
    pub at_ms: u64,
    pub hostname: String,
    pub host: HostReading,
    pub gpus: Vec<GpuReading>,
    /// `ok`, or why there are no GPU readings.
    pub gpu_status: String,
    pub driver: Option<String>,
}
