//! DynamicResources (upstream `framework/plugins/dynamicresources`): pods get devices through ResourceClaims.
//!
//! PreEnqueue waits for the pod's claims to exist; PreFilter checks classes and builds an
//! allocator over the cluster's ResourceSlices (devices allocated or in flight excluded);
//! Filter allocates the pod's unallocated claims per node with it (allocated claims only
//! check their node selector); Score prefers nodes where `firstAvailable` got earlier
//! subrequests; Reserve marks the chosen node's allocations in flight so no other pod gets
//! the devices; PreBind writes `status.allocation` and `status.reservedFor` and waits for
//! binding conditions; PostFilter deallocates a claim that blocks the pod.
//!
//! The allocator and CEL live in `ksched-dra`; shared state (assumed claims, allocations in
//! flight) in [`manager::DraManager`]. Pod fields read here: `spec.resourceClaims`,
//! `status.resourceClaimStatuses`, `status.extendedResourceClaimStatus`, containers' resource
//! requests (extended resources backed by DRA) and `metadata.uid`/`name`/`namespace`.

mod args;
mod extended;
pub mod manager;

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim, ResourceClaimConsumerReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use ksched_dra::allocator::{AllocError, Allocator, Features, Fit};
use ksched_dra::claim::{self, kobj, FINALIZER, FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE};
use ksched_framework::client::ApiError;
use ksched_framework::labels::NodeSelectorMatcher;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Framework, Handle,
    NodeInfo, NodeToStatus, Plugin, PodInfo, PostFilterPlugin, PostFilterResult, PreBindPlugin, PreEnqueuePlugin,
    PreFilterPlugin, PreFilterResult, QueueingHint, ReservePlugin, ScorePlugin, Snapshot, Status,
};
use parking_lot::Mutex;

use crate::helper::{as_pods, default_normalize_score, require, uid};
use crate::names;

pub use args::{validate_dynamic_resources_args, DynamicResourcesArgs};
pub use extended::{class_resolver, is_dra_extended_resource_name};
use manager::DraManager;

/// PostFilter reason for pods without claims (upstream's exact text).
pub const NO_NEW_CLAIMS_TO_DEALLOCATE: &str = "no new claims to deallocate";
/// PostFilter reason when a pod with claims still does not fit.
pub const STILL_NOT_SCHEDULABLE: &str = "still not schedulable";
/// PostFilter reason after deallocating a claim.
pub const DEALLOCATION_COMPLETED: &str = "deallocation of ResourceClaim completed";
/// PostFilter reason after deleting the claim for extended resources.
pub const DELETION_COMPLETED: &str = "deletion of ResourceClaim completed";
/// Filter reason when an allocated claim cannot be used on the node.
pub const ERR_REASON_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// Filter reason when the claims do not fit on the node.
pub const ERR_REASON_CANNOT_ALLOCATE: &str = "cannot allocate all claims";

const STATE_KEY: &str = names::DYNAMIC_RESOURCES;

/// How the retries of a conflicting claim update are spaced (client-go's `DefaultRetry`).
const CONFLICT_RETRIES: usize = 5;
const CONFLICT_BACKOFF: Duration = Duration::from_millis(10);
/// How often PreBind looks at binding conditions.
const BINDING_CONDITIONS_POLL: Duration = Duration::from_secs(5);

/// What one node's Filter found. The allocation results themselves are assembled only for
/// the node Reserve gets (by searching again with the same inputs, which finds the same
/// devices): building them for every feasible node was a fifth of the scheduling cycle.
#[derive(Debug, Clone)]
struct NodeAllocation {
    /// The node the search ran on.
    node: Arc<Node>,
    /// The claims allocated on this node, in order (the extended-resource claim as built for
    /// this node).
    to_allocate: Vec<Arc<ResourceClaim>>,
    /// The subrequests the search chose for them.
    fit: Fit,
    /// Allocations in flight since PreFilter, which follow the new ones (upstream's order).
    pending: Vec<AllocationResult>,
    extended_claim: Option<Arc<ResourceClaim>>,
    mappings: Vec<serde_json::Value>,
}

impl NodeAllocation {
    /// True when the node needs no allocation for any claim.
    fn is_empty(&self) -> bool {
        self.to_allocate.is_empty() && self.pending.is_empty()
    }

    /// The allocation results, new ones then those in flight, as upstream's Filter stores them.
    fn results(&self, allocator: &Allocator) -> Result<Vec<AllocationResult>, String> {
        let refs: Vec<&ResourceClaim> = self.to_allocate.iter().map(|c| &**c).collect();
        let node = self.node.metadata.name.as_deref().unwrap_or_default();
        let mut results = match allocator.allocate(&self.node, &refs, None) {
            Ok(Some(r)) if r.len() == refs.len() => r,
            Ok(_) => return Err(format!("node {node}: the allocation found in Filter is no longer possible")),
            Err(AllocError::Fatal(e) | AllocError::NodeFailed(e)) => return Err(e),
            Err(AllocError::Timeout) => return Err(format!("node {node}: timed out trying to allocate devices")),
        };
        results.extend(self.pending.iter().cloned());
        Ok(results)
    }

    /// The `parent/sub` references of the subrequests each allocation uses, in the order of
    /// [`NodeAllocation::results`].
    fn chosen_sub_requests(&self) -> impl Iterator<Item = BTreeSet<String>> + '_ {
        let new = self.to_allocate.iter().zip(&self.fit.sub_requests).map(|(c, subs)| {
            let requests = c.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default();
            requests
                .iter()
                .zip(subs)
                .filter_map(|(req, sub)| {
                    let sub = req.first_available.as_deref()?.get((*sub)?)?;
                    Some(claim::sub_request_ref(&req.name, &sub.name))
                })
                .collect()
        });
        new.chain(self.pending.iter().map(|a| chosen_in(a).map(str::to_string).collect()))
    }
}

/// The subrequest references an allocation result names.
fn chosen_in(a: &AllocationResult) -> impl Iterator<Item = &str> {
    a.devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| r.request.as_str())
        .filter(|r| claim::is_sub_request_ref(r))
}

/// What changes after PreFilter (Filter runs in parallel, PreBind updates claims).
#[derive(Default)]
struct Mutable {
    unavailable: BTreeSet<usize>,
    node_allocations: HashMap<String, Arc<NodeAllocation>>,
    /// Per claim: the allocation Reserve chose (or an in-flight one PreFilter found).
    allocation: Vec<Option<AllocationResult>>,
    /// Per claim: the newest version PreBind wrote.
    claims: Vec<Arc<ResourceClaim>>,
}

/// The plugin's cycle state (shared, like upstream's pointer: clones see the same data).
#[derive(Clone, Default)]
struct StateData(Arc<DraState>);

#[derive(Default)]
struct DraState {
    /// The pod's claims in `spec.resourceClaims` order, then the extended-resource claim.
    claims: Vec<Arc<ResourceClaim>>,
    num_user: usize,
    extended: Option<extended::PodExtended>,
    available_on: Vec<Option<NodeSelectorMatcher>>,
    allocator: Option<Arc<Allocator>>,
    m: Mutex<Mutable>,
}

impl DraState {
    fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    fn extended_claim(&self) -> Option<&Arc<ResourceClaim>> {
        self.claims.get(self.num_user)
    }

    fn is_extended(&self, i: usize) -> bool {
        i >= self.num_user
    }

    /// Indices of the claims without an allocation (as of PreFilter).
    fn to_allocate(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.claims.len()).filter(|&i| !allocated(&self.claims[i]))
    }
}

/// Wall-clock time in nanoseconds since the epoch.
fn now_nanos() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

fn allocated(c: &ResourceClaim) -> bool {
    c.status.as_ref().is_some_and(|s| s.allocation.is_some())
}

fn allocation_of(c: &ResourceClaim) -> Option<&AllocationResult> {
    c.status.as_ref()?.allocation.as_ref()
}

/// The DynamicResources plugin.
pub struct DynamicResources {
    args: DynamicResourcesArgs,
    features: Features,
    handle: Handle,
    manager: Arc<DraManager>,
}

impl std::fmt::Debug for DynamicResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicResources").field("args", &self.args).finish()
    }
}

impl DynamicResources {
    /// The effective (defaulted, validated) args.
    pub fn args(&self) -> &DynamicResourcesArgs {
        &self.args
    }

    /// The shared DRA state (assume cache, allocations in flight).
    pub fn manager(&self) -> &Arc<DraManager> {
        &self.manager
    }
}

/// Builds the plugin from `DynamicResourcesArgs` (decoded strictly, defaulted, validated).
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args = DynamicResourcesArgs::decode(args)?;
    validate_dynamic_resources_args("", &args)?;
    let lister = handle.lister.clone();
    let manager = manager::shared(&handle.shared, lister);
    let features = allocator_features(&handle.features);
    Ok(Arc::new(DynamicResources { args, features, handle: handle.clone(), manager }))
}

/// The allocator's view of the DRA feature gates.
pub fn allocator_features(f: &ksched_framework::Features) -> Features {
    Features {
        admin_access: f.dra_admin_access,
        prioritized_list: f.dra_prioritized_list,
        partitionable_devices: f.dra_partitionable_devices,
        device_taints: f.dra_device_taints,
        device_binding_and_status: f.dra_device_binding_conditions && f.dra_resource_claim_device_status,
        consumable_capacity: f.dra_consumable_capacity,
    }
}

/// `Unschedulable`-class status for DRA reasons: upstream's `statusUnschedulable` is
/// UnschedulableAndUnresolvable (only cluster events can help).
fn unresolvable(reason: impl Into<String>) -> Status {
    Status::unresolvable(reason)
}

impl Plugin for DynamicResources {
    fn name(&self) -> &str {
        names::DYNAMIC_RESOURCES
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
        Some(self)
    }
    fn as_memo(&self) -> Option<&dyn ksched_framework::MemoPlugin> {
        Some(self)
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
        let manager = self.manager.clone();
        let manager2 = self.manager.clone();
        Some(vec![
            // Node labels and allocatable feed device topology and capacity.
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_ALLOCATABLE,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::ResourceClaim,
                ActionType::ADD | ActionType::UPDATE,
                move |pod, old, new| is_schedulable_after_claim_change(&manager, pod, old, new),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                move |pod, old, new| is_schedulable_after_pod_change(&manager2, pod, old, new),
            ),
            ClusterEventWithHint::new(EventResource::DeviceClass, ActionType::ADD | ActionType::UPDATE),
            ClusterEventWithHint::new(EventResource::ResourceSlice, ActionType::ADD | ActionType::UPDATE),
        ])
    }
}

/// Claims may span nodes in ways a signature cannot capture: pods with claims are not signed.
impl ksched_framework::SignPlugin for DynamicResources {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        _sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        if pod.pod.spec.as_ref().is_some_and(|s| s.resource_claims.as_ref().is_some_and(|c| !c.is_empty())) {
            return ksched_framework::Status::unschedulable("pods with dra resource claims are not signable");
        }
        ksched_framework::Status::success()
    }
}

/// Calls `f` with every claim the pod's `spec.resourceClaims` name (upstream's
/// `foreachPodResourceClaim`); the error is why the pod cannot be scheduled now.
fn foreach_pod_claim(
    manager: &DraManager,
    pod: &Pod,
    mut f: impl FnMut(&str, Arc<ResourceClaim>),
) -> Result<(), String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    for pc in pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).into_iter().flatten() {
        let (name, must_check_owner) = claim::claim_name(pod, pc)?;
        let Some(name) = name else { continue };
        let c = manager.claim(ns, &name)?;
        if c.metadata.deletion_timestamp.is_some() {
            return Err(format!("resourceclaim {name:?} is being deleted"));
        }
        if must_check_owner {
            claim::is_for_pod(pod, &c)?;
        }
        f(&pc.name, c);
    }
    Ok(())
}

fn json_uid(v: &serde_json::Value) -> &str {
    v.pointer("/metadata/uid").and_then(|u| u.as_str()).unwrap_or_default()
}

fn json_allocated(v: &serde_json::Value) -> bool {
    v.pointer("/status/allocation").is_some_and(|a| !a.is_null())
}

/// Claim added or updated: the pod's own claims, or a deallocation that frees devices.
fn is_schedulable_after_claim_change(
    manager: &DraManager,
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let json = |o: Option<&EventObject>| match o {
        None => Ok(None),
        Some(EventObject::Other(v)) => Ok(Some(v.clone())),
        Some(_) => Err("unexpected object in isSchedulableAfterClaimChange".to_string()),
    };
    let original = json(old)?;
    let modified = json(new)?.ok_or_else(|| "unexpected object in isSchedulableAfterClaimChange".to_string())?;
    let mut uses_claim = false;
    let target = json_uid(&modified).to_string();
    if foreach_pod_claim(manager, pod, |_, c| uses_claim |= c.metadata.uid.as_deref() == Some(target.as_str())).is_err()
    {
        return Ok(QueueingHint::QueueSkip);
    }
    if let Some(o) = &original {
        if json_allocated(o) && !json_allocated(&modified) {
            return Ok(QueueingHint::Queue);
        }
    }
    if !uses_claim {
        return Ok(QueueingHint::QueueSkip);
    }
    let Some(o) = original else { return Ok(QueueingHint::Queue) };
    let status = |v: &serde_json::Value| v.get("status").cloned().unwrap_or(serde_json::Value::Null);
    if status(&o) == status(&modified) {
        return Ok(QueueingHint::QueueSkip);
    }
    Ok(QueueingHint::Queue)
}

/// The pod's own update that records generated claims.
fn is_schedulable_after_pod_change(
    manager: &DraManager,
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, modified) = as_pods(old, new)?;
    let modified = require(modified, "new pod")?;
    if uid(modified) != uid(pod) {
        return Ok(QueueingHint::QueueSkip);
    }
    if foreach_pod_claim(manager, modified, |_, _| {}).is_err() {
        return Ok(QueueingHint::QueueSkip);
    }
    Ok(QueueingHint::Queue)
}

impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        match foreach_pod_claim(&self.manager, &pod.pod, |_, _| {}) {
            Ok(()) => Status::success(),
            Err(e) => unresolvable(e),
        }
    }
}

impl DynamicResources {
    fn validate_device_class(&self, class: &str, request: &str) -> Option<Status> {
        if class.is_empty() {
            return Some(Status::error(format!("request {request}: unsupported request type")));
        }
        if self.manager.device_class(class).is_none() {
            return Some(unresolvable(format!("request {request}: device class {class} does not exist")));
        }
        None
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        // Written before deciding, as upstream does: PostFilter tells "ran" from "never ran"
        // by the presence of this state, and an early failure leaves no claims in it.
        state.write(STATE_KEY, StateData::default());
        let mut claims = Vec::new();
        if let Err(e) = foreach_pod_claim(&self.manager, &pod.pod, |_, c| claims.push(c)) {
            return (None, unresolvable(e));
        }
        let num_user = claims.len();
        let (extended_claim, pod_extended) = match extended::pre_filter(&self.manager, &pod.pod) {
            Ok(x) => x,
            Err(s) => return (None, s),
        };
        if let Some(c) = extended_claim {
            claims.push(c);
        }
        if claims.is_empty() {
            return (None, Status::skip());
        }
        let mut available_on = Vec::with_capacity(claims.len());
        let mut allocations = vec![None; claims.len()];
        let mut to_allocate = 0;
        for (i, c) in claims.iter().enumerate() {
            if let Some(a) = allocation_of(c) {
                available_on.push(a.node_selector.as_ref().map(NodeSelectorMatcher::new));
                continue;
            }
            available_on.push(None);
            to_allocate += 1;
            let claim_uid = c.metadata.uid.as_deref().unwrap_or_default();
            if self.manager.pending_allocation(claim_uid).is_some() {
                return (
                    None,
                    unresolvable(format!("resource claim {} is in the process of being allocated", kobj(&c.metadata))),
                );
            }
            if i >= num_user {
                // The extended-resource claim gets its requests per node in Filter.
                continue;
            }
            let requests = c.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default();
            for r in requests {
                if let Some(e) = &r.exactly {
                    if let Some(s) = self.validate_device_class(&e.device_class_name, &r.name) {
                        return (None, s);
                    }
                } else if let Some(subs) = r.first_available.as_ref().filter(|s| !s.is_empty()) {
                    for sub in subs {
                        let name = format!("{}/{}", r.name, sub.name);
                        if let Some(s) = self.validate_device_class(&sub.device_class_name, &name) {
                            return (None, s);
                        }
                    }
                } else {
                    return (
                        None,
                        unresolvable(format!(
                            "resource claim {}, request {}: unknown request type",
                            kobj(&c.metadata),
                            r.name
                        )),
                    );
                }
            }
        }
        let allocator = (to_allocate > 0).then(|| {
            let classes = self.manager.clone();
            let lister = move |n: &str| classes.device_class(n);
            Arc::new(
                Allocator::with_index(
                    self.features,
                    self.manager.allocated(),
                    Arc::new(lister),
                    self.manager.slice_index(),
                    self.manager.cel(),
                )
                .with_selector_results(self.manager.selector_results())
                .with_device_selection(self.args.device_selection()),
            )
        });
        allocations.truncate(claims.len());
        let m = Mutex::new(Mutable { allocation: allocations, claims: claims.clone(), ..Default::default() });
        state.write(
            STATE_KEY,
            StateData(Arc::new(DraState { claims, num_user, extended: pod_extended, available_on, allocator, m })),
        );
        (None, Status::success())
    }
}

fn read_state(state: &CycleState) -> Result<&StateData, Status> {
    state.read::<StateData>(STATE_KEY).map_err(|_| Status::error("not found"))
}

impl DynamicResources {
    /// Binding conditions of an allocated claim: `Err` when one failed, `Ok(false)` while
    /// some are pending.
    fn claim_ready_for_binding(c: &ResourceClaim) -> Result<bool, String> {
        let Some(a) = allocation_of(c) else { return Ok(false) };
        let statuses = c.status.as_ref().and_then(|s| s.devices.as_deref()).unwrap_or_default();
        for r in a.devices.iter().flat_map(|d| d.results.iter().flatten()) {
            let conditions = r.binding_conditions.as_deref().unwrap_or_default();
            if conditions.is_empty() {
                continue;
            }
            let Some(ds) = statuses.iter().find(|d| d.device == r.device && d.driver == r.driver && d.pool == r.pool)
            else {
                return Ok(false);
            };
            let conds = ds.conditions.as_deref().unwrap_or_default();
            for f in r.binding_failure_conditions.iter().flatten() {
                if let Some(fc) = conds.iter().find(|x| &x.type_ == f).filter(|x| x.status == "True") {
                    return Err(format!(
                        "device binding failed: claim={}, reason={}, message={:?}",
                        c.metadata.name.as_deref().unwrap_or_default(),
                        fc.reason,
                        fc.message
                    ));
                }
            }
            for want in conditions {
                if !conds.iter().any(|x| &x.type_ == want && x.status == "True") {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn claim_timed_out(&self, c: &ResourceClaim) -> bool {
        let Some(a) = allocation_of(c) else { return false };
        let Some(ts) = &a.allocation_timestamp else { return false };
        let with_conditions =
            a.devices.iter().flat_map(|d| d.results.iter().flatten()).any(|r| r.binding_conditions.is_some());
        if !with_conditions {
            return false;
        }
        let deadline = ts.0.as_nanosecond() + self.args.binding_timeout().as_nanos() as i128;
        deadline < now_nanos()
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        // Borrowed, not cloned: Filter runs on several threads at once, and every count
        // change of a shared Arc moves its cache line between them.
        let s = match read_state(state) {
            Ok(s) => &*s.0,
            Err(e) => return e,
        };
        if s.is_empty() {
            return Status::success();
        }
        let (node_extended, mappings) = match extended::filter(s, &self.manager, &pod.pod, node) {
            Ok(x) => x,
            Err(st) => return st,
        };
        if node_extended.is_none() && s.num_user == 0 {
            return Status::success();
        }
        let Some(n) = node.node() else { return Status::error("node not found") };
        let mut unavailable = Vec::new();
        for (i, c) in s.claims.iter().enumerate() {
            if let Some(sel) = &s.available_on[i] {
                if !sel.matches(n) {
                    unavailable.push(i);
                    continue;
                }
            }
            if !allocated(c) {
                continue;
            }
            match Self::claim_ready_for_binding(c) {
                Err(_) => unavailable.push(i),
                Ok(false) if self.claim_timed_out(c) => unavailable.push(i),
                _ => {}
            }
        }
        let mut allocation = None;
        if let Some(allocator) = &s.allocator {
            let mut to_allocate: Vec<&Arc<ResourceClaim>> = Vec::new();
            let mut pending = Vec::new();
            {
                let m = s.m.lock();
                for i in s.to_allocate() {
                    if let Some(a) = &m.allocation[i] {
                        pending.push(a.clone());
                        continue;
                    }
                    match &node_extended {
                        Some(ne) if s.is_extended(i) => to_allocate.push(ne),
                        _ => to_allocate.push(&s.claims[i]),
                    }
                }
            }
            let refs: Vec<&ResourceClaim> = to_allocate.iter().map(|c| &***c).collect();
            let timeout = self.args.filter_timeout();
            let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
            let node_name = node.name();
            let fit = match allocator.fits(n, &refs, deadline) {
                Err(AllocError::Timeout) => {
                    return Status::error(format!("node {node_name}: timed out trying to allocate devices"))
                }
                Err(AllocError::NodeFailed(msg)) => return unresolvable(msg),
                Err(AllocError::Fatal(msg)) => return Status::error(msg),
                Ok(None) => return unresolvable(ERR_REASON_CANNOT_ALLOCATE),
                Ok(Some(f)) => f,
            };
            if fit.sub_requests.len() != refs.len() {
                return unresolvable(ERR_REASON_CANNOT_ALLOCATE);
            }
            allocation = Some(NodeAllocation {
                node: n.clone(),
                to_allocate: to_allocate.into_iter().cloned().collect(),
                fit,
                pending,
                extended_claim: node_extended,
                mappings,
            });
        }
        let mut m = s.m.lock();
        if !unavailable.is_empty() {
            m.unavailable.extend(unavailable);
            return unresolvable(ERR_REASON_NOT_AVAILABLE);
        }
        if let Some(a) = allocation {
            m.node_allocations.insert(node.name().to_string(), Arc::new(a));
        }
        Status::success()
    }
}

/// Runs an API call from synchronous code (PostFilter) on the scheduler's runtime.
fn run_blocking<T: Send + 'static>(handle: &Handle, f: futures::future::BoxFuture<'static, T>) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    (handle.spawner)(Box::pin(async move {
        let _ = tx.send(f.await);
    }));
    rx.recv().ok()
}

impl PostFilterPlugin for DynamicResources {
    fn post_filter(
        &self,
        _fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
        _statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        // An earlier PreFilter rejection stops the chain before ours ran; upstream then fails
        // reading its state with the bare "not found" error, which ends up in the message.
        let s = match read_state(state) {
            Ok(s) => s.0.clone(),
            Err(e) => return (None, e),
        };
        if s.is_empty() {
            return (None, Status::unschedulable(NO_NEW_CLAIMS_TO_DEALLOCATE));
        }
        let unavailable: Vec<usize> = s.m.lock().unavailable.iter().copied().collect();
        let mut handle_extended = false;
        for i in unavailable {
            if s.is_extended(i) {
                if !extended::is_special_name(&s.claims[i]) {
                    handle_extended = true;
                    break;
                }
                continue;
            }
            let c = &s.claims[i];
            let reserved = c.status.as_ref().and_then(|st| st.reserved_for.as_deref()).unwrap_or_default();
            if reserved.is_empty() || (reserved.len() == 1 && reserved[0].uid == pod.uid()) {
                let mut c = (**c).clone();
                if let Some(st) = c.status.as_mut() {
                    st.reserved_for = None;
                    st.allocation = None;
                    st.devices = None;
                }
                let client = self.handle.client.clone();
                let res =
                    run_blocking(&self.handle, Box::pin(async move { client.update_resource_claim_status(&c).await }));
                return match res {
                    Some(Ok(_)) => (None, Status::unschedulable(DEALLOCATION_COMPLETED)),
                    Some(Err(e)) => (None, Status::error(e)),
                    None => (None, Status::error("deallocation was interrupted")),
                };
            }
        }
        if handle_extended || s.extended_claim().is_some_and(|c| !extended::is_special_name(c)) {
            if let Some(c) = s.extended_claim() {
                let c = (**c).clone();
                let client = self.handle.client.clone();
                let res =
                    run_blocking(&self.handle, Box::pin(async move { extended::delete_claim(&*client, c).await }));
                return match res {
                    Some(Ok(())) => (None, Status::unschedulable(DELETION_COMPLETED)),
                    Some(Err(e)) => (None, Status::error(e)),
                    None => (None, Status::error("deletion was interrupted")),
                };
            }
        }
        (None, Status::unschedulable(STILL_NOT_SCHEDULABLE))
    }
}

impl ScorePlugin for DynamicResources {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if !self.features.prioritized_list {
            return Ok(0);
        }
        let s = match read_state(state) {
            Ok(s) => &*s.0,
            Err(e) => return Err(e),
        };
        if s.is_empty() {
            return Ok(0);
        }
        let Some(na) = s.m.lock().node_allocations.get(node.name()).cloned() else { return Ok(0) };
        compute_score(&s.claims, na.chosen_sub_requests()).map_err(Status::error)
    }

    // Most pods have no claims: their cycle state is read once per run of nodes, not per node.
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), (usize, Status)> {
        if !self.features.prioritized_list || read_state(state).is_ok_and(|s| s.0.is_empty()) {
            out.fill(0);
            return Ok(());
        }
        ksched_framework::score_each(nodes, out, |node| self.score(state, pod, node))
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, _nodes: &[&NodeInfo], scores: &mut [i64]) -> Status {
        default_normalize_score(ksched_framework::MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

/// Prioritized lists: each claim scores `8 - index` of the subrequest it got. `allocations`
/// gives the subrequests chosen for the claims without an allocation, in order.
fn compute_score(
    claims: &[Arc<ResourceClaim>],
    allocations: impl Iterator<Item = BTreeSet<String>>,
) -> Result<i64, String> {
    let (mut score, mut used) = (0, 0);
    let mut allocations = allocations;
    for c in claims {
        let chosen: BTreeSet<String> = match allocation_of(c) {
            Some(a) => chosen_in(a).map(str::to_string).collect(),
            None => {
                let Some(chosen) = allocations.next() else {
                    return Err(format!(
                        "number of allocations {used} is smaller than number of claims needing allocation"
                    ));
                };
                used += 1;
                chosen
            }
        };
        for req in c.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default() {
            if req.exactly.is_some() {
                continue;
            }
            for (i, sub) in req.first_available.iter().flatten().enumerate() {
                if chosen.contains(claim::sub_request_ref(&req.name, &sub.name).as_str()) {
                    score += FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE - i as i64;
                }
            }
        }
    }
    Ok(score)
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, _pod: &PodInfo, node: &str) -> Status {
        let s = match read_state(state) {
            Ok(s) => s.0.clone(),
            Err(e) => return e,
        };
        if s.is_empty() {
            return Status::success();
        }
        let to_allocate: Vec<usize> = s.to_allocate().collect();
        if to_allocate.is_empty() || s.allocator.is_none() {
            return Status::success();
        }
        let needs_user = to_allocate.iter().any(|&i| !s.is_extended(i));
        let mut m = s.m.lock();
        let na = match m.node_allocations.get(node).cloned() {
            Some(na) if !na.is_empty() => na,
            _ => {
                if !needs_user {
                    return Status::success();
                }
                return Status::error("claim allocation not found for node");
            }
        };
        let Some(allocator) = &s.allocator else { return Status::success() };
        let results = match na.results(allocator) {
            Ok(r) => r,
            Err(e) => return Status::error(e),
        };
        if results.len() != to_allocate.len() {
            return Status::error(format!(
                "internal error, have {} allocations, {} claims to allocate, want {} claims",
                results.len(),
                to_allocate.len(),
                to_allocate.len()
            ));
        }
        for (k, &i) in to_allocate.iter().enumerate() {
            let allocation = results[k].clone();
            m.allocation[i] = Some(allocation.clone());
            let base = if s.is_extended(i) {
                na.extended_claim.clone().unwrap_or_else(|| s.claims[i].clone())
            } else {
                s.claims[i].clone()
            };
            let mut c = (*base).clone();
            let fins = c.metadata.finalizers.get_or_insert_with(Vec::new);
            if !fins.iter().any(|f| f == FINALIZER) {
                fins.push(FINALIZER.into());
            }
            c.status.get_or_insert_with(Default::default).allocation = Some(allocation);
            let claim_uid = s.claims[i].metadata.uid.clone().unwrap_or_default();
            self.manager.signal_pending(&claim_uid, Arc::new(c));
        }
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, _node: &str) {
        let Ok(s) = read_state(state).map(|s| s.0.clone()) else { return };
        if s.is_empty() {
            return;
        }
        let claims = s.m.lock().claims.clone();
        for c in claims.iter().take(s.num_user) {
            let claim_uid = c.metadata.uid.as_deref().unwrap_or_default();
            if self.manager.maybe_remove_pending(claim_uid, false) {
                self.manager.restore(
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default(),
                );
            }
            if allocated(c) && claim::is_reserved_for_pod(&pod.pod, c) {
                // Drop only our entry: a strategic-merge delete works without the newest claim.
                let patch = serde_json::json!({"metadata": {"uid": claim_uid},
                    "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid()}]}});
                let client = self.handle.client.clone();
                let ns = c.metadata.namespace.clone().unwrap_or_default();
                let name = c.metadata.name.clone().unwrap_or_default();
                let key = pod.key();
                (self.handle.spawner)(Box::pin(async move {
                    if let Err(e) = client.patch_resource_claim_status(&ns, &name, patch).await {
                        tracing::warn!(pod = %key, claim = %format!("{ns}/{name}"), error = %e, "unreserve");
                    }
                }));
            }
        }
        extended::unreserve(&s, &self.manager, &self.handle, &claims);
    }
}

fn is_conflict(e: &ApiError) -> bool {
    e.is_conflict()
}

impl DynamicResources {
    /// Writes the allocation (if this pod made it) and the reservation for claim `i`,
    /// retrying on conflicts with the newest version (upstream's `bindClaim`).
    async fn bind_claim(
        &self,
        s: &DraState,
        i: usize,
        pod: &PodInfo,
        node: &str,
    ) -> Result<Arc<ResourceClaim>, String> {
        let (mut current, allocation) = {
            let m = s.m.lock();
            (m.claims[i].clone(), m.allocation[i].clone())
        };
        let extended = s.is_extended(i);
        if extended && allocation.is_none() && current.spec.devices.as_ref().and_then(|d| d.requests.as_ref()).is_none()
        {
            // Extended resources all served by device plugins: no claim.
            return Ok(current);
        }
        let initial_uid = current.metadata.uid.clone().unwrap_or_default();
        let client = self.handle.client.clone();
        let mut modified = false;
        let result: Result<Arc<ResourceClaim>, String> = async {
            if extended && extended::is_special_name(&current) {
                let created = extended::create_claim(&*client, s, node).await?;
                modified = true;
                current = Arc::new(created);
                s.m.lock().claims[i] = current.clone();
            }
            let binding = ResourceClaimConsumerReference {
                api_group: Some(String::new()),
                resource: "pods".into(),
                name: pod.name().to_string(),
                uid: pod.uid().to_string(),
            };
            let mut claim = (*current).clone();
            let mut refresh = false;
            let mut attempt = 0;
            loop {
                attempt += 1;
                if refresh {
                    let ns = claim.metadata.namespace.clone().unwrap_or_default();
                    let name = claim.metadata.name.clone().unwrap_or_default();
                    claim = client
                        .get_resource_claim(&ns, &name)
                        .await
                        .map_err(|e| format!("get updated claim {} after conflict: {e}", kobj(&claim.metadata)))?;
                }
                refresh = true;
                let step: Result<ResourceClaim, (bool, String)> = async {
                    if claim.metadata.deletion_timestamp.is_some() {
                        return Err((false, format!("claim {} got deleted in the meantime", kobj(&claim.metadata))));
                    }
                    if let Some(a) = &allocation {
                        if allocated(&claim) {
                            return Err((
                                false,
                                format!("claim {} got allocated elsewhere in the meantime", kobj(&claim.metadata)),
                            ));
                        }
                        if !claim.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER) {
                            claim.metadata.finalizers.get_or_insert_with(Vec::new).push(FINALIZER.into());
                            claim = client.update_resource_claim(&claim).await.map_err(|e| {
                                (is_conflict(&e), format!("add finalizer to claim {}: {e}", kobj(&claim.metadata)))
                            })?;
                        }
                        claim.status.get_or_insert_with(Default::default).allocation = Some(a.clone());
                    }
                    let st = claim.status.get_or_insert_with(Default::default);
                    st.reserved_for.get_or_insert_with(Vec::new).push(binding.clone());
                    let Some(alloc) = st.allocation.as_mut() else {
                        return Err((
                            false,
                            format!("claim {} got deallocated elsewhere in the meantime", kobj(&claim.metadata)),
                        ));
                    };
                    if alloc.allocation_timestamp.is_none() {
                        if let Ok(t) = k8s_openapi::jiff::Timestamp::from_nanosecond(now_nanos()) {
                            alloc.allocation_timestamp = Some(Time(t));
                        }
                    }
                    client.update_resource_claim_status(&claim).await.map_err(|e| {
                        let what = if allocation.is_some() {
                            "add allocation and reservation to"
                        } else {
                            "add reservation to"
                        };
                        (is_conflict(&e), format!("{what} claim {}: {e}", kobj(&claim.metadata)))
                    })
                }
                .await;
                match step {
                    Ok(updated) => {
                        modified = true;
                        return Ok(Arc::new(updated));
                    }
                    Err((true, _)) if attempt < CONFLICT_RETRIES => {
                        crate::volumebinding::timer::sleep(CONFLICT_BACKOFF).await;
                    }
                    Err((_, msg)) => return Err(msg),
                }
            }
        }
        .await;
        // The scheduler was handling allocation; that is over, successfully or not.
        let mut force = false;
        if let Ok(updated) = &result {
            if modified && !extended && self.manager.assume(updated.clone()).is_ok() {
                force = true;
            }
        }
        if allocation.is_some() {
            self.manager.maybe_remove_pending(&initial_uid, force);
        }
        result
    }

    fn has_binding_conditions(claims: &[Arc<ResourceClaim>]) -> bool {
        claims.iter().filter_map(|c| allocation_of(c)).any(|a| {
            a.devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .any(|r| r.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()))
        })
    }

    /// Waits until every device's binding conditions are met (`Err` on failure or timeout).
    async fn wait_for_binding_conditions(&self, s: &DraState) -> Result<(), String> {
        let deadline = Instant::now() + self.args.binding_timeout();
        loop {
            let claims = s.m.lock().claims.clone();
            let mut ready = true;
            for (i, c) in claims.iter().enumerate() {
                let ns = c.metadata.namespace.as_deref().unwrap_or_default();
                let name = c.metadata.name.as_deref().unwrap_or_default();
                let latest = self.manager.claim(ns, name)?;
                s.m.lock().claims[i] = latest.clone();
                match Self::claim_ready_for_binding(&latest) {
                    Err(e) => return Err(e),
                    Ok(true) => {}
                    Ok(false) => {
                        if self.claim_timed_out(&latest) {
                            return Err(format!("device binding timeout: claim={name}"));
                        }
                        ready = false;
                    }
                }
            }
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err("device binding timeout: context deadline exceeded".into());
            }
            crate::volumebinding::timer::sleep(
                BINDING_CONDITIONS_POLL.min(deadline.saturating_duration_since(Instant::now())),
            )
            .await;
        }
    }
}

impl PreBindPlugin for DynamicResources {
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &PodInfo, _node: &str) -> Status {
        match read_state(state) {
            Ok(s) if s.0.is_empty() => Status::skip(),
            Ok(_) => Status::success(),
            Err(e) => e,
        }
    }

    fn pre_bind<'a>(
        &'a self,
        state: &'a CycleState,
        pod: &'a PodInfo,
        node: &'a str,
    ) -> Pin<Box<dyn Future<Output = Status> + Send + 'a>> {
        Box::pin(async move {
            let s = match read_state(state) {
                Ok(s) => s.0.clone(),
                Err(e) => return e,
            };
            if s.is_empty() {
                return Status::success();
            }
            let n = s.claims.len();
            for i in 0..n {
                let c = s.m.lock().claims[i].clone();
                if claim::is_reserved_for_pod(&pod.pod, &c) {
                    continue;
                }
                match self.bind_claim(&s, i, pod, node).await {
                    Ok(updated) => s.m.lock().claims[i] = updated,
                    Err(e) => return Status::error(e),
                }
            }
            if let Some(st) = extended::patch_pod_status(&s, &self.handle, pod, node).await {
                return st;
            }
            let claims = s.m.lock().claims.clone();
            if !Self::has_binding_conditions(&claims) {
                return Status::success();
            }
            self.handle.recorder.record(
                &pod.pod,
                None,
                "Normal",
                "BindingConditionsPending",
                "Scheduling",
                &format!("waiting for binding conditions for device on node {node}"),
            );
            match self.wait_for_binding_conditions(&s).await {
                Ok(()) => Status::success(),
                Err(e) => Status::error(e),
            }
        })
    }
}

/// Node-local only for a pod whose PreFilter found no claim (its own or for extended resources):
/// Filter then does not run and Score is 0 everywhere. Any claim keeps the cycle off the memo.
impl ksched_framework::MemoPlugin for DynamicResources {
    fn memo_inputs(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        _w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        read_state(state).is_ok_and(|s| s.0.is_empty())
    }
}

#[cfg(test)]
mod tests;
