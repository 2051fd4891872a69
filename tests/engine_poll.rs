//! A live driver is looked at between whole seconds of the clock: what its world says
//! is acted on at once (a pod created is bound within a fraction of a second), not at
//! the next second. A simulation (no poll) is unchanged.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use maar::backend::Loaded;
use maar::engine::{self, EngineOptions};
use maar::record::Meta;
use maar_scheduler::*;

/// An engine on `core` and `driver` with no record, at speed 1.
fn start(core: Core, driver: Box<dyn Driver>, paused: bool) -> engine::EngineHandle {
    let meta = Meta::of(driver.kind(), "test");
    let loaded = Loaded::new(core, driver, meta);
    engine::start(
        loaded,
        None,
        EngineOptions {
            speed: 1.0,
            paused,
            ..Default::default()
        },
    )
}

/// The bare driver, with a world that says "a job appeared" once when polled.
struct Live {
    polls: Arc<AtomicUsize>,
    said: Arc<AtomicBool>,
    /// The starts of each forecast the engine handed on: (job, basis).
    told: Arc<std::sync::Mutex<Vec<(JobId, &'static str)>>>,
}

impl Driver for Live {
    fn kind(&self) -> &'static str {
        "live"
    }
    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        maar_scheduler::kit::Bare.advance(core, to)
    }
    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        maar_scheduler::kit::Bare.command(core, actor, command)
    }
    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    fn fork(&self) -> Box<dyn Driver> {
        Box::new(maar_scheduler::kit::Bare)
    }
    fn starts(&mut self, _core: &Core, f: &forecast::Forecast) {
        let mut told = self.told.lock().unwrap();
        told.extend(f.starts.iter().map(|(&id, s)| (id, s.basis.name())));
    }
    fn poll(&mut self, core: &mut Core) -> Vec<Event> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.said.swap(true, Ordering::SeqCst) {
            return Vec::new();
        }
        let spec = JobSpec::train("new", "ml", "train", 1);
        // And one that asks more cards than any node has.
        let mut never = spec.clone();
        never.name = "never".into();
        never.gpu.count = 3;
        let mut events = core
            .apply(Input::Observe(Observation::JobSubmitted {
                spec: Box::new(spec),
            }))
            .events;
        events.extend(
            core.apply(Input::Observe(Observation::JobSubmitted {
                spec: Box::new(never),
            }))
            .events,
        );
        events.extend(maar_scheduler::kit::Bare.advance(core, core.now()));
        events
    }
}

/// A core of one training pool, one node of two A100s and project `ml`.
fn one_node_core() -> Core {
    let mut c = Cluster::new(SchedConfig::default());
    c.add_pool(Pool {
        name: "train".into(),
        kind: PoolKind::Training,
        selector: [(LABEL_ROLE.to_string(), "train".to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    let labels = [
        (LABEL_ROLE, "train"),
        (LABEL_MODEL, "a100"),
        (LABEL_COUNT, "2"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    c.add_node(Node::new(
        "n1",
        labels,
        8000,
        64 << 30,
        1 << 40,
        (0..2)
            .map(|i| Gpu::new(i, format!("n1/{i}"), "a100", 80 << 30, false))
            .collect(),
    ));
    let mut core = Core::new(c);
    core.apply(Input::Observe(Observation::ProjectSeen {
        project: "ml".into(),
    }));
    core
}

#[test]
fn a_live_driver_is_polled_between_whole_seconds_and_what_it_sees_is_placed_at_once() {
    let core = one_node_core();
    let polls = Arc::new(AtomicUsize::new(0));
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let driver = Live {
        polls: polls.clone(),
        said: Arc::new(AtomicBool::new(false)),
        told: told.clone(),
    };
    let handle = start(core, Box::new(driver), false);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let v = handle.sync().unwrap();
    handle.shutdown();
    assert!(polls.load(Ordering::SeqCst) >= 3, "polled between seconds");
    assert_eq!(v.snapshot.time_s, 0, "no whole second has passed");
    let job = v
        .snapshot
        .jobs
        .iter()
        .find(|j| j.name == "new")
        .expect("seen at once");
    assert_eq!(job.phase, "Running", "placed at once");
    // The views' forecast reached the driver (a live backend tells its users): the
    // job that can never run, and only it, was in it.
    let told = told.lock().unwrap();
    assert!(told.contains(&(1, "never")), "{told:?}");
    assert!(told.iter().all(|&(id, _)| id == 1), "{told:?}");
}

/// A headless maar that nothing reads views from publishes its status alone (no
/// snapshot built every few seconds for nobody), while its forecast still reaches its
/// world; a face that asks gets the whole view.
#[test]
fn an_engine_publishing_status_alone_still_forecasts_and_answers_a_face_whole() {
    let core = one_node_core();
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let driver = Live {
        polls: Arc::new(AtomicUsize::new(0)),
        said: Arc::new(AtomicBool::new(false)),
        told: told.clone(),
    };
    let meta = Meta::of(driver.kind(), "test");
    let handle = engine::start(
        Loaded::new(core, Box::new(driver), meta),
        None,
        EngineOptions {
            speed: 1.0,
            snapshots: false,
            ..Default::default()
        },
    );
    let first = handle.view().version;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while handle.view().version < first + 2 {
        assert!(std::time::Instant::now() < deadline, "views published");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let published = handle.view();
    assert_eq!(published.status.kind, "live");
    assert!(published.snapshot.jobs.is_empty() && published.snapshot.nodes.is_empty());
    let whole = handle.sync().unwrap();
    handle.shutdown();
    assert_eq!(whole.snapshot.nodes.len(), 1);
    let job = whole.snapshot.jobs.iter().find(|j| j.name == "new");
    assert_eq!(
        job.map(|j| j.phase.as_str()),
        Some("Running"),
        "{:?}",
        whole.snapshot.jobs
    );
    let told = told.lock().unwrap();
    assert!(told.contains(&(1, "never")), "{told:?}");
}

/// The leading driver of a world read anew at every start, as `maar kube`'s: a node
/// `n3` joins at its second second.
#[derive(Default)]
struct ReadAnew {
    joined: bool,
}

impl Driver for ReadAnew {
    fn kind(&self) -> &'static str {
        "kube"
    }
    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        let mut events = maar_scheduler::kit::Bare.advance(core, to);
        if to >= 2 && !std::mem::replace(&mut self.joined, true) {
            let node = Node::new("n3", Default::default(), 8000, 64 << 30, 1 << 40, vec![]);
            events.extend(
                core.apply(Input::Observe(Observation::NodeJoined {
                    node: Box::new(node),
                }))
                .events,
            );
        }
        events
    }
    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        maar_scheduler::kit::Bare.command(core, actor, command)
    }
    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    fn fork(&self) -> Box<dyn Driver> {
        Box::new(ReadAnew {
            joined: self.joined,
        })
    }
    fn world_read_anew(&self) -> bool {
        true
    }
}

/// The bare driver of a maar standing by on another's Lease (or leading).
struct Standby(bool);

impl Driver for Standby {
    fn kind(&self) -> &'static str {
        "kube"
    }
    fn advance(&mut self, core: &mut Core, to: u64) -> Vec<Event> {
        maar_scheduler::kit::Bare.advance(core, to)
    }
    fn command(&mut self, core: &mut Core, actor: Actor, command: Command) -> Output {
        maar_scheduler::kit::Bare.command(core, actor, command)
    }
    fn save(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    fn fork(&self) -> Box<dyn Driver> {
        Box::new(Standby(self.0))
    }
    fn leading(&self) -> bool {
        self.0
    }
}

/// A maar standing by writes nothing to its cluster, so it acknowledges no command
/// (two replicas behind one Service: a command reaching the standby would be
/// acknowledged and never in force). The same command is done by the one leading.
#[test]
fn a_maar_standing_by_refuses_commands_and_the_leader_does_them() {
    let run = |leading: bool| {
        let mut c = Cluster::new(SchedConfig::default());
        c.add_node(Node::new(
            "n1",
            Default::default(),
            8000,
            64 << 30,
            1 << 40,
            vec![],
        ));
        let handle = start(Core::new(c), Box::new(Standby(leading)), true);
        let r = handle.apply(
            Actor::system("operator"),
            Command::CordonNode { node: "n1".into() },
        );
        let v = handle.sync().unwrap();
        // Its console says it stands by, first (it read `running (live)`).
        let mut app = maar::console::app::App::new(handle.clone());
        app.refresh();
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 30)).unwrap();
        t.draw(|f| maar::console::view::draw(f, &app)).unwrap();
        let top: String = (0..120u16)
            .map(|x| t.backend().buffer()[(x, 0)].symbol().to_string())
            .collect();
        assert_eq!(top.contains("STANDBY"), !leading, "{top}");
        handle.shutdown();
        assert_eq!(v.status.leading, leading);
        (r, v.snapshot.nodes[0].cordoned)
    };
    let (r, cordoned) = run(true);
    assert!(r.is_ok(), "{r:?}");
    assert!(cordoned);
    let (r, cordoned) = run(false);
    let why = r.expect_err("refused").to_string();
    assert!(why.contains("this maar stands by"), "{why}");
    assert!(why.contains("nothing was done"), "{why}");
    assert!(!cordoned);
}

/// The meta of a recorded Kubernetes cluster `test`.
fn kube_meta() -> Meta {
    Meta {
        backend: "kube".into(),
        cluster: "test".into(),
        scenario: None,
        seed: None,
        created: String::new(),
    }
}

/// An empty folder of this test process's own.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("maar-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A live cluster in which nothing happened since its last checkpoint gets no new one: it would write what the
/// last one holds (an idle Kubernetes cluster of 1,000 nodes spent 3 ms of CPU a second
/// on such copies). The first thing that happens is checkpointed as before (the
/// interval has passed).
#[test]
fn an_idle_live_cluster_writes_no_checkpoint_until_something_happens() {
    let dir = scratch("idle-cp");
    let path = dir.join("idle.db");
    let meta = kube_meta();
    let mut record = maar::record::Record::create(&path, &meta).unwrap();
    record.acquire().unwrap();
    let mut c = Cluster::new(SchedConfig::default());
    c.add_node(Node::new(
        "n1",
        Default::default(),
        8000,
        64 << 30,
        1 << 40,
        vec![],
    ));
    let core = Core::new(c);
    // A cluster restored from its record's newest checkpoint, no command after it.
    record
        .checkpoint(0, core.now(), &core.checkpoint_json(false), "null")
        .unwrap();
    let opened = record.newest_checkpoint_mark().unwrap();
    let loaded = Loaded::new(core, Box::new(Standby(true)), meta);
    let handle = engine::start(
        loaded,
        Some(record),
        EngineOptions {
            speed: 1.0,
            ..Default::default()
        },
    );
    let latest = || {
        maar::record::Record::open_read_only(&path)
            .unwrap()
            .latest_checkpoint()
            .unwrap()
            .map(|c| c.id)
    };
    let first = latest();
    assert!(opened.is_some() && first.is_some());
    // Past the checkpoint interval (5 s) with nothing happening.
    std::thread::sleep(std::time::Duration::from_millis(5_800));
    assert_eq!(latest(), first, "an idle cluster was checkpointed");
    handle
        .apply(
            Actor::system("operator"),
            Command::CordonNode { node: "n1".into() },
        )
        .unwrap();
    let mut seen = None;
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen = latest();
        if seen != first {
            break;
        }
    }
    handle.shutdown();
    assert!(seen > first, "the cordon was not checkpointed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cluster read from the world as maar starts (`Loaded::fresh`, as `maar kube` opens)
/// is in no checkpoint: the record's newest is another run's, even when it names the
/// same command and time. It is not written on the way to the first cycle; a reader
/// asking gets it written at once (not the other run's), and the stop writes it too.
/// While it runs, a world read anew is checkpointed every minute, not every 5 s.
#[test]
fn a_cluster_read_from_the_world_is_checkpointed_by_the_engine_when_a_reader_asks() {
    let dir = scratch("fresh-cp");
    let path = dir.join("fresh.db");
    let meta = kube_meta();
    let node = |name: &str| Node::new(name, Default::default(), 8000, 64 << 30, 1 << 40, vec![]);
    let mut record = maar::record::Record::create(&path, &meta).unwrap();
    record.acquire().unwrap();
    // The run before: one node, checkpointed at time 0 after command 0.
    let mut before = Cluster::new(SchedConfig::default());
    before.add_node(node("n1"));
    let before = Core::new(before);
    record
        .checkpoint(0, 0, &before.checkpoint_json(false), "null")
        .unwrap();
    // This run reads two nodes from the world, at the same command and time.
    let mut now = Cluster::new(SchedConfig::default());
    now.add_node(node("n1"));
    now.add_node(node("n2"));
    let mut loaded = Loaded::new(Core::new(now), Box::new(ReadAnew::default()), meta);
    loaded.fresh = true;
    let handle = engine::start(
        loaded,
        Some(record),
        EngineOptions {
            speed: 1.0,
            ..Default::default()
        },
    );
    let newest = || {
        let r = maar::record::Record::open_read_only(&path).unwrap();
        let cp = r.latest_checkpoint().unwrap().expect("a checkpoint");
        let st: serde_json::Value = serde_json::from_str(&cp.core).unwrap();
        (cp.id, st["nodes"].as_array().map_or(0, Vec::len))
    };
    assert_eq!(newest(), (1, 1), "written before the first cycle");
    handle.checkpoint_now().unwrap();
    let asked = newest();
    assert_eq!(
        asked.1, 2,
        "the reader got the run before's cluster: {asked:?}"
    );
    // Asked again at once, with nothing changed: no copy of the same.
    handle.checkpoint_now().unwrap();
    assert_eq!(newest(), asked);
    // A node joins at the second second; 5 s after the reader's checkpoint a cluster
    // that starts from its record would be checkpointed again: a world read anew is
    // every minute (a reader asking gets one at once, as above).
    std::thread::sleep(std::time::Duration::from_millis(5_800));
    assert_eq!(
        newest(),
        asked,
        "checkpointed as a cluster restored from its record"
    );
    handle.shutdown();
    let stopped = newest();
    assert_eq!(
        stopped.1, 3,
        "the stop wrote no checkpoint of n3: {stopped:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A live world read anew at every start, as `maar kube` reads its cluster: one node
/// joins as it opens. Its options: whether it numbers its events on from the record's
/// (`Prior::next_event`), as `maar kube` does.
struct Anew;

impl maar_scheduler::kit::Backend for Anew {
    const NAME: &'static str = "kube";
    type Args = bool;
    fn state_name(_: &bool) -> Result<String, maar_scheduler::kit::OpenError> {
        Ok("anew".into())
    }
    fn offline() -> maar_scheduler::kit::Offline {
        maar_scheduler::kit::Offline::new("kube", None)
    }
    fn open(
        continues: &bool,
        _: &std::path::Path,
        prior: Option<maar_scheduler::kit::Prior<'_>>,
    ) -> Result<maar_scheduler::kit::Opened, maar_scheduler::kit::OpenError> {
        let mut c = Cluster::new(SchedConfig::default());
        if let Some(p) = prior.as_ref().filter(|_| *continues) {
            c.continue_events(p.next_event);
        }
        let mut core = Core::new(c);
        let node = Node::new("n1", Default::default(), 8000, 64 << 30, 1 << 40, vec![]);
        let events = core
            .apply(Input::Observe(Observation::NodeJoined {
                node: Box::new(node),
            }))
            .events;
        Ok(maar_scheduler::kit::Opened {
            core,
            driver: Box::new(ReadAnew::default()),
            cluster: "anew".into(),
            events,
            fresh: true,
            what: "a test world".into(),
            note: None,
        })
    }
}

/// A world read anew on a record that holds another run's history adds to it: the
/// second start's events number on from the first's, and both are in the record
/// (a restarted `maar kube` wrote its first events over the last run's). A backend
/// that numbers from 0 again is refused before anything is written.
#[test]
fn a_world_read_anew_adds_its_events_to_the_records_history_not_over_it() {
    let dir = scratch("anew");
    let path = dir.join("anew.db");
    let joined = |path: &std::path::Path| -> Vec<(u64, u64)> {
        let r = maar::record::Record::open_read_only(path).unwrap();
        r.events_before(1 << 62, 1000)
            .unwrap()
            .into_iter()
            .filter(|e| e.reason.as_ref() == "NodeJoined")
            .map(|e| (e.seq, e.time))
            .collect()
    };
    let run = |continues: bool| {
        let (loaded, rec, _) = maar::backend::open_live::<Anew>(&path, &continues)?;
        let handle = engine::start(loaded, Some(rec), EngineOptions::default());
        handle.shutdown();
        Ok::<_, maar::failure::Failure>(())
    };
    run(true).unwrap();
    let first = joined(&path);
    assert_eq!(first.len(), 1, "{first:?}");
    run(true).unwrap();
    let both = joined(&path);
    assert_eq!(
        both.len(),
        2,
        "the second start's events replaced the first's: {both:?}"
    );
    assert_eq!(both[0], first[0]);
    assert!(both[1].0 > first[0].0, "{both:?}");
    // A backend numbering from 0 again: refused, the record as it was.
    let why = run(false)
        .expect_err("events written over the record's")
        .to_string();
    assert!(why.contains("numbered its events from 0"), "{why}");
    assert_eq!(joined(&path), both);
    let _ = std::fs::remove_dir_all(&dir);
}
