//! `resource.k8s.io`: ResourceClaim, ResourceClaimTemplate, DeviceClass, ResourceSlice.
//! Defaulting (`allocationMode: ExactCount`, `count: 1`, toleration operator `Equal`) and
//! the validation a user meets most: request shapes, class names, CEL selectors (compiled
//! with the scheduler's DRA environment, cost limit included), constraints, pool and
//! node selection of slices, device names and attributes.

use std::collections::BTreeSet;

use ksched_framework::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};
use serde_json::{json, Value};

use super::{child, entries, index, items, key, str_of};
use crate::error::Cause;

/// Applies the API's defaults to a new object of `kind`.
pub(crate) fn default(kind: &str, mut obj: Value) -> Value {
    let devices = match kind {
        "ResourceClaim" => obj.pointer_mut("/spec/devices"),
        "ResourceClaimTemplate" => obj.pointer_mut("/spec/spec/devices"),
        _ => None,
    };
    let Some(devices) = devices else { return obj };
    for r in devices.get_mut("requests").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(e) = r.get_mut("exactly").filter(|e| e.is_object()) {
            default_request(e);
        }
        for s in r.get_mut("firstAvailable").and_then(Value::as_array_mut).into_iter().flatten() {
            default_request(s);
        }
    }
    obj
}

fn default_request(r: &mut Value) {
    if r.get("allocationMode").is_none_or(Value::is_null) {
        r["allocationMode"] = json!("ExactCount");
    }
    if r["allocationMode"] == "ExactCount" && r.get("count").is_none_or(Value::is_null) {
        r["count"] = json!(1);
    }
    for t in r.get_mut("tolerations").and_then(Value::as_array_mut).into_iter().flatten() {
        if t.get("operator").is_none_or(Value::is_null) {
            t["operator"] = json!("Equal");
        }
    }
}

pub(super) fn validate(kind: &str, obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    match kind {
        "ResourceClaim" => {
            if let Some(old) = old {
                if old.get("spec") != obj.get("spec") {
                    errs.push(Cause::invalid_value(
                        "spec",
                        obj.get("spec").unwrap_or(&Value::Null),
                        "field is immutable",
                    ));
                }
                return;
            }
            device_claim(obj.pointer("/spec/devices").unwrap_or(&Value::Null), "spec.devices", errs);
        }
        "ResourceClaimTemplate" => {
            device_claim(obj.pointer("/spec/spec/devices").unwrap_or(&Value::Null), "spec.spec.devices", errs);
        }
        "DeviceClass" => {
            let spec = obj.get("spec").unwrap_or(&Value::Null);
            selectors(spec, "spec.selectors", errs);
            if let Some(ern) = spec.get("extendedResourceName").and_then(Value::as_str) {
                if !ksched_framework_extended(ern) {
                    errs.push(Cause::invalid(
                        "spec.extendedResourceName",
                        ern,
                        "must be a valid extended resource name",
                    ));
                }
            }
        }
        "ResourceSlice" => slice(obj.get("spec").unwrap_or(&Value::Null), errs),
        _ => {}
    }
}

/// Extended resource names: a domain-qualified name outside `kubernetes.io` (and not
/// `requests.`-prefixed).
fn ksched_framework_extended(name: &str) -> bool {
    let Some((domain, _)) = name.split_once('/') else { return false };
    !domain.contains("kubernetes.io") && !name.starts_with("requests.") && is_qualified_name(name).is_empty()
}

/// Request and subrequest names of a claim, as constraints and configs refer to them.
fn request_names(devices: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in items(devices, "requests") {
        let name = str_of(r, "name");
        out.insert(name.to_string());
        for s in items(r, "firstAvailable") {
            out.insert(format!("{name}/{}", str_of(s, "name")));
        }
    }
    out
}

fn device_claim(devices: &Value, path: &str, errs: &mut Vec<Cause>) {
    let requests_path = child(path, "requests");
    let mut seen = BTreeSet::new();
    for (i, r) in items(devices, "requests").iter().enumerate() {
        let rp = index(&requests_path, i);
        let name = str_of(r, "name");
        label(name, &child(&rp, "name"), errs);
        if !name.is_empty() && !seen.insert(name) {
            errs.push(Cause::duplicate(child(&rp, "name"), name));
        }
        let exactly = r.get("exactly").filter(|v| !v.is_null());
        let first = items(r, "firstAvailable");
        match (exactly, first.is_empty()) {
            (None, true) => {
                errs.push(Cause::required_because(&rp, "exactly one of `exactly` or `firstAvailable` is required"))
            }
            (Some(_), false) => errs.push(Cause::invalid_value(
                &rp,
                &Value::Null,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )),
            (Some(e), true) => request(e, &child(&rp, "exactly"), errs),
            (None, false) => {
                let fp = child(&rp, "firstAvailable");
                let mut sub_seen = BTreeSet::new();
                for (j, s) in first.iter().enumerate() {
                    let sp = index(&fp, j);
                    let sname = str_of(s, "name");
                    label(sname, &child(&sp, "name"), errs);
                    if !sname.is_empty() && !sub_seen.insert(sname) {
                        errs.push(Cause::duplicate(child(&sp, "name"), sname));
                    }
                    request(s, &sp, errs);
                }
            }
        }
    }
    let names = request_names(devices);
    for (i, c) in items(devices, "constraints").iter().enumerate() {
        let cp = index(&child(path, "constraints"), i);
        for (j, r) in items(c, "requests").iter().enumerate() {
            let r = r.as_str().unwrap_or_default();
            if !names.contains(r) {
                errs.push(Cause::invalid(
                    index(&child(&cp, "requests"), j),
                    r,
                    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
                ));
            }
        }
        let m = c.get("matchAttribute").and_then(Value::as_str);
        let d = c.get("distinctAttribute").and_then(Value::as_str);
        match (m, d) {
            (Some(_), Some(_)) => errs.push(Cause::required_because(
                &cp,
                r#"exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set"#,
            )),
            (None, None) => errs.push(Cause::required(child(&cp, "matchAttribute"))),
            (Some(a), None) => qualified(a, &child(&cp, "matchAttribute"), errs),
            (None, Some(a)) => qualified(a, &child(&cp, "distinctAttribute"), errs),
        }
    }
    for (i, c) in items(devices, "config").iter().enumerate() {
        let cp = index(&child(path, "config"), i);
        for (j, r) in items(c, "requests").iter().enumerate() {
            let r = r.as_str().unwrap_or_default();
            if !names.contains(r) {
                errs.push(Cause::invalid(
                    index(&child(&cp, "requests"), j),
                    r,
                    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
                ));
            }
        }
        if c.get("opaque").is_none_or(Value::is_null) {
            errs.push(Cause::required(child(&cp, "opaque")));
        }
    }
}

fn request(r: &Value, path: &str, errs: &mut Vec<Cause>) {
    let class = str_of(r, "deviceClassName");
    let cp = child(path, "deviceClassName");
    if class.is_empty() {
        errs.push(Cause::required(cp));
    } else {
        for msg in is_dns1123_subdomain(class) {
            errs.push(Cause::invalid(&cp, class, &msg));
        }
    }
    selectors(r, &child(path, "selectors"), errs);
    let mode = r.get("allocationMode").cloned().unwrap_or(Value::Null);
    let count = r.get("count").and_then(Value::as_i64).unwrap_or(0);
    match mode.as_str() {
        Some("All") if count != 0 => errs.push(Cause::invalid_value(
            child(path, "count"),
            &count.into(),
            "must not be specified when allocationMode is 'All'",
        )),
        Some("All") => {}
        Some("ExactCount") if count <= 0 => {
            errs.push(Cause::invalid_value(child(path, "count"), &count.into(), "must be greater than zero"))
        }
        Some("ExactCount") => {}
        _ => errs.push(Cause::not_supported(child(path, "allocationMode"), &mode, &["All", "ExactCount"])),
    }
    for (i, t) in items(r, "tolerations").iter().enumerate() {
        let tp = index(&child(path, "tolerations"), i);
        let op = t.get("operator").cloned().unwrap_or(Value::Null);
        match op.as_str() {
            Some("Exists") if !str_of(t, "value").is_empty() => errs.push(Cause::invalid(
                child(&tp, "value"),
                str_of(t, "value"),
                "must be empty for operator `Exists`",
            )),
            Some("Exists" | "Equal") => {}
            None | Some("") => errs.push(Cause::required(child(&tp, "operator"))),
            _ => errs.push(Cause::not_supported(child(&tp, "operator"), &op, &["Equal", "Exists"])),
        }
        if let Some(e) = t.get("effect").filter(|e| !e.is_null() && e.as_str() != Some("")) {
            if !matches!(e.as_str(), Some("NoSchedule" | "NoExecute" | "None")) {
                errs.push(Cause::not_supported(child(&tp, "effect"), e, &["NoExecute", "NoSchedule", "None"]));
            }
        }
    }
}

/// CEL selectors, compiled as the scheduler will run them.
fn selectors(parent: &Value, path: &str, errs: &mut Vec<Cause>) {
    for (i, s) in items(parent, "selectors").iter().enumerate() {
        let sp = index(path, i);
        let Some(cel) = s.get("cel").filter(|c| !c.is_null()) else {
            errs.push(Cause::required(child(&sp, "cel")));
            continue;
        };
        let expr = str_of(cel, "expression");
        let ep = child(&child(&sp, "cel"), "expression");
        if expr.len() > ksched_dra::cel::SELECTOR_MAX_LENGTH {
            errs.push(Cause::too_long(ep, ksched_dra::cel::SELECTOR_MAX_LENGTH));
            continue;
        }
        let compiled = ksched_dra::cel::compile(expr);
        match &compiled.error {
            Some(e) if expr.is_empty() => errs.push(Cause::required_because(&ep, &e.detail)),
            Some(e) => errs.push(Cause::invalid(&ep, expr, &e.detail)),
            None if compiled.max_cost > ksched_dra::cel::SELECTOR_MAX_COST => {
                errs.push(Cause::forbidden(ep, "too complex, exceeds cost limit"))
            }
            None => {}
        }
    }
}

fn label(name: &str, path: &str, errs: &mut Vec<Cause>) {
    if name.is_empty() {
        errs.push(Cause::required(path));
        return;
    }
    for msg in is_dns1123_label(name) {
        errs.push(Cause::invalid(path, name, &msg));
    }
}

fn qualified(name: &str, path: &str, errs: &mut Vec<Cause>) {
    if !name.contains('/') {
        errs.push(Cause::invalid(
            path,
            name,
            "a fully qualified name must be a domain and a name separated by a slash",
        ));
    }
}

fn slice(spec: &Value, errs: &mut Vec<Cause>) {
    let driver = str_of(spec, "driver");
    if driver.is_empty() {
        errs.push(Cause::required("spec.driver"));
    } else {
        for msg in is_dns1123_subdomain(driver) {
            errs.push(Cause::invalid("spec.driver", driver, &msg));
        }
    }
    let pool = spec.get("pool").unwrap_or(&Value::Null);
    let name = str_of(pool, "name");
    if name.is_empty() {
        errs.push(Cause::required("spec.pool.name"));
    }
    let count = pool.get("resourceSliceCount").and_then(Value::as_i64).unwrap_or(0);
    if count <= 0 {
        errs.push(Cause::invalid_value("spec.pool.resourceSliceCount", &count.into(), "must be greater than zero"));
    }
    let generation = pool.get("generation").and_then(Value::as_i64).unwrap_or(0);
    if generation < 0 {
        errs.push(Cause::invalid_value(
            "spec.pool.generation",
            &generation.into(),
            "must be greater than or equal to zero",
        ));
    }
    let set: Vec<&str> = [
        ("`nodeName`", spec.get("nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty())),
        ("`nodeSelector`", spec.get("nodeSelector").is_some_and(|v| !v.is_null())),
        ("`allNodes`", spec.get("allNodes").and_then(Value::as_bool) == Some(true)),
        ("`perDeviceNodeSelection`", spec.get("perDeviceNodeSelection").and_then(Value::as_bool) == Some(true)),
    ]
    .into_iter()
    .filter_map(|(n, on)| on.then_some(n))
    .collect();
    if spec.get("nodeName").and_then(Value::as_str) == Some("") {
        errs.push(Cause::invalid("spec.nodeName", "", "must be either unset or set to a non-empty string"));
    }
    let devices = items(spec, "devices");
    match set.len() {
        0 => errs.push(Cause::required_because(
            "spec",
            "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
        )),
        1 => {}
        _ => errs.push(Cause::invalid(
            "spec",
            &format!("{{{}}}", set.join(", ")),
            "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
        )),
    }
    if spec.get("sharedCounters").is_some_and(|v| !v.is_null()) && spec.get("devices").is_some_and(|v| !v.is_null()) {
        errs.push(Cause::invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"));
    }
    let mut seen = BTreeSet::new();
    for (i, d) in devices.iter().enumerate() {
        let dp = index("spec.devices", i);
        let dname = str_of(d, "name");
        label(dname, &child(&dp, "name"), errs);
        if !dname.is_empty() && !seen.insert(dname) {
            errs.push(Cause::duplicate(child(&dp, "name"), dname));
        }
        for (k, a) in entries(d, "attributes") {
            let ap = key(&child(&dp, "attributes"), k);
            let values: Vec<&str> = ["int", "bool", "string", "version"]
                .into_iter()
                .filter(|f| a.get(*f).is_some_and(|v| !v.is_null()))
                .collect();
            if values.is_empty() {
                errs.push(Cause::invalid(&ap, "", "exactly one value must be specified"));
            } else if values.len() > 1 {
                errs.push(Cause::invalid_value(&ap, a, "exactly one value must be specified"));
            }
            if let Some(v) = a.get("version").and_then(Value::as_str) {
                if ksched_dra::semver::Version::parse(v).is_err() {
                    errs.push(Cause::invalid(
                        child(&ap, "version"),
                        v,
                        "must be a string compatible with semver.org spec 2.0.0",
                    ));
                }
            }
        }
        for (k, c) in entries(d, "capacity") {
            let v = c.get("value").and_then(Value::as_str).unwrap_or_default();
            if ksched_dra::quantity::Quantity::parse(v).is_err() {
                errs.push(Cause::invalid(
                    child(&key(&child(&dp, "capacity"), k), "value"),
                    v,
                    "must be a valid quantity",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::validate;
    use crate::resources::{by_kind, def};

    fn claim(requests: Value) -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": requests}}})
    }

    fn first_cause(obj: &Value) -> Option<String> {
        let d = def(by_kind(obj["apiVersion"].as_str().unwrap(), obj["kind"].as_str().unwrap()).unwrap());
        let obj = super::default(d.kind, obj.clone());
        validate(d, &obj, None).first().map(|c| c.render())
    }

    #[test]
    fn claims_are_defaulted_then_validated_with_field_paths() {
        let ok = claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]));
        assert_eq!(first_cause(&ok), None);
        let defaulted = super::default("ResourceClaim", ok);
        assert_eq!(defaulted.pointer("/spec/devices/requests/0/exactly/allocationMode"), Some(&json!("ExactCount")));
        assert_eq!(defaulted.pointer("/spec/devices/requests/0/exactly/count"), Some(&json!(1)));
        let cases = [
            (json!([{"name": "gpu"}]), "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"),
            (json!([{"name": "gpu", "exactly": {}}]), "spec.devices.requests[0].exactly.deviceClassName: Required value"),
            (json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 0}}]), "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero"),
            (json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}}]),
                "spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\""),
            (json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": "device.driver =="}}]}}]),
                "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed: ERROR: <input>:1:17: Syntax error"),
            (json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression":
                "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, device.attributes.all(d, a != b))))"}}]}}]),
                "spec.devices.requests[0].exactly.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"),
            (json!([{"name": "Bad_Name", "exactly": {"deviceClassName": "gpu"}}]), "spec.devices.requests[0].name: Invalid value: \"Bad_Name\""),
        ];
        for (requests, want) in cases {
            let got = first_cause(&claim(requests.clone())).unwrap_or_default();
            assert!(got.starts_with(want), "{requests}: got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn slices_need_one_node_selection_and_unique_devices() {
        let slice = |spec: Value| json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": spec});
        let pool = json!({"name": "p", "generation": 0, "resourceSliceCount": 1});
        assert_eq!(
            first_cause(&slice(
                json!({"driver": "gpu.example.com", "pool": pool, "nodeName": "n1", "devices": [{"name": "d0"}]})
            )),
            None
        );
        assert_eq!(
            first_cause(&slice(json!({"driver": "gpu.example.com", "pool": pool, "devices": []}))).unwrap(),
            "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
        );
        assert_eq!(
            first_cause(&slice(json!({"driver": "gpu.example.com", "pool": pool, "allNodes": true, "devices": [{"name": "d"}, {"name": "d"}]}))).unwrap(),
            "spec.devices[1].name: Duplicate value: \"d\""
        );
    }
}
