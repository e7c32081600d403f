//! Object metadata with packed labels, shared by the scheduler's own pod and node types.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::labels::PackedLabels;
use crate::shared::SharedLists;

/// The owner reference lists alive: the pods of one ReplicaSet (or Job, StatefulSet…) name the
/// same controller.
static SHARED_OWNER_REFERENCES: SharedLists<OwnerReference> = SharedLists::new(|o, h| o.uid.hash(h));

/// `list` shared with the objects that hold an equal list (see [`PackedMeta::owner_references`]).
pub fn share_owner_references(list: Vec<OwnerReference>) -> Arc<[OwnerReference]> {
    SHARED_OWNER_REFERENCES.share(list)
}

/// A kept object's `metadata` (pods' and nodes'): the API's `ObjectMeta` (without `managedFields`) for everything but
/// the labels, which are [`PackedLabels`], and the owner references, which are shared.
///
/// Labels in the API's `BTreeMap` cost a 544-byte tree node (three for a cloud node's dozen)
/// plus two strings each, the largest allocation of a kept pod; packed they take their bytes
/// and a span table. The
/// other fields read through `Deref` (`pod.metadata.name`); `pod.metadata.labels` is this type's
/// own field, which Rust resolves before the `ObjectMeta`'s, whose `labels` is always `None`. Only
/// code going through the `ObjectMeta` explicitly (`ResourceExt::labels`, `meta()`) would see no
/// labels, so `Pod::labels` and `Node::labels` shadow the former. The same holds for
/// `owner_references`: the pods of one workload name the same controller, and share one list
/// instead of holding a copy each (about 220 bytes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackedMeta {
    meta: ObjectMeta,
    /// `metadata.labels`.
    pub labels: PackedLabels,
    /// `metadata.ownerReferences`; build a new list with [`share_owner_references`].
    pub owner_references: Option<Arc<[OwnerReference]>>,
}

impl PackedMeta {
    /// The `ObjectMeta` without labels and owner references (what kube's `Resource` trait hands out).
    pub fn object_meta(&self) -> &ObjectMeta {
        &self.meta
    }

    /// The `ObjectMeta` without labels and owner references, mutable.
    pub fn object_meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }

    /// `meta` with `labels` (which replace any labels in `meta`, unless empty).
    pub fn from_parts(meta: ObjectMeta, labels: PackedLabels) -> Self {
        let mut pm = PackedMeta::from(meta);
        if !labels.is_empty() {
            pm.labels = labels;
        }
        pm
    }

    /// The `ObjectMeta` (with the owner references, and whose `labels` is `None`) and the labels.
    pub fn into_parts(self) -> (ObjectMeta, PackedLabels) {
        let mut meta = self.meta;
        meta.owner_references = self.owner_references.map(|o| o.to_vec());
        (meta, self.labels)
    }

    /// The API's `ObjectMeta`, labels and owner references included.
    pub fn to_object_meta(&self) -> ObjectMeta {
        let mut meta = self.meta.clone();
        meta.labels = (!self.labels.is_empty()).then(|| self.labels.to_map());
        meta.owner_references = self.owner_references.as_ref().map(|o| o.to_vec());
        meta
    }
}

impl From<ObjectMeta> for PackedMeta {
    /// Packs the labels and drops `managedFields`.
    fn from(mut meta: ObjectMeta) -> Self {
        let labels = meta.labels.take().map(|l| PackedLabels::new(&l)).unwrap_or_default();
        let owner_references = meta.owner_references.take().map(share_owner_references);
        meta.managed_fields = None;
        PackedMeta { meta, labels, owner_references }
    }
}

impl std::ops::Deref for PackedMeta {
    type Target = ObjectMeta;
    fn deref(&self) -> &ObjectMeta {
        &self.meta
    }
}

impl std::ops::DerefMut for PackedMeta {
    fn deref_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

impl Serialize for PackedMeta {
    /// The API's `metadata` object.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_object_meta().serialize(s)
    }
}

impl<'de> Deserialize<'de> for PackedMeta {
    /// `metadata` as sent, without `managedFields`: the largest part of most objects and read
    /// by nothing here, so it is skipped while decoding instead of being built and dropped.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(default, rename_all = "camelCase")]
        #[derive(Default)]
        struct Wire {
            annotations: Option<BTreeMap<String, String>>,
            creation_timestamp: Option<Time>,
            deletion_grace_period_seconds: Option<i64>,
            deletion_timestamp: Option<Time>,
            finalizers: Option<Vec<String>>,
            generate_name: Option<String>,
            generation: Option<i64>,
            labels: PackedLabels,
            name: Option<String>,
            namespace: Option<String>,
            owner_references: Option<Vec<OwnerReference>>,
            resource_version: Option<String>,
            self_link: Option<String>,
            uid: Option<String>,
        }
        let w = Option::<Wire>::deserialize(d)?.unwrap_or_default();
        let meta = ObjectMeta {
            annotations: w.annotations,
            creation_timestamp: w.creation_timestamp,
            deletion_grace_period_seconds: w.deletion_grace_period_seconds,
            deletion_timestamp: w.deletion_timestamp,
            finalizers: w.finalizers,
            generate_name: w.generate_name,
            generation: w.generation,
            labels: None,
            managed_fields: None,
            name: w.name,
            namespace: w.namespace,
            owner_references: None,
            resource_version: w.resource_version,
            self_link: w.self_link,
            uid: w.uid,
        };
        Ok(PackedMeta { meta, labels: w.labels, owner_references: w.owner_references.map(share_owner_references) })
    }
}

/// A kept core/v1 object (`kind`: "Pod", "Node") as the API's JSON: `apiVersion`, `kind`,
/// `metadata`, and `spec` and `status` when present.
pub(crate) fn serialize_kept<S: Serializer>(
    s: S,
    kind: &'static str,
    metadata: &PackedMeta,
    spec: &Option<impl Serialize>,
    status: &Option<impl Serialize>,
) -> Result<S::Ok, S::Error> {
    let fields = 3 + usize::from(spec.is_some()) + usize::from(status.is_some());
    let mut st = s.serialize_struct(kind, fields)?;
    st.serialize_field("apiVersion", "v1")?;
    st.serialize_field("kind", kind)?;
    st.serialize_field("metadata", metadata)?;
    if let Some(spec) = spec {
        st.serialize_field("spec", spec)?;
    }
    if let Some(status) = status {
        st.serialize_field("status", status)?;
    }
    st.end()
}
