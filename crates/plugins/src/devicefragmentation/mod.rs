//! DeviceFragmentation (not upstream; opt-in): a score plugin that places pods where they
//! strand the least device capacity for the pods expected next, for devices that claims share
//! (GPU sharing through DRA consumable capacity) and devices claimed whole.
//!
//! - PreFilter counts the pod's shape (cpu, memory, device demand, the devices its selectors
//!   accept) into the workload mix learnt online ([`mix`]);
//! - PreScore refreshes, for the nodes whose devices changed, what their devices have free
//!   (through the DRA state the framework handle shares, with the allocator's own device model:
//!   module [`devices`]) and the sums the measure keeps per node and shape, and weighs the mix's
//!   shapes by the pressure on the devices they accept;
//! - Score is minus the weighted capacity the pod's placement takes away or strands
//!   ([`measure`]), plus the growth of the device capacity the node's cpu and memory could no
//!   longer feed at the mix's rate ([`measure::starved`]), with the device the allocator's
//!   opt-in best-fit selection gives it (DynamicResources `deviceSelection: BestFit`);
//! - NormalizeScore keeps the order of the raw scores where upstream's integer scale would tie
//!   them: the best node alone gets 100, the others a linear 0-99 over the nodes the pod fits
//!   (see [`normalize`]).

mod args;
pub mod devices;
pub mod measure;
pub mod mix;
mod totals;

use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;
use ksched_dra::allocator::Features;
use ksched_dra::manager::SharedDraManager;
use ksched_framework::pod::Pod;
use ksched_framework::{
    CycleState, Handle, NodeInfo, Plugin, PodInfo, PreFilterPlugin, PreFilterResult, PreScorePlugin, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

use crate::names;

pub use args::DeviceFragmentationArgs;
use devices::DeviceTracker;
use measure::{Demand, NodeState, Shape, Sums};
use mix::{Mix, MixSnapshot, PodShape};
use totals::Totals;

const POD_STATE_KEY: &str = "PreFilterDeviceFragmentation";
const SCORE_STATE_KEY: &str = "PreScoreDeviceFragmentation";

/// Raw scores put the loss, in millionths of a typical device, above this many values of
/// the tie-break (the free capacity left on the node, in thousandths of a device): the loss
/// decides, and among equal losses the node the pod fills best (best fit) wins, as first fit
/// over a fixed node order does for FGD.
const TIE_SPAN: i64 = 1 << 20;
/// How much the growth of the capacity a node's cpu and memory cannot feed
/// ([`measure::starved`]) counts beside the mix's weighted losses (their weights are shares of
/// the pods seen, so about 1 in all). Chosen on generated design variants, not on the reported
/// ones: 0.5 and 1 gave the same, and the growth alone, not its decrease, is charged.
const STARVED_WEIGHT: f64 = 1.0;
/// Bound of the loss part (in millionths of a device), so raw scores cannot overflow.
const LOSS_BOUND: i64 = 1 << 40;

/// The pod's shape as PreFilter found it (`None`: not measured).
#[derive(Debug, Clone)]
struct PodState(Option<Shape>);

/// What Score needs: the pod's shape, the mix's shapes and their weights.
#[derive(Debug, Clone)]
struct ScoreState(Arc<ScoreData>);

#[derive(Debug)]
struct ScoreData {
    pod: Shape,
    snapshot: Arc<MixSnapshot>,
    weights: Vec<f64>,
    /// The typical device capacity (scores count in devices).
    unit: f64,
}

/// One node as last read, with the measure's sums for one mix snapshot.
#[derive(Debug)]
struct NodeView {
    mix_version: u64,
    state: Arc<NodeState>,
    /// The free capacity of its measured devices.
    free: i64,
    /// Per snapshot shape: the sums, the usable and the stranded capacity.
    sums: Vec<Sums>,
    usable: Vec<i64>,
    stranded: Vec<i64>,
    /// The free capacity its cpu and memory cannot feed at the mix's rate.
    starved: f64,
}

struct Learner {
    mix: Mix,
    devices: DeviceTracker,
    totals: Totals,
}

/// The DeviceFragmentation plugin.
pub struct DeviceFragmentation {
    args: DeviceFragmentationArgs,
    dra: Arc<dyn SharedDraManager>,
    features: Features,
    learner: Mutex<Learner>,
    views: RwLock<FxHashMap<Box<str>, Arc<NodeView>>>,
}

impl std::fmt::Debug for DeviceFragmentation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceFragmentation").field("args", &self.args).finish()
    }
}

/// Builds DeviceFragmentation from `DeviceFragmentationArgs` (decoded strictly, validated),
/// over the DRA state the scheduler installed in the framework handle.
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args = DeviceFragmentationArgs::decode(args)?;
    // The scheduler installs the DRA state before it builds profiles; a handle made by hand
    // (tests, tools) gets the one DynamicResources would make.
    let dra = ksched_dra::manager::from_shared(&handle.shared).unwrap_or_else(|| {
        crate::dynamicresources::manager::shared(&handle.shared, handle.lister.clone()) as Arc<dyn SharedDraManager>
    });
    Ok(Arc::new(DeviceFragmentation::with(args, dra, crate::dynamicresources::allocator_features(&handle.features))))
}

impl DeviceFragmentation {
    fn with(args: DeviceFragmentationArgs, dra: Arc<dyn SharedDraManager>, features: Features) -> Self {
        let devices = DeviceTracker::new(
            &args.device_class_name,
            args.capacity.as_deref(),
            args.counts_cpu(),
            args.counts_memory(),
        );
        DeviceFragmentation {
            args,
            dra,
            features,
            learner: Mutex::new(Learner { mix: Mix::default(), devices, totals: Totals::default() }),
            views: RwLock::new(FxHashMap::default()),
        }
    }
}

impl Plugin for DeviceFragmentation {
    fn name(&self) -> &str {
        names::DEVICE_FRAGMENTATION
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
    fn events_to_register(&self) -> Option<Vec<ksched_framework::ClusterEventWithHint>> {
        // It never rejects a pod, so no event makes one schedulable.
        Some(Vec::new())
    }
}

/// Why a pod is left to the other plugins.
#[derive(Debug, PartialEq, Eq)]
enum NotMeasured {
    /// Its claims are not all there yet, or one is being deleted.
    Claims(String),
    /// Its device requests are not one of the forms the measure models.
    Unmodelled(&'static str),
}

impl DeviceFragmentation {
    /// The pod's shape: its cpu and memory requests and what its unallocated claims ask of
    /// the configured class (one share of one device, or whole devices, with their selectors).
    fn pod_shape(
        &self,
        pod: &Pod,
        requests: &ksched_framework::resource::Resource,
        devices: &DeviceTracker,
    ) -> Result<PodShape, NotMeasured> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut claims: Vec<Arc<ResourceClaim>> = Vec::new();
        for pc in pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).into_iter().flatten() {
            let (name, _) = ksched_dra::claim::claim_name(pod, pc).map_err(NotMeasured::Claims)?;
            let Some(name) = name else { continue };
            claims.push(self.dra.claim(ns, &name).map_err(NotMeasured::Claims)?);
        }
        let mut demand = Demand::None;
        let mut selectors: Option<Vec<String>> = None;
        for c in &claims {
            if c.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
                // Allocated for another pod already: this one takes nothing new.
                continue;
            }
            for r in c.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default() {
                if r.first_available.as_ref().is_some_and(|f| !f.is_empty()) {
                    return Err(NotMeasured::Unmodelled("a request with firstAvailable subrequests"));
                }
                let Some(e) = &r.exactly else { continue };
                if e.device_class_name != self.args.device_class_name {
                    continue;
                }
                if e.admin_access == Some(true) {
                    continue;
                }
                if e.allocation_mode.as_deref().is_some_and(|m| m != "ExactCount") {
                    return Err(NotMeasured::Unmodelled("a request for all devices"));
                }
                let count = e.count.unwrap_or(1).max(0);
                // What the share takes of a device, after the devices' request policy rounds
                // it as allocation will.
                let amount = self
                    .args
                    .capacity
                    .as_deref()
                    .and_then(|name| e.capacity.as_ref()?.requests.as_ref()?.get(name))
                    .map(|q| devices.share_amount(q));
                let mut sel: Vec<String> =
                    e.selectors.iter().flatten().filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone())).collect();
                sel.sort();
                sel.dedup();
                if selectors.as_ref().is_some_and(|s| *s != sel) {
                    return Err(NotMeasured::Unmodelled("requests with different selectors"));
                }
                selectors = Some(sel);
                demand = match (demand, amount) {
                    (Demand::None, Some(m)) if count == 1 => Demand::Share(m),
                    (Demand::None, None) => Demand::Whole(count as u32),
                    (Demand::Whole(n), None) => Demand::Whole(n + count as u32),
                    _ => return Err(NotMeasured::Unmodelled("several shares, or shares and whole devices")),
                };
            }
        }
        Ok(PodShape {
            milli_cpu: requests.milli_cpu,
            memory: requests.memory,
            demand,
            selectors: selectors.unwrap_or_default(),
        })
    }
}

impl PreFilterPlugin for DeviceFragmentation {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let mut learner = self.learner.lock();
        let Learner { mix, devices, .. } = &mut *learner;
        // The index rounds shares by the devices' request policy.
        devices.refresh(&*self.dra, mix.classes());
        let shape = match self.pod_shape(&pod.pod, &pod.requests, devices) {
            Ok(s) => s,
            Err(_) => {
                state.write(POD_STATE_KEY, PodState(None));
                return (None, Status::success());
            }
        };
        let measured = mix.class_of(&shape.selectors).map(|class| Shape {
            milli_cpu: shape.milli_cpu,
            memory: shape.memory,
            demand: shape.demand,
            class,
        });
        if let Some(s) = measured {
            if mix.observe(pod.uid(), s) {
                mix.refresh(devices.index().map_or(1, |i| i.typical_capacity));
            }
        }
        state.write(POD_STATE_KEY, PodState(measured));
        (None, Status::success())
    }
}

impl PreScorePlugin for DeviceFragmentation {
    fn pre_score(&self, state: &mut CycleState, _pod: &PodInfo, nodes: &[&NodeInfo], snapshot: &Snapshot) -> Status {
        let Ok(PodState(Some(pod))) = state.read::<PodState>(POD_STATE_KEY).cloned() else {
            return Status::skip();
        };
        let mut learner = self.learner.lock();
        let Learner { mix, devices, totals } = &mut *learner;
        if !devices.refresh(&*self.dra, mix.classes()) {
            return Status::skip();
        }
        let mix = mix.snapshot();
        if mix.shapes.is_empty() {
            return Status::skip();
        }
        let unit = devices.index().map_or(1, |i| i.typical_capacity).max(1) as f64;
        let allocated = self.dra.allocated();
        if totals.refresh(devices, &*self.dra, &self.features, snapshot, &*allocated, mix.class_demand.len()).is_none()
        {
            return Status::skip();
        }
        // Views only for the nodes Score will see: with a share of the nodes scored, the
        // others are never looked at.
        let mut views = self.views.write();
        for ni in nodes {
            let node_state = match devices.read_state(ni.name()) {
                Some(s) => s,
                None => match devices.node_state(&*self.dra, &self.features, ni, &*allocated) {
                    Some((s, _)) => s,
                    None => return Status::skip(),
                },
            };
            match views.get(ni.name()) {
                Some(v) if Arc::ptr_eq(&v.state, &node_state) && v.mix_version == mix.version => {}
                _ => {
                    views.insert(ni.name().into(), Arc::new(view_for(node_state, &mix)));
                }
            }
        }
        // Forget removed nodes once there are more remembered than there are nodes.
        if views.len() > snapshot.num_nodes() {
            views.retain(|name, _| snapshot.index.contains_key(&**name));
        }
        drop(views);
        if devices.len() > snapshot.num_nodes() {
            devices.retain(|name| snapshot.index.contains_key(name));
        }
        let pressure = measure::pressure(&mix.class_demand, &totals.class_free, totals.free_total);
        let weights: Vec<f64> =
            mix.shapes.iter().map(|(s, p)| p * pressure[s.class as usize] * measure::size_weight(s)).collect();
        if weights.iter().all(|w| *w == 0.0) {
            return Status::skip();
        }
        state.write(SCORE_STATE_KEY, ScoreState(Arc::new(ScoreData { pod, snapshot: mix, weights, unit })));
        Status::success()
    }
}

/// A node view of `state` with the sums of every shape of `mix`.
fn view_for(state: Arc<NodeState>, mix: &MixSnapshot) -> NodeView {
    let sums: Vec<Sums> = mix.shapes.iter().map(|(s, _)| measure::sums(&state, s)).collect();
    let free = measure::free_total(&state);
    let (usable, stranded) = mix
        .shapes
        .iter()
        .zip(&sums)
        .map(|((s, _), x)| {
            (
                measure::usable_from(s, *x, state.milli_cpu, state.memory),
                measure::stranded_from(s, *x, state.milli_cpu, state.memory),
            )
        })
        .unzip();
    let starved = measure::starved(free, state.milli_cpu, state.memory, mix.per_unit);
    NodeView { mix_version: mix.version, state, free, sums, usable, stranded, starved }
}

/// The weighted usable capacity placing the pod on the node takes away, and the device
/// capacity the node has free after it (`None` when, as far as the view knows, its devices do
/// not fit there).
fn placement_loss(data: &ScoreData, view: &NodeView) -> Option<(f64, i64)> {
    let pod = &data.pod;
    let chosen = measure::chosen_devices(&view.state, pod)?;
    let mut changed: Vec<(usize, i64)> = chosen
        .iter()
        .map(|&i| {
            let d = &view.state.devices[i];
            (i, if let Demand::Share(m) = pod.demand { d.free - m } else { 0 })
        })
        .collect();
    // Taking a whole GPU takes its partitions with it (and a partition the whole GPU): what
    // that leaves unavailable is lost too.
    changed.extend(measure::lost_with(&view.state, &chosen).into_iter().map(|i| (i, 0)));
    let cpu = view.state.milli_cpu.map(|c| c - pod.milli_cpu);
    let memory = view.state.memory.map(|m| m - pod.memory);
    let free_after =
        view.free - changed.iter().map(|&(i, f)| view.state.devices[i].free.max(0) - f.max(0)).sum::<i64>();
    let mut loss = 0.0;
    for (k, ((s, _), w)) in data.snapshot.shapes.iter().zip(&data.weights).enumerate() {
        if *w == 0.0 {
            continue;
        }
        let after = measure::sums_after(s, view.sums[k], &view.state.devices, &changed);
        let lost = view.usable[k] - measure::usable_from(s, after, cpu, memory);
        let stranded = measure::stranded_from(s, after, cpu, memory) - view.stranded[k];
        loss += w * (lost + stranded) as f64;
    }
    // Growth only: a pod taking devices that would starve anyway (few cores per device) is not
    // rewarded for it, which would pull pods without selectors onto the cpu-poor models that
    // restricted pods need.
    let starved = measure::starved(free_after, cpu, memory, data.snapshot.per_unit) - view.starved;
    loss += STARVED_WEIGHT * starved.max(0.0);
    Some((loss, free_after))
}

/// The raw score of a placement: minus the loss, then minus the free capacity left (see
/// [`TIE_SPAN`]).
fn raw_score(loss: f64, free_after: i64, unit: f64) -> i64 {
    let loss = ((loss / unit) * 1e6).round().clamp(0.0, LOSS_BOUND as f64) as i64;
    let left = ((free_after.max(0) as f64 / unit) * 1e3).round().min((TIE_SPAN - 1) as f64) as i64;
    -(loss * TIE_SPAN + left)
}

impl ScorePlugin for DeviceFragmentation {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let mut out = [0];
        self.score_nodes(state, pod, &[node], &mut out).map_err(|(_, s)| s)?;
        Ok(out[0])
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), (usize, Status)> {
        let data = match state.read::<ScoreState>(SCORE_STATE_KEY) {
            Ok(s) => s.0.clone(),
            Err(_) => {
                return Err((0, Status::error("reading PreScoreDeviceFragmentation from cycle state: not found")))
            }
        };
        let views = self.views.read();
        for (node, o) in nodes.iter().zip(out.iter_mut()) {
            *o = match views.get(node.name()).and_then(|v| placement_loss(&data, v)) {
                Some((loss, left)) => raw_score(loss, left, data.unit),
                None => DOES_NOT_FIT,
            };
        }
        Ok(())
    }

    fn has_normalize(&self) -> bool {
        true
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, _nodes: &[&NodeInfo], scores: &mut [i64]) -> Status {
        normalize(scores);
        Status::success()
    }
}

/// The raw score of a node where, as far as the measure knows, the pod's devices do not fit
/// (the filter had a fresher view, or another plugin decides): it gets 0, and stays out of the
/// range the other nodes are scaled over.
pub const DOES_NOT_FIT: i64 = i64::MIN;

/// Maps raw scores to 0-100 so that the nodes with the highest raw score, and only they, get
/// 100, and the rest a linear 0-99 over the range of the nodes that fit ([`DOES_NOT_FIT`] gets
/// 0, so one such node does not squeeze every other into the top of the scale). Upstream's
/// linear scaling to integers would give 100 to every node within 1% of the range from the
/// best, and the scheduler would pick among them by its tie-break (the order of its node walk),
/// losing exactly the fine differences this measure is about; the best node stays the best here
/// whatever the range.
pub fn normalize(scores: &mut [i64]) {
    let fitting = scores.iter().copied().filter(|s| *s != DOES_NOT_FIT);
    let (Some(max), Some(min)) = (fitting.clone().max(), fitting.min()) else {
        scores.fill(0);
        return;
    };
    let range = (max - min) as i128;
    for s in scores.iter_mut() {
        *s = if *s == DOES_NOT_FIT {
            0
        } else if *s == max {
            MAX_NODE_SCORE
        } else {
            (((*s - min) as i128 * (MAX_NODE_SCORE as i128 - 1)) / range) as i64
        };
    }
}

#[cfg(test)]
mod tests;
