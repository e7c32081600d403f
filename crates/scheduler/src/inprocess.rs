//! An in-process cluster: the real scheduler (cache, queue, plugins, binding cycles) fed
//! directly from memory, with a loopback API client that applies bindings, status patches and
//! deletions to its own object store and feeds the resulting changes back through the event
//! handlers, exactly as watch events would. Used by `ksched bench --mode inprocess`,
//! simulations and tests: no HTTP, no serialisation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use futures::future::BoxFuture;
use k8s_openapi::api::resource::v1::ResourceClaim;
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::handle::{EventRecorder, NoopRecorder, SchedulerView, Spawner};
use ksched_framework::listers::{ClusterLister, MemoryLister};
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::Registry;
use parking_lot::Mutex;

use crate::app::{build_profiles, queue_options};
use crate::cache::Cache;
use crate::config::KubeSchedulerConfiguration;
use crate::eventhandlers::{EventHandlers, PodStore};
use crate::metrics::SchedulerMetrics;
use crate::queue::{Clock, NoopQueueMetrics, RealClock, SchedulingQueue};
use crate::scheduler::{PodLister, Scheduler};

#[path = "inprocess_dra.rs"]
mod dra;

/// A binding the loopback client applied.
#[derive(Debug, Clone)]
pub struct BindRecord {
    /// `namespace/name`.
    pub pod: String,
    /// The node.
    pub node: String,
    /// When it was applied.
    pub at: Instant,
}

/// The loopback "API server": applies writes to the informer view and fans them back out.
struct Loopback {
    handlers: OnceLock<Weak<EventHandlers>>,
    pods: Arc<PodStore>,
    binds: Mutex<Vec<BindRecord>>,
    rv: AtomicU64,
    /// DRA objects live in the lister; changes to them go to the queue.
    lister: OnceLock<Arc<MemoryLister>>,
    queue: OnceLock<Weak<SchedulingQueue>>,
    dra: dra::DraObjects,
    /// PodGroups by `namespace/name` (their status is patched by the pod-group cycle).
    pod_groups: Mutex<HashMap<String, ksched_framework::podgroup::PodGroup>>,
}

impl Loopback {
    fn next_rv(&self) -> String {
        (self.rv.fetch_add(1, Ordering::Relaxed) + 1).to_string()
    }

    fn apply(&self, mut pod: Pod) {
        pod.metadata.resource_version = Some(self.next_rv());
        if let Some(whole) = pod.object.as_mut() {
            let rv = &pod.metadata.resource_version;
            Arc::make_mut(whole).edit(|w| w.metadata.resource_version.clone_from(rv));
        }
        if let Some(h) = self.handlers.get().and_then(Weak::upgrade) {
            h.on_pod(pod);
        }
    }

    fn current(&self, ns: &str, name: &str) -> Result<Pod, ApiError> {
        self.pods
            .get(ns, name)
            .map(|p| (*p).clone())
            .ok_or_else(|| ApiError { code: 404, message: format!("pods {name:?} not found") })
    }
}

struct LoopbackClient(Arc<Loopback>);

impl ApiClient for LoopbackClient {
    fn answers_in_place(&self) -> bool {
        true
    }

    fn bind(&self, pod: &Pod, node: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        let lb = self.0.clone();
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let node = node.to_string();
        Box::pin(async move {
            let mut p = lb.current(&ns, &name)?;
            let spec = p.spec.get_or_insert_with(Default::default);
            if spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
                return Err(ApiError {
                    code: 409,
                    message: format!("pod {name} is already assigned to node {node:?}"),
                });
            }
            spec.node_name = Some(node.clone());
            if let Some(whole) = p.object.as_mut() {
                Arc::make_mut(whole)
                    .edit(|w| w.spec.get_or_insert_with(Default::default).node_name = Some(node.clone()));
            }
            lb.binds.lock().push(BindRecord { pod: format!("{ns}/{name}"), node, at: Instant::now() });
            lb.apply(p);
            Ok(())
        })
    }

    fn patch_pod_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), ApiError>> {
        let lb = self.0.clone();
        let (ns, name) = (namespace.to_string(), name.to_string());
        Box::pin(async move {
            let p = lb.current(&ns, &name)?;
            let mut v = serde_json::to_value(&p).map_err(|e| ApiError { code: 500, message: e.to_string() })?;
            merge_status(&mut v, &patch);
            let invalid = |e: serde_json::Error| ApiError { code: 422, message: e.to_string() };
            // The patched whole object stays whole (it is what was serialized).
            let p = match p.object {
                Some(_) => Pod::with_object(serde_json::from_value(v).map_err(invalid)?),
                None => serde_json::from_value(v).map_err(invalid)?,
            };
            lb.apply(p);
            Ok(())
        })
    }

    fn get_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, Result<Option<Pod>, ApiError>> {
        let pod = self.0.pods.get(namespace, name).map(|p| (*p).clone());
        Box::pin(async move { Ok(pod) })
    }

    fn delete_pod(&self, namespace: &str, name: &str, uid: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        let lb = self.0.clone();
        let (ns, name, uid) = (namespace.to_string(), name.to_string(), uid.map(str::to_string));
        Box::pin(async move {
            let Ok(p) = lb.current(&ns, &name) else { return Ok(()) };
            if uid.is_some() && p.metadata.uid != uid {
                return Err(ApiError { code: 409, message: "uid precondition failed".into() });
            }
            if let Some(h) = lb.handlers.get().and_then(Weak::upgrade) {
                h.on_pod_deleted(&p);
            }
            lb.delete_claims_of(&p);
            Ok(())
        })
    }

    fn get_resource_claim(&self, ns: &str, name: &str) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.0.claim_future(self.0.get_claim(ns, name))
    }
    fn create_resource_claim(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.0.claim_future(self.0.write_claim(c.clone(), true))
    }
    fn update_resource_claim(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.0.claim_future(self.0.write_claim(c.clone(), false))
    }
    fn update_resource_claim_status(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.0.claim_future(self.0.write_claim(c.clone(), false))
    }
    fn patch_resource_claim_status(
        &self,
        ns: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        self.0.claim_future(self.0.patch_claim_status(ns, name, &patch))
    }
    fn delete_resource_claim(&self, ns: &str, name: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        let r = self.0.delete_claim(ns, name);
        Box::pin(async move { r })
    }
    fn patch_pod_group_status(
        &self,
        ns: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), ApiError>> {
        let r = self.0.patch_pod_group_status(ns, name, &patch);
        Box::pin(async move { r })
    }
}

impl Loopback {
    fn apply_pod_group(&self, mut pg: ksched_framework::podgroup::PodGroup) {
        pg.metadata.resource_version = Some(self.next_rv());
        let ns = pg.metadata.namespace.get_or_insert_with(|| "default".into()).clone();
        let key = format!("{ns}/{}", pg.metadata.name.as_deref().unwrap_or_default());
        self.pod_groups.lock().insert(key, pg.clone());
        if let Some(h) = self.handlers.get().and_then(Weak::upgrade) {
            h.on_pod_group(pg);
        }
    }

    fn patch_pod_group_status(&self, ns: &str, name: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
        let current = self.pod_groups.lock().get(&format!("{ns}/{name}")).cloned();
        let Some(pg) = current else {
            return Err(ApiError { code: 404, message: format!("podgroups.scheduling.k8s.io {name:?} not found") });
        };
        let mut v = serde_json::to_value(&pg).map_err(|e| ApiError { code: 500, message: e.to_string() })?;
        merge_status(&mut v, patch);
        let pg = serde_json::from_value(v).map_err(|e| ApiError { code: 422, message: e.to_string() })?;
        self.apply_pod_group(pg);
        Ok(())
    }
}

/// Merges `patch.status` into `obj.status`: maps merge, `conditions` merge by `type` (the
/// strategic-merge key), other values replace.
fn merge_status(obj: &mut serde_json::Value, patch: &serde_json::Value) {
    let Some(ps) = patch.get("status").and_then(|s| s.as_object()) else { return };
    let status = obj.as_object_mut().map(|o| o.entry("status").or_insert_with(|| serde_json::json!({})));
    let Some(status) = status.and_then(|s| s.as_object_mut()) else { return };
    for (k, v) in ps {
        if k == "conditions" {
            let list = status.entry("conditions").or_insert_with(|| serde_json::json!([]));
            let Some(list) = list.as_array_mut() else { continue };
            for c in v.as_array().into_iter().flatten() {
                match list.iter_mut().find(|e| e.get("type") == c.get("type")) {
                    Some(e) => *e = c.clone(),
                    None => list.push(c.clone()),
                }
            }
        } else if v.is_null() {
            status.remove(k);
        } else {
            status.insert(k.clone(), v.clone());
        }
    }
}

/// A scheduler with an in-memory cluster around it.
pub struct InProcessCluster {
    /// The scheduler.
    pub scheduler: Arc<Scheduler>,
    /// Objects other than pods and nodes (namespaces, workloads, volumes, PDBs).
    pub lister: Arc<MemoryLister>,
    handlers: Arc<EventHandlers>,
    loopback: Arc<Loopback>,
    loop_thread: Option<std::thread::JoinHandle<()>>,
    flusher: Option<std::thread::JoinHandle<()>>,
}

impl InProcessCluster {
    /// Builds a scheduler for `cfg` (defaulted) on the current tokio runtime; call
    /// [`InProcessCluster::start`] after adding the initial objects.
    pub fn new(
        cfg: &KubeSchedulerConfiguration,
        registry: &Registry,
        metrics: Arc<dyn SchedulerMetrics>,
    ) -> anyhow::Result<Self> {
        Self::with_client_wrapper(cfg, registry, metrics, |c| c)
    }

    /// Like [`InProcessCluster::new`], with the scheduler's API client wrapped by `wrap`
    /// (tests use it to delay or fail writes).
    pub fn with_client_wrapper(
        cfg: &KubeSchedulerConfiguration,
        registry: &Registry,
        metrics: Arc<dyn SchedulerMetrics>,
        wrap: impl FnOnce(Arc<dyn ApiClient>) -> Arc<dyn ApiClient>,
    ) -> anyhow::Result<Self> {
        Self::build(cfg, registry, metrics, wrap, Arc::new(RealClock))
    }

    /// Like [`InProcessCluster::new`], with the queue's backoffs and flushes timed by `clock`
    /// (a simulation's virtual clock; start it with [`InProcessCluster::start_without_flushers`]
    /// and flush the queue as that clock moves).
    pub fn with_clock(
        cfg: &KubeSchedulerConfiguration,
        registry: &Registry,
        metrics: Arc<dyn SchedulerMetrics>,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        Self::build(cfg, registry, metrics, |c| c, clock)
    }

    fn build(
        cfg: &KubeSchedulerConfiguration,
        registry: &Registry,
        metrics: Arc<dyn SchedulerMetrics>,
        wrap: impl FnOnce(Arc<dyn ApiClient>) -> Arc<dyn ApiClient>,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let pods = Arc::new(PodStore::default());
        let loopback = Arc::new(Loopback {
            handlers: OnceLock::new(),
            pods: pods.clone(),
            binds: Mutex::new(Vec::new()),
            rv: AtomicU64::new(0),
            lister: OnceLock::new(),
            queue: OnceLock::new(),
            dra: Default::default(),
            pod_groups: Mutex::default(),
        });
        let lister = Arc::new(MemoryLister::default());
        let _ = loopback.lister.set(lister.clone());
        let view: Arc<OnceLock<Arc<dyn SchedulerView>>> = Arc::new(OnceLock::new());
        let runtime = tokio::runtime::Handle::current();
        let spawner: Spawner = Arc::new(move |f| {
            runtime.spawn(f);
        });
        let client: Arc<dyn ApiClient> = wrap(Arc::new(LoopbackClient(loopback.clone())));
        let recorder = |_: &str| -> Arc<dyn EventRecorder> { Arc::new(NoopRecorder) };
        let cluster_lister: Arc<dyn ClusterLister> = lister.clone();
        let extenders = crate::extender::build_extenders(&cfg.extenders).map_err(|e| anyhow::anyhow!(e))?;
        let profiles =
            build_profiles(cfg, registry, client, &recorder, cluster_lister, view.clone(), spawner, &extenders)?;
        let frameworks = profiles.iter().map(|(k, p)| (k.clone(), p.framework.clone())).collect();
        let queue = Arc::new(SchedulingQueue::new(frameworks, queue_options(cfg), clock, Arc::new(NoopQueueMetrics)));
        let _ = view.set(Arc::new(crate::app::QueueView::new(&queue, pods.clone())));
        let _ = loopback.queue.set(Arc::downgrade(&queue));
        let scheduler = Scheduler::with_extenders(
            Arc::new(Cache::new()),
            queue,
            profiles,
            pods.clone(),
            metrics,
            cfg.percentage_of_nodes_to_score.unwrap_or(0),
            tokio::runtime::Handle::current(),
            extenders,
        );
        let projection = crate::projection::Projection::for_scheduler(!cfg.extenders.is_empty(), registry);
        let handlers = EventHandlers::new(scheduler.clone(), pods, projection);
        let _ = loopback.handlers.set(Arc::downgrade(&handlers));
        Ok(InProcessCluster { scheduler, lister, handlers, loopback, loop_thread: None, flusher: None })
    }

    /// Adds or updates a node.
    pub fn apply_node(&self, node: impl IntoNode) {
        let mut node = node.into_node(self.handlers.projection());
        let rv = self.loopback.next_rv();
        if let Some(object) = node.object.as_mut() {
            Arc::make_mut(object).metadata.resource_version = Some(rv.clone());
        }
        node.metadata.resource_version = Some(rv);
        self.handlers.on_node(node);
    }

    /// Deletes a node.
    pub fn delete_node(&self, node: &Node) {
        self.handlers.on_node_deleted(node);
    }

    /// Adds or updates a pod (assigns a UID when missing).
    pub fn apply_pod(&self, pod: impl IntoPod) {
        let mut pod = pod.into_pod(self.handlers.projection());
        if pod.metadata.uid.is_none() {
            let ns = pod.metadata.namespace.get_or_insert_with(|| "default".into()).clone();
            pod.metadata.uid =
                Some(format!("{ns}-{}-{}", pod.metadata.name.as_deref().unwrap_or(""), self.loopback.next_rv()));
        }
        if pod.spec.as_ref().and_then(|s| s.scheduler_name.as_ref()).is_none() {
            pod.spec.get_or_insert_with(Default::default).scheduler_name = Some("default-scheduler".into());
        }
        self.loopback.make_template_claims(&mut pod);
        if let Some(whole) = pod.object.as_mut() {
            Arc::make_mut(whole).edit(|whole| {
                whole.metadata.namespace.clone_from(&pod.metadata.namespace);
                whole.metadata.uid.clone_from(&pod.metadata.uid);
                let spec = whole.spec.get_or_insert_with(Default::default);
                spec.scheduler_name = pod.spec.as_ref().and_then(|s| s.scheduler_name.clone());
                if let Some(claims) = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.clone()) {
                    whole.status.get_or_insert_with(Default::default).resource_claim_statuses = Some(claims);
                }
            });
        }
        self.loopback.apply(pod);
    }

    /// Deletes a pod.
    pub fn delete_pod(&self, pod: &Pod) {
        self.handlers.on_pod_deleted(pod);
        self.loopback.delete_claims_of(pod);
    }

    /// Adds or updates a PodGroup (ignored unless GenericWorkload is on).
    pub fn apply_pod_group(&self, pg: ksched_framework::podgroup::PodGroup) {
        self.loopback.apply_pod_group(pg);
    }

    /// The current version of a PodGroup (with the status the scheduler patched).
    pub fn pod_group(&self, namespace: &str, name: &str) -> Option<ksched_framework::podgroup::PodGroup> {
        self.loopback.pod_groups.lock().get(&format!("{namespace}/{name}")).cloned()
    }

    /// Starts the queue flushers and the scheduling loop.
    pub fn start(&mut self) {
        self.flusher = Some(self.scheduler.queue.spawn_flushers());
        self.loop_thread = Some(self.scheduler.run());
    }

    /// Starts the scheduling loop only: the caller flushes the queue's backoff and leftover
    /// pools itself (a driver of a virtual clock, at the instants of that clock).
    pub fn start_without_flushers(&mut self) {
        self.loop_thread = Some(self.scheduler.run());
    }

    /// Bindings applied so far, in order.
    pub fn binds(&self) -> Vec<BindRecord> {
        self.loopback.binds.lock().clone()
    }

    /// Removes and returns the bindings recorded so far, in order. A poller takes them in O(1)
    /// under the lock every binding also takes: copying them there (about 1400 records per
    /// 100 ms poll at 14k pods/s) held up bindings for up to a millisecond.
    pub fn take_binds(&self) -> Vec<BindRecord> {
        std::mem::take(&mut *self.loopback.binds.lock())
    }

    /// Number of bindings applied so far.
    pub fn bound(&self) -> usize {
        self.loopback.binds.lock().len()
    }

    /// The current version of a pod.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.loopback.pods.get(namespace, name)
    }

    /// Node of every bound pod, by `namespace/name`.
    pub fn placements(&self) -> HashMap<String, String> {
        self.loopback.binds.lock().iter().map(|b| (b.pod.clone(), b.node.clone())).collect()
    }

    /// Stops the loop and waits for in-flight bindings.
    pub async fn stop(mut self) {
        self.scheduler.stop();
        self.scheduler.wait_for_bindings(std::time::Duration::from_secs(5)).await;
        for t in [self.loop_thread.take(), self.flusher.take()].into_iter().flatten() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// A pod as a test or the bench hands it to [`InProcessCluster::apply_pod`]: the scheduler's own
/// type, or the API's (kept whole beside its projection when the scheduler keeps whole objects,
/// as the watchers do).
pub trait IntoPod {
    /// The pod as the scheduler keeps it under `projection`.
    fn into_pod(self, projection: crate::projection::Projection) -> Pod;
}

impl IntoPod for Pod {
    fn into_pod(self, _: crate::projection::Projection) -> Pod {
        self
    }
}

impl IntoPod for k8s_openapi::api::core::v1::Pod {
    fn into_pod(self, projection: crate::projection::Projection) -> Pod {
        match projection {
            crate::projection::Projection::Full => Pod::with_object(self),
            crate::projection::Projection::Scheduling => Pod::from(self),
        }
    }
}

/// A node as a test or the bench hands it to [`InProcessCluster::apply_node`], like [`IntoPod`].
pub trait IntoNode {
    /// The node as the scheduler keeps it under `projection`.
    fn into_node(self, projection: crate::projection::Projection) -> Node;
}

impl IntoNode for Node {
    fn into_node(self, _: crate::projection::Projection) -> Node {
        self
    }
}

impl IntoNode for k8s_openapi::api::core::v1::Node {
    fn into_node(self, projection: crate::projection::Projection) -> Node {
        match projection {
            crate::projection::Projection::Full => Node::with_object(self),
            crate::projection::Projection::Scheduling => Node::from(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}))
        .unwrap()
    }

    /// Waits (up to 10 s) until the loopback has applied `n` bindings.
    async fn wait_for_binds(c: &InProcessCluster, n: usize) {
        let start = Instant::now();
        while c.bound() < n && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn binds_through_the_loopback_and_reports_failures() {
        let cfg = crate::config::default_config();
        let mut c =
            InProcessCluster::new(&cfg, &ksched_plugins::in_tree_registry(), Arc::new(crate::metrics::NoopMetrics))
                .unwrap();
        c.apply_node(node("a", "2"));
        c.apply_node(node("b", "1"));
        for i in 0..3 {
            c.apply_pod(pod(&format!("p{i}"), "1"));
        }
        c.apply_pod(pod("too-big", "4"));
        c.start();
        wait_for_binds(&c, 3).await;
        let placements = c.placements();
        assert_eq!(placements.len(), 3, "{placements:?}");
        assert_eq!(placements.values().filter(|n| *n == "a").count(), 2);
        let all = c.binds();
        assert_eq!(
            c.take_binds().iter().map(|b| &b.pod).collect::<Vec<_>>(),
            all.iter().map(|b| &b.pod).collect::<Vec<_>>()
        );
        assert!(c.take_binds().is_empty(), "taken records are gone");
        assert_eq!(c.bound(), 0);
        // the failure handler patched the refused pod's condition through the loopback
        let start = Instant::now();
        let msg = loop {
            let p = c.pod("default", "too-big").unwrap();
            let m = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled").and_then(|c| c.message.clone()));
            if let Some(m) = m {
                break m;
            }
            assert!(start.elapsed() < Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert!(msg.starts_with("0/2 nodes are available: 2 Insufficient cpu."), "{msg}");
        c.stop().await;
    }

    /// A cluster whose binder is the test plugin `name` (made by `factory`) instead of
    /// DefaultBinder; `also` lists further extension points that enable it.
    fn cluster_binding_with(
        name: &str,
        also: &[&str],
        factory: impl Fn(
                Option<&serde_json::Value>,
                &ksched_framework::handle::Handle,
            ) -> Result<Arc<dyn ksched_framework::Plugin>, String>
            + Send
            + Sync
            + 'static,
    ) -> InProcessCluster {
        let mut yaml = String::from(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n",
        );
        for point in also {
            yaml.push_str(&format!("    {point}:\n      enabled: [{{name: {name}}}]\n"));
        }
        yaml.push_str(&format!(
            "    bind:\n      enabled: [{{name: {name}}}]\n      disabled: [{{name: DefaultBinder}}]\n"
        ));
        let cfg = crate::config::load_config(yaml.as_bytes(), "test").unwrap();
        let mut registry = ksched_plugins::in_tree_registry();
        registry.register(name, factory).unwrap();
        InProcessCluster::new(&cfg, &registry, Arc::new(crate::metrics::NoopMetrics)).unwrap()
    }

    /// Binds as the scheduler would by default, through `binder` (a DefaultBinder).
    fn bind_by_default<'a>(
        binder: &'a dyn ksched_framework::Plugin,
        state: &'a ksched_framework::CycleState,
        pod: &'a ksched_framework::PodInfo,
        node: &'a str,
    ) -> BoxFuture<'a, ksched_framework::Status> {
        binder.as_bind().expect("DefaultBinder binds").bind(state, pod, node)
    }

    /// Fails the first binding of the pod named `big` half a second in; binds everything else.
    struct FailFirstBind {
        binder: Arc<dyn ksched_framework::Plugin>,
        failed: std::sync::atomic::AtomicBool,
    }

    impl ksched_framework::Plugin for FailFirstBind {
        fn name(&self) -> &str {
            "FailFirstBind"
        }
        fn as_bind(&self) -> Option<&dyn ksched_framework::BindPlugin> {
            Some(self)
        }
    }

    impl ksched_framework::BindPlugin for FailFirstBind {
        fn bind<'a>(
            &'a self,
            state: &'a ksched_framework::CycleState,
            pod: &'a ksched_framework::PodInfo,
            node: &'a str,
        ) -> BoxFuture<'a, ksched_framework::Status> {
            Box::pin(async move {
                if pod.name() == "big" && !self.failed.swap(true, Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    return ksched_framework::Status::error("injected binding failure");
                }
                bind_by_default(self.binder.as_ref(), state, pod, node).await
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_binding_frees_the_node_for_a_pod_that_waited_on_it() {
        let mut c = cluster_binding_with("FailFirstBind", &[], |_, handle| {
            Ok(Arc::new(FailFirstBind {
                binder: ksched_plugins::defaultbinder::new(None, handle)?,
                failed: Default::default(),
            }))
        });
        c.apply_node(node("a", "1"));
        // `big` goes first (higher priority) and is assumed on `a`; `waiter` is then found
        // unschedulable while `big`'s binding hangs. The failed binding must requeue `waiter`
        // (an assigned pod left the node), which is then retried before `big` comes out of the
        // backoff its failure earned, so it wins `a`. Without the requeue `big` would get `a`.
        let mut big = pod("big", "1");
        big.spec.as_mut().unwrap().priority = Some(10);
        c.apply_pod(big);
        c.apply_pod(pod("waiter", "1"));
        c.start();
        wait_for_binds(&c, 1).await;
        let placements = c.placements();
        assert_eq!(placements.get("default/waiter").map(String::as_str), Some("a"), "{placements:?}");
        assert!(!placements.contains_key("default/big"), "{placements:?}");
        c.stop().await;
    }

    /// Records the thread each pod's PreFilter and Bind ran on; the binding of a pod named
    /// `slow*` first waits a moment, as one waiting on an API call or a Permit would.
    #[derive(Default)]
    struct RecordsThreads {
        binder: std::sync::OnceLock<Arc<dyn ksched_framework::Plugin>>,
        threads: Mutex<Vec<(String, &'static str, std::thread::ThreadId)>>,
    }

    impl RecordsThreads {
        fn note(&self, pod: &str, point: &'static str) {
            self.threads.lock().push((pod.to_string(), point, std::thread::current().id()));
        }

        fn thread_of(&self, pod: &str, point: &str) -> std::thread::ThreadId {
            let t = self.threads.lock();
            t.iter().find(|(p, x, _)| p == pod && *x == point).map(|e| e.2).unwrap_or_else(|| panic!("{pod} {point}"))
        }
    }

    impl ksched_framework::Plugin for RecordsThreads {
        fn name(&self) -> &str {
            "RecordsThreads"
        }
        fn as_pre_filter(&self) -> Option<&dyn ksched_framework::PreFilterPlugin> {
            Some(self)
        }
        fn as_bind(&self) -> Option<&dyn ksched_framework::BindPlugin> {
            Some(self)
        }
    }

    impl ksched_framework::PreFilterPlugin for RecordsThreads {
        fn pre_filter(
            &self,
            _: &mut ksched_framework::CycleState,
            pod: &ksched_framework::PodInfo,
            _: &ksched_framework::Snapshot,
        ) -> (Option<ksched_framework::interface::PreFilterResult>, ksched_framework::Status) {
            self.note(pod.name(), "PreFilter");
            (None, ksched_framework::Status::skip())
        }
    }

    impl ksched_framework::BindPlugin for RecordsThreads {
        fn bind<'a>(
            &'a self,
            state: &'a ksched_framework::CycleState,
            pod: &'a ksched_framework::PodInfo,
            node: &'a str,
        ) -> BoxFuture<'a, ksched_framework::Status> {
            Box::pin(async move {
                if pod.name().starts_with("slow") {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                self.note(pod.name(), "Bind");
                bind_by_default(self.binder.get().expect("binder set").as_ref(), state, pod, node).await
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_binding_that_does_not_wait_runs_on_the_scheduling_thread() {
        let recorder = Arc::new(RecordsThreads::default());
        let r = recorder.clone();
        let mut c = cluster_binding_with("RecordsThreads", &["preFilter"], move |_, handle| {
            let _ = r.binder.set(ksched_plugins::defaultbinder::new(None, handle)?);
            Ok(r.clone() as Arc<dyn ksched_framework::Plugin>)
        });
        c.apply_node(node("a", "4"));
        for name in ["fast-1", "slow-1", "fast-2", "slow-2"] {
            c.apply_pod(pod(name, "1"));
        }
        c.start();
        wait_for_binds(&c, 4).await;
        assert_eq!(c.placements().len(), 4, "{:?}", c.placements());
        for name in ["fast-1", "fast-2"] {
            // The loopback answers at once: no hand-off to a runtime worker.
            assert_eq!(recorder.thread_of(name, "Bind"), recorder.thread_of(name, "PreFilter"), "{name}");
        }
        for name in ["slow-1", "slow-2"] {
            // A binding that waits is handed to the runtime and finishes there.
            assert_ne!(recorder.thread_of(name, "Bind"), recorder.thread_of(name, "PreFilter"), "{name}");
        }
        c.stop().await;
    }

    /// Logs the order in which writes reach the loopback and holds the first status patch of
    /// `slow` until a binding of `slow` is attempted, or 2 s passed: the worst case of a status
    /// write that is slow to land.
    struct HoldFirstStatusPatch {
        inner: Arc<dyn ApiClient>,
        log: Arc<Mutex<Vec<String>>>,
        bind_attempted: tokio::sync::watch::Sender<bool>,
        patch_held: tokio::sync::watch::Sender<bool>,
    }

    impl ApiClient for HoldFirstStatusPatch {
        fn bind(&self, pod: &Pod, node: &str) -> BoxFuture<'static, Result<(), ApiError>> {
            let name = pod.metadata.name.clone().unwrap_or_default();
            self.bind_attempted.send_replace(true);
            let log = self.log.clone();
            let bind = self.inner.bind(pod, node);
            Box::pin(async move {
                let r = bind.await;
                log.lock().push(format!("bind {name}"));
                r
            })
        }

        fn patch_pod_status(
            &self,
            namespace: &str,
            name: &str,
            patch: serde_json::Value,
        ) -> BoxFuture<'static, Result<(), ApiError>> {
            let first = name == "slow" && !self.patch_held.send_replace(true);
            let mut bind_attempted = self.bind_attempted.subscribe();
            let log = self.log.clone();
            let inner = self.inner.clone();
            let (ns, name) = (namespace.to_string(), name.to_string());
            Box::pin(async move {
                if first {
                    let _ = tokio::time::timeout(Duration::from_secs(2), bind_attempted.wait_for(|b| *b)).await;
                }
                let r = inner.patch_pod_status(&ns, &name, patch).await;
                log.lock().push(format!("status {name}"));
                r
            })
        }

        fn delete_pod(
            &self,
            namespace: &str,
            name: &str,
            uid: Option<&str>,
        ) -> BoxFuture<'static, Result<(), ApiError>> {
            self.inner.delete_pod(namespace, name, uid)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_failure_status_write_lands_before_the_pods_later_binding() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (bind_attempted, _) = tokio::sync::watch::channel(false);
        let (patch_held, mut held) = tokio::sync::watch::channel(false);
        let (l, b, h) = (log.clone(), bind_attempted.clone(), patch_held.clone());
        let cfg = crate::config::default_config();
        let mut c = InProcessCluster::with_client_wrapper(
            &cfg,
            &ksched_plugins::in_tree_registry(),
            Arc::new(crate::metrics::NoopMetrics),
            move |inner| Arc::new(HoldFirstStatusPatch { inner, log: l, bind_attempted: b, patch_held: h }),
        )
        .unwrap();
        c.apply_node(node("a", "1"));
        c.apply_pod(pod("slow", "2"));
        c.start();
        // The first attempt fails; its PodScheduled=False write is now in flight (held).
        tokio::time::timeout(Duration::from_secs(10), held.wait_for(|h| *h)).await.unwrap().unwrap();
        // The node grows and the pod is retried at once: it fits and binds.
        c.apply_node(node("a", "4"));
        let p = c.pod("default", "slow").unwrap();
        c.scheduler.queue.activate(&[p]);
        wait_for_binds(&c, 1).await;
        assert_eq!(c.placements().get("default/slow").map(String::as_str), Some("a"));
        let start = Instant::now();
        while log.lock().len() < 2 && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Written after the binding, the failure's condition would report the bound pod as
        // unschedulable.
        assert_eq!(*log.lock(), ["status slow", "bind slow"]);
        c.stop().await;
    }

    /// Answers like an API server where another binder won the race, before our informer saw
    /// that binding: 409 "already assigned", the binding itself showing up 50 ms later.
    struct LosesTheRace(Arc<dyn ApiClient>);

    impl ksched_framework::Plugin for LosesTheRace {
        fn name(&self) -> &str {
            "LosesTheRace"
        }
        fn as_bind(&self) -> Option<&dyn ksched_framework::BindPlugin> {
            Some(self)
        }
    }

    impl ksched_framework::BindPlugin for LosesTheRace {
        fn bind<'a>(
            &'a self,
            _: &'a ksched_framework::CycleState,
            pod: &'a ksched_framework::PodInfo,
            node: &'a str,
        ) -> BoxFuture<'a, ksched_framework::Status> {
            let (client, p, n) = (self.0.clone(), pod.pod.clone(), node.to_string());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = client.bind(&p, &n).await;
            });
            let name = pod.name();
            Box::pin(async move {
                ksched_framework::Status::error(format!(
                    "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{node}\""
                ))
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pod_someone_else_bound_is_not_reported_as_failed() {
        let mut c =
            cluster_binding_with("LosesTheRace", &[], |_, handle| Ok(Arc::new(LosesTheRace(handle.client.clone()))));
        c.apply_node(node("a", "2"));
        c.apply_pod(pod("p", "1"));
        c.start();
        wait_for_binds(&c, 1).await;
        assert!(c.scheduler.wait_for_bindings(Duration::from_secs(5)).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let p = c.pod("default", "p").unwrap();
        assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("a"));
        let failed =
            p.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten().find(|c| c.status == "False");
        assert!(failed.is_none(), "a bound pod reported as failed: {failed:?}");
        c.stop().await;
    }

    /// Answers p1's first binding with a dropped connection although the server applied it:
    /// its own informer learns of it only 300 ms later, while a read of the pod already shows
    /// it bound. Everything else passes through.
    struct LostBindingAnswer {
        inner: Arc<dyn ApiClient>,
        answered: tokio::sync::watch::Sender<bool>,
    }

    impl ApiClient for LostBindingAnswer {
        fn bind(&self, pod: &Pod, node: &str) -> BoxFuture<'static, Result<(), ApiError>> {
            if pod.metadata.name.as_deref() != Some("p1") || self.answered.send_replace(true) {
                return self.inner.bind(pod, node);
            }
            let (inner, pod, node) = (self.inner.clone(), pod.clone(), node.to_string());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = inner.bind(&pod, &node).await;
            });
            Box::pin(async { Err(ApiError { code: 0, message: "connection reset by peer".into() }) })
        }
        fn get_pod(&self, namespace: &str, name: &str) -> BoxFuture<'static, Result<Option<Pod>, ApiError>> {
            let bound_on_server = *self.answered.borrow() && name == "p1";
            let cur = self.inner.get_pod(namespace, name);
            Box::pin(async move {
                let mut p = cur.await?;
                if let Some(p) = p.as_mut().filter(|_| bound_on_server) {
                    p.spec.get_or_insert_with(Default::default).node_name = Some("a".into());
                }
                Ok(p)
            })
        }
        fn patch_pod_status(
            &self,
            ns: &str,
            name: &str,
            patch: serde_json::Value,
        ) -> BoxFuture<'static, Result<(), ApiError>> {
            self.inner.patch_pod_status(ns, name, patch)
        }
        fn delete_pod(
            &self,
            namespace: &str,
            name: &str,
            uid: Option<&str>,
        ) -> BoxFuture<'static, Result<(), ApiError>> {
            self.inner.delete_pod(namespace, name, uid)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_binding_applied_but_unanswered_keeps_its_room_on_the_node() {
        let (answered, mut rx) = tokio::sync::watch::channel(false);
        let tx = answered.clone();
        let cfg = crate::config::default_config();
        let mut c = InProcessCluster::with_client_wrapper(
            &cfg,
            &ksched_plugins::in_tree_registry(),
            Arc::new(crate::metrics::NoopMetrics),
            move |inner| Arc::new(LostBindingAnswer { inner, answered: tx }),
        )
        .unwrap();
        c.apply_node(node("a", "1"));
        c.apply_pod(pod("p1", "1"));
        c.start();
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|a| *a)).await.unwrap().unwrap();
        // p1 holds the node on the server; p2 must not get it while our informer lags.
        c.apply_pod(pod("p2", "1"));
        wait_for_binds(&c, 1).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        let placements = c.placements();
        assert_eq!(placements.get("default/p1").map(String::as_str), Some("a"), "{placements:?}");
        assert!(!placements.contains_key("default/p2"), "p2 double-booked node a: {placements:?}");
        c.stop().await;
    }
}
