//! Watch-backed listers (upstream's informer listers) for the objects plugins read besides pods
//! and nodes: namespaces, workloads (default spreading), PDBs (preemption), storage objects and
//! DRA objects (ResourceClaims, DeviceClasses, ResourceSlices).
//! Changes of storage and DRA objects are also reported (see [`WatchListers::set_storage_event_handler`])
//! so the queue can requeue pods waiting for them, as upstream's informer event handlers do.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use ksched_framework::listers::{ChangeJournal, ClusterLister};
use ksched_framework::{ActionType, ClusterEvent, EventObject, EventResource};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// Listers over reflector stores, one watch per resource.
#[derive(Clone)]
pub struct WatchListers {
    namespaces: Store<Namespace>,
    services: Store<Service>,
    replication_controllers: Store<ReplicationController>,
    replica_sets: Store<ReplicaSet>,
    stateful_sets: Store<StatefulSet>,
    pdbs: Store<PodDisruptionBudget>,
    pvcs: Store<PersistentVolumeClaim>,
    pvs: Store<PersistentVolume>,
    storage_classes: Store<StorageClass>,
    csi_nodes: Store<CSINode>,
    csi_drivers: Store<CSIDriver>,
    csi_storage_capacities: Store<CSIStorageCapacity>,
    volume_attachments: Store<VolumeAttachment>,
    resource_claims: Store<ResourceClaim>,
    resource_claims_changes: Arc<ChangeJournal>,
    device_classes: Store<DeviceClass>,
    resource_slices: Store<ResourceSlice>,
    resource_slices_changes: Arc<ChangeJournal>,
    storage_events: HandlerSlot,
}

/// Receives changes of storage and DRA objects (PV, PVC, StorageClass, CSINode, CSIDriver,
/// ResourceClaim, DeviceClass, ResourceSlice,
/// CSIStorageCapacity, VolumeAttachment) as (event, old, new), after the store applied them.
pub type StorageEventHandler = Arc<dyn Fn(ClusterEvent, Option<EventObject>, Option<EventObject>) + Send + Sync>;

type HandlerSlot = Arc<OnceLock<StorageEventHandler>>;

fn as_event_object<K: serde::Serialize>(obj: &K) -> Option<EventObject> {
    serde_json::to_value(obj).ok().map(|v| EventObject::Other(Arc::new(v)))
}

/// The key a change journal records for an object: `namespace/name` (unset: `default`).
fn journal_key<K: Resource>(o: &K) -> String {
    let m = o.meta();
    format!("{}/{}", m.namespace.as_deref().unwrap_or("default"), m.name.as_deref().unwrap_or_default())
}

/// One change for the queue: (action, old, new).
type Change<K> = (ActionType, Option<Arc<K>>, Option<Arc<K>>);

/// A relist in progress: the objects it listed, and their changes, held back until it is done.
struct Relist<K: Resource<DynamicType = ()>> {
    seen: HashSet<reflector::ObjectRef<K>>,
    pending: Vec<Change<K>>,
}

impl<K: Resource<DynamicType = ()>> Default for Relist<K> {
    fn default() -> Self {
        Relist { seen: HashSet::new(), pending: Vec::new() }
    }
}

/// The queue events one watch event causes, computed against the store before it applies it:
/// (action, old, new). Relists report objects that changed while the watch was down, and
/// objects missing from the relist as deletions, all at their end, when the store shows them.
fn changes<K>(store: &Store<K>, ev: &watcher::Event<K>, relisted: &mut Option<Relist<K>>) -> Vec<Change<K>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    let applied = |obj: &K| {
        let old = store.get(&reflector::ObjectRef::from_obj(obj));
        match old {
            Some(o)
                if o.meta().resource_version.is_some() && o.meta().resource_version == obj.meta().resource_version =>
            {
                None
            }
            Some(o) => Some((ActionType::UPDATE, Some(o), Some(Arc::new(obj.clone())))),
            None => Some((ActionType::ADD, None, Some(Arc::new(obj.clone())))),
        }
    };
    match ev {
        watcher::Event::Apply(obj) => applied(obj).into_iter().collect(),
        watcher::Event::Delete(obj) => {
            let old = store.get(&reflector::ObjectRef::from_obj(obj)).unwrap_or_else(|| Arc::new(obj.clone()));
            vec![(ActionType::DELETE, Some(old), None)]
        }
        watcher::Event::Init => {
            *relisted = Some(Relist::default());
            Vec::new()
        }
        watcher::Event::InitApply(obj) => {
            // The store shows a relist only once it is done: reported now, a requeued pod
            // would look the object up, miss it, and wait for an event that never comes.
            let r = relisted.get_or_insert_with(Relist::default);
            r.seen.insert(reflector::ObjectRef::from_obj(obj));
            r.pending.extend(applied(obj));
            Vec::new()
        }
        watcher::Event::InitDone => {
            let Relist { seen, mut pending } = relisted.take().unwrap_or_default();
            pending.extend(
                store
                    .state()
                    .into_iter()
                    .filter(|o| !seen.contains(&reflector::ObjectRef::from_obj(o)))
                    .map(|o| (ActionType::DELETE, Some(o), None)),
            );
            pending
        }
    }
}

fn spawn<K>(client: &kube::Client, tasks: &mut Vec<tokio::task::JoinHandle<()>>) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    spawn_dispatching(client, tasks, None)
}

/// Like [`spawn`], also handing every change to the handler in `dispatch` once one is set.
fn spawn_dispatching<K>(
    client: &kube::Client,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    dispatch: Option<(EventResource, HandlerSlot)>,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    spawn_counted(client, tasks, dispatch, None)
}

/// Like [`spawn_dispatching`], also counting applied watch events in `revision`.
fn spawn_counted<K>(
    client: &kube::Client,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    dispatch: Option<(EventResource, HandlerSlot)>,
    journal: Option<Arc<ChangeJournal>>,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, mut writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let store = reader.clone();
    tasks.push(tokio::spawn(async move {
        let mut s = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut relisted = None;
        while let Some(ev) = s.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => {
                    tracing::warn!(resource = %K::kind(&()), error = %e, "watch failed; retrying");
                    continue;
                }
            };
            let handler = dispatch.as_ref().and_then(|(r, slot)| slot.get().map(|h| (*r, h.clone())));
            let found = if handler.is_some() { changes(&store, &ev, &mut relisted) } else { Vec::new() };
            // apply first, so pods requeued by the event see the new object
            writer.apply_watcher_event(&ev);
            if let Some(j) = &journal {
                match &ev {
                    watcher::Event::Apply(o) | watcher::Event::Delete(o) => j.record(journal_key(o)),
                    watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::InitDone => j.record_any(),
                }
            }
            if let Some((resource, handler)) = handler {
                for (action, old, new) in found {
                    let old = old.as_deref().and_then(as_event_object);
                    let new = new.as_deref().and_then(as_event_object);
                    handler(ClusterEvent::new(resource, action), old, new);
                }
            }
        }
    }));
    reader
}

/// A store nothing fills: complete (ready) and empty, for an API the scheduler does not watch.
fn inert<K>() -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (reader, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    reader
}

/// The optional APIs the listers watch. Upstream creates an informer only for what the enabled
/// gates need (`scheduler.go` New: the DRA informers with DynamicResourceAllocation), and waits
/// only for those to sync; an API left out here reads as having no objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchedApis {
    /// `resource.k8s.io/v1`: ResourceClaims, DeviceClasses, ResourceSlices.
    pub dynamic_resources: bool,
}

impl Default for WatchedApis {
    /// Everything (the v1.36 defaults).
    fn default() -> Self {
        WatchedApis { dynamic_resources: true }
    }
}

impl WatchListers {
    /// Starts one watch per resource of the default API set; the tasks end when aborted.
    pub fn start(client: &kube::Client) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        Self::start_with(client, WatchedApis::default())
    }

    /// Starts one watch per resource of `apis`; the others stay empty and count as synced.
    pub fn start_with(client: &kube::Client, apis: WatchedApis) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let mut t = Vec::new();
        let slot: HandlerSlot = Arc::new(OnceLock::new());
        let d = |r: EventResource| Some((r, slot.clone()));
        let claims_changes = Arc::new(ChangeJournal::default());
        let slices_changes = Arc::new(ChangeJournal::default());
        let l = WatchListers {
            namespaces: spawn(client, &mut t),
            services: spawn(client, &mut t),
            replication_controllers: spawn(client, &mut t),
            replica_sets: spawn(client, &mut t),
            stateful_sets: spawn(client, &mut t),
            pdbs: spawn(client, &mut t),
            pvcs: spawn_dispatching(client, &mut t, d(EventResource::PersistentVolumeClaim)),
            pvs: spawn_dispatching(client, &mut t, d(EventResource::PersistentVolume)),
            storage_classes: spawn_dispatching(client, &mut t, d(EventResource::StorageClass)),
            csi_nodes: spawn_dispatching(client, &mut t, d(EventResource::CsiNode)),
            csi_drivers: spawn_dispatching(client, &mut t, d(EventResource::CsiDriver)),
            csi_storage_capacities: spawn_dispatching(client, &mut t, d(EventResource::CsiStorageCapacity)),
            volume_attachments: spawn_dispatching(client, &mut t, d(EventResource::VolumeAttachment)),
            resource_claims: if apis.dynamic_resources {
                spawn_counted(client, &mut t, d(EventResource::ResourceClaim), Some(claims_changes.clone()))
            } else {
                inert()
            },
            resource_claims_changes: claims_changes,
            device_classes: if apis.dynamic_resources {
                spawn_dispatching(client, &mut t, d(EventResource::DeviceClass))
            } else {
                inert()
            },
            resource_slices: if apis.dynamic_resources {
                spawn_counted(client, &mut t, d(EventResource::ResourceSlice), Some(slices_changes.clone()))
            } else {
                inert()
            },
            resource_slices_changes: slices_changes,
            storage_events: slot,
        };
        (l, t)
    }

    /// Sets where storage object changes go (the scheduling queue); changes before this are
    /// not reported. Only the first call takes effect.
    pub fn set_storage_event_handler(&self, handler: StorageEventHandler) {
        let _ = self.storage_events.set(handler);
    }

    /// Waits until every store completed its initial list.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.namespaces.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.replication_controllers.wait_until_ready().await?;
        self.replica_sets.wait_until_ready().await?;
        self.stateful_sets.wait_until_ready().await?;
        self.pdbs.wait_until_ready().await?;
        self.pvcs.wait_until_ready().await?;
        self.pvs.wait_until_ready().await?;
        self.storage_classes.wait_until_ready().await?;
        self.csi_nodes.wait_until_ready().await?;
        self.csi_drivers.wait_until_ready().await?;
        self.csi_storage_capacities.wait_until_ready().await?;
        self.volume_attachments.wait_until_ready().await?;
        self.resource_claims.wait_until_ready().await?;
        self.device_classes.wait_until_ready().await?;
        self.resource_slices.wait_until_ready().await
    }
}

fn in_ns<K: Resource<DynamicType = ()> + Clone>(s: &Store<K>, ns: &str) -> Vec<Arc<K>> {
    s.state().into_iter().filter(|o| o.meta().namespace.as_deref() == Some(ns)).collect()
}

fn named<K: Resource<DynamicType = ()> + Clone>(s: &Store<K>, ns: Option<&str>, name: &str) -> Option<Arc<K>> {
    let mut r = reflector::ObjectRef::<K>::new(name);
    if let Some(ns) = ns {
        r = r.within(ns);
    }
    s.get(&r)
}

impl ClusterLister for WatchListers {
    fn namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        named(&self.namespaces, None, name)
    }
    fn namespaces(&self) -> Vec<Arc<Namespace>> {
        self.namespaces.state()
    }
    fn services(&self, namespace: &str) -> Vec<Arc<Service>> {
        in_ns(&self.services, namespace)
    }
    fn replication_controllers(&self, namespace: &str) -> Vec<Arc<ReplicationController>> {
        in_ns(&self.replication_controllers, namespace)
    }
    fn replica_sets(&self, namespace: &str) -> Vec<Arc<ReplicaSet>> {
        in_ns(&self.replica_sets, namespace)
    }
    fn stateful_sets(&self, namespace: &str) -> Vec<Arc<StatefulSet>> {
        in_ns(&self.stateful_sets, namespace)
    }
    fn pod_disruption_budgets(&self, namespace: &str) -> Vec<Arc<PodDisruptionBudget>> {
        in_ns(&self.pdbs, namespace)
    }
    fn persistent_volume_claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        named(&self.pvcs, Some(namespace), name)
    }
    fn persistent_volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        named(&self.pvs, None, name)
    }
    fn persistent_volumes(&self) -> Vec<Arc<PersistentVolume>> {
        self.pvs.state()
    }
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>> {
        named(&self.storage_classes, None, name)
    }
    fn csi_node(&self, name: &str) -> Option<Arc<CSINode>> {
        named(&self.csi_nodes, None, name)
    }
    fn csi_driver(&self, name: &str) -> Option<Arc<CSIDriver>> {
        named(&self.csi_drivers, None, name)
    }
    fn csi_storage_capacities(&self) -> Vec<Arc<CSIStorageCapacity>> {
        self.csi_storage_capacities.state()
    }
    fn volume_attachments(&self) -> Vec<Arc<VolumeAttachment>> {
        self.volume_attachments.state()
    }
    fn resource_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        named(&self.resource_claims, Some(namespace), name)
    }
    fn resource_claims(&self) -> Vec<Arc<ResourceClaim>> {
        self.resource_claims.state()
    }
    fn resource_claims_revision(&self) -> u64 {
        // Starts at 1: 0 means "not tracked" to callers.
        self.resource_claims_changes.revision() + 1
    }
    fn resource_claims_changed_since(&self, revision: u64) -> Option<(u64, Vec<String>)> {
        let (now, keys) = self.resource_claims_changes.changed_since(revision.checked_sub(1)?)?;
        Some((now + 1, keys))
    }
    fn device_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        named(&self.device_classes, None, name)
    }
    fn device_classes(&self) -> Vec<Arc<DeviceClass>> {
        self.device_classes.state()
    }
    fn resource_slices(&self) -> Vec<Arc<ResourceSlice>> {
        self.resource_slices.state()
    }
    fn resource_slices_revision(&self) -> u64 {
        // Starts at 1: 0 means "not tracked" to callers.
        self.resource_slices_changes.revision() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn claim(name: &str, rv: &str) -> ResourceClaim {
        ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Feeds events as the watch tasks do: changes computed first, then applied to the store.
    fn feed(
        store: &Store<ResourceClaim>,
        writer: &mut reflector::store::Writer<ResourceClaim>,
        relisted: &mut Option<Relist<ResourceClaim>>,
        ev: watcher::Event<ResourceClaim>,
    ) -> Vec<(ActionType, String)> {
        let found = changes(store, &ev, relisted);
        writer.apply_watcher_event(&ev);
        found
            .into_iter()
            .map(|(a, old, new)| {
                let obj = new.or(old).unwrap();
                assert!(
                    a == ActionType::DELETE || store.get(&reflector::ObjectRef::from_obj(&*obj)).is_some(),
                    "{a:?} reported before the store shows it"
                );
                (a, obj.metadata.name.clone().unwrap())
            })
            .collect()
    }

    #[test]
    fn relist_changes_are_reported_once_the_store_shows_them() {
        let (store, mut writer) = reflector::store();
        let mut relisted = None;
        let mut feed = |ev| feed(&store, &mut writer, &mut relisted, ev);
        assert!(feed(watcher::Event::Init).is_empty());
        assert!(feed(watcher::Event::InitApply(claim("a", "1"))).is_empty());
        assert!(feed(watcher::Event::InitApply(claim("b", "1"))).is_empty());
        assert_eq!(feed(watcher::Event::InitDone), [(ActionType::ADD, "a".into()), (ActionType::ADD, "b".into())]);
        assert_eq!(feed(watcher::Event::Apply(claim("a", "2"))), [(ActionType::UPDATE, "a".into())]);

        // a relist after a broken watch: b changed, a is gone, c is new
        assert!(feed(watcher::Event::Init).is_empty());
        assert!(feed(watcher::Event::InitApply(claim("b", "3"))).is_empty());
        assert!(feed(watcher::Event::InitApply(claim("c", "1"))).is_empty());
        assert_eq!(
            feed(watcher::Event::InitDone),
            [(ActionType::UPDATE, "b".into()), (ActionType::ADD, "c".into()), (ActionType::DELETE, "a".into())]
        );
    }
}
