use super::*;
use ksched_framework::podgroup::{new_cycle, PodGroup, PodGroupState};
use ksched_framework::Code;
use serde_json::{json, Value};

fn member(name: &str, group: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": group}}}))
        .unwrap(),
    )
}

fn pod_group(name: &str, policy: Value) -> Arc<PodGroup> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"},
            "spec": {"schedulingPolicy": policy}}))
        .unwrap(),
    )
}

fn plugin() -> GangScheduling {
    GangScheduling { handle: Handle::for_tests(), args: GangSchedulingArgs::default() }
}

fn info(p: &Arc<Pod>) -> PodInfo {
    PodInfo::new(p.clone())
}

#[test]
fn pre_enqueue_holds_members_until_the_group_and_min_count_exist() {
    let pl = plugin();
    let groups = pl.handle.pod_groups.clone();
    let a = member("a", "g");
    groups.observe_pod(None, Some(&a));
    let s = pl.pre_enqueue(&info(&a));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), "waiting for pods's pod group \"g\" to appear in scheduling queue");

    groups.upsert(pod_group("g", json!({"gang": {"minCount": 2}})));
    let s = pl.pre_enqueue(&info(&a));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s.message(), "waiting for minCount pods from a gang to appear in scheduling queue");

    let b = member("b", "g");
    groups.observe_pod(None, Some(&b));
    assert!(pl.pre_enqueue(&info(&a)).is_success());
    assert!(pl.pre_enqueue(&info(&b)).is_success());

    // Pods outside groups and groups with the basic policy are not held.
    let plain: Arc<Pod> = Arc::new(serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap());
    assert!(pl.pre_enqueue(&info(&plain)).is_success());
    groups.upsert(pod_group("basic", json!({"basic": {}})));
    assert!(pl.pre_enqueue(&info(&member("c", "basic"))).is_success());
}

#[test]
fn permit_waits_until_min_count_members_are_placed() {
    let pl = plugin();
    let groups = pl.handle.pod_groups.clone();
    groups.upsert(pod_group("g", json!({"gang": {"minCount": 2}})));
    let (a, b) = (member("a", "g"), member("b", "g"));
    groups.observe_pod(None, Some(&a));
    groups.observe_pod(None, Some(&b));

    // Outside a pod-group cycle Permit reads the live state, where the scheduler assumed `a`.
    groups.assume(&a, "n1");
    let mut state = CycleState::new();
    let (s, timeout) = pl.permit(&mut state, &info(&a), "n1");
    assert_eq!((s.code(), s.message().as_str()), (Code::Wait, WAITING_FOR_MIN_COUNT_SCHEDULED));
    assert_eq!(timeout, Duration::from_secs(300));
    groups.assume(&b, "n2");
    let (s, _) = pl.permit(&mut state, &info(&b), "n2");
    assert!(s.is_success());

    // In a pod-group cycle it reads the cycle's snapshot state instead.
    let mut snapshot_state = PodGroupState::default();
    snapshot_state.add_pod(a.clone());
    snapshot_state.add_pod(b.clone());
    snapshot_state.assume_pod("a", "n1");
    state.pod_group_cycle = Some(new_cycle(snapshot_state));
    let (s, _) = pl.permit(&mut state, &info(&a), "n1");
    assert!(s.is_wait(), "only one member placed in the cycle: {s:?}");
    state.pod_group_cycle.as_ref().unwrap().lock().assume_pod("b", "n2");
    assert!(pl.permit(&mut state, &info(&b), "n2").0.is_success());
}

#[test]
fn permit_fails_without_the_pod_group() {
    let pl = plugin();
    let (s, _) = pl.permit(&mut CycleState::new(), &info(&member("a", "gone")), "n1");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), "failed to get podGroup ns/gone: podgroup.scheduling.k8s.io \"gone\" not found");
}

#[test]
fn hints_queue_only_for_the_pods_own_group() {
    let waiting = member("a", "g");
    let same = EventObject::Pod(member("b", "g"));
    let other = EventObject::Pod(member("c", "h"));
    assert_eq!(is_schedulable_after_pod_added(&waiting, None, Some(&same)), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_pod_added(&waiting, None, Some(&other)), Ok(QueueingHint::QueueSkip));
    let g = EventObject::PodGroup(pod_group("g", json!({"gang": {"minCount": 1}})));
    let h = EventObject::PodGroup(pod_group("h", json!({"gang": {"minCount": 1}})));
    assert_eq!(is_schedulable_after_pod_group_added(&waiting, None, Some(&g)), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_pod_group_added(&waiting, None, Some(&h)), Ok(QueueingHint::QueueSkip));
}

#[test]
fn args_default_to_upstream_and_are_validated() {
    let a = GangSchedulingArgs::decode(None).unwrap();
    assert_eq!(a, GangSchedulingArgs::default());
    assert!(!a.all_or_nothing && !a.gang_preemption && a.reserve_after().is_none());
    let a = GangSchedulingArgs::decode(Some(&json!({"apiVersion": "kubescheduler.config.k8s.io/v1",
        "allOrNothing": true, "gangPreemption": true, "reserveAfterSeconds": 30})))
    .unwrap();
    assert!(a.all_or_nothing && a.gang_preemption);
    assert_eq!(a.reserve_after(), Some(Duration::from_secs(30)));
    assert_eq!(
        GangSchedulingArgs::decode(Some(&json!({"reserveAfterSeconds": -5}))).unwrap_err(),
        "reserveAfterSeconds: Invalid value: -5: must be greater than or equal to 0"
    );
    assert!(GangSchedulingArgs::decode(Some(&json!({"atomic": true}))).unwrap_err().contains("unknown field `atomic`"));
}
