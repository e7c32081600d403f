//! The plugin against a straightforward reference of upstream's algorithm on random clusters
//! (seeded LCG): Filter statuses and normalized scores on every node, for fresh PreFilter and
//! PreScore, after AddPod/RemovePod, and as the cluster evolves under one plugin instance whose
//! per-node index is updated incrementally (snapshots share unchanged NodeInfos as the cache's
//! do).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ksched_framework::{
    Code, CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin, PreScorePlugin,
    ScorePlugin, Snapshot, MAX_NODE_SCORE,
};

use super::*;
use crate::nodeaffinity::RequiredNodeAffinity;
use crate::podtopologyspread::common::{self, Constraint};
use crate::podtopologyspread::{
    ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH, LABEL_TOPOLOGY_ZONE as ZONE,
};

/// A node spec for [`node`]: hostname, maybe a zone (sometimes ""), a pool, maybe a taint.
fn random_node(rng: &mut Lcg, name: &str, zones: u64) -> String {
    let mut s = format!("{name} {HOSTNAME}={name} pool={}", if rng.chance(4) { "b" } else { "a" });
    if !rng.chance(6) {
        let zone = if rng.chance(10) { String::new() } else { format!("z{}", rng.below(zones)) };
        s.push_str(&format!(" {ZONE}={zone}"));
    }
    if rng.chance(5) {
        s.push_str(" tainted");
    }
    s
}

/// An existing pod on `node`: matching or not, in another namespace, terminating, two versions.
fn random_pod(rng: &mut Lcg, name: &str, node: &str, live: bool) -> Arc<PodInfo> {
    let mut spec = format!("{name} {node}");
    spec.push_str(if rng.chance(4) { " app=db" } else { " app=web" });
    spec.push_str(if rng.chance(2) { " ver=1" } else { " ver=2" });
    if rng.chance(5) {
        spec.push_str(" ns:other");
    }
    if !live && rng.chance(6) {
        spec.push_str(" term");
    }
    Arc::new(PodInfo::new(Arc::new(existing(&spec))))
}

fn random_constraint(rng: &mut Lcg, when: &str, incremental: bool) -> Tsc {
    let key = rng.pick(&[ZONE, ZONE, HOSTNAME, "pool"]);
    let selector = match rng.below(if incremental { 3 } else { 4 }) {
        0 | 1 => match_labels(&[("app", "web")]),
        2 => exists("app"),
        // `{}` selects every pod: upstream counts none of them in PreFilter but does count them
        // in AddPod, so it is left out where the two are compared.
        _ => Some(json!({})),
    };
    let mut c = tsc(1 + rng.below(3) as i32, key, when, selector);
    if rng.chance(3) {
        c = c.min_domains(1 + rng.below(5) as i32);
    }
    match rng.below(3) {
        0 => c = c.taints_policy("Honor"),
        1 => c = c.taints_policy("Ignore"),
        _ => {}
    }
    match rng.below(3) {
        0 => c = c.affinity_policy("Honor"),
        1 => c = c.affinity_policy("Ignore"),
        _ => {}
    }
    if rng.chance(3) {
        c = c.match_label_keys(&["ver"]);
    }
    c
}

/// The incoming pod: own hard and soft constraints, or none (then the defaults apply).
fn random_incoming(rng: &mut Lcg, incremental: bool) -> PodInfo {
    let mut p = pod("incoming").label("app", "web").label("ver", if rng.chance(2) { "1" } else { "2" });
    if !rng.chance(4) {
        for _ in 0..rng.below(3) {
            p = p.spread(random_constraint(rng, DNS, incremental));
        }
        for _ in 0..rng.below(3) {
            p = p.spread(random_constraint(rng, SA, incremental));
        }
    }
    if rng.chance(3) {
        p = p.node_selector("pool", "a");
    }
    if rng.chance(4) {
        p = p.toleration("node.kubernetes.io/unschedulable");
    }
    p.info()
}

/// A plugin with System defaulting (Services select `app=web`) or List defaulting.
fn random_plugin(rng: &mut Lcg) -> PodTopologySpread {
    if rng.chance(2) {
        plugin_system(services(&[&[("app", "web")]]))
    } else {
        plugin_list(&[tsc(1, ZONE, DNS, None), tsc(2, HOSTNAME, SA, None)], services(&[&[("app", "web")]]))
    }
}

fn snapshot_of(nodes: &[Arc<NodeInfo>]) -> Snapshot {
    let mut s = Snapshot {
        node_info_list: nodes.to_vec(),
        index: nodes.iter().enumerate().map(|(i, n)| (n.name().to_string(), i)).collect(),
        ..Default::default()
    };
    s.rebuild_derived();
    s
}

/// Upstream's countPodsMatchSelector.
fn count(ni: &NodeInfo, c: &Constraint, namespace: &str) -> i64 {
    if c.selector.is_everything() {
        return 0;
    }
    ni.pods
        .iter()
        .filter(|p| p.pod.metadata.deletion_timestamp.is_none() && p.namespace() == namespace)
        .filter(|p| c.selector.matches(p.labels()))
        .count() as i64
}

fn has_all_keys(ni: &NodeInfo, cs: &[Constraint]) -> bool {
    cs.iter().all(|c| ni.labels().contains_key(&c.topology_key))
}

fn included(ni: &NodeInfo, c: &Constraint, pod: &PodInfo) -> bool {
    c.includes_node(&pod.pod, ni.node().expect("node"), &RequiredNodeAffinity::new(&pod.pod))
}

/// Filter outcome per node, as (code, reasons), from counts recomputed over `nodes`.
fn reference_filter(nodes: &[Arc<NodeInfo>], pod: &PodInfo, cs: &[Constraint]) -> Vec<(Code, Vec<String>)> {
    let per_constraint: Vec<(BTreeMap<String, i64>, i64)> = cs
        .iter()
        .map(|c| {
            let mut counts = BTreeMap::new();
            for ni in nodes.iter().filter(|ni| has_all_keys(ni, cs) && included(ni, c, pod)) {
                *counts.entry(ni.labels().get(&c.topology_key).unwrap_or_default().to_string()).or_insert(0) +=
                    count(ni, c, pod.namespace());
            }
            let min = if counts.len() < c.min_domains.max(0) as usize {
                0
            } else {
                counts.values().copied().min().unwrap_or(i64::from(i32::MAX))
            };
            (counts, min)
        })
        .collect();
    nodes
        .iter()
        .map(|ni| {
            for (c, (counts, min)) in cs.iter().zip(&per_constraint) {
                let Some(value) = ni.labels().get(&c.topology_key) else {
                    return (Code::UnschedulableAndUnresolvable, vec![ERR_REASON_NODE_LABEL_NOT_MATCH.to_string()]);
                };
                let self_match = i64::from(c.selector.matches(pod.labels()));
                if counts.get(value).copied().unwrap_or(0) + self_match - min > i64::from(c.max_skew) {
                    return (Code::Unschedulable, vec![ERR_REASON_CONSTRAINTS_NOT_MATCH.to_string()]);
                }
            }
            (Code::Success, Vec::new())
        })
        .collect()
}

/// Normalized scores of `filtered`.
fn reference_scores(
    all: &[Arc<NodeInfo>],
    filtered: &[Arc<NodeInfo>],
    pod: &PodInfo,
    cs: &[Constraint],
    require_all: bool,
) -> Vec<i64> {
    let ignored: BTreeSet<&str> =
        filtered.iter().filter(|ni| require_all && !has_all_keys(ni, cs)).map(|ni| ni.name()).collect();
    let value = |ni: &NodeInfo, c: &Constraint| ni.labels().get(&c.topology_key).unwrap_or_default().to_string();
    let mut counts: Vec<BTreeMap<String, i64>> = vec![BTreeMap::new(); cs.len()];
    for ni in filtered.iter().filter(|ni| !ignored.contains(ni.name())) {
        for (i, c) in cs.iter().enumerate().filter(|(_, c)| !c.is_hostname()) {
            counts[i].entry(value(ni, c)).or_insert(0);
        }
    }
    let weights: Vec<f64> = cs
        .iter()
        .zip(&counts)
        .map(|(c, m)| {
            let size = if c.is_hostname() { filtered.len() - ignored.len() } else { m.len() };
            ((size + 2) as f64).ln()
        })
        .collect();
    for ni in all.iter().filter(|ni| !require_all || has_all_keys(ni, cs)) {
        for (i, c) in cs.iter().enumerate() {
            if !included(ni, c, pod) {
                continue;
            }
            if let Some(total) = counts[i].get_mut(&value(ni, c)) {
                *total += count(ni, c, pod.namespace());
            }
        }
    }
    let raw: Vec<Option<i64>> = filtered
        .iter()
        .map(|ni| {
            if ignored.contains(ni.name()) {
                return None;
            }
            let mut score = 0.0;
            for (i, c) in cs.iter().enumerate() {
                let Some(v) = ni.labels().get(&c.topology_key) else { continue };
                let n = if c.is_hostname() { count(ni, c, pod.namespace()) } else { counts[i][v] };
                score += n as f64 * weights[i] + f64::from(c.max_skew - 1);
            }
            Some(score.round() as i64)
        })
        .collect();
    let min = raw.iter().flatten().copied().min().unwrap_or(i64::MAX);
    let max = raw.iter().flatten().copied().max().unwrap_or(0).max(0);
    raw.iter()
        .map(|s| match s {
            None => 0,
            Some(_) if max == 0 => MAX_NODE_SCORE,
            Some(s) => MAX_NODE_SCORE * (max + min - s) / max,
        })
        .collect()
}

fn plugin_filter(
    pl: &PodTopologySpread,
    state: &CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
) -> Vec<(Code, Vec<String>)> {
    nodes
        .iter()
        .map(|ni| {
            let s = pl.filter(state, pod, ni);
            (s.code(), s.reasons().to_vec())
        })
        .collect()
}

/// Checks PreFilter/Filter and PreScore/Score/NormalizeScore of `pl` on `nodes` against the
/// reference; with `extensions`, also AddPod/RemovePod of random pods.
fn check(pl: &PodTopologySpread, rng: &mut Lcg, nodes: &[Arc<NodeInfo>], pod: &PodInfo, ctx: &str, extensions: bool) {
    let snap = snapshot_of(nodes);
    let hard = pl.hard_constraints(&pod.pod).expect("valid constraints");
    let mut state = CycleState::new();
    let (_, status) = pl.pre_filter(&mut state, pod, &snap);
    if hard.is_empty() {
        assert!(status.is_skip(), "{ctx}: {status}");
    } else {
        assert!(status.is_success(), "{ctx}: {status}");
        let want = reference_filter(nodes, pod, &hard);
        assert_eq!(plugin_filter(pl, &state, pod, nodes), want, "{ctx}: filter");

        let skip_extensions = hard.iter().any(|c| c.selector.is_everything());
        if extensions && !skip_extensions && !nodes.is_empty() {
            let i = rng.below(nodes.len() as u64) as usize;
            let added = random_pod(rng, "added", nodes[i].name(), true);
            let mut with_added = nodes.to_vec();
            Arc::make_mut(&mut with_added[i]).add_pod(added.clone());
            let mut s = state.clone();
            assert!(pl.add_pod(&mut s, pod, &added, &with_added[i]).is_success());
            let want = reference_filter(&with_added, pod, &hard);
            assert_eq!(plugin_filter(pl, &s, pod, &with_added), want, "{ctx}: filter after add_pod");

            let live = nodes[i].pods.iter().find(|p| p.pod.metadata.deletion_timestamp.is_none()).cloned();
            if let Some(victim) = live {
                let mut without = nodes.to_vec();
                Arc::make_mut(&mut without[i]).remove_pod(victim.uid());
                let mut s = state.clone();
                assert!(pl.remove_pod(&mut s, pod, &victim, &without[i]).is_success());
                let want = reference_filter(&without, pod, &hard);
                assert_eq!(plugin_filter(pl, &s, pod, &without), want, "{ctx}: filter after remove_pod");
            }
        }
    }

    let soft = pl.constraints_for(&pod.pod, SCHEDULE_ANYWAY, "soft").expect("valid constraints");
    let filtered: Vec<Arc<NodeInfo>> = nodes.iter().filter(|_| !rng.chance(3)).cloned().collect();
    let mut state = CycleState::new();
    let status = pl.pre_score(&mut state, pod, &ksched_framework::node_refs(&filtered), &snap);
    if soft.is_empty() || nodes.is_empty() {
        assert!(status.is_skip(), "{ctx}: {status}");
        return;
    }
    assert!(status.is_success(), "{ctx}: {status}");
    let mut scores: Vec<i64> = filtered.iter().map(|ni| pl.score(&state, pod, ni).expect("score")).collect();
    assert!(pl.normalize_score(&state, pod, &ksched_framework::node_refs(&filtered), &mut scores).is_success());
    let require_all = !common::pod_constraints(&pod.pod).is_empty() || !pl.system_defaulted;
    assert_eq!(scores, reference_scores(nodes, &filtered, pod, &soft, require_all), "{ctx}: scores");
}

#[test]
fn fresh_cycles_match_the_reference() {
    for seed in 0..400u64 {
        let mut rng = Lcg(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5EED);
        let pl = random_plugin(&mut rng);
        let zones = 1 + rng.below(4);
        let mut nodes: Vec<NodeInfo> = (0..1 + rng.below(10))
            .map(|i| NodeInfo::new(Arc::new(node(&random_node(&mut rng, &format!("n{i}"), zones)))))
            .collect();
        for j in 0..rng.below(20) {
            let i = rng.below(nodes.len() as u64) as usize;
            let p = random_pod(&mut rng, &format!("e{j}"), nodes[i].name(), false);
            nodes[i].add_pod(p);
        }
        let nodes: Vec<Arc<NodeInfo>> = nodes.into_iter().map(Arc::new).collect();
        let incoming = random_incoming(&mut rng, true);
        check(&pl, &mut rng, &nodes, &incoming, &format!("seed {seed}"), true);
    }
}

/// One plugin instance follows a cluster through pod, label, taint and membership changes, so
/// its per-node index is refreshed incrementally; several incoming pods per step exercise the
/// cached keys and selectors side by side.
#[test]
fn evolving_cluster_matches_the_reference() {
    for seed in 0..60u64 {
        let mut rng = Lcg(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xC0FFEE);
        let pl = random_plugin(&mut rng);
        let zones = 1 + rng.below(4);
        let mut next_node = 0;
        let mut new_node = |rng: &mut Lcg| {
            next_node += 1;
            Arc::new(NodeInfo::new(Arc::new(node(&random_node(rng, &format!("n{next_node}"), zones)))))
        };
        let mut nodes: Vec<Arc<NodeInfo>> = (0..2 + rng.below(8)).map(|_| new_node(&mut rng)).collect();
        let incoming: Vec<PodInfo> = (0..3).map(|_| random_incoming(&mut rng, false)).collect();
        let mut pods = 0;
        for step in 0..40 {
            for _ in 0..1 + rng.below(3) {
                if nodes.is_empty() {
                    nodes.push(new_node(&mut rng));
                    continue;
                }
                let i = rng.below(nodes.len() as u64) as usize;
                match rng.below(10) {
                    0..=3 => {
                        pods += 1;
                        let p = random_pod(&mut rng, &format!("p{pods}"), nodes[i].name(), false);
                        Arc::make_mut(&mut nodes[i]).add_pod(p);
                    }
                    4 | 5 => {
                        if let Some(uid) = nodes[i].pods.first().map(|p| p.uid().to_string()) {
                            Arc::make_mut(&mut nodes[i]).remove_pod(&uid);
                        }
                    }
                    6 => {
                        // Same name, new labels and taints: a node update.
                        let spec = random_node(&mut rng, nodes[i].name(), zones);
                        Arc::make_mut(&mut nodes[i]).set_node(Arc::new(node(&spec)));
                    }
                    7 => {
                        nodes.remove(i);
                    }
                    8 => {
                        let n = new_node(&mut rng);
                        nodes.insert(i, n);
                    }
                    _ => {
                        // An equal copy under a new address.
                        nodes[i] = Arc::new((*nodes[i]).clone());
                    }
                }
            }
            for (k, pod) in incoming.iter().enumerate() {
                check(&pl, &mut rng, &nodes, pod, &format!("seed {seed} step {step} pod {k}"), false);
            }
        }
    }
}
