//! A located YAML/JSON document tree and a serde `Deserializer` over it that behaves like the
//! Kubernetes strict decoder: unknown fields are collected (with their JSON path and line) instead
//! of aborting, `null` means "unset", duplicate keys keep the last value, and type mismatches are
//! reported like Go's `encoding/json`.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::Spanned;

/// A parsed value with the 1-based line it starts on (0 when unknown).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub kind: NodeKind,
    pub line: usize,
}

/// A mapping entry: key, line of the key, value.
pub(crate) type Entry = (String, usize, Node);

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeKind {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

impl Node {
    /// A node without location.
    pub fn new(kind: NodeKind) -> Self {
        Node { kind, line: 0 }
    }

    /// The entries of a mapping node.
    pub fn entries(&self) -> Option<&[Entry]> {
        match &self.kind {
            NodeKind::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The last value for `key` in a mapping node (Go keeps the last duplicate).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries()?.iter().rev().find(|(k, _, _)| k == key).map(|(_, _, v)| v)
    }

    /// The string value, if this is a string node.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The JSON type name Go uses in unmarshal errors.
    fn json_kind(&self) -> &'static str {
        match self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "bool",
            NodeKind::Int(_) | NodeKind::UInt(_) | NodeKind::Float(_) => "number",
            NodeKind::Str(_) => "string",
            NodeKind::Seq(_) => "array",
            NodeKind::Map(_) => "object",
        }
    }

    /// Plain JSON (duplicates collapse to the last value).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Int(i) => Value::from(*i),
            NodeKind::UInt(u) => Value::from(*u),
            NodeKind::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
            NodeKind::Str(s) => Value::String(s.clone()),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeKind::Map(entries) => {
                let mut m = serde_json::Map::new();
                for (k, _, v) in entries {
                    m.insert(k.clone(), v.to_json());
                }
                Value::Object(m)
            }
        }
    }
}

/// A syntax error with its location.
#[derive(Debug, Clone)]
pub(crate) struct ParseError {
    pub message: String,
    pub line: Option<usize>,
}

struct RawNode(NodeKind);

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = RawNode;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E>(self) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::Null))
            }
            fn visit_none<E>(self) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<RawNode, D::Error> {
                RawNode::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::Int(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::UInt(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::Float(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::Str(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<RawNode, E> {
                Ok(RawNode(NodeKind::Str(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawNode, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<RawNode>>()? {
                    items.push(located(item));
                }
                Ok(RawNode(NodeKind::Seq(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNode, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    let value = map.next_value::<Spanned<RawNode>>()?;
                    entries.push((key.value, key.referenced.line() as usize, located(value)));
                }
                Ok(RawNode(NodeKind::Map(entries)))
            }
        }
        deserializer.deserialize_any(RawVisitor)
    }
}

fn located(s: Spanned<RawNode>) -> Node {
    Node { kind: s.value.0, line: s.referenced.line() as usize }
}

/// Parses YAML (or JSON, a YAML subset) keeping every duplicate key for the strict checks.
pub(crate) fn parse(bytes: &[u8]) -> Result<Node, ParseError> {
    let options = serde_saphyr::options! { duplicate_keys: serde_saphyr::DuplicateKeyPolicy::PassThrough };
    match serde_saphyr::from_slice_with_options::<Spanned<RawNode>>(bytes, options) {
        Ok(n) => Ok(located(n)),
        Err(e) => {
            Err(ParseError { message: e.without_snippet().to_string(), line: e.location().map(|l| l.line() as usize) })
        }
    }
}

/// Every repeated key in every mapping: (JSON path of the key, line of the repeat).
pub(crate) fn duplicate_keys(node: &Node) -> Vec<(String, usize)> {
    fn walk(node: &Node, path: &str, out: &mut Vec<(String, usize)>) {
        match &node.kind {
            NodeKind::Map(entries) => {
                for (i, (k, line, v)) in entries.iter().enumerate() {
                    let p = join(path, k);
                    if entries[..i].iter().any(|(prev, _, _)| prev == k) {
                        out.push((p.clone(), *line));
                    }
                    walk(v, &p, out);
                }
            }
            NodeKind::Seq(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(node, "", &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A decoding failure (a Go-style message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeError(pub String);

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError(msg.to_string())
    }
}

/// Unknown fields met while decoding: (JSON path, line).
#[derive(Default)]
pub(crate) struct Unknowns(RefCell<Vec<(String, usize)>>);

impl Unknowns {
    pub fn take(&self) -> Vec<(String, usize)> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

#[derive(Clone, Default)]
struct Loc {
    /// JSON path with indices (for unknown-field messages).
    json_path: String,
    /// Go struct holding the current field, and the dotted field path (for type errors).
    go_struct: Option<&'static str>,
    go_field: String,
}

/// Deserializes typed values out of a [`Node`], recording unknown fields in `unknowns`.
pub(crate) fn decode<'a, T: Deserialize<'a>>(node: &'a Node, unknowns: &'a Unknowns) -> Result<T, DeError> {
    T::deserialize(NodeDe { node, unknowns, loc: Loc::default() })
}

struct NodeDe<'a> {
    node: &'a Node,
    unknowns: &'a Unknowns,
    loc: Loc,
}

/// The Go type name printed for a Rust struct in unmarshal errors.
fn go_type_of(name: &str) -> String {
    match name {
        "LeaderElectionConfiguration" | "ClientConnectionConfiguration" => format!("v1alpha1.{name}"),
        "PluginRef" => "v1.Plugin".into(),
        "PluginConfigHead" => "v1.PluginConfig".into(),
        "ExtenderTlsConfig" => "v1.ExtenderTLSConfig".into(),
        _ => format!("v1.{name}"),
    }
}

fn go_struct_of(name: &'static str) -> &'static str {
    match name {
        "PluginRef" => "Plugin",
        "PluginConfigHead" => "PluginConfig",
        "ExtenderTlsConfig" => "ExtenderTLSConfig",
        _ => name,
    }
}

impl<'a> NodeDe<'a> {
    fn type_error(&self, value: &str, go_type: &str) -> DeError {
        match self.loc.go_struct {
            Some(st) if !self.loc.go_field.is_empty() => DeError(format!(
                "json: cannot unmarshal {value} into Go struct field {st}.{} of type {go_type}",
                self.loc.go_field
            )),
            _ => DeError(format!("json: cannot unmarshal {value} into Go value of type {go_type}")),
        }
    }

    fn mismatch(&self, go_type: &str) -> DeError {
        self.type_error(self.node.json_kind(), go_type)
    }

    /// An integral number as i128, or the Go error for a non-integral/non-number value.
    fn integer(&self, go_type: &str) -> Result<i128, DeError> {
        match self.node.kind {
            NodeKind::Null => Ok(0),
            NodeKind::Int(i) => Ok(i128::from(i)),
            NodeKind::UInt(u) => Ok(i128::from(u)),
            // YAML floats that are whole numbers become JSON integers in Go's YAML→JSON step.
            NodeKind::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1.8e19 => Ok(f as i128),
            NodeKind::Float(f) => Err(self.type_error(&format!("number {f}"), go_type)),
            _ => Err(self.mismatch(go_type)),
        }
    }

    fn child(&self, node: &'a Node, loc: Loc) -> NodeDe<'a> {
        NodeDe { node, unknowns: self.unknowns, loc }
    }
}

macro_rules! deserialize_int {
    ($method:ident, $visit:ident, $ty:ty, $go:literal) => {
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            let v = self.integer($go)?;
            let narrowed = <$ty>::try_from(v).map_err(|_| self.type_error(&format!("number {v}"), $go))?;
            visitor.$visit(narrowed)
        }
    };
}

impl<'de, 'a> Deserializer<'de> for NodeDe<'a> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_unit(),
            NodeKind::Bool(b) => visitor.visit_bool(*b),
            NodeKind::Int(i) => visitor.visit_i64(*i),
            NodeKind::UInt(u) => visitor.visit_u64(*u),
            NodeKind::Float(f) => visitor.visit_f64(*f),
            NodeKind::Str(s) => visitor.visit_str(s),
            NodeKind::Seq(_) => self.deserialize_seq(visitor),
            NodeKind::Map(entries) => {
                let items: Vec<(&'a str, &'a Node)> = entries.iter().map(|(k, _, v)| (k.as_str(), v)).collect();
                visitor.visit_map(EntryAccess { de: &self, items, pos: 0, struct_name: None })
            }
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node.kind {
            NodeKind::Null => visitor.visit_bool(false),
            NodeKind::Bool(b) => visitor.visit_bool(b),
            _ => Err(self.mismatch("bool")),
        }
    }

    deserialize_int!(deserialize_i8, visit_i8, i8, "int8");
    deserialize_int!(deserialize_i16, visit_i16, i16, "int16");
    deserialize_int!(deserialize_i32, visit_i32, i32, "int32");
    deserialize_int!(deserialize_i64, visit_i64, i64, "int64");
    deserialize_int!(deserialize_u8, visit_u8, u8, "uint8");
    deserialize_int!(deserialize_u16, visit_u16, u16, "uint16");
    deserialize_int!(deserialize_u32, visit_u32, u32, "uint32");
    deserialize_int!(deserialize_u64, visit_u64, u64, "uint64");

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node.kind {
            NodeKind::Null => visitor.visit_f32(0.0),
            NodeKind::Int(i) => visitor.visit_f32(i as f32),
            NodeKind::UInt(u) => visitor.visit_f32(u as f32),
            NodeKind::Float(f) => visitor.visit_f32(f as f32),
            _ => Err(self.mismatch("float32")),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node.kind {
            NodeKind::Null => visitor.visit_f64(0.0),
            NodeKind::Int(i) => visitor.visit_f64(i as f64),
            NodeKind::UInt(u) => visitor.visit_f64(u as f64),
            NodeKind::Float(f) => visitor.visit_f64(f),
            _ => Err(self.mismatch("float64")),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_str(""),
            NodeKind::Str(s) => visitor.visit_str(s),
            _ => Err(self.mismatch("string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node.kind {
            NodeKind::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_seq(ItemAccess { de: &self, items: &[], pos: 0 }),
            NodeKind::Seq(items) => visitor.visit_seq(ItemAccess { de: &self, items, pos: 0 }),
            _ => Err(self.mismatch("array")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_map(EntryAccess { de: &self, items: vec![], pos: 0, struct_name: None }),
            NodeKind::Map(entries) => {
                let items = last_wins(entries);
                visitor.visit_map(EntryAccess { de: &self, items, pos: 0, struct_name: None })
            }
            _ => Err(self.mismatch("map[string]string")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let entries: &[Entry] = match &self.node.kind {
            NodeKind::Null => &[],
            NodeKind::Map(entries) => entries,
            _ => return Err(self.mismatch(&go_type_of(name))),
        };
        let mut items = Vec::new();
        for (i, (k, line, v)) in entries.iter().enumerate() {
            if !fields.contains(&k.as_str()) {
                self.unknowns.0.borrow_mut().push((join(&self.loc.json_path, k), *line));
                continue;
            }
            let repeated_later = entries[i + 1..].iter().any(|(other, _, _)| other == k);
            // null leaves the field unset, as Go's decoder does
            if repeated_later || v.kind == NodeKind::Null {
                continue;
            }
            items.push((k.as_str(), v));
        }
        visitor.visit_map(EntryAccess { de: &self, items, pos: 0, struct_name: Some(go_struct_of(name)) })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, DeError> {
        Err(self.mismatch(name))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

fn last_wins(entries: &[Entry]) -> Vec<(&str, &Node)> {
    entries
        .iter()
        .enumerate()
        .filter(|(i, (k, _, _))| !entries[i + 1..].iter().any(|(other, _, _)| other == k))
        .map(|(_, (k, _, v))| (k.as_str(), v))
        .collect()
}

struct ItemAccess<'b, 'a> {
    de: &'b NodeDe<'a>,
    items: &'a [Node],
    pos: usize,
}

impl<'de, 'b, 'a> SeqAccess<'de> for ItemAccess<'b, 'a> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DeError> {
        let Some(item) = self.items.get(self.pos) else { return Ok(None) };
        let loc = Loc { json_path: format!("{}[{}]", self.de.loc.json_path, self.pos), ..self.de.loc.clone() };
        self.pos += 1;
        seed.deserialize(self.de.child(item, loc)).map(Some)
    }
}

struct EntryAccess<'b, 'a> {
    de: &'b NodeDe<'a>,
    items: Vec<(&'a str, &'a Node)>,
    pos: usize,
    struct_name: Option<&'static str>,
}

impl<'de, 'b, 'a> MapAccess<'de> for EntryAccess<'b, 'a> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DeError> {
        let Some((k, _)) = self.items.get(self.pos) else { return Ok(None) };
        seed.deserialize((*k).into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let (k, v) = self.items[self.pos];
        self.pos += 1;
        let parent = &self.de.loc;
        let loc = Loc {
            json_path: join(&parent.json_path, k),
            go_struct: self.struct_name.or(parent.go_struct),
            go_field: join(&parent.go_field, k),
        };
        seed.deserialize(self.de.child(v, loc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_lines_and_keeps_duplicates() {
        let n = parse(b"a: 1\nb:\n  c: first\n  c: second\n").unwrap();
        let dups = duplicate_keys(&n);
        assert_eq!(dups, vec![("b.c".to_string(), 4)]);
        assert_eq!(n.get("b").unwrap().get("c").unwrap().as_str(), Some("second"));
    }
}
