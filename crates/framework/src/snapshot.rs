//! Snapshot: the immutable view of nodes one scheduling cycle works on (upstream's SharedLister).

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;

/// The node entries a pod-group cycle changed in a snapshot, so that [`Snapshot::restore`] puts
/// the snapshot back exactly as the cache made it (upstream rolls its snapshot back the same way).
#[derive(Debug, Default)]
pub struct SnapshotUndo {
    saved: Vec<(usize, Arc<NodeInfo>)>,
}

impl SnapshotUndo {
    /// True when nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.saved.is_empty()
    }
}

/// Node infos in node-tree order plus the derived lists plugins ask for.
///
/// The derived lists hold indices into `node_info_list`, so replacing a changed node's entry in
/// place keeps them valid; they only need rebuilding when a node's membership changes.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Nodes (with a Node object) in zone round-robin order.
    pub node_info_list: Vec<Arc<NodeInfo>>,
    /// Name -> index into `node_info_list`.
    pub index: FxHashMap<String, usize>,
    /// Indices of nodes hosting pods with any pod (anti-)affinity.
    pub with_affinity: Vec<usize>,
    /// Indices of nodes hosting pods with required anti-affinity.
    pub with_required_anti_affinity: Vec<usize>,
    /// `namespace/claim` of every PVC used by a pod in the snapshot -> number of nodes whose pods
    /// use it (counted so one node's change updates it without visiting every node).
    pub used_pvc_nodes: FxHashMap<String, usize>,
    /// Cache generation the snapshot reflects.
    pub generation: u64,
}

impl Snapshot {
    /// Builds a snapshot from node infos (tests and simulations; the cache updates incrementally).
    pub fn from_node_infos(nodes: Vec<NodeInfo>) -> Self {
        let mut s = Snapshot { node_info_list: nodes.into_iter().map(Arc::new).collect(), ..Default::default() };
        s.index = s.node_info_list.iter().enumerate().map(|(i, n)| (n.name().to_string(), i)).collect();
        s.rebuild_derived();
        s
    }

    /// Recomputes the affinity lists and the used-PVC counts from `node_info_list`.
    pub fn rebuild_derived(&mut self) {
        let idx = |pred: fn(&NodeInfo) -> bool| -> Vec<usize> {
            self.node_info_list.iter().enumerate().filter(|(_, n)| pred(n)).map(|(i, _)| i).collect()
        };
        self.with_affinity = idx(|n| !n.pods_with_affinity.is_empty());
        self.with_required_anti_affinity = idx(|n| !n.pods_with_required_anti_affinity.is_empty());
        self.used_pvc_nodes.clear();
        for n in &self.node_info_list {
            for k in n.pvc_ref_counts.keys() {
                *self.used_pvc_nodes.entry(k.clone()).or_default() += 1;
            }
        }
    }

    /// Brings the used-PVC counts up to date after a node's entry changed from `old` to `new`,
    /// without a full `rebuild_derived` (every pod with a claim changes them).
    pub fn update_used_pvcs(&mut self, old: &NodeInfo, new: &NodeInfo) {
        for k in old.pvc_ref_counts.keys().filter(|k| !new.pvc_ref_counts.contains_key(*k)) {
            if let Some(c) = self.used_pvc_nodes.get_mut(k) {
                *c -= 1;
                if *c == 0 {
                    self.used_pvc_nodes.remove(k);
                }
            }
        }
        for k in new.pvc_ref_counts.keys().filter(|k| !old.pvc_ref_counts.contains_key(*k)) {
            *self.used_pvc_nodes.entry(k.clone()).or_default() += 1;
        }
    }

    /// Brings the affinity lists up to date for node `i` after its entry was replaced, without
    /// a full `rebuild_derived` (a node gaining its first pod with affinity is common).
    pub fn update_affinity_lists(&mut self, i: usize) {
        let n = &self.node_info_list[i];
        let (affinity, anti) = (!n.pods_with_affinity.is_empty(), !n.pods_with_required_anti_affinity.is_empty());
        set_member(&mut self.with_affinity, i, affinity);
        set_member(&mut self.with_required_anti_affinity, i, anti);
    }

    /// All nodes.
    pub fn list(&self) -> &[Arc<NodeInfo>] {
        &self.node_info_list
    }

    /// Nodes hosting pods with any pod (anti-)affinity.
    pub fn have_pods_with_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_affinity.iter().map(|i| &self.node_info_list[*i])
    }

    /// Nodes hosting pods with required anti-affinity.
    pub fn have_pods_with_required_anti_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_required_anti_affinity.iter().map(|i| &self.node_info_list[*i])
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
        self.used_pvc_nodes.contains_key(key)
    }

    /// Replaces node `i`'s entry with `f` applied to a copy, keeping the derived lists current
    /// and the node's generation unchanged (the change is this snapshot's alone).
    fn change_node(&mut self, i: usize, undo: &mut SnapshotUndo, f: impl FnOnce(&mut NodeInfo)) {
        let old = self.node_info_list[i].clone();
        if !undo.saved.iter().any(|(j, _)| *j == i) {
            undo.saved.push((i, old.clone()));
        }
        let mut new = (*old).clone();
        f(&mut new);
        new.generation = old.generation;
        self.update_used_pvcs(&old, &new);
        self.node_info_list[i] = Arc::new(new);
        self.update_affinity_lists(i);
    }

    /// Counts an assumed pod (see [`PodInfo::assumed_on`]) on its node in this snapshot only.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>, undo: &mut SnapshotUndo) -> Result<(), String> {
        let node = pod.node_name().ok_or_else(|| format!("pod {} is not assumed on a node", pod.key()))?;
        let i = *self.index.get(node).ok_or_else(|| format!("nodeinfo not found for node name {node:?}"))?;
        self.change_node(i, undo, |ni| ni.add_pod(pod));
        Ok(())
    }

    /// Removes a pod assumed with [`Snapshot::assume_pod`] from its node.
    pub fn forget_pod(&mut self, pod: &PodInfo, undo: &mut SnapshotUndo) -> Result<(), String> {
        let node = pod.node_name().ok_or_else(|| format!("pod {} is not assumed on a node", pod.key()))?;
        let i = *self.index.get(node).ok_or_else(|| format!("nodeinfo not found for node name {node:?}"))?;
        let mut removed = false;
        self.change_node(i, undo, |ni| removed = ni.remove_pod(pod.uid()));
        if removed {
            Ok(())
        } else {
            Err(format!("assumed pod {:?} not found in the snapshot", pod.key()))
        }
    }

    /// Removes a pod from its node in this snapshot only (preemption simulations).
    pub fn remove_pod(&mut self, node: &str, uid: &str, undo: &mut SnapshotUndo) -> bool {
        let Some(&i) = self.index.get(node) else { return false };
        let mut removed = false;
        self.change_node(i, undo, |ni| removed = ni.remove_pod(uid));
        removed
    }

    /// Adds a pod back to its node in this snapshot only (preemption simulations).
    pub fn add_pod(&mut self, node: &str, pod: Arc<PodInfo>, undo: &mut SnapshotUndo) -> bool {
        let Some(&i) = self.index.get(node) else { return false };
        self.change_node(i, undo, |ni| ni.add_pod(pod));
        true
    }

    /// Puts back every node entry changed since `undo` was created.
    pub fn restore(&mut self, undo: SnapshotUndo) {
        for (i, orig) in undo.saved.into_iter().rev() {
            let cur = std::mem::replace(&mut self.node_info_list[i], orig);
            let orig = self.node_info_list[i].clone();
            self.update_used_pvcs(&cur, &orig);
            self.update_affinity_lists(i);
        }
    }
}

/// Adds or removes `i` in a sorted index list.
fn set_member(list: &mut Vec<usize>, i: usize, member: bool) {
    match (list.binary_search(&i), member) {
        (Err(pos), true) => list.insert(pos, i),
        (Ok(pos), false) => {
            list.remove(pos);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_info::PodInfo;
    use serde_json::json;

    fn node(name: &str, anti: bool) -> NodeInfo {
        let mut ni = NodeInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()));
        let term = json!({"labelSelector": {}, "topologyKey": "zone"});
        let section = if anti { "podAntiAffinity" } else { "podAffinity" };
        let pod = json!({"metadata": {"name": name, "uid": name}, "spec": {"containers": [],
            "affinity": {section: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}});
        ni.add_pod(Arc::new(PodInfo::new(Arc::new(serde_json::from_value(pod).unwrap()))));
        ni
    }

    #[test]
    fn incremental_affinity_lists_match_a_rebuild() {
        let mut s = Snapshot::from_node_infos(vec![
            node("a", false),
            NodeInfo::new(Arc::new(Default::default())),
            node("c", true),
        ]);
        assert_eq!((s.with_affinity.clone(), s.with_required_anti_affinity.clone()), (vec![0, 2], vec![2]));
        s.node_info_list[1] = Arc::new(node("b", true));
        s.update_affinity_lists(1);
        let mut emptied = (*s.node_info_list[0]).clone();
        assert!(emptied.remove_pod("a"));
        s.node_info_list[0] = Arc::new(emptied);
        s.update_affinity_lists(0);
        let incremental = (s.with_affinity.clone(), s.with_required_anti_affinity.clone());
        s.rebuild_derived();
        assert_eq!(incremental, (s.with_affinity.clone(), s.with_required_anti_affinity.clone()));
        assert_eq!(incremental, (vec![1, 2], vec![1, 2]));
    }

    fn with_claims(name: &str, claims: &[&str]) -> NodeInfo {
        let mut ni = NodeInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()));
        for (i, c) in claims.iter().enumerate() {
            let pod = json!({"metadata": {"name": format!("{name}-{i}"), "namespace": "ns", "uid": format!("{name}-{i}")},
                "spec": {"containers": [], "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": c}}]}});
            ni.add_pod(Arc::new(PodInfo::new(Arc::new(serde_json::from_value(pod).unwrap()))));
        }
        ni
    }

    #[test]
    fn assumed_pods_are_undone_exactly() {
        let mut s = Snapshot::from_node_infos(vec![with_claims("a", &["x"]), node("b", false)]);
        let before: Vec<*const NodeInfo> = s.node_info_list.iter().map(Arc::as_ptr).collect();
        let pod = |name: &str, node: &str| {
            let p = json!({"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": {"containers": [],
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "y"}}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    [{"labelSelector": {}, "topologyKey": "zone"}]}}}});
            Arc::new(PodInfo::new(Arc::new(serde_json::from_value(p).unwrap())).assumed_on(node))
        };
        let mut undo = SnapshotUndo::default();
        s.assume_pod(pod("p1", "a"), &mut undo).unwrap();
        s.assume_pod(pod("p2", "a"), &mut undo).unwrap();
        s.assume_pod(pod("p3", "b"), &mut undo).unwrap();
        assert!(s.is_pvc_used_by_pods("ns/y"));
        assert_eq!(s.with_required_anti_affinity, vec![0, 1]);
        assert_eq!(s.node_info_list[0].pods.len(), 3);
        s.forget_pod(&pod("p2", "a"), &mut undo).unwrap();
        assert_eq!(s.node_info_list[0].pods.len(), 2);
        assert!(s.forget_pod(&pod("missing", "a"), &mut undo).is_err());
        assert!(s.assume_pod(pod("p4", "nope"), &mut undo).is_err());
        s.restore(undo);
        let after: Vec<*const NodeInfo> = s.node_info_list.iter().map(Arc::as_ptr).collect();
        assert_eq!(before, after, "the cache's own entries are back");
        assert!(!s.is_pvc_used_by_pods("ns/y") && s.is_pvc_used_by_pods("ns/x"));
        assert!(s.with_required_anti_affinity.is_empty());
        assert_eq!(s.with_affinity, vec![1]);
    }

    #[test]
    fn incremental_used_pvcs_match_a_rebuild() {
        let mut s = Snapshot::from_node_infos(vec![with_claims("a", &["x", "y"]), with_claims("b", &["x"])]);
        let replace = |s: &mut Snapshot, i: usize, new: NodeInfo| {
            let old = s.node_info_list[i].clone();
            s.update_used_pvcs(&old, &new);
            s.node_info_list[i] = Arc::new(new);
        };
        // "x" stays used through node b; "y" goes, "z" comes
        replace(&mut s, 0, with_claims("a", &["z", "z"]));
        assert!(s.is_pvc_used_by_pods("ns/x"));
        assert!(!s.is_pvc_used_by_pods("ns/y"));
        assert!(s.is_pvc_used_by_pods("ns/z"));
        replace(&mut s, 1, with_claims("b", &[]));
        assert!(!s.is_pvc_used_by_pods("ns/x"));
        let incremental = s.used_pvc_nodes.clone();
        s.rebuild_derived();
        assert_eq!(incremental, s.used_pvc_nodes);
        assert_eq!(incremental.len(), 1);
    }
}
