//! The scheduler's own node type: the fields plugins, the cache and the cluster-event checks
//! read, under the API's field names, and nothing else (the counterpart of [`crate::pod::Pod`]).
//!
//! A kubelet's node object is mostly fields no scheduler reads: addresses, capacity, node info,
//! daemon endpoints, heartbeat times and messages of its conditions, volumes in use. As
//! k8s-openapi's `Node` it cost 1.5 KB inline plus its labels as a `BTreeMap` (2.3 KB for a
//! cloud node's dozen labels); this type is a few hundred bytes and its labels are packed once,
//! shared with the node's [`crate::node_info::NodeInfo`].
//!
//! Decoding skips every field the type does not have (`metadata.managedFields` included). Where
//! the whole object is needed (extenders are sent it), the scheduler keeps it beside the kept
//! fields in [`Node::object`].

use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize, Serializer};

use crate::meta::PackedMeta;
use crate::pod::ResourceList;

/// A node as the scheduler keeps it (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Node {
    /// Standard object metadata (`managedFields` is never decoded), labels packed.
    pub metadata: PackedMeta,
    /// The kept part of the spec.
    pub spec: Option<NodeSpec>,
    /// The kept part of the status.
    pub status: Option<NodeStatus>,
    /// The whole object as the API server sent it (without managedFields), kept only when
    /// something may read any field: extenders.
    #[serde(skip)]
    pub object: Option<Arc<api::Node>>,
}

/// The spec fields scheduling reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct NodeSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<api::Taint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<bool>,
}

/// The status fields scheduling reads. `images` is taken by the cache when the node arrives
/// (it keeps image names once per cluster) and is empty afterwards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct NodeStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<ResourceList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<NodeCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_features: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<api::ContainerImage>>,
}

/// A node condition's type and status: cluster events compare conditions by these alone, and
/// heartbeat times and messages change every few seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeCondition {
    /// `type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `status`.
    pub status: String,
}

impl Serialize for Node {
    /// The whole object when it is kept, else the kept fields, as the API's JSON.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.object {
            Some(object) => object.serialize(s),
            None => crate::meta::serialize_kept(s, "Node", &self.metadata, &self.spec, &self.status),
        }
    }
}

impl k8s_openapi::Resource for Node {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Node";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "nodes";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for Node {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        self.metadata.object_meta()
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.metadata.object_meta_mut()
    }
}

impl From<api::NodeSpec> for NodeSpec {
    fn from(s: api::NodeSpec) -> Self {
        NodeSpec { taints: s.taints, unschedulable: s.unschedulable }
    }
}

impl From<api::NodeStatus> for NodeStatus {
    fn from(s: api::NodeStatus) -> Self {
        let api::NodeStatus { allocatable, conditions, declared_features, images, .. } = s;
        NodeStatus {
            allocatable: allocatable.map(Into::into),
            conditions: conditions
                .map(|cs| cs.into_iter().map(|c| NodeCondition { type_: c.type_, status: c.status }).collect()),
            declared_features,
            images,
        }
    }
}

impl From<api::Node> for Node {
    /// Every field this type has; the rest of the object is dropped.
    fn from(n: api::Node) -> Self {
        let api::Node { metadata, spec, status } = n;
        Node { metadata: metadata.into(), spec: spec.map(Into::into), status: status.map(Into::into), object: None }
    }
}

impl From<&api::Node> for Node {
    fn from(n: &api::Node) -> Self {
        Node::from(n.clone())
    }
}

impl Node {
    /// The node's labels. Shadows `ResourceExt::labels`, which reads the `ObjectMeta` and would
    /// find none (see [`PackedMeta`]).
    pub fn labels(&self) -> &crate::labels::PackedLabels {
        &self.metadata.labels
    }

    /// `metadata.name` ("" when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// This node with the whole object kept beside it (see [`Node::object`]).
    pub fn with_object(n: api::Node) -> Self {
        let mut whole = n;
        whole.metadata.managed_fields = None;
        let mut node = Node::from(whole.clone());
        node.object = Some(Arc::new(whole));
        node
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decoding_keeps_what_scheduling_reads_and_round_trips_it() {
        let v = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u", "resourceVersion": "7", "labels": {"zone": "a", "disk": "ssd"},
                "annotations": {"x": "y"}, "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": true, "podCIDR": "10.0.0.0/24"},
            "status": {"allocatable": {"cpu": "4", "pods": "110"}, "capacity": {"cpu": "8"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "message": "kubelet is posting ready status"}],
                "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320368}],
                "nodeInfo": {"kubeletVersion": "v1.36.0"}, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
        let node: Node = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(node.name(), "n1");
        assert_eq!(node.metadata.labels.get("disk"), Some("ssd"));
        assert_eq!(k8s_openapi::Metadata::metadata(&node).labels, None, "the ObjectMeta never holds labels");
        assert_eq!(node.metadata.managed_fields, None);
        let status = node.status.as_ref().unwrap();
        assert_eq!(status.allocatable.as_ref().unwrap().get("cpu").map(|q| q.0.as_str()), Some("4"));
        assert_eq!(
            status.conditions.as_deref(),
            Some(&[NodeCondition { type_: "Ready".into(), status: "True".into() }][..])
        );
        assert_eq!(status.images.as_ref().unwrap().len(), 1);
        assert_eq!(node.spec.as_ref().unwrap().unschedulable, Some(true));

        let back = serde_json::to_value(&node).unwrap();
        assert_eq!(back["metadata"]["labels"], v["metadata"]["labels"]);
        assert_eq!(back["status"]["conditions"], json!([{"type": "Ready", "status": "True"}]));
        assert!(back["status"].get("capacity").is_none() && back["spec"].get("podCIDR").is_none());

        // The API type's conversion keeps the same fields.
        let api: api::Node = serde_json::from_value(v).unwrap();
        assert_eq!(Node::from(api.clone()), node);
        let whole = Node::with_object(api);
        assert_eq!(serde_json::to_value(&whole).unwrap()["status"]["capacity"]["cpu"], "8");
    }

    #[test]
    fn inline_size_stays_small() {
        // k8s-openapi's `Node` is about 1.5 KB inline; this one is mostly the `ObjectMeta`.
        assert!(std::mem::size_of::<Node>() <= 536, "{}", std::mem::size_of::<Node>());
    }
}
