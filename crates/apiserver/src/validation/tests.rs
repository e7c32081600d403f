//! One row per rule: an accepted object and a rejected one, with the field
//! and upstream's message the rejection must carry.

use serde_json::{json, Value};

use super::*;
use crate::resources::{by_kind, def};

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec})
}

fn ctr(extra: Value) -> Value {
    let mut c = json!({"name": "c", "image": "nginx"});
    if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    c
}

fn pod_with(extra: Value) -> Value {
    let mut spec = json!({"containers": [ctr(json!({}))]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    pod(spec)
}

fn run(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let av = obj["apiVersion"].as_str().unwrap();
    let kind = obj["kind"].as_str().unwrap();
    validate(def(by_kind(av, kind).unwrap()), obj, old)
}

/// (rule, object, expected first cause as `field: message` prefix, or None if accepted).
fn create_cases() -> Vec<(&'static str, Value, Option<&'static str>)> {
    let node = |spec: Value, status: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": spec, "status": status});
    let pc = |name: &str, value: Value| json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value});
    let pvc = |spec: Value| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "default"}, "spec": spec});
    let pv =
        |spec: Value| json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"}, "spec": spec});
    let sc = |extra: Value| {
        let mut o = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "x.io/y", "volumeBindingMode": "Immediate"});
        o.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        o
    };
    let lease = |spec: Value| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "default"}, "spec": spec});
    let with_meta = |meta: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
    vec![
        ("object name is a DNS subdomain", with_meta(json!({"name": "a.b-c", "namespace": "default"})), None),
        ("object name rejects uppercase", with_meta(json!({"name": "Bad", "namespace": "default"})),
            Some("metadata.name: Invalid value: \"Bad\": a lowercase RFC 1123 subdomain")),
        ("name or generateName is required", with_meta(json!({"namespace": "default"})),
            Some("metadata.name: Required value: name or generateName is required")),
        ("generateName may end with a dash", with_meta(json!({"generateName": "web-", "namespace": "default"})), None),
        ("namespace names are DNS labels",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}),
            Some("metadata.name: Invalid value: \"a.b\": must not contain dots")),
        ("label keys are qualified names", with_meta(json!({"name": "x", "namespace": "default", "labels": {"example.com/app": "v"}})), None),
        ("label keys reject bad prefixes", with_meta(json!({"name": "x", "namespace": "default", "labels": {"Bad_/x": "v"}})),
            Some("metadata.labels: Invalid value: \"Bad_/x\": prefix part a lowercase RFC 1123 subdomain")),
        ("label values are checked", with_meta(json!({"name": "x", "namespace": "default", "labels": {"a": "has space"}})),
            Some("metadata.labels: Invalid value: \"has space\": a valid label must be an empty string")),
        ("annotation keys are qualified names", with_meta(json!({"name": "x", "namespace": "default", "annotations": {"a b": "1"}})),
            Some("metadata.annotations: Invalid value: \"a b\": name part must consist of")),
        ("annotations are limited to 256KiB", with_meta(json!({"name": "x", "namespace": "default", "annotations": {"a": "x".repeat(262_145)}})),
            Some("metadata.annotations: Too long: may not be more than 262144 bytes")),
        ("owner references need a uid", with_meta(json!({"name": "x", "namespace": "default", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]})),
            Some("metadata.ownerReferences.uid: Invalid value: \"\": must not be empty")),
        ("finalizers are qualified names", with_meta(json!({"name": "x", "namespace": "default", "finalizers": ["a b"]})),
            Some("metadata.finalizers: Invalid value: \"a b\"")),
        ("a pod is accepted", pod_with(json!({})), None),
        ("pods need containers", pod(json!({"containers": []})), Some("spec.containers: Required value")),
        ("container images are required", pod(json!({"containers": [{"name": "c"}]})), Some("spec.containers[0].image: Required value")),
        ("container names are DNS labels", pod(json!({"containers": [ctr(json!({"name": "C_1"}))]})),
            Some("spec.containers[0].name: Invalid value: \"C_1\": a lowercase RFC 1123 label")),
        ("container names are unique", pod(json!({"containers": [ctr(json!({})), ctr(json!({}))]})),
            Some("spec.containers[1].name: Duplicate value: \"c\"")),
        ("requests may not be negative", pod(json!({"containers": [ctr(json!({"resources": {"requests": {"cpu": "-1"}}}))]})),
            Some("spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0")),
        ("requests may not exceed limits", pod(json!({"containers": [ctr(json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}))]})),
            Some("spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1")),
        ("extended resources are whole numbers", pod(json!({"containers": [ctr(json!({"resources": {"requests": {"example.com/gpu": "500m"}, "limits": {"example.com/gpu": "500m"}}}))]})),
            Some("spec.containers[0].resources.limits[example.com/gpu]: Invalid value: \"500m\": must be an integer")),
        ("resource names must be standard or qualified", pod(json!({"containers": [ctr(json!({"resources": {"requests": {"gpu": "1"}}}))]})),
            Some("spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified")),
        ("container ports are in range", pod(json!({"containers": [ctr(json!({"ports": [{"containerPort": 70000}]}))]})),
            Some("spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive")),
        ("port protocols are an enum", pod(json!({"containers": [ctr(json!({"ports": [{"containerPort": 80, "protocol": "HTTP"}]}))]})),
            Some("spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"")),
        ("restartPolicy is an enum", pod_with(json!({"restartPolicy": "Sometimes"})),
            Some("spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"")),
        ("nodeSelector labels are checked", pod_with(json!({"nodeSelector": {"zone": "a b"}})),
            Some("spec.nodeSelector: Invalid value: \"a b\"")),
        ("toleration operators are an enum", pod_with(json!({"tolerations": [{"key": "k", "operator": "Maybe"}]})),
            Some("spec.tolerations[0].operator: Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\"")),
        ("an empty toleration key needs Exists", pod_with(json!({"tolerations": [{"operator": "Equal", "value": "v"}]})),
            Some("spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty")),
        ("tolerationSeconds needs NoExecute", pod_with(json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]})),
            Some("spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set")),
        ("node affinity operators are checked", pod_with(json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In"}]}]}}}})),
            Some("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'")),
        ("pod affinity needs a topologyKey", pod_with(json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"a": "b"}}}]}}})),
            Some("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty")),
        ("label selector operators are checked", pod_with(json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]}}})),
            Some("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator")),
        ("spread maxSkew is positive", pod_with(json!({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]})),
            Some("spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero")),
        ("spread whenUnsatisfiable is an enum", pod_with(json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Never"}]})),
            Some("spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Never\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"")),
        ("nodeName with scheduling gates is refused", pod_with(json!({"nodeName": "n1", "schedulingGates": [{"name": "g"}]})),
            Some("spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared")),
        ("preemptionPolicy is an enum", pod_with(json!({"preemptionPolicy": "Sometimes"})),
            Some("spec.preemptionPolicy: Unsupported value: \"Sometimes\"")),
        ("a node is accepted", node(json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}), json!({"capacity": {"cpu": "4"}})), None),
        ("taint effects are an enum", node(json!({"taints": [{"key": "k", "effect": "Sometimes"}]}), json!({})),
            Some("metadata.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"")),
        ("taints are unique by key and effect", node(json!({"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}]}), json!({})),
            Some("metadata.taints[1]: Duplicate value: {\"effect\":\"NoSchedule\",\"key\":\"k\"}: taints must be unique by key and effect pair")),
        ("node capacity may not be negative", node(json!({}), json!({"capacity": {"cpu": "-4"}})),
            Some("status.capacity.cpu: Invalid value: \"-4\": must be greater than or equal to 0")),
        ("a priority class is accepted", pc("high", json!(1000)), None),
        ("priority class values are required", json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}}),
            Some("value: Required value")),
        ("user priorities are capped", pc("huge", json!(1_000_000_001)),
            Some("value: Forbidden: maximum allowed value of a user defined priority is 1000000000")),
        ("system- names are reserved", pc("system-mine", json!(1)),
            Some("metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class")),
        ("a claim is accepted", pvc(json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})), None),
        ("claims need an access mode", pvc(json!({"resources": {"requests": {"storage": "1Gi"}}})),
            Some("spec.accessModes: Required value: at least 1 access mode is required")),
        ("claims need a storage request", pvc(json!({"accessModes": ["ReadWriteOnce"]})),
            Some("spec.resources[storage]: Required value")),
        ("access modes are an enum", pvc(json!({"accessModes": ["ReadWriteSometimes"], "resources": {"requests": {"storage": "1Gi"}}})),
            Some("spec.accessModes: Unsupported value: \"ReadWriteSometimes\"")),
        ("a volume is accepted", pv(json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}})), None),
        ("volumes need a source", pv(json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}})),
            Some("spec: Required value: must specify a volume type")),
        ("a storage class is accepted", sc(json!({})), None),
        ("storage classes need a provisioner", sc(json!({"provisioner": ""})), Some("provisioner: Required value")),
        ("volumeBindingMode is an enum", sc(json!({"volumeBindingMode": "Later"})),
            Some("volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"")),
        ("a lease is accepted", lease(json!({"holderIdentity": "x", "leaseDurationSeconds": 15})), None),
        ("lease durations are positive", lease(json!({"leaseDurationSeconds": 0})),
            Some("spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0")),
        ("CSINode drivers need a node ID",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "x.io"}]}}),
            Some("spec.drivers[0].nodeID: Required value")),
    ]
}

#[test]
fn each_rule_accepts_and_rejects_like_upstream() {
    let mut failures = Vec::new();
    for (rule, obj, want) in create_cases() {
        let got = run(&obj, None);
        match (want, got.first()) {
            (None, None) => {}
            (Some(w), Some(c)) if c.render().starts_with(w) => {}
            (w, _) => failures
                .push(format!("{rule}: want {w:?}, got {:?}", got.iter().map(Cause::render).collect::<Vec<_>>())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn update_rules() {
    let old = pod_with(json!({"tolerations": [{"key": "a", "operator": "Exists"}]}));
    let mut image = old.clone();
    image["spec"]["containers"][0]["image"] = json!("nginx:2");
    assert!(run(&image, Some(&old)).is_empty(), "images may change");
    let mut more = old.clone();
    more["spec"]["tolerations"].as_array_mut().unwrap().push(json!({"key": "b", "operator": "Exists"}));
    assert!(run(&more, Some(&old)).is_empty(), "tolerations may be added");
    let mut bound = old.clone();
    bound["spec"]["nodeName"] = json!("n1");
    assert!(run(&bound, Some(&old)).is_empty(), "binding sets nodeName once");
    let mut rebound = bound.clone();
    rebound["spec"]["nodeName"] = json!("n2");
    let errs = run(&rebound, Some(&bound));
    assert!(errs[0].render().starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`"), "{errs:?}");
    let mut gated = pod_with(json!({"schedulingGates": [{"name": "a"}]}));
    let old_gated = gated.clone();
    gated["spec"]["schedulingGates"] = json!([{"name": "a"}, {"name": "b"}]);
    assert_eq!(
        run(&gated, Some(&old_gated))[0].render(),
        "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'b'"
    );

    let pc =
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 1});
    let mut changed = pc.clone();
    changed["value"] = json!(2);
    assert_eq!(run(&changed, Some(&pc))[0].render(), "value: Forbidden: may not be changed in an update.");

    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let mut bound = claim.clone();
    bound["spec"]["volumeName"] = json!("pv1");
    assert!(run(&bound, Some(&claim)).is_empty(), "binding a claim fills volumeName");
    let mut modes = bound.clone();
    modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
    assert!(run(&modes, Some(&bound))[0].render().starts_with("spec: Forbidden: spec is immutable after creation"));

    let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "a.io/b", "volumeBindingMode": "Immediate"});
    let mut changed = sc.clone();
    changed["provisioner"] = json!("c.io/d");
    assert_eq!(run(&changed, Some(&sc))[0].render(), "provisioner: Invalid value: \"c.io/d\": field is immutable");
}

#[test]
fn invalid_status_qualifies_group_kinds() {
    let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}});
    let err = check(def(by_kind("scheduling.k8s.io/v1", "PriorityClass").unwrap()), &pc, None).unwrap_err();
    assert_eq!(err.message, "PriorityClass.scheduling.k8s.io \"x\" is invalid: value: Required value");
    let d = err.details().unwrap();
    assert_eq!((d.kind.as_deref(), d.group.as_deref()), (Some("PriorityClass"), Some("scheduling.k8s.io")));
}

#[test]
fn decoder_refuses_bad_quantities_and_types_and_drops_unknown_fields() {
    let d = def(by_kind("v1", "Pod").unwrap());
    let mut bad_cpu = pod(json!({"containers": [ctr(json!({"resources": {"requests": {"cpu": "abc"}}}))]}));
    let err = decode(d, &mut bad_cpu, FieldValidation::Strict).unwrap_err();
    assert_eq!((err.code, err.reason), (400, "BadRequest"));
    assert_eq!(
        err.message,
        "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    let mut bad_type = pod(json!({"containers": [ctr(json!({"ports": [{"containerPort": "eighty"}]}))]}));
    let err = decode(d, &mut bad_type, FieldValidation::Strict).unwrap_err();
    assert_eq!(
        err.message,
        "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    );
    let mut unknown = pod(json!({"containers": [ctr(json!({"colour": "red"}))], "bogus": 1}));
    let err = decode(d, &mut unknown.clone(), FieldValidation::Strict).unwrap_err();
    assert!(
        err.message.ends_with(
            "strict decoding error: unknown field \"spec.bogus\", unknown field \"spec.containers[0].colour\""
        ),
        "{}",
        err.message
    );
    let warnings = decode(d, &mut unknown, FieldValidation::Warn).unwrap();
    assert_eq!(warnings.len(), 2);
    assert!(
        unknown["spec"].get("bogus").is_none() && unknown["spec"]["containers"][0].get("colour").is_none(),
        "pruned"
    );
    let mut ok = pod_with(json!({"nodeSelector": {"a": "b"}}));
    assert!(decode(d, &mut ok, FieldValidation::Strict).unwrap().is_empty());
}
