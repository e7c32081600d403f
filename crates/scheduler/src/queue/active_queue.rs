//! activeQ: the pods ready to be scheduled, plus the bookkeeping of pods being scheduled right now
//! ("in flight") and the cluster events that arrived meanwhile.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use ksched_framework::pod::Pod;
use ksched_framework::{ClusterEvent, EventObject, QueuedPodInfo};

use super::heap::{KeyedHeap, LessFn};

/// A cluster event recorded while pods were in flight, with the objects it carried.
#[derive(Debug, Clone)]
pub(crate) struct RecordedEvent {
    pub(crate) event: ClusterEvent,
    pub(crate) old: Option<EventObject>,
    pub(crate) new: Option<EventObject>,
}

enum Entry {
    Pod,
    Event(RecordedEvent),
    // A pod entry that finished; kept so positions stay stable until trimmed from the front.
    Finished,
}

/// The ordered log of popped pods and of the events received after them.
///
/// A pod that finishes its cycle is replayed every event logged after its own entry. Entries are
/// addressed by a sequence number so finishing a pod in the middle costs O(1).
#[derive(Default)]
pub(crate) struct InFlight {
    log: VecDeque<Entry>,
    first_seq: u64,
    pods: HashMap<String, (u64, Arc<Pod>)>,
}

impl InFlight {
    fn next_seq(&self) -> u64 {
        self.first_seq + self.log.len() as u64
    }

    /// Records a popped pod; errors when it is already in flight.
    pub(crate) fn push_pod(&mut self, uid: &str, pod: Arc<Pod>) -> Result<(), String> {
        if self.pods.contains_key(uid) {
            return Err(format!(
                "the same pod is tracked in multiple places in the scheduler: {}/{}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            ));
        }
        self.pods.insert(uid.to_string(), (self.next_seq(), pod));
        self.log.push_back(Entry::Pod);
        Ok(())
    }

    /// Number of pods in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pods.len()
    }

    /// Records events about one pod if it is in flight; true when it is.
    pub(crate) fn add_events_if_pod_in_flight(
        &mut self,
        uid: &str,
        old: Option<EventObject>,
        new: Option<EventObject>,
        events: &[ClusterEvent],
    ) -> bool {
        if !self.pods.contains_key(uid) {
            return false;
        }
        for e in events {
            self.log.push_back(Entry::Event(RecordedEvent { event: *e, old: old.clone(), new: new.clone() }));
        }
        true
    }

    /// Records an event when any pod is in flight; true when recorded.
    pub(crate) fn add_event_if_any_in_flight(
        &mut self,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
        event: ClusterEvent,
    ) -> bool {
        if self.pods.is_empty() {
            return false;
        }
        self.log.push_back(Entry::Event(RecordedEvent { event, old: old.cloned(), new: new.cloned() }));
        true
    }

    /// Events received after the pod was popped; `None` when it is not in flight.
    pub(crate) fn events_for_pod(&self, uid: &str) -> Option<Vec<RecordedEvent>> {
        let (seq, _) = self.pods.get(uid)?;
        let start = (seq - self.first_seq) as usize + 1;
        Some(
            self.log
                .range(start..)
                .filter_map(|e| match e {
                    Entry::Event(r) => Some(r.clone()),
                    _ => None,
                })
                .collect(),
        )
    }

    /// Ends the pod's cycle and drops the events no remaining pod can need, returning them;
    /// `None` when the pod was not in flight.
    pub(crate) fn done(&mut self, uid: &str) -> Option<Vec<ClusterEvent>> {
        let (seq, _) = self.pods.remove(uid)?;
        let idx = (seq - self.first_seq) as usize;
        self.log[idx] = Entry::Finished;
        // Events ahead of the oldest live pod were seen by no one still in flight.
        let mut dropped = Vec::new();
        while matches!(self.log.front(), Some(Entry::Event(_) | Entry::Finished)) {
            if let Some(Entry::Event(r)) = self.log.pop_front() {
                dropped.push(r.event);
            }
            self.first_seq += 1;
        }
        Some(dropped)
    }

    /// The pods in flight.
    pub(crate) fn pods(&self) -> Vec<Arc<Pod>> {
        self.pods.values().map(|(_, p)| p.clone()).collect()
    }

    /// UIDs of the pods in flight.
    pub(crate) fn uids(&self) -> Vec<String> {
        self.pods.keys().cloned().collect()
    }

    /// Number of events currently retained.
    #[cfg(test)]
    pub(crate) fn retained_events(&self) -> usize {
        self.log.iter().filter(|e| matches!(e, Entry::Event(_))).count()
    }
}

/// The active queue: a heap ordered by the QueueSort plugin.
pub(crate) struct ActiveQueue {
    pub(crate) heap: KeyedHeap<QueuedPodInfo>,
    pub(crate) in_flight: InFlight,
    pub(crate) scheduling_cycle: u64,
}

impl ActiveQueue {
    /// An empty active queue ordered by `less`.
    pub(crate) fn new(less: LessFn<QueuedPodInfo>) -> Self {
        ActiveQueue { heap: KeyedHeap::new(less), in_flight: InFlight::default(), scheduling_cycle: 0 }
    }

    /// Starts a pod's cycle: Attempts++, in-flight tracking, cycle++.
    pub(crate) fn move_to_in_flight(&mut self, qpi: &mut QueuedPodInfo) -> Result<(), String> {
        qpi.attempts += 1;
        self.in_flight.push_pod(qpi.pod_info.uid(), qpi.pod_info.pod.clone())?;
        self.scheduling_cycle += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::{ActionType, EventResource};

    fn ev(a: ActionType) -> ClusterEvent {
        ClusterEvent::new(EventResource::Node, a)
    }

    fn pod(name: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        Arc::new(p)
    }

    #[test]
    fn events_are_replayed_only_to_pods_popped_before_them() {
        let mut f = InFlight::default();
        assert!(!f.add_event_if_any_in_flight(None, None, ev(ActionType::ADD)), "nobody in flight");
        f.push_pod("a", pod("a")).unwrap();
        f.add_event_if_any_in_flight(None, None, ev(ActionType::ADD));
        f.push_pod("b", pod("b")).unwrap();
        f.add_event_if_any_in_flight(None, None, ev(ActionType::DELETE));
        assert!(f.push_pod("a", pod("a")).is_err());

        let labels = |v: Vec<RecordedEvent>| v.into_iter().map(|r| r.event.label()).collect::<Vec<_>>();
        assert_eq!(labels(f.events_for_pod("a").unwrap()), vec!["NodeAdd", "NodeDelete"]);
        assert_eq!(labels(f.events_for_pod("b").unwrap()), vec!["NodeDelete"]);
        assert!(f.events_for_pod("c").is_none());

        // b finishing first keeps everything a still needs.
        assert_eq!(f.done("b").unwrap().len(), 0);
        assert_eq!(labels(f.events_for_pod("a").unwrap()), vec!["NodeAdd", "NodeDelete"]);
        assert_eq!(f.done("a").unwrap().len(), 2);
        assert_eq!(f.retained_events(), 0);
        assert_eq!(f.len(), 0);
        assert!(f.done("a").is_none());
    }

    #[test]
    fn finishing_the_oldest_pod_trims_events_up_to_the_next_one() {
        let mut f = InFlight::default();
        f.push_pod("a", pod("a")).unwrap();
        f.add_event_if_any_in_flight(None, None, ev(ActionType::ADD));
        f.push_pod("b", pod("b")).unwrap();
        f.add_event_if_any_in_flight(None, None, ev(ActionType::DELETE));
        f.done("a");
        assert_eq!(f.retained_events(), 1);
        assert_eq!(f.events_for_pod("b").unwrap().len(), 1);
        assert!(f.add_events_if_pod_in_flight("b", None, None, &[ev(ActionType::UPDATE_NODE_LABEL)]));
        assert!(!f.add_events_if_pod_in_flight("a", None, None, &[ev(ActionType::UPDATE_NODE_LABEL)]));
        assert_eq!(f.events_for_pod("b").unwrap().len(), 2);
    }
}
