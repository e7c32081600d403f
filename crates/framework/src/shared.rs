//! Equal lists shared among kept objects. The pods of one workload carry equal containers,
//! tolerations and owner references; kept once per workload instead of once per pod, a pod
//! costs a pointer for each instead of a copy (about 600, 300 and 220 bytes).
//!
//! The table holds weak references, so a list lives exactly as long as some object holds it;
//! entries whose list is gone are swept out as the table grows, so it stays about as large as the
//! number of distinct lists alive.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// Sweeps happen after this many new lists (or as many as the table holds, if more), so their
/// cost stays constant per list added.
const SWEEP_AFTER: usize = 1024;

/// A table of shared lists of `T` (one per kind of list, in a `static`).
pub(crate) struct SharedLists<T: 'static> {
    table: Mutex<Option<Table<T>>>,
    /// Hashes the parts of an element that tell lists apart; equality decides in the end, so
    /// leaving a field out costs only collisions.
    fingerprint: fn(&T, &mut DefaultHasher),
}

struct Table<T> {
    by_hash: HashMap<u64, Vec<Weak<[T]>>>,
    added_since_sweep: usize,
}

impl<T: PartialEq> SharedLists<T> {
    /// An empty table using `fingerprint` to hash elements.
    pub(crate) const fn new(fingerprint: fn(&T, &mut DefaultHasher)) -> Self {
        SharedLists { table: Mutex::new(None), fingerprint }
    }

    /// `list` as a shared slice: the one already alive when an equal list is, else a new one.
    pub(crate) fn share(&self, list: Vec<T>) -> Arc<[T]> {
        let mut h = DefaultHasher::new();
        list.len().hash(&mut h);
        for x in &list {
            (self.fingerprint)(x, &mut h);
        }
        let key = h.finish();
        let mut guard = self.table.lock();
        let table = guard.get_or_insert_with(|| Table { by_hash: HashMap::new(), added_since_sweep: 0 });
        let bucket = table.by_hash.entry(key).or_default();
        bucket.retain(|w| w.strong_count() > 0);
        if let Some(found) = bucket.iter().filter_map(Weak::upgrade).find(|a| **a == *list) {
            return found;
        }
        let shared: Arc<[T]> = list.into();
        bucket.push(Arc::downgrade(&shared));
        table.added_since_sweep += 1;
        if table.added_since_sweep >= SWEEP_AFTER.max(table.by_hash.len()) {
            table.by_hash.retain(|_, b| {
                b.retain(|w| w.strong_count() > 0);
                !b.is_empty()
            });
            table.added_since_sweep = 0;
        }
        shared
    }

    /// Distinct lists in the table, dead ones included until the next sweep (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.lock().as_ref().map_or(0, |t| t.by_hash.values().map(Vec::len).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::ptr_arg)] // the fingerprint of a `SharedLists<String>` takes `&String`
    fn first_char(s: &String, h: &mut DefaultHasher) {
        s.chars().next().hash(h);
    }

    #[test]
    fn equal_lists_share_one_allocation_and_dead_ones_are_swept() {
        static LISTS: SharedLists<String> = SharedLists::new(first_char);
        let a = LISTS.share(vec!["x".into(), "y".into()]);
        let b = LISTS.share(vec!["x".into(), "y".into()]);
        assert!(Arc::ptr_eq(&a, &b));
        // Same fingerprint (first characters), different content: not shared.
        let c = LISTS.share(vec!["xa".into(), "yb".into()]);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, ["xa".to_string(), "yb".to_string()]);
        let d = LISTS.share(Vec::new());
        assert!(d.is_empty());
        drop((a, b, c));
        // A list nobody holds is not handed out again, and sweeps drop its entry.
        let e = LISTS.share(vec!["x".into(), "y".into()]);
        assert_eq!(Arc::strong_count(&e), 1);
        for i in 0..2 * SWEEP_AFTER {
            drop(LISTS.share(vec![i.to_string()]));
        }
        assert!(LISTS.len() < SWEEP_AFTER + 3, "{}", LISTS.len());
        drop((d, e));
    }
}
