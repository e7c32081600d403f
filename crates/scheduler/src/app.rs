//! Wiring (upstream's `cmd/kube-scheduler/app`): from a defaulted configuration, a plugin
//! registry and an API client to a running scheduler.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ksched_framework::client::ApiClient;
use ksched_framework::extender::Extender;
use ksched_framework::handle::{
    EventRecorder, FrameworkMetrics, NoopMetrics as NoopFrameworkMetrics, SchedulerView, Spawner,
};
use ksched_framework::listers::ClusterLister;
use ksched_framework::parallelize::Parallelizer;
use ksched_framework::pod::Pod;
use ksched_framework::PodInfo;
use ksched_framework::{Framework, Handle, Registry};
use std::sync::OnceLock;

use crate::cache::Cache;
use crate::client::{EventSink, KubeApiClient};
use crate::config::{self, KubeSchedulerConfiguration};
use crate::eventhandlers::{self, EventHandlers, PodStore};
use crate::extender::{build_extenders, HttpExtender};
use crate::listers::{WatchListers, WatchedApis};
use crate::metrics::{NoopMetrics, PrometheusMetrics, SchedulerMetrics};
use crate::queue::{NoopQueueMetrics, QueueMetrics, QueueOptions, RealClock, SchedulingQueue};
use crate::scheduler::{Profile, Scheduler};
use ksched_framework::plugin_config::Plugins;

/// Builds one framework per profile of a defaulted configuration; every profile's handle
/// offers `extenders` to its plugins.
#[allow(clippy::too_many_arguments)]
pub fn build_profiles(
    cfg: &KubeSchedulerConfiguration,
    registry: &Registry,
    client: Arc<dyn ApiClient>,
    recorder: &dyn Fn(&str) -> Arc<dyn EventRecorder>,
    lister: Arc<dyn ClusterLister>,
    view: Arc<OnceLock<Arc<dyn SchedulerView>>>,
    spawner: Spawner,
    extenders: &[Arc<HttpExtender>],
) -> anyhow::Result<HashMap<String, Profile>> {
    let metrics = Arc::new(NoopFrameworkMetrics);
    build_profiles_with_metrics(cfg, registry, client, recorder, lister, view, spawner, metrics, extenders)
}

/// [`build_profiles`] with a framework metrics sink shared by every profile.
#[allow(clippy::too_many_arguments)]
pub fn build_profiles_with_metrics(
    cfg: &KubeSchedulerConfiguration,
    registry: &Registry,
    client: Arc<dyn ApiClient>,
    recorder: &dyn Fn(&str) -> Arc<dyn EventRecorder>,
    lister: Arc<dyn ClusterLister>,
    view: Arc<OnceLock<Arc<dyn SchedulerView>>>,
    spawner: Spawner,
    metrics: Arc<dyn FrameworkMetrics>,
    extenders: &[Arc<HttpExtender>],
) -> anyhow::Result<HashMap<String, Profile>> {
    let parallelizer = Parallelizer::new(cfg.parallelism.unwrap_or(16).max(1) as usize);
    let extenders: Vec<Arc<dyn Extender>> = extenders.iter().map(|e| e.clone() as Arc<dyn Extender>).collect();
    let mut out = HashMap::new();
    // One view of the pod groups for every profile and the scheduling loop.
    let pod_groups = Arc::new(ksched_framework::podgroup::PodGroups::new());
    let shared = ksched_framework::handle::SharedState::default();
    // Every profile's plugins see one DRA state, made before any plugin asks for it.
    ksched_plugins::dynamicresources::manager::shared(&shared, lister.clone());
    let ignored = crate::extender::ignored_extended_resources(&cfg.extenders);
    for p in &cfg.profiles {
        let name = p.scheduler_name.clone().unwrap_or_else(|| "default-scheduler".into());
        let handle = Handle {
            client: client.clone(),
            recorder: recorder(&name),
            parallelizer: parallelizer.clone(),
            metrics: metrics.clone(),
            lister: lister.clone(),
            scheduler: view.clone(),
            spawner: spawner.clone(),
            extenders: extenders.clone(),
            features: cfg.features.plugin_features(),
            pod_groups: pod_groups.clone(),
            waiting_pods: Arc::default(),
            shared: shared.clone(),
        };
        let plugins = prune_unavailable_defaults(p.plugins.clone().unwrap_or_default(), registry, &name);
        let mut plugin_config = p.plugin_config.clone();
        crate::extender::apply_ignored_resources(&mut plugin_config, &ignored)
            .map_err(|e| anyhow::anyhow!("couldn't build extenders: {e}"))?;
        let args: Vec<(String, serde_json::Value)> =
            plugin_config.iter().filter_map(|pc| pc.args.to_json().map(|v| (pc.name.clone(), v))).collect();
        let fw = Framework::new(registry, &name, &plugins, &args, handle)
            .map_err(|e| anyhow::anyhow!("initializing profiles: creating profile for scheduler name {name}: {e}"))?;
        out.insert(
            name,
            Profile { framework: Arc::new(fw), percentage_of_nodes_to_score: p.percentage_of_nodes_to_score },
        );
    }
    Ok(out)
}

/// Drops plugins of upstream's default set that this build does not provide yet, with a warning.
/// Plugins the user names that do not exist still fail profile construction, as upstream does.
pub fn prune_unavailable_defaults(mut plugins: Plugins, registry: &Registry, profile: &str) -> Plugins {
    let defaults = config::default_plugins();
    let is_default = |n: &str| defaults.multi_point.enabled.iter().any(|p| p.name == n);
    let mut skipped = Vec::new();
    plugins.multi_point.enabled.retain(|p| {
        let ok = registry.get(&p.name).is_some() || !is_default(&p.name);
        if !ok {
            skipped.push(p.name.clone());
        }
        ok
    });
    if !skipped.is_empty() {
        tracing::warn!(profile, "default plugins not available in this build yet, skipped: {}", skipped.join(", "));
    }
    plugins
}

/// What plugins see of the running scheduler.
///
/// Holds the queue weakly: the queue owns the frameworks, whose handles own this view, so a
/// strong reference would form a cycle and keep a stopped scheduler alive.
pub(crate) struct QueueView {
    queue: std::sync::Weak<SchedulingQueue>,
    pods: Arc<PodStore>,
}

impl QueueView {
    /// A view of `queue` and the informer's pods.
    pub(crate) fn new(queue: &Arc<SchedulingQueue>, pods: Arc<PodStore>) -> Self {
        QueueView { queue: Arc::downgrade(queue), pods }
    }
}

impl SchedulerView for QueueView {
    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.queue.upgrade().map(|q| q.nominated_pods_for_node(node)).unwrap_or_default()
    }
    fn get_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        crate::scheduler::PodLister::get(self.pods.as_ref(), namespace, name)
    }
    fn activate(&self, pods: &[Arc<Pod>]) {
        if let Some(q) = self.queue.upgrade() {
            q.activate(pods);
        }
    }
    fn release_gated(&self, pods: &[Arc<Pod>], plugin: &str) {
        if let Some(q) = self.queue.upgrade() {
            q.release_gated(pods, plugin);
        }
    }
}

/// Queue options from the configuration.
pub fn queue_options(cfg: &KubeSchedulerConfiguration) -> QueueOptions {
    QueueOptions {
        pod_initial_backoff: Duration::from_secs(cfg.pod_initial_backoff_seconds.unwrap_or(1).max(0) as u64),
        pod_max_backoff: Duration::from_secs(cfg.pod_max_backoff_seconds.unwrap_or(10).max(0) as u64),
        ..QueueOptions::default()
    }
}

/// A scheduler running against an API server.
pub struct RunningScheduler {
    /// The scheduler.
    pub scheduler: Arc<Scheduler>,
    /// Pods as the informer sees them.
    pub pods: Arc<PodStore>,
    watchers: eventhandlers::Watchers,
    queue: Arc<SchedulingQueue>,
    loop_thread: Option<std::thread::JoinHandle<()>>,
    flusher: Option<std::thread::JoinHandle<()>>,
    events: EventSink,
}

/// How long a stopping scheduler keeps writing queued events.
const EVENT_FLUSH_GRACE: Duration = Duration::from_secs(1);

impl RunningScheduler {
    /// Starts the queue flushers and the scheduling loop if they are not running yet (a hot
    /// standby started with `run_loop: false` calls this on becoming leader).
    pub fn run_loop(&mut self) {
        if self.loop_thread.is_none() {
            tracing::info!("starting the scheduling loop");
            self.flusher = Some(self.queue.spawn_flushers());
            self.loop_thread = Some(self.scheduler.run());
        }
    }

    /// What the informers hold, as `key → resourceVersion`: nodes by name, pods by
    /// `namespace/name`. Equal to the API server's objects once the scheduler caught up.
    pub fn informer_versions(&self) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let pods = self
            .pods
            .list()
            .iter()
            .map(|p| {
                let ns = p.metadata.namespace.as_deref().unwrap_or("default");
                let name = p.metadata.name.as_deref().unwrap_or_default();
                (format!("{ns}/{name}"), p.metadata.resource_version.clone().unwrap_or_default())
            })
            .collect();
        (self.scheduler.cache.node_versions(), pods)
    }

    /// Stops scheduling, lets in-flight bindings finish (bounded by `grace`), and joins threads.
    pub async fn shutdown(mut self, grace: Duration) {
        self.scheduler.stop();
        self.watchers.stop();
        if !self.scheduler.wait_for_bindings(grace).await {
            tracing::warn!("in-flight bindings did not finish within {grace:?}");
        }
        for t in [self.loop_thread.take(), self.flusher.take()].into_iter().flatten() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        self.events.close(EVENT_FLUSH_GRACE.min(grace)).await;
    }
}

/// The optional APIs to watch: those the enabled feature gates need (upstream starts the DRA
/// informers only with DynamicResourceAllocation), less any the server does not serve, so that
/// readiness never waits on a watch that cannot succeed (an API server emulating an older
/// version serves no `resource.k8s.io/v1`).
pub async fn watched_apis(client: &kube::Client, cfg: &KubeSchedulerConfiguration) -> WatchedApis {
    let mut dynamic_resources = cfg.features.dynamic_resource_allocation;
    if dynamic_resources && !api_served(client, "resource.k8s.io/v1").await {
        tracing::warn!(
            "DynamicResourceAllocation is enabled but the API server does not serve resource.k8s.io/v1; \
             ResourceClaims, DeviceClasses and ResourceSlices read as absent"
        );
        dynamic_resources = false;
    }
    WatchedApis { dynamic_resources }
}

/// False only when the server says it has no such group version (404); any other failure
/// leaves the decision to the watches, which retry.
async fn api_served(client: &kube::Client, group_version: &str) -> bool {
    match client.list_api_group_resources(group_version).await {
        Err(kube::Error::Api(status)) => status.code != 404,
        _ => true,
    }
}

/// Starts watchers, waits for the initial sync, then starts the queue flushers and the
/// scheduling loop.
pub async fn start(
    client: kube::Client,
    cfg: &KubeSchedulerConfiguration,
    registry: &Registry,
) -> anyhow::Result<RunningScheduler> {
    start_with(client, cfg, registry, queue_options(cfg), true).await
}

/// [`start`] with explicit queue options; with `run_loop` false the informers run and sync
/// (a hot standby) but nothing is scheduled until [`RunningScheduler::run_loop`].
pub async fn start_with(
    client: kube::Client,
    cfg: &KubeSchedulerConfiguration,
    registry: &Registry,
    queue_opts: QueueOptions,
    run_loop: bool,
) -> anyhow::Result<RunningScheduler> {
    start_with_metrics(client, cfg, registry, queue_opts, run_loop, MetricSinks::default()).await
}

/// Where a scheduler reports its metrics (all no-op by default).
#[derive(Clone)]
pub struct MetricSinks {
    /// Scheduling-loop metrics.
    pub scheduler: Arc<dyn SchedulerMetrics>,
    /// Queue metrics.
    pub queue: Arc<dyn QueueMetrics>,
    /// Framework (extension point / plugin) metrics.
    pub framework: Arc<dyn FrameworkMetrics>,
}

impl Default for MetricSinks {
    fn default() -> Self {
        MetricSinks {
            scheduler: Arc::new(NoopMetrics),
            queue: Arc::new(NoopQueueMetrics),
            framework: Arc::new(NoopFrameworkMetrics),
        }
    }
}

impl MetricSinks {
    /// Every sink reporting to one Prometheus registry.
    pub fn prometheus(metrics: &Arc<PrometheusMetrics>) -> Self {
        MetricSinks { scheduler: metrics.clone(), queue: metrics.clone(), framework: metrics.clone() }
    }
}

/// [`start_with`] reporting to `sinks`.
pub async fn start_with_metrics(
    client: kube::Client,
    cfg: &KubeSchedulerConfiguration,
    registry: &Registry,
    queue_opts: QueueOptions,
    run_loop: bool,
    sinks: MetricSinks,
) -> anyhow::Result<RunningScheduler> {
    let sink = EventSink::start(client.clone());
    let api: Arc<dyn ApiClient> = Arc::new(KubeApiClient::new(client.clone()));
    let (listers, lister_tasks) = WatchListers::start_with(&client, watched_apis(&client, cfg).await);
    let lister: Arc<dyn ClusterLister> = Arc::new(listers.clone());
    let view: Arc<OnceLock<Arc<dyn SchedulerView>>> = Arc::new(OnceLock::new());
    let runtime = tokio::runtime::Handle::current();
    let spawner: Spawner = Arc::new(move |f| {
        runtime.spawn(f);
    });
    let extenders = build_extenders(&cfg.extenders).map_err(|e| anyhow::anyhow!(e))?;
    let profiles = build_profiles_with_metrics(
        cfg,
        registry,
        api,
        &|name| sink.recorder(name),
        lister,
        view.clone(),
        spawner,
        sinks.framework.clone(),
        &extenders,
    )?;
    let frameworks = profiles.iter().map(|(k, p)| (k.clone(), p.framework.clone())).collect();
    let queue = Arc::new(SchedulingQueue::new(frameworks, queue_opts, Arc::new(RealClock), sinks.queue.clone()));
    let pods = Arc::new(PodStore::default());
    let _ = view.set(Arc::new(QueueView::new(&queue, pods.clone())));
    // Weak: the listers are reachable from the queue (through the frameworks' handles), and a
    // strong reference back would keep the whole scheduler alive after shutdown.
    let storage_queue = Arc::downgrade(&queue);
    listers.set_storage_event_handler(Arc::new(move |event, old, new| {
        if let Some(q) = storage_queue.upgrade() {
            q.move_all_to_active_or_backoff(event, old.as_ref(), new.as_ref(), None)
        }
    }));
    let scheduler = Scheduler::with_extenders(
        Arc::new(Cache::new()),
        queue.clone(),
        profiles,
        pods.clone(),
        sinks.scheduler.clone(),
        cfg.percentage_of_nodes_to_score.unwrap_or(0),
        tokio::runtime::Handle::current(),
        extenders,
    );
    crate::memreport::start(&scheduler, tokio::runtime::Handle::current());
    let projection = crate::projection::Projection::for_scheduler(!cfg.extenders.is_empty(), registry);
    let handlers = EventHandlers::new(scheduler.clone(), pods.clone(), projection);
    let mut watchers = eventhandlers::start(client, handlers);
    watchers.tasks.extend(lister_tasks);
    watchers.synced.wait_for(|s| *s).await.context("waiting for the informer caches to sync")?;
    listers.wait_until_ready().await.context("waiting for the lister caches to sync")?;
    tracing::info!("caches synced");
    let mut running =
        RunningScheduler { scheduler, pods, watchers, queue, loop_thread: None, flusher: None, events: sink };
    if run_loop {
        running.run_loop();
    }
    Ok(running)
}
