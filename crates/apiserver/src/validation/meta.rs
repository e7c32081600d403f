//! `metadata` checks every kind gets (upstream's ValidateObjectMeta).

use ksched_framework::validation::{is_qualified_name, is_valid_label_value};
use serde_json::Value;

use super::{child, entries, index, items, name_rule, names, str_of};
use crate::error::Cause;
use crate::resources::ResourceDef;

/// Annotations may hold at most this many bytes (keys plus values).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

pub(super) fn validate(d: &ResourceDef, obj: &Value, _old: Option<&Value>, errs: &mut Vec<Cause>) {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    let name_fn = name_rule(d.group, d.kind);
    let generate = str_of(meta, "generateName");
    if !generate.is_empty() {
        for msg in name_fn(generate, true) {
            errs.push(Cause::invalid("metadata.generateName", generate, &msg));
        }
    }
    let name = str_of(meta, "name");
    if name.is_empty() {
        if generate.is_empty() {
            errs.push(Cause::required_because("metadata.name", "name or generateName is required"));
        }
    } else {
        for msg in name_fn(name, false) {
            errs.push(Cause::invalid("metadata.name", name, &msg));
        }
    }
    if d.namespaced {
        let ns = str_of(meta, "namespace");
        if ns.is_empty() {
            errs.push(Cause::required("metadata.namespace"));
        }
        for msg in names::name_is_dns_label(ns, false).into_iter().filter(|_| !ns.is_empty()) {
            errs.push(Cause::invalid("metadata.namespace", ns, &msg));
        }
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64) {
        if g < 0 {
            errs.push(Cause::invalid_value("metadata.generation", &g.into(), "must be greater than or equal to 0"));
        }
    }
    for field in ["labels", "annotations"] {
        if let Some(m) = meta.get(field) {
            let ok = m.is_null() || m.as_object().is_some_and(|m| m.values().all(Value::is_string));
            if !ok {
                errs.push(Cause::invalid(
                    format!("metadata.{field}"),
                    "",
                    "must be a map of string keys to string values",
                ));
                return;
            }
        }
    }
    validate_labels(meta.get("labels").unwrap_or(&Value::Null), "metadata.labels", errs);
    validate_annotations(meta, errs);
    validate_owner_references(meta, errs);
    validate_finalizers(meta, errs);
    for (i, mf) in items(meta, "managedFields").iter().enumerate() {
        let p = index("metadata.managedFields", i);
        let op = str_of(mf, "operation");
        if !matches!(op, "Apply" | "Update") {
            errs.push(Cause::invalid(child(&p, "operation"), op, "must be `Apply` or `Update`"));
        }
        let ft = str_of(mf, "fieldsType");
        if !ft.is_empty() && ft != "FieldsV1" {
            errs.push(Cause::invalid(child(&p, "fieldsType"), ft, "must be `FieldsV1`"));
        }
    }
}

/// Label keys must be qualified names and values label values; errors name
/// the map itself, as upstream does.
pub fn validate_labels(labels: &Value, path: &str, errs: &mut Vec<Cause>) {
    let Some(m) = labels.as_object() else {
        return;
    };
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        for msg in is_qualified_name(k) {
            errs.push(Cause::invalid(path, k, &msg));
        }
        let v = m[k].as_str().unwrap_or_default();
        for msg in is_valid_label_value(v) {
            errs.push(Cause::invalid(path, v, &msg));
        }
    }
}

fn validate_annotations(meta: &Value, errs: &mut Vec<Cause>) {
    let mut total = 0usize;
    for (k, v) in entries(meta, "annotations") {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(Cause::invalid("metadata.annotations", k, &msg));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(Cause::too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

fn validate_owner_references(meta: &Value, errs: &mut Vec<Cause>) {
    let path = "metadata.ownerReferences";
    let mut controller: Option<String> = None;
    for r in items(meta, "ownerReferences") {
        let api_version = str_of(r, "apiVersion");
        let version = api_version.rsplit('/').next().unwrap_or_default();
        if version.is_empty() {
            errs.push(Cause::invalid(child(path, "apiVersion"), api_version, "version must not be empty"));
        }
        for f in ["kind", "name", "uid"] {
            if str_of(r, f).is_empty() {
                errs.push(Cause::invalid(child(path, f), "", "must not be empty"));
            }
        }
        if api_version == "v1" && str_of(r, "kind") == "Event" {
            errs.push(Cause::invalid_value(path, r, "/v1, Kind=Event is disallowed from being an owner"));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{}/{}", str_of(r, "kind"), str_of(r, "name"));
            match &controller {
                Some(first) => errs.push(Cause::invalid_value(
                    path,
                    meta.get("ownerReferences").unwrap_or(&Value::Null),
                    &format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"),
                )),
                None => controller = Some(this),
            }
        }
    }
}

fn validate_finalizers(meta: &Value, errs: &mut Vec<Cause>) {
    let path = "metadata.finalizers";
    let list = items(meta, "finalizers");
    for f in list {
        let f = f.as_str().unwrap_or_default();
        for msg in is_qualified_name(f) {
            errs.push(Cause::invalid(path, f, &msg));
        }
    }
    let has = |n: &str| list.iter().any(|f| f.as_str() == Some(n));
    if has("orphan") && has("foregroundDeletion") {
        errs.push(Cause::invalid_value(
            path,
            meta.get("finalizers").unwrap_or(&Value::Null),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}
