use super::*;
use crate::helper::testing::{node, node_info, node_obj, pod, pod_info, pod_obj};
use ksched_framework::{ClusterEvent, Code};
use serde_json::{json, Value};

fn pod_spec(spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([]);
    pod(json!({}), spec)
}

fn required(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

fn name_in(names: &[&str]) -> Value {
    json!({"key": "metadata.name", "operator": "In", "values": names})
}

fn plugin(args: Value) -> NodeAffinity {
    let args: NodeAffinityArgs = decode_args(Some(&args)).unwrap();
    NodeAffinity::from_args(&args).unwrap()
}

fn added_required(terms: Value) -> Value {
    json!({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
}

fn names(ns: &[&str]) -> Option<PreFilterResult> {
    Some(PreFilterResult { node_names: Some(ns.iter().map(|s| s.to_string()).collect()) })
}

struct FilterCase {
    name: &'static str,
    pod: Value,
    node_name: &'static str,
    labels: Value,
    args: Value,
    run_pre_filter: bool,
    /// PreFilter (code, message, result)
    pre_filter: (Code, &'static str, Option<PreFilterResult>),
    /// Filter error reason; None = fits
    filter: Option<&'static str>,
}

fn case(name: &'static str, pod: Value, labels: Value) -> FilterCase {
    FilterCase {
        name,
        pod,
        node_name: "node",
        labels,
        args: json!({}),
        run_pre_filter: true,
        pre_filter: (Code::Success, "", None),
        filter: None,
    }
}

impl FilterCase {
    fn rejects(mut self, reason: &'static str) -> Self {
        self.filter = Some(reason);
        self
    }
    fn node(mut self, name: &'static str) -> Self {
        self.node_name = name;
        self
    }
    fn args(mut self, args: Value) -> Self {
        self.args = args;
        self
    }
    fn pre(mut self, code: Code, msg: &'static str, result: Option<PreFilterResult>) -> Self {
        self.pre_filter = (code, msg, result);
        self
    }
    fn without_pre_filter(mut self) -> Self {
        self.run_pre_filter = false;
        self
    }
}

#[test]
fn pre_filter_and_filter() {
    let gpu_exists_not_amd =
        required(json!([{"matchExpressions": [expr("GPU", "Exists", &[]), expr("GPU", "NotIn", &["AMD", "INTER"])]}]));
    let cases = vec![
        case("missing labels", json!({"nodeSelector": {"foo": "bar"}}), json!({})).rejects(ERR_REASON_POD),
        case("same labels", json!({"nodeSelector": {"foo": "bar"}}), json!({"foo": "bar"})),
        case("node labels are superset", json!({"nodeSelector": {"foo": "bar"}}), json!({"foo": "bar", "baz": "blah"})),
        case("node labels are subset", json!({"nodeSelector": {"foo": "bar", "baz": "blah"}}), json!({"foo": "bar"}))
            .rejects(ERR_REASON_POD),
        case("empty nodeSelector does not skip", json!({"nodeSelector": {}}), json!({})),
        case(
            "In matches",
            required(json!([{"matchExpressions": [expr("foo", "In", &["bar", "value2"])]}])),
            json!({"foo": "bar"}),
        ),
        case(
            "Gt matches",
            required(json!([{"matchExpressions": [expr("kernel-version", "Gt", &["0204"])]}])),
            json!({"kernel-version": "0206"}),
        ),
        case(
            "NotIn matches",
            required(json!([{"matchExpressions": [expr("mem-type", "NotIn", &["DDR", "DDR2"])]}])),
            json!({"mem-type": "DDR3"}),
        ),
        case(
            "Exists matches",
            required(json!([{"matchExpressions": [expr("GPU", "Exists", &[])]}])),
            json!({"GPU": "NVIDIA-GRID-K1"}),
        ),
        case(
            "In does not match",
            required(json!([{"matchExpressions": [expr("foo", "In", &["value1", "value2"])]}])),
            json!({"foo": "bar"}),
        )
        .rejects(ERR_REASON_POD),
        case(
            "empty matchExpressions match nothing",
            required(json!([{"matchExpressions": []}])),
            json!({"foo": "bar"}),
        )
        .rejects(ERR_REASON_POD),
        case("no terms match nothing", required(json!([])), json!({"foo": "bar"})).rejects(ERR_REASON_POD),
        case("no affinity skips", json!({}), json!({"foo": "bar"})).pre(Code::Skip, "", None),
        case("affinity without required part skips", json!({"affinity": {"nodeAffinity": {}}}), json!({"foo": "bar"}))
            .pre(Code::Skip, "", None),
        case("expressions ANDed, match", gpu_exists_not_amd.clone(), json!({"GPU": "NVIDIA-GRID-K1"})),
        case(
            "expressions ANDed, no match",
            required(json!([{"matchExpressions": [expr("GPU", "Exists", &[]), expr("GPU", "In", &["AMD", "INTER"])]}])),
            json!({"GPU": "NVIDIA-GRID-K1"}),
        )
        .rejects(ERR_REASON_POD),
        case(
            "terms ORed",
            required(json!([
                {"matchExpressions": [expr("foo", "In", &["bar", "value2"])]},
                {"matchExpressions": [expr("diffkey", "In", &["wrong", "value2"])]}
            ])),
            json!({"foo": "bar"}),
        ),
        case(
            "nodeSelector and affinity both satisfied",
            {
                let mut s = required(json!([{"matchExpressions": [expr("foo", "Exists", &[])]}]));
                s["nodeSelector"] = json!({"foo": "bar"});
                s
            },
            json!({"foo": "bar"}),
        ),
        case(
            "affinity satisfied but nodeSelector not",
            {
                let mut s = required(json!([{"matchExpressions": [expr("foo", "Exists", &[])]}]));
                s["nodeSelector"] = json!({"foo": "bar"});
                s
            },
            json!({"foo": "barrrrrr"}),
        )
        .rejects(ERR_REASON_POD),
        case(
            "invalid value makes the term match nothing",
            required(json!([{"matchExpressions": [expr("foo", "NotIn", &["invalid value: ___@#$%^"])]}])),
            json!({"foo": "bar"}),
        )
        .rejects(ERR_REASON_POD),
        case("matchFields In matches", required(json!([{"matchFields": [name_in(&["node1"])]}])), json!({}))
            .node("node1")
            .pre(Code::Success, "", names(&["node1"])),
        case("matchFields In does not match", required(json!([{"matchFields": [name_in(&["node1"])]}])), json!({}))
            .node("node2")
            .pre(Code::Success, "", names(&["node1"]))
            .rejects(ERR_REASON_POD),
        case(
            "two terms: fields miss, expressions match",
            required(json!([
                {"matchFields": [name_in(&["node1"]), name_in(&["node2"])]},
                {"matchExpressions": [expr("foo", "In", &["bar"])]}
            ])),
            json!({"foo": "bar"}),
        )
        .node("node2"),
        case(
            "one term: fields miss, expressions match",
            required(
                json!([{"matchFields": [name_in(&["node1"])], "matchExpressions": [expr("foo", "In", &["bar"])]}]),
            ),
            json!({"foo": "bar"}),
        )
        .node("node2")
        .pre(Code::Success, "", names(&["node1"]))
        .rejects(ERR_REASON_POD),
        case(
            "one term: both match",
            required(
                json!([{"matchFields": [name_in(&["node1"])], "matchExpressions": [expr("foo", "In", &["bar"])]}]),
            ),
            json!({"foo": "bar"}),
        )
        .node("node1")
        .pre(Code::Success, "", names(&["node1"])),
        case(
            "two terms: neither matches",
            required(json!([
                {"matchFields": [name_in(&["node1"])]},
                {"matchExpressions": [expr("foo", "In", &["not-match-to-bar"])]}
            ])),
            json!({"foo": "bar"}),
        )
        .node("node2")
        .rejects(ERR_REASON_POD),
        case(
            "two terms of node name affinity",
            required(json!([{"matchFields": [name_in(&["node1"])]}, {"matchFields": [name_in(&["node2"])]}])),
            json!({}),
        )
        .node("node2")
        .pre(Code::Success, "", names(&["node1", "node2"])),
        case(
            "conflicting field requirements",
            required(json!([{"matchFields": [name_in(&["node1"]), name_in(&["node2"])]}])),
            json!({"foo": "bar"}),
        )
        .node("node2")
        .pre(Code::UnschedulableAndUnresolvable, ERR_REASON_CONFLICT, None)
        .rejects(ERR_REASON_POD),
        case(
            "multi-valued name In narrows though the term is invalid",
            required(json!([{"matchFields": [name_in(&["node1", "node2"])]}])),
            json!({}),
        )
        .node("node1")
        .pre(Code::Success, "", names(&["node1", "node2"]))
        .rejects(ERR_REASON_POD),
        case(
            "one conflicting term and one named term",
            required(json!([
                {"matchFields": [name_in(&["node1"]), name_in(&["node2"])]},
                {"matchFields": [name_in(&["node3"])]}
            ])),
            json!({}),
        )
        .node("node3")
        .pre(Code::Success, "", names(&["node3"])),
        case(
            "matches added affinity and pod's",
            required(json!([{"matchExpressions": [expr("zone", "In", &["foo"])]}])),
            json!({"zone": "foo"}),
        )
        .node("node2")
        .args(added_required(json!([{"matchFields": [name_in(&["node2"])]}]))),
        case(
            "matches added affinity but not pod's",
            required(json!([{"matchExpressions": [expr("zone", "In", &["bar"])]}])),
            json!({"zone": "foo"}),
        )
        .node("node2")
        .args(added_required(json!([{"matchFields": [name_in(&["node2"])]}])))
        .rejects(ERR_REASON_POD),
        case("doesn't match added affinity", json!({}), json!({"zone": "foo"}))
            .node("node2")
            .args(added_required(json!([{"matchExpressions": [expr("zone", "In", &["bar"])]}])))
            .rejects(ERR_REASON_ENFORCED),
        case("added affinity checked before the pod's", json!({"nodeSelector": {"a": "b"}}), json!({"zone": "foo"}))
            .args(added_required(json!([{"matchExpressions": [expr("zone", "In", &["bar"])]}])))
            .rejects(ERR_REASON_ENFORCED),
        case(
            "node selector without PreFilter",
            json!({"nodeSelector": {"foo": "bar"}}),
            json!({"foo": "bar", "baz": "blah"}),
        )
        .without_pre_filter(),
        case("node affinity without PreFilter", gpu_exists_not_amd, json!({"GPU": "NVIDIA-GRID-K1"}))
            .without_pre_filter(),
        case("mismatch without PreFilter", json!({"nodeSelector": {"foo": "bar"}}), json!({}))
            .without_pre_filter()
            .rejects(ERR_REASON_POD),
    ];
    for c in cases {
        let pl = plugin(c.args.clone());
        let p = pod_info(pod_spec(c.pod.clone()));
        let ni = node_info(node(json!({"name": c.node_name, "labels": c.labels}), json!({})));
        let mut state = CycleState::new();
        if c.run_pre_filter {
            let (result, status) = pl.pre_filter(&mut state, &p, &Snapshot::default());
            assert_eq!(status.code(), c.pre_filter.0, "{}: {status}", c.name);
            assert_eq!(status.message(), c.pre_filter.1, "{}", c.name);
            assert_eq!(result, c.pre_filter.2, "{}", c.name);
            if status.is_skip() {
                continue;
            }
        }
        let got = pl.filter(&state, &p, &ni);
        match pl.bind_cycle(&state, &p) {
            Some(bound) => assert_eq!(bound(&ni), got, "{}: the bound filter decides as filter does", c.name),
            None => {
                assert!(!c.run_pre_filter || !status_ok(&state), "{}: bound whenever PreFilter stored state", c.name)
            }
        }
        match c.filter {
            None => assert!(got.is_success(), "{}: {got}", c.name),
            Some(reason) => {
                assert_eq!(got.code(), Code::UnschedulableAndUnresolvable, "{}", c.name);
                assert_eq!(got.message(), reason, "{}", c.name);
            }
        }
    }
}

#[test]
fn pre_filter_skip_depends_on_added_required_affinity() {
    let p = pod_info(pod_spec(json!({})));
    let preferred_only = plugin(json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [expr("a", "Exists", &[])]}}
    ]}}));
    let (_, s) = preferred_only.pre_filter(&mut CycleState::new(), &p, &Snapshot::default());
    assert!(s.is_skip());
    let enforced = plugin(added_required(json!([{"matchExpressions": [expr("a", "Exists", &[])]}])));
    let (r, s) = enforced.pre_filter(&mut CycleState::new(), &p, &Snapshot::default());
    assert!(s.is_success() && r.is_none());
}

fn preferred(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}})
}

fn pref(weight: i32, exprs: Value) -> Value {
    json!({"weight": weight, "preference": {"matchExpressions": exprs}})
}

#[test]
fn score() {
    let label1 = json!({"foo": "bar"});
    let label2 = json!({"key": "value"});
    let label3 = json!({"az": "az1"});
    let label4 = json!({"abc": "az11", "def": "az22"});
    let label5 = json!({"foo": "bar", "key": "value", "az": "az1"});
    let affinity1 = json!([pref(2, json!([expr("foo", "In", &["bar"])]))]);
    let affinity2 = json!([
        pref(2, json!([expr("foo", "In", &["bar"])])),
        pref(4, json!([expr("key", "In", &["value"])])),
        pref(5, json!([expr("foo", "In", &["bar"]), expr("key", "In", &["value"]), expr("az", "In", &["az1"])])),
    ]);
    // (name, pod spec, node labels, args, run PreScore, expected scores or PreScore (code, message))
    let cases = [
        ("no affinity, no PreScore", json!({}), vec![label1.clone(), label2.clone(), label3.clone()], json!({}), false, Ok(vec![0, 0, 0])),
        ("no affinity skips PreScore", json!({}), vec![label1.clone()], json!({}), true, Err((Code::Skip, ""))),
        (
            "broken preferred affinity",
            preferred(json!([pref(2, json!([expr("invalid key", "In", &["bar"])]))])),
            vec![label1.clone()],
            json!({}),
            true,
            Err((
                Code::Error,
                "[0].matchExpressions[0].key: Invalid value: \"invalid key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            )),
        ),
        ("no node matches", preferred(affinity1.clone()), vec![label4.clone(), label2.clone(), label3.clone()], json!({}), true, Ok(vec![0, 0, 0])),
        ("only node1 matches", preferred(affinity1.clone()), vec![label1.clone(), label2.clone(), label3.clone()], json!({}), true, Ok(vec![100, 0, 0])),
        ("different priorities", preferred(affinity2.clone()), vec![label1.clone(), label5.clone(), label2.clone()], json!({}), true, Ok(vec![18, 100, 36])),
        (
            "added affinity",
            json!({}),
            vec![label1.clone(), label2.clone()],
            json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": affinity1.clone()}}),
            true,
            Ok(vec![100, 0]),
        ),
        (
            "added affinity and pod affinity",
            preferred(affinity1.clone()),
            vec![label1.clone(), label2.clone(), label5.clone()],
            json!({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [pref(3, json!([expr("key", "In", &["value"])]))]}}),
            true,
            Ok(vec![40, 60, 100]),
        ),
        ("without PreScore", preferred(affinity2.clone()), vec![label1.clone(), label5.clone(), label2.clone()], json!({}), false, Ok(vec![18, 100, 36])),
        (
            "zero weight and empty terms ignored",
            preferred(json!([pref(0, json!([expr("foo", "In", &["bar"])])), {"weight": 7, "preference": {}}, pref(1, json!([expr("key", "Exists", &[])]))])),
            vec![label1.clone(), label2.clone()],
            json!({}),
            true,
            Ok(vec![0, 100]),
        ),
        ("empty preferred list still scores", preferred(json!([])), vec![label1.clone()], json!({}), true, Ok(vec![0])),
    ];
    for (name, spec, labels, args, run_pre_score, want) in cases {
        let pl = plugin(args);
        let p = pod_info(pod_spec(spec));
        let nodes: Vec<Arc<NodeInfo>> = labels
            .into_iter()
            .enumerate()
            .map(|(i, l)| Arc::new(node_info(node(json!({"name": format!("node{i}"), "labels": l}), json!({})))))
            .collect();
        let mut state = CycleState::new();
        if run_pre_score {
            let s = pl.pre_score(
                &mut state,
                &p,
                &ksched_framework::node_refs(&nodes),
                &ksched_framework::Snapshot::default(),
            );
            if let Err((code, msg)) = want {
                assert_eq!(s.code(), code, "{name}");
                assert_eq!(s.message(), msg, "{name}");
                continue;
            }
            assert!(s.is_success(), "{name}: {s}");
        }
        let mut scores: Vec<i64> = nodes.iter().map(|n| pl.score(&state, &p, n).unwrap()).collect();
        assert!(pl.normalize_score(&state, &p, &ksched_framework::node_refs(&nodes), &mut scores).is_success());
        assert_eq!(Ok(scores), want, "{name}");
    }
}

#[test]
fn node_change_hint() {
    let p = pod_spec(required(json!([{"matchExpressions": [expr("foo", "In", &["bar"])]}])));
    let n = |labels: Value| Some(node_obj(node(json!({"name": "n", "labels": labels}), json!({}))));
    let with_capacity = |labels: Value| {
        let mut nd = node(json!({"name": "n", "labels": labels}), json!({}));
        nd.status = Some(serde_json::from_value(json!({"capacity": {"cpu": "1"}})).unwrap());
        Some(node_obj(nd))
    };
    let enforced = added_required(json!([{"matchExpressions": [expr("foo", "In", &["bar"])]}]));
    let cases = [
        ("wrong new object", json!({}), None, Some(pod_obj(p.clone())), Err(())),
        ("wrong old object", json!({}), Some(pod_obj(p.clone())), n(json!({})), Err(())),
        ("added node doesn't match", json!({}), None, n(json!({})), Ok(QueueingHint::QueueSkip)),
        ("added node matches", json!({}), None, n(json!({"foo": "bar"})), Ok(QueueingHint::Queue)),
        ("unrelated change", json!({}), n(json!({})), with_capacity(json!({})), Ok(QueueingHint::QueueSkip)),
        ("unrelated label change", json!({}), n(json!({})), n(json!({"k": "v"})), Ok(QueueingHint::QueueSkip)),
        (
            "suitable to unsuitable",
            json!({}),
            n(json!({"foo": "bar"})),
            n(json!({"k": "v"})),
            Ok(QueueingHint::QueueSkip),
        ),
        ("label change makes it match", json!({}), n(json!({})), n(json!({"foo": "bar"})), Ok(QueueingHint::Queue)),
        (
            "stays matching",
            json!({}),
            n(json!({"foo": "bar"})),
            with_capacity(json!({"foo": "bar"})),
            Ok(QueueingHint::QueueSkip),
        ),
        ("enforced affinity not matched", enforced.clone(), None, n(json!({})), Ok(QueueingHint::QueueSkip)),
        ("enforced affinity matched", enforced, None, n(json!({"foo": "bar"})), Ok(QueueingHint::Queue)),
    ];
    for (name, args, old, new, want) in cases {
        let got = plugin(args).is_schedulable_after_node_change(&p, old.as_ref(), new.as_ref());
        assert_eq!(got.map_err(|_| ()), want, "{name}");
    }
    // a pod whose only term is invalid: the parse error surfaces (and the queue treats it as Queue)
    let broken = pod_spec(required(json!([{"matchExpressions": [expr("foo", "In", &[])]}])));
    let got = plugin(json!({})).is_schedulable_after_node_change(&broken, None, n(json!({})).as_ref());
    assert_eq!(
        got.unwrap_err(),
        "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
    );
    let events: Vec<_> =
        plugin(json!({})).events_to_register().unwrap().iter().map(|e| (e.event, e.hint.is_some())).collect();
    assert_eq!(
        events,
        [(ClusterEvent::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_LABEL), true)]
    );
}

#[test]
fn args_decoding_and_validation() {
    let handle = Handle::for_tests();
    assert!(new(None, &handle).is_ok());
    assert!(new(Some(&json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeAffinityArgs"})), &handle)
        .is_ok());
    let unknown = new(Some(&json!({"addedAffinity": {}, "bogus": 1})), &handle).err().unwrap();
    assert!(unknown.contains("unknown field `bogus`"), "{unknown}");
    let invalid = json!({"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "foo", "operator": "Bar"}]}
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In"}]}}
        ]
    }});
    let err = new(Some(&invalid), &handle).err().unwrap();
    assert_eq!(
        err,
        "[addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: \"Bar\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\", addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values: Invalid value: null: must have one element]"
    );
    let args: NodeAffinityArgs = decode_args(Some(&invalid)).unwrap();
    let with_path = validate_node_affinity_args("profiles[0].pluginConfig[1].args", &args).unwrap_err();
    assert!(with_path.starts_with("[profiles[0].pluginConfig[1].args.addedAffinity.required"), "{with_path}");
}

#[test]
fn required_node_affinity_helper() {
    let p = pod_spec({
        let mut s = required(json!([{"matchExpressions": [expr("zone", "In", &["a"])]}]));
        s["nodeSelector"] = json!({"disk": "ssd"});
        s
    });
    let n = |labels: Value| node(json!({"name": "n", "labels": labels}), json!({}));
    assert!(required_node_affinity_matches(&p, &n(json!({"zone": "a", "disk": "ssd"}))));
    assert!(!required_node_affinity_matches(&p, &n(json!({"zone": "a"}))));
    assert!(!required_node_affinity_matches(&p, &n(json!({"zone": "b", "disk": "ssd"}))));
    assert!(required_node_affinity_matches(&pod_spec(json!({})), &n(json!({}))));
}

/// Whether NodeAffinity's PreFilter left its state.
fn status_ok(state: &CycleState) -> bool {
    state.read::<super::PreFilterState>(super::PRE_FILTER_STATE_KEY).is_ok()
}
