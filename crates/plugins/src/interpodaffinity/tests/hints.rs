//! Queueing hints and event registration (upstream's plugin_test.go).

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::{ActionType, ClusterEvent, EventResource, Plugin, QueueingHint};
use serde_json::json;

use super::*;
use crate::helper::testing::{node_obj, pod_obj};
use crate::interpodaffinity::{is_schedulable_after_node_change, is_schedulable_after_pod_change};

use QueueingHint::{Queue, QueueSkip};

/// (name, pending pod, old object, new object, want).
type PodCase = (&'static str, Pod, Option<Pod>, Option<Pod>, QueueingHint);

#[test]
fn pod_change_hints() {
    let target_aff =
        || make_pod().uid("p").name("p").pod_affinity_in("service", "region", &["securityscan", "value2"], Required);
    let target_anti = || {
        make_pod().uid("p").name("p").pod_anti_affinity_in("service", "region", &["securityscan", "value2"], Required)
    };
    let other = || make_pod().uid("other").node("fake-node");
    let unscheduled = || make_pod().uid("other");
    let existing_anti = || {
        make_pod().node("fake-node").pod_anti_affinity_in("service", "region", &["securityscan", "value2"], Required)
    };
    let cases: Vec<PodCase> = vec![
        (
            "add a pod which matches the pod affinity",
            target_aff().obj(),
            None,
            Some(other().label("service", "securityscan").obj()),
            Queue,
        ),
        (
            "add an un-scheduled pod",
            target_aff().obj(),
            None,
            Some(unscheduled().label("service", "securityscan").obj()),
            QueueSkip,
        ),
        (
            "add a pod which doesn't match the pod affinity",
            target_aff().obj(),
            None,
            Some(other().label("aaa", "a").obj()),
            QueueSkip,
        ),
        (
            "update a pod from non-match to match pod affinity",
            target_aff().obj(),
            Some(other().label("aaa", "a").obj()),
            Some(other().label("service", "securityscan").obj()),
            Queue,
        ),
        (
            "the updating pod matches the affinity both before and after",
            target_aff().obj(),
            Some(other().label("service", "value2").obj()),
            Some(other().label("service", "securityscan").obj()),
            QueueSkip,
        ),
        (
            "update an un-scheduled pod",
            target_aff().obj(),
            Some(unscheduled().label("aaa", "a").obj()),
            Some(unscheduled().label("service", "securityscan").obj()),
            QueueSkip,
        ),
        (
            "update a pod from match to non-match the pod affinity",
            target_aff().obj(),
            Some(other().label("service", "securityscan").obj()),
            Some(other().label("aaa", "a").obj()),
            QueueSkip,
        ),
        (
            "update a pod from match to non-match - multiple terms",
            make_pod()
                .uid("p")
                .name("p")
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_affinity_exists("bbb", "hostname", Required)
                .obj(),
            Some(other().label("aaa", "a").obj()),
            Some(other().label("service", "securityscan").obj()),
            QueueSkip,
        ),
        (
            "update a pod from non-match to match - multiple terms",
            make_pod()
                .uid("p")
                .name("p")
                .pod_affinity_exists("aaa", "hostname", Required)
                .pod_affinity_exists("bbb", "hostname", Required)
                .obj(),
            Some(other().label("aaa", "a").obj()),
            Some(other().label("aaa", "").label("bbb", "").obj()),
            Queue,
        ),
        (
            "updated pod is the target pod",
            make_pod().uid("p").name("p").label("foo", "baz").obj(),
            Some(make_pod().uid("p").name("p").label("foo", "bar").obj()),
            Some(make_pod().uid("p").name("p").label("foo", "baz").obj()),
            Queue,
        ),
        (
            "update from matching the anti-affinity to not matching",
            target_anti().obj(),
            Some(other().label("service", "securityscan").obj()),
            Some(other().label("service", "aaaa").obj()),
            Queue,
        ),
        (
            "update from not matching the anti-affinity to matching",
            target_anti().obj(),
            Some(other().label("service", "bbb").obj()),
            Some(other().label("service", "securityscan").obj()),
            QueueSkip,
        ),
        (
            "delete a pod which doesn't match the anti-affinity",
            target_anti().obj(),
            Some(other().label("aaa", "a").obj()),
            None,
            QueueSkip,
        ),
        (
            "delete a pod which matches the anti-affinity",
            target_anti().obj(),
            Some(other().label("service", "securityscan").obj()),
            None,
            Queue,
        ),
        (
            "delete a pod with anti-affinity matching the pending pod",
            make_pod().name("p").label("service", "securityscan").obj(),
            Some(existing_anti().obj()),
            None,
            Queue,
        ),
        (
            "delete a pod with anti-affinity not matching the pending pod",
            make_pod().name("p").label("service", "foo").obj(),
            Some(existing_anti().obj()),
            None,
            QueueSkip,
        ),
        (
            "delete a pod neither matching nor matched",
            make_pod()
                .name("p")
                .pod_anti_affinity_in("service", "region", &["securityscan", "value2"], Required)
                .label("service", "foo")
                .obj(),
            Some(existing_anti().label("service", "foo").obj()),
            None,
            QueueSkip,
        ),
        (
            "delete a nominated pod which doesn't match the anti-affinity",
            make_pod().name("p").pod_anti_affinity_in("service", "region", &["securityscan", "value2"], Required).obj(),
            Some(make_pod().nominated("fake-node").label("aaa", "a").obj()),
            None,
            QueueSkip,
        ),
        (
            "delete a nominated pod which matches the anti-affinity",
            make_pod().name("p").pod_anti_affinity_in("service", "region", &["securityscan", "value2"], Required).obj(),
            Some(make_pod().nominated("fake-node").label("service", "securityscan").obj()),
            None,
            Queue,
        ),
        (
            "an empty namespace selector on the pending pod's term matches pods in any namespace",
            make_pod()
                .uid("p")
                .raw_term(
                    false,
                    Required,
                    json!({"labelSelector": sel_in("app", &["db"]), "namespaceSelector": {}, "topologyKey": "zone"}),
                )
                .obj(),
            None,
            Some(other().namespace("elsewhere").label("app", "db").obj()),
            Queue,
        ),
    ];
    for (name, pod, old, new, want) in cases {
        let old = old.map(pod_obj);
        let new = new.map(pod_obj);
        assert_eq!(is_schedulable_after_pod_change(&pod, old.as_ref(), new.as_ref()), Ok(want), "{name}");
    }
}

#[test]
fn node_change_hints() {
    let aff = || make_pod().name("p").pod_affinity_in("service", "zone", &["securityscan", "value2"], Required).obj();
    let anti = || {
        make_pod().name("p").raw_term(true, Required, term(json!({"matchLabels": {"another": "label"}}), "zone")).obj()
    };
    let cases: Vec<(&str, Pod, Option<Node>, Node, QueueingHint)> = vec![
        ("add a node with the affinity topology key", aff(), None, node("node-a", &[("zone", "zone1")]), Queue),
        (
            "add a node without the affinity topology key",
            make_pod().name("p").pod_affinity_in("service", "region", &["securityscan", "value2"], Required).obj(),
            None,
            node("node-a", &[("zone", "zone1")]),
            QueueSkip,
        ),
        (
            "update a label that is not the topology key",
            aff(),
            Some(node("node-a", &[("aaa", "a")])),
            node("node-a", &[("aaa", "b")]),
            QueueSkip,
        ),
        (
            "add an unrelated label",
            aff(),
            Some(node("node-a", &[("zone", "zone1")])),
            node("node-a", &[("zone", "zone1"), ("unrelated-label", "unrelated")]),
            QueueSkip,
        ),
        (
            "change the affinity topology value",
            aff(),
            Some(node("node-a", &[("zone", "zone1")])),
            node("node-a", &[("zone", "zone2")]),
            Queue,
        ),
        (
            "gain the affinity topology key",
            aff(),
            Some(node("node-a", &[("aaa", "a")])),
            node("node-a", &[("zone", "zone1")]),
            Queue,
        ),
        ("add a node with the anti-affinity topology key", anti(), None, node("node-a", &[("zone", "zone1")]), Queue),
        ("add a node without the anti-affinity topology key", anti(), None, node("node-a", &[]), Queue),
        (
            "add an unrelated label (anti-affinity)",
            anti(),
            Some(node("node-a", &[("zone", "zone1")])),
            node("node-a", &[("zone", "zone1"), ("unrelated-label", "unrelated")]),
            QueueSkip,
        ),
        (
            "change the anti-affinity topology value",
            anti(),
            Some(node("node-a", &[("zone", "zone1")])),
            node("node-a", &[("zone", "zone2")]),
            Queue,
        ),
        (
            "gain the anti-affinity topology key",
            anti(),
            Some(node("node-a", &[("aaa", "a")])),
            node("node-a", &[("zone", "zone1")]),
            QueueSkip,
        ),
        (
            "lose the anti-affinity topology key",
            anti(),
            Some(node("node-a", &[("zone", "zone1")])),
            node("node-a", &[("aaa", "a")]),
            Queue,
        ),
        (
            "a pod without pod affinity ignores new nodes",
            make_pod().obj(),
            None,
            node("node-a", &[("zone", "z")]),
            QueueSkip,
        ),
    ];
    for (name, pod, old, new, want) in cases {
        let old = old.map(node_obj);
        let new = node_obj(new);
        assert_eq!(is_schedulable_after_node_change(&pod, old.as_ref(), Some(&new)), Ok(want), "{name}");
    }
}

#[test]
fn hint_errors() {
    let pod = make_pod().obj();
    let n = node_obj(node("n", &[]));
    let p = pod_obj(make_pod().obj());
    assert_eq!(
        is_schedulable_after_pod_change(&pod, None, Some(&n)).unwrap_err(),
        "expected *v1.Pod, but got *v1.Node"
    );
    assert!(is_schedulable_after_node_change(&pod, None, Some(&p)).is_err());
    assert!(is_schedulable_after_node_change(&pod, Some(&n), None).is_err());
    // Unparsable terms of the pending pod: the hint errs (which the queue treats as Queue).
    let bad = make_pod()
        .raw_term(false, Required, term(json!({"matchExpressions": [{"key": "a", "operator": "In"}]}), "zone"))
        .obj();
    let assigned = pod_obj(make_pod().node("n").obj());
    assert!(is_schedulable_after_pod_change(&bad, None, Some(&assigned)).is_err());
    assert!(is_schedulable_after_node_change(&bad, None, Some(&n)).is_err());
}

#[test]
fn events_to_register() {
    let events = plugin().events_to_register().expect("registers events");
    let got: Vec<ClusterEvent> = events.iter().map(|e| e.event).collect();
    assert_eq!(
        got,
        vec![
            ClusterEvent::new(EventResource::Pod, ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE),
            ClusterEvent::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_LABEL),
        ]
    );
    assert!(events.iter().all(|e| e.hint.is_some()));
    let pending = make_pod().pod_affinity_in("app", "zone", &["db"], Required).obj();
    let added = pod_obj(make_pod().node("n").label("app", "db").obj());
    assert_eq!((events[0].hint.as_ref().unwrap())(&pending, None, Some(&added)), Ok(Queue));
}
