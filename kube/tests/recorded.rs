//! The mapping on objects recorded from a real kube-apiserver (v1.26.2, docs/kube.md):
//! a GPU node as `kubectl` created and patched it, a pod waiting for maar, a pod maar
//! bound (nodeName and the GPU indices annotation), a pod maar marked unschedulable, a
//! pod whose container was OOMKilled (with the volumes, env, probes, init container and
//! tolerations users' pods carry, and its managedFields as the API server sends them;
//! no kubelet runs there, so its status was set with `kubectl patch --subresource=status`
//! as a kubelet reports an OOM kill); a node tainted with `kubectl taint` and a pod
//! carrying every rule maar keeps (tolerations, node affinity, anti-affinity, spread,
//! a host port, an init container, a PriorityClass the API server turned into
//! `spec.priority`).

use k8s_openapi::api::core::v1::{Node as KNode, Pod as KPod};
use maar_kube::map::{self, PodState};
use maar_kube::world::PodSeen;

fn read<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn a_recorded_gpu_node_becomes_a_node_with_its_cards_and_labels() {
    let k: KNode = read("node-gpu-node-1.json");
    let n = map::node_of(&k);
    assert_eq!(n.name, "gpu-node-1");
    assert_eq!(n.gpus.len(), 8);
    assert!(n.gpus.iter().all(|g| &*g.model == "a100"));
    assert_eq!(n.cpu_milli, 64_000);
    assert_eq!(n.memory, 512 << 30);
    assert!(n.ready());
    assert!(!n.cordoned);
    assert_eq!(
        n.labels().get("crater.ai/node-role").map(String::as_str),
        Some("training")
    );
    assert_eq!(n.gpu_model(), Some("a100"));
}

#[test]
fn recorded_pods_become_jobs_and_states() {
    let p: KPod = read("pod-pending.json");
    assert!(map::is_ours(&p));
    assert_eq!(map::pod_key(&p), "ml/train-gpu-2");
    assert_eq!(map::pod_node(&p), None);
    assert_eq!(map::pod_state(&p), PodState::Live);
    let spec = map::job_of(&p).unwrap();
    assert_eq!(
        (spec.project.as_str(), spec.name.as_str()),
        ("ml", "train-gpu-2")
    );
    assert_eq!(spec.gpu.count, 2);
    assert_eq!(spec.cpu_milli, 4_000);
    assert_eq!(spec.memory, 16 << 30);

    let bound: KPod = read("pod-bound-by-maar.json");
    let seen = PodSeen::of(&bound);
    assert_eq!(seen.node.as_deref(), Some("gpu-node-1"));
    assert_eq!(seen.gpus.len(), 1);
    assert_eq!(seen.state, PodState::Live);

    let refused: KPod = read("pod-unschedulable.json");
    let c = refused
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .expect("maar wrote PodScheduled");
    assert_eq!(c.status, "False");
    assert_eq!(c.reason.as_deref(), Some("Unschedulable"));
    assert!(c
        .message
        .as_deref()
        .unwrap()
        .starts_with("0/1 nodes are available"));
    assert_eq!(map::job_of(&refused).unwrap().gpu.count, 16);
}

#[test]
fn a_pod_read_slim_is_seen_as_the_whole_pod_is() {
    use maar_kube::world::{PodSeen, SlimPod};
    for f in [
        "pod-pending.json",
        "pod-bound-by-maar.json",
        "pod-unschedulable.json",
        "pod-oomkilled.json",
    ] {
        // As the API server sends it: with managedFields (the recordings had them cut).
        let mut v: serde_json::Value = read(f);
        v["metadata"]["managedFields"] = serde_json::json!([{
            "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}}}}},
        }]);
        let whole: KPod = serde_json::from_value(v.clone()).unwrap();
        assert!(whole.metadata.managed_fields.is_some());
        // From the text, as the watch reads it.
        let slim: SlimPod = serde_json::from_str(&v.to_string()).unwrap();
        assert_eq!(
            format!("{:?}", PodSeen::of(&whole)),
            format!(
                "{:?}",
                PodSeen::of_slim(slim.clone(), &mut Default::default(), None)
            ),
            "{f}"
        );
        let slim = slim.into_pod();
        assert!(slim.metadata.managed_fields.is_none(), "{f}");
        assert_eq!(
            slim.metadata.resource_version,
            whole.metadata.resource_version
        );
    }
}

#[test]
fn a_watched_pod_is_read_whole_once_then_only_its_scheduler_and_node() {
    use maar_kube::world::SlimPod;
    let mut read = std::collections::HashSet::new();
    let v: serde_json::Value = self::read("pod-pending.json");
    let slim = |v: &serde_json::Value| -> SlimPod { serde_json::from_str(&v.to_string()).unwrap() };
    let first = PodSeen::of_slim(slim(&v), &mut read, None);
    assert!(first.ours && first.node.is_none());
    assert_eq!(first.spec.unwrap().unwrap().gpu.count, 2);
    // Bound: its node is seen; its job is not read again.
    let mut bound = v.clone();
    bound["spec"]["nodeName"] = "gpu-node-1".into();
    let later = PodSeen::of_slim(slim(&bound), &mut read, None);
    assert_eq!(later.node.as_deref(), Some("gpu-node-1"));
    assert!(later.ours && later.spec.is_none());
    // A spec that is not a job (no containers) still tells its scheduler and node,
    // and why it is no job, as its text read on its own does.
    let mut broken = bound.clone();
    broken["metadata"]["uid"] = "another".into();
    broken["spec"].as_object_mut().unwrap().remove("containers");
    let seen = PodSeen::of_slim(slim(&broken), &mut read, None);
    assert!(seen.ours);
    assert_eq!(seen.node.as_deref(), Some("gpu-node-1"));
    let why = seen.spec.unwrap().unwrap_err();
    assert_eq!(why.field, "spec");
    assert!(
        why.message.contains("missing field `containers`"),
        "{}",
        why.message
    );
    let meta = serde_json::from_value(broken["metadata"].clone()).unwrap();
    let alone = map::job_of_text(&meta, Some(&broken["spec"].to_string())).unwrap_err();
    assert_eq!(alone.message, why.message);
}

#[test]
fn a_recorded_oomkilled_pod_is_failed_by_oom_with_its_whole_request() {
    use maar_kube::world::{PodSeen, SlimPod};
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/pod-oomkilled.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let whole: KPod = serde_json::from_str(&text).unwrap();
    let read: SlimPod = serde_json::from_str(&text).unwrap();
    // Its job, read from the spec's text once, is the whole pod's: tolerations
    // (TaintToleration) and requests alike.
    let job = read.job().unwrap();
    let whole_job = map::job_of(&whole).unwrap();
    assert_eq!(format!("{job:?}"), format!("{whole_job:?}"));
    assert!(!job.rules.tolerations.is_empty());
    let seen = PodSeen::of_slim(read.clone(), &mut Default::default(), None);
    let slim = read.into_pod();
    // What maar does not read on every change is not kept.
    let spec = slim.spec.as_ref().unwrap();
    assert!(whole.spec.as_ref().unwrap().volumes.is_some());
    assert!(spec.volumes.is_none() && spec.tolerations.is_none());
    assert!(spec.containers.is_empty());
    assert!(slim.metadata.managed_fields.is_none());
    for p in [&whole, &slim] {
        match map::pod_state(p) {
            PodState::Failed { oom: true, message } => {
                assert!(
                    message.starts_with("OOMKilled (exit code 137)"),
                    "{message}"
                );
                assert!(message.contains("memory limit 32Gi reached"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(map::pod_node(p), Some("gpu-node-1"));
        assert!(map::is_ours(p));
    }
    // Both containers' requests; the node selector's model.
    assert_eq!(job.gpu.count, 2);
    assert_eq!(job.cpu_milli, 8_500);
    assert_eq!(job.memory, (32u64 << 30) + (256 << 20));
    assert_eq!(format!("{:?}", PodSeen::of(&whole)), format!("{seen:?}"));
}

#[test]
fn a_recorded_tainted_node_and_a_pod_with_rules_are_read_as_kube_scheduler_reads_them() {
    use maar_kube::world::SlimPod;
    use maar_scheduler::rules::TaintEffect;
    let k: KNode = read("node-tainted.json");
    let n = map::node_of(&k);
    assert_eq!(n.taints.len(), 1, "{:?}", n.taints);
    assert_eq!(n.taints[0].text(), "dedicated=team-a:NoSchedule");
    assert_eq!(n.taints[0].effect, TaintEffect::NoSchedule);

    let whole: KPod = read("pod-with-rules.json");
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/pod-with-rules.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let slim: SlimPod = serde_json::from_str(&text).unwrap();
    for spec in [map::job_of(&whole).unwrap(), slim.job().unwrap()] {
        let r = &spec.rules;
        // PriorityClass team-critical (value 1000), set by the API server's admission.
        assert_eq!(spec.priority, 1000);
        // Requests: the init container's 4 CPU over the container's 2; memory 8Gi.
        assert_eq!(spec.cpu_milli, 4_000);
        assert_eq!(spec.memory, 8 << 30);
        assert_eq!(spec.gpu.count, 1);
        // The API server adds its own tolerations (not-ready, unreachable for 300 s).
        assert!(r.tolerations.len() >= 3, "{:?}", r.tolerations);
        assert!(r.tolerations.iter().any(|t| t.tolerates(&n.taints[0])));
        let terms = r.node_affinity.as_ref().expect("required node affinity");
        assert!(terms[0].matches("rules-node-1", n.labels()));
        assert_eq!(r.preferred.len(), 1);
        assert_eq!(r.preferred[0].weight, 10);
        assert_eq!(r.pod_anti_affinity.len(), 1);
        assert_eq!(
            r.pod_anti_affinity[0].topology_key,
            "kubernetes.io/hostname"
        );
        assert_eq!(r.spread.len(), 1);
        assert_eq!(r.spread[0].max_skew, 1);
        assert_eq!(r.host_ports.len(), 1);
        assert_eq!(r.host_ports[0].port, 8080);
        assert_eq!(r.labels.get("app").map(String::as_str), Some("web"));
        // The node takes it by every node-level rule.
        assert!(maar_scheduler::fit::node_rules(&n, &spec).is_ok());
    }
    // A pod without the toleration is kept off by the taint.
    let mut spec = map::job_of(&whole).unwrap();
    spec.rules.tolerations.clear();
    assert!(matches!(
        maar_scheduler::fit::node_rules(&n, &spec),
        Err(maar_scheduler::fit::NodeReason::Taint { .. })
    ));
}

/// A node read as the watch reads it (`SlimNode`: no managedFields, and of its status
/// only the allocatable resources and conditions) is the node maar sees from the whole
/// object: the recorded ones, and one carrying what a kubelet adds (images, addresses,
/// node info, daemon endpoints), which a slim read skips.
#[test]
fn a_node_read_slim_is_seen_as_the_whole_node_is() {
    use maar_kube::world::SlimNode;
    let mut kubelets: serde_json::Value = read("node-gpu-node-1.json");
    let status = kubelets["status"].as_object_mut().expect("a status");
    status.insert(
        "images".into(),
        serde_json::json!([{"names": ["nvcr.io/nvidia/pytorch:24.01"], "sizeBytes": 9_000_000_000u64}]),
    );
    status.insert(
        "addresses".into(),
        serde_json::json!([{"type": "InternalIP", "address": "10.0.0.7"}]),
    );
    status.insert(
        "nodeInfo".into(),
        serde_json::json!({"kubeletVersion": "v1.26.2", "machineID": "m", "systemUUID": "s",
            "bootID": "b", "kernelVersion": "6.1", "osImage": "Debian", "containerRuntimeVersion": "containerd://1.7",
            "kubeProxyVersion": "v1.26.2", "operatingSystem": "linux", "architecture": "amd64"}),
    );
    status.insert(
        "daemonEndpoints".into(),
        serde_json::json!({"kubeletEndpoint": {"Port": 10250}}),
    );
    let texts = [
        serde_json::to_string(&read::<serde_json::Value>("node-gpu-node-1.json")).unwrap(),
        serde_json::to_string(&read::<serde_json::Value>("node-tainted.json")).unwrap(),
        kubelets.to_string(),
    ];
    for text in texts {
        let whole: KNode = serde_json::from_str(&text).unwrap();
        let slim: SlimNode = serde_json::from_str(&text).unwrap();
        let slim = slim.into_node();
        assert!(slim.metadata.managed_fields.is_none());
        assert!(slim.status.as_ref().unwrap().images.is_none());
        assert_eq!(
            serde_json::to_value(map::node_of(&slim)).unwrap(),
            serde_json::to_value(map::node_of(&whole)).unwrap()
        );
        assert_eq!(map::node_ready(&slim), map::node_ready(&whole));
        assert_eq!(map::labels_of(&slim), map::labels_of(&whole));
        assert_eq!(slim.spec, whole.spec);
        assert_eq!(
            slim.status.as_ref().unwrap().allocatable,
            whole.status.as_ref().unwrap().allocatable
        );
    }
}
