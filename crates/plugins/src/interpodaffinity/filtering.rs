//! PreFilter (the three topology counters), its AddPod/RemovePod extensions, and Filter.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use ksched_framework::labels::Labels;
use ksched_framework::pod_info::AffinityTerm;
use ksched_framework::{
    Code, CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin, PreFilterResult, Snapshot,
    Status,
};

use super::{pod_matches_all_terms, InterPodAffinity};

/// Filter reason when the node cannot satisfy the pod's required affinity.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// Filter reason when the node's domain hosts a pod the incoming pod's anti-affinity selects.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod anti-affinity rules";
/// Filter reason when an existing pod's required anti-affinity selects the incoming pod.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

pub(super) const PRE_FILTER_STATE_KEY: &str = "PreFilterInterPodAffinity";

/// Counts keyed by (topology key, topology value). Nested so that lookups borrow the node's
/// label strings instead of building a key, and entries that drop to zero are removed so that
/// "empty" means "no matching pod anywhere".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TopologyCounts(HashMap<String, HashMap<String, i64>>);

impl TopologyCounts {
    pub(crate) fn get(&self, key: &str, value: &str) -> i64 {
        self.0.get(key).and_then(|values| values.get(value)).copied().unwrap_or(0)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn add(&mut self, key: &str, value: &str, delta: i64) {
        let values = match self.0.get_mut(key) {
            Some(values) => values,
            None => self.0.entry(key.to_string()).or_default(),
        };
        let count = match values.get_mut(value) {
            Some(count) => count,
            None => values.entry(value.to_string()).or_default(),
        };
        *count += delta;
        if *count == 0 {
            values.remove(value);
            if values.is_empty() {
                self.0.remove(key);
            }
        }
    }

    /// Adds `delta` at the node's value of `key`; nodes without the key are not in any domain.
    fn add_at_node(&mut self, node_labels: &Labels, key: &str, delta: i64) {
        if let Some(value) = node_labels.get(key) {
            self.add(key, value, delta);
        }
    }

    /// True when the node's value of any counted key has a positive count.
    fn any_positive_at(&self, node_labels: &Labels) -> bool {
        self.0.iter().any(|(key, values)| {
            node_labels.get(key).and_then(|value| values.get(value)).is_some_and(|count| *count > 0)
        })
    }

    /// The counts as a sorted map, for tests and debugging.
    #[cfg(test)]
    pub(crate) fn to_sorted(&self) -> std::collections::BTreeMap<(String, String), i64> {
        self.0.iter().flat_map(|(k, values)| values.iter().map(move |(v, c)| ((k.clone(), v.clone()), *c))).collect()
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for TopologyCounts {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(iter: I) -> Self {
        let mut counts = TopologyCounts::default();
        for (key, value) in iter {
            counts.add(key, value, 1);
        }
        counts
    }
}

/// The incoming pod as Filter needs it: required terms with namespace selectors resolved.
#[derive(Debug)]
pub(super) struct IncomingPod {
    pod: Arc<Pod>,
    affinity_terms: Vec<AffinityTerm>,
    anti_affinity_terms: Vec<AffinityTerm>,
    namespace_labels: Labels,
    /// Whether the pod matches all of its own affinity terms (the "first pod of a group" case).
    matches_own_affinity: bool,
}

/// What PreFilter computes. Counters are copy-on-write: cloning the state (preemption does it
/// per candidate node) is three reference bumps, and AddPod/RemovePod copy only what they touch.
#[derive(Debug, Clone)]
pub(super) struct PreFilterState {
    /// Existing pods whose required anti-affinity terms select the incoming pod, per term.
    pub(super) existing_anti_affinity_counts: Arc<TopologyCounts>,
    /// Existing pods matching all the incoming pod's affinity terms, once per term.
    pub(super) affinity_counts: Arc<TopologyCounts>,
    /// Existing pods matched by each of the incoming pod's anti-affinity terms.
    pub(super) anti_affinity_counts: Arc<TopologyCounts>,
    pub(super) pod: Arc<IncomingPod>,
}

impl PreFilterState {
    fn update_with_pod(&mut self, other: &PodInfo, node_labels: &Labels, delta: i64) {
        let incoming = &*self.pod;
        for term in &other.required_anti_affinity_terms {
            if term.matches(&incoming.pod, Some(&incoming.namespace_labels)) {
                Arc::make_mut(&mut self.existing_anti_affinity_counts).add_at_node(
                    node_labels,
                    &term.topology_key,
                    delta,
                );
            }
        }
        if pod_matches_all_terms(&incoming.affinity_terms, &other.pod) {
            let counts = Arc::make_mut(&mut self.affinity_counts);
            for term in &incoming.affinity_terms {
                counts.add_at_node(node_labels, &term.topology_key, delta);
            }
        }
        for term in &incoming.anti_affinity_terms {
            if term.matches(&other.pod, None) {
                Arc::make_mut(&mut self.anti_affinity_counts).add_at_node(node_labels, &term.topology_key, delta);
            }
        }
    }

    fn satisfies_pod_affinity(&self, node_labels: &Labels) -> bool {
        let mut pods_exist = true;
        for term in &self.pod.affinity_terms {
            let Some(value) = node_labels.get(&term.topology_key) else { return false };
            if self.affinity_counts.get(&term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // Without this exception the first pod of a group with affinity to itself would stay
        // pending forever.
        pods_exist || (self.affinity_counts.is_empty() && self.pod.matches_own_affinity)
    }

    fn satisfies_pod_anti_affinity(&self, node_labels: &Labels) -> bool {
        if self.anti_affinity_counts.is_empty() {
            return true;
        }
        !self.pod.anti_affinity_terms.iter().any(|term| {
            node_labels
                .get(&term.topology_key)
                .is_some_and(|v| self.anti_affinity_counts.get(&term.topology_key, v) > 0)
        })
    }

    fn satisfies_existing_pods_anti_affinity(&self, node_labels: &Labels) -> bool {
        !self.existing_anti_affinity_counts.any_positive_at(node_labels)
    }
}

fn read_state(state: &CycleState) -> Result<&PreFilterState, Status> {
    state
        .read::<PreFilterState>(PRE_FILTER_STATE_KEY)
        .map_err(|_| Status::error(format!("error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found")))
}

fn read_state_mut(state: &mut CycleState) -> Result<&mut PreFilterState, Status> {
    state
        .read_mut::<PreFilterState>(PRE_FILTER_STATE_KEY)
        .map_err(|_| Status::error(format!("error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found")))
}

pub(super) use ksched_framework::gofmt::aggregate as aggregate_errors;

impl InterPodAffinity {
    /// Counts, per topology pair, the existing pods whose required anti-affinity terms select
    /// the incoming pod. Only nodes hosting such pods are visited.
    fn existing_anti_affinity_counts(&self, pod: &Pod, ns_labels: &Labels, snapshot: &Snapshot) -> TopologyCounts {
        let nodes: Vec<&Arc<NodeInfo>> = snapshot.have_pods_with_required_anti_affinity().collect();
        let per_node = self.parallelizer.map(nodes.len(), |i| {
            let node = nodes[i];
            let labels = node.labels();
            let mut pairs = Vec::new();
            for existing in &node.pods_with_required_anti_affinity {
                for term in &existing.required_anti_affinity_terms {
                    if term.matches(pod, Some(ns_labels)) {
                        if let Some((k, v)) = labels.get_key_value(&term.topology_key) {
                            pairs.push((k.as_str(), v.as_str()));
                        }
                    }
                }
            }
            pairs
        });
        per_node.into_iter().flatten().collect()
    }

    /// Counts existing pods matching the incoming pod's affinity (all terms, counted per term)
    /// and anti-affinity (per matching term). Every pod of every node is visited, so this only
    /// runs when the pod has required terms.
    fn incoming_affinity_counts(
        &self,
        incoming: &IncomingPod,
        snapshot: &Snapshot,
    ) -> (TopologyCounts, TopologyCounts) {
        if incoming.affinity_terms.is_empty() && incoming.anti_affinity_terms.is_empty() {
            return Default::default();
        }
        let nodes = snapshot.list();
        let per_node = self.parallelizer.map(nodes.len(), |i| {
            let node = &nodes[i];
            let labels = node.labels();
            let (mut affinity, mut anti) = (Vec::new(), Vec::new());
            for existing in &node.pods {
                if pod_matches_all_terms(&incoming.affinity_terms, &existing.pod) {
                    for term in &incoming.affinity_terms {
                        if let Some((k, v)) = labels.get_key_value(&term.topology_key) {
                            affinity.push((k.as_str(), v.as_str()));
                        }
                    }
                }
                for term in &incoming.anti_affinity_terms {
                    if term.matches(&existing.pod, None) {
                        if let Some((k, v)) = labels.get_key_value(&term.topology_key) {
                            anti.push((k.as_str(), v.as_str()));
                        }
                    }
                }
            }
            (affinity, anti)
        });
        let mut affinity = TopologyCounts::default();
        let mut anti = TopologyCounts::default();
        for (a, b) in per_node {
            for (k, v) in a {
                affinity.add(k, v, 1);
            }
            for (k, v) in b {
                anti.add(k, v, 1);
            }
        }
        (affinity, anti)
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if !pod.parse_errors.is_empty() {
            let msg = format!("parsing pod: {}", aggregate_errors(&pod.parse_errors));
            return (None, Status::new(Code::UnschedulableAndUnresolvable, [msg]));
        }

        let mut affinity_terms = pod.required_affinity_terms.clone();
        let mut anti_affinity_terms = pod.required_anti_affinity_terms.clone();
        for term in affinity_terms.iter_mut().chain(anti_affinity_terms.iter_mut()) {
            self.merge_term_namespaces(term);
        }
        let matches_own_affinity = pod_matches_all_terms(&affinity_terms, &pod.pod);
        let incoming = IncomingPod {
            pod: pod.pod.clone(),
            affinity_terms,
            anti_affinity_terms,
            namespace_labels: self.namespace_labels(&pod.pod),
            matches_own_affinity,
        };

        let existing = self.existing_anti_affinity_counts(&incoming.pod, &incoming.namespace_labels, snapshot);
        let (affinity, anti) = self.incoming_affinity_counts(&incoming, snapshot);
        if existing.is_empty() && incoming.affinity_terms.is_empty() && incoming.anti_affinity_terms.is_empty() {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                existing_anti_affinity_counts: Arc::new(existing),
                affinity_counts: Arc::new(affinity),
                anti_affinity_counts: Arc::new(anti),
                pod: Arc::new(incoming),
            },
        );
        (None, Status::success())
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for InterPodAffinity {
    fn add_pod(&self, state: &mut CycleState, _pod: &PodInfo, pod_to_add: &Arc<PodInfo>, node: &NodeInfo) -> Status {
        match read_state_mut(state) {
            Ok(s) => {
                s.update_with_pod(pod_to_add, node.labels(), 1);
                Status::success()
            }
            Err(status) => status,
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        match read_state_mut(state) {
            Ok(s) => {
                s.update_with_pod(pod_to_remove, node.labels(), -1);
                Status::success()
            }
            Err(status) => status,
        }
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let s = match read_state(state) {
            Ok(s) => s,
            Err(status) => return status,
        };
        let labels = node.labels();
        if !s.satisfies_pod_affinity(labels) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.satisfies_pod_anti_affinity(labels) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.satisfies_existing_pods_anti_affinity(labels) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}
