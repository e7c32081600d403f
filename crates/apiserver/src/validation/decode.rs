//! What kube-apiserver's decoder refuses before validation runs: values of
//! the wrong JSON type, malformed quantities, and (with
//! `fieldValidation=Strict`) unknown fields. The object is checked against
//! the same schemas `/openapi` publishes; unknown fields are dropped, as
//! decoding into the Go types drops them.

use serde_json::{Map, Value};

use super::quantity::parse_quantity;
use crate::error::{ApiError, Cause};
use crate::resources::ResourceDef;

/// The client's `fieldValidation` choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and warn (the server's default).
    #[default]
    Warn,
    /// Refuse objects with unknown fields (kubectl's default).
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter (unknown values fall back to the default, `Warn`).
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            _ => FieldValidation::Warn,
        }
    }
}

/// Checks and prunes `obj` as the decoder would; returns the warnings to send
/// (one per unknown field under `Warn`).
pub fn decode_check(
    d: &ResourceDef,
    defs: &Map<String, Value>,
    def_name: &str,
    obj: &mut Value,
    mode: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    let Some(schema) = defs.get(def_name) else {
        return Ok(Vec::new());
    };
    let mut w = Walker { defs, unknown: Vec::new(), bad: None };
    let cannot = |e: String| {
        ApiError::bad_request(format!("{} in version {:?} cannot be handled as a {}: {e}", d.kind, d.version, d.kind))
    };
    let short = def_name.rsplit('.').next().unwrap_or(def_name);
    if let Err(e) = w.walk(schema, obj, &mut Vec::new(), "", short) {
        let err = cannot(e.clone());
        return Err(match w.bad {
            Some((path, value)) => err.with_field_hint(Cause::invalid(path, &value, &e)),
            None => err,
        });
    }
    // apiVersion/kind/metadata are always known; everything else was checked above.
    let unknown: Vec<String> = w.unknown.iter().map(|p| format!("unknown field {p:?}")).collect();
    match mode {
        FieldValidation::Strict if !unknown.is_empty() => {
            Err(cannot(format!("strict decoding error: {}", unknown.join(", "))))
        }
        FieldValidation::Warn => Ok(unknown),
        _ => Ok(Vec::new()),
    }
}

struct Walker<'a> {
    defs: &'a Map<String, Value>,
    unknown: Vec<String>,
    /// The path and value of a malformed quantity.
    bad: Option<(String, String)>,
}

/// `spec.containers[0].resources.requests[cpu]` from path segments.
fn join(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if !out.is_empty() && !seg.starts_with('[') {
            out.push('.');
        }
        out.push_str(seg);
    }
    out
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

impl<'a> Walker<'a> {
    fn resolve(&self, schema: &'a Value) -> (&'a Value, Option<&'a str>) {
        let defs: &'a Map<String, Value> = self.defs;
        let r = schema
            .get("$ref")
            .or_else(|| schema.pointer("/allOf/0/$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next());
        match r.and_then(|n| defs.get_key_value(n).map(|(k, s)| (s, k.as_str()))) {
            Some((s, n)) => (s, Some(n)),
            None => (schema, None),
        }
    }

    fn go_type(&self, schema: &'a Value) -> String {
        let (s, name) = self.resolve(schema);
        if let Some(n) = name {
            let mut parts = n.rsplit('.');
            let kind = parts.next().unwrap_or(n);
            return format!("{}.{kind}", parts.next().unwrap_or("v1"));
        }
        match (s.get("type").and_then(Value::as_str), s.get("format").and_then(Value::as_str)) {
            (Some("integer"), Some(f)) => f.to_string(),
            (Some("integer"), None) => "int".into(),
            (Some("number"), _) => "float64".into(),
            (Some("boolean"), _) => "bool".into(),
            (Some("string"), _) => "string".into(),
            (Some("array"), _) => format!("[]{}", s.get("items").map(|i| self.go_type(i)).unwrap_or_default()),
            (Some("object"), _) => match s.get("additionalProperties") {
                Some(ap) if ap.is_object() => format!("map[string]{}", self.go_type(ap)),
                _ => "map[string]interface {}".into(),
            },
            _ => "interface {}".into(),
        }
    }

    /// `path` holds JSON path segments (with indices, for unknown-field
    /// messages); `field` the dotted Go field path (without indices).
    fn walk(
        &mut self,
        schema: &'a Value,
        v: &mut Value,
        path: &mut Vec<String>,
        field: &str,
        strukt: &str,
    ) -> Result<(), String> {
        if v.is_null() {
            return Ok(());
        }
        let (s, name) = self.resolve(schema);
        let strukt = name.and_then(|n| n.rsplit('.').next()).unwrap_or(strukt);
        let mismatch = |v: &Value, this: &Self| {
            Err(format!(
                "json: cannot unmarshal {} into Go struct field {strukt}.{field} of type {}",
                json_kind(v),
                this.go_type(schema)
            ))
        };
        if name.is_some_and(|n| n.ends_with("resource.Quantity")) {
            return match v {
                Value::String(q) => parse_quantity(q).map(|_| ()).map_err(|e| {
                    self.bad = Some((join(path), q.clone()));
                    e.to_string()
                }),
                Value::Number(_) => Ok(()),
                _ => mismatch(v, self),
            };
        }
        if s.get("x-kubernetes-int-or-string").is_some() || s.get("x-kubernetes-preserve-unknown-fields").is_some() {
            return Ok(());
        }
        let ty = s.get("type").and_then(Value::as_str).or_else(|| s.get("properties").map(|_| "object"));
        match ty {
            Some("string") if !v.is_string() => mismatch(v, self),
            Some("boolean") if !v.is_boolean() => mismatch(v, self),
            Some("number") if !v.is_number() => mismatch(v, self),
            Some("integer") => match v {
                Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
                Value::Number(n) => Err(format!(
                    "json: cannot unmarshal number {n} into Go struct field {strukt}.{field} of type {}",
                    self.go_type(schema)
                )),
                _ => mismatch(v, self),
            },
            Some("array") => {
                let Value::Array(items) = v else { return mismatch(v, self) };
                let Some(item_schema) = s.get("items") else { return Ok(()) };
                for (i, item) in items.iter_mut().enumerate() {
                    let last = path.pop().unwrap_or_default();
                    path.push(format!("{last}[{i}]"));
                    let r = self.walk(item_schema, item, path, field, strukt);
                    path.pop();
                    path.push(last);
                    r?;
                }
                Ok(())
            }
            Some("object") => {
                let Value::Object(m) = v else { return mismatch(v, self) };
                self.walk_object(s, m, path, field, strukt)
            }
            _ => Ok(()),
        }
    }

    fn walk_object(
        &mut self,
        s: &'a Value,
        m: &mut Map<String, Value>,
        path: &mut Vec<String>,
        field: &str,
        strukt: &str,
    ) -> Result<(), String> {
        let props = s.get("properties").and_then(Value::as_object);
        let additional = s.get("additionalProperties").filter(|a| a.is_object());
        let mut drop = Vec::new();
        for (k, child) in m.iter_mut() {
            let sub = props.and_then(|p| p.get(k)).or(additional);
            let Some(sub) = sub else {
                let top = path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind");
                if props.is_some() && !top {
                    path.push(k.clone());
                    self.unknown.push(join(path));
                    path.pop();
                    drop.push(k.clone());
                }
                continue;
            };
            let child_field = if additional.is_some() && props.is_none() {
                field.to_string()
            } else if field.is_empty() {
                k.clone()
            } else {
                format!("{field}.{k}")
            };
            path.push(if additional.is_some() && props.is_none() { format!("[{k}]") } else { k.clone() });
            let r = self.walk(sub, child, path, &child_field, strukt);
            path.pop();
            r?;
        }
        for k in drop {
            m.remove(&k);
        }
        Ok(())
    }
}
