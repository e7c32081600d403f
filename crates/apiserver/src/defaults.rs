//! Create-time defaulting and validation (what the real API server's
//! defaulting functions and default admission plugins do for our resources).
//!
//! Validation that produces user-facing field errors runs on the raw JSON so
//! it can name fields precisely; defaulting then runs on k8s-openapi types so
//! malformed shapes are rejected the way the real server's decoder rejects them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodSecurityContext, PodStatus, Toleration};
use serde_json::{json, Value};

use crate::error::{ApiError, Cause};
use crate::resources::{def, ids, ResourceId};
use crate::validation;

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

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// Read access to cluster state that admission needs.
pub trait AdmissionContext {
    /// All current PriorityClass objects.
    fn priority_classes(&self) -> Vec<Arc<Value>>;
}

/// Defaults, admits and validates an object being created, in upstream's
/// order: defaulting (at decode), mutating admission, then validation.
/// `obj` already has its namespace resolved.
pub fn admit_create(rid: ResourceId, mut obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let d = def(rid);
    validation::decode(d, &mut obj, validation::FieldValidation::Ignore)?;
    // Shapes defaulting cannot work on are refused first.
    if ["metadata", "spec", "status"].iter().any(|f| obj.get(*f).is_some_and(|v| !v.is_object() && !v.is_null())) {
        validation::check(d, &obj, None)?;
    }
    let obj = if rid == ids::pods() {
        admit_pod(obj, ctx)?
    } else if rid == ids::nodes() {
        default_node(obj)?
    } else if rid == ids::namespaces() {
        default_namespace(obj)
    } else if rid == ids::priority_classes() {
        let mut obj = obj;
        if obj.get("preemptionPolicy").is_none_or(Value::is_null) {
            obj["preemptionPolicy"] = json!("PreemptLowerPriority");
        }
        obj
    } else if d.kind == "StorageClass" {
        default_storage_class(obj)
    } else if d.group == "resource.k8s.io" {
        validation::resource::default(d.kind, obj)
    } else {
        obj
    };
    validation::check(d, &obj, None)?;
    if rid == ids::priority_classes() {
        only_one_global_default(&obj, ctx)?;
    }
    Ok(obj)
}

/// Validates an update of `old` to `new`.
pub fn validate_update(rid: ResourceId, old: &Value, new: &Value) -> Result<(), ApiError> {
    validation::check(def(rid), new, Some(old))
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

fn decode<T: serde::de::DeserializeOwned>(obj: Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(obj)
        .map_err(|e| ApiError::bad_request(format!("{kind} in version \"v1\" cannot be handled as a {kind}: {e}")))
}

fn encode<T: serde::Serialize>(obj: &T) -> Result<Value, ApiError> {
    serde_json::to_value(obj).map_err(|e| ApiError::internal(format!("encoding failed: {e}")))
}

const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

fn admit_pod(obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let name = validation::display_name(&obj);
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

/// Priority admission: only one PriorityClass may be the global default.
fn only_one_global_default(obj: &Value, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    if obj.get("globalDefault").and_then(Value::as_bool) != Some(true) {
        return Ok(());
    }
    let me = str_at(obj, "/metadata/name");
    let other = ctx.priority_classes().into_iter().find(|pc| {
        pc.get("globalDefault").and_then(Value::as_bool) == Some(true) && str_at(pc, "/metadata/name") != me
    });
    match other {
        Some(other) => Err(ApiError::invalid_in(
            "scheduling.k8s.io",
            "PriorityClass",
            me.unwrap_or_default(),
            vec![Cause::invalid(
                "globalDefault",
                "true",
                &format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    str_at(&other, "/metadata/name").unwrap_or_default()
                ),
            )],
        )),
        None => Ok(()),
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
