//! NodeUnschedulable (upstream `framework/plugins/nodeunschedulable`): rejects nodes with `spec.unschedulable` unless the pod tolerates the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint.

use std::sync::{Arc, LazyLock};

use k8s_openapi::api::core::v1::Taint;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, QueueingHint, Status,
};

use crate::helper::{as_nodes, as_pods, require, uid};
use crate::names;
use crate::tainttoleration::{pod_tolerations, tolerations_tolerate_taint, COMPARISON_OPERATORS_DEFAULT};

/// Filter reason for an unschedulable node.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// Upstream's reason constant for nodes with unknown conditions; unused by the Filter.
pub const ERR_REASON_UNKNOWN_CONDITION: &str = "node(s) had unknown conditions";

/// Key of the taint that stands for `spec.unschedulable`.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The NodeUnschedulable plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodeUnschedulable;

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(NodeUnschedulable))
}

fn unschedulable(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

/// The taint `spec.unschedulable` stands for, built once so the Filter does not allocate.
static UNSCHEDULABLE_TAINT: LazyLock<Taint> =
    LazyLock::new(|| Taint { key: TAINT_NODE_UNSCHEDULABLE.into(), effect: "NoSchedule".into(), ..Default::default() });

fn tolerates_unschedulable(pod: &Pod) -> bool {
    tolerations_tolerate_taint(pod_tolerations(pod), &UNSCHEDULABLE_TAINT, COMPARISON_OPERATORS_DEFAULT)
}

/// Queue when a node is created schedulable or flips from unschedulable to schedulable.
fn is_schedulable_after_node_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = as_nodes(old, new)?;
    let modified = require(modified, "new node")?;
    let became_schedulable = match original {
        Some(o) => unschedulable(o) && !unschedulable(modified),
        None => !unschedulable(modified),
    };
    Ok(if became_schedulable { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

/// Queue when the rejected pod itself now tolerates the unschedulable taint.
fn is_schedulable_after_pod_toleration_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, modified) = as_pods(old, new)?;
    let modified = require(modified, "new pod")?;
    Ok(if uid(pod) == uid(modified) && tolerates_unschedulable(modified) {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &str {
        names::NODE_UNSCHEDULABLE
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
        Some(self)
    }
    fn as_memo(&self) -> Option<&dyn ksched_framework::MemoPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
                is_schedulable_after_node_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::UPDATE_POD_TOLERATION,
                is_schedulable_after_pod_toleration_change,
            ),
        ])
    }
}

/// Feasibility depends on the pod's tolerations.
impl ksched_framework::SignPlugin for NodeUnschedulable {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        sig.fragment(ksched_framework::batch::signature::TOLERATIONS, |w| {
            ksched_framework::batch::signature::tolerations(&pod.pod, w)
        });
        ksched_framework::Status::success()
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if node.node().is_none() {
            return Status::error("node not found");
        }
        if !node.unschedulable() || tolerates_unschedulable(&pod.pod) {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
    }
}

/// Filter reads the tolerations (for the unschedulable taint).
impl ksched_framework::MemoPlugin for NodeUnschedulable {
    fn memo_inputs(
        &self,
        _state: &CycleState,
        pod: &PodInfo,
        w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        ksched_framework::memo::write_tolerations(&pod.pod, w);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helper::testing::{node, node_info, node_obj, pod, pod_info, pod_obj};
    use ksched_framework::{ClusterEvent, Code};
    use serde_json::{json, Value};

    fn node_spec(spec: Value) -> Node {
        node(json!({"name": "n"}), spec)
    }

    fn pod_tol(uid: &str, tolerations: Value) -> Pod {
        pod(json!({"uid": uid}), json!({"containers": [], "tolerations": tolerations}))
    }

    #[test]
    fn filter() {
        let cases = [
            ("unschedulable node", pod_tol("u", json!([])), json!({"unschedulable": true}), false),
            ("schedulable node", pod_tol("u", json!([])), json!({"unschedulable": false}), true),
            ("unset is schedulable", pod_tol("u", json!([])), json!({}), true),
            (
                "toleration of the unschedulable taint",
                pod_tol("u", json!([{"key": TAINT_NODE_UNSCHEDULABLE, "effect": "NoSchedule"}])),
                json!({"unschedulable": true}),
                true,
            ),
            (
                "tolerate everything",
                pod_tol("u", json!([{"operator": "Exists"}])),
                json!({"unschedulable": true}),
                true,
            ),
            (
                "wrong effect",
                pod_tol("u", json!([{"key": TAINT_NODE_UNSCHEDULABLE, "operator": "Exists", "effect": "NoExecute"}])),
                json!({"unschedulable": true}),
                false,
            ),
        ];
        for (name, p, spec, fits) in cases {
            let got = NodeUnschedulable.filter(&CycleState::new(), &pod_info(p), &node_info(node_spec(spec)));
            if fits {
                assert!(got.is_success(), "{name}: {got}");
            } else {
                assert_eq!(got.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(got.message(), ERR_REASON_UNSCHEDULABLE, "{name}");
            }
        }
    }

    #[test]
    fn node_change_hint() {
        let n = |spec: Value| Some(node_obj(node_spec(spec)));
        let p = pod_tol("u", json!([]));
        let cases = [
            ("wrong new object", None, Some(pod_obj(p.clone())), Err(())),
            ("wrong old object", Some(pod_obj(p.clone())), n(json!({"unschedulable": true})), Err(())),
            ("unschedulable node added", None, n(json!({"unschedulable": true})), Ok(QueueingHint::QueueSkip)),
            ("schedulable node added", None, n(json!({})), Ok(QueueingHint::Queue)),
            (
                "unrelated change, still unschedulable",
                n(json!({"unschedulable": true})),
                n(
                    json!({"unschedulable": true, "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}),
                ),
                Ok(QueueingHint::QueueSkip),
            ),
            (
                "unrelated change, still schedulable",
                n(json!({"unschedulable": false})),
                n(
                    json!({"unschedulable": false, "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}),
                ),
                Ok(QueueingHint::QueueSkip),
            ),
            ("became schedulable", n(json!({"unschedulable": true})), n(json!({})), Ok(QueueingHint::Queue)),
        ];
        for (name, old, new, want) in cases {
            let got = is_schedulable_after_node_change(&p, old.as_ref(), new.as_ref());
            assert_eq!(got.map_err(|_| ()), want, "{name}");
        }
    }

    #[test]
    fn pod_toleration_hint() {
        let target = pod_tol("uid", json!([]));
        let unsched_tol = json!([{"key": TAINT_NODE_UNSCHEDULABLE, "operator": "Exists"}]);
        let cases = [
            ("wrong new object", None, Some(node_obj(Node::default())), Err(())),
            ("wrong old object", Some(node_obj(Node::default())), Some(pod_obj(Pod::default())), Err(())),
            (
                "other pod",
                Some(pod_obj(pod_tol("other", json!([])))),
                Some(pod_obj(pod_tol("other", unsched_tol.clone()))),
                Ok(QueueingHint::QueueSkip),
            ),
            (
                "the pod gets the toleration",
                Some(pod_obj(pod_tol("uid", json!([])))),
                Some(pod_obj(pod_tol("uid", unsched_tol.clone()))),
                Ok(QueueingHint::Queue),
            ),
            (
                "the pod gets an unrelated toleration",
                Some(pod_obj(pod_tol("uid", json!([])))),
                Some(pod_obj(pod_tol("uid", json!([{"key": "unrelated-key", "operator": "Exists"}])))),
                Ok(QueueingHint::QueueSkip),
            ),
        ];
        for (name, old, new, want) in cases {
            let got = is_schedulable_after_pod_toleration_change(&target, old.as_ref(), new.as_ref());
            assert_eq!(got.map_err(|_| ()), want, "{name}");
        }
        let events: Vec<_> = NodeUnschedulable.events_to_register().unwrap().iter().map(|e| e.event).collect();
        assert_eq!(
            events,
            [
                ClusterEvent::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_TAINT),
                ClusterEvent::new(EventResource::Pod, ActionType::UPDATE_POD_TOLERATION),
            ]
        );
    }
}
