//! JSON ⇄ Kubernetes protobuf, message by message.
//!
//! Objects stay JSON in the store; this transcodes them at the edge, walking
//! the message index. A few apimachinery types have a JSON form unlike their
//! message (Quantity, Time, MicroTime, Duration, IntOrString, RawExtension,
//! FieldsV1, ExtraValue) and are special-cased by name, as upstream's
//! hand-written marshalers do.

use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde_json::{Map, Number, Value};

use super::schema::{messages, FieldDesc, Kind};
use super::wire::{
    self, put_bool, put_bytes, put_double, put_int, put_key, put_msg, put_str, DecodeError, Field, Reader,
};

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Duration";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const FIELDS_V1: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1";

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// Encodes `v` as message `name` (no envelope).
pub fn encode(name: &str, v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    encode_into(name, v, &mut out);
    out
}

fn encode_into(name: &str, v: &Value, out: &mut Vec<u8>) {
    match name {
        QUANTITY => {
            let s = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            put_str(out, 1, &s);
            return;
        }
        TIME | MICRO_TIME => {
            if let Some(t) = v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()) {
                put_int(out, 1, t.timestamp());
                let nanos = t.timestamp_subsec_nanos();
                if nanos != 0 {
                    put_int(out, 2, i64::from(nanos));
                }
            }
            return;
        }
        DURATION => {
            if let Some(ns) = v.as_str().and_then(parse_go_duration) {
                put_int(out, 1, ns);
            }
            return;
        }
        INT_OR_STRING => {
            match v {
                Value::String(s) => {
                    put_int(out, 1, 1);
                    put_str(out, 3, s);
                }
                other => {
                    put_int(out, 1, 0);
                    put_int(out, 2, other.as_i64().unwrap_or(0));
                }
            }
            return;
        }
        RAW_EXTENSION | FIELDS_V1 => {
            put_bytes(out, 1, &serde_json::to_vec(v).unwrap_or_default());
            return;
        }
        n if n.ends_with(".ExtraValue") => {
            for s in v.as_array().into_iter().flatten().filter_map(Value::as_str) {
                put_str(out, 1, s);
            }
            return;
        }
        _ => {}
    }
    let (Some(m), Some(obj)) = (messages().get(name), v.as_object()) else {
        return;
    };
    // Tag order, as Go's marshaler writes.
    for f in &m.fields {
        if f.inline {
            put_msg(out, f.tag, |e| encode_into(&f.target, v, e));
            continue;
        }
        match obj.get(&f.json) {
            None | Some(Value::Null) => {}
            Some(val) => encode_field(f, val, out),
        }
    }
}

fn encode_field(f: &FieldDesc, v: &Value, out: &mut Vec<u8>) {
    match f.kind {
        Kind::Map(vk) => {
            for (k, val) in v.as_object().into_iter().flatten() {
                put_msg(out, f.tag, |e| {
                    put_str(e, 1, k);
                    encode_scalar(*vk, &f.target, 2, val, e);
                });
            }
        }
        kind if f.repeated => {
            for item in v.as_array().into_iter().flatten() {
                encode_scalar(kind, &f.target, f.tag, item, out);
            }
        }
        kind => encode_scalar(kind, &f.target, f.tag, v, out),
    }
}

fn encode_scalar(kind: Kind, target: &str, tag: u32, v: &Value, out: &mut Vec<u8>) {
    match kind {
        Kind::Str => match v {
            Value::String(s) => put_str(out, tag, s),
            Value::Null => {}
            other => put_str(out, tag, &other.to_string()),
        },
        Kind::Bytes => {
            let raw = v.as_str().and_then(|s| b64().decode(s).ok()).unwrap_or_default();
            put_bytes(out, tag, &raw);
        }
        Kind::I32 | Kind::I64 => put_int(out, tag, v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).unwrap_or(0)),
        Kind::Bool => put_bool(out, tag, v.as_bool().unwrap_or(false)),
        Kind::F64 => put_double(out, tag, v.as_f64().unwrap_or(0.0)),
        Kind::F32 => {
            put_key(out, tag, wire::FIXED32);
            out.extend_from_slice(&(v.as_f64().unwrap_or(0.0) as f32).to_le_bytes());
        }
        Kind::Msg | Kind::Map(_) => put_msg(out, tag, |m| encode_into(target, v, m)),
    }
}

/// Decodes message `name` into its JSON form.
pub fn decode(name: &str, b: &[u8]) -> Result<Value, DecodeError> {
    match name {
        QUANTITY => return Ok(first_str(b, 1)?.map_or(Value::Null, Value::String)),
        TIME | MICRO_TIME => {
            let (mut secs, mut nanos) = (None, 0i64);
            let mut r = Reader::new(b);
            while let Some((tag, f)) = r.next()? {
                match (tag, f) {
                    (1, Field::Varint(v)) => secs = Some(v as i64),
                    (2, Field::Varint(v)) => nanos = v as i64,
                    _ => {}
                }
            }
            let Some(t) = secs.and_then(|s| Utc.timestamp_opt(s, nanos as u32).single()) else {
                return Ok(Value::Null);
            };
            let s = if name == TIME {
                t.to_rfc3339_opts(SecondsFormat::Secs, true)
            } else {
                t.to_rfc3339_opts(SecondsFormat::Micros, true)
            };
            return Ok(Value::String(s));
        }
        DURATION => {
            let mut r = Reader::new(b);
            let mut ns = 0i64;
            while let Some((tag, f)) = r.next()? {
                if let (1, Field::Varint(v)) = (tag, f) {
                    ns = v as i64;
                }
            }
            return Ok(Value::String(format_go_duration(ns)));
        }
        INT_OR_STRING => {
            let (mut ty, mut i, mut s) = (0u64, 0i64, String::new());
            let mut r = Reader::new(b);
            while let Some((tag, f)) = r.next()? {
                match (tag, f) {
                    (1, Field::Varint(v)) => ty = v,
                    (2, Field::Varint(v)) => i = i64::from(v as i32),
                    (3, Field::Bytes(b)) => s = utf8(b)?,
                    _ => {}
                }
            }
            return Ok(if ty == 1 { Value::String(s) } else { Value::Number(i.into()) });
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let mut r = Reader::new(b);
            while let Some((tag, f)) = r.next()? {
                if let (1, Field::Bytes(raw)) = (tag, f) {
                    if let Some(obj) = super::decode_envelope_json(raw) {
                        return Ok(obj);
                    }
                    return Ok(serde_json::from_slice(raw).unwrap_or(Value::Null));
                }
            }
            return Ok(Value::Null);
        }
        n if n.ends_with(".ExtraValue") => {
            let mut out = Vec::new();
            let mut r = Reader::new(b);
            while let Some((tag, f)) = r.next()? {
                if let (1, Field::Bytes(s)) = (tag, f) {
                    out.push(Value::String(utf8(s)?));
                }
            }
            return Ok(Value::Array(out));
        }
        _ => {}
    }
    let Some(m) = messages().get(name) else {
        return Err(DecodeError(format!("no protobuf message {name}")));
    };
    let mut obj = Map::new();
    let mut r = Reader::new(b);
    while let Some((tag, f)) = r.next()? {
        let Some(fd) = m.by_tag(tag) else { continue };
        if fd.inline {
            if let Field::Bytes(b) = f {
                if let Value::Object(inner) = decode(&fd.target, b)? {
                    obj.extend(inner);
                }
            }
            continue;
        }
        match fd.kind {
            Kind::Map(vk) => {
                let Field::Bytes(entry) = f else { continue };
                let (mut k, mut val) = (String::new(), Value::Null);
                let mut er = Reader::new(entry);
                while let Some((t, ef)) = er.next()? {
                    match t {
                        1 => k = scalar_str(ef)?,
                        2 => val = decode_scalar(*vk, &fd.target, ef)?,
                        _ => {}
                    }
                }
                if val.is_null() {
                    val = zero(*vk);
                }
                let slot = obj.entry(fd.json.clone()).or_insert_with(|| Value::Object(Map::new()));
                if let Some(m) = slot.as_object_mut() {
                    m.insert(k, val);
                }
            }
            kind if fd.repeated => {
                let slot = obj.entry(fd.json.clone()).or_insert_with(|| Value::Array(Vec::new()));
                let Some(list) = slot.as_array_mut() else { continue };
                match (kind, f) {
                    // Packed numbers (proto3 style); Go's proto2 writes them unpacked.
                    (Kind::I32 | Kind::I64 | Kind::Bool, Field::Bytes(p)) => {
                        let mut pr = Reader::new(p);
                        while pr_has_more(&pr, p) {
                            let v = pr.varint()?;
                            list.push(decode_scalar(kind, &fd.target, Field::Varint(v))?);
                        }
                    }
                    (kind, f) => list.push(decode_scalar(kind, &fd.target, f)?),
                }
            }
            kind => {
                let v = decode_scalar(kind, &fd.target, f)?;
                obj.insert(fd.json.clone(), v);
            }
        }
    }
    Ok(Value::Object(obj))
}

fn pr_has_more(r: &Reader<'_>, buf: &[u8]) -> bool {
    r.position() < buf.len()
}

fn zero(k: Kind) -> Value {
    match k {
        Kind::Str | Kind::Bytes => Value::String(String::new()),
        Kind::I32 | Kind::I64 => Value::Number(0.into()),
        Kind::Bool => Value::Bool(false),
        Kind::F64 | Kind::F32 => Value::Number(0.into()),
        Kind::Msg | Kind::Map(_) => Value::Null,
    }
}

fn utf8(b: &[u8]) -> Result<String, DecodeError> {
    String::from_utf8(b.to_vec()).map_err(|_| DecodeError("string field is not UTF-8".into()))
}

fn scalar_str(f: Field<'_>) -> Result<String, DecodeError> {
    match f {
        Field::Bytes(b) => utf8(b),
        _ => Err(DecodeError("expected a string".into())),
    }
}

fn first_str(b: &[u8], want: u32) -> Result<Option<String>, DecodeError> {
    let mut r = Reader::new(b);
    while let Some((tag, f)) = r.next()? {
        if tag == want {
            return scalar_str(f).map(Some);
        }
    }
    Ok(None)
}

fn decode_scalar(kind: Kind, target: &str, f: Field<'_>) -> Result<Value, DecodeError> {
    Ok(match (kind, f) {
        (Kind::Str, Field::Bytes(b)) => Value::String(utf8(b)?),
        (Kind::Bytes, Field::Bytes(b)) => Value::String(b64().encode(b)),
        (Kind::I32, Field::Varint(v)) => Value::Number(i64::from(v as i32).into()),
        (Kind::I64, Field::Varint(v)) => Value::Number((v as i64).into()),
        (Kind::Bool, Field::Varint(v)) => Value::Bool(v != 0),
        (Kind::F64, Field::Fixed64(v)) => Number::from_f64(f64::from_bits(v)).map_or(Value::Null, Value::Number),
        (Kind::F32, Field::Fixed32(v)) => {
            Number::from_f64(f64::from(f32::from_bits(v))).map_or(Value::Null, Value::Number)
        }
        (Kind::Msg | Kind::Map(_), Field::Bytes(b)) => decode(target, b)?,
        (k, f) => return Err(DecodeError(format!("field of type {k:?} has the wrong wire type ({f:?})"))),
    })
}

/// Parses Go's `time.Duration` text (`1h2m3.5s`, `300ms`) into nanoseconds.
fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    Some(if neg { -total as i64 } else { total as i64 })
}

/// Formats nanoseconds as Go's `time.Duration.String()` does.
fn format_go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let neg = ns < 0;
    let u = ns.unsigned_abs();
    let body = if u < 1_000_000_000 {
        let (div, unit) = if u < 1_000 {
            (1, "ns")
        } else if u < 1_000_000 {
            (1_000, "µs")
        } else {
            (1_000_000, "ms")
        };
        format!("{}{unit}", trim_frac(u as f64 / div as f64))
    } else {
        let h = u / 3_600_000_000_000;
        let m = (u / 60_000_000_000) % 60;
        let s = (u % 60_000_000_000) as f64 / 1e9;
        match (h, m) {
            (0, 0) => format!("{}s", trim_frac(s)),
            (0, m) => format!("{m}m{}s", trim_frac(s)),
            (h, m) => format!("{h}h{m}m{}s", trim_frac(s)),
        }
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

fn trim_frac(v: f64) -> String {
    let s = format!("{v:.9}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_round_trip() {
        for (s, ns) in [
            ("1h0m0s", 3_600_000_000_000),
            ("5m0s", 300_000_000_000),
            ("1.5s", 1_500_000_000),
            ("300ms", 300_000_000),
            ("0s", 0),
        ] {
            assert_eq!(parse_go_duration(s), Some(ns), "{s}");
            assert_eq!(format_go_duration(ns), s);
        }
    }
}
