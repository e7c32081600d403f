//! Pod groups end to end: the embedded API server (PodGroups served as
//! `scheduling.k8s.io/v1alpha2`), our scheduler over HTTP with the workload-aware alpha gates:
//! a topology-constrained gang lands whole in the one zone that fits it, a second gang waits
//! binding nothing, with upstream's messages on its pods and the PodGroupScheduled condition
//! written on both PodGroups; a high-priority gang preempts a low-priority pod through the API
//! (WorkloadAwarePreemption) and binds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ksched_apiserver::{ApiServer, ServerConfig, Store};
use ksched_scheduler::{app, config};
use serde_json::{json, Value};

fn create(store: &Store, v: Value) {
    store.create(v.clone()).unwrap_or_else(|e| panic!("creating {v}: {e:?}"));
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn node(name: &str, zone: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A PodGroup of PriorityClass `class`; priority admission resolves it into `spec.priority`.
fn pod_group(name: &str, min: i32, zone: bool, class: &str) -> Value {
    let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": min}}, "priorityClassName": class});
    if zone {
        spec["schedulingConstraints"] = json!({"topology": [{"key": "topology.kubernetes.io/zone"}]});
    }
    json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn pod(name: &str, group: Option<&str>, class: &str, cpu: &str) -> Value {
    let mut spec = json!({"priorityClassName": class,
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(g) = group {
        spec["schedulingGroup"] = json!({"podGroupName": g});
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangs_and_workload_aware_preemption_through_the_api_server() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
    let store = server.store();
    let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
    let client =
        kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap()).unwrap();
    for (name, value) in [("low", 0), ("high", 1000)] {
        create(
            &store,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}),
        );
    }
    // zone-a: three nodes of 1 cpu; zone-b: two nodes of 2 cpu.
    for i in 0..3 {
        create(&store, node(&format!("a{i}"), "zone-a", "1"));
    }
    for i in 0..2 {
        create(&store, node(&format!("b{i}"), "zone-b", "2"));
    }
    create(&store, pod_group("train", 4, true, "low"));
    for i in 0..4 {
        create(&store, pod(&format!("train-{i}"), Some("train"), "low", "1"));
    }

    let mut cfg = config::default_config_with(&config::SchedulerFeatures {
        generic_workload: true,
        gang_scheduling: true,
        topology_aware_workload_scheduling: true,
        workload_aware_preemption: true,
        ..config::SchedulerFeatures::default()
    });
    cfg.pod_initial_backoff_seconds = Some(1);
    cfg.pod_max_backoff_seconds = Some(1);
    let scheduler = app::start(client, &cfg, &ksched_plugins::in_tree_registry()).await.unwrap();

    let get = |kind: &str, name: &str| {
        let api = if kind == "Pod" { "v1" } else { "scheduling.k8s.io/v1alpha2" };
        store.get(api, kind, Some("default"), name)
    };
    let node_of = |name: &str| get("Pod", name)?.pointer("/spec/nodeName")?.as_str().map(str::to_string);
    let condition = |kind: &str, name: &str, ty: &str| -> Option<(String, String)> {
        let v = get(kind, name)?;
        let c = v.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == ty)?.clone();
        Some((c["status"].as_str()?.to_string(), c["message"].as_str().unwrap_or_default().to_string()))
    };

    // The gang fits only in zone-b (4 free cpus there, 3 in zone-a).
    let nodes = wait_for("train to be bound", || (0..4).map(|i| node_of(&format!("train-{i}"))).collect()).await;
    let nodes: Vec<String> = nodes;
    assert!(nodes.iter().all(|n| n.starts_with('b')), "{nodes:?}");
    let (status, message) =
        wait_for("train's PodGroupScheduled", || condition("PodGroup", "train", "PodGroupScheduled")).await;
    assert_eq!((status.as_str(), message.as_str()), ("True", ""));

    // A second gang of four finds only zone-a's three cpus: nothing is bound.
    create(&store, pod_group("later", 4, false, "low"));
    for i in 0..4 {
        create(&store, pod(&format!("later-{i}"), Some("later"), "low", "1"));
    }
    let messages: Vec<String> = wait_for("later's members to be refused", || {
        (0..4).map(|i| condition("Pod", &format!("later-{i}"), "PodScheduled").map(|c| c.1)).collect()
    })
    .await;
    let waiting = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, \
                   one or more plugins asked to wait and no plugin rejected pod";
    assert_eq!(messages.iter().filter(|m| *m == waiting).count(), 3, "{messages:?}");
    assert!(
        messages.iter().any(|m| m.starts_with("0/5 nodes are available: 5 Insufficient cpu.")
            && m.ends_with("preemption: not eligible due to workload aware preemption enabled")),
        "{messages:?}"
    );
    assert!((0..4).all(|i| node_of(&format!("later-{i}")).is_none()));
    let (status, message) =
        wait_for("later's PodGroupScheduled", || condition("PodGroup", "later", "PodGroupScheduled")).await;
    assert_eq!(status, "False");
    assert!(
        message.starts_with("0/1 placements are available, first placement status: pod group is unschedulable, "),
        "{message}"
    );

    // A high-priority gang of one takes a node from a low-priority pod: zone-a's nodes are
    // free (the waiting gang holds nothing), so fill one first.
    create(&store, pod("filler-0", None, "low", "1"));
    create(&store, pod("filler-1", None, "low", "1"));
    create(&store, pod("filler-2", None, "low", "1"));
    let start = Instant::now();
    while (0..3).any(|i| node_of(&format!("filler-{i}")).is_none()) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "fillers not bound: {:?}",
            (0..3).map(|i| condition("Pod", &format!("filler-{i}"), "PodScheduled")).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    create(&store, pod_group("urgent", 1, false, "high"));
    create(&store, pod("urgent-0", Some("urgent"), "high", "1"));
    let node = wait_for("urgent to be bound", || node_of("urgent-0")).await;
    assert!(node.starts_with('a'), "{node}");
    let evicted: Vec<String> = (0..3).map(|i| format!("filler-{i}")).filter(|p| get("Pod", p).is_none()).collect();
    assert_eq!(evicted.len(), 1, "one low-priority pod made room: {evicted:?}");
    assert!((0..4).all(|i| node_of(&format!("later-{i}")).is_none()), "the waiting gang still holds nothing");

    scheduler.shutdown(Duration::from_secs(5)).await;
    server.shutdown().await;
}
