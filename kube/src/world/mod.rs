//! The async side of the Kubernetes backend: watchers whose events reach the (sync)
//! driver through a channel, and the writes maar makes.
//!
//! - Nodes, pods (one namespace or all) and namespaces are watched with kube-rs's
//!   `watcher` (list, then watch; relisted after a dropped watch, with back-off). A
//!   relist is told to the driver as `Init` .. `InitDone`, so objects deleted while the
//!   watch was down are seen as gone.
//! - Writes run concurrently (at most [`MAX_WRITES`] at once): a bind (the Binding
//!   subresource, the GPU indices riding on it as an annotation), a pod that cannot be
//!   placed (`PodScheduled=False`, reason `Unschedulable`, with maar's explanation, and
//!   a `FailedScheduling` event), a preempted pod deleted. Their outcome comes back on
//!   the same channel.
//! - A bound pod's `Scheduled` event is written after the writes waiting then: binds
//!   first. At most [`MAX_QUEUED_EVENTS`] wait; past that they are not written and
//!   counted ([`Seen::EventsDropped`]), as client-go's event broadcaster (which
//!   kube-scheduler uses) drops events when its queue of 1,000 is full.
use std::sync::mpsc;
use std::sync::Arc;

use kube::api::Api;

mod events;
mod seen;
mod watch;
mod write;

pub use events::*;
pub use seen::*;
pub use watch::*;
pub use write::*;

/// The async side, on a thread and a runtime of its own.
pub struct World {
    /// Stops the runtime's thread (dropped: stops it too).
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    writes: tokio::sync::mpsc::UnboundedSender<Write>,
    seen: Inbox,
    /// This maar holds the scheduling lease.
    leader: Arc<crate::lease::Leadership>,
    /// The runtime and the client, for a write whose answer is waited for.
    handle: tokio::runtime::Handle,
    client: kube::Client,
}

impl World {
    /// Connects (see [`crate::connect()`]) and starts the watchers and the writer, on a
    /// runtime of their own (the client lives on it).
    pub fn connect(
        opts: &crate::ConnectOptions,
    ) -> Result<(World, crate::Connected), crate::KubeError> {
        // One thread runs it all: the watches and writes wait on the API server, not on
        // CPU. Two workers cost about 15% more CPU per bound pod in hand-offs between
        // them, and one worker beside the thread that drives it still more than this
        // (BENCHMARKS.md), for no more binds a second.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| crate::KubeError::Config(format!("cannot start: {e}")))?;
        let conn = rt.block_on(crate::connect(opts))?;
        let (tx, seen) = mpsc::channel();
        let (writes, wrx) = tokio::sync::mpsc::unbounded_channel();
        let leader = Arc::new(crate::lease::Leadership::new());
        // One lease per scheduler name, whatever namespace a maar schedules: two
        // maars of one name never both lead (kube-scheduler's lease is in kube-system
        // too).
        let lease_ns = crate::lease::NAMESPACE.to_string();
        let me = crate::lease::identity();
        let (lease, writes_task) = {
            let _guard = rt.enter();
            spawn_watchers(&conn.client, conn.namespace.clone(), tx.clone());
            let t = tx.clone();
            let lease = tokio::spawn(crate::lease::run(
                conn.client.clone(),
                lease_ns.clone(),
                me.clone(),
                leader.clone(),
                move |m| {
                    let _ = t.send(Seen::Lease(m));
                },
            ));
            let writes = tokio::spawn(writer(
                conn.client.clone(),
                wrx,
                tx,
                WriterLimits::default(),
                leader.clone(),
            ));
            (lease, writes)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = rt.handle().clone();
        let (client, held) = (conn.client.clone(), leader.clone());
        let thread = std::thread::Builder::new()
            .name("maar-kube".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
                // No more writes and no more renewals: then the lease is given up, so
                // that another maar schedules at once (not after the lease runs out),
                // and never while this one still writes.
                rt.block_on(async {
                    for task in [writes_task, lease] {
                        task.abort();
                        let _ = task.await;
                    }
                });
                if held.held() {
                    let api = Api::namespaced(client, &lease_ns);
                    let release = crate::lease::release(&api, &me);
                    // The timer is made inside the runtime (it needs its clock).
                    let within = async {
                        tokio::time::timeout(std::time::Duration::from_secs(2), release).await
                    };
                    match rt.block_on(within) {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(target: "maar::kube", "giving the lease up: {e}")
                        }
                        Err(_) => {
                            tracing::warn!(target: "maar::kube", "giving the lease up: no answer within 2 s")
                        }
                    }
                }
                rt.shutdown_timeout(std::time::Duration::from_secs(2));
            })
            .map_err(|e| crate::KubeError::Config(format!("cannot start: {e}")))?;
        Ok((
            World {
                stop: Some(stop),
                thread: Some(thread),
                writes,
                seen: Inbox::new(seen),
                leader,
                handle,
                client: conn.client.clone(),
            },
            conn,
        ))
    }

    /// A world of one client alone (made by `client` on the world's runtime): the
    /// writer, leading, and nothing watched (no lists, no lease): what a test drives
    /// with kube-rs's mock client.
    pub fn writer_only(client: impl FnOnce() -> kube::Client) -> Result<World, crate::KubeError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| crate::KubeError::Config(format!("cannot start: {e}")))?;
        let (tx, seen) = mpsc::channel();
        let (writes, wrx) = tokio::sync::mpsc::unbounded_channel();
        let (client, writer_task) = {
            let _guard = rt.enter();
            let client = client();
            let task = tokio::spawn(writer(
                client.clone(),
                wrx,
                tx,
                WriterLimits::default(),
                Arc::new(crate::lease::Leadership::always()),
            ));
            (client, task)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = rt.handle().clone();
        let thread = std::thread::Builder::new()
            .name("maar-kube".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
                writer_task.abort();
                rt.shutdown_timeout(std::time::Duration::from_secs(2));
            })
            .map_err(|e| crate::KubeError::Config(format!("cannot start: {e}")))?;
        Ok(World {
            stop: Some(stop),
            thread: Some(thread),
            writes,
            seen: Inbox::new(seen),
            leader: Arc::new(crate::lease::Leadership::always()),
            handle,
            client,
        })
    }

    /// Makes one of maar's objects now and waits up to `within` for the API server's
    /// answer: a submit (a federation's dispatch) is answered with what the cluster
    /// said, not queued and forgotten.
    pub fn create_now(
        &self,
        job: &str,
        kind: &str,
        plural: &str,
        object: &serde_json::Value,
        within: std::time::Duration,
    ) -> Result<(), String> {
        let w = Write::CreateObject {
            job: job.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            object: object.clone(),
        };
        self.write_now(w, within)
    }

    /// Makes one write now and waits up to `within` for the API server's answer: an
    /// operator's command on a node (a cordon, labels) is acknowledged only once it is
    /// in force in the cluster (queued, it was lost to a maar killed before the
    /// write, or to an API server out of reach, yet recorded as done).
    pub fn write_now(&self, w: Write, within: std::time::Duration) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        let client = self.client.clone();
        self.handle.spawn(async move {
            let recorder = Events::new(client.clone(), "maar");
            let r = carry_out(&client, &recorder, &w).await;
            let _ = tx.send(r);
        });
        match rx.recv_timeout(within) {
            Ok(r) => r,
            Err(_) => Err(format!(
                "the API server did not answer within {} s",
                within.as_secs()
            )),
        }
    }

    /// This maar holds the scheduling lease (schedules and writes).
    pub fn is_leader(&self) -> bool {
        self.leader.held()
    }

    /// The next thing seen, if any (never waits).
    pub fn try_next(&self) -> Option<Seen> {
        self.seen.try_next()
    }

    /// Queues a write.
    pub fn write(&self, w: Write) {
        let _ = self.writes.send(w);
    }

    /// Waits up to `d` for the first thing seen (start-up: the first lists).
    pub fn next_within(&self, d: std::time::Duration) -> Option<Seen> {
        self.seen.next_within(d)
    }

    /// Stops the watchers and drops writes not yet made.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the watches and the writer send, handed out one thing at a time: a batch
/// ([`Seen::Many`]) in its order, before anything received after it.
struct Inbox {
    rx: mpsc::Receiver<Seen>,
    held: std::cell::RefCell<std::collections::VecDeque<Seen>>,
}

impl Inbox {
    fn new(rx: mpsc::Receiver<Seen>) -> Inbox {
        Inbox {
            rx,
            held: Default::default(),
        }
    }

    fn try_next(&self) -> Option<Seen> {
        let held = self.held.borrow_mut().pop_front();
        held.or_else(|| self.rx.try_recv().ok().map(|s| self.one(s)))
    }

    fn next_within(&self, d: std::time::Duration) -> Option<Seen> {
        let held = self.held.borrow_mut().pop_front();
        held.or_else(|| self.rx.recv_timeout(d).ok().map(|s| self.one(s)))
    }

    /// The first of what was received; the rest of a batch is held.
    fn one(&self, s: Seen) -> Seen {
        match s {
            Seen::Many(all) => {
                let mut held = self.held.borrow_mut();
                held.extend(all);
                held.pop_front().unwrap_or(Seen::Many(Vec::new()))
            }
            s => s,
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_handed_out_in_its_order_before_what_came_after_it() {
        let (tx, rx) = mpsc::channel();
        let inbox = Inbox::new(rx);
        let t = |m: &str| Seen::Trouble(m.to_string());
        tx.send(t("a")).unwrap();
        tx.send(Seen::Many(vec![t("b"), t("c"), t("d")])).unwrap();
        tx.send(t("e")).unwrap();
        let mut got = Vec::new();
        while let Some(s) = inbox.try_next() {
            match s {
                Seen::Trouble(m) => got.push(m),
                other => panic!("{other:?}"),
            }
            if got.len() == 2 {
                // Waiting takes what is held first.
                tx.send(t("f")).unwrap();
                match inbox.next_within(std::time::Duration::from_millis(10)) {
                    Some(Seen::Trouble(m)) => got.push(m),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(got, ["a", "b", "c", "d", "e", "f"]);
        assert!(inbox
            .next_within(std::time::Duration::from_millis(1))
            .is_none());
    }
}
