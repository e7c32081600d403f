//! VolumeZone (upstream `framework/plugins/volumezone`): a pod's bound PVs labelled with zones/regions restrict it to nodes in
//! those zones/regions.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use ksched_framework::listers::ClusterLister;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, PreFilterPlugin, PreFilterResult, QueueingHint, Snapshot, Status,
};

use crate::names;
use crate::volumebinding::helpers::{
    claim_class, claim_volume_name, labels_of, name_of, namespace_of, not_found, pod_volumes, typed_pair,
};

/// Filter reason when a node is outside a PV's zones/regions.
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeZone";

const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE_GA: &str = "topology.kubernetes.io/zone";
const REGION_GA: &str = "topology.kubernetes.io/region";

/// The labels that constrain volumes, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [ZONE_BETA, REGION_BETA, ZONE_GA, REGION_GA];

/// One topology label of a PV: the key and the set of allowed values.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PvTopology {
    pv_name: String,
    key: &'static str,
    values: BTreeSet<String>,
}

#[derive(Debug, Clone)]
struct StateData(Arc<Vec<PvTopology>>);

/// The VolumeZone plugin.
pub struct VolumeZone {
    lister: Arc<dyn ClusterLister>,
}

impl std::fmt::Debug for VolumeZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeZone").finish_non_exhaustive()
    }
}

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(VolumeZone { lister: handle.lister.clone() }))
}

/// The beta zone/region label's GA equivalent (other labels unchanged).
fn translate_to_ga_label(label: &str) -> &str {
    match label {
        REGION_BETA => REGION_GA,
        ZONE_BETA => ZONE_GA,
        other => other,
    }
}

/// Parses a `__`-separated zone list; an empty element makes the whole value invalid.
fn label_zones_to_set(value: &str) -> Option<BTreeSet<String>> {
    value
        .split("__")
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_string())
        })
        .collect()
}

/// The PV's topology labels (invalid values are ignored).
fn pv_topologies(pv: &PersistentVolume) -> Vec<PvTopology> {
    let labels = labels_of(&pv.metadata);
    TOPOLOGY_LABELS
        .iter()
        .filter_map(|key| {
            let values = label_zones_to_set(labels.get(*key)?)?;
            Some(PvTopology { pv_name: name_of(&pv.metadata).to_string(), key, values })
        })
        .collect()
}

fn claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod_volumes(pod).iter().filter_map(|v| v.persistent_volume_claim.as_ref()).map(|c| c.claim_name.as_str())
}

impl VolumeZone {
    fn pv_topologies_of_pod(&self, pod: &Pod) -> Result<Vec<PvTopology>, Status> {
        let ns = namespace_of(&pod.metadata);
        let mut out = Vec::new();
        for claim in claim_names(pod) {
            if claim.is_empty() {
                return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
            }
            let pvc = self
                .lister
                .persistent_volume_claim(ns, claim)
                .ok_or_else(|| Status::unresolvable(not_found("persistentvolumeclaim", claim)))?;
            let pv_name = claim_volume_name(&pvc);
            if pv_name.is_empty() {
                let class_name = claim_class(&pvc);
                if class_name.is_empty() {
                    return Err(Status::unresolvable("PersistentVolumeClaim had no pv name and storageClass name"));
                }
                let class = self
                    .lister
                    .storage_class(class_name)
                    .ok_or_else(|| Status::unresolvable(not_found("storageclass.storage.k8s.io", class_name)))?;
                match class.volume_binding_mode.as_deref() {
                    None => {
                        return Err(Status::unresolvable(format!(
                            "VolumeBindingMode not set for StorageClass {class_name:?}"
                        )))
                    }
                    // the volume will be provisioned where the pod lands
                    Some("WaitForFirstConsumer") => continue,
                    Some(_) => return Err(Status::unresolvable("PersistentVolume had no name")),
                }
            }
            let pv = self
                .lister
                .persistent_volume(pv_name)
                .ok_or_else(|| Status::unresolvable(not_found("persistentvolume", pv_name)))?;
            out.extend(pv_topologies(&pv));
        }
        Ok(out)
    }
}

fn is_schedulable_after_pvc_change(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, pvc) = typed_pair::<PersistentVolumeClaim>(old, new, "*v1.PersistentVolumeClaim")
        .map_err(|e| format!("unexpected objects in isSchedulableAfterPersistentVolumeClaimChange: {e}"))?;
    let requested = pvc.is_some_and(|pvc| {
        namespace_of(&pvc.metadata) == namespace_of(&pod.metadata)
            && claim_names(pod).any(|c| c == name_of(&pvc.metadata))
    });
    Ok(if requested { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

fn is_schedulable_after_storage_class_added(
    _pod: &Pod,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, sc) = typed_pair::<StorageClass>(None, new, "*v1.StorageClass")
        .map_err(|e| format!("unexpected objects in isSchedulableAfterStorageClassAdded: {e}"))?;
    let Some(sc) = sc else { return Ok(QueueingHint::Queue) };
    Ok(if sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
        QueueingHint::Queue
    } else {
        QueueingHint::QueueSkip
    })
}

fn is_schedulable_after_pv_change(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (old, new) = typed_pair::<PersistentVolume>(old, new, "*v1.PersistentVolume")
        .map_err(|e| format!("unexpected objects in isSchedulableAfterPersistentVolumeChange: {e}"))?;
    let (Some(old), Some(new)) = (old, new) else { return Ok(QueueingHint::Queue) };
    Ok(if pv_topologies(&old) != pv_topologies(&new) { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

impl Plugin for VolumeZone {
    fn name(&self) -> &str {
        names::VOLUME_ZONE
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

    fn events_to_register(&self) -> Option<Vec<ClusterEventWithHint>> {
        Some(vec![
            ClusterEventWithHint::with_hint(
                EventResource::StorageClass,
                ActionType::ADD,
                is_schedulable_after_storage_class_added,
            ),
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_LABEL),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_pvc_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolume,
                ActionType::ADD | ActionType::UPDATE,
                is_schedulable_after_pv_change,
            ),
        ])
    }
}

/// Feasibility depends on the pod's volumes other than ConfigMaps and Secrets.
impl ksched_framework::SignPlugin for VolumeZone {
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

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        match self.pv_topologies_of_pod(&pod.pod) {
            Err(s) => (None, s),
            Ok(t) if t.is_empty() => (None, Status::skip()),
            Ok(t) => {
                state.write(PRE_FILTER_STATE_KEY, StateData(Arc::new(t)));
                (None, Status::success())
            }
        }
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        if pod_volumes(&pod.pod).is_empty() {
            return Status::success();
        }
        let computed;
        let topologies: &[PvTopology] = match state.read::<StateData>(PRE_FILTER_STATE_KEY) {
            Ok(s) => &s.0,
            Err(_) => match self.pv_topologies_of_pod(&pod.pod) {
                Ok(t) => {
                    computed = t;
                    &computed
                }
                Err(s) => return s,
            },
        };
        let labels = node_info.labels();
        if !TOPOLOGY_LABELS.iter().any(|l| labels.contains_key(l)) {
            return Status::success();
        }
        for t in topologies {
            let value = labels.get(t.key).or_else(|| labels.get(translate_to_ga_label(t.key)));
            if !value.is_some_and(|v| t.values.contains(v)) {
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
