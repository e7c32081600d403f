use super::*;
use crate::noderesources::args::{RequestedToCapacityRatioParam, ResourceSpec, ScoringStrategy, UtilizationShapePoint};
use crate::noderesources::testutil::{node, node_info, pod, pod_from_spec, raw_pod};
use ksched_framework::ClusterEvent;
use serde_json::{json, Value};

const ALLOC: &str = r#"{"cpu": "10m", "memory": "20", "pods": "32", "example.com/aaa": "5", "ephemeral-storage": "20", "hugepages-2Mi": "5"}"#;

fn alloc() -> Value {
    serde_json::from_str(ALLOC).unwrap()
}

fn default_fit() -> Fit {
    Fit::from_args(&NodeResourcesFitArgs::default()).unwrap()
}

fn run_filter(pl: &Fit, incoming: &PodInfo, node: &NodeInfo) -> Status {
    let mut state = CycleState::new();
    let (res, st) = pl.pre_filter(&mut state, incoming, &Snapshot::default());
    assert!(res.is_none() && st.is_success());
    let status = pl.filter(&state, incoming, node);
    let bound = pl.bind_cycle(&state, incoming).expect("PreFilter state is present");
    assert_eq!(bound(node), status, "the bound filter decides as filter does");
    status
}

struct FilterCase {
    name: &'static str,
    pod: PodInfo,
    existing: Value,
    args: Value,
    want: Status,
}

fn with_init(containers: Value, init: Value) -> PodInfo {
    let mk = |v: &Value, prefix: &str| -> Vec<Value> {
        v.as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, r)| json!({"name": format!("{prefix}{i}"), "image": "i", "resources": {"requests": r}}))
            .collect()
    };
    pod_from_spec(json!({"containers": mk(&containers, "c"), "initContainers": mk(&init, "i")}))
}

fn insufficient(code: Code, what: &[&str]) -> Status {
    Status::new(code, what.iter().map(|w| w.to_string()))
}

#[test]
fn filter_cases() {
    use Code::{Unschedulable as U, UnschedulableAndUnresolvable as UU};
    let ok = Status::success();
    let cases = vec![
        FilterCase {
            name: "no resources requested always fits",
            pod: pod(json!([])),
            existing: json!({"cpu": "10m", "memory": "20"}),
            args: json!({}),
            want: ok.clone(),
        },
        FilterCase {
            name: "too many resources fails",
            pod: pod(json!({"cpu": "1m", "memory": "1"})),
            existing: json!({"cpu": "10m", "memory": "20"}),
            args: json!({}),
            want: insufficient(U, &["Insufficient cpu", "Insufficient memory"]),
        },
        FilterCase {
            name: "too many resources fails due to highest init container cpu",
            pod: with_init(
                json!([{"cpu": "1m", "memory": "1"}]),
                json!([{"cpu": "3m", "memory": "1"}, {"cpu": "2m", "memory": "1"}]),
            ),
            existing: json!({"cpu": "8m", "memory": "19"}),
            args: json!({}),
            want: insufficient(U, &["Insufficient cpu"]),
        },
        FilterCase {
            name: "too many resources fails due to init container memory",
            pod: with_init(json!([{"cpu": "1m", "memory": "1"}]), json!([{"cpu": "1m", "memory": "3"}])),
            existing: json!({"cpu": "9m", "memory": "19"}),
            args: json!({}),
            want: insufficient(U, &["Insufficient memory"]),
        },
        FilterCase {
            name: "init container fits because it's the max, not sum, of containers and init containers",
            pod: with_init(
                json!([{"cpu": "1m", "memory": "1"}]),
                json!([{"cpu": "1m", "memory": "1"}, {"cpu": "1m", "memory": "1"}]),
            ),
            existing: json!({"cpu": "9m", "memory": "19"}),
            args: json!({}),
            want: ok.clone(),
        },
        FilterCase {
            name: "equal edge case",
            pod: pod(json!({"cpu": "5m", "memory": "1"})),
            existing: json!({"cpu": "5m", "memory": "19"}),
            args: json!({}),
            want: ok.clone(),
        },
        FilterCase {
            name: "extended resource capacity enforced",
            pod: pod(json!({"cpu": "1m", "memory": "1", "example.com/aaa": "10"})),
            existing: json!({}),
            args: json!({}),
            want: insufficient(UU, &["Insufficient example.com/aaa"]),
        },
        FilterCase {
            name: "extended resource allocatable enforced",
            pod: pod(json!({"cpu": "1m", "memory": "1", "example.com/aaa": "1"})),
            existing: json!({"example.com/aaa": "5"}),
            args: json!({}),
            want: insufficient(U, &["Insufficient example.com/aaa"]),
        },
        FilterCase {
            name: "extended resource allocatable enforced for multiple containers",
            pod: pod(
                json!([{"cpu": "1m", "memory": "1", "example.com/aaa": "3"}, {"cpu": "1m", "memory": "1", "example.com/aaa": "3"}]),
            ),
            existing: json!({"example.com/aaa": "2"}),
            args: json!({}),
            want: insufficient(UU, &["Insufficient example.com/aaa"]),
        },
        FilterCase {
            name: "extended resource allocatable admits multiple init containers",
            pod: with_init(
                json!([{}]),
                json!([{"cpu": "1m", "memory": "1", "example.com/aaa": "3"}, {"cpu": "1m", "memory": "1", "example.com/aaa": "3"}]),
            ),
            existing: json!({"example.com/aaa": "2"}),
            args: json!({}),
            want: ok.clone(),
        },
        FilterCase {
            name: "extended resource allocatable enforced for unknown resource",
            pod: pod(json!({"cpu": "1m", "memory": "1", "example.com/bbb": "1"})),
            existing: json!({}),
            args: json!({}),
            want: insufficient(UU, &["Insufficient example.com/bbb"]),
        },
        FilterCase {
            name: "kubernetes.io resource capacity enforced",
            pod: pod(json!({"cpu": "1m", "memory": "1", "kubernetes.io/something": "10"})),
            existing: json!({}),
            args: json!({}),
            want: insufficient(UU, &["Insufficient kubernetes.io/something"]),
        },
        FilterCase {
            name: "hugepages resource allocatable enforced for multiple containers",
            pod: pod(
                json!([{"cpu": "1m", "memory": "1", "hugepages-2Mi": "3"}, {"cpu": "1m", "memory": "1", "hugepages-2Mi": "3"}]),
            ),
            existing: json!({"hugepages-2Mi": "2"}),
            args: json!({}),
            want: insufficient(UU, &["Insufficient hugepages-2Mi"]),
        },
        FilterCase {
            name: "skip checking ignored extended resource",
            pod: pod(json!({"cpu": "1m", "memory": "1", "example.com/bbb": "1"})),
            existing: json!({}),
            args: json!({"ignoredResources": ["example.com/bbb"]}),
            want: ok.clone(),
        },
        FilterCase {
            name: "skip checking ignored extended resource via resource groups",
            pod: pod(json!({"cpu": "1m", "memory": "1", "example.com/bbb": "1", "kubernetes.io/something": "1"})),
            existing: json!({}),
            args: json!({"ignoredResourceGroups": ["example.com"]}),
            want: insufficient(UU, &["Insufficient kubernetes.io/something"]),
        },
        FilterCase {
            name: "kubernetes.io resources cannot be ignored",
            pod: pod(json!({"kubernetes.io/something": "1"})),
            existing: json!({}),
            args: json!({"ignoredResources": ["kubernetes.io/something"], "ignoredResourceGroups": ["kubernetes.io"]}),
            want: insufficient(UU, &["Insufficient kubernetes.io/something"]),
        },
        FilterCase {
            name: "skip checking extended resource request with quantity zero",
            pod: pod(json!({"cpu": "1m", "memory": "1", "example.com/aaa": "0"})),
            existing: json!({"example.com/aaa": "6"}),
            args: json!({}),
            want: ok.clone(),
        },
        FilterCase {
            name: "requests + overhead does not fit for memory",
            pod: pod_from_spec(
                json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1m", "memory": "1"}}}],
                                      "overhead": {"cpu": "1m", "memory": "15"}}),
            ),
            existing: json!({"cpu": "5m", "memory": "5"}),
            args: json!({}),
            want: insufficient(U, &["Insufficient memory"]),
        },
        FilterCase {
            name: "pod-level cpu resource not fit",
            pod: pod_from_spec(
                json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1m", "memory": "1"}}}],
                                      "resources": {"requests": {"cpu": "7m", "memory": "2"}}}),
            ),
            existing: json!({"cpu": "5m", "memory": "5"}),
            args: json!({}),
            want: insufficient(U, &["Insufficient cpu"]),
        },
        FilterCase {
            name: "pod-level hugepages resource not fit",
            pod: pod_from_spec(
                json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1m", "memory": "1"}}}],
                                      "resources": {"requests": {"hugepages-2Mi": "6"}}}),
            ),
            existing: json!({}),
            args: json!({}),
            want: insufficient(UU, &["Insufficient hugepages-2Mi"]),
        },
        FilterCase {
            name: "ephemeral local storage request exceeds allocatable",
            pod: pod(json!({"cpu": "18m", "memory": "1", "ephemeral-storage": "25"})),
            existing: json!({"cpu": "2m", "memory": "2"}),
            args: json!({}),
            want: insufficient(UU, &["Insufficient cpu", "Insufficient ephemeral-storage"]),
        },
        FilterCase {
            name: "every shortage is reported in order, unresolvable when one exceeds the node",
            pod: pod(
                json!({"cpu": "2m", "memory": "2", "ephemeral-storage": "2", "example.com/aaa": "1", "hugepages-2Mi": "9"}),
            ),
            existing: json!({"cpu": "9m", "memory": "19", "ephemeral-storage": "19", "example.com/aaa": "5", "hugepages-2Mi": "1"}),
            args: json!({}),
            want: insufficient(
                UU,
                &[
                    "Insufficient cpu",
                    "Insufficient memory",
                    "Insufficient ephemeral-storage",
                    "Insufficient example.com/aaa",
                    "Insufficient hugepages-2Mi",
                ],
            ),
        },
    ];
    for c in cases {
        let pl = Fit::from_args(&{
            let mut a: NodeResourcesFitArgs = serde_json::from_value(c.args.clone()).unwrap();
            a.set_defaults();
            a
        })
        .unwrap();
        let node = node_info(alloc(), &[pod(c.existing.clone())]);
        assert_eq!(run_filter(&pl, &c.pod, &node), c.want, "{}", c.name);
    }
}

#[test]
fn filter_pod_count() {
    use Code::Unschedulable as U;
    let cases = [
        (
            "no space for additional pod even without requests",
            json!([]),
            json!({"cpu": "10m", "memory": "20"}),
            &["Too many pods"][..],
        ),
        (
            "no space for additional pod even if resources fit",
            json!({"cpu": "1m", "memory": "1"}),
            json!({"cpu": "5m", "memory": "5"}),
            &["Too many pods"][..],
        ),
        (
            "pod count and resources both reported, never unresolvable for pods",
            json!({"cpu": "1m", "memory": "1"}),
            json!({"cpu": "10m", "memory": "20"}),
            &["Too many pods", "Insufficient cpu", "Insufficient memory"][..],
        ),
    ];
    let pl = default_fit();
    for (name, incoming, existing, want) in cases {
        let mut a = alloc();
        a["pods"] = json!("1");
        let node = node_info(a, &[pod(existing)]);
        assert_eq!(run_filter(&pl, &pod(incoming), &node), insufficient(U, want), "{name}");
    }
    // a node without a pods allocatable takes no pod at all
    let node = node_info(json!({"cpu": "1"}), &[]);
    assert_eq!(run_filter(&pl, &pod(json!([])), &node), insufficient(U, &["Too many pods"]));
}

#[test]
fn filter_without_pre_filter_state_is_an_error() {
    let pl = default_fit();
    let st = pl.filter(&CycleState::new(), &pod(json!({"cpu": "1m"})), &node_info(alloc(), &[]));
    assert_eq!(st.code(), Code::Error);
    assert_eq!(st.message(), "error reading \"PreFilterNodeResourcesFit\" from cycleState: not found");
}

fn strategy(type_: &str, shape: Option<&[(i32, i32)]>) -> NodeResourcesFitArgs {
    NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy {
            type_: type_.to_string(),
            resources: vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)],
            requested_to_capacity_ratio: shape.map(|s| RequestedToCapacityRatioParam {
                shape: s.iter().map(|&(utilization, score)| UtilizationShapePoint { utilization, score }).collect(),
            }),
        }),
        ..Default::default()
    }
}

#[test]
fn score_cases() {
    // cpu quantities are whole cores, as upstream's tests use them
    let cap = |cpu: &str, mem: &str| json!({"cpu": cpu, "memory": mem, "pods": "100"});
    let req = |cpu: &str, mem: &str| json!({"cpu": cpu, "memory": mem});
    let with_sidecar = pod_from_spec(json!({
        "containers": [{"name": "c", "image": "i", "resources": {"requests": req("1000", "2000")}}],
        "initContainers": [{"name": "s", "image": "i", "restartPolicy": "Always", "resources": {"requests": req("1000", "2000")}}],
    }));
    type Case<'a> = (&'a str, NodeResourcesFitArgs, PodInfo, Vec<(Value, Vec<PodInfo>)>, Vec<i64>);
    let cases: Vec<Case> = vec![
        (
            "RequestedToCapacityRatio case1",
            strategy(REQUESTED_TO_CAPACITY_RATIO, Some(&[(0, 10), (100, 0)])),
            pod(req("3000", "5000")),
            vec![
                (cap("4000", "10000"), vec![pod(req("2000", "4000"))]),
                (cap("6000", "10000"), vec![pod(req("1000", "2000"))]),
            ],
            vec![10, 32],
        ),
        (
            "RequestedToCapacityRatio case2",
            strategy(REQUESTED_TO_CAPACITY_RATIO, Some(&[(0, 0), (100, 10)])),
            pod(req("3000", "5000")),
            vec![
                (cap("4000", "10000"), vec![pod(req("2000", "4000"))]),
                (cap("6000", "10000"), vec![pod(req("1000", "2000"))]),
            ],
            vec![95, 68],
        ),
        (
            "MostAllocated",
            strategy(MOST_ALLOCATED, None),
            pod(req("1000", "2000")),
            vec![
                (cap("4000", "10000"), vec![pod(req("2000", "4000"))]),
                (cap("6000", "10000"), vec![pod(req("1000", "2000"))]),
            ],
            vec![67, 36],
        ),
        (
            "LeastAllocated",
            strategy(LEAST_ALLOCATED, None),
            pod(req("1000", "2000")),
            vec![
                (cap("4000", "10000"), vec![pod(req("2000", "4000"))]),
                (cap("6000", "10000"), vec![pod(req("1000", "2000"))]),
            ],
            vec![32, 63],
        ),
        (
            "MostAllocated with sidecar container",
            strategy(MOST_ALLOCATED, None),
            pod(req("1000", "2000")),
            vec![
                (cap("4000", "10000"), vec![with_sidecar.clone()]),
                (cap("4000", "10000"), vec![pod(req("1000", "2000"))]),
            ],
            vec![67, 45],
        ),
        (
            "LeastAllocated with sidecar container",
            strategy(LEAST_ALLOCATED, None),
            pod(req("1000", "2000")),
            vec![
                (cap("4000", "10000"), vec![with_sidecar.clone()]),
                (cap("4000", "10000"), vec![pod(req("1000", "2000"))]),
            ],
            vec![32, 55],
        ),
        (
            "LeastAllocated, pod without containers requests nothing",
            strategy(LEAST_ALLOCATED, None),
            pod(json!([])),
            vec![
                (cap("10000", "20000"), vec![pod(req("3000", "0")), pod(req("3000", "0"))]),
                (cap("10000", "20000"), vec![pod(req("3000", "0")), pod(req("3000", "5000"))]),
            ],
            vec![70, 57],
        ),
        (
            "LeastAllocated, request exceeds capacity",
            strategy(LEAST_ALLOCATED, None),
            pod(req("3000", "0")),
            vec![
                (cap("4000", "10000"), vec![pod(req("3000", "0"))]),
                (cap("4000", "10000"), vec![pod(req("3000", "5000"))]),
            ],
            vec![50, 25],
        ),
        (
            "LeastAllocated, zero node resources",
            strategy(LEAST_ALLOCATED, None),
            pod(json!([])),
            vec![(json!({}), vec![pod(req("3000", "0"))])],
            vec![0],
        ),
        (
            "LeastAllocated, container without requests gets 100m/200MiB defaults",
            strategy(LEAST_ALLOCATED, None),
            pod(json!({})),
            vec![(json!({"cpu": "1", "memory": "1000Mi"}), vec![pod(json!({}))])],
            // cpu: (1000-200)*100/1000 = 80; memory: (1000-400)*100/1000 = 60
            vec![70],
        ),
        (
            "RequestedToCapacityRatio excludes zero-scored resources from the mean",
            strategy(REQUESTED_TO_CAPACITY_RATIO, Some(&[(0, 10), (100, 0)])),
            pod(json!([])),
            vec![(cap("4000", "10000"), vec![pod(json!({})), pod(json!({}))])],
            vec![100],
        ),
    ];
    for (name, args, incoming, nodes, want) in cases {
        let pl = Fit::from_args(&args).unwrap();
        for run_pre_score in [true, false] {
            let mut state = CycleState::new();
            if run_pre_score {
                assert!(pl.pre_score(&mut state, &incoming, &[], &Snapshot::default()).is_success());
            }
            let got: Vec<i64> = nodes
                .iter()
                .map(|(a, pods)| pl.score(&state, &incoming, &node_info(a.clone(), pods)).unwrap())
                .collect();
            assert_eq!(got, want, "{name} (PreScore run: {run_pre_score})");
        }
    }
}

#[test]
fn score_with_extended_resources() {
    let args = NodeResourcesFitArgs {
        scoring_strategy: Some(ScoringStrategy {
            type_: REQUESTED_TO_CAPACITY_RATIO.into(),
            resources: vec![ResourceSpec::new("intel.com/foo", 1)],
            requested_to_capacity_ratio: Some(RequestedToCapacityRatioParam {
                shape: vec![
                    UtilizationShapePoint { utilization: 0, score: 0 },
                    UtilizationShapePoint { utilization: 100, score: 1 },
                ],
            }),
        }),
        ..Default::default()
    };
    let pl = Fit::from_args(&args).unwrap();
    let node =
        |foo: &str, pods: &[PodInfo]| node_info(json!({"cpu": "4", "memory": "10Gi", "intel.com/foo": foo}), pods);
    let cases = [
        ("pod not requesting the resource scores 0", pod(json!([])), vec![node("8", &[]), node("4", &[])], vec![0, 0]),
        ("resource requested", pod(json!({"intel.com/foo": "2"})), vec![node("8", &[]), node("4", &[])], vec![2, 5]),
        (
            "existing usage counts",
            pod(json!({"intel.com/foo": "2"})),
            vec![node("8", &[]), node("4", &[pod(json!({"intel.com/foo": "2"}))])],
            vec![2, 10],
        ),
    ];
    for (name, incoming, nodes, want) in cases {
        let mut state = CycleState::new();
        assert!(pl.pre_score(&mut state, &incoming, &[], &Snapshot::default()).is_success());
        let got: Vec<i64> = nodes.iter().map(|n| pl.score(&state, &incoming, n).unwrap()).collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn factory() {
    let h = Handle::for_tests();
    let cases: Vec<(&str, Option<Value>, Result<(), &str>)> = vec![
        ("no args", None, Ok(())),
        ("partial args are defaulted", Some(json!({"scoringStrategy": {"type": "MostAllocated"}})), Ok(())),
        (
            "rtcr",
            Some(json!({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}]}}})),
            Ok(()),
        ),
        (
            "unsupported type",
            Some(json!({"scoringStrategy": {"type": "Foo"}})),
            Err("scoringStrategy.type: Unsupported value: \"Foo\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""),
        ),
        (
            "several errors aggregate",
            Some(json!({"ignoredResourceGroups": ["a/b"], "scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 200}]}})),
            Err("[ignoredResourceGroups[0]: Invalid value: \"a/b\": resource group name can't contain '/', scoringStrategy.resources[0].weight: Invalid value: 200: resource weight of cpu not in valid range (0, 100]]"),
        ),
    ];
    for (name, args, want) in cases {
        let got = new(args.as_ref(), &h).map(|p| assert_eq!(p.name(), "NodeResourcesFit"));
        assert_eq!(got.as_ref().map_err(String::as_str), want.as_ref().map_err(|e| *e), "{name}");
    }
    assert!(new(Some(&json!({"ignoredResource": []})), &h).is_err());
    let pl = new(None, &h).unwrap();
    assert!(
        pl.as_pre_filter().is_some()
            && pl.as_filter().is_some()
            && pl.as_pre_score().is_some()
            && pl.as_score().is_some()
    );
    assert!(!pl.as_score().unwrap().has_normalize());
}

#[test]
fn events() {
    let events: Vec<ClusterEvent> = default_fit().events_to_register().unwrap().iter().map(|e| e.event).collect();
    assert_eq!(
        events,
        vec![
            ClusterEvent::new(EventResource::Pod, ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN),
            ClusterEvent::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE),
            ClusterEvent::new(EventResource::DeviceClass, ActionType::ADD | ActionType::UPDATE),
        ]
    );
}

fn spec_pod(uid: &str, node: &str, nominated: &str, reqs: Value) -> EventObject {
    let mut p = raw_pod(
        json!({"name": uid, "namespace": "default", "uid": uid}),
        json!({"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": reqs}}]}),
    );
    if !nominated.is_empty() {
        p.status = Some(serde_json::from_value(json!({"nominatedNodeName": nominated})).unwrap());
    }
    EventObject::Pod(Arc::new(p))
}

fn target() -> Pod {
    raw_pod(
        json!({"name": "t", "namespace": "default", "uid": "t"}),
        json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "example.com/gpu": "1"}}}]}),
    )
}

#[test]
fn pod_event_hint() {
    use QueueingHint::{Queue, QueueSkip};
    let big = json!({"cpu": "2", "memory": "2Gi", "example.com/gpu": "2"});
    type Case<'a> = (&'a str, Option<EventObject>, Option<EventObject>, Result<QueueingHint, String>);
    let cases: Vec<Case> = vec![
        ("deleted unscheduled pod", Some(spec_pod("o", "", "", big.clone())), None, Ok(QueueSkip)),
        ("deleted bound pod", Some(spec_pod("o", "n1", "", big.clone())), None, Ok(Queue)),
        ("deleted nominated pod", Some(spec_pod("o", "", "n1", big.clone())), None, Ok(Queue)),
        (
            "the target pod itself scaled down",
            Some(spec_pod("t", "", "", big.clone())),
            Some(spec_pod("t", "", "", json!({"cpu": "1"}))),
            Ok(Queue),
        ),
        (
            "unscheduled pod scaled down",
            Some(spec_pod("o", "", "", big.clone())),
            Some(spec_pod("o", "", "", json!({"cpu": "1"}))),
            Ok(QueueSkip),
        ),
        (
            "bound pod released cpu the target requests",
            Some(spec_pod("o", "n1", "", big.clone())),
            Some(spec_pod("o", "n1", "", json!({"cpu": "1", "memory": "2Gi", "example.com/gpu": "2"}))),
            Ok(Queue),
        ),
        (
            "bound pod released an extended resource the target requests",
            Some(spec_pod("o", "n1", "", big.clone())),
            Some(spec_pod("o", "n1", "", json!({"cpu": "2", "memory": "2Gi", "example.com/gpu": "1"}))),
            Ok(Queue),
        ),
        (
            "bound pod released only memory, which the target does not request",
            Some(spec_pod("o", "n1", "", big.clone())),
            Some(spec_pod("o", "n1", "", json!({"cpu": "2", "memory": "1Gi", "example.com/gpu": "2"}))),
            Ok(QueueSkip),
        ),
        (
            "wrong object kind",
            Some(EventObject::Node(Arc::new(node(json!({}))))),
            None,
            Err("expected *v1.Pod, but got *v1.Node".to_string()),
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(is_schedulable_after_pod_event(&target(), old.as_ref(), new.as_ref()), want, "{name}");
    }
}

#[test]
fn node_event_hint() {
    use QueueingHint::{Queue, QueueSkip};
    let n = |v: Value| EventObject::Node(Arc::new(node(v)));
    let roomy = json!({"cpu": "2", "memory": "1Gi", "pods": "10", "example.com/gpu": "1"});
    let cases: Vec<(&str, Option<EventObject>, Option<EventObject>, QueueingHint)> = vec![
        ("added node fits", None, Some(n(roomy.clone())), Queue),
        (
            "added node too small",
            None,
            Some(n(json!({"cpu": "500m", "pods": "10", "example.com/gpu": "1"}))),
            QueueSkip,
        ),
        ("added node without pod capacity", None, Some(n(json!({"cpu": "2", "example.com/gpu": "1"}))), QueueSkip),
        ("update without growth", Some(n(roomy.clone())), Some(n(roomy.clone())), QueueSkip),
        (
            "update growing an unrequested resource",
            Some(n(roomy.clone())),
            Some(n(json!({"cpu": "2", "memory": "2Gi", "pods": "10", "example.com/gpu": "1"}))),
            QueueSkip,
        ),
        (
            "update growing cpu",
            Some(n(json!({"cpu": "1", "pods": "10", "example.com/gpu": "1"}))),
            Some(n(roomy.clone())),
            Queue,
        ),
        (
            "update growing the extended resource",
            Some(n(json!({"cpu": "2", "pods": "10"}))),
            Some(n(roomy.clone())),
            Queue,
        ),
        (
            "update growing pod capacity",
            Some(n(json!({"cpu": "2", "pods": "5", "example.com/gpu": "1"}))),
            Some(n(roomy.clone())),
            Queue,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(is_schedulable_after_node_change(&target(), old.as_ref(), new.as_ref()), Ok(want), "{name}");
    }
}

#[test]
fn device_class_event_hint() {
    use QueueingHint::{Queue, QueueSkip};
    let dc = |name: &str, ext: Option<&str>| {
        let mut v =
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": {}});
        if let Some(e) = ext {
            v["spec"]["extendedResourceName"] = json!(e);
        }
        EventObject::Other(Arc::new(v))
    };
    let wants = |reqs: Value| {
        raw_pod(
            json!({"name": "t", "uid": "t"}),
            json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": reqs}}]}),
        )
    };
    let implicit = wants(json!({"deviceclass.resource.kubernetes.io/gpu-class": "1"}));
    let explicit = wants(json!({"example.com/gpu": "1"}));
    let cases: Vec<(&str, &Pod, Option<EventObject>, EventObject, QueueingHint)> = vec![
        ("added class with the implicit name", &implicit, None, dc("gpu-class", None), Queue),
        ("added class with the explicit name", &explicit, None, dc("other", Some("example.com/gpu")), Queue),
        ("added class providing something else", &explicit, None, dc("other", Some("example.com/fpga")), QueueSkip),
        (
            "update keeping the name",
            &explicit,
            Some(dc("c", Some("example.com/gpu"))),
            dc("c", Some("example.com/gpu")),
            QueueSkip,
        ),
        ("update adding the name", &explicit, Some(dc("c", None)), dc("c", Some("example.com/gpu")), Queue),
        ("update removing the name", &explicit, Some(dc("c", Some("example.com/gpu"))), dc("c", None), QueueSkip),
        (
            "update of a class matching only implicitly",
            &implicit,
            Some(dc("gpu-class", None)),
            dc("gpu-class", Some("x.io/y")),
            QueueSkip,
        ),
    ];
    for (name, p, old, new, want) in cases {
        assert_eq!(is_schedulable_after_device_class_event(p, old.as_ref(), Some(&new)), Ok(want), "{name}");
    }
}

#[test]
fn placement_score_is_the_placements_fill_with_the_group_in_it() {
    use ksched_framework::podgroup::{Placement, PodGroupAssignments, PodGroupInfo, ProposedAssignment};
    use ksched_framework::PlacementScorePlugin;
    let pl = default_fit();
    let alloc = json!({"cpu": "4", "memory": "4Gi", "pods": "10"});
    let busy = Arc::new(node_info(alloc.clone(), &[pod(json!({"cpu": "2", "memory": "1Gi"}))]));
    let idle = Arc::new(node_info(alloc, &[]));
    let member = Arc::new(pod(json!({"cpu": "1", "memory": "1Gi"})));
    let group = PodGroupInfo { namespace: "ns".into(), name: "g".into(), unscheduled_pods: vec![] };
    let assignments = |nodes: Vec<Arc<NodeInfo>>| PodGroupAssignments {
        placement: Arc::new(Placement { name: "p".into(), nodes, fallback: false }),
        proposed: vec![
            ProposedAssignment { pod: member.clone(), node: "n".into() },
            ProposedAssignment { pod: member.clone(), node: "n".into() },
        ],
    };
    // cpu (2 + 2) / 8 = 50, memory (1 + 2) / 8 Gi = 37: mean 43.
    let both = pl.score_placement(&group, &assignments(vec![busy.clone(), idle.clone()]), &Snapshot::default());
    assert_eq!(both.unwrap(), 43);
    // The busy node alone: cpu 4/4 = 100, memory 3/4 = 75.
    assert_eq!(pl.score_placement(&group, &assignments(vec![busy]), &Snapshot::default()).unwrap(), 87);
    // The idle node alone: cpu 2/4 = 50, memory 2/4 = 50.
    assert_eq!(pl.score_placement(&group, &assignments(vec![idle]), &Snapshot::default()).unwrap(), 50);
}
