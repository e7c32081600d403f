//! Validation: every rule with its exact upstream text.

use serde_json::json;

use super::super::*;
use super::set;

const NAME_ERR: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with \
                        an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation \
                        is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn messages(cfg: &KubeSchedulerConfiguration) -> Vec<String> {
    messages_with(cfg, &SchedulerFeatures::default())
}

fn messages_with(cfg: &KubeSchedulerConfiguration, f: &SchedulerFeatures) -> Vec<String> {
    match validate_with(cfg, f) {
        Ok(()) => vec![],
        Err(e) => e.errors().iter().map(ToString::to_string).collect(),
    }
}

fn with_args(args: PluginArgs, name: &str) -> KubeSchedulerConfiguration {
    let mut cfg = default_config();
    let pc = &mut cfg.profiles[0].plugin_config;
    match pc.iter_mut().find(|c| c.name == name) {
        Some(c) => c.args = args,
        None => pc.push(PluginConfig { name: name.into(), args }),
    }
    cfg
}

fn args_errors(name: &str, args: PluginArgs) -> Vec<String> {
    messages(&with_args(args, name))
}

fn index_of(name: &str) -> usize {
    default_config().profiles[0].plugin_config.iter().position(|c| c.name == name).unwrap()
}

#[test]
fn default_config_is_valid() {
    assert_eq!(validate(&default_config()), Ok(()));
}

#[test]
fn parallelism_and_burst() {
    let mut cfg = default_config();
    cfg.parallelism = Some(0);
    cfg.client_connection.burst = -1;
    assert_eq!(
        messages(&cfg),
        [
            "clientConnection.burst: Invalid value: -1: must be non-negative",
            "parallelism: Invalid value: 0: should be an integer value greater than zero",
        ]
    );
    // Unset reads as zero, like upstream's internal type.
    cfg.parallelism = None;
    cfg.client_connection.burst = 0;
    assert_eq!(messages(&cfg), ["parallelism: Invalid value: 0: should be an integer value greater than zero"]);
}

#[test]
fn leader_election_rules() {
    let mut cfg = default_config();
    let le = &mut cfg.leader_election;
    le.lease_duration = Duration::ZERO;
    le.renew_deadline = Duration::from_secs(-1);
    le.retry_period = Duration::ZERO;
    le.resource_lock = String::new();
    le.resource_name = String::new();
    le.resource_namespace = String::new();
    assert_eq!(
        messages(&cfg),
        [
            r#"leaderElection.leaseDuration: Invalid value: "0s": must be greater than zero"#,
            r#"leaderElection.renewDeadline: Invalid value: "-1s": must be greater than zero"#,
            r#"leaderElection.retryPeriod: Invalid value: "0s": must be greater than zero"#,
            "leaderElection.resourceLock: Required value",
            "leaderElection.resourceNamespace: Required value",
            "leaderElection.resourceName: Required value",
            r#"leaderElection.resourceLock: Invalid value: "": resourceLock value must be "leases""#,
        ]
    );
    let mut cfg = default_config();
    cfg.leader_election.resource_lock = "endpoints".into();
    cfg.leader_election.renew_deadline = Duration::from_secs(15);
    assert_eq!(
        messages(&cfg),
        [
            r#"leaderElection.leaseDuration: Invalid value: "15s": must be greater than `RenewDeadline`"#,
            r#"leaderElection.resourceLock: Invalid value: "endpoints": resourceLock value must be "leases""#,
        ]
    );
    // Nothing is checked when leader election is off.
    cfg.leader_election.leader_elect = Some(false);
    assert_eq!(messages(&cfg), Vec::<String>::new());
}

#[test]
fn profiles_required_named_unique_and_percentages() {
    let mut cfg = default_config();
    cfg.profiles.clear();
    assert_eq!(messages(&cfg), ["profiles: Required value"]);

    let mut cfg = default_config();
    let mut second = cfg.profiles[0].clone();
    second.scheduler_name = None;
    second.percentage_of_nodes_to_score = Some(101);
    let mut third = cfg.profiles[0].clone();
    third.percentage_of_nodes_to_score = Some(-1);
    cfg.profiles.push(second);
    cfg.profiles.push(third);
    cfg.percentage_of_nodes_to_score = Some(110);
    assert_eq!(
        messages(&cfg),
        [
            "profiles[1].schedulerName: Required value",
            "profiles[1].percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]",
            "profiles[2].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
            // upstream passes a field path as the value; it JSON-encodes as {}
            "profiles[2].schedulerName: Duplicate value: {}",
            "percentageOfNodesToScore: Invalid value: 110: not in valid range [0-100]",
        ]
    );
}

#[test]
fn backoff_rules() {
    let mut cfg = default_config();
    cfg.pod_initial_backoff_seconds = Some(0);
    assert_eq!(messages(&cfg), ["podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"]);
    cfg.pod_initial_backoff_seconds = Some(5);
    cfg.pod_max_backoff_seconds = Some(1);
    assert_eq!(
        messages(&cfg),
        ["podMaxBackoffSeconds: Invalid value: 1: must be greater than or equal to PodInitialBackoffSeconds"]
    );
}

#[test]
fn queue_sort_must_be_common_and_single() {
    let mut cfg = default_config();
    let mut other = cfg.profiles[0].clone();
    other.scheduler_name = Some("other".into());
    other.plugins.as_mut().unwrap().queue_sort = set(&[("CustomSort", 0)], &["*"]);
    cfg.profiles.push(other);
    assert_eq!(
        messages(&cfg),
        [
            r#"profiles[1].plugins.queueSort: Invalid value: {"Enabled":[{"Name":"CustomSort","Weight":0}],"Disabled":[{"Name":"*","Weight":0}]}: must be the same for all profiles"#
        ]
    );

    let mut cfg = default_config();
    cfg.profiles[0].plugins.as_mut().unwrap().queue_sort = set(&[("A", 0), ("B", 0)], &[]);
    assert_eq!(
        messages(&cfg),
        ["profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled"]
    );
}

#[test]
fn queue_sort_args_must_be_common() {
    let mut cfg = default_config();
    cfg.profiles[0].plugins.as_mut().unwrap().queue_sort = set(&[("CustomSort", 0)], &[]);
    cfg.profiles[0]
        .plugin_config
        .push(PluginConfig { name: "CustomSort".into(), args: PluginArgs::Unknown(json!({"a": 1})) });
    let mut other = cfg.profiles[0].clone();
    other.scheduler_name = Some("other".into());
    other.plugin_config.last_mut().unwrap().args = PluginArgs::Unknown(json!({"a": 2}));
    cfg.profiles.push(other);
    assert_eq!(
        messages(&cfg),
        [r#"profiles[1].pluginConfig.args: Invalid value: {"a":2}: queueSort must be the same for all profiles"#]
    );
}

#[test]
fn removed_plugins_rejected() {
    let mut cfg = default_config();
    let plugins = cfg.profiles[0].plugins.as_mut().unwrap();
    plugins.score = set(&[("NodeResourcesFit", 1), ("AzureDiskLimits", 0)], &[]);
    plugins.filter = set(&[("GCEPDLimits", 0)], &[]);
    // Upstream does not look at multiPoint here.
    plugins.multi_point.enabled.push(ksched_framework::plugin_config::PluginRef::new("EBSLimits"));
    cfg.profiles[0].plugin_config.push(PluginConfig { name: "CinderLimits".into(), args: PluginArgs::None });
    let detail = r#"was invalid in version "kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")"#;
    assert_eq!(
        messages(&cfg),
        [
            format!(r#"profiles[0].plugins.filter.enabled[0]: Invalid value: "GCEPDLimits": {detail}"#),
            format!(r#"profiles[0].plugins.score.enabled[1]: Invalid value: "AzureDiskLimits": {detail}"#),
            format!(r#"profiles[0].pluginConfig[8]: Invalid value: "CinderLimits": {detail}"#),
        ]
    );
}

#[test]
fn duplicate_plugin_config_and_type_mismatch() {
    let mut cfg = default_config();
    let pc = &mut cfg.profiles[0].plugin_config;
    pc.push(pc[0].clone());
    pc[1].args = PluginArgs::Unknown(json!({"x": 1}));
    // Upstream keys NodeResourcesFit's validator as "NodeResourcesFitArgs" by mistake.
    pc.push(PluginConfig { name: "NodeResourcesFitArgs".into(), args: PluginArgs::None });
    assert_eq!(
        messages(&cfg),
        [
            r#"profiles[0].pluginConfig[1].args: Invalid value: {"x":1}: has to match plugin args"#,
            r#"profiles[0].pluginConfig[8]: Duplicate value: "DefaultPreemption""#,
            "profiles[0].pluginConfig[9].args: Invalid value: null: has to match plugin args",
        ]
    );
}

#[test]
fn node_resources_fit_args_are_not_validated_at_config_time() {
    let bad = PluginArgs::NodeResourcesFit(NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy { type_: "Bogus".into(), ..Default::default() }),
        ..Default::default()
    });
    assert_eq!(args_errors("NodeResourcesFit", bad), Vec::<String>::new());
}

#[test]
fn extender_rules() {
    let mut cfg = default_config();
    let ext = |prio: &str, w: i64, bind: &str, res: &[&str]| Extender {
        url_prefix: "http://e".into(),
        prioritize_verb: prio.into(),
        weight: w,
        bind_verb: bind.into(),
        managed_resources: res
            .iter()
            .map(|n| ExtenderManagedResource { name: (*n).into(), ignored_by_scheduler: false })
            .collect(),
        ..Default::default()
    };
    cfg.extenders = vec![
        ext("prioritize", 0, "bind", &["example.com/foo", "kubernetes.io/foo", "foo bar"]),
        ext("", 0, "bind", &["example.com/foo"]),
    ];
    assert_eq!(
        messages(&cfg),
        [
            "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it".to_string(),
            r#"extenders[0].managedResources[1].name: Invalid value: "kubernetes.io/foo": is an invalid extended resource name"#
                .to_string(),
            format!(r#"extenders[0].managedResources[2].name: Invalid value: "foo bar": {NAME_ERR}"#),
            r#"extenders[1].managedResources[0].name: Invalid value: "example.com/foo": duplicate extender managed resource name"#
                .to_string(),
            r#"extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind"#
                .to_string(),
        ]
    );
}

#[test]
fn default_preemption_args() {
    let p = index_of("DefaultPreemption");
    let a = |pct, abs| {
        PluginArgs::DefaultPreemption(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: Some(pct),
            min_candidate_nodes_absolute: Some(abs),
        })
    };
    let base = format!("profiles[0].pluginConfig[{p}].args");
    assert_eq!(
        args_errors("DefaultPreemption", a(101, -1)),
        [
            format!("{base}.minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"),
            format!("{base}.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
        ]
    );
    assert_eq!(
        args_errors("DefaultPreemption", a(0, 0)),
        [
            format!("{base}.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
            format!("{base}.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"),
        ]
    );
}

#[test]
fn inter_pod_affinity_args() {
    let p = index_of("InterPodAffinity");
    let a = PluginArgs::InterPodAffinity(InterPodAffinityArgs {
        hard_pod_affinity_weight: Some(101),
        ..Default::default()
    });
    assert_eq!(
        args_errors("InterPodAffinity", a),
        [format!(
            "profiles[0].pluginConfig[{p}].args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"
        )]
    );
}

fn constraint(skew: i32, key: &str, when: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        ..Default::default()
    }
}

#[test]
fn pod_topology_spread_args() {
    let p = index_of("PodTopologySpread");
    let base = format!("profiles[0].pluginConfig[{p}].args");
    let a = |t: &str, c: Vec<TopologySpreadConstraint>| {
        PluginArgs::PodTopologySpread(PodTopologySpreadArgs { defaulting_type: t.into(), default_constraints: c })
    };
    assert_eq!(
        args_errors("PodTopologySpread", a("Foo", vec![])),
        [format!(r#"{base}.defaultingType: Unsupported value: "Foo": supported values: "System", "List""#)]
    );
    assert_eq!(
        args_errors("PodTopologySpread", a("System", vec![constraint(1, "zone", "DoNotSchedule")])),
        [format!(r#"{base}.defaultingType: Invalid value: "System": when .defaultConstraints are not empty"#)]
    );
    let mut with_selector = constraint(1, "b", "DoNotSchedule");
    with_selector.label_selector = Some(LabelSelector::default());
    let list = vec![
        constraint(0, "", ""),
        constraint(1, "a b", "Foo"),
        with_selector,
        constraint(2, "zone", "ScheduleAnyway"),
        constraint(3, "zone", "ScheduleAnyway"),
    ];
    let c = format!("{base}.defaultConstraints");
    assert_eq!(
        args_errors("PodTopologySpread", a("List", list)),
        [
            format!("{c}[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
            format!("{c}[0].topologyKey: Required value: can not be empty"),
            format!("{c}[0].whenUnsatisfiable: Required value: can not be empty"),
            format!(r#"{c}[1].topologyKey: Invalid value: "a b": {NAME_ERR}"#),
            format!(
                r#"{c}[1].whenUnsatisfiable: Unsupported value: "Foo": supported values: "DoNotSchedule", "ScheduleAnyway""#
            ),
            format!(
                "{c}[2].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"
            ),
            format!(r#"{c}[4]: Duplicate value: "{{zone, ScheduleAnyway}}""#),
        ]
    );
}

#[test]
fn balanced_allocation_args() {
    let p = index_of("NodeResourcesBalancedAllocation");
    let rs = |n: &str, w| ResourceSpec { name: n.into(), weight: w };
    let a = PluginArgs::NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs {
        resources: vec![rs("cpu", 2), rs("cpu", 1)],
    });
    let base = format!("profiles[0].pluginConfig[{p}].args.resources");
    assert_eq!(
        args_errors("NodeResourcesBalancedAllocation", a),
        [
            format!("{base}[0].weight: Invalid value: 2: must be 1"),
            format!(r#"{base}[1].name: Duplicate value: "cpu""#)
        ]
    );
}

#[test]
fn volume_binding_args() {
    let p = index_of("VolumeBinding");
    let base = format!("profiles[0].pluginConfig[{p}].args");
    let pt = |u, s| UtilizationShapePoint { utilization: u, score: s };
    let a = |t, shape| PluginArgs::VolumeBinding(VolumeBindingArgs { bind_timeout_seconds: Some(t), shape });
    assert_eq!(
        args_errors("VolumeBinding", a(-1, Some(vec![pt(0, 10)]))),
        [
            format!("{base}.bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, should not be a negative value"),
            format!(r#"{base}.shape: Invalid value: [{{"Utilization":0,"Score":10}}]: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"#),
        ]
    );
    let on = SchedulerFeatures { storage_capacity_scoring: true, ..Default::default() };
    assert_eq!(
        messages_with(&with_args(a(600, None), "VolumeBinding"), &on),
        [format!("{base}.shape: Required value: at least one point must be specified")]
    );
    assert_eq!(
        messages_with(&with_args(a(600, Some(vec![pt(50, 1), pt(10, 11), pt(101, -1)])), "VolumeBinding"), &on),
        [
            format!("{base}.shape[1].utilization: Invalid value: 10: values must be sorted in increasing order"),
            format!("{base}.shape[1].score: Invalid value: 11: not in valid range [0, 10]"),
            format!("{base}.shape[2].utilization: Invalid value: 101: not in valid range [0, 100]"),
            format!("{base}.shape[2].score: Invalid value: -1: not in valid range [0, 10]"),
        ]
    );
}

#[test]
fn dynamic_resources_args() {
    let p = index_of("DynamicResources");
    let base = format!("profiles[0].pluginConfig[{p}].args");
    let a = PluginArgs::DynamicResources(DynamicResourcesArgs {
        filter_timeout: Some(Duration::from_secs(-1)),
        binding_timeout: Some(Duration::from_millis(500)),
        device_selection: None,
    });
    assert_eq!(
        args_errors("DynamicResources", a.clone()),
        [
            format!(r#"{base}.filterTimeout: Invalid value: "-1s": must be zero or positive"#),
            format!(r#"{base}.bindingTimeout: Invalid value: "500ms": must be at least 1 second"#),
        ]
    );
    let off = SchedulerFeatures {
        dra_scheduler_filter_timeout: false,
        dra_device_binding_conditions: false,
        ..Default::default()
    };
    assert_eq!(
        messages_with(&with_args(a, "DynamicResources"), &off),
        [
            format!("{base}.filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate is disabled"),
            format!("{base}.bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"),
        ]
    );
    // The opt-in device selection takes its two names only.
    let sel = |s: &str| {
        PluginArgs::DynamicResources(DynamicResourcesArgs { device_selection: Some(s.into()), ..Default::default() })
    };
    assert!(args_errors("DynamicResources", sel("BestFit")).is_empty());
    assert_eq!(
        args_errors("DynamicResources", sel("Tightest")),
        [format!(r#"{base}.deviceSelection: Unsupported value: "Tightest": supported values: "FirstFit", "BestFit""#)]
    );
}

#[test]
fn node_affinity_args() {
    let p = index_of("NodeAffinity");
    let base = format!("profiles[0].pluginConfig[{p}].args.addedAffinity");
    let req = |key: &str, op: &str, values: &[&str]| NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    };
    let affinity = NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![
                NodeSelectorTerm::default(),
                NodeSelectorTerm {
                    match_expressions: vec![
                        req("foo", "Foo", &[]),
                        req("-a", "In", &[]),
                        req("n", "Gt", &["x", "2"]),
                        req("foo", "Exists", &["a b"]),
                    ],
                    match_fields: vec![req("metadata.name", "In", &["a", "b"]), req("metadata.name", "Exists", &[])],
                },
            ],
        }),
        preferred_during_scheduling_ignored_during_execution: vec![
            PreferredSchedulingTerm {
                weight: 0,
                preference: NodeSelectorTerm { match_expressions: vec![req("k", "Bad", &[])], ..Default::default() },
            },
            PreferredSchedulingTerm {
                weight: 1,
                preference: NodeSelectorTerm { match_expressions: vec![req("k", "Bad", &[])], ..Default::default() },
            },
        ],
    };
    let got =
        args_errors("NodeAffinity", PluginArgs::NodeAffinity(NodeAffinityArgs { added_affinity: Some(affinity) }));
    let t = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]");
    let ops = r#"supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt""#;
    let value_err = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
                     start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for \
                     validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    assert_eq!(
        got,
        [
            format!(r#"{t}.matchExpressions[0].operator: Unsupported value: "Foo": {ops}"#),
            format!(r#"{t}.matchExpressions[1].key: Invalid value: "-a": {NAME_ERR}"#),
            format!("{t}.matchExpressions[1].values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"),
            format!(r#"{t}.matchExpressions[2].values: Invalid value: ["x","2"]: for 'Gt', 'Lt' operators, exactly one value is required"#),
            format!(r#"{t}.matchExpressions[2].values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer"#),
            format!(r#"{t}.matchExpressions[3].values: Invalid value: ["a b"]: values set must be empty for exists and does not exist"#),
            format!(r#"{t}.matchExpressions[3].values[0][foo]: Invalid value: "a b": {value_err}"#),
            format!(r#"{t}.matchFields[0].values: Invalid value: ["a","b"]: must have one element"#),
            format!(r#"{t}.matchFields[1].operator: Unsupported value: "Exists": supported values: "In", "NotIn""#),
            format!(r#"{base}.preferredDuringSchedulingIgnoredDuringExecution[1].matchExpressions[0].operator: Unsupported value: "Bad": {ops}"#),
        ]
    );
}

#[test]
fn node_resources_fit_args_validator() {
    let rs = |n: &str, w| ResourceSpec { name: n.into(), weight: w };
    let args = NodeResourcesFitArgs {
        ignored_resources: vec!["a b".into()],
        ignored_resource_groups: vec!["example.com/x".into()],
        scoring_strategy: Some(ScoringStrategy {
            type_: "RequestedToCapacityRatio".into(),
            resources: vec![rs("cpu", 0), rs("memory", 101)],
            requested_to_capacity_ratio: None,
        }),
    };
    assert_eq!(
        validate_node_resources_fit_args("args", &args).iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            format!(r#"args.ignoredResources[0]: Invalid value: "a b": {NAME_ERR}"#),
            r#"args.ignoredResourceGroups[0]: Invalid value: "example.com/x": resource group name can't contain '/'"#.to_string(),
            "args.scoringStrategy.resources[0].weight: Invalid value: 0: resource weight of cpu not in valid range (0, 100]".to_string(),
            "args.scoringStrategy.resources[1].weight: Invalid value: 101: resource weight of memory not in valid range (0, 100]"
                .to_string(),
            "args.scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio"
                .to_string(),
        ]
    );
    let args = NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy {
            type_: "Foo".into(),
            resources: vec![],
            requested_to_capacity_ratio: Some(RequestedToCapacityRatioParam::default()),
        }),
        ..Default::default()
    };
    assert_eq!(
        validate_node_resources_fit_args("args", &args).iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            r#"args.scoringStrategy.type: Unsupported value: "Foo": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio""#,
            "args.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio",
        ]
    );
    assert_eq!(
        validate_node_resources_fit_args("args", &NodeResourcesFitArgs::default())[0].to_string(),
        "args.scoringStrategy: Required value: ScoringStrategy field is required"
    );
}

#[test]
fn aggregate_display_like_upstream() {
    let mut cfg = default_config();
    cfg.parallelism = Some(0);
    assert_eq!(
        validate(&cfg).unwrap_err().to_string(),
        "parallelism: Invalid value: 0: should be an integer value greater than zero"
    );
    cfg.pod_initial_backoff_seconds = Some(-1);
    assert_eq!(
        validate(&cfg).unwrap_err().to_string(),
        "[parallelism: Invalid value: 0: should be an integer value greater than zero, podInitialBackoffSeconds: Invalid value: \
         -1: must be greater than 0]"
    );
    // Identical messages are printed once.
    let e = ValidationErrors(vec![FieldError::required("a", ""), FieldError::required("a", "")]);
    assert_eq!(e.to_string(), "a: Required value");
}
