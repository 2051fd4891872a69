//! Pods: maar's own (waiting, bound, ended, deleted) and every other pod that holds
//! node resources; bound pods the core follows, foreign pods maar's decisions stopped.

use super::*;

/// Why a waiting pod leaves the queue when it is deleted (it may linger, for its
/// finalizers or its grace period, but it is never to be bound).
const DELETED_WAITING: &str = "its pod is being deleted: no longer to be placed";

impl KubeDriver {
    /// A pod of maar's it does not queue: told why where `kubectl describe` shows it
    /// (PodScheduled=False, a FailedScheduling event), and known so that its updates
    /// change nothing.
    fn not_queued(
        &mut self,
        key: String,
        uid: &str,
        message: String,
        facts: PodFacts,
        writes: &mut Vec<Write>,
    ) {
        writes.push(Write::Unschedulable {
            job: key.clone(),
            uid: uid.to_string(),
            message,
            object: None,
        });
        self.pods.insert(key, facts);
    }

    /// Pod `key` no longer holds its node (gone, or ended).
    fn vacated(&mut self, key: &str) {
        self.vacating.retain(|_, pods| {
            pods.remove(key);
            !pods.is_empty()
        });
    }

    pub(super) fn pod_seen(
        &mut self,
        core: &mut Core,
        w: Watched<Box<PodSeen>>,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        match w {
            Watched::Init => {
                self.relist_pods = Some(HashSet::new());
                self.pod_batch.clear();
            }
            Watched::InitApply(p) => {
                if let Some(set) = &mut self.relist_pods {
                    set.insert(p.key.clone());
                }
                self.pod_batch.push(p);
            }
            Watched::Apply(p) => {
                if p.state != PodState::Live {
                    self.vacated(&p.key);
                }
                self.pod_applied(core, *p, events, writes)
            }
            Watched::Delete(p) => match &p.owner {
                Some(tj) => {
                    self.vacated(&p.key);
                    let (ns, name) = p.key.split_once('/').unwrap_or(("default", &p.key));
                    let tj_key = format!("{ns}/{tj}");
                    if let Some(o) = self.owned.get_mut(&tj_key).and_then(|o| o.get_mut(name)) {
                        o.deleted = true;
                    }
                    self.object_check(core, &tj_key, events, writes);
                }
                None => {
                    self.vacated(&p.key);
                    self.pod_deleted(core, &p.key, events)
                }
            },
            Watched::InitDone => {
                let mut batch = std::mem::take(&mut self.pod_batch);
                batch.sort_by(|a, b| (a.created, &a.key).cmp(&(b.created, &b.key)));
                for p in batch {
                    self.pod_applied(core, *p, events, writes);
                }
                if let Some(set) = self.relist_pods.take() {
                    // Pods deleted while the watch was down are gone from their nodes.
                    for pods in self.vacating.values_mut() {
                        pods.retain(|k, _| set.contains(k));
                    }
                    self.vacating.retain(|_, pods| !pods.is_empty());
                    let gone = not_in(&self.pods, &set);
                    for k in gone {
                        self.pod_deleted(core, &k, events);
                    }
                    // Pods of maar's objects gone while the watch was down.
                    let mut touched = Vec::new();
                    for (obj, pods) in &mut self.owned {
                        let (ns, _) = obj.split_once('/').unwrap_or(("default", obj));
                        for (name, p) in pods.iter_mut() {
                            if !p.deleted && !set.contains(&format!("{ns}/{name}")) {
                                p.deleted = true;
                                touched.push(obj.clone());
                            }
                        }
                    }
                    touched.dedup();
                    for obj in touched {
                        self.object_check(core, &obj, events, writes);
                    }
                }
            }
        }
    }

    pub(super) fn pod_applied(
        &mut self,
        core: &mut Core,
        p: PodSeen,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        if let Some(tj) = &p.owner {
            let (ns, name) = p.key.split_once('/').unwrap_or(("default", &p.key));
            let tj_key = format!("{ns}/{tj}");
            self.owned.entry(tj_key.clone()).or_default().insert(
                name.to_string(),
                OwnedPod {
                    node: p.node.clone(),
                    gpus: p.gpus.clone(),
                    state: p.state.clone(),
                    deleted: false,
                },
            );
            self.object_check(core, &tj_key, events, writes);
            return;
        }
        // Another scheduler's pod counts once it is bound (it holds its node's room).
        if !p.ours && p.node.is_none() && !self.pods.contains_key(&p.key) {
            return;
        }
        let key = p.key.clone();
        if let Some(f) = self.pods.get_mut(&key) {
            if f.uid != p.uid {
                // The same name, a new pod: the old one is gone.
                self.pod_deleted(core, &key, events);
            } else {
                if let Some(node) = &p.node {
                    f.bound = true;
                    let now = Some((node.clone(), p.gpus.clone()));
                    if f.node != now {
                        // Bound in Kubernetes: maar's books follow (the bind answer may
                        // come later, or have been taken back meanwhile).
                        f.node = now;
                        if f.in_core && !f.ended && p.state == PodState::Live {
                            self.reconcile.push(key.clone());
                        }
                    }
                }
                let f = self.pods.get_mut(&key).expect("known");
                if f.ended || !f.in_core {
                    self.reconcile_all(core, events);
                    return;
                }
                if p.deleting && p.node.is_some() && p.state == PodState::Live {
                    // Deleted while it runs: its room is held until it is gone, and
                    // it is nobody's victim (A1 of QA: a terminating pod preempted
                    // had its 8 cards booked again beside its own).
                    Self::observe(
                        core,
                        Observation::JobTerminating { job: key.clone() },
                        events,
                    );
                }
                if p.deleting && p.node.is_none() && p.state == PodState::Live {
                    // Deleted while it waited: no longer to be placed.
                    f.ended = true;
                    Self::observe(
                        core,
                        Observation::JobGone {
                            job: key,
                            why: DELETED_WAITING.into(),
                        },
                        events,
                    );
                    return;
                }
                let outcome = match p.state {
                    PodState::Live => {
                        self.reconcile_all(core, events);
                        return;
                    }
                    PodState::Succeeded => JobOutcome::Succeeded,
                    PodState::Failed { oom: true, message } => JobOutcome::OomKilled { message },
                    PodState::Failed {
                        oom: false,
                        message,
                    } => JobOutcome::Failed { message },
                };
                f.ended = true;
                let running = core
                    .cluster()
                    .job_id(&key)
                    .is_ok_and(|id| core.cluster().jobs[id as usize].phase == Phase::Running);
                if running {
                    Self::observe(core, Observation::JobEnded { job: key, outcome }, events);
                } else {
                    // Ended before maar started it (another hand bound it): no longer
                    // waiting.
                    Self::observe(
                        core,
                        Observation::JobGone {
                            job: key,
                            why:
                                "its pod ended before maar started it (another scheduler bound it)"
                                    .into(),
                        },
                        events,
                    );
                }
                return;
            }
        }
        let mut facts = PodFacts {
            uid: p.uid.clone(),
            in_core: false,
            bound: p.node.is_some(),
            ended: p.state != PodState::Live,
            foreign: !p.ours,
            node: p.node.clone().map(|n| (n, p.gpus.clone())),
            orphan: None,
            pool_chosen: false,
        };
        if facts.ended || (p.deleting && p.node.is_none()) {
            // History is Kubernetes's: a pod that ended before maar saw it is not a job,
            // nor one deleted before it was placed.
            facts.ended = true;
            self.pods.insert(key, facts);
            return;
        }
        let (ns, _) = key.split_once('/').unwrap_or(("default", &key));
        Self::ensure_project(core, ns, events);
        let mut spec = match p.spec {
            Some(Ok(s)) => s,
            Some(Err(_)) if !p.ours => return,
            Some(Err(e)) => {
                let message = format!("maar cannot read this pod: {}: {}", e.field, e.message);
                self.not_queued(key, &p.uid, message, facts, writes);
                return;
            }
            None => return,
        };
        spec.project = ns.to_string();
        if p.ours && p.node.is_none() && !spec.rules.uncounted.is_empty() {
            // kube-scheduler's NodeResourcesFit counts every resource a node
            // advertises; maar counts CPU, memory, ephemeral storage and GPUs only, so
            // it would bind this pod where the kubelet may refuse it.
            let message = format!(
                "maar does not count {} on nodes (only CPU, memory, ephemeral storage and GPUs), so it does not place this pod: schedule it with kube-scheduler (no `schedulerName: maar`)",
                spec.rules
                    .uncounted
                    .iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            self.not_queued(key, &p.uid, message, facts, writes);
            return;
        }
        if !p.ours {
            // Never a victim of maar's preemption: it is not maar's to stop.
            spec.priority = maar_scheduler::limits::MAX_PRIORITY;
            spec.pool.clear();
        }
        if let Some(node) = p
            .node
            .as_ref()
            .filter(|n| core.cluster().node_id(n).is_err())
        {
            // Bound to a node maar does not know: not Pending (it is not maar's to
            // place again) and holding nothing (no card is known to be its).
            let name = key.split_once('/').map(|x| x.1).unwrap_or(&key);
            let message = format!(
                "pod {key} is bound to node {node}, which is not in the cluster: it holds nothing in maar until the node appears (`kubectl delete pod -n {ns} {name}` if the node is gone for good)"
            );
            let pod = object_ref("v1", "Pod", ns, name, &p.uid);
            self.trouble(
                core,
                events,
                pod,
                format!("pod/{key}"),
                "PodOnUnknownNode",
                message,
            );
            facts.orphan = Some(Box::new(spec));
            self.pods.insert(key, facts);
            return;
        }
        facts.pool_chosen = Self::place_on_node_pool(core, &mut spec, p.node.as_deref());
        let out = match &p.node {
            Some(node) => Self::observe(
                core,
                Observation::JobRunning {
                    spec: Box::new(spec),
                    replicas: vec![maar_scheduler::input::Binding {
                        node: node.clone(),
                        gpus: p.gpus.clone(),
                    }],
                },
                events,
            ),
            None => Self::observe(
                core,
                Observation::JobSubmitted {
                    spec: Box::new(spec),
                },
                events,
            ),
        };
        match out.result {
            Ok(_) => {
                facts.in_core = true;
                if p.deleting && p.node.is_some() {
                    Self::observe(
                        core,
                        Observation::JobTerminating { job: key.clone() },
                        events,
                    );
                }
            }
            Err(_) if !p.ours => {}
            Err(e) => writes.push(Write::Unschedulable {
                job: key.clone(),
                uid: p.uid.clone(),
                message: format!("maar cannot queue this pod: {e}"),
                object: None,
            }),
        }
        self.pods.insert(key, facts);
    }

    /// A pod bound before this maar saw it is in its node's pool unless it names one.
    /// Whether maar chose the pool (see [`KubeDriver::fill_pool`]).
    pub(super) fn place_on_node_pool(
        core: &Core,
        spec: &mut maar_scheduler::JobSpec,
        node: Option<&str>,
    ) -> bool {
        if let Some(pool) = node
            .filter(|_| spec.pool.is_empty())
            .and_then(|n| core.cluster().node_id(n).ok())
            .and_then(|n| core.cluster().nodes[n as usize].pool)
        {
            spec.pool = core.cluster().pools[pool as usize].name.clone();
        }
        Self::fill_pool(core, spec)
    }

    /// Pods bound to a node that was not in the cluster, now that it is: running there.
    pub(super) fn adopt_orphans(&mut self, core: &mut Core, node: &str, events: &mut Vec<Event>) {
        for (key, f) in &mut self.pods {
            let Some((n, gpus)) = f.node.clone().filter(|(n, _)| n == node) else {
                continue;
            };
            if f.in_core || f.ended {
                continue;
            }
            let Some(mut spec) = f.orphan.take() else {
                continue;
            };
            Self::place_on_node_pool(core, &mut spec, Some(&n));
            let out = Self::observe(
                core,
                Observation::JobRunning {
                    spec,
                    replicas: vec![maar_scheduler::input::Binding { node: n, gpus }],
                },
                events,
            );
            if out.is_ok() {
                f.in_core = true;
            } else {
                tracing::warn!(target: "maar::kube", "pod {key} on node {node}: {:?}", out.result);
            }
        }
    }

    pub(super) fn pod_deleted(&mut self, core: &mut Core, key: &str, events: &mut Vec<Event>) {
        let Some(f) = self.pods.remove(key) else {
            return;
        };
        self.told.remove(key);
        // (A pod that ended, or that maar deleted, left the queue already; one still
        // live in maar's books leaves it now.)
        if f.in_core {
            let live = [Phase::Pending, Phase::Running];
            // Another scheduler's pod deleted is its owners' doing, the usual end of
            // such a pod as maar sees it: said so, not as if a job of maar's was
            // cancelled.
            let why = if f.foreign {
                "another scheduler's pod, deleted: it leaves maar's books and frees what it held"
            } else {
                "its pod was deleted"
            };
            Self::gone_if(core, key, &live, why.into(), events);
        }
    }

    /// maar's pods that Kubernetes has bound: the core follows where they are.
    pub(super) fn reconcile_all(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        for key in std::mem::take(&mut self.reconcile) {
            let Some((node, gpus)) = self.pods.get(&key).and_then(|f| f.node.clone()) else {
                continue;
            };
            let c = core.cluster();
            let Ok(id) = c.job_id(&key) else { continue };
            // The usual case, the watch's echo of maar's own bind: running where maar
            // placed it. Its bind is confirmed (when the answer has not come yet), as
            // the core does for `JobRunning` there, without a copy of its spec.
            let j = &c.jobs[id as usize];
            let replicas = vec![maar_scheduler::input::Binding { node, gpus }];
            if j.phase == Phase::Running && c.placed_as(id, &replicas) {
                if j.placements.iter().any(|p| !p.bound) {
                    Self::observe(core, Observation::Bound { job: key }, events);
                }
                continue;
            }
            let spec = maar_scheduler::JobSpec::clone(&c.jobs[id as usize].spec);
            Self::observe(
                core,
                Observation::JobRunning {
                    spec: Box::new(spec),
                    replicas,
                },
                events,
            );
        }
    }

    /// Other schedulers' pods that maar's decisions stopped leave maar's books, and so
    /// do maar's own pods it deleted: in Kubernetes a deleted pod is gone (its
    /// controller, if any, makes a new one, which is a new job), so the job a
    /// preemption put back in the queue does not wait there to be bound again (it was
    /// bound again to its terminating pod, or its bind failed on the deleted pod, again
    /// and again).
    pub(super) fn drop_foreign(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        for (job, reason) in std::mem::take(&mut self.deleted_own) {
            let why = format!("its pod was deleted by maar ({reason})");
            Self::gone_if(core, &job, &[Phase::Pending, Phase::Running], why, events);
        }
        for job in std::mem::take(&mut self.foreign_stopped) {
            if let Some(f) = self.pods.get_mut(&job) {
                f.ended = true;
            }
            Self::observe(
                core,
                Observation::JobGone {
                    job,
                    why: "another scheduler's pod, stopped by maar's decision: it leaves maar's books"
                        .into(),
                },
                events,
            );
        }
    }
}
