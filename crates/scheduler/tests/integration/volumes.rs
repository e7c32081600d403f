//! Volume scheduling end to end: the embedded API server, our scheduler over HTTP with the
//! default configuration, and the test playing the PV controller (the embedded server has none).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use ksched_apiserver::{ApiServer, RunningServer, ServerConfig, Store};
use ksched_scheduler::app::{self, RunningScheduler};
use ksched_scheduler::config;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

struct Cluster {
    server: RunningServer,
    store: Store,
    client: kube::Client,
    scheduler: Option<RunningScheduler>,
}

impl Cluster {
    async fn start() -> Cluster {
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
        let store = server.store();
        let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(cfg).unwrap();
        Cluster { server, store, client, scheduler: None }
    }

    async fn run_scheduler(&mut self) {
        let sched_cfg = config::default_config();
        let registry = ksched_plugins::in_tree_registry();
        self.scheduler = Some(app::start(self.client.clone(), &sched_cfg, &registry).await.unwrap());
    }

    fn get(&self, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
        self.store.get(api_version, kind, ns, name).unwrap_or(Value::Null)
    }

    fn node_of(&self, name: &str) -> Option<String> {
        self.get("v1", "Pod", Some("default"), name).pointer("/spec/nodeName").and_then(Value::as_str).map(String::from)
    }

    fn condition_message(&self, name: &str) -> Option<String> {
        let p = self.get("v1", "Pod", Some("default"), name);
        p.pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            .and_then(|c| c["message"].as_str().map(str::to_string))
    }

    async fn wait_for<T>(&self, what: &str, timeout: Duration, mut f: impl FnMut(&Cluster) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the PV controller does once the scheduler set a PV's claimRef: bind the claim to the
    /// PV and mark both bound.
    async fn complete_binding(&self, pv_name: &str) {
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), "default");
        let pv = pvs.get(pv_name).await.unwrap();
        let claim = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.name.clone()).unwrap();
        let mut pvc = pvcs.get(&claim).await.unwrap();
        pvc.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.to_string());
        pvc.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
        pvcs.replace(&claim, &PostParams::default(), &pvc).await.unwrap();
        let status = Patch::Merge(json!({"status": {"phase": "Bound"}}));
        pvcs.patch_status(&claim, &PatchParams::default(), &status).await.unwrap();
        pvs.patch_status(pv_name, &PatchParams::default(), &status).await.unwrap();
    }

    async fn stop(mut self) {
        if let Some(s) = self.scheduler.take() {
            s.shutdown(Duration::from_secs(5)).await;
        }
        self.server.shutdown().await;
    }
}

fn node(name: &str, zone: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
}

fn pod_with_claim(name: &str, claim: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_claim_binds_to_the_zone_of_its_volume() {
    let mut c = Cluster::start().await;
    c.store.create(node("node-a", "a")).unwrap();
    c.store.create(node("node-b", "b")).unwrap();
    c.store
        .create(json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}))
        .unwrap();
    c.store
        .create(json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-b"},
            "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "local": {"path": "/mnt/disk"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}}}))
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(c.client.clone());
    pvs.patch_status("pv-b", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Available"}})))
        .await
        .unwrap();
    c.store
        .create(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}))
        .unwrap();
    c.store.create(pod_with_claim("web", "data")).unwrap();
    c.run_scheduler().await;

    // PreBind wrote the claimRef; play the PV controller
    let claim_ref = c
        .wait_for("the PV's claimRef", Duration::from_secs(20), |c| {
            c.get("v1", "PersistentVolume", None, "pv-b").pointer("/spec/claimRef").cloned()
        })
        .await;
    assert_eq!(claim_ref["name"], "data");
    assert_eq!(claim_ref["namespace"], "default");
    assert!(claim_ref["uid"].as_str().is_some_and(|u| !u.is_empty()));
    let pv = c.get("v1", "PersistentVolume", None, "pv-b");
    assert_eq!(pv.pointer("/metadata/annotations/pv.kubernetes.io~1bound-by-controller"), Some(&json!("yes")));
    assert!(c.node_of("web").is_none(), "the pod waits in PreBind until the claim is bound");
    c.complete_binding("pv-b").await;

    let n = c.wait_for("pod bound", Duration::from_secs(20), |c| c.node_of("web")).await;
    assert_eq!(n, "node-b");
    let pvc = c.get("v1", "PersistentVolumeClaim", Some("default"), "data");
    assert_eq!(pvc.pointer("/spec/volumeName"), Some(&json!("pv-b")));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_claim_is_reported_and_a_created_claim_unblocks_the_pod() {
    let mut c = Cluster::start().await;
    c.store.create(node("node-a", "a")).unwrap();
    c.store.create(node("node-b", "b")).unwrap();
    c.store.create(pod_with_claim("orphan", "x")).unwrap();
    c.run_scheduler().await;
    let msg = c.wait_for("PodScheduled=False", Duration::from_secs(20), |c| c.condition_message("orphan")).await;
    assert!(msg.starts_with("0/2 nodes are available: persistentvolumeclaim \"x\" not found."), "{msg}");

    // a bound claim appears: the PVC/Add event requeues the pod
    c.store
        .create(json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-x"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"},
                "claimRef": {"name": "x", "namespace": "default"}}}))
        .unwrap();
    c.store
        .create(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "x", "namespace": "default",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-x",
                "resources": {"requests": {"storage": "1Gi"}}}}))
        .unwrap();
    let n = c.wait_for("pod bound", Duration::from_secs(20), |c| c.node_of("orphan")).await;
    assert!(n == "node-a" || n == "node-b");
    c.stop().await;
}
