//! `application/vnd.kubernetes.protobuf`: the encoding client-go programs
//! (kube-scheduler, controllers, kubelets) use by default.
//!
//! A protobuf body is `k8s\0` followed by a `runtime.Unknown` envelope
//! (`typeMeta{apiVersion, kind}`, `raw` = the object's message). Lists are
//! `<Kind>List` messages, errors a `Status`, and watches stream
//! length-prefixed `WatchEvent` messages (no magic, no envelope) whose
//! `object.raw` holds an enveloped object. Objects are stored as JSON and
//! transcoded here ([`codec`]) using field numbers generated from the
//! k8s-pb crate ([`fields`], plus [`additions`] for v1.36 fields).

mod additions;
pub(crate) mod codec;
#[rustfmt::skip]
mod fields;
pub(crate) mod schema;
pub(crate) mod wire;

use serde_json::Value;

use self::wire::{put_bytes, put_msg, put_str, DecodeError, Field, Reader};
use crate::resources::{self, ResourceDef};

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The magic prefix of an enveloped protobuf object.
pub const MAGIC: &[u8; 4] = b"k8s\0";

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// The message name of `kind` in `apiVersion` (served kinds, their lists,
/// meta.k8s.io kinds such as Status and DeleteOptions, and Binding).
pub fn message_for(api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = resources::split_api_version(api_version);
    let pkg = match group {
        "" => "core",
        "meta.k8s.io" => return Some(format!("{META}.{kind}")),
        g => g.strip_suffix(".k8s.io").unwrap_or(g),
    };
    let name = format!("io.k8s.api.{pkg}.{version}.{kind}");
    if schema::messages().contains_key(name.as_str()) {
        return Some(name);
    }
    let meta = format!("{META}.{kind}");
    schema::messages().contains_key(meta.as_str()).then_some(meta)
}

/// The message name of a served resource's kind.
pub fn message_of(d: &ResourceDef) -> String {
    crate::openapi::definition_name(d)
}

/// Wraps a message in the `k8s\0` + `runtime.Unknown` envelope.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 32 + api_version.len() + kind.len());
    out.extend_from_slice(MAGIC);
    put_msg(&mut out, 1, |tm| {
        put_str(tm, 1, api_version);
        put_str(tm, 2, kind);
    });
    put_bytes(&mut out, 2, raw);
    put_str(&mut out, 3, "");
    put_str(&mut out, 4, "");
    out
}

/// Encodes a JSON object (with `apiVersion` and `kind`) as an enveloped message.
pub fn encode_object(obj: &Value) -> Option<Vec<u8>> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str)?;
    let kind = obj.get("kind").and_then(Value::as_str)?;
    let name = message_for(api_version, kind)?;
    Some(envelope(api_version, kind, &codec::encode(&name, obj)))
}

/// Splits an enveloped body into `(apiVersion, kind, raw)`.
pub fn open_envelope(b: &[u8]) -> Result<(String, String, &[u8]), DecodeError> {
    let Some(rest) = b.strip_prefix(MAGIC) else {
        return Err(DecodeError(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into(),
        ));
    };
    let (mut av, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut r = Reader::new(rest);
    while let Some((tag, f)) = r.next()? {
        match (tag, f) {
            (1, Field::Bytes(tm)) => {
                let mut tr = Reader::new(tm);
                while let Some((t, f)) = tr.next()? {
                    if let Field::Bytes(s) = f {
                        let s = String::from_utf8_lossy(s).into_owned();
                        match t {
                            1 => av = s,
                            2 => kind = s,
                            _ => {}
                        }
                    }
                }
            }
            (2, Field::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    Ok((av, kind, raw))
}

/// Decodes an enveloped object into JSON (with `apiVersion` and `kind`).
pub fn decode_object(b: &[u8]) -> Result<Value, DecodeError> {
    let (av, kind, raw) = open_envelope(b)?;
    let name = message_for(&av, &kind)
        .ok_or_else(|| DecodeError(format!("no kind {kind:?} is registered for version {av:?}")))?;
    let mut v = codec::decode(&name, raw)?;
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(av));
        m.insert("kind".into(), Value::String(kind));
    }
    Ok(v)
}

/// `RawExtension` payloads may themselves be enveloped objects.
pub(crate) fn decode_envelope_json(raw: &[u8]) -> Option<Value> {
    raw.starts_with(MAGIC).then(|| decode_object(raw).ok()).flatten()
}

/// A `<Kind>List` (or `PartialObjectMetadataList`): `metadata` and the
/// already-encoded item messages.
pub fn encode_list(api_version: &str, list_kind: &str, list_meta: &Value, items: &[Vec<u8>]) -> Vec<u8> {
    let name = message_for(api_version, list_kind).unwrap_or_default();
    let mut raw = Vec::with_capacity(items.iter().map(|i| i.len() + 4).sum::<usize>() + 64);
    put_msg(&mut raw, 1, |m| m.extend_from_slice(&codec::encode(&format!("{META}.ListMeta"), list_meta)));
    for item in items {
        put_bytes(&mut raw, 2, item);
    }
    let _ = name;
    envelope(api_version, list_kind, &raw)
}

/// A `Status` (errors and delete results) as an enveloped message.
pub fn encode_status(status: &Value) -> Vec<u8> {
    envelope("v1", "Status", &codec::encode(&format!("{META}.Status"), status))
}

/// One watch frame: a big-endian length, then a `WatchEvent` message whose
/// object is the enveloped `obj`.
pub fn watch_frame(event_type: &str, obj: &[u8], out: &mut Vec<u8>) {
    let mut ev = Vec::with_capacity(obj.len() + 16);
    put_str(&mut ev, 1, event_type);
    put_msg(&mut ev, 2, |raw| put_bytes(raw, 1, obj));
    out.extend_from_slice(&(ev.len() as u32).to_be_bytes());
    out.extend_from_slice(&ev);
}

#[cfg(test)]
mod tests;
