//! TaintToleration (upstream `framework/plugins/tainttoleration`): filters out nodes with untolerated NoSchedule/NoExecute taints and
//! prefers nodes with fewer untolerated PreferNoSchedule taints. The toleration matching helpers
//! here are shared with other plugins (NodeUnschedulable, PodTopologySpread).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, PreScorePlugin, QueueingHint, ScorePlugin, Status, MAX_NODE_SCORE,
};

use crate::helper::{as_nodes, as_pods, default_normalize_score, require, uid};
use crate::names;

/// Default of the TaintTolerationComparisonOperators feature gate (alpha in 1.36).
pub const COMPARISON_OPERATORS_DEFAULT: bool = false;

const PRE_SCORE_STATE_KEY: &str = "PreScoreTaintToleration";

/// Filter reason for an untolerated NoSchedule/NoExecute taint (1.36 no longer names the taint).
pub const ERR_REASON_UNTOLERATED: &str = "node(s) had untolerated taint(s)";

/// Upstream's older reason constant; kept for reference, never returned in 1.36.
pub const ERR_REASON_NOT_MATCH: &str = "node(s) had taints that the pod didn't tolerate";

/// True when the toleration tolerates the taint. `Lt`/`Gt` compare the taint value to the
/// toleration value numerically and only when `comparison_operators` (the feature gate) is on.
pub fn toleration_tolerates_taint(toleration: &Toleration, taint: &Taint, comparison_operators: bool) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    let tol_value = toleration.value.as_deref().unwrap_or_default();
    let taint_value = taint.value.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => tol_value == taint_value,
        "Exists" => true,
        op @ ("Lt" | "Gt") if comparison_operators => {
            match (parse_decimal_integer(tol_value), parse_decimal_integer(taint_value)) {
                (Some(tol), Some(tnt)) if op == "Lt" => tnt < tol,
                (Some(tol), Some(tnt)) => tnt > tol,
                _ => false,
            }
        }
        _ => false,
    }
}

/// A canonical decimal integer: optional `-`, no `+`, no leading zeros (except "0"), fits in i64.
fn parse_decimal_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = match digits.as_bytes() {
        [] => false,
        [b'0'] => digits.len() == s.len(),
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    };
    if canonical {
        s.parse().ok()
    } else {
        None
    }
}

/// True when any of the tolerations tolerates the taint.
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint, comparison_operators: bool) -> bool {
    tolerations.iter().any(|t| toleration_tolerates_taint(t, taint, comparison_operators))
}

/// The first taint accepted by `include` that no toleration tolerates.
pub fn find_matching_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    include: impl Fn(&Taint) -> bool,
    comparison_operators: bool,
) -> Option<&'a Taint> {
    taints.iter().filter(|t| include(t)).find(|t| !tolerations_tolerate_taint(tolerations, t, comparison_operators))
}

/// Taints that keep pods off a node: effect NoSchedule or NoExecute.
pub fn do_not_schedule_taint(taint: &Taint) -> bool {
    taint.effect == "NoSchedule" || taint.effect == "NoExecute"
}

/// The pod's tolerations (empty when unset).
pub fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default()
}

/// The node's taints (empty when unset).
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
}

/// The TaintToleration plugin.
#[derive(Debug, Clone, Copy)]
pub struct TaintToleration {
    comparison_operators: bool,
}

impl Default for TaintToleration {
    fn default() -> Self {
        TaintToleration { comparison_operators: COMPARISON_OPERATORS_DEFAULT }
    }
}

impl TaintToleration {
    /// The plugin with the TaintTolerationComparisonOperators gate set explicitly.
    pub fn with_comparison_operators(enabled: bool) -> Self {
        TaintToleration { comparison_operators: enabled }
    }

    /// Queue when the node went from having an untolerated NoSchedule/NoExecute taint (or not
    /// existing) to having none.
    fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = as_nodes(old, new)?;
        let modified = require(modified, "new node")?;
        let tolerations = pod_tolerations(pod);
        let untolerated = |n: &Node| {
            find_matching_untolerated_taint(
                node_taints(n),
                tolerations,
                do_not_schedule_taint,
                self.comparison_operators,
            )
            .is_some()
        };
        let was_untolerated = original.is_none_or(untolerated);
        Ok(if was_untolerated && !untolerated(modified) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
    }
}

/// Builds the plugin; it takes no args. `Lt`/`Gt` tolerations follow the
/// TaintTolerationComparisonOperators gate.
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(TaintToleration::with_comparison_operators(handle.features.taint_toleration_comparison_operators)))
}

/// Queue only when the rejected pod itself got a new toleration.
fn is_schedulable_after_pod_toleration_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, modified) = as_pods(old, new)?;
    let modified = require(modified, "new pod")?;
    Ok(if uid(modified) == uid(pod) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

impl Plugin for TaintToleration {
    fn name(&self) -> &str {
        names::TAINT_TOLERATION
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

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        let this = *self;
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_TAINT,
                move |pod, old, new| this.is_schedulable_after_node_change(pod, old, new),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::UPDATE_POD_TOLERATION,
                is_schedulable_after_pod_toleration_change,
            ),
        ])
    }
}

/// Feasibility and scores depend on the pod's tolerations.
impl ksched_framework::SignPlugin for TaintToleration {
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

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if node.node().is_none() {
            return Status::error("node not found");
        }
        let untolerated = find_matching_untolerated_taint(
            node.taints(),
            pod_tolerations(&pod.pod),
            do_not_schedule_taint,
            self.comparison_operators,
        );
        match untolerated {
            None => Status::success(),
            Some(_) => Status::unresolvable(ERR_REASON_UNTOLERATED),
        }
    }
}

/// Tolerations that can tolerate PreferNoSchedule taints (effect empty or PreferNoSchedule).
#[derive(Debug, Clone)]
struct PreScoreState {
    tolerations_prefer_no_schedule: Arc<Vec<Toleration>>,
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[&NodeInfo],
        _snapshot: &ksched_framework::Snapshot,
    ) -> Status {
        let tolerations = pod_tolerations(&pod.pod)
            .iter()
            .filter(|t| matches!(t.effect.as_deref(), None | Some("") | Some("PreferNoSchedule")))
            .cloned()
            .collect();
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { tolerations_prefer_no_schedule: Arc::new(tolerations) });
        Status::success()
    }
}

fn read_pre_score_state(state: &CycleState) -> Result<&PreScoreState, Status> {
    state
        .read::<PreScoreState>(PRE_SCORE_STATE_KEY)
        .map_err(|_| Status::error(format!("failed to read {PRE_SCORE_STATE_KEY:?} from cycleState: not found")))
}

impl TaintToleration {
    /// The score before normalizing: how many PreferNoSchedule taints the pod does not tolerate.
    fn intolerable_prefer_no_schedule(&self, s: &PreScoreState, node: &NodeInfo) -> i64 {
        let tolerations = s.tolerations_prefer_no_schedule.as_slice();
        node.taints()
            .iter()
            .filter(|t| t.effect == "PreferNoSchedule")
            .filter(|t| !tolerations_tolerate_taint(tolerations, t, self.comparison_operators))
            .count() as i64
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = read_pre_score_state(state)?;
        Ok(self.intolerable_prefer_no_schedule(s, node))
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), (usize, Status)> {
        let s = read_pre_score_state(state).map_err(|e| (0, e))?;
        for (node, o) in nodes.iter().zip(out) {
            *o = self.intolerable_prefer_no_schedule(s, node);
        }
        Ok(())
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize_score(&self, _: &CycleState, _: &PodInfo, _: &[&NodeInfo], scores: &mut [i64]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

/// Filter reads every toleration; Score, those with PreferNoSchedule.
impl ksched_framework::MemoPlugin for TaintToleration {
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

    fn taint(key: &str, value: &str, effect: &str) -> Value {
        json!({"key": key, "value": value, "effect": effect})
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Value {
        let mut t = json!({"key": key, "value": value, "effect": effect});
        if !op.is_empty() {
            t["operator"] = json!(op);
        }
        t
    }

    fn pod_with(tolerations: Vec<Value>) -> Pod {
        pod(json!({}), json!({"containers": [], "tolerations": tolerations}))
    }

    fn node_with(name: &str, taints: Vec<Value>) -> Node {
        node(json!({"name": name}), json!({"taints": taints}))
    }

    #[test]
    fn toleration_matching() {
        let t = |v: Value| serde_json::from_value::<Toleration>(v).unwrap();
        let tn = |v: Value| serde_json::from_value::<Taint>(v).unwrap();
        let cases = [
            (
                "empty key + Exists tolerates all",
                json!({"operator": "Exists"}),
                taint("k", "v", "NoExecute"),
                false,
                true,
            ),
            ("effect mismatch", tol("k", "Equal", "v", "NoSchedule"), taint("k", "v", "NoExecute"), false, false),
            ("empty effect matches any", tol("k", "Equal", "v", ""), taint("k", "v", "NoExecute"), false, true),
            ("key mismatch", tol("k2", "Exists", "", ""), taint("k", "v", "NoSchedule"), false, false),
            ("empty operator means Equal", tol("k", "", "v", ""), taint("k", "v", "NoSchedule"), false, true),
            ("Equal value mismatch", tol("k", "Equal", "v2", ""), taint("k", "v", "NoSchedule"), false, false),
            ("Equal empty values", json!({"key": "k"}), json!({"key": "k", "effect": "NoSchedule"}), false, true),
            ("unknown operator", tol("k", "Foo", "v", ""), taint("k", "v", "NoSchedule"), false, false),
            ("Gt gate off", tol("k", "Gt", "1", ""), taint("k", "5", "NoSchedule"), false, false),
            ("Gt gate on", tol("k", "Gt", "1", ""), taint("k", "5", "NoSchedule"), true, true),
            ("Gt not greater", tol("k", "Gt", "5", ""), taint("k", "5", "NoSchedule"), true, false),
            ("Lt gate on", tol("k", "Lt", "10", ""), taint("k", "5", "NoSchedule"), true, true),
            ("Lt negative", tol("k", "Lt", "0", ""), taint("k", "-3", "NoSchedule"), true, true),
            ("Lt non-numeric taint", tol("k", "Lt", "10", ""), taint("k", "high", "NoSchedule"), true, false),
            ("Lt leading zero rejected", tol("k", "Lt", "10", ""), taint("k", "05", "NoSchedule"), true, false),
            ("Gt plus sign rejected", tol("k", "Gt", "+1", ""), taint("k", "5", "NoSchedule"), true, false),
            ("Gt minus zero rejected", tol("k", "Gt", "-1", ""), taint("k", "-0", "NoSchedule"), true, false),
            (
                "Gt overflow rejected",
                tol("k", "Gt", "1", ""),
                taint("k", "99999999999999999999", "NoSchedule"),
                true,
                false,
            ),
        ];
        for (name, toleration, tainted, gate, want) in cases {
            assert_eq!(toleration_tolerates_taint(&t(toleration), &tn(tainted), gate), want, "{name}");
        }
    }

    #[test]
    fn filter() {
        let cases = [
            (
                "no tolerations vs NoSchedule taint",
                vec![],
                vec![taint("dedicated", "user1", "NoSchedule")],
                false,
                false,
            ),
            (
                "tolerated dedicated taint",
                vec![tol("dedicated", "", "user1", "NoSchedule")],
                vec![taint("dedicated", "user1", "NoSchedule")],
                false,
                true,
            ),
            (
                "value mismatch",
                vec![tol("dedicated", "Equal", "user2", "NoSchedule")],
                vec![taint("dedicated", "user1", "NoSchedule")],
                false,
                false,
            ),
            (
                "Exists tolerates",
                vec![tol("foo", "Exists", "", "NoSchedule")],
                vec![taint("foo", "bar", "NoSchedule")],
                false,
                true,
            ),
            (
                "all of several taints tolerated",
                vec![tol("dedicated", "Equal", "user2", "NoSchedule"), tol("foo", "Exists", "", "NoSchedule")],
                vec![taint("dedicated", "user2", "NoSchedule"), taint("foo", "bar", "NoSchedule")],
                false,
                true,
            ),
            (
                "effect mismatch",
                vec![tol("foo", "Equal", "bar", "PreferNoSchedule")],
                vec![taint("foo", "bar", "NoSchedule")],
                false,
                false,
            ),
            (
                "empty effect tolerates",
                vec![tol("foo", "Equal", "bar", "")],
                vec![taint("foo", "bar", "NoSchedule")],
                false,
                true,
            ),
            (
                "PreferNoSchedule taints are ignored",
                vec![tol("dedicated", "Equal", "user2", "NoSchedule")],
                vec![taint("dedicated", "user1", "PreferNoSchedule")],
                false,
                true,
            ),
            ("NoExecute untolerated", vec![], vec![taint("k", "v", "NoExecute")], false, false),
            (
                "Gt below threshold",
                vec![tol("p", "Gt", "950", "NoSchedule")],
                vec![taint("p", "800", "NoSchedule")],
                true,
                false,
            ),
            (
                "Gt above threshold",
                vec![tol("p", "Gt", "750", "NoSchedule")],
                vec![taint("p", "950", "NoSchedule")],
                true,
                true,
            ),
            (
                "Lt above threshold",
                vec![tol("p", "Lt", "800", "NoSchedule")],
                vec![taint("p", "950", "NoSchedule")],
                true,
                false,
            ),
            (
                "Lt below threshold",
                vec![tol("p", "Lt", "950", "NoSchedule")],
                vec![taint("p", "800", "NoSchedule")],
                true,
                true,
            ),
            (
                "Gt non-numeric",
                vec![tol("p", "Gt", "950", "NoSchedule")],
                vec![taint("p", "high", "NoSchedule")],
                true,
                false,
            ),
            (
                "Gt with gate off",
                vec![tol("p", "Gt", "750", "NoSchedule")],
                vec![taint("p", "950", "NoSchedule")],
                false,
                false,
            ),
            (
                "mixed tolerations, gate off, only Equal needed",
                vec![tol("dedicated", "Equal", "user1", "NoSchedule"), tol("p", "Gt", "750", "NoSchedule")],
                vec![taint("dedicated", "user1", "NoSchedule")],
                false,
                true,
            ),
            (
                "mixed tolerations, gate off, Gt needed",
                vec![tol("dedicated", "Equal", "user1", "NoSchedule"), tol("p", "Gt", "750", "NoSchedule")],
                vec![taint("dedicated", "user1", "NoSchedule"), taint("p", "950", "NoSchedule")],
                false,
                false,
            ),
        ];
        for (name, tolerations, taints, gate, fits) in cases {
            let pl = TaintToleration::with_comparison_operators(gate);
            let got =
                pl.filter(&CycleState::new(), &pod_info(pod_with(tolerations)), &node_info(node_with("n", taints)));
            if fits {
                assert!(got.is_success(), "{name}: {got}");
            } else {
                assert_eq!(got.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(got.message(), ERR_REASON_UNTOLERATED, "{name}");
            }
        }
    }

    /// The factory takes `Lt`/`Gt` support from the TaintTolerationComparisonOperators gate in
    /// the handle (upstream's TestTaintTolerationFilter runs with the gate on).
    #[test]
    fn comparison_operators_follow_the_gate() {
        let p = pod_info(pod_with(vec![tol("sla", "Gt", "900", "NoSchedule")]));
        let n = node_info(node_with("n", vec![taint("sla", "950", "NoSchedule")]));
        for gate in [false, true] {
            let mut handle = Handle::for_tests();
            handle.features.taint_toleration_comparison_operators = gate;
            let pl = new(None, &handle).unwrap();
            let got = pl.as_filter().unwrap().filter(&CycleState::new(), &p, &n);
            assert_eq!(got.is_success(), gate, "gate {gate}: {got}");
        }
    }

    #[test]
    fn score() {
        let pns = "PreferNoSchedule";
        let cases = [
            (
                "tolerated node beats untolerated",
                vec![tol("foo", "Equal", "bar", pns)],
                vec![vec![taint("foo", "bar", pns)], vec![taint("foo", "blah", pns)]],
                false,
                vec![100, 0],
            ),
            (
                "number of tolerated taints does not matter",
                vec![tol("cpu-type", "Equal", "arm64", pns), tol("disk-type", "Equal", "ssd", pns)],
                vec![
                    vec![],
                    vec![taint("cpu-type", "arm64", pns)],
                    vec![taint("cpu-type", "arm64", pns), taint("disk-type", "ssd", pns)],
                ],
                false,
                vec![100, 100, 100],
            ),
            (
                "more untolerated taints, lower score",
                vec![tol("foo", "Equal", "bar", pns)],
                vec![
                    vec![],
                    vec![taint("cpu-type", "arm64", pns)],
                    vec![taint("cpu-type", "arm64", pns), taint("disk-type", "ssd", pns)],
                ],
                false,
                vec![100, 50, 0],
            ),
            (
                "only PreferNoSchedule taints and tolerations count",
                vec![tol("cpu-type", "Equal", "arm64", "NoSchedule"), tol("disk-type", "Equal", "ssd", "NoSchedule")],
                vec![
                    vec![],
                    vec![taint("cpu-type", "arm64", "NoSchedule")],
                    vec![taint("cpu-type", "arm64", pns), taint("disk-type", "ssd", pns)],
                ],
                false,
                vec![100, 100, 0],
            ),
            ("no tolerations", vec![], vec![vec![], vec![taint("cpu-type", "arm64", pns)]], false, vec![100, 0]),
            (
                "Gt prefers matching SLA",
                vec![tol("sla", "Gt", "950", pns)],
                vec![vec![taint("sla", "800", pns)], vec![taint("sla", "999", pns)]],
                true,
                vec![0, 100],
            ),
            (
                "Lt prefers matching SLA",
                vec![tol("sla", "Lt", "800", pns)],
                vec![vec![taint("sla", "950", pns)], vec![taint("sla", "700", pns)]],
                true,
                vec![0, 100],
            ),
        ];
        for (name, tolerations, node_taints, gate, want) in cases {
            let pl = TaintToleration::with_comparison_operators(gate);
            let p = pod_info(pod_with(tolerations));
            let nodes: Vec<Arc<NodeInfo>> = node_taints
                .into_iter()
                .enumerate()
                .map(|(i, t)| Arc::new(node_info(node_with(&format!("n{i}"), t))))
                .collect();
            let mut state = CycleState::new();
            assert!(
                pl.pre_score(
                    &mut state,
                    &p,
                    &ksched_framework::node_refs(&nodes),
                    &ksched_framework::Snapshot::default()
                )
                .is_success(),
                "{name}"
            );
            let mut scores: Vec<i64> = nodes.iter().map(|n| pl.score(&state, &p, n).unwrap()).collect();
            assert!(pl.normalize_score(&state, &p, &ksched_framework::node_refs(&nodes), &mut scores).is_success());
            assert_eq!(scores, want, "{name}");
        }
    }

    #[test]
    fn score_without_pre_score_is_an_error() {
        let got = TaintToleration::default()
            .score(&CycleState::new(), &pod_info(pod_with(vec![])), &node_info(node_with("n", vec![])))
            .unwrap_err();
        assert_eq!(got.code(), Code::Error);
        assert_eq!(got.message(), "failed to read \"PreScoreTaintToleration\" from cycleState: not found");
    }

    #[test]
    fn node_change_hint() {
        let p = pod_with(vec![tol("dedicated", "Equal", "user2", "NoSchedule")]);
        let n = |taints: Vec<Value>| Some(node_obj(node_with("nodeA", taints)));
        let cases = [
            ("wrong new object", None, Some(pod_obj(p.clone())), Err(())),
            ("wrong old object", Some(pod_obj(p.clone())), n(vec![]), Err(())),
            (
                "untolerated node added",
                None,
                n(vec![taint("dedicated", "user1", "NoSchedule")]),
                Ok(QueueingHint::QueueSkip),
            ),
            ("tolerated node added", None, n(vec![taint("dedicated", "user2", "NoSchedule")]), Ok(QueueingHint::Queue)),
            (
                "unrelated change",
                n(vec![taint("dedicated", "user1", "NoSchedule")]),
                n(vec![taint("dedicated", "user1", "NoSchedule"), taint("dedicated", "user3", "NoSchedule")]),
                Ok(QueueingHint::QueueSkip),
            ),
            (
                "taint became tolerated",
                n(vec![taint("dedicated", "user1", "NoSchedule")]),
                n(vec![taint("dedicated", "user2", "NoSchedule")]),
                Ok(QueueingHint::Queue),
            ),
            (
                "was already tolerated",
                n(vec![]),
                n(vec![taint("dedicated", "user2", "NoSchedule")]),
                Ok(QueueingHint::QueueSkip),
            ),
        ];
        for (name, old, new, want) in cases {
            let got = TaintToleration::default().is_schedulable_after_node_change(&p, old.as_ref(), new.as_ref());
            assert_eq!(got.map_err(|_| ()), want, "{name}");
        }
    }

    #[test]
    fn pod_toleration_hint() {
        let with_uid =
            |uid: &str, tols: Vec<Value>| pod(json!({"uid": uid}), json!({"containers": [], "tolerations": tols}));
        let target = with_uid("uid0", vec![]);
        let cases = [
            ("wrong new object", None, Some(node_obj(Node::default())), Err(())),
            ("wrong old object", Some(node_obj(Node::default())), Some(pod_obj(Pod::default())), Err(())),
            (
                "other pod updated",
                Some(pod_obj(with_uid("uid1", vec![]))),
                Some(pod_obj(with_uid("uid1", vec![json!({"key": "foo", "effect": "NoSchedule"})]))),
                Ok(QueueingHint::QueueSkip),
            ),
            (
                "toleration added to the pod",
                Some(pod_obj(with_uid("uid0", vec![]))),
                Some(pod_obj(with_uid("uid0", vec![json!({"key": "foo", "effect": "NoSchedule"})]))),
                Ok(QueueingHint::Queue),
            ),
        ];
        for (name, old, new, want) in cases {
            let got = is_schedulable_after_pod_toleration_change(&target, old.as_ref(), new.as_ref());
            assert_eq!(got.map_err(|_| ()), want, "{name}");
        }
        let events = TaintToleration::default().events_to_register().unwrap();
        let got: Vec<_> = events.iter().map(|e| (e.event, e.hint.is_some())).collect();
        assert_eq!(
            got,
            [
                (ClusterEvent::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_TAINT), true),
                (ClusterEvent::new(EventResource::Pod, ActionType::UPDATE_POD_TOLERATION), true),
            ]
        );
    }
}
