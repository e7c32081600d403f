//! Tests of the config module: defaulting, merging, decoding, validation and encoding.

mod decode;
mod defaults;
mod encode;
mod merge;
mod validation;

use ksched_framework::plugin_config::{PluginRef, PluginSet};

/// A plugin set from `(name, weight)` pairs (weight 0 = unset).
pub(super) fn set(enabled: &[(&str, i32)], disabled: &[&str]) -> PluginSet {
    let r = |(n, w): &(&str, i32)| if *w == 0 { PluginRef::new(n) } else { PluginRef::weighted(n, *w) };
    PluginSet {
        enabled: enabled.iter().map(r).collect(),
        disabled: disabled.iter().map(|n| PluginRef::new(n)).collect(),
    }
}

/// Loads YAML with the standard header prepended.
pub(super) fn load(body: &str) -> super::KubeSchedulerConfiguration {
    let text = format!("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{body}");
    super::load_config(text.as_bytes(), "test.yaml").unwrap_or_else(|e| panic!("{e}"))
}
