//! Several clusters under one maar: each cluster's engine (a [`Site`]), how a job is
//! sent to the one where it starts first ([`prospects`], `maar_scheduler::dispatch`),
//! and the [`Mover`], which moves a job that its cluster could not start after all,
//! once: withdrawn where it waits (only while it still waits there), then submitted
//! where it starts first, the why with it. It never runs in two clusters: the
//! withdrawal is applied only as previewed (no job of it running), and a job moved
//! once carries `moved_from` and is never moved again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use maar_scheduler::dispatch::{self, Prospect};
use maar_scheduler::{Actor, Command, JobSpec};

use crate::engine::{EngineHandle, Refusal};

/// One cluster of several: its name and its engine.
#[derive(Clone)]
pub struct Site {
    pub name: String,
    pub engine: EngineHandle,
}

/// How `spec` would fare in each cluster, were it submitted there now: every engine
/// asked at once (each proves it on its own copy, on its own thread), the answers in
/// the clusters' order.
pub fn prospects(sites: &[Site], spec: &JobSpec) -> Vec<(String, Result<Prospect, String>)> {
    std::thread::scope(|scope| {
        let asked: Vec<_> = sites
            .iter()
            .map(|s| (s.name.clone(), scope.spawn(|| s.engine.prospect(spec))))
            .collect();
        asked
            .into_iter()
            .map(|(name, h)| {
                let p = h
                    .join()
                    .unwrap_or_else(|_| Err("asking it failed".to_string()));
                (name, p)
            })
            .collect()
    })
}

/// Who moves jobs in the record and the audit: a part of maar.
pub const MOVER: &str = "federation";

/// How long a job the mover looked at and left is not looked at again: a prospect
/// costs a copy of each other cluster.
const LOOK_AGAIN: Duration = Duration::from_secs(30);

/// Watches the jobs sent among clusters and moves the ones that wait past the start
/// they were sent for (see [`dispatch::to_move`]).
#[derive(Default)]
pub struct Mover {
    /// (cluster, job) -> when it may be looked at again.
    next: HashMap<(usize, String), Instant>,
    /// (cluster, job) held, and why it was last said (logged when it changes, not at
    /// every look); forgotten once the job is held no more.
    said: HashMap<(usize, String), String>,
    /// Clusters of the federation that have not joined yet (named in the config,
    /// not answering since the start): a job naming one waits for it.
    waiting: Vec<String>,
}

/// What a look did: a job moved, or one that could not be.
#[derive(Clone, Debug, PartialEq)]
pub enum Moved {
    /// Withdrawn from `from`, submitted to `to`; `why` as recorded with it.
    Done {
        job: String,
        from: String,
        to: String,
        why: String,
    },
    /// Withdrawn from `from`, but `to` refused it (it changed in between): given back
    /// to `from`'s queue (`back`), or, where `from` took it not back, the job runs
    /// nowhere until submitted again.
    Refused {
        job: String,
        from: String,
        to: String,
        why: String,
        back: bool,
    },
}

impl Moved {
    /// In words, for the log and the console.
    pub fn words(&self) -> String {
        match self {
            Moved::Done { job, why, .. } => format!("job/{job} {why}"),
            Moved::Refused {
                job,
                from,
                to,
                why,
                back,
            } if *back => format!(
                "job/{job} was not sent to {to}, which refused it: {why}; it waits in {from} again"
            ),
            Moved::Refused { job, from, to, why, .. } => format!(
                "job/{job} was withdrawn from {from} to go to {to}, but {to} refused it: {why}; submit it again"
            ),
        }
    }
}

impl Mover {
    /// Looks at every cluster's jobs that may move once, each at most every
    /// [`LOOK_AGAIN`], and moves those [`dispatch::to_move`] says should; and at the
    /// jobs applied to one cluster whose file asks for a cluster (`crater.ai/cluster`),
    /// held there (`Cluster::held_jobs`, asked of each engine at every look), each
    /// sent once where [`dispatch::to_send`] says or left there. What was moved or
    /// sent (or failed half-way) is returned and logged.
    pub fn look(&mut self, sites: &[Site]) -> Vec<Moved> {
        let mut done = Vec::new();
        let now = Instant::now();
        self.next.retain(|_, t| *t > now);
        for (i, site) in sites.iter().enumerate() {
            if !answers(site) {
                continue;
            }
            // Jobs held for the federation, asked of the engine itself (a headless
            // engine publishes its views seldom): each decided within a second. A job
            // decided is held no more (left here, or withdrawn), so one of the same name
            // held later (applied again, requeued) is decided again.
            let held = site.engine.held_jobs().unwrap_or_default();
            self.said
                .retain(|(k, job), _| *k != i || held.iter().any(|(h, _)| h == job));
            for (full, wanted) in held {
                let key = (i, full.clone());
                if self.next.contains_key(&key) {
                    continue;
                }
                self.next.insert(key, now + LOOK_AGAIN);
                let Ok(spec) = site.engine.spec(&full) else {
                    continue;
                };
                if let Some(m) = self.send(sites, i, &full, &wanted, spec) {
                    done.push(m);
                }
            }
            let view = site.engine.view();
            let time = view.snapshot.time_s;
            for j in view.snapshot.jobs.iter().filter(|j| j.movable) {
                let full = format!("{}/{}", j.project, j.name);
                let key = (i, full.clone());
                if self.next.contains_key(&key) {
                    continue;
                }
                self.next.insert((i, full.clone()), now + LOOK_AGAIN);
                let Ok(spec) = site.engine.spec(&full) else {
                    continue;
                };
                // Cheap first: only a job past the start it was sent for asks the others.
                if j.wait_s < spec.sent_start_in.unwrap_or(0) + dispatch::MOVE_AFTER_S {
                    continue;
                }
                let others: Vec<Site> = sites
                    .iter()
                    .enumerate()
                    .filter(|(k, s)| *k != i && answers(s))
                    .map(|(_, s)| s.clone())
                    .collect();
                let asked = prospects(&others, &spec);
                let here_in = j.expected_start_s.map(|t| t.saturating_sub(time));
                let reason = j.reasons.first().map(String::as_str).unwrap_or("waiting");
                let Some(choice) =
                    dispatch::to_move(&site.name, &spec, j.wait_s, here_in, reason, &asked)
                else {
                    continue;
                };
                let to = &others[choice.index];
                let start_in = asked[choice.index].1.as_ref().ok().and_then(|p| p.start_in);
                if let Some(m) = move_one(site, to, &full, spec, choice.why, start_in, true) {
                    say(&m);
                    done.push(m);
                }
            }
        }
        done
    }

    /// A job applied to `sites[i]` whose file asks for `wanted` (`auto` or a cluster),
    /// held there until this decides (`Core::set_federation`): sent once where
    /// [`dispatch::to_send`] says, its own cluster's prospect taken as if it were
    /// submitted there again now; or left there, which its cluster is told (`auto`,
    /// no other starts it sooner: it queues there; a name refused, unknown or not
    /// answering: it stays held, told why, and is looked at again after
    /// [`LOOK_AGAIN`]).
    fn send(
        &mut self,
        sites: &[Site],
        i: usize,
        job: &str,
        wanted: &str,
        spec: JobSpec,
    ) -> Option<Moved> {
        let here_site = &sites[i];
        let key = (i, job.to_string());
        // Left here: a command (recorded, audited, replayed with the record); held still:
        // its reason only.
        let tell = |kept: bool, why: &str| {
            let told = if kept {
                here_site
                    .engine
                    .apply(
                        Actor::system(MOVER),
                        Command::Keep {
                            job: job.to_string(),
                            why: Some(why.to_string()),
                        },
                    )
                    .map(|_| String::new())
                    .map_err(|e| e.to_string())
            } else {
                here_site.engine.not_sent(job, why)
            };
            if let Err(e) = told {
                tracing::warn!(target: "maar", "job/{job}: {} not told the federation's decision ({why}): {e}", here_site.name);
            }
        };
        // Still held: said to its cluster, and logged once per reason.
        let mut hold = |why: String| {
            if self.said.get(&key) != Some(&why) {
                tracing::warn!(target: "maar", "job/{job}: {why}; it waits in {}", here_site.name);
                tell(false, &why);
                self.said.insert(key.clone(), why);
            }
        };
        let label = maar_scheduler::manifest::LABEL_CLUSTER;
        let waiting = self.waiting.clone();
        if wanted != "auto" && wanted != here_site.name {
            // A name none of the clusters has (down, or not joined yet, or not): said
            // with all of them.
            let known =
                |n: &str| sites.iter().any(|s| s.name == n) || waiting.iter().any(|w| w == n);
            if !known(wanted) {
                let names: Vec<&str> = sites
                    .iter()
                    .map(|s| s.name.as_str())
                    .chain(waiting.iter().map(String::as_str))
                    .collect();
                hold(format!(
                    "its file asks for cluster {wanted} ({label}), which is none of {}",
                    names.join(", ")
                ));
                return None;
            }
            // The cluster it names does not answer now (or has not joined yet): not
            // decided, looked at again.
            if waiting.iter().any(|w| w == wanted)
                || sites.iter().any(|s| s.name == wanted && !answers(s))
            {
                hold(format!(
                    "waiting to be sent to cluster {wanted} ({label}: {wanted}), which does not answer; tried again every {} s",
                    LOOK_AGAIN.as_secs()
                ));
                return None;
            }
        }
        // This cluster and those that answer; for a name, only that cluster besides
        // (its word alone decides, and a refused job asks it again at every look: the
        // others' prospects would be copies of them for nothing).
        let listed: Vec<&Site> = sites
            .iter()
            .enumerate()
            .filter(|(k, s)| *k == i || (answers(s) && (wanted == "auto" || s.name == wanted)))
            .map(|(_, s)| s)
            .collect();
        let here = listed.iter().position(|s| std::ptr::eq(*s, here_site))?;
        let others: Vec<Site> = listed
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != here)
            .map(|(_, s)| (*s).clone())
            .collect();
        let mut asked = prospects(&others, &spec);
        asked.insert(
            here,
            (here_site.name.clone(), here_site.engine.prospect_again(job)),
        );
        if asked[here].1.is_err() {
            // It started or ended meanwhile: nothing to send.
            return None;
        }
        match dispatch::to_send(here, wanted, &asked) {
            Ok(Some(choice)) => {
                let to = listed[choice.index];
                let start_in = asked[choice.index].1.as_ref().ok().and_then(|p| p.start_in);
                let Some(m) = move_one(here_site, to, job, spec, choice.why, start_in, false)
                else {
                    // Not withdrawn (it changed meanwhile): looked at again.
                    return None;
                };
                say(&m);
                self.said.remove(&key);
                if let Moved::Refused {
                    why, back: true, ..
                } = &m
                {
                    // Given back here: `auto` queues here; a name stays held.
                    let why = format!("{} refused it: {why}", to.name);
                    tell(wanted == "auto", &why);
                }
                Some(m)
            }
            Ok(None) => {
                let why = if wanted == "auto" {
                    "no other cluster starts it sooner"
                } else {
                    "its file asks for this one"
                };
                tracing::info!(
                    target: "maar",
                    "job/{job} stays in {}: its file asks for {wanted} (crater.ai/cluster), {why}",
                    here_site.name
                );
                self.said.remove(&key);
                tell(true, why);
                None
            }
            Err(why) => {
                // Held, told why; looked at again (the cluster may take it later).
                hold(why);
                None
            }
        }
    }
}

/// A move or a send in the log: a warning when the job was withdrawn and not taken.
fn say(m: &Moved) {
    match m {
        Moved::Done { .. } => tracing::info!(target: "maar", "{}", m.words()),
        Moved::Refused { .. } => tracing::warn!(target: "maar", "{}", m.words()),
    }
}

/// Whether a cluster answers (its engine is not stopped by a fatal error, its cluster
/// not unreachable): only those are asked or sent to.
fn answers(s: &Site) -> bool {
    let st = &s.engine.view().status;
    st.fatal.is_none() && st.unreachable.is_none()
}

/// Withdraws `job` from `from` while it still waits there (the cancel applied only as
/// previewed: nothing of it running), then submits it to `to` with `why`: `moved`
/// once (it moves no more), or sent as its file asked. `None` when nothing was done
/// (it started meanwhile, or `from` refused).
fn move_one(
    from: &Site,
    to: &Site,
    job: &str,
    mut spec: JobSpec,
    why: String,
    start_in: Option<u64>,
    moved: bool,
) -> Option<Moved> {
    let actor = Actor::system(MOVER);
    let cancel = Command::Cancel {
        job: job.to_string(),
        why: Some(format!(
            "{} to {}",
            if moved { "moved" } else { "sent" },
            to.name
        )),
    };
    let preview = from.engine.what_if(actor.clone(), cancel.clone()).ok()?;
    // A job with anything running is not moved: it would run twice.
    if !preview.accepted || !preview.evicted.is_empty() {
        return None;
    }
    match from
        .engine
        .apply_as_previewed(actor.clone(), cancel, preview)
    {
        Ok(_) => {}
        Err(Refusal::Changed(_)) => return None,
        Err(e) => {
            tracing::warn!(target: "maar", "job/{job}: not moved from {}: {e}", from.name);
            return None;
        }
    }
    spec.dispatched = Some(why.clone());
    if moved {
        spec.moved_from = Some(from.name.clone());
    }
    spec.sent_start_in = start_in;
    let (from_name, to_name) = (from.name.clone(), to.name.clone());
    Some(
        match to.engine.apply(actor, Command::Submit(Box::new(spec))) {
            Ok(_) => Moved::Done {
                job: job.to_string(),
                from: from_name,
                to: to_name,
                why,
            },
            Err(e) => {
                // Given back where it was withdrawn (nothing of it ran there), so it
                // is in one cluster still.
                let back = match from.engine.apply(
                    Actor::system(MOVER),
                    Command::Requeue {
                        job: job.to_string(),
                    },
                ) {
                    Ok(_) => true,
                    Err(r) => {
                        tracing::warn!(
                            target: "maar",
                            "job/{job}: not given back to {} after {} refused it: {r}",
                            from.name,
                            to.name
                        );
                        false
                    }
                };
                Moved::Refused {
                    job: job.to_string(),
                    from: from_name,
                    to: to_name,
                    why: e.to_string(),
                    back,
                }
            }
        },
    )
}

/// The mover on its own thread, looking every second until dropped.
pub struct MoverThread {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MoverThread {
    /// Starts moving among `sites` and those that join later (none while there is
    /// one cluster and none to join).
    pub fn start(sites: &[Site], joining: Option<Arc<Joining>>) -> Option<MoverThread> {
        if sites.len() < 2 && joining.is_none() {
            return None;
        }
        let mut sites = sites.to_vec();
        let first = sites.len();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("maar-federation".into())
            .spawn(move || {
                let mut mover = Mover::default();
                while !flag.load(Ordering::SeqCst) {
                    if let Some(j) = &joining {
                        sites.extend(j.joined_after(sites.len() - first));
                        mover.waiting = j.waiting().into_iter().map(|w| w.0).collect();
                    }
                    mover.look(&sites);
                    for _ in 0..10 {
                        if flag.load(Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
            .ok()?;
        Some(MoverThread {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for MoverThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How often a cluster that did not answer when maar started is tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(10);

/// What opens one cluster (its name, its engine, and in words what was opened), or
/// why not.
pub type Opener = Box<dyn FnMut() -> Result<(String, EngineHandle, String), String> + Send>;

/// Clusters that did not answer when maar started with several: the others go on, and
/// each of these is tried again every [`RETRY_EVERY`] until it answers; then it joins
/// (its engine among the others: the console's rows, the mover). Until then the
/// overview shows it as not answering, with why.
#[derive(Default)]
pub struct Joining {
    waiting: std::sync::Mutex<Vec<(String, String)>>,
    joined: std::sync::Mutex<Vec<Site>>,
    stop: AtomicBool,
    threads: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Joining {
    /// Tries `open` again every [`RETRY_EVERY`] (on its own thread) until it answers
    /// or [`Joining::stop`]; `why` is the first failure.
    pub fn wait_for(self: &Arc<Self>, name: String, why: String, mut open: Opener) {
        self.waiting
            .lock()
            .expect("waiting")
            .push((name.clone(), why));
        let me = self.clone();
        let t = std::thread::Builder::new()
            .name("maar-joining".into())
            .spawn(move || loop {
                let until = Instant::now() + RETRY_EVERY;
                while Instant::now() < until {
                    if me.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                match open() {
                    Ok((joined_as, engine, what)) => {
                        let mut joined = me.joined.lock().expect("joined");
                        if me.stop.load(Ordering::SeqCst) {
                            engine.shutdown();
                            return;
                        }
                        tracing::info!(target: "maar", "cluster {name} answers now: {what}");
                        me.waiting
                            .lock()
                            .expect("waiting")
                            .retain(|(n, _)| *n != name);
                        joined.push(Site {
                            name: joined_as,
                            engine,
                        });
                        return;
                    }
                    Err(why) => {
                        if let Some(w) = me
                            .waiting
                            .lock()
                            .expect("waiting")
                            .iter_mut()
                            .find(|(n, _)| *n == name)
                        {
                            w.1 = why;
                        }
                    }
                }
            });
        if let Ok(t) = t {
            self.threads.lock().expect("threads").push(t);
        }
    }

    /// The clusters still waiting to answer, and why.
    pub fn waiting(&self) -> Vec<(String, String)> {
        self.waiting.lock().expect("waiting").clone()
    }

    /// The clusters that joined after the first `seen` of them.
    pub fn joined_after(&self, seen: usize) -> Vec<Site> {
        self.joined
            .lock()
            .expect("joined")
            .iter()
            .skip(seen)
            .cloned()
            .collect()
    }

    /// Stops trying; the engines of the clusters that joined are shut down.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.lock().expect("threads").drain(..) {
            let _ = t.join();
        }
        for s in self.joined.lock().expect("joined").iter() {
            s.engine.shutdown();
        }
    }
}
