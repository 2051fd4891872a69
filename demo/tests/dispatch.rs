//! Many clusters: a job goes to the cluster where it starts first, and what each
//! cluster is said to offer is what that cluster's own explain says once the job is
//! really submitted there (the demo's two sites, `maar demo --clusters 2`).

use maar_demo::{Demo, Scenario, LAB_YAML, SITE_B_YAML};
use maar_scheduler::dispatch::{choose, Prospect};
use maar_scheduler::forecast::Basis;
use maar_scheduler::{Actor, Command, JobSpec, Phase};

fn scenario(text: &str) -> Scenario {
    serde_saphyr::from_str(text).expect("scenario parses")
}

fn sites(at: u64) -> Vec<(String, Demo)> {
    [("lab", LAB_YAML), ("site-b", SITE_B_YAML)]
        .into_iter()
        .map(|(name, text)| {
            let mut d = Demo::new(scenario(text), None).expect("builds");
            d.run_until(at);
            (name.to_string(), d)
        })
        .collect()
}

/// The job really submitted to a copy of the site (the simulation's own cycle), and
/// what its explain then says: started at once, or its start and first line.
fn explained(d: &Demo, spec: &JobSpec) -> Result<(Option<u64>, Basis, String), String> {
    let mut d = Demo::from_parts(d.core.clone(), d.sim.clone());
    let mut spec = spec.clone();
    let full = |s: &JobSpec| format!("{}/{}", s.project, s.name);
    while d.cluster().job_id(&full(&spec)).is_ok() {
        spec.name.push_str("-x");
    }
    d.command(
        Actor::system("test"),
        Command::Submit(Box::new(spec.clone())),
    )
    .result
    .map_err(|e| e.to_string())?;
    let c = d.cluster();
    let id = c.job_id(&full(&spec)).unwrap();
    if c.jobs[id as usize].phase == Phase::Running {
        return Ok((Some(0), Basis::Estimate, String::new()));
    }
    let ex = c.explain(id);
    let basis = match ex.expected_start_basis {
        Some("estimate") => Basis::Estimate,
        Some("history") => Basis::History,
        Some("never") => Basis::Never,
        _ => Basis::Unknown,
    };
    Ok((
        ex.expected_start_s.map(|t| t.saturating_sub(c.now)),
        basis,
        ex.reason,
    ))
}

fn prospects(sites: &[(String, Demo)], spec: &JobSpec) -> Vec<(String, Result<Prospect, String>)> {
    sites
        .iter()
        .map(|(n, d)| (n.clone(), d.core.prospect(spec)))
        .collect()
}

/// Every Pending job of both sites, offered to both at 3h of the demo day: each
/// site's prospect is what its own explain says after a real submit (start, basis,
/// first line), and the site chosen is one where it starts soonest.
#[test]
fn each_sites_prospect_is_its_own_explain_and_the_soonest_is_chosen() {
    let sites = sites(3 * 3600);
    let mut specs: Vec<JobSpec> = Vec::new();
    for (_, d) in &sites {
        specs.extend(
            d.cluster()
                .jobs
                .iter()
                .filter(|j| j.phase == Phase::Pending)
                .map(|j| {
                    // A job of another name (one of that name stays where it is).
                    let mut s = JobSpec::clone(&j.spec);
                    s.name.push_str("-again");
                    s
                })
                .take(12),
        );
    }
    assert!(
        specs.len() >= 6,
        "too few Pending jobs to try: {}",
        specs.len()
    );
    let (mut now_somewhere, mut waits) = (0, 0);
    for spec in &specs {
        let ps = prospects(&sites, spec);
        for ((name, d), (_, p)) in sites.iter().zip(&ps) {
            let truth = explained(d, spec);
            match (p, &truth) {
                (Ok(p), Ok((start, basis, reason))) => {
                    assert_eq!(p.start_in, *start, "{name} {}: {p:?}", spec.name);
                    assert_eq!(p.basis, *basis, "{name} {}", spec.name);
                    assert_eq!(&p.reason, reason, "{name} {}", spec.name);
                }
                (Err(a), Err(b)) => assert_eq!(a, b),
                _ => panic!("{name} {}: prospect {p:?}, submit {truth:?}", spec.name),
            }
        }
        let Some(choice) = choose(&ps) else {
            continue;
        };
        let best = ps[choice.index].1.as_ref().unwrap();
        for (_, p) in ps.iter() {
            if let (Ok(p), Some(b)) = (p, best.start_in) {
                assert!(
                    p.start_in.is_none_or(|s| s >= b),
                    "{}: {}",
                    spec.name,
                    choice.why
                );
            }
        }
        assert!(choice
            .why
            .starts_with(&format!("sent to {}: ", choice.cluster)));
        match best.start_in {
            Some(0) => now_somewhere += 1,
            Some(_) => waits += 1,
            None => {}
        }
    }
    // The two sites differ enough that some jobs start at once only by moving.
    assert!(now_somewhere > 0, "no job starts now anywhere");
    let _ = waits;
}

/// A job only one site's cards can run goes there, and the other is said never to
/// run it; a project one site does not know is refused there, named.
#[test]
fn a_job_goes_where_its_cards_are_and_a_site_that_refuses_says_why() {
    let sites = sites(3600);
    let lab = &sites[0].1;
    let mut spec = JobSpec::clone(
        &lab.cluster()
            .jobs
            .iter()
            .find(|j| j.spec.project == "ml-prod" && j.spec.gpu.count == 1)
            .expect("an ml-prod job")
            .spec,
    );
    spec.name = "h200-only".into();
    spec.gpu.models = vec!["h200".into()];
    let ps = prospects(&sites, &spec);
    let choice = choose(&ps).expect("a site");
    assert_eq!(choice.cluster, "site-b", "{}", choice.why);
    let lab_p = ps[0].1.as_ref().unwrap();
    assert_eq!(lab_p.basis, Basis::Never, "{lab_p:?}");
    assert!(
        choice.why.contains("in lab it can never run as asked: "),
        "{}",
        choice.why
    );
    // The lab's AMD project quota has no pool at site-b.
    let rocm = lab
        .cluster()
        .jobs
        .iter()
        .find(|j| j.spec.pool == "amd-gpu")
        .expect("the AMD job");
    let mut spec = JobSpec::clone(&rocm.spec);
    spec.name = "rocm-again".into();
    let ps = prospects(&sites, &spec);
    assert!(ps[1].1.is_err(), "{:?}", ps[1].1);
    let choice = choose(&ps).expect("the lab");
    assert_eq!(choice.cluster, "lab");
    assert!(
        choice.why.contains("; site-b refuses it: "),
        "{}",
        choice.why
    );
}

/// Ties go to the cheaper GPU-hour: a small job that starts now at both sites goes
/// where its card costs less, and the words give the price.
#[test]
fn a_tie_goes_to_the_cheaper_card() {
    let sites = sites(60);
    let lab = &sites[0].1;
    let mut spec = JobSpec::clone(
        &lab.cluster()
            .jobs
            .iter()
            .find(|j| j.spec.project == "ml-prod")
            .expect("an ml-prod job")
            .spec,
    );
    spec.name = "small".into();
    spec.gpu.count = 1;
    spec.gpu.models = Vec::new();
    spec.gpu.memory_per_card = None;
    spec.affinity = maar_scheduler::model::Affinity::Any;
    spec.cpu_milli = 1000;
    spec.memory = 1 << 30;
    spec.disk = 0;
    let ps = prospects(&sites, &spec);
    let started: Vec<&Prospect> = ps.iter().filter_map(|(_, p)| p.as_ref().ok()).collect();
    assert!(started.iter().all(|p| p.start_in == Some(0)), "{started:?}");
    let choice = choose(&ps).expect("a site");
    let chosen = ps[choice.index].1.as_ref().unwrap();
    let other = ps[1 - choice.index].1.as_ref().unwrap();
    assert!(
        chosen.price.unwrap_or(f64::INFINITY) <= other.price.unwrap_or(f64::INFINITY),
        "{}",
        choice.why
    );
    assert!(choice.why.contains("/GPU-hour"), "{}", choice.why);
}

/// A job already in one cluster is not sent to another: the choice is the cluster that
/// has it (where a submit is refused as a duplicate), and the words say why.
#[test]
fn a_job_already_in_a_cluster_is_sent_nowhere_else() {
    let sites = sites(3600);
    let lab = &sites[0].1;
    let j = lab
        .cluster()
        .jobs
        .iter()
        .find(|j| j.spec.project == "ml-prod" && j.spec.gpu.count == 1)
        .expect("an ml-prod job");
    let spec = JobSpec::clone(&j.spec);
    let ps = prospects(&sites, &spec);
    assert!(ps[0].1.as_ref().unwrap().exists);
    assert!(!ps[1].1.as_ref().unwrap().exists);
    let choice = choose(&ps).unwrap();
    assert_eq!(choice.cluster, "lab");
    assert!(choice.why.starts_with("already in lab: "), "{}", choice.why);
}

/// A job the federation leaves here (its file asked for `auto`; the `keep` command) is
/// placed at once, not at the simulation's next event (up to minutes of simulated time
/// later, when leaving it was an observation); held, no instant places it.
#[test]
fn a_job_the_federation_leaves_here_starts_at_the_next_instant() {
    let (_, mut d) = sites(600).into_iter().next().expect("the lab");
    d.core.set_federation(Some("lab".into()));
    let mut spec = JobSpec::train("asks-auto", "ml-prod", "training-gpu", 0);
    spec.cluster = Some("auto".into());
    d.apply(Command::Submit(Box::new(spec))).expect("submitted");
    let phase = |d: &Demo| {
        let c = d.cluster();
        c.jobs[c.job_id("ml-prod/asks-auto").unwrap() as usize].phase
    };
    let t = d.now();
    d.run_until(t + 1);
    assert_eq!(phase(&d), Phase::Pending, "held for the federation");
    let out = d.command(
        Actor::system("federation"),
        Command::Keep {
            job: "ml-prod/asks-auto".into(),
            why: Some("no other cluster starts it sooner".into()),
        },
    );
    assert!(out.is_ok(), "{:?}", out.result);
    d.run_until(t + 2);
    assert_eq!(phase(&d), Phase::Running);
}
