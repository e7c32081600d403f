//! The DRA state every profile shares (upstream's `DefaultDRAManager`): claims as the
//! scheduler sees them (informer objects overlaid with versions it wrote itself, the assume
//! cache), allocations in flight between Reserve and PreBind, the devices allocated in the
//! cluster, and the compiled CEL selectors.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use ksched_dra::allocator::{AllocatedState, AllocatedView, ChangeCursor, Consumed, SelectorResults, SliceIndex};
use ksched_dra::cel::CelCache;
use ksched_framework::listers::ClusterLister;
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap as HashMap;

fn key_of(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

fn rv_of(claim: &ResourceClaim) -> u64 {
    claim.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn uid_of(claim: &ResourceClaim) -> &str {
    claim.metadata.uid.as_deref().unwrap_or_default()
}

struct InFlight {
    claim: Arc<ResourceClaim>,
    sharers: usize,
}

/// Devices allocated by claims in the informer (or assumed), maintained incrementally: each
/// reconcile only looks at the claims the lister's journal (and the assume cache) report as
/// changed, and rescans all of them only when the journal cannot tell.
#[derive(Default)]
struct Committed {
    lister_revision: Option<u64>,
    assumed_revision: u64,
    /// Per claim (`namespace/name`): what was counted for it.
    claims: HashMap<String, Counted>,
    state: Arc<RwLock<AllocatedState>>,
}

/// The version of a claim whose allocation is counted in the committed state.
struct Counted {
    uid: String,
    resource_version: String,
    allocation: Option<AllocationResult>,
}

#[derive(Default)]
struct Inner {
    /// Assumed claims by UID.
    assumed: HashMap<String, Arc<ResourceClaim>>,
    assumed_revision: u64,
    /// Claims (`namespace/name`) whose assumed version came or went since the last reconcile.
    assumed_changed: Vec<String>,
    in_flight: HashMap<String, InFlight>,
}

/// The assumed version of a claim while the informer has not caught up with it; once the
/// informer has that version (or a newer one) the assumption is dropped.
fn overlay(inner: &mut Inner, api: Arc<ResourceClaim>) -> Arc<ResourceClaim> {
    let uid = uid_of(&api);
    match inner.assumed.get(uid) {
        Some(a) if rv_of(&api) < rv_of(a) => a.clone(),
        Some(_) => {
            inner.assumed.remove(uid);
            inner.assumed_revision += 1;
            inner.assumed_changed.push(key_of(&api));
            api
        }
        None => api,
    }
}

/// Makes the committed state count `claim` (the current version of the claim called `key`,
/// `None` once deleted) instead of whatever version was counted for it before.
fn count(
    counted: &mut HashMap<String, Counted>,
    state: &mut AllocatedState,
    key: String,
    claim: Option<&Arc<ResourceClaim>>,
) {
    let current = claim.map(|c| (uid_of(c), c.metadata.resource_version.as_deref().unwrap_or_default()));
    if let (Some(old), Some((uid, rv))) = (counted.get(&key), current) {
        if old.uid == uid && old.resource_version == rv {
            return;
        }
    }
    if let Some(old) = counted.remove(&key) {
        if let Some(a) = &old.allocation {
            state.remove_allocation(a);
        }
    }
    let Some(claim) = claim else { return };
    let allocation = claim.status.as_ref().and_then(|s| s.allocation.clone());
    if let Some(a) = &allocation {
        state.add_allocation(a);
    }
    counted.insert(
        key,
        Counted {
            uid: uid_of(claim).to_string(),
            resource_version: claim.metadata.resource_version.clone().unwrap_or_default(),
            allocation,
        },
    );
}

/// A slice list, the lister's slice revision when it was listed, and its index.
type IndexedSlices = (Vec<Arc<ResourceSlice>>, u64, Arc<SliceIndex>);

/// Shared DRA state; one per scheduler, reached through `Handle::shared`.
pub struct DraManager {
    lister: Arc<dyn ClusterLister>,
    cel: Arc<CelCache>,
    selections: Arc<SelectorResults>,
    inner: Mutex<Inner>,
    committed: Mutex<Committed>,
    /// The slices indexed per node, with the list they were built from.
    slice_index: Mutex<Option<IndexedSlices>>,
}

/// The allocated devices one scheduling cycle works with: committed allocations plus a
/// snapshot of those in flight.
struct ClusterAllocated {
    committed: Arc<RwLock<AllocatedState>>,
    in_flight: AllocatedState,
    /// Per driver and pool, a digest of the claims in flight there: it changes when the set
    /// does, even when one claim in flight replaces another.
    in_flight_claims: HashMap<String, HashMap<String, u64>>,
    /// Nothing is in flight (the common case: skip those lookups).
    none_in_flight: bool,
}

impl AllocatedView for ClusterAllocated {
    fn is_taken(&self, driver: &str, pool: &str, device: &str) -> bool {
        (!self.none_in_flight && self.in_flight.is_taken(driver, pool, device))
            || self.committed.read().is_taken(driver, pool, device)
    }

    fn mark_taken(&self, driver: &str, pool: &str, devices: &[&str], out: &mut [bool]) {
        self.committed.read().mark_taken(driver, pool, devices, out);
        if !self.none_in_flight {
            self.in_flight.mark_taken(driver, pool, devices, out);
        }
    }

    fn is_allocated(&self, driver: &str, pool: &str, device: &str) -> bool {
        self.in_flight.is_allocated(driver, pool, device) || self.committed.read().is_allocated(driver, pool, device)
    }

    fn consumed(&self, driver: &str, pool: &str, device: &str) -> Option<Consumed> {
        let a = self.committed.read().consumed(driver, pool, device);
        let b = self.in_flight.consumed(driver, pool, device);
        match (a, b) {
            (Some(mut a), Some(b)) => {
                for (k, v) in b {
                    a.entry(k).and_modify(|x| *x = *x + v).or_insert(v);
                }
                Some(a)
            }
            (a, b) => a.or(b),
        }
    }

    fn pool_revision(&self, driver: &str, pool: &str) -> u64 {
        let committed = self.committed.read().pool_revision(driver, pool);
        let in_flight = self.in_flight_claims.get(driver).and_then(|p| p.get(pool)).copied().unwrap_or(0);
        committed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ in_flight
    }

    fn change_cursor(&self) -> Option<ChangeCursor> {
        Some(ChangeCursor { source: self.source(), position: self.committed.read().changes.position() })
    }

    fn pools_changed_since(&self, cursor: ChangeCursor, out: &mut Vec<(String, String)>) -> Option<ChangeCursor> {
        if cursor.source != self.source() {
            return None;
        }
        let committed = self.committed.read();
        committed
            .changes
            .since(cursor.position, out)
            .then(|| ChangeCursor { source: cursor.source, position: committed.changes.position() })
    }

    fn pools_in_flight(&self, out: &mut Vec<(String, String)>) {
        for (driver, pools) in &self.in_flight_claims {
            out.extend(pools.keys().map(|p| (driver.clone(), p.clone())));
        }
    }
}

impl ClusterAllocated {
    /// The committed state this view reads (one per manager, for the manager's life): the
    /// record its change cursors refer to.
    fn source(&self) -> usize {
        Arc::as_ptr(&self.committed) as *const () as usize
    }
}

impl ksched_dra::manager::SharedDraManager for DraManager {
    fn claim(&self, namespace: &str, name: &str) -> Result<Arc<ResourceClaim>, String> {
        DraManager::claim(self, namespace, name)
    }
    fn device_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        DraManager::device_class(self, name)
    }
    fn slice_index(&self) -> Arc<SliceIndex> {
        DraManager::slice_index(self)
    }
    fn allocated(&self) -> Arc<dyn AllocatedView> {
        DraManager::allocated(self)
    }
    fn cel(&self) -> Arc<CelCache> {
        DraManager::cel(self)
    }
}

/// The scheduler's DRA manager in `shared`, made over `lister` the first time: the object
/// DynamicResources works with, also installed as the [`ksched_dra::manager::SharedDraManager`]
/// other plugins reach through the framework handle. The scheduler calls it before building
/// its profiles, as upstream's scheduler creates its DRA manager before the frameworks.
pub fn shared(shared: &ksched_framework::handle::SharedState, lister: Arc<dyn ClusterLister>) -> Arc<DraManager> {
    let manager = shared.get_or_init(|| DraManager::new(lister));
    ksched_dra::manager::install(shared, manager.clone());
    manager
}

impl DraManager {
    /// A manager over the informer listers.
    pub fn new(lister: Arc<dyn ClusterLister>) -> Self {
        DraManager {
            lister,
            cel: Arc::new(CelCache::new()),
            selections: Arc::new(SelectorResults::new()),
            inner: Mutex::new(Inner::default()),
            committed: Mutex::new(Committed::default()),
            slice_index: Mutex::new(None),
        }
    }

    /// Compiled selectors.
    pub fn cel(&self) -> Arc<CelCache> {
        self.cel.clone()
    }

    /// Selector results per device, shared by every cycle's allocator.
    pub fn selector_results(&self) -> Arc<SelectorResults> {
        self.selections.clone()
    }

    /// The claim as the scheduler sees it: its own newer write, else the informer's. The error
    /// is the assume cache's not-found text.
    pub fn claim(&self, namespace: &str, name: &str) -> Result<Arc<ResourceClaim>, String> {
        let Some(api) = self.lister.resource_claim(namespace, name) else {
            return Err(format!("could not find ResourceClaim \"{namespace}/{name}\""));
        };
        let mut inner = self.inner.lock();
        Ok(overlay(&mut inner, api))
    }

    /// All claims, overlaid like [`DraManager::claim`].
    pub fn claims(&self) -> Vec<Arc<ResourceClaim>> {
        let listed = self.lister.resource_claims();
        let mut inner = self.inner.lock();
        if inner.assumed.is_empty() {
            return listed;
        }
        listed.into_iter().map(|c| overlay(&mut inner, c)).collect()
    }

    /// A DeviceClass.
    pub fn device_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.lister.device_class(name)
    }

    /// All DeviceClasses.
    pub fn device_classes(&self) -> Vec<Arc<DeviceClass>> {
        self.lister.device_classes()
    }

    /// All ResourceSlices (device taint rules are an off-by-default API and not applied).
    pub fn resource_slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.lister.resource_slices()
    }

    /// The slices indexed per node for allocators: rebuilt only when the listed slices are not
    /// the very objects indexed last time (slices change rarely; cycles are many).
    pub fn slice_index(&self) -> Arc<SliceIndex> {
        // The revision is read before the list: a slice written in between moves it, and the
        // next call lists again.
        let revision = self.lister.resource_slices_revision();
        let mut cached = self.slice_index.lock();
        if let Some((_, seen_revision, index)) = cached.as_ref() {
            // Listing every slice (and comparing) per cycle costs O(nodes) on large clusters.
            if revision != 0 && *seen_revision == revision {
                return index.clone();
            }
        }
        let slices = self.resource_slices();
        if let Some((seen, seen_revision, index)) = cached.as_mut() {
            if seen.len() == slices.len() && seen.iter().zip(&slices).all(|(a, b)| Arc::ptr_eq(a, b)) {
                *seen_revision = revision;
                return index.clone();
            }
        }
        let index = Arc::new(SliceIndex::new(slices.clone()));
        *cached = Some((slices, revision, index.clone()));
        index
    }

    /// Brings the committed devices up to date with the claims and returns the view a
    /// scheduling cycle allocates against (upstream's `GatherAllocatedState`).
    pub fn allocated(&self) -> Arc<dyn AllocatedView> {
        let revision = self.lister.resource_claims_revision();
        let assumed_revision = self.inner.lock().assumed_revision;
        let mut c = self.committed.lock();
        // Listers without a revision (0) are reconciled every time.
        if revision == 0 || c.lister_revision != Some(revision) || c.assumed_revision != assumed_revision {
            let assumed_changed = std::mem::take(&mut self.inner.lock().assumed_changed);
            let journal = c.lister_revision.filter(|_| revision != 0).and_then(|since| {
                if since == revision {
                    return Some((revision, Vec::new()));
                }
                self.lister.resource_claims_changed_since(since)
            });
            match journal {
                Some((now, mut keys)) => {
                    keys.extend(assumed_changed);
                    keys.sort_unstable();
                    keys.dedup();
                    self.reconcile_keys(&mut c, &keys);
                    c.lister_revision = Some(now);
                }
                None => {
                    self.reconcile(&mut c);
                    c.lister_revision = Some(revision);
                }
            }
            c.assumed_revision = self.inner.lock().assumed_revision;
        }
        let mut in_flight = AllocatedState::default();
        let mut in_flight_claims: HashMap<String, HashMap<String, u64>> = HashMap::default();
        for (uid, f) in self.inner.lock().in_flight.iter() {
            if let Some(a) = f.claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
                in_flight.add_allocation(a);
                let digest = {
                    let mut h = rustc_hash::FxHasher::default();
                    std::hash::Hash::hash(uid, &mut h);
                    std::hash::Hasher::finish(&h) | 1
                };
                for r in a.devices.iter().flat_map(|d| d.results.iter().flatten()) {
                    let d = in_flight_claims.entry(r.driver.clone()).or_default().entry(r.pool.clone()).or_default();
                    *d = d.wrapping_add(digest);
                }
            }
        }
        let none_in_flight =
            in_flight.devices.is_empty() && in_flight.shared.is_empty() && in_flight.capacity.is_empty();
        Arc::new(ClusterAllocated { committed: c.state.clone(), in_flight, in_flight_claims, none_in_flight })
    }

    /// Counts every claim afresh where its version changed, and forgets deleted ones.
    fn reconcile(&self, c: &mut Committed) {
        let claims = self.claims();
        let mut state = c.state.write();
        for claim in &claims {
            count(&mut c.claims, &mut state, key_of(claim), Some(claim));
        }
        // Every listed claim has an entry now, so extra entries are deleted claims.
        if c.claims.len() != claims.len() {
            let live: std::collections::HashSet<String> = claims.iter().map(|c| key_of(c)).collect();
            let gone: Vec<String> = c.claims.keys().filter(|k| !live.contains(*k)).cloned().collect();
            for key in gone {
                count(&mut c.claims, &mut state, key, None);
            }
        }
    }

    /// Counts the claims with these keys (`namespace/name`) as they are now.
    fn reconcile_keys(&self, c: &mut Committed, keys: &[String]) {
        let mut state = c.state.write();
        for key in keys {
            let (ns, name) = key.split_once('/').unwrap_or(("", key));
            let claim = self.claim(ns, name).ok();
            count(&mut c.claims, &mut state, key.clone(), claim.as_ref());
        }
    }

    /// The allocation Reserve made for a claim that PreBind has not written yet.
    pub fn pending_allocation(&self, claim_uid: &str) -> Option<AllocationResult> {
        self.inner.lock().in_flight.get(claim_uid).and_then(|f| f.claim.status.as_ref()?.allocation.clone())
    }

    /// Records an allocation in flight (or one more pod sharing it).
    pub fn signal_pending(&self, claim_uid: &str, allocated: Arc<ResourceClaim>) {
        let mut inner = self.inner.lock();
        match inner.in_flight.get_mut(claim_uid) {
            Some(f) => f.sharers += 1,
            None => {
                inner.in_flight.insert(claim_uid.to_string(), InFlight { claim: allocated, sharers: 1 });
            }
        }
    }

    /// Drops one sharer of an in-flight allocation (all of them with `force`); `true` when the
    /// allocation is no longer in flight.
    pub fn maybe_remove_pending(&self, claim_uid: &str, force: bool) -> bool {
        let mut inner = self.inner.lock();
        let Some(f) = inner.in_flight.get_mut(claim_uid) else { return false };
        if force || f.sharers == 1 {
            inner.in_flight.remove(claim_uid);
            return true;
        }
        f.sharers -= 1;
        false
    }

    /// Number of allocations in flight.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().in_flight.len()
    }

    /// Remembers the claim the API server returned after a write, until the informer has it.
    pub fn assume(&self, claim: Arc<ResourceClaim>) -> Result<(), String> {
        let key = key_of(&claim);
        let uid = uid_of(&claim).to_string();
        let current = self.claim(
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        )?;
        if rv_of(&claim) < rv_of(&current) {
            return Err(format!(
                "ResourceClaim {key:?} is out of sync (stored: {}, assume: {})",
                rv_of(&current),
                rv_of(&claim)
            ));
        }
        let mut inner = self.inner.lock();
        inner.assumed.insert(uid, claim);
        inner.assumed_revision += 1;
        inner.assumed_changed.push(key);
        Ok(())
    }

    /// Forgets an assumed version of the claim.
    pub fn restore(&self, namespace: &str, name: &str) {
        let Some(api) = self.lister.resource_claim(namespace, name) else { return };
        let mut inner = self.inner.lock();
        if inner.assumed.remove(uid_of(&api)).is_some() {
            inner.assumed_revision += 1;
            inner.assumed_changed.push(key_of(&api));
        }
    }
}

#[cfg(test)]
mod tests {
    use ksched_framework::listers::MemoryLister;
    use serde_json::json;

    use super::*;

    fn slice(name: &str) -> Arc<ResourceSlice> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"driver": "d", "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0"}]}}))
            .unwrap(),
        )
    }

    /// The index is kept while the lister's slice revision stands still, and built again
    /// from the new list as soon as a slice is written or removed.
    #[test]
    fn the_slice_index_follows_the_listers_revision() {
        let lister = Arc::new(MemoryLister::default());
        lister.resource_slices.upsert(slice("a"));
        let m = DraManager::new(lister.clone());
        let first = m.slice_index();
        assert!(Arc::ptr_eq(&first, &m.slice_index()), "nothing changed: the same index");
        lister.resource_slices.upsert(slice("b"));
        let second = m.slice_index();
        assert_eq!(second.all_slices().len(), 2, "the new slice is indexed");
        assert!(Arc::ptr_eq(&second, &m.slice_index()));
        assert!(lister.resource_slices.remove(None, "a").is_some());
        let names: Vec<_> = m.slice_index().all_slices().iter().map(|s| s.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["b"]);
    }
}
