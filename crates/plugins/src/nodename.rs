//! NodeName (upstream `framework/plugins/nodename`): a pod with `spec.nodeName` only fits that node.

use std::sync::Arc;

use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventResource, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo,
    Status,
};

use crate::names;

/// Filter reason when the node is not the requested one.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The NodeName plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodeName;

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(NodeName))
}

/// True when the pod names no node or names this one.
pub fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.node_name().is_none_or(|n| n == node.name())
}

impl Plugin for NodeName {
    fn name(&self) -> &str {
        names::NODE_NAME
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
        Some(vec![ClusterEventWithHint::new(EventResource::Node, ActionType::ADD)])
    }
}

/// Feasibility depends on `spec.nodeName`.
impl ksched_framework::SignPlugin for NodeName {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        let node_name = pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        sig.fragment(ksched_framework::batch::signature::NODE_NAME, |w| w.go_str(node_name));
        ksched_framework::Status::success()
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if fits(pod, node) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
        }
    }
}

/// Filter reads `spec.nodeName`.
impl ksched_framework::MemoPlugin for NodeName {
    fn memo_inputs(
        &self,
        _state: &CycleState,
        pod: &PodInfo,
        w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        w.go_str(pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helper::testing::{node, node_info, pod, pod_info};
    use ksched_framework::Code;
    use serde_json::json;

    #[test]
    fn filter() {
        let cases = [
            ("no host specified", json!({"containers": []}), "foo", true),
            ("empty host", json!({"containers": [], "nodeName": ""}), "foo", true),
            ("host matches", json!({"containers": [], "nodeName": "foo"}), "foo", true),
            ("host doesn't match", json!({"containers": [], "nodeName": "bar"}), "foo", false),
        ];
        for (name, spec, node_name, want) in cases {
            let got = NodeName.filter(
                &CycleState::new(),
                &pod_info(pod(json!({}), spec)),
                &node_info(node(json!({"name": node_name}), json!({}))),
            );
            if want {
                assert!(got.is_success(), "{name}: {got}");
            } else {
                assert_eq!(got.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(got.message(), ERR_REASON, "{name}");
            }
        }
        let events = NodeName.events_to_register().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.label(), "NodeAdd");
        assert!(events[0].hint.is_none());
    }
}
