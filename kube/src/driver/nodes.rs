//! The Nodes the watch sees, as the core's nodes: capacity, labels, taints,
//! conditions and cordons re-read on every update; a node gone takes its pods' jobs.

use super::*;
use maar_scheduler::model::Health;

/// Why a card kept for the grace but held by no job is not offered.
pub const WITHDRAWN: &str =
    "no longer advertised by the node's device plugin (not offered; withdrawn when the grace ends unless it returns)";

impl KubeDriver {
    pub(super) fn node_applied(&mut self, core: &mut Core, k: &KNode, events: &mut Vec<Event>) {
        self.node_seen(core, k, events, false)
    }

    /// A node as the watch has it; with `withdraw`, cards it no longer advertises are
    /// taken as gone even where pods hold them (the grace is over).
    pub(super) fn node_seen(
        &mut self,
        core: &mut Core,
        k: &KNode,
        events: &mut Vec<Event>,
        withdraw: bool,
    ) {
        let name = k.metadata.name.clone().unwrap_or_default();
        let mut as_model = map::node_of(k);
        // Cards that hold jobs and are no longer advertised: kept for a grace (a
        // device plugin restarting reports none for a moment; Kubernetes stops no pod
        // for it), then taken as withdrawn.
        let held: Vec<maar_scheduler::model::Gpu> = core
            .cluster()
            .node_id(&name)
            .ok()
            .map(|id| {
                core.cluster().nodes[id as usize]
                    .gpus
                    .iter()
                    .filter(|g| {
                        !g.allocs.is_empty()
                            && as_model
                                .gpus
                                .get(g.index as usize)
                                .is_none_or(|x| x.resource != g.resource)
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        // Which physical cards a device plugin stopped advertising, maar cannot know:
        // only how many. While the cards in use fit the count advertised, nothing is
        // lost (the cards past the count are kept, the free ones fenced by
        // `fence_withdrawn`); only when more cards are in use than advertised, after the
        // grace, are the jobs on the cards past the count taken as lost.
        let in_use = Self::cards_in_use(core, &name);
        let lose_now = withdraw && in_use > as_model.gpus.len();
        // Leaving the kept state (the jobs on the cards past the count ended, or the
        // cards came back): the node is applied as advertised even if its object did
        // not change.
        let leaving = held.is_empty() && self.withdrawing.contains_key(&name);
        if held.is_empty() || lose_now {
            self.withdrawing.remove(&name);
        } else {
            let now = core.now();
            let first = !self.withdrawing.contains_key(&name);
            let since = self.withdrawing.get(&name).map_or(now, |w| w.0);
            self.withdrawing
                .insert(name.clone(), (since, Box::new(k.clone())));
            if first && in_use <= as_model.gpus.len() {
                Self::note(
                    core,
                    Severity::Normal,
                    "GpusFewer",
                    format!("node/{name}"),
                    format!(
                        "node {name} advertises {} GPU(s); the {in_use} its pods hold fit, so none is lost: only {} free card(s) are offered",
                        as_model.gpus.len(),
                        as_model.gpus.len() - in_use
                    ),
                    events,
                );
            } else if first {
                let cards: Vec<String> = held.iter().map(|g| g.index.to_string()).collect();
                self.node_trouble(
                    core,
                    events,
                    &name,
                    "GpusWithdrawing",
                    format!(
                        "node {name} no longer advertises GPU {} that pods hold: maar keeps them for {WITHDRAW_GRACE_S} s (a device plugin restarting reports none for a moment) before taking them as withdrawn",
                        cards.join(", ")
                    ),
                );
            }
            // Until then the node keeps its cards as they were, their jobs on them;
            // the free ones among those withdrawn are not offered meanwhile
            // (`fence_withdrawn`: the kubelet would refuse a pod bound there).
            if let Ok(id) = core.cluster().node_id(&name) {
                as_model.gpus = core.cluster().nodes[id as usize]
                    .gpus
                    .iter()
                    .map(|g| {
                        let mut c = g.clone();
                        c.allocs.clear();
                        c
                    })
                    .collect();
            }
        }
        let labels_before = self.nodes.get(&name).map(|f| f.labels.clone());
        if labels_before.as_ref() != k.metadata.labels.as_ref() {
            for msg in map::label_troubles(k) {
                self.node_trouble(core, events, &name, "BadLabel", msg);
            }
        }
        let facts = NodeFacts {
            offers: (
                as_model.cpu_milli,
                as_model.memory,
                as_model.disk,
                map::node_devices(k),
                as_model.taints.clone(),
                as_model.max_pods,
            ),
            labels: map::labels_of(k),
            ready: map::node_ready(k),
            cordoned: map::node_cordoned(k),
            cordoned_gpus: map::cordoned_gpus(k),
            cordons_text: map::cordons_text(k),
        };
        let cordons_before = self.nodes.get(&name).and_then(|f| f.cordons_text.clone());
        if cordons_before != facts.cordons_text {
            if let Some(msg) = map::cordon_troubles(k, as_model.gpus.len()) {
                self.node_trouble(core, events, &name, "BadAnnotation", msg);
            }
        }
        if Self::ensure_pool(core, &facts.labels, events) {
            self.pool_appeared(core, events);
        }
        let before = self.nodes.get(&name).cloned();
        let pool_before = {
            let c = core.cluster();
            c.node_id(&name).ok().and_then(|n| c.nodes[n as usize].pool)
        };
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
                if b.offers != facts.offers || lose_now || leaving {
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
                if b.offers.4 != facts.offers.4 || b.labels != facts.labels {
                    // Its pool or its taints may have changed: a waiting job of its
                    // pool may have lost the only node there that let it on.
                    // (A node that was in no pool stranded nobody.)
                    if let Some(p) = pool_before {
                        self.repool_pools.insert(p);
                    }
                }
                if b.ready != facts.ready {
                    Self::observe(
                        core,
                        Observation::NodeCondition {
                            node: name.clone(),
                            ready: facts.ready.0,
                            reason: facts.ready.1.clone(),
                            // Its pods' fate is Kubernetes's (the node lifecycle
                            // controller's taints and the pods' tolerations): a
                            // NotReady blip of a few seconds stops nothing.
                            keeps_jobs: true,
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
        self.fence_withdrawn(core, &name, events);
    }

    /// A trouble of node `name`, told on the Node (`kubectl describe node`).
    fn node_trouble(
        &mut self,
        core: &mut Core,
        events: &mut Vec<Event>,
        name: &str,
        reason: &str,
        message: String,
    ) {
        let node = object_ref("v1", "Node", "", name, "");
        self.trouble(core, events, node, format!("node/{name}"), reason, message);
    }

    /// How many of node `name`'s cards hold a job.
    fn cards_in_use(core: &Core, name: &str) -> usize {
        core.cluster().node_id(name).map_or(0, |id| {
            core.cluster().nodes[id as usize]
                .gpus
                .iter()
                .filter(|g| !g.allocs.is_empty())
                .count()
        })
    }

    /// While the cards a node no longer advertises are kept for their jobs (the
    /// grace), those of them that no job holds are not offered: the kubelet would
    /// refuse a pod bound there. They are marked unhealthy for [`WITHDRAWN`] (maar
    /// reads no other GPU health from Kubernetes), and healthy again once advertised
    /// again. Run on every sight of the node and every step of the grace (a job that
    /// ends meanwhile frees its withdrawn card).
    pub(super) fn fence_withdrawn(&mut self, core: &mut Core, name: &str, events: &mut Vec<Event>) {
        let Ok(id) = core.cluster().node_id(name) else {
            return;
        };
        // As many free cards are offered as the count advertised leaves beside those
        // in use (the lowest numbers first); the rest are fenced.
        let advertised = self
            .withdrawing
            .get(name)
            .map(|(_, k)| map::node_of(k).gpus.len());
        let mut budget = advertised.map(|a| a.saturating_sub(Self::cards_in_use(core, name)));
        let changes: Vec<(u32, bool)> = core.cluster().nodes[id as usize]
            .gpus
            .iter()
            .filter(|g| g.allocs.is_empty())
            .filter_map(|g| {
                let offered = match &mut budget {
                    None => true,
                    Some(0) => false,
                    Some(b) => {
                        *b -= 1;
                        true
                    }
                };
                match &g.health {
                    Health::Healthy if !offered => Some((g.index, false)),
                    Health::Unhealthy(why) if offered && why == WITHDRAWN => Some((g.index, true)),
                    _ => None,
                }
            })
            .collect();
        for (gpu, healthy) in changes {
            Self::observe(
                core,
                Observation::GpuHealth {
                    node: name.to_string(),
                    gpu,
                    healthy,
                    reason: WITHDRAWN.to_string(),
                },
                events,
            );
        }
    }

    pub(super) fn node_gone(&mut self, core: &mut Core, name: &str, events: &mut Vec<Event>) {
        // (Its cards' grace ends with it: the node as last seen is not applied again.)
        self.withdrawing.remove(name);
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
                    keeps_jobs: false,
                },
                events,
            );
        }
    }
}
