//! The message index the codec walks: field numbers and wire types from the
//! generated table ([`super::fields`]), JSON names from the OpenAPI schemas.

use std::collections::HashMap;
use std::sync::OnceLock;

/// A field's protobuf type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `string`.
    Str,
    /// `bytes` (base64 in JSON).
    Bytes,
    /// `int32`.
    I32,
    /// `int64` (and unsigned ints, which Kubernetes does not use on the wire).
    I64,
    /// `bool`.
    Bool,
    /// `double` (no served kind has one today).
    #[allow(dead_code)]
    F64,
    /// `float` (no served kind has one today).
    #[allow(dead_code)]
    F32,
    /// An embedded message (its name is the field's `target`).
    Msg,
    /// `map<string, V>` (message values name their type in `target`).
    Map(&'static Kind),
}

/// Cardinality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// Zero or one.
    Opt,
    /// A list.
    Rep,
}

/// One generated field entry: `(prost name, tag, kind, label, target message)`.
#[derive(Debug)]
pub struct ProtoField(pub &'static str, pub u32, pub Kind, pub Label, pub &'static str);

/// A field with its JSON name.
#[derive(Debug, Clone)]
pub struct FieldDesc {
    /// The JSON property name.
    pub json: String,
    /// Field number.
    pub tag: u32,
    /// Wire type.
    pub kind: Kind,
    /// Whether it repeats.
    pub repeated: bool,
    /// The embedded message, for messages and maps of messages.
    pub target: String,
    /// An embedded Go struct: its fields appear inline in the parent's JSON.
    pub inline: bool,
}

/// One message's fields, by JSON name and by number.
#[derive(Debug, Default)]
pub struct MessageDesc {
    /// Fields in declaration order.
    pub fields: Vec<FieldDesc>,
    by_tag: HashMap<u32, usize>,
}

impl MessageDesc {
    /// The (non-inline) field with JSON name `name`.
    #[cfg(test)]
    pub fn by_json(&self, name: &str) -> Option<&FieldDesc> {
        self.fields.iter().find(|f| !f.inline && f.json == name)
    }

    /// The field numbered `tag`.
    pub fn by_tag(&self, tag: u32) -> Option<&FieldDesc> {
        self.by_tag.get(&tag).map(|i| &self.fields[*i])
    }
}

fn normalize(s: &str) -> String {
    s.chars().filter(|c| *c != '_').flat_map(char::to_lowercase).collect()
}

fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in snake.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Every message the codec knows, by definition name (upstream's spelling:
/// prost renames `CSIDriverSpec` to `CsiDriverSpec`, the schemas do not).
pub fn messages() -> &'static HashMap<String, MessageDesc> {
    static INDEX: OnceLock<HashMap<String, MessageDesc>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let schemas = crate::openapi::schemas();
        let canonical: HashMap<String, &String> = schemas.keys().map(|k| (k.to_lowercase(), k)).collect();
        let canon = |n: &str| canonical.get(&n.to_lowercase()).map_or_else(|| n.to_string(), |k| (*k).clone());
        // Embedded Go structs (VolumeSource, ProbeHandler...) have no schema of their
        // own; their JSON names are spelled in the schemas that inline them.
        let mut any_prop: HashMap<String, &String> = HashMap::new();
        for s in schemas.values() {
            for k in s.get("properties").and_then(|p| p.as_object()).into_iter().flat_map(|p| p.keys()) {
                any_prop.entry(normalize(k)).or_insert(k);
            }
        }
        let mut out: HashMap<String, MessageDesc> = HashMap::new();
        for (name, fields) in super::fields::MESSAGES.iter().chain(super::additions::V1_36) {
            let name = canon(name);
            let props: HashMap<String, &String> = schemas
                .get(&name)
                .and_then(|s| s.get("properties"))
                .and_then(|p| p.as_object())
                .map(|p| p.keys().map(|k| (normalize(k), k)).collect())
                .unwrap_or_default();
            let m = out.entry(name).or_default();
            for ProtoField(snake, tag, kind, label, target) in fields.iter() {
                let known = props.get(&normalize(snake)).map(|k| (*k).clone());
                let inline = known.is_none() && !props.is_empty() && *kind == Kind::Msg;
                let json = known
                    .unwrap_or_else(|| any_prop.get(&normalize(snake)).map_or_else(|| camel(snake), |k| (*k).clone()));
                let target = if target.is_empty() { String::new() } else { canon(target) };
                m.fields.push(FieldDesc {
                    json,
                    tag: *tag,
                    kind: *kind,
                    repeated: *label == Label::Rep,
                    target,
                    inline,
                });
            }
        }
        for m in out.values_mut() {
            m.fields.sort_by_key(|f| f.tag);
            m.by_tag = m.fields.iter().enumerate().map(|(i, f)| (f.tag, i)).collect();
        }
        out
    })
}
