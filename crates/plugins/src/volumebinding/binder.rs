//! The volume binder (upstream's `volumeBinder`): classifies a pod's claims, finds PVs to bind
//! or checks provisioning per node, assumes the decisions at Reserve and writes them at PreBind.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, CSIStorageCapacity, StorageClass};
use ksched_framework::client::ApiClient;
use ksched_framework::handle::SchedulerView;
use ksched_framework::labels::PackedLabels;
use ksched_framework::listers::ClusterLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;

use super::assume_cache::{pvc_key, AssumeCache};
use super::helpers::{
    annotation, check_node_affinity, claim_access_modes, claim_class, claim_storage_request, claim_volume_name,
    compare_resource_version, has_annotation, label_selector_matches, labels_of, match_topology_selector_terms,
    name_of, namespace_of, pod_volumes, pv_capacity, pv_class, volume_claim, volume_is_for_pod, ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, MIGRATED_PLUGINS_ANNOTATION, NOT_SUPPORTED_PROVISIONER,
};
use crate::nodevolumelimits::translate::{translate_pv, InTreePlugin};

/// Filter reason: no PV matches an unbound delay-binding claim and it cannot be provisioned.
pub const ERR_REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// Filter reason: a bound PV's node affinity excludes the node.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Filter reason: no CSIStorageCapacity of the node is large enough.
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// Filter reason: a bound claim's PV does not exist.
pub const ERR_REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// A PV chosen for a claim.
#[derive(Debug, Clone)]
pub struct BindingInfo {
    /// The claim.
    pub pvc: Arc<PersistentVolumeClaim>,
    /// The PV (after Reserve: the version with the claimRef set).
    pub pv: Arc<PersistentVolume>,
}

impl BindingInfo {
    /// Storage class of the PV.
    pub fn storage_class_name(&self) -> &str {
        self.pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default()
    }

    /// (requested, capacity) in bytes.
    pub fn storage_resource(&self) -> (i64, i64) {
        (claim_storage_request(&self.pvc).unwrap_or(0), pv_capacity(&self.pv))
    }
}

/// A claim to be provisioned on the node, with the capacity object that allowed it.
#[derive(Debug, Clone)]
pub struct DynamicProvision {
    /// The claim (after Reserve: the version with the selected-node annotation).
    pub pvc: Arc<PersistentVolumeClaim>,
    /// The CSIStorageCapacity that had room, when capacity was checked.
    pub node_capacity: Option<Arc<CSIStorageCapacity>>,
}

/// The binding decisions for one node.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// Claims bound to existing PVs.
    pub static_bindings: Vec<BindingInfo>,
    /// Claims to provision.
    pub dynamic_provisions: Vec<DynamicProvision>,
    /// The node as filtered (its labels are checked again while waiting for binding).
    pub node: Option<Arc<Node>>,
}

/// A pod's claims by state.
#[derive(Debug, Clone, Default)]
pub struct PodVolumeClaims {
    /// Fully bound claims.
    pub bound: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims of WaitForFirstConsumer classes.
    pub unbound_delay_binding: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound claims the PV controller should bind on its own.
    pub unbound_immediate: Vec<Arc<PersistentVolumeClaim>>,
    /// Candidate PVs per storage class of the delay-binding claims.
    pub unbound_volumes_delay_binding: HashMap<String, Vec<Arc<PersistentVolume>>>,
}

/// (all claims matched, chosen bindings, claims left unmatched).
type MatchResult = (bool, Vec<BindingInfo>, Vec<Arc<PersistentVolumeClaim>>);

/// Per-node verdict flags, turned into reasons in upstream's order.
struct Verdict {
    bound_satisfied: bool,
    unbound_satisfied: bool,
    sufficient_storage: bool,
    bound_pvs_found: bool,
}

impl Verdict {
    fn reasons(&self) -> Vec<&'static str> {
        let mut r = Vec::new();
        if !self.bound_satisfied {
            r.push(ERR_REASON_NODE_CONFLICT);
        }
        if !self.unbound_satisfied {
            r.push(ERR_REASON_BIND_CONFLICT);
        }
        if !self.sufficient_storage {
            r.push(ERR_REASON_NOT_ENOUGH_SPACE);
        }
        if !self.bound_pvs_found {
            r.push(ERR_REASON_PV_NOT_EXIST);
        }
        r
    }
}

/// The binder.
pub struct Binder {
    pub(crate) lister: Arc<dyn ClusterLister>,
    pub(crate) cache: AssumeCache,
    pub(crate) client: Arc<dyn ApiClient>,
    pub(crate) scheduler: Arc<std::sync::OnceLock<Arc<dyn SchedulerView>>>,
    pub(crate) bind_timeout: Duration,
    pub(crate) poll_interval: Duration,
}

fn is_pvc_fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    !claim_volume_name(pvc).is_empty() && has_annotation(&pvc.metadata, ANN_BIND_COMPLETED)
}

fn node_labels(node: &Node) -> &PackedLabels {
    &node.metadata.labels
}

/// True when the PV is (or may be) bound to this claim: same name and namespace, and the same UID
/// when the claimRef has one.
fn is_volume_bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    if r.name.as_deref().unwrap_or_default() != name_of(&pvc.metadata)
        || r.namespace.as_deref().unwrap_or_default() != namespace_of(&pvc.metadata)
    {
        return false;
    }
    let uid = r.uid.as_deref().unwrap_or_default();
    uid.is_empty() || Some(uid) == pvc.metadata.uid.as_deref()
}

fn volume_mode(m: Option<&String>) -> &str {
    m.map(String::as_str).unwrap_or("Filesystem")
}

/// True when every access mode of the claim is offered by the PV.
fn check_access_modes(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let pv_modes: HashSet<&String> =
        pv.spec.as_ref().and_then(|s| s.access_modes.as_ref()).into_iter().flatten().collect();
    claim_access_modes(pvc).iter().all(|m| pv_modes.contains(m))
}

/// The smallest available PV matching the claim on the node (upstream's `FindMatchingVolume`
/// with delay binding and VolumeAttributesClass on).
pub fn find_matching_volume(
    pvc: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    node: Option<&Node>,
    excluded: &HashSet<String>,
    delay_binding: bool,
) -> Result<Option<Arc<PersistentVolume>>, String> {
    let spec = pvc.spec.clone().unwrap_or_default();
    let requested = claim_storage_request(pvc).unwrap_or(0);
    let requested_class = claim_class(pvc);
    let selector = match &spec.selector {
        None => None,
        Some(sel) => {
            // validate once; matching below cannot fail afterwards
            ksched_framework::labels::Selector::from_label_selector(Some(sel)).map_err(|e| {
                format!(
                    "error creating internal label selector for claim: {}/{}: {e}",
                    namespace_of(&pvc.metadata),
                    name_of(&pvc.metadata)
                )
            })?;
            Some(sel)
        }
    };
    let claim_vac = spec.volume_attributes_class_name.as_deref().unwrap_or_default();
    let mut smallest: Option<(&Arc<PersistentVolume>, i64)> = None;
    for pv in volumes {
        if excluded.contains(name_of(&pv.metadata)) {
            continue;
        }
        let pv_spec = pv.spec.as_ref();
        if pv_spec.and_then(|s| s.claim_ref.as_ref()).is_some() && !is_volume_bound_to_claim(pv, pvc) {
            continue;
        }
        let size = pv_capacity(pv);
        if size < requested {
            continue;
        }
        if volume_mode(spec.volume_mode.as_ref()) != volume_mode(pv_spec.and_then(|s| s.volume_mode.as_ref())) {
            continue;
        }
        if claim_vac != pv_spec.and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or_default() {
            continue;
        }
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity_ok = node.is_none_or(|n| check_node_affinity(pv, node_labels(n)).is_ok());
        if is_volume_bound_to_claim(pv, pvc) {
            // pre-bound by the user or a previous attempt: this PV or nothing
            return Ok(affinity_ok.then(|| pv.clone()));
        }
        if node.is_none() && delay_binding {
            continue;
        }
        if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available") {
            continue;
        }
        if selector.is_some_and(|sel| !label_selector_matches(Some(sel), labels_of(&pv.metadata))) {
            continue;
        }
        if pv_class(pv) != requested_class {
            continue;
        }
        if !affinity_ok {
            continue;
        }
        if node.is_some() && !check_access_modes(pvc, pv) {
            continue;
        }
        if smallest.is_none_or(|(_, s)| s > size) {
            smallest = Some((pv, size));
        }
    }
    Ok(smallest.map(|(pv, _)| pv.clone()))
}

/// The PV with its claimRef pointing at the claim (and bound-by-controller set); `true` when it
/// changed.
fn bind_volume_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> (PersistentVolume, bool) {
    let should_set_bound_by_controller = !is_volume_bound_to_claim(pv, pvc);
    let mut out = pv.clone();
    let mut dirty = false;
    let r = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let same = r.is_some_and(|r| {
        r.name.as_deref().unwrap_or_default() == name_of(&pvc.metadata)
            && r.namespace.as_deref().unwrap_or_default() == namespace_of(&pvc.metadata)
            && r.uid.as_deref().unwrap_or_default() == pvc.metadata.uid.as_deref().unwrap_or_default()
    });
    if !same {
        out.spec.get_or_insert_with(Default::default).claim_ref = Some(ObjectReference {
            kind: Some("PersistentVolumeClaim".into()),
            api_version: Some("v1".into()),
            name: pvc.metadata.name.clone(),
            namespace: Some(namespace_of(&pvc.metadata).to_string()),
            uid: pvc.metadata.uid.clone(),
            resource_version: pvc.metadata.resource_version.clone(),
            ..Default::default()
        });
        dirty = true;
    }
    if should_set_bound_by_controller && !has_annotation(&out.metadata, ANN_BOUND_BY_CONTROLLER) {
        out.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        dirty = true;
    }
    (out, dirty)
}

/// True when the node's CSINode lists the in-tree plugin as migrated.
fn plugin_migrated_on_node(plugin: InTreePlugin, csi_node: Option<&CSINode>) -> bool {
    csi_node
        .and_then(|c| annotation(&c.metadata, MIGRATED_PLUGINS_ANNOTATION))
        .is_some_and(|a| !a.is_empty() && a.split(',').any(|p| p == plugin.in_tree_name()))
}

/// The PV as the node sees it: translated to CSI when its in-tree plugin migrated there.
/// `csi_node` is only called for such in-tree PVs (most PVs never need the node's CSINode).
fn try_translate_pv_to_csi(
    pv: Arc<PersistentVolume>,
    csi_node: impl FnOnce() -> Option<Arc<CSINode>>,
) -> Result<Arc<PersistentVolume>, String> {
    let Some(plugin) = InTreePlugin::of_pv(&pv) else { return Ok(pv) };
    if !plugin.migration_on() || !plugin_migrated_on_node(plugin, csi_node().as_deref()) {
        return Ok(pv);
    }
    translate_pv(&pv).map(|(_, out)| Arc::new(out)).map_err(|e| format!("could not translate pv: {e}"))
}

fn volume_limit(c: &CSIStorageCapacity) -> Option<i64> {
    c.maximum_volume_size.as_ref().or(c.capacity.as_ref()).map(|q| ksched_framework::quantity::value(&q.0).unwrap_or(0))
}

/// The volume limit of a capacity object in bytes (maximumVolumeSize, else capacity).
pub fn capacity_volume_limit(c: &CSIStorageCapacity) -> Option<i64> {
    volume_limit(c)
}

impl Binder {
    /// Whether the pod's claim of a volume is fully bound; `Ok((true, None))` for non-claim
    /// volumes.
    fn is_volume_bound(
        &self,
        pod: &Pod,
        vol: &k8s_openapi::api::core::v1::Volume,
    ) -> Result<(bool, Option<Arc<PersistentVolumeClaim>>), String> {
        let Some((claim, ephemeral)) = volume_claim(pod, vol) else { return Ok((true, None)) };
        let key = format!("{}/{claim}", namespace_of(&pod.metadata));
        let pvc = self.cache.pvc(&key).map_err(|e| format!("error getting PVC {key:?}: {e}"))?;
        if ephemeral {
            volume_is_for_pod(pod, &pvc)?;
        }
        Ok((is_pvc_fully_bound(&pvc), Some(pvc)))
    }

    fn are_pod_volumes_bound(&self, pod: &Pod) -> bool {
        pod_volumes(pod).iter().all(|v| self.is_volume_bound(pod, v).is_ok_and(|(b, _)| b))
    }

    /// True when the class exists with WaitForFirstConsumer (missing class: immediate).
    fn is_delay_binding_mode(&self, pvc: &PersistentVolumeClaim) -> Result<bool, String> {
        let class = claim_class(pvc);
        if class.is_empty() {
            return Ok(false);
        }
        let Some(sc) = self.lister.storage_class(class) else { return Ok(false) };
        match sc.volume_binding_mode.as_deref() {
            None => Err(format!("VolumeBindingMode not set for StorageClass {class:?}")),
            Some(m) => Ok(m == "WaitForFirstConsumer"),
        }
    }

    /// Classifies the pod's claims (upstream's `GetPodVolumeClaims`).
    pub fn pod_volume_claims(&self, pod: &Pod) -> Result<PodVolumeClaims, String> {
        let mut out = PodVolumeClaims::default();
        for vol in pod_volumes(pod) {
            let (bound, pvc) = self.is_volume_bound(pod, vol)?;
            let Some(pvc) = pvc else { continue };
            if bound {
                out.bound.push(pvc);
            } else if self.is_delay_binding_mode(&pvc)? && claim_volume_name(&pvc).is_empty() {
                out.unbound_delay_binding.push(pvc);
            } else {
                out.unbound_immediate.push(pvc);
            }
        }
        for pvc in &out.unbound_delay_binding {
            let class = claim_class(pvc).to_string();
            let pvs = self.cache.list_pvs(&class);
            out.unbound_volumes_delay_binding.insert(class, pvs);
        }
        Ok(out)
    }

    /// The binding decisions for a node, or the reasons it cannot host the pod's volumes
    /// (upstream's `FindPodVolumes`).
    pub fn find_pod_volumes(
        &self,
        _pod: &Pod,
        claims: &PodVolumeClaims,
        node: &Arc<Node>,
    ) -> Result<(PodVolumes, Vec<&'static str>), String> {
        let mut v =
            Verdict { bound_satisfied: true, unbound_satisfied: true, sufficient_storage: true, bound_pvs_found: true };
        let mut pod_volumes = PodVolumes { node: Some(node.clone()), ..Default::default() };
        if !claims.bound.is_empty() {
            (v.bound_satisfied, v.bound_pvs_found) = self.check_bound_claims(&claims.bound, node)?;
        }
        if !claims.unbound_delay_binding.is_empty() {
            let node_name = name_of(&node.metadata);
            let mut to_provision = Vec::new();
            let mut to_match = Vec::new();
            for claim in &claims.unbound_delay_binding {
                match annotation(&claim.metadata, ANN_SELECTED_NODE) {
                    Some(selected) if selected != node_name => {
                        // provisioning already started for another node
                        v.unbound_satisfied = false;
                        return Ok((pod_volumes, v.reasons()));
                    }
                    Some(_) => to_provision.push(claim.clone()),
                    None => to_match.push(claim.clone()),
                }
            }
            if !to_match.is_empty() {
                let (found, bindings, unmatched) =
                    self.find_matching_volumes(to_match, &claims.unbound_volumes_delay_binding, node)?;
                v.unbound_satisfied = found;
                pod_volumes.static_bindings = bindings;
                to_provision.extend(unmatched);
            }
            if !to_provision.is_empty() {
                let (satisfied, sufficient, provisions) = self.check_volume_provisions(&to_provision, node)?;
                v.unbound_satisfied = satisfied;
                v.sufficient_storage = sufficient;
                pod_volumes.dynamic_provisions = provisions;
            }
        }
        Ok((pod_volumes, v.reasons()))
    }

    /// (node affinity satisfied, all PVs found).
    fn check_bound_claims(&self, claims: &[Arc<PersistentVolumeClaim>], node: &Node) -> Result<(bool, bool), String> {
        let csi_node = std::cell::OnceCell::new();
        let csi_node = || csi_node.get_or_init(|| self.lister.csi_node(name_of(&node.metadata))).clone();
        for pvc in claims {
            let Ok(pv) = self.cache.pv(claim_volume_name(pvc)) else { return Ok((true, false)) };
            let pv = try_translate_pv_to_csi(pv, csi_node)?;
            if check_node_affinity(&pv, node_labels(node)).is_err() {
                return Ok((false, true));
            }
        }
        Ok((true, true))
    }

    fn find_matching_volumes(
        &self,
        mut claims: Vec<Arc<PersistentVolumeClaim>>,
        candidates: &HashMap<String, Vec<Arc<PersistentVolume>>>,
        node: &Node,
    ) -> Result<MatchResult, String> {
        // smallest claims first, so they do not take the PVs larger claims need
        claims.sort_by_key(|c| claim_storage_request(c).unwrap_or(0));
        let mut chosen = HashSet::new();
        let mut found = true;
        let mut bindings = Vec::new();
        let mut unmatched = Vec::new();
        for pvc in claims {
            let pvs = candidates.get(claim_class(&pvc)).map(Vec::as_slice).unwrap_or_default();
            match find_matching_volume(&pvc, pvs, Some(node), &chosen, true)? {
                None => {
                    unmatched.push(pvc);
                    found = false;
                }
                Some(pv) => {
                    chosen.insert(name_of(&pv.metadata).to_string());
                    bindings.push(BindingInfo { pvc, pv });
                }
            }
        }
        Ok((found, bindings, unmatched))
    }

    /// (provisioning possible, enough storage, provisions).
    fn check_volume_provisions(
        &self,
        claims: &[Arc<PersistentVolumeClaim>],
        node: &Node,
    ) -> Result<(bool, bool, Vec<DynamicProvision>), String> {
        let mut out = Vec::new();
        for claim in claims {
            let class_name = claim_class(claim);
            if class_name.is_empty() {
                return Err(format!("no class for claim \"{}\"", pvc_key(claim)));
            }
            let class = self
                .lister
                .storage_class(class_name)
                .ok_or_else(|| format!("failed to find storage class {class_name:?}"))?;
            if class.provisioner.is_empty() || class.provisioner == NOT_SUPPORTED_PROVISIONER {
                return Ok((false, true, Vec::new()));
            }
            if !match_topology_selector_terms(
                class.allowed_topologies.as_deref().unwrap_or_default(),
                node_labels(node),
            ) {
                return Ok((false, true, Vec::new()));
            }
            let (sufficient, capacity) = self.has_enough_capacity(claim, &class, node);
            if !sufficient {
                return Ok((true, false, Vec::new()));
            }
            out.push(DynamicProvision { pvc: claim.clone(), node_capacity: capacity });
        }
        Ok((true, true, out))
    }

    /// Whether a CSIStorageCapacity accessible from the node can hold the claim (only checked for
    /// CSI drivers that publish capacity).
    fn has_enough_capacity(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: &Node,
    ) -> (bool, Option<Arc<CSIStorageCapacity>>) {
        let Some(size) = claim_storage_request(claim) else { return (true, None) };
        let Some(driver) = self.lister.csi_driver(&class.provisioner) else { return (true, None) };
        if driver.spec.storage_capacity != Some(true) {
            return (true, None);
        }
        let class_name = name_of(&class.metadata);
        for cap in self.lister.csi_storage_capacities() {
            if cap.storage_class_name == class_name
                && volume_limit(&cap).is_some_and(|l| l >= size)
                && cap.node_topology.as_ref().is_some_and(|t| label_selector_matches(Some(t), node_labels(node)))
            {
                return (true, Some(cap));
            }
        }
        (false, None)
    }

    /// Assumes the node's decisions (upstream's `AssumePodVolumes`); `true` when every claim was
    /// already bound and there is nothing to do.
    pub fn assume_pod_volumes(&self, pod: &Pod, node: &str, pv: &mut PodVolumes) -> Result<bool, String> {
        if self.are_pod_volumes_bound(pod) {
            return Ok(true);
        }
        let mut new_bindings: Vec<BindingInfo> = Vec::new();
        for b in &pv.static_bindings {
            let (new_pv, dirty) = bind_volume_to_claim(&b.pv, &b.pvc);
            let new_pv = Arc::new(new_pv);
            if dirty {
                if let Err(e) = self.cache.assume_pv(new_pv.clone()) {
                    self.revert_pvs(&new_bindings);
                    return Err(e);
                }
            }
            new_bindings.push(BindingInfo { pv: new_pv, pvc: b.pvc.clone() });
        }
        let mut new_provisions: Vec<DynamicProvision> = Vec::new();
        for p in &pv.dynamic_provisions {
            let mut claim = (*p.pvc).clone();
            claim.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(ANN_SELECTED_NODE.into(), node.into());
            let claim = Arc::new(claim);
            if let Err(e) = self.cache.assume_pvc(claim.clone()) {
                self.revert_pvs(&new_bindings);
                self.revert_pvcs(new_provisions.iter().map(|p| &p.pvc));
                return Err(e);
            }
            new_provisions.push(DynamicProvision { pvc: claim, node_capacity: None });
        }
        pv.static_bindings = new_bindings;
        pv.dynamic_provisions = new_provisions;
        Ok(false)
    }

    /// Drops the assumptions of a node's decisions.
    pub fn revert_assumed_pod_volumes(&self, pv: &PodVolumes) {
        self.revert_pvs(&pv.static_bindings);
        self.revert_pvcs(pv.dynamic_provisions.iter().map(|p| &p.pvc));
    }

    fn revert_pvs(&self, bindings: &[BindingInfo]) {
        for b in bindings {
            self.cache.restore_pv(&b.pv);
        }
    }

    fn revert_pvcs<'a>(&self, claims: impl Iterator<Item = &'a Arc<PersistentVolumeClaim>>) {
        for c in claims {
            self.cache.restore_pvc(c);
        }
    }

    /// Writes the decisions and waits until the PV controller completed binding (upstream's
    /// `BindPodVolumes`).
    pub async fn bind_pod_volumes(&self, pod: &Pod, node: &str, pv: &PodVolumes) -> Result<(), String> {
        let mut bindings = pv.static_bindings.clone();
        let mut claims: Vec<Arc<PersistentVolumeClaim>> = pv.dynamic_provisions.iter().map(|p| p.pvc.clone()).collect();
        self.bind_api_update(&mut bindings, &mut claims).await?;
        let deadline = std::time::Instant::now() + self.bind_timeout;
        loop {
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err("binding volumes: context deadline exceeded".into());
            }
            super::timer::sleep(self.poll_interval.min(deadline - now)).await;
            if std::time::Instant::now() > deadline {
                return Err("binding volumes: context deadline exceeded".into());
            }
            match self.check_bindings(pod, node, pv.node.as_deref(), &bindings, &claims) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(format!("binding volumes: {e}")),
            }
        }
    }

    async fn bind_api_update(
        &self,
        bindings: &mut [BindingInfo],
        claims: &mut [Arc<PersistentVolumeClaim>],
    ) -> Result<(), String> {
        for i in 0..bindings.len() {
            match self.client.update_persistent_volume(&bindings[i].pv).await {
                Ok(new_pv) => bindings[i].pv = Arc::new(new_pv),
                Err(e) => {
                    self.revert_pvs(&bindings[i..]);
                    self.revert_pvcs(claims.iter());
                    return Err(e.message);
                }
            }
        }
        for i in 0..claims.len() {
            match self.client.update_persistent_volume_claim(&claims[i]).await {
                Ok(new_pvc) => claims[i] = Arc::new(new_pvc),
                Err(e) => {
                    self.revert_pvcs(claims[i..].iter());
                    return Err(e.message);
                }
            }
        }
        Ok(())
    }

    /// True once every decision is reflected in the informer and the claims are fully bound;
    /// errors when binding can no longer succeed.
    fn check_bindings(
        &self,
        pod: &Pod,
        node_name: &str,
        node: Option<&Node>,
        bindings: &[BindingInfo],
        claims: &[Arc<PersistentVolumeClaim>],
    ) -> Result<bool, String> {
        let empty = PackedLabels::default();
        let labels = node.map(node_labels).unwrap_or(&empty);
        let csi_node = self.lister.csi_node(node_name);
        let csi_node = || csi_node.clone();
        if let Some(view) = self.scheduler.get() {
            let name = name_of(&pod.metadata);
            if view.get_pod(namespace_of(&pod.metadata), name).is_none() {
                return Err(format!("pod does not exist any more: pods {name:?} not found"));
            }
        }
        for b in bindings {
            let pv = self.cache.pv_api(name_of(&b.pv.metadata)).map_err(|e| format!("failed to check binding: {e}"))?;
            let pvc = self.cache.pvc_api(&pvc_key(&b.pvc)).map_err(|e| format!("failed to check binding: {e}"))?;
            if compare_resource_version(&b.pv.metadata, &pv.metadata).is_gt() {
                return Ok(false);
            }
            let pv =
                try_translate_pv_to_csi(pv, csi_node).map_err(|e| format!("failed to translate pv to csi: {e}"))?;
            if let Err(e) = check_node_affinity(&pv, labels) {
                return Err(format!(
                    "pv {:?} node affinity doesn't match node {node_name:?}: {e}",
                    name_of(&pv.metadata)
                ));
            }
            let claim_ref_uid =
                pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.uid.as_deref()).unwrap_or_default();
            if claim_ref_uid.is_empty() {
                return Err(format!("ClaimRef got reset for pv {:?}", name_of(&pv.metadata)));
            }
            if !is_pvc_fully_bound(&pvc) {
                return Ok(false);
            }
        }
        for claim in claims {
            let pvc =
                self.cache.pvc_api(&pvc_key(claim)).map_err(|e| format!("failed to check provisioning pvc: {e}"))?;
            if compare_resource_version(&claim.metadata, &pvc.metadata).is_gt() {
                return Ok(false);
            }
            let name = name_of(&pvc.metadata);
            if pvc.metadata.annotations.is_none() {
                return Err(format!("selectedNode annotation reset for PVC {name:?}"));
            }
            if annotation(&pvc.metadata, ANN_SELECTED_NODE).unwrap_or_default() != node_name {
                return Err(format!("provisioning failed for PVC {name:?}"));
            }
            let volume = claim_volume_name(&pvc);
            if !volume.is_empty() {
                let Ok(pv) = self.cache.pv_api(volume) else { return Ok(false) };
                let pv = try_translate_pv_to_csi(pv, csi_node)?;
                if let Err(e) = check_node_affinity(&pv, labels) {
                    return Err(format!(
                        "pv {:?} node affinity doesn't match node {node_name:?}: {e}",
                        name_of(&pv.metadata)
                    ));
                }
            }
            if !is_pvc_fully_bound(&pvc) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
