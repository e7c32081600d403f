//! Read access to cluster objects other than pods and nodes (upstream's informer listers).
//! The scheduler implements [`ClusterLister`] over its watch caches; tests use [`MemoryLister`].

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use parking_lot::RwLock;

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
}

/// An in-memory lister: fill the vectors, share it. Used by tests and simulations.
#[derive(Default)]
pub struct MemoryLister {
    /// Namespaces.
    pub namespaces: RwLock<Vec<Arc<Namespace>>>,
    /// Services.
    pub services: RwLock<Vec<Arc<Service>>>,
    /// ReplicationControllers.
    pub replication_controllers: RwLock<Vec<Arc<ReplicationController>>>,
    /// ReplicaSets.
    pub replica_sets: RwLock<Vec<Arc<ReplicaSet>>>,
    /// StatefulSets.
    pub stateful_sets: RwLock<Vec<Arc<StatefulSet>>>,
    /// PodDisruptionBudgets.
    pub pdbs: RwLock<Vec<Arc<PodDisruptionBudget>>>,
    /// PersistentVolumeClaims.
    pub pvcs: RwLock<Vec<Arc<PersistentVolumeClaim>>>,
    /// PersistentVolumes.
    pub pvs: RwLock<Vec<Arc<PersistentVolume>>>,
    /// StorageClasses.
    pub storage_classes: RwLock<Vec<Arc<StorageClass>>>,
    /// CSINodes.
    pub csi_nodes: RwLock<Vec<Arc<CSINode>>>,
    /// CSIDrivers.
    pub csi_drivers: RwLock<Vec<Arc<CSIDriver>>>,
    /// CSIStorageCapacities.
    pub csi_storage_capacities: RwLock<Vec<Arc<CSIStorageCapacity>>>,
    /// VolumeAttachments.
    pub volume_attachments: RwLock<Vec<Arc<VolumeAttachment>>>,
}

fn in_ns<T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>>(
    v: &RwLock<Vec<Arc<T>>>,
    ns: &str,
) -> Vec<Arc<T>> {
    v.read().iter().filter(|o| o.metadata().namespace.as_deref().unwrap_or("default") == ns).cloned().collect()
}

fn by_name<T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>>(
    v: &RwLock<Vec<Arc<T>>>,
    ns: Option<&str>,
    name: &str,
) -> Option<Arc<T>> {
    v.read()
        .iter()
        .find(|o| {
            o.metadata().name.as_deref() == Some(name)
                && ns.is_none_or(|ns| o.metadata().namespace.as_deref().unwrap_or("default") == ns)
        })
        .cloned()
}

impl ClusterLister for MemoryLister {
    fn namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        by_name(&self.namespaces, None, name)
    }
    fn namespaces(&self) -> Vec<Arc<Namespace>> {
        self.namespaces.read().clone()
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
        by_name(&self.pvcs, Some(namespace), name)
    }
    fn persistent_volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        by_name(&self.pvs, None, name)
    }
    fn persistent_volumes(&self) -> Vec<Arc<PersistentVolume>> {
        self.pvs.read().clone()
    }
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>> {
        by_name(&self.storage_classes, None, name)
    }
    fn csi_node(&self, name: &str) -> Option<Arc<CSINode>> {
        by_name(&self.csi_nodes, None, name)
    }
    fn csi_driver(&self, name: &str) -> Option<Arc<CSIDriver>> {
        by_name(&self.csi_drivers, None, name)
    }
    fn csi_storage_capacities(&self) -> Vec<Arc<CSIStorageCapacity>> {
        self.csi_storage_capacities.read().clone()
    }
    fn volume_attachments(&self) -> Vec<Arc<VolumeAttachment>> {
        self.volume_attachments.read().clone()
    }
}
