//! `ksched bench --faults`: the workload runs against a misbehaving embedded API server, and the
//! outcome is checked, not just timed:
//!
//! - every pod is bound exactly once (the server's audit of bindings), or reported
//!   unschedulable with the message a fault-free scheduler gives it on the final cluster (once
//!   the faults stopped, the scheduler's informers caught up and its refused pods were retried:
//!   a refusal given while a watch was down may name fewer nodes, as upstream's would);
//! - no pod is lost (neither bound nor reported);
//! - every binding agrees with the final state, no bound pod says `PodScheduled=False`, and no
//!   node holds more than its allocatable;
//! - how long scheduling took to resume after each restart or compaction.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use ksched_apiserver::faults::{AuditRecord, Audited, FaultEvent};
use ksched_apiserver::{FaultSpec, Faults, Store};
use ksched_framework::resource::{pod_requests, RequestOptions, Resource};
use ksched_scheduler::config::KubeSchedulerConfiguration;
use ksched_scheduler::inprocess::InProcessCluster;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;

/// Disruptions whose recovery is timed (the others are continuous).
const TIMED: [&str; 2] = ["restart", "compact"];
/// A disruption counts when a binding happened at most this long before it.
const BUSY: Duration = Duration::from_millis(500);
/// How long binding times are kept for that test (longer than a drain period).
const RECENT: Duration = Duration::from_secs(5);

/// Bindings seen so far, per live pod, and the recovery times measured from them.
#[derive(Default)]
struct Ledger {
    /// `namespace/name` → nodes it was bound to (more than one entry: a double binding).
    bindings: HashMap<String, Vec<String>>,
    /// Pods bound more than once (kept after the pod is forgotten).
    doubles: Vec<String>,
    /// Disruptions that hit while pods were being bound, not yet followed by a binding.
    pending: Vec<FaultEvent>,
    /// Recent binding times (the last few seconds), to tell whether scheduling was busy.
    recent: std::collections::VecDeque<Instant>,
    /// How many of [`Faults::events`] were taken into `pending`.
    events_seen: usize,
    /// Kind → time from the end of each disruption to the next binding.
    recovery: BTreeMap<&'static str, Vec<Duration>>,
    bindings_total: usize,
}

/// Follows a run's audit while it runs (bounded memory: deleted pods are forgotten).
pub struct Chaos {
    faults: Faults,
    /// The spec injected (the one to replay), seed included.
    injected: String,
    ledger: Mutex<Ledger>,
}

impl Chaos {
    /// Faults per `spec`, with the binding audit on.
    pub fn new(spec: FaultSpec) -> Arc<Self> {
        let faults = Faults::with_binding_audit(spec);
        let injected = faults.spec().to_string();
        Arc::new(Chaos { faults, injected, ledger: Mutex::default() })
    }

    /// The handle to give the API server.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Moves the audit and the disruptions recorded so far into the ledger.
    pub fn drain(&self) {
        let records: Vec<AuditRecord> = self.faults.take_audit();
        let events = self.faults.events();
        let mut l = self.ledger.lock();
        for r in &records {
            if matches!(r.what, Audited::Binding { .. }) {
                l.recent.push_back(r.at);
            }
        }
        if let Some(&newest) = l.recent.back() {
            while l.recent.front().is_some_and(|t| newest.duration_since(*t) > RECENT) {
                l.recent.pop_front();
            }
        }
        // Only a disruption that hit while pods were being bound has a recovery to time: one
        // during a lull would count the wait for the next pod.
        let start = l.events_seen.min(events.len());
        let busy: Vec<FaultEvent> = events[start..]
            .iter()
            .filter(|e| TIMED.contains(&e.kind))
            .filter(|e| l.recent.iter().any(|t| *t <= e.at && e.at.duration_since(*t) <= BUSY))
            .cloned()
            .collect();
        l.pending.extend(busy);
        l.events_seen = events.len();
        for r in records {
            let Audited::Binding { namespace, name, node } = r.what else { continue };
            l.bindings_total += 1;
            let key = format!("{namespace}/{name}");
            let nodes = l.bindings.entry(key.clone()).or_default();
            nodes.push(node);
            if nodes.len() == 2 {
                l.doubles.push(key);
            }
            let (done, rest): (Vec<FaultEvent>, Vec<FaultEvent>) =
                std::mem::take(&mut l.pending).into_iter().partition(|e| e.until <= r.at);
            l.pending = rest;
            for e in done {
                l.recovery.entry(e.kind).or_default().push(r.at - e.until);
            }
        }
    }

    /// Forgets a deleted pod (its name is never reused by the bench).
    pub fn forget(&self, key: &str) {
        self.drain();
        self.ledger.lock().bindings.remove(key);
    }

    /// Drains the audit every 200 ms until aborted.
    pub fn spawn_drainer(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                this.drain();
            }
        })
    }

    /// Stops injecting faults (the audit stays on).
    pub fn calm(&self) {
        self.faults.set_spec(FaultSpec::default());
    }

    /// Checks the final state of the run's pods (those labelled `run_label`).
    pub async fn verify(
        &self,
        store: &Store,
        run_label: (&str, &str),
        cfg: &KubeSchedulerConfiguration,
        registry: &ksched_framework::Registry,
        check_messages: bool,
    ) -> anyhow::Result<ChaosReport> {
        self.drain();
        let mut report = ChaosReport {
            faults: self.injected.clone(),
            injected: self.faults.counts().entries().iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            ..ChaosReport::default()
        };
        let pods: Vec<Pod> = store
            .list("v1", "Pod", None)
            .into_iter()
            .filter(|p| {
                p.pointer(&format!("/metadata/labels/{}", run_label.0)).and_then(Value::as_str) == Some(run_label.1)
            })
            .filter_map(|p| serde_json::from_value(p).ok())
            .collect();
        let nodes: Vec<Node> =
            store.list("v1", "Node", None).into_iter().filter_map(|n| serde_json::from_value(n).ok()).collect();
        let refused = self.tally(&mut report, &pods);
        report.overcommitted = overcommitted(&nodes, &pods);
        if check_messages {
            let namespaces: Vec<Namespace> = store
                .list("v1", "Namespace", None)
                .into_iter()
                .filter_map(|n| serde_json::from_value(n).ok())
                .collect();
            let bound: Vec<Pod> = store
                .list("v1", "Pod", None)
                .into_iter()
                .filter_map(|p| serde_json::from_value::<Pod>(p).ok())
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()))
                .collect();
            let (checked, wrong) = oracle(cfg, registry, &nodes, &namespaces, &bound, &refused).await?;
            report.messages_checked = checked;
            report.wrong_messages = wrong;
        }
        Ok(report)
    }

    /// Classifies the run's pods against the ledger; returns the refused ones with their
    /// reported messages.
    fn tally(&self, report: &mut ChaosReport, pods: &[Pod]) -> Vec<(Pod, String)> {
        let l = self.ledger.lock();
        report.bindings = l.bindings_total;
        report.double_bindings = l.doubles.clone();
        let mut refused = Vec::new();
        for p in pods {
            let key = super::cluster::key(p);
            let gated = p.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty());
            if gated {
                continue;
            }
            report.pods += 1;
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
            let cond = pod_scheduled(p.status.as_ref().and_then(|s| s.conditions.as_ref()));
            let seen = l.bindings.get(&key).map(Vec::as_slice).unwrap_or_default();
            match node {
                Some(node) => {
                    report.bound += 1;
                    if seen.is_empty() {
                        report.unrecorded_bindings.push(key.clone());
                    } else if seen.iter().any(|n| *n != node) {
                        report.misplaced.push(format!("{key}: bound to {node}, binding(s) to {}", seen.join(",")));
                    }
                    if cond.is_some_and(|c| c.0 == "False") {
                        report.bound_but_unschedulable.push(key);
                    }
                }
                None => match cond {
                    Some(("False", Some("Unschedulable"), msg)) => {
                        report.refused += 1;
                        if !seen.is_empty() {
                            report.misplaced.push(format!("{key}: unbound, binding(s) to {}", seen.join(",")));
                        }
                        refused.push((p.clone(), msg.unwrap_or_default().to_string()));
                    }
                    _ => report.lost.push(key),
                },
            }
        }
        report.recovery = l
            .recovery
            .iter()
            .map(|(k, v)| {
                let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
                ms.sort_by(f64::total_cmp);
                let median = ms[ms.len() / 2];
                let max = ms[ms.len() - 1];
                (k.to_string(), Recovery { count: ms.len(), median_ms: median, max_ms: max })
            })
            .collect();
        refused
    }
}

/// `(status, reason, message)` of the pod's PodScheduled condition.
fn pod_scheduled(
    conditions: Option<&Vec<k8s_openapi::api::core::v1::PodCondition>>,
) -> Option<(&str, Option<&str>, Option<&str>)> {
    let c = conditions?.iter().find(|c| c.type_ == "PodScheduled")?;
    Some((c.status.as_str(), c.reason.as_deref(), c.message.as_deref()))
}

/// Nodes whose bound pods request more cpu, memory or pods than they allow.
fn overcommitted(nodes: &[Node], pods: &[Pod]) -> Vec<String> {
    let mut used: HashMap<&str, (Resource, i64)> = HashMap::new();
    for p in pods {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { continue };
        let e = used.entry(node).or_default();
        e.0.add(&pod_requests(&p.into(), RequestOptions::default()));
        e.1 += 1;
    }
    let mut out = Vec::new();
    for n in nodes {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        let Some((req, count)) = used.get(name) else { continue };
        let alloc = n.status.as_ref().and_then(|s| s.allocatable.as_ref()).map(Resource::from_list).unwrap_or_default();
        if req.milli_cpu > alloc.milli_cpu || req.memory > alloc.memory || *count > alloc.allowed_pod_number {
            out.push(format!(
                "{name}: {}m cpu / {} bytes / {count} pods requested, {}m / {} / {} allocatable",
                req.milli_cpu, req.memory, alloc.milli_cpu, alloc.memory, alloc.allowed_pod_number
            ));
        }
    }
    out
}

/// Feeds the final cluster to a fault-free in-process scheduler and compares the message it
/// gives each refused pod with the one the run reported. Pods with volumes are left out (the
/// oracle has no claims). Returns (pods compared, mismatches).
async fn oracle(
    cfg: &KubeSchedulerConfiguration,
    registry: &ksched_framework::Registry,
    nodes: &[Node],
    namespaces: &[Namespace],
    bound: &[Pod],
    refused: &[(Pod, String)],
) -> anyhow::Result<(usize, Vec<String>)> {
    let refused: Vec<&(Pod, String)> = refused
        .iter()
        .filter(|(p, _)| {
            p.spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .is_none_or(|v| v.iter().all(|v| v.persistent_volume_claim.is_none()))
        })
        .collect();
    if refused.is_empty() {
        return Ok((0, Vec::new()));
    }
    let mut c = InProcessCluster::new(cfg, registry, Arc::new(ksched_scheduler::metrics::NoopMetrics))?;
    for ns in namespaces {
        c.lister.namespaces.upsert(Arc::new(ns.clone()));
    }
    for n in nodes {
        c.apply_node(n.clone());
    }
    for p in bound {
        c.apply_pod(p.clone());
    }
    let mut waiting: HashSet<String> = HashSet::new();
    for (p, _) in &refused {
        let mut fresh = p.clone();
        fresh.status = None;
        fresh.metadata.resource_version = None;
        waiting.insert(super::cluster::key(&fresh));
        c.apply_pod(fresh);
    }
    c.start();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut wrong = Vec::new();
    for (p, reported) in &refused {
        let (ns, name) =
            (p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref().unwrap_or(""));
        let expected = loop {
            let cur = c.pod(ns, name);
            if let Some(node) = cur.as_ref().and_then(|p| p.spec.as_ref()?.node_name.clone()) {
                break format!("<fits: bound to {node}>");
            }
            if let Some(("False", _, Some(msg))) =
                pod_scheduled(cur.as_ref().and_then(|p| p.status.as_ref()?.conditions.as_ref()))
            {
                break msg.to_string();
            }
            if Instant::now() > deadline {
                break "<no answer within 60s>".to_string();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        if expected != *reported {
            wrong.push(format!("{ns}/{name}: reported {reported:?}, a fault-free scheduler says {expected:?}"));
        }
    }
    c.stop().await;
    Ok((refused.len(), wrong))
}

/// Recovery times after one kind of disruption.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Recovery {
    /// Disruptions followed by a binding.
    pub count: usize,
    /// Median time from the end of the disruption to the next binding.
    pub median_ms: f64,
    /// Longest such time.
    pub max_ms: f64,
}

/// What a `--faults` run proved (`results.json` field `chaos`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChaosReport {
    /// The spec, seed included (replay with `--faults` set to it).
    pub faults: String,
    /// Times each fault fired.
    pub injected: BTreeMap<String, u64>,
    /// Pods of the run checked (gated ones excepted).
    pub pods: usize,
    /// Of which bound.
    pub bound: usize,
    /// Of which reported unschedulable.
    pub refused: usize,
    /// Bindings the server applied.
    pub bindings: usize,
    /// Pods neither bound nor reported unschedulable.
    pub lost: Vec<String>,
    /// Pods bound more than once.
    pub double_bindings: Vec<String>,
    /// Bound pods whose binding the audit never saw.
    pub unrecorded_bindings: Vec<String>,
    /// Bindings that disagree with the final state.
    pub misplaced: Vec<String>,
    /// Bound pods that still say PodScheduled=False.
    pub bound_but_unschedulable: Vec<String>,
    /// Nodes holding more than their allocatable.
    pub overcommitted: Vec<String>,
    /// Refused pods whose message was compared with a fault-free scheduler's.
    pub messages_checked: usize,
    /// Refused pods whose message differs.
    pub wrong_messages: Vec<String>,
    /// Kind → time to the next binding after each disruption.
    pub recovery: BTreeMap<String, Recovery>,
}

impl ChaosReport {
    /// Every violated invariant, one line each.
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut add = |what: &str, items: &[String]| {
            if !items.is_empty() {
                let shown: Vec<&str> = items.iter().take(5).map(String::as_str).collect();
                v.push(format!(
                    "{} {what}: {}{}",
                    items.len(),
                    shown.join("; "),
                    if items.len() > 5 { "; ..." } else { "" }
                ));
            }
        };
        add("pod(s) lost", &self.lost);
        add("double binding(s)", &self.double_bindings);
        add("binding(s) missing from the audit", &self.unrecorded_bindings);
        add("binding(s) disagreeing with the final state", &self.misplaced);
        add("bound pod(s) reported unschedulable", &self.bound_but_unschedulable);
        add("overcommitted node(s)", &self.overcommitted);
        add("wrong unschedulable message(s)", &self.wrong_messages);
        v
    }

    /// The human summary.
    pub fn summary(&self) -> String {
        let injected: Vec<String> =
            self.injected.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} {n}")).collect();
        let recovery: Vec<String> = self
            .recovery
            .iter()
            .map(|(k, r)| format!("{k}: {} times, median {:.0} ms, max {:.0} ms", r.count, r.median_ms, r.max_ms))
            .collect();
        format!(
            "  chaos: faults {}\n  injected: {}\n  pods {} (bound {}, unschedulable {}), bindings {}, lost {}, double bindings {}, \
             overcommitted nodes {}, bound-but-unschedulable {}, messages checked {} (wrong {})\n  recovery: {}",
            self.faults,
            if injected.is_empty() { "none".into() } else { injected.join(", ") },
            self.pods,
            self.bound,
            self.refused,
            self.bindings,
            self.lost.len(),
            self.double_bindings.len(),
            self.overcommitted.len(),
            self.bound_but_unschedulable.len(),
            self.messages_checked,
            self.wrong_messages.len(),
            if recovery.is_empty() { "-".into() } else { recovery.join("; ") },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, cpu: &str, pods: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": pods}}}))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, node: Option<&str>) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": cpu}}}]}}))
        .unwrap()
    }

    #[test]
    fn overcommitment_is_found_per_resource_and_pod_count() {
        let nodes = [node("a", "2", "10"), node("b", "4", "1"), node("c", "1", "10")];
        let pods = [
            pod("p1", "1500m", Some("a")),
            pod("p2", "600m", Some("a")),
            pod("p3", "1", Some("b")),
            pod("p4", "1", Some("b")),
            pod("p5", "1", Some("c")),
            pod("p6", "5", None),
        ];
        let out = overcommitted(&nodes, &pods);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[0].starts_with("a: 2100m cpu"), "{out:?}");
        assert!(out[1].starts_with("b: 2000m cpu / 0 bytes / 2 pods requested"), "{out:?}");
    }

    #[test]
    fn violations_list_each_broken_invariant() {
        let mut r = ChaosReport::default();
        assert!(r.violations().is_empty());
        r.lost = vec!["default/a".into()];
        r.double_bindings = (0..7).map(|i| format!("default/p{i}")).collect();
        let v = r.violations();
        assert_eq!(v[0], "1 pod(s) lost: default/a");
        assert!(v[1].starts_with("7 double binding(s): default/p0;") && v[1].ends_with("; ..."), "{v:?}");
    }
}
