//! Upstream's Priority admission plugin (on by default). Pods and PodGroups get the priority of
//! the PriorityClass they name, or of the global default class; a pod update keeps what create
//! resolved; and only one PriorityClass may be the global default.

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{json, Value};

use super::{AdmissionContext, Attributes, Object, Operation, Plugin};
use crate::error::ApiError;
use crate::resources::{def, ids};
use crate::validation::str_at;

/// The Priority plugin.
pub struct Priority;

impl Plugin for Priority {
    fn admit(&self, a: &mut Attributes<'_>, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        match (&mut a.object, a.operation) {
            (Object::Pod(pod), Operation::Create) => {
                admit_pod(a.name, pod.spec.get_or_insert_with(Default::default), ctx)
            }
            (Object::PodUpdate(u), Operation::Update) => {
                keep_resolved(u.pod, u.old);
                Ok(())
            }
            (Object::Json(obj), Operation::Create) if def(a.resource).kind == "PodGroup" => {
                admit_pod_group(a.name, obj, ctx)
            }
            _ => Ok(()),
        }
    }

    fn validate(&self, a: &Attributes<'_>, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        match &a.object {
            Object::Json(obj) if a.resource == ids::priority_classes() => only_one_global_default(obj, ctx),
            _ => Ok(()),
        }
    }
}

/// A pod being created: the priority and preemption policy of its class, which it may repeat
/// but not contradict.
fn admit_pod(name: &str, spec: &mut PodSpec, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    let resolved = resolve_priority("pods", name, spec.priority_class_name.as_deref(), ctx)?;
    spec.priority_class_name = resolved.class_name;
    if let Some(given) = spec.priority {
        if given != resolved.priority {
            return Err(ApiError::forbidden(
                "pods",
                name,
                &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name", resolved.priority),
            ));
        }
    }
    spec.priority = Some(resolved.priority);
    if let Some(policy) = resolved.preemption_policy {
        if let Some(given) = spec.preemption_policy.as_deref().filter(|g| *g != policy) {
            return Err(ApiError::forbidden(
                "pods",
                name,
                &format!("the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"),
            ));
        }
        spec.preemption_policy = Some(policy);
    }
    Ok(())
}

/// A pod update that leaves out the priority or preemption policy keeps what create resolved.
fn keep_resolved(new: &mut Value, old: &Value) {
    for f in ["priority", "preemptionPolicy"] {
        if new["spec"].get(f).is_none_or(Value::is_null) {
            if let Some(v) = old.pointer(&format!("/spec/{f}")).filter(|v| !v.is_null()) {
                new["spec"][f] = v.clone();
            }
        }
    }
}

/// A PodGroup being created (behind the WorkloadAwarePreemption gate, which the served PodGroup
/// API implies here: `disruptionMode`, `priorityClassName` and `priority` are accepted): the
/// class named, or the global default, resolved into `spec.priority`.
fn admit_pod_group(name: &str, obj: &mut Value, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    if !obj.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    let resource = "podgroups.scheduling.k8s.io";
    let resolved = resolve_priority(resource, name, str_at(obj, "/spec/priorityClassName"), ctx)?;
    if let Some(given) = obj.pointer("/spec/priority").and_then(Value::as_i64) {
        if given != i64::from(resolved.priority) {
            return Err(ApiError::forbidden(
                resource,
                name,
                &format!(
                    "priority set in the pod group ({given}) must match the priority computed ({}) based on the priority class set in the spec",
                    resolved.priority
                ),
            ));
        }
    }
    obj["spec"]["priority"] = json!(resolved.priority);
    match resolved.class_name {
        Some(class) => obj["spec"]["priorityClassName"] = json!(class),
        None => {
            if let Some(spec) = obj["spec"].as_object_mut() {
                spec.remove("priorityClassName");
            }
        }
    }
    Ok(())
}

/// What the plugin resolved.
struct ResolvedPriority {
    /// The class named (the global default's name when none was).
    class_name: Option<String>,
    priority: i32,
    /// The class's policy; `PreemptLowerPriority` when no class applies.
    preemption_policy: Option<String>,
}

/// Upstream's `establishPriority`: the named class, else the global default (the lowest-valued
/// one if several), else priority 0 with `PreemptLowerPriority`.
fn resolve_priority(
    resource: &str,
    object_name: &str,
    class: Option<&str>,
    ctx: &dyn AdmissionContext,
) -> Result<ResolvedPriority, ApiError> {
    let classes = ctx.priority_classes();
    let resolved = |pc: &Value| ResolvedPriority {
        class_name: str_at(pc, "/metadata/name").map(String::from),
        priority: pc.get("value").and_then(Value::as_i64).and_then(|v| i32::try_from(v).ok()).unwrap_or(0),
        preemption_policy: str_at(pc, "/preemptionPolicy").map(String::from),
    };
    match class.filter(|c| !c.is_empty()) {
        Some(name) => {
            classes.iter().find(|pc| str_at(pc, "/metadata/name") == Some(name)).map(|pc| resolved(pc)).ok_or_else(
                || ApiError::forbidden(resource, object_name, &format!("no PriorityClass with name {name} was found")),
            )
        }
        None => Ok(classes
            .iter()
            .filter(|pc| pc.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .min_by_key(|pc| pc.get("value").and_then(Value::as_i64).unwrap_or(0))
            .map(|pc| resolved(pc))
            .unwrap_or(ResolvedPriority {
                class_name: None,
                priority: 0,
                preemption_policy: Some("PreemptLowerPriority".into()),
            })),
    }
}

/// Only one PriorityClass may be the global default (on create, and on an update that makes
/// another class the default).
fn only_one_global_default(obj: &Value, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    if obj.get("globalDefault").and_then(Value::as_bool) != Some(true) {
        return Ok(());
    }
    let me = str_at(obj, "/metadata/name").unwrap_or_default();
    let other = ctx.priority_classes().into_iter().find(|pc| {
        pc.get("globalDefault").and_then(Value::as_bool) == Some(true) && str_at(pc, "/metadata/name") != Some(me)
    });
    match other {
        Some(other) => Err(ApiError::forbidden(
            "priorityclasses.scheduling.k8s.io",
            me,
            &format!(
                "PriorityClass {} is already marked as default. Only one default can exist",
                str_at(&other, "/metadata/name").unwrap_or_default()
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::admission::testing::{class, ctx, pod_with, with_classes};
    use crate::resources::ids;
    use crate::strategy::{admit_create, admit_update};

    #[test]
    fn priority_admission_names_the_default_class_and_checks_the_policy() {
        let classes = with_classes(vec![class("low", 10, true, "Never"), class("lower", 5, true, "Never")]);
        let out = admit_create(ids::pods(), pod_with(json!({})), &classes).unwrap();
        assert_eq!(out["spec"]["priorityClassName"], "lower", "the lowest of two global defaults");
        assert_eq!(out["spec"]["priority"], 5);
        assert_eq!(out["spec"]["preemptionPolicy"], "Never");
        let pod = pod_with(json!({"priorityClassName": "low", "preemptionPolicy": "PreemptLowerPriority"}));
        let err = admit_create(ids::pods(), pod, &classes).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(err.message, "pods \"p\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name");
        let out = admit_create(ids::pods(), pod_with(json!({})), &ctx()).unwrap();
        assert!(out["spec"].get("priorityClassName").is_none(), "no default class: no name");
        assert_eq!(
            (out["spec"]["priority"].as_i64(), out["spec"]["preemptionPolicy"].as_str()),
            (Some(0), Some("PreemptLowerPriority"))
        );
    }

    #[test]
    fn unknown_priority_class_is_forbidden() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"priorityClassName": "nope", "containers": [{"name": "c", "image": "i"}]}});
        let err = admit_create(ids::pods(), pod, &ctx()).unwrap_err();
        assert_eq!(err.code, 403);
        assert!(err.message.contains("no PriorityClass with name nope was found"));
    }

    #[test]
    fn pod_group_priority_is_resolved_at_create() {
        let pg = |spec: Value| {
            let mut spec = spec;
            spec["schedulingPolicy"] = json!({"gang": {"minCount": 2}});
            json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "default"}, "spec": spec})
        };
        let rid = crate::resources::by_kind("scheduling.k8s.io/v1alpha2", "PodGroup").unwrap();
        let classes = with_classes(vec![class("batch", 100, false, "PreemptLowerPriority")]);
        let out = admit_create(rid, pg(json!({"priorityClassName": "batch"})), &classes).unwrap();
        assert_eq!(
            (out["spec"]["priority"].as_i64(), out["spec"]["priorityClassName"].as_str()),
            (Some(100), Some("batch"))
        );
        let out = admit_create(rid, pg(json!({})), &classes).unwrap();
        assert_eq!(out["spec"]["priority"], 0);
        assert!(out["spec"].get("priorityClassName").is_none());
        let classes = with_classes(vec![class("dflt", 7, true, "PreemptLowerPriority")]);
        let out = admit_create(rid, pg(json!({})), &classes).unwrap();
        assert_eq!(
            (out["spec"]["priority"].as_i64(), out["spec"]["priorityClassName"].as_str()),
            (Some(7), Some("dflt"))
        );
        let err = admit_create(rid, pg(json!({"priorityClassName": "nope"})), &classes).unwrap_err();
        assert_eq!(
            err.message,
            "podgroups.scheduling.k8s.io \"g\" is forbidden: no PriorityClass with name nope was found"
        );
        let err = admit_create(rid, pg(json!({"priority": 3})), &classes).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (403, "podgroups.scheduling.k8s.io \"g\" is forbidden: priority set in the pod group (3) must match the priority computed (7) based on the priority class set in the spec"));
    }

    #[test]
    fn a_second_global_default_is_forbidden_on_create_and_update() {
        let classes = with_classes(vec![class("a", 1, true, "PreemptLowerPriority")]);
        let err =
            admit_create(ids::priority_classes(), class("b", 2, true, "PreemptLowerPriority"), &classes).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (403, "priorityclasses.scheduling.k8s.io \"b\" is forbidden: PriorityClass a is already marked as default. Only one default can exist"));
        let old = class("b", 2, false, "PreemptLowerPriority");
        let mut new = class("b", 2, true, "PreemptLowerPriority");
        assert_eq!(admit_update(ids::priority_classes(), &old, &mut new, &classes).unwrap_err().code, 403);
        let mut same = class("a", 1, true, "PreemptLowerPriority");
        admit_update(ids::priority_classes(), &same.clone(), &mut same, &classes).unwrap();
    }
}
