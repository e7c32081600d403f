//! The plugin traits, one per extension point, and the types they exchange (upstream `framework/interface.go`).
//!
//! A plugin is one object implementing [`Plugin`] plus any number of extension-point traits; it
//! advertises them through the `as_*` methods so one instance serves every point it implements.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pod::Pod;
use futures::future::BoxFuture;

use crate::batch::signature::FragmentWriter;
use crate::batch::{PodSignature, SignatureBuilder};
use crate::cycle_state::CycleState;
use crate::events::ClusterEventWithHint;
use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

/// Highest score a Score plugin may return after normalisation.
pub const MAX_NODE_SCORE: i64 = 100;
/// Lowest score.
pub const MIN_NODE_SCORE: i64 = 0;
/// Highest score an extender may return.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;
/// Longest a Permit plugin may ask a pod to wait.
pub const MAX_PERMIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The base trait of every plugin. Override the `as_*` methods for the points you implement.
pub trait Plugin: Send + Sync + 'static {
    /// The plugin name as used in configuration.
    fn name(&self) -> &str;
    /// This plugin as a PreEnqueue plugin.
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    /// This plugin as a QueueSort plugin.
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    /// This plugin as a PreFilter plugin.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// This plugin as a Filter plugin.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// This plugin as a PostFilter plugin.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// This plugin as a PreScore plugin.
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    /// This plugin as a Score plugin.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// This plugin as a Reserve plugin.
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// This plugin as a Permit plugin.
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// This plugin as a PreBind plugin.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    /// This plugin as a Bind plugin.
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    /// This plugin as a PostBind plugin.
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
    /// This plugin as a PlacementGenerate plugin (pod-group cycle).
    fn as_placement_generate(&self) -> Option<&dyn PlacementGeneratePlugin> {
        None
    }
    /// This plugin as a PlacementScore plugin (pod-group cycle).
    fn as_placement_score(&self) -> Option<&dyn PlacementScorePlugin> {
        None
    }
    /// This plugin as a PodGroupPostFilter plugin (workload-aware preemption).
    fn as_pod_group_post_filter(&self) -> Option<&dyn PodGroupPostFilterPlugin> {
        None
    }
    /// This plugin as a Sign plugin (opportunistic batching). A profile signs pods only when
    /// every PreFilter, Filter, PreScore and Score plugin signs.
    fn as_sign(&self) -> Option<&dyn SignPlugin> {
        None
    }
    /// This plugin as a node-local plugin whose Filter verdicts and raw Scores the framework may
    /// reuse for nodes that have not changed (see [`crate::memo`]).
    fn as_memo(&self) -> Option<&dyn MemoPlugin> {
        None
    }
    /// The concrete plugin, for callers that read its configuration (e.g. its args).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// EnqueueExtensions: the events that may make pods this plugin rejected schedulable.
    /// `None` registers the plugin for every event.
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        None
    }
}

/// Gates a pod before it enters the active queue. Must be cheap.
pub trait PreEnqueuePlugin {
    /// Success lets the pod in; anything else keeps it gated.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

/// A pod as it sits in the scheduling queue.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    /// The pod.
    pub pod_info: Arc<PodInfo>,
    /// Last time the pod was added to the queue.
    pub timestamp: Instant,
    /// Number of scheduling attempts.
    pub attempts: u32,
    /// When the pod first became active (for the SLI metric).
    pub initial_attempt_timestamp: Option<Instant>,
    /// Failures with rejector plugins (drives backoff).
    pub unschedulable_count: u32,
    /// Consecutive failures with errors (drives the error backoff).
    pub consecutive_errors_count: u32,
    /// Plugins that rejected the pod in its last attempt.
    pub unschedulable_plugins: BTreeSet<String>,
    /// Plugins that returned Pending in its last attempt.
    pub pending_plugins: BTreeSet<String>,
    /// The PreEnqueue plugin gating the pod, if any.
    pub gating_plugin: Option<String>,
    /// True when the pod was moved by the unschedulable-timeout flush.
    pub was_flushed_from_unschedulable: bool,
    /// The pod's signature for opportunistic batching, computed when it was queued or
    /// updated; `None` when the pod cannot be batched (or batching is off).
    pub signature: Option<PodSignature>,
}

impl QueuedPodInfo {
    /// A freshly queued pod.
    pub fn new(pod_info: Arc<PodInfo>, now: Instant) -> Self {
        QueuedPodInfo {
            pod_info,
            timestamp: now,
            attempts: 0,
            initial_attempt_timestamp: None,
            unschedulable_count: 0,
            consecutive_errors_count: 0,
            unschedulable_plugins: BTreeSet::new(),
            pending_plugins: BTreeSet::new(),
            gating_plugin: None,
            was_flushed_from_unschedulable: false,
            signature: None,
        }
    }

    /// The pod object.
    pub fn pod(&self) -> &Pod {
        &self.pod_info.pod
    }
}

/// Orders the active queue. Exactly one per profile, identical across profiles.
pub trait QueueSortPlugin {
    /// True when `a` should be scheduled before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
}

/// Nodes a PreFilter plugin restricts scheduling to; `None` means all nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    /// The allowed node names.
    pub node_names: Option<HashSet<String>>,
}

impl PreFilterResult {
    /// True when every node is allowed.
    pub fn all_nodes(&self) -> bool {
        self.node_names.is_none()
    }

    /// Intersects two results (None is the identity).
    pub fn merge(&self, other: &PreFilterResult) -> PreFilterResult {
        match (&self.node_names, &other.node_names) {
            (None, x) | (x, None) => PreFilterResult { node_names: x.clone() },
            (Some(a), Some(b)) => PreFilterResult { node_names: Some(a.intersection(b).cloned().collect()) },
        }
    }
}

/// Runs once per cycle before filtering; may narrow the node set and precompute state.
pub trait PreFilterPlugin {
    /// Skip means "my Filter has nothing to check for this pod".
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status);
    /// Incremental updates of the precomputed state, used with nominated pods and preemption.
    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
}

/// Updates PreFilter state when a pod is hypothetically added to or removed from a node.
pub trait PreFilterExtensions {
    /// `pod_to_add` is assumed on `node`.
    fn add_pod(&self, state: &mut CycleState, pod: &PodInfo, pod_to_add: &Arc<PodInfo>, node: &NodeInfo) -> Status;
    /// `pod_to_remove` is assumed gone from `node`.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;
}

/// Decides whether the pod fits one node. Called in parallel across nodes.
pub trait FilterPlugin: Sync {
    /// Success when the node can host the pod.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;

    /// Optionally resolves once per cycle what [`FilterPlugin::filter`] would look up in `state`
    /// for every node (its PreFilter state); the node walk then calls the returned function
    /// instead. It must decide exactly as `filter` does for this state and pod. `None` (the
    /// default, or when the state is missing) keeps `filter`.
    fn bind_cycle<'a>(&'a self, _state: &'a CycleState, _pod: &'a PodInfo) -> Option<BoundFilter<'a>> {
        None
    }

    /// True when the filter looks node labels up through [`NodeInfo::label`]; the node walk then
    /// prefetches each node's packed labels.
    fn reads_node_labels(&self) -> bool {
        false
    }
}

/// A Filter bound to one cycle's state and pod by [`FilterPlugin::bind_cycle`].
pub type BoundFilter<'a> = Box<dyn Fn(&NodeInfo) -> Status + Send + Sync + 'a>;

/// Per-node filter outcomes of a cycle, with the status assumed for nodes not listed.
#[derive(Debug, Clone)]
pub struct NodeToStatus {
    /// Explicit statuses by node name.
    pub statuses: HashMap<String, Status>,
    /// Status of every node not in `statuses` (PreFilter narrowing, or a PreFilter failure).
    pub absent: Status,
}

impl Default for NodeToStatus {
    fn default() -> Self {
        NodeToStatus {
            statuses: HashMap::new(),
            absent: Status::new(Code::UnschedulableAndUnresolvable, Vec::<String>::new()),
        }
    }
}

impl NodeToStatus {
    /// The status of a node (explicit or the absent one).
    pub fn get(&self, node: &str) -> &Status {
        self.statuses.get(node).unwrap_or(&self.absent)
    }

    /// Nodes (from `all`) whose status code is one of `codes`.
    pub fn nodes_with_codes<'a>(&self, all: &'a [Arc<NodeInfo>], codes: &[Code]) -> Vec<&'a Arc<NodeInfo>> {
        all.iter().filter(|n| codes.contains(&self.get(n.name()).code())).collect()
    }
}

/// Upstream's `FitError.Error()` text: `0/<N> nodes are available:` followed by the PreFilter
/// message, or else by the reason histogram (`<count> <reason>` sorted as strings, so "10 x"
/// precedes "2 y"), then the PostFilter message. Shared by the scheduler and preemption, which
/// reports its own "no candidates" result in the same shape.
pub fn fit_error_message(
    num_all_nodes: usize,
    statuses: &NodeToStatus,
    pre_filter_msg: &str,
    post_filter_msg: &str,
) -> String {
    let mut msg = format!("0/{num_all_nodes} nodes are available:");
    if !pre_filter_msg.is_empty() {
        msg.push_str(&format!(" {pre_filter_msg}."));
    } else {
        let mut hist: HashMap<String, usize> = HashMap::new();
        for s in statuses.statuses.values() {
            for r in s.all_reasons() {
                *hist.entry(r).or_default() += 1;
            }
        }
        let explicit = statuses.statuses.len();
        if explicit < num_all_nodes {
            for r in statuses.absent.all_reasons() {
                *hist.entry(r).or_default() += num_all_nodes - explicit;
            }
        }
        let mut parts: Vec<String> = hist.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.sort();
        if !parts.is_empty() {
            msg.push_str(&format!(" {}.", parts.join(", ")));
        }
    }
    if !post_filter_msg.is_empty() {
        msg.push_str(&format!(" {post_filter_msg}"));
    }
    msg
}

/// How a PostFilter result changes the pod's nominated node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NominatingMode {
    /// Keep the current nomination.
    Noop,
    /// Replace it (an empty name clears it).
    Override,
}

/// A nomination decided by PostFilter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NominatingInfo {
    /// The nominated node ("" clears).
    pub nominated_node_name: String,
    /// Whether to apply it.
    pub mode: NominatingMode,
}

/// Result of a PostFilter plugin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PostFilterResult {
    /// The nomination, if any.
    pub nominating_info: Option<NominatingInfo>,
}

/// Runs when no node fits (e.g. preemption).
pub trait PostFilterPlugin {
    /// Success with a nomination when it made room; Unschedulable otherwise.
    fn post_filter(
        &self,
        fw: &crate::runtime::Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status);
}

/// Runs once per cycle over the feasible nodes before scoring.
pub trait PreScorePlugin {
    /// Skip means "my Score has nothing to contribute for this pod". `nodes` are the feasible
    /// nodes; `snapshot` has every node (pods on infeasible nodes can still count, as upstream's
    /// plugins read them through the snapshot lister).
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[&NodeInfo], snapshot: &Snapshot) -> Status;
}

/// Fills `out` with `score(node)` for each of `nodes` (same length), stopping at the first
/// failure, which carries its node's index: the loop of every [`ScorePlugin::score_nodes`].
#[inline]
pub fn score_each(
    nodes: &[&NodeInfo],
    out: &mut [i64],
    mut score: impl FnMut(&NodeInfo) -> Result<i64, Status>,
) -> Result<(), (usize, Status)> {
    for (i, (node, o)) in nodes.iter().zip(out).enumerate() {
        *o = score(node).map_err(|s| (i, s))?;
    }
    Ok(())
}

/// Ranks feasible nodes. Called in parallel across nodes.
pub trait ScorePlugin: Sync {
    /// The raw score of one node.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;
    /// Raw scores of a run of nodes into `out` (same length); a failure carries the index of its
    /// node. The default calls `score` per node; plugins override it to read their cycle state
    /// once per run rather than once per node, which matters at thousands of nodes per cycle.
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), (usize, Status)> {
        score_each(nodes, out, |node| self.score(state, pod, node))
    }
    /// Whether `normalize_score` does anything (saves a pass when not).
    fn has_normalize(&self) -> bool {
        false
    }
    /// Rescales the raw scores (aligned with `nodes`) into [0, 100].
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _nodes: &[&NodeInfo],
        _scores: &mut [i64],
    ) -> Status {
        Status::success()
    }
}

/// Reserves resources for the pod on the chosen node before binding; must undo in `unreserve`.
pub trait ReservePlugin {
    /// Reserve; a failure triggers Unreserve of every Reserve plugin in reverse order.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    /// Undo; must be idempotent.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// Approves, rejects or delays binding.
pub trait PermitPlugin {
    /// Wait returns how long the pod may wait (capped at 15 minutes).
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> (Status, Duration);
}

/// Prepares binding (volumes, claims). Runs in the binding cycle, may do I/O.
pub trait PreBindPlugin: Sync {
    /// Cheap check: Skip when PreBind has nothing to do for this pod.
    fn pre_bind_pre_flight(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) -> Status {
        Status::success()
    }
    /// The work itself.
    fn pre_bind<'a>(&'a self, state: &'a CycleState, pod: &'a PodInfo, node: &'a str) -> BoxFuture<'a, Status>;
}

/// Binds the pod to the node. Skip passes to the next binder.
pub trait BindPlugin: Sync {
    /// Bind.
    fn bind<'a>(&'a self, state: &'a CycleState, pod: &'a PodInfo, node: &'a str) -> BoxFuture<'a, Status>;
}

/// Informational hook after a successful bind.
pub trait PostBindPlugin {
    /// Called after binding.
    fn post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str);
}

/// Contributes to a pod's signature (upstream `SignPlugin`): two pods with the same signature
/// must get the same filtering and scoring on the same nodes, so the scheduler may reuse one's
/// results for the other (see [`crate::batch`]).
pub trait SignPlugin {
    /// Adds the fragments this plugin's decisions depend on. Unschedulable refuses to sign
    /// (the pod is not batched); Error does the same and is logged.
    fn sign_pod(&self, pod: &PodInfo, sig: &mut SignatureBuilder) -> Status;
}

/// A node-local plugin (see [`crate::memo`]): its Filter outcome and raw Score on a node are a
/// function of the inputs it writes here, the node's `NodeInfo`, the number of nodes and the
/// shared image summaries, never of other nodes, of where other pods are, or of objects outside
/// the snapshot. The framework reuses them for a node that has not changed.
pub trait MemoPlugin {
    /// Writes every input of this plugin's Filter and raw Score that comes from the pod or the
    /// cycle state (after PreFilter, before PreScore), exactly as they are read: two cycles that
    /// write the same bytes must get the same outcome on the same `NodeInfo`. Returns false when
    /// an input cannot be written exactly; the cycle then runs the plugins on every node.
    fn memo_inputs(&self, state: &CycleState, pod: &PodInfo, w: &mut FragmentWriter<'_>) -> bool;
}

/// Proposes the node sets a pod group is tried in (pod-group cycle). At most one per profile.
pub trait PlacementGeneratePlugin {
    /// Placements for `group` within `parent` (the nodes the cycle may use). An empty list means
    /// no placement can host the group.
    fn generate_placements(
        &self,
        group: &crate::podgroup::PodGroupInfo,
        parent: &crate::podgroup::Placement,
        snapshot: &Snapshot,
    ) -> Result<Vec<crate::podgroup::Placement>, Status>;
}

/// Makes room for a pod group that does not fit (upstream's PodGroupPostFilter, which only
/// DefaultPreemption implements): victims are chosen as whole units, by re-running the group's
/// scheduling on the snapshot without them, and evicted on the group's behalf.
pub trait PodGroupPostFilterPlugin {
    /// The victims whose removal lets the group fit (`fits` re-runs the group's scheduling on
    /// the snapshot as changed), or why there are none. Leaves `snapshot` as it found it.
    fn select_pod_group_victims(
        &self,
        request: &crate::podgroup::PodGroupPreemption<'_>,
        snapshot: &mut Snapshot,
        fits: &mut dyn FnMut(&mut Snapshot) -> Status,
    ) -> Result<crate::podgroup::PodGroupVictims, Status>;
    /// Evicts the chosen victims in the background on behalf of the group.
    fn actuate_pod_group_preemption(
        &self,
        fw: &crate::runtime::Framework,
        pod_group: &crate::podgroup::PodGroup,
        pods: &[Arc<PodInfo>],
        victims: &crate::podgroup::PodGroupVictims,
    );
}

/// Ranks the placements in which the group was found feasible (pod-group cycle).
pub trait PlacementScorePlugin {
    /// The raw score of one placement; higher is better.
    fn score_placement(
        &self,
        group: &crate::podgroup::PodGroupInfo,
        assignments: &crate::podgroup::PodGroupAssignments,
        snapshot: &Snapshot,
    ) -> Result<i64, Status>;
    /// Whether `normalize_placement_scores` does anything.
    fn has_normalize(&self) -> bool {
        false
    }
    /// Rescales the raw scores (one per placement) into [0, 100].
    fn normalize_placement_scores(&self, _group: &crate::podgroup::PodGroupInfo, _scores: &mut [i64]) -> Status {
        Status::success()
    }
}
