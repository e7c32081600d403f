//! The ResourceClaim calls of DynamicResources over `kube` (used by [`crate::client::KubeApiClient`]).

use futures::future::BoxFuture;
use k8s_openapi::api::resource::v1::ResourceClaim;
use ksched_framework::client::ApiError;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use crate::client::api_error;

fn claims(client: &kube::Client, ns: &str) -> Api<ResourceClaim> {
    Api::namespaced(client.clone(), ns)
}

fn ns_of(c: &ResourceClaim) -> String {
    c.metadata.namespace.clone().unwrap_or_else(|| "default".into())
}

/// GET resourceclaims/{name}.
pub(crate) fn get(client: &kube::Client, ns: &str, name: &str) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
    let api = claims(client, ns);
    let name = name.to_string();
    Box::pin(async move { api.get(&name).await.map_err(api_error) })
}

/// POST resourceclaims.
pub(crate) fn create(client: &kube::Client, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
    let api = claims(client, &ns_of(c));
    let c = c.clone();
    Box::pin(async move { api.create(&PostParams::default(), &c).await.map_err(api_error) })
}

/// PUT resourceclaims/{name}.
pub(crate) fn update(client: &kube::Client, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
    let api = claims(client, &ns_of(c));
    let c = c.clone();
    Box::pin(async move {
        let name = c.metadata.name.clone().unwrap_or_default();
        api.replace(&name, &PostParams::default(), &c).await.map_err(api_error)
    })
}

/// PUT resourceclaims/{name}/status.
pub(crate) fn update_status(
    client: &kube::Client,
    c: &ResourceClaim,
) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
    let api = claims(client, &ns_of(c));
    let c = c.clone();
    Box::pin(async move {
        let name = c.metadata.name.clone().unwrap_or_default();
        api.replace_status(&name, &PostParams::default(), &c).await.map_err(api_error)
    })
}

/// Strategic-merge PATCH of resourceclaims/{name}/status.
pub(crate) fn patch_status(
    client: &kube::Client,
    ns: &str,
    name: &str,
    patch: serde_json::Value,
) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
    let api = claims(client, ns);
    let name = name.to_string();
    Box::pin(async move {
        api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch)).await.map_err(api_error)
    })
}

/// DELETE resourceclaims/{name}.
pub(crate) fn delete(client: &kube::Client, ns: &str, name: &str) -> BoxFuture<'static, Result<(), ApiError>> {
    let api = claims(client, ns);
    let name = name.to_string();
    Box::pin(async move { api.delete(&name, &DeleteParams::default()).await.map(|_| ()).map_err(api_error) })
}
