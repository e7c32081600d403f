use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksched_framework::listers::MemoryLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::podgroup::{PodGroup, PodGroupPreemption};
use ksched_framework::{Code, Handle, NodeInfo, PodGroupPostFilterPlugin, PodInfo, Snapshot, Status};
use serde_json::{json, Value};

use super::super::DefaultPreemption;
use super::{importance, Unit, NOT_ELIGIBLE_PLACEMENT_BASED, NOT_ELIGIBLE_WORKLOAD_AWARE, NO_VICTIMS_FOR_PREEMPTOR};

fn pod(name: &str, prio: i32, node: &str, group: Option<&str>) -> Pod {
    let mut spec = json!({"priority": prio, "nodeName": node, "containers": [{"name": "c", "image": "i"}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec})).unwrap()
}

fn pod_group(name: &str, priority: i32, spec: Value) -> PodGroup {
    let mut spec = spec;
    spec["priority"] = json!(priority);
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": spec}))
    .unwrap()
}

fn snapshot(nodes: &[&str], pods: &[Pod]) -> Snapshot {
    let infos = nodes
        .iter()
        .map(|n| {
            let node: Node = serde_json::from_value(json!({"metadata": {"name": n}})).unwrap();
            let mut ni = NodeInfo::new(Arc::new(node));
            for p in pods.iter().filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(n)) {
                ni.add_pod(Arc::new(PodInfo::new(Arc::new(p.clone()))));
            }
            ni
        })
        .collect();
    Snapshot::from_node_infos(infos)
}

/// n1: a (single, 0), g1-0; n2: g1-1, k-0; n3: k-1. g1 is preempted as a group
/// (disruptionMode PodGroup, priority 5); k is a gang (minCount 2, priority 0).
struct Env {
    plugin: DefaultPreemption,
    preemptor: PodGroup,
    members: Vec<Arc<PodInfo>>,
    lister: Arc<MemoryLister>,
}

impl Env {
    fn new() -> (Self, Snapshot) {
        let lister = Arc::new(MemoryLister::default());
        let mut handle = Handle::for_tests();
        handle.lister = lister.clone();
        for pg in [
            pod_group("g1", 5, json!({"schedulingPolicy": {"basic": {}}, "disruptionMode": "PodGroup"})),
            pod_group("k", 0, json!({"schedulingPolicy": {"gang": {"minCount": 2}}})),
            pod_group("me", 10, json!({"schedulingPolicy": {"gang": {"minCount": 1}}})),
        ] {
            handle.pod_groups.upsert(Arc::new(pg));
        }
        let pods = [
            pod("a", 0, "n1", None),
            pod("g1-0", 5, "n1", Some("g1")),
            pod("g1-1", 5, "n2", Some("g1")),
            pod("k-0", 0, "n2", Some("k")),
            pod("k-1", 0, "n3", Some("k")),
            pod("me-bound", 10, "n3", Some("me")),
        ];
        let preemptor = handle.pod_groups.get("ns", "me").map(|p| (*p).clone()).unwrap();
        let members = vec![Arc::new(PodInfo::new(Arc::new(pod("me-0", 10, "", Some("me")))))];
        let env = Env { plugin: DefaultPreemption::new(None, &handle).unwrap(), preemptor, members, lister };
        (env, snapshot(&["n1", "n2", "n3"], &pods))
    }

    fn request(&self, atomic_gangs: bool, include_equal_priority: bool) -> PodGroupPreemption<'_> {
        PodGroupPreemption {
            pod_group: &self.preemptor,
            pods: &self.members,
            domain: None,
            atomic_gangs,
            include_equal_priority,
        }
    }
}

/// Fits when these nodes have no pod left.
fn empty(nodes: &'static [&'static str]) -> impl FnMut(&mut Snapshot) -> Status {
    move |s: &mut Snapshot| {
        if nodes.iter().all(|n| s.get(n).unwrap().pods.is_empty()) {
            Status::success()
        } else {
            Status::unschedulable("pod group is unschedulable")
        }
    }
}

fn names(v: &ksched_framework::podgroup::PodGroupVictims) -> Vec<String> {
    v.pods.iter().map(|p| p.name().to_string()).collect()
}

fn pods_per_node(s: &Snapshot) -> Vec<usize> {
    s.list().iter().map(|n| n.pods.len()).collect()
}

#[test]
fn a_group_in_pod_group_disruption_mode_is_one_victim_and_the_rest_is_reprieved() {
    let (env, mut snap) = Env::new();
    let before = pods_per_node(&snap);
    let v = env.plugin.select_pod_group_victims(&env.request(false, false), &mut snap, &mut empty(&["n1"])).unwrap();
    // g1 (priority 5) is more important than a (0) and listed first; both are needed for n1.
    // g1's pod on n2 goes with it; k's pods are given back.
    assert_eq!(names(&v), ["g1-0", "g1-1", "a"]);
    assert_eq!((v.units, v.pdb_violations, v.highest_priority), (2, 0, Some(5)));
    assert_eq!(pods_per_node(&snap), before, "the snapshot is put back");
}

#[test]
fn upstream_may_take_half_a_gang_and_atomic_gangs_never_do() {
    let (env, mut snap) = Env::new();
    let v = env.plugin.select_pod_group_victims(&env.request(false, false), &mut snap, &mut empty(&["n2"])).unwrap();
    assert_eq!(names(&v), ["g1-0", "g1-1", "k-0"], "upstream: k-1 of the gang k stays");
    let v = env.plugin.select_pod_group_victims(&env.request(true, false), &mut snap, &mut empty(&["n2"])).unwrap();
    assert_eq!(names(&v), ["g1-0", "g1-1", "k-0", "k-1"], "the whole gang k or nothing of it");
    assert_eq!(v.units, 2);
}

#[test]
fn the_groups_own_members_and_equal_priorities_are_never_evicted() {
    let (mut env, mut snap) = Env::new();
    // n3 holds k-1 and the group's own bound member: only k-1 can go.
    let v = env.plugin.select_pod_group_victims(&env.request(true, false), &mut snap, &mut empty(&["n3"]));
    let s = v.unwrap_err();
    assert_eq!(s.message(), "pod group is unschedulable", "me-bound stays, so n3 is never empty");
    // Equal priority: a group of priority 0 finds no victim among priority-0 pods ...
    env.preemptor.spec.priority = Some(0);
    let s = env.plugin.select_pod_group_victims(&env.request(false, false), &mut snap, &mut empty(&[])).unwrap_err();
    assert_eq!((s.code(), s.message()), (Code::UnschedulableAndUnresolvable, NO_VICTIMS_FOR_PREEMPTOR.to_string()));
    // ... unless it only waits for them (reservation): n1 needs one pod gone; g1 (priority 5)
    // is above the group and stays, the gang k is given back, a is waited for.
    let mut at_most_one_on_n1 = |s: &mut Snapshot| {
        if s.get("n1").unwrap().pods.len() <= 1 {
            Status::success()
        } else {
            Status::unschedulable("pod group is unschedulable")
        }
    };
    let v = env.plugin.select_pod_group_victims(&env.request(true, true), &mut snap, &mut at_most_one_on_n1).unwrap();
    assert_eq!(names(&v), ["a"]);
}

#[test]
fn preemption_policy_never_forbids_evicting_but_not_reserving() {
    let (mut env, mut snap) = Env::new();
    let mut p = pod("me-0", 10, "", Some("me"));
    p.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    env.members = vec![Arc::new(PodInfo::new(Arc::new(p)))];
    let s =
        env.plugin.select_pod_group_victims(&env.request(false, false), &mut snap, &mut empty(&["n1"])).unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (Code::Unschedulable, "not eligible due to preemptionPolicy=Never.".to_string())
    );
    assert!(env.plugin.select_pod_group_victims(&env.request(false, true), &mut snap, &mut empty(&["n1"])).is_ok());
}

#[test]
fn a_domain_limits_the_victims_to_units_with_a_pod_in_it() {
    let (env, snap) = Env::new();
    let domain = [2usize]; // n3
    let mut req = env.request(true, false);
    req.domain = Some(&domain);
    // Only k (through k-1) touches n3; n1 cannot be emptied from there.
    let s = env.plugin.select_pod_group_victims(&req, &mut snap.clone(), &mut empty(&["n1"])).unwrap_err();
    assert_eq!(s.message(), "pod group is unschedulable");
    let v = env.plugin.select_pod_group_victims(&req, &mut snap.clone(), &mut empty(&["n2"])).unwrap_err();
    assert_eq!(v.message(), "pod group is unschedulable", "g1-1 on n2 is outside the domain's units");
}

#[test]
fn pdb_protected_units_are_given_back_first_and_counted() {
    let (env, mut snap) = Env::new();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "k", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "k"}}}, "status": {"disruptionsAllowed": 0,
        "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
    .unwrap();
    env.lister.pdbs.write().push(Arc::new(pdb));
    // Label k-0 and give it a twin on n2 so that either unit alone empties... n2 needs both.
    let mut pods: Vec<Pod> = snap.list().iter().flat_map(|n| n.pods.iter().map(|p| (*p.pod).clone())).collect();
    for p in pods.iter_mut().filter(|p| p.metadata.name.as_deref() == Some("k-0")) {
        p.metadata.labels = [("app".to_string(), "k".to_string())].into_iter().collect();
    }
    snap = snapshot(&["n1", "n2", "n3"], &pods);
    let v = env.plugin.select_pod_group_victims(&env.request(false, false), &mut snap, &mut empty(&["n2"])).unwrap();
    assert_eq!(names(&v), ["g1-0", "g1-1", "k-0"]);
    assert_eq!(v.pdb_violations, 1, "k-0 is protected by an exhausted budget, yet needed");
}

#[test]
fn importance_orders_priority_then_groups_then_size_then_start() {
    let t = |s: i64| k8s_openapi::jiff::Timestamp::from_second(s).unwrap();
    let unit = |prio: i32, in_group: bool, size: usize, start: i64| Unit {
        pods: (0..size).map(|i| (format!("n{i}"), Arc::new(PodInfo::new(Arc::new(Pod::default()))))).collect(),
        priority: prio,
        in_group,
        earliest_start: t(start),
    };
    let mut units = [
        unit(0, false, 1, 5),
        unit(0, false, 1, 1),
        unit(0, true, 2, 9),
        unit(0, true, 3, 9),
        unit(0, true, 3, 2),
        unit(1, false, 1, 9),
    ];
    units.sort_by(importance);
    let got: Vec<(i32, bool, usize, i64)> =
        units.iter().map(|u| (u.priority, u.in_group, u.pods.len(), u.earliest_start.as_second())).collect();
    assert_eq!(
        got,
        [(1, false, 1, 9), (0, true, 3, 2), (0, true, 3, 9), (0, true, 2, 9), (0, false, 1, 1), (0, false, 1, 5)]
    );
}

#[test]
fn members_do_not_preempt_one_by_one_under_the_workload_gates() {
    use ksched_framework::{CycleState, NodeToStatus, PostFilterPlugin};
    let mut registry = ksched_framework::Registry::new();
    registry.register(crate::names::PRIORITY_SORT, crate::prioritysort::new).unwrap();
    registry.register(crate::names::DEFAULT_BINDER, crate::defaultbinder::new).unwrap();
    let plugins: ksched_framework::plugin_config::Plugins = serde_json::from_value(
        json!({"multiPoint": {"enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]}}),
    )
    .unwrap();
    for (tas, wap, constraints, want) in [
        (true, false, true, NOT_ELIGIBLE_PLACEMENT_BASED),
        (false, true, false, NOT_ELIGIBLE_WORKLOAD_AWARE),
        (true, true, false, NOT_ELIGIBLE_WORKLOAD_AWARE),
        (true, false, false, super::POD_GROUP_NOT_FOUND),
    ] {
        let mut handle = Handle::for_tests();
        handle.features.topology_aware_workload_scheduling = tas;
        handle.features.workload_aware_preemption = wap;
        let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": 1}}});
        if constraints {
            spec["schedulingConstraints"] = json!({"topology": [{"key": "zone"}]});
        }
        if want != super::POD_GROUP_NOT_FOUND {
            handle.pod_groups.upsert(Arc::new(pod_group("me", 10, spec)));
        }
        let fw = ksched_framework::Framework::new(&registry, "p", &plugins, &[], handle.clone()).unwrap();
        let pl = DefaultPreemption::new(None, &handle).unwrap();
        let member = PodInfo::new(Arc::new(pod("me-0", 10, "", Some("me"))));
        let snap = snapshot(&["n1"], &[]);
        let (r, s) = pl.post_filter(&fw, &mut CycleState::new(), &member, &snap, &NodeToStatus::default());
        assert!(r.is_none());
        assert_eq!((s.code(), s.message()), (Code::Unschedulable, want.to_string()), "tas={tas} wap={wap}");
    }
}

#[test]
fn members_are_held_at_pre_enqueue_while_their_groups_evictions_run() {
    use ksched_framework::PreEnqueuePlugin;
    let mut handle = Handle::for_tests();
    handle.features.workload_aware_preemption = true;
    // Evictions never finish: the spawned task is dropped.
    handle.spawner = Arc::new(|_| {});
    handle.pod_groups.upsert(Arc::new(pod_group("me", 10, json!({"schedulingPolicy": {"gang": {"minCount": 1}}}))));
    let mut registry = ksched_framework::Registry::new();
    registry.register(crate::names::PRIORITY_SORT, crate::prioritysort::new).unwrap();
    registry.register(crate::names::DEFAULT_BINDER, crate::defaultbinder::new).unwrap();
    let plugins: ksched_framework::plugin_config::Plugins = serde_json::from_value(
        json!({"multiPoint": {"enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]}}),
    )
    .unwrap();
    let fw = ksched_framework::Framework::new(&registry, "p", &plugins, &[], handle.clone()).unwrap();
    let pl = DefaultPreemption::new(None, &handle).unwrap();
    let member = PodInfo::new(Arc::new(pod("me-0", 10, "", Some("me"))));
    assert!(pl.pre_enqueue(&member).is_success());
    let pg = handle.pod_groups.get("ns", "me").unwrap();
    let victims = ksched_framework::podgroup::PodGroupVictims {
        pods: vec![Arc::new(PodInfo::new(Arc::new(pod("a", 0, "n1", None))))],
        units: 1,
        pdb_violations: 0,
        highest_priority: Some(0),
    };
    pl.actuate_pod_group_preemption(&fw, &pg, &[Arc::new(member.clone())], &victims);
    let s = pl.pre_enqueue(&member);
    assert_eq!(
        (s.code(), s.message()),
        (Code::UnschedulableAndUnresolvable, super::WAITING_FOR_POD_GROUP_PREEMPTION.to_string())
    );
    let other = PodInfo::new(Arc::new(pod("b", 10, "", None)));
    assert!(pl.pre_enqueue(&other).is_success(), "only the group's members are held");
}
