//! Every served kind round-trips JSON → protobuf → JSON, with a sample that
//! fills every field its schema has; and every field has a number.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::*;
use crate::resources::RESOURCES;

fn resolve<'a>(defs: &'a Map<String, Value>, s: &'a Value) -> (&'a Value, Option<&'a str>) {
    match s.get("$ref").and_then(Value::as_str).and_then(|r| r.rsplit('/').next()) {
        Some(n) => (defs.get(n).unwrap_or(s), Some(n)),
        None => (s, None),
    }
}

/// A value for schema `s` that exercises every field (recursion stops at `depth`).
pub(super) fn sample(defs: &Map<String, Value>, s: &Value, depth: usize) -> Value {
    let (s, name) = resolve(defs, s);
    match name.unwrap_or_default() {
        n if n.ends_with("resource.Quantity") => return json!("1500m"),
        n if n.ends_with("meta.v1.Time") => return json!("2024-05-06T07:08:09Z"),
        n if n.ends_with("meta.v1.MicroTime") => return json!("2024-05-06T07:08:09.123456Z"),
        n if n.ends_with("meta.v1.Duration") => return json!("1m30s"),
        n if n.ends_with("intstr.IntOrString") => return json!("50%"),
        n if n.ends_with("runtime.RawExtension") | n.ends_with("meta.v1.FieldsV1") => {
            return json!({"f:metadata": {"f:labels": {}}})
        }
        _ => {}
    }
    if s.get("x-kubernetes-preserve-unknown-fields").is_some() {
        return json!({"any": ["thing"]});
    }
    match s.get("type").and_then(Value::as_str) {
        Some("string") if s.get("format").and_then(Value::as_str) == Some("byte") => json!("aGVsbG8="),
        Some("string") => json!("text"),
        Some("integer") => json!(7),
        Some("number") => json!(0.5),
        Some("boolean") => json!(true),
        // Protobuf has no empty lists or maps: past the depth limit, leave fields out.
        Some("array") if depth > 0 => {
            let item = sample(defs, s.get("items").unwrap_or(&Value::Null), depth - 1);
            if item.is_null() {
                Value::Null
            } else {
                json!([item])
            }
        }
        Some("array") => Value::Null,
        _ => {
            if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                let v = if depth > 0 { sample(defs, ap, depth - 1) } else { Value::Null };
                return if v.is_null() { Value::Null } else { json!({"key": v}) };
            }
            let mut out = Map::new();
            if depth > 0 {
                // Nested TypeMeta has no protobuf field (upstream drops it too).
                let props = s.get("properties").and_then(Value::as_object).into_iter().flatten();
                for (k, p) in props.filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind")) {
                    let v = sample(defs, p, depth - 1);
                    if !v.is_null() {
                        out.insert(k.clone(), v);
                    }
                }
            }
            Value::Object(out)
        }
    }
}

fn served() -> impl Iterator<Item = &'static crate::resources::ResourceDef> {
    let mut seen = BTreeSet::new();
    RESOURCES.iter().filter(move |d| seen.insert((d.group, d.kind)))
}

#[test]
fn every_served_kind_round_trips_through_protobuf() {
    let defs = crate::openapi::schemas();
    for d in served() {
        let name = message_of(d);
        let mut obj = sample(defs, &defs[&name], 9);
        obj["apiVersion"] = json!(d.api_version());
        obj["kind"] = json!(d.kind);
        let bytes = encode_object(&obj).unwrap_or_else(|| panic!("{} encodes", d.kind));
        assert!(bytes.starts_with(MAGIC));
        let back = decode_object(&bytes).unwrap_or_else(|e| panic!("{} decodes: {e}", d.kind));
        let mut diffs = Vec::new();
        diff(&obj, &back, d.kind, &mut diffs);
        assert!(diffs.is_empty(), "{} does not round-trip:\n{}", d.kind, diffs.join("\n"));
    }
}

#[test]
fn every_served_field_has_a_number() {
    let defs = crate::openapi::schemas();
    let msgs = schema::messages();
    let mut missing = BTreeSet::new();
    let mut todo: Vec<String> = served().map(message_of).collect();
    let mut seen = BTreeSet::new();
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        let Some(m) = msgs.get(n.as_str()) else {
            missing.insert(format!("{n} (message)"));
            continue;
        };
        let Some(props) = defs.get(&n).and_then(|s| s.get("properties")).and_then(Value::as_object) else { continue };
        for (k, p) in props {
            if !covers(m, k) && !matches!(k.as_str(), "apiVersion" | "kind") {
                missing.insert(format!("{n}.{k}"));
            }
            let mut refs = Vec::new();
            collect_refs(p, &mut refs);
            todo.extend(refs.into_iter().filter(|r| !r.contains("intstr") && !r.contains("resource.Quantity")));
        }
    }
    assert!(
        missing.is_empty(),
        "fields without a protobuf number:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

fn collect_refs(s: &Value, out: &mut Vec<String>) {
    match s {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                out.push(r.rsplit('/').next().unwrap_or(r).to_string());
            }
            for v in m.values() {
                collect_refs(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn status_lists_and_watch_frames() {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "pods \"x\" not found", "reason": "NotFound", "details": {"name": "x", "kind": "pods"}, "code": 404});
    let b = encode_status(&status);
    let back = decode_object(&b).unwrap();
    assert_eq!(back, status);

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}});
    let item = codec::encode("io.k8s.api.core.v1.Pod", &pod);
    let list = encode_list("v1", "PodList", &json!({"resourceVersion": "12", "continue": "c"}), &[item.clone(), item]);
    let back = decode_object(&list).unwrap();
    assert_eq!(back["metadata"], json!({"resourceVersion": "12", "continue": "c"}));
    assert_eq!(back["items"][1]["metadata"]["name"], "p");

    let mut frame = Vec::new();
    watch_frame("ADDED", &encode_object(&pod).unwrap(), &mut frame);
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4);
    let ev = codec::decode("io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent", &frame[4..]).unwrap();
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"], pod, "the event's object is an enveloped Pod");
}

fn covers(m: &schema::MessageDesc, key: &str) -> bool {
    m.by_json(key).is_some()
        || m.fields.iter().any(|f| f.inline && schema::messages().get(&f.target).is_some_and(|t| covers(t, key)))
}

fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => diff(p, q, &format!("{path}.{k}"), out),
                    (p, q) => out.push(format!("{path}.{k}: {p:?} != {q:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(p, q, &format!("{path}[{i}]"), out);
            }
        }
        (p, q) if p != q => out.push(format!("{path}: {p} != {q}")),
        _ => {}
    }
}
