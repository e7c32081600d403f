//! PreScore, Score and NormalizeScore: soft constraints.

use std::collections::HashSet;
use std::sync::Arc;

use ksched_framework::{CycleState, NodeInfo, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE};

use super::common::{self, count_pods_matching, Constraint};
use super::index::{DomainCounts, Request, EMPTY_DOMAIN, MISSING, NO_NODE};
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
    pub topology_value_to_pod_counts: Vec<DomainCounts>,
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

/// Matching pods per domain id (indices below `len`) over the nodes not masked out; nodes
/// without the key count toward `missing_as` when given, else not at all.
fn domain_sums(
    domains: &[u32],
    pods: Option<&[u32]>,
    mask: Option<&[bool]>,
    missing_as: Option<u32>,
    len: usize,
) -> Vec<i64> {
    let mut sums = vec![0; len];
    let Some(pods) = pods else { return sums };
    for (n, (&domain, &count)) in domains.iter().zip(pods).enumerate() {
        let domain = match domain {
            NO_NODE => continue,
            MISSING => match missing_as {
                Some(d) => d,
                None => continue,
            },
            d => d,
        };
        if mask.is_none_or(|m| m[n]) {
            sums[domain as usize] += i64::from(count);
        }
    }
    sums
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
        filtered: &[&NodeInfo],
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
        let required = RequiredNodeAffinity::new(&pod.pod);
        // Hostname domains are counted per node in Score, so no pod counts are needed for them.
        let requests: Vec<Request> = constraints
            .iter()
            .map(|c| Request { key: &c.topology_key, selector: (!c.is_hostname()).then_some(&c.selector) })
            .collect();
        let view = self.index.view(all_nodes, &requests, pod.namespace());
        let mut ignored_nodes = HashSet::new();
        let mut counts: Vec<DomainCounts> = (0..constraints.len()).map(|i| view.new_counts(i)).collect();
        // Per constraint, the domains of the feasible nodes: only they are counted.
        let mut present: Vec<Vec<u32>> = vec![Vec::new(); constraints.len()];
        for ni in filtered {
            let domain_of = |i: usize| counts[i].domain_of(ni, &constraints[i].topology_key);
            if require_all_topologies && (0..constraints.len()).any(|i| domain_of(i).is_none()) {
                ignored_nodes.insert(ni.name().to_string());
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if c.is_hostname() {
                    continue;
                }
                let domain = match counts[i].domain_of(ni, &c.topology_key) {
                    Some(Some(domain)) => domain,
                    // A missing key counts as the domain "" (only possible with the system defaults).
                    None => EMPTY_DOMAIN,
                    // A node the snapshot did not have, with a value of its own.
                    Some(None) => counts[i].intern(ni.labels().get(&c.topology_key).unwrap_or_default()),
                };
                if counts[i].add_id(domain, 0) {
                    present[i].push(domain);
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

        let cols = view.columns(&constraints, &required);
        let (domains, pod_counts) = (&cols.domains, &cols.pod_counts);
        // Hostname domains are counted in Score.
        let wanted: Vec<usize> = (0..constraints.len()).filter(|&i| !present[i].is_empty()).collect();
        let missing_as = (!require_all_topologies).then_some(EMPTY_DOMAIN);
        if wanted.iter().all(|&i| !cols.affinity_matters[i] && !cols.taints_matter[i]) {
            // No policy excludes a node: sum every domain in one plain pass, then keep the wanted.
            let has_all_keys: Option<Vec<bool>> = (require_all_topologies && constraints.len() > 1)
                .then(|| (0..all_nodes.len()).map(|n| domains.iter().all(|d| d[n] < MISSING)).collect());
            for &i in &wanted {
                let sums =
                    domain_sums(domains[i], pod_counts[i], has_all_keys.as_deref(), missing_as, counts[i].capacity());
                for &d in &present[i] {
                    counts[i].add_id(d, sums[d as usize]);
                }
            }
        } else {
            for n in 0..if wanted.is_empty() { 0 } else { all_nodes.len() } {
                if domains[0][n] == NO_NODE {
                    continue;
                }
                if require_all_topologies && domains.iter().any(|d| d[n] == MISSING) {
                    continue;
                }
                for &i in &wanted {
                    let domain = match domains[i][n] {
                        MISSING => EMPTY_DOMAIN,
                        d => d,
                    };
                    if counts[i].get_id(domain).is_none() {
                        continue;
                    }
                    if cols.may_exclude(i, n)
                        && !all_nodes[n]
                            .node()
                            .is_some_and(|node| constraints[i].includes_node(&pod.pod, node, &required))
                    {
                        continue;
                    }
                    counts[i].add_id(domain, pod_counts[i].map_or(0, |p| i64::from(p[n])));
                }
            }
        }
        drop(view);
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
        nodes: &[&NodeInfo],
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
        if !s.ignored_nodes.is_empty() && s.ignored_nodes.contains(node.name()) {
            return Ok(0);
        }
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let counts = &s.topology_value_to_pod_counts[i];
            let Some(domain) = counts.domain_of(node, &c.topology_key) else { continue };
            let count = if c.is_hostname() {
                count_pods_matching(&node.pods, &c.selector, pod.namespace())
            } else {
                domain.and_then(|d| counts.get_id(d)).unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, s.topology_normalizing_weight[i]);
        }
        Ok(score.round() as i64)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    /// Reverses and rescales: the node with the fewest matching pods gets 100; ignored nodes 0.
    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, nodes: &[&NodeInfo], scores: &mut [i64]) -> Status {
        let s = match read_state(state) {
            Ok(s) => s,
            Err(e) => return e,
        };
        const INVALID: i64 = -1;
        let (mut min, mut max) = (i64::MAX, 0);
        for (score, node) in scores.iter_mut().zip(nodes) {
            if !s.ignored_nodes.is_empty() && s.ignored_nodes.contains(node.name()) {
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
