//! The pod-group algorithms: the default one (every member in turn, in one snapshot, each
//! seeing the members placed before it), the placement one (TopologyAwareWorkloadScheduling:
//! the default one per placement, then PlacementScore), and one member's attempt.

use std::collections::HashSet;
use std::sync::Arc;

use ksched_framework::interface::QueuedPodInfo;
use ksched_framework::podgroup::{
    new_cycle, Placement, PodGroupAssignments, PodGroupCycle, PodGroupInfo, PodGroups, ProposedAssignment,
};
use ksched_framework::snapshot::SnapshotUndo;
use ksched_framework::{Code, CycleState, Framework, PodInfo, Snapshot, Status};
use ksched_plugins::gangscheduling::GangSchedulingArgs;

use super::{GroupResult, GroupStatus, PodResult, WAITING_FOR_PREEMPTION};
use crate::fit_error::Diagnosis;
use crate::schedule_one::{NominatedPods, ScheduleError};
use crate::scheduler::{clear_nominated, Failure, Profile, Scheduler, PLUGIN_METRICS_SAMPLE_PERCENT};

/// Whether members' PostFilter plugins (their own preemption) run when they do not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PostFilters {
    /// As in a pod's own cycle (upstream's `runAllPostFilters`).
    Run,
    /// Skipped with upstream's "All PostFilter plugins are skipped" (`runWithoutPostFilters`,
    /// the feasibility checks of workload-aware preemption).
    Skip,
    /// Not run at all, no message (past upstream: gangs preempt whole or not at all).
    Off,
}

/// One pod-group cycle's context: the group, its members and the profile they run in.
pub(crate) struct Cycle<'a> {
    pub sched: &'a Arc<Scheduler>,
    pub fw: &'a Arc<Framework>,
    pub profile: &'a Profile,
    pub groups: &'a PodGroups,
    pub info: &'a PodGroupInfo,
    pub members: &'a [QueuedPodInfo],
    pub args: &'a GangSchedulingArgs,
}

impl Cycle<'_> {
    /// Upstream's `podGroupSchedulingAlgorithm`.
    pub fn algorithm(&self, snap: &mut Snapshot, mode: PostFilters) -> GroupResult {
        if self.fw.handle().features.topology_aware_workload_scheduling {
            self.placement_algorithm(snap, mode)
        } else {
            self.default_algorithm(snap, None, mode)
        }
    }

    /// The placements the PlacementGenerate plugin proposes within the whole cluster.
    pub fn placements(&self, snap: &Snapshot) -> Result<Vec<Placement>, Status> {
        let whole = Placement { name: String::new(), nodes: snap.list().to_vec(), fallback: false };
        self.fw.run_placement_generate(self.info, whole, snap)
    }

    /// Snapshot indices (ascending) of a placement's nodes.
    pub fn indices(snap: &Snapshot, placement: &Placement) -> Vec<usize> {
        let mut idx: Vec<usize> = placement.nodes.iter().filter_map(|n| snap.index.get(n.name()).copied()).collect();
        idx.sort_unstable();
        idx
    }

    /// Tries the group in every placement and keeps the best feasible one
    /// (upstream's `podGroupSchedulingPlacementAlgorithm`).
    fn placement_algorithm(&self, snap: &mut Snapshot, mode: PostFilters) -> GroupResult {
        let placements = match self.placements(snap) {
            Ok(p) => p,
            Err(s) => return GroupResult::failed(GroupStatus::from_status(&s)),
        };
        let (fallbacks, placements): (Vec<Placement>, Vec<Placement>) =
            placements.into_iter().partition(|p| p.fallback);
        let mut first: Option<GroupResult> = None;
        let mut feasible: Vec<(Arc<Placement>, GroupResult)> = Vec::new();
        for placement in &placements {
            let idx = Self::indices(snap, placement);
            let r = self.default_algorithm(snap, Some(&idx), mode);
            if r.status.code == Code::Error {
                return r;
            }
            if r.feasible() {
                feasible.push((Arc::new(placement.clone()), r));
            } else if first.is_none() {
                first = Some(r);
            }
        }
        // Past upstream (opt-in): the whole cluster only when no single domain can host the group.
        if feasible.is_empty() {
            for placement in fallbacks {
                let idx = Self::indices(snap, &placement);
                let r = self.default_algorithm(snap, Some(&idx), mode);
                if r.feasible() || r.status.code == Code::Error {
                    return r;
                }
            }
        }
        match feasible.len() {
            0 => {
                let mut r = first.unwrap_or_else(|| GroupResult::failed(GroupStatus::unschedulable(&[])));
                let msg = format!(
                    "0/{} placements are available, first placement status: {}",
                    placements.len(),
                    r.status.error_text()
                );
                r.status = GroupStatus { code: Code::Unschedulable, error: None, reasons: vec![msg] };
                r
            }
            1 => feasible.pop().map(|(_, r)| r).expect("one result"),
            _ => {
                let assignments: Vec<PodGroupAssignments> = feasible
                    .iter()
                    .map(|(p, r)| PodGroupAssignments {
                        placement: p.clone(),
                        proposed: r
                            .pods
                            .iter()
                            .zip(self.members)
                            .filter_map(|(pr, q)| {
                                Some(ProposedAssignment { pod: q.pod_info.clone(), node: pr.host.clone()? })
                            })
                            .collect(),
                    })
                    .collect();
                let scores = match self.fw.run_placement_score(self.info, &assignments, snap) {
                    Ok(s) => s,
                    Err(s) => return GroupResult::failed(GroupStatus::from_status(&s)),
                };
                // Highest total wins; ties go to the first placement (domain name order), where
                // upstream draws at random.
                let best = scores.iter().enumerate().fold(0, |b, (i, s)| if *s > scores[b] { i } else { b });
                feasible.swap_remove(best).1
            }
        }
    }

    /// Tries every member in turn, each seeing the members placed before it in the snapshot
    /// and in the group's cycle state; puts everything back before returning (upstream's
    /// `podGroupSchedulingDefaultAlgorithm`). `placement` limits the nodes (snapshot indices).
    pub fn default_algorithm(
        &self,
        snap: &mut Snapshot,
        placement: Option<&[usize]>,
        mode: PostFilters,
    ) -> GroupResult {
        let cycle = new_cycle(self.groups.state(&self.info.namespace, &self.info.name));
        let mut undo = SnapshotUndo::default();
        let mut reserved: Vec<(usize, Arc<PodInfo>, String)> = Vec::new();
        let mut placed: HashSet<String> = HashSet::new();
        let mut result = GroupResult::failed(GroupStatus::unschedulable(&[]));
        let mut requires_preemption = false;
        for q in self.members {
            let (pr, assumed) = self.pod_algorithm(q, snap, placement, mode, &cycle, &mut undo, &placed);
            if let Some(f) = pr.failure.as_ref().filter(|_| !pr.requires_preemption) {
                if f.is_unschedulable() {
                    // The group may still be admitted without this member.
                    result.pods.push(pr);
                    continue;
                }
                result.status =
                    GroupStatus::error(format!("failed to schedule other pod from a pod group: {}", f.message));
                result.waiting_on_preemption = false;
                result.pods.push(pr);
                break;
            }
            if let Some((a, host)) = assumed {
                placed.insert(a.uid().to_string());
                reserved.push((result.pods.len(), a, host));
            }
            requires_preemption |= pr.requires_preemption;
            if pr.permit.as_ref().is_some_and(Status::is_success) {
                if requires_preemption {
                    result.status = GroupStatus::unschedulable(&[WAITING_FOR_PREEMPTION]);
                    result.waiting_on_preemption = true;
                } else {
                    result.status = GroupStatus::success();
                }
            }
            result.pods.push(pr);
        }
        // The members were only assumed to try the ones after them: undo it all.
        for (i, assumed, host) in reserved.into_iter().rev() {
            self.fw.run_unreserve(&mut result.pods[i].state, &assumed, &host);
        }
        snap.restore(undo);
        result
    }

    /// Nominated pods the member's filters count: upstream drops a member's nomination once it
    /// is assumed in the group's snapshot, so members placed before it are not counted twice.
    fn nominated(&self, pod: &PodInfo, snap: &Snapshot, placed: &HashSet<String>) -> NominatedPods {
        let mut out = self.sched.nominated_pods(pod, snap);
        if !placed.is_empty() {
            out.retain(|_, pods| {
                pods.retain(|p| !placed.contains(p.uid()));
                !pods.is_empty()
            });
        }
        out
    }

    /// One member's attempt (upstream's `podGroupPodSchedulingAlgorithm`): the algorithm, then
    /// assume and Reserve in the snapshot, then Permit. A member that fits only by preemption
    /// is placed on its nominated node. Returns the result and, when it stays assumed, the
    /// assumed pod and its node.
    #[allow(clippy::too_many_arguments)]
    fn pod_algorithm(
        &self,
        q: &QueuedPodInfo,
        snap: &mut Snapshot,
        placement: Option<&[usize]>,
        mode: PostFilters,
        cycle: &PodGroupCycle,
        undo: &mut SnapshotUndo,
        placed: &HashSet<String>,
    ) -> (PodResult, Option<(Arc<PodInfo>, String)>) {
        let fw = self.fw;
        let pod = &q.pod_info;
        let mut state = CycleState::new();
        state.record_plugin_metrics = rand::random_range(0..100) < PLUGIN_METRICS_SAMPLE_PERCENT;
        state.pod_group_cycle = Some(cycle.clone());
        state.skip_all_post_filters = mode == PostFilters::Skip;
        let nominated = self.nominated(pod, snap, placed);
        let r = {
            let mut alg = self.sched.algorithm.lock();
            alg.schedule_pod_in(
                fw,
                self.profile.percentage_of_nodes_to_score,
                &mut state,
                pod,
                snap,
                &nominated,
                placement,
            )
        };
        let mut counts = (0, 0);
        let mut own_failure = None;
        let host = match r {
            Ok(r) => {
                counts = (r.evaluated_nodes, r.feasible_nodes);
                r.suggested_host
            }
            Err(e) => {
                let f = self.fit_failure(&mut state, pod, snap, e, mode);
                match f.nominating.as_ref().map(|n| n.nominated_node_name.clone()).filter(|n| !n.is_empty()) {
                    Some(node) => {
                        own_failure = Some(f);
                        node
                    }
                    None => {
                        let pr = PodResult {
                            host: None,
                            state,
                            failure: Some(f),
                            requires_preemption: false,
                            permit: None,
                            counts,
                        };
                        return (pr, None);
                    }
                }
            }
        };
        let requires_preemption = own_failure.is_some();
        let failed = |state: CycleState, f: Failure| {
            let pr =
                PodResult { host: None, state, failure: Some(f), requires_preemption: false, permit: None, counts };
            (pr, None)
        };
        let assumed = Arc::new(pod.assumed_on(&host));
        if let Err(e) = snap.assume_pod(assumed.clone(), undo) {
            return failed(state, Failure::error(e));
        }
        cycle.lock().assume_pod(pod.uid(), &host);
        let mut s = fw.run_reserve(&mut state, &assumed, &host);
        if s.is_success() {
            s = fw.run_permit_check(&mut state, &assumed, &host);
            if s.is_success() || s.is_wait() {
                let pr = PodResult {
                    host: Some(host.clone()),
                    state,
                    failure: own_failure,
                    requires_preemption,
                    permit: Some(s),
                    counts,
                };
                return (pr, Some((assumed, host)));
            }
        }
        fw.run_unreserve(&mut state, &assumed, &host);
        let _ = snap.forget_pod(&assumed, undo);
        cycle.lock().forget_pod(pod.uid());
        let f = if s.is_rejected() { Failure::rejected_on_node(&host, s) } else { Failure::error(s.message()) };
        failed(state, f)
    }

    /// The failure of a member no node fits, after its PostFilter plugins (which may nominate a
    /// node) as `mode` says.
    fn fit_failure(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snap: &Snapshot,
        e: ScheduleError,
        mode: PostFilters,
    ) -> Failure {
        match e {
            ScheduleError::Fit(mut fe) => {
                let mut nominating = clear_nominated();
                if mode != PostFilters::Off && self.fw.has_post_filter_plugins() {
                    let (res, st) = self.fw.run_post_filter(state, pod, snap, &fe.diagnosis.node_to_status);
                    fe.diagnosis.post_filter_msg = st.message();
                    nominating = res.and_then(|r| r.nominating_info);
                }
                Failure {
                    code: Code::Unschedulable,
                    message: fe.message(),
                    diagnosis: Some(fe.diagnosis),
                    nominating,
                    already_bound: false,
                }
            }
            ScheduleError::NoNodesAvailable => Failure {
                code: Code::UnschedulableAndUnresolvable,
                message: ScheduleError::NoNodesAvailable.message(),
                diagnosis: Some(Diagnosis::default()),
                nominating: clear_nominated(),
                already_bound: false,
            },
            ScheduleError::Internal(e) => Failure::error(e),
        }
    }
}
