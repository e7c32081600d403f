//! The projection (src/projection.rs) drops what no plugin reads: proven here by running the real
//! default profile on randomised clusters twice, once with whole objects and once with projected
//! ones, and asserting the same placements, scores, FailedScheduling messages (preemption
//! included), victims, cluster events and queueing hints. Every field the projection drops is
//! filled with values that would change an outcome if a plugin read it (annotations, statuses,
//! volumes of every dropped kind, container ports without host ports, node capacity and
//! images...), so a plugin that starts reading one fails this test. Pod fields the scheduler's
//! pod type (`ksched_framework::pod::Pod`) does not have cannot be read at all: code that tries
//! does not compile.

use std::sync::{Arc, OnceLock};

use ksched_framework::handle::{EventRecorder, NoopRecorder, SchedulerView, Spawner};
use ksched_framework::listers::{ClusterLister, MemoryLister};
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{CycleState, EventObject, PodInfo, Snapshot};
use ksched_plugins::defaultpreemption::DefaultPreemption;
use ksched_scheduler::cache::Cache;
use ksched_scheduler::cluster_events::{node_update_events, pod_update_events};
use ksched_scheduler::explain::{post_filter_dry_run, ReadOnlyClient};
use ksched_scheduler::projection::Projection;
use ksched_scheduler::schedule_one::{ScheduleError, SchedulingAlgorithm};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const APPS: [&str; 3] = ["web", "db", "cache"];
const IMAGES: [(&str, i64); 4] = [
    ("registry.example/web:1", 400_000_000),
    ("registry.example/db:2", 900_000_000),
    ("registry.example/cache:3", 60_000_000),
    ("registry.example/sidecar:4", 30_000_000),
];
const TAINTS: [(&str, &str, &str); 3] =
    [("dedicated", "db", "NoSchedule"), ("spot", "true", "PreferNoSchedule"), ("maintenance", "soon", "NoExecute")];

fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.random_range(0..xs.len())]
}

fn chance(rng: &mut StdRng, p: f64) -> bool {
    rng.random_bool(p)
}

fn junk(rng: &mut StdRng) -> String {
    format!("junk-{}", rng.random_range(0..1_000_000))
}

fn ts(rng: &mut StdRng) -> String {
    format!("2026-01-{:02}T{:02}:{:02}:00Z", rng.random_range(1..28), rng.random_range(0..24), rng.random_range(0..60))
}

fn node(rng: &mut StdRng, i: usize) -> Node {
    let name = format!("node-{i}");
    let zone = ZONES[i % ZONES.len()];
    let taints: Vec<Value> = TAINTS
        .iter()
        .filter(|_| chance(rng, 0.2))
        .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
        .collect();
    let held: Vec<&(&str, i64)> = IMAGES.iter().filter(|_| chance(rng, 0.5)).collect();
    let images: Vec<Value> = held
        .into_iter()
        .map(|(n, size)| json!({"names": [n, format!("{}@sha256:{}", n.split(':').next().unwrap(), junk(rng))], "sizeBytes": size}))
        .collect();
    let features: Vec<&str> =
        ksched_plugins::nodedeclaredfeatures::KNOWN_FEATURES.iter().copied().filter(|_| chance(rng, 0.7)).collect();
    let cpu = *pick(rng, &["1", "2", "4"]);
    let mut allocatable =
        json!({"cpu": cpu, "memory": pick(rng, &["2Gi", "4Gi", "8Gi"]), "pods": pick(rng, &["3", "8", "110"])});
    if chance(rng, 0.3) {
        allocatable["example.com/gpu"] = json!("2");
    }
    let metadata = json!({
        "name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
        "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
                   "disk": pick(rng, &["ssd", "hdd"])},
        "annotations": {"note": junk(rng)},
        "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}],
        "ownerReferences": [{"apiVersion": "v1", "kind": "Thing", "name": junk(rng), "uid": junk(rng), "controller": true}],
    });
    let status = json!({
        "allocatable": allocatable,
        // Capacity deliberately differs from allocatable: nothing may read it.
        "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000", "example.com/gpu": "8"},
        "conditions": [
            {"type": "Ready", "status": pick(rng, &["True", "False"]), "reason": junk(rng), "message": junk(rng),
             "lastHeartbeatTime": ts(rng), "lastTransitionTime": ts(rng)},
            {"type": "MemoryPressure", "status": "False", "reason": junk(rng), "message": junk(rng)}],
        "declaredFeatures": features,
        "images": images,
        "addresses": [{"type": "InternalIP", "address": format!("10.0.0.{i}")}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"architecture": "amd64", "bootID": junk(rng), "containerRuntimeVersion": "containerd://2",
            "kernelVersion": "6", "kubeProxyVersion": "", "kubeletVersion": "v1.36.0", "machineID": junk(rng),
            "operatingSystem": "linux", "osImage": "x", "systemUUID": junk(rng)},
        "phase": "Running", "volumesInUse": [junk(rng)], "runtimeHandlers": [{"name": "runc"}],
    });
    serde_json::from_value(json!({
        "metadata": metadata,
        "spec": {"taints": taints, "unschedulable": chance(rng, 0.08), "podCIDR": "10.244.0.0/24",
                 "providerID": junk(rng)},
        "status": status,
    }))
    .unwrap()
}

fn container(rng: &mut StdRng, name: &str, sidecar: bool) -> Value {
    let mut requests = serde_json::Map::new();
    if let Some(cpu) = pick(rng, &[None, Some("100m"), Some("500m"), Some("1"), Some("1500m")]) {
        requests.insert("cpu".into(), json!(cpu));
    }
    if let Some(mem) = pick(rng, &[None, Some("256Mi"), Some("1Gi"), Some("3Gi")]) {
        requests.insert("memory".into(), json!(mem));
    }
    if chance(rng, 0.15) {
        requests.insert("example.com/gpu".into(), json!("1"));
    }
    let mut ports = vec![json!({"containerPort": 8080, "name": "http", "protocol": "TCP"})];
    if chance(rng, 0.2) {
        ports.push(json!({"containerPort": 9000, "hostPort": pick(rng, &[9000, 9001]),
                          "hostIP": pick(rng, &["", "10.1.1.1"]), "protocol": pick(rng, &["TCP", "UDP"])}));
    }
    let mut c = json!({
        "name": name, "image": pick(rng, &IMAGES).0,
        "resources": {"requests": requests, "limits": {"memory": "4Gi"}},
        "ports": ports,
        "command": [junk(rng)], "args": [junk(rng)], "env": [{"name": "X", "value": junk(rng)}],
        "livenessProbe": {"httpGet": {"path": "/", "port": 8080}}, "readinessProbe": {"exec": {"command": ["true"]}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}],
        "securityContext": {"runAsUser": rng.random_range(1..1000)}, "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log", "workingDir": "/w",
    });
    if sidecar {
        c["restartPolicy"] = json!("Always");
    }
    c
}

fn pod_term(rng: &mut StdRng) -> Value {
    let mut t = json!({"labelSelector": {"matchLabels": {"app": pick(rng, &APPS)}},
                       "topologyKey": pick(rng, &["kubernetes.io/hostname", "topology.kubernetes.io/zone"])});
    if chance(rng, 0.3) {
        t["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
    }
    t
}

fn affinity(rng: &mut StdRng) -> Value {
    let mut a = json!({});
    if chance(rng, 0.2) {
        a["nodeAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]});
    }
    if chance(rng, 0.15) {
        a["podAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": [pod_term(rng)]});
    }
    if chance(rng, 0.25) {
        a["podAntiAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": [pod_term(rng)],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": pod_term(rng)}]});
    }
    a
}

/// A pod with random scheduling constraints, plus junk in every field the projection drops.
fn pod(rng: &mut StdRng, i: usize, node: Option<&str>) -> Pod {
    let app = *pick(rng, &APPS);
    let ns = *pick(rng, &["default", "team-a"]);
    let mut containers = vec![container(rng, "main", false)];
    if chance(rng, 0.3) {
        containers.push(container(rng, "helper", false));
    }
    let mut spec = json!({
        "containers": containers,
        "schedulerName": "default-scheduler",
        "priority": pick(rng, &[0, 0, 0, 10, 100]),
        "volumes": [
            {"name": "config", "configMap": {"name": junk(rng)}}, {"name": "secret", "secret": {"secretName": junk(rng)}},
            {"name": "scratch", "emptyDir": {}}, {"name": "token", "projected": {"sources": []}},
            {"name": "info", "downwardAPI": {}}, {"name": "host", "hostPath": {"path": "/var/log"}}],
        "dnsPolicy": "ClusterFirst", "serviceAccountName": junk(rng), "restartPolicy": "Always",
        "terminationGracePeriodSeconds": rng.random_range(0..60), "priorityClassName": junk(rng),
        "securityContext": {"fsGroup": 1}, "hostname": junk(rng), "os": {"name": "linux"},
        "enableServiceLinks": chance(rng, 0.5), "automountServiceAccountToken": chance(rng, 0.5),
    });
    if chance(rng, 0.25) {
        let sidecar = chance(rng, 0.5);
        spec["initContainers"] = json!([container(rng, "init", sidecar)]);
    }
    if chance(rng, 0.1) {
        spec["overhead"] = json!({"cpu": "50m"});
    }
    if chance(rng, 0.15) {
        spec["preemptionPolicy"] = json!("Never");
    }
    if chance(rng, 0.2) {
        spec["nodeSelector"] = json!({"disk": pick(rng, &["ssd", "hdd"])});
    }
    let aff = affinity(rng);
    if aff.as_object().is_some_and(|o| !o.is_empty()) {
        spec["affinity"] = aff;
    }
    let tolerations: Vec<Value> = TAINTS
        .iter()
        .filter(|_| chance(rng, 0.3))
        .map(|(k, v, e)| json!({"key": k, "operator": "Equal", "value": v, "effect": e}))
        .collect();
    spec["tolerations"] = json!(tolerations);
    if chance(rng, 0.2) {
        spec["topologySpreadConstraints"] = json!([{"maxSkew": 1,
            "topologyKey": pick(rng, &["topology.kubernetes.io/zone", "kubernetes.io/hostname"]),
            "whenUnsatisfiable": pick(rng, &["DoNotSchedule", "ScheduleAnyway"]),
            "labelSelector": {"matchLabels": {"app": app}}}]);
    }
    if chance(rng, 0.15) {
        let vols = spec["volumes"].as_array_mut().unwrap();
        vols.push(
            json!({"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{}", rng.random_range(0..3))}}),
        );
    }
    if chance(rng, 0.15) {
        let vols = spec["volumes"].as_array_mut().unwrap();
        vols.push(json!({"name": "pd", "gcePersistentDisk": {"pdName": pick(rng, &["disk-1", "disk-2"])}}));
    }
    if chance(rng, 0.05) {
        spec["hostNetwork"] = json!(true);
        spec["hostUsers"] = json!(false);
    }
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    let name = format!("pod-{i}");
    let metadata = json!({
        "name": name, "namespace": ns, "uid": format!("uid-{name}"), "resourceVersion": "1", "generation": 1,
        "labels": {"app": app, "extra": junk(rng)},
        "annotations": {"note": junk(rng), "scheduler.alpha.kubernetes.io/x": junk(rng)},
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs-{app}"), "uid": format!("rs-{app}"), "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": junk(rng), "uid": junk(rng)}],
        "managedFields": [{"manager": "kcm", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
        "generateName": junk(rng), "finalizers": [junk(rng)], "creationTimestamp": ts(rng),
    });
    // The kubelet reports each container's resources: usually the spec's, during an in-place
    // resize more (or, when the resize is infeasible, something else entirely).
    let reported: Vec<Value> =
        spec["containers"].as_array().unwrap().iter().filter(|_| chance(rng, 0.6)).cloned().collect();
    let mut statuses: Vec<Value> = reported
        .iter()
        .map(|c| {
            let mut requests = c["resources"]["requests"].clone();
            if chance(rng, 0.2) {
                requests["cpu"] = json!(pick(rng, &["50m", "2", "100m"]));
            }
            json!({"name": c["name"], "image": junk(rng), "imageID": junk(rng), "ready": true, "restartCount": 0,
                   "resources": {"requests": requests}, "allocatedResources": requests})
        })
        .collect();
    // Without resources the status does not count; the kubelet reports one per container.
    if !statuses.iter().any(|s| s["name"] == "main") {
        statuses.push(json!({"name": "main", "image": junk(rng), "imageID": junk(rng), "ready": true,
            "restartCount": rng.random_range(0..5), "state": {"running": {"startedAt": ts(rng)}}}));
    }
    let mut conditions = vec![
        json!({"type": "Ready", "status": "True", "message": junk(rng)}),
        json!({"type": "ContainersReady", "status": "True"}),
    ];
    if chance(rng, 0.1) {
        conditions.push(json!({"type": "PodResizePending", "status": "True", "reason": "Infeasible"}));
    }
    let status = json!({
        "phase": if node.is_some() { "Running" } else { "Pending" },
        "startTime": ts(rng), "podIP": "10.244.0.1", "hostIP": "10.0.0.1", "qosClass": "Burstable",
        "message": junk(rng), "reason": junk(rng),
        "conditions": conditions,
        "containerStatuses": statuses,
    });
    serde_json::from_value(json!({"metadata": metadata, "spec": spec, "status": status})).unwrap()
}

/// Objects plugins read through listers (never projected).
fn lister() -> Arc<MemoryLister> {
    fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }
    let l = Arc::new(MemoryLister::default());
    l.namespaces.upsert(Arc::new(obj(json!({"metadata": {"name": "default", "labels": {"team": "b"}}}))));
    l.namespaces.upsert(Arc::new(obj(json!({"metadata": {"name": "team-a", "labels": {"team": "a"}}}))));
    for app in APPS {
        for ns in ["default", "team-a"] {
            l.replica_sets.upsert(Arc::new(obj(json!({"metadata": {"name": format!("rs-{app}"), "namespace": ns,
                "uid": format!("rs-{app}")}, "spec": {"selector": {"matchLabels": {"app": app}}}}))));
        }
    }
    l.services.upsert(Arc::new(obj(
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}),
    )));
    l.pdbs.upsert(Arc::new(obj(json!({"metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 1}, "status": {"disruptionsAllowed": 0,
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}))));
    l.storage_classes
        .upsert(Arc::new(obj(json!({"metadata": {"name": "standard"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer"}))));
    for (i, zone) in ZONES.iter().enumerate() {
        for ns in ["default", "team-a"] {
            let pv = format!("pv-{ns}-{i}");
            l.pvcs.upsert(Arc::new(obj(json!({"metadata": {"name": format!("data-{i}"), "namespace": ns},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "volumeName": pv,
                         "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Bound"}}))));
            l.pvs.upsert(Arc::new(obj(json!({"metadata": {"name": pv, "labels": {"topology.kubernetes.io/zone": zone}},
                "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "storageClassName": "standard",
                         "claimRef": {"namespace": ns, "name": format!("data-{i}")}, "local": {"path": "/d"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}},
                "status": {"phase": "Bound"}}))));
        }
    }
    l
}

/// Replays `pending` on `nodes` (with `bound` already placed) through the default profile,
/// synchronously; one line per pod: node and winning score, or the message and the victims.
fn replay(projection: Projection, nodes: &[Node], bound: &[Pod], pending: &[Pod]) -> Vec<String> {
    let cfg = ksched_scheduler::config::default_config();
    let recorder = |_: &str| -> Arc<dyn EventRecorder> { Arc::new(NoopRecorder) };
    let view: Arc<OnceLock<Arc<dyn SchedulerView>>> = Arc::new(OnceLock::new());
    let spawner: Spawner = Arc::new(|_| {});
    let lister: Arc<dyn ClusterLister> = lister();
    let profiles = ksched_scheduler::app::build_profiles(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ReadOnlyClient),
        &recorder,
        lister,
        view,
        spawner,
        &[],
    )
    .unwrap();
    let profile = &profiles["default-scheduler"];
    let fw = &profile.framework;
    let preemption = DefaultPreemption::new(None, fw.handle()).unwrap();
    let cache = Cache::new();
    for n in nodes {
        let (n, images) = projection.node(n.clone());
        cache.put_node(Arc::new(n), &images);
    }
    for p in bound {
        cache.add_pod(Arc::new(projection.pod(p.clone()))).unwrap();
    }
    let mut alg = SchedulingAlgorithm::default();
    let mut snapshot = Snapshot::default();
    let mut out = Vec::new();
    for p in pending {
        let pod = projection.pod(p.clone());
        let pi = PodInfo::new(Arc::new(pod.clone()));
        let mut attempt = |snapshot: &mut Snapshot| {
            cache.update_snapshot(snapshot).unwrap();
            let mut state = CycleState::new();
            let r = alg.schedule_pod(fw, None, &mut state, &pi, snapshot, &Default::default());
            (r, state)
        };
        let (mut result, state) = attempt(&mut snapshot);
        let mut line = String::new();
        if let Err(ScheduleError::Fit(fe)) = &result {
            let (msg, plan) =
                post_filter_dry_run(fw, Some(&preemption), &state, &pi, &snapshot, &fe.diagnosis.node_to_status);
            let mut d = fe.diagnosis.clone();
            d.post_filter_msg = msg;
            let message =
                ksched_scheduler::fit_error::FitError { num_all_nodes: fe.num_all_nodes, diagnosis: d }.message();
            line = format!("refused: {message}");
            if let Some(c) = plan.as_ref().and_then(|p| p.chosen.map(|i| &p.candidates[i])) {
                let victims: Vec<String> = c.victims.iter().map(|v| v.key()).collect();
                line.push_str(&format!(" | preempts {victims:?} on {}", c.name));
                for v in &c.victims {
                    cache.remove_pod(&v.pod).unwrap();
                }
                result = attempt(&mut snapshot).0;
            }
        }
        match result {
            Ok(r) => {
                let score = r.scores.as_ref().and_then(|s| s.totals.iter().copied().max());
                line.push_str(&format!(" -> {} (score {score:?}, {} feasible)", r.suggested_host, r.feasible_nodes));
                let mut placed = pod.clone();
                placed.spec.get_or_insert_with(Default::default).node_name = Some(r.suggested_host.clone());
                cache.add_pod(Arc::new(placed)).unwrap();
            }
            Err(e) if line.is_empty() => line = format!("error: {}", e.message()),
            Err(_) => {}
        }
        out.push(format!("{}: {line}", pi.key()));
    }
    out
}

#[test]
fn projected_objects_schedule_exactly_like_whole_ones() {
    let mut refused = 0;
    let mut preempted = 0;
    let mut placed = 0;
    for seed in 0..24u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let nodes: Vec<Node> = (0..rng.random_range(4..12)).map(|i| node(&mut rng, i)).collect();
        let names: Vec<String> = nodes.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
        let bound: Vec<Pod> = (0..rng.random_range(0..15))
            .map(|i| {
                let n = pick(&mut rng, &names).clone();
                pod(&mut rng, i, Some(&n))
            })
            .collect();
        let pending: Vec<Pod> = (100..100 + rng.random_range(10..40)).map(|i| pod(&mut rng, i, None)).collect();
        let whole = replay(Projection::Full, &nodes, &bound, &pending);
        let projected = replay(Projection::Scheduling, &nodes, &bound, &pending);
        for (a, b) in whole.iter().zip(&projected) {
            assert_eq!(a, b, "seed {seed}: the projection changed an outcome");
        }
        assert_eq!(whole.len(), projected.len());
        refused += whole.iter().filter(|l| l.contains("refused")).count();
        preempted += whole.iter().filter(|l| l.contains("preempts")).count();
        placed += whole.iter().filter(|l| l.contains(" -> ")).count();
    }
    // The clusters exercise both outcomes and preemption, or the comparison proves little.
    assert!(placed > 100 && refused > 30 && preempted > 3, "placed {placed}, refused {refused}, preempted {preempted}");
}

/// A changed copy of a pod: one of the things that change on live pods.
fn mutate_pod(rng: &mut StdRng, p: &Pod) -> Pod {
    let mut v = serde_json::to_value(p).unwrap();
    match rng.random_range(0..8) {
        0 => v["metadata"]["labels"]["app"] = json!(pick(rng, &APPS)),
        1 => v["metadata"]["annotations"]["note"] = json!(junk(rng)),
        2 => v["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(pick(rng, &["50m", "2", "100m"])),
        3 => v["spec"]["tolerations"] = json!([{"key": "spot", "operator": "Exists"}]),
        4 => v["status"]["podIP"] = json!(junk(rng)),
        5 => {
            v["status"]["containerStatuses"][0]["resources"] = json!({"requests": {"cpu": pick(rng, &["10m", "3"])}});
        }
        6 => v["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]),
        _ => v["spec"]["containers"][0]["env"] = json!([{"name": "Y", "value": junk(rng)}]),
    }
    serde_json::from_value(v).unwrap()
}

fn mutate_node(rng: &mut StdRng, n: &Node) -> Node {
    let mut v = serde_json::to_value(n).unwrap();
    match rng.random_range(0..8) {
        0 => v["metadata"]["labels"]["disk"] = json!(junk(rng)),
        1 => v["metadata"]["annotations"]["note"] = json!(junk(rng)),
        2 => v["spec"]["taints"] = json!([{"key": "spot", "effect": "NoSchedule"}]),
        3 => v["status"]["allocatable"]["cpu"] = json!("16"),
        4 => v["status"]["conditions"][0]["lastHeartbeatTime"] = json!(ts(rng)),
        5 => v["status"]["conditions"][0]["status"] = json!("Unknown"),
        6 => v["status"]["images"] = json!([{"names": ["registry.example/new:1"], "sizeBytes": 1}]),
        _ => v["spec"]["unschedulable"] = json!(false),
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn projected_objects_raise_the_same_events_and_hints() {
    let cfg = ksched_scheduler::config::default_config();
    let recorder = |_: &str| -> Arc<dyn EventRecorder> { Arc::new(NoopRecorder) };
    let profiles = ksched_scheduler::app::build_profiles(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ReadOnlyClient),
        &recorder,
        lister(),
        Arc::new(OnceLock::new()),
        Arc::new(|_| {}),
        &[],
    )
    .unwrap();
    let fw = &profiles["default-scheduler"].framework;
    let hints: Vec<(String, ksched_framework::events::QueueingHintFn)> = fw
        .enqueue_events()
        .iter()
        .flat_map(|(plugin, evs)| evs.iter().filter_map(move |e| e.hint.clone().map(|h| (plugin.clone(), h))))
        .collect();
    assert!(hints.len() > 10, "the default profile registers hints");
    let (s, f) = (Projection::Scheduling, Projection::Full);
    let mut compared = 0;
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        let waiting = pod(&mut rng, 0, None);
        let node_name = format!("node-{}", rng.random_range(0..3));
        let on_node = chance(&mut rng, 0.5);
        let old_pod = pod(&mut rng, 1, on_node.then_some(node_name.as_str()));
        let new_pod = mutate_pod(&mut rng, &old_pod);
        let old_node = node(&mut rng, 1);
        let new_node = mutate_node(&mut rng, &old_node);
        assert_eq!(
            pod_update_events(&f.pod(old_pod.clone()), &f.pod(new_pod.clone())),
            pod_update_events(&s.pod(old_pod.clone()), &s.pod(new_pod.clone())),
            "seed {seed}: pod update events"
        );
        assert_eq!(
            node_update_events(&f.node(old_node.clone()).0, &f.node(new_node.clone()).0),
            node_update_events(&s.node(old_node.clone()).0, &s.node(new_node.clone()).0),
            "seed {seed}: node update events"
        );
        let objects = |p: Projection| {
            let pods = (
                EventObject::Pod(Arc::new(p.pod(old_pod.clone()))),
                EventObject::Pod(Arc::new(p.pod(new_pod.clone()))),
            );
            let nodes = (
                EventObject::Node(Arc::new(p.node(old_node.clone()).0)),
                EventObject::Node(Arc::new(p.node(new_node.clone()).0)),
            );
            (p.pod(waiting.clone()), pods, nodes)
        };
        let (wf, pf, nf) = objects(f);
        let (ws, ps, ns) = objects(s);
        for (plugin, hint) in &hints {
            // (old, new) on whole objects, then (old, new) on projected ones.
            type Call<'a> =
                (Option<&'a EventObject>, Option<&'a EventObject>, Option<&'a EventObject>, Option<&'a EventObject>);
            let calls: [Call<'_>; 6] = [
                (Some(&pf.0), Some(&pf.1), Some(&ps.0), Some(&ps.1)),
                (None, Some(&pf.1), None, Some(&ps.1)),
                (Some(&pf.0), None, Some(&ps.0), None),
                (Some(&nf.0), Some(&nf.1), Some(&ns.0), Some(&ns.1)),
                (None, Some(&nf.1), None, Some(&ns.1)),
                (Some(&nf.0), None, Some(&ns.0), None),
            ];
            for (of, nwf, os, nws) in calls {
                let whole = hint(&wf, of, nwf).map_err(|e| e.to_string());
                let projected = hint(&ws, os, nws).map_err(|e| e.to_string());
                assert_eq!(
                    format!("{whole:?}"),
                    format!("{projected:?}"),
                    "seed {seed}: {plugin}'s queueing hint differs on projected objects"
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 1000);
}

#[test]
fn extenders_and_out_of_tree_plugins_keep_whole_objects() {
    let in_tree = ksched_plugins::in_tree_registry();
    assert_eq!(Projection::for_scheduler(false, &in_tree), Projection::Scheduling);
    assert_eq!(Projection::for_scheduler(true, &in_tree), Projection::Full);
    let mut with_own = ksched_plugins::in_tree_registry();
    with_own.register("ReadsAnnotations", |_, _| Err("unused".into())).unwrap();
    assert_eq!(Projection::for_scheduler(false, &with_own), Projection::Full);
}
