//! The Handle: what plugins receive at construction (client, parallelizer, recorder, metrics).

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

use crate::client::{ApiClient, ApiError};
use crate::listers::{ClusterLister, MemoryLister};
use crate::parallelize::Parallelizer;
use crate::status::Code;

/// Extension points, as named in metrics labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionPoint {
    /// PreEnqueue
    PreEnqueue,
    /// PreFilter
    PreFilter,
    /// Filter
    Filter,
    /// PreFilterExtensionAddPod
    PreFilterExtensionAddPod,
    /// PreFilterExtensionRemovePod
    PreFilterExtensionRemovePod,
    /// PostFilter
    PostFilter,
    /// PreScore
    PreScore,
    /// Score
    Score,
    /// ScoreExtensionNormalize
    ScoreExtensionNormalize,
    /// Reserve
    Reserve,
    /// Unreserve
    Unreserve,
    /// Permit
    Permit,
    /// PreBindPreFlight
    PreBindPreFlight,
    /// PreBind
    PreBind,
    /// Bind
    Bind,
    /// PostBind
    PostBind,
}

impl ExtensionPoint {
    /// Metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionPoint::PreEnqueue => "PreEnqueue",
            ExtensionPoint::PreFilter => "PreFilter",
            ExtensionPoint::Filter => "Filter",
            ExtensionPoint::PreFilterExtensionAddPod => "PreFilterExtensionAddPod",
            ExtensionPoint::PreFilterExtensionRemovePod => "PreFilterExtensionRemovePod",
            ExtensionPoint::PostFilter => "PostFilter",
            ExtensionPoint::PreScore => "PreScore",
            ExtensionPoint::Score => "Score",
            ExtensionPoint::ScoreExtensionNormalize => "ScoreExtensionNormalize",
            ExtensionPoint::Reserve => "Reserve",
            ExtensionPoint::Unreserve => "Unreserve",
            ExtensionPoint::Permit => "Permit",
            ExtensionPoint::PreBindPreFlight => "PreBindPreFlight",
            ExtensionPoint::PreBind => "PreBind",
            ExtensionPoint::Bind => "Bind",
            ExtensionPoint::PostBind => "PostBind",
        }
    }
}

/// Where the framework reports timings; the scheduler plugs Prometheus in, tests use the no-op.
pub trait FrameworkMetrics: Send + Sync {
    /// One extension point ran for a pod.
    fn extension_point_duration(&self, _profile: &str, _point: ExtensionPoint, _status: Code, _seconds: f64) {}
    /// One plugin ran (only on sampled cycles).
    fn plugin_duration(&self, _plugin: &str, _point: ExtensionPoint, _status: Code, _seconds: f64) {}
}

/// Metrics sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMetrics;
impl FrameworkMetrics for NoopMetrics {}

/// Records Kubernetes events about pods.
pub trait EventRecorder: Send + Sync {
    /// Records an event: type Normal/Warning, reason, action, note; `related` is an optional
    /// second object (the preemptor for Preempted events).
    fn record(&self, regarding: &Pod, related: Option<&Pod>, type_: &str, reason: &str, action: &str, note: &str);
}

/// Recorder that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopRecorder;
impl EventRecorder for NoopRecorder {
    fn record(&self, _: &Pod, _: Option<&Pod>, _: &str, _: &str, _: &str, _: &str) {}
}

/// Client that refuses every call (for pure tests that never bind).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoClient;
impl ApiClient for NoClient {
    fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        Box::pin(async { Err(ApiError { code: 0, message: "no API client configured".into() }) })
    }
    fn patch_pod_status(&self, _: &str, _: &str, _: serde_json::Value) -> BoxFuture<'static, Result<(), ApiError>> {
        Box::pin(async { Err(ApiError { code: 0, message: "no API client configured".into() }) })
    }
    fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        Box::pin(async { Err(ApiError { code: 0, message: "no API client configured".into() }) })
    }
}

/// Services the framework offers plugins.
#[derive(Clone)]
pub struct Handle {
    /// Writes to the API server.
    pub client: Arc<dyn ApiClient>,
    /// Event recorder.
    pub recorder: Arc<dyn EventRecorder>,
    /// Parallel node evaluation.
    pub parallelizer: Parallelizer,
    /// Metrics sink.
    pub metrics: Arc<dyn FrameworkMetrics>,
    /// Informer-backed listers of namespaces, workloads, volumes and PDBs.
    pub lister: Arc<dyn ClusterLister>,
}

impl Handle {
    /// A handle for pure tests: no client, no recorder, no metrics.
    pub fn for_tests() -> Self {
        Handle {
            client: Arc::new(NoClient),
            recorder: Arc::new(NoopRecorder),
            parallelizer: Parallelizer::new(16),
            metrics: Arc::new(NoopMetrics),
            lister: Arc::new(MemoryLister::default()),
        }
    }
}
