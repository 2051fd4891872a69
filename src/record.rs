//! The durable record: one SQLite file per cluster (WAL journal), written by the
//! engine and read by every command that takes `--state`.
//!
//! It holds every operator command with its actor, origin, time and result (written
//! before the command is acknowledged), checkpoints of the cluster (so a restart never
//! replays from the beginning), the whole event history (memory keeps only a window),
//! the lease that says which process runs the engine (with a fencing token: every
//! write of an engine checks it, so one that lost the lease writes nothing), and the
//! inbox of older maars (no longer read: other processes reach a running engine through
//! its socket, `api.rs`). docs/state.md documents the schema.
//!
//! The file is created private to its owner (0600). A reader that may read it but not
//! write it opens it read-only (`Record::open_read_only`); the engine leaves it in
//! rollback-journal mode when it closes, so such a reader needs no write access.
//!
//! A file that is not SQLite, not maar's, or written by a newer maar is refused with a
//! message naming it, and never written to.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use maar_scheduler::{Actor, Command, Event, Severity};

/// `PRAGMA application_id` of maar state files ("maar").
pub const APPLICATION_ID: i32 = 0x6d61_6172;
/// Schema version written by this maar (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i32 = 3;
/// Besides the newest checkpoints, the first of every this many simulated seconds is
/// kept for the last [`HOURLY_FOR_S`], so the recent past is restored quickly (time
/// travel); before that, the first of every simulated day ([`DAILY_EVERY_S`]) for
/// [`DAILY_FOR_S`], and the first of every week before that.
pub const HISTORY_EVERY_S: u64 = 3600;
/// How far back checkpoints are kept hourly.
pub const HOURLY_FOR_S: u64 = 2 * 86_400;
/// Older checkpoints: the first of each simulated day, for this long.
pub const DAILY_EVERY_S: u64 = 86_400;
pub const DAILY_FOR_S: u64 = 60 * 86_400;
/// Oldest checkpoints: the first of each simulated week (about 52 a year, ~130 kB each
/// packed for the demo).
pub const WEEKLY_EVERY_S: u64 = 7 * 86_400;

/// Events the state file keeps (the newest); older ones are dropped at checkpoints so
/// a demo left at top speed for hours does not fill the disk.
pub const KEEP_EVENTS: i64 = 500_000;
/// How old a lease heartbeat may be before its holder counts as gone.
pub const LEASE_STALE: Duration = Duration::from_secs(5);

/// Why the record could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: not a maar state file ({why}); it was left untouched")]
    Foreign { path: String, why: String },
    #[error("{path}: written by a newer maar (schema {found}; this maar reads up to {SCHEMA_VERSION}); it was left untouched")]
    Newer { path: String, found: i32 },
    #[error("{path}: the state file is damaged ({why}); it was left untouched")]
    Corrupt { path: String, why: String },
    #[error("{path}: in use by maar (pid {pid} on {host}, since {since}); quit it first, or act through it: commands given with --state reach a running maar")]
    InUse {
        path: String,
        pid: i64,
        host: String,
        since: String,
    },
    #[error("{path}: no recorded cluster here; start one with `maar demo`, or name another state file with --state")]
    Missing { path: String },
    /// Another user could swap the file or what lies beside it ([`guard_write`]).
    #[error("{path}: not written: {why}")]
    Unsafe { path: String, why: String },
    /// The same, for a reader: the file is not read.
    #[error("{path}: not read: {why}")]
    UnsafeToRead { path: String, why: String },
    #[error("{path}: this maar lost the state file to another ({why}); nothing more is written or acknowledged")]
    LeaseLost { path: String, why: String },
    #[error("{path}: {why}; this maar stops acknowledging commands")]
    Gone { path: String, why: String },
    /// Another process holds SQLite's lock on the file past the wait (a reader in
    /// the middle of a read, or a process stopped inside one).
    #[error("{path}: {what}: the file is locked by another process (a reader in the middle of a read, or a process stopped inside one): try again, and find it with `fuser {path}`")]
    Locked { path: String, what: &'static str },
    #[error("{path}: {what}: {why}")]
    Os {
        path: String,
        what: &'static str,
        why: String,
    },
    #[error("{path}: {what}: {source}")]
    Sql {
        path: String,
        what: &'static str,
        #[source]
        source: rusqlite::Error,
    },
}

/// What the record is of.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    /// `demo`, `local` or `kube`.
    pub backend: String,
    /// The cluster's name (the demo scenario's name).
    pub cluster: String,
    /// The demo's scenario, as YAML text, and the seed it runs with.
    pub scenario: Option<String>,
    pub seed: Option<u64>,
    pub created: String,
}

impl Meta {
    /// A cluster of `backend` named `cluster`, without scenario or seed, created now.
    pub fn of(backend: &str, cluster: &str) -> Meta {
        Meta {
            backend: backend.into(),
            cluster: cluster.into(),
            scenario: None,
            seed: None,
            created: now_rfc3339(),
        }
    }
}

/// One recorded operator command.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommandRow {
    pub seq: i64,
    /// Cluster time when it was applied, seconds.
    pub at_s: u64,
    /// Wall-clock time, RFC 3339 UTC.
    pub wall: String,
    pub actor: Actor,
    pub action: String,
    pub object: String,
    pub command: Command,
    /// `Ok(what happened)` or `Err(why it was refused)`.
    pub result: Result<String, String>,
    /// The inbox request it answered, when it came from another process.
    pub request: Option<i64>,
    /// The key its sender gave it (a command is recorded at most once per key).
    pub key: Option<String>,
}

/// A checkpoint: the core's and the driver's state after command `after_seq`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CheckpointRow {
    pub id: i64,
    pub after_seq: i64,
    pub at_s: u64,
    pub wall: String,
    pub core: String,
    pub driver: String,
}

/// A command waiting in the inbox for the live engine.
#[derive(Clone, Debug)]
pub struct InboxRow {
    pub id: i64,
    pub actor: Actor,
    pub command: Command,
}

/// The answer to an inbox request.
#[derive(Clone, Debug, PartialEq)]
pub struct InboxAnswer {
    pub seq: Option<i64>,
    pub result: Result<String, String>,
}

/// Who holds the lease.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    pub pid: i64,
    pub host: String,
    pub since: String,
    /// `engine` (a console or a headless maar) or `cli` (a command applied with no
    /// maar running: held for a moment).
    pub kind: String,
}

/// What kind of process takes the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseKind {
    Engine,
    Cli,
}

impl LeaseKind {
    fn name(self) -> &'static str {
        match self {
            LeaseKind::Engine => "engine",
            LeaseKind::Cli => "cli",
        }
    }
}

/// Filters for `maar audit`.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub object: Option<String>,
    /// Wall-clock bounds, RFC 3339 (compared as text, both UTC).
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: Option<usize>,
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Schema 1, as maar first wrote it (kept to create and migrate old files in tests).
pub const SCHEMA_V1: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE commands (
  seq INTEGER PRIMARY KEY,
  at_s INTEGER NOT NULL,
  wall TEXT NOT NULL,
  actor TEXT NOT NULL,
  uid INTEGER,
  origin TEXT,
  action TEXT NOT NULL,
  object TEXT NOT NULL,
  command TEXT NOT NULL,
  result TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE TABLE checkpoints (
  id INTEGER PRIMARY KEY,
  after_seq INTEGER NOT NULL,
  at_s INTEGER NOT NULL,
  wall TEXT NOT NULL,
  core TEXT NOT NULL,
  driver TEXT NOT NULL
);
CREATE TABLE events (
  seq INTEGER PRIMARY KEY,
  at_s INTEGER NOT NULL,
  severity TEXT NOT NULL,
  reason TEXT NOT NULL,
  object TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX events_object ON events(object);
";

/// From schema 1 to 2: commands answer inbox requests; the inbox and the lease.
const MIGRATE_1_2: &str = "
ALTER TABLE commands ADD COLUMN request INTEGER;
CREATE TABLE inbox (
  id INTEGER PRIMARY KEY,
  wall TEXT NOT NULL,
  actor TEXT NOT NULL,
  uid INTEGER,
  origin TEXT,
  command TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'new',
  seq INTEGER,
  result TEXT,
  message TEXT
);
CREATE TABLE lease (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  pid INTEGER NOT NULL,
  host TEXT NOT NULL,
  since TEXT NOT NULL,
  heartbeat_ms INTEGER NOT NULL
);
";

/// From schema 2 to 3: request keys (a command recorded at most once), the lease's
/// fencing token and kind.
const MIGRATE_2_3: &str = "
ALTER TABLE commands ADD COLUMN request_key TEXT;
CREATE UNIQUE INDEX commands_request_key ON commands(request_key);
ALTER TABLE lease ADD COLUMN token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lease ADD COLUMN kind TEXT NOT NULL DEFAULT 'engine';
";

/// An inbox row's answer columns: state, seq, result, message.
type AnswerRow = (String, Option<i64>, Option<String>, Option<String>);

/// What restoring a cluster reads from its record: the file itself ([`Record`]) or a
/// running maar's socket (`api::Remote`), for a reader who may not open the file.
pub trait History {
    fn path(&self) -> &Path;
    fn meta(&self) -> Result<Meta, RecordError>;
    fn checkpoint_before(&self, t: Option<u64>) -> Result<Option<CheckpointRow>, RecordError>;
    fn events_before(&self, before: u64, limit: usize) -> Result<Vec<Event>, RecordError>;
    fn commands_after(&self, seq: i64) -> Result<Vec<CommandRow>, RecordError>;
    fn latest_time(&self) -> Result<u64, RecordError>;
}

impl History for Record {
    fn path(&self) -> &Path {
        Record::path(self)
    }
    fn meta(&self) -> Result<Meta, RecordError> {
        Record::meta(self)
    }
    fn checkpoint_before(&self, t: Option<u64>) -> Result<Option<CheckpointRow>, RecordError> {
        Record::checkpoint_before(self, t)
    }
    fn events_before(&self, before: u64, limit: usize) -> Result<Vec<Event>, RecordError> {
        Record::events_before(self, before, limit)
    }
    fn commands_after(&self, seq: i64) -> Result<Vec<CommandRow>, RecordError> {
        Record::commands_after(self, seq)
    }
    fn latest_time(&self) -> Result<u64, RecordError> {
        Record::latest_time(self)
    }
}

pub struct Record {
    conn: Connection,
    path: PathBuf,
    /// The fencing token of the lease this process holds (None: it holds none).
    token: Option<i64>,
    /// The file opened (device, inode): a file deleted or replaced under the engine is
    /// noticed.
    identity: Option<(u64, u64)>,
}

/// The device and inode of a file.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// What `write` writes (a checkpoint's JSON), packed as it comes: the whole text is
/// never held (7.7 MB for a cluster of 5,000 jobs, about 50 MB for 50,000, grown by
/// doubling and copied each time; packed, 0.3 and 3 MB). JSON is written a few bytes at
/// a time, so it reaches the packer through a 64 KiB buffer.
pub fn pack_written(
    write: impl FnOnce(&mut Packer) -> Result<(), serde_json::Error>,
) -> Result<Vec<u8>, serde_json::Error> {
    let e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = std::io::BufWriter::with_capacity(1 << 16, e);
    write(&mut b)?;
    let e = b
        .into_inner()
        .map_err(|e| serde_json::Error::io(e.into_error()))?;
    e.finish().map_err(serde_json::Error::io)
}

/// What [`pack_written`] writes into (a concrete type: JSON's many small writes are
/// not each a call through a trait object).
pub type Packer = std::io::BufWriter<flate2::write::DeflateEncoder<Vec<u8>>>;

/// Compresses a checkpoint's text (deflate): a large cluster's core is mostly repeated
/// keys.
fn pack(text: &str) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(text.as_bytes()).expect("writing to memory");
    e.finish().expect("writing to memory")
}

/// A checkpoint column: compressed (schema 3) or text (older files).
fn unpack(v: rusqlite::types::Value) -> Result<String, String> {
    use std::io::Read;
    match v {
        rusqlite::types::Value::Text(t) => Ok(t),
        rusqlite::types::Value::Blob(b) => {
            let mut out = String::new();
            flate2::read::DeflateDecoder::new(&b[..])
                .take(1 << 32)
                .read_to_string(&mut out)
                .map_err(|e| format!("a checkpoint cannot be unpacked: {e}"))?;
            Ok(out)
        }
        _ => Err("a checkpoint column is neither text nor packed".into()),
    }
}

fn action_of(c: &Command) -> (String, String) {
    (c.action().to_string(), c.object())
}

/// The files beside a state file that maar writes or serves: SQLite's journals and
/// the running maar's socket ([`crate::api::socket_path`]).
const COMPANIONS: [&str; 4] = ["-wal", "-shm", "-journal", ".sock"];

/// Refuses to write a state file that another user could swap, or whose companions
/// another user already holds, as ssh's StrictModes refuses such a home: a folder
/// another user may write to (and not sticky), or owned by another user than this
/// one or root; a state file of another user; a journal or socket beside it that is
/// another user's or a symbolic link. Without it, a user who may write to the folder
/// could plant a socket that takes the owner's commands and answers "done", or a
/// state file of forged history (both found by a hostile second user on a shared
/// host). Each reason names the file, its owner and what to do.
pub fn guard_write(path: &Path) -> Result<(), RecordError> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let name = crate::actor::user_name;
    let unsafe_ = |why: String| RecordError::Unsafe {
        path: path.display().to_string(),
        why,
    };
    folder_safe(path, me).map_err(unsafe_)?;
    if let Ok(m) = std::fs::metadata(path) {
        if m.uid() != me {
            return Err(unsafe_(format!(
                "it belongs to user {}: only its owner runs maar on it (others act through that maar: `maar cordon ... --state {}` reaches it while it runs)",
                name(m.uid()),
                path.display()
            )));
        }
    }
    for suffix in COMPANIONS {
        let mut c = path.as_os_str().to_owned();
        c.push(suffix);
        let c = PathBuf::from(c);
        let Ok(m) = std::fs::symlink_metadata(&c) else {
            continue;
        };
        if m.file_type().is_symlink() {
            return Err(unsafe_(format!(
                "{} is a symbolic link; maar writes its journal and serves its socket there itself: remove it",
                c.display()
            )));
        }
        if m.uid() != me {
            return Err(unsafe_(format!(
                "{} belongs to user {}: another user's journal could be read as this file's, or their process could take this maar's commands at its socket; remove it (and keep the state file in a folder only you can write)",
                c.display(),
                name(m.uid())
            )));
        }
    }
    Ok(())
}

/// Why the folders of a state file are not safe for `owner` (a uid) to keep it in
/// (`Err`, in words), as ssh's StrictModes judges a home: the file's own folder (after
/// symbolic links) must be writable by `owner` alone (not even sticky: in `/tmp`
/// another user can still plant the journal or socket beside it before SQLite opens
/// it); each folder above it must be writable by `owner` alone or be sticky (else
/// another user could rename the folders below and put their own in place); each must
/// belong to `owner` or root. The client checks it too, for the state file's owner,
/// before it trusts the socket there (`api::Remote`), and so does the command line
/// before it reads a file with no maar running. Each reason names the folder and what
/// to do.
pub fn folder_safe(path: &Path, owner: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let name = crate::actor::user_name;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // The path as given (made absolute, links not followed): a link on the way is
    // judged where it lies, and must be the owner's or root's (whoever owns a link
    // may point it elsewhere between this look and SQLite's open).
    let given = if dir.is_absolute() {
        dir.clone()
    } else {
        std::env::current_dir()
            .map(|c| c.join(&dir))
            .unwrap_or(dir.clone())
    };
    for d in given.ancestors() {
        if let Ok(m) = std::fs::symlink_metadata(d) {
            if m.file_type().is_symlink() && m.uid() != owner && m.uid() != 0 {
                return Err(format!(
                    "the link {} on its path belongs to user {}, who could point it elsewhere; give the state file's path without it",
                    d.display(),
                    name(m.uid())
                ));
            }
        }
    }
    // The folder SQLite writes the journals in: where the file really is.
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p.parent().map(Path::to_path_buf).unwrap_or(dir),
        Err(_) => std::fs::canonicalize(&dir).unwrap_or(dir),
    };
    // The folders as given and as they really are: the first of each is the file's
    // own folder.
    // (One walk where no link is on the way.)
    let chains = if given == real {
        vec![&real]
    } else {
        vec![&given, &real]
    };
    for chain in chains {
        let mut first = true;
        for d in chain.ancestors() {
            let Ok(m) = std::fs::metadata(d) else {
                first = false;
                continue;
            };
            let mode = m.mode();
            if m.uid() != owner && m.uid() != 0 {
                return Err(format!(
                    "the folder {} belongs to user {}, who could replace what is in it; keep the state file under folders of its owner's own (the default ~/.local/state/maar)",
                    d.display(),
                    name(m.uid())
                ));
            }
            // Group write is others' write unless the group is the owner's alone: a
            // private user group (umask 002), or a Kubernetes volume given the pod's
            // fsGroup (the kubelet makes it group-writable, 2775).
            let others = mode & 0o002 != 0 || (mode & 0o020 != 0 && !group_is_mine(m.gid(), owner));
            if others && (first || mode & 0o1000 == 0) {
                // (A sticky folder such as /tmp is shared by design: not to be closed.)
                let mend = if m.uid() == owner && mode & 0o1000 == 0 {
                    format!("chmod go-w {}, or", d.display())
                } else {
                    "keep it in".to_string()
                };
                return Err(if first {
                    format!(
                        "its folder {} may be written by other users (mode {:o}), who could plant a journal or a socket beside the state file{}; {mend} a folder only its owner can write (the default ~/.local/state/maar)",
                        d.display(),
                        mode & 0o7777,
                        if mode & 0o1000 != 0 { " (sticky or not)" } else { " or replace it" },
                    )
                } else {
                    format!(
                        "the folder {} above it may be written by other users (mode {:o}) and is not sticky: any of them could rename the folders below and put their own in place; keep the state file under folders only its owner (or root) can write",
                        d.display(),
                        mode & 0o7777
                    )
                });
            }
            first = false;
        }
    }
    Ok(())
}

/// Why a file that grants roles or names clusters (`what`: "roles file", "config
/// file") may not be trusted by the user `owner` (a uid) that reads it (`Err`, in
/// words): as a state file's folders are judged, anyone who could write it, or replace
/// it, could make themselves admin. The file (and a link to it) must belong to
/// `owner` or root and be writable by them alone (its group only where the group is
/// the owner's alone); each folder on its path, as given and as it really is, must
/// belong to `owner` or root and be writable by them alone, unless sticky (others
/// cannot replace a file of `owner`'s in a sticky folder).
pub fn file_trusted(path: &Path, owner: u32, what: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let name = crate::actor::user_name;
    let mine = |uid: u32| uid == owner || uid == 0;
    let shown = path.display();
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_symlink() && !mine(m.uid()) {
            return Err(format!(
                "the {what} {shown} is a link of user {}, who could point it at a file of theirs; name the file itself, or a link of your own",
                name(m.uid())
            ));
        }
    }
    let m = std::fs::metadata(path).map_err(|e| format!("the {what} {shown}: {e}"))?;
    if !mine(m.uid()) {
        return Err(format!(
            "the {what} {shown} belongs to user {}: maar takes it only from a file of its own user ({}) or root; copy it to a file of your own, or have root own it",
            name(m.uid()),
            name(owner)
        ));
    }
    let mode = m.mode();
    if mode & 0o002 != 0 || (mode & 0o020 != 0 && !group_is_mine(m.gid(), owner)) {
        return Err(format!(
            "the {what} {shown} may be written by other users (mode {:o}), who could give themselves any role; chmod go-w {shown}",
            mode & 0o7777
        ));
    }
    let given = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(path))
            .unwrap_or(path.to_path_buf())
    };
    let real = std::fs::canonicalize(path).unwrap_or(given.clone());
    for chain in [&given, &real] {
        for d in chain.ancestors().skip(1) {
            let Ok(l) = std::fs::symlink_metadata(d) else {
                continue;
            };
            if l.file_type().is_symlink() && !mine(l.uid()) {
                return Err(format!(
                    "the link {} on the {what}'s path belongs to user {}, who could point it elsewhere; give the path without it",
                    d.display(),
                    name(l.uid())
                ));
            }
            let Ok(m) = std::fs::metadata(d) else {
                continue;
            };
            let mode = m.mode();
            if !mine(m.uid()) {
                return Err(format!(
                    "the folder {} of the {what} {shown} belongs to user {}, who could replace the file; keep it in a folder of your own (~/.config/maar) or root's (/etc/maar)",
                    d.display(),
                    name(m.uid())
                ));
            }
            let others = mode & 0o002 != 0 || (mode & 0o020 != 0 && !group_is_mine(m.gid(), owner));
            if others && mode & 0o1000 == 0 {
                return Err(format!(
                    "the folder {} of the {what} {shown} may be written by other users (mode {:o}), who could replace the file; chmod go-w {}",
                    d.display(),
                    mode & 0o7777,
                    d.display()
                ));
            }
        }
    }
    Ok(())
}

/// Whether group `gid` holds no user but `me`: this user's primary group or one it
/// alone is in, with no other member listed (`/etc/group`) and no other user having it
/// as their primary group (`/etc/passwd`), or a group no user database knows (a
/// container's fsGroup).
pub(crate) fn group_is_mine(gid: u32, me: u32) -> bool {
    let my_name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(me))
        .ok()
        .flatten()
        .map(|u| u.name);
    let listed = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|g| g.mem)
        .unwrap_or_default();
    if listed.iter().any(|m| Some(m) != my_name.as_ref()) {
        return false;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    !passwd.lines().any(|l| {
        let f: Vec<&str> = l.split(':').collect();
        f.len() > 3
            && f[3].parse::<u32>() == Ok(gid)
            && f[2].parse::<u32>().is_ok_and(|uid| uid != me)
    })
}

impl Record {
    fn sql(&self, what: &'static str) -> impl Fn(rusqlite::Error) -> RecordError + '_ {
        move |source| classify(&self.path, what, source)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates a new record at `path` (its folder too). Refuses to touch an existing
    /// file, and a folder where another user could swap it ([`guard_write`]).
    pub fn create(path: &Path, meta: &Meta) -> Result<Record, RecordError> {
        let p = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Writable by its owner alone (0755 at most, whatever the umask: under
            // umask 002 it was 0775, and then refused as others' to write); others
            // may pass through it to reach the socket, as the roles file allows.
            std::os::unix::fs::DirBuilderExt::mode(
                std::fs::DirBuilder::new().recursive(true),
                0o755,
            )
            .create(dir)
            .map_err(|e| RecordError::Corrupt {
                path: p.clone(),
                why: format!("cannot create its folder: {e}"),
            })?;
        }
        guard_write(path)?;
        // Claim the name first: of two processes creating the same record, one wins
        // and the other is told a file is there.
        // Private to its owner: others reach it through the engine's socket (or read
        // it where its owner grants them read permission).
        match std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().write(true).create_new(true),
            0o600,
        )
        .open(path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(RecordError::Foreign {
                    path: p,
                    why: "a file is already there".into(),
                })
            }
            Err(e) => {
                return Err(RecordError::Corrupt {
                    path: p,
                    why: format!("cannot create it: {e}"),
                })
            }
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, "create", e))?;
        let mut r = Record {
            conn,
            path: path.to_path_buf(),
            token: None,
            identity: identity(path),
        };
        r.pragmas()?;
        let tx = r
            .conn
            .transaction_with_behavior(TransactionBehavior::Exclusive)
            .map_err(|e| classify(path, "create", e))?;
        tx.execute_batch(SCHEMA_V1)
            .and_then(|_| tx.execute_batch(MIGRATE_1_2))
            .and_then(|_| tx.execute_batch(MIGRATE_2_3))
            .and_then(|_| tx.pragma_update(None, "application_id", APPLICATION_ID))
            .and_then(|_| tx.pragma_update(None, "user_version", SCHEMA_VERSION))
            .map_err(|e| classify(path, "create", e))?;
        {
            let mut put = tx
                .prepare("INSERT INTO meta(key, value) VALUES (?1, ?2)")
                .map_err(|e| classify(path, "create", e))?;
            let mut kv = vec![
                ("app", "maar".to_string()),
                ("backend", meta.backend.clone()),
                ("cluster", meta.cluster.clone()),
                ("created", meta.created.clone()),
            ];
            if let Some(s) = &meta.scenario {
                kv.push(("scenario", s.clone()));
            }
            if let Some(s) = meta.seed {
                kv.push(("seed", s.to_string()));
            }
            for (k, v) in kv {
                put.execute(params![k, v])
                    .map_err(|e| classify(path, "create", e))?;
            }
        }
        tx.commit().map_err(|e| classify(path, "create", e))?;
        Ok(r)
    }

    /// Opens an existing record, checking that it is maar's and migrating an older
    /// schema.
    pub fn open(path: &Path) -> Result<Record, RecordError> {
        Record::open_as(path, false)
    }

    /// Opens an existing record to read only: nothing is written (not even the journal
    /// mode), so read permission is enough. An older schema is read as it is where it
    /// can be; a file that needs its owner first (a newer maar's) is refused.
    pub fn open_read_only(path: &Path) -> Result<Record, RecordError> {
        Record::open_as(path, true)
    }

    fn open_as(path: &Path, read_only: bool) -> Result<Record, RecordError> {
        let p = path.display().to_string();
        match std::fs::metadata(path) {
            Err(_) => return Err(RecordError::Missing { path: p }),
            Ok(m) if !m.is_file() => {
                return Err(RecordError::Foreign {
                    path: p,
                    why: "not a regular file".into(),
                })
            }
            Ok(_) => {}
        }
        if !read_only {
            guard_write(path)?;
        }
        let flags = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| classify(path, "open", e))?;
        let mut r = Record {
            conn,
            path: path.to_path_buf(),
            token: None,
            identity: identity(path),
        };
        // Identify before anything writes (the journal mode is a write).
        let app: i32 = r
            .conn
            .pragma_query_value(None, "application_id", |x| x.get(0))
            .map_err(|e| classify(path, "read", e))?;
        let version: i32 = r
            .conn
            .pragma_query_value(None, "user_version", |x| x.get(0))
            .map_err(|e| classify(path, "read", e))?;
        if app != APPLICATION_ID {
            return Err(RecordError::Foreign {
                path: p,
                why: if app == 0 && version == 0 {
                    "an SQLite file of another program".into()
                } else {
                    format!("application id {app:#x}")
                },
            });
        }
        if version > SCHEMA_VERSION {
            return Err(RecordError::Newer {
                path: p,
                found: version,
            });
        }
        if version < 1 {
            return Err(RecordError::Corrupt {
                path: p,
                why: format!("schema version {version}"),
            });
        }
        let app_meta: Option<String> = r
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'app'", [], |x| x.get(0))
            .optional()
            .map_err(|e| classify(path, "read", e))?;
        if app_meta.as_deref() != Some("maar") {
            return Err(RecordError::Corrupt {
                path: p,
                why: "its meta table does not name maar".into(),
            });
        }
        if read_only {
            r.conn
                .busy_timeout(Duration::from_secs(5))
                .map_err(r.sql("configure"))?;
            if version < SCHEMA_VERSION {
                return Err(RecordError::Os {
                    path: p,
                    what: "read",
                    why: format!(
                        "written by an older maar (schema {version}); its owner opens it once with this maar first"
                    ),
                });
            }
            return Ok(r);
        }
        r.pragmas()?;
        if version < SCHEMA_VERSION {
            // Nothing is written to a damaged file.
            r.check()?;
            r.migrate(version)?;
        }
        Ok(r)
    }

    /// Checks the file's structure (`PRAGMA quick_check`, a pass over the whole file):
    /// done before this process writes to it as its owner, and when the command line
    /// reads it with no maar running (`cli::Reader`), not on every read a running
    /// maar serves.
    pub fn check(&self) -> Result<(), RecordError> {
        let check: String = self
            .conn
            .query_row("PRAGMA quick_check", [], |x| x.get(0))
            .map_err(self.sql("check"))?;
        if check != "ok" {
            return Err(RecordError::Corrupt {
                path: self.path.display().to_string(),
                why: check,
            });
        }
        Ok(())
    }

    fn pragmas(&mut self) -> Result<(), RecordError> {
        self.conn
            .busy_timeout(Duration::from_secs(5))
            .map_err(self.sql("configure"))?;
        let _: String = self
            .conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |x| x.get(0))
            .map_err(self.sql("configure"))?;
        // Every acknowledged command survives a crash of the machine, not only of maar.
        self.conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(self.sql("configure"))?;
        // The write-ahead log is cut back to this after each checkpoint of it.
        self.conn
            .pragma_update(None, "journal_size_limit", 8i64 << 20)
            .map_err(self.sql("configure"))?;
        Ok(())
    }

    fn migrate(&mut self, from: i32) -> Result<(), RecordError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Exclusive)
            .map_err(|e| classify(&path, "migrate", e))?;
        if from < 2 {
            tx.execute_batch(MIGRATE_1_2)
                .map_err(|e| classify(&path, "migrate", e))?;
        }
        if from < 3 {
            tx.execute_batch(MIGRATE_2_3)
                .map_err(|e| classify(&path, "migrate", e))?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(|e| classify(&path, "migrate", e))?;
        tx.commit().map_err(|e| classify(&path, "migrate", e))?;
        Ok(())
    }

    pub fn meta(&self) -> Result<Meta, RecordError> {
        let get = |k: &str| -> Result<Option<String>, RecordError> {
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [k], |x| x.get(0))
                .optional()
                .map_err(|e| classify(&self.path, "read meta", e))
        };
        let seed = match get("seed")? {
            Some(s) => Some(s.parse().map_err(|_| RecordError::Corrupt {
                path: self.path.display().to_string(),
                why: format!("meta seed `{s}` is not a number"),
            })?),
            None => None,
        };
        Ok(Meta {
            backend: get("backend")?.unwrap_or_default(),
            cluster: get("cluster")?.unwrap_or_default(),
            scenario: get("scenario")?,
            seed,
            created: get("created")?.unwrap_or_default(),
        })
    }

    /// Writes a command, its result and the events not yet written, in one
    /// transaction; answers the inbox request it came from. Returns its sequence number.
    #[allow(clippy::too_many_arguments)]
    pub fn append_command(
        &mut self,
        at_s: u64,
        actor: &Actor,
        command: &Command,
        result: &Result<String, String>,
        request: Option<i64>,
        events: &[Event],
        object: Option<&str>,
    ) -> Result<i64, RecordError> {
        self.append_keyed(at_s, actor, command, result, request, None, events, object)
    }

    /// [`Record::append_command`] with the key its sender gave it: a second command
    /// with the same key is refused by the file itself (the engine answers it with the
    /// first one's answer, [`Record::answered`]).
    #[allow(clippy::too_many_arguments)]
    pub fn append_keyed(
        &mut self,
        at_s: u64,
        actor: &Actor,
        command: &Command,
        result: &Result<String, String>,
        request: Option<i64>,
        key: Option<&str>,
        events: &[Event],
        object: Option<&str>,
    ) -> Result<i64, RecordError> {
        let path = self.path.clone();
        let e = |what| {
            let path = path.clone();
            move |x| classify(&path, what, x)
        };
        let (action, named) = action_of(command);
        // The object as the cluster names it (job/PROJECT/NAME), when the engine knows.
        let object = object.map(str::to_string).unwrap_or(named);
        let json = serde_json::to_string(command).expect("commands serialise");
        let (res, msg) = match result {
            Ok(m) => ("ok", m.as_str()),
            Err(m) => ("refused", m.as_str()),
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e("write command"))?;
        fenced(&tx, &self.path, self.token)?;
        insert_events(&tx, events).map_err(e("write events"))?;
        tx.execute(
            "INSERT INTO commands(at_s, wall, actor, uid, origin, action, object, command, result, message, request, request_key)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                at_s as i64,
                now_rfc3339(),
                actor.user,
                actor.uid,
                actor.from,
                action,
                object,
                json,
                res,
                msg,
                request,
                key
            ],
        )
        .map_err(e("write command"))?;
        let seq = tx.last_insert_rowid();
        if let Some(id) = request {
            tx.execute(
                "UPDATE inbox SET state = 'done', seq = ?2, result = ?3, message = ?4 WHERE id = ?1",
                params![id, seq, res, msg],
            )
            .map_err(e("answer request"))?;
        }
        tx.commit().map_err(e("commit command"))?;
        Ok(seq)
    }

    /// Appends events (ignoring those already written).
    pub fn append_events(&mut self, events: &[Event]) -> Result<(), RecordError> {
        if events.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|x| classify(&path, "write events", x))?;
        fenced(&tx, &self.path, self.token)?;
        insert_events(&tx, events).map_err(|x| classify(&path, "write events", x))?;
        tx.commit().map_err(|x| classify(&path, "write events", x))
    }

    /// Forgets events from `seq` on (a restore rewinds to before them).
    pub fn drop_events_from(&mut self, seq: u64) -> Result<(), RecordError> {
        self.conn
            .execute("DELETE FROM events WHERE seq >= ?1", [seq as i64])
            .map(|_| ())
            .map_err(self.sql("rewind events"))
    }

    /// Writes a checkpoint (packed), keeping the newest few and, for looking back in
    /// time, the first of every simulated hour ([`HISTORY_EVERY_S`]) of the last
    /// [`HOURLY_FOR_S`], the first of every simulated day for [`DAILY_FOR_S`] before,
    /// and the first of every week before that: the file stays bounded however long the
    /// cluster runs (docs/state.md).
    pub fn checkpoint(
        &mut self,
        after_seq: i64,
        at_s: u64,
        core: &str,
        driver: &str,
    ) -> Result<(), RecordError> {
        self.checkpoint_packed(after_seq, at_s, pack(core), driver)
    }

    /// As [`Record::checkpoint`], of `core` at its time: its state packed as the core
    /// writes it ([`pack_written`]), so the whole text is never held.
    pub fn checkpoint_core(
        &mut self,
        after_seq: i64,
        core: &maar_scheduler::Core,
        driver: &str,
    ) -> Result<(), RecordError> {
        let packed = pack_written(|w| core.write_checkpoint(false, w))
            .expect("state serialises into memory");
        self.checkpoint_packed(after_seq, core.now(), packed, driver)
    }

    /// As [`Record::checkpoint`], the core given packed already ([`pack_written`]).
    pub fn checkpoint_packed(
        &mut self,
        after_seq: i64,
        at_s: u64,
        core: Vec<u8>,
        driver: &str,
    ) -> Result<(), RecordError> {
        let path = self.path.clone();
        let e = |x| classify(&path, "write checkpoint", x);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        fenced(&tx, &self.path, self.token)?;
        tx.execute(
            "INSERT INTO checkpoints(after_seq, at_s, wall, core, driver) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![after_seq, at_s as i64, now_rfc3339(), core, pack(driver)],
        )
        .map_err(e)?;
        tx.execute(
            "DELETE FROM checkpoints WHERE id NOT IN (SELECT id FROM checkpoints ORDER BY id DESC LIMIT 3)
               AND id NOT IN (SELECT MIN(id) FROM checkpoints WHERE at_s >= ?1 - ?2 GROUP BY at_s / ?3)
               AND id NOT IN (SELECT MIN(id) FROM checkpoints WHERE at_s >= ?1 - ?5 GROUP BY at_s / ?4)
               AND id NOT IN (SELECT MIN(id) FROM checkpoints GROUP BY at_s / ?6)",
            params![
                at_s as i64,
                HOURLY_FOR_S as i64,
                HISTORY_EVERY_S as i64,
                DAILY_EVERY_S as i64,
                DAILY_FOR_S as i64,
                WEEKLY_EVERY_S as i64
            ],
        )
        .map_err(e)?;
        tx.execute(
            "DELETE FROM events WHERE seq < (SELECT MAX(seq) FROM events) - ?1",
            [KEEP_EVENTS],
        )
        .map_err(e)?;
        tx.commit().map_err(e)
    }

    pub fn latest_checkpoint(&self) -> Result<Option<CheckpointRow>, RecordError> {
        self.checkpoint_before(None)
    }

    /// The newest checkpoint at or before cluster time `t` (the newest of all when
    /// `None`).
    pub fn checkpoint_before(&self, t: Option<u64>) -> Result<Option<CheckpointRow>, RecordError> {
        self.conn
            .query_row(
                "SELECT id, after_seq, at_s, wall, core, driver FROM checkpoints
                 WHERE at_s <= ?1 ORDER BY id DESC LIMIT 1",
                [t.map(|t| t as i64).unwrap_or(i64::MAX)],
                |x| {
                    Ok((
                        x.get::<_, i64>(0)?,
                        x.get::<_, i64>(1)?,
                        x.get::<_, i64>(2)?,
                        x.get::<_, String>(3)?,
                        x.get::<_, rusqlite::types::Value>(4)?,
                        x.get::<_, rusqlite::types::Value>(5)?,
                    ))
                },
            )
            .optional()
            .map_err(self.sql("read checkpoint"))?
            .map(|(id, after_seq, at, wall, core, driver)| {
                let bad = |why| RecordError::Corrupt {
                    path: self.path.display().to_string(),
                    why: format!("checkpoint {id}: {why}"),
                };
                Ok(CheckpointRow {
                    id,
                    after_seq,
                    at_s: at.max(0) as u64,
                    wall,
                    core: unpack(core).map_err(bad)?,
                    driver: unpack(driver).map_err(bad)?,
                })
            })
            .transpose()
    }

    /// The newest checkpoint's place: the last command it holds and its cluster time
    /// (without reading the checkpoint itself).
    pub fn newest_checkpoint_mark(&self) -> Result<Option<(i64, u64)>, RecordError> {
        self.conn
            .query_row(
                "SELECT after_seq, at_s FROM checkpoints ORDER BY id DESC LIMIT 1",
                [],
                |x| Ok((x.get::<_, i64>(0)?, x.get::<_, i64>(1)?.max(0) as u64)),
            )
            .optional()
            .map_err(self.sql("read checkpoint"))
    }

    /// Cluster times of the checkpoints kept, oldest first (what time travel can
    /// start from).
    pub fn checkpoint_times(&self) -> Result<Vec<u64>, RecordError> {
        let mut st = self
            .conn
            .prepare("SELECT at_s FROM checkpoints ORDER BY id")
            .map_err(self.sql("read checkpoints"))?;
        let v = st
            .query_map([], |x| x.get::<_, i64>(0))
            .map_err(self.sql("read checkpoints"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.sql("read checkpoints"))?;
        Ok(v.into_iter().map(|t| t.max(0) as u64).collect())
    }

    /// The newest cluster time the record knows (its newest checkpoint, command or
    /// event).
    pub fn latest_time(&self) -> Result<u64, RecordError> {
        self.conn
            .query_row(
                "SELECT MAX(COALESCE((SELECT MAX(at_s) FROM checkpoints), 0),
                            COALESCE((SELECT MAX(at_s) FROM commands), 0),
                            COALESCE((SELECT MAX(at_s) FROM events), 0))",
                [],
                |x| x.get::<_, i64>(0),
            )
            .map(|t| t.max(0) as u64)
            .map_err(self.sql("read the newest time"))
    }

    /// The sequence number after the newest event recorded (0 when none).
    pub fn next_event_seq(&self) -> Result<u64, RecordError> {
        self.conn
            .query_row("SELECT COALESCE(MAX(seq) + 1, 0) FROM events", [], |x| {
                x.get::<_, i64>(0)
            })
            .map(|s| s.max(0) as u64)
            .map_err(self.sql("read events"))
    }

    /// Sequence number of the newest command (0 when none).
    pub fn last_seq(&self) -> Result<i64, RecordError> {
        self.conn
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM commands", [], |x| {
                x.get(0)
            })
            .map_err(self.sql("read commands"))
    }

    fn rows(
        &self,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<CommandRow>, RecordError> {
        let path = &self.path;
        let mut st = self.conn.prepare(sql).map_err(self.sql("read commands"))?;
        let it = st
            .query_map(args, |x| {
                Ok((
                    x.get::<_, i64>(0)?,
                    x.get::<_, i64>(1)?,
                    x.get::<_, String>(2)?,
                    x.get::<_, String>(3)?,
                    x.get::<_, Option<u32>>(4)?,
                    x.get::<_, Option<String>>(5)?,
                    x.get::<_, String>(6)?,
                    x.get::<_, String>(7)?,
                    x.get::<_, String>(8)?,
                    x.get::<_, String>(9)?,
                    x.get::<_, String>(10)?,
                    x.get::<_, Option<i64>>(11)?,
                    x.get::<_, Option<String>>(12)?,
                ))
            })
            .map_err(self.sql("read commands"))?;
        let mut out = Vec::new();
        for r in it {
            let (seq, at, wall, user, uid, from, action, object, cmd, res, msg, request, key) =
                r.map_err(self.sql("read commands"))?;
            let command: Command =
                serde_json::from_str(&cmd).map_err(|e| RecordError::Corrupt {
                    path: path.display().to_string(),
                    why: format!("command #{seq} cannot be read: {e}"),
                })?;
            out.push(CommandRow {
                seq,
                at_s: at.max(0) as u64,
                wall,
                actor: Actor { user, uid, from },
                action,
                object,
                command,
                result: if res == "ok" { Ok(msg) } else { Err(msg) },
                request,
                key,
            });
        }
        Ok(out)
    }

    const COLUMNS: &'static str =
        "seq, at_s, wall, actor, uid, origin, action, object, command, result, message, request, request_key";

    /// The command recorded under `key`, if one was (its sender asks again after a lost
    /// answer: the first answer, never a second application).
    pub fn answered(&self, key: &str) -> Result<Option<CommandRow>, RecordError> {
        Ok(self
            .rows(
                &format!(
                    "SELECT {} FROM commands WHERE request_key = ?1",
                    Self::COLUMNS
                ),
                &[&key],
            )?
            .into_iter()
            .next())
    }

    /// Runs `f` on one snapshot of the file (one read transaction): what it reads is
    /// the file at one moment, whatever a running maar writes meanwhile.
    pub fn snapshot<T, E: From<RecordError>>(
        &mut self,
        f: impl FnOnce(&Record) -> Result<T, E>,
    ) -> Result<T, E> {
        self.conn
            .execute_batch("BEGIN DEFERRED")
            .map_err(self.sql("begin a read"))?;
        // The snapshot starts at the first read.
        let started = self
            .conn
            .query_row("SELECT COUNT(*) FROM meta", [], |x| x.get::<_, i64>(0))
            .map_err(self.sql("begin a read"));
        let out = started.map_err(Into::into).and_then(|_| f(self));
        let _ = self.conn.execute_batch("COMMIT");
        out
    }

    /// Whether the file this record opened is still the one at its path: a state file
    /// deleted or replaced under a running maar is noticed (its commands would be
    /// acknowledged and lost).
    pub fn still_there(&self) -> Result<(), RecordError> {
        let why = match (identity(&self.path), self.identity) {
            (None, _) => "the state file was deleted under this maar",
            (Some(now), Some(was)) if now != was => {
                "the state file was replaced under this maar (another file is at its path)"
            }
            _ => return Ok(()),
        };
        Err(RecordError::Gone {
            path: self.path.display().to_string(),
            why: why.into(),
        })
    }

    /// Commands after `seq`, in order.
    pub fn commands_after(&self, seq: i64) -> Result<Vec<CommandRow>, RecordError> {
        self.rows(
            &format!(
                "SELECT {} FROM commands WHERE seq > ?1 ORDER BY seq",
                Self::COLUMNS
            ),
            &[&seq],
        )
    }

    /// The commands applied after `seq` (those refused changed nothing, so a reader
    /// rebuilding the cluster needs none of them: a flood of refused commands cannot
    /// make its answer through the socket too long).
    pub fn applied_after(&self, seq: i64) -> Result<Vec<CommandRow>, RecordError> {
        self.rows(
            &format!(
                "SELECT {} FROM commands WHERE seq > ?1 AND result = 'ok' ORDER BY seq",
                Self::COLUMNS
            ),
            &[&seq],
        )
    }

    /// Commands for `maar audit`, oldest first.
    pub fn audit(&self, f: &AuditFilter) -> Result<Vec<CommandRow>, RecordError> {
        let mut sql = format!("SELECT {} FROM commands WHERE 1 = 1", Self::COLUMNS);
        let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
        if let Some(a) = &f.actor {
            args.push(Box::new(a.clone()));
            sql.push_str(&format!(" AND actor = ?{}", args.len()));
        }
        if let Some(a) = &f.action {
            args.push(Box::new(a.replace('-', "_")));
            sql.push_str(&format!(" AND action = ?{}", args.len()));
        }
        if let Some(o) = &f.object {
            args.push(Box::new(format!("%{o}%")));
            sql.push_str(&format!(" AND object LIKE ?{}", args.len()));
        }
        if let Some(s) = &f.since {
            args.push(Box::new(s.clone()));
            sql.push_str(&format!(" AND wall >= ?{}", args.len()));
        }
        if let Some(u) = &f.until {
            args.push(Box::new(u.clone()));
            sql.push_str(&format!(" AND wall <= ?{}", args.len()));
        }
        sql.push_str(" ORDER BY seq");
        let refs: Vec<&dyn rusqlite::ToSql> = args.iter().map(|b| b.as_ref()).collect();
        let mut rows = self.rows(&sql, &refs)?;
        if let Some(n) = f.limit {
            let skip = rows.len().saturating_sub(n);
            rows.drain(..skip);
        }
        Ok(rows)
    }

    /// The newest `limit` events with `seq < before`, oldest first.
    pub fn events_before(&self, before: u64, limit: usize) -> Result<Vec<Event>, RecordError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT seq, at_s, severity, reason, object, message FROM events
                 WHERE seq < ?1 ORDER BY seq DESC LIMIT ?2",
            )
            .map_err(self.sql("read events"))?;
        let it = st
            .query_map(params![before as i64, limit as i64], |x| {
                Ok(Event {
                    seq: x.get::<_, i64>(0)? as u64,
                    time: x.get::<_, i64>(1)? as u64,
                    severity: Severity::parse(&x.get::<_, String>(2)?).unwrap_or(Severity::Normal),
                    reason: x.get::<_, String>(3)?.into(),
                    object: x.get(4)?,
                    message: x.get(5)?,
                    cluster: String::new(),
                })
            })
            .map_err(self.sql("read events"))?;
        let mut v: Vec<Event> = it
            .collect::<Result<_, _>>()
            .map_err(self.sql("read events"))?;
        v.reverse();
        Ok(v)
    }

    // ----- the lease: who runs the engine -------------------------------------------

    /// The live holder of the lease, if any (a stale lease or a dead pid on this host
    /// does not count).
    pub fn holder(&self) -> Result<Option<Holder>, RecordError> {
        let row: Option<(i64, String, String, i64, String)> = self
            .conn
            .query_row(
                "SELECT pid, host, since, heartbeat_ms, kind FROM lease WHERE id = 1",
                [],
                |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?, x.get(4)?)),
            )
            .optional()
            .map_err(self.sql("read lease"))?;
        let Some((pid, host, since, beat, kind)) = row else {
            return Ok(None);
        };
        Ok(lease_live(pid, &host, beat).then_some(Holder {
            pid,
            host,
            since,
            kind,
        }))
    }

    /// Takes the lease for this process as an engine.
    pub fn acquire(&mut self) -> Result<(), RecordError> {
        self.acquire_as(LeaseKind::Engine)
    }

    /// Takes the lease for this process, unless a live process holds it. The check
    /// and the take are one write transaction, so of two processes only one wins. The
    /// lease gets the next fencing token: every later write of this process checks it.
    pub fn acquire_as(&mut self, kind: LeaseKind) -> Result<(), RecordError> {
        self.check()?;
        let path = self.path.clone();
        let e = |x| classify(&path, "take the lease", x);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(e)?;
        let row: Option<(i64, String, String, i64)> = tx
            .query_row(
                "SELECT pid, host, since, heartbeat_ms FROM lease WHERE id = 1",
                [],
                |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?)),
            )
            .optional()
            .map_err(e)?;
        if let Some((pid, host, since, beat)) = row {
            let me = pid == std::process::id() as i64 && host == hostname();
            if !me && lease_live(pid, &host, beat) {
                return Err(RecordError::InUse {
                    path: path.display().to_string(),
                    pid,
                    host,
                    since,
                });
            }
        }
        // Tokens only grow, across releases too (kept in meta).
        let last: i64 = tx
            .query_row(
                "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'fence'",
                [],
                |x| x.get(0),
            )
            .optional()
            .map_err(e)?
            .unwrap_or(0);
        let token = last + 1;
        tx.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('fence', ?1)",
            [token.to_string()],
        )
        .map_err(e)?;
        tx.execute(
            "INSERT OR REPLACE INTO lease(id, pid, host, since, heartbeat_ms, token, kind) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)",
            params![std::process::id() as i64, hostname(), now_rfc3339(), now_ms(), token, kind.name()],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        self.token = Some(token);
        Ok(())
    }

    /// Whether this process took the lease (and has not let it go): a later
    /// [`Record::heartbeat`] says whether it still holds it.
    pub fn holds_lease(&self) -> bool {
        self.token.is_some()
    }

    /// Renews this process's lease; false when another process has taken it (this
    /// one was stopped or stalled past the lease's life).
    pub fn heartbeat(&mut self) -> Result<bool, RecordError> {
        self.conn
            .execute(
                "UPDATE lease SET heartbeat_ms = ?1 WHERE id = 1 AND pid = ?2 AND host = ?3 AND token = ?4",
                params![
                    now_ms(),
                    std::process::id() as i64,
                    hostname(),
                    self.token.unwrap_or(-1)
                ],
            )
            .map(|n| n == 1)
            .map_err(self.sql("renew the lease"))
    }

    /// Lets the lease go, and leaves the file in rollback-journal mode so that a reader
    /// with only read permission can open it while no maar runs.
    pub fn release(&mut self) -> Result<(), RecordError> {
        let mine = self.token.take().unwrap_or(-1);
        self.conn
            .execute(
                "DELETE FROM lease WHERE id = 1 AND pid = ?1 AND token = ?2",
                params![std::process::id() as i64, mine],
            )
            .map(|_| ())
            .map_err(self.sql("release the lease"))?;
        // Fails harmlessly while another connection reads; WAL comes back at the next
        // open.
        let _ = self
            .conn
            .pragma_update_and_check(None, "journal_mode", "DELETE", |x| x.get::<_, String>(0));
        Ok(())
    }

    // ----- fresh checkpoints on request ---------------------------------------------

    /// Asks the running maar for a checkpoint now (a reader wants the newest state).
    pub fn want_checkpoint(&mut self) -> Result<(), RecordError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('checkpoint_wanted', ?1)",
                [now_ms().to_string()],
            )
            .map(|_| ())
            .map_err(self.sql("ask for a checkpoint"))
    }

    /// When a checkpoint was last asked for (unix ms), if ever.
    pub fn checkpoint_wanted(&self) -> Result<Option<i64>, RecordError> {
        let v: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'checkpoint_wanted'",
                [],
                |x| x.get(0),
            )
            .optional()
            .map_err(self.sql("read meta"))?;
        Ok(v.and_then(|v| v.parse().ok()))
    }

    /// Id of the newest checkpoint (0 when none).
    pub fn checkpoint_id(&self) -> Result<i64, RecordError> {
        self.conn
            .query_row("SELECT COALESCE(MAX(id), 0) FROM checkpoints", [], |x| {
                x.get(0)
            })
            .map_err(self.sql("read checkpoints"))
    }

    // ----- the inbox: commands from other processes --------------------------------

    pub fn inbox_push(&mut self, actor: &Actor, command: &Command) -> Result<i64, RecordError> {
        let json = serde_json::to_string(command).expect("commands serialise");
        self.conn
            .execute(
                "INSERT INTO inbox(wall, actor, uid, origin, command) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![now_rfc3339(), actor.user, actor.uid, actor.from, json],
            )
            .map_err(self.sql("write request"))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Requests not answered yet, oldest first.
    pub fn inbox_new(&self) -> Result<Vec<InboxRow>, RecordError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT id, actor, uid, origin, command FROM inbox WHERE state = 'new' ORDER BY id",
            )
            .map_err(self.sql("read requests"))?;
        let it = st
            .query_map([], |x| {
                Ok((
                    x.get::<_, i64>(0)?,
                    x.get::<_, String>(1)?,
                    x.get::<_, Option<u32>>(2)?,
                    x.get::<_, Option<String>>(3)?,
                    x.get::<_, String>(4)?,
                ))
            })
            .map_err(self.sql("read requests"))?;
        let mut out = Vec::new();
        for r in it {
            let (id, user, uid, from, cmd) = r.map_err(self.sql("read requests"))?;
            match serde_json::from_str::<Command>(&cmd) {
                Ok(command) => out.push(InboxRow {
                    id,
                    actor: Actor { user, uid, from },
                    command,
                }),
                Err(e) => {
                    // Answer it as refused so that nobody waits for it forever.
                    self.conn
                        .execute(
                            "UPDATE inbox SET state = 'done', result = 'refused', message = ?2 WHERE id = ?1",
                            params![id, format!("unreadable request: {e}")],
                        )
                        .map_err(self.sql("answer request"))?;
                }
            }
        }
        Ok(out)
    }

    /// The answer to request `id`, once there is one.
    pub fn inbox_answer(&self, id: i64) -> Result<Option<InboxAnswer>, RecordError> {
        let row: Option<AnswerRow> = self
            .conn
            .query_row(
                "SELECT state, seq, result, message FROM inbox WHERE id = ?1",
                [id],
                |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?)),
            )
            .optional()
            .map_err(self.sql("read request"))?;
        Ok(match row {
            Some((state, seq, res, msg)) if state == "done" => {
                let msg = msg.unwrap_or_default();
                Some(InboxAnswer {
                    seq,
                    result: if res.as_deref() == Some("ok") {
                        Ok(msg)
                    } else {
                        Err(msg)
                    },
                })
            }
            _ => None,
        })
    }

    /// How many commands there are.
    pub fn command_count(&self) -> Result<i64, RecordError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM commands", [], |x| x.get(0))
            .map_err(self.sql("count commands"))
    }
}

/// The fencing check of a write transaction: this process still holds the lease it
/// took (its token is the lease's). A process that holds none (`token` None: a reader,
/// a test) is not fenced.
fn fenced(tx: &rusqlite::Transaction, path: &Path, token: Option<i64>) -> Result<(), RecordError> {
    let Some(mine) = token else { return Ok(()) };
    let now: Option<(i64, i64, String)> = tx
        .query_row("SELECT token, pid, host FROM lease WHERE id = 1", [], |x| {
            Ok((x.get(0)?, x.get(1)?, x.get(2)?))
        })
        .optional()
        .map_err(|e| classify(path, "check the lease", e))?;
    match now {
        Some((t, _, _)) if t == mine => Ok(()),
        Some((_, pid, host)) => Err(RecordError::LeaseLost {
            path: path.display().to_string(),
            why: format!("pid {pid} on {host} holds it now"),
        }),
        None => Err(RecordError::LeaseLost {
            path: path.display().to_string(),
            why: "its lease was let go".into(),
        }),
    }
}

fn insert_events(tx: &rusqlite::Transaction, events: &[Event]) -> rusqlite::Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT OR REPLACE INTO events(seq, at_s, severity, reason, object, message) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for e in events {
        st.execute(params![
            e.seq as i64,
            e.time as i64,
            e.severity.name(),
            e.reason.as_ref(),
            e.object,
            e.message
        ])?;
    }
    Ok(())
}

/// Names a failure, telling a damaged or foreign file apart from other errors.
fn classify(path: &Path, what: &'static str, e: rusqlite::Error) -> RecordError {
    use rusqlite::ffi::ErrorCode;
    let p = path.display().to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => RecordError::Foreign {
            path: p,
            why: "not an SQLite database".into(),
        },
        Some(ErrorCode::DatabaseCorrupt) => RecordError::Corrupt {
            path: p,
            why: e.to_string(),
        },
        // SQLite says "disk I/O error" or "database or disk is full": name the cause
        // when it is the filesystem's free space.
        Some(ErrorCode::DiskFull) | Some(ErrorCode::SystemIoFailure)
            if free_bytes(path).is_some_and(|b| b < 1 << 20) =>
        {
            RecordError::Os {
                path: p,
                what,
                why: format!(
                    "No space left on device ({} bytes free on its filesystem)",
                    free_bytes(path).unwrap_or(0)
                ),
            }
        }
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
            RecordError::Locked { path: p, what }
        }
        Some(ErrorCode::ReadOnly) => RecordError::Os {
            path: p,
            what,
            why: "this maar may only read the state file (its owner or a running maar writes it)"
                .into(),
        },
        // Another user's file this user may not read: say whose, and the ways in
        // (SQLite says only "unable to open database file").
        Some(ErrorCode::CannotOpen)
            if std::fs::File::open(path)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied) =>
        {
            use std::os::unix::fs::MetadataExt;
            let owner = std::fs::metadata(path)
                .map(|m| crate::actor::user_name(m.uid()))
                .unwrap_or_else(|_| "another user".into());
            RecordError::Os {
                path: p,
                what,
                why: format!(
                    "this user may not read it (it is {owner}'s); while {owner}'s maar runs on it, commands and reads with --state reach that maar; with none running, {owner} may share it for reading (chmod g+r or o+r)"
                ),
            }
        }
        _ => RecordError::Sql {
            path: p,
            what,
            source: e,
        },
    }
}

/// Bytes free for unprivileged writes on the filesystem of `path` (its folder when it
/// does not exist yet).
fn free_bytes(path: &Path) -> Option<u64> {
    let at = if path.exists() {
        path.to_path_buf()
    } else {
        path.parent()?.to_path_buf()
    };
    let v = nix::sys::statvfs::statvfs(&at).ok()?;
    Some(v.blocks_available() as u64 * v.fragment_size() as u64)
}

pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether a lease is held: renewed lately, and (on this host) by a living process.
fn lease_live(pid: i64, host: &str, heartbeat_ms: i64) -> bool {
    let fresh = now_ms() - heartbeat_ms < LEASE_STALE.as_millis() as i64;
    fresh && (host != hostname() || pid_alive(pid))
}

fn pid_alive(pid: i64) -> bool {
    let Ok(p) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

/// The default state file of a cluster: `$XDG_STATE_HOME/maar/<cluster>.db`
/// (`~/.local/state/maar/<cluster>.db` when unset).
pub fn default_path(cluster: &str) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".local").join("state")
        });
    let safe: String = cluster
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    base.join("maar").join(format!("{safe}.db"))
}
