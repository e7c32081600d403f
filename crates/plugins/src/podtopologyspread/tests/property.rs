//! Property-style tests on random small clusters (seeded LCG): placing pods only on nodes that
//! pass Filter never lets the skew exceed maxSkew, and the AddPod/RemovePod extensions agree
//! with recomputing PreFilter from scratch.

use std::collections::BTreeMap;
use std::sync::Arc;

use ksched_framework::listers::MemoryLister;
use ksched_framework::{CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin, Snapshot};

use super::*;
use crate::nodeaffinity::RequiredNodeAffinity;
use crate::podtopologyspread::common::Constraint;

struct Scenario {
    nodes: Vec<NodeInfo>,
    incoming: PodB,
}

/// A random cluster of 2–8 nodes over 1–4 zones, some tainted, some without a zone label, some
/// in another pool, with noise pods (other namespace, other labels, terminating) and a few
/// matching pods; and an incoming `app=web` pod with one or two hard constraints.
fn scenario(rng: &mut Lcg) -> Scenario {
    let zones = 1 + rng.below(4);
    let node_count = 2 + rng.below(7);
    let mut specs = Vec::new();
    for i in 0..node_count {
        let mut s = format!("n{i} node=n{i} pool={}", if rng.chance(4) { "b" } else { "a" });
        if !rng.chance(8) {
            s.push_str(&format!(" zone=z{}", rng.below(zones)));
        }
        if rng.chance(5) {
            s.push_str(" tainted");
        }
        specs.push(s);
    }
    let mut pods = Vec::new();
    for j in 0..rng.below(12) {
        let on = format!("n{}", rng.below(node_count));
        let extra = match rng.below(5) {
            0 => " ns:other",
            1 => " term",
            2 => " app=db",
            _ => "",
        };
        let app = if extra == " app=db" { "" } else { " app=web" };
        pods.push(format!("e{j} {on}{app}{extra}"));
    }
    let spec_refs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let pod_refs: Vec<&str> = pods.iter().map(String::as_str).collect();
    let nodes = node_infos(&spec_refs, &pod_refs);

    let constraint = |key: &str, rng: &mut Lcg| {
        let mut c = tsc(1 + rng.below(3) as i32, key, DNS, match_labels(&[("app", "web")]));
        if rng.chance(3) {
            c = c.min_domains(1 + rng.below(5) as i32);
        }
        if rng.chance(2) {
            c = c.taints_policy("Honor");
        }
        if rng.chance(3) {
            c = c.affinity_policy("Ignore");
        }
        c
    };
    let mut incoming = pod("incoming").label("app", "web");
    incoming = incoming.spread(constraint(if rng.chance(2) { "zone" } else { "node" }, rng));
    if rng.chance(3) {
        incoming = incoming.spread(constraint("node", rng));
    }
    if rng.chance(3) {
        incoming = incoming.node_selector("pool", "a");
    }
    if rng.chance(4) {
        incoming = incoming.toleration("node.kubernetes.io/unschedulable");
    }
    Scenario { nodes, incoming }
}

/// Brute force, independent of the plugin: matching pods per eligible domain of one constraint.
fn domain_counts(nodes: &[NodeInfo], incoming: &PodInfo, c: &Constraint, all: &[Constraint]) -> BTreeMap<String, i64> {
    let required = RequiredNodeAffinity::new(&incoming.pod);
    let mut counts = BTreeMap::new();
    for ni in nodes {
        let node = ni.node().expect("node");
        let labels = ni.labels();
        if !all.iter().all(|c| labels.contains_key(&c.topology_key)) || !c.includes_node(&incoming.pod, node, &required)
        {
            continue;
        }
        let matching = ni
            .pods
            .iter()
            .filter(|p| p.pod.metadata.deletion_timestamp.is_none() && p.namespace() == "default")
            .filter(|p| c.selector.matches(p.labels()))
            .count() as i64;
        *counts.entry(labels.get(&c.topology_key).unwrap_or_default().to_string()).or_insert(0) += matching;
    }
    counts
}

fn fresh_state(pl: &PodTopologySpread, nodes: &[NodeInfo], incoming: &PodInfo) -> (Snapshot, CycleState) {
    let snap = Snapshot::from_node_infos(nodes.to_vec());
    let mut state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut state, incoming, &snap);
    assert!(status.is_success(), "{status}");
    (snap, state)
}

fn counts_and_min(state: &CycleState) -> Vec<(BTreeMap<String, i64>, i64)> {
    let s = pre_filter_state(state);
    s.tp_value_to_match_num
        .iter()
        .zip(&s.critical_paths)
        .map(|(m, p)| (m.iter().map(|(k, v)| (k.clone(), *v)).collect(), p.0[0].match_num))
        .collect()
}

#[test]
fn filter_never_lets_skew_exceed_max_skew() {
    let pl = plugin_list(&[], MemoryLister::default());
    let mut placements = 0;
    for seed in 0..300u64 {
        let mut rng = Lcg(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5);
        let Scenario { mut nodes, incoming } = scenario(&mut rng);
        // Start from a cluster without matching pods on eligible nodes, so the invariant holds
        // initially; noise pods stay.
        for ni in &mut nodes {
            let uids: Vec<String> = ni
                .pods
                .iter()
                .filter(|p| p.namespace() == "default" && p.pod.metadata.deletion_timestamp.is_none())
                .filter(|p| p.labels().get("app") == Some("web"))
                .map(|p| p.uid().to_string())
                .collect();
            for uid in uids {
                ni.remove_pod(&uid);
            }
        }
        let incoming_info = incoming.info();
        for step in 0..25 {
            let (snap, state) = fresh_state(&pl, &nodes, &incoming_info);
            let constraints = pre_filter_state(&state).constraints.clone();
            let fits: Vec<usize> =
                (0..nodes.len()).filter(|&i| pl.filter(&state, &incoming_info, &snap.list()[i]).is_success()).collect();
            if fits.is_empty() {
                break;
            }
            let chosen = fits[rng.below(fits.len() as u64) as usize];
            let name = format!("placed-{seed}-{step}");
            let placed = incoming.clone().uid(&name).node(nodes[chosen].name());
            let placed = Arc::new(PodInfo::new(Arc::new({
                let mut p = placed.obj();
                p.metadata.name = Some(name.clone());
                p
            })));
            nodes[chosen].add_pod(placed);
            placements += 1;
            for c in constraints.iter() {
                let counts = domain_counts(&nodes, &incoming_info, c, &constraints);
                let Some(max) = counts.values().max() else { continue };
                let min = if counts.len() < c.min_domains.max(0) as usize {
                    0
                } else {
                    *counts.values().min().expect("non-empty")
                };
                assert!(
                    max - min <= i64::from(c.max_skew),
                    "seed {seed} step {step}: skew {} > maxSkew {} on {:?}: {counts:?}",
                    max - min,
                    c.max_skew,
                    c.topology_key
                );
            }
        }
    }
    assert!(placements > 1000, "the scenarios should place many pods, placed {placements}");
}

#[test]
fn extensions_match_recomputation() {
    let pl = plugin_list(&[], MemoryLister::default());
    for seed in 0..300u64 {
        let mut rng = Lcg(seed ^ 0xA5A5_5A5A);
        let Scenario { mut nodes, incoming } = scenario(&mut rng);
        let incoming_info = incoming.info();
        let i = rng.below(nodes.len() as u64) as usize;

        // AddPod of a (possibly non-matching, possibly foreign) pod equals PreFilter with it.
        let (snap, mut state) = fresh_state(&pl, &nodes, &incoming_info);
        let labels = if rng.chance(3) { "app=db" } else { "app=web" };
        let ns = if rng.chance(4) { " ns:other" } else { "" };
        let added = Arc::new(PodInfo::new(Arc::new(existing(&format!("added {} {labels}{ns}", nodes[i].name())))));
        assert!(pl.add_pod(&mut state, &incoming_info, &added, &snap.list()[i]).is_success());
        let mut with_added = nodes.clone();
        with_added[i].add_pod(added);
        let (_, recomputed) = fresh_state(&pl, &with_added, &incoming_info);
        assert_eq!(counts_and_min(&state), counts_and_min(&recomputed), "seed {seed}: add_pod");

        // RemovePod of a live pod equals PreFilter without it.
        let Some(victim) = nodes[i].pods.iter().find(|p| p.pod.metadata.deletion_timestamp.is_none()).cloned() else {
            continue;
        };
        let (snap, mut state) = fresh_state(&pl, &nodes, &incoming_info);
        assert!(pl.remove_pod(&mut state, &incoming_info, &victim, &snap.list()[i]).is_success());
        nodes[i].remove_pod(victim.uid());
        let (_, recomputed) = fresh_state(&pl, &nodes, &incoming_info);
        assert_eq!(counts_and_min(&state), counts_and_min(&recomputed), "seed {seed}: remove_pod");
    }
}
