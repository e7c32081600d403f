//! Core (`v1`) kinds: Pod, Node, Namespace, PersistentVolume(Claim), Event.

use ksched_framework::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value};
use serde_json::{json, Value};

use super::meta::validate_labels;
use super::{child, entries, index, items, key, parse_quantity, str_of};
use crate::error::Cause;

pub(super) fn validate(kind: &str, obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    match kind {
        "Pod" => {
            pod_spec(obj.get("spec").unwrap_or(&Value::Null), "spec", errs);
            match old {
                None => pod_create(obj, errs),
                Some(old) if errs.is_empty() => pod_update(old, obj, errs),
                Some(_) => {}
            }
        }
        "Node" => node(obj, old, errs),
        "Namespace" => {
            for f in items(obj.get("spec").unwrap_or(&Value::Null), "finalizers") {
                let f = f.as_str().unwrap_or_default();
                finalizer_name(f, "spec.finalizers", errs);
            }
        }
        "PersistentVolume" => persistent_volume(obj, old, errs),
        "PersistentVolumeClaim" => persistent_volume_claim(obj, old, errs),
        "Event" => event(obj, errs),
        _ => {}
    }
}

/// Resource names a container may request without a domain prefix.
const STANDARD_CONTAINER_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn is_integer_resource(name: &str) -> bool {
    // Extended resources (domain-prefixed, not kubernetes.io/) and hugepages'
    // siblings are counted in whole units.
    let native = !name.contains('/') || name.starts_with("kubernetes.io/");
    !native && !name.starts_with("requests.")
}

fn container_resource_name(name: &str, path: &str, errs: &mut Vec<Cause>) {
    let msgs = is_qualified_name(name);
    if !msgs.is_empty() {
        for m in msgs {
            errs.push(Cause::invalid(path, name, &m));
        }
        return;
    }
    if !name.contains('/') {
        if !STANDARD_CONTAINER_RESOURCES.contains(&name) && !is_hugepages(name) {
            errs.push(Cause::invalid(path, name, "must be a standard resource type or fully qualified"));
            errs.push(Cause::invalid(path, name, "must be a standard resource for containers"));
        }
    } else if !name.starts_with("kubernetes.io/") && name.starts_with("requests.") {
        errs.push(Cause::invalid(path, name, "doesn't follow extended resource name standard"));
    }
}

/// Non-negative, and whole for resources counted in units.
fn quantity_value(resource: &str, q: &Value, path: &str, errs: &mut Vec<Cause>) {
    let s = q.as_str().map(str::to_string).unwrap_or_else(|| q.to_string());
    // Malformed quantities are refused earlier, by the decoder (see `decode`).
    let Ok(v) = parse_quantity(&s) else {
        return;
    };
    if v.0 < 0.0 {
        errs.push(Cause::invalid(path, &s, "must be greater than or equal to 0"));
    }
    if is_integer_resource(resource) && !v.is_integer() {
        errs.push(Cause::invalid(path, &s, "must be an integer"));
    }
}

fn resource_requirements(res: &Value, path: &str, errs: &mut Vec<Cause>) {
    let lim_path = child(path, "limits");
    let req_path = child(path, "requests");
    for (name, q) in entries(res, "limits") {
        let p = key(&lim_path, name);
        container_resource_name(name, &p, errs);
        quantity_value(name, q, &p, errs);
    }
    let limits = res.get("limits");
    for (name, q) in entries(res, "requests") {
        let p = key(&req_path, name);
        container_resource_name(name, &p, errs);
        quantity_value(name, q, &p, errs);
        let parse = |v: &Value| v.as_str().and_then(|s| parse_quantity(s).ok());
        let req_s = q.as_str().unwrap_or_default();
        match limits.and_then(|l| l.get(name.as_str())) {
            Some(lim) => {
                let lim_s = lim.as_str().unwrap_or_default();
                let overcommit = !is_hugepages(name) && !is_integer_resource(name);
                if let (Some(r), Some(l)) = (parse(q), parse(lim)) {
                    if r != l && !overcommit {
                        errs.push(Cause::invalid(
                            &req_path,
                            req_s,
                            &format!("must be equal to {name} limit of {lim_s}"),
                        ));
                    } else if r > l {
                        errs.push(Cause::invalid(
                            &req_path,
                            req_s,
                            &format!("must be less than or equal to {name} limit of {lim_s}"),
                        ));
                    }
                }
            }
            None if is_hugepages(name) || is_integer_resource(name) => {
                errs.push(Cause::required_because(&lim_path, "Limit must be set for non overcommitable resources"))
            }
            None => {}
        }
    }
}

fn not_supported(v: &Value, field: &str, path: &str, valid: &[&str], errs: &mut Vec<Cause>) {
    if let Some(val) = v.get(field) {
        if !val.is_null() && !val.as_str().is_some_and(|s| valid.contains(&s)) {
            errs.push(Cause::not_supported(child(path, field), val, valid));
        }
    }
}

fn port_num(v: &Value, field: &str, path: &str, errs: &mut Vec<Cause>) {
    if let Some(p) = v.get(field).and_then(Value::as_i64) {
        if !(1..=65535).contains(&p) {
            errs.push(Cause::invalid_value(child(path, field), &json!(p), "must be between 1 and 65535, inclusive"));
        }
    }
}

fn containers(spec: &Value, list: &str, path: &str, seen: &mut Vec<String>, errs: &mut Vec<Cause>) {
    let list_path = child(path, list);
    for (i, c) in items(spec, list).iter().enumerate() {
        let p = index(&list_path, i);
        let name = str_of(c, "name");
        if name.is_empty() {
            errs.push(Cause::required(child(&p, "name")));
        } else {
            for m in is_dns1123_label(name) {
                errs.push(Cause::invalid(child(&p, "name"), name, &m));
            }
            if seen.iter().any(|n| n == name) {
                errs.push(Cause::duplicate(child(&p, "name"), name));
            } else {
                seen.push(name.to_string());
            }
        }
        if str_of(c, "image").is_empty() {
            errs.push(Cause::required(child(&p, "image")));
        }
        not_supported(c, "imagePullPolicy", &p, &["Always", "IfNotPresent", "Never"], errs);
        for (j, port) in items(c, "ports").iter().enumerate() {
            let pp = index(&child(&p, "ports"), j);
            if port.get("containerPort").is_none() {
                errs.push(Cause::invalid_value(
                    child(&pp, "containerPort"),
                    &json!(0),
                    "must be between 1 and 65535, inclusive",
                ));
            }
            port_num(port, "containerPort", &pp, errs);
            if port.get("hostPort").and_then(Value::as_i64).is_some_and(|h| h != 0) {
                port_num(port, "hostPort", &pp, errs);
            }
            not_supported(port, "protocol", &pp, &["SCTP", "TCP", "UDP"], errs);
        }
        if let Some(res) = c.get("resources").filter(|r| r.is_object()) {
            resource_requirements(res, &child(&p, "resources"), errs);
        }
    }
}

/// A required `nodeSelectorTerms` entry's requirements.
fn node_selector_requirement(r: &Value, path: &str, errs: &mut Vec<Cause>) {
    let values = items(r, "values");
    let op = str_of(r, "operator");
    match op {
        "In" | "NotIn" if values.is_empty() => errs.push(Cause::required_because(
            child(path, "values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(Cause::forbidden(
            child(path, "values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errs.push(Cause::required_because(
            child(path, "values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        _ => errs.push(Cause::invalid(child(path, "operator"), op, "not a valid selector operator")),
    }
    let k = str_of(r, "key");
    for m in is_qualified_name(k) {
        errs.push(Cause::invalid(child(path, "key"), k, &m));
    }
}

fn node_selector_term(term: &Value, path: &str, errs: &mut Vec<Cause>) {
    for (i, r) in items(term, "matchExpressions").iter().enumerate() {
        node_selector_requirement(r, &index(&child(path, "matchExpressions"), i), errs);
    }
    for (i, r) in items(term, "matchFields").iter().enumerate() {
        let p = index(&child(path, "matchFields"), i);
        if str_of(r, "key") != "metadata.name" {
            errs.push(Cause::invalid(child(&p, "key"), str_of(r, "key"), "not a valid field selector key"));
        }
    }
}

/// `metav1.LabelSelector` syntax.
pub(super) fn label_selector(sel: &Value, path: &str, errs: &mut Vec<Cause>) {
    validate_labels(sel.get("matchLabels").unwrap_or(&Value::Null), &child(path, "matchLabels"), errs);
    for (i, r) in items(sel, "matchExpressions").iter().enumerate() {
        let p = index(&child(path, "matchExpressions"), i);
        let values = items(r, "values");
        let op = str_of(r, "operator");
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(Cause::required_because(
                child(&p, "values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(Cause::forbidden(
                child(&p, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => errs.push(Cause::invalid(child(&p, "operator"), op, "not a valid selector operator")),
        }
        let k = str_of(r, "key");
        for m in is_qualified_name(k) {
            errs.push(Cause::invalid(child(&p, "key"), k, &m));
        }
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or_default();
            for m in is_valid_label_value(v) {
                errs.push(Cause::invalid(index(&child(&p, "values"), j), v, &m));
            }
        }
    }
}

fn affinity(aff: &Value, path: &str, errs: &mut Vec<Cause>) {
    let na = child(path, "nodeAffinity");
    if let Some(req) = aff.pointer("/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution") {
        let p = child(&na, "requiredDuringSchedulingIgnoredDuringExecution");
        let terms = items(req, "nodeSelectorTerms");
        if terms.is_empty() {
            errs.push(Cause::required_because(
                child(&p, "nodeSelectorTerms"),
                "must have at least one node selector term",
            ));
        }
        for (i, t) in terms.iter().enumerate() {
            node_selector_term(t, &index(&child(&p, "nodeSelectorTerms"), i), errs);
        }
    }
    if let Some(pref) = aff.pointer("/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution") {
        let p = child(&na, "preferredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in pref.as_array().map_or(&[][..], Vec::as_slice).iter().enumerate() {
            let tp = index(&p, i);
            if let Some(w) = t.get("weight").and_then(Value::as_i64) {
                if !(1..=100).contains(&w) {
                    errs.push(Cause::invalid_value(child(&tp, "weight"), &json!(w), "must be in the range 1-100"));
                }
            }
            node_selector_term(t.get("preference").unwrap_or(&Value::Null), &child(&tp, "preference"), errs);
        }
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let kp = child(path, kind);
        let Some(a) = aff.get(kind) else {
            continue;
        };
        let req = "requiredDuringSchedulingIgnoredDuringExecution";
        for (i, term) in items(a, req).iter().enumerate() {
            pod_affinity_term(term, &index(&child(&kp, req), i), errs);
        }
        let pref = "preferredDuringSchedulingIgnoredDuringExecution";
        for (i, w) in items(a, pref).iter().enumerate() {
            let wp = index(&child(&kp, pref), i);
            if let Some(v) = w.get("weight").and_then(Value::as_i64) {
                if !(1..=100).contains(&v) {
                    errs.push(Cause::invalid_value(child(&wp, "weight"), &json!(v), "must be in the range 1-100"));
                }
            }
            pod_affinity_term(w.get("podAffinityTerm").unwrap_or(&Value::Null), &child(&wp, "podAffinityTerm"), errs);
        }
    }
}

fn pod_affinity_term(term: &Value, path: &str, errs: &mut Vec<Cause>) {
    if let Some(sel) = term.get("labelSelector").filter(|s| s.is_object()) {
        label_selector(sel, &child(path, "labelSelector"), errs);
    }
    if let Some(sel) = term.get("namespaceSelector").filter(|s| s.is_object()) {
        label_selector(sel, &child(path, "namespaceSelector"), errs);
    }
    let tk = str_of(term, "topologyKey");
    if tk.is_empty() {
        errs.push(Cause::required_because(child(path, "topologyKey"), "can not be empty"));
    } else {
        for m in is_qualified_name(tk) {
            errs.push(Cause::invalid(child(path, "topologyKey"), tk, &m));
        }
    }
}

fn tolerations(spec: &Value, path: &str, errs: &mut Vec<Cause>) {
    for (i, t) in items(spec, "tolerations").iter().enumerate() {
        let p = index(path, i);
        let k = str_of(t, "key");
        if !k.is_empty() {
            for m in is_qualified_name(k) {
                errs.push(Cause::invalid(child(&p, "key"), k, &m));
            }
        }
        let op = str_of(t, "operator");
        if k.is_empty() && op != "Exists" {
            errs.push(Cause::invalid(
                child(&p, "operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        let effect = str_of(t, "effect");
        if t.get("tolerationSeconds").is_some_and(|s| !s.is_null()) && effect != "NoExecute" {
            errs.push(Cause::invalid(
                child(&p, "effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        let value = str_of(t, "value");
        match op {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(Cause::invalid(child(&p, "operator"), value, &msgs.join(";")));
                }
            }
            "Exists" if !value.is_empty() => errs.push(Cause::invalid(
                child(&p, "operator"),
                value,
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" => {}
            other => errs.push(Cause::not_supported(child(&p, "operator"), &json!(other), &["Equal", "Exists"])),
        }
        if !effect.is_empty() {
            taint_effect(effect, &child(&p, "effect"), errs);
        }
    }
}

fn taint_effect(effect: &str, path: &str, errs: &mut Vec<Cause>) {
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        errs.push(Cause::not_supported(path, &json!(effect), &["NoSchedule", "PreferNoSchedule", "NoExecute"]));
    }
}

fn topology_spread(spec: &Value, path: &str, errs: &mut Vec<Cause>) {
    let mut seen: Vec<(String, String)> = Vec::new();
    for (i, c) in items(spec, "topologySpreadConstraints").iter().enumerate() {
        let p = index(path, i);
        let skew = c.get("maxSkew").and_then(Value::as_i64).unwrap_or(0);
        if skew <= 0 {
            errs.push(Cause::invalid_value(child(&p, "maxSkew"), &json!(skew), "must be greater than zero"));
        }
        let tk = str_of(c, "topologyKey");
        if tk.is_empty() {
            errs.push(Cause::required_because(child(&p, "topologyKey"), "can not be empty"));
        } else {
            for m in is_qualified_name(tk) {
                errs.push(Cause::invalid(child(&p, "topologyKey"), tk, &m));
            }
        }
        let wu = c.get("whenUnsatisfiable").cloned().unwrap_or(json!(""));
        if !matches!(wu.as_str(), Some("DoNotSchedule" | "ScheduleAnyway")) {
            errs.push(Cause::not_supported(child(&p, "whenUnsatisfiable"), &wu, &["DoNotSchedule", "ScheduleAnyway"]));
        }
        let pair = (tk.to_string(), wu.as_str().unwrap_or_default().to_string());
        if seen.contains(&pair) {
            errs.push(Cause::duplicate(
                child(&p, "{topologyKey, whenUnsatisfiable}"),
                &format!("{{{}, {}}}", pair.0, pair.1),
            ));
        } else {
            seen.push(pair);
        }
        if let Some(md) = c.get("minDomains").and_then(Value::as_i64) {
            if md <= 0 {
                errs.push(Cause::invalid_value(child(&p, "minDomains"), &json!(md), "must be greater than zero"));
            }
        }
        if let Some(sel) = c.get("labelSelector").filter(|s| s.is_object()) {
            label_selector(sel, &child(&p, "labelSelector"), errs);
        }
        not_supported(c, "nodeAffinityPolicy", &p, &["Honor", "Ignore"], errs);
        not_supported(c, "nodeTaintsPolicy", &p, &["Honor", "Ignore"], errs);
    }
}

fn pod_spec(spec: &Value, path: &str, errs: &mut Vec<Cause>) {
    let mut seen = Vec::new();
    if items(spec, "containers").is_empty() {
        errs.push(Cause::required(child(path, "containers")));
    }
    containers(spec, "containers", path, &mut seen, errs);
    containers(spec, "initContainers", path, &mut seen, errs);
    not_supported(spec, "restartPolicy", path, &["Always", "OnFailure", "Never"], errs);
    not_supported(spec, "dnsPolicy", path, &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"], errs);
    validate_labels(spec.get("nodeSelector").unwrap_or(&Value::Null), &child(path, "nodeSelector"), errs);
    if let Some(aff) = spec.get("affinity").filter(|a| a.is_object()) {
        affinity(aff, &child(path, "affinity"), errs);
    }
    for (i, g) in items(spec, "schedulingGates").iter().enumerate() {
        let n = str_of(g, "name");
        let p = index(&child(path, "schedulingGates"), i);
        for m in is_qualified_name(n) {
            errs.push(Cause::invalid(child(&p, "name"), n, &m));
        }
    }
    topology_spread(spec, &child(path, "topologySpreadConstraints"), errs);
    let sa = str_of(spec, "serviceAccountName");
    if !sa.is_empty() {
        for m in is_dns1123_subdomain(sa) {
            errs.push(Cause::invalid(child(path, "serviceAccountName"), sa, &m));
        }
    }
    let node = str_of(spec, "nodeName");
    if !node.is_empty() {
        for m in is_dns1123_subdomain(node) {
            errs.push(Cause::invalid(child(path, "nodeName"), node, &m));
        }
    }
    if let Some(ads) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64) {
        if !(1..=i64::from(i32::MAX)).contains(&ads) {
            errs.push(Cause::invalid_value(
                child(path, "activeDeadlineSeconds"),
                &json!(ads),
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    tolerations(spec, &child(path, "tolerations"), errs);
    let pc = str_of(spec, "priorityClassName");
    if !pc.is_empty() {
        for m in is_dns1123_subdomain(pc) {
            errs.push(Cause::invalid(child(path, "priorityClassName"), pc, &m));
        }
    }
    not_supported(spec, "preemptionPolicy", path, &["PreemptLowerPriority", "Never"], errs);
    let sched = str_of(spec, "schedulerName");
    if !sched.is_empty() {
        for m in is_dns1123_subdomain(sched) {
            errs.push(Cause::invalid(child(path, "schedulerName"), sched, &m));
        }
    }
}

fn pod_create(obj: &Value, errs: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if !items(spec, "ephemeralContainers").is_empty() {
        errs.push(Cause::forbidden("spec.ephemeralContainers", "cannot be set on create"));
    }
    if !str_of(spec, "nodeName").is_empty() && !items(spec, "schedulingGates").is_empty() {
        errs.push(Cause::forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"));
    }
}

/// Upstream's list of what a pod update may change.
const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn pod_update(old: &Value, new: &Value, errs: &mut Vec<Cause>) {
    let old_spec = old.get("spec").unwrap_or(&Value::Null);
    let new_spec = new.get("spec").unwrap_or(&Value::Null);
    // Scheduling gates may only be removed.
    let old_gates = items(old_spec, "schedulingGates");
    for (i, g) in items(new_spec, "schedulingGates").iter().enumerate() {
        if !old_gates.contains(g) {
            errs.push(Cause::forbidden(
                child(&index("spec.schedulingGates", i), "name"),
                &format!("only deletion is allowed, but found new scheduling gate '{}'", str_of(g, "name")),
            ));
        }
    }
    // Tolerations may only be added to.
    let old_tols = items(old_spec, "tolerations");
    let new_tols = items(new_spec, "tolerations");
    for t in old_tols {
        if !new_tols.contains(t) {
            errs.push(Cause::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    let binding = str_of(old_spec, "nodeName").is_empty();
    if errs.is_empty() && mutable_view(old_spec, binding) != mutable_view(new_spec, binding) {
        errs.push(Cause::forbidden(
            "spec",
            &format!("pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}"),
        ));
    }
}

/// The pod spec with the fields updates may change blanked out.
fn mutable_view(spec: &Value, ignore_node_name: bool) -> Value {
    let mut spec = spec.clone();
    if let Value::Object(m) = &mut spec {
        if ignore_node_name {
            m.remove("nodeName");
        }
        for f in ["activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"] {
            m.remove(f);
        }
        // Node affinity and nodeSelector may be tightened while scheduling gates exist;
        // we accept any change to them, as upstream does for gated pods.
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = m.get_mut(list) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("image");
                }
            }
        }
    }
    spec
}

fn node(obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in items(spec, "taints").iter().enumerate() {
        let p = index("metadata.taints", i);
        let k = str_of(t, "key");
        for m in is_qualified_name(k) {
            errs.push(Cause::invalid(child(&p, "key"), k, &m));
        }
        let v = str_of(t, "value");
        let msgs = is_valid_label_value(v);
        if !msgs.is_empty() {
            errs.push(Cause::invalid(child(&p, "value"), v, &msgs.join(";")));
        }
        let effect = str_of(t, "effect");
        if effect.is_empty() {
            errs.push(Cause::required(child(&p, "effect")));
        } else {
            taint_effect(effect, &child(&p, "effect"), errs);
        }
        if seen.contains(&(k, effect)) {
            let mut dup = Cause::invalid_value(&p, t, "taints must be unique by key and effect pair");
            dup.reason = "FieldValueDuplicate";
            dup.message = dup.message.replacen("Invalid value", "Duplicate value", 1);
            errs.push(dup);
            continue;
        }
        seen.push((k, effect));
    }
    let status = obj.get("status").unwrap_or(&Value::Null);
    for field in ["capacity", "allocatable"] {
        for (name, q) in entries(status, field) {
            quantity_value(name, q, &format!("status.{field}.{name}"), errs);
        }
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        let old_cidrs = items(old_spec, "podCIDRs");
        if !old_cidrs.is_empty() && old_cidrs != items(spec, "podCIDRs") {
            errs.push(Cause::forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        let old_provider = str_of(old_spec, "providerID");
        if !old_provider.is_empty() && old_provider != str_of(spec, "providerID") {
            errs.push(Cause::forbidden(
                "spec.providerID",
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
    }
}

fn finalizer_name(f: &str, path: &str, errs: &mut Vec<Cause>) {
    let msgs = is_qualified_name(f);
    let bad = !msgs.is_empty();
    for m in msgs {
        errs.push(Cause::invalid(path, f, &m));
    }
    if !bad && !f.contains('/') && f != "kubernetes" {
        errs.push(Cause::invalid(path, f, "name is neither a standard finalizer name nor is it fully qualified"));
    }
}

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

fn access_modes(spec: &Value, path: &str, required_detail: &str, errs: &mut Vec<Cause>) {
    let modes = items(spec, "accessModes");
    if modes.is_empty() {
        let p = child(path, "accessModes");
        errs.push(if required_detail.is_empty() {
            Cause::required(p)
        } else {
            Cause::required_because(p, required_detail)
        });
    }
    for m in modes {
        if !m.as_str().is_some_and(|s| ACCESS_MODES.contains(&s)) {
            errs.push(Cause::not_supported(child(path, "accessModes"), m, ACCESS_MODES));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m.as_str() == Some("ReadWriteOncePod")) {
        errs.push(Cause::forbidden(child(path, "accessModes"), "may not use ReadWriteOncePod with other access modes"));
    }
}

/// Volume source fields of a PersistentVolumeSpec (exactly one may be set).
const PV_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

fn persistent_volume(obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    access_modes(spec, "spec", "", errs);
    let cap = entries(spec, "capacity");
    if cap.is_empty() {
        errs.push(Cause::required("spec.capacity"));
    } else if cap.len() != 1 || cap[0].0 != "storage" {
        errs.push(Cause::not_supported("spec.capacity", spec.get("capacity").unwrap_or(&Value::Null), &["storage"]));
    }
    for (name, q) in cap {
        quantity_value(name, q, &key("spec.capacity", name), errs);
    }
    not_supported(spec, "persistentVolumeReclaimPolicy", "spec", &["Delete", "Recycle", "Retain"], errs);
    not_supported(spec, "volumeMode", "spec", &["Block", "Filesystem"], errs);
    let sc = str_of(spec, "storageClassName");
    if !sc.is_empty() {
        for m in is_dns1123_subdomain(sc) {
            errs.push(Cause::invalid("spec.storageClassName", sc, &m));
        }
    }
    let sources: Vec<&str> =
        PV_SOURCES.iter().copied().filter(|s| spec.get(*s).is_some_and(|v| !v.is_null())).collect();
    match sources.as_slice() {
        [] => errs.push(Cause::required_because("spec", "must specify a volume type")),
        [_] => {}
        [_, rest @ ..] => {
            for s in rest {
                errs.push(Cause::forbidden(child("spec", s), "may not specify more than 1 volume type"));
            }
        }
    }
    if let Some(req) = spec.pointer("/nodeAffinity/required") {
        let terms = items(req, "nodeSelectorTerms");
        if terms.is_empty() {
            errs.push(Cause::required_because(
                "spec.nodeAffinity.required.nodeSelectorTerms",
                "must have at least one node selector term",
            ));
        }
        for (i, t) in terms.iter().enumerate() {
            node_selector_term(t, &index("spec.nodeAffinity.required.nodeSelectorTerms", i), errs);
        }
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        for s in PV_SOURCES {
            if old_spec.get(*s) != spec.get(*s) {
                errs.push(Cause::forbidden(
                    "spec.persistentvolumesource",
                    "spec.persistentvolumesource is immutable after creation",
                ));
                break;
            }
        }
        if old_spec.get("volumeMode") != spec.get("volumeMode") {
            errs.push(Cause::invalid_value(
                "spec.volumeMode",
                spec.get("volumeMode").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
}

fn persistent_volume_claim(obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    access_modes(spec, "spec", "at least 1 access mode is required", errs);
    match spec.pointer("/resources/requests/storage") {
        None => errs.push(Cause::required("spec.resources[storage]")),
        Some(q) => {
            let s = q.as_str().unwrap_or_default();
            quantity_value("storage", q, "spec.resources[storage]", errs);
            if parse_quantity(s).is_ok_and(|v| v.0 == 0.0) {
                errs.push(Cause::invalid("spec.resources[storage]", s, "must be greater than zero"));
            }
        }
    }
    let sc = str_of(spec, "storageClassName");
    if !sc.is_empty() {
        for m in is_dns1123_subdomain(sc) {
            errs.push(Cause::invalid("spec.storageClassName", sc, &m));
        }
    }
    not_supported(spec, "volumeMode", "spec", &["Block", "Filesystem"], errs);
    if let Some(sel) = spec.get("selector").filter(|s| s.is_object()) {
        label_selector(sel, "spec.selector", errs);
    }
    if let Some(old) = old {
        let mut a = old.get("spec").cloned().unwrap_or(Value::Null);
        let mut b = spec.clone();
        for v in [&mut a, &mut b] {
            if let Some(m) = v.as_object_mut() {
                m.remove("volumeAttributesClassName");
                if let Some(r) = m.get_mut("resources").and_then(Value::as_object_mut) {
                    r.remove("requests");
                }
            }
        }
        // Binding fills in volumeName once.
        if str_of(&a, "volumeName").is_empty() {
            if let Some(m) = b.as_object_mut() {
                m.remove("volumeName");
            }
            if let Some(m) = a.as_object_mut() {
                m.remove("volumeName");
            }
        }
        if a != b {
            errs.push(Cause::forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            ));
        }
    }
}

fn event(obj: &Value, errs: &mut Vec<Cause>) {
    let involved = obj.get("involvedObject").unwrap_or(&Value::Null);
    let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let obj_ns = str_of(involved, "namespace");
    if !obj_ns.is_empty() && obj_ns != ns {
        errs.push(Cause::invalid("involvedObject.namespace", obj_ns, "does not match event.namespace"));
    }
    let ty = str_of(obj, "type");
    if !ty.is_empty() && !matches!(ty, "Normal" | "Warning") {
        errs.push(Cause::invalid("type", ty, "has invalid value: must be one of Normal, Warning"));
    }
}
