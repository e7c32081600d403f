//! `ksched generate`: synthetic clusters shaped like upstream's scheduler_perf defaults
//! (nodes: 4 cpu, 32Gi, 110 pods; pods: one container requesting 100m / 500Mi).

use std::path::Path;

use anyhow::Context as _;
use serde_json::{json, Value};

/// Zones nodes are spread over, round-robin.
const ZONES: [&str; 3] = ["zone1", "zone2", "zone3"];

/// A scheduler_perf default node.
pub fn node(i: usize) -> Value {
    let name = format!("node-{i}");
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": ZONES[i % ZONES.len()],
        }},
        "status": {
            "capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
            "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    })
}

/// A scheduler_perf default pod.
pub fn pod(i: usize, namespace: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": namespace},
        "spec": {"containers": [{
            "name": "pause", "image": "registry.k8s.io/pause:3.10",
            "ports": [{"containerPort": 80}],
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}, "limits": {"cpu": "100m", "memory": "500Mi"}},
        }]}
    })
}

fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// Writes `nodes.json` and `pods.json` (Lists) into `out`.
pub fn write_cluster(out: &Path, nodes: usize, pods: usize) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    let write = |name: &str, v: &Value| -> anyhow::Result<()> {
        let p = out.join(name);
        std::fs::write(&p, serde_json::to_vec(v)?).with_context(|| format!("writing {}", p.display()))
    };
    write("00-namespace.json", &ns)?;
    write("10-nodes.json", &list((0..nodes).map(node).collect()))?;
    write("20-pods.json", &list((0..pods).map(|i| pod(i, "bench")).collect()))?;
    Ok(())
}
