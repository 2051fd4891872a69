//! Bounded inputs: every count, rate, quantity and duration is checked against its
//! documented limit when read (file:line and the limit, exit 2, at once), nonsense is
//! refused with a clear message, and no input makes maar spin or allocate without end.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("maar-limits-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn file(name: &str, body: &str) -> String {
    let p = dir().join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

/// Runs maar; it must answer within 10 s.
fn maar(args: &[&str]) -> Output {
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_maar"))
        .args(args)
        .env("XDG_STATE_HOME", dir().join("state"))
        .output()
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "{args:?} took {:?}",
        t.elapsed()
    );
    o
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit 2 with a message naming `file:line:` and containing `want`.
fn refused(args: &[&str], file: &str, line: u32, want: &str) {
    let o = maar(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(&format!("{file}:{line}:")), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
    assert!(err.len() < 600, "{args:?}: a long message: {err}");
}

const JOB: &str = "apiVersion: crater.ai/v1
kind: TrainJob
metadata: {name: probe, namespace: ml-prod}
spec:
  resources:
    pool: training-gpu
    gpu: {count: 2}
    cpu: {cores: 8}
    memory: {capacity: 64Gi}
";

const SCENARIO: &str = "name: limits
prices: {a100: 2.5}
pools:
  - {name: train, kind: training, selector: {crater.ai/node-role: train}}
nodes:
  - {name: a100, count: 2, role: train, cpu: 64, memory: 512Gi, disk: 2Ti,
     gpu: {model: a100, count: 8, memory: 80Gi}}
projects:
  - name: ml
    quotas:
      train: {max: {gpu: 16}}
workload:
  generators:
    - name: g
      project: ml
      pool: train
      rate_per_hour: 4
      runtime: {min: 10m, max: 1h}
      shapes:
        - {gpu: 1, cpu: 8, memory: 32Gi}
";

#[test]
fn the_job_manifests_counts_are_bounded() {
    for (from, to, line, want) in [
        (
            "count: 2",
            "count: 4294967295",
            7,
            "gpu.count 4294967295 is above the limit of 64",
        ),
        (
            "cores: 8",
            "cores: 4294967295",
            8,
            "above the limit of 1048576 cores",
        ),
        (
            "capacity: 64Gi",
            "capacity: 99999Pi",
            9,
            "above the limit of 1024Pi",
        ),
    ] {
        let f = file("job.yaml", &JOB.replace(from, to));
        refused(&["submit", "-f", &f, "--dry-run"], &f, line, want);
    }
    let f = file(
        "replicas.yaml",
        &JOB.replace("spec:\n", "spec:\n  replicas: 4294967295\n"),
    );
    refused(
        &["submit", "-f", &f, "--dry-run"],
        &f,
        5,
        "replicas 4294967295 is above the limit of 10000",
    );
    let f = file(
        "runtime.yaml",
        &JOB.replace("spec:\n", "spec:\n  estimatedRuntime: 1000000d\n"),
    );
    refused(
        &["submit", "-f", &f, "--dry-run"],
        &f,
        5,
        "above the limit of 366d00h",
    );
}

#[test]
fn the_scenarios_counts_rates_and_numbers_are_bounded() {
    for (from, to, line, want) in [
        (
            "count: 2,",
            "count: 4294967295,",
            6,
            "4294967295 is above the limit of 100000",
        ),
        (
            "count: 8,",
            "count: 4294967295,",
            7,
            "4294967295 is above the limit of 64",
        ),
        (
            "rate_per_hour: 4",
            "rate_per_hour: 1e12",
            17,
            "at most the limit of 100000",
        ),
        ("max: 1h", "max: 1000000d", 18, "above the limit of 366d00h"),
        ("gpu: 16", "gpu: .nan", 11, "NaN is not within 0..=1000000"),
        ("gpu: 16", "gpu: -1", 11, "-1 is not within 0..=1000000"),
        (
            "a100: 2.5",
            "a100: .nan",
            2,
            "NaN is not within 0..=1000000",
        ),
        ("a100: 2.5", "a100: -3", 2, "-3 is not within 0..=1000000"),
    ] {
        let f = file("scenario.yaml", &SCENARIO.replace(from, to));
        refused(&["sim", "--scenario", &f], &f, line, want);
    }
    // The horizon of a run.
    let o = maar(&["sim", "--until", "1000000d"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("above the limit of 366d00h"));
    let o = maar(&["explain", "x", "--at", "1000000d"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_job_for_a_project_or_pool_that_does_not_exist_is_refused() {
    let f = file(
        "unknown.yaml",
        &format!(
            "{SCENARIO}  jobs:\n    - at: 0s\n      manifest: {{apiVersion: crater.ai/v1, kind: TrainJob, metadata: {{name: x, namespace: nobody}}, spec: {{resources: {{pool: train}}}}}}\n"
        ),
    );
    refused(
        &["sim", "--scenario", &f],
        &f,
        23,
        "no project named `nobody` (projects: ml)",
    );
    let f = file(
        "nopool.yaml",
        &JOB.replace("pool: training-gpu", "pool: nowhere"),
    );
    let o = maar(&["submit", "-f", &f, "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("can never run here: pool `nowhere` does not exist"));
    let f = file(
        "noproj.yaml",
        &JOB.replace("namespace: ml-prod", "namespace: nobody"),
    );
    let o = maar(&["submit", "-f", &f, "--dry-run"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("namespace `nobody` is not a maar project"));
}

#[test]
fn trace_files_are_bounded_and_duplicate_nodes_named() {
    let nodes = file(
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,8,a100\nn2,1000,1024,8,a100\nn1,1000,1024,4,v100\n",
    );
    let pods = file(
        "pods.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,100,1,1000\n",
    );
    refused(
        &["replay", "--nodes", &nodes, "--pods", &pods],
        &nodes,
        4,
        "node `n1` is listed twice, on lines 2 and 4",
    );
    let nodes = file(
        "nodes2.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,4294967295,a100\n",
    );
    refused(
        &["replay", "--nodes", &nodes, "--pods", &pods],
        &nodes,
        2,
        "4294967295 is above the limit of 64",
    );
}

#[test]
fn a_trace_s_model_names_are_bounded_and_a_variant_s_size_checked_first() {
    let nodes = file(
        "nodes3.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,A100\n",
    );
    // A 1 MB model name in one row took 5 GB in the replay (a copy per pod drawn).
    let long = "A".repeat(1_000_000);
    let pods = file(
        "pods-long.csv",
        &format!("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,0,0,1,10,{long}\n"),
    );
    refused(
        &["replay", "--nodes", &nodes, "--pods", &pods],
        &pods,
        2,
        "gpu_spec: a GPU model of 1000000 characters",
    );
    let many = vec!["A100"; 65].join("|");
    let pods = file(
        "pods-many.csv",
        &format!("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,0,0,1,10,{many}\n"),
    );
    refused(
        &["replay", "--nodes", &nodes, "--pods", &pods],
        &pods,
        2,
        "65 GPU models; at most 64",
    );
    let bad = file(
        "nodes4.csv",
        &format!(
            "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,{}\n",
            "m".repeat(64)
        ),
    );
    let pods = file(
        "pods-one.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,100,1,1000\n",
    );
    refused(
        &[
            "trace-variant",
            "--pods",
            &pods,
            "--nodes",
            &bad,
            "--kind",
            "gpu-spec",
            "--percent",
            "10",
        ],
        &bad,
        2,
        "model: a GPU model of 64 characters",
    );
    // A `cpu` variant grows as 1 / (1 - percent): refused before it is made.
    let cpu_variant = |pods: &str, pct: &str| {
        maar(&[
            "trace-variant",
            "--pods",
            pods,
            "--nodes",
            &nodes,
            "--kind",
            "cpu",
            "--percent",
            pct,
        ])
    };
    let pods = file(
        "pods-few.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,100,1,1000\np2,1000,100,0,0\n",
    );
    // 3,000 GPU pods at 99.99999999999999%: more CPU-only pods than a usize holds (an
    // overflow that wrapped under the limit and then looped).
    let mut many = String::from("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n");
    for i in 0..3000 {
        many.push_str(&format!("g{i},1000,100,1,1000\n"));
    }
    let many = file("pods-3000.csv", &many);
    for (pods, pct, want) in [
        (
            &pods,
            "99.99999",
            "more than the limit of 2000000 pods a trace",
        ),
        (&pods, "100", "CPU-only pods cannot be all of a trace"),
        (
            &many,
            "99.99999999999999",
            "more than the limit of 2000000 pods a trace",
        ),
    ] {
        let o = cpu_variant(pods, pct);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{pct}: {err}");
        assert!(err.contains(want), "{pct}: {err}");
        assert!(o.stdout.is_empty());
    }
    let o = cpu_variant(&pods, "75");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // One GPU pod kept, three CPU-only pods: 75%, and the header.
    assert_eq!(text(&o.stdout).lines().count(), 5, "{}", text(&o.stdout));
}

#[test]
fn endless_or_huge_inputs_are_refused_at_the_size_limit() {
    for args in [
        vec!["sim", "--scenario", "/dev/zero"],
        vec!["submit", "-f", "/dev/zero", "--dry-run"],
        vec!["replay", "--nodes", "/dev/zero", "--pods", "/dev/zero"],
    ] {
        let o = maar(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            text(&o.stderr).contains("/dev/zero: larger than the limit of 64 MiB"),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    let o = maar(&["sim", "--scenario", "/tmp"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("it is a directory"));
}

#[test]
fn deeply_nested_yaml_is_refused_before_the_parser_sees_it() {
    // 30 MB of `- - - ...` (the parser alone took 24 GB on such a file) and a
    // block-nested mapping (9 GB): refused at the line where the limit is passed.
    let dashes = file("dashes.yaml", &format!("{}x\n", "- ".repeat(15_000_000)));
    refused(
        &["submit", "--dry-run", "-f", &dashes],
        &dashes,
        1,
        "nested more than 100 levels deep",
    );
    let mut stairs = String::new();
    for i in 0..3000 {
        stairs.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
    }
    let stairs = file("stairs.yaml", &stairs);
    refused(
        &["submit", "--dry-run", "-f", &stairs],
        &stairs,
        101,
        "nested more than 100 levels deep",
    );
    // A block scalar's text may be indented as deep as it likes.
    let script: String = (0..150)
        .map(|i| format!("        {}echo {i}\n", " ".repeat(i)))
        .collect();
    let ok = file(
        "script.yaml",
        &format!(
            "apiVersion: crater.ai/v1\nkind: TrainJob\nmetadata: {{name: deep-script, namespace: ml-prod}}\nspec:\n  command:\n    - sh\n    - -c\n    - |\n{script}  resources: {{pool: training-gpu, gpu: {{count: 1}}, cpu: {{cores: 1}}, memory: {{capacity: 1Gi}}}}\n"
        ),
    );
    let o = maar(&["submit", "--dry-run", "-f", &ok]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn a_replay_without_gpus_is_refused_and_unknown_models_are_warned_of() {
    let cpu_only = file(
        "nodes-cpu.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nc1,64000,262144,0,\n",
    );
    let pods = file(
        "pods-spec.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1000,100,1,1000,NOSUCHGPU\np2,1000,100,1,1000,\n",
    );
    let o = maar(&["replay", "--nodes", &cpu_only, "--pods", &pods]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("no node has a GPU"),
        "{}",
        text(&o.stderr)
    );
    let nodes = file(
        "nodes-a100.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,A100\n",
    );
    let o = maar(&["replay", "--nodes", &nodes, "--pods", &pods]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("warning: 1 pods of") && text(&o.stderr).contains("NOSUCHGPU"),
        "{}",
        text(&o.stderr)
    );
}
