//! Admission by quota: whether a project's quotas let a job start (or grow), with the
//! numbers behind the answer, cached per verdict key while nothing it reads changes.

use serde::Serialize;

use crate::cluster::Cluster;
use crate::model::*;
use crate::verdict::CachedVerdict;

/// The quota decision for a job, with the numbers behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QuotaVerdict {
    pub ok: bool,
    /// Admitted above the project's reserved GPUs (borrowing idle quota).
    pub borrowing: bool,
    pub message: String,
}

impl Cluster {
    /// Capacity a pool's quotas are measured against: its own plus what lenders offer.
    pub fn admission_capacity(&self, pool: PoolId) -> Resources {
        let mut cap = self.pool_capacity(pool);
        for (p, loan) in self.candidate_pools(Some(pool)) {
            if loan {
                cap.add(&self.pool_capacity(p));
            }
        }
        cap
    }

    /// Quota admission for `replicas` more replicas of job `id`.
    pub fn quota_verdict(&self, id: JobId, replicas: u32) -> QuotaVerdict {
        let j = &self.jobs[id as usize];
        self.quota_verdict_for(&j.spec, j.project, j.pool, replicas, 0)
    }

    /// The quota verdict for `replicas` of `spec` in a project and pool, with the
    /// project's max GPUs there raised by `extra_gpu_milli` (a quota request granted):
    /// the same admission the cycle makes, for specs and quotas that are not (yet)
    /// the job's.
    pub fn quota_verdict_for(
        &self,
        spec: &JobSpec,
        project: Option<ProjectId>,
        pool: Option<PoolId>,
        replicas: u32,
        extra_gpu_milli: u64,
    ) -> QuotaVerdict {
        let deny = |m: String| QuotaVerdict {
            ok: false,
            borrowing: false,
            message: m,
        };
        let (Some(pid), Some(pool)) = (project, pool) else {
            return deny(
                self.unknown_project_or_pool(&spec.project, &spec.pool)
                    .unwrap_or_else(|| format!("job {} has no project or pool", spec.name)),
            );
        };
        let project = &self.projects[pid as usize];
        let Some(q) = project.quotas.get(&pool) else {
            return deny(format!(
                "project {} has no quota in pool {}",
                project.name, self.pools[pool as usize].name
            ));
        };
        let mut raised;
        let q = if extra_gpu_milli > 0 {
            raised = q.clone();
            raised.max.gpu_milli = raised.max.gpu_milli.map(|m| m + extra_gpu_milli);
            &raised
        } else {
            q
        };
        let req = spec.replica_request().scaled(replicas as u64);
        let used = self.usage(pid, pool);
        let cap = self.admission_capacity(pool);
        // Asking more than the max of any dimension on its own: no wait ends that, and
        // the first line says so (as explain's "can never run" does), whatever another
        // dimension would say first.
        if let Some((d, max)) = over_max_alone(q, &req) {
            return deny(never_under_quota(
                d,
                req.get(d),
                max,
                &project.name,
                &self.pools[pool as usize].name,
            ));
        }
        let mut borrowing = false;
        for d in Dim::ALL {
            let r = req.get(d);
            if r == 0 {
                continue;
            }
            let new = used.get(d) + r;
            let reserved = q.reserved.get(d);
            if let Some(max) = q.max.get(d) {
                if new > max {
                    return deny(format!(
                        "quota exceeded: project {} in pool {}: {} used {} + requested {} = {} > max {} (reserved {})",
                        project.name,
                        self.pools[pool as usize].name,
                        d.name(),
                        d.fmt(used.get(d)),
                        d.fmt(r),
                        d.fmt(new),
                        d.fmt(max),
                        d.fmt(reserved)
                    ));
                }
            }
            if new > reserved {
                // Borrowing above the reserved amount may use the pool's unreserved
                // capacity only: other projects' reserved amounts are never lent, used
                // or not. Who physically holds the cards is settled by placement,
                // preemption and reclaim, not here. A request larger than the whole pool
                // is left to the node filter, which names the real shortage.
                let others: u64 = self
                    .projects
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i as ProjectId != pid)
                    .map(|(_, p)| p.quotas.get(&pool).map(|q| q.reserved.get(d)).unwrap_or(0))
                    .sum();
                if new <= cap.get(d) && others + new > cap.get(d) {
                    return deny(format!(
                        "no idle quota to borrow: pool {} has {} {}, {} of it reserved by other projects; project {} would hold {} (reserved {})",
                        self.pools[pool as usize].name,
                        d.fmt(cap.get(d)),
                        d.name(),
                        d.fmt(others),
                        project.name,
                        d.fmt(new),
                        d.fmt(reserved)
                    ));
                }
                if d == Dim::Gpu {
                    borrowing = true;
                }
            }
        }
        let gpu_used = used.gpu_milli + req.gpu_milli;
        QuotaVerdict {
            ok: true,
            borrowing,
            message: format!(
                "quota ok: project {} in pool {} would use {} GPUs (reserved {}, max {}){}",
                project.name,
                self.pools[pool as usize].name,
                Dim::Gpu.fmt(gpu_used),
                Dim::Gpu.fmt(q.reserved.gpu_milli),
                q.max
                    .gpu_milli
                    .map(|m| Dim::Gpu.fmt(m))
                    .unwrap_or_else(|| "unlimited".into()),
                if borrowing {
                    ", borrowing idle quota"
                } else {
                    ""
                }
            ),
        }
    }

    /// The quota verdict for `replicas` more replicas of a job, from the cache while
    /// nothing it reads (the project's usage, quotas, pools, capacity) has changed.
    pub(crate) fn cached_verdict(&mut self, id: JobId, replicas: u32) -> CachedVerdict {
        let j = &self.jobs[id as usize];
        let (Some(p), Some(pl)) = (j.project, j.pool) else {
            let v = self.quota_verdict(id, replicas);
            return CachedVerdict {
                admission: self.admission_gen,
                project: 0,
                ok: v.ok,
                borrowing: v.borrowing,
                message: v.message.into(),
            };
        };
        let r = j.spec.replica_request().scaled(replicas as u64);
        let key = (
            p,
            pl,
            [r.gpu_milli, r.gpu_mem, r.cpu_milli, r.memory, r.disk],
        );
        let (adm, proj) = (self.admission_gen, self.project_gen[p as usize]);
        if let Some(v) = self.verdicts.get(&key) {
            if v.admission == adm && v.project == proj {
                debug_assert_eq!(
                    *v.message,
                    *self.quota_verdict(id, replicas).message,
                    "a cached quota verdict went stale"
                );
                return v.clone();
            }
        }
        let v = self.quota_verdict(id, replicas);
        let c = CachedVerdict {
            admission: adm,
            project: proj,
            ok: v.ok,
            borrowing: v.borrowing,
            message: v.message.into(),
        };
        if self.verdicts.len() > 4096 {
            self.verdicts.clear();
        }
        self.verdicts.insert(key, c.clone());
        c
    }

    /// If the job's project now holds more than its max in the job's pool, says so.
    pub(crate) fn over_max(&self, id: JobId) -> Option<String> {
        let j = &self.jobs[id as usize];
        let (pid, pool) = (j.project?, j.pool?);
        let q = self.projects[pid as usize].quotas.get(&pool)?;
        let used = self.usage(pid, pool);
        Dim::ALL.into_iter().find_map(|d| {
            let max = q.max.get(d)?;
            (used.get(d) > max).then(|| {
                format!(
                    "quota exceeded: project {} in pool {}: {} would reach {} with this placement > max {}",
                    self.projects[pid as usize].name,
                    self.pools[pool as usize].name,
                    d.name(),
                    d.fmt(used.get(d)),
                    d.fmt(max)
                )
            })
        })
    }

    /// Whether a running job is on borrowed quota now: admitted above its project's
    /// reserved quota in its pool, and the project still holds more than reserved there.
    /// Only such a job may be reclaimed by a job within its own reserved quota; one
    /// whose project fell back within reserved (others of its jobs ended) is held as
    /// reserved work is.
    pub fn borrowing(&self, j: &crate::model::Job) -> bool {
        j.borrowed && self.above_reserved(j.id)
    }

    /// Whether the job's project holds more GPUs than reserved in its pool.
    pub(crate) fn above_reserved(&self, id: JobId) -> bool {
        let j = &self.jobs[id as usize];
        let (Some(pid), Some(pool)) = (j.project, j.pool) else {
            return false;
        };
        let reserved = self.projects[pid as usize]
            .quotas
            .get(&pool)
            .map(|q| q.reserved.gpu_milli)
            .unwrap_or(0);
        self.usage(pid, pool).gpu_milli > reserved
    }
}

/// The first dimension of which `req` alone asks more than the quota's max, and that
/// max.
pub(crate) fn over_max_alone(q: &Quota, req: &Resources) -> Option<(Dim, u64)> {
    Dim::ALL
        .into_iter()
        .find_map(|d| q.max.get(d).filter(|&m| req.get(d) > m).map(|m| (d, m)))
}

/// The first line of a job that asks more of a dimension than its project's max in
/// the pool allows with nothing else running: it can never run under that quota.
pub(crate) fn never_under_quota(d: Dim, asks: u64, max: u64, project: &str, pool: &str) -> String {
    format!(
        "can never run under its quota: it asks {} {} and project {project} may use at most {} in pool {pool}",
        d.fmt(asks),
        d.name(),
        d.fmt(max),
    )
}
