//! The default profile expanded per extension point, as upstream v1.36 runs it (upstream `apis/config/v1/default_plugins.go`).

use std::sync::{Arc, OnceLock};

use ksched_framework::handle::{NoClient, NoopRecorder};
use ksched_framework::listers::MemoryLister;
use ksched_framework::ExtensionPoint;
use ksched_scheduler::app;
use ksched_scheduler::config;

fn default_framework(features: config::SchedulerFeatures) -> Arc<ksched_framework::Framework> {
    let cfg = config::default_config_with(&features);
    let registry = ksched_plugins::in_tree_registry();
    let profiles = app::build_profiles(
        &cfg,
        &registry,
        Arc::new(NoClient),
        &|_| Arc::new(NoopRecorder),
        Arc::new(MemoryLister::default()),
        Arc::new(OnceLock::new()),
        ksched_framework::handle::thread_spawner(),
        &[],
    )
    .unwrap();
    profiles["default-scheduler"].framework.clone()
}

#[test]
fn default_profile_expands_like_upstream() {
    let fw = default_framework(config::SchedulerFeatures::default());
    let list = |p| fw.list_plugins(p).join(", ");
    assert_eq!(list(ExtensionPoint::PreEnqueue), "SchedulingGates, DynamicResources, DefaultPreemption");
    assert_eq!(
        list(ExtensionPoint::PreFilter),
        "NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, \
         VolumeZone, PodTopologySpread, InterPodAffinity, DynamicResources, NodeDeclaredFeatures"
    );
    assert_eq!(
        list(ExtensionPoint::Filter),
        "NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, \
         VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity, \
         DynamicResources, NodeDeclaredFeatures"
    );
    assert_eq!(list(ExtensionPoint::PostFilter), "DynamicResources, DefaultPreemption");
    assert_eq!(list(ExtensionPoint::Permit), "");
}

#[test]
fn node_declared_features_gate_off_leaves_it_out() {
    let off = config::SchedulerFeatures { node_declared_features: false, ..Default::default() };
    let fw = default_framework(off);
    assert!(!fw.list_plugins(ExtensionPoint::Filter).iter().any(|p| p == "NodeDeclaredFeatures"));
}
