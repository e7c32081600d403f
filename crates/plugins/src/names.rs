//! Plugin names as they appear in configuration, in one place.

/// PrioritySort
pub const PRIORITY_SORT: &str = "PrioritySort";
/// DefaultBinder
pub const DEFAULT_BINDER: &str = "DefaultBinder";
/// DefaultPreemption
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";
/// DynamicResources
pub const DYNAMIC_RESOURCES: &str = "DynamicResources";
/// ImageLocality
pub const IMAGE_LOCALITY: &str = "ImageLocality";
/// InterPodAffinity
pub const INTER_POD_AFFINITY: &str = "InterPodAffinity";
/// NodeAffinity
pub const NODE_AFFINITY: &str = "NodeAffinity";
/// NodeDeclaredFeatures
pub const NODE_DECLARED_FEATURES: &str = "NodeDeclaredFeatures";
/// NodeName
pub const NODE_NAME: &str = "NodeName";
/// NodePorts
pub const NODE_PORTS: &str = "NodePorts";
/// NodeResourcesBalancedAllocation
pub const NODE_RESOURCES_BALANCED_ALLOCATION: &str = "NodeResourcesBalancedAllocation";
/// NodeResourcesFit
pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
/// NodeUnschedulable
pub const NODE_UNSCHEDULABLE: &str = "NodeUnschedulable";
/// NodeVolumeLimits
pub const NODE_VOLUME_LIMITS: &str = "NodeVolumeLimits";
/// PodTopologySpread
pub const POD_TOPOLOGY_SPREAD: &str = "PodTopologySpread";
/// SchedulingGates
pub const SCHEDULING_GATES: &str = "SchedulingGates";
/// TaintToleration
pub const TAINT_TOLERATION: &str = "TaintToleration";
/// VolumeBinding
pub const VOLUME_BINDING: &str = "VolumeBinding";
/// VolumeRestrictions
pub const VOLUME_RESTRICTIONS: &str = "VolumeRestrictions";
/// VolumeZone
pub const VOLUME_ZONE: &str = "VolumeZone";
/// GangScheduling (alpha)
pub const GANG_SCHEDULING: &str = "GangScheduling";
/// TopologyPlacementGenerator (alpha)
pub const TOPOLOGY_PLACEMENT_GENERATOR: &str = "TopologyPlacementGenerator";
/// PodGroupPodsCount (alpha)
pub const POD_GROUP_PODS_COUNT: &str = "PodGroupPodsCount";
/// DeviceFragmentation (not upstream; opt-in: fragmentation-aware placement on shared devices)
pub const DEVICE_FRAGMENTATION: &str = "DeviceFragmentation";
