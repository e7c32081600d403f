//! A read-only copy of a cluster for `ksched explain` and `ksched whatif`: from manifests
//! (defaulted and validated as the API server would) or from a live API server (list only).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ksched_framework::listers::{MemoryLister, ObjectList};
use ksched_framework::Snapshot;
use ksched_scheduler::cache::Cache;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Nodes, pods and the other objects plugins read.
pub struct ClusterCopy {
    /// Nodes, by name.
    pub nodes: Vec<Node>,
    /// Pods, in creation order (then namespace/name).
    pub pods: Vec<Pod>,
    /// Namespaces, volumes, PDBs, workloads.
    pub lister: Arc<MemoryLister>,
}

impl ClusterCopy {
    /// Reads the cluster from `--kubeconfig`, else from manifest paths.
    pub async fn load(kubeconfig: Option<&Path>, paths: &[PathBuf]) -> anyhow::Result<Self> {
        match kubeconfig {
            Some(k) => Self::from_api(k).await,
            None if paths.is_empty() => anyhow::bail!("give --kubeconfig or manifest paths to read the cluster from"),
            None => Self::from_manifests(paths),
        }
    }

    /// The objects of manifest files or directories.
    pub fn from_manifests(paths: &[PathBuf]) -> anyhow::Result<Self> {
        let manifests = ksched_apiserver::manifest::load_paths(paths)?;
        let store = ksched_apiserver::manifest::load_in_memory(&manifests)?;
        Self::from_lists(|api_version, kind| store.list(api_version, kind, None))
    }

    /// The objects of a running embedded API server's store.
    pub fn from_store(store: &ksched_apiserver::Store) -> anyhow::Result<Self> {
        Self::from_lists(|api_version, kind| store.list(api_version, kind, None))
    }

    /// Lists every object a scheduler watches through the API server of `kubeconfig`.
    pub async fn from_api(kubeconfig: &Path) -> anyhow::Result<Self> {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading the kubeconfig {}", kubeconfig.display()))?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
        let client = kube::Client::try_from(cfg)?;
        let mut lists: std::collections::HashMap<(String, String), Vec<Value>> = Default::default();
        for (api_version, kind, plural) in KINDS {
            let (group, version) = api_version.split_once('/').unwrap_or(("", *api_version));
            let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
            let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
            let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), &ar);
            let list = match api.list(&Default::default()).await {
                Ok(l) => l,
                // Optional APIs (CSI, storage capacity) may be absent or forbidden.
                Err(e) if !matches!(*kind, "Node" | "Pod") => {
                    tracing::warn!(kind, error = %e, "listing failed; continuing without them");
                    continue;
                }
                Err(e) => return Err(anyhow::anyhow!("listing {plural}: {e}")),
            };
            let items = list
                .items
                .into_iter()
                .map(|o| {
                    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
                    v["apiVersion"] = Value::String(api_version.to_string());
                    v["kind"] = Value::String(kind.to_string());
                    v
                })
                .collect();
            lists.insert((api_version.to_string(), kind.to_string()), items);
        }
        Self::from_lists(|api_version, kind| {
            lists.get(&(api_version.to_string(), kind.to_string())).cloned().unwrap_or_default()
        })
    }

    fn from_lists(list: impl Fn(&str, &str) -> Vec<Value>) -> anyhow::Result<Self> {
        fn decode<T: DeserializeOwned>(list: Vec<Value>, kind: &str) -> anyhow::Result<Vec<T>> {
            list.into_iter()
                .map(|v| {
                    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
                    serde_json::from_value(v).with_context(|| format!("decoding {kind} {name:?}"))
                })
                .collect()
        }
        fn put<T>(into: &ObjectList<T>, list: Vec<Value>, kind: &str) -> anyhow::Result<()>
        where
            T: DeserializeOwned + k8s_openapi::Metadata<Ty = ObjectMeta>,
        {
            for o in decode::<T>(list, kind)? {
                into.upsert(Arc::new(o));
            }
            Ok(())
        }
        let lister = Arc::new(MemoryLister::default());
        macro_rules! fill {
            ($field:ident, $av:literal, $kind:literal) => {
                put(&lister.$field, list($av, $kind), $kind)?;
            };
        }
        fill!(namespaces, "v1", "Namespace");
        fill!(services, "v1", "Service");
        fill!(replication_controllers, "v1", "ReplicationController");
        fill!(replica_sets, "apps/v1", "ReplicaSet");
        fill!(stateful_sets, "apps/v1", "StatefulSet");
        fill!(pdbs, "policy/v1", "PodDisruptionBudget");
        fill!(pvcs, "v1", "PersistentVolumeClaim");
        fill!(pvs, "v1", "PersistentVolume");
        fill!(storage_classes, "storage.k8s.io/v1", "StorageClass");
        fill!(csi_nodes, "storage.k8s.io/v1", "CSINode");
        fill!(csi_drivers, "storage.k8s.io/v1", "CSIDriver");
        fill!(csi_storage_capacities, "storage.k8s.io/v1", "CSIStorageCapacity");
        let mut nodes: Vec<Node> = decode(list("v1", "Node"), "Node")?;
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut pods: Vec<Pod> = decode(list("v1", "Pod"), "Pod")?;
        pods.sort_by(|a, b| {
            let key = |p: &Pod| {
                (
                    p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    p.metadata.namespace.clone(),
                    p.metadata.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        Ok(ClusterCopy { nodes, pods, lister })
    }

    /// Pods that occupy their node: bound and not finished.
    pub fn bound_pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.iter().filter(|p| node_name(p).is_some() && !finished(p))
    }

    /// A snapshot of the nodes with their bound pods, built by the scheduler's own cache (same
    /// node order, image states and derived lists as a live cycle).
    /// `without` leaves one pod (`namespace/name`) out, to explain a bound pod as if new.
    pub fn snapshot(&self, without: Option<&str>) -> anyhow::Result<Snapshot> {
        let cache = Cache::new();
        for n in &self.nodes {
            cache.add_node(Arc::new(n.into()));
        }
        for p in self.bound_pods().filter(|p| without.is_none_or(|k| pod_key(p) != k)) {
            cache.add_pod(Arc::new(p.into())).map_err(|e| anyhow::anyhow!("adding pod to the cache: {e}"))?;
        }
        let mut snap = Snapshot::default();
        cache.update_snapshot(&mut snap).map_err(|e| anyhow::anyhow!("building the snapshot: {e}"))?;
        Ok(snap)
    }

    /// The pod `namespace/name` (or `name` in `default`).
    pub fn find_pod(&self, key: &str) -> anyhow::Result<&Pod> {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        self.pods
            .iter()
            .find(|p| p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(name))
            .ok_or_else(|| anyhow::anyhow!("pod {ns}/{name} not found"))
    }
}

/// Every kind the scheduler reads: (apiVersion, kind, plural).
const KINDS: &[(&str, &str, &str)] = &[
    ("v1", "Node", "nodes"),
    ("v1", "Pod", "pods"),
    ("v1", "Namespace", "namespaces"),
    ("v1", "Service", "services"),
    ("v1", "ReplicationController", "replicationcontrollers"),
    ("apps/v1", "ReplicaSet", "replicasets"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ("v1", "PersistentVolume", "persistentvolumes"),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses"),
    ("storage.k8s.io/v1", "CSINode", "csinodes"),
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers"),
    ("storage.k8s.io/v1", "CSIStorageCapacity", "csistoragecapacities"),
];

/// `namespace/name`.
pub fn pod_key(p: &Pod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""))
}

/// `spec.nodeName`, when set.
pub fn node_name(p: &Pod) -> Option<&str> {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

/// Succeeded or Failed pods free their node.
pub fn finished(p: &Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// A synthetic cluster for benchmarks: `nodes` nodes of 4 cpu / 16Gi in three zones, each
/// running two small pods, and two pending probes: `probe-fits` (fits everywhere) and
/// `probe-too-big` (fits nowhere until 1 cpu is freed).
pub fn synthetic(nodes: usize) -> anyhow::Result<ClusterCopy> {
    use serde_json::json;
    let mut out = ClusterCopy { nodes: Vec::new(), pods: Vec::new(), lister: Arc::new(MemoryLister::default()) };
    for i in 0..nodes {
        let name = format!("node-{i:05}");
        out.nodes.push(serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": format!("zone-{}", i % 3)}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}
        }))?);
        for k in 0..2 {
            out.pods.push(serde_json::from_value(json!({
                "metadata": {"name": format!("p-{i:05}-{k}"), "namespace": "default", "uid": format!("u-{i}-{k}"),
                    "labels": {"app": "web"}},
                "spec": {"nodeName": name, "schedulerName": "default-scheduler",
                    "containers": [{"name": "c", "image": "i",
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}
            }))?);
        }
    }
    for (name, cpu) in [("probe-fits", "500m"), ("probe-too-big", "3")] {
        out.pods.push(serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"app": "web"}},
            "spec": {"schedulerName": "default-scheduler",
                "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
        }))?);
    }
    Ok(out)
}
