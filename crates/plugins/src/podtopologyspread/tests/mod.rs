//! Test builders shared by the PodTopologySpread tests. Clusters are written compactly:
//! a node is `"name k=v k=v"`, an existing pod `"name node k=v ns:NS term"` (`-` for no node).

mod args;
mod filtering;
mod hints;
mod property;
mod reference;
mod scoring;

use std::collections::BTreeMap;
use std::sync::Arc;

use ksched_framework::listers::MemoryLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{CycleState, Handle, NodeInfo, PodInfo, Snapshot};
use serde_json::{json, Value};

use super::filtering::{PreFilterState, PRE_FILTER_STATE_KEY};
use super::{PodTopologySpread, PodTopologySpreadArgs, DO_NOT_SCHEDULE, SCHEDULE_ANYWAY};

pub(super) const DNS: &str = DO_NOT_SCHEDULE;
pub(super) const SA: &str = SCHEDULE_ANYWAY;
pub(super) const HOSTNAME: &str = super::LABEL_HOSTNAME;

/// `matchExpressions: [{key, Exists}]`.
pub(super) fn exists(key: &str) -> Option<Value> {
    Some(json!({"matchExpressions": [{"key": key, "operator": "Exists"}]}))
}

/// `matchLabels`.
pub(super) fn match_labels(pairs: &[(&str, &str)]) -> Option<Value> {
    let m: BTreeMap<&str, &str> = pairs.iter().copied().collect();
    Some(json!({ "matchLabels": m }))
}

/// A spread constraint under construction.
#[derive(Clone)]
pub(super) struct Tsc(Value);

/// A constraint with maxSkew, topologyKey, whenUnsatisfiable and an optional selector.
pub(super) fn tsc(max_skew: i32, key: &str, when: &str, selector: Option<Value>) -> Tsc {
    let mut v = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when});
    if let Some(s) = selector {
        v["labelSelector"] = s;
    }
    Tsc(v)
}

impl Tsc {
    pub fn min_domains(mut self, n: i32) -> Self {
        self.0["minDomains"] = json!(n);
        self
    }
    pub fn affinity_policy(mut self, p: &str) -> Self {
        self.0["nodeAffinityPolicy"] = json!(p);
        self
    }
    pub fn taints_policy(mut self, p: &str) -> Self {
        self.0["nodeTaintsPolicy"] = json!(p);
        self
    }
    pub fn match_label_keys(mut self, keys: &[&str]) -> Self {
        self.0["matchLabelKeys"] = json!(keys);
        self
    }
}

/// A pod under construction (namespace "default", uid = name).
#[derive(Clone)]
pub(super) struct PodB(Value);

pub(super) fn pod(name: &str) -> PodB {
    PodB(json!({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"containers": []}}))
}

impl PodB {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0["metadata"]["labels"][k] = json!(v);
        self
    }
    pub fn ns(mut self, ns: &str) -> Self {
        self.0["metadata"]["namespace"] = json!(ns);
        self
    }
    pub fn uid(mut self, uid: &str) -> Self {
        self.0["metadata"]["uid"] = json!(uid);
        self
    }
    pub fn node(mut self, n: &str) -> Self {
        self.0["spec"]["nodeName"] = json!(n);
        self
    }
    pub fn nominated(mut self, n: &str) -> Self {
        self.0["status"]["nominatedNodeName"] = json!(n);
        self
    }
    pub fn terminating(mut self) -> Self {
        self.0["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        self
    }
    pub fn spread(mut self, c: Tsc) -> Self {
        let list = &mut self.0["spec"]["topologySpreadConstraints"];
        if list.is_null() {
            *list = json!([]);
        }
        list.as_array_mut().expect("array").push(c.0);
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.0["spec"]["nodeSelector"][k] = json!(v);
        self
    }
    fn node_affinity(mut self, key: &str, op: &str, values: &[&str]) -> Self {
        self.0["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]}}});
        self
    }
    pub fn node_affinity_in(self, key: &str, values: &[&str]) -> Self {
        self.node_affinity(key, "In", values)
    }
    pub fn node_affinity_not_in(self, key: &str, values: &[&str]) -> Self {
        self.node_affinity(key, "NotIn", values)
    }
    /// Tolerates every taint with the key.
    pub fn toleration(mut self, key: &str) -> Self {
        let list = &mut self.0["spec"]["tolerations"];
        if list.is_null() {
            *list = json!([]);
        }
        list.as_array_mut().expect("array").push(json!({"key": key, "operator": "Exists"}));
        self
    }
    pub fn controller(mut self, api_version: &str, kind: &str, name: &str) -> Self {
        self.0["metadata"]["ownerReferences"] =
            json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": "u", "controller": true}]);
        self
    }
    pub fn obj(&self) -> Pod {
        serde_json::from_value(self.0.clone()).expect("valid pod")
    }
    pub fn info(&self) -> PodInfo {
        PodInfo::new(Arc::new(self.obj()))
    }
}

/// A node from `"name k=v ..."`, optionally with the `node.kubernetes.io/unschedulable` NoSchedule
/// taint when a token is `tainted`.
pub(super) fn node(spec: &str) -> Node {
    let mut tokens = spec.split_whitespace();
    let name = tokens.next().expect("node name");
    let mut labels = serde_json::Map::new();
    let mut taints = Vec::new();
    for t in tokens {
        if t == "tainted" {
            taints.push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
        } else {
            let (k, v) = t.split_once('=').expect("k=v");
            labels.insert(k.to_string(), json!(v));
        }
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}))
        .expect("valid node")
}

/// An existing pod from `"name node k=v ns:NS term"`.
pub(super) fn existing(spec: &str) -> Pod {
    let mut tokens = spec.split_whitespace();
    let mut p = pod(tokens.next().expect("pod name"));
    let node = tokens.next().expect("node or -");
    if node != "-" {
        p = p.node(node);
    }
    for t in tokens {
        if t == "term" {
            p = p.terminating();
        } else if let Some(ns) = t.strip_prefix("ns:") {
            p = p.ns(ns);
        } else {
            let (k, v) = t.split_once('=').expect("k=v");
            p = p.label(k, v);
        }
    }
    p.obj()
}

/// A snapshot of the nodes (in order) with the pods placed on their `spec.nodeName`.
pub(super) fn snapshot(nodes: &[&str], pods: &[&str]) -> Snapshot {
    Snapshot::from_node_infos(node_infos(nodes, pods))
}

pub(super) fn node_infos(nodes: &[&str], pods: &[&str]) -> Vec<NodeInfo> {
    let mut infos: Vec<NodeInfo> = nodes.iter().map(|n| NodeInfo::new(Arc::new(node(n)))).collect();
    for p in pods {
        let pod = existing(p);
        let on = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let ni = infos.iter_mut().find(|n| n.name() == on).expect("pod's node exists");
        ni.add_pod(Arc::new(PodInfo::new(Arc::new(pod))));
    }
    infos
}

/// The standard cluster: node-a/node-b in zone1, node-x/node-y in zone2, each with a `node` label.
pub(super) const FOUR_NODES: [&str; 4] = [
    "node-a zone=zone1 node=node-a",
    "node-b zone=zone1 node=node-b",
    "node-x zone=zone2 node=node-x",
    "node-y zone=zone2 node=node-y",
];

/// A handle whose lister holds the given services (`{selector}` maps) and workloads.
pub(super) fn handle_with(lister: MemoryLister) -> Handle {
    Handle { lister: Arc::new(lister), ..Handle::for_tests() }
}

/// A lister with Services in namespace "default" selecting the given label maps.
pub(super) fn services(selectors: &[&[(&str, &str)]]) -> MemoryLister {
    let lister = MemoryLister::default();
    for (i, sel) in selectors.iter().enumerate() {
        let m: BTreeMap<&str, &str> = sel.iter().copied().collect();
        let svc = serde_json::from_value(
            json!({"metadata": {"name": format!("svc{i}"), "namespace": "default"}, "spec": {"selector": m}}),
        )
        .expect("valid service");
        lister.services.write().push(Arc::new(svc));
    }
    lister
}

/// The plugin with `List` defaulting and the given default constraints.
pub(super) fn plugin_list(defaults: &[Tsc], lister: MemoryLister) -> PodTopologySpread {
    let args = PodTopologySpreadArgs {
        default_constraints: defaults.iter().map(|c| serde_json::from_value(c.0.clone()).expect("valid")).collect(),
        defaulting_type: "List".into(),
    };
    PodTopologySpread::from_args(args, &handle_with(lister)).expect("valid args")
}

/// The plugin with `System` defaulting.
pub(super) fn plugin_system(lister: MemoryLister) -> PodTopologySpread {
    PodTopologySpread::from_args(PodTopologySpreadArgs::default(), &handle_with(lister)).expect("valid args")
}

/// The PreFilter state of a cycle.
pub(super) fn pre_filter_state(state: &CycleState) -> &PreFilterState {
    state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).expect("state written")
}

/// Per constraint: the domain counts, sorted, and the two critical paths with equal counts
/// ordered by value (upstream's comparison ignores the order of ties).
pub(super) type StateView = Vec<ConstraintView>;

/// One constraint's sorted domain counts and its two critical paths.
pub(super) type ConstraintView = (Vec<(String, i64)>, [(String, i64); 2]);

pub(super) fn view(s: &PreFilterState) -> StateView {
    s.tp_value_to_match_num
        .iter()
        .zip(&s.critical_paths)
        .map(|(domains, paths)| {
            let mut counts: Vec<(String, i64)> = domains.iter().map(|(k, v)| (k.clone(), *v)).collect();
            counts.sort();
            let [a, b] = &paths.0;
            let mut p =
                [(domains.value(a.domain).clone(), a.match_num), (domains.value(b.domain).clone(), b.match_num)];
            if p[0].1 == p[1].1 && p[0].0 > p[1].0 {
                p.swap(0, 1);
            }
            (counts, p)
        })
        .collect()
}

/// Shorthand for a [`StateView`] entry: counts as (domain, n) and the two paths.
pub(super) fn sv(counts: &[(&str, i64)], paths: [(&str, i64); 2]) -> ConstraintView {
    let mut c: Vec<(String, i64)> = counts.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    c.sort();
    let mut p = paths.map(|(k, v)| (k.to_string(), v));
    if p[0].1 == p[1].1 && p[0].0 > p[1].0 {
        p.swap(0, 1);
    }
    (c, p)
}

/// Upstream's untouched critical paths.
pub(super) const UNSET: (&str, i64) = ("", i32::MAX as i64);

/// Knuth's MMIX LCG for the randomized tests (seeded, so failures replay); the high bits are
/// the usable ones.
pub(super) struct Lcg(pub(super) u64);

impl Lcg {
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
    pub(super) fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
    pub(super) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}
