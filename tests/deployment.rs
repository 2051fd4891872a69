//! The users' own inference files: a Kubernetes Deployment with its
//! HorizontalPodAutoscaler in one file, submitted as is, becomes an inference service
//! with the HPA's bounds, metric target and scale-down window.

use std::process::Command as Proc;

const FALLBACK: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: llm-infer-vllm, namespace: ai-service}
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:latest
          args: [--model, /models/llama]
          resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm-infer-hpa, namespace: ai-service}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm-infer-vllm}
  minReplicas: 2
  maxReplicas: 8
  metrics:
    - type: External
      external:
        metric: {name: crater_gpu_memory_usage_rate}
        target: {type: AverageValue, averageValue: \"70\"}
  behavior: {scaleDown: {stabilizationWindowSeconds: 300}}
";

fn example() -> (String, String) {
    let p = "../shared/examples/inference-vllm-k8s.yaml";
    match std::fs::read_to_string(p) {
        Ok(t) => (p.to_string(), t),
        Err(_) => ("inference-vllm-k8s.yaml".into(), FALLBACK.to_string()),
    }
}

#[test]
fn the_vllm_deployment_and_its_hpa_become_an_inference_service() {
    let (file, text) = example();
    let spec = maar::load::parse_manifest(&file, &text).unwrap();
    assert_eq!(
        (spec.name.as_str(), spec.project.as_str()),
        ("llm-infer-vllm", "ai-service")
    );
    assert_eq!(spec.gpu.count, 1);
    assert_eq!(spec.replicas, 2);
    let maar_scheduler::JobKind::Inference(a) = &spec.kind else {
        panic!("an inference service: {:?}", spec.kind)
    };
    assert_eq!((a.min, a.max, a.target_pct, a.window_s), (2, 8, 70, 300));
    assert!(spec.pool.is_empty(), "a Deployment names no pool");
    assert!(spec.command.iter().any(|a| a == "--model"));
}

#[test]
fn submitted_as_is_it_runs_in_the_projects_inference_pool() {
    let (file, _) = example();
    let path = if std::path::Path::new(&file).exists() {
        std::path::PathBuf::from(&file)
    } else {
        let p = std::env::temp_dir().join(format!("maar-dep-{}.yaml", std::process::id()));
        std::fs::write(&p, FALLBACK).unwrap();
        p
    };
    let home = std::env::temp_dir().join(format!("maar-dep-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let run = |args: &[&str]| {
        Proc::new(env!("CARGO_BIN_EXE_maar"))
            .args(args)
            .env("XDG_STATE_HOME", &home)
            .output()
            .unwrap()
    };
    let o = run(&[
        "submit",
        "-f",
        path.to_str().unwrap(),
        "--dry-run",
        "--scenario",
        "demo/lab.yaml",
        "--at",
        "10m",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("valid; would run now on"), "{out}");
    // A HPA for another Deployment, or on another metric, is refused with the field.
    let bad = FALLBACK.replace(
        "name: llm-infer-vllm}\n  minReplicas",
        "name: other}\n  minReplicas",
    );
    let e = maar::load::parse_manifest("x.yaml", &bad)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("scaleTargetRef") && e.contains("scales Deployment other"),
        "{e}"
    );
    let bad = FALLBACK.replace("crater_gpu_memory_usage_rate", "cpu_usage");
    let e = maar::load::parse_manifest("x.yaml", &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("crater_gpu_memory_usage_rate"), "{e}");
    // Requests of two vendors in one job are refused.
    let mixed = FALLBACK.replace("nvidia.com/gpu: 1}, limits", "amd.com/gpu: 1}, limits");
    let e = maar::load::parse_manifest("x.yaml", &mixed)
        .unwrap_err()
        .to_string();
    assert!(e.contains("GPUs of one vendor"), "{e}");
    // Other vendors by their resource names; an unknown GPU resource is refused.
    let amd = FALLBACK.replace("nvidia.com/gpu", "amd.com/gpu");
    let spec = maar::load::parse_manifest("x.yaml", &amd).unwrap();
    assert_eq!(
        (spec.gpu.count, spec.gpu.vendor.as_deref()),
        (1, Some("amd"))
    );
    let ascend = FALLBACK.replace("nvidia.com/gpu", "huawei.com/Ascend910");
    let spec = maar::load::parse_manifest("x.yaml", &ascend).unwrap();
    assert_eq!(spec.gpu.vendor.as_deref(), Some("ascend"));
    let bad = FALLBACK.replace("nvidia.com/gpu", "example.com/gpu");
    let e = maar::load::parse_manifest("x.yaml", &bad)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("example.com/gpu") && e.contains("not a GPU resource"),
        "{e}"
    );
    // A nodeSelector is kept (the pool key aside).
    let sel = FALLBACK.replace(
        "    spec:\n      containers:",
        "    spec:\n      nodeSelector: {disk: ssd, crater.ai/pool: inference-gpu}\n      containers:",
    );
    let spec = maar::load::parse_manifest("x.yaml", &sel).unwrap();
    assert_eq!(spec.pool, "inference-gpu");
    assert_eq!(
        spec.node_selector.get("disk").map(|s| s.as_str()),
        Some("ssd")
    );
    assert!(!spec.node_selector.contains_key("crater.ai/pool"));
}

#[test]
fn the_hpa_s_bounds_are_checked_as_a_deployment_s_replicas_are() {
    let (file, text) = example();
    for (from, to, field, want) in [
        (
            "maxReplicas: 8",
            "maxReplicas: 100000000",
            "spec.maxReplicas",
            "maxReplicas 100000000 is above the limit of 10000",
        ),
        (
            "nvidia.com/gpu: 1",
            "nvidia.com/gpu: 1e30",
            "nvidia.com/gpu",
            "1000000000000000000000000000000 GPUs is above the limit of 64",
        ),
        (
            "minReplicas: 2",
            "minReplicas: 0",
            "spec.minReplicas",
            "an HPA keeps at least one replica",
        ),
    ] {
        assert!(text.contains(from), "{file} has `{from}`");
        let e = maar::load::parse_manifest(&file, &text.replace(from, to))
            .unwrap_err()
            .to_string();
        assert!(e.contains(field) && e.contains(want), "{e}");
        assert!(!e.contains(&format!("{field}: {field}")), "said twice: {e}");
    }
}

#[test]
fn files_that_are_not_jobs_are_told_what_they_are() {
    let labels =
        std::fs::read_to_string("../shared/examples/node-labels.sh").unwrap_or_else(|_| {
            "#!/bin/sh\nkubectl label node gpu-01 crater.ai/gpu-model=a100 --overwrite\n".into()
        });
    let e = maar::load::parse_manifest("node-labels.sh", &labels)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a `kubectl label` script, not a job") && e.contains("maar label"),
        "{e}"
    );
    let list = "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: apps/v1, kind: Deployment, metadata: {name: x}}\n";
    let e = maar::load::parse_manifest("list.yaml", list)
        .unwrap_err()
        .to_string();
    assert!(e.contains("a Kubernetes List") && e.contains("---"), "{e}");
}

#[test]
fn on_kubernetes_the_vllm_file_is_refused_with_what_to_apply_instead() {
    let (file, text) = example();
    let mut spec = maar::load::parse_manifest(&file, &text).unwrap();
    spec.pool = "inference".into();
    spec.manifest = None;
    let mut core = maar_scheduler::Core::new(maar_scheduler::Cluster::new(
        maar_scheduler::SchedConfig::default(),
    ));
    let mut d = maar_kube::KubeDriver::detached();
    let out = maar_scheduler::Driver::command(
        &mut d,
        &mut core,
        maar_scheduler::Actor::system("op"),
        maar_scheduler::Command::Submit(Box::new(spec)),
    );
    let why = out.result.unwrap_err().to_string();
    // Applied as written, kube-scheduler would place its pods: maar says so.
    assert!(
        why.contains("schedulerName: maar") && why.contains("InferenceService"),
        "{why}"
    );
}
