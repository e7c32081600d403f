//! `/metrics/resources`: `kube_pod_resource_request` and `kube_pod_resource_limit` per
//! non-terminal pod (upstream `pkg/scheduler/metrics/resources`), collected at scrape time.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use ksched_framework::pod::{Container, Pod};
use ksched_framework::quantity;
use ksched_framework::resource::{pod_requests, RequestOptions, Resource, CPU};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Lists the pods the informer knows (all phases; terminal pods are skipped here).
pub type PodSource = Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>;

/// Amounts by resource name: cpu in millicores, everything else in base units.
type Amounts = BTreeMap<String, i64>;

/// Family name, help text and the per-pod amounts it reports.
type FamilySpec = (&'static str, &'static str, fn(&Pod) -> Amounts);

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodResourceLabels {
    namespace: String,
    node: String,
    pod: String,
    priority: String,
    resource: String,
    scheduler: String,
    unit: String,
}

const HELP_SUFFIX: &str = "broken down by pod. This shows the resource usage the scheduler and kubelet expect per pod for resources along with the unit for the resource if any.";

/// The collector behind `/metrics/resources`.
pub struct PodResourcesCollector {
    pods: PodSource,
}

impl std::fmt::Debug for PodResourcesCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodResourcesCollector").finish_non_exhaustive()
    }
}

impl PodResourcesCollector {
    /// A collector over `pods`.
    pub fn new(pods: PodSource) -> Self {
        PodResourcesCollector { pods }
    }
}

/// The OpenMetrics exposition of the pod resource metrics of `pods`.
pub fn encode(pods: PodSource) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(PodResourcesCollector::new(pods)));
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}

fn unit_of(resource: &str) -> &'static str {
    match resource {
        CPU => "cores",
        "memory" | "storage" | "ephemeral-storage" => "bytes",
        r if r.starts_with("hugepages-") => "bytes",
        r if r.starts_with("attachable-volumes-") => "integer",
        _ => "",
    }
}

fn amount(name: &str, q: &Quantity) -> i64 {
    if name == CPU {
        quantity::milli_value(&q.0).unwrap_or(0)
    } else {
        quantity::value(&q.0).unwrap_or(0)
    }
}

fn add(into: &mut Amounts, list: Option<&ksched_framework::pod::ResourceList>) {
    for (k, q) in list.into_iter().flatten() {
        *into.entry(k.clone()).or_default() += amount(k, q);
    }
}

fn max_into(into: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        let e = into.entry(k.clone()).or_insert(*v);
        *e = (*e).max(*v);
    }
}

fn from_resource(r: &Resource) -> Amounts {
    let mut m = Amounts::new();
    for (k, v) in [(CPU, r.milli_cpu), ("memory", r.memory), ("ephemeral-storage", r.ephemeral_storage)] {
        if v != 0 {
            m.insert(k.into(), v);
        }
    }
    m.extend(r.scalar_resources.iter().map(|(k, v)| (k.clone(), *v)));
    m
}

/// Upstream's `PodLimits`: containers and sidecars summed, maxed with every init phase, pod-level
/// limits for cpu/memory/hugepages, plus overhead for resources that have a limit.
fn pod_limits(pod: &Pod) -> Amounts {
    let Some(spec) = pod.spec.as_ref() else { return Amounts::new() };
    let mut total = Amounts::new();
    for c in spec.containers.iter() {
        add(&mut total, limits_of(c));
    }
    let mut sidecars = Amounts::new();
    let mut init_max = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let phase = if c.restart_policy.as_deref() == Some("Always") {
            add(&mut total, limits_of(c));
            add(&mut sidecars, limits_of(c));
            sidecars.clone()
        } else {
            let mut p = sidecars.clone();
            add(&mut p, limits_of(c));
            p
        };
        max_into(&mut init_max, &phase);
    }
    max_into(&mut total, &init_max);
    if let Some(pl) = spec.resources.as_ref().and_then(|r| r.limits.as_ref()) {
        for (k, q) in pl {
            if k == CPU || k == "memory" || k.starts_with("hugepages-") {
                total.insert(k.clone(), amount(k, q));
            }
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        if let Some(v) = total.get_mut(k) {
            *v += amount(k, q);
        }
    }
    total
}

fn limits_of(c: &Container) -> Option<&ksched_framework::pod::ResourceList> {
    c.resources.as_ref().and_then(|r| r.limits.as_ref())
}

fn is_terminal(pod: &Pod) -> bool {
    let assigned = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    assigned && matches!(phase, Some("Succeeded" | "Failed"))
}

impl Collector for PodResourcesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pods = (self.pods)();
        let live: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).filter(|p| !is_terminal(p)).collect();
        let families: [FamilySpec; 2] = [
            ("kube_pod_resource_request", "Resources requested by workloads on the cluster,", |p| {
                from_resource(&pod_requests(p, RequestOptions::default()))
            }),
            ("kube_pod_resource_limit", "Resources limit for workloads on the cluster,", pod_limits),
        ];
        for (name, help, amounts) in families {
            let help = format!("[STABLE] {help} {HELP_SUFFIX}");
            let mut metric = encoder.encode_descriptor(name, &help, None, MetricType::Gauge)?;
            for pod in &live {
                let spec = pod.spec.as_ref();
                for (resource, v) in amounts(pod) {
                    if v == 0 {
                        continue;
                    }
                    let value = if resource == CPU { v as f64 / 1000.0 } else { v as f64 };
                    let labels = PodResourceLabels {
                        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
                        pod: pod.metadata.name.clone().unwrap_or_default(),
                        priority: spec.and_then(|s| s.priority).map(|p| p.to_string()).unwrap_or_default(),
                        unit: unit_of(&resource).into(),
                        resource,
                        scheduler: spec.and_then(|s| s.scheduler_name.clone()).unwrap_or_default(),
                    };
                    ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_and_limits_per_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "nodeName": "n1", "schedulerName": "default-scheduler", "priority": 10,
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "2Gi"}}}
                ],
                "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "3"}}}],
                "overhead": {"cpu": "100m"}
            }
        }))
        .unwrap();
        let done: Pod = serde_json::from_value(json!({
            "metadata": {"name": "done", "namespace": "ns"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Succeeded"}
        }))
        .unwrap();
        let pods = vec![Arc::new(pod), Arc::new(done)];
        let text = encode(Arc::new(move || pods.clone()));
        assert!(text.contains("# TYPE kube_pod_resource_request gauge\n"), "{text}");
        assert!(text.contains(
            r#"kube_pod_resource_request{namespace="ns",node="n1",pod="p",priority="10",resource="cpu",scheduler="default-scheduler",unit="cores"} 0.85"#
        ), "{text}");
        assert!(text.contains(r#"resource="memory",scheduler="default-scheduler",unit="bytes"} 1073741824"#), "{text}");
        // Limits: max(1 + 1, 3) + 0.1 overhead; memory limit 2Gi without overhead.
        assert!(text.contains(
            r#"kube_pod_resource_limit{namespace="ns",node="n1",pod="p",priority="10",resource="cpu",scheduler="default-scheduler",unit="cores"} 3.1"#
        ), "{text}");
        assert!(!text.contains(r#"pod="done""#), "terminal pods are skipped: {text}");
    }
}
