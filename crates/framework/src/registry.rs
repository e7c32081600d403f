//! The plugin registry: plugin name -> factory taking typed args (decoded from `pluginConfig`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::handle::Handle;
use crate::interface::Plugin;

/// Builds a plugin from its `pluginConfig` args (None when absent) and the framework handle.
pub type PluginFactory =
    Arc<dyn Fn(Option<&serde_json::Value>, &Handle) -> Result<Arc<dyn Plugin>, String> + Send + Sync>;

/// Name -> factory.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, PluginFactory>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a factory; a name already present is an error (out-of-tree plugins may not shadow
    /// in-tree ones).
    pub fn register(
        &mut self,
        name: &str,
        factory: impl Fn(Option<&serde_json::Value>, &Handle) -> Result<Arc<dyn Plugin>, String> + Send + Sync + 'static,
    ) -> Result<(), String> {
        if self.factories.contains_key(name) {
            return Err(format!("a plugin named {name} already exists"));
        }
        self.factories.insert(name.to_string(), Arc::new(factory));
        Ok(())
    }

    /// Adds every factory of `other`, failing on the first duplicate name.
    pub fn merge(&mut self, other: &Registry) -> Result<(), String> {
        for (name, f) in &other.factories {
            if self.factories.contains_key(name) {
                return Err(format!("a plugin named {name} already exists"));
            }
            self.factories.insert(name.clone(), f.clone());
        }
        Ok(())
    }

    /// The factory for a name.
    pub fn get(&self, name: &str) -> Option<&PluginFactory> {
        self.factories.get(name)
    }

    /// All registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }
}

/// Decodes typed plugin args strictly (unknown fields are errors), defaulting when absent.
pub fn decode_args<T: serde::de::DeserializeOwned + Default>(args: Option<&serde_json::Value>) -> Result<T, String> {
    match args {
        None | Some(serde_json::Value::Null) => Ok(T::default()),
        Some(v) => {
            let mut v = v.clone();
            // args embedded in a config carry apiVersion/kind; they are not fields of the type
            if let Some(o) = v.as_object_mut() {
                o.remove("apiVersion");
                o.remove("kind");
            }
            serde_json::from_value(v).map_err(|e| e.to_string())
        }
    }
}
