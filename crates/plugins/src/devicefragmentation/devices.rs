//! The measured devices, read through the DRA machinery every profile shares
//! ([`DraManager`]): the ResourceSlices' devices of the configured DeviceClass per node, which
//! eligibility classes accept each of them (CEL, evaluated once per distinct device
//! description), and what the allocations the manager tracks (in claims' status, assumed, or in
//! flight) leave free of them.
//!
//! Only devices local to one node count (a slice with `nodeName`, the newest generation of its
//! pool); network-attached devices are left out of the measure (the allocator still uses them).

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{Device as ApiDevice, DeviceClass, ResourceSlice};
use ksched_dra::allocator::AllocatedView;
use ksched_dra::cel::DeviceView;
use ksched_dra::quantity::Quantity;
use ksched_framework::NodeInfo;
use rustc_hash::FxHashMap;

use super::measure::{Device, NodeState};
use ksched_dra::cel::CelCache;

/// One indexed device.
#[derive(Debug, Clone)]
struct Indexed {
    slice: Arc<ResourceSlice>,
    index: usize,
    /// The configured capacity, or `None` when the device does not publish it.
    capacity: Option<i64>,
    signature: usize,
}

/// A distinct device description (driver, attributes, capacity): devices alike answer every
/// selector alike, so selectors run once per description.
#[derive(Debug, Clone)]
struct Signature {
    slice: Arc<ResourceSlice>,
    index: usize,
    classes: u64,
}

/// The measured devices of the cluster, per node.
#[derive(Debug, Default)]
pub struct DeviceIndex {
    /// What it was built from: the slice index and the DeviceClass objects (by address).
    source: (usize, usize),
    by_node: FxHashMap<Box<str>, Vec<Indexed>>,
    signatures: Vec<Signature>,
    /// Eligibility classes whose bits are set.
    classes_done: usize,
    /// Bumped whenever what a node's devices look like may have changed.
    pub version: u64,
    /// The most common capacity among the devices (whole-device demand in capacity units).
    pub typical_capacity: i64,
}

fn device_of(slice: &ResourceSlice, index: usize) -> &ApiDevice {
    &slice.spec.devices.as_deref().unwrap_or_default()[index]
}

fn view_of<'a>(slice: &'a ResourceSlice, index: usize) -> DeviceView<'a> {
    let d = device_of(slice, index);
    DeviceView {
        driver: &slice.spec.driver,
        allow_multiple_allocations: d.allow_multiple_allocations,
        attributes: d.attributes.as_ref(),
        capacity: d.capacity.as_ref(),
    }
}

/// True when every selector accepts the device; a selector that fails to compile or evaluate
/// does not (the allocator reports such errors; the measure only leaves the device out).
fn matches_all(cel: &CelCache, selectors: &[String], slice: &ResourceSlice, index: usize) -> bool {
    let view = view_of(slice, index);
    selectors.iter().all(|e| cel.get_or_compile(e).device_matches(&view).unwrap_or(false))
}

fn class_selectors(class: &DeviceClass) -> Vec<String> {
    class.spec.selectors.iter().flatten().filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone())).collect()
}

fn quantity(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    Quantity::of(q).map(|v| v.as_f64().round() as i64).unwrap_or(0)
}

impl DeviceIndex {
    /// True when the index was built from these slices and class.
    pub fn is_current(&self, source: (usize, usize)) -> bool {
        self.source == source
    }

    /// Indexes the node-local devices of `slices` that `class` selects; `capacity` names the
    /// consumable capacity measured.
    pub fn build(
        cel: &CelCache,
        source: (usize, usize),
        slices: &[Arc<ResourceSlice>],
        class: &DeviceClass,
        capacity: Option<&str>,
        version: u64,
    ) -> DeviceIndex {
        let selectors = class_selectors(class);
        // Only the newest generation of each pool is in use.
        let mut newest: FxHashMap<(&str, &str), i64> = FxHashMap::default();
        for s in slices {
            let g = newest.entry((&s.spec.driver, &s.spec.pool.name)).or_insert(s.spec.pool.generation);
            *g = (*g).max(s.spec.pool.generation);
        }
        let mut by_node: FxHashMap<Box<str>, Vec<Indexed>> = FxHashMap::default();
        let mut signatures: Vec<Signature> = Vec::new();
        let mut seen: FxHashMap<String, (usize, bool)> = FxHashMap::default();
        let mut capacities: FxHashMap<i64, usize> = FxHashMap::default();
        for s in slices {
            let Some(node) = s.spec.node_name.as_deref().filter(|n| !n.is_empty()) else { continue };
            if newest.get(&(s.spec.driver.as_str(), s.spec.pool.name.as_str())) != Some(&s.spec.pool.generation) {
                continue;
            }
            for (i, d) in s.spec.devices.iter().flatten().enumerate() {
                let key =
                    serde_json::to_string(&(&s.spec.driver, &d.attributes, &d.capacity, d.allow_multiple_allocations))
                        .unwrap_or_default();
                let (signature, selected) = *seen.entry(key).or_insert_with(|| {
                    signatures.push(Signature { slice: s.clone(), index: i, classes: 0 });
                    (signatures.len() - 1, matches_all(cel, &selectors, s, i))
                });
                if !selected {
                    continue;
                }
                let cap = capacity.and_then(|c| d.capacity.as_ref()?.get(c)).map(|c| quantity(&c.value));
                *capacities.entry(cap.unwrap_or(1)).or_default() += 1;
                by_node.entry(node.into()).or_default().push(Indexed {
                    slice: s.clone(),
                    index: i,
                    capacity: cap,
                    signature,
                });
            }
        }
        let typical_capacity = capacities.into_iter().max_by_key(|(c, n)| (*n, *c)).map_or(1, |(c, _)| c);
        DeviceIndex { source, by_node, signatures, classes_done: 0, version, typical_capacity }
    }

    /// Evaluates the eligibility classes not evaluated yet (`classes[c]` holds class `c`'s
    /// selectors) on every device description; `true` when bits were added.
    pub fn add_classes(&mut self, cel: &CelCache, classes: &[Vec<String>]) -> bool {
        if classes.len() <= self.classes_done {
            return false;
        }
        for sig in &mut self.signatures {
            for (c, selectors) in classes.iter().enumerate().skip(self.classes_done) {
                if matches_all(cel, selectors, &sig.slice, sig.index) {
                    sig.classes |= 1u64 << c;
                }
            }
        }
        self.classes_done = classes.len();
        self.version += 1;
        true
    }

    /// The node as the measure sees it: its devices with what `allocated` leaves free, and its
    /// free cpu and memory when they are counted.
    pub fn node_state(
        &self,
        node: &NodeInfo,
        allocated: &dyn AllocatedView,
        capacity: Option<&str>,
        cpu: bool,
        memory: bool,
    ) -> NodeState {
        let devices = self
            .by_node
            .get(node.name())
            .into_iter()
            .flatten()
            .map(|d| {
                let spec = &d.slice.spec;
                let name = &device_of(&d.slice, d.index).name;
                let (driver, pool) = (spec.driver.as_str(), spec.pool.name.as_str());
                let (cap, free) = match d.capacity {
                    Some(cap) if !allocated.is_taken(driver, pool, name) => {
                        let used = capacity
                            .and_then(|c| Some(quantity_value(allocated.consumed(driver, pool, name)?.get(c)?)))
                            .unwrap_or(0);
                        (cap, cap - used)
                    }
                    Some(cap) => (cap, 0),
                    None => (1, i64::from(!allocated.is_allocated(driver, pool, name))),
                };
                Device { capacity: cap, free, classes: self.signatures[d.signature].classes }
            })
            .collect();
        NodeState {
            milli_cpu: cpu.then(|| node.allocatable.milli_cpu - node.requested.milli_cpu),
            memory: memory.then(|| node.allocatable.memory - node.requested.memory),
            devices,
        }
    }
}

fn quantity_value(q: &Quantity) -> i64 {
    q.as_f64().round() as i64
}
