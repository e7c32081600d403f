//! Helpers shared by several plugins: the generic score normaliser and typed access to the old/new
//! objects a queueing hint receives.

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_framework::EventObject;

/// Rescales raw scores from `[0, max(scores)]` to `[0, max_priority]` (upstream `helper.DefaultNormalizeScore`); with `reverse` the
/// result is subtracted from `max_priority`. All-zero input stays 0 forward and becomes
/// `max_priority` reversed. Scores are assumed non-negative.
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [i64]) {
    let max = scores.iter().copied().fold(0, i64::max);
    if max == 0 {
        if reverse {
            scores.fill(max_priority);
        }
        return;
    }
    for s in scores.iter_mut() {
        let scaled = max_priority * *s / max;
        *s = if reverse { max_priority - scaled } else { scaled };
    }
}

fn kind_of(obj: &EventObject) -> &'static str {
    match obj {
        EventObject::Pod(_) => "*v1.Pod",
        EventObject::Node(_) => "*v1.Node",
        EventObject::PodGroup(_) => "*v1alpha2.PodGroup",
        EventObject::Other(_) => "*unstructured.Unstructured",
    }
}

/// The old and new objects of an event as pods; an object of another kind is an error (which the
/// queue treats as Queue), with upstream's wording.
pub fn as_pods<'a>(
    old: Option<&'a EventObject>,
    new: Option<&'a EventObject>,
) -> Result<(Option<&'a Pod>, Option<&'a Pod>), String> {
    let cast = |o: Option<&'a EventObject>| match o {
        None => Ok(None),
        Some(o) => o.as_pod().map(Some).ok_or_else(|| format!("expected *v1.Pod, but got {}", kind_of(o))),
    };
    let new = cast(new)?;
    Ok((cast(old)?, new))
}

/// The old and new objects of an event as nodes; see [`as_pods`].
pub fn as_nodes<'a>(
    old: Option<&'a EventObject>,
    new: Option<&'a EventObject>,
) -> Result<(Option<&'a Node>, Option<&'a Node>), String> {
    let cast = |o: Option<&'a EventObject>| match o {
        None => Ok(None),
        Some(o) => o.as_node().map(Some).ok_or_else(|| format!("expected *v1.Node, but got {}", kind_of(o))),
    };
    let new = cast(new)?;
    Ok((cast(old)?, new))
}

/// The new object of an update/add event, which every hint that inspects it requires.
pub(crate) fn require<'a, T>(obj: Option<&'a T>, what: &str) -> Result<&'a T, String> {
    obj.ok_or_else(|| format!("the event carries no {what} object"))
}

/// The pod's UID ("" when unset), which hints compare to recognise the pod itself.
pub(crate) fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builders for the plugin tests.

    use std::sync::Arc;

    use ksched_framework::node::Node;
    use ksched_framework::pod::Pod;
    use ksched_framework::{EventObject, NodeInfo, PodInfo};
    use serde_json::{json, Value};

    /// A pod from a JSON `spec` (and optional metadata fields merged in).
    pub fn pod(meta: Value, spec: Value) -> Pod {
        let mut m = json!({"name": "p", "namespace": "default"});
        if let (Some(m), Some(extra)) = (m.as_object_mut(), meta.as_object()) {
            m.extend(extra.clone());
        }
        serde_json::from_value(json!({"metadata": m, "spec": spec})).expect("valid pod")
    }

    /// A PodInfo for a pod.
    pub fn pod_info(p: Pod) -> PodInfo {
        PodInfo::new(Arc::new(p))
    }

    /// A node from JSON metadata and spec.
    pub fn node(meta: Value, spec: Value) -> Node {
        serde_json::from_value(json!({"metadata": meta, "spec": spec})).expect("valid node")
    }

    /// A NodeInfo for a node.
    pub fn node_info(n: Node) -> NodeInfo {
        NodeInfo::new(Arc::new(n))
    }

    /// A pod event object.
    pub fn pod_obj(p: Pod) -> EventObject {
        EventObject::Pod(Arc::new(p))
    }

    /// A node event object.
    pub fn node_obj(n: Node) -> EventObject {
        EventObject::Node(Arc::new(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn default_normalize_score_cases() {
        let cases: &[(&str, bool, &[i64], &[i64])] = &[
            ("forward linear", false, &[1, 2, 3, 4], &[25, 50, 75, 100]),
            ("reverse linear", true, &[1, 2, 3, 4], &[75, 50, 25, 0]),
            ("forward truncates", false, &[1000, 10, 20, 30], &[100, 1, 2, 3]),
            ("reverse truncates", true, &[1000, 10, 20, 30], &[0, 99, 98, 97]),
            ("forward all equal", false, &[1, 1, 1, 1], &[100, 100, 100, 100]),
            ("forward small against large", false, &[1000, 1, 1, 1], &[100, 0, 0, 0]),
            ("reverse with zero", true, &[0, 1, 1, 1], &[100, 0, 0, 0]),
            ("forward all zero stays zero", false, &[0, 0, 0, 0], &[0, 0, 0, 0]),
            ("reverse all zero is max", true, &[0, 0, 0, 0], &[100, 100, 100, 100]),
            ("empty", true, &[], &[]),
        ];
        for (name, reverse, input, want) in cases {
            let mut got = input.to_vec();
            default_normalize_score(100, *reverse, &mut got);
            assert_eq!(&got, want, "{name}");
        }
    }

    #[test]
    fn typed_event_objects() {
        let p = EventObject::Pod(Arc::new(Pod::default()));
        let n = EventObject::Node(Arc::new(Node::default()));
        assert!(matches!(as_pods(Some(&p), Some(&p)), Ok((Some(_), Some(_)))));
        assert!(matches!(as_pods(None, Some(&p)), Ok((None, Some(_)))));
        assert_eq!(as_pods(None, Some(&n)).unwrap_err(), "expected *v1.Pod, but got *v1.Node");
        assert_eq!(as_pods(Some(&n), Some(&p)).unwrap_err(), "expected *v1.Pod, but got *v1.Node");
        assert_eq!(as_nodes(Some(&p), None).unwrap_err(), "expected *v1.Node, but got *v1.Pod");
        assert!(matches!(as_nodes(Some(&n), Some(&n)), Ok((Some(_), Some(_)))));
    }
}
