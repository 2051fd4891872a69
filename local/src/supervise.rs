//! How local mode keeps its jobs' processes: each replica runs under a small shim (maar's
//! own binary, `maar __local-shim`), which is the leader of the replica's process group.
//!
//! - The shim starts the job's command, writes its output (stdout and stderr, in one
//!   stream) to `replica-N.log` in the job's log folder, rotated at 10 MiB with three
//!   older files kept (`.1` newest), and forwards a bounded tail to maar (lines cut at
//!   4 KiB; nothing waits on a slow maar: what maar does not take in time is dropped).
//! - When the command ends the shim writes how (`exit N`, `signal N`, or `error WHY`
//!   when it could not start) to `replica-N.exit`, and ends the same way. The log and
//!   the status do not need maar: a maar that was killed finds them when it restarts.
//! - Every process of a start carries `MAAR_JOB`, a token unique to that start
//!   (`MAAR_JOB_TOKEN`) and maar's log folder (`MAAR_LOGS`) in its environment; stopping
//!   a replica signals its process group and every process of this user that carries
//!   the token (found in `/proc/*/environ`), so a `setsid` or double-forked descendant
//!   stops too: TERM, a grace period, then KILL. maar is a child subreaper, so such
//!   descendants become its children when their parents end, and it reaps them.
//!   Where cgroup v2 is mounted and maar's own cgroup may be written (a delegated
//!   subtree, as systemd gives a user service), each start also runs in a cgroup of its
//!   own (`maar-<token>` under maar's), and a stop kills the whole cgroup
//!   (`cgroup.kill`, or each process in `cgroup.procs` on kernels without it): nothing
//!   escapes, not even a process that cleared its environment. Elsewhere (cgroup v1,
//!   as on this project's CI machines) the token and the subreaper are the fence, and
//!   a process that clears its own environment escapes it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Proc, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use maar_scheduler::JobOutcome;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// The first argument that makes `maar` the shim.
pub const SHIM_ARG: &str = "__local-shim";
/// A log file is rotated at this size.
pub const LOG_FILE_MAX: u64 = 10 << 20;
/// Older log files kept (`replica-N.log.1` .. `.3`).
pub const LOG_FILES_KEPT: u32 = 3;
/// Output lines longer than this are cut in the tail maar keeps.
pub const TAIL_LINE_MAX: usize = 4096;
/// Lines a second of one replica's output shown in maar's log; the rest are counted.
pub const TAIL_LINES_PER_S: u32 = 20;
/// Time a job's processes get between TERM and KILL.
const GRACE: Duration = Duration::from_millis(500);

/// Pids of the shims this process spawned and has not reaped yet (all drivers): the
/// orphan reaper leaves them to their `Child`.
static OWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn own() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    OWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// What `/proc/PID/stat` says of a process.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    /// Start time after boot, in clock ticks (field 22): with the pid, names a process.
    pub start: u64,
}

pub fn stat(pid: i32) -> Option<Stat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// The process `pid` started at `start` still runs (not a zombie).
pub fn alive(pid: i32, start: u64) -> bool {
    stat(pid).is_some_and(|s| s.start == start && s.state != 'Z')
}

/// Every pid in `/proc`.
fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
}

/// A process's environment (empty when it cannot be read: another user's, a zombie).
pub fn environ(pid: i32) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default()
}

/// The value of `var` in an environment read by [`environ`].
pub fn env_value<'a>(env: &'a [u8], var: &str) -> Option<&'a str> {
    env.split(|&b| b == 0).find_map(|e| {
        let v = e.strip_prefix(var.as_bytes())?.strip_prefix(b"=")?;
        std::str::from_utf8(v).ok()
    })
}

/// Live processes of this user whose environment has `var=value` (not this process).
pub fn carrying(var: &str, value: &str) -> Vec<i32> {
    let uid = nix::unistd::getuid().as_raw();
    let me = std::process::id() as i32;
    pids()
        .filter(|&p| p != me)
        .filter(|p| {
            std::fs::metadata(format!("/proc/{p}")).is_ok_and(|m| m.uid() == uid)
                && env_value(&environ(*p), var) == Some(value)
        })
        .collect()
}

/// Makes this process a child subreaper: descendants orphaned by a job (a
/// double fork, `setsid`) become its children, so maar sees and reaps them.
pub fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!(target: "maar", "cannot become a child subreaper ({e}); a job's orphaned processes go to init");
    }
}

/// Reaps this process's children that ended and are no replica's shim: the orphans
/// of jobs that came to it as a subreaper. No zombies pile up.
pub fn reap_orphans() {
    let me = std::process::id() as i32;
    let own = own();
    for p in pids() {
        if own.contains(&(p as u32)) {
            continue;
        }
        if stat(p).is_some_and(|s| s.ppid == me && s.state == 'Z') {
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(p),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

/// The cgroup v2 folder maar's starts go under: maar's own cgroup, when cgroup v2 is
/// mounted at /sys/fs/cgroup and a folder can be made there (checked once).
pub fn cgroup_base() -> Option<&'static Path> {
    static BASE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        // Where cgroup v2 is mounted: /sys/fs/cgroup, or `$MAAR_CGROUP2_ROOT` (a
        // cgroup2 mount elsewhere, e.g. on a host whose /sys/fs/cgroup is v1).
        let root = std::env::var_os("MAAR_CGROUP2_ROOT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"));
        if !root.join("cgroup.controllers").exists() {
            return None;
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let base = root.join(rel.trim_start_matches('/'));
        let probe = base.join(format!("maar-probe-{}", std::process::id()));
        std::fs::create_dir(&probe).ok()?;
        let _ = std::fs::remove_dir(&probe);
        Some(base)
    })
    .as_deref()
}

/// The cgroup of the start with `token`, if cgroups are used.
pub fn cgroup_of(token: &str) -> Option<PathBuf> {
    cgroup_base().map(|b| b.join(format!("maar-{token}")))
}

/// Kills everything in a start's cgroup and removes it (when it is empty).
fn kill_cgroup(dir: &Path) {
    if !dir.exists() {
        return;
    }
    if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for p in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
        }
    }
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A token no other start shares.
pub fn new_token() -> String {
    let mut b = [0u8; 12];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !ok {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        b[..8].copy_from_slice(&(t ^ (n << 48)).to_le_bytes());
        b[8..].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// How a replica ended, as far as maar knows.
#[derive(Debug)]
enum End {
    /// maar reaped it: its wait status.
    Status(std::process::ExitStatus),
    /// Not maar's child (adopted): it is gone.
    Gone,
}

/// One running replica: its shim (the process group's leader) and what names it.
#[derive(Debug)]
pub struct Replica {
    pub index: usize,
    pub pid: i32,
    pub start: u64,
    pub token: String,
    pub exit: PathBuf,
    pub log: PathBuf,
    /// The cards it was given (which replica a stop names).
    pub gpus: Vec<u32>,
    /// The shim, when this maar started it.
    child: Option<Child>,
    ended: Option<End>,
    /// Found ended by a maar that restarted.
    pub away: bool,
}

/// What a replica's start needs.
pub struct Launch<'a> {
    pub shim: &'a Path,
    pub job: &'a str,
    pub index: usize,
    pub argv: &'a [String],
    pub workdir: &'a Path,
    pub folder: &'a Path,
    pub logs: &'a Path,
    pub gpus: &'a str,
}

impl Replica {
    /// Starts one replica under the shim, in a process group of its own (stopping the
    /// job stops everything it started, and a Ctrl-C in maar's terminal does not
    /// reach it). Its output's tail goes to maar's log.
    pub fn spawn(l: &Launch) -> Result<Replica, String> {
        // Private to maar's user: a job's output is its owner's (folders 0700, files
        // 0600; they were readable by every user).
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(l.folder)
            .map_err(|e| format!("cannot make the log folder {}: {e}", l.folder.display()))?;
        // (A folder made before keeps its mode: closed now.)
        let _ = std::fs::set_permissions(
            l.folder,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        );
        let log = l.folder.join(format!("replica-{}.log", l.index));
        let exit = l.folder.join(format!("replica-{}.exit", l.index));
        match std::fs::remove_file(&exit) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot clear {}: {e}", exit.display()))
            }
            _ => {}
        }
        let token = new_token();
        let mut cmd = Proc::new(l.shim);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        // Its own cgroup where cgroup v2 allows: the child joins it before it runs.
        if let Some(dir) = cgroup_of(&token) {
            if std::fs::create_dir(&dir).is_ok() {
                if let Ok(procs) =
                    std::ffi::CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
                {
                    // SAFETY: between fork and exec only async-signal-safe calls
                    // (open, write, close) on memory prepared before the fork.
                    unsafe {
                        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                            let fd = nix::libc::open(procs.as_ptr(), nix::libc::O_WRONLY);
                            if fd >= 0 {
                                nix::libc::write(fd, b"0".as_ptr().cast(), 1);
                                nix::libc::close(fd);
                            }
                            Ok(())
                        });
                    }
                }
            }
        }
        cmd.arg(SHIM_ARG)
            .arg(&log)
            .arg(&exit)
            .args(l.argv)
            .current_dir(l.workdir)
            .env("CUDA_VISIBLE_DEVICES", l.gpus)
            .env("MAAR_JOB", l.job)
            .env("MAAR_JOB_TOKEN", &token)
            .env("MAAR_LOGS", l.logs)
            .env("MAAR_REPLICA", l.index.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // Spawned while the reaper is held off: a shim that ends at once is its
        // `Child`'s to reap.
        let mut child = {
            let mut own = own();
            let c = cmd
                .spawn()
                .map_err(|e| format!("cannot start maar's shim {}: {e}", l.shim.display()))?;
            own.insert(c.id());
            c
        };
        let pid = child.id() as i32;
        let start = stat(pid).map(|s| s.start).unwrap_or(0);
        if let Some(out) = child.stdout.take() {
            let (job, log) = (l.job.to_string(), log.clone());
            std::thread::spawn(move || tail(&job, &log, out));
        }
        Ok(Replica {
            index: l.index,
            pid,
            start,
            token,
            exit,
            log,
            gpus: Vec::new(),
            child: Some(child),
            ended: None,
            away: false,
        })
    }

    /// A replica a maar before this one started (from its saved state).
    pub fn adopted(index: usize, pid: i32, start: u64, token: String, folder: &Path) -> Replica {
        let away = !alive(pid, start);
        Replica {
            index,
            pid,
            start,
            token,
            exit: folder.join(format!("replica-{index}.exit")),
            log: folder.join(format!("replica-{index}.log")),
            gpus: Vec::new(),
            child: None,
            ended: away.then_some(End::Gone),
            away,
        }
    }

    /// Whether it has ended (looked at now).
    pub fn ended(&mut self) -> bool {
        if self.ended.is_none() {
            match &mut self.child {
                Some(c) => {
                    if let Ok(Some(st)) = c.try_wait() {
                        own().remove(&c.id());
                        self.ended = Some(End::Status(st));
                    }
                }
                None => {
                    if !alive(self.pid, self.start) {
                        self.ended = Some(End::Gone);
                    }
                }
            }
            // An empty cgroup of an ended start goes (one still holding processes
            // stays for the stop that follows).
            if self.ended.is_some() {
                if let Some(dir) = cgroup_of(&self.token) {
                    let _ = std::fs::remove_dir(dir);
                }
            }
        }
        self.ended.is_some()
    }

    /// How it ended: the shim's record, else the wait status, else unknown. `oom`:
    /// the kernel's OOM counter moved since the job started.
    pub fn outcome(&self, oom: bool) -> JobOutcome {
        let recorded = std::fs::read_to_string(&self.exit).ok();
        let status = match (recorded.as_deref().map(str::trim), &self.ended) {
            (Some(r), _) if !r.is_empty() => r.to_string(),
            (_, Some(End::Status(st))) => {
                use std::os::unix::process::ExitStatusExt;
                match (st.code(), st.signal()) {
                    (Some(c), _) => format!("exit {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "unknown".into(),
                }
            }
            _ => "unknown".into(),
        };
        let away = if self.away {
            "ended while maar was not running: "
        } else {
            ""
        };
        let failed = |m: String| JobOutcome::Failed {
            message: format!("{away}{m}"),
        };
        let mut words = status.splitn(2, ' ');
        match (words.next(), words.next()) {
            (Some("exit"), Some("0")) => JobOutcome::Succeeded,
            (Some("exit"), Some(c)) => failed(format!("exited with code {c}")),
            (Some("signal"), Some("9")) if oom => JobOutcome::OomKilled {
                message: format!("{away}killed by the kernel's OOM killer"),
            },
            (Some("signal"), Some(s)) => failed(format!("killed by signal {s}")),
            (Some("error"), Some(why)) => failed(why.to_string()),
            _ if self.child.is_none() => failed(format!(
                "its exit status is unknown (it was adopted after maar restarted and left none in {})",
                self.exit.display()
            )),
            _ => failed("ended".into()),
        }
    }

    /// The shim still runs (so its pid names its process group).
    fn leader_alive(&mut self) -> bool {
        !self.ended()
    }

    /// Forgets the process without stopping it (maar killed, as far as this replica
    /// knows: the next maar adopts it).
    pub fn detach(mut self) {
        if let Some(c) = self.child.take() {
            own().remove(&c.id());
        }
    }
}

/// Stops replicas and everything they started: their process groups and every
/// process carrying one of their tokens get TERM, then, after a grace period, KILL;
/// the shims are reaped.
pub fn stop(replicas: &mut [Replica]) {
    let signal = |rs: &mut [Replica], sig: Signal| {
        let mut any = false;
        for r in rs.iter_mut() {
            if r.leader_alive() {
                let _ = killpg(Pid::from_raw(r.pid), sig);
                any = true;
            }
            for p in carrying("MAAR_JOB_TOKEN", &r.token) {
                let _ = kill(Pid::from_raw(p), sig);
                any = true;
            }
        }
        any
    };
    let any = signal(replicas, Signal::SIGTERM);
    if any {
        let end = Instant::now() + GRACE;
        while Instant::now() < end {
            let left = replicas
                .iter_mut()
                .any(|r| r.leader_alive() || !carrying("MAAR_JOB_TOKEN", &r.token).is_empty());
            if !left {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // A process forking while it was being killed: a few rounds until none is left.
        for _ in 0..5 {
            if !signal(replicas, Signal::SIGKILL) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // Whatever is left in a start's cgroup (a process that cleared its environment).
    for r in replicas.iter() {
        if let Some(dir) = cgroup_of(&r.token) {
            kill_cgroup(&dir);
        }
    }
    for r in replicas.iter_mut() {
        if let Some(c) = &mut r.child {
            if r.ended.is_none() {
                if let Ok(st) = c.wait() {
                    r.ended = Some(End::Status(st));
                }
                own().remove(&c.id());
            }
        }
    }
    reap_orphans();
}

/// Stops processes by pid (each named by its start time, so a pid reused meanwhile is
/// left alone): TERM, a grace period, KILL.
pub fn stop_pids(pids: &[i32]) {
    let named: Vec<(i32, u64)> = pids
        .iter()
        .filter_map(|&p| Some((p, stat(p)?.start)))
        .collect();
    // Their starts' cgroups, to kill and remove with them.
    let cgroups: BTreeSet<PathBuf> = pids
        .iter()
        .filter_map(|&p| env_value(&environ(p), "MAAR_JOB_TOKEN").and_then(cgroup_of))
        .collect();
    let signal = |sig: Signal| {
        let mut any = false;
        for &(p, start) in &named {
            if alive(p, start) {
                let _ = kill(Pid::from_raw(p), sig);
                any = true;
            }
        }
        any
    };
    if signal(Signal::SIGTERM) {
        let end = Instant::now() + GRACE;
        while Instant::now() < end && named.iter().any(|&(p, s)| alive(p, s)) {
            reap_orphans();
            std::thread::sleep(Duration::from_millis(10));
        }
        signal(Signal::SIGKILL);
    }
    for dir in &cgroups {
        kill_cgroup(dir);
    }
    reap_orphans();
}

/// Reads a replica's forwarded output into maar's log: lines cut at
/// [`TAIL_LINE_MAX`] (a long line is never held whole), at most [`TAIL_LINES_PER_S`]
/// a second, the rest counted.
fn tail(job: &str, log: &Path, out: impl Read) {
    let mut r = std::io::BufReader::with_capacity(64 << 10, out);
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut long = false;
    let mut window = Instant::now();
    let (mut shown, mut hidden) = (0u32, 0u64);
    let mut emit = |line: &[u8], long: bool| {
        if window.elapsed() >= Duration::from_secs(1) {
            if hidden > 0 {
                tracing::info!(target: "maar::job", "{job}: {hidden} more line(s) not shown here; the whole output is in {}", log.display());
            }
            window = Instant::now();
            shown = 0;
            hidden = 0;
        }
        if shown < TAIL_LINES_PER_S {
            shown += 1;
            let text = String::from_utf8_lossy(line);
            let cut = if long { " [cut]" } else { "" };
            tracing::info!(target: "maar::job", "{job}: {}{cut}", text.trim_end_matches('\r'));
        } else {
            hidden += 1;
        }
    };
    loop {
        let buf = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(b) => b,
        };
        let (take, eol) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        let room = TAIL_LINE_MAX.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        long |= take > room;
        r.consume(take + eol as usize);
        if eol {
            emit(&line, long);
            line.clear();
            long = false;
        }
    }
    if !line.is_empty() {
        emit(&line, long);
    }
    if hidden > 0 {
        tracing::info!(target: "maar::job", "{job}: {hidden} more line(s) not shown here; the whole output is in {}", log.display());
    }
}

/// A log file rotated at [`LOG_FILE_MAX`], [`LOG_FILES_KEPT`] older ones kept.
struct RotatingLog {
    path: PathBuf,
    file: Option<std::fs::File>,
    size: u64,
}

impl RotatingLog {
    fn open(path: &Path) -> RotatingLog {
        let file = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().create(true).append(true),
            0o600,
        )
        .open(path)
        .ok();
        // (A log made before keeps its mode: closed now.)
        if let Some(f) = &file {
            let _ = f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
        }
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| m.len())
            .unwrap_or(0);
        RotatingLog {
            path: path.to_path_buf(),
            file,
            size,
        }
    }

    fn rotate(&mut self) {
        self.file = None;
        let name = |i: u32| {
            let mut p = self.path.clone().into_os_string();
            p.push(format!(".{i}"));
            PathBuf::from(p)
        };
        for i in (1..LOG_FILES_KEPT).rev() {
            let _ = std::fs::rename(name(i), name(i + 1));
        }
        let _ = std::fs::rename(&self.path, name(1));
        *self = RotatingLog::open(&self.path);
    }

    fn write(&mut self, mut buf: &[u8]) {
        while !buf.is_empty() {
            if self.size >= LOG_FILE_MAX {
                self.rotate();
            }
            let n = (buf.len() as u64).min(LOG_FILE_MAX - self.size) as usize;
            if let Some(f) = &mut self.file {
                if f.write_all(&buf[..n]).is_err() {
                    self.file = None;
                }
            }
            self.size += n as u64;
            buf = &buf[n..];
        }
    }
}

extern "C" fn on_signal(_: nix::libc::c_int) {}

/// Writes `what` as the replica's end, whole or not at all.
fn record_end(exit: &Path, what: &str) {
    let mut tmp = exit.as_os_str().to_owned();
    tmp.push(".tmp");
    let written = std::os::unix::fs::OpenOptionsExt::mode(
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true),
        0o600,
    )
    .open(&tmp)
    .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{what}\n").as_bytes()));
    if written.is_ok() {
        let _ = std::fs::rename(&tmp, exit);
    }
}

/// `maar __local-shim LOG EXIT PROGRAM [ARG...]`: runs PROGRAM as described in this
/// module's header. Returns the exit code to end with (after a signal, it re-raises
/// the signal that ended the program instead of returning).
pub fn shim_main(args: Vec<OsString>) -> i32 {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
    let [log, exit, prog, rest @ ..] = &args[..] else {
        eprintln!("maar {SHIM_ARG}: LOG EXIT PROGRAM [ARG...] (local mode's process shim, started by maar)");
        return 2;
    };
    let (log, exit) = (Path::new(log), Path::new(exit));
    // TERM, INT and HUP reach the job (the same process group); the shim waits for
    // the job to end on them and records how. Caught, not ignored: the job starts
    // with the default handling.
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: the handler does nothing, so it is async-signal-safe.
        let _ = unsafe { sigaction(s, &act) };
    }
    let mut file = RotatingLog::open(log);
    let (r, w) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => {
            let why = format!("cannot make a pipe for its output: {e}");
            record_end(exit, &format!("error {why}"));
            return 127;
        }
    };
    let spawned = {
        let mut cmd = Proc::new(prog);
        cmd.args(rest).stdin(Stdio::null());
        match w.try_clone() {
            Ok(w2) => {
                cmd.stdout(w2).stderr(w);
            }
            Err(_) => {
                cmd.stdout(w).stderr(Stdio::null());
            }
        }
        cmd.spawn()
        // The command (and its copies of the pipe's writing end) goes here.
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let how = e
                .raw_os_error()
                .map(|n| nix::errno::Errno::from_raw(n).desc().to_string())
                .unwrap_or_else(|| e.to_string());
            let why = format!("cannot start `{}`: {how}", prog.to_string_lossy());
            file.write(format!("maar: {why}\n").as_bytes());
            let _ = writeln!(std::io::stdout(), "{why}");
            record_end(exit, &format!("error {why}"));
            return 127;
        }
    };
    // Output: to the log file as it comes, and a tail of cut lines to maar through a
    // bounded queue (a slow or gone maar never holds the job up).
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(64);
    let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        for chunk in rx {
            if out.write_all(&chunk).and_then(|_| out.flush()).is_err() {
                break;
            }
        }
        let _ = sent_tx.send(());
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut r = r;
        let mut buf = vec![0u8; 64 << 10];
        let mut col = 0usize;
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            file.write(&buf[..n]);
            let mut fwd = Vec::with_capacity(n.min(8 << 10));
            for &b in &buf[..n] {
                if b == b'\n' {
                    fwd.push(b);
                    col = 0;
                } else {
                    // One byte past what maar keeps: maar sees the line is cut.
                    if col <= TAIL_LINE_MAX {
                        fwd.push(b);
                    }
                    col = col.saturating_add(1);
                }
            }
            if !fwd.is_empty() {
                let _ = tx.try_send(fwd);
            }
        }
        let _ = done_tx.send(());
    });
    let status = loop {
        match child.wait() {
            Ok(st) => break Some(st),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break None,
        }
    };
    // The rest of its output, to the file and to maar; a descendant that keeps the
    // pipe open, or a maar that does not read, is not waited for long.
    let _ = done_rx.recv_timeout(Duration::from_secs(1));
    let _ = sent_rx.recv_timeout(Duration::from_millis(500));
    use std::os::unix::process::ExitStatusExt;
    match status.map(|s| (s.code(), s.signal())) {
        Some((Some(c), _)) => {
            record_end(exit, &format!("exit {c}"));
            c
        }
        Some((None, Some(sig))) => {
            record_end(exit, &format!("signal {sig}"));
            if let Ok(s) = Signal::try_from(sig) {
                let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
                // SAFETY: restoring the default handling.
                let _ = unsafe { sigaction(s, &dfl) };
                let _ = nix::sys::signal::raise(s);
            }
            128 + sig
        }
        _ => {
            record_end(exit, "error its end could not be read");
            127
        }
    }
}
