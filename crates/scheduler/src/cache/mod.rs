//! The scheduler cache: nodes and the pods on them, including pods assumed on a node before
//! their binding is confirmed (upstream `backend/cache/cache.go`), and the incremental snapshot (`UpdateSnapshot`).
//!
//! Node infos are shared with the snapshot as `Arc`s and copied on write, so a cycle's snapshot
//! never sees a half-applied change and taking a snapshot copies only what changed.

mod node_tree;

use std::sync::Arc;

use k8s_openapi::api::core::v1::ContainerImage;
use ksched_framework::node::Node;
use ksched_framework::node_info::{ImageStateSummary, ImageStates};
use ksched_framework::pod::Pod;
use ksched_framework::{NodeInfo, PodInfo, Snapshot};
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};

pub use node_tree::{zone_key, NodeTree};

/// Errors of cache operations (they indicate informer/scheduler disagreement, never user input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The pod is already in the cache.
    #[error("pod {0} is in the cache, so can't be assumed")]
    AlreadyPresent(String),
    /// Forget of a pod that is not assumed.
    #[error("pod {0} wasn't assumed so cannot be forgotten")]
    NotAssumed(String),
    /// The pod is on a different node than the operation says.
    #[error("pod {pod} was assumed on {cached} but assigned to {requested}")]
    NodeMismatch {
        /// pod key
        pod: String,
        /// node in the cache
        cached: String,
        /// node in the request
        requested: String,
    },
    /// The pod is unknown.
    #[error("pod {0} is not found in scheduler cache, so cannot be updated or removed")]
    NotFound(String),
    /// Update of a pod that is only assumed.
    #[error("assumed pod {0} should not be updated")]
    UpdateAssumed(String),
    /// The snapshot disagreed with the node tree and was rebuilt.
    #[error("snapshot state is not consistent, length of NodeInfoList={list} not equal to length of nodes in tree={tree}, trying to recover")]
    Inconsistent {
        /// snapshot list length
        list: usize,
        /// node tree size
        tree: usize,
    },
}

struct PodState {
    info: Arc<PodInfo>,
    node: String,
    assumed: bool,
}

#[derive(Default)]
// Fx hashing: every scheduled pod looks up and marks its node and inserts its UID here, while
// holding the lock the informers wait on; the keys come from the API server, not from a peer
// that could pick colliding names.
struct Inner {
    nodes: FxHashMap<String, Arc<NodeInfo>>,
    tree: NodeTree,
    pods: FxHashMap<String, PodState>,
    assumed: FxHashSet<String>,
    /// Every image name any node reports, with its size and the number of nodes holding it
    /// (each node's NodeInfo holds the same summaries, so the names are stored once).
    images: FxHashMap<Arc<str>, Arc<ImageStateSummary>>,
    /// Nodes changed since the last snapshot update.
    dirty: FxHashSet<String>,
    /// A node object was added or removed since the last snapshot update.
    membership_changed: bool,
}

/// Counts for the `scheduler_cache_size` metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheSize {
    /// Assumed pods.
    pub assumed_pods: usize,
    /// All pods (assumed included).
    pub pods: usize,
    /// Nodes with a Node object.
    pub nodes: usize,
}

/// The scheduler cache. Thread-safe; every method takes the internal lock briefly.
#[derive(Default)]
pub struct Cache {
    inner: Mutex<Inner>,
    /// The pod groups whose members' assumed state follows this cache (GenericWorkload on).
    pod_groups: std::sync::OnceLock<Arc<ksched_framework::podgroup::PodGroups>>,
}

fn pod_key(p: &Pod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""))
}

fn uid_of(p: &Pod) -> &str {
    p.metadata.uid.as_deref().unwrap_or_default()
}

fn node_of(p: &Pod) -> &str {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

impl Inner {
    fn node_mut(&mut self, name: &str) -> &mut NodeInfo {
        self.dirty.insert(name.to_string());
        Arc::make_mut(self.nodes.entry(name.to_string()).or_default())
    }

    fn add_pod_to_node(&mut self, info: Arc<PodInfo>, node: &str) {
        self.node_mut(node).add_pod(info);
    }

    fn remove_pod_from_node(&mut self, uid: &str, node: &str) {
        let Some(ni) = self.nodes.get_mut(node) else { return };
        self.dirty.insert(node.to_string());
        Arc::make_mut(ni).remove_pod(uid);
        // A node entry that exists only because of its pods goes away with the last pod.
        if ni.node().is_none() && ni.pods.is_empty() {
            self.nodes.remove(node);
        }
    }

    /// Counts the node's images, by every name it reports, into the cluster-wide summaries and
    /// gives the node its states.
    fn add_images(&mut self, images: &[ContainerImage], ni: &mut NodeInfo) {
        let mut names: Vec<(&str, i64)> = images
            .iter()
            .flat_map(|i| i.names.iter().flatten().map(move |n| (n.as_str(), i.size_bytes.unwrap_or(0))))
            .collect();
        // A name reported twice by one node counts once, as in upstream's node sets (the
        // stable sort keeps the first report's size).
        names.sort_by_key(|(n, _)| *n);
        names.dedup_by_key(|(n, _)| *n);
        let mut states = Vec::with_capacity(names.len());
        for (name, size) in names {
            let summary = match self.images.get(name) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(ImageStateSummary::new(name, size, 0));
                    self.images.insert(Arc::from(name), s.clone());
                    s
                }
            };
            summary.set_num_nodes(summary.num_nodes() + 1);
            states.push(summary);
        }
        ni.image_states = ImageStates::new(states);
    }

    /// Uncounts the images of a node (as its states say).
    fn remove_images(&mut self, ni: &NodeInfo) {
        for s in ni.image_states.iter() {
            let n = s.num_nodes().saturating_sub(1);
            s.set_num_nodes(n);
            if n == 0 {
                self.images.remove(s.name());
            }
        }
    }
}

fn images_of(node: &Node) -> &[ContainerImage] {
    node.status.as_ref().and_then(|s| s.images.as_deref()).unwrap_or_default()
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A node was added (its images are read from `status.images`).
    pub fn add_node(&self, node: Arc<Node>) {
        self.put_node(node.clone(), images_of(&node));
    }

    /// A node changed (its images are read from `status.images`).
    pub fn update_node(&self, _old: &Node, new: Arc<Node>) {
        self.put_node(new.clone(), images_of(&new));
    }

    /// A node was added or changed; its images come apart from the object (a projected node
    /// does not keep them, see [`crate::projection`]).
    pub fn put_node(&self, node: Arc<Node>, images: &[ContainerImage]) {
        let mut g = self.inner.lock();
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut ni = g.nodes.get(&name).map(|n| (**n).clone()).unwrap_or_default();
        if let Some(cached) = ni.node().cloned() {
            g.tree.update(&cached, &node);
        } else {
            // A new node, or one known only through its pods so far.
            g.tree.add(&node);
            g.membership_changed = true;
        }
        g.remove_images(&ni);
        g.add_images(images, &mut ni);
        ni.set_node(node);
        g.dirty.insert(name.clone());
        g.nodes.insert(name, Arc::new(ni));
    }

    /// A node was deleted. Its pods stay until they are deleted too.
    pub fn remove_node(&self, node: &Node) {
        let mut g = self.inner.lock();
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(existing) = g.nodes.get(&name).cloned() else { return };
        if let Some(cached) = existing.node().cloned() {
            g.tree.remove(&cached);
            g.remove_images(&existing);
        }
        g.membership_changed = true;
        g.dirty.insert(name.clone());
        if existing.pods.is_empty() {
            g.nodes.remove(&name);
        } else {
            g.node_mut(&name).remove_node();
        }
    }

    /// Assumes a pod (whose `spec.nodeName` is set to the chosen node) before binding.
    pub fn assume_pod(&self, info: Arc<PodInfo>) -> Result<(), CacheError> {
        let mut g = self.inner.lock();
        let uid = info.uid().to_string();
        if g.pods.contains_key(&uid) {
            return Err(CacheError::AlreadyPresent(info.key()));
        }
        let node = info.node_name().unwrap_or_default().to_string();
        g.add_pod_to_node(info.clone(), &node);
        g.pods.insert(uid.clone(), PodState { info: info.clone(), node: node.clone(), assumed: true });
        g.assumed.insert(uid);
        drop(g);
        if let Some(groups) = self.pod_groups.get() {
            groups.assume(&info.pod, &node);
        }
        Ok(())
    }

    /// Keeps the members of these pod groups assumed and forgotten along with the cache
    /// (upstream's cache owns the pod group states). Set once, when GenericWorkload is on.
    pub fn track_pod_groups(&self, groups: Arc<ksched_framework::podgroup::PodGroups>) {
        let _ = self.pod_groups.set(groups);
    }

    /// Forgets an assumed pod after a failed binding cycle.
    pub fn forget_pod(&self, pod: &Pod) -> Result<(), CacheError> {
        let mut g = self.inner.lock();
        let uid = uid_of(pod).to_string();
        let Some(st) = g.pods.get(&uid) else { return Err(CacheError::NotAssumed(pod_key(pod))) };
        if !st.assumed {
            return Err(CacheError::NotAssumed(pod_key(pod)));
        }
        let want = node_of(pod);
        if !want.is_empty() && st.node != want {
            return Err(CacheError::NodeMismatch {
                pod: pod_key(pod),
                cached: st.node.clone(),
                requested: want.into(),
            });
        }
        let node = st.node.clone();
        g.remove_pod_from_node(&uid, &node);
        g.pods.remove(&uid);
        g.assumed.remove(&uid);
        drop(g);
        if let Some(groups) = self.pod_groups.get() {
            groups.forget(pod);
        }
        Ok(())
    }

    /// An assigned pod appeared in the informer: confirms an assumed pod or adds a new one.
    pub fn add_pod(&self, pod: Arc<Pod>) -> Result<(), CacheError> {
        let mut g = self.inner.lock();
        let uid = uid_of(&pod).to_string();
        let info = Arc::new(PodInfo::new(pod.clone()));
        let node = node_of(&pod).to_string();
        match g.pods.get(&uid).map(|s| (s.assumed, s.node.clone())) {
            Some((true, cached)) => {
                // Confirmation: the informer's object replaces the assumed one, on its node.
                g.remove_pod_from_node(&uid, &cached);
                g.add_pod_to_node(info.clone(), &node);
                g.assumed.remove(&uid);
                g.pods.insert(uid, PodState { info, node, assumed: false });
                Ok(())
            }
            Some((false, _)) => Err(CacheError::AlreadyPresent(pod_key(&pod))),
            None => {
                g.add_pod_to_node(info.clone(), &node);
                g.pods.insert(uid, PodState { info, node, assumed: false });
                Ok(())
            }
        }
    }

    /// An assigned pod changed.
    pub fn update_pod(&self, old: &Pod, new: Arc<Pod>) -> Result<(), CacheError> {
        let mut g = self.inner.lock();
        let uid = uid_of(old).to_string();
        let Some((assumed, cached)) = g.pods.get(&uid).map(|s| (s.assumed, s.node.clone())) else {
            return Err(CacheError::NotFound(pod_key(old)));
        };
        if assumed {
            return Err(CacheError::UpdateAssumed(pod_key(old)));
        }
        let node = node_of(&new).to_string();
        let info = Arc::new(PodInfo::new(new.clone()));
        g.remove_pod_from_node(&uid, &cached);
        g.add_pod_to_node(info.clone(), &node);
        g.pods.insert(uid, PodState { info, node: node.clone(), assumed: false });
        if cached != node {
            return Err(CacheError::NodeMismatch { pod: pod_key(&new), cached, requested: node });
        }
        Ok(())
    }

    /// An assigned pod was deleted (or left a terminal phase filter).
    pub fn remove_pod(&self, pod: &Pod) -> Result<(), CacheError> {
        let mut g = self.inner.lock();
        let uid = uid_of(pod).to_string();
        let Some(st) = g.pods.remove(&uid) else { return Err(CacheError::NotFound(pod_key(pod))) };
        g.assumed.remove(&uid);
        g.remove_pod_from_node(&uid, &st.node);
        Ok(())
    }

    /// True when the pod is assumed and not yet confirmed.
    pub fn is_assumed_pod(&self, pod: &Pod) -> bool {
        self.inner.lock().assumed.contains(uid_of(pod))
    }

    /// The cached pod with the same UID.
    pub fn get_pod(&self, pod: &Pod) -> Option<Arc<Pod>> {
        self.inner.lock().pods.get(uid_of(pod)).map(|s| s.info.pod.clone())
    }

    /// `name → resourceVersion` of every node object held (a harness compares it with the API
    /// server's to tell when the informer caught up).
    pub fn node_versions(&self) -> std::collections::BTreeMap<String, String> {
        let g = self.inner.lock();
        g.nodes
            .iter()
            .filter_map(|(name, ni)| {
                let node = ni.node()?;
                Some((name.clone(), node.metadata.resource_version.clone().unwrap_or_default()))
            })
            .collect()
    }

    /// Sizes for metrics.
    pub fn size(&self) -> CacheSize {
        let g = self.inner.lock();
        CacheSize { assumed_pods: g.assumed.len(), pods: g.pods.len(), nodes: g.tree.num_nodes() }
    }

    /// A complete snapshot of the current state, built without touching the bookkeeping of
    /// [`Cache::update_snapshot`] (which serves the scheduler's one incremental snapshot): for
    /// read-only consumers such as `/debug/explain`.
    pub fn full_snapshot(&self) -> Snapshot {
        let g = self.inner.lock();
        let list: Vec<_> = g.tree.list().iter().filter_map(|n| g.nodes.get(n).cloned()).collect();
        let mut snap = Snapshot { node_info_list: list, ..Default::default() };
        snap.index = snap.node_info_list.iter().enumerate().map(|(i, n)| (n.name().to_string(), i)).collect();
        snap.generation = snap.node_info_list.iter().map(|n| n.generation).max().unwrap_or(0);
        snap.rebuild_derived();
        snap
    }

    /// Brings `snap` up to date, copying only nodes changed since the last call. On an
    /// inconsistency it rebuilds the snapshot and reports an error (the cycle fails, the next one
    /// sees a consistent snapshot), as upstream does.
    pub fn update_snapshot(&self, snap: &mut Snapshot) -> Result<(), CacheError> {
        let mut g = self.inner.lock();
        let g = &mut *g;
        let mut rebuild_list = std::mem::take(&mut g.membership_changed);
        let mut rebuild_derived = false;
        for name in g.dirty.drain() {
            let current = g.nodes.get(&name).filter(|n| n.node().is_some());
            match (current, snap.index.get(&name).copied()) {
                (Some(ni), Some(i)) => {
                    let old = snap.node_info_list[i].clone();
                    let affinity_changed = old.pods_with_affinity.is_empty() != ni.pods_with_affinity.is_empty()
                        || old.pods_with_required_anti_affinity.is_empty()
                            != ni.pods_with_required_anti_affinity.is_empty();
                    snap.update_used_pvcs(&old, ni);
                    snap.node_info_list[i] = ni.clone();
                    if affinity_changed {
                        snap.update_affinity_lists(i);
                    }
                }
                (Some(_), None) | (None, Some(_)) => rebuild_list = true,
                (None, None) => {}
            }
            snap.generation = snap.generation.max(g.nodes.get(&name).map(|n| n.generation).unwrap_or(0));
        }
        let mut result = Ok(());
        if !rebuild_list && snap.node_info_list.len() != g.tree.num_nodes() {
            result = Err(CacheError::Inconsistent { list: snap.node_info_list.len(), tree: g.tree.num_nodes() });
            rebuild_list = true;
        }
        if rebuild_list {
            snap.node_info_list = g.tree.list().iter().filter_map(|n| g.nodes.get(n).cloned()).collect();
            snap.index = snap.node_info_list.iter().enumerate().map(|(i, n)| (n.name().to_string(), i)).collect();
            rebuild_derived = true;
        }
        if rebuild_derived {
            snap.rebuild_derived();
        }
        result
    }
}

#[cfg(test)]
mod tests;
