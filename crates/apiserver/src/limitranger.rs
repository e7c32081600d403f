//! Upstream's LimitRanger admission plugin (on by default), its mutating half
//! for pods: containers get the default limits and requests of their
//! namespace's LimitRanges (`type: Container` items) for the resources they
//! leave out, which the scheduler then accounts. Plus the LimitRange item
//! defaulting (`SetDefaults_LimitRangeItem`) those defaults come from.
//! Min/max/ratio enforcement is not done.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{json, Value};

/// The annotation that records what the plugin set.
const ANNOTATION: &str = "kubernetes.io/limit-ranger";

type Resources = BTreeMap<String, Quantity>;

fn list(item: &Value, field: &str) -> Resources {
    item.get(field).cloned().and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default()
}

/// `SetDefaults_LimitRangeItem` on a LimitRange being created: for a
/// Container item, the default limit falls back to max, the default request to
/// the default limit, then to min.
pub fn default_limit_range(mut obj: Value) -> Value {
    let Some(items) = obj.pointer_mut("/spec/limits").and_then(Value::as_array_mut) else { return obj };
    for item in items.iter_mut().filter(|i| i.get("type").and_then(Value::as_str) == Some("Container")) {
        let (max, min) = (list(item, "max"), list(item, "min"));
        let mut default = list(item, "default");
        let mut request = list(item, "defaultRequest");
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

/// Applies the defaults of each LimitRange of the pod's namespace, in turn.
pub fn admit_pod(pod: &mut Pod, limit_ranges: &[std::sync::Arc<Value>]) {
    for lr in limit_ranges {
        let lr = default_limit_range((**lr).clone());
        let (mut limits, mut requests) = (Resources::new(), Resources::new());
        let items = lr.pointer("/spec/limits").and_then(Value::as_array).cloned().unwrap_or_default();
        for item in items.iter().filter(|i| i.get("type").and_then(Value::as_str) == Some("Container")) {
            requests.extend(list(item, "defaultRequest"));
            limits.extend(list(item, "default"));
        }
        let mut notes = Vec::new();
        let spec = pod.spec.get_or_insert_with(Default::default);
        for c in spec.containers.iter_mut() {
            merge(c, &limits, &requests, "container", &mut notes);
        }
        for c in spec.init_containers.iter_mut().flatten() {
            merge(c, &limits, &requests, "init container", &mut notes);
        }
        if !notes.is_empty() {
            let annotations = pod.metadata.annotations.get_or_insert_with(Default::default);
            annotations.insert(ANNOTATION.into(), format!("LimitRanger plugin set: {}", notes.join("; ")));
        }
    }
}

/// Upstream `mergeContainerResources`: fills what the container leaves out
/// and notes it (`cpu, memory request for container c`).
fn merge(c: &mut Container, limits: &Resources, requests: &Resources, what: &str, notes: &mut Vec<String>) {
    let res = c.resources.get_or_insert_with(Default::default);
    let set = |have: &mut Option<Resources>, defaults: &Resources| -> Vec<String> {
        let have = have.get_or_insert_with(Default::default);
        let mut names = Vec::new();
        for (k, v) in defaults {
            if !have.contains_key(k) {
                have.insert(k.clone(), v.clone());
                names.push(k.clone());
            }
        }
        names
    };
    let set_requests = set(&mut res.requests, requests);
    let set_limits = set(&mut res.limits, limits);
    // Upstream leaves empty maps behind; they encode as nothing.
    if res.requests.as_ref().is_some_and(BTreeMap::is_empty) {
        res.requests = None;
    }
    if res.limits.as_ref().is_some_and(BTreeMap::is_empty) {
        res.limits = None;
    }
    let name = &c.name;
    if !set_requests.is_empty() {
        notes.push(format!("{} request for {what} {name}", set_requests.join(", ")));
    }
    if !set_limits.is_empty() {
        notes.push(format!("{} limit for {what} {name}", set_limits.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn containers_get_the_namespace_defaults_they_leave_out() {
        let lr = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "default"},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                "defaultRequest": {"cpu": "100m"}}]}});
        let mut pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a", "image": "i", "resources": {"requests": {"cpu": "1"}}}, {"name": "b", "image": "i"}]}}))
        .unwrap();
        admit_pod(&mut pod, &[Arc::new(lr)]);
        let out = serde_json::to_value(&pod).unwrap();
        let a = &out["spec"]["containers"][0]["resources"];
        assert_eq!(
            a,
            &json!({"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}})
        );
        let b = &out["spec"]["containers"][1]["resources"];
        assert_eq!(
            b,
            &json!({"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}})
        );
        assert_eq!(
            out["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: memory request for container a; cpu, memory limit for container a; cpu, memory request for container b; cpu, memory limit for container b"
        );
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
