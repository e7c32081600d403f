//! The scheduling queue (upstream `backend/queue/scheduling_queue.go`): upstream's PriorityQueue with queueing hints and PopFromBackoffQ on.
//!
//! Three pools hold the pods waiting to be scheduled:
//! - **activeQ**: ready now, ordered by the QueueSort plugin;
//! - **backoffQ**: failed recently and waiting out their backoff (rejected pods and errored pods
//!   in separate heaps);
//! - **unschedulablePods**: no event since their failure could help them, or a PreEnqueue plugin
//!   holds them back (gated).
//!
//! Cluster events move pods out of unschedulablePods when a queueing hint of a plugin that
//! rejected them says the event may help. Events that arrive while a pod is being scheduled are
//! remembered and replayed when it comes back, so a failure caused by stale data is retried.
//!
//! Everything is synchronous behind one mutex; `pop` blocks on a condition variable. Time comes
//! from an injected [`Clock`].

mod active_queue;
mod backoff_queue;
mod clock;
mod heap;
mod nominator;
mod unschedulable_pods;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ksched_framework::batch::PodSignature;
use ksched_framework::events::QueueingHintFn;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEvent, Code, EventObject, EventResource, ExtensionPoint, Framework, Plugin, PodInfo,
    QueuedPodInfo, QueueingHint,
};
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::cluster_events::{
    self, BACKOFF_COMPLETE, FORCE_ACTIVATE, FORCE_ACTIVATE_LABEL, POP_FROM_BACKOFF_Q, SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT, UNSCHEDULED_POD_ADD, UNSCHEDULED_POD_UPDATE,
};
use active_queue::ActiveQueue;
use backoff_queue::{is_error_failure, BackoffPolicy, BackoffQueue};
use heap::LessFn;
use nominator::{Nomination, Nominator};
use unschedulable_pods::UnschedulablePods;

pub use backoff_queue::ORDERING_WINDOW;
pub use clock::{Clock, FakeClock, RealClock};
pub use nominator::PodLister;

/// Default `podInitialBackoffSeconds`.
pub const DEFAULT_POD_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Default `podMaxBackoffSeconds`.
pub const DEFAULT_POD_MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Default `--pod-max-in-unschedulable-pods-duration`.
pub const DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION: Duration = Duration::from_secs(5 * 60);
/// How often unschedulablePods is checked for pods stuck longer than the maximum.
pub const UNSCHEDULABLE_FLUSH_INTERVAL: Duration = Duration::from_secs(30);
/// Pseudo-plugin put in `unschedulable_plugins` when extenders rejected nodes; any event of the
/// resources extenders may look at can requeue such pods.
pub const EXTENDER_PLUGIN: &str = "Extender";
/// Profile assumed for pods without `spec.schedulerName`.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// Timing knobs of the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueOptions {
    /// Backoff after the first failure.
    pub pod_initial_backoff: Duration,
    /// Cap of the exponential backoff; zero disables backoff.
    pub pod_max_backoff: Duration,
    /// How long a pod may sit in unschedulablePods before it is retried regardless of events.
    pub pod_max_in_unschedulable_pods_duration: Duration,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            pod_initial_backoff: DEFAULT_POD_INITIAL_BACKOFF,
            pod_max_backoff: DEFAULT_POD_MAX_BACKOFF,
            pod_max_in_unschedulable_pods_duration: DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION,
        }
    }
}

/// Hooks for the queue's metrics; every method defaults to doing nothing.
pub trait QueueMetrics: Send + Sync {
    /// A pod entered a pool (`active`, `backoff` or `unschedulable`) because of `event`
    /// (`scheduler_queue_incoming_pods_total`).
    fn incoming_pod(&self, _queue: &str, _event: &str) {}
    /// Current pool sizes (`scheduler_pending_pods`), reported whenever they change.
    fn pending_pods(&self, _active: usize, _backoff: usize, _unschedulable: usize, _gated: usize) {}
    /// A queueing hint ran; `result` is `Queue`, `QueueSkip` or `Error`
    /// (`scheduler_queueing_hint_execution_duration_seconds`).
    fn queueing_hint(&self, _plugin: &str, _event: &str, _result: &str, _seconds: f64) {}
    /// In-flight events changed by `delta`; `PodPopped` counts in-flight pods
    /// (`scheduler_inflight_events`).
    fn in_flight_events(&self, _event: &str, _delta: i64) {}
    /// Pods rejected by `plugin` changed by `delta` (`scheduler_unschedulable_pods`).
    fn unschedulable_reason(&self, _plugin: &str, _profile: &str, _delta: i64) {}
}

/// Metrics sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopQueueMetrics;
impl QueueMetrics for NoopQueueMetrics {}

/// Sizes of the pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PendingCounts {
    /// Pods in activeQ.
    pub active: usize,
    /// Pods in both backoff heaps.
    pub backoff: usize,
    /// Rejected pods in unschedulablePods.
    pub unschedulable: usize,
    /// Gated pods in unschedulablePods.
    pub gated: usize,
}

/// The pool a pod ended up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueName {
    /// activeQ.
    Active,
    /// backoffQ.
    Backoff,
    /// unschedulablePods.
    Unschedulable,
}

impl QueueName {
    /// The metric label of the pool.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueName::Active => "active",
            QueueName::Backoff => "backoff",
            QueueName::Unschedulable => "unschedulable",
        }
    }
}

/// What an event means for a rejected pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// The event cannot help: stay in unschedulablePods.
    Skip,
    /// Retry, but only once the backoff is over.
    AfterBackoff,
    /// A plugin the pod is waiting on (Pending) says go: retry now.
    Immediately,
}

struct HintFn {
    plugin: String,
    hint: Option<QueueingHintFn>,
}

/// One registered event with the hints of every plugin that registered it.
struct Registration {
    event: ClusterEvent,
    hints: Vec<HintFn>,
}

struct Profile {
    framework: Arc<Framework>,
    pre_enqueue: Vec<(String, Arc<dyn Plugin>)>,
    registrations: Vec<Registration>,
}

/// The events an extender-rejected pod may be requeued by (upstream's unrolled wildcard).
const EXTENDER_RESOURCES: [EventResource; 11] = [
    EventResource::Pod,
    EventResource::Node,
    EventResource::PersistentVolume,
    EventResource::PersistentVolumeClaim,
    EventResource::CsiNode,
    EventResource::CsiDriver,
    EventResource::CsiStorageCapacity,
    EventResource::StorageClass,
    EventResource::ResourceClaim,
    EventResource::DeviceClass,
    EventResource::PodGroup,
];

struct State {
    active: ActiveQueue,
    backoff: BackoffQueue,
    unschedulable: UnschedulablePods,
    nominator: Nominator,
    closed: bool,
    reported: Option<PendingCounts>,
}

/// The scheduling queue shared by the event handlers, the scheduling loop and the flushers.
pub struct SchedulingQueue {
    state: Mutex<State>,
    pop_ready: Condvar,
    stop: Condvar,
    profiles: HashMap<String, Profile>,
    plugin_events: HashMap<String, Vec<ClusterEvent>>,
    policy: BackoffPolicy,
    opts: QueueOptions,
    clock: Arc<dyn Clock>,
    metrics: Arc<dyn QueueMetrics>,
    lister: RwLock<Option<PodLister>>,
}

impl std::fmt::Debug for SchedulingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulingQueue").field("opts", &self.opts).field("pending", &self.pending_counts()).finish()
    }
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn scheduler_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or(DEFAULT_SCHEDULER_NAME)
}

fn rejectors(q: &QueuedPodInfo) -> BTreeSet<&str> {
    q.unschedulable_plugins.iter().chain(&q.pending_plugins).map(String::as_str).collect()
}

fn has_rejectors(q: &QueuedPodInfo) -> bool {
    !is_error_failure(q)
}

impl SchedulingQueue {
    /// A queue for the given profiles (by scheduler name; they share one QueueSort plugin).
    pub fn new(
        profiles: HashMap<String, Arc<Framework>>,
        opts: QueueOptions,
        clock: Arc<dyn Clock>,
        metrics: Arc<dyn QueueMetrics>,
    ) -> Self {
        // Upstream sorts with the first configured profile's plugin; they must all be the same.
        let first = profiles.iter().min_by(|a, b| a.0.cmp(b.0)).map(|(_, fw)| fw.clone());
        let less: LessFn<QueuedPodInfo> = match first {
            Some(fw) => Arc::new(move |a, b| fw.less(a, b)),
            None => Arc::new(|_, _| false),
        };
        let mut plugin_events: HashMap<String, Vec<ClusterEvent>> = HashMap::new();
        let built = profiles
            .into_iter()
            .map(|(name, fw)| {
                let profile = build_profile(fw, &mut plugin_events);
                (name, profile)
            })
            .collect();
        let policy =
            BackoffPolicy { initial: opts.pod_initial_backoff, max: opts.pod_max_backoff, anchor: clock.now() };
        let queue = SchedulingQueue {
            state: Mutex::new(State {
                active: ActiveQueue::new(less.clone()),
                backoff: BackoffQueue::new(policy, less),
                unschedulable: UnschedulablePods::default(),
                nominator: Nominator::default(),
                closed: false,
                reported: None,
            }),
            pop_ready: Condvar::new(),
            stop: Condvar::new(),
            profiles: built,
            plugin_events,
            policy,
            opts,
            clock,
            metrics,
            lister: RwLock::new(None),
        };
        queue.report(&mut queue.state.lock());
        queue
    }

    /// Gives the nominator the informer's pod lister: nominations of pods missing from it or
    /// already bound are then ignored, as upstream does.
    pub fn set_pod_lister(&self, lister: PodLister) {
        *self.lister.write() = Some(lister);
    }

    /// The options the queue was built with.
    pub fn options(&self) -> QueueOptions {
        self.opts
    }

    // ---- transitions -------------------------------------------------------------------------

    /// A new unscheduled pod: PreEnqueue decides between activeQ and the gated pool.
    pub fn add(&self, pod: Arc<Pod>) {
        // Built (and signed) before taking the lock the scheduling loop pops from.
        let q = self.new_queued_pod_info(pod);
        let mut st = self.state.lock();
        let added = self.move_to_active(&mut st, q, &UNSCHEDULED_POD_ADD.label(), false, false);
        self.finish(&mut st, added);
    }

    /// An update of an unscheduled pod (upstream `PriorityQueue.Update`).
    pub fn update(&self, old: &Arc<Pod>, new: Arc<Pod>) {
        let mut st = self.state.lock();
        let events = cluster_events::pod_update_events(old, &new);
        let old_obj = EventObject::Pod(old.clone());
        let new_obj = EventObject::Pod(new.clone());

        // Its cycle will replay these when it comes back.
        if st.active.in_flight.add_events_if_pod_in_flight(
            pod_uid(&new),
            Some(old_obj.clone()),
            Some(new_obj.clone()),
            &events,
        ) {
            for e in &events {
                self.metrics.in_flight_events(&e.label(), 1);
            }
            return;
        }

        let lister = self.lister.read().clone();
        let old_key = pod_key(old);
        let info = Arc::new(PodInfo::new(new.clone()));
        // The update may change what the pod's signature covers: sign it again (upstream
        // clears and recomputes it in every pool).
        let signature = self.sign(&info);
        let replace = |q: &mut QueuedPodInfo| {
            q.pod_info = info.clone();
            q.signature = signature.clone();
        };
        if st.active.heap.update_with(&old_key, replace) || st.backoff.update_with(&old_key, replace) {
            st.nominator.update(old, &info, lister.as_ref());
            return;
        }

        let key = pod_key(&new);
        if st.unschedulable.update_with(&key, replace) {
            st.nominator.update(old, &info, lister.as_ref());
            let mut activated = false;
            for e in &events {
                let Some(q) = st.unschedulable.remove(&key) else { break };
                let strategy = self.worth_requeuing(&q, e, Some(&old_obj), Some(&new_obj));
                let queue = self.requeue(&mut st, q, strategy, &e.label(), true);
                if queue != QueueName::Unschedulable {
                    tracing::debug!(pod = %key, event = %e, queue = queue.as_str(), "pod moved because it was updated");
                    activated = true;
                    break;
                }
            }
            self.finish(&mut st, activated);
            return;
        }

        let q = self.new_queued_pod_info(new);
        let added = self.move_to_active(&mut st, q, &UNSCHEDULED_POD_UPDATE.label(), false, false);
        self.finish(&mut st, added);
    }

    /// The pod was deleted (or bound by someone else): forget it everywhere.
    pub fn delete(&self, pod: &Pod) {
        let mut st = self.state.lock();
        st.nominator.delete(pod);
        let key = pod_key(pod);
        if st.active.heap.delete(&key).is_none() && st.backoff.delete(&key).is_none() {
            if let Some(q) = st.unschedulable.remove(&key) {
                for plugin in rejectors(&q) {
                    self.metrics.unschedulable_reason(plugin, scheduler_name(q.pod()), -1);
                }
            }
        }
        self.report(&mut st);
    }

    /// The next pod to schedule; blocks while nothing is poppable. `None` once closed.
    ///
    /// When activeQ is empty the head of the rejected-pods backoff heap is taken even though its
    /// backoff has not expired (PopFromBackoffQ).
    pub fn pop(&self) -> Option<QueuedPodInfo> {
        self.pop_until(None)
    }

    /// Like [`SchedulingQueue::pop`] but gives up after `timeout` (real time).
    pub fn pop_timeout(&self, timeout: Duration) -> Option<QueuedPodInfo> {
        self.pop_until(Some(Instant::now() + timeout))
    }

    fn pop_until(&self, deadline: Option<Instant>) -> Option<QueuedPodInfo> {
        let mut st = self.state.lock();
        loop {
            if st.closed {
                return None;
            }
            let mut next = st.active.heap.pop();
            if next.is_none() {
                next = st.backoff.pop_rejected();
                if next.is_some() {
                    self.metrics.incoming_pod(QueueName::Active.as_str(), POP_FROM_BACKOFF_Q);
                }
            }
            if let Some(mut q) = next {
                if q.initial_attempt_timestamp.is_none() {
                    q.initial_attempt_timestamp = Some(self.clock.now());
                }
                if let Err(e) = st.active.move_to_in_flight(&mut q) {
                    tracing::error!(error = %e, "discarding the popped pod");
                    continue;
                }
                self.metrics.in_flight_events("PodPopped", 1);
                for plugin in rejectors(&q) {
                    self.metrics.unschedulable_reason(plugin, scheduler_name(q.pod()), -1);
                }
                self.report(&mut st);
                return Some(q);
            }
            match deadline {
                None => self.pop_ready.wait(&mut st),
                Some(d) => {
                    if Instant::now() >= d {
                        return None;
                    }
                    self.pop_ready.wait_until(&mut st, d);
                }
            }
        }
    }

    /// The pod with this UID finished its cycle; the events kept for it are released.
    pub fn done(&self, uid: &str) {
        let mut st = self.state.lock();
        self.finish_in_flight(&mut st, uid);
    }

    /// Requeues a pod whose attempt failed (upstream `AddUnschedulableIfNotPresent`). `unschedulable_plugins`/`pending_plugins`
    /// name the rejectors; both empty means an error, which takes the error backoff. Events
    /// received during its cycle are evaluated against the rejectors' hints. Also ends the cycle.
    pub fn add_unschedulable_if_not_present(&self, qpi: QueuedPodInfo, scheduling_cycle: u64) -> Result<(), String> {
        let mut st = self.state.lock();
        // Closing ended every cycle in flight, and nothing will pop the pod again: a cycle that
        // fails during shutdown has nowhere to go (without this it would be reported as a pod
        // missing from the in-flight list).
        if st.closed {
            return Ok(());
        }
        let uid = qpi.pod_info.uid().to_string();
        let result = self.requeue_failed(&mut st, qpi, scheduling_cycle);
        self.finish_in_flight(&mut st, &uid);
        self.report(&mut st);
        result
    }

    fn requeue_failed(&self, st: &mut State, mut q: QueuedPodInfo, cycle: u64) -> Result<(), String> {
        let key = q.pod_info.key();
        if st.unschedulable.contains(&key) {
            return Err(format!("Pod {key} is already present in unschedulable queue"));
        }
        if st.active.heap.contains(&key) {
            return Err(format!("Pod {key} is already present in the active queue"));
        }
        if st.backoff.contains(&key) {
            return Err(format!("Pod {key} is already present in the backoff queue"));
        }
        if has_rejectors(&q) {
            q.unschedulable_count += 1;
            q.consecutive_errors_count = 0;
        } else {
            q.consecutive_errors_count += 1;
        }
        q.timestamp = self.clock.now();
        q.was_flushed_from_unschedulable = false;
        for plugin in rejectors(&q) {
            self.metrics.unschedulable_reason(plugin, scheduler_name(q.pod()), 1);
        }
        let strategy = self.strategy_for_in_flight(st, &q);
        let queue = self.requeue(st, q, strategy, SCHEDULE_ATTEMPT_FAILURE, false);
        tracing::debug!(pod = %key, cycle, ?strategy, queue = queue.as_str(), "pod requeued after a failed attempt");
        if queue != QueueName::Unschedulable {
            self.pop_ready.notify_all();
        }
        Ok(())
    }

    /// A cluster event: moves the unschedulable pods (optionally only those `pre_check` accepts)
    /// that the rejectors' hints say may now fit, and records the event for in-flight pods.
    pub fn move_all_to_active_or_backoff(
        &self,
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
        pre_check: Option<&dyn Fn(&Pod) -> bool>,
    ) {
        let mut st = self.state.lock();
        if !self.is_event_of_interest(&event) {
            return;
        }
        // Gated pods can only be released by their gate's events, and usually all share one
        // gate: decide per gate once, so thousands of gated pods cost a string compare each
        // instead of a key copy and a second lookup in move_pods.
        let mut gates: Vec<(&str, bool)> = Vec::new();
        let keys: Vec<String> = st
            .unschedulable
            .iter()
            .filter(|(_, q)| match q.gating_plugin.as_deref() {
                None => true,
                Some(gate) => match gates.iter().find(|(g, _)| *g == gate) {
                    Some(&(_, open)) => open,
                    None => {
                        let open = self.gate_listens_to(gate, &event);
                        gates.push((gate, open));
                        open
                    }
                },
            })
            .filter(|(_, q)| pre_check.is_none_or(|f| f(q.pod())))
            .map(|(k, _)| k.clone())
            .collect();
        self.move_pods(&mut st, &keys, event, old, new);
        self.report(&mut st);
    }

    /// A pod got bound (the `AssignedPodAdd` event).
    pub fn assigned_pod_added(&self, pod: &Arc<Pod>) {
        let new = EventObject::Pod(pod.clone());
        self.move_all_to_active_or_backoff(cluster_events::ASSIGNED_POD_ADD, None, Some(&new), None);
    }

    /// A bound pod changed: one move per derived event.
    pub fn assigned_pod_updated(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        let (old_obj, new_obj) = (EventObject::Pod(old.clone()), EventObject::Pod(new.clone()));
        for e in cluster_events::pod_update_events(old, new) {
            self.move_all_to_active_or_backoff(e, Some(&old_obj), Some(&new_obj), None);
        }
    }

    /// Moves these pods from unschedulablePods or backoffQ to activeQ (PreEnqueue permitting);
    /// pods in flight get a `ForceActivate` event so they come straight back if they fail.
    pub fn activate(&self, pods: &[Arc<Pod>]) {
        let mut st = self.state.lock();
        let mut activated = false;
        for pod in pods {
            if self.activate_one(&mut st, pod) {
                activated = true;
                continue;
            }
            let new = Some(EventObject::Pod(pod.clone()));
            if st.active.in_flight.add_events_if_pod_in_flight(pod_uid(pod), None, new, &[FORCE_ACTIVATE]) {
                self.metrics.in_flight_events(FORCE_ACTIVATE_LABEL, 1);
            }
        }
        self.finish(&mut st, activated);
    }

    /// Takes this pod out of the queue as if popped (activated first, then in flight), for a
    /// pod-group cycle gathering the group's members. `None` when the queue does not hold it.
    pub fn pop_specific_pod(&self, pod: &Pod) -> Option<QueuedPodInfo> {
        let mut st = self.state.lock();
        let activated = self.activate_one(&mut st, pod);
        let key = pod_key(pod);
        let Some(mut q) = st.active.heap.delete(&key) else {
            self.finish(&mut st, activated);
            return None;
        };
        if q.initial_attempt_timestamp.is_none() {
            q.initial_attempt_timestamp = Some(self.clock.now());
        }
        if let Err(e) = st.active.move_to_in_flight(&mut q) {
            tracing::error!(error = %e, "discarding the popped pod");
            self.finish(&mut st, activated);
            return None;
        }
        self.metrics.in_flight_events("PodPopped", 1);
        for plugin in rejectors(&q) {
            self.metrics.unschedulable_reason(plugin, scheduler_name(q.pod()), -1);
        }
        self.report(&mut st);
        Some(q)
    }

    /// Re-runs PreEnqueue for those of `pods` held back by the gate `plugin`; released pods go
    /// to backoffQ or activeQ as after a cluster event.
    pub fn release_gated(&self, pods: &[Arc<Pod>], plugin: &str) {
        let mut st = self.state.lock();
        let mut activated = false;
        for pod in pods {
            let key = pod_key(pod);
            if st.unschedulable.get(&key).is_none_or(|q| q.gating_plugin.as_deref() != Some(plugin)) {
                continue;
            }
            let Some(q) = st.unschedulable.remove(&key) else { continue };
            activated |=
                self.requeue(&mut st, q, Strategy::AfterBackoff, FORCE_ACTIVATE_LABEL, true) == QueueName::Active;
        }
        self.finish(&mut st, activated);
    }

    fn activate_one(&self, st: &mut State, pod: &Pod) -> bool {
        let key = pod_key(pod);
        if let Some(q) = st.unschedulable.remove(&key) {
            return self.move_to_active(st, q, FORCE_ACTIVATE_LABEL, false, true);
        }
        match st.backoff.delete(&key) {
            Some(q) => self.move_to_active(st, q, FORCE_ACTIVATE_LABEL, true, false),
            None => false,
        }
    }

    /// Moves every pod whose backoff completed to activeQ (run every second).
    pub fn flush_backoff_q_completed(&self) {
        let mut st = self.state.lock();
        let now = self.clock.now();
        let mut activated = false;
        for q in st.backoff.pop_all_completed(now) {
            activated |= self.move_to_active(&mut st, q, BACKOFF_COMPLETE, true, false);
        }
        self.finish(&mut st, activated);
    }

    /// Retries pods that sat in unschedulablePods longer than the maximum (run every 30 s).
    pub fn flush_unschedulable_pods_leftover(&self) {
        self.flush_unschedulable_pods_older_than(self.opts.pod_max_in_unschedulable_pods_duration);
    }

    /// Retries pods that sat in unschedulablePods longer than `max`, as the leftover flush
    /// does for the configured maximum (a harness passes zero to retry them all at once).
    pub fn flush_unschedulable_pods_older_than(&self, max: Duration) {
        let mut st = self.state.lock();
        let now = self.clock.now();
        let stale: Vec<String> = st
            .unschedulable
            .iter()
            .filter(|(_, q)| now.saturating_duration_since(q.timestamp) > max)
            .map(|(k, _)| k.clone())
            .collect();
        if stale.is_empty() {
            return;
        }
        for key in &stale {
            // Set even when the move below skips the pod (a gated one), as upstream does.
            st.unschedulable.update_with(key, |q| q.was_flushed_from_unschedulable = true);
        }
        self.move_pods(&mut st, &stale, UNSCHEDULABLE_TIMEOUT, None, None);
        self.report(&mut st);
    }

    /// Runs both flushers on a thread until [`SchedulingQueue::close`]: backoff every second,
    /// aligned to the ordering windows; leftovers immediately and then every 30 s.
    pub fn spawn_flushers(self: &Arc<Self>) -> JoinHandle<()> {
        let queue = Arc::clone(self);
        std::thread::Builder::new()
            .name("queue-flushers".into())
            .spawn(move || queue.run_flushers())
            .expect("spawning the queue flusher thread")
    }

    fn run_flushers(&self) {
        let clock_now = self.clock.now();
        let to_next_window = self.policy.align(clock_now + ORDERING_WINDOW).saturating_duration_since(clock_now);
        let start = Instant::now();
        let mut next_backoff = start + to_next_window;
        let mut next_leftover = start;
        loop {
            {
                let mut st = self.state.lock();
                loop {
                    if st.closed {
                        return;
                    }
                    let next = next_backoff.min(next_leftover);
                    if Instant::now() >= next {
                        break;
                    }
                    self.stop.wait_until(&mut st, next);
                }
            }
            let now = Instant::now();
            if now >= next_leftover {
                self.flush_unschedulable_pods_leftover();
                next_leftover = Instant::now() + UNSCHEDULABLE_FLUSH_INTERVAL;
            }
            if now >= next_backoff {
                self.flush_backoff_q_completed();
                // Like a ticker: missed ticks are dropped, the grid is kept.
                let now = Instant::now();
                while next_backoff <= now {
                    next_backoff += ORDERING_WINDOW;
                }
            }
        }
    }

    /// Wakes every blocked `pop` (which then returns `None`), stops the flushers and drops the
    /// in-flight bookkeeping.
    pub fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        for uid in st.active.in_flight.uids() {
            self.finish_in_flight(&mut st, &uid);
        }
        self.pop_ready.notify_all();
        self.stop.notify_all();
    }

    /// True once [`SchedulingQueue::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    // ---- inspection --------------------------------------------------------------------------

    /// Number of pops so far.
    pub fn scheduling_cycle(&self) -> u64 {
        self.state.lock().active.scheduling_cycle
    }

    /// Sizes of the pools.
    pub fn pending_counts(&self) -> PendingCounts {
        counts(&self.state.lock())
    }

    /// Whether an open queue's [`SchedulingQueue::pop`] would hand out a pod now: activeQ holds
    /// one, or backoffQ holds a pod some plugin rejected (PopFromBackoffQ).
    pub fn has_poppable(&self) -> bool {
        let st = self.state.lock();
        !st.active.heap.is_empty() || st.backoff.rejected_len() > 0
    }

    /// Every pod waiting in a pool (activeQ, then backoffQ, then unschedulablePods).
    pub fn pending_pods(&self) -> Vec<Arc<Pod>> {
        let st = self.state.lock();
        let active = st.active.heap.iter().map(|q| q.pod_info.pod.clone());
        let backoff = st.backoff.iter().map(|q| q.pod_info.pod.clone());
        let unsched = st.unschedulable.iter().map(|(_, q)| q.pod_info.pod.clone());
        active.chain(backoff).chain(unsched).collect()
    }

    /// `activeQ:N; backoffQ:N; unschedulablePods:N`, as the debugger prints it.
    pub fn pending_summary(&self) -> String {
        let c = self.pending_counts();
        format!("activeQ:{}; backoffQ:{}; unschedulablePods:{}", c.active, c.backoff, c.unschedulable + c.gated)
    }

    /// Pods in activeQ.
    pub fn pods_in_active_q(&self) -> Vec<Arc<Pod>> {
        self.state.lock().active.heap.iter().map(|q| q.pod_info.pod.clone()).collect()
    }

    /// Pods in backoffQ.
    pub fn pods_in_backoff_q(&self) -> Vec<Arc<Pod>> {
        self.state.lock().backoff.iter().map(|q| q.pod_info.pod.clone()).collect()
    }

    /// Pods in unschedulablePods (gated ones included).
    pub fn unschedulable_pods(&self) -> Vec<Arc<Pod>> {
        self.state.lock().unschedulable.iter().map(|(_, q)| q.pod_info.pod.clone()).collect()
    }

    /// Pods being scheduled right now.
    pub fn in_flight_pods(&self) -> Vec<Arc<Pod>> {
        self.state.lock().active.in_flight.pods()
    }

    /// The queued entry of a pod, wherever it waits.
    pub fn get_pod(&self, namespace: &str, name: &str) -> Option<QueuedPodInfo> {
        self.get_pod_and_pool(namespace, name).map(|(q, _)| q)
    }

    /// The queued entry of a pod and the pool it waits in.
    pub fn get_pod_and_pool(&self, namespace: &str, name: &str) -> Option<(QueuedPodInfo, QueueName)> {
        let st = self.state.lock();
        let key = format!("{namespace}/{name}");
        let (q, pool) = if let Some(q) = st.backoff.get(&key) {
            (q, QueueName::Backoff)
        } else if let Some(q) = st.unschedulable.get(&key) {
            (q, QueueName::Unschedulable)
        } else {
            (st.active.heap.get(&key)?, QueueName::Active)
        };
        Some((q.clone(), pool))
    }

    /// When the pod's backoff ends (aligned to the ordering window); `None` without backoff.
    pub fn backoff_expiry(&self, qpi: &QueuedPodInfo) -> Option<Instant> {
        self.policy.expiry(qpi)
    }

    // ---- nominator (nominator.go) --------------------------------------------------------------------

    /// Nominates a pod: to `nominated_node`, or (None) to its `status.nominatedNodeName`.
    pub fn add_nominated_pod(&self, pi: Arc<PodInfo>, nominated_node: Option<String>) {
        let lister = self.lister.read().clone();
        let nomination = nominated_node.map_or(Nomination::FromStatus, Nomination::Override);
        self.state.lock().nominator.add(&pi, nomination, lister.as_ref());
    }

    /// Removes the pod's nomination, if any.
    pub fn delete_nominated_pod_if_exists(&self, pod: &Pod) {
        self.state.lock().nominator.delete(pod);
    }

    /// The pods nominated to a node, as the freshest PodInfo a pool holds; a pod no pool holds
    /// (e.g. in flight) is returned as a bare identity, as upstream does.
    pub fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        let st = self.state.lock();
        st.nominator
            .for_node(node)
            .into_iter()
            .map(|r| {
                let key = r.key();
                st.active
                    .heap
                    .get(&key)
                    .or_else(|| st.unschedulable.get(&key))
                    .or_else(|| st.backoff.get(&key))
                    .map(|q| q.pod_info.clone())
                    .unwrap_or_else(|| Arc::new(PodInfo::new(Arc::new(r.to_stub_pod()))))
            })
            .collect()
    }

    /// Nodes that have at least one nominated pod, sorted.
    pub fn nominated_nodes(&self) -> Vec<String> {
        self.state.lock().nominator.nodes()
    }

    /// The node a pod is nominated to.
    pub fn nominated_node_of(&self, uid: &str) -> Option<String> {
        self.state.lock().nominator.node_of(uid).map(str::to_string)
    }

    // ---- internals ---------------------------------------------------------------------------

    fn new_queued_pod_info(&self, pod: Arc<Pod>) -> QueuedPodInfo {
        let info = Arc::new(PodInfo::new(pod));
        let signature = self.sign(&info);
        QueuedPodInfo { signature, ..QueuedPodInfo::new(info, self.clock.now()) }
    }

    /// The pod's signature from its profile (upstream `PriorityQueue.signPod`): `None` when
    /// OpportunisticBatching is off, the profile cannot sign, or no profile serves the pod.
    fn sign(&self, info: &PodInfo) -> Option<PodSignature> {
        self.profiles.get(scheduler_name(&info.pod))?.framework.sign_pod(info)
    }

    fn finish(&self, st: &mut MutexGuard<'_, State>, activated: bool) {
        self.report(st);
        if activated {
            self.pop_ready.notify_all();
        }
    }

    fn report(&self, st: &mut State) {
        let c = counts(st);
        if st.reported != Some(c) {
            st.reported = Some(c);
            self.metrics.pending_pods(c.active, c.backoff, c.unschedulable, c.gated);
        }
    }

    fn finish_in_flight(&self, st: &mut State, uid: &str) {
        let Some(trimmed) = st.active.in_flight.done(uid) else { return };
        let mut per_label: HashMap<String, i64> = HashMap::new();
        for e in trimmed {
            *per_label.entry(e.label()).or_default() -= 1;
        }
        for (label, delta) in per_label {
            self.metrics.in_flight_events(&label, delta);
        }
        self.metrics.in_flight_events("PodPopped", -1);
    }

    /// True when the PreEnqueue plugin `gate` registered an event matching `event`.
    fn gate_listens_to(&self, gate: &str, event: &ClusterEvent) -> bool {
        self.plugin_events.get(gate).is_some_and(|events| events.iter().any(|e| e.matches(event)))
    }

    fn is_event_of_interest(&self, event: &ClusterEvent) -> bool {
        event.is_wildcard() || self.profiles.values().flat_map(|p| &p.registrations).any(|r| r.event.matches(event))
    }

    /// Runs the profile's PreEnqueue plugins, the gating one first; sets or clears the gate.
    fn run_pre_enqueue(&self, q: &mut QueuedPodInfo) {
        let profile_name = scheduler_name(q.pod()).to_string();
        let Some(profile) = self.profiles.get(&profile_name) else {
            q.gating_plugin = None;
            return;
        };
        let start = Instant::now();
        let gating = q.gating_plugin.clone();
        let gating_entry = gating.as_ref().and_then(|g| profile.pre_enqueue.iter().find(|(n, _)| n == g));
        let mut passed = gating_entry.is_none_or(|(n, p)| self.run_pre_enqueue_plugin(&profile_name, n, p, q));
        if passed {
            passed = profile
                .pre_enqueue
                .iter()
                .filter(|(n, _)| Some(n) != gating.as_ref())
                .all(|(n, p)| self.run_pre_enqueue_plugin(&profile_name, n, p, q));
        }
        if passed {
            q.gating_plugin = None;
        }
        // Upstream always labels this observation Success (its status variable is shadowed).
        profile.framework.handle().metrics.extension_point_duration(
            &profile_name,
            ExtensionPoint::PreEnqueue,
            Code::Success,
            start.elapsed().as_secs_f64(),
        );
    }

    fn run_pre_enqueue_plugin(
        &self,
        profile: &str,
        name: &str,
        plugin: &Arc<dyn Plugin>,
        q: &mut QueuedPodInfo,
    ) -> bool {
        let Some(pe) = plugin.as_pre_enqueue() else { return true };
        let status = pe.pre_enqueue(&q.pod_info);
        if status.is_success() {
            return true;
        }
        if !q.unschedulable_plugins.contains(name) && !q.pending_plugins.contains(name) {
            self.metrics.unschedulable_reason(name, profile, 1);
        }
        q.unschedulable_plugins.insert(name.to_string());
        q.gating_plugin = Some(name.to_string());
        if status.code() == Code::Error {
            tracing::error!(pod = %q.pod_info.key(), plugin = name, error = %status.message(), "PreEnqueue plugin failed");
        } else {
            tracing::debug!(pod = %q.pod_info.key(), plugin = name, %status, "pod gated by PreEnqueue");
        }
        false
    }

    /// Evaluates what `event` means for a rejected pod (upstream's isPodWorthRequeuing).
    fn worth_requeuing(
        &self,
        q: &QueuedPodInfo,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Strategy {
        if !has_rejectors(q) {
            return Strategy::AfterBackoff;
        }
        if event.is_wildcard() {
            // A wildcard carrying an object targets that pod only.
            if let Some(obj) = new {
                if obj.as_pod().is_none_or(|p| pod_uid(p) != q.pod_info.uid()) {
                    return Strategy::Skip;
                }
            }
            return Strategy::AfterBackoff;
        }
        let Some(profile) = self.profiles.get(scheduler_name(q.pod())) else {
            tracing::error!(pod = %q.pod_info.key(), "no queueing hints registered for the pod's profile");
            return Strategy::AfterBackoff;
        };
        let is_rejector = |p: &str| q.unschedulable_plugins.contains(p) || q.pending_plugins.contains(p);
        let mut label: Option<String> = None;
        let mut strategy = Strategy::Skip;
        for reg in profile.registrations.iter().filter(|r| r.event.matches(event)) {
            for h in reg.hints.iter().filter(|h| is_rejector(&h.plugin)) {
                let start = Instant::now();
                let (hint, result) = match &h.hint {
                    None => (QueueingHint::Queue, "Queue"),
                    Some(f) => match f(q.pod(), old, new) {
                        Ok(QueueingHint::Queue) => (QueueingHint::Queue, "Queue"),
                        Ok(QueueingHint::QueueSkip) => (QueueingHint::QueueSkip, "QueueSkip"),
                        Err(e) => {
                            tracing::error!(pod = %q.pod_info.key(), plugin = %h.plugin, %event, error = %e, "queueing hint failed");
                            (QueueingHint::Queue, "Error")
                        }
                    },
                };
                let label = label.get_or_insert_with(|| event.label());
                self.metrics.queueing_hint(&h.plugin, label, result, start.elapsed().as_secs_f64());
                if hint == QueueingHint::QueueSkip {
                    continue;
                }
                if q.pending_plugins.contains(&h.plugin) {
                    return Strategy::Immediately;
                }
                if q.pending_plugins.is_empty() {
                    return Strategy::AfterBackoff;
                }
                // Keep looking: a Pending plugin's Queue would requeue immediately.
                strategy = Strategy::AfterBackoff;
            }
        }
        strategy
    }

    /// The strategy for a pod coming back from its cycle: its rejectors' hints over the events
    /// received while it was in flight.
    fn strategy_for_in_flight(&self, st: &State, q: &QueuedPodInfo) -> Strategy {
        if !has_rejectors(q) {
            return Strategy::AfterBackoff;
        }
        if self.needs_pod_group_cycle(q.pod()) {
            // Upstream has no group-level requeueing by events yet: a member comes back after
            // its backoff, whatever happened while its group was tried.
            return Strategy::AfterBackoff;
        }
        let Some(events) = st.active.in_flight.events_for_pod(q.pod_info.uid()) else {
            tracing::error!(pod = %q.pod_info.key(), "in-flight pod not found in the scheduling queue");
            return Strategy::AfterBackoff;
        };
        let mut strategy = Strategy::Skip;
        for e in &events {
            match self.worth_requeuing(q, &e.event, e.old.as_ref(), e.new.as_ref()) {
                Strategy::Skip => {}
                Strategy::Immediately => return Strategy::Immediately,
                Strategy::AfterBackoff => {
                    strategy = Strategy::AfterBackoff;
                    if q.pending_plugins.is_empty() {
                        return strategy;
                    }
                }
            }
        }
        strategy
    }

    /// True when the pod is scheduled with its pod group (GenericWorkload on in its profile).
    fn needs_pod_group_cycle(&self, pod: &Pod) -> bool {
        ksched_framework::podgroup::pod_group_name(pod).is_some()
            && self.profiles.get(scheduler_name(pod)).is_some_and(|p| p.framework.handle().features.generic_workload)
    }

    /// Moves the given unschedulable pods per the event's hints and records the event for
    /// in-flight pods.
    fn move_pods(
        &self,
        st: &mut MutexGuard<'_, State>,
        keys: &[String],
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) {
        if !self.is_event_of_interest(&event) {
            return;
        }
        let label = event.label();
        let mut activated = false;
        for key in keys {
            let Some(q) = st.unschedulable.get(key) else { continue };
            // A gated pod can only be released by what its gate listens to.
            if q.gating_plugin.as_deref().is_some_and(|gate| !self.gate_listens_to(gate, &event)) {
                continue;
            }
            let strategy = self.worth_requeuing(q, &event, old, new);
            if strategy == Strategy::Skip {
                tracing::trace!(pod = %key, %event, "event does not make the pod schedulable");
                continue;
            }
            let Some(q) = st.unschedulable.remove(key) else { continue };
            let queue = self.requeue(st, q, strategy, &label, false);
            activated |= queue != QueueName::Unschedulable;
        }
        if st.active.in_flight.add_event_if_any_in_flight(old, new, event) {
            self.metrics.in_flight_events(&label, 1);
        }
        if activated {
            self.pop_ready.notify_all();
        }
    }

    /// Puts a pod where `strategy` says. `checked_out` means the caller took it out of
    /// unschedulablePods only to hand it over, so putting it back is not a new arrival.
    fn requeue(
        &self,
        st: &mut State,
        q: QueuedPodInfo,
        strategy: Strategy,
        event: &str,
        checked_out: bool,
    ) -> QueueName {
        match strategy {
            Strategy::Skip => {
                self.put_unschedulable(st, q, event, checked_out);
                QueueName::Unschedulable
            }
            Strategy::AfterBackoff if self.policy.is_backing_off(&q, self.clock.now()) => {
                if self.move_to_backoff(st, q, event, checked_out) {
                    QueueName::Backoff
                } else {
                    QueueName::Unschedulable
                }
            }
            _ => {
                if self.move_to_active(st, q, event, false, checked_out) {
                    QueueName::Active
                } else {
                    QueueName::Unschedulable
                }
            }
        }
    }

    fn put_unschedulable(&self, st: &mut State, q: QueuedPodInfo, event: &str, checked_out: bool) {
        let key = q.pod_info.key();
        if st.unschedulable.add_or_update(key, q) && !checked_out {
            self.metrics.incoming_pod(QueueName::Unschedulable.as_str(), event);
        }
    }

    /// Moves a pod to activeQ unless PreEnqueue gates it (PreEnqueue is skipped for pods coming
    /// from backoffQ: it ran when they entered it). True when it landed in activeQ.
    fn move_to_active(
        &self,
        st: &mut State,
        mut q: QueuedPodInfo,
        event: &str,
        from_backoff: bool,
        checked_out: bool,
    ) -> bool {
        if !from_backoff {
            self.run_pre_enqueue(&mut q);
        }
        let key = q.pod_info.key();
        if q.gating_plugin.is_some() {
            if st.active.heap.contains(&key) || st.backoff.contains(&key) {
                if checked_out {
                    st.unschedulable.add_or_update(key, q);
                }
                return false;
            }
            self.put_unschedulable(st, q, event, checked_out);
            return false;
        }
        if q.initial_attempt_timestamp.is_none() {
            q.initial_attempt_timestamp = Some(self.clock.now());
        }
        st.unschedulable.remove(&key);
        st.backoff.delete(&key);
        if event == UNSCHEDULED_POD_ADD.label() || event == UNSCHEDULED_POD_UPDATE.label() {
            let lister = self.lister.read().clone();
            st.nominator.add(&q.pod_info, Nomination::FromStatus, lister.as_ref());
        }
        tracing::debug!(pod = %key, event, queue = "active", "pod moved to an internal scheduling queue");
        st.active.heap.add_or_update(key, q);
        self.metrics.incoming_pod(QueueName::Active.as_str(), event);
        true
    }

    /// Moves a pod to backoffQ unless PreEnqueue gates it. True when it landed in backoffQ.
    fn move_to_backoff(&self, st: &mut State, mut q: QueuedPodInfo, event: &str, checked_out: bool) -> bool {
        self.run_pre_enqueue(&mut q);
        if q.gating_plugin.is_some() {
            self.put_unschedulable(st, q, event, checked_out);
            return false;
        }
        let key = q.pod_info.key();
        st.unschedulable.remove(&key);
        tracing::debug!(pod = %key, event, queue = "backoff", "pod moved to an internal scheduling queue");
        // A pod-group member waits its backoff out: popped early whenever activeQ is empty (as
        // upstream does), a group that cannot fit would be retried back to back.
        let hold = self.needs_pod_group_cycle(q.pod());
        if st.backoff.add(key, q, hold) {
            self.metrics.incoming_pod(QueueName::Backoff.as_str(), event);
        }
        true
    }
}

fn counts(st: &State) -> PendingCounts {
    PendingCounts {
        active: st.active.heap.len(),
        backoff: st.backoff.len(),
        unschedulable: st.unschedulable.unschedulable_len(),
        gated: st.unschedulable.gated_len(),
    }
}

fn build_profile(framework: Arc<Framework>, plugin_events: &mut HashMap<String, Vec<ClusterEvent>>) -> Profile {
    let pre_enqueue = framework
        .list_plugins(ExtensionPoint::PreEnqueue)
        .into_iter()
        .filter_map(|name| framework.plugin(&name).cloned().map(|p| (name, p)))
        .collect();
    let mut registrations: Vec<Registration> = Vec::new();
    let mut register = |plugin: &str, event: ClusterEvent, hint: Option<QueueingHintFn>| {
        plugin_events.entry(plugin.to_string()).or_default().push(event);
        let h = HintFn { plugin: plugin.to_string(), hint };
        match registrations.iter_mut().find(|r| r.event == event) {
            Some(r) => r.hints.push(h),
            None => registrations.push(Registration { event, hints: vec![h] }),
        }
    };
    for (plugin, events) in framework.enqueue_events() {
        for e in events {
            register(plugin, e.event, e.hint.clone());
        }
    }
    // Only pods an extender rejected carry this name, so registering it unconditionally changes
    // nothing for profiles without extenders.
    for resource in EXTENDER_RESOURCES {
        register(EXTENDER_PLUGIN, ClusterEvent::new(resource, ActionType::ALL), None);
    }
    Profile { framework, pre_enqueue, registrations }
}
