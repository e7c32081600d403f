//! PATCH bodies: JSON merge patch, JSON patch, and strategic merge patch.
//!
//! Strategic merge needs per-field list semantics that the real server reads
//! from Go struct tags. We approximate them by field name, which is exact for
//! everything kubectl and schedulers send (pod/node specs and statuses,
//! conditions, metadata).

use serde_json::{Map, Value};

/// The patch flavour, selected by the request Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/apply-patch+yaml` (server-side apply, approximated).
    Apply,
}

impl PatchKind {
    /// Maps a Content-Type (parameters ignored) to a patch kind.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let essence = ct.split(';').next().unwrap_or_default().trim();
        match essence {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

/// Applies a patch document of the given kind to `target`.
pub fn apply_patch(kind: PatchKind, target: &Value, patch: &Value) -> Result<Value, String> {
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err("merge patch body must be a JSON object".into());
            }
            let mut out = target.clone();
            json_patch::merge(&mut out, patch);
            Ok(out)
        }
        PatchKind::Json => {
            let ops: json_patch::Patch =
                serde_json::from_value(patch.clone()).map_err(|e| format!("invalid JSON patch: {e}"))?;
            let mut out = target.clone();
            // The copy is dropped on error, so json-patch's rollback is not needed; it is also
            // unsafe: undoing a move to the root panics (found by the patch fuzz target).
            json_patch::patch_unsafe(&mut out, &ops)
                .map_err(|e| format!("the JSON patch could not be applied: {e}"))?;
            Ok(out)
        }
        PatchKind::Strategic | PatchKind::Apply => strategic_merge(target, patch),
    }
}

/// How a list field merges.
enum ListStrategy {
    /// Merge object elements by this key.
    Key(&'static str),
    /// Set-union of primitive elements.
    Primitive,
    /// Replace wholesale.
    Replace,
}

fn list_strategy(field: &str, sample: Option<&Value>) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "resourceClaimStatuses"
        | "schedulingGates" => ListStrategy::Key("name"),
        "conditions" | "addresses" => ListStrategy::Key("type"),
        "volumeMounts" => ListStrategy::Key("mountPath"),
        "volumeDevices" => ListStrategy::Key("devicePath"),
        "hostAliases" | "podIPs" | "hostIPs" => ListStrategy::Key("ip"),
        "ownerReferences" => ListStrategy::Key("uid"),
        "topologySpreadConstraints" => ListStrategy::Key("topologyKey"),
        "ports" => {
            // Container ports merge by containerPort, Service ports by port.
            if sample.and_then(|s| s.get("containerPort")).is_some() {
                ListStrategy::Key("containerPort")
            } else {
                ListStrategy::Key("port")
            }
        }
        "finalizers" => ListStrategy::Primitive,
        _ => ListStrategy::Replace,
    }
}

/// How the server merges list `field` in a strategic merge patch, for
/// publishing in OpenAPI: `Some(Some(key))` merges elements by `key`,
/// `Some(None)` merges primitive elements as a set, `None` replaces the list.
pub(crate) fn list_merge(field: &str, container_ports: bool) -> Option<Option<&'static str>> {
    let sample = container_ports.then(|| serde_json::json!({"containerPort": 0}));
    match list_strategy(field, sample.as_ref()) {
        ListStrategy::Key(k) => Some(Some(k)),
        ListStrategy::Primitive => Some(None),
        ListStrategy::Replace => None,
    }
}

/// Applies a strategic merge patch (maps merge, keyed lists merge by key,
/// `$patch`, `$retainKeys`, `$deleteFromPrimitiveList/` and `$setElementOrder/`
/// directives).
pub fn strategic_merge(target: &Value, patch: &Value) -> Result<Value, String> {
    let Value::Object(p) = patch else {
        return Err("strategic merge patch body must be a JSON object".into());
    };
    let mut out = target.clone();
    if !out.is_object() {
        out = Value::Object(Map::new());
    }
    match merge_map(&mut out, p)? {
        true => Ok(out),
        false => Ok(Value::Object(Map::new())),
    }
}

/// Merges `patch` into `target` (an object). Returns false if the patch asks
/// for the whole map to be deleted.
fn merge_map(target: &mut Value, patch: &Map<String, Value>) -> Result<bool, String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(false),
        Some("replace") => {
            let mut m = patch.clone();
            m.remove("$patch");
            strip_directives(&mut m);
            *target = Value::Object(m);
            return Ok(true);
        }
        Some("merge") | None => {}
        Some(other) => return Err(format!("unknown patch type {other:?}")),
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return Ok(true);
    };
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (t.get_mut(field), v) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                t.remove(k);
            }
            Value::Object(pm) => {
                let slot = t.entry(k.clone()).or_insert_with(|| Value::Object(Map::new()));
                if !merge_map(slot, pm)? {
                    t.remove(k);
                }
            }
            Value::Array(pl) => {
                let merged = merge_list(k, t.get(k), pl)?;
                t.insert(k.clone(), merged);
            }
            other => {
                t.insert(k.clone(), other.clone());
            }
        }
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(true)
}

fn strip_directives(m: &mut Map<String, Value>) {
    m.retain(|k, _| !k.starts_with('$'));
    for v in m.values_mut() {
        match v {
            Value::Object(inner) => strip_directives(inner),
            Value::Array(items) => {
                for i in items {
                    if let Value::Object(inner) = i {
                        strip_directives(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

fn merge_list(field: &str, orig: Option<&Value>, patch: &[Value]) -> Result<Value, String> {
    let orig_items: Vec<Value> = orig.and_then(Value::as_array).cloned().unwrap_or_default();
    let replace_all = patch.iter().any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace"));
    let clean = |items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .filter(|e| e.get("$patch").is_none())
            .cloned()
            .map(|mut e| {
                if let Value::Object(m) = &mut e {
                    strip_directives(m);
                }
                e
            })
            .collect()
    };
    if replace_all {
        return Ok(Value::Array(clean(patch)));
    }
    match list_strategy(field, patch.first().or(orig_items.first())) {
        ListStrategy::Replace => Ok(Value::Array(clean(patch))),
        ListStrategy::Primitive => {
            let mut out = orig_items;
            for v in patch {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(Value::Array(out))
        }
        ListStrategy::Key(key) => {
            let mut out = orig_items;
            for pe in patch {
                let Value::Object(pm) = pe else {
                    // Not a list of objects after all: fall back to replacement.
                    return Ok(Value::Array(clean(patch)));
                };
                let Some(kv) = pm.get(key) else {
                    out.push(pe.clone());
                    continue;
                };
                let pos = out.iter().position(|o| o.get(key) == Some(kv));
                let delete = pm.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        out.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        if !merge_map(&mut out[i], pm)? {
                            out.remove(i);
                        }
                    }
                    (None, false) => {
                        let mut fresh = Value::Object(Map::new());
                        if merge_map(&mut fresh, pm)? {
                            out.push(fresh);
                        }
                    }
                }
            }
            Ok(Value::Array(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_merge_by_type() {
        let pod = json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "False"},
            {"type": "Ready", "status": "False"}
        ]}});
        let p = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "True", "reason": "x"}]}});
        let out = strategic_merge(&pod, &p).unwrap();
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "PodScheduled", "status": "True", "reason": "x"}, {"type": "Ready", "status": "False"}])
        );
    }

    #[test]
    fn containers_merge_by_name_tolerations_replace() {
        let pod = json!({"spec": {
            "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
            "tolerations": [{"key": "k1"}]
        }});
        let p = json!({"spec": {
            "containers": [{"name": "b", "image": "z"}],
            "tolerations": [{"key": "k2"}]
        }});
        let out = strategic_merge(&pod, &p).unwrap();
        assert_eq!(out["spec"]["containers"][1]["image"], "z");
        assert_eq!(out["spec"]["containers"][0]["image"], "x");
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "k2"}]));
    }

    #[test]
    fn directives() {
        let obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
                         "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let p = json!({
            "metadata": {"labels": {"a": null}, "$deleteFromPrimitiveList/finalizers": ["x"]},
            "spec": {"containers": [{"name": "a", "$patch": "delete"}], "$setElementOrder/containers": [{"name": "b"}]}
        });
        let out = strategic_merge(&obj, &p).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
        assert_eq!(out["spec"], json!({"containers": [{"name": "b"}]}));

        let p = json!({"spec": {"$patch": "replace", "x": 1}});
        assert_eq!(strategic_merge(&obj, &p).unwrap()["spec"], json!({"x": 1}));
        let p = json!({"spec": {"$retainKeys": ["y"], "y": 2}});
        assert_eq!(strategic_merge(&obj, &p).unwrap()["spec"], json!({"y": 2}));
    }

    #[test]
    fn merge_and_json_patch() {
        let obj = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        let out = apply_patch(PatchKind::Merge, &obj, &json!({"a": {"b": null}, "l": [3]})).unwrap();
        assert_eq!(out, json!({"a": {"c": 2}, "l": [3]}));
        let out = apply_patch(PatchKind::Json, &obj, &json!([{"op": "replace", "path": "/a/b", "value": 9}])).unwrap();
        assert_eq!(out["a"]["b"], 9);
        assert!(apply_patch(PatchKind::Json, &obj, &json!([{"op": "remove", "path": "/zz"}])).is_err());
        // A failing op after a move to the root: the error is returned, nothing panics.
        let pod = json!({"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}}});
        let ops = json!([
            {"op": "move", "from": "/metadata/labels/a", "path": ""},
            {"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/z"}
        ]);
        assert!(apply_patch(PatchKind::Json, &pod, &ops)
            .unwrap_err()
            .starts_with("the JSON patch could not be applied"));
        assert!(apply_patch(PatchKind::Merge, &obj, &json!([1])).is_err());
    }
}
