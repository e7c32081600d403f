//! `PodTopologySpreadArgs` (kubescheduler.config.k8s.io/v1): decoding, defaulting and upstream's
//! validation with its exact error texts (upstream `apis/config/v1` defaults and `apis/config/validation`).

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use ksched_framework::validation::is_qualified_name;

/// `defaultingType` using the built-in constraints.
pub const SYSTEM_DEFAULTING: &str = "System";
/// `defaultingType` using `defaultConstraints`.
pub const LIST_DEFAULTING: &str = "List";

/// A default constraint: a `v1.TopologySpreadConstraint` decoded strictly (unknown fields are
/// errors, absent ones zero) so validation sees exactly what the user wrote.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultConstraint {
    /// Largest tolerated difference between the most and least loaded domains.
    #[serde(default)]
    pub max_skew: i32,
    /// Node label whose values are the domains.
    #[serde(default)]
    pub topology_key: String,
    /// `DoNotSchedule` or `ScheduleAnyway`.
    #[serde(default)]
    pub when_unsatisfiable: String,
    /// Must be absent: the selector is derived per pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Minimum number of eligible domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    /// `Honor` or `Ignore` (default Honor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<String>,
    /// `Honor` or `Ignore` (default Ignore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<String>,
    /// Pod label keys ANDed into the selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,
}

impl DefaultConstraint {
    /// The same constraint as the core/v1 type pods carry.
    pub fn to_api(&self) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: self.max_skew,
            topology_key: self.topology_key.clone(),
            when_unsatisfiable: self.when_unsatisfiable.clone(),
            label_selector: self.label_selector.clone(),
            min_domains: self.min_domains,
            node_affinity_policy: self.node_affinity_policy.clone(),
            node_taints_policy: self.node_taints_policy.clone(),
            match_label_keys: self.match_label_keys.clone(),
        }
    }
}

/// `PodTopologySpreadArgs`. `Default` is the defaulted upstream value (`System`, no constraints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadArgs {
    /// Constraints for pods without their own (only with `List`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_constraints: Vec<DefaultConstraint>,
    /// `System` or `List`; kept verbatim so validation can report bad values.
    #[serde(default)]
    pub defaulting_type: String,
}

impl Default for PodTopologySpreadArgs {
    fn default() -> Self {
        PodTopologySpreadArgs { default_constraints: Vec::new(), defaulting_type: SYSTEM_DEFAULTING.to_string() }
    }
}

impl PodTopologySpreadArgs {
    /// Upstream's v1 defaulting: an empty `defaultingType` means `System`.
    pub fn set_defaults(&mut self) {
        if self.defaulting_type.is_empty() {
            self.defaulting_type = SYSTEM_DEFAULTING.to_string();
        }
    }
}

/// Upstream's `ValidatePodTopologySpreadArgs`: one string per field error, in upstream order,
/// each prefixed with `path` (the field path of the args object, "" for none).
pub fn validate_args(path: &str, args: &PodTopologySpreadArgs) -> Vec<String> {
    let mut errs = Vec::new();
    let dt_path = child(path, "defaultingType");
    let dt = args.defaulting_type.as_str();
    if dt != SYSTEM_DEFAULTING && dt != LIST_DEFAULTING {
        errs.push(not_supported(&dt_path, dt, &[SYSTEM_DEFAULTING, LIST_DEFAULTING]));
    } else if dt == SYSTEM_DEFAULTING && !args.default_constraints.is_empty() {
        // The value is a named string type upstream, which the field error prints as JSON.
        errs.push(format!("{dt_path}: Invalid value: {}: when .defaultConstraints are not empty", json_quote(dt)));
    }
    let list_path = child(path, "defaultConstraints");
    for (i, c) in args.default_constraints.iter().enumerate() {
        let p = format!("{list_path}[{i}]");
        if c.max_skew <= 0 {
            errs.push(format!("{p}.maxSkew: Invalid value: {}: not in valid range (0, inf)", c.max_skew));
        }
        let key_path = format!("{p}.topologyKey");
        if c.topology_key.is_empty() {
            errs.push(format!("{key_path}: Required value: can not be empty"));
        } else {
            for msg in is_qualified_name(&c.topology_key) {
                errs.push(format!("{key_path}: Invalid value: {}: {msg}", go_quote(&c.topology_key)));
            }
        }
        let when_path = format!("{p}.whenUnsatisfiable");
        if c.when_unsatisfiable.is_empty() {
            errs.push(format!("{when_path}: Required value: can not be empty"));
        } else if c.when_unsatisfiable != super::DO_NOT_SCHEDULE && c.when_unsatisfiable != super::SCHEDULE_ANYWAY {
            errs.push(not_supported(
                &when_path,
                &c.when_unsatisfiable,
                &[super::DO_NOT_SCHEDULE, super::SCHEDULE_ANYWAY],
            ));
        }
        if c.label_selector.is_some() {
            errs.push(format!(
                "{p}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"
            ));
        }
        let repeated = args.default_constraints[..i]
            .iter()
            .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
        if repeated {
            let value = format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable);
            errs.push(format!("{p}: Duplicate value: {}", go_quote(&value)));
        }
    }
    errs
}

pub(crate) use ksched_framework::gofmt::aggregate;

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `Unsupported value` with a named-string value (printed as JSON) and the quoted choices.
fn not_supported(path: &str, value: &str, supported: &[&str]) -> String {
    let choices: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
    format!("{path}: Unsupported value: {}: supported values: {}", json_quote(value), choices.join(", "))
}

use ksched_framework::gofmt::quote as go_quote;

/// Go's `encoding/json` encoding of a string (HTML-safe).
fn json_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
