//! The rules that look at the pods already placed, as kube-scheduler's filter plugins
//! define them: NodePorts (a host port held once per node), InterPodAffinity (the
//! job's required affinity and anti-affinity, and placed pods' anti-affinity against
//! it) and PodTopologySpread (`DoNotSchedule` constraints).
//!
//! A [`PodRulesView`] is what those rules need to know of the placed pods, counted
//! once for a job (per placement question), so that judging a node is a few look-ups.
//! Jobs without such rules, in a cluster where no placed job has anti-affinity, get
//! no view and pay nothing.

use std::collections::{BTreeMap, HashMap};

use crate::cluster::Cluster;
use crate::fit::NodeReason;
use crate::model::*;
use crate::rules::PodAffinityTerm;
use crate::topology::domain;

/// The placed pods as the pod-level rules of one job see them. Each rule remembers
/// which jobs make it bind, so that a question with some jobs taken as gone (the
/// victims of a preemption, as kube-scheduler's preemption removes them before it runs
/// the filters again) is answered without counting the pods afresh.
#[derive(Clone, Debug, Default)]
pub struct PodRulesView {
    /// Placed pods whose anti-affinity keeps this job off a domain: (topology key,
    /// value) -> (the term in words, the job holding the pod), one per such job;
    /// ordered, so that the rule named first is the same on every run.
    existing_anti: BTreeMap<(String, String), Vec<(String, JobId)>>,
    /// Per anti-affinity term of the job: the domains (values of its topology key)
    /// holding a pod it selects, and the jobs of those pods.
    own_anti: Vec<HashMap<String, Vec<JobId>>>,
    /// Per affinity term of the job: the domains holding a pod that matches all of
    /// its affinity terms, and the jobs of those pods.
    affinity: Vec<HashMap<String, Vec<JobId>>>,
    /// Every job with a pod that matches all of the job's affinity terms.
    affinity_pods: Vec<JobId>,
    /// The job matches its own affinity terms: the first of a series that go
    /// together may go anywhere with the keys, while no placed pod matches them.
    affinity_self: bool,
    /// Per spread constraint: pods it counts per domain (every domain of a node the
    /// job could go to by its selector and node affinity), the least of them, and
    /// whether the job counts itself.
    spread: Vec<(HashMap<String, u64>, u64, bool)>,
}

/// A node's domains for each of a job's anti-affinity terms and affinity terms.
#[derive(Default)]
struct Doms<'a> {
    anti: Vec<Option<&'a str>>,
    aff: Vec<Option<&'a str>>,
}

/// Fills `d` with the node's domains for the job's rules.
fn node_doms<'a>(node: &'a Node, spec: &JobSpec, d: &mut Doms<'a>) {
    let r = &spec.rules;
    d.anti.clear();
    d.anti.extend(
        r.pod_anti_affinity
            .iter()
            .map(|t| domain(node, &t.topology_key)),
    );
    d.aff.clear();
    d.aff
        .extend(r.pod_affinity.iter().map(|t| domain(node, &t.topology_key)));
}

fn push_once(v: &mut Vec<JobId>, id: JobId) {
    if !v.contains(&id) {
        v.push(id);
    }
}

/// Whether some job of `holders` stays (is not in `except`).
fn any_stays(holders: &[JobId], except: &[JobId]) -> bool {
    holders.iter().any(|h| !except.contains(h))
}

impl Cluster {
    /// What the job's pod-level rules need of the placed pods; `None` when no such
    /// rule applies to it.
    pub fn pod_rules_view(&self, spec: &JobSpec) -> Option<PodRulesView> {
        self.pod_rules_view_by(spec, true)
    }

    /// The view, counting either the jobs the label index finds for the rules'
    /// selectors (`by_label`) or every placed job.
    fn pod_rules_view_by(&self, spec: &JobSpec, by_label: bool) -> Option<PodRulesView> {
        let r = &spec.rules;
        let anti_placed = self
            .anti
            .iter()
            .any(|&id| self.jobs.get(id).is_some_and(|j| !j.placements.is_empty()));
        if !r.looks_at_pods() && !anti_placed {
            return None;
        }
        let ns = spec.project.as_str();
        let me = (&spec.project, &spec.name);
        let mut v = PodRulesView {
            own_anti: vec![HashMap::new(); r.pod_anti_affinity.len()],
            affinity: vec![HashMap::new(); r.pod_affinity.len()],
            ..Default::default()
        };
        // Placed pods' anti-affinity against this job.
        for &id in &self.anti {
            let Some(j) = self.jobs.get(id) else { continue };
            if j.placements.is_empty() {
                continue;
            }
            if (&j.spec.project, &j.spec.name) == me {
                continue;
            }
            for t in &j.spec.rules.pod_anti_affinity {
                if !t.selects(&j.spec.project, ns, &r.labels) {
                    continue;
                }
                for p in &j.placements {
                    if let Some(val) = domain(&self.nodes[p.node as usize], &t.topology_key) {
                        let e = v
                            .existing_anti
                            .entry((t.topology_key.clone(), val.to_string()))
                            .or_default();
                        if !e.iter().any(|(_, h)| *h == id) {
                            e.push((t.text(), id));
                        }
                    }
                }
            }
        }
        if r.pod_anti_affinity.is_empty() && r.pod_affinity.is_empty() && r.spread.is_empty() {
            return Some(v);
        }
        let matches_all = |pns: &str, labels: &BTreeMap<String, String>| {
            !r.pod_affinity.is_empty() && r.pod_affinity.iter().all(|t| t.selects(ns, pns, labels))
        };
        v.affinity_self = matches_all(ns, &r.labels);
        // Per spread constraint: the nodes the job could go to by its selector and node
        // affinity (kube-scheduler's nodeAffinityPolicy: Honor), by domain; pods count
        // there only, and each of their domains counts, with no pod in it too. The
        // pods are counted by domain index (thousands of spread pods alike each
        // counted the others by the domain's name).
        let picked: Vec<crate::topology::Picked> = if r.spread.is_empty() {
            Vec::new()
        } else {
            let mut topo = self.topology.borrow_mut();
            r.spread
                .iter()
                .map(|c| topo.picked(&self.nodes, &c.topology_key, spec))
                .collect()
        };
        // Counting by label, the spread's pods come counted from the cluster's kept
        // counts (`spread`), and the walk below leaves them out; debug builds count
        // them in the walk too, to check the kept counts against.
        let kept = by_label;
        let walk_spread = !kept || cfg!(debug_assertions);
        let mut by_dom: Vec<Vec<u64>> = picked.iter().map(|p| vec![0; p.names.len()]).collect();
        // One placed job's pods (`count` of them) on node `n` of domains `d`.
        let mut visit = |id: JobId, n: usize, d: &Doms<'_>, count: u64| {
            let j = &self.jobs[id as usize];
            let (pns, labels) = (j.spec.project.as_str(), &j.spec.rules.labels);
            // The job's own pods count for none of its rules: asked only of a pod
            // some rule selects (most pods are selected by none).
            let mut mine: Option<bool> = None;
            let mut is_me = || *mine.get_or_insert_with(|| (&j.spec.project, &j.spec.name) == me);
            for (i, t) in r.pod_anti_affinity.iter().enumerate() {
                if let Some(val) = d.anti[i] {
                    if t.selects(ns, pns, labels) && !is_me() {
                        push_once(v.own_anti[i].entry(val.to_string()).or_default(), id);
                    }
                }
            }
            if matches_all(pns, labels) && !is_me() {
                push_once(&mut v.affinity_pods, id);
                for (i, val) in d.aff.iter().enumerate() {
                    if let Some(val) = val {
                        push_once(v.affinity[i].entry(val.to_string()).or_default(), id);
                    }
                }
            }
            for (i, c) in r.spread.iter().enumerate().filter(|_| walk_spread) {
                if let Some(dom) = picked[i].of[n] {
                    if spread_counts(spec, c, j) && !is_me() {
                        by_dom[i][dom as usize] += count;
                    }
                }
            }
        };
        let mut d = Doms::default();
        match by_label
            .then(|| self.rule_candidates(spec, walk_spread))
            .flatten()
        {
            // Only the jobs the label index finds for the rules' selectors, pod by pod.
            Some(ids) => {
                for id in ids {
                    let Some(j) = self.jobs.get(id) else { continue };
                    for p in &j.placements {
                        node_doms(&self.nodes[p.node as usize], spec, &mut d);
                        visit(id, p.node as usize, &d, 1);
                    }
                }
            }
            // Every placed job, node by node (the domains looked up once per node).
            None => {
                for (ni, node) in self.nodes.iter().enumerate() {
                    if node.jobs.is_empty() {
                        continue;
                    }
                    node_doms(node, spec, &mut d);
                    for &id in &node.jobs {
                        // A job with several replicas here counts once per replica.
                        let here = self.jobs[id as usize]
                            .placements
                            .iter()
                            .filter(|p| p.node as usize == ni)
                            .count() as u64;
                        visit(id, ni, &d, here);
                    }
                }
            }
        }
        if kept {
            let counted = self.kept_spread_counts(spec, &picked);
            debug_assert_eq!(counted, by_dom, "kept spread counts of {}", spec.name);
            by_dom = counted;
        }
        v.spread = r
            .spread
            .iter()
            .zip(picked.iter().zip(&by_dom))
            .map(|(c, (p, counts))| {
                let own = c
                    .label_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&r.labels));
                let at: HashMap<String, u64> = p
                    .doms
                    .iter()
                    .map(|&d| (p.names[d as usize].clone(), counts[d as usize]))
                    .collect();
                let min = at.values().copied().min().unwrap_or(0);
                (at, min, own)
            })
            .collect();
        Some(v)
    }

    /// The placed pods each spread constraint of the job counts, per domain of the
    /// nodes `picked` for it, from the cluster's kept counts: those count the job's
    /// own pods too, which are taken off here (a job's own pods count for none of its
    /// rules).
    fn kept_spread_counts(
        &self,
        spec: &JobSpec,
        picked: &[crate::topology::Picked],
    ) -> Vec<Vec<u64>> {
        let me = self
            .job_by_name
            .get(spec.full_name().as_str())
            .and_then(|&id| self.jobs.get(id))
            .filter(|j| !j.placements.is_empty());
        let mut kept = self.spread.borrow_mut();
        spec.rules
            .spread
            .iter()
            .zip(picked)
            .map(|(c, p)| {
                // A constraint without a selector counts no pod.
                let Some(sel) = &c.label_selector else {
                    return vec![0; p.names.len()];
                };
                let mut counts = kept.count(&self.jobs, &self.by_label, &spec.project, sel, p);
                if let Some(j) = me.filter(|j| spread_counts(spec, c, j)) {
                    for q in &j.placements {
                        if let Some(d) = p.of[q.node as usize] {
                            counts[d as usize] = counts[d as usize].saturating_sub(1);
                        }
                    }
                }
                counts
            })
            .collect()
    }

    /// The held jobs that the job's pod affinity, anti-affinity and spread selectors
    /// could match (the spread's only when `spread`), found by label, in order of id
    /// and each once; `None` when some selector cannot be narrowed by label (every
    /// placed job is then looked at).
    /// (A sorted list: a set built a view, for thousands of pods alike, cost more than
    /// the counting.)
    fn rule_candidates(&self, spec: &JobSpec, spread: bool) -> Option<Vec<JobId>> {
        let r = &spec.rules;
        let spread = r.spread.iter().filter(|_| spread);
        let selectors = r
            .pod_anti_affinity
            .iter()
            .chain(&r.pod_affinity)
            .map(|t| t.label_selector.as_ref())
            .chain(spread.map(|c| c.label_selector.as_ref()));
        let mut all = Vec::new();
        // A term without a selector selects no pod.
        for s in selectors.flatten() {
            self.by_label.candidates(s, &mut all)?;
        }
        // (Nearly always one selector's one set, in order already: sorting it is a pass.)
        all.sort_unstable();
        all.dedup();
        Some(all)
    }

    /// Whether the pod-level rules let the job on node `n`, the jobs in `except`
    /// taken as gone (their pods no longer hold a port, repel, attract or count);
    /// `Err` names the first rule that does not (NodePorts, then InterPodAffinity,
    /// then PodTopologySpread).
    pub fn pod_rules(
        &self,
        spec: &JobSpec,
        view: Option<&PodRulesView>,
        n: NodeId,
        except: &[JobId],
    ) -> Result<(), NodeReason> {
        let Some(v) = view else {
            return Ok(());
        };
        let node = &self.nodes[n as usize];
        let r = &spec.rules;
        if !r.host_ports.is_empty() {
            for &id in &node.jobs {
                if except.contains(&id) {
                    continue;
                }
                let j = &self.jobs[id as usize];
                if let Some(p) = r
                    .host_ports
                    .iter()
                    .find(|p| j.spec.rules.host_ports.iter().any(|o| p.clashes(o)))
                {
                    return Err(NodeReason::HostPort {
                        port: p.port,
                        protocol: p.protocol.clone(),
                    });
                }
            }
        }
        for ((key, val), holders) in &v.existing_anti {
            if domain(node, key) != Some(val.as_str()) {
                continue;
            }
            if let Some((term, of)) = holders.iter().find(|(_, h)| !except.contains(h)) {
                return Err(NodeReason::PodAntiAffinity {
                    term: term.clone(),
                    of: Some(self.job_ref(*of)),
                });
            }
        }
        for (i, t) in r.pod_anti_affinity.iter().enumerate() {
            if domain(node, &t.topology_key)
                .and_then(|val| v.own_anti[i].get(val))
                .is_some_and(|h| any_stays(h, except))
            {
                return Err(NodeReason::PodAntiAffinity {
                    term: t.text(),
                    of: None,
                });
            }
        }
        if let Some(t) = self.affinity_unmet(r.pod_affinity.as_slice(), v, node, except) {
            return Err(NodeReason::PodAffinity { term: t.text() });
        }
        for (i, c) in r.spread.iter().enumerate() {
            let Some(val) = domain(node, &c.topology_key) else {
                return Err(NodeReason::TopologySpread {
                    key: c.topology_key.clone(),
                    max_skew: c.max_skew,
                });
            };
            let (counts, min, own) = &v.spread[i];
            let (here, min) = if except.is_empty() {
                (counts.get(val).copied().unwrap_or(0), *min)
            } else {
                // The pods of jobs taken as gone no longer count where they are.
                let mut gone: HashMap<&str, u64> = HashMap::new();
                for &x in except {
                    let Some(j) = self.jobs.get(x) else { continue };
                    if (&j.spec.project, &j.spec.name) == (&spec.project, &spec.name)
                        || !spread_counts(spec, c, j)
                    {
                        continue;
                    }
                    for p in &j.placements {
                        let pn = &self.nodes[p.node as usize];
                        if !crate::fit::node_selected(pn, spec) {
                            continue;
                        }
                        if let Some(d) = domain(pn, &c.topology_key) {
                            *gone.entry(d).or_insert(0) += 1;
                        }
                    }
                }
                let after = |d: &str, k: u64| k.saturating_sub(gone.get(d).copied().unwrap_or(0));
                let min = counts.iter().map(|(d, &k)| after(d, k)).min().unwrap_or(0);
                (after(val, counts.get(val).copied().unwrap_or(0)), min)
            };
            if here + u64::from(*own) > min + u64::from(c.max_skew) {
                return Err(NodeReason::TopologySpread {
                    key: c.topology_key.clone(),
                    max_skew: c.max_skew,
                });
            }
        }
        Ok(())
    }

    fn affinity_unmet<'a>(
        &self,
        terms: &'a [PodAffinityTerm],
        v: &PodRulesView,
        node: &Node,
        except: &[JobId],
    ) -> Option<&'a PodAffinityTerm> {
        // Every term's key must be on the node.
        if let Some(t) = terms
            .iter()
            .find(|t| domain(node, &t.topology_key).is_none())
        {
            return Some(t);
        }
        // The first of a series: no placed pod (that stays) matches the terms.
        if v.affinity_self && !any_stays(&v.affinity_pods, except) {
            return None;
        }
        terms.iter().enumerate().find_map(|(i, t)| {
            let val = domain(node, &t.topology_key)?;
            let met = v.affinity[i].get(val).is_some_and(|h| any_stays(h, except));
            (!met).then_some(t)
        })
    }
}

/// Whether a spread constraint of `spec` counts job `j`'s pods: the job's namespace
/// and the constraint's selector.
fn spread_counts(spec: &JobSpec, c: &crate::rules::SpreadConstraint, j: &Job) -> bool {
    j.spec.project == spec.project
        && c.label_selector
            .as_ref()
            .is_some_and(|s| s.matches(&j.spec.rules.labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A training-pool cluster with projects `ml` and `ops`, open.
    fn two_project_cluster() -> Cluster {
        let mut c = crate::testkit::train_pool_cluster();
        for p in ["ml", "ops"] {
            c.add_project(Project {
                name: p.into(),
                department: "d".into(),
                quotas: [(0, Quota::default())].into(),
            });
        }
        c
    }

    /// Node `n{i}`'s labels: the training pool's 4 A100s, its hostname, its `zone`.
    fn zoned_labels(i: u32, zone: Option<String>) -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = [
            (LABEL_ROLE, "train".to_string()),
            (LABEL_MODEL, "a100".to_string()),
            (LABEL_COUNT, "4".to_string()),
            ("kubernetes.io/hostname", format!("n{i}")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(z) = zone {
            labels.insert("zone".into(), z);
        }
        labels
    }

    /// The names of the jobs with a replica placed.
    fn running_names(c: &Cluster) -> Vec<String> {
        c.jobs
            .iter()
            .filter(|j| !j.placements.is_empty())
            .map(|j| j.spec.full_name())
            .collect()
    }

    /// Node `n{i}` of 4 A100s in `zone` (none: no zone label).
    fn zoned_node(i: u32, zone: Option<String>) -> Node {
        let name = format!("n{i}");
        let cards = (0..4)
            .map(|g| Gpu::new(g, format!("{name}/{g}"), "a100", 80 << 30, false))
            .collect();
        Node::new(
            &name,
            zoned_labels(i, zone),
            64_000,
            512 << 30,
            1 << 40,
            cards,
        )
    }

    /// The label index finds every pod the rules count: on random clusters of
    /// labelled pods (some with anti-affinity of their own), for random selectors of
    /// every kind, each node's verdict is the one a walk over every placed pod gives,
    /// with and without some jobs taken as gone, before and after pods end and a
    /// checkpoint is restored.
    #[test]
    fn the_label_index_counts_the_pods_a_walk_over_every_pod_counts() {
        let mut rnd = crate::testkit::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let pick = |r: u64, of: &[&str]| of[r as usize % of.len()].to_string();
        let mut compared = 0;
        for case in 0..40 {
            let mut c = two_project_cluster();
            for i in 0..(3 + rnd(8)) as u32 {
                let zone = (rnd(5) > 0).then(|| pick(rnd(3), &["z1", "z2", "z3"]));
                c.add_node(zoned_node(i, zone));
            }
            let selector = |rnd: &mut dyn FnMut(u64) -> u64| {
                let mut s = crate::rules::LabelSelector::default();
                for _ in 0..rnd(3) {
                    let key = pick(rnd(2), &["app", "tier"]);
                    let vals = ["a", "b", "c", "x"];
                    match rnd(6) {
                        0 => {
                            s.match_labels.insert(key, pick(rnd(4), &vals));
                        }
                        k => s.match_expressions.push(crate::rules::Requirement {
                            key,
                            operator: pick(k, &["", "In", "NotIn", "Exists", "DoesNotExist", "In"]),
                            values: (0..1 + rnd(2)).map(|_| pick(rnd(4), &vals)).collect(),
                        }),
                    }
                }
                s
            };
            let spec_of = |name: String, rnd: &mut dyn FnMut(u64) -> u64, rules: bool| {
                let project = pick(rnd(3), &["ml", "ml", "ops"]);
                let mut spec = JobSpec::train(&name, &project, "train", 1);
                for key in ["app", "tier"] {
                    if rnd(3) > 0 {
                        spec.rules
                            .labels
                            .insert(key.into(), pick(rnd(4), &["a", "b", "c", "x"]));
                    }
                }
                if rules || rnd(6) == 0 {
                    spec.rules
                        .pod_anti_affinity
                        .push(crate::rules::PodAffinityTerm {
                            label_selector: Some(selector(rnd)),
                            namespaces: vec![],
                            topology_key: pick(rnd(2), &["zone", "kubernetes.io/hostname"]),
                        });
                }
                if rules {
                    for _ in 0..rnd(2) {
                        spec.rules.pod_affinity.push(crate::rules::PodAffinityTerm {
                            label_selector: Some(selector(rnd)),
                            namespaces: if rnd(2) == 0 {
                                vec![]
                            } else {
                                vec!["ops".into()]
                            },
                            topology_key: "zone".into(),
                        });
                    }
                    for _ in 0..1 + rnd(2) {
                        spec.rules.spread.push(crate::rules::SpreadConstraint {
                            max_skew: 1 + rnd(2) as u32,
                            topology_key: pick(rnd(2), &["zone", "kubernetes.io/hostname"]),
                            label_selector: (rnd(5) > 0).then(|| selector(rnd)),
                        });
                    }
                }
                spec
            };
            for i in 0..(4 + rnd(20)) {
                let spec = spec_of(format!("p{i}"), &mut rnd, false);
                let _ = c.submit(spec);
                c.schedule();
            }
            for round in 0..2 {
                if round == 1 {
                    // Some pods end; the cluster comes back from a checkpoint.
                    let running = running_names(&c);
                    for name in running.iter().filter(|_| rnd(3) == 0) {
                        c.stop_job(name, "test").unwrap();
                    }
                    c = Cluster::restore(c.checkpoint()).unwrap();
                }
                let placed: Vec<JobId> = c
                    .jobs
                    .iter()
                    .filter(|j| !j.placements.is_empty())
                    .map(|j| j.id)
                    .collect();
                for probe in 0..6 {
                    let spec = spec_of(format!("probe{probe}"), &mut rnd, true);
                    let indexed = c.pod_rules_view_by(&spec, true);
                    let walked = c.pod_rules_view_by(&spec, false);
                    let except: Vec<JobId> =
                        placed.iter().copied().filter(|_| rnd(4) == 0).collect();
                    for n in 0..c.nodes.len() as NodeId {
                        for ex in [&[][..], &except[..]] {
                            assert_eq!(
                                format!("{:?}", c.pod_rules(&spec, indexed.as_ref(), n, ex)),
                                format!("{:?}", c.pod_rules(&spec, walked.as_ref(), n, ex)),
                                "case {case} round {round} probe {probe} node {n}: {:?}",
                                spec.rules
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 1000, "{compared}");
    }

    /// The spread counts the cluster keeps between questions, brought up to date from
    /// the placements made and released since, are what a walk over every placed pod
    /// counts: through placements (spread pods among them, asking as they go),
    /// releases, relabelled nodes and a restore.
    #[test]
    fn kept_spread_counts_follow_placements_releases_and_relabelled_nodes() {
        let mut rnd = crate::testkit::xorshift(0x2545_f491_4f6c_dd1du64);
        let mut c = two_project_cluster();
        for i in 0..8 {
            // The last node has no zone.
            c.add_node(zoned_node(i, (i < 7).then(|| format!("z{}", i % 3))));
        }
        let spread = |key: &str, app: &[&str]| crate::rules::SpreadConstraint {
            max_skew: 1,
            topology_key: key.into(),
            label_selector: Some(crate::rules::LabelSelector {
                match_expressions: vec![crate::rules::Requirement {
                    key: "app".into(),
                    operator: "In".into(),
                    values: app.iter().map(|a| a.to_string()).collect(),
                }],
                ..Default::default()
            }),
        };
        let probes: Vec<JobSpec> = {
            let mut a = JobSpec::train("probe-a", "ml", "train", 1);
            a.rules.labels.insert("app".into(), "a".into());
            a.rules.spread.push(spread("zone", &["a"]));
            let mut b = JobSpec::train("probe-b", "ops", "train", 1);
            b.rules
                .spread
                .push(spread("kubernetes.io/hostname", &["a", "b", "a"]));
            b.rules.spread.push(spread("zone", &["b"]));
            let mut z = a.clone();
            z.name = "probe-z".into();
            z.node_selector = [("zone".to_string(), "z1".to_string())].into();
            vec![a, b, z]
        };
        let mut asked = 0;
        for step in 0..400 {
            match rnd(12) {
                0..=6 => {
                    let project = ["ml", "ml", "ops"][rnd(3) as usize];
                    let mut spec = JobSpec::train(&format!("j{step}"), project, "train", 1);
                    spec.replicas = 1 + rnd(2) as u32;
                    let app = ["a", "b", "c"][rnd(3) as usize];
                    spec.rules.labels.insert("app".into(), app.into());
                    if rnd(2) == 0 {
                        spec.rules.spread.push(spread("zone", &[app]));
                    }
                    let _ = c.submit(spec);
                    c.schedule();
                }
                7..=9 => {
                    let running = running_names(&c);
                    if !running.is_empty() {
                        let name = &running[rnd(running.len() as u64) as usize];
                        c.stop_job(name, "test").unwrap();
                    }
                }
                10 => {
                    let i = rnd(8) as u32;
                    c.relabel_node(i, zoned_labels(i, Some(format!("z{}", rnd(4)))));
                }
                _ => c = Cluster::restore(c.checkpoint()).unwrap(),
            }
            for p in &probes {
                let kept = c.pod_rules_view_by(p, true).map(|v| v.spread);
                let walked = c.pod_rules_view_by(p, false).map(|v| v.spread);
                assert_eq!(kept, walked, "step {step}, {}", p.name);
                asked += 1;
            }
        }
        let placed = c.jobs.iter().filter(|j| !j.placements.is_empty()).count();
        assert!(placed > 4, "{placed} jobs placed at the end");
        assert_eq!(asked, 1200);
    }

    /// The log of placements behind the kept spread counts stays bounded while a count
    /// nobody asks again lags behind (every entry keeps its job's spec alive), and the
    /// count is right when asked again.
    #[test]
    fn the_spread_log_stays_bounded_behind_a_count_not_asked_again() {
        let mut c = crate::testkit::train_cluster();
        crate::testkit::add_train_node(&mut c, "n0", "a100", 4);
        let mut probe = JobSpec::train("probe", "p", "train", 1);
        probe.rules.labels.insert("app".into(), "a".into());
        probe.rules.spread.push(crate::rules::SpreadConstraint {
            max_skew: 1,
            topology_key: "kubernetes.io/hostname".into(),
            label_selector: Some(crate::rules::LabelSelector {
                match_labels: [("app".to_string(), "a".to_string())].into(),
                ..Default::default()
            }),
        });
        let asked = |c: &Cluster| c.pod_rules_view_by(&probe, true).map(|v| v.spread);
        assert!(asked(&c).is_some());
        let mut most = 0;
        for i in 0..crate::spread::LOG_KEPT {
            let mut spec = JobSpec::train(&format!("j{i}"), "p", "train", 1);
            spec.rules.labels.insert("app".into(), "a".into());
            c.submit(spec).unwrap();
            c.schedule();
            c.stop_job(&format!("p/j{i}"), "test").unwrap();
            most = most.max(c.spread.borrow().logged());
        }
        assert!(most <= crate::spread::LOG_KEPT, "{most} placements logged");
        assert!(most > 100, "the placements were logged ({most})");
        c.submit(JobSpec::train("last", "p", "train", 1)).unwrap();
        let mut last = JobSpec::train("a-last", "p", "train", 1);
        last.rules.labels.insert("app".into(), "a".into());
        c.submit(last).unwrap();
        c.schedule();
        assert_eq!(
            asked(&c),
            c.pod_rules_view_by(&probe, false).map(|v| v.spread)
        );
    }
}
