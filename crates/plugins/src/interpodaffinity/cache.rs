//! Counters kept across scheduling cycles and caught up with the nodes that changed.
//!
//! Each cycle needs a few counters that depend only on the incoming pod's (resolved) terms, or
//! only on its namespace, labels and namespace labels, and consecutive pods of a workload mostly
//! need the same ones. Recounting them walks every pod of the cluster; instead the cache keeps
//! them with the node infos they reflect. A snapshot replaces a node's `Arc<NodeInfo>` whenever
//! the node or its pods change, and the cache holds the previous Arc (so its address cannot be
//! reused), which makes pointer inequality an exact change test. A counter then catches up by
//! subtracting what each replaced node info contributed and adding what its successor does;
//! counts are sums over nodes, so this gives exactly what a full recount would.

use std::collections::VecDeque;
use std::sync::Arc;

use ksched_framework::labels::Labels;
use ksched_framework::parallelize::{ParallelSite, Parallelizer};
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::{AffinityTerm, WeightedAffinityTerm};
use ksched_framework::{NodeInfo, Snapshot};
use rustc_hash::FxHashMap;

use super::counts::{Domains, TopologyCounts};
use super::pod_matches_all_terms;

/// Counting a query over every node.
static COUNT_SITE: ParallelSite = ParallelSite::new();

/// Counters kept at most; the least recently used one goes first.
const CAPACITY: usize = 16;

/// What existing pods' terms are matched against: only the namespace, labels and namespace
/// labels of the incoming pod matter, so pods sharing them share counters.
#[derive(Debug, Clone)]
pub(super) struct PodKey {
    namespace: String,
    labels: ksched_framework::labels::PackedLabels,
    ns_labels: Labels,
    pod: Arc<Pod>,
}

impl PodKey {
    pub(super) fn new(pod: &Arc<Pod>, ns_labels: &Labels) -> Self {
        PodKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
            labels: pod.metadata.labels.clone(),
            ns_labels: ns_labels.clone(),
            pod: pod.clone(),
        }
    }
}

impl PartialEq for PodKey {
    fn eq(&self, other: &Self) -> bool {
        self.namespace == other.namespace && self.labels == other.labels && self.ns_labels == other.ns_labels
    }
}

/// A counter the cache can keep.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Query {
    /// Existing pods' required anti-affinity terms that select the incoming pod, per term.
    ExistingAntiAffinity(PodKey),
    /// Existing pods matching all the incoming pod's required affinity terms, once per term.
    Affinity(Vec<AffinityTerm>),
    /// Existing pods matched by each of the incoming pod's required anti-affinity terms.
    AntiAffinity(Vec<AffinityTerm>),
    /// Weights of the incoming pod's preferred terms (anti-affinity negated) over existing pods.
    Preferred { affinity: Vec<WeightedAffinityTerm>, anti_affinity: Vec<WeightedAffinityTerm> },
    /// Existing pods' required affinity (at the hard weight) and preferred terms that select the
    /// incoming pod.
    ExistingPreferred { pod: PodKey, hard_weight: i64 },
}

impl Query {
    /// Calls `emit(topology key, delta)` for every term match the node's pods contribute.
    fn visit<'a>(&'a self, node: &'a NodeInfo, emit: &mut impl FnMut(&'a str, i64)) {
        match self {
            Query::ExistingAntiAffinity(key) => {
                for existing in &node.pods_with_required_anti_affinity {
                    for term in existing.required_anti_affinity_terms() {
                        if term.matches(&key.pod, Some(&key.ns_labels)) {
                            emit(&term.topology_key, 1);
                        }
                    }
                }
            }
            Query::Affinity(terms) => {
                for existing in &node.pods {
                    if pod_matches_all_terms(terms, &existing.pod) {
                        for term in terms {
                            emit(&term.topology_key, 1);
                        }
                    }
                }
            }
            Query::AntiAffinity(terms) => {
                for existing in &node.pods {
                    for term in terms {
                        if term.matches(&existing.pod, None) {
                            emit(&term.topology_key, 1);
                        }
                    }
                }
            }
            Query::Preferred { affinity, anti_affinity } => {
                for existing in &node.pods {
                    // The incoming pod's terms have their namespace selectors resolved.
                    weighted(affinity, 1, &existing.pod, None, emit);
                    weighted(anti_affinity, -1, &existing.pod, None, emit);
                }
            }
            Query::ExistingPreferred { pod: key, hard_weight } => {
                let ns_labels = Some(&key.ns_labels);
                for existing in &node.pods_with_affinity {
                    if *hard_weight > 0 {
                        for term in existing.required_affinity_terms() {
                            if term.matches(&key.pod, ns_labels) {
                                emit(&term.topology_key, *hard_weight);
                            }
                        }
                    }
                    weighted(existing.preferred_affinity_terms(), 1, &key.pod, ns_labels, emit);
                    weighted(existing.preferred_anti_affinity_terms(), -1, &key.pod, ns_labels, emit);
                }
            }
        }
    }

    /// The nodes whose pods can contribute, given `snapshot`'s derived lists.
    fn candidates<'s>(&self, snapshot: &'s Snapshot) -> Vec<&'s Arc<NodeInfo>> {
        match self {
            Query::ExistingAntiAffinity(_) => snapshot.have_pods_with_required_anti_affinity().collect(),
            Query::ExistingPreferred { .. } => snapshot.have_pods_with_affinity().collect(),
            Query::Affinity(_) | Query::AntiAffinity(_) | Query::Preferred { .. } => snapshot.list().iter().collect(),
        }
    }
}

fn weighted<'a>(
    terms: &'a [WeightedAffinityTerm],
    sign: i64,
    pod: &Pod,
    ns_labels: Option<&Labels>,
    emit: &mut impl FnMut(&'a str, i64),
) {
    for t in terms {
        if t.term.matches(pod, ns_labels) {
            emit(&t.term.topology_key, i64::from(t.weight) * sign);
        }
    }
}

/// The value tables of every topology key counters use, shared by all counters of a key.
#[derive(Debug, Default)]
struct Tables(FxHashMap<Box<str>, Arc<Domains>>);

impl Tables {
    /// The newest table of `key` and the slot of `value` in it. A key seen for the first time
    /// gets every value of `nodes` at once, so that tables grow (and get copied while cycle
    /// states share them) only when nodes change.
    fn slot(&mut self, key: &str, value: &str, nodes: &[Arc<NodeInfo>]) -> (&Arc<Domains>, u32) {
        if !self.0.contains_key(key) {
            let mut domains = Domains::default();
            for node in nodes {
                if let Some(v) = node.labels().get(key) {
                    domains.insert(v);
                }
            }
            self.0.insert(key.into(), Arc::new(domains));
        }
        let domains = self.0.get_mut(key).expect("inserted above");
        let slot = match domains.slot(value) {
            Some(slot) => slot,
            None => Arc::make_mut(domains).insert(value),
        };
        (domains, slot)
    }

    /// Adds the values of `nodes` for every known key, copying each table at most once.
    fn register(&mut self, nodes: &[Arc<NodeInfo>]) {
        for (key, domains) in &mut self.0 {
            if nodes.iter().any(|n| n.labels().get(key).is_some_and(|v| domains.slot(v).is_none())) {
                let domains = Arc::make_mut(domains);
                for node in nodes {
                    if let Some(v) = node.labels().get(key) {
                        domains.insert(v);
                    }
                }
            }
        }
    }
}

/// Adds what `node` contributes to the query's counter, times `sign`.
fn apply(
    query: &Query,
    node: &NodeInfo,
    sign: i64,
    counts: &mut TopologyCounts,
    tables: &mut Tables,
    nodes: &[Arc<NodeInfo>],
) {
    let labels = node.labels();
    query.visit(node, &mut |key, delta| {
        if let Some(value) = labels.get(key) {
            let (domains, slot) = tables.slot(key, value, nodes);
            counts.add_slot(key, domains, slot, delta * sign);
            counts.count_matches(sign);
        }
    });
}

#[derive(Debug)]
struct Entry {
    query: Query,
    counts: Arc<TopologyCounts>,
    /// Number of node changes already applied.
    synced: u64,
    last_used: u64,
}

/// The cache; see the module docs.
#[derive(Debug, Default)]
pub(super) struct QueryCache {
    /// The node infos of the last snapshot seen, in its order.
    nodes: Vec<Arc<NodeInfo>>,
    /// (replaced, replacement) node infos not yet applied to every counter, oldest first.
    changes: VecDeque<(Arc<NodeInfo>, Arc<NodeInfo>)>,
    /// Sequence number of `changes[0]`.
    first_change: u64,
    tables: Tables,
    entries: Vec<Entry>,
    clock: u64,
}

impl QueryCache {
    fn end(&self) -> u64 {
        self.first_change + self.changes.len() as u64
    }

    /// Records how `snapshot` differs from the last snapshot seen.
    pub(super) fn sync(&mut self, snapshot: &Snapshot) {
        let list = snapshot.list();
        if list.len() != self.nodes.len() {
            // Membership changed, which reorders the list: recounting is as cheap as diffing.
            self.reset(list);
            return;
        }
        let mut changed = false;
        for (mine, theirs) in self.nodes.iter_mut().zip(list) {
            if !Arc::ptr_eq(mine, theirs) {
                let old = std::mem::replace(mine, theirs.clone());
                self.changes.push_back((old, theirs.clone()));
                changed = true;
            }
        }
        if !changed {
            return;
        }
        // Counters further behind than this are cheaper to recount than to catch up, and
        // keeping their backlog would keep that many old node infos alive.
        let max_lag = (self.nodes.len() as u64 / 8).max(64);
        let end = self.end();
        self.entries.retain(|e| end - e.synced <= max_lag);
        self.trim();
    }

    fn reset(&mut self, list: &[Arc<NodeInfo>]) {
        self.entries.clear();
        self.changes.clear();
        self.first_change = 0;
        self.nodes = list.to_vec();
        // Values of removed nodes would otherwise accumulate for ever.
        let limit = 2 * self.nodes.len() + 64;
        self.tables.0.retain(|_, domains| domains.len() <= limit);
        self.tables.register(&self.nodes);
    }

    /// Drops the changes every counter has applied.
    fn trim(&mut self) {
        let end = self.end();
        let keep_from = self.entries.iter().map(|e| e.synced).min().unwrap_or(end);
        while self.first_change < keep_from {
            self.changes.pop_front();
            self.first_change += 1;
        }
    }

    /// The query's counter over the last synced snapshot (which must be `snapshot`).
    pub(super) fn counts(
        &mut self,
        query: Query,
        snapshot: &Snapshot,
        parallelizer: &Parallelizer,
    ) -> Arc<TopologyCounts> {
        self.clock += 1;
        let end = self.end();
        if let Some(i) = self.entries.iter().position(|e| e.query == query) {
            let entry = &mut self.entries[i];
            entry.last_used = self.clock;
            if entry.synced < end {
                let counts = Arc::make_mut(&mut entry.counts);
                let from = (entry.synced - self.first_change) as usize;
                for (old, new) in self.changes.range(from..) {
                    apply(&entry.query, old, -1, counts, &mut self.tables, &self.nodes);
                    apply(&entry.query, new, 1, counts, &mut self.tables, &self.nodes);
                }
                entry.synced = end;
                let counts = entry.counts.clone();
                self.trim();
                return counts;
            }
            return entry.counts.clone();
        }
        let counts = Arc::new(self.count(&query, snapshot, parallelizer));
        if self.entries.len() >= CAPACITY {
            if let Some(lru) = (0..self.entries.len()).min_by_key(|i| self.entries[*i].last_used) {
                self.entries.swap_remove(lru);
                self.trim();
            }
        }
        self.entries.push(Entry { query, counts: counts.clone(), synced: self.end(), last_used: self.clock });
        counts
    }

    /// Counts the query over every node from scratch.
    fn count(&mut self, query: &Query, snapshot: &Snapshot, parallelizer: &Parallelizer) -> TopologyCounts {
        let candidates = query.candidates(snapshot);
        let per_node = parallelizer.map(&COUNT_SITE, candidates.len(), |i| {
            let node = candidates[i];
            let labels = node.labels();
            let mut found = Vec::new();
            query.visit(node, &mut |key, delta| {
                if let Some((k, v)) = labels.get_key_value(key) {
                    found.push((k, v, delta));
                }
            });
            found
        });
        let mut counts = TopologyCounts::default();
        for (key, value, delta) in per_node.into_iter().flatten() {
            let (domains, slot) = self.tables.slot(key, value, &self.nodes);
            counts.add_slot(key, domains, slot, delta);
            counts.count_matches(1);
        }
        counts
    }
}
