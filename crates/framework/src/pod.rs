//! The scheduler's own pod type: the fields some plugin, the queue, the cache, the failure
//! handler or `/metrics/resources` reads, under the API's field names, and nothing else.
//!
//! k8s-openapi's `Pod` is 2.4 KB before any string and its `Container` 2.1 KB, because every
//! optional field (probes, lifecycle, security contexts, env…) is stored inline; a cluster's
//! pods held that way cost the scheduler about 10 KB each. This type has the same shape where it
//! has a field at all, so code reads `pod.spec.as_ref()?.affinity` as it would on the API type,
//! and a field it lacks does not compile rather than reading as unset.
//!
//! Resource lists and the node selector are [`SmallMap`]s rather than `BTreeMap`s: they hold one
//! to four entries, and a `BTreeMap` allocates room for eleven whatever it holds. Labels are
//! [`PackedLabels`] in [`PackedMeta`], beside the API's `ObjectMeta` that the client library's
//! `Resource` trait requires (whose own `labels` stays empty). Container and toleration lists
//! are shared by the pods that hold equal ones (the pods of one workload), through a table of
//! the lists alive (`shared.rs`).
//!
//! Decoding skips every field the type does not have (including `metadata.managedFields`), so
//! the watchers decode events straight into it with no whole object in between. Where the whole
//! object is needed (extenders are sent it, out-of-tree plugins may read anything), the
//! scheduler keeps it next to the projection in [`Pod::object`].

use std::sync::Arc;

use std::hash::Hash;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize, Serializer};

pub use crate::labels::PackedLabels;
pub use crate::meta::PackedMeta;
use crate::shared::SharedLists;
pub use crate::small_map::SmallMap;

/// Resource name to amount (`requests`, `limits`, `overhead`, `allocatedResources`).
pub type ResourceList = SmallMap<Quantity>;

/// A pod as the scheduler keeps it (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Pod {
    /// Standard object metadata (`managedFields` is never decoded), labels packed.
    pub metadata: PackedMeta,
    /// The kept part of the spec.
    pub spec: Option<PodSpec>,
    /// The kept part of the status.
    pub status: Option<PodStatus>,
    /// The whole object as the API server sent it (without managedFields), kept only when
    /// something may read any field: extenders, out-of-tree plugins. Kept as its JSON text
    /// (see [`Whole`](crate::whole::Whole)): decoded, a pod as kube-apiserver writes it is
    /// ten times larger.
    #[serde(skip)]
    pub object: Option<Arc<crate::whole::Whole<api::Pod>>>,
}

/// The spec fields scheduling reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct PodSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<api::Affinity>>,
    /// Shared with the pods that hold an equal list; build a new one with [`share_containers`].
    #[serde(deserialize_with = "shared_containers")]
    pub containers: Arc<[Container]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_users: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<SmallMap<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<ResourceList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_claims: Option<Vec<api::PodResourceClaim>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_gates: Option<Vec<api::PodSchedulingGate>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_group: Option<Box<api::PodSchedulingGroup>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "shared_tolerations")]
    pub tolerations: Option<Arc<[api::Toleration]>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<api::TopologySpreadConstraint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<api::Volume>>,
}

/// The container fields scheduling reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Container {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<api::ContainerPort>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy_rules: Option<Vec<api::ContainerRestartRule>>,
}

/// The status fields scheduling reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct PodStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_resources: Option<ResourceList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<api::PodCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_statuses: Option<Vec<ContainerStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended_resource_claim_status: Option<Box<api::PodExtendedResourceClaimStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominated_node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resize: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_claim_statuses: Option<Vec<api::PodResourceClaimStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<ResourceRequirements>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

/// The container status fields scheduling reads (in-place resize).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct ContainerStatus {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_resources: Option<ResourceList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// A container's or the pod's `resources`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct ResourceRequirements {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<api::ResourceClaim>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceList>,
}

/// The toleration lists alive: nearly every pod carries the two that admission adds for
/// not-ready and unreachable nodes, or a workload's own.
static SHARED_TOLERATIONS: SharedLists<api::Toleration> = SharedLists::new(|t, h| {
    t.key.hash(h);
    t.value.hash(h);
    t.effect.hash(h);
});

/// The container lists alive: the pods of one workload have equal containers (of what is kept).
static SHARED_CONTAINERS: SharedLists<Container> = SharedLists::new(|c, h| {
    c.name.hash(h);
    c.image.hash(h);
});

/// `list` shared with the pods that hold an equal list (see [`PodSpec::containers`]); for code
/// that builds or rewrites a pod's containers.
pub fn share_containers(list: Vec<Container>) -> Arc<[Container]> {
    SHARED_CONTAINERS.share(list)
}

fn shared_tolerations<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Arc<[api::Toleration]>>, D::Error> {
    Ok(Option::<Vec<api::Toleration>>::deserialize(d)?.map(|l| SHARED_TOLERATIONS.share(l)))
}

fn shared_containers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Arc<[Container]>, D::Error> {
    // `null` reads as no containers, as the field's default.
    Ok(SHARED_CONTAINERS.share(Option::<Vec<Container>>::deserialize(d)?.unwrap_or_default()))
}

impl Serialize for Pod {
    /// The whole object when it is kept, else the kept fields, as the API's JSON.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.object {
            Some(object) => object.serialize(s),
            None => crate::meta::serialize_kept(s, "Pod", &self.metadata, &self.spec, &self.status),
        }
    }
}

impl k8s_openapi::Resource for Pod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Pod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        self.metadata.object_meta()
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.metadata.object_meta_mut()
    }
}

impl From<api::ResourceRequirements> for ResourceRequirements {
    fn from(r: api::ResourceRequirements) -> Self {
        let api::ResourceRequirements { claims, limits, requests } = r;
        ResourceRequirements { claims, limits: limits.map(Into::into), requests: requests.map(Into::into) }
    }
}

impl From<api::Container> for Container {
    fn from(c: api::Container) -> Self {
        let api::Container { image, name, ports, resources, restart_policy, restart_policy_rules, .. } = c;
        Container { name, image, ports, resources: resources.map(Into::into), restart_policy, restart_policy_rules }
    }
}

impl From<api::ContainerStatus> for ContainerStatus {
    fn from(c: api::ContainerStatus) -> Self {
        let api::ContainerStatus { allocated_resources, name, resources, .. } = c;
        ContainerStatus {
            name,
            allocated_resources: allocated_resources.map(Into::into),
            resources: resources.map(Into::into),
        }
    }
}

impl From<api::PodSpec> for PodSpec {
    fn from(s: api::PodSpec) -> Self {
        let api::PodSpec {
            affinity,
            containers,
            host_network,
            host_users,
            init_containers,
            node_name,
            node_selector,
            overhead,
            preemption_policy,
            priority,
            resource_claims,
            resources,
            scheduler_name,
            scheduling_gates,
            scheduling_group,
            tolerations,
            topology_spread_constraints,
            volumes,
            ..
        } = s;
        PodSpec {
            affinity: affinity.map(Box::new),
            containers: SHARED_CONTAINERS.share(containers.into_iter().map(Container::from).collect()),
            host_network,
            host_users,
            init_containers: init_containers.map(|cs| cs.into_iter().map(Container::from).collect()),
            node_name,
            node_selector: node_selector.map(Into::into),
            overhead: overhead.map(Into::into),
            preemption_policy,
            priority,
            resource_claims,
            resources: resources.map(|r| Box::new(r.into())),
            scheduler_name,
            scheduling_gates,
            scheduling_group: scheduling_group.map(Box::new),
            tolerations: tolerations.map(|l| SHARED_TOLERATIONS.share(l)),
            topology_spread_constraints,
            volumes,
        }
    }
}

impl From<api::PodStatus> for PodStatus {
    fn from(s: api::PodStatus) -> Self {
        let api::PodStatus {
            allocated_resources,
            conditions,
            container_statuses,
            extended_resource_claim_status,
            init_container_statuses,
            nominated_node_name,
            phase,
            resize,
            resource_claim_statuses,
            resources,
            start_time,
            ..
        } = s;
        let statuses = |s: Option<Vec<api::ContainerStatus>>| s.map(|s| s.into_iter().map(Into::into).collect());
        PodStatus {
            allocated_resources: allocated_resources.map(Into::into),
            conditions,
            container_statuses: statuses(container_statuses),
            extended_resource_claim_status: extended_resource_claim_status.map(Box::new),
            init_container_statuses: statuses(init_container_statuses),
            nominated_node_name,
            phase,
            resize,
            resource_claim_statuses,
            resources: resources.map(|r| Box::new(r.into())),
            start_time,
        }
    }
}

impl From<api::Pod> for Pod {
    /// Every field this type has; the rest of the object is dropped.
    fn from(p: api::Pod) -> Self {
        let api::Pod { metadata, spec, status } = p;
        Pod { metadata: metadata.into(), spec: spec.map(Into::into), status: status.map(Into::into), object: None }
    }
}

impl From<&api::Pod> for Pod {
    fn from(p: &api::Pod) -> Self {
        Pod::from(p.clone())
    }
}

impl Pod {
    /// The pod's labels. Shadows `ResourceExt::labels`, which reads the `ObjectMeta` and would
    /// find none (see [`PackedMeta`]).
    pub fn labels(&self) -> &PackedLabels {
        &self.metadata.labels
    }

    /// This pod with the whole object kept beside it (see [`Pod::object`]).
    pub fn with_object(p: api::Pod) -> Self {
        let mut whole = p;
        whole.metadata.managed_fields = None;
        let object = crate::whole::Whole::new(&whole);
        let mut pod = Pod::from(whole);
        pod.object = Some(Arc::new(object));
        pod
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kube_labels(p: &Pod) -> Option<&std::collections::BTreeMap<String, String>> {
        k8s_openapi::Metadata::metadata(p).labels.as_ref()
    }

    #[test]
    fn decoding_skips_what_is_not_kept_and_round_trips_what_is() {
        let v = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"},
                "managedFields": [{"manager": "m", "operation": "Update"}]},
            "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "A"}],
                "resources": {"requests": {"cpu": "1"}}}], "nodeName": "n", "dnsPolicy": "None"},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}});
        let pod: Pod = serde_json::from_value(v).unwrap();
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.labels.get("a"), Some("b"));
        assert_eq!(kube_labels(&pod), None, "the ObjectMeta never holds labels");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n"));
        assert_eq!(spec.containers[0].image.as_deref(), Some("i"));
        let back = serde_json::to_value(&pod).unwrap();
        assert_eq!(back["kind"], "Pod");
        assert_eq!(back["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1");
        assert!(back["spec"].get("dnsPolicy").is_none() && back["status"].get("podIP").is_none());
        // The API type reads the same kept fields back.
        let api: api::Pod = serde_json::from_value(back).unwrap();
        assert_eq!(Pod::from(api), pod);
    }

    #[test]
    fn the_whole_object_is_what_is_serialized_when_kept() {
        let api: api::Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}}))
        .unwrap();
        let pod = Pod::with_object(api.clone());
        assert_eq!(serde_json::to_value(&pod).unwrap()["spec"]["containers"][0]["env"][0]["value"], "1");
        assert_eq!(pod.object.as_deref().map(|w| w.decode()), Some(api));
        assert_eq!(pod.spec.as_ref().unwrap().containers[0].name, "c");
    }

    #[test]
    fn equal_toleration_lists_are_shared() {
        let pod = |tolerations: serde_json::Value| -> Pod {
            serde_json::from_value(
                json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": tolerations}}),
            )
            .unwrap()
        };
        let tolerations = |p: &Pod| p.spec.as_ref().unwrap().tolerations.clone().unwrap();
        let default = json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300}]);
        let other = json!([{"key": "gpu", "operator": "Exists"}]);
        let (a, b, c) = (pod(default.clone()), pod(other), pod(default.clone()));
        assert!(Arc::ptr_eq(&tolerations(&a), &tolerations(&c)), "equal lists share one allocation");
        assert!(!Arc::ptr_eq(&tolerations(&a), &tolerations(&b)));
        assert_eq!(serde_json::to_value(&c).unwrap()["spec"]["tolerations"], default);
        assert_eq!(pod(json!(null)).spec.unwrap().tolerations, None);
    }

    #[test]
    fn equal_container_lists_are_shared() {
        let pod = |containers: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})).unwrap()
        };
        let containers = |p: &Pod| p.spec.as_ref().unwrap().containers.clone();
        let web = json!([{"name": "web", "image": "nginx:1.27", "resources": {"requests": {"cpu": "100m"}}}]);
        // Same name and image (the fingerprint), different requests.
        let bigger = json!([{"name": "web", "image": "nginx:1.27", "resources": {"requests": {"cpu": "2"}}}]);
        let (a, b, c) = (pod(web.clone()), pod(bigger.clone()), pod(web.clone()));
        assert!(Arc::ptr_eq(&containers(&a), &containers(&c)), "equal lists share one allocation");
        assert!(!Arc::ptr_eq(&containers(&a), &containers(&b)));
        assert_eq!(serde_json::to_value(&c).unwrap()["spec"]["containers"], web);
        assert_eq!(serde_json::to_value(&b).unwrap()["spec"]["containers"], bigger);
        // From the API's type too.
        let api: api::Pod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": web}})).unwrap();
        assert!(Arc::ptr_eq(&containers(&Pod::from(api)), &containers(&a)));
        assert!(pod(json!(null)).spec.unwrap().containers.is_empty());
    }

    #[test]
    fn equal_owner_references_are_shared() {
        let owners = |uid: &str| {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": uid,
            "controller": true}])
        };
        let pod = |owners: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "ownerReferences": owners}})).unwrap()
        };
        let refs = |p: &Pod| p.metadata.owner_references.clone().unwrap();
        let (a, b, c) = (pod(owners("u1")), pod(owners("u2")), pod(owners("u1")));
        assert!(Arc::ptr_eq(&refs(&a), &refs(&c)), "equal lists share one allocation");
        assert!(!Arc::ptr_eq(&refs(&a), &refs(&b)));
        assert_eq!(serde_json::to_value(&b).unwrap()["metadata"]["ownerReferences"], owners("u2"));
        // Kept beside the `ObjectMeta`, like the labels, and put back when it is taken apart.
        assert_eq!(a.metadata.object_meta().owner_references, None);
        let (meta, _) = a.metadata.clone().into_parts();
        assert_eq!(meta.owner_references.as_deref(), Some(&refs(&a)[..]));
        let api: api::Pod =
            serde_json::from_value(json!({"metadata": {"name": "p", "ownerReferences": owners("u1")}})).unwrap();
        assert!(Arc::ptr_eq(&refs(&Pod::from(api)), &refs(&a)));
        assert_eq!(pod(json!(null)).metadata.owner_references, None);
    }

    #[test]
    fn inline_sizes_stay_small() {
        // What made the API types expensive: every kept pod paid these inline (the API's `Pod`
        // is 2416 bytes and its `Container` 2144).
        assert!(std::mem::size_of::<Container>() <= 256, "{}", std::mem::size_of::<Container>());
        // An `Arc<Pod>` (two counters and the pod) fits the allocator's 1 KiB size class, because
        // the parts most pods lack (affinity, pod-level resources, scheduling group, extended
        // resource claim status) are boxed; at 1304 bytes it took a 1.5 KiB slot.
        let arc = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Pod>();
        assert!(arc <= 1024, "{arc}");
    }
}
