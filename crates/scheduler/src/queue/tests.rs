//! Behaviour tests of the scheduling queue, driven by a fake clock and a profile of fake plugins.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ksched_framework::node::Node;
use ksched_framework::plugin_config::{PluginRef, PluginSet, Plugins};
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::pod_priority;
use ksched_framework::{
    BindPlugin, ClusterEventWithHint, CycleState, FilterPlugin, Handle, NodeInfo, PreEnqueuePlugin, QueueSortPlugin,
    Registry, Status,
};
use parking_lot::Mutex;
use serde_json::json;

use super::*;
use crate::cluster_events::{ASSIGNED_POD_DELETE, NODE_ADD};

// ---- fake plugins ----------------------------------------------------------------------------

struct Sort;
impl Plugin for Sort {
    fn name(&self) -> &str {
        "Sort"
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}
impl QueueSortPlugin for Sort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (pod_priority(a.pod()), pod_priority(b.pod()));
        pa > pb || (pa == pb && a.timestamp < b.timestamp)
    }
}

struct Binder;
impl Plugin for Binder {
    fn name(&self) -> &str {
        "Binder"
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        Some(self)
    }
}
impl BindPlugin for Binder {
    fn bind<'a>(&'a self, _: &'a CycleState, _: &'a PodInfo, _: &'a str) -> BoxFuture<'a, Status> {
        Box::pin(async { Status::success() })
    }
}

/// Gates pods with scheduling gates; only their removal can release them.
struct Gate;
impl Plugin for Gate {
    fn name(&self) -> &str {
        "Gate"
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![ClusterEventWithHint::new(EventResource::Pod, ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED)])
    }
}
impl PreEnqueuePlugin for Gate {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let gated = pod.pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty());
        if gated {
            Status::unresolvable("gated")
        } else {
            Status::success()
        }
    }
}

/// Holds back pods named `latched*` while [`LATCH_CLOSED`] is set: a gate that opens without
/// any cluster event (like DefaultPreemption's once its evictions are done).
struct Latch;
static LATCH_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
impl Plugin for Latch {
    fn name(&self) -> &str {
        "Latch"
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![ClusterEventWithHint::new(EventResource::AssignedPod, ActionType::DELETE)])
    }
}
impl PreEnqueuePlugin for Latch {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if pod.name().starts_with("latched") && LATCH_CLOSED.load(std::sync::atomic::Ordering::SeqCst) {
            Status::unresolvable("latched")
        } else {
            Status::success()
        }
    }
}

/// A filter whose hint says a node helps only when labelled `fit=true`.
struct NodeFit;
impl Plugin for NodeFit {
    fn name(&self) -> &str {
        "NodeFit"
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        let hint = |_: &Pod, _: Option<&EventObject>, new: Option<&EventObject>| {
            let fits = new.and_then(EventObject::as_node).is_some_and(|n| n.metadata.labels.get("fit") == Some("true"));
            Ok(if fits { QueueingHint::Queue } else { QueueingHint::QueueSkip })
        };
        Some(vec![ClusterEventWithHint::with_hint(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            hint,
        )])
    }
}
impl FilterPlugin for NodeFit {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

/// A filter woken (without a hint) by bound pods going away.
struct Waiter;
impl Plugin for Waiter {
    fn name(&self) -> &str {
        "Waiter"
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![ClusterEventWithHint::new(EventResource::Pod, ActionType::DELETE)])
    }
}
impl FilterPlugin for Waiter {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

/// A filter whose hint always errors (which must count as Queue).
struct Broken;
impl Plugin for Broken {
    fn name(&self) -> &str {
        "Broken"
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![ClusterEventWithHint::with_hint(EventResource::Node, ActionType::UPDATE_NODE_TAINT, |_, _, _| {
            Err("boom".to_string())
        })])
    }
}
impl FilterPlugin for Broken {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

fn framework() -> Arc<Framework> {
    framework_with(Handle::for_tests())
}

fn framework_with(handle: Handle) -> Arc<Framework> {
    let mut r = Registry::new();
    r.register("Sort", |_, _| Ok(Arc::new(Sort) as Arc<dyn Plugin>)).unwrap();
    r.register("Binder", |_, _| Ok(Arc::new(Binder) as Arc<dyn Plugin>)).unwrap();
    r.register("Gate", |_, _| Ok(Arc::new(Gate) as Arc<dyn Plugin>)).unwrap();
    r.register("Latch", |_, _| Ok(Arc::new(Latch) as Arc<dyn Plugin>)).unwrap();
    r.register("NodeFit", |_, _| Ok(Arc::new(NodeFit) as Arc<dyn Plugin>)).unwrap();
    r.register("Waiter", |_, _| Ok(Arc::new(Waiter) as Arc<dyn Plugin>)).unwrap();
    r.register("Broken", |_, _| Ok(Arc::new(Broken) as Arc<dyn Plugin>)).unwrap();
    let set =
        |names: &[&str]| PluginSet { enabled: names.iter().map(|n| PluginRef::new(n)).collect(), disabled: vec![] };
    let plugins = Plugins {
        pre_enqueue: set(&["Gate", "Latch"]),
        queue_sort: set(&["Sort"]),
        filter: set(&["NodeFit", "Waiter", "Broken"]),
        bind: set(&["Binder"]),
        ..Default::default()
    };
    Arc::new(Framework::new(&r, DEFAULT_SCHEDULER_NAME, &plugins, &[], handle).unwrap())
}

// ---- harness ---------------------------------------------------------------------------------

#[derive(Default)]
struct Recorder {
    incoming: Mutex<Vec<(String, String)>>,
    pending: Mutex<Vec<PendingCounts>>,
    hints: Mutex<Vec<(String, String)>>,
}

impl QueueMetrics for Recorder {
    fn incoming_pod(&self, queue: &str, event: &str) {
        self.incoming.lock().push((queue.to_string(), event.to_string()));
    }
    fn pending_pods(&self, active: usize, backoff: usize, unschedulable: usize, gated: usize) {
        self.pending.lock().push(PendingCounts { active, backoff, unschedulable, gated });
    }
    fn queueing_hint(&self, plugin: &str, _event: &str, result: &str, _seconds: f64) {
        self.hints.lock().push((plugin.to_string(), result.to_string()));
    }
}

impl Recorder {
    fn last_incoming(&self) -> (String, String) {
        self.incoming.lock().last().cloned().unwrap()
    }
}

struct Harness {
    q: Arc<SchedulingQueue>,
    clock: Arc<FakeClock>,
    metrics: Arc<Recorder>,
}

fn harness() -> Harness {
    harness_with(framework())
}

fn harness_with(fw: Arc<Framework>) -> Harness {
    let clock = Arc::new(FakeClock::new());
    let metrics = Arc::new(Recorder::default());
    let profiles = HashMap::from([(DEFAULT_SCHEDULER_NAME.to_string(), fw)]);
    let q = Arc::new(SchedulingQueue::new(profiles, QueueOptions::default(), clock.clone(), metrics.clone()));
    Harness { q, clock, metrics }
}

impl Harness {
    fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    fn counts(&self) -> (usize, usize, usize, usize) {
        let c = self.q.pending_counts();
        (c.active, c.backoff, c.unschedulable, c.gated)
    }

    fn pop(&self) -> QueuedPodInfo {
        self.q.pop_timeout(Duration::from_millis(200)).expect("a poppable pod")
    }

    fn try_pop(&self) -> Option<QueuedPodInfo> {
        self.q.pop_timeout(Duration::from_millis(20))
    }

    /// Pops the pod and reports it rejected by `plugins` (none = an error).
    fn fail(&self, plugins: &[&str]) -> QueuedPodInfo {
        let mut qpi = self.pop();
        self.fail_popped(&mut qpi, plugins);
        qpi
    }

    fn fail_popped(&self, qpi: &mut QueuedPodInfo, plugins: &[&str]) {
        qpi.unschedulable_plugins = plugins.iter().map(|s| s.to_string()).collect();
        qpi.pending_plugins = BTreeSet::new();
        let cycle = self.q.scheduling_cycle();
        self.q.add_unschedulable_if_not_present(qpi.clone(), cycle).unwrap();
    }

    fn queued(&self, name: &str) -> QueuedPodInfo {
        self.q.get_pod("ns", name).expect("pod is queued")
    }
}

fn pod_json(name: &str, priority: i32) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": "i"}], "priority": priority}
    })
}

fn to_pod(v: serde_json::Value) -> Arc<Pod> {
    Arc::new(serde_json::from_value(v).unwrap())
}

fn pod(name: &str, priority: i32) -> Arc<Pod> {
    to_pod(pod_json(name, priority))
}

fn gated_pod(name: &str) -> Arc<Pod> {
    let mut v = pod_json(name, 0);
    v["spec"]["schedulingGates"] = json!([{"name": "example.com/wait"}]);
    to_pod(v)
}

fn node(fit: bool) -> EventObject {
    let labels = if fit { json!({"fit": "true"}) } else { json!({}) };
    let n: Node = serde_json::from_value(json!({"metadata": {"name": "n1", "labels": labels}})).unwrap();
    EventObject::Node(Arc::new(n))
}

fn name_of(q: &QueuedPodInfo) -> &str {
    q.pod_info.name()
}

// ---- ordering --------------------------------------------------------------------------------

#[test]
fn pops_by_priority_then_fifo() {
    let h = harness();
    for (name, prio) in [("low-1", 1), ("high", 10), ("low-2", 1), ("mid", 5), ("low-3", 1)] {
        h.q.add(pod(name, prio));
        h.advance(Duration::from_millis(10));
    }
    assert_eq!(h.counts(), (5, 0, 0, 0));
    let order: Vec<String> = (0..5).map(|_| name_of(&h.pop()).to_string()).collect();
    assert_eq!(order, vec!["high", "mid", "low-1", "low-2", "low-3"]);
    assert_eq!(h.q.scheduling_cycle(), 5);
    assert_eq!(h.metrics.incoming.lock()[0], ("active".to_string(), "UnschedulablePodAdd".to_string()));
}

#[test]
fn pop_counts_attempts_and_tracks_in_flight() {
    let h = harness();
    let start = h.clock.now();
    h.q.add(pod("a", 0));
    let qpi = h.pop();
    assert_eq!(qpi.attempts, 1);
    assert_eq!(qpi.initial_attempt_timestamp, Some(start));
    assert_eq!(h.q.in_flight_pods().len(), 1);
    h.q.done(qpi.pod_info.uid());
    assert!(h.q.in_flight_pods().is_empty());
    // A pod popped twice without Done is a bookkeeping bug: the second copy is discarded.
    h.q.add(pod("a", 0));
    let again = h.pop();
    h.q.add(pod("a", 0));
    assert!(h.try_pop().is_none(), "duplicate in-flight pod is discarded");
    h.q.done(again.pod_info.uid());
}

// ---- backoff ---------------------------------------------------------------------------------

#[test]
fn backoff_doubles_up_to_the_cap() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut durations = vec![];
    for _ in 0..6 {
        h.fail(&["NodeFit"]);
        let q = h.queued("a");
        durations.push((h.q.backoff_expiry(&q).unwrap() - q.timestamp).as_secs());
        // Nothing happened during the cycle: the pod waits for an event.
        assert_eq!(h.counts(), (0, 0, 1, 0));
        h.q.activate(&[pod("a", 0)]);
    }
    assert_eq!(durations, vec![1, 2, 4, 8, 10, 10]);
    assert_eq!(h.queued("a").unschedulable_count, 6);
    assert_eq!(h.metrics.last_incoming(), ("active".to_string(), "ForceActivate".to_string()));
}

#[test]
fn backoff_completes_in_the_window_after_expiry() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut qpi = h.pop();
    // NodeFit's hint approves an event seen during the cycle, so the pod backs off.
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    h.fail_popped(&mut qpi, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 1, 0, 0));
    assert_eq!(h.metrics.last_incoming(), ("backoff".to_string(), "ScheduleAttemptFailure".to_string()));

    h.advance(Duration::from_millis(1999));
    h.q.flush_backoff_q_completed();
    assert_eq!(h.counts(), (0, 1, 0, 0), "expiry window (1 s) still current");
    h.advance(Duration::from_millis(1));
    h.q.flush_backoff_q_completed();
    assert_eq!(h.counts(), (1, 0, 0, 0));
    assert_eq!(h.metrics.last_incoming(), ("active".to_string(), "BackoffComplete".to_string()));
}

#[test]
fn errors_back_off_separately_and_are_not_popped_early() {
    let h = harness();
    h.q.add(pod("err", 0));
    let first = h.fail(&[]);
    assert_eq!(h.counts(), (0, 1, 0, 0));
    let q = h.queued("err");
    assert_eq!((q.consecutive_errors_count, q.unschedulable_count), (1, 0));
    assert_eq!(h.q.backoff_expiry(&q), Some(q.timestamp + Duration::from_secs(1)));
    assert!(!h.q.has_poppable());
    assert!(h.try_pop().is_none(), "pods that errored are never popped before their backoff ends");

    h.advance(Duration::from_secs(2));
    h.q.flush_backoff_q_completed();
    let mut again = h.pop();
    assert_eq!(again.attempts, first.attempts + 1);
    h.fail_popped(&mut again, &[]);
    assert_eq!(h.queued("err").consecutive_errors_count, 2);
    let q = h.queued("err");
    assert_eq!(h.q.backoff_expiry(&q), Some(q.timestamp + Duration::from_secs(2)));

    // A rejection resets the error streak.
    h.advance(Duration::from_secs(3));
    h.q.flush_backoff_q_completed();
    h.fail(&["NodeFit"]);
    let q = h.queued("err");
    assert_eq!((q.consecutive_errors_count, q.unschedulable_count), (0, 1));
}

#[test]
fn pop_takes_from_backoff_when_active_is_empty() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut qpi = h.pop();
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    h.fail_popped(&mut qpi, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 1, 0, 0));
    assert!(h.q.has_poppable(), "a rejected pod in backoffQ is poppable before its backoff ends");
    assert_eq!(h.q.get_pod_and_pool("ns", "a").map(|(_, pool)| pool), Some(QueueName::Backoff));
    let popped = h.pop();
    assert_eq!(name_of(&popped), "a");
    assert!(!h.q.has_poppable());
    assert_eq!(popped.attempts, 2);
    assert_eq!(h.metrics.last_incoming(), ("active".to_string(), "PopFromBackoffQ".to_string()));
}

#[test]
fn pod_group_members_come_back_after_their_backoff_only() {
    let mut handle = Handle::for_tests();
    handle.features.generic_workload = true;
    let h = harness_with(framework_with(handle));
    let mut v = pod_json("member", 0);
    v["spec"]["schedulingGroup"] = json!({"podGroupName": "g"});
    h.q.add(to_pod(v));
    let mut qpi = h.pop();
    // An event the rejector's hint says helps: a lone pod would come back at once.
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    h.fail_popped(&mut qpi, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 1, 0, 0), "upstream: members are requeued after backoff, whatever happened");
    assert!(!h.q.has_poppable());
    assert!(h.try_pop().is_none(), "not popped from backoffQ early: its gang would be retried back to back");
    h.advance(Duration::from_secs(2));
    h.q.flush_backoff_q_completed();
    assert_eq!(name_of(&h.pop()), "member");
}

#[test]
fn active_pods_go_before_backing_off_ones() {
    let h = harness();
    h.q.add(pod("backing-off", 100));
    let mut qpi = h.pop();
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    h.fail_popped(&mut qpi, &["NodeFit"]);
    h.q.add(pod("fresh", 0));
    assert_eq!(name_of(&h.pop()), "fresh");
    assert_eq!(name_of(&h.pop()), "backing-off");
}

// ---- events and hints ------------------------------------------------------------------------

#[test]
fn event_requeues_only_when_the_hint_says_queue() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.fail(&["NodeFit"]);
    assert_eq!(h.counts(), (0, 0, 1, 0));

    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(false)), None);
    assert_eq!(h.counts(), (0, 0, 1, 0), "QueueSkip keeps the pod");
    let unrelated = ClusterEvent::new(EventResource::PersistentVolume, ActionType::ADD);
    h.q.move_all_to_active_or_backoff(unrelated, None, None, None);
    assert_eq!(h.counts(), (0, 0, 1, 0), "no rejector registered the event");

    // Still backing off: the pod goes to backoffQ.
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    assert_eq!(h.counts(), (0, 1, 0, 0));
    assert_eq!(h.metrics.last_incoming(), ("backoff".to_string(), "NodeAdd".to_string()));
}

#[test]
fn event_after_backoff_goes_straight_to_active_and_pre_check_filters() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.q.add(pod("b", 0));
    h.fail(&["NodeFit"]);
    h.fail(&["NodeFit"]);
    h.advance(Duration::from_secs(5));
    let only_a = |p: &Pod| p.metadata.name.as_deref() == Some("a");
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), Some(&only_a));
    assert_eq!(h.counts(), (1, 0, 1, 0));
    assert_eq!(name_of(&h.pop()), "a");
}

#[test]
fn node_add_registration_also_wakes_on_taint_updates() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.fail(&["NodeFit"]);
    h.advance(Duration::from_secs(5));
    let untaint = ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_TAINT);
    h.q.move_all_to_active_or_backoff(untaint, None, Some(&node(false)), None);
    assert_eq!(h.counts(), (1, 0, 0, 0), "the compatibility shim always queues");
}

#[test]
fn hint_errors_count_as_queue() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.fail(&["Broken"]);
    h.advance(Duration::from_secs(5));
    let taint = ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_TAINT);
    h.q.move_all_to_active_or_backoff(taint, None, Some(&node(false)), None);
    assert_eq!(h.counts(), (1, 0, 0, 0));
    assert!(h.metrics.hints.lock().contains(&("Broken".to_string(), "Error".to_string())));
}

#[test]
fn event_during_the_cycle_requeues_at_failure() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.q.add(pod("b", 0));
    let mut a = h.pop();
    // Recorded only for pods in flight at the time.
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    let mut b = h.pop();
    h.fail_popped(&mut b, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 0, 1, 0), "b was popped after the event");
    h.fail_popped(&mut a, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 1, 1, 0), "a saw the event while in flight");
}

#[test]
fn skipped_in_flight_event_leaves_the_pod_unschedulable() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut a = h.pop();
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(false)), None);
    h.fail_popped(&mut a, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 0, 1, 0));
}

#[test]
fn pending_plugin_queue_requeues_immediately() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut a = h.pop();
    h.q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, None, None, None);
    a.unschedulable_plugins = BTreeSet::from(["NodeFit".to_string()]);
    a.pending_plugins = BTreeSet::from(["Waiter".to_string()]);
    h.q.add_unschedulable_if_not_present(a, 1).unwrap();
    assert_eq!(h.counts(), (1, 0, 0, 0), "backoff is skipped for a Pending plugin's Queue");
}

#[test]
fn failure_of_an_already_queued_pod_is_an_error() {
    let h = harness();
    h.q.add(pod("a", 0));
    let a = h.pop();
    h.q.add(pod("a", 0));
    let err = h.q.add_unschedulable_if_not_present(a, 1).unwrap_err();
    assert_eq!(err, "Pod ns/a is already present in the active queue");
    assert!(h.q.in_flight_pods().is_empty(), "the cycle is ended anyway");
}

#[test]
fn update_of_a_pod_in_flight_is_replayed_at_failure() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut a = h.pop();
    let mut v = pod_json("a", 0);
    v["metadata"]["labels"] = json!({"x": "y"});
    h.q.update(&pod("a", 0), to_pod(v));
    assert_eq!(h.counts(), (0, 0, 0, 0), "an in-flight pod is not re-added");
    // Waiter registered Pod/Delete only; a label update does not help it.
    h.fail_popped(&mut a, &["Waiter"]);
    assert_eq!(h.counts(), (0, 0, 1, 0));
}

#[test]
fn updates_in_place_and_re_adds_unknown_pods() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.q.update(&pod("a", 0), pod("a", 7));
    assert_eq!(h.counts(), (1, 0, 0, 0));
    assert_eq!(h.queued("a").pod_info.priority(), 7);
    h.q.update(&pod("b", 0), pod("b", 0));
    assert_eq!(h.counts(), (2, 0, 0, 0));
    assert_eq!(h.metrics.last_incoming(), ("active".to_string(), "UnschedulablePodUpdate".to_string()));
}

#[test]
fn delete_removes_from_every_pool() {
    let h = harness();
    h.q.add(pod("active", 0));
    h.q.add(pod("unsched", 0));
    h.q.add(gated_pod("gated"));
    h.fail(&["NodeFit"]);
    assert_eq!(h.counts(), (1, 0, 1, 1));
    for name in ["active", "unsched", "gated"] {
        h.q.delete(&pod(name, 0));
    }
    assert_eq!(h.counts(), (0, 0, 0, 0));
    assert_eq!(h.metrics.pending.lock().last(), Some(&PendingCounts::default()));
}

// ---- gates -----------------------------------------------------------------------------------

#[test]
fn release_gated_requeues_only_pods_held_by_that_gate() {
    let h = harness();
    h.q.add(pod("latched", 0));
    h.q.add(gated_pod("g"));
    h.q.add(pod("active", 0));
    assert_eq!(h.counts(), (1, 0, 0, 2));
    // The latch opens without an event; only releasing re-runs PreEnqueue.
    LATCH_CLOSED.store(false, std::sync::atomic::Ordering::SeqCst);
    h.q.release_gated(&[pod("latched", 0), gated_pod("g"), pod("active", 0)], "Latch");
    assert_eq!(h.counts(), (2, 0, 0, 1), "the pod held by Gate stays, the active one is untouched");
    assert_eq!(h.metrics.last_incoming(), ("active".to_string(), "ForceActivate".to_string()));
    let mut names: Vec<String> = [h.pop(), h.pop()].iter().map(|q| name_of(q).to_string()).collect();
    names.sort();
    assert_eq!(names, ["active", "latched"]);
}

#[test]
fn gated_pod_waits_until_its_gates_are_removed() {
    let h = harness();
    h.q.add(gated_pod("g"));
    assert_eq!(h.counts(), (0, 0, 0, 1));
    assert!(h.try_pop().is_none());
    let q = h.queued("g");
    assert_eq!(q.gating_plugin.as_deref(), Some("Gate"));
    assert!(q.unschedulable_plugins.contains("Gate"));
    assert_eq!(h.metrics.last_incoming(), ("unschedulable".to_string(), "UnschedulablePodAdd".to_string()));

    // Events the gate does not listen to leave it alone, even ones other plugins want.
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    h.q.activate(&[gated_pod("g")]);
    assert_eq!(h.counts(), (0, 0, 0, 1), "PreEnqueue still rejects it");

    h.q.update(&gated_pod("g"), pod("g", 0));
    assert_eq!(h.counts(), (1, 0, 0, 0));
    let popped = h.pop();
    assert_eq!(name_of(&popped), "g");
    assert!(popped.gating_plugin.is_none());
    assert_eq!(
        h.metrics.last_incoming(),
        ("active".to_string(), "UnschedulablePodUpdatePodSchedulingGatesEliminated".to_string())
    );
}

#[test]
fn gated_pods_are_not_flushed_but_marked() {
    let h = harness();
    h.q.add(gated_pod("g"));
    h.advance(Duration::from_secs(301));
    h.q.flush_unschedulable_pods_leftover();
    assert_eq!(h.counts(), (0, 0, 0, 1));
    assert!(h.queued("g").was_flushed_from_unschedulable);
    assert_eq!(
        h.metrics.last_incoming(),
        ("unschedulable".to_string(), "UnschedulablePodAdd".to_string()),
        "the timeout did not even try to move it"
    );
}

#[test]
fn gated_pod_ignores_events_of_its_other_rejectors() {
    let h = harness();
    h.q.add(pod("p", 0));
    h.fail(&["NodeFit"]);
    // The pod picks up a gate while waiting; re-running PreEnqueue gates it.
    h.q.update(&pod("p", 0), gated_pod("p"));
    h.q.activate(&[gated_pod("p")]);
    let q = h.queued("p");
    assert_eq!(q.gating_plugin.as_deref(), Some("Gate"));
    assert!(q.unschedulable_plugins.contains("NodeFit"));
    let before = h.metrics.incoming.lock().len();
    let hints_before = h.metrics.hints.lock().len();
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    assert_eq!(h.counts(), (0, 0, 0, 1));
    assert_eq!(h.metrics.incoming.lock().len(), before, "no move was attempted");
    assert_eq!(h.metrics.hints.lock().len(), hints_before, "NodeFit's hint was not consulted");
}

// ---- flushing, activation, close -------------------------------------------------------------

#[test]
fn unschedulable_pods_are_retried_after_five_minutes() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.fail(&["NodeFit"]);
    h.advance(Duration::from_secs(300));
    h.q.flush_unschedulable_pods_leftover();
    assert_eq!(h.counts(), (0, 0, 1, 0), "exactly the maximum is not over it");
    h.advance(Duration::from_secs(1));
    h.q.flush_unschedulable_pods_leftover();
    assert_eq!(h.counts(), (1, 0, 0, 0));
    assert_eq!(h.metrics.last_incoming(), ("active".to_string(), "UnschedulableTimeout".to_string()));
    assert!(h.pop().was_flushed_from_unschedulable);
}

#[test]
fn a_zero_age_flush_retries_every_unschedulable_pod_at_once() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.fail(&["NodeFit"]);
    h.advance(Duration::from_millis(1));
    h.q.flush_unschedulable_pods_leftover();
    assert_eq!(h.counts(), (0, 0, 1, 0), "the periodic flush waits for the configured age");
    h.q.flush_unschedulable_pods_older_than(Duration::ZERO);
    assert_eq!(h.counts().2, 0, "no pod is left in unschedulablePods");
    assert_eq!(h.counts().0 + h.counts().1, 1, "the pod waits in activeQ or backoffQ");
}

#[test]
fn activate_in_flight_pod_requeues_it_on_failure() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut a = h.pop();
    h.q.activate(&[pod("a", 0)]);
    assert_eq!(h.counts(), (0, 0, 0, 0));
    h.fail_popped(&mut a, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 1, 0, 0), "ForceActivate recorded while in flight");
}

#[test]
fn activate_moves_backing_off_pods_to_active() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut a = h.pop();
    h.q.move_all_to_active_or_backoff(NODE_ADD, None, Some(&node(true)), None);
    h.fail_popped(&mut a, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 1, 0, 0));
    h.q.activate(&[pod("a", 0)]);
    assert_eq!(h.counts(), (1, 0, 0, 0));
}

#[test]
fn assigned_pod_events_wake_matching_rejectors() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.fail(&["Waiter"]);
    h.advance(Duration::from_secs(5));
    let bound =
        to_pod(json!({"metadata": {"name": "x", "namespace": "ns"}, "spec": {"containers": [], "nodeName": "n1"}}));
    h.q.assigned_pod_added(&bound);
    h.q.assigned_pod_updated(&bound, &bound);
    assert_eq!(h.counts(), (0, 0, 1, 0), "Waiter only cares about deletions");
    let gone = EventObject::Pod(bound);
    h.q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, Some(&gone), None, None);
    assert_eq!(h.counts(), (1, 0, 0, 0));
}

#[test]
fn extender_rejections_are_requeued_by_any_node_event() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.fail(&[EXTENDER_PLUGIN]);
    h.advance(Duration::from_secs(5));
    let label = ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL);
    h.q.move_all_to_active_or_backoff(label, None, Some(&node(false)), None);
    assert_eq!(h.counts(), (1, 0, 0, 0));
}

#[test]
fn close_unblocks_pop() {
    let h = harness();
    let q = h.q.clone();
    let waiter = std::thread::spawn(move || q.pop());
    std::thread::sleep(Duration::from_millis(50));
    h.q.close();
    assert!(waiter.join().unwrap().is_none());
    h.q.add(pod("late", 0));
    assert!(h.q.pop().is_none(), "a closed queue hands out nothing");
}

#[test]
fn a_cycle_failing_after_close_is_dropped_quietly() {
    let h = harness();
    h.q.add(pod("a", 0));
    let mut qpi = h.pop();
    // close() ends every cycle in flight; the scheduling thread may still be inside this one.
    h.q.close();
    h.fail_popped(&mut qpi, &["NodeFit"]);
    assert_eq!(h.counts(), (0, 0, 0, 0), "nothing is requeued into a closed queue");
}

#[test]
fn pop_wakes_when_a_pod_arrives() {
    let h = harness();
    let q = h.q.clone();
    let waiter = std::thread::spawn(move || q.pop_timeout(Duration::from_secs(5)));
    std::thread::sleep(Duration::from_millis(50));
    h.q.add(pod("a", 0));
    assert_eq!(waiter.join().unwrap().map(|q| q.pod_info.name().to_string()).as_deref(), Some("a"));
}

#[test]
fn flusher_thread_stops_on_close() {
    let h = harness();
    let handle = h.q.spawn_flushers();
    std::thread::sleep(Duration::from_millis(20));
    h.q.close();
    handle.join().unwrap();
}

// ---- nominator -------------------------------------------------------------------------------

#[test]
fn nominator_add_remove_and_lookup() {
    let h = harness();
    let mut v = pod_json("nominated", 5);
    v["status"] = json!({"nominatedNodeName": "n1"});
    h.q.add(to_pod(v));
    let on_n1 = h.q.nominated_pods_for_node("n1");
    assert_eq!(on_n1.len(), 1);
    assert_eq!(on_n1[0].priority(), 5, "the queued PodInfo is returned");
    assert_eq!(h.q.nominated_nodes(), vec!["n1"]);

    h.q.add_nominated_pod(Arc::new(PodInfo::new(pod("other", 0))), Some("n2".into()));
    assert_eq!(h.q.nominated_pods_for_node("n2")[0].name(), "other");
    let stub = &h.q.nominated_pods_for_node("n2")[0];
    assert!(stub.pod.spec.is_none(), "pods no pool holds come back as bare identities");

    h.q.add_nominated_pod(Arc::new(PodInfo::new(pod("other", 0))), Some("n1".into()));
    assert!(h.q.nominated_pods_for_node("n2").is_empty());
    assert_eq!(h.q.nominated_pods_for_node("n1").len(), 2);

    h.q.delete_nominated_pod_if_exists(&pod("other", 0));
    h.q.delete(&pod("nominated", 5));
    assert!(h.q.nominated_pods_for_node("n1").is_empty());
    assert!(h.q.nominated_node_of("uid-nominated").is_none());
}

#[test]
fn gated_pods_are_not_nominated_on_add() {
    let h = harness();
    let mut v = pod_json("g", 0);
    v["spec"]["schedulingGates"] = json!([{"name": "x"}]);
    v["status"] = json!({"nominatedNodeName": "n1"});
    h.q.add(to_pod(v));
    assert!(h.q.nominated_pods_for_node("n1").is_empty());
}

#[test]
fn update_keeps_in_memory_nomination() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.q.add_nominated_pod(Arc::new(PodInfo::new(pod("a", 0))), Some("n1".into()));
    h.q.update(&pod("a", 0), pod("a", 3));
    let on_n1 = h.q.nominated_pods_for_node("n1");
    assert_eq!(on_n1.len(), 1);
    assert_eq!(on_n1[0].priority(), 3);
}

#[test]
fn pending_pods_lists_every_pool() {
    let h = harness();
    h.q.add(pod("a", 0));
    h.q.add(pod("b", 0));
    h.q.add(gated_pod("g"));
    h.fail(&["NodeFit"]);
    let mut names: Vec<String> =
        h.q.pending_pods().iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect();
    names.sort();
    assert_eq!(names, vec!["a", "b", "g"]);
    assert_eq!(h.q.pending_summary(), "activeQ:1; backoffQ:0; unschedulablePods:2");
}
