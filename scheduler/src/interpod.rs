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

/// The placed pods as the pod-level rules of one job see them. Each rule remembers
/// which jobs make it bind, so that a question with some jobs taken as gone (the
/// victims of a preemption, as kube-scheduler's preemption removes them before it runs
/// the filters again) is answered without counting the pods afresh.
#[derive(Clone, Debug, Default)]
pub struct PodRulesView {
    /// Placed pods whose anti-affinity keeps this job off a domain: (topology key,
    /// value) -> (the term in words, the job holding the pod), one per such job.
    existing_anti: HashMap<(String, String), Vec<(String, JobId)>>,
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

fn domain<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.labels().get(key).map(String::as_str)
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
        let mut spread: Vec<(HashMap<String, u64>, u64, bool)> = r
            .spread
            .iter()
            .map(|c| {
                let own = c
                    .label_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&r.labels));
                (HashMap::new(), 0, own)
            })
            .collect();
        // The domains of each node, looked up once per node (not per pod).
        let mut anti_dom: Vec<Option<&str>> = vec![None; r.pod_anti_affinity.len()];
        let mut aff_dom: Vec<Option<&str>> = vec![None; r.pod_affinity.len()];
        let mut spread_dom: Vec<Option<&str>> = vec![None; r.spread.len()];
        for (ni, node) in self.nodes.iter().enumerate() {
            if node.jobs.is_empty() && r.spread.is_empty() {
                continue;
            }
            // Spread counts over the nodes the job could go to by its selector and
            // node affinity (kube-scheduler's nodeAffinityPolicy: Honor).
            let eligible = !r.spread.is_empty() && crate::fit::node_selected(node, spec);
            for (d, t) in anti_dom.iter_mut().zip(&r.pod_anti_affinity) {
                *d = domain(node, &t.topology_key);
            }
            for (d, t) in aff_dom.iter_mut().zip(&r.pod_affinity) {
                *d = domain(node, &t.topology_key);
            }
            for (i, c) in r.spread.iter().enumerate() {
                spread_dom[i] = if eligible {
                    domain(node, &c.topology_key)
                } else {
                    None
                };
                if let Some(val) = spread_dom[i] {
                    if !spread[i].0.contains_key(val) {
                        spread[i].0.insert(val.to_string(), 0);
                    }
                }
            }
            for &id in &node.jobs {
                let j = &self.jobs[id as usize];
                let (pns, labels) = (j.spec.project.as_str(), &j.spec.rules.labels);
                // The job's own pods count for none of its rules: asked only of a pod
                // some rule selects (most pods are selected by none).
                let mut mine: Option<bool> = None;
                let mut is_me =
                    || *mine.get_or_insert_with(|| (&j.spec.project, &j.spec.name) == me);
                // A job with several replicas here counts once per replica.
                let here = || {
                    j.placements
                        .iter()
                        .filter(|p| p.node as usize == ni)
                        .count() as u64
                };
                for (i, t) in r.pod_anti_affinity.iter().enumerate() {
                    if let Some(val) = anti_dom[i] {
                        if t.selects(ns, pns, labels) && !is_me() {
                            push_once(v.own_anti[i].entry(val.to_string()).or_default(), id);
                        }
                    }
                }
                if matches_all(pns, labels) && !is_me() {
                    push_once(&mut v.affinity_pods, id);
                    for (i, val) in aff_dom.iter().enumerate() {
                        if let Some(val) = val {
                            push_once(v.affinity[i].entry(val.to_string()).or_default(), id);
                        }
                    }
                }
                for (i, c) in r.spread.iter().enumerate() {
                    if let Some(val) = spread_dom[i] {
                        if spread_counts(spec, c, j) && !is_me() {
                            if let Some(n) = spread[i].0.get_mut(val) {
                                *n += here();
                            }
                        }
                    }
                }
            }
        }
        for s in &mut spread {
            s.1 = s.0.values().copied().min().unwrap_or(0);
        }
        v.spread = spread;
        Some(v)
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
