//! NodeVolumeLimits (upstream's CSILimits, `framework/plugins/nodevolumelimits`): a node may not attach more volumes of a CSI
//! driver than its CSINode allows. In-tree volumes count under the CSI driver they migrate to.

pub mod translate;

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Volume};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use ksched_framework::listers::ClusterLister;
use ksched_framework::pod::Pod;
use ksched_framework::{
    ActionType, ClusterEventWithHint, CycleState, EventObject, EventResource, FilterPlugin, Handle, NodeInfo, Plugin,
    PodInfo, PreFilterPlugin, PreFilterResult, QueueingHint, Snapshot, Status,
};

use crate::helper::as_pods;
use crate::names;
use crate::volumebinding::helpers::{
    claim_class, claim_volume_name, name_of, namespace_of, not_found, pod_volumes, typed, typed_pair, volume_claim,
    volume_is_for_pod,
};
use translate::InTreePlugin;

/// Filter reason when the node's limit for a driver would be exceeded.
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Default of the VolumeLimitScaling feature gate (alpha in 1.36).
pub const VOLUME_LIMIT_SCALING_DEFAULT: bool = false;

const STATE_KEY: &str = "PreFilterNodeVolumeLimits";

/// Volumes attached to each node through VolumeAttachments: node -> [(unique name, driver)].
/// Computed once per cycle (upstream reads an index per node).
#[derive(Clone, Default)]
struct AttachmentsByNode(Arc<HashMap<String, Vec<(String, String)>>>);

/// The pod's own attachable volumes (unique name -> driver), or why they cannot be counted.
type NewVolumes = Result<HashMap<String, String>, AttachError>;

/// What PreFilter computes once per cycle instead of once per node.
#[derive(Clone)]
struct PreFilterState {
    attachments: AttachmentsByNode,
    /// The pod's volumes on nodes without and with a CSINode, the only node property they
    /// depend on.
    new_volumes: Arc<[NewVolumes; 2]>,
}

/// The NodeVolumeLimits plugin.
pub struct NodeVolumeLimits {
    lister: Arc<dyn ClusterLister>,
    /// Prefix of the made-up handles of not yet provisioned claims (random per instance).
    random_volume_id_prefix: String,
    volume_limit_scaling: bool,
}

impl std::fmt::Debug for NodeVolumeLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeVolumeLimits").finish_non_exhaustive()
    }
}

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(NodeVolumeLimits::new(handle.lister.clone())))
}

fn unique_name(driver: &str, handle: &str) -> String {
    format!("{driver}/{handle}")
}

fn driver_limits(csi_node: Option<&CSINode>) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    for d in csi_node.map(|c| c.spec.drivers.as_slice()).unwrap_or_default() {
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
            out.insert(d.name.clone(), i64::from(count));
        }
    }
    out
}

/// True when the in-tree plugin's volumes count as migrated on the node: the node only needs
/// a CSINode (its contents do not matter, as upstream's `isCSIMigrationOn`).
fn migration_on(has_csi_node: bool, plugin: InTreePlugin) -> bool {
    has_csi_node && plugin.migration_on()
}

fn is_inline_migratable(vol: &Volume) -> bool {
    InTreePlugin::of_inline(vol).is_some()
}

/// Errors of [`NodeVolumeLimits::attachable_volumes`]: a missing claim of the pod being
/// scheduled is unresolvable, everything else is an internal error.
#[derive(Clone)]
enum AttachError {
    NotFound(String),
    Other(String),
}

impl NodeVolumeLimits {
    /// The plugin over a lister.
    pub fn new(lister: Arc<dyn ClusterLister>) -> Self {
        let prefix = format!("{:016x}{:016x}", random_u64(), random_u64());
        NodeVolumeLimits { lister, random_volume_id_prefix: prefix, volume_limit_scaling: VOLUME_LIMIT_SCALING_DEFAULT }
    }

    /// Collects (unique name -> driver) of the pod's attachable volumes into `out`. For an
    /// existing pod, claims that cannot be looked up are skipped.
    fn attachable_volumes(
        &self,
        pod: &Pod,
        has_csi_node: bool,
        new_pod: bool,
        out: &mut HashMap<String, String>,
    ) -> Result<(), AttachError> {
        let ns = namespace_of(&pod.metadata);
        for vol in pod_volumes(pod) {
            let Some((claim, ephemeral)) = volume_claim(pod, vol) else {
                self.inline_volume(vol, has_csi_node, out).map_err(AttachError::Other)?;
                continue;
            };
            if claim.is_empty() {
                return Err(AttachError::Other("PersistentVolumeClaim had no name".into()));
            }
            let Some(pvc) = self.lister.persistent_volume_claim(ns, &claim) else {
                if new_pod {
                    return Err(AttachError::NotFound(format!(
                        "looking up PVC {ns}/{claim}: {}",
                        not_found("persistentvolumeclaim", &claim)
                    )));
                }
                continue;
            };
            if ephemeral {
                volume_is_for_pod(pod, &pvc).map_err(AttachError::Other)?;
            }
            if let Some((driver, handle)) = self.csi_driver_info(has_csi_node, &pvc) {
                if !driver.is_empty() && !handle.is_empty() {
                    out.insert(unique_name(&driver, &handle), driver);
                }
            }
        }
        Ok(())
    }

    fn inline_volume(&self, vol: &Volume, has_csi_node: bool, out: &mut HashMap<String, String>) -> Result<(), String> {
        let Some(plugin) = InTreePlugin::of_inline(vol) else { return Ok(()) };
        if !migration_on(has_csi_node, plugin) {
            return Ok(());
        }
        let translated = translate::translate_inline(vol)
            .map_err(|e| format!("converting volume({}) from inline to csi: {e}", vol.name))?;
        if let Some(csi) = translated {
            let driver = plugin.csi_driver().to_string();
            out.insert(unique_name(&driver, &csi.handle), driver);
        }
        Ok(())
    }

    /// The (driver, handle) of a claim: from its bound PV (translated when in-tree), else from its
    /// storage class with a made-up handle.
    fn csi_driver_info(&self, has_csi_node: bool, pvc: &PersistentVolumeClaim) -> Option<(String, String)> {
        let pv_name = claim_volume_name(pvc);
        if pv_name.is_empty() {
            return self.csi_driver_info_from_class(has_csi_node, pvc);
        }
        let Some(pv) = self.lister.persistent_volume(pv_name) else {
            return self.csi_driver_info_from_class(has_csi_node, pvc);
        };
        if let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) {
            return Some((csi.driver.clone(), csi.volume_handle.clone()));
        }
        let plugin = InTreePlugin::of_pv(&pv)?;
        if !migration_on(has_csi_node, plugin) {
            return None;
        }
        let (csi, _) = translate::translate_pv(&pv).ok()?;
        Some((csi.driver, csi.handle))
    }

    fn csi_driver_info_from_class(&self, has_csi_node: bool, pvc: &PersistentVolumeClaim) -> Option<(String, String)> {
        let class_name = claim_class(pvc);
        if class_name.is_empty() {
            return None;
        }
        let class = self.lister.storage_class(class_name)?;
        let handle =
            format!("{}-{}/{}", self.random_volume_id_prefix, namespace_of(&pvc.metadata), name_of(&pvc.metadata));
        match InTreePlugin::by_in_tree_name(&class.provisioner) {
            Some(plugin) if !migration_on(has_csi_node, plugin) => None,
            Some(plugin) => Some((plugin.csi_driver().to_string(), handle)),
            None => Some((class.provisioner.clone(), handle)),
        }
    }

    fn attachments_by_node(&self) -> AttachmentsByNode {
        let mut out: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for va in self.lister.volume_attachments() {
            if let Some(entry) = self.attachment(&va) {
                out.entry(va.spec.node_name.clone()).or_default().push(entry);
            }
        }
        AttachmentsByNode(Arc::new(out))
    }

    /// (unique name, driver) of a VolumeAttachment of a CSI PV.
    fn attachment(&self, va: &VolumeAttachment) -> Option<(String, String)> {
        if va.spec.attacher.is_empty() {
            return None;
        }
        let pv = self.lister.persistent_volume(va.spec.source.persistent_volume_name.as_deref()?)?;
        let csi = pv.spec.as_ref()?.csi.as_ref()?;
        Some((unique_name(&va.spec.attacher, &csi.volume_handle), va.spec.attacher.clone()))
    }

    /// True when the driver is on the node or does not opt in to the check (VolumeLimitScaling).
    fn driver_installed(&self, driver: &str, csi_node: Option<&CSINode>) -> bool {
        let Some(d) = self.lister.csi_driver(driver) else { return true };
        if d.spec.prevent_pod_scheduling_if_missing != Some(true) {
            return true;
        }
        csi_node.is_some_and(|c| c.spec.drivers.iter().any(|x| x.name == driver))
    }

    fn is_schedulable_after_pod_deleted(
        &self,
        _pod: &Pod,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Result<QueueingHint, String> {
        let (deleted, _) = as_pods(old, new)?;
        let Some(deleted) = deleted else { return Ok(QueueingHint::Queue) };
        let vols = pod_volumes(deleted);
        if vols.is_empty() {
            return Ok(QueueingHint::QueueSkip);
        }
        let node = deleted.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
        let nominated = deleted.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).unwrap_or_default();
        if node.is_empty() && nominated.is_empty() {
            return Ok(QueueingHint::QueueSkip);
        }
        let relevant = vols
            .iter()
            .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some() || is_inline_migratable(v));
        Ok(if relevant { QueueingHint::Queue } else { QueueingHint::QueueSkip })
    }
}

/// A random number from the standard library's per-process hash keys (no RNG dependency).
fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    h.finish()
}

fn is_schedulable_after_pvc_added(
    pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (_, added) = typed_pair::<PersistentVolumeClaim>(old, new, "*v1.PersistentVolumeClaim")?;
    let Some(added) = added else { return Ok(QueueingHint::Queue) };
    if namespace_of(&added.metadata) != namespace_of(&pod.metadata) {
        return Ok(QueueingHint::QueueSkip);
    }
    let name = name_of(&added.metadata);
    let refers = pod_volumes(pod).iter().any(|v| volume_claim(pod, v).is_some_and(|(c, _)| c == name));
    Ok(if refers { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

fn is_schedulable_after_volume_attachment_deleted(
    pod: &Pod,
    old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let Some(deleted) = typed::<VolumeAttachment>(old, "*v1.VolumeAttachment")? else {
        return Ok(QueueingHint::Queue);
    };
    for vol in pod_volumes(pod) {
        if vol.persistent_volume_claim.is_some() {
            return Ok(QueueingHint::Queue);
        }
        if !is_inline_migratable(vol) {
            continue;
        }
        let translated = translate::translate_inline(vol)
            .map_err(|e| format!("converting volume({}) from inline to csi: {e}", vol.name))?;
        if translated.is_some_and(|csi| csi.driver == deleted.spec.attacher) {
            return Ok(QueueingHint::Queue);
        }
    }
    Ok(QueueingHint::QueueSkip)
}

fn is_schedulable_after_csi_node_updated(
    _pod: &Pod,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let (old, new) = typed_pair::<CSINode>(old, new, "*v1.CSINode")?;
    let (Some(old), Some(new)) = (old, new) else { return Ok(QueueingHint::Queue) };
    let count =
        |d: &k8s_openapi::api::storage::v1::CSINodeDriver| d.allocatable.as_ref().and_then(|a| a.count).unwrap_or(0);
    let old_limits: HashMap<&str, i32> = old.spec.drivers.iter().map(|d| (d.name.as_str(), count(d))).collect();
    let increased = new.spec.drivers.iter().any(|d| count(d) > old_limits.get(d.name.as_str()).copied().unwrap_or(0));
    Ok(if increased { QueueingHint::Queue } else { QueueingHint::QueueSkip })
}

impl Plugin for NodeVolumeLimits {
    fn name(&self) -> &str {
        names::NODE_VOLUME_LIMITS
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
        let me = NodeVolumeLimits {
            lister: self.lister.clone(),
            random_volume_id_prefix: String::new(),
            volume_limit_scaling: self.volume_limit_scaling,
        };
        Some(vec![
            ClusterEventWithHint::new(EventResource::CsiNode, ActionType::ADD),
            ClusterEventWithHint::with_hint(
                EventResource::CsiNode,
                ActionType::UPDATE,
                is_schedulable_after_csi_node_updated,
            ),
            ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::DELETE, move |pod, old, new| {
                me.is_schedulable_after_pod_deleted(pod, old, new)
            }),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD,
                is_schedulable_after_pvc_added,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::VolumeAttachment,
                ActionType::DELETE,
                is_schedulable_after_volume_attachment_deleted,
            ),
        ])
    }
}

/// Feasibility depends on the pod's volumes other than ConfigMaps and Secrets.
impl ksched_framework::SignPlugin for NodeVolumeLimits {
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

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let relevant = pod_volumes(&pod.pod)
            .iter()
            .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some() || is_inline_migratable(v));
        if !relevant {
            return (None, Status::skip());
        }
        let new_volumes = |has_csi_node| {
            let mut out = HashMap::new();
            self.attachable_volumes(&pod.pod, has_csi_node, true, &mut out).map(|()| out)
        };
        state.write(
            STATE_KEY,
            PreFilterState {
                attachments: self.attachments_by_node(),
                new_volumes: Arc::new([new_volumes(false), new_volumes(true)]),
            },
        );
        (None, Status::success())
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node_info: &NodeInfo) -> Status {
        if pod_volumes(&pod.pod).is_empty() {
            return Status::success();
        }
        let node_name = node_info.name();
        let csi_node = self.lister.csi_node(node_name);
        let csi_node = csi_node.as_deref();
        let pre = state.read::<PreFilterState>(STATE_KEY).ok();
        let computed;
        let new_volumes = match pre {
            Some(pre) => &pre.new_volumes[usize::from(csi_node.is_some())],
            None => {
                let mut out = HashMap::new();
                computed = self.attachable_volumes(&pod.pod, csi_node.is_some(), true, &mut out).map(|()| out);
                &computed
            }
        };
        let new_volumes = match new_volumes {
            Ok(v) => v,
            Err(AttachError::NotFound(e)) => return Status::unresolvable(e.as_str()),
            Err(AttachError::Other(e)) => return Status::error(e.as_str()),
        };
        if new_volumes.is_empty() {
            return Status::success();
        }
        if self.volume_limit_scaling {
            for driver in new_volumes.values() {
                if !self.driver_installed(driver, csi_node) {
                    return Status::unschedulable(format!("{driver} CSI driver is not installed on the node"));
                }
            }
        }
        let limits = driver_limits(csi_node);
        if limits.is_empty() {
            return Status::success();
        }
        let mut attached = HashMap::new();
        for existing in &node_info.pods {
            if let Err(AttachError::NotFound(e) | AttachError::Other(e)) =
                self.attachable_volumes(&existing.pod, csi_node.is_some(), false, &mut attached)
            {
                return Status::error(e);
            }
        }
        let mut attached_count: HashMap<&str, i64> = HashMap::new();
        for driver in attached.values() {
            *attached_count.entry(driver.as_str()).or_default() += 1;
        }
        let by_node = match pre {
            Some(pre) => pre.attachments.clone(),
            None => self.attachments_by_node(),
        };
        // A unique name attached through several VolumeAttachments counts once, as upstream's map does.
        let mut from_attachments: HashMap<&str, &str> = HashMap::new();
        for (unique, driver) in by_node.0.get(node_name).map(Vec::as_slice).unwrap_or_default() {
            from_attachments.insert(unique, driver);
        }
        for (unique, driver) in from_attachments {
            if !attached.contains_key(unique) {
                *attached_count.entry(driver).or_default() += 1;
            }
        }
        let mut new_count: HashMap<&str, i64> = HashMap::new();
        // a volume the node's pods already use is not attached again
        for (_, driver) in new_volumes.iter().filter(|(unique, _)| !attached.contains_key(*unique)) {
            *new_count.entry(driver.as_str()).or_default() += 1;
        }
        for (driver, count) in new_count {
            if let Some(limit) = limits.get(driver) {
                if attached_count.get(driver).copied().unwrap_or(0) + count > *limit {
                    return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
                }
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
