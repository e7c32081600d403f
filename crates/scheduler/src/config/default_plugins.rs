//! The default plugin set and merging of a profile's plugins into it (upstream `mergePlugins`).

use std::collections::{HashMap, HashSet};

use ksched_framework::plugin_config::{PluginRef, PluginSet, Plugins};
use ksched_plugins::names;

use super::SchedulerFeatures;

/// The default plugins at the 1.36 feature-gate defaults (all in MultiPoint).
pub fn default_plugins() -> Plugins {
    default_plugins_with(&SchedulerFeatures::default())
}

/// The default plugins for the given feature gates.
pub fn default_plugins_with(features: &SchedulerFeatures) -> Plugins {
    let mut enabled = vec![
        PluginRef::new(names::SCHEDULING_GATES),
        PluginRef::new(names::PRIORITY_SORT),
        PluginRef::new(names::NODE_UNSCHEDULABLE),
        PluginRef::new(names::NODE_NAME),
        PluginRef::weighted(names::TAINT_TOLERATION, 3),
        PluginRef::weighted(names::NODE_AFFINITY, 2),
        PluginRef::new(names::NODE_PORTS),
        PluginRef::weighted(names::NODE_RESOURCES_FIT, 1),
        PluginRef::new(names::VOLUME_RESTRICTIONS),
        PluginRef::new(names::NODE_VOLUME_LIMITS),
        PluginRef::new(names::VOLUME_BINDING),
        PluginRef::new(names::VOLUME_ZONE),
        PluginRef::weighted(names::POD_TOPOLOGY_SPREAD, 2),
        PluginRef::weighted(names::INTER_POD_AFFINITY, 2),
        PluginRef::new(names::DEFAULT_PREEMPTION),
        PluginRef::weighted(names::NODE_RESOURCES_BALANCED_ALLOCATION, 1),
        PluginRef::weighted(names::IMAGE_LOCALITY, 1),
        PluginRef::new(names::DEFAULT_BINDER),
    ];
    // Same order of application as upstream: NodeDeclaredFeatures is appended before DRA is inserted.
    if features.node_declared_features {
        enabled.push(PluginRef::new(names::NODE_DECLARED_FEATURES));
    }
    if features.dynamic_resource_allocation {
        // Before DefaultPreemption so that PostFilter frees idle claims before evicting pods.
        if let Some(i) = enabled.iter().position(|p| p.name == names::DEFAULT_PREEMPTION) {
            enabled.insert(i, PluginRef::weighted(names::DYNAMIC_RESOURCES, 2));
        }
    }
    if features.gang_scheduling {
        enabled.push(PluginRef::new(names::GANG_SCHEDULING));
    }
    if features.topology_aware_workload_scheduling {
        enabled.push(PluginRef::new(names::TOPOLOGY_PLACEMENT_GENERATOR));
        enabled.push(PluginRef::weighted(names::POD_GROUP_PODS_COUNT, 1));
    }
    Plugins { multi_point: PluginSet { enabled, disabled: vec![] }, ..Plugins::default() }
}

/// Merges a profile's plugins into the defaults, extension point by extension point.
pub fn merge_plugins(defaults: Plugins, custom: Option<&Plugins>) -> Plugins {
    let Some(custom) = custom else { return defaults };
    Plugins {
        pre_enqueue: merge_plugin_set(&defaults.pre_enqueue, &custom.pre_enqueue),
        queue_sort: merge_plugin_set(&defaults.queue_sort, &custom.queue_sort),
        pre_filter: merge_plugin_set(&defaults.pre_filter, &custom.pre_filter),
        filter: merge_plugin_set(&defaults.filter, &custom.filter),
        post_filter: merge_plugin_set(&defaults.post_filter, &custom.post_filter),
        pre_score: merge_plugin_set(&defaults.pre_score, &custom.pre_score),
        score: merge_plugin_set(&defaults.score, &custom.score),
        reserve: merge_plugin_set(&defaults.reserve, &custom.reserve),
        permit: merge_plugin_set(&defaults.permit, &custom.permit),
        pre_bind: merge_plugin_set(&defaults.pre_bind, &custom.pre_bind),
        bind: merge_plugin_set(&defaults.bind, &custom.bind),
        post_bind: merge_plugin_set(&defaults.post_bind, &custom.post_bind),
        multi_point: merge_plugin_set(&defaults.multi_point, &custom.multi_point),
        placement_generate: merge_plugin_set(&defaults.placement_generate, &custom.placement_generate),
        placement_score: merge_plugin_set(&defaults.placement_score, &custom.placement_score),
    }
}

/// Merges one extension point: defaults keep their order (replaced in place when the user
/// re-enables them, e.g. to change the weight) unless disabled; the user's other plugins follow.
pub fn merge_plugin_set(defaults: &PluginSet, custom: &PluginSet) -> PluginSet {
    // The disabled list is kept (user's first, then the defaults') so that MultiPoint expansion
    // knows not to re-insert those plugins at this point; weights are dropped as upstream does.
    let disabled: Vec<PluginRef> =
        custom.disabled.iter().chain(&defaults.disabled).map(|p| PluginRef::new(&p.name)).collect();
    let disabled_names: HashSet<&str> = disabled.iter().map(|p| p.name.as_str()).collect();

    // With duplicate user entries the last one is the replacement; the others are appended
    // and rejected later when the framework is built.
    let custom_index: HashMap<&str, usize> =
        custom.enabled.iter().enumerate().map(|(i, p)| (p.name.as_str(), i)).collect();
    let mut replaced: HashSet<usize> = HashSet::new();
    let mut enabled = Vec::new();
    if !disabled_names.contains("*") {
        for default in &defaults.enabled {
            if disabled_names.contains(default.name.as_str()) {
                continue;
            }
            match custom_index.get(default.name.as_str()) {
                Some(&i) => {
                    tracing::info!(plugin = %default.name, "Default plugin is explicitly re-configured; overriding");
                    replaced.insert(i);
                    enabled.push(custom.enabled[i].clone());
                }
                None => enabled.push(default.clone()),
            }
        }
    }
    enabled.extend(custom.enabled.iter().enumerate().filter(|(i, _)| !replaced.contains(i)).map(|(_, p)| p.clone()));
    PluginSet { enabled, disabled }
}

/// Every plugin enabled at any extension point (incl. MultiPoint), sorted and deduplicated.
pub fn enabled_plugin_names(plugins: &Plugins) -> Vec<String> {
    let sets = [
        &plugins.multi_point,
        &plugins.pre_filter,
        &plugins.filter,
        &plugins.post_filter,
        &plugins.reserve,
        &plugins.pre_score,
        &plugins.score,
        &plugins.pre_bind,
        &plugins.bind,
        &plugins.post_bind,
        &plugins.permit,
        &plugins.pre_enqueue,
        &plugins.queue_sort,
        &plugins.placement_generate,
        &plugins.placement_score,
    ];
    let mut names: Vec<String> = sets.iter().flat_map(|s| s.enabled.iter().map(|p| p.name.clone())).collect();
    names.sort();
    names.dedup();
    names
}
