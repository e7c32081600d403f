//! A binary heap whose items are also addressable by key, so queued pods can be updated or
//! removed in place.
//!
//! The sift steps follow the textbook algorithm the upstream heap is built on, so pods that
//! compare equal leave in the same order as upstream's.

use std::collections::HashMap;
use std::sync::Arc;

/// Strict ordering: true when the first item must leave before the second.
pub(crate) type LessFn<T> = Arc<dyn Fn(&T, &T) -> bool + Send + Sync>;

/// A keyed min-heap ordered by a `less` function.
pub(crate) struct KeyedHeap<T> {
    items: Vec<(String, T)>,
    // Keys are pod names, chosen by cluster users: keep the std map's randomly seeded hasher.
    index: HashMap<String, usize>,
    less: LessFn<T>,
}

impl<T> KeyedHeap<T> {
    /// An empty heap.
    pub(crate) fn new(less: LessFn<T>) -> Self {
        KeyedHeap { items: Vec::new(), index: HashMap::new(), less }
    }

    /// Number of items.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// True when an item has this key.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The item with this key.
    pub(crate) fn get(&self, key: &str) -> Option<&T> {
        self.index.get(key).map(|&i| &self.items[i].1)
    }

    /// The first item.
    pub(crate) fn peek(&self) -> Option<&T> {
        self.items.first().map(|(_, v)| v)
    }

    /// Items in storage order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().map(|(_, v)| v)
    }

    /// Inserts, or replaces the item with the same key and restores the order.
    pub(crate) fn add_or_update(&mut self, key: String, value: T) {
        if let Some(&i) = self.index.get(&key) {
            self.items[i].1 = value;
            self.fix(i);
        } else {
            let i = self.items.len();
            self.index.insert(key.clone(), i);
            self.items.push((key, value));
            self.up(i);
        }
    }

    /// Changes the item with this key in place and restores the order; false when absent.
    pub(crate) fn update_with(&mut self, key: &str, f: impl FnOnce(&mut T)) -> bool {
        let Some(&i) = self.index.get(key) else { return false };
        f(&mut self.items[i].1);
        self.fix(i);
        true
    }

    /// Removes and returns the first item.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        let last = self.items.len() - 1;
        self.swap(0, last);
        self.down(0, last);
        self.remove_last()
    }

    /// Removes the item with this key.
    pub(crate) fn delete(&mut self, key: &str) -> Option<T> {
        let i = *self.index.get(key)?;
        let last = self.items.len() - 1;
        if i != last {
            self.swap(i, last);
            if !self.down(i, last) {
                self.up(i);
            }
        }
        self.remove_last()
    }

    fn remove_last(&mut self) -> Option<T> {
        let (key, value) = self.items.pop()?;
        self.index.remove(&key);
        Some(value)
    }

    fn fix(&mut self, i: usize) {
        if !self.down(i, self.items.len()) {
            self.up(i);
        }
    }

    fn less_at(&self, a: usize, b: usize) -> bool {
        (self.less)(&self.items[a].1, &self.items[b].1)
    }

    fn swap(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        self.items.swap(a, b);
        // Sifting swaps once per heap level: update the positions in place, without cloning
        // the keys.
        for i in [a, b] {
            if let Some(slot) = self.index.get_mut(self.items[i].0.as_str()) {
                *slot = i;
            }
        }
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
        for (k, &i) in &h.index {
            assert_eq!(&h.items[i].0, k);
        }
        let mut prev = i32::MIN;
        while let Some(v) = h.pop() {
            assert!(v >= prev);
            prev = v;
        }
    }
}
