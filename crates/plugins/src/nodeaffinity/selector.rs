//! Node selectors as upstream's component-helpers parse them: node selector terms with label
//! requirements (validated like `labels.NewRequirement`) and `metadata.name` field requirements,
//! parse errors reported with upstream's field paths and wording.
//!
//! Parsing happens once per pod (or once per plugin for `addedAffinity`); matching does not
//! allocate.

use k8s_openapi::api::core::v1::PreferredSchedulingTerm;
use k8s_openapi::api::core::v1::{NodeSelector as ApiNodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use ksched_framework::labels::SelectableNode;
use ksched_framework::pod::Pod;
use ksched_framework::validation::{is_qualified_name, is_valid_label_value};

const LABEL_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const FIELD_OPERATORS: &[&str] = &["In", "NotIn"];

/// A field path rendered like upstream's `field.Path` (`a.b[0].c`, `[0].c` without a root).
#[derive(Debug, Clone, Default)]
pub struct FieldPath(String);

impl FieldPath {
    /// A path starting at `root` ("" for none).
    pub fn new(root: &str) -> Self {
        FieldPath(root.to_string())
    }

    /// `path.name`.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            FieldPath(name.to_string())
        } else {
            FieldPath(format!("{}.{name}", self.0))
        }
    }

    /// `path[i]`.
    pub fn index(&self, i: usize) -> Self {
        FieldPath(format!("{}[{i}]", self.0))
    }

    /// `path[key]`.
    pub fn key(&self, k: &str) -> Self {
        FieldPath(format!("{}[{k}]", self.0))
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `<path>: Invalid value: <value>: <detail>` with a string value quoted.
fn invalid_str(path: &FieldPath, value: &str, detail: &str) -> String {
    with_detail(format!("{path}: Invalid value: {value:?}"), detail)
}

/// `<path>: Invalid value: <json>: <detail>` for a list of values (`null` when absent).
fn invalid_list(path: &FieldPath, values: Option<&Vec<String>>, detail: &str) -> String {
    let json = serde_json::to_string(&values).unwrap_or_default();
    with_detail(format!("{path}: Invalid value: {json}"), detail)
}

fn not_supported(path: &FieldPath, value: &str, supported: &[&str]) -> String {
    let json = serde_json::to_string(value).unwrap_or_default();
    let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    with_detail(format!("{path}: Unsupported value: {json}"), &format!("supported values: {}", quoted.join(", ")))
}

fn with_detail(mut s: String, detail: &str) -> String {
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(detail);
    }
    s
}

pub use ksched_framework::gofmt::aggregate as aggregate_message;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LabelRequirement {
    key: String,
    op: LabelOp,
}

impl LabelRequirement {
    fn matches(&self, node: &(impl SelectableNode + ?Sized)) -> bool {
        let value = node.node_label(&self.key);
        match &self.op {
            LabelOp::In(vs) => value.is_some_and(|v| vs.iter().any(|x| x == v)),
            LabelOp::NotIn(vs) => value.is_none_or(|v| !vs.iter().any(|x| x == v)),
            LabelOp::Exists => value.is_some(),
            LabelOp::DoesNotExist => value.is_none(),
            LabelOp::Gt(bound) => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *bound),
            LabelOp::Lt(bound) => value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *bound),
        }
    }

    /// Upstream's `nodeSelectorRequirementsAsSelector` + `labels.NewRequirement` for one expression.
    fn parse(r: &NodeSelectorRequirement, path: &FieldPath, errs: &mut Vec<String>) -> Option<Self> {
        if !LABEL_OPERATORS.contains(&r.operator.as_str()) {
            errs.push(not_supported(&path.child("operator"), &r.operator, LABEL_OPERATORS));
            return None;
        }
        let before = errs.len();
        let key_errs = is_qualified_name(&r.key);
        if !key_errs.is_empty() {
            errs.push(invalid_str(&path.child("key"), &r.key, &key_errs.join("; ")));
        }
        let values = r.values.as_ref();
        let vals: &[String] = values.map(Vec::as_slice).unwrap_or_default();
        let values_path = path.child("values");
        let mut bound = None;
        match r.operator.as_str() {
            "In" | "NotIn" if vals.is_empty() => {
                errs.push(invalid_list(&values_path, values, "for 'in', 'notin' operators, values set can't be empty"))
            }
            "Exists" | "DoesNotExist" if !vals.is_empty() => {
                errs.push(invalid_list(&values_path, values, "values set must be empty for exists and does not exist"))
            }
            "Gt" | "Lt" => {
                if vals.len() != 1 {
                    errs.push(invalid_list(
                        &values_path,
                        values,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in vals.iter().enumerate() {
                    match v.parse::<i64>() {
                        Ok(n) => bound = Some(n),
                        Err(_) => errs.push(invalid_str(
                            &values_path.index(i),
                            v,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        )),
                    }
                }
            }
            _ => {}
        }
        for (i, v) in vals.iter().enumerate() {
            let value_errs = is_valid_label_value(v);
            if !value_errs.is_empty() {
                errs.push(invalid_str(&values_path.index(i).key(&r.key), v, &value_errs.join("; ")));
            }
        }
        if errs.len() > before {
            return None;
        }
        let op = match r.operator.as_str() {
            "In" => LabelOp::In(vals.to_vec()),
            "NotIn" => LabelOp::NotIn(vals.to_vec()),
            "Exists" => LabelOp::Exists,
            "DoesNotExist" => LabelOp::DoesNotExist,
            "Gt" => LabelOp::Gt(bound?),
            _ => LabelOp::Lt(bound?),
        };
        Some(LabelRequirement { key: r.key.clone(), op })
    }
}

/// A field requirement: `key` equals (or differs from) `value`. Only `metadata.name` is a node
/// field; any other key reads as "".
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    key: String,
    value: String,
    equal: bool,
}

impl FieldRequirement {
    fn matches(&self, node_name: &str) -> bool {
        let actual = if self.key == "metadata.name" { node_name } else { "" };
        (actual == self.value) == self.equal
    }

    fn parse(r: &NodeSelectorRequirement, path: &FieldPath, errs: &mut Vec<String>) -> Option<Self> {
        let equal = match r.operator.as_str() {
            "In" => true,
            "NotIn" => false,
            op => {
                errs.push(not_supported(&path.child("operator"), op, FIELD_OPERATORS));
                return None;
            }
        };
        match r.values.as_deref() {
            Some([v]) => Some(FieldRequirement { key: r.key.clone(), value: v.clone(), equal }),
            _ => {
                errs.push(invalid_list(&path.child("values"), r.values.as_ref(), "must have one element"));
                None
            }
        }
    }
}

/// One parsed node selector term: label requirements ANDed with field requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    /// `None` when the term has no matchExpressions.
    labels: Option<Vec<LabelRequirement>>,
    /// `None` when the term has no matchFields.
    fields: Option<Vec<FieldRequirement>>,
    errors: Vec<String>,
}

fn is_empty_term(t: &NodeSelectorTerm) -> bool {
    t.match_expressions.as_ref().is_none_or(Vec::is_empty) && t.match_fields.as_ref().is_none_or(Vec::is_empty)
}

impl Term {
    fn parse(t: &NodeSelectorTerm, path: &FieldPath) -> Self {
        let mut errors = Vec::new();
        let mut labels = None;
        if let Some(exprs) = t.match_expressions.as_ref().filter(|e| !e.is_empty()) {
            let p = path.child("matchExpressions");
            let before = errors.len();
            let reqs: Vec<_> = exprs
                .iter()
                .enumerate()
                .filter_map(|(i, r)| LabelRequirement::parse(r, &p.index(i), &mut errors))
                .collect();
            if errors.len() == before {
                labels = Some(reqs);
            }
        }
        let mut fields = None;
        if let Some(exprs) = t.match_fields.as_ref().filter(|e| !e.is_empty()) {
            let p = path.child("matchFields");
            let before = errors.len();
            let reqs: Vec<_> = exprs
                .iter()
                .enumerate()
                .filter_map(|(i, r)| FieldRequirement::parse(r, &p.index(i), &mut errors))
                .collect();
            if errors.len() == before {
                fields = Some(reqs);
            }
        }
        Term { labels, fields, errors }
    }

    /// Matches the node; a term with parse errors never matches and reports them. Field
    /// requirements are not checked against a node without a name.
    fn matches(&self, node: &(impl SelectableNode + ?Sized)) -> Result<bool, &[String]> {
        if !self.errors.is_empty() {
            return Err(&self.errors);
        }
        if self.labels.as_ref().is_some_and(|reqs| !reqs.iter().all(|r| r.matches(node))) {
            return Ok(false);
        }
        // The name lives in the node object, a cold pointer chase from a NodeInfo: read it only
        // for terms with matchFields.
        if let Some(reqs) = &self.fields {
            let node_name = node.node_name();
            if !node_name.is_empty() && !reqs.iter().all(|r| r.matches(node_name)) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// A node selector that keeps invalid terms and reports their parse errors only when no term
/// matches (upstream's `LazyErrorNodeSelector`). Empty terms are dropped: they match nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LazyErrorNodeSelector {
    terms: Vec<Term>,
}

impl LazyErrorNodeSelector {
    /// Parses the selector; errors are paths under `path.nodeSelectorTerms[i]`.
    pub fn new(sel: &ApiNodeSelector, path: &FieldPath) -> Self {
        let p = path.child("nodeSelectorTerms");
        let terms = sel
            .node_selector_terms
            .iter()
            .enumerate()
            .filter(|(_, t)| !is_empty_term(t))
            .map(|(i, t)| Term::parse(t, &p.index(i)))
            .collect();
        LazyErrorNodeSelector { terms }
    }

    /// Every parse error, in term order.
    pub fn errors(&self) -> Vec<String> {
        self.terms.iter().flat_map(|t| t.errors.iter().cloned()).collect()
    }

    /// True when any term matches; when none does, the parse errors met (aggregated) if any.
    pub fn matches(&self, node: &(impl SelectableNode + ?Sized)) -> Result<bool, String> {
        let mut failed: Option<Vec<&String>> = None;
        for t in &self.terms {
            match t.matches(node) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(errs) => failed.get_or_insert_with(Vec::new).extend(errs),
            }
        }
        match failed {
            None => Ok(false),
            Some(errs) => Err(aggregate_message(&errs.into_iter().cloned().collect::<Vec<_>>())),
        }
    }
}

/// A node selector that had no parse errors (upstream's `NodeSelector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelector(LazyErrorNodeSelector);

impl NodeSelector {
    /// Parses the selector, failing with the aggregated parse errors.
    pub fn new(sel: &ApiNodeSelector, path: &FieldPath) -> Result<Self, String> {
        Self::parse(sel, path).map_err(|e| aggregate_message(&e))
    }

    /// Parses the selector, failing with every parse error.
    pub fn parse(sel: &ApiNodeSelector, path: &FieldPath) -> Result<Self, Vec<String>> {
        let lazy = LazyErrorNodeSelector::new(sel, path);
        let errs = lazy.errors();
        if errs.is_empty() {
            Ok(NodeSelector(lazy))
        } else {
            Err(errs)
        }
    }

    /// True when any term matches the node.
    pub fn matches(&self, node: &(impl SelectableNode + ?Sized)) -> bool {
        self.0.matches(node).unwrap_or(false)
    }
}

/// Parsed preferred scheduling terms; terms with weight 0 or no requirements are dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreferredSchedulingTerms {
    terms: Vec<(Term, i64)>,
}

impl PreferredSchedulingTerms {
    /// Parses the terms, failing with the aggregated parse errors (paths `path[i]...`).
    pub fn new(terms: &[PreferredSchedulingTerm], path: &FieldPath) -> Result<Self, String> {
        Self::parse(terms, path).map_err(|e| aggregate_message(&e))
    }

    /// Parses the terms, failing with every parse error.
    pub fn parse(terms: &[PreferredSchedulingTerm], path: &FieldPath) -> Result<Self, Vec<String>> {
        let mut errs = Vec::new();
        let mut parsed = Vec::with_capacity(terms.len());
        for (i, t) in terms.iter().enumerate() {
            if t.weight == 0 || is_empty_term(&t.preference) {
                continue;
            }
            let term = Term::parse(&t.preference, &path.index(i));
            if term.errors.is_empty() {
                parsed.push((term, i64::from(t.weight)));
            } else {
                errs.extend(term.errors);
            }
        }
        if errs.is_empty() {
            Ok(PreferredSchedulingTerms { terms: parsed })
        } else {
            Err(errs)
        }
    }

    /// The sum of the weights of the terms the node matches.
    pub fn score(&self, node: &(impl SelectableNode + ?Sized)) -> i64 {
        self.terms.iter().filter(|(t, _)| t.matches(node) == Ok(true)).map(|(_, w)| w).sum()
    }
}

/// A pod's `spec.nodeSelector` and required node affinity, parsed once (upstream's
/// `RequiredNodeAffinity`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequiredNodeAffinity {
    /// Labels the node must carry with these exact values (`None` for an empty nodeSelector).
    node_selector: Option<ksched_framework::pod::SmallMap<String>>,
    /// The required node affinity, if any.
    affinity: Option<LazyErrorNodeSelector>,
}

impl RequiredNodeAffinity {
    /// Parses the pod's node selector and required node affinity.
    pub fn new(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        let node_selector = spec.and_then(|s| s.node_selector.clone()).filter(|s| !s.is_empty());
        let affinity = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|sel| LazyErrorNodeSelector::new(sel, &FieldPath::default()));
        RequiredNodeAffinity { node_selector, affinity }
    }

    /// True when the node satisfies both; parse errors of the affinity are returned only when no
    /// term matched.
    pub fn matches(&self, node: &(impl SelectableNode + ?Sized)) -> Result<bool, String> {
        if let Some(sel) = &self.node_selector {
            if !sel.iter().all(|(k, v)| node.node_label(k) == Some(v.as_str())) {
                return Ok(false);
            }
        }
        match &self.affinity {
            Some(a) => a.matches(node),
            None => Ok(true),
        }
    }

    /// True when the pod has neither a node selector nor required node affinity: every node
    /// matches.
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_none() && self.affinity.is_none()
    }

    /// [`Self::matches`] with parse errors counted as no match, as filters do.
    pub fn matches_ignoring_errors(&self, node: &(impl SelectableNode + ?Sized)) -> bool {
        self.matches(node).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value) -> ksched_framework::node::Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    }

    fn selector(terms: serde_json::Value) -> ApiNodeSelector {
        serde_json::from_value(json!({ "nodeSelectorTerms": terms })).unwrap()
    }

    #[test]
    fn term_parse_errors_have_upstream_paths() {
        let cases = [
            (
                "bad operator",
                json!([{"matchExpressions": [{"key": "k", "operator": "Foo"}]}]),
                r#"nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Foo": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt""#,
            ),
            (
                "In without values",
                json!([{"matchExpressions": [{"key": "k", "operator": "In"}]}]),
                "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                "Exists with values",
                json!([{}, {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]}]),
                r#"nodeSelectorTerms[1].matchExpressions[0].values: Invalid value: ["a"]: values set must be empty for exists and does not exist"#,
            ),
            (
                "Gt not an integer",
                json!([{"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}]),
                r#"nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "x": for 'Gt', 'Lt' operators, the value must be an integer"#,
            ),
            (
                "Lt two values",
                json!([{"matchExpressions": [{"key": "k", "operator": "Lt", "values": ["1", "2"]}]}]),
                r#"nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: ["1","2"]: for 'Gt', 'Lt' operators, exactly one value is required"#,
            ),
            (
                "invalid value",
                json!([{"matchExpressions": [{"key": "k", "operator": "In", "values": ["a b"]}]}]),
                r#"nodeSelectorTerms[0].matchExpressions[0].values[0][k]: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#,
            ),
            (
                "field with two values",
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]),
                r#"nodeSelectorTerms[0].matchFields[0].values: Invalid value: ["a","b"]: must have one element"#,
            ),
            (
                "field with Exists",
                json!([{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}]),
                r#"nodeSelectorTerms[0].matchFields[0].operator: Unsupported value: "Exists": supported values: "In", "NotIn""#,
            ),
        ];
        for (name, terms, want) in cases {
            assert_eq!(NodeSelector::new(&selector(terms), &FieldPath::default()).unwrap_err(), want, "{name}");
        }
        let two = selector(json!([
            {"matchExpressions": [{"key": "k", "operator": "Foo"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In"}]}
        ]));
        let err = NodeSelector::new(&two, &FieldPath::new("addedAffinity")).unwrap_err();
        assert!(err.starts_with("[addedAffinity.nodeSelectorTerms[0].matchExpressions[0].operator: "), "{err}");
        assert!(
            err.ends_with(
                "addedAffinity.nodeSelectorTerms[1].matchFields[0].values: Invalid value: null: must have one element]"
            ),
            "{err}"
        );
    }

    #[test]
    fn lazy_selector_matching() {
        let sel = LazyErrorNodeSelector::new(
            &selector(json!([
                {"matchExpressions": [{"key": "k", "operator": "In", "values": ["bad value!"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]},
                {"matchExpressions": []}
            ])),
            &FieldPath::default(),
        );
        assert_eq!(sel.matches(&node("n1", json!({"zone": "a"}))), Ok(true));
        assert!(sel.matches(&node("n2", json!({"zone": "a"}))).is_err(), "no match surfaces the parse error");
        assert!(sel.matches(&node("", json!({"zone": "a"}))).unwrap(), "fields are not checked on nameless nodes");
    }

    #[test]
    fn requirement_operators() {
        let req = |op: &str, values: serde_json::Value| {
            let sel = selector(json!([{"matchExpressions": [{"key": "k", "operator": op, "values": values}]}]));
            NodeSelector::new(&sel, &FieldPath::default()).unwrap()
        };
        let cases = [
            ("In hit", req("In", json!(["a", "b"])), json!({"k": "b"}), true),
            ("In missing key", req("In", json!(["a"])), json!({}), false),
            ("NotIn hit", req("NotIn", json!(["a"])), json!({"k": "a"}), false),
            ("NotIn missing key", req("NotIn", json!(["a"])), json!({}), true),
            ("Exists", req("Exists", json!(null)), json!({"k": ""}), true),
            ("DoesNotExist", req("DoesNotExist", json!(null)), json!({"k": ""}), false),
            ("Gt leading zeros", req("Gt", json!(["0204"])), json!({"k": "0206"}), true),
            ("Gt equal", req("Gt", json!(["5"])), json!({"k": "5"}), false),
            ("Gt non-integer label", req("Gt", json!(["5"])), json!({"k": "x"}), false),
            ("Lt", req("Lt", json!(["5"])), json!({"k": "-3"}), true),
            ("Lt missing key", req("Lt", json!(["5"])), json!({}), false),
        ];
        for (name, sel, labels, want) in cases {
            assert_eq!(sel.matches(&node("n", labels)), want, "{name}");
        }
    }
}
