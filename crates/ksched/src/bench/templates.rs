//! The object templates of upstream scheduler_perf (`test/integration/scheduler_perf/templates/*.yaml`), built as
//! typed objects. Nodes get the `kubernetes.io/hostname` label upstream's node preparer adds, and
//! `status.allocatable` equal to capacity, which is what API-server defaulting gives the upstream
//! templates (they set capacity only).

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::storage::v1::CSINode;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// The CSI driver of upstream's volume workloads.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// Node shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeTemplate {
    /// `node-default.yaml`: 110 pods, 4 cpu, 32Gi.
    Default,
    /// `node-with-name.yaml`: `scheduler-perf-node`, 90000 pods.
    WithName,
    /// `churn/node-default.yaml`: 0 pods capacity.
    Churn,
    /// `node-default.yaml` plus 39 attachable EBS CSI volumes (volume workloads).
    Csi,
}

/// Pod shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodTemplate {
    /// `pod-default.yaml`: 100m / 500Mi, containerPort 80.
    Default,
    /// `pod-low-priority.yaml`: 900m / 500Mi, grace 0.
    LowPriority,
    /// `pod-high-priority.yaml`: priority 10, 3000m / 500Mi.
    HighPriority,
    /// `pod-high-priority-large-cpu.yaml`: priority 10, 9 cpu (never fits).
    HighPriorityLargeCpu,
    /// `gated-pod.yaml`: gate `test.k8s.io/hold`, no requests.
    Gated,
    /// `light-pod.yaml`: no requests, grace 0.
    Light,
    /// `pod-with-pod-anti-affinity.yaml`.
    PodAntiAffinity,
    /// `pod-with-pod-affinity.yaml`.
    PodAffinity,
    /// `pod-with-preferred-pod-affinity.yaml`.
    PreferredPodAffinity,
    /// `pod-with-preferred-pod-anti-affinity.yaml`.
    PreferredPodAntiAffinity,
    /// `pod-with-node-affinity.yaml`.
    NodeAffinity,
    /// `pod-with-topology-spreading.yaml`.
    TopologySpreading,
    /// `pod-with-preferred-topology-spreading.yaml`.
    PreferredTopologySpreading,
    /// `dra/pod-with-claim-template.yaml`: one claim from `test-claim-template`.
    ClaimTemplate,
}

/// PersistentVolume flavours of the volume workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeKind {
    /// `pv-aws.yaml` (in-tree EBS).
    InTreeAws,
    /// `pv-csi.yaml` (`ebs.csi.aws.com`).
    Csi,
}

fn typed<T: DeserializeOwned>(v: Value) -> T {
    // The templates are literals of this file; a failure is a bug here, not bad input.
    serde_json::from_value(v).expect("bench template does not deserialize")
}

fn add_labels(meta: &mut Value, extra: &[(String, String)]) {
    if extra.is_empty() {
        return;
    }
    let labels = meta.as_object_mut().map(|m| m.entry("labels").or_insert_with(|| json!({})));
    if let Some(Value::Object(l)) = labels {
        for (k, v) in extra {
            l.insert(k.clone(), Value::String(v.clone()));
        }
    }
}

/// A node of `template` named `name`, with `labels` added.
pub fn node(template: NodeTemplate, name: &str, labels: &[(String, String)]) -> Node {
    let (pods, cpu, memory) = match template {
        NodeTemplate::Default | NodeTemplate::Csi => (Some("110"), Some("4"), Some("32Gi")),
        NodeTemplate::WithName => (Some("90000"), Some("4"), Some("32Gi")),
        NodeTemplate::Churn => (Some("0"), None, None),
    };
    let mut capacity = serde_json::Map::new();
    for (k, v) in [("pods", pods), ("cpu", cpu), ("memory", memory)] {
        if let Some(v) = v {
            capacity.insert(k.into(), json!(v));
        }
    }
    if template == NodeTemplate::Csi {
        capacity.insert(format!("attachable-volumes-csi-{EBS_CSI_DRIVER}"), json!("39"));
    }
    let mut meta = json!({"name": name, "labels": {"kubernetes.io/hostname": name}});
    add_labels(&mut meta, labels);
    typed(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": meta,
        "spec": {},
        "status": {
            "capacity": capacity.clone(),
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        }
    }))
}

/// The CSINode of a [`NodeTemplate::Csi`] node (39 attachable EBS volumes).
pub fn csi_node(name: &str, labels: &[(String, String)]) -> CSINode {
    let mut meta = json!({"name": name});
    add_labels(&mut meta, labels);
    typed(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": meta,
        "spec": {"drivers": [{"name": EBS_CSI_DRIVER, "nodeID": name, "allocatable": {"count": 39}}]}
    }))
}

fn resources(cpu: &str, memory: &str, limits: bool) -> Value {
    let r = json!({"cpu": cpu, "memory": memory});
    if limits {
        json!({"requests": r, "limits": r})
    } else {
        json!({"requests": r})
    }
}

fn pause(image: &str, resources: Option<Value>, port: bool) -> Value {
    let mut c = json!({"name": "pause", "image": image});
    if port {
        c["ports"] = json!([{"containerPort": 80}]);
    }
    if let Some(r) = resources {
        c["resources"] = r;
    }
    c
}

fn pod_term(color: &str, topology_key: &str) -> Value {
    json!({
        "labelSelector": {"matchLabels": {"color": color}},
        "topologyKey": topology_key,
        "namespaces": ["sched-1", "sched-0"],
    })
}

fn spread(when: &str) -> Value {
    json!([{
        "maxSkew": 5,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"color": "blue"}},
    }])
}

/// A pod of `template` named `namespace/name`, with `labels` added.
pub fn pod(template: PodTemplate, namespace: &str, name: &str, labels: &[(String, String)]) -> Pod {
    use PodTemplate as T;
    const IMG: &str = "registry.k8s.io/pause:3.10.2";
    const IMG_OLD: &str = "registry.k8s.io/pause:3.10.1";
    let default_container = || pause(IMG, Some(resources("100m", "500Mi", true)), true);
    let mut meta = json!({"name": name, "namespace": namespace});
    let mut spec = json!({});
    let mut own_labels = json!({});
    match template {
        T::ClaimTemplate => {
            let mut c = pause(IMG_OLD, None, false);
            c["resources"] = json!({"claims": [{"name": "resource"}]});
            spec["containers"] = json!([c]);
            spec["resourceClaims"] = json!([{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}]);
        }
        T::Default => spec["containers"] = json!([default_container()]),
        T::LowPriority => {
            spec["terminationGracePeriodSeconds"] = json!(0);
            spec["containers"] = json!([pause(IMG_OLD, Some(resources("900m", "500Mi", true)), true)]);
        }
        T::HighPriority => {
            spec["priority"] = json!(10);
            spec["containers"] = json!([pause(IMG_OLD, Some(resources("3000m", "500Mi", true)), true)]);
        }
        T::HighPriorityLargeCpu => {
            spec["priority"] = json!(10);
            spec["containers"] = json!([pause(IMG_OLD, Some(resources("9", "500Mi", false)), true)]);
        }
        T::Gated => {
            spec["schedulingGates"] = json!([{"name": "test.k8s.io/hold"}]);
            spec["containers"] = json!([pause(IMG_OLD, None, false)]);
        }
        T::Light => {
            spec["terminationGracePeriodSeconds"] = json!(0);
            spec["containers"] = json!([pause(IMG_OLD, None, false)]);
        }
        T::PodAntiAffinity => {
            own_labels = json!({"color": "green"});
            spec["affinity"] = json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [pod_term("green", "kubernetes.io/hostname")]}});
            spec["containers"] = json!([default_container()]);
        }
        T::PodAffinity => {
            own_labels = json!({"color": "blue"});
            spec["affinity"] = json!({"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [pod_term("blue", "topology.kubernetes.io/zone")]}});
            spec["containers"] = json!([default_container()]);
        }
        T::PreferredPodAffinity => {
            own_labels = json!({"color": "red"});
            spec["affinity"] = json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"podAffinityTerm": pod_term("red", "kubernetes.io/hostname"), "weight": 1}]}});
            spec["containers"] = json!([default_container()]);
        }
        T::PreferredPodAntiAffinity => {
            own_labels = json!({"color": "yellow"});
            spec["affinity"] = json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"podAffinityTerm": pod_term("yellow", "kubernetes.io/hostname"), "weight": 1}]}});
            spec["containers"] = json!([default_container()]);
        }
        T::NodeAffinity => {
            spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone1", "zone2"]}]}]}}});
            spec["containers"] = json!([default_container()]);
        }
        T::TopologySpreading | T::PreferredTopologySpreading => {
            own_labels = json!({"color": "blue"});
            let when = if template == T::TopologySpreading { "DoNotSchedule" } else { "ScheduleAnyway" };
            spec["topologySpreadConstraints"] = spread(when);
            spec["containers"] = json!([default_container()]);
        }
    }
    if own_labels.as_object().is_some_and(|o| !o.is_empty()) {
        meta["labels"] = own_labels;
    }
    add_labels(&mut meta, labels);
    typed(json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}))
}

/// Mounts claim `claim` as volume `vol` (upstream's pods with persistent volumes).
pub fn with_claim(mut pod: Pod, claim: &str) -> Pod {
    let vol = typed(json!({"name": "vol", "persistentVolumeClaim": {"claimName": claim}}));
    pod.spec.get_or_insert_with(Default::default).volumes = Some(vec![vol]);
    pod
}

/// `pvc.yaml` pre-bound to `pv`, and the PV (`pv-aws.yaml` or `pv-csi.yaml`) bound to it.
pub fn bound_volume(
    kind: VolumeKind,
    namespace: &str,
    claim: &str,
    pv: &str,
    labels: &[(String, String)],
) -> (PersistentVolumeClaim, PersistentVolume) {
    let mut pvc_meta = json!({"name": claim, "namespace": namespace,
        "annotations": {"pv.kubernetes.io/bind-completed": "true"}});
    add_labels(&mut pvc_meta, labels);
    let pvc = typed(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": pvc_meta,
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": pv},
        "status": {"phase": "Bound"},
    }));
    let mut spec = json!({
        "accessModes": ["ReadOnlyMany"],
        "capacity": {"storage": "1Gi"},
        "persistentVolumeReclaimPolicy": "Retain",
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": claim},
    });
    match kind {
        VolumeKind::InTreeAws => spec["awsElasticBlockStore"] = json!({"volumeID": "<volume-id>"}),
        VolumeKind::Csi => spec["csi"] = json!({"driver": EBS_CSI_DRIVER, "volumeHandle": pv}),
    }
    let mut pv_meta = json!({"name": pv});
    add_labels(&mut pv_meta, labels);
    let pv = typed(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": pv_meta, "spec": spec, "status": {"phase": "Bound"},
    }));
    (pvc, pv)
}

/// `churn/service-default.yaml`.
pub fn churn_service(namespace: &str, name: &str, labels: &[(String, String)]) -> Service {
    let mut meta = json!({"name": name, "namespace": namespace});
    add_labels(&mut meta, labels);
    typed(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": meta,
        "spec": {"selector": {"app": "foo"}, "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}]}
    }))
}

/// The DRA test driver of scheduler_perf.
pub const DRA_DRIVER: &str = "test-driver.cdi.k8s.io";

/// `createResourceDriver`'s slice for one node: `devices` devices with the test attributes.
pub fn dra_slice(node: &str, devices: usize) -> k8s_openapi::api::resource::v1::ResourceSlice {
    let devs: Vec<Value> = (0..devices)
        .map(|i| {
            json!({"name": format!("instance-{i}"), "attributes": {
                "model": {"string": "A100"}, "family": {"string": "GPU"}, "driverVersion": {"version": "1.2.3"},
                "dra.example.com/numa": {"int": i}}, "capacity": {"memory": {"value": "1Gi"}}})
        })
        .collect();
    typed(json!({"metadata": {"name": node}, "spec": {"driver": DRA_DRIVER, "nodeName": node,
        "pool": {"name": node, "generation": 0, "resourceSliceCount": 1}, "devices": devs}}))
}

/// `dra/deviceclass.yaml`.
pub fn dra_class() -> k8s_openapi::api::resource::v1::DeviceClass {
    typed(json!({"metadata": {"name": "test-class"}, "spec": {"selectors": [
        {"cel": {"expression": format!("device.driver == \"{DRA_DRIVER}\"")}}]}}))
}

fn dra_request() -> Value {
    json!({"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class", "allocationMode": "ExactCount", "count": 1}}]})
}

/// `dra/resourceclaimtemplate.yaml` in a namespace.
pub fn dra_claim_template(namespace: &str) -> k8s_openapi::api::resource::v1::ResourceClaimTemplate {
    typed(json!({"metadata": {"name": "test-claim-template", "namespace": namespace},
        "spec": {"spec": {"devices": dra_request()}}}))
}

/// `dra/resourceclaim.yaml` number `index` in a namespace.
pub fn dra_claim(namespace: &str, index: usize) -> k8s_openapi::api::resource::v1::ResourceClaim {
    typed(json!({"metadata": {"name": format!("test-claim-{index}"), "namespace": namespace},
        "spec": {"devices": dra_request()}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_builds() {
        use PodTemplate as T;
        for t in [
            T::Default,
            T::LowPriority,
            T::HighPriority,
            T::HighPriorityLargeCpu,
            T::Gated,
            T::Light,
            T::PodAntiAffinity,
            T::PodAffinity,
            T::PreferredPodAffinity,
            T::PreferredPodAntiAffinity,
            T::NodeAffinity,
            T::TopologySpreading,
            T::PreferredTopologySpreading,
        ] {
            let p = pod(t, "ns", "p", &[("x".into(), "y".into())]);
            assert_eq!(p.metadata.labels.as_ref().unwrap()["x"], "y");
            assert!(!p.spec.unwrap().containers.is_empty());
        }
        for t in [NodeTemplate::Default, NodeTemplate::WithName, NodeTemplate::Churn, NodeTemplate::Csi] {
            let n = node(t, "n", &[("topology.kubernetes.io/zone".into(), "zone1".into())]);
            let labels = n.metadata.labels.unwrap();
            assert_eq!(labels["kubernetes.io/hostname"], "n");
            assert_eq!(labels["topology.kubernetes.io/zone"], "zone1");
            let st = n.status.unwrap();
            assert_eq!(st.capacity, st.allocatable);
        }
        let (pvc, pv) = bound_volume(VolumeKind::Csi, "ns", "pvc-0", "ns-pv-0", &[]);
        assert_eq!(pvc.spec.unwrap().volume_name.as_deref(), Some("ns-pv-0"));
        assert_eq!(pv.spec.unwrap().csi.unwrap().volume_handle, "ns-pv-0");
        let _ = csi_node("n", &[]);
        let _ = churn_service("ns", "s", &[]);
        let p = with_claim(pod(T::Default, "ns", "p", &[]), "pvc-0");
        assert_eq!(p.spec.unwrap().volumes.unwrap().len(), 1);
    }

    #[test]
    fn shapes_match_upstream() {
        let p = pod(PodTemplate::Default, "ns", "p", &[]);
        let c = &p.spec.as_ref().unwrap().containers[0];
        let req = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(req["cpu"].0, "100m");
        assert_eq!(req["memory"].0, "500Mi");
        assert_eq!(c.ports.as_ref().unwrap()[0].container_port, 80);
        let n = node(NodeTemplate::Default, "n", &[]);
        let cap = n.status.unwrap().capacity.unwrap();
        assert_eq!((cap["pods"].0.as_str(), cap["cpu"].0.as_str(), cap["memory"].0.as_str()), ("110", "4", "32Gi"));
    }
}
