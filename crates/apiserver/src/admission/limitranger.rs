//! Upstream's LimitRanger admission plugin (on by default), its mutating half for pods:
//! containers get the default limits and requests of their namespace's LimitRanges
//! (`type: Container` items) for the resources they leave out, which the scheduler then
//! accounts. Min/max/ratio enforcement is not done.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::{AdmissionContext, Attributes, Object, Plugin};
use crate::defaults::{default_limit_range, limit_range_list as list};
use crate::error::ApiError;

/// The LimitRanger plugin.
pub struct LimitRanger;

impl Plugin for LimitRanger {
    fn admit(&self, a: &mut Attributes<'_>, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        if let Object::Pod(pod) = &mut a.object {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            admit_pod(pod, &ctx.limit_ranges(&namespace));
        }
        Ok(())
    }
}

/// The annotation that records what the plugin set.
const ANNOTATION: &str = "kubernetes.io/limit-ranger";

type Resources = BTreeMap<String, Quantity>;

/// Applies the defaults of each LimitRange of the pod's namespace, in turn.
fn admit_pod(pod: &mut Pod, limit_ranges: &[Arc<Value>]) {
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
    use serde_json::json;

    use super::*;
    use crate::admission::testing::{ctx, pod_with};
    use crate::resources::ids;
    use crate::strategy::admit_create;

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
    fn limit_range_defaults_reach_the_pod_and_its_qos() {
        let mut pod = pod_with(json!({}));
        pod["metadata"]["namespace"] = json!("limited");
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let res = &out["spec"]["containers"][0]["resources"];
        assert_eq!(res, &json!({"limits": {"cpu": "200m"}, "requests": {"cpu": "200m"}}));
        assert_eq!(out["status"]["qosClass"], "Burstable");
        let out = admit_create(ids::pods(), pod_with(json!({})), &ctx()).unwrap();
        assert!(out["spec"]["containers"][0].get("resources").is_none(), "no LimitRange, no defaults");
    }
}
