//! Metrics, cost and owned snapshots: what the console, the CLI and tests read.
//!
//! A [`Snapshot`] is a plain copy of the state; readers never hold a borrow of the core.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::cluster::Cluster;
use crate::event::Event;
use crate::fit::fit;
use crate::model::*;

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ModelMetrics {
    pub model: String,
    pub total: u32,
    /// GPUs allocated (shared slices count as fractions).
    pub allocated: f64,
    pub idle: f64,
    pub unhealthy: u32,
    pub cordoned: u32,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct JobCounts {
    pub pending: usize,
    pub running: usize,
    pub restarting: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub cancelled: usize,
}

/// Cluster totals, allocations and fragmentation at one moment.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Metrics {
    pub time_s: u64,
    /// Capacity of labelled GPUs and all nodes' CPU, memory, disk (before overcommit).
    pub total: Resources,
    pub allocated: Resources,
    pub idle: Resources,
    pub by_model: Vec<ModelMetrics>,
    /// Idle GPUs (in GPUs) on nodes where no queued job shape fits.
    pub fragmented_gpus: f64,
    /// Fragmented share of idle GPU capacity, percent.
    pub fragmentation_pct: f64,
    pub jobs: JobCounts,
    pub mean_wait_s: f64,
    pub max_wait_s: u64,
    pub preemptions: usize,
    pub oom_kills: usize,
    pub restarts: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ModelCost {
    pub model: String,
    pub gpu_hours: f64,
    pub price_per_hour: f64,
    pub cost: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProjectCost {
    /// The cluster it is in, where several are listed together; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub project: String,
    pub department: String,
    pub gpu_hours: f64,
    pub cost: f64,
    pub by_model: Vec<ModelCost>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DepartmentCost {
    /// The cluster it is in, where several are listed together; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub department: String,
    pub gpu_hours: f64,
    pub cost: f64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Costs {
    pub projects: Vec<ProjectCost>,
    pub departments: Vec<DepartmentCost>,
    pub total: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GpuView {
    pub index: u32,
    pub model: String,
    pub memory: u64,
    pub mem_allocated: u64,
    pub mem_used: u64,
    pub util_pct: u8,
    pub temp_c: u8,
    pub power_w: u16,
    pub health: String,
    pub cordoned: bool,
    pub mig: bool,
    pub holders: Vec<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeView {
    /// The cluster it is in, where several are listed together (`maar get --cluster
    /// all`); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub name: String,
    pub pool: String,
    pub role: String,
    pub condition: String,
    pub cordoned: bool,
    pub gpu_labelled: bool,
    pub cpu_milli: u64,
    pub cpu_allocated: u64,
    pub memory: u64,
    pub memory_allocated: u64,
    pub disk: u64,
    pub disk_used: u64,
    pub gpus_total: u32,
    pub gpus_used: u32,
    pub gpus: Vec<GpuView>,
    /// The host's measured use (local mode); absent when not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostUsage>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct JobView {
    /// The cluster it is in, where several are listed together (`maar get --cluster
    /// all`); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub name: String,
    pub project: String,
    pub pool: String,
    pub kind: String,
    pub phase: String,
    pub priority: String,
    /// The priority as a number (`priority` names it).
    pub priority_value: i32,
    /// Place in the scheduling queue (1 = next), while Pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<u32>,
    /// Whether every replica's bind is confirmed (false while a placement is assumed).
    pub bound: bool,
    /// For an inference service: who paused its autoscaler by scaling it by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscaler_paused_by: Option<String>,
    pub request: String,
    pub requested: Resources,
    pub replicas: u32,
    pub desired_replicas: u32,
    /// `node:gpu,gpu` per replica.
    pub placement: Vec<String>,
    pub wait_s: u64,
    pub run_s: u64,
    pub restarts: u32,
    /// On borrowed quota now ([`Cluster::borrowing`]): may be reclaimed.
    pub borrowed: bool,
    /// GPU memory in use as a share of what was requested, percent.
    pub used_pct: u32,
    /// Why it is Pending (or why it ended); empty when running normally.
    pub reasons: Vec<String>,
    /// While Pending, when it is expected to start: seconds on the cluster's clock,
    /// or null ([`crate::forecast`]; filled where a forecast was run, e.g.
    /// `maar get jobs`, the console's queue).
    #[serde(default)]
    pub expected_start_s: Option<u64>,
    /// `estimate`, `history`, `never` or `unknown` while Pending and forecast; null
    /// otherwise.
    #[serde(default)]
    pub expected_start_basis: Option<String>,
    /// Pending here after a federation sent it, never moved: it may be moved once to
    /// another cluster ([`crate::dispatch::to_move`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub movable: bool,
    /// Pending here, its file asking for a cluster (`crater.ai/cluster`: `auto` or a
    /// name) and not yet sent by a federation: where several clusters run under one
    /// maar, it is sent there once ([`crate::dispatch::to_send`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_send: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QuotaView {
    /// The cluster it is in, where several are listed together (`maar get --cluster
    /// all`); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub project: String,
    pub department: String,
    pub pool: String,
    pub used: Resources,
    pub reserved: Resources,
    pub max: Limits,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QuotaRequestView {
    /// The cluster it is in, where several are listed together; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub id: u32,
    pub project: String,
    pub pool: String,
    pub gpus: u32,
    pub reserved: bool,
    pub reason: String,
    pub status: String,
}

/// An owned copy of everything a reader shows.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Snapshot {
    pub time_s: u64,
    /// Pending longer than this raises an alert, seconds.
    pub pending_alert_s: u64,
    pub jobs: Vec<JobView>,
    pub nodes: Vec<NodeView>,
    pub quotas: Vec<QuotaView>,
    pub quota_requests: Vec<QuotaRequestView>,
    pub metrics: Metrics,
    pub costs: Costs,
    pub events: Vec<Event>,
    /// Alerts whose condition holds (open or acknowledged), critical first.
    pub alerts: Vec<crate::alerts::AlertView>,
    /// Acknowledged alerts that have since resolved, newest first.
    pub resolved_alerts: Vec<crate::alerts::AlertView>,
}

impl NodeView {
    /// The node's status as kubectl writes it: `Ready`, `NotReady (why)`, with
    /// `,SchedulingDisabled` when cordoned (the console and the command line alike).
    pub fn status(&self) -> String {
        if self.cordoned {
            format!("{},SchedulingDisabled", self.condition)
        } else {
            self.condition.clone()
        }
    }
}

impl Cluster {
    pub fn job_view(&self, j: &Job) -> JobView {
        let mut req = j.spec.replica_request();
        req = req.scaled(j.desired_replicas.max(1) as u64);
        JobView {
            cluster: String::new(),
            name: j.spec.name.clone(),
            project: j.spec.project.clone(),
            pool: j.spec.pool.clone(),
            kind: match j.spec.kind {
                JobKind::Train => "TrainJob".into(),
                JobKind::Inference(_) => "InferenceService".into(),
            },
            phase: j.phase.name().into(),
            priority: priority_name(j.spec.priority),
            priority_value: j.spec.priority,
            queue_position: None,
            expected_start_s: None,
            expected_start_basis: None,
            movable: j.phase == crate::model::Phase::Pending
                && j.spec.dispatched.is_some()
                && j.spec.moved_from.is_none(),
            to_send: j.spec.cluster.clone().filter(|_| {
                j.phase == crate::model::Phase::Pending && j.spec.dispatched.is_none() && !j.kept
            }),
            bound: j.placements.iter().all(|p| p.bound),
            autoscaler_paused_by: j.autoscaler.paused_by.clone(),
            request: j.spec.shape_with(j.desired_replicas.max(1)),
            requested: req,
            replicas: j.running_replicas(),
            desired_replicas: j.desired_replicas,
            placement: j
                .placements
                .iter()
                .map(|p| {
                    let g: Vec<String> = p.gpus.iter().map(|s| s.gpu.to_string()).collect();
                    let mut s = self.nodes[p.node as usize].name.clone();
                    if !g.is_empty() {
                        s = format!("{s}:{}", g.join(","));
                    }
                    s
                })
                .collect(),
            wait_s: self.wait_s(j),
            run_s: self.run_s(j),
            restarts: j.restarts,
            borrowed: self.borrowing(j),
            used_pct: j.used_pct,
            reasons: if j.reason.is_empty() {
                Vec::new()
            } else {
                vec![j.reason.to_string()]
            },
        }
    }

    pub fn node_view(&self, n: &Node) -> NodeView {
        let gpus: Vec<GpuView> = n
            .gpus
            .iter()
            .map(|g| GpuView {
                index: g.index,
                model: g.model.to_string(),
                memory: g.memory,
                mem_allocated: g.used_mem(),
                mem_used: g.mem_used,
                util_pct: g.util_pct,
                temp_c: g.temp_c,
                power_w: g.power_w,
                health: match &g.health {
                    Health::Healthy => "Healthy".into(),
                    Health::Unhealthy(w) => format!("Unhealthy ({w})"),
                },
                cordoned: g.cordoned,
                mig: g.mig,
                holders: {
                    let mut h: Vec<String> = g
                        .allocs
                        .iter()
                        .map(|a| self.jobs[a.job as usize].spec.name.clone())
                        .collect();
                    h.dedup();
                    h
                },
            })
            .collect();
        NodeView {
            cluster: String::new(),
            name: n.name.clone(),
            pool: self.pool_name(n.pool).to_string(),
            role: n
                .labels()
                .get(LABEL_ROLE)
                .cloned()
                .unwrap_or_else(|| "-".into()),
            condition: match &n.condition {
                Condition::Ready => "Ready".into(),
                Condition::NotReady(w) => format!("NotReady ({w})"),
            },
            cordoned: n.cordoned,
            gpu_labelled: n.gpu_labelled(),
            cpu_milli: n.cpu_milli,
            cpu_allocated: n.alloc_cpu,
            memory: n.memory,
            memory_allocated: n.alloc_mem,
            disk: n.disk,
            disk_used: n.disk_used(),
            gpus_total: n.sched_gpus().len() as u32,
            gpus_used: n
                .sched_gpus()
                .iter()
                .filter(|g| !g.allocs.is_empty())
                .count() as u32,
            gpus,
            host: n.host,
        }
    }

    /// Totals, per-model figures, fragmentation and job statistics.
    pub fn metrics(&self) -> Metrics {
        let mut m = Metrics {
            time_s: self.now,
            ..Default::default()
        };
        let mut by_model: BTreeMap<String, ModelMetrics> = BTreeMap::new();
        for n in &self.nodes {
            m.total.cpu_milli += n.cpu_milli;
            m.total.memory += n.memory;
            m.total.disk += n.disk;
            m.allocated.cpu_milli += n.alloc_cpu;
            m.allocated.memory += n.alloc_mem;
            m.allocated.disk += n.disk_used();
            for g in n.sched_gpus() {
                m.total.gpu_milli += GPU_MILLI as u64;
                m.total.gpu_mem += g.memory;
                m.allocated.gpu_milli += g.used_milli() as u64;
                m.allocated.gpu_mem += g.used_mem();
                let e = by_model
                    .entry(g.model.to_string())
                    .or_insert_with(|| ModelMetrics {
                        model: g.model.to_string(),
                        ..Default::default()
                    });
                e.total += 1;
                e.allocated += g.used_milli() as f64 / 1000.0;
                if g.health != Health::Healthy {
                    e.unhealthy += 1;
                }
                if g.cordoned {
                    e.cordoned += 1;
                }
            }
        }
        for e in by_model.values_mut() {
            e.idle = e.total as f64 - e.allocated;
        }
        m.by_model = by_model.into_values().collect();
        m.idle = m.total;
        m.idle.sub(&m.allocated);
        // Fragmentation: idle GPU capacity on nodes where no queued shape fits.
        let mut shapes: Vec<(&JobSpec, u32)> = Vec::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for j in self.pending_jobs() {
            if j.spec.gpu.count == 0 {
                continue;
            }
            let mult = if j.spec.affinity == Affinity::SameNode {
                j.desired_replicas.max(1)
            } else {
                1
            };
            let key = format!("{:?}{}{mult}", j.spec.gpu, j.spec.cpu_milli);
            if seen.insert(key) {
                shapes.push((&j.spec, mult));
            }
        }
        let mut idle_total = 0u64;
        let mut frag = 0u64;
        for (id, n) in self.nodes.iter().enumerate() {
            if !n.ready() || n.cordoned {
                continue;
            }
            let idle: u64 = n
                .sched_gpus()
                .iter()
                .filter(|g| g.usable())
                .map(|g| g.free_milli() as u64)
                .sum();
            if idle == 0 {
                continue;
            }
            idle_total += idle;
            if shapes.is_empty() {
                continue;
            }
            let oc = self.overcommit_of(n);
            let usable = shapes
                .iter()
                .any(|(s, mult)| fit(n, id as NodeId, oc, s, *mult).is_ok());
            if !usable {
                frag += idle;
            }
        }
        m.fragmented_gpus = frag as f64 / 1000.0;
        m.fragmentation_pct = if idle_total > 0 {
            frag as f64 * 100.0 / idle_total as f64
        } else {
            0.0
        };
        // Held jobs, plus the running totals of those already dropped from memory.
        let t = &self.totals_ever;
        m.jobs.succeeded = t.succeeded;
        m.jobs.failed = t.failed;
        m.jobs.cancelled = t.cancelled;
        let mut count = t.dropped_jobs as u64;
        let mut wait_sum = t.dropped_wait_s;
        let mut restarts = t.dropped_restarts;
        m.max_wait_s = t.dropped_max_wait_s;
        for j in &self.jobs {
            match j.phase {
                Phase::Pending => m.jobs.pending += 1,
                Phase::Running => m.jobs.running += 1,
                Phase::Restarting => m.jobs.restarting += 1,
                _ => {}
            }
            let w = self.wait_s(j);
            count += 1;
            wait_sum += w;
            m.max_wait_s = m.max_wait_s.max(w);
            restarts += j.restarts as u64;
        }
        m.restarts = restarts.min(u32::MAX as u64) as u32;
        m.mean_wait_s = if count == 0 {
            0.0
        } else {
            wait_sum as f64 / count as f64
        };
        m.preemptions = t.preemptions;
        m.oom_kills = t.oom_kills;
        m
    }

    /// GPU-hours and bill per project and department, up to now.
    pub fn costs(&self) -> Costs {
        let mut ms = self.gpu_ms.clone();
        for j in self.jobs.iter().filter(|j| !j.placements.is_empty()) {
            let (Some(pid), since) = (j.project, j.accrued_at) else {
                continue;
            };
            let dt = self.now.saturating_sub(since) as u128;
            for p in &j.placements {
                for s in &p.gpus {
                    let model = self.nodes[p.node as usize].gpus[s.gpu as usize]
                        .model
                        .to_string();
                    *ms.entry((pid, model)).or_default() += s.milli as u128 * dt;
                }
            }
        }
        let mut projects = Vec::new();
        let mut depts: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let mut total = 0.0;
        for (pid, p) in self.projects.iter().enumerate() {
            let mut by_model = Vec::new();
            for ((q, model), v) in ms.range((pid as ProjectId, String::new())..) {
                if *q != pid as ProjectId {
                    break;
                }
                let hours = *v as f64 / 1000.0 / 3600.0;
                let price = self.prices.get(model).copied().unwrap_or(0.0);
                by_model.push(ModelCost {
                    model: model.clone(),
                    gpu_hours: hours,
                    price_per_hour: price,
                    cost: hours * price,
                });
            }
            // From +0.0: a float sum of nothing is -0.0, printed "-0.00".
            let hours: f64 = by_model.iter().fold(0.0, |a, m| a + m.gpu_hours);
            let cost: f64 = by_model.iter().fold(0.0, |a, m| a + m.cost);
            total += cost;
            let d = depts.entry(p.department.clone()).or_default();
            d.0 += hours;
            d.1 += cost;
            projects.push(ProjectCost {
                cluster: String::new(),
                project: p.name.clone(),
                department: p.department.clone(),
                gpu_hours: hours,
                cost,
                by_model,
            });
        }
        Costs {
            projects,
            departments: depts
                .into_iter()
                .map(|(department, (gpu_hours, cost))| DepartmentCost {
                    cluster: String::new(),
                    department,
                    gpu_hours,
                    cost,
                })
                .collect(),
            total,
        }
    }

    pub fn quota_views(&self) -> Vec<QuotaView> {
        let mut v = Vec::new();
        for (pid, p) in self.projects.iter().enumerate() {
            for (&pool, q) in &p.quotas {
                v.push(QuotaView {
                    cluster: String::new(),
                    project: p.name.clone(),
                    department: p.department.clone(),
                    pool: self.pools[pool as usize].name.clone(),
                    used: self.usage(pid as ProjectId, pool),
                    reserved: q.reserved,
                    max: q.max,
                });
            }
        }
        v
    }

    /// An owned copy of the whole state.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            time_s: self.now,
            pending_alert_s: self.config.pending_alert_s,
            jobs: {
                let mut jobs: Vec<JobView> = self.jobs.iter().map(|j| self.job_view(j)).collect();
                let order: BTreeMap<JobId, u32> = self
                    .queue()
                    .into_iter()
                    .filter(|q| !q.2)
                    .enumerate()
                    .map(|(i, q)| (q.0, i as u32 + 1))
                    .collect();
                for (view, j) in jobs.iter_mut().zip(self.jobs.iter()) {
                    view.queue_position = order.get(&j.id).copied();
                }
                jobs
            },
            nodes: self.nodes.iter().map(|n| self.node_view(n)).collect(),
            quotas: self.quota_views(),
            quota_requests: self
                .quota_requests
                .iter()
                .map(|r| QuotaRequestView {
                    cluster: String::new(),
                    id: r.id,
                    project: self.projects[r.project as usize].name.clone(),
                    pool: self.pools[r.pool as usize].name.clone(),
                    gpus: r.gpus,
                    reserved: r.reserved,
                    reason: r.reason.clone(),
                    status: match &r.status {
                        RequestStatus::Pending => "Pending".into(),
                        RequestStatus::Approved => "Approved".into(),
                        RequestStatus::Rejected(w) => format!("Rejected: {w}"),
                    },
                })
                .collect(),
            metrics: self.metrics(),
            costs: self.costs(),
            events: self.events.iter().map(|e| Event::clone(e)).collect(),
            alerts: self.alerts(),
            resolved_alerts: self.resolved_alerts(),
        }
    }
}

impl Snapshot {
    /// Several clusters' snapshots as one (the console's and the command line's
    /// `--cluster all`): `base`'s other fields, and every part's jobs, nodes, quotas,
    /// requests, alerts, events and costs, each naming its cluster (a Pending job's
    /// start moved onto `base`'s clock), the costs' total summed, the events by time.
    pub fn of_clusters<'a>(
        base: &Snapshot,
        parts: impl IntoIterator<Item = (&'a str, &'a Snapshot)>,
    ) -> Snapshot {
        let mut all = Snapshot {
            jobs: Vec::new(),
            nodes: Vec::new(),
            quotas: Vec::new(),
            quota_requests: Vec::new(),
            alerts: Vec::new(),
            resolved_alerts: Vec::new(),
            events: Vec::new(),
            costs: Costs::default(),
            ..base.clone()
        };
        // The totals the header and the overview read, summed (the rest of the
        // metrics, a waiting time, a fragmentation, stay the shown cluster's).
        let m = &mut all.metrics;
        m.total = Resources::default();
        m.allocated = Resources::default();
        m.idle = Resources::default();
        m.by_model = Vec::new();
        m.jobs = JobCounts::default();
        for (name, v) in parts {
            let (m, o) = (&mut all.metrics, &v.metrics);
            m.total.add(&o.total);
            m.allocated.add(&o.allocated);
            m.idle.add(&o.idle);
            for g in &o.by_model {
                match m.by_model.iter_mut().find(|x| x.model == g.model) {
                    Some(x) => {
                        x.total += g.total;
                        x.allocated += g.allocated;
                        x.idle += g.idle;
                        x.unhealthy += g.unhealthy;
                        x.cordoned += g.cordoned;
                    }
                    None => m.by_model.push(g.clone()),
                }
            }
            let (j, k) = (&mut m.jobs, &o.jobs);
            j.pending += k.pending;
            j.running += k.running;
            j.restarting += k.restarting;
            j.succeeded += k.succeeded;
            j.failed += k.failed;
            j.cancelled += k.cancelled;
            let shift = base.time_s as i64 - v.time_s as i64;
            // Each row copied with its cluster's name.
            macro_rules! named {
                ($rows:expr) => {
                    $rows.iter().map(|x| {
                        let mut x = x.clone();
                        x.cluster = name.to_string();
                        x
                    })
                };
            }
            all.jobs.extend(named!(v.jobs).map(|mut j| {
                j.expected_start_s = j.expected_start_s.map(|t| (t as i64 + shift).max(0) as u64);
                j
            }));
            all.nodes.extend(named!(v.nodes));
            all.quotas.extend(named!(v.quotas));
            all.quota_requests.extend(named!(v.quota_requests));
            all.alerts.extend(named!(v.alerts));
            all.resolved_alerts.extend(named!(v.resolved_alerts));
            all.events.extend(named!(v.events));
            all.costs.projects.extend(named!(v.costs.projects));
            all.costs.departments.extend(named!(v.costs.departments));
            all.costs.total += v.costs.total;
        }
        all.metrics.by_model.sort_by(|a, b| a.model.cmp(&b.model));
        // One story, oldest first, as one cluster's events are (each on its clock).
        all.events.sort_by_key(|e| e.time);
        all
    }
}

/// A project's GPUs summed over several clusters' quotas (every pool of every cluster):
/// the budget a dispatch among them stays within, since each cluster admits a job only
/// within its own quota.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectSum {
    pub project: String,
    pub department: String,
    pub used_gpu_milli: u64,
    pub reserved_gpu_milli: u64,
    /// None when one of its quotas has no GPU limit.
    pub max_gpu_milli: Option<u64>,
    /// The clusters it has a quota in, in the order met.
    pub clusters: Vec<String>,
}

/// Each project's [`ProjectSum`] over `quotas` (rows of several clusters), by name.
pub fn project_sums(quotas: &[QuotaView]) -> Vec<ProjectSum> {
    let mut by: BTreeMap<&str, ProjectSum> = BTreeMap::new();
    for v in quotas {
        let e = by.entry(v.project.as_str()).or_insert_with(|| ProjectSum {
            project: v.project.clone(),
            department: v.department.clone(),
            used_gpu_milli: 0,
            reserved_gpu_milli: 0,
            max_gpu_milli: Some(0),
            clusters: Vec::new(),
        });
        e.used_gpu_milli += v.used.gpu_milli;
        e.reserved_gpu_milli += v.reserved.gpu_milli;
        e.max_gpu_milli = e.max_gpu_milli.zip(v.max.gpu_milli).map(|(a, b)| a + b);
        if !e.clusters.contains(&v.cluster) {
            e.clusters.push(v.cluster.clone());
        }
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    /// A project that used no GPU yet costs 0.00, not "-0.00" (a float sum of nothing
    /// is -0.0).
    #[test]
    fn a_project_with_no_gpu_time_costs_plus_zero() {
        let c = crate::testkit::train_cluster();
        let costs = c.costs();
        let p = &costs.projects[0];
        assert!(p.gpu_hours == 0.0 && p.gpu_hours.is_sign_positive());
        assert!(p.cost.is_sign_positive());
        assert_eq!(format!("{:.2}", p.cost), "0.00");
        for d in &costs.departments {
            assert_eq!(format!("{:.1} {:.2}", d.gpu_hours, d.cost), "0.0 0.00");
        }
    }
}
