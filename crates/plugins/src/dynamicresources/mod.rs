//! DynamicResources (§4.17), reduced to what pods without ResourceClaims observe.
//!
//! The plugin sits at every extension point upstream's does, so the expanded default profile and
//! the FailedScheduling messages match (its PostFilter reason `no new claims to deallocate` is
//! part of every default-profile message). Claim allocation itself is not implemented: a pod that
//! references a ResourceClaim is rejected at PreFilter as UnschedulableAndUnresolvable.

mod args;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Framework, Handle,
    NodeInfo, NodeToStatus, Plugin, PodInfo, PostFilterPlugin, PostFilterResult, PreBindPlugin, PreEnqueuePlugin,
    PreFilterPlugin, PreFilterResult, QueueingHint, ReservePlugin, ScorePlugin, Snapshot, Status,
};

use crate::helper::{as_pods, default_normalize_score, require, uid};
use crate::names;

pub use args::{validate_dynamic_resources_args, DynamicResourcesArgs};

/// PostFilter reason for pods without claims (upstream's exact text).
pub const NO_NEW_CLAIMS_TO_DEALLOCATE: &str = "no new claims to deallocate";
/// PostFilter reason when a pod with claims still does not fit.
pub const STILL_NOT_SCHEDULABLE: &str = "still not schedulable";
/// PreFilter reason for pods that reference ResourceClaims.
pub const ERR_REASON_NOT_SUPPORTED: &str =
    "pod references ResourceClaims, but dynamic resource allocation is not supported by this scheduler yet";

const STATE_KEY: &str = names::DYNAMIC_RESOURCES;

/// What PreFilter learnt about the pod, read by the later extension points.
#[derive(Debug, Clone, Default)]
struct StateData {
    has_claims: bool,
}

/// The DynamicResources plugin.
#[derive(Debug, Clone)]
pub struct DynamicResources {
    args: DynamicResourcesArgs,
}

impl DynamicResources {
    /// The effective (defaulted, validated) args.
    pub fn args(&self) -> &DynamicResourcesArgs {
        &self.args
    }
}

/// Builds the plugin from `DynamicResourcesArgs` (decoded strictly, defaulted, validated).
pub fn new(args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args = DynamicResourcesArgs::decode(args)?;
    validate_dynamic_resources_args("", &args)?;
    Ok(Arc::new(DynamicResources { args }))
}

/// True when the pod lists any `spec.resourceClaims` (extended resources backed by DRA are not
/// modelled, so they never make a pod claim-bearing here).
fn has_claims(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).is_some_and(|c| !c.is_empty())
}

impl Plugin for DynamicResources {
    fn name(&self) -> &str {
        names::DYNAMIC_RESOURCES
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            // Node labels and allocatable feed device topology and capacity.
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_ALLOCATABLE,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::ResourceClaim,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_claim_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                is_schedulable_after_pod_change,
            ),
            ClusterEventWithHint::new(EventResource::DeviceClass, ActionType::ADD | ActionType::UPDATE),
            ClusterEventWithHint::new(EventResource::ResourceSlice, ActionType::ADD | ActionType::UPDATE),
        ])
    }
}

/// Claim changes only matter to pods that use claims.
fn is_schedulable_after_claim_change(
    pod: &Pod,
    _old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    Ok(if has_claims(pod) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

/// Only the pod's own generated-claim status update can help it.
fn is_schedulable_after_pod_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, modified) = as_pods(old, new)?;
    let modified = require(modified, "new pod")?;
    Ok(if uid(modified) == uid(pod) && has_claims(pod) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, _pod: &PodInfo) -> Status {
        // Upstream gates pods whose claims do not exist yet; without claim informers every pod is
        // let in, and claim-bearing pods get their explanation from PreFilter.
        Status::success()
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let has_claims = has_claims(&pod.pod);
        // Written before deciding, as upstream does: PostFilter tells "ran and skipped" apart
        // from "never ran" by the presence of this state.
        state.write(STATE_KEY, StateData { has_claims });
        if !has_claims {
            return (None, Status::skip());
        }
        (None, Status::unresolvable(ERR_REASON_NOT_SUPPORTED))
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, _state: &CycleState, _pod: &PodInfo, _node: &NodeInfo) -> Status {
        Status::success()
    }
}

impl PostFilterPlugin for DynamicResources {
    fn post_filter(
        &self,
        _fw: &Framework,
        state: &mut CycleState,
        _pod: &PodInfo,
        _snapshot: &Snapshot,
        _statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        // An earlier PreFilter rejection stops the chain before ours ran; upstream then fails
        // reading its state with the bare "not found" error, which ends up in the message.
        let Ok(data) = state.read::<StateData>(STATE_KEY) else {
            return (None, Status::error("not found"));
        };
        if !data.has_claims {
            return (None, Status::unschedulable(NO_NEW_CLAIMS_TO_DEALLOCATE));
        }
        (None, Status::unschedulable(STILL_NOT_SCHEDULABLE))
    }
}

impl ScorePlugin for DynamicResources {
    fn score(&self, _state: &CycleState, _pod: &PodInfo, _node: &NodeInfo) -> Result<i64, Status> {
        // Prioritized-list scoring only applies to allocated claims; without claims it is 0.
        Ok(0)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, _nodes: &[&NodeInfo], scores: &mut [i64]) -> Status {
        default_normalize_score(ksched_framework::MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, _state: &mut CycleState, _pod: &PodInfo, _node: &str) -> Status {
        Status::success()
    }

    fn unreserve(&self, _state: &mut CycleState, _pod: &PodInfo, _node: &str) {}
}

impl PreBindPlugin for DynamicResources {
    fn pre_bind_pre_flight(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) -> Status {
        // No claims to bind for any pod that gets this far.
        Status::skip()
    }

    fn pre_bind<'a>(
        &'a self,
        _state: &'a CycleState,
        _pod: &'a PodInfo,
        _node: &'a str,
    ) -> Pin<Box<dyn Future<Output = Status> + Send + 'a>> {
        Box::pin(async { Status::success() })
    }
}

#[cfg(test)]
mod tests;
