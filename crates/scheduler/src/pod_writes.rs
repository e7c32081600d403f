//! Per-pod ordering of the scheduler's API writes.
//!
//! The failure handler writes a pod's `PodScheduled=False` condition in the background (waiting
//! for it on the scheduling thread would cost a round trip per unschedulable pod). Upstream
//! writes it synchronously, so a later attempt of the same pod can never bind before the
//! condition landed; without that guarantee a slow or retried patch could overwrite the
//! `PodScheduled=True` the binding sets, leaving a bound pod reported as unschedulable.
//! [`PodWrites`] restores the guarantee: writes for one pod run in the order they were
//! registered, and the binding cycle waits until every write registered before it finished.
//!
//! A write may retry for as long as it is needed: each is told when it is [`Superseded`], by a
//! later write for the same pod or by the pod's binding, and a superseded write stops after
//! the attempt it is making.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt, Shared};
use parking_lot::Mutex;
use tokio::sync::watch;

type Tail = Shared<BoxFuture<'static, ()>>;

/// A registered write and the switch that tells it it is no longer needed.
struct Registered {
    seq: u64,
    tail: Tail,
    superseded: watch::Sender<bool>,
}

/// The writes registered per pod UID, each chained after the previous one.
#[derive(Default)]
pub struct PodWrites {
    /// UID -> the last write registered.
    tails: Mutex<HashMap<String, Registered>>,
    next: AtomicU64,
}

/// Tells a write whether what it reports is obsolete: a later write for the same pod was
/// registered, or the pod's binding began.
pub struct Superseded(watch::Receiver<bool>);

impl Superseded {
    /// A switch and the signal it sets, for a write driven outside [`PodWrites`].
    #[cfg(test)]
    pub(crate) fn switch() -> (watch::Sender<bool>, Superseded) {
        let (tx, rx) = watch::channel(false);
        (tx, Superseded(rx))
    }

    /// True once the write is obsolete.
    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once the write is obsolete.
    pub async fn wait(&mut self) {
        // An error means the switch is gone, which only happens once a later write replaced it
        // (after setting it) or the pod was forgotten: obsolete either way.
        let _ = self.0.wait_for(|superseded| *superseded).await;
    }
}

impl PodWrites {
    /// Registers the write `make` builds for the pod `uid` now, to run once every write
    /// registered earlier for that pod has finished; those earlier writes are told they are
    /// superseded. The returned future completes with it; it must be polled (spawned) for the
    /// write to happen, and clones of it complete together.
    pub fn enqueue<F, Fut>(self: &Arc<Self>, uid: &str, make: F) -> impl Future<Output = ()> + Clone + Send + 'static
    where
        F: FnOnce(Superseded) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let (switch, superseded) = watch::channel(false);
        let write = make(Superseded(superseded));
        let mut tails = self.tails.lock();
        let previous = tails.get(uid).map(|r| {
            r.superseded.send_replace(true);
            r.tail.clone()
        });
        let this = Arc::downgrade(self);
        let key = uid.to_string();
        let tail = async move {
            if let Some(p) = previous {
                p.await;
            }
            write.await;
            // Forget the pod once its last registered write is done.
            if let Some(this) = this.upgrade() {
                let mut tails = this.tails.lock();
                if tails.get(&key).is_some_and(|r| r.seq == seq) {
                    tails.remove(&key);
                }
            }
        }
        .boxed()
        .shared();
        tails.insert(uid.to_string(), Registered { seq, tail: tail.clone(), superseded: switch });
        tail
    }

    /// Completes once every write registered so far for `uid` has finished.
    pub fn settled(&self, uid: &str) -> impl Future<Output = ()> + Send + 'static {
        let tail = self.tails.lock().get(uid).map(|r| r.tail.clone());
        async move {
            if let Some(t) = tail {
                t.await;
            }
        }
    }

    /// Tells every write registered so far for `uid` that it is superseded (the pod is being
    /// bound: what they report is obsolete) and completes once they have finished.
    pub fn supersede(&self, uid: &str) -> impl Future<Output = ()> + Send + 'static {
        let tail = self.tails.lock().get(uid).map(|r| {
            r.superseded.send_replace(true);
            r.tail.clone()
        });
        async move {
            if let Some(t) = tail {
                t.await;
            }
        }
    }

    /// Pods with writes not finished yet.
    pub fn pending(&self) -> usize {
        self.tails.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn writes_for_one_pod_run_in_registration_order_and_settle_waits_for_them() {
        let writes = Arc::new(PodWrites::default());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let l = log.clone();
        // The first write is held until released; the second must not overtake it.
        let first = writes.enqueue("u1", |_| async move {
            let _ = hold.await;
            l.lock().push("first");
        });
        let l = log.clone();
        let second = writes.enqueue("u1", |_| async move { l.lock().push("second") });
        let l = log.clone();
        let other = writes.enqueue("u2", |_| async move { l.lock().push("other pod") });
        tokio::spawn(first);
        tokio::spawn(second);
        tokio::spawn(other);
        let settled = tokio::spawn(writes.settled("u1"));
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Another pod's write is not held back by u1's.
        assert_eq!(*log.lock(), ["other pod"]);
        assert!(!settled.is_finished());
        release.send(()).unwrap();
        settled.await.unwrap();
        assert_eq!(*log.lock(), ["other pod", "first", "second"]);
        assert_eq!(writes.pending(), 0, "finished pods are forgotten");
    }

    #[tokio::test]
    async fn settled_without_writes_is_immediate() {
        let writes = PodWrites::default();
        tokio::time::timeout(Duration::from_secs(1), writes.settled("nobody")).await.unwrap();
    }

    /// A write that retries until it is superseded, logging each attempt.
    fn until_superseded(
        log: Arc<Mutex<Vec<String>>>,
        name: &'static str,
    ) -> impl FnOnce(Superseded) -> BoxFuture<'static, ()> {
        move |mut superseded| {
            async move {
                loop {
                    log.lock().push(format!("{name} attempt"));
                    if superseded.is_set() {
                        log.lock().push(format!("{name} stops"));
                        return;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                        _ = superseded.wait() => {}
                    }
                }
            }
            .boxed()
        }
    }

    #[tokio::test]
    async fn a_later_write_supersedes_an_earlier_one_still_retrying() {
        let writes = Arc::new(PodWrites::default());
        let log = Arc::new(Mutex::new(Vec::new()));
        let first = tokio::spawn(writes.enqueue("u1", until_superseded(log.clone(), "first")));
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!first.is_finished(), "a write nobody superseded keeps retrying");
        let l = log.clone();
        let second = tokio::spawn(writes.enqueue("u1", |_| async move { l.lock().push("second".into()) }));
        tokio::time::timeout(Duration::from_secs(10), second).await.unwrap().unwrap();
        assert!(first.is_finished());
        let log = log.lock().clone();
        let n = log.len();
        assert_eq!(log[n - 3..], ["first attempt", "first stops", "second"], "{log:?}");
        assert_eq!(writes.pending(), 0);
    }

    #[tokio::test]
    async fn the_binding_supersedes_the_pending_writes_and_waits_for_them() {
        let writes = Arc::new(PodWrites::default());
        let log = Arc::new(Mutex::new(Vec::new()));
        let first = tokio::spawn(writes.enqueue("u1", until_superseded(log.clone(), "first")));
        let other = tokio::spawn(writes.enqueue("u2", until_superseded(log.clone(), "other")));
        tokio::time::sleep(Duration::from_millis(30)).await;
        // settled() only waits: the write goes on retrying.
        assert!(tokio::time::timeout(Duration::from_millis(30), writes.settled("u1")).await.is_err());
        tokio::time::timeout(Duration::from_secs(10), writes.supersede("u1")).await.unwrap();
        assert!(log.lock().iter().any(|l| l == "first stops"));
        first.await.unwrap();
        assert!(!other.is_finished(), "another pod's write is not superseded");
        assert!(tokio::time::timeout(Duration::from_secs(10), writes.supersede("nobody")).await.is_ok());
        other.abort();
    }
}
