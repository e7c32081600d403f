//! The nominator (upstream `backend/queue/nominator.go`): which pods are expected to land on which node (after preemption, or as
//! carried in `status.nominatedNodeName`), so lower-priority pods do not take their room.

use std::collections::HashMap;
use std::sync::Arc;

use ksched_framework::pod::Pod;
use ksched_framework::PodInfo;

/// Looks up the live pod by namespace and name (the informer's lister).
pub type PodLister = Arc<dyn Fn(&str, &str) -> Option<Arc<Pod>> + Send + Sync>;

/// How a nomination request treats the node name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Nomination {
    /// Use the pod's `status.nominatedNodeName`; nothing when it is empty.
    FromStatus,
    /// Use this node name.
    Override(String),
}

/// A reference to a nominated pod; the queue resolves it to the freshest PodInfo it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodRef {
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) uid: String,
}

impl PodRef {
    /// The `namespace/name` queue key.
    pub(crate) fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// A pod carrying only the identity, for nominees no queue holds.
    pub(crate) fn to_stub_pod(&self) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(self.name.clone());
        p.metadata.namespace = Some(self.namespace.clone());
        p.metadata.uid = Some(self.uid.clone());
        p
    }
}

fn nominated_node_name(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).unwrap_or_default()
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// Node name → nominated pods (in nomination order), and pod UID → node name.
#[derive(Default)]
pub(crate) struct Nominator {
    by_node: HashMap<String, Vec<PodRef>>,
    by_uid: HashMap<String, String>,
}

impl Nominator {
    /// Records a nomination, replacing any previous one of the pod. Skipped when the live pod
    /// (per `lister`) is gone or already bound.
    pub(crate) fn add(&mut self, pi: &PodInfo, nomination: Nomination, lister: Option<&PodLister>) {
        self.delete(&pi.pod);
        let node = match nomination {
            Nomination::Override(n) => n,
            Nomination::FromStatus => {
                let n = nominated_node_name(&pi.pod);
                if n.is_empty() {
                    return;
                }
                n.to_string()
            }
        };
        if let Some(lister) = lister {
            match lister(pi.namespace(), pi.name()) {
                None => {
                    tracing::debug!(pod = %pi.key(), "pod not in the lister, not nominating it");
                    return;
                }
                Some(live)
                    if live.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()) =>
                {
                    tracing::debug!(pod = %pi.key(), "pod already bound, not nominating it");
                    return;
                }
                Some(_) => {}
            }
        }
        let pod_uid = pi.uid().to_string();
        self.by_uid.insert(pod_uid.clone(), node.clone());
        let list = self.by_node.entry(node).or_default();
        if list.iter().any(|r| r.uid == pod_uid) {
            return;
        }
        list.push(PodRef { name: pi.name().to_string(), namespace: pi.namespace().to_string(), uid: pod_uid });
    }

    /// Moves the nomination to the updated pod. When neither version carries a nominated node,
    /// an in-memory nomination (from preemption) is kept.
    pub(crate) fn update(&mut self, old: &Pod, new: &PodInfo, lister: Option<&PodLister>) {
        let mut nomination = Nomination::FromStatus;
        if nominated_node_name(old).is_empty() && nominated_node_name(&new.pod).is_empty() {
            if let Some(node) = self.by_uid.get(uid(old)) {
                nomination = Nomination::Override(node.clone());
            }
        }
        self.delete(old);
        self.add(new, nomination, lister);
    }

    /// Forgets the pod's nomination.
    pub(crate) fn delete(&mut self, pod: &Pod) {
        let Some(node) = self.by_uid.remove(uid(pod)) else { return };
        if let Some(list) = self.by_node.get_mut(&node) {
            if let Some(i) = list.iter().position(|r| r.uid == uid(pod)) {
                list.remove(i);
            }
            if list.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    /// The pods nominated to a node, in nomination order.
    pub(crate) fn for_node(&self, node: &str) -> Vec<PodRef> {
        self.by_node.get(node).cloned().unwrap_or_default()
    }

    /// Nodes with nominated pods, sorted.
    pub(crate) fn nodes(&self) -> Vec<String> {
        let mut v: Vec<String> = self.by_node.keys().cloned().collect();
        v.sort();
        v
    }

    /// The node the pod is nominated to.
    pub(crate) fn node_of(&self, pod_uid: &str) -> Option<&str> {
        self.by_uid.get(pod_uid).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pi(name: &str, nnn: Option<&str>) -> PodInfo {
        let mut v = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")}, "spec": {"containers": []}});
        if let Some(n) = nnn {
            v["status"] = json!({"nominatedNodeName": n});
        }
        PodInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
    }

    fn names(refs: Vec<PodRef>) -> Vec<String> {
        refs.into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn add_override_replace_and_delete() {
        let mut n = Nominator::default();
        n.add(&pi("a", Some("n1")), Nomination::FromStatus, None);
        n.add(&pi("b", None), Nomination::FromStatus, None);
        assert!(n.node_of("uid-b").is_none(), "no status NNN, nothing to record");
        n.add(&pi("b", None), Nomination::Override("n1".into()), None);
        assert_eq!(names(n.for_node("n1")), vec!["a", "b"]);
        n.add(&pi("a", None), Nomination::Override("n2".into()), None);
        assert_eq!(names(n.for_node("n1")), vec!["b"]);
        assert_eq!(names(n.for_node("n2")), vec!["a"]);
        assert_eq!(n.nodes(), vec!["n1", "n2"]);
        n.delete(&pi("a", None).pod);
        assert!(n.for_node("n2").is_empty());
        assert!(n.node_of("uid-a").is_none());
    }

    #[test]
    fn update_keeps_in_memory_nomination_unless_status_says_otherwise() {
        let mut n = Nominator::default();
        let old = pi("a", None);
        n.add(&old, Nomination::Override("n1".into()), None);
        n.update(&old.pod, &pi("a", None), None);
        assert_eq!(n.node_of("uid-a"), Some("n1"));
        n.update(&old.pod, &pi("a", Some("n3")), None);
        assert_eq!(n.node_of("uid-a"), Some("n3"));
        let with_status = pi("a", Some("n3"));
        n.update(&with_status.pod, &pi("a", None), None);
        assert_eq!(n.node_of("uid-a"), None, "status cleared: nomination dropped");
    }

    #[test]
    fn lister_blocks_bound_or_missing_pods() {
        let mut n = Nominator::default();
        let bound: PodLister = Arc::new(|_, name| {
            (name != "gone").then(|| {
                Arc::new(
                    serde_json::from_value(
                        json!({"metadata": {"name": name}, "spec": {"containers": [], "nodeName": "x"}}),
                    )
                    .unwrap(),
                )
            })
        });
        n.add(&pi("a", None), Nomination::Override("n1".into()), Some(&bound));
        n.add(&pi("gone", None), Nomination::Override("n1".into()), Some(&bound));
        assert!(n.for_node("n1").is_empty());
        let unbound: PodLister = Arc::new(|_, name| {
            Some(Arc::new(
                serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": []}})).unwrap(),
            ))
        });
        n.add(&pi("a", None), Nomination::Override("n1".into()), Some(&unbound));
        assert_eq!(names(n.for_node("n1")), vec!["a"]);
    }
}
