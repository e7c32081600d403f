//! Builders shared by the resource plugin tests.

use std::sync::Arc;

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{NodeInfo, PodInfo};
use serde_json::{json, Value};

/// A pod whose containers request `reqs`: one object is one container, an array one container each.
pub fn pod(reqs: Value) -> PodInfo {
    let list = match reqs {
        Value::Array(v) => v,
        other => vec![other],
    };
    let containers: Vec<Value> = list
        .into_iter()
        .enumerate()
        .map(|(i, r)| json!({"name": format!("c{i}"), "image": "img", "resources": {"requests": r}}))
        .collect();
    pod_from_spec(json!({"containers": containers}))
}

/// A pod from a raw spec.
pub fn pod_from_spec(spec: Value) -> PodInfo {
    PodInfo::new(Arc::new(raw_pod(json!({"name": "p", "namespace": "default", "uid": "p"}), spec)))
}

/// A pod object from raw metadata and spec.
pub fn raw_pod(meta: Value, spec: Value) -> Pod {
    serde_json::from_value(json!({"metadata": meta, "spec": spec})).expect("valid pod")
}

/// A node named "n" with the given allocatable.
pub fn node(allocatable: Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"allocatable": allocatable}}))
        .expect("valid node")
}

/// A NodeInfo with the given allocatable hosting `pods`.
pub fn node_info(allocatable: Value, pods: &[PodInfo]) -> NodeInfo {
    let mut ni = NodeInfo::new(Arc::new(node(allocatable)));
    for (i, p) in pods.iter().enumerate() {
        let mut p = p.clone();
        let mut raw = (*p.pod).clone();
        raw.metadata.uid = Some(format!("existing-{i}"));
        p.pod = Arc::new(raw);
        ni.add_pod(Arc::new(p));
    }
    ni
}
