//! `klog.KObj` for tracing fields: log `pod = ?KObj::of(&pod)`; the scheduler's log formatter
//! writes it as `namespace/name` in text and `{"name":..,"namespace":..}` in JSON.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::Metadata;

/// A namespaced object reference whose `Debug` form is klog's JSON object.
pub struct KObj<'a> {
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
}

impl<'a> KObj<'a> {
    /// The reference of a Kubernetes object.
    pub fn of<K: Metadata<Ty = ObjectMeta>>(obj: &'a K) -> Self {
        let meta = obj.metadata();
        KObj { namespace: meta.namespace.as_deref().unwrap_or(""), name: meta.name.as_deref().unwrap_or("") }
    }
}

impl fmt::Debug for KObj<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let obj = if self.namespace.is_empty() {
            serde_json::json!({ "name": self.name })
        } else {
            serde_json::json!({ "name": self.name, "namespace": self.namespace })
        };
        write!(f, "{obj}")
    }
}
