//! `scheduling.k8s.io`: PriorityClass.

use serde_json::Value;

use crate::error::Cause;

/// The largest value a user-defined PriorityClass may have.
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// The system classes every cluster has, with their fixed values.
const SYSTEM_CLASSES: &[(&str, i64)] =
    &[("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)];

pub(super) fn validate(kind: &str, obj: &Value, old: Option<&Value>, errs: &mut Vec<Cause>) {
    if kind != "PriorityClass" {
        return;
    }
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let value = obj.get("value");
    let v = match value {
        None | Some(Value::Null) => {
            errs.push(Cause::required("value"));
            return;
        }
        Some(v) => match v.as_i64().and_then(|v| i32::try_from(v).ok()) {
            Some(v) => i64::from(v),
            None => {
                errs.push(Cause::invalid_value("value", v, "must be a 32-bit integer"));
                return;
            }
        },
    };
    if let Some(old) = old {
        if old.get("value") != value {
            errs.push(Cause::forbidden("value", "may not be changed in an update."));
        }
        if old.get("preemptionPolicy") != obj.get("preemptionPolicy") {
            errs.push(Cause::invalid_value(
                "preemptionPolicy",
                obj.get("preemptionPolicy").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        return;
    }
    if name.starts_with("system-") {
        let known = SYSTEM_CLASSES.iter().find(|(n, _)| *n == name);
        let why = match known {
            None => Some(format!("{name} is not a known system priority class")),
            Some((_, want)) if *want != v => Some(format!("value of {name} PriorityClass must be {want}")),
            Some(_) if obj.get("globalDefault").and_then(Value::as_bool) == Some(true) => {
                Some(format!("globalDefault of {name} PriorityClass must be false"))
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            errs.push(Cause::forbidden(
                "metadata.name",
                &format!("priority class names with 'system-' prefix are reserved for system use only. error: {why}"),
            ));
        }
    } else if v > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(Cause::forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ));
    }
    if let Some(p) = obj.get("preemptionPolicy").filter(|p| !p.is_null()) {
        if !matches!(p.as_str(), Some("PreemptLowerPriority" | "Never")) {
            errs.push(Cause::not_supported("preemptionPolicy", p, &["PreemptLowerPriority", "Never"]));
        }
    }
}
