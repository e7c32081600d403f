//! DynamicResources through the embedded API server: a pod's ResourceClaimTemplate becomes a
//! claim (the claim controller), the scheduler allocates and reserves it and binds the pod,
//! and kubectl shows the allocation. Bad input gets the API server's 422 or upstream's
//! scheduling message, and no pod is lost.
//!
//! kubectl comes from `.ci/install-kubectl` (`target/tools/kubectl-*`) or `/usr/bin/kubectl`;
//! the test fails when there is none.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ksched_apiserver::{ApiServer, ServerConfig, Store};
use ksched_scheduler::{app, claimcontroller, config};
use serde_json::{json, Value};

fn kubectl() -> PathBuf {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&tools)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/kubectl"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    let system = PathBuf::from("/usr/bin/kubectl");
    if system.exists() {
        found.push(system);
    }
    found.into_iter().next().expect("kubectl is needed: run .ci/install-kubectl")
}

fn create(store: &Store, v: Value) {
    store.create(v.clone()).unwrap_or_else(|e| panic!("creating {v}: {e:?}"));
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn gpu_node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_claim_is_allocated_bound_and_shown_by_kubectl() {
    let kubectl = kubectl();
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
    let store = server.store();
    let dir = std::env::temp_dir().join(format!("ksched-dra-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
    let client =
        kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap()).unwrap();

    create(&store, gpu_node("n1"));
    create(&store, gpu_node("n2"));
    create(
        &store,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n2-gpus"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n2", "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]}}),
    );
    create(
        &store,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    );
    create(
        &store,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}),
    );
    // bad input: a broken selector is refused with the field named, as kube-apiserver does
    let err = store
        .create(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "broken", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model =="}}]}}]}}}))
        .unwrap_err();
    let status = err.to_status();
    assert_eq!(status["code"], 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value"),
        "{status}"
    );
    create(
        &store,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}}),
    );
    create(
        &store,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "no-class", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": [{"name": "gpu", "resourceClaimName": "no-class"}]}}),
    );
    create(
        &store,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "no-class", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "nope"}}]}}}),
    );

    let controller = claimcontroller::spawn(client.clone());
    let scheduler = app::start(client, &config::default_config(), &ksched_plugins::in_tree_registry()).await.unwrap();

    let pod = |name: &str| store.get("v1", "Pod", Some("default"), name).unwrap();
    let node = wait_for("train to be bound", || {
        pod("train").pointer("/spec/nodeName").and_then(Value::as_str).map(str::to_string)
    })
    .await;
    assert_eq!(node, "n2", "the only node with a GPU");
    let claim_name = pod("train")
        .pointer("/status/resourceClaimStatuses/0/resourceClaimName")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    assert!(claim_name.starts_with("train-gpu-"), "{claim_name}");
    let claim = store.get("resource.k8s.io/v1", "ResourceClaim", Some("default"), &claim_name).unwrap();
    assert_eq!(claim.pointer("/status/allocation/devices/results/0/device"), Some(&json!("gpu-0")));
    assert_eq!(claim.pointer("/status/reservedFor/0/name"), Some(&json!("train")));
    assert_eq!(claim.pointer("/metadata/annotations/resource.kubernetes.io~1pod-claim-name"), Some(&json!("gpu")));

    let msg = wait_for("no-class to be refused", || {
        pod("no-class")
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
            .and_then(|c| c["message"].as_str().map(str::to_string))
    })
    .await;
    assert_eq!(
        msg,
        "0/2 nodes are available: request gpu: device class nope does not exist. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );

    let out = std::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "resourceclaims,resourceslices,deviceclasses"])
        .env("HOME", &dir)
        .output()
        .expect("running kubectl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = |needle: &str| {
        text.lines().find(|l| l.contains(needle)).unwrap_or_default().split_whitespace().collect::<Vec<_>>()
    };
    assert_eq!(line(&claim_name)[1], "allocated,reserved", "{text}");
    assert_eq!(line("no-class")[1], "pending", "{text}");
    assert_eq!(line("n2-gpus")[1..4], ["n2", "gpu.example.com", "n2"], "{text}");
    assert!(text.contains("deviceclass.resource.k8s.io/gpu.example.com"), "{text}");
    let out = std::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "resourceclaim", &claim_name, "-o", "jsonpath={.status.allocation.devices.results[0].device}"])
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "gpu-0");

    scheduler.shutdown(Duration::from_secs(5)).await;
    controller.abort();
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
