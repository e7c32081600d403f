//! The pod-group cycle with upstream's behaviour (the alpha gates on, GangScheduling without
//! args): placements, messages (upstream's strings, as its source builds them), the
//! PodGroupScheduled condition and workload-aware preemption, through an in-process cluster.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::podgroup::PodGroup;
use serde_json::{json, Value};

use super::{result_label, GroupStatus};
use crate::config::{default_config_with, KubeSchedulerConfiguration, PluginArgs, PluginConfig, SchedulerFeatures};
use crate::inprocess::InProcessCluster;

pub(super) fn features(topology: bool) -> SchedulerFeatures {
    SchedulerFeatures {
        generic_workload: true,
        gang_scheduling: true,
        topology_aware_workload_scheduling: topology,
        ..SchedulerFeatures::default()
    }
}

pub(super) fn config(f: SchedulerFeatures) -> KubeSchedulerConfiguration {
    let mut cfg = default_config_with(&f);
    // Members that fail come back after their backoff only: keep it short.
    cfg.pod_initial_backoff_seconds = Some(1);
    cfg.pod_max_backoff_seconds = Some(1);
    cfg
}

/// Sets a plugin's args in the (only) profile.
pub(super) fn with_args(mut cfg: KubeSchedulerConfiguration, plugin: &str, args: Value) -> KubeSchedulerConfiguration {
    cfg.profiles[0].plugin_config.push(PluginConfig { name: plugin.into(), args: PluginArgs::Unknown(args) });
    cfg
}

pub(super) fn cluster_with(cfg: &KubeSchedulerConfiguration) -> InProcessCluster {
    InProcessCluster::new(cfg, &ksched_plugins::in_tree_registry(), Arc::new(crate::metrics::NoopMetrics)).unwrap()
}

fn cluster(f: SchedulerFeatures) -> InProcessCluster {
    cluster_with(&config(f))
}

pub(super) fn node(name: &str, zone: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": zone}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}))
    .unwrap()
}

/// A pod asking for `cpu`, in `group` when given, with a priority.
pub(super) fn pod(name: &str, cpu: &str, group: Option<&str>, priority: i32) -> Pod {
    let mut spec =
        json!({"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})).unwrap()
}

/// A bound pod (already running on `node`).
pub(super) fn running(name: &str, cpu: &str, group: Option<&str>, priority: i32, node: &str) -> Pod {
    let mut p = pod(name, cpu, group, priority);
    p.spec.as_mut().unwrap().node_name = Some(node.into());
    p
}

fn member(name: &str, group: Option<&str>) -> Pod {
    pod(name, "1", group, 0)
}

/// A gang of `min` with an optional topology key and priority.
pub(super) fn gang_with(name: &str, min: i32, topology: Option<&str>, priority: Option<i32>) -> PodGroup {
    let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": min}}});
    if let Some(k) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": k}]});
    }
    if let Some(p) = priority {
        spec["priority"] = json!(p);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})).unwrap()
}

fn gang(name: &str, min: i32, topology: Option<&str>) -> PodGroup {
    gang_with(name, min, topology, None)
}

pub(super) async fn wait_until(c: &InProcessCluster, what: impl Fn(&InProcessCluster) -> bool) -> bool {
    let start = Instant::now();
    while !what(c) {
        if start.elapsed() > Duration::from_secs(20) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

pub(super) fn condition_message(c: &InProcessCluster, name: &str) -> Option<String> {
    let p = serde_json::to_value(c.pod("default", name)?).ok()?;
    p.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .and_then(|c| c["message"].as_str().map(str::to_string))
}

/// The PodGroupScheduled condition: (status, reason, message).
pub(super) fn group_condition(c: &InProcessCluster, name: &str) -> Option<(String, String, String)> {
    let pg = c.pod_group("default", name)?;
    let cond = pg.status?.conditions?.into_iter().find(|c| c.type_ == "PodGroupScheduled")?;
    Some((cond.status, cond.reason, cond.message))
}

pub(super) fn placed(c: &InProcessCluster, prefix: &str) -> HashMap<String, String> {
    c.placements().into_iter().filter(|(k, _)| k.starts_with(&format!("default/{prefix}"))).collect()
}

/// Pods deleted so far (present before, gone from the cluster now).
pub(super) fn gone(c: &InProcessCluster, names: &[&str]) -> Vec<String> {
    names.iter().filter(|n| c.pod("default", n).is_none()).map(|n| n.to_string()).collect()
}

/// Upstream's Permit wait reason as the framework aggregates it.
pub(super) const PERMIT_WAIT: &str =
    "waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_fits_binds_every_member() {
    let mut c = cluster(features(false));
    for i in 0..4 {
        c.apply_node(node(&format!("n{i}"), "a", "1"));
    }
    c.apply_pod_group(gang("train", 4, None));
    for i in 0..4 {
        c.apply_pod(member(&format!("train-{i}"), Some("train")));
    }
    c.start();
    assert!(wait_until(&c, |c| c.bound() == 4).await, "bound {:?}", c.placements());
    let nodes: BTreeSet<String> = placed(&c, "train").into_values().collect();
    assert_eq!(nodes.len(), 4, "one member per node");
    assert!(wait_until(&c, |c| group_condition(c, "train").is_some()).await);
    assert_eq!(group_condition(&c, "train").unwrap(), ("True".into(), "Scheduled".into(), String::new()));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_does_not_fit_binds_nothing_and_says_why() {
    let mut c = cluster(features(false));
    for i in 0..3 {
        c.apply_node(node(&format!("n{i}"), "a", "1"));
    }
    c.apply_pod_group(gang("train", 4, None));
    for i in 0..4 {
        c.apply_pod(member(&format!("train-{i}"), Some("train")));
    }
    c.start();
    let waiting = format!("pod group is unschedulable, {PERMIT_WAIT}");
    assert!(
        wait_until(&c, |c| (0..4).filter_map(|i| condition_message(c, &format!("train-{i}"))).count() == 4).await,
        "every member reports a condition"
    );
    let messages: Vec<String> = (0..4).filter_map(|i| condition_message(&c, &format!("train-{i}"))).collect();
    assert_eq!(messages.iter().filter(|m| **m == waiting).count(), 3, "{messages:?}");
    assert_eq!(
        messages.iter().filter(|m| m.starts_with("0/3 nodes are available: 3 Insufficient cpu.")).count(),
        1,
        "{messages:?}"
    );
    assert_eq!(c.bound(), 0, "no member holds a node");
    assert!(wait_until(&c, |c| group_condition(c, "train").is_some()).await);
    assert_eq!(
        group_condition(&c, "train").unwrap(),
        ("False".into(), "Unschedulable".into(), "pod group is unschedulable".into())
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_wait_in_pre_enqueue_until_min_count_exist() {
    let mut c = cluster(features(false));
    for i in 0..4 {
        c.apply_node(node(&format!("n{i}"), "a", "1"));
    }
    c.apply_pod_group(gang("train", 3, None));
    c.apply_pod(member("train-0", Some("train")));
    c.apply_pod(member("train-1", Some("train")));
    c.start();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c.bound(), 0, "two of three members must not be tried");
    c.apply_pod(member("train-2", Some("train")));
    assert!(wait_until(&c, |c| c.bound() == 3).await, "bound {:?}", c.placements());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_constrained_gang_lands_in_one_domain() {
    let mut c = cluster(features(true));
    // Zone a has 3 free cpus, zone b 4: the gang of 4 fits only in b, although 7 are free.
    for i in 0..3 {
        c.apply_node(node(&format!("a{i}"), "a", "1"));
    }
    for i in 0..2 {
        c.apply_node(node(&format!("b{i}"), "b", "2"));
    }
    c.apply_pod_group(gang("train", 4, Some("zone")));
    for i in 0..4 {
        c.apply_pod(member(&format!("train-{i}"), Some("train")));
    }
    c.start();
    assert!(wait_until(&c, |c| c.bound() == 4).await, "bound {:?}", c.placements());
    for (pod, node) in placed(&c, "train") {
        assert!(node.starts_with('b'), "{pod} on {node}");
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_domain_that_fits_and_no_domain_at_all_say_so_as_upstream() {
    let mut c = cluster(features(true));
    for (n, z) in [("a0", "a"), ("a1", "a"), ("b0", "b")] {
        c.apply_node(node(n, z, "1"));
    }
    // Three members, no zone has three nodes.
    c.apply_pod_group(gang("wide", 3, Some("zone")));
    // No node carries the rack label: no placement at all.
    c.apply_pod_group(gang("racked", 1, Some("rack")));
    for i in 0..3 {
        c.apply_pod(member(&format!("wide-{i}"), Some("wide")));
    }
    c.apply_pod(member("racked-0", Some("racked")));
    c.start();
    assert!(wait_until(&c, |c| group_condition(c, "wide").is_some() && group_condition(c, "racked").is_some()).await);
    assert_eq!(
        group_condition(&c, "wide").unwrap().2,
        "0/2 placements are available, first placement status: pod group is unschedulable"
    );
    assert_eq!(
        group_condition(&c, "racked").unwrap(),
        ("False".into(), "Unschedulable".into(), "no feasible placements found".into())
    );
    assert!(wait_until(&c, |c| condition_message(c, "racked-0").is_some()).await);
    assert_eq!(condition_message(&c, "racked-0").unwrap(), "no feasible placements found");
    // In zone a two members fit and wait for the third at Permit; the third fits nowhere.
    assert!(wait_until(&c, |c| (0..3).all(|i| condition_message(c, &format!("wide-{i}")).is_some())).await);
    let messages: Vec<String> = (0..3).filter_map(|i| condition_message(&c, &format!("wide-{i}"))).collect();
    assert_eq!(
        messages.iter().filter(|m| **m == format!("pod group is unschedulable, {PERMIT_WAIT}")).count(),
        2,
        "{messages:?}"
    );
    assert_eq!(c.bound(), 0);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_of_one_group_must_share_a_scheduler_name() {
    let mut cfg = config(features(false));
    let mut other = cfg.profiles[0].clone();
    other.scheduler_name = Some("other".into());
    cfg.profiles.push(other);
    let mut c = cluster_with(&cfg);
    c.apply_node(node("n0", "a", "4"));
    c.apply_pod_group(gang("mixed", 2, None));
    c.apply_pod(member("mixed-0", Some("mixed")));
    let mut p = member("mixed-1", Some("mixed"));
    p.spec.as_mut().unwrap().scheduler_name = Some("other".into());
    c.apply_pod(p);
    c.start();
    assert!(
        wait_until(&c, |c| condition_message(c, "mixed-0").is_some() && condition_message(c, "mixed-1").is_some())
            .await
    );
    let m = condition_message(&c, "mixed-0").unwrap();
    assert!(
        m == "all pods in a single pod group should have the same .spec.schedulerName set, got: \"other\" and \"default-scheduler\""
            || m == "all pods in a single pod group should have the same .spec.schedulerName set, got: \"default-scheduler\" and \"other\"",
        "{m}"
    );
    assert_eq!(condition_message(&c, "mixed-1").unwrap(), m, "both members fail with the same error");
    assert_eq!(c.bound(), 0);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gates_off_group_members_are_ordinary_pods() {
    let mut c = cluster(SchedulerFeatures::default());
    for i in 0..3 {
        c.apply_node(node(&format!("n{i}"), "a", "1"));
    }
    c.apply_pod_group(gang("train", 4, None));
    for i in 0..4 {
        c.apply_pod(member(&format!("train-{i}"), Some("train")));
    }
    c.start();
    assert!(wait_until(&c, |c| c.bound() == 3).await, "bound {:?}", c.placements());
    assert!(c.pod_group("default", "train").unwrap().status.is_none(), "nothing is written on the group");
    c.stop().await;
}

#[test]
fn metric_results_and_conditions_use_upstreams_labels() {
    let unschedulable = GroupStatus::unschedulable(&[]);
    let labels = [
        result_label(&GroupStatus::success(), false),
        result_label(&GroupStatus::unschedulable(&[super::WAITING_FOR_PREEMPTION]), true),
        result_label(&unschedulable, false),
        result_label(&GroupStatus::error("boom"), false),
    ];
    assert_eq!(labels, ["scheduled", "waiting_on_preemption", "unschedulable", "error"]);
    use super::status::condition_for;
    assert_eq!(condition_for(&GroupStatus::success()), ("True", "Scheduled", String::new()));
    assert_eq!(
        condition_for(&GroupStatus::unschedulable(&[super::WAITING_FOR_PREEMPTION])),
        (
            "False",
            "Unschedulable",
            "pod group is unschedulable, pod group is waiting for preemption to complete".into()
        )
    );
    let mut s = GroupStatus::error("failed to schedule other pod from a pod group: boom");
    s.push_reason("ignored in the error");
    assert_eq!(
        condition_for(&s),
        ("False", "SchedulerError", "failed to schedule other pod from a pod group: boom".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gangs_that_fit_only_one_at_a_time_both_finish() {
    let mut c = cluster(features(false));
    for i in 0..4 {
        c.apply_node(node(&format!("n{i}"), "a", "1"));
    }
    c.apply_pod_group(gang("first", 4, None));
    c.apply_pod_group(gang("second", 4, None));
    // Interleaved creation: a per-pod scheduler would give each gang half the nodes and
    // deadlock both; the group cycle places one gang whole and keeps the other off the nodes.
    for i in 0..4 {
        c.apply_pod(member(&format!("first-{i}"), Some("first")));
        c.apply_pod(member(&format!("second-{i}"), Some("second")));
    }
    c.start();
    assert!(wait_until(&c, |c| c.bound() == 4).await, "bound {:?}", c.placements());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (first, second) = (placed(&c, "first"), placed(&c, "second"));
    assert!(
        (first.len(), second.len()) == (4, 0) || (first.len(), second.len()) == (0, 4),
        "one whole gang, never halves: {first:?} {second:?}"
    );
    // The winner finishes; the other gang then gets the nodes.
    let (done, next) = if first.len() == 4 { ("first", "second") } else { ("second", "first") };
    for i in 0..4 {
        let p = c.pod("default", &format!("{done}-{i}")).unwrap();
        c.delete_pod(&p);
    }
    assert!(wait_until(&c, |c| placed(c, next).len() == 4).await, "bound {:?}", c.placements());
    c.stop().await;
}

/// WorkloadAwarePreemption: the group preempts as a whole; its members do not preempt alone.
fn wap() -> SchedulerFeatures {
    SchedulerFeatures { workload_aware_preemption: true, ..features(false) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_aware_preemption_evicts_for_the_whole_group_then_binds_it() {
    let mut c = cluster(wap());
    for i in 0..4 {
        c.apply_node(node(&format!("n{i}"), "a", "1"));
    }
    // A low-priority group preempted as a whole (disruptionMode PodGroup) on n0, n1; single
    // low-priority pods on n2, n3. The high gang needs two nodes: the singles go, the group
    // (more important than single pods of its priority) is given back.
    let mut old = gang_with("old", 2, None, Some(0));
    old.spec.disruption_mode = Some("PodGroup".into());
    c.apply_pod_group(old);
    c.apply_pod(running("old-0", "1", Some("old"), 0, "n0"));
    c.apply_pod(running("old-1", "1", Some("old"), 0, "n1"));
    c.apply_pod(running("single-2", "1", None, 0, "n2"));
    c.apply_pod(running("single-3", "1", None, 0, "n3"));
    c.apply_pod_group(gang_with("high", 2, None, Some(100)));
    for i in 0..2 {
        c.apply_pod(pod(&format!("high-{i}"), "1", Some("high"), 100));
    }
    c.start();
    assert!(wait_until(&c, |c| placed(c, "high").len() == 2).await, "bound {:?}", c.placements());
    assert_eq!(gone(&c, &["old-0", "old-1", "single-2", "single-3"]), ["single-2", "single-3"]);
    let nodes: BTreeSet<String> = placed(&c, "high").into_values().collect();
    assert_eq!(nodes, BTreeSet::from(["n2".to_string(), "n3".to_string()]));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_aware_preemption_messages() {
    let mut c = cluster(SchedulerFeatures { topology_aware_workload_scheduling: true, ..wap() });
    c.apply_node(node("n0", "a", "1"));
    c.apply_node(node("n1", "b", "1"));
    c.apply_pod(running("low-0", "1", None, 0, "n0"));
    c.apply_pod(running("low-1", "1", None, 0, "n1"));
    // Constrained to one zone: members do not preempt (placement-based), the group cannot.
    c.apply_pod_group(gang_with("zoned", 1, Some("zone"), Some(100)));
    c.apply_pod(pod("zoned-0", "1", Some("zoned"), 100));
    // Never preempts.
    c.apply_pod_group(gang_with("polite", 1, None, Some(100)));
    let mut p = pod("polite-0", "1", Some("polite"), 100);
    p.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    c.apply_pod(p);
    // Nothing of lower priority to take.
    c.apply_pod_group(gang_with("lowly", 1, None, Some(0)));
    c.apply_pod(pod("lowly-0", "1", Some("lowly"), 0));
    c.start();
    let ready = |c: &InProcessCluster| {
        ["zoned", "polite", "lowly"].iter().all(|g| group_condition(c, g).is_some())
            && ["zoned-0", "polite-0", "lowly-0"].iter().all(|p| condition_message(c, p).is_some())
    };
    assert!(wait_until(&c, ready).await);
    assert_eq!(
        group_condition(&c, "zoned").unwrap().2,
        "0/2 placements are available, first placement status: pod group is unschedulable, \
         workload aware preemption is not supported for pod groups with scheduling constraints"
    );
    assert_eq!(
        condition_message(&c, "zoned-0").unwrap(),
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: not eligible due to placement-based pod group scheduling limitation"
    );
    assert_eq!(
        group_condition(&c, "polite").unwrap().2,
        "0/1 placements are available, first placement status: pod group is unschedulable, not eligible due to preemptionPolicy=Never."
    );
    assert_eq!(
        condition_message(&c, "polite-0").unwrap(),
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: not eligible due to workload aware preemption enabled"
    );
    assert_eq!(
        group_condition(&c, "lowly").unwrap().2,
        "0/1 placements are available, first placement status: pod group is unschedulable, No preemption victims found for incoming preemptor"
    );
    assert_eq!(gone(&c, &["low-0", "low-1"]), Vec::<String>::new(), "nobody was evicted");
    c.stop().await;
}
