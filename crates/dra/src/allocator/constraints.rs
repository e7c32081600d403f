//! Claim constraints: `matchAttribute` (all constrained devices share a value) and
//! `distinctAttribute` (no two share one). Both are checked incrementally as the search adds
//! and removes devices.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

/// One constraint of a claim, with the devices added so far.
#[derive(Debug)]
pub(crate) struct Constraint {
    kind: Kind,
    /// The requests it applies to; empty for all.
    requests: Vec<String>,
    attribute: String,
    num_devices: usize,
}

#[derive(Debug)]
enum Kind {
    Match {
        first: Option<DeviceAttribute>,
    },
    /// Upstream keys the seen values by request name, so each request contributes only the
    /// value of its latest device; kept identical to decide the same cases.
    Distinct {
        seen: BTreeMap<String, DeviceAttribute>,
    },
}

/// Looks an attribute up by its fully qualified name; attributes of the device's own driver
/// may be stored without the domain.
pub(crate) fn lookup_attribute<'a>(device: &'a Device, driver: &str, name: &str) -> Option<&'a DeviceAttribute> {
    let attrs = device.attributes.as_ref()?;
    if let Some(a) = attrs.get(name) {
        return Some(a);
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    attrs.get(id)
}

/// The one value an attribute holds, compared by type and value.
#[derive(PartialEq)]
enum Scalar<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
    Version(&'a str),
}

fn scalar(a: &DeviceAttribute) -> Option<Scalar<'_>> {
    if let Some(s) = &a.string {
        Some(Scalar::Str(s))
    } else if let Some(i) = a.int {
        Some(Scalar::Int(i))
    } else if let Some(b) = a.bool {
        Some(Scalar::Bool(b))
    } else {
        a.version.as_deref().map(Scalar::Version)
    }
}

impl Constraint {
    /// A `matchAttribute` constraint.
    pub fn match_attribute(attribute: String, requests: Vec<String>) -> Self {
        Constraint { kind: Kind::Match { first: None }, requests, attribute, num_devices: 0 }
    }

    /// A `distinctAttribute` constraint.
    pub fn distinct_attribute(attribute: String, requests: Vec<String>) -> Self {
        Constraint { kind: Kind::Distinct { seen: BTreeMap::new() }, requests, attribute, num_devices: 0 }
    }

    fn applies(&self, request: &str, sub_request: &str) -> bool {
        if self.requests.is_empty() {
            return true;
        }
        if sub_request.is_empty() {
            return self.requests.iter().any(|r| r == request);
        }
        let full = format!("{request}/{sub_request}");
        self.requests.iter().any(|r| r == request || *r == full)
    }

    /// Adds a device if it keeps the constraint satisfied.
    pub fn add(&mut self, request: &str, sub_request: &str, device: &Device, driver: &str) -> bool {
        if !self.applies(request, sub_request) {
            return true;
        }
        let Some(attr) = lookup_attribute(device, driver, &self.attribute) else { return false };
        let first = self.num_devices == 0;
        match &mut self.kind {
            Kind::Match { first: stored } => {
                if first {
                    *stored = Some(attr.clone());
                } else {
                    let Some(new) = scalar(attr) else { return false };
                    let same = stored.as_ref().and_then(scalar).is_some_and(|old| same_typed(&old, &new));
                    if !same {
                        return false;
                    }
                }
            }
            Kind::Distinct { seen } => {
                if !first {
                    let new = scalar(attr);
                    let conflict = seen.values().any(|old| match &new {
                        None => true,
                        Some(n) => scalar(old).is_some_and(|o| same_typed(&o, n)),
                    });
                    if conflict {
                        return false;
                    }
                }
                seen.insert(request.to_string(), attr.clone());
            }
        }
        self.num_devices += 1;
        true
    }

    /// Undoes a successful [`Constraint::add`] with the same arguments.
    pub fn remove(&mut self, request: &str, sub_request: &str) {
        if !self.applies(request, sub_request) {
            return;
        }
        if let Kind::Distinct { seen } = &mut self.kind {
            seen.remove(request);
        }
        self.num_devices = self.num_devices.saturating_sub(1);
    }
}

fn same_typed(a: &Scalar<'_>, b: &Scalar<'_>) -> bool {
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dev(attrs: serde_json::Value) -> Device {
        serde_json::from_value(json!({"name": "d", "attributes": attrs})).unwrap()
    }

    #[test]
    fn match_attribute_needs_equal_values_and_the_attribute() {
        let mut c = Constraint::match_attribute("drv/model".into(), vec![]);
        assert!(c.add("r", "", &dev(json!({"model": {"string": "a"}})), "drv"));
        assert!(!c.add("r", "", &dev(json!({"model": {"string": "b"}})), "drv"));
        assert!(!c.add("r", "", &dev(json!({})), "drv"));
        assert!(c.add("r", "", &dev(json!({"drv/model": {"string": "a"}})), "drv"));
        c.remove("r", "");
        c.remove("r", "");
        assert!(c.add("r", "", &dev(json!({"model": {"string": "b"}})), "drv"));
    }

    #[test]
    fn constraints_only_see_their_requests() {
        let mut c = Constraint::match_attribute("drv/model".into(), vec!["a".into(), "b/x".into()]);
        assert!(c.add("a", "", &dev(json!({"model": {"int": 1}})), "drv"));
        assert!(c.add("other", "", &dev(json!({"model": {"int": 2}})), "drv"));
        assert!(!c.add("b", "x", &dev(json!({"model": {"int": 2}})), "drv"));
        assert!(c.add("b", "y", &dev(json!({"model": {"int": 2}})), "drv"));
    }

    #[test]
    fn distinct_attribute_refuses_repeated_values() {
        let mut c = Constraint::distinct_attribute("drv/numa".into(), vec![]);
        assert!(c.add("a", "", &dev(json!({"numa": {"int": 0}})), "drv"));
        assert!(!c.add("b", "", &dev(json!({"numa": {"int": 0}})), "drv"));
        assert!(c.add("b", "", &dev(json!({"numa": {"int": 1}})), "drv"));
    }
}
