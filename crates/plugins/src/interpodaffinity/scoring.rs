//! PreScore (per-topology scores from preferred terms and existing pods' terms), Score and
//! min-max NormalizeScore.

use std::sync::Arc;

use ksched_framework::pod::Pod;
use ksched_framework::{CycleState, NodeInfo, PodInfo, PreScorePlugin, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE};

use super::cache::{PodKey, Query};
use super::counts::TopologyCounts;
use super::filtering::aggregate_errors;
use super::InterPodAffinity;

pub(super) const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

/// What PreScore computes; read-only afterwards, so clones share it.
#[derive(Debug, Clone)]
pub(super) struct PreScoreState {
    /// Scores per topology pair; a node's score is the sum over all of them.
    pub(super) topology_score: Vec<Arc<TopologyCounts>>,
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

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[&NodeInfo], snapshot: &Snapshot) -> Status {
        let has_constraints = has_preferred_constraints(&pod.pod);
        if self.args.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        if !pod.parse_errors().is_empty() {
            return Status::error(format!("failed to parse pod: {}", aggregate_errors(pod.parse_errors())));
        }

        let mut affinity = pod.preferred_affinity_terms().to_vec();
        let mut anti_affinity = pod.preferred_anti_affinity_terms().to_vec();
        for t in affinity.iter_mut().chain(anti_affinity.iter_mut()) {
            self.merge_term_namespaces(&mut t.term);
        }

        let has_existing = !snapshot.with_affinity.is_empty();
        if !has_constraints && !has_existing {
            return Status::skip();
        }
        let mut topology_score = Vec::with_capacity(2);
        {
            let mut cache = self.cache();
            cache.sync(snapshot);
            // Without preferred terms of its own the pod is scored by existing pods' terms only,
            // which live on nodes hosting pods with affinity; pods on infeasible nodes count too.
            if has_constraints {
                let query = Query::Preferred { affinity, anti_affinity };
                topology_score.push(cache.counts(query, snapshot, &self.parallelizer));
            }
            if has_existing {
                let key = PodKey::new(&pod.pod, &self.namespace_labels(&pod.pod));
                let hard_weight = i64::from(self.args.hard_pod_affinity_weight);
                let query = Query::ExistingPreferred { pod: key, hard_weight };
                topology_score.push(cache.counts(query, snapshot, &self.parallelizer));
            }
        }
        topology_score.retain(|s| s.has_matches());
        if topology_score.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState { topology_score });
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
        Ok(s.topology_score.iter().map(|scores| scores.sum_at(labels)).sum())
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, _nodes: &[&NodeInfo], scores: &mut [i64]) -> Status {
        let s = match read_pre_score_state(state) {
            Ok(s) => s,
            Err(status) => return status,
        };
        if !s.topology_score.iter().any(|scores| scores.has_matches()) {
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
