//! The scheduling algorithm of one cycle (upstream `schedulePod`): PreFilter, filtering with the
//! rotating start index and early stop (upstream `numFeasibleNodesToFind`, `nextStartNodeIndex`), the nominated-node and
//! batching-hint shortcut, scoring and host selection (upstream `prioritizeNodes`, `selectHost`). Pure and synchronous: it reads a snapshot and writes nothing but its own
//! start index and the profile's batching cache.

use std::collections::HashMap;
use std::sync::Arc;

use ksched_framework::batch::{PodSignature, SortedScoredNodes};
use ksched_framework::handle::ExtensionPoint;
use ksched_framework::interface::NodeToStatus;
use ksched_framework::memo::MemoKey;
use ksched_framework::parallelize::ParallelSite;
use ksched_framework::runtime::ScoreResult;
use ksched_framework::{Code, CycleState, Framework, NodeInfo, PodInfo, Snapshot, Status};

use crate::extender::{HttpExtender, EXTENDER_NAME};
use crate::fit_error::{Diagnosis, FitError, NO_NODES_AVAILABLE};
use ksched_framework::interface::{MAX_EXTENDER_PRIORITY, MAX_NODE_SCORE};

/// Below this many nodes every node is evaluated.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Lower bound of the adaptive percentage.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// How many nodes ahead the filter walk prefetches NodeInfos: enough to cover a memory
/// round-trip with the few filters a typical node costs.
const PREFETCH_AHEAD: usize = 4;

/// The filter walk's batches (the nodes that run the filters: with the memo, only those it
/// does not hold).
static FILTER_SITE: ParallelSite = ParallelSite::new();

/// Outcome of a successful cycle.
#[derive(Debug, Clone, Default)]
pub struct ScheduleResult {
    /// The chosen node.
    pub suggested_host: String,
    /// Nodes whose filters ran (feasible + rejected).
    pub evaluated_nodes: usize,
    /// Nodes that passed filtering.
    pub feasible_nodes: usize,
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

/// How many feasible nodes to look for among `num_all` (upstream `numFeasibleNodesToFind`).
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

/// The feasible nodes (by index) in upstream's selection order: a heap laid out as Go's
/// `container/heap` with "higher score (then higher randomizer) first". Reproducing the heap
/// (rather than a max scan) keeps tie-breaking identical to upstream for the same input order,
/// for the chosen node and for the batching hints taken from the rest.
pub fn sorted_node_scores(totals: &[i64], randomizer: &[i64]) -> SortedScoredNodes<usize> {
    SortedScoredNodes::new(totals.iter().zip(randomizer).enumerate().map(|(i, (t, r))| (*t, *r, i)).collect())
}

/// The index chosen by upstream's selection (`selectHost`): the first of [`sorted_node_scores`].
pub fn select_host_index(totals: &[i64], randomizer: &[i64]) -> usize {
    sorted_node_scores(totals, randomizer).pop().unwrap_or(0)
}

/// What the scheduling loop brings to a cycle for opportunistic batching.
#[derive(Debug, Clone, Copy)]
pub struct BatchCycle<'a> {
    /// The pod's signature; `None` when it cannot be batched.
    pub signature: Option<&'a PodSignature>,
    /// The queue's scheduling cycle number (consecutive cycles may share results).
    pub cycle: u64,
}

/// Nominated pods by node, already filtered to those that matter for the pod being scheduled
/// (priority ≥ its own, not itself).
pub type NominatedPods = HashMap<String, Vec<Arc<PodInfo>>>;

/// The per-scheduler algorithm state: the rotating start index and the extenders.
#[derive(Debug, Clone, Default)]
pub struct SchedulingAlgorithm {
    /// Where the next filtering walk starts.
    pub next_start_node_index: usize,
    /// Global percentageOfNodesToScore (profiles may override).
    pub percentage_of_nodes_to_score: i32,
    /// HTTP extenders, non-ignorable first.
    pub extenders: Vec<Arc<HttpExtender>>,
    /// Runtime used to wait for extender calls from the (synchronous) scheduling thread.
    pub runtime: Option<tokio::runtime::Handle>,
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
        self.schedule_pod_in(fw, profile_percentage, state, pod, snapshot, nominated, None)
    }

    /// [`SchedulingAlgorithm::schedule_pod`] restricted to a placement of a pod-group cycle:
    /// the snapshot indices of its nodes, ascending. The placement stands for the whole cluster
    /// (node count in messages, the filter walk, the nominated node), as upstream's
    /// placement-scoped snapshot does.
    #[allow(clippy::too_many_arguments)]
    pub fn schedule_pod_in(
        &mut self,
        fw: &Framework,
        profile_percentage: Option<i32>,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        placement: Option<&[usize]>,
    ) -> Result<ScheduleResult, ScheduleError> {
        self.schedule(fw, profile_percentage, state, pod, snapshot, nominated, placement, None)
    }

    /// [`SchedulingAlgorithm::schedule_pod`] for the scheduling loop: with `batch` (the profile
    /// batches), the cycle may take a node hint from the previous one and leaves its results
    /// for the next (upstream `GetNodeHint` / `StoreScheduleResults`).
    #[allow(clippy::too_many_arguments)]
    pub fn schedule_queued_pod(
        &mut self,
        fw: &Framework,
        profile_percentage: Option<i32>,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        batch: Option<BatchCycle<'_>>,
    ) -> Result<ScheduleResult, ScheduleError> {
        self.schedule(fw, profile_percentage, state, pod, snapshot, nominated, None, batch)
    }

    #[allow(clippy::too_many_arguments)]
    fn schedule(
        &mut self,
        fw: &Framework,
        profile_percentage: Option<i32>,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        placement: Option<&[usize]>,
        batch: Option<BatchCycle<'_>>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let num_nodes = placement.map_or(snapshot.num_nodes(), <[usize]>::len);
        if num_nodes == 0 {
            return Err(ScheduleError::NoNodesAvailable);
        }
        let percentage = profile_percentage.unwrap_or(self.percentage_of_nodes_to_score);
        let (feasible, diagnosis, hint, memo) =
            self.find_nodes_that_fit_hinted(fw, percentage, state, pod, snapshot, nominated, placement, batch)?;
        if feasible.is_empty() {
            return Err(ScheduleError::Fit(Box::new(FitError { num_all_nodes: num_nodes, diagnosis })));
        }
        let evaluated = feasible.len() + diagnosis.node_to_status.statuses.len();
        if feasible.len() == 1 {
            let host = feasible[0].name();
            if let Some(b) = batch {
                fw.store_schedule_results(b.signature, hint.as_deref(), host, 0, SortedScoredNodes::default, b.cycle);
            }
            return Ok(ScheduleResult {
                suggested_host: host.to_string(),
                evaluated_nodes: evaluated,
                feasible_nodes: 1,
                scores: None,
            });
        }
        let mut scores = if self.extenders.is_empty() {
            let memo = memo.as_ref().map(|m| (&m.key, m.indices.as_slice()));
            prioritize_nodes_memo(fw, state, pod, &feasible, snapshot, memo)?
        } else {
            // With extenders the framework's Score runs even without Score plugins.
            let s = fw.run_pre_score(state, pod, &feasible, snapshot);
            if !s.is_success() {
                return Err(ScheduleError::Internal(s.message()));
            }
            fw.run_score(state, pod, &feasible).map_err(|s| ScheduleError::Internal(s.message()))?
        };
        let randomizer = self.extender_scores(pod, &feasible, &mut scores);
        let mut sorted = sorted_node_scores(&scores.totals, &randomizer);
        let best = sorted.pop().unwrap_or(0);
        if let Some(b) = batch {
            // The rest of the ranking is copied out only if the cache keeps it.
            let (remaining, chosen) = (sorted.len(), feasible[best].name());
            let rest = || sorted.map(|i| feasible[i].name().to_string());
            fw.store_schedule_results(b.signature, hint.as_deref(), chosen, remaining, rest, b.cycle);
        }
        Ok(ScheduleResult {
            suggested_host: feasible[best].name().to_string(),
            evaluated_nodes: evaluated,
            feasible_nodes: feasible.len(),
            scores: Some(scores),
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn find_nodes_that_fit<'s>(
        &mut self,
        fw: &Framework,
        percentage: i32,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &'s Snapshot,
        nominated: &NominatedPods,
        placement: Option<&[usize]>,
    ) -> Result<(Vec<&'s NodeInfo>, Diagnosis), ScheduleError> {
        self.find_nodes_that_fit_hinted(fw, percentage, state, pod, snapshot, nominated, placement, None)
            .map(|(feasible, diagnosis, _, _)| (feasible, diagnosis))
    }

    /// [`Self::find_nodes_that_fit`], also returning the batching hint the cycle got (upstream
    /// `findNodesThatFitPod`).
    #[allow(clippy::too_many_arguments)]
    fn find_nodes_that_fit_hinted<'s>(
        &mut self,
        fw: &Framework,
        percentage: i32,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &'s Snapshot,
        nominated: &NominatedPods,
        placement: Option<&[usize]>,
        batch: Option<BatchCycle<'_>>,
    ) -> Result<FoundNodes<'s>, ScheduleError> {
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
            return Ok((Vec::new(), diagnosis, None, None));
        }

        // Asked even when the pod has a nominated node, as upstream does (the hint is then
        // consumed but not tried).
        let hint = batch.and_then(|b| fw.get_node_hint(state, pod, b.signature, b.cycle, snapshot));
        // A pod nominated by an earlier preemption tries its nominated node first, and a hinted
        // pod its hint: either is taken without scoring if it passes the filters.
        let nnn = pod.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty());
        if let Some(nnn) = nnn.or(hint.as_deref()) {
            let in_placement = |i: usize| placement.is_none_or(|p| p.binary_search(&i).is_ok());
            if let Some(ni) = snapshot.index.get(nnn).filter(|i| in_placement(**i)).map(|i| &snapshot.list()[*i]) {
                let (feasible, _, _) = self.pass_filters(
                    fw,
                    percentage,
                    state,
                    pod,
                    std::slice::from_ref(ni),
                    nominated,
                    &mut diagnosis,
                    false,
                    None,
                )?;
                if !feasible.is_empty() {
                    return Ok((feasible, diagnosis, hint, None));
                }
            }
        }

        let all = snapshot.list();
        let in_placement: Vec<&'s Arc<NodeInfo>>;
        let candidates: Vec<&'s Arc<NodeInfo>>;
        let num_all = placement.map_or(all.len(), <[usize]>::len);
        let mut memo = None;
        let (feasible, processed, indices) = match (pre_res.as_ref().and_then(|r| r.node_names.as_ref()), placement) {
            (None, None) => {
                memo = fw.memo_key(state, pod, all.len());
                let key = memo.as_ref();
                self.pass_filters(fw, percentage, state, pod, all, nominated, &mut diagnosis, true, key)?
            }
            (None, Some(p)) => {
                in_placement = p.iter().map(|i| &all[*i]).collect();
                let nodes = in_placement.as_slice();
                self.pass_filters(fw, percentage, state, pod, nodes, nominated, &mut diagnosis, true, None)?
            }
            (Some(names), placement) => {
                // Keep snapshot order so that the walk is reproducible (upstream iterates a map).
                candidates = match placement {
                    None => all.iter().filter(|n| names.contains(n.name())).collect(),
                    Some(p) => p.iter().map(|i| &all[*i]).filter(|n| names.contains(n.name())).collect(),
                };
                let mut plugins = plugins.clone();
                plugins.sort();
                diagnosis.node_to_status.absent = Status::new(
                    Code::UnschedulableAndUnresolvable,
                    [format!("node(s) didn't satisfy plugin(s) [{}]", plugins.join(" "))],
                );
                let nodes = candidates.as_slice();
                self.pass_filters(fw, percentage, state, pod, nodes, nominated, &mut diagnosis, true, None)?
            }
        };
        self.next_start_node_index = (self.next_start_node_index + processed) % num_all;
        let before = feasible.len();
        let feasible = self.pass_extenders(pod, feasible, &mut diagnosis.node_to_status)?;
        if feasible.len() != before {
            diagnosis.unschedulable_plugins.insert(EXTENDER_NAME.to_string());
        }
        // Score checks that the indices still match the nodes (extenders may have narrowed them).
        Ok((feasible, diagnosis, hint, memo.map(|key| MemoCycle { key, indices })))
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        match &self.runtime {
            Some(rt) => rt.block_on(f),
            None => futures::executor::block_on(f),
        }
    }

    /// Extender filters, sequentially, each narrowing the list (upstream `findNodesThatPassExtenders`).
    fn pass_extenders<'s>(
        &self,
        pod: &PodInfo,
        mut feasible: Vec<&'s NodeInfo>,
        statuses: &mut NodeToStatus,
    ) -> Result<Vec<&'s NodeInfo>, ScheduleError> {
        for ext in &self.extenders {
            if feasible.is_empty() {
                break;
            }
            if !ext.is_filter() || !ext.is_interested(&pod.pod) {
                continue;
            }
            let r = match self.block_on(ext.filter(&pod.pod, &feasible)) {
                Ok(r) => r,
                Err(e) if ext.is_ignorable() => {
                    tracing::info!(extender = ext.name(), error = %e, "skipping extender as it returned error and has ignorable flag set");
                    continue;
                }
                Err(e) => return Err(ScheduleError::Internal(e)),
            };
            for (node, msg) in &r.failed_unresolvable {
                statuses.statuses.insert(node.clone(), Status::unresolvable(msg.clone()));
            }
            for (node, msg) in r.failed.iter().filter(|(n, _)| !r.failed_unresolvable.contains_key(*n)) {
                statuses.statuses.insert(node.clone(), Status::unschedulable(msg.clone()));
            }
            feasible = r.nodes;
        }
        Ok(feasible)
    }

    /// Adds the prioritizing extenders' weighted scores (0–10 scaled to 0–100) to `scores`, and a
    /// random tie-breaker for the nodes they scored (upstream `prioritizeNodes`).
    fn extender_scores(&self, pod: &PodInfo, nodes: &[&NodeInfo], scores: &mut ScoreResult) -> Vec<i64> {
        let mut randomizer = vec![0i64; nodes.len()];
        let interested: Vec<&Arc<HttpExtender>> =
            self.extenders.iter().filter(|e| e.is_prioritizer() && e.is_interested(&pod.pod)).collect();
        if interested.is_empty() {
            return randomizer;
        }
        let calls = interested.iter().map(|e| e.prioritize(&pod.pod, nodes));
        let results = self.block_on(futures::future::join_all(calls));
        let index: std::collections::HashMap<&str, usize> =
            nodes.iter().enumerate().map(|(i, n)| (n.name(), i)).collect();
        for (ext, r) in interested.iter().zip(results) {
            // Prioritize errors are ignored, as upstream does.
            let Ok(list) = r else { continue };
            for (host, score) in list {
                if let Some(&i) = index.get(host.as_str()) {
                    scores.totals[i] += score * ext.weight() * (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY);
                    randomizer[i] = rand::random::<i64>().abs();
                }
            }
        }
        randomizer
    }

    /// Runs filters over `nodes` starting at the rotating index until enough feasible nodes are
    /// found. Returns the feasible nodes (in walk order), how many nodes were processed, and,
    /// with a memo key, the feasible nodes' indices in `nodes`.
    /// The feasible list borrows the nodes: a cycle visits hundreds of them, and reference
    /// counting each one showed up as a tenth of the scheduling thread.
    ///
    /// With `memo` (only for the snapshot's whole list, whose indices the memo is kept by), a
    /// node the memo holds as feasible for this very `NodeInfo` is taken without running the
    /// filters: they are node-local and would decide the same (see `ksched_framework::memo`).
    #[allow(clippy::too_many_arguments)]
    fn pass_filters<'s>(
        &self,
        fw: &Framework,
        percentage: i32,
        state: &CycleState,
        pod: &PodInfo,
        nodes: impl NodeList<'s>,
        nominated: &NominatedPods,
        diagnosis: &mut Diagnosis,
        rotate: bool,
        memo: Option<&MemoKey>,
    ) -> Result<(Vec<&'s NodeInfo>, usize, Vec<usize>), ScheduleError> {
        let n = nodes.len();
        if n == 0 {
            return Ok((Vec::new(), 0, Vec::new()));
        }
        let mut to_find = num_feasible_nodes_to_find(percentage, n);
        let extender_filters = self.extenders.iter().any(|e| e.is_filter());
        let extender_scoring = self.extenders.iter().any(|e| e.is_prioritizer());
        if !extender_filters && !fw.has_score_plugins() && !extender_scoring {
            to_find = 1;
        }
        let start = if rotate { self.next_start_node_index } else { 0 };
        if !fw.has_filter_plugins() {
            let feasible: Vec<_> = (0..to_find.min(n)).map(|i| nodes.at((start + i) % n)).collect();
            let len = feasible.len();
            return Ok((feasible, len, Vec::new()));
        }
        let filters = fw.bound_filters(state, pod);
        let prefetch_labels = filters.iter().any(|f| f.filter.reads_node_labels());
        let empty: Vec<Arc<PodInfo>> = Vec::new();
        let mut feasible: Vec<&'s NodeInfo> = Vec::with_capacity(to_find.min(n));
        let mut statuses: NodeToStatus = std::mem::take(&mut diagnosis.node_to_status);
        let mut processed = 0;
        let mut offset = 0;
        let mut filter_hits = vec![0u64; filters.len() + 1];
        let par = &fw.handle().parallelizer;
        let mut memo = memo.filter(|_| nominated.is_empty()).and_then(|k| fw.memo(k));
        let mut indices = Vec::new();
        while offset < n && feasible.len() < to_find {
            // Evaluate the next batch in parallel; results come back in walk order, and only
            // nodes up to the last needed feasible one count, which keeps the outcome identical
            // to a sequential walk whatever the thread timing.
            let batch = (to_find - feasible.len()).max(par.chunk_size(n)).min(n - offset);
            // `first + k` stays below 2n: one conditional subtraction instead of a division.
            let first = (start + offset) % n;
            let wrap = |i: usize| if i >= n { i - n } else { i };
            // With the memo, a node it holds as feasible is decided by one slot read here, and
            // only the others (the batch positions in `misses`) run the filters.
            let misses: Option<Vec<usize>> = memo
                .as_deref()
                .map(|m| (0..batch).filter(|&j| !m.feasible(wrap(first + j), nodes.arc(wrap(first + j)))).collect());
            let todo = misses.as_ref().map_or(batch, Vec::len);
            let position = |r: usize| misses.as_ref().map_or(r, |m| m[r]);
            let results: Vec<Status> = par.map(&FILTER_SITE, todo, |r| {
                let at = |k: usize| nodes.at(wrap(first + position(k)));
                if r + PREFETCH_AHEAD < todo {
                    at(r + PREFETCH_AHEAD).prefetch(prefetch_labels);
                }
                // Two steps behind the NodeInfo prefetch, its label pointers have arrived.
                if prefetch_labels && r + PREFETCH_AHEAD / 2 < todo {
                    at(r + PREFETCH_AHEAD / 2).prefetch_labels();
                }
                let ni = at(r);
                if nominated.is_empty() {
                    return fw.run_filters(&filters, state, pod, ni);
                }
                let nom = nominated.get(ni.name()).unwrap_or(&empty);
                fw.run_filters_with_nominated_pods(&filters, state, pod, ni, nom)
            });
            // scheduler_plugin_evaluation_total{extension_point="Filter"}: a node ran every filter
            // up to the one that rejected it; a kept node counts as having run them all.
            filter_hits[filters.len()] += (batch - todo) as u64;
            fw.record_memo_reuse((batch - todo) as u64);
            for st in &results {
                let ran = match st.plugin() {
                    Some(name) if !st.is_success() => {
                        filters.iter().position(|f| f.plugin.name() == name).map_or(filters.len(), |i| i + 1)
                    }
                    _ => filters.len(),
                };
                filter_hits[ran] += 1;
            }
            let mut results = results.into_iter();
            let mut evaluated = 0;
            for j in 0..batch {
                let i = wrap(first + j);
                let ni = nodes.at(i);
                processed += 1;
                if evaluated == todo || position(evaluated) != j {
                    // Kept: feasible, and its slot already refers to this node.
                    indices.push(i);
                    feasible.push(ni);
                    if feasible.len() == to_find {
                        break;
                    }
                    continue;
                }
                evaluated += 1;
                let st = results.next().expect("one result per evaluated node");
                if st.code() == Code::Error {
                    diagnosis.node_to_status = statuses;
                    return Err(ScheduleError::Internal(st.message()));
                }
                if st.is_success() {
                    st.discard();
                    if let Some(m) = memo.as_mut() {
                        m.record_feasible(i, nodes.arc(i));
                        indices.push(i);
                    }
                    feasible.push(ni);
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
        let mut ran = 0;
        for (i, f) in filters.iter().enumerate().rev() {
            ran += filter_hits[i + 1];
            fw.record_plugin_evaluations(f.plugin.name(), ExtensionPoint::Filter, ran);
        }
        diagnosis.node_to_status = statuses;
        Ok((feasible, processed, indices))
    }
}

/// A list of snapshot nodes the filter walk can borrow from for the snapshot's lifetime `'s`:
/// the whole snapshot list, or a PreFilter-narrowed selection of it.
trait NodeList<'s>: Copy + Sync {
    fn len(&self) -> usize;
    fn arc(&self, i: usize) -> &'s Arc<NodeInfo>;
    #[inline]
    fn at(&self, i: usize) -> &'s NodeInfo {
        self.arc(i)
    }
}

impl<'s> NodeList<'s> for &'s [Arc<NodeInfo>] {
    fn len(&self) -> usize {
        <[_]>::len(self)
    }
    #[inline]
    fn arc(&self, i: usize) -> &'s Arc<NodeInfo> {
        &self[i]
    }
}

impl<'s> NodeList<'s> for &[&'s Arc<NodeInfo>] {
    fn len(&self) -> usize {
        <[_]>::len(self)
    }
    #[inline]
    fn arc(&self, i: usize) -> &'s Arc<NodeInfo> {
        self[i]
    }
}

/// What the filter walk found: the feasible nodes, why the others failed, the batching hint the
/// cycle got, and its memo key with the feasible nodes' snapshot indices.
type FoundNodes<'s> = (Vec<&'s NodeInfo>, Diagnosis, Option<String>, Option<MemoCycle>);

/// A cycle's memo key and its feasible nodes' snapshot indices, from the filter walk to Score.
struct MemoCycle {
    key: MemoKey,
    indices: Vec<usize>,
}

/// PreScore + Score over the feasible nodes; every node scores 1 without Score plugins.
pub fn prioritize_nodes(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    nodes: &[&NodeInfo],
    snapshot: &Snapshot,
) -> Result<ScoreResult, ScheduleError> {
    prioritize_nodes_memo(fw, state, pod, nodes, snapshot, None)
}

/// [`prioritize_nodes`], reusing unchanged nodes' raw scores under the cycle's memo key.
fn prioritize_nodes_memo(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    nodes: &[&NodeInfo],
    snapshot: &Snapshot,
    memo: Option<(&MemoKey, &[usize])>,
) -> Result<ScoreResult, ScheduleError> {
    if !fw.has_score_plugins() {
        return Ok(ScoreResult { totals: vec![1; nodes.len()], ..Default::default() });
    }
    let s = fw.run_pre_score(state, pod, nodes, snapshot);
    if !s.is_success() {
        return Err(ScheduleError::Internal(s.message()));
    }
    fw.run_score_memo(state, pod, nodes, memo).map_err(|s| ScheduleError::Internal(s.message()))
}

#[path = "schedule_one/memo_check.rs"]
pub mod memo_check;

#[cfg(test)]
#[path = "schedule_one/memo_tests.rs"]
mod memo_tests;

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
