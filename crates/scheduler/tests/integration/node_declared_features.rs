//! NodeDeclaredFeatures in the default profile: pods needing a node feature only land on nodes
//! declaring it, and are refused elsewhere with upstream's message.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_scheduler::inprocess::InProcessCluster;
use serde_json::{json, Value};

fn node(name: &str, features: &[&str]) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "declaredFeatures": features}}))
    .unwrap()
}

fn pod(name: &str, extra: Value) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "i", "restartPolicy": "Never",
        "restartPolicyRules": [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]}]});
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})).unwrap()
}

fn condition_message(c: &InProcessCluster, name: &str) -> Option<String> {
    c.pod("default", name)?
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?
        .message
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_go_only_to_nodes_declaring_their_features() {
    let cfg = ksched_scheduler::config::default_config();
    let mut c = InProcessCluster::new(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ksched_scheduler::metrics::NoopMetrics),
    )
    .unwrap();
    c.apply_node(node("plain-1", &[]));
    c.apply_node(node("plain-2", &["SomethingElse"]));
    c.apply_node(node("restarts", &["RestartAllContainersOnContainerExits"]));
    c.apply_pod(pod("restart-all", json!({})));
    c.apply_pod(pod("host-net-userns", json!({"hostNetwork": true, "hostUsers": false})));
    c.start();

    let start = Instant::now();
    let msg = loop {
        if let (Some(_), Some(m)) =
            (c.placements().get("default/restart-all"), condition_message(&c, "host-net-userns"))
        {
            break m;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "placements: {:?}", c.placements());
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(c.placements()["default/restart-all"], "restarts");
    assert_eq!(
        msg,
        "0/3 nodes are available: 3 node(s) didn't match Pod's required features. no new claims to deallocate, \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    c.stop().await;
}
