//! The Handle: what plugins receive at construction (client, parallelizer, recorder, metrics,
//! extenders).

use std::sync::Arc;

use crate::pod::Pod;
use futures::future::BoxFuture;

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
    /// PlacementGenerate (pod-group cycle)
    PlacementGenerate,
    /// PlacementScore (pod-group cycle)
    PlacementScore,
    /// Sign (pod signatures for opportunistic batching)
    Sign,
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
            ExtensionPoint::PlacementGenerate => "PlacementGenerate",
            ExtensionPoint::PlacementScore => "PlacementScore",
            ExtensionPoint::Sign => "Sign",
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
    /// Opportunistic batching ([`crate::batch`]) counted an attempt (`scheduler_batch_attempts_total`).
    fn batch_attempt(&self, _profile: &str, _result: crate::batch::BatchAttempt) {}
    /// Opportunistic batching dropped its cached nodes (`scheduler_batch_cache_flushed_total`).
    fn batch_cache_flushed(&self, _profile: &str, _reason: crate::batch::FlushReason) {}
    /// Time to get a node hint (`scheduler_get_node_hint_duration_seconds`).
    fn get_node_hint_duration(&self, _profile: &str, _hinted: bool, _seconds: f64) {}
    /// Time to store a cycle's results (`scheduler_store_schedule_results_duration_seconds`).
    fn store_schedule_results_duration(&self, _profile: &str, _seconds: f64) {}
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
    /// Re-runs PreEnqueue for those of `pods` that the PreEnqueue plugin `plugin` holds back in
    /// the unschedulable pool, for a gate that opened without a cluster event to announce it.
    /// Released pods go where a cluster event would have sent them (backoff or active).
    fn release_gated(&self, pods: &[Arc<Pod>], plugin: &str) {
        let _ = (pods, plugin);
    }
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
    /// The feature gates in force.
    pub features: crate::features::Features,
    /// PodGroup objects and the state of their member pods (fed when GenericWorkload is on).
    pub pod_groups: Arc<crate::podgroup::PodGroups>,
    /// The profile's pods waiting at Permit (the framework built with this handle shares it).
    pub waiting_pods: Arc<crate::runtime::WaitingPods>,
    /// State every profile's plugins share (upstream's SharedDRAManager lives here).
    pub shared: SharedState,
}

/// Objects shared by the plugins of all profiles, one per type, created on first use.
#[derive(Clone, Default)]
pub struct SharedState(Arc<parking_lot::Mutex<Vec<Arc<dyn std::any::Any + Send + Sync>>>>);

impl SharedState {
    /// The shared `T`, made by `init` the first time any profile asks.
    pub fn get_or_init<T: std::any::Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut g = self.0.lock();
        if let Some(found) = g.iter().find_map(|v| v.clone().downcast::<T>().ok()) {
            return found;
        }
        let made = Arc::new(init());
        g.push(made.clone());
        made
    }

    /// The shared `T`, if some profile made one.
    pub fn get<T: std::any::Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0.lock().iter().find_map(|v| v.clone().downcast::<T>().ok())
    }
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
            features: crate::features::Features::default(),
            pod_groups: Arc::new(crate::podgroup::PodGroups::new()),
            waiting_pods: Arc::default(),
            shared: SharedState::default(),
        }
    }
}
