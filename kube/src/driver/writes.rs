//! The write side: the core's decisions as writes (binds with GPU indices, pods made
//! and deleted, cordons), and what waiting pods and objects are told (why, and when
//! they are expected to start), the loads asked for.

use super::*;

/// What an operator's command does in Kubernetes, once maar's core took it. Every
/// command is named (no catch-all arm): a new command is a compile error here until
/// it is said how it reaches the cluster.
#[derive(Debug, PartialEq)]
pub(super) enum InCluster {
    /// The node's `spec.unschedulable`, as `kubectl cordon` / `uncordon`.
    Cordon(String, bool),
    /// The node's `crater.ai/cordoned-gpus` annotation, rewritten whole.
    GpuCordons(String),
    /// The node's labels, as `kubectl label node`.
    Labels {
        node: String,
        set: BTreeMap<String, String>,
        remove: Vec<String>,
    },
    /// Through the core's decisions, which the driver carries out (pods deleted for a
    /// drain, a cancel, a requeue, a preemption; pods made or deleted for a scale).
    Decisions,
    /// Through maar's objects: a quota request's answer and an approved Quota are
    /// written by `answer_requests` after the command.
    Objects,
    /// maar's own books only: its queue order (priority), an autoscaler paused or
    /// resumed, an alert acknowledged. A submit never gets here (refused above).
    MaarsOwn,
}

impl KubeDriver {
    /// What an operator's command does in the cluster (exhaustive: no catch-all).
    pub(super) fn in_cluster(command: &Command) -> InCluster {
        match command {
            Command::CordonNode { node } | Command::DrainNode { node } => {
                InCluster::Cordon(node.clone(), true)
            }
            Command::UncordonNode { node } => InCluster::Cordon(node.clone(), false),
            Command::CordonGpu { node, .. } | Command::UncordonGpu { node, .. } => {
                InCluster::GpuCordons(node.clone())
            }
            Command::LabelNode { node, set, remove } => InCluster::Labels {
                node: node.clone(),
                set: set.clone(),
                remove: remove.clone(),
            },
            Command::Requeue { .. }
            | Command::Keep { .. }
            | Command::Cancel { .. }
            | Command::Scale { .. } => InCluster::Decisions,
            Command::RequestQuota { .. }
            | Command::ApproveQuota { .. }
            | Command::RejectQuota { .. } => InCluster::Objects,
            Command::SetPriority { .. }
            | Command::ResumeAutoscale { .. }
            | Command::AckAlert { .. }
            | Command::Submit(_) => InCluster::MaarsOwn,
        }
    }

    /// The write that puts a command on a node in force in the cluster, made before
    /// the core takes the command (`None`: not a command on a node): the cordon, the
    /// labels, or the node's GPU cordons as they will stand.
    pub(super) fn node_write(core: &Core, command: &Command) -> Option<Write> {
        match Self::in_cluster(command) {
            InCluster::Cordon(node, on) => Some(Write::Cordon { node, on }),
            InCluster::Labels { node, set, remove } => Some(Write::Labels { node, set, remove }),
            InCluster::GpuCordons(node) => {
                let c = core.cluster();
                let n = c.node_id(&node).ok()?;
                let mut gpus: Vec<u32> = c.nodes[n as usize]
                    .gpus
                    .iter()
                    .filter(|g| g.cordoned)
                    .map(|g| g.index)
                    .collect();
                match command {
                    Command::CordonGpu { gpu, .. } if !gpus.contains(gpu) => gpus.push(*gpu),
                    Command::UncordonGpu { gpu, .. } => gpus.retain(|g| g != gpu),
                    _ => {}
                }
                gpus.sort_unstable();
                Some(Write::GpuCordons { node, gpus })
            }
            InCluster::Decisions | InCluster::Objects | InCluster::MaarsOwn => None,
        }
    }

    /// Carries an operator command's own effect into the cluster, once the core has
    /// taken it (the decisions it caused are carried out after); `sent`: its write was
    /// made already (`node_write`), only maar's books follow.
    pub(super) fn write_effect(
        &mut self,
        core: &Core,
        effect: InCluster,
        sent: bool,
        writes: &mut Vec<Write>,
    ) {
        let mut made = Vec::new();
        match effect {
            InCluster::Cordon(node, on) => {
                if let Some(f) = self.nodes.get_mut(&node) {
                    f.cordoned = on;
                }
                made.push(Write::Cordon { node, on });
            }
            InCluster::GpuCordons(node) => self.gpu_cordons(core, node, &mut made),
            InCluster::Labels { node, set, remove } => {
                made.push(Write::Labels { node, set, remove });
            }
            InCluster::Decisions | InCluster::Objects | InCluster::MaarsOwn => {}
        }
        if !sent {
            writes.extend(made);
        }
    }

    /// Decisions as writes.
    pub(super) fn carry_out(
        &mut self,
        core: &Core,
        decisions: &[Decision],
        writes: &mut Vec<Write>,
    ) {
        for d in decisions {
            match d {
                Decision::Bind {
                    job,
                    replicas,
                    start,
                    ..
                } => {
                    // Placements Kubernetes already shows (a pod found running where
                    // it is) need no write.
                    let c = core.cluster();
                    if c.job_id(job)
                        .is_ok_and(|id| c.jobs[id as usize].placements.iter().all(|p| p.bound))
                    {
                        continue;
                    }
                    if let Some(f) = self.objects.get_mut(job) {
                        // An object's pods are made now, already on their nodes: a
                        // TrainJob's numbered by replica and start, a service's in turn.
                        let c = core.cluster();
                        let Ok(id) = c.job_id(job) else { continue };
                        let j = &c.jobs[id as usize];
                        let (_, name) = job.split_once('/').unwrap_or(("default", job));
                        // Replicas Kubernetes already runs (adopted after a restart, in
                        // the same decision as new ones) keep their pods.
                        let bound_at = |at: &maar_scheduler::input::Binding| {
                            j.placements.iter().any(|p| {
                                p.bound
                                    && c.nodes[p.node as usize].name == at.node
                                    && p.gpus.iter().map(|s| s.gpu).eq(at.gpus.iter().copied())
                            })
                        };
                        if *start {
                            f.made.retain(|_, at| bound_at(at));
                            let made = &f.made;
                            f.current.retain(|n| made.contains_key(n));
                        }
                        let mut pods = Vec::new();
                        for (i, at) in replicas.iter().enumerate() {
                            if bound_at(at) {
                                continue;
                            }
                            let (pod, index) = match f.owner {
                                Owner::TrainJob => {
                                    (crate::world::trainjob_pod_name(name, j.restarts, i), i)
                                }
                                Owner::InferenceService => {
                                    f.serial += 1;
                                    (format!("{name}-{}", f.serial - 1), f.serial - 1)
                                }
                            };
                            f.current.insert(pod.clone());
                            f.made.insert(pod.clone(), at.clone());
                            pods.push(NewPod {
                                name: pod,
                                index,
                                at: at.clone(),
                            });
                        }
                        f.ended = false;
                        if !pods.is_empty() {
                            writes.push(Write::CreatePods {
                                owner: f.owner,
                                job: job.clone(),
                                uid: f.uid.clone(),
                                labels: f.labels.clone(),
                                spec: Box::new(maar_scheduler::JobSpec::clone(&j.spec)),
                                pods,
                                of: (j.desired_replicas as usize).max(replicas.len()),
                                answer: true,
                            });
                        }
                    } else if self.pods.get(job).is_some_and(|f| f.node.is_some()) {
                        // Kubernetes has it on a node already: no second bind.
                        self.reconcile.push(job.clone());
                    } else if let Some(r) = replicas.first() {
                        writes.push(Write::Bind {
                            job: job.clone(),
                            uid: self
                                .pods
                                .get(job)
                                .map(|f| f.uid.clone())
                                .unwrap_or_default(),
                            node: r.node.clone(),
                            gpus: r.gpus.clone(),
                        });
                    }
                }
                Decision::Stop {
                    job,
                    reason,
                    replicas,
                    ..
                } => {
                    // Only pods bound in Kubernetes and still running are deleted: a
                    // bind taken back or pods that ended (kept for their logs) need
                    // nothing.
                    if let Some(f) = self.pods.get_mut(job) {
                        if f.foreign {
                            // Not maar's to stop: it leaves maar's books, not the node.
                            self.foreign_stopped.push(job.clone());
                        } else if f.bound && !f.ended {
                            f.ended = true;
                            // Said on the pod, where `kubectl describe` shows it (as
                            // kube-scheduler's `Preempted` on each victim).
                            let (ns, name) = job.split_once('/').unwrap_or(("default", job));
                            let preempted =
                                reason.starts_with("preempted") || reason.starts_with("reclaimed");
                            writes.push(Write::Note {
                                regarding: object_ref("v1", "Pod", ns, name, &f.uid),
                                warning: !preempted,
                                reason: if preempted { "Preempted" } else { "Deleted" }.into(),
                                message: format!("deleted by maar: {reason}"),
                            });
                            writes.push(Write::Delete {
                                job: job.clone(),
                                reason: reason.clone(),
                            });
                            self.deleted_own.push((job.clone(), reason.clone()));
                            let nodes = replicas
                                .iter()
                                .map(|r| r.node.clone())
                                .chain(f.node.as_ref().map(|(n, _)| n.clone()));
                            for node in nodes {
                                self.vacating
                                    .entry(node)
                                    .or_default()
                                    .insert(job.clone(), core.now());
                            }
                        }
                    } else if let Some(f) = self.objects.get_mut(job) {
                        if f.current.is_empty() {
                            continue;
                        }
                        // The pods of the replicas stopped (a service scaled down or a
                        // replica preempted); all of them when the job stops.
                        let mut gone = Vec::new();
                        for r in replicas {
                            if let Some(name) = f
                                .made
                                .iter()
                                .find(|(n, at)| *at == r && f.current.contains(*n))
                                .map(|(n, _)| n.clone())
                            {
                                f.current.remove(&name);
                                f.made.remove(&name);
                                gone.push(name);
                            }
                        }
                        // A TrainJob's pods go together: those of its current start (the
                        // failed ones of earlier starts stay for their logs). Named, so a
                        // delete never takes the pods of a start made meanwhile.
                        if f.owner == Owner::TrainJob {
                            gone.extend(std::mem::take(&mut f.current));
                            gone.sort();
                            gone.dedup();
                            f.made.clear();
                        }
                        if f.current.is_empty() {
                            f.ended = true;
                        }
                        // Pods that ended (failed, succeeded) stay for their logs.
                        let owned = self.owned.get(job);
                        gone.retain(|n| {
                            owned
                                .and_then(|o| o.get(n))
                                .is_none_or(|p| p.state == PodState::Live && !p.deleted)
                        });
                        let (ns, _) = job.split_once('/').unwrap_or(("default", job));
                        for n in &gone {
                            if let Some(node) =
                                owned.and_then(|o| o.get(n)).and_then(|p| p.node.clone())
                            {
                                self.vacating
                                    .entry(node)
                                    .or_default()
                                    .insert(format!("{ns}/{n}"), core.now());
                            }
                        }
                        if !gone.is_empty() {
                            writes.push(Write::DeletePods {
                                owner: f.owner,
                                job: job.clone(),
                                pods: gone,
                                reason: reason.clone(),
                            });
                        }
                    }
                }
            }
        }
    }

    /// Binds and pods to be made on nodes that maar's deleted pods still hold are kept
    /// back until those are gone (the kubelet would refuse them: it counts a
    /// terminating pod's devices until it is gone); kept ones whose nodes are clear go
    /// out now. One the core no longer places there (its bind taken back) is dropped.
    pub(super) fn hold_for_vacating(&mut self, core: &Core, writes: &mut Vec<Write>) {
        if self.vacating.is_empty() && self.held_writes.is_empty() {
            return;
        }
        let c = core.cluster();
        let placed_on = |job: &str, node: &str| {
            c.job_id(job).is_ok_and(|id| {
                let j = &c.jobs[id as usize];
                j.phase == Phase::Running
                    && j.placements
                        .iter()
                        .any(|p| !p.bound && c.nodes[p.node as usize].name == node)
            })
        };
        let held = std::mem::take(&mut self.held_writes);
        let fresh = std::mem::take(writes);
        for (was_held, x) in held
            .into_iter()
            .map(|x| (true, x))
            .chain(fresh.into_iter().map(|x| (false, x)))
        {
            let nodes: Vec<&str> = match &x {
                // Kept back, then taken back by the core (its bind timed out): dropped.
                Write::Bind { job, node, .. } if was_held && !placed_on(job, node) => continue,
                Write::Bind { node, .. } => vec![node.as_str()],
                // Kept back, then the job stopped or its replicas went elsewhere: the
                // pods are not made.
                Write::CreatePods { job, pods, .. }
                    if was_held
                        && !(c
                            .job_id(job)
                            .is_ok_and(|id| c.jobs[id as usize].phase == Phase::Running)
                            && self.objects.get(job).is_some_and(|f| {
                                pods.iter().all(|p| f.made.contains_key(&p.name))
                            })) =>
                {
                    continue
                }
                Write::CreatePods { pods, .. } => pods.iter().map(|p| p.at.node.as_str()).collect(),
                _ => {
                    writes.push(x);
                    continue;
                }
            };
            if nodes.iter().any(|n| self.vacating.contains_key(*n)) {
                self.held_writes.push(x);
            } else {
                writes.push(x);
            }
        }
    }

    /// Tells waiting pods why (reason changed, or [`RETELL_S`] passed), at most
    /// [`MAX_TOLD_PER_STEP`] a step (each is an explanation and two writes; the rest
    /// are told in the next steps).
    pub(super) fn tell_waiting(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let now = core.now();
        let c = core.cluster();
        let mut told = 0;
        // Explaining is the dear part (proofs on copies): pods of one shape waiting for
        // one reason share the proven fix, and a step spends at most TELL_BUDGET on it
        // (the rest are told in the next steps).
        let started = std::time::Instant::now();
        let mut fixes: HashMap<String, Option<String>> = HashMap::new();
        for j in c.pending_jobs() {
            if told >= MAX_TOLD_PER_STEP || started.elapsed() > TELL_BUDGET {
                break;
            }
            let key = format!("{}/{}", j.spec.project, j.spec.name);
            let Some((uid, object)) = self.waiting_ref(&key) else {
                continue;
            };
            // (Nor one whose federation has not decided yet: it is not a failure.)
            if j.reason.is_empty() || c.awaits_federation(j.id) {
                continue;
            }
            // A running service waiting for room to scale up: its status says so.
            if object.is_some() && j.phase != Phase::Pending {
                continue;
            }
            let stale = match self.told.get(&key) {
                None => true,
                Some((r, t)) => r.as_str() != &*j.reason || now >= t + RETELL_S,
            };
            if !stale || retry_later(&self.not_told, &key, now) {
                continue;
            }
            self.not_told.remove(&key);
            let mut message = j.reason.to_string();
            let shape = {
                let mut s = maar_scheduler::JobSpec::clone(&j.spec);
                s.name.clear();
                format!(
                    "{}\u{0}{}",
                    j.reason,
                    serde_json::to_string(&s).unwrap_or_default()
                )
            };
            let fix = match fixes.get(&shape) {
                Some(f) => f.clone(),
                None => {
                    let ex = c.explain_now(j.id);
                    // A proven fix first, else what explain says first.
                    let proven = ex.suggestions.iter().find(|s| {
                        s.contains("would start it now") || s.contains("then it starts now")
                    });
                    let fix = proven.or(ex.suggestions.first()).cloned();
                    // Only a proven fix is the same for a twin (the first suggestion
                    // may name the job's own queue position).
                    if proven.is_some() {
                        fixes.insert(shape, fix.clone());
                    }
                    fix
                }
            };
            // (Not twice: a job that can never run leads with that already.)
            if let Some(fix) = fix.filter(|f| !j.reason.contains(f.as_str())) {
                message.push_str("; ");
                message.push_str(&fix);
            }
            if let Some(f) = self.objects.get_mut(&key) {
                f.status = Some(("Pending".into(), message.clone()));
            }
            writes.push(Write::Unschedulable {
                job: key.clone(),
                uid,
                message,
                object,
            });
            self.told.insert(key, (j.reason.to_string(), now));
            told += 1;
        }
        // Objects that started, scaled or ended: their status.
        for (key, f) in &mut self.objects {
            if !f.in_core {
                continue;
            }
            let Ok(id) = c.job_id(key) else { continue };
            let j = &c.jobs[id as usize];
            // Pending is told with its reason above; Running once its pods are made.
            if j.phase == Phase::Pending
                || (j.phase == Phase::Running && j.placements.iter().any(|p| !p.bound))
            {
                continue;
            }
            let nodes: Vec<String> = j
                .placements
                .iter()
                .map(|p| c.nodes[p.node as usize].name.clone())
                .collect();
            let message = match j.phase {
                Phase::Running if f.owner == Owner::InferenceService => {
                    let running = j.running_replicas();
                    let mut m = format!(
                        "{running} of {} replicas running on {}",
                        j.desired_replicas,
                        nodes.join(", ")
                    );
                    if running < j.desired_replicas && !j.reason.is_empty() {
                        m.push_str(&format!("; the others wait: {}", j.reason));
                    }
                    m
                }
                Phase::Running => format!("running on {}", nodes.join(", ")),
                _ => j.reason.to_string(),
            };
            let status = (j.phase.name().to_string(), message);
            if retry_later(&self.not_told, key, now) {
                continue;
            }
            if f.status.as_ref() != Some(&status) {
                self.not_told.remove(key);
                f.status = Some(status.clone());
                writes.push(Write::ObjectStatus {
                    owner: f.owner,
                    job: key.clone(),
                    phase: status.0,
                    message: status.1,
                    nodes,
                });
            }
        }
    }

    /// The node's cordoned GPUs as the core now has them, written whole.
    pub(super) fn gpu_cordons(&mut self, core: &Core, node: String, writes: &mut Vec<Write>) {
        let c = core.cluster();
        let Ok(n) = c.node_id(&node) else { return };
        let gpus = c.nodes[n as usize]
            .gpus
            .iter()
            .filter(|g| g.cordoned)
            .map(|g| g.index)
            .collect::<Vec<_>>();
        // What maar writes comes back through the watch as already known.
        if let Some(f) = self.nodes.get_mut(&node) {
            f.cordoned_gpus = gpus.clone();
        }
        writes.push(Write::GpuCordons { node, gpus });
    }

    /// The uid of a waiting pod or maar object by `namespace/name`, and which object
    /// kind it is (`None`: a pod); `None` when maar does not know it.
    pub(super) fn waiting_ref(&self, key: &str) -> Option<(String, Option<Owner>)> {
        match (self.pods.get(key), self.objects.get(key)) {
            (Some(f), _) => Some((f.uid.clone(), None)),
            (None, Some(f)) => Some((f.uid.clone(), Some(f.owner))),
            (None, None) => None,
        }
    }

    /// Writes the expected starts of the latest forecast that moved (see
    /// [`start_moved`]), at most [`MAX_TOLD_PER_STEP`] a step (the rest in the next
    /// steps, unless a newer forecast came first).
    pub(super) fn tell_starts(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let now = core.now();
        let c = core.cluster();
        let keys: Vec<String> = self
            .starts
            .keys()
            .take(MAX_TOLD_PER_STEP)
            .cloned()
            .collect();
        for key in keys {
            let Some(new) = self.starts.remove(&key) else {
                continue;
            };
            // Still waiting, still the same pod or object.
            let pending = c
                .job_id(&key)
                .is_ok_and(|id| c.jobs[id as usize].phase == Phase::Pending);
            let Some((uid, object)) = self.waiting_ref(&key).filter(|_| pending) else {
                continue;
            };
            let moved = self
                .starts_told
                .get(&key)
                .is_none_or(|&told| start_moved(told, new, now));
            if !moved {
                continue;
            }
            self.starts_told.insert(key.clone(), new);
            writes.push(Write::ExpectedStart {
                job: key,
                uid,
                object,
                in_s: new.0.map(|t| t.saturating_sub(now)),
                basis: new.1,
            });
        }
    }

    /// Asks for the load of each running InferenceService that autoscales, every
    /// [`LOAD_EVERY_S`] seconds.
    pub(super) fn ask_loads(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let now = core.now();
        let c = core.cluster();
        for (key, f) in &mut self.objects {
            if f.owner != Owner::InferenceService
                || !f.in_core
                || f.load_asked.is_some_and(|t| now < t + LOAD_EVERY_S)
            {
                continue;
            }
            let Ok(id) = c.job_id(key) else { continue };
            let j = &c.jobs[id as usize];
            let autoscales = matches!(&j.spec.kind, maar_scheduler::model::JobKind::Inference(a) if a.min < a.max);
            // Once its pods are made (a replica on its way reports nothing yet).
            if j.phase != Phase::Running || !autoscales || j.placements.iter().any(|p| !p.bound) {
                continue;
            }
            f.load_asked = Some(now);
            writes.push(Write::ReadLoad {
                job: key.clone(),
                selector: f.selector.clone(),
            });
        }
    }
}
