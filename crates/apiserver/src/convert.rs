//! Conversions between the two Event APIs.
//!
//! Like the real server, `core/v1` and `events.k8s.io/v1` Events are one
//! stored resource: we store the core form and convert the other on the way
//! in and out, so `kubectl describe` sees events a scheduler wrote through
//! `events.k8s.io/v1`.

use serde_json::{Map, Value};

/// (events.k8s.io/v1 field, core/v1 field) pairs that map one-to-one.
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Converts an `events.k8s.io/v1` Event to its stored `core/v1` form.
pub fn event_v1_to_core(ev: Value) -> Value {
    let Value::Object(mut m) = ev else {
        return ev;
    };
    let mut out = Map::new();
    for (from, to) in RENAMES {
        if let Some(v) = m.remove(*from) {
            out.insert((*to).to_string(), v);
        }
    }
    for (k, v) in m {
        out.insert(k, v);
    }
    out.insert("apiVersion".into(), Value::from("v1"));
    out.insert("kind".into(), Value::from("Event"));
    // Old clients (and `kubectl describe` fallbacks) read the reporter from `source.component`.
    if !out.contains_key("source") {
        if let Some(rc) = out.get("reportingComponent").and_then(Value::as_str) {
            let mut src = Map::new();
            src.insert("component".into(), Value::from(rc));
            out.insert("source".into(), Value::Object(src));
        }
    }
    Value::Object(out)
}

/// Converts a stored `core/v1` Event to the `events.k8s.io/v1` form.
pub fn core_to_event_v1(ev: &Value) -> Value {
    let Value::Object(m) = ev else {
        return ev.clone();
    };
    let mut m = m.clone();
    // Drop the synthesized source again so round trips are stable.
    let synthesized = match (m.get("source"), m.get("reportingComponent")) {
        (Some(Value::Object(src)), Some(rc)) => src.len() == 1 && src.get("component") == Some(rc),
        _ => false,
    };
    if synthesized {
        m.remove("source");
    }
    let mut out = Map::new();
    for (to, from) in RENAMES {
        if let Some(v) = m.remove(*from) {
            out.insert((*to).to_string(), v);
        }
    }
    for (k, v) in m {
        out.insert(k, v);
    }
    out.insert("apiVersion".into(), Value::from("events.k8s.io/v1"));
    out.insert("kind".into(), Value::from("Event"));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u"},
            "note": "Successfully assigned default/p to n1", "reason": "Scheduled", "type": "Normal",
            "reportingController": "default-scheduler", "reportingInstance": "i", "action": "Binding",
            "eventTime": "2024-01-01T00:00:00.000000Z"});
        let core = event_v1_to_core(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "Successfully assigned default/p to n1");
        assert_eq!(core["source"]["component"], "default-scheduler");
        assert_eq!(core["reportingComponent"], "default-scheduler");
        assert_eq!(core_to_event_v1(&core), v1);
    }
}
