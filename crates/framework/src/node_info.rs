//! NodeInfo: a node and the aggregate of the pods on it, kept incrementally by the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::node::Node;
use k8s_openapi::api::core::v1::Taint;

use crate::pod_info::{HostPort, PodInfo};
use crate::resource::Resource;

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The next value of the global generation counter; every NodeInfo change takes a new one.
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed) + 1
}

static IMAGE_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Bumped whenever an image summary's node count changes: results that read it (ImageLocality's
/// scores) are stale for every node holding the image, not only the one that changed.
pub fn image_epoch() -> u64 {
    IMAGE_EPOCH.load(Ordering::Relaxed)
}

/// An image name, its size and how many nodes have it. One instance per image name is shared
/// by every NodeInfo holding it (as upstream shares one pointer), so the count stays current
/// cluster-wide without touching the other nodes when one node gains or loses the image, and the
/// name is stored once per cluster, not once per node.
#[derive(Debug, Default)]
pub struct ImageStateSummary {
    name: Arc<str>,
    /// Image size in bytes.
    pub size: i64,
    num_nodes: AtomicUsize,
}

impl ImageStateSummary {
    /// A summary for image `name` of `size` bytes present on `num_nodes` nodes.
    pub fn new(name: impl Into<Arc<str>>, size: i64, num_nodes: usize) -> Self {
        ImageStateSummary { name: name.into(), size, num_nodes: AtomicUsize::new(num_nodes) }
    }

    /// The image name (one of the names the kubelet reports for it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of nodes holding the image.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes.load(Ordering::Relaxed)
    }

    /// Updates the number of nodes holding the image (the cache does this).
    pub fn set_num_nodes(&self, n: usize) {
        if self.num_nodes.swap(n, Ordering::Relaxed) != n {
            IMAGE_EPOCH.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The images of a node, by every name the node reports for them: shared summaries sorted by
/// name (eight bytes per name per node; a hash map with its own keys took ten times that).
#[derive(Debug, Clone, Default)]
pub struct ImageStates(Box<[Arc<ImageStateSummary>]>);

impl ImageStates {
    /// The states of `summaries` (one per name; later duplicates of a name are dropped).
    pub fn new(mut summaries: Vec<Arc<ImageStateSummary>>) -> Self {
        summaries.sort_by(|a, b| a.name.cmp(&b.name));
        summaries.dedup_by(|a, b| a.name == b.name);
        ImageStates(summaries.into_boxed_slice())
    }

    /// The state of image `name`.
    pub fn get(&self, name: &str) -> Option<&ImageStateSummary> {
        self.0.binary_search_by(|s| (*s.name).cmp(name)).ok().map(|i| &*self.0[i])
    }

    /// Adds (or replaces) the state of the summary's image name.
    pub fn insert(&mut self, summary: Arc<ImageStateSummary>) {
        let mut v: Vec<_> = std::mem::take(&mut self.0).into_vec();
        v.retain(|s| s.name != summary.name);
        v.push(summary);
        *self = ImageStates::new(v);
    }

    /// Every image state, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ImageStateSummary>> {
        self.0.iter()
    }

    /// Number of image names.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the node reports no image.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Host ports in use on a node: a set of (ip, protocol, port), like upstream's HostPortInfo.
/// Grouped by port so a conflict check scans the few entries of one port without allocating.
#[derive(Debug, Clone, Default)]
pub struct HostPortInfo {
    by_port: HashMap<i32, Vec<(String, String)>>, // port -> [(protocol, ip)]
}

impl HostPortInfo {
    /// Records a used port (a no-op when the same ip/protocol/port is already recorded).
    pub fn add(&mut self, hp: &HostPort) {
        let entries = self.by_port.entry(hp.port).or_default();
        if !entries.iter().any(|(p, ip)| *p == hp.protocol && *ip == hp.ip) {
            entries.push((hp.protocol.clone(), hp.ip.clone()));
        }
    }

    /// Forgets a used port.
    pub fn remove(&mut self, hp: &HostPort) {
        if let Some(entries) = self.by_port.get_mut(&hp.port) {
            entries.retain(|(p, ip)| !(*p == hp.protocol && *ip == hp.ip));
            if entries.is_empty() {
                self.by_port.remove(&hp.port);
            }
        }
    }

    /// True when `hp` conflicts: same protocol and port, and same IP or either IP is 0.0.0.0.
    pub fn conflicts(&self, hp: &HostPort) -> bool {
        self.by_port.get(&hp.port).is_some_and(|entries| {
            entries.iter().any(|(p, ip)| *p == hp.protocol && (hp.ip == "0.0.0.0" || ip == "0.0.0.0" || *ip == hp.ip))
        })
    }

    /// Number of distinct (ip, protocol, port) entries.
    pub fn len(&self) -> usize {
        self.by_port.values().map(Vec::len).sum()
    }

    /// True when no port is used.
    pub fn is_empty(&self) -> bool {
        self.by_port.is_empty()
    }
}

/// Borrows each node of a list, the shape the PreScore and Score extension points take.
pub fn node_refs(nodes: &[Arc<NodeInfo>]) -> Vec<&NodeInfo> {
    nodes.iter().map(|n| &**n).collect()
}

/// Cpu and memory summed with upstream's non-zero defaults for pods that request none: the
/// only two resources that have such an aggregate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NonZeroRequested {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
}

/// A node with the pods assigned (or assumed) to it.
///
/// `repr(C)` keeps the fields every cycle reads for every node at the front, in the order the
/// node walk needs them: resources, pods and taints for Filter and Score of a plain pod (about
/// three cache lines), then labels for label-reading plugins; the rest is read only by plugins a
/// pod opts into (ports, affinity, volumes) or off the scheduling path.
#[derive(Debug, Clone, Default)]
#[repr(C)]
pub struct NodeInfo {
    /// Allocatable resources of the node.
    pub allocatable: Resource,
    /// Sum of the pods' requests.
    pub requested: Resource,
    /// Sum of the pods' cpu and memory requests with non-zero defaults (scoring).
    pub non_zero_requested: NonZeroRequested,
    /// Pods on the node.
    pub pods: Vec<Arc<PodInfo>>,
    // Copied out of the node object: Filters read them for every node of every cycle, and the
    // node object is a cold pointer chase away (it dominated SchedulingBasic's profile).
    taints: Arc<[Taint]>,
    unschedulable: bool,
    /// Images present on the node (by every name the node reports for an image), with their
    /// cluster-wide spread.
    pub image_states: ImageStates,
    labels: crate::labels::PackedLabels,
    node: Option<Arc<Node>>,
    // ---- cold: read only for pods using these features, or off the scheduling path ----
    /// Bumped on every change; the snapshot copies nodes whose generation is newer.
    pub generation: u64,
    /// Pods with any pod (anti-)affinity.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods with required anti-affinity.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    /// Host ports in use.
    pub used_ports: HostPortInfo,
    /// `namespace/claim` -> number of pods using the PVC.
    pub pvc_ref_counts: HashMap<String, i32>,
}

/// Bytes at the front of a NodeInfo that Filter/Score passes of a plain pod read.
const HOT_PREFIX: usize = std::mem::offset_of!(NodeInfo, labels);
/// The hot prefix plus what label-reading plugins need.
const HOT_PREFIX_WITH_LABELS: usize = std::mem::offset_of!(NodeInfo, generation);
// The walk's fields stay within three cache lines' worth of bytes (every extra line each node
// pulls in costs a visible share of the walk; where the allocation starts decides the straddle).
const _: () = assert!(HOT_PREFIX <= 3 * 64);
const _: () = assert!(std::mem::offset_of!(NodeInfo, image_states) < HOT_PREFIX);

impl NodeInfo {
    /// A NodeInfo for a node object.
    pub fn new(node: Arc<Node>) -> Self {
        let mut ni = NodeInfo::default();
        ni.set_node(node);
        ni
    }

    /// The node object, if the node is known (pods may arrive before their node).
    pub fn node(&self) -> Option<&Arc<Node>> {
        self.node.as_ref()
    }

    /// The node name ("" when the node object is unknown).
    pub fn name(&self) -> &str {
        self.node.as_ref().and_then(|n| n.metadata.name.as_deref()).unwrap_or_default()
    }

    /// Sets (or replaces) the node object and recomputes allocatable.
    pub fn set_node(&mut self, node: Arc<Node>) {
        self.allocatable =
            node.status.as_ref().and_then(|s| s.allocatable.as_ref()).map(Resource::from_list).unwrap_or_default();
        let spec = node.spec.as_ref();
        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.taints = spec.and_then(|s| s.taints.as_deref()).unwrap_or_default().into();
        // Shared with the node object, not copied.
        self.labels = node.metadata.labels.clone();
        self.node = Some(node);
        self.generation = next_generation();
    }

    /// Drops the node object but keeps the pods (the node was deleted before its pods).
    pub fn remove_node(&mut self) {
        self.node = None;
        self.image_states = ImageStates::default();
        self.unschedulable = false;
        self.taints = Arc::new([]);
        self.labels = Default::default();
        self.generation = next_generation();
    }

    /// Adds a pod and its resources.
    pub fn add_pod(&mut self, pi: Arc<PodInfo>) {
        self.account(&pi, 1);
        if pi.has_affinity() {
            self.pods_with_affinity.push(pi.clone());
        }
        if pi.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity.push(pi.clone());
        }
        self.pods.push(pi);
        self.generation = next_generation();
    }

    /// Removes the pod with the given UID; returns false when it is not on this node.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(i) = self.pods.iter().position(|p| p.uid() == uid) else { return false };
        let pi = self.pods.swap_remove(i);
        self.pods_with_affinity.retain(|p| p.uid() != uid);
        self.pods_with_required_anti_affinity.retain(|p| p.uid() != uid);
        self.account(&pi, -1);
        self.generation = next_generation();
        true
    }

    fn account(&mut self, pi: &PodInfo, sign: i64) {
        if sign > 0 {
            self.requested.add(&pi.requests);
            self.non_zero_requested.milli_cpu += pi.non_zero_requests.milli_cpu;
            self.non_zero_requested.memory += pi.non_zero_requests.memory;
            for hp in pi.host_ports() {
                self.used_ports.add(hp);
            }
        } else {
            self.requested.sub(&pi.requests);
            self.non_zero_requested.milli_cpu -= pi.non_zero_requests.milli_cpu;
            self.non_zero_requested.memory -= pi.non_zero_requests.memory;
            for hp in pi.host_ports() {
                self.used_ports.remove(hp);
            }
        }
        if let Some(spec) = pi.pod.spec.as_ref() {
            let ns = pi.namespace();
            for v in spec.volumes.iter().flatten() {
                if let Some(pvc) = v.persistent_volume_claim.as_ref() {
                    let key = format!("{ns}/{}", pvc.claim_name);
                    let e = self.pvc_ref_counts.entry(key.clone()).or_default();
                    *e += sign as i32;
                    if *e <= 0 {
                        self.pvc_ref_counts.remove(&key);
                    }
                }
            }
        }
    }

    /// Taints of the node (empty when none or unknown).
    pub fn taints(&self) -> &[Taint] {
        &self.taints
    }

    /// The node's `spec.unschedulable` (false when unknown).
    pub fn unschedulable(&self) -> bool {
        self.unschedulable
    }

    /// Hints the CPU to load the hot cache lines of this NodeInfo (with the label fields when
    /// `with_labels`). Callers walking nodes issue it a few nodes ahead: every NodeInfo is its
    /// own allocation, so a walk is a chain of cache misses the hardware prefetcher cannot predict.
    #[inline]
    pub fn prefetch(&self, with_labels: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let len = if with_labels { HOT_PREFIX_WITH_LABELS } else { HOT_PREFIX };
            let base = self as *const NodeInfo as usize;
            let mut line = base & !63;
            while line < base + len {
                // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never faults, whatever
                // the address.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
                line += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = with_labels;
    }

    /// Starts loading the packed label text into cache. Call it once the NodeInfo itself is
    /// likely cached (its pointer to the text is read here).
    #[inline]
    pub fn prefetch_labels(&self) {
        self.labels.prefetch();
    }

    /// The value of one node label; the fast path for filters.
    pub fn label(&self, key: &str) -> Option<&str> {
        crate::labels::LabelLookup::label(&self.labels, key)
    }

    /// Labels of the node.
    pub fn labels(&self) -> &crate::labels::PackedLabels {
        &self.labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, cpu: &str, port: Option<i32>) -> Arc<PodInfo> {
        let mut c = json!({"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}});
        if let Some(p) = port {
            c["ports"] = json!([{"containerPort": 80, "hostPort": p}]);
        }
        let p = json!({"metadata": {"name": uid, "namespace": "ns", "uid": uid},
                       "spec": {"containers": [c], "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}});
        Arc::new(PodInfo::new(Arc::new(serde_json::from_value(p).unwrap())))
    }

    #[test]
    fn add_and_remove_keep_aggregates_consistent() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
        .unwrap();
        let mut ni = NodeInfo::new(Arc::new(node));
        assert_eq!(ni.allocatable.milli_cpu, 4000);
        assert_eq!(ni.allocatable.allowed_pod_number, 110);
        let g0 = ni.generation;
        ni.add_pod(pod("a", "1", Some(8080)));
        ni.add_pod(pod("b", "500m", None));
        assert!(ni.generation > g0);
        assert_eq!(ni.requested.milli_cpu, 1500);
        assert_eq!(ni.non_zero_requested.memory, 2 * crate::resource::DEFAULT_MEMORY_REQUEST);
        assert_eq!(ni.pvc_ref_counts.get("ns/data"), Some(&2));
        assert!(ni.used_ports.conflicts(&HostPort { ip: "10.0.0.1".into(), protocol: "TCP".into(), port: 8080 }));
        assert!(!ni.used_ports.conflicts(&HostPort { ip: "0.0.0.0".into(), protocol: "UDP".into(), port: 8080 }));
        assert!(ni.remove_pod("a"));
        assert!(!ni.remove_pod("a"));
        assert_eq!(ni.requested.milli_cpu, 500);
        assert_eq!(ni.pvc_ref_counts.get("ns/data"), Some(&1));
        assert!(ni.used_ports.is_empty());
    }
}
