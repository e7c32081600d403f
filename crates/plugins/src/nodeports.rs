//! NodePorts (upstream `framework/plugins/nodeports`): a pod's host ports must be free on the node.

use std::sync::Arc;

use ksched_framework::node_info::HostPortInfo;
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::HostPort;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, PreFilterPlugin, PreFilterResult, QueueingHint, Snapshot, Status,
};

use crate::helper::{as_pods, require};
use crate::names;

/// Filter reason when a requested host port is taken.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

const PRE_FILTER_STATE_KEY: &str = "PreFilterNodePorts";

/// The host ports the pod wants, computed once per cycle.
#[derive(Debug, Clone)]
struct PreFilterState(Arc<[HostPort]>);

/// The NodePorts plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodePorts;

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(NodePorts))
}

/// Host ports (hostPort > 0) of the pod's containers and restartable (sidecar) init containers,
/// with an empty IP read as 0.0.0.0 and an empty protocol as TCP.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else { return Vec::new() };
    let sidecars = spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|hp| *hp > 0)?;
            let or = |v: &Option<String>, default: &str| {
                v.as_deref().filter(|s| !s.is_empty()).unwrap_or(default).to_string()
            };
            Some(HostPort { ip: or(&p.host_ip, "0.0.0.0"), protocol: or(&p.protocol, "TCP"), port })
        })
        .collect()
}

/// True when none of `wanted` conflicts with the ports in use.
pub fn fits_ports(wanted: &[HostPort], in_use: &HostPortInfo) -> bool {
    !wanted.iter().any(|hp| in_use.conflicts(hp))
}

/// True when the pod's host ports are free on the node.
pub fn fits(pod: &PodInfo, node: &NodeInfo) -> bool {
    fits_ports(pod.host_ports(), &node.used_ports)
}

/// Queue when the deleted pod was assigned (or nominated) and held a port this pod wants.
fn is_schedulable_after_pod_deleted(
    pod: &Pod,
    old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (deleted, _) = as_pods(old, None)?;
    let deleted = require(deleted, "deleted pod")?;
    let node_name = deleted.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
    let nominated = deleted.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).unwrap_or_default();
    if node_name.is_empty() && nominated.is_empty() {
        return Ok(QueueingHint::QueueSkip);
    }
    let released = host_ports(deleted);
    if released.is_empty() {
        return Ok(QueueingHint::QueueSkip);
    }
    let mut in_use = HostPortInfo::default();
    for hp in &released {
        in_use.add(hp);
    }
    Ok(if fits_ports(&host_ports(pod), &in_use) { QueueingHint::QueueSkip } else { QueueingHint::Queue })
}

impl Plugin for NodePorts {
    fn name(&self) -> &str {
        names::NODE_PORTS
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
        Some(self)
    }
    fn as_memo(&self) -> Option<&dyn ksched_framework::MemoPlugin> {
        Some(self)
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::DELETE, is_schedulable_after_pod_deleted),
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD),
        ])
    }
}

/// Feasibility depends on the pod's host ports.
impl ksched_framework::SignPlugin for NodePorts {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        sig.fragment(ksched_framework::batch::signature::HOST_PORTS, |w| {
            ksched_framework::batch::signature::host_ports(&pod.pod, w)
        });
        ksched_framework::Status::success()
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.host_ports().is_empty() {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(pod.host_ports().into()));
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Ok(PreFilterState(wanted)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"));
        };
        if fits_ports(wanted, &node.used_ports) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON)
        }
    }
}

/// Filter reads the host ports PreFilter collected (address, protocol and number of each).
impl ksched_framework::MemoPlugin for NodePorts {
    fn memo_inputs(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        // Without the state PreFilter skipped the plugin, and its Filter does not run.
        let wanted = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).ok();
        w.bool(wanted.is_some());
        let wanted = wanted.map_or(&[][..], |s| &s.0[..]);
        w.count(wanted.len());
        for hp in wanted {
            w.str(&hp.ip);
            w.str(&hp.protocol);
            w.i64(i64::from(hp.port));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helper::testing::{node, pod, pod_info, pod_obj};
    use ksched_framework::{ClusterEvent, Code};
    use serde_json::{json, Value};

    /// Container ports from "PROTO/IP/PORT" strings.
    fn ports(specs: &[&str]) -> Value {
        let ps: Vec<Value> = specs
            .iter()
            .map(|s| {
                let parts: Vec<&str> = s.split('/').collect();
                json!({"containerPort": 1, "protocol": parts[0], "hostIP": parts[1],
                       "hostPort": parts[2].parse::<i32>().unwrap()})
            })
            .collect();
        Value::Array(ps)
    }

    fn pod_ports(node_name: &str, specs: &[&str]) -> Pod {
        pod(
            json!({"uid": format!("uid-{}", specs.join(","))}),
            json!({"nodeName": node_name, "containers": [{"name": "c", "ports": ports(specs)}]}),
        )
    }

    fn node_with_pod(specs: &[&str]) -> NodeInfo {
        let mut ni = NodeInfo::new(Arc::new(node(json!({"name": "n"}), json!({}))));
        ni.add_pod(Arc::new(pod_info(pod_ports("n", specs))));
        ni
    }

    #[test]
    fn pre_filter_and_filter() {
        let sidecar = |always: bool| {
            let mut c =
                json!({"name": "init", "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]});
            if always {
                c["restartPolicy"] = json!("Always");
            }
            pod(json!({}), json!({"containers": [], "initContainers": [c]}))
        };
        // (name, pod, ports used on the node, expected filter code; None = PreFilter skips)
        let cases: Vec<(&str, Pod, Vec<&str>, Option<Code>)> = vec![
            ("no host ports skips", pod(json!({}), json!({"containers": []})), vec![], None),
            ("other port", pod_ports("", &["UDP/127.0.0.1/8080"]), vec!["UDP/127.0.0.1/9090"], Some(Code::Success)),
            (
                "same udp port",
                pod_ports("", &["UDP/127.0.0.1/8080"]),
                vec!["UDP/127.0.0.1/8080"],
                Some(Code::Unschedulable),
            ),
            (
                "same tcp port",
                pod_ports("", &["TCP/127.0.0.1/8080"]),
                vec!["TCP/127.0.0.1/8080"],
                Some(Code::Unschedulable),
            ),
            (
                "different host ip",
                pod_ports("", &["TCP/127.0.0.1/8080"]),
                vec!["TCP/127.0.0.2/8080"],
                Some(Code::Success),
            ),
            (
                "different protocol",
                pod_ports("", &["UDP/127.0.0.1/8080"]),
                vec!["TCP/127.0.0.1/8080"],
                Some(Code::Success),
            ),
            (
                "second udp port conflict",
                pod_ports("", &["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"]),
                vec!["UDP/127.0.0.1/8080"],
                Some(Code::Unschedulable),
            ),
            (
                "first tcp port conflict",
                pod_ports("", &["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"]),
                vec!["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
                Some(Code::Unschedulable),
            ),
            (
                "wanted 0.0.0.0 conflicts",
                pod_ports("", &["TCP/0.0.0.0/8001"]),
                vec!["TCP/127.0.0.1/8001"],
                Some(Code::Unschedulable),
            ),
            (
                "second wanted 0.0.0.0 conflicts",
                pod_ports("", &["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"]),
                vec!["TCP/127.0.0.1/8001"],
                Some(Code::Unschedulable),
            ),
            (
                "used 0.0.0.0 conflicts",
                pod_ports("", &["TCP/127.0.0.1/8001"]),
                vec!["TCP/0.0.0.0/8001"],
                Some(Code::Unschedulable),
            ),
            (
                "used 0.0.0.0 other protocol",
                pod_ports("", &["UDP/127.0.0.1/8001"]),
                vec!["TCP/0.0.0.0/8001"],
                Some(Code::Success),
            ),
            (
                "used 0.0.0.0 udp conflicts",
                pod_ports("", &["UDP/127.0.0.1/8001"]),
                vec!["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
                Some(Code::Unschedulable),
            ),
            (
                "empty ip is 0.0.0.0, empty protocol TCP",
                pod_ports("", &["//8001"]),
                vec!["TCP/10.0.0.1/8001"],
                Some(Code::Unschedulable),
            ),
            ("empty protocol is not UDP", pod_ports("", &["//8001"]), vec!["UDP/10.0.0.1/8001"], Some(Code::Success)),
            ("non-sidecar init container skips", sidecar(false), vec!["TCP/0.0.0.0/8001"], None),
            ("sidecar init container conflicts", sidecar(true), vec!["TCP/0.0.0.0/8001"], Some(Code::Unschedulable)),
        ];
        for (name, p, used, want) in cases {
            let p = pod_info(p);
            let mut state = CycleState::new();
            let (result, status) = NodePorts.pre_filter(&mut state, &p, &Snapshot::default());
            assert!(result.is_none(), "{name}");
            let Some(want) = want else {
                assert!(status.is_skip(), "{name}: {status}");
                continue;
            };
            assert!(status.is_success(), "{name}: {status}");
            let got = NodePorts.filter(&state, &p, &node_with_pod(&used));
            assert_eq!(got.code(), want, "{name}");
            if want == Code::Unschedulable {
                assert_eq!(got.message(), ERR_REASON, "{name}");
            }
        }
    }

    #[test]
    fn filter_without_pre_filter_is_an_error() {
        let got = NodePorts.filter(&CycleState::new(), &pod_info(Pod::default()), &node_with_pod(&[]));
        assert_eq!(got.code(), Code::Error);
        assert_eq!(got.message(), "reading \"PreFilterNodePorts\" from cycleState: not found");
    }

    #[test]
    fn fits_cases() {
        let cases = [
            ("non-conflicting", vec!["TCP/127.0.0.1/80"], vec!["TCP/127.0.0.1/9090"], true),
            (
                "multiple non-conflicting",
                vec!["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
                vec!["TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"],
                true,
            ),
            ("same port other protocol", vec!["TCP/127.0.0.1/80"], vec!["UDP/127.0.0.1/80"], true),
            ("conflicting", vec!["TCP/127.0.0.1/80"], vec!["TCP/127.0.0.1/80"], false),
            (
                "some conflicting",
                vec!["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
                vec!["TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"],
                false,
            ),
        ];
        for (name, wanted, used, want) in cases {
            assert_eq!(fits(&pod_info(pod_ports("", &wanted)), &node_with_pod(&used)), want, "{name}");
        }
    }

    #[test]
    fn pod_deleted_hint() {
        let target = pod_ports("", &["TCP//8080"]);
        let nominated = {
            let mut p = pod_ports("", &["TCP//8080"]);
            p.status = Some(serde_json::from_value(json!({"nominatedNodeName": "n"})).unwrap());
            p
        };
        let cases = [
            ("wrong old object", Some(EventObject::Node(Default::default())), Err(())),
            ("no old object", None, Err(())),
            ("deleted pod unscheduled", Some(pod_obj(pod_ports("", &["TCP//8080"]))), Ok(QueueingHint::QueueSkip)),
            ("deleted pod without host ports", Some(pod_obj(pod_ports("fake-node", &[]))), Ok(QueueingHint::QueueSkip)),
            ("unrelated host port", Some(pod_obj(pod_ports("fake-node", &["TCP//8081"]))), Ok(QueueingHint::QueueSkip)),
            ("released host port", Some(pod_obj(pod_ports("fake-node", &["TCP//8080"]))), Ok(QueueingHint::Queue)),
            ("nominated pod released port", Some(pod_obj(nominated)), Ok(QueueingHint::Queue)),
        ];
        for (name, old, want) in cases {
            let got = is_schedulable_after_pod_deleted(&target, old.as_ref(), None);
            assert_eq!(got.map_err(|_| ()), want, "{name}");
        }
        let events: Vec<_> =
            NodePorts.events_to_register().unwrap().iter().map(|e| (e.event, e.hint.is_some())).collect();
        assert_eq!(
            events,
            [
                (ClusterEvent::new(EventResource::Pod, ActionType::DELETE), true),
                (ClusterEvent::new(EventResource::Node, ActionType::ADD), false),
            ]
        );
    }
}
