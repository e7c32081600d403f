//! The in-tree plugins, one module per plugin (upstream's `framework/plugins/<name>`), and
//! [`in_tree_registry`], which maps every name in [`names`] to its factory.
#![deny(missing_docs)]

pub mod helper;
pub mod names;

// Filters and simple scorers.
pub mod defaultbinder;
pub mod nodeaffinity;
pub mod nodedeclaredfeatures;
pub mod nodename;
pub mod nodeports;
pub mod nodeunschedulable;
pub mod prioritysort;
pub mod schedulinggates;
pub mod tainttoleration;

// Resource plugins.
pub mod imagelocality;
pub mod noderesources;

// Pod affinity.
pub mod interpodaffinity;

// Spreading.
pub mod podtopologyspread;

// Volumes.
pub mod nodevolumelimits;
pub mod volumebinding;
pub mod volumerestrictions;
pub mod volumezone;

// Preemption and dynamic resources.
pub mod defaultpreemption;
pub mod dynamicresources;

// Placement policies that are not upstream's (opt-in).
pub mod devicefragmentation;

// Workload-aware scheduling (alpha): pod groups.
pub mod gangscheduling;
pub mod podgrouppodscount;
pub mod topologyaware;

use ksched_framework::Registry;

/// The registry of every in-tree plugin.
pub fn in_tree_registry() -> Registry {
    let mut r = Registry::new();
    register_basic(&mut r);
    register_resources(&mut r);
    register_affinity(&mut r);
    register_spread(&mut r);
    register_volumes(&mut r);
    register_preemption(&mut r);
    register_node_features(&mut r);
    register_workload(&mut r);
    register_policies(&mut r);
    r
}

/// Registers the opt-in placement policies (not in any default profile): DeviceFragmentation.
fn register_policies(r: &mut Registry) {
    r.register(names::DEVICE_FRAGMENTATION, devicefragmentation::new).expect("in-tree plugin names are unique");
}

/// Registers GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount.
fn register_workload(r: &mut Registry) {
    const DUPLICATE: &str = "in-tree plugin names are unique";
    r.register(names::GANG_SCHEDULING, gangscheduling::new).expect(DUPLICATE);
    r.register(names::TOPOLOGY_PLACEMENT_GENERATOR, topologyaware::new).expect(DUPLICATE);
    r.register(names::POD_GROUP_PODS_COUNT, podgrouppodscount::new).expect(DUPLICATE);
}

/// Registers NodeDeclaredFeatures.
fn register_node_features(r: &mut Registry) {
    r.register(names::NODE_DECLARED_FEATURES, nodedeclaredfeatures::new).expect("in-tree plugin names are unique");
}

/// Registers PrioritySort, SchedulingGates, NodeUnschedulable, NodeName, NodePorts,
/// NodeAffinity, TaintToleration and DefaultBinder.
fn register_basic(r: &mut Registry) {
    const DUPLICATE: &str = "in-tree plugin names are unique";
    r.register(names::PRIORITY_SORT, prioritysort::new).expect(DUPLICATE);
    r.register(names::SCHEDULING_GATES, schedulinggates::new).expect(DUPLICATE);
    r.register(names::NODE_UNSCHEDULABLE, nodeunschedulable::new).expect(DUPLICATE);
    r.register(names::NODE_NAME, nodename::new).expect(DUPLICATE);
    r.register(names::NODE_PORTS, nodeports::new).expect(DUPLICATE);
    r.register(names::NODE_AFFINITY, nodeaffinity::new).expect(DUPLICATE);
    r.register(names::TAINT_TOLERATION, tainttoleration::new).expect(DUPLICATE);
    r.register(names::DEFAULT_BINDER, defaultbinder::new).expect(DUPLICATE);
}

/// Registers NodeResourcesFit, NodeResourcesBalancedAllocation and ImageLocality.
fn register_resources(r: &mut Registry) {
    const DUPLICATE: &str = "in-tree plugin names are unique";
    r.register(names::NODE_RESOURCES_FIT, noderesources::fit::new).expect(DUPLICATE);
    r.register(names::NODE_RESOURCES_BALANCED_ALLOCATION, noderesources::balanced_allocation::new).expect(DUPLICATE);
    r.register(names::IMAGE_LOCALITY, imagelocality::new).expect(DUPLICATE);
}

/// Registers InterPodAffinity.
fn register_affinity(r: &mut Registry) {
    r.register(names::INTER_POD_AFFINITY, interpodaffinity::new).expect("in-tree plugin names are unique");
}

/// Registers PodTopologySpread.
fn register_spread(r: &mut Registry) {
    r.register(names::POD_TOPOLOGY_SPREAD, podtopologyspread::new).expect("in-tree plugin names are unique");
}

/// Registers DefaultPreemption and DynamicResources.
fn register_preemption(r: &mut Registry) {
    const DUPLICATE: &str = "in-tree plugin names are unique";
    r.register(names::DEFAULT_PREEMPTION, defaultpreemption::new).expect(DUPLICATE);
    r.register(names::DYNAMIC_RESOURCES, dynamicresources::new).expect(DUPLICATE);
}

/// Registers VolumeRestrictions, VolumeZone, NodeVolumeLimits and VolumeBinding.
fn register_volumes(r: &mut Registry) {
    const DUPLICATE: &str = "in-tree plugin names are unique";
    r.register(names::VOLUME_RESTRICTIONS, volumerestrictions::new).expect(DUPLICATE);
    r.register(names::VOLUME_ZONE, volumezone::new).expect(DUPLICATE);
    r.register(names::NODE_VOLUME_LIMITS, nodevolumelimits::new).expect(DUPLICATE);
    r.register(names::VOLUME_BINDING, volumebinding::new).expect(DUPLICATE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_has_the_basic_plugins() {
        let mut r = Registry::new();
        register_basic(&mut r);
        let want = [
            names::DEFAULT_BINDER,
            names::NODE_AFFINITY,
            names::NODE_NAME,
            names::NODE_PORTS,
            names::NODE_UNSCHEDULABLE,
            names::PRIORITY_SORT,
            names::SCHEDULING_GATES,
            names::TAINT_TOLERATION,
        ];
        assert_eq!(r.names().collect::<Vec<_>>(), want);
        let handle = ksched_framework::Handle::for_tests();
        for name in want {
            let plugin = (r.get(name).unwrap())(None, &handle).unwrap();
            assert_eq!(plugin.name(), name);
        }
        assert!(in_tree_registry().names().any(|n| n == names::NODE_AFFINITY));
    }
}
