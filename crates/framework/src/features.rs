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
