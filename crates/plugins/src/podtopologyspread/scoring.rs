//! PreScore, Score and NormalizeScore: soft constraints.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ksched_framework::{CycleState, NodeInfo, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE};

use super::common::{self, count_pods_matching, node_has_all_topology_keys, Constraint};
use super::{PodTopologySpread, SCHEDULE_ANYWAY};
use crate::nodeaffinity::RequiredNodeAffinity;

pub(crate) const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";
/// What PreScore computed for Score and NormalizeScore. Read-only afterwards, so clones share it.
#[derive(Debug, Clone)]
pub(crate) struct PreScoreState(pub Arc<PreScoreData>);

#[derive(Debug)]
pub(crate) struct PreScoreData {
    pub constraints: Vec<Constraint>,
    /// Feasible nodes lacking a topology key (when all keys are required): they score 0.
    pub ignored_nodes: HashSet<String>,
    /// Per constraint, matching pods per domain present among the feasible nodes (hostname
    /// constraints are counted per node in Score instead).
    pub topology_value_to_pod_counts: Vec<HashMap<String, i64>>,
    /// Per constraint, ln(number of domains + 2), so that small topologies are not drowned out.
    pub topology_normalizing_weight: Vec<f64>,
}

fn topology_normalizing_weight(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

/// `maxSkew - 1` is added so that small differences between domains weigh less.
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew - 1)
}

fn read_state(state: &CycleState) -> Result<&PreScoreData, Status> {
    state
        .read::<PreScoreState>(PRE_SCORE_STATE_KEY)
        .map(|s| s.0.as_ref())
        .map_err(|_| Status::error(format!("error reading {PRE_SCORE_STATE_KEY:?} from cycleState: not found")))
}

impl PodTopologySpread {
    /// PreScore over explicit node lists: `filtered` are the feasible nodes, `all_nodes` every
    /// node of the snapshot. Returns Skip when there is nothing to score.
    pub(crate) fn pre_score_with(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        filtered: &[Arc<NodeInfo>],
        all_nodes: &[Arc<NodeInfo>],
    ) -> Status {
        if all_nodes.is_empty() {
            return Status::skip();
        }
        // With the system defaults, nodes without a zone label still get hostname spreading.
        let require_all_topologies = !common::pod_constraints(&pod.pod).is_empty() || !self.system_defaulted;
        let constraints = match self.constraints_for(&pod.pod, SCHEDULE_ANYWAY, "soft") {
            Ok(c) => c,
            Err(e) => return Status::error(format!("calculating preScoreState: {e}")),
        };
        if constraints.is_empty() {
            return Status::skip();
        }
        let mut ignored_nodes = HashSet::new();
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
        for ni in filtered {
            let labels = ni.labels();
            if require_all_topologies && !node_has_all_topology_keys(labels, &constraints) {
                ignored_nodes.insert(ni.name().to_string());
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if c.is_hostname() {
                    continue;
                }
                // A missing key counts as the domain "" (only possible with the system defaults).
                let value = labels.get(&c.topology_key).map(String::as_str).unwrap_or_default();
                if !counts[i].contains_key(value) {
                    counts[i].insert(value.to_string(), 0);
                }
            }
        }
        let weights = constraints
            .iter()
            .zip(&counts)
            .map(|(c, domains)| {
                let size = if c.is_hostname() { filtered.len() - ignored_nodes.len() } else { domains.len() };
                topology_normalizing_weight(size)
            })
            .collect();

        let required = RequiredNodeAffinity::new(&pod.pod);
        let namespace = pod.namespace();
        let per_node: Vec<Vec<(usize, i64)>> = self.parallelizer.map(all_nodes.len(), |n| {
            let Some(node) = all_nodes[n].node() else { return Vec::new() };
            let labels = common::node_labels(node);
            if require_all_topologies && !node_has_all_topology_keys(labels, &constraints) {
                return Vec::new();
            }
            let mut out = Vec::new();
            for (i, c) in constraints.iter().enumerate() {
                if !c.includes_node(&pod.pod, node, &required) {
                    continue;
                }
                let value = labels.get(&c.topology_key).map(String::as_str).unwrap_or_default();
                // Only domains of feasible nodes matter; hostname domains are counted in Score.
                if counts[i].contains_key(value) {
                    out.push((i, count_pods_matching(&all_nodes[n].pods, &c.selector, namespace)));
                }
            }
            out
        });
        for (n, node_counts) in per_node.iter().enumerate() {
            let labels = all_nodes[n].labels();
            for &(i, count) in node_counts {
                let value = labels.get(&constraints[i].topology_key).map(String::as_str).unwrap_or_default();
                if let Some(total) = counts[i].get_mut(value) {
                    *total += count;
                }
            }
        }
        state.write(
            PRE_SCORE_STATE_KEY,
            PreScoreState(Arc::new(PreScoreData {
                constraints,
                ignored_nodes,
                topology_value_to_pod_counts: counts,
                topology_normalizing_weight: weights,
            })),
        );
        Status::success()
    }
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &ksched_framework::Snapshot,
    ) -> Status {
        self.pre_score_with(state, pod, nodes, snapshot.list())
    }
}

impl ScorePlugin for PodTopologySpread {
    /// The weighted number of matching pods in the node's domains (lower is better); normalised
    /// later.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = read_state(state)?;
        if s.ignored_nodes.contains(node.name()) {
            return Ok(0);
        }
        let labels = node.labels();
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.topology_key) else { continue };
            let count = if c.is_hostname() {
                count_pods_matching(&node.pods, &c.selector, pod.namespace())
            } else {
                s.topology_value_to_pod_counts[i].get(value.as_str()).copied().unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, s.topology_normalizing_weight[i]);
        }
        Ok(score.round() as i64)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    /// Reverses and rescales: the node with the fewest matching pods gets 100; ignored nodes 0.
    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        let s = match read_state(state) {
            Ok(s) => s,
            Err(e) => return e,
        };
        const INVALID: i64 = -1;
        let (mut min, mut max) = (i64::MAX, 0);
        for (score, node) in scores.iter_mut().zip(nodes) {
            if s.ignored_nodes.contains(node.name()) {
                *score = INVALID;
                continue;
            }
            min = min.min(*score);
            max = max.max(*score);
        }
        for score in scores.iter_mut() {
            *score = if *score == INVALID {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *score) / max
            };
        }
        Status::success()
    }
}
