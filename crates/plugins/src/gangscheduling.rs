//! GangScheduling (upstream `framework/plugins/gangscheduling`, alpha): all-or-nothing admission of the pods of a PodGroup whose
//! policy is `gang`. PreEnqueue holds a member until `minCount` members exist; Permit holds the
//! members that are placed until `minCount` of them are, then lets them all bind.
//!
//! In the pod-group cycle Permit counts the group as placed in that cycle's snapshot; when
//! pods are committed for binding, it counts them in the scheduler's live state.
//!
//! Upstream's plugin takes no args. Here it carries the opt-in behaviour past upstream that the
//! pod-group cycle applies ([`GangSchedulingArgs`]); the defaults are upstream's behaviour.

use std::sync::Arc;
use std::time::Duration;

use ksched_framework::pod::Pod;
use ksched_framework::podgroup::{gang_min_count, group_key_of, matching_scheduling_group, pod_group_name};
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, Handle, PermitPlugin, Plugin, PodInfo,
    PreEnqueuePlugin, QueueingHint, Status,
};

use serde::Deserialize;

use crate::helper::{as_pods, require};
use crate::names;

/// How long placed gang members wait at Permit for the rest of the gang.
pub const PERMIT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// PreEnqueue reason while fewer than `minCount` members exist.
pub const WAITING_FOR_MIN_COUNT_IN_QUEUE: &str = "waiting for minCount pods from a gang to appear in scheduling queue";
/// Permit (Wait) reason while fewer than `minCount` members are placed.
pub const WAITING_FOR_MIN_COUNT_SCHEDULED: &str = "waiting for minCount pods from a gang to be scheduled";

/// PreEnqueue reason while the PodGroup object does not exist (upstream's wording, typo included).
pub fn waiting_for_pod_group(name: &str) -> String {
    format!("waiting for pods's pod group {name:?} to appear in scheduling queue")
}

/// Args of GangScheduling (not in upstream, whose plugin takes none): switches for gang
/// behaviour past upstream's alpha. Every default is upstream's behaviour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GangSchedulingArgs {
    /// A gang is placed whole or not at all, and holds nothing while it waits: its members are
    /// not preempting one by one while the group is tried (upstream evicts for each member that
    /// does not fit, even when the group cannot fit as a whole), and when committing an
    /// admitted gang fails for one member, the members already committed are released at once
    /// instead of waiting at Permit (up to 5 minutes upstream) on the nodes they hold.
    #[serde(default)]
    pub all_or_nothing: bool,
    /// A gang that does not fit may evict lower-priority pods, or whole lower-priority gangs
    /// (never part of one), chosen so that the whole gang then fits; a gang with a topology
    /// constraint preempts within the one domain that costs least. Replaces upstream's
    /// workload-aware preemption and the members' own preemption for the profile.
    #[serde(default)]
    pub gang_preemption: bool,
    /// Seconds a gang may wait before the scheduler reserves room for it (0, the default: never).
    /// A reserved gang's members are nominated to the nodes it would use once the pods of lower
    /// or equal priority there finish; pods of lower or equal priority no longer take room freed
    /// there, so a stream of small pods cannot starve the gang. Nothing is evicted.
    #[serde(default)]
    pub reserve_after_seconds: i64,
}

impl GangSchedulingArgs {
    /// Decodes (strictly) and validates the args.
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, String> {
        let a: Self = ksched_framework::registry::decode_args(args)?;
        if a.reserve_after_seconds < 0 {
            return Err(format!(
                "reserveAfterSeconds: Invalid value: {}: must be greater than or equal to 0",
                a.reserve_after_seconds
            ));
        }
        Ok(a)
    }

    /// How long a gang waits before room is reserved for it, when reservations are on.
    pub fn reserve_after(&self) -> Option<Duration> {
        (self.reserve_after_seconds > 0).then(|| Duration::from_secs(self.reserve_after_seconds as u64))
    }
}

/// The GangScheduling plugin.
pub struct GangScheduling {
    handle: Handle,
    args: GangSchedulingArgs,
}

/// Builds the plugin from its (optional) args.
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(GangScheduling { handle: handle.clone(), args: GangSchedulingArgs::decode(args)? }))
}

impl GangScheduling {
    /// The effective args.
    pub fn args(&self) -> &GangSchedulingArgs {
        &self.args
    }
}

/// Queue when the added pod belongs to the same group (it may complete the gang).
fn is_schedulable_after_pod_added(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, added) = as_pods(old, new)?;
    let added = require(added, "added pod")?;
    Ok(if matching_scheduling_group(pod, added) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

/// Queue when the added PodGroup is the pod's.
fn is_schedulable_after_pod_group_added(
    pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let added = new
        .ok_or("the event carries no added pod group object")?
        .as_pod_group()
        .ok_or("expected *v1alpha2.PodGroup")?;
    let same = group_key_of(pod).is_some_and(|k| {
        added.metadata.namespace.as_deref().unwrap_or("default") == k.namespace
            && added.metadata.name.as_deref() == Some(k.name.as_str())
    });
    Ok(if same { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

impl Plugin for GangScheduling {
    fn name(&self) -> &str {
        names::GANG_SCHEDULING
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }

    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        Some(self)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        // Membership (spec.schedulingGroup) and PodGroups are immutable: adds are enough.
        Some(vec![
            ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::ADD, is_schedulable_after_pod_added),
            ClusterEventWithHint::with_hint(
                EventResource::PodGroup,
                ActionType::ADD,
                is_schedulable_after_pod_group_added,
            ),
        ])
    }
}

impl PreEnqueuePlugin for GangScheduling {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let Some(name) = pod_group_name(&pod.pod) else { return Status::success() };
        let groups = &self.handle.pod_groups;
        let Some(pg) = groups.get(pod.namespace(), name) else {
            return Status::unresolvable(waiting_for_pod_group(name));
        };
        let Some(min) = gang_min_count(&pg) else { return Status::success() };
        if (groups.all_pods_count(pod.namespace(), name) as i64) < i64::from(min) {
            return Status::unresolvable(WAITING_FOR_MIN_COUNT_IN_QUEUE);
        }
        Status::success()
    }
}

impl PermitPlugin for GangScheduling {
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, _node: &str) -> (Status, Duration) {
        let Some(name) = pod_group_name(&pod.pod) else { return (Status::success(), Duration::ZERO) };
        let ns = pod.namespace();
        let groups = &self.handle.pod_groups;
        let Some(pg) = groups.get(ns, name) else {
            let err = format!("failed to get podGroup {ns}/{name}: podgroup.scheduling.k8s.io {name:?} not found");
            return (Status::error(err), Duration::ZERO);
        };
        let Some(min) = gang_min_count(&pg) else { return (Status::success(), Duration::ZERO) };
        let group_state = match &state.pod_group_cycle {
            Some(cycle) => cycle.lock().clone(),
            None => groups.state(ns, name),
        };
        if (group_state.scheduled_pods_count() as i64) < i64::from(min) {
            // The rest of the gang may be waiting for this pod: try them now.
            if let Some(view) = self.handle.scheduler() {
                view.activate(&group_state.unscheduled_pods());
            }
            return (Status::new(ksched_framework::Code::Wait, [WAITING_FOR_MIN_COUNT_SCHEDULED]), PERMIT_TIMEOUT);
        }
        // Quorum: release every member waiting at Permit. Upstream does so from the pod-group
        // simulation too, before anything of the cycle is committed, so a member that then
        // fails to commit leaves the released ones bound without it; with allOrNothing only a
        // commit releases them.
        if self.args.all_or_nothing && state.pod_group_cycle.is_some() {
            return (Status::success(), Duration::ZERO);
        }
        for uid in group_state.assumed_pods() {
            if let Some(wp) = self.handle.waiting_pods.get(&uid) {
                wp.allow(names::GANG_SCHEDULING);
            }
        }
        (Status::success(), Duration::ZERO)
    }
}

#[cfg(test)]
mod tests;
