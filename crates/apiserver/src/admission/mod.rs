//! kube-apiserver's admission plugins: those of its default set that change or refuse the
//! objects we serve, one module each, named as upstream names them. [`PLUGINS`] lists them in
//! upstream's order, which is the order they run in.
//!
//! Admission runs after defaulting (`crate::defaults`) on both creates and updates. Mutating
//! admission ([`admit`]) comes before object validation; validating admission ([`validate`])
//! after it on create, and before it on update (`crate::strategy` says where).

mod defaultstorageclass;
mod defaulttolerationseconds;
mod limitranger;
mod podtopologylabels;
mod priority;
mod serviceaccount;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceId;

pub use podtopologylabels::topology_labels;

/// Read access to cluster state that admission needs.
pub trait AdmissionContext {
    /// All current PriorityClass objects.
    fn priority_classes(&self) -> Vec<Arc<Value>>;
    /// The Node called `name`, if it exists.
    fn node(&self, name: &str) -> Option<Arc<Value>>;
    /// All current StorageClass objects.
    fn storage_classes(&self) -> Vec<Arc<Value>>;
    /// The LimitRange objects of a namespace.
    fn limit_ranges(&self, namespace: &str) -> Vec<Arc<Value>>;
}

/// One admission plugin; both halves default to admitting everything unchanged.
pub trait Plugin: Sync {
    /// Mutating admission: may change the object, or refuse it.
    fn admit(&self, _a: &mut Attributes<'_>, _ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        Ok(())
    }

    /// Validating admission: may refuse the object, never changes it.
    fn validate(&self, _a: &Attributes<'_>, _ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        Ok(())
    }
}

/// The plugins by upstream's names (as `--enable-admission-plugins` takes them), in the order
/// upstream's `AllOrderedPlugins` runs them.
pub static PLUGINS: &[(&str, &dyn Plugin)] = &[
    ("LimitRanger", &limitranger::LimitRanger),
    ("ServiceAccount", &serviceaccount::ServiceAccount),
    ("Priority", &priority::Priority),
    ("DefaultTolerationSeconds", &defaulttolerationseconds::DefaultTolerationSeconds),
    ("DefaultStorageClass", &defaultstorageclass::DefaultStorageClass),
    ("PodTopologyLabels", &podtopologylabels::PodTopologyLabels),
];

/// Which write is being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A create.
    Create,
    /// An update (including patches and server-side apply).
    Update,
}

/// What a plugin is asked about.
pub struct Attributes<'a> {
    /// Create or update.
    pub operation: Operation,
    /// The resource, by its storage id.
    pub resource: ResourceId,
    /// The object's name as errors show it (`generateName` when it has none yet).
    pub name: &'a str,
    /// The object.
    pub object: Object<'a>,
}

/// The object under admission.
pub enum Object<'a> {
    /// A pod being created, decoded and defaulted, as upstream's plugins see it.
    Pod(&'a mut Pod),
    /// A pod being updated.
    PodUpdate(PodUpdate<'a>),
    /// Any other object, created or updated.
    Json(&'a mut Value),
}

/// A pod being updated: its JSON, the stored pod, and its spec decoded for the plugins that
/// work on the typed spec.
pub struct PodUpdate<'a> {
    /// The pod as written, with admission's changes so far.
    pub pod: &'a mut Value,
    /// The stored pod it replaces.
    pub old: &'a Value,
    // Boxed so that `Object` stays small: a decoded spec is over a kilobyte.
    spec: Option<Option<Box<PodSpec>>>,
}

impl<'a> PodUpdate<'a> {
    /// A pod update whose spec is decoded when first asked for.
    pub fn new(pod: &'a mut Value, old: &'a Value) -> Self {
        PodUpdate { pod, old, spec: None }
    }

    /// The spec as it was when first asked for, decoded once; `None` when it does not decode.
    /// Upstream's decoder refuses such a pod before admission; here validation refuses it, and
    /// the plugins that need the spec leave it alone.
    pub fn spec(&mut self) -> Option<&mut PodSpec> {
        let pod = &*self.pod;
        self.spec.get_or_insert_with(|| serde_json::from_value(pod["spec"].clone()).ok()).as_deref_mut()
    }
}

/// Runs every plugin's mutating half, in order; the first refusal stops the write.
pub fn admit(a: &mut Attributes<'_>, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    PLUGINS.iter().try_for_each(|(_, p)| p.admit(a, ctx))
}

/// Runs every plugin's validating half, in order; the first refusal stops the write.
pub fn validate(a: &Attributes<'_>, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
    PLUGINS.iter().try_for_each(|(_, p)| p.validate(a, ctx))
}

/// Test fixtures shared by the plugins' tests and the create path's.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::AdmissionContext;

    /// A cluster with the built-in priority classes (plus any added), two default storage
    /// classes, a LimitRange in namespace `limited` and a node `zoned` with zone and region.
    pub struct Cluster(pub Vec<Arc<Value>>);

    impl AdmissionContext for Cluster {
        fn priority_classes(&self) -> Vec<Arc<Value>> {
            self.0.clone()
        }
        fn storage_classes(&self) -> Vec<Arc<Value>> {
            let sc = |name: &str, created: &str, default: &str| {
                Arc::new(json!({"metadata": {"name": name, "creationTimestamp": created,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": default}}}))
            };
            vec![
                sc("old", "2026-01-01T00:00:00Z", "true"),
                sc("new", "2026-01-02T00:00:00Z", "true"),
                sc("newer", "2026-01-03T00:00:00Z", "false"),
            ]
        }
        fn limit_ranges(&self, namespace: &str) -> Vec<Arc<Value>> {
            let lr = json!({"metadata": {"name": "l", "namespace": "limited"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "200m"}}]}});
            if namespace == "limited" {
                vec![Arc::new(lr)]
            } else {
                Vec::new()
            }
        }
        fn node(&self, name: &str) -> Option<Arc<Value>> {
            (name == "zoned").then(|| {
                Arc::new(json!({"metadata": {"name": "zoned", "labels": {"topology.kubernetes.io/zone": "z1",
                    "topology.kubernetes.io/region": "r1", "kubernetes.io/hostname": "zoned"}}}))
            })
        }
    }

    /// The cluster with only the built-in priority classes.
    pub fn ctx() -> Cluster {
        Cluster(crate::store::builtin_priority_classes().into_iter().map(Arc::new).collect())
    }

    /// The cluster with extra priority classes.
    pub fn with_classes(extra: Vec<Value>) -> Cluster {
        let mut c = ctx();
        c.0.extend(extra.into_iter().map(Arc::new));
        c
    }

    /// A PriorityClass.
    pub fn class(name: &str, value: i64, default: bool, policy: &str) -> Value {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": default, "preemptionPolicy": policy})
    }

    /// Pod `default/p` labelled `app: web, ver: 2`, with one container and `spec` besides.
    pub fn pod_with(spec: Value) -> Value {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
            "labels": {"app": "web", "ver": "2"}}, "spec": spec})
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testing::{ctx, pod_with};
    use super::*;
    use crate::resources::ids;
    use crate::strategy::{admit_create, admit_update};

    #[test]
    fn plugins_run_in_upstreams_order() {
        // The relative order of these plugins in upstream's AllOrderedPlugins.
        let upstream = [
            "LimitRanger",
            "ServiceAccount",
            "Priority",
            "DefaultTolerationSeconds",
            "DefaultStorageClass",
            "PodTopologyLabels",
        ];
        let names: Vec<&str> = PLUGINS.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, upstream);
    }

    #[test]
    fn pod_updates_keep_admitted_priority_and_tolerations() {
        let created =
            admit_create(ids::pods(), pod_with(json!({"priorityClassName": "system-node-critical"})), &ctx()).unwrap();
        let mut new = created.clone();
        for f in ["priority", "preemptionPolicy", "tolerations"] {
            new["spec"].as_object_mut().unwrap().remove(f);
        }
        admit_update(ids::pods(), &created, &mut new, &ctx()).unwrap();
        assert_eq!(new["spec"], created["spec"]);
    }

    #[test]
    fn a_pod_update_whose_spec_does_not_decode_is_left_to_validation() {
        let created = admit_create(ids::pods(), pod_with(json!({"nodeName": "zoned"})), &ctx()).unwrap();
        let mut new = created.clone();
        new["metadata"]["labels"] = json!({});
        new["spec"]["tolerations"] = json!("not a list");
        new["spec"].as_object_mut().unwrap().remove("priority");
        admit_update(ids::pods(), &created, &mut new, &ctx()).unwrap();
        assert_eq!(new["spec"]["priority"], created["spec"]["priority"], "Priority works on the JSON");
        assert_eq!(new["spec"]["tolerations"], "not a list", "DefaultTolerationSeconds needs the decoded spec");
        assert_eq!(new["metadata"]["labels"], json!({}), "PodTopologyLabels leaves it too");
    }
}
