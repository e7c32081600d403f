//! A small string-keyed map stored as one sorted allocation.
//!
//! A pod's resource lists and node selector hold one to four entries. As a `BTreeMap` each of
//! them allocates a node with room for eleven (544 bytes for string keys and values) whatever
//! it holds; as a sorted boxed slice it takes what its entries take. Lookups are a binary
//! search, iteration is in key order, and it reads and writes as the same JSON object.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map from strings to `V`, sorted by key, in one allocation (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SmallMap<V>(Box<[(String, V)]>);

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        SmallMap(Box::new([]))
    }
}

/// The iterator of [`SmallMap::iter`]: `(key, value)` in key order, as a `BTreeMap` yields them.
pub type Iter<'a, V> = std::iter::Map<std::slice::Iter<'a, (String, V)>, fn(&'a (String, V)) -> (&'a String, &'a V)>;

impl<V> SmallMap<V> {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value for `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    /// True when `key` has a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Entries in key order.
    pub fn iter(&self) -> Iter<'_, V> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `key` to `value`, returning the value it replaces (linear: these maps are small and
    /// rarely changed once decoded).
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        let mut entries = std::mem::take(&mut self.0).into_vec();
        let old = match entries.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => Some(std::mem::replace(&mut entries[i].1, value)),
            Err(i) => {
                entries.insert(i, (key, value));
                None
            }
        };
        self.0 = entries.into_boxed_slice();
        old
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        let i = self.find(key).ok()?;
        let mut entries = std::mem::take(&mut self.0).into_vec();
        let (_, v) = entries.remove(i);
        self.0 = entries.into_boxed_slice();
        Some(v)
    }
}

impl<V> FromIterator<(String, V)> for SmallMap<V> {
    /// Like collecting into a `BTreeMap`: the last value given for a key wins.
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        let mut entries: Vec<(String, V)> = iter.into_iter().collect();
        // Stable, so equal keys keep their order and the last one is the one kept.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, V)> = Vec::with_capacity(entries.len());
        for e in entries {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        SmallMap(out.into_boxed_slice())
    }
}

impl<V> From<BTreeMap<String, V>> for SmallMap<V> {
    fn from(m: BTreeMap<String, V>) -> Self {
        // Already sorted and unique.
        SmallMap(m.into_iter().collect::<Vec<_>>().into_boxed_slice())
    }
}

impl<const N: usize, V> From<[(String, V); N]> for SmallMap<V> {
    fn from(entries: [(String, V); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl<V> From<SmallMap<V>> for BTreeMap<String, V> {
    fn from(m: SmallMap<V>) -> Self {
        m.0.into_vec().into_iter().collect()
    }
}

impl<'a, V> IntoIterator for &'a SmallMap<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<V> IntoIterator for SmallMap<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_vec().into_iter()
    }
}

impl<V> std::ops::Index<&str> for SmallMap<V> {
    type Output = V;

    /// The value for `key`; panics when there is none, as `BTreeMap` does.
    fn index(&self, key: &str) -> &V {
        self.get(key).expect("no entry found for key")
    }
}

impl<V: fmt::Debug> fmt::Debug for SmallMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Serialize> Serialize for SmallMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for SmallMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V_<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
            type Value = SmallMap<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(a.size_hint().unwrap_or(0));
                while let Some(e) = a.next_entry::<String, V>()? {
                    entries.push(e);
                }
                Ok(entries.into_iter().collect())
            }
        }
        d.deserialize_map(V_(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_btreemap() {
        let m: SmallMap<i32> = [("b".to_string(), 1), ("a".to_string(), 2), ("b".to_string(), 3)].into();
        let b: BTreeMap<String, i32> = [("b".to_string(), 1), ("a".to_string(), 2), ("b".to_string(), 3)].into();
        assert_eq!(m.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
        assert_eq!(m.get("b"), Some(&3));
        assert_eq!(m.get("c"), None);
        let mut m = m;
        assert_eq!(m.insert("c".into(), 4), None);
        assert_eq!(m.insert("a".into(), 5), Some(2));
        assert_eq!(m.remove("b"), Some(3));
        assert_eq!(m.keys().map(String::as_str).collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(BTreeMap::from(m.clone()), BTreeMap::from([("a".to_string(), 5), ("c".to_string(), 4)]));
    }

    #[test]
    fn reads_and_writes_the_same_json_as_a_btreemap() {
        let m: SmallMap<String> = serde_json::from_str(r#"{"z": "1", "a": "2"}"#).unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"a":"2","z":"1"}"#);
        assert!(serde_json::from_str::<SmallMap<String>>("[1]").is_err());
        assert!(std::mem::size_of::<SmallMap<String>>() == 16);
    }
}
