//! DynamicResources through the whole scheduler (queue, cache, binding cycles) in process:
//! claims from templates are allocated, written and bound; unsatisfiable claims get upstream's
//! message; in-flight allocations never hand out a device twice.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_scheduler::inprocess::InProcessCluster;
use serde_json::{json, Value};

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}))
    .unwrap()
}

fn gpu_slice(node: &str, n: usize, memory: &str) -> Value {
    let devices: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "a100"}},
            "capacity": {"memory": {"value": memory}}})
        })
        .collect();
    json!({"metadata": {"name": format!("{node}-gpus")}, "spec": {"driver": "gpu.example.com", "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

fn pod(name: &str, claims: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": claims}}))
    .unwrap()
}

async fn cluster() -> InProcessCluster {
    let cfg = ksched_scheduler::config::default_config();
    let c = InProcessCluster::new(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ksched_scheduler::metrics::NoopMetrics),
    )
    .unwrap();
    for n in ["n1", "n2", "n3"] {
        c.apply_node(node(n));
    }
    c.apply_resource_slice(serde_json::from_value(gpu_slice("n1", 2, "40Gi")).unwrap());
    c.apply_resource_slice(serde_json::from_value(gpu_slice("n2", 2, "80Gi")).unwrap());
    c.apply_device_class(
        serde_json::from_value(json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [
            {"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}))
        .unwrap(),
    );
    c.apply_resource_claim_template(
        serde_json::from_value(json!({"metadata": {"name": "one-gpu", "namespace": "default"}, "spec": {"spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}}}))
        .unwrap(),
    );
    c
}

async fn wait_until(c: &InProcessCluster, mut done: impl FnMut(&InProcessCluster) -> bool) {
    let start = Instant::now();
    while !done(c) {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn condition_message(c: &InProcessCluster, name: &str) -> Option<String> {
    let p = c.pod("default", name)?;
    p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled")?.message.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_claims_are_allocated_and_no_device_is_given_twice() {
    let mut c = cluster().await;
    for i in 0..5 {
        c.apply_pod(pod(&format!("p{i}"), json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])));
    }
    c.start();
    // four devices: four pods bind, the fifth cannot be placed
    wait_until(&c, |c| c.bound() == 4 && condition_message(c, "p4").or(condition_message(c, "p0")).is_some()).await;
    let placements = c.placements();
    let mut devices = BTreeSet::new();
    for claim in c.resource_claims() {
        let Some(a) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) else { continue };
        let owner = &claim.metadata.owner_references.as_ref().unwrap()[0].name;
        let node = placements.get(&format!("default/{owner}")).expect("allocated claims belong to bound pods");
        for r in a.devices.as_ref().unwrap().results.as_ref().unwrap() {
            assert_eq!(&r.pool, node, "the device is on the pod's node");
            assert!(devices.insert(format!("{}/{}", r.pool, r.device)), "device given twice: {}", r.device);
        }
        let reserved = claim.status.as_ref().unwrap().reserved_for.as_ref().unwrap();
        assert_eq!(&reserved[0].name, owner);
    }
    assert_eq!(devices.len(), 4);
    let unplaced: Vec<String> =
        (0..5).map(|i| format!("p{i}")).filter(|p| !placements.contains_key(&format!("default/{p}"))).collect();
    assert_eq!(unplaced.len(), 1);
    let msg = condition_message(&c, &unplaced[0]).unwrap();
    assert_eq!(
        msg,
        "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_choose_the_node_and_missing_classes_explain_themselves() {
    let mut c = cluster().await;
    c.apply_resource_claim(
        serde_json::from_value(json!({"metadata": {"name": "big", "namespace": "default"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1, "selectors": [
                {"cel": {"expression": "device.capacity['gpu.example.com'].memory.compareTo(quantity('64Gi')) >= 0"}}]}}]}}}))
        .unwrap(),
    )
    .unwrap();
    c.apply_resource_claim(
        serde_json::from_value(
            json!({"metadata": {"name": "nope", "namespace": "default"}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "missing", "allocationMode": "ExactCount", "count": 1}}]}}}),
        )
        .unwrap(),
    )
    .unwrap();
    c.apply_pod(pod("big", json!([{"name": "gpu", "resourceClaimName": "big"}])));
    c.apply_pod(pod("nope", json!([{"name": "gpu", "resourceClaimName": "nope"}])));
    c.start();
    wait_until(&c, |c| c.bound() == 1 && condition_message(c, "nope").is_some()).await;
    assert_eq!(c.placements().get("default/big").map(String::as_str), Some("n2"));
    assert_eq!(
        condition_message(&c, "nope").unwrap(),
        "0/3 nodes are available: request gpu: device class missing does not exist. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    // the class appears: the pod is retried and placed
    c.apply_device_class(serde_json::from_value(json!({"metadata": {"name": "missing"}, "spec": {}})).unwrap());
    wait_until(&c, |c| c.bound() == 2).await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_resources_backed_by_a_device_class_get_a_claim() {
    let mut c = cluster().await;
    c.apply_device_class(
        serde_json::from_value(
            json!({"metadata": {"name": "example-gpu"}, "spec": {"extendedResourceName": "example.com/gpu",
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
        )
        .unwrap(),
    );
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "ext", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"example.com/gpu": "2"},
            "limits": {"example.com/gpu": "2"}}}]}}))
    .unwrap();
    c.apply_pod(p);
    c.start();
    wait_until(&c, |c| c.bound() == 1).await;
    let node = c.placements()["default/ext"].clone();
    let claims = c.resource_claims();
    assert_eq!(claims.len(), 1, "one claim for the extended resources");
    let claim = &claims[0];
    assert!(claim.metadata.name.as_deref().unwrap().starts_with("ext-extended-resources-"));
    let results =
        claim.status.as_ref().unwrap().allocation.as_ref().unwrap().devices.as_ref().unwrap().results.clone().unwrap();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r.pool == node && r.request == "container-0-request-0"));
    let status = c.pod("default", "ext").unwrap().status.clone().unwrap();
    let ext = status.extended_resource_claim_status.unwrap();
    assert_eq!(ext.resource_claim_name, claim.metadata.name.clone().unwrap());
    assert_eq!(ext.request_mappings[0].request_name, "container-0-request-0");
    c.stop().await;
}
