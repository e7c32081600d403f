//! The node tree: nodes grouped by zone, listed round-robin across zones (upstream `backend/cache/node_tree.go`) so that the
//! scheduler's early stop samples every zone.

use std::collections::{HashMap, HashSet};

use ksched_framework::node::Node;

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The zone key of a node: `<region>:\0:<zone>`, preferring the beta labels; "" when unlabelled.
pub fn zone_key(node: &Node) -> String {
    let labels = &node.metadata.labels;
    let zone = labels.get(BETA_ZONE).or_else(|| labels.get(ZONE)).unwrap_or("");
    let region = labels.get(BETA_REGION).or_else(|| labels.get(REGION)).unwrap_or("");
    if zone.is_empty() && region.is_empty() {
        return String::new();
    }
    format!("{region}:\0:{zone}")
}

/// Zones in insertion order, each with its node names in insertion order.
#[derive(Debug, Default, Clone)]
pub struct NodeTree {
    zones: Vec<String>,
    tree: HashMap<String, Vec<String>>,
    /// Every node's name, so that adding one need not scan its zone: at 30,000 nodes in one
    /// zone the scans made building the cache quadratic (a tenth of a 30,000-node benchmark).
    names: HashSet<String>,
}

impl NodeTree {
    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.names.len()
    }

    /// Adds a node (no-op when already present).
    pub fn add(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if !self.names.insert(name.clone()) {
            return;
        }
        let zone = zone_key(node);
        match self.tree.get_mut(&zone) {
            Some(names) => names.push(name),
            None => {
                self.zones.push(zone.clone());
                self.tree.insert(zone, vec![name]);
            }
        }
    }

    /// Removes a node; false when it was not there.
    pub fn remove(&mut self, node: &Node) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let zone = zone_key(node);
        let Some(names) = self.tree.get_mut(&zone) else { return false };
        let Some(i) = names.iter().position(|n| n == name) else { return false };
        names.remove(i);
        if names.is_empty() {
            self.tree.remove(&zone);
            self.zones.retain(|z| *z != zone);
        }
        self.names.remove(name);
        true
    }

    /// Moves a node whose zone changed.
    pub fn update(&mut self, old: &Node, new: &Node) {
        if zone_key(old) == zone_key(new) {
            return;
        }
        self.remove(old);
        self.add(new);
    }

    /// All node names: the first of each zone, then the second of each zone, and so on.
    pub fn list(&self) -> Vec<String> {
        let num_nodes = self.num_nodes();
        let mut out = Vec::with_capacity(num_nodes);
        let mut i = 0;
        while out.len() < num_nodes {
            let mut any = false;
            for z in &self.zones {
                if let Some(n) = self.tree[z].get(i) {
                    out.push(n.clone());
                    any = true;
                }
            }
            if !any {
                break;
            }
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, zone: Option<&str>) -> Node {
        let labels = zone.map(|z| json!({ZONE: z})).unwrap_or(json!({}));
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    }

    #[test]
    fn lists_round_robin_across_zones_in_insertion_order() {
        let mut t = NodeTree::default();
        for (n, z) in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")] {
            t.add(&node(n, Some(z)));
        }
        t.add(&node("a1", Some("a")));
        assert_eq!(t.num_nodes(), 6);
        assert_eq!(t.list(), ["a1", "b1", "c1", "a2", "c2", "a3"]);
        assert!(t.remove(&node("b1", Some("b"))));
        assert!(!t.remove(&node("b1", Some("b"))));
        assert_eq!(t.list(), ["a1", "c1", "a2", "c2", "a3"]);
        t.update(&node("a2", Some("a")), &node("a2", Some("d")));
        assert_eq!(t.list(), ["a1", "c1", "a2", "a3", "c2"]);
    }

    #[test]
    fn beta_labels_win_and_unlabelled_nodes_share_a_zone() {
        let n: Node = serde_json::from_value(json!({"metadata": {"name": "x", "labels": {
            BETA_ZONE: "old", ZONE: "new", REGION: "r"}}}))
        .unwrap();
        assert_eq!(zone_key(&n), "r:\0:old");
        assert_eq!(zone_key(&node("y", None)), "");
    }
}
