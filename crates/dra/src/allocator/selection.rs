//! Device selection, an opt-in strategy that upstream's allocator does not have: which of the
//! devices that could serve a request the search tries first.
//!
//! Upstream's allocator walks the devices in one fixed order (pools by driver and name, slices by
//! name, devices as listed) and keeps the first complete solution: [`DeviceSelection::FirstFit`],
//! the default, unchanged. On devices several claims share (`allowMultipleAllocations`, the
//! DRAConsumableCapacity API) that order breaks into a fresh device while a partly used one
//! still has room, and the room left on partly used devices ends up in slivers no later claim
//! fits into (a stranded half-GPU). [`DeviceSelection::BestFit`] changes the order for one kind
//! of request only: one device (`count: 1`) with capacity requests. Its candidates are tried
//! from the least capacity left after the request to the most (listed order among equals), so
//! the request lands where it leaves the smallest remainder: bin packing's best fit. Every other
//! request, and every request when the strategy is off, keeps upstream's order, and so do the
//! constraints and backtracking: the search still returns the first complete solution in its
//! (reordered) walk.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{CapacityRequirements, DeviceCapacity};

use super::capacity::{self, Consumed};
use crate::quantity::Quantity;

/// Which device of several candidates a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSelection {
    /// Upstream's order: the first device that completes a solution.
    #[default]
    FirstFit,
    /// A request for one device with capacity requests goes where the least capacity is left.
    BestFit,
}

impl DeviceSelection {
    /// The names configuration uses, in order.
    pub const NAMES: [&'static str; 2] = ["FirstFit", "BestFit"];

    /// Parses a configuration value (`FirstFit`, `BestFit`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "FirstFit" => Some(DeviceSelection::FirstFit),
            "BestFit" => Some(DeviceSelection::BestFit),
            _ => None,
        }
    }

    /// The configuration value.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceSelection::FirstFit => "FirstFit",
            DeviceSelection::BestFit => "BestFit",
        }
    }

    /// Whether a request for `num_devices` devices, with or without capacity requests, is
    /// tried in best-fit order.
    pub(crate) fn reorders(self, num_devices: usize, has_capacity_requests: bool) -> bool {
        self == DeviceSelection::BestFit && num_devices == 1 && has_capacity_requests
    }
}

/// The share of a device's capacity that would be left after a request: the sum, over the
/// capacities the request names, of what remains after the device's allocations (`allocated`,
/// `allocating`) and the request's own consumption (rounded up by the device's request policy),
/// each as a fraction of the capacity. Fractions keep devices of different sizes comparable and
/// add up the capacities of a multi-capacity request with equal say.
pub(crate) fn share_left(
    capacity: Option<&BTreeMap<String, DeviceCapacity>>,
    allocated: Option<&Consumed>,
    allocating: Option<&Consumed>,
    request: Option<&CapacityRequirements>,
) -> f64 {
    let Some(capacity) = capacity else { return 0.0 };
    let consumed = capacity::consumed_by_request(request, Some(capacity));
    let named = request.and_then(|r| r.requests.as_ref());
    let mut left = 0.0;
    for name in named.into_iter().flat_map(|r| r.keys()) {
        let Some(cap) = capacity.get(name) else { continue };
        let total = Quantity::of(&cap.value).unwrap_or_default().as_f64();
        if total <= 0.0 {
            continue;
        }
        let used = |c: Option<&Consumed>| c.and_then(|c| c.get(name)).map_or(0.0, |q| q.as_f64());
        let own = consumed.get(name).map_or(0.0, |a| a.value.as_f64());
        left += (total - used(allocated) - used(allocating) - own) / total;
    }
    left
}

/// Sorts candidates (any key, with the share left after the request) from the least left to
/// the most; equal shares keep their order (the listed order).
pub(crate) fn best_fit_order<T>(candidates: &mut [(T, f64)]) {
    candidates.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(Ordering::Equal));
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

    fn used(name: &str, v: &str) -> Consumed {
        [(name.to_string(), Quantity::parse(v).unwrap())].into()
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for n in DeviceSelection::NAMES {
            assert_eq!(DeviceSelection::parse(n).unwrap().as_str(), n);
        }
        assert_eq!(DeviceSelection::parse("bestfit"), None);
        assert_eq!(DeviceSelection::default(), DeviceSelection::FirstFit);
    }

    #[test]
    fn only_best_fit_of_one_device_with_capacity_requests_reorders() {
        assert!(DeviceSelection::BestFit.reorders(1, true));
        assert!(!DeviceSelection::BestFit.reorders(2, true), "several devices keep the combination walk");
        assert!(!DeviceSelection::BestFit.reorders(1, false), "whole devices keep the listed order");
        assert!(!DeviceSelection::FirstFit.reorders(1, true));
    }

    #[test]
    fn share_left_counts_allocations_in_flight_and_the_policy_rounding() {
        let c = cap(json!({"milligpu": {"value": "1000"}}));
        let r = req(json!({"milligpu": "300"}));
        assert!((share_left(Some(&c), None, None, Some(&r)) - 0.7).abs() < 1e-9);
        let a = used("milligpu", "500");
        let b = used("milligpu", "100");
        assert!((share_left(Some(&c), Some(&a), Some(&b), Some(&r)) - 0.1).abs() < 1e-9);
        // A step of 250 rounds 300 up to 500.
        let stepped = cap(json!({"milligpu": {"value": "1000", "requestPolicy": {"default": "250",
            "validRange": {"min": "250", "step": "250"}}}}));
        assert!((share_left(Some(&stepped), None, None, Some(&r)) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn best_fit_order_puts_the_tightest_first_and_keeps_ties_in_order() {
        let mut c = vec![("g0", 0.7), ("g1", 0.1), ("g2", 0.4), ("g3", 0.1)];
        best_fit_order(&mut c);
        assert_eq!(c.iter().map(|x| x.0).collect::<Vec<_>>(), ["g1", "g3", "g2", "g0"]);
    }
}
