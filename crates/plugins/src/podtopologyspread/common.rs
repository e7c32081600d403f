//! What filtering and scoring share: parsed constraints, node inclusion policies, pod counting and
//! the default selector derived from the objects owning a pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use ksched_framework::labels::{Labels, PackedLabels, Requirement, Selector};
use ksched_framework::listers::ClusterLister;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::PodInfo;

use crate::nodeaffinity::RequiredNodeAffinity;
use crate::tainttoleration::{do_not_schedule_taint, find_matching_untolerated_taint};

/// Whether a node-level condition decides which nodes take part in spreading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeInclusionPolicy {
    /// Only nodes satisfying the condition count.
    Honor,
    /// Every node counts.
    Ignore,
}

impl NodeInclusionPolicy {
    /// Upstream only acts on the exact value `Honor`; anything else behaves as Ignore.
    fn parse(value: Option<&str>, default: NodeInclusionPolicy) -> Self {
        match value {
            None => default,
            Some("Honor") => NodeInclusionPolicy::Honor,
            Some(_) => NodeInclusionPolicy::Ignore,
        }
    }
}

/// A topology spread constraint with its selector parsed and its defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Constraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub selector: Selector,
    pub min_domains: i32,
    pub node_affinity_policy: NodeInclusionPolicy,
    pub node_taints_policy: NodeInclusionPolicy,
    /// TaintTolerationComparisonOperators: `Lt`/`Gt` tolerations count under `Honor`.
    pub taint_comparison_operators: bool,
}

/// The feature gates that change how constraints are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConstraintGates {
    /// MatchLabelKeysInPodTopologySpread.
    pub match_label_keys: bool,
    /// TaintTolerationComparisonOperators.
    pub taint_comparison_operators: bool,
}

impl ConstraintGates {
    /// The gates of a plugin handle.
    pub fn from_features(f: &ksched_framework::Features) -> Self {
        ConstraintGates {
            match_label_keys: f.match_label_keys_in_pod_topology_spread,
            taint_comparison_operators: f.taint_toleration_comparison_operators,
        }
    }
}

impl Constraint {
    /// Whether `node` takes part in this constraint's spreading for `pod`.
    pub fn includes_node(&self, pod: &Pod, node: &Node, required: &RequiredNodeAffinity) -> bool {
        if self.node_affinity_policy == NodeInclusionPolicy::Honor && !required.matches_ignoring_errors(node) {
            return false;
        }
        if self.node_taints_policy == NodeInclusionPolicy::Honor {
            let untolerated = find_matching_untolerated_taint(
                node_taints(node),
                pod_tolerations(pod),
                do_not_schedule_taint,
                self.taint_comparison_operators,
            );
            if untolerated.is_some() {
                return false;
            }
        }
        true
    }

    /// True when the key is the hostname label, whose domains are single nodes.
    pub fn is_hostname(&self) -> bool {
        self.topology_key == super::LABEL_HOSTNAME
    }
}

/// The constraints with the given `whenUnsatisfiable`, parsed; `matchLabelKeys` values found in
/// the pod's labels are ANDed into the selector (a nil selector stays "nothing").
pub(crate) fn filter_constraints(
    constraints: &[TopologySpreadConstraint],
    pod_labels: &ksched_framework::labels::PackedLabels,
    action: &str,
    gates: ConstraintGates,
) -> Result<Vec<Constraint>, String> {
    let mut out = Vec::new();
    for c in constraints.iter().filter(|c| c.when_unsatisfiable == action) {
        let mut selector = Selector::from_label_selector(c.label_selector.as_ref())?;
        if gates.match_label_keys && !selector.is_nothing() {
            for key in c.match_label_keys.iter().flatten() {
                if let Some(value) = pod_labels.get(key) {
                    selector.push(Requirement::In(key.clone(), vec![value.to_string()]));
                }
            }
        }
        out.push(Constraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            node_affinity_policy: NodeInclusionPolicy::parse(
                c.node_affinity_policy.as_deref(),
                NodeInclusionPolicy::Honor,
            ),
            node_taints_policy: NodeInclusionPolicy::parse(
                c.node_taints_policy.as_deref(),
                NodeInclusionPolicy::Ignore,
            ),
            taint_comparison_operators: gates.taint_comparison_operators,
        });
    }
    Ok(out)
}

/// True when the node carries every constraint's topology key.
pub(crate) fn node_has_all_topology_keys(labels: &PackedLabels, constraints: &[Constraint]) -> bool {
    constraints.iter().all(|c| labels.contains_key(&c.topology_key))
}

/// Pods in `namespace`, not terminating, matched by the selector. Upstream counts nothing for a
/// selector without requirements (even though such a selector matches every pod elsewhere).
pub(crate) fn count_pods_matching(pods: &[std::sync::Arc<PodInfo>], selector: &Selector, namespace: &str) -> i64 {
    if selector.is_everything() {
        return 0;
    }
    pods.iter()
        .filter(|p| {
            let pod = &p.pod;
            pod.metadata.deletion_timestamp.is_none() && p.namespace() == namespace && selector.matches(pod_labels(pod))
        })
        .count() as i64
}

/// The pod's own `topologySpreadConstraints`.
pub(crate) fn pod_constraints(pod: &Pod) -> &[TopologySpreadConstraint] {
    pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_deref()).unwrap_or_default()
}

/// The pod's labels (empty when unset).
pub(crate) fn pod_labels(pod: &Pod) -> &ksched_framework::labels::PackedLabels {
    &pod.metadata.labels
}

/// The node's labels (empty when unset).
pub(crate) fn node_labels(node: &Node) -> &PackedLabels {
    ksched_framework::labels::node_labels(node)
}

/// The pod's tolerations (nil and empty compare equal, as upstream's semantic equality does).
pub(crate) fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    crate::tainttoleration::pod_tolerations(pod)
}

/// The node's taints (nil and empty compare equal).
pub(crate) fn node_taints(node: &Node) -> &[Taint] {
    crate::tainttoleration::node_taints(node)
}

/// The selector deduced from the Services selecting the pod and its controlling
/// ReplicationController, ReplicaSet or StatefulSet; it has no requirements when none applies.
pub(crate) fn default_selector(pod: &Pod, lister: &dyn ClusterLister) -> Selector {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let labels = pod_labels(pod);
    let mut label_set: Labels = BTreeMap::new();
    for svc in lister.services(namespace) {
        // A Service without a selector selects nothing, not everything.
        let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else { continue };
        if sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            label_set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut selector = Selector::from_match_labels(&label_set);
    let Some(owner) =
        pod.metadata.owner_references.as_deref().into_iter().flatten().find(|o| o.controller == Some(true))
    else {
        return selector;
    };
    let Some(group) = api_group(&owner.api_version) else { return selector };
    match (group, owner.kind.as_str()) {
        (("", "v1"), "ReplicationController") => {
            let rc = lister
                .replication_controllers(namespace)
                .into_iter()
                .find(|rc| rc.metadata.name.as_deref() == Some(&owner.name));
            if let Some(rc) = rc {
                if let Some(sel) = rc.spec.as_ref().and_then(|s| s.selector.as_ref()) {
                    label_set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
                selector = Selector::from_match_labels(&label_set);
            }
        }
        (("apps", "v1"), "ReplicaSet") => {
            let rs =
                lister.replica_sets(namespace).into_iter().find(|rs| rs.metadata.name.as_deref() == Some(&owner.name));
            if let Some(sel) = rs.as_ref().and_then(|rs| rs.spec.as_ref()).map(|s| &s.selector) {
                add_requirements(&mut selector, sel);
            }
        }
        (("apps", "v1"), "StatefulSet") => {
            let ss =
                lister.stateful_sets(namespace).into_iter().find(|ss| ss.metadata.name.as_deref() == Some(&owner.name));
            if let Some(sel) = ss.as_ref().and_then(|ss| ss.spec.as_ref()).map(|s| &s.selector) {
                add_requirements(&mut selector, sel);
            }
        }
        _ => {}
    }
    selector
}

/// Splits an apiVersion into (group, version) like upstream's `ParseGroupVersion`; `None` when it
/// has more than one '/'.
fn api_group(api_version: &str) -> Option<(&str, &str)> {
    if api_version.is_empty() || api_version == "/" {
        return Some(("", ""));
    }
    match api_version.split_once('/') {
        None => Some(("", api_version)),
        Some((_, rest)) if rest.contains('/') => None,
        Some(gv) => Some(gv),
    }
}

/// ANDs the requirements of a workload's label selector into `selector`; a selector that does not
/// parse adds nothing.
fn add_requirements(selector: &mut Selector, sel: &LabelSelector) {
    let mut reqs: Vec<Requirement> = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        reqs.push(Requirement::In(k.clone(), vec![v.clone()]));
    }
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default();
        let req = match e.operator.as_str() {
            "In" if !values.is_empty() => Requirement::In(e.key.clone(), values),
            "NotIn" if !values.is_empty() => Requirement::NotIn(e.key.clone(), values),
            "Exists" if values.is_empty() => Requirement::Exists(e.key.clone()),
            "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(e.key.clone()),
            _ => return,
        };
        reqs.push(req);
    }
    for r in reqs {
        selector.push(r);
    }
}
