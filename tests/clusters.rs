//! One console on two clusters (`maar demo --clusters 2`): the overview sums both and
//! shows each, `C` and `:cluster NAME` show another with its own rows and actions, and
//! `:submit FILE` sends a job to the cluster where it starts first, saying why.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use maar::console::app::{App, Mode, Screen, Site};
use maar::console::view;
use maar::engine::{self, EngineHandle, EngineOptions};
use maar::load::load_scenario;
use maar_demo::Demo;

fn engine(scenario: &str, at: u64) -> EngineHandle {
    engine_of(scenario, at, None)
}

/// The demo's `scenario` at `at`, its engine paused; `federation`: its name among
/// several whose mover runs (`EngineOptions::federation`).
fn engine_of(scenario: &str, at: u64, federation: Option<&str>) -> EngineHandle {
    let mut d = Demo::new(
        load_scenario(Some(std::path::Path::new(scenario))).unwrap(),
        None,
    )
    .unwrap();
    d.run_until(at);
    engine::start(
        maar::backend::from_demo(d),
        None,
        EngineOptions {
            paused: true,
            federation: federation.map(String::from),
            ..Default::default()
        },
    )
}

/// The two sites as `maar demo --clusters 2` runs them: the federation's mover runs,
/// so each holds the jobs whose file asks for a cluster until the mover decides.
fn two() -> App {
    let mut a = App::with_sites(vec![
        Site {
            name: "lab".into(),
            engine: engine_of("lab", 3600, Some("lab")),
        },
        Site {
            name: "site-b".into(),
            engine: engine_of("site-b", 3600, Some("site-b")),
        },
    ]);
    a.actor = maar_scheduler::Actor::system("clusters-test");
    a
}

fn key(a: &mut App, c: char) {
    a.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
}

fn line(a: &mut App, text: &str) {
    key(a, ':');
    for c in text.chars() {
        key(a, c);
    }
    a.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
}

fn screen(a: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, a)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_overview_shows_each_cluster_and_sums_their_gpus_by_model() {
    let a = two();
    assert_eq!(a.screen, Screen::Overview);
    assert_eq!(a.site_rows.len(), 2);
    assert_eq!(a.site_rows[0].name, "lab");
    assert_eq!(a.site_rows[1].name, "site-b");
    // The lab's 42 nodes and the second site's 14, each counted where it is.
    assert_eq!(a.site_rows[0].nodes, 42);
    assert_eq!(a.site_rows[1].nodes, 14);
    let models: Vec<&str> = a.models.iter().map(|m| m.model.as_str()).collect();
    for m in ["a100", "h100", "h200", "l40s", "a10"] {
        assert!(models.contains(&m), "{m} missing from {models:?}");
    }
    let h200 = a.models.iter().find(|m| m.model == "h200").unwrap();
    assert_eq!(h200.total, 16);
    let text = screen(&a, 120, 35);
    assert!(text.contains("2 clusters"), "{text}");
    assert!(text.contains("> lab"), "{text}");
    assert!(text.contains("site-b"), "{text}");
    assert!(text.contains("lab (1 of 2)"), "{text}");
    // Narrow terminals draw it too.
    let narrow = screen(&a, 80, 24);
    assert!(narrow.contains("site-b"), "{narrow}");
}

#[test]
fn c_and_cluster_show_another_cluster_or_every_clusters_rows() {
    let mut a = two();
    key(&mut a, 'C');
    assert_eq!(a.site, 1);
    assert_eq!(a.shown_cluster(), "site-b");
    // The cluster shown is the second site (its own view and header) ...
    assert!(a
        .site_snapshot
        .nodes
        .iter()
        .any(|n| n.name.starts_with("h200")));
    assert!(!a
        .site_snapshot
        .nodes
        .iter()
        .any(|n| n.name.starts_with("a100")));
    assert!(screen(&a, 120, 35).contains("site-b (2 of 2)"));
    line(&mut a, "nodes");
    assert_eq!(a.rows.len(), 14);
    assert!(!screen(&a, 160, 70).contains("CLUSTER"));
    // C past the last: every cluster's rows, the Nodes table listing both clusters'
    // nodes, each naming its own.
    key(&mut a, 'C');
    assert!(a.all_sites);
    assert_eq!(a.rows.len(), 42 + 14);
    // The header's figures are both clusters' then, and says so.
    let head = screen(&a, 120, 35);
    assert!(head.contains("all 2 clusters (acts in site-b)"), "{head}");
    let sum: u64 = a.site_rows.iter().map(|r| r.gpu_total_milli).sum();
    assert_eq!(a.snapshot.metrics.total.gpu_milli, sum);
    assert!(
        a.snapshot
            .metrics
            .by_model
            .iter()
            .any(|m| m.model == "a100")
            && a.snapshot
                .metrics
                .by_model
                .iter()
                .any(|m| m.model == "h200"),
        "{:?}",
        a.snapshot.metrics.by_model
    );
    let text = screen(&a, 160, 70);
    assert!(text.contains("CLUSTER"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("lab") && l.contains("a100-01")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("site-b") && l.contains("h200-01")),
        "{text}"
    );
    // The filter matches the CLUSTER column.
    key(&mut a, '/');
    for c in "site-b".chars() {
        key(&mut a, c);
    }
    a.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(a.rows.len(), 14, "{}", a.filter);
    assert!(a
        .rows
        .iter()
        .all(|&r| a.snapshot.nodes[r].cluster == "site-b"));
    a.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    line(&mut a, "cluster lab");
    assert_eq!(a.site, 0);
    assert!(!a.all_sites);
    assert_eq!(a.rows.len(), 42);
    line(&mut a, "cluster nope");
    assert_eq!(a.site, 0);
    assert!(
        a.message
            .contains("no cluster `nope` here (lab, site-b, or all)"),
        "{}",
        a.message
    );
    // C goes round: site-b, all rows, the lab.
    key(&mut a, 'C');
    key(&mut a, 'C');
    assert!(a.all_sites);
    key(&mut a, 'C');
    assert_eq!(a.site, 0);
    assert!(!a.all_sites);
    // Acting on a row of the other cluster acts there: cordon h200-01 (site-b) while
    // the lab is shown.
    line(&mut a, "cluster all");
    assert!(a.all_sites);
    assert_eq!(a.site, 0);
    line(&mut a, "nodes");
    a.filter.clear();
    a.recompute();
    let at = a
        .rows
        .iter()
        .position(|&r| a.snapshot.nodes[r].name == "h200-01")
        .expect("listed");
    a.selected = at;
    key(&mut a, 'c');
    if matches!(a.mode, Mode::Confirm(..)) {
        key(&mut a, 'y');
    }
    assert_eq!(a.site, 1, "{}", a.message);
    let b = a.sites[1].engine.sync().unwrap();
    assert!(b
        .snapshot
        .nodes
        .iter()
        .any(|n| n.name == "h200-01" && n.cordoned));
    let lab = a.sites[0].engine.sync().unwrap();
    assert!(!lab.snapshot.nodes.iter().any(|n| n.cordoned));
    // The selection stayed on the row acted on.
    let r = a.rows[a.selected];
    assert_eq!(
        (
            a.snapshot.nodes[r].cluster.as_str(),
            a.snapshot.nodes[r].name.as_str()
        ),
        ("site-b", "h200-01")
    );
}

#[test]
fn submit_goes_where_the_job_starts_first_and_acts_there() {
    let mut a = two();
    // Only the second site has H200 cards.
    let dir = std::env::temp_dir().join(format!("maar-clusters-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("h200.yaml");
    std::fs::write(
        &f,
        "apiVersion: crater.ai/v1
kind: TrainJob
metadata: {name: on-h200, namespace: ml-prod}
spec:
  resources:
    pool: training-gpu
    gpu: {count: 1, models: [h200]}
    cpu: {cores: 4}
    memory: {capacity: 16Gi}
",
    )
    .unwrap();
    line(&mut a, &format!("submit {}", f.display()));
    assert_eq!(a.site, 1, "{}", a.message);
    // Nothing is sent before y: said as what would be.
    assert!(
        a.message.contains("would go to site-b: starts now"),
        "{}",
        a.message
    );
    assert!(!a.message.contains("sent to"), "{}", a.message);
    assert!(
        screen(&a, 120, 35).contains("what if, in site-b"),
        "{}",
        screen(&a, 120, 35)
    );
    assert!(
        a.message.contains("in lab it can never run as asked"),
        "{}",
        a.message
    );
    // A submit is confirmed first; then it is in the second site's engine.
    if matches!(a.mode, Mode::Confirm(..)) {
        key(&mut a, 'y');
        assert!(
            a.message
                .starts_with("site-b: job ml-prod/on-h200 submitted"),
            "{}",
            a.message
        );
    }
    let v = a.sites[1].engine.sync().unwrap();
    let j = v
        .snapshot
        .jobs
        .iter()
        .find(|j| j.name == "on-h200")
        .expect("submitted at site-b");
    assert_eq!(j.phase, "Running");
    // The why stays with the job: its explanation says where it was sent and why.
    let ex = a.sites[1].engine.explain("ml-prod/on-h200").unwrap();
    let sent = ex.dispatched.clone().expect("the dispatch kept");
    assert!(sent.starts_with("sent to site-b: starts now"), "{sent}");
    assert!(ex.to_string().contains("Sent:      sent to site-b"), "{ex}");
    let lab = a.sites[0].engine.sync().unwrap();
    assert!(!lab.snapshot.jobs.iter().any(|j| j.name == "on-h200"));
    for s in &a.sites {
        s.engine.shutdown();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn explain_says_how_the_job_would_fare_in_the_other_cluster() {
    let mut a = two();
    line(&mut a, "jobs");
    // A job of the lab that the second site can run too (its own shape, no AMD).
    let i = a
        .rows
        .iter()
        .position(|&r| {
            let j = &a.snapshot.jobs[r];
            j.project == "ml-prod" && j.phase == "Pending"
        })
        .or_else(|| {
            a.rows
                .iter()
                .position(|&r| a.snapshot.jobs[r].project == "ml-prod")
        })
        .expect("an ml-prod job");
    a.selected = i;
    a.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(matches!(a.mode, Mode::Explain(..)), "{}", a.message);
    assert_eq!(a.elsewhere.len(), 1, "{:?}", a.elsewhere);
    assert!(a.elsewhere[0].starts_with("site-b: "), "{:?}", a.elsewhere);
    let text = screen(&a, 160, 60);
    assert!(
        text.contains("Elsewhere: if it were sent there now"),
        "{text}"
    );
    // With one cluster there is nothing elsewhere.
    let mut one = App::new(engine("lab", 3600));
    line(&mut one, "jobs");
    one.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(one.elsewhere.is_empty());
}

/// A job sent to a cluster that cannot start it after all (sent to start now, still
/// waiting past the grace) is moved once: withdrawn there (its reason says where it
/// went), submitted where it starts now with why; a moved job is not moved again,
/// and a job that runs is never moved.
#[test]
fn a_job_its_cluster_cannot_start_after_all_is_moved_once() {
    use maar::federation::{Moved, Mover};
    use maar_scheduler::dispatch::MOVE_AFTER_S;
    let a = two();
    let sites = a.sites.clone();
    let (lab, b) = (&sites[0].engine, &sites[1].engine);
    let actor = maar_scheduler::Actor::system("clusters-test");
    // As if the lab had been chosen for it and then lost the cards it was sent for:
    // only the second site has H200s.
    let mut spec = maar_scheduler::JobSpec::train("moving", "ml-prod", "training-gpu", 1);
    spec.gpu.models = vec!["h200".into()];
    spec.dispatched = Some("sent to lab: starts now there".into());
    spec.sent_start_in = Some(0);
    lab.apply(
        actor.clone(),
        maar_scheduler::Command::Submit(Box::new(spec.clone())),
    )
    .unwrap();
    // And one sent to the lab that runs there: never moved.
    let mut runs = maar_scheduler::JobSpec::train("runs", "ml-prod", "training-gpu", 1);
    runs.gpu.count = 0;
    runs.dispatched = Some("sent to lab: starts now there".into());
    runs.sent_start_in = Some(0);
    lab.apply(
        actor.clone(),
        maar_scheduler::Command::Submit(Box::new(runs)),
    )
    .unwrap();
    let mut mover = Mover::default();
    // Not yet past the grace: nothing moves.
    assert_eq!(mover.look(&sites), vec![]);
    // The lab's clock runs on past the grace.
    lab.set_speed(5000.0);
    lab.set_paused(false).unwrap();
    let waited = |v: &maar::engine::View| {
        v.snapshot
            .jobs
            .iter()
            .find(|j| j.name == "moving")
            .map_or(0, |j| j.wait_s)
    };
    for _ in 0..200 {
        if waited(&lab.sync().unwrap()) >= MOVE_AFTER_S {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    lab.set_paused(true).unwrap();
    assert!(waited(&lab.sync().unwrap()) >= MOVE_AFTER_S);
    // A fresh mover (the first one looked at it a moment ago and waits before again).
    let moved = Mover::default().look(&sites);
    assert_eq!(moved.len(), 1, "{moved:?}");
    let Moved::Done { job, from, to, why } = &moved[0] else {
        panic!("{moved:?}");
    };
    assert_eq!(
        (job.as_str(), from.as_str(), to.as_str()),
        ("ml-prod/moving", "lab", "site-b")
    );
    assert!(why.starts_with("moved from lab (once"), "{why}");
    assert!(
        why.contains("; sent to site-b: starts now on h200-"),
        "{why}"
    );
    // Withdrawn in the lab, saying where it went; submitted to the second site.
    let lv = lab.sync().unwrap();
    let there = lv
        .snapshot
        .jobs
        .iter()
        .find(|j| j.name == "moving")
        .unwrap();
    assert_eq!(there.phase, "Cancelled");
    assert!(
        there.reasons[0].contains("moved to site-b"),
        "{:?}",
        there.reasons
    );
    let bv = b.sync().unwrap();
    let here = bv
        .snapshot
        .jobs
        .iter()
        .find(|j| j.name == "moving")
        .unwrap();
    assert_eq!(here.phase, "Running");
    assert!(!here.movable);
    let spec_b = b.spec("ml-prod/moving").unwrap();
    assert_eq!(spec_b.moved_from.as_deref(), Some("lab"));
    let ex = b.explain("ml-prod/moving").unwrap();
    assert!(ex.dispatched.unwrap().starts_with("moved from lab"));
    // The running one stayed; nothing moves again.
    let r = lv.snapshot.jobs.iter().find(|j| j.name == "runs").unwrap();
    assert_eq!(r.phase, "Running");
    assert_eq!(Mover::default().look(&sites), vec![]);
    for s in &sites {
        s.engine.shutdown();
    }
}

/// A job applied to one cluster whose file asks for `crater.ai/cluster: auto` (a
/// TrainJob applied to the managing cluster) is sent once to the cluster where it
/// starts first: withdrawn where it was applied (saying where it went), submitted
/// there with the why; one that starts first where it was applied stays and runs
/// there; one that names the other cluster goes there; none is looked at twice.
#[test]
fn a_job_whose_file_asks_for_auto_is_sent_once_where_it_starts_first() {
    use maar::federation::{Moved, Mover};
    let a = two();
    let sites = a.sites.clone();
    let (lab, b) = (&sites[0].engine, &sites[1].engine);
    let actor = maar_scheduler::Actor::system("clusters-test");
    let file = |name: &str, cluster: &str, gpu: &str| {
        format!(
            "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata:\n  name: {name}\n  namespace: ml-prod\n  labels:\n    crater.ai/cluster: {cluster}\nspec:\n  resources:\n    pool: training-gpu\n    gpu:\n{gpu}"
        )
    };
    let submit = |text: String| {
        let spec = maar::load::parse_manifest("tj.yaml", &text).unwrap();
        lab.apply(
            actor.clone(),
            maar_scheduler::Command::Submit(Box::new(spec)),
        )
        .unwrap();
    };
    // Only site-b has H200s and L40Ses; a job of no GPU starts now in the lab (where
    // it was applied: it is never looked at); the third names site-b.
    submit(file(
        "h200",
        "auto",
        "      count: 1\n      models: [h200]\n",
    ));
    submit(file("anywhere", "auto", "      count: 0\n"));
    submit(file(
        "named",
        "site-b",
        "      count: 1\n      models: [l40s]\n",
    ));
    let lv = lab.sync().unwrap();
    let job = |v: &maar::engine::View, n: &str| {
        v.snapshot
            .jobs
            .iter()
            .find(|j| j.name == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(job(&lv, "h200").to_send.as_deref(), Some("auto"));
    assert_eq!(job(&lv, "h200").phase, "Pending");
    let mut mover = Mover::default();
    let mut sent = mover.look(&sites);
    sent.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
    let names: Vec<(&str, &str)> = sent
        .iter()
        .map(|m| match m {
            Moved::Done { job, to, .. } => (job.as_str(), to.as_str()),
            Moved::Refused { job, .. } => (job.as_str(), "refused"),
        })
        .collect();
    assert!(names.contains(&("ml-prod/h200", "site-b")), "{sent:?}");
    let Some(Moved::Done { why, .. }) = sent
        .iter()
        .find(|m| matches!(m, Moved::Done { job, .. } if job == "ml-prod/h200"))
    else {
        panic!("{sent:?}")
    };
    assert!(
        why.starts_with("sent to site-b: starts now on h200-"),
        "{why}"
    );
    assert!(why.contains("; in lab it "), "{why}");
    // The one that named site-b went there, saying so.
    let lv = lab.sync().unwrap();
    let named = job(&lv, "named");
    assert_eq!(named.phase, "Cancelled");
    assert!(names.contains(&("ml-prod/named", "site-b")), "{sent:?}");
    let why_named = b.spec("ml-prod/named").unwrap().dispatched.unwrap();
    assert!(
        why_named.starts_with(
            "sent to site-b: its file asks for it (crater.ai/cluster: site-b); it starts now"
        ),
        "{why_named}"
    );
    // Withdrawn in the lab, saying where; running in site-b, sent (not moved: it may
    // still move once), the why kept.
    let h = job(&lv, "h200");
    assert_eq!(h.phase, "Cancelled");
    assert!(h.reasons[0].contains("sent to site-b"), "{:?}", h.reasons);
    let bv = b.sync().unwrap();
    assert_eq!(job(&bv, "h200").phase, "Running");
    assert_eq!(job(&bv, "h200").to_send, None);
    let spec_b = b.spec("ml-prod/h200").unwrap();
    assert_eq!(spec_b.moved_from, None);
    assert!(spec_b.dispatched.unwrap().starts_with("sent to site-b"));
    // The job that starts as soon in the lab stayed there.
    assert_eq!(job(&lv, "anywhere").phase, "Running");
    assert!(!names.iter().any(|n| n.0 == "ml-prod/anywhere"), "{sent:?}");
    // Decided once: nothing is sent again, by this mover or by a look a second later.
    assert_eq!(mover.look(&sites), vec![]);
    for s in &sites {
        s.engine.shutdown();
    }
}

/// Where the federation's mover runs, a job applied to one cluster whose file names
/// another is not started where it was applied, even with room there: it waits,
/// saying so, until the mover sends it (it runs in the named cluster only); one asking
/// for `auto` waits for the mover's choice and, left here, starts here; and one that
/// names a cluster no federation has waits, told why, instead of running here.
#[test]
fn a_job_naming_another_cluster_is_not_started_where_it_was_applied() {
    use maar::federation::{Moved, Mover, Site as FedSite};
    let sites = vec![
        FedSite {
            name: "lab".into(),
            engine: engine_of("lab", 3600, Some("lab")),
        },
        FedSite {
            name: "site-b".into(),
            engine: engine_of("site-b", 3600, Some("site-b")),
        },
    ];
    let (lab, b) = (&sites[0].engine, &sites[1].engine);
    let actor = maar_scheduler::Actor::system("clusters-test");
    // No GPU: both sites could start it now.
    let submit = |name: &str, cluster: &str| {
        let text = format!(
            "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata:\n  name: {name}\n  namespace: ml-prod\n  annotations:\n    crater.ai/cluster: {cluster}\nspec:\n  resources:\n    pool: training-gpu\n    gpu:\n      count: 0\n"
        );
        let spec = maar::load::parse_manifest("tj.yaml", &text).unwrap();
        lab.apply(
            actor.clone(),
            maar_scheduler::Command::Submit(Box::new(spec)),
        )
        .unwrap();
    };
    submit("named", "site-b");
    submit("chosen", "auto");
    submit("nowhere", "mars");
    let job =
        |v: &maar::engine::View, n: &str| v.snapshot.jobs.iter().find(|j| j.name == n).cloned();
    let lv = lab.sync().unwrap();
    for n in ["named", "chosen", "nowhere"] {
        assert_eq!(job(&lv, n).unwrap().phase, "Pending", "{n}");
    }
    assert_eq!(
        job(&lv, "named").unwrap().reasons[0],
        "waiting to be sent to cluster site-b (crater.ai/cluster: site-b); it does not run in lab"
    );
    let ex = lab.explain("ml-prod/named").unwrap();
    assert!(
        ex.to_string()
            .contains("Reason:    waiting to be sent to cluster site-b"),
        "{ex}"
    );
    assert!(ex.suggestions.is_empty(), "{:?}", ex.suggestions);
    let mut mover = Mover::default();
    let sent = mover.look(&sites);
    assert!(
        sent.iter().any(
            |m| matches!(m, Moved::Done { job, to, .. } if job == "ml-prod/named" && to == "site-b")
        ),
        "{sent:?}"
    );
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (lv, bv) = (lab.sync().unwrap(), b.sync().unwrap());
    // Never run in the lab: withdrawn as it waited; running in site-b.
    let named = job(&lv, "named").unwrap();
    assert_eq!(named.phase, "Cancelled");
    assert_eq!(named.run_s, 0);
    assert_eq!(job(&bv, "named").unwrap().phase, "Running");
    // `auto`: both start it now, the lab is listed first: it stays, by a `keep`
    // command (recorded and audited as the federation's), whose cycle starts it.
    let chosen = job(&lv, "chosen").unwrap();
    assert_eq!(chosen.to_send, None);
    assert_eq!(chosen.phase, "Running");
    assert_eq!(job(&lv, "named").unwrap().phase, "Cancelled");
    assert!(job(&bv, "chosen").is_none());
    // A name no cluster has: still waiting, told why, in no queue.
    let nowhere = job(&lv, "nowhere").unwrap();
    assert_eq!(nowhere.phase, "Pending");
    assert!(
        nowhere.reasons[0]
            .contains("asks for cluster mars (crater.ai/cluster), which is none of lab, site-b"),
        "{:?}",
        nowhere.reasons
    );
    assert!(lv
        .snapshot
        .events
        .iter()
        .any(|e| e.reason == "KeptHere" && e.object == "job/ml-prod/chosen"));
    for s in &sites {
        s.engine.shutdown();
    }
}

/// With one cluster of a federation answering (the others not joined yet), the mover
/// still decides: an `auto` job is left in the cluster that answers (not held there
/// untold until another joins).
#[test]
fn a_federation_of_one_answering_cluster_still_decides() {
    use maar::federation::{Mover, Site as FedSite};
    let sites = vec![FedSite {
        name: "lab".into(),
        engine: engine_of("lab", 3600, Some("lab")),
    }];
    let lab = &sites[0].engine;
    let actor = maar_scheduler::Actor::system("clusters-test");
    let text = "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata:\n  name: alone\n  namespace: ml-prod\n  annotations:\n    crater.ai/cluster: auto\nspec:\n  resources:\n    pool: training-gpu\n    gpu:\n      count: 0\n";
    let spec = maar::load::parse_manifest("tj.yaml", text).unwrap();
    lab.apply(
        actor.clone(),
        maar_scheduler::Command::Submit(Box::new(spec)),
    )
    .unwrap();
    assert_eq!(lab.held_jobs().unwrap().len(), 1);
    let mut mover = Mover::default();
    assert_eq!(mover.look(&sites), vec![]);
    assert_eq!(lab.held_jobs().unwrap(), vec![]);
    let events = lab.sync().unwrap().snapshot.events.clone();
    assert!(
        events
            .iter()
            .any(|e| e.reason == "KeptHere" && e.object == "job/ml-prod/alone"),
        "{events:?}"
    );
    for s in &sites {
        s.engine.shutdown();
    }
}

/// Roles may differ per cluster: the roles file's entry under `clusters:` decides in
/// that cluster (here carol operates site-b and only views the lab), each engine
/// judging by its own cluster's.
#[test]
fn roles_may_differ_per_cluster() {
    let roles = maar::roles::Roles::parse(
        std::path::Path::new("roles.yaml"),
        "users: {carol: viewer}\nclusters:\n  site-b:\n    users: {carol: operator}\n",
    )
    .unwrap();
    let start = |scenario: &str| {
        let d = Demo::new(
            load_scenario(Some(std::path::Path::new(scenario))).unwrap(),
            None,
        )
        .unwrap();
        engine::start(
            maar::backend::from_demo(d),
            None,
            EngineOptions {
                paused: true,
                roles: std::sync::Arc::new(roles.clone()),
                ..Default::default()
            },
        )
    };
    let (lab, b) = (start("lab"), start("site-b"));
    let carol = maar_scheduler::Actor {
        user: "carol".into(),
        uid: Some(5003),
        from: None,
    };
    let cordon = |node: &str| maar_scheduler::Command::CordonNode { node: node.into() };
    let no = lab.apply(carol.clone(), cordon("a100-01")).unwrap_err();
    assert!(no.to_string().contains("viewer"), "{no}");
    let g = b.grant(&carol).unwrap();
    assert_eq!(g.role, maar_scheduler::Role::Operator);
    assert!(g.why.contains("(clusters: site-b)"), "{}", g.why);
    b.apply(carol.clone(), cordon("h200-01")).unwrap();
    assert!(b
        .sync()
        .unwrap()
        .snapshot
        .nodes
        .iter()
        .any(|n| n.name == "h200-01" && n.cordoned));
    lab.shutdown();
    b.shutdown();
}

/// Every cluster's rows are the present's: looking at the shown cluster's past lists
/// that cluster alone (no CLUSTER column), and `:now` brings every cluster's rows back
/// at once.
#[test]
fn the_past_lists_one_cluster_and_now_brings_every_clusters_rows_back() {
    // Two recorded sites (the past is read from the state file), the lab an hour on.
    let dir = std::env::temp_dir().join(format!("maar-clusters-past-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let recorded = |site: &str| {
        let (text, sc) = maar::load::scenario_text(Some(std::path::Path::new(site))).unwrap();
        let (loaded, rec) =
            maar::backend::fresh_demo(Some(&dir.join(format!("{site}.db"))), &text, sc, None)
                .unwrap();
        engine::start(
            loaded,
            rec,
            EngineOptions {
                paused: true,
                ..Default::default()
            },
        )
    };
    let (lab, b) = (recorded("lab"), recorded("site-b"));
    lab.set_speed(20_000.0);
    lab.set_paused(false).unwrap();
    for _ in 0..300 {
        if lab.sync().unwrap().snapshot.time_s >= 3600 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    lab.set_paused(true).unwrap();
    let mut a = App::with_sites(vec![
        Site {
            name: "lab".into(),
            engine: lab,
        },
        Site {
            name: "site-b".into(),
            engine: b,
        },
    ]);
    a.actor = maar_scheduler::Actor::system("clusters-test");
    line(&mut a, "cluster all");
    line(&mut a, "nodes");
    assert_eq!(a.rows.len(), 42 + 14);
    key(&mut a, '[');
    assert!(a.past.is_some(), "{}", a.message);
    assert!(!a.all_rows());
    assert_eq!(a.rows.len(), 42);
    assert!(!screen(&a, 160, 50).contains("CLUSTER"));
    line(&mut a, "now");
    assert!(a.past.is_none());
    assert!(a.all_rows());
    assert_eq!(a.rows.len(), 42 + 14);
    for s in &a.sites {
        s.engine.shutdown();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cluster that did not answer at the start is a row saying so while the others go
/// on; when it answers (tried again every 10 s) it joins: its row, its engine, `C`.
#[test]
fn a_cluster_that_did_not_answer_at_the_start_is_shown_so_and_joins_when_it_does() {
    let joining = std::sync::Arc::new(maar::federation::Joining::default());
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = tries.clone();
    joining.wait_for(
        "site-b".into(),
        "the API server does not answer".into(),
        Box::new(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(("site-b".into(), engine("site-b", 600), "demo site-b".into()))
        }),
    );
    let mut a = App::with_sites_joining(
        vec![Site {
            name: "lab".into(),
            engine: engine("lab", 600),
        }],
        Some(joining.clone()),
        false,
    );
    assert_eq!(a.site_rows.len(), 2);
    let down = a.site_rows[1].down.clone().unwrap_or_default();
    assert!(
        down.starts_with(
            "not answering since the start, tried every 10 s: the API server does not answer"
        ),
        "{down}"
    );
    assert!(screen(&a, 160, 40).contains("not answering since the start"));
    // It answers at the next try.
    for _ in 0..150 {
        a.refresh_sites();
        if a.sites.len() == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(a.sites.len(), 2, "joined");
    assert_eq!(tries.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(a.site_rows.len(), 2);
    assert_eq!(a.site_rows[1].name, "site-b");
    assert_eq!(a.site_rows[1].down, None);
    key(&mut a, 'C');
    assert_eq!(a.shown_cluster(), "site-b");
    joining.stop();
    a.sites[0].engine.shutdown();
}

/// Quota requests of every cluster on one Quotas screen (`:cluster all`), each naming
/// its cluster; approving one acts in its own cluster.
#[test]
fn a_quota_request_of_another_cluster_is_approved_there() {
    let mut a = two();
    let b = a.sites[1].engine.clone();
    b.apply(
        maar_scheduler::Actor::system("clusters-test"),
        maar_scheduler::Command::RequestQuota {
            project: "ml-prod".into(),
            pool: "training-gpu".into(),
            gpus: 2,
            reserved: false,
            reason: "a deadline".into(),
        },
    )
    .unwrap();
    // Its view published with the request before the rows are put together.
    b.sync().unwrap();
    line(&mut a, "cluster all");
    line(&mut a, "quotas");
    let text = screen(&a, 160, 50);
    assert!(text.contains("CLUSTER"), "{text}");
    let at = a
        .rows
        .iter()
        .position(|&r| a.snapshot.quota_requests[r].cluster == "site-b")
        .expect("site-b's request listed");
    a.selected = at;
    assert_eq!(a.site, 0);
    key(&mut a, 'a');
    if matches!(a.mode, Mode::Confirm(..)) {
        key(&mut a, 'y');
    }
    assert_eq!(a.site, 1, "{}", a.message);
    let v = b.sync().unwrap();
    assert!(
        v.snapshot
            .quota_requests
            .iter()
            .any(|r| r.project == "ml-prod" && r.status == "Approved"),
        "{:?}",
        v.snapshot.quota_requests
    );
    for s in &a.sites {
        s.engine.shutdown();
    }
}

/// Alerts of every cluster on one Alerts screen (`:cluster all`), each naming its
/// cluster; Enter goes to its object in its own cluster, also with one cluster shown.
#[test]
fn alerts_name_their_cluster_and_lead_to_their_object() {
    let mut a = two();
    // In each site a job no node can hold; an hour on, it is alerted as Pending.
    for s in &a.sites {
        let mut stuck = maar_scheduler::JobSpec::train("stuck", "ml-prod", "training-gpu", 64);
        stuck.gpu.models = vec![];
        s.engine
            .apply(
                maar_scheduler::Actor::system("clusters-test"),
                maar_scheduler::Command::Submit(Box::new(stuck)),
            )
            .unwrap();
        s.engine.set_speed(50_000.0);
        s.engine.set_paused(false).unwrap();
    }
    let open = |a: &App| {
        a.sites
            .iter()
            .map(|s| {
                s.engine
                    .sync()
                    .unwrap()
                    .snapshot
                    .alerts
                    .iter()
                    .filter(|x| x.state == "open" && x.object == "job/ml-prod/stuck")
                    .count()
            })
            .collect::<Vec<_>>()
    };
    for _ in 0..400 {
        if open(&a).iter().all(|&n| n > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for s in &a.sites {
        s.engine.set_paused(true).unwrap();
    }
    assert_eq!(open(&a), vec![1, 1], "each site alerts its stuck job");
    a.refresh();
    line(&mut a, "cluster all");
    line(&mut a, "alerts");
    assert!(screen(&a, 160, 50).contains("CLUSTER"));
    let at = a
        .rows
        .iter()
        .position(|&r| a.alerts[r].cluster == "site-b" && a.alerts[r].object == "job/ml-prod/stuck")
        .expect("site-b's alert");
    a.selected = at;
    let object = a.alerts[a.rows[at]].object.clone();
    a.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(a.site, 1, "{}", a.message);
    assert_eq!(a.screen, Screen::Jobs);
    assert!(a.message.contains("(from the alert)"), "{}", a.message);
    let j = &a.snapshot.jobs[a.rows[a.selected]];
    assert_eq!(
        format!("job/{}/{}", j.project, j.name),
        object,
        "the selection is the alert's job"
    );
    // With one cluster shown, Enter on an alert goes to its job too.
    line(&mut a, "cluster lab");
    line(&mut a, "alerts");
    let at = a
        .rows
        .iter()
        .position(|&r| a.alerts[r].object == "job/ml-prod/stuck")
        .expect("the lab's alert");
    a.selected = at;
    a.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(a.message.contains("(from the alert)"), "{}", a.message);
    assert_eq!(a.site, 0);
    for s in &a.sites {
        s.engine.shutdown();
    }
}

/// Events of every cluster on one Events screen (`:cluster all`), each naming its
/// cluster, the filter's `cluster:` field keeping one.
#[test]
fn events_name_their_cluster() {
    let mut a = two();
    line(&mut a, "cluster all");
    line(&mut a, "events");
    let n = |a: &App, c: &str| {
        a.rows
            .iter()
            .filter(|&&r| a.snapshot.events[r].cluster == c)
            .count()
    };
    assert!(n(&a, "lab") > 0 && n(&a, "site-b") > 0);
    assert!(screen(&a, 160, 50).contains("CLUSTER"));
    key(&mut a, '/');
    for c in "cluster:site-b".chars() {
        key(&mut a, c);
    }
    a.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(n(&a, "site-b") > 0);
    assert_eq!(n(&a, "lab"), 0);
    for s in &a.sites {
        s.engine.shutdown();
    }
}

/// The Cost screen with every cluster's rows (`:cluster all`): each project's and
/// department's bill with its cluster first, the total over every cluster; one
/// cluster shown again: its own rows and total.
#[test]
fn costs_name_their_cluster_and_sum_over_all() {
    let mut a = two();
    let lab = a.sites[0].engine.view().snapshot.costs.clone();
    let b = a.sites[1].engine.view().snapshot.costs.clone();
    line(&mut a, "cluster all");
    line(&mut a, "cost");
    let c = &a.snapshot.costs;
    assert_eq!(c.projects.len(), lab.projects.len() + b.projects.len());
    assert!(c.projects.iter().any(|p| p.cluster == "lab"));
    assert!(c.projects.iter().any(|p| p.cluster == "site-b"));
    assert!((c.total - (lab.total + b.total)).abs() < 1e-6);
    let text = screen(&a, 160, 50);
    assert!(text.contains("CLUSTER"), "{text}");
    assert!(text.contains("over every cluster"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("site-b") && l.contains("ml-prod")),
        "{text}"
    );
    line(&mut a, "cluster lab");
    line(&mut a, "cost");
    assert_eq!(a.snapshot.costs.projects.len(), lab.projects.len());
    assert!(!screen(&a, 160, 50).contains("CLUSTER"));
    for s in &a.sites {
        s.engine.shutdown();
    }
}

/// A synthetic cluster of `nodes` nodes x 8 GPUs (pool training-gpu, projects
/// project-0..9), `jobs` one-GPU jobs submitted and one cycle run, the jobs it could
/// not place withdrawn: nothing waits there.
fn synthetic_site(name: &str, nodes: usize, jobs: usize) -> Site {
    let mut cl = maar_demo::synthetic::cluster(nodes, 8);
    maar_demo::synthetic::submit_single_gpu_jobs(&mut cl, jobs, 1);
    cl.schedule();
    let waiting: Vec<u32> = cl.pending_jobs().map(|j| j.id).collect();
    for id in waiting {
        cl.complete(id, false, "withdrawn");
    }
    let loaded = maar::backend::Loaded::new(
        maar_scheduler::Core::new(cl),
        Box::new(maar_scheduler::kit::Bare),
        maar::record::Meta::of("demo", name),
    );
    Site {
        name: name.into(),
        engine: engine::start(
            loaded,
            None,
            EngineOptions {
                paused: true,
                ..Default::default()
            },
        ),
    }
}

/// A job's `Elsewhere:` names how it would fare in a cluster too large to copy for an
/// explanation when that cluster needs no copy to say (nothing waits there for room).
#[test]
fn elsewhere_asks_a_large_cluster_where_nothing_waits() {
    let small = synthetic_site("small", 2, 40);
    let big = synthetic_site("big", 2_100, 1_000);
    // A job of the small cluster that waits there (its 16 cards are taken).
    let mut spec = maar_scheduler::JobSpec::train("waits", "project-1", "training-gpu", 4);
    spec.cpu_milli = 1000;
    small
        .engine
        .apply(
            maar_scheduler::Actor::system("clusters-test"),
            maar_scheduler::Command::Submit(Box::new(spec)),
        )
        .unwrap();
    let mut a = App::with_sites(vec![small, big]);
    a.actor = maar_scheduler::Actor::system("clusters-test");
    let elsewhere = a.elsewhere_of("project-1/waits");
    assert_eq!(elsewhere.len(), 1, "{elsewhere:?}");
    assert!(
        elsewhere[0].starts_with("big: starts now on node-"),
        "{elsewhere:?}"
    );
    for s in &a.sites {
        s.engine.shutdown();
    }
}

/// The Quotas screen with every cluster's rows sums each project's GPUs over all of
/// them (CLUSTER `(all)`), as `maar get quotas --cluster all` does.
#[test]
fn quotas_sum_each_project_over_every_cluster() {
    let mut a = two();
    line(&mut a, "cluster all");
    line(&mut a, "quotas");
    let sums = maar_scheduler::metrics::project_sums(&a.snapshot.quotas);
    let ml = sums.iter().find(|p| p.project == "ml-prod").unwrap();
    let rows: Vec<_> = a
        .snapshot
        .quotas
        .iter()
        .filter(|q| q.project == "ml-prod")
        .collect();
    assert_eq!(
        ml.used_gpu_milli,
        rows.iter().map(|q| q.used.gpu_milli).sum::<u64>()
    );
    assert_eq!(
        ml.max_gpu_milli,
        rows.iter().map(|q| q.max.gpu_milli).sum::<Option<u64>>()
    );
    assert_eq!(ml.clusters, ["lab", "site-b"]);
    let text = screen(&a, 200, 60);
    let line_of = text
        .lines()
        .find(|l| l.contains("(all)") && l.contains("ml-prod"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line_of.contains("(every pool)"), "{line_of}");
    let max = ml.max_gpu_milli.unwrap() / 1000;
    assert!(line_of.contains(&format!("/{max} ")), "{line_of}");
    for s in &a.sites {
        s.engine.shutdown();
    }
}

/// With every cluster's rows shown, a typed command acts in the cluster whose node it
/// names, as acting on its row does (a QA pass: `:cluster all`, then `:cordon
/// l40s-05` was refused as "no node named 'l40s-05'" while the table listed site-b's).
#[test]
fn a_typed_command_in_the_all_rows_view_acts_in_the_cluster_it_names() {
    let mut a = two();
    line(&mut a, "nodes");
    line(&mut a, "cluster all");
    assert!(a.all_sites);
    assert_eq!(a.site, 0, "the lab in focus");
    line(&mut a, "cordon l40s-05");
    assert_eq!(a.site, 1, "site-b's node: site-b acts");
    assert!(a.all_sites, "still every cluster's rows");
    assert!(
        a.message.starts_with("cordon node l40s-05?"),
        "{}",
        a.message
    );
    key(&mut a, 'y');
    assert!(a.message.contains("cordoned"), "{}", a.message);
    // A node of the lab: the lab acts.
    line(&mut a, "cordon a100-03");
    assert_eq!(a.site, 0);
    key(&mut a, 'y');
    assert!(a.message.contains("a100-03 cordoned"), "{}", a.message);
}

/// The command line reads the demo's two sites by name where `maar demo --clusters 2`
/// recorded them and the config file lists no clusters (a QA pass: `get jobs
/// --cluster site-b` after the two-site demo said "no `clusters:` in config.yaml").
#[test]
fn the_command_line_reads_the_two_site_demo_by_cluster_name() {
    let d = std::env::temp_dir().join(format!("maar-clusters-{}-demo2", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("maar")).unwrap();
    let maar = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_maar"))
            .args(args)
            .env("XDG_STATE_HOME", &d)
            .env("XDG_CONFIG_HOME", d.join("config"))
            .output()
            .unwrap()
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    // Only the lab recorded: no second site to name.
    for (name, yaml) in [
        ("lab", maar::load::BUILTIN_LAB),
        ("site-b", maar_demo::SITE_B_YAML),
    ] {
        let o = maar(&["get", "nodes", "--cluster", "site-b"]);
        if name == "site-b" {
            assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
            assert!(
                text(&o.stderr).contains("no `clusters:`"),
                "{}",
                text(&o.stderr)
            );
        }
        let p = d.join("maar").join(format!("{name}.db"));
        drop(
            maar::backend::fresh_demo(
                Some(&p),
                yaml,
                maar::load::parse_scenario(name, yaml).unwrap(),
                None,
            )
            .unwrap(),
        );
    }
    let o = maar(&["get", "nodes", "--cluster", "site-b"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("h200-01") && !text(&o.stdout).contains("a100-01"));
    let o = maar(&["get", "nodes", "--cluster", "all"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("CLUSTER") && out.contains("a100-01") && out.contains("h200-01"),
        "{out}"
    );
}
