use super::*;
use serde_json::json;

fn node(name: &str, zone: &str, cpu: &str, images: &[&str]) -> Arc<Node> {
    let images: Vec<_> = images.iter().map(|i| json!({"names": [i], "sizeBytes": 100})).collect();
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}, "images": images}
        }))
        .unwrap(),
    )
}

fn pod(name: &str, node: &str, cpu: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap(),
    )
}

fn requested(snap: &Snapshot, node: &str) -> i64 {
    snap.get(node).unwrap().requested.milli_cpu
}

#[test]
fn assume_confirm_forget_state_machine() {
    let c = Cache::new();
    c.add_node(node("n1", "a", "4", &[]));
    c.add_node(node("n2", "a", "4", &[]));
    let p = pod("p", "n1", "1");
    c.assume_pod(Arc::new(PodInfo::new(p.clone()))).unwrap();
    assert!(c.is_assumed_pod(&p));
    assert_eq!(c.assume_pod(Arc::new(PodInfo::new(p.clone()))), Err(CacheError::AlreadyPresent("ns/p".into())));
    assert_eq!(c.size(), CacheSize { assumed_pods: 1, pods: 1, nodes: 2 });

    // the informer confirms the pod, on the node the API server recorded
    c.add_pod(pod("p", "n2", "1")).unwrap();
    assert!(!c.is_assumed_pod(&p));
    let mut snap = Snapshot::default();
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(requested(&snap, "n1"), 0);
    assert_eq!(requested(&snap, "n2"), 1000);
    assert!(c.forget_pod(&p).is_err(), "confirmed pods cannot be forgotten");

    let q = pod("q", "n1", "2");
    c.assume_pod(Arc::new(PodInfo::new(q.clone()))).unwrap();
    c.forget_pod(&q).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(requested(&snap, "n1"), 0);
    assert_eq!(c.size().pods, 1);
}

#[test]
fn snapshot_copies_only_changed_nodes_and_is_isolated() {
    let c = Cache::new();
    for i in 0..5 {
        c.add_node(node(&format!("n{i}"), "a", "4", &[]));
    }
    let mut snap = Snapshot::default();
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.num_nodes(), 5);
    let before: Vec<_> = snap.list().to_vec();

    c.add_pod(pod("p", "n3", "500m")).unwrap();
    // the old snapshot is untouched until updated
    assert_eq!(requested(&snap, "n3"), 0);
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(requested(&snap, "n3"), 500);
    for (i, n) in snap.list().iter().enumerate() {
        let same = Arc::ptr_eq(n, &before[i]);
        assert_eq!(same, n.name() != "n3", "only n3 should have been copied");
    }
}

#[test]
fn pods_before_their_node_and_node_deletion() {
    let c = Cache::new();
    c.add_pod(pod("p", "late", "1")).unwrap();
    let mut snap = Snapshot::default();
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.num_nodes(), 0, "nodes without a Node object are not listed");
    c.add_node(node("late", "a", "4", &[]));
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(requested(&snap, "late"), 1000);

    c.remove_node(&node("late", "a", "4", &[]));
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.num_nodes(), 0);
    c.remove_pod(&pod("p", "late", "1")).unwrap();
    assert_eq!(c.size(), CacheSize::default());
}

#[test]
fn snapshot_list_follows_zone_round_robin() {
    let c = Cache::new();
    for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        c.add_node(node(n, z, "4", &[]));
    }
    let mut snap = Snapshot::default();
    c.update_snapshot(&mut snap).unwrap();
    let names: Vec<_> = snap.list().iter().map(|n| n.name().to_string()).collect();
    assert_eq!(names, ["a1", "b1", "a2"]);
}

#[test]
fn image_spread_is_shared_and_live() {
    let c = Cache::new();
    c.add_node(node("n1", "a", "4", &["nginx:1"]));
    let mut snap = Snapshot::default();
    c.update_snapshot(&mut snap).unwrap();
    let n1 = snap.get("n1").unwrap().clone();
    assert_eq!(n1.image_states.get("nginx:1").unwrap().num_nodes(), 1);
    c.add_node(node("n2", "a", "4", &["nginx:1"]));
    assert_eq!(n1.image_states.get("nginx:1").unwrap().num_nodes(), 2, "count is shared across node infos");
    c.remove_node(&node("n2", "a", "4", &["nginx:1"]));
    assert_eq!(n1.image_states.get("nginx:1").unwrap().num_nodes(), 1);
}

#[test]
fn affinity_lists_track_membership() {
    let c = Cache::new();
    c.add_node(node("n1", "a", "4", &[]));
    c.add_node(node("n2", "a", "4", &[]));
    let mut snap = Snapshot::default();
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.have_pods_with_affinity().count(), 0);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "aff", "namespace": "ns", "uid": "u-aff"},
        "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "i"}],
                 "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    }))
    .unwrap();
    c.add_pod(Arc::new(p.clone())).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    let names: Vec<_> = snap.have_pods_with_required_anti_affinity().map(|n| n.name().to_string()).collect();
    assert_eq!(names, ["n2"]);
    c.remove_pod(&p).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.have_pods_with_required_anti_affinity().count(), 0);
}

#[test]
fn used_pvcs_track_pods_across_snapshot_updates() {
    let c = Cache::new();
    c.add_node(node("n1", "a", "4", &[]));
    c.add_node(node("n2", "a", "4", &[]));
    let with_claim = |name: &str, node: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}],
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}
        }))
        .unwrap()
    };
    let mut snap = Snapshot::default();
    c.update_snapshot(&mut snap).unwrap();
    assert!(!snap.is_pvc_used_by_pods("ns/data"));
    let (p1, p2) = (with_claim("p1", "n1"), with_claim("p2", "n2"));
    c.add_pod(Arc::new(p1.clone())).unwrap();
    c.add_pod(Arc::new(p2.clone())).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert!(snap.is_pvc_used_by_pods("ns/data"));
    // still used on n2 after it left n1
    c.remove_pod(&p1).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert!(snap.is_pvc_used_by_pods("ns/data"));
    c.remove_pod(&p2).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert!(!snap.is_pvc_used_by_pods("ns/data"));
}
