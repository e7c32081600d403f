//! client-go's rate-limited work queue (`util/workqueue`) for the secure port's controllers: an
//! item is queued at most once however often it is added, is never processed by two workers at
//! once, and is queued again after `done` when it was re-added while processing. Failed items
//! come back with client-go's default controller back-off (per-item exponential 5 ms .. 1000 s,
//! overall 10 per second with bursts of 100). A named queue reports the `workqueue_*` series.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::metrics::workqueue::WorkqueueMetrics;

/// How often `unfinished_work_seconds` and `longest_running_processor_seconds` are refreshed.
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);
/// Per-item exponential back-off of failed items.
const BASE_DELAY: Duration = Duration::from_millis(5);
const MAX_DELAY: Duration = Duration::from_secs(1000);
/// Overall retry rate (token bucket) of failed items.
const RETRY_QPS: f64 = 10.0;
const RETRY_BURST: f64 = 100.0;

#[derive(Default)]
struct State {
    queue: VecDeque<String>,
    /// Items waiting to be processed (queued, or re-added while processing).
    dirty: HashSet<String>,
    processing: HashSet<String>,
    shutting_down: bool,
    /// When each queued item was first added (for `queue_duration_seconds`).
    add_times: HashMap<String, Instant>,
    /// When each item's processing started (for `work_duration_seconds`).
    processing_starts: HashMap<String, Instant>,
}

/// The back-off of failed items: the larger of a per-item exponential delay and an overall
/// token bucket (client-go's `DefaultTypedControllerRateLimiter`).
struct RateLimiter {
    failures: HashMap<String, u32>,
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    fn new() -> Self {
        RateLimiter { failures: HashMap::new(), tokens: RETRY_BURST, last: Instant::now() }
    }

    fn when(&mut self, item: &str) -> Duration {
        let failures = self.failures.entry(item.to_string()).or_insert(0);
        let exp = *failures;
        *failures += 1;
        let per_item = BASE_DELAY.checked_mul(1u32.checked_shl(exp).unwrap_or(u32::MAX)).unwrap_or(MAX_DELAY);
        let per_item = per_item.min(MAX_DELAY);
        // Token bucket: a token is reserved now; a negative balance is a wait.
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * RETRY_QPS).min(RETRY_BURST);
        self.last = now;
        self.tokens -= 1.0;
        let bucket =
            if self.tokens >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-self.tokens / RETRY_QPS) };
        per_item.max(bucket)
    }

    fn forget(&mut self, item: &str) {
        self.failures.remove(item);
    }
}

struct Inner {
    state: Mutex<State>,
    limiter: Mutex<RateLimiter>,
    notify: Notify,
    metrics: Option<WorkqueueMetrics>,
}

/// A rate-limited work queue of string keys. Cloning shares the queue.
#[derive(Clone)]
pub(crate) struct WorkQueue {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").finish_non_exhaustive()
    }
}

impl WorkQueue {
    /// A queue reporting its `workqueue_*` series under `name` (created at zero now, as
    /// client-go does). Must be called within a tokio runtime: a task refreshes the
    /// unfinished-work gauges until [`Self::shut_down`].
    pub(crate) fn named(name: &str) -> Self {
        let q = WorkQueue {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                limiter: Mutex::new(RateLimiter::new()),
                notify: Notify::new(),
                metrics: Some(WorkqueueMetrics::new(name)),
            }),
        };
        let weak = Arc::downgrade(&q.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(UNFINISHED_WORK_UPDATE_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                if !inner.update_unfinished_work() {
                    return;
                }
            }
        });
        q
    }

    /// Queues `item` unless it is already waiting; an item being processed is queued again
    /// when it is done.
    pub(crate) fn add(&self, item: &str) {
        let mut s = self.inner.state.lock();
        if s.shutting_down || s.dirty.contains(item) {
            return;
        }
        if let Some(m) = &self.inner.metrics {
            m.adds.inc();
            m.depth.inc();
        }
        s.add_times.entry(item.to_string()).or_insert_with(Instant::now);
        s.dirty.insert(item.to_string());
        if s.processing.contains(item) {
            return;
        }
        s.queue.push_back(item.to_string());
        drop(s);
        self.inner.notify.notify_one();
    }

    /// Queues `item` after `delay` (counted as a retry, as client-go's delaying queue does).
    pub(crate) fn add_after(&self, item: &str, delay: Duration) {
        if self.inner.state.lock().shutting_down {
            return;
        }
        if let Some(m) = &self.inner.metrics {
            m.retries.inc();
        }
        if delay.is_zero() {
            return self.add(item);
        }
        let q = self.clone();
        let item = item.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            q.add(&item);
        });
    }

    /// Queues a failed `item` again after its back-off.
    pub(crate) fn add_rate_limited(&self, item: &str) {
        let delay = self.inner.limiter.lock().when(item);
        self.add_after(item, delay);
    }

    /// Clears the back-off of `item` (it succeeded).
    pub(crate) fn forget(&self, item: &str) {
        self.inner.limiter.lock().forget(item);
    }

    /// The number of failures of `item` since it was last forgotten.
    #[cfg(test)]
    pub(crate) fn requeues(&self, item: &str) -> u32 {
        self.inner.limiter.lock().failures.get(item).copied().unwrap_or(0)
    }

    /// Waits for the next item; `None` once the queue is shut down and drained.
    pub(crate) async fn get(&self) -> Option<String> {
        loop {
            {
                let mut s = self.inner.state.lock();
                if let Some(item) = s.queue.pop_front() {
                    let now = Instant::now();
                    if let Some(m) = &self.inner.metrics {
                        m.depth.dec();
                        if let Some(added) = s.add_times.remove(&item) {
                            m.queue_duration.observe(now.duration_since(added).as_secs_f64());
                        }
                    }
                    s.processing_starts.insert(item.clone(), now);
                    s.processing.insert(item.clone());
                    s.dirty.remove(&item);
                    return Some(item);
                }
                if s.shutting_down {
                    return None;
                }
            }
            // A notification sent since the check above is kept as a permit.
            self.inner.notify.notified().await;
        }
    }

    /// Marks `item` processed; if it was added meanwhile it is queued again.
    pub(crate) fn done(&self, item: &str) {
        let mut s = self.inner.state.lock();
        if let Some(started) = s.processing_starts.remove(item) {
            if let Some(m) = &self.inner.metrics {
                m.work_duration.observe(started.elapsed().as_secs_f64());
            }
        }
        s.processing.remove(item);
        if s.dirty.contains(item) {
            s.queue.push_back(item.to_string());
            drop(s);
            self.inner.notify.notify_one();
        }
    }

    /// Stops accepting items; workers see `None` once the queue is empty. (The server's
    /// controllers are aborted instead, and their queues dropped.)
    #[cfg(test)]
    pub(crate) fn shut_down(&self) {
        self.inner.state.lock().shutting_down = true;
        self.inner.notify.notify_waiters();
        self.inner.notify.notify_one();
    }
}

impl Inner {
    /// Refreshes the unfinished-work gauges; false once shut down.
    fn update_unfinished_work(&self) -> bool {
        let s = self.state.lock();
        if let Some(m) = &self.metrics {
            let now = Instant::now();
            let ages = s.processing_starts.values().map(|t| now.duration_since(*t).as_secs_f64());
            let (total, oldest) = ages.fold((0.0f64, 0.0f64), |(t, o), a| (t + a, o.max(a)));
            m.unfinished_work_seconds.set(total);
            m.longest_running_processor_seconds.set(oldest);
        }
        !s.shutting_down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn items_are_deduplicated_and_requeued_when_added_while_processing() {
        let q = WorkQueue::named("ksched-test-dedup");
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.get().await.as_deref(), Some("a"));
        // Re-added while processing: not handed out again until done.
        q.add("a");
        assert_eq!(q.get().await.as_deref(), Some("b"));
        q.done("b");
        q.done("a");
        assert_eq!(q.get().await.as_deref(), Some("a"));
        q.done("a");
        q.shut_down();
        assert_eq!(q.get().await, None);
        let m = WorkqueueMetrics::new("ksched-test-dedup");
        // a, b, a (while processing): three adds; the duplicate add was dropped.
        assert_eq!(m.adds.get(), 3);
        assert_eq!(m.depth.get(), 0);
    }

    #[tokio::test]
    async fn failures_back_off_exponentially_until_forgotten() {
        let q = WorkQueue::named("ksched-test-backoff");
        let mut l = RateLimiter::new();
        assert_eq!(l.when("x"), Duration::from_millis(5));
        assert_eq!(l.when("x"), Duration::from_millis(10));
        assert_eq!(l.when("x"), Duration::from_millis(20));
        l.forget("x");
        assert_eq!(l.when("x"), Duration::from_millis(5));
        for _ in 0..40 {
            l.when("y");
        }
        assert_eq!(l.when("y"), MAX_DELAY);

        q.add_rate_limited("k");
        assert_eq!(q.requeues("k"), 1);
        assert_eq!(q.get().await.as_deref(), Some("k"));
        q.forget("k");
        q.done("k");
        assert_eq!(q.requeues("k"), 0);
        assert_eq!(WorkqueueMetrics::new("ksched-test-backoff").retries.get(), 1);
        q.shut_down();
    }

    #[tokio::test]
    async fn the_bucket_limits_bursts_of_retries() {
        let mut l = RateLimiter::new();
        // 100 distinct items fail at once: the bucket's burst absorbs them ...
        for i in 0..100 {
            assert!(l.when(&format!("i{i}")) <= Duration::from_millis(6));
        }
        // ... the next waits for a token (100 ms at 10 per second).
        assert!(l.when("late") >= Duration::from_millis(90));
    }
}
