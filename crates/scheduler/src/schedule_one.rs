//! The scheduling algorithm of one cycle (upstream `schedulePod`): PreFilter, filtering with the
//! rotating start index and early stop (§7.4–7.5), the nominated-node shortcut, scoring and host
//! selection (§3.6). Pure and synchronous: it reads a snapshot and writes nothing but its own
//! start index.

use std::collections::HashMap;
use std::sync::Arc;

use ksched_framework::interface::NodeToStatus;
use ksched_framework::runtime::ScoreResult;
use ksched_framework::{Code, CycleState, Framework, NodeInfo, PodInfo, Snapshot, Status};

use crate::fit_error::{Diagnosis, FitError, NO_NODES_AVAILABLE};

/// Below this many nodes every node is evaluated.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Lower bound of the adaptive percentage.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// Outcome of a successful cycle.
#[derive(Debug, Clone, Default)]
pub struct ScheduleResult {
    /// The chosen node.
    pub suggested_host: String,
    /// Nodes whose filters ran (feasible + rejected).
    pub evaluated_nodes: usize,
    /// Nodes that passed filtering.
    pub feasible_nodes: usize,
    /// Feasible node names, aligned with `scores` (for explanations).
    pub feasible: Vec<String>,
    /// Scores, when more than one node was feasible.
    pub scores: Option<ScoreResult>,
}

/// Why a cycle did not produce a node.
#[derive(Debug, Clone)]
pub enum ScheduleError {
    /// No node fits; carries the diagnosis for the FailedScheduling message.
    Fit(Box<FitError>),
    /// The snapshot has no nodes.
    NoNodesAvailable,
    /// An internal or plugin error.
    Internal(String),
}

impl ScheduleError {
    /// The user-visible message.
    pub fn message(&self) -> String {
        match self {
            ScheduleError::Fit(f) => f.message(),
            ScheduleError::NoNodesAvailable => NO_NODES_AVAILABLE.to_string(),
            ScheduleError::Internal(e) => e.clone(),
        }
    }
}

/// How many feasible nodes to look for among `num_all` (§7.4).
pub fn num_feasible_nodes_to_find(percentage: i32, num_all: usize) -> usize {
    if num_all < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all;
    }
    let mut p = i64::from(percentage);
    if p == 0 {
        p = (50 - num_all as i64 / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let k = (num_all as i64 * p / 100) as usize;
    k.max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// The index chosen by upstream's selection: heapify the list as Go's `container/heap` does
/// with "higher score (then higher randomizer) first" and take the root. Reproducing the heap
/// (rather than a max scan) keeps tie-breaking identical to upstream for the same input order.
pub fn select_host_index(totals: &[i64], randomizer: &[i64]) -> usize {
    let n = totals.len();
    let mut h: Vec<usize> = (0..n).collect();
    let less = |h: &[usize], i: usize, j: usize| {
        let (a, b) = (h[i], h[j]);
        totals[a] > totals[b] || (totals[a] == totals[b] && randomizer[a] > randomizer[b])
    };
    let down = |h: &mut Vec<usize>, i0: usize| {
        let mut i = i0;
        loop {
            let j1 = 2 * i + 1;
            if j1 >= n {
                break;
            }
            let mut j = j1;
            let j2 = j1 + 1;
            if j2 < n && less(h, j2, j1) {
                j = j2;
            }
            if !less(h, j, i) {
                break;
            }
            h.swap(i, j);
            i = j;
        }
    };
    if n >= 2 {
        for i in (0..n / 2).rev() {
            down(&mut h, i);
        }
    }
    h.first().copied().unwrap_or(0)
}

/// Nominated pods by node, already filtered to those that matter for the pod being scheduled
/// (priority ≥ its own, not itself).
pub type NominatedPods = HashMap<String, Vec<Arc<PodInfo>>>;

/// The per-scheduler algorithm state: the rotating start index.
#[derive(Debug, Clone, Default)]
pub struct SchedulingAlgorithm {
    /// Where the next filtering walk starts.
    pub next_start_node_index: usize,
    /// Global percentageOfNodesToScore (profiles may override).
    pub percentage_of_nodes_to_score: i32,
}

impl SchedulingAlgorithm {
    /// Schedules one pod: returns the chosen node, or why none fits.
    pub fn schedule_pod(
        &mut self,
        fw: &Framework,
        profile_percentage: Option<i32>,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
    ) -> Result<ScheduleResult, ScheduleError> {
        if snapshot.num_nodes() == 0 {
            return Err(ScheduleError::NoNodesAvailable);
        }
        let percentage = profile_percentage.unwrap_or(self.percentage_of_nodes_to_score);
        let (feasible, diagnosis) = self.find_nodes_that_fit(fw, percentage, state, pod, snapshot, nominated)?;
        if feasible.is_empty() {
            return Err(ScheduleError::Fit(Box::new(FitError { num_all_nodes: snapshot.num_nodes(), diagnosis })));
        }
        let evaluated = feasible.len() + diagnosis.node_to_status.statuses.len();
        let names: Vec<String> = feasible.iter().map(|n| n.name().to_string()).collect();
        if feasible.len() == 1 {
            return Ok(ScheduleResult {
                suggested_host: names[0].clone(),
                evaluated_nodes: evaluated,
                feasible_nodes: 1,
                feasible: names,
                scores: None,
            });
        }
        let scores = prioritize_nodes(fw, state, pod, &feasible, snapshot)?;
        let randomizer = vec![0i64; feasible.len()];
        let best = select_host_index(&scores.totals, &randomizer);
        Ok(ScheduleResult {
            suggested_host: names[best].clone(),
            evaluated_nodes: evaluated,
            feasible_nodes: feasible.len(),
            feasible: names,
            scores: Some(scores),
        })
    }

    fn find_nodes_that_fit(
        &mut self,
        fw: &Framework,
        percentage: i32,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
    ) -> Result<(Vec<Arc<NodeInfo>>, Diagnosis), ScheduleError> {
        let mut diagnosis = Diagnosis::default();
        let (pre_res, s, plugins) = fw.run_pre_filter(state, pod, snapshot);
        diagnosis.unschedulable_plugins = plugins.iter().cloned().collect();
        if !s.is_success() {
            if !s.is_rejected() {
                return Err(ScheduleError::Internal(s.message()));
            }
            diagnosis.pre_filter_msg = s.message();
            diagnosis.add_plugin_status(&s);
            diagnosis.node_to_status.absent = s;
            return Ok((Vec::new(), diagnosis));
        }

        // A pod nominated by an earlier preemption tries its nominated node first.
        if let Some(nnn) =
            pod.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty())
        {
            if let Ok(ni) = snapshot.get(nnn) {
                let (feasible, _) = self.pass_filters(
                    fw,
                    percentage,
                    state,
                    pod,
                    std::slice::from_ref(ni),
                    nominated,
                    &mut diagnosis,
                    false,
                )?;
                if !feasible.is_empty() {
                    return Ok((feasible, diagnosis));
                }
            }
        }

        let all = snapshot.list();
        let candidates: Vec<Arc<NodeInfo>>;
        let nodes: &[Arc<NodeInfo>] = match pre_res.as_ref().and_then(|r| r.node_names.as_ref()) {
            None => all,
            Some(names) => {
                // Keep snapshot order so that the walk is reproducible (upstream iterates a map).
                candidates = all.iter().filter(|n| names.contains(n.name())).cloned().collect();
                let mut plugins = plugins.clone();
                plugins.sort();
                diagnosis.node_to_status.absent = Status::new(
                    Code::UnschedulableAndUnresolvable,
                    [format!("node(s) didn't satisfy plugin(s) [{}]", plugins.join(" "))],
                );
                &candidates
            }
        };
        let (feasible, processed) =
            self.pass_filters(fw, percentage, state, pod, nodes, nominated, &mut diagnosis, true)?;
        self.next_start_node_index = (self.next_start_node_index + processed) % all.len();
        Ok((feasible, diagnosis))
    }

    /// Runs filters over `nodes` starting at the rotating index until enough feasible nodes are
    /// found. Returns the feasible nodes (in walk order) and how many nodes were processed.
    #[allow(clippy::too_many_arguments)]
    fn pass_filters(
        &self,
        fw: &Framework,
        percentage: i32,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        nominated: &NominatedPods,
        diagnosis: &mut Diagnosis,
        rotate: bool,
    ) -> Result<(Vec<Arc<NodeInfo>>, usize), ScheduleError> {
        let n = nodes.len();
        if n == 0 {
            return Ok((Vec::new(), 0));
        }
        let mut to_find = num_feasible_nodes_to_find(percentage, n);
        if !fw.has_score_plugins() {
            to_find = 1;
        }
        let start = if rotate { self.next_start_node_index } else { 0 };
        if !fw.has_filter_plugins() {
            let feasible: Vec<_> = (0..to_find.min(n)).map(|i| nodes[(start + i) % n].clone()).collect();
            let len = feasible.len();
            return Ok((feasible, len));
        }
        let filters = fw.active_filters(state);
        let empty: Vec<Arc<PodInfo>> = Vec::new();
        let mut feasible: Vec<Arc<NodeInfo>> = Vec::with_capacity(to_find.min(n));
        let mut statuses: NodeToStatus = std::mem::take(&mut diagnosis.node_to_status);
        let mut processed = 0;
        let mut offset = 0;
        let par = &fw.handle().parallelizer;
        while offset < n && feasible.len() < to_find {
            // Evaluate the next batch in parallel; results come back in walk order, and only
            // nodes up to the last needed feasible one count, which keeps the outcome identical
            // to a sequential walk whatever the thread timing.
            let batch = (to_find - feasible.len()).max(par.chunk_size(n)).min(n - offset);
            let results: Vec<Status> = par.map(batch, |j| {
                let ni = &nodes[(start + offset + j) % n];
                let nom = nominated.get(ni.name()).unwrap_or(&empty);
                fw.run_filters_with_nominated_pods(&filters, state, pod, ni, nom)
            });
            for (j, st) in results.into_iter().enumerate() {
                let ni = &nodes[(start + offset + j) % n];
                if st.code() == Code::Error {
                    diagnosis.node_to_status = statuses;
                    return Err(ScheduleError::Internal(st.message()));
                }
                processed += 1;
                if st.is_success() {
                    feasible.push(ni.clone());
                    if feasible.len() == to_find {
                        break;
                    }
                } else {
                    diagnosis.add_plugin_status(&st);
                    statuses.statuses.insert(ni.name().to_string(), st);
                }
            }
            offset += batch;
        }
        diagnosis.node_to_status = statuses;
        Ok((feasible, processed))
    }
}

/// PreScore + Score over the feasible nodes; every node scores 1 without Score plugins.
pub fn prioritize_nodes(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    snapshot: &Snapshot,
) -> Result<ScoreResult, ScheduleError> {
    if !fw.has_score_plugins() {
        return Ok(ScoreResult { plugin_names: vec![], weighted: vec![], totals: vec![1; nodes.len()] });
    }
    let s = fw.run_pre_score(state, pod, nodes, snapshot);
    if !s.is_success() {
        return Err(ScheduleError::Internal(s.message()));
    }
    fw.run_score(state, pod, nodes).map_err(|s| ScheduleError::Internal(s.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_number_of_nodes() {
        assert_eq!(num_feasible_nodes_to_find(0, 50), 50);
        assert_eq!(num_feasible_nodes_to_find(0, 5000), 500);
        assert_eq!(num_feasible_nodes_to_find(0, 15000), 750);
        assert_eq!(num_feasible_nodes_to_find(0, 1000), 420);
        assert_eq!(num_feasible_nodes_to_find(0, 500), 230);
        assert_eq!(num_feasible_nodes_to_find(0, 150), 100);
        assert_eq!(num_feasible_nodes_to_find(100, 5000), 5000);
        assert_eq!(num_feasible_nodes_to_find(1, 5000), 100);
    }

    #[test]
    fn host_selection_matches_go_heap_order() {
        assert_eq!(select_host_index(&[10, 30, 20], &[0, 0, 0]), 1);
        // ties: Go's heapify leaves the first of equal elements at the root
        assert_eq!(select_host_index(&[5, 5, 5, 5], &[0, 0, 0, 0]), 0);
        // a later maximum bubbles up through the heap, earlier equal maxima stay put
        assert_eq!(select_host_index(&[1, 9, 3, 9, 9], &[0; 5]), 1);
        assert_eq!(select_host_index(&[1, 2, 3, 4, 9, 9], &[0; 6]), 4);
        assert_eq!(select_host_index(&[7], &[0]), 0);
        // the randomizer breaks ties (extenders)
        assert_eq!(select_host_index(&[5, 5], &[1, 2]), 1);
    }
}
