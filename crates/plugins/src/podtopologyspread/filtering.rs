//! PreFilter (+AddPod/RemovePod) and Filter: hard constraints.

use std::collections::HashMap;
use std::sync::Arc;

use ksched_framework::{
    CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin, PreFilterResult, Snapshot,
    Status,
};

use super::common::{self, count_pods_matching, node_has_all_topology_keys, Constraint};
use super::{PodTopologySpread, ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH};
use crate::nodeaffinity::RequiredNodeAffinity;

pub(crate) const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";

/// A domain and its number of matching pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CriticalPath {
    pub topology_value: String,
    pub match_num: i64,
}

/// The two domains with the fewest matching pods, the least first. Only the first is guaranteed
/// to be the minimum after incremental updates; the second is some domain with at least as many.
/// Upstream starts both entries at ("", MaxInt32), so a domain whose value is "" is first matched
/// against these placeholders; keeping the same start keeps the same outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CriticalPaths(pub [CriticalPath; 2]);

impl Default for CriticalPaths {
    fn default() -> Self {
        let empty = || CriticalPath { topology_value: String::new(), match_num: i64::from(i32::MAX) };
        CriticalPaths([empty(), empty()])
    }
}

impl CriticalPaths {
    /// Records that `value` now has `num` matching pods.
    pub fn update(&mut self, value: &str, num: i64) {
        let p = &mut self.0;
        let existing = if p[0].topology_value == value {
            Some(0)
        } else if p[1].topology_value == value {
            Some(1)
        } else {
            None
        };
        match existing {
            Some(i) => {
                p[i].match_num = num;
                if p[0].match_num > p[1].match_num {
                    p.swap(0, 1);
                }
            }
            None if num < p[0].match_num => {
                p[1] = std::mem::replace(&mut p[0], CriticalPath { topology_value: value.to_string(), match_num: num });
            }
            None if num < p[1].match_num => {
                p[1] = CriticalPath { topology_value: value.to_string(), match_num: num };
            }
            None => {}
        }
    }
}

/// What PreFilter computed for Filter: per hard constraint, matching pods per domain and the
/// critical paths.
#[derive(Debug, Clone)]
pub(crate) struct PreFilterState {
    /// Shared by every clone: constraints never change within a cycle.
    pub constraints: Arc<[Constraint]>,
    /// Whether the incoming pod matches each constraint's selector (it counts itself).
    pub self_match: Arc<[bool]>,
    pub critical_paths: Vec<CriticalPaths>,
    pub tp_value_to_match_num: Vec<HashMap<String, i64>>,
}

impl PreFilterState {
    /// The global minimum of a constraint; 0 while there are fewer domains than minDomains.
    fn min_match_num(&self, i: usize, min_domains: i32) -> i64 {
        if self.tp_value_to_match_num[i].len() < min_domains.max(0) as usize {
            return 0;
        }
        self.critical_paths[i].0[0].match_num
    }

    fn add(&mut self, i: usize, value: &str, delta: i64) {
        let counts = &mut self.tp_value_to_match_num[i];
        let n = match counts.get_mut(value) {
            Some(n) => {
                *n += delta;
                *n
            }
            None => {
                counts.insert(value.to_string(), delta);
                delta
            }
        };
        self.critical_paths[i].update(value, n);
    }
}

fn read_state(state: &CycleState) -> Result<&PreFilterState, Status> {
    state
        .read::<PreFilterState>(PRE_FILTER_STATE_KEY)
        .map_err(|_| Status::error(format!("reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found")))
}

impl PodTopologySpread {
    /// Counts matching pods per domain over every eligible node (a node carrying all topology
    /// keys and passing the constraint's inclusion policies). `None` when there is no hard
    /// constraint.
    pub(crate) fn pre_filter_state(
        &self,
        pod: &PodInfo,
        all_nodes: &[Arc<NodeInfo>],
    ) -> Result<Option<PreFilterState>, String> {
        let constraints = self.hard_constraints(&pod.pod).map_err(|e| format!("get constraints from pod: {e}"))?;
        if constraints.is_empty() {
            return Ok(None);
        }
        let required = RequiredNodeAffinity::new(&pod.pod);
        let namespace = pod.namespace();
        let per_node: Vec<Option<Vec<(usize, i64)>>> = self.parallelizer.map(all_nodes.len(), |n| {
            let node = all_nodes[n].node()?;
            if !node_has_all_topology_keys(common::node_labels(node), &constraints) {
                return None;
            }
            let counts = constraints
                .iter()
                .enumerate()
                .filter(|(_, c)| c.includes_node(&pod.pod, node, &required))
                .map(|(i, c)| (i, count_pods_matching(&all_nodes[n].pods, &c.selector, namespace)))
                .collect();
            Some(counts)
        });
        let mut tp_value_to_match_num: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
        for (n, counts) in per_node.iter().enumerate() {
            let labels = all_nodes[n].labels();
            for &(i, count) in counts.iter().flatten() {
                let value = &labels[&constraints[i].topology_key];
                match tp_value_to_match_num[i].get_mut(value) {
                    Some(total) => *total += count,
                    None => {
                        tp_value_to_match_num[i].insert(value.clone(), count);
                    }
                }
            }
        }
        // Visiting domains in node order keeps the outcome reproducible; revisiting a domain with
        // its final count is a no-op.
        let mut critical_paths = vec![CriticalPaths::default(); constraints.len()];
        for (n, counts) in per_node.iter().enumerate() {
            let labels = all_nodes[n].labels();
            for &(i, _) in counts.iter().flatten() {
                let value = &labels[&constraints[i].topology_key];
                critical_paths[i].update(value, tp_value_to_match_num[i][value]);
            }
        }
        let self_match = constraints.iter().map(|c| c.selector.matches(pod.labels())).collect();
        Ok(Some(PreFilterState { constraints: constraints.into(), self_match, critical_paths, tp_value_to_match_num }))
    }

    /// Applies `delta` for `updated` (a pod assumed added to / removed from `node`) to the state.
    fn update_with_pod(
        &self,
        s: &mut PreFilterState,
        updated: &PodInfo,
        preemptor: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) {
        let Some(n) = node.node() else { return };
        if updated.namespace() != preemptor.namespace() {
            return;
        }
        let labels = common::node_labels(n);
        if !node_has_all_topology_keys(labels, &s.constraints) {
            return;
        }
        let required = RequiredNodeAffinity::new(&preemptor.pod);
        let constraints = s.constraints.clone();
        for (i, c) in constraints.iter().enumerate() {
            if !c.selector.matches(updated.labels()) || !c.includes_node(&preemptor.pod, n, &required) {
                continue;
            }
            s.add(i, &labels[&c.topology_key], delta);
        }
    }

    fn update_state(
        &self,
        state: &mut CycleState,
        updated: &PodInfo,
        pod: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) -> Status {
        let Ok(s) = state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"));
        };
        self.update_with_pod(s, updated, pod, node, delta);
        Status::success()
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match self.pre_filter_state(pod, snapshot.list()) {
            Err(e) => (None, Status::error(e)),
            Ok(None) => (None, Status::skip()),
            Ok(Some(s)) => {
                state.write(PRE_FILTER_STATE_KEY, s);
                (None, Status::success())
            }
        }
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for PodTopologySpread {
    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, pod_to_add: &Arc<PodInfo>, node: &NodeInfo) -> Status {
        self.update_state(state, pod_to_add, pod, node, 1)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        self.update_state(state, pod_to_remove, pod, node, -1)
    }
}

impl FilterPlugin for PodTopologySpread {
    /// Hot path: no allocation unless the node is rejected.
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let s = match read_state(state) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let labels = node.labels();
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let min_match_num = s.min_match_num(i, c.min_domains);
            let self_match = i64::from(s.self_match[i]);
            let match_num = s.tp_value_to_match_num[i].get(value.as_str()).copied().unwrap_or(0);
            if match_num + self_match - min_match_num > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}
