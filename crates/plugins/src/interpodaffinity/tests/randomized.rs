//! Seeded random clusters: PreFilter counts, Filter, AddPod/RemovePod and Score of the plugin
//! (whose counters live in a cache kept across cycles) against a direct recount of upstream's
//! definitions. One plugin serves every round of a seed while nodes, pods and labels change
//! between rounds, and unchanged nodes keep their `Arc<NodeInfo>` as the scheduler cache's
//! snapshot does, so cache hits, catch-ups, resets and evictions are all exercised.

use std::collections::BTreeMap;
use std::sync::Arc;

use ksched_framework::labels::Labels;
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::AffinityTerm;
use ksched_framework::{
    CycleState, FilterPlugin, NodeInfo, PodInfo, PreFilterExtensions, PreFilterPlugin, PreScorePlugin, ScorePlugin,
    Snapshot, Status,
};
use serde_json::{json, Value};

use super::*;
use crate::interpodaffinity::filtering::{PreFilterState, PRE_FILTER_STATE_KEY};
use crate::interpodaffinity::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFF, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
};

/// SplitMix64: small, seedable and good enough to shuffle test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const NAMESPACES: &[(&str, &[(&str, &str)])] =
    &[("ns1", &[("team", "t1")]), ("ns2", &[("team", "t2")]), ("ns3", &[("team", "t1"), ("env", "prod")])];
const LABEL_KEYS: &[&str] = &["app", "tier"];
const LABEL_VALUES: &[&str] = &["a", "b", "c"];
const TOPOLOGY_KEYS: &[&str] = &["hostname", "zone", "region"];

fn random_labels(rng: &mut Rng) -> Vec<(&'static str, &'static str)> {
    let mut labels = Vec::new();
    for key in LABEL_KEYS {
        if rng.chance(65) {
            labels.push((*key, *rng.pick(LABEL_VALUES)));
        }
    }
    labels
}

fn random_selector(rng: &mut Rng) -> Value {
    let mut exprs = Vec::new();
    for _ in 0..1 + rng.below(2) {
        let key = *rng.pick(LABEL_KEYS);
        let values: Vec<&str> = LABEL_VALUES.iter().copied().filter(|_| rng.chance(50)).collect();
        let values = if values.is_empty() { vec![*rng.pick(LABEL_VALUES)] } else { values };
        exprs.push(match rng.below(3) {
            0 => json!({"key": key, "operator": "In", "values": values}),
            1 => json!({"key": key, "operator": "NotIn", "values": values}),
            _ => json!({"key": key, "operator": "Exists"}),
        });
    }
    if rng.chance(20) {
        let (key, value) = (*rng.pick(LABEL_KEYS), *rng.pick(LABEL_VALUES));
        json!({"matchLabels": {key: value}, "matchExpressions": exprs})
    } else {
        json!({"matchExpressions": exprs})
    }
}

fn random_term(rng: &mut Rng) -> Value {
    let mut t = json!({"labelSelector": random_selector(rng), "topologyKey": *rng.pick(TOPOLOGY_KEYS)});
    match rng.below(20) {
        0..=9 => {}
        10..=14 => {
            let names: Vec<&str> = NAMESPACES.iter().map(|(n, _)| *n).filter(|_| rng.chance(50)).collect();
            t["namespaces"] = json!(if names.is_empty() { vec!["ns1"] } else { names });
        }
        15..=17 => t["namespaceSelector"] = json!({"matchLabels": {"team": *rng.pick(&["t1", "t2"])}}),
        _ => t["namespaceSelector"] = json!({}),
    }
    t
}

fn random_terms(rng: &mut Rng, weighted: bool) -> Vec<Value> {
    let n = if rng.chance(45) { 1 + rng.below(2) } else { 0 };
    (0..n)
        .map(|_| {
            let t = random_term(rng);
            if weighted {
                json!({"weight": 1 + rng.below(100), "podAffinityTerm": t})
            } else {
                t
            }
        })
        .collect()
}

fn random_pod(rng: &mut Rng, name: &str) -> Pod {
    let mut p = make_pod().name(name).uid(name).namespace(rng.pick(NAMESPACES).0).labels(&random_labels(rng));
    if rng.chance(80) {
        p = p.affinity(json!({
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": random_terms(rng, false),
                "preferredDuringSchedulingIgnoredDuringExecution": random_terms(rng, true),
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": random_terms(rng, false),
                "preferredDuringSchedulingIgnoredDuringExecution": random_terms(rng, true),
            },
        }));
    }
    p.obj()
}

/// A node; every few nodes share a hostname value, so that a hostname domain may span nodes.
fn random_node(rng: &mut Rng, i: usize) -> Node {
    let mut labels = vec![("hostname".to_string(), format!("h{}", if rng.chance(15) { i / 2 } else { i + 100 }))];
    if rng.chance(85) {
        labels.push(("zone".into(), format!("z{}", rng.below(3))));
    }
    if rng.chance(70) {
        labels.push(("region".into(), format!("r{}", rng.below(2))));
    }
    let labels: BTreeMap<String, String> = labels.into_iter().collect();
    serde_json::from_value(json!({"metadata": {"name": format!("node{i}"), "labels": labels}})).expect("valid node")
}

/// Upstream's definitions, evaluated directly over every pod of every node.
struct Reference<'a> {
    nodes: &'a [(Labels, Vec<Arc<PodInfo>>)],
}

fn ns_labels(ns: &str) -> Labels {
    NAMESPACES
        .iter()
        .find(|(n, _)| *n == ns)
        .map(|(_, labels)| labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
        .unwrap_or_default()
}

/// `term` selects `pod`, with namespace selectors evaluated on the pod's namespace's labels
/// (every namespace of these clusters exists, so resolving selectors to names first agrees).
fn selects(term: &AffinityTerm, pod: &Pod) -> bool {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let ns_ok =
        term.namespaces.contains(ns) || term.namespace_selector.as_ref().is_some_and(|s| s.matches(&ns_labels(ns)));
    ns_ok && term.selector.matches(&pod.metadata.labels)
}

type Counts = BTreeMap<(String, String), i64>;

fn bump(counts: &mut Counts, labels: &Labels, key: &str, delta: i64) {
    if let Some(v) = labels.get(key) {
        let e = counts.entry((key.to_string(), v.clone())).or_default();
        *e += delta;
        if *e == 0 {
            counts.remove(&(key.to_string(), v.clone()));
        }
    }
}

impl Reference<'_> {
    /// (existing anti-affinity, affinity, anti-affinity) counts of upstream's PreFilter.
    fn counts(&self, pod: &PodInfo) -> (Counts, Counts, Counts) {
        let (mut existing, mut affinity, mut anti) = (Counts::new(), Counts::new(), Counts::new());
        for (labels, pods) in self.nodes {
            for e in pods {
                for t in e.required_anti_affinity_terms() {
                    if selects(t, &pod.pod) {
                        bump(&mut existing, labels, &t.topology_key, 1);
                    }
                }
                let terms = pod.required_affinity_terms();
                if !terms.is_empty() && terms.iter().all(|t| selects(t, &e.pod)) {
                    for t in terms {
                        bump(&mut affinity, labels, &t.topology_key, 1);
                    }
                }
                for t in pod.required_anti_affinity_terms() {
                    if selects(t, &e.pod) {
                        bump(&mut anti, labels, &t.topology_key, 1);
                    }
                }
            }
        }
        (existing, affinity, anti)
    }

    /// Whether PreFilter skips the plugin.
    fn skips(&self, pod: &PodInfo) -> bool {
        let (existing, _, _) = self.counts(pod);
        existing.is_empty() && pod.required_affinity_terms().is_empty() && pod.required_anti_affinity_terms().is_empty()
    }

    /// Filter's status per node.
    fn filter(&self, pod: &PodInfo) -> Vec<Status> {
        let (existing, affinity, anti) = self.counts(pod);
        let (aff_terms, anti_terms) = (pod.required_affinity_terms(), pod.required_anti_affinity_terms());
        let matches_own = !aff_terms.is_empty() && aff_terms.iter().all(|t| selects(t, &pod.pod));
        self.nodes
            .iter()
            .map(|(labels, _)| {
                let count = |c: &Counts, key: &str| {
                    labels.get(key).map(|v| c.get(&(key.to_string(), v.clone())).copied().unwrap_or(0))
                };
                let has_key = aff_terms.iter().all(|t| labels.contains_key(&t.topology_key));
                let pods_exist = aff_terms.iter().all(|t| count(&affinity, &t.topology_key).unwrap_or(0) > 0);
                if !has_key || !(pods_exist || (affinity.is_empty() && matches_own)) {
                    return Status::unresolvable(AFF);
                }
                if anti_terms.iter().any(|t| count(&anti, &t.topology_key).unwrap_or(0) > 0) {
                    return Status::unschedulable(ANTI);
                }
                if labels.iter().any(|(k, v)| existing.get(&(k.clone(), v.clone())).copied().unwrap_or(0) > 0) {
                    return Status::unschedulable(EXISTING);
                }
                Status::success()
            })
            .collect()
    }

    /// PreScore's skip decision and the raw score per node.
    fn score(&self, pod: &PodInfo, hard_weight: i64, ignore_existing: bool) -> Option<Vec<i64>> {
        let has_constraints =
            !pod.preferred_affinity_terms().is_empty() || !pod.preferred_anti_affinity_terms().is_empty();
        if ignore_existing && !has_constraints {
            return None;
        }
        let mut scores: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        let mut add = |labels: &Labels, key: &str, w: i64| {
            if let Some(v) = labels.get(key) {
                *scores.entry(key.to_string()).or_default().entry(v.clone()).or_default() += w;
            }
        };
        for (labels, pods) in self.nodes {
            for e in pods {
                for t in pod.preferred_affinity_terms() {
                    if selects(&t.term, &e.pod) {
                        add(labels, &t.term.topology_key, i64::from(t.weight));
                    }
                }
                for t in pod.preferred_anti_affinity_terms() {
                    if selects(&t.term, &e.pod) {
                        add(labels, &t.term.topology_key, -i64::from(t.weight));
                    }
                }
                if hard_weight > 0 {
                    for t in e.required_affinity_terms() {
                        if selects(t, &pod.pod) {
                            add(labels, &t.topology_key, hard_weight);
                        }
                    }
                }
                for t in e.preferred_affinity_terms() {
                    if selects(&t.term, &pod.pod) {
                        add(labels, &t.term.topology_key, i64::from(t.weight));
                    }
                }
                for t in e.preferred_anti_affinity_terms() {
                    if selects(&t.term, &pod.pod) {
                        add(labels, &t.term.topology_key, -i64::from(t.weight));
                    }
                }
            }
        }
        if scores.is_empty() {
            return None;
        }
        let per_node = self
            .nodes
            .iter()
            .map(|(labels, _)| {
                scores.iter().filter_map(|(k, values)| labels.get(k).map(|v| values.get(v).copied().unwrap_or(0))).sum()
            })
            .collect();
        Some(per_node)
    }
}

/// A snapshot over the given node infos, sharing their Arcs.
fn snapshot_of(nodes: &[Arc<NodeInfo>]) -> Snapshot {
    let mut s = Snapshot { node_info_list: nodes.to_vec(), ..Default::default() };
    s.index = nodes.iter().enumerate().map(|(i, n)| (n.name().to_string(), i)).collect();
    s.rebuild_derived();
    s
}

fn view(nodes: &[Arc<NodeInfo>]) -> Vec<(Labels, Vec<Arc<PodInfo>>)> {
    nodes.iter().map(|n| (n.labels().to_map(), n.pods.clone())).collect()
}

fn placed(pod: &Pod, node: &NodeInfo) -> Arc<PodInfo> {
    let mut pod = pod.clone();
    pod.spec.get_or_insert_with(Default::default).node_name = Some(node.name().to_string());
    Arc::new(PodInfo::new(Arc::new(pod)))
}

/// Changes a few nodes the way the scheduler cache does: a changed node gets a new Arc.
fn mutate(rng: &mut Rng, nodes: &mut Vec<Arc<NodeInfo>>, next_id: &mut usize) {
    for _ in 0..1 + rng.below(3) {
        *next_id += 1;
        let i = rng.below(nodes.len());
        match rng.below(10) {
            0..=4 => {
                let pod = random_pod(rng, &format!("p{next_id}"));
                let mut ni = (*nodes[i]).clone();
                ni.add_pod(placed(&pod, &ni));
                nodes[i] = Arc::new(ni);
            }
            5..=6 => {
                if let Some(victim) = nodes[i].pods.first().map(|p| p.uid().to_string()) {
                    let mut ni = (*nodes[i]).clone();
                    ni.remove_pod(&victim);
                    nodes[i] = Arc::new(ni);
                }
            }
            7 => {
                let mut ni = (*nodes[i]).clone();
                ni.set_node(Arc::new(random_node(rng, i)));
                nodes[i] = Arc::new(ni);
            }
            8 => {
                let mut ni = NodeInfo::new(Arc::new(random_node(rng, nodes.len() + *next_id)));
                for k in 0..rng.below(3) {
                    let pod = random_pod(rng, &format!("p{next_id}-{k}"));
                    ni.add_pod(placed(&pod, &ni));
                }
                nodes.insert(rng.below(nodes.len() + 1), Arc::new(ni));
            }
            _ => {
                if nodes.len() > 2 {
                    nodes.remove(i);
                }
            }
        }
    }
}

fn check_filter(
    pl: &InterPodAffinity,
    state: &CycleState,
    pod: &PodInfo,
    snap: &Snapshot,
    want: &[Status],
    what: &str,
) {
    let got: Vec<Status> = snap.list().iter().map(|n| pl.filter(state, pod, n)).collect();
    assert_eq!(got, want, "{what}");
}

#[test]
fn random_clusters_match_a_direct_recount() {
    for seed in 0..60u64 {
        let mut rng = Rng(seed);
        let hard_weight = rng.below(3) as i32;
        let ignore = rng.chance(25);
        let args = InterPodAffinityArgs {
            hard_pod_affinity_weight: hard_weight,
            ignore_preferred_terms_of_existing_pods: ignore,
        };
        let pl = plugin_with(args, NAMESPACES);
        let mut nodes: Vec<Arc<NodeInfo>> = (0..4 + rng.below(8))
            .map(|i| {
                let mut ni = NodeInfo::new(Arc::new(random_node(&mut rng, i)));
                for k in 0..rng.below(4) {
                    let pod = random_pod(&mut rng, &format!("init-{i}-{k}"));
                    ni.add_pod(placed(&pod, &ni));
                }
                Arc::new(ni)
            })
            .collect();
        // A small pool, so that the same queries come back round after round.
        let incoming: Vec<PodInfo> =
            (0..5).map(|i| PodInfo::new(Arc::new(random_pod(&mut rng, &format!("in{i}"))))).collect();
        let mut next_id = 0;
        for round in 0..8 {
            if round > 0 {
                mutate(&mut rng, &mut nodes, &mut next_id);
            }
            let snap = snapshot_of(&nodes);
            let cluster = view(&nodes);
            let reference = Reference { nodes: &cluster };
            for _ in 0..4 {
                let pod = rng.pick(&incoming);
                let what = format!("seed {seed} round {round} pod {}", pod.name());
                let mut state = CycleState::new();
                let (_, status) = pl.pre_filter(&mut state, pod, &snap);
                let skip = reference.skips(pod);
                assert_eq!(status.is_skip(), skip, "{what}: PreFilter {status:?}");
                if !skip {
                    assert!(status.is_success(), "{what}: {status:?}");
                    let s = state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).expect("state");
                    let (existing, affinity, anti) = reference.counts(pod);
                    assert_eq!(s.existing_anti_affinity_counts.to_sorted(), existing, "{what}: existing");
                    assert_eq!(s.affinity_counts.to_sorted(), affinity, "{what}: affinity");
                    assert_eq!(s.anti_affinity_counts.to_sorted(), anti, "{what}: anti-affinity");
                    check_filter(&pl, &state, pod, &snap, &reference.filter(pod), &what);

                    // RemovePod of an existing pod, then AddPod of a new one, on cloned states.
                    let i = rng.below(nodes.len());
                    if let Some(victim) = nodes[i].pods.first().cloned() {
                        let mut removed = state.clone();
                        assert!(pl.remove_pod(&mut removed, pod, &victim, &nodes[i]).is_success());
                        let mut without = cluster.clone();
                        without[i].1.retain(|p| !Arc::ptr_eq(p, &victim));
                        let want = Reference { nodes: &without }.filter(pod);
                        check_filter(&pl, &removed, pod, &snap, &want, &format!("{what}: RemovePod"));
                    }
                    let added = placed(&random_pod(&mut rng, "added"), &nodes[i]);
                    let mut with_added = state.clone();
                    assert!(pl.add_pod(&mut with_added, pod, &added, &nodes[i]).is_success());
                    let mut with = cluster.clone();
                    with[i].1.push(added);
                    let want = Reference { nodes: &with }.filter(pod);
                    check_filter(&pl, &with_added, pod, &snap, &want, &format!("{what}: AddPod"));
                    // The original state is untouched by its clones' changes.
                    check_filter(&pl, &state, pod, &snap, &reference.filter(pod), &format!("{what}: original"));
                }

                let mut state = CycleState::new();
                let status = pl.pre_score(&mut state, pod, &ksched_framework::node_refs(snap.list()), &snap);
                match reference.score(pod, i64::from(hard_weight), ignore) {
                    None => assert!(status.is_skip(), "{what}: PreScore {status:?}"),
                    Some(want) => {
                        assert!(status.is_success(), "{what}: PreScore {status:?}");
                        let got: Vec<i64> =
                            snap.list().iter().map(|n| pl.score(&state, pod, n).expect("score")).collect();
                        assert_eq!(got, want, "{what}: Score");
                    }
                }
            }
        }
    }
}
