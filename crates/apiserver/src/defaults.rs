//! Create-time defaulting and validation (what the real API server's
//! defaulting functions and default admission plugins do for our resources).
//!
//! Validation that produces user-facing field errors runs on the raw JSON so
//! it can name fields precisely; defaulting then runs on k8s-openapi types so
//! malformed shapes are rejected the way the real server's decoder rejects them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodSecurityContext, PodStatus, Toleration};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{json, Value};

use crate::error::{ApiError, Cause};
use crate::resources::{def, ids, ResourceId};

/// Built-in priority classes that exist in every cluster.
pub fn builtin_priority_classes() -> Vec<Value> {
    [("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)]
        .into_iter()
        .map(|(name, value)| {
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
                "description": "Used for system critical pods that must not be moved from their current node."
            })
        })
        .collect()
}

/// Whether `s` is an RFC 1123 DNS subdomain (lowercase, `-`/`.`, ≤253).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label_lenient)
}

fn is_dns_label_lenient(part: &str) -> bool {
    let b = part.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` is an RFC 1123 DNS label (≤63, no dots).
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_dns_label_lenient(s)
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// The display name used in `Invalid` messages (`name`, else `generateName`).
pub fn display_name(obj: &Value) -> String {
    str_at(obj, "/metadata/name").or_else(|| str_at(obj, "/metadata/generateName")).unwrap_or_default().to_string()
}

/// Metadata checks every resource gets.
fn validate_meta(rid: ResourceId, obj: &Value, causes: &mut Vec<Cause>) {
    for field in ["spec", "status"] {
        if obj.get(field).is_some_and(|v| !v.is_object() && !v.is_null()) {
            causes.push(Cause::invalid(field, "", "must be an object"));
        }
    }
    let name = str_at(obj, "/metadata/name").unwrap_or_default();
    let generate = str_at(obj, "/metadata/generateName").unwrap_or_default();
    if name.is_empty() && generate.is_empty() {
        causes.push(Cause::required("metadata.name"));
        return;
    }
    if !name.is_empty() {
        let ok = if rid == ids::namespaces() { is_dns_label(name) } else { is_dns_subdomain(name) };
        if !ok {
            let why = if rid == ids::namespaces() {
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
            } else {
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            };
            causes.push(Cause::invalid("metadata.name", name, why));
        }
    }
    for field in ["labels", "annotations"] {
        if let Some(m) = obj.pointer(&format!("/metadata/{field}")) {
            match m.as_object() {
                Some(m) if m.values().all(Value::is_string) => {}
                Some(_) => causes.push(Cause::invalid(format!("metadata.{field}"), "", "values must be strings")),
                None if m.is_null() => {}
                None => causes.push(Cause::invalid(format!("metadata.{field}"), "", "must be a map of strings")),
            }
        }
    }
}

fn invalid(rid: ResourceId, obj: &Value, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(def(rid).kind, &display_name(obj), causes))
    }
}

/// Read access to cluster state that admission needs.
pub trait AdmissionContext {
    /// All current PriorityClass objects.
    fn priority_classes(&self) -> Vec<Arc<Value>>;
}

/// Defaults and validates an object being created. `obj` already has its
/// namespace resolved.
pub fn admit_create(rid: ResourceId, obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let mut causes = Vec::new();
    validate_meta(rid, &obj, &mut causes);
    if rid == ids::pods() {
        validate_pod_spec(&obj, &mut causes);
        invalid(rid, &obj, causes)?;
        return admit_pod(obj, ctx);
    }
    if rid == ids::priority_classes() {
        validate_priority_class(&obj, ctx, &mut causes);
    }
    invalid(rid, &obj, causes)?;
    if rid == ids::nodes() {
        return default_node(obj);
    }
    if rid == ids::namespaces() {
        return Ok(default_namespace(obj));
    }
    if rid == ids::priority_classes() {
        let mut obj = obj;
        if obj.get("preemptionPolicy").is_none_or(Value::is_null) {
            obj["preemptionPolicy"] = json!("PreemptLowerPriority");
        }
        return Ok(obj);
    }
    Ok(obj)
}

/// Validates an update of `old` to `new` (immutable fields).
pub fn validate_update(rid: ResourceId, old: &Value, new: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    validate_meta(rid, new, &mut causes);
    if rid == ids::pods() {
        validate_pod_spec(new, &mut causes);
        // Binding sets spec.nodeName once; every other spec change is restricted.
        let binding = old.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default().is_empty();
        if causes.is_empty() && mutable_pod_spec_view(old, binding) != mutable_pod_spec_view(new, binding) {
            causes.push(Cause::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
    }
    if rid == ids::priority_classes() && old.get("value") != new.get("value") {
        causes.push(Cause::forbidden("value", "may not be changed in an update."));
    }
    invalid(rid, new, causes)
}

/// The pod spec with the fields updates may change blanked out.
fn mutable_pod_spec_view(pod: &Value, ignore_node_name: bool) -> Value {
    let mut spec = pod.get("spec").cloned().unwrap_or(Value::Null);
    if let Value::Object(m) = &mut spec {
        if ignore_node_name {
            m.remove("nodeName");
        }
        for f in ["activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"] {
            m.remove(f);
        }
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = m.get_mut(list) {
                for c in cs {
                    if let Value::Object(c) = c {
                        c.remove("image");
                    }
                }
            }
        }
    }
    spec
}

fn validate_pod_spec(obj: &Value, causes: &mut Vec<Cause>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else {
        causes.push(Cause::required("spec.containers"));
        return;
    };
    let containers = spec.get("containers").and_then(Value::as_array);
    match containers {
        None => causes.push(Cause::required("spec.containers")),
        Some(cs) if cs.is_empty() => causes.push(Cause::required("spec.containers")),
        Some(_) => {}
    }
    let mut seen = Vec::new();
    for list in ["initContainers", "containers"] {
        let Some(cs) = spec.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, c) in cs.iter().enumerate() {
            let path = format!("spec.{list}[{i}]");
            match c.get("name").and_then(Value::as_str) {
                None | Some("") => causes.push(Cause::required(format!("{path}.name"))),
                Some(n) if !is_dns_label(n) => causes.push(Cause::invalid(
                    format!("{path}.name"),
                    n,
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'",
                )),
                Some(n) if seen.contains(&n) => causes.push(Cause::duplicate(format!("{path}.name"), n)),
                Some(n) => seen.push(n),
            }
            if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("{path}.image")));
            }
        }
    }
    if let Some(node) = spec.get("nodeName").and_then(Value::as_str) {
        if !node.is_empty() && !is_dns_subdomain(node) {
            causes.push(Cause::invalid("spec.nodeName", node, "must be a valid node name"));
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(obj: Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(obj).map_err(|e| ApiError::bad_request(format!("unable to decode {kind}: {e}")))
}

fn encode<T: serde::Serialize>(obj: &T) -> Result<Value, ApiError> {
    serde_json::to_value(obj).map_err(|e| ApiError::internal(format!("encoding failed: {e}")))
}

const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

fn admit_pod(obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let name = display_name(&obj);
    let mut pod: Pod = decode(obj, "Pod")?;
    let spec = pod.spec.get_or_insert_with(Default::default);

    spec.scheduler_name.get_or_insert_with(|| "default-scheduler".into());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.enable_service_links.get_or_insert(true);
    spec.security_context.get_or_insert_with(PodSecurityContext::default);
    spec.service_account_name.get_or_insert_with(|| "default".into());
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

    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for taint in [NOT_READY_TAINT, UNREACHABLE_TAINT] {
        let tolerated = tolerations.iter().any(|t| {
            let key_ok = t.key.as_deref() == Some(taint)
                || (t.key.as_deref().unwrap_or_default().is_empty() && t.operator.as_deref() == Some("Exists"));
            let effect_ok = matches!(t.effect.as_deref(), None | Some("") | Some("NoExecute"));
            key_ok && effect_ok
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some(taint.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(300),
                value: None,
            });
        }
    }

    let (priority, policy) = resolve_priority(&name, spec.priority_class_name.as_deref(), ctx)?;
    if let Some(given) = spec.priority {
        if given != priority {
            return Err(ApiError::forbidden(
                "pods",
                &name,
                &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"),
            ));
        }
    }
    spec.priority = Some(priority);
    spec.preemption_policy.get_or_insert(policy);

    let qos = qos_class(&pod);
    pod.status = Some(PodStatus { phase: Some("Pending".into()), qos_class: Some(qos.into()), ..Default::default() });
    encode(&pod)
}

fn resolve_priority(
    pod_name: &str,
    class: Option<&str>,
    ctx: &dyn AdmissionContext,
) -> Result<(i32, String), ApiError> {
    let classes = ctx.priority_classes();
    let parse = |pc: &Value| -> (i32, String) {
        let value = pc.get("value").and_then(Value::as_i64).unwrap_or(0);
        let policy = pc.get("preemptionPolicy").and_then(Value::as_str).unwrap_or("PreemptLowerPriority");
        (i32::try_from(value).unwrap_or(0), policy.to_string())
    };
    match class.filter(|c| !c.is_empty()) {
        Some(name) => {
            classes.iter().find(|pc| str_at(pc, "/metadata/name") == Some(name)).map(|pc| parse(pc)).ok_or_else(|| {
                ApiError::forbidden("pods", pod_name, &format!("no PriorityClass with name {name} was found"))
            })
        }
        None => Ok(classes
            .iter()
            .find(|pc| pc.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .map(|pc| parse(pc))
            .unwrap_or((0, "PreemptLowerPriority".into()))),
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

fn validate_priority_class(obj: &Value, ctx: &dyn AdmissionContext, causes: &mut Vec<Cause>) {
    match obj.get("value") {
        None | Some(Value::Null) => causes.push(Cause::required("value")),
        Some(v) if v.as_i64().and_then(|v| i32::try_from(v).ok()).is_none() => {
            causes.push(Cause::invalid("value", &v.to_string(), "must be a 32-bit integer"))
        }
        Some(_) => {}
    }
    if let Err(e) = serde_json::from_value::<PriorityClass>(obj.clone()) {
        causes.push(Cause::invalid("", "", &e.to_string()));
    }
    if !causes.is_empty() {
        return;
    }
    if obj.get("globalDefault").and_then(Value::as_bool) == Some(true) {
        let me = str_at(obj, "/metadata/name");
        if let Some(other) = ctx.priority_classes().iter().find(|pc| {
            pc.get("globalDefault").and_then(Value::as_bool) == Some(true) && str_at(pc, "/metadata/name") != me
        }) {
            causes.push(Cause::invalid(
                "globalDefault",
                "true",
                &format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    str_at(other, "/metadata/name").unwrap_or_default()
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoClasses(Vec<Arc<Value>>);
    impl AdmissionContext for NoClasses {
        fn priority_classes(&self) -> Vec<Arc<Value>> {
            self.0.clone()
        }
    }

    fn ctx() -> NoClasses {
        NoClasses(builtin_priority_classes().into_iter().map(Arc::new).collect())
    }

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
    fn pod_validation_names_fields() {
        let pod = json!({"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c"}, {"image": "x"}]}});
        let err = admit_create(ids::pods(), pod, &ctx()).unwrap_err();
        assert_eq!(err.code, 422);
        let fields: Vec<&str> = err.causes().iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["metadata.name", "spec.containers[0].image", "spec.containers[1].name"]);
        let err = admit_create(ids::pods(), json!({"metadata": {"name": "p"}, "spec": {}}), &ctx()).unwrap_err();
        assert_eq!(err.message, "Pod \"p\" is invalid: spec.containers: Required value");
    }

    #[test]
    fn unknown_priority_class_is_forbidden() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"priorityClassName": "nope", "containers": [{"name": "c", "image": "i"}]}});
        let err = admit_create(ids::pods(), pod, &ctx()).unwrap_err();
        assert_eq!(err.code, 403);
        assert!(err.message.contains("no PriorityClass with name nope was found"));
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
