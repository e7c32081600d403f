//! Upstream's DefaultTolerationSeconds admission plugin (on by default): a pod that does not
//! tolerate the not-ready and unreachable NoExecute taints tolerates them for 300 s, so that
//! a node going away evicts it after five minutes rather than at once.

use k8s_openapi::api::core::v1::{PodSpec, Toleration};

use super::{AdmissionContext, Attributes, Object, Plugin};
use crate::defaults::encode;
use crate::error::ApiError;

const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// The DefaultTolerationSeconds plugin.
pub struct DefaultTolerationSeconds;

impl Plugin for DefaultTolerationSeconds {
    fn admit(&self, a: &mut Attributes<'_>, _ctx: &dyn AdmissionContext) -> Result<(), ApiError> {
        match &mut a.object {
            Object::Pod(pod) => add_tolerations(pod.spec.get_or_insert_with(Default::default)),
            Object::PodUpdate(u) => {
                let Some(spec) = u.spec() else { return Ok(()) };
                let before = spec.tolerations.as_ref().map_or(0, Vec::len);
                add_tolerations(spec);
                // Written back only when something was added, so tolerations as the client wrote
                // them are not re-encoded.
                if spec.tolerations.as_ref().map_or(0, Vec::len) != before {
                    let tolerations = encode(&spec.tolerations)?;
                    u.pod["spec"]["tolerations"] = tolerations;
                }
            }
            Object::Json(_) => {}
        }
        Ok(())
    }
}

/// An empty key tolerates every taint, whatever the operator.
fn add_tolerations(spec: &mut PodSpec) {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for taint in [NOT_READY_TAINT, UNREACHABLE_TAINT] {
        let tolerated = tolerations.iter().any(|t| {
            let key = t.key.as_deref().unwrap_or_default();
            (key == taint || key.is_empty()) && matches!(t.effect.as_deref().unwrap_or_default(), "" | "NoExecute")
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some(taint.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(300),
                value: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::admission::testing::{ctx, pod_with};
    use crate::resources::ids;
    use crate::strategy::admit_create;

    #[test]
    fn default_toleration_seconds_adds_only_what_is_not_tolerated() {
        let pod = pod_with(json!({"tolerations": [{"operator": "Exists", "effect": "NoExecute"}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        assert_eq!(out["spec"]["tolerations"].as_array().unwrap().len(), 1, "{}", out["spec"]["tolerations"]);
        let pod = pod_with(json!({"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}));
        let out = admit_create(ids::pods(), pod, &ctx()).unwrap();
        let tols = out["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(tols.len(), 2);
        assert_eq!(
            tols[1],
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
        );
    }
}
