//! Per-pod ordering of the scheduler's API writes.
//!
//! The failure handler writes a pod's `PodScheduled=False` condition in the background (waiting
//! for it on the scheduling thread would cost a round trip per unschedulable pod). Upstream
//! writes it synchronously, so a later attempt of the same pod can never bind before the
//! condition landed; without that guarantee a slow or retried patch could overwrite the
//! `PodScheduled=True` the binding sets, leaving a bound pod reported as unschedulable.
//! [`PodWrites`] restores the guarantee: writes for one pod run in the order they were
//! registered, and the binding cycle waits until every write registered before it finished.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt, Shared};
use parking_lot::Mutex;

type Tail = Shared<BoxFuture<'static, ()>>;

/// The writes registered per pod UID, each chained after the previous one.
#[derive(Default)]
pub struct PodWrites {
    /// UID -> (registration number, completion of the last write registered).
    tails: Mutex<HashMap<String, (u64, Tail)>>,
    next: AtomicU64,
}

impl PodWrites {
    /// Registers `write` for the pod `uid` now, to run once every write registered earlier for
    /// that pod has finished. The returned future completes with it; it must be polled (spawned)
    /// for the write to happen.
    pub fn enqueue(
        self: &Arc<Self>,
        uid: &str,
        write: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let mut tails = self.tails.lock();
        let previous = tails.get(uid).map(|(_, t)| t.clone());
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
                if tails.get(&key).is_some_and(|(s, _)| *s == seq) {
                    tails.remove(&key);
                }
            }
        }
        .boxed()
        .shared();
        tails.insert(uid.to_string(), (seq, tail.clone()));
        tail
    }

    /// Completes once every write registered so far for `uid` has finished.
    pub fn settled(&self, uid: &str) -> impl Future<Output = ()> + Send + 'static {
        let tail = self.tails.lock().get(uid).map(|(_, t)| t.clone());
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
        let first = writes.enqueue("u1", async move {
            let _ = hold.await;
            l.lock().push("first");
        });
        let l = log.clone();
        let second = writes.enqueue("u1", async move { l.lock().push("second") });
        let l = log.clone();
        let other = writes.enqueue("u2", async move { l.lock().push("other pod") });
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
}
