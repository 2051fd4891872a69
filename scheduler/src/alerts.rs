//! Alerts: what needs an operator now, derived from the state (NotReady nodes, disks
//! at 90% or more, unhealthy GPUs, OOM kills folded per job, jobs Pending longer than
//! `pending_alert`), each under a stable key, and the operators' acknowledgements.
//!
//! An acknowledged alert leaves the open list; when its condition ends it moves to the
//! resolved list (the newest [`KEEP_RESOLVED`]). A new occurrence after the
//! acknowledgement (another OOM kill, the job Pending again) opens it again.

use std::collections::{BTreeMap, HashMap};

use crate::cluster::{Cluster, ClusterError};
use crate::event::Severity;
use crate::model::Phase;
use crate::quantity::fmt_duration;

/// OOM alerts close this long after the job's last OOM kill.
pub const OOM_ALERT_FOR_S: u64 = 6 * 3600;
/// Acknowledged alerts that resolved, kept for the "all" filter.
pub const KEEP_RESOLVED: usize = 100;
/// How often (cluster seconds) acknowledged alerts are checked for resolution.
const CHECK_EVERY_S: u64 = 60;

pub use crate::alertbook::{AlertAck, AlertBook, AlertView};

/// Where a node's GPU labels disagree with its cards, in words.
pub(crate) fn label_mismatch(n: &crate::model::Node) -> Option<String> {
    use crate::model::{LABEL_COUNT, LABEL_MODEL};
    let labels = n.labels();
    let count = labels.get(LABEL_COUNT);
    // The usual case, said without building anything: the model label names every
    // card, and the count label is the number of plain whole cards.
    // (As below: the label names the card's model, whatever the case.)
    let model_agrees = labels
        .get(LABEL_MODEL)
        .is_none_or(|m| n.gpus.iter().all(|g| g.model.eq_ignore_ascii_case(m)));
    let plain = n.gpus.iter().all(|g| g.resource.is_none())
        && !labels.contains_key("nvidia.com/gpu.replicas")
        && !labels.contains_key("nvidia.com/gpu.product");
    if !n.gpus.is_empty()
        && model_agrees
        && plain
        && count.is_none_or(|c| c.parse::<usize>().ok() == Some(n.gpus.len()))
    {
        return None;
    }
    label_mismatch_said(n)
}

/// [`label_mismatch`] without its quick agreement check: what it says when the labels
/// and cards may disagree.
fn label_mismatch_said(n: &crate::model::Node) -> Option<String> {
    use crate::model::{LABEL_COUNT, LABEL_MODEL};
    let labels = n.labels();
    let count = labels.get(LABEL_COUNT);
    // As written (the message quotes it); compared without case, as the scheduler
    // reads it (a node labelled `A100` whose cards are `A100` was told it lied).
    let model = labels.get(LABEL_MODEL);
    if model.is_none() && count.is_none() {
        return None;
    }
    if n.gpus.is_empty() {
        return Some(format!(
            "node {} is labelled for GPUs ({}) but has none: jobs placed by the label would find no card",
            n.name,
            [model.as_ref().map(|m| format!("{LABEL_MODEL}={m}")), count.map(|c| format!("{LABEL_COUNT}={c}"))]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(label) = &model {
        let real: std::collections::BTreeSet<&str> = n
            .gpus
            .iter()
            .map(|g| &*g.model)
            .filter(|m| !m.eq_ignore_ascii_case(label))
            .collect();
        if !real.is_empty() {
            let real: Vec<&str> = real.into_iter().collect();
            return Some(format!(
                "node {} is labelled {LABEL_MODEL}={label} but its GPUs are {}: jobs asking for {label} would run on them",
                n.name,
                real.join(", ")
            ));
        }
    }
    // Physical cards: whole cards (each advertised `nvidia.com/gpu.replicas` times when
    // time-sliced); MIG instances and renamed time-sliced replicas are parts of them.
    // Under the single MIG strategy every card is advertised as its instances: no count
    // to check.
    // Cards partitioned into MIG instances are not whole cards either.
    let single_mig = labels
        .get("nvidia.com/gpu.product")
        .is_some_and(|p| p.to_lowercase().contains("-mig-"))
        || n.gpus.iter().any(|g| {
            g.resource
                .as_deref()
                .is_some_and(|r| r.starts_with("nvidia.com/mig-"))
        });
    let per_card: usize = labels
        .get("nvidia.com/gpu.replicas")
        .and_then(|r| r.parse().ok())
        .filter(|r| *r > 1)
        .unwrap_or(1);
    let whole = n.gpus.iter().filter(|g| g.resource.is_none()).count();
    if let (Some(c), false) = (count, single_mig) {
        if whole > 0 && c.parse::<usize>().ok().map(|c| c * per_card) != Some(whole) {
            return Some(format!(
                "node {} is labelled {LABEL_COUNT}={c} but has {} GPUs",
                n.name,
                whole / per_card
            ));
        }
    }
    None
}

impl Cluster {
    /// Whether node `n`'s GPU labels agree with its cards ([`label_mismatch`] says
    /// nothing), from the cache while the node is unchanged.
    pub(crate) fn labels_agree(&self, n: crate::model::NodeId) -> bool {
        // (Every node has its slot: `add_node` pushes it.)
        crate::cluster::node_cached(self.labels_agree.get(n as usize), n, "label check", || {
            label_mismatch(&self.nodes[n as usize]).is_none()
        })
    }

    /// Every alert whose condition holds now, critical first, each marked open or
    /// acknowledged.
    pub fn alerts(&self) -> Vec<AlertView> {
        let mut v = Vec::new();
        let mut push = |key: String,
                        sev: Severity,
                        object: String,
                        message: String,
                        since: Option<u64>,
                        count: u32,
                        last: u64| {
            let ack = self.alert_book.acks.get(&key).filter(|a| a.at >= last);
            v.push(AlertView {
                cluster: String::new(),
                key,
                severity: if sev == Severity::Error {
                    "critical".into()
                } else {
                    "warning".into()
                },
                object,
                message,
                since_s: since,
                count,
                state: if ack.is_some() {
                    "acknowledged"
                } else {
                    "open"
                }
                .into(),
                acked_by: ack.map(|a| a.by.clone()),
                acked_at: ack.map(|a| a.at),
                resolved_at: None,
            });
        };
        for n in &self.nodes {
            if let crate::model::Condition::NotReady(w) = &n.condition {
                push(
                    format!("notready/{}", n.name),
                    Severity::Error,
                    format!("node/{}", n.name),
                    format!("node {} NotReady ({w})", n.name),
                    None,
                    1,
                    0,
                );
            }
            let used = n.disk_used();
            if n.disk > 0 && used * 100 / n.disk >= 90 {
                push(
                    format!("disk/{}", n.name),
                    Severity::Warning,
                    format!("node/{}", n.name),
                    format!("node {} disk {}% used", n.name, used * 100 / n.disk),
                    None,
                    1,
                    0,
                );
            }
            // The war story: a node labelled for one card that holds another (or none,
            // or another number of them).
            if let Some(wrong) = label_mismatch(n) {
                push(
                    format!("labels/{}", n.name),
                    Severity::Warning,
                    format!("node/{}", n.name),
                    wrong,
                    None,
                    1,
                    0,
                );
            }
            for g in &n.gpus {
                if let crate::model::Health::Unhealthy(w) = &g.health {
                    push(
                        format!("gpu/{}/{}", n.name, g.index),
                        Severity::Error,
                        format!("gpu/{}/{}", n.name, g.index),
                        format!("GPU {}/{} unhealthy ({w})", n.name, g.index),
                        None,
                        1,
                        0,
                    );
                }
            }
        }
        // OOM kills, one line per job with a count, for OOM_ALERT_FOR_S after its last
        // kill (while the events still hold it), whether the job restarted or failed (a
        // job lost to OOM is the one an operator most needs to see).
        let mut ooms: HashMap<&str, (u64, u64, u32)> = HashMap::new();
        for e in self.events.iter().filter(|e| e.reason == "OOMKilled") {
            let o = ooms.entry(e.object.as_str()).or_insert((e.time, e.time, 0));
            o.1 = e.time;
            o.2 += 1;
        }
        let mut ooms: Vec<_> = ooms.into_iter().collect();
        ooms.sort_by_key(|(o, (_, last, _))| (std::cmp::Reverse(*last), *o));
        for (object, (first, last, count)) in ooms {
            let name = object.trim_start_matches("job/");
            if self.now.saturating_sub(last) > OOM_ALERT_FOR_S {
                continue;
            }
            // A job that recovered and ended well, or was cancelled, needs no one.
            let phase = self
                .job_id(name)
                .ok()
                .and_then(|id| self.jobs.get(id))
                .map(|j| j.phase);
            if matches!(phase, Some(Phase::Succeeded | Phase::Cancelled)) {
                continue;
            }
            let ended = match phase {
                Some(Phase::Failed) => "; it ended Failed",
                _ => "",
            };
            let times = if count == 1 {
                "once".to_string()
            } else {
                format!("{count} times")
            };
            push(
                format!("oom/{name}"),
                Severity::Warning,
                object.to_string(),
                format!(
                    "{name} OOM-killed {times}, last at {}{ended}",
                    fmt_duration(last)
                ),
                Some(first),
                count,
                last,
            );
        }
        let threshold = self.config.pending_alert_s.max(1);
        for j in self.jobs.iter().filter(|j| j.phase == Phase::Pending) {
            let wait = self.now.saturating_sub(j.queued_since);
            if wait >= threshold {
                let name = j.spec.full_name();
                push(
                    format!("pending/{name}"),
                    Severity::Warning,
                    format!("job/{name}"),
                    format!("{name} Pending for {}", fmt_duration(wait)),
                    Some(j.queued_since),
                    1,
                    j.queued_since,
                );
            }
        }
        v.sort_by_key(|a| (a.severity != "critical", a.state != "open"));
        v
    }

    /// The acknowledged alerts that have since resolved, newest first.
    pub fn resolved_alerts(&self) -> Vec<AlertView> {
        self.alert_book.resolved.iter().rev().cloned().collect()
    }

    /// Acknowledges an open alert by its key.
    pub(crate) fn ack_alert(&mut self, key: &str, by: &str) -> Result<String, ClusterError> {
        let all = self.alerts();
        let Some(a) = all.iter().find(|a| a.key == key) else {
            let open: Vec<&str> = all.iter().take(5).map(|a| a.key.as_str()).collect();
            return Err(ClusterError::Invalid(format!(
                "no open alert `{key}`{}",
                if open.is_empty() {
                    " (there are none)".to_string()
                } else {
                    format!(" (open: {})", open.join(", "))
                }
            )));
        };
        if a.state == "acknowledged" {
            return Err(ClusterError::Invalid(format!(
                "alert `{key}` was already acknowledged by {}",
                a.acked_by.clone().unwrap_or_default()
            )));
        }
        let msg = format!("alert {key} acknowledged: {}", a.message);
        self.alert_book.acks.insert(
            key.to_string(),
            AlertAck {
                by: by.to_string(),
                at: self.now,
                severity: a.severity.clone(),
                object: a.object.clone(),
                message: a.message.clone(),
            },
        );
        self.emit(
            Severity::Normal,
            "AlertAcknowledged",
            format!("alert/{key}"),
            format!("{msg} (by {by})"),
        );
        Ok(msg)
    }

    /// Moves acknowledgements of alerts no longer holding to the resolved list (at most
    /// once a simulated minute; nothing to do without acknowledgements).
    pub(crate) fn settle_alerts(&mut self) {
        if self.alert_book.acks.is_empty() || self.now < self.alert_book.checked + CHECK_EVERY_S {
            return;
        }
        self.alert_book.checked = self.now;
        let live: BTreeMap<String, AlertView> = self
            .alerts()
            .into_iter()
            .map(|a| (a.key.clone(), a))
            .collect();
        let gone: Vec<String> = self
            .alert_book
            .acks
            .keys()
            .filter(|k| !live.contains_key(*k))
            .cloned()
            .collect();
        for k in gone {
            let ack = self.alert_book.acks.remove(&k).expect("listed");
            self.alert_book.resolved.push_back(AlertView {
                cluster: String::new(),
                key: k,
                severity: ack.severity,
                object: ack.object,
                message: ack.message,
                since_s: None,
                count: 1,
                state: "resolved".into(),
                acked_by: Some(ack.by),
                acked_at: Some(ack.at),
                resolved_at: Some(self.now),
            });
            while self.alert_book.resolved.len() > KEEP_RESOLVED {
                self.alert_book.resolved.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gpu, Node, LABEL_COUNT, LABEL_MODEL};

    /// The quick agreement check never hides what the full comparison says: over
    /// labels and cards that agree, differ in case, differ in model or count, carry
    /// time-slicing replicas or MIG instances, or are missing.
    #[test]
    fn the_quick_check_says_what_the_full_one_says() {
        let mut nodes = 0;
        for label in [None, Some("a100"), Some("A100"), Some("h100"), Some("ä100")] {
            for cards in [
                vec!["a100", "a100"],
                vec!["A100", "A100"],
                vec!["a100", "h100"],
                vec![],
            ] {
                for count in [None, Some("2"), Some("4"), Some("x")] {
                    for extra in [None, Some(("nvidia.com/gpu.replicas", "2"))] {
                        for mig in [false, true] {
                            let mut labels = std::collections::BTreeMap::new();
                            if let Some(m) = label {
                                labels.insert(LABEL_MODEL.to_string(), m.to_string());
                            }
                            if let Some(c) = count {
                                labels.insert(LABEL_COUNT.to_string(), c.to_string());
                            }
                            if let Some((k, v)) = extra {
                                labels.insert(k.to_string(), v.to_string());
                            }
                            let gpus = cards
                                .iter()
                                .enumerate()
                                .map(|(i, m)| {
                                    let mut g =
                                        Gpu::new(i as u32, format!("u{i}"), *m, 80 << 30, false);
                                    if mig {
                                        g.resource = Some("nvidia.com/mig-1g.10gb".into());
                                    }
                                    g
                                })
                                .collect();
                            let n = Node::new("n", labels, 1000, 1 << 30, 0, gpus);
                            assert_eq!(
                                label_mismatch(&n),
                                label_mismatch_said(&n),
                                "{label:?} {cards:?} {count:?} {extra:?} mig {mig}"
                            );
                            nodes += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(nodes, 320);
        // And the quick check does answer the usual node.
        let mut labels = std::collections::BTreeMap::new();
        labels.insert(LABEL_MODEL.to_string(), "a100".to_string());
        labels.insert(LABEL_COUNT.to_string(), "1".to_string());
        let n = Node::new(
            "n",
            labels,
            1000,
            1 << 30,
            0,
            vec![Gpu::new(0, "u", "a100", 1, false)],
        );
        assert_eq!(label_mismatch(&n), None);
    }

    /// A Kubernetes node labelled `crater.ai/gpu-model: A100` has cards of the label's
    /// own words: no alert (each of 1,000 such nodes was told its cards were A100, not
    /// a100). A label that names another model is still told, as written.
    #[test]
    fn a_model_label_agrees_with_its_cards_whatever_the_case() {
        let node = |label: &str, card: &str| {
            let mut labels = std::collections::BTreeMap::new();
            labels.insert(LABEL_MODEL.to_string(), label.to_string());
            labels.insert(LABEL_COUNT.to_string(), "2".to_string());
            let gpus = (0..2)
                .map(|i| Gpu::new(i, format!("u{i}"), card, 80 << 30, false))
                .collect();
            Node::new("n", labels, 1000, 1 << 30, 0, gpus)
        };
        for (label, card) in [("A100", "A100"), ("A100", "a100"), ("a100", "A100")] {
            let n = node(label, card);
            assert_eq!(label_mismatch_said(&n), None, "{label} on {card}");
            assert_eq!(label_mismatch(&n), None, "{label} on {card}");
        }
        let said = label_mismatch(&node("A100", "h100")).expect("told");
        assert!(
            said.contains("labelled crater.ai/gpu-model=A100 but its GPUs are h100"),
            "{said}"
        );
    }
}
