//! A read-only copy of a cluster for `ksched explain` and `ksched whatif`: from a live API
//! server (list only), or from manifest files, which are served by the embedded API server
//! first, as `ksched local` serves them (defaulting, admission, PriorityClass resolution, the
//! resource claim controller), then read through the same client code as a live server.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ksched_apiserver::manifest::{self, Manifest};
use ksched_apiserver::resources;
use ksched_framework::listers::{MemoryLister, ObjectList};
use ksched_framework::podgroup::{PodGroup, PodGroups};
use ksched_framework::Snapshot;
use ksched_scheduler::cache::Cache;
use ksched_scheduler::config::KubeSchedulerConfiguration;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Nodes, pods and the other objects plugins read.
pub struct ClusterCopy {
    /// Nodes, by name.
    pub nodes: Vec<Node>,
    /// Pods, in creation order (then namespace/name).
    pub pods: Vec<Pod>,
    /// Namespaces, workloads, PDBs, storage and DRA objects.
    pub lister: Arc<MemoryLister>,
    /// PodGroups (workload-aware scheduling), by namespace/name.
    pub pod_groups: Vec<Arc<PodGroup>>,
}

/// Lists of objects by (apiVersion, kind).
type Lists = HashMap<(String, String), Vec<Value>>;

impl ClusterCopy {
    /// Reads the cluster from `--kubeconfig`, else from manifest paths.
    pub async fn load(kubeconfig: Option<&Path>, paths: &[PathBuf]) -> anyhow::Result<Self> {
        match kubeconfig {
            Some(k) => Self::from_api(k).await,
            None if paths.is_empty() => anyhow::bail!("give --kubeconfig or manifest paths to read the cluster from"),
            None => Self::from_manifests(paths).await,
        }
    }

    /// The objects of manifest files or directories, as an API server holds them once they are
    /// created: the embedded API server (on a free loopback port, for as long as this takes)
    /// creates them as `ksched local` does, the resource claim controller makes the claims of
    /// pods that use templates, and the result is listed as from a live server. What a dump
    /// (`kubectl get -o yaml`) records beyond a create request is kept: `status` (written
    /// through the status subresource, as kubelets and controllers wrote it), `uid` and
    /// `creationTimestamp`.
    pub async fn from_manifests(paths: &[PathBuf]) -> anyhow::Result<Self> {
        // Parse before listening: a broken manifest fails with nothing started.
        let manifests = manifest::load_paths(paths)?;
        let server = ksched_apiserver::ApiServer::start(ksched_apiserver::ServerConfig {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Default::default()
        })
        .await
        .context("starting the embedded API server to load the manifests")?;
        let loaded = async {
            let store = server.store();
            // A dump lists what every server starts with (the `default` namespace, the system
            // PriorityClasses): those are updated to the dump's, not created again.
            let (present, new): (Vec<Manifest>, Vec<Manifest>) =
                manifests.iter().cloned().partition(|m| stored(&store, &m.object).is_some());
            manifest::apply(&store, &new)?;
            let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml())?;
            let client = client_from(kc).await?;
            update_present(&client, &present).await?;
            restore_status(&client, &store, &manifests).await?;
            let waiting = ksched_scheduler::claimcontroller::sync_all(&client)
                .await
                .map_err(|e| anyhow::anyhow!("making the claims of pods that use ResourceClaimTemplates: {e}"))?;
            for w in waiting {
                tracing::warn!("resource claim controller: {w}");
            }
            // Read back from the store: the objects the server would list (the same kinds as
            // from a live server, see `KINDS`), without a second JSON round trip per object.
            let mut lists = lists_from_store(&store);
            restore_identities(&mut lists, &manifests);
            Self::from_lists(lists)
        }
        .await;
        server.shutdown().await;
        loaded
    }

    /// The objects of a running embedded API server's store.
    pub fn from_store(store: &ksched_apiserver::Store) -> anyhow::Result<Self> {
        Self::from_lists(lists_from_store(store))
    }

    /// Lists every object a scheduler watches through the API server of `kubeconfig`.
    pub async fn from_api(kubeconfig: &Path) -> anyhow::Result<Self> {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("reading the kubeconfig {}", kubeconfig.display()))?;
        Self::from_lists(list_all(&client_from(kc).await?).await?)
    }

    /// Decodes `lists`, which hold every kind of [`KINDS`] and nothing else: what is read here
    /// and what the sources list cannot drift apart.
    fn from_lists(mut lists: Lists) -> anyhow::Result<Self> {
        let mut list = |api_version: &str, kind: &str| {
            lists
                .remove(&(api_version.to_string(), kind.to_string()))
                .ok_or_else(|| anyhow::anyhow!("internal error: {api_version} {kind} is read but not listed"))
        };
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
                put(&lister.$field, list($av, $kind)?, $kind)?;
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
        fill!(volume_attachments, "storage.k8s.io/v1", "VolumeAttachment");
        fill!(resource_claims, "resource.k8s.io/v1", "ResourceClaim");
        fill!(device_classes, "resource.k8s.io/v1", "DeviceClass");
        fill!(resource_slices, "resource.k8s.io/v1", "ResourceSlice");
        let mut pod_groups: Vec<PodGroup> = decode(list("scheduling.k8s.io/v1alpha2", "PodGroup")?, "PodGroup")?;
        pod_groups
            .sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        let mut nodes: Vec<Node> = decode(list("v1", "Node")?, "Node")?;
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut pods: Vec<Pod> = decode(list("v1", "Pod")?, "Pod")?;
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
        if let Some((api_version, kind)) = lists.keys().next() {
            anyhow::bail!("internal error: {api_version} {kind} is listed but not read");
        }
        Ok(ClusterCopy { nodes, pods, lister, pod_groups: pod_groups.into_iter().map(Arc::new).collect() })
    }

    /// Gives the frameworks' pod-group view the cluster's PodGroups and their member pods, as
    /// the scheduler's informers do, when `cfg` turns GenericWorkload on (without it the
    /// scheduler does not watch PodGroups).
    pub fn track_pod_groups(&self, cfg: &KubeSchedulerConfiguration, groups: &PodGroups) {
        if !cfg.features.generic_workload {
            return;
        }
        for pg in &self.pod_groups {
            groups.upsert(pg.clone());
        }
        for p in &self.pods {
            groups.observe_pod(None, Some(&Arc::new(p.into())));
        }
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
    ("storage.k8s.io/v1", "VolumeAttachment", "volumeattachments"),
    ("resource.k8s.io/v1", "ResourceClaim", "resourceclaims"),
    ("resource.k8s.io/v1", "DeviceClass", "deviceclasses"),
    ("resource.k8s.io/v1", "ResourceSlice", "resourceslices"),
    ("scheduling.k8s.io/v1alpha2", "PodGroup", "podgroups"),
];

async fn client_from(kc: kube::config::Kubeconfig) -> anyhow::Result<kube::Client> {
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

fn api_resource(api_version: &str, kind: &str, plural: &str) -> kube::api::ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    kube::api::ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk(group, version, kind), plural)
}

/// Every kind of [`KINDS`] a store holds.
fn lists_from_store(store: &ksched_apiserver::Store) -> Lists {
    KINDS
        .iter()
        .map(|(api_version, kind, _)| {
            ((api_version.to_string(), kind.to_string()), store.list(api_version, kind, None))
        })
        .collect()
}

/// Lists every kind of [`KINDS`], as JSON with `apiVersion` and `kind` set.
async fn list_all(client: &kube::Client) -> anyhow::Result<Lists> {
    let mut lists = Lists::new();
    for (api_version, kind, plural) in KINDS {
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(client.clone(), &api_resource(api_version, kind, plural));
        let list = match api.list(&Default::default()).await {
            Ok(l) => l,
            // Optional APIs (CSI, storage capacity, DRA, alpha PodGroups) may be absent or forbidden.
            Err(kube::Error::Api(e)) if e.code == 404 && !matches!(*kind, "Node" | "Pod") => {
                tracing::debug!(kind, "not served; continuing without them");
                lists.insert((api_version.to_string(), kind.to_string()), Vec::new());
                continue;
            }
            Err(e) if !matches!(*kind, "Node" | "Pod") => {
                tracing::warn!(kind, error = %e, "listing failed; continuing without them");
                lists.insert((api_version.to_string(), kind.to_string()), Vec::new());
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
    Ok(lists)
}

/// `kind/namespace/name` of a manifest's object (namespace `default` when a namespaced object
/// names none; empty for cluster-scoped kinds), or `None` for kinds not served or unnamed objects.
fn manifest_key(obj: &Value) -> Option<(resources::ResourceId, String)> {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let rid = resources::by_kind(s("/apiVersion"), s("/kind"))?;
    let name = s("/metadata/name");
    if name.is_empty() {
        return None;
    }
    let ns = match (resources::def(rid).namespaced, s("/metadata/namespace")) {
        (false, _) => "",
        (true, "") => "default",
        (true, ns) => ns,
    };
    Some((rid, format!("{}/{ns}/{name}", s("/kind"))))
}

fn listed_key(obj: &Value) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    format!("{}/{}/{}", s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// The object a manifest names, as the store holds it.
fn stored(store: &ksched_apiserver::Store, obj: &Value) -> Option<Value> {
    let (rid, _) = manifest_key(obj)?;
    let d = resources::def(rid);
    let (ns, name) = name_of(d, obj);
    store.get(&d.api_version(), d.kind, ns, name)
}

/// (namespace, name) of a manifest's object (namespace `default` when a namespaced object names
/// none).
fn name_of<'a>(d: &resources::ResourceDef, obj: &'a Value) -> (Option<&'a str>, &'a str) {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let ns = d.namespaced.then(|| Some(s("/metadata/namespace")).filter(|n| !n.is_empty()).unwrap_or("default"));
    (ns, s("/metadata/name"))
}

fn dynamic_api(
    client: &kube::Client,
    d: &resources::ResourceDef,
    ns: Option<&str>,
) -> kube::Api<kube::api::DynamicObject> {
    let ar = api_resource(&d.api_version(), d.kind, d.plural);
    match ns {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &ar),
        None => kube::Api::all_with(client.clone(), &ar),
    }
}

fn describe(m: &Manifest, d: &resources::ResourceDef) -> String {
    let (ns, name) = name_of(d, &m.object);
    format!("{}: {} {}", m.source, d.kind, ns.map_or(name.to_string(), |ns| format!("{ns}/{name}")))
}

/// Gives objects every server starts with the labels and annotations a manifest gives them
/// (namespace labels matter to namespace selectors); their specs are the server's own.
async fn update_present(client: &kube::Client, present: &[Manifest]) -> anyhow::Result<()> {
    for m in present {
        let Some((rid, _)) = manifest_key(&m.object) else { continue };
        let d = resources::def(rid);
        let meta = |f: &str| m.object.pointer(&format!("/metadata/{f}")).cloned().unwrap_or(Value::Null);
        if meta("labels").is_null() && meta("annotations").is_null() {
            continue;
        }
        let (ns, name) = name_of(d, &m.object);
        let patch = serde_json::json!({"metadata": {"labels": meta("labels"), "annotations": meta("annotations")}});
        dynamic_api(client, d, ns)
            .patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
            .await
            .with_context(|| format!("{}: updating its labels and annotations", describe(m, d)))?;
    }
    Ok(())
}

fn has_status(obj: &Value) -> bool {
    obj.get("status").and_then(Value::as_object).is_some_and(|m| !m.is_empty())
}

/// Writes the `status` of manifests that carry one (a dump's) where creating the object did
/// not keep it (the API server resets a new pod's status, as upstream's does), through the
/// status subresource, as the kubelet and controllers wrote it in the cluster dumped.
async fn restore_status(
    client: &kube::Client,
    store: &ksched_apiserver::Store,
    manifests: &[Manifest],
) -> anyhow::Result<()> {
    for m in manifests.iter().filter(|m| has_status(&m.object)) {
        let Some((rid, _)) = manifest_key(&m.object) else { continue };
        let d = resources::def(rid);
        if !d.has_status {
            continue;
        }
        if stored(store, &m.object).as_ref().and_then(|o| o.get("status")) == m.object.get("status") {
            continue;
        }
        let (ns, name) = name_of(d, &m.object);
        let patch = serde_json::json!({"status": m.object["status"]});
        dynamic_api(client, d, ns)
            .patch_status(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
            .await
            .with_context(|| format!("{}: restoring its status", describe(m, d)))?;
    }
    Ok(())
}

/// Gives listed objects back the `uid` and `creationTimestamp` their manifests recorded (a
/// dump's), which creating them reassigned, and points every reference to a reassigned uid
/// (owner references, a claim's `reservedFor`) back at the recorded one, so that ownership
/// and reservations read as in the cluster dumped and pods keep their creation order.
fn restore_identities(lists: &mut Lists, manifests: &[Manifest]) {
    let recorded: HashMap<String, &Value> =
        manifests.iter().filter_map(|m| manifest_key(&m.object).map(|(_, k)| (k, &m.object))).collect();
    let mut uids: BTreeMap<String, String> = BTreeMap::new();
    for obj in lists.values_mut().flatten() {
        let Some(m) = recorded.get(&listed_key(obj)) else { continue };
        if let (Some(old), Some(new)) = (
            m.pointer("/metadata/uid").and_then(Value::as_str).filter(|u| !u.is_empty()),
            obj.pointer("/metadata/uid").and_then(Value::as_str),
        ) {
            uids.insert(new.to_string(), old.to_string());
        }
        if let Some(t) = m.pointer("/metadata/creationTimestamp").filter(|t| t.is_string()) {
            obj["metadata"]["creationTimestamp"] = t.clone();
        }
    }
    if uids.is_empty() {
        return;
    }
    fn remap(v: &mut Value, uids: &BTreeMap<String, String>) {
        match v {
            Value::String(s) => {
                if let Some(old) = uids.get(s.as_str()) {
                    s.clone_from(old);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|v| remap(v, uids)),
            Value::Object(o) => o.values_mut().for_each(|v| remap(v, uids)),
            _ => {}
        }
    }
    for obj in lists.values_mut().flatten() {
        remap(obj, &uids);
    }
}

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
    let mut out = ClusterCopy {
        nodes: Vec::new(),
        pods: Vec::new(),
        lister: Arc::new(MemoryLister::default()),
        pod_groups: Vec::new(),
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::listers::ClusterLister;

    fn example_cluster() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster")
    }

    #[tokio::test]
    async fn manifests_give_every_kind_the_listers_read_and_the_claims_of_templates() {
        let c = ClusterCopy::from_manifests(&[example_cluster()]).await.unwrap();
        let l = &c.lister;
        assert_eq!((c.nodes.len(), l.device_classes().len(), l.resource_slices().len()), (15, 2, 3));
        assert_eq!((l.persistent_volumes().len(), l.storage_class("local-storage").is_some()), (1, true));
        assert!(l.persistent_volume_claim("default", "cache-data").is_some());
        assert!(l.resource_claim("batch", "b200").is_some());
        // The claim controller's: one claim per pod of the template, named in the pod's status and
        // owned by the pod.
        for name in ["llm-train-0", "llm-train-1"] {
            let pod = c.find_pod(&format!("batch/{name}")).unwrap();
            let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.clone()).unwrap_or_default();
            assert_eq!(statuses.len(), 1, "{name}");
            let claim_name = statuses[0].resource_claim_name.clone().unwrap();
            assert!(claim_name.starts_with(&format!("{name}-gpus-")), "{claim_name}");
            let claim = l.resource_claim("batch", &claim_name).expect("the generated claim");
            let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!(Some(&owner.uid), pod.metadata.uid.as_ref());
        }
        assert_eq!(l.resource_claims().len(), 5);
        // Priority is resolved from the PriorityClass, as admission does.
        let pretrain = c.find_pod("batch/llm-pretrain-0").unwrap();
        assert_eq!(pretrain.spec.as_ref().and_then(|s| s.priority), Some(1000));
    }

    #[tokio::test]
    async fn pod_groups_reach_the_frameworks_when_the_scheduler_would_watch_them() {
        let c = ClusterCopy::from_manifests(&[example_cluster()]).await.unwrap();
        let names: Vec<String> = c
            .pod_groups
            .iter()
            .map(|g| {
                format!(
                    "{}/{}",
                    g.metadata.namespace.as_deref().unwrap_or(""),
                    g.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(names, ["batch/llm-finetune", "batch/llm-pretrain"]);
        let registry = ksched_plugins::in_tree_registry();
        let gated = ksched_scheduler::config::default_config_with(&crate::local::local_features());
        let explainer = ksched_scheduler::explain::Explainer::new(&gated, &registry, c.lister.clone()).unwrap();
        let groups = explainer.pod_groups().unwrap();
        c.track_pod_groups(&gated, &groups);
        let pg = groups.get("batch", "llm-pretrain").expect("the PodGroup");
        assert_eq!(ksched_framework::podgroup::gang_min_count(&pg), Some(8));
        assert_eq!(groups.all_pods_count("batch", "llm-pretrain"), 8);
        // Without GenericWorkload the scheduler neither watches PodGroups nor tracks members.
        let plain = ksched_scheduler::config::default_config();
        let explainer = ksched_scheduler::explain::Explainer::new(&plain, &registry, c.lister.clone()).unwrap();
        let groups = explainer.pod_groups().unwrap();
        c.track_pod_groups(&plain, &groups);
        assert!(groups.get("batch", "llm-pretrain").is_none());
    }
}
