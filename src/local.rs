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
//!   counter (`/proc/vmstat` `oom_kill`) moved is an OOM kill; anything else failed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command as Proc, Stdio};

use maar_agent::{labels as hw, now_ms, Agent, NodeSample};
use maar_scheduler::input::{GpuReading, NodeReading};
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
}

struct Running {
    children: Vec<Child>,
}

/// Stops a job's processes: each replica's whole process group, TERM then KILL.
fn stop_children(children: &mut [Child]) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    for c in children.iter() {
        let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
    }
    let end = std::time::Instant::now() + std::time::Duration::from_millis(500);
    for c in children.iter_mut() {
        while std::time::Instant::now() < end && matches!(c.try_wait(), Ok(None)) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGKILL);
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The driver of local mode.
pub struct LocalDriver {
    feeds: Vec<Feed>,
    /// Node name of each feed (learnt from its first sample).
    names: Vec<String>,
    every: u64,
    last: Option<u64>,
    workdir: PathBuf,
    jobs: BTreeMap<String, Running>,
    oom_kills: u64,
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
        LocalDriver {
            feeds,
            names,
            every: opts.every_s.max(1),
            last: None,
            workdir: opts.workdir.clone(),
            jobs: BTreeMap::new(),
            oom_kills: vmstat_oom_kills(),
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
                    if let Some(job) = self
                        .jobs
                        .iter()
                        .find(|(_, r)| r.children.iter().any(|c| c.id() == p.pid))
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

    /// Records the end of every process that ended.
    fn reap(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        let mut ended = Vec::new();
        for (job, r) in self.jobs.iter_mut() {
            let mut outcome = None;
            for c in r.children.iter_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    use std::os::unix::process::ExitStatusExt;
                    let o = match (st.code(), st.signal()) {
                        (Some(0), _) => JobOutcome::Succeeded,
                        (Some(code), _) => JobOutcome::Failed {
                            message: format!("exited with code {code}"),
                        },
                        (None, Some(9)) if vmstat_oom_kills() > self.oom_kills => {
                            JobOutcome::OomKilled {
                                message: "killed by the kernel's OOM killer".into(),
                            }
                        }
                        (None, Some(sig)) => JobOutcome::Failed {
                            message: format!("killed by signal {sig}"),
                        },
                        (None, None) => JobOutcome::Failed {
                            message: "ended".into(),
                        },
                    };
                    // The job ends with its first replica to fail, or when all
                    // succeeded.
                    match (&outcome, &o) {
                        (None, _) | (Some(JobOutcome::Succeeded), _) => outcome = Some(o),
                        _ => {}
                    }
                }
            }
            let all_done = r
                .children
                .iter_mut()
                .all(|c| matches!(c.try_wait(), Ok(Some(_))));
            match outcome {
                Some(JobOutcome::Succeeded) if !all_done => {}
                Some(o) => ended.push((job.clone(), o)),
                None => {}
            }
        }
        for (job, outcome) in ended {
            if let Some(mut r) = self.jobs.remove(&job) {
                stop_children(&mut r.children);
            }
            self.oom_kills = vmstat_oom_kills();
            let how = match &outcome {
                JobOutcome::Succeeded => "succeeded".to_string(),
                JobOutcome::Failed { message } => format!("failed: {message}"),
                JobOutcome::OomKilled { message } => format!("OOM-killed: {message}"),
            };
            tracing::info!(target: "maar::job", "{job}: ended, {how}");
            Self::observe(core, Observation::JobEnded { job, outcome }, events);
        }
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
        let spec = &c.jobs[id as usize].spec;
        let argv: Vec<String> = spec.command.clone();
        let Some((prog, rest)) = argv.split_first() else {
            return Err("the job has no command to run".into());
        };
        let here = self.names.first().cloned().unwrap_or_default();
        let mut children = Vec::new();
        for b in bindings {
            if b.node != here {
                return Err(format!(
                    "node {} is watched, not run on: local mode runs jobs on {here} only",
                    b.node
                ));
            }
            let gpus: Vec<String> = b.gpus.iter().map(|g| g.to_string()).collect();
            let mut cmd = Proc::new(prog);
            // Its own process group: stopping the job stops everything it started, and
            // a Ctrl-C in maar's terminal does not reach it.
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            cmd.args(rest)
                .current_dir(&self.workdir)
                .env("CUDA_VISIBLE_DEVICES", gpus.join(","))
                .env("MAAR_JOB", job)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("cannot start `{prog}`: {e}"))?;
            for (pipe, stream) in [
                (
                    child
                        .stdout
                        .take()
                        .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
                    "out",
                ),
                (
                    child
                        .stderr
                        .take()
                        .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
                    "err",
                ),
            ] {
                if let Some(p) = pipe {
                    let job = job.to_string();
                    std::thread::spawn(move || {
                        for line in std::io::BufReader::new(p).lines().map_while(Result::ok) {
                            if stream == "err" {
                                tracing::warn!(target: "maar::job", "{job}: {line}");
                            } else {
                                tracing::info!(target: "maar::job", "{job}: {line}");
                            }
                        }
                    });
                }
            }
            tracing::info!(target: "maar::job", "{job}: started pid {} with CUDA_VISIBLE_DEVICES={}", child.id(), gpus.join(","));
            children.push(child);
        }
        self.jobs.insert(job.to_string(), Running { children });
        Ok(())
    }

    /// A scheduling cycle and its decisions carried out: processes started (and the
    /// binds confirmed) or stopped.
    fn settle(&mut self, core: &mut Core, events: &mut Vec<Event>, decisions: &mut Vec<Decision>) {
        for _ in 0..4 {
            let out = core.apply(Input::Schedule);
            events.extend(out.events);
            if out.decisions.is_empty() {
                break;
            }
            self.carry_out(core, &out.decisions, events);
            decisions.extend(out.decisions);
        }
    }

    /// Carries out decisions: processes started (the bind confirmed, or failed with the
    /// reason) or stopped.
    fn carry_out(&mut self, core: &mut Core, decisions: &[Decision], events: &mut Vec<Event>) {
        for d in decisions {
            match d {
                Decision::Bind { job, replicas, .. } => {
                    let o = match self.start(core, job, replicas) {
                        Ok(()) => Observation::Bound { job: job.clone() },
                        Err(reason) => Observation::BindFailed {
                            job: job.clone(),
                            reason,
                        },
                    };
                    Self::observe(core, o, events);
                }
                Decision::Stop { job, .. } => {
                    if let Some(mut r) = self.jobs.remove(job) {
                        stop_children(&mut r.children);
                        tracing::info!(target: "maar::job", "{job}: stopped");
                    }
                }
            }
        }
    }

    /// Stops every process (maar is quitting).
    pub fn stop_all(&mut self) {
        for (_, mut r) in std::mem::take(&mut self.jobs) {
            stop_children(&mut r.children);
        }
    }
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

    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// maar is stopping: every job's processes are stopped, and recorded as ended by it.
    fn stop(&mut self, core: &mut Core) -> Vec<Event> {
        let mut events = Vec::new();
        for (job, mut r) in std::mem::take(&mut self.jobs) {
            stop_children(&mut r.children);
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
        Box::new(maar_scheduler::input::Bare)
    }
}

/// A local cluster with no machine attached (a command given while no `maar local`
/// runs, a look at its past): commands change the core; nothing is scheduled or
/// started until `maar local` attaches the machine again.
#[derive(Clone)]
pub struct Offline;

impl Driver for Offline {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        core.apply(Input::Advance { to }).events
    }

    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        match localize(core, command) {
            Ok(command) => core.apply(Input::Command { actor, command }),
            Err(refused) => refused,
        }
    }

    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn fork(&self) -> Box<dyn Driver> {
        Box::new(Offline)
    }
}
