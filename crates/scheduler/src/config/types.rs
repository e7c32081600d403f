//! `kubescheduler.config.k8s.io/v1` types. Optional fields are `Option` exactly where upstream uses
//! pointers, so defaulting can tell "unset" from an explicit zero.

use std::collections::BTreeMap;

use ksched_framework::plugin_config::Plugins;
use serde::{Deserialize, Deserializer, Serialize};

use super::duration::Duration;

/// The API group of the scheduler configuration and plugin args.
pub const GROUP: &str = "kubescheduler.config.k8s.io";
/// The only supported `apiVersion`.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// The `kind` of the top-level object.
pub const KIND: &str = "KubeSchedulerConfiguration";
/// The scheduler name given to a single unnamed profile.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The whole scheduler configuration file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerConfiguration {
    /// `kubescheduler.config.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `KubeSchedulerConfiguration`.
    #[serde(default)]
    pub kind: String,
    /// Goroutine-equivalent parallelism for filtering/scoring (default 16).
    #[serde(default)]
    pub parallelism: Option<i32>,
    /// Leader election settings.
    #[serde(default)]
    pub leader_election: LeaderElectionConfiguration,
    /// API client settings.
    #[serde(default)]
    pub client_connection: ClientConnectionConfiguration,
    /// Serve /debug/pprof-equivalent handlers (default true).
    #[serde(default)]
    pub enable_profiling: Option<bool>,
    /// Lock contention profiling (default true when profiling is on).
    #[serde(default)]
    pub enable_contention_profiling: Option<bool>,
    /// Share of nodes to score; 0 = adaptive (default 0).
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Initial backoff for unschedulable pods in seconds (default 1).
    #[serde(default)]
    pub pod_initial_backoff_seconds: Option<i64>,
    /// Maximum backoff in seconds (default 10).
    #[serde(default)]
    pub pod_max_backoff_seconds: Option<i64>,
    /// Scheduling profiles.
    #[serde(default)]
    pub profiles: Vec<KubeSchedulerProfile>,
    /// HTTP extenders.
    #[serde(default)]
    pub extenders: Vec<Extender>,
    /// Start informers only after winning the lease.
    #[serde(default)]
    pub delay_cache_until_active: bool,
    /// The feature gates in force: not part of the file; recorded by defaulting (from
    /// `--feature-gates`) so that everything built from the configuration sees them.
    #[serde(skip)]
    pub features: super::SchedulerFeatures,
}

/// component-base `LeaderElectionConfiguration` (v1alpha1).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionConfiguration {
    /// Run leader election (default true).
    #[serde(default)]
    pub leader_elect: Option<bool>,
    /// Lease duration (zero ⇒ 15s).
    #[serde(default)]
    pub lease_duration: Duration,
    /// Renew deadline (zero ⇒ 10s).
    #[serde(default)]
    pub renew_deadline: Duration,
    /// Retry period (zero ⇒ 2s).
    #[serde(default)]
    pub retry_period: Duration,
    /// Lock type (only `leases`).
    #[serde(default)]
    pub resource_lock: String,
    /// Lock object name.
    #[serde(default)]
    pub resource_name: String,
    /// Lock object namespace.
    #[serde(default)]
    pub resource_namespace: String,
}

/// component-base `ClientConnectionConfiguration` (v1alpha1).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConnectionConfiguration {
    /// Path to a kubeconfig file.
    #[serde(default)]
    pub kubeconfig: String,
    /// `Accept` header override.
    #[serde(default)]
    pub accept_content_types: String,
    /// Content type sent to the server.
    #[serde(default)]
    pub content_type: String,
    /// Client-side QPS limit.
    #[serde(default)]
    pub qps: f32,
    /// Client-side burst.
    #[serde(default)]
    pub burst: i32,
}

/// One scheduling profile.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerProfile {
    /// The `spec.schedulerName` this profile serves.
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// Per-profile override of the global percentage.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Plugin sets; merged with the defaults at defaulting time.
    #[serde(default)]
    pub plugins: Option<Plugins>,
    /// Plugin arguments.
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
}

/// Arguments for one plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    /// Plugin name.
    pub name: String,
    /// Decoded arguments.
    pub args: PluginArgs,
}

impl<'de> Deserialize<'de> for PluginConfig {
    /// Reads only `name`; `args` is decoded afterwards by kind (see `load`).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct PluginConfigHead {
            #[serde(default)]
            name: String,
            #[serde(default)]
            #[allow(dead_code)]
            args: serde::de::IgnoredAny,
        }
        let head = PluginConfigHead::deserialize(deserializer)?;
        Ok(PluginConfig { name: head.name, args: PluginArgs::None })
    }
}

/// Plugin args: a typed in-tree kind, raw JSON for out-of-tree plugins, or nothing.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum PluginArgs {
    /// No args given (out-of-tree plugin without `args`).
    #[default]
    None,
    /// `DefaultPreemptionArgs`
    DefaultPreemption(DefaultPreemptionArgs),
    /// `InterPodAffinityArgs`
    InterPodAffinity(InterPodAffinityArgs),
    /// `NodeAffinityArgs`
    NodeAffinity(NodeAffinityArgs),
    /// `NodeResourcesBalancedAllocationArgs`
    NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs),
    /// `NodeResourcesFitArgs`
    NodeResourcesFit(NodeResourcesFitArgs),
    /// `PodTopologySpreadArgs`
    PodTopologySpread(PodTopologySpreadArgs),
    /// `VolumeBindingArgs`
    VolumeBinding(VolumeBindingArgs),
    /// `DynamicResourcesArgs`
    DynamicResources(DynamicResourcesArgs),
    /// Args of a plugin without a registered kind, kept verbatim.
    Unknown(serde_json::Value),
}

impl PluginArgs {
    /// The registered kind for typed args (`DefaultPreemptionArgs`, ...).
    pub fn kind(&self) -> Option<&'static str> {
        Some(match self {
            PluginArgs::DefaultPreemption(_) => "DefaultPreemptionArgs",
            PluginArgs::InterPodAffinity(_) => "InterPodAffinityArgs",
            PluginArgs::NodeAffinity(_) => "NodeAffinityArgs",
            PluginArgs::NodeResourcesBalancedAllocation(_) => "NodeResourcesBalancedAllocationArgs",
            PluginArgs::NodeResourcesFit(_) => "NodeResourcesFitArgs",
            PluginArgs::PodTopologySpread(_) => "PodTopologySpreadArgs",
            PluginArgs::VolumeBinding(_) => "VolumeBindingArgs",
            PluginArgs::DynamicResources(_) => "DynamicResourcesArgs",
            PluginArgs::None | PluginArgs::Unknown(_) => return None,
        })
    }
}

/// Kinds registered in `kubescheduler.config.k8s.io/v1` (besides `KubeSchedulerConfiguration`).
pub const ARGS_KINDS: [&str; 8] = [
    "DefaultPreemptionArgs",
    "InterPodAffinityArgs",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "PodTopologySpreadArgs",
    "VolumeBindingArgs",
    "NodeAffinityArgs",
    "DynamicResourcesArgs",
];

/// True when `<plugin>Args` is a registered kind, i.e. the plugin has typed, defaulted args.
pub fn has_args_kind(plugin: &str) -> bool {
    ARGS_KINDS.iter().any(|k| k.strip_suffix("Args") == Some(plugin))
}

/// One HTTP extender.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Extender {
    /// Base URL.
    #[serde(default)]
    pub url_prefix: String,
    /// Filter verb.
    #[serde(default)]
    pub filter_verb: String,
    /// Preempt verb.
    #[serde(default)]
    pub preempt_verb: String,
    /// Prioritize verb.
    #[serde(default)]
    pub prioritize_verb: String,
    /// Weight of the prioritize scores.
    #[serde(default)]
    pub weight: i64,
    /// Bind verb.
    #[serde(default)]
    pub bind_verb: String,
    /// Use HTTPS.
    #[serde(default, rename = "enableHTTPS")]
    pub enable_https: bool,
    /// TLS client settings.
    #[serde(default, rename = "tlsConfig")]
    pub tls_config: Option<ExtenderTlsConfig>,
    /// Request timeout (0 ⇒ 5s at use time).
    #[serde(default)]
    pub http_timeout: Duration,
    /// Send node names only.
    #[serde(default)]
    pub node_cache_capable: bool,
    /// Extended resources managed by the extender.
    #[serde(default)]
    pub managed_resources: Vec<ExtenderManagedResource>,
    /// Failures of this extender are not fatal.
    #[serde(default)]
    pub ignorable: bool,
}

/// Extender TLS settings; the `*Data` fields are base64 in YAML/JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderTlsConfig {
    /// Skip server verification.
    #[serde(default)]
    pub insecure: bool,
    /// SNI / verification name.
    #[serde(default)]
    pub server_name: String,
    /// Client certificate file.
    #[serde(default)]
    pub cert_file: String,
    /// Client key file.
    #[serde(default)]
    pub key_file: String,
    /// CA bundle file.
    #[serde(default, rename = "caFile")]
    pub ca_file: String,
    /// Client certificate PEM.
    #[serde(default)]
    pub cert_data: Base64Bytes,
    /// Client key PEM.
    #[serde(default)]
    pub key_data: Base64Bytes,
    /// CA bundle PEM.
    #[serde(default, rename = "caData")]
    pub ca_data: Base64Bytes,
}

/// An extended resource managed by an extender.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderManagedResource {
    /// Extended resource name.
    #[serde(default)]
    pub name: String,
    /// Exclude the resource from NodeResourcesFit.
    #[serde(default)]
    pub ignored_by_scheduler: bool,
}

/// Bytes carried as standard base64 text, like Go's `[]byte` in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Base64Bytes(pub Vec<u8>);

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

impl Base64Bytes {
    /// Standard padded base64.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.0.len().div_ceil(3) * 4);
        for chunk in self.0.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    /// Decodes standard base64 (Go ignores `\r` and `\n`); errors like Go's `CorruptInputError`.
    pub fn decode(s: &str) -> Result<Self, String> {
        let corrupt = |i: usize| format!("illegal base64 data at input byte {i}");
        let mut out = Vec::with_capacity(s.len() / 4 * 3);
        let mut quad = [0u8; 4];
        let mut n = 0;
        let mut pad = 0;
        let mut finished = false;
        for (i, c) in s.bytes().enumerate() {
            if c == b'\r' || c == b'\n' {
                continue;
            }
            // Nothing may follow a padded quantum.
            if finished {
                return Err(corrupt(i));
            }
            if c == b'=' {
                if n < 2 {
                    return Err(corrupt(i));
                }
                pad += 1;
                quad[n] = 0;
            } else {
                if pad > 0 {
                    return Err(corrupt(i));
                }
                let Some(v) = B64.iter().position(|b| *b == c) else { return Err(corrupt(i)) };
                quad[n] = v as u8;
            }
            n += 1;
            if n == 4 {
                let v = (u32::from(quad[0]) << 18)
                    | (u32::from(quad[1]) << 12)
                    | (u32::from(quad[2]) << 6)
                    | u32::from(quad[3]);
                out.push((v >> 16) as u8);
                if pad < 2 {
                    out.push((v >> 8) as u8);
                }
                if pad < 1 {
                    out.push(v as u8);
                }
                n = 0;
                finished = pad > 0;
            }
        }
        if n != 0 {
            return Err(corrupt(s.len()));
        }
        Ok(Base64Bytes(out))
    }
}

impl<'de> Deserialize<'de> for Base64Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Base64Bytes::decode(&s).map_err(serde::de::Error::custom)
    }
}

// ---- plugin args (kubescheduler.config.k8s.io/v1) ----

/// `DefaultPreemptionArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultPreemptionArgs {
    /// Minimum candidates as a percentage of nodes (default 10).
    #[serde(default)]
    pub min_candidate_nodes_percentage: Option<i32>,
    /// Minimum absolute number of candidates (default 100).
    #[serde(default)]
    pub min_candidate_nodes_absolute: Option<i32>,
}

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    /// Implicit weight of existing pods' required affinity terms (default 1).
    #[serde(default)]
    pub hard_pod_affinity_weight: Option<i32>,
    /// Ignore existing pods' preferred terms when scoring.
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

/// `NodeAffinityArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinityArgs {
    /// Affinity added to every pod.
    #[serde(default)]
    pub added_affinity: Option<NodeAffinity>,
}

/// One resource and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    /// Resource name.
    #[serde(default)]
    pub name: String,
    /// Weight (0 ⇒ 1 at defaulting).
    #[serde(default)]
    pub weight: i64,
}

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesBalancedAllocationArgs {
    /// Resources to balance (default cpu, memory).
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

/// A point of a piecewise-linear scoring function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Utilization (x), 0–100.
    #[serde(default)]
    pub utilization: i32,
    /// Score (y), 0–10.
    #[serde(default)]
    pub score: i32,
}

/// `RequestedToCapacityRatio` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestedToCapacityRatioParam {
    /// Scoring function shape.
    #[serde(default)]
    pub shape: Vec<UtilizationShapePoint>,
}

/// NodeResourcesFit scoring strategy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringStrategy {
    /// `LeastAllocated`, `MostAllocated` or `RequestedToCapacityRatio` (kept verbatim for validation).
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Weighted resources.
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
    /// RTCR parameters.
    #[serde(default)]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesFitArgs {
    /// Resources the filter ignores.
    #[serde(default)]
    pub ignored_resources: Vec<String>,
    /// Resource groups (prefixes) the filter ignores.
    #[serde(default)]
    pub ignored_resource_groups: Vec<String>,
    /// Scoring strategy (default LeastAllocated cpu/memory).
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategy>,
}

/// `PodTopologySpreadArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Cluster-level default constraints (`List` defaulting).
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// `System` or `List` (kept verbatim for validation).
    #[serde(default)]
    pub defaulting_type: String,
}

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeBindingArgs {
    /// Bind timeout in seconds (default 600).
    #[serde(default)]
    pub bind_timeout_seconds: Option<i64>,
    /// Storage-capacity scoring shape; `None` vs empty matters for validation.
    #[serde(default)]
    pub shape: Option<Vec<UtilizationShapePoint>>,
}

/// `DynamicResourcesArgs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DynamicResourcesArgs {
    /// Filter timeout (default 10s when DRASchedulerFilterTimeout is on).
    #[serde(default)]
    pub filter_timeout: Option<Duration>,
    /// Binding-conditions timeout (default 10m when the binding-condition gates are on).
    #[serde(default)]
    pub binding_timeout: Option<Duration>,
    /// Not upstream (opt-in): which candidate device a request gets, `FirstFit` (upstream's
    /// order, what an absent value means) or `BestFit`.
    #[serde(default)]
    pub device_selection: Option<String>,
}

// ---- core/v1 shapes used inside args (own structs: Go allows every field to be absent) ----

/// core/v1 `NodeAffinity`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinity {
    /// Hard requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
    /// Soft preferences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_during_scheduling_ignored_during_execution: Vec<PreferredSchedulingTerm>,
}

/// core/v1 `NodeSelector` (terms are ORed).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelector {
    /// Terms.
    #[serde(default)]
    pub node_selector_terms: Vec<NodeSelectorTerm>,
}

/// core/v1 `NodeSelectorTerm` (requirements are ANDed).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorTerm {
    /// Label requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Field requirements (`metadata.name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

/// core/v1 `NodeSelectorRequirement`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorRequirement {
    /// Label key.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`.
    #[serde(default)]
    pub operator: String,
    /// Values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// core/v1 `PreferredSchedulingTerm`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreferredSchedulingTerm {
    /// Weight 1–100.
    #[serde(default)]
    pub weight: i32,
    /// The term.
    #[serde(default)]
    pub preference: NodeSelectorTerm,
}

/// core/v1 `TopologySpreadConstraint`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologySpreadConstraint {
    /// Maximum skew.
    #[serde(default)]
    pub max_skew: i32,
    /// Node label key of the topology domain.
    #[serde(default)]
    pub topology_key: String,
    /// `DoNotSchedule` or `ScheduleAnyway`.
    #[serde(default)]
    pub when_unsatisfiable: String,
    /// Pod selector (forbidden in default constraints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Minimum number of domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    /// `Honor` or `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<String>,
    /// `Honor` or `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<String>,
    /// Pod label keys merged into the selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

/// meta/v1 `LabelSelector`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Equality requirements.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// meta/v1 `LabelSelectorRequirement`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    /// Label key.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[serde(default)]
    pub operator: String,
    /// Values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}
