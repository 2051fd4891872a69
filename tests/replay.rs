//! Trace replay on the shared Alibaba trace, and the `maar replay` command line.
//! Tests that need `../shared/data/openb/` skip with a message when it is absent.

use std::path::{Path, PathBuf};
use std::process::Command;

use maar::trace::{read_nodes, read_pods};
use maar_scheduler::bound::plan;
use maar_scheduler::replay::{
    arrival_order, arrived_by, gpu_capacity, hindsight, replay, Policy, ReplayConfig,
};

const DATA: &str = "../shared/data/openb";

fn data() -> Option<(String, String)> {
    let n = format!("{DATA}/openb_node_list_gpu_node.csv");
    let p = format!("{DATA}/openb_pod_list_default.csv");
    if Path::new(&n).exists() && Path::new(&p).exists() {
        Some((n, p))
    } else {
        eprintln!("skipping: the openb trace is not at {DATA}");
        None
    }
}

#[test]
fn the_published_order_and_means_hold_and_maar_beats_fgd_on_the_shared_trace() {
    let Some((n, p)) = data() else { return };
    let nodes = read_nodes(Path::new(&n)).unwrap();
    let pods = read_pods(Path::new(&p)).unwrap();
    assert_eq!(
        (
            nodes.len(),
            nodes.iter().map(|n| n.gpus).sum::<u32>(),
            pods.len()
        ),
        (1213, 6212, 8152)
    );
    for seed in [42, 43] {
        let at = |policy| replay(&nodes, &pods, &ReplayConfig::new(policy, seed)).alloc_pct_at_100;
        let (fgd, best, dot, random) = (
            at(Policy::Fgd),
            at(Policy::BestFit),
            at(Policy::DotProd),
            at(Policy::Random),
        );
        assert!(
            fgd > best && best > dot && dot > random,
            "seed {seed}: fgd {fgd:.2} bestfit {best:.2} dotprod {dot:.2} random {random:.2}"
        );
        // Each of the six within a point of the published means (one seed of ten, so
        // not the means' own 1.0 target, but the same neighbourhood).
        let (packing, clustering) = (at(Policy::GpuPacking), at(Policy::GpuClustering));
        for (name, ours, published) in [
            ("random", random, 86.30),
            ("dotprod", dot, 90.62),
            ("gpuclustering", clustering, 91.65),
            ("gpupacking", packing, 91.78),
            ("bestfit", best, 92.86),
            ("fgd", fgd, 95.23),
        ] {
            assert!(
                (ours - published).abs() < 1.0,
                "seed {seed}: {name} {ours:.2} vs published {published}"
            );
        }
        let maar = at(Policy::Maar);
        assert!(maar > fgd, "seed {seed}: maar {maar:.2} fgd {fgd:.2}");
    }
}

#[test]
fn no_policy_and_no_hindsight_placement_beats_the_bound_on_the_shared_trace() {
    let Some((n, p)) = data() else { return };
    let nodes = read_nodes(Path::new(&n)).unwrap();
    let pods = read_pods(Path::new(&p)).unwrap();
    let capacity = gpu_capacity(&nodes);
    let cfg = ReplayConfig::new(Policy::Maar, 42);
    let order = arrival_order(&pods, capacity, &cfg);
    let arrived = arrived_by(&pods, &order, capacity, 100);
    let (b, order) = plan(&nodes, &arrived).unwrap();
    let h = hindsight(&nodes, order) as f64;
    assert!(h <= b.milli, "hindsight {h} over the bound {}", b.milli);
    for policy in Policy::ALL {
        let r = replay(&nodes, &pods, &ReplayConfig::new(policy, 42));
        assert!(
            r.alloc_pct_at_100 <= b.pct(),
            "{} {:.2}% over the bound {:.2}%",
            policy.name(),
            r.alloc_pct_at_100,
            b.pct()
        );
    }
    // Not the trivial 100%: the 810-milli slices' gaps, among others, are seen.
    assert!(b.pct() < 99.0 && b.pct() > 95.0, "{:.2}%", b.pct());
}

fn maar(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_maar"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn replay_json_has_the_documented_fields() {
    let Some((n, p)) = data() else { return };
    let o = maar(&[
        "replay", "--nodes", &n, "--pods", &p, "--policy", "maar", "--seed", "7", "--output",
        "json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "policy",
        "seed",
        "total_gpus",
        "curve",
        "alloc_pct_at_100",
        "unallocated_gpus_at_100",
        "pods_placed",
        "pods_failed",
        "elapsed_ms",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["policy"], "maar");
    assert_eq!(v["total_gpus"], 6212);
    assert!(v.get("bound_pct_at_100").is_none(), "only with --bound");
    let curve = v["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 131);
    for k in ["arrived_pct", "alloc_pct", "frag_pct"] {
        assert!(curve[50].get(k).is_some());
    }
}

/// `maar replay --nodes NODES --pods PODS EXTRA...`
fn replay_on(nodes: &Path, pods: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "replay",
        "--nodes",
        nodes.to_str().unwrap(),
        "--pods",
        pods.to_str().unwrap(),
    ];
    args.extend(extra);
    maar(&args)
}

/// A node list and a pod list written to a fresh temporary folder named by `tag`.
fn trace_files(tag: &str, nodes: &str, pods: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("maar-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (n, p) = (dir.join("nodes.csv"), dir.join("pods.csv"));
    std::fs::write(&n, nodes).unwrap();
    std::fs::write(&p, pods).unwrap();
    (dir, n, p)
}

#[test]
fn bad_csv_rows_name_file_line_and_column() {
    let (dir, nodes, pods) = trace_files(
        "replay",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,2,A100\nn2,32000,lots,2,A100\n",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,500\n",
    );
    let o = replay_on(&nodes, &pods, &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nodes.csv:3: memory_mib: `lots` is not a non-negative integer"),
        "{err}"
    );
    // Pod lists with only the first five columns are read by header name.
    std::fs::write(
        &nodes,
        "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,2,A100\n",
    )
    .unwrap();
    let o = replay_on(&nodes, &pods, &["--policy", "bestfit"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("policy bestfit seed 42: 2 GPUs"));
    std::fs::write(
        &pods,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,2,500\n",
    )
    .unwrap();
    let o = replay_on(&nodes, &pods, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("pods.csv:2: gpu_milli: only single-GPU pods may share a GPU"));
    std::fs::write(
        &pods,
        "name,cpu_milli,memory_mib,gpu_milli\np1,1000,1024,500\n",
    )
    .unwrap();
    let o = replay_on(&nodes, &pods, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing column `num_gpu`"));
    assert_eq!(
        maar(&["replay", "--nodes", "x", "--pods", "y", "--policy", "magic"])
            .status
            .code(),
        Some(2)
    );
    // The plot is SVG; another name is refused before any work, not written as SVG.
    let png = dir.join("curves.png");
    let o = replay_on(&nodes, &pods, &["--plot", png.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("name the file FILE.svg"));
    assert!(!png.exists());
    // --ties and --cpu-shapes take their documented values.
    std::fs::write(
        &pods,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,500\n",
    )
    .unwrap();
    for extra in [["--ties", "random"], ["--cpu-shapes", "false"]] {
        let o = replay_on(&nodes, &pods, &extra);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = replay_on(&nodes, &pods, &["--ties", "sometimes"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn variants_are_seeded_and_shaped_as_asked() {
    let Some((n, p)) = data() else { return };
    let run = |kind: &str, pct: &str, seed: &str| {
        let o = maar(&[
            "trace-variant",
            "--pods",
            &p,
            "--nodes",
            &n,
            "--kind",
            kind,
            "--percent",
            pct,
            "--seed",
            seed,
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    };
    let a = run("sharing", "80", "1");
    assert_eq!(a, run("sharing", "80", "1"), "same seed, same file");
    assert_ne!(a, run("sharing", "80", "2"));
    let text = String::from_utf8(a).unwrap();
    let gpu: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[3] != "0")
        .collect();
    let shared =
        gpu.iter().filter(|f| f[3] == "1" && f[4] != "1000").count() as f64 / gpu.len() as f64;
    assert!((shared - 0.8).abs() < 0.02, "sharing share {shared}");
    let text = String::from_utf8(run("gpu-spec", "33", "1")).unwrap();
    let gpu: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[3] != "0")
        .collect();
    let spec = gpu.iter().filter(|f| !f[5].is_empty()).count() as f64 / gpu.len() as f64;
    assert!((spec - 0.33).abs() < 0.02, "constrained share {spec}");
    // Multi-GPU, as the paper builds it: the share of GPU demand, not of pods, and the
    // trace's total GPU demand kept.
    let demand = |text: &str| -> (f64, f64) {
        let (mut all, mut multi) = (0.0, 0.0);
        for f in text
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
        {
            let g: f64 = f[3].parse().unwrap();
            let d = g * f[4].parse::<f64>().unwrap_or(0.0);
            all += d;
            if g > 1.0 {
                multi += d;
            }
        }
        (all, multi)
    };
    let (base, _) = demand(&std::fs::read_to_string(&p).unwrap());
    for pct in [20.0, 50.0] {
        let text = String::from_utf8(run("multi-gpu", &pct.to_string(), "1")).unwrap();
        let (all, multi) = demand(&text);
        assert!(
            (multi / all - pct / 100.0).abs() < 0.01,
            "multi-GPU demand share {} at {pct}%",
            multi / all
        );
        assert!(
            (all / base - 1.0).abs() < 0.01,
            "total demand {all} vs {base}"
        );
    }
}

#[test]
fn replay_bound_says_what_no_placement_beats_on_a_small_trace() {
    // One card: two 600-milli slices cannot share it, whatever the policy.
    let (dir, nodes, pods) = trace_files(
        "bound",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,1,T4\n",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,600\np2,1000,1024,1,600\n",
    );
    let o = replay_on(
        &nodes,
        &pods,
        &["--bound", "--output", "json", "--inflate", "1.2"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        (v["bound_pct_at_100"].as_f64().unwrap() - 60.0).abs() < 1e-6,
        "{v}"
    );
    assert!((v["bound_idle_gpus_at_100"].as_f64().unwrap() - 0.4).abs() < 1e-6);
    assert!((v["hindsight_pct_at_100"].as_f64().unwrap() - 60.0).abs() < 1e-6);
    // One of the two slices is left out by any placement, the bound's optimum too.
    assert!((v["bound_left_out_slice_gpus"].as_f64().unwrap() - 0.6).abs() < 1e-6);
    assert_eq!(v["bound_left_out_whole_gpus"].as_f64(), Some(0.0));
    let o = replay_on(&nodes, &pods, &["--bound", "--inflate", "1.2"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("the bound's optimum leaves out 0.6 GPUs of shared-card slices and 0.0 of whole-card pods that fit an empty node"),
        "{text}"
    );
    let o = replay_on(&nodes, &pods, &["--bound", "--sweep"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text.lines().find(|l| l.starts_with("bound ")).expect(&text);
    assert!(row.contains("60.00%"), "{text}");
    assert!(text.contains("GPUS TO BOUND"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The published openb traces in the folder `MAAR_OPENB_TRACES` names (alibaba/
/// clusterdata, `cluster-trace-gpu-v2023/csv/`), as the mean over seeds 42-51 (the
/// published means' seeds) of a policy's allocation at 100% arrival on a pod list
/// (`default`, `multigpu30`, ...); `None`, said, without the folder.
fn published_traces() -> Option<impl Fn(&str, Policy) -> f64> {
    let Ok(dir) = std::env::var("MAAR_OPENB_TRACES") else {
        eprintln!(
            "skipping: MAAR_OPENB_TRACES does not name a folder of the openb traces \
             (alibaba/clusterdata, cluster-trace-gpu-v2023/csv)"
        );
        return None;
    };
    let nodes = read_nodes(&Path::new(&dir).join("openb_node_list_gpu_node.csv")).unwrap();
    Some(move |trace: &str, policy| {
        let pods = read_pods(&Path::new(&dir).join(format!("openb_pod_list_{trace}.csv"))).unwrap();
        (42..=51)
            .map(|seed| replay(&nodes, &pods, &ReplayConfig::new(policy, seed)).alloc_pct_at_100)
            .sum::<f64>()
            / 10.0
    })
}

/// The published multi-GPU traces (alibaba/clusterdata, `cluster-trace-gpu-v2023/csv/`),
/// read from the folder `MAAR_OPENB_TRACES` names; skipped with a message without it.
/// There a few pods ask for 8 GPUs and 120 cores, which only the 39 nodes of 128 cores
/// hold: measured against the typical shapes alone, maar filled those nodes with small
/// pods and fell behind FGD (seeds 42-51: 96.27% against 96.30% on multigpu30, 96.80%
/// against 96.85% on multigpu40).
#[test]
fn maar_is_ahead_of_fgd_on_the_published_multi_gpu_traces() {
    let Some(mean) = published_traces() else {
        return;
    };
    for trace in ["multigpu30", "multigpu40"] {
        let (fgd, maar) = (mean(trace, Policy::Fgd), mean(trace, Policy::Maar));
        assert!(maar > fgd, "{trace}: maar {maar:.3} fgd {fgd:.3}");
    }
}

/// DotProd as the published artifact runs it (GPU dimensions merged, the tightest card):
/// its means over seeds 42-51 on the all-sharing and the model-bound traces, against the
/// artifact's `analysis_allo_discrete.csv` (81.98% and 79.82%). Matched card by card, as
/// it was before, it read 80.47% and 81.62%. Reads the folder `MAAR_OPENB_TRACES` names.
#[test]
fn dotprod_replays_as_published_on_the_sharing_and_model_bound_traces() {
    let Some(mean) = published_traces() else {
        return;
    };
    for (trace, published) in [("gpushare100", 81.98), ("gpuspec33", 79.82)] {
        let mean = mean(trace, Policy::DotProd);
        assert!(
            (mean - published).abs() < 0.25,
            "{trace}: dotprod {mean:.2} against the published {published}"
        );
    }
}

#[test]
fn a_sweep_runs_the_seeds_asked_and_a_bad_range_is_a_usage_error() {
    let (dir, nodes, pods) = trace_files(
        "seeds",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,32000,65536,2,T4\n",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,600\np2,1000,1024,1,1000\n",
    );
    let o = replay_on(&nodes, &pods, &["--sweep", "--seeds", "7-9"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("3 seeds (7-9), inflate 1.3"), "{text}");
    let o = replay_on(&nodes, &pods, &["--sweep", "--output", "json"]);
    assert_eq!(o.status.code(), Some(0));
    // Published means are of seeds 42-51: other seeds say what they compare with.
    let reference = dir.join("reference.csv");
    std::fs::write(
        &reference,
        "workload,sc_policy,tune,seed,total_gpus,99,100\npods,06-FGD,1.3,42,2,90,95.0\n",
    )
    .unwrap();
    let r = reference.to_str().unwrap();
    let o = replay_on(
        &nodes,
        &pods,
        &["--sweep", "--seeds", "7-9", "--reference", r],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with(
            "3 seeds (7-9), inflate 1.3; REFERENCE is the published mean of seeds 42-51"
        ),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = replay_on(&nodes, &pods, &["--sweep", "--reference", r]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("10 seeds (42-51), inflate 1.3\n"),
        "{text}"
    );
    for (bad, says) in [
        ("9-7", "ends before it starts"),
        ("7", "is not FROM-TO"),
        ("7-x", "`x` in `7-x` is not a seed"),
        ("0-10000", "more than 10,000 seeds"),
    ] {
        let o = replay_on(&nodes, &pods, &["--sweep", "--seeds", bad]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
    }
    // Seeds are the sweep's: alone they are refused.
    let o = replay_on(&nodes, &pods, &["--seeds", "7-9"]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}
