//! The cache's hint validity checks and flush reasons (upstream `batch_test.go`'s cases and
//! one case per flush reason), and the heap order of the cached nodes.

use std::cell::RefCell;

use super::*;

#[derive(Default)]
struct Recorded {
    attempts: RefCell<Vec<BatchAttempt>>,
    flushes: RefCell<Vec<FlushReason>>,
}

impl BatchRecorder for Recorded {
    fn attempt(&self, result: BatchAttempt) {
        self.attempts.borrow_mut().push(result);
    }
    fn flushed(&self, reason: FlushReason) {
        self.flushes.borrow_mut().push(reason);
    }
}

fn sig(s: &str) -> PodSignature {
    PodSignature::from_bytes(s.as_bytes())
}

/// Nodes in the order they are to be popped.
fn nodes(names: &[&str]) -> SortedScoredNodes {
    let n = names.len() as i64;
    SortedScoredNodes::new(names.iter().enumerate().map(|(i, s)| (n - i as i64, 0, s.to_string())).collect())
}

/// A first pod stored `chosen` with `others` at cycle 1; returns the cache and the recorder.
fn after_first(signature: Option<&str>, chosen: &str, others: &[&str], t0: Instant) -> (OpportunisticBatch, Recorded) {
    let mut b = OpportunisticBatch::new();
    let rec = Recorded::default();
    let s = signature.map(sig);
    assert_eq!(b.get_node_hint(s.as_ref(), 1, t0, |_| unreachable!("no state yet"), &rec), None);
    b.store_schedule_results(s.as_ref(), None, chosen, others.len(), || nodes(others), 1, t0, &rec);
    rec.attempts.borrow_mut().clear();
    rec.flushes.borrow_mut().clear();
    (b, rec)
}

struct Case {
    name: &'static str,
    first_sig: Option<&'static str>,
    first_others: &'static [&'static str],
    second_sig: Option<&'static str>,
    second_cycle: u64,
    /// How late the second pod comes.
    delay: Duration,
    /// What node n3 (chosen first) says about the second pod.
    last_node: LastNode,
    want_hint: Option<&'static str>,
    /// Flushes counted while getting the second hint.
    want_flush: Option<FlushReason>,
}

const CASES: &[Case] = &[
    Case {
        name: "a second pod with the same signature gets the next node",
        first_sig: Some("sig"),
        first_others: &["n1", "n2"],
        second_sig: Some("sig"),
        second_cycle: 2,
        delay: Duration::ZERO,
        last_node: LastNode::Rejects,
        want_hint: Some("n1"),
        want_flush: None,
    },
    Case {
        name: "a different signature gets no hint",
        first_sig: Some("sig"),
        first_others: &["n1"],
        second_sig: Some("sig2"),
        second_cycle: 2,
        delay: Duration::ZERO,
        last_node: LastNode::Rejects,
        want_hint: None,
        want_flush: Some(FlushReason::PodIncompatible),
    },
    Case {
        name: "an unsigned second pod gets no hint",
        first_sig: Some("sig"),
        first_others: &["n1"],
        second_sig: None,
        second_cycle: 2,
        delay: Duration::ZERO,
        last_node: LastNode::Rejects,
        want_hint: None,
        want_flush: Some(FlushReason::PodIncompatible),
    },
    Case {
        name: "pods that are not one per node get no hint",
        first_sig: Some("sig"),
        first_others: &["n1"],
        second_sig: Some("sig"),
        second_cycle: 2,
        delay: Duration::ZERO,
        last_node: LastNode::Accepts,
        want_hint: None,
        want_flush: Some(FlushReason::NodeNotFull),
    },
    Case {
        name: "the last chosen node is gone",
        first_sig: Some("sig"),
        first_others: &["n1"],
        second_sig: Some("sig"),
        second_cycle: 2,
        delay: Duration::ZERO,
        last_node: LastNode::Missing,
        want_hint: None,
        want_flush: Some(FlushReason::NodeMissing),
    },
    Case {
        name: "another cycle came in between (another profile's pod)",
        first_sig: Some("sig"),
        first_others: &["n1"],
        second_sig: Some("sig"),
        second_cycle: 3,
        delay: Duration::ZERO,
        last_node: LastNode::Rejects,
        want_hint: None,
        want_flush: Some(FlushReason::PodSkipped),
    },
    Case {
        name: "the cache is older than 500 ms",
        first_sig: Some("sig"),
        first_others: &["n1"],
        second_sig: Some("sig"),
        second_cycle: 2,
        delay: Duration::from_millis(501),
        last_node: LastNode::Rejects,
        want_hint: None,
        want_flush: Some(FlushReason::Expired),
    },
    Case {
        name: "exactly 500 ms old is still fresh",
        first_sig: Some("sig"),
        first_others: &["n1"],
        second_sig: Some("sig"),
        second_cycle: 2,
        delay: MAX_BATCH_AGE,
        last_node: LastNode::Rejects,
        want_hint: Some("n1"),
        want_flush: None,
    },
    Case {
        name: "an empty list leaves nothing to hint",
        first_sig: Some("sig"),
        first_others: &[],
        second_sig: Some("sig"),
        second_cycle: 2,
        delay: Duration::ZERO,
        last_node: LastNode::Rejects,
        want_hint: None,
        want_flush: None,
    },
    Case {
        name: "an unsigned first pod leaves nothing to hint",
        first_sig: None,
        first_others: &["n1"],
        second_sig: Some("sig"),
        second_cycle: 2,
        delay: Duration::ZERO,
        last_node: LastNode::Rejects,
        want_hint: None,
        want_flush: None,
    },
];

#[test]
fn hint_validity_and_flush_reasons() {
    for c in CASES {
        let t0 = Instant::now();
        let (mut b, rec) = after_first(c.first_sig, "n3", c.first_others, t0);
        let mut asked = None;
        let hint = b.get_node_hint(
            c.second_sig.map(sig).as_ref(),
            c.second_cycle,
            t0 + c.delay,
            |n| {
                asked = Some(n.to_string());
                c.last_node
            },
            &rec,
        );
        assert_eq!(hint.as_deref(), c.want_hint, "{}: hint", c.name);
        assert_eq!(rec.flushes.borrow().first().copied(), c.want_flush, "{}: flush", c.name);
        assert!(rec.flushes.borrow().len() <= 1, "{}: one flush at most", c.name);
        let want_attempt = if hint.is_some() { vec![] } else { vec![BatchAttempt::NoHint] };
        assert_eq!(*rec.attempts.borrow(), want_attempt, "{}: attempts", c.name);
        // The last node is only consulted once everything else matched.
        let consulted = matches!(c.want_flush, None | Some(FlushReason::NodeMissing | FlushReason::NodeNotFull))
            && !c.first_others.is_empty()
            && c.first_sig.is_some();
        assert_eq!(asked.is_some(), consulted, "{}: last node consulted", c.name);
        if consulted {
            assert_eq!(asked.as_deref(), Some("n3"), "{}", c.name);
        }
    }
}

#[test]
fn the_store_counts_the_attempt_and_keeps_or_replaces_the_cache() {
    let t0 = Instant::now();
    // Hint used: the rest of the list stays for the next pod.
    let (mut b, rec) = after_first(Some("sig"), "n3", &["n1", "n2"], t0);
    let s = sig("sig");
    let hint = b.get_node_hint(Some(&s), 2, t0, |_| LastNode::Rejects, &rec);
    assert_eq!(hint.as_deref(), Some("n1"));
    b.store_schedule_results(Some(&s), hint.as_deref(), "n1", 0, || unreachable!("kept"), 2, t0, &rec);
    assert_eq!(b.cached_nodes(), 1);
    assert_eq!(b.batched_pods(), 1);
    let hint =
        b.get_node_hint(Some(&s), 3, t0, |n| if n == "n1" { LastNode::Rejects } else { LastNode::Accepts }, &rec);
    assert_eq!(hint.as_deref(), Some("n2"));
    assert_eq!(*rec.attempts.borrow(), vec![BatchAttempt::HintUsed]);

    // Hint not used (the hinted node failed its filters): the new cycle's list replaces it.
    let (mut b, rec) = after_first(Some("sig"), "n3", &["n1", "n2"], t0);
    let hint = b.get_node_hint(Some(&s), 2, t0, |_| LastNode::Rejects, &rec);
    b.store_schedule_results(Some(&s), hint.as_deref(), "n7", 2, || nodes(&["n8", "n9"]), 2, t0, &rec);
    assert_eq!(*rec.attempts.borrow(), vec![BatchAttempt::HintNotUsed]);
    assert_eq!(
        b.get_node_hint(
            Some(&s),
            3,
            t0,
            |n| {
                assert_eq!(n, "n7");
                LastNode::Rejects
            },
            &rec
        )
        .as_deref(),
        Some("n8")
    );

    // A single feasible node (nothing else to cache) and an unsigned pod flush the cache.
    let (mut b, rec) = after_first(Some("sig"), "n3", &["n1"], t0);
    b.store_schedule_results(Some(&s), None, "n5", 0, || unreachable!("nothing to cache"), 2, t0, &rec);
    assert_eq!(*rec.flushes.borrow(), vec![FlushReason::EmptyList]);
    assert_eq!(b.cached_nodes(), 0);
    let (mut b, rec) = after_first(Some("sig"), "n3", &["n1"], t0);
    b.store_schedule_results(None, None, "n5", 3, || unreachable!("unsigned"), 2, t0, &rec);
    assert_eq!(*rec.flushes.borrow(), vec![FlushReason::PodNotBatchable]);
    assert_eq!(b.cached_nodes(), 0);
}

#[test]
fn unusable_state_is_counted_again_until_a_store_replaces_it() {
    // As upstream: the second pod has another signature and then fails (no store), so the third
    // pod finds the old state one cycle too late.
    let t0 = Instant::now();
    let (mut b, rec) = after_first(Some("sig"), "n3", &["n1"], t0);
    assert_eq!(b.get_node_hint(Some(&sig("other")), 2, t0, |_| LastNode::Rejects, &rec), None);
    assert_eq!(b.get_node_hint(Some(&sig("sig")), 3, t0, |_| LastNode::Rejects, &rec), None);
    assert_eq!(*rec.flushes.borrow(), vec![FlushReason::PodIncompatible, FlushReason::PodSkipped]);
}

#[test]
fn pops_follow_go_heap_order() {
    // Equal scores: Go's heap hands out the first entry, then the last one moves to the root.
    let mut h = SortedScoredNodes::new((0..5).map(|i| (7, 0, i)).collect());
    let order: Vec<i32> = std::iter::from_fn(|| h.pop()).collect();
    assert_eq!(order, vec![0, 4, 3, 2, 1]);
    // Distinct scores come out highest first; the randomizer breaks ties.
    let mut h = SortedScoredNodes::new(vec![(1, 0, "a"), (9, 0, "b"), (3, 0, "c"), (9, 5, "d"), (4, 0, "e")]);
    let order: Vec<&str> = std::iter::from_fn(|| h.pop()).collect();
    assert_eq!(order, vec!["d", "b", "e", "c", "a"]);
    // Mapping keeps the order.
    let mut h = SortedScoredNodes::new(vec![(1, 0, 0usize), (5, 0, 1), (3, 0, 2)]).map(|i| ["x", "y", "z"][i]);
    assert_eq!(h.pop(), Some("y"));
    assert_eq!(h.pop(), Some("z"));
    assert_eq!(h.len(), 1);
}

// ---- through a profile: which plugins sign, and the hint check with real filters ----

mod profile {
    use std::sync::Arc;

    use super::super::signature;
    use crate::cycle_state::CycleState;
    use crate::interface::*;
    use crate::node::Node;
    use crate::node_info::NodeInfo;
    use crate::plugin_config::{PluginRef, PluginSet, Plugins};
    use crate::pod::Pod;
    use crate::pod_info::PodInfo;
    use crate::registry::Registry;
    use crate::runtime::Framework;
    use crate::snapshot::Snapshot;
    use crate::status::Status;
    use crate::{Features, Handle};

    /// Queue sort and bind, which every profile needs.
    struct Basics;
    impl Plugin for Basics {
        fn name(&self) -> &str {
            "Basics"
        }
        fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
            Some(self)
        }
        fn as_bind(&self) -> Option<&dyn BindPlugin> {
            Some(self)
        }
    }
    impl QueueSortPlugin for Basics {
        fn less(&self, _: &QueuedPodInfo, _: &QueuedPodInfo) -> bool {
            false
        }
    }
    impl BindPlugin for Basics {
        fn bind<'a>(&'a self, _: &'a CycleState, _: &'a PodInfo, _: &'a str) -> futures::future::BoxFuture<'a, Status> {
            Box::pin(async { Status::success() })
        }
    }

    /// One pod per node; signs the pod's labels and refuses pods labelled `unbatchable`.
    struct OnePerNode;
    impl Plugin for OnePerNode {
        fn name(&self) -> &str {
            "OnePerNode"
        }
        fn as_filter(&self) -> Option<&dyn FilterPlugin> {
            Some(self)
        }
        fn as_sign(&self) -> Option<&dyn SignPlugin> {
            Some(self)
        }
    }
    impl FilterPlugin for OnePerNode {
        fn filter(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
            if node.pods.is_empty() {
                Status::success()
            } else {
                Status::unschedulable("taken")
            }
        }
    }
    impl SignPlugin for OnePerNode {
        fn sign_pod(&self, pod: &PodInfo, sig: &mut super::SignatureBuilder) -> Status {
            if pod.pod.metadata.labels.get("unbatchable").is_some() {
                return Status::unschedulable("not signable");
            }
            sig.fragment(signature::LABELS, |w| signature::labels(&pod.pod, w));
            Status::success()
        }
    }

    /// A filter that does not sign.
    struct Unsigned;
    impl Plugin for Unsigned {
        fn name(&self) -> &str {
            "Unsigned"
        }
        fn as_filter(&self) -> Option<&dyn FilterPlugin> {
            Some(self)
        }
    }
    impl FilterPlugin for Unsigned {
        fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
            Status::success()
        }
    }

    fn framework(filters: &[&str], batching: bool) -> Framework {
        let mut r = Registry::new();
        r.register("Basics", |_, _| Ok(Arc::new(Basics) as Arc<dyn Plugin>)).unwrap();
        r.register("OnePerNode", |_, _| Ok(Arc::new(OnePerNode) as Arc<dyn Plugin>)).unwrap();
        r.register("Unsigned", |_, _| Ok(Arc::new(Unsigned) as Arc<dyn Plugin>)).unwrap();
        let set = |names: &[&str]| PluginSet {
            enabled: names.iter().map(|n| PluginRef { name: n.to_string(), weight: None }).collect(),
            disabled: vec![],
        };
        let plugins = Plugins {
            queue_sort: set(&["Basics"]),
            bind: set(&["Basics"]),
            filter: set(filters),
            ..Default::default()
        };
        let features = Features { opportunistic_batching: batching, ..Features::default() };
        Framework::new(&r, "p", &plugins, &[], Handle { features, ..Handle::for_tests() }).unwrap()
    }

    fn pod(name: &str, labels: serde_json::Value) -> PodInfo {
        let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": labels},
            "spec": {"schedulerName": "p", "containers": [{"name": "c"}]}}))
        .unwrap();
        PodInfo::new(Arc::new(pod))
    }

    #[test]
    fn pods_with_the_same_signed_fields_share_a_signature() {
        let fw = framework(&["OnePerNode"], true);
        let a = fw.sign_pod(&pod("a", serde_json::json!({"app": "web"}))).expect("signed");
        let b = fw.sign_pod(&pod("b", serde_json::json!({"app": "web"}))).expect("signed");
        let c = fw.sign_pod(&pod("c", serde_json::json!({"app": "db"}))).expect("signed");
        assert_eq!(a, b, "the name is not signed");
        assert_ne!(a, c, "the labels are");
    }

    #[test]
    fn a_refusing_plugin_makes_the_pod_unbatchable() {
        let fw = framework(&["OnePerNode"], true);
        assert!(fw.sign_pod(&pod("a", serde_json::json!({"unbatchable": "yes"}))).is_none());
        assert!(fw.sign_pod(&pod("b", serde_json::json!({}))).is_some());
    }

    #[test]
    fn a_filter_without_sign_makes_the_profile_unbatchable() {
        let fw = framework(&["OnePerNode", "Unsigned"], true);
        assert!(fw.batching(), "the cache still runs, as upstream's");
        assert!(fw.sign_pod(&pod("a", serde_json::json!({}))).is_none());
    }

    #[test]
    fn the_gate_off_means_no_signature_and_no_hint() {
        let fw = framework(&["OnePerNode"], false);
        assert!(!fw.batching());
        let p = pod("a", serde_json::json!({}));
        assert!(fw.sign_pod(&p).is_none());
        let snap = Snapshot::default();
        let sig = super::sig("x");
        assert_eq!(fw.get_node_hint(&CycleState::new(), &p, Some(&sig), 1, &snap), None);
    }

    fn node(name: &str) -> NodeInfo {
        let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        NodeInfo::new(Arc::new(node))
    }

    #[test]
    fn the_hint_checks_the_last_node_with_the_profile_filters() {
        let fw = framework(&["OnePerNode"], true);
        let first = pod("first", serde_json::json!({"app": "web"}));
        let second = pod("second", serde_json::json!({"app": "web"}));
        let sig = fw.sign_pod(&first).unwrap();
        let ranking = || super::nodes(&["n1", "n2"]);
        // The first pod went to n3, which is now taken: the second gets n1.
        fw.store_schedule_results(Some(&sig), None, "n3", 2, ranking, 1);
        let mut taken = node("n3");
        taken.add_pod(Arc::new(first.assumed_on("n3")));
        let snap = Snapshot::from_node_infos(vec![node("n1"), node("n2"), taken]);
        assert_eq!(fw.get_node_hint(&CycleState::new(), &second, Some(&sig), 2, &snap).as_deref(), Some("n1"));
        fw.store_schedule_results(Some(&sig), Some("n1"), "n1", 0, || unreachable!("hint used"), 2);
        assert_eq!(fw.batched_pods(), 1);

        // n1 still free (its pod's binding failed and it was forgotten): no hint.
        let snap = Snapshot::from_node_infos(vec![node("n1"), node("n2"), node("n3")]);
        assert_eq!(fw.get_node_hint(&CycleState::new(), &second, Some(&sig), 3, &snap), None);
        // n1 gone from the cluster: no hint either.
        fw.store_schedule_results(Some(&sig), None, "n1", 2, ranking, 4);
        let snap = Snapshot::from_node_infos(vec![node("n2"), node("n3")]);
        assert_eq!(fw.get_node_hint(&CycleState::new(), &second, Some(&sig), 5, &snap), None);
    }
}

#[test]
fn a_failed_last_cycle_flushes_as_pod_failed() {
    // Stores only follow successful cycles, so upstream never reaches this reason through its
    // API either (a failed cycle shows as `pod_skipped` at the next one); the check stays for
    // a last cycle marked failed.
    let t0 = Instant::now();
    let (mut b, rec) = after_first(Some("sig"), "n3", &["n1"], t0);
    b.last_cycle.succeeded = false;
    let hint = b.get_node_hint(Some(&sig("sig")), 2, t0, |_| LastNode::Rejects, &rec);
    assert_eq!(hint, None);
    assert_eq!(*rec.flushes.borrow(), vec![FlushReason::PodFailed]);
    assert_eq!(*rec.attempts.borrow(), vec![BatchAttempt::NoHint]);
}
