//! Counters per (topology key, topology value), stored densely per key so that cloning one (the
//! query cache hands them to cycle states and then keeps updating them) copies integers only.

use std::sync::Arc;

use ksched_framework::labels::PackedLabels;
use rustc_hash::FxHashMap;

/// Slot numbers of one topology key's values. Append-only, so a slot keeps its number in every
/// later version of the table and counters built on an older version stay readable.
#[derive(Debug, Clone, Default)]
pub(crate) struct Domains {
    slots: FxHashMap<Box<str>, u32>,
}

impl Domains {
    pub(crate) fn slot(&self, value: &str) -> Option<u32> {
        self.slots.get(value).copied()
    }

    /// The value's slot, assigning the next free one to a new value.
    pub(crate) fn insert(&mut self, value: &str) -> u32 {
        if let Some(slot) = self.slot(value) {
            return slot;
        }
        let slot = u32::try_from(self.slots.len()).expect("fewer than 2^32 topology values");
        self.slots.insert(value.into(), slot);
        slot
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[derive(Debug, Clone)]
struct KeyCounts {
    key: Box<str>,
    domains: Arc<Domains>,
    counts: Vec<i64>,
    /// Number of non-zero entries of `counts`: zero means the key counts nothing, as a map that
    /// drops zero entries would.
    nonzero: usize,
}

impl KeyCounts {
    fn new(key: &str, domains: Arc<Domains>) -> Self {
        KeyCounts { key: key.into(), domains, counts: Vec::new(), nonzero: 0 }
    }

    fn get(&self, value: &str) -> i64 {
        self.domains.slot(value).and_then(|slot| self.counts.get(slot as usize)).copied().unwrap_or(0)
    }

    fn add_slot(&mut self, slot: u32, delta: i64) {
        let slot = slot as usize;
        if slot >= self.counts.len() {
            self.counts.resize(slot + 1, 0);
        }
        let count = &mut self.counts[slot];
        let was_zero = *count == 0;
        *count += delta;
        match (was_zero, *count == 0) {
            (true, false) => self.nonzero += 1,
            (false, true) => self.nonzero -= 1,
            _ => {}
        }
    }
}

/// Counts (or scores) keyed by (topology key, topology value). Zero entries count as absent, so
/// "empty" means "nothing counted anywhere"; negative counts are kept like upstream's.
#[derive(Debug, Clone, Default)]
pub(crate) struct TopologyCounts {
    keys: Vec<KeyCounts>,
    /// Net number of recorded term matches; scoring tells "no term matched" (skip) from "the
    /// weights cancelled out" with it.
    matches: i64,
}

impl TopologyCounts {
    fn key(&self, key: &str) -> Option<&KeyCounts> {
        self.keys.iter().find(|k| &*k.key == key)
    }

    #[cfg(test)]
    pub(crate) fn get(&self, key: &str, value: &str) -> i64 {
        self.key(key).map_or(0, |k| k.get(value))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.iter().all(|k| k.nonzero == 0)
    }

    /// Whether any term match was recorded (net of removals).
    pub(crate) fn has_matches(&self) -> bool {
        self.matches != 0
    }

    /// Adds `delta` at (key, value), extending this counter's own value tables as needed.
    pub(crate) fn add(&mut self, key: &str, value: &str, delta: i64) {
        let i = match self.keys.iter().position(|k| &*k.key == key) {
            Some(i) => i,
            None => {
                self.keys.push(KeyCounts::new(key, Arc::default()));
                self.keys.len() - 1
            }
        };
        let k = &mut self.keys[i];
        let slot = match k.domains.slot(value) {
            Some(slot) => slot,
            None => Arc::make_mut(&mut k.domains).insert(value),
        };
        k.add_slot(slot, delta);
    }

    /// Adds `delta` at a slot of `domains`, which must be the newest version of the table this
    /// counter's key already uses (if any): slots are only comparable within one lineage.
    pub(crate) fn add_slot(&mut self, key: &str, domains: &Arc<Domains>, slot: u32, delta: i64) {
        let i = match self.keys.iter().position(|k| &*k.key == key) {
            Some(i) => i,
            None => {
                self.keys.push(KeyCounts::new(key, domains.clone()));
                self.keys.len() - 1
            }
        };
        let k = &mut self.keys[i];
        if !Arc::ptr_eq(&k.domains, domains) {
            k.domains = domains.clone();
        }
        k.add_slot(slot, delta);
    }

    /// Like `add`, and records the term match behind it.
    #[cfg(test)]
    pub(crate) fn record(&mut self, key: &str, value: &str, delta: i64) {
        self.add(key, value, delta);
        self.matches += 1;
    }

    /// Records `sign` term matches (negative for removed ones).
    pub(crate) fn count_matches(&mut self, sign: i64) {
        self.matches += sign;
    }

    /// Adds `delta` at the node's value of `key`; nodes without the key are not in any domain.
    pub(crate) fn add_at_node(&mut self, node_labels: &PackedLabels, key: &str, delta: i64) {
        if let Some(value) = node_labels.get(key) {
            self.add(key, value, delta);
        }
    }

    /// Sum over the counted keys of the count at the node's value.
    pub(crate) fn sum_at(&self, node_labels: &PackedLabels) -> i64 {
        self.keys.iter().filter_map(|k| node_labels.get(&k.key).map(|v| k.get(v))).sum()
    }

    /// The non-zero entries as a sorted map, for tests and debugging.
    pub(crate) fn to_sorted(&self) -> std::collections::BTreeMap<(String, String), i64> {
        let mut out = std::collections::BTreeMap::new();
        for k in &self.keys {
            for (value, slot) in &k.domains.slots {
                let count = k.counts.get(*slot as usize).copied().unwrap_or(0);
                if count != 0 {
                    *out.entry((k.key.to_string(), value.to_string())).or_default() += count;
                }
            }
        }
        out
    }
}

/// One node's side of counter lookups during Filter. A state's counters mostly use one topology
/// key and share one value table, so the last key's value and the last slot are remembered
/// instead of searching the node's labels and the table again.
pub(crate) struct NodeLookup<'a> {
    labels: &'a PackedLabels,
    value: Option<(&'a str, Option<&'a str>)>,
    /// Slot of the remembered value in the remembered table.
    slot: Option<(*const Domains, Option<u32>)>,
}

impl<'a> NodeLookup<'a> {
    pub(crate) fn new(labels: &'a PackedLabels) -> Self {
        NodeLookup { labels, value: None, slot: None }
    }

    /// The node's value of `key`.
    pub(crate) fn value(&mut self, key: &'a str) -> Option<&'a str> {
        if let Some((k, v)) = self.value {
            if k == key {
                return v;
            }
        }
        let v = self.labels.get(key);
        self.value = Some((key, v));
        self.slot = None;
        v
    }

    fn count_in(&mut self, k: &'a KeyCounts) -> Option<i64> {
        let value = self.value(&k.key)?;
        let table = Arc::as_ptr(&k.domains);
        let slot = match self.slot {
            Some((t, slot)) if std::ptr::eq(t, table) => slot,
            _ => {
                let slot = k.domains.slot(value);
                self.slot = Some((table, slot));
                slot
            }
        };
        Some(slot.and_then(|s| k.counts.get(s as usize)).copied().unwrap_or(0))
    }

    /// The count at the node's value of `key`; `None` when the node lacks the key.
    pub(crate) fn count(&mut self, counts: &'a TopologyCounts, key: &'a str) -> Option<i64> {
        match counts.key(key) {
            Some(k) => self.count_in(k),
            None => self.value(key).map(|_| 0),
        }
    }

    /// True when the node's value of any counted key has a positive count.
    pub(crate) fn any_positive(&mut self, counts: &'a TopologyCounts) -> bool {
        counts.keys.iter().filter(|k| k.nonzero > 0).any(|k| self.count_in(k).is_some_and(|c| c > 0))
    }
}

impl PartialEq for TopologyCounts {
    fn eq(&self, other: &Self) -> bool {
        self.to_sorted() == other.to_sorted()
    }
}

impl Eq for TopologyCounts {}

impl<'a> FromIterator<(&'a str, &'a str)> for TopologyCounts {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(iter: I) -> Self {
        let mut counts = TopologyCounts::default();
        for (key, value) in iter {
            counts.add(key, value, 1);
        }
        counts
    }
}
