//! What the scheduler keeps of the pods and nodes it watches: the fields some plugin, the
//! queue, the cache, the failure handler, the claim controller or `/metrics/resources` reads,
//! and nothing else. A real cluster's pod is mostly fields no scheduler reads (managedFields,
//! env, probes, mounts, configMap and service-account volumes, container statuses, IPs), and a
//! node mostly its image list and kubelet details; keeping them cost ten times the memory.
//!
//! Pods are decoded into the scheduler's own type ([`ksched_framework::pod::Pod`]), which has
//! only the fields that are read: a plugin cannot read a dropped field, because it is not there
//! to compile against. [`project_pod`] then drops what the type keeps but a given pod does not
//! need (volumes no plugin looks at, container ports without a host port, conditions and
//! container statuses nothing reads, owner references but the controller's). Nodes keep the
//! API's type; [`project_node`] destructures every field, so a field k8s-openapi adds does not
//! compile until it is listed here as kept or dropped. `tests/integration/projection.rs` runs
//! the real plugins on randomised clusters with whole and projected objects (every dropped
//! field filled with values that would change an outcome if read) and asserts identical
//! placements, scores, messages, cluster events and queueing hints.
//!
//! Extenders get the pod as JSON, and out-of-tree plugins may read anything, so with either
//! the scheduler keeps whole objects ([`Projection::Full`]: pods keep the whole API object
//! beside the kept fields, in [`Pod::object`]; only managedFields go, as upstream drops them).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerImage, ContainerPort, PodCondition, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use ksched_framework::node::Node;
use ksched_framework::pod::{share_containers, Container, ContainerStatus, PackedMeta, Pod, PodSpec, PodStatus};

use crate::cluster_events::nano_value;

/// How much of each object the scheduler keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Projection {
    /// What the in-tree plugins and the scheduler read ([`project_pod`], [`project_node`]).
    #[default]
    Scheduling,
    /// Everything but `metadata.managedFields` (extenders or out-of-tree plugins configured).
    Full,
}

impl Projection {
    /// [`Projection::Full`] when extenders are configured or `registry` has plugins that are not
    /// in-tree (they may read any field); [`Projection::Scheduling`] otherwise.
    pub fn for_scheduler(has_extenders: bool, registry: &ksched_framework::Registry) -> Self {
        let in_tree = ksched_plugins::in_tree_registry();
        let foreign = registry.names().any(|n| in_tree.get(n).is_none());
        if has_extenders || foreign {
            Projection::Full
        } else {
            Projection::Scheduling
        }
    }

    /// The pod as the scheduler keeps it. Under [`Projection::Full`] the watchers have already
    /// put the whole object beside it ([`Pod::with_object`]), and it is kept as it is.
    pub fn pod(self, pod: Pod) -> Pod {
        match self {
            // Copied once more so that what is kept is allocated together: moved out of the
            // decoded object, the kept strings and maps stay scattered between the holes the
            // dropped fields left, and the allocator cannot return those pages. Measured with
            // `ksched bench --mode memory` (5000 nodes): 533 MiB instead of 565 at 30,000 pods,
            // 418 instead of 446 on a cold start; in-process SchedulingBasic throughput did not
            // change (five interleaved runs each).
            Projection::Scheduling => project_pod(pod).clone(),
            Projection::Full => pod,
        }
    }

    /// The node as the scheduler keeps it, and its images (the cache keeps those apart).
    pub fn node(self, mut node: Node) -> (Node, Vec<ContainerImage>) {
        match self {
            Projection::Scheduling => project_node(node),
            // The whole object (sent to extenders) keeps its images.
            Projection::Full => {
                let images = node.status.as_mut().and_then(|s| s.images.take()).unwrap_or_default();
                (node, images)
            }
        }
    }
}

/// The elements of `v` that `keep` keeps, in an allocation of their size (an in-place filter
/// would keep the original capacity: three dropped volumes of 3 KiB each for one kept), or `None`
/// when none is left.
fn kept<T>(v: Option<Vec<T>>, keep: impl FnMut(&T) -> bool) -> Option<Vec<T>> {
    let mut v = v?;
    v.retain(keep);
    v.shrink_to_fit();
    (!v.is_empty()).then_some(v)
}

/// Pod condition types something reads: the failure handler and status writers
/// (`PodScheduled`, of pending pods only), preemption (`DisruptionTarget`), in-place resize
/// (`PodResizePending`).
pub const KEPT_POD_CONDITIONS: [&str; 3] = ["PodScheduled", "DisruptionTarget", "PodResizePending"];

/// Whether a pod keeps condition `type_`. `PodScheduled` is read only while the pod waits (the
/// failure handler compares its message before writing it again); once the pod has a node it
/// never changes, and it was an eighth of what a bound pod cost (the condition, its strings and
/// the list holding it).
fn condition_is_kept(type_: &str, assigned: bool) -> bool {
    KEPT_POD_CONDITIONS.contains(&type_) && !(assigned && type_ == "PodScheduled")
}

/// Volume sources no plugin looks at: they are node-local or configuration, never a disk that
/// can conflict, count against a limit, bind or pin a zone.
fn volume_is_kept(v: &Volume) -> bool {
    !(v.config_map.is_some()
        || v.secret.is_some()
        || v.empty_dir.is_some()
        || v.projected.is_some()
        || v.downward_api.is_some()
        || v.host_path.is_some()
        || v.git_repo.is_some())
}

fn project_meta(meta: ObjectMeta, keep_annotations: bool, keep_controller: bool) -> ObjectMeta {
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds: _,
        deletion_timestamp,
        finalizers: _,
        generate_name: _,
        generation,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version,
        self_link: _,
        uid,
    } = meta;
    // Default spreading finds the pod's workload through its controller reference only.
    let controller = owner_references
        .filter(|_| keep_controller)
        .and_then(|refs| refs.into_iter().find(|o| o.controller == Some(true)))
        .map(|o| {
            let OwnerReference { api_version, block_owner_deletion: _, controller, kind, name, uid } = o;
            vec![OwnerReference { api_version, block_owner_deletion: None, controller, kind, name, uid }]
        });
    ObjectMeta {
        annotations: annotations.filter(|_| keep_annotations),
        creation_timestamp,
        deletion_timestamp,
        generation,
        labels,
        name,
        namespace,
        owner_references: controller,
        resource_version,
        uid,
        ..Default::default()
    }
}

/// Whether [`project_container`] would change `c`.
fn needs_projection(c: &Container) -> bool {
    c.ports.iter().flatten().any(|p| p.host_port.is_none() || p.name.is_some())
}

/// The projected containers, shared like decoded ones; the same list when nothing changes.
fn project_containers(cs: Arc<[Container]>) -> Arc<[Container]> {
    if !cs.iter().any(needs_projection) {
        return cs;
    }
    share_containers(cs.iter().cloned().map(project_container).collect())
}

fn project_container(c: Container) -> Container {
    let Container { image, name, ports, resources, restart_policy, restart_policy_rules } = c;
    // Only host ports take room on a node (NodePorts, PodInfo's host ports).
    let ports: Option<Vec<ContainerPort>> = ports.map(|ps| {
        ps.into_iter().filter(|p| p.host_port.is_some()).map(|p| ContainerPort { name: None, ..p }).collect::<Vec<_>>()
    });
    Container { image, name, ports, resources, restart_policy, restart_policy_rules }
}

use ksched_framework::pod::ResourceList;

/// True when every amount of `lists` is also in `spec`, no larger: the effective request, the
/// largest of spec and these, is then the spec's (and no key is added, which cluster events
/// would see as a change).
fn within(spec: Option<&ResourceList>, lists: [Option<&ResourceList>; 2]) -> bool {
    lists.into_iter().flatten().flatten().all(|(k, q)| {
        let s = spec.and_then(|s| s.get(k));
        match (s.and_then(|s| nano_value(&s.0)), nano_value(&q.0)) {
            (Some(s), Some(q)) => q <= s,
            _ => false,
        }
    })
}

/// A container status matters only while it reports resources (in-place resize) that exceed
/// the spec's requests: requests are the larger of spec, actuated and allocated (or, for an
/// infeasible resize, of the latter two). The kubelet reports them for every running container,
/// and almost always equal to the spec.
fn project_container_status(
    cs: ContainerStatus,
    spec_requests: &dyn Fn(&str) -> Option<ResourceList>,
    infeasible: bool,
) -> Option<ContainerStatus> {
    let ContainerStatus { allocated_resources, name, resources } = cs;
    let actuated = resources.as_ref()?.requests.as_ref();
    if !infeasible && within(spec_requests(&name).as_ref(), [actuated, allocated_resources.as_ref()]) {
        return None;
    }
    Some(ContainerStatus { allocated_resources, name, resources })
}

fn project_pod_spec(spec: PodSpec) -> PodSpec {
    let PodSpec {
        affinity,
        containers,
        host_network,
        host_users,
        init_containers,
        node_name,
        node_selector,
        overhead,
        preemption_policy,
        priority,
        resource_claims,
        resources,
        scheduler_name,
        scheduling_gates,
        scheduling_group,
        tolerations,
        topology_spread_constraints,
        volumes,
    } = spec;
    PodSpec {
        affinity,
        containers: project_containers(containers),
        host_network,
        host_users,
        init_containers: init_containers.map(|cs| cs.into_iter().map(project_container).collect()),
        node_name,
        node_selector,
        overhead,
        preemption_policy,
        priority,
        resource_claims,
        resources,
        scheduler_name,
        scheduling_gates,
        scheduling_group,
        tolerations,
        topology_spread_constraints,
        volumes: kept(volumes, volume_is_kept),
    }
}

fn project_pod_status(status: PodStatus, spec: Option<&PodSpec>) -> PodStatus {
    let PodStatus {
        allocated_resources,
        conditions,
        container_statuses,
        extended_resource_claim_status,
        init_container_statuses,
        nominated_node_name,
        phase,
        resize,
        resource_claim_statuses,
        resources,
        start_time,
    } = status;
    let infeasible = conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodResizePending")
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
    let spec_requests = |name: &str| {
        let containers = spec.into_iter().flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
        containers.filter(|c| c.name == name).find_map(|c| c.resources.as_ref()?.requests.clone())
    };
    let statuses = |s: Option<Vec<ContainerStatus>>| {
        let s = s.map(|s| s.into_iter().filter_map(|cs| project_container_status(cs, &spec_requests, infeasible)));
        kept(s.map(Iterator::collect), |_| true)
    };
    let assigned = spec.is_some_and(|s| s.node_name.is_some());
    let conditions: Option<Vec<PodCondition>> =
        kept(conditions, |c: &PodCondition| condition_is_kept(&c.type_, assigned));
    PodStatus {
        allocated_resources,
        conditions,
        container_statuses: statuses(container_statuses),
        extended_resource_claim_status,
        init_container_statuses: statuses(init_container_statuses),
        nominated_node_name,
        phase,
        resize,
        resource_claim_statuses,
        resources,
        start_time,
    }
}

/// The pod with only what scheduling reads (see the module docs).
pub fn project_pod(pod: Pod) -> Pod {
    let Pod { metadata, spec, status, object: _ } = pod;
    let spec = spec.map(project_pod_spec);
    let status = status.map(|s| project_pod_status(s, spec.as_ref()));
    let (meta, labels) = metadata.into_parts();
    Pod { metadata: PackedMeta::from_parts(project_meta(meta, false, true), labels), spec, status, object: None }
}

/// The node with only what scheduling reads, and its images, which the cache keeps (interned,
/// once per cluster) instead of the node object.
pub fn project_node(node: Node) -> (Node, Vec<ContainerImage>) {
    // The kept type already dropped every field scheduling does not read while it was decoded
    // (conditions keep only their type and status, which is what cluster events compare).
    let Node { metadata, spec, mut status, object: _ } = node;
    let images = status.as_mut().and_then(|s| s.images.take()).unwrap_or_default();
    let (meta, labels) = metadata.into_parts();
    // Node annotations stay: their changes are a cluster event (UpdateNodeAnnotation).
    (
        Node { metadata: PackedMeta::from_parts(project_meta(meta, true, false), labels), spec, status, object: None },
        images,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Every field path (objects descended, arrays by their first element) of a JSON value.
    fn paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    out.push(p.clone());
                    paths(v, &p, out);
                }
            }
            Value::Array(a) => {
                for v in a {
                    paths(v, &format!("{prefix}[]"), out);
                }
            }
            _ => {}
        }
    }

    fn kept_paths(mut v: Value) -> Vec<String> {
        // The serializer writes the type's apiVersion and kind; they are not fields.
        if let Some(m) = v.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        let mut out = Vec::new();
        paths(&v, "", &mut out);
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn pod_keeps_exactly_what_scheduling_reads() {
        let container = |name: &str| {
            json!({"name": name, "image": "img", "command": ["x"], "args": ["y"], "env": [{"name": "A", "value": "1"}],
                "envFrom": [{"configMapRef": {"name": "c"}}], "imagePullPolicy": "Always",
                "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 81, "hostPort": 8081, "hostIP": "1.2.3.4", "protocol": "UDP", "name": "h"}],
                "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}, "claims": [{"name": "gpu"}]},
                "restartPolicy": "Always", "restartPolicyRules": [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}],
                "livenessProbe": {"exec": {"command": ["true"]}}, "readinessProbe": {"exec": {"command": ["true"]}},
                "startupProbe": {"exec": {"command": ["true"]}}, "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                "securityContext": {"privileged": true}, "stdin": true, "stdinOnce": true, "tty": true,
                "terminationMessagePath": "/t", "terminationMessagePolicy": "File",
                "volumeDevices": [{"name": "d", "devicePath": "/d"}], "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                "workingDir": "/w"})
        };
        let status = |name: &str, resources: bool| {
            let mut s = json!({"name": name, "image": "img", "imageID": "id", "containerID": "cid", "ready": true,
                "restartCount": 3, "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                "lastState": {}, "user": {"linux": {"uid": 1, "gid": 1}}, "stopSignal": "SIGTERM",
                "volumeMounts": [{"name": "v", "mountPath": "/v"}], "allocatedResourcesStatus": [{"name": "x", "resources": []}]});
            if resources {
                s["resources"] = json!({"requests": {"cpu": "2"}});
                s["allocatedResources"] = json!({"cpu": "2"});
            }
            s
        };
        let metadata = json!({"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 2,
                "labels": {"app": "a"}, "annotations": {"x": "y"}, "creationTimestamp": "2026-01-01T00:00:00Z",
                "deletionTimestamp": "2026-01-01T00:00:01Z", "deletionGracePeriodSeconds": 30, "finalizers": ["f"],
                "generateName": "p-", "selfLink": "/x",
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}],
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "o1"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "o2", "controller": true, "blockOwnerDeletion": true}]});
        let volumes = json!([
                    {"name": "pvc", "persistentVolumeClaim": {"claimName": "c"}},
                    {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "csi", "csi": {"driver": "d"}},
                    {"name": "img", "image": {"reference": "r"}},
                    {"name": "pd", "gcePersistentDisk": {"pdName": "pd"}},
                    {"name": "cm", "configMap": {"name": "c"}}, {"name": "sec", "secret": {"secretName": "s"}},
                    {"name": "ed", "emptyDir": {}}, {"name": "pr", "projected": {"sources": []}},
                    {"name": "dw", "downwardAPI": {}}, {"name": "hp", "hostPath": {"path": "/"}},
                    {"name": "git", "gitRepo": {"repository": "r"}}]);
        let spec = json!({
                "containers": [container("c")], "initContainers": [container("i")],
                "ephemeralContainers": [{"name": "e", "image": "dbg"}],
                "activeDeadlineSeconds": 5, "automountServiceAccountToken": true, "dnsConfig": {"nameservers": ["1.1.1.1"]},
                "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "hostAliases": [{"ip": "1.2.3.4", "hostnames": ["h"]}],
                "hostIPC": true, "hostNetwork": true, "hostPID": true, "hostUsers": false, "hostname": "h", "hostnameOverride": "o",
                "imagePullSecrets": [{"name": "s"}]});
        let more = json!({"nodeName": "n", "nodeSelector": {"k": "v"}, "os": {"name": "linux"},
                "overhead": {"cpu": "1m"}, "preemptionPolicy": "Never", "priority": 5, "priorityClassName": "pc",
                "readinessGates": [{"conditionType": "c"}], "resourceClaims": [{"name": "gpu", "resourceClaimName": "claim"}],
                "resources": {"requests": {"cpu": "3"}}, "restartPolicy": "Always", "runtimeClassName": "rc",
                "schedulerName": "s", "schedulingGates": [{"name": "g"}], "schedulingGroup": {"podGroupName": "pg"},
                "securityContext": {"runAsUser": 1}, "serviceAccount": "sa", "serviceAccountName": "sa",
                "setHostnameAsFQDN": true, "shareProcessNamespace": true, "subdomain": "sd", "terminationGracePeriodSeconds": 9,
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
                "volumes": volumes});
        let mut spec = spec;
        spec.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
        let status = json!({
                "phase": "Running", "message": "m", "reason": "r", "qosClass": "Burstable", "observedGeneration": 2,
                "hostIP": "1.1.1.1", "hostIPs": [{"ip": "1.1.1.1"}], "podIP": "2.2.2.2", "podIPs": [{"ip": "2.2.2.2"}],
                "startTime": "2026-01-01T00:00:00Z", "nominatedNodeName": "n2", "resize": "InProgress",
                "resources": {"requests": {"cpu": "3"}}, "allocatedResources": {"cpu": "3"},
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1"},
                    {"type": "DisruptionTarget", "status": "True"},
                    {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
                "containerStatuses": [status("c", true), status("gone", false)],
                "initContainerStatuses": [status("i", false)],
                "ephemeralContainerStatuses": [status("e", false)],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "claim"}],
                "extendedResourceClaimStatus": {"resourceClaimName": "x", "requestMappings": []},
                "nodeAllocatableResourceClaimStatuses": [{"resourceClaimName": "x"}]});
        let whole = json!({"metadata": metadata, "spec": spec, "status": status});
        // The watchers decode straight into the kept type; the in-process cluster converts the
        // API's type. Both keep the same.
        let pod: Pod = serde_json::from_value(whole.clone()).unwrap();
        let api: k8s_openapi::api::core::v1::Pod = serde_json::from_value(whole).unwrap();
        assert_eq!(project_pod(Pod::from(api)), project_pod(pod.clone()));
        let projected = serde_json::to_value(project_pod(pod)).unwrap();
        let expected = [
            "metadata",
            "metadata.creationTimestamp",
            "metadata.deletionTimestamp",
            "metadata.generation",
            "metadata.labels",
            "metadata.labels.app",
            "metadata.name",
            "metadata.namespace",
            "metadata.ownerReferences",
            "metadata.ownerReferences[].apiVersion",
            "metadata.ownerReferences[].controller",
            "metadata.ownerReferences[].kind",
            "metadata.ownerReferences[].name",
            "metadata.ownerReferences[].uid",
            "metadata.resourceVersion",
            "metadata.uid",
            "spec",
            "spec.affinity",
            "spec.affinity.nodeAffinity",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            "spec.containers",
            "spec.containers[].image",
            "spec.containers[].name",
            "spec.containers[].ports",
            "spec.containers[].ports[].containerPort",
            "spec.containers[].ports[].hostIP",
            "spec.containers[].ports[].hostPort",
            "spec.containers[].ports[].protocol",
            "spec.containers[].resources",
            "spec.containers[].resources.claims",
            "spec.containers[].resources.claims[].name",
            "spec.containers[].resources.limits",
            "spec.containers[].resources.limits.memory",
            "spec.containers[].resources.requests",
            "spec.containers[].resources.requests.cpu",
            "spec.containers[].restartPolicy",
            "spec.containers[].restartPolicyRules",
            "spec.containers[].restartPolicyRules[].action",
            "spec.containers[].restartPolicyRules[].exitCodes",
            "spec.containers[].restartPolicyRules[].exitCodes.operator",
            "spec.containers[].restartPolicyRules[].exitCodes.values",
            "spec.hostNetwork",
            "spec.hostUsers",
            "spec.initContainers",
            "spec.initContainers[].image",
            "spec.initContainers[].name",
            "spec.initContainers[].ports",
            "spec.initContainers[].ports[].containerPort",
            "spec.initContainers[].ports[].hostIP",
            "spec.initContainers[].ports[].hostPort",
            "spec.initContainers[].ports[].protocol",
            "spec.initContainers[].resources",
            "spec.initContainers[].resources.claims",
            "spec.initContainers[].resources.claims[].name",
            "spec.initContainers[].resources.limits",
            "spec.initContainers[].resources.limits.memory",
            "spec.initContainers[].resources.requests",
            "spec.initContainers[].resources.requests.cpu",
            "spec.initContainers[].restartPolicy",
            "spec.initContainers[].restartPolicyRules",
            "spec.initContainers[].restartPolicyRules[].action",
            "spec.initContainers[].restartPolicyRules[].exitCodes",
            "spec.initContainers[].restartPolicyRules[].exitCodes.operator",
            "spec.initContainers[].restartPolicyRules[].exitCodes.values",
            "spec.nodeName",
            "spec.nodeSelector",
            "spec.nodeSelector.k",
            "spec.overhead",
            "spec.overhead.cpu",
            "spec.preemptionPolicy",
            "spec.priority",
            "spec.resourceClaims",
            "spec.resourceClaims[].name",
            "spec.resourceClaims[].resourceClaimName",
            "spec.resources",
            "spec.resources.requests",
            "spec.resources.requests.cpu",
            "spec.schedulerName",
            "spec.schedulingGates",
            "spec.schedulingGates[].name",
            "spec.schedulingGroup",
            "spec.schedulingGroup.podGroupName",
            "spec.tolerations",
            "spec.tolerations[].key",
            "spec.tolerations[].operator",
            "spec.topologySpreadConstraints",
            "spec.topologySpreadConstraints[].maxSkew",
            "spec.topologySpreadConstraints[].topologyKey",
            "spec.topologySpreadConstraints[].whenUnsatisfiable",
            "spec.volumes",
            "spec.volumes[].csi",
            "spec.volumes[].csi.driver",
            "spec.volumes[].ephemeral",
            "spec.volumes[].ephemeral.volumeClaimTemplate",
            "spec.volumes[].ephemeral.volumeClaimTemplate.spec",
            "spec.volumes[].gcePersistentDisk",
            "spec.volumes[].gcePersistentDisk.pdName",
            "spec.volumes[].image",
            "spec.volumes[].image.reference",
            "spec.volumes[].name",
            "spec.volumes[].persistentVolumeClaim",
            "spec.volumes[].persistentVolumeClaim.claimName",
            "status",
            "status.allocatedResources",
            "status.allocatedResources.cpu",
            "status.conditions",
            // PodScheduled, the one condition with a message, went with the binding.
            "status.conditions[].reason",
            "status.conditions[].status",
            "status.conditions[].type",
            "status.containerStatuses",
            "status.containerStatuses[].allocatedResources",
            "status.containerStatuses[].allocatedResources.cpu",
            "status.containerStatuses[].name",
            "status.containerStatuses[].resources",
            "status.containerStatuses[].resources.requests",
            "status.containerStatuses[].resources.requests.cpu",
            "status.extendedResourceClaimStatus",
            "status.extendedResourceClaimStatus.requestMappings",
            "status.extendedResourceClaimStatus.resourceClaimName",
            "status.nominatedNodeName",
            "status.phase",
            "status.resize",
            "status.resourceClaimStatuses",
            "status.resourceClaimStatuses[].name",
            "status.resourceClaimStatuses[].resourceClaimName",
            "status.resources",
            "status.resources.requests",
            "status.resources.requests.cpu",
            "status.startTime",
        ];
        assert_eq!(kept_paths(projected.clone()), expected);
        // Only the controller reference, only host ports, only statuses reporting resources,
        // only the conditions something reads (in their order).
        assert_eq!(projected["metadata"]["ownerReferences"][0]["uid"], "o2");
        assert_eq!(
            projected["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 81, "hostPort": 8081, "hostIP": "1.2.3.4", "protocol": "UDP"}])
        );
        assert_eq!(projected["status"]["containerStatuses"].as_array().unwrap().len(), 1);
        let types: Vec<&str> =
            projected["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["DisruptionTarget", "PodResizePending"], "the pod is bound: PodScheduled goes");
        let names: Vec<&str> =
            projected["spec"]["volumes"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["pvc", "eph", "csi", "img", "pd"]);
    }

    #[test]
    fn pods_of_one_workload_share_their_projected_containers() {
        let pod = |name: &str, host_port: Option<i32>| -> Pod {
            let mut port = json!({"name": "http", "containerPort": 8080, "protocol": "TCP"});
            if let Some(h) = host_port {
                port["hostPort"] = json!(h);
            }
            project_pod(
                serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": [
                    {"name": "app", "image": "app:1", "ports": [port], "env": [{"name": "POD", "value": name}]}]}}))
                .unwrap(),
            )
        };
        let containers = |p: &Pod| p.spec.as_ref().unwrap().containers.clone();
        let (a, b) = (pod("a", None), pod("b", None));
        assert!(Arc::ptr_eq(&containers(&a), &containers(&b)), "the projection keeps them shared");
        assert_eq!(containers(&a)[0].ports.as_deref(), Some(&[][..]), "ports without a host port go");
        let (c, d) = (pod("c", Some(80)), pod("d", Some(80)));
        assert!(Arc::ptr_eq(&containers(&c), &containers(&d)));
        assert!(!Arc::ptr_eq(&containers(&a), &containers(&c)));
        assert_eq!(containers(&c)[0].ports.as_ref().unwrap()[0].host_port, Some(80));
    }

    #[test]
    fn pod_scheduled_stays_while_the_pod_waits_and_goes_once_it_is_bound() {
        let pod = |node_name: Option<&str>| -> Pod {
            let mut spec = json!({"containers": [{"name": "a"}]});
            if let Some(n) = node_name {
                spec["nodeName"] = json!(n);
            }
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec,
                "status": {"conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"},
                    {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}}))
            .unwrap()
        };
        let types = |p: Pod| -> Vec<String> {
            project_pod(p).status.unwrap().conditions.unwrap_or_default().into_iter().map(|c| c.type_).collect()
        };
        assert_eq!(types(pod(None)), ["PodScheduled", "DisruptionTarget"]);
        assert_eq!(types(pod(Some("n1"))), ["DisruptionTarget"]);
        // What the failure handler reads of a waiting pod is still there: an unchanged message
        // is not written again.
        let waiting = project_pod(pod(None));
        assert_eq!(crate::scheduler::pod_scheduled_condition_patch(&waiting, "Unschedulable", "0/3 nodes", None), None);
    }

    #[test]
    fn container_statuses_go_unless_they_raise_a_request() {
        let pod = |statuses: Value, conditions: Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"},
                "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                                        {"name": "b"}]},
                "status": {"containerStatuses": statuses, "conditions": conditions}}))
            .unwrap()
        };
        let status = |name: &str, requests: Value| {
            json!({"name": name, "image": "i", "imageID": "x", "ready": true, "restartCount": 0,
                   "resources": {"requests": requests}, "allocatedResources": requests})
        };
        let kept = |p: Pod| -> Vec<String> {
            project_pod(p).status.unwrap().container_statuses.unwrap_or_default().into_iter().map(|s| s.name).collect()
        };
        let equal = status("a", json!({"cpu": "1000m", "memory": "1Gi"}));
        let smaller = status("a", json!({"cpu": "500m"}));
        let larger = status("a", json!({"cpu": "2"}));
        let new_key = status("b", json!({"cpu": "0"}));
        assert!(kept(pod(json!([equal, smaller]), json!([]))).is_empty(), "the spec decides");
        assert_eq!(kept(pod(json!([larger, new_key]), json!([]))), ["a", "b"], "status raises or adds a request");
        let infeasible = json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]);
        assert_eq!(kept(pod(json!([equal]), infeasible)), ["a"], "an infeasible resize ignores the spec");
    }

    #[test]
    fn node_keeps_exactly_what_scheduling_reads() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "uid": "u", "resourceVersion": "3", "labels": {"zone": "a"},
                "annotations": {"a": "b"}, "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubelet", "operation": "Update"}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x", "controller": true}]},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": true, "podCIDR": "10.0.0.0/24",
                "podCIDRs": ["10.0.0.0/24"], "providerID": "aws:///x", "externalID": "e"},
            "status": {
                "allocatable": {"cpu": "4"}, "capacity": {"cpu": "8"}, "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "declaredFeatures": ["F"], "addresses": [{"type": "InternalIP", "address": "1.1.1.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}, "features": {"supplementalGroupsPolicy": true},
                "images": [{"names": ["a@sha256:1", "a:1"], "sizeBytes": 10}],
                "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "c", "kernelVersion": "k",
                    "kubeProxyVersion": "", "kubeletVersion": "v", "machineID": "m", "operatingSystem": "linux",
                    "osImage": "o", "systemUUID": "s"},
                "runtimeHandlers": [{"name": "runc"}], "volumesInUse": ["v"],
                "volumesAttached": [{"name": "v", "devicePath": "/d"}], "config": {}}
        }))
        .unwrap();
        let (projected, images) = project_node(node);
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].names.as_deref().unwrap(), ["a@sha256:1", "a:1"]);
        let expected = [
            "metadata",
            "metadata.annotations",
            "metadata.annotations.a",
            "metadata.creationTimestamp",
            "metadata.labels",
            "metadata.labels.zone",
            "metadata.name",
            "metadata.resourceVersion",
            "metadata.uid",
            "spec",
            "spec.taints",
            "spec.taints[].effect",
            "spec.taints[].key",
            "spec.unschedulable",
            "status",
            "status.allocatable",
            "status.allocatable.cpu",
            "status.conditions",
            "status.conditions[].status",
            "status.conditions[].type",
            "status.declaredFeatures",
        ];
        assert_eq!(kept_paths(serde_json::to_value(projected).unwrap()), expected);
    }

    #[test]
    fn full_keeps_the_whole_object_but_managed_fields() {
        let api: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({"metadata": {"name": "p",
            "annotations": {"a": "b"}, "managedFields": [{"manager": "m"}]},
            "spec": {"containers": [{"name": "c", "env": [{"name": "A"}]}]}}))
        .unwrap();
        let kept = Projection::Full.pod(Pod::with_object(api.clone()));
        let whole = kept.object.as_deref().expect("the whole object is kept");
        assert_eq!(whole.metadata.managed_fields, None);
        assert_eq!(whole.spec, api.spec, "env and every other field stay");
        assert_eq!(kept.metadata.annotations, api.metadata.annotations);
        // What the projection would drop stays in the kept fields too.
        let scheduling = Projection::Scheduling.pod(Pod::from(api));
        assert_eq!(scheduling.metadata.annotations, None);
        assert_eq!(scheduling.object, None);
    }
}
