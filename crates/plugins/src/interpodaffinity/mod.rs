//! InterPodAffinity (upstream `framework/plugins/interpodaffinity`): required pod affinity / anti-affinity as a filter (including the
//! symmetric check against existing pods' required anti-affinity) and preferred terms — the
//! incoming pod's and, symmetrically, the existing pods' — as a score.
//!
//! The namespace selectors of the incoming pod's terms are resolved to namespace names once per
//! cycle (PreFilter for required terms, PreScore for preferred ones), so matching existing pods
//! against them never needs those pods' namespace labels.

mod cache;
mod counts;
mod filtering;
mod scoring;

use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::PodAffinityTerm;
use ksched_framework::labels::{labels_of, Labels};
use ksched_framework::listers::ClusterLister;
use ksched_framework::node::Node;
use ksched_framework::parallelize::Parallelizer;
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::{affinity_terms, AffinityTerm};
use ksched_framework::registry::decode_args;
use ksched_framework::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, FilterPlugin, Handle, Plugin, PreFilterPlugin,
    PreScorePlugin, QueueingHint, ScorePlugin,
};
use serde::{Deserialize, Deserializer, Serialize};

use crate::helper::{as_nodes, as_pods, require, uid};
use crate::names;

pub use filtering::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
};

/// Default of `hardPodAffinityWeight`.
pub const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;
const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;

/// `InterPodAffinityArgs` (kubescheduler.config.k8s.io/v1), defaulted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    /// Score added for every required affinity term of an existing pod the incoming pod matches.
    #[serde(default = "default_hard_pod_affinity_weight", deserialize_with = "null_as_default_weight")]
    pub hard_pod_affinity_weight: i32,
    /// Skip scoring pods without preferred terms instead of honouring existing pods' terms.
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: DEFAULT_HARD_POD_AFFINITY_WEIGHT,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

fn default_hard_pod_affinity_weight() -> i32 {
    DEFAULT_HARD_POD_AFFINITY_WEIGHT
}

/// An explicit `null` is an unset pointer upstream, which defaulting turns into 1.
fn null_as_default_weight<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    Ok(Option::<i32>::deserialize(d)?.unwrap_or(DEFAULT_HARD_POD_AFFINITY_WEIGHT))
}

/// Validates the args like upstream's `ValidateInterPodAffinityArgs`; `path` is the field path of
/// the args object ("" for none) and prefixes the error.
pub fn validate_inter_pod_affinity_args(path: &str, args: &InterPodAffinityArgs) -> Result<(), String> {
    let w = args.hard_pod_affinity_weight;
    if (0..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&w) {
        return Ok(());
    }
    let field =
        if path.is_empty() { "hardPodAffinityWeight".to_string() } else { format!("{path}.hardPodAffinityWeight") };
    Err(format!("{field}: Invalid value: {w}: not in valid range [0, {MAX_HARD_POD_AFFINITY_WEIGHT}]"))
}

/// The InterPodAffinity plugin.
#[derive(Clone)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
    parallelizer: Parallelizer,
    lister: Arc<dyn ClusterLister>,
    /// Shared by clones: its counters are exact for any snapshot, whoever asks.
    cache: Arc<Mutex<cache::QueryCache>>,
}

impl std::fmt::Debug for InterPodAffinity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterPodAffinity").field("args", &self.args).finish_non_exhaustive()
    }
}

/// Builds the plugin from `InterPodAffinityArgs` (decoded strictly, then validated).
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args: InterPodAffinityArgs = decode_args(args)?;
    Ok(Arc::new(InterPodAffinity::from_args(args, handle)?))
}

impl InterPodAffinity {
    /// The plugin for already decoded args.
    pub fn from_args(args: InterPodAffinityArgs, handle: &Handle) -> Result<Self, String> {
        validate_inter_pod_affinity_args("", &args)?;
        Ok(InterPodAffinity {
            args,
            parallelizer: handle.parallelizer.clone(),
            lister: handle.lister.clone(),
            cache: Arc::default(),
        })
    }

    /// The query cache. A panic while it was locked may have left a counter half updated, so
    /// that case starts over with an empty cache.
    fn cache(&self) -> MutexGuard<'_, cache::QueryCache> {
        self.cache.lock().unwrap_or_else(|poisoned| {
            let mut guard = poisoned.into_inner();
            *guard = cache::QueryCache::default();
            self.cache.clear_poison();
            guard
        })
    }

    /// The args in effect.
    pub fn args(&self) -> &InterPodAffinityArgs {
        &self.args
    }

    /// Resolves a non-trivial namespace selector of an incoming pod's term into namespace names
    /// and drops it, so that the term matches without namespace labels. A selector matching
    /// everything is kept as is (it matches any labels, including none).
    fn merge_term_namespaces(&self, term: &mut AffinityTerm) {
        let Some(selector) = term.namespace_selector.as_ref() else { return };
        if selector.is_everything() {
            return;
        }
        for ns in self.lister.namespaces() {
            if selector.matches(labels_of(&ns.metadata.labels)) {
                if let Some(name) = ns.metadata.name.as_ref() {
                    term.namespaces.insert(name.clone());
                }
            }
        }
        term.namespace_selector = None;
    }

    /// Labels of the pod's namespace; empty when the namespace is unknown.
    fn namespace_labels(&self, pod: &Pod) -> Labels {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        self.lister.namespace(ns).and_then(|n| n.metadata.labels.clone()).unwrap_or_default()
    }
}

/// True when the pod matches every term; false for no terms. Namespace selectors are evaluated
/// against an empty label set, which is exact for the incoming pod's resolved terms.
pub(crate) fn pod_matches_all_terms(terms: &[AffinityTerm], pod: &Pod) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod, None))
}

fn required_affinity_spec(pod: &Pod) -> &[PodAffinityTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref())
        .unwrap_or_default()
}

fn required_anti_affinity_spec(pod: &Pod) -> &[PodAffinityTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref())
        .unwrap_or_default()
}

/// True when the pod is neither bound nor nominated: it cannot affect where others fit.
fn is_unassigned(pod: &Pod) -> bool {
    let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    let nominated = pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty());
    !bound && !nominated
}

/// Queue when an assigned pod's change can satisfy the pod's affinity or lift an anti-affinity
/// conflict (in either direction).
fn is_schedulable_after_pod_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = as_pods(old, new)?;
    if let (Some(_), Some(m)) = (original, modified) {
        // Only label updates are registered: the pod's own new labels may escape someone's
        // anti-affinity.
        if uid(m) == uid(pod) {
            return Ok(QueueingHint::Queue);
        }
    }
    if modified.is_some_and(is_unassigned) || original.is_some_and(is_unassigned) {
        return Ok(QueueingHint::QueueSkip);
    }
    let terms = affinity_terms(pod, required_affinity_spec(pod))?;
    let anti_terms = affinity_terms(pod, required_anti_affinity_spec(pod))?;
    let hint = |queue: bool| if queue { QueueingHint::Queue } else { QueueingHint::QueueSkip };
    match (original, modified) {
        (Some(o), Some(m)) => Ok(hint(
            (!pod_matches_all_terms(&terms, o) && pod_matches_all_terms(&terms, m))
                || (pod_matches_all_terms(&anti_terms, o) && !pod_matches_all_terms(&anti_terms, m)),
        )),
        (None, Some(m)) => Ok(hint(pod_matches_all_terms(&terms, m))),
        (Some(o), None) => {
            if pod_matches_all_terms(&anti_terms, o) {
                return Ok(QueueingHint::Queue);
            }
            let deleted_anti_terms = affinity_terms(o, required_anti_affinity_spec(o))?;
            Ok(hint(pod_matches_all_terms(&deleted_anti_terms, pod)))
        }
        (None, None) => Err("the event carries no pod object".to_string()),
    }
}

fn topology_value<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.get(key)
}

/// Queue when a node gains (or moves to another value of) an affinity topology key, loses (or
/// changes) an anti-affinity topology key, or is new while the pod has anti-affinity.
fn is_schedulable_after_node_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (original, modified) = as_nodes(old, new)?;
    let modified = require(modified, "new node")?;
    for term in affinity_terms(pod, required_affinity_spec(pod))? {
        let after = topology_value(modified, &term.topology_key);
        let Some(original) = original else {
            if after.is_some() {
                return Ok(QueueingHint::Queue);
            }
            continue;
        };
        match (topology_value(original, &term.topology_key), after) {
            (None, Some(_)) => return Ok(QueueingHint::Queue),
            (Some(before), Some(after)) if before != after => return Ok(QueueingHint::Queue),
            _ => {}
        }
    }
    for term in affinity_terms(pod, required_anti_affinity_spec(pod))? {
        // Any new node may host the pod: without the key it is always allowed, with it only an
        // (unknown here) empty domain would help.
        let Some(original) = original else { return Ok(QueueingHint::Queue) };
        match (topology_value(original, &term.topology_key), topology_value(modified, &term.topology_key)) {
            (Some(_), None) => return Ok(QueueingHint::Queue),
            (Some(before), Some(after)) if before != after => return Ok(QueueingHint::Queue),
            _ => {}
        }
    }
    Ok(QueueingHint::QueueSkip)
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &str {
        names::INTER_POD_AFFINITY
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
        // Queueing hints are always on in 1.36, so Node/UpdateNodeTaint is not registered.
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
                is_schedulable_after_pod_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
                is_schedulable_after_node_change,
            ),
        ])
    }
}

/// Placements depend on other pods' placements for pods with pod (anti-)affinity: those are
/// not signed.
impl ksched_framework::SignPlugin for InterPodAffinity {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        let affinity = pod.pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        if affinity.is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some()) {
            return ksched_framework::Status::unschedulable("pods with InterPodAffinity are not signable");
        }
        // Existing pods' preferred terms may match this pod's labels, unless they are ignored.
        if !self.args.ignore_preferred_terms_of_existing_pods {
            sig.fragment(ksched_framework::batch::signature::LABELS, |w| {
                ksched_framework::batch::signature::labels(&pod.pod, w)
            });
        }
        ksched_framework::Status::success()
    }
}

#[cfg(test)]
mod tests;
