//! The PodGroupScheduled condition the pod-group cycle records on the PodGroup (upstream's
//! `updatePodGroupCondition`): True/Scheduled, False/Unschedulable or False/SchedulerError with
//! the group status' message. A group once scheduled is not set back to False by later cycles
//! (for extra members), and an unchanged condition is not written again.

use std::time::Duration;

use ksched_framework::podgroup::{PodGroupInfo, PodGroups};
use ksched_framework::{Code, Framework};
use serde_json::json;

use super::GroupStatus;
use crate::klog::KObj;
use crate::scheduler::Scheduler;

/// The condition type.
pub const POD_GROUP_SCHEDULED: &str = "PodGroupScheduled";

/// The condition (`status`, `reason`, `message`) for a cycle's outcome.
pub(crate) fn condition_for(status: &GroupStatus) -> (&'static str, &'static str, String) {
    match status.code {
        Code::Success => ("True", "Scheduled", status.message()),
        _ if status.is_rejected() => ("False", "Unschedulable", status.message()),
        _ => ("False", "SchedulerError", status.error_text()),
    }
}

impl Scheduler {
    /// Patches the PodGroupScheduled condition when it changes; the write is ordered after the
    /// group's earlier ones and retried on server errors, in the background.
    pub(super) fn update_pod_group_condition(
        &self,
        fw: &Framework,
        groups: &PodGroups,
        info: &PodGroupInfo,
        status: &GroupStatus,
    ) {
        let pg_ref = KObj { namespace: &info.namespace, name: &info.name };
        let Some(pg) = groups.get(&info.namespace, &info.name) else {
            tracing::error!(podGroup = ?pg_ref, "Failed to get PodGroup for status update");
            return;
        };
        let (cond_status, reason, message) = condition_for(status);
        let existing = pg
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == POD_GROUP_SCHEDULED));
        if existing.is_some_and(|c| c.status == "True") && cond_status != "True" {
            return;
        }
        let generation = pg.metadata.generation.unwrap_or(0);
        let unchanged = existing.is_some_and(|c| {
            c.status == cond_status
                && c.reason == reason
                && c.message == message
                && c.observed_generation.unwrap_or(0) == generation
        });
        if unchanged {
            return;
        }
        // The transition time only moves when the status flips.
        let transition = match existing {
            Some(c) if c.status == cond_status => c.last_transition_time.0.to_string(),
            _ => chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        };
        let mut condition = json!({
            "type": POD_GROUP_SCHEDULED,
            "status": cond_status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition,
        });
        if generation != 0 {
            condition["observedGeneration"] = json!(generation);
        }
        let patch = json!({"status": {"conditions": [condition]}});
        let client = fw.handle().client.clone();
        let (ns, name) = (info.namespace.clone(), info.name.clone());
        let write = |_| async move {
            let mut delay = Duration::from_millis(10);
            for attempt in 0..4 {
                match client.patch_pod_group_status(&ns, &name, patch.clone()).await {
                    Ok(()) => return,
                    // Upstream retries internal errors, unavailability and refused connections.
                    Err(e) if attempt < 3 && (e.code == 0 || e.code == 500 || e.code == 503) => {
                        tokio::time::sleep(delay).await;
                        delay *= 5;
                    }
                    Err(e) => {
                        tracing::error!(podGroup = %format!("{ns}/{name}"), err = %e.message, "Failed to update PodGroup status");
                        return;
                    }
                }
            }
        };
        let key = format!("podgroup/{}/{}", info.namespace, info.name);
        let write = self.pod_writes.enqueue(&key, write);
        self.runtime.spawn(write);
    }
}
