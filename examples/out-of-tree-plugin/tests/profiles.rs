//! The example plugin acts on pods of the `example-scheduler` profile only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use ksched_scheduler::inprocess::InProcessCluster;
use serde_json::json;

fn node(name: &str, zone: Option<&str>, cpu: &str) -> Node {
    let labels = zone.map(|z| json!({"topology.kubernetes.io/zone": z})).unwrap_or(json!({}));
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}))
    .unwrap()
}

fn pod(name: &str, scheduler: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": scheduler,
                 "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m"}}}]}}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_profile_uses_the_plugin_and_the_default_profile_does_not() {
    let config = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/config.yaml")).unwrap();
    let cfg = ksched_scheduler::config::load_config(&config, "config.yaml").unwrap();
    ksched_scheduler::config::validate(&cfg).unwrap();
    let mut registry = ksched_plugins::in_tree_registry();
    registry.register(zone_preference_scheduler::NAME, zone_preference_scheduler::new).unwrap();

    let mut c = InProcessCluster::new(&cfg, &registry, Arc::new(ksched_scheduler::metrics::NoopMetrics)).unwrap();
    // The unlabelled node is the emptiest, so default scoring prefers it; zone-a is the fullest.
    c.apply_node(node("no-zone", None, "16"));
    c.apply_node(node("in-b", Some("zone-b"), "8"));
    c.apply_node(node("in-a", Some("zone-a"), "4"));
    for i in 0..3 {
        c.apply_pod(pod(&format!("example-{i}"), "example-scheduler"));
        c.apply_pod(pod(&format!("default-{i}"), "default-scheduler"));
    }
    c.apply_pod(pod("nobody", "someone-else"));
    c.start();
    let start = Instant::now();
    while c.bound() < 6 {
        assert!(start.elapsed() < Duration::from_secs(15), "only {} bound", c.bound());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let placements = c.placements();
    // Filter + Score: every example pod in zone-a, although zone-a is the fullest node.
    for i in 0..3 {
        assert_eq!(placements[&format!("default/example-{i}")], "in-a", "{placements:?}");
    }
    // The default profile has no such filter: the unlabelled (emptiest) node gets its pods.
    assert_eq!(placements["default/default-0"], "no-zone", "{placements:?}");
    assert!((0..3).all(|i| placements[&format!("default/default-{i}")] != "in-a"), "{placements:?}");
    assert!(!placements.contains_key("default/nobody-{i}"));
    c.stop().await;
}

#[test]
fn bad_args_fail_plugin_construction() {
    let build = |args| zone_preference_scheduler::new(Some(&args), &ksched_framework::Handle::for_tests()).err();
    assert_eq!(build(json!({"zoneLabel": ""})).as_deref(), Some("zoneLabel: Required value"));
    let err = build(json!({"typo": 1})).unwrap_or_default();
    assert!(err.contains("unknown field `typo`"), "{err}");
}

#[test]
fn a_plugin_name_colliding_with_an_in_tree_plugin_fails_at_startup() {
    let code = ksched_scheduler::command::SchedulerCommand::new()
        .with_plugin("NodeResourcesFit", zone_preference_scheduler::new)
        .run_with_args(vec!["kube-scheduler".into(), "--secure-port=0".into()]);
    assert_eq!(code, std::process::ExitCode::FAILURE);
}
