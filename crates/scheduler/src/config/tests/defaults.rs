//! Defaulting, mirroring upstream's `TestSchedulerDefaults` / `TestPluginArgsDefaults`.

use super::super::*;
use super::load;

const GOLDEN: &str = include_str!("../../../tests/data/config/defaulted-empty.yaml");

#[test]
fn defaulted_empty_config_matches_golden_yaml() {
    assert_eq!(to_yaml(&default_config()), GOLDEN);
    // The opt-in GPU-sharing policy (docs/gpu-sharing.md) stays out of the default profile,
    // and DynamicResources keeps upstream's device order.
    assert!(!GOLDEN.contains("DeviceFragmentation") && !GOLDEN.contains("deviceSelection"));
}

#[test]
fn loading_a_bare_file_equals_default_config() {
    let cfg = load("");
    assert_eq!(cfg, default_config());
    assert_eq!(to_yaml(&cfg), GOLDEN);
}

#[test]
fn defaulted_empty_config_field_by_field() {
    let cfg = default_config();
    assert_eq!(cfg.parallelism, Some(16));
    assert_eq!(cfg.percentage_of_nodes_to_score, Some(0));
    assert_eq!(cfg.pod_initial_backoff_seconds, Some(1));
    assert_eq!(cfg.pod_max_backoff_seconds, Some(10));
    assert_eq!(cfg.enable_profiling, Some(true));
    assert_eq!(cfg.enable_contention_profiling, Some(true));
    assert!(!cfg.delay_cache_until_active);
    assert_eq!(
        cfg.leader_election,
        LeaderElectionConfiguration {
            leader_elect: Some(true),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            resource_lock: "leases".into(),
            resource_name: "kube-scheduler".into(),
            resource_namespace: "kube-system".into(),
        }
    );
    assert_eq!(
        cfg.client_connection,
        ClientConnectionConfiguration {
            kubeconfig: String::new(),
            accept_content_types: String::new(),
            content_type: "application/vnd.kubernetes.protobuf".into(),
            qps: 50.0,
            burst: 100,
        }
    );
    assert!(cfg.extenders.is_empty());
    assert_eq!(cfg.profiles.len(), 1);
    let p = &cfg.profiles[0];
    assert_eq!(p.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(p.percentage_of_nodes_to_score, None);
    assert_eq!(p.plugins.as_ref(), Some(&default_plugins()));
    let names: Vec<&str> = p.plugin_config.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "DefaultPreemption",
            "DynamicResources",
            "InterPodAffinity",
            "NodeAffinity",
            "NodeResourcesBalancedAllocation",
            "NodeResourcesFit",
            "PodTopologySpread",
            "VolumeBinding"
        ]
    );
    let rs = |n: &str| ResourceSpec { name: n.into(), weight: 1 };
    let want = [
        PluginArgs::DefaultPreemption(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: Some(10),
            min_candidate_nodes_absolute: Some(100),
        }),
        PluginArgs::DynamicResources(DynamicResourcesArgs {
            filter_timeout: Some(Duration::from_secs(10)),
            binding_timeout: Some(Duration::from_secs(600)),
            device_selection: None,
        }),
        PluginArgs::InterPodAffinity(InterPodAffinityArgs {
            hard_pod_affinity_weight: Some(1),
            ignore_preferred_terms_of_existing_pods: false,
        }),
        PluginArgs::NodeAffinity(NodeAffinityArgs::default()),
        PluginArgs::NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs {
            resources: vec![rs("cpu"), rs("memory")],
        }),
        PluginArgs::NodeResourcesFit(NodeResourcesFitArgs {
            scoring_strategy: Some(ScoringStrategy {
                type_: "LeastAllocated".into(),
                resources: vec![rs("cpu"), rs("memory")],
                requested_to_capacity_ratio: None,
            }),
            ..Default::default()
        }),
        PluginArgs::PodTopologySpread(PodTopologySpreadArgs {
            default_constraints: vec![],
            defaulting_type: "System".into(),
        }),
        PluginArgs::VolumeBinding(VolumeBindingArgs { bind_timeout_seconds: Some(600), shape: None }),
    ];
    for (pc, want) in p.plugin_config.iter().zip(want) {
        assert_eq!(pc.args, want, "{}", pc.name);
    }
    assert_eq!(validate(&cfg), Ok(()));
}

#[test]
fn scheduler_name_defaulted_only_for_a_single_profile() {
    let cfg = load("profiles:\n- percentageOfNodesToScore: 20\n");
    assert_eq!(cfg.profiles[0].scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(cfg.profiles[0].percentage_of_nodes_to_score, Some(20));

    let cfg = load("profiles:\n- schedulerName: foo\n- {}\n");
    assert_eq!(cfg.profiles[0].scheduler_name.as_deref(), Some("foo"));
    assert_eq!(cfg.profiles[1].scheduler_name, None);
    // Both profiles still get plugins and args.
    assert_eq!(cfg.profiles[1].plugins.as_ref(), Some(&default_plugins()));
    assert_eq!(cfg.profiles[1].plugin_config.len(), 8);
}

#[test]
fn explicit_values_are_kept() {
    let cfg = load(
        "parallelism: 8\npercentageOfNodesToScore: 10\ndelayCacheUntilActive: true\npodInitialBackoffSeconds: 2\n\
         enableProfiling: false\nclientConnection:\n  qps: 12.5\n  burst: 7\nleaderElection:\n  leaderElect: false\n  \
         leaseDuration: 1m30s\n",
    );
    assert_eq!(cfg.parallelism, Some(8));
    assert_eq!(cfg.percentage_of_nodes_to_score, Some(10));
    assert!(cfg.delay_cache_until_active);
    assert_eq!(cfg.pod_initial_backoff_seconds, Some(2));
    assert_eq!(cfg.pod_max_backoff_seconds, Some(10));
    assert_eq!(cfg.enable_profiling, Some(false));
    // Contention profiling is only defaulted when profiling is on.
    assert_eq!(cfg.enable_contention_profiling, None);
    assert_eq!(cfg.client_connection.qps, 12.5);
    assert_eq!(cfg.client_connection.burst, 7);
    assert_eq!(cfg.leader_election.leader_elect, Some(false));
    assert_eq!(cfg.leader_election.lease_duration, Duration::from_secs(90));
    assert_eq!(cfg.leader_election.renew_deadline, Duration::from_secs(10));
}

#[test]
fn explicit_args_are_defaulted_and_others_appended_in_name_order() {
    let cfg = load(
        "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      ignorePreferredTermsOfExistingPods: true\n  \
         - name: DefaultPreemption\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1\n      kind: DefaultPreemptionArgs\n      \
         minCandidateNodesPercentage: 50\n",
    );
    let pc = &cfg.profiles[0].plugin_config;
    let names: Vec<&str> = pc.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "InterPodAffinity",
            "DefaultPreemption",
            "DynamicResources",
            "NodeAffinity",
            "NodeResourcesBalancedAllocation",
            "NodeResourcesFit",
            "PodTopologySpread",
            "VolumeBinding"
        ]
    );
    assert_eq!(
        pc[0].args,
        PluginArgs::InterPodAffinity(InterPodAffinityArgs {
            hard_pod_affinity_weight: Some(1),
            ignore_preferred_terms_of_existing_pods: true
        })
    );
    assert_eq!(
        pc[1].args,
        PluginArgs::DefaultPreemption(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: Some(50),
            min_candidate_nodes_absolute: Some(100)
        })
    );
}

#[test]
fn explicit_zero_values_survive_defaulting() {
    let cfg = load(
        "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: 0\n  \
         - name: VolumeBinding\n    args:\n      bindTimeoutSeconds: 0\n",
    );
    let pc = &cfg.profiles[0].plugin_config;
    assert_eq!(
        pc[0].args,
        PluginArgs::InterPodAffinity(InterPodAffinityArgs { hard_pod_affinity_weight: Some(0), ..Default::default() })
    );
    assert_eq!(pc[1].args, PluginArgs::VolumeBinding(VolumeBindingArgs { bind_timeout_seconds: Some(0), shape: None }));
}

#[test]
fn resource_weights_zero_become_one() {
    let cfg = load(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesBalancedAllocation\n    args:\n      resources:\n      - name: cpu\n      \
         - name: memory\n        weight: 0\n      - name: scalar3\n        weight: 2\n  - name: NodeResourcesFit\n    args:\n      \
         scoringStrategy:\n        type: MostAllocated\n        resources:\n        - name: gpu\n",
    );
    let pc = &cfg.profiles[0].plugin_config;
    let rs = |n: &str, w| ResourceSpec { name: n.into(), weight: w };
    assert_eq!(
        pc[0].args,
        PluginArgs::NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs {
            resources: vec![rs("cpu", 1), rs("memory", 1), rs("scalar3", 2)]
        })
    );
    assert_eq!(
        pc[1].args,
        PluginArgs::NodeResourcesFit(NodeResourcesFitArgs {
            scoring_strategy: Some(ScoringStrategy {
                type_: "MostAllocated".into(),
                resources: vec![rs("gpu", 1)],
                requested_to_capacity_ratio: None
            }),
            ..Default::default()
        })
    );
}

#[test]
fn empty_strategy_resources_get_cpu_and_memory() {
    let mut args = PluginArgs::NodeResourcesFit(NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy { type_: "MostAllocated".into(), ..Default::default() }),
        ..Default::default()
    });
    default_args(&mut args, &SchedulerFeatures::default());
    let PluginArgs::NodeResourcesFit(a) = args else { panic!() };
    let s = a.scoring_strategy.unwrap();
    assert_eq!(s.type_, "MostAllocated");
    assert_eq!(
        s.resources.iter().map(|r| (r.name.as_str(), r.weight)).collect::<Vec<_>>(),
        [("cpu", 1), ("memory", 1)]
    );
}

#[test]
fn gated_arg_defaults() {
    let on = SchedulerFeatures { storage_capacity_scoring: true, ..Default::default() };
    let mut vb = PluginArgs::VolumeBinding(VolumeBindingArgs::default());
    default_args(&mut vb, &on);
    assert_eq!(
        vb,
        PluginArgs::VolumeBinding(VolumeBindingArgs {
            bind_timeout_seconds: Some(600),
            shape: Some(vec![
                UtilizationShapePoint { utilization: 0, score: 10 },
                UtilizationShapePoint { utilization: 100, score: 0 }
            ]),
        })
    );
    let off = SchedulerFeatures {
        dra_scheduler_filter_timeout: false,
        dra_resource_claim_device_status: false,
        ..Default::default()
    };
    let mut dra = PluginArgs::DynamicResources(DynamicResourcesArgs::default());
    default_args(&mut dra, &off);
    assert_eq!(dra, PluginArgs::DynamicResources(DynamicResourcesArgs::default()));
}

#[test]
fn out_of_tree_args_are_kept_verbatim() {
    let cfg = load(
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: Custom\n  pluginConfig:\n  - name: OutOfTreePlugin\n    args:\n      \
         foo: bar\n      n: 1\n  - name: Other\n",
    );
    let pc = &cfg.profiles[0].plugin_config;
    assert_eq!(pc[0].args, PluginArgs::Unknown(serde_json::json!({"foo": "bar", "n": 1})));
    assert_eq!(pc[1].args, PluginArgs::None);
    // Custom has no args kind, so nothing is appended for it.
    assert!(!pc.iter().any(|c| c.name == "Custom"));
    assert_eq!(pc.len(), 10);
}

#[test]
fn features_without_dra_drop_its_args() {
    let f = SchedulerFeatures { dynamic_resource_allocation: false, ..Default::default() };
    let cfg = default_config_with(&f);
    assert!(!cfg.profiles[0].plugin_config.iter().any(|c| c.name == "DynamicResources"));
}
