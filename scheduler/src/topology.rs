//! Nodes' topology domains (the values of a label key such as
//! `topology.kubernetes.io/zone`), as the pod-level rules ask for them: a cache the
//! cluster keeps, below the rules that read it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::{JobSpec, Node};

/// The node's value of the topology key `key`, if it has one.
pub(crate) fn domain<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.labels().get(key).map(String::as_str)
}

/// The domains of each topology key a spread constraint asked for, per node, and the
/// domains of the nodes a job's node selector and node affinity pick: what a spread
/// constraint counts (every domain it could go to, with no pod in it too). Asked for
/// every spread pod, this walked every node's labels each time; now once, while no
/// node's labels change and no node joins ([`Node::labels_generation`]). In debug
/// builds every answer is checked against a fresh walk.
#[derive(Clone, Debug, Default)]
pub(crate) struct Topology {
    /// The labels generation and node count the keys were read at.
    stamp: (u64, usize),
    keys: HashMap<String, TopoKey>,
}

#[derive(Clone, Debug, Default)]
struct TopoKey {
    /// Per node: its domain, as an index into `names`.
    of: Vec<Option<u32>>,
    names: Arc<[String]>,
    /// By (node selector, node affinity): what they pick.
    picked: Vec<(Selection, Picked)>,
}

/// The nodes a job's node selector and node affinity pick, by their domains of one
/// topology key: what a spread constraint of the job counts by. The same answer (the
/// same allocations) is given while no node's labels change, no node joins and the
/// selection stays kept: the spread counts kept between questions go by it.
#[derive(Clone, Debug)]
pub(crate) struct Picked {
    /// The key's domains (the values of the label), by index.
    pub names: Arc<[String]>,
    /// Per node: its domain when the job could go to it.
    pub of: Arc<[Option<u32>]>,
    /// The domains of the nodes picked, each once, in order of index.
    pub doms: Arc<[u32]>,
}

type Selection = (
    BTreeMap<String, String>,
    Option<Vec<crate::rules::NodeSelectorTerm>>,
);

/// At most this many selections are kept per key (then forgotten all at once).
const PICKED_KEPT: usize = 64;

impl TopoKey {
    /// Every node's domain of `key`.
    fn read(nodes: &crate::nodes::Nodes, key: &str) -> TopoKey {
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut names = Vec::new();
        let of = nodes
            .iter()
            .map(|n| {
                domain(n, key).map(|v| {
                    *ids.entry(v).or_insert_with(|| {
                        names.push(v.to_string());
                        names.len() as u32 - 1
                    })
                })
            })
            .collect();
        TopoKey {
            of,
            names: names.into(),
            picked: Vec::new(),
        }
    }
}

impl Topology {
    /// The nodes the job could go to by its node selector and node affinity, by their
    /// domains of `key`.
    pub(crate) fn picked(
        &mut self,
        nodes: &crate::nodes::Nodes,
        key: &str,
        spec: &JobSpec,
    ) -> Picked {
        let stamp = (Node::labels_generation(), nodes.len());
        if self.stamp != stamp {
            self.keys.clear();
            self.stamp = stamp;
        }
        // (Looked up before an entry is made: nearly every call finds its key.)
        if !self.keys.contains_key(key) {
            self.keys.insert(key.to_string(), TopoKey::read(nodes, key));
        }
        let k = self.keys.get_mut(key).expect("just read");
        let r = &spec.rules;
        let found = k
            .picked
            .iter()
            .find(|((sel, aff), _)| *sel == spec.node_selector && *aff == r.node_affinity);
        let picked = match found {
            Some((_, p)) => p.clone(),
            None => {
                let mut seen = vec![false; k.names.len()];
                let of: Arc<[Option<u32>]> = nodes
                    .iter()
                    .zip(&k.of)
                    .map(|(node, d)| {
                        let d = (*d).filter(|_| crate::fit::node_selected(node, spec))?;
                        seen[d as usize] = true;
                        Some(d)
                    })
                    .collect();
                let doms = (0..seen.len() as u32)
                    .filter(|&d| seen[d as usize])
                    .collect();
                let p = Picked {
                    names: k.names.clone(),
                    of,
                    doms,
                };
                if k.picked.len() >= PICKED_KEPT {
                    k.picked.clear();
                }
                k.picked.push((
                    (spec.node_selector.clone(), r.node_affinity.clone()),
                    p.clone(),
                ));
                p
            }
        };
        #[cfg(debug_assertions)]
        {
            use std::collections::BTreeSet;
            let name = |d: &u32| picked.names[*d as usize].as_str();
            let fresh: Vec<Option<&str>> = nodes
                .iter()
                .map(|n| {
                    crate::fit::node_selected(n, spec)
                        .then(|| domain(n, key))
                        .flatten()
                })
                .collect();
            let mine: Vec<Option<&str>> = picked.of.iter().map(|d| d.as_ref().map(name)).collect();
            debug_assert_eq!(mine, fresh, "cached topology domains of {key}, per node");
            let doms: BTreeSet<&str> = picked.doms.iter().map(name).collect();
            let fresh: BTreeSet<&str> = fresh.into_iter().flatten().collect();
            debug_assert_eq!(doms, fresh, "cached topology domains of {key}");
        }
        picked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn node(name: &str, zone: &str) -> Node {
        let labels = [("zone".to_string(), zone.to_string())].into();
        Node::new(name, labels, 1000, 1 << 30, 0, Vec::new())
    }

    fn domains(t: &mut Topology, nodes: &crate::nodes::Nodes, spec: &JobSpec) -> BTreeSet<String> {
        let p = t.picked(nodes, "zone", spec);
        p.doms
            .iter()
            .map(|&d| p.names[d as usize].clone())
            .collect()
    }

    #[test]
    fn the_domains_follow_relabelled_and_new_nodes_and_the_selection() {
        let mut nodes: crate::nodes::Nodes = vec![node("a", "z1"), node("b", "z2")].into();
        let mut t = Topology::default();
        let any = JobSpec::train("j", "p", "pool", 1);
        assert_eq!(
            domains(&mut t, &nodes, &any),
            ["z1", "z2"].map(String::from).into()
        );
        // A node's labels changed: its old zone is gone, its new one counts.
        nodes[1].set_labels([("zone".to_string(), "z3".to_string())].into());
        assert_eq!(
            domains(&mut t, &nodes, &any),
            ["z1", "z3"].map(String::from).into()
        );
        // A node joined.
        nodes.push(node("c", "z4"));
        assert_eq!(domains(&mut t, &nodes, &any).len(), 3);
        // Another selection, kept apart from the first.
        let mut picky = any.clone();
        picky.node_selector = [("zone".to_string(), "z4".to_string())].into();
        assert_eq!(
            domains(&mut t, &nodes, &picky),
            ["z4"].map(String::from).into()
        );
        assert_eq!(domains(&mut t, &nodes, &any).len(), 3);
    }
}
