//! `maar replay`: the trace experiment from the command line — one run, or the sweep
//! of every policy over seeds 42-51 — with tables, JSON and an SVG of the curves.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::ValueEnum;
use plotters::prelude::*;
use serde::Serialize;

use maar_scheduler::bound::{largest_first, plan, Bound};
use maar_scheduler::replay::{
    arrival_order, arrived_by, gpu_capacity, hindsight, replay, Policy, ReplayConfig, ReplayResult,
    ShapeWeight, Ties, TraceNode, TracePod,
};

use crate::failure::Failure;
use crate::load::InputError;
use crate::trace::{read_nodes, read_pods};

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum PolicyArg {
    Random,
    Dotprod,
    Gpuclustering,
    Gpupacking,
    Bestfit,
    Fgd,
    Maar,
}

impl PolicyArg {
    pub fn policy(self) -> Policy {
        match self {
            PolicyArg::Random => Policy::Random,
            PolicyArg::Dotprod => Policy::DotProd,
            PolicyArg::Gpuclustering => Policy::GpuClustering,
            PolicyArg::Gpupacking => Policy::GpuPacking,
            PolicyArg::Bestfit => Policy::BestFit,
            PolicyArg::Fgd => Policy::Fgd,
            PolicyArg::Maar => Policy::Maar,
        }
    }
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum VariantArg {
    Sharing,
    GpuSpec,
    MultiGpu,
    Cpu,
}

impl VariantArg {
    pub fn kind(self) -> maar_scheduler::replay::VariantKind {
        use maar_scheduler::replay::VariantKind as K;
        match self {
            VariantArg::Sharing => K::Sharing,
            VariantArg::GpuSpec => K::GpuSpec,
            VariantArg::MultiGpu => K::MultiGpu,
            VariantArg::Cpu => K::Cpu,
        }
    }
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum TypicalBy {
    Pods,
    GpuDemand,
}

/// How equally scored nodes are chosen between.
#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum TiesArg {
    /// The first in the node list, shuffled once per seed (the published simulator).
    NodeOrder,
    /// Uniformly at random.
    Random,
}

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// Node list CSV (sn,cpu_milli,memory_mib,gpu,model).
    #[arg(long, value_name = "CSV")]
    pub nodes: PathBuf,
    /// Pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]).
    #[arg(long, value_name = "CSV")]
    pub pods: PathBuf,
    #[arg(long, value_enum, default_value_t = PolicyArg::Maar)]
    pub policy: PolicyArg,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Total GPU request to replay, as a multiple of the cluster's GPU capacity.
    #[arg(long, default_value_t = 1.3)]
    pub inflate: f64,
    /// Run every policy x seeds 42-51 (or --seeds) and print the means.
    #[arg(long)]
    pub sweep: bool,
    /// The sweep's seeds, FROM-TO (the paper's artifact and its published means are of
    /// 42-51; other seeds show whether a lead is tuned to those).
    #[arg(long, value_name = "FROM-TO", default_value = "42-51", value_parser = parse_seeds, requires = "sweep")]
    pub seeds: std::ops::RangeInclusive<u64>,
    /// Published results to compare with (fgd_reference_alloc_default.csv).
    #[arg(long, value_name = "CSV")]
    pub reference: Option<PathBuf>,
    /// Draw the allocation curves (mean over seeds per policy) to an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// How typical shapes are weighted for fragmentation (the published setup counts pods).
    #[arg(long, value_enum, default_value_t = TypicalBy::Pods)]
    pub typical_by: TypicalBy,
    /// Count CPU-only pods among the typical shapes (the published setup does).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub cpu_shapes: bool,
    /// How a tie between equally scored nodes is broken (Random always picks at random).
    #[arg(long, value_enum, default_value_t = TiesArg::NodeOrder)]
    pub ties: TiesArg,
    #[arg(long, value_enum, default_value_t = crate::args::SimOutput::Table)]
    pub output: crate::args::SimOutput,
    /// Also compute an upper bound on the allocation any placement could reach at 100%
    /// arrival (the same arrived pods per seed; an LP relaxation of the packing), and
    /// how far each policy is from it.
    #[arg(long)]
    pub bound: bool,
}

/// `--seeds FROM-TO`: at least one seed, at most 10,000.
fn parse_seeds(s: &str) -> Result<std::ops::RangeInclusive<u64>, String> {
    let (from, to) = s
        .split_once('-')
        .ok_or_else(|| format!("`{s}` is not FROM-TO (for example 42-51)"))?;
    let num = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{x}` in `{s}` is not a seed (a whole number)"))
    };
    let (from, to) = (num(from)?, num(to)?);
    if to < from {
        return Err(format!("`{s}` ends before it starts"));
    }
    if to - from >= 10_000 {
        return Err(format!("`{s}` is more than 10,000 seeds"));
    }
    Ok(from..=to)
}

#[derive(Serialize)]
struct SweepRow {
    policy: Policy,
    mean_alloc_pct_at_100: f64,
    /// With --bound: the mean over seeds of the bound at 100% arrival.
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_bound_pct_at_100: Option<f64>,
    /// With --bound: the mean over seeds of a placement with hindsight (a lower bound on
    /// the best placement).
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_hindsight_pct_at_100: Option<f64>,
    reference_alloc_pct_at_100: Option<f64>,
    mean_unallocated_gpus_at_100: f64,
    mean_elapsed_ms: f64,
    runs: Vec<ReplayResult>,
}

/// `f` of each item, on all cores; results come back in input order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new((0..items.len()).map(|_| None).collect::<Vec<_>>());
    std::thread::scope(|s| {
        for _ in 0..threads.min(items.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                results.lock().expect("no thread panics while holding it")[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .expect("threads joined")
        .into_iter()
        .map(|r| r.expect("every item done"))
        .collect()
}

/// Runs the given configurations on all cores; results come back in input order.
pub fn run_all(nodes: &[TraceNode], pods: &[TracePod], cfgs: &[ReplayConfig]) -> Vec<ReplayResult> {
    par_map(cfgs, |cfg| replay(nodes, pods, cfg))
}

/// Published means at 100% arrival by policy, from the reference CSV. A file of
/// several workloads (the artifact's `analysis_allo_discrete.csv` holds all 17) is
/// read for `workload` alone: the pod list's file name without `.csv`.
pub fn read_reference(path: &Path, workload: &str) -> Result<Vec<(Policy, f64)>, InputError> {
    let file = path.display().to_string();
    let e = |line: Option<u64>, m: String| InputError {
        file: file.clone(),
        line,
        column: None,
        field: None,
        message: m,
    };
    let mut rdr = csv::Reader::from_path(path).map_err(|x| e(None, format!("cannot read: {x}")))?;
    let headers = rdr
        .headers()
        .map_err(|x| e(Some(1), x.to_string()))?
        .clone();
    let pcol = headers
        .iter()
        .position(|h| h == "sc_policy")
        .ok_or_else(|| e(Some(1), "missing column `sc_policy`".into()))?;
    let col = headers
        .iter()
        .position(|h| h == "100")
        .ok_or_else(|| e(Some(1), "missing column `100`".into()))?;
    let wcol = headers.iter().position(|h| h == "workload");
    let mut seen: Vec<String> = Vec::new();
    let mut sums: Vec<(Policy, f64, u32)> = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|x| e(x.position().map(|p| p.line()), x.to_string()))?;
        let line = rec.position().map(|p| p.line());
        if let Some(w) = wcol.and_then(|c| rec.get(c)) {
            if w != workload {
                if !seen.iter().any(|s| s == w) && seen.len() < 40 {
                    seen.push(w.to_string());
                }
                continue;
            }
        }
        let name = rec.get(pcol).unwrap_or("").to_ascii_lowercase();
        let name = name.split('-').next_back().unwrap_or("");
        let Some(policy) = Policy::parse(name) else {
            continue;
        };
        let v: f64 = rec.get(col).unwrap_or("").parse().map_err(|_| {
            e(
                line,
                format!(
                    "column 100: `{}` is not a number",
                    rec.get(col).unwrap_or("")
                ),
            )
        })?;
        match sums.iter_mut().find(|x| x.0 == policy) {
            Some(x) => {
                x.1 += v;
                x.2 += 1;
            }
            None => sums.push((policy, v, 1)),
        }
    }
    if sums.is_empty() && !seen.is_empty() {
        return Err(e(
            None,
            format!(
                "no results for workload `{workload}` (the pod list's file name without .csv); \
                 the file has results for {}: give the pod list of one of those, or leave \
                 out --reference",
                seen.join(", ")
            ),
        ));
    }
    Ok(sums
        .into_iter()
        .map(|(p, s, n)| (p, s / n as f64))
        .collect())
}

/// `milli` as a share of `capacity`, percent.
fn pct(milli: u64, capacity: u64) -> f64 {
    milli as f64 * 100.0 / capacity.max(1) as f64
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0), |a, x| (a.0 + x, a.1 + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// Draws the mean allocation curve of each policy (as in the paper's figures).
pub fn plot(path: &Path, runs: &[ReplayResult]) -> Result<(), Failure> {
    let mut policies: Vec<Policy> = runs.iter().map(|r| r.policy).collect();
    policies.sort();
    policies.dedup();
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let fail = |e: String| Failure::Usage(format!("{}: cannot draw: {e}", path.display()));
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "GPU allocation vs arrived GPU demand (mean over seeds)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..130f64, 0f64..100f64)
        .map_err(|e| fail(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("arrived GPU demand, % of capacity")
        .y_desc("GPU allocation, %")
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    let colours = [
        RED,
        BLUE,
        GREEN,
        MAGENTA,
        CYAN,
        BLACK,
        RGBColor(255, 140, 0),
    ];
    for (i, p) in policies.iter().enumerate() {
        let mine: Vec<&ReplayResult> = runs.iter().filter(|r| r.policy == *p).collect();
        let pts: Vec<(f64, f64)> = (0..=130u32)
            .filter_map(|a| {
                let v: Vec<f64> = mine
                    .iter()
                    .filter_map(|r| r.curve.iter().find(|c| c.arrived_pct == a))
                    .map(|c| c.alloc_pct)
                    .collect();
                (!v.is_empty()).then(|| (a as f64, mean(v.into_iter())))
            })
            .collect();
        let c = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(|e| fail(e.to_string()))?
            .label(p.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    root.present().map_err(|e| fail(e.to_string()))?;
    Ok(())
}

/// One seed's arrivals at 100%: the bound no placement beats, what a placement with
/// hindsight allocates (the better of two orders, GPU-milli; the best placement lies
/// between them), and how long the bound's LP took on its own.
#[derive(Clone, Copy)]
pub struct SeedBound {
    pub bound: Bound,
    pub hindsight: u64,
    pub lp_ms: f64,
}

/// [`SeedBound`] for each of `seeds` (in their order, on all cores).
pub fn bounds(
    nodes: &[TraceNode],
    pods: &[TracePod],
    seeds: &[ReplayConfig],
) -> Result<Vec<SeedBound>, Failure> {
    let capacity = gpu_capacity(nodes);
    par_map(seeds, |cfg| {
        let order = arrival_order(pods, capacity, cfg);
        let arrived = arrived_by(pods, &order, capacity, 100);
        let lp = Instant::now();
        plan(nodes, &arrived).map(|(bound, order)| {
            let lp_ms = lp.elapsed().as_secs_f64() * 1000.0;
            // Two greedy orders, the better kept: what the bound's optimum places first,
            // and largest first (better where multi-GPU pods are much of the demand).
            let planned = hindsight(nodes, order);
            let largest = hindsight(nodes, largest_first(arrived.clone()));
            SeedBound {
                bound,
                lp_ms,
                hindsight: planned.max(largest),
            }
        })
    })
    .into_iter()
    .map(|b| b.map_err(|e| Failure::No(e.to_string())))
    .collect()
}

pub fn run_on(a: ReplayArgs, o: &mut crate::out::Out) -> Result<i32, Failure> {
    if !(a.inflate > 0.0 && a.inflate <= 10.0) {
        return Err(Failure::Usage(format!(
            "--inflate {} must be within (0, 10]",
            a.inflate
        )));
    }
    if let Some(p) = &a.plot {
        let svg = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"));
        if !svg {
            return Err(Failure::Usage(format!(
                "--plot {}: the plot is drawn as SVG; name the file FILE.svg",
                p.display()
            )));
        }
    }
    let nodes = read_nodes(&a.nodes)?;
    let pods = read_pods(&a.pods)?;
    // An experiment on GPU allocation needs GPUs; pods bound to models no node has are
    // said (they all fail, and the curve would read as the policy's doing).
    if nodes.iter().all(|n| n.gpus == 0) {
        return Err(Failure::Usage(format!(
            "{}: no node has a GPU (its `gpu` column is 0 throughout): the replay measures GPU allocation; give a node list with GPU nodes",
            a.nodes.display()
        )));
    }
    let models: std::collections::BTreeSet<String> = nodes
        .iter()
        .filter(|n| n.gpus > 0)
        .map(|n| n.model.to_lowercase())
        .collect();
    let mut unknown: std::collections::BTreeMap<String, usize> = Default::default();
    for p in pods
        .iter()
        .filter(|p| p.num_gpu > 0 && !p.gpu_spec.is_empty())
    {
        if !p
            .gpu_spec
            .iter()
            .any(|m| models.contains(&m.to_lowercase()))
        {
            *unknown.entry(p.gpu_spec.join("|")).or_default() += 1;
        }
    }
    if !unknown.is_empty() {
        let n: usize = unknown.values().sum();
        let named: Vec<String> = unknown
            .keys()
            .take(5)
            .map(|m| maar_scheduler::limits::echo(m))
            .collect();
        eprintln!(
            "maar: warning: {n} pods of {} ask only for GPU models no node of {} has ({}{}): they fail on every policy",
            a.pods.display(),
            a.nodes.display(),
            named.join(", "),
            if unknown.len() > 5 { ", ..." } else { "" }
        );
    }
    let workload = a
        .pods
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let reference = a
        .reference
        .as_deref()
        .map(|r| read_reference(r, &workload))
        .transpose()?;
    let cfg = |policy, seed| ReplayConfig {
        policy,
        seed,
        inflate: a.inflate,
        shape_weight: match a.typical_by {
            TypicalBy::Pods => ShapeWeight::Pods,
            TypicalBy::GpuDemand => ShapeWeight::GpuDemand,
        },
        cpu_shapes: a.cpu_shapes,
        ties: match a.ties {
            TiesArg::NodeOrder => Ties::NodeOrder,
            TiesArg::Random => Ties::Random,
        },
    };
    let mut w = |s: String| o.put(&s);
    if !a.sweep {
        let one = cfg(a.policy.policy(), a.seed);
        let r = replay(&nodes, &pods, &one);
        let b = if a.bound {
            Some(bounds(&nodes, &pods, std::slice::from_ref(&one))?[0])
        } else {
            None
        };
        if let Some(p) = &a.plot {
            plot(p, std::slice::from_ref(&r))?;
        }
        match a.output {
            crate::args::SimOutput::Json => {
                let mut v = serde_json::to_value(&r).expect("serialisable");
                if let (
                    Some(SeedBound {
                        bound: b,
                        hindsight: h,
                        ..
                    }),
                    Some(m),
                ) = (b, v.as_object_mut())
                {
                    m.insert("bound_pct_at_100".into(), b.pct().into());
                    m.insert("bound_idle_gpus_at_100".into(), b.idle_gpus().into());
                    m.insert(
                        "bound_left_out_slice_gpus".into(),
                        (b.left_out_slices / 1000.0).into(),
                    );
                    m.insert(
                        "bound_left_out_whole_gpus".into(),
                        (b.left_out_whole / 1000.0).into(),
                    );
                    m.insert("hindsight_pct_at_100".into(), pct(h, b.capacity).into());
                }
                w(serde_json::to_string_pretty(&v).expect("serialisable") + "\n")
            }
            crate::args::SimOutput::Table => {
                w(format!(
                    "policy {} seed {}: {} GPUs, allocation at 100% arrival {:.2}% ({:.1} GPUs idle), {} pods placed, {} failed, {} ms\n",
                    r.policy.name(), r.seed, r.total_gpus, r.alloc_pct_at_100, r.unallocated_gpus_at_100, r.pods_placed, r.pods_failed, r.elapsed_ms
                ));
                if let Some(SeedBound {
                    bound: b,
                    hindsight: h,
                    ..
                }) = b
                {
                    w(format!(
                        "bound at 100% arrival {:.2}% (no placement leaves fewer than {:.1} GPUs idle); with hindsight {:.2}% is reached: {:.1} GPUs between this policy and the bound\n",
                        b.pct(),
                        b.idle_gpus(),
                        pct(h, b.capacity),
                        r.unallocated_gpus_at_100 - b.idle_gpus()
                    ));
                    w(format!(
                        "the bound's optimum leaves out {:.1} GPUs of shared-card slices and {:.1} of whole-card pods that fit an empty node\n",
                        b.left_out_slices / 1000.0,
                        b.left_out_whole / 1000.0
                    ));
                    if b.models_without_fills > 0 {
                        w(format!(
                            "{} GPU model(s) had too many ways to fill a shared card (many small slice sizes): their cards are bounded by sums and counts only, a looser bound\n",
                            b.models_without_fills
                        ));
                    }
                }
                w("ARRIVED  ALLOC   FRAG\n".into());
                for c in r.curve.iter().filter(|c| c.arrived_pct % 10 == 0) {
                    w(format!(
                        "{:>6}%  {:>5.1}%  {:>5.1}%\n",
                        c.arrived_pct, c.alloc_pct, c.frag_pct
                    ));
                }
            }
        }
        return Ok(0);
    }
    let started = Instant::now();
    let cfgs: Vec<ReplayConfig> = Policy::ALL
        .iter()
        .flat_map(|&p| a.seeds.clone().map(move |s| (p, s)))
        .map(|(p, s)| cfg(p, s))
        .collect();
    let runs = run_all(&nodes, &pods, &cfgs);
    let seeds: Vec<ReplayConfig> = a.seeds.clone().map(|s| cfg(Policy::Maar, s)).collect();
    let per_seed = if a.bound {
        Some(bounds(&nodes, &pods, &seeds)?)
    } else {
        None
    };
    let lp_ms = per_seed
        .as_ref()
        .map_or(0.0, |b| mean(b.iter().map(|b| b.lp_ms)));
    let total_gpus = gpu_capacity(&nodes) as f64 / 1000.0;
    let bound_pct = per_seed
        .as_ref()
        .map(|b| mean(b.iter().map(|b| b.bound.pct())));
    let bound_idle = per_seed
        .as_ref()
        .map(|b| mean(b.iter().map(|b| b.bound.idle_gpus())));
    let hindsight_pct = per_seed
        .as_ref()
        .map(|b| mean(b.iter().map(|b| pct(b.hindsight, b.bound.capacity))));
    let rows: Vec<SweepRow> = Policy::ALL
        .iter()
        .map(|&p| {
            let mine: Vec<ReplayResult> = runs.iter().filter(|r| r.policy == p).cloned().collect();
            SweepRow {
                policy: p,
                mean_alloc_pct_at_100: mean(mine.iter().map(|r| r.alloc_pct_at_100)),
                mean_bound_pct_at_100: bound_pct,
                mean_hindsight_pct_at_100: hindsight_pct,
                reference_alloc_pct_at_100: reference
                    .as_ref()
                    .and_then(|v| v.iter().find(|x| x.0 == p).map(|x| x.1)),
                mean_unallocated_gpus_at_100: mean(mine.iter().map(|r| r.unallocated_gpus_at_100)),
                mean_elapsed_ms: mean(mine.iter().map(|r| r.elapsed_ms as f64)),
                runs: mine,
            }
        })
        .collect();
    if let Some(p) = &a.plot {
        plot(p, &runs)?;
    }
    match a.output {
        crate::args::SimOutput::Json => {
            w(serde_json::to_string_pretty(&rows).expect("serialisable") + "\n")
        }
        crate::args::SimOutput::Table => {
            // The published means are of seeds 42-51: other seeds compare with them,
            // not with the same seeds.
            let of_other_seeds = a.reference.is_some() && a.seeds != (42..=51);
            w(format!(
                "{} seeds ({}-{}), inflate {}{}\n",
                a.seeds.clone().count(),
                a.seeds.start(),
                a.seeds.end(),
                a.inflate,
                if of_other_seeds {
                    "; REFERENCE is the published mean of seeds 42-51"
                } else {
                    ""
                }
            ));
            w(format!(
                "POLICY         ALLOC@100  REFERENCE  DIFF    IDLE GPUS  MS/RUN{}\n",
                if a.bound { "  GPUS TO BOUND" } else { "" }
            ));
            for r in &rows {
                let (refv, diff) = match r.reference_alloc_pct_at_100 {
                    Some(x) => (
                        format!("{x:>8.2}%"),
                        format!("{:>+5.2}", r.mean_alloc_pct_at_100 - x),
                    ),
                    None => ("        -".into(), "    -".into()),
                };
                let to_bound = match bound_idle {
                    Some(b) => format!("  {:>13.1}", r.mean_unallocated_gpus_at_100 - b),
                    None => String::new(),
                };
                w(format!(
                    "{:<14} {:>8.2}%  {refv}  {diff}  {:>9.1}  {:>6.0}{to_bound}\n",
                    r.policy.name(),
                    r.mean_alloc_pct_at_100,
                    r.mean_unallocated_gpus_at_100,
                    r.mean_elapsed_ms
                ));
            }
            if let (Some(b), Some(idle), Some(h)) = (bound_pct, bound_idle, hindsight_pct) {
                w(format!(
                    "{:<14} {:>8.2}%          -      -  {:>9.1}          (every arrival known at once)\n",
                    "hindsight",
                    h,
                    (100.0 - h) * total_gpus / 100.0,
                ));
                w(format!(
                    "{:<14} {:>8.2}%          -      -  {:>9.1}  {:>6.0}  (an LP bound: no placement allocates more)\n",
                    "bound",
                    b,
                    idle,
                    lp_ms
                ));
            }
            w(format!(
                "wall time {:.1} s\n",
                started.elapsed().as_secs_f64()
            ));
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_of_many_workloads_is_read_for_the_pod_lists_own() {
        let dir = std::env::temp_dir().join(format!("maar-reference-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("analysis_allo_discrete.csv");
        std::fs::write(
            &f,
            "workload,sc_policy,tune,seed,total_gpus,99,100\n\
             openb_pod_list_default,06-FGD,1.3,42,6212,90,95.0\n\
             openb_pod_list_default,06-FGD,1.3,43,6212,90,96.0\n\
             openb_pod_list_multigpu30,06-FGD,1.3,42,6212,80,81.0\n\
             openb_pod_list_multigpu30,01-Random,1.3,42,6212,70,71.0\n",
        )
        .unwrap();
        let got = read_reference(&f, "openb_pod_list_default").unwrap();
        assert_eq!(got, vec![(Policy::Fgd, 95.5)]);
        let got = read_reference(&f, "openb_pod_list_multigpu30").unwrap();
        assert_eq!(got, vec![(Policy::Fgd, 81.0), (Policy::Random, 71.0)]);
        let err = read_reference(&f, "mine").unwrap_err().to_string();
        assert!(
            err.contains("no results for workload `mine`")
                && err.contains("openb_pod_list_multigpu30"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
