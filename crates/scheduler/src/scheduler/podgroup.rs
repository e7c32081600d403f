//! The pod-group scheduling cycle (GenericWorkload, alpha; upstream's `scheduleOnePodGroup`):
//! a popped pod that names a pod group brings the group's other queued members along, every
//! member is tried in the cycle's snapshot with the members placed before it counted there,
//! and only when Permit would admit the group does anything get assumed and bound.
//!
//! With TopologyAwareWorkloadScheduling the group is tried in each placement the
//! PlacementGenerate plugin proposes, and the PlacementScore plugins pick among those that fit.

use std::sync::Arc;
use std::time::Instant;

use ksched_framework::interface::{NominatingInfo, NominatingMode, QueuedPodInfo};
use ksched_framework::pod_info::is_terminating;
use ksched_framework::podgroup::{
    new_cycle, pod_group_name, Placement, PodGroupAssignments, PodGroupInfo, PodGroups, ProposedAssignment,
};
use ksched_framework::snapshot::SnapshotUndo;
use ksched_framework::{Code, CycleState, Framework, PodInfo, Snapshot, Status};

use super::{clear_nominated, Failure, Profile, Scheduler};
use crate::fit_error::Diagnosis;
use crate::schedule_one::ScheduleError;

/// The error every member of an unschedulable group carries first (upstream's wording).
pub const POD_GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";
/// Why a group whose placement needs preemption is not bound yet.
pub const WAITING_FOR_PREEMPTION: &str = "pod group is waiting for preemption to complete";

/// How one member fared in a simulation of its group.
struct PodResult {
    /// Where it would go (also set when only preemption would make room).
    host: Option<String>,
    /// Its cycle state, reused for the binding cycle.
    state: CycleState,
    /// The member failed on its own.
    failure: Option<Failure>,
    /// Permit's verdict with the group counted so far.
    permit: Option<Status>,
    /// Nodes evaluated and found feasible (for the bound-pod log line).
    counts: (usize, usize),
}

/// The group's verdict for one simulation.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Permit admitted the group.
    Scheduled,
    /// Admitted once preemption completes.
    WaitingOnPreemption,
    /// Not admitted.
    Unschedulable,
    /// An internal error; the message.
    Error(String),
}

struct GroupResult {
    pods: Vec<PodResult>,
    outcome: Outcome,
}

impl GroupResult {
    fn feasible(&self) -> bool {
        matches!(self.outcome, Outcome::Scheduled | Outcome::WaitingOnPreemption)
    }
}

/// The outcome label of `scheduler_podgroup_schedule_attempts_total`.
fn result_label(o: &Outcome) -> &'static str {
    match o {
        Outcome::Scheduled => "scheduled",
        Outcome::WaitingOnPreemption => "waiting_on_preemption",
        Outcome::Unschedulable => "unschedulable",
        Outcome::Error(_) => "error",
    }
}

impl Scheduler {
    /// The pod groups shared by the profiles, when GenericWorkload is on.
    pub fn pod_groups(&self) -> Option<Arc<PodGroups>> {
        let h = self.profiles.values().next()?.framework.handle();
        h.features.generic_workload.then(|| h.pod_groups.clone())
    }

    /// True when GangScheduling is on (unscheduled pod adds requeue the rest of their gang).
    pub fn gang_scheduling_enabled(&self) -> bool {
        self.profiles.values().next().is_some_and(|p| p.framework.handle().features.gang_scheduling)
    }

    /// Schedules `qpi` with its pod group when it has one and GenericWorkload is on; hands the
    /// pod back otherwise.
    pub(super) fn schedule_pod_group_of(self: &Arc<Self>, qpi: QueuedPodInfo) -> Option<QueuedPodInfo> {
        let Some(groups) = self.pod_groups() else { return Some(qpi) };
        let Some(name) = pod_group_name(&qpi.pod_info.pod).map(str::to_string) else { return Some(qpi) };
        let namespace = qpi.pod_info.namespace().to_string();
        let members = self.gather_members(&groups, qpi, &namespace, &name);
        self.schedule_one_pod_group(&groups, &namespace, &name, members);
        None
    }

    /// The popped pod plus the group's other unscheduled members taken out of the queue, by
    /// priority (highest first), then by their first attempt.
    fn gather_members(
        &self,
        groups: &PodGroups,
        qpi: QueuedPodInfo,
        namespace: &str,
        name: &str,
    ) -> Vec<QueuedPodInfo> {
        let mut members = vec![qpi];
        for pod in groups.state(namespace, name).unscheduled_pods() {
            if pod.metadata.name.as_deref() == Some(members[0].pod_info.name()) {
                continue;
            }
            if let Some(q) = self.queue.pop_specific_pod(&pod) {
                members.push(q);
            }
        }
        members.sort_by(|a, b| {
            b.pod_info
                .priority()
                .cmp(&a.pod_info.priority())
                .then(a.initial_attempt_timestamp.cmp(&b.initial_attempt_timestamp))
        });
        members
    }

    fn schedule_one_pod_group(
        self: &Arc<Self>,
        groups: &Arc<PodGroups>,
        namespace: &str,
        name: &str,
        members: Vec<QueuedPodInfo>,
    ) {
        let start = Instant::now();
        let scheduler_name = |q: &QueuedPodInfo| {
            q.pod_info
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduler_name.clone())
                .unwrap_or_else(|| "default-scheduler".into())
        };
        let first = scheduler_name(&members[0]);
        let mixed = members.iter().map(scheduler_name).find(|n| *n != first);
        let Some(profile) = self.profiles.get(&first).cloned() else {
            for q in members {
                self.queue.done(q.pod_info.uid());
            }
            return;
        };
        if let Some(other) = mixed {
            let msg = format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {other:?} and {first:?}"
            );
            for q in members {
                let fw = self.profiles.get(&scheduler_name(&q)).map(|p| p.framework.clone());
                match fw {
                    Some(fw) => self.handle_failure(&fw, q, Failure::error(msg.clone()), start),
                    None => self.queue.done(q.pod_info.uid()),
                }
            }
            return;
        }
        let fw = profile.framework.clone();
        let members: Vec<QueuedPodInfo> = members
            .into_iter()
            .filter(|q| {
                let skip = is_terminating(&q.pod_info.pod) || self.cache.is_assumed_pod(&q.pod_info.pod);
                if skip {
                    self.queue.done(q.pod_info.uid());
                }
                !skip
            })
            .collect();
        if members.is_empty() {
            return;
        }
        tracing::debug!(pod_group = %format!("{namespace}/{name}"), pods = members.len(), "attempting to schedule pod group");

        let result = {
            let mut snap = self.snapshot.lock();
            match self.cache.update_snapshot(&mut snap) {
                Err(e) => GroupResult { pods: Vec::new(), outcome: Outcome::Error(e.to_string()) },
                Ok(()) => self.pod_group_algorithm(&fw, &profile, groups, namespace, name, &members, &mut snap),
            }
        };
        self.metrics.pod_group_algorithm_duration(start.elapsed().as_secs_f64());
        self.submit_pod_group_result(&fw, members, result, start);
    }

    /// Tries the group in every placement (the whole cluster without
    /// TopologyAwareWorkloadScheduling) and keeps the best feasible one.
    #[allow(clippy::too_many_arguments)]
    fn pod_group_algorithm(
        &self,
        fw: &Arc<Framework>,
        profile: &Profile,
        groups: &PodGroups,
        namespace: &str,
        name: &str,
        members: &[QueuedPodInfo],
        snap: &mut Snapshot,
    ) -> GroupResult {
        let info = PodGroupInfo {
            namespace: namespace.to_string(),
            name: name.to_string(),
            unscheduled_pods: members.iter().map(|q| q.pod_info.clone()).collect(),
        };
        if !fw.handle().features.topology_aware_workload_scheduling {
            return self.simulate_group(fw, profile, groups, &info, members, snap, None);
        }
        let whole = Placement { name: String::new(), nodes: snap.list().to_vec(), fallback: false };
        let placements = match fw.run_placement_generate(&info, whole, snap) {
            Ok(p) => p,
            Err(s) if s.is_rejected() => {
                return GroupResult { pods: Vec::new(), outcome: Outcome::Unschedulable };
            }
            Err(s) => return GroupResult { pods: Vec::new(), outcome: Outcome::Error(s.message()) },
        };
        let mut first: Option<GroupResult> = None;
        let mut feasible: Vec<(Arc<Placement>, GroupResult)> = Vec::new();
        let mut fallbacks = Vec::new();
        for placement in placements {
            if placement.fallback {
                fallbacks.push(placement);
                continue;
            }
            let r = self.simulate_in(fw, profile, groups, &info, members, snap, &placement);
            if let Outcome::Error(_) = r.outcome {
                return r;
            }
            if r.feasible() {
                feasible.push((Arc::new(placement), r));
            } else if first.is_none() {
                first = Some(r);
            }
        }
        // Past upstream (opt-in): the whole cluster only when no single domain can host the group.
        if feasible.is_empty() {
            for placement in fallbacks {
                let r = self.simulate_in(fw, profile, groups, &info, members, snap, &placement);
                if r.feasible() || matches!(r.outcome, Outcome::Error(_)) {
                    return r;
                }
            }
        }
        match feasible.len() {
            0 => first.unwrap_or(GroupResult { pods: Vec::new(), outcome: Outcome::Unschedulable }),
            1 => feasible.pop().map(|(_, r)| r).expect("one result"),
            _ => {
                let assignments: Vec<PodGroupAssignments> = feasible
                    .iter()
                    .map(|(p, r)| PodGroupAssignments {
                        placement: p.clone(),
                        proposed: r
                            .pods
                            .iter()
                            .zip(members)
                            .filter_map(|(pr, q)| {
                                Some(ProposedAssignment { pod: q.pod_info.clone(), node: pr.host.clone()? })
                            })
                            .collect(),
                    })
                    .collect();
                let scores = match fw.run_placement_score(&info, &assignments, snap) {
                    Ok(s) => s,
                    Err(s) => return GroupResult { pods: Vec::new(), outcome: Outcome::Error(s.message()) },
                };
                // Highest total wins; ties go to the first placement (domain name order), where
                // upstream draws at random.
                let best = scores.iter().enumerate().fold(0, |b, (i, s)| if *s > scores[b] { i } else { b });
                feasible.swap_remove(best).1
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn simulate_in(
        &self,
        fw: &Arc<Framework>,
        profile: &Profile,
        groups: &PodGroups,
        info: &PodGroupInfo,
        members: &[QueuedPodInfo],
        snap: &mut Snapshot,
        placement: &Placement,
    ) -> GroupResult {
        let mut idx: Vec<usize> = placement.nodes.iter().filter_map(|n| snap.index.get(n.name()).copied()).collect();
        idx.sort_unstable();
        self.simulate_group(fw, profile, groups, info, members, snap, Some(&idx))
    }

    /// Tries every member in turn, each seeing the members placed before it in the snapshot
    /// and in the group's cycle state; puts the snapshot back before returning.
    #[allow(clippy::too_many_arguments)]
    fn simulate_group(
        &self,
        fw: &Arc<Framework>,
        profile: &Profile,
        groups: &PodGroups,
        info: &PodGroupInfo,
        members: &[QueuedPodInfo],
        snap: &mut Snapshot,
        placement: Option<&[usize]>,
    ) -> GroupResult {
        let cycle = new_cycle(groups.state(&info.namespace, &info.name));
        let mut undo = SnapshotUndo::default();
        let mut reserved: Vec<(usize, Arc<PodInfo>, String)> = Vec::new();
        let mut pods: Vec<PodResult> = Vec::with_capacity(members.len());
        let mut outcome = Outcome::Unschedulable;
        let mut requires_preemption = false;
        for q in members {
            let pod = &q.pod_info;
            let mut state = CycleState::new();
            state.pod_group_cycle = Some(cycle.clone());
            let nominated = self.nominated_pods(pod, snap);
            let r = {
                let mut alg = self.algorithm.lock();
                alg.schedule_pod_in(
                    fw,
                    profile.percentage_of_nodes_to_score,
                    &mut state,
                    pod,
                    snap,
                    &nominated,
                    placement,
                )
            };
            let mut needs_victims = false;
            let mut counts = (0, 0);
            let host = match r {
                Ok(r) => {
                    counts = (r.evaluated_nodes, r.feasible_nodes);
                    r.suggested_host
                }
                Err(e) => {
                    let f = self.fit_failure(fw, &mut state, pod, snap, e);
                    match f.nominating.as_ref().filter(|n| !n.nominated_node_name.is_empty()) {
                        Some(n) => {
                            needs_victims = true;
                            n.nominated_node_name.clone()
                        }
                        None => {
                            let error = f.code == Code::Error;
                            let msg = f.message.clone();
                            pods.push(PodResult { host: None, state, failure: Some(f), permit: None, counts });
                            if error {
                                outcome =
                                    Outcome::Error(format!("failed to schedule other pod from a pod group: {msg}"));
                                break;
                            }
                            continue;
                        }
                    }
                }
            };
            let assumed = Arc::new(pod.assumed_on(&host));
            if let Err(e) = snap.assume_pod(assumed.clone(), &mut undo) {
                pods.push(PodResult {
                    host: None,
                    state,
                    failure: Some(Failure::error(e.clone())),
                    permit: None,
                    counts,
                });
                outcome = Outcome::Error(format!("failed to schedule other pod from a pod group: {e}"));
                break;
            }
            let s = fw.run_reserve(&mut state, &assumed, &host);
            let s = if s.is_success() {
                cycle.lock().assume_pod(pod.uid(), &host);
                fw.run_permit_check(&mut state, &assumed, &host)
            } else {
                s
            };
            if !s.is_success() && !s.is_wait() {
                fw.run_unreserve(&mut state, &assumed, &host);
                let _ = snap.forget_pod(&assumed, &mut undo);
                cycle.lock().forget_pod(pod.uid());
                let rejected = s.is_rejected();
                let f = if rejected { Failure::rejected_on_node(&host, s) } else { Failure::error(s.message()) };
                let msg = f.message.clone();
                pods.push(PodResult { host: None, state, failure: Some(f), permit: None, counts });
                if !rejected {
                    outcome = Outcome::Error(format!("failed to schedule other pod from a pod group: {msg}"));
                    break;
                }
                continue;
            }
            reserved.push((pods.len(), assumed, host.clone()));
            requires_preemption |= needs_victims;
            if s.is_success() {
                outcome = if requires_preemption { Outcome::WaitingOnPreemption } else { Outcome::Scheduled };
            }
            pods.push(PodResult { host: Some(host), state, failure: None, permit: Some(s), counts });
        }
        for (i, assumed, host) in reserved.into_iter().rev() {
            fw.run_unreserve(&mut pods[i].state, &assumed, &host);
        }
        snap.restore(undo);
        GroupResult { pods, outcome }
    }

    /// The failure of a member no node fits, after PostFilter (which may nominate a node).
    fn fit_failure(
        &self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snap: &Snapshot,
        e: ScheduleError,
    ) -> Failure {
        match e {
            ScheduleError::Fit(mut fe) => {
                let mut nominating = clear_nominated();
                if fw.has_post_filter_plugins() {
                    let (res, st) = fw.run_post_filter(state, pod, snap, &fe.diagnosis.node_to_status);
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

    /// Binds the members of an admitted group and requeues the others with their reasons.
    fn submit_pod_group_result(
        self: &Arc<Self>,
        fw: &Arc<Framework>,
        members: Vec<QueuedPodInfo>,
        result: GroupResult,
        start: Instant,
    ) {
        let GroupResult { pods, outcome } = result;
        let mut pods = pods.into_iter();
        for q in members {
            let pr = pods.next();
            let failure = match (&outcome, pr) {
                (Outcome::Error(msg), pr) => match pr.and_then(|p| p.failure).filter(|f| f.code == Code::Error) {
                    Some(own) => own,
                    None => Failure::error(msg.clone()),
                },
                (_, None) => Failure::error("pod group is unschedulable"),
                (_, Some(PodResult { failure: Some(f), .. })) => {
                    // Group members are retried after backoff, not on cluster events (upstream
                    // has no group-level requeueing yet).
                    Failure { diagnosis: None, ..f }
                }
                (Outcome::Scheduled, Some(PodResult { host: Some(host), state, counts, .. })) => {
                    self.commit_member(fw, state, q, host, counts, start);
                    continue;
                }
                (Outcome::WaitingOnPreemption, Some(PodResult { host: Some(host), .. })) => Failure {
                    code: Code::Unschedulable,
                    message: format!("{POD_GROUP_UNSCHEDULABLE}, {WAITING_FOR_PREEMPTION}"),
                    diagnosis: None,
                    nominating: Some(NominatingInfo { nominated_node_name: host, mode: NominatingMode::Override }),
                    already_bound: false,
                },
                (_, Some(PodResult { permit, .. })) => {
                    let mut message = POD_GROUP_UNSCHEDULABLE.to_string();
                    let permit = permit.map(|s| s.message()).unwrap_or_default();
                    if !permit.is_empty() {
                        message = format!("{message}, {permit}");
                    }
                    Failure {
                        code: Code::Unschedulable,
                        message,
                        diagnosis: None,
                        nominating: clear_nominated(),
                        already_bound: false,
                    }
                }
            };
            self.handle_failure(fw, q, failure, start);
        }
        self.metrics.pod_group_attempt(fw.profile_name(), result_label(&outcome), start.elapsed().as_secs_f64());
        if let Outcome::Error(e) = &outcome {
            tracing::error!(error = %e, "error scheduling pod group");
        }
    }

    /// Assumes, reserves and permits an admitted member in the live cache (Permit now counts
    /// the group in the scheduler's state), then queues its binding cycle.
    fn commit_member(
        self: &Arc<Self>,
        fw: &Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        host: String,
        counts: (usize, usize),
        start: Instant,
    ) {
        state.pod_group_cycle = None;
        let assumed = Arc::new(qpi.pod_info.assumed_on(&host));
        if let Err(e) = self.cache.assume_pod(assumed.clone()) {
            self.handle_failure(fw, qpi, Failure::error(e.to_string()), start);
            return;
        }
        self.queue.delete_nominated_pod_if_exists(&qpi.pod_info.pod);
        let mut s = fw.run_reserve(&mut state, &assumed, &host);
        if s.is_success() {
            s = fw.run_permit(&mut state, &assumed, &host);
        }
        if !s.is_success() && !s.is_wait() {
            fw.run_unreserve(&mut state, &assumed, &host);
            let _ = self.cache.forget_pod(&assumed.pod);
            let f = if s.is_rejected() { Failure::rejected_on_node(&host, s) } else { Failure::error(s.message()) };
            self.handle_failure(fw, qpi, f, start);
            return;
        }
        let sched = self.clone();
        let permit = self.in_flight_bindings.clone();
        let fw = fw.clone();
        let job = Box::pin(async move {
            let _permit = permit.acquire().await;
            sched.binding_cycle(fw, state, qpi, assumed, (host, counts.0, counts.1), start).await;
        });
        self.pending_bindings.lock().jobs.push(job);
        self.dispatch_bindings();
    }
}

#[cfg(test)]
mod tests;
