//! `ksched explain` on manifest files: every kind the scheduler reads is loaded as the API
//! server holds it, so each verdict below depends on one kind (or on what a dump records
//! beyond a create request) being there.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A scratch directory of manifests, removed when dropped.
struct Manifests(PathBuf);

impl Manifests {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ksched-explain-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Manifests(dir)
    }

    /// Writes `file` (YAML documents) and returns its path.
    fn write(&self, file: &str, docs: &[&str]) -> PathBuf {
        let p = self.0.join(file);
        std::fs::write(&p, docs.join("\n---\n")).unwrap();
        p
    }
}

impl Drop for Manifests {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `ksched explain PATH... POD -o json`: (success, stdout, stderr).
fn run_explain(paths: &[&Path], pod: &str) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .arg("explain")
        .args(paths)
        .args([pod, "-o", "json"])
        .output()
        .expect("running ksched explain");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The explanation of `pod` (the command must succeed).
fn explain(paths: &[&Path], pod: &str) -> Value {
    let (ok, stdout, stderr) = run_explain(paths, pod);
    assert!(ok, "ksched explain {pod} failed:\n{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The verdict, the selected node and the message, for one-line assertions.
fn outcome(ex: &Value) -> (String, String, String) {
    let s = |k: &str| ex[k].as_str().unwrap_or_default().to_string();
    (s("verdict"), s("selectedNode"), s("message"))
}

/// The plugin that rejected `node`.
fn rejected_by(ex: &Value, node: &str) -> String {
    let n = ex["nodes"].as_array().unwrap().iter().find(|n| n["node"] == node).expect("node in the explanation");
    n.pointer("/rejectedBy/plugin").and_then(Value::as_str).unwrap_or_default().to_string()
}

fn node(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}}}
status:
  allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}
  capacity: {{cpu: '4', memory: 8Gi, pods: '110'}}"
    )
}

/// Two empty nodes, node-a and node-b: equal scores, so without a reason the explanation picks
/// node-a (the first of equally scored nodes).
fn two_nodes() -> String {
    format!("{}\n---\n{}", node("node-a"), node("node-b"))
}

const GPU_CLASS: &str = "apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == \"gpu.example.com\"'}";

fn slice(node: &str, model: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {node}-gpus}}
spec:
  driver: gpu.example.com
  nodeName: {node}
  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    attributes:
      model: {{string: {model}}}"
    )
}

const CLAIM: &str = "apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu}";

/// A pending pod using the claim `one-gpu`.
const POD_WITH_CLAIM: &str = "apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimName: one-gpu}
  containers:
  - name: main
    image: registry.example.com/trainer:1
    resources:
      requests: {cpu: 100m}
      claims: [{name: gpu}]";

#[test]
fn resource_claims_are_loaded_with_their_allocation() {
    // Both nodes have a GPU; the claim is allocated already, on node-b: only node-b fits.
    let m = Manifests::new("claims");
    let allocated = format!(
        "{CLAIM}
status:
  allocation:
    devices:
      results:
      - {{request: gpu, driver: gpu.example.com, pool: node-b, device: gpu-0}}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields:
        - {{key: metadata.name, operator: In, values: [node-b]}}"
    );
    let f = m.write(
        "c.yaml",
        &[&two_nodes(), GPU_CLASS, &slice("node-a", "a100"), &slice("node-b", "a100"), &allocated, POD_WITH_CLAIM],
    );
    let ex = explain(&[&f], "default/trainer");
    assert_eq!(outcome(&ex).0, "Schedulable", "{ex:#}");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
    assert_eq!(rejected_by(&ex, "node-a"), "DynamicResources", "{ex:#}");
}

#[test]
fn device_classes_are_loaded() {
    // The class only takes H100s; node-b has one, node-a an A100.
    let m = Manifests::new("classes");
    let h100_class = "apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.attributes[\"gpu.example.com\"].model == \"h100\"'}";
    let f = m.write(
        "c.yaml",
        &[&two_nodes(), h100_class, &slice("node-a", "a100"), &slice("node-b", "h100"), CLAIM, POD_WITH_CLAIM],
    );
    let ex = explain(&[&f], "default/trainer");
    assert_eq!(outcome(&ex).0, "Schedulable", "{ex:#}");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
}

#[test]
fn resource_slices_are_loaded() {
    // Only node-b publishes a device.
    let m = Manifests::new("slices");
    let f = m.write("c.yaml", &[&two_nodes(), GPU_CLASS, &slice("node-b", "a100"), CLAIM, POD_WITH_CLAIM]);
    let ex = explain(&[&f], "default/trainer");
    assert_eq!(outcome(&ex).0, "Schedulable", "{ex:#}");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
    assert_eq!(rejected_by(&ex, "node-a"), "DynamicResources", "{ex:#}");
}

#[test]
fn claim_templates_become_the_claims_the_controller_makes() {
    let m = Manifests::new("templates");
    let template = "apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu}";
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
  containers:
  - name: main
    image: registry.example.com/trainer:1
    resources:
      requests: {cpu: 100m}
      claims: [{name: gpu}]";
    let f = m.write("c.yaml", &[&two_nodes(), GPU_CLASS, &slice("node-b", "a100"), template, pod]);
    let ex = explain(&[&f], "default/trainer");
    assert_eq!(outcome(&ex).0, "Schedulable", "{ex:#}");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
}

#[test]
fn persistent_volumes_claims_and_storage_classes_are_loaded() {
    // A WaitForFirstConsumer claim and the only matching local volume, on node-b (Available,
    // as the PV controller, which does not run here, would have made it).
    let m = Manifests::new("volumes");
    let f = m.write(
        "c.yaml",
        &[
            &two_nodes(),
            "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer",
            "apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-b}
spec:
  storageClassName: local
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  local: {path: /mnt/ssd}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [node-b]}
status: {phase: Available}",
            "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  storageClassName: local
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 5Gi}}",
            "apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default}
spec:
  containers: [{name: main, image: postgres:16}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}",
        ],
    );
    let ex = explain(&[&f], "default/db");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
    assert_eq!(rejected_by(&ex, "node-a"), "VolumeBinding", "{ex:#}");
}

#[test]
fn volume_attachments_count_against_csi_limits() {
    // Each node attaches one volume of the driver; node-a has one attached already.
    let m = Manifests::new("attachments");
    let csi_node = |n: &str| {
        format!(
            "apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {{name: {n}}}
spec:
  drivers:
  - {{name: ebs.csi.aws.com, nodeID: {n}, allocatable: {{count: 1}}}}"
        )
    };
    let pv = |name: &str| {
        format!(
            "apiVersion: v1
kind: PersistentVolume
metadata: {{name: {name}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  csi: {{driver: ebs.csi.aws.com, volumeHandle: {name}}}
  claimRef: {{name: {name}, namespace: default}}"
        )
    };
    let pvc = "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: vol-2
  namespace: default
  annotations: {pv.kubernetes.io/bind-completed: 'yes'}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ''
  volumeName: vol-2
  resources: {requests: {storage: 1Gi}}";
    let attachment = "apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: attach-vol-1}
spec:
  attacher: ebs.csi.aws.com
  nodeName: node-a
  source: {persistentVolumeName: vol-1}";
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default}
spec:
  containers: [{name: main, image: nginx:1}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: vol-2}";
    let f = m.write(
        "c.yaml",
        &[&two_nodes(), &csi_node("node-a"), &csi_node("node-b"), &pv("vol-1"), &pv("vol-2"), pvc, attachment, pod],
    );
    let ex = explain(&[&f], "default/app");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
    assert_eq!(rejected_by(&ex, "node-a"), "NodeVolumeLimits", "{ex:#}");
}

/// A full node pair for preemption: each runs one 3-cpu pod of priority 0.
fn preemption_cluster(extra: &[&str]) -> Vec<String> {
    let victim = |name: &str, node: &str, app: &str| {
        format!(
            "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: {app}}}}}
spec:
  nodeName: {node}
  containers:
  - name: main
    image: nginx:1
    resources: {{requests: {{cpu: '3'}}}}"
        )
    };
    let mut docs = vec![two_nodes(), victim("victim-a", "node-a", "a"), victim("victim-b", "node-b", "b")];
    docs.extend(extra.iter().map(|s| s.to_string()));
    docs
}

const PREEMPTOR: &str = "apiVersion: v1
kind: Pod
metadata: {name: urgent, namespace: default}
spec:
  priorityClassName: urgent
  containers:
  - name: main
    image: nginx:1
    resources: {requests: {cpu: '3'}}";

const URGENT_CLASS: &str = "apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000";

#[test]
fn pod_disruption_budgets_steer_preemption() {
    // victim-a is protected by an exhausted budget: preemption picks node-b.
    let m = Manifests::new("pdbs");
    let pdb = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: keep-a, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: a}}";
    let docs = preemption_cluster(&[URGENT_CLASS, PREEMPTOR, pdb]);
    let f = m.write("c.yaml", &docs.iter().map(String::as_str).collect::<Vec<_>>());
    let ex = explain(&[&f], "default/urgent");
    assert_eq!(outcome(&ex).0, "Unschedulable", "{ex:#}");
    assert_eq!(ex.pointer("/preemption/chosen/node").and_then(Value::as_str), Some("node-b"), "{ex:#}");
}

#[test]
fn priority_classes_resolve_pod_priority_as_admission_does() {
    // With priority 1000 the pod may preempt; with 0 it could not.
    let m = Manifests::new("priority");
    let docs = preemption_cluster(&[URGENT_CLASS, PREEMPTOR]);
    let f = m.write("c.yaml", &docs.iter().map(String::as_str).collect::<Vec<_>>());
    let ex = explain(&[&f], "default/urgent");
    let candidates = ex.pointer("/preemption/candidates").and_then(Value::as_array).map_or(0, Vec::len);
    assert_eq!(candidates, 2, "{ex:#}");
}

/// A `kubectl get -o yaml` dump: a `List` of objects with everything the API server adds.
fn dump(items: &[Value]) -> String {
    serde_saphyr::to_string(&serde_json::json!({
        "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items,
    }))
    .unwrap()
}

/// Server-set metadata as kubectl shows it.
fn server_meta(mut meta: Value, uid: &str, created: &str) -> Value {
    meta["uid"] = uid.into();
    meta["resourceVersion"] = "4711".into();
    meta["creationTimestamp"] = created.into();
    meta["managedFields"] = serde_json::json!([{
        "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}},
        "manager": "kubectl-create", "operation": "Update", "time": created,
    }]);
    meta
}

fn dumped_node(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": server_meta(serde_json::json!({"name": name, "labels": {"kubernetes.io/hostname": name}}),
            &format!("uid-node-{name}"), "2025-01-01T00:00:00Z"),
        "spec": {},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                                   "lastTransitionTime": "2025-01-01T00:00:00Z"}]},
    })
}

fn dumped_pod(name: &str, uid: &str, node: Option<&str>, cpu: &str, status: Value) -> Value {
    let mut spec = serde_json::json!({
        "containers": [{"name": "main", "image": "nginx:1", "imagePullPolicy": "IfNotPresent",
                        "resources": {"requests": {"cpu": cpu}},
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
        "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0, "restartPolicy": "Never", "schedulerName": "default-scheduler", "securityContext": {},
        "serviceAccount": "default", "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}],
    });
    if let Some(n) = node {
        spec["nodeName"] = n.into();
    }
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": server_meta(serde_json::json!({"name": name, "namespace": "default"}), uid, "2025-01-01T00:01:00Z"),
        "spec": spec,
        "status": status,
    })
}

#[test]
fn a_dump_keeps_pod_status_finished_pods_free_their_node() {
    // node-b is full with a running pod; node-a ran a pod that has Succeeded: only node-a fits.
    let m = Manifests::new("dump-status");
    let done = serde_json::json!({"phase": "Succeeded", "qosClass": "Burstable", "startTime": "2025-01-01T00:01:00Z",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-01-01T00:01:00Z"}]});
    let running = serde_json::json!({"phase": "Running", "qosClass": "Burstable", "podIP": "10.0.0.7",
        "hostIP": "192.168.0.2", "startTime": "2025-01-01T00:01:00Z"});
    let pending = serde_json::json!({"phase": "Pending", "qosClass": "Burstable"});
    let items = [
        dumped_node("node-a"),
        dumped_node("node-b"),
        dumped_pod("batch-done", "11111111-1111-1111-1111-111111111111", Some("node-a"), "4", done),
        dumped_pod("web", "22222222-2222-2222-2222-222222222222", Some("node-b"), "4", running),
        dumped_pod("new", "33333333-3333-3333-3333-333333333333", None, "2", pending),
    ];
    let f = m.write("dump.yaml", &[&dump(&items)]);
    let ex = explain(&[&f], "default/new");
    assert_eq!(outcome(&ex).0, "Schedulable", "{ex:#}");
    assert_eq!(outcome(&ex).1, "node-a", "{ex:#}");
}

#[test]
fn a_dump_keeps_uids_so_claims_stay_owned_by_and_reserved_for_their_pods() {
    // A bound pod whose template claim (owned by it and reserved for it, by uid) is allocated on
    // node-b: explained as if new, it fits only there, with its own claim.
    let m = Manifests::new("dump-uids");
    let uid = "44444444-4444-4444-4444-444444444444";
    let pod = {
        let mut p = dumped_pod(
            "trainer",
            uid,
            Some("node-b"),
            "100m",
            serde_json::json!({"phase": "Running", "qosClass": "Burstable",
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-gpu-x7k2p"}]}),
        );
        p["spec"]["resourceClaims"] = serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
        p["spec"]["containers"][0]["resources"]["claims"] = serde_json::json!([{"name": "gpu"}]);
        p
    };
    let claim = serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": server_meta(serde_json::json!({
            "name": "trainer-gpu-x7k2p", "namespace": "default", "generateName": "trainer-gpu-",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": uid,
                                 "controller": true, "blockOwnerDeletion": true}]}),
            "55555555-5555-5555-5555-555555555555", "2025-01-01T00:01:01Z"),
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
            "allocationMode": "ExactCount", "count": 1}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-b", "device": "gpu-0"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "trainer", "uid": uid}]},
    });
    let template = serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": server_meta(serde_json::json!({"name": "one-gpu", "namespace": "default"}),
            "66666666-6666-6666-6666-666666666666", "2025-01-01T00:00:30Z"),
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
    });
    let items = [dumped_node("node-a"), dumped_node("node-b"), template, claim, pod];
    let f = m.write("dump.yaml", &[&dump(&items), GPU_CLASS, &slice("node-a", "a100"), &slice("node-b", "a100")]);
    let ex = explain(&[&f], "default/trainer");
    assert_eq!(ex["boundTo"], "node-b", "{ex:#}");
    assert_eq!(outcome(&ex).0, "Schedulable", "{ex:#}");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
}

#[test]
fn a_dump_may_list_what_every_server_has() {
    // `kubectl get namespaces,priorityclasses -o yaml` lists `default` and the system classes;
    // the default namespace's labels are the dump's (the pod's affinity selects on them).
    let m = Manifests::new("dump-builtins");
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": server_meta(serde_json::json!({"name": "default",
            "labels": {"kubernetes.io/metadata.name": "default", "team": "web"}}),
            "77777777-7777-7777-7777-777777777777", "2025-01-01T00:00:00Z"),
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    let pc = serde_json::json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": server_meta(serde_json::json!({"name": "system-node-critical"}),
            "88888888-8888-8888-8888-888888888888", "2025-01-01T00:00:00Z"),
        "value": 2000001000, "preemptionPolicy": "PreemptLowerPriority",
        "description": "Used for system critical pods that must not be moved from their current node."});
    let mut friend = dumped_pod(
        "friend",
        "99999999-9999-9999-9999-999999999999",
        Some("node-b"),
        "100m",
        serde_json::json!({"phase": "Running", "qosClass": "Burstable"}),
    );
    friend["metadata"]["labels"] = serde_json::json!({"app": "friend"});
    let mut pod = dumped_pod(
        "near-friend",
        "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
        None,
        "100m",
        serde_json::json!({"phase": "Pending", "qosClass": "Burstable"}),
    );
    pod["spec"]["affinity"] = serde_json::json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "friend"}},
        "namespaceSelector": {"matchLabels": {"team": "web"}},
        "topologyKey": "kubernetes.io/hostname"}]}});
    // As JSON (`kubectl get -o json`).
    let items = [ns, pc, dumped_node("node-a"), dumped_node("node-b"), friend, pod];
    let list =
        serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items});
    let f = m.write("dump.json", &[&serde_json::to_string_pretty(&list).unwrap()]);
    let ex = explain(&[&f], "default/near-friend");
    assert_eq!(outcome(&ex).0, "Schedulable", "{ex:#}");
    assert_eq!(outcome(&ex).1, "node-b", "{ex:#}");
}

#[test]
fn malformed_manifests_name_file_object_and_line() {
    let m = Manifests::new("malformed");
    let nodes = m.write("nodes.yaml", &[&two_nodes()]);
    // YAML that does not parse: the file, the document, where it starts and the line in it.
    let broken = m.write("broken.yaml", &[&node("node-c"), "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n"]);
    let (ok, _, stderr) = run_explain(&[&nodes, &broken], "default/x");
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("broken.yaml#2: invalid YAML (document starts at line 10)"), "{stderr}");
    assert!(stderr.contains("line 3 column 11"), "{stderr}");
    // An object the API server refuses: the file, the document, the kind, the object and the field.
    let invalid = m.write(
        "invalid.yaml",
        &["apiVersion: v1
kind: Pod
metadata: {name: bad-cpu, namespace: default}
spec:
  containers:
  - {name: main, image: nginx:1, resources: {requests: {cpu: lots}}}"],
    );
    let (ok, _, stderr) = run_explain(&[&nodes, &invalid], "default/bad-cpu");
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("invalid.yaml#1: Pod default/bad-cpu:"), "{stderr}");
    assert!(stderr.contains("spec.containers[0].resources.requests"), "{stderr}");
}

#[test]
fn whatif_reads_the_same_kinds() {
    // The pod fits only through its claim, on node-b: both replays place it.
    let m = Manifests::new("whatif");
    let f = m.write("c.yaml", &[&two_nodes(), GPU_CLASS, &slice("node-b", "a100"), CLAIM, POD_WITH_CLAIM]);
    let cfg = m.write("config.yaml", &["apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration"]);
    let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["whatif", "--config"])
        .arg(&cfg)
        .arg(&f)
        .output()
        .expect("running ksched whatif");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let row = |name: &str| -> Vec<String> {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} row: {text}"));
        line[name.len()..].split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(row("placed"), ["1", "1"], "{text}");
    assert_eq!(row("unschedulable"), ["0", "0"], "{text}");
}
