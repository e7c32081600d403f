//! PreFilter state, AddPod/RemovePod and Filter, after upstream's filtering_test.go.

use std::sync::Arc;

use ksched_framework::listers::MemoryLister;
use ksched_framework::{Code, CycleState, FilterPlugin, PreFilterExtensions, PreFilterPlugin, Status};

use super::*;
use crate::podtopologyspread::{ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH};

const FOO_PODS: [&str; 5] =
    ["p-a1 node-a foo=", "p-a2 node-a foo=", "p-b1 node-b foo=", "p-y1 node-y foo=", "p-y2 node-y foo="];
const SEVEN_FOO_PODS: [&str; 7] = [
    "p-a1 node-a foo=",
    "p-a2 node-a foo=",
    "p-b1 node-b foo=",
    "p-y1 node-y foo=",
    "p-y2 node-y foo=",
    "p-y3 node-y foo=",
    "p-y4 node-y foo=",
];
const THREE_NODES_BAR: [&str; 3] = ["node-a node=node-a foo=", "node-b node=node-b foo=", "node-c node=node-c bar="];
const BAR_PODS: [&str; 4] = ["p-a node-a bar=", "p-b node-b bar=", "p-c node-b bar=", "p-d node-c"];
const TAINTED_C: [&str; 3] = ["node-a node=node-a", "node-b node=node-b", "node-c node=node-c tainted bar="];

struct PreFilterCase {
    name: &'static str,
    pod: PodB,
    nodes: &'static [&'static str],
    pods: &'static [&'static str],
    defaults: Vec<Tsc>,
    services: Vec<&'static [(&'static str, &'static str)]>,
    /// `None` means PreFilter returns Skip.
    want: Option<StateView>,
}

fn case(name: &'static str, pod: PodB, nodes: &'static [&'static str], pods: &'static [&'static str]) -> PreFilterCase {
    PreFilterCase { name, pod, nodes, pods, defaults: vec![], services: vec![], want: None }
}

impl PreFilterCase {
    fn want(mut self, v: StateView) -> Self {
        self.want = Some(v);
        self
    }
    fn defaults(mut self, d: Vec<Tsc>, services: Vec<&'static [(&'static str, &'static str)]>) -> Self {
        self.defaults = d;
        self.services = services;
        self
    }
}

fn foo_pod() -> PodB {
    pod("p").label("foo", "")
}

#[test]
fn pre_filter_states() {
    let cases = vec![
        case(
            "clean cluster with one spreadConstraint",
            foo_pod().spread(tsc(5, "zone", DNS, match_labels(&[("foo", "bar")]))),
            &FOUR_NODES,
            &[],
        )
        .want(vec![sv(&[("zone1", 0), ("zone2", 0)], [("zone1", 0), ("zone2", 0)])]),
        case(
            "normal case with one spreadConstraint",
            foo_pod().spread(tsc(1, "zone", DNS, exists("foo"))),
            &FOUR_NODES,
            &FOO_PODS,
        )
        .want(vec![sv(&[("zone1", 3), ("zone2", 2)], [("zone2", 2), ("zone1", 3)])]),
        case(
            "normal case with null label selector",
            foo_pod().spread(tsc(1, "zone", DNS, None)),
            &FOUR_NODES,
            &FOO_PODS,
        )
        .want(vec![sv(&[("zone1", 0), ("zone2", 0)], [("zone1", 0), ("zone2", 0)])]),
        case(
            "normal case with one spreadConstraint, on a 3-zone cluster",
            foo_pod().spread(tsc(1, "zone", DNS, exists("foo"))),
            &[
                "node-a zone=zone1 node=node-a",
                "node-b zone=zone1 node=node-b",
                "node-x zone=zone2 node=node-x",
                "node-y zone=zone2 node=node-y",
                "node-o zone=zone3 node=node-o",
                "node-p zone=zone3 node=node-p",
            ],
            &FOO_PODS,
        )
        .want(vec![sv(&[("zone1", 3), ("zone2", 2), ("zone3", 0)], [("zone3", 0), ("zone2", 2)])]),
        case(
            "namespace mismatch doesn't count",
            foo_pod().spread(tsc(1, "zone", DNS, exists("foo"))),
            &FOUR_NODES,
            &[
                "p-a1 node-a foo=",
                "p-a2 node-a foo= ns:ns1",
                "p-b1 node-b foo=",
                "p-y1 node-y foo= ns:ns2",
                "p-y2 node-y foo=",
            ],
        )
        .want(vec![sv(&[("zone1", 2), ("zone2", 1)], [("zone2", 1), ("zone1", 2)])]),
        case(
            "normal case with two spreadConstraints",
            foo_pod().spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(1, "node", DNS, exists("foo"))),
            &FOUR_NODES,
            &SEVEN_FOO_PODS,
        )
        .want(vec![
            sv(&[("zone1", 3), ("zone2", 4)], [("zone1", 3), ("zone2", 4)]),
            sv(&[("node-a", 2), ("node-b", 1), ("node-x", 0), ("node-y", 4)], [("node-x", 0), ("node-b", 1)]),
        ]),
        case(
            "soft spreadConstraints should be bypassed",
            foo_pod()
                .spread(tsc(1, "zone", SA, exists("foo")))
                .spread(tsc(1, "zone", DNS, exists("foo")))
                .spread(tsc(1, "node", SA, exists("foo")))
                .spread(tsc(1, "node", DNS, exists("foo"))),
            &["node-a zone=zone1 node=node-a", "node-b zone=zone1 node=node-b", "node-y zone=zone2 node=node-y"],
            &SEVEN_FOO_PODS,
        )
        .want(vec![
            sv(&[("zone1", 3), ("zone2", 4)], [("zone1", 3), ("zone2", 4)]),
            sv(&[("node-a", 2), ("node-b", 1), ("node-y", 4)], [("node-b", 1), ("node-a", 2)]),
        ]),
        case(
            "different labelSelectors - simple version",
            foo_pod().label("bar", "").spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(
                1,
                "node",
                DNS,
                exists("bar"),
            )),
            &["node-a zone=zone1 node=node-a", "node-b zone=zone1 node=node-b", "node-y zone=zone2 node=node-y"],
            &["p-a node-a foo=", "p-b node-b bar="],
        )
        .want(vec![
            sv(&[("zone1", 1), ("zone2", 0)], [("zone2", 0), ("zone1", 1)]),
            sv(&[("node-a", 0), ("node-b", 1), ("node-y", 0)], [("node-a", 0), ("node-y", 0)]),
        ]),
        case(
            "different labelSelectors - complex pods",
            foo_pod().label("bar", "").spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(
                1,
                "node",
                DNS,
                exists("bar"),
            )),
            &["node-a zone=zone1 node=node-a", "node-b zone=zone1 node=node-b", "node-y zone=zone2 node=node-y"],
            &[
                "p-a1 node-a foo=",
                "p-a2 node-a foo= bar=",
                "p-b1 node-b foo=",
                "p-y1 node-y foo=",
                "p-y2 node-y foo= bar=",
                "p-y3 node-y foo=",
                "p-y4 node-y foo= bar=",
            ],
        )
        .want(vec![
            sv(&[("zone1", 3), ("zone2", 4)], [("zone1", 3), ("zone2", 4)]),
            sv(&[("node-a", 1), ("node-b", 0), ("node-y", 2)], [("node-b", 0), ("node-a", 1)]),
        ]),
        case(
            "two spreadConstraints, and with podAffinity",
            foo_pod().node_affinity_not_in("node", &["node-x"]).spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(
                1,
                "node",
                DNS,
                exists("foo"),
            )),
            &FOUR_NODES,
            &SEVEN_FOO_PODS,
        )
        .want(vec![
            sv(&[("zone1", 3), ("zone2", 4)], [("zone1", 3), ("zone2", 4)]),
            sv(&[("node-a", 2), ("node-b", 1), ("node-y", 4)], [("node-b", 1), ("node-a", 2)]),
        ]),
        case("default constraints and a service", pod("p").label("foo", "bar").label("baz", "kar"), &[], &[])
            .defaults(
                vec![tsc(3, "node", DNS, None), tsc(2, "node", SA, None), tsc(5, "rack", DNS, None)],
                vec![&[("foo", "bar")]],
            )
            .want(vec![sv(&[], [UNSET, UNSET]), sv(&[], [UNSET, UNSET])]),
        case("default constraints and a service that doesn't match", pod("p").label("foo", "bar"), &[], &[])
            .defaults(vec![tsc(3, "node", DNS, None)], vec![&[("baz", "kep")]]),
        case(
            "default constraints and a service, but pod has constraints",
            pod("p")
                .label("foo", "bar")
                .label("baz", "tar")
                .spread(tsc(1, "zone", DNS, match_labels(&[("baz", "tar")])))
                .spread(tsc(2, "planet", SA, match_labels(&[("fot", "rok")]))),
            &[],
            &[],
        )
        .defaults(vec![tsc(2, "node", DNS, None)], vec![&[("foo", "bar")]])
        .want(vec![sv(&[], [UNSET, UNSET])]),
        case("default soft constraints and a service", pod("p").label("foo", "bar"), &[], &[])
            .defaults(vec![tsc(2, "node", SA, None)], vec![&[("foo", "bar")]]),
        case(
            "NodeAffinityPolicy honored with labelSelectors",
            foo_pod().node_selector("foo", "").spread(tsc(1, "node", DNS, exists("bar"))),
            &THREE_NODES_BAR,
            &BAR_PODS,
        )
        .want(vec![sv(&[("node-a", 1), ("node-b", 2)], [("node-a", 1), ("node-b", 2)])]),
        case(
            "NodeAffinityPolicy ignored with labelSelectors",
            foo_pod().node_selector("foo", "").spread(tsc(1, "node", DNS, exists("bar")).affinity_policy("Ignore")),
            &THREE_NODES_BAR,
            &BAR_PODS,
        )
        .want(vec![sv(&[("node-a", 1), ("node-b", 2), ("node-c", 0)], [("node-c", 0), ("node-a", 1)])]),
        case(
            "NodeAffinityPolicy honored with nodeAffinity",
            foo_pod().node_affinity_in("foo", &[""]).spread(tsc(1, "node", DNS, exists("bar"))),
            &THREE_NODES_BAR,
            &BAR_PODS,
        )
        .want(vec![sv(&[("node-a", 1), ("node-b", 2)], [("node-a", 1), ("node-b", 2)])]),
        case(
            "NodeAffinityPolicy ignored with nodeAffinity",
            foo_pod()
                .node_affinity_in("foo", &[""])
                .spread(tsc(1, "node", DNS, exists("bar")).affinity_policy("Ignore")),
            &THREE_NODES_BAR,
            &BAR_PODS,
        )
        .want(vec![sv(&[("node-a", 1), ("node-b", 2), ("node-c", 0)], [("node-c", 0), ("node-a", 1)])]),
        case("NodeTaintsPolicy ignored", foo_pod().spread(tsc(1, "node", DNS, exists("bar"))), &TAINTED_C, &BAR_PODS)
            .want(vec![sv(&[("node-a", 1), ("node-b", 2), ("node-c", 0)], [("node-c", 0), ("node-a", 1)])]),
        case(
            "NodeTaintsPolicy honored",
            foo_pod().spread(tsc(1, "node", DNS, exists("bar")).taints_policy("Honor")),
            &TAINTED_C,
            &BAR_PODS,
        )
        .want(vec![sv(&[("node-a", 1), ("node-b", 2)], [("node-a", 1), ("node-b", 2)])]),
        case(
            "NodeTaintsPolicy honored with tolerated taints",
            foo_pod()
                .toleration("node.kubernetes.io/unschedulable")
                .spread(tsc(1, "node", DNS, exists("bar")).taints_policy("Honor")),
            &TAINTED_C,
            &BAR_PODS,
        )
        .want(vec![sv(&[("node-a", 1), ("node-b", 2), ("node-c", 0)], [("node-c", 0), ("node-a", 1)])]),
        case(
            "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
            foo_pod()
                .node_selector("foo", "")
                .spread(tsc(1, "zone", DNS, exists("foo")))
                .spread(tsc(1, "node", DNS, exists("foo")).affinity_policy("Ignore")),
            &[
                "node-a zone=zone1 node=node-a foo=",
                "node-b zone=zone1 node=node-b foo=",
                "node-x zone=zone2 node=node-x foo=",
                "node-y zone=zone2 node=node-y",
            ],
            &["p-a1 node-a foo=", "p-b1 node-b foo=", "p-y1 node-y foo="],
        )
        .want(vec![
            sv(&[("zone1", 2), ("zone2", 0)], [("zone2", 0), ("zone1", 2)]),
            sv(&[("node-a", 1), ("node-b", 1), ("node-x", 0), ("node-y", 1)], [("node-x", 0), ("node-a", 1)]),
        ]),
        case(
            "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
            foo_pod().label("bar", "a").spread(tsc(1, "zone", DNS, exists("foo")).match_label_keys(&["bar"])),
            &FOUR_NODES,
            &[
                "p-a1 node-a foo=",
                "p-a2 node-a foo= bar=a",
                "p-b1 node-b foo=",
                "p-y1 node-y foo= bar=a",
                "p-y2 node-y bar=",
            ],
        )
        .want(vec![sv(&[("zone1", 1), ("zone2", 1)], [("zone1", 1), ("zone2", 1)])]),
        case(
            "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
            pod("p")
                .label("foo", "a")
                .spread(tsc(1, "zone", DNS, Some(serde_json::json!({}))).match_label_keys(&["foo"])),
            &FOUR_NODES,
            &["p-a1 node-a foo=a", "p-a2 node-a foo=a", "p-b1 node-b foo=a", "p-y1 node-y foo=a", "p-y2 node-y foo=a"],
        )
        .want(vec![sv(&[("zone1", 3), ("zone2", 2)], [("zone2", 2), ("zone1", 3)])]),
        case(
            "key in matchLabelKeys is ignored when LabelSelector is nil",
            foo_pod().spread(tsc(1, "zone", DNS, None).match_label_keys(&["bar"])),
            &FOUR_NODES,
            &["p-a1 node-a foo=a", "p-a2 node-a foo=a", "p-b1 node-b foo=a", "p-y1 node-y foo=a", "p-y2 node-y foo=a"],
        )
        .want(vec![sv(&[("zone1", 0), ("zone2", 0)], [("zone1", 0), ("zone2", 0)])]),
        case(
            "key in matchLabelKeys is ignored when it isn't exist in pod.labels",
            foo_pod().spread(tsc(1, "zone", DNS, exists("foo")).match_label_keys(&["bar"])),
            &FOUR_NODES,
            &["p-a1 node-a foo=a", "p-a2 node-a foo=a", "p-b1 node-b foo=a", "p-y1 node-y foo=a", "p-y2 node-y foo=a"],
        )
        .want(vec![sv(&[("zone1", 3), ("zone2", 2)], [("zone2", 2), ("zone1", 3)])]),
        case(
            "two spreadConstraints with the same topologyKey",
            foo_pod().label("bar", "").spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(
                1,
                "zone",
                DNS,
                exists("bar"),
            )),
            &FOUR_NODES,
            &[
                "p-a1 node-a foo= bar=",
                "p-b1 node-b foo=",
                "p-x1 node-x bar=",
                "p-y1 node-y foo= bar=",
                "p-y2 node-y bar=",
            ],
        )
        .want(vec![
            sv(&[("zone1", 2), ("zone2", 1)], [("zone2", 1), ("zone1", 2)]),
            sv(&[("zone1", 1), ("zone2", 3)], [("zone1", 1), ("zone2", 3)]),
        ]),
        case("skip if not specified", foo_pod(), &["node-a zone=zone1 node=node-a"], &[]),
        case(
            "empty selector counts no pod",
            pod("p").label("foo", "").spread(tsc(1, "zone", DNS, Some(serde_json::json!({})))),
            &FOUR_NODES,
            &FOO_PODS,
        )
        .want(vec![sv(&[("zone1", 0), ("zone2", 0)], [("zone1", 0), ("zone2", 0)])]),
    ];
    for c in cases {
        let lister = services(&c.services);
        let pl = plugin_list(&c.defaults, lister);
        let snap = snapshot(c.nodes, c.pods);
        let mut state = CycleState::new();
        let (res, status) = pl.pre_filter(&mut state, &c.pod.info(), &snap);
        assert!(res.is_none(), "{}", c.name);
        match c.want {
            None => assert_eq!(status, Status::skip(), "{}", c.name),
            Some(want) => {
                assert!(status.is_success(), "{}: {status}", c.name);
                assert_eq!(view(pre_filter_state(&state)), want, "{}", c.name);
            }
        }
    }
}

#[test]
fn pre_filter_invalid_selector_is_an_error() {
    let p = pod("p").spread(tsc(
        1,
        "zone",
        DNS,
        Some(serde_json::json!({"matchExpressions": [{"key": "foo", "operator": "In", "values": []}]})),
    ));
    let pl = plugin_list(&[], MemoryLister::default());
    let (_, status) = pl.pre_filter(&mut CycleState::new(), &p.info(), &snapshot(&FOUR_NODES, &[]));
    assert_eq!(status.code(), Code::Error);
    assert!(
        status.message().starts_with("get constraints from pod: obtaining pod's hard topology spread constraints: "),
        "{}",
        status.message()
    );
}

struct ExtensionCase {
    name: &'static str,
    pod: PodB,
    nodes: &'static [&'static str],
    pods: &'static [&'static str],
    /// The pod added to (or removed from) `node`.
    changed: &'static str,
    node: &'static str,
    want: StateView,
}

fn run_extension(c: &ExtensionCase, add: bool) {
    let pl = plugin_list(&[], MemoryLister::default());
    let snap = snapshot(c.nodes, c.pods);
    let mut state = CycleState::new();
    let incoming = c.pod.info();
    assert!(pl.pre_filter(&mut state, &incoming, &snap).1.is_success(), "{}", c.name);
    let changed = Arc::new(PodInfo::new(Arc::new(existing(c.changed))));
    let ni = snap.get(c.node).expect("node");
    let status = if add {
        pl.add_pod(&mut state, &incoming, &changed, ni)
    } else {
        pl.remove_pod(&mut state, &incoming, &changed, ni)
    };
    assert!(status.is_success(), "{}", c.name);
    assert_eq!(view(pre_filter_state(&state)), c.want, "{}", c.name);
}

#[test]
fn add_pod() {
    let node_ab: &[&str] = &["node-a zone=zone1 node=node-a", "node-b zone=zone1 node=node-b"];
    let node_ax: &[&str] = &["node-a zone=zone1 node=node-a", "node-x zone=zone2 node=node-x"];
    let node_abx: &[&str] =
        &["node-a zone=zone1 node=node-a", "node-b zone=zone1 node=node-b", "node-x zone=zone2 node=node-x"];
    let zone_ab_affinity: &[&str] = &["node-a zone=zone1 node=node-a foo=bar", "node-b zone=zone2 node=node-b foo="];
    let zone_ab_taint: &[&str] = &["node-a zone=zone1 node=node-a tainted", "node-b zone=zone2 node=node-b"];
    let on_node = || foo_pod().spread(tsc(1, "node", DNS, exists("foo")));
    let zone_and_node =
        || foo_pod().spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(1, "node", DNS, exists("foo")));
    let different = || {
        foo_pod().label("bar", "").spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(1, "node", DNS, exists("bar")))
    };
    let on_zone = || foo_pod().spread(tsc(1, "zone", DNS, exists("foo")));
    let cases = vec![
        ExtensionCase {
            name: "node a and b both impact current min match",
            pod: on_node(),
            nodes: node_ab,
            pods: &[],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![sv(&[("node-a", 1), ("node-b", 0)], [("node-b", 0), ("node-a", 1)])],
        },
        ExtensionCase {
            name: "only node a impacts current min match",
            pod: on_node(),
            nodes: node_ab,
            pods: &["p-b1 node-b foo="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![sv(&[("node-a", 1), ("node-b", 1)], [("node-a", 1), ("node-b", 1)])],
        },
        ExtensionCase {
            name: "add a pod in a different namespace doesn't change topologyKeyToMinPodsMap",
            pod: on_node(),
            nodes: node_ab,
            pods: &["p-b1 node-b foo="],
            changed: "p-a1 node-a foo= ns:ns1",
            node: "node-a",
            want: vec![sv(&[("node-a", 0), ("node-b", 1)], [("node-a", 0), ("node-b", 1)])],
        },
        ExtensionCase {
            name: "add pod on non-critical node won't trigger re-calculation",
            pod: on_node(),
            nodes: node_ab,
            pods: &["p-b1 node-b foo="],
            changed: "p-b2 node-b foo=",
            node: "node-b",
            want: vec![sv(&[("node-a", 0), ("node-b", 2)], [("node-a", 0), ("node-b", 2)])],
        },
        ExtensionCase {
            name: "node a and x both impact topologyKeyToMinPodsMap on zone and node",
            pod: zone_and_node(),
            nodes: node_ax,
            pods: &[],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![
                sv(&[("zone1", 1), ("zone2", 0)], [("zone2", 0), ("zone1", 1)]),
                sv(&[("node-a", 1), ("node-x", 0)], [("node-x", 0), ("node-a", 1)]),
            ],
        },
        ExtensionCase {
            name: "only node a impacts topologyKeyToMinPodsMap on zone and node",
            pod: zone_and_node(),
            nodes: node_ax,
            pods: &["p-x1 node-x foo="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![
                sv(&[("zone1", 1), ("zone2", 1)], [("zone1", 1), ("zone2", 1)]),
                sv(&[("node-a", 1), ("node-x", 1)], [("node-a", 1), ("node-x", 1)]),
            ],
        },
        ExtensionCase {
            name: "node a impacts topologyKeyToMinPodsMap on node, node x impacts topologyKeyToMinPodsMap on zone",
            pod: zone_and_node(),
            nodes: node_abx,
            pods: &["p-b1 node-b foo=", "p-b2 node-b foo=", "p-x1 node-x foo="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![
                sv(&[("zone1", 3), ("zone2", 1)], [("zone2", 1), ("zone1", 3)]),
                sv(&[("node-a", 1), ("node-b", 2), ("node-x", 1)], [("node-a", 1), ("node-x", 1)]),
            ],
        },
        ExtensionCase {
            name: "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on zone",
            pod: different(),
            nodes: node_abx,
            pods: &["p-b1 node-b foo= bar=", "p-x1 node-x foo= bar=", "p-x2 node-x bar="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![
                sv(&[("zone1", 2), ("zone2", 1)], [("zone2", 1), ("zone1", 2)]),
                sv(&[("node-a", 0), ("node-b", 1), ("node-x", 2)], [("node-a", 0), ("node-b", 1)]),
            ],
        },
        ExtensionCase {
            name: "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on both zone and node",
            pod: different(),
            nodes: node_abx,
            pods: &["p-b1 node-b bar=", "p-x1 node-x foo= bar=", "p-x2 node-x bar="],
            changed: "p-a1 node-a foo= bar=",
            node: "node-a",
            want: vec![
                sv(&[("zone1", 1), ("zone2", 1)], [("zone1", 1), ("zone2", 1)]),
                sv(&[("node-a", 1), ("node-b", 1), ("node-x", 2)], [("node-a", 1), ("node-b", 1)]),
            ],
        },
        ExtensionCase {
            name: "add a pod when scheduling node affinity unmatched pod",
            pod: foo_pod().node_affinity_not_in("foo", &["bar"]).spread(tsc(1, "zone", DNS, exists("foo"))),
            nodes: zone_ab_affinity,
            pods: &["p-a2 node-a foo=", "p-b1 node-b foo="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![sv(&[("zone2", 1)], [("zone2", 1), UNSET])],
        },
        ExtensionCase {
            name: "add a pod when scheduling node affinity matched pod",
            pod: on_zone(),
            nodes: zone_ab_affinity,
            pods: &["p-a1 node-a foo=", "p-b2 node-b foo="],
            changed: "p-b1 node-b foo=",
            node: "node-b",
            want: vec![sv(&[("zone1", 1), ("zone2", 2)], [("zone1", 1), ("zone2", 2)])],
        },
        ExtensionCase {
            name: "add a label selector not matched pod",
            pod: on_zone(),
            nodes: zone_ab_affinity,
            pods: &["p-a1 node-a foo=", "p-b2 node-b foo="],
            changed: "p-b1 node-b zone=zone2",
            node: "node-b",
            want: vec![sv(&[("zone1", 1), ("zone2", 1)], [("zone1", 1), ("zone2", 1)])],
        },
        ExtensionCase {
            name: "add a pod when scheduling taint tolerated pod",
            pod: foo_pod().toleration("node.kubernetes.io/unschedulable").spread(tsc(1, "zone", DNS, exists("foo"))),
            nodes: zone_ab_taint,
            pods: &["p-a1 node-a foo=", "p-b2 node-b foo="],
            changed: "p-b1 node-b foo=",
            node: "node-b",
            want: vec![sv(&[("zone1", 1), ("zone2", 2)], [("zone1", 1), ("zone2", 2)])],
        },
    ];
    for c in &cases {
        run_extension(c, true);
    }
}

#[test]
fn remove_pod() {
    let on_zone = || foo_pod().spread(tsc(1, "zone", DNS, exists("foo")));
    let zone_ab: &[&str] = &["node-a zone=zone1 node=node-a", "node-b zone=zone1 node=node-b"];
    let cases = vec![
        ExtensionCase {
            name: "one spreadConstraint on zone, topologyKeyToMinPodsMap unchanged",
            pod: on_zone(),
            nodes: &FOUR_NODES,
            pods: &["p-a1 node-a foo=", "p-b1 node-b foo=", "p-x1 node-x foo="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![sv(&[("zone1", 1), ("zone2", 1)], [("zone1", 1), ("zone2", 1)])],
        },
        ExtensionCase {
            name: "one spreadConstraint on node, topologyKeyToMinPodsMap changed",
            pod: on_zone(),
            nodes: &FOUR_NODES,
            pods: &["p-a1 node-a foo=", "p-a2 node-a foo=", "p-b1 node-b foo=", "p-x1 node-x foo="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![sv(&[("zone1", 2), ("zone2", 1)], [("zone2", 1), ("zone1", 2)])],
        },
        ExtensionCase {
            name: "delete an irrelevant pod won't help",
            pod: on_zone(),
            nodes: &FOUR_NODES,
            pods: &["p-a0 node-a bar=", "p-a1 node-a foo=", "p-a2 node-a foo=", "p-b1 node-b foo=", "p-x1 node-x foo="],
            changed: "p-a0 node-a bar=",
            node: "node-a",
            want: vec![sv(&[("zone1", 3), ("zone2", 1)], [("zone2", 1), ("zone1", 3)])],
        },
        ExtensionCase {
            name: "deleting a pod of a domain nobody counted records a negative count",
            pod: on_zone(),
            nodes: &["node-a zone=zone1 node=node-a"],
            pods: &[],
            changed: "p-q node-a foo=",
            node: "node-a",
            want: vec![sv(&[("zone1", -1)], [("zone1", -1), UNSET])],
        },
        ExtensionCase {
            name: "remove a pod on a node outside the pod's node affinity",
            pod: foo_pod().node_affinity_not_in("foo", &["bar"]).spread(tsc(1, "zone", DNS, exists("foo"))),
            nodes: &["node-a zone=zone1 node=node-a foo=bar", "node-b zone=zone2 node=node-b foo="],
            pods: &["p-a1 node-a foo=", "p-b1 node-b foo=", "p-b2 node-b foo="],
            changed: "p-a1 node-a foo=",
            node: "node-a",
            want: vec![sv(&[("zone2", 2)], [("zone2", 2), UNSET])],
        },
        ExtensionCase {
            name: "remove a pod when nodes share a zone",
            pod: on_zone(),
            nodes: zone_ab,
            pods: &["p-a1 node-a foo=", "p-b1 node-b foo="],
            changed: "p-b1 node-b foo=",
            node: "node-b",
            want: vec![sv(&[("zone1", 1)], [("zone1", 1), UNSET])],
        },
    ];
    for c in &cases {
        run_extension(c, false);
    }
}

#[test]
fn extensions_without_state_fail() {
    let pl = plugin_list(&[], MemoryLister::default());
    let snap = snapshot(&FOUR_NODES, &[]);
    let added = Arc::new(PodInfo::new(Arc::new(existing("q node-a foo="))));
    let s = pl.add_pod(&mut CycleState::new(), &foo_pod().info(), &added, snap.get("node-a").unwrap());
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), "reading \"PreFilterPodTopologySpread\" from cycleState: not found");
    let s = pl.filter(&CycleState::new(), &foo_pod().info(), snap.get("node-a").unwrap());
    assert_eq!(s.message(), "reading \"PreFilterPodTopologySpread\" from cycleState: not found");
}

use Code::{Success as S, Unschedulable as U, UnschedulableAndUnresolvable as UAU};

struct FilterCase {
    name: &'static str,
    pod: PodB,
    nodes: &'static [&'static str],
    pods: &'static [&'static str],
    want: &'static [(&'static str, Code)],
}

fn run_filter_cases(cases: Vec<FilterCase>) {
    for c in cases {
        let pl = plugin_list(&[], MemoryLister::default());
        let snap = snapshot(c.nodes, c.pods);
        let mut state = CycleState::new();
        let incoming = c.pod.info();
        let (_, status) = pl.pre_filter(&mut state, &incoming, &snap);
        assert!(status.is_success(), "{}: {status}", c.name);
        for (node, code) in c.want {
            let got = pl.filter(&state, &incoming, snap.get(node).unwrap());
            let bound = pl.bind_cycle(&state, &incoming).expect("PreFilter stored its state");
            assert_eq!(bound(snap.get(node).unwrap()), got, "{} / {node}: bound decides as filter", c.name);
            assert_eq!(got.code(), *code, "{} / {node}", c.name);
            let want_reason: &[&str] = match code {
                Code::Unschedulable => &[ERR_REASON_CONSTRAINTS_NOT_MATCH],
                Code::UnschedulableAndUnresolvable => &[ERR_REASON_NODE_LABEL_NOT_MATCH],
                _ => &[],
            };
            assert_eq!(got.reasons(), want_reason, "{} / {node}", c.name);
        }
    }
}

#[test]
fn filter_single_constraint() {
    let zone = |skew| foo_pod().spread(tsc(skew, "zone", DNS, exists("foo")));
    let on_node = |skew| foo_pod().spread(tsc(skew, "node", DNS, exists("foo")));
    const SPREAD_2103: [&str; 6] = [
        "p-a1 node-a foo=",
        "p-a2 node-a foo=",
        "p-b1 node-b foo=",
        "p-y1 node-y foo=",
        "p-y2 node-y foo=",
        "p-y3 node-y foo=",
    ];
    const ABC: [&str; 3] = ["node-a node=node-a", "node-b node=node-b", "node-c node=node-c"];
    const SPREAD_221: [&str; 5] =
        ["p-a1 node-a foo=", "p-a2 node-a foo=", "p-b1 node-b foo=", "p-b2 node-b foo=", "p-c1 node-c foo="];
    const ZONE_21: [&str; 3] = ["p-b1 node-a foo=", "p-b2 node-b foo=", "p-y1 node-y foo="];
    const FOO_NODES: [&str; 4] =
        ["node-a node=node-a foo=", "node-b node=node-b foo=", "node-x node=node-x foo=", "node-y node=node-y"];
    const TAINT_NODES: [&str; 4] =
        ["node-a node=node-a foo=", "node-b node=node-b foo=", "node-x node=node-x foo=", "node-y node=node-y tainted"];
    let cases = vec![
        FilterCase {
            name: "no existing pods",
            pod: zone(1),
            nodes: &FOUR_NODES,
            pods: &[],
            want: &[("node-a", S), ("node-b", S), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "no existing pods, incoming pod doesn't match itself",
            pod: foo_pod().spread(tsc(1, "zone", DNS, exists("bar"))),
            nodes: &FOUR_NODES,
            pods: &[],
            want: &[("node-a", S), ("node-b", S), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "existing pods in a different namespace do not count",
            pod: zone(1),
            nodes: &FOUR_NODES,
            pods: &["p-a1 node-a foo= ns:ns1", "p-b1 node-a foo= ns:ns2", "p-x1 node-x foo=", "p-y1 node-y foo="],
            want: &[("node-a", S), ("node-b", S), ("node-x", U), ("node-y", U)],
        },
        FilterCase {
            name: "existing pods do not match null selector",
            pod: foo_pod().spread(tsc(1, "zone", DNS, None)),
            nodes: &FOUR_NODES,
            pods: &["p-x1 node-x foo=", "p-y1 node-y foo="],
            want: &[("node-a", S), ("node-b", S), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "pods spread across zones as 3/3, all nodes fit",
            pod: zone(1),
            nodes: &FOUR_NODES,
            pods: &SPREAD_2103,
            want: &[("node-a", S), ("node-b", S), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
            pod: zone(1),
            nodes: &[
                "node-a zone=zone1 node=node-a",
                "node-b zon=zone1 node=node-b",
                "node-x zone=zone2 node=node-x",
                "node-y zone=zone2 node=node-y",
            ],
            pods: &["p-a1 node-a foo=", "p-b1 node-b foo=", "p-x1 node-x foo=", "p-y1 node-y foo="],
            want: &[("node-a", S), ("node-b", UAU), ("node-x", U), ("node-y", U)],
        },
        FilterCase {
            name: "pod cannot be scheduled as all nodes don't have label 'rack'",
            pod: foo_pod().spread(tsc(1, "rack", DNS, exists("foo"))),
            nodes: &["node-a zone=zone1 node=node-a", "node-x zone=zone2 node=node-x"],
            pods: &[],
            want: &[("node-a", UAU), ("node-x", UAU)],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, only node-x fits",
            pod: on_node(1),
            nodes: &FOUR_NODES,
            pods: &SPREAD_2103,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
            pod: on_node(2),
            nodes: &FOUR_NODES,
            pods: &SPREAD_2103,
            want: &[("node-a", U), ("node-b", S), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
            pod: pod("p").label("bar", "").spread(tsc(1, "node", DNS, exists("foo"))),
            nodes: &FOUR_NODES,
            pods: &SPREAD_2103,
            want: &[("node-a", U), ("node-b", S), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
            pod: on_node(1).node_affinity_in("node", &["node-a", "node-y"]),
            nodes: &FOUR_NODES,
            pods: &SPREAD_2103,
            want: &[("node-a", S), ("node-b", S), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "terminating Pods should be excluded",
            pod: on_node(1),
            nodes: &["node-a node=node-a", "node-b node=node-b"],
            pods: &["p-a node-a foo= term", "p-b node-b foo="],
            want: &[("node-a", S), ("node-b", U)],
        },
        FilterCase {
            name: "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
            pod: zone(1).node_affinity_not_in("node", &["node-b"]),
            nodes: &FOUR_NODES,
            pods: &["p-b1 node-b foo=", "p-b2 node-b foo=", "p-y1 node-y foo="],
            want: &[("node-a", S), ("node-b", S), ("node-x", U), ("node-y", U)],
        },
        FilterCase {
            name: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains",
            pod: foo_pod().spread(tsc(2, "node", DNS, exists("foo")).min_domains(4)),
            nodes: &ABC,
            pods: &SPREAD_221,
            want: &[("node-a", U), ("node-b", U), ("node-c", S)],
        },
        FilterCase {
            name: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains",
            pod: foo_pod().spread(tsc(2, "node", DNS, exists("foo")).min_domains(2)),
            nodes: &ABC,
            pods: &SPREAD_221,
            want: &[("node-a", S), ("node-b", S), ("node-c", S)],
        },
        FilterCase {
            name: "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains",
            pod: foo_pod().spread(tsc(2, "zone", DNS, exists("foo")).min_domains(3)),
            nodes: &FOUR_NODES,
            pods: &ZONE_21,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains",
            pod: foo_pod().spread(tsc(2, "zone", DNS, exists("foo")).min_domains(1)),
            nodes: &FOUR_NODES,
            pods: &ZONE_21,
            want: &[("node-a", S), ("node-b", S), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "NodeAffinityPolicy honored with labelSelectors",
            pod: on_node(1).node_selector("foo", ""),
            nodes: &FOO_NODES,
            pods: &ZONE_21,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "NodeAffinityPolicy ignored with labelSelectors",
            pod: foo_pod()
                .node_selector("foo", "")
                .spread(tsc(1, "node", DNS, exists("foo")).affinity_policy("Ignore")),
            nodes: &FOO_NODES,
            pods: &ZONE_21,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "NodeAffinityPolicy honored with nodeAffinity",
            pod: on_node(1).node_affinity_in("foo", &[""]),
            nodes: &FOO_NODES,
            pods: &ZONE_21,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "NodeTaintsPolicy honored",
            pod: foo_pod().spread(tsc(1, "node", DNS, exists("foo")).taints_policy("Honor")),
            nodes: &TAINT_NODES,
            pods: &ZONE_21,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "NodeTaintsPolicy ignored",
            pod: on_node(1),
            nodes: &TAINT_NODES,
            pods: &ZONE_21,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
    ];
    run_filter_cases(cases);
}

#[test]
fn filter_multiple_constraints() {
    let zone_node = || foo_pod().spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(1, "node", DNS, exists("foo")));
    let different = |p: PodB| p.spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(1, "node", DNS, exists("bar")));
    const FOO_NODES: [&str; 4] = [
        "node-a zone=zone1 node=node-a foo=",
        "node-b zone=zone1 node=node-b foo=",
        "node-x zone=zone2 node=node-x foo=",
        "node-y zone=zone2 node=node-y",
    ];
    const MIXED: [&str; 4] = [
        "node-a zone=zone1 node=node-a foo=",
        "node-b zone=zone1 node=node-b",
        "node-x zone=zone2 node=node-x foo=",
        "node-y zone=zone2 node=node-y foo= tainted",
    ];
    const ONE_EACH: [&str; 3] = ["p-a1 node-a foo=", "p-b1 node-b foo=", "p-y1 node-y foo="];
    const TWO_ZONES: [&str; 6] = [
        "p-a1 node-a foo= bar=",
        "p-a2 node-a foo=",
        "p-b1 node-b foo= bar=",
        "p-y1 node-y foo=",
        "p-y2 node-y foo= bar=",
        "p-y3 node-y foo=",
    ];
    let cases = vec![
        FilterCase {
            name: "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
            pod: zone_node(),
            nodes: &FOUR_NODES,
            pods: &[
                "p-a1 node-a foo=",
                "p-a2 node-a foo=",
                "p-b1 node-b foo=",
                "p-y1 node-y foo=",
                "p-y2 node-y foo=",
                "p-y3 node-y foo=",
            ],
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
            pod: zone_node(),
            nodes: &FOUR_NODES,
            pods: &SEVEN_FOO_PODS,
            want: &[("node-a", U), ("node-b", U), ("node-x", U), ("node-y", U)],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
            pod: different(foo_pod().label("bar", "")),
            nodes: &FOUR_NODES,
            pods: &["p-a1 node-a foo=", "p-y1 node-y bar="],
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
            pod: different(foo_pod().label("bar", "")),
            nodes: &FOUR_NODES,
            pods: &["p-a1 node-a foo=", "p-x1 node-x bar=", "p-y1 node-y bar="],
            want: &[("node-a", U), ("node-b", U), ("node-x", U), ("node-y", U)],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
            pod: different(foo_pod().label("bar", "")),
            nodes: &FOUR_NODES,
            pods: &[
                "p-a1 node-a foo=",
                "p-a2 node-a foo= bar=",
                "p-y1 node-y foo=",
                "p-y2 node-y foo= bar=",
                "p-y3 node-y foo=",
            ],
            want: &[("node-a", U), ("node-b", S), ("node-x", U), ("node-y", U)],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
            pod: different(pod("p").label("bar", "")),
            nodes: &FOUR_NODES,
            pods: &["p-a1 node-a foo=", "p-x1 node-x bar=", "p-y1 node-y bar="],
            want: &[("node-a", S), ("node-b", S), ("node-x", U), ("node-y", U)],
        },
        FilterCase {
            name: "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
            pod: zone_node(),
            nodes: &[
                "node-a zone=zone1 node=node-a",
                "node-b zone=zone1 node=node-b",
                "node-x zone=zone2",
                "node-y zone=zone2 node=node-y",
            ],
            pods: &["p-a1 node-a foo=", "p-y3 node-y foo="],
            want: &[("node-a", U), ("node-b", S), ("node-x", UAU), ("node-y", U)],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
            pod: foo_pod()
                .node_selector("foo", "")
                .spread(tsc(1, "zone", DNS, exists("foo")))
                .spread(tsc(1, "node", DNS, exists("foo")).affinity_policy("Ignore")),
            nodes: &FOO_NODES,
            pods: &ONE_EACH,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
            pod: foo_pod().spread(tsc(1, "zone", DNS, exists("foo")).taints_policy("Honor")).spread(tsc(
                1,
                "node",
                DNS,
                exists("foo"),
            )),
            nodes: &[
                "node-a zone=zone1 node=node-a foo=",
                "node-b zone=zone1 node=node-b foo=",
                "node-x zone=zone2 node=node-x foo=",
                "node-y zone=zone2 node=node-y tainted",
            ],
            pods: &ONE_EACH,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
            pod: foo_pod().node_selector("foo", "").spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(
                1,
                "node",
                DNS,
                exists("foo"),
            )),
            nodes: &MIXED,
            pods: &ONE_EACH,
            want: &[("node-a", U), ("node-b", S), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
            pod: foo_pod()
                .node_selector("foo", "")
                .spread(tsc(1, "zone", DNS, exists("foo")).taints_policy("Honor"))
                .spread(tsc(1, "node", DNS, exists("foo")).affinity_policy("Ignore")),
            nodes: &MIXED,
            pods: &ONE_EACH,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", U)],
        },
        FilterCase {
            name: "two Constraints on zone, spreads = [3/3, 2/1]",
            pod: foo_pod().label("bar", "").spread(tsc(1, "zone", DNS, exists("bar"))).spread(tsc(
                1,
                "zone",
                DNS,
                exists("foo"),
            )),
            nodes: &FOUR_NODES,
            pods: &TWO_ZONES,
            want: &[("node-a", U), ("node-b", U), ("node-x", S), ("node-y", S)],
        },
        FilterCase {
            name: "two Constraints on zone, spreads = [3/4, 2/1]",
            pod: foo_pod().label("bar", "").spread(tsc(1, "zone", DNS, exists("bar"))).spread(tsc(
                1,
                "zone",
                DNS,
                exists("foo"),
            )),
            nodes: &FOUR_NODES,
            pods: &[
                "p-a1 node-a foo= bar=",
                "p-a2 node-a foo=",
                "p-b1 node-b foo= bar=",
                "p-y1 node-y foo=",
                "p-y2 node-y foo= bar=",
                "p-y3 node-y foo=",
                "p-y4 node-y foo=",
            ],
            want: &[("node-a", U), ("node-b", U), ("node-x", U), ("node-y", U)],
        },
    ];
    run_filter_cases(cases);
}

#[test]
fn filter_with_empty_selector_counts_only_the_incoming_pod() {
    // An empty selector counts no existing pod but still matches the incoming pod: every domain
    // reads 0 and the pod adds 1, so skew 1 passes maxSkew 1 everywhere.
    run_filter_cases(vec![FilterCase {
        name: "empty selector",
        pod: foo_pod().spread(tsc(1, "zone", DNS, Some(serde_json::json!({})))),
        nodes: &FOUR_NODES,
        pods: &FOO_PODS,
        want: &[("node-a", S), ("node-b", S), ("node-x", S), ("node-y", S)],
    }]);
}

#[test]
fn system_defaults_have_no_hard_constraints() {
    let pl = plugin_system(services(&[&[("foo", "")]]));
    let (_, status) = pl.pre_filter(&mut CycleState::new(), &foo_pod().info(), &snapshot(&FOUR_NODES, &[]));
    assert_eq!(status, Status::skip());
}
