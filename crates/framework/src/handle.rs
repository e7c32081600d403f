//! The Handle: what plugins receive at construction (client, parallelizer, recorder, metrics,
//! extenders).

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

use crate::client::{ApiClient, ApiError};
use crate::extender::Extender;
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
    /// A plugin was evaluated `count` times (PreFilter, Filter, PreScore, Score).
    fn plugin_evaluations(&self, _profile: &str, _plugin: &str, _point: ExtensionPoint, _count: u64) {}
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

/// What plugins may ask of the running scheduler (queue, nominator, informer pods). Bound after
/// the queue exists (the queue itself needs the frameworks), hence the late-bound slot.
pub trait SchedulerView: Send + Sync {
    /// Pods nominated to a node (by preemption or their status), freshest copies.
    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<crate::PodInfo>>;
    /// The informer's current version of a pod.
    fn get_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// Moves pods waiting in the queue back to the active queue.
    fn activate(&self, pods: &[Arc<Pod>]);
}

/// Runs a future on the scheduler's async runtime (the framework itself has none).
pub type Spawner = Arc<dyn Fn(futures::future::BoxFuture<'static, ()>) + Send + Sync>;

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
    /// The running scheduler, once bound (see [`Handle::scheduler`]).
    pub scheduler: Arc<std::sync::OnceLock<Arc<dyn SchedulerView>>>,
    /// Spawns background work (async preemption, volume binding waits).
    pub spawner: Spawner,
    /// The configured extenders, in the order the scheduler consults them.
    pub extenders: Vec<Arc<dyn Extender>>,
}

impl Handle {
    /// The running scheduler; `None` in pure tests or before the scheduler is assembled.
    pub fn scheduler(&self) -> Option<&Arc<dyn SchedulerView>> {
        self.scheduler.get()
    }
}

/// A spawner that runs the future to completion on a new thread (tests without a runtime).
pub fn thread_spawner() -> Spawner {
    Arc::new(|f| {
        std::thread::spawn(move || futures::executor::block_on(f));
    })
}

impl Handle {
    /// A handle for pure tests: no client, no recorder, no metrics, no extenders.
    pub fn for_tests() -> Self {
        Handle {
            client: Arc::new(NoClient),
            recorder: Arc::new(NoopRecorder),
            parallelizer: Parallelizer::new(16),
            metrics: Arc::new(NoopMetrics),
            lister: Arc::new(MemoryLister::default()),
            scheduler: Arc::new(std::sync::OnceLock::new()),
            spawner: thread_spawner(),
            extenders: Vec::new(),
        }
    }
}
