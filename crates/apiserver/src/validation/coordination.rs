//! `coordination.k8s.io`: Lease.

use serde_json::{json, Value};

use crate::error::Cause;

pub(super) fn validate(kind: &str, obj: &Value, _old: Option<&Value>, errs: &mut Vec<Cause>) {
    if kind != "Lease" {
        return;
    }
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if let Some(d) = spec.get("leaseDurationSeconds").and_then(Value::as_i64) {
        if d <= 0 {
            errs.push(Cause::invalid_value("spec.leaseDurationSeconds", &json!(d), "must be greater than 0"));
        }
    }
    if let Some(t) = spec.get("leaseTransitions").and_then(Value::as_i64) {
        if t < 0 {
            errs.push(Cause::invalid_value("spec.leaseTransitions", &json!(t), "must be greater than or equal to 0"));
        }
    }
    let strategy = spec.get("strategy").and_then(Value::as_str).unwrap_or_default();
    let preferred = spec.get("preferredHolder").and_then(Value::as_str).unwrap_or_default();
    if !preferred.is_empty() && strategy.is_empty() {
        errs.push(Cause::forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"));
    }
}
