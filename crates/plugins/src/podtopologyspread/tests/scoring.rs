//! PreScore, Score and NormalizeScore, after upstream's scoring_test.go.

use std::sync::Arc;

use ksched_framework::listers::MemoryLister;
use ksched_framework::{CycleState, NodeInfo, PreFilterPlugin, PreScorePlugin, ScorePlugin, Status};

use super::*;
use crate::podtopologyspread::scoring::{PreScoreState, PRE_SCORE_STATE_KEY};

fn foo_pod() -> PodB {
    pod("p").label("foo", "")
}

/// A lister holding one ReplicaSet `rs1` in "default" with the given selector.
fn replica_set(selector: Value) -> MemoryLister {
    let lister = MemoryLister::default();
    let rs = serde_json::from_value(json!({"metadata": {"name": "rs1", "namespace": "default"},
        "spec": {"selector": selector}}))
    .expect("valid replica set");
    lister.replica_sets.write().push(Arc::new(rs));
    lister
}

fn rs_pod(foo: &str) -> PodB {
    pod("p").label("foo", foo).label("baz", "sup").controller("apps/v1", "ReplicaSet", "rs1")
}

/// (topology key, ignored nodes, sorted counts, domain count used for the weight) per constraint.
type ScoreStateView = (Vec<String>, Vec<String>, Vec<Vec<(String, i64)>>, Vec<f64>);

fn score_view(state: &CycleState) -> ScoreStateView {
    let s = &state.read::<PreScoreState>(PRE_SCORE_STATE_KEY).expect("state").0;
    let mut ignored: Vec<String> = s.ignored_nodes.iter().cloned().collect();
    ignored.sort();
    let counts = s
        .topology_value_to_pod_counts
        .iter()
        .map(|m| {
            let mut v: Vec<(String, i64)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
            v.sort();
            v
        })
        .collect();
    (
        s.constraints.iter().map(|c| c.topology_key.clone()).collect(),
        ignored,
        counts,
        s.topology_normalizing_weight.clone(),
    )
}

fn w(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

fn counts(c: &[(&str, i64)]) -> Vec<(String, i64)> {
    c.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn run_pre_score(pl: &PodTopologySpread, p: &PodB, nodes: &[&str], pods: &[&str]) -> (CycleState, Status) {
    let snap = snapshot(nodes, pods);
    let mut state = CycleState::new();
    let incoming = p.info();
    let _ = pl.pre_filter(&mut state, &incoming, &snap);
    let status = pl.pre_score(&mut state, &incoming, &ksched_framework::node_refs(snap.list()), &snap);
    (state, status)
}

#[test]
fn pre_score_skips() {
    let (_, s) = run_pre_score(
        &plugin_list(&[], MemoryLister::default()),
        &pod("p"),
        &["node-a kubernetes.io/hostname=node-a", "node-b kubernetes.io/hostname=node-b"],
        &[],
    );
    assert_eq!(s, Status::skip(), "the pod doesn't have soft topology spread constraints");
    let (_, s) = run_pre_score(
        &plugin_list(
            &[tsc(2, "planet", SA, None)],
            replica_set(json!({"matchExpressions": [{"key": "tar", "operator": "Exists"}]})),
        ),
        &pod("p").label("foo", "bar").label("baz", "sup").controller("apps/v1", "ReplicaSet", "rs2"),
        &["node-a planet=mars"],
        &[],
    );
    assert_eq!(s, Status::skip(), "default constraints and a replicaset that doesn't match");
    let (_, s) = run_pre_score(
        &plugin_list(&[], MemoryLister::default()),
        &foo_pod().spread(tsc(1, "zone", SA, exists("foo"))),
        &[],
        &[],
    );
    assert_eq!(s, Status::skip(), "no nodes");
}

#[test]
fn pre_score_state() {
    let sys_nodes: &[&str] = &[
        "node-a kubernetes.io/hostname=node-a topology.kubernetes.io/zone=mars",
        "node-b kubernetes.io/hostname=node-b topology.kubernetes.io/zone=mars",
        "node-c kubernetes.io/hostname=node-c",
        "node-d kubernetes.io/hostname=node-d",
    ];
    let three: &[&str] = &[
        "node-a zone=zone1 kubernetes.io/hostname=node-a",
        "node-b zone=zone1 kubernetes.io/hostname=node-b",
        "node-x zone=zone2 kubernetes.io/hostname=node-x",
    ];
    let cases: Vec<(&str, PodTopologySpread, PodB, &[&str], ScoreStateView)> = vec![
        (
            "normal case",
            plugin_list(&[], MemoryLister::default()),
            foo_pod().spread(tsc(1, "zone", SA, exists("foo"))).spread(tsc(1, HOSTNAME, SA, exists("foo"))),
            three,
            (
                vec!["zone".into(), HOSTNAME.into()],
                vec![],
                vec![counts(&[("zone1", 0), ("zone2", 0)]), vec![]],
                vec![w(2), w(3)],
            ),
        ),
        (
            "null selector",
            plugin_list(&[], MemoryLister::default()),
            foo_pod().spread(tsc(1, "zone", SA, None)),
            three,
            (vec!["zone".into()], vec![], vec![counts(&[("zone1", 0), ("zone2", 0)])], vec![w(2)]),
        ),
        (
            "node-x doesn't have label zone",
            plugin_list(&[], MemoryLister::default()),
            foo_pod().spread(tsc(1, "zone", SA, exists("foo"))).spread(tsc(1, HOSTNAME, SA, exists("bar"))),
            &[
                "node-a zone=zone1 kubernetes.io/hostname=node-a",
                "node-b zone=zone1 kubernetes.io/hostname=node-b",
                "node-x kubernetes.io/hostname=node-x",
            ],
            (
                vec!["zone".into(), HOSTNAME.into()],
                vec!["node-x".into()],
                vec![counts(&[("zone1", 0)]), vec![]],
                vec![w(1), w(2)],
            ),
        ),
        (
            // Nodes without a zone are not ignored with the system defaults: they form the zone "".
            "system default constraints and a replicaset",
            plugin_system(replica_set(json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]}))),
            rs_pod("tar"),
            sys_nodes,
            (
                vec![HOSTNAME.into(), "topology.kubernetes.io/zone".into()],
                vec![],
                vec![vec![], counts(&[("", 0), ("mars", 0)])],
                vec![w(4), w(2)],
            ),
        ),
        (
            "default constraints and a replicaset",
            plugin_list(
                &[tsc(1, HOSTNAME, SA, None), tsc(2, "rack", DNS, None), tsc(2, "planet", SA, None)],
                replica_set(json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]})),
            ),
            rs_pod("tar"),
            &["node-a rack=rack1 kubernetes.io/hostname=node-a planet=mars"],
            (vec![HOSTNAME.into(), "planet".into()], vec![], vec![vec![], counts(&[("mars", 0)])], vec![w(1), w(1)]),
        ),
        (
            "default constraints and a replicaset, but pod has constraints",
            plugin_list(
                &[tsc(2, "galaxy", SA, None)],
                replica_set(json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]})),
            ),
            rs_pod("bar").spread(tsc(1, "zone", DNS, exists("bar"))).spread(tsc(
                2,
                "planet",
                SA,
                match_labels(&[("baz", "sup")]),
            )),
            &["node-a planet=mars galaxy=andromeda"],
            (vec!["planet".into()], vec![], vec![counts(&[("mars", 0)])], vec![w(1)]),
        ),
    ];
    for (name, pl, p, nodes, want) in cases {
        let (state, status) = run_pre_score(&pl, &p, nodes, &[]);
        assert!(status.is_success(), "{name}: {status}");
        assert_eq!(score_view(&state), want, "{name}");
    }
}

struct ScoreCase {
    name: &'static str,
    plugin: PodTopologySpread,
    pod: PodB,
    /// Feasible nodes.
    nodes: &'static [&'static str],
    /// Nodes that failed filtering (still part of the snapshot).
    failed: &'static [&'static str],
    pods: &'static [&'static str],
    want: &'static [(&'static str, i64)],
}

fn sc(name: &'static str, pod: PodB, nodes: &'static [&'static str], pods: &'static [&'static str]) -> ScoreCase {
    ScoreCase { name, plugin: plugin_system(MemoryLister::default()), pod, nodes, failed: &[], pods, want: &[] }
}

impl ScoreCase {
    fn failed(mut self, f: &'static [&'static str]) -> Self {
        self.failed = f;
        self
    }
    fn plugin(mut self, p: PodTopologySpread) -> Self {
        self.plugin = p;
        self
    }
    fn want(mut self, w: &'static [(&'static str, i64)]) -> Self {
        self.want = w;
        self
    }
}

/// PreFilter + PreScore over the feasible nodes + Score +
/// NormalizeScore, as the framework runs them.
fn run_scores(c: &ScoreCase) -> Vec<(String, i64)> {
    let all: Vec<&str> = c.nodes.iter().chain(c.failed).copied().collect();
    let snap = snapshot(&all, c.pods);
    let feasible: Vec<Arc<NodeInfo>> =
        c.nodes.iter().map(|n| snap.get(n.split_whitespace().next().unwrap()).unwrap().clone()).collect();
    let mut state = CycleState::new();
    let incoming = c.pod.info();
    let _ = c.plugin.pre_filter(&mut state, &incoming, &snap);
    let s = c.plugin.pre_score(&mut state, &incoming, &ksched_framework::node_refs(&feasible), &snap);
    assert!(s.is_success(), "{}: {s}", c.name);
    let mut scores: Vec<i64> = feasible.iter().map(|n| c.plugin.score(&state, &incoming, n).expect("score")).collect();
    assert!(c
        .plugin
        .normalize_score(&state, &incoming, &ksched_framework::node_refs(&feasible), &mut scores)
        .is_success());
    feasible.iter().map(|n| n.name().to_string()).zip(scores).collect()
}

const H4: [&str; 4] = [
    "node-a kubernetes.io/hostname=node-a",
    "node-b kubernetes.io/hostname=node-b",
    "node-c kubernetes.io/hostname=node-c",
    "node-d kubernetes.io/hostname=node-d",
];
const SPREAD_2103: [&str; 6] = [
    "p-a1 node-a foo=",
    "p-a2 node-a foo=",
    "p-b1 node-b foo=",
    "p-d1 node-d foo=",
    "p-d2 node-d foo=",
    "p-d3 node-d foo=",
];
const SPREAD_4321: [&str; 10] = [
    "p-a1 node-a foo=",
    "p-a2 node-a foo=",
    "p-a3 node-a foo=",
    "p-a4 node-a foo=",
    "p-b1 node-b foo=",
    "p-b2 node-b foo=",
    "p-b3 node-b foo=",
    "p-c1 node-c foo=",
    "p-c2 node-c foo=",
    "p-d1 node-d foo=",
];
const SPREAD_4213: [&str; 10] = [
    "p-a1 node-a foo=",
    "p-a2 node-a foo=",
    "p-a3 node-a foo=",
    "p-a4 node-a foo=",
    "p-b1 node-b foo=",
    "p-b2 node-b foo=",
    "p-x1 node-x foo=",
    "p-y1 node-y foo=",
    "p-y2 node-y foo=",
    "p-y3 node-y foo=",
];
const ZH4: [&str; 4] = [
    "node-a zone=zone1 kubernetes.io/hostname=node-a",
    "node-b zone=zone1 kubernetes.io/hostname=node-b",
    "node-c zone=zone2 kubernetes.io/hostname=node-c",
    "node-d zone=zone2 kubernetes.io/hostname=node-d",
];
const N3: [&str; 3] = ["node-a node=node-a foo=", "node-b node=node-b foo=", "node-c node=node-c"];
const N3_TAINT: [&str; 3] = ["node-a node=node-a", "node-b node=node-b", "node-c node=node-c tainted"];
const POLICY_PODS: [&str; 4] = ["p-a1 node-a foo=", "p-a2 node-a foo=", "p-b1 node-b foo=", "p-c1 node-c foo="];

#[test]
fn score() {
    let on_host = |skew| foo_pod().spread(tsc(skew, HOSTNAME, SA, exists("foo")));
    let on_node = || foo_pod().spread(tsc(1, "node", SA, exists("foo")));
    let cases = vec![
        sc("one constraint on node, no existing pods", on_host(1), &H4[..2], &[])
            .want(&[("node-a", 100), ("node-b", 100)]),
        sc(
            "one constraint on node, only one node is candidate",
            on_host(1),
            &H4[..1],
            &["p-a1 node-a foo=", "p-a2 node-a foo=", "p-b1 node-b foo="],
        )
        .failed(&["node-b kubernetes.io/hostname=node-b"])
        .want(&[("node-a", 100)]),
        sc(
            "one constraint on node, all nodes have the same number of matching pods",
            on_host(1),
            &H4[..2],
            &["p-a1 node-a foo=", "p-b1 node-b foo="],
        )
        .want(&[("node-a", 100), ("node-b", 100)]),
        sc("one constraint on node, all 4 nodes are candidates", on_host(1), &H4, &SPREAD_2103).want(&[
            ("node-a", 20),
            ("node-b", 60),
            ("node-c", 100),
            ("node-d", 0),
        ]),
        sc("one constraint on node, null selector", foo_pod().spread(tsc(1, HOSTNAME, SA, None)), &H4, &SPREAD_2103)
            .want(&[("node-a", 100), ("node-b", 100), ("node-c", 100), ("node-d", 100)]),
        sc("one constraint on node, all 4 nodes are candidates, maxSkew=2", on_host(2), &H4, &SPREAD_2103).want(&[
            ("node-a", 33),
            ("node-b", 66),
            ("node-c", 100),
            ("node-d", 16),
        ]),
        sc("one constraint on node, all 4 nodes are candidates, maxSkew=3", on_host(3), &H4, &SPREAD_4321).want(&[
            ("node-a", 44),
            ("node-b", 66),
            ("node-c", 77),
            ("node-d", 100),
        ]),
        sc("system defaulting, nodes don't have zone, pods match service", foo_pod(), &H4, &SPREAD_4321)
            .plugin(plugin_system(services(&[&[("foo", "")]])))
            .want(&[("node-a", 44), ("node-b", 66), ("node-c", 77), ("node-d", 100)]),
        sc(
            "one constraint on node, 3 out of 4 nodes are candidates",
            on_host(1),
            &[
                "node-a kubernetes.io/hostname=node-a",
                "node-b kubernetes.io/hostname=node-b",
                "node-x kubernetes.io/hostname=node-x",
            ],
            &SPREAD_4213,
        )
        .failed(&["node-y kubernetes.io/hostname=node-y"])
        .want(&[("node-a", 33), ("node-b", 83), ("node-x", 100)]),
        sc(
            "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
            on_host(1),
            &["node-a kubernetes.io/hostname=node-a", "node-b n=node-b", "node-x kubernetes.io/hostname=node-x"],
            &SPREAD_4213,
        )
        .failed(&["node-y kubernetes.io/hostname=node-y"])
        .want(&[("node-a", 16), ("node-b", 0), ("node-x", 100)]),
        sc(
            "one constraint on zone, 3 out of 4 nodes are candidates",
            foo_pod().spread(tsc(1, "zone", SA, exists("foo"))),
            &[
                "node-a zone=zone1 kubernetes.io/hostname=node-a",
                "node-b zone=zone1 kubernetes.io/hostname=node-b",
                "node-x zone=zone2 kubernetes.io/hostname=node-x",
            ],
            &SPREAD_4213,
        )
        .failed(&["node-y zone=zone2 kubernetes.io/hostname=node-y"])
        .want(&[("node-a", 75), ("node-b", 75), ("node-x", 100)]),
        sc(
            "two Constraints on zone and node, 2 out of 4 nodes are candidates",
            foo_pod().spread(tsc(1, "zone", SA, exists("foo"))).spread(tsc(1, HOSTNAME, SA, exists("foo"))),
            &["node-a zone=zone1 kubernetes.io/hostname=node-a", "node-x zone=zone2 kubernetes.io/hostname=node-x"],
            &[
                "p-a1 node-a foo=",
                "p-a2 node-a foo=",
                "p-b1 node-b foo=",
                "p-x1 node-x foo=",
                "p-x2 node-x foo=",
                "p-y1 node-y foo=",
                "p-y2 node-y foo=",
                "p-y3 node-y foo=",
                "p-y4 node-y foo=",
            ],
        )
        .failed(&["node-b zone=zone1 kubernetes.io/hostname=node-b", "node-y zone=zone2 kubernetes.io/hostname=node-y"])
        .want(&[("node-a", 100), ("node-x", 63)]),
        sc(
            "two Constraints on zone, 2 out of 4 nodes are candidates",
            foo_pod().label("bar", "").spread(tsc(1, "zone", SA, exists("foo"))).spread(tsc(
                1,
                "zone",
                SA,
                exists("bar"),
            )),
            &["node-a zone=zone1", "node-x zone=zone2"],
            &[
                "p-a1 node-a foo= bar=",
                "p-a2 node-a foo=",
                "p-b1 node-b foo= bar=",
                "p-y1 node-y foo=",
                "p-y2 node-y foo= bar=",
                "p-y3 node-y foo=",
            ],
        )
        .failed(&["node-b zone=zone1", "node-y zone=zone2"])
        .want(&[("node-a", 85), ("node-x", 100)]),
        sc(
            "two Constraints on zone and node, with different labelSelectors",
            foo_pod().label("bar", "").spread(tsc(1, "zone", SA, exists("foo"))).spread(tsc(
                1,
                HOSTNAME,
                SA,
                exists("bar"),
            )),
            &[
                "node-a zone=zone1 kubernetes.io/hostname=node-a",
                "node-b zone=zone1 kubernetes.io/hostname=node-b",
                "node-x zone=zone2 kubernetes.io/hostname=node-x",
                "node-y zone=zone2 kubernetes.io/hostname=node-y",
            ],
            &["p-a1 node-a foo=", "p-b1 node-b foo= bar=", "p-y1 node-y foo=", "p-y2 node-y bar="],
        )
        .want(&[("node-a", 60), ("node-b", 20), ("node-x", 100), ("node-y", 60)]),
        sc(
            "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
            foo_pod().label("bar", "").spread(tsc(1, "zone", SA, exists("foo"))).spread(tsc(
                1,
                HOSTNAME,
                SA,
                exists("bar"),
            )),
            &[
                "node-a zone=zone1 kubernetes.io/hostname=node-a",
                "node-b zone=zone1 kubernetes.io/hostname=node-b",
                "node-x zone=zone2 kubernetes.io/hostname=node-x",
                "node-y zone=zone2 kubernetes.io/hostname=node-y",
            ],
            &["p-b1 node-b bar=", "p-x1 node-x foo=", "p-y1 node-y foo= bar="],
        )
        .want(&[("node-a", 100), ("node-b", 60), ("node-x", 40), ("node-y", 0)]),
        sc(
            "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
            foo_pod().label("bar", "").spread(tsc(1, "zone", SA, exists("foo"))).spread(tsc(
                1,
                HOSTNAME,
                SA,
                exists("bar"),
            )),
            &[
                "node-a zone=zone1 kubernetes.io/hostname=node-a",
                "node-b zone=zone1 kubernetes.io/hostname=node-b",
                "node-x zone=zone2 kubernetes.io/hostname=node-x",
            ],
            &["p-a1 node-a foo=", "p-b1 node-b foo= bar=", "p-y1 node-y foo=", "p-y2 node-y bar="],
        )
        .failed(&["node-y zone=zone2 kubernetes.io/hostname=node-y"])
        .want(&[("node-a", 50), ("node-b", 25), ("node-x", 100)]),
        sc(
            "existing pods in a different namespace do not count",
            on_host(1),
            &H4[..2],
            &["p-a1 node-a foo= ns:ns1", "p-a2 node-a foo=", "p-b1 node-b foo=", "p-b2 node-b foo="],
        )
        .want(&[("node-a", 100), ("node-b", 33)]),
        sc("terminating Pods should be excluded", on_host(1), &H4[..2], &["p-a node-a foo= term", "p-b node-b foo="])
            .want(&[("node-a", 100), ("node-b", 0)]),
        sc(
            "minDomains has no effect when ScheduleAnyway",
            foo_pod().spread(tsc(2, "node", SA, exists("foo")).min_domains(10)),
            &["node-a node=node-a", "node-b node=node-b", "node-c node=node-c"],
            &["p-a1 node-a foo=", "p-a2 node-a foo=", "p-b1 node-b foo=", "p-b2 node-b foo=", "p-c1 node-c foo="],
        )
        .want(&[("node-a", 75), ("node-b", 75), ("node-c", 100)]),
        sc("NodeAffinityPolicy honored with labelSelectors", on_node().node_selector("foo", ""), &N3, &POLICY_PODS)
            .want(&[("node-a", 0), ("node-b", 33), ("node-c", 100)]),
        sc(
            "NodeAffinityPolicy ignored with labelSelectors",
            foo_pod().node_selector("foo", "").spread(tsc(1, "node", SA, exists("foo")).affinity_policy("Ignore")),
            &N3,
            &POLICY_PODS,
        )
        .want(&[("node-a", 66), ("node-b", 100), ("node-c", 100)]),
        sc("NodeAffinityPolicy honored with nodeAffinity", on_node().node_affinity_in("foo", &[""]), &N3, &POLICY_PODS)
            .want(&[("node-a", 0), ("node-b", 33), ("node-c", 100)]),
        sc(
            "NodeAffinityPolicy ignored with nodeAffinity",
            foo_pod()
                .node_affinity_in("foo", &[""])
                .spread(tsc(1, "node", SA, exists("foo")).affinity_policy("Ignore")),
            &N3,
            &POLICY_PODS,
        )
        .want(&[("node-a", 66), ("node-b", 100), ("node-c", 100)]),
        sc(
            "NodeTaintsPolicy honored",
            foo_pod().spread(tsc(1, "node", SA, exists("foo")).taints_policy("Honor")),
            &N3_TAINT,
            &POLICY_PODS,
        )
        .want(&[("node-a", 0), ("node-b", 33), ("node-c", 100)]),
        sc("NodeTaintsPolicy ignored", on_node(), &N3_TAINT, &POLICY_PODS).want(&[
            ("node-a", 66),
            ("node-b", 100),
            ("node-c", 100),
        ]),
        sc(
            "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
            foo_pod()
                .label("bar", "")
                .spread(tsc(1, "zone", SA, Some(json!({}))).match_label_keys(&["foo"]))
                .spread(tsc(1, HOSTNAME, SA, Some(json!({}))).match_label_keys(&["bar"])),
            &ZH4,
            &["p-a1 node-a foo=", "p-b1 node-b foo= bar=", "p-y1 node-c foo=", "p-y2 node-c bar="],
        )
        .want(&[("node-a", 60), ("node-b", 20), ("node-c", 60), ("node-d", 100)]),
        sc(
            "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
            foo_pod()
                .label("bar", "")
                .label("baz", "")
                .spread(tsc(1, "zone", SA, exists("foo")))
                .spread(tsc(1, HOSTNAME, SA, exists("bar")).match_label_keys(&["baz"])),
            &ZH4,
            &[
                "p-a1 node-a foo=",
                "p-b1 node-b foo= bar= baz=",
                "p-c1 node-c foo=",
                "p-c2 node-c bar=",
                "p-d3 node-c bar= baz=",
            ],
        )
        .want(&[("node-a", 60), ("node-b", 20), ("node-c", 60), ("node-d", 100)]),
    ];
    for c in &cases {
        let got = run_scores(c);
        let want: Vec<(String, i64)> = c.want.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        assert_eq!(got, want, "{}", c.name);
    }
}

#[test]
fn score_without_state_fails() {
    let pl = plugin_system(MemoryLister::default());
    let snap = snapshot(&H4[..1], &[]);
    let err = pl.score(&CycleState::new(), &foo_pod().info(), snap.get("node-a").unwrap()).unwrap_err();
    assert_eq!(err.message(), "error reading \"PreScorePodTopologySpread\" from cycleState: not found");
}

#[test]
fn pre_score_without_pre_filter_uses_the_feasible_nodes() {
    let pl = plugin_list(&[], MemoryLister::default());
    let snap = snapshot(&H4, &SPREAD_2103);
    let p = foo_pod().spread(tsc(1, HOSTNAME, SA, exists("foo"))).info();
    let mut state = CycleState::new();
    assert!(pl.pre_score(&mut state, &p, &ksched_framework::node_refs(snap.list()), &snap).is_success());
    let mut scores: Vec<i64> = snap.list().iter().map(|n| pl.score(&state, &p, n).unwrap()).collect();
    assert!(pl.normalize_score(&state, &p, &ksched_framework::node_refs(snap.list()), &mut scores).is_success());
    assert_eq!(scores, [20, 60, 100, 0]);
}
