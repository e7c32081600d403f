//! unschedulablePods: pods no recent event could help, and pods held back by a PreEnqueue plugin
//! (gated pods).

use std::collections::BTreeMap;

use ksched_framework::QueuedPodInfo;

/// Pods by `namespace/name`; ordered so that event handling visits them deterministically.
#[derive(Default)]
pub(crate) struct UnschedulablePods {
    pods: BTreeMap<String, QueuedPodInfo>,
    gated: usize,
}

fn is_gated(q: &QueuedPodInfo) -> bool {
    q.gating_plugin.is_some()
}

impl UnschedulablePods {
    /// Inserts or replaces; true when the pod was not there before.
    pub(crate) fn add_or_update(&mut self, key: String, qpi: QueuedPodInfo) -> bool {
        let now_gated = is_gated(&qpi);
        let previous = self.pods.insert(key, qpi);
        if let Some(prev) = &previous {
            self.gated -= usize::from(is_gated(prev));
        }
        self.gated += usize::from(now_gated);
        previous.is_none()
    }

    /// Removes the pod.
    pub(crate) fn remove(&mut self, key: &str) -> Option<QueuedPodInfo> {
        let q = self.pods.remove(key)?;
        self.gated -= usize::from(is_gated(&q));
        Some(q)
    }

    /// The pod with this key.
    pub(crate) fn get(&self, key: &str) -> Option<&QueuedPodInfo> {
        self.pods.get(key)
    }

    /// Changes a pod in place (gating state included); false when absent.
    pub(crate) fn update_with(&mut self, key: &str, f: impl FnOnce(&mut QueuedPodInfo)) -> bool {
        let Some(q) = self.pods.get_mut(key) else { return false };
        let was = is_gated(q);
        f(q);
        let now = is_gated(q);
        self.gated = self.gated + usize::from(now) - usize::from(was);
        true
    }

    /// True when the pod is here.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    /// All pods.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &QueuedPodInfo)> {
        self.pods.iter()
    }

    /// Pods held back by PreEnqueue.
    pub(crate) fn gated_len(&self) -> usize {
        self.gated
    }

    /// Pods rejected by a scheduling attempt (not gated).
    pub(crate) fn unschedulable_len(&self) -> usize {
        self.pods.len() - self.gated
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::PodInfo;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn counts_follow_gating_state() {
        let mut u = UnschedulablePods::default();
        let mut q = QueuedPodInfo::new(Arc::new(PodInfo::new(Arc::default())), Instant::now());
        assert!(u.add_or_update("a".into(), q.clone()));
        q.gating_plugin = Some("Gate".into());
        assert!(u.add_or_update("b".into(), q.clone()));
        assert!(!u.add_or_update("a".into(), q.clone()), "replacement is not new");
        assert_eq!((u.unschedulable_len(), u.gated_len()), (0, 2));
        u.update_with("a", |q| q.gating_plugin = None);
        assert_eq!((u.unschedulable_len(), u.gated_len()), (1, 1));
        assert!(u.remove("b").is_some());
        assert_eq!((u.unschedulable_len(), u.gated_len()), (1, 0));
        assert!(u.remove("b").is_none());
    }
}
