//! PreScore / Score / NormalizeScore (upstream's scoring_test.go).

use std::sync::Arc;

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{Code, CycleState, NodeInfo, PreFilterPlugin, PreScorePlugin, ScorePlugin, Status};
use serde_json::{json, Value};

use super::*;
use crate::interpodaffinity::counts::TopologyCounts;
use crate::interpodaffinity::scoring::{PreScoreState, PRE_SCORE_STATE_KEY};

const CHINA: &[(&str, &str)] = &[("region", "China")];
const INDIA: &[(&str, &str)] = &[("region", "India")];
const AZ1: &[(&str, &str)] = &[("az", "az1")];
const AZ2: &[(&str, &str)] = &[("az", "az2")];
const CHINA_AZ1: &[(&str, &str)] = &[("region", "China"), ("az", "az1")];
const S1: &[(&str, &str)] = &[("security", "S1")];
const S2: &[(&str, &str)] = &[("security", "S2")];

fn weighted(weight: i32, term: Value) -> Value {
    json!({"weight": weight, "podAffinityTerm": term})
}

fn preferred_affinity(terms: Vec<Value>) -> Value {
    json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}})
}

fn preferred_anti_affinity(terms: Vec<Value>) -> Value {
    json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}})
}

fn stay_with_s1_in_region() -> Value {
    preferred_affinity(vec![weighted(5, term(sel_in("security", &["S1"]), "region"))])
}

fn stay_with_s2_in_region() -> Value {
    preferred_affinity(vec![weighted(6, term(sel_in("security", &["S2"]), "region"))])
}

fn affinity3() -> Value {
    preferred_affinity(vec![
        weighted(8, term(sel_exprs(&[("security", "NotIn", &["S1"]), ("security", "In", &["S2"])]), "region")),
        weighted(2, term(sel_exprs(&[("security", "Exists", &[]), ("wrongkey", "DoesNotExist", &[])]), "region")),
    ])
}

fn hard_affinity() -> Value {
    json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(sel_in("security", &["S1", "value2"]), "region"),
        term(sel_exprs(&[("security", "Exists", &[]), ("wrongkey", "DoesNotExist", &[])]), "region"),
    ]}})
}

fn away_from_s1_in_az() -> Value {
    preferred_anti_affinity(vec![weighted(5, term(sel_in("security", &["S1"]), "az"))])
}

fn away_from_s2_in_az() -> Value {
    preferred_anti_affinity(vec![weighted(5, term(sel_in("security", &["S2"]), "az"))])
}

fn stay_with_s1_in_region_away_from_s2_in_az() -> Value {
    json!({
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            weighted(8, term(sel_in("security", &["S1"]), "region"))]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            weighted(5, term(sel_in("security", &["S2"]), "az"))]},
    })
}

fn ns_selector_term() -> Value {
    json!({
        "labelSelector": sel_in("security", &["S1"]),
        "topologyKey": "region",
        "namespaces": ["subteam2.team2"],
        "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]},
    })
}

fn affinity_namespace_selector() -> Value {
    preferred_affinity(vec![weighted(5, ns_selector_term())])
}

fn anti_affinity_namespace_selector() -> Value {
    preferred_anti_affinity(vec![weighted(5, ns_selector_term())])
}

/// A pod on `node` with labels and optional affinity.
fn on(node: &str, labels: &[(&str, &str)], affinity: Option<Value>) -> Pod {
    let p = make_pod().node(node).labels(labels);
    match affinity {
        Some(a) => p.affinity(a),
        None => p,
    }
    .obj()
}

/// A pod on `node` in namespace `ns` with labels.
fn on_in(node: &str, ns: &str, labels: &[(&str, &str)]) -> Pod {
    make_pod().node(node).namespace(ns).labels(labels).obj()
}

fn incoming(labels: &[(&str, &str)], affinity: Option<Value>) -> Pod {
    on_in_ns(None, labels, affinity)
}

fn on_in_ns(ns: Option<&str>, labels: &[(&str, &str)], affinity: Option<Value>) -> Pod {
    let mut p = make_pod().labels(labels);
    if let Some(ns) = ns {
        p = p.namespace(ns);
    }
    if let Some(a) = affinity {
        p = p.affinity(a);
    }
    p.obj()
}

fn nodes(labels: &[&'static [(&'static str, &'static str)]]) -> Vec<Node> {
    labels.iter().enumerate().map(|(i, l)| node(&format!("node{}", i + 1), l)).collect()
}

/// What PreScore should return: scores after normalisation, or a non-success status (matched by
/// code and message prefix).
enum Want {
    Scores(Vec<i64>),
    Status(Status),
}

struct Case {
    name: &'static str,
    pod: Pod,
    pods: Vec<Pod>,
    nodes: Vec<Node>,
    want: Want,
}

/// Runs PreFilter (which records the nodes PreScore visits), then PreScore over the nodes
/// without their pods (as upstream's test does: only the snapshot knows the pods), Score and
/// NormalizeScore.
fn run_one(pl: &InterPodAffinity, c: &Case, feasible: Option<&[&str]>) {
    let snap = snapshot(&c.pods, &c.nodes);
    let pi = pod_info(&c.pod);
    let mut state = CycleState::new();
    let _ = pl.pre_filter(&mut state, &pi, &snap);
    let infos: Vec<Arc<NodeInfo>> = c
        .nodes
        .iter()
        .filter(|n| feasible.is_none_or(|f| f.contains(&n.metadata.name.as_deref().unwrap_or_default())))
        .map(|n| Arc::new(NodeInfo::new(Arc::new(n.clone()))))
        .collect();
    let status = pl.pre_score(&mut state, &pi, &ksched_framework::node_refs(&infos), &snap);
    match &c.want {
        Want::Status(want) => {
            assert_eq!(status.code(), want.code(), "{}: {status:?}", c.name);
            assert!(status.message().starts_with(&want.message()), "{}: {}", c.name, status.message());
        }
        Want::Scores(want) => {
            assert!(status.is_success(), "{}: {status:?}", c.name);
            let mut scores: Vec<i64> = infos.iter().map(|n| pl.score(&state, &pi, n).expect("score")).collect();
            assert!(pl.has_normalize());
            assert!(pl.normalize_score(&state, &pi, &ksched_framework::node_refs(&infos), &mut scores).is_success());
            assert_eq!(&scores, want, "{}", c.name);
        }
    }
}

fn scores(s: &[i64]) -> Want {
    Want::Scores(s.to_vec())
}

fn skip() -> Want {
    Want::Status(Status::skip())
}

#[test]
fn preferred_affinity_scores() {
    let bad_term = |tk: &str| term(json!({"matchExpressions": [{"key": "security", "operator": "In"}]}), tk);
    let cases = vec![
        Case {
            name: "all nodes are same priority as Affinity is nil",
            pod: incoming(S1, None),
            pods: vec![],
            nodes: nodes(&[CHINA, INDIA, AZ1]),
            want: skip(),
        },
        Case {
            name: "affinity: matching topology key and pods scores high",
            pod: incoming(S1, Some(stay_with_s1_in_region())),
            pods: vec![on("node1", S1, None), on("node2", S2, None), on("node3", S1, None)],
            nodes: nodes(&[CHINA, INDIA, AZ1]),
            want: scores(&[100, 0, 0]),
        },
        Case {
            name: "nodes sharing the topology value of a matching pod score the same",
            pod: incoming(&[], Some(stay_with_s1_in_region())),
            pods: vec![on("node1", S1, None)],
            nodes: nodes(&[CHINA, CHINA_AZ1, INDIA]),
            want: scores(&[100, 100, 0]),
        },
        Case {
            name: "the region with more matching pods scores high",
            pod: incoming(S1, Some(stay_with_s2_in_region())),
            pods: vec![
                on("node1", S2, None),
                on("node1", S2, None),
                on("node2", S2, None),
                on("node3", S2, None),
                on("node4", S2, None),
                on("node5", S2, None),
            ],
            nodes: nodes(&[CHINA, INDIA, CHINA, CHINA, INDIA]),
            want: scores(&[100, 0, 100, 100, 0]),
        },
        Case {
            name: "different operators and values, including match failures",
            pod: incoming(S1, Some(affinity3())),
            pods: vec![on("node1", S1, None), on("node2", S2, None), on("node3", S1, None)],
            nodes: nodes(&[CHINA, INDIA, AZ1]),
            want: scores(&[20, 100, 0]),
        },
        Case {
            name: "affinity symmetry: existing pods' preferred terms",
            pod: incoming(S2, None),
            pods: vec![
                on("node1", S1, Some(stay_with_s1_in_region())),
                on("node2", S2, Some(stay_with_s2_in_region())),
            ],
            nodes: nodes(&[CHINA, INDIA, AZ1]),
            want: scores(&[0, 100, 0]),
        },
        Case {
            name: "affinity symmetry with namespace selector",
            pod: on_in_ns(Some("subteam1.team1"), S1, None),
            pods: vec![
                on("node1", S1, Some(affinity_namespace_selector())),
                on("node2", S2, Some(stay_with_s2_in_region())),
            ],
            nodes: nodes(&[CHINA, INDIA, AZ1]),
            want: scores(&[100, 0, 0]),
        },
        Case {
            name: "anti-affinity symmetry with namespace selector",
            pod: on_in_ns(Some("subteam1.team1"), S1, None),
            pods: vec![
                on("node1", S1, Some(anti_affinity_namespace_selector())),
                on("node2", S2, Some(stay_with_s2_in_region())),
            ],
            nodes: nodes(&[CHINA, INDIA, AZ1]),
            want: scores(&[0, 100, 100]),
        },
        Case {
            name: "affinity symmetry: existing pods' required terms",
            pod: incoming(S1, None),
            pods: vec![on("node1", S1, Some(hard_affinity())), on("node2", S2, Some(hard_affinity()))],
            nodes: nodes(&[CHINA, INDIA, AZ1]),
            want: scores(&[100, 100, 0]),
        },
        Case {
            name: "anti-affinity: pods not matching existing pods score high",
            pod: incoming(S1, Some(away_from_s1_in_az())),
            pods: vec![on("node1", S1, None), on("node2", S2, None)],
            nodes: nodes(&[AZ1, CHINA]),
            want: scores(&[0, 100]),
        },
        Case {
            name: "anti-affinity: nodes without the topology key score high",
            pod: incoming(S1, Some(away_from_s1_in_az())),
            pods: vec![on("node1", S1, None), on("node2", S1, None)],
            nodes: nodes(&[AZ1, CHINA]),
            want: scores(&[0, 100]),
        },
        Case {
            name: "anti-affinity: the node with more matching pods scores low",
            pod: incoming(S1, Some(away_from_s1_in_az())),
            pods: vec![on("node1", S1, None), on("node1", S1, None), on("node2", S2, None)],
            nodes: nodes(&[AZ1, INDIA]),
            want: scores(&[0, 100]),
        },
        Case {
            name: "anti-affinity symmetry",
            pod: incoming(S2, None),
            pods: vec![on("node1", S1, Some(away_from_s2_in_az())), on("node2", S2, Some(away_from_s1_in_az()))],
            nodes: nodes(&[AZ1, AZ2]),
            want: scores(&[0, 100]),
        },
        Case {
            name: "affinity and anti-affinity",
            pod: incoming(S1, Some(stay_with_s1_in_region_away_from_s2_in_az())),
            pods: vec![on("node1", S1, None), on("node2", S1, None)],
            nodes: nodes(&[CHINA, AZ1]),
            want: scores(&[100, 0]),
        },
        Case {
            name: "affinity and anti-affinity with pods of the same labels",
            pod: incoming(S1, Some(stay_with_s1_in_region_away_from_s2_in_az())),
            pods: vec![
                on("node1", S1, None),
                on("node1", S1, None),
                on("node2", S1, None),
                on("node3", S1, None),
                on("node3", S1, None),
                on("node4", S1, None),
                on("node5", S1, None),
            ],
            nodes: nodes(&[CHINA_AZ1, INDIA, CHINA, CHINA, INDIA]),
            want: scores(&[100, 0, 100, 100, 0]),
        },
        Case {
            name: "affinity, anti-affinity and symmetry together",
            pod: incoming(S1, Some(stay_with_s1_in_region_away_from_s2_in_az())),
            pods: vec![
                on("node1", S1, None),
                on("node2", S2, None),
                on("node3", &[], Some(stay_with_s1_in_region_away_from_s2_in_az())),
                on("node4", &[], Some(away_from_s1_in_az())),
            ],
            nodes: nodes(&[CHINA, AZ1, INDIA, AZ2]),
            want: scores(&[100, 0, 100, 0]),
        },
        Case {
            name: "some nodes of a topology without pods with affinity (kubernetes#82796)",
            pod: incoming(S1, None),
            pods: vec![on("node1", S1, None), on("node2", &[], Some(stay_with_s1_in_region_away_from_s2_in_az()))],
            nodes: nodes(&[CHINA, CHINA]),
            want: scores(&[0, 0]),
        },
        Case {
            name: "invalid affinity fails PreScore",
            pod: incoming(&[], Some(preferred_affinity(vec![weighted(8, bad_term("region"))]))),
            pods: vec![],
            nodes: nodes(&[CHINA, CHINA]),
            want: Want::Status(Status::error("failed to parse pod: preferredAffinityTerms: values: Invalid value")),
        },
        Case {
            name: "invalid anti-affinity fails PreScore",
            pod: incoming(&[], Some(preferred_anti_affinity(vec![weighted(5, bad_term("az"))]))),
            pods: vec![],
            nodes: nodes(&[CHINA, CHINA]),
            want: Want::Status(Status::error("failed to parse pod: preferredAntiAffinityTerms: values: Invalid value")),
        },
        Case {
            name: "affinity with pods matching the namespace selector",
            pod: on_in_ns(Some("subteam1.team1"), S1, Some(affinity_namespace_selector())),
            pods: vec![
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam1.team2", S1),
                on_in("node2", "subteam2.team1", S1),
            ],
            nodes: nodes(&[CHINA, INDIA]),
            want: scores(&[100, 0]),
        },
        Case {
            name: "affinity with pods matching both the namespace selector and namespaces",
            pod: on_in_ns(Some("subteam1.team1"), S1, Some(affinity_namespace_selector())),
            pods: vec![
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam2.team2", S1),
                on_in("node2", "subteam2.team1", S1),
            ],
            nodes: nodes(&[CHINA, INDIA]),
            want: scores(&[100, 0]),
        },
        Case {
            name: "anti-affinity with pods matching the namespace selector",
            pod: on_in_ns(Some("subteam1.team1"), S1, Some(anti_affinity_namespace_selector())),
            pods: vec![
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam1.team2", S1),
                on_in("node2", "subteam2.team1", S1),
            ],
            nodes: nodes(&[CHINA, INDIA]),
            want: scores(&[0, 100]),
        },
        Case {
            name: "anti-affinity with pods matching both the namespace selector and namespaces",
            pod: on_in_ns(Some("subteam1.team1"), S1, Some(anti_affinity_namespace_selector())),
            pods: vec![
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam1.team1", S1),
                on_in("node1", "subteam2.team2", S1),
                on_in("node2", "subteam2.team1", S1),
            ],
            nodes: nodes(&[CHINA, INDIA]),
            want: scores(&[0, 100]),
        },
        Case {
            name: "do not ignore preferred terms of existing pods",
            pod: incoming(S2, None),
            pods: vec![
                on("node1", S1, Some(stay_with_s1_in_region_away_from_s2_in_az())),
                on("node2", S2, Some(stay_with_s2_in_region())),
            ],
            nodes: nodes(&[CHINA, INDIA]),
            want: scores(&[0, 100]),
        },
        Case { name: "no nodes to score", pod: incoming(S2, None), pods: vec![], nodes: vec![], want: skip() },
    ];
    let pl =
        plugin_with(InterPodAffinityArgs { hard_pod_affinity_weight: 1, ..Default::default() }, &team_namespaces());
    for c in &cases {
        run_one(&pl, c, None);
    }
}

#[test]
fn ignore_preferred_terms_of_existing_pods() {
    let args = InterPodAffinityArgs { ignore_preferred_terms_of_existing_pods: true, ..Default::default() };
    let pl = plugin_with(args, &team_namespaces());
    run_one(
        &pl,
        &Case {
            name: "ignored when the incoming pod has no preferred terms",
            pod: incoming(S2, None),
            pods: vec![
                on("node1", S1, Some(stay_with_s1_in_region_away_from_s2_in_az())),
                on("node2", S2, Some(stay_with_s2_in_region())),
            ],
            nodes: nodes(&[CHINA, INDIA]),
            want: skip(),
        },
        None,
    );
    // Upstream only uses the flag to skip: with preferred terms of its own, existing pods'
    // preferred terms still count.
    run_one(
        &pl,
        &Case {
            name: "existing pods' terms still count when the incoming pod has preferred terms",
            pod: incoming(
                S2,
                Some(preferred_affinity(vec![weighted(3, term(sel_in("security", &["none"]), "region"))])),
            ),
            pods: vec![on("node1", &[], Some(stay_with_s2_in_region())), on("node2", S1, None)],
            nodes: nodes(&[CHINA, INDIA]),
            want: scores(&[100, 0]),
        },
        None,
    );
}

#[test]
fn pods_on_infeasible_nodes_count() {
    let pl = plugin();
    let without = |pod: Pod| Case {
        name: "a matching pod on an infeasible node still attracts its domain",
        pod,
        pods: vec![on("node1", S1, None), on("node2", S2, None)],
        nodes: nodes(&[CHINA, INDIA, CHINA]),
        want: scores(&[0, 100]),
    };
    run_one(&pl, &without(incoming(&[], Some(stay_with_s1_in_region()))), Some(&["node2", "node3"]));
    // Same through existing pods' terms only (only nodes with affinity pods are visited).
    let c = Case {
        name: "an infeasible node's pod with affinity still scores its domain",
        pod: incoming(S1, None),
        pods: vec![on("node1", &[], Some(stay_with_s1_in_region())), on("node2", S2, None)],
        nodes: nodes(&[CHINA, INDIA, CHINA]),
        want: scores(&[0, 100]),
    };
    run_one(&pl, &c, Some(&["node2", "node3"]));
}

#[test]
fn preferred_affinity_with_hard_pod_affinity_symmetric_weight() {
    let hard = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": sel_in("service", &["S1"]),
        "namespaces": ["default", "subteam2.team2"],
        "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]},
        "topologyKey": "region",
    }]}});
    let service_s1: &[(&str, &str)] = &[("service", "S1")];
    let pods = || vec![on("node1", &[], Some(hard.clone())), on("node2", &[], Some(hard.clone()))];
    let cases: Vec<(i32, Case)> = vec![
        (
            1,
            Case {
                name: "with default weight",
                pod: incoming(service_s1, None),
                pods: pods(),
                nodes: nodes(&[CHINA, INDIA, AZ1]),
                want: scores(&[100, 100, 0]),
            },
        ),
        (
            0,
            Case {
                name: "with zero weight",
                pod: incoming(service_s1, None),
                pods: pods(),
                nodes: nodes(&[CHINA, INDIA, AZ1]),
                want: skip(),
            },
        ),
        (
            1,
            Case {
                name: "with no matching namespace",
                pod: on_in_ns(Some("subteam1.team2"), service_s1, None),
                pods: pods(),
                nodes: nodes(&[CHINA, INDIA, AZ1]),
                want: skip(),
            },
        ),
        (
            1,
            Case {
                name: "with matching namespace selector",
                pod: on_in_ns(Some("subteam1.team1"), service_s1, None),
                pods: pods(),
                nodes: nodes(&[CHINA, INDIA, AZ1]),
                want: scores(&[100, 100, 0]),
            },
        ),
        (
            1,
            Case {
                name: "with matching namespaces",
                pod: on_in_ns(Some("subteam2.team2"), service_s1, None),
                pods: pods(),
                nodes: nodes(&[CHINA, INDIA, AZ1]),
                want: scores(&[100, 100, 0]),
            },
        ),
    ];
    for (weight, c) in &cases {
        let args = InterPodAffinityArgs { hard_pod_affinity_weight: *weight, ..Default::default() };
        run_one(&plugin_with(args, &team_namespaces()), c, None);
    }
}

#[test]
fn raw_scores_combine_weights() {
    // Incoming: +5 (S1 in region), -3 (S2 in az). Existing required term matching it: +hard(7).
    let pod = incoming(
        S1,
        Some(json!({
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                weighted(5, term(sel_in("security", &["S1"]), "region"))]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                weighted(3, term(sel_in("security", &["S2"]), "az"))]},
        })),
    );
    let pods = vec![
        on("node1", S1, None),
        on("node2", S2, None),
        on(
            "node3",
            &[],
            Some(json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term(sel_in("security", &["S1"]), "region")]}})),
        ),
        on("node4", &[], Some(away_from_s1_in_az())),
    ];
    let ns = nodes(&[CHINA, &[("region", "India"), ("az", "az1")], INDIA, AZ1]);
    let args = InterPodAffinityArgs { hard_pod_affinity_weight: 7, ..Default::default() };
    let pl = plugin_with(args, &[]);
    let snap = snapshot(&pods, &ns);
    let pi = pod_info(&pod);
    let mut state = CycleState::new();
    let _ = pl.pre_filter(&mut state, &pi, &snap);
    assert!(pl.pre_score(&mut state, &pi, &ksched_framework::node_refs(snap.list()), &snap).is_success());
    let raw: Vec<i64> = snap.list().iter().map(|n| pl.score(&state, &pi, n).unwrap()).collect();
    // node1 China: +5; node2 India/az1: -3 (az1) + 7 (India, node3's required term);
    // node3 India: +7; node4 az1: -3 (az1) - 5 (node4's preferred anti-affinity to S1).
    assert_eq!(raw, vec![5, 7 - 3 - 5, 7, -3 - 5]);
    let mut normalized = raw.clone();
    assert!(pl.normalize_score(&state, &pi, &ksched_framework::node_refs(snap.list()), &mut normalized).is_success());
    // min -8, max 7, spread 15: 100 * 13/15 = 86.67 -> 86, 100 * 7/15 = 46.67 -> 46.
    assert_eq!(normalized, vec![86, 46, 100, 0]);
}

fn state_with(scores: &[(&str, &str, i64)]) -> CycleState {
    let mut counts = TopologyCounts::default();
    for (k, v, s) in scores {
        counts.record(k, v, *s);
    }
    let mut state = CycleState::new();
    state.write(PRE_SCORE_STATE_KEY, PreScoreState { topology_score: vec![Arc::new(counts)] });
    state
}

#[test]
fn normalize_score_min_max_with_truncation() {
    let pl = plugin();
    let pi = pod_info(&make_pod().obj());
    let cases: &[(&str, &[i64], &[i64])] = &[
        ("negative to positive", &[-5, 0, 6], &[0, 45, 100]),
        ("thirds truncate", &[0, 1, 2, 3], &[0, 33, 66, 100]),
        ("all equal", &[4, 4, 4], &[0, 0, 0]),
        ("all negative", &[-10, -1, -4], &[0, 100, 66]),
        ("single", &[9], &[0]),
        ("empty", &[], &[]),
    ];
    let state = state_with(&[("zone", "a", 1)]);
    for (name, input, want) in cases {
        let mut got = input.to_vec();
        assert!(pl.normalize_score(&state, &pi, &[], &mut got).is_success());
        assert_eq!(&got, want, "{name}");
    }
    // An empty score map leaves the scores alone.
    let mut got = vec![3, 7];
    assert!(pl.normalize_score(&state_with(&[]), &pi, &[], &mut got).is_success());
    assert_eq!(got, vec![3, 7]);
}

#[test]
fn score_without_pre_score_is_an_error() {
    let pl = plugin();
    let pi = pod_info(&make_pod().obj());
    let ni = NodeInfo::new(Arc::new(node("n", CHINA)));
    let err = pl.score(&CycleState::new(), &pi, &ni).unwrap_err();
    assert_eq!(err.code(), Code::Error);
    assert_eq!(err.message(), "failed to read \"PreScoreInterPodAffinity\" from cycleState: not found");
    let status = pl.normalize_score(&CycleState::new(), &pi, &[], &mut []);
    assert_eq!(status.message(), err.message());
    // A node lacking every scored key scores 0.
    let state = state_with(&[("zone", "a", 3)]);
    assert_eq!(pl.score(&state, &pi, &ni).unwrap(), 0);
}

#[test]
fn pre_score_without_pre_filter_uses_the_given_nodes() {
    let pl = plugin();
    let pods = vec![on("node1", S1, None)];
    let ns = nodes(&[CHINA, INDIA]);
    let snap = snapshot(&pods, &ns);
    let pi = pod_info(&incoming(&[], Some(stay_with_s1_in_region())));
    let mut state = CycleState::new();
    assert!(pl.pre_score(&mut state, &pi, &ksched_framework::node_refs(snap.list()), &snap).is_success());
    let raw: Vec<i64> = snap.list().iter().map(|n| pl.score(&state, &pi, n).unwrap()).collect();
    assert_eq!(raw, vec![5, 0]);
}
