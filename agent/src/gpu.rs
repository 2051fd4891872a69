//! The GPU source: NVML (nvml-wrapper, `libnvidia-ml.so` loaded at run time). A
//! machine without the driver is a normal case: the source reports no GPUs and why.

use crate::reading::{GpuProcess, GpuReading, GpuStatusSample};

/// Where GPU readings come from (NVML here; recorded readings in tests).
pub trait GpuSource: Send {
    fn sample(&mut self) -> GpuStatusSample;
}

/// The GPUs of this machine through NVML.
pub struct NvmlGpus {
    /// The library, loaded once for the life of the process (the XID event set
    /// borrows it).
    nvml: Option<&'static nvml_wrapper::Nvml>,
    /// One XID event set per GPU (index order; `None` where events are unsupported).
    events: Vec<Option<nvml_wrapper::EventSet<'static>>>,
    /// Why there is no NVML, when there is none.
    why: String,
    driver: Option<String>,
    /// XID errors seen per GPU index, and the last.
    xids: Vec<(u64, Option<u64>)>,
}

/// The reason NVML could not be used, in words an operator can act on.
fn no_driver(e: &nvml_wrapper::error::NvmlError) -> String {
    use nvml_wrapper::error::NvmlError as E;
    match e {
        E::LibloadingError(_) | E::LibraryNotFound => {
            "no NVIDIA driver: libnvidia-ml.so could not be loaded (install the driver to see GPUs)"
                .into()
        }
        E::DriverNotLoaded => "the NVIDIA driver is installed but not loaded".into(),
        E::NoPermission => "no permission to read the GPUs through NVML".into(),
        other => format!("NVML failed to start: {other}"),
    }
}

impl NvmlGpus {
    /// Loads NVML; without it, a source that reports no GPUs and why (said once, at
    /// info level).
    pub fn open() -> NvmlGpus {
        match nvml_wrapper::Nvml::init() {
            Ok(n) => {
                let nvml: &'static nvml_wrapper::Nvml = Box::leak(Box::new(n));
                let driver = nvml.sys_driver_version().ok();
                let count = nvml.device_count().unwrap_or(0);
                let events = (0..count)
                    .map(|i| {
                        let d = nvml.device_by_index(i).ok()?;
                        let set = nvml.create_event_set().ok()?;
                        match d.register_events(
                            nvml_wrapper::bitmasks::event::EventTypes::CRITICAL_XID_ERROR,
                            set,
                        ) {
                            Ok(s) => Some(s),
                            Err(e) => {
                                tracing::info!(target: "maar::agent", "GPU {i}: XID events unavailable: {}", e.error);
                                None
                            }
                        }
                    })
                    .collect();
                tracing::info!(target: "maar::agent", "NVML: {count} GPU(s), driver {}", driver.clone().unwrap_or_default());
                NvmlGpus {
                    nvml: Some(nvml),
                    events,
                    why: String::new(),
                    driver,
                    xids: vec![(0, None); count as usize],
                }
            }
            Err(e) => {
                let why = no_driver(&e);
                tracing::info!(target: "maar::agent", "no GPUs: {why}");
                NvmlGpus {
                    nvml: None,
                    events: Vec::new(),
                    why,
                    driver: None,
                    xids: Vec::new(),
                }
            }
        }
    }

    /// Why there are no GPU readings (empty when NVML works).
    pub fn why_none(&self) -> &str {
        &self.why
    }

    fn drain_xids(&mut self) {
        for (i, set) in self.events.iter().enumerate() {
            let Some(set) = set else { continue };
            // Every event waiting now, without blocking.
            while let Ok(ev) = set.wait(0) {
                if let Some(x) = self.xids.get_mut(i) {
                    x.0 += 1;
                    if let Some(nvml_wrapper::enums::event::XidError::Value(v)) = ev.event_data {
                        x.1 = Some(v);
                    }
                }
            }
        }
    }
}

impl GpuSource for NvmlGpus {
    fn sample(&mut self) -> GpuStatusSample {
        let Some(nvml) = self.nvml else {
            return GpuStatusSample {
                gpus: Vec::new(),
                status: self.why.clone(),
                driver: None,
            };
        };
        self.drain_xids();
        let count = nvml.device_count().unwrap_or(0);
        let mut gpus = Vec::new();
        for i in 0..count {
            let Ok(d) = nvml.device_by_index(i) else {
                continue;
            };
            use nvml_wrapper::enum_wrappers::device::{
                Clock, EccCounter, MemoryError, TemperatureSensor,
            };
            let mem = d.memory_info().ok();
            let util = d.utilization_rates().ok();
            let mig = d.mig_mode().ok().map(|m| m.current == 1);
            let (xids, last) = self.xids.get(i as usize).copied().unwrap_or((0, None));
            gpus.push(GpuReading {
                index: i,
                name: d.name().unwrap_or_else(|_| "unknown".into()),
                uuid: d.uuid().unwrap_or_default(),
                memory_total_bytes: mem.as_ref().map(|m| m.total).unwrap_or(0),
                memory_used_bytes: mem.as_ref().map(|m| m.used).unwrap_or(0),
                util_sm_pct: util.as_ref().map(|u| u.gpu),
                util_mem_pct: util.as_ref().map(|u| u.memory),
                temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
                power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
                power_limit_w: d.enforced_power_limit().ok().map(|mw| mw as f64 / 1000.0),
                ecc_uncorrected: d
                    .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                    .ok(),
                xid_errors: xids,
                last_xid: last,
                clock_sm_mhz: d.clock_info(Clock::SM).ok(),
                clock_mem_mhz: d.clock_info(Clock::Memory).ok(),
                mig_enabled: mig,
                mig_instances: if mig == Some(true) {
                    d.mig_device_count().unwrap_or(0)
                } else {
                    0
                },
                processes: d
                    .running_compute_processes()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| GpuProcess {
                        pid: p.pid,
                        used_bytes: match p.used_gpu_memory {
                            nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                            nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                        },
                    })
                    .collect(),
            });
        }
        GpuStatusSample {
            gpus,
            status: "ok".into(),
            driver: self.driver.clone(),
        }
    }
}

/// GPU readings replayed in order (the last one repeats): tests feed readings
/// recorded from a real GPU, or written from NVML's documented types.
pub struct RecordedGpus {
    samples: Vec<GpuStatusSample>,
    next: usize,
}

impl RecordedGpus {
    pub fn new(samples: Vec<GpuStatusSample>) -> RecordedGpus {
        RecordedGpus { samples, next: 0 }
    }

    /// Readings from a JSON fixture: a list of samples (`{gpus, status, driver}`), or
    /// node samples as `maar agent --once --output json` prints them.
    pub fn from_json(text: &str) -> Result<RecordedGpus, serde_json::Error> {
        if let Ok(v) = serde_json::from_str::<Vec<GpuStatusSample>>(text) {
            return Ok(RecordedGpus::new(v));
        }
        let nodes: Vec<crate::NodeSample> = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => vec![serde_json::from_str(text)?],
        };
        Ok(RecordedGpus::new(
            nodes
                .into_iter()
                .map(|n| GpuStatusSample {
                    gpus: n.gpus,
                    status: n.gpu_status,
                    driver: n.driver,
                })
                .collect(),
        ))
    }
}

impl GpuSource for RecordedGpus {
    fn sample(&mut self) -> GpuStatusSample {
        let i = self.next.min(self.samples.len().saturating_sub(1));
        self.next += 1;
        self.samples.get(i).cloned().unwrap_or(GpuStatusSample {
            gpus: Vec::new(),
            status: "no recorded readings".into(),
            driver: None,
        })
    }
}
