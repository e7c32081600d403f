//! The create and update paths of an object, in kube-apiserver's order: decoding and
//! defaulting (`crate::defaults`), mutating admission (`crate::admission`), the registry
//! strategy's preparation (pod status, generation), validation, then validating admission.
//!
//! Validation that produces user-facing field errors runs on the raw JSON so
//! it can name fields precisely; pods are defaulted and admitted as k8s-openapi
//! types so malformed shapes are rejected the way the real server's decoder rejects them.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{json, Value};

use crate::admission::{self, AdmissionContext, Attributes, Object, Operation, PodUpdate};
use crate::defaults::{self, decode, encode};
use crate::error::ApiError;
use crate::resources::{def, ids, ResourceDef, ResourceId};
use crate::validation;

/// Upstream `core/v1` `PodReasonSchedulingGated`.
pub const POD_REASON_SCHEDULING_GATED: &str = "SchedulingGated";
/// The message upstream's pod strategy gives the gated `PodScheduled` condition.
pub const SCHEDULING_GATED_MESSAGE: &str = "Scheduling is blocked due to non-empty scheduling gates";

/// Defaults, admits and validates an object being created. `obj` already has
/// its namespace resolved.
pub fn admit_create(rid: ResourceId, mut obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let d = def(rid);
    validation::decode(d, &mut obj, validation::FieldValidation::Ignore)?;
    // Shapes defaulting cannot work on are refused first.
    if ["metadata", "spec", "status"].iter().any(|f| obj.get(*f).is_some_and(|v| !v.is_object() && !v.is_null())) {
        validation::check(d, &obj, None)?;
    }
    let name = validation::display_name(&obj);
    let mut obj = if rid == ids::pods() {
        create_pod(obj, &name, ctx)?
    } else {
        let mut obj = defaults::default_object(rid, obj)?;
        let object = Object::Json(&mut obj);
        admission::admit(&mut Attributes { operation: Operation::Create, resource: rid, name: &name, object }, ctx)?;
        obj
    };
    validation::check(d, &obj, None)?;
    let object = Object::Json(&mut obj);
    admission::validate(&Attributes { operation: Operation::Create, resource: rid, name: &name, object }, ctx)?;
    Ok(obj)
}

/// Mutating and validating admission of an update of `old` to `new`, before
/// validation ([`validate_update`]).
pub fn admit_update(rid: ResourceId, old: &Value, new: &mut Value, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    if rid == ids::pods() && !new.get("spec").is_some_and(Value::is_object) {
        // Validation refuses it; upstream's decoder would have, before admission.
        return Ok(());
    }
    let name = validation::display_name(new);
    let object = if rid == ids::pods() { Object::PodUpdate(PodUpdate::new(new, old)) } else { Object::Json(new) };
    let mut a = Attributes { operation: Operation::Update, resource: rid, name: &name, object };
    admission::admit(&mut a, ctx)?;
    admission::validate(&a, ctx)
}

/// Validates an update of `old` to `new`.
pub fn validate_update(rid: ResourceId, old: &Value, new: &Value) -> Result<(), ApiError> {
    validation::check(def(rid), new, Some(old))
}

/// Whether upstream's strategy for `d` sets `metadata.generation` (to 1 at
/// create, bumped on spec changes). Others, such as Nodes, Services, PVCs,
/// ResourceClaims and PodGroups, have none (so e.g. a PodGroup condition's
/// observedGeneration is 0 upstream).
pub fn tracks_generation(d: &ResourceDef) -> bool {
    matches!(
        (d.group, d.kind),
        ("", "Pod" | "ReplicationController" | "PodTemplate")
            | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
            | ("batch", "Job" | "CronJob")
            | ("policy", "PodDisruptionBudget")
            | ("discovery.k8s.io", "EndpointSlice")
            | ("scheduling.k8s.io", "PriorityClass")
            | ("resource.k8s.io", "DeviceClass" | "ResourceSlice")
    )
}

/// Whether an update of `old` to `new` bumps the generation, per upstream's
/// `PrepareForUpdate`: a spec change for most kinds, the template for
/// PodTemplates, anything but metadata (or a label) for EndpointSlices, never
/// for PriorityClasses.
pub fn bumps_generation(d: &ResourceDef, old: &Value, new: &Value) -> bool {
    match d.kind {
        "PriorityClass" => false,
        "PodTemplate" => old.get("template") != new.get("template"),
        "EndpointSlice" => {
            let body = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("metadata");
                }
                v
            };
            body(old) != body(new) || old.pointer("/metadata/labels") != new.pointer("/metadata/labels")
        }
        _ => old.get("spec") != new.get("spec"),
    }
}

/// A pod through kube-apiserver's create path: decoding defaults, the
/// mutating admission plugins, then the pod strategy's `PrepareForCreate`.
fn create_pod(obj: Value, name: &str, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let mut pod: Pod = decode(obj, "Pod")?;
    defaults::default_pod(&mut pod);
    let object = Object::Pod(&mut pod);
    admission::admit(&mut Attributes { operation: Operation::Create, resource: ids::pods(), name, object }, ctx)?;
    let gated = prepare_pod_for_create(&mut pod);
    let mut out = encode(&pod)?;
    if gated {
        // Added on the JSON so `lastProbeTime` is the explicit null upstream writes.
        out["status"]["conditions"] = json!([{
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": null,
            "lastTransitionTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "reason": POD_REASON_SCHEDULING_GATED,
            "message": SCHEDULING_GATED_MESSAGE,
        }]);
    }
    Ok(out)
}

/// Upstream's pod strategy `PrepareForCreate`: generation 1 (set by the
/// store), status reset to Pending with the QoS class, `matchLabelKeys` /
/// `mismatchLabelKeys` folded into the label selectors they qualify. Returns
/// whether the pod is gated (the caller adds the `SchedulingGated` condition).
fn prepare_pod_for_create(pod: &mut Pod) -> bool {
    let qos = qos_class(pod);
    pod.status = Some(PodStatus { phase: Some("Pending".into()), qos_class: Some(qos.into()), ..Default::default() });
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let Some(spec) = pod.spec.as_mut() else { return false };
    merge_label_keys(spec, &labels);
    spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty())
}

/// Upstream `mutatePodAffinity` (MatchLabelKeysInPodAffinity, GA) and
/// `mutateTopologySpreadConstraints` (MatchLabelKeysInPodTopologySpreadSelectorMerge,
/// on by default): each key the pod has a label for becomes a `key In (value)`
/// (`NotIn` for mismatchLabelKeys) requirement of the term's selector. A nil
/// selector (which matches nothing) stays nil.
fn merge_label_keys(
    spec: &mut k8s_openapi::api::core::v1::PodSpec,
    labels: &std::collections::BTreeMap<String, String>,
) {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    let add = |selector: &mut Option<LabelSelector>, keys: Option<&Vec<String>>, operator: &str| {
        let (Some(sel), Some(keys)) = (selector.as_mut(), keys) else { return };
        for key in keys {
            if let Some(value) = labels.get(key) {
                sel.match_expressions.get_or_insert_with(Vec::new).push(LabelSelectorRequirement {
                    key: key.clone(),
                    operator: operator.into(),
                    values: Some(vec![value.clone()]),
                });
            }
        }
    };
    if let Some(affinity) = spec.affinity.as_mut() {
        let pod_affinity = affinity.pod_affinity.as_mut().map(|a| {
            (
                a.required_during_scheduling_ignored_during_execution.as_mut(),
                a.preferred_during_scheduling_ignored_during_execution.as_mut(),
            )
        });
        let anti = affinity.pod_anti_affinity.as_mut().map(|a| {
            (
                a.required_during_scheduling_ignored_during_execution.as_mut(),
                a.preferred_during_scheduling_ignored_during_execution.as_mut(),
            )
        });
        for (required, preferred) in pod_affinity.into_iter().chain(anti) {
            let weighted = preferred.into_iter().flatten().map(|w| &mut w.pod_affinity_term);
            for term in required.into_iter().flatten().chain(weighted) {
                add(&mut term.label_selector, term.match_label_keys.as_ref(), "In");
                add(&mut term.label_selector, term.mismatch_label_keys.as_ref(), "NotIn");
            }
        }
    }
    for c in spec.topology_spread_constraints.iter_mut().flatten() {
        add(&mut c.label_selector, c.match_label_keys.as_ref(), "In");
    }
}

/// Parses a resource quantity ("100m", "1Gi", "2e3") to a float.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

/// Computes the pod QoS class from container requests and limits.
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in spec.init_containers.iter().flatten().chain(spec.containers.iter()) {
        let res = c.resources.as_ref();
        let req = res.and_then(|r| r.requests.as_ref());
        let lim = res.and_then(|r| r.limits.as_ref());
        for name in ["cpu", "memory"] {
            let r = req.and_then(|m| m.get(name)).and_then(|q| parse_quantity(&q.0));
            let l = lim.and_then(|m| m.get(name)).and_then(|q| parse_quantity(&q.0));
            if r.is_some_and(|v| v != 0.0) || l.is_some_and(|v| v != 0.0) {
                any = true;
            }
            match (r, l) {
                (Some(r), Some(l)) if r == l => {}
                (None, Some(_)) => {}
                _ => guaranteed = false,
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::testing::{ctx, pod_with};

    #[test]
    fn pod_defaults() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.2",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                "priorityClassName": "system-node-critical"}});
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert_eq!(out["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(out["spec"]["priority"], 2_000_001_000);
        assert_eq!(out["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        assert_eq!(out["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(out["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1");
        assert_eq!(out["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(out["status"], json!({"phase": "Pending", "qosClass": "Guaranteed"}));
    }

    #[test]
    fn gated_pod_gets_the_scheduling_gated_condition_at_create() {
        let pod = pod_with(json!({"schedulingGates": [{"name": "example.com/quota"}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let conds = out["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 1);
        let c = &conds[0];
        assert_eq!((c["type"].as_str(), c["status"].as_str()), (Some("PodScheduled"), Some("False")));
        assert_eq!(c["reason"], "SchedulingGated");
        assert_eq!(c["message"], "Scheduling is blocked due to non-empty scheduling gates");
        assert!(c["lastTransitionTime"].is_string() && c["lastProbeTime"].is_null());
        // A client-supplied status never survives create, gated or not.
        let mut pod = pod_with(json!({}));
        pod["status"] = json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]});
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert_eq!(out["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
    }

    #[test]
    fn match_label_keys_fold_into_affinity_and_spread_selectors() {
        let term = json!({"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}},
            "matchLabelKeys": ["ver", "missing"], "mismatchLabelKeys": ["app"]});
        let pod = pod_with(json!({
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "matchLabelKeys": ["ver"]}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["ver"]}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let merged = json!([{"key": "ver", "operator": "In", "values": ["2"]}, {"key": "app", "operator": "NotIn", "values": ["web"]}]);
        let anti = &out["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchExpressions"],
            merged
        );
        assert_eq!(
            anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["labelSelector"]
                ["matchExpressions"],
            merged
        );
        assert_eq!(
            anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["matchLabelKeys"],
            json!(["ver", "missing"]),
            "the keys stay"
        );
        let nil_selector = &out["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert!(nil_selector.get("labelSelector").is_none(), "a nil selector matches nothing and stays nil");
        assert_eq!(
            out["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"],
            json!([{"key": "ver", "operator": "In", "values": ["2"]}])
        );
    }

    #[test]
    fn generation_is_tracked_by_the_kinds_upstream_tracks_it_for() {
        let by = |av: &str, k: &str| def(crate::resources::by_kind(av, k).unwrap());
        assert!(tracks_generation(by("v1", "Pod")) && tracks_generation(by("apps/v1", "Deployment")));
        assert!(tracks_generation(by("scheduling.k8s.io/v1", "PriorityClass")));
        for (av, k) in [
            ("v1", "Node"),
            ("v1", "Service"),
            ("scheduling.k8s.io/v1alpha2", "PodGroup"),
            ("resource.k8s.io/v1", "ResourceClaim"),
        ] {
            assert!(!tracks_generation(by(av, k)), "{k}");
        }
        let eps = by("discovery.k8s.io/v1", "EndpointSlice");
        let a = json!({"metadata": {"labels": {"x": "1"}}, "endpoints": []});
        assert!(!bumps_generation(eps, &a, &a));
        assert!(bumps_generation(eps, &a, &json!({"metadata": {"labels": {"x": "2"}}, "endpoints": []})));
    }

    #[test]
    fn pod_validation_names_fields() {
        let pod = json!({"metadata": {"name": "Bad_Name", "namespace": "default"}, "spec": {"containers": [{"name": "c"}, {"image": "x"}]}});
        let err = admit_create(ids::pods(), pod, &ctx()).unwrap_err();
        assert_eq!(err.code, 422);
        let fields: Vec<&str> = err.causes().iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["metadata.name", "spec.containers[0].image", "spec.containers[1].name"]);
        let err =
            admit_create(ids::pods(), json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {}}), &ctx())
                .unwrap_err();
        assert_eq!(err.message, "Pod \"p\" is invalid: spec.containers: Required value");
    }

    #[test]
    fn quantities_and_qos() {
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("1Gi"), Some(1073741824.0));
        assert_eq!(parse_quantity("2e3"), Some(2000.0));
        assert_eq!(parse_quantity("x"), None);
        let pod: Pod = serde_json::from_value(
            json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
        )
        .unwrap();
        assert_eq!(qos_class(&pod), "Burstable");
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [{"name": "c"}]}})).unwrap();
        assert_eq!(qos_class(&pod), "BestEffort");
    }
}
