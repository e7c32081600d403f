//! Upstream's ServiceAccount admission plugin (on by default), the part the scheduler can see:
//! a pod created without a service account runs as `default`.

use super::{AdmissionContext, Attributes, Object, Plugin};
use crate::error::ApiError;

/// The ServiceAccount plugin.
pub struct ServiceAccount;

impl Plugin for ServiceAccount {
    fn admit(&self, a: &mut Attributes<'_>, _ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        if let Object::Pod(pod) = &mut a.object {
            let spec = pod.spec.get_or_insert_with(Default::default);
            spec.service_account_name.get_or_insert_with(|| "default".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::admission::testing::{ctx, pod_with};
    use crate::resources::ids;
    use crate::strategy::{admit_create, admit_update};

    #[test]
    fn pods_are_created_with_the_default_service_account_unless_they_name_one() {
        let out = admit_create(ids::pods(), pod_with(json!({})), &ctx()).unwrap();
        assert_eq!(out["spec"]["serviceAccountName"], "default");
        let out = admit_create(ids::pods(), pod_with(json!({"serviceAccountName": "builder"})), &ctx()).unwrap();
        assert_eq!(out["spec"]["serviceAccountName"], "builder");
        let mut new = out.clone();
        new["spec"].as_object_mut().unwrap().remove("serviceAccountName");
        admit_update(ids::pods(), &out, &mut new, &ctx()).unwrap();
        assert!(new["spec"].get("serviceAccountName").is_none(), "create only");
    }
}
