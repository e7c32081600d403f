//! The feature gates plugins and the scheduling loop consult (upstream's `feature.Features`),
//! limited to the gates whose behaviour this build implements.

/// Feature gates visible to plugins. `Default` is the v1.36 default of every gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// NodeDeclaredFeatures (beta, on): the NodeDeclaredFeatures plugin checks node features.
    pub node_declared_features: bool,
    /// GenericWorkload (alpha, off): the PodGroup API and the pod-group scheduling cycle.
    pub generic_workload: bool,
    /// GangScheduling (alpha, off): the GangScheduling plugin (needs GenericWorkload).
    pub gang_scheduling: bool,
    /// TopologyAwareWorkloadScheduling (alpha, off): placements per topology domain.
    pub topology_aware_workload_scheduling: bool,
    /// WorkloadAwarePreemption (alpha, off): whole pod groups preempt and are preempted.
    pub workload_aware_preemption: bool,
    /// TaintTolerationComparisonOperators (alpha, off): tolerations with `Lt`/`Gt` compare
    /// integer taint values (TaintToleration, PodTopologySpread's `nodeTaintsPolicy: Honor`).
    pub taint_toleration_comparison_operators: bool,
    /// MatchLabelKeysInPodTopologySpread (beta, on): PodTopologySpread narrows a constraint's
    /// selector with the pod's values of `matchLabelKeys`.
    pub match_label_keys_in_pod_topology_spread: bool,
    /// DRAAdminAccess (GA, on): claims may ask for admin access to devices.
    pub dra_admin_access: bool,
    /// DRAPrioritizedList (GA, on): requests may list alternatives (`firstAvailable`).
    pub dra_prioritized_list: bool,
    /// DRAPartitionableDevices (beta, on): devices consume shared counters.
    pub dra_partitionable_devices: bool,
    /// DRADeviceTaints (beta, on): device taints keep claims off devices.
    pub dra_device_taints: bool,
    /// DRADeviceBindingConditions (beta, on): binding waits for device binding conditions.
    pub dra_device_binding_conditions: bool,
    /// DRAResourceClaimDeviceStatus (beta, on): claims carry per-device status.
    pub dra_resource_claim_device_status: bool,
    /// DRAConsumableCapacity (beta, on): devices shared by capacity.
    pub dra_consumable_capacity: bool,
    /// OpportunisticBatching (beta, on since v1.35): pod signatures and the node hint of
    /// consecutive identical pods (see [`crate::batch`]).
    pub opportunistic_batching: bool,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            node_declared_features: true,
            generic_workload: false,
            gang_scheduling: false,
            topology_aware_workload_scheduling: false,
            workload_aware_preemption: false,
            taint_toleration_comparison_operators: false,
            match_label_keys_in_pod_topology_spread: true,
            dra_admin_access: true,
            dra_prioritized_list: true,
            dra_partitionable_devices: true,
            dra_device_taints: true,
            dra_device_binding_conditions: true,
            dra_resource_claim_device_status: true,
            dra_consumable_capacity: true,
            opportunistic_batching: true,
        }
    }
}

impl Features {
    /// Every workload-aware gate on (the alpha path), the rest at their defaults.
    pub fn workload_aware() -> Self {
        Features {
            generic_workload: true,
            gang_scheduling: true,
            topology_aware_workload_scheduling: true,
            workload_aware_preemption: true,
            ..Features::default()
        }
    }
}
