//! Arguments of NodeResourcesFit and NodeResourcesBalancedAllocation (`kubescheduler.config.k8s.io/v1`),
//! their defaulting and their validation (upstream `apis/config/v1` defaults and `apis/config/validation`).

use serde::{Deserialize, Serialize};

/// Scoring strategy names accepted by NodeResourcesFit, sorted as upstream lists them in errors.
pub const SUPPORTED_SCORING_STRATEGIES: [&str; 3] = [LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO];
/// Favours nodes with the most free capacity.
pub const LEAST_ALLOCATED: &str = "LeastAllocated";
/// Favours nodes with the least free capacity (bin packing).
pub const MOST_ALLOCATED: &str = "MostAllocated";
/// Scores utilisation through a user-defined piecewise-linear shape.
pub const REQUESTED_TO_CAPACITY_RATIO: &str = "RequestedToCapacityRatio";

/// The highest score a shape point may carry; scores are scaled ×10 onto the node-score range.
pub const MAX_CUSTOM_PRIORITY_SCORE: i32 = 10;

/// A resource taken into account by a scorer, with its weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    /// Resource name (`cpu`, `memory`, an extended resource, ...).
    #[serde(default)]
    pub name: String,
    /// Weight; 0 (unset) is defaulted to 1.
    #[serde(default)]
    pub weight: i64,
}

impl ResourceSpec {
    /// A resource spec.
    pub fn new(name: &str, weight: i64) -> Self {
        ResourceSpec { name: name.to_string(), weight }
    }
}

/// cpu and memory with weight 1: the default resource list of both plugins.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

/// One point of the RequestedToCapacityRatio shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UtilizationShapePoint {
    /// Utilisation in percent, 0–100.
    #[serde(default)]
    pub utilization: i32,
    /// Score at that utilisation, 0–10.
    #[serde(default)]
    pub score: i32,
}

/// Parameters of the RequestedToCapacityRatio strategy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestedToCapacityRatioParam {
    /// The piecewise-linear scoring function.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<UtilizationShapePoint>,
}

/// How NodeResourcesFit scores nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringStrategy {
    /// Strategy name; kept as free text so an unknown value is reported by validation, as upstream does.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Resources to score, with weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceSpec>,
    /// Shape for RequestedToCapacityRatio; must be absent for the other strategies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

/// `NodeResourcesFitArgs`. `Default` is the defaulted upstream value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesFitArgs {
    /// Extended resources the filter does not check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_resources: Vec<String>,
    /// Extended resource groups (the part before '/') the filter does not check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_resource_groups: Vec<String>,
    /// The scoring strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoring_strategy: Option<ScoringStrategy>,
}

impl Default for NodeResourcesFitArgs {
    fn default() -> Self {
        let mut a =
            NodeResourcesFitArgs { ignored_resources: vec![], ignored_resource_groups: vec![], scoring_strategy: None };
        a.set_defaults();
        a
    }
}

impl NodeResourcesFitArgs {
    /// Applies upstream's v1 defaulting: LeastAllocated over cpu/memory when no strategy is given,
    /// the default resources when the list is empty, weight 1 for unset weights. Idempotent.
    pub fn set_defaults(&mut self) {
        let s = self.scoring_strategy.get_or_insert_with(|| ScoringStrategy {
            type_: LEAST_ALLOCATED.to_string(),
            resources: default_resources(),
            requested_to_capacity_ratio: None,
        });
        if s.resources.is_empty() {
            s.resources = default_resources();
        }
        for r in &mut s.resources {
            if r.weight == 0 {
                r.weight = 1;
            }
        }
    }

    /// Upstream's `ValidateNodeResourcesFitArgs`: field errors with `path` as the prefix of every
    /// field ("" for none), in upstream order.
    pub fn validate(&self, path: &str) -> Vec<String> {
        let mut errs = Vec::new();
        for (i, res) in self.ignored_resources.iter().enumerate() {
            let p = format!("{}[{i}]", child(path, "ignoredResources"));
            validate_label_name(res, &p, &mut errs);
        }
        for (i, group) in self.ignored_resource_groups.iter().enumerate() {
            let p = format!("{}[{i}]", child(path, "ignoredResourceGroups"));
            if group.contains('/') {
                errs.push(invalid_str(&p, group, "resource group name can't contain '/'"));
            }
            validate_label_name(group, &p, &mut errs);
        }
        let sp = child(path, "scoringStrategy");
        let Some(s) = &self.scoring_strategy else {
            errs.push(format!("{sp}: Required value: ScoringStrategy field is required"));
            return errs;
        };
        if !SUPPORTED_SCORING_STRATEGIES.contains(&s.type_.as_str()) {
            let supported: Vec<String> = SUPPORTED_SCORING_STRATEGIES.iter().map(|v| format!("{v:?}")).collect();
            errs.push(format!(
                "{sp}.type: Unsupported value: {:?}: supported values: {}",
                s.type_,
                supported.join(", ")
            ));
        }
        for (i, r) in s.resources.iter().enumerate() {
            if r.weight <= 0 || r.weight > 100 {
                errs.push(format!(
                    "{sp}.resources[{i}].weight: Invalid value: {}: resource weight of {} not in valid range (0, 100]",
                    r.weight, r.name
                ));
            }
        }
        let rp = format!("{sp}.requestedToCapacityRatio");
        match (&s.requested_to_capacity_ratio, s.type_ == REQUESTED_TO_CAPACITY_RATIO) {
            (None, true) => {
                errs.push(format!("{rp}: Required value: must be specified when type is {REQUESTED_TO_CAPACITY_RATIO}"))
            }
            (Some(r), true) => validate_function_shape(&r.shape, &format!("{rp}.shape"), &mut errs),
            (Some(_), false) => {
                errs.push(format!("{rp}: Forbidden: must be nil when type is not {REQUESTED_TO_CAPACITY_RATIO}"))
            }
            (None, false) => {}
        }
        errs
    }
}

/// `NodeResourcesBalancedAllocationArgs`. `Default` is the defaulted upstream value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesBalancedAllocationArgs {
    /// Resources to balance; every weight must be 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceSpec>,
}

impl Default for NodeResourcesBalancedAllocationArgs {
    fn default() -> Self {
        NodeResourcesBalancedAllocationArgs { resources: default_resources() }
    }
}

impl NodeResourcesBalancedAllocationArgs {
    /// Upstream's v1 defaulting: cpu/memory when empty, weight 1 for unset weights. Idempotent.
    pub fn set_defaults(&mut self) {
        if self.resources.is_empty() {
            self.resources = default_resources();
            return;
        }
        for r in &mut self.resources {
            if r.weight == 0 {
                r.weight = 1;
            }
        }
    }

    /// Upstream's `ValidateNodeResourcesBalancedAllocationArgs`, prefixed with `path` ("" for none).
    pub fn validate(&self, path: &str) -> Vec<String> {
        let mut errs = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, r) in self.resources.iter().enumerate() {
            let p = format!("{}[{i}]", child(path, "resources"));
            if !seen.insert(r.name.as_str()) {
                errs.push(format!("{p}.name: Duplicate value: {:?}", r.name));
            }
            if r.weight != 1 {
                errs.push(format!("{p}.weight: Invalid value: {}: must be 1", r.weight));
            }
        }
        errs
    }
}

/// Upstream's aggregate error text; `None` when there is no error.
pub fn aggregate(errs: &[String]) -> Option<String> {
    (!errs.is_empty()).then(|| ksched_framework::gofmt::aggregate(errs))
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn invalid_str(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
}

fn validate_function_shape(shape: &[UtilizationShapePoint], path: &str, errs: &mut Vec<String>) {
    if shape.is_empty() {
        errs.push(format!("{path}: Required value: at least one point must be specified"));
        return;
    }
    // Only the first ordering violation is reported, as upstream does.
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errs.push(format!(
            "{path}[{i}].utilization: Invalid value: {}: values must be sorted in increasing order",
            shape[i].utilization
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            errs.push(format!(
                "{path}[{i}].utilization: Invalid value: {}: not in valid range [0, 100]",
                p.utilization
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            errs.push(format!(
                "{path}[{i}].score: Invalid value: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                p.score
            ));
        }
    }
}

/// metav1 `ValidateLabelName`: one `Invalid value` per problem.
fn validate_label_name(value: &str, path: &str, errs: &mut Vec<String>) {
    for m in ksched_framework::validation::is_qualified_name(value) {
        errs.push(invalid_str(path, value, &m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fit(v: serde_json::Value) -> NodeResourcesFitArgs {
        let mut a: NodeResourcesFitArgs = serde_json::from_value(v).unwrap();
        a.set_defaults();
        a
    }

    #[test]
    fn fit_defaults() {
        let cases = [
            ("absent strategy", json!({}), LEAST_ALLOCATED, default_resources()),
            (
                "empty resources get cpu/memory",
                json!({"scoringStrategy": {"type": "MostAllocated"}}),
                MOST_ALLOCATED,
                default_resources(),
            ),
            (
                "zero weight becomes 1",
                json!({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}, {"name": "memory", "weight": 3}]}}),
                MOST_ALLOCATED,
                vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 3)],
            ),
        ];
        for (name, input, ty, res) in cases {
            let a = fit(input);
            let s = a.scoring_strategy.as_ref().unwrap();
            assert_eq!(s.type_, ty, "{name}");
            assert_eq!(s.resources, res, "{name}");
            assert!(a.validate("").is_empty(), "{name}");
        }
        assert_eq!(NodeResourcesFitArgs::default(), fit(json!({})));
        assert_eq!(
            serde_json::to_value(NodeResourcesFitArgs::default()).unwrap(),
            json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}})
        );
        assert!(serde_json::from_value::<NodeResourcesFitArgs>(json!({"bogus": 1})).is_err());
    }

    #[test]
    fn fit_validation() {
        let name_regex = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let cases: Vec<(&str, serde_json::Value, Vec<String>)> = vec![
            ("valid ignored resources", json!({"ignoredResources": ["example.com/foo", "foo"], "ignoredResourceGroups": ["example.com"]}), vec![]),
            (
                "invalid ignored resource",
                json!({"ignoredResources": ["-foo"]}),
                vec![format!("ignoredResources[0]: Invalid value: \"-foo\": {name_regex}")],
            ),
            (
                "ignored resource with bad prefix",
                json!({"ignoredResources": ["Example.com/foo"]}),
                vec!["ignoredResources[0]: Invalid value: \"Example.com/foo\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string()],
            ),
            (
                "ignored group with slash",
                json!({"ignoredResourceGroups": ["example.com/aa"]}),
                vec!["ignoredResourceGroups[0]: Invalid value: \"example.com/aa\": resource group name can't contain '/'".to_string()],
            ),
            (
                "ignored group with two slashes",
                json!({"ignoredResourceGroups": ["a/b/c"]}),
                vec![
                    "ignoredResourceGroups[0]: Invalid value: \"a/b/c\": resource group name can't contain '/'".to_string(),
                    format!("ignoredResourceGroups[0]: Invalid value: \"a/b/c\": a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')", &name_regex["name part ".len()..]),
                ],
            ),
            (
                "unknown strategy",
                json!({"scoringStrategy": {"type": "Invalid"}}),
                vec!["scoringStrategy.type: Unsupported value: \"Invalid\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"".to_string()],
            ),
            (
                "strategy without type",
                json!({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}]}}),
                vec!["scoringStrategy.type: Unsupported value: \"\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"".to_string()],
            ),
            (
                "weight out of range",
                json!({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}, {"name": "memory", "weight": -1}]}}),
                vec![
                    "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]".to_string(),
                    "scoringStrategy.resources[1].weight: Invalid value: -1: resource weight of memory not in valid range (0, 100]".to_string(),
                ],
            ),
            (
                "rtcr without shape param",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio"}}),
                vec!["scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio".to_string()],
            ),
            (
                "shape forbidden for other types",
                json!({"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]}}}),
                vec!["scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio".to_string()],
            ),
            (
                "empty shape",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {}}}),
                vec!["scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified".to_string()],
            ),
            (
                "shape unsorted and out of range",
                json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
                    {"utilization": 10, "score": 11}, {"utilization": 10, "score": 1}, {"utilization": 5, "score": 1}, {"utilization": 101, "score": -1}]}}}),
                vec![
                    "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 10: values must be sorted in increasing order".to_string(),
                    "scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: not in valid range [0, 10]".to_string(),
                    "scoringStrategy.requestedToCapacityRatio.shape[3].utilization: Invalid value: 101: not in valid range [0, 100]".to_string(),
                    "scoringStrategy.requestedToCapacityRatio.shape[3].score: Invalid value: -1: not in valid range [0, 10]".to_string(),
                ],
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(fit(input).validate(""), want, "{name}");
        }
        let a = NodeResourcesFitArgs { scoring_strategy: None, ..Default::default() };
        assert_eq!(a.validate("args"), vec!["args.scoringStrategy: Required value: ScoringStrategy field is required"]);
    }

    #[test]
    fn balanced_allocation_defaults_and_validation() {
        let cases: Vec<(&str, serde_json::Value, Vec<ResourceSpec>, Vec<&str>)> = vec![
            ("defaults", json!({}), default_resources(), vec![]),
            (
                "zero weight defaults to 1",
                json!({"resources": [{"name": "cpu"}, {"name": "example.com/gpu", "weight": 0}]}),
                vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("example.com/gpu", 1)],
                vec![],
            ),
            (
                "weight must be 1 and names unique",
                json!({"resources": [{"name": "cpu", "weight": 2}, {"name": "cpu", "weight": 1}]}),
                vec![ResourceSpec::new("cpu", 2), ResourceSpec::new("cpu", 1)],
                vec!["resources[0].weight: Invalid value: 2: must be 1", "resources[1].name: Duplicate value: \"cpu\""],
            ),
        ];
        for (name, input, want_res, want_errs) in cases {
            let mut a: NodeResourcesBalancedAllocationArgs = serde_json::from_value(input).unwrap();
            a.set_defaults();
            assert_eq!(a.resources, want_res, "{name}");
            assert_eq!(a.validate(""), want_errs, "{name}");
        }
    }

    #[test]
    fn aggregate_formats_like_upstream() {
        assert_eq!(aggregate(&[]), None);
        assert_eq!(aggregate(&["a".into()]).as_deref(), Some("a"));
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]).as_deref(), Some("[a, b]"));
    }
}
