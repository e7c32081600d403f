//! The structured-parameters allocator: given the devices published in ResourceSlices, the
//! DeviceClasses and what is already allocated, finds devices for a pod's unallocated claims on
//! one node.
//!
//! It reproduces the allocator Kubernetes v1.36 runs by default (the "incubating" one: the
//! default feature gates enable DRAConsumableCapacity and DRADeviceBindingConditions, which the
//! "stable" one lacks): a depth-first search over claims, requests and devices in a fixed
//! order (pools by driver and name, slices by name, devices as listed) that takes the first
//! complete solution and backtracks on constraint, counter or capacity conflicts. The same
//! inputs give an allocation exactly when upstream's does, and the same one. The one departure
//! is opt-in: [`DeviceSelection::BestFit`] (module `selection`) reorders the candidates of
//! requests for part of one shareable device.

mod capacity;
mod constraints;
mod counters;
mod pools;
mod search;
mod selection;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};

use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceCapacity, DeviceClass,
    DeviceRequestAllocationResult, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use ksched_framework::node::Node;
use parking_lot::Mutex;

use crate::cel::CelCache;
use crate::quantity::Quantity;

pub use capacity::Consumed;
use counters::CounterSets;
pub use counters::{CounterAttempt, NodeCounters};
use pools::Pool;
pub use selection::DeviceSelection;

/// Allocator features, as the feature gates set them. [`Features::default`] is v1.36's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// DRAAdminAccess.
    pub admin_access: bool,
    /// DRAPrioritizedList (`firstAvailable`).
    pub prioritized_list: bool,
    /// DRAPartitionableDevices (shared counters, per-device node selection).
    pub partitionable_devices: bool,
    /// DRADeviceTaints.
    pub device_taints: bool,
    /// DRADeviceBindingConditions together with DRAResourceClaimDeviceStatus.
    pub device_binding_and_status: bool,
    /// DRAConsumableCapacity.
    pub consumable_capacity: bool,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            admin_access: true,
            prioritized_list: true,
            partitionable_devices: true,
            device_taints: true,
            device_binding_and_status: true,
            consumable_capacity: true,
        }
    }
}

/// A device: driver, pool and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// Driver name.
    pub driver: String,
    /// Pool name.
    pub pool: String,
    /// Device name.
    pub device: String,
}

impl DeviceId {
    /// A device ID.
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        DeviceId { driver: driver.into(), pool: pool.into(), device: device.into() }
    }
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// Devices with a use count, looked up by borrowed parts without building a [`DeviceId`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceSet(HashMap<String, HashMap<String, HashMap<String, u32>>>);

impl DeviceSet {
    /// Adds one use of a device.
    pub fn insert(&mut self, id: &DeviceId) {
        *self
            .0
            .entry(id.driver.clone())
            .or_default()
            .entry(id.pool.clone())
            .or_default()
            .entry(id.device.clone())
            .or_default() += 1;
    }

    /// Drops one use of a device.
    pub fn remove(&mut self, id: &DeviceId) {
        let Some(pools) = self.0.get_mut(&id.driver) else { return };
        let Some(devices) = pools.get_mut(&id.pool) else { return };
        if let Some(n) = devices.get_mut(&id.device) {
            *n -= 1;
            if *n == 0 {
                devices.remove(&id.device);
            }
        }
    }

    /// True when the device is in use.
    pub fn contains(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.0.get(driver).and_then(|p| p.get(pool)).is_some_and(|d| d.contains_key(device))
    }

    /// Marks in `out` (one flag per name of `devices`) the devices of one pool in use.
    pub fn mark_in_pool(&self, driver: &str, pool: &str, devices: &[&str], out: &mut [bool]) {
        let Some(used) = self.0.get(driver).and_then(|p| p.get(pool)) else { return };
        for (flag, d) in out.iter_mut().zip(devices) {
            *flag |= used.contains_key(*d);
        }
    }

    /// Number of distinct devices.
    pub fn len(&self) -> usize {
        self.0.values().flat_map(|p| p.values()).map(HashMap::len).sum()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All devices (unordered).
    pub fn iter(&self) -> impl Iterator<Item = DeviceId> + '_ {
        self.0
            .iter()
            .flat_map(|(dr, p)| p.iter().flat_map(move |(pool, ds)| ds.keys().map(move |d| DeviceId::new(dr, pool, d))))
    }
}

/// What the allocator needs to know about devices allocated outside the current attempt.
pub trait AllocatedView: Send + Sync {
    /// True when the device is allocated exclusively.
    fn is_taken(&self, driver: &str, pool: &str, device: &str) -> bool;
    /// Sets the flag in `out` of each device of `devices` (all of one pool) that is allocated
    /// exclusively: [`AllocatedView::is_taken`] for a whole pool at once, which views that lock
    /// or look up the pool per call should do in one go.
    fn mark_taken(&self, driver: &str, pool: &str, devices: &[&str], out: &mut [bool]) {
        for (flag, d) in out.iter_mut().zip(devices) {
            *flag |= self.is_taken(driver, pool, d);
        }
    }
    /// True when the device is taken at all, exclusively or in part (upstream's
    /// `IsDeviceAllocated`): such a device consumes its counters.
    fn is_allocated(&self, driver: &str, pool: &str, device: &str) -> bool;
    /// Capacity consumed by shared allocations of the device, if any.
    fn consumed(&self, driver: &str, pool: &str, device: &str) -> Option<Consumed>;
    /// A number that changes whenever an allocation of a device of the pool is recorded or
    /// forgotten, so that views of a pool's devices kept across cycles know when to read them
    /// again (a claim deallocated after its pod left changes no node, only this).
    fn pool_revision(&self, driver: &str, pool: &str) -> u64;
    /// Where the view's record of allocation changes stands, for a later
    /// [`AllocatedView::pools_changed_since`]; `None` when it keeps none (readers then look at
    /// every pool each time).
    fn change_cursor(&self) -> Option<ChangeCursor> {
        None
    }
    /// Adds to `out` the pools whose [`AllocatedView::pool_revision`] may have changed since
    /// `cursor` (besides those with allocations in flight, see
    /// [`AllocatedView::pools_in_flight`]) and returns where the record stands now; `None`
    /// when the view cannot tell (another record, or changes no longer kept).
    fn pools_changed_since(&self, cursor: ChangeCursor, out: &mut Vec<(String, String)>) -> Option<ChangeCursor> {
        let _ = (cursor, out);
        None
    }
    /// Adds to `out` the pools with allocations in flight, whose revisions move with the set
    /// of claims in flight rather than with recorded changes.
    fn pools_in_flight(&self, out: &mut Vec<(String, String)>) {
        let _ = out;
    }
}

/// What is allocated already (in claims' status, assumed, or in flight).
#[derive(Debug, Clone, Default)]
pub struct AllocatedState {
    /// Devices allocated exclusively.
    pub devices: DeviceSet,
    /// Devices with at least one shared allocation (a `shareID`).
    pub shared: DeviceSet,
    /// The capacity consumed by shared allocations, per device.
    pub capacity: HashMap<DeviceId, Consumed>,
    /// Per driver and pool, bumped by every allocation recorded or forgotten there (see
    /// [`AllocatedView::pool_revision`]); per level, so lookups by `&str` build no key.
    pub revisions: HashMap<String, HashMap<String, u64>>,
    /// The same bumps in order, for readers that only want the pools changed since they last
    /// looked.
    pub changes: PoolChanges,
}

/// How many pool changes [`PoolChanges`] keeps: a reader further behind reads every pool.
const POOL_CHANGES_KEPT: usize = 4096;

/// The latest allocation changes of a state, as `(driver, pool)` in order.
#[derive(Debug, Clone, Default)]
pub struct PoolChanges {
    /// Changes no longer kept (the position of `log[0]`).
    dropped: u64,
    log: std::collections::VecDeque<(Box<str>, Box<str>)>,
}

impl PoolChanges {
    fn record(&mut self, driver: &str, pool: &str) {
        self.log.push_back((driver.into(), pool.into()));
        if self.log.len() > POOL_CHANGES_KEPT {
            self.log.pop_front();
            self.dropped += 1;
        }
    }

    /// The position after the last change.
    pub fn position(&self) -> u64 {
        self.dropped + self.log.len() as u64
    }

    /// Adds to `out` the pools changed after `position`; `false` when those are no longer
    /// all kept.
    pub fn since(&self, position: u64, out: &mut Vec<(String, String)>) -> bool {
        if position < self.dropped || position > self.position() {
            return false;
        }
        let skip = (position - self.dropped) as usize;
        out.extend(self.log.iter().skip(skip).map(|(d, p)| (d.to_string(), p.to_string())));
        true
    }
}

/// Where a reader stands in the allocation changes of a view (see
/// [`AllocatedView::change_cursor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeCursor {
    /// Which record of changes (views over other states have other records).
    pub source: usize,
    /// The position in it.
    pub position: u64,
}

fn devices_of(allocation: &AllocationResult) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
    allocation.devices.iter().flat_map(|d| d.results.iter().flatten()).filter(|r| r.admin_access != Some(true))
}

fn consumed_of(r: &DeviceRequestAllocationResult) -> Option<Consumed> {
    let cc = r.consumed_capacity.as_ref()?;
    Some(cc.iter().map(|(k, v)| (k.clone(), Quantity::of(v).unwrap_or_default())).collect())
}

impl AllocatedState {
    fn bump(&mut self, driver: &str, pool: &str) {
        self.changes.record(driver, pool);
        let pools = match self.revisions.get_mut(driver) {
            Some(p) => p,
            None => self.revisions.entry(driver.to_string()).or_default(),
        };
        match pools.get_mut(pool) {
            Some(r) => *r += 1,
            None => {
                pools.insert(pool.to_string(), 1);
            }
        }
    }

    /// Records the devices of an allocation result (admin-access devices are not taken).
    pub fn add_allocation(&mut self, allocation: &AllocationResult) {
        for r in devices_of(allocation) {
            self.bump(&r.driver, &r.pool);
            let id = DeviceId::new(&r.driver, &r.pool, &r.device);
            if r.share_id.is_some() {
                self.shared.insert(&id);
                if let Some(add) = consumed_of(r) {
                    capacity::add_into(self.capacity.entry(id).or_default(), &add);
                }
                continue;
            }
            self.devices.insert(&id);
        }
    }

    /// Forgets the devices of an allocation result recorded before.
    pub fn remove_allocation(&mut self, allocation: &AllocationResult) {
        for r in devices_of(allocation) {
            self.bump(&r.driver, &r.pool);
            let id = DeviceId::new(&r.driver, &r.pool, &r.device);
            if r.share_id.is_some() {
                self.shared.remove(&id);
                if let Some(sub) = consumed_of(r) {
                    if let Some(c) = self.capacity.get_mut(&id) {
                        capacity::sub_from(c, &sub);
                        if c.values().all(|q| q.is_zero()) {
                            self.capacity.remove(&id);
                        }
                    }
                }
                continue;
            }
            self.devices.remove(&id);
        }
    }
}

impl AllocatedView for AllocatedState {
    fn is_taken(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.devices.contains(driver, pool, device)
    }

    fn mark_taken(&self, driver: &str, pool: &str, devices: &[&str], out: &mut [bool]) {
        self.devices.mark_in_pool(driver, pool, devices, out);
    }

    fn is_allocated(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.devices.contains(driver, pool, device)
            || self.shared.contains(driver, pool, device)
            || (!self.capacity.is_empty() && self.capacity.contains_key(&DeviceId::new(driver, pool, device)))
    }

    fn consumed(&self, driver: &str, pool: &str, device: &str) -> Option<Consumed> {
        // Most clusters share no device: skip building the key.
        if self.capacity.is_empty() {
            return None;
        }
        self.capacity.get(&DeviceId::new(driver, pool, device)).cloned()
    }

    fn pool_revision(&self, driver: &str, pool: &str) -> u64 {
        self.revisions.get(driver).and_then(|p| p.get(pool)).copied().unwrap_or(0)
    }
}

/// Where DeviceClasses come from.
pub trait DeviceClassLister: Send + Sync {
    /// A class by name.
    fn get(&self, name: &str) -> Option<Arc<DeviceClass>>;
}

impl<F: Fn(&str) -> Option<Arc<DeviceClass>> + Send + Sync> DeviceClassLister for F {
    fn get(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self(name)
    }
}

/// Why allocation stopped without an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocError {
    /// Something is wrong with a claim, class or CEL expression: scheduling of the pod stops
    /// with this error, whatever the node.
    Fatal(String),
    /// Only this node cannot be used (invalid pools); the text explains why.
    NodeFailed(String),
    /// The deadline passed.
    Timeout,
}

/// Generates share IDs for allocations of shareable devices.
pub type ShareIdSource = Arc<dyn Fn() -> String + Send + Sync>;

/// An allocator for one scheduling cycle: the cluster state is fixed at creation, and
/// [`Allocator::allocate`] can be called for many nodes (from several threads).
pub struct Allocator {
    features: Features,
    state: Arc<dyn AllocatedView>,
    classes: Arc<dyn DeviceClassLister>,
    slices: Arc<SliceIndex>,
    cel: Arc<CelCache>,
    /// Counters left per pool after the allocated devices, computed on first use. Keyed by
    /// the pool name alone, as upstream does.
    available_counters: Mutex<HashMap<String, Arc<CounterSets>>>,
    share_ids: ShareIdSource,
    invocations: AtomicU64,
    selections: Arc<SelectorResults>,
    device_selection: DeviceSelection,
}

/// Selector results per (expression, device), kept across allocators: a selector's verdict
/// depends only on the expression and the device, and a slice object never changes (an update
/// is a new object), so each device is evaluated once per expression, not once per pod and node.
#[derive(Default)]
pub struct SelectorResults {
    /// Keyed by the addresses of the compiled expression and the slice, and the device index;
    /// the value keeps both alive so the addresses cannot be reused while cached.
    results: Mutex<HashMap<SelectorKey, Verdict>>,
}

/// (compiled expression address, slice address, device index).
type SelectorKey = (usize, usize, usize);
/// The verdict, and what keeps the key's addresses alive.
type Verdict = (bool, Arc<crate::cel::Compiled>, Arc<ResourceSlice>);

/// More entries than this and the cache starts over (slices replaced by updates stay cached
/// otherwise).
const SELECTOR_RESULTS_LIMIT: usize = 1 << 20;

impl SelectorResults {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn get(&self, c: &Arc<crate::cel::Compiled>, slice: &Arc<ResourceSlice>, device: usize) -> Option<bool> {
        let key = (Arc::as_ptr(c) as usize, Arc::as_ptr(slice) as usize, device);
        self.results.lock().get(&key).map(|(b, _, _)| *b)
    }

    pub(crate) fn put(&self, c: &Arc<crate::cel::Compiled>, slice: &Arc<ResourceSlice>, device: usize, verdict: bool) {
        let key = (Arc::as_ptr(c) as usize, Arc::as_ptr(slice) as usize, device);
        let mut g = self.results.lock();
        if g.len() >= SELECTOR_RESULTS_LIMIT {
            g.clear();
        }
        g.insert(key, (verdict, c.clone(), slice.clone()));
    }
}

/// The slices grouped for per-node lookups: built once per set of slices (not per cycle),
/// since grouping thousands of node-local slices costs more than a whole allocation.
pub struct SliceIndex {
    on_node: HashMap<String, Vec<Arc<ResourceSlice>>>,
    shared: Vec<Arc<ResourceSlice>>,
    all: Vec<Arc<ResourceSlice>>,
    /// The pools gathered per node that has slices, when no slice depends on node labels
    /// (every slice is local to one node): they are then a function of the node's name and
    /// these slices alone, and gathering them was a fifth of every Filter call. Filled on
    /// first use; the map itself never changes, so lookups take no lock.
    node_pools: Option<HashMap<String, OnceLock<GatheredPools>>>,
}

/// Pools gathered for one node, with the features they were gathered under.
type GatheredPools = (Features, Vec<Pool>);

impl SliceIndex {
    /// Groups `slices` by the node they are local to; the rest may serve any node.
    pub fn new(slices: Vec<Arc<ResourceSlice>>) -> Self {
        let mut on_node: HashMap<String, Vec<Arc<ResourceSlice>>> = HashMap::default();
        let mut shared = Vec::new();
        for s in &slices {
            match s.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                Some(n) if s.spec.shared_counters.as_ref().is_none_or(Vec::is_empty) => {
                    on_node.entry(n.to_string()).or_default().push(s.clone())
                }
                _ => shared.push(s.clone()),
            }
        }
        let node_pools = shared.is_empty().then(|| on_node.keys().map(|n| (n.clone(), OnceLock::new())).collect());
        SliceIndex { on_node, shared, all: slices, node_pools }
    }

    /// The pools reachable from `node`.
    fn pools_for(&self, node: &Node, features: &Features) -> Result<Cow<'_, [Pool]>, String> {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let gather = || {
            let mut for_node: Vec<Arc<ResourceSlice>> = self.on_node.get(node_name).cloned().unwrap_or_default();
            for_node.extend(self.shared.iter().cloned());
            pools::gather_pools(&for_node, node, features, &self.all)
        };
        let Some(cache) = &self.node_pools else { return gather().map(Cow::Owned) };
        let Some(slot) = cache.get(node_name) else {
            // No slice for this node and none shared: nothing to gather.
            return Ok(Cow::Borrowed(&[]));
        };
        if let Some((f, pools)) = slot.get() {
            if f == features {
                return Ok(Cow::Borrowed(pools));
            }
            return gather().map(Cow::Owned);
        }
        let pools = gather()?;
        let (f, cached) = slot.get_or_init(|| (*features, pools));
        if f != features {
            // Another thread cached them for other features first (never in one scheduler).
            return gather().map(Cow::Owned);
        }
        Ok(Cow::Borrowed(cached))
    }
}

/// A device the allocator may give a claim on some node: `slice.spec.devices[index]`.
#[derive(Debug, Clone)]
pub struct NodeDevice {
    /// The slice that lists it.
    pub slice: Arc<ResourceSlice>,
    /// Its position in the slice's devices.
    pub index: usize,
}

impl NodeDevice {
    /// The device itself.
    pub fn device(&self) -> &Device {
        &self.slice.spec.devices.as_deref().unwrap_or_default()[self.index]
    }
}

impl SliceIndex {
    /// Every slice indexed.
    pub fn all_slices(&self) -> &[Arc<ResourceSlice>] {
        &self.all
    }

    /// The devices the allocator considers for `node`, in the order it tries them: those of the
    /// pools reachable from the node at their newest generation, leaving out pools that are
    /// incomplete (not every slice of the generation published) or invalid, as allocation does.
    /// Other code that reasons about what a node can still be given (a placement policy's view
    /// of free devices) reads them here, so that it sees the devices allocation sees.
    pub fn node_devices(&self, node: &Node, features: &Features) -> Result<Vec<NodeDevice>, String> {
        let pools = self.pools_for(node, features)?;
        let mut out = Vec::new();
        for pool in pools.iter().filter(|p| !p.incomplete && !p.invalid) {
            for slice in &pool.slices {
                let n = slice.spec.devices.as_ref().map_or(0, Vec::len);
                out.extend((0..n).map(|index| NodeDevice { slice: slice.clone(), index }));
            }
        }
        Ok(out)
    }
}

/// What a request for `requested` of a device's consumable capacity `capacity` consumes of
/// it, after the capacity's request policy (valid values, or valid range and step) rounds the
/// request up as allocation does. Whether the policy admits the amount at all is allocation's
/// question, not answered here.
pub fn consumed_by_share(requested: &ApiQuantity, capacity: &DeviceCapacity) -> Quantity {
    capacity::consumed_for(Some(requested), capacity)
}

impl Allocator {
    /// An allocator over the given state, classes and slices.
    pub fn new(
        features: Features,
        state: Arc<dyn AllocatedView>,
        classes: Arc<dyn DeviceClassLister>,
        slices: Vec<Arc<ResourceSlice>>,
        cel: Arc<CelCache>,
    ) -> Self {
        Self::with_index(features, state, classes, Arc::new(SliceIndex::new(slices)), cel)
    }

    /// An allocator over slices indexed before (shared by the cycles that see the same slices).
    pub fn with_index(
        features: Features,
        state: Arc<dyn AllocatedView>,
        classes: Arc<dyn DeviceClassLister>,
        slices: Arc<SliceIndex>,
        cel: Arc<CelCache>,
    ) -> Self {
        Allocator {
            features,
            state,
            classes,
            slices,
            cel,
            available_counters: Mutex::new(HashMap::default()),
            share_ids: Arc::new(|| uuid::Uuid::new_v4().to_string()),
            invocations: AtomicU64::new(0),
            selections: Arc::new(SelectorResults::new()),
            device_selection: DeviceSelection::FirstFit,
        }
    }

    /// Chooses among candidate devices with `selection` instead of upstream's first fit.
    pub fn with_device_selection(mut self, selection: DeviceSelection) -> Self {
        self.device_selection = selection;
        self
    }

    /// Shares selector results with other allocators (one cache per scheduler).
    pub fn with_selector_results(mut self, results: Arc<SelectorResults>) -> Self {
        self.selections = results;
        self
    }

    /// Replaces the share ID generator (tests want stable IDs).
    pub fn with_share_ids(mut self, source: ShareIdSource) -> Self {
        self.share_ids = source;
        self
    }

    /// How many search steps all calls took so far (a measure of backtracking).
    pub fn search_steps(&self) -> u64 {
        self.invocations.load(Ordering::Relaxed)
    }

    /// Finds devices for all `claims` on `node`: one result per claim, in order, or `None`
    /// when they do not fit. `deadline` bounds the search.
    pub fn allocate(
        &self,
        node: &Node,
        claims: &[&ResourceClaim],
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<AllocationResult>>, AllocError> {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        self.search(node, claims, deadline, |run| run.results(node_name))
    }

    /// Like [`Allocator::allocate`], but reports only which `firstAvailable` subrequests the
    /// allocation would use, without assembling its results: enough to filter and score a
    /// node. [`Allocator::allocate`] with the same inputs finds the same devices.
    pub fn fits(
        &self,
        node: &Node,
        claims: &[&ResourceClaim],
        deadline: Option<Instant>,
    ) -> Result<Option<Fit>, AllocError> {
        self.search(node, claims, deadline, |run| Ok(run.fit()))
    }

    /// Runs the search for `claims` on `node` and hands a successful one to `finish`.
    fn search<T>(
        &self,
        node: &Node,
        claims: &[&ResourceClaim],
        deadline: Option<Instant>,
        finish: impl FnOnce(&search::Run<'_>) -> Result<T, AllocError>,
    ) -> Result<Option<T>, AllocError> {
        let pools = self
            .slices
            .pools_for(node, &self.features)
            .map_err(|e| AllocError::Fatal(format!("gather pool information: {e}")))?;
        let mut run = search::Run::new(self, node, claims, pools, deadline);
        run.prepare()?;
        let found = run.search()?;
        self.invocations.fetch_add(run.steps, Ordering::Relaxed);
        if !found {
            if run.pools.iter().any(|p| p.invalid) {
                return Err(AllocError::NodeFailed("invalid resource pools were encountered".into()));
            }
            return Ok(None);
        }
        finish(&run).map(Some)
    }
}

/// What a successful search chose, short of the allocation results.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fit {
    /// Per claim, per request: the index of the `firstAvailable` subrequest allocated, or
    /// `None` for a request without subrequests.
    pub sub_requests: Vec<Vec<Option<usize>>>,
}

/// A device's binding conditions and binding failure conditions.
pub(crate) type BindingConditions = (Option<Vec<String>>, Option<Vec<String>>);

/// Builds the allocation results from a finished search.
pub(crate) fn device_result(
    request: String,
    id: &DeviceId,
    admin_access: Option<bool>,
    tolerations: Option<Vec<k8s_openapi::api::resource::v1::DeviceToleration>>,
    share_id: Option<String>,
    consumed: Option<BTreeMap<String, ApiQuantity>>,
    binding: Option<BindingConditions>,
) -> DeviceRequestAllocationResult {
    let (binding_conditions, binding_failure_conditions) = binding.unwrap_or_default();
    DeviceRequestAllocationResult {
        request,
        driver: id.driver.clone(),
        pool: id.pool.clone(),
        device: id.device.clone(),
        admin_access,
        tolerations,
        share_id,
        consumed_capacity: consumed,
        binding_conditions,
        binding_failure_conditions,
    }
}

/// The node selector an allocation restricts its claim to: the node itself when any device
/// is node-local or binds to its node, else the union of the slices' selector requirements,
/// else none (available everywhere).
pub(crate) fn node_selector_for(
    devices: &[(&ResourceSlice, &k8s_openapi::api::resource::v1::Device)],
    node_name: &str,
) -> Result<Option<NodeSelector>, String> {
    let mut term = NodeSelectorTerm::default();
    for (slice, device) in devices {
        let per_device = slice.spec.per_device_node_selection == Some(true);
        let (name, selector) = if per_device {
            (device.node_name.as_deref(), device.node_selector.as_ref())
        } else {
            (slice.spec.node_name.as_deref(), slice.spec.node_selector.as_ref())
        };
        if name.is_some() || device.binds_to_node == Some(true) {
            return Ok(Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node_name.to_string()]),
                    }]),
                    ..Default::default()
                }],
            }));
        }
        if let Some(sel) = selector {
            match sel.node_selector_terms.len() {
                0 => {}
                1 => {
                    let t = &sel.node_selector_terms[0];
                    add_requirements(t.match_fields.as_deref(), &mut term.match_fields);
                    add_requirements(t.match_expressions.as_deref(), &mut term.match_expressions);
                }
                n => return Err(format!("unsupported ResourceSlice.NodeSelector with {n} terms")),
            }
        }
    }
    let any = term.match_fields.as_ref().is_some_and(|v| !v.is_empty())
        || term.match_expressions.as_ref().is_some_and(|v| !v.is_empty());
    Ok(any.then(|| NodeSelector { node_selector_terms: vec![term] }))
}

fn add_requirements(from: Option<&[NodeSelectorRequirement]>, to: &mut Option<Vec<NodeSelectorRequirement>>) {
    for r in from.unwrap_or_default() {
        let values: HashSet<&String> = r.values.iter().flatten().collect();
        let present = to.iter().flatten().any(|e| {
            e.key == r.key && e.operator == r.operator && e.values.iter().flatten().collect::<HashSet<_>>() == values
        });
        if !present {
            to.get_or_insert_with(Vec::new).push(r.clone());
        }
    }
}

/// Source of a configuration entry in an allocation result.
pub(crate) fn config_entry(
    source: &str,
    requests: Option<Vec<String>>,
    opaque: Option<k8s_openapi::api::resource::v1::OpaqueDeviceConfiguration>,
) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration { source: source.into(), requests, opaque }
}

/// An empty allocation result for a claim (filled by the search).
pub(crate) fn empty_result() -> AllocationResult {
    AllocationResult { devices: Some(DeviceAllocationResult::default()), ..Default::default() }
}
