//! maar's own objects: TrainJobs (their pods made all or none) and
//! InferenceServices (their replicas' pods made and deleted as the autoscaler says).

use super::*;

/// The phases of an object's job that its object's end stops.
const OBJECT_LIVE: [Phase; 3] = [Phase::Pending, Phase::Running, Phase::Restarting];

impl KubeDriver {
    pub(super) fn object_applied(
        &mut self,
        core: &mut Core,
        t: ObjectSeen,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        let key = t.key.clone();
        // Made again while the old one's pods still ran: the job is the new object's
        // (as before its deletion).
        self.lingering.remove(&key);
        if let Some(f) = self.objects.get(&key) {
            if f.owner != t.owner {
                // A TrainJob and an InferenceService of one name: maar's jobs are
                // named by namespace/name, so the later one is refused.
                writes.push(Write::Unschedulable {
                    job: key.clone(),
                    uid: t.uid.clone(),
                    message: format!(
                        "a {} named {key} is already a job in maar; rename this {}",
                        f.owner.kind(),
                        t.owner.kind()
                    ),
                    object: Some(t.owner),
                });
                return;
            }
            if f.uid == t.uid {
                // Edits to a submitted object's spec are not taken (as a pod's): said
                // once per edit, on the object.
                let now = t.spec.as_ref().ok().cloned();
                // The spec as maar queues it: the object's labels and annotations
                // (kept as written, for a federation) are not its spec.
                let bare = |s: &Option<maar_scheduler::JobSpec>| {
                    s.clone().map(|mut s| {
                        s.manifest = None;
                        s
                    })
                };
                if f.spec.is_some() && now.is_some() && bare(&f.spec) != bare(&now) {
                    let kind = t.owner.kind();
                    let msg = format!(
                        "changes to a submitted {kind} are not applied (maar keeps the spec it queued); delete and re-apply it to run the new one"
                    );
                    self.objects.get_mut(&key).expect("known").spec = now;
                    let object = Self::crd_ref(kind, &key, &t.uid);
                    self.trouble(
                        core,
                        events,
                        object,
                        format!("job/{key}"),
                        "SpecNotApplied",
                        msg,
                    );
                }
                return;
            }
            self.object_deleted(core, &key, events);
        }
        let owner = t.owner;
        let kind = owner.kind();
        // Its pods' numbers go on from those that exist (kept for their logs).
        let serial = self
            .owned
            .get(&key)
            .into_iter()
            .flat_map(|o| o.keys())
            .filter_map(|n| n.rsplit('-').next().and_then(|x| x.parse::<usize>().ok()))
            .map(|x| x + 1)
            .max()
            .unwrap_or(0);
        let mut facts = ObjectFacts {
            owner,
            labels: t.labels.clone(),
            selector: t.selector.clone(),
            made: BTreeMap::new(),
            serial,
            load_asked: None,
            replaced: Vec::new(),
            uid: t.uid.clone(),
            in_core: false,
            ended: false,
            current: BTreeSet::new(),
            status: None,
            waiting: None,
            spec: t.spec.as_ref().ok().cloned(),
            pool_chosen: false,
        };
        if t.ended {
            // Ended before this maar saw it: history is Kubernetes's.
            facts.ended = true;
            self.objects.insert(key, facts);
            return;
        }
        let (ns, _) = key.split_once('/').unwrap_or(("default", &key));
        Self::ensure_project(core, ns, events);
        let mut spec = match t.spec {
            Ok(s) => s,
            Err(e) => {
                writes.push(Write::Unschedulable {
                    job: key.clone(),
                    uid: t.uid,
                    message: format!("maar cannot read this {kind}: {}: {}", e.field, e.message),
                    object: Some(owner),
                });
                self.objects.insert(key, facts);
                return;
            }
        };
        spec.project = ns.to_string();
        facts.pool_chosen = Self::fill_pool(core, &mut spec);
        // Pods of it already running (maar restarted): it runs there.
        let live: Vec<(String, maar_scheduler::input::Binding)> = self
            .owned
            .get(&key)
            .map(|o| {
                o.iter()
                    .filter(|(_, p)| p.state == PodState::Live && !p.deleted)
                    .filter_map(|(n, p)| {
                        p.node.as_ref().map(|node| {
                            (
                                n.clone(),
                                maar_scheduler::input::Binding {
                                    node: node.clone(),
                                    gpus: p.gpus.clone(),
                                },
                            )
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let again = spec.clone();
        let out = if live.is_empty() {
            Self::observe(
                core,
                Observation::JobSubmitted {
                    spec: Box::new(spec),
                },
                events,
            )
        } else {
            facts.current = live.iter().map(|(n, _)| n.clone()).collect();
            facts.made = live.iter().cloned().collect();
            Self::observe(
                core,
                Observation::JobRunning {
                    spec: Box::new(spec),
                    replicas: live.into_iter().map(|(_, b)| b).collect(),
                },
                events,
            )
        };
        match out.result {
            Ok(_) => facts.in_core = true,
            Err(e) => {
                facts.waiting = Some(again);
                writes.push(Write::Unschedulable {
                    job: key.clone(),
                    uid: t.uid,
                    message: format!("maar cannot queue this {kind}: {e}"),
                    object: Some(owner),
                })
            }
        }
        self.objects.insert(key, facts);
    }

    /// TrainJobs the core could not queue (their pool was not here) are tried again.
    pub(super) fn retry_waiting(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        for (key, f) in &mut self.objects {
            let Some(mut spec) = f.waiting.take() else {
                continue;
            };
            f.pool_chosen = Self::fill_pool(core, &mut spec);
            let again = spec.clone();
            let out = Self::observe(
                core,
                Observation::JobSubmitted {
                    spec: Box::new(spec),
                },
                events,
            );
            if out.is_ok() {
                f.in_core = true;
                self.told.remove(key);
            } else {
                f.waiting = Some(again);
            }
        }
    }

    pub(super) fn object_deleted(&mut self, core: &mut Core, key: &str, events: &mut Vec<Event>) {
        let Some(f) = self.objects.remove(key) else {
            return;
        };
        self.told.remove(key);
        if !f.in_core {
            return;
        }
        if self.pods_live(key) {
            // Its pods still run on their cards: the job holds them until the last is
            // gone (they were freed at once, and booked again beside the pods).
            self.lingering.insert(key.to_string());
            return;
        }
        let why = "its object was deleted".to_string();
        Self::gone_if(core, key, &OBJECT_LIVE, why, events);
    }

    /// Whether pods maar made for the object still run on their nodes.
    fn pods_live(&self, key: &str) -> bool {
        self.owned.get(key).is_some_and(|pods| {
            pods.values()
                .any(|p| !p.deleted && p.state == PodState::Live && p.node.is_some())
        })
    }

    /// An object's pods changed. A TrainJob ends when one of its current pods fails
    /// (or is deleted) or all of them succeed; an InferenceService's replica whose pod
    /// was deleted or failed is made again where it runs.
    pub(super) fn object_check(
        &mut self,
        core: &mut Core,
        key: &str,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        if self.lingering.contains(key) {
            // Its object deleted: the job ends with its last pod.
            if !self.pods_live(key) {
                self.lingering.remove(key);
                let why = "its object was deleted, and its last pod is gone".to_string();
                Self::gone_if(core, key, &OBJECT_LIVE, why, events);
            }
            return;
        }
        let Some(f) = self.objects.get_mut(key) else {
            return;
        };
        if !f.in_core || f.ended || f.current.is_empty() {
            return;
        }
        let running = core
            .cluster()
            .job_id(key)
            .is_ok_and(|id| core.cluster().jobs[id as usize].phase == Phase::Running);
        if !running {
            return;
        }
        let empty = BTreeMap::new();
        let pods = self.owned.get(key).unwrap_or(&empty);
        if f.owner == Owner::InferenceService {
            let lost: Vec<String> = f
                .current
                .iter()
                .filter(|n| {
                    pods.get(*n)
                        .is_some_and(|p| p.deleted || matches!(p.state, PodState::Failed { .. }))
                })
                .cloned()
                .collect();
            if lost.is_empty() {
                return;
            }
            // Made again in place only on a node that takes pods (not cordoned or
            // drained, Ready) and not in a loop (at most 3 a minute); otherwise the
            // service fails and its restart policy places it again (with back-off).
            let now = core.now();
            f.replaced.retain(|&t| t + 60 > now);
            let c = core.cluster();
            let unfit = lost.iter().find_map(|n| {
                let at = f.made.get(n)?;
                let node = c.node_id(&at.node).ok().map(|i| &c.nodes[i as usize]);
                match node {
                    Some(nd) if !nd.cordoned && nd.ready() => None,
                    _ => Some(format!(
                        "pod {n} was lost and node {} takes no pods now",
                        at.node
                    )),
                }
            });
            let looping = (f.replaced.len() + lost.len() > 3).then(|| {
                format!(
                    "its pods were lost {} times within a minute (`kubectl describe pod` says why)",
                    f.replaced.len() + lost.len()
                )
            });
            if let Some(message) = unfit.or(looping) {
                f.ended = true;
                Self::observe(
                    core,
                    Observation::JobEnded {
                        job: key.to_string(),
                        outcome: JobOutcome::Failed { message },
                    },
                    events,
                );
                return;
            }
            f.replaced.extend(std::iter::repeat_n(now, lost.len()));
            let mut again = Vec::new();
            for name in lost {
                f.current.remove(&name);
                let Some(at) = f.made.remove(&name) else {
                    continue;
                };
                let (_, svc) = key.split_once('/').unwrap_or(("default", key));
                let new = format!("{svc}-{}", f.serial);
                f.serial += 1;
                f.current.insert(new.clone());
                f.made.insert(new.clone(), at.clone());
                again.push(NewPod {
                    name: new,
                    index: f.serial - 1,
                    at,
                });
            }
            let (spec, of) = {
                let c = core.cluster();
                let Ok(id) = c.job_id(key) else { return };
                let j = &c.jobs[id as usize];
                (
                    maar_scheduler::JobSpec::clone(&j.spec),
                    j.desired_replicas as usize,
                )
            };
            Self::note(
                core,
                Severity::Warning,
                "ReplicaReplaced",
                format!("job/{key}"),
                format!(
                    "{} pod(s) deleted or failed: made again where they ran ({})",
                    again.len(),
                    again
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                events,
            );
            writes.push(Write::CreatePods {
                owner: f.owner,
                job: key.to_string(),
                uid: f.uid.clone(),
                labels: f.labels.clone(),
                spec: Box::new(spec),
                pods: again,
                of,
                answer: false,
            });
            return;
        }
        let mut outcome = None;
        let mut succeeded = 0;
        for name in &f.current {
            match pods.get(name).map(|p| (p.deleted, &p.state)) {
                // Made, not seen by the watch yet.
                None => {}
                Some((true, _)) => {
                    outcome = Some(JobOutcome::Failed {
                        message: format!("pod {name} was deleted"),
                    });
                    break;
                }
                Some((_, PodState::Failed { oom: true, message })) => {
                    outcome = Some(JobOutcome::OomKilled {
                        message: format!("pod {name}: {message}"),
                    });
                    break;
                }
                Some((
                    _,
                    PodState::Failed {
                        oom: false,
                        message,
                    },
                )) => {
                    outcome = Some(JobOutcome::Failed {
                        message: format!("pod {name}: {message}"),
                    });
                    break;
                }
                Some((_, PodState::Succeeded)) => succeeded += 1,
                Some((_, PodState::Live)) => {}
            }
        }
        if outcome.is_none() && succeeded == f.current.len() {
            outcome = Some(JobOutcome::Succeeded);
        }
        if let Some(outcome) = outcome {
            f.ended = true;
            Self::observe(
                core,
                Observation::JobEnded {
                    job: key.to_string(),
                    outcome,
                },
                events,
            );
        }
    }

    /// A job's pool when it names none (or one that does not exist here): the pool
    /// its node selector's role names, else one its rules let it on (see
    /// `Cluster::pool_for_unnamed`). Whether maar chose it (neither named nor by role):
    /// such a job may move while it waits (see [`KubeDriver::repool_stranded`]).
    pub(super) fn fill_pool(core: &Core, spec: &mut maar_scheduler::JobSpec) -> bool {
        if !spec.pool.is_empty() && core.cluster().pool_id(&spec.pool).is_some() {
            return false;
        }
        if let Some(p) = spec
            .node_selector
            .get(LABEL_ROLE)
            .filter(|r| core.cluster().pool_id(r).is_some())
        {
            spec.pool = p.clone();
            return false;
        }
        // A pool the manifest names that is not here stays (the explanation says the
        // pool is unknown).
        if !spec.pool.is_empty() {
            return false;
        }
        match core.cluster().pool_for_unnamed(spec) {
            Ok(p) => {
                spec.pool = p;
                true
            }
            Err(_) => false,
        }
    }
}
