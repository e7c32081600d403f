//! `storage.k8s.io`: StorageClass, CSINode, CSIDriver, CSIStorageCapacity.

use ksched_framework::validation::{is_dns1123_subdomain, is_qualified_name};
use serde_json::{json, Value};

use super::{child, index, items, str_of};
use crate::error::Cause;

pub(super) fn validate(kind: &str, obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    match kind {
        "StorageClass" => storage_class(obj, old, errs),
        "CSINode" => csi_node(obj, errs),
        "CSIStorageCapacity" if str_of(obj, "storageClassName").is_empty() => {
            errs.push(Cause::required("storageClassName"));
        }
        _ => {}
    }
}

fn qualified(v: &str, path: &str, errs: &mut Vec<Cause>) {
    for m in is_qualified_name(v) {
        errs.push(Cause::invalid(path, v, &m));
    }
}

fn storage_class(obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    let provisioner = str_of(obj, "provisioner");
    if provisioner.is_empty() {
        errs.push(Cause::required("provisioner"));
    } else {
        qualified(&provisioner.to_lowercase(), "provisioner", errs);
    }
    if let Some(p) = obj.get("reclaimPolicy").filter(|p| p.as_str().is_some_and(|s| !s.is_empty())) {
        if !matches!(p.as_str(), Some("Delete" | "Recycle" | "Retain")) {
            errs.push(Cause::not_supported("reclaimPolicy", p, &["Delete", "Recycle", "Retain"]));
        }
    }
    match obj.get("volumeBindingMode").filter(|m| !m.is_null()) {
        None => errs.push(Cause::required("volumeBindingMode")),
        Some(m) if !matches!(m.as_str(), Some("Immediate" | "WaitForFirstConsumer")) => {
            errs.push(Cause::not_supported("volumeBindingMode", m, &["Immediate", "WaitForFirstConsumer"]))
        }
        Some(_) => {}
    }
    for (i, term) in items(obj, "allowedTopologies").iter().enumerate() {
        let p = index("allowedTopologies", i);
        let exprs = items(term, "matchLabelExpressions");
        if exprs.is_empty() {
            errs.push(Cause::required_because(
                child(&p, "matchLabelExpressions"),
                "must have at least one label expression",
            ));
        }
        for (j, e) in exprs.iter().enumerate() {
            let ep = index(&child(&p, "matchLabelExpressions"), j);
            qualified(str_of(e, "key"), &child(&ep, "key"), errs);
            if items(e, "values").is_empty() {
                errs.push(Cause::required_because(child(&ep, "values"), "must specify as least one value"));
            }
        }
    }
    if let Some(old) = old {
        for f in ["parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"] {
            if old.get(f) != obj.get(f) {
                errs.push(Cause::invalid_value(f, obj.get(f).unwrap_or(&json!(null)), "field is immutable"));
            }
        }
    }
}

fn csi_node(obj: &Value, errs: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut names: Vec<&str> = Vec::new();
    for (i, d) in items(spec, "drivers").iter().enumerate() {
        let p = index("spec.drivers", i);
        let name = str_of(d, "name");
        if name.is_empty() {
            errs.push(Cause::required(child(&p, "name")));
        } else if name.len() > 63 {
            errs.push(Cause::too_long(child(&p, "name"), 63));
        } else {
            for m in is_dns1123_subdomain(&name.to_lowercase()) {
                errs.push(Cause::invalid(child(&p, "name"), name, &m));
            }
        }
        if str_of(d, "nodeID").is_empty() {
            errs.push(Cause::required(child(&p, "nodeID")));
        }
        if let Some(count) = d.pointer("/allocatable/count").and_then(Value::as_i64) {
            if count < 0 {
                errs.push(Cause::invalid_value(
                    child(&child(&p, "allocatable"), "count"),
                    &json!(count),
                    "must be greater than or equal to 0",
                ));
            }
        }
        if names.contains(&name) {
            errs.push(Cause::duplicate(child(&p, "name"), name));
        }
        names.push(name);
        let mut keys: Vec<&str> = Vec::new();
        for k in items(d, "topologyKeys") {
            let k = k.as_str().unwrap_or_default();
            if k.is_empty() {
                errs.push(Cause::required(&p));
            }
            if keys.contains(&k) {
                errs.push(Cause::duplicate(&p, k));
            }
            keys.push(k);
            qualified(k, &p, errs);
        }
    }
}
