//! `DefaultPreemptionArgs` (kubescheduler.config.k8s.io/v1): strict decoding, defaults
//! {10 %, 100} and upstream's validation.

use serde::Deserialize;

/// Default `minCandidateNodesPercentage`.
pub const DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE: i32 = 10;
/// Default `minCandidateNodesAbsolute`.
pub const DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE: i32 = 100;

/// The args as written; `null` and absent both mean "default".
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    min_candidate_nodes_percentage: Option<i32>,
    #[serde(default)]
    min_candidate_nodes_absolute: Option<i32>,
}

/// Defaulted args.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultPreemptionArgs {
    /// Minimum candidates as a percentage of the potential nodes.
    pub min_candidate_nodes_percentage: i32,
    /// Minimum absolute number of candidates.
    pub min_candidate_nodes_absolute: i32,
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
            min_candidate_nodes_absolute: DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
        }
    }
}

impl DefaultPreemptionArgs {
    /// Decodes strictly (unknown fields are errors); `apiVersion`/`kind` are accepted.
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, String> {
        let raw: RawArgs = ksched_framework::registry::decode_args(args)?;
        Ok(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: raw
                .min_candidate_nodes_percentage
                .unwrap_or(DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE),
            min_candidate_nodes_absolute: raw
                .min_candidate_nodes_absolute
                .unwrap_or(DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE),
        })
    }
}

/// Validates like upstream's `ValidateDefaultPreemptionArgs`; `path` prefixes the field names
/// ("" for none). Several problems are reported as `[e1, e2]`.
pub fn validate_default_preemption_args(path: &str, args: &DefaultPreemptionArgs) -> Result<(), String> {
    let field = |f: &str| if path.is_empty() { f.to_string() } else { format!("{path}.{f}") };
    let (pct, abs) = (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute);
    let mut errs = Vec::new();
    if !(0..=100).contains(&pct) {
        errs.push(format!(
            "{}: Invalid value: {pct}: not in valid range [0, 100]",
            field("minCandidateNodesPercentage")
        ));
    }
    if abs < 0 {
        errs.push(format!("{}: Invalid value: {abs}: not in valid range [0, inf)", field("minCandidateNodesAbsolute")));
    }
    if pct == 0 && abs == 0 {
        errs.push(format!(
            "{}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute",
            field("minCandidateNodesPercentage")
        ));
        errs.push(format!(
            "{}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage",
            field("minCandidateNodesAbsolute")
        ));
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}
