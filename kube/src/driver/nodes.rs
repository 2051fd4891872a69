//! The Nodes the watch sees, as the core's nodes: capacity, labels, taints,
//! conditions and cordons re-read on every update; a node gone takes its pods' jobs.

use super::*;

impl KubeDriver {
    pub(super) fn node_applied(&mut self, core: &mut Core, k: &KNode, events: &mut Vec<Event>) {
        let name = k.metadata.name.clone().unwrap_or_default();
        let as_model = map::node_of(k);
        let labels_before = self.nodes.get(&name).map(|f| f.labels.clone());
        if labels_before.as_ref() != k.metadata.labels.as_ref() {
            for msg in map::label_troubles(k) {
                let node = object_ref("v1", "Node", "", &name, "");
                self.trouble(core, events, node, format!("node/{name}"), "BadLabel", msg);
            }
        }
        let facts = NodeFacts {
            offers: (
                as_model.cpu_milli,
                as_model.memory,
                as_model.disk,
                map::node_devices(k),
                as_model.taints.clone(),
            ),
            labels: map::labels_of(k),
            ready: map::node_ready(k),
            cordoned: map::node_cordoned(k),
            cordoned_gpus: map::cordoned_gpus(k),
        };
        if Self::ensure_pool(core, &facts.labels, events) {
            self.pool_appeared(core, events);
        }
        let before = self.nodes.get(&name).cloned();
        match &before {
            None => {
                Self::observe(
                    core,
                    Observation::NodeJoined {
                        node: Box::new(as_model),
                    },
                    events,
                );
            }
            Some(b) => {
                if b.offers != facts.offers {
                    // Capacity, devices or taints changed (labels with them).
                    Self::observe(
                        core,
                        Observation::NodeUpdated {
                            node: Box::new(as_model),
                        },
                        events,
                    );
                } else if b.labels != facts.labels {
                    Self::observe(
                        core,
                        Observation::NodeLabels {
                            node: name.clone(),
                            labels: facts.labels.clone(),
                        },
                        events,
                    );
                }
                if b.ready != facts.ready {
                    Self::observe(
                        core,
                        Observation::NodeCondition {
                            node: name.clone(),
                            ready: facts.ready.0,
                            reason: facts.ready.1.clone(),
                        },
                        events,
                    );
                }
                if b.cordoned != facts.cordoned {
                    Self::observe(
                        core,
                        Observation::Cordoned {
                            node: name.clone(),
                            gpu: None,
                            cordoned: facts.cordoned,
                        },
                        events,
                    );
                }
            }
        }
        // GPUs cordoned or uncordoned in the world (all of a new node's cordons).
        let was: &[u32] = before.as_ref().map_or(&[], |b| &b.cordoned_gpus[..]);
        let changed = facts
            .cordoned_gpus
            .iter()
            .filter(|g| !was.contains(g))
            .map(|&g| (g, true))
            .chain(
                was.iter()
                    .filter(|g| !facts.cordoned_gpus.contains(g))
                    .map(|&g| (g, false)),
            );
        for (g, cordoned) in changed {
            Self::observe(
                core,
                Observation::Cordoned {
                    node: name.clone(),
                    gpu: Some(g),
                    cordoned,
                },
                events,
            );
        }
        let joined = before.is_none();
        self.nodes.insert(name.clone(), facts);
        if joined {
            self.adopt_orphans(core, &name, events);
        }
    }

    pub(super) fn node_gone(&mut self, core: &mut Core, name: &str, events: &mut Vec<Event>) {
        let Some(f) = self.nodes.get_mut(name) else {
            return;
        };
        let reason = "deleted from the cluster".to_string();
        if f.ready != (false, reason.clone()) {
            f.ready = (false, reason.clone());
            Self::observe(
                core,
                Observation::NodeCondition {
                    node: name.to_string(),
                    ready: false,
                    reason,
                },
                events,
            );
        }
    }
}
