//! The async side of the Kubernetes backend: watchers whose events reach the (sync)
//! driver through a channel, and the writes maar makes.
//!
//! - Nodes, pods (one namespace or all) and namespaces are watched with kube-rs's
//!   `watcher` (list, then watch; relisted after a dropped watch, with back-off). A
//!   relist is told to the driver as `Init` .. `InitDone`, so objects deleted while the
//!   watch was down are seen as gone.
//! - Writes run concurrently (at most [`MAX_WRITES`] at once): a bind (the GPU indices
//!   annotated on the pod first, then the Binding subresource), a pod that cannot be
//!   placed (`PodScheduled=False`, reason `Unschedulable`, with maar's explanation, and
//!   a `FailedScheduling` event), a preempted pod deleted. Their outcome comes back on
//!   the same channel.

use std::sync::mpsc;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node as KNode, ObjectReference, Pod as KPod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KEvent, EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::json;

use crate::map::{self, PodState, ANNOTATION_GPUS};

/// Writes in flight at most.
pub const MAX_WRITES: usize = 64;
/// Longest event note the API server takes (events.k8s.io/v1 `note`).
const MAX_NOTE: usize = 1024;

/// A change the watch saw, in the order it saw them (per kind).
#[derive(Clone, Debug)]
pub enum Watched<K> {
    /// Added or changed.
    Apply(K),
    /// Deleted.
    Delete(K),
    /// A (re)list starts: what follows until `InitDone` is the whole set.
    Init,
    InitApply(K),
    InitDone,
}

/// What a pod is, as far as maar cares (mapped on the async side so the driver holds
/// no full objects).
#[derive(Clone, Debug)]
pub struct PodSeen {
    /// `namespace/name`.
    pub key: String,
    pub uid: String,
    /// Scheduled by maar (`schedulerName: maar`).
    pub ours: bool,
    pub node: Option<String>,
    pub state: PodState,
    /// The job it is (maar's pods only), or why it cannot be one.
    pub spec: Option<Result<maar_scheduler::JobSpec, maar_scheduler::manifest::SpecError>>,
    /// GPU indices maar annotated when it bound the pod.
    pub gpus: Vec<u32>,
}

impl PodSeen {
    pub fn of(p: &KPod) -> PodSeen {
        let ours = map::is_ours(p);
        PodSeen {
            key: map::pod_key(p),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            ours,
            node: map::pod_node(p).map(str::to_string),
            state: map::pod_state(p),
            spec: ours.then(|| map::job_of(p)),
            gpus: p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_GPUS))
                .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
                .unwrap_or_default(),
        }
    }
}

/// What the world tells the driver.
#[derive(Debug)]
pub enum Seen {
    Node(Watched<Box<KNode>>),
    Pod(Watched<Box<PodSeen>>),
    Namespace(Watched<String>),
    /// A bind's outcome for job `job` (`namespace/name`).
    Bound {
        job: String,
        result: Result<(), String>,
    },
    /// A watch failed (it is retried with back-off) or a write failed.
    Trouble(String),
}

/// A write maar makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Bind pod `job` (`namespace/name`, `uid`) to `node`, on cards `gpus`.
    Bind {
        job: String,
        uid: String,
        node: String,
        gpus: Vec<u32>,
    },
    /// Pod `job` cannot be placed now: `message` (maar's explanation).
    Unschedulable {
        job: String,
        uid: String,
        message: String,
    },
    /// Delete pod `job` (preempted, drained, cancelled by an operator): `reason`.
    Delete { job: String, reason: String },
    /// Cordon (`on`) or uncordon a node: `spec.unschedulable`, as `kubectl cordon`.
    Cordon { node: String, on: bool },
    /// The node's cordoned GPUs, all of them (its `crater.ai/cordoned-gpus`
    /// annotation; removed when empty).
    GpuCordons { node: String, gpus: Vec<u32> },
}

fn split(job: &str) -> (&str, &str) {
    job.split_once('/').unwrap_or(("default", job))
}

/// The async side, running on its own runtime.
pub struct World {
    rt: tokio::runtime::Runtime,
    writes: tokio::sync::mpsc::UnboundedSender<Write>,
    seen: mpsc::Receiver<Seen>,
}

impl World {
    /// Connects (see [`crate::connect()`]) and starts the watchers and the writer, on a
    /// runtime of their own (the client lives on it).
    pub fn connect(
        opts: &crate::ConnectOptions,
    ) -> Result<(World, crate::Connected), crate::KubeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("maar-kube")
            .enable_all()
            .build()
            .map_err(|e| crate::KubeError::Config(format!("cannot start: {e}")))?;
        let conn = rt.block_on(crate::connect(opts))?;
        let (tx, seen) = mpsc::channel();
        let (writes, wrx) = tokio::sync::mpsc::unbounded_channel();
        {
            let _guard = rt.enter();
            spawn_watchers(&conn.client, conn.namespace.clone(), tx.clone());
            tokio::spawn(writer(conn.client.clone(), wrx, tx));
        }
        Ok((World { rt, writes, seen }, conn))
    }

    /// The next thing seen, if any (never waits).
    pub fn try_next(&self) -> Option<Seen> {
        self.seen.try_recv().ok()
    }

    /// Queues a write.
    pub fn write(&self, w: Write) {
        let _ = self.writes.send(w);
    }

    /// Waits up to `d` for the first thing seen (start-up: the first lists).
    pub fn next_within(&self, d: std::time::Duration) -> Option<Seen> {
        self.seen.recv_timeout(d).ok()
    }

    /// Stops the watchers and drops writes not yet made.
    pub fn shutdown(self) {
        self.rt.shutdown_timeout(std::time::Duration::from_secs(2));
    }
}

fn forward<K, T>(ev: watcher::Event<K>, f: impl Fn(K) -> T) -> Watched<T> {
    match ev {
        watcher::Event::Apply(k) => Watched::Apply(f(k)),
        watcher::Event::Delete(k) => Watched::Delete(f(k)),
        watcher::Event::Init => Watched::Init,
        watcher::Event::InitApply(k) => Watched::InitApply(f(k)),
        watcher::Event::InitDone => Watched::InitDone,
    }
}

/// Watches nodes, pods and namespaces; every event (and every watch error) is sent on.
pub fn spawn_watchers(client: &Client, namespace: Option<String>, tx: mpsc::Sender<Seen>) {
    let nodes: Api<KNode> = Api::all(client.clone());
    let pods: Api<KPod> = match &namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let t = tx.clone();
    tokio::spawn(async move {
        let mut s = watcher(nodes, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = s.next().await {
            let msg = match ev {
                Ok(ev) => Seen::Node(forward(ev, Box::new)),
                Err(e) => Seen::Trouble(format!("watching nodes: {e}")),
            };
            if t.send(msg).is_err() {
                break;
            }
        }
    });
    let t = tx.clone();
    tokio::spawn(async move {
        let mut s = watcher(pods, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = s.next().await {
            let msg = match ev {
                Ok(ev) => Seen::Pod(forward(ev, |p| Box::new(PodSeen::of(&p)))),
                Err(e) => Seen::Trouble(format!("watching pods: {e}")),
            };
            if t.send(msg).is_err() {
                break;
            }
        }
    });
    match namespace {
        // One namespace: that is the one project.
        Some(ns) => {
            let _ = tx.send(Seen::Namespace(Watched::Apply(ns)));
        }
        None => {
            tokio::spawn(async move {
                let mut s = watcher(namespaces, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(ev) = s.next().await {
                    let msg = match ev {
                        Ok(ev) => Seen::Namespace(forward(ev, |n: Namespace| {
                            n.metadata.name.unwrap_or_default()
                        })),
                        Err(e) => Seen::Trouble(format!("watching namespaces: {e}")),
                    };
                    if tx.send(msg).is_err() {
                        break;
                    }
                }
            });
        }
    }
}

/// Carries out writes, at most [`MAX_WRITES`] at once.
async fn writer(
    client: Client,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Write>,
    tx: mpsc::Sender<Seen>,
) {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "maar".into());
    let recorder = Arc::new(Recorder::new(
        client.clone(),
        Reporter {
            controller: "maar".into(),
            instance: Some(host),
        },
    ));
    let limit = Arc::new(tokio::sync::Semaphore::new(MAX_WRITES));
    while let Some(w) = rx.recv().await {
        let Ok(permit) = limit.clone().acquire_owned().await else {
            break;
        };
        let (client, tx, recorder) = (client.clone(), tx.clone(), recorder.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let out = carry_out(&client, &recorder, &w).await;
            let msg = match (&w, out) {
                (Write::Bind { job, .. }, result) => Seen::Bound {
                    job: job.clone(),
                    result,
                },
                (_, Ok(())) => return,
                (w, Err(e)) => Seen::Trouble(format!("{}: {e}", describe(w))),
            };
            let _ = tx.send(msg);
        });
    }
}

fn describe(w: &Write) -> String {
    match w {
        Write::Bind { job, node, .. } => format!("binding pod {job} to {node}"),
        Write::Unschedulable { job, .. } => format!("marking pod {job} unschedulable"),
        Write::Delete { job, .. } => format!("deleting pod {job}"),
        Write::Cordon { node, on: true } => format!("cordoning node {node}"),
        Write::Cordon { node, on: false } => format!("uncordoning node {node}"),
        Write::GpuCordons { node, .. } => format!("writing the GPU cordons of node {node}"),
    }
}

/// The reference to a pod that events name.
fn pod_ref(ns: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some(ns.into()),
        uid: (!uid.is_empty()).then(|| uid.to_string()),
        ..Default::default()
    }
}

/// Cuts a note to what the API server takes, on a character boundary.
pub fn cut_note(s: &str) -> String {
    if s.len() <= MAX_NOTE {
        return s.to_string();
    }
    let mut end = MAX_NOTE - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// One write against the API server.
pub async fn carry_out(client: &Client, recorder: &Recorder, w: &Write) -> Result<(), String> {
    match w {
        Write::Bind {
            job,
            uid,
            node,
            gpus,
        } => {
            let (ns, name) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            if !gpus.is_empty() {
                let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
                let patch = json!({"metadata": {"annotations": {ANNOTATION_GPUS: list.join(",")}}});
                pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let binding = json!({
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            });
            pods.create_subresource::<_, serde_json::Value>(
                "binding",
                name,
                &PostParams::default(),
                &binding,
            )
            .await
            .map_err(|e| e.to_string())?;
            // As kube-scheduler says it, for `kubectl describe pod`.
            let note = format!("Successfully assigned {ns}/{name} to {node}");
            let reference = pod_ref(ns, name, uid);
            if let Err(e) = recorder
                .publish(
                    &KEvent {
                        type_: EventType::Normal,
                        reason: "Scheduled".into(),
                        note: Some(note),
                        action: "Binding".into(),
                        secondary: None,
                    },
                    &reference,
                )
                .await
            {
                tracing::warn!(target: "maar::kube", "event for {job}: {e}");
            }
            Ok(())
        }
        Write::Unschedulable { job, uid, message } => {
            let (ns, name) = split(job);
            let pods: Api<KPod> = Api::namespaced(client.clone(), ns);
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let status = json!({"status": {"conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": now,
            }]}});
            pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
                .await
                .map_err(|e| e.to_string())?;
            recorder
                .publish(
                    &KEvent {
                        type_: EventType::Warning,
                        reason: "FailedScheduling".into(),
                        note: Some(cut_note(message)),
                        action: "Scheduling".into(),
                        secondary: None,
                    },
                    &pod_ref(ns, name, uid),
                )
                .await
                .map_err(|e| e.to_string())
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
                .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
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
                .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    }
}
