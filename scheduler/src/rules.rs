//! The placement rules a Kubernetes pod carries, as kube-scheduler's filter plugins
//! define them: TaintToleration (with NodeUnschedulable's toleration), NodeAffinity
//! (required terms; preferred terms as a score), NodePorts, InterPodAffinity
//! (required affinity and anti-affinity, the existing pods' anti-affinity too) and
//! PodTopologySpread (`DoNotSchedule`).
//!
//! The types read the Kubernetes objects' own shape (camelCase), so a pod's
//! `tolerations`, `affinity` and `topologySpreadConstraints` are taken as written.
//! Node-level rules (`fit::node_rules`) need only the node; pod-level ones
//! (`Cluster::pod_rules` in `cluster.rs`) look at the pods already placed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

/// A node taint's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn name(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node's taint (`spec.taints[]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: TaintEffect,
}

impl Taint {
    /// `key=value:Effect` (`key:Effect` without a value), as kubectl writes it.
    pub fn text(&self) -> String {
        if self.value.is_empty() {
            format!("{}:{}", self.key, self.effect.name())
        } else {
            format!("{}={}:{}", self.key, self.value, self.effect.name())
        }
    }
}

/// A pod's toleration (`spec.tolerations[]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Equal` (the default) or `Exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl Toleration {
    /// Whether this toleration tolerates `t` (the API's `ToleratesTaint`).
    pub fn tolerates(&self, t: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != t.effect) {
            return false;
        }
        let exists = self.operator.as_deref() == Some("Exists");
        let key = self.key.as_deref().unwrap_or("");
        if key.is_empty() {
            // An empty key with Exists tolerates every taint.
            return exists;
        }
        if key != t.key {
            return false;
        }
        exists || self.value.as_deref().unwrap_or("") == t.value
    }
}

/// The first taint of `taints` with an effect that keeps pods off (NoSchedule,
/// NoExecute) that no toleration tolerates.
pub fn untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().find(|t| keeps_off(t, tolerations))
}

/// Whether the taint keeps a pod with these tolerations off (its effect is NoSchedule
/// or NoExecute, and no toleration tolerates it).
pub fn keeps_off(t: &Taint, tolerations: &[Toleration]) -> bool {
    t.effect != TaintEffect::PreferNoSchedule && !tolerations.iter().any(|x| x.tolerates(t))
}

impl Taint {
    /// One the node lifecycle puts and takes away (`node.kubernetes.io/*`: a cordon,
    /// NotReady, unreachable, pressure; the cloud provider's `uninitialized`), not one
    /// the node's owners put.
    pub fn is_lifecycle(&self) -> bool {
        self.key.starts_with("node.kubernetes.io/")
            || self.key.starts_with("node.cloudprovider.kubernetes.io/")
    }
}

/// One requirement of a node selector term or a label selector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirement {
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist, Gt, Lt.
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether a value (`None`: the label is absent) meets it.
    pub fn matches(&self, v: Option<&str>) -> bool {
        match self.operator.as_str() {
            "In" => v.is_some_and(|v| self.values.iter().any(|x| x == v)),
            "NotIn" => v.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            "Exists" => v.is_some(),
            "DoesNotExist" => v.is_none(),
            "Gt" | "Lt" => {
                let (Some(v), Some(x)) = (
                    v.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|x| x.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == "Gt" {
                    v > x
                } else {
                    v < x
                }
            }
            _ => false,
        }
    }

    /// `key in (a,b)`, `key exists`, ... for messages.
    pub fn text(&self) -> String {
        match self.operator.as_str() {
            "Exists" => format!("{} exists", self.key),
            "DoesNotExist" => format!("no {}", self.key),
            "Gt" => format!("{} > {}", self.key, self.values.join(",")),
            "Lt" => format!("{} < {}", self.key, self.values.join(",")),
            op => format!(
                "{} {} ({})",
                self.key,
                op.to_lowercase().replace("notin", "not in"),
                self.values.join(",")
            ),
        }
    }
}

/// A node selector term: all of its expressions (on labels) and fields (the node's
/// `metadata.name`) hold. A term with none matches no node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_fields: Vec<Requirement>,
}

impl NodeSelectorTerm {
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        self.match_expressions
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
            && self
                .match_fields
                .iter()
                .all(|r| r.key == "metadata.name" && r.matches(Some(name)))
    }

    pub fn text(&self) -> String {
        self.match_expressions
            .iter()
            .chain(self.match_fields.iter())
            .map(Requirement::text)
            .collect::<Vec<_>>()
            .join(" and ")
    }
}

/// A preferred node affinity term and its weight (1-100).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PreferredTerm {
    pub weight: i32,
    pub preference: NodeSelectorTerm,
}

/// A label selector (`matchLabels` and `matchExpressions`, all must hold). An empty
/// selector matches every pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .match_expressions
                .iter()
                .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }

    pub fn text(&self) -> String {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.extend(self.match_expressions.iter().map(Requirement::text));
        if parts.is_empty() {
            "any pod".into()
        } else {
            parts.join(",")
        }
    }
}

/// Held jobs by their pods' labels (key -> value -> job ids), so that a selector
/// looks only at the pods that could match it instead of every placed pod. Derived
/// state: kept as jobs come and go, rebuilt when a checkpoint is restored.
#[derive(Clone, Debug, Default)]
pub struct LabelIndex(HashMap<String, HashMap<String, BTreeSet<u32>>>);

impl LabelIndex {
    pub fn add(&mut self, id: u32, labels: &BTreeMap<String, String>) {
        for (k, v) in labels {
            self.0
                .entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .insert(id);
        }
    }

    pub fn remove(&mut self, id: u32, labels: &BTreeMap<String, String>) {
        for (k, v) in labels {
            let Some(values) = self.0.get_mut(k) else {
                continue;
            };
            if let Some(ids) = values.get_mut(v) {
                ids.remove(&id);
                if ids.is_empty() {
                    values.remove(v);
                }
            }
            if values.is_empty() {
                self.0.remove(k);
            }
        }
    }

    /// The jobs a selector could match: every job it does match is among them (a
    /// superset: the caller still asks the selector). `None` when no requirement of
    /// the selector narrows the jobs (an empty selector; only NotIn or DoesNotExist).
    /// Added to `out`, unsorted, a job more than once where the selector names a value
    /// twice.
    pub fn candidates(&self, s: &LabelSelector, out: &mut Vec<u32>) -> Option<()> {
        // Each narrowing requirement as the value sets whose union it allows.
        let none = HashMap::new();
        let mut options: Vec<Vec<&BTreeSet<u32>>> = Vec::new();
        for (k, v) in &s.match_labels {
            options.push(self.0.get(k).and_then(|m| m.get(v)).into_iter().collect());
        }
        for r in &s.match_expressions {
            let values = self.0.get(&r.key).unwrap_or(&none);
            match r.operator.as_str() {
                "In" => options.push(r.values.iter().filter_map(|v| values.get(v)).collect()),
                // The label must be there, whatever its value.
                "Exists" | "Gt" | "Lt" => options.push(values.values().collect()),
                _ => {}
            }
        }
        let best = options
            .into_iter()
            .min_by_key(|sets| sets.iter().map(|s| s.len()).sum::<usize>());
        let sets = best?;
        out.extend(sets.into_iter().flatten().copied());
        Some(())
    }
}

/// A required pod (anti-)affinity term: pods matching `label_selector` in
/// `namespaces` (empty: the pod's own) within the topology domain `topology_key`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinityTerm {
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether a pod of namespace `ns` with `labels` is one the term means, for a term
    /// written in a pod of namespace `own_ns`. (No selector: no pod.)
    pub fn selects(&self, own_ns: &str, ns: &str, labels: &BTreeMap<String, String>) -> bool {
        let ns_ok = if self.namespaces.is_empty() {
            ns == own_ns
        } else {
            self.namespaces.iter().any(|n| n == ns)
        };
        ns_ok
            && self
                .label_selector
                .as_ref()
                .is_some_and(|s| s.matches(labels))
    }

    pub fn text(&self) -> String {
        format!(
            "{} per {}",
            self.label_selector
                .as_ref()
                .map(LabelSelector::text)
                .unwrap_or_else(|| "no pod".into()),
            self.topology_key
        )
    }
}

/// A topology spread constraint with `whenUnsatisfiable: DoNotSchedule` (those with
/// `ScheduleAnyway` are preferences and are not kept).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadConstraint {
    pub max_skew: u32,
    pub topology_key: String,
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
}

/// A host port a container asks for (NodePorts): one pod per node may hold it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostPort {
    pub port: u16,
    /// TCP (default), UDP or SCTP.
    pub protocol: String,
    /// The host IP it binds (empty or 0.0.0.0: all of them).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
}

impl HostPort {
    /// Whether two host ports clash on one node (the same port and protocol, and the
    /// same IP or either on all IPs).
    pub fn clashes(&self, o: &HostPort) -> bool {
        let any = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
        self.port == o.port
            && self.protocol == o.protocol
            && (any(&self.ip) || any(&o.ip) || self.ip == o.ip)
    }
}

/// What a pod asks of its node beyond resources. Empty for maar's own jobs unless
/// their manifests say so.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PodRules {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Required node affinity: the node matches one of the terms. `None`: no rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<Vec<NodeSelectorTerm>>,
    /// Preferred node affinity (a score: the weights of the terms a node matches).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<PreferredTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_ports: Vec<HostPort>,
    /// The pod's own labels (what other pods' affinity and spread select).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_affinity: Vec<PodAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<SpreadConstraint>,
    /// `preemptionPolicy: Never` (from its PriorityClass): it waits for room, ahead
    /// of lower priorities in the queue, and never evicts anyone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub never_preempts: bool,
    /// Resources it asks that maar does not count on nodes (extended resources,
    /// hugepages): a pod of maar's that asks any is not placed (the kubelet could
    /// refuse it wherever maar bound it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncounted: Vec<String>,
}

impl PodRules {
    pub fn is_empty(&self) -> bool {
        *self == PodRules::default()
    }

    /// Whether the pod-level rules (those that look at other pods) apply.
    pub fn looks_at_pods(&self) -> bool {
        !self.host_ports.is_empty()
            || !self.pod_affinity.is_empty()
            || !self.pod_anti_affinity.is_empty()
            || !self.spread.is_empty()
    }

    /// The preferred node affinity's score on a node: the weights of the terms it
    /// matches.
    pub fn preference(&self, name: &str, labels: &BTreeMap<String, String>) -> i64 {
        self.preferred
            .iter()
            .filter(|p| p.preference.matches(name, labels))
            .map(|p| p.weight as i64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(k: &str, v: &str, e: TaintEffect) -> Taint {
        Taint {
            key: k.into(),
            value: v.into(),
            effect: e,
        }
    }

    #[test]
    fn tolerations_as_the_api_defines_them() {
        let t = taint("dedicated", "team-a", TaintEffect::NoSchedule);
        let eq = Toleration {
            key: Some("dedicated".into()),
            value: Some("team-a".into()),
            ..Default::default()
        };
        assert!(eq.tolerates(&t));
        let other = Toleration {
            value: Some("team-b".into()),
            ..eq.clone()
        };
        assert!(!other.tolerates(&t));
        let exists = Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert!(exists.tolerates(&t));
        let wrong_effect = Toleration {
            effect: Some(TaintEffect::NoExecute),
            ..exists.clone()
        };
        assert!(!wrong_effect.tolerates(&t));
        let all = Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert!(all.tolerates(&t));
        // An empty key with Equal tolerates nothing.
        assert!(!Toleration::default().tolerates(&t));
        // PreferNoSchedule never keeps a pod off.
        let soft = [taint("x", "", TaintEffect::PreferNoSchedule)];
        assert!(untolerated(&soft, &[]).is_none());
        assert_eq!(
            untolerated(std::slice::from_ref(&t), &[]).map(Taint::text),
            Some("dedicated=team-a:NoSchedule".into())
        );
    }

    #[test]
    fn node_selector_terms_and_operators() {
        let labels: BTreeMap<String, String> = [("zone", "a"), ("gen", "5")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let req = |k: &str, op: &str, v: &[&str]| Requirement {
            key: k.into(),
            operator: op.into(),
            values: v.iter().map(|s| s.to_string()).collect(),
        };
        let term = |rs: Vec<Requirement>| NodeSelectorTerm {
            match_expressions: rs,
            match_fields: Vec::new(),
        };
        assert!(term(vec![req("zone", "In", &["a", "b"])]).matches("n", &labels));
        assert!(!term(vec![req("zone", "NotIn", &["a"])]).matches("n", &labels));
        assert!(term(vec![req("missing", "NotIn", &["a"])]).matches("n", &labels));
        assert!(term(vec![req("gen", "Gt", &["4"])]).matches("n", &labels));
        assert!(!term(vec![req("gen", "Lt", &["4"])]).matches("n", &labels));
        assert!(term(vec![req("missing", "DoesNotExist", &[])]).matches("n", &labels));
        assert!(!term(vec![]).matches("n", &labels));
        let by_name = NodeSelectorTerm {
            match_expressions: Vec::new(),
            match_fields: vec![req("metadata.name", "In", &["n"])],
        };
        assert!(by_name.matches("n", &labels));
        assert!(!by_name.matches("m", &labels));
    }
}
