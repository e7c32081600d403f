//! EnqueueExtensions and queueing hints, after upstream's plugin_test.go.

use std::sync::Arc;

use ksched_framework::listers::MemoryLister;
use ksched_framework::node::Node;
use ksched_framework::{ActionType, ClusterEvent, EventObject, EventResource, Plugin, QueueingHint};

use super::*;

use QueueingHint::{Queue as Q, QueueSkip as Skip};

/// (name, waiting pod, old object, new object, expected hint).
type Case<T> = (&'static str, PodB, Option<T>, Option<T>, QueueingHint);

fn node_obj(spec: &str) -> EventObject {
    EventObject::Node(Arc::new(node(spec)))
}

fn pod_obj(p: PodB) -> EventObject {
    EventObject::Pod(Arc::new(p.obj()))
}

fn with_taint(spec: &str, key: &str) -> EventObject {
    let mut n: Node = node(spec);
    n.spec.get_or_insert_with(Default::default).taints =
        Some(vec![serde_json::from_value(json!({"key": key, "value": "bbb", "effect": "NoSchedule"})).unwrap()]);
    EventObject::Node(Arc::new(n))
}

#[test]
fn registers_upstream_events() {
    let pl = plugin_list(&[], MemoryLister::default());
    let events: Vec<ClusterEvent> = pl.events_to_register().unwrap().into_iter().map(|e| e.event).collect();
    assert_eq!(
        events,
        [
            ClusterEvent::new(
                EventResource::Pod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::UPDATE_POD_TOLERATION | ActionType::DELETE
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::DELETE | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_TAINT
            ),
        ]
    );
}

#[test]
fn node_change_hints() {
    let zone = || pod("p").spread(tsc(1, "zone", DNS, exists("foo")));
    let zone_node = || pod("p").spread(tsc(1, "zone", DNS, exists("foo"))).spread(tsc(1, "node", DNS, exists("foo")));
    let cases: Vec<Case<EventObject>> = vec![
        (
            "node updates label which matches topologyKey",
            zone(),
            Some(node_obj("node-a zone=zone1")),
            Some(node_obj("node-a zone=zone2")),
            Q,
        ),
        (
            "node that doesn't match topologySpreadConstraints updates non-related label",
            zone(),
            Some(node_obj("node-a foo=bar1")),
            Some(node_obj("node-a foo=bar2")),
            Skip,
        ),
        (
            "node that match topologySpreadConstraints adds non-related label",
            zone_node(),
            Some(node_obj("node-a zone=zone1 node=node1 foo=bar")),
            Some(node_obj("node-a zone=zone1 node=node1")),
            Skip,
        ),
        ("create node with non-related labels", zone(), None, Some(node_obj("node-a foo=bar")), Skip),
        ("create node with related labels", zone(), None, Some(node_obj("node-a zone=zone1")), Q),
        ("delete node with non-related labels", zone(), Some(node_obj("node-a foo=bar")), None, Skip),
        ("delete node with related labels", zone(), Some(node_obj("node-a zone=zone1")), None, Q),
        (
            "add node with related labels that only match one of topologySpreadConstraints",
            zone_node(),
            None,
            Some(node_obj("node-a zone=zone1")),
            Skip,
        ),
        (
            "add node with related labels that match all topologySpreadConstraints",
            zone_node(),
            None,
            Some(node_obj("node-a zone=zone1 node=node1")),
            Q,
        ),
        (
            "update node with related labels that only match one of topologySpreadConstraints",
            zone_node(),
            Some(node_obj("node-a zone=zone1")),
            Some(node_obj("node-a zone=zone1")),
            Skip,
        ),
        (
            "update node with related labels that match all topologySpreadConstraints",
            zone_node(),
            Some(node_obj("node-a zone=zone1 node=node1")),
            Some(node_obj("node-a zone=zone1 node=node2")),
            Q,
        ),
        (
            "update node with different taints that match all topologySpreadConstraints",
            zone_node(),
            Some(with_taint("node-a zone=zone1 node=node1", "aaa")),
            Some(with_taint("node-a zone=zone1 node=node1", "ccc")),
            Q,
        ),
        (
            "update node with different taints that only match one of topologySpreadConstraints",
            zone_node(),
            Some(with_taint("node-a node=node1", "aaa")),
            Some(with_taint("node-a node=node1", "ccc")),
            Skip,
        ),
        (
            "node losing a topology key is queued",
            zone_node(),
            Some(node_obj("node-a zone=zone1 node=node1")),
            Some(node_obj("node-a zone=zone1")),
            Q,
        ),
    ];
    let pl = plugin_list(&[], MemoryLister::default());
    for (name, p, old, new, want) in cases {
        let got = pl.is_schedulable_after_node_change(&p.obj(), old.as_ref(), new.as_ref());
        assert_eq!(got, Ok(want), "{name}");
    }
    let err = pl.is_schedulable_after_node_change(&zone().obj(), None, Some(&pod_obj(pod("x"))));
    assert_eq!(err, Err("expected *v1.Node, but got *v1.Pod".to_string()));
}

#[test]
fn pod_change_hints() {
    let target = || pod("p").label("foo", "").spread(tsc(1, "zone", DNS, exists("foo")));
    let two = |zone_policy: Option<&str>| {
        let mut z = tsc(1, "zone", DNS, exists("foo"));
        if let Some(p) = zone_policy {
            z = z.taints_policy(p);
        }
        pod("p").label("foo", "").spread(z).spread(tsc(1, "node", DNS, exists("bar")))
    };
    let p2 = || pod("p2");
    let cases: Vec<Case<PodB>> = vec![
        ("add pod with labels match topologySpreadConstraints selector", target(), None, Some(p2().node("fake-node").label("foo", "")), Q),
        ("add un-scheduled pod", target(), None, Some(p2().label("foo", "")), Skip),
        ("update un-scheduled pod", target(), Some(p2().label("bar", "")), Some(p2().label("foo", "")), Skip),
        ("delete un-scheduled pod", target(), Some(p2().label("foo", "")), None, Skip),
        (
            "add pod with different namespace",
            target(),
            None,
            Some(p2().node("fake-node").ns("fake-namespace").label("foo", "")),
            Skip,
        ),
        ("add pod with labels don't match topologySpreadConstraints selector", target(), None, Some(p2().node("fake-node").label("bar", "")), Skip),
        ("delete pod with labels that match topologySpreadConstraints selector", target(), Some(p2().node("fake-node").label("foo", "")), None, Q),
        (
            "delete nominated pod with labels that don't match topologySpreadConstraints selector",
            target(),
            Some(p2().nominated("fake-node").label("bar", "")),
            None,
            Skip,
        ),
        (
            "delete nominated pod with labels that match topologySpreadConstraints selector",
            target(),
            Some(p2().nominated("fake-node").label("foo", "")),
            None,
            Q,
        ),
        ("delete pod with labels that don't match topologySpreadConstraints selector", target(), Some(p2().node("fake-node").label("bar", "")), None, Skip),
        (
            "update pod's non-related label",
            target(),
            Some(p2().node("fake-node").label("foo", "").label("bar", "bar1")),
            Some(p2().node("fake-node").label("foo", "").label("bar", "bar2")),
            Skip,
        ),
        (
            "add pod's label that matches topologySpreadConstraints selector",
            target(),
            Some(p2().node("fake-node")),
            Some(p2().node("fake-node").label("foo", "")),
            Q,
        ),
        (
            "delete pod label that matches topologySpreadConstraints selector",
            target(),
            Some(p2().node("fake-node").label("foo", "")),
            Some(p2().node("fake-node")),
            Q,
        ),
        (
            "change pod's label that matches topologySpreadConstraints selector",
            target(),
            Some(p2().node("fake-node").label("foo", "foo1")),
            Some(p2().node("fake-node").label("foo", "foo2")),
            Skip,
        ),
        (
            "add pod's label that matches topologySpreadConstraints selector with multi topologySpreadConstraints",
            two(None),
            Some(p2().node("fake-node").label("foo", "")),
            Some(p2().node("fake-node").label("foo", "").label("bar", "bar2")),
            Q,
        ),
        (
            "change pod's label that doesn't match topologySpreadConstraints selector with multi topologySpreadConstraints",
            two(None),
            Some(p2().node("fake-node").label("foo", "")),
            Some(p2().node("fake-node").label("foo", "").label("baz", "")),
            Skip,
        ),
        (
            "change pod's label that match topologySpreadConstraints selector with multi topologySpreadConstraints",
            two(None),
            Some(p2().node("fake-node").label("foo", "").label("bar", "")),
            Some(p2().node("fake-node").label("foo", "").label("bar", "bar2")),
            Skip,
        ),
        (
            "the unschedulable Pod has topologySpreadConstraint with NodeTaintsPolicy:Honor and has got a new toleration",
            two(Some("Honor")),
            Some(pod("p").label("foo", "")),
            Some(pod("p").label("foo", "").toleration("node.kubernetes.io/unschedulable")),
            Q,
        ),
        (
            "the unschedulable Pod has topologySpreadConstraint without NodeTaintsPolicy:Honor and has got a new toleration",
            two(Some("Ignore")),
            Some(pod("p").label("foo", "")),
            Some(pod("p").label("foo", "").toleration("node.kubernetes.io/unschedulable")),
            Skip,
        ),
        (
            "the unschedulable Pod has topologySpreadConstraint and has got a new label matching the selector of the constraint",
            two(Some("Ignore")),
            Some(pod("p")),
            Some(pod("p").label("foo", "")),
            Q,
        ),
        (
            "the unschedulable Pod has topologySpreadConstraint and has got a new unrelated label",
            two(Some("Ignore")),
            Some(pod("p")),
            Some(pod("p").label("unrelated", "")),
            Skip,
        ),
    ];
    let pl = plugin_list(&[], MemoryLister::default());
    for (name, p, old, new, want) in cases {
        let (old, new) = (old.map(pod_obj), new.map(pod_obj));
        let got = pl.is_schedulable_after_pod_change(&p.obj(), old.as_ref(), new.as_ref());
        assert_eq!(got, Ok(want), "{name}");
    }
}

#[test]
fn hints_use_default_constraints() {
    // Default hard constraints apply to pods without their own; their selector comes from the
    // Service selecting the pod.
    let pl = plugin_list(&[tsc(1, "zone", DNS, None)], services(&[&[("app", "web")]]));
    let waiting = pod("p").label("app", "web").obj();
    let added = pod_obj(pod("q").node("n").label("app", "web"));
    assert_eq!(pl.is_schedulable_after_pod_change(&waiting, None, Some(&added)), Ok(Q));
    let other = pod_obj(pod("q").node("n").label("app", "db"));
    assert_eq!(pl.is_schedulable_after_pod_change(&waiting, None, Some(&other)), Ok(Skip));
    assert_eq!(pl.is_schedulable_after_node_change(&waiting, None, Some(&node_obj("n zone=z1"))), Ok(Q));
    assert_eq!(pl.is_schedulable_after_node_change(&waiting, None, Some(&node_obj("n rack=r1"))), Ok(Skip));
}
