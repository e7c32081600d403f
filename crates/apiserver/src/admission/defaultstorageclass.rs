//! Upstream's DefaultStorageClass admission plugin (on by default): a PersistentVolumeClaim that
//! names no class, neither `storageClassName` (even empty) nor the beta annotation, gets the
//! default class: the newest one annotated `is-default-class`, then by name.

use serde_json::{json, Value};

use super::{AdmissionContext, Attributes, Object, Operation, Plugin};
use crate::error::ApiError;
use crate::resources::def;
use crate::validation::str_at;

/// The DefaultStorageClass plugin.
pub struct DefaultStorageClass;

impl Plugin for DefaultStorageClass {
    fn admit(&self, a: &mut Attributes<'_>, ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        if let (Object::Json(obj), Operation::Create) = (&mut a.object, a.operation) {
            if def(a.resource).kind == "PersistentVolumeClaim" {
                set_default_class(obj, ctx);
            }
        }
        Ok(())
    }
}

fn set_default_class(obj: &mut Value, ctx: &dyn AdmissionContext) {
    if !obj.get("spec").is_some_and(Value::is_object) {
        return;
    }
    let has_class = obj.pointer("/spec/storageClassName").is_some_and(|v| !v.is_null())
        || obj.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").is_some();
    if has_class {
        return;
    }
    let is_default = |sc: &Value| {
        ["storageclass.kubernetes.io~1is-default-class", "storageclass.beta.kubernetes.io~1is-default-class"]
            .iter()
            .any(|a| str_at(sc, &format!("/metadata/annotations/{a}")) == Some("true"))
    };
    let classes = ctx.storage_classes();
    let newest = classes.iter().filter(|sc| is_default(sc)).max_by(|a, b| {
        let created = |sc: &Value| str_at(sc, "/metadata/creationTimestamp").unwrap_or_default().to_string();
        let name = |sc: &Value| str_at(sc, "/metadata/name").unwrap_or_default().to_string();
        created(a).cmp(&created(b)).then_with(|| name(b).cmp(&name(a)))
    });
    if let Some(name) = newest.and_then(|sc| str_at(sc, "/metadata/name")) {
        obj["spec"]["storageClassName"] = json!(name);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::admission::testing::ctx;
    use crate::strategy::admit_create;

    #[test]
    fn claims_get_the_newest_default_class() {
        let pvc = |spec: Value| {
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c", "namespace": "default"}, "spec": spec})
        };
        let rid = crate::resources::by_kind("v1", "PersistentVolumeClaim").unwrap();
        let base = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        let out = admit_create(rid, pvc(base.clone()), &ctx()).unwrap();
        assert_eq!(out["spec"]["storageClassName"], "new");
        let mut explicit = base.clone();
        explicit["storageClassName"] = json!("");
        let out = admit_create(rid, pvc(explicit), &ctx()).unwrap();
        assert_eq!(out["spec"]["storageClassName"], "", "an explicit empty class means none");
        let mut annotated = pvc(base);
        annotated["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "old"});
        let out = admit_create(rid, annotated, &ctx()).unwrap();
        assert!(out["spec"].get("storageClassName").is_none(), "the beta annotation names a class too");
    }
}
