//! What a scheduler's client pays per pod to decode it as JSON (kube-rs with
//! k8s-openapi types, what our scheduler does) or protobuf (prost with k8s-pb
//! types, the decoder a protobuf client would use), and what our embedded
//! server pays to produce each form. Prints figures; asserts nothing.
//!
//! `cargo run -p ksched-apiserver --example pod_codec_cost [--release]`

use std::hint::black_box;
use std::time::Instant;

use prost::Message;
use serde_json::{json, Value};

fn typical_pod() -> Value {
    // A bound pod as the scheduler sees it in watch events: defaulted spec,
    // affinity, tolerations, spread, status with conditions.
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d9c5b6f4-x2x8k", "namespace": "default", "uid": "6f0c5d4e-1d2b-4c6a-9f0e-3a8b7c6d5e4f",
            "resourceVersion": "123456", "creationTimestamp": "2026-01-02T03:04:05Z",
            "labels": {"app": "web", "pod-template-hash": "7d9c5b6f4", "tier": "frontend"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9c5b6f4",
                "uid": "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {
            "containers": [{"name": "nginx", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "nodeName": "node-a1", "securityContext": {},
            "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Pending", "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-01-02T03:04:06Z"}]}
    })
}

fn time_per_op(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
}

fn main() {
    let n = 20_000;
    let pod = typical_pod();
    let json = serde_json::to_vec(&pod).unwrap();
    // Our codec produces the protobuf form; prost (k8s-pb) reads it back, so both
    // decoders below see the same pod.
    let enveloped = ksched_apiserver::protobuf_encode(&pod).expect("pod encodes");
    let raw = {
        let rest = &enveloped[4..];
        let u = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest).unwrap();
        u.raw.unwrap()
    };
    let check = k8s_pb::api::core::v1::Pod::decode(raw.as_slice()).unwrap();
    assert_eq!(check.spec.unwrap().node_name.as_deref(), Some("node-a1"));

    println!("pod: {} bytes as JSON, {} bytes as protobuf (enveloped)", json.len(), enveloped.len());
    let dj = time_per_op(n, || {
        let p: k8s_openapi::api::core::v1::Pod = serde_json::from_slice(black_box(&json)).unwrap();
        black_box(p);
    });
    let dp = time_per_op(n, || {
        let p = k8s_pb::api::core::v1::Pod::decode(black_box(raw.as_slice())).unwrap();
        black_box(p);
    });
    println!("client decode per pod: JSON (serde, k8s-openapi) {dj:.2} us, protobuf (prost, k8s-pb) {dp:.2} us");
    let ej = time_per_op(n, || {
        black_box(serde_json::to_vec(black_box(&pod)).unwrap());
    });
    let ep = time_per_op(n, || {
        black_box(ksched_apiserver::protobuf_encode(black_box(&pod)).unwrap());
    });
    println!(
        "server encode per pod: JSON {ej:.2} us (served from the cached bytes: ~0), protobuf transcode {ep:.2} us"
    );
}
