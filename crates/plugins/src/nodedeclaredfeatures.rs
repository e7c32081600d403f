//! NodeDeclaredFeatures (upstream `framework/plugins/nodedeclaredfeatures`): a pod whose spec needs node features (as the kubelet
//! declares them in `node.status.declaredFeatures`) only goes to nodes declaring all of them.
//!
//! The features are those of upstream's `component-helpers/nodedeclaredfeatures` registry at
//! v1.36. Only two can be inferred from a pod spec at scheduling time; the others matter for
//! in-place updates, which the kubelet checks, not the scheduler.

use std::sync::Arc;

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, PreFilterPlugin, PreFilterResult, QueueingHint, Snapshot, Status,
};

use crate::helper::{as_nodes, as_pods, require, uid};
use crate::names;

/// Filter reason when the node lacks a feature the pod needs.
pub const ERR_REASON_UNSATISFIED_REQUIREMENTS: &str = "node(s) didn't match Pod's required features";

const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeDeclaredFeatures";

/// Every feature the registry knows, sorted by name: a feature's index is its bit in a
/// [`FeatureSet`], and the node list is mapped by a merge walk over this order.
pub const KNOWN_FEATURES: [&str; 5] = [
    "ExtendWebSocketsToKubelet",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
];

/// A container restart rule with action `RestartAllContainers` needs this node feature.
pub const RESTART_ALL_CONTAINERS: &str = "RestartAllContainersOnContainerExits";
/// `hostNetwork: true` with `hostUsers: false` needs this node feature.
pub const USER_NAMESPACES_HOST_NETWORK: &str = "UserNamespacesHostNetworkSupport";

/// A set of known features, one bit per entry of [`KNOWN_FEATURES`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureSet(u8);

impl FeatureSet {
    fn bit(name: &str) -> FeatureSet {
        let i = KNOWN_FEATURES.iter().position(|f| *f == name).expect("a known feature");
        FeatureSet(1 << i)
    }

    /// True when no feature is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when every feature of `self` is in `other`.
    pub fn is_subset(self, other: FeatureSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The feature names, in registry order.
    pub fn names(self) -> Vec<&'static str> {
        KNOWN_FEATURES.iter().enumerate().filter(|(i, _)| self.0 & (1 << i) != 0).map(|(_, f)| *f).collect()
    }
}

impl std::ops::BitOr for FeatureSet {
    type Output = FeatureSet;
    fn bitor(self, o: FeatureSet) -> FeatureSet {
        FeatureSet(self.0 | o.0)
    }
}

/// The features a pod needs from its node to be scheduled there.
pub fn infer_for_scheduling(pod: &Pod) -> FeatureSet {
    let Some(spec) = pod.spec.as_ref() else { return FeatureSet::default() };
    let mut reqs = FeatureSet::default();
    let restarts_all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.restart_policy_rules.iter().flatten())
        .any(|r| r.action == "RestartAllContainers");
    if restarts_all {
        reqs = reqs | FeatureSet::bit(RESTART_ALL_CONTAINERS);
    }
    if spec.host_network == Some(true) && spec.host_users == Some(false) {
        reqs = reqs | FeatureSet::bit(USER_NAMESPACES_HOST_NETWORK);
    }
    reqs
}

/// The known features a node declares. Unknown names are ignored. Like upstream's `TryMap`, the
/// list is read as sorted (the kubelet publishes it sorted): a merge walk against the registry,
/// so an out-of-order name is skipped rather than found.
pub fn node_features(node: &Node) -> FeatureSet {
    let declared = node.status.as_ref().and_then(|s| s.declared_features.as_deref()).unwrap_or_default();
    let (mut i, mut j, mut set) = (0, 0, 0u8);
    while i < declared.len() && j < KNOWN_FEATURES.len() {
        match declared[i].as_str().cmp(KNOWN_FEATURES[j]) {
            std::cmp::Ordering::Equal => {
                set |= 1 << j;
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    FeatureSet(set)
}

/// The features the pod needs, computed at PreFilter.
#[derive(Debug, Clone, Copy)]
struct PreFilterState(FeatureSet);

/// The NodeDeclaredFeatures plugin; inert when its feature gate is off.
#[derive(Debug, Clone, Copy)]
pub struct NodeDeclaredFeatures {
    enabled: bool,
}

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(NodeDeclaredFeatures { enabled: handle.features.node_declared_features }))
}

/// Queue when a node is added or its declared features changed.
fn is_schedulable_after_node_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (old, new) = as_nodes(old, new)?;
    let new = require(new, "new node")?;
    let declared = |n: &Node| n.status.as_ref().and_then(|s| s.declared_features.clone()).unwrap_or_default();
    Ok(match old {
        Some(old) if declared(old) == declared(new) => QueueingHint::QueueSkip,
        _ => QueueingHint::Queue,
    })
}

/// Queue when the rejected pod itself changed what it needs.
fn is_schedulable_after_pod_update(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (old, new) = as_pods(old, new)?;
    let new = require(new, "new pod")?;
    if uid(pod) != uid(new) {
        return Ok(QueueingHint::QueueSkip);
    }
    let old = require(old, "old pod")?;
    Ok(if infer_for_scheduling(old) == infer_for_scheduling(new) {
        QueueingHint::QueueSkip
    } else {
        QueueingHint::Queue
    })
}

impl Plugin for NodeDeclaredFeatures {
    fn name(&self) -> &str {
        names::NODE_DECLARED_FEATURES
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
        Some(self)
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        if !self.enabled {
            return Some(Vec::new());
        }
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_DECLARED_FEATURE,
                is_schedulable_after_node_change,
            ),
            ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::UPDATE, is_schedulable_after_pod_update),
        ])
    }
}

/// Feasibility depends on the node features the pod needs.
impl ksched_framework::SignPlugin for NodeDeclaredFeatures {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        let features = infer_for_scheduling(&pod.pod);
        sig.fragment(ksched_framework::batch::signature::FEATURES, |w| {
            for f in features.names() {
                w.str(f);
            }
        });
        ksched_framework::Status::success()
    }
}

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if !self.enabled {
            return (None, Status::skip());
        }
        let reqs = infer_for_scheduling(&pod.pod);
        if reqs.is_empty() {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(reqs));
        (None, Status::success())
    }
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        if !self.enabled {
            return Status::success();
        }
        let Ok(PreFilterState(reqs)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("error reading {PRE_FILTER_STATE_KEY:?} from cycle-state: not found"));
        };
        let Some(n) = node.node() else { return Status::error("node not found") };
        if reqs.is_subset(node_features(n)) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helper::testing::{node, node_info, node_obj, pod, pod_info, pod_obj};
    use ksched_framework::{ClusterEvent, Code};
    use serde_json::{json, Value};

    fn declaring(features: &[&str]) -> Node {
        let mut n = node(json!({"name": "n"}), json!({}));
        n.status = Some(serde_json::from_value(json!({"declaredFeatures": features})).unwrap());
        n
    }

    fn restart_all_pod(uid: &str) -> Pod {
        pod(
            json!({"uid": uid}),
            json!({"containers": [{"name": "c", "restartPolicy": "Never",
                "restartPolicyRules": [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]}]}),
        )
    }

    fn host_network_pod(host_users: Value) -> Pod {
        pod(json!({"uid": "u"}), json!({"containers": [], "hostNetwork": true, "hostUsers": host_users}))
    }

    #[test]
    fn features_are_inferred_from_the_spec() {
        let init_rule = pod(
            json!({}),
            json!({"containers": [], "initContainers": [{"name": "i",
                "restartPolicyRules": [{"action": "RestartAllContainers"}]}]}),
        );
        let cases: [(&str, Pod, Vec<&str>); 6] = [
            ("plain pod", pod(json!({}), json!({"containers": [{"name": "c"}]})), vec![]),
            ("restart-all rule on a container", restart_all_pod("u"), vec![RESTART_ALL_CONTAINERS]),
            ("restart-all rule on an init container", init_rule, vec![RESTART_ALL_CONTAINERS]),
            ("host network in a user namespace", host_network_pod(json!(false)), vec![USER_NAMESPACES_HOST_NETWORK]),
            ("host network with host users", host_network_pod(json!(true)), vec![]),
            ("host network, hostUsers unset", host_network_pod(Value::Null), vec![]),
        ];
        for (name, p, want) in cases {
            assert_eq!(infer_for_scheduling(&p).names(), want, "{name}");
        }
    }

    #[test]
    fn node_features_map_a_sorted_list_and_ignore_unknown_names() {
        let n = declaring(&["Aaa", RESTART_ALL_CONTAINERS, "Unknown", USER_NAMESPACES_HOST_NETWORK, "Zzz"]);
        assert_eq!(node_features(&n).names(), [RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK]);
        // Out of order, as upstream's merge walk reads it: the later, smaller name is passed by.
        let n = declaring(&[USER_NAMESPACES_HOST_NETWORK, RESTART_ALL_CONTAINERS]);
        assert_eq!(node_features(&n).names(), [USER_NAMESPACES_HOST_NETWORK]);
        assert!(node_features(&node(json!({"name": "n"}), json!({}))).is_empty());
    }

    fn run(pl: &NodeDeclaredFeatures, p: &Pod, n: Node) -> (Status, Status) {
        let mut state = CycleState::new();
        let pi = pod_info(p.clone());
        let (_, pre) = pl.pre_filter(&mut state, &pi, &Snapshot::default());
        if pre.is_skip() {
            return (pre, Status::success());
        }
        (pre, pl.filter(&state, &pi, &node_info(n)))
    }

    #[test]
    fn filter_requires_every_needed_feature() {
        let pl = NodeDeclaredFeatures { enabled: true };
        let (pre, _) = run(&pl, &pod(json!({}), json!({"containers": []})), declaring(&[]));
        assert!(pre.is_skip(), "pods needing nothing skip the filter");

        let (pre, f) = run(&pl, &restart_all_pod("u"), declaring(&[RESTART_ALL_CONTAINERS]));
        assert!(pre.is_success() && f.is_success(), "{f:?}");

        let (_, f) = run(&pl, &restart_all_pod("u"), declaring(&[USER_NAMESPACES_HOST_NETWORK]));
        assert_eq!(f.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(f.message(), ERR_REASON_UNSATISFIED_REQUIREMENTS);

        let (_, f) = run(&pl, &restart_all_pod("u"), node(json!({"name": "n"}), json!({})));
        assert_eq!(f.message(), "node(s) didn't match Pod's required features");
    }

    #[test]
    fn disabled_gate_makes_the_plugin_inert() {
        let pl = NodeDeclaredFeatures { enabled: false };
        let (pre, f) = run(&pl, &restart_all_pod("u"), declaring(&[]));
        assert!(pre.is_skip() && f.is_success());
        assert!(pl.events_to_register().unwrap().is_empty());
    }

    #[test]
    fn registers_node_and_pod_events() {
        let pl = NodeDeclaredFeatures { enabled: true };
        let events: Vec<ClusterEvent> = pl.events_to_register().unwrap().into_iter().map(|e| e.event).collect();
        assert_eq!(
            events,
            [
                ClusterEvent::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_DECLARED_FEATURE),
                ClusterEvent::new(EventResource::Pod, ActionType::UPDATE),
            ]
        );
    }

    #[test]
    fn node_hint_queues_on_new_nodes_and_changed_features() {
        let a = node_obj(declaring(&["A"]));
        let b = node_obj(declaring(&["A", "B"]));
        let p = restart_all_pod("u");
        let h = |old: Option<&EventObject>, new: &EventObject| is_schedulable_after_node_change(&p, old, Some(new));
        assert_eq!(h(None, &a), Ok(QueueingHint::Queue));
        assert_eq!(h(Some(&a), &b), Ok(QueueingHint::Queue));
        assert_eq!(h(Some(&a), &a.clone()), Ok(QueueingHint::QueueSkip));
    }

    #[test]
    fn pod_hint_queues_only_when_the_pods_own_requirements_change() {
        let before = pod_obj(restart_all_pod("u"));
        let after = pod_obj(pod(json!({"uid": "u"}), json!({"containers": [{"name": "c"}]})));
        let other = pod_obj(pod(json!({"uid": "other"}), json!({"containers": []})));
        let p = restart_all_pod("u");
        assert_eq!(is_schedulable_after_pod_update(&p, Some(&before), Some(&after)), Ok(QueueingHint::Queue));
        assert_eq!(is_schedulable_after_pod_update(&p, Some(&before), Some(&before)), Ok(QueueingHint::QueueSkip));
        assert_eq!(is_schedulable_after_pod_update(&p, Some(&other), Some(&other)), Ok(QueueingHint::QueueSkip));
    }
}
