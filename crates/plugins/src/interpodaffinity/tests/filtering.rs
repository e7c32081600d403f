//! PreFilter / Filter / AddPod / RemovePod (upstream's filtering_test.go).

use std::sync::Arc;

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{Code, CycleState, FilterPlugin, PreFilterExtensions, PreFilterPlugin, Status};
use serde_json::{json, Value};

use super::*;
use crate::interpodaffinity::filtering::{PreFilterState, TopologyCounts, PRE_FILTER_STATE_KEY};
use crate::interpodaffinity::{
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFF, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
};

fn ok() -> Status {
    Status::success()
}
fn aff() -> Status {
    Status::unresolvable(AFF)
}
fn anti() -> Status {
    Status::unschedulable(ANTI)
}
fn existing() -> Status {
    Status::unschedulable(EXISTING)
}

/// Upstream's `createPodWithAffinityTerms`: both sections present, required terms only.
fn pod_with_terms(namespace: &str, labels: &[(&str, &str)], affinity: Vec<Value>, anti: Vec<Value>) -> Pod {
    let mut p = make_pod().labels(labels).affinity(json!({
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti},
    }));
    if !namespace.is_empty() {
        p = p.namespace(namespace);
    }
    p.obj()
}

struct Case {
    name: &'static str,
    pod: Pod,
    pods: Vec<Pod>,
    nodes: Vec<Node>,
    pre_filter: Status,
    filter: Vec<Status>,
}

fn run(cases: Vec<Case>, pl: &InterPodAffinity) {
    for c in cases {
        let snap = snapshot(&c.pods, &c.nodes);
        let pi = pod_info(&c.pod);
        let mut state = CycleState::new();
        let (result, status) = pl.pre_filter(&mut state, &pi, &snap);
        assert!(result.is_none(), "{}: PreFilter never narrows nodes", c.name);
        assert_eq!(status, c.pre_filter, "{}: PreFilter", c.name);
        if !status.is_success() {
            continue;
        }
        for (node, want) in snap.list().iter().zip(&c.filter) {
            assert_eq!(&pl.filter(&state, &pi, node), want, "{}: Filter on {}", c.name, node.name());
        }
        assert_eq!(snap.list().len(), c.filter.len(), "{}: one want per node", c.name);
    }
}

#[test]
fn required_affinity_single_node() {
    let pod_label: &[(&str, &str)] = &[("service", "securityscan")];
    let pod_label2: &[(&str, &str)] = &[("security", "S1")];
    let existing_pod = make_pod().labels(pod_label).node("node1").obj();
    let node1 = || vec![node("node1", &[("region", "r1"), ("zone", "z11")])];
    let in_ns = |ns: &str| make_pod().namespace(ns).node("node1").labels(pod_label).obj();
    let team1_selector = json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]});
    let ns_term = |ns_selector: Value, tk: &str| json!({"labelSelector": sel_in("service", &["securityscan", "value2"]), "namespaceSelector": ns_selector, "topologyKey": tk});
    let cases = vec![
        Case {
            name: "no required pod affinity and no existing pods: skip",
            pod: make_pod().obj(),
            pods: vec![],
            nodes: node1(),
            pre_filter: Status::skip(),
            filter: vec![],
        },
        Case {
            name: "In operator matching the existing pod",
            pod: make_pod()
                .labels(pod_label2)
                .pod_affinity_in("service", "region", &["securityscan", "value2"], Required)
                .obj(),
            pods: vec![existing_pod.clone()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![ok()],
        },
        Case {
            name: "NotIn operator matching the existing pod",
            pod: make_pod()
                .labels(pod_label2)
                .pod_affinity_not_in("service", "region", &["securityscan3", "value3"], Required)
                .obj(),
            pods: vec![existing_pod.clone()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![ok()],
        },
        Case {
            name: "different namespace does not satisfy the affinity",
            pod: pod_with_terms(
                "",
                pod_label2,
                vec![
                    json!({"labelSelector": sel_in("service", &["securityscan", "value2"]), "namespaces": ["DiffNameSpace"]}),
                ],
                vec![],
            ),
            pods: vec![make_pod().namespace("ns").label("service", "securityscan").node("node1").obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![aff()],
        },
        Case {
            name: "unmatching label selector",
            pod: make_pod()
                .labels(pod_label)
                .pod_affinity_in("service", "", &["antivirusscan", "value2"], Required)
                .obj(),
            pods: vec![existing_pod.clone()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![aff()],
        },
        Case {
            name: "different operators in multiple terms, all satisfied",
            pod: pod_with_terms(
                "",
                pod_label2,
                vec![
                    term(sel_exprs(&[("service", "Exists", &[]), ("wrongkey", "DoesNotExist", &[])]), "region"),
                    term(
                        sel_exprs(&[("service", "In", &["securityscan"]), ("service", "NotIn", &["WrongValue"])]),
                        "region",
                    ),
                ],
                vec![],
            ),
            pods: vec![existing_pod.clone()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![ok()],
        },
        Case {
            name: "match expressions are ANDed: one fails",
            pod: pod_with_terms(
                "",
                pod_label2,
                vec![
                    term(sel_exprs(&[("service", "Exists", &[]), ("wrongkey", "DoesNotExist", &[])]), "region"),
                    term(
                        sel_exprs(&[("service", "In", &["securityscan2"]), ("service", "NotIn", &["WrongValue"])]),
                        "region",
                    ),
                ],
                vec![],
            ),
            pods: vec![existing_pod.clone()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![aff()],
        },
        Case {
            name: "satisfies affinity and anti-affinity",
            pod: make_pod()
                .labels(pod_label2)
                .pod_affinity_in("service", "region", &["securityscan", "value2"], Required)
                .pod_anti_affinity_in("service", "node", &["antivirusscan", "value2"], Required)
                .obj(),
            pods: vec![existing_pod.clone()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![ok()],
        },
        Case {
            name: "satisfies affinity, anti-affinity and the existing pod's anti-affinity",
            pod: make_pod()
                .labels(pod_label2)
                .pod_affinity_in("service", "region", &["securityscan", "value2"], Required)
                .pod_anti_affinity_in("service", "node", &["antivirusscan", "value2"], Required)
                .obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(pod_label)
                .pod_anti_affinity_in("service", "node", &["antivirusscan", "value2"], Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![ok()],
        },
        Case {
            name: "satisfies affinity but not anti-affinity",
            pod: make_pod()
                .labels(pod_label2)
                .pod_affinity_in("service", "region", &["securityscan", "value2"], Required)
                .pod_anti_affinity_in("service", "zone", &["securityscan", "value2"], Required)
                .obj(),
            pods: vec![existing_pod.clone()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![anti()],
        },
        Case {
            name: "satisfies affinity and anti-affinity but not the existing pod's anti-affinity",
            pod: make_pod()
                .labels(pod_label)
                .pod_affinity_in("service", "region", &["securityscan", "value2"], Required)
                .pod_anti_affinity_in("service", "node", &["antivirusscan", "value2"], Required)
                .obj(),
            pods: vec![make_pod()
                .labels(pod_label)
                .node("node1")
                .pod_anti_affinity_in("service", "zone", &["securityscan", "value2"], Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![existing()],
        },
        Case {
            name: "pod matches its own affinity but an existing pod elsewhere matches too",
            pod: make_pod()
                .labels(pod_label)
                .pod_affinity_not_in("service", "region", &["securityscan", "value2"], Required)
                .obj(),
            pods: vec![make_pod().label("service", "securityscan").node("node2").obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![aff()],
        },
        Case {
            name: "existing pod's anti-affinity is respected without incoming terms: violated",
            pod: make_pod().labels(pod_label).obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(pod_label)
                .pod_anti_affinity_in("service", "zone", &["securityscan", "value2"], Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![existing()],
        },
        Case {
            name: "existing pod's anti-affinity is respected without incoming terms: satisfied (skip)",
            pod: make_pod().labels(pod_label).obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(pod_label)
                .pod_anti_affinity_not_in("service", "zone", &["securityscan", "value2"], Required)
                .obj()],
            nodes: node1(),
            pre_filter: Status::skip(),
            filter: vec![],
        },
        Case {
            name: "satisfies the existing pod's anti-affinity but not its own",
            pod: make_pod()
                .labels(pod_label)
                .pod_anti_affinity_exists("service", "region", Required)
                .pod_anti_affinity_exists("security", "region", Required)
                .obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(pod_label2)
                .pod_anti_affinity_exists("security", "zone", Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![anti()],
        },
        Case {
            name: "symmetry a1: partial mutual match",
            pod: make_pod()
                .labels(pod_label)
                .pod_anti_affinity_exists("service", "zone", Required)
                .pod_anti_affinity_exists("security", "zone", Required)
                .obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(pod_label2)
                .pod_anti_affinity_exists("security", "zone", Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![anti()],
        },
        Case {
            name: "symmetry a2: partial mutual match",
            pod: make_pod().labels(pod_label2).pod_anti_affinity_exists("security", "zone", Required).obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(pod_label)
                .pod_anti_affinity_exists("service", "zone", Required)
                .pod_anti_affinity_exists("security", "zone", Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![existing()],
        },
        Case {
            name: "symmetry b1: partial mutual match",
            pod: make_pod()
                .labels(&[("abc", ""), ("xyz", "")])
                .pod_anti_affinity_exists("abc", "zone", Required)
                .pod_anti_affinity_exists("def", "zone", Required)
                .obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(&[("def", ""), ("xyz", "")])
                .pod_anti_affinity_exists("abc", "zone", Required)
                .pod_anti_affinity_exists("def", "zone", Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![anti()],
        },
        Case {
            name: "symmetry b2: partial mutual match",
            pod: make_pod()
                .labels(&[("def", ""), ("xyz", "")])
                .pod_anti_affinity_exists("abc", "zone", Required)
                .pod_anti_affinity_exists("def", "zone", Required)
                .obj(),
            pods: vec![make_pod()
                .node("node1")
                .labels(&[("abc", ""), ("xyz", "")])
                .pod_anti_affinity_exists("abc", "zone", Required)
                .pod_anti_affinity_exists("def", "zone", Required)
                .obj()],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![anti()],
        },
        Case {
            name: "affinity with a matching namespace selector",
            pod: pod_with_terms("", pod_label2, vec![ns_term(team1_selector.clone(), "region")], vec![]),
            pods: vec![in_ns("subteam1.team1")],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![ok()],
        },
        Case {
            name: "affinity with a non-matching namespace selector",
            pod: pod_with_terms("", pod_label2, vec![ns_term(team1_selector.clone(), "region")], vec![]),
            pods: vec![in_ns("subteam1.team2")],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![aff()],
        },
        Case {
            name: "anti-affinity with a matching namespace selector",
            pod: pod_with_terms("subteam1.team1", pod_label2, vec![], vec![ns_term(team1_selector.clone(), "zone")]),
            pods: vec![in_ns("subteam2.team1")],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![anti()],
        },
        Case {
            name: "anti-affinity with an empty (match-all) namespace selector",
            pod: pod_with_terms("subteam1.team1", pod_label2, vec![], vec![ns_term(json!({}), "zone")]),
            pods: vec![in_ns("subteam2.team1")],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![anti()],
        },
        Case {
            name: "anti-affinity with a non-matching namespace selector",
            pod: pod_with_terms("subteam1.team1", pod_label2, vec![], vec![ns_term(team1_selector.clone(), "zone")]),
            pods: vec![in_ns("subteam1.team2")],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![ok()],
        },
        Case {
            name: "namespace selector matching a namespace unknown to the lister: no namespace is added",
            pod: pod_with_terms(
                "",
                pod_label2,
                vec![ns_term(json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}), "region")],
                vec![],
            ),
            pods: vec![in_ns("unknown-ns")],
            nodes: node1(),
            pre_filter: ok(),
            filter: vec![aff()],
        },
    ];
    run(cases, &plugin());
}

#[test]
fn parse_errors_fail_pre_filter() {
    let bad = |anti: bool| {
        make_pod()
            .label("service", "securityscan")
            .pod_affinity_in("service", "region", &["foo"], Required)
            .raw_term(anti, Required, term(json!({"matchExpressions": [{"key": "service", "operator": "In"}]}), "node"))
            .obj()
    };
    let reason = "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty";
    let cases = vec![
        Case {
            name: "invalid affinity term",
            pod: bad(false),
            pods: vec![],
            nodes: vec![node("node1", &[])],
            pre_filter: Status::unresolvable(format!("parsing pod: requiredAffinityTerms: {reason}")),
            filter: vec![],
        },
        Case {
            name: "invalid anti-affinity term",
            pod: bad(true),
            pods: vec![],
            nodes: vec![node("node1", &[])],
            pre_filter: Status::unresolvable(format!("parsing pod: requiredAntiAffinityTerms: {reason}")),
            filter: vec![],
        },
    ];
    run(cases, &plugin());

    // Several failing categories are reported as one bracketed aggregate.
    let both = make_pod()
        .raw_term(false, Required, term(json!({"matchExpressions": [{"key": "a", "operator": "In"}]}), "node"))
        .raw_term(true, Preferred(1), term(json!({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}), "node"))
        .obj();
    let (_, status) = plugin().pre_filter(&mut CycleState::new(), &pod_info(&both), &snapshot(&[], &[]));
    assert_eq!(
        status,
        Status::unresolvable(format!(
            "parsing pod: [requiredAffinityTerms: {reason}, preferredAntiAffinityTerms: \"Bogus\" is not a valid label selector operator]"
        ))
    );
}

#[test]
fn required_affinity_multiple_nodes() {
    let rg_china: &[(&str, &str)] = &[("region", "China")];
    let rg_china_az1: &[(&str, &str)] = &[("region", "China"), ("az", "az1")];
    let rg_india: &[(&str, &str)] = &[("region", "India")];
    let three = || vec![node("nodeA", rg_china), node("nodeB", rg_china_az1), node("nodeC", rg_india)];
    let abc = |zone_b: &str| {
        vec![
            node("nodeA", &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")]),
            node("nodeB", &[("region", "r1"), ("zone", zone_b), ("hostname", "nodeB")]),
        ]
    };
    let cases = vec![
        Case {
            name: "nodes sharing the matching pod's topology value fit",
            pod: make_pod().pod_affinity_in("foo", "region", &["bar"], Required).obj(),
            pods: vec![make_pod().name("p1").node("nodeA").label("foo", "bar").obj()],
            nodes: three(),
            pre_filter: ok(),
            filter: vec![ok(), ok(), aff()],
        },
        Case {
            name: "first pod of a collection is not blocked when nothing matches anywhere",
            pod: make_pod()
                .labels(&[("foo", "bar"), ("service", "securityscan")])
                .pod_affinity_in("foo", "zone", &["bar"], Required)
                .pod_affinity_in("service", "zone", &["securityscan"], Required)
                .obj(),
            pods: vec![make_pod().name("p1").node("nodeA").label("foo", "bar").obj()],
            nodes: vec![
                node("nodeA", &[("zone", "az1"), ("hostname", "h1")]),
                node("nodeB", &[("zone", "az2"), ("hostname", "h2")]),
            ],
            pre_filter: ok(),
            filter: vec![ok(), ok()],
        },
        Case {
            name: "first pod of a collection still needs the topology keys",
            pod: make_pod()
                .labels(&[("foo", "bar"), ("service", "securityscan")])
                .pod_affinity_in("foo", "zone", &["bar"], Required)
                .pod_affinity_in("service", "zone", &["securityscan"], Required)
                .obj(),
            pods: vec![make_pod().name("p1").node("nodeA").label("foo", "bar").obj()],
            nodes: vec![
                node("nodeA", &[("zoneLabel", "az1"), ("hostname", "h1")]),
                node("nodeB", &[("zoneLabel", "az2"), ("hostname", "h2")]),
            ],
            pre_filter: ok(),
            filter: vec![aff(), aff()],
        },
        Case {
            name: "anti-affinity blocks the whole region of the matching pod",
            pod: make_pod().pod_anti_affinity_in("foo", "region", &["abc"], Required).obj(),
            pods: vec![make_pod().node("nodeA").label("foo", "abc").obj()],
            nodes: vec![
                node("nodeA", &[("region", "r1"), ("hostname", "nodeA")]),
                node("nodeB", &[("region", "r1"), ("hostname", "nodeB")]),
            ],
            pre_filter: ok(),
            filter: vec![anti(), anti()],
        },
        Case {
            name: "anti-affinity matches when any term matches",
            pod: make_pod()
                .pod_anti_affinity_in("foo", "region", &["abc"], Required)
                .pod_anti_affinity_in("service", "zone", &["securityscan"], Required)
                .obj(),
            pods: vec![make_pod().node("nodeA").labels(&[("foo", "abc"), ("service", "securityscan")]).obj()],
            nodes: vec![
                node("nodeA", &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")]),
                node("nodeB", &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")]),
            ],
            pre_filter: ok(),
            filter: vec![anti(), anti()],
        },
        Case {
            name: "anti-affinity leaves other regions schedulable",
            pod: make_pod().pod_anti_affinity_in("foo", "region", &["abc"], Required).obj(),
            pods: vec![make_pod().node("nodeA").label("foo", "abc").obj()],
            nodes: three(),
            pre_filter: ok(),
            filter: vec![anti(), anti(), ok()],
        },
        Case {
            name: "pods in other namespaces neither block nor are blocked",
            pod: make_pod()
                .namespace("NS1")
                .label("foo", "123")
                .pod_anti_affinity_in("foo", "region", &["bar"], Required)
                .obj(),
            pods: vec![
                make_pod().node("nodeA").namespace("NS1").label("foo", "bar").obj(),
                make_pod()
                    .node("nodeC")
                    .namespace("NS2")
                    .pod_anti_affinity_in("foo", "region", &["123"], Required)
                    .obj(),
            ],
            nodes: three(),
            pre_filter: ok(),
            filter: vec![anti(), anti(), ok()],
        },
        Case {
            name: "existing pod's term with a topology key no node has is ignored",
            pod: make_pod().label("foo", "").obj(),
            pods: vec![make_pod().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label", Required).obj()],
            nodes: abc("z1"),
            pre_filter: Status::skip(),
            filter: vec![],
        },
        Case {
            name: "incoming pod's term with a topology key no node has is ignored",
            pod: make_pod().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label", Required).obj(),
            pods: vec![make_pod().node("nodeA").label("foo", "").obj()],
            nodes: abc("z1"),
            pre_filter: ok(),
            filter: vec![ok(), ok()],
        },
        Case {
            name: "incoming pod violates each existing pod's terms on all nodes",
            pod: make_pod().label("foo", "").label("bar", "").obj(),
            pods: vec![
                make_pod().node("nodeA").pod_anti_affinity_exists("foo", "zone", Required).obj(),
                make_pod().node("nodeA").pod_anti_affinity_exists("bar", "region", Required).obj(),
            ],
            nodes: abc("z2"),
            pre_filter: ok(),
            filter: vec![existing(), existing()],
        },
        Case {
            name: "incoming pod's anti-affinity violated by at least one existing pod",
            pod: make_pod()
                .pod_anti_affinity_exists("foo", "zone", Required)
                .pod_anti_affinity_exists("bar", "region", Required)
                .obj(),
            pods: vec![
                make_pod().node("nodeA").label("foo", "").obj(),
                make_pod().node("nodeB").label("bar", "").obj(),
            ],
            nodes: abc("z2"),
            pre_filter: ok(),
            filter: vec![anti(), anti()],
        },
        Case {
            name: "existing pod's terms count only where both selector and topology key match (one key invalid)",
            pod: make_pod().label("foo", "").label("bar", "").obj(),
            pods: vec![make_pod()
                .node("nodeA")
                .pod_anti_affinity_exists("foo", "invalid-node-label", Required)
                .pod_anti_affinity_exists("bar", "zone", Required)
                .obj()],
            nodes: abc("z2"),
            pre_filter: ok(),
            filter: vec![existing(), ok()],
        },
        Case {
            name: "incoming pod's terms count only where both selector and topology key match (one key invalid)",
            pod: make_pod()
                .pod_anti_affinity_exists("foo", "invalid-node-label", Required)
                .pod_anti_affinity_exists("bar", "zone", Required)
                .obj(),
            pods: vec![make_pod().name("podA").node("nodeA").labels(&[("foo", ""), ("bar", "")]).obj()],
            nodes: abc("z2"),
            pre_filter: ok(),
            filter: vec![anti(), ok()],
        },
        Case {
            name: "existing pod's terms with valid keys block both nodes",
            pod: make_pod().label("foo", "").label("bar", "").obj(),
            pods: vec![make_pod()
                .node("nodeA")
                .pod_anti_affinity_exists("foo", "region", Required)
                .pod_anti_affinity_exists("bar", "zone", Required)
                .obj()],
            nodes: abc("z2"),
            pre_filter: ok(),
            filter: vec![existing(), existing()],
        },
        Case {
            name: "incoming pod's terms with valid keys block both nodes",
            pod: make_pod()
                .pod_anti_affinity_exists("foo", "region", Required)
                .pod_anti_affinity_exists("bar", "zone", Required)
                .obj(),
            pods: vec![make_pod().node("nodeA").labels(&[("foo", ""), ("bar", "")]).obj()],
            nodes: abc("z2"),
            pre_filter: ok(),
            filter: vec![anti(), anti()],
        },
        Case {
            name: "existing pods on nodeA and nodeB each hate the pod: only nodeC fits",
            pod: make_pod().label("foo", "").label("bar", "").obj(),
            pods: vec![
                make_pod()
                    .node("nodeA")
                    .pod_anti_affinity_exists("foo", "zone", Required)
                    .pod_anti_affinity_exists("labelA", "zone", Required)
                    .obj(),
                make_pod()
                    .node("nodeB")
                    .pod_anti_affinity_exists("bar", "zone", Required)
                    .pod_anti_affinity_exists("labelB", "zone", Required)
                    .obj(),
            ],
            nodes: vec![
                node("nodeA", &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")]),
                node("nodeB", &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")]),
                node("nodeC", &[("region", "r1"), ("zone", "z3"), ("hostname", "nodeC")]),
            ],
            pre_filter: ok(),
            filter: vec![existing(), existing(), ok()],
        },
        Case {
            name: "affinity: one pod matching all terms satisfies every key's domain",
            pod: make_pod()
                .pod_affinity_exists("foo", "region", Required)
                .pod_affinity_exists("bar", "zone", Required)
                .obj(),
            pods: vec![make_pod().name("pod1").labels(&[("foo", ""), ("bar", "")]).node("nodeA").obj()],
            nodes: abc("z1"),
            pre_filter: ok(),
            filter: vec![ok(), ok()],
        },
        Case {
            name: "affinity: terms must be matched by the same pod",
            pod: make_pod()
                .pod_affinity_exists("foo", "region", Required)
                .pod_affinity_exists("bar", "zone", Required)
                .obj(),
            pods: vec![
                make_pod().node("nodeA").name("pod1").label("foo", "").obj(),
                make_pod().node("nodeB").name("pod2").label("bar", "").obj(),
            ],
            nodes: abc("z2"),
            pre_filter: ok(),
            filter: vec![aff(), aff()],
        },
        Case {
            name: "affinity is checked before anti-affinity, anti-affinity before existing pods' anti-affinity",
            pod: make_pod()
                .label("app", "x")
                .pod_affinity_in("app", "region", &["y"], Required)
                .pod_anti_affinity_in("app", "zone", &["y"], Required)
                .obj(),
            pods: vec![make_pod()
                .node("nodeB")
                .label("app", "y")
                .pod_anti_affinity_in("app", "zone", &["x"], Required)
                .obj()],
            nodes: vec![node("nodeA", &[("zone", "z1")]), node("nodeB", &[("zone", "z1"), ("region", "r1")])],
            pre_filter: ok(),
            filter: vec![aff(), anti()],
        },
    ];
    run(cases, &plugin_with(InterPodAffinityArgs::default(), &[("NS1", &[])]));
}

#[test]
fn filter_without_pre_filter_is_an_error() {
    let ni = ksched_framework::NodeInfo::new(Arc::new(node("n", &[])));
    let status = plugin().filter(&CycleState::new(), &pod_info(&make_pod().obj()), &ni);
    assert_eq!(status, Status::error("error reading \"PreFilterInterPodAffinity\" from cycleState: not found"));
    let pi = Arc::new(pod_info(&make_pod().obj()));
    let status = plugin().add_pod(&mut CycleState::new(), &pi, &pi, &ni);
    assert_eq!(status.code(), Code::Error);
    assert_eq!(status.message(), "error reading \"PreFilterInterPodAffinity\" from cycleState: not found");
}

fn counts(pairs: &[(&str, &str, i64)]) -> std::collections::BTreeMap<(String, String), i64> {
    pairs.iter().map(|(k, v, c)| ((k.to_string(), v.to_string()), *c)).collect()
}

fn state_of(state: &CycleState) -> &PreFilterState {
    state.read::<PreFilterState>(PRE_FILTER_STATE_KEY).expect("prefilter state")
}

fn sorted(c: &TopologyCounts) -> std::collections::BTreeMap<(String, String), i64> {
    c.to_sorted()
}

#[test]
fn pre_filter_state_add_remove_pod() {
    let label1: &[(&str, &str)] = &[("region", "r1"), ("zone", "z11")];
    let label2: &[(&str, &str)] = &[("region", "r1"), ("zone", "z12")];
    let label3: &[(&str, &str)] = &[("region", "r2"), ("zone", "z21")];
    let nodes = || vec![node("nodeA", label1), node("nodeB", label2), node("nodeC", label3)];
    let anti_foo_bar = term(sel_in("foo", &["bar"]), "region");
    let complex = || {
        vec![
            term(sel_in("foo", &["bar", "buzz"]), "region"),
            term(sel_not_in("service", &["bar", "security", "test"]), "zone"),
        ]
    };
    let with =
        |p: PodBuilder, anti: bool, terms: Vec<Value>| terms.into_iter().fold(p, |p, t| p.raw_term(anti, Required, t));

    struct AddCase {
        name: &'static str,
        pending: Pod,
        added: Pod,
        existing: Vec<Pod>,
        want_anti: Vec<(&'static str, &'static str, i64)>,
        want_affinity: Vec<(&'static str, &'static str, i64)>,
    }
    let cases = vec![
        AddCase {
            name: "anti-affinity counts after adding and removing a pod",
            pending: with(make_pod().name("pending").label("foo", "bar"), true, vec![anti_foo_bar.clone()]).obj(),
            existing: vec![
                make_pod().name("p1").label("foo", "bar").node("nodeA").obj(),
                with(make_pod().name("p2").node("nodeC"), true, vec![anti_foo_bar.clone()]).obj(),
            ],
            added: with(
                make_pod().name("addedPod").label("foo", "bar").node("nodeB"),
                true,
                vec![anti_foo_bar.clone()],
            )
            .obj(),
            want_anti: vec![("region", "r1", 2)],
            want_affinity: vec![],
        },
        AddCase {
            name: "complex anti-affinity counts after adding and removing a pod",
            pending: with(make_pod().name("pending").label("foo", "bar"), true, complex()).obj(),
            existing: vec![
                make_pod().name("p1").label("foo", "bar").node("nodeA").obj(),
                with(make_pod().name("p2").node("nodeC"), true, vec![anti_foo_bar.clone()]).obj(),
            ],
            added: with(make_pod().name("addedPod").label("foo", "bar").node("nodeA"), true, complex()).obj(),
            want_anti: vec![("region", "r1", 2), ("zone", "z11", 2), ("zone", "z21", 1)],
            want_affinity: vec![],
        },
        AddCase {
            name: "affinity and anti-affinity counts after adding and removing a pod",
            pending: with(make_pod().name("pending").label("foo", "bar"), false, complex()).obj(),
            existing: vec![
                make_pod().name("p1").label("foo", "bar").node("nodeA").obj(),
                with(with(make_pod().name("p2").node("nodeC"), true, vec![anti_foo_bar.clone()]), false, complex())
                    .obj(),
            ],
            added: with(make_pod().name("addedPod").label("foo", "bar").node("nodeA"), true, complex()).obj(),
            want_anti: vec![],
            want_affinity: vec![("region", "r1", 2), ("zone", "z11", 2)],
        },
    ];
    let pl = plugin();
    for c in cases {
        let pending = pod_info(&c.pending);
        let pre_filter = |pods: &[Pod]| {
            let snap = snapshot(pods, &nodes());
            let mut state = CycleState::new();
            let (_, status) = pl.pre_filter(&mut state, &pending, &snap);
            assert!(status.is_success(), "{}: {status:?}", c.name);
            (state, snap)
        };
        let mut all = c.existing.clone();
        all.push(c.added.clone());
        let (all_state, _) = pre_filter(&all);
        let (mut state, snap) = pre_filter(&c.existing);
        let original = state.clone();

        let node = snap.get(c.added.spec.as_ref().unwrap().node_name.as_deref().unwrap()).unwrap().clone();
        let added = Arc::new(pod_info(&c.added));
        assert!(pl.add_pod(&mut state, &pending, &added, &node).is_success());
        let s = state_of(&state);
        assert_eq!(sorted(&s.anti_affinity_counts), counts(&c.want_anti), "{}: anti", c.name);
        assert_eq!(sorted(&s.affinity_counts), counts(&c.want_affinity), "{}: affinity", c.name);
        let want = state_of(&all_state);
        assert_eq!(s.anti_affinity_counts, want.anti_affinity_counts, "{}", c.name);
        assert_eq!(s.affinity_counts, want.affinity_counts, "{}", c.name);
        assert_eq!(s.existing_anti_affinity_counts, want.existing_anti_affinity_counts, "{}", c.name);

        // The clone taken before AddPod is unaffected (copy-on-write).
        let before = state_of(&original);
        assert!(pl.remove_pod(&mut state, &pending, &added, &node).is_success());
        let s = state_of(&state);
        assert_eq!(s.anti_affinity_counts, before.anti_affinity_counts, "{}: after remove", c.name);
        assert_eq!(s.affinity_counts, before.affinity_counts, "{}: after remove", c.name);
        assert_eq!(s.existing_anti_affinity_counts, before.existing_anti_affinity_counts, "{}: after remove", c.name);
    }
}

#[test]
fn removing_the_only_matching_pod_reenables_the_first_pod_exception_and_lifts_anti_affinity() {
    let nodes = vec![node("nodeA", &[("zone", "z1")]), node("nodeB", &[("zone", "z2")])];
    let victim = make_pod().name("victim").node("nodeA").label("app", "db").obj();
    let pl = plugin();
    let snap = snapshot(std::slice::from_ref(&victim), &nodes);
    let victim = Arc::new(pod_info(&victim));
    let node_a = snap.get("nodeA").unwrap().clone();

    // Affinity to itself ("app=db"): with the only other db pod gone, the exception applies.
    let group = pod_info(&make_pod().label("app", "db").pod_affinity_in("app", "zone", &["db"], Required).obj());
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &group, &snap).1.is_success());
    assert_eq!(pl.filter(&state, &group, &snap.list()[1]), aff());
    let mut removed = state.clone();
    assert!(pl.remove_pod(&mut removed, &group, &victim, &node_a).is_success());
    assert!(state_of(&removed).affinity_counts.is_empty());
    assert_eq!(pl.filter(&removed, &group, &snap.list()[1]), ok());
    assert_eq!(pl.filter(&state, &group, &snap.list()[1]), aff(), "the original state is untouched");

    // Anti-affinity against db pods: removing the victim frees nodeA.
    let hater = pod_info(&make_pod().pod_anti_affinity_in("app", "zone", &["db"], Required).obj());
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &hater, &snap).1.is_success());
    assert_eq!(pl.filter(&state, &hater, &node_a), anti());
    assert!(pl.remove_pod(&mut state, &hater, &victim, &node_a).is_success());
    assert_eq!(pl.filter(&state, &hater, &node_a), ok());

    // Adding a pod with anti-affinity against the incoming pod blocks its zone.
    let plain = pod_info(&make_pod().label("app", "web").pod_affinity_in("x", "zone", &["y"], Preferred(1)).obj());
    let mut state = CycleState::new();
    // Nothing hates the pod and it has no required terms.
    assert!(pl.pre_filter(&mut state, &plain, &snap).1.is_skip());
    let hater_pod =
        Arc::new(pod_info(&make_pod().name("h").pod_anti_affinity_in("app", "zone", &["web"], Required).obj()));
    let with_hater = snapshot(
        &[make_pod().name("h").node("nodeB").pod_anti_affinity_in("app", "zone", &["web"], Required).obj()],
        &nodes,
    );
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &plain, &with_hater).1.is_success());
    assert_eq!(pl.filter(&state, &plain, &with_hater.list()[1]), existing());
    assert!(pl.remove_pod(&mut state, &plain, &hater_pod, &with_hater.list()[1]).is_success());
    assert!(state_of(&state).existing_anti_affinity_counts.is_empty());
    assert!(pl.add_pod(&mut state, &plain, &hater_pod, &with_hater.list()[0]).is_success());
    assert_eq!(pl.filter(&state, &plain, &with_hater.list()[0]), existing());
    assert_eq!(pl.filter(&state, &plain, &with_hater.list()[1]), ok());
}

#[test]
fn incoming_affinity_and_anti_affinity_counts() {
    let normal =
        |labels: &[&str]| labels.iter().fold(make_pod().name("normal").node("nodeA"), |p, l| p.label(l, "")).obj();
    let node_a = || vec![node("nodeA", &[("hostname", "nodeA")])];
    struct CountCase {
        name: &'static str,
        existing: Vec<Pod>,
        pod: Pod,
        affinity: Vec<(&'static str, &'static str, i64)>,
        anti: Vec<(&'static str, &'static str, i64)>,
    }
    let cases = vec![
        CountCase {
            name: "nil test",
            existing: vec![],
            pod: make_pod().name("aaa-normal").obj(),
            affinity: vec![],
            anti: vec![],
        },
        CountCase {
            name: "incoming pod without affinity/anti-affinity causes a no-op",
            existing: vec![normal(&["aaa"])],
            pod: make_pod().name("aaa-normal").obj(),
            affinity: vec![],
            anti: vec![],
        },
        CountCase {
            name: "no pod has label that violates incoming pod's affinity and anti-affinity",
            existing: vec![normal(&["bbb"])],
            pod: make_pod()
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_anti_affinity_exists("aaa", "hostname", Required)
                .obj(),
            affinity: vec![],
            anti: vec![],
        },
        CountCase {
            name: "existing pod matches affinity and anti-affinity - single term",
            existing: vec![normal(&["aaa"])],
            pod: make_pod()
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_anti_affinity_exists("aaa", "hostname", Required)
                .obj(),
            affinity: vec![("hostname", "nodeA", 1)],
            anti: vec![("hostname", "nodeA", 1)],
        },
        CountCase {
            name: "existing pod matches affinity and anti-affinity - multiple terms",
            existing: vec![normal(&["aaa", "bbb"])],
            pod: make_pod()
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_affinity_exists("bbb", "hostname", Required)
                .pod_anti_affinity_exists("aaa", "hostname", Required)
                .obj(),
            affinity: vec![("hostname", "nodeA", 2)],
            anti: vec![("hostname", "nodeA", 1)],
        },
        CountCase {
            name: "existing pod doesn't match affinity but matches anti-affinity",
            existing: vec![normal(&["aaa"])],
            pod: make_pod()
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_affinity_exists("bbb", "hostname", Required)
                .pod_anti_affinity_exists("aaa", "hostname", Required)
                .pod_anti_affinity_exists("bbb", "hostname", Required)
                .obj(),
            affinity: vec![],
            anti: vec![("hostname", "nodeA", 1)],
        },
        CountCase {
            name: "anti-affinity with more than one term - existing pod violates a part - case 1",
            existing: vec![normal(&["aaa", "bbb"])],
            pod: make_pod()
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_affinity_exists("ccc", "hostname", Required)
                .pod_anti_affinity_exists("aaa", "hostname", Required)
                .pod_anti_affinity_exists("ccc", "hostname", Required)
                .obj(),
            affinity: vec![],
            anti: vec![("hostname", "nodeA", 1)],
        },
        CountCase {
            name: "anti-affinity with more than one term - existing pod violates a part - case 2",
            existing: vec![normal(&["bbb"])],
            pod: make_pod()
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_affinity_exists("bbb", "hostname", Required)
                .pod_anti_affinity_exists("aaa", "hostname", Required)
                .pod_anti_affinity_exists("bbb", "hostname", Required)
                .obj(),
            affinity: vec![],
            anti: vec![("hostname", "nodeA", 1)],
        },
    ];
    let pl = plugin();
    for c in cases {
        let snap = snapshot(&c.existing, &node_a());
        let mut state = CycleState::new();
        let (_, status) = pl.pre_filter(&mut state, &pod_info(&c.pod), &snap);
        if status.is_skip() {
            assert!(c.affinity.is_empty() && c.anti.is_empty(), "{}", c.name);
            continue;
        }
        let s = state_of(&state);
        assert_eq!(sorted(&s.affinity_counts), counts(&c.affinity), "{}: affinity", c.name);
        assert_eq!(sorted(&s.anti_affinity_counts), counts(&c.anti), "{}: anti", c.name);
    }
}

#[test]
fn topology_counts_drop_zero_entries() {
    let mut c = TopologyCounts::default();
    c.add("zone", "a", 1);
    c.add("zone", "b", 2);
    c.add("zone", "a", -1);
    assert_eq!(c.get("zone", "a"), 0);
    assert_eq!(c.to_sorted(), counts(&[("zone", "b", 2)]));
    c.add("zone", "b", -2);
    assert!(c.is_empty());
    c.add("zone", "c", -1);
    assert!(!c.is_empty(), "negative counts are kept like upstream");
}
