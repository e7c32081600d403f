//! Gang behaviour past upstream, switched on through plugin args (GangScheduling's
//! `allOrNothing`, `gangPreemption`, `reserveAfterSeconds`; TopologyPlacementGenerator's
//! `bestFit`), each next to upstream's behaviour on the same cluster, and a seeded randomized
//! run of many competing gangs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_framework::pod::Pod;
use ksched_framework::{CycleState, Handle, Plugin, PodInfo, ReservePlugin, Status};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::tests::{
    cluster_with, condition_message, config, features, gang_with, gone, group_condition, node, placed, pod, running,
    wait_until, with_args,
};
use super::GANG_ROLLED_BACK;
use crate::config::{KubeSchedulerConfiguration, SchedulerFeatures};
use crate::inprocess::InProcessCluster;

fn gang_args(cfg: KubeSchedulerConfiguration, args: serde_json::Value) -> KubeSchedulerConfiguration {
    with_args(cfg, "GangScheduling", args)
}

fn waiting_at_permit(c: &InProcessCluster) -> usize {
    c.scheduler.profiles["default-scheduler"].framework.waiting_pods().len()
}

/// Rejects, at Reserve outside pod-group simulations (i.e. when an admitted gang is committed),
/// the pods whose name ends with `-refused`.
struct RefuseOnCommit;

impl Plugin for RefuseOnCommit {
    fn name(&self) -> &str {
        "RefuseOnCommit"
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
}

impl ReservePlugin for RefuseOnCommit {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, _node: &str) -> Status {
        if state.pod_group_cycle.is_none() && pod.name().ends_with("-refused") {
            return Status::unschedulable("refused on commit");
        }
        Status::success()
    }
    fn unreserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) {}
}

fn refusing_cluster(cfg: &KubeSchedulerConfiguration) -> InProcessCluster {
    let mut cfg = cfg.clone();
    let plugins = cfg.profiles[0].plugins.get_or_insert_with(Default::default);
    plugins.multi_point.enabled.push(serde_json::from_value(json!({"name": "RefuseOnCommit"})).unwrap());
    let mut registry = ksched_plugins::in_tree_registry();
    registry.register("RefuseOnCommit", |_, _: &Handle| Ok(Arc::new(RefuseOnCommit) as Arc<dyn Plugin>)).unwrap();
    InProcessCluster::new(&cfg, &registry, Arc::new(crate::metrics::NoopMetrics)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_neither_binds_part_of_a_gang_nor_holds_nodes_when_a_member_cannot_commit() {
    for all_or_nothing in [false, true] {
        let cfg = gang_args(config(features(false)), json!({"allOrNothing": all_or_nothing}));
        let mut c = refusing_cluster(&cfg);
        for i in 0..3 {
            c.apply_node(node(&format!("n{i}"), "a", "1"));
        }
        c.apply_pod_group(gang_with("g", 3, None, None));
        for name in ["g-0", "g-1", "g-2-refused"] {
            c.apply_pod(pod(name, "1", Some("g"), 0));
        }
        c.start();
        if all_or_nothing {
            assert!(
                wait_until(&c, |c| condition_message(c, "g-0").is_some_and(|m| m.contains(GANG_ROLLED_BACK))).await,
                "{:?}",
                condition_message(&c, "g-0")
            );
            assert!(wait_until(&c, |c| waiting_at_permit(c) == 0).await, "the members hold no node");
            // Retried every second, the gang is rolled back each time, never partly bound.
            tokio::time::sleep(Duration::from_millis(2500)).await;
        } else {
            // Upstream: g-0 and g-1 wait at Permit on their nodes; when g-2-refused is tried
            // again, its simulation reaches the quorum and releases them, then its own commit
            // fails: the gang ends up partly bound.
            assert!(wait_until(&c, |c| c.bound() == 2).await, "{} bound", c.bound());
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(placed(&c, "g-").len(), 2, "{:?}", c.placements());
            assert!(!placed(&c, "g-").contains_key("default/g-2-refused"));
            c.stop().await;
            continue;
        }
        assert_eq!(c.bound(), 0);
        c.stop().await;
    }
}

/// n0, n1: members of the low-priority gang `low` (minCount 2); n2: `mid` (priority 50).
fn half_gang_cluster(cfg: &KubeSchedulerConfiguration) -> InProcessCluster {
    let mut c = cluster_with(cfg);
    for i in 0..3 {
        c.apply_node(node(&format!("n{i}"), "a", "1"));
    }
    c.apply_pod_group(gang_with("low", 2, None, Some(0)));
    c.apply_pod(running("low-0", "1", Some("low"), 0, "n0"));
    c.apply_pod(running("low-1", "1", Some("low"), 0, "n1"));
    c.apply_pod(running("mid", "1", None, 50, "n2"));
    c.apply_pod_group(gang_with("high", 1, None, Some(100)));
    c.apply_pod(pod("high-0", "1", Some("high"), 100));
    c.start();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_preemption_takes_a_whole_gang_where_upstream_takes_half() {
    let wap = SchedulerFeatures { workload_aware_preemption: true, ..features(false) };
    let c = half_gang_cluster(&config(wap));
    assert!(wait_until(&c, |c| placed(c, "high").len() == 1).await);
    assert_eq!(gone(&c, &["low-0", "low-1", "mid"]), ["low-1"], "upstream: one member of `low` goes");
    c.stop().await;

    let c = half_gang_cluster(&gang_args(config(features(false)), json!({"gangPreemption": true})));
    assert!(wait_until(&c, |c| placed(c, "high").len() == 1).await);
    assert_eq!(gone(&c, &["low-0", "low-1", "mid"]), ["low-0", "low-1"], "the whole gang or nothing of it");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_preemption_evicts_nothing_unless_the_whole_gang_then_fits() {
    // n2 holds a pod above the gang: three members never fit, whatever is evicted.
    let setup = |cfg: &KubeSchedulerConfiguration| {
        let mut c = cluster_with(cfg);
        for i in 0..3 {
            c.apply_node(node(&format!("n{i}"), "a", "1"));
        }
        c.apply_pod(running("low-0", "1", None, 0, "n0"));
        c.apply_pod(running("low-1", "1", None, 0, "n1"));
        c.apply_pod(running("vip", "1", None, 200, "n2"));
        c.apply_pod_group(gang_with("high", 3, None, Some(100)));
        for i in 0..3 {
            c.apply_pod(pod(&format!("high-{i}"), "1", Some("high"), 100));
        }
        c.start();
        c
    };
    // Upstream (no workload-aware preemption): members preempt one by one while the group is
    // tried, for a group that cannot fit.
    let c = setup(&config(features(false)));
    assert!(wait_until(&c, |c| gone(c, &["low-0", "low-1"]).len() == 2).await);
    assert_eq!(c.bound(), 0);
    c.stop().await;

    let c = setup(&gang_args(config(features(false)), json!({"gangPreemption": true})));
    let evaluated =
        |c: &InProcessCluster| group_condition(c, "high").is_some_and(|(_, _, m)| m.contains("gang preemption"));
    assert!(wait_until(&c, evaluated).await, "{:?}", group_condition(&c, "high"));
    assert_eq!(
        group_condition(&c, "high").unwrap().2,
        "pod group is unschedulable, gang preemption: the gang does not fit even without every pod and gang of lower priority"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(gone(&c, &["low-0", "low-1", "vip"]).is_empty(), "nobody evicted");
    assert_eq!(c.bound(), 0);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_preemption_stays_in_the_cheapest_topology_domain() {
    let cfg = gang_args(config(features(true)), json!({"gangPreemption": true}));
    let mut c = cluster_with(&cfg);
    for (n, z) in [("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b")] {
        c.apply_node(node(n, z, "1"));
    }
    // Zone a costs two pods of priority 0; zone b two pods, one of priority 50.
    c.apply_pod(running("low-a0", "1", None, 0, "a0"));
    c.apply_pod(running("low-a1", "1", None, 0, "a1"));
    c.apply_pod(running("low-b0", "1", None, 0, "b0"));
    c.apply_pod(running("mid-b1", "1", None, 50, "b1"));
    c.apply_pod_group(gang_with("high", 2, Some("zone"), Some(100)));
    for i in 0..2 {
        c.apply_pod(pod(&format!("high-{i}"), "1", Some("high"), 100));
    }
    c.start();
    assert!(wait_until(&c, |c| placed(c, "high").len() == 2).await, "{:?}", group_condition(&c, "high"));
    assert_eq!(gone(&c, &["low-a0", "low-a1", "low-b0", "mid-b1"]), ["low-a0", "low-a1"]);
    let nodes: BTreeSet<String> = placed(&c, "high").into_values().collect();
    assert_eq!(nodes, BTreeSet::from(["a0".to_string(), "a1".to_string()]));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_fit_fills_the_tightest_domain_where_upstream_prefers_the_fullest_ratio() {
    // Zone big: 10 nodes of 4 cpu, 8 of them full (8 cpu free of 40).
    // Zone small: 2 nodes of 4 cpu, 2 cpu used (6 free of 8).
    // A gang of 4 × 1 cpu fits in both; upstream's placement score (MostAllocated ratio over
    // the domain) prefers big (90% cpu after vs 75%); best fit prefers small (2 cpu left vs 4).
    let setup = |cfg: &KubeSchedulerConfiguration| {
        let mut c = cluster_with(cfg);
        for i in 0..10 {
            c.apply_node(node(&format!("big-{i}"), "big", "4"));
        }
        for i in 0..8 {
            c.apply_pod(running(&format!("filler-{i}"), "4", None, 0, &format!("big-{i}")));
        }
        for i in 0..2 {
            c.apply_node(node(&format!("small-{i}"), "small", "4"));
        }
        c.apply_pod(running("filler-small", "2", None, 0, "small-0"));
        c.apply_pod_group(gang_with("train", 4, Some("zone"), None));
        for i in 0..4 {
            c.apply_pod(pod(&format!("train-{i}"), "1", Some("train"), 0));
        }
        c.start();
        c
    };
    let zones = |c: &InProcessCluster| -> BTreeSet<String> {
        placed(c, "train").into_values().map(|n| n.split('-').next().unwrap().to_string()).collect()
    };
    let c = setup(&config(features(true)));
    assert!(wait_until(&c, |c| placed(c, "train").len() == 4).await);
    assert_eq!(zones(&c), BTreeSet::from(["big".to_string()]));
    c.stop().await;

    let c = setup(&with_args(config(features(true)), "TopologyPlacementGenerator", json!({"bestFit": true})));
    assert!(wait_until(&c, |c| placed(c, "train").len() == 4).await);
    assert_eq!(zones(&c), BTreeSet::from(["small".to_string()]));
    c.stop().await;
}

/// The shortest step of [`churn_until_gang_binds`].
const STEP: Duration = Duration::from_millis(100);

/// Keeps `backlog` small pods pending and replaces the oldest bound small pod one at a time for
/// up to `steps` steps, until the gang `big` is bound. Returns the steps it took, if it was.
async fn churn_until_gang_binds(c: &InProcessCluster, steps: usize) -> Option<usize> {
    for step in 0..steps {
        if placed(c, "big").len() == 2 {
            return Some(step);
        }
        // Oldest first: the eight running from the start, then in binding order.
        let bound_small: Vec<String> = (0..8)
            .map(|i| format!("small-{i}"))
            .chain(c.binds().into_iter().map(|b| b.pod.trim_start_matches("default/").to_string()))
            .filter(|p| p.starts_with("small-"))
            .filter(|p| {
                c.pod("default", p).is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            })
            .collect();
        if let Some(oldest) = bound_small.first() {
            let p = c.pod("default", oldest).unwrap();
            c.delete_pod(&p);
        }
        c.apply_pod(pod(&format!("small-{}", 100 + step), "1", None, 0));
        // Let the freed cpu be taken (or kept for the gang) before the next step. Steps last at
        // least STEP, so that the churn spans the gang's backoff and reservation delay (both
        // 1 s) however fast small pods bind: the outcome must not depend on the machine's speed.
        let before = c.bound();
        let start = Instant::now();
        while (c.bound() == before && start.elapsed() < Duration::from_millis(150)) || start.elapsed() < STEP {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    (placed(c, "big").len() == 2).then_some(steps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_keeps_a_stream_of_small_pods_from_starving_a_gang() {
    // Four nodes of 2 cpu full of 1-cpu pods, more waiting; the gang needs two empty nodes.
    let setup = |cfg: &KubeSchedulerConfiguration| {
        let mut c = cluster_with(cfg);
        for i in 0..4 {
            c.apply_node(node(&format!("n{i}"), "a", "2"));
        }
        for i in 0..8 {
            c.apply_pod(running(&format!("small-{i}"), "1", None, 0, &format!("n{}", i / 2)));
        }
        for i in 8..12 {
            c.apply_pod(pod(&format!("small-{i}"), "1", None, 0));
        }
        c.apply_pod_group(gang_with("big", 2, None, None));
        for i in 0..2 {
            c.apply_pod(pod(&format!("big-{i}"), "2", Some("big"), 0));
        }
        c.start();
        c
    };
    // Upstream: every freed cpu goes to a small pod at once (their events requeue them; the
    // gang only retries after its backoff): the gang never sees two empty nodes.
    let c = setup(&config(features(false)));
    assert_eq!(churn_until_gang_binds(&c, 24).await, None, "starved");
    c.stop().await;

    let c = setup(&gang_args(config(features(false)), json!({"reserveAfterSeconds": 1})));
    let took = churn_until_gang_binds(&c, 60).await;
    assert!(took.is_some(), "the reservation lets the gang in; group says {:?}", group_condition(&c, "big"));
    c.stop().await;
}

#[test]
fn bad_args_are_refused_with_the_field_named() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _guard = rt.enter();
    let build = |plugin: &str, args: serde_json::Value| {
        let cfg = with_args(config(features(true)), plugin, args);
        InProcessCluster::new(&cfg, &ksched_plugins::in_tree_registry(), Arc::new(crate::metrics::NoopMetrics))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = build("GangScheduling", json!({"reserveAfterSeconds": -1}));
    assert!(e.contains("reserveAfterSeconds: Invalid value: -1: must be greater than or equal to 0"), "{e}");
    let e = build("GangScheduling", json!({"allOrNothin": true}));
    assert!(e.contains("unknown field `allOrNothin`"), "{e}");
    let e = build("TopologyPlacementGenerator", json!({"bestFit": "yes"}));
    assert!(e.contains("invalid type"), "{e}");
    assert!(build("GangScheduling", json!({"allOrNothing": true, "gangPreemption": true})).is_empty());
}

/// A pod's cpu request in millicores.
fn cpu_of(p: &Pod) -> i64 {
    let q =
        p.spec.as_ref().unwrap().containers[0].resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"].0.clone();
    q.parse::<i64>().unwrap() * 1000
}

/// Waits until the set of bound and existing pods stops changing for longer than the backoff.
async fn settle(c: &InProcessCluster, names: &[String]) {
    let state = |c: &InProcessCluster| -> Vec<(String, Option<String>)> {
        names
            .iter()
            .filter_map(|n| c.pod("default", n).map(|p| (n.clone(), p.spec.as_ref().and_then(|s| s.node_name.clone()))))
            .collect()
    };
    let start = Instant::now();
    let mut last = state(c);
    let mut since = Instant::now();
    while since.elapsed() < Duration::from_millis(1500) && start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = state(c);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_competing_gangs_are_never_partly_bound_and_hold_nothing_while_waiting() {
    // Upstream's behaviour at equal priorities; the opt-in gang behaviour with preemption.
    for (seed, past_upstream) in [(11u64, false), (12, true), (13, true)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut cfg = config(features(true));
        if past_upstream {
            cfg = gang_args(cfg, json!({"allOrNothing": true, "gangPreemption": true, "reserveAfterSeconds": 2}));
        }
        let mut c = cluster_with(&cfg);
        let mut capacity: BTreeMap<String, i64> = BTreeMap::new();
        for i in 0..12 {
            let cpu = rng.random_range(2..=4);
            let name = format!("n{i}");
            c.apply_node(node(&name, &format!("z{}", i % 3), &cpu.to_string()));
            capacity.insert(name, cpu * 1000);
        }
        let mut gangs: Vec<(String, Vec<String>, usize)> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for g in 0..14 {
            let size = rng.random_range(2..=5usize);
            let min = if rng.random_bool(0.3) { size - 1 } else { size };
            let prio = if past_upstream { [0, 10, 100][rng.random_range(0..3)] } else { 0 };
            let topology = rng.random_bool(0.3).then_some("zone");
            let cpu = rng.random_range(1..=2).to_string();
            let gname = format!("g{g}");
            c.apply_pod_group(gang_with(&gname, min as i32, topology, Some(prio)));
            let members: Vec<String> = (0..size).map(|i| format!("{gname}-{i}")).collect();
            for m in &members {
                c.apply_pod(pod(m, &cpu, Some(&gname), prio));
            }
            names.extend(members.iter().cloned());
            gangs.push((gname, members, min));
        }
        c.start();
        let bound_members = |c: &InProcessCluster, members: &[String]| {
            members
                .iter()
                .filter(|m| {
                    c.pod("default", m).is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                })
                .count()
        };
        for round in 0..3 {
            settle(&c, &names).await;
            // Invariants at every quiet point: whole gangs only, nothing held at Permit, no
            // node over its capacity.
            for (g, members, min) in &gangs {
                let b = bound_members(&c, members);
                assert!(b == 0 || b >= *min, "seed {seed} round {round}: gang {g} has {b} of minCount {min} bound");
            }
            assert_eq!(waiting_at_permit(&c), 0, "seed {seed} round {round}: pods wait at Permit");
            let mut used: BTreeMap<String, i64> = BTreeMap::new();
            for n in &names {
                if let Some(p) = c.pod("default", n) {
                    if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                        *used.entry(node).or_default() += cpu_of(&p);
                    }
                    assert!(!c.scheduler.cache.is_assumed_pod(&p), "seed {seed}: {n} is still assumed");
                }
            }
            for (node, u) in &used {
                assert!(*u <= capacity[node], "seed {seed}: {node} holds {u}m of {}m", capacity[node]);
            }
            // Complete gangs finish and leave room for the others.
            let done: Vec<usize> = (0..gangs.len()).filter(|&i| bound_members(&c, &gangs[i].1) >= gangs[i].2).collect();
            for i in done.into_iter().take(3) {
                for m in &gangs[i].1 {
                    if let Some(p) = c.pod("default", m) {
                        c.delete_pod(&p);
                    }
                }
            }
        }
        c.stop().await;
    }
}
