//! Validation of a `KubeSchedulerConfiguration` (upstream `ValidateKubeSchedulerConfiguration`).
//!
//! Works on the v1 types but with upstream's internal-type view: an unset pointer reads as zero.

use std::collections::{HashMap, HashSet};

use ksched_framework::plugin_config::{PluginSet, Plugins};
use ksched_framework::validation::is_qualified_name;

use super::field::{go_json, json_quote, json_string_list, BadValue, FieldError, ValidationErrors};
use super::types::*;
use super::validation_pluginargs as args;
use super::SchedulerFeatures;

/// Plugins removed from the v1 API (rejected in enabled lists and pluginConfig).
const REMOVED_PLUGINS: [&str; 4] = ["AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"];

/// Validates a (normally defaulted) configuration at the 1.36 gate defaults; all errors are returned.
pub fn validate(cfg: &KubeSchedulerConfiguration) -> Result<(), ValidationErrors> {
    validate_with(cfg, &SchedulerFeatures::default())
}

/// [`validate`] for the given feature gates.
pub fn validate_with(cfg: &KubeSchedulerConfiguration, features: &SchedulerFeatures) -> Result<(), ValidationErrors> {
    let mut errs = Vec::new();
    if cfg.client_connection.burst < 0 {
        errs.push(FieldError::invalid(
            "clientConnection.burst",
            BadValue::Int(cfg.client_connection.burst.into()),
            "must be non-negative",
        ));
    }
    let le = &cfg.leader_election;
    let leader_elect = le.leader_elect.unwrap_or(false);
    if leader_elect {
        let dur = |d: super::Duration| BadValue::Json(json_quote(&d.to_string()));
        let zero = super::Duration::ZERO;
        if le.lease_duration <= zero {
            errs.push(FieldError::invalid(
                "leaderElection.leaseDuration",
                dur(le.lease_duration),
                "must be greater than zero",
            ));
        }
        if le.renew_deadline <= zero {
            errs.push(FieldError::invalid(
                "leaderElection.renewDeadline",
                dur(le.renew_deadline),
                "must be greater than zero",
            ));
        }
        if le.retry_period <= zero {
            errs.push(FieldError::invalid(
                "leaderElection.retryPeriod",
                dur(le.retry_period),
                "must be greater than zero",
            ));
        }
        // Upstream reports the renew deadline as the offending value here.
        if le.lease_duration <= le.renew_deadline {
            errs.push(FieldError::invalid(
                "leaderElection.leaseDuration",
                dur(le.renew_deadline),
                "must be greater than `RenewDeadline`",
            ));
        }
        if le.resource_lock.is_empty() {
            errs.push(FieldError::required("leaderElection.resourceLock", ""));
        }
        if le.resource_namespace.is_empty() {
            errs.push(FieldError::required("leaderElection.resourceNamespace", ""));
        }
        if le.resource_name.is_empty() {
            errs.push(FieldError::required("leaderElection.resourceName", ""));
        }
        if le.resource_lock != "leases" {
            errs.push(FieldError::invalid(
                "leaderElection.resourceLock",
                BadValue::Str(le.resource_lock.clone()),
                r#"resourceLock value must be "leases""#,
            ));
        }
    }

    let parallelism = cfg.parallelism.unwrap_or(0);
    if parallelism <= 0 {
        errs.push(FieldError::invalid(
            "parallelism",
            BadValue::Int(parallelism.into()),
            "should be an integer value greater than zero",
        ));
    }

    if cfg.profiles.is_empty() {
        errs.push(FieldError::required("profiles", ""));
    } else {
        let mut existing: HashMap<&str, usize> = HashMap::new();
        for (i, profile) in cfg.profiles.iter().enumerate() {
            let path = format!("profiles[{i}]");
            validate_profile(&path, &cfg.api_version, profile, features, &mut errs);
            let name = profile.scheduler_name.as_deref().unwrap_or("");
            if existing.contains_key(name) {
                // Upstream passes a *field.Path as the value, which JSON-encodes as `{}`.
                errs.push(FieldError::duplicate(format!("{path}.schedulerName"), BadValue::Json("{}".into())));
            }
            existing.insert(name, i);
        }
        validate_common_queue_sort(&cfg.profiles, &mut errs);
    }

    validate_percentage("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score, &mut errs);

    let initial = cfg.pod_initial_backoff_seconds.unwrap_or(0);
    let max = cfg.pod_max_backoff_seconds.unwrap_or(0);
    if initial <= 0 {
        errs.push(FieldError::invalid("podInitialBackoffSeconds", BadValue::Int(initial), "must be greater than 0"));
    }
    if max < initial {
        errs.push(FieldError::invalid(
            "podMaxBackoffSeconds",
            BadValue::Int(max),
            "must be greater than or equal to PodInitialBackoffSeconds",
        ));
    }

    validate_extenders(&cfg.extenders, &mut errs);

    if errs.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors(errs))
    }
}

fn validate_percentage(path: &str, value: Option<i32>, errs: &mut Vec<FieldError>) {
    if let Some(p) = value {
        if !(0..=100).contains(&p) {
            errs.push(FieldError::invalid(path, BadValue::Int(p.into()), "not in valid range [0-100]"));
        }
    }
}

fn removed_plugin_detail(api_version: &str) -> String {
    format!("was invalid in version {API_VERSION:?} (KubeSchedulerConfiguration is version {api_version:?})")
}

fn validate_profile(
    path: &str,
    api_version: &str,
    profile: &KubeSchedulerProfile,
    features: &SchedulerFeatures,
    errs: &mut Vec<FieldError>,
) {
    if profile.scheduler_name.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(format!("{path}.schedulerName"), ""));
    }
    validate_percentage(&format!("{path}.percentageOfNodesToScore"), profile.percentage_of_nodes_to_score, errs);

    if let Some(plugins) = &profile.plugins {
        // Upstream walks a Go map here (random order) and skips multiPoint/placement*; the order
        // below is the extension-point order.
        for (stage, set) in checked_stages(plugins) {
            for (k, plugin) in set.enabled.iter().enumerate() {
                if REMOVED_PLUGINS.contains(&plugin.name.as_str()) {
                    errs.push(FieldError::invalid(
                        format!("{path}.plugins.{stage}.enabled[{k}]"),
                        BadValue::Str(plugin.name.clone()),
                        removed_plugin_detail(api_version),
                    ));
                }
            }
        }
    }

    let mut seen: HashSet<&str> = HashSet::new();
    for (j, pc) in profile.plugin_config.iter().enumerate() {
        let pc_path = format!("{path}.pluginConfig[{j}]");
        if !seen.insert(pc.name.as_str()) {
            errs.push(FieldError::duplicate(&pc_path, BadValue::Str(pc.name.clone())));
        }
        if REMOVED_PLUGINS.contains(&pc.name.as_str()) {
            errs.push(FieldError::invalid(
                &pc_path,
                BadValue::Str(pc.name.clone()),
                removed_plugin_detail(api_version),
            ));
            continue;
        }
        let args_path = format!("{pc_path}.args");
        let mismatch = || FieldError::invalid(&args_path, internal_args_value(&pc.args), "has to match plugin args");
        // Upstream keys NodeResourcesFit's validator by "NodeResourcesFitArgs", so real
        // NodeResourcesFit args are not validated here (only when the plugin is built).
        match (pc.name.as_str(), &pc.args) {
            ("DefaultPreemption", PluginArgs::DefaultPreemption(a)) => {
                errs.extend(args::validate_default_preemption_args(&args_path, a))
            }
            ("InterPodAffinity", PluginArgs::InterPodAffinity(a)) => {
                errs.extend(args::validate_inter_pod_affinity_args(&args_path, a))
            }
            ("NodeAffinity", PluginArgs::NodeAffinity(a)) => {
                errs.extend(args::validate_node_affinity_args(&args_path, a))
            }
            ("NodeResourcesBalancedAllocation", PluginArgs::NodeResourcesBalancedAllocation(a)) => {
                errs.extend(args::validate_node_resources_balanced_allocation_args(&args_path, a))
            }
            ("NodeResourcesFitArgs", PluginArgs::NodeResourcesFit(a)) => {
                errs.extend(args::validate_node_resources_fit_args(&args_path, a))
            }
            ("PodTopologySpread", PluginArgs::PodTopologySpread(a)) => {
                errs.extend(args::validate_pod_topology_spread_args(&args_path, a))
            }
            ("VolumeBinding", PluginArgs::VolumeBinding(a)) => {
                errs.extend(args::validate_volume_binding_args(&args_path, a, features))
            }
            ("DynamicResources", PluginArgs::DynamicResources(a)) => {
                errs.extend(args::validate_dynamic_resources_args(&args_path, a, features))
            }
            (
                "DefaultPreemption"
                | "InterPodAffinity"
                | "NodeAffinity"
                | "NodeResourcesBalancedAllocation"
                | "NodeResourcesFitArgs"
                | "PodTopologySpread"
                | "VolumeBinding"
                | "DynamicResources",
                _,
            ) => errs.push(mismatch()),
            _ => {}
        }
    }
}

fn checked_stages(p: &Plugins) -> [(&'static str, &PluginSet); 12] {
    [
        ("preEnqueue", &p.pre_enqueue),
        ("queueSort", &p.queue_sort),
        ("preFilter", &p.pre_filter),
        ("filter", &p.filter),
        ("postFilter", &p.post_filter),
        ("preScore", &p.pre_score),
        ("score", &p.score),
        ("reserve", &p.reserve),
        ("permit", &p.permit),
        ("preBind", &p.pre_bind),
        ("bind", &p.bind),
        ("postBind", &p.post_bind),
    ]
}

/// Semantic equality of plugin sets as upstream's internal types see them (unset weight = 0).
fn plugin_set_eq(a: &PluginSet, b: &PluginSet) -> bool {
    let same = |x: &[ksched_framework::plugin_config::PluginRef], y: &[ksched_framework::plugin_config::PluginRef]| {
        x.len() == y.len()
            && x.iter().zip(y).all(|(p, q)| p.name == q.name && p.weight.unwrap_or(0) == q.weight.unwrap_or(0))
    };
    same(&a.enabled, &b.enabled) && same(&a.disabled, &b.disabled)
}

fn validate_common_queue_sort(profiles: &[KubeSchedulerProfile], errs: &mut Vec<FieldError>) {
    let empty = PluginSet::default();
    let queue_sort_of = |p: &'_ KubeSchedulerProfile| -> PluginSet {
        p.plugins.as_ref().map(|pl| pl.queue_sort.clone()).unwrap_or_else(|| empty.clone())
    };
    let canon = &queue_sort_of(&profiles[0]);
    let queue_sort_name = canon.enabled.first().map(|p| p.name.as_str()).unwrap_or("");
    if profiles[0].plugins.is_some() && canon.enabled.len() > 1 {
        errs.push(FieldError::invalid(
            "profiles[0].plugins.queueSort.Enabled",
            BadValue::Int(canon.enabled.len() as i64),
            "only one queue sort plugin can be enabled",
        ));
    }
    let none = PluginArgs::None;
    let mut canon_args = &none;
    if !queue_sort_name.is_empty() {
        for pc in &profiles[0].plugin_config {
            if pc.name == queue_sort_name {
                canon_args = &pc.args;
            }
        }
    }
    for (i, profile) in profiles.iter().enumerate().skip(1) {
        let curr = &queue_sort_of(profile);
        if !plugin_set_eq(canon, curr) {
            errs.push(FieldError::invalid(
                format!("profiles[{i}].plugins.queueSort"),
                BadValue::Json(internal_plugin_set_json(curr)),
                "must be the same for all profiles",
            ));
        }
        for pc in &profile.plugin_config {
            if pc.name == queue_sort_name && &pc.args != canon_args {
                errs.push(FieldError::invalid(
                    format!("profiles[{i}].pluginConfig.args"),
                    internal_args_value(&pc.args),
                    "queueSort must be the same for all profiles",
                ));
            }
        }
    }
}

fn validate_extenders(extenders: &[Extender], errs: &mut Vec<FieldError>) {
    let mut binders = 0;
    let mut managed: HashSet<&str> = HashSet::new();
    for (i, ext) in extenders.iter().enumerate() {
        let path = format!("extenders[{i}]");
        if !ext.prioritize_verb.is_empty() && ext.weight <= 0 {
            errs.push(FieldError::invalid(
                format!("{path}.weight"),
                BadValue::Int(ext.weight),
                "must have a positive weight applied to it",
            ));
        }
        if !ext.bind_verb.is_empty() {
            binders += 1;
        }
        for (j, res) in ext.managed_resources.iter().enumerate() {
            let name_path = format!("{path}.managedResources[{j}].name");
            errs.extend(validate_extended_resource_name(&name_path, &res.name));
            if !managed.insert(res.name.as_str()) {
                errs.push(FieldError::invalid(
                    &name_path,
                    BadValue::Str(res.name.clone()),
                    "duplicate extender managed resource name",
                ));
            }
        }
    }
    if binders > 1 {
        errs.push(FieldError::invalid(
            "extenders",
            BadValue::Str(format!("found {binders} extenders implementing bind")),
            "only one extender can implement bind",
        ));
    }
}

fn validate_extended_resource_name(path: &str, name: &str) -> Vec<FieldError> {
    let errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|msg| FieldError::invalid(path, BadValue::json_str(name), msg))
        .collect();
    if !errs.is_empty() {
        return errs;
    }
    if !is_extended_resource_name(name) {
        return vec![FieldError::invalid(path, BadValue::Str(name.into()), "is an invalid extended resource name")];
    }
    vec![]
}

/// core/v1 helper `IsExtendedResourceName`: fully qualified, outside `kubernetes.io/`, and
/// still a qualified name with the quota `requests.` prefix.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    if native || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}")).is_empty()
}

// ---- values rendered the way upstream prints its internal (untagged) Go types ----

fn go_obj(fields: &[(&str, String)]) -> String {
    let items: Vec<String> = fields.iter().map(|(k, v)| format!("{}:{}", json_quote(k), v)).collect();
    format!("{{{}}}", items.join(","))
}

fn go_list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        return "null".into();
    }
    format!("[{}]", items.iter().map(f).collect::<Vec<_>>().join(","))
}

fn internal_plugin_set_json(set: &PluginSet) -> String {
    let plugin = |p: &ksched_framework::plugin_config::PluginRef| {
        go_obj(&[("Name", json_quote(&p.name)), ("Weight", p.weight.unwrap_or(0).to_string())])
    };
    go_obj(&[("Enabled", go_list(&set.enabled, plugin)), ("Disabled", go_list(&set.disabled, plugin))])
}

fn shape_point_json(p: &UtilizationShapePoint) -> String {
    go_obj(&[("Utilization", p.utilization.to_string()), ("Score", p.score.to_string())])
}

/// A shape as upstream's internal `[]UtilizationShapePoint` JSON (`[]` when empty but present).
pub(super) fn internal_shape_json(shape: &[UtilizationShapePoint]) -> String {
    if shape.is_empty() {
        return "[]".into();
    }
    go_list(shape, shape_point_json)
}

fn internal_resources_json(resources: &[ResourceSpec]) -> String {
    go_list(resources, |r| go_obj(&[("Name", json_quote(&r.name)), ("Weight", r.weight.to_string())]))
}

fn strings_json(items: &[String]) -> String {
    match json_string_list(items) {
        BadValue::Json(j) => j,
        other => other.to_string(),
    }
}

/// Plugin args as upstream renders its internal args object in an error.
fn internal_args_value(args: &PluginArgs) -> BadValue {
    let dur = |d: &Option<super::Duration>| d.map(|d| json_quote(&d.to_string())).unwrap_or_else(|| "null".into());
    let json = match args {
        PluginArgs::None => "null".into(),
        PluginArgs::Unknown(v) => go_json(v),
        PluginArgs::DefaultPreemption(a) => go_obj(&[
            ("MinCandidateNodesPercentage", a.min_candidate_nodes_percentage.unwrap_or(0).to_string()),
            ("MinCandidateNodesAbsolute", a.min_candidate_nodes_absolute.unwrap_or(0).to_string()),
        ]),
        PluginArgs::InterPodAffinity(a) => go_obj(&[
            ("HardPodAffinityWeight", a.hard_pod_affinity_weight.unwrap_or(0).to_string()),
            ("IgnorePreferredTermsOfExistingPods", a.ignore_preferred_terms_of_existing_pods.to_string()),
        ]),
        PluginArgs::NodeAffinity(a) => go_obj(&[(
            "AddedAffinity",
            a.added_affinity
                .as_ref()
                .map(|n| go_json(&serde_json::to_value(n).unwrap_or_default()))
                .unwrap_or_else(|| "null".into()),
        )]),
        PluginArgs::NodeResourcesBalancedAllocation(a) => {
            go_obj(&[("Resources", internal_resources_json(&a.resources))])
        }
        PluginArgs::NodeResourcesFit(a) => {
            let strategy = a
                .scoring_strategy
                .as_ref()
                .map(|s| {
                    let rtcr = s
                        .requested_to_capacity_ratio
                        .as_ref()
                        .map(|r| go_obj(&[("Shape", go_list(&r.shape, shape_point_json))]))
                        .unwrap_or_else(|| "null".into());
                    go_obj(&[
                        ("Type", json_quote(&s.type_)),
                        ("Resources", internal_resources_json(&s.resources)),
                        ("RequestedToCapacityRatio", rtcr),
                    ])
                })
                .unwrap_or_else(|| "null".into());
            go_obj(&[
                ("IgnoredResources", strings_json(&a.ignored_resources)),
                ("IgnoredResourceGroups", strings_json(&a.ignored_resource_groups)),
                ("ScoringStrategy", strategy),
            ])
        }
        PluginArgs::PodTopologySpread(a) => go_obj(&[
            (
                "DefaultConstraints",
                go_list(&a.default_constraints, |c| go_json(&serde_json::to_value(c).unwrap_or_default())),
            ),
            ("DefaultingType", json_quote(&a.defaulting_type)),
        ]),
        PluginArgs::VolumeBinding(a) => go_obj(&[
            ("BindTimeoutSeconds", a.bind_timeout_seconds.unwrap_or(0).to_string()),
            ("Shape", a.shape.as_ref().map(|s| internal_shape_json(s)).unwrap_or_else(|| "null".into())),
        ]),
        PluginArgs::DynamicResources(a) => {
            go_obj(&[("FilterTimeout", dur(&a.filter_timeout)), ("BindingTimeout", dur(&a.binding_timeout))])
        }
    };
    BadValue::Json(json)
}
