//! PreScore (per-topology scores from preferred terms and existing pods' terms), Score and
//! min-max NormalizeScore.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ksched_framework::labels::Labels;
use ksched_framework::pod_info::{AffinityTerm, WeightedAffinityTerm};
use ksched_framework::{CycleState, NodeInfo, PodInfo, PreScorePlugin, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE};

use super::filtering::aggregate_errors;
use super::InterPodAffinity;

pub(super) const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

/// topology key -> topology value -> score.
pub(super) type ScoreMap = HashMap<String, HashMap<String, i64>>;

/// What PreScore computes; read-only afterwards, so clones share it.
#[derive(Debug, Clone)]
pub(super) struct PreScoreState {
    pub(super) topology_score: Arc<ScoreMap>,
}

/// True when the pod spec lists preferred pod affinity or anti-affinity terms.
fn has_preferred_constraints(pod: &Pod) -> bool {
    let Some(aff) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else { return false };
    let affinity =
        aff.pod_affinity.as_ref().and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref());
    let anti =
        aff.pod_anti_affinity.as_ref().and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref());
    affinity.is_some_and(|t| !t.is_empty()) || anti.is_some_and(|t| !t.is_empty())
}

/// The incoming pod as PreScore needs it: preferred terms with namespace selectors resolved.
struct IncomingPreferred<'a> {
    pod: &'a Pod,
    affinity_terms: Vec<WeightedAffinityTerm>,
    anti_affinity_terms: Vec<WeightedAffinityTerm>,
    namespace_labels: Labels,
}

/// Scores of one node's pods, borrowing keys and values from the node's labels.
type NodeScores<'a> = HashMap<&'a str, HashMap<&'a str, i64>>;

/// Adds `weight` at the node's value of the term's topology key when the term selects `pod`.
/// A matching term creates its entry even when the weight cancels out, which is what decides
/// whether scoring is skipped.
fn process_term<'a>(
    scores: &mut NodeScores<'a>,
    term: &AffinityTerm,
    weight: i64,
    pod: &Pod,
    ns_labels: Option<&Labels>,
    node_labels: &'a Labels,
) {
    if term.matches(pod, ns_labels) {
        if let Some((key, value)) = node_labels.get_key_value(&term.topology_key) {
            *scores.entry(key.as_str()).or_default().entry(value.as_str()).or_default() += weight;
        }
    }
}

fn process_terms<'a>(
    scores: &mut NodeScores<'a>,
    terms: &[WeightedAffinityTerm],
    sign: i64,
    pod: &Pod,
    ns_labels: Option<&Labels>,
    node_labels: &'a Labels,
) {
    for t in terms {
        process_term(scores, &t.term, i64::from(t.weight) * sign, pod, ns_labels, node_labels);
    }
}

impl InterPodAffinity {
    fn process_existing_pod<'a>(
        &self,
        scores: &mut NodeScores<'a>,
        incoming: &IncomingPreferred<'_>,
        existing: &PodInfo,
        node_labels: &'a Labels,
    ) {
        if node_labels.is_empty() {
            return;
        }
        // The incoming pod's terms have their namespace selectors resolved: no labels needed.
        process_terms(scores, &incoming.affinity_terms, 1, &existing.pod, None, node_labels);
        process_terms(scores, &incoming.anti_affinity_terms, -1, &existing.pod, None, node_labels);
        let ns_labels = Some(&incoming.namespace_labels);
        let hard_weight = i64::from(self.args.hard_pod_affinity_weight);
        if hard_weight > 0 {
            for term in &existing.required_affinity_terms {
                process_term(scores, term, hard_weight, incoming.pod, ns_labels, node_labels);
            }
        }
        process_terms(scores, &existing.preferred_affinity_terms, 1, incoming.pod, ns_labels, node_labels);
        process_terms(scores, &existing.preferred_anti_affinity_terms, -1, incoming.pod, ns_labels, node_labels);
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let has_constraints = has_preferred_constraints(&pod.pod);
        if self.args.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        // Every node when the pod has preferred terms, else only nodes hosting pods with affinity
        // (only their terms can score); pods on infeasible nodes count too.
        let affinity_nodes: Vec<Arc<NodeInfo>>;
        let all_nodes: &[Arc<NodeInfo>] = if has_constraints {
            snapshot.list()
        } else {
            affinity_nodes = snapshot.have_pods_with_affinity().cloned().collect();
            &affinity_nodes
        };
        if !pod.parse_errors.is_empty() {
            return Status::error(format!("failed to parse pod: {}", aggregate_errors(&pod.parse_errors)));
        }

        let mut incoming = IncomingPreferred {
            pod: &pod.pod,
            affinity_terms: pod.preferred_affinity_terms.clone(),
            anti_affinity_terms: pod.preferred_anti_affinity_terms.clone(),
            namespace_labels: self.namespace_labels(&pod.pod),
        };
        for t in incoming.affinity_terms.iter_mut().chain(incoming.anti_affinity_terms.iter_mut()) {
            self.merge_term_namespaces(&mut t.term);
        }

        let per_node = self.parallelizer.map(all_nodes.len(), |i| {
            let node = &all_nodes[i];
            let node_labels = node.labels();
            let pods = if has_constraints { &node.pods } else { &node.pods_with_affinity };
            let mut scores = NodeScores::new();
            for existing in pods {
                self.process_existing_pod(&mut scores, &incoming, existing, node_labels);
            }
            scores
        });

        let mut topology_score = ScoreMap::new();
        let mut any = false;
        for scores in per_node {
            any |= !scores.is_empty();
            for (key, values) in scores {
                let merged = topology_score.entry(key.to_string()).or_default();
                for (value, score) in values {
                    *merged.entry(value.to_string()).or_default() += score;
                }
            }
        }
        if !any {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { topology_score: Arc::new(topology_score) });
        Status::success()
    }
}

fn read_pre_score_state(state: &CycleState) -> Result<&PreScoreState, Status> {
    state
        .read::<PreScoreState>(PRE_SCORE_STATE_KEY)
        .map_err(|_| Status::error(format!("failed to read {PRE_SCORE_STATE_KEY:?} from cycleState: not found")))
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = read_pre_score_state(state)?;
        let labels = node.labels();
        Ok(s.topology_score
            .iter()
            .filter_map(|(key, values)| labels.get(key).map(|v| values.get(v).copied().unwrap_or(0)))
            .sum())
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        let s = match read_pre_score_state(state) {
            Ok(s) => s,
            Err(status) => return status,
        };
        if s.topology_score.is_empty() {
            return Status::success();
        }
        let (min, max) = scores.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        let spread = max.saturating_sub(min);
        for score in scores.iter_mut() {
            // Same float expression as upstream, truncated toward zero.
            let scaled = if spread > 0 { MAX_NODE_SCORE as f64 * ((*score - min) as f64 / spread as f64) } else { 0.0 };
            *score = scaled as i64;
        }
        Status::success()
    }
}
