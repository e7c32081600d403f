//! The resource claim controller against the embedded API server, on what happens after a
//! pod: as upstream's (kube-controller-manager's resourceclaim controller, with the garbage
//! collector's part for claims made for a pod), a claim's reservation for a pod that is
//! deleted or done is dropped, a claim left unreserved is deallocated (allocation cleared, then
//! the delete-protection finalizer removed) before anything else, and a claim made from a
//! template is deleted once its pod is done or gone; a claim the user made stays, deallocated.
//!
//! The scheduler's part (allocating and reserving) is played by the test, through the API.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::resource::v1::ResourceClaim;
use ksched_apiserver::{ApiServer, RunningServer, ServerConfig, Store};
use ksched_scheduler::claimcontroller;
use kube::api::{Api, PostParams};
use serde_json::{json, Value};

const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

struct Cluster {
    server: RunningServer,
    client: kube::Client,
}

impl Cluster {
    async fn start() -> Cluster {
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
        let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
        let client =
            kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap())
                .unwrap();
        let store = server.store();
        store
            .create(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}))
            .unwrap();
        store
            .create(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}))
            .unwrap();
        Cluster { server, client }
    }

    fn store(&self) -> Store {
        self.server.store()
    }

    /// A pod using claim entry `gpu`: from the template, or the named claim.
    fn create_pod(&self, name: &str, claim: Option<&str>) -> String {
        let entry = match claim {
            Some(c) => json!({"name": "gpu", "resourceClaimName": c}),
            None => json!({"name": "gpu", "resourceClaimTemplateName": "one-gpu"}),
        };
        let p = self
            .store()
            .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": [entry]}}))
            .unwrap();
        p["metadata"]["uid"].as_str().unwrap().to_string()
    }

    fn claim(&self, name: &str) -> Option<Value> {
        self.store().get("resource.k8s.io/v1", "ResourceClaim", Some("default"), name)
    }

    /// The claim the controller made for `pod`, once it is recorded in the pod's status.
    async fn template_claim_of(&self, pod: &str) -> String {
        wait_for(&format!("the claim of {pod}"), || {
            let p = self.store().get("v1", "Pod", Some("default"), pod)?;
            p.pointer("/status/resourceClaimStatuses/0/resourceClaimName").and_then(Value::as_str).map(str::to_string)
        })
        .await
    }

    /// What the scheduler does to a claim it allocates for `pods` on node `n1`: the finalizer,
    /// then the allocation and the reservations.
    async fn allocate(&self, claim: &str, pods: &[(&str, &str)]) {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), "default");
        let mut c = api.get(claim).await.unwrap();
        c.metadata.finalizers.get_or_insert_with(Vec::new).push(FINALIZER.into());
        let mut c = api.replace(claim, &PostParams::default(), &c).await.unwrap();
        let reserved: Vec<Value> =
            pods.iter().map(|(name, uid)| json!({"resource": "pods", "name": name, "uid": uid})).collect();
        c.status = Some(
            serde_json::from_value(json!({
                "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}},
                "reservedFor": reserved,
            }))
            .unwrap(),
        );
        api.replace_status(claim, &PostParams::default(), &c).await.unwrap();
    }
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The states a claim goes through, from its watch: (allocated, reservations, finalizer) per
/// change, and whether it was deleted at the end.
struct History {
    events: tokio::sync::mpsc::UnboundedReceiver<(String, Value)>,
}

impl History {
    fn start(store: &Store) -> History {
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        let mut stream =
            store.watch_kind("resource.k8s.io/v1", "ResourceClaim", Some(store.resource_version())).unwrap();
        tokio::spawn(async move {
            while let Some(frame) = stream.next().await {
                for line in frame.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    let ev: Value = serde_json::from_slice(line).unwrap();
                    let _ = tx.send((ev["type"].as_str().unwrap_or_default().to_string(), ev["object"].clone()));
                }
            }
        });
        History { events }
    }

    /// The changes of claim `name` until it is deleted (or 20 s pass): (type, allocated,
    /// reserved pods, has the finalizer).
    async fn of_until_deleted(&mut self, name: &str) -> Vec<(String, bool, Vec<String>, bool)> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while let Ok(Some((ty, obj))) = tokio::time::timeout_at(deadline, self.events.recv()).await {
            if obj["metadata"]["name"] != name {
                continue;
            }
            let reserved = obj
                .pointer("/status/reservedFor")
                .and_then(Value::as_array)
                .map(|r| r.iter().map(|x| x["name"].as_str().unwrap_or_default().to_string()).collect())
                .unwrap_or_default();
            let fin = obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.contains(&json!(FINALIZER)));
            let deleted = ty == "DELETED";
            out.push((ty, obj.pointer("/status/allocation").is_some_and(|a| !a.is_null()), reserved, fin));
            if deleted {
                break;
            }
        }
        out
    }
}

fn allocated(c: &Value) -> bool {
    c.pointer("/status/allocation").is_some_and(|a| !a.is_null())
}

fn reserved(c: &Value) -> Vec<String> {
    c.pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .map(|r| r.iter().map(|x| x["name"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pods_template_claim_is_deallocated_then_deleted() {
    let c = Cluster::start().await;
    let controller = claimcontroller::spawn(c.client.clone());
    let uid = c.create_pod("train", None);
    let claim = c.template_claim_of("train").await;
    c.allocate(&claim, &[("train", &uid)]).await;
    let mut history = History::start(&c.store());
    c.store().delete("v1", "Pod", Some("default"), "train").unwrap();
    let seen = history.of_until_deleted(&claim).await;
    // Deallocated and unreserved first (the devices are free from then on), then unprotected,
    // then deleted.
    assert_eq!(
        seen,
        [
            ("MODIFIED".to_string(), false, vec![], true),
            ("MODIFIED".to_string(), false, vec![], false),
            ("DELETED".to_string(), false, vec![], false),
        ],
        "{claim}"
    );
    controller.abort();
    c.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_claim_keeps_its_allocation_until_its_last_pod_leaves_and_is_not_deleted() {
    let c = Cluster::start().await;
    c.store()
        .create(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}))
        .unwrap();
    let controller = claimcontroller::spawn(c.client.clone());
    let a = c.create_pod("a", Some("shared"));
    let b = c.create_pod("b", Some("shared"));
    c.allocate("shared", &[("a", &a), ("b", &b)]).await;
    c.store().delete("v1", "Pod", Some("default"), "a").unwrap();
    let after_a = wait_for("a's reservation to go", || c.claim("shared").filter(|x| reserved(x) == ["b"])).await;
    assert!(allocated(&after_a), "b still uses it: {after_a}");
    c.store().delete("v1", "Pod", Some("default"), "b").unwrap();
    let after_b = wait_for("the claim to be unprotected", || {
        c.claim("shared")
            .filter(|x| x.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty()))
    })
    .await;
    assert!(!allocated(&after_b) && reserved(&after_b).is_empty(), "{after_b}");
    // Made by the user, not for a pod: it stays, ready for the next consumer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(c.claim("shared").is_some());
    controller.abort();
    c.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_pods_claim_is_freed_while_the_pod_remains() {
    let c = Cluster::start().await;
    let controller = claimcontroller::spawn(c.client.clone());
    let uid = c.create_pod("job", None);
    let claim = c.template_claim_of("job").await;
    c.allocate(&claim, &[("job", &uid)]).await;
    let mut history = History::start(&c.store());
    let pods: Api<ksched_framework::pod::Pod> = Api::namespaced(c.client.clone(), "default");
    pods.patch_status("job", &Default::default(), &kube::api::Patch::Merge(json!({"status": {"phase": "Succeeded"}})))
        .await
        .unwrap();
    let seen = history.of_until_deleted(&claim).await;
    assert_eq!(seen.first().map(|s| (s.1, s.2.is_empty())), Some((false, true)), "{seen:?}");
    assert_eq!(seen.last().map(|s| s.0.as_str()), Some("DELETED"), "{seen:?}");
    assert!(c.store().get("v1", "Pod", Some("default"), "job").is_some());
    controller.abort();
    c.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_for_a_pod_deleted_while_the_controller_was_down_is_released_at_start() {
    let c = Cluster::start().await;
    c.store()
        .create(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "left-over", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}))
        .unwrap();
    let uid = c.create_pod("gone", Some("left-over"));
    c.allocate("left-over", &[("gone", &uid)]).await;
    c.store().delete("v1", "Pod", Some("default"), "gone").unwrap();
    let still = c.claim("left-over").unwrap();
    assert!(allocated(&still), "nothing freed it yet: {still}");
    let controller = claimcontroller::spawn(c.client.clone());
    let freed = wait_for("the claim to be deallocated", || c.claim("left-over").filter(|x| !allocated(x))).await;
    assert!(reserved(&freed).is_empty(), "{freed}");
    controller.abort();
    c.server.shutdown().await;
}

/// With the scheduler: one GPU, two pods asking for it from the template. The second waits
/// until the first is deleted and its claim deallocated by the controller, then gets the GPU
/// freed that way (nothing else changes in the cluster: no node event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gpu_of_a_deleted_pods_claim_goes_to_the_next_pod() {
    let c = Cluster::start().await;
    let store = c.store();
    store
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap();
    store
        .create(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}]}}))
        .unwrap();
    let controller = claimcontroller::spawn(c.client.clone());
    let scheduler = ksched_scheduler::app::start(
        c.client.clone(),
        &ksched_scheduler::config::default_config(),
        &ksched_plugins::in_tree_registry(),
    )
    .await
    .unwrap();
    let node_of = |pod: &str| {
        store
            .get("v1", "Pod", Some("default"), pod)?
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    c.create_pod("first", None);
    wait_for("first to be bound", || node_of("first")).await;
    let first_claim = c.template_claim_of("first").await;
    c.create_pod("second", None);
    let second_claim = c.template_claim_of("second").await;
    // It has been tried and found no device.
    wait_for("second to be unschedulable", || {
        let p = store.get("v1", "Pod", Some("default"), "second")?;
        let cs = p.pointer("/status/conditions")?.as_array()?.clone();
        cs.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "False").then_some(())
    })
    .await;
    assert!(c.claim(&first_claim).is_some_and(|x| allocated(&x)));
    store.delete("v1", "Pod", Some("default"), "first").unwrap();
    let node = wait_for("second to be bound", || node_of("second")).await;
    assert_eq!(node, "n1");
    let claim = c.claim(&second_claim).unwrap();
    assert_eq!(claim.pointer("/status/allocation/devices/results/0/device"), Some(&json!("gpu-0")), "{claim}");
    assert_eq!(reserved(&claim), ["second"]);
    wait_for("the first claim to be deleted", || c.claim(&first_claim).is_none().then_some(())).await;
    scheduler.shutdown(Duration::from_secs(5)).await;
    controller.abort();
    c.server.shutdown().await;
}
