//! PreFilter (the three topology counters), its AddPod/RemovePod extensions, and Filter.

use std::sync::Arc;

use ksched_framework::labels::{Labels, PackedLabels};
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::AffinityTerm;
use ksched_framework::{
    BoundFilter, Code, CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin,
    PreFilterResult, Snapshot, Status,
};

use super::cache::{PodKey, Query};
use super::{pod_matches_all_terms, InterPodAffinity};

/// Filter reason when the node cannot satisfy the pod's required affinity.
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// Filter reason when the node's domain hosts a pod the incoming pod's anti-affinity selects.
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod anti-affinity rules";
/// Filter reason when an existing pod's required anti-affinity selects the incoming pod.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

pub(super) const PRE_FILTER_STATE_KEY: &str = "PreFilterInterPodAffinity";

use super::counts::NodeLookup;
pub(crate) use super::counts::TopologyCounts;

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
    fn update_with_pod(&mut self, other: &PodInfo, node_labels: &PackedLabels, delta: i64) {
        let incoming = &*self.pod;
        for term in other.required_anti_affinity_terms() {
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

    fn satisfies_pod_affinity<'a>(&'a self, node: &mut NodeLookup<'a>) -> bool {
        let mut pods_exist = true;
        for term in &self.pod.affinity_terms {
            match node.count(&self.affinity_counts, &term.topology_key) {
                None => return false,
                Some(count) if count <= 0 => pods_exist = false,
                Some(_) => {}
            }
        }
        // Without this exception the first pod of a group with affinity to itself would stay
        // pending forever.
        pods_exist || (self.affinity_counts.is_empty() && self.pod.matches_own_affinity)
    }

    fn satisfies_pod_anti_affinity<'a>(&'a self, node: &mut NodeLookup<'a>) -> bool {
        if self.anti_affinity_counts.is_empty() {
            return true;
        }
        !self
            .pod
            .anti_affinity_terms
            .iter()
            .any(|term| node.count(&self.anti_affinity_counts, &term.topology_key).is_some_and(|c| c > 0))
    }

    fn satisfies_existing_pods_anti_affinity<'a>(&'a self, node: &mut NodeLookup<'a>) -> bool {
        !node.any_positive(&self.existing_anti_affinity_counts)
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

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if !pod.parse_errors().is_empty() {
            let msg = format!("parsing pod: {}", aggregate_errors(pod.parse_errors()));
            return (None, Status::new(Code::UnschedulableAndUnresolvable, [msg]));
        }

        let mut affinity_terms = pod.required_affinity_terms().to_vec();
        let mut anti_affinity_terms = pod.required_anti_affinity_terms().to_vec();
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

        // Without pods with required anti-affinity (or without terms) a counter is empty;
        // leaving the cache alone then keeps plain pods from evicting useful counters.
        let has_existing = !snapshot.with_required_anti_affinity.is_empty();
        if !has_existing && incoming.affinity_terms.is_empty() && incoming.anti_affinity_terms.is_empty() {
            return (None, Status::skip());
        }
        let (existing, affinity, anti) = {
            let mut cache = self.cache();
            cache.sync(snapshot);
            let existing = if has_existing {
                let key = PodKey::new(&incoming.pod, &incoming.namespace_labels);
                cache.counts(Query::ExistingAntiAffinity(key), snapshot, &self.parallelizer)
            } else {
                Arc::default()
            };
            let mut counts = |terms: &[AffinityTerm], query: fn(Vec<AffinityTerm>) -> Query| {
                if terms.is_empty() {
                    Arc::default()
                } else {
                    cache.counts(query(terms.to_vec()), snapshot, &self.parallelizer)
                }
            };
            let affinity = counts(&incoming.affinity_terms, Query::Affinity);
            let anti = counts(&incoming.anti_affinity_terms, Query::AntiAffinity);
            (existing, affinity, anti)
        };
        if existing.is_empty() && incoming.affinity_terms.is_empty() && incoming.anti_affinity_terms.is_empty() {
            return (None, Status::skip());
        }
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState {
                existing_anti_affinity_counts: existing,
                affinity_counts: affinity,
                anti_affinity_counts: anti,
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
        match read_state(state) {
            Ok(s) => s.filter(node),
            Err(status) => status,
        }
    }

    fn bind_cycle<'a>(&'a self, state: &'a CycleState, _pod: &'a PodInfo) -> Option<BoundFilter<'a>> {
        let s = read_state(state).ok()?;
        Some(Box::new(move |node: &NodeInfo| s.filter(node)))
    }
}

impl PreFilterState {
    /// The Filter decision for one node.
    fn filter(&self, node: &NodeInfo) -> Status {
        let mut lookup = NodeLookup::new(node.labels());
        if !self.satisfies_pod_affinity(&mut lookup) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !self.satisfies_pod_anti_affinity(&mut lookup) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if !self.satisfies_existing_pods_anti_affinity(&mut lookup) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}
