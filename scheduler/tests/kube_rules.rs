//! The rules a scheduler in a shared Kubernetes cluster keeps, on pods written as
//! Kubernetes holds them (read through the manifests' own `Pod`): taints and
//! tolerations, node affinity, pod affinity and anti-affinity, topology spread, host
//! ports, init containers and overhead, PriorityClass; and a pod that can run nowhere
//! stops nobody behind it.

use std::collections::BTreeMap;

use maar_scheduler::manifest::Pod;
use maar_scheduler::rules::{Taint, TaintEffect};
use maar_scheduler::*;

/// A node of pool `train` with `gpus` A100s, 32 CPUs, 256Gi, in `zone`.
fn gpu_node(name: &str, zone: &str, gpus: u32) -> Node {
    let labels: BTreeMap<String, String> = [
        (LABEL_ROLE, "train"),
        (LABEL_MODEL, "a100"),
        ("topology.kubernetes.io/zone", zone),
        ("kubernetes.io/hostname", name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .chain(std::iter::once((LABEL_COUNT.to_string(), gpus.to_string())))
    .collect();
    let cards = (0..gpus)
        .map(|i| Gpu::new(i, format!("{name}/{i}"), "a100", 80 << 30, false))
        .collect();
    Node::new(name, labels, 32_000, 256 << 30, 1 << 40, cards)
}

fn cluster_of(nodes: Vec<Node>) -> Cluster {
    let mut c = Cluster::new(SchedConfig::default());
    c.add_pool(Pool {
        name: "train".into(),
        kind: PoolKind::Training,
        selector: [(LABEL_ROLE.to_string(), "train".to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    });
    for n in nodes {
        c.add_node(n);
    }
    c.add_project(Project {
        name: "ml".into(),
        department: "d".into(),
        quotas: [(0, Quota::default())].into(),
    });
    c
}

/// A pod of namespace `ml` asking `gpus` GPUs and 1 CPU, with `spec` merged into its
/// spec and `labels` as its labels.
fn pod(name: &str, gpus: u32, labels: serde_json::Value, spec: serde_json::Value) -> JobSpec {
    let mut s = serde_json::json!({
        "containers": [{
            "name": "main",
            "image": "img",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus}},
        }],
    });
    for (k, v) in spec.as_object().cloned().unwrap_or_default() {
        s[k] = v;
    }
    let p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": labels,
            "annotations": {"crater.ai/pool": "train"},
        },
        "spec": s,
    }))
    .expect("a pod");
    p.to_job_spec().expect("a job")
}

fn plain(name: &str, gpus: u32) -> JobSpec {
    pod(name, gpus, serde_json::json!({}), serde_json::json!({}))
}

fn job<'a>(c: &'a Cluster, name: &str) -> &'a Job {
    &c.jobs[c.job_id(&format!("ml/{name}")).unwrap() as usize]
}

fn node_of(c: &Cluster, name: &str) -> String {
    let j = job(c, name);
    assert_eq!(j.phase, Phase::Running, "{name}: {}", j.reason);
    c.nodes[j.placements[0].node as usize].name.clone()
}

#[test]
fn a_pod_that_fits_nowhere_at_the_head_of_a_busy_queue_stops_nobody() {
    let mut c = cluster_of(vec![gpu_node("a", "z1", 4), gpu_node("b", "z1", 4)]);
    // Submitted first (ahead in the queue): a selector no node matches, a node
    // affinity no node matches, a taint's toleration missing does not matter here.
    c.submit(pod(
        "typo",
        1,
        serde_json::json!({}),
        serde_json::json!({"nodeSelector": {"disk": "sdd"}}),
    ))
    .unwrap();
    c.submit(pod(
        "nowhere",
        1,
        serde_json::json!({}),
        serde_json::json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z9"]}]}]
        }}}}),
    ))
    .unwrap();
    c.set_time(1);
    for i in 0..10 {
        c.submit(plain(&format!("w{i}"), 1)).unwrap();
    }
    c.schedule();
    let running = (0..10)
        .filter(|i| job(&c, &format!("w{i}")).phase == Phase::Running)
        .count();
    assert_eq!(running, 8, "every free card is used by the pods behind");
    let typo = job(&c, "typo");
    assert_eq!(typo.phase, Phase::Pending);
    assert!(
        typo.reason.contains("node selector disk=sdd unmatched"),
        "{}",
        typo.reason
    );
    assert!(
        job(&c, "nowhere")
            .reason
            .contains("node affinity unmatched"),
        "{}",
        job(&c, "nowhere").reason
    );
    // The two that wait are told their own reason, not the first pod's.
    for i in 8..10 {
        let w = job(&c, &format!("w{i}"));
        assert_eq!(w.phase, Phase::Pending);
        assert!(!w.reason.contains("selector"), "{}", w.reason);
        assert!(w.reason.contains("insufficient free GPUs"), "{}", w.reason);
    }
}

#[test]
fn taints_keep_pods_off_unless_tolerated_and_explain_offers_the_toleration() {
    let mut a = gpu_node("a", "z1", 4);
    a.taints.push(Taint {
        key: "dedicated".into(),
        value: "team-a".into(),
        effect: TaintEffect::NoSchedule,
    });
    let mut b = gpu_node("b", "z1", 2);
    b.taints.push(Taint {
        key: "node.kubernetes.io/not-ready".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    let mut c = cluster_of(vec![a, b]);
    c.submit(plain("plain", 1)).unwrap();
    c.schedule();
    let j = job(&c, "plain");
    assert_eq!(j.phase, Phase::Pending);
    assert!(
        j.reason
            .contains("1 untolerated taint dedicated=team-a:NoSchedule")
            && j.reason
                .contains("1 untolerated taint node.kubernetes.io/not-ready:NoSchedule"),
        "{}",
        j.reason
    );
    let ex = c.explain(j.id);
    assert!(
        ex.suggestions.iter().any(|s| s
            .starts_with("a toleration for dedicated=team-a:NoSchedule")
            && s.contains("would start it now")),
        "{:?}",
        ex.suggestions
    );
    // Waiting never helps, and it is not offered.
    assert!(
        !ex.suggestions.iter().any(|s| s.starts_with("wait")),
        "{:?}",
        ex.suggestions
    );
    c.submit(pod(
        "tolerant",
        1,
        serde_json::json!({}),
        serde_json::json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}]}),
    ))
    .unwrap();
    c.submit(pod(
        "tolerates-all",
        1,
        serde_json::json!({}),
        serde_json::json!({"tolerations": [{"operator": "Exists"}]}),
    ))
    .unwrap();
    c.schedule();
    assert_eq!(node_of(&c, "tolerant"), "a");
    node_of(&c, "tolerates-all");
    // A cordon in maar is absolute: no new work, whatever the pod tolerates.
    let mut c = cluster_of(vec![gpu_node("a", "z1", 4)]);
    c.apply(Command::CordonNode { node: "a".into() }).unwrap();
    c.submit(pod(
        "ds",
        1,
        serde_json::json!({}),
        serde_json::json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}),
    ))
    .unwrap();
    c.schedule();
    let ds = job(&c, "ds");
    assert_eq!(ds.phase, Phase::Pending);
    assert!(ds.reason.contains("1 cordoned"), "{}", ds.reason);
}

#[test]
fn node_affinity_required_and_preferred() {
    let mut c = cluster_of(vec![
        gpu_node("a", "z1", 4),
        gpu_node("b", "z2", 4),
        gpu_node("c", "z3", 4),
    ]);
    c.submit(pod(
        "in-z2-or-z3",
        1,
        serde_json::json!({}),
        serde_json::json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["z1"]}]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z2"]}]}},
                {"weight": 50, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z3"]}]}}
            ]
        }}}),
    ))
    .unwrap();
    c.submit(pod(
        "by-name",
        1,
        serde_json::json!({}),
        serde_json::json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
            ]}
        }}}),
    ))
    .unwrap();
    c.schedule();
    assert_eq!(
        node_of(&c, "in-z2-or-z3"),
        "c",
        "the heaviest preference wins"
    );
    assert_eq!(node_of(&c, "by-name"), "b");
}

#[test]
fn pod_affinity_anti_affinity_and_the_placed_pods_anti_affinity() {
    let mut c = cluster_of(vec![gpu_node("a", "z1", 8), gpu_node("b", "z1", 8)]);
    let anti = serde_json::json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}});
    for i in 0..3 {
        c.submit(pod(
            &format!("web{i}"),
            1,
            serde_json::json!({"app": "web"}),
            anti.clone(),
        ))
        .unwrap();
    }
    c.schedule();
    let (w0, w1) = (node_of(&c, "web0"), node_of(&c, "web1"));
    assert_ne!(w0, w1, "one web pod per node");
    let w2 = job(&c, "web2");
    assert_eq!(w2.phase, Phase::Pending);
    assert!(w2.reason.contains("pod anti-affinity"), "{}", w2.reason);
    // A pod with the label but no rule of its own is kept off by the placed pods'.
    c.submit(pod(
        "web-plain",
        1,
        serde_json::json!({"app": "web"}),
        serde_json::json!({}),
    ))
    .unwrap();
    // A pod that wants to be with web0's node's cache.
    c.submit(pod(
        "cache",
        1,
        serde_json::json!({"app": "cache"}),
        serde_json::json!({}),
    ))
    .unwrap();
    c.schedule();
    let wp = job(&c, "web-plain");
    assert_eq!(wp.phase, Phase::Pending);
    assert!(wp.reason.contains("'s pod anti-affinity"), "{}", wp.reason);
    let cache_node = node_of(&c, "cache");
    c.submit(pod(
        "near-cache",
        1,
        serde_json::json!({}),
        serde_json::json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
        ]}}}),
    ))
    .unwrap();
    c.submit(pod(
        "near-nothing",
        1,
        serde_json::json!({}),
        serde_json::json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
        ]}}}),
    ))
    .unwrap();
    // The first of a series that go together may start anywhere.
    c.submit(pod(
        "first-of-many",
        1,
        serde_json::json!({"app": "ring"}),
        serde_json::json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "ring"}}, "topologyKey": "kubernetes.io/hostname"}
        ]}}}),
    ))
    .unwrap();
    c.schedule();
    assert_eq!(node_of(&c, "near-cache"), cache_node);
    let nn = job(&c, "near-nothing");
    assert_eq!(nn.phase, Phase::Pending);
    assert!(
        nn.reason
            .contains("pod affinity unmet (app=db per kubernetes.io/hostname)"),
        "{}",
        nn.reason
    );
    // Waiting for jobs to end never brings an app=db pod: not offered.
    let ex = c.explain(nn.id);
    assert!(
        !ex.suggestions.iter().any(|s| s.starts_with("wait")),
        "{:?}",
        ex.suggestions
    );
    node_of(&c, "first-of-many");
}

#[test]
fn topology_spread_do_not_schedule_keeps_the_skew() {
    let mut c = cluster_of(vec![
        gpu_node("a", "z1", 8),
        gpu_node("b", "z1", 8),
        gpu_node("c", "z2", 8),
    ]);
    let spread = serde_json::json!({"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "s"}}},
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "s"}}}
    ]});
    for i in 0..4 {
        c.submit(pod(
            &format!("s{i}"),
            1,
            serde_json::json!({"app": "s"}),
            spread.clone(),
        ))
        .unwrap();
        c.schedule();
    }
    let mut per_zone = BTreeMap::new();
    for i in 0..4 {
        let n = node_of(&c, &format!("s{i}"));
        let zone = if n == "c" { "z2" } else { "z1" };
        *per_zone.entry(zone).or_insert(0) += 1;
    }
    assert_eq!(per_zone, BTreeMap::from([("z1", 2), ("z2", 2)]));
    // z2 is full of other work: a fifth may go to z1 (skew 1), a sixth may not.
    c.submit(pod(
        "fill",
        6,
        serde_json::json!({}),
        serde_json::json!({"nodeSelector": {"kubernetes.io/hostname": "c"}}),
    ))
    .unwrap();
    c.schedule();
    c.submit(pod(
        "s4",
        1,
        serde_json::json!({"app": "s"}),
        spread.clone(),
    ))
    .unwrap();
    c.schedule();
    assert_ne!(node_of(&c, "s4"), "c");
    c.submit(pod(
        "s5",
        1,
        serde_json::json!({"app": "s"}),
        spread.clone(),
    ))
    .unwrap();
    c.schedule();
    let s5 = job(&c, "s5");
    assert_eq!(s5.phase, Phase::Pending);
    assert!(
        s5.reason
            .contains("topology spread over topology.kubernetes.io/zone (maxSkew 1)"),
        "{}",
        s5.reason
    );
}

#[test]
fn host_ports_init_containers_overhead_and_priority_class() {
    let mut c = cluster_of(vec![gpu_node("a", "z1", 8)]);
    let port = serde_json::json!({"containers": [{"name": "m", "image": "i",
        "ports": [{"containerPort": 80, "hostPort": 8080}],
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 1}}}]});
    c.submit(pod("p1", 1, serde_json::json!({}), port.clone()))
        .unwrap();
    c.submit(pod("p2", 1, serde_json::json!({}), port)).unwrap();
    c.schedule();
    node_of(&c, "p1");
    let p2 = job(&c, "p2");
    assert_eq!(p2.phase, Phase::Pending);
    assert!(
        p2.reason.contains("host port 8080/TCP in use"),
        "{}",
        p2.reason
    );

    // Requests: max(sum of containers, largest init container) + overhead.
    let s = pod(
        "init",
        0,
        serde_json::json!({}),
        serde_json::json!({
            "initContainers": [{"name": "warm", "image": "i", "resources": {"requests": {"cpu": "40", "memory": "2Gi"}}}],
            "overhead": {"cpu": "250m", "memory": "120Mi"}
        }),
    );
    assert_eq!(s.cpu_milli, 40_250);
    assert_eq!(s.memory, (2 << 30) + (120 << 20));
    c.submit(s).unwrap();
    c.schedule();
    let init = job(&c, "init");
    assert_eq!(
        init.phase,
        Phase::Pending,
        "40 CPUs of init on a 32-CPU node"
    );
    // More CPU than the node has at all: never, with the node's size named.
    assert!(
        init.reason
            .starts_with("can never run as asked: no node of pool train could hold 40.25 CPU"),
        "{}",
        init.reason
    );
    assert!(init.reason.contains("32 CPU"), "{}", init.reason);

    // PriorityClass: the priority the API server set from it.
    let hi = pod(
        "hi",
        1,
        serde_json::json!({}),
        serde_json::json!({"priorityClassName": "team-critical", "priority": 1000}),
    );
    assert_eq!(hi.priority, 1000);
    let huge = pod(
        "huge",
        1,
        serde_json::json!({}),
        serde_json::json!({"priorityClassName": "system-node-critical", "priority": 2_000_001_000}),
    );
    assert_eq!(huge.priority, maar_scheduler::limits::MAX_PRIORITY);
    // Every class a cluster's users can make keeps its value, so its order: the
    // Kubernetes docs' `high-priority` (1,000,000), one above it and the highest a user
    // may define (were all 999,999: none preempted another).
    let class = |name: &str, value: i64| {
        pod(
            name,
            1,
            serde_json::json!({}),
            serde_json::json!({"priorityClassName": name, "priority": value}),
        )
        .priority
    };
    assert_eq!(class("high-priority", 1_000_000), 1_000_000);
    assert_eq!(class("team-critical", 2_000_000), 2_000_000);
    assert_eq!(class("top-user", 1_000_000_000), 1_000_000_000);
    assert_eq!(class("just-under", 999_999_999), 999_999_999);
    assert_eq!(class("below", -5_000_000), -5_000_000);
    // The system classes, above any user's, are the top, as other schedulers' pods.
    assert_eq!(
        class("system-cluster-critical", 2_000_000_000),
        huge.priority
    );
    assert_eq!(plain("none", 1).priority, PRIORITY_MEDIUM);
}

#[test]
fn gpu_counts_are_checked_with_honest_messages() {
    let read = |q: serde_json::Value| {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x", "namespace": "ml"},
            "spec": {"containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": q}}}]},
        }))
        .unwrap();
        p.to_job_spec()
            .map(|s| s.gpu.count)
            .map_err(|e| e.to_string())
    };
    let e = read(serde_json::json!(1_000_000)).unwrap_err();
    assert!(e.contains("1000000 GPUs is above the limit of 64"), "{e}");
    let e = read(serde_json::json!("1M")).unwrap_err();
    assert!(e.contains("above the limit"), "{e}");
    let e = read(serde_json::json!("1.5")).unwrap_err();
    assert!(e.contains("not a whole number"), "{e}");
    assert_eq!(read(serde_json::json!("2")), Ok(2));
}

#[test]
fn pods_that_may_go_anywhere_leave_room_for_those_a_node_affinity_binds() {
    let mut c = cluster_of(vec![
        gpu_node("a", "z1", 2),
        gpu_node("b", "z1", 2),
        gpu_node("c", "z2", 2),
        gpu_node("d", "z2", 2),
        gpu_node("e", "z2", 2),
    ]);
    let z1 = serde_json::json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]}]
    }}}});
    // The plain pods are ahead in the queue; the four that need z1 come after them.
    for i in 0..6 {
        c.submit(plain(&format!("plain{i}"), 1)).unwrap();
    }
    c.set_time(1);
    for i in 0..4 {
        c.submit(pod(
            &format!("z1-{i}"),
            1,
            serde_json::json!({}),
            z1.clone(),
        ))
        .unwrap();
    }
    c.schedule();
    for i in 0..6 {
        let n = node_of(&c, &format!("plain{i}"));
        assert!(["c", "d", "e"].contains(&n.as_str()), "plain{i} on {n}");
    }
    for i in 0..4 {
        let n = node_of(&c, &format!("z1-{i}"));
        assert!(["a", "b"].contains(&n.as_str()), "z1-{i} on {n}");
    }
    // With z2 full, a plain pod still takes z1's room rather than wait.
    let mut c = cluster_of(vec![
        gpu_node("a", "z1", 2),
        gpu_node("c", "z2", 1),
        gpu_node("d", "z2", 1),
    ]);
    c.submit(plain("p0", 1)).unwrap();
    c.submit(plain("p1", 1)).unwrap();
    c.submit(plain("p2", 1)).unwrap();
    c.set_time(1);
    c.submit(pod("z1-0", 1, serde_json::json!({}), z1)).unwrap();
    c.schedule();
    for p in ["p0", "p1", "p2", "z1-0"] {
        node_of(&c, p);
    }
}

#[test]
fn preemption_takes_the_victims_pods_as_gone_for_the_pod_level_rules() {
    // One node with room to spare: only the rules between pods keep the
    // high-priority pods off it. kube-scheduler's preemption removes the
    // lower-priority pods from the node before it runs the filters again, so a pod
    // is preempted when its going lifts the rule; maar does the same.
    let mut c = cluster_of(vec![gpu_node("a", "z1", 8)]);
    let anti = |app: &str| {
        serde_json::json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
        ]}}})
    };
    let prio = |mut v: serde_json::Value, p: i32| {
        v["priority"] = serde_json::json!(p);
        v["priorityClassName"] = serde_json::json!("p");
        v
    };
    // A low pod labelled app=web; a low pod whose anti-affinity repels app=db.
    c.submit(pod(
        "web-low",
        1,
        serde_json::json!({"app": "web"}),
        prio(serde_json::json!({}), 10),
    ))
    .unwrap();
    c.submit(pod(
        "no-db-low",
        1,
        serde_json::json!({"app": "other"}),
        prio(anti("db"), 10),
    ))
    .unwrap();
    // A pod of the same priority that must not be touched.
    c.submit(pod(
        "peer",
        1,
        serde_json::json!({"app": "web"}),
        prio(serde_json::json!({}), 1000),
    ))
    .unwrap();
    c.schedule();
    node_of(&c, "web-low");
    node_of(&c, "no-db-low");
    node_of(&c, "peer");

    // High: its own anti-affinity selects app=web (web-low and peer are there).
    // peer is not lower: no preemption can lift the rule, so nothing is evicted.
    c.set_time(10);
    c.submit(pod(
        "hi-no-web",
        1,
        serde_json::json!({"app": "api"}),
        prio(anti("web"), 1000),
    ))
    .unwrap();
    c.schedule();
    let h = job(&c, "hi-no-web");
    assert_eq!(h.phase, Phase::Pending);
    assert_eq!(
        job(&c, "web-low").phase,
        Phase::Running,
        "no eviction that helps nobody"
    );
    assert!(h.reason.contains("pod anti-affinity"), "{}", h.reason);

    // High with the db label: no-db-low's anti-affinity repels it; no-db-low is lower,
    // so it is preempted and the pod starts on the node.
    c.set_time(20);
    c.submit(pod(
        "hi-db",
        1,
        serde_json::json!({"app": "db"}),
        prio(serde_json::json!({}), 1000),
    ))
    .unwrap();
    c.schedule();
    assert_eq!(node_of(&c, "hi-db"), "a");
    assert_ne!(job(&c, "no-db-low").phase, Phase::Running, "preempted");
    assert_eq!(
        job(&c, "web-low").phase,
        Phase::Running,
        "not needed, not evicted"
    );

    // Cancel peer: now only web-low (lower) holds the app=web pod that hi-no-web
    // repels; it is preempted, and hi-no-web starts.
    c.apply(Command::Cancel {
        job: "ml/peer".into(),
        why: None,
    })
    .unwrap();
    c.set_time(30);
    c.schedule();
    assert_eq!(node_of(&c, "hi-no-web"), "a");
    assert_ne!(job(&c, "web-low").phase, Phase::Running, "preempted");
}

#[test]
fn preemption_takes_the_victims_pods_as_gone_for_topology_spread() {
    // Zone z1 holds 2 low pods app=s, zone z2 none and is full of other high work; a
    // high app=s pod with maxSkew 1 over zones cannot go to z1 (2 + 1 > 0 + 1) and z2
    // has no room. kube-scheduler evicts the fewest pods that make the filters pass
    // on the node: one low app=s pod gone still gives 1 + 1 > 0 + 1; both give
    // 0 + 1 <= 0 + 1. A low pod without the label changes nothing and stays.
    let mut c = cluster_of(vec![gpu_node("a", "z1", 4), gpu_node("b", "z2", 1)]);
    let spread = serde_json::json!({"priority": 1000, "priorityClassName": "p", "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "s"}}}
    ]});
    c.submit(pod(
        "fill-b",
        1,
        serde_json::json!({}),
        serde_json::json!({"priority": 1000, "priorityClassName": "p", "nodeSelector": {"kubernetes.io/hostname": "b"}}),
    ))
    .unwrap();
    for i in 0..2 {
        c.submit(pod(
            &format!("s-low{i}"),
            1,
            serde_json::json!({"app": "s"}),
            serde_json::json!({"priority": 10, "priorityClassName": "p", "nodeSelector": {"kubernetes.io/hostname": "a"}}),
        ))
        .unwrap();
    }
    c.submit(pod("other-low", 1, serde_json::json!({}), serde_json::json!({"priority": 10, "priorityClassName": "p", "nodeSelector": {"kubernetes.io/hostname": "a"}})))
        .unwrap();
    c.schedule();
    assert_eq!(node_of(&c, "fill-b"), "b");
    node_of(&c, "s-low0");
    node_of(&c, "s-low1");
    node_of(&c, "other-low");
    c.set_time(10);
    c.submit(pod("s-hi", 1, serde_json::json!({"app": "s"}), spread))
        .unwrap();
    c.schedule();
    assert_eq!(node_of(&c, "s-hi"), "a");
    let gone = ["s-low0", "s-low1"]
        .iter()
        .filter(|n| job(&c, n).phase != Phase::Running)
        .count();
    assert_eq!(gone, 2, "both app=s pods of z1 had to go for the skew");
    assert_eq!(
        job(&c, "other-low").phase,
        Phase::Running,
        "a pod that changes no rule stays"
    );
}

/// A pod that came before any pool existed (no node labelled with a role yet) starts
/// once one does, at the next cycle; and a job naming a pool applied after it goes
/// there. Neither waits for a restart of maar.
#[test]
fn a_pod_that_came_before_its_pool_gets_it_when_it_exists() {
    let mut c = Cluster::new(SchedConfig::default());
    c.add_project(Project {
        name: "ml".into(),
        department: "d".into(),
        quotas: BTreeMap::new(),
    });
    let mut unnamed = plain("early", 1);
    unnamed.pool = String::new();
    let early = c.submit(unnamed).unwrap();
    let mut named = plain("named", 1);
    named.pool = "infer".into();
    let later = c.submit(named).unwrap();
    c.schedule();
    assert_eq!(c.jobs[early as usize].phase, Phase::Pending);
    let why = &c.jobs[early as usize].reason;
    assert!(
        why.contains("no pool takes it yet (pools: none)") && why.contains(LABEL_ROLE),
        "{why}"
    );
    assert_eq!(c.jobs[later as usize].phase, Phase::Pending);
    let why = &c.jobs[later as usize].reason;
    assert!(why.contains("pool `infer` does not exist"), "{why}");
    // The first node labelled with a role: its pool, the project's open quota in it.
    let role_pool = |name: &str, kind| Pool {
        name: name.into(),
        kind,
        selector: [(LABEL_ROLE.to_string(), name.to_string())].into(),
        overcommit: Overcommit::default(),
        lend_to: vec![],
    };
    let train = c.add_pool(role_pool("train", PoolKind::Training));
    c.projects[0].quotas.insert(train, Quota::default());
    c.add_node(gpu_node("n1", "z1", 8));
    c.schedule();
    assert_eq!(c.jobs[early as usize].phase, Phase::Running);
    assert_eq!(c.jobs[early as usize].spec.pool, "train");
    assert_eq!(
        c.jobs[later as usize].phase,
        Phase::Pending,
        "its pool is not here yet"
    );
    // The pool it names, applied later.
    let infer = c.add_pool(role_pool("infer", PoolKind::Inference));
    c.projects[0].quotas.insert(infer, Quota::default());
    let mut n2 = gpu_node("n2", "z1", 8);
    let mut labels = n2.labels().clone();
    labels.insert(LABEL_ROLE.into(), "infer".into());
    n2.set_labels(labels);
    c.add_node(n2);
    c.schedule();
    assert_eq!(c.jobs[later as usize].phase, Phase::Running);
    assert_eq!(c.jobs[later as usize].placements[0].node, 1);
}
