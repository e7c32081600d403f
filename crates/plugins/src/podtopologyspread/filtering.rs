//! PreFilter (+AddPod/RemovePod) and Filter: hard constraints.

use std::sync::Arc;

use ksched_framework::{
    BoundFilter, CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin, PreFilterResult,
    Snapshot, Status,
};

use super::common::{self, node_has_all_topology_keys, Constraint};
use super::index::{DomainCounts, Request, EMPTY_DOMAIN, MISSING};
use super::{PodTopologySpread, ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH};
use crate::nodeaffinity::RequiredNodeAffinity;

pub(crate) const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";

/// A domain (by id in the constraint's [`DomainCounts`]) and its number of matching pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CriticalPath {
    pub domain: u32,
    pub match_num: i64,
}

/// The two domains with the fewest matching pods, the least first. Only the first is guaranteed
/// to be the minimum after incremental updates; the second is some domain with at least as many.
/// Upstream starts both entries at ("", MaxInt32), so a domain whose value is "" is first matched
/// against these placeholders; keeping the same start keeps the same outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CriticalPaths(pub [CriticalPath; 2]);

impl Default for CriticalPaths {
    fn default() -> Self {
        let empty = CriticalPath { domain: EMPTY_DOMAIN, match_num: i64::from(i32::MAX) };
        CriticalPaths([empty, empty])
    }
}

impl CriticalPaths {
    /// Records that `domain` now has `num` matching pods.
    pub fn update(&mut self, domain: u32, num: i64) {
        let p = &mut self.0;
        let existing = if p[0].domain == domain {
            Some(0)
        } else if p[1].domain == domain {
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
                p[1] = std::mem::replace(&mut p[0], CriticalPath { domain, match_num: num });
            }
            None if num < p[1].match_num => {
                p[1] = CriticalPath { domain, match_num: num };
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
    pub tp_value_to_match_num: Vec<DomainCounts>,
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
        let (domain, n) = self.tp_value_to_match_num[i].add(value, delta);
        self.critical_paths[i].update(domain, n);
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
        let requests: Vec<Request> =
            constraints.iter().map(|c| Request { key: &c.topology_key, selector: Some(&c.selector) }).collect();
        let view = self.index.view(all_nodes, &requests, pod.namespace());
        let mut counts: Vec<DomainCounts> = (0..constraints.len()).map(|i| view.new_counts(i)).collect();
        // Domains in the order their first eligible node comes in the snapshot, which keeps the
        // critical paths reproducible.
        let mut first_seen: Vec<Vec<u32>> = vec![Vec::new(); constraints.len()];
        let cols = view.columns(&constraints, &required);
        if let ([domains], [pod_counts], [false], [false]) =
            (&cols.domains[..], &cols.pod_counts[..], &cols.affinity_matters[..], &cols.taints_matter[..])
        {
            // The common case, one constraint whose policies exclude nothing: a plain pass.
            for (n, &domain) in domains.iter().enumerate() {
                // Both a missing key and a missing Node object exclude the node.
                if domain >= MISSING {
                    continue;
                }
                let matching = pod_counts.map_or(0, |p| i64::from(p[n]));
                if counts[0].add_id(domain, matching) {
                    first_seen[0].push(domain);
                }
            }
        } else {
            for n in 0..all_nodes.len() {
                if cols.domains.iter().any(|d| d[n] >= MISSING) {
                    continue;
                }
                for (i, c) in constraints.iter().enumerate() {
                    if cols.may_exclude(i, n)
                        && !all_nodes[n].node().is_some_and(|node| c.includes_node(&pod.pod, node, &required))
                    {
                        continue;
                    }
                    let domain = cols.domains[i][n];
                    let matching = cols.pod_counts[i].map_or(0, |p| i64::from(p[n]));
                    if counts[i].add_id(domain, matching) {
                        first_seen[i].push(domain);
                    }
                }
            }
        }
        let critical_paths = first_seen
            .iter()
            .zip(&counts)
            .map(|(seen, counts)| {
                let mut paths = CriticalPaths::default();
                for &d in seen {
                    paths.update(d, counts.get_id(d).unwrap_or_default());
                }
                paths
            })
            .collect();
        drop(view);
        let self_match = constraints.iter().map(|c| c.selector.matches(pod.labels())).collect();
        Ok(Some(PreFilterState {
            constraints: constraints.into(),
            self_match,
            critical_paths,
            tp_value_to_match_num: counts,
        }))
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
            s.add(i, labels.get(&c.topology_key).unwrap_or_default(), delta);
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
        match read_state(state) {
            Ok(s) => s.filter(node),
            Err(e) => e,
        }
    }

    fn bind_cycle<'a>(&'a self, state: &'a CycleState, _pod: &'a PodInfo) -> Option<BoundFilter<'a>> {
        let s = read_state(state).ok()?;
        Some(Box::new(move |node: &NodeInfo| s.filter(node)))
    }
}

impl PreFilterState {
    /// The Filter decision for one node.
    fn filter(&self, node: &NodeInfo) -> Status {
        for (i, c) in self.constraints.iter().enumerate() {
            let counts = &self.tp_value_to_match_num[i];
            let Some(domain) = counts.domain_of(node, &c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let min_match_num = self.min_match_num(i, c.min_domains);
            let self_match = i64::from(self.self_match[i]);
            let match_num = domain.and_then(|d| counts.get_id(d)).unwrap_or(0);
            if match_num + self_match - min_match_num > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}
