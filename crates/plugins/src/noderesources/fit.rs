//! NodeResourcesFit (upstream `framework/plugins/noderesources`): filters out nodes without room for the pod's requests and scores the
//! rest with the configured strategy.

use std::collections::HashSet;
use std::sync::Arc;

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::resource::{is_extended_resource_name, pod_requests, RequestOptions, Resource};
use ksched_framework::{
    ActionType, BoundFilter, ClusterEventWithHint, Code, CycleState, EventObject, EventResource, FilterPlugin, Handle,
    NodeInfo, Plugin, PodInfo, PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, ScorePlugin, Snapshot,
    Status,
};

use super::args::{aggregate, NodeResourcesFitArgs, LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO};
use super::requested_to_capacity_ratio::Shape;
use super::resource_allocation::ResourceAllocation;
use super::{least_allocated, most_allocated};
use crate::names::NODE_RESOURCES_FIT;

/// CycleState key of the pod request computed at PreFilter.
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeResourcesFit";
/// CycleState key of the per-resource pod requests computed at PreScore.
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesFit";

/// Prefix of the implicit extended resource a DeviceClass provides.
const DEVICE_CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The pod's effective request, shared (not copied) when the cycle state is cloned.
#[derive(Debug, Clone)]
/// The pod's requests, and the extended resources DRA may serve instead of the node.
struct PreFilterState(Arc<Resource>, Arc<Vec<String>>);

/// The pod's request of each scored resource, aligned with the configured resources.
#[derive(Debug, Clone)]
struct PreScoreState(Arc<[i64]>);

#[derive(Debug, Clone)]
enum Strategy {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio(Shape),
}

/// The NodeResourcesFit plugin.
#[derive(Debug)]
pub struct Fit {
    ignored: Ignored,
    allocation: ResourceAllocation,
    strategy: Strategy,
    classes: DeviceClasses,
}

/// Where DeviceClasses come from: extended resources a class serves are left to
/// DynamicResources on nodes without device-plugin capacity for them (DRAExtendedResource).
#[derive(Clone, Default)]
pub(super) struct DeviceClasses(pub(super) Option<Arc<dyn ksched_framework::listers::ClusterLister>>);

impl std::fmt::Debug for DeviceClasses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceClasses")
    }
}

impl DeviceClasses {
    /// The pod's requested extended resources some DeviceClass serves.
    fn delegated(&self, req: &Resource) -> Vec<String> {
        let Some(lister) = &self.0 else { return Vec::new() };
        if !req.scalar_resources.keys().any(|n| crate::dynamicresources::is_dra_extended_resource_name(n)) {
            return Vec::new();
        }
        let classes = crate::dynamicresources::class_resolver(&lister.device_classes());
        req.scalar_resources.keys().filter(|n| classes.contains_key(*n)).cloned().collect()
    }
}

/// Extended resources the filter leaves unchecked.
#[derive(Debug, Default)]
struct Ignored {
    resources: HashSet<String>,
    groups: HashSet<String>,
}

impl Ignored {
    fn contains(&self, name: &str) -> bool {
        if !is_extended_resource_name(name) {
            return false;
        }
        let group = name.split('/').next().unwrap_or_default();
        self.resources.contains(name) || self.groups.contains(group)
    }
}

/// A resource the node lacks for the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shortage<'a> {
    Pods,
    Cpu,
    Memory,
    EphemeralStorage,
    Scalar(&'a str),
}

impl Shortage<'_> {
    fn reason(self) -> String {
        match self {
            Shortage::Pods => "Too many pods".to_string(),
            Shortage::Cpu => "Insufficient cpu".to_string(),
            Shortage::Memory => "Insufficient memory".to_string(),
            Shortage::EphemeralStorage => "Insufficient ephemeral-storage".to_string(),
            Shortage::Scalar(name) => format!("Insufficient {name}"),
        }
    }
}

/// Calls `f(shortage, unresolvable)` for every resource the node cannot provide, in upstream's
/// order. `unresolvable` means the request exceeds the node's whole allocatable, so evicting pods
/// cannot help. Allocation-free so Filter stays cheap on the success path.
fn for_each_shortage<'a>(
    req: &'a Resource,
    allocatable: &Resource,
    requested: &Resource,
    num_pods: usize,
    ignored: &Ignored,
    mut f: impl FnMut(Shortage<'a>, bool),
) {
    if num_pods as i64 + 1 > allocatable.allowed_pod_number {
        f(Shortage::Pods, false);
    }
    if req.milli_cpu == 0 && req.memory == 0 && req.ephemeral_storage == 0 && req.scalar_resources.is_empty() {
        return;
    }
    let natives = [
        (Shortage::Cpu, req.milli_cpu, allocatable.milli_cpu, requested.milli_cpu),
        (Shortage::Memory, req.memory, allocatable.memory, requested.memory),
        (Shortage::EphemeralStorage, req.ephemeral_storage, allocatable.ephemeral_storage, requested.ephemeral_storage),
    ];
    for (shortage, want, alloc, used) in natives {
        if want > 0 && want > alloc - used {
            f(shortage, want > alloc);
        }
    }
    for (name, &want) in &req.scalar_resources {
        if want == 0 || ignored.contains(name) {
            continue;
        }
        let alloc = allocatable.scalar_resources.get(name).copied().unwrap_or(0);
        let used = requested.scalar_resources.get(name).copied().unwrap_or(0);
        if want > alloc - used {
            f(Shortage::Scalar(name), want > alloc);
        }
    }
}

/// Signs the pod's requests (upstream `Fit.SignPod`, shared with BalancedAllocation), unless
/// DRA may serve one of its extended resources: which nodes then fit depends on devices.
pub(super) fn sign_requests(
    classes: &DeviceClasses,
    pod: &PodInfo,
    sig: &mut ksched_framework::batch::SignatureBuilder,
) -> Status {
    let requested = |name: &String| pod.requests.scalar_resources.get(name).is_some_and(|q| *q != 0);
    if classes.delegated(&pod.requests).iter().any(requested) {
        return Status::unschedulable("signature disabled when dra extended resources are used in the cluster");
    }
    let signature = ksched_framework::batch::signature::RESOURCES;
    sig.fragment(signature, |w| ksched_framework::batch::signature::resources(&pod.requests, w));
    Status::success()
}

/// Builds NodeResourcesFit from its (v1, possibly partial) args; they are defaulted then validated.
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let mut args: NodeResourcesFitArgs = ksched_framework::registry::decode_args(args)?;
    args.set_defaults();
    let mut fit = Fit::from_args(&args)?;
    fit.classes = DeviceClasses(Some(handle.lister.clone()));
    Ok(Arc::new(fit))
}

impl Fit {
    /// Builds the plugin from already-defaulted args, validating them.
    pub fn from_args(args: &NodeResourcesFitArgs) -> Result<Fit, String> {
        if let Some(err) = aggregate(&args.validate("")) {
            return Err(err);
        }
        let Some(s) = args.scoring_strategy.as_ref() else { return Err("scoring strategy not specified".into()) };
        let strategy = match s.type_.as_str() {
            LEAST_ALLOCATED => Strategy::LeastAllocated,
            MOST_ALLOCATED => Strategy::MostAllocated,
            REQUESTED_TO_CAPACITY_RATIO => Strategy::RequestedToCapacityRatio(Shape::new(
                s.requested_to_capacity_ratio.as_ref().map(|r| r.shape.as_slice()).unwrap_or_default(),
            )),
            other => return Err(format!("scoring strategy {other} is not supported")),
        };
        Ok(Fit {
            ignored: Ignored {
                resources: args.ignored_resources.iter().cloned().collect(),
                groups: args.ignored_resource_groups.iter().cloned().collect(),
            },
            allocation: ResourceAllocation::new(&s.resources, false),
            strategy,
            classes: DeviceClasses::default(),
        })
    }

    fn score_with(&self, node: &NodeInfo, pod_requests: &[i64]) -> Result<i64, Status> {
        if self.allocation.is_empty() {
            return Err(Status::error("resources not found"));
        }
        if let (Strategy::LeastAllocated, Some(pair)) =
            (&self.strategy, self.allocation.cpu_memory_entries(node, pod_requests))
        {
            return Ok(least_allocated::score(pair.into_iter().flatten()));
        }
        let entries = self.allocation.entries(node, pod_requests);
        Ok(match &self.strategy {
            Strategy::LeastAllocated => least_allocated::score(entries),
            Strategy::MostAllocated => most_allocated::score(entries),
            Strategy::RequestedToCapacityRatio(shape) => shape.score(entries),
        })
    }
}

impl Plugin for Fit {
    fn name(&self) -> &str {
        NODE_RESOURCES_FIT
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
        Some(self)
    }
    fn as_memo(&self) -> Option<&dyn ksched_framework::MemoPlugin> {
        Some(self)
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn as_placement_score(&self) -> Option<&dyn ksched_framework::PlacementScorePlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN,
                is_schedulable_after_pod_event,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE,
                is_schedulable_after_node_change,
            ),
            // DRAExtendedResource is on by default: a class may start providing a requested resource.
            ClusterEventWithHint::with_hint(
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_device_class_event,
            ),
        ])
    }
}

/// Feasibility and scores depend on the pod's requests.
impl ksched_framework::SignPlugin for Fit {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        sign_requests(&self.classes, pod, sig)
    }
}

impl PreFilterPlugin for Fit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let delegated = self.classes.delegated(&pod.requests);
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(Arc::new(pod.requests.clone()), Arc::new(delegated)));
        (None, Status::success())
    }
}

impl FilterPlugin for Fit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Ok(PreFilterState(req, delegated)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return Status::error(format!("error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"));
        };
        self.fits_delegating(req, delegated, node)
    }

    fn bind_cycle<'a>(&'a self, state: &'a CycleState, _pod: &'a PodInfo) -> Option<BoundFilter<'a>> {
        let PreFilterState(req, delegated) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).ok()?;
        Some(Box::new(move |node: &NodeInfo| self.fits_delegating(req, delegated, node)))
    }
}

impl Fit {
    /// [`Fit::fits`] without the extended resources DRA serves on this node (those the node
    /// has no allocatable of).
    fn fits_delegating(&self, req: &Resource, delegated: &[String], node: &NodeInfo) -> Status {
        if delegated.is_empty() {
            return self.fits(req, node);
        }
        let mut req = req.clone();
        for name in delegated {
            if node.allocatable.scalar_resources.get(name).copied().unwrap_or(0) == 0 {
                req.scalar_resources.remove(name);
            }
        }
        self.fits(&req, node)
    }

    /// The Filter decision for a pod requesting `req`.
    fn fits(&self, req: &Resource, node: &NodeInfo) -> Status {
        let mut reasons = Vec::new();
        let mut code = Code::Unschedulable;
        for_each_shortage(
            req,
            &node.allocatable,
            &node.requested,
            node.pods.len(),
            &self.ignored,
            |s, unresolvable| {
                reasons.push(s.reason());
                if unresolvable {
                    code = Code::UnschedulableAndUnresolvable;
                }
            },
        );
        if reasons.is_empty() {
            Status::success()
        } else {
            Status::new(code, reasons)
        }
    }
}

/// Pod-group cycle: how full a placement would be with the group in it (MostAllocated over the
/// placement's nodes, whatever the node scoring strategy), so that groups pack into the fullest
/// placement that fits them.
impl ksched_framework::PlacementScorePlugin for Fit {
    fn score_placement(
        &self,
        _group: &ksched_framework::podgroup::PodGroupInfo,
        assignments: &ksched_framework::podgroup::PodGroupAssignments,
        _snapshot: &Snapshot,
    ) -> Result<i64, Status> {
        let mut group = vec![0i64; 0];
        for a in &assignments.proposed {
            let reqs = self.allocation.pod_requests(&a.pod);
            group.resize(reqs.len(), 0);
            for (g, r) in group.iter_mut().zip(reqs) {
                *g += r;
            }
        }
        Ok(most_allocated::score(self.allocation.placement_entries(&group, &assignments.placement.nodes).into_iter()))
    }
}

impl PreScorePlugin for Fit {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[&NodeInfo], _snapshot: &Snapshot) -> Status {
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(self.allocation.pod_requests(pod).into()));
        Status::success()
    }
}

impl ScorePlugin for Fit {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Ok(PreScoreState(reqs)) => self.score_with(node, reqs),
            Err(_) => self.score_with(node, &self.allocation.pod_requests(pod)),
        }
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), (usize, Status)> {
        let computed;
        let reqs: &[i64] = match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Ok(PreScoreState(reqs)) => reqs,
            Err(_) => {
                computed = self.allocation.pod_requests(pod);
                &computed
            }
        };
        ksched_framework::score_each(nodes, out, |node| self.score_with(node, reqs))
    }
}

fn kind_of(obj: &EventObject) -> &'static str {
    match obj {
        EventObject::Pod(_) => "*v1.Pod",
        EventObject::Node(_) => "*v1.Node",
        EventObject::PodGroup(_) => "*v1alpha2.PodGroup",
        EventObject::Other(_) => "*unstructured.Unstructured",
    }
}

fn pod_of(obj: Option<&EventObject>) -> Result<Option<&Pod>, String> {
    obj.map(|o| o.as_pod().ok_or_else(|| format!("expected *v1.Pod, but got {}", kind_of(o)))).transpose()
}

fn node_of(obj: Option<&EventObject>) -> Result<Option<&Node>, String> {
    obj.map(|o| o.as_node().ok_or_else(|| format!("expected *v1.Node, but got {}", kind_of(o)))).transpose()
}

fn json_of(obj: Option<&EventObject>) -> Result<Option<&serde_json::Value>, String> {
    obj.map(|o| match o {
        EventObject::Other(v) => Ok(v.as_ref()),
        _ => Err(format!("expected *v1.DeviceClass, but got {}", kind_of(o))),
    })
    .transpose()
}

/// The request NodeResourcesFit checks a pending pod with (pod-level resources honoured).
fn fit_request(pod: &Pod) -> Resource {
    pod_requests(pod, RequestOptions::default())
}

/// Pod deleted or scaled down: a deleted pod frees room only if it was bound or nominated; a scale
/// down helps when it is the pod itself or a bound pod shrinking a resource the pod requests.
fn is_schedulable_after_pod_event(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = pod_of(new)?;
    let original = pod_of(old)?.ok_or("the event carries no old pod")?;
    let Some(modified) = modified else {
        let bound = original.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
        let nominated =
            original.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty());
        return Ok(if bound || nominated { QueueingHint::Queue } else { QueueingHint::QueueSkip });
    };
    Ok(if scale_down_may_help(pod, original, modified) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

fn scale_down_may_help(target: &Pod, original: &Pod, modified: &Pod) -> bool {
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    if uid(modified) == uid(target) {
        return true;
    }
    if modified.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default().is_empty() {
        return false;
    }
    let before = pod_requests(original, RequestOptions::default());
    let after = pod_requests(modified, RequestOptions::default());
    let wanted = pod_requests(target, RequestOptions::default());
    let shrank = |want: i64, b: i64, a: i64| want != 0 && b > a;
    shrank(wanted.milli_cpu, before.milli_cpu, after.milli_cpu)
        || shrank(wanted.memory, before.memory, after.memory)
        || shrank(wanted.ephemeral_storage, before.ephemeral_storage, after.ephemeral_storage)
        || wanted.scalar_resources.iter().any(|(name, &want)| shrank(want, before.get(name), after.get(name)))
}

/// Node added or its allocatable changed: requeue when the pod would fit the empty node and the
/// node is new, or a resource the pod requests (or the pod capacity) grew.
fn is_schedulable_after_node_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = node_of(new)?;
    let original = node_of(old)?;
    let Some(modified) = modified else { return Ok(QueueingHint::QueueSkip) };
    let req = fit_request(pod);
    let allocatable = allocatable_of(modified);
    let mut fits = true;
    for_each_shortage(&req, &allocatable, &Resource::default(), 0, &Ignored::default(), |_, _| fits = false);
    if !fits {
        return Ok(QueueingHint::QueueSkip);
    }
    let Some(original) = original else { return Ok(QueueingHint::Queue) };
    Ok(if requested_resources_increased(&req, &allocatable_of(original), &allocatable) {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

fn allocatable_of(node: &Node) -> Resource {
    node.status.as_ref().and_then(|s| s.allocatable.as_ref()).map(Resource::from_list).unwrap_or_default()
}

fn requested_resources_increased(req: &Resource, before: &Resource, after: &Resource) -> bool {
    if after.allowed_pod_number > before.allowed_pod_number {
        return true;
    }
    if req.milli_cpu == 0 && req.memory == 0 && req.ephemeral_storage == 0 && req.scalar_resources.is_empty() {
        return false;
    }
    (req.milli_cpu > 0 && after.milli_cpu > before.milli_cpu)
        || (req.memory > 0 && after.memory > before.memory)
        || (req.ephemeral_storage > 0 && after.ephemeral_storage > before.ephemeral_storage)
        || req.scalar_resources.iter().any(|(name, &want)| want != 0 && after.get(name) > before.get(name))
}

/// DeviceClass added or updated: requeue when the class (newly) provides an extended resource the
/// pod requests, either its explicit `extendedResourceName` or its implicit per-class name.
fn is_schedulable_after_device_class_event(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = json_of(new)?.ok_or("the event carries no new device class")?;
    let original = json_of(old)?;
    let ext_name =
        |v: &serde_json::Value| v.pointer("/spec/extendedResourceName").and_then(|n| n.as_str()).map(str::to_string);
    let requests = || fit_request(pod);
    let requested = |reqs: &Resource, name: &str| reqs.scalar_resources.contains_key(name);
    match original {
        Some(orig) => {
            if ext_name(orig).unwrap_or_default() == ext_name(modified).unwrap_or_default() {
                return Ok(QueueingHint::QueueSkip);
            }
        }
        None => {
            let class = modified.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default();
            if requested(&requests(), &format!("{DEVICE_CLASS_RESOURCE_PREFIX}{class}")) {
                return Ok(QueueingHint::Queue);
            }
        }
    }
    if let Some(name) = ext_name(modified) {
        if requested(&requests(), &name) {
            return Ok(QueueingHint::Queue);
        }
    }
    Ok(QueueingHint::QueueSkip)
}

/// Filter reads the requests and DRA-served resources PreFilter computed; Score, the amounts of
/// the scored resources (with the defaults for containers without requests where the strategy
/// uses them).
impl ksched_framework::MemoPlugin for Fit {
    fn memo_inputs(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        let Ok(PreFilterState(req, delegated)) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else {
            return false;
        };
        ksched_framework::memo::write_resource(req, w);
        w.count(delegated.len());
        delegated.iter().for_each(|d| w.str(d));
        ksched_framework::memo::write_amounts(&self.allocation.pod_requests(pod), w);
        true
    }
}

#[cfg(test)]
mod tests;
