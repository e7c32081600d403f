//! Defaulting of `KubeSchedulerConfiguration` and of the typed plugin args (upstream `defaults.go`).

use std::collections::HashSet;

use super::default_plugins::{default_plugins_with, enabled_plugin_names, merge_plugins};
use super::duration::Duration;
use super::types::*;
use super::SchedulerFeatures;

/// Default `percentageOfNodesToScore` (0 = adaptive).
pub const DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE: i32 = 0;
/// Highest score a shape point may have (`MaxCustomPriorityScore`).
pub const MAX_CUSTOM_PRIORITY_SCORE: i32 = 10;
/// Default DynamicResources filter timeout.
pub const DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// Default DynamicResources binding timeout.
pub const DYNAMIC_RESOURCES_BINDING_TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);

fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec { name: "cpu".into(), weight: 1 }, ResourceSpec { name: "memory".into(), weight: 1 }]
}

/// The fully defaulted empty configuration (what `--write-config-to` prints without `--config`).
pub fn default_config() -> KubeSchedulerConfiguration {
    default_config_with(&SchedulerFeatures::default())
}

/// [`default_config`] for the given feature gates.
pub fn default_config_with(features: &SchedulerFeatures) -> KubeSchedulerConfiguration {
    let mut cfg =
        KubeSchedulerConfiguration { api_version: API_VERSION.into(), kind: KIND.into(), ..Default::default() };
    set_defaults_with(&mut cfg, features);
    cfg
}

/// Applies every default in place, at the 1.36 feature-gate defaults.
pub fn set_defaults(cfg: &mut KubeSchedulerConfiguration) {
    set_defaults_with(cfg, &SchedulerFeatures::default());
}

/// Applies every default in place for the given feature gates.
pub fn set_defaults_with(cfg: &mut KubeSchedulerConfiguration, features: &SchedulerFeatures) {
    cfg.features = *features;
    cfg.parallelism.get_or_insert(16);
    if cfg.profiles.is_empty() {
        cfg.profiles.push(KubeSchedulerProfile::default());
    }
    // Only a lone profile gets a name; validation requires unique names otherwise.
    if cfg.profiles.len() == 1 && cfg.profiles[0].scheduler_name.is_none() {
        cfg.profiles[0].scheduler_name = Some(DEFAULT_SCHEDULER_NAME.into());
    }
    for profile in &mut cfg.profiles {
        set_profile_defaults(profile, features);
    }
    cfg.percentage_of_nodes_to_score.get_or_insert(DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE);

    let le = &mut cfg.leader_election;
    if le.resource_lock.is_empty() {
        le.resource_lock = "leases".into();
    }
    if le.resource_namespace.is_empty() {
        le.resource_namespace = "kube-system".into();
    }
    if le.resource_name.is_empty() {
        le.resource_name = "kube-scheduler".into();
    }
    if le.lease_duration == Duration::ZERO {
        le.lease_duration = Duration::from_secs(15);
    }
    if le.renew_deadline == Duration::ZERO {
        le.renew_deadline = Duration::from_secs(10);
    }
    if le.retry_period == Duration::ZERO {
        le.retry_period = Duration::from_secs(2);
    }
    le.leader_elect.get_or_insert(true);

    let cc = &mut cfg.client_connection;
    if cc.content_type.is_empty() {
        cc.content_type = "application/vnd.kubernetes.protobuf".into();
    }
    if cc.qps == 0.0 {
        cc.qps = 50.0;
    }
    if cc.burst == 0 {
        cc.burst = 100;
    }

    cfg.pod_initial_backoff_seconds.get_or_insert(1);
    cfg.pod_max_backoff_seconds.get_or_insert(10);
    let profiling = *cfg.enable_profiling.get_or_insert(true);
    if profiling {
        cfg.enable_contention_profiling.get_or_insert(true);
    }
}

/// Merges the default plugins into a profile and defaults/appends typed plugin args.
pub fn set_profile_defaults(profile: &mut KubeSchedulerProfile, features: &SchedulerFeatures) {
    profile.plugins = Some(merge_plugins(default_plugins_with(features), profile.plugins.as_ref()));

    let mut configured: HashSet<String> = HashSet::new();
    for pc in &mut profile.plugin_config {
        configured.insert(pc.name.clone());
        default_args(&mut pc.args, features);
    }
    // Every enabled plugin with an args kind gets its default args, in name order.
    let enabled = enabled_plugin_names(profile.plugins.as_ref().expect("set above"));
    for name in enabled {
        if configured.contains(&name) {
            continue;
        }
        if let Some(mut args) = empty_args_for(&name) {
            default_args(&mut args, features);
            profile.plugin_config.push(PluginConfig { name, args });
        }
    }
}

/// The empty typed args of a plugin with a registered args kind.
pub fn empty_args_for(plugin: &str) -> Option<PluginArgs> {
    Some(match plugin {
        "DefaultPreemption" => PluginArgs::DefaultPreemption(Default::default()),
        "InterPodAffinity" => PluginArgs::InterPodAffinity(Default::default()),
        "NodeAffinity" => PluginArgs::NodeAffinity(Default::default()),
        "NodeResourcesBalancedAllocation" => PluginArgs::NodeResourcesBalancedAllocation(Default::default()),
        "NodeResourcesFit" => PluginArgs::NodeResourcesFit(Default::default()),
        "PodTopologySpread" => PluginArgs::PodTopologySpread(Default::default()),
        "VolumeBinding" => PluginArgs::VolumeBinding(Default::default()),
        "DynamicResources" => PluginArgs::DynamicResources(Default::default()),
        _ => return None,
    })
}

/// Fills the defaults inside typed args; raw (out-of-tree) args are left alone.
pub fn default_args(args: &mut PluginArgs, features: &SchedulerFeatures) {
    match args {
        PluginArgs::DefaultPreemption(a) => {
            a.min_candidate_nodes_percentage.get_or_insert(10);
            a.min_candidate_nodes_absolute.get_or_insert(100);
        }
        PluginArgs::InterPodAffinity(a) => {
            a.hard_pod_affinity_weight.get_or_insert(1);
        }
        PluginArgs::VolumeBinding(a) => {
            a.bind_timeout_seconds.get_or_insert(600);
            if a.shape.as_ref().is_none_or(Vec::is_empty) && features.storage_capacity_scoring {
                a.shape = Some(vec![
                    UtilizationShapePoint { utilization: 0, score: MAX_CUSTOM_PRIORITY_SCORE },
                    UtilizationShapePoint { utilization: 100, score: 0 },
                ]);
            }
        }
        PluginArgs::NodeResourcesBalancedAllocation(a) => {
            if a.resources.is_empty() {
                a.resources = default_resources();
            }
            for r in &mut a.resources {
                if r.weight == 0 {
                    r.weight = 1;
                }
            }
        }
        PluginArgs::PodTopologySpread(a) => {
            if a.defaulting_type.is_empty() {
                a.defaulting_type = "System".into();
            }
        }
        PluginArgs::NodeResourcesFit(a) => {
            let strategy = a.scoring_strategy.get_or_insert_with(|| ScoringStrategy {
                type_: "LeastAllocated".into(),
                resources: default_resources(),
                requested_to_capacity_ratio: None,
            });
            if strategy.resources.is_empty() {
                strategy.resources = default_resources();
            }
            for r in &mut strategy.resources {
                if r.weight == 0 {
                    r.weight = 1;
                }
            }
        }
        PluginArgs::DynamicResources(a) => {
            if a.filter_timeout.is_none() && features.dra_scheduler_filter_timeout {
                a.filter_timeout = Some(DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT);
            }
            if a.binding_timeout.is_none()
                && features.dra_device_binding_conditions
                && features.dra_resource_claim_device_status
            {
                a.binding_timeout = Some(DYNAMIC_RESOURCES_BINDING_TIMEOUT_DEFAULT);
            }
        }
        PluginArgs::NodeAffinity(_) | PluginArgs::None | PluginArgs::Unknown(_) => {}
    }
}
