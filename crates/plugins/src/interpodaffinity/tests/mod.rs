//! Tests for InterPodAffinity, ported from upstream's filtering, scoring and plugin tests plus
//! cases for this implementation's own choices (copy-on-write state, pods on infeasible nodes).

mod args;
mod filtering;
mod framework;
mod hints;
mod randomized;
mod scoring;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use ksched_framework::listers::MemoryLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{Handle, NodeInfo, PodInfo, Snapshot};
use serde_json::{json, Value};

use super::{InterPodAffinity, InterPodAffinityArgs};

/// Whether a built term is required or preferred (with its weight).
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Required,
    Preferred(i32),
}
pub(super) use Kind::{Preferred, Required};

/// A label selector `key In values`.
pub(super) fn sel_in(key: &str, values: &[&str]) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "In", "values": values}]})
}

/// A label selector `key NotIn values`.
pub(super) fn sel_not_in(key: &str, values: &[&str]) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "NotIn", "values": values}]})
}

/// A label selector `key Exists`.
pub(super) fn sel_exists(key: &str) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "Exists"}]})
}

/// A label selector from `(key, operator, values)` expressions.
pub(super) fn sel_exprs(exprs: &[(&str, &str, &[&str])]) -> Value {
    let exprs: Vec<Value> = exprs
        .iter()
        .map(|(k, op, vals)| {
            if vals.is_empty() {
                json!({"key": k, "operator": op})
            } else {
                json!({"key": k, "operator": op, "values": vals})
            }
        })
        .collect();
    json!({"matchExpressions": exprs})
}

/// A pod affinity term with a label selector and topology key.
pub(super) fn term(selector: Value, topology_key: &str) -> Value {
    json!({"labelSelector": selector, "topologyKey": topology_key})
}

/// A pod builder in the spirit of upstream's `st.MakePod()`; the namespace defaults to "default".
#[derive(Debug, Clone)]
pub(super) struct PodBuilder(Value);

pub(super) fn make_pod() -> PodBuilder {
    PodBuilder(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}))
}

impl PodBuilder {
    pub(super) fn name(mut self, name: &str) -> Self {
        self.0["metadata"]["name"] = json!(name);
        self
    }

    pub(super) fn uid(mut self, uid: &str) -> Self {
        self.0["metadata"]["uid"] = json!(uid);
        self
    }

    pub(super) fn namespace(mut self, ns: &str) -> Self {
        self.0["metadata"]["namespace"] = json!(ns);
        self
    }

    pub(super) fn node(mut self, node: &str) -> Self {
        self.0["spec"]["nodeName"] = json!(node);
        self
    }

    pub(super) fn nominated(mut self, node: &str) -> Self {
        self.0["status"] = json!({"nominatedNodeName": node});
        self
    }

    pub(super) fn label(mut self, key: &str, value: &str) -> Self {
        if self.0["metadata"]["labels"].is_null() {
            self.0["metadata"]["labels"] = json!({});
        }
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }

    pub(super) fn labels(self, labels: &[(&str, &str)]) -> Self {
        labels.iter().fold(self, |p, (k, v)| p.label(k, v))
    }

    /// Sets `spec.affinity` verbatim.
    pub(super) fn affinity(mut self, affinity: Value) -> Self {
        self.0["spec"]["affinity"] = affinity;
        self
    }

    /// Appends a raw term (`anti` selects podAntiAffinity).
    pub(super) fn raw_term(mut self, anti: bool, kind: Kind, term: Value) -> Self {
        let section = if anti { "podAntiAffinity" } else { "podAffinity" };
        let spec = &mut self.0["spec"];
        if spec["affinity"].is_null() {
            spec["affinity"] = json!({});
        }
        if spec["affinity"][section].is_null() {
            spec["affinity"][section] = json!({});
        }
        let (field, item) = match kind {
            Required => ("requiredDuringSchedulingIgnoredDuringExecution", term),
            Preferred(w) => {
                ("preferredDuringSchedulingIgnoredDuringExecution", json!({"weight": w, "podAffinityTerm": term}))
            }
        };
        let list = &mut spec["affinity"][section][field];
        if list.is_null() {
            *list = json!([]);
        }
        list.as_array_mut().expect("list").push(item);
        self
    }

    pub(super) fn pod_affinity_in(self, key: &str, tk: &str, values: &[&str], kind: Kind) -> Self {
        self.raw_term(false, kind, term(sel_in(key, values), tk))
    }

    pub(super) fn pod_affinity_not_in(self, key: &str, tk: &str, values: &[&str], kind: Kind) -> Self {
        self.raw_term(false, kind, term(sel_not_in(key, values), tk))
    }

    pub(super) fn pod_affinity_exists(self, key: &str, tk: &str, kind: Kind) -> Self {
        self.raw_term(false, kind, term(sel_exists(key), tk))
    }

    pub(super) fn pod_anti_affinity_in(self, key: &str, tk: &str, values: &[&str], kind: Kind) -> Self {
        self.raw_term(true, kind, term(sel_in(key, values), tk))
    }

    pub(super) fn pod_anti_affinity_not_in(self, key: &str, tk: &str, values: &[&str], kind: Kind) -> Self {
        self.raw_term(true, kind, term(sel_not_in(key, values), tk))
    }

    pub(super) fn pod_anti_affinity_exists(self, key: &str, tk: &str, kind: Kind) -> Self {
        self.raw_term(true, kind, term(sel_exists(key), tk))
    }

    pub(super) fn obj(self) -> Pod {
        serde_json::from_value(self.0).expect("valid pod")
    }
}

/// A node with labels.
pub(super) fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let labels: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("valid node")
}

/// A snapshot of the nodes with each pod added to the node named by its `spec.nodeName`.
pub(super) fn snapshot(pods: &[Pod], nodes: &[Node]) -> Snapshot {
    let infos = nodes
        .iter()
        .map(|n| {
            let mut ni = NodeInfo::new(Arc::new(n.clone()));
            for (i, p) in pods.iter().enumerate() {
                if p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == n.metadata.name.as_deref() {
                    let mut p = p.clone();
                    p.metadata.uid.get_or_insert_with(|| format!("uid-{i}"));
                    ni.add_pod(Arc::new(PodInfo::new(Arc::new(p))));
                }
            }
            ni
        })
        .collect();
    Snapshot::from_node_infos(infos)
}

/// Upstream's test namespaces: two labelled team1, two labelled team2.
pub(super) fn team_namespaces() -> Vec<(&'static str, &'static [(&'static str, &'static str)])> {
    const T1: &[(&str, &str)] = &[("team", "team1")];
    const T2: &[(&str, &str)] = &[("team", "team2")];
    vec![("subteam1.team1", T1), ("subteam2.team1", T1), ("subteam1.team2", T2), ("subteam2.team2", T2)]
}

/// A test handle whose lister knows the given namespaces.
pub(super) fn handle_with_namespaces(namespaces: &[(&str, &[(&str, &str)])]) -> Handle {
    let lister = MemoryLister::default();
    *lister.namespaces.write() = namespaces
        .iter()
        .map(|(name, labels)| {
            let labels: serde_json::Map<String, Value> =
                labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
            let ns: Namespace =
                serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("valid ns");
            Arc::new(ns)
        })
        .collect();
    let mut handle = Handle::for_tests();
    handle.lister = Arc::new(lister);
    handle
}

/// The plugin with the given args over a handle knowing `namespaces`.
pub(super) fn plugin_with(args: InterPodAffinityArgs, namespaces: &[(&str, &[(&str, &str)])]) -> InterPodAffinity {
    InterPodAffinity::from_args(args, &handle_with_namespaces(namespaces)).expect("valid args")
}

/// The plugin with default args and upstream's test namespaces.
pub(super) fn plugin() -> InterPodAffinity {
    plugin_with(InterPodAffinityArgs::default(), &team_namespaces())
}

pub(super) fn pod_info(p: &Pod) -> PodInfo {
    PodInfo::new(Arc::new(p.clone()))
}
