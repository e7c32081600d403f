//! The part of kube-controller-manager's resource claim controller that clusters without one
//! (`ksched local`, `ksched apiserver`, `ksched explain` and `whatif` on manifest files, tests)
//! need: pods that name a ResourceClaimTemplate get their claim created (`<pod>-<claim>-`
//! generated name, owned by the pod, annotated with the claim entry) and recorded in
//! `status.resourceClaimStatuses`; claims of deleted pods are deleted.

use futures::StreamExt;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use ksched_dra::claim::{claim_from_template, is_controlled_by, missing_template_claims, POD_CLAIM_NAME_ANNOTATION};
use ksched_framework::pod::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt as _};

/// Runs the controller until the task is aborted.
pub fn spawn(client: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let pods: Api<Pod> = Api::all(client.clone());
        let mut events = watcher(pods, watcher::Config::default()).default_backoff().boxed();
        while let Some(ev) = events.next().await {
            let result = match ev {
                Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => sync_pod(&client, &p).await,
                Ok(watcher::Event::Delete(p)) => delete_claims_of(&client, &p).await,
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "resource claim controller");
            }
        }
    })
}

fn ns_of(pod: &Pod) -> String {
    pod.metadata.namespace.clone().unwrap_or_else(|| "default".into())
}

/// The claim made for the entry earlier, if its status update did not land.
fn existing_claim<'a>(claims: &'a [ResourceClaim], pod: &Pod, entry: &str) -> Option<&'a ResourceClaim> {
    claims.iter().find(|c| {
        is_controlled_by(c, pod)
            && c.metadata.annotations.as_ref().and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION)).map(String::as_str)
                == Some(entry)
    })
}

/// One pass over every pod, as the controller makes when it starts, for tools that load a
/// cluster and then read it (`ksched explain` and `ksched whatif` on manifest files). Returns
/// what kept pods waiting (a template that does not exist, as with the running controller).
pub async fn sync_all(client: &kube::Client) -> Result<Vec<String>, String> {
    let pods: Api<Pod> = Api::all(client.clone());
    let claims: Api<ResourceClaim> = Api::all(client.clone());
    // Listed once: per pod, as the running controller does, is quadratic in the pods.
    let mut existing = claims.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
    let mut problems = Vec::new();
    for pod in pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
        if let Err(e) = sync_pod_with(client, &pod, &mut existing).await {
            problems.push(format!("pod {}/{}: {e}", ns_of(&pod), pod.metadata.name.as_deref().unwrap_or_default()));
        }
    }
    Ok(problems)
}

async fn sync_pod(client: &kube::Client, pod: &Pod) -> Result<(), String> {
    if pod.metadata.deletion_timestamp.is_some() || missing_template_claims(pod).is_empty() {
        return Ok(());
    }
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns_of(pod));
    let mut existing = claims_api.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
    sync_pod_with(client, pod, &mut existing).await
}

/// Makes the pod's missing template claims (reusing those made earlier, among `existing`, to
/// which new ones are added) and records them in its status.
async fn sync_pod_with(client: &kube::Client, pod: &Pod, existing: &mut Vec<ResourceClaim>) -> Result<(), String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let missing = missing_template_claims(pod);
    if missing.is_empty() {
        return Ok(());
    }
    let ns = ns_of(pod);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
    let mut statuses: Vec<serde_json::Value> = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|s| serde_json::json!({"name": s.name, "resourceClaimName": s.resource_claim_name}))
        .collect();
    let before = statuses.len();
    for (entry, template) in missing {
        let claim_name = match existing_claim(existing, pod, &entry) {
            Some(c) => c.metadata.name.clone(),
            None => {
                let t = match templates.get(&template).await {
                    Ok(t) => t,
                    // The template may come later; the pod waits, as with the real controller.
                    Err(e) => return Err(format!("resource claim template {template:?}: {e}")),
                };
                let claim = claim_from_template(pod, &entry, &t);
                let created = claims_api.create(&PostParams::default(), &claim).await.map_err(|e| {
                    format!("create ResourceClaim {}: {e}", claim.metadata.generate_name.unwrap_or_default())
                })?;
                let name = created.metadata.name.clone();
                existing.push(created);
                name
            }
        };
        statuses.push(serde_json::json!({"name": entry, "resourceClaimName": claim_name}));
    }
    if statuses.len() == before {
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let patch = serde_json::json!({"status": {"resourceClaimStatuses": statuses}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("update pod {ns}/{name} ResourceClaimStatuses: {e}"))
}

async fn delete_claims_of(client: &kube::Client, pod: &Pod) -> Result<(), String> {
    let ns = ns_of(pod);
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    let claims = claims_api.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
    for c in claims.iter().filter(|c| is_controlled_by(c, pod)) {
        let name = c.metadata.name.clone().unwrap_or_default();
        // The pod is gone, so its devices are free: drop the delete protection first.
        let unprotect = serde_json::json!({"metadata": {"finalizers": null}});
        let _ = claims_api.patch(&name, &PatchParams::default(), &Patch::Merge(unprotect)).await;
        if let Err(e) = claims_api.delete(&name, &DeleteParams::default()).await {
            tracing::warn!(claim = %format!("{ns}/{name}"), error = %e, "deleting the claim of a deleted pod");
        }
    }
    Ok(())
}
