//! Checkpoints: the cluster's state as plain data, and the cluster rebuilt from it.
//!
//! Only what cannot be derived is kept; the indexes (free-GPU index, node summaries,
//! pool membership and capacity, name maps, the queue and preemption orders, quota
//! usage) are rebuilt on restore, so a checkpoint can never hold an index that disagrees
//! with the state. Restoring a checkpoint and going on gives the same events as never
//! having stopped (tested).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, ClusterError, SchedConfig, Totals};
use crate::event::Event;
use crate::jobs::Jobs;
use crate::model::*;
use crate::placement::Shape;

/// Version of the checkpoint format. 2 leaves out the fields that hold their default
/// (a running job's `finished`, a card's readings before any); version 1, which wrote
/// them all, is read as well. (A maar that reads only version 1 fails on a version 2
/// checkpoint by the first field it misses; from this build on, a newer version is
/// told by its number: [`ClusterState::from_json`].)
pub const CHECKPOINT_VERSION: u32 = 2;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterState {
    pub version: u32,
    pub now: u64,
    pub config: SchedConfig,
    pub prices: BTreeMap<String, f64>,
    pub pools: Vec<Pool>,
    pub projects: Vec<Project>,
    /// GPU model ids, in the order they were first seen (placement ties follow it).
    pub models: Vec<String>,
    pub nodes: Vec<Node>,
    pub jobs: Vec<Job>,
    pub next_job: JobId,
    /// Ended jobs still held, oldest first.
    pub ended: Vec<JobId>,
    pub quota_requests: Vec<QuotaRequest>,
    pub next_request: u32,
    /// The newest events (the in-memory window).
    pub events: Vec<Event>,
    pub next_event: u64,
    pub totals: Totals,
    /// GPU-milli-seconds by project and model.
    pub gpu_ms: Vec<(ProjectId, String, u128)>,
    /// The workload's typical shapes as of the last cycle.
    pub typical: Vec<(Shape, f64)>,
    pub typical_gpu: Vec<(Shape, f64)>,
    pub bound_demand: Vec<f64>,
    /// Alert acknowledgements (absent in checkpoints written before alerts could be
    /// acknowledged).
    #[serde(default)]
    pub alert_book: crate::alerts::AlertBook,
    /// Durations of ended jobs by kind (absent in checkpoints written before start
    /// times were forecast). Only a predictor's memory: a form this build does not
    /// read is dropped, not taken as a damaged checkpoint.
    #[serde(default, deserialize_with = "lenient")]
    pub runtimes: crate::forecast::Runtimes,
    /// This cluster's name among several whose federation sends the jobs that ask for
    /// a cluster (`Cluster::federation_hold`), as the run that wrote it had it: a
    /// reader of the state file (explain, `get jobs`) sees those jobs held as the
    /// engine does. A run that opens it says its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub federation: Option<String>,
}

/// Reads a value that may be dropped: its default where it does not parse.
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<T> {
        Read(T),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Either::<T>::deserialize(d)? {
        Either::Read(t) => t,
        Either::Other(_) => T::default(),
    })
}

/// A sequence serialised from an iterator, once (checkpoints of large clusters are
/// written without copying the state first).
struct Seq<I>(std::cell::RefCell<Option<I>>);

impl<I, T> Serialize for Seq<I>
where
    I: Iterator<Item = T>,
    T: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let it = self.0.borrow_mut().take().expect("serialised once");
        s.collect_seq(it)
    }
}

fn seq<I: Iterator>(it: I) -> Seq<I> {
    Seq(std::cell::RefCell::new(Some(it)))
}

impl ClusterState {
    /// Reads a checkpoint's JSON text. One that does not read is told by its format
    /// version first when this build does not read that version (a newer maar wrote
    /// it: its fields are not this build's), else by what is wrong in it.
    pub fn from_json(text: &str) -> Result<ClusterState, String> {
        serde_json::from_str(text).map_err(|e| {
            #[derive(Deserialize)]
            struct Head {
                version: u32,
            }
            match serde_json::from_str::<Head>(text) {
                Ok(h) if !(1..=CHECKPOINT_VERSION).contains(&h.version) => {
                    version_not_read(h.version)
                }
                _ => e.to_string(),
            }
        })
    }
}

/// Why a checkpoint of format `version` is not read by this build, and what to do.
fn version_not_read(version: u32) -> String {
    let what = if version > CHECKPOINT_VERSION {
        "written by a newer maar: read it with that maar or a later one"
    } else {
        "not a format any maar wrote: the file may be damaged"
    };
    format!("format version {version} (this maar reads 1 to {CHECKPOINT_VERSION}): {what}")
}

impl Cluster {
    /// The state as JSON, as [`Cluster::checkpoint`] serialises (the events left out
    /// unless `with_events`), written from the cluster itself without a copy of it: a
    /// cluster of 50,000 jobs would otherwise be held twice while it is written.
    pub fn checkpoint_json(&self, with_events: bool) -> String {
        let mut out = Vec::new();
        self.write_checkpoint(with_events, &mut out)
            .expect("state serialises");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// As [`Cluster::checkpoint_json`], written to `w` as it is made: the state file
    /// packs it on the way, so the whole text is never held (a cluster of 5,000 jobs is
    /// 7.7 MB of JSON, 50,000 jobs about 50 MB, for about 0.3 and 3 MB packed).
    pub fn write_checkpoint(
        &self,
        with_events: bool,
        w: impl std::io::Write,
    ) -> Result<(), serde_json::Error> {
        #[derive(Serialize)]
        struct Ref<'a, J, E, G> {
            version: u32,
            now: u64,
            config: &'a SchedConfig,
            prices: &'a BTreeMap<String, f64>,
            pools: &'a [Pool],
            projects: &'a [Project],
            models: &'a [String],
            nodes: &'a crate::nodes::Nodes,
            jobs: J,
            next_job: JobId,
            ended: Seq<std::iter::Copied<std::collections::vec_deque::Iter<'a, JobId>>>,
            quota_requests: &'a [QuotaRequest],
            next_request: u32,
            events: E,
            next_event: u64,
            totals: &'a Totals,
            gpu_ms: G,
            typical: &'a [(Shape, f64)],
            typical_gpu: &'a [(Shape, f64)],
            bound_demand: &'a [f64],
            alert_book: &'a crate::alerts::AlertBook,
            runtimes: &'a crate::forecast::Runtimes,
            #[serde(skip_serializing_if = "Option::is_none")]
            federation: &'a Option<String>,
        }
        let r = Ref {
            version: CHECKPOINT_VERSION,
            now: self.now,
            config: &self.config,
            prices: &self.prices,
            pools: &self.pools,
            projects: &self.projects,
            models: &self.models,
            nodes: &self.nodes,
            jobs: seq(self.jobs.iter()),
            next_job: self.jobs.next_id(),
            ended: seq(self.ended.iter().copied()),
            quota_requests: &self.quota_requests,
            next_request: self.next_request,
            events: seq(self.events.iter().filter(|_| with_events)),
            next_event: self.next_event,
            totals: &self.totals_ever,
            gpu_ms: seq(self.gpu_ms.iter().map(|((p, m), v)| (*p, m, *v))),
            typical: &self.typical,
            typical_gpu: &self.typical_gpu,
            bound_demand: &self.bound_demand,
            alert_book: &self.alert_book,
            runtimes: &self.runtimes,
            federation: &self.federation,
        };
        // The jobs' specs the last checkpoint wrote are written as they were
        // (`model::Job::spec`); those written now are kept for the next.
        self.spec_texts
            .writing(self.jobs.len(), || serde_json::to_writer(w, &r))
    }
}

impl Cluster {
    /// The state as plain data.
    pub fn checkpoint(&self) -> ClusterState {
        ClusterState {
            version: CHECKPOINT_VERSION,
            now: self.now,
            config: self.config.clone(),
            prices: self.prices.clone(),
            pools: self.pools.clone(),
            projects: self.projects.clone(),
            models: self.models.clone(),
            nodes: self.nodes.to_vec(),
            jobs: self.jobs.iter().cloned().collect(),
            next_job: self.jobs.next_id(),
            ended: self.ended.iter().copied().collect(),
            quota_requests: self.quota_requests.clone(),
            next_request: self.next_request,
            events: self.events.iter().map(|e| Event::clone(e)).collect(),
            next_event: self.next_event,
            totals: self.totals_ever.clone(),
            gpu_ms: self
                .gpu_ms
                .iter()
                .map(|((p, m), v)| (*p, m.clone(), *v))
                .collect(),
            typical: self.typical.clone(),
            typical_gpu: self.typical_gpu.clone(),
            bound_demand: self.bound_demand.clone(),
            alert_book: self.alert_book.clone(),
            runtimes: self.runtimes.clone(),
            federation: self.federation.clone(),
        }
    }

    /// Rebuilds a cluster from a checkpoint, checking that it hangs together.
    pub fn restore(s: ClusterState) -> Result<Cluster, ClusterError> {
        let bad = |m: String| Err(ClusterError::Invalid(format!("checkpoint: {m}")));
        if !(1..=CHECKPOINT_VERSION).contains(&s.version) {
            return bad(version_not_read(s.version));
        }
        let mut c = Cluster::new(s.config);
        // Held jobs are held again as they were, keeping the reason they were told (the
        // federation's "refused", say), not the hold's first words.
        c.federation = s.federation;
        let held_reasons: Vec<(JobId, crate::model::Reason)> = s
            .jobs
            .iter()
            .filter(|j| j.phase == Phase::Pending && j.spec.cluster.is_some())
            .map(|j| (j.id, j.reason.clone()))
            .collect();
        c.prices = s.prices;
        for p in s.pools {
            c.add_pool(p);
        }
        let npools = c.pools.len();
        for p in &c.pools {
            if p.lend_to.iter().any(|&l| l as usize >= npools) {
                return bad(format!(
                    "pool {} lends to a pool that does not exist",
                    p.name
                ));
            }
        }
        for p in s.projects {
            if p.quotas.keys().any(|&k| k as usize >= npools) {
                return bad(format!("project {} has a quota in no pool", p.name));
            }
            c.add_project(p);
        }
        c.models = s.models;
        if c.models.first().map(String::as_str) != Some("") {
            return bad("model table must start with the CPU-only entry".into());
        }
        for n in s.nodes {
            if c.node_id(&n.name).is_ok() {
                return bad(format!("node {} appears twice", n.name));
            }
            let stored_pool = n.pool;
            let id = c.add_node(n);
            if c.nodes[id as usize].pool != stored_pool {
                return bad(format!(
                    "node {} is in pool {:?} but its labels select {:?}",
                    c.nodes[id as usize].name, stored_pool, c.nodes[id as usize].pool
                ));
            }
        }
        let njobs = s.jobs.len();
        c.jobs = Jobs::from_parts(s.jobs, s.next_job);
        if c.jobs.len() != njobs {
            return bad("a job id appears twice".into());
        }
        for j in c.jobs.iter() {
            if j.id >= s.next_job {
                return bad(format!(
                    "job id {} is beyond the next id {}",
                    j.id, s.next_job
                ));
            }
            if j.project.is_some_and(|p| p as usize >= c.projects.len())
                || j.pool.is_some_and(|p| p as usize >= npools)
            {
                return bad(format!(
                    "job {} names a project or pool that does not exist",
                    j.id
                ));
            }
            for p in &j.placements {
                let Some(node) = c.nodes.get(p.node as usize) else {
                    return bad(format!("job {} is placed on no node", j.id));
                };
                if p.gpus.iter().any(|g| g.gpu as usize >= node.gpus.len()) {
                    return bad(format!("job {} holds a GPU node {} lacks", j.id, node.name));
                }
            }
        }
        // Replicas per node, from the placements (not stored).
        for n in 0..c.nodes.len() {
            if c.nodes[n].alloc_pods != 0 {
                c.nodes[n].alloc_pods = 0;
            }
        }
        let placed: Vec<u32> = c
            .jobs
            .iter()
            .flat_map(|j| j.placements.iter().map(|p| p.node))
            .collect();
        for n in placed {
            c.nodes[n as usize].alloc_pods += 1;
        }
        // Every allocation on a node belongs to a held job (and the other way round).
        for (nid, n) in c.nodes.iter().enumerate() {
            for a in n.gpus.iter().flat_map(|g| &g.allocs) {
                if c.jobs
                    .get(a.job)
                    .is_none_or(|j| !j.placements.iter().any(|p| p.node as usize == nid))
                {
                    return bad(format!("node {} holds GPU work of an unknown job", n.name));
                }
            }
        }
        let ids: Vec<JobId> = c.jobs.iter().map(|j| j.id).collect();
        for id in ids {
            let j = &c.jobs[id as usize];
            let key: std::sync::Arc<str> = j.spec.full_name().into();
            // In id order: a name used again finds the newer job; two live jobs of
            // one name cannot be.
            if let Some(prev) = c.job_by_name.insert(key, id) {
                let live = |x: JobId| c.jobs.get(x).is_some_and(|j| !j.phase.is_terminal());
                if live(prev) && live(id) {
                    return bad(format!(
                        "two jobs are named {}/{}",
                        j.spec.project, j.spec.name
                    ));
                }
            }
            let (phase, prio, started) = (j.phase, j.rank(), j.started);
            match phase {
                Phase::Pending => {
                    c.pending_insert(id);
                    c.shape_add(id);
                }
                Phase::Running => {
                    c.shape_add(id);
                    c.running_by_prio
                        .insert((prio, std::cmp::Reverse(started.unwrap_or(0)), id));
                    *c.running_base
                        .entry(c.jobs[id as usize].spec.priority)
                        .or_default() += 1;
                }
                Phase::Restarting => {
                    c.restarting.insert(id);
                }
                _ => {}
            }
            let j = &c.jobs[id as usize];
            if j.is_inference() {
                c.services.insert(id);
            }
            if !j.spec.rules.pod_anti_affinity.is_empty() {
                c.anti.insert(id);
            }
            c.by_label.add(id, &j.spec.rules.labels);
            if j.placements.iter().any(|p| !p.bound) {
                c.assumed.insert(id);
            }
            if let (Some(pr), Some(pl)) = (j.project, j.pool) {
                let mut held = Resources::default();
                for p in &j.placements {
                    held.add(&placement_resources(p));
                }
                if !j.placements.is_empty() {
                    c.usage[pr as usize].entry(pl).or_default().add(&held);
                }
            }
        }
        c.ended = s.ended.into_iter().collect();
        c.quota_requests = s.quota_requests;
        c.next_request = s.next_request;
        c.events = std::sync::Arc::new(s.events.into_iter().map(std::sync::Arc::new).collect());
        c.next_event = s.next_event;
        c.totals_ever = s.totals;
        c.gpu_ms = s.gpu_ms.into_iter().map(|(p, m, v)| ((p, m), v)).collect();
        c.typical = s.typical;
        c.typical_gpu = s.typical_gpu;
        c.bound_demand = s.bound_demand;
        c.alert_book = s.alert_book;
        c.runtimes = s.runtimes;
        for (id, why) in held_reasons {
            if c.pending_held.contains(&id) {
                c.jobs[id as usize].reason = why;
            }
        }
        c.last_start = c
            .jobs
            .iter()
            .filter(|j| j.phase == Phase::Running)
            .filter_map(|j| j.started)
            .max();
        c.now = s.now;
        c.outbox.clear();
        c.take_touched();
        Ok(c)
    }
}
