//! Explanations against small known clusters, checked against the real scheduler: the aggregate
//! message must be the one the scheduler writes, and a "fits if" must hold once applied.

use std::sync::Arc;
use std::time::Duration;

use ksched_framework::listers::MemoryLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{PodInfo, Snapshot};
use serde_json::{json, Value};

use super::render::{self, NodeFilter};
use super::*;
use crate::cache::Cache;
use crate::config::default_config;
use crate::inprocess::InProcessCluster;
use crate::metrics::NoopMetrics;

fn node(name: &str, zone: &str, cpu: &str, taint: Option<(&str, &str)>) -> Node {
    let mut v = json!({"metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}});
    if let Some((k, val)) = taint {
        v["spec"] = json!({"taints": [{"key": k, "value": val, "effect": "NoSchedule"}]});
    }
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str, cpu: &str, node: Option<&str>, prio: i32, extra: Value) -> Pod {
    let mut v = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "labels": {"app": "web"}},
        "spec": {"schedulerName": "default-scheduler", "priority": prio,
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}});
    if let Some(n) = node {
        v["spec"]["nodeName"] = json!(n);
        v["status"] = json!({"phase": "Running", "startTime": "2026-01-01T00:00:00Z"});
    }
    if let Value::Object(m) = extra {
        for (k, x) in m {
            v["spec"][k] = x;
        }
    }
    serde_json::from_value(v).unwrap()
}

fn snapshot(nodes: &[Node], pods: &[Pod]) -> Snapshot {
    let cache = Cache::new();
    for n in nodes {
        cache.add_node(Arc::new(n.clone()));
    }
    for p in pods.iter().filter(|p| p.spec.as_ref().unwrap().node_name.is_some()) {
        cache.add_pod(Arc::new(p.clone())).unwrap();
    }
    let mut snap = Snapshot::default();
    cache.update_snapshot(&mut snap).unwrap();
    snap
}

fn explain_pod(nodes: &[Node], pods: &[Pod], target: &Pod) -> Explanation {
    let cfg = default_config();
    let registry = ksched_plugins::in_tree_registry();
    let explainer = Explainer::new(&cfg, &registry, Arc::new(MemoryLister::default())).unwrap();
    let snap = snapshot(nodes, pods);
    let pi = PodInfo::new(Arc::new(target.clone()));
    explainer.explain(&snap, &pi, &Default::default()).unwrap()
}

/// Runs the real scheduler on the cluster plus `target`, and returns the target's node or its
/// PodScheduled=False message.
async fn schedule(nodes: &[Node], pods: &[Pod], target: &Pod) -> Result<String, String> {
    let cfg = default_config();
    let mut c = InProcessCluster::new(&cfg, &ksched_plugins::in_tree_registry(), Arc::new(NoopMetrics)).unwrap();
    for n in nodes {
        c.apply_node(n.clone());
    }
    for p in pods {
        c.apply_pod(p.clone());
    }
    c.start();
    c.apply_pod(target.clone());
    let name = target.metadata.name.as_deref().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let outcome = loop {
        if let Some(p) = c.pod("default", name) {
            if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                break Ok(n);
            }
            let msg = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled" && c.status == "False"))
                .and_then(|c| c.message.clone());
            if let Some(m) = msg {
                break Err(m);
            }
        }
        assert!(std::time::Instant::now() < deadline, "pod {name} neither bound nor failed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    c.stop().await;
    outcome
}

fn full_cluster() -> (Vec<Node>, Vec<Pod>) {
    let nodes = vec![
        node("a1", "a", "2", None),
        node("a2", "a", "2", None),
        node("b1", "b", "4", Some(("dedicated", "gpu"))),
        node("c1", "c", "1", None),
    ];
    let pods = vec![
        pod("used-a1", "1500m", Some("a1"), 0, json!({})),
        pod("used-a2", "1800m", Some("a2"), 0, json!({})),
        pod("used-c1", "800m", Some("c1"), 0, json!({})),
    ];
    (nodes, pods)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_pod_message_matches_the_scheduler_and_fixes_are_confirmed() {
    let (nodes, pods) = full_cluster();
    let web = pod("web", "1", None, 0, json!({}));
    let ex = explain_pod(&nodes, &pods, &web);
    assert_eq!(ex.verdict, Verdict::Unschedulable);

    let live = schedule(&nodes, &pods, &web).await.expect_err("no node fits");
    assert_eq!(ex.message.as_deref(), Some(live.as_str()), "aggregate line differs from the scheduler's");
    assert!(live.starts_with("0/4 nodes are available: 1 node(s) had untolerated taint"), "{live}");

    let groups: Vec<(&str, &str, usize)> =
        ex.rejections.iter().map(|g| (g.plugin.as_str(), g.reason.as_str(), g.count)).collect();
    assert_eq!(
        groups,
        [("NodeResourcesFit", "Insufficient cpu", 3), ("TaintToleration", "node(s) had untolerated taint(s)", 1)]
    );
    let fixes: Vec<String> = ex.fits_if.iter().map(Fix::sentence).collect();
    assert_eq!(
        fixes,
        [
            "fits on a1 if 500m cpu is freed",
            "fits on a2 if 800m cpu is freed",
            "fits on c1 if 800m cpu is freed",
            "fits on b1 if it tolerates dedicated=gpu:NoSchedule",
        ]
    );
    let p = ex.preemption.as_ref().expect("DefaultPreemption is enabled");
    assert!(p.chosen.is_none() && p.candidates.is_empty());

    // Apply the toleration fix and let the real scheduler place the pod.
    let tolerant = pod(
        "web",
        "1",
        None,
        0,
        json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]}),
    );
    assert_eq!(schedule(&nodes, &pods, &tolerant).await, Ok("b1".to_string()));
    // And the cheapest resource fix: free 500m on a1 (shrink the pod that uses it).
    let mut freed = pods.clone();
    freed[0] = pod("used-a1", "1", Some("a1"), 0, json!({}));
    assert_eq!(schedule(&nodes, &freed, &web).await, Ok("a1".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_skew_fix_is_the_smallest_that_fits() {
    let nodes = vec![node("a1", "a", "8", None), node("b1", "b", "1", None)];
    let pods = vec![
        pod("w1", "100m", Some("a1"), 0, json!({})),
        pod("w2", "100m", Some("a1"), 0, json!({})),
        pod("big", "1", Some("b1"), 0, json!({})),
    ];
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]});
    let web = pod("web", "100m", None, 0, spread);
    let ex = explain_pod(&nodes, &pods, &web);
    let live = schedule(&nodes, &pods, &web).await.expect_err("spread and cpu block it");
    assert_eq!(ex.message.as_deref(), Some(live.as_str()));
    let fixes: Vec<String> = ex.fits_if.iter().map(Fix::sentence).collect();
    assert!(fixes.contains(&"fits on a1 if maxSkew were 2".to_string()), "{fixes:?}");

    let relaxed = json!({"topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]});
    assert_eq!(schedule(&nodes, &pods, &pod("web", "100m", None, 0, relaxed)).await, Ok("a1".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scores_explain_the_winner_and_ties() {
    let nodes = vec![node("n1", "a", "4", None), node("n2", "a", "4", None), node("n3", "a", "4", None)];
    let pods = vec![pod("busy", "2", Some("n3"), 0, json!({}))];
    let web = pod("web", "500m", None, 0, json!({}));
    let ex = explain_pod(&nodes, &pods, &web);
    assert_eq!(ex.verdict, Verdict::Schedulable);
    let live = schedule(&nodes, &pods, &web).await.expect("fits");
    let w = ex.winner.as_ref().unwrap();
    assert_eq!(ex.selected_node.as_deref(), Some(live.as_str()));
    assert_eq!(w.tied_with, ["n2"], "n1 and n2 are identical");
    assert!(w.why.contains("tied with 1 other node"), "{}", w.why);
    let scores = ex.scores.as_ref().unwrap();
    assert_eq!(scores.nodes.last().unwrap().node, "n3", "the busy node scores lowest");
    let fit = scores.plugins.iter().position(|p| p.name == "NodeResourcesFit").unwrap();
    for n in &scores.nodes {
        assert_eq!(n.weighted[fit], n.normalized[fit] * scores.plugins[fit].weight);
        assert_eq!(n.total, n.weighted.iter().sum::<i64>());
    }
    let text = render::table(&ex, NodeFilter::All);
    assert!(text.contains("Winner: n1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_names_the_victims_default_preemption_picks() {
    let nodes = vec![node("a1", "a", "2", None), node("a2", "a", "2", None)];
    let pods = vec![
        pod("low-a1", "1500m", Some("a1"), 10, json!({})),
        pod("low-a2-1", "1", Some("a2"), 10, json!({})),
        pod("low-a2-2", "800m", Some("a2"), 5, json!({})),
    ];
    let urgent = pod("urgent", "1", None, 1000, json!({}));
    let ex = explain_pod(&nodes, &pods, &urgent);
    assert_eq!(ex.verdict, Verdict::Unschedulable);
    let p = ex.preemption.as_ref().unwrap();
    let chosen = p.chosen.as_ref().expect("a victim set exists");
    // a2 needs only the priority-5 pod evicted; a1 needs its priority-10 pod.
    assert_eq!(chosen.node, "a2");
    assert_eq!(chosen.victims, ["default/low-a2-2 (priority 5)"]);
    assert_eq!(p.candidates.len(), 2);
    // The aggregate line still matches the scheduler's first failed cycle.
    let live = schedule(&nodes, &pods, &urgent).await;
    if let Err(m) = live {
        assert_eq!(ex.message.as_deref(), Some(m.as_str()));
    }
}

#[test]
fn many_nodes_are_grouped_and_unconfirmed_fixes_are_not_reported() {
    let nodes: Vec<Node> = (0..50).map(|i| node(&format!("n{i:02}"), "a", "1", None)).collect();
    let web = pod("web", "2", None, 0, json!({"nodeSelector": {"disk": "ssd"}}));
    let ex = explain_pod(&nodes, &[], &web);
    assert_eq!(ex.rejections.len(), 1);
    assert_eq!(ex.rejections[0].count, 50);
    let text = render::table(&ex, NodeFilter::None);
    assert!(text.contains("(+45 more)"), "{text}");
    assert!(ex.fits_if.is_empty(), "dropping the selector still leaves too little cpu: {:?}", ex.fits_if);
}
