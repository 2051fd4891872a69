//! Backends: how a cluster is set up for the engine, fresh or from its record.
//!
//! The demo (the simulation of a scenario), and the live backends of
//! `crate::backends` (local mode, Kubernetes), each from its crate: opened fresh or
//! continued (`open_live`), restored from their record with no world attached.

use std::path::Path;

use maar_demo::{Scenario, Sim};
use maar_scheduler::{ClusterState, Core, Driver};

use crate::record::{History, Meta, Record, RecordError};

/// A cluster ready for an engine: the core, its driver, and where the record stands.
pub struct Loaded {
    pub core: Core,
    pub driver: Box<dyn Driver>,
    pub meta: Meta,
    /// The newest command already reflected in `core`.
    pub after_seq: i64,
    /// Commands replayed on top of the checkpoint.
    pub replayed: usize,
    /// Something the operator should be told when it opens (an earlier demo set aside).
    pub note: Option<String>,
    /// Read from the world just now (`kit::Opened::fresh`): no checkpoint holds it yet,
    /// even one that names the same command and time.
    pub fresh: bool,
}

impl Loaded {
    /// `core` and `driver` as a cluster not recorded (nothing replayed, no note).
    pub fn new(core: Core, driver: Box<dyn Driver>, meta: Meta) -> Loaded {
        Loaded {
            core,
            driver,
            meta,
            after_seq: 0,
            replayed: 0,
            note: None,
            fresh: false,
        }
    }
}

/// Why a recorded cluster could not be brought back.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("{path}: {why}")]
    Content { path: String, why: String },
}

fn content(path: &Path, why: impl Into<String>) -> LoadError {
    LoadError::Content {
        path: path.display().to_string(),
        why: why.into(),
    }
}

/// The meta of a fresh demo record.
pub fn demo_meta(scenario_text: &str, sc: &Scenario, seed: u64) -> Meta {
    Meta {
        backend: "demo".into(),
        cluster: sc.name.clone(),
        scenario: Some(scenario_text.to_string()),
        seed: Some(seed),
        created: crate::record::now_rfc3339(),
    }
}

/// Earlier demos' state files kept beside the current one.
pub const KEEP_DEMOS: usize = 5;

/// Starts a fresh demo: the core and simulation at time 0, settled (arrivals and the
/// first cycle), recorded at `path` when given. Earlier demo records there are kept as
/// `<path>.prev` (the last), `.prev.2`, ... (the newest five); anything else there is
/// refused and left untouched.
pub fn fresh_demo(
    path: Option<&Path>,
    scenario_text: &str,
    sc: Scenario,
    seed: Option<u64>,
) -> Result<(Loaded, Option<Record>), LoadError> {
    let mut note = None;
    let record = match path {
        Some(p) => {
            if p.exists() {
                // Only an earlier demo's record, not in use, may be set aside.
                let old = Record::open(p)?;
                if let Some(h) = old.holder()? {
                    return Err(RecordError::InUse {
                        path: p.display().to_string(),
                        pid: h.pid,
                        host: h.host,
                        since: h.since,
                    }
                    .into());
                }
                let meta = old.meta()?;
                if meta.backend != "demo" {
                    return Err(content(
                        p,
                        format!(
                            "holds a {} cluster, not a demo; give another --state",
                            meta.backend
                        ),
                    ));
                }
                drop(old);
                // Earlier demos are kept: <name>.db.prev (the last), .prev.2, ...
                // .prev.5 (the oldest is dropped).
                let prev_n = |n: usize| {
                    if n == 1 {
                        p.with_extension("db.prev")
                    } else {
                        p.with_extension(format!("db.prev.{n}"))
                    }
                };
                let mv = |from: &Path, to: &Path| -> Result<(), LoadError> {
                    for suffix in ["", "-wal", "-shm"] {
                        let f = format!("{}{suffix}", from.display());
                        let t = format!("{}{suffix}", to.display());
                        let _ = std::fs::remove_file(&t);
                        if Path::new(&f).exists() {
                            std::fs::rename(&f, &t).map_err(|e| {
                                content(p, format!("cannot set the old record aside: {e}"))
                            })?;
                        }
                    }
                    Ok(())
                };
                for n in (1..KEEP_DEMOS).rev() {
                    if prev_n(n).exists() {
                        mv(&prev_n(n), &prev_n(n + 1))?;
                    }
                }
                mv(p, &prev_n(1))?;
                note = Some(format!(
                    "a fresh demo; the last one is kept as {} (`maar demo --resume` continues a demo instead)",
                    prev_n(1).display()
                ));
            }
            let seed_used = seed.unwrap_or(sc.seed);
            Some(Record::create(
                p,
                &demo_meta(scenario_text, &sc, seed_used),
            )?)
        }
        None => None,
    };
    let (mut sim, cluster) =
        Sim::new(sc.clone(), seed).map_err(|e| content(Path::new("scenario"), e.to_string()))?;
    let mut core = Core::new(cluster);
    let meta = demo_meta(scenario_text, &sc, sim.seed());
    // Settle time 0 (arrivals, the first cycle) so the first snapshot is true.
    let events = sim.run_until(&mut core, 0);
    let mut record = record;
    if let Some(r) = &mut record {
        r.append_events(&events)?;
    }
    Ok((
        Loaded {
            core,
            driver: Box::new(sim),
            meta,
            after_seq: 0,
            replayed: 0,
            note,
            fresh: false,
        },
        record,
    ))
}

/// Brings a recorded cluster back: the newest checkpoint and the commands after it;
/// with `from_scratch`, every command from the start instead.
pub fn restore(record: &dyn History, from_scratch: bool) -> Result<Loaded, LoadError> {
    restore_until(record, from_scratch, None)
}

/// The recorded cluster as it was at cluster time `t` (time travel): the newest
/// checkpoint at or before `t`, the commands given up to `t`, and the simulation run on
/// to `t`. A time after the newest the record knows is refused.
pub fn restore_at(record: &dyn History, t: u64) -> Result<Loaded, LoadError> {
    let newest = record.latest_time()?;
    if t > newest {
        return Err(content(
            record.path(),
            format!(
                "{} is after the newest moment recorded ({}); the past only",
                maar_scheduler::quantity::fmt_duration(t),
                maar_scheduler::quantity::fmt_duration(newest)
            ),
        ));
    }
    restore_until(record, false, Some(t))
}

fn restore_until(
    record: &dyn History,
    from_scratch: bool,
    until: Option<u64>,
) -> Result<Loaded, LoadError> {
    let path = record.path();
    let meta = record.meta()?;
    if let Some(mut offline) = crate::backends::offline(&meta.backend) {
        return restore_offline(record, meta, until, &mut offline);
    }
    if meta.backend != "demo" {
        return Err(content(
            path,
            format!("a {} cluster cannot be restored by this maar", meta.backend),
        ));
    }
    let text = meta
        .scenario
        .clone()
        .ok_or_else(|| content(path, "the demo's scenario is missing from the record"))?;
    let file = format!("{} (recorded scenario)", path.display());
    let sc = crate::load::parse_scenario(&file, &text)
        .map_err(|e| content(path, format!("recorded scenario: {e}")))?;
    let checkpoint = if from_scratch {
        None
    } else {
        record.checkpoint_before(until)?
    };
    let (mut core, mut driver, after_seq) = match checkpoint {
        Some(cp) => {
            let core = core_at(record, &cp)?;
            let driver_state: serde_json::Value = serde_json::from_str(&cp.driver)
                .map_err(|e| content(path, format!("checkpoint {}: {e}", cp.id)))?;
            let sim = Sim::restore(sc, driver_state)
                .map_err(|e| content(path, format!("checkpoint {}: {e}", cp.id)))?;
            (core, sim, cp.after_seq)
        }
        None => {
            let (mut sim, cluster) = Sim::new(sc, meta.seed)
                .map_err(|e| content(path, format!("recorded scenario: {e}")))?;
            let mut core = Core::new(cluster);
            sim.run_until_into(&mut core, 0, &mut |_| {});
            (core, sim, 0)
        }
    };
    let (last, replayed) =
        replay_after(record, &mut core, after_seq, until, Some(path), &mut driver)?;
    Ok(Loaded {
        core,
        driver: Box::new(driver),
        meta,
        after_seq: last,
        replayed,
        note: None,
        fresh: false,
    })
}

/// The core of a checkpoint, its event window filled from the record when the
/// checkpoint was written without it.
fn core_at(record: &dyn History, cp: &crate::record::CheckpointRow) -> Result<Core, LoadError> {
    let path = record.path();
    let bad = |e: String| content(path, format!("checkpoint {}: {e}", cp.id));
    let mut st = ClusterState::from_json(&cp.core).map_err(bad)?;
    if st.events.is_empty() {
        st.events = record.events_before(st.next_event, st.config.event_window)?;
    }
    Core::restore(st).map_err(|e| bad(e.to_string()))
}

/// Replays the recorded commands after `after_seq` (those accepted when recorded), the
/// driver advanced to each one's time, then to `until`. With `strict` (the record's
/// path), a command accepted when recorded but refused now is an error naming it.
/// Returns the last sequence number read and how many were applied.
fn replay_after(
    record: &dyn History,
    core: &mut Core,
    after_seq: i64,
    until: Option<u64>,
    strict: Option<&Path>,
    driver: &mut dyn maar_scheduler::input::Driver,
) -> Result<(i64, usize), LoadError> {
    let mut last = after_seq;
    let mut replayed = 0;
    for row in record.commands_after(after_seq)? {
        if until.is_some_and(|t| row.at_s > t) {
            break;
        }
        last = row.seq;
        if row.result.is_err() {
            continue;
        }
        if row.at_s > core.now() {
            driver.advance(core, row.at_s);
        }
        let out = driver.command(core, row.actor.clone(), row.command.clone());
        if let (Some(path), Err(e)) = (strict, &out.result) {
            return Err(content(
                path,
                format!(
                    "command #{} ({}) was accepted when recorded but is refused on replay: {e}",
                    row.seq, row.action
                ),
            ));
        }
        replayed += 1;
    }
    if let Some(t) = until {
        if t > core.now() {
            driver.advance(core, t);
        }
    }
    Ok((last, replayed))
}

/// A local or Kubernetes cluster from its record: the newest checkpoint (at or before
/// `until`) and the commands after it, applied with no world attached (`driver`
/// schedules and starts nothing). `maar local` / `maar kube` attach the world again.
fn restore_offline<D: Driver + Clone + 'static>(
    record: &dyn History,
    meta: Meta,
    until: Option<u64>,
    driver: &mut D,
) -> Result<Loaded, LoadError> {
    let path = record.path();
    let cp = record.checkpoint_before(until)?.ok_or_else(|| {
        content(
            path,
            format!(
                "holds a {} cluster without a checkpoint yet (it was never run long enough to write one)",
                meta.backend
            ),
        )
    })?;
    let mut core = core_at(record, &cp)?;
    let (last, replayed) = replay_after(record, &mut core, cp.after_seq, until, None, driver)?;
    // A live cluster's world cannot be rerun: its past is the newest checkpoint kept at
    // or before the moment (hourly for two days, daily before), said when it is older.
    let note = until
        .filter(|&t| t > cp.at_s + 60)
        .map(|t| {
            format!(
                "a {} cluster's past is what its checkpoints kept: the state at {} (the newest kept at or before {}), with the operators' commands up to {}",
                meta.backend,
                maar_scheduler::quantity::fmt_duration(cp.at_s),
                maar_scheduler::quantity::fmt_duration(t),
                maar_scheduler::quantity::fmt_duration(t)
            )
        });
    Ok(Loaded {
        core,
        driver: Box::new(driver.clone()),
        meta,
        after_seq: last,
        replayed,
        note,
        fresh: false,
    })
}

/// Opens a live backend's cluster (`maar local`, `maar kube`) recorded at `path`: the
/// state file is continued when it holds one of this backend's clusters (the backend
/// restores it, or takes its world as the truth and keeps the history), else created;
/// what opening caused is recorded; a cluster built from the world is checkpointed by
/// the engine (`Loaded::fresh`). Returns the cluster, its record (held) and the
/// world's name for the operator.
pub fn open_live<B: maar_scheduler::kit::Backend>(
    path: &Path,
    args: &B::Args,
) -> Result<(Loaded, Record, String), crate::failure::Failure> {
    use maar_scheduler::kit::Prior;
    use std::cell::{Cell, RefCell};
    // What a restore found: the record's own error (kept with its exit code), and
    // where the restored cluster stands in the commands.
    let trouble: RefCell<Option<LoadError>> = RefCell::new(None);
    let restored: Cell<Option<(i64, usize)>> = Cell::new(None);
    // The sequence number after the record's newest event, when it held any.
    let mut recorded_events = None;
    let (mut rec, meta, opened) = if path.exists() {
        let mut rec = Record::open(path)?;
        let meta = rec.meta()?;
        if meta.backend != B::NAME {
            return Err(crate::failure::Failure::Usage(format!(
                "{}: holds the {} cluster {}, not a {} one; give another --state",
                path.display(),
                meta.backend,
                meta.cluster,
                B::NAME
            )));
        }
        rec.acquire()?;
        let latest = rec.latest_time()?;
        let next_event = rec.next_event_seq()?;
        recorded_events = Some(next_event);
        let held = &mut rec;
        let prior = Prior {
            cluster: meta.cluster.clone(),
            latest,
            next_event,
            restore: Box::new(|| {
                let keep = |e: LoadError| {
                    let m = e.to_string();
                    *trouble.borrow_mut() = Some(e);
                    m
                };
                let l = restore(&*held, false).map_err(keep)?;
                // Events written after the checkpoint are told again as the cluster
                // goes on.
                held.drop_events_from(l.core.cluster().next_event_seq())
                    .map_err(|e| keep(e.into()))?;
                let saved = held
                    .checkpoint_before(None)
                    .map_err(|e| keep(e.into()))?
                    .and_then(|cp| serde_json::from_str(&cp.driver).ok())
                    .unwrap_or(serde_json::Value::Null);
                restored.set(Some((l.after_seq, l.replayed)));
                Ok((l.core, saved))
            }),
        };
        let opened = B::open(args, path, Some(prior));
        let opened = match opened {
            Ok(o) => o,
            Err(e) => {
                let _ = rec.release();
                return Err(match trouble.into_inner() {
                    Some(t) => t.into(),
                    None => e.into(),
                });
            }
        };
        (rec, meta, opened)
    } else {
        let opened = B::open(args, path, None)?;
        let meta = Meta::of(B::NAME, &opened.cluster);
        let mut rec = Record::create(path, &meta)?;
        rec.acquire()?;
        (rec, meta, opened)
    };
    let (after_seq, replayed) = match restored.get() {
        Some(r) => r,
        None => (rec.last_seq()?, 0),
    };
    // A world read anew adds to the record's history: events numbered over those of
    // the run before would replace them (a restarted `maar kube` did so, its first
    // 11,000 events over the last run's).
    if let Some(next) = recorded_events.filter(|_| opened.fresh) {
        let from = opened
            .events
            .first()
            .map_or(opened.core.cluster().next_event_seq(), |e| e.seq);
        if from < next {
            let _ = rec.release();
            return Err(crate::failure::Failure::No(format!(
                "{}: the {} backend numbered its events from {} though the record holds events up to {}; nothing was written",
                path.display(),
                B::NAME,
                from,
                next - 1
            )));
        }
    }
    rec.append_events(&opened.events)?;
    opened.events.iter().for_each(crate::logging::event);
    // A cluster read from the world is not checkpointed here: the engine writes its
    // first checkpoint by its own rule (its period after it starts, at once on a
    // reader's asking, as a command lands, or as it stops), not on the way to the first
    // bind (1,000 nodes and 5,000 pending pods: 111M instructions, a twentieth of those
    // of a whole run binding them).
    Ok((
        Loaded {
            core: opened.core,
            driver: opened.driver,
            meta,
            after_seq,
            replayed,
            note: opened.note,
            fresh: opened.fresh,
        },
        rec,
        opened.what,
    ))
}

/// The state of a loaded cluster as one value (core and driver), for comparisons.
pub fn fingerprint(l: &Loaded) -> serde_json::Value {
    let mut st = l.core.checkpoint();
    // The event window is history, kept whole in the record; compare the counters.
    st.events.clear();
    serde_json::json!({
        "core": serde_json::to_value(&st).expect("state serialises"),
        "driver": l.driver.save(),
    })
}

/// Checks a record: the state restored from its newest checkpoint must equal a clean
/// rebuild from every command. Returns the time both reached, or the first difference.
pub fn verify(record: &dyn History) -> Result<Result<u64, String>, LoadError> {
    let restored = restore(record, false)?;
    let mut rebuilt = restore(record, true)?;
    let at = restored.core.now();
    if rebuilt.core.now() < at {
        rebuilt.driver.advance(&mut rebuilt.core, at);
    }
    let a = fingerprint(&restored);
    let b = fingerprint(&rebuilt);
    if a == b {
        Ok(Ok(at))
    } else {
        Ok(Err(
            first_difference(&a, &b, String::new()).unwrap_or_else(|| "the states differ".into())
        ))
    }
}

/// Where two JSON values first differ, as a path.
pub fn first_difference(
    a: &serde_json::Value,
    b: &serde_json::Value,
    at: String,
) -> Option<String> {
    use serde_json::Value::*;
    match (a, b) {
        (Object(x), Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, format!("{at}.{k}")) {
                            return Some(d);
                        }
                    }
                    None => return Some(format!("{at}.{k}: only in the restored state")),
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| format!("{at}.{k}: only in the rebuild"))
        }
        (Array(x), Array(y)) => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(v, w, format!("{at}[{i}]")) {
                    return Some(d);
                }
            }
            (x.len() != y.len())
                .then(|| format!("{at}: {} items restored, {} rebuilt", x.len(), y.len()))
        }
        _ => (a != b).then(|| format!("{at}: restored {a}, rebuilt {b}")),
    }
}

/// A demo run (core and simulation) as a cluster for an engine, not recorded.
pub fn from_demo(d: maar_demo::Demo) -> Loaded {
    let meta = Meta {
        seed: Some(d.seed()),
        ..Meta::of("demo", &d.sim.scenario.name)
    };
    Loaded::new(d.core, Box::new(d.sim), meta)
}

impl From<LoadError> for crate::failure::Failure {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Record(r) => crate::failure::Failure::Record(r),
            LoadError::Content { path, why } => {
                crate::failure::Failure::Usage(format!("{path}: {why}"))
            }
        }
    }
}
