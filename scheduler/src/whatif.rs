//! What an operator command would do, before it is done.
//!
//! [`what_if`] applies the command to a copy of the core through a copy of the driver
//! (so the scheduling cycles that follow it, and the driver's reactions, run exactly
//! as they would for real), then compares the two states: which jobs lose a placement
//! (evicted), which gain one (started), which stay Pending and why, and how quotas
//! move. The live core is not touched. Applying the same command to the live core at
//! the same moment gives the same changes ([`Preview::between`] on the real before and
//! after states is how the tests check it).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::input::{Actor, Core, Driver};
use crate::metrics::QuotaView;
use crate::model::{Dim, JobId, Phase};
use crate::{Cluster, Command};

/// A job the command would change, and why or where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobChange {
    /// `project/name`.
    pub job: String,
    /// Why it is evicted or Pending, or where it starts.
    pub reason: String,
}

/// One quota figure before and after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaChange {
    pub project: String,
    pub pool: String,
    /// The dimension (`gpu`, `gpu_memory`, `cpu`, `memory`, `disk`) and what moves.
    pub dimension: String,
    /// `used`, `reserved` or `max`.
    pub figure: String,
    pub before: String,
    pub after: String,
}

/// What a command would do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    /// The command in words.
    pub action: String,
    /// Cluster time of the preview, seconds.
    pub at_s: u64,
    /// Whether the core would accept the command.
    pub accepted: bool,
    /// What it would say, or why it would be refused (nothing changes then).
    pub message: String,
    pub evicted: Vec<JobChange>,
    pub started: Vec<JobChange>,
    /// Every job Pending afterwards, in queue order, with its reason.
    pub still_pending: Vec<JobChange>,
    pub quotas: Vec<QuotaChange>,
    /// For a submit: how the submitted job itself would fare (`starts on ...`, or
    /// why it would wait), said first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobChange>,
}

/// Applies `command` to copies of the core and the driver and says what changed.
pub fn what_if(core: &Core, driver: &dyn Driver, actor: Actor, command: Command) -> Preview {
    let mut copy = core.clone();
    let mut d = driver.fork();
    let action = command.describe();
    let submitted = match &command {
        Command::Submit(spec) => Some(spec.full_name()),
        _ => None,
    };
    let out = d.command(&mut copy, actor, command);
    let (accepted, message) = match &out.result {
        Ok(m) => (true, m.clone()),
        Err(e) => (false, e.to_string()),
    };
    let mut p = Preview::between(core.cluster(), copy.cluster());
    p.action = action;
    p.accepted = accepted;
    p.message = message.clone();
    if !accepted {
        p.refuse(message);
    }
    if let (true, Some(name)) = (accepted, submitted) {
        p.job = p
            .started
            .iter()
            .find(|c| c.job == name)
            .map(|c| JobChange {
                job: name.clone(),
                reason: format!("would start now {}", c.reason),
            })
            .or_else(|| {
                p.still_pending
                    .iter()
                    .find(|c| c.job == name)
                    .map(|c| JobChange {
                        job: name.clone(),
                        reason: format!("would wait: {}", c.reason),
                    })
            });
    }
    p
}

fn name_of(c: &Cluster, id: JobId) -> String {
    let j = &c.jobs[id as usize];
    j.spec.full_name()
}

type Slots = BTreeSet<(u32, Vec<u32>)>;

fn slots(c: &Cluster, id: JobId) -> Slots {
    c.jobs
        .get(id)
        .map(|j| {
            j.placements
                .iter()
                .map(|p| (p.node, p.gpus.iter().map(|g| g.gpu).collect()))
                .collect()
        })
        .unwrap_or_default()
}

fn where_(c: &Cluster, s: &Slots) -> String {
    s.iter()
        .map(|(n, g)| {
            let name = &c.nodes[*n as usize].name;
            if g.is_empty() {
                name.clone()
            } else {
                let g: Vec<String> = g.iter().map(|x| x.to_string()).collect();
                format!("{name}:{}", g.join(","))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Preview {
    /// The changes from `before` to `after` (the same cluster, later).
    pub fn between(before: &Cluster, after: &Cluster) -> Preview {
        let mut evicted = Vec::new();
        let mut started = Vec::new();
        let ids: BTreeSet<JobId> = before
            .jobs
            .iter()
            .chain(after.jobs.iter())
            .filter(|j| !j.placements.is_empty())
            .map(|j| j.id)
            .collect();
        for id in ids {
            let (b, a) = (slots(before, id), slots(after, id));
            if b == a {
                continue;
            }
            let name = match after.jobs.get(id) {
                Some(_) => name_of(after, id),
                None => name_of(before, id),
            };
            let lost: Slots = b.difference(&a).cloned().collect();
            let gained: Slots = a.difference(&b).cloned().collect();
            if !lost.is_empty() {
                let why = match after.jobs.get(id) {
                    Some(j) if j.phase.is_terminal() => {
                        format!("{} ({})", j.phase.name(), j.reason)
                    }
                    Some(j) if j.phase == Phase::Pending && !j.reason.is_empty() => {
                        format!("back to Pending: {}", j.reason)
                    }
                    Some(j) if j.phase == Phase::Pending => "back to Pending".to_string(),
                    Some(_) if !gained.is_empty() => "requeued, and placed again".to_string(),
                    Some(j) if j.phase == Phase::Running => format!(
                        "{} of its {} replica(s) stop; {} keep running",
                        lost.len(),
                        b.len(),
                        a.len()
                    ),
                    Some(j) => j.phase.name().to_string(),
                    None => "ended".to_string(),
                };
                evicted.push(JobChange {
                    job: name.clone(),
                    reason: format!("leaves {}: {why}", where_(before, &lost)),
                });
            }
            if !gained.is_empty() {
                started.push(JobChange {
                    job: name,
                    reason: format!("on {}", where_(after, &gained)),
                });
            }
        }
        let order: BTreeMap<JobId, usize> = after
            .queue()
            .into_iter()
            .filter(|q| !q.2)
            .enumerate()
            .map(|(i, q)| (q.0, i))
            .collect();
        let mut still_pending: Vec<(usize, JobChange)> = after
            .jobs
            .iter()
            .filter(|j| j.phase == Phase::Pending)
            .map(|j| {
                (
                    order.get(&j.id).copied().unwrap_or(usize::MAX),
                    JobChange {
                        job: name_of(after, j.id),
                        reason: if j.reason.is_empty() {
                            "waiting for the next scheduling cycle".into()
                        } else {
                            j.reason.to_string()
                        },
                    },
                )
            })
            .collect();
        still_pending.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.job.cmp(&b.1.job)));
        Preview {
            action: String::new(),
            at_s: before.now,
            accepted: true,
            message: String::new(),
            evicted,
            started,
            still_pending: still_pending.into_iter().map(|x| x.1).collect(),
            quotas: quota_changes(&before.quota_views(), &after.quota_views()),
            job: None,
        }
    }

    /// The command would be refused (`why`): nothing would change, so nothing is said
    /// to move.
    pub fn refuse(&mut self, why: String) {
        self.accepted = false;
        self.message = why;
        self.evicted.clear();
        self.started.clear();
        self.quotas.clear();
        self.job = None;
    }

    /// The preview as text, for a terminal: at most `rows` jobs per list.
    pub fn text(&self, rows: usize) -> String {
        let mut s = String::new();
        if !self.accepted {
            s.push_str(&format!(
                "{}: would be refused: {}\nnothing would change\n",
                self.action, self.message
            ));
            return s;
        }
        // What maar would answer, said as not yet done (the confirmation is still to
        // come), and for a submit the job's own fate before the lists.
        s.push_str(&format!("{}\nif done: {}\n", self.action, self.message));
        if let Some(j) = &self.job {
            s.push_str(&format!("{}: {}\n", j.job, j.reason));
        }
        let list = |s: &mut String, title: &str, v: &[JobChange]| {
            if v.is_empty() {
                s.push_str(&format!("{title}: none\n"));
                return;
            }
            s.push_str(&format!("{title} ({}):\n", v.len()));
            for c in v.iter().take(rows) {
                s.push_str(&format!("  {}  {}\n", c.job, c.reason));
            }
            if v.len() > rows {
                s.push_str(&format!("  ... and {} more\n", v.len() - rows));
            }
        };
        list(&mut s, "would evict", &self.evicted);
        list(&mut s, "would start", &self.started);
        list(&mut s, "would stay Pending", &self.still_pending);
        if self.quotas.is_empty() {
            s.push_str("quotas: unchanged\n");
        } else {
            s.push_str("quotas:\n");
            for q in &self.quotas {
                s.push_str(&format!(
                    "  {}/{} {} {}: {} -> {}\n",
                    q.project, q.pool, q.dimension, q.figure, q.before, q.after
                ));
            }
        }
        s
    }
}

fn quota_changes(before: &[QuotaView], after: &[QuotaView]) -> Vec<QuotaChange> {
    let key = |q: &QuotaView| (q.project.clone(), q.pool.clone());
    let b: BTreeMap<_, _> = before.iter().map(|q| (key(q), q)).collect();
    let mut out = Vec::new();
    for q in after {
        let Some(p) = b.get(&key(q)) else { continue };
        for d in Dim::ALL {
            let f = |v: u64| d.fmt(v);
            let used = [p.used.get(d), q.used.get(d)];
            let reserved = [p.reserved.get(d), q.reserved.get(d)];
            let max = [p.max.get(d), q.max.get(d)];
            let mut push = |figure: &str, x: String, y: String| {
                out.push(QuotaChange {
                    project: q.project.clone(),
                    pool: q.pool.clone(),
                    dimension: d.id().into(),
                    figure: figure.into(),
                    before: x,
                    after: y,
                })
            };
            if used[0] != used[1] {
                push("used", f(used[0]), f(used[1]));
            }
            if reserved[0] != reserved[1] {
                push("reserved", f(reserved[0]), f(reserved[1]));
            }
            if max[0] != max[1] {
                let m = |v: Option<u64>| v.map(f).unwrap_or_else(|| "unlimited".into());
                push("max", m(max[0]), m(max[1]));
            }
        }
    }
    out
}
