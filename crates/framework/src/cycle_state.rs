//! CycleState: per-attempt scratch space plugins share between extension points.

use std::any::Any;
use std::borrow::Cow;

/// Data a plugin stores in the cycle state. Blanket-implemented for every `Clone + Send + Sync`.
pub trait StateData: Any + Send + Sync {
    /// Deep copy, used when preemption or nominated-pod filtering clones the state.
    fn clone_data(&self) -> Box<dyn StateData>;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_data(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
}

/// Error returned when reading a key that is absent or of another type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: not found")]
pub struct NotFound(pub String);

/// A set of plugin names, such as the plugins a cycle skips. It holds a handful of names at
/// most and is rebuilt every cycle, so a vector scanned in order costs less than hashing them
/// (and seeding a hasher) each time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginNames(Vec<String>);

impl PluginNames {
    /// Adds a name; false when it was already there.
    pub fn insert(&mut self, name: impl Into<String>) -> bool {
        let name = name.into();
        if self.contains(&name) {
            return false;
        }
        self.0.push(name);
        true
    }

    /// True when the name is in the set.
    pub fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|n| n == name)
    }

    /// True when the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// Per scheduling attempt key/value store plus the framework's skip sets.
#[derive(Default)]
pub struct CycleState {
    // Read for every node by every plugin, and rarely more than a dozen entries: a linear scan
    // that first matches the key's address (keys are constants) beats hashing the string.
    storage: Vec<Slot>,
    /// Set by the framework while a plugin with no binding-cycle extension point runs its
    /// PreFilter or PreScore: what it writes then is dropped before the binding cycle.
    pub(crate) writer_is_scheduling_only: bool,
    /// Plugins whose PreFilter returned Skip: their Filter and AddPod/RemovePod are not run.
    pub skip_filter_plugins: PluginNames,
    /// Plugins whose PreScore returned Skip: their Score is not run.
    pub skip_score_plugins: PluginNames,
    /// PreBind plugins whose PreBindPreFlight returned Skip.
    pub skip_pre_bind_plugins: PluginNames,
    /// Whether plugin execution metrics are recorded for this cycle (sampled).
    pub record_plugin_metrics: bool,
    /// Number of nodes in this cycle's snapshot (set by the framework at PreFilter), for Score
    /// plugins that weigh by cluster size (upstream reads it from the snapshot lister).
    pub num_all_nodes: usize,
    /// Set when this attempt is part of a pod-group scheduling cycle: the group's state in the
    /// cycle's snapshot (upstream's `IsPodGroupSchedulingCycle`).
    pub pod_group_cycle: Option<crate::podgroup::PodGroupCycle>,
    /// PostFilter plugins are not run (a pod-group cycle simulating preemption).
    pub skip_all_post_filters: bool,
}

/// One stored value.
struct Slot {
    key: Cow<'static, str>,
    value: Box<dyn StateData>,
    /// Written by a plugin that takes no part in the binding cycle.
    scheduling_only: bool,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            storage: self
                .storage
                .iter()
                .map(|s| Slot {
                    key: s.key.clone(),
                    value: s.value.as_ref().clone_data(),
                    scheduling_only: s.scheduling_only,
                })
                .collect(),
            writer_is_scheduling_only: self.writer_is_scheduling_only,
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
            skip_pre_bind_plugins: self.skip_pre_bind_plugins.clone(),
            record_plugin_metrics: self.record_plugin_metrics,
            num_all_nodes: self.num_all_nodes,
            pod_group_cycle: self.pod_group_cycle.clone(),
            skip_all_post_filters: self.skip_all_post_filters,
        }
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState").field("keys", &self.storage.iter().map(|s| &s.key).collect::<Vec<_>>()).finish()
    }
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, key: &str) -> Option<usize> {
        let same_address = |k: &Cow<'static, str>| k.as_ptr() == key.as_ptr() && k.len() == key.len();
        self.storage
            .iter()
            .position(|s| same_address(&s.key))
            .or_else(|| self.storage.iter().position(|s| s.key.as_ref() == key))
    }

    /// Stores a value under a key, replacing any previous one.
    pub fn write<T: StateData>(&mut self, key: impl Into<Cow<'static, str>>, value: T) {
        let key = key.into();
        let scheduling_only = self.writer_is_scheduling_only;
        match self.position(&key) {
            Some(i) => {
                let slot = &mut self.storage[i];
                slot.value = Box::new(value);
                slot.scheduling_only = scheduling_only;
            }
            None => self.storage.push(Slot { key, value: Box::new(value), scheduling_only }),
        }
    }

    /// Reads a value; "not found" when absent or of another type.
    pub fn read<T: 'static>(&self, key: &str) -> Result<&T, NotFound> {
        self.position(key)
            // Trait upcasting: no virtual call to reach the `Any` view.
            .and_then(|i| (self.storage[i].value.as_ref() as &dyn Any).downcast_ref())
            .ok_or_else(|| NotFound(key.to_string()))
    }

    /// Reads a value mutably.
    pub fn read_mut<T: 'static>(&mut self, key: &str) -> Result<&mut T, NotFound> {
        self.position(key)
            .and_then(|i| (self.storage[i].value.as_mut() as &mut dyn Any).downcast_mut())
            .ok_or_else(|| NotFound(key.to_string()))
    }

    /// Removes a value.
    pub fn delete(&mut self, key: &str) {
        if let Some(i) = self.position(key) {
            self.storage.swap_remove(i);
        }
    }

    /// Drops what plugins without a Reserve, Permit, PreBind, Bind or PostBind point wrote in
    /// PreFilter and PreScore: nothing reads it after the scheduling cycle, and a binding backlog
    /// would otherwise keep every waiting pod's filter and score state (whole per-node count
    /// tables) alive until its binding is written.
    pub fn drop_scheduling_only_state(&mut self) {
        self.storage.retain(|s| !s.scheduling_only);
    }

    /// Number of stored values.
    pub fn len(&self) -> usize {
        self.storage.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.storage.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Counter(i32);

    #[test]
    fn read_write_clone_are_independent() {
        let mut s = CycleState::new();
        s.write("k", Counter(1));
        s.write(String::from("owned"), Counter(2));
        s.write("owned", Counter(3));
        assert_eq!(s.read::<Counter>(&String::from("owned")).unwrap(), &Counter(3));
        s.delete("owned");
        assert!(s.read::<Counter>("owned").is_err());
        s.skip_filter_plugins.insert("P");
        let mut c = s.clone();
        c.read_mut::<Counter>("k").unwrap().0 = 5;
        assert_eq!(s.read::<Counter>("k").unwrap(), &Counter(1));
        assert_eq!(c.read::<Counter>("k").unwrap(), &Counter(5));
        assert!(c.skip_filter_plugins.contains("P"));
        assert_eq!(s.read::<String>("k").unwrap_err().to_string(), "\"k\": not found");
        assert!(s.read::<Counter>("missing").is_err());
    }

    #[test]
    fn plugin_names_is_a_set() {
        let mut names = PluginNames::default();
        assert!(names.is_empty());
        assert!(names.insert("A"));
        assert!(names.insert(String::from("B")));
        assert!(!names.insert("A"), "already present");
        assert!(names.contains("A") && names.contains("B") && !names.contains("C"));
        assert_eq!(names.iter().collect::<Vec<_>>(), ["A", "B"]);
    }
}
