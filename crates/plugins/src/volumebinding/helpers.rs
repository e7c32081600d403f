//! Storage helpers shared by the volume plugins (upstream's component-helpers/storage and the
//! informer-lister error texts), plus typed access to the storage objects queueing hints receive.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, TopologySelectorTerm, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ksched_framework::labels::{LabelLookup, Labels, PackedLabels, Selector};
use ksched_framework::meta::PackedMeta;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::EventObject;
use serde::de::DeserializeOwned;

use crate::nodeaffinity::{FieldPath, LazyErrorNodeSelector};

/// Annotation the scheduler sets on a delay-binding claim to pick the provisioning node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Annotation the PV controller sets on a claim once binding is complete.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Annotation set on a PV bound by the controller (or the scheduler) rather than by the user.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The legacy storage-class annotation, which wins over `spec.storageClassName`.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// Provisioner name meaning "no dynamic provisioning".
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// CSINode annotation listing the in-tree plugins migrated to CSI on the node.
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";

/// The text of an informer-lister NotFound error (`persistentvolumeclaim "x" not found`).
pub fn not_found(resource: &str, name: &str) -> String {
    format!("{resource} {name:?} not found")
}

/// The claim's storage class: the beta annotation when present, else `spec.storageClassName`.
pub fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    if let Some(c) = pvc.metadata.annotations.as_ref().and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION)) {
        return c;
    }
    pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default()
}

/// The volume's storage class: the beta annotation when present, else `spec.storageClassName`.
pub fn pv_class(pv: &PersistentVolume) -> &str {
    if let Some(c) = pv.metadata.annotations.as_ref().and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION)) {
        return c;
    }
    pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default()
}

/// Name of the object ("" when unset).
pub fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// Namespace of the object, "default" when unset (as objects read back from the API have one).
pub fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

/// True when the object carries the annotation.
pub fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(key))
}

/// An annotation's value.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// The claim's `spec.volumeName` ("" when unbound).
pub fn claim_volume_name(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default()
}

/// The claim's access modes.
pub fn claim_access_modes(pvc: &PersistentVolumeClaim) -> &[String] {
    pvc.spec.as_ref().and_then(|s| s.access_modes.as_deref()).unwrap_or_default()
}

/// The storage the claim requests in bytes; `None` when it requests none.
pub fn claim_storage_request(pvc: &PersistentVolumeClaim) -> Option<i64> {
    let q = pvc.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?.get("storage")?;
    Some(ksched_framework::quantity::value(&q.0).unwrap_or(0))
}

/// The volume's storage capacity in bytes (0 when unset).
pub fn pv_capacity(pv: &PersistentVolume) -> i64 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map(|q| ksched_framework::quantity::value(&q.0).unwrap_or(0))
        .unwrap_or(0)
}

/// The pod's volumes.
pub fn pod_volumes(pod: &Pod) -> &[Volume] {
    pod.spec.as_ref().map(|s| s.volumes.as_deref().unwrap_or_default()).unwrap_or_default()
}

/// The claim a generic ephemeral volume gets: `<pod>-<volume>`.
pub fn ephemeral_claim_name(pod: &Pod, vol: &Volume) -> String {
    format!("{}-{}", name_of(&pod.metadata), vol.name)
}

/// The claim a volume refers to and whether it is a generic ephemeral one; `None` for other
/// volume types.
pub fn volume_claim(pod: &Pod, vol: &Volume) -> Option<(String, bool)> {
    if let Some(c) = &vol.persistent_volume_claim {
        Some((c.claim_name.clone(), false))
    } else if vol.ephemeral.is_some() {
        Some((ephemeral_claim_name(pod, vol), true))
    } else {
        None
    }
}

/// Checks that a generic ephemeral volume's claim was created for (is controlled by) the pod.
pub fn volume_is_for_pod(pod: &Pod, pvc: &PersistentVolumeClaim) -> Result<(), String> {
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let controlled = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .is_some_and(|r| r.uid == pod_uid);
    let (pod_ns, pvc_ns) = (namespace_of(&pod.metadata), namespace_of(&pvc.metadata));
    if pvc_ns != pod_ns || !controlled {
        return Err(format!(
            "PVC {pvc_ns}/{} was not created for pod {pod_ns}/{} (pod is not owner)",
            name_of(&pvc.metadata),
            name_of(&pod.metadata)
        ));
    }
    Ok(())
}

/// Checks the volume's required node affinity against node labels, like upstream's
/// `CheckNodeAffinity` (the node has only labels, so `matchFields` never match).
pub fn check_node_affinity(pv: &PersistentVolume, node_labels: &PackedLabels) -> Result<(), String> {
    let Some(required) = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref())
    else {
        return Ok(());
    };
    let node =
        Node { metadata: PackedMeta::from_parts(ObjectMeta::default(), node_labels.clone()), ..Default::default() };
    match LazyErrorNodeSelector::new(required, &FieldPath::new("")).matches(&node)? {
        true => Ok(()),
        false => Err("no matching NodeSelectorTerms".to_string()),
    }
}

/// True when the labels satisfy any of the topology terms (an empty list matches everything;
/// an empty or invalid term matches nothing), like upstream's `MatchTopologySelectorTerms`.
pub fn match_topology_selector_terms<L: LabelLookup + ?Sized>(terms: &[TopologySelectorTerm], labels: &L) -> bool {
    if terms.is_empty() {
        return true;
    }
    terms.iter().any(|t| {
        let reqs = t.match_label_expressions.as_deref().unwrap_or_default();
        !reqs.is_empty()
            && reqs.iter().all(|r| {
                // an `In` requirement with no values is invalid and fails the whole term
                !r.values.is_empty() && labels.label(&r.key).is_some_and(|v| r.values.iter().any(|x| x == v))
            })
    })
}

/// True when the labels match a label selector (`None` and parse errors match nothing).
pub fn label_selector_matches(
    sel: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    labels: &(impl LabelLookup + ?Sized),
) -> bool {
    Selector::from_label_selector(sel).is_ok_and(|s| s.matches(labels))
}

/// The labels of an object (empty when unset).
pub fn labels_of(meta: &ObjectMeta) -> &Labels {
    static EMPTY: Labels = BTreeMap::new();
    meta.labels.as_ref().unwrap_or(&EMPTY)
}

/// Decodes an event object into a storage type; pods and nodes are reported as the wrong type.
pub fn typed<T: DeserializeOwned>(obj: Option<&EventObject>, want: &str) -> Result<Option<Arc<T>>, String> {
    match obj {
        None => Ok(None),
        Some(EventObject::Other(v)) => serde_json::from_value::<T>((**v).clone())
            .map(|t| Some(Arc::new(t)))
            .map_err(|e| format!("expected {want}: {e}")),
        Some(EventObject::Pod(_)) => Err(format!("expected {want}, but got *v1.Pod")),
        Some(EventObject::Node(_)) => Err(format!("expected {want}, but got *v1.Node")),
        Some(EventObject::PodGroup(_)) => Err(format!("expected {want}, but got *v1alpha2.PodGroup")),
    }
}

/// The old and new objects of an event as one storage type (upstream's `util.As`).
pub type Pair<T> = (Option<Arc<T>>, Option<Arc<T>>);

/// Decodes both objects of an event.
pub fn typed_pair<T: DeserializeOwned>(
    old: Option<&EventObject>,
    new: Option<&EventObject>,
    want: &str,
) -> Result<Pair<T>, String> {
    Ok((typed(old, want)?, typed(new, want)?))
}

/// Compares two resourceVersions numerically (unparsable versions compare equal), like
/// upstream's `APIObjectVersioner.CompareResourceVersion`.
pub fn compare_resource_version(a: &ObjectMeta, b: &ObjectMeta) -> std::cmp::Ordering {
    let parse = |m: &ObjectMeta| m.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => std::cmp::Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classes_prefer_the_beta_annotation() {
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "c", "annotations": {BETA_STORAGE_CLASS_ANNOTATION: "beta"}},
            "spec": {"storageClassName": "ga"}}))
        .unwrap();
        assert_eq!(claim_class(&pvc), "beta");
        let pvc: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {"storageClassName": "ga"}})).unwrap();
        assert_eq!(claim_class(&pvc), "ga");
    }

    #[test]
    fn topology_terms() {
        let labels: Labels = [("zone".to_string(), "a".to_string())].into();
        let terms = |v: serde_json::Value| -> Vec<TopologySelectorTerm> { serde_json::from_value(v).unwrap() };
        assert!(match_topology_selector_terms(&[], &labels));
        assert!(match_topology_selector_terms(
            &terms(json!([{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}])),
            &labels
        ));
        assert!(!match_topology_selector_terms(
            &terms(json!([{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}])),
            &labels
        ));
        assert!(!match_topology_selector_terms(&terms(json!([{}])), &labels));
    }

    #[test]
    fn node_affinity() {
        let pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pv"}, "spec": {
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}))
        .unwrap();
        let a: Labels = [("zone".to_string(), "a".to_string())].into();
        let b: Labels = [("zone".to_string(), "b".to_string())].into();
        assert_eq!(check_node_affinity(&pv, &PackedLabels::new(&a)), Ok(()));
        assert_eq!(check_node_affinity(&pv, &PackedLabels::new(&b)), Err("no matching NodeSelectorTerms".into()));
    }
}
