//! DefaultPreemption (upstream `framework/plugins/defaultpreemption` and `framework/preemption`): when no node fits, find the node where evicting the fewest,
//! least important lower-priority pods makes room, nominate the pod there and evict them.
//!
//! The evaluation (eligibility, candidate search by dry run, the extenders' preempt verb,
//! candidate choice) runs inside the scheduling cycle; the evictions run asynchronously
//! (SchedulerAsyncPreemption, on by default in 1.36) and the preemptor is gated at PreEnqueue
//! until they are issued.
//!
//! Determinism: upstream picks the dry-run start offset with `rand`, evaluates nodes in parallel
//! with cancellation, and breaks the final candidate tie by map iteration order. Here the offset
//! comes from a seeded generator, nodes are evaluated in parallel batches whose results are folded
//! in walk order (so the dry run stops exactly where a sequential walk would), and the final tie
//! goes to the first candidate in walk order. The outcome is one of upstream's possible outcomes
//! and is reproducible run to run.

mod args;
mod candidates;
mod executor;
mod extenders;
mod plan;
mod podgroup;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ksched_framework::interface::fit_error_message;
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::pod_priority;
use ksched_framework::podgroup::group_key_of;
use ksched_framework::{
    ActionType, ClusterEventWithHint, Code, CycleState, EventResource, Framework, Handle, NodeToStatus, NominatingInfo,
    NominatingMode, Plugin, PodInfo, PostFilterPlugin, PostFilterResult, PreEnqueuePlugin, QueueingHint, Snapshot,
    Status,
};

use crate::names;

pub use args::{validate_default_preemption_args, DefaultPreemptionArgs};
pub use candidates::{pick_one_node_for_preemption, Candidate};
pub use executor::{pod_group_key, Executor, Preemptor};
pub use plan::PreemptionPlan;
pub use podgroup::{
    CLUSTER_DOMAIN, NOT_ELIGIBLE_PLACEMENT_BASED, NOT_ELIGIBLE_WORKLOAD_AWARE, NO_VICTIMS_FOR_PREEMPTOR,
    POD_GROUP_NOT_FOUND, WAITING_FOR_POD_GROUP_PREEMPTION,
};

/// PreEnqueue reason while the pod's victims are being evicted.
pub const WAITING_FOR_PREEMPTION: &str = "waiting for the preemption for this pod to be finished";
/// Eligibility reason for `preemptionPolicy: Never`.
pub const NOT_ELIGIBLE_POLICY_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// Eligibility reason while an earlier preemption's victims are still terminating.
pub const NOT_ELIGIBLE_TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";
/// Per-node reason when the node hosts no lower-priority pod.
pub const NO_VICTIMS_FOUND: &str = "No preemption victims found for incoming pod";
/// Reason for every node that was not a preemption candidate at all.
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// Preemption counters (upstream's `scheduler_preemption_attempts_total` and the sum of
/// `scheduler_preemption_victims`), for the metrics endpoint to export.
#[derive(Debug, Default)]
pub struct PreemptionMetrics {
    /// PostFilter invocations.
    pub attempts: AtomicU64,
    /// Victims selected across all actuated preemptions.
    pub victims: AtomicU64,
    /// Actuations (one per observation of the victims histogram).
    pub actuations: AtomicU64,
}

/// A tiny seeded generator (SplitMix64) for the dry-run offset; see the module docs.
#[derive(Debug)]
struct OffsetRng(u64);

impl OffsetRng {
    fn next_below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % n.max(1) as u64) as usize
    }
}

/// Seed of the offset generator.
pub const OFFSET_SEED: u64 = 0x05ee_d0f5_c4ed;

/// The DefaultPreemption plugin.
pub struct DefaultPreemption {
    args: DefaultPreemptionArgs,
    handle: Handle,
    executor: Arc<Executor>,
    rng: Mutex<OffsetRng>,
    /// Fixed dry-run offset (tests), instead of the generator.
    fixed_offset: Option<usize>,
    metrics: Arc<PreemptionMetrics>,
}

impl std::fmt::Debug for DefaultPreemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultPreemption").field("args", &self.args).finish_non_exhaustive()
    }
}

/// Builds the plugin from `DefaultPreemptionArgs` (decoded strictly, defaulted, validated).
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(DefaultPreemption::new(args, handle)?))
}

impl DefaultPreemption {
    /// The plugin with its concrete type (tests and embedding).
    pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Self, String> {
        let args = DefaultPreemptionArgs::decode(args)?;
        validate_default_preemption_args("", &args)?;
        let metrics = Arc::new(PreemptionMetrics::default());
        Ok(DefaultPreemption {
            args,
            handle: handle.clone(),
            executor: Arc::new(Executor::new(handle.clone(), names::DEFAULT_PREEMPTION, metrics.clone())),
            rng: Mutex::new(OffsetRng(OFFSET_SEED)),
            fixed_offset: None,
            metrics,
        })
    }

    /// Uses `offset` (modulo the number of potential nodes) instead of the generator.
    pub fn with_fixed_offset(mut self, offset: usize) -> Self {
        self.fixed_offset = Some(offset);
        self
    }

    /// The effective args.
    pub fn args(&self) -> &DefaultPreemptionArgs {
        &self.args
    }

    /// The executor (whose state drives PreEnqueue gating).
    pub fn executor(&self) -> &Arc<Executor> {
        &self.executor
    }

    /// The plugin's counters.
    pub fn metrics(&self) -> &Arc<PreemptionMetrics> {
        &self.metrics
    }

    /// How many candidates the dry run must find among `num_nodes` potential nodes.
    pub fn calculate_num_candidates(&self, num_nodes: usize) -> usize {
        let n = num_nodes as i64;
        let wanted = (n * i64::from(self.args.min_candidate_nodes_percentage) / 100)
            .max(i64::from(self.args.min_candidate_nodes_absolute));
        wanted.min(n).max(0) as usize
    }

    /// The dry-run start offset and the number of candidates to find.
    pub fn offset_and_num_candidates(&self, num_nodes: usize) -> (usize, usize) {
        let offset = match self.fixed_offset {
            Some(o) => o % num_nodes.max(1),
            None => self.rng.lock().unwrap_or_else(|e| e.into_inner()).next_below(num_nodes),
        };
        (offset, self.calculate_num_candidates(num_nodes))
    }

    /// Whether the pod may preempt at all; `Err` carries the reason (upstream `PodEligibleToPreemptOthers`).
    pub fn pod_eligible_to_preempt_others(
        &self,
        pod: &Pod,
        snapshot: &Snapshot,
        nominated_node_status: &Status,
    ) -> Result<(), &'static str> {
        let spec = pod.spec.as_ref();
        if spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never") {
            return Err(NOT_ELIGIBLE_POLICY_NEVER);
        }
        let nnn = pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).unwrap_or_default();
        if nnn.is_empty() {
            return Ok(());
        }
        // The nominated node stopped being an option, so preempting elsewhere is fine.
        if nominated_node_status.code() == Code::UnschedulableAndUnresolvable {
            return Ok(());
        }
        if let Ok(ni) = snapshot.get(nnn) {
            let prio = pod_priority(pod);
            if ni.pods.iter().any(|p| p.priority() < prio && terminating_by_preemption(&p.pod)) {
                return Err(NOT_ELIGIBLE_TERMINATING);
            }
        }
        Ok(())
    }

    /// The evaluation and actuation (upstream `Evaluator.Preempt`), without the message prefix.
    fn preempt(
        &self,
        fw: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        // The informer's copy carries the freshest nominatedNodeName and conditions.
        let fresh = match self.handle.scheduler() {
            Some(view) => match view.get_pod(pod.namespace(), pod.name()) {
                Some(p) => Arc::new(PodInfo::new(p)),
                None => return (None, Status::error(format!("pod {:?} not found", pod.name()))),
            },
            None => Arc::new(pod.clone()),
        };
        let nnn = fresh.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).unwrap_or_default();
        if let Err(reason) = self.pod_eligible_to_preempt_others(&fresh.pod, snapshot, statuses.get(nnn)) {
            return (None, Status::unschedulable(reason));
        }

        let all_nodes = snapshot.list();
        if all_nodes.is_empty() {
            return (None, Status::error("no nodes available"));
        }
        let potential = statuses.nodes_with_codes(all_nodes, &[Code::Unschedulable]);
        let (found, node_statuses, errors) = if potential.is_empty() {
            (Vec::new(), NodeToStatus::default(), Vec::new())
        } else {
            let pdbs = candidates::pod_disruption_budgets(&self.handle, &potential);
            let (offset, num) = self.offset_and_num_candidates(potential.len());
            candidates::dry_run_preemption(self, fw, state, &fresh, &potential, &pdbs, offset, num)
        };
        if found.is_empty() {
            if !errors.is_empty() {
                return (None, Status::error(aggregate(&errors)));
            }
            let mut statuses = node_statuses;
            statuses.absent = Status::unresolvable(NOT_HELPFUL);
            let msg = fit_error_message(all_nodes.len(), &statuses, "", "");
            let clear = NominatingInfo { nominated_node_name: String::new(), mode: NominatingMode::Override };
            return (Some(PostFilterResult { nominating_info: Some(clear) }), Status::unschedulable(msg));
        }

        let found = match extenders::call_extenders(&self.handle.extenders, &fresh.pod, found, snapshot) {
            Ok(found) => found,
            Err(status) => return (None, status),
        };
        let best = match found.len() {
            0 => None,
            1 => Some(&found[0]),
            _ => Some(&found[pick_one_node_for_preemption(&found)]),
        };
        let Some(best) = best.filter(|b| !b.name.is_empty()) else {
            return (None, Status::unschedulable("no candidate node for preemption"));
        };
        self.executor.actuate(fw, &best.name, &best.victims, fresh.pod.clone());
        let nominate = NominatingInfo { nominated_node_name: best.name.clone(), mode: NominatingMode::Override };
        (Some(PostFilterResult { nominating_info: Some(nominate) }), Status::success())
    }

    /// Nominated pods the two-pass filter must account for on `node` (as in upstream `RunFilterPluginsWithNominatedPods`).
    fn nominated_pods_for(&self, node: &str, pod: &PodInfo) -> Vec<Arc<PodInfo>> {
        let Some(view) = self.handle.scheduler() else { return Vec::new() };
        let prio = pod.priority();
        view.nominated_pods_for_node(node)
            .into_iter()
            .filter(|p| p.priority() >= prio && p.uid() != pod.uid())
            .collect()
    }
}

use ksched_framework::gofmt::aggregate;

/// True when the pod is terminating because the scheduler preempted it.
pub fn terminating_by_preemption(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    // Only the first DisruptionTarget condition counts, as upstream reads it.
    conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some(executor::REASON_PREEMPTION_BY_SCHEDULER))
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &str {
        names::DEFAULT_PREEMPTION
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }

    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }

    fn as_pod_group_post_filter(&self) -> Option<&dyn ksched_framework::PodGroupPostFilterPlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        // Registered so a deletion can un-gate the preemptor; the requeue decision itself is
        // left to the plugins whose rejection the preemption resolves.
        Some(vec![ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::DELETE, |_, _, _| {
            Ok(QueueingHint::QueueSkip)
        })])
    }
}

impl PreEnqueuePlugin for DefaultPreemption {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if self.handle.features.workload_aware_preemption {
            if let Some(key) = group_key_of(&pod.pod) {
                // A member whose group is missing is not held here: that is GangScheduling's.
                let Some(pg) = self.handle.pod_groups.get(&key.namespace, &key.name) else {
                    return Status::success();
                };
                if self.executor.is_pod_group_running_preemption(&pg) {
                    return Status::unresolvable(WAITING_FOR_POD_GROUP_PREEMPTION);
                }
                return Status::success();
            }
        }
        if self.executor.is_pod_running_preemption(pod.uid()) {
            return Status::unresolvable(WAITING_FOR_PREEMPTION);
        }
        Status::success()
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        self.metrics.attempts.fetch_add(1, Ordering::Relaxed);
        if let Some(key) = group_key_of(&pod.pod) {
            let features = &self.handle.features;
            if features.topology_aware_workload_scheduling {
                let Some(pg) = self.handle.pod_groups.get(&key.namespace, &key.name) else {
                    return (None, Status::unschedulable(POD_GROUP_NOT_FOUND));
                };
                if pg.spec.scheduling_constraints.is_some() {
                    // Preempting for each placement tried would preempt once per domain.
                    return (None, Status::unschedulable(NOT_ELIGIBLE_PLACEMENT_BASED));
                }
            }
            if features.workload_aware_preemption {
                // The group preempts as a whole after its cycle (PodGroupPostFilter).
                return (None, Status::unschedulable(NOT_ELIGIBLE_WORKLOAD_AWARE));
            }
        }
        let (result, status) = self.preempt(fw, state, pod, snapshot, statuses);
        let msg = status.message();
        if msg.is_empty() {
            return (result, status);
        }
        (result, Status::new(status.code(), [format!("preemption: {msg}")]))
    }
}

#[cfg(test)]
mod tests;
