//! The host source: CPU, memory, load and filesystems from sysinfo.

use crate::reading::{Filesystem, HostReading};

/// Where host readings come from (sysinfo here; recorded readings in tests).
pub trait HostSource: Send {
    fn sample(&mut self) -> HostReading;
}

/// A host source under another name: the node's name where the host name is not it
/// (in a DaemonSet's pod the host name is the pod's).
pub struct Named {
    inner: Box<dyn HostSource>,
    name: String,
}

impl Named {
    pub fn new(inner: Box<dyn HostSource>, name: &str) -> Named {
        Named {
            inner,
            name: name.to_string(),
        }
    }
}

impl HostSource for Named {
    fn sample(&mut self) -> HostReading {
        HostReading {
            hostname: self.name.clone(),
            ..self.inner.sample()
        }
    }
}

/// This machine, through sysinfo. CPU usage is the busy share since the previous
/// sample (the first sample reports the share since boot).
pub struct SysinfoHost {
    sys: Option<sysinfo::System>,
    disks: Option<sysinfo::Disks>,
    hostname: String,
}

/// Filesystems that hold no data of their own (kernel and memory filesystems).
const PSEUDO: &[&str] = &[
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "securityfs",
    "debugfs",
    "tracefs",
    "pstore",
    "bpf",
    "mqueue",
    "hugetlbfs",
    "configfs",
    "fusectl",
    "autofs",
    "binfmt_misc",
    "nsfs",
    "squashfs",
];

impl SysinfoHost {
    pub fn new() -> SysinfoHost {
        let sys = sysinfo::System::new().ok();
        let disks = sysinfo::Disks::new_with_refreshed_list().ok();
        let hostname = sysinfo::System::host_name()
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        let mut h = SysinfoHost {
            sys,
            disks,
            hostname,
        };
        if let Some(s) = &mut h.sys {
            s.refresh_cpu_usage();
        }
        h
    }
}

impl Default for SysinfoHost {
    fn default() -> Self {
        SysinfoHost::new()
    }
}

impl HostSource for SysinfoHost {
    fn sample(&mut self) -> HostReading {
        let (cpus, cpu, mem_total, mem_used) = match &mut self.sys {
            Some(s) => {
                s.refresh_cpu_usage();
                s.refresh_memory();
                (
                    s.cpus().len() as u32,
                    s.global_cpu_usage() as f64,
                    s.total_memory(),
                    s.used_memory(),
                )
            }
            None => (0, 0.0, 0, 0),
        };
        let load = sysinfo::System::load_average()
            .map(|l| [l.one, l.five, l.fifteen])
            .unwrap_or_default();
        let mut filesystems = Vec::new();
        if let Some(d) = &mut self.disks {
            d.refresh(true);
            for disk in d.iter() {
                let kind = disk.file_system().to_string_lossy().into_owned();
                if PSEUDO.contains(&kind.as_str()) || disk.total_space() == 0 {
                    continue;
                }
                // Used as `df` counts it (blocks not free), from statvfs; sysinfo
                // gives only the available space. (The block counts are u64 here but
                // narrower on some platforms, hence the casts.)
                #[allow(clippy::unnecessary_cast)]
                let (used, avail) = match nix::sys::statvfs::statvfs(disk.mount_point()) {
                    Ok(v) => {
                        let f = v.fragment_size() as u64;
                        (
                            (v.blocks() as u64).saturating_sub(v.blocks_free() as u64) * f,
                            v.blocks_available() as u64 * f,
                        )
                    }
                    Err(_) => (
                        disk.total_space().saturating_sub(disk.available_space()),
                        disk.available_space(),
                    ),
                };
                filesystems.push(Filesystem {
                    mount: disk.mount_point().display().to_string(),
                    kind,
                    device: disk.name().to_string_lossy().into_owned(),
                    total_bytes: disk.total_space(),
                    used_bytes: used,
                    available_bytes: avail,
                });
            }
        }
        filesystems.sort_by(|a, b| a.mount.cmp(&b.mount));
        filesystems.dedup_by(|a, b| a.mount == b.mount);
        HostReading {
            hostname: self.hostname.clone(),
            cpus,
            cpu_usage_pct: cpu,
            memory_total_bytes: mem_total,
            memory_used_bytes: mem_used,
            load,
            filesystems,
        }
    }
}

/// Host readings replayed in order (the last one repeats): tests.
pub struct RecordedHost {
    pub readings: Vec<HostReading>,
    next: usize,
}

impl RecordedHost {
    pub fn new(readings: Vec<HostReading>) -> RecordedHost {
        RecordedHost { readings, next: 0 }
    }
}

impl HostSource for RecordedHost {
    fn sample(&mut self) -> HostReading {
        let i = self.next.min(self.readings.len().saturating_sub(1));
        self.next += 1;
        self.readings[i].clone()
    }
}
