//! The API operations plugins and the binding cycle need, behind a trait so the core stays free
//! of I/O: the scheduler implements it with `kube`, tests and benchmarks with recorders.

use crate::pod::Pod;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;

/// An API call failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code (0 when the request never got an answer).
    pub code: u16,
    /// The error text.
    pub message: String,
}

impl ApiError {
    /// True for 404.
    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }

    /// True for 409.
    pub fn is_conflict(&self) -> bool {
        self.code == 409
    }
}

/// What the scheduler writes to the API server.
pub trait ApiClient: Send + Sync {
    /// POST pods/{name}/binding.
    fn bind(&self, pod: &Pod, node: &str) -> BoxFuture<'static, Result<(), ApiError>>;
    /// Strategic-merge PATCH of pods/{name}/status.
    fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), ApiError>>;
    /// DELETE pods/{name} (preemption victims), with a UID precondition when given.
    fn delete_pod(&self, namespace: &str, name: &str, uid: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>>;
    /// GET pods/{name} from the API server itself (not an informer); `None` when absent. The
    /// binding cycle asks after a failed binding whether the pod got bound anyway. Clients
    /// that cannot read may keep the default, which fails (the failure is then taken as is).
    fn get_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, Result<Option<Pod>, ApiError>> {
        let _ = namespace;
        let message = format!("reading pods {name:?}: not supported by this API client");
        Box::pin(async move { Err(ApiError { code: 501, message }) })
    }
    /// PUT persistentvolumes/{name} (volume binding); returns the stored object. Clients that
    /// never bind volumes may keep the default, which fails.
    fn update_persistent_volume(
        &self,
        pv: &PersistentVolume,
    ) -> BoxFuture<'static, Result<PersistentVolume, ApiError>> {
        let name = pv.metadata.name.clone().unwrap_or_default();
        Box::pin(async move { Err(unsupported("persistentvolumes", &name)) })
    }
    /// PUT persistentvolumeclaims/{name} (volume binding); returns the stored object.
    fn update_persistent_volume_claim(
        &self,
        pvc: &PersistentVolumeClaim,
    ) -> BoxFuture<'static, Result<PersistentVolumeClaim, ApiError>> {
        let name = pvc.metadata.name.clone().unwrap_or_default();
        Box::pin(async move { Err(unsupported("persistentvolumeclaims", &name)) })
    }
    // ResourceClaim calls of DynamicResources (allocation, reservation, deallocation); clients
    // that never see claims may keep the defaults, which fail.

    /// GET resourceclaims/{name}.
    fn get_resource_claim(&self, namespace: &str, name: &str) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let name = name.to_string();
        let _ = namespace;
        Box::pin(async move { Err(unsupported("resourceclaims", &name)) })
    }
    /// POST resourceclaims (claims for DRA-backed extended resources).
    fn create_resource_claim(&self, claim: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let name = claim.metadata.generate_name.clone().unwrap_or_default();
        Box::pin(async move { Err(unsupported("resourceclaims", &name)) })
    }
    /// PUT resourceclaims/{name} (finalizers).
    fn update_resource_claim(&self, claim: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        Box::pin(async move { Err(unsupported("resourceclaims", &name)) })
    }
    /// PUT resourceclaims/{name}/status (allocation, reservation).
    fn update_resource_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        Box::pin(async move { Err(unsupported("resourceclaims", &name)) })
    }
    /// Strategic-merge PATCH of resourceclaims/{name}/status.
    fn patch_resource_claim_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let (_, name, _) = (namespace, name.to_string(), patch);
        Box::pin(async move { Err(unsupported("resourceclaims", &name)) })
    }
    /// DELETE resourceclaims/{name}.
    fn delete_resource_claim(&self, namespace: &str, name: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        let (_, name) = (namespace, name.to_string());
        Box::pin(async move { Err(unsupported("resourceclaims", &name)) })
    }
    /// True when every call completes without waiting on I/O (an API held in this process's
    /// memory). The scheduler then runs a binding cycle on the scheduling thread as far as it
    /// goes without waiting, instead of waking a runtime worker for a bind that takes
    /// microseconds. Clients that talk to a server keep the default.
    fn answers_in_place(&self) -> bool {
        false
    }
    /// Strategic-merge PATCH of `scheduling.k8s.io/v1alpha2` podgroups/{name}/status (the
    /// PodGroupScheduled condition); clients that never see pod groups may keep the default.
    fn patch_pod_group_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), ApiError>> {
        let (_, name, _) = (namespace, name.to_string(), patch);
        Box::pin(async move { Err(unsupported("podgroups", &name)) })
    }
}

fn unsupported(resource: &str, name: &str) -> ApiError {
    ApiError { code: 0, message: format!("updating {resource} {name:?}: not supported by this API client") }
}
