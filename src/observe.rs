//! What Prometheus and the kubelet read of a running maar (`--metrics ADDR`):
//! `GET /metrics` (prometheus-client's text), `GET /healthz` (the engine answers) and
//! `GET /readyz` (it answers and has read its cluster: leading, or standing by on
//! another maar's lease).
//!
//! Names follow kube-scheduler's where the meaning is the same
//! (`scheduler_pending_pods`, `scheduler_schedule_attempts_total`,
//! `scheduler_preemption_victims`, `scheduler_preemption_attempts_total`,
//! `scheduler_pod_scheduling_sli_duration_seconds`), so the dashboards and alerts that
//! watch kube-scheduler watch maar too; maar's own are `maar_*`. kube-scheduler's
//! per-attempt latency (`scheduler_scheduling_attempt_duration_seconds`) has no
//! counterpart: maar tries the whole queue in one cycle, timed as
//! `maar_scheduling_step_duration_seconds`.
//!
//! The engine feeds an [`Observe`]: its events as they happen (placements, failed
//! binds, preemptions, waits), its published views (gauges: GPUs, quota, the queue),
//! and the time its steps, writes and questions take. The server
//! (`metrics_server.rs`) only encodes, and asks the engine for the probes; this module
//! knows neither, so the engine may hold it without a circle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use maar_scheduler::cluster::{Attempts, Cluster};
use maar_scheduler::metrics::Snapshot;
use maar_scheduler::Event;

type Labels = Vec<(&'static str, String)>;
type G = Family<Labels, Gauge<f64, AtomicU64>>;
type C = Family<Labels, Counter>;
type H = Family<Labels, Histogram>;

/// The scheduler's profile name in kube-scheduler's `profile` label.
const PROFILE: &str = "maar";

/// Most distinct values a free-text label (a Pending job's reason) takes; the rest
/// are counted as `other`, so a queue of odd reasons cannot grow the series without
/// bound.
const MAX_REASONS: usize = 40;

/// Buckets of real time: 1 ms to about 33 s.
fn secs_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Buckets of waiting, in the cluster's whole seconds: 0 (started within the second
/// it arrived), then 1 s to about 6 days. Without the 0 bucket a wait of 0 s would fall
/// in the first one (1 s), and `histogram_quantile` would report the waits of pods
/// bound at once as 0.5 s at the median, 0.99 s at p99: numbers nobody measured.
fn wait_histogram() -> Histogram {
    Histogram::new(std::iter::once(0.0).chain(exponential_buckets(1.0, 2.0, 20)))
}

/// The families, registered once.
pub struct Observe {
    registry: Registry,
    pending_pods: G,
    attempts: C,
    preemption_attempts: Counter,
    preemption_victims: Histogram,
    sli: Histogram,
    wait: H,
    step: Histogram,
    gpus: G,
    /// A family with no labels, so that a standby can drop it as it drops the others.
    fragmented: G,
    quota: G,
    pending_reasons: G,
    jobs: G,
    binds: C,
    writes: H,
    questions: H,
    cost: G,
    gpu_hours: G,
    leading: Gauge,
    /// The counters' last readings of the core's attempts (counters only grow).
    seen: Mutex<Attempts>,
    /// Evictions seen since the last `Preempting` event (one preemption's victims).
    victims_run: AtomicU64,
    /// Held while a view resets and sets the gauges, and while a scrape encodes: a
    /// scrape never reads a family cleared and not yet set again (a series missing
    /// from one scrape is a gap in every dashboard and fires `absent()` alerts).
    gauges: Mutex<()>,
}

impl std::fmt::Debug for Observe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observe")
    }
}

impl Observe {
    pub fn new() -> Arc<Observe> {
        let mut r = Registry::default();
        macro_rules! reg {
            ($name:expr, $help:expr, $m:expr) => {{
                let m = $m;
                r.register($name, $help, m.clone());
                m
            }};
        }
        let o = Observe {
            pending_pods: reg!(
                "scheduler_pending_pods",
                "Pending jobs (pods) by queue: active (not yet tried), unschedulable (tried, with a reason)",
                G::default()
            ),
            attempts: reg!(
                "scheduler_schedule_attempts",
                "Attempts to schedule a job (pod), by result and profile",
                C::default()
            ),
            preemption_attempts: reg!(
                "scheduler_preemption_attempts",
                "Preemptions decided",
                Counter::default()
            ),
            preemption_victims: reg!(
                "scheduler_preemption_victims",
                "Jobs evicted by one preemption",
                Histogram::new(exponential_buckets(1.0, 2.0, 8))
            ),
            sli: reg!(
                "scheduler_pod_scheduling_sli_duration_seconds",
                "From a job's (pod's) arrival in the queue to its start, cluster seconds",
                wait_histogram()
            ),
            wait: reg!(
                "maar_job_wait_seconds",
                "Wait from submission to start, by project, cluster seconds",
                H::new_with_constructor(wait_histogram)
            ),
            step: reg!(
                "maar_scheduling_step_duration_seconds",
                "Real time of one engine step: the world read, a scheduling cycle, the decisions carried out",
                secs_histogram()
            ),
            gpus: reg!(
                "maar_gpus",
                "GPUs by pool, model and state: allocated, idle, down (unhealthy, cordoned or on a node not ready)",
                G::default()
            ),
            fragmented: reg!(
                "maar_gpus_fragmented",
                "Idle GPUs that the typical waiting job cannot use where they are",
                G::default()
            ),
            quota: reg!(
                "maar_quota_gpus",
                "GPUs of a project's quota in a pool: used, reserved, max",
                G::default()
            ),
            pending_reasons: reg!(
                "maar_pending_jobs",
                "Pending jobs by the first words of their reason",
                G::default()
            ),
            jobs: reg!("maar_jobs", "Jobs by phase", G::default()),
            binds: reg!(
                "maar_binds",
                "Placements decided (placed; each is bound unless a failed bind follows) and binds the backend refused (failed)",
                C::default()
            ),
            writes: reg!(
                "maar_state_write_duration_seconds",
                "Writes to the state file: events, checkpoint, command",
                H::new_with_constructor(secs_histogram)
            ),
            questions: reg!(
                "maar_question_duration_seconds",
                "Questions answered by the engine: explain, what_if",
                H::new_with_constructor(secs_histogram)
            ),
            cost: reg!(
                "maar_project_cost",
                "Cost so far by project, at the configured GPU-hour prices",
                G::default()
            ),
            gpu_hours: reg!(
                "maar_project_gpu_hours",
                "GPU-hours used so far by project",
                G::default()
            ),
            leading: reg!(
                "maar_leading",
                "1 when this maar schedules; 0 when it stands by on another's lease",
                Gauge::default()
            ),
            registry: Registry::default(),
            seen: Mutex::new(Attempts::default()),
            victims_run: AtomicU64::new(0),
            gauges: Mutex::new(()),
        };
        Arc::new(Observe { registry: r, ..o })
    }

    /// Events as the engine takes them.
    pub fn events(&self, events: &[Event], cluster: &Cluster) {
        for e in events {
            match &*e.reason {
                "Scheduled" if e.kind() == "job" => {
                    self.binds
                        .get_or_create(&vec![("result", "placed".into())])
                        .inc();
                    let name = e.object.trim_start_matches("job/");
                    if let Some(j) = cluster
                        .job_id(name)
                        .ok()
                        .and_then(|id| cluster.jobs.get(id))
                    {
                        let w = j.wait_s as f64;
                        self.sli.observe(w);
                        self.wait
                            .get_or_create(&vec![("project", j.spec.project.clone())])
                            .observe(w);
                    }
                }
                "BindFailed" => {
                    self.binds
                        .get_or_create(&vec![("result", "failed".into())])
                        .inc();
                }
                "Preempted" | "Reclaimed" => {
                    self.victims_run.fetch_add(1, Ordering::Relaxed);
                }
                "Preempting" => {
                    let n = self.victims_run.swap(0, Ordering::Relaxed);
                    self.preemption_victims.observe(n as f64);
                    self.preemption_attempts.inc();
                }
                _ => {}
            }
        }
        self.attempts_now(&cluster.attempts);
    }

    fn attempts_now(&self, now: &Attempts) {
        let mut seen = self.seen.lock().expect("attempts lock");
        let add = |result: &str, was: u64, is: u64| {
            if is > was {
                self.attempts
                    .get_or_create(&vec![
                        ("result", result.to_string()),
                        ("profile", PROFILE.to_string()),
                    ])
                    .inc_by(is - was);
            }
        };
        add("scheduled", seen.scheduled, now.scheduled);
        add("unschedulable", seen.unschedulable, now.unschedulable);
        *seen = *now;
    }

    /// A published view: the gauges, set afresh from it (every view, so the last
    /// one published is what a scrape reads). A maar standing by (not `leading`)
    /// exports none of the cluster's gauges, only `maar_leading 0`: the leader's are
    /// the cluster's, and a dashboard's sum over the replicas counts each GPU, job and
    /// quota once.
    pub fn view(&self, s: &Snapshot, leading: bool) {
        let _whole = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        self.leading.set(leading as i64);
        // Gauges are set afresh: a pool, model or project gone is gone from them.
        for f in [
            &self.pending_pods,
            &self.gpus,
            &self.quota,
            &self.pending_reasons,
            &self.jobs,
            &self.cost,
            &self.gpu_hours,
            &self.fragmented,
        ] {
            f.clear();
        }
        if !leading {
            return;
        }
        let (mut active, mut waiting) = (0, 0);
        let mut reasons: std::collections::BTreeMap<&str, u64> = Default::default();
        let mut phases: std::collections::BTreeMap<&str, u64> = Default::default();
        for j in &s.jobs {
            *phases.entry(j.phase.as_str()).or_default() += 1;
            if j.phase != "Pending" {
                continue;
            }
            match j.reasons.first().filter(|r| !r.is_empty()) {
                None => active += 1,
                Some(r) => {
                    waiting += 1;
                    *reasons.entry(reason_class(r)).or_default() += 1;
                }
            }
        }
        // `+ 0.0` writes a negative zero (a cost of nothing, summed) as 0.
        let set = |f: &G, l: Labels, v: f64| {
            f.get_or_create(&l).set(v + 0.0);
        };
        set(
            &self.pending_pods,
            vec![("queue", "active".into())],
            active as f64,
        );
        set(
            &self.pending_pods,
            vec![("queue", "unschedulable".into())],
            waiting as f64,
        );
        let mut by_count: Vec<(&str, u64)> = reasons.into_iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let mut other = 0;
        for (i, (r, n)) in by_count.into_iter().enumerate() {
            if i < MAX_REASONS {
                set(
                    &self.pending_reasons,
                    vec![("reason", r.to_string())],
                    n as f64,
                );
            } else {
                other += n;
            }
        }
        if other > 0 {
            set(
                &self.pending_reasons,
                vec![("reason", "other".into())],
                other as f64,
            );
        }
        for (p, n) in phases {
            set(&self.jobs, vec![("phase", p.to_string())], n as f64);
        }
        let mut gpus: std::collections::BTreeMap<(&str, &str, &str), u64> = Default::default();
        for n in &s.nodes {
            let node_down = n.condition != "Ready" || n.cordoned;
            for g in &n.gpus {
                let state = if node_down || g.cordoned || g.health != "Healthy" {
                    "down"
                } else if !g.holders.is_empty() || g.mem_allocated > 0 {
                    "allocated"
                } else {
                    "idle"
                };
                *gpus
                    .entry((n.pool.as_str(), g.model.as_str(), state))
                    .or_default() += 1;
            }
        }
        for ((pool, model, state), n) in gpus {
            set(
                &self.gpus,
                vec![
                    ("pool", pool.to_string()),
                    ("model", model.to_string()),
                    ("state", state.to_string()),
                ],
                n as f64,
            );
        }
        set(&self.fragmented, Vec::new(), s.metrics.fragmented_gpus);
        for q in &s.quotas {
            let l = |kind: &str| {
                vec![
                    ("project", q.project.clone()),
                    ("pool", q.pool.clone()),
                    ("kind", kind.to_string()),
                ]
            };
            set(&self.quota, l("used"), q.used.gpu_milli as f64 / 1000.0);
            set(
                &self.quota,
                l("reserved"),
                q.reserved.gpu_milli as f64 / 1000.0,
            );
            if let Some(m) = q.max.gpu_milli {
                set(&self.quota, l("max"), m as f64 / 1000.0);
            }
        }
        for p in &s.costs.projects {
            let l = vec![("project", p.project.clone())];
            set(&self.cost, l.clone(), p.cost);
            set(&self.gpu_hours, l, p.gpu_hours);
        }
    }

    /// One engine step took `d`.
    pub fn step(&self, d: Duration) {
        self.step.observe(d.as_secs_f64());
    }

    /// A write to the state file (`events`, `checkpoint`, `command`) took `d`.
    pub fn write(&self, what: &'static str, d: Duration) {
        self.writes
            .get_or_create(&vec![("what", what.to_string())])
            .observe(d.as_secs_f64());
    }

    /// A question (`explain`, `what_if`) took `d`.
    pub fn question(&self, what: &'static str, d: Duration) {
        self.questions
            .get_or_create(&vec![("what", what.to_string())])
            .observe(d.as_secs_f64());
    }

    /// The metrics as Prometheus text (OpenMetrics).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _whole = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        encode(&mut out, &self.registry).expect("encoding to a String does not fail");
        out
    }
}

/// A Pending job's reason as a label: its words up to the first number, colon or
/// parenthesis (`insufficient free GPUs`, `can never run as asked`, `waiting behind
/// job/...` becomes `waiting behind job`), at most 60 characters.
pub fn reason_class(r: &str) -> &str {
    let cut = r
        .find(|c: char| c.is_ascii_digit() || matches!(c, ':' | '(' | ',' | ';' | '/'))
        .unwrap_or(r.len());
    let words = &r[..cut];
    let words = match words.char_indices().nth(60) {
        Some((at, _)) => &words[..at],
        None => words,
    }
    .trim();
    if words.is_empty() {
        "other"
    } else {
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_labelled_by_its_first_words() {
        assert_eq!(
            reason_class("insufficient free GPUs: 3 nodes have 1 free"),
            "insufficient free GPUs"
        );
        assert_eq!(
            reason_class("waiting behind job/ml/a (backfill is off)"),
            "waiting behind job"
        );
        assert_eq!(reason_class("12 nodes are cordoned"), "other");
    }

    /// Two replicas on the Lease: the one standing by exports no cluster gauge, so a
    /// sum over both counts the cluster once.
    #[test]
    fn a_replica_standing_by_exports_no_cluster_gauges() {
        let sc = crate::load::load_scenario(None).unwrap();
        let mut sim = maar_demo::Demo::new(sc, None).unwrap();
        sim.run_until(3600);
        let mut snap = sim.cluster().snapshot();
        // A project that cost nothing, its sum a negative zero: written as 0.
        snap.costs.projects[0].cost = -0.0;
        let families = [
            "maar_gpus_fragmented ",
            "maar_gpus{",
            "maar_jobs{",
            "maar_quota_gpus{",
            "scheduler_pending_pods{",
            "maar_project_cost{",
        ];
        let o = Observe::new();
        o.view(&snap, true);
        let text = o.encode();
        assert!(text.contains("maar_leading 1"));
        assert!(!text.contains(" -0.0"), "{text}");
        for f in families {
            assert!(text.contains(f), "the leader exports {f}");
        }
        // The same replica losing the lease drops them at its next view.
        o.view(&snap, false);
        let text = o.encode();
        assert!(text.contains("maar_leading 0"));
        for f in families {
            assert!(!text.contains(f), "a standby exports {f}");
        }
        assert!(!text.contains("maar_gpus_fragmented"), "{text}");
    }

    /// Waits of 0 s (pods bound within the second they arrived) are counted in a bucket
    /// of their own, not spread over the first second by `histogram_quantile`.
    #[test]
    fn a_wait_of_no_time_has_a_bucket_of_its_own() {
        let h = wait_histogram();
        h.observe(0.0);
        h.observe(3.0);
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register("w", "waits", h);
        let mut text = String::new();
        encode(&mut text, &reg).unwrap();
        assert!(text.contains("w_bucket{le=\"0.0\"} 1"), "{text}");
        assert!(text.contains("w_bucket{le=\"2.0\"} 1"), "{text}");
        assert!(text.contains("w_bucket{le=\"4.0\"} 2"), "{text}");
    }

    /// A scrape while views are published reads every series of the last whole view:
    /// none is missing because a view had cleared its family and not yet set it.
    #[test]
    fn a_scrape_during_a_view_sees_every_series() {
        let sc = crate::load::load_scenario(None).unwrap();
        let mut sim = maar_demo::Demo::new(sc, None).unwrap();
        sim.run_until(3600);
        let snap = sim.cluster().snapshot();
        assert!(!snap.costs.projects.is_empty() && !snap.jobs.is_empty());
        let o = Observe::new();
        o.view(&snap, true);
        std::thread::scope(|s| {
            let viewer = s.spawn(|| {
                for _ in 0..300 {
                    o.view(&snap, true);
                    std::thread::yield_now();
                }
            });
            let mut scrapes = 0;
            while !viewer.is_finished() || scrapes == 0 {
                let text = o.encode();
                for family in ["maar_project_cost{", "maar_jobs{", "maar_quota_gpus{"] {
                    assert!(text.contains(family), "{family} missing from a scrape");
                }
                scrapes += 1;
            }
        });
    }
}
