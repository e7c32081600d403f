//! backoffQ: pods waiting out their backoff after a failed attempt, in two heaps — one for pods
//! some plugin rejected and one for pods that failed with an error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_framework::QueuedPodInfo;

use super::heap::{KeyedHeap, LessFn};

/// Width of the backoff ordering window (PopFromBackoffQ): expiries are truncated to it, and the
/// pods of one window are ordered like activeQ.
pub const ORDERING_WINDOW: Duration = Duration::from_secs(1);

/// How long pods back off, and the window grid expiries are aligned to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BackoffPolicy {
    pub(crate) initial: Duration,
    pub(crate) max: Duration,
    /// Origin of the window grid; the monotonic clock has no absolute zero.
    pub(crate) anchor: Instant,
}

impl BackoffPolicy {
    /// initial × 2^(count−1), capped at max; zero for count 0.
    pub(crate) fn duration(&self, count: u32) -> Duration {
        if count == 0 {
            return Duration::ZERO;
        }
        let shift = count - 1;
        let (initial, max) = (self.initial.as_nanos(), self.max.as_nanos());
        let max_shifted = if shift >= 128 { 0 } else { max >> shift };
        if initial > max_shifted {
            return self.max;
        }
        Duration::from_nanos(initial.checked_shl(shift).unwrap_or(0) as u64)
    }

    /// The start of the window containing `t`.
    pub(crate) fn align(&self, t: Instant) -> Instant {
        let w = ORDERING_WINDOW.as_nanos();
        match t.checked_duration_since(self.anchor) {
            Some(d) => self.anchor + Duration::from_nanos((d.as_nanos() / w * w) as u64),
            None => {
                let back = self.anchor.duration_since(t).as_nanos();
                let back = back.div_ceil(w) * w;
                self.anchor.checked_sub(Duration::from_nanos(back as u64)).unwrap_or(t)
            }
        }
    }

    /// When the pod's backoff ends (aligned to its window); `None` when it has no backoff.
    pub(crate) fn expiry(&self, qpi: &QueuedPodInfo) -> Option<Instant> {
        if self.max.is_zero() {
            return None;
        }
        let count =
            if qpi.consecutive_errors_count > 0 { qpi.consecutive_errors_count } else { qpi.unschedulable_count };
        if count == 0 {
            return None;
        }
        Some(self.align(qpi.timestamp + self.duration(count)))
    }

    /// True while the pod must still wait; a pod expiring within the current window still waits.
    pub(crate) fn is_backing_off(&self, qpi: &QueuedPodInfo, now: Instant) -> bool {
        self.expiry(qpi).is_some_and(|e| e >= self.align(now))
    }
}

/// True for pods that failed with an error rather than a rejection.
pub(crate) fn is_error_failure(qpi: &QueuedPodInfo) -> bool {
    qpi.unschedulable_plugins.is_empty() && qpi.pending_plugins.is_empty()
}

/// The two backoff heaps, used as one queue.
pub(crate) struct BackoffQueue {
    pub(crate) policy: BackoffPolicy,
    /// Rejected pods: by expiry, then like activeQ within a window.
    rejected: KeyedHeap<QueuedPodInfo>,
    /// Pods that failed with an error: by expiry only.
    errored: KeyedHeap<QueuedPodInfo>,
}

impl BackoffQueue {
    /// Empty heaps; `active_less` orders pods of the same window.
    pub(crate) fn new(policy: BackoffPolicy, active_less: LessFn<QueuedPodInfo>) -> Self {
        let by_expiry_then_priority: LessFn<QueuedPodInfo> = Arc::new(move |a, b| {
            let (ea, eb) = (policy.expiry(a), policy.expiry(b));
            if ea != eb {
                return ea < eb;
            }
            active_less(a, b)
        });
        let by_expiry: LessFn<QueuedPodInfo> = Arc::new(move |a, b| policy.expiry(a) < policy.expiry(b));
        BackoffQueue { policy, rejected: KeyedHeap::new(by_expiry_then_priority), errored: KeyedHeap::new(by_expiry) }
    }

    /// Adds to the heap matching the failure kind (`hold`: the error heap, which is never popped
    /// before the backoff ends). Returns false (and leaves the pod in the other heap) in the
    /// should-not-happen case of it being in both, so no metric is recorded.
    pub(crate) fn add(&mut self, key: String, qpi: QueuedPodInfo, hold: bool) -> bool {
        let (target, other) = if hold || is_error_failure(&qpi) {
            (&mut self.errored, &mut self.rejected)
        } else {
            (&mut self.rejected, &mut self.errored)
        };
        target.add_or_update(key.clone(), qpi);
        if other.delete(&key).is_some() {
            tracing::error!(pod = %key, "pod was in both backoff heaps");
            return false;
        }
        true
    }

    /// Changes the pod in place; false when absent.
    pub(crate) fn update_with(&mut self, key: &str, f: impl FnOnce(&mut QueuedPodInfo)) -> bool {
        if self.rejected.contains(key) {
            return self.rejected.update_with(key, f);
        }
        self.errored.update_with(key, f)
    }

    /// Removes the pod from whichever heap holds it.
    pub(crate) fn delete(&mut self, key: &str) -> Option<QueuedPodInfo> {
        self.rejected.delete(key).or_else(|| self.errored.delete(key))
    }

    /// The pod with this key.
    pub(crate) fn get(&self, key: &str) -> Option<&QueuedPodInfo> {
        self.rejected.get(key).or_else(|| self.errored.get(key))
    }

    /// True when either heap holds the pod.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.rejected.contains(key) || self.errored.contains(key)
    }

    /// Pods in both heaps.
    pub(crate) fn len(&self) -> usize {
        self.rejected.len() + self.errored.len()
    }

    /// Pods some plugin rejected (the heap [`BackoffQueue::pop_rejected`] takes from).
    pub(crate) fn rejected_len(&self) -> usize {
        self.rejected.len()
    }

    /// Takes the head of the rejected heap regardless of its expiry.
    pub(crate) fn pop_rejected(&mut self) -> Option<QueuedPodInfo> {
        self.rejected.pop()
    }

    /// Removes every pod whose backoff completed, rejected heap first.
    pub(crate) fn pop_all_completed(&mut self, now: Instant) -> Vec<QueuedPodInfo> {
        let policy = self.policy;
        let mut out = Vec::new();
        for heap in [&mut self.rejected, &mut self.errored] {
            while heap.peek().is_some_and(|q| !policy.is_backing_off(q, now)) {
                out.extend(heap.pop());
            }
        }
        out
    }

    /// All pods, rejected heap first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &QueuedPodInfo> {
        self.rejected.iter().chain(self.errored.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::PodInfo;

    fn policy(anchor: Instant) -> BackoffPolicy {
        BackoffPolicy { initial: Duration::from_secs(1), max: Duration::from_secs(10), anchor }
    }

    #[test]
    fn durations_double_and_cap() {
        let p = policy(Instant::now());
        let got: Vec<u64> = (1..=7).map(|c| p.duration(c).as_secs()).collect();
        assert_eq!(got, vec![1, 2, 4, 8, 10, 10, 10]);
        assert_eq!(p.duration(0), Duration::ZERO);
        assert_eq!(p.duration(200), Duration::from_secs(10), "huge counts do not overflow");
        let odd = BackoffPolicy { initial: Duration::from_millis(300), max: Duration::from_secs(1), ..p };
        assert_eq!(odd.duration(2), Duration::from_millis(600));
        assert_eq!(odd.duration(3), Duration::from_secs(1));
    }

    #[test]
    fn alignment_truncates_to_the_window_grid() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let p = policy(t0);
        assert_eq!(p.align(t0 + Duration::from_millis(1999)), t0 + Duration::from_secs(1));
        assert_eq!(p.align(t0 + Duration::from_secs(2)), t0 + Duration::from_secs(2));
        assert_eq!(p.align(t0 - Duration::from_millis(1)), t0 - Duration::from_secs(1));
        assert_eq!(p.align(t0 - Duration::from_secs(1)), t0 - Duration::from_secs(1));
    }

    #[test]
    fn backing_off_until_the_window_after_expiry() {
        let t0 = Instant::now();
        let p = policy(t0);
        let mut q = QueuedPodInfo::new(Arc::new(PodInfo::new(Arc::default())), t0 + Duration::from_millis(500));
        assert!(p.expiry(&q).is_none(), "no failures, no backoff");
        assert!(!p.is_backing_off(&q, t0));
        q.unschedulable_count = 1;
        // 0.5 s + 1 s = 1.5 s, truncated to the 1 s window.
        assert_eq!(p.expiry(&q), Some(t0 + Duration::from_secs(1)));
        assert!(p.is_backing_off(&q, t0 + Duration::from_millis(1999)));
        assert!(!p.is_backing_off(&q, t0 + Duration::from_secs(2)));
        q.consecutive_errors_count = 3;
        assert_eq!(p.expiry(&q), Some(t0 + Duration::from_secs(4)), "errors take precedence");
        let disabled = BackoffPolicy { max: Duration::ZERO, ..p };
        assert!(!disabled.is_backing_off(&q, t0));
    }
}
