//! `--write-config-to` encoding: upstream's internal→v1 view printed as go-yaml v2 YAML.

use serde_json::json;

use super::super::*;
use super::load;

#[test]
fn round_trips_through_yaml() {
    let cfg = load(
        "parallelism: 8\nextenders:\n- urlPrefix: http://e\n  prioritizeVerb: p\n  weight: 2\n  tlsConfig:\n    caData: aGVsbG8=\n  \
         managedResources:\n  - name: example.com/foo\n    ignoredByScheduler: true\nprofiles:\n- schedulerName: a\n  \
         percentageOfNodesToScore: 30\n  pluginConfig:\n  - name: Custom\n    args:\n      z: [1, 2]\n      a: {b: c}\n- schedulerName: b\n",
    );
    let yaml = to_yaml(&cfg);
    let again = load_config(yaml.as_bytes(), "out.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    // Unset weights come back as explicit zeros (as with upstream), so compare the encodings.
    assert_eq!(to_yaml(&again), yaml);
    assert_eq!(again.extenders, cfg.extenders);
    assert_eq!(again.profiles[0].plugin_config, cfg.profiles[0].plugin_config);
}

#[test]
fn extenders_and_unknown_args_are_written_like_upstream() {
    let cfg = load(
        "extenders:\n- urlPrefix: http://e\n  filterVerb: filter\n  tlsConfig:\n    caData: aGVsbG8=\nprofiles:\n- pluginConfig:\n  \
         - name: OutOfTreePlugin\n    args:\n      foo: bar\n  - name: NoArgs\n  plugins:\n    multiPoint:\n      disabled:\n      - name: '*'\n",
    );
    let yaml = to_yaml(&cfg);
    let want_ext = "extenders:\n- filterVerb: filter\n  httpTimeout: 0s\n  tlsConfig:\n    caData: aGVsbG8=\n  urlPrefix: http://e\n";
    assert!(yaml.contains(want_ext), "{yaml}");
    let want_profile = "profiles:\n- pluginConfig:\n  - args:\n      foo: bar\n    name: OutOfTreePlugin\n  - args: null\n    name: NoArgs\n  \
                        plugins:\n    bind: {}\n";
    assert!(yaml.contains(want_profile), "{yaml}");
    assert!(yaml.contains("    multiPoint:\n      disabled:\n      - name: '*'\n        weight: 0\n"), "{yaml}");
}

#[test]
fn json_view_matches_upstream_encoding_of_internal_values() {
    // Unset pointers of upstream's v1 type are plain values internally, so they are always written.
    let mut cfg = KubeSchedulerConfiguration::default();
    cfg.profiles.push(KubeSchedulerProfile {
        plugin_config: vec![
            PluginConfig {
                name: "InterPodAffinity".into(),
                args: PluginArgs::InterPodAffinity(InterPodAffinityArgs {
                    hard_pod_affinity_weight: Some(5),
                    ..Default::default()
                }),
            },
            PluginConfig {
                name: "PodTopologySpread".into(),
                args: PluginArgs::PodTopologySpread(PodTopologySpreadArgs::default()),
            },
        ],
        ..Default::default()
    });
    // Same text as upstream's TestCodecsEncodePluginConfig "from internal" case (minus parallelism etc.).
    let want = "apiVersion: kubescheduler.config.k8s.io/v1
clientConnection:
  acceptContentTypes: \"\"
  burst: 0
  contentType: \"\"
  kubeconfig: \"\"
  qps: 0
enableContentionProfiling: false
enableProfiling: false
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
  leaseDuration: 0s
  renewDeadline: 0s
  resourceLock: \"\"
  resourceName: \"\"
  resourceNamespace: \"\"
  retryPeriod: 0s
parallelism: 0
podInitialBackoffSeconds: 0
podMaxBackoffSeconds: 0
profiles:
- pluginConfig:
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      hardPodAffinityWeight: 5
      ignorePreferredTermsOfExistingPods: false
      kind: InterPodAffinityArgs
    name: InterPodAffinity
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: PodTopologySpreadArgs
    name: PodTopologySpread
  schedulerName: \"\"
";
    assert_eq!(to_yaml(&cfg), want);
}

#[test]
fn plugin_args_json_forms() {
    let dra = PluginArgs::DynamicResources(DynamicResourcesArgs::default());
    assert_eq!(
        plugin_args_json(&dra),
        Some(json!({"apiVersion": API_VERSION, "kind": "DynamicResourcesArgs", "filterTimeout": null}))
    );
    let best_fit = PluginArgs::DynamicResources(DynamicResourcesArgs {
        device_selection: Some("BestFit".into()),
        ..Default::default()
    });
    assert_eq!(
        plugin_args_json(&best_fit),
        Some(
            json!({"apiVersion": API_VERSION, "kind": "DynamicResourcesArgs", "filterTimeout": null, "deviceSelection": "BestFit"})
        )
    );
    let fit = PluginArgs::NodeResourcesFit(NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy {
            type_: "RequestedToCapacityRatio".into(),
            resources: vec![ResourceSpec { name: "cpu".into(), weight: 1 }],
            requested_to_capacity_ratio: Some(RequestedToCapacityRatioParam {
                shape: vec![UtilizationShapePoint { utilization: 1, score: 2 }],
            }),
        }),
        ..Default::default()
    });
    assert_eq!(
        plugin_args_json(&fit),
        Some(json!({
            "apiVersion": API_VERSION,
            "kind": "NodeResourcesFitArgs",
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "resources": [{"name": "cpu", "weight": 1}],
                "requestedToCapacityRatio": {"shape": [{"utilization": 1, "score": 2}]},
            },
        }))
    );
    assert_eq!(plugin_args_json(&PluginArgs::None), None);
}
