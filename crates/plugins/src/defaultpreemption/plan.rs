//! A read-only preemption evaluation for explanations (`ksched explain`, `/debug/explain`):
//! the same eligibility check, dry run and candidate choice as PostFilter, over every node, and
//! nothing evicted or nominated.

use std::sync::Arc;

use ksched_framework::interface::fit_error_message;
use ksched_framework::{Code, CycleState, Framework, NodeToStatus, PodInfo, Snapshot, Status};

use super::candidates::{self, Candidate};
use super::{pick_one_node_for_preemption, DefaultPreemption, NOT_HELPFUL};

/// What DefaultPreemption would decide for a pod.
#[derive(Debug, Clone)]
pub struct PreemptionPlan {
    /// Why the pod may not preempt at all, when it may not.
    pub not_eligible: Option<String>,
    /// Every node where evicting lower-priority pods lets the pod fit (PDB-respecting first).
    pub candidates: Vec<Candidate>,
    /// Index in `candidates` of the node DefaultPreemption would pick.
    pub chosen: Option<usize>,
    /// Why each other node is not a candidate (filter statuses of the dry run; nodes absent
    /// from it were rejected for reasons preemption cannot resolve).
    pub not_candidates: NodeToStatus,
    /// The PostFilter status as the scheduler reports it (message prefixed with `preemption: `).
    pub status: Status,
}

impl DefaultPreemption {
    /// Evaluates preemption for `pod` given the filter `statuses` of a failed cycle, walking
    /// every node that preemption might help, without actuating anything. The scheduler itself
    /// starts its walk at a seeded offset and stops after enough candidates; when candidates
    /// exist its pick is the best of that subset, and when none exist the message is the same.
    pub fn plan(
        &self,
        fw: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
    ) -> PreemptionPlan {
        let pod = Arc::new(pod.clone());
        let mut plan = PreemptionPlan {
            not_eligible: None,
            candidates: Vec::new(),
            chosen: None,
            not_candidates: NodeToStatus::default(),
            status: Status::success(),
        };
        let prefixed = |s: Status| {
            let msg = s.message();
            if msg.is_empty() {
                s
            } else {
                Status::new(s.code(), [format!("preemption: {msg}")])
            }
        };
        let nnn = pod.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).unwrap_or_default();
        if let Err(reason) = self.pod_eligible_to_preempt_others(&pod.pod, snapshot, statuses.get(nnn)) {
            plan.not_eligible = Some(reason.to_string());
            plan.status = prefixed(Status::unschedulable(reason));
            return plan;
        }
        let all = snapshot.list();
        if all.is_empty() {
            plan.status = Status::error("no nodes available");
            return plan;
        }
        let potential = statuses.nodes_with_codes(all, &[Code::Unschedulable]);
        if !potential.is_empty() {
            let pdbs = candidates::pod_disruption_budgets(&self.handle, &potential);
            let n = potential.len();
            let (found, node_statuses, errors) =
                candidates::dry_run_preemption(self, fw, state, &pod, &potential, &pdbs, 0, n);
            if !errors.is_empty() {
                plan.status = prefixed(Status::error(ksched_framework::gofmt::aggregate(&errors)));
            }
            plan.candidates = found;
            plan.not_candidates = node_statuses;
        }
        plan.not_candidates.absent = Status::unresolvable(NOT_HELPFUL);
        if plan.candidates.is_empty() {
            if plan.status.is_success() {
                let msg = fit_error_message(all.len(), &plan.not_candidates, "", "");
                plan.status = prefixed(Status::unschedulable(msg));
            }
            return plan;
        }
        plan.chosen = Some(match plan.candidates.len() {
            1 => 0,
            _ => pick_one_node_for_preemption(&plan.candidates),
        });
        plan
    }
}
