//! VolumeRestrictions (upstream `framework/plugins/volumerestrictions`): inline disks that cannot be mounted by two pods on one node (GCE
//! PD, AWS EBS, iSCSI, RBD) and ReadWriteOncePod claims already used by another pod.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Volume};
use ksched_framework::listers::ClusterLister;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, PreFilterExtensions, PreFilterPlugin, PreFilterResult, QueueingHint, Snapshot, Status,
};

use crate::helper::as_pods;
use crate::names;
use crate::volumebinding::helpers::{claim_access_modes, name_of, namespace_of, not_found, pod_volumes, typed_pair};

/// Filter reason for a conflicting inline disk.
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Filter reason for a ReadWriteOncePod claim already in use.
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

const PRE_FILTER_STATE_KEY: &str = "PreFilterVolumeRestrictions";

/// The pod's ReadWriteOncePod claims and how many scheduled pods reference them.
#[derive(Debug, Clone)]
struct PreFilterState {
    read_write_once_pod_pvcs: Arc<HashSet<String>>,
    conflicting_pvc_ref_count: i64,
}

impl PreFilterState {
    fn conflicts_of(&self, pod: &Pod) -> i64 {
        pod_volumes(pod)
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .filter(|c| self.read_write_once_pod_pvcs.contains(&c.claim_name))
            .count() as i64
    }
}

/// The VolumeRestrictions plugin.
pub struct VolumeRestrictions {
    lister: Arc<dyn ClusterLister>,
}

impl std::fmt::Debug for VolumeRestrictions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeRestrictions").finish_non_exhaustive()
    }
}

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(VolumeRestrictions { lister: handle.lister.clone() }))
}

fn have_overlap(a: &[String], b: &[String]) -> bool {
    let (small, large) = if a.len() > b.len() { (b, a) } else { (a, b) };
    let set: HashSet<&String> = small.iter().collect();
    large.iter().any(|v| set.contains(v))
}

/// True when `volume` cannot be mounted next to the volumes of `existing`.
fn is_volume_conflict(volume: &Volume, existing: &Pod) -> bool {
    pod_volumes(existing).iter().any(|ev| {
        if let (Some(d), Some(e)) = (&volume.gce_persistent_disk, &ev.gce_persistent_disk) {
            // mounting one PD many times is fine only when every mount is read-only
            if d.pd_name == e.pd_name && !(d.read_only == Some(true) && e.read_only == Some(true)) {
                return true;
            }
        }
        if let (Some(d), Some(e)) = (&volume.aws_elastic_block_store, &ev.aws_elastic_block_store) {
            if d.volume_id == e.volume_id {
                return true;
            }
        }
        if let (Some(d), Some(e)) = (&volume.iscsi, &ev.iscsi) {
            if d.iqn == e.iqn && !(d.read_only == Some(true) && e.read_only == Some(true)) {
                return true;
            }
        }
        if let (Some(d), Some(e)) = (&volume.rbd, &ev.rbd) {
            if have_overlap(&d.monitors, &e.monitors)
                && d.pool == e.pool
                && d.image == e.image
                && !(d.read_only == Some(true) && e.read_only == Some(true))
            {
                return true;
            }
        }
        false
    })
}

fn needs_restrictions_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some() || v.aws_elastic_block_store.is_some() || v.rbd.is_some() || v.iscsi.is_some()
}

/// True when none of the pod's restricted inline volumes conflicts with a pod in `pods`.
fn satisfy_volume_conflicts<'a>(pod: &Pod, pods: impl Iterator<Item = &'a Pod> + Clone) -> bool {
    pod_volumes(pod)
        .iter()
        .filter(|v| needs_restrictions_check(v))
        .all(|v| !pods.clone().any(|ev| is_volume_conflict(v, ev)))
}

impl VolumeRestrictions {
    /// Names of the pod's claims with the ReadWriteOncePod access mode; a missing claim fails.
    fn read_write_once_pod_pvcs(&self, pod: &Pod) -> Result<HashSet<String>, String> {
        let ns = namespace_of(&pod.metadata);
        let mut out = HashSet::new();
        for c in pod_volumes(pod).iter().filter_map(|v| v.persistent_volume_claim.as_ref()) {
            let pvc = self
                .lister
                .persistent_volume_claim(ns, &c.claim_name)
                .ok_or_else(|| not_found("persistentvolumeclaim", &c.claim_name))?;
            if claim_access_modes(&pvc).iter().any(|m| m == "ReadWriteOncePod") {
                out.insert(name_of(&pvc.metadata).to_string());
            }
        }
        Ok(out)
    }
}

fn is_schedulable_after_pvc_added(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, added) = typed_pair::<PersistentVolumeClaim>(old, new, "*v1.PersistentVolumeClaim")
        .map_err(|e| format!("unexpected objects in isSchedulableAfterPersistentVolumeClaimChange: {e}"))?;
    let Some(added) = added else { return Ok(QueueingHint::Queue) };
    if namespace_of(&added.metadata) != namespace_of(&pod.metadata) {
        return Ok(QueueingHint::QueueSkip);
    }
    let name = name_of(&added.metadata);
    let refers =
        pod_volumes(pod).iter().filter_map(|v| v.persistent_volume_claim.as_ref()).any(|c| c.claim_name == name);
    Ok(if refers { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

fn is_schedulable_after_pod_deleted(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (deleted, _) =
        as_pods(old, new).map_err(|e| format!("unexpected objects in isSchedulableAfterPodDeleted: {e}"))?;
    let Some(deleted) = deleted else { return Ok(QueueingHint::Queue) };
    if namespace_of(&deleted.metadata) != namespace_of(&pod.metadata) {
        return Ok(QueueingHint::QueueSkip);
    }
    if !satisfy_volume_conflicts(pod, std::iter::once(deleted)) {
        return Ok(QueueingHint::Queue);
    }
    // A pod sharing a claim went away: the claim may be ReadWriteOncePod (not fetched, as upstream).
    let claims: HashSet<&str> = pod_volumes(pod)
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
        .collect();
    let shares = pod_volumes(deleted)
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .any(|c| claims.contains(c.claim_name.as_str()));
    Ok(if shares { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &str {
        names::VOLUME_RESTRICTIONS
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
            ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::DELETE, is_schedulable_after_pod_deleted),
            // every new node may have room: no hint
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD,
                is_schedulable_after_pvc_added,
            ),
        ])
    }
}

/// Feasibility depends on the pod's volumes other than ConfigMaps and Secrets.
impl ksched_framework::SignPlugin for VolumeRestrictions {
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

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let needs_check = pod_volumes(&pod.pod).iter().any(needs_restrictions_check);
        let pvcs = match self.read_write_once_pod_pvcs(&pod.pod) {
            Ok(p) => p,
            Err(e) => return (None, Status::unresolvable(e)),
        };
        let ns = namespace_of(&pod.pod.metadata);
        // at most one pod can use a ReadWriteOncePod claim, so each used claim counts once
        let conflicting = pvcs.iter().filter(|c| snapshot.is_pvc_used_by_pods(&format!("{ns}/{c}"))).count() as i64;
        if !needs_check && conflicting == 0 {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState { read_write_once_pod_pvcs: Arc::new(pvcs), conflicting_pvc_ref_count: conflicting },
        );
        (None, Status::success())
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

fn state_error() -> Status {
    Status::error(format!("cannot read {PRE_FILTER_STATE_KEY:?} from cycleState"))
}

impl PreFilterExtensions for VolumeRestrictions {
    fn add_pod(&self, state: &mut CycleState, _pod: &PodInfo, pod_to_add: &Arc<PodInfo>, _node: &NodeInfo) -> Status {
        let Ok(s) = state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) else { return state_error() };
        s.conflicting_pvc_ref_count += s.conflicts_of(&pod_to_add.pod);
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        let Ok(s) = state.read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY) else { return state_error() };
        s.conflicting_pvc_ref_count -= s.conflicts_of(&pod_to_remove.pod);
        Status::success()
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !satisfy_volume_conflicts(&pod.pod, node.pods.iter().map(|p| p.pod.as_ref())) {
            return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
        }
        let Ok(s) = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) else { return state_error() };
        if s.conflicting_pvc_ref_count > 0 {
            return Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
