//! The engine's door: a Unix socket beside the state file (`<state>.sock`) through
//! which other processes on the host (`maar cordon ...`, `maar get ...`, `maar audit`)
//! reach a running maar.
//!
//! - **Who is asking** comes from the socket's peer credentials (`SO_PEERCRED`: the
//!   caller's uid, its name and groups from the system's user database), never from
//!   anything the caller says; a uid with no passwd entry is `uid<N>`. The SSH address
//!   a caller reports is kept only when it is an IP address, and recorded as "reported
//!   by the client".
//! - **Who may connect**: the socket is the owner's alone (0600) unless the roles file
//!   names a `socket:` group (0660) or `everyone: true` (0666); the engine's roles
//!   decide what each may do (`roles.rs`).
//! - **Requests** are one JSON line each way, one per connection: a request at most
//!   [`MAX_REQUEST`] bytes, the whole read within [`IO_TIMEOUT`]; an answer at most
//!   [`MAX_REPLY`], the whole written within [`IO_TIMEOUT`] and a second for every
//!   [`MIN_REPLY_RATE`] bytes (a client that reads slowly holds no large answer in the
//!   engine's memory for longer); at most
//!   [`MAX_CONNECTIONS`] are served at once, [`MAX_CONNECTIONS_PER_USER`] of one uid;
//!   a client turned away asks again for up to [`BUSY_WAIT`].
//!   A command carries a key chosen by its sender: asked again after a
//!   lost answer, the engine answers with what it recorded the first time.
//! - **Reads** (the state as it is now, the audit, the history for `--at`) are served
//!   from the record by the engine's process, so a reader needs no access to the file.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use maar_scheduler::{Actor, Command, Event};

use crate::engine::{EngineHandle, Refusal};
use crate::record::{
    AuditFilter, CheckpointRow, CommandRow, History, Holder, Meta, Record, RecordError,
};

/// The longest request line, bytes (what any user may send the engine).
pub const MAX_REQUEST: u64 = 8 << 20;
/// The longest answer line, bytes: a read through the running maar carries a whole
/// checkpoint (a cluster of 5,000 pods was 8 MiB, one of 50,000 about 50 MB), and a
/// client reads what its own engine sends, bounded still.
pub const MAX_REPLY: u64 = 512 << 20;
/// Bytes a second a client reads an answer at least (see [`reply`]).
pub const MIN_REPLY_RATE: u64 = 8 << 20;
/// How long a connection may take to send its request (a slow client holds nothing
/// longer).
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are told to come back.
pub const MAX_CONNECTIONS: usize = 32;
/// Connections served at once for one user (by uid): one user cannot take them all.
pub const MAX_CONNECTIONS_PER_USER: usize = 8;
/// The answers of a maar too busy to take a request (it read none of it).
pub const BUSY: &str = "maar is serving too many requests; try again";
pub const BUSY_USER: &str = "maar is serving too many of this user's requests at once; try again";
/// How long a client asks a busy maar again before it gives up.
pub const BUSY_WAIT: Duration = Duration::from_secs(10);
/// How long a client waits for an answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(40);

/// The socket of the maar running on `state`.
pub fn socket_path(state: &Path) -> PathBuf {
    let mut s = state.as_os_str().to_owned();
    s.push(".sock");
    PathBuf::from(s)
}

pub use crate::roles::SocketAccess;

/// A request, as a client sends it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Apply a command (recorded before it is answered; once per key).
    Apply {
        command: Command,
        key: String,
        /// The SSH client address the caller reports (kept only if it is one).
        #[serde(default)]
        ssh: Option<String>,
    },
    /// The caller's role and why.
    Grant,
    /// A checkpoint of the cluster as it is now, written before the answer.
    Fresh,
    Meta,
    CheckpointBefore {
        t: Option<u64>,
    },
    CommandsAfter {
        seq: i64,
    },
    EventsBefore {
        before: u64,
        limit: usize,
    },
    LatestTime,
    Audit {
        filter: AuditFilter,
    },
    CommandCount,
    Holder,
    /// `maar state verify`, on one snapshot of the record.
    Verify,
}

/// An answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Applied {
        result: Result<String, String>,
        seq: Option<i64>,
    },
    Grant {
        user: String,
        role: maar_scheduler::Role,
        why: String,
    },
    Done,
    Meta(Meta),
    Checkpoint(Option<CheckpointRow>),
    Commands(Vec<CommandRow>),
    Events(Vec<Event>),
    Time(u64),
    Count(i64),
    Holder(Option<Holder>),
    Verified {
        result: Result<u64, String>,
        commands: i64,
    },
    /// The request could not be served.
    Error(String),
}

/// The actor behind a connection: its uid from the kernel, its name from the user
/// database.
pub fn peer_actor(stream: &UnixStream, ssh: Option<&str>) -> std::io::Result<Actor> {
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(std::io::Error::from)?;
    let uid = cred.uid();
    Ok(Actor {
        user: crate::actor::user_name(uid),
        uid: Some(uid),
        from: crate::actor::reported_address(ssh),
    })
}

/// The socket served while the engine runs; dropped (or [`Server::stop`]) removes it.
pub struct Server {
    path: PathBuf,
    /// The socket's device and inode: on stop, only this socket is removed (a maar
    /// paused past its lease and woken after another took the file over must not
    /// remove the new one's socket).
    ident: Option<(u64, u64)>,
    stop: Arc<AtomicBool>,
    /// Written to on stop: wakes the thread blocked on the socket.
    wake: Option<std::os::unix::net::UnixStream>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `handle` on the socket of the state file `state`. A socket left by a
    /// maar that is gone is replaced; the caller holds the state file's lease, so no
    /// live maar serves it.
    pub fn start(
        state: &Path,
        handle: EngineHandle,
        access: SocketAccess,
    ) -> std::io::Result<Server> {
        let path = socket_path(state);
        let _ = std::fs::remove_file(&path);
        // Made private from the start (its access is set next): bound with the
        // default umask, it was open to every user for a moment.
        let listener = {
            use nix::sys::stat::{umask, Mode};
            let before = umask(Mode::from_bits_truncate(0o077));
            let bound = UnixListener::bind(&path);
            umask(before);
            bound
        }
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("{}: cannot serve: {e}", path.display()))
        })?;
        let ident = {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(&path)
                .ok()
                .map(|m| (m.dev(), m.ino()))
        };
        if let Err(e) = set_access(&path, &access) {
            // Nothing listens behind a socket left as it was made.
            let _ = std::fs::remove_file(&path);
            return Err(std::io::Error::new(
                e.kind(),
                format!("{}: cannot serve: {e}", path.display()),
            ));
        }
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let per_user: PerUser = Default::default();
        let state = state.to_path_buf();
        let flag = stop.clone();
        // The thread sleeps until a client connects or it is stopped (no polling: an
        // idle maar wakes for nothing).
        let (woken, wake) = std::os::unix::net::UnixStream::pair()?;
        let thread = std::thread::Builder::new()
            .name("maar-api".into())
            .spawn(move || {
                use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
                use std::os::fd::AsFd;
                while !flag.load(Ordering::Relaxed) {
                    let mut fds = [
                        PollFd::new(listener.as_fd(), PollFlags::POLLIN),
                        PollFd::new(woken.as_fd(), PollFlags::POLLIN),
                    ];
                    match poll(&mut fds, PollTimeout::NONE) {
                        Ok(_) => {}
                        Err(nix::errno::Errno::EINTR) => continue,
                        Err(_) => std::thread::sleep(Duration::from_millis(100)),
                    }
                    if fds[1].any().unwrap_or(false) || flag.load(Ordering::Relaxed) {
                        break;
                    }
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let uid = nix::sys::socket::getsockopt(
                                &stream,
                                nix::sys::socket::sockopt::PeerCredentials,
                            )
                            .map(|c| c.uid())
                            .unwrap_or(u32::MAX);
                            let mine = *per_user
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get(&uid)
                                .unwrap_or(&0);
                            let busy = if served.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                                Some(BUSY)
                            } else if mine >= MAX_CONNECTIONS_PER_USER {
                                Some(BUSY_USER)
                            } else {
                                None
                            };
                            if let Some(why) = busy {
                                let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                                let _ = reply(&stream, Reply::Error(why.into()));
                                continue;
                            }
                            // Counted while served: given back however the serving
                            // ends (a thread that never started, a panic).
                            let slot = Slot::take(&served, &per_user, uid);
                            let (h, st) = (handle.clone(), state.clone());
                            let _ = std::thread::Builder::new()
                                .name("maar-api-conn".into())
                                .spawn(move || {
                                    let _slot = slot;
                                    serve_one(stream, &h, &st);
                                });
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            })?;
        Ok(Server {
            path,
            ident,
            stop,
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Closing our end wakes the thread (its end reads as ready at end of file).
        drop(self.wake.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        use std::os::unix::fs::MetadataExt;
        let still_mine = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| Some((m.dev(), m.ino())) == self.ident);
        if still_mine {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl crate::engine::Door for Server {
    fn close(&mut self) {
        self.stop();
    }
}

/// Serves the state file's socket for a running engine (a console or a headless maar
/// does; a command's own short-lived engine does not), closed at its shutdown. Not
/// being able to serve is logged, not fatal: the console still works.
pub fn serve(handle: &EngineHandle, state: &Path, access: SocketAccess) {
    match Server::start(state, handle.clone(), access) {
        Ok(s) => handle.keep_door(Box::new(s)),
        Err(e) => tracing::error!(target: "maar", "{e}; other processes cannot reach this maar"),
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn set_access(path: &Path, access: &SocketAccess) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if access.everyone {
        0o666
    } else if let Some(g) = &access.group {
        let group = nix::unistd::Group::from_name(g)
            .ok()
            .flatten()
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("socket group {g}: no such group"),
                )
            })?;
        nix::unistd::chown(path, None, Some(group.gid)).map_err(|e| {
            let me = crate::actor::user_name(nix::unistd::geteuid().as_raw());
            std::io::Error::new(
                std::io::Error::from(e).kind(),
                format!(
                    "socket group {g}: the socket cannot be given to it ({e}); {me} must be a member of {g} (the roles file's `socket: group`)"
                ),
            )
        })?;
        0o660
    } else {
        0o600
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

fn reply(stream: &UnixStream, r: Reply) -> std::io::Result<()> {
    reply_within(stream, r, MAX_REPLY)
}

/// Writes one answer line (one that would be longer than `max` replaced by one that
/// says so), the whole of it within [`IO_TIMEOUT`] and a second for every
/// [`MIN_REPLY_RATE`] bytes: each write's own timeout would let a client reading a
/// byte every few seconds hold the answer (up to [`MAX_REPLY`]) for as long as it liked.
fn reply_within(stream: &UnixStream, r: Reply, max: u64) -> std::io::Result<()> {
    let mut line = encode_answer(r, max)?;
    line.push(b'\n');
    let deadline =
        Instant::now() + IO_TIMEOUT + Duration::from_secs(line.len() as u64 / MIN_REPLY_RATE);
    write_by(stream, &line, deadline)
}

/// An answer as JSON, or, where that would be `max` bytes or more, an error that says
/// so: the socket's line and the HTTPS door's body alike. Only the encoding is held
/// once it is made (the answer's value is dropped).
pub fn encode_answer(r: Reply, max: u64) -> std::io::Result<Vec<u8>> {
    let line = serde_json::to_vec(&r).map_err(std::io::Error::other)?;
    drop(r);
    if (line.len() as u64) < max {
        return Ok(line);
    }
    // Longer than a client reads: said, with how to narrow it, rather than left for
    // the client to fail on ("no answer: longer than 8 MiB").
    serde_json::to_vec(&Reply::Error(format!(
        "the answer would be {} MiB, more than one answer carries ({} MiB): ask for less (an audit: --last N, --since, --actor, --action or --object)",
        line.len() >> 20,
        max >> 20
    )))
    .map_err(std::io::Error::other)
}

/// Writes all of `line` by `deadline`, or fails.
fn write_by(mut stream: &UnixStream, line: &[u8], deadline: Instant) -> std::io::Result<()> {
    let mut rest = line;
    while !rest.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the answer was not read in time",
            ));
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stream.flush()
}

/// Reads one answer line of at most `max` bytes.
fn read_line(stream: &UnixStream, max: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    BufReader::new(stream.take(max + 1)).read_until(b'\n', &mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {} MiB", max >> 20),
        ));
    }
    Ok(buf)
}

type PerUser = Arc<std::sync::Mutex<std::collections::HashMap<u32, usize>>>;

/// A connection being served, counted in all and for its uid until dropped.
struct Slot {
    served: Arc<AtomicUsize>,
    per_user: PerUser,
    uid: u32,
}

impl Slot {
    fn take(served: &Arc<AtomicUsize>, per_user: &PerUser, uid: u32) -> Slot {
        served.fetch_add(1, Ordering::Relaxed);
        *per_user
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(uid)
            .or_default() += 1;
        Slot {
            served: served.clone(),
            per_user: per_user.clone(),
            uid,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.served.fetch_sub(1, Ordering::Relaxed);
        let mut u = self.per_user.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = u.get_mut(&self.uid) {
            *c -= 1;
            if *c == 0 {
                u.remove(&self.uid);
            }
        }
    }
}

/// Reads one request line of at most [`MAX_REQUEST`] bytes, all of it within
/// [`IO_TIMEOUT`] (not each read: a client sending a byte every few seconds held a
/// connection for as long as it liked).
fn read_request(stream: &UnixStream) -> std::io::Result<Vec<u8>> {
    let end = std::time::Instant::now() + IO_TIMEOUT;
    let late = || {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("not sent within {}s", IO_TIMEOUT.as_secs()),
        )
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        stream.set_read_timeout(Some(left))?;
        let n = match (&*stream).read(&mut chunk) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(late())
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() as u64 > MAX_REQUEST {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("longer than {} MiB", MAX_REQUEST >> 20),
            ));
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            buf.truncate(i + 1);
            return Ok(buf);
        }
    }
}

fn serve_one(stream: UnixStream, handle: &EngineHandle, state: &Path) {
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let answer = match read_request(&stream) {
        Err(e) => Reply::Error(format!("request not read: {e}")),
        Ok(line) => match serde_json::from_slice::<Request>(&line) {
            Err(e) => Reply::Error(format!("request not understood: {e}")),
            Ok(req) => answer(req, &Caller::Peer(&stream), handle, state),
        },
    };
    let _ = reply(&stream, answer);
}

/// Who sent a request, and who judges their role.
pub enum Caller<'a> {
    /// A process on this host: the kernel names it (`SO_PEERCRED`); the engine's roles
    /// judge it.
    Peer(&'a UnixStream),
    /// A Kubernetes user through the API server (`kube_api.rs`): the API server named
    /// it and its RBAC decided its role for this request.
    Judged {
        actor: Actor,
        judged: crate::roles::Judged,
    },
}

/// The answer to one request: the same for every door (the socket, the API server).
pub fn answer(req: Request, caller: &Caller, handle: &EngineHandle, state: &Path) -> Reply {
    let who = |ssh: Option<&str>| match caller {
        Caller::Peer(stream) => peer_actor(stream, ssh).map_err(|e| e.to_string()),
        Caller::Judged { actor, .. } => Ok(actor.clone()),
    };
    let read = |f: &dyn Fn(&Record) -> Result<Reply, RecordError>| -> Reply {
        match Record::open_read_only(state) {
            Ok(r) => f(&r).unwrap_or_else(|e| Reply::Error(e.to_string())),
            Err(e) => Reply::Error(e.to_string()),
        }
    };
    match req {
        Request::Apply { command, key, ssh } => match who(ssh.as_deref()) {
            Err(e) => Reply::Error(format!("who is asking cannot be told: {e}")),
            Ok(actor) => match match caller {
                Caller::Peer(_) => handle.apply_keyed(actor, command, key),
                Caller::Judged { judged, .. } => {
                    handle.apply_judged(actor, command, key, judged.clone())
                }
            } {
                Ok(ack) => Reply::Applied {
                    result: Ok(ack.message),
                    seq: ack.seq,
                },
                Err(Refusal::Refused { why, seq }) => Reply::Applied {
                    result: Err(why),
                    seq,
                },
                Err(e) => Reply::Error(e.to_string()),
            },
        },
        Request::Grant => match caller {
            Caller::Judged { actor, judged } => match judged.role {
                Some(role) => Reply::Grant {
                    user: actor.user.clone(),
                    role,
                    why: judged.why.clone(),
                },
                None => Reply::Error(format!("{} has no maar role ({})", actor.user, judged.why)),
            },
            Caller::Peer(_) => match who(None).and_then(|a| handle.grant(&a).map(|g| (a, g))) {
                Ok((a, g)) => Reply::Grant {
                    user: a.user,
                    role: g.role,
                    why: g.why,
                },
                Err(e) => Reply::Error(e),
            },
        },
        Request::Fresh => match handle.checkpoint_now() {
            Ok(()) => Reply::Done,
            Err(e) => Reply::Error(e),
        },
        Request::Meta => read(&|r| r.meta().map(Reply::Meta)),
        Request::CheckpointBefore { t } => read(&|r| r.checkpoint_before(t).map(Reply::Checkpoint)),
        Request::CommandsAfter { seq } => read(&|r| r.applied_after(seq).map(Reply::Commands)),
        Request::EventsBefore { before, limit } => {
            read(&|r| r.events_before(before, limit).map(Reply::Events))
        }
        Request::LatestTime => read(&|r| r.latest_time().map(Reply::Time)),
        Request::Audit { filter } => read(&|r| r.audit(&filter).map(Reply::Commands)),
        Request::CommandCount => read(&|r| r.command_count().map(Reply::Count)),
        Request::Holder => read(&|r| r.holder().map(Reply::Holder)),
        Request::Verify => match Record::open_read_only(state) {
            Err(e) => Reply::Error(e.to_string()),
            Ok(mut r) => match r.snapshot(|r| {
                Ok::<_, crate::backend::LoadError>((crate::backend::verify(r)?, r.command_count()?))
            }) {
                Ok((result, commands)) => Reply::Verified { result, commands },
                Err(e) => Reply::Error(e.to_string()),
            },
        },
    }
}

/// Why a running maar could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket admits only others (its mode or group); the message says whom.
    #[error("{path}: the running maar does not let this user in ({why}); its owner may add you with `socket: {{group: ...}}` in the roles file (docs/roles.md)")]
    Denied { path: String, why: String },
    #[error("{path}: {why}")]
    Failed { path: String, why: String },
    /// The process behind the socket is not of the state file's owner: nothing is sent
    /// to it (a user who could write to the folder could have planted it).
    #[error("{path}: served by a process of user {peer}, not of {owner}, who owns {state}: nothing was sent to it; remove that socket (or use a folder only its owner can write)")]
    Impostor {
        path: String,
        peer: String,
        owner: String,
        state: String,
    },
    /// The maar answered with an error.
    #[error("{0}")]
    Answer(String),
}

/// A client of a running maar.
pub struct Remote {
    /// Its socket, or what names the maar behind the API server in messages.
    socket: PathBuf,
    state: PathBuf,
    /// The state file's owner, whose process alone may serve its socket (judged when
    /// connecting, with the folders it lies in).
    owner: u32,
    /// Through the Kubernetes API server instead of the socket.
    kube: Option<maar_kube::ops::OpsClient>,
}

impl Remote {
    /// A client of the maar running on `state`, if one serves its socket (none: no
    /// socket, or one left by a maar that is gone).
    pub fn connect(state: &Path) -> Result<Option<Remote>, ClientError> {
        use std::os::unix::fs::MetadataExt;
        let socket = socket_path(state);
        // No state file: no maar of it serves here.
        let Ok(meta) = std::fs::metadata(state) else {
            return Ok(None);
        };
        let owner = meta.uid();
        let r = Remote {
            socket,
            state: state.to_path_buf(),
            owner,
            kube: None,
        };
        match r.stream() {
            Err(ClientError::Failed { .. }) => Ok(None),
            Err(e @ ClientError::Denied { .. }) => Err(e),
            // Something serves there: in a folder others may write to, the state file
            // and its socket may both be theirs, so nothing is sent (said before the
            // peer's name, which then proves nothing).
            served => {
                crate::record::folder_safe(state, owner).map_err(|why| {
                    ClientError::Answer(format!(
                        "{}: nothing was sent to the maar there: {why}",
                        state.display()
                    ))
                })?;
                served.map(|_| Some(r))
            }
        }
    }

    /// A client of the maar serving its API behind a Kubernetes API server (the
    /// operator's kubeconfig context): it knows the caller from the API server.
    pub fn through_kube(ops: maar_kube::ops::OpsClient) -> Remote {
        let name = PathBuf::from(format!("context {} ({})", ops.context, ops.url));
        Remote {
            socket: name.clone(),
            state: name,
            owner: u32::MAX,
            kube: Some(ops),
        }
    }

    /// Whether requests go through the Kubernetes API server.
    pub fn is_kube(&self) -> bool {
        self.kube.is_some()
    }

    /// A connection to the maar serving the state file: only to a process of the
    /// state file's owner (the kernel names the peer, `SO_PEERCRED`), who alone runs
    /// maar on it ([`crate::record::guard_write`]).
    fn stream(&self) -> Result<UnixStream, ClientError> {
        let owner = self.owner;
        match UnixStream::connect(&self.socket) {
            Ok(s) => {
                let peer =
                    nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
                        .map_err(|e| {
                            ClientError::Answer(format!(
                                "{}: nothing was sent: the process behind it cannot be known ({e})",
                                self.socket.display()
                            ))
                        })?
                        .uid();
                if peer != owner {
                    return Err(ClientError::Impostor {
                        path: self.socket.display().to_string(),
                        peer: crate::actor::user_name(peer),
                        owner: crate::actor::user_name(owner),
                        state: self.state.display().to_string(),
                    });
                }
                Ok(s)
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                Err(ClientError::Denied {
                    path: self.socket.display().to_string(),
                    why: describe_access(&self.socket),
                })
            }
            Err(e) => Err(ClientError::Failed {
                path: self.socket.display().to_string(),
                why: e.to_string(),
            }),
        }
    }

    /// Sends a request and waits for its answer. A maar too busy to take it (turned
    /// away before it read a byte of it: nothing was applied) is asked again, a little
    /// later each time, for up to [`BUSY_WAIT`]: a script's parallel commands wait
    /// their turn, as they do for the state file with no maar running.
    pub fn ask(&self, req: &Request) -> Result<Reply, ClientError> {
        let until = std::time::Instant::now() + BUSY_WAIT;
        let mut pause = Duration::from_millis(10);
        loop {
            match self.ask_once(req) {
                Err(ClientError::Answer(why))
                    if (why == BUSY || why == BUSY_USER) && std::time::Instant::now() < until =>
                {
                    // Apart, so that turned-away clients do not all come back at once:
                    // up to the pause again, drawn anew each time.
                    let nanos = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.subsec_nanos())
                        .unwrap_or(0);
                    let jitter = pause.mul_f64(f64::from(nanos % 1000) / 1000.0);
                    std::thread::sleep(pause + jitter);
                    pause = (pause * 2).min(Duration::from_millis(250));
                }
                // Still busy after all that asking: said so, and what to do.
                Err(ClientError::Answer(why)) if why == BUSY || why == BUSY_USER => {
                    return Err(ClientError::Answer(format!(
                        "{why} (still busy after {} s of asking again; nothing was applied: run fewer commands at once, or give this one again)",
                        BUSY_WAIT.as_secs()
                    )))
                }
                other => return other,
            }
        }
    }

    /// [`Remote::ask`] without asking again when the maar is busy.
    pub fn ask_once(&self, req: &Request) -> Result<Reply, ClientError> {
        let failed = |why: String| ClientError::Failed {
            path: self.socket.display().to_string(),
            why,
        };
        if let Some(k) = &self.kube {
            let body = serde_json::to_vec(req).map_err(|e| failed(e.to_string()))?;
            // A kube error names the context already.
            let got = k
                .ask(body, ANSWER_TIMEOUT, MAX_REPLY)
                .map_err(|e| ClientError::Answer(e.to_string()))?;
            return match serde_json::from_slice::<Reply>(&got) {
                Ok(Reply::Error(e)) => Err(ClientError::Answer(e)),
                Ok(r) => Ok(r),
                Err(e) => Err(failed(format!("answer not understood: {e}"))),
            };
        }
        let mut s = self.stream()?;
        s.set_read_timeout(Some(ANSWER_TIMEOUT))
            .map_err(|e| failed(e.to_string()))?;
        let mut line = serde_json::to_vec(req).map_err(|e| failed(e.to_string()))?;
        line.push(b'\n');
        if let Err(e) = s.write_all(&line) {
            // Turned away at once (too many requests): its answer says why.
            return match read_line(&s, MAX_REPLY)
                .ok()
                .and_then(|l| serde_json::from_slice::<Reply>(&l).ok())
            {
                Some(Reply::Error(why)) => Err(ClientError::Answer(why)),
                _ => Err(failed(e.to_string())),
            };
        }
        let got = read_line(&s, MAX_REPLY).map_err(|e| {
            failed(match req {
                // Sent: a maar that was stopped (SIGSTOP, a paused VM) takes it when it
                // goes on, so the caller is told so rather than to give it again.
                Request::Apply { command, key, .. } => format!(
                    "no answer within {}s to `{}` ({e}): the running maar may be stopped; it may still apply it when it goes on. Before giving it again, see whether it was taken: `maar audit -o json --last 20` lists its key {key} once it is",
                    ANSWER_TIMEOUT.as_secs(),
                    command.describe()
                ),
                _ => format!("no answer: {e}"),
            })
        })?;
        if got.is_empty() {
            return Err(failed("the running maar closed the connection".into()));
        }
        match serde_json::from_slice::<Reply>(&got) {
            Ok(Reply::Error(e)) => Err(ClientError::Answer(e)),
            Ok(r) => Ok(r),
            Err(e) => Err(failed(format!("answer not understood: {e}"))),
        }
    }

    fn unexpected<T>(&self, r: Reply) -> Result<T, RecordError> {
        Err(RecordError::Os {
            path: self.socket.display().to_string(),
            what: "read",
            why: format!("unexpected answer {r:?}"),
        })
    }

    fn read(&self, req: Request) -> Result<Reply, RecordError> {
        self.ask(&req).map_err(|e| RecordError::Os {
            path: self.state.display().to_string(),
            what: "read through the running maar",
            why: e.to_string(),
        })
    }

    /// Asks the running maar to write a checkpoint now (a reader then sees the
    /// cluster as it is, not as of the last periodic one).
    pub fn fresh(&self) -> Result<(), ClientError> {
        self.ask(&Request::Fresh).map(|_| ())
    }

    pub fn audit(&self, filter: &AuditFilter) -> Result<Vec<CommandRow>, RecordError> {
        match self.read(Request::Audit {
            filter: filter.clone(),
        })? {
            Reply::Commands(v) => Ok(v),
            r => self.unexpected(r),
        }
    }

    pub fn command_count(&self) -> Result<i64, RecordError> {
        match self.read(Request::CommandCount)? {
            Reply::Count(n) => Ok(n),
            r => self.unexpected(r),
        }
    }

    pub fn holder(&self) -> Result<Option<Holder>, RecordError> {
        match self.read(Request::Holder)? {
            Reply::Holder(h) => Ok(h),
            r => self.unexpected(r),
        }
    }
}

impl History for Remote {
    fn path(&self) -> &Path {
        &self.state
    }

    fn meta(&self) -> Result<Meta, RecordError> {
        match self.read(Request::Meta)? {
            Reply::Meta(m) => Ok(m),
            r => self.unexpected(r),
        }
    }

    fn checkpoint_before(&self, t: Option<u64>) -> Result<Option<CheckpointRow>, RecordError> {
        match self.read(Request::CheckpointBefore { t })? {
            Reply::Checkpoint(c) => Ok(c),
            r => self.unexpected(r),
        }
    }

    fn events_before(&self, before: u64, limit: usize) -> Result<Vec<Event>, RecordError> {
        match self.read(Request::EventsBefore { before, limit })? {
            Reply::Events(v) => Ok(v),
            r => self.unexpected(r),
        }
    }

    fn commands_after(&self, seq: i64) -> Result<Vec<CommandRow>, RecordError> {
        match self.read(Request::CommandsAfter { seq })? {
            Reply::Commands(v) => Ok(v),
            r => self.unexpected(r),
        }
    }

    fn latest_time(&self) -> Result<u64, RecordError> {
        match self.read(Request::LatestTime)? {
            Reply::Time(t) => Ok(t),
            r => self.unexpected(r),
        }
    }
}

/// Who the socket admits, in words (for a refused connection).
fn describe_access(socket: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(socket) else {
        return "it cannot be read".into();
    };
    let owner = crate::actor::user_name(m.uid());
    let mode = m.mode() & 0o777;
    if mode & 0o060 == 0o060 {
        let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(m.gid()))
            .ok()
            .flatten()
            .map(|g| g.name)
            .unwrap_or_else(|| format!("gid {}", m.gid()));
        format!("it admits {owner} and group {group}")
    } else {
        format!("it admits only {owner}")
    }
}

/// A fresh key for a command (its sender's: kept across a retry).
pub fn new_key() -> String {
    let mut b = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if random.is_err() {
        // No /dev/urandom: the time and the pid are unique enough for one host.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b.copy_from_slice(&(t ^ (u128::from(std::process::id()) << 96)).to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer longer than a client reads is replaced by one that says so and how to
    /// ask for less (the client failed with "no answer: longer than 8 MiB"); one
    /// longer than a request may be goes through (a checkpoint of 5,000 pods was
    /// refused at 8 MiB, so `maar get jobs` failed beside a running `maar kube`).
    #[test]
    fn an_answer_too_long_to_read_says_so_instead() {
        let (a, b) = UnixStream::pair().unwrap();
        let big = Reply::Error("x".repeat(MAX_REQUEST as usize + 10));
        let writer = std::thread::spawn(move || reply_within(&a, big, MAX_REQUEST));
        let got = read_line(&b, MAX_REQUEST).unwrap();
        writer.join().unwrap().unwrap();
        match serde_json::from_slice::<Reply>(&got).unwrap() {
            Reply::Error(why) => assert!(
                why.starts_with("the answer would be 8 MiB, more than one answer carries (8 MiB): ask for less (an audit: --last N"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        // A client that does not read is let go at the deadline (the answer's memory
        // with it), whatever each write's own timeout.
        let (a, _b) = UnixStream::pair().unwrap();
        let start = Instant::now();
        let e = write_by(&a, &vec![b'x'; 4 << 20], start + Duration::from_millis(300)).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        let (a, b) = UnixStream::pair().unwrap();
        let long = "x".repeat(3 * MAX_REQUEST as usize);
        let answer = Reply::Error(long.clone());
        let writer = std::thread::spawn(move || reply(&a, answer));
        let got = read_line(&b, MAX_REPLY).unwrap();
        writer.join().unwrap().unwrap();
        match serde_json::from_slice::<Reply>(&got).unwrap() {
            Reply::Error(why) => assert_eq!(why, long),
            other => panic!("{other:?}"),
        }
    }
}
