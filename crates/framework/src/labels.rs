//! Label selectors (metav1.LabelSelector) and node selectors (v1.NodeSelector), parsed once and
//! matched many times.

use std::collections::BTreeMap;

use crate::node::Node;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Labels as stored on objects.
pub type Labels = BTreeMap<String, String>;

/// One parsed selector requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// key in values
    In(String, Vec<String>),
    /// key not in values (also true when the key is absent)
    NotIn(String, Vec<String>),
    /// key present
    Exists(String),
    /// key absent
    DoesNotExist(String),
    /// key present and its integer value greater than the bound
    Gt(String, i64),
    /// key present and its integer value less than the bound
    Lt(String, i64),
}

impl Requirement {
    /// True when the labels satisfy the requirement.
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        match self {
            Requirement::In(k, vs) => labels.label(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => labels.label(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Requirement::Exists(k) => labels.label(k).is_some(),
            Requirement::DoesNotExist(k) => labels.label(k).is_none(),
            Requirement::Gt(k, b) => labels.label(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *b),
            Requirement::Lt(k, b) => labels.label(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *b),
        }
    }

    /// The label key the requirement is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::Gt(k, _)
            | Requirement::Lt(k, _) => k,
        }
    }
}

/// A parsed label selector. `Selector::nothing()` matches no object; an empty selector matches all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    /// A selector matching every object.
    pub fn everything() -> Self {
        Selector { requirements: Vec::new(), nothing: false }
    }

    /// A selector matching no object (what a nil LabelSelector means).
    pub fn nothing() -> Self {
        Selector { requirements: Vec::new(), nothing: true }
    }

    /// A selector requiring every given label to equal its value.
    pub fn from_match_labels(labels: &Labels) -> Self {
        Selector {
            requirements: labels.iter().map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()])).collect(),
            nothing: false,
        }
    }

    /// Parses a LabelSelector; `None` means "nothing" as upstream's `LabelSelectorAsSelector(nil)`.
    pub fn from_label_selector(sel: Option<&LabelSelector>) -> Result<Self, String> {
        let Some(sel) = sel else { return Ok(Self::nothing()) };
        let mut s = sel.match_labels.as_ref().map(Self::from_match_labels).unwrap_or_else(Self::everything);
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let req = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(
                        "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty".to_string()
                    )
                }
                "In" => Requirement::In(e.key.clone(), values),
                "NotIn" => Requirement::NotIn(e.key.clone(), values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err("values: Invalid value: values set must be empty for exists and does not exist".into())
                }
                "Exists" => Requirement::Exists(e.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
                op => return Err(format!("{op:?} is not a valid label selector operator")),
            };
            s.requirements.push(req);
        }
        Ok(s)
    }

    /// Adds a requirement (used to fold matchLabelKeys into a selector).
    pub fn push(&mut self, r: Requirement) {
        self.requirements.push(r);
    }

    /// True when the labels (an object's map or a packed set) satisfy every requirement.
    pub fn matches<L: LabelLookup + ?Sized>(&self, labels: &L) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True when the selector matches nothing.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// True when the selector has no requirements and matches everything.
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }
}

fn parse_node_requirement(r: &NodeSelectorRequirement) -> Result<Requirement, String> {
    let values = r.values.clone().unwrap_or_default();
    Ok(match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => return Err(format!("{}: values set can't be empty", r.key)),
        "In" => Requirement::In(r.key.clone(), values),
        "NotIn" => Requirement::NotIn(r.key.clone(), values),
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            return Err(format!("{}: values set must be empty for exists and does not exist", r.key))
        }
        "Exists" => Requirement::Exists(r.key.clone()),
        "DoesNotExist" => Requirement::DoesNotExist(r.key.clone()),
        "Gt" | "Lt" => {
            let [v] = values.as_slice() else {
                return Err(format!("{}: for 'Gt', 'Lt' operators, exactly one value is required", r.key));
            };
            let n: i64 =
                v.parse().map_err(|_| format!("{}: for 'Gt', 'Lt' operators, the value must be an integer", r.key))?;
            if r.operator == "Gt" {
                Requirement::Gt(r.key.clone(), n)
            } else {
                Requirement::Lt(r.key.clone(), n)
            }
        }
        op => return Err(format!("{op:?} is not a valid node selector operator")),
    })
}

/// A field requirement on `metadata.name`, the only node field selectors may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRequirement {
    /// true for In, false for NotIn
    pub is_in: bool,
    /// the node name
    pub name: String,
}

/// One parsed NodeSelectorTerm: label requirements ANDed with field requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorTermMatcher {
    labels: Vec<Requirement>,
    fields: Vec<NameRequirement>,
}

impl NodeSelectorTermMatcher {
    /// Parses a term. A term with neither expressions nor fields is `None`: it matches nothing.
    pub fn parse(t: &NodeSelectorTerm) -> Result<Option<Self>, String> {
        let exprs = t.match_expressions.as_deref().unwrap_or_default();
        let fields = t.match_fields.as_deref().unwrap_or_default();
        if exprs.is_empty() && fields.is_empty() {
            return Ok(None);
        }
        let labels = exprs.iter().map(parse_node_requirement).collect::<Result<Vec<_>, _>>()?;
        let mut fs = Vec::with_capacity(fields.len());
        for f in fields {
            if f.key != "metadata.name" {
                return Err(format!("{}: not a valid field selector key", f.key));
            }
            let vals = f.values.as_deref().unwrap_or_default();
            let [v] = vals else { return Err("must have one element".into()) };
            let is_in = match f.operator.as_str() {
                "In" => true,
                "NotIn" => false,
                op => return Err(format!("{op:?} is not a valid field selector operator")),
            };
            fs.push(NameRequirement { is_in, name: v.clone() });
        }
        Ok(Some(NodeSelectorTermMatcher { labels, fields: fs }))
    }

    /// True when the node's labels and name satisfy the term.
    pub fn matches<L: LabelLookup + ?Sized>(&self, node_name: &str, labels: &L) -> bool {
        self.labels.iter().all(|r| r.matches(labels)) && self.fields.iter().all(|f| (f.name == node_name) == f.is_in)
    }

    /// The names this term restricts nodes to through `metadata.name In`, if any.
    pub fn required_names(&self) -> Option<Vec<&str>> {
        let names: Vec<&str> = self.fields.iter().filter(|f| f.is_in).map(|f| f.name.as_str()).collect();
        if names.is_empty() {
            None
        } else {
            Some(names)
        }
    }
}

/// A parsed NodeSelector: terms are ORed. Terms that fail to parse never match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelectorMatcher {
    /// the valid, non-empty terms
    pub terms: Vec<NodeSelectorTermMatcher>,
    /// parse errors of invalid terms
    pub errors: Vec<String>,
}

impl NodeSelectorMatcher {
    /// Parses every term of a NodeSelector.
    pub fn new(sel: &NodeSelector) -> Self {
        let mut m = NodeSelectorMatcher::default();
        for t in &sel.node_selector_terms {
            match NodeSelectorTermMatcher::parse(t) {
                Ok(Some(t)) => m.terms.push(t),
                Ok(None) => {}
                Err(e) => m.errors.push(e),
            }
        }
        m
    }

    /// True when any term matches the node.
    pub fn matches(&self, node: &Node) -> bool {
        let labels = node_labels(node);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.terms.iter().any(|t| t.matches(name, labels))
    }
}

static EMPTY_LABELS: Labels = BTreeMap::new();

/// The labels of a node (an empty map when unset).
pub fn node_labels(node: &Node) -> &PackedLabels {
    &node.metadata.labels
}

/// The labels of any object's metadata (an empty map when unset).
pub fn labels_of(labels: &Option<Labels>) -> &Labels {
    labels.as_ref().unwrap_or(&EMPTY_LABELS)
}

/// Read access to a label set, so matchers work on an object's map and on [`PackedLabels`] alike.
pub trait LabelLookup {
    /// The value of label `key`, if present.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelLookup for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// What node selectors look at: a node's name and labels. Implemented by the node object and by
/// [`crate::node_info::NodeInfo`] (whose packed labels are the fast path in filter loops).
pub trait SelectableNode {
    /// `metadata.name` ("" when unknown).
    fn node_name(&self) -> &str;
    /// The value of one node label.
    fn node_label(&self, key: &str) -> Option<&str>;
}

impl SelectableNode for Node {
    fn node_name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
    fn node_label(&self, key: &str) -> Option<&str> {
        node_labels(self).label(key)
    }
}

impl SelectableNode for crate::node_info::NodeInfo {
    fn node_name(&self) -> &str {
        self.name()
    }
    fn node_label(&self, key: &str) -> Option<&str> {
        self.label(key)
    }
}

impl<T: SelectableNode + ?Sized> SelectableNode for std::sync::Arc<T> {
    fn node_name(&self) -> &str {
        (**self).node_name()
    }
    fn node_label(&self, key: &str) -> Option<&str> {
        (**self).node_label(key)
    }
}

/// A node's labels copied into one string and one span table.
///
/// Filters look labels up on thousands of nodes per cycle; in the object's `BTreeMap` each
/// lookup chases a tree node and then one heap string per key compared, which made label
/// matching the top of SchedulingNodeAffinity's profile. Here keys are compared by length first
/// and the bytes sit next to each other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedLabels {
    /// Every key followed by its value, in key order. Shared: a node's labels are held by its
    /// object and its NodeInfo.
    text: std::sync::Arc<str>,
    /// Per label, where its key ends and where its value ends in `text`; a key starts where the
    /// previous value ended.
    spans: std::sync::Arc<[(u32, u32)]>,
}

impl PackedLabels {
    /// Packs a label map. Label sets are far below 4 GiB, so offsets fit `u32`.
    pub fn new(labels: &Labels) -> Self {
        Self::from_sorted(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())), labels.len())
    }

    /// Packs `len` pairs given in key order without duplicate keys.
    fn from_sorted<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone, len: usize) -> Self {
        let mut text = String::with_capacity(pairs.clone().map(|(k, v)| k.len() + v.len()).sum());
        let mut spans = Vec::with_capacity(len);
        for (k, v) in pairs {
            text.push_str(k);
            let key_end = text.len() as u32;
            text.push_str(v);
            spans.push((key_end, text.len() as u32));
        }
        PackedLabels { text: text.into(), spans: spans.into() }
    }

    /// The value of label `key`, if present (as `BTreeMap::get` on the object's map).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.label(key)
    }

    /// Label `key` with its value, both borrowed from the packed text, if present.
    pub fn get_key_value(&self, key: &str) -> Option<(&str, &str)> {
        let value = self.label(key)?;
        let value_start = value.as_ptr() as usize - self.text.as_ptr() as usize;
        Some((&self.text[value_start - key.len()..value_start], value))
    }

    /// True when label `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.label(key).is_some()
    }

    /// The labels as the API's map.
    pub fn to_map(&self) -> Labels {
        self.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// Starts loading the first lines of the text and spans into cache (no-op off x86_64).
    #[inline]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: SSE is part of the x86_64 baseline and a prefetch never faults.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(self.spans.as_ptr().cast());
                let text = self.text.as_ptr().cast::<i8>();
                _mm_prefetch::<_MM_HINT_T0>(text);
                if self.text.len() > 64 {
                    _mm_prefetch::<_MM_HINT_T0>(text.wrapping_add(64));
                }
            }
        }
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when there are no labels.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The labels as (key, value) pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let mut start = 0usize;
        self.spans.iter().map(move |&(key_end, value_end)| {
            let (k, v) = (&self.text[start..key_end as usize], &self.text[key_end as usize..value_end as usize]);
            start = value_end as usize;
            (k, v)
        })
    }
}

impl From<&Labels> for PackedLabels {
    fn from(labels: &Labels) -> Self {
        PackedLabels::new(labels)
    }
}

impl FromIterator<(String, String)> for PackedLabels {
    /// Packs pairs in any order; of duplicate keys the last wins, as when collecting a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        let mut pairs: Vec<(String, String)> = iter.into_iter().collect();
        // A stable sort keeps duplicates in arrival order, so the last of each run is the winner.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(&str, &str)> = Vec::with_capacity(pairs.len());
        for (k, v) in &pairs {
            match kept.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => kept.push((k, v)),
            }
        }
        PackedLabels::from_sorted(kept.iter().copied(), kept.len())
    }
}

impl serde::Serialize for PackedLabels {
    /// The API's JSON object.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for PackedLabels {
    /// From the API's JSON object (`null` is no labels).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PairsVisitor;
        impl<'de> serde::de::Visitor<'de> for PairsVisitor {
            type Value = PackedLabels;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of label keys to values")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(PackedLabels::default())
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(PackedLabels::default())
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_map(self)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(pairs.into_iter().collect())
            }
        }
        d.deserialize_option(PairsVisitor)
    }
}

impl LabelLookup for PackedLabels {
    fn label(&self, key: &str) -> Option<&str> {
        let mut start = 0usize;
        for &(key_end, value_end) in self.spans.iter() {
            let (key_end, value_end) = (key_end as usize, value_end as usize);
            if key_end - start == key.len() && self.text.as_bytes()[start..key_end] == *key.as_bytes() {
                return Some(&self.text[key_end..value_end]);
            }
            start = value_end;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn packed_labels_read_and_write_the_api_json_like_the_map() {
        // Duplicate keys: the last wins, as serde_json's BTreeMap decoding does.
        let text = r#"{"b": "2", "a": "1", "b": "3", "": "x"}"#;
        let packed: PackedLabels = serde_json::from_str(text).unwrap();
        let map: Labels = serde_json::from_str(text).unwrap();
        assert_eq!(packed.to_map(), map);
        assert_eq!(packed.get("b"), Some("3"));
        assert_eq!(packed.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["", "a", "b"]);
        assert_eq!(serde_json::to_value(&packed).unwrap(), serde_json::to_value(&map).unwrap());
        assert!(serde_json::from_str::<PackedLabels>("null").unwrap().is_empty());
        assert!(serde_json::from_str::<PackedLabels>(r#"{"a": 1}"#).is_err());
        assert_eq!(PackedLabels::from(&map), packed);
    }

    #[test]
    fn selectors_match_packed_labels_as_they_match_the_map() {
        let map = labels(&[("app", "web"), ("tier", "3"), ("env", "")]);
        let packed = PackedLabels::new(&map);
        let sel =
            |v: serde_json::Value| Selector::from_label_selector(Some(&serde_json::from_value(v).unwrap())).unwrap();
        let selectors = [
            sel(json!({"matchLabels": {"app": "web"}})),
            sel(json!({"matchLabels": {"app": "db"}})),
            sel(json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["3", "4"]}]})),
            sel(json!({"matchExpressions": [{"key": "env", "operator": "Exists"}]})),
            sel(json!({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]})),
            sel(json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]})),
            Selector::everything(),
            Selector::nothing(),
        ];
        let answers: Vec<bool> = selectors.iter().map(|s| s.matches(&packed)).collect();
        assert_eq!(answers, selectors.iter().map(|s| s.matches(&map)).collect::<Vec<_>>());
        assert_eq!(answers, [true, false, true, true, true, false, true, false]);
    }

    #[test]
    fn packed_labels_answer_like_the_map() {
        let map = labels(&[("zone", "a"), ("kubernetes.io/hostname", "n1"), ("z", ""), ("", "empty-key")]);
        let packed = PackedLabels::new(&map);
        assert_eq!(packed.len(), 4);
        for (k, v) in &map {
            assert_eq!(packed.label(k), Some(v.as_str()), "{k}");
        }
        for missing in ["zon", "zones", "kubernetes.io/hostnam", "a"] {
            assert_eq!(packed.label(missing), None, "{missing}");
        }
        assert!(packed.iter().map(|(k, v)| (k.to_string(), v.to_string())).eq(map.clone()));
        assert_eq!(PackedLabels::new(&Labels::new()).label(""), None);
    }

    #[test]
    fn label_selector_semantics() {
        let sel: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]
        }))
        .unwrap();
        let s = Selector::from_label_selector(Some(&sel)).unwrap();
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "api")])));
        assert!(!Selector::from_label_selector(None).unwrap().matches(&labels(&[])));
        let empty = Selector::from_label_selector(Some(&LabelSelector::default())).unwrap();
        assert!(empty.matches(&labels(&[("x", "y")])));
    }

    #[test]
    fn node_selector_terms_or_and_fields() {
        let sel: NodeSelector = serde_json::from_value(json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                  {"key": "cores", "operator": "Gt", "values": ["4"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
            {}
        ]}))
        .unwrap();
        let m = NodeSelectorMatcher::new(&sel);
        let node = |name: &str, l: &[(&str, &str)]| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels(l)}})).unwrap()
        };
        assert!(m.matches(&node("n1", &[("zone", "a"), ("cores", "8")])));
        assert!(!m.matches(&node("n1", &[("zone", "a"), ("cores", "4")])));
        assert!(!m.matches(&node("n1", &[("zone", "a"), ("cores", "x")])));
        assert!(m.matches(&node("n9", &[])));
        assert_eq!(m.terms.len(), 2, "the empty term matches nothing and is dropped");
    }

    #[test]
    fn invalid_terms_never_match() {
        let sel: NodeSelector = serde_json::from_value(json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": []}]}
        ]}))
        .unwrap();
        let m = NodeSelectorMatcher::new(&sel);
        assert!(m.terms.is_empty());
        assert_eq!(m.errors.len(), 1);
    }
}
