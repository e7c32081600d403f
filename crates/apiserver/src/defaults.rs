//! Defaulting: what decoding an object fills in on kube-apiserver (the `SetDefaults_*`
//! functions of each API group), for the kinds we serve. Admission comes after it
//! (`crate::admission`); `crate::strategy` runs the two in order.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, PodSecurityContext};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::resources::{def, ids, ResourceId};
use crate::validation::{self, str_at};

/// Defaults an object of any kind but Pod (see [`default_pod`]) being created.
pub fn default_object(rid: ResourceId, obj: Value) -> Result<Value, ApiError> {
    let d = def(rid);
    Ok(if rid == ids::nodes() {
        default_node(obj)?
    } else if rid == ids::namespaces() {
        default_namespace(obj)
    } else if rid == ids::priority_classes() {
        default_priority_class(obj)
    } else if d.kind == "StorageClass" {
        default_storage_class(obj)
    } else if d.kind == "PersistentVolumeClaim" {
        default_pvc(obj)
    } else if d.kind == "PersistentVolume" {
        default_pv(obj)
    } else if d.kind == "LimitRange" {
        default_limit_range(obj)
    } else if d.kind == "PodGroup" {
        default_pod_group(obj)
    } else if d.group == "resource.k8s.io" {
        validation::resource::default(d.kind, obj)
    } else {
        obj
    })
}

/// Upstream `core/v1` `SetDefaults_Pod`, `SetDefaults_PodSpec` and
/// `SetDefaults_Container`: what decoding a pod fills in.
pub fn default_pod(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.scheduler_name.get_or_insert_with(|| "default-scheduler".into());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.enable_service_links.get_or_insert(true);
    spec.security_context.get_or_insert_with(PodSecurityContext::default);
    let host_network = spec.host_network == Some(true);
    let containers = spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut());
    for c in containers {
        c.termination_message_path.get_or_insert_with(|| "/dev/termination-log".into());
        c.termination_message_policy.get_or_insert_with(|| "File".into());
        if c.image_pull_policy.is_none() {
            let image = c.image.as_deref().unwrap_or_default();
            let tag = image.rsplit('/').next().and_then(|last| last.split_once(':')).map(|(_, t)| t);
            let always = !image.contains('@') && matches!(tag, None | Some("latest"));
            c.image_pull_policy = Some(if always { "Always" } else { "IfNotPresent" }.into());
        }
        for p in c.ports.iter_mut().flatten() {
            p.protocol.get_or_insert_with(|| "TCP".into());
            // A host-network pod listens on the node: its ports are host ports
            // (which the NodePorts plugin then accounts).
            if host_network && p.host_port.unwrap_or(0) == 0 {
                p.host_port = Some(p.container_port);
            }
        }
        // Requests default to limits, which is what the scheduler then accounts.
        if let Some(res) = c.resources.as_mut() {
            if let Some(limits) = res.limits.clone() {
                let requests = res.requests.get_or_insert_with(Default::default);
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// `SetDefaults_LimitRangeItem` on a LimitRange: for a Container item, the
/// default limit falls back to max, the default request to the default limit,
/// then to min.
pub fn default_limit_range(mut obj: Value) -> Value {
    let Some(items) = obj.pointer_mut("/spec/limits").and_then(Value::as_array_mut) else { return obj };
    for item in items.iter_mut().filter(|i| i.get("type").and_then(Value::as_str) == Some("Container")) {
        let (max, min) = (limit_range_list(item, "max"), limit_range_list(item, "min"));
        let mut default = limit_range_list(item, "default");
        let mut request = limit_range_list(item, "defaultRequest");
        for (k, v) in max {
            default.entry(k).or_insert(v);
        }
        for (k, v) in default.iter().chain(&min) {
            request.entry(k.clone()).or_insert_with(|| v.clone());
        }
        item["default"] = json!(default);
        item["defaultRequest"] = json!(request);
    }
    obj
}

/// A resource list of a LimitRange item (`max`, `default`, ...); empty when absent or malformed.
pub fn limit_range_list(item: &Value, field: &str) -> BTreeMap<String, Quantity> {
    item.get(field).cloned().and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default()
}

/// Decodes `obj` as the typed `kind`, refusing it as the real server's decoder does.
pub fn decode<T: serde::de::DeserializeOwned>(obj: Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(obj)
        .map_err(|e| ApiError::bad_request(format!("{kind} in version \"v1\" cannot be handled as a {kind}: {e}")))
}

/// Encodes a typed object back to JSON.
pub fn encode<T: serde::Serialize>(obj: &T) -> Result<Value, ApiError> {
    serde_json::to_value(obj).map_err(|e| ApiError::internal(format!("encoding failed: {e}")))
}

fn default_priority_class(mut obj: Value) -> Value {
    if obj.get("preemptionPolicy").is_none_or(Value::is_null) {
        obj["preemptionPolicy"] = json!("PreemptLowerPriority");
    }
    obj
}

/// Status is the scheduler's to write; `disruptionMode` defaults to `Pod`.
fn default_pod_group(mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    if obj.get("spec").is_some_and(Value::is_object) && obj.pointer("/spec/disruptionMode").is_none_or(Value::is_null) {
        obj["spec"]["disruptionMode"] = json!("Pod");
    }
    obj
}

/// Upstream `SetDefaults_PersistentVolume`: pending, reclaim policy Retain,
/// volume mode Filesystem (which volume binding matches claims against).
fn default_pv(mut obj: Value) -> Value {
    if obj.get("spec").is_some_and(Value::is_object) {
        for (f, v) in [("persistentVolumeReclaimPolicy", "Retain"), ("volumeMode", "Filesystem")] {
            if obj["spec"].get(f).is_none_or(Value::is_null) {
                obj["spec"][f] = json!(v);
            }
        }
    }
    default_pending(obj)
}

/// Upstream PVC defaulting: volume mode Filesystem, pending.
fn default_pvc(mut obj: Value) -> Value {
    if obj.get("spec").is_some_and(Value::is_object) && obj.pointer("/spec/volumeMode").is_none_or(Value::is_null) {
        obj["spec"]["volumeMode"] = json!("Filesystem");
    }
    default_pending(obj)
}

fn default_pending(mut obj: Value) -> Value {
    if obj.pointer("/status/phase").is_none_or(Value::is_null) {
        if !obj.get("status").is_some_and(Value::is_object) {
            obj["status"] = json!({});
        }
        obj["status"]["phase"] = json!("Pending");
    }
    obj
}

fn default_storage_class(mut obj: Value) -> Value {
    if obj.get("reclaimPolicy").is_none_or(Value::is_null) {
        obj["reclaimPolicy"] = json!("Delete");
    }
    if obj.get("volumeBindingMode").is_none_or(Value::is_null) {
        obj["volumeBindingMode"] = json!("Immediate");
    }
    obj
}

fn default_node(obj: Value) -> Result<Value, ApiError> {
    let mut node: Node = decode(obj, "Node")?;
    if let Some(status) = node.status.as_mut() {
        if status.allocatable.is_none() {
            status.allocatable = status.capacity.clone();
        }
    }
    encode(&node)
}

fn default_namespace(mut obj: Value) -> Value {
    let name = str_at(&obj, "/metadata/name").unwrap_or_default().to_string();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    if obj.pointer("/spec/finalizers").is_none() {
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
    }
    obj["status"] = json!({"phase": "Active"});
    obj
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::admission::testing::{ctx, pod_with};
    use crate::strategy::admit_create;

    #[test]
    fn host_network_ports_are_host_ports() {
        let mut pod = pod_with(json!({"hostNetwork": true}));
        pod["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}]);
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let ports = &out["spec"]["containers"][0]["ports"];
        assert_eq!((ports[0]["hostPort"].as_i64(), ports[1]["hostPort"].as_i64()), (Some(8080), Some(9091)));
        let mut pod = pod_with(json!({}));
        pod["spec"]["containers"][0]["ports"] = json!([{"containerPort": 8080}]);
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert!(out["spec"]["containers"][0]["ports"][0].get("hostPort").is_none());
    }

    #[test]
    fn claims_and_volumes_get_their_defaults() {
        let pvc = |spec: Value| {
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c", "namespace": "default"}, "spec": spec})
        };
        let base = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        let out =
            admit_create(crate::resources::by_kind("v1", "PersistentVolumeClaim").unwrap(), pvc(base), &ctx()).unwrap();
        assert_eq!(
            (out["spec"]["volumeMode"].as_str(), out["status"]["phase"].as_str()),
            (Some("Filesystem"), Some("Pending"))
        );
        let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}});
        let out = admit_create(crate::resources::by_kind("v1", "PersistentVolume").unwrap(), pv, &ctx()).unwrap();
        assert_eq!(
            (out["spec"]["volumeMode"].as_str(), out["spec"]["persistentVolumeReclaimPolicy"].as_str()),
            (Some("Filesystem"), Some("Retain"))
        );
        assert_eq!(out["status"]["phase"], "Pending");
    }

    #[test]
    fn limit_range_items_default_from_max_and_min() {
        let lr = json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}},
            {"type": "Pod", "max": {"cpu": "4"}}]}});
        let out = default_limit_range(lr);
        let c = &out["spec"]["limits"][0];
        assert_eq!(c["default"], json!({"cpu": "2"}));
        assert_eq!(c["defaultRequest"], json!({"cpu": "2", "memory": "1Mi"}));
        assert!(out["spec"]["limits"][1].get("default").is_none(), "only Container items");
    }
}
