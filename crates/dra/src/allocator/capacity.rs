//! Consumable capacity (DRAConsumableCapacity): how much of a shareable device's capacity a
//! request consumes under the device's request policy, and whether it still fits.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, CapacityRequirements, DeviceCapacity,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use std::ops::{Add, Sub};

use crate::quantity::Quantity;

/// Consumed capacity per capacity name.
pub type Consumed = BTreeMap<String, Quantity>;

/// A quantity with the text it is reported as in allocation results.
#[derive(Debug, Clone)]
pub(crate) struct Amount {
    pub value: Quantity,
    pub text: String,
}

impl Amount {
    fn of(q: &ApiQuantity) -> Amount {
        Amount { value: Quantity::of(q).unwrap_or_default(), text: q.0.clone() }
    }
}

fn requested<'a>(req: Option<&'a CapacityRequirements>, name: &str) -> Option<&'a ApiQuantity> {
    req?.requests.as_ref()?.get(name)
}

/// The capacity a request consumes: the request rounded up to the policy's range or valid
/// values, or the policy default (else the whole capacity) when nothing is requested.
fn consumed_capacity(requested: Option<&ApiQuantity>, cap: &DeviceCapacity) -> Amount {
    let Some(r) = requested else {
        return match cap.request_policy.as_ref().and_then(|p| p.default.as_ref()) {
            Some(d) => Amount::of(d),
            None => Amount::of(&cap.value),
        };
    };
    let Some(policy) = &cap.request_policy else { return Amount::of(r) };
    match (&policy.valid_range, &policy.valid_values) {
        (Some(range), _) => round_up_range(r, range),
        (_, Some(values)) => round_up_valid_values(r, values),
        _ => Amount::of(r),
    }
}

/// [`consumed_capacity`]'s amount, for code outside the allocator that must count what a
/// share takes of a device the way allocation does.
pub(crate) fn consumed_for(requested: Option<&ApiQuantity>, cap: &DeviceCapacity) -> Quantity {
    consumed_capacity(requested, cap).value
}

fn round_up_range(r: &ApiQuantity, range: &CapacityRequestPolicyRange) -> Amount {
    let min = Amount::of(&range.min);
    let req = Amount::of(r);
    if req.value < min.value {
        return min;
    }
    let Some(step) = &range.step else { return req };
    let step = Quantity::of(step).unwrap_or_default().value();
    let (v, m) = (req.value.value(), min.value.value());
    if step == 0 {
        return req;
    }
    let added = v - m;
    let mut n = added / step;
    if added % step != 0 {
        n += 1;
    }
    let val = m + step * n;
    Amount { value: Quantity::from_i64(val), text: Quantity::binary_si_string(val) }
}

fn round_up_valid_values(r: &ApiQuantity, values: &[ApiQuantity]) -> Amount {
    let req = Amount::of(r);
    values.iter().map(Amount::of).find(|v| req.value <= v.value).unwrap_or(req)
}

fn violates_policy(v: Quantity, policy: Option<&CapacityRequestPolicy>) -> bool {
    let Some(p) = policy else { return false };
    if p.default.as_ref().and_then(|d| Quantity::of(d).ok()).is_some_and(|d| d == v) {
        return false;
    }
    if let Some(range) = &p.valid_range {
        if range.max.as_ref().and_then(|m| Quantity::of(m).ok()).is_some_and(|max| v > max) {
            return true;
        }
        if let Some(step) = &range.step {
            let step = Quantity::of(step).unwrap_or_default().value();
            let min = Quantity::of(&range.min).unwrap_or_default().value();
            if step != 0 && (v.value() - min) % step != 0 {
                return true;
            }
        }
        return false;
    }
    if let Some(values) = p.valid_values.as_ref().filter(|v| !v.is_empty()) {
        return !values.iter().any(|x| Quantity::of(x).is_ok_and(|x| x == v));
    }
    false
}

/// Whether the request still fits next to what is allocated and being allocated: `Err` when
/// it asks for a capacity the device does not define.
pub(crate) fn request_fits(
    allocated: Option<&Consumed>,
    request: Option<&CapacityRequirements>,
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
    allocating: Option<&Consumed>,
) -> Result<bool, &'static str> {
    if let Some(reqs) = request.and_then(|r| r.requests.as_ref()) {
        if reqs.keys().any(|k| !capacity.is_some_and(|c| c.contains_key(k))) {
            return Err("some requested capacity has not been defined");
        }
    }
    let nothing_requested = request.and_then(|r| r.requests.as_ref()).is_none_or(|r| r.is_empty());
    if nothing_requested && allocated.is_none() && allocating.is_none() {
        // Each capacity would be consumed whole (no policy to round to) against a limit of
        // itself: it fits. This is every check of a device nobody shares, so skip the parsing.
        if capacity.into_iter().flatten().all(|(_, cap)| cap.request_policy.is_none()) {
            return Ok(true);
        }
    }
    for (name, cap) in capacity.into_iter().flatten() {
        let consumed = consumed_capacity(requested(request, name), cap).value;
        if violates_policy(consumed, cap.request_policy.as_ref()) {
            return Ok(false);
        }
        let mut total = allocated.and_then(|a| a.get(name)).map_or(consumed, |a| a.add(consumed));
        if let Some(x) = allocating.and_then(|a| a.get(name)) {
            total = total.add(*x);
        }
        let limit = Quantity::of(&cap.value).unwrap_or_default();
        if total > limit {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What a request consumes of each of the device's capacities, with the texts reported in
/// `consumedCapacity`.
pub(crate) fn consumed_by_request(
    request: Option<&CapacityRequirements>,
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
) -> BTreeMap<String, Amount> {
    capacity
        .into_iter()
        .flatten()
        .map(|(name, cap)| (name.clone(), consumed_capacity(requested(request, name), cap)))
        .collect()
}

/// Adds `add` into `into` (upstream's `ConsumedCapacity.Add`).
pub(crate) fn add_into(into: &mut Consumed, add: &Consumed) {
    for (k, v) in add {
        into.entry(k.clone()).and_modify(|x| *x = x.add(*v)).or_insert(*v);
    }
}

/// Subtracts `sub` from the entries `from` has (upstream's `ConsumedCapacity.Sub`).
pub(crate) fn sub_from(from: &mut Consumed, sub: &Consumed) {
    for (k, v) in sub {
        if let Some(x) = from.get_mut(k) {
            *x = x.sub(*v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cap(v: serde_json::Value) -> BTreeMap<String, DeviceCapacity> {
        serde_json::from_value(v).unwrap()
    }

    fn req(v: serde_json::Value) -> CapacityRequirements {
        serde_json::from_value(json!({ "requests": v })).unwrap()
    }

    #[test]
    fn requests_round_up_to_the_policy_step() {
        let c = cap(json!({"memory": {"value": "10Gi",
            "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}));
        let got = consumed_by_request(Some(&req(json!({"memory": "1.5Gi"}))), Some(&c));
        assert_eq!(got["memory"].value, Quantity::parse("2Gi").unwrap());
        assert_eq!(got["memory"].text, "2Gi");
        let none = consumed_by_request(None, Some(&c));
        assert_eq!(none["memory"].text, "1Gi");
    }

    #[test]
    fn requests_beyond_the_capacity_or_unknown_names_do_not_fit() {
        let c = cap(json!({"memory": {"value": "4Gi"}}));
        let used: Consumed = [("memory".to_string(), Quantity::parse("3Gi").unwrap())].into();
        assert_eq!(request_fits(Some(&used), Some(&req(json!({"memory": "1Gi"}))), Some(&c), None), Ok(true));
        assert_eq!(request_fits(Some(&used), Some(&req(json!({"memory": "2Gi"}))), Some(&c), None), Ok(false));
        assert!(request_fits(None, Some(&req(json!({"cores": "1"}))), Some(&c), None).is_err());
        // no request consumes the whole capacity
        assert_eq!(request_fits(Some(&used), None, Some(&c), None), Ok(false));
    }

    #[test]
    fn valid_values_round_up_and_violations_are_refused() {
        let c = cap(json!({"bw": {"value": "100", "requestPolicy": {"validValues": ["10", "50"], "default": "10"}}}));
        let got = consumed_by_request(Some(&req(json!({"bw": "20"}))), Some(&c));
        assert_eq!(got["bw"].text, "50");
        assert_eq!(request_fits(None, Some(&req(json!({"bw": "60"}))), Some(&c), None), Ok(false));
    }
}
