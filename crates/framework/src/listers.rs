//! Read access to cluster objects other than pods and nodes (upstream's informer listers).
//! The scheduler implements [`ClusterLister`] over its watch caches; tests use [`MemoryLister`].

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use rustc_hash::FxHashMap;

/// Listers plugins may use. Every method reads a local cache: no I/O, cheap enough per cycle.
pub trait ClusterLister: Send + Sync {
    /// A namespace by name.
    fn namespace(&self, name: &str) -> Option<Arc<Namespace>>;
    /// All namespaces.
    fn namespaces(&self) -> Vec<Arc<Namespace>>;
    /// Services of a namespace.
    fn services(&self, namespace: &str) -> Vec<Arc<Service>>;
    /// ReplicationControllers of a namespace.
    fn replication_controllers(&self, namespace: &str) -> Vec<Arc<ReplicationController>>;
    /// ReplicaSets of a namespace.
    fn replica_sets(&self, namespace: &str) -> Vec<Arc<ReplicaSet>>;
    /// StatefulSets of a namespace.
    fn stateful_sets(&self, namespace: &str) -> Vec<Arc<StatefulSet>>;
    /// PodDisruptionBudgets of a namespace.
    fn pod_disruption_budgets(&self, namespace: &str) -> Vec<Arc<PodDisruptionBudget>>;
    /// A PersistentVolumeClaim.
    fn persistent_volume_claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    /// A PersistentVolume.
    fn persistent_volume(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    /// All PersistentVolumes.
    fn persistent_volumes(&self) -> Vec<Arc<PersistentVolume>>;
    /// A StorageClass.
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>>;
    /// A CSINode (named like its node).
    fn csi_node(&self, name: &str) -> Option<Arc<CSINode>>;
    /// A CSIDriver.
    fn csi_driver(&self, name: &str) -> Option<Arc<CSIDriver>>;
    /// CSIStorageCapacities of all namespaces.
    fn csi_storage_capacities(&self) -> Vec<Arc<CSIStorageCapacity>>;
    /// VolumeAttachments.
    fn volume_attachments(&self) -> Vec<Arc<VolumeAttachment>>;
    /// A ResourceClaim (DynamicResources). Listers without DRA objects have none.
    fn resource_claim(&self, _namespace: &str, _name: &str) -> Option<Arc<ResourceClaim>> {
        None
    }
    /// All ResourceClaims.
    fn resource_claims(&self) -> Vec<Arc<ResourceClaim>> {
        Vec::new()
    }
    /// Changes whenever any ResourceClaim changes, so caches derived from all claims know
    /// when to look again.
    fn resource_claims_revision(&self) -> u64 {
        0
    }
    /// The claims (`namespace/name`) added, changed or deleted after `revision` (a value of
    /// [`ClusterLister::resource_claims_revision`]), with the revision they bring the caller
    /// up to; `None` when that is no longer known and the caller must look at every claim.
    fn resource_claims_changed_since(&self, _revision: u64) -> Option<(u64, Vec<String>)> {
        None
    }
    /// A DeviceClass.
    fn device_class(&self, _name: &str) -> Option<Arc<DeviceClass>> {
        None
    }
    /// All DeviceClasses.
    fn device_classes(&self) -> Vec<Arc<DeviceClass>> {
        Vec::new()
    }
    /// All ResourceSlices.
    fn resource_slices(&self) -> Vec<Arc<ResourceSlice>> {
        Vec::new()
    }
    /// Changes whenever any ResourceSlice changes (0: not tracked), so that what is derived
    /// from all slices is rebuilt only then.
    fn resource_slices_revision(&self) -> u64 {
        0
    }
}

/// Objects of one kind in insertion order, indexed by name like an informer store, so lookups
/// by name stay cheap when plugins make them per node for thousands of objects.
pub struct ObjectList<T> {
    inner: RwLock<Indexed<T>>,
    changes: ChangeJournal,
}

/// Counts the writes to a set of objects and remembers the keys of the latest ones, so caches
/// derived from all the objects can follow the changes instead of rescanning everything after
/// each one. Record a write after the object changed, so that a reader seeing the new
/// revision also sees the change.
#[derive(Default)]
pub struct ChangeJournal {
    revision: std::sync::atomic::AtomicU64,
    entries: parking_lot::Mutex<Journal>,
}

#[derive(Default)]
struct Journal {
    entries: std::collections::VecDeque<(u64, String)>,
    /// Every write after this revision is in `entries`.
    complete_after: u64,
}

/// Writes a journal remembers; readers further behind rescan.
const JOURNAL_CAPACITY: usize = 4096;

impl ChangeJournal {
    /// Counts a write of the object with key `key`.
    pub fn record(&self, key: String) {
        let mut j = self.entries.lock();
        let revision = self.revision.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        j.entries.push_back((revision, key));
        if j.entries.len() > JOURNAL_CAPACITY {
            if let Some((forgotten, _)) = j.entries.pop_front() {
                j.complete_after = forgotten;
            }
        }
    }

    /// Counts a write that may have changed any object (a relist, an arbitrary edit).
    pub fn record_any(&self) {
        let mut j = self.entries.lock();
        let revision = self.revision.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        j.entries.clear();
        j.complete_after = revision;
    }

    /// The number of writes so far.
    pub fn revision(&self) -> u64 {
        self.revision.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The keys written after `revision`, and the revision that brings the caller up to;
    /// `None` when the journal no longer reaches back that far.
    pub fn changed_since(&self, revision: u64) -> Option<(u64, Vec<String>)> {
        let j = self.entries.lock();
        if revision < j.complete_after {
            return None;
        }
        let now = self.revision();
        Some((now, j.entries.iter().filter(|(r, _)| *r > revision).map(|(_, k)| k.clone()).collect()))
    }
}

/// The journal key of an object: `namespace/name`, the namespace as lookups compare it.
fn journal_key<T: k8s_openapi::Metadata<Ty = Meta>>(o: &T) -> String {
    format!("{}/{}", namespace_of(o), name_of(o))
}

struct Indexed<T> {
    items: Vec<Arc<T>>,
    /// Positions in `items` per name, ascending (names repeat across namespaces).
    by_name: FxHashMap<String, Vec<usize>>,
}

impl<T> Default for ObjectList<T> {
    fn default() -> Self {
        ObjectList {
            inner: RwLock::new(Indexed { items: Vec::new(), by_name: FxHashMap::default() }),
            changes: ChangeJournal::default(),
        }
    }
}

type Meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn name_of<T: k8s_openapi::Metadata<Ty = Meta>>(o: &T) -> &str {
    o.metadata().name.as_deref().unwrap_or_default()
}

/// The namespace as lookups compare it: unset means "default".
fn namespace_of<T: k8s_openapi::Metadata<Ty = Meta>>(o: &T) -> &str {
    o.metadata().namespace.as_deref().unwrap_or("default")
}

impl<T: k8s_openapi::Metadata<Ty = Meta>> Indexed<T> {
    fn reindex(&mut self) {
        self.by_name.clear();
        for (i, o) in self.items.iter().enumerate() {
            self.by_name.entry(name_of(&**o).to_string()).or_default().push(i);
        }
    }

    /// The first object with the name, in `ns` when given (cluster-scoped lookups pass `None`).
    fn find(&self, ns: Option<&str>, name: &str) -> Option<usize> {
        self.by_name.get(name)?.iter().copied().find(|&i| ns.is_none_or(|ns| namespace_of(&*self.items[i]) == ns))
    }
}

/// Write access to an [`ObjectList`]'s vector; the index is rebuilt, and the write counted,
/// when it is dropped.
pub struct ObjectListWriteGuard<'a, T: k8s_openapi::Metadata<Ty = Meta>> {
    items: RwLockWriteGuard<'a, Indexed<T>>,
    list: &'a ObjectList<T>,
}

impl<T: k8s_openapi::Metadata<Ty = Meta>> std::ops::Deref for ObjectListWriteGuard<'_, T> {
    type Target = Vec<Arc<T>>;
    fn deref(&self) -> &Vec<Arc<T>> {
        &self.items.items
    }
}

impl<T: k8s_openapi::Metadata<Ty = Meta>> std::ops::DerefMut for ObjectListWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut Vec<Arc<T>> {
        &mut self.items.items
    }
}

impl<T: k8s_openapi::Metadata<Ty = Meta>> Drop for ObjectListWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.items.reindex();
        // Any object may have changed: readers of the journal rescan.
        self.list.changes.record_any();
    }
}

impl<T: k8s_openapi::Metadata<Ty = Meta>> ObjectList<T> {
    /// The objects, in order.
    pub fn read(&self) -> MappedRwLockReadGuard<'_, Vec<Arc<T>>> {
        RwLockReadGuard::map(self.inner.read(), |i| &i.items)
    }

    /// Arbitrary edits of the vector (re-indexes everything afterwards: use [`ObjectList::upsert`]
    /// to add objects one by one).
    pub fn write(&self) -> ObjectListWriteGuard<'_, T> {
        ObjectListWriteGuard { items: self.inner.write(), list: self }
    }

    /// Counts writes: changes whenever the list may have changed.
    pub fn revision(&self) -> u64 {
        self.changes.revision()
    }

    /// The keys (`namespace/name`, unset namespaces read as `default`) of the objects written
    /// after `revision`, and the revision that brings the caller up to; `None` when that is
    /// no longer known (too long ago, or an arbitrary edit happened since).
    pub fn changed_since(&self, revision: u64) -> Option<(u64, Vec<String>)> {
        self.changes.changed_since(revision)
    }

    /// Removes the object with this namespace (`None` for cluster-scoped) and name.
    pub fn remove(&self, ns: Option<&str>, name: &str) -> Option<Arc<T>> {
        let removed = {
            let mut inner = self.inner.write();
            let i = inner
                .items
                .iter()
                .position(|o| name_of(&**o) == name && ns.is_none_or(|ns| namespace_of(&**o) == ns))?;
            let removed = inner.items.remove(i);
            inner.reindex();
            removed
        };
        self.changes.record(journal_key(&*removed));
        Some(removed)
    }

    /// Replaces the object with the same namespace and name, or appends it, as an informer
    /// applies an add or update.
    pub fn upsert(&self, obj: Arc<T>) {
        let key = journal_key(&*obj);
        {
            let mut inner = self.inner.write();
            match inner.find(Some(namespace_of(&*obj)), name_of(&*obj)) {
                Some(i) => inner.items[i] = obj,
                None => {
                    let i = inner.items.len();
                    inner.by_name.entry(name_of(&*obj).to_string()).or_default().push(i);
                    inner.items.push(obj);
                }
            }
        }
        self.changes.record(key);
    }

    /// The first object called `name`, in namespace `ns` when given.
    pub fn get(&self, ns: Option<&str>, name: &str) -> Option<Arc<T>> {
        let inner = self.inner.read();
        inner.find(ns, name).map(|i| inner.items[i].clone())
    }

    /// The objects of a namespace.
    pub fn in_namespace(&self, ns: &str) -> Vec<Arc<T>> {
        self.inner.read().items.iter().filter(|o| namespace_of(&***o) == ns).cloned().collect()
    }

    /// All objects.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.inner.read().items.clone()
    }
}

/// An in-memory lister: fill the lists, share it. Used by tests, simulations and the in-process
/// cluster.
#[derive(Default)]
pub struct MemoryLister {
    /// Namespaces.
    pub namespaces: ObjectList<Namespace>,
    /// Services.
    pub services: ObjectList<Service>,
    /// ReplicationControllers.
    pub replication_controllers: ObjectList<ReplicationController>,
    /// ReplicaSets.
    pub replica_sets: ObjectList<ReplicaSet>,
    /// StatefulSets.
    pub stateful_sets: ObjectList<StatefulSet>,
    /// PodDisruptionBudgets.
    pub pdbs: ObjectList<PodDisruptionBudget>,
    /// PersistentVolumeClaims.
    pub pvcs: ObjectList<PersistentVolumeClaim>,
    /// PersistentVolumes.
    pub pvs: ObjectList<PersistentVolume>,
    /// StorageClasses.
    pub storage_classes: ObjectList<StorageClass>,
    /// CSINodes.
    pub csi_nodes: ObjectList<CSINode>,
    /// CSIDrivers.
    pub csi_drivers: ObjectList<CSIDriver>,
    /// CSIStorageCapacities.
    pub csi_storage_capacities: ObjectList<CSIStorageCapacity>,
    /// VolumeAttachments.
    pub volume_attachments: ObjectList<VolumeAttachment>,
    /// ResourceClaims.
    pub resource_claims: ObjectList<ResourceClaim>,
    /// DeviceClasses.
    pub device_classes: ObjectList<DeviceClass>,
    /// ResourceSlices.
    pub resource_slices: ObjectList<ResourceSlice>,
}

impl ClusterLister for MemoryLister {
    fn namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        self.namespaces.get(None, name)
    }
    fn namespaces(&self) -> Vec<Arc<Namespace>> {
        self.namespaces.list()
    }
    fn services(&self, namespace: &str) -> Vec<Arc<Service>> {
        self.services.in_namespace(namespace)
    }
    fn replication_controllers(&self, namespace: &str) -> Vec<Arc<ReplicationController>> {
        self.replication_controllers.in_namespace(namespace)
    }
    fn replica_sets(&self, namespace: &str) -> Vec<Arc<ReplicaSet>> {
        self.replica_sets.in_namespace(namespace)
    }
    fn stateful_sets(&self, namespace: &str) -> Vec<Arc<StatefulSet>> {
        self.stateful_sets.in_namespace(namespace)
    }
    fn pod_disruption_budgets(&self, namespace: &str) -> Vec<Arc<PodDisruptionBudget>> {
        self.pdbs.in_namespace(namespace)
    }
    fn persistent_volume_claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.pvcs.get(Some(namespace), name)
    }
    fn persistent_volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.pvs.get(None, name)
    }
    fn persistent_volumes(&self) -> Vec<Arc<PersistentVolume>> {
        self.pvs.list()
    }
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.storage_classes.get(None, name)
    }
    fn csi_node(&self, name: &str) -> Option<Arc<CSINode>> {
        self.csi_nodes.get(None, name)
    }
    fn csi_driver(&self, name: &str) -> Option<Arc<CSIDriver>> {
        self.csi_drivers.get(None, name)
    }
    fn csi_storage_capacities(&self) -> Vec<Arc<CSIStorageCapacity>> {
        self.csi_storage_capacities.list()
    }
    fn volume_attachments(&self) -> Vec<Arc<VolumeAttachment>> {
        self.volume_attachments.list()
    }
    fn resource_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.resource_claims.get(Some(namespace), name)
    }
    fn resource_claims(&self) -> Vec<Arc<ResourceClaim>> {
        self.resource_claims.list()
    }
    fn resource_claims_revision(&self) -> u64 {
        self.resource_claims.revision()
    }
    fn resource_claims_changed_since(&self, revision: u64) -> Option<(u64, Vec<String>)> {
        self.resource_claims.changed_since(revision)
    }
    fn device_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.device_classes.get(None, name)
    }
    fn device_classes(&self) -> Vec<Arc<DeviceClass>> {
        self.device_classes.list()
    }
    fn resource_slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.resource_slices.list()
    }
    fn resource_slices_revision(&self) -> u64 {
        self.resource_slices.revision()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pvc(ns: Option<&str>, name: &str, volume: &str) -> Arc<PersistentVolumeClaim> {
        let mut c = PersistentVolumeClaim::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = ns.map(Into::into);
        c.spec = Some(k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
            volume_name: Some(volume.into()),
            ..Default::default()
        });
        Arc::new(c)
    }

    fn volume(c: Option<Arc<PersistentVolumeClaim>>) -> Option<String> {
        c.and_then(|c| c.spec.as_ref()?.volume_name.clone())
    }

    #[test]
    fn the_journal_names_what_changed_and_forgets_when_it_must() {
        let l: ObjectList<PersistentVolumeClaim> = ObjectList::default();
        let start = l.revision();
        l.upsert(pvc(Some("a"), "x", "v1"));
        l.upsert(pvc(Some("b"), "y", "v2"));
        let (now, keys) = l.changed_since(start).unwrap();
        assert_eq!((now, keys), (l.revision(), vec!["a/x".to_string(), "b/y".to_string()]));
        l.remove(Some("a"), "x");
        l.upsert(pvc(None, "z", "v3"));
        assert_eq!(l.changed_since(now).unwrap().1, ["a/x", "default/z"]);
        assert_eq!(l.changed_since(l.revision()).unwrap().1, Vec::<String>::new());
        // An arbitrary edit may have changed anything: readers from before it must rescan.
        let before = l.revision();
        l.write().clear();
        assert_eq!(l.changed_since(before), None);
        assert_eq!(l.changed_since(l.revision()), Some((l.revision(), Vec::new())));
        // So must readers further behind than the journal reaches.
        let before = l.revision();
        for i in 0..=JOURNAL_CAPACITY {
            l.upsert(pvc(Some("a"), &format!("p{i}"), "v"));
        }
        assert_eq!(l.changed_since(before), None);
        assert_eq!(l.changed_since(before + 1).unwrap().1.len(), JOURNAL_CAPACITY);
    }

    #[test]
    fn lookups_follow_upserts_and_bulk_edits() {
        let l = MemoryLister::default();
        l.pvcs.upsert(pvc(Some("a"), "c", "1"));
        l.pvcs.upsert(pvc(None, "c", "2"));
        l.pvcs.upsert(pvc(Some("a"), "d", "3"));
        assert_eq!(volume(l.persistent_volume_claim("a", "c")), Some("1".into()));
        // an unset namespace is "default"
        assert_eq!(volume(l.persistent_volume_claim("default", "c")), Some("2".into()));
        assert_eq!(volume(l.persistent_volume_claim("b", "c")), None);
        // the same namespace and name replace the object in place
        l.pvcs.upsert(pvc(Some("default"), "c", "4"));
        assert_eq!(l.pvcs.read().len(), 3);
        assert_eq!(volume(l.persistent_volume_claim("default", "c")), Some("4".into()));
        // cluster-wide lookups find the first object of that name
        assert_eq!(volume(l.pvcs.get(None, "c")), Some("1".into()));

        l.pvcs.write().retain(|c| c.metadata.namespace.as_deref() != Some("a"));
        assert_eq!(volume(l.persistent_volume_claim("a", "c")), None);
        assert_eq!(volume(l.pvcs.get(None, "c")), Some("4".into()));
        *l.pvcs.write() = vec![pvc(Some("a"), "d", "5")];
        assert_eq!(volume(l.persistent_volume_claim("a", "d")), Some("5".into()));
        assert_eq!(volume(l.persistent_volume_claim("default", "c")), None);
    }

    #[test]
    fn duplicates_pushed_in_bulk_resolve_to_the_first() {
        let l = MemoryLister::default();
        l.pvcs.write().extend([pvc(Some("a"), "c", "1"), pvc(Some("a"), "c", "2")]);
        assert_eq!(volume(l.persistent_volume_claim("a", "c")), Some("1".into()));
        l.pvcs.upsert(pvc(Some("a"), "c", "3"));
        assert_eq!(volume(l.persistent_volume_claim("a", "c")), Some("3".into()));
        assert_eq!(l.pvcs.list().len(), 2);
    }
}
