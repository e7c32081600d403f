//! Object validation, as kube-apiserver's registry strategies run it on
//! create and update (and therefore on patch and server-side apply).
//!
//! Everything works on the object's JSON so that field paths name exactly
//! what the client sent (`spec.containers[0].resources.requests[cpu]`), and
//! the messages are upstream's, so a client sees the same `Invalid` (422)
//! Status from us as from a real API server.
//!
//! Layout: [`validate`] runs the generic `metadata` checks every kind gets
//! (`meta.rs`), then dispatches by API group to one file per group. A group
//! file exposes
//!
//! ```ignore
//! pub(super) fn validate(kind: &str, obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>)
//! ```
//!
//! where `old` is the stored object on update (`None` on create) and each
//! problem is pushed as a [`Cause`] (`Cause::required`, `Cause::invalid_value`,
//! `Cause::not_supported`, ...) with its field path built by [`child`],
//! [`index`] and [`key`]. Adding a group is a new file plus one arm in
//! [`validate`]'s `match`. The string formats (DNS names, label keys and
//! values) are `ksched_framework::validation`'s; [`names`] holds the name rules
//! and [`name_rule`] which one a kind uses.

mod coordination;
mod core;
pub mod decode;
mod meta;
pub mod names;
mod quantity;
pub(crate) mod resource;
mod scheduling;
mod storage;

use serde_json::Value;

pub use self::decode::FieldValidation;
pub use self::quantity::{parse_quantity, Quantity};
use crate::error::{ApiError, Cause};
use crate::resources::ResourceDef;

/// `parent.name`.
pub fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// `parent[i]`.
pub fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// `parent[key]` (map entries).
pub fn key(parent: &str, k: &str) -> String {
    format!("{parent}[{k}]")
}

/// `obj[field]` as a string, `""` when absent or not a string.
pub fn str_of<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// The string at JSON pointer `ptr`, if there is one.
pub fn str_at<'a>(obj: &'a Value, ptr: &str) -> Option<&'a str> {
    obj.pointer(ptr).and_then(Value::as_str)
}

/// The elements of an array field (empty when absent).
pub fn items<'a>(obj: &'a Value, field: &str) -> &'a [Value] {
    obj.get(field).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The entries of a map field, sorted by key (Go iterates maps randomly;
/// sorting keeps our messages stable).
pub fn entries<'a>(obj: &'a Value, field: &str) -> Vec<(&'a String, &'a Value)> {
    let mut out: Vec<(&String, &Value)> = obj.get(field).and_then(Value::as_object).into_iter().flatten().collect();
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

/// Which rule `metadata.name` follows for a kind.
pub fn name_rule(group: &str, kind: &str) -> names::NameFn {
    match (group, kind) {
        ("", "Namespace") => names::name_is_dns_label,
        ("", "Service") => names::name_is_dns1035_label,
        ("", "Event") | ("events.k8s.io", "Event") => names::name_is_dns_subdomain,
        ("authorization.k8s.io" | "authentication.k8s.io", _) => names::name_is_path_segment,
        _ => names::name_is_dns_subdomain,
    }
}

/// Validates an object of resource `d` being created (`old` is `None`) or
/// updated; returns every problem found, in upstream's order where it has one.
pub fn validate(d: &ResourceDef, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut errs = Vec::new();
    for field in ["metadata", "spec", "status"] {
        if obj.get(field).is_some_and(|v| !v.is_object() && !v.is_null()) {
            errs.push(Cause::invalid(field, "", "must be an object"));
        }
    }
    if !errs.is_empty() {
        return errs;
    }
    meta::validate(d, obj, old, &mut errs);
    match d.group {
        "" => core::validate(d.kind, obj, old, &mut errs),
        "scheduling.k8s.io" => scheduling::validate(d.kind, obj, old, &mut errs),
        "storage.k8s.io" => storage::validate(d.kind, obj, old, &mut errs),
        "coordination.k8s.io" => coordination::validate(d.kind, obj, old, &mut errs),
        "resource.k8s.io" => resource::validate(d.kind, obj, old, &mut errs),
        _ => {}
    }
    errs
}

/// The display name used in `Invalid` messages (`name`, else `generateName`).
pub fn display_name(obj: &Value) -> String {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    match str_of(meta, "name") {
        "" => str_of(meta, "generateName").to_string(),
        n => n.to_string(),
    }
}

/// Checks `obj` as the decoder would for resource `d` (types, quantities,
/// unknown fields, which are dropped); returns warnings for `Warn`.
pub fn decode(d: &ResourceDef, obj: &mut Value, mode: FieldValidation) -> Result<Vec<String>, ApiError> {
    decode::decode_check(d, crate::openapi::schemas(), &crate::openapi::definition_name(d), obj, mode)
}

/// Runs [`validate`] and turns any problem into upstream's 422 Status.
pub fn check(d: &ResourceDef, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let errs = validate(d, obj, old);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_in(d.group, d.kind, &display_name(obj), errs))
    }
}

#[cfg(test)]
mod tests;
