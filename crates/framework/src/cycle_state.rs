//! CycleState: per-attempt scratch space plugins share between extension points.

use std::any::Any;
use std::collections::HashSet;

use rustc_hash::FxHashMap;

/// Data a plugin stores in the cycle state. Blanket-implemented for every `Clone + Send + Sync`.
pub trait StateData: Any + Send + Sync {
    /// Deep copy, used when preemption or nominated-pod filtering clones the state.
    fn clone_data(&self) -> Box<dyn StateData>;
    /// Upcast for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// Upcast for downcasting mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_data(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Error returned when reading a key that is absent or of another type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: not found")]
pub struct NotFound(pub String);

/// Per scheduling attempt key/value store plus the framework's skip sets.
#[derive(Default)]
pub struct CycleState {
    // Read for every node by every plugin: a fast hasher matters here.
    storage: FxHashMap<String, Box<dyn StateData>>,
    /// Plugins whose PreFilter returned Skip: their Filter and AddPod/RemovePod are not run.
    pub skip_filter_plugins: HashSet<String>,
    /// Plugins whose PreScore returned Skip: their Score is not run.
    pub skip_score_plugins: HashSet<String>,
    /// PreBind plugins whose PreBindPreFlight returned Skip.
    pub skip_pre_bind_plugins: HashSet<String>,
    /// Whether plugin execution metrics are recorded for this cycle (sampled).
    pub record_plugin_metrics: bool,
    /// Number of nodes in this cycle's snapshot (set by the framework at PreFilter), for Score
    /// plugins that weigh by cluster size (upstream reads it from the snapshot lister).
    pub num_all_nodes: usize,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            storage: self.storage.iter().map(|(k, v)| (k.clone(), v.as_ref().clone_data())).collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
            skip_pre_bind_plugins: self.skip_pre_bind_plugins.clone(),
            record_plugin_metrics: self.record_plugin_metrics,
            num_all_nodes: self.num_all_nodes,
        }
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState").field("keys", &self.storage.keys().collect::<Vec<_>>()).finish()
    }
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores a value under a key, replacing any previous one.
    pub fn write<T: StateData>(&mut self, key: impl Into<String>, value: T) {
        self.storage.insert(key.into(), Box::new(value));
    }

    /// Reads a value; "not found" when absent or of another type.
    pub fn read<T: 'static>(&self, key: &str) -> Result<&T, NotFound> {
        self.storage.get(key).and_then(|v| v.as_ref().as_any().downcast_ref()).ok_or_else(|| NotFound(key.to_string()))
    }

    /// Reads a value mutably.
    pub fn read_mut<T: 'static>(&mut self, key: &str) -> Result<&mut T, NotFound> {
        self.storage
            .get_mut(key)
            .and_then(|v| v.as_mut().as_any_mut().downcast_mut())
            .ok_or_else(|| NotFound(key.to_string()))
    }

    /// Removes a value.
    pub fn delete(&mut self, key: &str) {
        self.storage.remove(key);
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
        s.skip_filter_plugins.insert("P".into());
        let mut c = s.clone();
        c.read_mut::<Counter>("k").unwrap().0 = 5;
        assert_eq!(s.read::<Counter>("k").unwrap(), &Counter(1));
        assert_eq!(c.read::<Counter>("k").unwrap(), &Counter(5));
        assert!(c.skip_filter_plugins.contains("P"));
        assert_eq!(s.read::<String>("k").unwrap_err().to_string(), "\"k\": not found");
        assert!(s.read::<Counter>("missing").is_err());
    }
}
