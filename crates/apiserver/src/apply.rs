//! Server-side apply, simplified.
//!
//! What a client sees matches upstream for the common cases: an apply
//! creates or merges (lists merge by the same keys as strategic merge), each
//! applier is recorded in `metadata.managedFields` (operation `Apply`,
//! `FieldsV1` sets in upstream's `f:`/`k:` notation), and a field a manager
//! applied before but leaves out of its next apply is removed, unless another
//! applier also sets it. Simplifications: `Update` operations record no
//! ownership, and appliers never conflict (as if every apply were `--force-conflicts`).

use serde_json::{json, Map, Value};

use crate::patch::{list_merge, strategic_merge};

/// Fields that identify the object rather than being owned.
fn skipped(path: &[&str], key: &str) -> bool {
    match path {
        [] => matches!(key, "apiVersion" | "kind" | "status"),
        ["metadata"] => {
            matches!(
                key,
                "name" | "namespace" | "uid" | "resourceVersion" | "managedFields" | "creationTimestamp" | "generation"
            )
        }
        _ => false,
    }
}

/// The `FieldsV1` set of the fields present in `v`.
pub fn field_set(v: &Value) -> Value {
    set_of(v, &mut Vec::new(), "")
}

fn set_of<'a>(v: &'a Value, path: &mut Vec<&'a str>, field: &str) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, child) in m {
                if skipped(path, k) {
                    continue;
                }
                path.push(k);
                let sub = set_of(child, path, k);
                path.pop();
                // An object whose every field is identity (metadata with only a name) owns nothing.
                let emptied =
                    child.as_object().is_some_and(|c| !c.is_empty()) && sub.as_object().is_some_and(Map::is_empty);
                if !emptied {
                    out.insert(format!("f:{k}"), sub);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let sample_port = items.first().and_then(|i| i.get("containerPort")).is_some();
            match list_merge(field, sample_port) {
                Some(Some(key)) => {
                    let mut out = Map::new();
                    for item in items {
                        let Some(k) = item.get(key) else { continue };
                        out.insert(format!("k:{}", json!({key: k})), set_of(item, path, ""));
                    }
                    Value::Object(out)
                }
                Some(None) => {
                    let out: Map<String, Value> = items.iter().map(|i| (format!("v:{i}"), json!({}))).collect();
                    Value::Object(out)
                }
                None => json!({}),
            }
        }
        _ => json!({}),
    }
}

/// `a` minus `b`: the leaves of `a` that `b` lacks.
fn difference(a: &Value, b: &Value) -> Value {
    let (Some(am), bm) = (a.as_object(), b.as_object()) else { return json!({}) };
    let mut out = Map::new();
    for (k, av) in am {
        match bm.and_then(|m| m.get(k)) {
            None => {
                out.insert(k.clone(), av.clone());
            }
            Some(bv) => {
                let d = difference(av, bv);
                if d.as_object().is_some_and(|m| !m.is_empty()) {
                    out.insert(k.clone(), d);
                }
            }
        }
    }
    Value::Object(out)
}

/// Removes from `obj` the fields named by `set` whose subtree is wholly in it.
fn remove(obj: &mut Value, set: &Value) {
    let Some(entries) = set.as_object() else { return };
    for (k, sub) in entries {
        let leaf = sub.as_object().is_none_or(Map::is_empty);
        if let Some(name) = k.strip_prefix("f:") {
            let Some(m) = obj.as_object_mut() else { continue };
            if leaf {
                m.remove(name);
            } else if let Some(child) = m.get_mut(name) {
                remove(child, sub);
                if child.as_object().is_some_and(Map::is_empty) || child.as_array().is_some_and(Vec::is_empty) {
                    m.remove(name);
                }
            }
        } else if let Some(key) = k.strip_prefix("k:") {
            let (Ok(Value::Object(want)), Some(items)) = (serde_json::from_str::<Value>(key), obj.as_array_mut())
            else {
                continue;
            };
            let matches = |i: &Value| want.iter().all(|(wk, wv)| i.get(wk) == Some(wv));
            let Some(pos) = items.iter().position(matches) else { continue };
            if !leaf {
                remove(&mut items[pos], sub);
            }
            // An element left with no fields (or only its key) is gone.
            let only_key = items[pos].as_object().is_none_or(|m| m.keys().all(|k| want.contains_key(k)));
            if leaf || only_key {
                items.remove(pos);
            }
        } else if let Some(val) = k.strip_prefix("v:") {
            if let (Ok(val), Some(items)) = (serde_json::from_str::<Value>(val), obj.as_array_mut()) {
                items.retain(|i| *i != val);
            }
        }
    }
}

/// Applies `applied` (the full intent of `manager`) to `live`.
pub fn apply(live: &Value, applied: &Value, manager: &str, api_version: &str, now: &str) -> Result<Value, String> {
    let entries: Vec<Value> =
        live.pointer("/metadata/managedFields").and_then(Value::as_array).cloned().unwrap_or_default();
    let is_mine = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
    };
    let new_set = field_set(applied);
    let mut base = live.clone();
    if let Some(prev) = entries.iter().find(|e| is_mine(e)).and_then(|e| e.get("fieldsV1")) {
        let mut dropped = difference(prev, &new_set);
        for other in
            entries.iter().filter(|e| !is_mine(e) && e.get("operation").and_then(Value::as_str) == Some("Apply"))
        {
            dropped = difference(&dropped, other.get("fieldsV1").unwrap_or(&Value::Null));
        }
        remove(&mut base, &dropped);
    }
    let mut out = strategic_merge(&base, applied)?;
    let mut managed: Vec<Value> = entries.into_iter().filter(|e| !is_mine(e)).collect();
    managed.push(json!({
        "manager": manager, "operation": "Apply", "apiVersion": api_version, "time": now,
        "fieldsType": "FieldsV1", "fieldsV1": new_set,
    }));
    if !out.get("metadata").is_some_and(Value::is_object) {
        out["metadata"] = json!({});
    }
    out["metadata"]["managedFields"] = Value::Array(managed);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_sets_use_upstream_notation() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "k"}]}});
        assert_eq!(
            field_set(&obj),
            json!({"f:metadata": {"f:labels": {"f:a": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {"f:image": {}, "f:name": {}}}, "f:tolerations": {}}})
        );
    }

    #[test]
    fn apply_creates_merges_and_drops_what_the_manager_stopped_applying() {
        let first =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let live = apply(&json!({}), &first, "kubectl", "v1", "t0").unwrap();
        assert_eq!(live["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(live["metadata"]["managedFields"][0]["fieldsV1"], json!({"f:data": {"f:a": {}, "f:b": {}}}));

        // Another applier owns c; an update (not tracked) adds d.
        let mut live = apply(&live, &json!({"data": {"c": "3"}}), "other", "v1", "t1").unwrap();
        live["data"]["d"] = json!("4");
        let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "9"}});
        let live = apply(&live, &second, "kubectl", "v1", "t2").unwrap();
        assert_eq!(live["data"], json!({"a": "9", "c": "3", "d": "4"}), "b was dropped by its only applier");
        let managers: Vec<&str> = live["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, ["other", "kubectl"]);
    }

    #[test]
    fn keyed_list_items_are_removed_by_key() {
        let a = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let live = apply(&json!({}), &a, "m", "v1", "t").unwrap();
        let b = json!({"spec": {"containers": [{"name": "a", "image": "x2"}]}});
        let live = apply(&live, &b, "m", "v1", "t").unwrap();
        assert_eq!(live["spec"]["containers"], json!([{"name": "a", "image": "x2"}]));
    }
}
