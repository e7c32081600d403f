//! "Fits if": single changes to the pod or to one node that would let an unschedulable pod in.
//! Every candidate change is applied to a copy and checked by re-running the framework; only the
//! confirmed ones are reported.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Toleration;
use ksched_framework::pod::Pod;
use ksched_framework::resource::Resource;
use ksched_framework::{NodeInfo, PodInfo};
use serde::Serialize;

use super::{evaluate, Evaluation, ExplainInput};

/// How many nodes a resource fix lists at most (the cheapest first).
const MAX_RESOURCE_FIXES: usize = 3;
/// How many distinct taints are tried one by one.
const MAX_TAINTS_TRIED: usize = 8;
/// How far above its current value a topology spread maxSkew is tried.
const MAX_SKEW_STEPS: i32 = 10;

/// A confirmed change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fix {
    /// What to change, e.g. `250m cpu is freed on node-a3`.
    pub change: String,
    /// The nodes the pod fits on with the change.
    pub nodes: Vec<String>,
}

impl Fix {
    /// `fits on <node | N nodes> if <change>`.
    pub fn sentence(&self) -> String {
        let on = match self.nodes.as_slice() {
            [one] => one.clone(),
            many => format!("{} nodes", many.len()),
        };
        format!("fits on {on} if {}", self.change)
    }
}

/// Finds the confirmed fixes for a pod no node fits.
pub(crate) fn find(input: &ExplainInput<'_>, pod: &PodInfo, eval: &Evaluation<'_>) -> Vec<Fix> {
    // A PreFilter rejection leaves no node to free resources on; pod changes may still help.
    let mut out = Vec::new();
    let rejecting: std::collections::BTreeSet<&str> = eval
        .diagnosis
        .node_to_status
        .statuses
        .values()
        .filter_map(|s| s.plugin())
        .chain(eval.diagnosis.unschedulable_plugins.iter().map(String::as_str))
        .collect();
    if rejecting.contains("NodeResourcesFit") {
        out.extend(free_resources(input, pod, eval));
    }
    let confirm = |change: String, mutate: &dyn Fn(&mut Pod)| -> Option<Fix> {
        let mut p = (*pod.pod).clone();
        mutate(&mut p);
        let pi = PodInfo::new(Arc::new(p));
        let e = evaluate(input.framework, input.snapshot, &pi, input.nominated).ok()?;
        (!e.feasible.is_empty())
            .then(|| Fix { change, nodes: e.feasible.iter().map(|n| n.name().to_string()).collect() })
    };
    if rejecting.contains("TaintToleration") || rejecting.contains("NodeUnschedulable") {
        let taints = untolerated_taints(input, eval);
        let mut any = false;
        for (t, _) in taints.iter().take(MAX_TAINTS_TRIED) {
            let tol = t.clone();
            if let Some(f) = confirm(format!("it tolerates {}", describe(&tol)), &|p: &mut Pod| add_toleration(p, &tol))
            {
                out.push(f);
                any = true;
            }
        }
        if !any && taints.len() > 1 {
            let all: Vec<Toleration> = taints.iter().map(|(t, _)| t.clone()).collect();
            let names: Vec<String> = all.iter().map(describe).collect();
            let f = confirm(format!("it tolerates {}", names.join(", ")), &|p: &mut Pod| {
                for t in &all {
                    add_toleration(p, t);
                }
            });
            out.extend(f);
        }
    }
    let spec = pod.pod.spec.clone().unwrap_or_default();
    if rejecting.contains("NodeAffinity") {
        let selector = spec.node_selector.clone().unwrap_or_default();
        let mut any = false;
        for (k, v) in &selector {
            let key = k.clone();
            let f = confirm(format!("nodeSelector {k}={v} is removed"), &|p: &mut Pod| {
                if let Some(sel) = p.spec.as_mut().and_then(|s| s.node_selector.as_mut()) {
                    sel.remove(&key);
                }
            });
            any |= f.is_some();
            out.extend(f);
        }
        if !any && selector.len() > 1 {
            out.extend(confirm("its nodeSelector is removed".into(), &|p: &mut Pod| {
                if let Some(s) = p.spec.as_mut() {
                    s.node_selector = None;
                }
            }));
        }
        let has_required = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .is_some_and(|na| na.required_during_scheduling_ignored_during_execution.is_some());
        if has_required {
            out.extend(confirm("its required node affinity is removed".into(), &|p: &mut Pod| {
                if let Some(na) =
                    p.spec.as_mut().and_then(|s| s.affinity.as_mut()).and_then(|a| a.node_affinity.as_mut())
                {
                    na.required_during_scheduling_ignored_during_execution = None;
                }
            }));
        }
    }
    if rejecting.contains("InterPodAffinity") {
        let aff = spec.affinity.clone().unwrap_or_default();
        if aff.pod_affinity.as_ref().is_some_and(|a| a.required_during_scheduling_ignored_during_execution.is_some()) {
            out.extend(confirm("its required pod affinity is removed".into(), &|p: &mut Pod| {
                if let Some(a) = p.spec.as_mut().and_then(|s| s.affinity.as_mut()).and_then(|a| a.pod_affinity.as_mut())
                {
                    a.required_during_scheduling_ignored_during_execution = None;
                }
            }));
        }
        if aff
            .pod_anti_affinity
            .as_ref()
            .is_some_and(|a| a.required_during_scheduling_ignored_during_execution.is_some())
        {
            out.extend(confirm("its required pod anti-affinity is removed".into(), &|p: &mut Pod| {
                if let Some(a) =
                    p.spec.as_mut().and_then(|s| s.affinity.as_mut()).and_then(|a| a.pod_anti_affinity.as_mut())
                {
                    a.required_during_scheduling_ignored_during_execution = None;
                }
            }));
        }
    }
    if rejecting.contains("PodTopologySpread") {
        let constraints = spec.topology_spread_constraints.clone().unwrap_or_default();
        for (i, c) in constraints.iter().enumerate() {
            if c.when_unsatisfiable != "DoNotSchedule" {
                continue;
            }
            for skew in c.max_skew + 1..=c.max_skew + MAX_SKEW_STEPS {
                let what = if constraints.len() == 1 {
                    format!("maxSkew were {skew}")
                } else {
                    format!("maxSkew of the {} constraint were {skew}", c.topology_key)
                };
                let f = confirm(what, &|p: &mut Pod| {
                    if let Some(cs) = p.spec.as_mut().and_then(|s| s.topology_spread_constraints.as_mut()) {
                        cs[i].max_skew = skew;
                    }
                });
                if let Some(f) = f {
                    out.push(f);
                    break;
                }
            }
        }
    }
    out
}

/// Nodes rejected only for resources: how much would have to be freed on each, confirmed by
/// running every filter on a copy of the node with that much more room.
fn free_resources(input: &ExplainInput<'_>, pod: &PodInfo, eval: &Evaluation<'_>) -> Vec<Fix> {
    let mut found: Vec<(f64, String, String)> = Vec::new();
    for (name, status) in &eval.diagnosis.node_to_status.statuses {
        if status.plugin() != Some("NodeResourcesFit") {
            continue;
        }
        let Ok(ni) = input.snapshot.get(name) else { continue };
        let (short, cost) = shortfall(pod, ni);
        if short.is_empty() {
            continue;
        }
        let mut copy = NodeInfo::clone(ni);
        for (res, amount) in &short {
            grow(&mut copy.allocatable, res, *amount);
        }
        let nom = input.nominated.get(name).cloned().unwrap_or_default();
        let st = if nom.is_empty() {
            input.framework.run_filter_plugins(&eval.state, pod, &copy)
        } else {
            let filters = input.framework.active_filters(&eval.state);
            input.framework.run_filters_with_nominated_pods(&filters, &eval.state, pod, &copy, &nom)
        };
        if st.is_success() {
            let what: Vec<String> = short.iter().map(|(r, a)| format!("{} {r}", format_amount(r, *a))).collect();
            found.push((cost, name.clone(), what.join(" and ")));
        }
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    found
        .into_iter()
        .take(MAX_RESOURCE_FIXES)
        .map(|(_, node, what)| {
            let verb = if what.contains(" and ") { "are" } else { "is" };
            Fix { change: format!("{what} {verb} freed"), nodes: vec![node] }
        })
        .collect()
}

/// Per resource, how much the node lacks for the pod, and the sum of those amounts as fractions
/// of the node's allocatable (to rank nodes by how small the change is).
fn shortfall(pod: &PodInfo, ni: &NodeInfo) -> (Vec<(String, i64)>, f64) {
    let mut out = Vec::new();
    let mut cost = 0.0;
    let mut check = |name: &str, want: i64, used: i64, alloc: i64| {
        let lack = want + used - alloc;
        if want > 0 && lack > 0 {
            out.push((name.to_string(), lack));
            cost += lack as f64 / alloc.max(1) as f64;
        }
    };
    let req = &pod.requests;
    check("cpu", req.milli_cpu, ni.requested.milli_cpu, ni.allocatable.milli_cpu);
    check("memory", req.memory, ni.requested.memory, ni.allocatable.memory);
    check("ephemeral-storage", req.ephemeral_storage, ni.requested.ephemeral_storage, ni.allocatable.ephemeral_storage);
    for (k, v) in req.scalar_resources.iter() {
        check(k, *v, ni.requested.get(k), ni.allocatable.get(k));
    }
    check("pods", 1, ni.pods.len() as i64, ni.allocatable.allowed_pod_number);
    (out, cost)
}

fn grow(r: &mut Resource, name: &str, amount: i64) {
    match name {
        "cpu" => r.milli_cpu += amount,
        "memory" => r.memory += amount,
        "ephemeral-storage" => r.ephemeral_storage += amount,
        "pods" => r.allowed_pod_number += amount,
        other => *r.scalar_resources.entry(other.to_string()).or_default() += amount,
    }
}

/// `250m`, `2` (cpu); `512Mi`, `3Gi` (byte quantities); plain numbers otherwise.
pub(crate) fn format_amount(resource: &str, amount: i64) -> String {
    match resource {
        "cpu" if amount % 1000 == 0 => (amount / 1000).to_string(),
        "cpu" => format!("{amount}m"),
        "memory" | "ephemeral-storage" => format_bytes(amount),
        r if r.starts_with("hugepages-") => format_bytes(amount),
        _ => amount.to_string(),
    }
}

fn format_bytes(b: i64) -> String {
    for (unit, size) in [("Ti", 1i64 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if b >= size && b % size == 0 {
            return format!("{}{unit}", b / size);
        }
    }
    // Round up to the next Mi so that freeing that much is enough.
    if b > 1 << 20 {
        return format!("{}Mi", (b + (1 << 20) - 1) >> 20);
    }
    b.to_string()
}

/// Taints with a scheduling effect on the nodes rejected by TaintToleration or
/// NodeUnschedulable, most frequent first, as tolerations that would match them.
fn untolerated_taints(input: &ExplainInput<'_>, eval: &Evaluation<'_>) -> Vec<(Toleration, usize)> {
    let mut counts: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for (name, status) in &eval.diagnosis.node_to_status.statuses {
        let plugin = status.plugin().unwrap_or_default();
        let Ok(ni) = input.snapshot.get(name) else { continue };
        if plugin == "TaintToleration" {
            for t in ni.taints() {
                if t.effect == "NoSchedule" || t.effect == "NoExecute" {
                    let key = (t.key.clone(), t.value.clone().unwrap_or_default(), t.effect.clone());
                    *counts.entry(key).or_default() += 1;
                }
            }
        } else if plugin == "NodeUnschedulable" {
            let key = ("node.kubernetes.io/unschedulable".to_string(), String::new(), "NoSchedule".to_string());
            *counts.entry(key).or_default() += 1;
        }
    }
    let mut out: Vec<(Toleration, usize)> = counts
        .into_iter()
        .map(|((key, value, effect), n)| {
            let t = if value.is_empty() {
                Toleration {
                    key: Some(key),
                    operator: Some("Exists".into()),
                    effect: Some(effect),
                    ..Default::default()
                }
            } else {
                Toleration {
                    key: Some(key),
                    operator: Some("Equal".into()),
                    value: Some(value),
                    effect: Some(effect),
                    ..Default::default()
                }
            };
            (t, n)
        })
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.1));
    out
}

fn describe(t: &Toleration) -> String {
    let key = t.key.as_deref().unwrap_or_default();
    let effect = t.effect.as_deref().unwrap_or_default();
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{key}={v}:{effect}"),
        _ => format!("{key}:{effect}"),
    }
}

fn add_toleration(p: &mut Pod, t: &Toleration) {
    let spec = p.spec.get_or_insert_with(Default::default);
    let mut tolerations = spec.tolerations.as_deref().unwrap_or_default().to_vec();
    tolerations.push(t.clone());
    spec.tolerations = Some(tolerations.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_printed_as_quantities() {
        assert_eq!(format_amount("cpu", 250), "250m");
        assert_eq!(format_amount("cpu", 2000), "2");
        assert_eq!(format_amount("memory", 1 << 30), "1Gi");
        assert_eq!(format_amount("memory", 3 * (1 << 20)), "3Mi");
        assert_eq!(format_amount("memory", (1 << 20) + 1), "2Mi");
        assert_eq!(format_amount("nvidia.com/gpu", 2), "2");
    }
}
