//! Cluster events the scheduler derives from object changes (upstream `framework/types.go` ClusterEvent, `eventhandlers.go`), and the fixed events and
//! labels the queue uses.
//!
//! An update of a node or a pod is split into the specific `Update*` actions that describe what
//! changed, so plugins registered for (say) taint changes are not woken by a status heartbeat.

use std::collections::BTreeMap;

use ksched_framework::node::Node;
use ksched_framework::pod::{Container, ContainerStatus, Pod};
use ksched_framework::{ActionType, ClusterEvent, EventResource};

/// A pod bound to a node appeared.
pub const ASSIGNED_POD_ADD: ClusterEvent = ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD);
/// A bound pod changed in no specific way.
pub const ASSIGNED_POD_UPDATE: ClusterEvent = ClusterEvent::new(EventResource::AssignedPod, ActionType::UPDATE);
/// A bound pod went away.
pub const ASSIGNED_POD_DELETE: ClusterEvent = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
/// A pod waiting for scheduling appeared.
pub const UNSCHEDULED_POD_ADD: ClusterEvent = ClusterEvent::new(EventResource::UnschedulablePod, ActionType::ADD);
/// A pod waiting for scheduling changed in no specific way.
pub const UNSCHEDULED_POD_UPDATE: ClusterEvent = ClusterEvent::new(EventResource::UnschedulablePod, ActionType::UPDATE);
/// A pod waiting for scheduling went away.
pub const UNSCHEDULED_POD_DELETE: ClusterEvent = ClusterEvent::new(EventResource::UnschedulablePod, ActionType::DELETE);
/// A node was added.
pub const NODE_ADD: ClusterEvent = ClusterEvent::new(EventResource::Node, ActionType::ADD);
/// A node was deleted.
pub const NODE_DELETE: ClusterEvent = ClusterEvent::new(EventResource::Node, ActionType::DELETE);
/// A pod stayed in the unschedulable pool longer than the configured maximum.
pub const UNSCHEDULABLE_TIMEOUT: ClusterEvent = ClusterEvent::wildcard(UNSCHEDULABLE_TIMEOUT_LABEL);
/// A plugin asked for pods to be activated.
pub const FORCE_ACTIVATE: ClusterEvent = ClusterEvent::wildcard(FORCE_ACTIVATE_LABEL);

/// Queue metric label: the pod came back after a failed attempt.
pub const SCHEDULE_ATTEMPT_FAILURE: &str = "ScheduleAttemptFailure";
/// Queue metric label: the pod's backoff expired.
pub const BACKOFF_COMPLETE: &str = "BackoffComplete";
/// Queue metric label: the pod was popped from backoffQ because activeQ was empty.
pub const POP_FROM_BACKOFF_Q: &str = "PopFromBackoffQ";
/// Label of [`FORCE_ACTIVATE`].
pub const FORCE_ACTIVATE_LABEL: &str = "ForceActivate";
/// Label of [`UNSCHEDULABLE_TIMEOUT`].
pub const UNSCHEDULABLE_TIMEOUT_LABEL: &str = "UnschedulableTimeout";

/// The specific node events of an update, in upstream's order; empty when nothing the scheduler
/// cares about changed. An uncordon and a taint change both yield `UpdateNodeTaint` (twice when
/// both happen), as upstream does.
pub fn node_update_events(old: &Node, new: &Node) -> Vec<ClusterEvent> {
    let checks: [(bool, ActionType); 7] = [
        (uncordoned(old, new), ActionType::UPDATE_NODE_TAINT),
        (!quantity_maps_equal(allocatable(old), allocatable(new)), ActionType::UPDATE_NODE_ALLOCATABLE),
        (old.metadata.labels != new.metadata.labels, ActionType::UPDATE_NODE_LABEL),
        (taints(old) != taints(new), ActionType::UPDATE_NODE_TAINT),
        (condition_map(old) != condition_map(new), ActionType::UPDATE_NODE_CONDITION),
        (!string_maps_equal(&old.metadata.annotations, &new.metadata.annotations), ActionType::UPDATE_NODE_ANNOTATION),
        (declared_features(old) != declared_features(new), ActionType::UPDATE_NODE_DECLARED_FEATURE),
    ];
    checks
        .into_iter()
        .filter(|(changed, _)| *changed)
        .map(|(_, action)| ClusterEvent::new(EventResource::Node, action))
        .collect()
}

/// The events of a pod update, with the resource chosen by the new object: `AssignedPod` when it
/// has `spec.nodeName`, `UnschedulablePod` otherwise (upstream's `PodSchedulingPropertiesChange`).
/// Never empty: a generic `Update` stands in when no specific change is recognised.
pub fn pod_update_events(old: &Pod, new: &Pod) -> Vec<ClusterEvent> {
    let resource = if node_name(new).is_empty() { EventResource::UnschedulablePod } else { EventResource::AssignedPod };
    pod_events_for(resource, old, new)
}

/// The events of an update of a pod waiting in the queue (resource `UnschedulablePod`).
pub fn unscheduled_pod_update_events(old: &Pod, new: &Pod) -> Vec<ClusterEvent> {
    pod_events_for(EventResource::UnschedulablePod, old, new)
}

/// The events of an update of a bound pod (resource `AssignedPod`).
pub fn assigned_pod_update_events(old: &Pod, new: &Pod) -> Vec<ClusterEvent> {
    pod_events_for(EventResource::AssignedPod, old, new)
}

fn pod_events_for(resource: EventResource, old: &Pod, new: &Pod) -> Vec<ClusterEvent> {
    let checks: [(bool, ActionType); 5] = [
        (old.metadata.labels != new.metadata.labels, ActionType::UPDATE_POD_LABEL),
        (scaled_down(old, new), ActionType::UPDATE_POD_SCALE_DOWN),
        (gates_eliminated(old, new), ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
        (toleration_count(old) != toleration_count(new), ActionType::UPDATE_POD_TOLERATION),
        (generated_claims_changed(old, new), ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM),
    ];
    let mut events: Vec<ClusterEvent> = checks
        .into_iter()
        .filter(|(changed, _)| *changed)
        .map(|(_, action)| ClusterEvent::new(resource, action))
        .collect();
    if events.is_empty() {
        events.push(ClusterEvent::new(resource, ActionType::UPDATE));
    }
    events
}

fn node_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

// Upstream compares with semantic equality, under which a nil map equals an empty one.
fn string_maps_equal(a: &Option<BTreeMap<String, String>>, b: &Option<BTreeMap<String, String>>) -> bool {
    let empty = BTreeMap::new();
    a.as_ref().unwrap_or(&empty) == b.as_ref().unwrap_or(&empty)
}

fn uncordoned(old: &Node, new: &Node) -> bool {
    let unsched = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    unsched(old) && !unsched(new)
}

fn allocatable(n: &Node) -> Option<&ksched_framework::pod::ResourceList> {
    n.status.as_ref().and_then(|s| s.allocatable.as_ref())
}

fn taints(n: &Node) -> &[k8s_openapi::api::core::v1::Taint] {
    n.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
}

fn declared_features(n: &Node) -> &[String] {
    n.status.as_ref().and_then(|s| s.declared_features.as_deref()).unwrap_or_default()
}

// Only the type -> status mapping matters: heartbeats and messages change constantly.
fn condition_map(n: &Node) -> BTreeMap<&str, &str> {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect()
}

fn quantity_maps_equal(
    a: Option<&ksched_framework::pod::ResourceList>,
    b: Option<&ksched_framework::pod::ResourceList>,
) -> bool {
    let empty = ksched_framework::pod::ResourceList::default();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    a.len() == b.len()
        && a.iter().all(|(k, qa)| {
            b.get(k).is_some_and(|qb| match (nano_value(&qa.0), nano_value(&qb.0)) {
                (Some(x), Some(y)) => x == y,
                _ => qa.0 == qb.0,
            })
        })
}

fn toleration_count(p: &Pod) -> usize {
    p.spec.as_ref().and_then(|s| s.tolerations.as_deref()).map_or(0, <[_]>::len)
}

fn gates_eliminated(old: &Pod, new: &Pod) -> bool {
    let gates = |p: &Pod| p.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).map_or(0, Vec::len);
    gates(new) == 0 && gates(old) != 0
}

fn generated_claims_changed(old: &Pod, new: &Pod) -> bool {
    let claims = |p: &Pod| -> Vec<(String, Option<String>)> {
        p.status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (c.name.clone(), c.resource_claim_name.clone()))
            .collect()
    };
    let extended = |p: &Pod| p.status.as_ref().and_then(|s| s.extended_resource_claim_status.clone());
    claims(old) != claims(new) || extended(old) != extended(new)
}

/// True when any request of the old pod is gone or smaller in the new one (upstream compares
/// milli-values of the effective requests, in-place resize status included).
fn scaled_down(old: &Pod, new: &Pod) -> bool {
    let (old_reqs, new_reqs) = (effective_requests(old), effective_requests(new));
    old_reqs.iter().any(|(name, old_q)| match new_reqs.get(name) {
        None => true,
        Some(new_q) => to_milli(*old_q) > to_milli(*new_q),
    })
}

fn to_milli(nano: i128) -> i128 {
    // Quantity.MilliValue rounds up.
    nano.div_euclid(1_000_000) + i128::from(nano.rem_euclid(1_000_000) != 0)
}

/// Requests as a resource list in nano units; keys are kept even when the amount is zero,
/// because the removal of a request counts as a scale-down.
type ResourceList = BTreeMap<String, i128>;

fn to_list(q: Option<&ksched_framework::pod::ResourceList>) -> ResourceList {
    q.into_iter().flatten().map(|(k, v)| (k.clone(), nano_value(&v.0).unwrap_or(0))).collect()
}

fn add_list(into: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn max_list(into: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        let e = into.entry(k.clone()).or_insert(*v);
        *e = (*e).max(*v);
    }
}

fn resize_infeasible(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    // Only the first PodResizePending condition is consulted.
    conditions.iter().find(|c| c.type_ == "PodResizePending").is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

fn effective(pod: &Pod, spec: ResourceList, actuated: ResourceList, allocated: ResourceList) -> ResourceList {
    let mut out = if resize_infeasible(pod) {
        actuated
    } else {
        let mut s = spec;
        max_list(&mut s, &actuated);
        s
    };
    max_list(&mut out, &allocated);
    out
}

fn container_effective(pod: &Pod, c: &Container, status: Option<&ContainerStatus>) -> ResourceList {
    let spec = to_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    match status.and_then(|cs| cs.resources.as_ref().map(|r| (cs, r))) {
        Some((cs, actual)) => {
            effective(pod, spec, to_list(actual.requests.as_ref()), to_list(cs.allocated_resources.as_ref()))
        }
        None => spec,
    }
}

fn is_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// Upstream's `PodRequests` with status resources and pod-level resources honoured.
fn effective_requests(pod: &Pod) -> ResourceList {
    let Some(spec) = pod.spec.as_ref() else { return ResourceList::new() };
    let status = pod.status.as_ref();
    let mut statuses: BTreeMap<&str, &ContainerStatus> = BTreeMap::new();
    for cs in status.and_then(|s| s.container_statuses.as_ref()).into_iter().flatten() {
        statuses.insert(cs.name.as_str(), cs);
    }
    for cs in status.and_then(|s| s.init_container_statuses.as_ref()).into_iter().flatten() {
        statuses.insert(cs.name.as_str(), cs);
    }

    let mut reqs = ResourceList::new();
    for c in spec.containers.iter() {
        add_list(&mut reqs, &container_effective(pod, c, statuses.get(c.name.as_str()).copied()));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let is_sidecar = c.restart_policy.as_deref() == Some("Always");
        let phase = if is_sidecar {
            let own = container_effective(pod, c, statuses.get(c.name.as_str()).copied());
            add_list(&mut reqs, &own);
            add_list(&mut sidecars, &own);
            sidecars.clone()
        } else {
            // Status resources are only honoured for restartable init containers.
            let mut p = to_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
            add_list(&mut p, &sidecars);
            p
        };
        max_list(&mut init_max, &phase);
    }
    max_list(&mut reqs, &init_max);

    let pod_level = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    if let Some(pl) = pod_level.filter(|pl| pl.keys().any(|k| is_pod_level_resource(k))) {
        let pod_status_resources = status.and_then(|s| s.resources.as_ref());
        let eff = pod_status_resources.map(|actual| {
            effective(
                pod,
                to_list(Some(pl)),
                to_list(actual.requests.as_ref()),
                to_list(status.and_then(|s| s.allocated_resources.as_ref())),
            )
        });
        for (name, q) in pl.iter().filter(|(k, _)| is_pod_level_resource(k)) {
            let v = match &eff {
                Some(e) => e.get(name).copied().unwrap_or(0),
                None => nano_value(&q.0).unwrap_or(0),
            };
            reqs.insert(name.clone(), v);
        }
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        add_list(&mut reqs, &to_list(Some(overhead)));
    }
    reqs
}

/// A quantity in nano units, rounded up as the API machinery does for sub-nano fractions.
/// `None` when the text is not a quantity.
pub(crate) fn nano_value(s: &str) -> Option<i128> {
    ksched_framework::quantity::scaled_i128(s, 9, 36)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn actions(events: &[ClusterEvent]) -> Vec<&'static str> {
        events.iter().map(|e| e.action.as_str()).collect()
    }

    #[test]
    fn node_events_each_kind() {
        let base = json!({
            "metadata": {"name": "n", "labels": {"a": "1"}, "annotations": {"x": "y"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "1", "memory": "1Gi"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-01-01T00:00:00Z"}],
                "declaredFeatures": ["f1"]
            }
        });
        let old = node(base.clone());
        let cases: Vec<(&str, serde_json::Value, Vec<&str>)> = vec![
            ("no change", base.clone(), vec![]),
            (
                "semantic allocatable equality",
                {
                    let mut v = base.clone();
                    v["status"]["allocatable"]["cpu"] = json!("1000m");
                    v
                },
                vec![],
            ),
            (
                "heartbeat only",
                {
                    let mut v = base.clone();
                    v["status"]["conditions"][0]["lastHeartbeatTime"] = json!("2024-01-01T00:01:00Z");
                    v
                },
                vec![],
            ),
            (
                "allocatable",
                {
                    let mut v = base.clone();
                    v["status"]["allocatable"]["cpu"] = json!("2");
                    v
                },
                vec!["UpdateNodeAllocatable"],
            ),
            (
                "label",
                {
                    let mut v = base.clone();
                    v["metadata"]["labels"]["b"] = json!("2");
                    v
                },
                vec!["UpdateNodeLabel"],
            ),
            (
                "taint",
                {
                    let mut v = base.clone();
                    v["spec"]["taints"] = json!([]);
                    v
                },
                vec!["UpdateNodeTaint"],
            ),
            (
                "condition",
                {
                    let mut v = base.clone();
                    v["status"]["conditions"][0]["status"] = json!("False");
                    v
                },
                vec!["UpdateNodeCondition"],
            ),
            (
                "annotation",
                {
                    let mut v = base.clone();
                    v["metadata"]["annotations"] = json!({});
                    v
                },
                vec!["UpdateNodeAnnotation"],
            ),
            (
                "declared feature",
                {
                    let mut v = base.clone();
                    v["status"]["declaredFeatures"] = json!(["f1", "f2"]);
                    v
                },
                vec!["UpdateNodeDeclaredFeature"],
            ),
            (
                "label and allocatable in upstream order",
                {
                    let mut v = base.clone();
                    v["metadata"]["labels"] = json!({});
                    v["status"]["allocatable"]["memory"] = json!("2Gi");
                    v
                },
                vec!["UpdateNodeAllocatable", "UpdateNodeLabel"],
            ),
        ];
        for (name, new, want) in cases {
            let events = node_update_events(&old, &node(new));
            assert_eq!(actions(&events), want, "{name}");
            assert!(events.iter().all(|e| e.resource == EventResource::Node), "{name}");
        }
    }

    #[test]
    fn node_uncordon_is_a_taint_event_but_cordon_is_not() {
        let cordoned = node(json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}}));
        let open = node(json!({"metadata": {"name": "n"}, "spec": {}}));
        assert_eq!(actions(&node_update_events(&cordoned, &open)), vec!["UpdateNodeTaint"]);
        assert!(node_update_events(&open, &cordoned).is_empty());
        let tainted_cordoned = node(
            json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(actions(&node_update_events(&tainted_cordoned, &open)), vec!["UpdateNodeTaint", "UpdateNodeTaint"]);
    }

    #[test]
    fn nil_and_empty_maps_are_equal() {
        let a = node(json!({"metadata": {"name": "n"}}));
        let b = node(
            json!({"metadata": {"name": "n", "labels": {}, "annotations": {}}, "spec": {"taints": []}, "status": {"allocatable": {}}}),
        );
        assert!(node_update_events(&a, &b).is_empty());
    }

    fn unscheduled(extra_spec: serde_json::Value, labels: serde_json::Value) -> serde_json::Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]});
        for (k, v) in extra_spec.as_object().unwrap() {
            spec[k] = v.clone();
        }
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": labels}, "spec": spec})
    }

    #[test]
    fn pod_events_each_kind() {
        let old = pod(unscheduled(json!({"schedulingGates": [{"name": "g"}]}), json!({"a": "1"})));
        let cases: Vec<(&str, serde_json::Value, Vec<&str>)> = vec![
            (
                "nothing specific",
                unscheduled(json!({"schedulingGates": [{"name": "g"}], "priority": 5}), json!({"a": "1"})),
                vec!["Update"],
            ),
            (
                "label",
                unscheduled(json!({"schedulingGates": [{"name": "g"}]}), json!({"a": "2"})),
                vec!["UpdatePodLabel"],
            ),
            ("gates eliminated", unscheduled(json!({}), json!({"a": "1"})), vec!["UpdatePodSchedulingGatesEliminated"]),
            (
                "gates eliminated (empty list)",
                unscheduled(json!({"schedulingGates": []}), json!({"a": "1"})),
                vec!["UpdatePodSchedulingGatesEliminated"],
            ),
            (
                "toleration",
                unscheduled(
                    json!({"schedulingGates": [{"name": "g"}], "tolerations": [{"key": "k", "operator": "Exists"}]}),
                    json!({"a": "1"}),
                ),
                vec!["UpdatePodToleration"],
            ),
            (
                "scale down",
                {
                    let mut v = unscheduled(json!({"schedulingGates": [{"name": "g"}]}), json!({"a": "1"}));
                    v["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("250m");
                    v
                },
                vec!["UpdatePodScaleDown"],
            ),
            (
                "request removed",
                {
                    let mut v = unscheduled(json!({"schedulingGates": [{"name": "g"}]}), json!({"a": "1"}));
                    v["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": "500m"});
                    v
                },
                vec!["UpdatePodScaleDown"],
            ),
            (
                "scale up is generic",
                {
                    let mut v = unscheduled(json!({"schedulingGates": [{"name": "g"}]}), json!({"a": "1"}));
                    v["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
                    v
                },
                vec!["Update"],
            ),
            (
                "generated claim",
                {
                    let mut v = unscheduled(json!({"schedulingGates": [{"name": "g"}]}), json!({"a": "1"}));
                    v["status"] = json!({"resourceClaimStatuses": [{"name": "c", "resourceClaimName": "p-c-xyz"}]});
                    v
                },
                vec!["UpdatePodGeneratedResourceClaim"],
            ),
            (
                "label + gates in upstream order",
                unscheduled(json!({}), json!({})),
                vec!["UpdatePodLabel", "UpdatePodSchedulingGatesEliminated"],
            ),
        ];
        for (name, new, want) in cases {
            let events = pod_update_events(&old, &pod(new));
            assert_eq!(actions(&events), want, "{name}");
            assert!(events.iter().all(|e| e.resource == EventResource::UnschedulablePod), "{name}");
        }
    }

    #[test]
    fn pod_event_resource_follows_node_name() {
        let old =
            pod(json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"containers": [], "nodeName": "n1"}}));
        let new =
            pod(json!({"metadata": {"name": "p", "labels": {"a": "2"}}, "spec": {"containers": [], "nodeName": "n1"}}));
        let events = pod_update_events(&old, &new);
        assert_eq!(events, vec![ClusterEvent::new(EventResource::AssignedPod, ActionType::UPDATE_POD_LABEL)]);
        assert_eq!(events[0].label(), "AssignedPodUpdatePodLabel");
        assert_eq!(assigned_pod_update_events(&old, &old), vec![ASSIGNED_POD_UPDATE]);
        assert_eq!(unscheduled_pod_update_events(&old, &new)[0].resource, EventResource::UnschedulablePod);
    }

    #[test]
    fn in_place_resize_status_counts_towards_requests() {
        // Spec shrank, but the kubelet still runs the larger allocation: not a scale-down yet.
        let status = json!({"containerStatuses": [{
            "name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
            "allocatedResources": {"cpu": "500m"},
            "resources": {"requests": {"cpu": "500m"}}
        }]});
        let mut old = unscheduled(json!({}), json!({}));
        old["status"] = status.clone();
        let mut new = old.clone();
        new["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("250m");
        assert_eq!(actions(&pod_update_events(&pod(old.clone()), &pod(new.clone()))), vec!["Update"]);
        // Once actuated and allocated at the smaller size, it is.
        new["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] = json!("250m");
        new["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] = json!("250m");
        assert_eq!(actions(&pod_update_events(&pod(old), &pod(new))), vec!["UpdatePodScaleDown"]);
    }

    #[test]
    fn effective_requests_aggregate_like_upstream() {
        let p = pod(json!({"spec": {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "example.com/x": "0"}}}],
            "initContainers": [
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
                {"name": "i", "resources": {"requests": {"cpu": "2"}}}
            ],
            "overhead": {"cpu": "100m"},
            "resources": {"requests": {"memory": "1Gi"}}
        }}));
        let r = effective_requests(&p);
        assert_eq!(to_milli(r["cpu"]), 2300);
        assert_eq!(r["memory"], (1i128 << 30) * 1_000_000_000);
        assert_eq!(r.get("example.com/x"), Some(&0), "zero-valued requests keep their key");
    }

    #[test]
    fn quantity_parsing() {
        assert_eq!(nano_value("1"), Some(1_000_000_000));
        assert_eq!(nano_value("1000m"), nano_value("1"));
        assert_eq!(nano_value("1.5Ki"), Some(1536 * 1_000_000_000));
        assert_eq!(nano_value("1e3"), Some(1_000_000_000_000));
        assert_eq!(nano_value("-2m"), Some(-2_000_000));
        assert_eq!(nano_value("0.1n"), Some(1), "sub-nano rounds up");
        assert_eq!(nano_value("x"), None);
        assert_eq!(nano_value(""), None);
        // A huge exponent saturates at once (it looped once per power of ten).
        assert_eq!(nano_value("6e2100210202"), Some(i128::MAX));
        assert_eq!(nano_value("0e2147483647"), Some(0));
        assert_eq!(nano_value("1e-2147483648"), Some(1));
        assert_eq!(to_milli(1), 1);
        assert_eq!(to_milli(2_000_000), 2);
    }

    #[test]
    fn special_event_labels() {
        assert_eq!(ASSIGNED_POD_ADD.label(), "AssignedPodAdd");
        assert_eq!(UNSCHEDULED_POD_ADD.label(), "UnschedulablePodAdd");
        assert_eq!(UNSCHEDULED_POD_UPDATE.label(), "UnschedulablePodUpdate");
        assert_eq!(UNSCHEDULABLE_TIMEOUT.label(), "UnschedulableTimeout");
        assert!(FORCE_ACTIVATE.is_wildcard());
        assert_eq!(NODE_ADD.label(), "NodeAdd");
    }
}
