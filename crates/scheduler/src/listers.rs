//! Watch-backed listers (upstream's informer listers) for the objects plugins read besides pods
//! and nodes: namespaces, workloads (default spreading), PDBs (preemption) and storage objects.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use ksched_framework::listers::ClusterLister;
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
}

fn spawn<K>(client: &kube::Client, tasks: &mut Vec<tokio::task::JoinHandle<()>>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()).default_backoff());
    tasks.push(tokio::spawn(async move {
        let mut s = stream.boxed();
        while let Some(ev) = s.next().await {
            if let Err(e) = ev {
                tracing::warn!(resource = %K::kind(&()), error = %e, "watch failed; retrying");
            }
        }
    }));
    reader
}

impl WatchListers {
    /// Starts one watch per resource; the tasks end when aborted.
    pub fn start(client: &kube::Client) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let mut t = Vec::new();
        let l = WatchListers {
            namespaces: spawn(client, &mut t),
            services: spawn(client, &mut t),
            replication_controllers: spawn(client, &mut t),
            replica_sets: spawn(client, &mut t),
            stateful_sets: spawn(client, &mut t),
            pdbs: spawn(client, &mut t),
            pvcs: spawn(client, &mut t),
            pvs: spawn(client, &mut t),
            storage_classes: spawn(client, &mut t),
            csi_nodes: spawn(client, &mut t),
            csi_drivers: spawn(client, &mut t),
            csi_storage_capacities: spawn(client, &mut t),
            volume_attachments: spawn(client, &mut t),
        };
        (l, t)
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
        self.volume_attachments.wait_until_ready().await
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
}
