//! The manifests under deploy/ as a component (issue #25): the kustomization names
//! every manifest but the optional API one, the scheduler's container asks for what
//! the real CLI accepts, two replicas on a Lease with probes on the metrics port, a
//! PodDisruptionBudget over them, non-root; and every query of the Grafana dashboards
//! names a metric that maar or its agent serves. (Checked against a real API server
//! with `kubectl apply -k deploy/ --dry-run=server` by hand: docs/kube.md.)

use std::collections::BTreeSet;
use std::path::Path;

use clap::Parser;
use serde_json::Value;

fn docs(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn one<'a>(all: &'a [Value], kind: &str, name: &str) -> &'a Value {
    all.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn the_kustomization_holds_every_manifest_with_the_namespace_and_image_as_knobs() {
    let k = &docs("kustomization.yaml")[0];
    assert_eq!(k["namespace"], "maar-system");
    let listed: BTreeSet<String> = k["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml" && n != "api.yaml")
        .collect();
    // The CRDs are applied once on their own: `kubectl delete -k deploy/` must not take
    // every team's TrainJobs and Quotas with them.
    assert!(!listed.contains("crds.yaml"));
    assert!(present.contains("crds.yaml"));
    let present: BTreeSet<String> = present.into_iter().filter(|n| n != "crds.yaml").collect();
    assert_eq!(listed, present);
    let images = k["images"].as_array().unwrap();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0]["name"], "maar");
    // Every container names that image, so the one knob sets them all.
    for f in &present {
        for d in docs(f) {
            let spec = &d["spec"]["template"]["spec"];
            for c in spec["containers"].as_array().into_iter().flatten() {
                assert_eq!(c["image"], "maar", "{f}: {}", c["name"]);
                // An image built and loaded on the nodes is used: a `latest` tag's
                // default, Always, would pull `docker.io/library/maar` and fail.
                assert_eq!(c["imagePullPolicy"], "IfNotPresent", "{f}: {}", c["name"]);
            }
        }
    }
}

/// A container's arguments as the real CLI parses them (`maar` before them).
fn parsed(container: &Value) -> maar::cli::Cli {
    let mut argv = vec!["maar".to_string()];
    argv.extend(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    maar::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"))
}

#[test]
fn the_scheduler_runs_two_replicas_with_probes_state_and_what_the_cli_accepts() {
    let all = docs("scheduler.yaml");
    let sts = one(&all, "StatefulSet", "maar-scheduler");
    assert_eq!(sts["spec"]["replicas"], 2);
    let pod = &sts["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let c = &spec["containers"][0];
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    // The arguments as the real CLI parses them.
    let Some(maar::cli::Cmd::Live(maar::backends::LiveCmd::Kube(k))) = parsed(c).command else {
        panic!("not `maar kube`: {}", c["args"]);
    };
    assert!(k.live.headless);
    let metrics = k.live.metrics.expect("--metrics");
    assert_eq!(metrics.ip().to_string(), "0.0.0.0");
    let state = k.state.expect("--state");
    // The state file lies on the volume claimed per replica.
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "state")
        .expect("state mounted");
    assert!(state.starts_with(mount["mountPath"].as_str().unwrap()));
    assert_eq!(
        sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
        "state"
    );
    // Probes on the port the metrics are served on.
    let port = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["containerPort"] == metrics.port())
        .expect("the metrics port declared");
    for (probe, path) in [
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("startupProbe", "/healthz"),
    ] {
        let g = &c[probe]["httpGet"];
        assert_eq!(g["path"], path, "{probe}");
        assert_eq!(g["port"], port["name"], "{probe}");
    }
    // The disruption budget and the Service select these pods.
    let pdb = one(&all, "PodDisruptionBudget", "maar-scheduler");
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], *labels);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    let svc = one(&all, "Service", "maar-scheduler");
    assert_eq!(svc["spec"]["selector"], *labels);
    assert_eq!(sts["spec"]["serviceName"], "maar-scheduler");
}

#[test]
fn the_agent_names_its_node_as_kubernetes_does() {
    let all = docs("agent.yaml");
    let ds = one(&all, "DaemonSet", "maar-agent");
    let c = &ds["spec"]["template"]["spec"]["containers"][0];
    let Some(maar::cli::Cmd::Agent(a)) = parsed(c).command else {
        panic!("not `maar agent`: {}", c["args"]);
    };
    // The pod's host name is the pod's: the node's name comes from the downward API,
    // expanded by the kubelet in the arguments.
    assert_eq!(a.node.as_deref(), Some("$(NODE_NAME)"));
    let env = c["env"].as_array().expect("env");
    let node = env
        .iter()
        .find(|e| e["name"] == "NODE_NAME")
        .expect("NODE_NAME");
    assert_eq!(node["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
}

/// The metric names a PromQL expression reads (labels, functions, keywords, numbers,
/// strings, ranges and groupings left out).
fn metric_names(expr: &str) -> Vec<String> {
    const WORDS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
    ];
    let mut s = String::new();
    let mut depth_brace = 0;
    let mut in_str = false;
    let mut in_range = false;
    for ch in expr.chars() {
        match ch {
            '"' if depth_brace > 0 || in_str => in_str = !in_str,
            '{' if !in_str => depth_brace += 1,
            '}' if !in_str => depth_brace -= 1,
            '[' => in_range = true,
            ']' => in_range = false,
            _ if depth_brace > 0 || in_str || in_range => {}
            _ => s.push(ch),
        }
        if depth_brace > 0 || in_range || matches!(ch, '{' | '}' | '[' | ']') {
            s.push(' ');
        }
    }
    // Groupings: `by (a, b)` and the like name labels: cut them out.
    for word in [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ] {
        while let Some(at) = find_word(&s, word) {
            let rest = &s[at + word.len()..];
            let open = rest.len() - rest.trim_start().len();
            if !rest.trim_start().starts_with('(') {
                s.replace_range(at..at + word.len(), " ");
                continue;
            }
            let close = rest[open..]
                .find(')')
                .map(|c| open + c + 1)
                .unwrap_or(rest.len());
            s.replace_range(at..at + word.len() + close, " ");
        }
    }
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_alphabetic() || b[i] == b'_' || b[i] == b':';
        let after_digit = i > 0 && (b[i - 1].is_ascii_digit() || b[i - 1] == b'.');
        if starts && !after_digit {
            let j = (i..b.len())
                .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b':'))
                .unwrap_or(b.len());
            let t = &s[i..j];
            let call = s[j..].trim_start().starts_with('(');
            if !call && !WORDS.contains(&t) {
                out.push(t.to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Where `word` stands alone in `s`.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let b = s.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    s.match_indices(word)
        .map(|(i, _)| i)
        .find(|&i| (i == 0 || !ident(b[i - 1])) && b.get(i + word.len()).is_none_or(|&c| !ident(c)))
}

#[test]
fn the_expression_reader_finds_metrics_and_nothing_else() {
    assert_eq!(
        metric_names(
            "histogram_quantile(0.99, sum by (le, what) (rate(maar_state_write_duration_seconds_bucket{what=\"x\"}[5m])))"
        ),
        vec!["maar_state_write_duration_seconds_bucket"]
    );
    assert_eq!(
        metric_names("maar_node_memory_used_bytes / maar_node_memory_total_bytes * 100"),
        vec![
            "maar_node_memory_used_bytes",
            "maar_node_memory_total_bytes"
        ]
    );
    assert_eq!(
        metric_names("DCGM_FI_DEV_XID_ERRORS > 0"),
        vec!["DCGM_FI_DEV_XID_ERRORS"]
    );
}

/// The names of the samples a Prometheus text holds (`_total`, `_bucket` and the like
/// included).
fn served(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

#[test]
fn every_dashboard_query_names_a_metric_maar_or_its_agent_serves() {
    // maar's own, from a demo run an hour in, with every family given a sample.
    let sc = maar::load::load_scenario(None).unwrap();
    let mut sim = maar_demo::Demo::new(sc, None).unwrap();
    sim.run_until(3 * 3600);
    let observe = maar::observe::Observe::new();
    let handle = maar::engine::start(
        maar::backend::from_demo(sim),
        None,
        maar::engine::EngineOptions {
            speed: 3600.0,
            observe: Some(observe.clone()),
            ..Default::default()
        },
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let v = handle.sync().unwrap();
    let job = &v.snapshot.jobs[0];
    handle
        .explain(&format!("{}/{}", job.project, job.name))
        .unwrap();
    handle
        .what_if(
            maar_scheduler::Actor::system("operator"),
            maar_scheduler::Command::CordonNode {
                node: v.snapshot.nodes[0].name.clone(),
            },
        )
        .unwrap();
    observe.write("events", std::time::Duration::from_millis(1));
    let mut names = served(&observe.encode());
    handle.shutdown();
    // The agent's, from a recorded 8xH100 node with a job on it.
    let samples: Vec<maar_agent::NodeSample> =
        serde_json::from_str(include_str!("../agent/tests/fixtures/nvml-8xh100.json")).unwrap();
    let jobs = [maar_agent::metrics::JobGpuUse {
        job: "ml/train".into(),
        gpu: 0,
        used_bytes: 1 << 30,
    }];
    names.extend(served(&maar_agent::metrics::render(&samples[0], &jobs)));

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/dashboards");
    let mut files = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let d: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        files += 1;
        assert!(d["uid"].is_string() && d["title"].is_string());
        let panels = d["panels"].as_array().unwrap();
        assert!(panels.len() >= 8, "{}", path.display());
        for p in panels {
            let targets = p["targets"].as_array().unwrap();
            assert!(!targets.is_empty(), "{}: {}", path.display(), p["title"]);
            for t in targets {
                let expr = t["expr"].as_str().unwrap();
                let used = metric_names(expr);
                assert!(!used.is_empty(), "{}: {expr}", path.display());
                for m in used {
                    assert!(
                        names.contains(&m),
                        "{}: panel {}: {m} is served by neither maar nor its agent",
                        path.display(),
                        p["title"]
                    );
                }
            }
        }
    }
    assert_eq!(files, 2);
}
