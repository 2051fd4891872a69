//! The watchers: nodes, pods (one namespace or all), namespaces and maar's objects,
//! each a kube-rs `watcher` relisted with back-off, forwarded to the driver.

use super::seen::{ObjectSeen, PodSeen, Seen, SlimNode, SlimPod, Watched};
use std::sync::mpsc;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;

use crate::map::{self, Owner};

fn forward<K, T>(ev: watcher::Event<K>, mut f: impl FnMut(K) -> T) -> Watched<T> {
    match ev {
        watcher::Event::Apply(k) => Watched::Apply(f(k)),
        watcher::Event::Delete(k) => Watched::Delete(f(k)),
        watcher::Event::Init => Watched::Init,
        watcher::Event::InitApply(k) => Watched::InitApply(f(k)),
        watcher::Event::InitDone => Watched::InitDone,
    }
}

/// One of maar's own resources whose watch cannot run (see [`unavailable`]): the
/// message that says its first list is done, and whether a missing CRD is said too (a
/// forbidden one always is).
struct Own {
    kind: &'static str,
    done: Seen,
    say_missing: bool,
}

/// Runs one watch on its own task: each event becomes what `seen` makes of it, a
/// failure is told and retried with back-off; one of maar's own resources (`own`) that
/// cannot be watched at all is done without.
fn spawn_watch<K>(
    api: Api<K>,
    what: &'static str,
    mut own: Option<Own>,
    tx: mpsc::Sender<Seen>,
    mut seen: impl FnMut(watcher::Event<K>) -> Seen + Send + 'static,
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send,
{
    tokio::spawn(async move {
        // Lists are served from the API server's watch cache (`resourceVersion=0`),
        // as client-go's reflectors (kube-scheduler's informers) list: one answer, not
        // a quorum read from etcd page by page (5,000 pods were ten pages, a round trip
        // each, before the first bind). The watch that follows goes on from the
        // list's version, so what a lagging cache lacked arrives as its events.
        // (kube-rs sends no `resourceVersion=0` with a page size: the cache answers
        // such a list whole anyway.)
        let mut config = watcher::Config::default().any_semantic();
        config.page_size = None;
        let mut s = watcher(api, config).backoff(watch_backoff()).boxed();
        let mut next = s.next().await;
        'watch: while next.is_some() {
            // What is seen now goes on in one message: the events the stream has
            // ready (a list's thousands of objects, a burst of binds' updates), at
            // most SEEN_BATCH. One send and one wake of the driver each, not one a pod.
            let mut batch = Vec::new();
            let mut end = false;
            while let Some(ev) = next.take() {
                match ev {
                    Ok(ev) => batch.push(seen(ev)),
                    // A watch too far behind (410 Gone, "too old resource version")
                    // lists again by itself: the normal way back after an outage.
                    Err(e) if expired(&e.to_string()) => {
                        tracing::debug!(target: "maar::kube", "watching {what}: {e}; listing again");
                    }
                    Err(e) => match (own.is_some(), unavailable(&e)) {
                        (true, Some(why)) => {
                            let o = own.take().expect("checked");
                            if o.say_missing || why == UNAVAILABLE_FORBIDDEN {
                                batch.push(Seen::Trouble(format!(
                                    "{} are not watched: {why}",
                                    o.kind
                                )));
                            }
                            batch.push(o.done);
                            end = true;
                            break;
                        }
                        _ => batch.push(Seen::Unanswered(format!("watching {what}: {e}"))),
                    },
                }
                if batch.len() >= SEEN_BATCH {
                    break;
                }
                match s.next().now_or_never() {
                    Some(Some(ev)) => next = Some(ev),
                    Some(None) => end = true,
                    None => {}
                }
            }
            let msg = match batch.len() {
                0 => None,
                1 => batch.pop(),
                _ => Some(Seen::Many(batch)),
            };
            if msg.is_some_and(|m| tx.send(m).is_err()) || end {
                break 'watch;
            }
            next = s.next().await;
        }
    });
}

/// The most events one message carries from a watch to the driver.
pub const SEEN_BATCH: usize = 1024;

/// How a failed watch is retried: from 0.5 s, doubling up to 3 s, with jitter (so at
/// most about 6 s apart), reset after two minutes without an error. kube-rs's default
/// (client-go's reflector: up to 30 s) left maar up to a minute behind an API server
/// that came back after 20 s; a scheduler must see the cluster again within seconds.
pub fn watch_backoff() -> impl kube::runtime::utils::Backoff {
    let b = backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(500))
        .with_max_delay(std::time::Duration::from_secs(3))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    kube::runtime::utils::ResetTimerBackoff::new(
        kube::runtime::watcher::ExponentialBackoff::from(b),
        std::time::Duration::from_secs(120),
    )
}

/// One of maar's resources in the namespace watched, or in all.
fn crd_api(
    client: &Client,
    namespace: &Option<String>,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let r = map::crd(kind, plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

/// An object maar cannot read: its `namespace/name` (its name when cluster-scoped) and
/// the field that is wrong.
fn unreadable(o: &DynamicObject, e: maar_scheduler::manifest::SpecError) -> (String, String) {
    let name = o.metadata.name.clone().unwrap_or_default();
    let key = match &o.metadata.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    };
    (key, format!("{}: {}", e.field, e.message))
}

/// Watches nodes, pods, namespaces and maar's own resources; every event (and every
/// watch error) is sent on.
pub fn spawn_watchers(client: &Client, namespace: Option<String>, tx: mpsc::Sender<Seen>) {
    // Every pod that holds node resources counts, whatever namespace maar schedules:
    // a maar of one namespace that saw only its own would book cards other pods hold.
    let pods: Api<SlimPod> = Api::all(client.clone());
    let scope = namespace.clone();
    spawn_watch(
        Api::<SlimNode>::all(client.clone()),
        "nodes",
        None,
        tx.clone(),
        |ev| Seen::Node(forward(ev, |n| Box::new(n.into_node()))),
    );
    let mut read = std::collections::HashSet::new();
    spawn_watch(pods, "pods", None, tx.clone(), move |ev| match ev {
        watcher::Event::Delete(p) => {
            // Gone: its job is not read, and its uid is forgotten.
            let uid = p.metadata.uid.clone().unwrap_or_default();
            read.remove(&uid);
            let mut skip = std::collections::HashSet::from([uid]);
            Seen::Pod(Watched::Delete(Box::new(PodSeen::of_slim(
                p,
                &mut skip,
                scope.as_deref(),
            ))))
        }
        ev => Seen::Pod(forward(ev, |p| {
            Box::new(PodSeen::of_slim(p, &mut read, scope.as_deref()))
        })),
    });
    for owner in Owner::ALL {
        let what = match owner {
            Owner::TrainJob => "TrainJobs",
            Owner::InferenceService => "InferenceServices",
        };
        spawn_watch(
            crd_api(client, &namespace, owner.kind(), owner.plural()),
            what,
            Some(Own {
                kind: what,
                done: Seen::Object(owner, Watched::InitDone),
                say_missing: true,
            }),
            tx.clone(),
            move |ev| Seen::Object(owner, forward(ev, |o| Box::new(ObjectSeen::of(owner, &o)))),
        );
    }
    // No Pool objects: pools come from the nodes' roles.
    spawn_watch(
        crd_api(client, &None, "Pool", "pools"),
        "pools",
        Some(Own {
            kind: "Pools",
            done: Seen::Pool(Watched::InitDone),
            say_missing: false,
        }),
        tx.clone(),
        |ev| {
            Seen::Pool(forward(ev, |o| {
                map::pool_of(&o).map_err(|e| unreadable(&o, e))
            }))
        },
    );
    // No Quota objects: projects are open.
    spawn_watch(
        crd_api(client, &namespace, "Quota", "quotas"),
        "quotas",
        Some(Own {
            kind: "Quotas",
            done: Seen::Quota(Watched::InitDone),
            say_missing: false,
        }),
        tx.clone(),
        |ev| {
            Seen::Quota(forward(ev, |o| {
                map::quota_of(&o).map_err(|e| unreadable(&o, e))
            }))
        },
    );
    spawn_watch(
        crd_api(client, &namespace, "QuotaRequest", "quotarequests"),
        "quota requests",
        Some(Own {
            kind: "QuotaRequests",
            done: Seen::QuotaRequest(Watched::InitDone),
            say_missing: false,
        }),
        tx.clone(),
        |ev| {
            Seen::QuotaRequest(forward(ev, |o| {
                map::quota_request_of(&o).map_err(|e| unreadable(&o, e))
            }))
        },
    );
    match namespace {
        // One namespace: that is the one project.
        Some(ns) => {
            let _ = tx.send(Seen::Namespace(Watched::Apply(ns)));
        }
        None => spawn_watch(
            Api::<Namespace>::all(client.clone()),
            "namespaces",
            None,
            tx,
            |ev| {
                Seen::Namespace(forward(ev, |n: Namespace| {
                    n.metadata.name.unwrap_or_default()
                }))
            },
        ),
    }
}

const UNAVAILABLE_MISSING: &str =
    "its resource is not installed (kubectl apply -f deploy/crds.yaml)";
const UNAVAILABLE_FORBIDDEN: &str =
    "maar may not list it (403); bind maar's ClusterRole (deploy/rbac.yaml)";

/// Whether a watch error is the API server's "too old resource version" (410, reason
/// Expired), after which the watcher lists again.
fn expired(text: &str) -> bool {
    text.contains("too old resource version") || text.contains("Expired") || text.contains(": 410")
}

/// Why a watch of one of maar's own resources cannot run at all: its CRD is not
/// installed, or maar may not list it. Such a resource is done without (its first list
/// counts as done, so nothing waits for it), and said once.
fn unavailable(e: &watcher::Error) -> Option<&'static str> {
    let t = e.to_string();
    if t.contains("404") || t.contains("the server could not find the requested resource") {
        Some(UNAVAILABLE_MISSING)
    } else if t.contains("403") || t.to_lowercase().contains("forbidden") {
        Some(UNAVAILABLE_FORBIDDEN)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    /// The error an outage ends with, as kube-rs words the API server's answer.
    #[test]
    fn an_expired_watch_is_not_trouble() {
        assert!(super::expired(
            "ApiError: too old resource version: 507387 (507442): Expired (ErrorResponse { status: \"Failure\", message: \"too old resource version: 507387 (507442)\", reason: \"Expired\", code: 410 })"
        ));
        assert!(!super::expired(
            "error trying to connect: tcp connect error: Connection refused (os error 111)"
        ));
    }
}
