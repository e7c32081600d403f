//! `kubescheduler.config.k8s.io/v1`: decoding (strict, YAML or JSON), defaulting (incl. the
//! default plugin set and plugin args), validation with upstream's exact messages, and the YAML
//! written by `--write-config-to`.

mod default_plugins;
mod defaults;
mod duration;
mod encode;
mod field;
mod load;
mod node;
mod types;
mod validation;
mod validation_pluginargs;

#[cfg(test)]
mod tests;

pub use default_plugins::{
    default_plugins, default_plugins_with, enabled_plugin_names, merge_plugin_set, merge_plugins,
};
pub use defaults::{
    default_args, default_config, default_config_with, empty_args_for, set_defaults, set_defaults_with,
    set_profile_defaults, DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE, DYNAMIC_RESOURCES_BINDING_TIMEOUT_DEFAULT,
    DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT, MAX_CUSTOM_PRIORITY_SCORE,
};
pub use duration::{Duration, DurationParseError};
pub use encode::{plugin_args_json, to_json, to_yaml};
pub use field::{BadValue, ErrorType, FieldError, ValidationErrors};
pub use load::{decode_config, load_config, load_config_with, ConfigError, ConfigErrorKind};
pub use types::*;
pub use validation::{is_extended_resource_name, validate, validate_with};
pub use validation_pluginargs::{
    node_selector_term_errors, validate_default_preemption_args, validate_dynamic_resources_args,
    validate_function_shape, validate_inter_pod_affinity_args, validate_node_affinity_args,
    validate_node_resources_balanced_allocation_args, validate_node_resources_fit_args,
    validate_pod_topology_spread_args, validate_volume_binding_args,
};

/// The feature gates that change configuration defaults or validation (1.36 defaults via `Default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerFeatures {
    /// DynamicResourceAllocation (GA, on): DynamicResources in the default profile.
    pub dynamic_resource_allocation: bool,
    /// NodeDeclaredFeatures (beta, on): NodeDeclaredFeatures in the default profile.
    pub node_declared_features: bool,
    /// GenericWorkload (alpha, off): the pod-group scheduling cycle and PodGroup watch.
    pub generic_workload: bool,
    /// GangScheduling (alpha, off): GangScheduling in the default profile.
    pub gang_scheduling: bool,
    /// TopologyAwareWorkloadScheduling (alpha, off): placement plugins in the default profile.
    pub topology_aware_workload_scheduling: bool,
    /// WorkloadAwarePreemption (alpha, off): pod-group preemption.
    pub workload_aware_preemption: bool,
    /// StorageCapacityScoring (alpha, off): VolumeBinding `shape` default and validation.
    pub storage_capacity_scoring: bool,
    /// DRASchedulerFilterTimeout (beta, on): DynamicResources `filterTimeout`.
    pub dra_scheduler_filter_timeout: bool,
    /// DRADeviceBindingConditions (beta, on): DynamicResources `bindingTimeout` (with the next gate).
    pub dra_device_binding_conditions: bool,
    /// DRAResourceClaimDeviceStatus (beta, on).
    pub dra_resource_claim_device_status: bool,
    /// TaintTolerationComparisonOperators (alpha, off): `Lt`/`Gt` tolerations.
    pub taint_toleration_comparison_operators: bool,
    /// MatchLabelKeysInPodTopologySpread (beta, on).
    pub match_label_keys_in_pod_topology_spread: bool,
    /// DRAAdminAccess (GA, on).
    pub dra_admin_access: bool,
    /// DRAPrioritizedList (GA, on).
    pub dra_prioritized_list: bool,
    /// DRAPartitionableDevices (beta, on).
    pub dra_partitionable_devices: bool,
    /// DRADeviceTaints (beta, on).
    pub dra_device_taints: bool,
    /// DRAConsumableCapacity (beta, on).
    pub dra_consumable_capacity: bool,
    /// OpportunisticBatching (beta, on since v1.35): pod signatures and node hints.
    pub opportunistic_batching: bool,
}

impl SchedulerFeatures {
    /// The gates plugins and the scheduling loop see.
    pub fn plugin_features(&self) -> ksched_framework::Features {
        ksched_framework::Features {
            node_declared_features: self.node_declared_features,
            generic_workload: self.generic_workload,
            gang_scheduling: self.gang_scheduling,
            topology_aware_workload_scheduling: self.topology_aware_workload_scheduling,
            workload_aware_preemption: self.workload_aware_preemption,
            taint_toleration_comparison_operators: self.taint_toleration_comparison_operators,
            match_label_keys_in_pod_topology_spread: self.match_label_keys_in_pod_topology_spread,
            dra_admin_access: self.dra_admin_access,
            dra_prioritized_list: self.dra_prioritized_list,
            dra_partitionable_devices: self.dra_partitionable_devices,
            dra_device_taints: self.dra_device_taints,
            dra_device_binding_conditions: self.dra_device_binding_conditions,
            dra_resource_claim_device_status: self.dra_resource_claim_device_status,
            dra_consumable_capacity: self.dra_consumable_capacity,
            opportunistic_batching: self.opportunistic_batching,
        }
    }
}

impl Default for SchedulerFeatures {
    fn default() -> Self {
        SchedulerFeatures {
            dynamic_resource_allocation: true,
            node_declared_features: true,
            generic_workload: false,
            gang_scheduling: false,
            topology_aware_workload_scheduling: false,
            workload_aware_preemption: false,
            storage_capacity_scoring: false,
            dra_scheduler_filter_timeout: true,
            dra_device_binding_conditions: true,
            dra_resource_claim_device_status: true,
            taint_toleration_comparison_operators: false,
            match_label_keys_in_pod_topology_spread: true,
            dra_admin_access: true,
            dra_prioritized_list: true,
            dra_partitionable_devices: true,
            dra_device_taints: true,
            dra_consumable_capacity: true,
            opportunistic_batching: true,
        }
    }
}
