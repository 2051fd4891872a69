//! One maar schedules at a time: a `coordination.k8s.io/v1` Lease (`maar-scheduler`),
//! held by renewing it every [`RETRY`], taken over when its holder stopped renewing for
//! [`DURATION_S`] seconds (the holder died). A maar that does not hold it watches
//! only: it neither schedules nor writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::Client;
use serde_json::json;

/// The Lease's name.
pub const NAME: &str = "maar-scheduler";
/// The Lease's namespace, whatever namespace a maar schedules.
pub const NAMESPACE: &str = "kube-system";
/// Seconds without a renewal after which the holder is taken for dead.
pub const DURATION_S: i64 = 15;
/// How often the lease is renewed (or its holder looked at).
pub const RETRY: Duration = Duration::from_secs(2);

/// Whether this maar holds the lease, and for how long it may act on that without
/// another renewal: until [`DURATION_S`] less two seconds after the last renewal it
/// saw answered. A maar paused past that (SIGSTOP, a frozen VM) writes nothing on
/// waking until it has renewed again: meanwhile another maar may have taken the lease
/// over, and two would schedule at once.
#[derive(Debug)]
pub struct Leadership {
    base: std::time::Instant,
    /// Milliseconds after `base` until which this maar leads (0: it does not).
    until_ms: AtomicU64,
}

impl Leadership {
    /// Not leading until a renewal says so.
    pub fn new() -> Leadership {
        Leadership {
            base: std::time::Instant::now(),
            until_ms: AtomicU64::new(0),
        }
    }

    /// Leading for good (a world with no lease: a test's).
    pub fn always() -> Leadership {
        let l = Leadership::new();
        l.until_ms.store(u64::MAX, Ordering::SeqCst);
        l
    }

    /// This maar leads now.
    pub fn held(&self) -> bool {
        self.held_at(std::time::Instant::now())
    }

    /// This maar leads at `at` (as far as the renewals seen so far say).
    pub fn held_at(&self, at: std::time::Instant) -> bool {
        let ms = at.saturating_duration_since(self.base).as_millis() as u64;
        ms < self.until_ms.load(Ordering::SeqCst)
    }

    /// The lease was renewed by a request sent at `asked`: held until it would run out,
    /// less two seconds for the clocks of the API server and the other maars.
    pub fn renewed(&self, asked: std::time::Instant) {
        let at = asked.saturating_duration_since(self.base).as_millis() as u64;
        self.until_ms
            .store(at + (DURATION_S as u64 - 2) * 1000, Ordering::SeqCst);
    }

    /// Another maar holds the lease.
    pub fn lost(&self) {
        self.until_ms.store(0, Ordering::SeqCst);
    }
}

impl Default for Leadership {
    fn default() -> Self {
        Leadership::new()
    }
}

/// This maar's name on the lease, as client-go names a leader: the host (a pod's name
/// in a cluster) and a random part, new for every process. A restarted container keeps
/// its host name and, being process 1 again, its pid: with those alone it would take
/// itself for the holder while the process it replaced may still run (a force-deleted
/// pod, a paused one), and two maars would schedule at once. With the random part a
/// new process waits until the old one gives the lease up or stops renewing it.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "maar".into());
    format!(
        "{host}_{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    )
}

/// What one look at the lease found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// This maar holds it (created, renewed, or taken over from `from`).
    Held { took_from: Option<String> },
    /// Another maar holds it and renews it.
    Other { holder: String },
}

fn micro(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn lease_body(
    ns: &str,
    me: &str,
    now: i64,
    acquired: i64,
    transitions: i32,
    rv: Option<&str>,
) -> Result<Lease, String> {
    let mut meta = json!({"name": NAME, "namespace": ns});
    if let Some(rv) = rv {
        meta["resourceVersion"] = json!(rv);
    }
    serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {
            "holderIdentity": me,
            "leaseDurationSeconds": DURATION_S,
            "acquireTime": micro(acquired),
            "renewTime": micro(now),
            "leaseTransitions": transitions,
        },
    }))
    .map_err(|e| e.to_string())
}

/// One look at the lease at time `now` (seconds): create it, renew it, take it over,
/// or find it held. A write that loses a race (409) is another holder.
pub async fn step(api: &Api<Lease>, ns: &str, me: &str, now: i64) -> Result<Step, String> {
    let current = api.get_opt(NAME).await.map_err(|e| e.to_string())?;
    let Some(l) = current else {
        let body = lease_body(ns, me, now, now, 0, None)?;
        return match api.create(&crate::post_params(), &body).await {
            Ok(_) => Ok(Step::Held { took_from: None }),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Step::Other {
                holder: "another maar (it was created first)".into(),
            }),
            Err(e) => Err(e.to_string()),
        };
    };
    let spec = l.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let renewed = spec
        .renew_time
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(0);
    let duration = spec
        .lease_duration_seconds
        .map(i64::from)
        .unwrap_or(DURATION_S);
    let transitions = spec.lease_transitions.unwrap_or(0);
    let rv = l.metadata.resource_version.as_deref();
    let (acquired, transitions, took_from) = if holder == me {
        let acquired = spec
            .acquire_time
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(now);
        (acquired, transitions, None)
    } else if holder.is_empty() || now > renewed + duration {
        (
            now,
            transitions + 1,
            Some(holder.clone()).filter(|h| !h.is_empty()),
        )
    } else {
        return Ok(Step::Other { holder });
    };
    let body = lease_body(ns, me, now, acquired, transitions, rv)?;
    match api.replace(NAME, &crate::post_params(), &body).await {
        Ok(_) => Ok(Step::Held { took_from }),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Step::Other {
            holder: format!("another maar (it renewed before {me} could)"),
        }),
        Err(e) => Err(e.to_string()),
    }
}

/// Gives the lease up on the way out (as client-go's `ReleaseOnCancel`): its holder
/// emptied, against the version read, so that another maar takes it over at its next
/// look instead of after [`DURATION_S`] seconds. Returns whether this maar held it.
pub async fn release(api: &Api<Lease>, me: &str) -> Result<bool, String> {
    let Some(mut l) = api.get_opt(NAME).await.map_err(|e| e.to_string())? else {
        return Ok(false);
    };
    let Some(spec) = l.spec.as_mut() else {
        return Ok(false);
    };
    if spec.holder_identity.as_deref() != Some(me) {
        return Ok(false);
    }
    spec.holder_identity = None;
    l.metadata.managed_fields = None;
    match api.replace(NAME, &crate::post_params(), &l).await {
        Ok(_) => Ok(true),
        // Renewed or taken meanwhile: not ours to give up.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// Keeps looking at the lease, setting `leader`; each change (and each failure, which
/// steps down once the lease would have run out) is told through `tell`.
pub async fn run(
    client: Client,
    ns: String,
    me: String,
    leader: Arc<Leadership>,
    tell: impl Fn(String) + Send + 'static,
) {
    let api: Api<Lease> = Api::namespaced(client, &ns);
    let mut said = String::new();
    loop {
        let now = chrono::Utc::now().timestamp();
        let asked = std::time::Instant::now();
        let (held, msg) = match step(&api, &ns, &me, now).await {
            Ok(Step::Held { took_from: None }) => {
                leader.renewed(asked);
                (
                    true,
                    format!("this maar ({me}) schedules: it holds the lease {ns}/{NAME}"),
                )
            }
            Ok(Step::Held { took_from: Some(h) }) => {
                leader.renewed(asked);
                (
                    true,
                    format!("this maar ({me}) took the lease {ns}/{NAME} over from {h}, which stopped renewing it"),
                )
            }
            Ok(Step::Other { holder }) => {
                leader.lost();
                (
                    false,
                    format!(
                        "another maar ({holder}) schedules; this one watches only (lease {ns}/{NAME})"
                    ),
                )
            }
            Err(e) => {
                // Unsure: keep leading only while the lease would still be ours (the
                // last renewal's time runs out by itself).
                let still = leader.held();
                (
                    still,
                    format!(
                        "cannot read or renew the lease {ns}/{NAME} ({e}); {}",
                        if still {
                            "still scheduling until it runs out"
                        } else {
                            "watching only"
                        }
                    ),
                )
            }
        };
        // Said once per change of what is true (not per renewal).
        let key = format!("{held}{}", msg.split(" (").next().unwrap_or_default());
        if key != said {
            said = key;
            tell(msg);
        }
        tokio::time::sleep(RETRY).await;
    }
}
