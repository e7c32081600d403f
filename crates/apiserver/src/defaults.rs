//! Create-time defaulting and validation (what the real API server's
//! defaulting functions and default admission plugins do for our resources).
//!
//! Validation that produces user-facing field errors runs on the raw JSON so
//! it can name fields precisely; defaulting then runs on k8s-openapi types so
//! malformed shapes are rejected the way the real server's decoder rejects them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodSecurityContext, PodStatus, Toleration};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::limitranger;
use crate::resources::{def, ids, ResourceDef, ResourceId};
use crate::validation;

/// Built-in priority classes that exist in every cluster.
pub fn builtin_priority_classes() -> Vec<Value> {
    [("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)]
        .into_iter()
        .map(|(name, value)| {
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
                "description": "Used for system critical pods that must not be moved from their current node."
            })
        })
        .collect()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// Read access to cluster state that admission needs.
pub trait AdmissionContext {
    /// All current PriorityClass objects.
    fn priority_classes(&self) -> Vec<Arc<Value>>;
    /// The Node called `name`, if it exists.
    fn node(&self, name: &str) -> Option<Arc<Value>>;
    /// All current StorageClass objects.
    fn storage_classes(&self) -> Vec<Arc<Value>>;
    /// The LimitRange objects of a namespace.
    fn limit_ranges(&self, namespace: &str) -> Vec<Arc<Value>>;
}

/// The node labels upstream's PodTopologyLabels admission copies onto the
/// pods bound to it.
pub fn topology_labels(node: &Value) -> serde_json::Map<String, Value> {
    let labels = node.pointer("/metadata/labels").and_then(Value::as_object);
    labels
        .into_iter()
        .flatten()
        .filter(|(k, _)| matches!(k.as_str(), "topology.kubernetes.io/zone" | "topology.kubernetes.io/region"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// PodTopologyLabels for a pod written with `spec.nodeName` already set.
fn copy_topology_labels(pod: &mut Value, ctx: &dyn AdmissionContext) {
    let Some(node) = str_at(pod, "/spec/nodeName").filter(|n| !n.is_empty()).and_then(|n| ctx.node(n)) else {
        return;
    };
    let labels = topology_labels(&node);
    if labels.is_empty() || !pod.get("metadata").is_some_and(Value::is_object) {
        return;
    }
    if !pod["metadata"].get("labels").is_some_and(Value::is_object) {
        pod["metadata"]["labels"] = json!({});
    }
    for (k, v) in labels {
        pod["metadata"]["labels"][k] = v;
    }
}

/// Defaults, admits and validates an object being created, in upstream's
/// order: defaulting (at decode), mutating admission, then validation.
/// `obj` already has its namespace resolved.
pub fn admit_create(rid: ResourceId, mut obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let d = def(rid);
    validation::decode(d, &mut obj, validation::FieldValidation::Ignore)?;
    // Shapes defaulting cannot work on are refused first.
    if ["metadata", "spec", "status"].iter().any(|f| obj.get(*f).is_some_and(|v| !v.is_object() && !v.is_null())) {
        validation::check(d, &obj, None)?;
    }
    let obj = if rid == ids::pods() {
        admit_pod(obj, ctx)?
    } else if rid == ids::nodes() {
        default_node(obj)?
    } else if rid == ids::namespaces() {
        default_namespace(obj)
    } else if rid == ids::priority_classes() {
        let mut obj = obj;
        if obj.get("preemptionPolicy").is_none_or(Value::is_null) {
            obj["preemptionPolicy"] = json!("PreemptLowerPriority");
        }
        obj
    } else if d.kind == "StorageClass" {
        default_storage_class(obj)
    } else if d.kind == "PersistentVolumeClaim" {
        admit_pvc(obj, ctx)
    } else if d.kind == "PersistentVolume" {
        default_pv(obj)
    } else if d.kind == "LimitRange" {
        limitranger::default_limit_range(obj)
    } else if d.kind == "PodGroup" {
        admit_pod_group(default_pod_group(obj), ctx)?
    } else if d.group == "resource.k8s.io" {
        validation::resource::default(d.kind, obj)
    } else {
        obj
    };
    validation::check(d, &obj, None)?;
    if rid == ids::priority_classes() {
        only_one_global_default(&obj, ctx)?;
    }
    Ok(obj)
}

/// Mutating admission of an update of `old` to `new`, before validation, as
/// kube-apiserver's default plugins do it: for pods, DefaultTolerationSeconds
/// and Priority (which keeps the priority and preemption policy it set at
/// create when the update leaves them out); for PriorityClasses, the
/// one-global-default rule.
pub fn admit_update(rid: ResourceId, old: &Value, new: &mut Value, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    if rid == ids::priority_classes() {
        return only_one_global_default(new, ctx);
    }
    if rid != ids::pods() || !new.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    for f in ["priority", "preemptionPolicy"] {
        if new["spec"].get(f).is_none_or(Value::is_null) {
            if let Some(v) = old.pointer(&format!("/spec/{f}")).filter(|v| !v.is_null()) {
                new["spec"][f] = v.clone();
            }
        }
    }
    let Ok(mut spec) = serde_json::from_value::<k8s_openapi::api::core::v1::PodSpec>(new["spec"].clone()) else {
        // Malformed specs are validation's to refuse.
        return Ok(());
    };
    let before = spec.tolerations.as_ref().map_or(0, Vec::len);
    default_toleration_seconds(&mut spec);
    if spec.tolerations.as_ref().map_or(0, Vec::len) != before {
        new["spec"]["tolerations"] = encode(&spec.tolerations)?;
    }
    copy_topology_labels(new, ctx);
    Ok(())
}

/// Whether upstream's strategy for `d` sets `metadata.generation` (to 1 at
/// create, bumped on spec changes). Others, such as Nodes, Services, PVCs,
/// ResourceClaims and PodGroups, have none (so e.g. a PodGroup condition's
/// observedGeneration is 0 upstream).
pub fn tracks_generation(d: &ResourceDef) -> bool {
    matches!(
        (d.group, d.kind),
        ("", "Pod" | "ReplicationController" | "PodTemplate")
            | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
            | ("batch", "Job" | "CronJob")
            | ("policy", "PodDisruptionBudget")
            | ("discovery.k8s.io", "EndpointSlice")
            | ("scheduling.k8s.io", "PriorityClass")
            | ("resource.k8s.io", "DeviceClass" | "ResourceSlice")
    )
}

/// Whether an update of `old` to `new` bumps the generation, per upstream's
/// `PrepareForUpdate`: a spec change for most kinds, the template for
/// PodTemplates, anything but metadata (or a label) for EndpointSlices, never
/// for PriorityClasses.
pub fn bumps_generation(d: &ResourceDef, old: &Value, new: &Value) -> bool {
    match d.kind {
        "PriorityClass" => false,
        "PodTemplate" => old.get("template") != new.get("template"),
        "EndpointSlice" => {
            let body = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("metadata");
                }
                v
            };
            body(old) != body(new) || old.pointer("/metadata/labels") != new.pointer("/metadata/labels")
        }
        _ => old.get("spec") != new.get("spec"),
    }
}

/// Validates an update of `old` to `new`.
pub fn validate_update(rid: ResourceId, old: &Value, new: &Value) -> Result<(), ApiError> {
    validation::check(def(rid), new, Some(old))
}

/// Status is the scheduler's to write; `disruptionMode` defaults to `Pod`.
fn default_pod_group(mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    if obj.get("spec").is_some_and(Value::is_object) && obj.pointer("/spec/disruptionMode").is_none_or(Value::is_null) {
        obj["spec"]["disruptionMode"] = json!("Pod");
    }
    obj
}

/// Upstream's Priority admission for a PodGroup being created (behind the
/// WorkloadAwarePreemption gate, which the served PodGroup API implies here:
/// `disruptionMode`, `priorityClassName` and `priority` are accepted): the
/// class named, or the global default, resolved into `spec.priority`.
fn admit_pod_group(mut obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    if !obj.get("spec").is_some_and(Value::is_object) {
        return Ok(obj);
    }
    let name = validation::display_name(&obj);
    let resource = "podgroups.scheduling.k8s.io";
    let resolved = resolve_priority(resource, &name, str_at(&obj, "/spec/priorityClassName"), ctx)?;
    if let Some(given) = obj.pointer("/spec/priority").and_then(Value::as_i64) {
        if given != i64::from(resolved.priority) {
            return Err(ApiError::forbidden(
                resource,
                &name,
                &format!(
                    "priority set in the pod group ({given}) must match the priority computed ({}) based on the priority class set in the spec",
                    resolved.priority
                ),
            ));
        }
    }
    obj["spec"]["priority"] = json!(resolved.priority);
    match resolved.class_name {
        Some(class) => obj["spec"]["priorityClassName"] = json!(class),
        None => {
            if let Some(spec) = obj["spec"].as_object_mut() {
                spec.remove("priorityClassName");
            }
        }
    }
    Ok(obj)
}

/// Upstream `SetDefaults_PersistentVolume`: pending, reclaim policy Retain,
/// volume mode Filesystem (which volume binding matches claims against).
fn default_pv(mut obj: Value) -> Value {
    if obj.get("spec").is_some_and(Value::is_object) {
        for (f, v) in [("persistentVolumeReclaimPolicy", "Retain"), ("volumeMode", "Filesystem")] {
            if obj["spec"].get(f).is_none_or(Value::is_null) {
                obj["spec"][f] = json!(v);
            }
        }
    }
    if obj.pointer("/status/phase").is_none_or(Value::is_null) {
        if !obj.get("status").is_some_and(Value::is_object) {
            obj["status"] = json!({});
        }
        obj["status"]["phase"] = json!("Pending");
    }
    obj
}

/// Upstream PVC defaulting (volume mode Filesystem, pending) and the
/// DefaultStorageClass admission plugin: a claim that names no class (neither
/// `storageClassName`, even empty, nor the beta annotation) gets the default
/// class, the newest one annotated `is-default-class` (then by name).
fn admit_pvc(mut obj: Value, ctx: &dyn AdmissionContext) -> Value {
    if obj.get("spec").is_some_and(Value::is_object) {
        if obj.pointer("/spec/volumeMode").is_none_or(Value::is_null) {
            obj["spec"]["volumeMode"] = json!("Filesystem");
        }
        let has_class = obj.pointer("/spec/storageClassName").is_some_and(|v| !v.is_null())
            || obj.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").is_some();
        if !has_class {
            let is_default = |sc: &Value| {
                ["storageclass.kubernetes.io~1is-default-class", "storageclass.beta.kubernetes.io~1is-default-class"]
                    .iter()
                    .any(|a| str_at(sc, &format!("/metadata/annotations/{a}")) == Some("true"))
            };
            let classes = ctx.storage_classes();
            let newest = classes.iter().filter(|sc| is_default(sc)).max_by(|a, b| {
                let created = |sc: &Value| str_at(sc, "/metadata/creationTimestamp").unwrap_or_default().to_string();
                let name = |sc: &Value| str_at(sc, "/metadata/name").unwrap_or_default().to_string();
                created(a).cmp(&created(b)).then_with(|| name(b).cmp(&name(a)))
            });
            if let Some(name) = newest.and_then(|sc| str_at(sc, "/metadata/name")) {
                obj["spec"]["storageClassName"] = json!(name);
            }
        }
    }
    if obj.pointer("/status/phase").is_none_or(Value::is_null) {
        if !obj.get("status").is_some_and(Value::is_object) {
            obj["status"] = json!({});
        }
        obj["status"]["phase"] = json!("Pending");
    }
    obj
}

fn default_storage_class(mut obj: Value) -> Value {
    if obj.get("reclaimPolicy").is_none_or(Value::is_null) {
        obj["reclaimPolicy"] = json!("Delete");
    }
    if obj.get("volumeBindingMode").is_none_or(Value::is_null) {
        obj["volumeBindingMode"] = json!("Immediate");
    }
    obj
}

fn decode<T: serde::de::DeserializeOwned>(obj: Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(obj)
        .map_err(|e| ApiError::bad_request(format!("{kind} in version \"v1\" cannot be handled as a {kind}: {e}")))
}

fn encode<T: serde::Serialize>(obj: &T) -> Result<Value, ApiError> {
    serde_json::to_value(obj).map_err(|e| ApiError::internal(format!("encoding failed: {e}")))
}

const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Upstream `core/v1` `PodReasonSchedulingGated`.
pub const POD_REASON_SCHEDULING_GATED: &str = "SchedulingGated";
/// The message upstream's pod strategy gives the gated `PodScheduled` condition.
pub const SCHEDULING_GATED_MESSAGE: &str = "Scheduling is blocked due to non-empty scheduling gates";

/// A pod through kube-apiserver's create path: decoding defaults, the default
/// mutating admission plugins, then the pod strategy's `PrepareForCreate`.
fn admit_pod(obj: Value, ctx: &dyn AdmissionContext) -> Result<Value, ApiError> {
    let name = validation::display_name(&obj);
    let mut pod: Pod = decode(obj, "Pod")?;
    default_pod(&mut pod);
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    limitranger::admit_pod(&mut pod, &ctx.limit_ranges(&namespace));
    let spec = pod.spec.get_or_insert_with(Default::default);
    // ServiceAccount admission (create only).
    spec.service_account_name.get_or_insert_with(|| "default".into());
    default_toleration_seconds(spec);
    admit_pod_priority(&name, spec, ctx)?;
    let node = spec.node_name.as_deref().filter(|n| !n.is_empty()).and_then(|n| ctx.node(n));
    for (k, v) in node.as_deref().map(topology_labels).unwrap_or_default() {
        if let Value::String(v) = v {
            pod.metadata.labels.get_or_insert_with(Default::default).insert(k, v);
        }
    }
    let gated = prepare_pod_for_create(&mut pod);
    let mut out = encode(&pod)?;
    if gated {
        // Added on the JSON so `lastProbeTime` is the explicit null upstream writes.
        out["status"]["conditions"] = json!([{
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": null,
            "lastTransitionTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "reason": POD_REASON_SCHEDULING_GATED,
            "message": SCHEDULING_GATED_MESSAGE,
        }]);
    }
    Ok(out)
}

/// Upstream `core/v1` `SetDefaults_Pod`, `SetDefaults_PodSpec` and
/// `SetDefaults_Container`: what decoding a pod fills in.
fn default_pod(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.scheduler_name.get_or_insert_with(|| "default-scheduler".into());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.enable_service_links.get_or_insert(true);
    spec.security_context.get_or_insert_with(PodSecurityContext::default);
    let host_network = spec.host_network == Some(true);
    let containers = spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut());
    for c in containers {
        c.termination_message_path.get_or_insert_with(|| "/dev/termination-log".into());
        c.termination_message_policy.get_or_insert_with(|| "File".into());
        if c.image_pull_policy.is_none() {
            let image = c.image.as_deref().unwrap_or_default();
            let tag = image.rsplit('/').next().and_then(|last| last.split_once(':')).map(|(_, t)| t);
            let always = !image.contains('@') && matches!(tag, None | Some("latest"));
            c.image_pull_policy = Some(if always { "Always" } else { "IfNotPresent" }.into());
        }
        for p in c.ports.iter_mut().flatten() {
            p.protocol.get_or_insert_with(|| "TCP".into());
            // A host-network pod listens on the node: its ports are host ports
            // (which the NodePorts plugin then accounts).
            if host_network && p.host_port.unwrap_or(0) == 0 {
                p.host_port = Some(p.container_port);
            }
        }
        // Requests default to limits, which is what the scheduler then accounts.
        if let Some(res) = c.resources.as_mut() {
            if let Some(limits) = res.limits.clone() {
                let requests = res.requests.get_or_insert_with(Default::default);
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// Upstream's DefaultTolerationSeconds admission plugin: a pod that does not
/// tolerate the not-ready / unreachable NoExecute taints tolerates them for
/// 300 s. An empty key tolerates every taint, whatever the operator.
fn default_toleration_seconds(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for taint in [NOT_READY_TAINT, UNREACHABLE_TAINT] {
        let tolerated = tolerations.iter().any(|t| {
            let key = t.key.as_deref().unwrap_or_default();
            (key == taint || key.is_empty()) && matches!(t.effect.as_deref().unwrap_or_default(), "" | "NoExecute")
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some(taint.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(300),
                value: None,
            });
        }
    }
}

/// Upstream's Priority admission plugin for a pod being created.
fn admit_pod_priority(
    name: &str,
    spec: &mut k8s_openapi::api::core::v1::PodSpec,
    ctx: &dyn AdmissionContext,
) -> Result<(), ApiError> {
    let resolved = resolve_priority("pods", name, spec.priority_class_name.as_deref(), ctx)?;
    spec.priority_class_name = resolved.class_name;
    if let Some(given) = spec.priority {
        if given != resolved.priority {
            return Err(ApiError::forbidden(
                "pods",
                name,
                &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name", resolved.priority),
            ));
        }
    }
    spec.priority = Some(resolved.priority);
    if let Some(policy) = resolved.preemption_policy {
        if let Some(given) = spec.preemption_policy.as_deref().filter(|g| *g != policy) {
            return Err(ApiError::forbidden(
                "pods",
                name,
                &format!("the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"),
            ));
        }
        spec.preemption_policy = Some(policy);
    }
    Ok(())
}

/// Upstream's pod strategy `PrepareForCreate`: generation 1 (set by the
/// store), status reset to Pending with the QoS class, `matchLabelKeys` /
/// `mismatchLabelKeys` folded into the label selectors they qualify. Returns
/// whether the pod is gated (the caller adds the `SchedulingGated` condition).
fn prepare_pod_for_create(pod: &mut Pod) -> bool {
    let qos = qos_class(pod);
    pod.status = Some(PodStatus { phase: Some("Pending".into()), qos_class: Some(qos.into()), ..Default::default() });
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let Some(spec) = pod.spec.as_mut() else { return false };
    merge_label_keys(spec, &labels);
    spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty())
}

/// Upstream `mutatePodAffinity` (MatchLabelKeysInPodAffinity, GA) and
/// `mutateTopologySpreadConstraints` (MatchLabelKeysInPodTopologySpreadSelectorMerge,
/// on by default): each key the pod has a label for becomes a `key In (value)`
/// (`NotIn` for mismatchLabelKeys) requirement of the term's selector. A nil
/// selector (which matches nothing) stays nil.
fn merge_label_keys(
    spec: &mut k8s_openapi::api::core::v1::PodSpec,
    labels: &std::collections::BTreeMap<String, String>,
) {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    let add = |selector: &mut Option<LabelSelector>, keys: Option<&Vec<String>>, operator: &str| {
        let (Some(sel), Some(keys)) = (selector.as_mut(), keys) else { return };
        for key in keys {
            if let Some(value) = labels.get(key) {
                sel.match_expressions.get_or_insert_with(Vec::new).push(LabelSelectorRequirement {
                    key: key.clone(),
                    operator: operator.into(),
                    values: Some(vec![value.clone()]),
                });
            }
        }
    };
    if let Some(affinity) = spec.affinity.as_mut() {
        let pod_affinity = affinity.pod_affinity.as_mut().map(|a| {
            (
                a.required_during_scheduling_ignored_during_execution.as_mut(),
                a.preferred_during_scheduling_ignored_during_execution.as_mut(),
            )
        });
        let anti = affinity.pod_anti_affinity.as_mut().map(|a| {
            (
                a.required_during_scheduling_ignored_during_execution.as_mut(),
                a.preferred_during_scheduling_ignored_during_execution.as_mut(),
            )
        });
        for (required, preferred) in pod_affinity.into_iter().chain(anti) {
            let weighted = preferred.into_iter().flatten().map(|w| &mut w.pod_affinity_term);
            for term in required.into_iter().flatten().chain(weighted) {
                add(&mut term.label_selector, term.match_label_keys.as_ref(), "In");
                add(&mut term.label_selector, term.mismatch_label_keys.as_ref(), "NotIn");
            }
        }
    }
    for c in spec.topology_spread_constraints.iter_mut().flatten() {
        add(&mut c.label_selector, c.match_label_keys.as_ref(), "In");
    }
}

/// What the Priority admission plugin resolved.
struct ResolvedPriority {
    /// The class named (the global default's name when none was).
    class_name: Option<String>,
    priority: i32,
    /// The class's policy; `PreemptLowerPriority` when no class applies.
    preemption_policy: Option<String>,
}

/// Upstream Priority admission `establishPriority`: the named class, else the
/// global default (the lowest-valued one if several), else priority 0 with
/// `PreemptLowerPriority`.
fn resolve_priority(
    resource: &str,
    object_name: &str,
    class: Option<&str>,
    ctx: &dyn AdmissionContext,
) -> Result<ResolvedPriority, ApiError> {
    let classes = ctx.priority_classes();
    let resolved = |pc: &Value| ResolvedPriority {
        class_name: str_at(pc, "/metadata/name").map(String::from),
        priority: pc.get("value").and_then(Value::as_i64).and_then(|v| i32::try_from(v).ok()).unwrap_or(0),
        preemption_policy: str_at(pc, "/preemptionPolicy").map(String::from),
    };
    match class.filter(|c| !c.is_empty()) {
        Some(name) => {
            classes.iter().find(|pc| str_at(pc, "/metadata/name") == Some(name)).map(|pc| resolved(pc)).ok_or_else(
                || ApiError::forbidden(resource, object_name, &format!("no PriorityClass with name {name} was found")),
            )
        }
        None => Ok(classes
            .iter()
            .filter(|pc| pc.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .min_by_key(|pc| pc.get("value").and_then(Value::as_i64).unwrap_or(0))
            .map(|pc| resolved(pc))
            .unwrap_or(ResolvedPriority {
                class_name: None,
                priority: 0,
                preemption_policy: Some("PreemptLowerPriority".into()),
            })),
    }
}

/// Parses a resource quantity ("100m", "1Gi", "2e3") to a float.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

/// Computes the pod QoS class from container requests and limits.
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in spec.init_containers.iter().flatten().chain(spec.containers.iter()) {
        let res = c.resources.as_ref();
        let req = res.and_then(|r| r.requests.as_ref());
        let lim = res.and_then(|r| r.limits.as_ref());
        for name in ["cpu", "memory"] {
            let r = req.and_then(|m| m.get(name)).and_then(|q| parse_quantity(&q.0));
            let l = lim.and_then(|m| m.get(name)).and_then(|q| parse_quantity(&q.0));
            if r.is_some_and(|v| v != 0.0) || l.is_some_and(|v| v != 0.0) {
                any = true;
            }
            match (r, l) {
                (Some(r), Some(l)) if r == l => {}
                (None, Some(_)) => {}
                _ => guaranteed = false,
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn default_node(obj: Value) -> Result<Value, ApiError> {
    let mut node: Node = decode(obj, "Node")?;
    if let Some(status) = node.status.as_mut() {
        if status.allocatable.is_none() {
            status.allocatable = status.capacity.clone();
        }
    }
    encode(&node)
}

fn default_namespace(mut obj: Value) -> Value {
    let name = str_at(&obj, "/metadata/name").unwrap_or_default().to_string();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    if obj.pointer("/spec/finalizers").is_none() {
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
    }
    obj["status"] = json!({"phase": "Active"});
    obj
}

/// Priority admission: only one PriorityClass may be the global default
/// (on create, and on an update that makes another class the default).
fn only_one_global_default(obj: &Value, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    if obj.get("globalDefault").and_then(Value::as_bool) != Some(true) {
        return Ok(());
    }
    let me = str_at(obj, "/metadata/name").unwrap_or_default();
    let other = ctx.priority_classes().into_iter().find(|pc| {
        pc.get("globalDefault").and_then(Value::as_bool) == Some(true) && str_at(pc, "/metadata/name") != Some(me)
    });
    match other {
        Some(other) => Err(ApiError::forbidden(
            "priorityclasses.scheduling.k8s.io",
            me,
            &format!(
                "PriorityClass {} is already marked as default. Only one default can exist",
                str_at(&other, "/metadata/name").unwrap_or_default()
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoClasses(Vec<Arc<Value>>);
    impl AdmissionContext for NoClasses {
        fn priority_classes(&self) -> Vec<Arc<Value>> {
            self.0.clone()
        }
        fn storage_classes(&self) -> Vec<Arc<Value>> {
            let sc = |name: &str, created: &str, default: &str| {
                Arc::new(json!({"metadata": {"name": name, "creationTimestamp": created,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": default}}}))
            };
            vec![
                sc("old", "2026-01-01T00:00:00Z", "true"),
                sc("new", "2026-01-02T00:00:00Z", "true"),
                sc("newer", "2026-01-03T00:00:00Z", "false"),
            ]
        }
        fn limit_ranges(&self, namespace: &str) -> Vec<Arc<Value>> {
            let lr = json!({"metadata": {"name": "l", "namespace": "limited"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "200m"}}]}});
            if namespace == "limited" {
                vec![Arc::new(lr)]
            } else {
                Vec::new()
            }
        }
        fn node(&self, name: &str) -> Option<Arc<Value>> {
            (name == "zoned").then(|| {
                Arc::new(json!({"metadata": {"name": "zoned", "labels": {"topology.kubernetes.io/zone": "z1",
                    "topology.kubernetes.io/region": "r1", "kubernetes.io/hostname": "zoned"}}}))
            })
        }
    }

    fn ctx() -> NoClasses {
        NoClasses(builtin_priority_classes().into_iter().map(Arc::new).collect())
    }

    #[test]
    fn pod_defaults() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.2",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                "priorityClassName": "system-node-critical"}});
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert_eq!(out["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(out["spec"]["priority"], 2_000_001_000);
        assert_eq!(out["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        assert_eq!(out["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(out["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1");
        assert_eq!(out["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(out["status"], json!({"phase": "Pending", "qosClass": "Guaranteed"}));
    }

    fn with_classes(extra: Vec<Value>) -> NoClasses {
        let mut c = ctx();
        c.0.extend(extra.into_iter().map(Arc::new));
        c
    }

    fn class(name: &str, value: i64, default: bool, policy: &str) -> Value {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": default, "preemptionPolicy": policy})
    }

    fn pod_with(spec: Value) -> Value {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
            "labels": {"app": "web", "ver": "2"}}, "spec": spec})
    }

    #[test]
    fn gated_pod_gets_the_scheduling_gated_condition_at_create() {
        let pod = pod_with(json!({"schedulingGates": [{"name": "example.com/quota"}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let conds = out["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 1);
        let c = &conds[0];
        assert_eq!((c["type"].as_str(), c["status"].as_str()), (Some("PodScheduled"), Some("False")));
        assert_eq!(c["reason"], "SchedulingGated");
        assert_eq!(c["message"], "Scheduling is blocked due to non-empty scheduling gates");
        assert!(c["lastTransitionTime"].is_string() && c["lastProbeTime"].is_null());
        // A client-supplied status never survives create, gated or not.
        let mut pod = pod_with(json!({}));
        pod["status"] = json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]});
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert_eq!(out["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
    }

    #[test]
    fn priority_admission_names_the_default_class_and_checks_the_policy() {
        let classes = with_classes(vec![class("low", 10, true, "Never"), class("lower", 5, true, "Never")]);
        let out = admit_create(ids::pods(), pod_with(json!({})), &classes).unwrap();
        assert_eq!(out["spec"]["priorityClassName"], "lower", "the lowest of two global defaults");
        assert_eq!(out["spec"]["priority"], 5);
        assert_eq!(out["spec"]["preemptionPolicy"], "Never");
        let pod = pod_with(json!({"priorityClassName": "low", "preemptionPolicy": "PreemptLowerPriority"}));
        let err = admit_create(ids::pods(), pod, &classes).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(err.message, "pods \"p\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name");
        let out = admit_create(ids::pods(), pod_with(json!({})), &ctx()).unwrap();
        assert!(out["spec"].get("priorityClassName").is_none(), "no default class: no name");
        assert_eq!(
            (out["spec"]["priority"].as_i64(), out["spec"]["preemptionPolicy"].as_str()),
            (Some(0), Some("PreemptLowerPriority"))
        );
    }

    #[test]
    fn default_toleration_seconds_adds_only_what_is_not_tolerated() {
        let pod = pod_with(json!({"tolerations": [{"operator": "Exists", "effect": "NoExecute"}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert_eq!(out["spec"]["tolerations"].as_array().unwrap().len(), 1, "{}", out["spec"]["tolerations"]);
        let pod = pod_with(json!({"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let tols = out["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(tols.len(), 2);
        assert_eq!(
            tols[1],
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        );
    }

    #[test]
    fn match_label_keys_fold_into_affinity_and_spread_selectors() {
        let term = json!({"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}},
            "matchLabelKeys": ["ver", "missing"], "mismatchLabelKeys": ["app"]});
        let pod = pod_with(json!({
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "matchLabelKeys": ["ver"]}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["ver"]}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let merged = json!([{"key": "ver", "operator": "In", "values": ["2"]}, {"key": "app", "operator": "NotIn", "values": ["web"]}]);
        let anti = &out["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchExpressions"],
            merged
        );
        assert_eq!(
            anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["labelSelector"]
                ["matchExpressions"],
            merged
        );
        assert_eq!(
            anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["matchLabelKeys"],
            json!(["ver", "missing"]),
            "the keys stay"
        );
        let nil_selector = &out["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert!(nil_selector.get("labelSelector").is_none(), "a nil selector matches nothing and stays nil");
        assert_eq!(
            out["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"],
            json!([{"key": "ver", "operator": "In", "values": ["2"]}])
        );
    }

    #[test]
    fn host_network_ports_are_host_ports() {
        let mut pod = pod_with(json!({"hostNetwork": true}));
        pod["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}]);
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let ports = &out["spec"]["containers"][0]["ports"];
        assert_eq!((ports[0]["hostPort"].as_i64(), ports[1]["hostPort"].as_i64()), (Some(8080), Some(9091)));
        let mut pod = pod_with(json!({}));
        pod["spec"]["containers"][0]["ports"] = json!([{"containerPort": 8080}]);
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert!(out["spec"]["containers"][0]["ports"][0].get("hostPort").is_none());
    }

    #[test]
    fn pods_written_with_a_node_get_its_topology_labels() {
        let out = admit_create(ids::pods(), pod_with(json!({"nodeName": "zoned"})), &ctx()).unwrap();
        let labels = &out["metadata"]["labels"];
        assert_eq!(
            (labels["topology.kubernetes.io/zone"].as_str(), labels["topology.kubernetes.io/region"].as_str()),
            (Some("z1"), Some("r1"))
        );
        assert!(labels.get("kubernetes.io/hostname").is_none() && labels["app"] == "web");
        let out = admit_create(ids::pods(), pod_with(json!({"nodeName": "elsewhere"})), &ctx()).unwrap();
        assert!(out["metadata"]["labels"].get("topology.kubernetes.io/zone").is_none(), "unknown node: nothing");
    }

    #[test]
    fn claims_get_the_newest_default_class_and_volumes_their_defaults() {
        let pvc = |spec: Value| {
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c", "namespace": "default"}, "spec": spec})
        };
        let base = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        let out =
            admit_create(crate::resources::by_kind("v1", "PersistentVolumeClaim").unwrap(), pvc(base.clone()), &ctx())
                .unwrap();
        assert_eq!(out["spec"]["storageClassName"], "new");
        assert_eq!(
            (out["spec"]["volumeMode"].as_str(), out["status"]["phase"].as_str()),
            (Some("Filesystem"), Some("Pending"))
        );
        let mut explicit = base.clone();
        explicit["storageClassName"] = json!("");
        let out =
            admit_create(crate::resources::by_kind("v1", "PersistentVolumeClaim").unwrap(), pvc(explicit), &ctx())
                .unwrap();
        assert_eq!(out["spec"]["storageClassName"], "", "an explicit empty class means none");
        let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}});
        let out = admit_create(crate::resources::by_kind("v1", "PersistentVolume").unwrap(), pv, &ctx()).unwrap();
        assert_eq!(
            (out["spec"]["volumeMode"].as_str(), out["spec"]["persistentVolumeReclaimPolicy"].as_str()),
            (Some("Filesystem"), Some("Retain"))
        );
        assert_eq!(out["status"]["phase"], "Pending");
    }

    #[test]
    fn limit_range_defaults_reach_the_pod_and_its_qos() {
        let mut pod = pod_with(json!({}));
        pod["metadata"]["namespace"] = json!("limited");
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let res = &out["spec"]["containers"][0]["resources"];
        assert_eq!(res, &json!({"limits": {"cpu": "200m"}, "requests": {"cpu": "200m"}}));
        assert_eq!(out["status"]["qosClass"], "Burstable");
        let out = admit_create(ids::pods(), pod_with(json!({})), &ctx()).unwrap();
        assert!(out["spec"]["containers"][0].get("resources").is_none(), "no LimitRange, no defaults");
    }

    #[test]
    fn pod_group_priority_is_resolved_at_create() {
        let pg = |spec: Value| {
            let mut spec = spec;
            spec["schedulingPolicy"] = json!({"gang": {"minCount": 2}});
            json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "default"}, "spec": spec})
        };
        let rid = crate::resources::by_kind("scheduling.k8s.io/v1alpha2", "PodGroup").unwrap();
        let classes = with_classes(vec![class("batch", 100, false, "PreemptLowerPriority")]);
        let out = admit_create(rid, pg(json!({"priorityClassName": "batch"})), &classes).unwrap();
        assert_eq!(
            (out["spec"]["priority"].as_i64(), out["spec"]["priorityClassName"].as_str()),
            (Some(100), Some("batch"))
        );
        let out = admit_create(rid, pg(json!({})), &classes).unwrap();
        assert_eq!(out["spec"]["priority"], 0);
        assert!(out["spec"].get("priorityClassName").is_none());
        let classes = with_classes(vec![class("dflt", 7, true, "PreemptLowerPriority")]);
        let out = admit_create(rid, pg(json!({})), &classes).unwrap();
        assert_eq!(
            (out["spec"]["priority"].as_i64(), out["spec"]["priorityClassName"].as_str()),
            (Some(7), Some("dflt"))
        );
        let err = admit_create(rid, pg(json!({"priorityClassName": "nope"})), &classes).unwrap_err();
        assert_eq!(
            err.message,
            "podgroups.scheduling.k8s.io \"g\" is forbidden: no PriorityClass with name nope was found"
        );
        let err = admit_create(rid, pg(json!({"priority": 3})), &classes).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (403, "podgroups.scheduling.k8s.io \"g\" is forbidden: priority set in the pod group (3) must match the priority computed (7) based on the priority class set in the spec"));
    }

    #[test]
    fn pod_updates_keep_admitted_priority_and_tolerations() {
        let created =
            admit_create(ids::pods(), pod_with(json!({"priorityClassName": "system-node-critical"})), &ctx()).unwrap();
        let mut new = created.clone();
        for f in ["priority", "preemptionPolicy", "tolerations"] {
            new["spec"].as_object_mut().unwrap().remove(f);
        }
        admit_update(ids::pods(), &created, &mut new, &ctx()).unwrap();
        assert_eq!(new["spec"], created["spec"]);
    }

    #[test]
    fn a_second_global_default_is_forbidden_on_create_and_update() {
        let classes = with_classes(vec![class("a", 1, true, "PreemptLowerPriority")]);
        let err =
            admit_create(ids::priority_classes(), class("b", 2, true, "PreemptLowerPriority"), &classes).unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (403, "priorityclasses.scheduling.k8s.io \"b\" is forbidden: PriorityClass a is already marked as default. Only one default can exist"));
        let old = class("b", 2, false, "PreemptLowerPriority");
        let mut new = class("b", 2, true, "PreemptLowerPriority");
        assert_eq!(admit_update(ids::priority_classes(), &old, &mut new, &classes).unwrap_err().code, 403);
        let mut same = class("a", 1, true, "PreemptLowerPriority");
        admit_update(ids::priority_classes(), &same.clone(), &mut same, &classes).unwrap();
    }

    #[test]
    fn generation_is_tracked_by_the_kinds_upstream_tracks_it_for() {
        let by = |av: &str, k: &str| def(crate::resources::by_kind(av, k).unwrap());
        assert!(tracks_generation(by("v1", "Pod")) && tracks_generation(by("apps/v1", "Deployment")));
        assert!(tracks_generation(by("scheduling.k8s.io/v1", "PriorityClass")));
        for (av, k) in [
            ("v1", "Node"),
            ("v1", "Service"),
            ("scheduling.k8s.io/v1alpha2", "PodGroup"),
            ("resource.k8s.io/v1", "ResourceClaim"),
        ] {
            assert!(!tracks_generation(by(av, k)), "{k}");
        }
        let eps = by("discovery.k8s.io/v1", "EndpointSlice");
        let a = json!({"metadata": {"labels": {"x": "1"}}, "endpoints": []});
        assert!(!bumps_generation(eps, &a, &a));
        assert!(bumps_generation(eps, &a, &json!({"metadata": {"labels": {"x": "2"}}, "endpoints": []})));
    }

    #[test]
    fn pod_validation_names_fields() {
        let pod = json!({"metadata": {"name": "Bad_Name", "namespace": "default"}, "spec": {"containers": [{"name": "c"}, {"image": "x"}]}});
        let err = admit_create(ids::pods(), pod, &ctx()).unwrap_err();
        assert_eq!(err.code, 422);
        let fields: Vec<&str> = err.causes().iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["metadata.name", "spec.containers[0].image", "spec.containers[1].name"]);
        let err =
            admit_create(ids::pods(), json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {}}), &ctx())
                .unwrap_err();
        assert_eq!(err.message, "Pod \"p\" is invalid: spec.containers: Required value");
    }

    #[test]
    fn unknown_priority_class_is_forbidden() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"priorityClassName": "nope", "containers": [{"name": "c", "image": "i"}]}});
        let err = admit_create(ids::pods(), pod, &ctx()).unwrap_err();
        assert_eq!(err.code, 403);
        assert!(err.message.contains("no PriorityClass with name nope was found"));
    }

    #[test]
    fn quantities_and_qos() {
        assert_eq!(parse_quantity("100m"), Some(0.1));
        assert_eq!(parse_quantity("1Gi"), Some(1073741824.0));
        assert_eq!(parse_quantity("2e3"), Some(2000.0));
        assert_eq!(parse_quantity("x"), None);
        let pod: Pod = serde_json::from_value(
            json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
        )
        .unwrap();
        assert_eq!(qos_class(&pod), "Burstable");
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [{"name": "c"}]}})).unwrap();
        assert_eq!(qos_class(&pod), "BestEffort");
    }
}
