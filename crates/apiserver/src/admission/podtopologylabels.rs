//! Upstream's PodTopologyLabels admission plugin (on by default): a pod bound to a node gets the
//! node's zone and region labels. The Binding subresource takes the same labels through
//! [`topology_labels`].

use serde_json::{json, Value};

use super::{AdmissionContext, Attributes, Object, Plugin};
use crate::error::ApiError;
use crate::validation::str_at;

/// The PodTopologyLabels plugin.
pub struct PodTopologyLabels;

impl Plugin for PodTopologyLabels {
    fn admit(&self, a: &mut Attributes<'_>, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        match &mut a.object {
            Object::Pod(pod) => {
                let spec = pod.spec.as_ref();
                let node_name = spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty());
                let node = node_name.and_then(|n| ctx.node(n));
                for (k, v) in node.as_deref().map(topology_labels).unwrap_or_default() {
                    if let Value::String(v) = v {
                        pod.metadata.labels.get_or_insert_with(Default::default).insert(k, v);
                    }
                }
            }
            Object::PodUpdate(u) => {
                if u.spec().is_some() {
                    copy_topology_labels(u.pod, ctx);
                }
            }
            Object::Json(_) => {}
        }
        Ok(())
    }
}

/// The labels of `node` the plugin copies onto the pods bound to it.
pub fn topology_labels(node: &Value) -> serde_json::Map<String, Value> {
    let labels = node.pointer("/metadata/labels").and_then(Value::as_object);
    labels
        .into_iter()
        .flatten()
        .filter(|(k, _)| matches!(k.as_str(), "topology.kubernetes.io/zone" | "topology.kubernetes.io/region"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// For a pod written with `spec.nodeName` already set.
fn copy_topology_labels(pod: &mut Value, ctx: &dyn AdmissionContext) {
    let Some(node) = str_at(pod, "/spec/nodeName").filter(|n| !n.is_empty()).and_then(|n| ctx.node(n)) else {
        return;
    };
    let labels = topology_labels(&node);
    if labels.is_empty() || !pod.get("metadata").is_some_and(Value::is_object) {
        return;
    }
    if !pod["metadata"].get("labels").is_some_and(Value::is_object) {
        pod["metadata"]["labels"] = json!({});
    }
    for (k, v) in labels {
        pod["metadata"]["labels"][k] = v;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::admission::testing::{ctx, pod_with};
    use crate::resources::ids;
    use crate::strategy::{admit_create, admit_update};

    #[test]
    fn pods_written_with_a_node_get_its_topology_labels() {
        let out = admit_create(ids::pods(), pod_with(json!({"nodeName": "zoned"})), &ctx()).unwrap();
        let labels = &out["metadata"]["labels"];
        assert_eq!(
            (labels["topology.kubernetes.io/zone"].as_str(), labels["topology.kubernetes.io/region"].as_str()),
            (Some("z1"), Some("r1"))
        );
        assert!(labels.get("kubernetes.io/hostname").is_none() && labels["app"] == "web");
        let out = admit_create(ids::pods(), pod_with(json!({"nodeName": "elsewhere"})), &ctx()).unwrap();
        assert!(out["metadata"]["labels"].get("topology.kubernetes.io/zone").is_none(), "unknown node: nothing");
    }

    #[test]
    fn pods_updated_onto_a_node_get_its_topology_labels() {
        let created = admit_create(ids::pods(), pod_with(json!({})), &ctx()).unwrap();
        let mut new = created.clone();
        new["spec"]["nodeName"] = json!("zoned");
        admit_update(ids::pods(), &created, &mut new, &ctx()).unwrap();
        let labels = &new["metadata"]["labels"];
        assert_eq!((labels["topology.kubernetes.io/zone"].as_str(), labels["app"].as_str()), (Some("z1"), Some("web")));
    }
}
