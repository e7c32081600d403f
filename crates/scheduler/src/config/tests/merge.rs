//! Plugin merging, mirroring upstream's `TestMergePlugins` cases plus whole-profile cases.

use ksched_framework::plugin_config::{PluginSet, Plugins};

use super::super::{default_plugins, default_plugins_with, merge_plugin_set, merge_plugins, SchedulerFeatures};
use super::{load, set};

fn merge_filter(custom: PluginSet, defaults: PluginSet) -> PluginSet {
    let d = Plugins { filter: defaults, ..Default::default() };
    let c = Plugins { filter: custom, ..Default::default() };
    merge_plugins(d, Some(&c)).filter
}

#[test]
fn append_custom_plugin() {
    let got = merge_filter(set(&[("CustomPlugin", 0)], &[]), set(&[("DefaultPlugin1", 0), ("DefaultPlugin2", 0)], &[]));
    assert_eq!(got, set(&[("DefaultPlugin1", 0), ("DefaultPlugin2", 0), ("CustomPlugin", 0)], &[]));
}

#[test]
fn insert_after_default_plugin2() {
    let got = merge_filter(
        set(&[("CustomPlugin", 0), ("DefaultPlugin2", 0)], &["DefaultPlugin2"]),
        set(&[("DefaultPlugin1", 0), ("DefaultPlugin2", 0)], &[]),
    );
    assert_eq!(got, set(&[("DefaultPlugin1", 0), ("CustomPlugin", 0), ("DefaultPlugin2", 0)], &["DefaultPlugin2"]));
}

#[test]
fn insert_before_all_plugins() {
    let got = merge_filter(
        set(&[("CustomPlugin", 0), ("DefaultPlugin1", 0), ("DefaultPlugin2", 0)], &["*"]),
        set(&[("DefaultPlugin1", 0), ("DefaultPlugin2", 0)], &[]),
    );
    assert_eq!(got, set(&[("CustomPlugin", 0), ("DefaultPlugin1", 0), ("DefaultPlugin2", 0)], &["*"]));
}

#[test]
fn reorder_default_plugins() {
    let got = merge_filter(
        set(&[("DefaultPlugin2", 0), ("DefaultPlugin1", 0)], &["*"]),
        set(&[("DefaultPlugin1", 0), ("DefaultPlugin2", 0)], &[]),
    );
    assert_eq!(got, set(&[("DefaultPlugin2", 0), ("DefaultPlugin1", 0)], &["*"]));
}

#[test]
fn nil_custom_plugins_keep_defaults() {
    let d = Plugins { filter: set(&[("DefaultPlugin1", 0)], &[]), ..Default::default() };
    assert_eq!(merge_plugins(d.clone(), None), d);
}

#[test]
fn custom_plugin_overrides_default_in_place() {
    let got = merge_filter(
        set(&[("Plugin1", 2), ("Plugin3", 3)], &[]),
        set(&[("Plugin1", 0), ("Plugin2", 0), ("Plugin3", 0)], &[]),
    );
    assert_eq!(got, set(&[("Plugin1", 2), ("Plugin2", 0), ("Plugin3", 3)], &[]));
}

#[test]
fn override_keeps_default_order() {
    let got = merge_filter(
        set(&[("Plugin2", 2), ("Plugin1", 1)], &[]),
        set(&[("Plugin1", 0), ("Plugin2", 0), ("Plugin3", 0)], &[]),
    );
    assert_eq!(got, set(&[("Plugin1", 1), ("Plugin2", 2), ("Plugin3", 0)], &[]));
}

#[test]
fn repeated_custom_plugin_last_replaces_and_first_is_appended() {
    let got = merge_filter(
        set(&[("Plugin1", 0), ("Plugin2", 2), ("Plugin3", 0), ("Plugin2", 4)], &[]),
        set(&[("Plugin1", 0), ("Plugin2", 0), ("Plugin3", 0)], &[]),
    );
    assert_eq!(got, set(&[("Plugin1", 0), ("Plugin2", 4), ("Plugin3", 0), ("Plugin2", 2)], &[]));
}

#[test]
fn multipoint_disabled_defaults_and_custom_score_disable() {
    let d = Plugins { multi_point: set(&[("DefaultPlugin1", 0), ("DefaultPlugin2", 0)], &[]), ..Default::default() };
    let c = Plugins {
        multi_point: set(&[("CustomPlugin", 0), ("CustomPlugin2", 0)], &["DefaultPlugin2"]),
        score: set(&[], &["CustomPlugin2"]),
        ..Default::default()
    };
    let got = merge_plugins(d, Some(&c));
    assert_eq!(
        got.multi_point,
        set(&[("DefaultPlugin1", 0), ("CustomPlugin", 0), ("CustomPlugin2", 0)], &["DefaultPlugin2"])
    );
    assert_eq!(got.score, set(&[], &["CustomPlugin2"]));
}

#[test]
fn default_disabled_entries_are_kept_after_user_ones() {
    let d = set(&[("DefaultPlugin", 0)], &["DefaultPlugin2"]);
    let got = merge_plugin_set(&d, &set(&[("CustomPlugin", 0)], &["X"]));
    assert_eq!(got, set(&[("DefaultPlugin", 0), ("CustomPlugin", 0)], &["X", "DefaultPlugin2"]));
}

#[test]
fn multipoint_only_disabled_gets_merged() {
    let got = merge_plugin_set(&set(&[("DefaultPlugin", 0)], &[]), &set(&[], &["DefaultPlugin"]));
    assert_eq!(got, set(&[], &["DefaultPlugin"]));
}

fn default_multipoint_without(removed: &str) -> PluginSet {
    let mut s = default_plugins().multi_point;
    s.enabled.retain(|p| p.name != removed);
    s
}

#[test]
fn profile_disables_one_default_plugin() {
    let cfg = load("profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: ImageLocality\n");
    let plugins = cfg.profiles[0].plugins.as_ref().unwrap();
    let mut want = default_multipoint_without("ImageLocality");
    want.disabled = set(&[], &["ImageLocality"]).disabled;
    assert_eq!(plugins.multi_point, want);
}

#[test]
fn profile_disables_all_and_adds_custom() {
    let cfg = load(
        "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: PrioritySort\n      - name: DefaultBinder\n      - name: MyPlugin\n        weight: 5\n      disabled:\n      - name: '*'\n",
    );
    let plugins = cfg.profiles[0].plugins.as_ref().unwrap();
    assert_eq!(plugins.multi_point, set(&[("PrioritySort", 0), ("DefaultBinder", 0), ("MyPlugin", 5)], &["*"]));
    // No plugin with args kind is enabled any more, so no args are appended.
    assert!(cfg.profiles[0].plugin_config.is_empty());
}

#[test]
fn profile_overrides_default_weight_in_place() {
    let cfg =
        load("profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: NodeAffinity\n        weight: 7\n");
    let mp = &cfg.profiles[0].plugins.as_ref().unwrap().multi_point;
    let mut want = default_plugins().multi_point;
    let i = want.enabled.iter().position(|p| p.name == "NodeAffinity").unwrap();
    want.enabled[i].weight = Some(7);
    assert_eq!(mp, &want);
}

#[test]
fn profile_adds_custom_plugin_at_a_point() {
    let cfg = load("profiles:\n- plugins:\n    score:\n      enabled:\n      - name: MyScore\n        weight: 3\n      disabled:\n      - name: NodeResourcesFit\n");
    let p = cfg.profiles[0].plugins.as_ref().unwrap();
    assert_eq!(p.score, set(&[("MyScore", 3)], &["NodeResourcesFit"]));
    assert_eq!(p.multi_point, default_plugins().multi_point);
}

#[test]
fn default_plugins_follow_feature_gates() {
    let names = |f: &SchedulerFeatures| -> Vec<String> {
        default_plugins_with(f).multi_point.enabled.into_iter().map(|p| p.name).collect()
    };
    let base = [
        "SchedulingGates",
        "PrioritySort",
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DefaultPreemption",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "DefaultBinder",
    ];
    let off =
        SchedulerFeatures { dynamic_resource_allocation: false, node_declared_features: false, ..Default::default() };
    assert_eq!(names(&off), base);

    let mut with_dra: Vec<&str> = base.to_vec();
    with_dra.insert(14, "DynamicResources");
    with_dra.push("NodeDeclaredFeatures");
    assert_eq!(names(&SchedulerFeatures::default()), with_dra);
    let dra = default_plugins().multi_point.enabled.into_iter().find(|p| p.name == "DynamicResources").unwrap();
    assert_eq!(dra.weight, Some(2));

    let alpha =
        SchedulerFeatures { gang_scheduling: true, topology_aware_workload_scheduling: true, ..Default::default() };
    let got = default_plugins_with(&alpha).multi_point.enabled;
    let tail: Vec<(String, Option<i32>)> = got[got.len() - 3..].iter().map(|p| (p.name.clone(), p.weight)).collect();
    assert_eq!(
        tail,
        vec![
            ("GangScheduling".to_string(), None),
            ("TopologyPlacementGenerator".to_string(), None),
            ("PodGroupPodsCount".to_string(), Some(1)),
        ]
    );
}
