//! Shared counters (DRAPartitionableDevices): what a pool's counter sets have left after the
//! devices allocated outside an attempt, and whether a device's consumption still fits in it.
//!
//! The search takes and releases counters through these functions, and so does
//! [`NodeCounters`], which answers the same question for code outside the allocator that must
//! know which devices of a node allocation could still give (a placement policy's view of free
//! devices): one arithmetic, so a partition that makes its whole device unavailable to the
//! allocator makes it unavailable to the policy too.

use std::collections::BTreeMap;
use std::ops::{Add, Sub};

use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use ksched_framework::node::Node;

use super::pools::Pool;
use super::{AllocatedView, DeviceId, DeviceSet, Features, NodeDevice, SliceIndex};
use crate::quantity::Quantity;

/// Counter values per counter set, per counter.
pub(crate) type CounterSets = BTreeMap<String, BTreeMap<String, Quantity>>;

fn devices_of(slice: &ResourceSlice) -> &[Device] {
    slice.spec.devices.as_deref().unwrap_or_default()
}

/// True when the device draws on shared counters.
pub(crate) fn consumes(d: &Device) -> bool {
    d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
}

/// The pool's counter sets less what its allocated devices draw, those of slices for other
/// nodes included. Values may go below zero, which reads as nothing left.
pub(crate) fn left_in_pool(pool: &Pool, state: &dyn AllocatedView) -> CounterSets {
    let mut left: CounterSets = pool
        .counter_sets
        .values()
        .map(|cs| {
            let counters =
                cs.counters.iter().map(|(k, c)| (k.clone(), Quantity::of(&c.value).unwrap_or_default())).collect();
            (cs.name.clone(), counters)
        })
        .collect();
    for slice in pool.slices.iter().chain(&pool.slices_elsewhere) {
        for d in devices_of(slice) {
            // Upstream's `IsDeviceAllocated`: a shareable device draws its counters once, with
            // its first share.
            if !state.is_allocated(&slice.spec.driver, &slice.spec.pool.name, &d.name) {
                continue;
            }
            for c in d.consumes_counters.iter().flatten() {
                let Some(set) = left.get_mut(&c.counter_set) else { continue };
                for (name, v) in &c.counters {
                    if let Some(x) = set.get_mut(name) {
                        *x = x.sub(Quantity::of(&v.value).unwrap_or_default());
                    }
                }
            }
        }
    }
    left
}

/// Adds what the device draws to `consumed`.
pub(crate) fn take(consumed: &mut CounterSets, d: &Device) {
    for c in d.consumes_counters.iter().flatten() {
        let set = consumed.entry(c.counter_set.clone()).or_default();
        for (name, v) in &c.counters {
            let v = Quantity::of(&v.value).unwrap_or_default();
            set.entry(name.clone()).and_modify(|x| *x = x.add(v)).or_insert(v);
        }
    }
}

/// Takes what the device draws back out of `consumed`.
pub(crate) fn release(consumed: &mut CounterSets, d: &Device) {
    for c in d.consumes_counters.iter().flatten() {
        let Some(set) = consumed.get_mut(&c.counter_set) else { continue };
        for (name, v) in &c.counters {
            if let Some(x) = set.get_mut(name) {
                *x = x.sub(Quantity::of(&v.value).unwrap_or_default());
            }
        }
    }
}

/// True when no counter of `left` is exceeded by `consumed`.
pub(crate) fn within(left: &CounterSets, consumed: &CounterSets) -> bool {
    left.iter().all(|(set_name, counters)| {
        let used = consumed.get(set_name);
        counters.iter().all(|(name, available)| {
            let used = used.and_then(|u| u.get(name)).copied().unwrap_or_default();
            *available >= used
        })
    })
}

/// One pool's counters as left outside any attempt.
#[derive(Debug, Clone)]
struct PoolCounters {
    driver: String,
    pool: String,
    left: CounterSets,
}

/// The shared counters of the pools reachable from one node, as the allocator's counter check
/// sees them before an attempt: what each counter set has left after the allocated devices,
/// and which shareable devices took theirs with a share already. Built by
/// [`SliceIndex::node_counters`].
#[derive(Debug, Clone, Default)]
pub struct NodeCounters {
    features: Features,
    /// Only the pools with counter sets.
    pools: Vec<PoolCounters>,
    /// Shareable devices that draw counters and hold shares: more shares take no more.
    shared_in_use: DeviceSet,
}

impl SliceIndex {
    /// The shared counters of the pools reachable from `node` (see [`NodeCounters`]) after
    /// the devices `allocated` records, under the same pool gathering as
    /// [`SliceIndex::node_devices`].
    pub fn node_counters(
        &self,
        node: &Node,
        features: &Features,
        allocated: &dyn AllocatedView,
    ) -> Result<NodeCounters, String> {
        let pools = self.pools_for(node, features)?;
        let mut out = NodeCounters { features: *features, ..NodeCounters::default() };
        // Counter slices reach every node; a pool with no devices here has nothing to say
        // about this node's devices.
        let pools = pools.iter().filter(|p| !p.incomplete && !p.invalid && !p.counter_sets.is_empty());
        for pool in pools.filter(|p| !p.slices.is_empty()) {
            out.pools.push(PoolCounters {
                driver: pool.driver.clone(),
                pool: pool.pool.clone(),
                left: left_in_pool(pool, allocated),
            });
            if !features.consumable_capacity {
                continue;
            }
            for slice in &pool.slices {
                for d in devices_of(slice).iter().filter(|d| d.allow_multiple_allocations == Some(true) && consumes(d))
                {
                    if allocated.consumed(&pool.driver, &pool.pool, &d.name).is_some() {
                        out.shared_in_use.insert(&DeviceId::new(&pool.driver, &pool.pool, &d.name));
                    }
                }
            }
        }
        Ok(out)
    }
}

impl NodeCounters {
    /// A fresh attempt: devices taken one after another from what is left now.
    pub fn attempt(&self) -> CounterAttempt<'_> {
        CounterAttempt { counters: self, consumed: BTreeMap::new(), shared: DeviceSet::default() }
    }

    /// True when the allocator's counter check lets `device` be given now, on its own. Says
    /// nothing of whether the device is allocated already or has capacity left.
    pub fn allows(&self, device: &NodeDevice) -> bool {
        self.attempt().take(device)
    }
}

/// Counters taken by devices chosen in one attempt on top of what [`NodeCounters`] had left.
#[derive(Debug, Clone)]
pub struct CounterAttempt<'a> {
    counters: &'a NodeCounters,
    /// Per index in `counters.pools`.
    consumed: BTreeMap<usize, CounterSets>,
    /// Shareable devices this attempt gave a share of.
    shared: DeviceSet,
}

impl CounterAttempt<'_> {
    /// Takes the counters `device` draws, as allocation does when it gives the device; `false`,
    /// with nothing taken, when they are not left.
    pub fn take(&mut self, device: &NodeDevice) -> bool {
        self.check(device, true)
    }

    /// True when [`CounterAttempt::take`] would take `device` now; takes nothing.
    pub fn fits(&mut self, device: &NodeDevice) -> bool {
        self.check(device, false)
    }

    fn check(&mut self, device: &NodeDevice, keep: bool) -> bool {
        let d = device.device();
        if !consumes(d) {
            return true;
        }
        let features = &self.counters.features;
        if !features.partitionable_devices {
            return false;
        }
        let spec = &device.slice.spec;
        let (driver, pool) = (spec.driver.as_str(), spec.pool.name.as_str());
        let shareable = features.consumable_capacity && d.allow_multiple_allocations == Some(true);
        if shareable
            && (self.counters.shared_in_use.contains(driver, pool, &d.name)
                || self.shared.contains(driver, pool, &d.name))
        {
            return true;
        }
        // A device whose pool has no counter sets is in an invalid pool, which allocation
        // does not use.
        let Some(i) = self.counters.pools.iter().position(|p| p.driver == driver && p.pool == pool) else {
            return false;
        };
        let consumed = self.consumed.entry(i).or_default();
        take(consumed, d);
        let fits = within(&self.counters.pools[i].left, consumed);
        if !fits || !keep {
            release(consumed, d);
            return fits;
        }
        if shareable {
            self.shared.insert(&DeviceId::new(driver, pool, &d.name));
        }
        true
    }
}
