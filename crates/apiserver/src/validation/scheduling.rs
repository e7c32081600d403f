//! `scheduling.k8s.io`: PriorityClass (v1), PodGroup and Workload (v1alpha2).
//!
//! The v1alpha2 kinds are validated declaratively upstream; the checks and messages here are
//! those of its generated validators, with every workload-aware feature gate on (this server
//! serves the alpha API as a cluster with those gates enabled would).

use ksched_framework::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};
use serde_json::Value;

use super::{child, index, items};
use crate::error::Cause;

/// The largest value a user-defined PriorityClass may have.
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// The system classes every cluster has, with their fixed values.
const SYSTEM_CLASSES: &[(&str, i64)] =
    &[("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)];

pub(super) fn validate(kind: &str, obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    match kind {
        "PriorityClass" => validate_priority_class(obj, old, errs),
        "PodGroup" => validate_pod_group(obj, old, errs),
        "Workload" => validate_workload(obj, old, errs),
        _ => {}
    }
}

fn validate_priority_class(obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let value = obj.get("value");
    let v = match value {
        None | Some(Value::Null) => {
            errs.push(Cause::required("value"));
            return;
        }
        Some(v) => match v.as_i64().and_then(|v| i32::try_from(v).ok()) {
            Some(v) => i64::from(v),
            None => {
                errs.push(Cause::invalid_value("value", v, "must be a 32-bit integer"));
                return;
            }
        },
    };
    if let Some(old) = old {
        if old.get("value") != value {
            errs.push(Cause::forbidden("value", "may not be changed in an update."));
        }
        if old.get("preemptionPolicy") != obj.get("preemptionPolicy") {
            errs.push(Cause::invalid_value(
                "preemptionPolicy",
                obj.get("preemptionPolicy").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        return;
    }
    if name.starts_with("system-") {
        let known = SYSTEM_CLASSES.iter().find(|(n, _)| *n == name);
        let why = match known {
            None => Some(format!("{name} is not a known system priority class")),
            Some((_, want)) if *want != v => Some(format!("value of {name} PriorityClass must be {want}")),
            Some(_) if obj.get("globalDefault").and_then(Value::as_bool) == Some(true) => {
                Some(format!("globalDefault of {name} PriorityClass must be false"))
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            errs.push(Cause::forbidden(
                "metadata.name",
                &format!("priority class names with 'system-' prefix are reserved for system use only. error: {why}"),
            ));
        }
    } else if v > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(Cause::forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ));
    }
    if let Some(p) = obj.get("preemptionPolicy").filter(|p| !p.is_null()) {
        if !matches!(p.as_str(), Some("PreemptLowerPriority" | "Never")) {
            errs.push(Cause::not_supported("preemptionPolicy", p, &["PreemptLowerPriority", "Never"]));
        }
    }
}

fn is_set(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

/// Declarative `Immutable`: any change is refused (the value is not echoed).
fn immutable(path: &str, new: Option<&Value>, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let norm = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    if norm(new) != norm(old) {
        errs.push(Cause::invalid_value(path, &Value::Null, "field is immutable"));
    }
}

/// Declarative `Union`: exactly one member set; names are quoted with backticks.
fn union(path: &str, obj: Option<&Value>, members: &[&str], errs: &mut Vec<Cause>) {
    let set: Vec<&str> = members.iter().copied().filter(|m| is_set(obj.and_then(|o| o.get(*m)))).collect();
    let all: Vec<String> = members.iter().map(|m| format!("`{m}`")).collect();
    match set.len() {
        0 => errs.push(Cause::invalid(path, "", &format!("must specify one of: {}", all.join(", ")))),
        1 => {}
        _ => errs.push(Cause::invalid_value(
            path,
            &Value::String(format!("{{{}}}", set.join(", "))),
            &format!("must specify exactly one of: {}", all.join(", ")),
        )),
    }
}

/// A required string in a format (`k8s-long-name` = DNS subdomain, `k8s-short-name` = DNS label).
fn required_name(path: &str, v: Option<&Value>, check: fn(&str) -> Vec<String>, errs: &mut Vec<Cause>) {
    match v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
        None => errs.push(Cause::required(path)),
        Some(s) => {
            for m in check(s) {
                errs.push(Cause::invalid(path, s, &m));
            }
        }
    }
}

/// `spec.schedulingPolicy`: exactly one of basic/gang; a gang needs minCount ≥ 1.
fn scheduling_policy(path: &str, policy: Option<&Value>, errs: &mut Vec<Cause>) {
    union(path, policy, &["basic", "gang"], errs);
    let Some(gang) = policy.and_then(|p| p.get("gang")).filter(|g| !g.is_null()) else { return };
    let min_path = child(&child(path, "gang"), "minCount");
    match gang.get("minCount").and_then(Value::as_i64) {
        None | Some(0) => errs.push(Cause::required(min_path)),
        Some(n) if n < 1 => {
            errs.push(Cause::invalid_value(min_path, &Value::from(n), "must be greater than or equal to 1"))
        }
        Some(_) => {}
    }
}

/// `schedulingConstraints.topology`: at most one constraint, each with a label key.
fn scheduling_constraints(path: &str, constraints: Option<&Value>, errs: &mut Vec<Cause>) {
    let Some(c) = constraints.filter(|c| !c.is_null()) else { return };
    let topo_path = child(path, "topology");
    let topology = items(c, "topology");
    if topology.len() > 1 {
        errs.push(Cause::too_many(topo_path, topology.len(), 1));
        return;
    }
    for (i, t) in topology.iter().enumerate() {
        let key_path = child(&index(&topo_path, i), "key");
        match t.get("key").and_then(Value::as_str).filter(|k| !k.is_empty()) {
            None => errs.push(Cause::required(key_path)),
            Some(k) => {
                for m in is_qualified_name(k) {
                    errs.push(Cause::invalid(&key_path, k, &m));
                }
            }
        }
    }
}

/// The workload-aware preemption fields of a PodGroup spec or template.
fn preemption_fields(path: &str, spec: &Value, errs: &mut Vec<Cause>) {
    if let Some(mode) = spec.get("disruptionMode").filter(|m| !m.is_null()) {
        if !matches!(mode.as_str(), Some("Pod" | "PodGroup")) {
            errs.push(Cause::not_supported(child(path, "disruptionMode"), mode, &["Pod", "PodGroup"]));
        }
    }
    if let Some(name) = spec.get("priorityClassName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        for m in is_dns1123_subdomain(name) {
            errs.push(Cause::invalid(child(path, "priorityClassName"), name, &m));
        }
    }
    if let Some(p) = spec.get("priority").and_then(Value::as_i64) {
        let path = child(path, "priority");
        if p > HIGHEST_USER_DEFINABLE_PRIORITY {
            errs.push(Cause::invalid_value(path, &Value::from(p), "must be less than or equal to 1000000000"));
        } else if p < i64::from(i32::MIN) {
            errs.push(Cause::invalid_value(path, &Value::from(p), "must be greater than or equal to -2147483648"));
        }
    }
}

/// Fields of a PodGroup spec that may not change after creation.
const POD_GROUP_IMMUTABLE: [&str; 7] = [
    "podGroupTemplateRef",
    "schedulingPolicy",
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
];

fn validate_pod_group(obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        for f in POD_GROUP_IMMUTABLE {
            immutable(&format!("spec.{f}"), spec.get(f), old_spec.get(f), errs);
        }
        return;
    }
    if let Some(r) = spec.get("podGroupTemplateRef").filter(|r| !r.is_null()) {
        let path = "spec.podGroupTemplateRef";
        union(path, Some(r), &["workload"], errs);
        if let Some(w) = r.get("workload").filter(|w| !w.is_null()) {
            let wp = child(path, "workload");
            required_name(&child(&wp, "workloadName"), w.get("workloadName"), is_dns1123_subdomain, errs);
            required_name(&child(&wp, "podGroupTemplateName"), w.get("podGroupTemplateName"), is_dns1123_label, errs);
        }
    }
    scheduling_policy("spec.schedulingPolicy", spec.get("schedulingPolicy"), errs);
    scheduling_constraints("spec.schedulingConstraints", spec.get("schedulingConstraints"), errs);
    let claims = items(spec, "resourceClaims");
    if claims.len() > 4 {
        errs.push(Cause::too_many("spec.resourceClaims", claims.len(), 4));
    }
    preemption_fields("spec", spec, errs);
}

fn validate_workload(obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        for f in ["controllerRef", "podGroupTemplates"] {
            immutable(&format!("spec.{f}"), spec.get(f), old_spec.get(f), errs);
        }
        return;
    }
    let templates = items(spec, "podGroupTemplates");
    if !is_set(spec.get("podGroupTemplates")) {
        errs.push(Cause::required("spec.podGroupTemplates"));
    } else if templates.len() > 8 {
        errs.push(Cause::too_many("spec.podGroupTemplates", templates.len(), 8));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, t) in templates.iter().enumerate() {
        let path = index("spec.podGroupTemplates", i);
        let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
        if !name.is_empty() && seen.contains(&name) {
            errs.push(Cause::duplicate(&path, &format!("{{\"name\":{name:?}}}")));
        }
        seen.push(name);
        required_name(&child(&path, "name"), t.get("name"), is_dns1123_label, errs);
        scheduling_policy(&child(&path, "schedulingPolicy"), t.get("schedulingPolicy"), errs);
        scheduling_constraints(&child(&path, "schedulingConstraints"), t.get("schedulingConstraints"), errs);
        preemption_fields(&path, t, errs);
    }
}
