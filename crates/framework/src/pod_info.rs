//! PodInfo: a pod plus everything the scheduler derives from it once (requests, ports, terms).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::pod::Pod;
use k8s_openapi::api::core::v1::{PodAffinityTerm, WeightedPodAffinityTerm};

use crate::labels::{Labels, Selector};
use crate::resource::{pod_requests, RequestOptions, Resource};

/// A host port a container asks for; an empty ip means 0.0.0.0 and an empty protocol TCP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// Host IP ("0.0.0.0" conflicts with every IP).
    pub ip: String,
    /// Protocol (TCP, UDP, SCTP).
    pub protocol: String,
    /// Port number (> 0).
    pub port: i32,
}

/// A parsed pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Namespaces the term applies to (from `namespaces`, or the pod's own).
    pub namespaces: BTreeSet<String>,
    /// Pods the term selects.
    pub selector: Selector,
    /// The topology key.
    pub topology_key: String,
    /// Namespaces selected by labels; `None` when not set.
    pub namespace_selector: Option<Selector>,
}

impl AffinityTerm {
    /// True when `pod` (with `ns_labels` as its namespace's labels) is selected by the term.
    /// `None` labels behave like an empty label set (upstream passes a nil set), so an empty
    /// namespace selector still selects every namespace.
    pub fn matches(&self, pod: &Pod, ns_labels: Option<&Labels>) -> bool {
        static NO_LABELS: Labels = Labels::new();
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let ns_ok = self.namespaces.contains(ns)
            || self.namespace_selector.as_ref().is_some_and(|sel| sel.matches(ns_labels.unwrap_or(&NO_LABELS)));
        ns_ok && self.selector.matches(&pod.metadata.labels)
    }
}

/// Parses a list of pod (anti-)affinity terms like upstream's `GetAffinityTerms`: the first invalid
/// term fails the whole list.
pub fn affinity_terms(pod: &Pod, terms: &[PodAffinityTerm]) -> Result<Vec<AffinityTerm>, String> {
    terms.iter().map(|t| parse_term(pod, t)).collect()
}

/// Parses weighted terms like upstream's `GetWeightedAffinityTerms`.
pub fn weighted_affinity_terms(
    pod: &Pod,
    terms: &[WeightedPodAffinityTerm],
) -> Result<Vec<WeightedAffinityTerm>, String> {
    terms
        .iter()
        .map(|w| parse_term(pod, &w.pod_affinity_term).map(|term| WeightedAffinityTerm { term, weight: w.weight }))
        .collect()
}

/// A parsed preferred term with its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    /// The term.
    pub term: AffinityTerm,
    /// Its weight (1–100).
    pub weight: i32,
}

/// What [`PodInfo`] derives that most pods have none of. Kept out of line: six empty vectors
/// inline were more than half of every bound pod's `PodInfo`, and a cluster holds one per pod.
/// Shared, so that a pod's assumed copy ([`PodInfo::assumed_on`]) does not copy its terms.
#[derive(Debug, Default)]
struct PodInfoExtras {
    host_ports: Vec<HostPort>,
    required_affinity_terms: Vec<AffinityTerm>,
    required_anti_affinity_terms: Vec<AffinityTerm>,
    preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    parse_errors: Vec<String>,
}

/// A pod with the derived data every plugin needs; shared as `Arc<PodInfo>`.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The pod object.
    pub pod: Arc<Pod>,
    /// Requests without non-zero defaults (filtering, cache accounting).
    pub requests: Resource,
    /// Requests with 100m / 200 MiB substituted for missing cpu/memory (scoring).
    pub non_zero_requests: Resource,
    /// Host ports and pod affinity terms, `None` for the many pods that have neither (read
    /// through [`PodInfo::host_ports`] and the term accessors).
    extras: Option<Arc<PodInfoExtras>>,
    /// `spec.priority` (0 when unset). Kept here because queue ordering compares it at every
    /// heap level, and reaching it through the pod object costs two more dependent loads.
    pub priority: i32,
    /// The node an assumed pod was placed on (see [`PodInfo::assumed_on`]); `None` otherwise.
    pub assumed_node: Option<String>,
}

fn parse_term(pod: &Pod, t: &PodAffinityTerm) -> Result<AffinityTerm, String> {
    let mut namespaces: BTreeSet<String> = t.namespaces.iter().flatten().cloned().collect();
    let namespace_selector =
        t.namespace_selector.as_ref().map(|s| Selector::from_label_selector(Some(s))).transpose()?;
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.insert(pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()));
    }
    Ok(AffinityTerm {
        namespaces,
        selector: Selector::from_label_selector(t.label_selector.as_ref())?,
        topology_key: t.topology_key.clone(),
        namespace_selector,
    })
}

/// Like upstream, an invalid term empties its whole category and is reported under the
/// category's name.
fn or_report<T>(errors: &mut Vec<String>, category: &str, parsed: Result<Vec<T>, String>) -> Vec<T> {
    parsed.unwrap_or_else(|e| {
        errors.push(format!("{category}: {e}"));
        Vec::new()
    })
}

impl PodInfo {
    /// Derives a PodInfo from a pod.
    pub fn new(pod: Arc<Pod>) -> Self {
        let requests = pod_requests(&pod, RequestOptions::default());
        let non_zero_requests = pod_requests(&pod, RequestOptions { non_zero_defaults: true });
        let mut host_ports = Vec::new();
        let mut errors = Vec::new();
        let (mut ra, mut raa, mut pa, mut paa) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        if let Some(spec) = pod.spec.as_ref() {
            let sidecars =
                spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
            for c in spec.containers.iter().chain(sidecars) {
                for p in c.ports.iter().flatten() {
                    if let Some(hp) = p.host_port.filter(|hp| *hp > 0) {
                        host_ports.push(HostPort {
                            ip: p.host_ip.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "0.0.0.0".into()),
                            protocol: p.protocol.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "TCP".into()),
                            port: hp,
                        });
                    }
                }
            }
            if let Some(aff) = spec.affinity.as_ref() {
                let (pa_spec, paa_spec) = (aff.pod_affinity.as_ref(), aff.pod_anti_affinity.as_ref());
                let required = pa_spec.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref());
                ra =
                    or_report(&mut errors, "requiredAffinityTerms", affinity_terms(&pod, required.unwrap_or_default()));
                let required = paa_spec.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref());
                raa = or_report(
                    &mut errors,
                    "requiredAntiAffinityTerms",
                    affinity_terms(&pod, required.unwrap_or_default()),
                );
                let preferred = pa_spec.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref());
                pa = or_report(
                    &mut errors,
                    "preferredAffinityTerms",
                    weighted_affinity_terms(&pod, preferred.unwrap_or_default()),
                );
                let preferred =
                    paa_spec.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref());
                paa = or_report(
                    &mut errors,
                    "preferredAntiAffinityTerms",
                    weighted_affinity_terms(&pod, preferred.unwrap_or_default()),
                );
            }
        }
        let priority = pod_priority(&pod);
        let extras = PodInfoExtras {
            host_ports,
            required_affinity_terms: ra,
            required_anti_affinity_terms: raa,
            preferred_affinity_terms: pa,
            preferred_anti_affinity_terms: paa,
            parse_errors: errors,
        };
        let none = extras.host_ports.is_empty()
            && extras.required_affinity_terms.is_empty()
            && extras.required_anti_affinity_terms.is_empty()
            && extras.preferred_affinity_terms.is_empty()
            && extras.preferred_anti_affinity_terms.is_empty()
            && extras.parse_errors.is_empty();
        PodInfo {
            pod,
            requests,
            non_zero_requests,
            extras: (!none).then(|| Arc::new(extras)),
            priority,
            assumed_node: None,
        }
    }

    /// Host ports of containers and sidecar init containers.
    pub fn host_ports(&self) -> &[HostPort] {
        self.extras.as_ref().map_or(&[], |e| &e.host_ports)
    }

    /// Required pod affinity terms.
    pub fn required_affinity_terms(&self) -> &[AffinityTerm] {
        self.extras.as_ref().map_or(&[], |e| &e.required_affinity_terms)
    }

    /// Required pod anti-affinity terms.
    pub fn required_anti_affinity_terms(&self) -> &[AffinityTerm] {
        self.extras.as_ref().map_or(&[], |e| &e.required_anti_affinity_terms)
    }

    /// Preferred pod affinity terms.
    pub fn preferred_affinity_terms(&self) -> &[WeightedAffinityTerm] {
        self.extras.as_ref().map_or(&[], |e| &e.preferred_affinity_terms)
    }

    /// Preferred pod anti-affinity terms.
    pub fn preferred_anti_affinity_terms(&self) -> &[WeightedAffinityTerm] {
        self.extras.as_ref().map_or(&[], |e| &e.preferred_anti_affinity_terms)
    }

    /// Errors met while parsing the affinity terms, one per failed category, prefixed with the
    /// category as upstream reports them (e.g. `requiredAffinityTerms: ...`).
    pub fn parse_errors(&self) -> &[String] {
        self.extras.as_ref().map_or(&[], |e| &e.parse_errors)
    }

    /// Pod name.
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }

    /// Pod namespace ("default" when unset).
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// Pod UID (empty when unset).
    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    /// `namespace/name`, the queue key.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// `spec.priority` or 0.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// This pod as assumed on `node`, before its binding is confirmed. The pod object is shared,
    /// not copied (its `spec.nodeName` stays empty): the node is recorded in `assumed_node`,
    /// which [`PodInfo::node_name`] reports. A deep copy per scheduled pod was a twentieth of the
    /// scheduling thread; [`PodInfo::pod_with_node_name`] makes one where an object is needed.
    pub fn assumed_on(&self, node: &str) -> PodInfo {
        PodInfo { assumed_node: Some(node.to_string()), ..self.clone() }
    }

    /// The pod object with `spec.nodeName` set to [`PodInfo::node_name`] (a copy only for an
    /// assumed pod), e.g. for a cluster event about an assumed pod that must look assigned.
    pub fn pod_with_node_name(&self) -> Arc<Pod> {
        let Some(node) = &self.assumed_node else { return self.pod.clone() };
        let mut pod = (*self.pod).clone();
        pod.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
        Arc::new(pod)
    }

    /// The assumed node, else `spec.nodeName` when set and non-empty.
    pub fn node_name(&self) -> Option<&str> {
        if let Some(n) = &self.assumed_node {
            return Some(n);
        }
        self.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
    }

    /// True when the pod has any pod affinity or anti-affinity (required or preferred).
    pub fn has_affinity(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
    }

    /// True when the pod has required anti-affinity terms.
    pub fn has_required_anti_affinity(&self) -> bool {
        !self.required_anti_affinity_terms().is_empty()
    }

    /// Labels of the pod.
    pub fn labels(&self) -> &crate::labels::PackedLabels {
        &self.pod.metadata.labels
    }
}

/// `spec.priority` of a pod, or 0.
pub fn pod_priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// True when the pod has a deletion timestamp.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn assumed_on_records_the_node_and_keeps_what_was_parsed() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}},
                                "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}]}}
            }
        }))
        .unwrap();
        let info = PodInfo::new(Arc::new(pod));
        let assumed = info.assumed_on("n1");
        assert_eq!(info.node_name(), None, "the original is untouched");
        assert_eq!(assumed.node_name(), Some("n1"));
        assert!(Arc::ptr_eq(&info.pod, &assumed.pod), "the object is shared");
        let with_node = assumed.pod_with_node_name();
        assert_eq!(with_node.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
        assert_eq!(info.pod.spec.as_ref().unwrap().node_name, None);
        let reparsed = PodInfo::new(with_node);
        assert_eq!(format!("{:?}", assumed.requests), format!("{:?}", reparsed.requests));
        assert_eq!(format!("{:?}", assumed.non_zero_requests), format!("{:?}", reparsed.non_zero_requests));
        assert_eq!(format!("{:?}", assumed.host_ports()), format!("{:?}", reparsed.host_ports()));
        assert_eq!(
            format!("{:?}", assumed.required_anti_affinity_terms()),
            format!("{:?}", reparsed.required_anti_affinity_terms())
        );
        assert_eq!(assumed.requests.milli_cpu, 250);
        assert_eq!(assumed.required_anti_affinity_terms().len(), 1);
    }

    #[test]
    fn a_pod_without_ports_or_affinity_terms_keeps_no_extras() {
        // Every bound pod's PodInfo stays in the cluster's memory: keep the common one small.
        assert!(std::mem::size_of::<PodInfo>() <= 128, "{} bytes", std::mem::size_of::<PodInfo>());
        let plain: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}))
        .unwrap();
        let info = PodInfo::new(Arc::new(plain));
        assert!(info.extras.is_none());
        assert!(info.host_ports().is_empty() && info.parse_errors().is_empty());
        let with_port: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}}))
        .unwrap();
        let info = PodInfo::new(Arc::new(with_port));
        assert_eq!(info.host_ports().len(), 1);
        assert!(info.required_affinity_terms().is_empty());
        // The assumed copy shares them.
        let assumed = info.assumed_on("n1");
        assert!(Arc::ptr_eq(info.extras.as_ref().unwrap(), assumed.extras.as_ref().unwrap()));
    }
}
