//! Validation of the typed plugin args (upstream `validation_pluginargs.go`). Each function takes
//! the field path of the args object and returns every problem found.

use std::collections::HashSet;

use super::field::{json_quote, json_string_list, validate_label_name};
use super::field::{BadValue, FieldError};
use super::types::*;
use super::validation::internal_shape_json;
use super::{Duration, SchedulerFeatures};
use ksched_dra::allocator::DeviceSelection;
use ksched_framework::validation::{is_qualified_name, is_valid_label_value};

const MAX_CUSTOM_PRIORITY_SCORE: i32 = super::defaults::MAX_CUSTOM_PRIORITY_SCORE;

/// `DefaultPreemptionArgs`: percentage in [0, 100], absolute ≥ 0, not both zero.
pub fn validate_default_preemption_args(path: &str, args: &DefaultPreemptionArgs) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let pct_path = format!("{path}.minCandidateNodesPercentage");
    let abs_path = format!("{path}.minCandidateNodesAbsolute");
    let pct = args.min_candidate_nodes_percentage.unwrap_or(0);
    let abs = args.min_candidate_nodes_absolute.unwrap_or(0);
    if !(0..=100).contains(&pct) {
        errs.push(FieldError::invalid(&pct_path, BadValue::Int(pct.into()), "not in valid range [0, 100]"));
    }
    if abs < 0 {
        errs.push(FieldError::invalid(&abs_path, BadValue::Int(abs.into()), "not in valid range [0, inf)"));
    }
    if pct == 0 && abs == 0 {
        errs.push(FieldError::invalid(
            &pct_path,
            BadValue::Int(0),
            "cannot be zero at the same time as minCandidateNodesAbsolute",
        ));
        errs.push(FieldError::invalid(
            &abs_path,
            BadValue::Int(0),
            "cannot be zero at the same time as minCandidateNodesPercentage",
        ));
    }
    errs
}

/// `InterPodAffinityArgs`: hardPodAffinityWeight in [0, 100].
pub fn validate_inter_pod_affinity_args(path: &str, args: &InterPodAffinityArgs) -> Vec<FieldError> {
    let w = args.hard_pod_affinity_weight.unwrap_or(0);
    if !(0..=100).contains(&w) {
        return vec![FieldError::invalid(
            format!("{path}.hardPodAffinityWeight"),
            BadValue::Int(w.into()),
            "not in valid range [0, 100]",
        )];
    }
    vec![]
}

/// `PodTopologySpreadArgs`: defaulting type, and each default constraint like a pod's
/// constraint but without a label selector.
pub fn validate_pod_topology_spread_args(path: &str, args: &PodTopologySpreadArgs) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let dt_path = format!("{path}.defaultingType");
    let dt = args.defaulting_type.as_str();
    if dt != "System" && dt != "List" {
        errs.push(FieldError::not_supported(&dt_path, BadValue::json_str(dt), &["System", "List"]));
    } else if dt == "System" && !args.default_constraints.is_empty() {
        errs.push(FieldError::invalid(&dt_path, BadValue::json_str(dt), "when .defaultConstraints are not empty"));
    }
    let dc_path = format!("{path}.defaultConstraints");
    for (i, c) in args.default_constraints.iter().enumerate() {
        let p = format!("{dc_path}[{i}]");
        if c.max_skew <= 0 {
            errs.push(FieldError::invalid(
                format!("{p}.maxSkew"),
                BadValue::Int(c.max_skew.into()),
                "not in valid range (0, inf)",
            ));
        }
        let key_path = format!("{p}.topologyKey");
        if c.topology_key.is_empty() {
            errs.push(FieldError::required(&key_path, "can not be empty"));
        } else {
            errs.extend(validate_label_name(&c.topology_key, &key_path));
        }
        let when_path = format!("{p}.whenUnsatisfiable");
        if c.when_unsatisfiable.is_empty() {
            errs.push(FieldError::required(&when_path, "can not be empty"));
        } else if c.when_unsatisfiable != "DoNotSchedule" && c.when_unsatisfiable != "ScheduleAnyway" {
            errs.push(FieldError::not_supported(
                &when_path,
                BadValue::json_str(&c.when_unsatisfiable),
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        if c.label_selector.is_some() {
            errs.push(FieldError::forbidden(
                format!("{p}.labelSelector"),
                "constraint must not define a selector, as they deduced for each pod",
            ));
        }
        let repeated = args.default_constraints[..i]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
        if repeated {
            errs.push(FieldError::duplicate(
                &p,
                BadValue::Str(format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable)),
            ));
        }
    }
    errs
}

/// A scoring function shape: non-empty, strictly increasing utilization, ranges.
pub fn validate_function_shape(shape: &[UtilizationShapePoint], path: &str) -> Vec<FieldError> {
    if shape.is_empty() {
        return vec![FieldError::required(path, "at least one point must be specified")];
    }
    let mut errs = Vec::new();
    for i in 1..shape.len() {
        if shape[i - 1].utilization >= shape[i].utilization {
            errs.push(FieldError::invalid(
                format!("{path}[{i}].utilization"),
                BadValue::Int(shape[i].utilization.into()),
                "values must be sorted in increasing order",
            ));
            break;
        }
    }
    for (i, point) in shape.iter().enumerate() {
        if !(0..=100).contains(&point.utilization) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}].utilization"),
                BadValue::Int(point.utilization.into()),
                "not in valid range [0, 100]",
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&point.score) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}].score"),
                BadValue::Int(point.score.into()),
                format!("not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"),
            ));
        }
    }
    errs
}

fn validate_resources(resources: &[ResourceSpec], path: &str) -> Vec<FieldError> {
    resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.weight <= 0 || r.weight > 100)
        .map(|(i, r)| {
            FieldError::invalid(
                format!("{path}[{i}].weight"),
                BadValue::Int(r.weight),
                format!("resource weight of {} not in valid range (0, 100]", r.name),
            )
        })
        .collect()
}

/// `NodeResourcesBalancedAllocationArgs`: unique resource names, every weight exactly 1.
pub fn validate_node_resources_balanced_allocation_args(
    path: &str,
    args: &NodeResourcesBalancedAllocationArgs,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, r) in args.resources.iter().enumerate() {
        if !seen.insert(r.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{path}.resources[{i}].name"), BadValue::Str(r.name.clone())));
        }
        if r.weight != 1 {
            errs.push(FieldError::invalid(
                format!("{path}.resources[{i}].weight"),
                BadValue::Int(r.weight),
                "must be 1",
            ));
        }
    }
    errs
}

/// `NodeResourcesFitArgs` (upstream runs this only when the plugin is constructed).
pub fn validate_node_resources_fit_args(path: &str, args: &NodeResourcesFitArgs) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, res) in args.ignored_resources.iter().enumerate() {
        errs.extend(validate_label_name(res, &format!("{path}.ignoredResources[{i}]")));
    }
    for (i, group) in args.ignored_resource_groups.iter().enumerate() {
        let p = format!("{path}.ignoredResourceGroups[{i}]");
        if group.contains('/') {
            errs.push(FieldError::invalid(&p, BadValue::Str(group.clone()), "resource group name can't contain '/'"));
        }
        errs.extend(validate_label_name(group, &p));
    }
    let strategy_path = format!("{path}.scoringStrategy");
    match &args.scoring_strategy {
        Some(s) => {
            const TYPES: [&str; 3] = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"];
            if !TYPES.contains(&s.type_.as_str()) {
                errs.push(FieldError::not_supported(
                    format!("{strategy_path}.type"),
                    BadValue::json_str(&s.type_),
                    &TYPES,
                ));
            }
            errs.extend(validate_resources(&s.resources, &format!("{strategy_path}.resources")));
            let rtcr_path = format!("{strategy_path}.requestedToCapacityRatio");
            if s.type_ == "RequestedToCapacityRatio" {
                match &s.requested_to_capacity_ratio {
                    None => errs.push(FieldError::required(
                        &rtcr_path,
                        "must be specified when type is RequestedToCapacityRatio",
                    )),
                    Some(r) => errs.extend(validate_function_shape(&r.shape, &format!("{rtcr_path}.shape"))),
                }
            } else if s.requested_to_capacity_ratio.is_some() {
                errs.push(FieldError::forbidden(&rtcr_path, "must be nil when type is not RequestedToCapacityRatio"));
            }
        }
        None => errs.push(FieldError::required(&strategy_path, "ScoringStrategy field is required")),
    }
    errs
}

/// `VolumeBindingArgs`: non-negative timeout; `shape` only with StorageCapacityScoring.
pub fn validate_volume_binding_args(
    path: &str,
    args: &VolumeBindingArgs,
    features: &SchedulerFeatures,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let timeout = args.bind_timeout_seconds.unwrap_or(0);
    if timeout < 0 {
        errs.push(FieldError::invalid(
            format!("{path}.bindTimeoutSeconds"),
            BadValue::Int(timeout),
            "invalid BindTimeoutSeconds, should not be a negative value",
        ));
    }
    let shape_path = format!("{path}.shape");
    if features.storage_capacity_scoring {
        errs.extend(validate_function_shape(args.shape.as_deref().unwrap_or(&[]), &shape_path));
    } else if let Some(shape) = &args.shape {
        // Rejected rather than ignored so it cannot silently take effect once the gate flips.
        errs.push(FieldError::invalid(
            &shape_path,
            BadValue::Json(internal_shape_json(shape)),
            "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring",
        ));
    }
    errs
}

/// `DynamicResourcesArgs`: timeouts are only accepted when their gates are on.
pub fn validate_dynamic_resources_args(
    path: &str,
    args: &DynamicResourcesArgs,
    features: &SchedulerFeatures,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let dur = |d: Duration| BadValue::Json(json_quote(&d.to_string()));
    if features.dra_scheduler_filter_timeout {
        if let Some(d) = args.filter_timeout.filter(|d| d.is_negative()) {
            errs.push(FieldError::invalid(format!("{path}.filterTimeout"), dur(d), "must be zero or positive"));
        }
    } else if args.filter_timeout.is_some() {
        errs.push(FieldError::forbidden(
            format!("{path}.filterTimeout"),
            "DRASchedulingFilterTimeout feature gate is disabled",
        ));
    }
    if features.dra_device_binding_conditions && features.dra_resource_claim_device_status {
        if let Some(d) = args.binding_timeout.filter(|d| *d < Duration::from_secs(1)) {
            errs.push(FieldError::invalid(format!("{path}.bindingTimeout"), dur(d), "must be at least 1 second"));
        }
    } else if args.binding_timeout.is_some() {
        errs.push(FieldError::forbidden(
            format!("{path}.bindingTimeout"),
            "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled",
        ));
    }
    if let Some(s) = args.device_selection.as_deref().filter(|s| DeviceSelection::parse(s).is_none()) {
        let field = format!("{path}.deviceSelection");
        errs.push(FieldError::not_supported(field, BadValue::json_str(s), &DeviceSelection::NAMES));
    }
    errs
}

/// `NodeAffinityArgs`: the added affinity's terms must parse as node selectors.
pub fn validate_node_affinity_args(path: &str, args: &NodeAffinityArgs) -> Vec<FieldError> {
    let Some(affinity) = &args.added_affinity else { return vec![] };
    let mut errs = Vec::new();
    if let Some(ns) = &affinity.required_during_scheduling_ignored_during_execution {
        let p = format!("{path}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
        for (i, term) in ns.node_selector_terms.iter().enumerate() {
            if is_empty_term(term) {
                continue;
            }
            errs.extend(node_selector_term_errors(term, &format!("{p}[{i}]")));
        }
    }
    let p = format!("{path}.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution");
    for (i, term) in affinity.preferred_during_scheduling_ignored_during_execution.iter().enumerate() {
        if term.weight == 0 || is_empty_term(&term.preference) {
            continue;
        }
        // Upstream's path for a preferred term has no `.preference` element.
        errs.extend(node_selector_term_errors(&term.preference, &format!("{p}[{i}]")));
    }
    errs
}

fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.is_empty() && term.match_fields.is_empty()
}

/// Parse errors of one node selector term (component-helpers `newNodeSelectorTerm`).
pub fn node_selector_term_errors(term: &NodeSelectorTerm, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, expr) in term.match_expressions.iter().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        match expr.operator.as_str() {
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {
                errs.extend(requirement_errors(&expr.key, &expr.operator, &expr.values, &p))
            }
            op => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                BadValue::json_str(op),
                &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
            )),
        }
    }
    for (i, expr) in term.match_fields.iter().enumerate() {
        let p = format!("{path}.matchFields[{i}]");
        match expr.operator.as_str() {
            "In" | "NotIn" => {
                if expr.values.len() != 1 {
                    errs.push(FieldError::invalid(
                        format!("{p}.values"),
                        json_string_list(&expr.values),
                        "must have one element",
                    ));
                }
            }
            op => {
                errs.push(FieldError::not_supported(format!("{p}.operator"), BadValue::json_str(op), &["In", "NotIn"]))
            }
        }
    }
    errs
}

/// apimachinery `labels.NewRequirement` checks for a node-selector operator.
fn requirement_errors(key: &str, op: &str, values: &[String], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let key_errs = is_qualified_name(key);
    if !key_errs.is_empty() {
        errs.push(FieldError::invalid(format!("{path}.key"), BadValue::Str(key.into()), key_errs.join("; ")));
    }
    let values_path = format!("{path}.values");
    match op {
        "In" | "NotIn" if values.is_empty() => errs.push(FieldError::invalid(
            &values_path,
            json_string_list(values),
            "for 'in', 'notin' operators, values set can't be empty",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::invalid(
            &values_path,
            json_string_list(values),
            "values set must be empty for exists and does not exist",
        )),
        "Gt" | "Lt" => {
            if values.len() != 1 {
                errs.push(FieldError::invalid(
                    &values_path,
                    json_string_list(values),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(FieldError::invalid(
                        format!("{values_path}[{i}]"),
                        BadValue::Str(v.clone()),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let value_errs = is_valid_label_value(v);
        if !value_errs.is_empty() {
            errs.push(FieldError::invalid(
                format!("{values_path}[{i}][{key}]"),
                BadValue::Str(v.clone()),
                value_errs.join("; "),
            ));
        }
    }
    errs
}
