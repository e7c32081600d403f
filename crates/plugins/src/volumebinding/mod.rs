//! VolumeBinding (upstream `framework/plugins/volumebinding`): pods with PersistentVolumeClaims go only to nodes where their bound
//! PVs are reachable and their WaitForFirstConsumer claims can be bound to an existing PV or
//! provisioned; Reserve assumes the choice and PreBind writes it and waits for the PV controller.

pub mod assume_cache;
pub mod binder;
pub mod helpers;
pub mod timer;

#[cfg(test)]
pub(crate) mod testutil;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_lite_box::BoxFuture;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use ksched_framework::listers::ClusterLister;
use ksched_framework::pod::Pod;
use ksched_framework::registry::decode_args;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, PreBindPlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin, QueueingHint, ReservePlugin, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use serde::{Deserialize, Serialize};

use crate::names;
use assume_cache::AssumeCache;
use binder::{Binder, PodVolumeClaims, PodVolumes};
use helpers::{
    annotation, claim_volume_name, name_of, namespace_of, not_found, pod_volumes, typed_pair, volume_claim,
    volume_is_for_pod, MIGRATED_PLUGINS_ANNOTATION,
};

mod futures_lite_box {
    //! The boxed future type PreBind returns (the framework's `BoxFuture`).
    pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
}

/// One point of the scoring shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Storage utilisation in percent, 0–100.
    #[serde(default)]
    pub utilization: i32,
    /// Score at that utilisation, 0–10.
    #[serde(default)]
    pub score: i32,
}

/// Default of the StorageCapacityScoring feature gate (alpha in 1.36).
pub const STORAGE_CAPACITY_SCORING_DEFAULT: bool = false;

/// Default `bindTimeoutSeconds`.
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;

/// PreFilter reason when a claim of an Immediate class is not bound yet.
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

const STATE_KEY: &str = names::VOLUME_BINDING;
const MAX_UTILIZATION: i64 = 100;
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

fn default_bind_timeout() -> i64 {
    DEFAULT_BIND_TIMEOUT_SECONDS
}

/// `VolumeBindingArgs` (kubescheduler.config.k8s.io/v1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeBindingArgs {
    /// How long PreBind waits for the PV controller, in seconds.
    #[serde(default = "default_bind_timeout")]
    pub bind_timeout_seconds: i64,
    /// Score per storage utilisation (StorageCapacityScoring only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        VolumeBindingArgs { bind_timeout_seconds: DEFAULT_BIND_TIMEOUT_SECONDS, shape: None }
    }
}

/// The default scoring shape (StorageCapacityScoring): utilisation 0 scores 10, 100 scores 0.
pub fn default_shape() -> Vec<UtilizationShapePoint> {
    vec![UtilizationShapePoint { utilization: 0, score: 10 }, UtilizationShapePoint { utilization: 100, score: 0 }]
}

/// Validates the args like upstream's `ValidateVolumeBindingArgsWithOptions`.
pub fn validate_args(args: &VolumeBindingArgs, storage_capacity_scoring: bool) -> Result<(), String> {
    let mut errs = Vec::new();
    if args.bind_timeout_seconds < 0 {
        errs.push(format!(
            "bindTimeoutSeconds: Invalid value: {}: invalid BindTimeoutSeconds, should not be a negative value",
            args.bind_timeout_seconds
        ));
    }
    match (&args.shape, storage_capacity_scoring) {
        (Some(_), false) => errs.push(
            "shape: Invalid value: \"null\": unexpected field `shape`, remove it or turn on the feature gate \
             StorageCapacityScoring"
                .to_string(),
        ),
        (shape, true) => {
            let shape = shape.as_deref().unwrap_or_default();
            if shape.is_empty() {
                errs.push("shape: Required value: at least one point must be specified".into());
            }
            if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
                errs.push(format!(
                    "shape[{i}].utilization: Invalid value: {}: values must be sorted in increasing order",
                    shape[i].utilization
                ));
            }
            for (i, p) in shape.iter().enumerate() {
                if !(0..=100).contains(&p.utilization) {
                    errs.push(format!(
                        "shape[{i}].utilization: Invalid value: {}: not in valid range [0, 100]",
                        p.utilization
                    ));
                }
                if !(0..=MAX_CUSTOM_PRIORITY_SCORE as i32).contains(&p.score) {
                    errs.push(format!("shape[{i}].score: Invalid value: {}: not in valid range [0, 10]", p.score));
                }
            }
        }
        (None, false) => {}
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// Per-cycle state, shared by reference between the cycle's copies (upstream keeps a pointer with
/// a mutex: Filter runs in parallel and writes per-node decisions).
#[derive(Clone, Default)]
struct StateData(Arc<Mutex<Inner>>);

#[derive(Default)]
struct Inner {
    all_bound: bool,
    pod_volumes_by_node: HashMap<String, PodVolumes>,
    claims: Option<Arc<PodVolumeClaims>>,
    has_static_bindings: bool,
}

impl StateData {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn read_state(state: &CycleState) -> Result<StateData, Status> {
    state.read::<StateData>(STATE_KEY).cloned().map_err(|e| Status::error(e.to_string()))
}

/// (requested, capacity) bytes per storage class.
type ClassResources = BTreeMap<String, (i64, i64)>;

/// The StorageCapacityScoring scorer: the shape applied to each class's utilisation, averaged.
#[derive(Debug, Clone)]
struct Scorer {
    shape: Vec<(i64, i64)>,
}

impl Scorer {
    fn new(points: &[UtilizationShapePoint]) -> Self {
        let factor = MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE;
        Scorer { shape: points.iter().map(|p| (i64::from(p.utilization), i64::from(p.score) * factor)).collect() }
    }

    /// The broken-linear function through the shape points.
    fn raw(&self, p: i64) -> i64 {
        let s = &self.shape;
        let Some(i) = s.iter().position(|(u, _)| p <= *u) else { return s.last().map_or(0, |x| x.1) };
        if i == 0 {
            return s[0].1;
        }
        let ((u0, s0), (u1, s1)) = (s[i - 1], s[i]);
        s0 + (s1 - s0) * (p - u0) / (u1 - u0)
    }

    fn score(&self, resources: &ClassResources) -> i64 {
        if resources.is_empty() {
            return 0;
        }
        let total: i64 = resources
            .values()
            .map(|&(requested, capacity)| {
                if capacity == 0 || requested > capacity {
                    self.raw(MAX_UTILIZATION)
                } else {
                    self.raw(requested * MAX_UTILIZATION / capacity)
                }
            })
            .sum();
        (total as f64 / resources.len() as f64).round() as i64
    }
}

/// The VolumeBinding plugin.
pub struct VolumeBinding {
    binder: Arc<Binder>,
    lister: Arc<dyn ClusterLister>,
    scorer: Option<Scorer>,
    storage_capacity_scoring: bool,
}

impl std::fmt::Debug for VolumeBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeBinding").finish_non_exhaustive()
    }
}

/// Builds the plugin from `VolumeBindingArgs` (strictly decoded and validated).
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args: VolumeBindingArgs = decode_args(args)?;
    Ok(Arc::new(VolumeBinding::with_options(args, handle, STORAGE_CAPACITY_SCORING_DEFAULT)?))
}

impl VolumeBinding {
    /// The plugin with the StorageCapacityScoring gate set explicitly.
    pub fn with_options(
        mut args: VolumeBindingArgs,
        handle: &Handle,
        storage_capacity_scoring: bool,
    ) -> Result<Self, String> {
        if storage_capacity_scoring && args.shape.is_none() {
            args.shape = Some(default_shape());
        }
        validate_args(&args, storage_capacity_scoring)?;
        let binder = Binder {
            lister: handle.lister.clone(),
            cache: AssumeCache::new(handle.lister.clone()),
            client: handle.client.clone(),
            scheduler: handle.scheduler.clone(),
            bind_timeout: Duration::from_secs(args.bind_timeout_seconds.max(0) as u64),
            poll_interval: Duration::from_secs(1),
        };
        let scorer = storage_capacity_scoring.then(|| Scorer::new(args.shape.as_deref().unwrap_or_default()));
        Ok(VolumeBinding { binder: Arc::new(binder), lister: handle.lister.clone(), scorer, storage_capacity_scoring })
    }

    /// Shortens the PreBind polling interval (tests).
    pub fn set_poll_interval(&mut self, d: Duration) {
        if let Some(b) = Arc::get_mut(&mut self.binder) {
            b.poll_interval = d;
        }
    }

    /// Whether the pod has claims, failing on missing, lost or deleting ones.
    fn pod_has_pvcs(&self, pod: &Pod) -> Result<bool, String> {
        let ns = namespace_of(&pod.metadata);
        let mut has = false;
        for vol in pod_volumes(pod) {
            let Some((claim, ephemeral)) = volume_claim(pod, vol) else { continue };
            has = true;
            let Some(pvc) = self.lister.persistent_volume_claim(ns, &claim) else {
                return Err(if ephemeral {
                    format!("waiting for ephemeral volume controller to create the persistentvolumeclaim {claim:?}")
                } else {
                    not_found("persistentvolumeclaim", &claim)
                });
            };
            let pvc_name = name_of(&pvc.metadata);
            if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
                return Err(format!(
                    "persistentvolumeclaim {pvc_name:?} bound to non-existent persistentvolume {:?}",
                    claim_volume_name(&pvc)
                ));
            }
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(format!("persistentvolumeclaim {pvc_name:?} is being deleted"));
            }
            if ephemeral {
                volume_is_for_pod(pod, &pvc)?;
            }
        }
        Ok(has)
    }
}

fn queue_if(b: bool) -> QueueingHint {
    if b {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    }
}

fn is_schedulable_after_csi_node_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    if old.is_none() {
        return Ok(QueueingHint::Queue);
    }
    let (old, new) = typed_pair::<CSINode>(old, new, "*v1.CSINode")?;
    let (Some(old), Some(new)) = (old, new) else { return Ok(QueueingHint::Queue) };
    Ok(queue_if(
        annotation(&old.metadata, MIGRATED_PLUGINS_ANNOTATION)
            != annotation(&new.metadata, MIGRATED_PLUGINS_ANNOTATION),
    ))
}

fn is_schedulable_after_pvc_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, pvc) = typed_pair::<PersistentVolumeClaim>(old, new, "*v1.PersistentVolumeClaim")?;
    let Some(pvc) = pvc else { return Ok(QueueingHint::Queue) };
    if namespace_of(&pod.metadata) != namespace_of(&pvc.metadata) {
        return Ok(QueueingHint::QueueSkip);
    }
    let name = name_of(&pvc.metadata);
    Ok(queue_if(pod_volumes(pod).iter().any(|v| volume_claim(pod, v).is_some_and(|(c, _)| c == name))))
}

fn is_schedulable_after_storage_class_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (old, new) = typed_pair::<StorageClass>(old, new, "*v1.StorageClass")?;
    let (Some(old), Some(new)) = (old, new) else { return Ok(QueueingHint::Queue) };
    let topo = |sc: &StorageClass| sc.allowed_topologies.clone().unwrap_or_default();
    Ok(queue_if(topo(&old) != topo(&new)))
}

fn is_schedulable_after_csi_storage_capacity_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (old, new) = typed_pair::<CSIStorageCapacity>(old, new, "*v1.CSIStorageCapacity")?;
    let (Some(old), Some(new)) = (old, new) else { return Ok(QueueingHint::Queue) };
    let (old_limit, new_limit) = (binder::capacity_volume_limit(&old), binder::capacity_volume_limit(&new));
    Ok(queue_if(new_limit.is_some_and(|n| old_limit.is_none_or(|o| n > o))))
}

fn is_schedulable_after_csi_driver_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (old, new) = typed_pair::<CSIDriver>(old, new, "*v1.CSIDriver")?;
    let (Some(old), Some(new)) = (old, new) else { return Ok(QueueingHint::Queue) };
    let name = name_of(&new.metadata);
    let disabled = old.spec.storage_capacity == Some(true) && new.spec.storage_capacity != Some(true);
    Ok(queue_if(disabled && pod_volumes(pod).iter().any(|v| v.csi.as_ref().is_some_and(|c| c.driver == name))))
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &str {
        names::VOLUME_BINDING
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
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

    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }

    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            // a new class or new allowed topologies may make provisioning possible
            ClusterEventWithHint::with_hint(
                EventResource::StorageClass,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_storage_class_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_pvc_change,
            ),
            ClusterEventWithHint::new(EventResource::PersistentVolume, ActionType::ADD | ActionType::UPDATE),
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_LABEL),
            ClusterEventWithHint::with_hint(
                EventResource::CsiNode,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_csi_node_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CsiDriver,
                ActionType::UPDATE,
                is_schedulable_after_csi_driver_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CsiStorageCapacity,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_csi_storage_capacity_change,
            ),
        ])
    }
}

/// Feasibility depends on the pod's volumes other than ConfigMaps and Secrets.
impl ksched_framework::SignPlugin for VolumeBinding {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        sig.fragment(ksched_framework::batch::signature::VOLUMES, |w| {
            ksched_framework::batch::signature::volumes(&pod.pod, w)
        });
        ksched_framework::Status::success()
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match self.pod_has_pvcs(&pod.pod) {
            Err(e) => return (None, Status::unresolvable(e)),
            Ok(false) => {
                state.write(STATE_KEY, StateData::default());
                return (None, Status::skip());
            }
            Ok(true) => {}
        }
        let claims = match self.binder.pod_volume_claims(&pod.pod) {
            Ok(c) => c,
            Err(e) => return (None, Status::error(e)),
        };
        if !claims.unbound_immediate.is_empty() {
            return (None, Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE));
        }
        let data = StateData::default();
        data.lock().claims = Some(Arc::new(claims));
        state.write(STATE_KEY, data);
        (None, Status::success())
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        let Some(node) = node_info.node() else { return Status::error("node not found") };
        let data = match read_state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        let claims = data.lock().claims.clone().unwrap_or_default();
        let (pod_volumes, reasons) = match self.binder.find_pod_volumes(&pod.pod, &claims, node) {
            Ok(r) => r,
            Err(e) => return Status::error(e),
        };
        if !reasons.is_empty() {
            return Status::new(ksched_framework::Code::UnschedulableAndUnresolvable, reasons);
        }
        let mut inner = data.lock();
        inner.has_static_bindings |= !pod_volumes.static_bindings.is_empty();
        inner.pod_volumes_by_node.insert(node_info.name().to_string(), pod_volumes);
        Status::success()
    }
}

impl PreScorePlugin for VolumeBinding {
    fn pre_score(&self, state: &mut CycleState, _pod: &PodInfo, _nodes: &[&NodeInfo], _snapshot: &Snapshot) -> Status {
        if self.scorer.is_none() {
            return Status::skip();
        }
        let data = match read_state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        if data.lock().has_static_bindings || self.storage_capacity_scoring {
            return Status::success();
        }
        Status::skip()
    }
}

impl ScorePlugin for VolumeBinding {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(scorer) = &self.scorer else { return Ok(0) };
        let data = read_state(state)?;
        let inner = data.lock();
        let Some(pv) = inner.pod_volumes_by_node.get(node.name()) else { return Ok(0) };
        let mut resources = ClassResources::new();
        if !pv.static_bindings.is_empty() || !self.storage_capacity_scoring {
            for b in &pv.static_bindings {
                let (requested, capacity) = b.storage_resource();
                let e = resources.entry(b.storage_class_name().to_string()).or_default();
                e.0 += requested;
                e.1 += capacity;
            }
        } else {
            for p in &pv.dynamic_provisions {
                let Some(cap) = &p.node_capacity else { continue };
                let class = p.pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
                let e = resources.entry(class).or_default();
                e.1 = cap.capacity.as_ref().map(|q| ksched_framework::quantity::value(&q.0).unwrap_or(0)).unwrap_or(0);
                e.0 += helpers::claim_storage_request(&p.pvc).unwrap_or(0);
            }
        }
        Ok(scorer.score(&resources))
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let data = match read_state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        let mut inner = data.lock();
        let Inner { pod_volumes_by_node, all_bound, .. } = &mut *inner;
        match pod_volumes_by_node.get_mut(node) {
            Some(pv) => match self.binder.assume_pod_volumes(&pod.pod, node, pv) {
                Ok(b) => *all_bound = b,
                Err(e) => return Status::error(e),
            },
            None => *all_bound = true,
        }
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, node: &str) {
        let Ok(data) = read_state(state) else { return };
        let inner = data.lock();
        if let Some(pv) = inner.pod_volumes_by_node.get(node) {
            self.binder.revert_assumed_pod_volumes(pv);
        }
    }
}

fn no_pod_volume(node: &str) -> Status {
    Status::error(format!("no pod volume found for node {node:?}"))
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &PodInfo, node: &str) -> Status {
        let data = match read_state(state) {
            Ok(d) => d,
            Err(s) => return s,
        };
        let inner = data.lock();
        if inner.all_bound {
            return Status::skip();
        }
        if !inner.pod_volumes_by_node.contains_key(node) {
            return no_pod_volume(node);
        }
        Status::success()
    }

    fn pre_bind<'a>(&'a self, state: &'a CycleState, pod: &'a PodInfo, node: &'a str) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let data = match read_state(state) {
                Ok(d) => d,
                Err(s) => return s,
            };
            let pod_volumes = {
                let inner = data.lock();
                if inner.all_bound {
                    return Status::success();
                }
                match inner.pod_volumes_by_node.get(node) {
                    Some(pv) => pv.clone(),
                    None => return no_pod_volume(node),
                }
            };
            match self.binder.bind_pod_volumes(&pod.pod, node, &pod_volumes).await {
                Ok(()) => Status::success(),
                Err(e) => Status::error(e),
            }
        })
    }
}

#[cfg(test)]
mod tests;
