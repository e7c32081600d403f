use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use ksched_framework::podgroup::PodGroup;
use serde_json::{json, Value};

use crate::config::{default_config_with, SchedulerFeatures};
use crate::inprocess::InProcessCluster;

fn features(topology: bool) -> SchedulerFeatures {
    SchedulerFeatures {
        generic_workload: true,
        gang_scheduling: true,
        topology_aware_workload_scheduling: topology,
        ..SchedulerFeatures::default()
    }
}

fn cluster(f: SchedulerFeatures) -> InProcessCluster {
    let cfg = default_config_with(&f);
    InProcessCluster::new(&cfg, &ksched_plugins::in_tree_registry(), Arc::new(crate::metrics::NoopMetrics)).unwrap()
}

fn node(name: &str, zone: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": zone}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}))
    .unwrap()
}

fn member(name: &str, group: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})).unwrap()
}

fn gang(name: &str, min: i32, topology: Option<&str>) -> PodGroup {
    let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": min}}});
    if let Some(k) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": k}]});
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})).unwrap()
}

async fn wait_until(c: &InProcessCluster, what: impl Fn(&InProcessCluster) -> bool) -> bool {
    let start = Instant::now();
    while !what(c) {
        if start.elapsed() > Duration::from_secs(20) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

fn condition_message(c: &InProcessCluster, name: &str) -> Option<String> {
    let p = serde_json::to_value(c.pod("default", name)?).ok()?;
    p.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .and_then(|c| c["message"].as_str().map(str::to_string))
}

fn placed(c: &InProcessCluster, prefix: &str) -> HashMap<String, String> {
    c.placements().into_iter().filter(|(k, _)| k.starts_with(&format!("default/{prefix}"))).collect()
}

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
    let nodes: std::collections::BTreeSet<String> = placed(&c, "train").into_values().collect();
    assert_eq!(nodes.len(), 4, "one member per node");
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
    let waiting = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, \
                   one or more plugins asked to wait and no plugin rejected pod";
    assert!(
        wait_until(&c, |c| (0..4).filter_map(|i| condition_message(c, &format!("train-{i}"))).count() == 4).await,
        "every member reports a condition"
    );
    let messages: Vec<String> = (0..4).filter_map(|i| condition_message(&c, &format!("train-{i}"))).collect();
    assert_eq!(messages.iter().filter(|m| m.as_str() == waiting).count(), 3, "{messages:?}");
    assert_eq!(
        messages.iter().filter(|m| m.starts_with("0/3 nodes are available: 3 Insufficient cpu.")).count(),
        1,
        "{messages:?}"
    );
    assert_eq!(c.bound(), 0, "no member holds a node");
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
    c.stop().await;
}

#[test]
fn metric_results_use_upstreams_labels() {
    use super::{result_label, Outcome};
    let labels: Vec<&str> =
        [Outcome::Scheduled, Outcome::WaitingOnPreemption, Outcome::Unschedulable, Outcome::Error(String::new())]
            .iter()
            .map(result_label)
            .collect();
    assert_eq!(labels, ["scheduled", "waiting_on_preemption", "unschedulable", "error"]);
    let _: Value = json!(null);
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
