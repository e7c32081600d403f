//! The Kubernetes objects a real cluster would hold for a trace: per node a Node (cpu, memory,
//! a GPU model label) and one ResourceSlice of the `gpu.ksched.dev` driver with one device per
//! GPU (a `model` attribute, a consumable `milligpu` capacity of 1000 that several claims may
//! share: `allowMultipleAllocations`, the DRAConsumableCapacity API); one DeviceClass; per pod
//! a Pod with cpu and memory requests and, when it uses GPUs, a ResourceClaim.
//!
//! A claim of a sharing pod asks for one device and `gpu_milli` of its capacity; a claim of a
//! whole-GPU pod asks for `num_gpu` devices with no capacity request, which under upstream's
//! consumable-capacity rules (`calculateConsumedCapacity`: no request and no request policy
//! default consume the whole capacity) takes only fully free GPUs, whole. `gpu_spec` becomes a
//! CEL selector on the model attribute.
//!
//! Nodes also advertise, and pods request, [`GPU_MILLI_RESOURCE`]: the node's GPU milli as an
//! extended resource, as GPU-sharing device plugins publish it (Alibaba's gpushare publishes
//! `aliyun.com/gpu-mem`). It never decides a fit the claim would not (a node's devices sum to
//! it), and the default profile does not score it; it exists so that NodeResourcesFit's
//! scoring strategies, which count no DRA device, can weigh GPUs (see the BestFit baseline).

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use ksched_scheduler::config::plugin_args_json;

use super::csv::{TraceNode, TracePod, GPU_MILLI};
use super::profiles::TraceProfile;

/// The DRA driver of the trace's GPUs.
pub const DRIVER: &str = "gpu.ksched.dev";
/// The DeviceClass every GPU claim names.
pub const DEVICE_CLASS: &str = "gpu.ksched.dev";
/// The consumable capacity of each GPU device, in milli-GPUs.
pub const CAPACITY: &str = "milligpu";
/// The node label carrying the GPU model.
pub const MODEL_LABEL: &str = "gpu.ksched.dev/model";
/// The node-level extended resource mirroring the GPU milli (see the module docs).
pub const GPU_MILLI_RESOURCE: &str = "ksched.dev/gpu-milli";
/// The namespace of the trace's pods and claims.
pub const NAMESPACE: &str = "trace";
/// The name of each pod's claim entry (`spec.resourceClaims[].name`) and request.
pub const CLAIM_ENTRY: &str = "gpu";
/// Pods allocatable on every node: more than any trace places on one node.
const MAX_PODS: &str = "10000";
/// A fixed creation time: objects must not differ between runs.
const CREATED: &str = "2023-07-01T00:00:00Z";

fn typed<T: DeserializeOwned>(v: Value) -> T {
    // The objects are literals of this file filled with validated trace values.
    serde_json::from_value(v).expect("trace object does not deserialize")
}

/// How the cluster's objects are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectOptions {
    /// Publish and request [`GPU_MILLI_RESOURCE`].
    pub gpu_milli_resource: bool,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        ObjectOptions { gpu_milli_resource: true }
    }
}

/// The name of the ResourceSlice of `node`.
pub fn slice_name(node: &str) -> String {
    format!("{node}-{DRIVER}")
}

/// The name of device `i` of a node.
pub fn device_name(i: i64) -> String {
    format!("gpu-{i}")
}

/// The Node of a trace node.
pub fn node(n: &TraceNode, opts: ObjectOptions) -> Node {
    let mut alloc = json!({
        "cpu": format!("{}m", n.cpu_milli),
        "memory": format!("{}Mi", n.memory_mib),
        "pods": MAX_PODS,
        "ephemeral-storage": "1Ti",
    });
    if opts.gpu_milli_resource && n.gpus > 0 {
        alloc[GPU_MILLI_RESOURCE] = json!((n.gpus * GPU_MILLI).to_string());
    }
    let mut labels = json!({
        "kubernetes.io/hostname": n.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    });
    if n.gpus > 0 {
        labels[MODEL_LABEL] = json!(n.model);
    }
    typed(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "uid": format!("node-{}", n.name), "labels": labels,
            "creationTimestamp": CREATED, "resourceVersion": "1"},
        "spec": {},
        "status": {
            "capacity": alloc.clone(),
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": CREATED, "lastTransitionTime": CREATED}],
            "phase": "Running",
        }
    }))
}

/// The node's ResourceSlice: one device per GPU (`None` on a node without GPUs).
pub fn slice(n: &TraceNode) -> Option<ResourceSlice> {
    if n.gpus == 0 {
        return None;
    }
    let devices: Vec<Value> = (0..n.gpus)
        .map(|i| {
            json!({
                "name": device_name(i),
                "attributes": {"model": {"string": n.model}, "index": {"int": i}},
                "capacity": {CAPACITY: {"value": GPU_MILLI.to_string()}},
                "allowMultipleAllocations": true,
            })
        })
        .collect();
    Some(typed(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": slice_name(&n.name), "uid": format!("slice-{}", n.name),
            "creationTimestamp": CREATED, "resourceVersion": "1"},
        "spec": {"driver": DRIVER, "nodeName": n.name,
            "pool": {"name": n.name, "generation": 1, "resourceSliceCount": 1}, "devices": devices},
    })))
}

/// The DeviceClass of the trace's GPUs.
pub fn device_class() -> DeviceClass {
    typed(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS, "uid": "deviceclass-gpu", "creationTimestamp": CREATED,
            "resourceVersion": "1"},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]},
    }))
}

/// The CEL selector of a `gpu_spec` (the models are validated names: no escaping needed).
pub fn model_selector(models: &[String]) -> String {
    let list: Vec<String> = models.iter().map(|m| format!("\"{m}\"")).collect();
    format!("device.attributes[\"{DRIVER}\"].model in [{}]", list.join(", "))
}

/// The name of an instance's claim.
pub fn claim_name(pod: &str) -> String {
    format!("{pod}-{CLAIM_ENTRY}")
}

/// One pod of the replay: a trace pod under the instance name `name`, for `scheduler_name`,
/// with its claim when it uses GPUs. The claim is owned by the pod (so that a pod's deletion
/// takes its claim with it, as for a claim made from a template).
pub fn pod(
    p: &TracePod,
    name: &str,
    uid: &str,
    scheduler_name: &str,
    opts: ObjectOptions,
) -> (Pod, Option<ResourceClaim>) {
    let entry = json!({"name": CLAIM_ENTRY, "resourceClaimName": claim_name(name)});
    let claim = (p.num_gpu > 0).then(|| claim(p, name, uid));
    (pod_with_entry(p, name, uid, scheduler_name, opts, entry), claim)
}

/// The pod of a live cluster: as [`pod`], naming the ResourceClaimTemplate of its shape
/// ([`claim_template`]) instead of a claim of its own, so that the resource claim controller
/// makes its claim, and without the fields the API server sets (UID, resourceVersion,
/// creationTimestamp, status).
pub fn pod_from_template(p: &TracePod, name: &str, scheduler_name: &str, opts: ObjectOptions) -> Pod {
    let entry = json!({"name": CLAIM_ENTRY, "resourceClaimTemplateName": template_name(p)});
    let mut pod = pod_with_entry(p, name, "", scheduler_name, opts, entry);
    pod.metadata.uid = None;
    pod.metadata.resource_version = None;
    pod.metadata.creation_timestamp = None;
    pod.status = None;
    pod
}

/// A trace pod as a Pod whose GPU claim entry (`spec.resourceClaims[0]`) is `entry`.
fn pod_with_entry(p: &TracePod, name: &str, uid: &str, scheduler_name: &str, opts: ObjectOptions, entry: Value) -> Pod {
    let mut requests = json!({"cpu": format!("{}m", p.cpu_milli), "memory": format!("{}Mi", p.memory_mib)});
    let uses_gpu = p.num_gpu > 0;
    if opts.gpu_milli_resource && uses_gpu {
        let q = json!(p.gpu_request_milli().to_string());
        requests[GPU_MILLI_RESOURCE] = q;
    }
    let mut limits = json!({});
    if opts.gpu_milli_resource && uses_gpu {
        // Extended resources cannot be overcommitted: the API requires limits equal to requests.
        limits[GPU_MILLI_RESOURCE] = requests[GPU_MILLI_RESOURCE].clone();
    }
    let mut container = json!({
        "name": "main", "image": "registry.k8s.io/pause:3.10", "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": requests, "limits": limits},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    });
    let mut spec = json!({
        "containers": [],
        "schedulerName": scheduler_name,
        "priority": 0,
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "terminationGracePeriodSeconds": 30,
        "serviceAccountName": "default",
        "securityContext": {},
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    });
    if uses_gpu {
        container["resources"]["claims"] = json!([{"name": CLAIM_ENTRY}]);
        spec["resourceClaims"] = json!([entry]);
    }
    spec["containers"] = json!([container]);
    typed(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "1",
            "creationTimestamp": CREATED,
            "labels": {"trace.ksched.dev/pod": p.name},
            "annotations": {"trace.ksched.dev/qos": p.qos}},
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }))
}

/// Refuses a profile whose DeviceFragmentation is configured for another DeviceClass or another
/// consumable capacity than the replay's GPUs have: the plugin would find no device of its
/// class (or count every GPU whole) and the run would quietly measure something else.
pub fn check_profile(p: &TraceProfile) -> anyhow::Result<()> {
    let Some(profile) = p.config.profiles.first() else { return Ok(()) };
    let plugin = ksched_plugins::names::DEVICE_FRAGMENTATION;
    // The args as the plugin's factory receives them, whatever form the configuration keeps.
    let args = profile.plugin_config.iter().filter(|c| c.name == plugin).find_map(|c| plugin_args_json(&c.args));
    let Some(args) = args else { return Ok(()) };
    let what = || format!("{}: profile {:?} (schedulerName {:?})", p.source, p.name, p.scheduler_name());
    if let Some(class) = args.get("deviceClassName").and_then(Value::as_str) {
        anyhow::ensure!(
            class == DEVICE_CLASS,
            "{}: {plugin} measures DeviceClass {class:?}, but the replay's GPUs are in DeviceClass {DEVICE_CLASS:?}: set deviceClassName: {DEVICE_CLASS}",
            what()
        );
    }
    if let Some(capacity) = args.get("capacity").and_then(Value::as_str) {
        anyhow::ensure!(
            capacity == CAPACITY,
            "{}: {plugin} measures the consumable capacity {capacity:?}, but the replay's GPUs share their capacity {CAPACITY:?}: set capacity: {CAPACITY}",
            what()
        );
    }
    Ok(())
}

/// The spec of a pod's GPU claim (the same for every pod of its shape).
fn claim_spec(p: &TracePod) -> Value {
    let mut exactly = json!({
        "deviceClassName": DEVICE_CLASS,
        "allocationMode": "ExactCount",
        "count": p.num_gpu,
    });
    if p.shares_gpu() {
        exactly["capacity"] = json!({"requests": {CAPACITY: p.gpu_milli.to_string()}});
    }
    if !p.gpu_spec.is_empty() {
        exactly["selectors"] = json!([{"cel": {"expression": model_selector(&p.gpu_spec)}}]);
    }
    json!({"devices": {"requests": [{"name": CLAIM_ENTRY, "exactly": exactly}]}})
}

fn claim(p: &TracePod, pod_name: &str, pod_uid: &str) -> ResourceClaim {
    let name = claim_name(pod_name);
    typed(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("claim-{pod_uid}"),
            "resourceVersion": "1", "creationTimestamp": CREATED,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid,
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": claim_spec(p),
    }))
}

/// The name of the ResourceClaimTemplate of a GPU pod's shape: `gpu-<num_gpu>x<gpu_milli>`,
/// followed by a hash of the `gpu_spec` models when it has any (model names may hold
/// characters a name may not).
pub fn template_name(p: &TracePod) -> String {
    let base = format!("gpu-{}x{}", p.num_gpu, p.gpu_milli);
    if p.gpu_spec.is_empty() {
        return base;
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in p.gpu_spec.join("|").bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{base}-{:08x}", h as u32)
}

/// The ResourceClaimTemplate pods of `p`'s shape name in a live cluster: the claims it makes
/// have the spec of the claim [`pod`] gives such a pod.
pub fn claim_template(p: &TracePod) -> ResourceClaimTemplate {
    typed(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": template_name(p), "namespace": NAMESPACE},
        "spec": {"spec": claim_spec(p)},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace_pod(num_gpu: i64, milli: i64, spec: &[&str]) -> TracePod {
        TracePod {
            qos: "LS".into(),
            pod_phase: "Running".into(),
            creation_ms: Some(1000),
            deletion_ms: Some(2000),
            scheduled_ms: Some(1000),
            ..TracePod::with_requests("openb-pod-0001", 6000, 12288, num_gpu, milli, spec)
        }
    }

    #[test]
    fn nodes_carry_cpu_memory_model_and_one_device_per_gpu() {
        let n = TraceNode { name: "n1".into(), cpu_milli: 64000, memory_mib: 262144, gpus: 2, model: "P100".into() };
        let node = node(&n, ObjectOptions::default());
        let a = node.status.unwrap().allocatable.unwrap();
        assert_eq!(a["cpu"].0, "64000m");
        assert_eq!(a["memory"].0, "262144Mi");
        assert_eq!(a[GPU_MILLI_RESOURCE].0, "2000");
        assert_eq!(node.metadata.labels.unwrap()[MODEL_LABEL], "P100");
        let s = slice(&n).unwrap();
        assert_eq!(s.spec.node_name.as_deref(), Some("n1"));
        assert_eq!(s.spec.driver, DRIVER);
        let devs = s.spec.devices.unwrap();
        assert_eq!(devs.len(), 2);
        assert_eq!(devs[1].name, "gpu-1");
        assert_eq!(devs[1].allow_multiple_allocations, Some(true));
        assert_eq!(devs[1].capacity.as_ref().unwrap()[CAPACITY].value.0, "1000");
        let cpu_only = TraceNode { gpus: 0, model: String::new(), ..n };
        assert!(slice(&cpu_only).is_none());
        let plain = super::node(&cpu_only, ObjectOptions { gpu_milli_resource: false });
        assert!(!plain.status.unwrap().allocatable.unwrap().contains_key(GPU_MILLI_RESOURCE));
    }

    #[test]
    fn a_sharing_pod_asks_for_its_milli_of_one_device() {
        let (pod, claim) = pod(
            &trace_pod(1, 460, &["V100M16", "V100M32"]),
            "x-1",
            "u1",
            "default-scheduler",
            ObjectOptions::default(),
        );
        let c = claim.unwrap();
        let req = &c.spec.devices.as_ref().unwrap().requests.as_ref().unwrap()[0];
        let ex = req.exactly.as_ref().unwrap();
        assert_eq!(ex.count, Some(1));
        assert_eq!(ex.capacity.as_ref().unwrap().requests.as_ref().unwrap()[CAPACITY].0, "460");
        assert_eq!(
            ex.selectors.as_ref().unwrap()[0].cel.as_ref().unwrap().expression,
            "device.attributes[\"gpu.ksched.dev\"].model in [\"V100M16\", \"V100M32\"]"
        );
        let spec = pod.spec.unwrap();
        assert_eq!(spec.resource_claims.unwrap()[0].resource_claim_name.as_deref(), Some("x-1-gpu"));
        let r = spec.containers[0].resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(
            (r["cpu"].0.as_str(), r["memory"].0.as_str(), r[GPU_MILLI_RESOURCE].0.as_str()),
            ("6000m", "12288Mi", "460")
        );
        assert_eq!(c.metadata.owner_references.unwrap()[0].uid, "u1");
    }

    #[test]
    fn a_whole_gpu_pod_asks_for_whole_devices_and_a_cpu_pod_for_none() {
        let (_, claim) = pod(&trace_pod(8, 1000, &[]), "y", "u2", "s", ObjectOptions::default());
        let c = claim.unwrap();
        let ex = c.spec.devices.unwrap().requests.unwrap()[0].exactly.clone().unwrap();
        assert_eq!(ex.count, Some(8));
        assert!(ex.capacity.is_none(), "no capacity request: each device is consumed whole");
        assert!(ex.selectors.is_none());
        let (p, claim) = pod(&trace_pod(0, 0, &[]), "z", "u3", "s", ObjectOptions::default());
        assert!(claim.is_none());
        let spec = p.spec.unwrap();
        assert!(spec.resource_claims.is_none());
        assert!(!spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()
            .contains_key(GPU_MILLI_RESOURCE));
        assert_eq!(spec.scheduler_name.as_deref(), Some("s"));
    }

    #[test]
    fn a_shapes_template_makes_the_claim_the_in_process_replays_give_its_pods() {
        let shapes =
            [(1, 460, vec!["V100M16", "V100M32"]), (1, 460, vec!["V100M32"]), (8, 1000, vec![]), (1, 500, vec![])];
        let mut names = std::collections::HashSet::new();
        for (n, milli, spec) in &shapes {
            let p = trace_pod(*n, *milli, spec);
            let (in_process, claim) = pod(&p, "x-1", "u1", "s", ObjectOptions::default());
            let t = claim_template(&p);
            assert_eq!(t.metadata.name.as_deref(), Some(template_name(&p).as_str()));
            assert_eq!(t.spec.spec, claim.unwrap().spec, "{n}x{milli} {spec:?}");
            assert!(names.insert(template_name(&p)), "{n}x{milli} {spec:?}: name taken by another shape");
            let live = pod_from_template(&p, "x-1", "s", ObjectOptions::default());
            assert!(live.metadata.uid.is_none() && live.metadata.resource_version.is_none() && live.status.is_none());
            let (live, in_process) = (live.spec.unwrap(), in_process.spec.unwrap());
            let entry = &live.resource_claims.as_ref().unwrap()[0];
            assert_eq!((entry.name.as_str(), entry.resource_claim_name.as_deref()), (CLAIM_ENTRY, None));
            assert_eq!(entry.resource_claim_template_name.as_deref(), Some(template_name(&p).as_str()));
            // Everything else is the in-process replays' pod.
            assert_eq!(live.containers, in_process.containers);
            assert_eq!(
                k8s_openapi::api::core::v1::PodSpec { resource_claims: None, ..live },
                k8s_openapi::api::core::v1::PodSpec { resource_claims: None, ..in_process }
            );
        }
        assert_eq!(template_name(&trace_pod(1, 460, &[])), "gpu-1x460");
        assert!(template_name(&trace_pod(1, 460, &["V100M16", "V100M32"])).starts_with("gpu-1x460-"));
    }

    /// The example policy as `--config` loads it, with `from` replaced by `to` in its file.
    fn policy_with(from: &str, to: &str) -> TraceProfile {
        let example = crate::bench::trace::replay::tests::policy_profile();
        let text = std::fs::read_to_string(&example.source).unwrap();
        assert!(text.contains(from), "{from:?} is no longer in {}", example.source);
        let dir = std::env::temp_dir().join(format!("ksched-trace-cluster-{}-{}", std::process::id(), to.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("policy.yaml");
        std::fs::write(&file, text.replace(from, to)).unwrap();
        let p = crate::bench::trace::profiles::from_arg(std::path::Path::new(&format!("policy={}", file.display())));
        std::fs::remove_dir_all(&dir).ok();
        p.unwrap()
    }

    #[test]
    fn a_policy_measuring_another_class_or_capacity_is_refused() {
        check_profile(&crate::bench::trace::replay::tests::policy_profile()).unwrap();
        for name in crate::bench::trace::profiles::BUILT_IN {
            check_profile(&crate::bench::trace::profiles::built_in(name).unwrap()).unwrap();
        }
        let p = policy_with("deviceClassName: gpu.ksched.dev", "deviceClassName: gpu.example.com");
        assert_eq!(
            check_profile(&p).unwrap_err().to_string(),
            format!(
                "{}: profile \"policy\" (schedulerName \"default-scheduler\"): DeviceFragmentation measures DeviceClass \"gpu.example.com\", but the replay's GPUs are in DeviceClass \"gpu.ksched.dev\": set deviceClassName: gpu.ksched.dev",
                p.source
            )
        );
        let e = check_profile(&policy_with("capacity: milligpu", "capacity: memory")).unwrap_err().to_string();
        assert!(
            e.ends_with("DeviceFragmentation measures the consumable capacity \"memory\", but the replay's GPUs share their capacity \"milligpu\": set capacity: milligpu"),
            "{e}"
        );
    }
}
