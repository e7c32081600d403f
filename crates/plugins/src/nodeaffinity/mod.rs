//! NodeAffinity (upstream `framework/plugins/nodeaffinity`): `spec.nodeSelector`, required/preferred node affinity, and the
//! scheduler-enforced `addedAffinity` from the plugin args.

pub mod selector;

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeAffinity as ApiNodeAffinity;
use ksched_framework::labels::SelectableNode;
use ksched_framework::pod::Pod;
use ksched_framework::registry::decode_args;
use ksched_framework::{
    ActionType, BoundFilter, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle,
    NodeInfo, Plugin, PodInfo, PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, ScorePlugin, Snapshot,
    Status, MAX_NODE_SCORE,
};
use serde::{Deserialize, Serialize};

use crate::helper::{as_nodes, default_normalize_score, require};
use crate::names;
pub use selector::{FieldPath, LazyErrorNodeSelector, NodeSelector, PreferredSchedulingTerms, RequiredNodeAffinity};

/// Filter reason when the pod's node selector or required node affinity does not match.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Filter reason when `addedAffinity.requiredDuringSchedulingIgnoredDuringExecution` does not match.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// PreFilter reason when every required term names nodes and their union is empty.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeAffinity";
const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeAffinity";

/// `NodeAffinityArgs` (kubescheduler.config.k8s.io/v1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinityArgs {
    /// Affinity every pod must additionally satisfy (required) and is scored by (preferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_affinity: Option<ApiNodeAffinity>,
}

/// Validates the args like upstream's `ValidateNodeAffinityArgs`; `path` is the field path of the
/// args object ("" for none) and prefixes every error.
pub fn validate_node_affinity_args(path: &str, args: &NodeAffinityArgs) -> Result<(), String> {
    parse_added_affinity(path, args).map(|_| ())
}

type ParsedAdded = (Option<NodeSelector>, Option<PreferredSchedulingTerms>);

fn parse_added_affinity(path: &str, args: &NodeAffinityArgs) -> Result<ParsedAdded, String> {
    let Some(aff) = &args.added_affinity else { return Ok((None, None)) };
    let base = FieldPath::new(path).child("addedAffinity");
    let mut errs = Vec::new();
    let required = match &aff.required_during_scheduling_ignored_during_execution {
        None => None,
        Some(ns) => NodeSelector::parse(ns, &base.child("requiredDuringSchedulingIgnoredDuringExecution"))
            .map_err(|e| errs.extend(e))
            .ok(),
    };
    let preferred = match aff.preferred_during_scheduling_ignored_during_execution.as_deref() {
        None | Some([]) => None,
        Some(terms) => {
            PreferredSchedulingTerms::parse(terms, &base.child("preferredDuringSchedulingIgnoredDuringExecution"))
                .map_err(|e| errs.extend(e))
                .ok()
        }
    };
    if errs.is_empty() {
        Ok((required, preferred))
    } else {
        Err(selector::aggregate_message(&errs))
    }
}

/// True when the node satisfies the pod's `spec.nodeSelector` and required node affinity (terms
/// that fail to parse never match). For callers that check many nodes, parse once with
/// [`RequiredNodeAffinity::new`] instead.
pub fn required_node_affinity_matches(pod: &Pod, node: &(impl SelectableNode + ?Sized)) -> bool {
    RequiredNodeAffinity::new(pod).matches_ignoring_errors(node)
}

/// The pod's preferred node affinity terms, parsed; `None` when the pod has none.
fn pod_preferred_node_affinity(pod: &Pod) -> Result<Option<PreferredSchedulingTerms>, String> {
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.preferred_during_scheduling_ignored_during_execution.as_ref());
    terms.map(|t| PreferredSchedulingTerms::new(t, &FieldPath::default())).transpose()
}

#[derive(Debug, Default)]
struct Added {
    required: Option<NodeSelector>,
    preferred: Option<PreferredSchedulingTerms>,
}

/// The NodeAffinity plugin.
#[derive(Debug, Clone, Default)]
pub struct NodeAffinity {
    added: Arc<Added>,
}

/// The pod's parsed required affinity, shared by Filter across nodes.
#[derive(Debug, Clone)]
struct PreFilterState(Arc<RequiredNodeAffinity>);

/// The pod's parsed preferred terms, shared by Score across nodes.
#[derive(Debug, Clone)]
struct PreScoreState(Option<Arc<PreferredSchedulingTerms>>);

/// Builds the plugin from `NodeAffinityArgs` (decoded strictly, then validated).
pub fn new(args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args: NodeAffinityArgs = decode_args(args)?;
    Ok(Arc::new(NodeAffinity::from_args(&args)?))
}

impl NodeAffinity {
    /// The plugin for already decoded args.
    pub fn from_args(args: &NodeAffinityArgs) -> Result<Self, String> {
        let (required, preferred) = parse_added_affinity("", args)?;
        Ok(NodeAffinity { added: Arc::new(Added { required, preferred }) })
    }

    /// Queue when the added or updated node now satisfies both the enforced and the pod's required
    /// affinity and (for updates) did not before.
    fn is_schedulable_after_node_change(
        &self,
        pod: &Pod,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = as_nodes(old, new)?;
        let modified = require(modified, "new node")?;
        if self.added.required.as_ref().is_some_and(|s| !s.matches(modified)) {
            return Ok(QueueingHint::QueueSkip);
        }
        let required = RequiredNodeAffinity::new(pod);
        if !required.matches(modified)? {
            return Ok(QueueingHint::QueueSkip);
        }
        let Some(original) = original else { return Ok(QueueingHint::Queue) };
        Ok(if required.matches(original)? { QueueingHint::QueueSkip } else { QueueingHint::Queue })
    }
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &str {
        names::NODE_AFFINITY
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

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        let this = self.clone();
        Some(vec![ClusterEventWithHint::with_hint(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            move |pod, old, new| this.is_schedulable_after_node_change(pod, old, new),
        )])
    }
}

/// Feasibility and scores depend on the node affinity and the node selector.
impl ksched_framework::SignPlugin for NodeAffinity {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        sig.fragment(ksched_framework::batch::signature::NODE_AFFINITY, |w| {
            ksched_framework::batch::signature::node_affinity(&pod.pod, w)
        });
        sig.fragment(ksched_framework::batch::signature::NODE_SELECTOR, |w| {
            ksched_framework::batch::signature::node_selector(&pod.pod, w)
        });
        ksched_framework::Status::success()
    }
}

/// Node names a required term pins the pod to through `metadata.name In` field requirements
/// (intersected within the term); `None` when the term has none.
fn term_node_names(term: &k8s_openapi::api::core::v1::NodeSelectorTerm) -> Option<HashSet<&str>> {
    let mut names: Option<HashSet<&str>> = None;
    for r in term.match_fields.iter().flatten() {
        if r.key != "metadata.name" || r.operator != "In" {
            continue;
        }
        let values: HashSet<&str> = r.values.iter().flatten().map(String::as_str).collect();
        names = Some(match names {
            None => values,
            Some(prev) => prev.intersection(&values).copied().collect(),
        });
    }
    names
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let spec = pod.pod.spec.as_ref();
        let required = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
        let has_node_selector = spec.is_some_and(|s| s.node_selector.is_some());
        if required.is_none() && self.added.required.is_none() && !has_node_selector {
            return (None, Status::skip());
        }
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(Arc::new(RequiredNodeAffinity::new(&pod.pod))));
        let Some(required) = required.filter(|r| !r.node_selector_terms.is_empty()) else {
            return (None, Status::success());
        };
        // The pod can only land on named nodes if every (ORed) term names some.
        let mut union: HashSet<&str> = HashSet::new();
        for term in &required.node_selector_terms {
            let Some(names) = term_node_names(term) else { return (None, Status::success()) };
            union.extend(names);
        }
        if union.is_empty() {
            return (None, Status::unresolvable(ERR_REASON_CONFLICT));
        }
        let node_names = union.into_iter().map(str::to_string).collect();
        (Some(PreFilterResult { node_names: Some(node_names) }), Status::success())
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let required = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).ok().map(|PreFilterState(r)| &**r);
        self.decide(required, pod, node)
    }

    fn bind_cycle<'a>(&'a self, state: &'a CycleState, pod: &'a PodInfo) -> Option<BoundFilter<'a>> {
        let PreFilterState(required) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).ok()?;
        Some(Box::new(move |node: &NodeInfo| self.decide(Some(required), pod, node)))
    }

    fn reads_node_labels(&self) -> bool {
        true
    }
}

impl NodeAffinity {
    /// The Filter decision, with the pod's parsed required terms from PreFilter when it ran.
    fn decide(&self, required: Option<&RequiredNodeAffinity>, pod: &PodInfo, node: &NodeInfo) -> Status {
        if node.node().is_none() {
            return Status::error("node not found");
        }
        // Matching reads the NodeInfo's packed labels, not the node object: see PackedLabels.
        if self.added.required.as_ref().is_some_and(|s| !s.matches(node)) {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        let matched = match required {
            Some(required) => required.matches_ignoring_errors(node),
            // PreFilter may be disabled: parse here instead.
            None => required_node_affinity_matches(&pod.pod, node),
        };
        if matched {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[&NodeInfo], _snapshot: &Snapshot) -> Status {
        let preferred = match pod_preferred_node_affinity(&pod.pod) {
            Ok(p) => p,
            Err(e) => return Status::error(e),
        };
        if preferred.is_none() && self.added.preferred.is_none() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(preferred.map(Arc::new)));
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if node.node().is_none() {
            return Err(Status::error("node not found"));
        }
        let mut count = self.added.preferred.as_ref().map_or(0, |t| t.score(node));
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Ok(PreScoreState(preferred)) => count += preferred.as_ref().map_or(0, |t| t.score(node)),
            // PreScore may be disabled: parse here instead.
            Err(_) => {
                if let Some(t) = pod_preferred_node_affinity(&pod.pod).map_err(Status::error)? {
                    count += t.score(node);
                }
            }
        }
        Ok(count)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize_score(&self, _: &CycleState, _: &PodInfo, _: &[&NodeInfo], scores: &mut [i64]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

/// Filter reads `spec.nodeSelector` and the required node affinity, Score the preferred terms;
/// the enforced `addedAffinity` is the plugin's own.
impl ksched_framework::MemoPlugin for NodeAffinity {
    fn memo_inputs(
        &self,
        _state: &CycleState,
        pod: &PodInfo,
        w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        let spec = pod.pod.spec.as_ref();
        let selector = spec.and_then(|s| s.node_selector.as_ref());
        w.bool(selector.is_some());
        for (k, v) in selector.iter().flat_map(|s| s.iter()) {
            w.str(k);
            w.str(v);
        }
        let affinity = spec.and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.as_ref());
        w.bool(affinity.is_some());
        if let Some(a) = affinity {
            w.json(a);
        }
        true
    }
}

#[cfg(test)]
mod tests;
