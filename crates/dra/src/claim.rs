//! ResourceClaim helpers shared by the scheduler and the claim controller (upstream's
//! `resourceclaim` package): which claim a pod's entry names, ownership, reservations and
//! device taint tolerations.

use k8s_openapi::api::core::v1::PodResourceClaim;
use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceToleration, ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use ksched_framework::pod::Pod;

/// The annotation the claim controller sets on claims generated from a template: the pod's
/// claim entry the claim was made for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// The finalizer that protects allocated claims.
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// Marks the claim the scheduler created for DRA-backed extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// Upper bound of devices in one allocation result.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;
/// Upper bound of subrequests in `firstAvailable` (scoring counts down from it).
pub const FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE: i64 = 8;

/// Error text when a template-generated claim has not been recorded in the pod status yet.
pub const ERR_CLAIM_NOT_FOUND: &str = "ResourceClaim not created yet";
/// Error text for a pod claim entry without a known source.
pub const ERR_API_UNSUPPORTED: &str = "none of the supported fields are set";

/// `namespace/name` as klog's `KObj` prints it (just `name` without namespace).
pub fn kobj(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn pod_ns(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// The claim a pod's `spec.resourceClaims` entry refers to: `Ok(None)` when the template
/// produced no claim (allowed), `must_check_owner` for generated claims.
pub fn claim_name(pod: &Pod, pc: &PodResourceClaim) -> Result<(Option<String>, bool), String> {
    if let Some(n) = &pc.resource_claim_name {
        return Ok((Some(n.clone()), false));
    }
    if pc.resource_claim_template_name.is_some() {
        let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
        if let Some(st) = statuses.into_iter().flatten().find(|s| s.name == pc.name) {
            return Ok((st.resource_claim_name.clone(), true));
        }
        return Err(format!("pod \"{}/{}\": {ERR_CLAIM_NOT_FOUND}", pod_ns(pod), pod_name(pod)));
    }
    Err(format!("pod \"{}/{}\", spec.resourceClaim {:?}: {ERR_API_UNSUPPORTED}", pod_ns(pod), pod_name(pod), pc.name))
}

/// True when the pod is the claim's controller.
pub fn is_controlled_by(claim: &ResourceClaim, pod: &Pod) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    claim.metadata.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Checks that a generated claim belongs to the pod (upstream's `IsForPod`).
pub fn is_for_pod(pod: &Pod, claim: &ResourceClaim) -> Result<(), String> {
    let cns = claim.metadata.namespace.as_deref().unwrap_or_default();
    let cname = claim.metadata.name.as_deref().unwrap_or_default();
    if cns != pod_ns(pod) {
        return Err(format!(
            "ResourceClaim {cns}/{cname} is not in the same namespace as Pod {}/{}",
            pod_ns(pod),
            pod_name(pod)
        ));
    }
    if !is_controlled_by(claim, pod) {
        return Err(format!(
            "ResourceClaim {cns}/{cname} was not created for Pod {}/{} (Pod is not owner)",
            pod_ns(pod),
            pod_name(pod)
        ));
    }
    Ok(())
}

/// True when `status.reservedFor` names the pod.
pub fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).into_iter().flatten().any(|r| r.uid == uid)
}

/// Whether a toleration tolerates a device taint.
pub fn tolerates_taint(t: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        if e != taint.effect {
            return false;
        }
    }
    if let Some(k) = t.key.as_deref().filter(|k| !k.is_empty()) {
        if k != taint.key {
            return false;
        }
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// The `generateName` of a claim made from a template for a pod's claim entry: `<pod>-<claim>-`,
/// both parts shortened in proportion when that exceeds 57 characters (then without the
/// trailing dash, as kube-controller-manager does).
pub fn generate_name(pod: &str, claim: &str) -> String {
    let name = format!("{pod}-{claim}-");
    const MAX_BASE_LEN: usize = 57;
    if name.len() <= MAX_BASE_LEN {
        return name;
    }
    let cut = |s: &str| s[..s.len() * MAX_BASE_LEN / name.len()].to_string();
    format!("{}-{}", cut(pod), cut(claim))
}

/// The claim kube-controller-manager creates for a pod's template entry: owned by the pod,
/// annotated with the entry's name, labels and annotations from the template.
pub fn claim_from_template(pod: &Pod, pod_claim: &str, template: &ResourceClaimTemplate) -> ResourceClaim {
    let mut annotations = template.spec.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME_ANNOTATION.to_string(), pod_claim.to_string());
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: pod.metadata.namespace.clone(),
            generate_name: Some(generate_name(pod_name(pod), pod_claim)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name(pod).to_string(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                ..Default::default()
            }]),
            annotations: Some(annotations),
            labels: template.spec.metadata.as_ref().and_then(|m| m.labels.clone()),
            ..Default::default()
        },
        spec: template.spec.spec.clone(),
        status: None,
    }
}

/// The pod's template entries that have no claim recorded in its status yet.
pub fn missing_template_claims(pod: &Pod) -> Vec<(String, String)> {
    let recorded: Vec<&str> = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|pc| Some((pc.name.clone(), pc.resource_claim_template_name.clone()?)))
        .filter(|(n, _)| !recorded.contains(&n.as_str()))
        .collect()
}

/// `request/subrequest`.
pub fn sub_request_ref(request: &str, sub_request: &str) -> String {
    format!("{request}/{sub_request}")
}

/// True for `request/subrequest` references.
pub fn is_sub_request_ref(r: &str) -> bool {
    r.split('/').count() == 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn template_claims_wait_for_the_pod_status() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}}));
        let pc = &p.spec.as_ref().unwrap().resource_claims.as_ref().unwrap()[0];
        assert_eq!(claim_name(&p, pc).unwrap_err(), "pod \"ns/p\": ResourceClaim not created yet");
        let p2 = pod(json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-abc"}]}}));
        assert_eq!(claim_name(&p2, pc).unwrap(), (Some("p-gpu-abc".to_string()), true));
    }

    #[test]
    fn generated_names_follow_the_controller() {
        assert_eq!(generate_name("train-0", "gpus"), "train-0-gpus-");
        let long = generate_name(&"p".repeat(50), &"c".repeat(20));
        assert_eq!(long, format!("{}-{}", "p".repeat(39), "c".repeat(15)));
        let template: ResourceClaimTemplate = serde_json::from_value(json!({"metadata": {"name": "t"},
            "spec": {"metadata": {"labels": {"a": "b"}}, "spec": {"devices": {"requests": []}}}}))
        .unwrap();
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": []}}));
        let c = claim_from_template(&p, "gpu", &template);
        assert_eq!(c.metadata.generate_name.as_deref(), Some("p-gpu-"));
        assert_eq!(c.metadata.annotations.unwrap()[POD_CLAIM_NAME_ANNOTATION], "gpu");
        assert!(is_controlled_by(
            &ResourceClaim {
                metadata: ObjectMeta { owner_references: c.metadata.owner_references, ..Default::default() },
                ..Default::default()
            },
            &p
        ));
    }

    #[test]
    fn tolerations_match_like_pod_tolerations() {
        let taint: DeviceTaint =
            serde_json::from_value(json!({"key": "k", "value": "v", "effect": "NoSchedule"})).unwrap();
        let t = |v: serde_json::Value| -> DeviceToleration { serde_json::from_value(v).unwrap() };
        assert!(tolerates_taint(&t(json!({"key": "k", "value": "v"})), &taint));
        assert!(tolerates_taint(&t(json!({"operator": "Exists"})), &taint));
        assert!(!tolerates_taint(&t(json!({"key": "k", "value": "w"})), &taint));
        assert!(!tolerates_taint(&t(json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})), &taint));
    }
}
