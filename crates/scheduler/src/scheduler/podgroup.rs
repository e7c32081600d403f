//! The pod-group scheduling cycle (GenericWorkload, alpha; upstream's `scheduleOnePodGroup`):
//! a popped pod that names a pod group brings the group's other queued members along, every
//! member is tried in the cycle's snapshot with the members placed before it counted there,
//! and only when Permit would admit the group does anything get assumed and bound.
//!
//! With TopologyAwareWorkloadScheduling the group is tried in each placement the
//! PlacementGenerate plugin proposes, and the PlacementScore plugins pick among those that fit.
//! With WorkloadAwarePreemption a group that does not fit preempts as a whole.
//!
//! Past upstream, on request through GangScheduling's args ([`GangSchedulingArgs`]): atomic
//! commits (`allOrNothing`), whole-gang preemption (`gangPreemption`) and reservations for
//! gangs that waited too long (`reserveAfterSeconds`), see [`preemption`].

mod algorithm;
mod preemption;
mod status;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ksched_framework::interface::{NominatingInfo, NominatingMode, QueuedPodInfo};
use ksched_framework::pod_info::is_terminating;
use ksched_framework::podgroup::{gang_min_count, pod_group_name, PodGroupInfo, PodGroups};
use ksched_framework::{Code, CycleState, Framework, Status};
use ksched_plugins::gangscheduling::{GangScheduling, GangSchedulingArgs};

use super::{clear_nominated, Failure, Profile, Scheduler};
use crate::klog::KObj;
use algorithm::{Cycle, PostFilters};

/// The error every member of an unschedulable group carries first (upstream's wording).
pub const POD_GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";
/// Why a group whose placement needs preemption is not bound yet.
pub const WAITING_FOR_PREEMPTION: &str = "pod group is waiting for preemption to complete";
/// Why the members of a gang with a reservation wait (past upstream).
pub const WAITING_ON_RESERVATION: &str =
    "waiting for pods of lower or equal priority to finish on the nodes reserved for the gang";
/// Why committed members of a gang are released when the gang cannot be committed whole
/// (`allOrNothing`, past upstream).
pub const GANG_ROLLED_BACK: &str = "gang rolled back";

/// A pod-group level status (upstream's Status with an optional wrapped error, whose text comes
/// first in the message and alone in the error).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupStatus {
    code: Code,
    error: Option<String>,
    reasons: Vec<String>,
}

impl GroupStatus {
    fn success() -> Self {
        GroupStatus { code: Code::Success, error: None, reasons: Vec::new() }
    }

    /// Unschedulable wrapping "pod group is unschedulable", with reasons.
    fn unschedulable(reasons: &[&str]) -> Self {
        GroupStatus {
            code: Code::Unschedulable,
            error: Some(POD_GROUP_UNSCHEDULABLE.to_string()),
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
        }
    }

    fn error(message: impl Into<String>) -> Self {
        GroupStatus { code: Code::Error, error: Some(message.into()), reasons: Vec::new() }
    }

    /// The status of a plugin or of the framework, as is.
    fn from_status(s: &Status) -> Self {
        if s.code() == Code::Error {
            return Self::error(s.message());
        }
        GroupStatus { code: s.code(), error: None, reasons: s.all_reasons() }
    }

    fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    fn is_rejected(&self) -> bool {
        matches!(self.code, Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending)
    }

    /// Reasons joined with ", ", the wrapped error first (upstream's `Message()`).
    fn message(&self) -> String {
        self.error.iter().chain(&self.reasons).cloned().collect::<Vec<_>>().join(", ")
    }

    /// The wrapped error alone when there is one (upstream's `AsError().Error()`).
    fn error_text(&self) -> String {
        self.error.clone().unwrap_or_else(|| self.message())
    }

    fn push_reason(&mut self, reason: impl Into<String>) {
        self.reasons.push(reason.into());
    }

    /// The status as a framework Status (for PodGroupPostFilter's feasibility checks).
    fn to_status(&self) -> Status {
        match self.code {
            Code::Success => Status::success(),
            Code::Error => Status::error(self.message()),
            code => Status::new(code, [self.message()]),
        }
    }

    /// The failure a member gets when the group's status is all it has.
    fn failure(&self) -> Failure {
        Failure {
            code: self.code,
            message: self.message(),
            diagnosis: None,
            nominating: if self.code == Code::Error { clear_nominated() } else { None },
            already_bound: false,
        }
    }
}

/// How one member fared in a simulation of its group (upstream's `algorithmResult`).
pub(crate) struct PodResult {
    /// Where it would go (also set when only preemption would make room).
    host: Option<String>,
    /// Its cycle state, reused for the binding cycle.
    state: CycleState,
    /// Why it does not fit on its own; `None` when it fits.
    failure: Option<Failure>,
    /// It fits only once its PostFilter's victims are gone.
    requires_preemption: bool,
    /// Permit's verdict with the group counted so far (set when it has a host).
    permit: Option<Status>,
    /// Nodes evaluated and found feasible (for the bound-pod log line).
    counts: (usize, usize),
}

/// The group's verdict for one simulation (upstream's `podGroupAlgorithmResult`).
pub(crate) struct GroupResult {
    /// One entry per member tried, in the cycle's order (fewer on group-wide failures).
    pods: Vec<PodResult>,
    status: GroupStatus,
    /// Feasible once preemption completes (the status is then Unschedulable).
    waiting_on_preemption: bool,
    /// Past upstream: nodes the members are nominated to by gang preemption or a reservation
    /// (by pod UID), replacing what the simulation proposed.
    nominations: Option<HashMap<String, String>>,
}

impl GroupResult {
    fn failed(status: GroupStatus) -> Self {
        GroupResult { pods: Vec::new(), status, waiting_on_preemption: false, nominations: None }
    }

    fn feasible(&self) -> bool {
        self.status.is_success() || self.waiting_on_preemption
    }

    /// Where each member that has a host would go, by UID.
    fn hosts(&self, members: &[QueuedPodInfo]) -> HashMap<String, String> {
        self.pods
            .iter()
            .zip(members)
            .filter_map(|(p, q)| Some((q.pod_info.uid().to_string(), p.host.clone()?)))
            .collect()
    }
}

/// The outcome label of `scheduler_podgroup_schedule_attempts_total`.
fn result_label(status: &GroupStatus, waiting_on_preemption: bool) -> &'static str {
    match status.code {
        Code::Success => "scheduled",
        _ if status.is_rejected() && waiting_on_preemption => "waiting_on_preemption",
        _ if status.is_rejected() => "unschedulable",
        _ => "error",
    }
}

/// The args of the profile's GangScheduling (defaults when it has none).
pub(crate) fn gang_args(fw: &Framework) -> GangSchedulingArgs {
    fw.plugin(ksched_plugins::names::GANG_SCHEDULING)
        .and_then(|p| p.as_any())
        .and_then(|a| a.downcast_ref::<GangScheduling>())
        .map(|g| g.args().clone())
        .unwrap_or_default()
}

fn scheduler_name(q: &QueuedPodInfo) -> String {
    q.pod_info.pod.spec.as_ref().and_then(|s| s.scheduler_name.clone()).unwrap_or_else(|| "default-scheduler".into())
}

/// What committing one admitted member gave.
enum Committed {
    /// Permit let it through: the gang is complete in the scheduler's state.
    Permitted,
    /// It waits at Permit for the rest of the gang.
    Waiting,
    /// It could not be committed (and was handed to the failure handler).
    Failed(String),
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

    /// The profile every member names; on a mismatch or an unknown profile each member fails
    /// with upstream's error through its own profile.
    fn framework_for_pod_group(self: &Arc<Self>, members: &[QueuedPodInfo]) -> Result<Profile, String> {
        let first = scheduler_name(&members[0]);
        if let Some(other) = members.iter().map(scheduler_name).find(|n| *n != first) {
            return Err(format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {other:?} and {first:?}"
            ));
        }
        self.profiles.get(&first).cloned().ok_or_else(|| format!("profile not found for scheduler name {first:?}"))
    }

    fn schedule_one_pod_group(
        self: &Arc<Self>,
        groups: &Arc<PodGroups>,
        namespace: &str,
        name: &str,
        members: Vec<QueuedPodInfo>,
    ) {
        let profile = match self.framework_for_pod_group(&members) {
            Ok(p) => p,
            Err(msg) => {
                let start = Instant::now();
                for q in members {
                    match self.profiles.get(&scheduler_name(&q)).map(|p| p.framework.clone()) {
                        Some(fw) => self.handle_failure(&fw, q, Failure::error(msg.clone()), start),
                        None => {
                            tracing::error!(pod = %q.pod_info.key(), "no profile for the pod's schedulerName");
                            self.queue.done(q.pod_info.uid());
                        }
                    }
                }
                return;
            }
        };
        let fw = profile.framework.clone();
        let members: Vec<QueuedPodInfo> = members
            .into_iter()
            .filter(|q| {
                let pod = &q.pod_info.pod;
                if is_terminating(pod) {
                    let note = format!("skip schedule deleting pod: {}", q.pod_info.key());
                    fw.handle().recorder.record(pod, None, "Warning", "FailedScheduling", "Scheduling", &note);
                } else if !self.cache.is_assumed_pod(pod) {
                    return true;
                }
                self.queue.done(q.pod_info.uid());
                false
            })
            .collect();
        if members.is_empty() {
            return;
        }
        tracing::debug!(v = 3, podGroup = ?KObj { namespace, name }, "Attempting to schedule pod group");
        self.pod_group_cycle(&fw, &profile, groups, namespace, name, members);
    }

    /// One cycle over a consistent snapshot: the algorithm, then workload-aware preemption (or,
    /// on request, gang preemption and reservations), then the result.
    fn pod_group_cycle(
        self: &Arc<Self>,
        fw: &Arc<Framework>,
        profile: &Profile,
        groups: &Arc<PodGroups>,
        namespace: &str,
        name: &str,
        members: Vec<QueuedPodInfo>,
    ) {
        let start = Instant::now();
        let args = gang_args(fw);
        let info = PodGroupInfo {
            namespace: namespace.to_string(),
            name: name.to_string(),
            unscheduled_pods: members.iter().map(|q| q.pod_info.clone()).collect(),
        };
        let result = {
            let mut snap = self.snapshot.lock();
            match self.cache.update_snapshot(&mut snap) {
                Err(e) => {
                    tracing::error!(error = %e, podGroup = ?KObj { namespace, name }, "Error updating snapshot");
                    GroupResult::failed(GroupStatus::error(e.to_string()))
                }
                Ok(()) => {
                    let cycle = Cycle { sched: self, fw, profile, groups, info: &info, members: &members, args: &args };
                    // Past upstream, members do not preempt one by one while their group is tried.
                    let mode =
                        if args.all_or_nothing || args.gang_preemption { PostFilters::Off } else { PostFilters::Run };
                    let mut result = cycle.algorithm(&mut snap, mode);
                    self.metrics.pod_group_algorithm_duration(start.elapsed().as_secs_f64());
                    cycle.after_algorithm(&mut snap, &mut result);
                    result
                }
            }
        };
        self.submit_pod_group_result(fw, groups, &info, members, result, start, &args);
    }

    /// Binds the members of an admitted group, requeues the others with their reasons and
    /// records the outcome on the PodGroup (upstream's `submitPodGroupAlgorithmResult`).
    #[allow(clippy::too_many_arguments)]
    fn submit_pod_group_result(
        self: &Arc<Self>,
        fw: &Arc<Framework>,
        groups: &PodGroups,
        info: &PodGroupInfo,
        members: Vec<QueuedPodInfo>,
        result: GroupResult,
        start: Instant,
        args: &GangSchedulingArgs,
    ) {
        let GroupResult { pods, status, waiting_on_preemption, nominations } = result;
        let error_pods = members.len();
        let (mut scheduled, mut unschedulable) = (0usize, 0usize);
        let mut committed: Vec<(String, Committed)> = Vec::new();
        let mut pods = pods.into_iter();
        for q in members {
            let pr = pods.next();
            let (own_success, requires_preemption) =
                pr.as_ref().map_or((false, false), |p| (p.failure.is_none(), p.requires_preemption));
            let mut failure = if status.code == Code::Error {
                // The member's own error, else the group's.
                match pr.and_then(|p| p.failure).filter(|f| f.code == Code::Error) {
                    Some(own) => Failure { nominating: clear_nominated(), ..own },
                    None => status.failure(),
                }
            } else if own_success {
                let pr = pr.expect("a member that fits has a result");
                let host = pr.host.clone().unwrap_or_default();
                if status.is_success() {
                    let uid = q.pod_info.uid().to_string();
                    let outcome = self.commit_member(fw, pr.state, q, host, pr.counts, start);
                    if matches!(outcome, Committed::Failed(_)) {
                        unschedulable += 1;
                    } else {
                        scheduled += 1;
                    }
                    committed.push((uid, outcome));
                    continue;
                } else if waiting_on_preemption {
                    Failure {
                        nominating: Some(NominatingInfo { nominated_node_name: host, mode: NominatingMode::Override }),
                        ..status.failure()
                    }
                } else {
                    permit_failure(pr.permit.as_ref())
                }
            } else if requires_preemption && !waiting_on_preemption {
                permit_failure(pr.as_ref().and_then(|p| p.permit.as_ref()))
            } else {
                match pr.and_then(|p| p.failure) {
                    Some(own) => own,
                    None => status.failure(),
                }
            };
            if let Some(n) = &nominations {
                // Gang preemption and reservations nominate every member where the whole gang
                // fits; they all wait with the group's reason.
                let node = n.get(q.pod_info.uid()).cloned().unwrap_or_default();
                if status.code != Code::Error {
                    failure = Failure {
                        message: status.message(),
                        diagnosis: None,
                        nominating: Some(NominatingInfo { nominated_node_name: node, mode: NominatingMode::Override }),
                        ..failure
                    };
                }
            }
            unschedulable += 1;
            self.handle_failure(fw, q, failure, start);
        }
        if args.all_or_nothing {
            self.roll_back_incomplete_gang(fw, groups, info, &committed);
        }
        let pg_ref = KObj { namespace: &info.namespace, name: &info.name };
        let label = result_label(&status, waiting_on_preemption);
        match label {
            "scheduled" => tracing::debug!(
                v = 2,
                podGroup = ?pg_ref,
                scheduledPods = scheduled,
                unschedulablePods = unschedulable,
                "Successfully scheduled a pod group"
            ),
            "waiting_on_preemption" => tracing::debug!(
                v = 2,
                podGroup = ?pg_ref,
                unschedulablePods = unschedulable,
                "Pod group is waiting for preemption"
            ),
            "unschedulable" => tracing::debug!(
                v = 2,
                podGroup = ?pg_ref,
                unschedulablePods = unschedulable,
                "Unable to schedule a pod group"
            ),
            _ => tracing::error!(
                err = %status.error_text(),
                podGroup = ?pg_ref,
                errorPods = error_pods,
                "Error scheduling pod group"
            ),
        }
        self.metrics.pod_group_attempt(fw.profile_name(), label, start.elapsed().as_secs_f64());
        self.update_pod_group_condition(fw, groups, info, &status);
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
    ) -> Committed {
        state.pod_group_cycle = None;
        let assumed = Arc::new(qpi.pod_info.assumed_on(&host));
        if let Err(e) = self.cache.assume_pod(assumed.clone()) {
            let msg = e.to_string();
            self.handle_failure(fw, qpi, Failure::error(msg.clone()), start);
            return Committed::Failed(msg);
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
            let msg = f.message.clone();
            self.handle_failure(fw, qpi, f, start);
            return Committed::Failed(msg);
        }
        let outcome = if s.is_wait() { Committed::Waiting } else { Committed::Permitted };
        // The pod may wait for its binding behind others: keep only what binding plugins read.
        state.drop_scheduling_only_state();
        let sched = self.clone();
        let permit = self.in_flight_bindings.clone();
        let fw = fw.clone();
        let job = Box::pin(async move {
            let _permit = permit.acquire().await;
            sched.binding_cycle(fw, state, qpi, assumed, (host, counts.0, counts.1), start).await;
        });
        self.pending_bindings.lock().jobs.push(job);
        self.dispatch_bindings();
        outcome
    }

    /// `allOrNothing`: when no committed member of a gang got through Permit, the gang is not
    /// complete in the scheduler's state (a member failed to commit, or left meanwhile): the
    /// members waiting at Permit are released at once instead of holding their nodes for up
    /// to Permit's timeout.
    fn roll_back_incomplete_gang(
        &self,
        fw: &Framework,
        groups: &PodGroups,
        info: &PodGroupInfo,
        committed: &[(String, Committed)],
    ) {
        let is_gang = groups.get(&info.namespace, &info.name).is_some_and(|pg| gang_min_count(&pg).is_some());
        if !is_gang || committed.iter().any(|(_, c)| matches!(c, Committed::Permitted)) {
            return;
        }
        let why = committed
            .iter()
            .find_map(|(_, c)| match c {
                Committed::Failed(m) => Some(format!("a member could not be committed: {m}")),
                _ => None,
            })
            .unwrap_or_else(|| "fewer than minCount members were committed".to_string());
        for (uid, c) in committed {
            if let (Committed::Waiting, Some(wp)) = (c, fw.get_waiting_pod(uid)) {
                wp.reject(ksched_plugins::names::GANG_SCHEDULING, &format!("{GANG_ROLLED_BACK}: {why}"));
            }
        }
        tracing::info!(podGroup = ?KObj { namespace: &info.namespace, name: &info.name }, reason = %why, "Gang rolled back");
    }
}

/// A member that fits while its group does not: upstream's message is the group error followed
/// by the member's Permit message (even when that is empty).
fn permit_failure(permit: Option<&Status>) -> Failure {
    let permit = permit.map(Status::message).unwrap_or_default();
    Failure {
        code: Code::Unschedulable,
        message: format!("{POD_GROUP_UNSCHEDULABLE}, {permit}"),
        diagnosis: None,
        nominating: clear_nominated(),
        already_bound: false,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_past_upstream;
