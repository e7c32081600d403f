//! Snapshot: the immutable view of nodes one scheduling cycle works on (upstream's SharedLister).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::node_info::NodeInfo;

/// Node infos in node-tree order plus the derived lists plugins ask for.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Nodes (with a Node object) in zone round-robin order.
    pub node_info_list: Vec<Arc<NodeInfo>>,
    /// Name -> index into `node_info_list`.
    pub index: HashMap<String, usize>,
    /// Nodes hosting pods with any pod (anti-)affinity.
    pub have_pods_with_affinity: Vec<Arc<NodeInfo>>,
    /// Nodes hosting pods with required anti-affinity.
    pub have_pods_with_required_anti_affinity: Vec<Arc<NodeInfo>>,
    /// `namespace/claim` of every PVC used by a pod in the snapshot.
    pub used_pvc_set: HashSet<String>,
    /// Cache generation the snapshot reflects.
    pub generation: u64,
}

impl Snapshot {
    /// Builds a snapshot from node infos (tests and simulations; the cache updates incrementally).
    pub fn from_node_infos(nodes: Vec<NodeInfo>) -> Self {
        let mut s = Snapshot { node_info_list: nodes.into_iter().map(Arc::new).collect(), ..Default::default() };
        s.rebuild_derived();
        s
    }

    /// Recomputes the index and the derived lists from `node_info_list`.
    pub fn rebuild_derived(&mut self) {
        self.index = self.node_info_list.iter().enumerate().map(|(i, n)| (n.name().to_string(), i)).collect();
        self.have_pods_with_affinity =
            self.node_info_list.iter().filter(|n| !n.pods_with_affinity.is_empty()).cloned().collect();
        self.have_pods_with_required_anti_affinity =
            self.node_info_list.iter().filter(|n| !n.pods_with_required_anti_affinity.is_empty()).cloned().collect();
        self.used_pvc_set = self.node_info_list.iter().flat_map(|n| n.pvc_ref_counts.keys().cloned()).collect();
    }

    /// All nodes.
    pub fn list(&self) -> &[Arc<NodeInfo>] {
        &self.node_info_list
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.node_info_list.len()
    }

    /// A node by name; the error text is upstream's.
    pub fn get(&self, name: &str) -> Result<&Arc<NodeInfo>, String> {
        self.index
            .get(name)
            .map(|i| &self.node_info_list[*i])
            .ok_or_else(|| format!("nodeinfo not found for node name {name:?}"))
    }

    /// True when a pod in the snapshot uses the PVC `namespace/name`.
    pub fn is_pvc_used_by_pods(&self, key: &str) -> bool {
        self.used_pvc_set.contains(key)
    }
}
