//! Pools, Quotas and QuotaRequests: pools re-evaluated when a Pool changes, a
//! namespace's quota as its Quota says, requests asked and answered.

use super::*;

impl KubeDriver {
    pub(super) fn pool_seen(
        &mut self,
        core: &mut Core,
        p: Result<PoolObject, (String, String)>,
        events: &mut Vec<Event>,
    ) {
        match p {
            Ok(p) => {
                // New, or changed (the core takes a changed one and re-homes nodes).
                let c = core.cluster();
                let lend_to = p.lend_to.iter().filter_map(|n| c.pool_id(n)).collect();
                Self::observe(
                    core,
                    Observation::PoolSeen {
                        pool: Box::new(Pool {
                            name: p.name,
                            kind: p.kind,
                            selector: p.selector,
                            overcommit: p.overcommit,
                            lend_to,
                        }),
                    },
                    events,
                );
            }
            Err((name, why)) => {
                let pool = object_ref("crater.ai/v1", "Pool", "", &name, "");
                let msg = format!(
                    "Pool {name} is not used: {why}; fix it with `kubectl edit pools.crater.ai {name}`"
                );
                self.trouble(core, events, pool, format!("pool/{name}"), "BadPool", msg);
            }
        }
    }

    /// A Pool object deleted: its nodes follow their labels again (their role's pool,
    /// made when missing), as if it had never been applied. The pool itself stays, as
    /// the pool of its role (selector `crater.ai/node-role=NAME`), so that its jobs
    /// are not lost: running ones keep running, waiting ones wait there, told why.
    pub(super) fn pool_deleted(&mut self, core: &mut Core, name: &str, events: &mut Vec<Event>) {
        self.pool_objects.remove(name);
        let c = core.cluster();
        let Some(id) = c.pool_id(name) else {
            return;
        };
        let was = &c.pools[id as usize];
        let as_role = Pool {
            name: name.to_string(),
            kind: was.kind,
            selector: BTreeMap::from([(LABEL_ROLE.to_string(), name.to_string())]),
            overcommit: Overcommit::default(),
            lend_to: Vec::new(),
        };
        if (&was.selector, &was.lend_to, was.overcommit)
            == (&as_role.selector, &as_role.lend_to, as_role.overcommit)
        {
            return; // a role's own pool: nothing was taken by the object
        }
        Self::observe(
            core,
            Observation::PoolSeen {
                pool: Box::new(as_role),
            },
            events,
        );
        // Nodes it let go whose role has no pool yet: their role's pool.
        let homeless: Vec<BTreeMap<String, String>> = core
            .cluster()
            .nodes
            .iter()
            .filter(|n| n.pool.is_none())
            .map(|n| n.labels().clone())
            .collect();
        for labels in homeless {
            Self::ensure_pool(core, &labels, events);
        }
        let pool = object_ref("crater.ai/v1", "Pool", "", name, "");
        let msg = format!(
            "Pool {name} was deleted: its nodes follow their labels again (their role's pool); pool {name} stays as the pool of role {name}, with its jobs"
        );
        self.trouble(
            core,
            events,
            pool,
            format!("pool/{name}"),
            "PoolDeleted",
            msg,
        );
        self.repool_all = true;
    }

    /// A QuotaRequest object: asked in maar once (the operator approves it there);
    /// one already answered is history.
    pub(super) fn quota_request_seen(
        &mut self,
        core: &mut Core,
        r: Result<crate::map::QuotaRequestObject, (String, String)>,
        events: &mut Vec<Event>,
        writes: &mut Vec<Write>,
    ) {
        let r = match r {
            Ok(r) => r,
            Err((key, why)) => {
                writes.push(Write::QuotaRequestStatus {
                    key,
                    phase: "Rejected".into(),
                    id: 0,
                    message: format!("maar cannot read this request: {why}"),
                });
                return;
            }
        };
        if self.requests.contains_key(&r.key)
            || matches!(r.phase.as_deref(), Some("Approved" | "Rejected"))
        {
            return;
        }
        // Asked before this maar started (its status names the request): the same one.
        Self::ensure_project(core, &r.project, events);
        // Held: what earlier inputs of this batch decided stays for the cycle.
        let out = core.apply_held(Input::Observe(Observation::QuotaAsked {
            project: r.project.clone(),
            pool: r.pool.clone(),
            gpus: r.gpus,
            reserved: r.reserved,
            reason: format!("{} (QuotaRequest {})", r.reason, r.key),
        }));
        let mut out = out;
        events.append(&mut out.events);
        match out.result {
            Ok(_) => {
                let id = core
                    .cluster()
                    .quota_requests
                    .last()
                    .map(|q| q.id)
                    .unwrap_or_default();
                self.requests.insert(r.key.clone(), (id, "Pending".into()));
                writes.push(Write::QuotaRequestStatus {
                    key: r.key,
                    phase: "Pending".into(),
                    id,
                    message: format!(
                        "request #{id} waits for an admin: maar approve {id} (or reject)"
                    ),
                });
            }
            Err(e) => writes.push(Write::QuotaRequestStatus {
                key: r.key,
                phase: "Rejected".into(),
                id: 0,
                message: e.to_string(),
            }),
        }
    }

    /// Requests answered in maar: their objects say so, and an approved one's quota is
    /// written to the project's Quota object for that pool.
    pub(super) fn answer_requests(&mut self, core: &Core, writes: &mut Vec<Write>) {
        let c = core.cluster();
        for (key, (id, told)) in &mut self.requests {
            let Some(q) = c.quota_requests.iter().find(|q| q.id == *id) else {
                continue;
            };
            let (phase, message) = match &q.status {
                maar_scheduler::model::RequestStatus::Pending => continue,
                maar_scheduler::model::RequestStatus::Approved => (
                    "Approved",
                    format!("request #{id} approved: +{} GPUs", q.gpus),
                ),
                maar_scheduler::model::RequestStatus::Rejected(why) => {
                    ("Rejected", format!("request #{id} rejected: {why}"))
                }
            };
            if told.as_str() == phase {
                continue;
            }
            *told = phase.to_string();
            writes.push(Write::QuotaRequestStatus {
                key: key.clone(),
                phase: phase.into(),
                id: *id,
                message,
            });
            if phase == "Approved" {
                let project = c.projects[q.project as usize].name.clone();
                let pool = c.pools[q.pool as usize].name.clone();
                let quota = c.projects[q.project as usize]
                    .quotas
                    .get(&q.pool)
                    .cloned()
                    .unwrap_or_default();
                // The Quota object that set this quota, else one maar makes.
                let name = self
                    .quotas
                    .iter()
                    .find(|(_, (pr, pl))| *pr == project && *pl == pool)
                    .and_then(|(k, _)| k.split_once('/').map(|(_, n)| n.to_string()))
                    .unwrap_or_else(|| format!("maar-{pool}"));
                writes.push(Write::QuotaObject {
                    project,
                    name,
                    pool,
                    reserved_gpus: quota.reserved.gpu_milli as f64 / 1000.0,
                    max_gpus: quota.max.gpu_milli.map(|m| m as f64 / 1000.0),
                });
            }
        }
    }

    /// A pool appeared or changed: what waited for it (TrainJobs, quotas) is taken
    /// now, and waiting jobs it stranded move.
    pub(super) fn pool_appeared(&mut self, core: &mut Core, events: &mut Vec<Event>) {
        self.retry_waiting(core, events);
        for (_, q) in std::mem::take(&mut self.quotas_waiting) {
            self.quota_applied(core, Ok(q), events);
        }
        self.repool_all = true;
    }

    /// Waiting jobs whose pool maar chose (they name none: a pod as users write it)
    /// and whose pool no longer has a node their lasting rules let them on (a Pool
    /// took those nodes, a node's labels or its owners' taints changed; a cordon or
    /// NotReady does not count): moved to the pool maar would choose now, where a
    /// node could run them (`Cluster::move_waiting` judges that). Without it such a
    /// pod waited for good, told that no node of its pool matched, while the node it
    /// asks for stood in another. `only`: a change to that pool's nodes alone (just
    /// its jobs are looked at).
    pub(super) fn repool_stranded(
        &mut self,
        core: &mut Core,
        events: &mut Vec<Event>,
        only: Option<maar_scheduler::model::PoolId>,
    ) {
        let c = core.cluster();
        let mut ids: Vec<maar_scheduler::model::JobId> = self
            .pods
            .iter()
            .filter(|(_, f)| f.pool_chosen && f.in_core && !f.bound && !f.ended)
            .map(|(k, _)| k)
            .chain(
                self.objects
                    .iter()
                    .filter(|(_, f)| f.pool_chosen && f.in_core && !f.ended)
                    .map(|(k, _)| k),
            )
            .filter_map(|k| c.job_id(k).ok())
            .collect();
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        ids.dedup();
        for id in c.stranded(&ids, only) {
            let c = core.cluster();
            let j = &c.jobs[id as usize];
            let mut spec = (*j.spec).clone();
            spec.pool.clear();
            Self::fill_pool(core, &mut spec);
            let c = core.cluster();
            if spec.pool.is_empty() || spec.pool == c.jobs[id as usize].spec.pool {
                continue;
            }
            // The core moves it only where a node could run it (else it stays).
            let job = c.jobs[id as usize].spec.full_name();
            Self::observe(
                core,
                Observation::JobPool {
                    job,
                    pool: spec.pool,
                },
                events,
            );
        }
    }

    pub(super) fn quota_applied(
        &mut self,
        core: &mut Core,
        q: Result<crate::map::QuotaObject, (String, String)>,
        events: &mut Vec<Event>,
    ) {
        let q = match q {
            Ok(q) => q,
            Err((key, why)) => {
                let msg = format!(
                    "Quota {key} is not used: {why}; fix it with `kubectl edit quotas.crater.ai -n {}`",
                    key.replace('/', " ")
                );
                let quota = Self::crd_ref("Quota", &key, "");
                self.trouble(core, events, quota, format!("quota/{key}"), "BadQuota", msg);
                return;
            }
        };
        if let Some(why) = &q.bad {
            let msg = format!(
                "Quota {} cannot be read ({why}): project {} may use nothing in pool {} until it is fixed (`kubectl edit quotas.crater.ai -n {}`)",
                q.key, q.project, q.pool, q.key.replace('/', " ")
            );
            let quota = Self::crd_ref("Quota", &q.key, &q.uid);
            let object = format!("quota/{}", q.key);
            self.trouble(core, events, quota, object, "BadQuota", msg);
        }
        if core.cluster().pool_id(&q.pool).is_none() {
            // Its pool is not here yet: set when it appears.
            self.quotas_waiting.insert(q.key.clone(), q);
            return;
        }
        let out = Self::observe(
            core,
            Observation::QuotaSet {
                project: q.project.clone(),
                pool: q.pool.clone(),
                quota: Some(q.quota),
            },
            events,
        );
        if out.is_ok() {
            self.quotas.insert(q.key, (q.project, q.pool));
            // The pools a project's pod may be put in follow its quotas.
            self.repool_all = true;
        }
    }

    pub(super) fn quota_deleted(&mut self, core: &mut Core, key: &str, events: &mut Vec<Event>) {
        self.quotas_waiting.remove(key);
        if let Some((project, pool)) = self.quotas.remove(key) {
            Self::observe(
                core,
                Observation::QuotaSet {
                    project,
                    pool,
                    quota: None,
                },
                events,
            );
            self.repool_all = true;
        }
    }
}
