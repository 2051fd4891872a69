//! Trace replay: the placement experiment of "Beware of Fragmentation" (ATC'23) on
//! Alibaba's GPU cluster trace, run on this crate's own cluster model.
//!
//! Nodes become [`Node`]s with crater.ai labels, pods become [`JobSpec`]s, every
//! candidate is checked with [`fit`] and every placement is committed with the same
//! allocation path the scheduler uses. What differs per policy is only the score.
//!
//! Pods arrive one at a time in a seeded shuffled order; random copies are appended
//! until the total GPU request reaches `inflate` x capacity; a pod that fits nowhere
//! fails and is not retried. Each time arrived GPU demand crosses another whole percent
//! of capacity, the allocation and fragmentation are recorded.
//!
//! Scores follow the published simulator: integers in 0..=100, a tie going to the
//! first best node of the node list (which is shuffled once per seed; [`Ties`]). Nodes
//! in the same
//! state (model, free CPU and memory, sorted free GPU-milli) score the same, so each
//! pod is scored once per distinct state, and fragmentation is memoised per state.

use std::collections::BTreeMap;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::cluster::{Cluster, SchedConfig};
use crate::fit::fit;
use crate::model::*;
use crate::placement::{affinity_tag, bound_demand, rank, Ask, Measures, NodeView, Verdict};
pub use crate::placement::{
    capacity_fragmentation, cover_95, fragmentation, with_scarce, Policy, Shape,
};

/// A node row of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceNode {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpus: u32,
    pub model: String,
}

/// A pod row of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePod {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub num_gpu: u32,
    /// GPU-milli per GPU (< 1000 only for single-GPU sharing pods).
    pub gpu_milli: u32,
    /// Allowed GPU models; empty means any.
    pub gpu_spec: Vec<String>,
}

impl TracePod {
    pub fn gpu_request(&self) -> u64 {
        self.num_gpu as u64 * self.gpu_milli as u64
    }

    /// A slice of one shared card (a single-GPU pod asking less than a whole one), as
    /// the replay places it; any other GPU pod takes whole cards.
    pub fn shares(&self) -> bool {
        self.ask().sharing()
    }
}

/// How a tie between equally scored nodes is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ties {
    /// The tied node that comes first in the node list, which is shuffled once per
    /// seed: what the published simulator does (its scheduler keeps the first best
    /// node). It decides the policies that score many nodes alike: with random ties
    /// GpuPacking and GpuClustering land ~2.8 points lower, because CPU-only pods (which
    /// they score 0 everywhere) then spread over every node and starve GPUs of CPU,
    /// instead of filling one node after another. The Random policy still picks at
    /// random.
    NodeOrder,
    /// Uniformly at random among the tied nodes.
    Random,
}

/// Salt for the seeded node order, so it does not repeat the arrival order's stream.
const NODE_ORDER_SALT: u64 = 0x6e6f_6465_6f72_6472;

#[derive(Clone, Debug)]
pub struct ReplayConfig {
    pub policy: Policy,
    pub seed: u64,
    pub inflate: f64,
    /// How typical shapes are weighted for fragmentation.
    pub shape_weight: ShapeWeight,
    /// Count CPU-only pods among the typical shapes (on in the published setup).
    pub cpu_shapes: bool,
    pub ties: Ties,
}

impl ReplayConfig {
    pub fn new(policy: Policy, seed: u64) -> ReplayConfig {
        ReplayConfig {
            policy,
            seed,
            inflate: 1.3,
            shape_weight: ShapeWeight::Pods,
            cpu_shapes: true,
            ties: Ties::NodeOrder,
        }
    }
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct CurvePoint {
    pub arrived_pct: u32,
    pub alloc_pct: f64,
    pub frag_pct: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReplayResult {
    pub policy: Policy,
    pub seed: u64,
    pub total_gpus: u32,
    pub curve: Vec<CurvePoint>,
    pub alloc_pct_at_100: f64,
    pub unallocated_gpus_at_100: f64,
    pub pods_placed: usize,
    pub pods_failed: usize,
    pub elapsed_ms: u64,
}

impl Shape {
    pub fn of(p: &TracePod) -> Shape {
        let mut models: Vec<String> = p.gpu_spec.iter().map(|m| m.to_lowercase()).collect();
        models.sort();
        Shape {
            cpu: p.cpu_milli,
            milli: if p.num_gpu == 0 { 0 } else { p.gpu_milli },
            count: p.num_gpu,
            models,
        }
    }
}

impl TracePod {
    /// What the pod asks of a node, to the placement policies.
    pub fn ask(&self) -> Ask {
        Ask {
            cpu: self.cpu_milli,
            count: self.num_gpu,
            gpu_milli: self.gpu_milli,
        }
    }
}

/// How typical shapes are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeWeight {
    /// Each pod counts once.
    Pods,
    /// Each pod counts by its GPU request (GPU-milli), as the published simulator's
    /// `IsConsideredGpuResWeight`: rare multi-GPU shapes carry their real weight.
    GpuDemand,
}

/// The typical shapes: most frequent first until they cover 95% (by `weight`), with
/// their frequencies renormalised to sum to 1. CPU-only pods count only with `with_cpu`.
///
/// The published setup counts pods (`gpuResWeight: 0`) and includes CPU-only pods
/// (`isInvolvedCpuPods: true`); with it our FGD lands within 0.05 points of the
/// published means (BENCHMARKS.md).
pub fn typical_shapes(pods: &[TracePod], weight: ShapeWeight, with_cpu: bool) -> Vec<(Shape, f64)> {
    cover_95(shape_counts(pods, weight, with_cpu))
}

/// The shapes maar's policy measures against on `nodes`: the typical ones and the
/// scarce ones ([`crate::placement::with_scarce`]).
pub fn maar_shapes(
    nodes: &[TraceNode],
    pods: &[TracePod],
    weight: ShapeWeight,
    with_cpu: bool,
) -> Vec<(Shape, f64)> {
    let gpu_nodes = || nodes.iter().filter(|n| n.gpus > 0).count();
    with_scarce(
        shape_counts(pods, weight, with_cpu),
        nodes.len(),
        gpu_nodes,
        |s, limit| {
            let mut hold = nodes.iter().filter(|n| s.fits_empty(n.gpus, n.cpu_milli));
            hold.nth(limit).is_some()
        },
    )
}

/// How many times each shape occurs, by `weight`; CPU-only pods only `with_cpu`.
fn shape_counts(pods: &[TracePod], weight: ShapeWeight, with_cpu: bool) -> BTreeMap<Shape, u64> {
    let mut counts: BTreeMap<Shape, u64> = BTreeMap::new();
    for p in pods.iter().filter(|p| with_cpu || p.num_gpu > 0) {
        let w = match weight {
            ShapeWeight::Pods => 1,
            ShapeWeight::GpuDemand => p.gpu_request(),
        };
        *counts.entry(Shape::of(p)).or_default() += w;
    }
    counts
}

/// What a node looks like to the policies. Nodes with equal states are interchangeable.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct State {
    model: u16,
    cap_cpu: u64,
    free_cpu: u64,
    free_mem: u64,
    /// Free GPU-milli per card, largest first.
    free: Vec<u16>,
    /// GPU-milli types of the sharing pods on the node (GpuClustering only).
    affinity: Vec<u32>,
}

/// Places trace pods one at a time on a cluster built from a node list, under one
/// policy. [`replay`] drives it through the whole experiment; tests drive it pod by pod.
/// A cluster of the trace's nodes: one pool `trace` that takes every node, one open
/// project `trace`. Cards carry no memory the trace could ask for (1000 bytes), disk
/// is not part of the trace (a pebibyte per node never binds).
pub fn trace_cluster(nodes: &[TraceNode], config: SchedConfig) -> Cluster {
    let mut c = Cluster::new(config);
    c.add_pool(Pool {
        name: "trace".into(),
        kind: PoolKind::Training,
        selector: BTreeMap::new(),
        overcommit: Overcommit::default(),
        lend_to: Vec::new(),
    });
    c.add_project(Project {
        name: "trace".into(),
        department: "-".into(),
        quotas: [(0, Quota::default())].into(),
    });
    for n in nodes {
        let model = n.model.to_lowercase();
        let mut labels = BTreeMap::new();
        if n.gpus > 0 {
            labels.insert(LABEL_MODEL.to_string(), model.clone());
            labels.insert(LABEL_COUNT.to_string(), n.gpus.to_string());
        }
        let gpus = (0..n.gpus)
            .map(|g| Gpu::new(g, format!("{}-{g}", n.name), model.clone(), 1000, false))
            .collect();
        c.add_node(Node::new(
            n.name.clone(),
            labels,
            n.cpu_milli,
            n.memory_mib << 20,
            1 << 50,
            gpus,
        ));
    }
    c
}

/// A trace pod as a job of project and pool `trace`, named `name`: a single-GPU pod
/// asking less than a whole card shares one.
pub fn trace_spec(pod: &TracePod, name: String) -> JobSpec {
    let sharing = pod.shares();
    JobSpec {
        name,
        project: "trace".into(),
        pool: "trace".into(),
        kind: JobKind::Train,
        priority: PRIORITY_MEDIUM,
        replicas: 1,
        gpu: GpuRequest {
            count: pod.num_gpu,
            memory_per_card: None,
            models: pod.gpu_spec.iter().map(|m| m.to_lowercase()).collect(),
            shared: sharing,
            milli: sharing.then_some(pod.gpu_milli),
            vendor: None,
            resource: None,
        },
        cpu_milli: pod.cpu_milli,
        memory: pod.memory_mib << 20,
        disk: 0,
        affinity: Affinity::SameNode,
        restart: RestartPolicy::Never,
        est_runtime_s: None,
        image: String::new(),
        command: Vec::new(),
        node_selector: Default::default(),
        rules: Default::default(),
        dispatched: None,
        sent_start_in: None,
        moved_from: None,
        cluster: None,
        manifest: None,
    }
}

pub struct Replayer {
    pub cluster: Cluster,
    policy: Policy,
    rng: ChaCha8Rng,
    /// FGD's fragmentation against the typical shapes, and maar's capacity
    /// fragmentation against the GPU ones.
    measures: Measures<'static>,
    node_model: Vec<u16>,
    affinity: Vec<Vec<u32>>,
    groups: BTreeMap<State, Vec<NodeId>>,
    node_state: Vec<State>,
    capacity: u64,
    serial: u64,
    ties: Ties,
    /// Each node's place in the node list (a seeded shuffle), for [`Ties::NodeOrder`].
    rank: Vec<u32>,
    /// Per GPU model: idle GPU-milli, and the typical demand that only it can serve
    /// (shapes restricted to it, shared among their allowed models). maar's pressure.
    free_by_model: Vec<u64>,
    bound_demand: Vec<f64>,
}

impl Replayer {
    /// A cluster of `nodes`; fragmentation is measured against `shapes`.
    pub fn new(
        nodes: &[TraceNode],
        shapes: Vec<(Shape, f64)>,
        policy: Policy,
        seed: u64,
    ) -> Replayer {
        let c = trace_cluster(
            nodes,
            SchedConfig {
                backfill: false,
                preemption: false,
                ..SchedConfig::default()
            },
        );
        let mut models: Vec<String> = vec![String::new()];
        let mut node_model: Vec<u16> = Vec::new();
        for n in nodes {
            let model = n.model.to_lowercase();
            let mid = match models.iter().position(|m| *m == model) {
                Some(i) => i,
                None => {
                    models.push(model.clone());
                    models.len() - 1
                }
            } as u16;
            node_model.push(if n.gpus == 0 { 0 } else { mid });
        }
        let bound_demand = bound_demand(&shapes, &models);
        let mut free_by_model = vec![0u64; models.len()];
        for (n, &m) in nodes.iter().zip(&node_model) {
            free_by_model[m as usize] += n.gpus as u64 * 1000;
        }
        let mut rank: Vec<u32> = (0..nodes.len() as u32).collect();
        rank.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ NODE_ORDER_SALT));
        let mut r = Replayer {
            capacity: nodes.iter().map(|n| n.gpus as u64 * 1000).sum(),
            cluster: c,
            policy,
            rng: ChaCha8Rng::seed_from_u64(seed),
            measures: Measures::new(shapes, models),
            node_model,
            affinity: vec![Vec::new(); nodes.len()],
            groups: BTreeMap::new(),
            node_state: Vec::new(),
            serial: 0,
            ties: Ties::NodeOrder,
            rank,
            free_by_model,
            bound_demand,
        };
        for id in 0..nodes.len() {
            let s = r.state_of(id);
            r.groups.entry(s.clone()).or_default().push(id as NodeId);
            r.node_state.push(s);
        }
        r
    }

    fn state_of(&self, id: usize) -> State {
        let n = &self.cluster.nodes[id];
        let mut free: Vec<u16> = n.gpus.iter().map(|g| g.free_milli() as u16).collect();
        free.sort_unstable_by(|a, b| b.cmp(a));
        let mut affinity = if self.policy.plugin().reads_affinity() {
            self.affinity[id].clone()
        } else {
            Vec::new()
        };
        affinity.sort_unstable();
        affinity.dedup();
        State {
            model: self.node_model[id],
            cap_cpu: n.cpu_milli,
            free_cpu: n.cpu_milli - n.alloc_cpu,
            free_mem: n.memory - n.alloc_mem,
            free,
            affinity,
        }
    }

    /// How ties between equally scored nodes are broken (default [`Ties::NodeOrder`]).
    pub fn with_ties(mut self, ties: Ties) -> Replayer {
        self.ties = ties;
        self
    }

    /// Places one pod; returns the node it went to, or None (it is marked Failed).
    pub fn place(&mut self, pod: &TracePod) -> Option<NodeId> {
        self.serial += 1;
        let sharing = pod.shares();
        let spec = trace_spec(pod, format!("{}-{}", pod.name, self.serial));
        let c = &mut self.cluster;
        let job = c.submit(spec).expect("unique pod names");
        let ask = pod.ask();

        // Each distinct feasible state once, ranked by the policy (the loop the live
        // cycle shares).
        let mut cands: Vec<((&State, &Vec<NodeId>), NodeView)> = Vec::new();
        for (s, ids) in &self.groups {
            if s.free_cpu < pod.cpu_milli || s.free_mem < pod.memory_mib << 20 {
                continue;
            }
            if pod.num_gpu > 0
                && (s
                    .free
                    .iter()
                    .filter(|&&f| f as u32 >= pod.gpu_milli)
                    .count() as u32)
                    < pod.num_gpu
            {
                continue;
            }
            let rep = ids[0];
            let node = &c.nodes[rep as usize];
            if fit(
                node,
                rep,
                c.overcommit_of(node),
                &c.jobs[job as usize].spec,
                1,
            )
            .is_err()
            {
                continue;
            }
            let view = NodeView {
                model: s.model,
                free_cpu: s.free_cpu,
                free: &s.free,
                affinity: &s.affinity,
                card: None,
            };
            cands.push(((s, ids), view));
        }
        // maar's pressure on a model: the typical demand only it can serve, per idle
        // GPU-milli.
        let (bound, free) = (&self.bound_demand, &self.free_by_model);
        let pressure = |m: u16| bound[m as usize] / free[m as usize].max(1) as f64;
        let ties = rank::best(self.policy, &ask, cands, &mut self.measures, pressure);
        let picked = if self.policy == Policy::Random || self.ties == Ties::Random {
            pick(&ties, &mut self.rng)
        } else {
            first_in_order(&ties, &self.rank)
        };
        let Some((node_id, card)) = picked else {
            c.complete(job, false, "no node fits (replay: not retried)");
            return None;
        };
        let node = &c.nodes[node_id as usize];
        let mut p = fit(
            node,
            node_id,
            c.overcommit_of(node),
            &c.jobs[job as usize].spec,
            1,
        )
        .expect("the chosen node fits: it was checked in this state");
        let card = if self.policy == Policy::Random && sharing {
            // Random: a random card among those with room.
            let fits: Vec<u16> = node
                .gpus
                .iter()
                .map(|g| g.free_milli() as u16)
                .filter(|&f| f as u32 >= pod.gpu_milli)
                .collect();
            fits.get(self.rng.gen_range(0..fits.len().max(1))).copied()
        } else {
            card
        };
        if let (Some(card), Some(slot)) = (card, p.gpus.first_mut()) {
            // Take the lowest-index card with exactly that much free.
            if let Some(g) = node.gpus.iter().find(|g| g.free_milli() as u16 == card) {
                slot.gpu = g.index;
            }
        }
        self.free_by_model[self.node_model[node_id as usize] as usize] -= pod.gpu_request();
        c.allocate(job, p);
        c.set_phase(job, Phase::Running);
        if self.policy.plugin().reads_affinity() && pod.num_gpu > 0 {
            self.affinity[node_id as usize].push(affinity_tag(&ask));
        }
        // Move the node to its new state group.
        let old = self.node_state[node_id as usize].clone();
        if let Some(ids) = self.groups.get_mut(&old) {
            ids.retain(|&x| x != node_id);
            if ids.is_empty() {
                self.groups.remove(&old);
            }
        }
        let new = self.state_of(node_id as usize);
        self.groups.entry(new.clone()).or_default().push(node_id);
        self.node_state[node_id as usize] = new;
        Some(node_id)
    }

    /// Allocated GPU-milli as a share of capacity, percent.
    pub fn alloc_pct(&self) -> f64 {
        self.allocated_milli() as f64 * 100.0 / self.capacity.max(1) as f64
    }

    /// Allocated GPU-milli.
    pub fn allocated_milli(&self) -> u64 {
        self.cluster
            .nodes
            .iter()
            .flat_map(|n| n.gpus.iter())
            .map(|g| g.used_milli() as u64)
            .sum()
    }

    /// Cluster fragmentation as a share of GPU capacity, percent.
    pub fn frag_pct(&mut self) -> f64 {
        let mut sum = 0.0;
        for s in &self.node_state {
            sum += self.measures.frag.of(s.model, s.free_cpu, &s.free);
        }
        sum * 100.0 / self.capacity.max(1) as f64
    }
}

/// The nodes' GPU capacity, GPU-milli.
pub fn gpu_capacity(nodes: &[TraceNode]) -> u64 {
    nodes.iter().map(|n| n.gpus as u64 * 1000).sum()
}

/// The order pods arrive in (indices into `pods`): the trace shuffled by the seed,
/// then random copies until the GPU request reaches `inflate` x `capacity`. The same
/// for every policy of a seed.
pub fn arrival_order(pods: &[TracePod], capacity: u64, cfg: &ReplayConfig) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut order: Vec<usize> = (0..pods.len()).collect();
    order.shuffle(&mut rng);
    let mut demand: u64 = pods.iter().map(|p| p.gpu_request()).sum();
    let target = (cfg.inflate * capacity as f64) as u64;
    if pods.iter().any(|p| p.gpu_request() > 0) {
        while demand < target {
            let i = rng.gen_range(0..pods.len());
            demand += pods[i].gpu_request();
            order.push(i);
        }
    }
    order
}

/// The pods arrived when the GPU request that arrived first reaches `pct`% of
/// `capacity`: the prefix of `order` whose last pod crosses it (the replay records the
/// curve's point after placing that pod), or all of it.
pub fn arrived_by<'a>(
    pods: &'a [TracePod],
    order: &[usize],
    capacity: u64,
    pct: u32,
) -> Vec<&'a TracePod> {
    let mut arrived: u64 = 0;
    let mut out = Vec::new();
    for &i in order {
        out.push(&pods[i]);
        arrived += pods[i].gpu_request();
        if arrived * 100 >= pct as u64 * capacity {
            break;
        }
    }
    out
}

/// What a placement with hindsight allocates, GPU-milli: the arrived GPU pods all known
/// at once and placed in the order given ([`crate::bound::plan`]'s or
/// [`crate::bound::largest_first`]), each by maar's policy; CPU-only pods left out. A
/// feasible placement, so a lower bound on the best one: with [`crate::bound::bound`]
/// it brackets what any placement of these pods could reach.
pub fn hindsight<'a>(nodes: &[TraceNode], ordered: impl IntoIterator<Item = &'a TracePod>) -> u64 {
    let gpu: Vec<&TracePod> = ordered
        .into_iter()
        .filter(|p| p.gpu_request() > 0)
        .collect();
    let shapes = typical_shapes(
        &gpu.iter().map(|&p| p.clone()).collect::<Vec<_>>(),
        ShapeWeight::Pods,
        false,
    );
    let mut r = Replayer::new(nodes, shapes, Policy::Maar, 0);
    for p in gpu {
        r.place(p);
    }
    r.allocated_milli()
}

/// Runs one replay.
pub fn replay(nodes: &[TraceNode], pods: &[TracePod], cfg: &ReplayConfig) -> ReplayResult {
    let started = Instant::now();
    let capacity = gpu_capacity(nodes);
    let order = arrival_order(pods, capacity, cfg);
    // FGD and the others against the typical shapes, as published; maar against the
    // scarce ones too.
    let shapes = if cfg.policy == Policy::Maar {
        maar_shapes(nodes, pods, cfg.shape_weight, cfg.cpu_shapes)
    } else {
        typical_shapes(pods, cfg.shape_weight, cfg.cpu_shapes)
    };
    let mut r =
        Replayer::new(nodes, shapes, cfg.policy, cfg.seed.wrapping_add(1)).with_ties(cfg.ties);
    let mut curve = Vec::new();
    let mut arrived: u64 = 0;
    let mut next_pct: u32 = 0;
    let (mut placed, mut failed) = (0usize, 0usize);
    for &pi in &order {
        let pod = &pods[pi];
        match r.place(pod) {
            Some(_) => placed += 1,
            None => failed += 1,
        }
        arrived += pod.gpu_request();
        while capacity > 0 && arrived * 100 >= next_pct as u64 * capacity && next_pct <= 130 {
            curve.push(CurvePoint {
                arrived_pct: next_pct,
                alloc_pct: r.alloc_pct(),
                frag_pct: r.frag_pct(),
            });
            next_pct += 1;
        }
    }
    let at100 = curve
        .iter()
        .find(|p| p.arrived_pct == 100)
        .or(curve.last())
        .map(|p| p.alloc_pct)
        .unwrap_or(0.0);
    ReplayResult {
        policy: cfg.policy,
        seed: cfg.seed,
        total_gpus: (capacity / 1000) as u32,
        alloc_pct_at_100: at100,
        unallocated_gpus_at_100: capacity as f64 / 1000.0 * (100.0 - at100) / 100.0,
        curve,
        pods_placed: placed,
        pods_failed: failed,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}

/// The tied node that comes first in the node list.
fn first_in_order(
    ties: &[((&State, &Vec<NodeId>), Verdict)],
    rank: &[u32],
) -> Option<(NodeId, Option<u16>)> {
    ties.iter()
        .flat_map(|t| {
            t.0 .1
                .iter()
                .map(move |&id| (rank[id as usize], id, t.1.card))
        })
        .min_by_key(|x| x.0)
        .map(|(_, id, card)| (id, card))
}

/// Uniformly random node among the tied best states (by node count).
fn pick(
    ties: &[((&State, &Vec<NodeId>), Verdict)],
    rng: &mut ChaCha8Rng,
) -> Option<(NodeId, Option<u16>)> {
    let total: usize = ties.iter().map(|t| t.0 .1.len()).sum();
    if total == 0 {
        return None;
    }
    let mut r = rng.gen_range(0..total);
    for ((_, ids), v) in ties {
        if r < ids.len() {
            return Some((ids[r], v.card));
        }
        r -= ids.len();
    }
    None
}

/// Workload families of the paper, built from a trace by seeded resampling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VariantKind {
    /// `percent` of GPU pods share a GPU (drawn from the trace's sharing pods).
    Sharing,
    /// `percent` of GPU pods require one GPU model (chosen in proportion to each
    /// model's GPUs in the node list).
    GpuSpec,
    /// `percent` of the GPU demand comes from pods asking for several GPUs (drawn from
    /// the trace's multi-GPU pods; the rest from its other GPU pods; the total GPU demand
    /// that of the trace), as the paper builds its multi-GPU workloads.
    MultiGpu,
    /// `percent` of all pods are CPU-only (drawn from the trace's CPU-only pods).
    Cpu,
}

/// Builds a workload variant: the same number of pods (GPU pods for all kinds but
/// `Cpu`), each drawn from the matching pool of the original trace. Deterministic in
/// `seed`.
/// The CPU-only pods a `cpu` variant adds to `gpu_pods` GPU pods so that they make up
/// `percent` of the whole: `None` at 100% or more (no number of them does).
pub fn cpu_variant_pods(gpu_pods: usize, percent: f64) -> Option<usize> {
    let frac = (percent / 100.0).clamp(0.0, 1.0);
    (frac < 1.0).then(|| (gpu_pods as f64 * frac / (1.0 - frac)).round() as usize)
}

pub fn variant(
    pods: &[TracePod],
    nodes: &[TraceNode],
    kind: VariantKind,
    percent: f64,
    seed: u64,
) -> Vec<TracePod> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let frac = (percent / 100.0).clamp(0.0, 1.0);
    let gpu: Vec<&TracePod> = pods.iter().filter(|p| p.num_gpu > 0).collect();
    let cpu: Vec<&TracePod> = pods.iter().filter(|p| p.num_gpu == 0).collect();
    let pick_from = |pool: &[&TracePod], rng: &mut ChaCha8Rng| -> Option<TracePod> {
        (!pool.is_empty()).then(|| pool[rng.gen_range(0..pool.len())].clone())
    };
    let mut out: Vec<TracePod> = Vec::new();
    match kind {
        VariantKind::MultiGpu => {
            // As the paper builds its multi-GPU workloads: `percent` of the GPU demand
            // comes from multi-GPU pods (drawn from the trace's own), the rest from its
            // other GPU pods, the total GPU demand that of the trace.
            let demand: u64 = gpu.iter().map(|p| p.gpu_request()).sum();
            let multi: Vec<&TracePod> = gpu.iter().copied().filter(|p| p.num_gpu > 1).collect();
            let single: Vec<&TracePod> = gpu.iter().copied().filter(|p| p.num_gpu <= 1).collect();
            let want_multi = if multi.is_empty() {
                0.0
            } else {
                demand as f64 * frac
            };
            let want_single = if single.is_empty() {
                0.0
            } else {
                demand as f64 - want_multi
            };
            for (pool, want) in [(&multi, want_multi), (&single, want_single)] {
                let mut got = 0u64;
                while (got as f64) < want {
                    let Some(p) = pick_from(pool, &mut rng) else {
                        break;
                    };
                    got += p.gpu_request().max(1);
                    out.push(p);
                }
            }
            out.extend(cpu.iter().map(|p| (*p).clone()));
        }
        VariantKind::Sharing => {
            let is_in = |p: &TracePod| p.shares();
            let inside: Vec<&TracePod> = gpu.iter().copied().filter(|p| is_in(p)).collect();
            let outside: Vec<&TracePod> = gpu.iter().copied().filter(|p| !is_in(p)).collect();
            for _ in 0..gpu.len() {
                let want_in = rng.gen_bool(frac);
                let pool = if want_in && !inside.is_empty() || outside.is_empty() {
                    &inside
                } else {
                    &outside
                };
                out.extend(pick_from(pool, &mut rng));
            }
            out.extend(cpu.iter().map(|p| (*p).clone()));
        }
        VariantKind::GpuSpec => {
            let mut models: Vec<(String, u64)> = Vec::new();
            for n in nodes.iter().filter(|n| n.gpus > 0) {
                match models.iter_mut().find(|m| m.0 == n.model) {
                    Some(m) => m.1 += n.gpus as u64,
                    None => models.push((n.model.clone(), n.gpus as u64)),
                }
            }
            let total: u64 = models.iter().map(|m| m.1).sum();
            for p in pods {
                let mut p = p.clone();
                if p.num_gpu > 0 && total > 0 && rng.gen_bool(frac) {
                    let mut r = rng.gen_range(0..total);
                    for (m, w) in &models {
                        if r < *w {
                            p.gpu_spec = vec![m.clone()];
                            break;
                        }
                        r -= w;
                    }
                }
                out.push(p);
            }
        }
        VariantKind::Cpu => {
            // Keep the GPU pods; CPU-only pods make up `percent` of the whole.
            // (Never past the trace limit, whoever asks: the command line refuses
            // such a percent before this is called.)
            let n_cpu = cpu_variant_pods(gpu.len(), percent)
                .unwrap_or(cpu.len())
                .min(crate::limits::MAX_TRACE_PODS);
            out.extend(gpu.iter().map(|p| (*p).clone()));
            for _ in 0..n_cpu {
                out.extend(pick_from(&cpu, &mut rng));
            }
        }
    }
    out.shuffle(&mut rng);
    for (i, p) in out.iter_mut().enumerate() {
        p.name = format!("{}-v{i:05}", p.name);
    }
    out
}
