//! The measured devices, read through the DRA state every profile shares
//! ([`SharedDraManager`], from the framework handle): per node, the devices of the configured
//! DeviceClass that allocation itself would consider there, which eligibility classes accept
//! each of them (CEL, evaluated once per distinct device description), and what the
//! allocations the manager tracks (in claims' status, assumed, or in flight) leave free of them.
//!
//! The device model is the allocator's ([`SliceIndex::node_devices`]): pools at their newest
//! generation, without incomplete or invalid pools, and without devices whose taints forbid
//! scheduling (`NoSchedule`, `NoExecute`; the measure cannot know the tolerations of the pods
//! to come, so such a device counts as unusable). A node's view is read again when the node
//! changes (pods placed or removed: its generation), when an allocation of one of its pools is
//! recorded or forgotten (a claim deallocated after its pod left changes no node, only the
//! pool's revision), or when the slices or the class change (the index is rebuilt).
//!
//! Devices that draw on shared counters (partitionable devices, KEP-4815) are free only while
//! the allocator's own counter check ([`NodeCounters`]) would still give them: a whole GPU one
//! of whose partitions is allocated, or a partition whose siblings took what it needs, has
//! nothing free, whether those siblings are measured or not. A device draws its counters all
//! at once, so what a counter set has left shows as the siblings that still fit in it. The
//! counters live in the pool of the devices drawing on them, so the pool's revision covers
//! them.
//!
//! Only devices local to one node count (a slice with `nodeName`); network-attached devices
//! are left out of the measure (the allocator still uses them).

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{Device as ApiDevice, DeviceCapacity, DeviceClass, ResourceSlice};
use ksched_dra::allocator::{AllocatedView, Features, NodeCounters, NodeDevice, SliceIndex};
use ksched_dra::cel::{CelCache, DeviceView};
use ksched_dra::manager::SharedDraManager;
use ksched_dra::quantity::Quantity;
use ksched_framework::NodeInfo;
use rustc_hash::FxHashMap;

use super::measure::{self, Device, NodeState};

/// One device of a node as indexed.
#[derive(Debug, Clone)]
struct Indexed {
    device: NodeDevice,
    /// The configured capacity, or `None` when the device does not publish it.
    capacity: Option<i64>,
    signature: usize,
}

/// Per pool of one driver, the nodes with devices from it.
type PoolNodes = FxHashMap<Box<str>, Vec<Box<str>>>;

/// A node's indexed devices and the pools they come from.
#[derive(Debug, Default)]
struct NodeDevices {
    devices: Vec<Indexed>,
    /// `(driver, pool)` of the devices, without repeats.
    pools: Vec<(Box<str>, Box<str>)>,
    /// Some device draws on shared counters (a partitionable device): which are free then
    /// depends on what else of the pool is allocated.
    counters: bool,
}

/// A distinct device description (driver, attributes, capacity): devices alike answer every
/// selector alike, so selectors run once per description.
#[derive(Debug, Clone)]
struct Signature {
    slice: Arc<ResourceSlice>,
    index: usize,
    selected: bool,
    classes: u64,
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
    Quantity::of(q).map(|v| quantity_value(&v)).unwrap_or(0)
}

/// Taints that keep pods off a device unless they tolerate it: the measure counts such a
/// device as unusable.
fn forbids_scheduling(d: &ApiDevice) -> bool {
    d.taints.iter().flatten().any(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
}

/// The measured devices of the cluster: per node, lazily, from the slice index they were
/// built for.
pub struct DeviceIndex {
    slices: Arc<SliceIndex>,
    class: Arc<DeviceClass>,
    class_selectors: Vec<String>,
    capacity_name: Option<String>,
    by_node: FxHashMap<Box<str>, Arc<NodeDevices>>,
    /// Per driver and pool, the nodes indexed so far whose devices come from it.
    pool_nodes: FxHashMap<Box<str>, PoolNodes>,
    signatures: Vec<Signature>,
    seen: FxHashMap<String, usize>,
    /// Eligibility classes whose bits are set.
    classes_done: usize,
    /// The selector sets of the eligibility classes set so far.
    classes: Vec<Vec<String>>,
    /// Bumped whenever what a node's devices look like may have changed.
    pub version: u64,
    /// The most common capacity among the devices seen (whole-device demand in capacity units).
    pub typical_capacity: i64,
    /// That capacity's description (its request policy rounds shares as allocation does).
    typical: Option<DeviceCapacity>,
}

impl std::fmt::Debug for DeviceIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceIndex")
            .field("class", &self.class.metadata.name)
            .field("capacity_name", &self.capacity_name)
            .field("nodes", &self.by_node.len())
            .finish_non_exhaustive()
    }
}

impl DeviceIndex {
    /// An index of the devices `class` selects in `slices`; `capacity` names the consumable
    /// capacity measured.
    pub fn new(
        cel: &CelCache,
        slices: Arc<SliceIndex>,
        all: &[Arc<ResourceSlice>],
        class: Arc<DeviceClass>,
        capacity: Option<&str>,
        version: u64,
    ) -> DeviceIndex {
        let class_selectors = class_selectors(&class);
        let mut index = DeviceIndex {
            slices,
            class,
            class_selectors,
            capacity_name: capacity.map(str::to_string),
            by_node: FxHashMap::default(),
            pool_nodes: FxHashMap::default(),
            signatures: Vec::new(),
            seen: FxHashMap::default(),
            classes_done: 0,
            classes: Vec::new(),
            version,
            typical_capacity: 1,
            typical: None,
        };
        // The typical capacity is the cluster's, not the first node's: count every
        // node-local device the class selects once.
        // Keyed by the whole capacity (its request policy too), in first-seen order so that
        // ties go the same way every run.
        let mut capacities: Vec<(Option<DeviceCapacity>, usize)> = Vec::new();
        for s in all.iter().filter(|s| s.spec.node_name.as_deref().is_some_and(|n| !n.is_empty())) {
            for i in 0..s.spec.devices.as_ref().map_or(0, Vec::len) {
                let sig = index.signature(cel, s, i);
                if !index.signatures[sig].selected {
                    continue;
                }
                let cap = capacity.and_then(|c| device_of(s, i).capacity.as_ref()?.get(c));
                match capacities.iter_mut().find(|(c, _)| c.as_ref() == cap) {
                    Some((_, n)) => *n += 1,
                    None => capacities.push((cap.cloned(), 1)),
                }
            }
        }
        let value = |c: &Option<DeviceCapacity>| c.as_ref().map_or(1, |c| quantity(&c.value));
        let mut best: Option<&(Option<DeviceCapacity>, usize)> = None;
        for e in &capacities {
            if best.is_none_or(|b| (e.1, value(&e.0)) > (b.1, value(&b.0))) {
                best = Some(e);
            }
        }
        if let Some((d, _)) = best {
            index.typical_capacity = value(d);
            index.typical = d.clone();
        }
        index
    }

    /// True when the index was built from these slices and this class.
    pub fn is_current(&self, slices: &Arc<SliceIndex>, class: &Arc<DeviceClass>) -> bool {
        Arc::ptr_eq(&self.slices, slices) && Arc::ptr_eq(&self.class, class)
    }

    /// The signature of a device, added (and matched against the class and the eligibility
    /// classes known) when new.
    fn signature(&mut self, cel: &CelCache, s: &Arc<ResourceSlice>, i: usize) -> usize {
        let d = device_of(s, i);
        let key = serde_json::to_string(&(&s.spec.driver, &d.attributes, &d.capacity, d.allow_multiple_allocations))
            .unwrap_or_default();
        if let Some(&k) = self.seen.get(&key) {
            return k;
        }
        let selected = matches_all(cel, &self.class_selectors, s, i);
        let mut classes = 0u64;
        for (c, selectors) in self.classes.iter().enumerate() {
            if matches_all(cel, selectors, s, i) {
                classes |= 1u64 << c;
            }
        }
        self.signatures.push(Signature { slice: s.clone(), index: i, selected, classes });
        self.seen.insert(key, self.signatures.len() - 1);
        self.signatures.len() - 1
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
        self.classes = classes.to_vec();
        self.classes_done = classes.len();
        self.version += 1;
        true
    }

    /// What a share request of `requested` takes of a typical device, after its request policy.
    pub fn share_amount(&self, requested: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
        match &self.typical {
            Some(cap) => quantity_value(&ksched_dra::allocator::consumed_by_share(requested, cap)),
            None => quantity(requested),
        }
    }

    /// The node's devices, indexed on first use.
    fn node_devices(&mut self, cel: &CelCache, node: &NodeInfo, features: &Features) -> Arc<NodeDevices> {
        if let Some(d) = self.by_node.get(node.name()) {
            return d.clone();
        }
        let listed = match node.node() {
            Some(n) => self.slices.node_devices(n, features).unwrap_or_default(),
            None => Vec::new(),
        };
        let mut out = NodeDevices::default();
        for device in listed {
            // Only node-local devices: a pool reachable from several nodes is not this node's
            // to lose.
            if device.slice.spec.node_name.as_deref() != Some(node.name()) {
                continue;
            }
            let sig = self.signature(cel, &device.slice, device.index);
            if !self.signatures[sig].selected || (features.device_taints && forbids_scheduling(device.device())) {
                continue;
            }
            let cap = self
                .capacity_name
                .as_deref()
                .and_then(|c| device.device().capacity.as_ref()?.get(c))
                .map(|c| quantity(&c.value));
            let spec = &device.slice.spec;
            if !out.pools.iter().any(|(d, p)| **d == *spec.driver && **p == *spec.pool.name) {
                out.pools.push((spec.driver.as_str().into(), spec.pool.name.as_str().into()));
            }
            out.counters |= device.device().consumes_counters.as_ref().is_some_and(|c| !c.is_empty());
            out.devices.push(Indexed { device, capacity: cap, signature: sig });
        }
        for (driver, pool) in &out.pools {
            self.pool_nodes
                .entry(driver.clone())
                .or_default()
                .entry(pool.clone())
                .or_default()
                .push(node.name().into());
        }
        let out = Arc::new(out);
        self.by_node.insert(node.name().into(), out.clone());
        out
    }

    /// The nodes indexed so far with devices from this pool (names of nodes since removed may
    /// remain).
    pub fn nodes_of_pool(&self, driver: &str, pool: &str) -> &[Box<str>] {
        self.pool_nodes.get(driver).and_then(|p| p.get(pool)).map_or(&[], Vec::as_slice)
    }

    /// The classes bits of a device.
    fn classes_of(&self, d: &Indexed) -> u64 {
        self.signatures[d.signature].classes
    }
}

/// A node's measured devices that draw on shared counters, through the allocator's counter
/// model as it stood when the node was read.
#[derive(Debug)]
struct Coupled {
    counters: NodeCounters,
    /// The measured devices, in the node state's order.
    devices: Vec<NodeDevice>,
    /// Per device, the others drawing on one of its counter sets: only those can be lost
    /// with it.
    siblings: Vec<Vec<usize>>,
}

impl Coupled {
    fn new(counters: NodeCounters, devices: Vec<NodeDevice>) -> Self {
        let mut by_set: FxHashMap<(&str, &str, &str), Vec<usize>> = FxHashMap::default();
        for (i, d) in devices.iter().enumerate() {
            let spec = &d.slice.spec;
            for c in d.device().consumes_counters.iter().flatten() {
                let set = by_set.entry((&spec.driver, &spec.pool.name, &c.counter_set)).or_default();
                if set.last() != Some(&i) {
                    set.push(i);
                }
            }
        }
        let mut siblings = vec![Vec::new(); devices.len()];
        for set in by_set.values() {
            for &i in set {
                siblings[i].extend(set.iter().copied().filter(|&j| j != i));
            }
        }
        for s in &mut siblings {
            s.sort_unstable();
            s.dedup();
        }
        Coupled { counters, devices, siblings }
    }
}

impl measure::Counters for Coupled {
    fn fits_after(&self, taken: &[usize], device: usize) -> bool {
        let mut attempt = self.counters.attempt();
        taken.iter().all(|&t| attempt.take(&self.devices[t])) && attempt.fits(&self.devices[device])
    }

    fn lost_after(&self, taken: &[usize]) -> Vec<usize> {
        let mut attempt = self.counters.attempt();
        if !taken.iter().all(|&t| attempt.take(&self.devices[t])) {
            // Not a choice allocation could make: nothing to say about the rest.
            return Vec::new();
        }
        let mut candidates: Vec<usize> =
            taken.iter().flat_map(|&t| self.siblings[t].iter().copied()).filter(|j| !taken.contains(j)).collect();
        candidates.sort_unstable();
        candidates.dedup();
        candidates.retain(|&j| !attempt.fits(&self.devices[j]));
        candidates
    }
}

/// A digest of the allocation revisions of the pools a node's devices come from.
fn devices_revision(devices: &NodeDevices, allocated: &dyn AllocatedView) -> u64 {
    devices.pools.iter().fold(0u64, |acc, (d, p)| {
        acc.wrapping_mul(0x100_0000_01b3).wrapping_add(allocated.pool_revision(d, p).wrapping_add(1))
    })
}

/// One node as last read.
#[derive(Debug, Clone)]
pub struct NodeRead {
    /// The node's generation when read.
    pub generation: u64,
    /// The index version when read.
    pub index_version: u64,
    /// Its pools' allocation revisions when read.
    pub devices_revision: u64,
    /// What it looked like.
    pub state: Arc<NodeState>,
}

/// Reads nodes' devices and keeps each node's last reading until something it depends on
/// changes (see the module docs). One per plugin instance: each keeps its own classes.
#[derive(Debug)]
pub struct DeviceTracker {
    class_name: String,
    capacity: Option<String>,
    cpu: bool,
    memory: bool,
    index: Option<DeviceIndex>,
    versions: u64,
    read: FxHashMap<Box<str>, NodeRead>,
}

impl DeviceTracker {
    /// A tracker of the devices of DeviceClass `class_name`, measuring the consumable capacity
    /// `capacity`; `cpu` and `memory` say whether node states carry the free cpu and memory.
    pub fn new(class_name: &str, capacity: Option<&str>, cpu: bool, memory: bool) -> Self {
        DeviceTracker {
            class_name: class_name.to_string(),
            capacity: capacity.map(str::to_string),
            cpu,
            memory,
            index: None,
            versions: 0,
            read: FxHashMap::default(),
        }
    }

    /// Brings the index up to date with the slices, the class and the eligibility `classes`
    /// (`classes[c]`: class `c`'s selectors); `false` when the DeviceClass does not exist.
    pub fn refresh(&mut self, dra: &dyn SharedDraManager, classes: &[Vec<String>]) -> bool {
        let Some(class) = dra.device_class(&self.class_name) else { return false };
        let slices = dra.slice_index();
        let cel = dra.cel();
        if !self.index.as_ref().is_some_and(|i| i.is_current(&slices, &class)) {
            self.versions += 1;
            let all = slices.all_slices().to_vec();
            self.index = Some(DeviceIndex::new(&cel, slices, &all, class, self.capacity.as_deref(), self.versions));
            self.read.clear();
        }
        let Some(index) = self.index.as_mut() else { return false };
        if index.add_classes(&cel, classes) {
            self.versions += 1;
            index.version = self.versions;
        }
        true
    }

    /// The current index (after [`DeviceTracker::refresh`]).
    pub fn index(&self) -> Option<&DeviceIndex> {
        self.index.as_ref()
    }

    /// What a share request of `requested` takes of a typical device: rounded by its request
    /// policy once an index exists, as written before.
    pub fn share_amount(&self, requested: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
        self.index.as_ref().map_or_else(|| quantity(requested), |i| i.share_amount(requested))
    }

    /// The node as the measure sees it now, and whether it was read afresh: its devices with
    /// what `allocated` leaves free of them, and its free cpu and memory when counted.
    pub fn node_state(
        &mut self,
        dra: &dyn SharedDraManager,
        features: &Features,
        node: &NodeInfo,
        allocated: &dyn AllocatedView,
    ) -> Option<(Arc<NodeState>, bool)> {
        let cel = dra.cel();
        let index = self.index.as_mut()?;
        let devices = index.node_devices(&cel, node, features);
        let revision = devices_revision(&devices, allocated);
        if let Some(r) = self.read.get(node.name()) {
            if r.generation == node.generation && r.index_version == index.version && r.devices_revision == revision {
                return Some((r.state.clone(), false));
            }
        }
        let capacity = self.capacity.as_deref();
        // The allocator's counter check, not a count of our own: a partition allocated next to
        // a device (measured or not) leaves it nothing when their counters no longer cover both.
        let counters = match (devices.counters, node.node()) {
            (true, Some(n)) => Some(index.slices.node_counters(n, features, allocated).ok()),
            _ => None,
        };
        let states = devices
            .devices
            .iter()
            .map(|d| {
                let spec = &d.device.slice.spec;
                let name = &d.device.device().name;
                let (driver, pool) = (spec.driver.as_str(), spec.pool.name.as_str());
                let allowed = match &counters {
                    None => true,
                    Some(c) => c.as_ref().is_some_and(|c| c.allows(&d.device)),
                };
                let (cap, free) = match d.capacity {
                    Some(cap) if !allowed => (cap, 0),
                    Some(cap) if !allocated.is_taken(driver, pool, name) => {
                        let used = capacity
                            .and_then(|c| Some(quantity_value(allocated.consumed(driver, pool, name)?.get(c)?)))
                            .unwrap_or(0);
                        (cap, cap - used)
                    }
                    Some(cap) => (cap, 0),
                    None => (1, i64::from(allowed && !allocated.is_allocated(driver, pool, name))),
                };
                Device { capacity: cap, free, classes: index.classes_of(d) }
            })
            .collect();
        let state = Arc::new(NodeState {
            milli_cpu: self.cpu.then(|| node.allocatable.milli_cpu - node.requested.milli_cpu),
            memory: self.memory.then(|| node.allocatable.memory - node.requested.memory),
            devices: states,
            counters: counters.flatten().map(|c| {
                Arc::new(Coupled::new(c, devices.devices.iter().map(|d| d.device.clone()).collect()))
                    as Arc<dyn measure::Counters>
            }),
        });
        self.read.insert(
            node.name().into(),
            NodeRead {
                generation: node.generation,
                index_version: index.version,
                devices_revision: revision,
                state: state.clone(),
            },
        );
        Some((state, true))
    }

    /// The node's state as last read.
    pub fn read_state(&self, node: &str) -> Option<Arc<NodeState>> {
        self.read.get(node).map(|r| r.state.clone())
    }

    /// Forgets nodes not in `keep`.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.read.retain(|n, _| keep(n));
        if let Some(index) = self.index.as_mut() {
            index.by_node.retain(|n, _| keep(n));
        }
    }

    /// Nodes remembered.
    pub fn len(&self) -> usize {
        self.read.len()
    }

    /// True when no node is remembered.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
    }
}

fn quantity_value(q: &Quantity) -> i64 {
    q.as_f64().round() as i64
}
