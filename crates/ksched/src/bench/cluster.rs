//! Where a workload runs: the in-process cluster, or an API server (embedded or external)
//! reached over HTTP with our scheduler (or none) scheduling against it. Both report pods seen
//! bound or unschedulable into a shared [`Observed`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::CSINode;
use ksched_apiserver::{ApiServer, RunningServer, ServerConfig};
use ksched_scheduler::app::{self, MetricSinks, RunningScheduler};
use ksched_scheduler::config::KubeSchedulerConfiguration;
use ksched_scheduler::inprocess::InProcessCluster;
use ksched_scheduler::metrics::SchedulerMetrics;
use ksched_scheduler::queue::QueueName;
use ksched_scheduler::scheduler::PodLister as _;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use parking_lot::Mutex;
use serde_json::json;

/// Concurrent creators in API modes (upstream's `createPods` workers).
pub const CREATE_CONCURRENCY: usize = 30;

/// Label put on everything created in API modes: the pod watcher selects on it, and external
/// clean-up deletes by it.
pub const RUN_LABEL: &str = "ksched-bench";

/// Where pods are seen bound or refused.
#[derive(Debug, Default)]
pub struct Observed {
    /// `namespace/name` → when first seen bound.
    pub bound: HashMap<String, Instant>,
    /// Bind observation times per namespace, in observation order.
    pub bound_by_ns: HashMap<String, Vec<Instant>>,
    /// Pods whose latest status says `PodScheduled=False` (Unschedulable) and that are not bound.
    pub unschedulable: HashSet<String>,
    /// Pods seen at all (API modes: by the watcher).
    pub seen: HashSet<String>,
}

impl Observed {
    fn mark_bound(&mut self, key: String, at: Instant) {
        if self.bound.contains_key(&key) {
            return;
        }
        self.unschedulable.remove(&key);
        let ns = key.split('/').next().unwrap_or_default();
        self.bound_by_ns.entry(ns.to_string()).or_default().push(at);
        self.bound.insert(key, at);
    }

    /// Forgets a deleted pod (soak: keeps the bookkeeping as flat as the cluster). Bind times
    /// of its namespace go too: only the measured op reads them, and it is over.
    pub fn forget(&mut self, key: &str) {
        self.bound.remove(key);
        self.unschedulable.remove(key);
        self.seen.remove(key);
        if let Some(ns) = key.split('/').next() {
            self.bound_by_ns.remove(ns);
        }
    }

    /// Pods of `keys` bound or refused.
    pub fn accounted(&self, keys: &[String]) -> (usize, usize) {
        let bound = keys.iter().filter(|k| self.bound.contains_key(*k)).count();
        let refused = keys.iter().filter(|k| self.unschedulable.contains(*k)).count();
        (bound, refused)
    }

    /// The pods of `keys` seen neither bound nor refused.
    pub fn unaccounted(&self, keys: &[String]) -> Vec<String> {
        keys.iter().filter(|k| !self.bound.contains_key(*k) && !self.unschedulable.contains(*k)).cloned().collect()
    }
}

/// `namespace/name` of a pod.
pub fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or("default"), pod.metadata.name.as_deref().unwrap_or(""))
}

fn is_unschedulable(pod: &Pod) -> bool {
    unschedulable_condition(pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
}

/// True when `conditions` say the scheduler found no node (`PodScheduled=False/Unschedulable`).
fn unschedulable_condition(conditions: Option<&Vec<k8s_openapi::api::core::v1::PodCondition>>) -> bool {
    conditions.is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    })
}

fn is_bound(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
}

/// A pod to create, with the pre-bound volume it mounts.
#[derive(Debug, Clone)]
pub struct PodItem {
    /// The pod.
    pub pod: Pod,
    /// Its claim and volume.
    pub volume: Option<(PersistentVolumeClaim, PersistentVolume)>,
}

/// An object a churn op made, to delete later.
#[derive(Debug, Clone)]
pub enum ChurnHandle {
    /// A node.
    Node(Box<Node>),
    /// A pod.
    Pod(Box<Pod>),
    /// A service.
    Service(Box<Service>),
}

/// How the bench reaches a cluster.
#[derive(Clone)]
pub enum Backend {
    /// [`InProcessCluster`].
    InProcess(Arc<InProc>),
    /// An API server over HTTP.
    Api(Arc<ApiCluster>),
}

/// The in-process cluster and what the bench tracks about it.
pub struct InProc {
    cluster: Mutex<Option<Arc<InProcessCluster>>>,
    observed: Arc<Mutex<Observed>>,
}

impl InProc {
    fn cluster(&self) -> anyhow::Result<Arc<InProcessCluster>> {
        self.cluster.lock().clone().context("the in-process cluster was stopped")
    }
}

/// An API server with, optionally, our scheduler.
pub struct ApiCluster {
    client: kube::Client,
    server: Mutex<Option<RunningServer>>,
    scheduler: Mutex<Option<RunningScheduler>>,
    observed: Arc<Mutex<Observed>>,
    watch_task: tokio::task::JoinHandle<()>,
    run_id: String,
    external: bool,
    namespaces: Mutex<Vec<String>>,
    chaos: Option<Arc<super::chaos::Chaos>>,
}

/// Which priority class stands for a literal `spec.priority` (the upstream harness disables the
/// Priority admission plugin; real API servers and ours reject a bare priority).
fn priority_class(p: i32) -> String {
    format!("ksched-bench-priority-{p}")
}

const BENCH_PRIORITIES: [i32; 1] = [10];

/// Our scheduler against an API server, reporting to `metrics` (the product's wiring).
async fn start_our_scheduler(
    client: kube::Client,
    cfg: &KubeSchedulerConfiguration,
    registry: &ksched_framework::Registry,
    metrics: Arc<dyn SchedulerMetrics>,
) -> anyhow::Result<RunningScheduler> {
    let sinks = MetricSinks { scheduler: metrics, ..MetricSinks::default() };
    app::start_with_metrics(client, cfg, registry, app::queue_options(cfg), true, sinks).await
}

async fn kube_client_from_yaml(yaml: &str) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::from_yaml(yaml)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

async fn kube_client_from_file(path: &std::path::Path) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// How long a bench write keeps retrying transient errors. Under `--faults` restarts every
/// ~150 ms with a 100 ms pause, a dozen attempts in a row can all land in a pause or be cut by
/// one (a run of ~1300 writes lost one that way), so the budget is time, not attempts.
const RETRY_BUDGET: Duration = Duration::from_secs(60);

/// How long one attempt of a bench write may wait for its answer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `f` while it fails with a transient error, backing off from 100 ms to 1 s, for up to
/// [`RETRY_BUDGET`] (long enough to ride out injected API server restarts).
async fn with_retries<T, F, Fut>(mut f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0;
    let deadline = Instant::now() + RETRY_BUDGET;
    loop {
        // An attempt caught in a restart can wait for an answer that never comes; it is given
        // up and retried like a dropped connection (a create applied meanwhile then answers
        // AlreadyExists, which `create_retrying` accepts).
        let outcome = match tokio::time::timeout(ATTEMPT_TIMEOUT, f()).await {
            Ok(r) => r,
            Err(_) => Err(kube::Error::Service(Box::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {ATTEMPT_TIMEOUT:?}"),
            )))),
        };
        match outcome {
            Err(e) if retryable(&e) && Instant::now() < deadline => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis((50 << attempt.min(5)).min(1000))).await;
            }
            r => return r,
        }
    }
}

/// Creates `obj`, retrying transient errors. A conflict on a retry means an earlier attempt
/// was applied before its answer was lost: the object (named uniquely by the bench) exists.
async fn create_retrying<K>(api: &Api<K>, obj: &K) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let pp = PostParams::default();
    let mut tried = false;
    let r = with_retries(|| {
        let first = !tried;
        tried = true;
        let fut = api.create(&pp, obj);
        async move {
            match fut.await {
                Ok(_) => Ok(()),
                Err(e) if !first && already_exists(&e) => Ok(()),
                Err(e) => Err(e),
            }
        }
    })
    .await;
    r
}

/// Counts pods as the informer of upstream's collector does: first time a pod shows a node name.
fn spawn_pod_watcher(
    client: kube::Client,
    selector: String,
    observed: Arc<Mutex<Observed>>,
    synced: tokio::sync::oneshot::Sender<()>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Pod> = Api::all(client);
        let mut stream = watcher::watcher(api, watcher::Config::default().labels(&selector)).boxed();
        let mut synced = Some(synced);
        while let Some(ev) = stream.next().await {
            let pod = match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = synced.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "bench pod watch failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let now = Instant::now();
            let k = key(&pod);
            let mut o = observed.lock();
            o.seen.insert(k.clone());
            if is_bound(&pod) {
                o.mark_bound(k, now);
            } else if is_unschedulable(&pod) {
                o.unschedulable.insert(k);
            }
        }
    })
}

/// How to start a backend.
pub struct BackendOptions<'a> {
    /// `inprocess`, `local` or `external`.
    pub mode: super::Mode,
    /// Run our scheduler (`false`: `--scheduler none`).
    pub our_scheduler: bool,
    /// For external mode.
    pub kubeconfig: Option<&'a std::path::Path>,
    /// Scheduler configuration.
    pub config: &'a KubeSchedulerConfiguration,
    /// Plugin registry.
    pub registry: &'a ksched_framework::Registry,
    /// Metrics sink for our scheduler.
    pub metrics: Arc<dyn SchedulerMetrics>,
    /// Unique per run (labels objects in API modes).
    pub run_id: String,
    /// Faults and the audit that checks them (local mode).
    pub chaos: Option<Arc<super::chaos::Chaos>>,
}

impl Backend {
    /// Starts a fresh cluster (inprocess, local) or connects (external), and starts the
    /// scheduler.
    pub async fn start(o: BackendOptions<'_>) -> anyhow::Result<Backend> {
        match o.mode {
            super::Mode::Inprocess => {
                let mut c = InProcessCluster::new(o.config, o.registry, o.metrics)?;
                c.start();
                Ok(Backend::InProcess(Arc::new(InProc {
                    cluster: Mutex::new(Some(Arc::new(c))),
                    observed: Arc::default(),
                })))
            }
            super::Mode::Memory | super::Mode::Trace | super::Mode::TraceTime | super::Mode::TraceLive => {
                anyhow::bail!("--mode {} runs no workload backend", o.mode.as_str())
            }
            super::Mode::Local | super::Mode::External => {
                let (client, server) = if o.mode == super::Mode::Local {
                    let server = ApiServer::start(ServerConfig {
                        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
                        faults: o.chaos.as_ref().map(|c| c.faults().clone()).unwrap_or_default(),
                        ..ServerConfig::default()
                    })
                    .await?;
                    (kube_client_from_yaml(&server.kubeconfig_yaml()).await?, Some(server))
                } else {
                    let path = o.kubeconfig.context("--mode external needs --kubeconfig")?;
                    (kube_client_from_file(path).await?, None)
                };
                let observed: Arc<Mutex<Observed>> = Arc::default();
                let (tx, rx) = tokio::sync::oneshot::channel();
                let selector = format!("{RUN_LABEL}={}", o.run_id);
                let watch_task = spawn_pod_watcher(client.clone(), selector, observed.clone(), tx);
                tokio::time::timeout(Duration::from_secs(30), rx)
                    .await
                    .context("the bench pod watcher did not sync within 30 s")?
                    .ok();
                let pcs: Api<PriorityClass> = Api::all(client.clone());
                for p in BENCH_PRIORITIES {
                    let pc: PriorityClass = serde_json::from_value(json!({
                        "metadata": {"name": priority_class(p), "labels": {RUN_LABEL: o.run_id}},
                        "value": p,
                    }))?;
                    // Retried like every bench write: under `--faults` this is the run's first
                    // write, and one injected error must not end the run before it starts.
                    match create_retrying(&pcs, &pc).await {
                        Ok(()) => {}
                        Err(e) if already_exists(&e) => {}
                        Err(e) => return Err(e).context("creating the bench PriorityClass"),
                    }
                }
                let scheduler = if o.our_scheduler {
                    Some(start_our_scheduler(client.clone(), o.config, o.registry, o.metrics).await?)
                } else {
                    None
                };
                Ok(Backend::Api(Arc::new(ApiCluster {
                    client,
                    server: Mutex::new(server),
                    scheduler: Mutex::new(scheduler),
                    observed,
                    watch_task,
                    run_id: o.run_id,
                    external: o.mode == super::Mode::External,
                    namespaces: Mutex::new(Vec::new()),
                    chaos: o.chaos,
                })))
            }
        }
    }

    /// The in-process cluster (DRA workloads drive its claims directly, so they run in process
    /// only).
    pub fn in_process(&self) -> anyhow::Result<Arc<InProcessCluster>> {
        match self {
            Backend::InProcess(c) => c.cluster(),
            Backend::Api(_) => anyhow::bail!("DRA workloads run with --mode inprocess only"),
        }
    }

    /// What has been seen bound or refused.
    pub fn observed(&self) -> Arc<Mutex<Observed>> {
        match self {
            Backend::InProcess(c) => c.observed.clone(),
            Backend::Api(c) => c.observed.clone(),
        }
    }

    /// Labels every object gets (API modes only: in-process objects keep upstream's exact shape).
    pub fn extra_labels(&self) -> Vec<(String, String)> {
        match self {
            Backend::InProcess(_) => Vec::new(),
            Backend::Api(c) => vec![(RUN_LABEL.to_string(), c.run_id.clone())],
        }
    }

    /// Brings [`Observed`] up to date; `check` are unbound pods whose status to re-read
    /// (in-process only: API modes learn statuses from their watcher).
    pub fn refresh(&self, check: &[String]) -> anyhow::Result<()> {
        let Backend::InProcess(c) = self else { return Ok(()) };
        let cluster = c.cluster()?;
        // Taken, not copied: bindings wait on the same lock (see `take_binds`).
        let fresh = cluster.take_binds();
        if !fresh.is_empty() {
            let mut o = c.observed.lock();
            for b in fresh {
                o.mark_bound(b.pod, b.at);
            }
        }
        let mut refused = Vec::new();
        {
            let o = c.observed.lock();
            for k in check.iter().filter(|k| !o.bound.contains_key(*k) && !o.unschedulable.contains(*k)) {
                let (ns, name) = k.split_once('/').unwrap_or(("default", k));
                if cluster
                    .pod(ns, name)
                    .is_some_and(|p| unschedulable_condition(p.status.as_ref().and_then(|s| s.conditions.as_ref())))
                {
                    refused.push(k.clone());
                }
            }
        }
        c.observed.lock().unschedulable.extend(refused);
        Ok(())
    }

    /// Creates a namespace (existing ones are fine).
    pub async fn create_namespace(&self, name: &str) -> anyhow::Result<()> {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        match self {
            Backend::InProcess(c) => {
                let cluster = c.cluster()?;
                if cluster.lister.namespaces.get(None, name).is_none() {
                    cluster.lister.namespaces.upsert(Arc::new(ns));
                }
                Ok(())
            }
            Backend::Api(c) => {
                let mut ns = ns;
                ns.metadata.labels = Some([(RUN_LABEL.to_string(), c.run_id.clone())].into());
                let api: Api<Namespace> = Api::all(c.client.clone());
                let pp = PostParams::default();
                match with_retries(|| api.create(&pp, &ns)).await {
                    Ok(_) => c.namespaces.lock().push(name.to_string()),
                    Err(e) if already_exists(&e) => {}
                    Err(e) => return Err(e).with_context(|| format!("creating namespace {name}")),
                }
                Ok(())
            }
        }
    }

    /// Creates nodes (and, with `csi`, their CSINodes).
    pub async fn create_nodes(&self, nodes: Vec<Node>, csi: bool) -> anyhow::Result<()> {
        match self {
            Backend::InProcess(c) => {
                let cluster = c.cluster()?;
                for n in nodes {
                    if csi {
                        let name = n.metadata.name.clone().unwrap_or_default();
                        cluster.lister.csi_nodes.upsert(Arc::new(super::templates::csi_node(&name, &[])));
                    }
                    cluster.apply_node(n);
                }
                Ok(())
            }
            Backend::Api(c) => {
                let api: Api<Node> = Api::all(c.client.clone());
                let csi_api: Api<CSINode> = Api::all(c.client.clone());
                let labels = self.extra_labels();
                let labels = &labels;
                futures::stream::iter(nodes.into_iter().map(|n| {
                    let (api, csi_api) = (api.clone(), csi_api.clone());
                    async move {
                        let name = n.metadata.name.clone().unwrap_or_default();
                        if csi {
                            let cn = super::templates::csi_node(&name, labels);
                            create_retrying(&csi_api, &cn).await.with_context(|| format!("creating CSINode {name}"))?;
                        }
                        create_retrying(&api, &n).await.with_context(|| format!("creating node {name}"))?;
                        anyhow::Ok(())
                    }
                }))
                .buffer_unordered(CREATE_CONCURRENCY)
                .try_collect::<Vec<()>>()
                .await?;
                Ok(())
            }
        }
    }

    /// Creates pods (and their volumes), as fast as possible in process, with
    /// [`CREATE_CONCURRENCY`] concurrent requests otherwise.
    pub async fn create_pods(&self, items: Vec<PodItem>) -> anyhow::Result<()> {
        match self {
            Backend::InProcess(c) => {
                let cluster = c.cluster()?;
                // Feeding is synchronous work (it runs the event handlers); keep it off the
                // runtime's workers so the monitor and binding tasks keep running.
                tokio::task::spawn_blocking(move || {
                    for it in items {
                        if let Some((pvc, pv)) = it.volume {
                            cluster.lister.pvcs.upsert(Arc::new(pvc));
                            cluster.lister.pvs.upsert(Arc::new(pv));
                        }
                        cluster.apply_pod(it.pod);
                    }
                })
                .await?;
                Ok(())
            }
            Backend::Api(c) => {
                let client = c.client.clone();
                futures::stream::iter(items.into_iter().map(|it| create_api_pod(client.clone(), it)))
                    .buffer_unordered(CREATE_CONCURRENCY)
                    .try_collect::<Vec<()>>()
                    .await?;
                Ok(())
            }
        }
    }

    /// Deletes a pod (missing pods are fine).
    pub async fn delete_pod(&self, namespace: &str, name: &str) -> anyhow::Result<()> {
        match self {
            Backend::InProcess(c) => {
                let cluster = c.cluster()?;
                if let Some(p) = cluster.pod(namespace, name) {
                    cluster.delete_pod(&p);
                }
                Ok(())
            }
            Backend::Api(c) => {
                let api: Api<Pod> = Api::namespaced(c.client.clone(), namespace);
                let dp = DeleteParams::default().grace_period(0);
                match with_retries(|| api.delete(name, &dp)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e).with_context(|| format!("deleting pod {namespace}/{name}")),
                }
                if let Some(chaos) = &c.chaos {
                    chaos.forget(&format!("{namespace}/{name}"));
                }
                Ok(())
            }
        }
    }

    /// Creates a churn object.
    pub async fn create_churn(&self, obj: ChurnHandle) -> anyhow::Result<ChurnHandle> {
        match self {
            Backend::InProcess(c) => {
                let cluster = c.cluster()?;
                match &obj {
                    ChurnHandle::Node(n) => cluster.apply_node((**n).clone()),
                    ChurnHandle::Pod(p) => cluster.apply_pod((**p).clone()),
                    ChurnHandle::Service(s) => cluster.lister.services.upsert(Arc::new((**s).clone())),
                }
                Ok(obj)
            }
            Backend::Api(c) => {
                let pp = PostParams::default();
                match obj {
                    ChurnHandle::Node(n) => {
                        Ok(ChurnHandle::Node(Box::new(Api::<Node>::all(c.client.clone()).create(&pp, &n).await?)))
                    }
                    ChurnHandle::Pod(p) => {
                        let p = api_pod(*p);
                        let ns = p.metadata.namespace.clone().unwrap_or_default();
                        Ok(ChurnHandle::Pod(Box::new(
                            Api::<Pod>::namespaced(c.client.clone(), &ns).create(&pp, &p).await?,
                        )))
                    }
                    ChurnHandle::Service(s) => {
                        let ns = s.metadata.namespace.clone().unwrap_or_default();
                        Ok(ChurnHandle::Service(Box::new(
                            Api::<Service>::namespaced(c.client.clone(), &ns).create(&pp, &s).await?,
                        )))
                    }
                }
            }
        }
    }

    /// Deletes a churn object.
    pub async fn delete_churn(&self, obj: &ChurnHandle) -> anyhow::Result<()> {
        match (self, obj) {
            (Backend::InProcess(c), ChurnHandle::Node(n)) => c.cluster()?.delete_node(&n.as_ref().into()),
            (Backend::InProcess(c), ChurnHandle::Pod(p)) => {
                let cluster = c.cluster()?;
                let ns = p.metadata.namespace.as_deref().unwrap_or("default");
                if let Some(cur) = cluster.pod(ns, p.metadata.name.as_deref().unwrap_or_default()) {
                    cluster.delete_pod(&cur);
                }
            }
            (Backend::InProcess(c), ChurnHandle::Service(s)) => {
                c.cluster()?.lister.services.write().retain(|x| x.metadata.name != s.metadata.name);
            }
            (Backend::Api(c), obj) => {
                let dp = DeleteParams::default().grace_period(0);
                let name = |m: &kube::api::ObjectMeta| m.name.clone().unwrap_or_default();
                let ns = |m: &kube::api::ObjectMeta| m.namespace.clone().unwrap_or_default();
                let r = match obj {
                    ChurnHandle::Node(n) => {
                        Api::<Node>::all(c.client.clone()).delete(&name(&n.metadata), &dp).await.map(|_| ())
                    }
                    ChurnHandle::Pod(p) => Api::<Pod>::namespaced(c.client.clone(), &ns(&p.metadata))
                        .delete(&name(&p.metadata), &dp)
                        .await
                        .map(|_| ()),
                    ChurnHandle::Service(s) => Api::<Service>::namespaced(c.client.clone(), &ns(&s.metadata))
                        .delete(&name(&s.metadata), &dp)
                        .await
                        .map(|_| ()),
                };
                match r {
                    Ok(()) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
                if let (Some(chaos), ChurnHandle::Pod(p)) = (&c.chaos, obj) {
                    chaos.forget(&key(p));
                }
            }
        }
        Ok(())
    }

    /// Waits until the pods of `keys` are known to the scheduler (upstream's `barrier` with
    /// `Attempted`). In process, creation hands pods to the queue synchronously; over HTTP the
    /// bench's watcher seeing them stands in for the scheduler's informer seeing them.
    pub async fn barrier(&self, keys: &[String], timeout: Duration) -> anyhow::Result<()> {
        let Backend::Api(c) = self else { return Ok(()) };
        let deadline = Instant::now() + timeout;
        loop {
            let missing = {
                let o = c.observed.lock();
                keys.iter().filter(|k| !o.seen.contains(*k)).count()
            };
            if missing == 0 {
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "barrier: {missing} pods not seen after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The embedded API server's store and the run's label value (local mode).
    pub fn store(&self) -> Option<(ksched_apiserver::Store, String)> {
        let Backend::Api(c) = self else { return None };
        let store = c.server.lock().as_ref()?.store();
        Some((store, c.run_id.clone()))
    }

    /// After faults: waits until our scheduler's informers hold exactly the API server's nodes
    /// and live pods (a watcher backing off after a run of failed watches may lag by up to
    /// 30 s, as client-go's does), then retries every unschedulable pod at once, as the
    /// periodic leftover flush would once they aged, and waits for those retries to finish.
    /// A refusal given on a view the faults made stale is then replaced by one given on the
    /// converged view, which is what the verdict checks. No-op without our scheduler.
    pub async fn converge(&self, store: &ksched_apiserver::Store, timeout: Duration) -> anyhow::Result<()> {
        let Backend::Api(c) = self else { return Ok(()) };
        let deadline = Instant::now() + timeout;
        let versions = |items: Vec<serde_json::Value>, namespaced: bool| -> BTreeMap<String, String> {
            items
                .iter()
                .filter(|o| {
                    !matches!(o.pointer("/status/phase").and_then(|v| v.as_str()), Some("Succeeded" | "Failed"))
                })
                .map(|o| {
                    let m = &o["metadata"];
                    let name = m["name"].as_str().unwrap_or_default();
                    let key = if namespaced {
                        format!("{}/{name}", m["namespace"].as_str().unwrap_or("default"))
                    } else {
                        name.to_string()
                    };
                    (key, m["resourceVersion"].as_str().unwrap_or_default().to_string())
                })
                .collect()
        };
        loop {
            let want = (versions(store.list("v1", "Node", None), false), versions(store.list("v1", "Pod", None), true));
            let (have, queue) = {
                let guard = c.scheduler.lock();
                let Some(s) = guard.as_ref() else { return Ok(()) };
                (s.informer_versions(), s.scheduler.queue.clone())
            };
            if have == want {
                queue.flush_unschedulable_pods_older_than(Duration::ZERO);
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "after the faults stopped, the scheduler's informers still differ from the API server after \
                 {timeout:?}: {} of {} nodes, {} of {} pods",
                have.0.len(),
                want.0.len(),
                have.1.len(),
                want.1.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        loop {
            let busy = {
                let guard = c.scheduler.lock();
                let Some(s) = guard.as_ref() else { return Ok(()) };
                let q = &s.scheduler.queue;
                q.pods_in_active_q().len() + q.pods_in_backoff_q().len() + q.in_flight_pods().len()
            };
            if busy == 0 {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "after the faults stopped, {busy} pods were still being retried after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every pod labelled `label` is bound, gated or refused, unchanged for 2 s.
    pub async fn settle(
        &self,
        store: &ksched_apiserver::Store,
        label: (&str, &str),
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut last: Option<(u64, Instant)> = None;
        loop {
            let pods = store.list("v1", "Pod", None);
            let mine = pods.iter().filter(|p| {
                p.pointer(&format!("/metadata/labels/{}", label.0)).and_then(serde_json::Value::as_str) == Some(label.1)
            });
            let undecided_pods: Vec<&serde_json::Value> = mine.filter(|p| is_undecided(p)).collect();
            let undecided = undecided_pods.len();
            let rv = store.resource_version();
            let now = Instant::now();
            if undecided == 0 {
                match last {
                    Some((v, since)) if v == rv => {
                        if now - since >= Duration::from_secs(2) {
                            return Ok(());
                        }
                    }
                    _ => last = Some((rv, now)),
                }
            } else {
                last = None;
            }
            if now >= deadline {
                let mut classes: BTreeMap<String, usize> = BTreeMap::new();
                for p in &undecided_pods {
                    *classes.entry(self.pending_class(p)).or_default() += 1;
                }
                let classes: Vec<String> = classes.into_iter().map(|(c, n)| format!("{n} {c}")).collect();
                let stuck: Vec<String> = undecided_pods.iter().take(3).map(|p| self.describe_pending(p)).collect();
                anyhow::bail!(
                    "after the faults stopped, {undecided} pods were still undecided after {timeout:?} ({}): {}",
                    classes.join("; "),
                    stuck.join("; ")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// For a failed wait: what the API server and our scheduler know of the first pods of `keys`
    /// (local mode; other modes have no store to ask).
    pub fn describe_keys(&self, keys: &[String]) -> Vec<String> {
        let Some((store, _)) = self.store() else { return Vec::new() };
        let pods = store.list("v1", "Pod", None);
        keys.iter()
            .take(3)
            .map(|k| {
                let found = pods.iter().find(|p| {
                    let m = &p["metadata"];
                    format!("{}/{}", m["namespace"].as_str().unwrap_or("default"), m["name"].as_str().unwrap_or(""))
                        == *k
                });
                match found {
                    Some(p) => {
                        let node = p.pointer("/spec/nodeName").and_then(serde_json::Value::as_str).unwrap_or("");
                        format!("{} (API server: node {node:?})", self.describe_pending(p))
                    }
                    None => format!("{k}: not in the API server"),
                }
            })
            .collect()
    }

    /// What the API server and our scheduler know of an unbound pod, for a failed verdict.
    fn describe_pending(&self, api_pod: &serde_json::Value) -> String {
        let m = &api_pod["metadata"];
        let (ns, name) = (m["namespace"].as_str().unwrap_or("default"), m["name"].as_str().unwrap_or_default());
        let conditions = api_pod.pointer("/status/conditions").cloned().unwrap_or_default();
        let mut out = format!("{ns}/{name} rv {} conditions {conditions}", m["resourceVersion"]);
        if let Some(v) = self.scheduler_view(api_pod) {
            out += &format!("; scheduler: {}, {}, informer rv {:?}", v.place, v.cached, v.informer_rv);
        }
        out
    }

    /// Where our scheduler holds an unbound pod, in a few words that many pods share: a failed
    /// verdict counts its pods per such class.
    fn pending_class(&self, api_pod: &serde_json::Value) -> String {
        let Some(v) = self.scheduler_view(api_pod) else { return "no scheduler".into() };
        let informer = match v.informer_rv {
            None => "missing from the informer",
            Some(rv)
                if api_pod.pointer("/metadata/resourceVersion").and_then(serde_json::Value::as_str) == Some(&rv) =>
            {
                "informer at the API server's rv"
            }
            Some(_) => "informer at another rv",
        };
        let cached = v.cached.split(" on ").next().unwrap_or_default();
        format!("{}, {cached}, {informer}", v.pool)
    }

    /// What our scheduler holds of an unbound pod (`None` without our scheduler).
    fn scheduler_view(&self, api_pod: &serde_json::Value) -> Option<PendingView> {
        let m = &api_pod["metadata"];
        let (ns, name) = (m["namespace"].as_str().unwrap_or("default"), m["name"].as_str().unwrap_or_default());
        let Backend::Api(c) = self else { return None };
        let guard = c.scheduler.lock();
        let s = guard.as_ref()?;
        let pod = serde_json::from_value::<ksched_framework::pod::Pod>(api_pod.clone()).ok()?;
        let queue = &s.scheduler.queue;
        let key = |p: &Arc<ksched_framework::pod::Pod>| p.metadata.uid == pod.metadata.uid;
        let (pool, place) = if queue.in_flight_pods().iter().any(key) {
            ("in flight", "in flight".to_string())
        } else if let Some((q, pool)) = queue.get_pod_and_pool(ns, name) {
            let pool = match pool {
                QueueName::Active => "activeQ",
                QueueName::Backoff => "backoffQ",
                QueueName::Unschedulable => "unschedulablePods",
            };
            let place = format!(
                "queued in {pool} ({} attempts, rejected by {:?}, pending {:?}, gated by {:?}, errors {}, queued {:?} ago)",
                q.attempts,
                q.unschedulable_plugins,
                q.pending_plugins,
                q.gating_plugin,
                q.consecutive_errors_count,
                q.timestamp.elapsed()
            );
            (pool, place)
        } else {
            ("not queued", "not queued".to_string())
        };
        let cache = &s.scheduler.cache;
        let cached = match cache.get_pod(&pod) {
            Some(p) if cache.is_assumed_pod(&pod) => {
                format!("assumed on {:?}", p.spec.as_ref().and_then(|s| s.node_name.clone()))
            }
            Some(p) => format!("cached on {:?}", p.spec.as_ref().and_then(|s| s.node_name.clone())),
            None => "not cached".into(),
        };
        let informer_rv = s.pods.get(ns, name).map(|p| p.metadata.resource_version.clone().unwrap_or_default());
        Some(PendingView { pool, place, cached, informer_rv })
    }

    /// External mode: deletes what the run created. Other modes: nothing to do.
    pub async fn cleanup(&self) -> anyhow::Result<()> {
        let Backend::Api(c) = self else { return Ok(()) };
        if !c.external {
            return Ok(());
        }
        let lp = ListParams::default().labels(&format!("{RUN_LABEL}={}", c.run_id));
        let dp = DeleteParams::default().grace_period(0);
        let namespaces: Vec<String> = {
            let o = c.observed.lock();
            o.seen
                .iter()
                .filter_map(|k| k.split('/').next().map(str::to_string))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect()
        };
        for ns in &namespaces {
            Api::<Pod>::namespaced(c.client.clone(), ns).delete_collection(&dp, &lp).await?;
            Api::<PersistentVolumeClaim>::namespaced(c.client.clone(), ns).delete_collection(&dp, &lp).await?;
            Api::<Service>::namespaced(c.client.clone(), ns).delete_collection(&dp, &lp).await?;
        }
        Api::<PersistentVolume>::all(c.client.clone()).delete_collection(&dp, &lp).await?;
        Api::<Node>::all(c.client.clone()).delete_collection(&dp, &lp).await?;
        Api::<CSINode>::all(c.client.clone()).delete_collection(&dp, &lp).await?;
        let created: Vec<String> = c.namespaces.lock().clone();
        for ns in created {
            Api::<Namespace>::all(c.client.clone()).delete(&ns, &dp).await.ok();
        }
        for p in BENCH_PRIORITIES {
            Api::<PriorityClass>::all(c.client.clone()).delete(&priority_class(p), &dp).await.ok();
        }
        Ok(())
    }

    /// Stops the scheduler (waiting for in-flight bindings) and the cluster.
    pub async fn shutdown(self) {
        match self {
            Backend::InProcess(c) => {
                let Some(cluster) = c.cluster.lock().take() else { return };
                match Arc::try_unwrap(cluster) {
                    Ok(cluster) => cluster.stop().await,
                    // A background task still holds it: stop the loop at least.
                    Err(cluster) => cluster.scheduler.stop(),
                }
            }
            Backend::Api(c) => {
                let scheduler = c.scheduler.lock().take();
                if let Some(s) = scheduler {
                    s.shutdown(Duration::from_secs(5)).await;
                }
                c.watch_task.abort();
                let server = c.server.lock().take();
                if let Some(server) = server {
                    server.shutdown().await;
                }
            }
        }
    }
}

/// What our scheduler holds of an unbound pod.
struct PendingView {
    /// The queue's pool, `in flight` or `not queued`.
    pool: &'static str,
    /// The pool with the queued entry's details.
    place: String,
    /// Whether the cache holds it, assumed or not, and on which node.
    cached: String,
    /// The resourceVersion the pod informer holds, if any.
    informer_rv: Option<String>,
}

/// A template pod as API servers accept it: a literal priority becomes the matching class.
fn api_pod(mut pod: Pod) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        if let Some(p) = spec.priority.take().filter(|p| *p != 0) {
            spec.priority_class_name = Some(priority_class(p));
        }
    }
    pod
}

async fn create_api_pod(client: kube::Client, it: PodItem) -> anyhow::Result<()> {
    let pod = api_pod(it.pod);
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pp = PostParams::default();
    if let Some((pvc, pv)) = it.volume {
        // Like upstream: the claim first (the volume refers to it), statuses written separately
        // because creation resets them.
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let created = with_retries(|| pvcs.create(&pp, &pvc)).await.context("creating a PVC")?;
        let mut with_status = created;
        with_status.status = pvc.status.clone();
        let name = with_status.metadata.name.clone().unwrap_or_default();
        pvcs.replace_status(&name, &pp, &with_status).await.context("updating a PVC status")?;
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        let created = with_retries(|| pvs.create(&pp, &pv)).await.context("creating a PV")?;
        let mut with_status = created;
        with_status.status = pv.status.clone();
        let name = with_status.metadata.name.clone().unwrap_or_default();
        pvs.replace_status(&name, &pp, &with_status).await.context("updating a PV status")?;
    }
    let api: Api<Pod> = Api::namespaced(client, &ns);
    create_retrying(&api, &pod).await.with_context(|| format!("creating pod {}", key(&pod)))?;
    Ok(())
}

/// A pod the scheduler still owes a verdict: unbound, not gated, and not marked Unschedulable.
fn is_undecided(p: &serde_json::Value) -> bool {
    let unbound = p.pointer("/spec/nodeName").and_then(serde_json::Value::as_str).is_none();
    let gated = p.pointer("/spec/schedulingGates").and_then(serde_json::Value::as_array).is_some_and(|g| !g.is_empty());
    let refused = p.pointer("/status/conditions").and_then(serde_json::Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable")
    });
    unbound && !gated && !refused
}
