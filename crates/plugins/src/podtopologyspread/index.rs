//! Per-node facts PreFilter and PreScore need on every cycle but that only change with the node:
//! its domain for a topology key and its number of pods matching a selector. Kept across cycles
//! and recomputed only where the snapshot holds a different NodeInfo than last time, so a cycle
//! walks a few contiguous arrays instead of touching every NodeInfo, Node and Pod of the cluster.
//!
//! Change detection compares `Arc` pointers. The index keeps its own reference to every NodeInfo
//! it derived facts from, so such a NodeInfo can be neither mutated in place (`Arc::make_mut`
//! clones while we hold it) nor freed and its address reused: an equal pointer means an
//! identical NodeInfo. Filter and Score find a node's domain the same way, by the address of its
//! Node object, which the states keep alive through [`NodeDomains`].

use std::cell::Cell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ksched_framework::labels::Selector;
use ksched_framework::node::Node;
use ksched_framework::NodeInfo;
use rustc_hash::FxHashMap;

use super::common::{self, count_pods_matching, Constraint, NodeInclusionPolicy};
use crate::nodeaffinity::RequiredNodeAffinity;

/// Domain id of a node without the topology key.
pub(crate) const MISSING: u32 = u32::MAX - 1;
/// Domain id of an entry whose NodeInfo has no Node object.
pub(crate) const NO_NODE: u32 = u32::MAX;

/// Beyond these many cached keys or selectors the least recently used one is dropped: a cluster
/// spreads over a few keys and a handful of workloads at a time.
const MAX_KEYS: usize = 8;
const MAX_SELECTORS: usize = 16;

/// The values of one topology key, interned to dense ids. Append-only, so an id stays valid for
/// every state that shares the table. Id 0 is always "", so that the critical paths'
/// placeholder ("") equals a real "" domain exactly when upstream's strings would.
#[derive(Debug, Clone)]
pub(crate) struct DomainTable {
    values: Vec<String>,
    ids: FxHashMap<String, u32>,
}

/// Id of the domain "".
pub(crate) const EMPTY_DOMAIN: u32 = 0;

impl Default for DomainTable {
    fn default() -> Self {
        let mut t = DomainTable { values: Vec::new(), ids: FxHashMap::default() };
        t.intern("");
        t
    }
}

impl DomainTable {
    /// The id of `value`, if interned.
    pub fn id(&self, value: &str) -> Option<u32> {
        self.ids.get(value).copied()
    }

    /// The id of `value`, interning it when new.
    pub fn intern(&mut self, value: &str) -> u32 {
        if let Some(id) = self.id(value) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(value.to_string());
        self.ids.insert(value.to_string(), id);
        id
    }

    /// The value of an id.
    #[cfg(test)]
    pub fn value(&self, id: u32) -> &String {
        &self.values[id as usize]
    }

    /// Number of interned values.
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

/// The domain id (or `MISSING`) of every Node object seen for one topology key, by address, and
/// of the Node at each snapshot position. Holds each such Node, so no other Node can take an
/// address while the map is alive; Nodes are immutable, so an entry stays right for as long as
/// anyone can look it up. Only new Node objects (node updates, not pod changes) and moved nodes
/// change it. Copies share one append-only list of the Nodes (keeping a few extra alive is
/// harmless), so copying on write does not touch every Node.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeDomains {
    /// Node address -> (domain, a position where the node was last seen).
    ids: FxHashMap<usize, (u32, u32)>,
    /// Per snapshot position: (Node address, domain); (0, `NO_NODE`) without a Node.
    by_pos: Vec<(usize, u32)>,
    keep: Arc<Mutex<Vec<Arc<Node>>>>,
}

thread_local! {
    /// The position of the node this thread looked up last: Filter and Score walk the snapshot
    /// in order, so the next lookup is usually for the same or the next position.
    static LAST_POSITION: Cell<usize> = const { Cell::new(0) };
}

impl NodeDomains {
    /// The domain of a Node object, if known. Tries the positions after the previous lookup
    /// before hashing: that is where an in-order walk finds it, in memory already cached.
    pub fn get(&self, node: &Arc<Node>) -> Option<u32> {
        let addr = Arc::as_ptr(node) as usize;
        let last = LAST_POSITION.get();
        for p in [last, last + 1] {
            if let Some(&(a, domain)) = self.by_pos.get(p) {
                if a == addr {
                    LAST_POSITION.set(p);
                    return Some(domain);
                }
            }
        }
        let &(domain, pos) = self.ids.get(&addr)?;
        LAST_POSITION.set(pos as usize);
        Some(domain)
    }

    fn insert(&mut self, node: &Arc<Node>, domain: u32, pos: usize) {
        self.keep.lock().unwrap_or_else(PoisonError::into_inner).push(node.clone());
        self.ids.insert(Arc::as_ptr(node) as usize, (domain, pos as u32));
    }

    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Marks a domain that the map upstream builds would not contain.
const ABSENT: i64 = i64::MIN;

/// Per domain of one constraint, its number of matching pods: upstream's `map[string]int`, as a
/// vector indexed by domain id. Only the domains upstream's map would hold are present.
#[derive(Debug, Clone)]
pub(crate) struct DomainCounts {
    table: Arc<DomainTable>,
    nodes: Arc<NodeDomains>,
    counts: Vec<i64>,
    len: usize,
}

impl DomainCounts {
    /// No domain present yet.
    pub fn new(table: Arc<DomainTable>, nodes: Arc<NodeDomains>) -> Self {
        DomainCounts { counts: vec![ABSENT; table.len()], table, nodes, len: 0 }
    }

    /// The domain of a node for this constraint's `key`: `None` when the node lacks the key,
    /// `Some(None)` when its value has no id (a node the snapshot did not have).
    pub fn domain_of(&self, ni: &NodeInfo, key: &str) -> Option<Option<u32>> {
        if let Some(domain) = ni.node().and_then(|n| self.nodes.get(n)) {
            return if domain == MISSING { None } else { Some(Some(domain)) };
        }
        ni.label(key).map(|v| self.table.id(v))
    }

    /// One more than the largest domain id this can hold.
    pub fn capacity(&self) -> usize {
        self.counts.len()
    }

    /// Number of present domains.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The count of a domain given by id, if present.
    pub fn get_id(&self, id: u32) -> Option<i64> {
        self.counts.get(id as usize).copied().filter(|&n| n != ABSENT)
    }

    /// Adds `delta` to a present domain or inserts it with `delta`; true when inserted.
    pub fn add_id(&mut self, id: u32, delta: i64) -> bool {
        let n = &mut self.counts[id as usize];
        if *n == ABSENT {
            *n = delta;
            self.len += 1;
            true
        } else {
            *n += delta;
            false
        }
    }

    /// The id of `value`; a value the table lacks is interned into a private copy.
    pub fn intern(&mut self, value: &str) -> u32 {
        if let Some(id) = self.table.id(value) {
            return id;
        }
        let id = Arc::make_mut(&mut self.table).intern(value);
        self.counts.resize(self.table.len(), ABSENT);
        id
    }

    /// [`Self::add_id`] by value. Returns the domain's id and its new count.
    pub fn add(&mut self, value: &str, delta: i64) -> (u32, i64) {
        let id = self.intern(value);
        self.add_id(id, delta);
        (id, self.counts[id as usize])
    }

    /// Present domains with their counts, by value.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (&String, &i64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, n)| **n != ABSENT).map(|(id, n)| (self.table.value(id as u32), n))
    }

    /// The value of a domain id.
    #[cfg(test)]
    pub fn value(&self, id: u32) -> &String {
        self.table.value(id)
    }
}

/// Each entry's domain for one topology key.
struct KeyIndex {
    key: String,
    table: Arc<DomainTable>,
    nodes: Arc<NodeDomains>,
    domains: Vec<u32>,
    /// Epoch up to which `domains` reflects the tracked nodes.
    synced: u64,
    used: u64,
}

/// Each entry's number of pods matching a selector in a namespace.
struct CountIndex {
    namespace: String,
    selector: Selector,
    counts: Vec<u32>,
    synced: u64,
    used: u64,
}

#[derive(Default)]
struct Inner {
    /// The NodeInfos the facts were derived from, in snapshot order.
    nodes: Vec<Arc<NodeInfo>>,
    /// Per entry, the epoch in which it last changed.
    changed_at: Vec<u64>,
    /// Per entry, whether the node has any taint (only tainted nodes need the taints policy).
    tainted: Vec<bool>,
    num_tainted: usize,
    epoch: u64,
    /// (epoch, position) of every change after epoch `log_floor`, in epoch order: what a
    /// sub-index synced since then has to recompute, without scanning `changed_at`.
    log: Vec<(u64, u32)>,
    log_floor: u64,
    keys: Vec<KeyIndex>,
    selectors: Vec<CountIndex>,
}

/// Calls `f` with every position of `changed_at` changed after epoch `synced`.
fn for_changed(changed_at: &[u64], log: &[(u64, u32)], log_floor: u64, synced: u64, f: impl FnMut(usize)) {
    if synced >= log_floor {
        let start = log.partition_point(|&(e, _)| e <= synced);
        // A position may be logged more than once, or be gone since: recomputing is idempotent.
        log[start..].iter().map(|&(_, i)| i as usize).filter(|&i| i < changed_at.len()).for_each(f);
    } else {
        (0..changed_at.len()).filter(|&i| changed_at[i] > synced).for_each(f);
    }
}

/// The per-node facts of the latest snapshot, shared by the clones of one plugin instance.
#[derive(Default)]
pub(crate) struct SpreadIndex(Mutex<Inner>);

impl std::fmt::Debug for SpreadIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpreadIndex")
    }
}

/// What a cycle asks of the index for one constraint.
pub(crate) struct Request<'a> {
    pub key: &'a str,
    /// `None` when no pod count is needed (or every count is 0).
    pub selector: Option<&'a Selector>,
}

/// The facts for the nodes of one snapshot, per requested constraint; holds the index locked.
pub(crate) struct View<'a> {
    inner: MutexGuard<'a, Inner>,
    keys: Vec<usize>,
    selectors: Vec<Option<usize>>,
}

impl View<'_> {
    /// Each node's domain id for constraint `i`'s key, `MISSING` or `NO_NODE`.
    pub fn domains(&self, i: usize) -> &[u32] {
        &self.inner.keys[self.keys[i]].domains
    }

    /// Empty counts over the domains of constraint `i`'s key.
    pub fn new_counts(&self, i: usize) -> DomainCounts {
        let k = &self.inner.keys[self.keys[i]];
        DomainCounts::new(k.table.clone(), k.nodes.clone())
    }

    /// Each node's number of matching pods for constraint `i`; `None` when all are 0.
    pub fn counts(&self, i: usize) -> Option<&[u32]> {
        self.selectors[i].map(|s| self.inner.selectors[s].counts.as_slice())
    }

    /// Whether each node has taints.
    pub fn tainted(&self) -> &[bool] {
        &self.inner.tainted
    }

    /// Whether any node has taints.
    pub fn any_tainted(&self) -> bool {
        self.inner.num_tainted > 0
    }

    /// The per-constraint columns Filter and Score walk, for `constraints` in request order.
    pub fn columns(&self, constraints: &[Constraint], required: &RequiredNodeAffinity) -> Columns<'_> {
        let n = constraints.len();
        Columns {
            affinity_matters: constraints
                .iter()
                .map(|c| c.node_affinity_policy == NodeInclusionPolicy::Honor && !required.is_empty())
                .collect(),
            taints_matter: constraints
                .iter()
                .map(|c| c.node_taints_policy == NodeInclusionPolicy::Honor && self.any_tainted())
                .collect(),
            tainted: self.tainted(),
            domains: (0..n).map(|i| self.domains(i)).collect(),
            pod_counts: (0..n).map(|i| self.counts(i)).collect(),
        }
    }
}

/// A view's facts laid out per constraint, plus whether each constraint's inclusion policies can
/// exclude a node that has every key (when neither can, inclusion needs no look at the Node).
pub(crate) struct Columns<'v> {
    /// The pod has required node affinity and the constraint honors it.
    pub affinity_matters: Vec<bool>,
    /// Some node has taints and the constraint honors them.
    pub taints_matter: Vec<bool>,
    /// Whether each node has taints.
    pub tainted: &'v [bool],
    /// Per constraint, each node's domain id.
    pub domains: Vec<&'v [u32]>,
    /// Per constraint, each node's matching pod count (`None` when all are 0).
    pub pod_counts: Vec<Option<&'v [u32]>>,
}

impl Columns<'_> {
    /// Whether constraint `i`'s policies may exclude node `n` (then the Node must be checked).
    pub fn may_exclude(&self, i: usize, n: usize) -> bool {
        self.affinity_matters[i] || (self.taints_matter[i] && self.tainted[n])
    }
}

impl SpreadIndex {
    /// Brings the index up to date with `nodes` (a snapshot's list) and returns the facts for
    /// `requests`, counting pods in `namespace`.
    pub fn view(&self, nodes: &[Arc<NodeInfo>], requests: &[Request<'_>], namespace: &str) -> View<'_> {
        let mut inner = self.0.lock().unwrap_or_else(|poisoned| {
            // A panic mid-update may have left the facts inconsistent: start over.
            self.0.clear_poison();
            let mut g = poisoned.into_inner();
            *g = Inner::default();
            g
        });
        inner.sync(nodes);
        let keys = requests.iter().map(|r| inner.key_slot(r.key)).collect();
        let selectors = requests
            .iter()
            .map(|r| {
                r.selector.filter(|s| !s.is_everything() && !s.is_nothing()).map(|s| inner.selector_slot(namespace, s))
            })
            .collect();
        View { inner, keys, selectors }
    }
}

impl Inner {
    /// Takes over the snapshot's entries, stamping the ones that changed with a new epoch.
    fn sync(&mut self, list: &[Arc<NodeInfo>]) {
        if self.log.len() > 4 * list.len() + 64 {
            self.log.clear();
            self.log_floor = self.epoch;
        }
        self.epoch += 1;
        let epoch = self.epoch;
        if list.len() < self.nodes.len() {
            self.num_tainted -= self.tainted[list.len()..].iter().filter(|t| **t).count();
        }
        self.nodes.truncate(list.len());
        self.changed_at.truncate(list.len());
        self.tainted.truncate(list.len());
        for (i, ni) in list.iter().enumerate() {
            if i < self.nodes.len() && Arc::ptr_eq(&self.nodes[i], ni) {
                continue;
            }
            let tainted = ni.node().is_some_and(|n| !common::node_taints(n).is_empty());
            if i < self.nodes.len() {
                self.nodes[i] = ni.clone();
                self.changed_at[i] = epoch;
                self.num_tainted -= usize::from(self.tainted[i]);
                self.tainted[i] = tainted;
            } else {
                self.nodes.push(ni.clone());
                self.changed_at.push(epoch);
                self.tainted.push(tainted);
            }
            self.num_tainted += usize::from(tainted);
            self.log.push((epoch, i as u32));
        }
    }

    /// Stores a new entry and returns its slot: once there are `max` entries it replaces the
    /// least recently used one not used in this epoch (or grows past `max` when all are in use).
    fn claim_slot<T>(items: &mut Vec<T>, max: usize, epoch: u64, used: impl Fn(&T) -> u64, fresh: T) -> usize {
        let victim = (items.len() >= max)
            .then(|| items.iter().map(&used).enumerate().filter(|&(_, u)| u != epoch).min_by_key(|&(_, u)| u))
            .flatten();
        match victim {
            Some((v, _)) => {
                items[v] = fresh;
                v
            }
            None => {
                items.push(fresh);
                items.len() - 1
            }
        }
    }

    fn key_slot(&mut self, key: &str) -> usize {
        let epoch = self.epoch;
        let slot = match self.keys.iter().position(|k| k.key == key) {
            Some(slot) => slot,
            None => {
                let fresh = KeyIndex {
                    key: key.to_string(),
                    table: Arc::default(),
                    nodes: Arc::default(),
                    domains: Vec::new(),
                    synced: 0,
                    used: epoch,
                };
                Self::claim_slot(&mut self.keys, MAX_KEYS, epoch, |k| k.used, fresh)
            }
        };
        let k = &mut self.keys[slot];
        k.used = epoch;
        // Values and Node objects long gone pile up (node churn, node updates): start afresh.
        // Old Nodes are kept alive, and a Node's status can be large, so few of them may pile up.
        let n = self.nodes.len();
        if k.table.len() > 2 * n + 64 || k.nodes.len() > n + n / 8 + 64 {
            k.table = Arc::default();
            k.nodes = Arc::default();
            k.synced = 0;
        }
        k.domains.resize(n, NO_NODE);
        if k.nodes.by_pos.len() != n {
            Arc::make_mut(&mut k.nodes).by_pos.resize(n, (0, NO_NODE));
        }
        let nodes = &self.nodes;
        for_changed(&self.changed_at, &self.log, self.log_floor, k.synced, |i| {
            let entry = match nodes[i].node() {
                None => (0, NO_NODE),
                Some(node) => {
                    let addr = Arc::as_ptr(node) as usize;
                    // Most changes are pods coming and going: the Node object is the same.
                    let domain = match k.nodes.ids.get(&addr) {
                        Some(&(domain, pos)) => {
                            if pos as usize != i {
                                Arc::make_mut(&mut k.nodes).ids.insert(addr, (domain, i as u32));
                            }
                            domain
                        }
                        None => {
                            let domain = match common::node_labels(node).get(&k.key) {
                                None => MISSING,
                                Some(v) => match k.table.id(v) {
                                    Some(id) => id,
                                    None => Arc::make_mut(&mut k.table).intern(v),
                                },
                            };
                            Arc::make_mut(&mut k.nodes).insert(node, domain, i);
                            domain
                        }
                    };
                    (addr, domain)
                }
            };
            k.domains[i] = entry.1;
            if k.nodes.by_pos[i] != entry {
                Arc::make_mut(&mut k.nodes).by_pos[i] = entry;
            }
        });
        k.synced = epoch;
        slot
    }

    fn selector_slot(&mut self, namespace: &str, selector: &Selector) -> usize {
        let epoch = self.epoch;
        let slot = match self.selectors.iter().position(|s| s.namespace == namespace && s.selector == *selector) {
            Some(slot) => slot,
            None => {
                let fresh = CountIndex {
                    namespace: namespace.to_string(),
                    selector: selector.clone(),
                    counts: Vec::new(),
                    synced: 0,
                    used: epoch,
                };
                Self::claim_slot(&mut self.selectors, MAX_SELECTORS, epoch, |s| s.used, fresh)
            }
        };
        let s = &mut self.selectors[slot];
        s.used = epoch;
        s.counts.resize(self.nodes.len(), 0);
        let nodes = &self.nodes;
        for_changed(&self.changed_at, &self.log, self.log_floor, s.synced, |i| {
            s.counts[i] = count_pods_matching(&nodes[i].pods, &s.selector, &s.namespace) as u32;
        });
        s.synced = epoch;
        slot
    }
}
