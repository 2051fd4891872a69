//! Kubernetes Events maar writes (events.k8s.io/v1, as kube-scheduler's recorder), and
//! a bound pod's `Scheduled` event written after the binds.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;

/// `Scheduled` events waiting to be written at most (client-go's event broadcaster
/// queues as many); more are not written.
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// Longest event note the API server takes (events.k8s.io/v1 `note`).
const MAX_NOTE: usize = 1024;

/// Writes events (events.k8s.io/v1), as `kubectl describe` shows them. Each is one
/// create: maar tells a waiting pod again only when its reason changes or every few
/// minutes (the driver's rate), so no cache of past events is kept (kube-runtime's
/// `Recorder` scans its whole cache on every event: quadratic over thousands of pods).
#[derive(Clone)]
pub struct Events {
    client: Client,
    instance: String,
}

/// An event's severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl Events {
    pub fn new(client: Client, instance: &str) -> Events {
        Events {
            client,
            instance: instance.to_string(),
        }
    }

    /// Writes one event about `regarding`.
    pub async fn publish(
        &self,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let ns = regarding.namespace.as_deref().unwrap_or("default");
        let now = chrono::Utc::now();
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or("maar"),
            now.timestamp_nanos_opt().unwrap_or_default()
        );
        let note = cut_note(note);
        let ev = EventBody {
            api_version: "events.k8s.io/v1",
            kind: "Event",
            metadata: EventMeta {
                name: &name,
                namespace: ns,
            },
            event_time: now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            type_: match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            },
            reason,
            action,
            note: &note,
            regarding,
            reporting_controller: "maar",
            reporting_instance: &self.instance,
        };
        // Serialized as built (no JSON tree first) and posted; the answer is not
        // parsed: thousands of pods are told at once.
        let body = serde_json::to_vec(&ev).map_err(kube::Error::SerdeError)?;
        let req =
            kube::core::Request::new(format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"))
                .create(&crate::post_params(), body)
                .map_err(kube::Error::BuildRequest)?;
        self.client.request_text(req).await.map(|_| ())
    }
}

/// An events.k8s.io/v1 Event as maar posts it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EventBody<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: EventMeta<'a>,
    event_time: String,
    #[serde(rename = "type")]
    type_: &'static str,
    reason: &'a str,
    action: &'a str,
    note: &'a str,
    regarding: &'a ObjectReference,
    reporting_controller: &'static str,
    reporting_instance: &'a str,
}

#[derive(serde::Serialize)]
struct EventMeta<'a> {
    name: &'a str,
    namespace: &'a str,
}

/// The reference to a pod that events name.
pub(crate) fn pod_ref(ns: &str, name: &str, uid: &str) -> ObjectReference {
    object_ref("v1", "Pod", ns, name, uid)
}

/// The reference to an object that events name (`ns` empty for a cluster-scoped
/// object, `uid` empty when not known).
pub fn object_ref(
    api_version: &str,
    kind: &str,
    ns: &str,
    name: &str,
    uid: &str,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        // Cluster-scoped objects (a Pool) have none (the event goes to `default`).
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
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

/// A bound pod's `Scheduled` event, to be written.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheduled {
    pub job: String,
    pub uid: String,
    pub node: String,
}

impl Scheduled {
    /// Writes it, as kube-scheduler says it (for `kubectl describe pod`); a failure is
    /// logged only.
    pub async fn publish(&self, recorder: &Events) {
        let (ns, name) = split(&self.job);
        let note = format!("Successfully assigned {ns}/{name} to {}", self.node);
        let reference = pod_ref(ns, name, &self.uid);
        if let Err(e) = recorder
            .publish(EventType::Normal, "Scheduled", "Binding", &note, &reference)
            .await
        {
            tracing::warn!(target: "maar::kube", "event for {}: {e}", self.job);
        }
    }
}

/// A job's namespace and name (`ns/name`; the default namespace when none is given).
pub(crate) fn split(job: &str) -> (&str, &str) {
    job.split_once('/').unwrap_or(("default", job))
}
