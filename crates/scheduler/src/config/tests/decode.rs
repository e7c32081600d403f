//! Strict decoding: type metadata, unknown/duplicate fields, type errors, nested args.

use super::super::*;

const HEADER: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

fn err(text: &str) -> String {
    decode_config(text.as_bytes(), "cfg.yaml").unwrap_err().to_string()
}

fn err_body(body: &str) -> String {
    err(&format!("{HEADER}{body}"))
}

#[test]
fn unknown_top_level_field_names_field_and_line() {
    assert_eq!(
        err_body("leaderElection:\n  leaderElect: true\nfoo: bar\n"),
        r#"strict decoding error: unknown field "foo" (line 5)"#
    );
}

#[test]
fn all_unknown_fields_are_reported_with_paths() {
    let e = err_body("profiles:\n- schedulerName: a\n  bogus: 1\n  plugins:\n    score:\n      enabled:\n      - name: X\n        wieght: 2\n");
    assert_eq!(
        e,
        r#"strict decoding error: unknown field "profiles[0].bogus" (line 5), unknown field "profiles[0].plugins.score.enabled[0].wieght" (line 10)"#
    );
}

#[test]
fn field_names_are_case_sensitive() {
    assert_eq!(err_body("Parallelism: 3\n"), r#"strict decoding error: unknown field "Parallelism" (line 3)"#);
}

#[test]
fn duplicate_yaml_keys_like_go_yaml() {
    assert_eq!(
        err_body("leaderElection:\n  leaderElect: true\n  leaderElect: false\n"),
        "strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n  line 5: key \"leaderElect\" already set in map"
    );
}

#[test]
fn duplicate_json_fields() {
    let text = r#"{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "parallelism": 1, "parallelism": 2}"#;
    assert_eq!(err(text), r#"strict decoding error: duplicate field "parallelism""#);
}

#[test]
fn json_input_is_accepted() {
    let text = r#"{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "parallelism": 4,
                  "profiles": [{"schedulerName": "x"}]}"#;
    let cfg = load_config(text.as_bytes(), "cfg.json").unwrap();
    assert_eq!(cfg.parallelism, Some(4));
    assert_eq!(cfg.profiles[0].scheduler_name.as_deref(), Some("x"));
}

#[test]
fn removed_versions_are_rejected_with_upstream_message() {
    let e = err("apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n");
    assert_eq!(
        e,
        "no kind \"KubeSchedulerConfiguration\" is registered for version \"kubescheduler.config.k8s.io/v1beta3\" in scheme \
         \"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme/scheme.go:29\" (kubescheduler.config.k8s.io/v1beta3 is no longer \
         supported; migrate the configuration to kubescheduler.config.k8s.io/v1)"
    );
    let e = err("apiVersion: kubescheduler.config.k8s.io/unknown\nkind: KubeSchedulerConfiguration\n");
    assert_eq!(
        e,
        "no kind \"KubeSchedulerConfiguration\" is registered for version \"kubescheduler.config.k8s.io/unknown\" in scheme \
         \"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme/scheme.go:29\""
    );
    let e = err("apiVersion: componentconfig/v1alpha1\nkind: KubeSchedulerConfiguration\n");
    assert!(
        e.starts_with(r#"no kind "KubeSchedulerConfiguration" is registered for version "componentconfig/v1alpha1""#)
    );
}

#[test]
fn wrong_kind() {
    let e = err("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Foo\n");
    assert!(
        e.starts_with(r#"no kind "Foo" is registered for version "kubescheduler.config.k8s.io/v1" in scheme"#),
        "{e}"
    );
    let e = err("apiVersion: kubescheduler.config.k8s.io/v1\nkind: DefaultPreemptionArgs\n");
    assert_eq!(
        e,
        "couldn't decode as KubeSchedulerConfiguration, got kubescheduler.config.k8s.io/v1, Kind=DefaultPreemptionArgs: "
    );
}

#[test]
fn missing_type_meta() {
    let text = "kind: KubeSchedulerConfiguration\nparallelism: 1\n";
    assert_eq!(err(text), format!("Object 'apiVersion' is missing in '{text}'"));
    let text = "apiVersion: kubescheduler.config.k8s.io/v1\n";
    assert_eq!(err(text), format!("Object 'Kind' is missing in '{text}'"));
    assert_eq!(err(""), "Object 'Kind' is missing in ''");
}

#[test]
fn syntax_errors_carry_the_line() {
    let e = decode_config(format!("{HEADER}profiles: [\n").as_bytes(), "cfg.yaml").unwrap_err();
    assert!(matches!(e.kind, ConfigErrorKind::Syntax { line: Some(3), .. }), "{e:?}");
    assert_eq!(e.source_name, "cfg.yaml");
}

#[test]
fn type_errors_like_go_json() {
    assert_eq!(
        err_body("parallelism: \"16\"\n"),
        "json: cannot unmarshal string into Go struct field KubeSchedulerConfiguration.parallelism of type int32"
    );
    assert_eq!(
        err_body("parallelism: 1.5\n"),
        "json: cannot unmarshal number 1.5 into Go struct field KubeSchedulerConfiguration.parallelism of type int32"
    );
    assert_eq!(
        err_body("parallelism: 3000000000\n"),
        "json: cannot unmarshal number 3000000000 into Go struct field KubeSchedulerConfiguration.parallelism of type int32"
    );
    assert_eq!(
        err_body("profiles:\n- plugins:\n    score:\n      enabled:\n      - name: X\n        weight: a\n"),
        "json: cannot unmarshal string into Go struct field Plugin.profiles.plugins.score.enabled.weight of type int32"
    );
    assert_eq!(
        err_body("leaderElection:\n  leaseDuration: 15\n"),
        "json: cannot unmarshal number into Go struct field LeaderElectionConfiguration.leaderElection.leaseDuration of type string"
    );
    assert_eq!(err_body("leaderElection:\n  leaseDuration: abc\n"), r#"time: invalid duration "abc""#);
}

#[test]
fn null_means_unset() {
    let cfg = decode_config(format!("{HEADER}parallelism: null\nprofiles:\nextenders: ~\n").as_bytes(), "x").unwrap();
    assert_eq!(cfg.parallelism, None);
    assert!(cfg.profiles.is_empty());
}

#[test]
fn extenders_decode_including_tls_and_durations() {
    let cfg = decode_config(
        format!(
            "{HEADER}extenders:\n- urlPrefix: https://ext\n  filterVerb: filter\n  prioritizeVerb: prio\n  weight: 5\n  enableHTTPS: true\n  \
             httpTimeout: 1m30s\n  tlsConfig:\n    insecure: true\n    caFile: /ca\n    caData: aGVsbG8=\n  managedResources:\n  \
             - name: example.com/foo\n    ignoredByScheduler: true\n  ignorable: true\n  nodeCacheCapable: true\n"
        )
        .as_bytes(),
        "x",
    )
    .unwrap();
    let e = &cfg.extenders[0];
    assert_eq!(e.url_prefix, "https://ext");
    assert_eq!(e.weight, 5);
    assert!(e.enable_https && e.ignorable && e.node_cache_capable);
    assert_eq!(e.http_timeout, Duration::from_secs(90));
    let tls = e.tls_config.as_ref().unwrap();
    assert!(tls.insecure);
    assert_eq!(tls.ca_file, "/ca");
    assert_eq!(tls.ca_data.0, b"hello");
    assert_eq!(e.managed_resources[0].name, "example.com/foo");
    assert!(e.managed_resources[0].ignored_by_scheduler);
    assert_eq!(
        err_body("extenders:\n- urlPrefix: x\n  tlsConfig:\n    certData: '!!'\n"),
        "illegal base64 data at input byte 0"
    );
}

#[test]
fn args_kind_must_match_plugin() {
    let e = err_body(
        "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1\n      \
         kind: InterPodAffinityArgs\n",
    );
    assert_eq!(
        e,
        "decoding .profiles[0].pluginConfig[0]: args for plugin DefaultPreemption were not of type \
         DefaultPreemptionArgs.kubescheduler.config.k8s.io, got InterPodAffinityArgs.kubescheduler.config.k8s.io"
    );
    let e = err_body(
        "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1beta3\n",
    );
    assert!(
        e.starts_with(
            "decoding .profiles[0].pluginConfig[0]: decoding args for plugin DefaultPreemption: no kind \"DefaultPreemptionArgs\" \
             is registered for version \"kubescheduler.config.k8s.io/v1beta3\""
        ),
        "{e}"
    );
}

#[test]
fn args_decoding_is_strict() {
    let e = err_body(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        resources:\n        \
         - Name: cpu\n          Weight: 1\n",
    );
    assert_eq!(
        e,
        "strict decoding error: decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin \
         NodeResourcesFit: strict decoding error: unknown field \"scoringStrategy.resources[0].Name\" (line 9), unknown field \
         \"scoringStrategy.resources[0].Weight\" (line 10)"
    );
    let e =
        err_body("profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: x\n");
    assert_eq!(
        e,
        "decoding .profiles[0].pluginConfig[0]: decoding args for plugin InterPodAffinity: json: cannot unmarshal string into \
         Go struct field InterPodAffinityArgs.hardPodAffinityWeight of type int32"
    );
}

#[test]
fn all_typed_args_decode() {
    let cfg = load_config(
        format!(
            "{HEADER}profiles:\n- pluginConfig:\n  - name: DynamicResources\n    args:\n      filterTimeout: 5s\n      bindingTimeout: 30s\n  \
             - name: PodTopologySpread\n    args:\n      defaultingType: List\n      defaultConstraints:\n      - maxSkew: 1\n        \
             topologyKey: zone\n        whenUnsatisfiable: ScheduleAnyway\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        \
             requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions:\n            \
             - key: foo\n              operator: In\n              values: [\"bar\"]\n  - name: VolumeBinding\n    args:\n      \
             bindTimeoutSeconds: 300\n"
        )
        .as_bytes(),
        "x",
    )
    .unwrap();
    let pc = &cfg.profiles[0].plugin_config;
    assert_eq!(
        pc[0].args,
        PluginArgs::DynamicResources(DynamicResourcesArgs {
            filter_timeout: Some(Duration::from_secs(5)),
            binding_timeout: Some(Duration::from_secs(30)),
            device_selection: None,
        })
    );
    let PluginArgs::PodTopologySpread(pts) = &pc[1].args else { panic!() };
    assert_eq!(pts.defaulting_type, "List");
    assert_eq!(pts.default_constraints[0].topology_key, "zone");
    let PluginArgs::NodeAffinity(na) = &pc[2].args else { panic!() };
    let req = na.added_affinity.as_ref().unwrap().required_during_scheduling_ignored_during_execution.as_ref().unwrap();
    assert_eq!(req.node_selector_terms[0].match_expressions[0].values, ["bar"]);
    assert_eq!(
        pc[3].args,
        PluginArgs::VolumeBinding(VolumeBindingArgs { bind_timeout_seconds: Some(300), shape: None })
    );
    assert_eq!(validate(&cfg), Ok(()));
}

#[test]
fn empty_args_of_registered_kinds_are_typed() {
    let cfg = load_config(
        format!(
            "{HEADER}profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args:\n  - name: NodeResourcesFit\n"
        )
        .as_bytes(),
        "x",
    )
    .unwrap();
    let pc = &cfg.profiles[0].plugin_config;
    assert_eq!(
        pc[0].args,
        PluginArgs::DefaultPreemption(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: Some(10),
            min_candidate_nodes_absolute: Some(100)
        })
    );
    assert!(matches!(pc[1].args, PluginArgs::NodeResourcesFit(_)));
}

#[test]
fn framework_args_are_v1_json() {
    let cfg = default_config();
    let args = cfg.profiles[0].framework_plugin_args();
    let (name, v) = &args[0];
    assert_eq!(name, "DefaultPreemption");
    assert_eq!(
        v,
        &serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "DefaultPreemptionArgs",
            "minCandidateNodesPercentage": 10,
            "minCandidateNodesAbsolute": 100,
        })
    );
    assert_eq!(cfg.profiles[0].plugin_config[0].args.to_json().as_ref(), Some(v));
}

#[test]
fn document_markers_and_comments_are_fine() {
    let text = format!("# scheduler config\n---\n{HEADER}parallelism: 2 # inline\n...\n");
    assert_eq!(load_config(text.as_bytes(), "x").unwrap().parallelism, Some(2));
}

#[test]
fn missing_plugin_name_is_rejected_by_framework_type() {
    // The framework's PluginRef has no default for `name` (upstream would accept an empty name).
    let e = err_body("profiles:\n- plugins:\n    score:\n      enabled:\n      - weight: 2\n");
    assert_eq!(e, "missing field `name`");
}
