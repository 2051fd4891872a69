//! Local mode: the cluster is this machine (and any other agents named), read by the
//! node agent and fed to the engine like any driver; jobs placed on this machine run
//! as local processes with the GPUs they were given (`CUDA_VISIBLE_DEVICES`).
//!
//! - This machine is the one node that runs jobs (pool `local`, label
//!   `crater.ai/node-role=local`); nodes of other agents (`--agent host:port`) are
//!   watched, not run on (role `watched`, in no pool).
//! - Every sample feeds GPU telemetry, the disk of the work folder's filesystem (the
//!   node's disk; 90% raises the disk alert), warnings for other filesystems over 90%,
//!   GPU health from critical XID errors, and node conditions (an agent that stops
//!   answering is NotReady).
//! - A process that ends is recorded: exit 0 succeeded; killed while the kernel's OOM
//!   counter (`/proc/vmstat` `oom_kill`) moved is an OOM kill; anything else failed; a
//!   command that cannot start fails the job once (its restart policy decides the
//!   rest).
//! - How processes are run, logged, stopped and adopted after a restart:
//!   [`supervise`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub mod backend;
pub mod supervise;

pub use backend::{Local, LocalArgs};

use supervise::{Launch, Replica};

use maar_agent::{labels as hw, now_ms, Agent, NodeSample};
use maar_scheduler::input::{GpuReading, NodeReading};
use maar_scheduler::kit::Offline;
use maar_scheduler::model::*;
use maar_scheduler::{
    Actor, Cluster, Command, Core, Decision, Driver, Event, Input, JobOutcome, Observation, Output,
    SchedConfig, Severity,
};

/// The pool, project and role of local mode.
pub const POOL: &str = "local";
pub const PROJECT: &str = "default";
pub const ROLE_LOCAL: &str = "local";
pub const ROLE_WATCHED: &str = "watched";

/// XID errors that mean a card cannot be trusted with work (NVIDIA's list of
/// fatal/uncontained errors: fallen off the bus, double-bit ECC, row-remap failure...).
const FATAL_XIDS: &[u64] = &[48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120];

/// Where readings come from.
pub enum Feed {
    /// This machine, in process.
    Here(Box<Agent>),
    /// An agent's `/sample` at `host:port`.
    Remote(String),
}

/// How local mode runs.
#[derive(Clone, Debug, Default)]
pub struct LocalOptions {
    /// Other agents to watch (`host:port`).
    pub agents: Vec<String>,
    /// Extra labels for this machine's node (`key=value`), e.g. a wrong model label.
    pub labels: BTreeMap<String, String>,
    /// Seconds between samples.
    pub every_s: u64,
    /// Where jobs run (their working folder; its filesystem is the node's disk).
    pub workdir: PathBuf,
    /// Where jobs' output goes: `<logs>/<project>_<job>/replica-N.log` (rotated), and
    /// how each replica ended (`replica-N.exit`).
    pub logs: PathBuf,
    /// The program that runs each replica (`maar __local-shim`): this maar's own
    /// binary when empty.
    pub shim: PathBuf,
}

struct Running {
    replicas: Vec<Replica>,
    /// The kernel's OOM-kill counter when it started.
    oom_kills: u64,
}

/// A replica as the driver's saved state keeps it (in every checkpoint): enough for a
/// restarted maar to find the process again, and to know it is the same one.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Saved {
    job: String,
    replica: usize,
    pid: i32,
    /// `/proc/PID/stat` start time (clock ticks after boot).
    start: u64,
    token: String,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct SavedState {
    #[serde(default)]
    replicas: Vec<Saved>,
}

/// The driver of local mode.
pub struct LocalDriver {
    feeds: Vec<Feed>,
    /// Node name of each feed (learnt from its first sample).
    names: Vec<String>,
    every: u64,
    last: Option<u64>,
    workdir: PathBuf,
    logs: PathBuf,
    shim: PathBuf,
    jobs: BTreeMap<String, Running>,
    /// Filesystems (node, mount) already warned about as over 90%.
    full: BTreeSet<(String, String)>,
    /// Feeds whose agent did not answer last time.
    down: BTreeSet<usize>,
    /// GPUs already marked unhealthy for an XID (node, index, xid count).
    xid_seen: BTreeMap<(String, u32), u64>,
    /// Disk use last told per node (whole percent), so only changes are observed.
    disk_told: BTreeMap<String, u64>,
}

fn vmstat_oom_kills() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("oom_kill "))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// A sample from a remote agent's `/sample`.
fn fetch(addr: &str) -> Result<NodeSample, String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect_timeout(
        &addr
            .parse::<std::net::SocketAddr>()
            .or_else(|_| {
                std::net::ToSocketAddrs::to_socket_addrs(addr)
                    .map_err(|e| e.to_string())?
                    .next()
                    .ok_or_else(|| "no address".to_string())
            })
            .map_err(|e| format!("{addr}: {e}"))?,
        std::time::Duration::from_secs(2),
    )
    .map_err(|e| format!("{addr}: {e}"))?;
    c.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    write!(
        c,
        "GET /sample HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("{addr}: {e}"))?;
    let mut body = String::new();
    c.read_to_string(&mut body)
        .map_err(|e| format!("{addr}: {e}"))?;
    let (head, json) = body
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!(
            "{addr}: {}",
            head.lines().next().unwrap_or("no status")
        ));
    }
    serde_json::from_str(json).map_err(|e| format!("{addr}: not a maar agent's sample: {e}"))
}

impl Feed {
    pub fn sample(&mut self) -> Result<NodeSample, String> {
        match self {
            Feed::Here(a) => Ok(a.sample(now_ms())),
            Feed::Remote(addr) => fetch(addr),
        }
    }
}

/// The filesystem holding `dir` (the longest mount point that is a prefix of it).
fn fs_of<'a>(
    s: &'a NodeSample,
    dir: &std::path::Path,
) -> Option<&'a maar_agent::reading::Filesystem> {
    let d = dir.display().to_string();
    s.host
        .filesystems
        .iter()
        .filter(|f| d.starts_with(&f.mount))
        .max_by_key(|f| f.mount.len())
        .or_else(|| s.host.filesystems.iter().max_by_key(|f| f.total_bytes))
}

/// A node from a sample: its CPUs, memory, the disk of `workdir`, its GPUs (model
/// from NVML), and labels from the hardware plus `extra` (operator's labels win).
pub fn node_of(
    s: &NodeSample,
    role: &str,
    workdir: &std::path::Path,
    extra: &BTreeMap<String, String>,
) -> Node {
    let mut labels = hw::from_hardware(&s.gpus);
    labels.insert(LABEL_ROLE.into(), role.into());
    for (k, v) in extra {
        labels.insert(k.clone(), v.clone());
    }
    let gpus = s
        .gpus
        .iter()
        .map(|g| {
            let mut gpu = Gpu::new(
                g.index,
                g.uuid.clone(),
                hw::model_slug(&g.name),
                g.memory_total_bytes,
                g.mig_enabled == Some(true),
            );
            gpu.mem_used = g.memory_used_bytes;
            gpu
        })
        .collect();
    // The usable size, as `df` counts it (used + available), so the node's disk share
    // is the one `df` shows.
    let disk = fs_of(s, workdir)
        .map(|f| {
            if f.available_bytes > 0 {
                f.used_bytes + f.available_bytes
            } else {
                f.total_bytes
            }
        })
        .unwrap_or(0);
    Node::new(
        s.hostname.clone(),
        labels,
        s.host.cpus as u64 * 1000,
        s.host.memory_total_bytes,
        disk,
        gpus,
    )
}

/// The cluster of local mode: the pool `local` (this machine), the project `default`
/// with no limits there, and one node per feed that answered.
pub fn build(feeds: &mut [Feed], opts: &LocalOptions) -> Result<(Cluster, Vec<String>), String> {
    let mut c = Cluster::new(SchedConfig::default());
    let pool = c.add_pool(Pool {
        name: POOL.into(),
        kind: PoolKind::Training,
        selector: BTreeMap::from([(LABEL_ROLE.to_string(), ROLE_LOCAL.to_string())]),
        overcommit: Overcommit::default(),
        lend_to: Vec::new(),
    });
    c.add_project(Project {
        name: PROJECT.into(),
        department: "local".into(),
        quotas: BTreeMap::from([(pool, Quota::default())]),
    });
    let mut names = Vec::new();
    for (i, f) in feeds.iter_mut().enumerate() {
        let s = match f.sample() {
            Ok(s) => s,
            // Another agent not answering yet: its node joins when it does.
            Err(why) if i > 0 => {
                tracing::warn!(target: "maar", "{why}; its node joins when the agent answers");
                names.push(String::new());
                continue;
            }
            Err(why) => return Err(why),
        };
        let (role, extra) = if i == 0 {
            (ROLE_LOCAL, opts.labels.clone())
        } else {
            (ROLE_WATCHED, BTreeMap::new())
        };
        if c.node_id(&s.hostname).is_ok() {
            return Err(format!(
                "two agents report the same host name `{}`",
                s.hostname
            ));
        }
        names.push(s.hostname.clone());
        c.add_node(node_of(&s, role, &opts.workdir, &extra));
    }
    Ok((c, names))
}

impl LocalDriver {
    pub fn new(feeds: Vec<Feed>, names: Vec<String>, opts: &LocalOptions) -> LocalDriver {
        supervise::become_subreaper();
        LocalDriver {
            feeds,
            names,
            every: opts.every_s.max(1),
            last: None,
            workdir: opts.workdir.clone(),
            logs: opts.logs.clone(),
            shim: if opts.shim.as_os_str().is_empty() {
                std::env::current_exe().unwrap_or_else(|_| PathBuf::from("maar"))
            } else {
                opts.shim.clone()
            },
            jobs: BTreeMap::new(),
            full: BTreeSet::new(),
            down: BTreeSet::new(),
            xid_seen: BTreeMap::new(),
            disk_told: BTreeMap::new(),
        }
    }

    /// This machine and every agent named.
    pub fn feeds(opts: &LocalOptions) -> Vec<Feed> {
        let mut v = vec![Feed::Here(Box::new(Agent::local()))];
        v.extend(opts.agents.iter().map(|a| Feed::Remote(a.clone())));
        v
    }

    fn observe(core: &mut Core, o: Observation, events: &mut Vec<Event>) {
        let out = core.apply(Input::Observe(o));
        events.extend(out.events);
    }

    /// One round of readings, as observations.
    fn sample(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        let mut readings = Vec::new();
        for i in 0..self.feeds.len() {
            let mut name = self.names[i].clone();
            match self.feeds[i].sample() {
                Ok(s) if name.is_empty() => {
                    // An agent answering for the first time: its node joins, watched.
                    name = s.hostname.clone();
                    if core.cluster().node_id(&name).is_err() {
                        let node = node_of(&s, ROLE_WATCHED, &self.workdir, &BTreeMap::new());
                        Self::observe(
                            core,
                            Observation::NodeJoined {
                                node: Box::new(node),
                            },
                            events,
                        );
                    }
                    self.names[i] = name;
                    self.down.remove(&i);
                }
                Err(why) if name.is_empty() => {
                    if self.down.insert(i) {
                        Self::observe(
                            core,
                            Observation::Note {
                                severity: Severity::Warning,
                                reason: "AgentUnreachable".into(),
                                object: "cluster".into(),
                                message: format!("agent {why}; its node joins when it answers"),
                            },
                            events,
                        );
                    }
                }
                Ok(s) => {
                    if self.down.remove(&i) {
                        Self::observe(
                            core,
                            Observation::NodeCondition {
                                node: name.clone(),
                                ready: true,
                                reason: String::new(),
                                keeps_jobs: false,
                            },
                            events,
                        );
                    }
                    self.feed_sample(core, &name, &s, events);
                    readings.push(NodeReading {
                        host: Some(maar_scheduler::model::HostUsage {
                            cpu_busy_pct: s.host.cpu_usage_pct.clamp(0.0, 100.0) as u8,
                            memory_used: s.host.memory_used_bytes,
                            load1_centi: (s.host.load[0].max(0.0) * 100.0).min(u32::MAX as f64)
                                as u32,
                        }),
                        node: name,
                        gpus: s
                            .gpus
                            .iter()
                            .map(|g| GpuReading {
                                util_pct: g.util_sm_pct.unwrap_or(0).min(100) as u8,
                                mem_used: g.memory_used_bytes,
                                temp_c: g.temperature_c.unwrap_or(0).min(255) as u8,
                                power_w: g.power_w.unwrap_or(0.0).clamp(0.0, 65535.0) as u16,
                            })
                            .collect(),
                    });
                }
                Err(why) => {
                    if self.down.insert(i) {
                        Self::observe(
                            core,
                            Observation::NodeCondition {
                                node: name,
                                ready: false,
                                reason: format!("agent unreachable: {why}"),
                                keeps_jobs: false,
                            },
                            events,
                        );
                    }
                }
            }
        }
        if !readings.is_empty() {
            Self::observe(core, Observation::Telemetry { nodes: readings }, events);
        }
    }

    fn feed_sample(
        &mut self,
        core: &mut Core,
        node: &str,
        s: &NodeSample,
        events: &mut Vec<Event>,
    ) {
        // The node's disk is the work folder's filesystem: what jobs do not account
        // for is used by others.
        let pct = fs_of(s, &self.workdir).map(|f| f.used_pct() as u64);
        if let Some(f) = fs_of(s, &self.workdir)
            .filter(|_| pct.is_some_and(|p| self.disk_told.insert(node.to_string(), p) != Some(p)))
        {
            let by_jobs = core
                .cluster()
                .node_id(node)
                .map(|n| core.cluster().nodes[n as usize].alloc_disk)
                .unwrap_or(0);
            Self::observe(
                core,
                Observation::DiskUsage {
                    node: node.into(),
                    bytes: f.used_bytes.saturating_sub(by_jobs),
                },
                events,
            );
        }
        for f in &s.host.filesystems {
            let key = (node.to_string(), f.mount.clone());
            if f.used_pct() >= 90.0 {
                if self.full.insert(key) {
                    Self::observe(
                        core,
                        Observation::Note {
                            severity: Severity::Warning,
                            reason: "DiskPressure".into(),
                            object: format!("node/{node}"),
                            message: format!(
                                "filesystem {} ({}) {:.0}% used",
                                f.mount,
                                f.device,
                                f.used_pct()
                            ),
                        },
                        events,
                    );
                }
            } else {
                self.full.remove(&key);
            }
        }
        // GPU memory the jobs' processes use (where the driver says), as a share of
        // what each asked: the job's usage, and an inference service's load (what its
        // autoscaler keys on, `crater_gpu_memory_usage_rate`).
        if self.names.first().map(|n| n.as_str()) == Some(node) {
            let mut used: BTreeMap<&str, u64> = BTreeMap::new();
            for g in &s.gpus {
                for p in &g.processes {
                    // Whose it is: the token in its environment (any process the
                    // job started, not only the first).
                    let env = supervise::environ(p.pid as i32);
                    let Some(token) = supervise::env_value(&env, "MAAR_JOB_TOKEN") else {
                        continue;
                    };
                    if let Some(job) = self
                        .jobs
                        .iter()
                        .find(|(_, r)| r.replicas.iter().any(|x| x.token == token))
                        .map(|(j, _)| j.as_str())
                    {
                        *used.entry(job).or_default() += p.used_bytes.unwrap_or(0);
                    }
                }
            }
            let mut obs = Vec::new();
            for (job, bytes) in used {
                let c = core.cluster();
                let Ok(id) = c.job_id(job) else { continue };
                let j = &c.jobs[id as usize];
                let card = s.gpus.first().map(|g| g.memory_total_bytes).unwrap_or(0);
                let per_card = j.spec.gpu.memory_per_card.unwrap_or(card);
                let asked = per_card * j.spec.gpu.count as u64 * j.running_replicas().max(1) as u64;
                if asked == 0 {
                    continue;
                }
                let pct = bytes as f64 * 100.0 / asked as f64;
                obs.push(Observation::JobUsage {
                    job: job.to_string(),
                    used_pct: pct.round().min(1000.0) as u32,
                });
                if j.is_inference() {
                    obs.push(Observation::ServiceLoad {
                        job: job.to_string(),
                        usage_pct: pct,
                    });
                }
            }
            for o in obs {
                Self::observe(core, o, events);
            }
        }
        for g in &s.gpus {
            let k = (node.to_string(), g.index);
            let seen = self.xid_seen.get(&k).copied().unwrap_or(0);
            if g.xid_errors > seen {
                self.xid_seen.insert(k, g.xid_errors);
                if let Some(x) = g.last_xid.filter(|x| FATAL_XIDS.contains(x)) {
                    Self::observe(
                        core,
                        Observation::GpuHealth {
                            node: node.into(),
                            gpu: g.index,
                            healthy: false,
                            reason: format!("XID {x}"),
                        },
                        events,
                    );
                }
            }
        }
    }

    /// Records the end of every job whose processes ended (and reaps the orphans
    /// that came to maar).
    fn reap(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        supervise::reap_orphans();
        let oom_now = vmstat_oom_kills();
        let mut ended = Vec::new();
        for (job, r) in self.jobs.iter_mut() {
            let mut outcome = None;
            let mut all_done = true;
            for rep in r.replicas.iter_mut() {
                if !rep.ended() {
                    all_done = false;
                    continue;
                }
                let o = rep.outcome(oom_now > r.oom_kills);
                // The job ends with its first replica to fail, or when all succeeded.
                if matches!(outcome, None | Some(JobOutcome::Succeeded)) {
                    outcome = Some(o);
                }
            }
            let away = !r.replicas.is_empty() && r.replicas.iter().all(|x| x.away);
            match outcome {
                Some(JobOutcome::Succeeded) if !all_done => {}
                Some(o) => ended.push((job.clone(), o, away)),
                None => {}
            }
        }
        for (job, outcome, away) in ended {
            if let Some(mut r) = self.jobs.remove(&job) {
                // Whatever the job left behind goes with it.
                supervise::stop(&mut r.replicas);
            }
            let how = match &outcome {
                JobOutcome::Succeeded => "succeeded".to_string(),
                JobOutcome::Failed { message } => format!("failed: {message}"),
                JobOutcome::OomKilled { message } => format!("OOM-killed: {message}"),
            };
            tracing::info!(target: "maar::job", "{job}: ended, {how}");
            if away && outcome == JobOutcome::Succeeded {
                Self::observe(
                    core,
                    Observation::Note {
                        severity: Severity::Normal,
                        reason: "EndedWhileAway".into(),
                        object: format!("job/{job}"),
                        message: "ended while maar was not running: exited with code 0".into(),
                    },
                    events,
                );
            }
            Self::observe(core, Observation::JobEnded { job, outcome }, events);
        }
    }

    /// The log folder of a job: `<logs>/<project>_<name>`.
    pub fn job_folder(&self, job: &str) -> PathBuf {
        self.logs.join(folder_name(job))
    }

    /// Runs the job's replicas placed on this machine.
    fn start(
        &mut self,
        core: &Core,
        job: &str,
        bindings: &[maar_scheduler::Binding],
    ) -> Result<(), String> {
        let c = core.cluster();
        let id = c.job_id(job).map_err(|e| e.to_string())?;
        let argv: Vec<String> = c.jobs[id as usize].spec.command.clone();
        if argv.is_empty() {
            return Err("the job has no command to run".into());
        }
        let here = self.names.first().cloned().unwrap_or_default();
        if let Some(b) = bindings.iter().find(|b| b.node != here) {
            return Err(format!(
                "node {} is watched, not run on: local mode runs jobs on {here} only",
                b.node
            ));
        }
        let folder = self.job_folder(job);
        let first = self
            .jobs
            .get(job)
            .and_then(|r| r.replicas.iter().map(|x| x.index + 1).max())
            .unwrap_or(0);
        let mut started = Vec::new();
        for (i, b) in bindings.iter().enumerate() {
            let gpus: Vec<String> = b.gpus.iter().map(|g| g.to_string()).collect();
            let gpus = gpus.join(",");
            let launch = Launch {
                shim: &self.shim,
                job,
                index: first + i,
                argv: &argv,
                workdir: &self.workdir,
                folder: &folder,
                logs: &self.logs,
                gpus: &gpus,
            };
            match Replica::spawn(&launch) {
                Ok(mut r) => {
                    r.gpus = b.gpus.clone();
                    tracing::info!(target: "maar::job", "{job}: started replica {} (pid {}) with CUDA_VISIBLE_DEVICES={gpus}; output in {}", r.index, r.pid, r.log.display());
                    started.push(r);
                }
                Err(why) => {
                    supervise::stop(&mut started);
                    return Err(why);
                }
            }
        }
        let oom_kills = vmstat_oom_kills();
        self.jobs
            .entry(job.to_string())
            .or_insert_with(|| Running {
                replicas: Vec::new(),
                oom_kills,
            })
            .replicas
            .extend(started);
        Ok(())
    }

    /// A scheduling cycle and its decisions carried out: processes started (and the
    /// binds confirmed) or stopped.
    fn settle(&mut self, core: &mut Core, events: &mut Vec<Event>, decisions: &mut Vec<Decision>) {
        maar_scheduler::kit::settle(core, events, |core, out, events| {
            if out.is_empty() {
                return false;
            }
            self.carry_out(core, &out, events);
            decisions.extend(out);
            true
        });
    }

    /// Carries out decisions: processes started (the bind confirmed, or failed with the
    /// reason) or stopped.
    fn carry_out(&mut self, core: &mut Core, decisions: &[Decision], events: &mut Vec<Event>) {
        for d in decisions {
            match d {
                Decision::Bind {
                    job,
                    replicas,
                    start,
                    ..
                } => match self.start(core, job, replicas) {
                    Ok(()) => Self::observe(core, Observation::Bound { job: job.clone() }, events),
                    // A job that cannot start fails, once, as its restart policy says
                    // (a back-off before the next try): not a bind retried at once.
                    Err(why) if *start => {
                        tracing::warn!(target: "maar::job", "{job}: {why}");
                        Self::observe(core, Observation::Bound { job: job.clone() }, events);
                        Self::observe(
                            core,
                            Observation::JobEnded {
                                job: job.clone(),
                                outcome: JobOutcome::Failed { message: why },
                            },
                            events,
                        );
                    }
                    Err(reason) => Self::observe(
                        core,
                        Observation::BindFailed {
                            job: job.clone(),
                            reason,
                        },
                        events,
                    ),
                },
                Decision::Stop { job, replicas, .. } => {
                    let Some(r) = self.jobs.get_mut(job) else {
                        continue;
                    };
                    // The replicas named (by their cards); all of them when they are.
                    let mut gone = Vec::new();
                    for b in replicas {
                        if let Some(i) = r.replicas.iter().position(|x| x.gpus == b.gpus) {
                            gone.push(r.replicas.remove(i));
                        }
                    }
                    if r.replicas.is_empty() {
                        self.jobs.remove(job);
                    }
                    supervise::stop(&mut gone);
                    tracing::info!(target: "maar::job", "{job}: stopped {} replica(s)", gone.len());
                }
            }
        }
    }

    /// Stops every process (maar is quitting).
    pub fn stop_all(&mut self) {
        for (_, mut r) in std::mem::take(&mut self.jobs) {
            supervise::stop(&mut r.replicas);
        }
    }

    /// Forgets every process without stopping it: what a maar that is killed leaves
    /// behind (for tests of adoption; `save` first to keep what names them).
    pub fn detach(&mut self) {
        for (_, r) in std::mem::take(&mut self.jobs) {
            r.replicas.into_iter().for_each(Replica::detach);
        }
    }

    /// The processes of the jobs running now: (job, replica, pid of its shim).
    pub fn processes(&self) -> Vec<(String, usize, i32)> {
        self.jobs
            .iter()
            .flat_map(|(j, r)| r.replicas.iter().map(move |x| (j.clone(), x.index, x.pid)))
            .collect()
    }

    /// A restarted maar takes back what the last one left (`saved`: the driver state of
    /// the newest checkpoint). A Running job whose recorded processes still run (the
    /// same pid and start time) is adopted: it stays Running on its GPUs and is watched
    /// until it ends. One whose processes are gone ends as they ended, said to have
    /// ended while maar was not running. Processes of this log folder that no job
    /// owns now are stopped.
    pub fn adopt(&mut self, core: &mut Core, saved: &serde_json::Value) -> Vec<Event> {
        let mut events = Vec::new();
        let state: SavedState = serde_json::from_value(saved.clone()).unwrap_or_default();
        let running: Vec<String> = core
            .cluster()
            .jobs
            .iter()
            .filter(|j| j.phase == maar_scheduler::Phase::Running)
            .map(|j| format!("{}/{}", j.spec.project, j.spec.name))
            .collect();
        for job in running {
            let folder = self.job_folder(&job);
            let mut replicas: Vec<Replica> = state
                .replicas
                .iter()
                .filter(|s| s.job == job)
                .map(|s| Replica::adopted(s.replica, s.pid, s.start, s.token.clone(), &folder))
                .collect();
            if replicas.is_empty() {
                // Started after the newest checkpoint: its shims say who they are.
                replicas = self.find_shims(&job, &folder);
            }
            if replicas.is_empty() {
                Self::observe(
                    core,
                    Observation::JobEnded {
                        job,
                        outcome: JobOutcome::Failed {
                            message: "ended while maar was not running: no process of it was recorded or found".into(),
                        },
                    },
                    &mut events,
                );
                continue;
            }
            let live = replicas.iter().filter(|r| !r.away).count();
            tracing::info!(target: "maar::job", "{job}: {live} of {} replica(s) still running, adopted", replicas.len());
            let placements = {
                let c = core.cluster();
                c.job_id(&job)
                    .map(|id| c.jobs[id as usize].placements.clone())
                    .unwrap_or_default()
            };
            for (r, p) in replicas.iter_mut().zip(&placements) {
                r.gpus = p.gpus.iter().map(|g| g.gpu).collect();
            }
            self.jobs.insert(
                job,
                Running {
                    replicas,
                    oom_kills: vmstat_oom_kills(),
                },
            );
        }
        // Processes of jobs that do not run now (ended or cancelled while maar was not
        // running, or never recorded): stopped.
        let mine: BTreeSet<String> = self
            .jobs
            .values()
            .flat_map(|r| r.replicas.iter().map(|x| x.token.clone()))
            .collect();
        let logs = self.logs.display().to_string();
        let strays: Vec<i32> = supervise::carrying("MAAR_LOGS", &logs)
            .into_iter()
            .filter(|&p| {
                supervise::env_value(&supervise::environ(p), "MAAR_JOB_TOKEN")
                    .is_none_or(|t| !mine.contains(t))
            })
            .collect();
        if !strays.is_empty() {
            supervise::stop_pids(&strays);
            Self::observe(
                core,
                Observation::Note {
                    severity: Severity::Warning,
                    reason: "StrayProcesses".into(),
                    object: "cluster".into(),
                    message: format!(
                        "stopped {} process(es) left by jobs that no longer run here",
                        strays.len()
                    ),
                },
                &mut events,
            );
        }
        self.reap(core, &mut events);
        events
    }

    /// The shims of `job` still running from a maar before this one (found by the
    /// marks in their environment).
    fn find_shims(&self, job: &str, folder: &Path) -> Vec<Replica> {
        let logs = self.logs.display().to_string();
        let mut v: Vec<Replica> = supervise::carrying("MAAR_LOGS", &logs)
            .into_iter()
            .filter_map(|p| {
                let st = supervise::stat(p).filter(|s| s.pgrp == p)?;
                let argv = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
                if argv.split(|&b| b == 0).nth(1) != Some(supervise::SHIM_ARG.as_bytes()) {
                    return None;
                }
                let env = supervise::environ(p);
                if supervise::env_value(&env, "MAAR_JOB") != Some(job) {
                    return None;
                }
                let index = supervise::env_value(&env, "MAAR_REPLICA")?.parse().ok()?;
                let token = supervise::env_value(&env, "MAAR_JOB_TOKEN")?.to_string();
                Some(Replica::adopted(index, p, st.start, token, folder))
            })
            .collect();
        v.sort_by_key(|r| r.index);
        v
    }
}

/// Where the jobs of the cluster recorded at `state` keep their output:
/// `<state's folder>/<state's stem>.logs`.
pub fn logs_folder(state: &Path) -> PathBuf {
    let stem = state
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "local".into());
    let mut p = state.with_file_name(format!("{stem}.logs"));
    if p.is_relative() {
        if let Ok(cwd) = std::env::current_dir() {
            p = cwd.join(p);
        }
    }
    p
}

/// A job's log folder's name: `<project>_<name>`, other characters than letters,
/// digits, `.`, `-` and `_` as `_`.
pub fn folder_name(job: &str) -> String {
    job.replacen('/', "_", 1)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A command as local mode takes it: manifests written for a cluster name its pool
/// and project, and here there is one of each (`local`, `default`); a job must have a
/// command to run.
/// A manifest's pool and project as local mode takes them: unknown ones become
/// `local` and `default`.
pub fn localize_spec(c: &Cluster, spec: &mut maar_scheduler::JobSpec) {
    if c.pool_id(&spec.pool).is_none() {
        spec.pool = POOL.into();
    }
    if c.project_id(&spec.project).is_none() {
        spec.project = PROJECT.into();
    }
}

fn localize(core: &Core, command: Command) -> Result<Command, Output> {
    match command {
        Command::Submit(mut spec) => {
            localize_spec(core.cluster(), &mut spec);
            if spec.command.is_empty() {
                return Err(Output {
                    result: Err(maar_scheduler::ClusterError::Invalid(format!(
                        "job {}: local mode runs the job's command on this machine, and the manifest has none (spec.command)",
                        spec.name
                    ))),
                    job: None,
                    events: Vec::new(),
                    decisions: Vec::new(),
                });
            }
            Ok(Command::Submit(spec))
        }
        other => Ok(other),
    }
}

impl Drop for LocalDriver {
    fn drop(&mut self) {
        self.stop_all();
    }
}

impl Driver for LocalDriver {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        let mut events = core.apply(Input::Advance { to }).events;
        if self.last.is_none_or(|l| to >= l + self.every) {
            self.last = Some(to);
            self.sample(core, &mut events);
        }
        self.reap(core, &mut events);
        self.settle(core, &mut events, &mut Vec::new());
        events
    }

    fn localize(&self, core: &Core, command: Command) -> Result<Command, Output> {
        localize(core, command)
    }

    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        let command = match localize(core, command) {
            Ok(c) => c,
            Err(refused) => return refused,
        };
        let mut out = core.apply(Input::Command { actor, command });
        if out.is_ok() {
            let mut events = std::mem::take(&mut out.events);
            let mut decisions = std::mem::take(&mut out.decisions);
            self.carry_out(core, &decisions.clone(), &mut events);
            self.settle(core, &mut events, &mut decisions);
            out.events = events;
            out.decisions = decisions;
        }
        out
    }

    /// The running replicas (job, index, pid, start time, token): what a restarted
    /// maar adopts.
    fn save(&self) -> serde_json::Value {
        let replicas = self
            .jobs
            .iter()
            .flat_map(|(job, r)| {
                r.replicas.iter().map(move |x| Saved {
                    job: job.clone(),
                    replica: x.index,
                    pid: x.pid,
                    start: x.start,
                    token: x.token.clone(),
                })
            })
            .collect();
        serde_json::to_value(SavedState { replicas }).unwrap_or(serde_json::Value::Null)
    }

    /// maar is stopping: every job's processes are stopped, and recorded as ended by it.
    fn stop(&mut self, core: &mut Core) -> Vec<Event> {
        let mut events = Vec::new();
        for (job, mut r) in std::mem::take(&mut self.jobs) {
            supervise::stop(&mut r.replicas);
            Self::observe(
                core,
                Observation::JobEnded {
                    job,
                    outcome: JobOutcome::Failed {
                        message: "stopped: maar local exited".into(),
                    },
                },
                &mut events,
            );
        }
        events
    }

    /// Previews decide; they start no process.
    fn fork(&self) -> Box<dyn Driver> {
        Box::new(maar_scheduler::kit::Bare)
    }
}

/// A local cluster with no machine attached (a command given while no `maar local`
/// runs, a look at its past): commands change the core, read as local mode reads them;
/// nothing is scheduled or started until `maar local` attaches the machine again.
pub fn offline() -> Offline {
    Offline::new("local", Some(localize))
}
