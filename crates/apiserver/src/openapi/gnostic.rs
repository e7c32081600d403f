//! The protobuf form of `/openapi/v2`: gnostic's `openapi_v2.Document`
//! message, which is what kubectl and client-go decode. Field numbers follow
//! gnostic's OpenAPIv2.proto; only the parts our JSON document uses are
//! written (vendor extensions and defaults travel as YAML text, as there).

use serde_json::Value;

use crate::protobuf::wire::{put_bool, put_double, put_int, put_msg, put_str};

/// Encodes a Swagger 2.0 JSON document.
pub fn document(doc: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 << 20);
    if let Some(s) = doc.get("swagger").and_then(Value::as_str) {
        put_str(&mut out, 1, s);
    }
    if let Some(info) = doc.get("info") {
        put_msg(&mut out, 2, |m| {
            for (tag, f) in [(1, "title"), (2, "version"), (3, "description")] {
                if let Some(s) = info.get(f).and_then(Value::as_str) {
                    put_str(m, tag, s);
                }
            }
        });
    }
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        put_msg(&mut out, 8, |m| {
            for (name, item) in paths {
                put_msg(m, 2, |n| {
                    put_str(n, 1, name);
                    put_msg(n, 2, |p| path_item(p, item));
                });
            }
        });
    }
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        put_msg(&mut out, 9, |m| {
            for (name, s) in defs {
                named_schema(m, 1, name, s);
            }
        });
    }
    out
}

fn strs(out: &mut Vec<u8>, tag: u32, v: Option<&Value>) {
    for s in v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        put_str(out, tag, s);
    }
}

/// `Any{yaml}`: JSON text is valid YAML.
fn any(out: &mut Vec<u8>, tag: u32, v: &Value) {
    put_msg(out, tag, |m| put_str(m, 2, &v.to_string()));
}

/// `x-...` keys of an object as repeated `NamedAny`.
fn extensions(out: &mut Vec<u8>, tag: u32, obj: &Value) {
    for (k, v) in obj.as_object().into_iter().flatten().filter(|(k, _)| k.starts_with("x-")) {
        put_msg(out, tag, |m| {
            put_str(m, 1, k);
            any(m, 2, v);
        });
    }
}

fn path_item(out: &mut Vec<u8>, item: &Value) {
    for (tag, verb) in [(2, "get"), (3, "put"), (4, "post"), (5, "delete"), (8, "patch")] {
        if let Some(op) = item.get(verb) {
            put_msg(out, tag, |m| operation(m, op));
        }
    }
    for p in item.get("parameters").and_then(Value::as_array).into_iter().flatten() {
        put_msg(out, 9, |m| parameter(m, p));
    }
}

fn operation(out: &mut Vec<u8>, op: &Value) {
    for (tag, f) in [(2, "summary"), (3, "description"), (5, "operationId")] {
        if let Some(s) = op.get(f).and_then(Value::as_str) {
            put_str(out, tag, s);
        }
    }
    strs(out, 6, op.get("produces"));
    strs(out, 7, op.get("consumes"));
    for p in op.get("parameters").and_then(Value::as_array).into_iter().flatten() {
        put_msg(out, 8, |m| parameter(m, p));
    }
    if let Some(resps) = op.get("responses").and_then(Value::as_object) {
        put_msg(out, 9, |m| {
            for (code, r) in resps {
                put_msg(m, 1, |n| {
                    put_str(n, 1, code);
                    put_msg(n, 2, |v| {
                        put_msg(v, 1, |resp| {
                            put_str(resp, 1, r.get("description").and_then(Value::as_str).unwrap_or_default());
                            if let Some(s) = r.get("schema") {
                                put_msg(resp, 2, |si| put_msg(si, 1, |sm| schema(sm, s)));
                            }
                        });
                    });
                });
            }
        });
    }
    strs(out, 10, op.get("schemes"));
    extensions(out, 13, op);
}

/// `ParametersItem{parameter: Parameter{body | non_body{query | path}}}`.
fn parameter(out: &mut Vec<u8>, p: &Value) {
    let s = |f: &str| p.get(f).and_then(Value::as_str).unwrap_or_default();
    let required = p.get("required").and_then(Value::as_bool).unwrap_or(false);
    put_msg(out, 1, |param| match s("in") {
        "body" => put_msg(param, 1, |b| {
            put_str(b, 2, s("name"));
            put_str(b, 3, "body");
            put_bool(b, 4, required);
            if let Some(sc) = p.get("schema") {
                put_msg(b, 5, |m| schema(m, sc));
            }
        }),
        kind => put_msg(param, 2, |nb| {
            // (sub-schema tag, its `type` and `uniqueItems` field numbers)
            let (tag, ty, unique) = if kind == "path" { (4, 5, 19) } else { (3, 6, 20) };
            put_msg(nb, tag, |q| {
                put_bool(q, 1, required);
                put_str(q, 2, kind);
                if !s("description").is_empty() {
                    put_str(q, 3, s("description"));
                }
                put_str(q, 4, s("name"));
                put_str(q, ty, if s("type").is_empty() { "string" } else { s("type") });
                if p.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
                    put_bool(q, unique, true);
                }
            });
        }),
    });
}

fn named_schema(out: &mut Vec<u8>, tag: u32, name: &str, s: &Value) {
    put_msg(out, tag, |m| {
        put_str(m, 1, name);
        put_msg(m, 2, |v| schema(v, s));
    });
}

fn schema(out: &mut Vec<u8>, s: &Value) {
    let Some(obj) = s.as_object() else { return };
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        put_str(out, 1, r);
    }
    for (tag, f) in [(2, "format"), (3, "title"), (4, "description")] {
        if let Some(v) = obj.get(f).and_then(Value::as_str) {
            put_str(out, tag, v);
        }
    }
    if let Some(d) = obj.get("default") {
        any(out, 5, d);
    }
    for (tag, f) in [(7, "maximum"), (9, "minimum")] {
        if let Some(v) = obj.get(f).and_then(Value::as_f64) {
            put_double(out, tag, v);
        }
    }
    for (tag, f) in [(11, "maxLength"), (12, "minLength"), (14, "maxItems"), (15, "minItems")] {
        if let Some(v) = obj.get(f).and_then(Value::as_i64) {
            put_int(out, tag, v);
        }
    }
    if obj.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        put_bool(out, 16, true);
    }
    strs(out, 19, obj.get("required"));
    for e in obj.get("enum").and_then(Value::as_array).into_iter().flatten() {
        any(out, 20, e);
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(b)) => put_msg(out, 21, |m| put_bool(m, 2, *b)),
        Some(ap @ Value::Object(_)) => put_msg(out, 21, |m| put_msg(m, 1, |sm| schema(sm, ap))),
        _ => {}
    }
    match obj.get("type") {
        Some(Value::String(t)) => put_msg(out, 22, |m| put_str(m, 1, t)),
        Some(Value::Array(ts)) => put_msg(out, 22, |m| {
            for t in ts.iter().filter_map(Value::as_str) {
                put_str(m, 1, t);
            }
        }),
        _ => {}
    }
    if let Some(items) = obj.get("items") {
        put_msg(out, 23, |m| put_msg(m, 1, |sm| schema(sm, items)));
    }
    for a in obj.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        put_msg(out, 24, |m| schema(m, a));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        put_msg(out, 25, |m| {
            for (name, p) in props {
                named_schema(m, 1, name, p);
            }
        });
    }
    extensions(out, 31, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::wire::{Field, Reader};
    use serde_json::json;

    fn fields(b: &[u8]) -> Vec<(u32, Field<'_>)> {
        let mut r = Reader::new(b);
        let mut out = Vec::new();
        while let Some(f) = r.next().unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn definitions_and_extensions_use_gnostic_field_numbers() {
        let doc = json!({"swagger": "2.0", "definitions": {"io.k8s.api.core.v1.Pod": {
            "type": "object", "properties": {"spec": {"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec"}},
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}]}}});
        let pb = document(&doc);
        let top = fields(&pb);
        assert_eq!(top[0], (1, Field::Bytes(b"2.0")));
        let (9, Field::Bytes(defs)) = top[1] else { panic!("definitions") };
        let (1, Field::Bytes(named)) = fields(defs)[0] else { panic!("named schema") };
        let named = fields(named);
        assert_eq!(named[0], (1, Field::Bytes(b"io.k8s.api.core.v1.Pod")));
        let (2, Field::Bytes(schema)) = named[1] else { panic!("schema") };
        let s = fields(schema);
        let (22, Field::Bytes(ty)) = s[0] else { panic!("type {s:?}") };
        assert_eq!(fields(ty), [(1, Field::Bytes(&b"object"[..]))]);
        let (31, Field::Bytes(ext)) = s[2] else { panic!("extension {s:?}") };
        let ext = fields(ext);
        assert_eq!(ext[0], (1, Field::Bytes(&b"x-kubernetes-group-version-kind"[..])));
        let (2, Field::Bytes(any)) = ext[1] else { panic!("any") };
        let (2, Field::Bytes(yaml)) = fields(any)[0] else { panic!("yaml") };
        assert_eq!(serde_json::from_slice::<Value>(yaml).unwrap()[0]["kind"], "Pod");
    }
}
