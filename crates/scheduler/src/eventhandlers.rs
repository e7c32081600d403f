//! Event handlers (upstream `pkg/scheduler/eventhandlers.go`): watch pods and nodes through `kube` watchers and feed the cache and
//! the queue. Only pods with no node whose schedulerName is one of ours enter the queue; pods
//! bound anywhere count in the cache.
//!
//! Watch streams resume by resourceVersion and relist on `410 Gone`; after a relist, objects
//! missing from it are handled as deletions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node as ApiNode, Pod as ApiPod};
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::podgroup::{PodGroup, PodGroups};
use ksched_framework::{ActionType, ClusterEvent, EventObject, EventResource};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt as _;
use kube::Api;
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::cluster_events::node_update_events;
use crate::projection::Projection;
use crate::scheduler::{PodLister, Scheduler};

/// The informer's view of pods, keyed by namespace/name; also the failure handler's lister.
#[derive(Default)]
pub struct PodStore {
    pods: RwLock<HashMap<String, Arc<Pod>>>,
}

fn key(p: &Pod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""))
}

impl PodLister for PodStore {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.read().get(&format!("{namespace}/{name}")).cloned()
    }
}

impl PodStore {
    /// Number of pods known.
    pub fn len(&self) -> usize {
        self.pods.read().len()
    }

    /// True when no pod is known.
    pub fn is_empty(&self) -> bool {
        self.pods.read().is_empty()
    }

    /// Every pod known (for `/metrics/resources`).
    pub fn list(&self) -> Vec<Arc<Pod>> {
        self.pods.read().values().cloned().collect()
    }
}

fn assigned(p: &Pod) -> bool {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
}

/// Applies pod and node changes to a scheduler.
pub struct EventHandlers {
    sched: Arc<Scheduler>,
    pods: Arc<PodStore>,
    nodes: RwLock<HashMap<String, Arc<Node>>>,
    /// The pod groups whose membership follows the pod informer (GenericWorkload on).
    pod_groups: Option<Arc<PodGroups>>,
    gang_scheduling: bool,
    /// What is kept of each pod and node, once, as it arrives.
    projection: Projection,
}

impl EventHandlers {
    /// Handlers for a scheduler, recording pods in `pods`, keeping of each object what
    /// `projection` says.
    pub fn new(sched: Arc<Scheduler>, pods: Arc<PodStore>, projection: Projection) -> Arc<Self> {
        let pod_groups = sched.pod_groups();
        let gang_scheduling = pod_groups.is_some() && sched.gang_scheduling_enabled();
        Arc::new(EventHandlers {
            sched,
            pods,
            nodes: RwLock::new(HashMap::new()),
            pod_groups,
            gang_scheduling,
            projection,
        })
    }

    /// What is kept of each object.
    pub fn projection(&self) -> Projection {
        self.projection
    }

    /// A pod was created or changed.
    pub fn on_pod(&self, pod: Pod) {
        let pod = Arc::new(self.projection.pod(pod));
        let old = self.pods.pods.write().insert(key(&pod), pod.clone());
        if let Some(groups) = &self.pod_groups {
            groups.observe_pod(old.as_ref(), Some(&pod));
        }
        match old {
            None => self.add_pod(pod),
            Some(old) if old.metadata.uid != pod.metadata.uid => {
                self.delete_pod(&old);
                self.add_pod(pod);
            }
            Some(old) => {
                if old.metadata.resource_version.is_some()
                    && old.metadata.resource_version == pod.metadata.resource_version
                {
                    return;
                }
                self.update_pod(old, pod);
            }
        }
    }

    /// A pod was deleted (or left the watched set).
    pub fn on_pod_deleted(&self, pod: &Pod) {
        let removed = self.pods.pods.write().remove(&key(pod));
        if let Some(p) = removed {
            if let Some(groups) = &self.pod_groups {
                groups.observe_pod(Some(&p), None);
            }
            self.delete_pod(&p);
        }
    }

    /// `scheduler_event_handling_duration_seconds{event}` since `start`.
    fn handled(&self, event: &str, start: Instant) {
        self.sched.metrics.event_handling_duration(event, start.elapsed().as_secs_f64());
    }

    fn add_pod(&self, pod: Arc<Pod>) {
        let start = Instant::now();
        let q = &self.sched.queue;
        if assigned(&pod) {
            if let Err(e) = self.sched.cache.add_pod(pod.clone()) {
                tracing::error!(pod = %key(&pod), error = %e, "scheduler cache AddPod failed");
            }
            q.assigned_pod_added(&pod);
            self.handled("AssignedPodAdd", start);
        } else if self.sched.responsible_for(&pod) {
            q.add(pod.clone());
            if self.gang_scheduling {
                // A new member may complete its gang: its waiting peers get another look.
                q.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::UnschedulablePod, ActionType::ADD),
                    None,
                    Some(&EventObject::Pod(pod)),
                    None,
                );
            }
            self.handled("UnscheduledPodAdd", start);
        }
    }

    fn update_pod(&self, old: Arc<Pod>, new: Arc<Pod>) {
        let start = Instant::now();
        let q = &self.sched.queue;
        match (assigned(&old), assigned(&new)) {
            (false, false) => {
                if self.sched.responsible_for(&new) {
                    // An assumed pod's own updates (e.g. our status patch) must not requeue it.
                    if self.sched.cache.is_assumed_pod(&new) {
                        return;
                    }
                    q.update(&old, new);
                    self.handled("UnscheduledPodUpdate", start);
                }
            }
            (false, true) => {
                if self.sched.responsible_for(&old) {
                    q.delete(&old);
                }
                if let Err(e) = self.sched.cache.add_pod(new.clone()) {
                    tracing::error!(pod = %key(&new), error = %e, "scheduler cache AddPod failed");
                }
                q.assigned_pod_added(&new);
            }
            (true, true) => {
                if let Err(e) = self.sched.cache.update_pod(&old, new.clone()) {
                    tracing::error!(pod = %key(&new), error = %e, "scheduler cache UpdatePod failed");
                }
                q.assigned_pod_updated(&old, &new);
                self.handled("AssignedPodUpdate", start);
            }
            (true, false) => {
                // A pod cannot lose its node; treat it as a replacement.
                self.delete_pod(&old);
                self.add_pod(new);
            }
        }
    }

    fn delete_pod(&self, pod: &Arc<Pod>) {
        let start = Instant::now();
        let q = &self.sched.queue;
        if assigned(pod) {
            if let Err(e) = self.sched.cache.remove_pod(pod) {
                tracing::debug!(pod = %key(pod), error = %e, "scheduler cache RemovePod failed");
            }
            q.move_all_to_active_or_backoff(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                Some(&EventObject::Pod(pod.clone())),
                None,
                None,
            );
            self.handled("AssignedPodDelete", start);
        } else if self.sched.responsible_for(pod) {
            // Kept assumed after a binding whose outcome we learned from the API server, it
            // would otherwise hold its room until an assigned event that will not come.
            if self.sched.cache.is_assumed_pod(pod) {
                let _ = self.sched.cache.forget_pod(pod);
            }
            q.delete(pod);
            // A deleted nominated pod frees room it had claimed for lower-or-equal priority pods.
            if pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty()) {
                let prio = ksched_framework::pod_info::pod_priority(pod);
                let check = move |p: &Pod| ksched_framework::pod_info::pod_priority(p) <= prio;
                q.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                    Some(&EventObject::Pod(pod.clone())),
                    None,
                    Some(&check),
                );
            }
            self.handled("UnscheduledPodDelete", start);
        }
    }

    /// A node was created or changed.
    pub fn on_node(&self, node: Node) {
        let start = Instant::now();
        let (node, images) = self.projection.node(node);
        let node = Arc::new(node);
        let name = node.metadata.name.clone().unwrap_or_default();
        let old = self.nodes.write().insert(name, node.clone());
        let q = &self.sched.queue;
        match old {
            None => {
                self.sched.cache.put_node(node.clone(), &images);
                q.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::Node, ActionType::ADD),
                    None,
                    Some(&EventObject::Node(node)),
                    None,
                );
                self.handled("NodeAdd", start);
            }
            Some(old) => {
                if old.metadata.resource_version.is_some()
                    && old.metadata.resource_version == node.metadata.resource_version
                {
                    return;
                }
                self.sched.cache.put_node(node.clone(), &images);
                let (o, n) = (EventObject::Node(old.clone()), EventObject::Node(node.clone()));
                for ev in node_update_events(&old, &node) {
                    let label = ev.label();
                    q.move_all_to_active_or_backoff(ev, Some(&o), Some(&n), None);
                    self.handled(&label, start);
                }
            }
        }
    }

    /// A node was deleted.
    pub fn on_node_deleted(&self, node: &Node) {
        let start = Instant::now();
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(old) = self.nodes.write().remove(&name) else { return };
        self.sched.queue.move_all_to_active_or_backoff(
            ClusterEvent::new(EventResource::Node, ActionType::DELETE),
            Some(&EventObject::Node(old.clone())),
            None,
            None,
        );
        self.sched.cache.remove_node(&old);
        self.handled("NodeDelete", start);
    }

    /// A PodGroup was created or changed.
    pub fn on_pod_group(&self, pg: PodGroup) {
        let Some(groups) = &self.pod_groups else { return };
        let pg = Arc::new(pg);
        let old = groups.upsert(pg.clone());
        if old.as_ref().is_some_and(|o| o.metadata.resource_version == pg.metadata.resource_version) {
            return;
        }
        let action = if old.is_some() { ActionType::UPDATE } else { ActionType::ADD };
        let old = old.map(EventObject::PodGroup);
        self.sched.queue.move_all_to_active_or_backoff(
            ClusterEvent::new(EventResource::PodGroup, action),
            old.as_ref(),
            Some(&EventObject::PodGroup(pg)),
            None,
        );
    }

    /// A PodGroup was deleted.
    pub fn on_pod_group_deleted(&self, pg: &PodGroup) {
        let Some(groups) = &self.pod_groups else { return };
        let ns = pg.metadata.namespace.as_deref().unwrap_or("default");
        let Some(old) = groups.remove(ns, pg.metadata.name.as_deref().unwrap_or_default()) else { return };
        self.sched.queue.move_all_to_active_or_backoff(
            ClusterEvent::new(EventResource::PodGroup, ActionType::DELETE),
            Some(&EventObject::PodGroup(old)),
            None,
            None,
        );
    }

    /// Applies one event of the pod watch; true when it completed a (re)list. Pods missing
    /// from a completed relist were deleted while the watch was down and are handled as
    /// deletions.
    pub fn on_pod_event(&self, ev: Event<Pod>, relist: &mut Relist) -> bool {
        match ev {
            Event::Apply(p) => self.on_pod(p),
            Event::Delete(p) => self.on_pod_deleted(&p),
            Event::Init => relist.start(),
            Event::InitApply(p) => {
                relist.listed(key(&p));
                self.on_pod(p);
            }
            Event::InitDone => {
                if let Some(listed) = relist.finish() {
                    // Collected before any deletion runs: the handlers take the store's write
                    // lock, which a read guard still held here would wait on forever.
                    let gone: Vec<Arc<Pod>> = self
                        .pods
                        .pods
                        .read()
                        .iter()
                        .filter(|(k, _)| !listed.contains(*k))
                        .map(|(_, p)| p.clone())
                        .collect();
                    for p in gone {
                        self.on_pod_deleted(&p);
                    }
                }
                return true;
            }
        }
        false
    }

    /// Applies one event of the node watch; true when it completed a (re)list. Nodes missing
    /// from a completed relist are handled as deletions.
    pub fn on_node_event(&self, ev: Event<Node>, relist: &mut Relist) -> bool {
        match ev {
            Event::Apply(n) => self.on_node(n),
            Event::Delete(n) => self.on_node_deleted(&n),
            Event::Init => relist.start(),
            Event::InitApply(n) => {
                relist.listed(n.metadata.name.clone().unwrap_or_default());
                self.on_node(n);
            }
            Event::InitDone => {
                if let Some(listed) = relist.finish() {
                    // As for pods: no guard on the node map may be held while a handler runs.
                    let gone: Vec<Arc<Node>> = self
                        .nodes
                        .read()
                        .iter()
                        .filter(|(k, _)| !listed.contains(*k))
                        .map(|(_, n)| n.clone())
                        .collect();
                    for n in gone {
                        self.on_node_deleted(&n);
                    }
                }
                return true;
            }
        }
        false
    }
}

/// The keys a watch's current (re)list returned so far, from its `Init` to its `InitDone`.
#[derive(Debug, Default)]
pub struct Relist {
    listed: Option<HashSet<String>>,
}

impl Relist {
    /// A (re)list begins: whatever an interrupted one listed no longer counts.
    fn start(&mut self) {
        self.listed = Some(HashSet::new());
    }

    /// The (re)list returned `key`.
    fn listed(&mut self, key: String) {
        if let Some(l) = self.listed.as_mut() {
            l.insert(key);
        }
    }

    /// The (re)list is complete: what it returned (`None` without a matching `Init`).
    fn finish(&mut self) -> Option<HashSet<String>> {
        self.listed.take()
    }
}

/// Field selector of the pod informer: terminal pods hold no resources.
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Objects per page of the initial (re)list of pods and nodes. A page is held three times at
/// once while it is decoded (response body, its text, the whole typed objects before they are
/// projected): with realistic objects, 500 (client-go's and kube-rs's default) made a restart's
/// peak tens of MiB higher than its steady state; 100 costs a few more requests per relist.
pub const LIST_PAGE_SIZE: u32 = 100;

/// Running watchers: a sync flag and the tasks to stop at shutdown.
pub struct Watchers {
    /// Turns `true` once pods and nodes completed their initial list (upstream's WaitForCacheSync).
    pub synced: watch::Receiver<bool>,
    /// Watch tasks, aborted by [`Watchers::stop`].
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watchers {
    /// Stops every watch.
    pub fn stop(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// `ev` with its objects converted by `f`.
fn map_event<K, T>(ev: Event<K>, f: impl Fn(K) -> T) -> Event<T> {
    match ev {
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
    }
}

/// Starts the pod and node watchers.
pub fn start(client: kube::Client, handlers: Arc<EventHandlers>) -> Watchers {
    let (tx, rx) = watch::channel(false);
    let (pods_tx, mut pods_rx) = watch::channel(false);
    let (nodes_tx, mut nodes_rx) = watch::channel(false);

    let h = handlers.clone();
    let cfg = watcher::Config::default().fields(POD_FIELD_SELECTOR).page_size(LIST_PAGE_SIZE);
    // Pods are decoded straight into the scheduler's own type, skipping every field it does not
    // keep; only when something may read any field is the whole object decoded and kept.
    let mut stream = match handlers.projection {
        Projection::Scheduling => watcher::watcher(Api::<Pod>::all(client.clone()), cfg).default_backoff().boxed(),
        Projection::Full => watcher::watcher(Api::<ApiPod>::all(client.clone()), cfg)
            .default_backoff()
            .map(|ev| ev.map(|ev| map_event(ev, Pod::with_object)))
            .boxed(),
    };
    let pods_task = tokio::spawn(async move {
        let mut relist = Relist::default();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    if h.on_pod_event(ev, &mut relist) {
                        let _ = pods_tx.send(true);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "pod watch failed; retrying"),
            }
        }
    });

    // PodGroups first: a member's PreEnqueue looks its group up.
    let pod_groups = handlers.pod_groups.is_some().then(|| watch_pod_groups(client.clone(), handlers.clone()));
    // Nodes likewise: decoded into the kept type, or whole when something may read any field.
    let cfg = watcher::Config::default().page_size(LIST_PAGE_SIZE);
    let mut stream = match handlers.projection {
        Projection::Scheduling => watcher::watcher(Api::<Node>::all(client), cfg).default_backoff().boxed(),
        Projection::Full => watcher::watcher(Api::<ApiNode>::all(client), cfg)
            .default_backoff()
            .map(|ev| ev.map(|ev| map_event(ev, Node::with_object)))
            .boxed(),
    };
    let h = handlers;
    let nodes_task = tokio::spawn(async move {
        let mut relist = Relist::default();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => {
                    if h.on_node_event(ev, &mut relist) {
                        let _ = nodes_tx.send(true);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "node watch failed; retrying"),
            }
        }
    });

    let mut tasks = vec![pods_task, nodes_task];
    let groups_synced = match pod_groups {
        Some(t) => {
            tasks.push(t.task);
            Some(t.synced)
        }
        None => None,
    };
    let sync_task = tokio::spawn(async move {
        let _ = pods_rx.wait_for(|v| *v).await;
        let _ = nodes_rx.wait_for(|v| *v).await;
        if let Some(mut g) = groups_synced {
            let _ = g.wait_for(|v| *v).await;
        }
        let _ = tx.send(true);
    });
    tasks.push(sync_task);
    Watchers { synced: rx, tasks }
}

struct PodGroupWatch {
    task: tokio::task::JoinHandle<()>,
    synced: watch::Receiver<bool>,
}

/// Watches `scheduling.k8s.io/v1alpha2` PodGroups (GenericWorkload on).
fn watch_pod_groups(client: kube::Client, h: Arc<EventHandlers>) -> PodGroupWatch {
    let (tx, rx) = watch::channel(false);
    let api: Api<PodGroup> = Api::all(client);
    let task = tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut seen: Option<HashSet<(String, String)>> = None;
        let id = |pg: &PodGroup| {
            (pg.metadata.namespace.clone().unwrap_or_default(), pg.metadata.name.clone().unwrap_or_default())
        };
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(pg)) => h.on_pod_group(pg),
                Ok(Event::Delete(pg)) => h.on_pod_group_deleted(&pg),
                Ok(Event::Init) => seen = Some(HashSet::new()),
                Ok(Event::InitApply(pg)) => {
                    if let Some(s) = seen.as_mut() {
                        s.insert(id(&pg));
                    }
                    h.on_pod_group(pg);
                }
                Ok(Event::InitDone) => {
                    if let (Some(s), Some(groups)) = (seen.take(), &h.pod_groups) {
                        for pg in groups.list() {
                            if !s.contains(&id(&pg)) {
                                h.on_pod_group_deleted(&pg);
                            }
                        }
                    }
                    let _ = tx.send(true);
                }
                Err(e) => tracing::warn!(error = %e, "pod group watch failed; retrying"),
            }
        }
    });
    PodGroupWatch { task, synced: rx }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inprocess::InProcessCluster;
    use serde_json::json;
    use std::time::Duration;

    fn pod(name: &str, rv: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": rv},
            "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c", "image": "i"}]}}))
        .unwrap()
    }

    fn node(name: &str, rv: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "resourceVersion": rv},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
        .unwrap()
    }

    /// Handlers over a scheduler whose loop does not run: queued pods stay where they are.
    fn handlers(c: &InProcessCluster) -> Arc<EventHandlers> {
        EventHandlers::new(c.scheduler.clone(), Arc::new(PodStore::default()), Projection::Scheduling)
    }

    /// Runs `f` on a thread of its own: a handler that never returns fails the test instead of
    /// hanging it.
    fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(v) => v,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what} never returned"),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_relist_forgets_pods_deleted_while_the_watch_was_down() {
        let cfg = crate::config::default_config();
        let c = InProcessCluster::new(&cfg, &ksched_plugins::in_tree_registry(), Arc::new(crate::metrics::NoopMetrics))
            .unwrap();
        let h = handlers(&c);
        let h2 = h.clone();
        let synced = within("the pod watch's events", move || {
            let mut relist = Relist::default();
            let first =
                [Event::Init, Event::InitApply(pod("a", "1")), Event::InitApply(pod("b", "2")), Event::InitDone];
            let mut synced: Vec<bool> = first.into_iter().map(|ev| h2.on_pod_event(ev, &mut relist)).collect();
            // The watch went down and "a" was deleted meanwhile: the relist returns "b" only.
            let relisted = [Event::Init, Event::InitApply(pod("b", "2")), Event::InitDone];
            synced.extend(relisted.into_iter().map(|ev| h2.on_pod_event(ev, &mut relist)));
            synced
        });
        assert_eq!(synced, [false, false, false, true, false, false, true]);
        let kept: Vec<String> = h.pods.list().iter().map(|p| key(p)).collect();
        assert_eq!(kept, ["default/b"]);
        let q = &c.scheduler.queue;
        assert!(q.get_pod("default", "a").is_none(), "a deleted pod left in the queue");
        assert!(q.get_pod("default", "b").is_some());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_interrupted_relist_does_not_count_and_a_complete_one_forgets_deleted_nodes() {
        let cfg = crate::config::default_config();
        let c = InProcessCluster::new(&cfg, &ksched_plugins::in_tree_registry(), Arc::new(crate::metrics::NoopMetrics))
            .unwrap();
        let h = handlers(&c);
        let h2 = h.clone();
        within("the node watch's events", move || {
            let mut relist = Relist::default();
            for ev in
                [Event::Init, Event::InitApply(node("n1", "1")), Event::InitApply(node("n2", "2")), Event::InitDone]
            {
                h2.on_node_event(ev, &mut relist);
            }
            // A relist cut off after "n1", then a complete one without it: "n1" is gone, even
            // though the interrupted relist had listed it.
            for ev in [Event::Init, Event::InitApply(node("n1", "1")), Event::Init, Event::InitApply(node("n2", "2"))] {
                h2.on_node_event(ev, &mut relist);
            }
            assert!(h2.on_node_event(Event::InitDone, &mut relist));
        });
        let nodes: Vec<String> = c.scheduler.cache.node_versions().into_keys().collect();
        assert_eq!(nodes, ["n2"]);
    }
}
