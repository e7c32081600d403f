//! The `plugins` section of a profile (kubescheduler.config.k8s.io/v1 types).

use serde::{Deserialize, Serialize};

/// A plugin reference with an optional score weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginRef {
    /// The plugin name.
    pub name: String,
    /// Score weight (only meaningful at score points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

impl PluginRef {
    /// A reference without weight.
    pub fn new(name: &str) -> Self {
        PluginRef { name: name.to_string(), weight: None }
    }

    /// A reference with a weight.
    pub fn weighted(name: &str, weight: i32) -> Self {
        PluginRef { name: name.to_string(), weight: Some(weight) }
    }
}

/// Enabled and disabled plugins of one extension point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    /// Enabled plugins, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enabled: Vec<PluginRef>,
    /// Disabled plugins ("*" disables all defaults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<PluginRef>,
}

impl PluginSet {
    /// True when the set disables "*".
    pub fn disables_all(&self) -> bool {
        self.disabled.iter().any(|p| p.name == "*")
    }

    /// True when `name` is disabled explicitly.
    pub fn disables(&self, name: &str) -> bool {
        self.disabled.iter().any(|p| p.name == name)
    }
}

/// Plugin sets per extension point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plugins {
    /// PreEnqueue.
    #[serde(default)]
    pub pre_enqueue: PluginSet,
    /// QueueSort.
    #[serde(default)]
    pub queue_sort: PluginSet,
    /// PreFilter.
    #[serde(default)]
    pub pre_filter: PluginSet,
    /// Filter.
    #[serde(default)]
    pub filter: PluginSet,
    /// PostFilter.
    #[serde(default)]
    pub post_filter: PluginSet,
    /// PreScore.
    #[serde(default)]
    pub pre_score: PluginSet,
    /// Score.
    #[serde(default)]
    pub score: PluginSet,
    /// Reserve.
    #[serde(default)]
    pub reserve: PluginSet,
    /// Permit.
    #[serde(default)]
    pub permit: PluginSet,
    /// PreBind.
    #[serde(default)]
    pub pre_bind: PluginSet,
    /// Bind.
    #[serde(default)]
    pub bind: PluginSet,
    /// PostBind.
    #[serde(default)]
    pub post_bind: PluginSet,
    /// MultiPoint: plugins enabled at every point they implement.
    #[serde(default)]
    pub multi_point: PluginSet,
    /// PlacementGenerate (alpha pod-group scheduling; accepted, unused).
    #[serde(default)]
    pub placement_generate: PluginSet,
    /// PlacementScore (alpha pod-group scheduling; accepted, unused).
    #[serde(default)]
    pub placement_score: PluginSet,
}
