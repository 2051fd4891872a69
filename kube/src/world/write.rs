//! The writes maar makes (binds, status, deletions, notes, annotations), at most
//! [`MAX_WRITES`] at once, their outcome sent back on the driver's channel.

use super::events::{object_ref, pod_ref, split, EventType, Events, Scheduled, MAX_QUEUED_EVENTS};
use super::seen::Seen;
use std::collections::BTreeMap;
use std::sync::mpsc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node as KNode, ObjectReference, Pod as KPod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::Client;
use serde_json::json;

use crate::map::{self, Owner, ANNOTATION_GPUS};

/// Writes in flight at most.
pub const MAX_WRITES: usize = 64;
/// A pod's Binding (the `binding` subresource), with the cards as an annotation (the
/// API server merges the binding's annotations into the pod).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct BindingBody<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: BindingMeta<'a>,
    target: BindingTarget<'a>,
}

#[derive(serde::Serialize)]
struct BindingMeta<'a> {
    name: &'a str,
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<&'static str, String>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct BindingTarget<'a> {
    api_version: &'static str,
    kind: &'static str,
    name: &'a str,
}

/// A write maar makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Bind pod `job` (`namespace/name`, `uid`) to `node`, on cards `gpus`.
    Bind {
        job: String,
        uid: String,
        node: String,
        gpus: Vec<u32>,
    },
    /// Pod (or maar's object `object`) `job` cannot be placed now: `message` (maar's
    /// explanation).
    Unschedulable {
        job: String,
        uid: String,
        message: String,
        object: Option<Owner>,
    },
    /// Create pods of `owner` `job` (`uid`), bound to their nodes (all or none);
    /// answered as a bind.
    CreatePods {
        owner: Owner,
        job: String,
        uid: String,
        /// The object's labels, which its pods carry.
        labels: BTreeMap<String, String>,
        spec: Box<maar_scheduler::JobSpec>,
        pods: Vec<NewPod>,
        /// How many replicas the job has in all (`MAAR_REPLICAS`).
        of: usize,
        /// Answered as a bind (new placements); else pods made again where the job
        /// already runs (a replica's pod was deleted), whose failure is trouble.
        answer: bool,
    },
    /// Create maar's object `job` (`namespace/name`) of `kind` (`plural`) as a user's
    /// file gave it (a submit, a dispatch among clusters); its failure is trouble.
    CreateObject {
        job: String,
        kind: String,
        plural: String,
        object: serde_json::Value,
    },
    /// Delete pods of `owner` `job`, those named (each by name: a delete never takes a
    /// pod made after it was decided).
    DeletePods {
        owner: Owner,
        job: String,
        pods: Vec<String>,
        reason: String,
    },
    /// Read the load of InferenceService `job`: the external metric
    /// `crater_gpu_memory_usage_rate` over the series `selector` picks (what an HPA
    /// reads); answered with [`Seen::Load`].
    ReadLoad { job: String, selector: String },
    /// A QuotaRequest's status: `phase` (Pending, Approved, Rejected), maar's request
    /// number and what it says.
    QuotaRequestStatus {
        key: String,
        phase: String,
        id: u32,
        message: String,
    },
    /// A project's quota in a pool as maar holds it now (an approved request): written
    /// to the Quota object `name` in the project's namespace (made when there is none).
    QuotaObject {
        project: String,
        name: String,
        pool: String,
        reserved_gpus: f64,
        max_gpus: Option<f64>,
    },
    /// A TrainJob's or InferenceService's status: `phase` (Pending, Running,
    /// Succeeded, Failed, Cancelled), why, its nodes and replicas running.
    ObjectStatus {
        owner: Owner,
        job: String,
        phase: String,
        message: String,
        nodes: Vec<String>,
    },
    /// A waiting pod's (or maar's object's) expected start: in `in_s` seconds from
    /// now (`None`: not known, or never), on `basis` (`estimate`, `history`, `never`,
    /// `unknown`). A pod's annotations [`map::ANNOTATION_EXPECTED_START`] (UTC,
    /// RFC 3339; removed when not known) and [`map::ANNOTATION_EXPECTED_BASIS`]; an
    /// object's `status.expectedStart` and `status.expectedStartBasis`.
    ExpectedStart {
        job: String,
        uid: String,
        object: Option<Owner>,
        in_s: Option<u64>,
        basis: &'static str,
    },
    /// Delete pod `job` (preempted, drained, cancelled by an operator): `reason`.
    Delete { job: String, reason: String },
    /// Cordon (`on`) or uncordon a node: `spec.unschedulable`, as `kubectl cordon`.
    Cordon { node: String, on: bool },
    /// Set and remove labels of a node, as `kubectl label node` does.
    Labels {
        node: String,
        set: BTreeMap<String, String>,
        remove: Vec<String>,
    },
    /// The node's cordoned GPUs, all of them (its `crater.ai/cordoned-gpus`
    /// annotation; removed when empty).
    GpuCordons { node: String, gpus: Vec<u32> },
    /// An event of maar's own about an object (a Quota or Pool it cannot use, an
    /// edited TrainJob, its Lease when it has trouble with the API server).
    Note {
        regarding: ObjectReference,
        warning: bool,
        reason: String,
        message: String,
    },
}

/// One pod to make: its name, its replica number and where it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct NewPod {
    pub name: String,
    pub index: usize,
    pub at: maar_scheduler::input::Binding,
}

/// How many writes the writer keeps in flight, and how many `Scheduled` events wait.
#[derive(Clone, Copy, Debug)]
pub struct WriterLimits {
    pub in_flight: usize,
    pub queued_events: usize,
}

impl Default for WriterLimits {
    fn default() -> Self {
        WriterLimits {
            in_flight: MAX_WRITES,
            queued_events: MAX_QUEUED_EVENTS,
        }
    }
}

/// Carries out writes, all in this one task (a task a write cost more in hand-offs
/// than the write itself): the writes waiting first, then bound pods' `Scheduled`
/// events (see the module's notes).
pub async fn writer(
    client: Client,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Write>,
    tx: mpsc::Sender<Seen>,
    limits: WriterLimits,
    leader: std::sync::Arc<crate::lease::Leadership>,
) {
    type Running<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = Option<Scheduled>> + Send + 'a>>;
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "maar".into());
    let recorder = Events::new(client.clone(), &host);
    let (client, recorder, tx, leader) = (&client, &recorder, &tx, &*leader);
    let mut running: futures::stream::FuturesUnordered<Running<'_>> =
        futures::stream::FuturesUnordered::new();
    let mut events: std::collections::VecDeque<Scheduled> = Default::default();
    let mut dropped = 0u64;
    let mut open = true;
    let in_flight = limits.in_flight.max(1);
    loop {
        // Writes first; an event only when no write waits.
        while running.len() < in_flight {
            if open {
                match rx.try_recv() {
                    Ok(w) if !leader.held() => {
                        not_leading(tx, w);
                        continue;
                    }
                    Ok(w) => {
                        running.push(Box::pin(write_one(client, recorder, tx, w)));
                        continue;
                    }
                    Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => open = false,
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {}
                }
            }
            if !leader.held() {
                // A maar that lost the lease (or was paused past its life) tells
                // nothing of what it did while it led.
                dropped += events.len() as u64;
                events.clear();
            }
            let Some(e) = events.pop_front() else {
                break;
            };
            running.push(Box::pin(async move {
                e.publish(recorder).await;
                None
            }));
        }
        if events.is_empty() && dropped > 0 {
            let _ = tx.send(Seen::EventsDropped(dropped));
            dropped = 0;
        }
        if !open && running.is_empty() {
            break;
        }
        tokio::select! {
            w = rx.recv(), if open && running.len() < in_flight => match w {
                Some(w) if !leader.held() => not_leading(tx, w),
                Some(w) => running.push(Box::pin(write_one(client, recorder, tx, w))),
                None => open = false,
            },
            Some(done) = running.next(), if !running.is_empty() => {
                if let Some(e) = done {
                    if events.len() < limits.queued_events {
                        events.push_back(e);
                    } else {
                        dropped += 1;
                    }
                }
            }
        }
    }
}

/// A write not made: this maar does not lead now (it lost the lease, or was paused
/// past the lease's life and has not renewed it since). A bind is told as failed, so
/// the job is not taken as placed; the rest is dropped (the maar that leads writes
/// its own).
fn not_leading(tx: &mpsc::Sender<Seen>, w: Write) {
    let why = "not written: this maar does not hold the scheduling lease now".to_string();
    match w {
        Write::Bind { job, .. }
        | Write::CreatePods {
            job, answer: true, ..
        } => {
            let _ = tx.send(Seen::Bound {
                job,
                result: Err(why),
            });
        }
        _ => {}
    }
}

/// One write, its answer sent back when the driver waits for one. A bind done returns
/// its `Scheduled` event, to be written later.
async fn write_one(
    client: &Client,
    recorder: &Events,
    tx: &mpsc::Sender<Seen>,
    w: Write,
) -> Option<Scheduled> {
    use futures::FutureExt;
    // All writes share one task: one that panics is told (a bind as failed, so that
    // the job goes back to the queue) and the others go on.
    let (bind, what) = match &w {
        Write::Bind { job, .. } => (Some(job.clone()), None),
        w => (None, Some(describe(w))),
    };
    match std::panic::AssertUnwindSafe(write_inner(client, recorder, tx, w))
        .catch_unwind()
        .await
    {
        Ok(e) => e,
        Err(_) => {
            let what =
                what.unwrap_or_else(|| format!("binding pod {}", bind.as_deref().unwrap_or("?")));
            let why = format!("{what}: the write failed inside maar (a bug: please report it)");
            tracing::error!(target: "maar::kube", "{why}");
            let _ = tx.send(match bind {
                Some(job) => Seen::Bound {
                    job,
                    result: Err(why),
                },
                None => Seen::Trouble(why),
            });
            None
        }
    }
}

async fn write_inner(
    client: &Client,
    recorder: &Events,
    tx: &mpsc::Sender<Seen>,
    w: Write,
) -> Option<Scheduled> {
    if let Write::ReadLoad { job, selector } = &w {
        let _ = tx.send(read_load(client, job, selector).await);
        return None;
    }
    if let Write::Bind {
        job,
        uid,
        node,
        gpus,
    } = w
    {
        let result = bind(client, &job, &uid, &node, &gpus).await;
        let ok = result.is_ok();
        let _ = tx.send(Seen::Bound {
            job: job.clone(),
            result,
        });
        return ok.then_some(Scheduled { job, uid, node });
    }
    // Boxed: thousands of binds in flight do not each carry the largest write's state.
    let out = Box::pin(carry_out(client, recorder, &w)).await;
    let msg = match (&w, out) {
        (
            Write::CreatePods {
                job, answer: true, ..
            },
            result,
        ) => Seen::Bound {
            job: job.clone(),
            result,
        },
        (_, Ok(())) => return None,
        (w, Err(e)) => {
            // A waiting pod's reason or an object's status not written: told again.
            if let Write::Unschedulable { job, .. } | Write::ObjectStatus { job, .. } = w {
                let _ = tx.send(Seen::NotTold { job: job.clone() });
            }
            if let Write::ExpectedStart { job, .. } = w {
                let _ = tx.send(Seen::StartNotTold { job: job.clone() });
            }
            Seen::Trouble(format!("{}: {e}", describe(w)))
        }
    };
    let _ = tx.send(msg);
    None
}

/// Carries out a ReadLoad: the answer goes back as [`Seen::Load`].
async fn read_load(client: &Client, job: &str, selector: &str) -> Seen {
    let (ns, _) = split(job);
    let value = external_metric(client, ns, maar_scheduler::manifest::USAGE_METRIC, selector)
        .await
        .map(|v| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64));
    Seen::Load {
        job: job.to_string(),
        value,
    }
}

/// The values of an external metric's series in namespace `ns` that `selector`
/// picks, from the external metrics API (`external.metrics.k8s.io/v1beta1`, served by
/// an adapter such as prometheus-adapter), as an HPA reads them.
pub async fn external_metric(
    client: &Client,
    ns: &str,
    metric: &str,
    selector: &str,
) -> Result<Vec<f64>, String> {
    let url = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector={}",
        form_urlencoded::byte_serialize(selector.as_bytes()).collect::<String>()
    );
    let req = http::Request::get(url)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let list: serde_json::Value = match client.request(req).await {
        Ok(v) => v,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return Err(format!(
                "the external metrics API does not serve {metric} (404): install a metrics adapter that serves it (such as prometheus-adapter, as an HPA on this metric needs too)"
            ))
        }
        Err(e) => return Err(e.to_string()),
    };
    let items = list
        .get("items")
        .and_then(|i| i.as_array())
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for i in items {
        let q = i.get("value").and_then(|v| v.as_str()).unwrap_or("");
        out.push(metric_value(q).ok_or_else(|| format!("{metric}: `{q}` is not a quantity"))?);
    }
    Ok(out)
}

/// A metric's value as the API gives it (a quantity: `70`, `70500m`, `0.7`).
fn metric_value(q: &str) -> Option<f64> {
    let q = q.trim();
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<f64>().ok().map(|v| v / 1000.0);
    }
    if let Some(k) = q.strip_suffix('k') {
        return k.parse::<f64>().ok().map(|v| v * 1000.0);
    }
    q.parse::<f64>().ok()
}

pub fn describe(w: &Write) -> String {
    match w {
        Write::Bind { job, node, .. } => format!("binding pod {job} to {node}"),
        Write::Unschedulable { job, .. } => format!("marking {job} unschedulable"),
        Write::CreatePods { owner, job, .. } => {
            format!("creating the pods of {} {job}", owner.kind())
        }
        Write::DeletePods { owner, job, .. } => {
            format!("deleting the pods of {} {job}", owner.kind())
        }
        Write::ReadLoad { job, .. } => format!("reading the load of InferenceService {job}"),
        Write::ExpectedStart { job, .. } => format!("writing the expected start of {job}"),
        Write::ObjectStatus { owner, job, .. } => {
            format!("writing the status of {} {job}", owner.kind())
        }
        Write::QuotaRequestStatus { key, .. } => format!("answering QuotaRequest {key}"),
        Write::QuotaObject { project, name, .. } => format!("writing Quota {project}/{name}"),
        Write::CreateObject { job, kind, .. } => format!("creating {kind} {job}"),
        Write::Delete { job, .. } => format!("deleting pod {job}"),
        Write::Labels { node, .. } => format!("labelling node {node}"),
        Write::Cordon { node, on: true } => format!("cordoning node {node}"),
        Write::Cordon { node, on: false } => format!("uncordoning node {node}"),
        Write::GpuCordons { node, .. } => format!("writing the GPU cordons of node {node}"),
        Write::Note {
            regarding, reason, ..
        } => format!(
            "writing event {reason} on {} {}",
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default()
        ),
    }
}

/// The name of replica `i`'s pod of TrainJob `name`, on its `attempt`th start (a
/// restart makes new pods; the failed ones stay for their logs).
pub fn trainjob_pod_name(name: &str, attempt: u32, i: usize) -> String {
    if attempt == 0 {
        format!("{name}-{i}")
    } else {
        format!("{name}-r{attempt}-{i}")
    }
}

/// Makes one of maar's objects (a TrainJob, an InferenceService) in `job`'s namespace,
/// as given.
pub async fn create_object(
    client: &Client,
    job: &str,
    kind: &str,
    plural: &str,
    object: &serde_json::Value,
) -> Result<(), String> {
    let (ns, _) = split(job);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &map::crd(kind, plural));
    let obj: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    api.create(&crate::post_params(), &obj)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Binds pod `job` (`namespace/name`, `uid`) to `node` on cards `gpus`.
async fn bind(
    client: &Client,
    job: &str,
    uid: &str,
    node: &str,
    gpus: &[u32],
) -> Result<(), String> {
    let (ns, name) = split(job);
    // One request: the API server sets the node and merges the binding's
    // annotations (the cards) into the pod together; the uid makes sure the pod
    // bound is the one maar saw, not another of the same name.
    let binding = BindingBody {
        api_version: "v1",
        kind: "Binding",
        metadata: BindingMeta {
            name,
            namespace: ns,
            uid,
            annotations: (!gpus.is_empty()).then(|| {
                let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
                BTreeMap::from([(ANNOTATION_GPUS, list.join(","))])
            }),
        },
        target: BindingTarget {
            api_version: "v1",
            kind: "Node",
            name: node,
        },
    };
    let body = serde_json::to_vec(&binding).map_err(|e| e.to_string())?;
    let req = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/pods"))
        .create_subresource("binding", name, &crate::post_params(), body)
        .map_err(|e| e.to_string())?;
    // The answer (a Status) is not parsed: an error is.
    client.request_text(req).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// One write against the API server.
pub async fn carry_out(client: &Client, recorder: &Events, w: &Write) -> Result<(), String> {
    match w {
        Write::Note {
            regarding,
            warning,
            reason,
            message,
        } => recorder
            .publish(
                if *warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason,
                "Scheduling",
                message,
                regarding,
            )
            .await
            .map_err(|e| e.to_string()),
        Write::Bind {
            job,
            uid,
            node,
            gpus,
        } => {
            bind(client, job, uid, node, gpus).await?;
            Scheduled {
                job: job.clone(),
                uid: uid.clone(),
                node: node.clone(),
            }
            .publish(recorder)
            .await;
            Ok(())
        }
        Write::Unschedulable {
            job,
            uid,
            message,
            object,
        } => {
            let (ns, name) = split(job);
            let reference = if let Some(owner) = object {
                // The object's status says it; its pods do not exist yet.
                let api: Api<DynamicObject> = Api::namespaced_with(
                    client.clone(),
                    ns,
                    &map::crd(owner.kind(), owner.plural()),
                );
                let status = json!({"status": {"phase": "Pending", "message": message}});
                api.patch_status(name, &crate::patch_params(), &Patch::Merge(&status))
                    .await
                    .map_err(|e| e.to_string())?;
                object_ref("crater.ai/v1", owner.kind(), ns, name, uid)
            } else {
                let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
                let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                let status = json!({"status": {"conditions": [{
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now,
                }]}});
                pods.patch_status(name, &crate::patch_params(), &Patch::Strategic(&status))
                    .await
                    .map_err(|e| e.to_string())?;
                pod_ref(ns, name, uid)
            };
            recorder
                .publish(
                    EventType::Warning,
                    "FailedScheduling",
                    "Scheduling",
                    message,
                    &reference,
                )
                .await
                .map_err(|e| e.to_string())
        }
        Write::CreatePods {
            owner,
            job,
            uid,
            labels,
            spec,
            pods: new,
            of,
            ..
        } => {
            let (ns, name) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            let n = new.len();
            let mut made: Vec<&str> = Vec::new();
            for p in new {
                let body = map::owned_pod(
                    *owner, spec, ns, uid, labels, &p.name, p.index, *of, &p.at.node, &p.at.gpus,
                );
                let pod: KPod = serde_json::from_value(body).map_err(|e| e.to_string())?;
                match pods.create(&crate::post_params(), &pod).await {
                    Ok(_) => made.push(&p.name),
                    Err(e) => {
                        // All or nothing: the ones made go.
                        for m in &made {
                            let _ = pods.delete(m, &DeleteParams::default()).await;
                        }
                        return Err(format!("creating pod {}: {e}", p.name));
                    }
                }
            }
            let nodes: Vec<&str> = new.iter().map(|p| p.at.node.as_str()).collect();
            let note = format!("{n} pod(s) created on {}", nodes.join(", "));
            let _ = recorder
                .publish(
                    EventType::Normal,
                    "Scheduled",
                    "Binding",
                    &note,
                    &object_ref("crater.ai/v1", owner.kind(), ns, name, uid),
                )
                .await;
            Ok(())
        }
        Write::DeletePods {
            owner,
            job,
            pods: named,
            reason,
        } => {
            let (ns, _) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            for p in named {
                match pods.delete(p, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(format!("pod {p}: {e}")),
                }
            }
            tracing::info!(target: "maar::kube", "pods of {} {job} deleted: {reason}", owner.kind());
            Ok(())
        }
        // Answered by the writer itself.
        Write::ReadLoad { .. } => Ok(()),
        Write::QuotaRequestStatus {
            key,
            phase,
            id,
            message,
        } => {
            let (ns, name) = split(key);
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                ns,
                &map::crd("QuotaRequest", "quotarequests"),
            );
            let status = json!({"status": {"phase": phase, "request": id, "message": message}});
            match api
                .patch_status(name, &crate::patch_params(), &Patch::Merge(&status))
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Write::CreateObject {
            job,
            kind,
            plural,
            object,
        } => create_object(client, job, kind, plural, object).await,
        Write::QuotaObject {
            project,
            name,
            pool,
            reserved_gpus,
            max_gpus,
        } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), project, &map::crd("Quota", "quotas"));
            let mut spec = json!({"pool": pool, "reserved": {"gpu": reserved_gpus}});
            spec["max"] = match max_gpus {
                Some(m) => json!({"gpu": m}),
                None => json!({}),
            };
            let obj = json!({
                "apiVersion": "crater.ai/v1",
                "kind": "Quota",
                "metadata": {"name": name, "namespace": project},
                "spec": spec,
            });
            // Server-side apply: made when absent, its GPU fields set when present.
            api.patch(
                name,
                &PatchParams::apply("maar").force(),
                &Patch::Apply(&obj),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
        }
        Write::ObjectStatus {
            owner,
            job,
            phase,
            message,
            nodes,
        } => {
            let (ns, name) = split(job);
            let tjs: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), ns, &map::crd(owner.kind(), owner.plural()));
            let mut status =
                json!({"status": {"phase": phase, "message": message, "nodes": nodes}});
            if *owner == Owner::InferenceService {
                status["status"]["replicas"] = json!(nodes.len());
            }
            match tjs
                .patch_status(name, &crate::patch_params(), &Patch::Merge(&status))
                .await
            {
                Ok(_) => Ok(()),
                // Deleted meanwhile.
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Write::ExpectedStart {
            job,
            uid,
            object,
            in_s,
            basis,
        } => {
            let (ns, name) = split(job);
            let at = in_s.map(|s| {
                (chrono::Utc::now() + chrono::Duration::seconds(s.min(i64::MAX as u64) as i64))
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            });
            let out = match object {
                Some(owner) => {
                    let api: Api<DynamicObject> = Api::namespaced_with(
                        client.clone(),
                        ns,
                        &map::crd(owner.kind(), owner.plural()),
                    );
                    let status = json!({
                        "metadata": {"uid": uid},
                        "status": {"expectedStart": at, "expectedStartBasis": basis},
                    });
                    api.patch_status(name, &crate::patch_params(), &Patch::Merge(&status))
                        .await
                        .map(|_| ())
                }
                None => {
                    let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
                    // The uid makes it a precondition: a pod made again under the same
                    // name is not told another's start.
                    let patch = json!({"metadata": {"uid": uid, "annotations": {
                        (map::ANNOTATION_EXPECTED_START): at,
                        (map::ANNOTATION_EXPECTED_BASIS): basis,
                    }}});
                    pods.patch(name, &crate::patch_params(), &Patch::Merge(&patch))
                        .await
                        .map(|_| ())
                }
            };
            match out {
                Ok(_) => Ok(()),
                // Deleted meanwhile (or made again: not this one).
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        Write::Delete { job, reason } => {
            let (ns, name) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            match pods.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
            tracing::info!(target: "maar::kube", "pod {job} deleted: {reason}");
            Ok(())
        }
        Write::Cordon { node, on } => {
            let nodes: Api<KNode> = Api::all(client.clone());
            let patch =
                json!({"spec": {"unschedulable": if *on { json!(true) } else { json!(null) }}});
            nodes
                .patch(node, &crate::patch_params(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Write::Labels { node, set, remove } => {
            let nodes: Api<KNode> = Api::all(client.clone());
            let mut labels = serde_json::Map::new();
            for k in remove {
                labels.insert(k.clone(), serde_json::Value::Null);
            }
            for (k, v) in set {
                labels.insert(k.clone(), json!(v));
            }
            let patch = json!({"metadata": {"labels": labels}});
            nodes
                .patch(node, &crate::patch_params(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        Write::GpuCordons { node, gpus } => {
            let nodes: Api<KNode> = Api::all(client.clone());
            let value = if gpus.is_empty() {
                json!(null)
            } else {
                json!(gpus
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","))
            };
            let patch =
                json!({"metadata": {"annotations": {map::ANNOTATION_CORDONED_GPUS: value}}});
            nodes
                .patch(node, &crate::patch_params(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    }
}
