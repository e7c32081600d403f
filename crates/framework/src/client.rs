//! The API operations plugins and the binding cycle need, behind a trait so the core stays free
//! of I/O: the scheduler implements it with `kube`, tests and benchmarks with recorders.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

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
}
