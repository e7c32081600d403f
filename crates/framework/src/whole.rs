//! A whole API object kept compact: its JSON text, decoded when something reads it.
//!
//! When extenders or out-of-tree plugins are configured the scheduler keeps each pod and node
//! whole beside the fields it reads ([`crate::pod::Pod::object`], [`crate::node::Node::object`]).
//! Decoded, k8s-openapi's types are mostly room for fields a given object does not set: a pod
//! as kube-apiserver writes it (its service-account token volume, volume mounts, a kubectl
//! last-applied annotation) took 21–23 KB of heap decoded, against 2 KB of JSON (measured with
//! `crates/scheduler/examples/object_cost.rs`). [`Whole`] keeps the JSON and decodes it on
//! demand: serializing it (what extenders are sent) decodes a copy for the occasion, so the
//! bytes sent are those the decoded object would give; reading a field through `Deref` decodes
//! it once and keeps the result.

use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};

/// An API object kept as its JSON text (see the module docs).
pub struct Whole<T> {
    json: Box<str>,
    decoded: OnceLock<Box<T>>,
}

impl<T: Serialize + DeserializeOwned> Whole<T> {
    /// `object`, encoded.
    pub fn new(object: &T) -> Self {
        let json = serde_json::to_string(object).expect("an API object encodes as JSON");
        Whole { json: json.into_boxed_str(), decoded: OnceLock::new() }
    }

    /// A decoded copy of the object.
    pub fn decode(&self) -> T {
        serde_json::from_str(&self.json).expect("an object decodes from the JSON it was encoded to")
    }

    /// The object's JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Changes the object (decodes it, applies `f`, keeps the result encoded).
    pub fn edit(&mut self, f: impl FnOnce(&mut T)) {
        let mut object = self.decode();
        f(&mut object);
        *self = Whole::new(&object);
    }
}

impl<T: Serialize + DeserializeOwned> Deref for Whole<T> {
    type Target = T;

    /// The object, decoded on the first read and kept from then on.
    fn deref(&self) -> &T {
        self.decoded.get_or_init(|| Box::new(self.decode()))
    }
}

impl<T> Clone for Whole<T> {
    /// The text only: a clone decodes again when read.
    fn clone(&self) -> Self {
        Whole { json: self.json.clone(), decoded: OnceLock::new() }
    }
}

impl<T> PartialEq for Whole<T> {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
    }
}

impl<T> fmt::Debug for Whole<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Whole").field(&self.json).finish()
    }
}

impl<T: Serialize + DeserializeOwned> Serialize for Whole<T> {
    /// As the decoded object serializes; a copy is decoded for it unless one is kept already.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.decoded.get() {
            Some(object) => object.serialize(s),
            None => self.decode().serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1 as api;
    use serde_json::json;

    fn pod() -> api::Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}],
                "volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}}))
        .unwrap()
    }

    #[test]
    fn serializes_and_reads_as_the_object() {
        let whole = Whole::new(&pod());
        assert_eq!(serde_json::to_string(&whole).unwrap(), serde_json::to_string(&pod()).unwrap());
        assert!(whole.decoded.get().is_none(), "serializing keeps no decoded copy");
        assert_eq!(whole.decode(), pod());
        assert_eq!(whole.spec, pod().spec);
        assert!(whole.decoded.get().is_some(), "a read keeps what it decoded");
        assert_eq!(serde_json::to_string(&whole).unwrap(), serde_json::to_string(&pod()).unwrap());
    }

    #[test]
    fn edits_are_kept() {
        let mut whole = Whole::new(&pod());
        let _ = whole.metadata.name.as_deref();
        whole.edit(|p| p.metadata.resource_version = Some("7".into()));
        assert_eq!(whole.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(whole.clone(), whole);
    }
}
