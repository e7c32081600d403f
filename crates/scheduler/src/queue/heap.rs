//! A binary heap whose items are also addressable by key, so queued pods can be updated or
//! removed in place.
//!
//! The sift steps follow the textbook algorithm the upstream heap is built on, so pods that
//! compare equal leave in the same order as upstream's.

use std::collections::HashMap;
use std::sync::Arc;

use slab::Slab;

/// An emptied heap keeps storage up to this many items (the usual trickle of pods does not
/// reallocate) and gives larger storage back.
const RETAINED_CAPACITY: usize = 256;

/// Strict ordering: true when the first item must leave before the second.
pub(crate) type LessFn<T> = Arc<dyn Fn(&T, &T) -> bool + Send + Sync>;

/// A keyed min-heap ordered by a `less` function.
///
/// Items stay where they were inserted (a slab) and the heap orders their slot numbers: a sift
/// step swaps two integers and records the new positions in the two slots, with no key hashing
/// and no moving of the (large) queued pod records.
pub(crate) struct KeyedHeap<T> {
    /// Heap order, as slots of `slots`.
    order: Vec<usize>,
    slots: Slab<Slot<T>>,
    // Keys are pod names, chosen by cluster users: keep the std map's randomly seeded hasher.
    index: HashMap<String, usize>,
    less: LessFn<T>,
}

struct Slot<T> {
    key: String,
    value: T,
    /// Position in `order`.
    pos: usize,
}

impl<T> KeyedHeap<T> {
    /// An empty heap.
    pub(crate) fn new(less: LessFn<T>) -> Self {
        KeyedHeap { order: Vec::new(), slots: Slab::new(), index: HashMap::new(), less }
    }

    /// Number of items.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// True when empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// True when an item has this key.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The item with this key.
    pub(crate) fn get(&self, key: &str) -> Option<&T> {
        self.index.get(key).map(|&s| &self.slots[s].value)
    }

    /// The first item.
    pub(crate) fn peek(&self) -> Option<&T> {
        self.order.first().map(|&s| &self.slots[s].value)
    }

    /// Items in heap order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.order.iter().map(|&s| &self.slots[s].value)
    }

    /// Inserts, or replaces the item with the same key and restores the order.
    pub(crate) fn add_or_update(&mut self, key: String, value: T) {
        if let Some(&s) = self.index.get(&key) {
            let slot = &mut self.slots[s];
            slot.value = value;
            let pos = slot.pos;
            self.fix(pos);
        } else {
            let pos = self.order.len();
            let s = self.slots.insert(Slot { key: key.clone(), value, pos });
            self.index.insert(key, s);
            self.order.push(s);
            self.up(pos);
        }
    }

    /// Changes the item with this key in place and restores the order; false when absent.
    pub(crate) fn update_with(&mut self, key: &str, f: impl FnOnce(&mut T)) -> bool {
        let Some(&s) = self.index.get(key) else { return false };
        let slot = &mut self.slots[s];
        f(&mut slot.value);
        let pos = slot.pos;
        self.fix(pos);
        true
    }

    /// Removes and returns the first item.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.order.is_empty() {
            return None;
        }
        let last = self.order.len() - 1;
        self.swap(0, last);
        self.down(0, last);
        self.remove_last()
    }

    /// Removes the item with this key.
    pub(crate) fn delete(&mut self, key: &str) -> Option<T> {
        let i = self.slots[*self.index.get(key)?].pos;
        let last = self.order.len() - 1;
        if i != last {
            self.swap(i, last);
            if !self.down(i, last) {
                self.up(i);
            }
        }
        self.remove_last()
    }

    fn remove_last(&mut self) -> Option<T> {
        let slot = self.slots.remove(self.order.pop()?);
        self.index.remove(&slot.key);
        if self.order.is_empty() && self.slots.capacity() > RETAINED_CAPACITY {
            self.release();
        }
        Some(slot.value)
    }

    /// Gives an emptied heap's storage back. A burst of pods (a job, a rollout) grows the
    /// vectors and the index to its size, and without this they would keep that size for the
    /// life of the scheduler, empty: a queue that drains returns to holding nothing.
    fn release(&mut self) {
        self.order = Vec::new();
        self.slots = Slab::new();
        self.index = HashMap::new();
    }

    /// How many items the heap can hold without growing.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    fn fix(&mut self, i: usize) {
        if !self.down(i, self.order.len()) {
            self.up(i);
        }
    }

    fn less_at(&self, a: usize, b: usize) -> bool {
        (self.less)(&self.slots[self.order[a]].value, &self.slots[self.order[b]].value)
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.order.swap(a, b);
        self.slots[self.order[a]].pos = a;
        self.slots[self.order[b]].pos = b;
    }

    fn up(&mut self, mut j: usize) {
        while j > 0 {
            let parent = (j - 1) / 2;
            if !self.less_at(j, parent) {
                break;
            }
            self.swap(parent, j);
            j = parent;
        }
    }

    /// Sifts item `i0` down within the first `n` items; true when it moved.
    fn down(&mut self, i0: usize, n: usize) -> bool {
        let mut i = i0;
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let mut child = left;
            if left + 1 < n && self.less_at(left + 1, left) {
                child = left + 1;
            }
            if !self.less_at(child, i) {
                break;
            }
            self.swap(i, child);
            i = child;
        }
        i > i0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heap() -> KeyedHeap<i32> {
        KeyedHeap::new(Arc::new(|a: &i32, b: &i32| a < b))
    }

    #[test]
    fn a_drained_burst_gives_its_storage_back_and_a_trickle_keeps_it() {
        let mut h = heap();
        for i in 0..5000 {
            h.add_or_update(format!("p{i}"), i);
        }
        assert!(h.capacity() >= 5000);
        for i in 0..4999 {
            assert_eq!(h.pop(), Some(i));
        }
        assert!(h.capacity() >= 5000, "kept while not empty");
        assert_eq!(h.delete("p4999"), Some(4999));
        assert_eq!(h.capacity(), 0);
        // Still usable after giving its storage back.
        h.add_or_update("x".into(), 7);
        assert_eq!(h.get("x"), Some(&7));
        for i in 0..100 {
            h.add_or_update(format!("q{i}"), i);
        }
        while h.pop().is_some() {}
        assert!(h.capacity() >= 100, "a small queue keeps its storage");
    }

    #[test]
    fn pops_in_order_and_tracks_keys() {
        let mut h = heap();
        for (k, v) in [("a", 5), ("b", 1), ("c", 3), ("d", 4), ("e", 2)] {
            h.add_or_update(k.into(), v);
        }
        assert_eq!(h.peek(), Some(&1));
        assert_eq!(h.delete("c"), Some(3));
        assert!(!h.contains("c"));
        h.add_or_update("a".into(), 0);
        assert!(h.update_with("d", |v| *v = 10));
        let mut out = vec![];
        while let Some(v) = h.pop() {
            out.push(v);
        }
        assert_eq!(out, vec![0, 1, 2, 10]);
        assert!(h.is_empty() && h.get("a").is_none());
    }

    #[test]
    fn index_stays_consistent_under_churn() {
        let mut h = heap();
        for i in 0..50 {
            h.add_or_update(format!("k{i}"), (i * 37) % 50);
        }
        for i in (0..50).step_by(3) {
            assert!(h.delete(&format!("k{i}")).is_some());
        }
        assert_eq!(h.index.len(), h.order.len());
        assert_eq!(h.slots.len(), h.order.len());
        for (k, &s) in &h.index {
            assert_eq!(&h.slots[s].key, k);
            assert_eq!(h.order[h.slots[s].pos], s);
        }
        // Freed slots are reused by later inserts without disturbing the others.
        for i in 0..10 {
            h.add_or_update(format!("n{i}"), i);
        }
        for (k, &s) in &h.index {
            assert_eq!(&h.slots[s].key, k);
            assert_eq!(h.order[h.slots[s].pos], s);
        }
        let mut prev = i32::MIN;
        while let Some(v) = h.pop() {
            assert!(v >= prev);
            prev = v;
        }
    }
}
