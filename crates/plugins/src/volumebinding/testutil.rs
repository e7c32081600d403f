//! Builders shared by the volume plugins' tests.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use ksched_framework::listers::MemoryLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{Handle, NodeInfo, PodInfo};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// Decodes JSON into an API type.
pub fn obj<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

/// A claim in `default` with a JSON spec (and optional extra metadata).
pub fn pvc(name: &str, spec: Value) -> PersistentVolumeClaim {
    obj(json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
        "resourceVersion": "1"}, "spec": spec}))
}

/// A claim with extra metadata merged in.
pub fn pvc_meta(name: &str, meta: Value, spec: Value, status: Value) -> PersistentVolumeClaim {
    let mut m = json!({"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": "1"});
    if let (Some(m), Some(extra)) = (m.as_object_mut(), meta.as_object()) {
        m.extend(extra.clone());
    }
    obj(json!({"metadata": m, "spec": spec, "status": status}))
}

/// A PV with labels, spec and phase.
pub fn pv(name: &str, labels: Value, spec: Value, phase: &str) -> PersistentVolume {
    obj(json!({"metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "spec": spec,
        "status": {"phase": phase}}))
}

/// A storage class.
pub fn sc(name: &str, provisioner: &str, mode: Option<&str>, extra: Value) -> StorageClass {
    let mut v = json!({"metadata": {"name": name}, "provisioner": provisioner});
    if let Some(m) = mode {
        v["volumeBindingMode"] = json!(m);
    }
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    obj(v)
}

/// A pod in `default` with the given volumes.
pub fn pod_with_volumes(name: &str, volumes: Value) -> Pod {
    obj(json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": volumes}}))
}

/// A pod using the named claims.
pub fn pod_with_claims(name: &str, claims: &[&str]) -> Pod {
    let vols: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    pod_with_volumes(name, Value::Array(vols))
}

/// A PodInfo.
pub fn pi(p: Pod) -> PodInfo {
    PodInfo::new(Arc::new(p))
}

/// A node with labels.
pub fn node(name: &str, labels: Value) -> Node {
    obj(json!({"metadata": {"name": name, "labels": labels}}))
}

/// A NodeInfo with pods.
pub fn node_info(n: Node, pods: Vec<Pod>) -> NodeInfo {
    let mut ni = NodeInfo::new(Arc::new(n));
    for p in pods {
        ni.add_pod(Arc::new(pi(p)));
    }
    ni
}

/// The objects a test lister holds.
#[derive(Default)]
pub struct Objects {
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    pub classes: Vec<StorageClass>,
    pub csi_nodes: Vec<CSINode>,
    pub csi_drivers: Vec<CSIDriver>,
    pub capacities: Vec<CSIStorageCapacity>,
    pub attachments: Vec<VolumeAttachment>,
}

/// A lister holding the objects.
pub fn lister(o: Objects) -> Arc<MemoryLister> {
    let l = MemoryLister::default();
    *l.pvcs.write() = o.pvcs.into_iter().map(Arc::new).collect();
    *l.pvs.write() = o.pvs.into_iter().map(Arc::new).collect();
    *l.storage_classes.write() = o.classes.into_iter().map(Arc::new).collect();
    *l.csi_nodes.write() = o.csi_nodes.into_iter().map(Arc::new).collect();
    *l.csi_drivers.write() = o.csi_drivers.into_iter().map(Arc::new).collect();
    *l.csi_storage_capacities.write() = o.capacities.into_iter().map(Arc::new).collect();
    *l.volume_attachments.write() = o.attachments.into_iter().map(Arc::new).collect();
    Arc::new(l)
}

/// A test handle over a lister.
pub fn handle(l: Arc<MemoryLister>) -> Handle {
    Handle { lister: l, ..Handle::for_tests() }
}

/// A storage event object.
pub fn other<T: serde::Serialize>(o: &T) -> ksched_framework::EventObject {
    ksched_framework::EventObject::Other(Arc::new(serde_json::to_value(o).unwrap()))
}
