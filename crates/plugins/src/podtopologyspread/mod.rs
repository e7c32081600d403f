//! PodTopologySpread (upstream `framework/plugins/podtopologyspread`): keeps pods matching a selector evenly spread over topology domains.
//! Hard (`DoNotSchedule`) constraints are enforced by PreFilter/Filter, soft (`ScheduleAnyway`)
//! ones by PreScore/Score. Pods without constraints get the configured default constraints, with a
//! selector derived from the Services and the controller that own them.

mod args;
mod common;
mod filtering;
mod index;
mod scoring;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use ksched_framework::listers::ClusterLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::registry::decode_args;
use ksched_framework::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Handle, Plugin, PreFilterPlugin,
    PreScorePlugin, QueueingHint, ScorePlugin,
};

use crate::helper::{as_nodes, as_pods};
use crate::names;

pub use args::{validate_args, DefaultConstraint, PodTopologySpreadArgs, LIST_DEFAULTING, SYSTEM_DEFAULTING};
use common::{node_has_all_topology_keys, Constraint, NodeInclusionPolicy};

/// Filter reason when the skew of some constraint would exceed its maxSkew.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Filter reason when the node lacks a topology key of a hard constraint.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// `whenUnsatisfiable` of hard constraints.
pub const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
/// `whenUnsatisfiable` of soft constraints.
pub const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

/// The well-known hostname label; spreading on it is counted per node.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The well-known zone label.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";

/// The constraints used with `defaultingType: System`.
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    let soft = |key: &str, max_skew: i32| TopologySpreadConstraint {
        max_skew,
        topology_key: key.to_string(),
        when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
        ..Default::default()
    };
    vec![soft(LABEL_HOSTNAME, 3), soft(LABEL_TOPOLOGY_ZONE, 5)]
}

/// The PodTopologySpread plugin. Cheap to clone: the queueing hints hold a copy.
#[derive(Clone)]
pub struct PodTopologySpread {
    /// True with `defaultingType: System`; relaxes the "node has every key" rule when scoring.
    system_defaulted: bool,
    default_constraints: Arc<[TopologySpreadConstraint]>,
    lister: Arc<dyn ClusterLister>,
    /// Per-node domains and pod counts carried over from earlier cycles.
    index: Arc<index::SpreadIndex>,
    /// Feature gates that change how constraints are read.
    gates: common::ConstraintGates,
}

impl std::fmt::Debug for PodTopologySpread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodTopologySpread")
            .field("system_defaulted", &self.system_defaulted)
            .field("default_constraints", &self.default_constraints)
            .finish()
    }
}

/// Builds the plugin from `PodTopologySpreadArgs` (decoded strictly, defaulted, validated).
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args: PodTopologySpreadArgs = decode_args(args)?;
    Ok(Arc::new(PodTopologySpread::from_args(args, handle)?))
}

impl PodTopologySpread {
    /// The plugin for decoded args; defaults them and fails with upstream's validation message.
    pub fn from_args(mut args: PodTopologySpreadArgs, handle: &Handle) -> Result<Self, String> {
        args.set_defaults();
        let errs = validate_args("", &args);
        if !errs.is_empty() {
            return Err(args::aggregate(&errs));
        }
        let system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING;
        let default_constraints: Vec<TopologySpreadConstraint> = if system_defaulted {
            system_default_constraints()
        } else {
            args.default_constraints.iter().map(DefaultConstraint::to_api).collect()
        };
        Ok(PodTopologySpread {
            system_defaulted,
            default_constraints: default_constraints.into(),
            lister: handle.lister.clone(),
            index: Arc::default(),
            gates: common::ConstraintGates::from_features(&handle.features),
        })
    }

    /// The constraints of `pod` for one `whenUnsatisfiable` action: its own when it has any,
    /// otherwise the defaults with a selector derived from the objects that own the pod.
    /// `kind` ("hard"/"soft") only words the error.
    fn constraints_for(&self, pod: &Pod, action: &str, kind: &str) -> Result<Vec<Constraint>, String> {
        let own = common::pod_constraints(pod);
        if !own.is_empty() {
            common::filter_constraints(own, common::pod_labels(pod), action, self.gates)
                .map_err(|e| format!("obtaining pod's {kind} topology spread constraints: {e}"))
        } else {
            self.build_default_constraints(pod, action)
                .map_err(|e| format!("setting default {kind} topology spread constraints: {e}"))
        }
    }

    /// Hard constraints (what the queueing hints and PreFilter use).
    fn hard_constraints(&self, pod: &Pod) -> Result<Vec<Constraint>, String> {
        self.constraints_for(pod, DO_NOT_SCHEDULE, "hard")
    }

    fn build_default_constraints(&self, pod: &Pod, action: &str) -> Result<Vec<Constraint>, String> {
        let mut constraints =
            common::filter_constraints(&self.default_constraints, common::pod_labels(pod), action, self.gates)?;
        if constraints.is_empty() {
            return Ok(constraints);
        }
        let selector = common::default_selector(pod, self.lister.as_ref());
        if selector.is_everything() {
            return Ok(Vec::new());
        }
        for c in &mut constraints {
            c.selector = selector.clone();
        }
        Ok(constraints)
    }

    /// Queue when an assigned (or nominated) pod in the pod's namespace that matches a hard
    /// constraint's selector appears, disappears or changes whether it matches; or when the pod
    /// itself gains a toleration while some constraint honours taints.
    fn is_schedulable_after_pod_change(
        &self,
        pod: &Pod,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = as_pods(old, new)?;
        let involved = |p: &Pod| involved_in_topology_spreading(p, pod);
        if modified.is_some_and(|p| !involved(p)) || original.is_some_and(|p| !involved(p)) {
            return Ok(QueueingHint::QueueSkip);
        }
        let constraints = self.hard_constraints(pod)?;
        let matches_any = |p: &Pod| constraints.iter().any(|c| c.selector.matches(common::pod_labels(p)));
        match (original, modified) {
            (Some(original), Some(modified)) => {
                let honours_taints = constraints.iter().any(|c| c.node_taints_policy == NodeInclusionPolicy::Honor);
                if crate::helper::uid(modified) == crate::helper::uid(pod)
                    && common::pod_tolerations(modified) != common::pod_tolerations(original)
                    && honours_taints
                {
                    return Ok(QueueingHint::Queue);
                }
                let (before, after) = (common::pod_labels(original), common::pod_labels(modified));
                if before == after {
                    return Ok(QueueingHint::QueueSkip);
                }
                let changed = constraints.iter().any(|c| c.selector.matches(before) != c.selector.matches(after));
                Ok(if changed { QueueingHint::Queue } else { QueueingHint::QueueSkip })
            }
            (None, Some(added)) => Ok(if matches_any(added) { QueueingHint::Queue } else { QueueingHint::QueueSkip }),
            (Some(deleted), None) => {
                Ok(if matches_any(deleted) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
            }
            (None, None) => Ok(QueueingHint::QueueSkip),
        }
    }

    /// Queue when a node carrying every topology key of the hard constraints appears or
    /// disappears, or such a node changes a topology value or its taints.
    fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = as_nodes(old, new)?;
        let constraints = self.hard_constraints(pod)?;
        let matching =
            |n: Option<&Node>| n.is_some_and(|n| node_has_all_topology_keys(common::node_labels(n), &constraints));
        let (was_matching, is_matching) = (matching(original), matching(modified));
        let queue = match (original, modified) {
            (Some(original), Some(modified)) => {
                was_matching != is_matching
                    || (is_matching
                        && (topology_values_changed(original, modified, &constraints)
                            || common::node_taints(original) != common::node_taints(modified)))
            }
            (None, Some(_)) => is_matching,
            _ => was_matching,
        };
        Ok(if queue { QueueingHint::Queue } else { QueueingHint::QueueSkip })
    }
}

/// Whether `incoming` can affect the spreading of `pod`: it is the pod itself, or it is assigned
/// or nominated to a node and lives in the same namespace.
fn involved_in_topology_spreading(incoming: &Pod, pod: &Pod) -> bool {
    if crate::helper::uid(incoming) == crate::helper::uid(pod) {
        return true;
    }
    let assigned = incoming.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    let nominated =
        incoming.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty());
    if !assigned && !nominated {
        return false;
    }
    incoming.metadata.namespace == pod.metadata.namespace
}

fn topology_values_changed(original: &Node, modified: &Node, constraints: &[Constraint]) -> bool {
    let (before, after) = (common::node_labels(original), common::node_labels(modified));
    constraints.iter().any(|c| before.get(&c.topology_key) != after.get(&c.topology_key))
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &str {
        names::POD_TOPOLOGY_SPREAD
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

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        let (for_pods, for_nodes) = (self.clone(), self.clone());
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::UPDATE_POD_TOLERATION | ActionType::DELETE,
                move |pod, old, new| for_pods.is_schedulable_after_pod_change(pod, old, new),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::DELETE | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_TAINT,
                move |pod, old, new| for_nodes.is_schedulable_after_node_change(pod, old, new),
            ),
        ])
    }
}

/// Spreading depends on other pods' placements: pods with constraints (their own or the
/// defaults) are not signed.
impl ksched_framework::SignPlugin for PodTopologySpread {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        _sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        if pod.pod.spec.as_ref().is_some_and(|s| s.topology_spread_constraints.as_ref().is_some_and(|c| !c.is_empty()))
        {
            return ksched_framework::Status::unschedulable("pods with topology constraints are not signable");
        }
        if !self.default_constraints.is_empty() {
            return ksched_framework::Status::unschedulable("pods with default topology constraints are not signable");
        }
        ksched_framework::Status::success()
    }
}
