//! SchedulingGates (upstream `framework/plugins/schedulinggates`): keeps pods with `spec.schedulingGates` out of the active queue.

use std::sync::Arc;

use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, Handle, Plugin, PodInfo, PreEnqueuePlugin,
    QueueingHint, Status,
};

use crate::helper::{as_pods, require, uid};
use crate::names;

/// Gates pods until their scheduling gates are all removed.
#[derive(Debug, Default, Clone, Copy)]
pub struct SchedulingGates;

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(SchedulingGates))
}

impl Plugin for SchedulingGates {
    fn name(&self) -> &str {
        names::SCHEDULING_GATES
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![ClusterEventWithHint::with_hint(
            EventResource::Pod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            is_schedulable_after_gates_eliminated,
        )])
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let gates = pod.pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_deref()).unwrap_or_default();
        if gates.is_empty() {
            return Status::success();
        }
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        Status::unresolvable(format!("waiting for scheduling gates: [{}]", names.join(" ")))
    }
}

/// Only the gated pod's own update can ungate it.
fn is_schedulable_after_gates_eliminated(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, modified) = as_pods(old, new)?;
    let modified = require(modified, "new pod")?;
    Ok(if uid(modified) == uid(pod) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helper::testing::{node_obj, pod, pod_info, pod_obj};
    use ksched_framework::Code;
    use serde_json::json;

    fn gated(uid: &str, gates: &[&str]) -> Pod {
        let gates: Vec<_> = gates.iter().map(|g| json!({"name": g})).collect();
        pod(json!({"uid": uid}), json!({"containers": [], "schedulingGates": gates}))
    }

    #[test]
    fn pre_enqueue() {
        let cases = [
            ("no gates", pod(json!({}), json!({"containers": []})), None),
            ("empty gate list", gated("u", &[]), None),
            ("two gates", gated("u", &["foo", "bar"]), Some("waiting for scheduling gates: [foo bar]")),
        ];
        for (name, p, want) in cases {
            let got = SchedulingGates.pre_enqueue(&pod_info(p));
            match want {
                None => assert!(got.is_success(), "{name}: {got}"),
                Some(msg) => {
                    assert_eq!(got.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(got.message(), msg, "{name}");
                }
            }
        }
    }

    #[test]
    fn queueing_hint() {
        let node = node_obj(Default::default());
        let cases = [
            ("wrong old object", gated("u0", &["a"]), Some(node.clone()), Some(pod_obj(gated("u0", &[]))), Err(())),
            ("wrong new object", gated("u0", &["a"]), None, Some(node.clone()), Err(())),
            (
                "other pod updated",
                gated("u0", &["foo", "bar"]),
                Some(pod_obj(gated("u1", &["foo", "bar"]))),
                Some(pod_obj(gated("u1", &["foo"]))),
                Ok(QueueingHint::QueueSkip),
            ),
            (
                "the gated pod updated",
                gated("u0", &["foo"]),
                Some(pod_obj(gated("u0", &["foo"]))),
                Some(pod_obj(gated("u0", &[]))),
                Ok(QueueingHint::Queue),
            ),
        ];
        for (name, p, old, new, want) in cases {
            let got = is_schedulable_after_gates_eliminated(&p, old.as_ref(), new.as_ref()).map_err(|_| ());
            assert_eq!(got, want, "{name}");
        }
        let events = SchedulingGates.events_to_register().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.label(), "PodUpdatePodSchedulingGatesEliminated");
    }
}
