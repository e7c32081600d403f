//! The workload mix, learnt online: how often each pod shape arrives, from the pods the
//! scheduler sees (each pod once, failed ones included: the mix is what arrives, not what
//! fits), and the eligibility classes their device selectors form.
//!
//! Nothing is fitted to a trace: a shape's weight is its share of the last [`WINDOW`] pods
//! seen, so a workload that drifts is followed and an old one forgotten. The measure reads a
//! snapshot that is refreshed at 1, 2, 4, ... 64 pods and then every 64 pods: early pods move
//! the mix a lot, later ones hardly, and a stable snapshot lets node sums computed for it be
//! reused across cycles.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::measure::{Demand, PerUnit, Shape};

/// How many of the latest pods the mix is made of; each is counted once (a pod retried after
/// this many others counts again, as it arrives again).
pub const WINDOW: usize = 1 << 16;

/// Pods between snapshots once the mix has settled.
const REFRESH_EVERY: u64 = 64;

/// Distinct selector sets told apart (bits of [`super::measure::Device::classes`]).
pub const MAX_CLASSES: usize = 64;

/// A pod's shape before its selectors have a class.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodShape {
    /// Cpu request (millicores).
    pub milli_cpu: i64,
    /// Memory request (bytes).
    pub memory: i64,
    /// Device demand.
    pub demand: Demand,
    /// The CEL selectors its device request adds to the class's (sorted, deduplicated).
    pub selectors: Vec<String>,
}

/// A snapshot of the mix: shapes with device demand and their share of all pods seen.
#[derive(Debug, Default)]
pub struct MixSnapshot {
    /// Bumped with every snapshot.
    pub version: u64,
    /// Shapes and their frequencies (largest first; shapes without devices left out, since
    /// no placement changes what they could use).
    pub shapes: Vec<(Shape, f64)>,
    /// Per eligibility class, the expected device demand of one arriving pod: Σ frequency ×
    /// (share, or devices × `whole_capacity`).
    pub class_demand: Vec<f64>,
    /// The cpu and memory the shapes with devices ask per unit of device capacity.
    pub per_unit: PerUnit,
}

/// The learner.
#[derive(Debug)]
pub struct Mix {
    counts: FxHashMap<Shape, f64>,
    total: f64,
    seen: FxHashSet<Box<str>>,
    order: VecDeque<(Box<str>, Shape)>,
    classes: Vec<Vec<String>>,
    snapshot: Arc<MixSnapshot>,
    since_refresh: u64,
    /// Pods counted since the start (the window holds the latest of them).
    observed: u64,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            counts: FxHashMap::default(),
            total: 0.0,
            seen: FxHashSet::default(),
            order: VecDeque::new(),
            // Class 0: no selectors, every device of the class.
            classes: vec![Vec::new()],
            snapshot: Arc::new(MixSnapshot::default()),
            since_refresh: 0,
            observed: 0,
        }
    }
}

impl Mix {
    /// The class of a selector set, added when new; `None` once [`MAX_CLASSES`] are taken.
    pub fn class_of(&mut self, selectors: &[String]) -> Option<u8> {
        if let Some(i) = self.classes.iter().position(|c| c == selectors) {
            return Some(i as u8);
        }
        if self.classes.len() >= MAX_CLASSES {
            return None;
        }
        self.classes.push(selectors.to_vec());
        Some((self.classes.len() - 1) as u8)
    }

    /// The selector sets of the classes, by class.
    pub fn classes(&self) -> &[Vec<String>] {
        &self.classes
    }

    /// Counts the pod `uid` of `shape` unless it was counted already; `true` when a new
    /// snapshot is due.
    pub fn observe(&mut self, uid: &str, shape: Shape) -> bool {
        self.observe_within(uid, shape, WINDOW)
    }

    /// [`Mix::observe`] over a window of the latest `window` pods.
    fn observe_within(&mut self, uid: &str, shape: Shape, window: usize) -> bool {
        if !self.seen.insert(uid.into()) {
            return false;
        }
        self.order.push_back((uid.into(), shape));
        if self.order.len() > window {
            if let Some((old, old_shape)) = self.order.pop_front() {
                self.seen.remove(&old);
                if let Some(c) = self.counts.get_mut(&old_shape) {
                    *c -= 1.0;
                    if *c <= 0.0 {
                        self.counts.remove(&old_shape);
                    }
                }
                self.total -= 1.0;
            }
        }
        *self.counts.entry(shape).or_insert(0.0) += 1.0;
        self.total += 1.0;
        self.since_refresh += 1;
        self.observed += 1;
        let n = self.observed;
        (n <= REFRESH_EVERY && n.is_power_of_two()) || self.since_refresh >= REFRESH_EVERY
    }

    /// Takes a new snapshot; `whole_capacity` converts whole devices to capacity units.
    pub fn refresh(&mut self, whole_capacity: i64) {
        self.since_refresh = 0;
        let mut shapes: Vec<(Shape, f64)> =
            self.counts.iter().filter(|(s, _)| s.demand != Demand::None).map(|(s, c)| (*s, c / self.total)).collect();
        // Largest first, then a fixed order of the shapes themselves: the snapshot (and the
        // float sums over it) must not depend on hash order.
        shapes.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| shape_order(&a.0).cmp(&shape_order(&b.0))));
        let mut class_demand = vec![0.0; self.classes.len()];
        let (mut cpu, mut memory) = (0.0, 0.0);
        for (s, p) in &shapes {
            let per_pod = match s.demand {
                Demand::Share(m) => m as f64,
                Demand::Whole(n) => n as f64 * whole_capacity as f64,
                Demand::None => 0.0,
            };
            class_demand[s.class as usize] += p * per_pod;
            cpu += p * s.milli_cpu as f64;
            memory += p * s.memory as f64;
        }
        let units: f64 = class_demand.iter().sum();
        let per_unit =
            if units > 0.0 { PerUnit { milli_cpu: cpu / units, memory: memory / units } } else { PerUnit::default() };
        let version = self.snapshot.version + 1;
        self.snapshot = Arc::new(MixSnapshot { version, shapes, class_demand, per_unit });
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<MixSnapshot> {
        self.snapshot.clone()
    }

    /// Pods counted since the start.
    pub fn observed(&self) -> u64 {
        self.observed
    }
}

fn shape_order(s: &Shape) -> (i64, i64, i64, i64, u8) {
    let (kind, amount) = match s.demand {
        Demand::None => (0, 0),
        Demand::Share(m) => (1, m),
        Demand::Whole(n) => (2, n as i64),
    };
    (kind, amount, s.milli_cpu, s.memory, s.class)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(demand: Demand, class: u8) -> Shape {
        Shape { milli_cpu: 1000, memory: 0, demand, class }
    }

    #[test]
    fn each_pod_counts_once_and_snapshots_follow_the_schedule() {
        let mut m = Mix::default();
        let mut when = Vec::new();
        for i in 0..130 {
            if m.observe(&format!("pod-{i}"), shape(Demand::Share(500), 0)) {
                m.refresh(1000);
                when.push(i + 1);
            }
        }
        assert_eq!(when, [1, 2, 4, 8, 16, 32, 64, 128]);
        assert!(!m.observe("pod-3", shape(Demand::Whole(1), 0)), "a retried pod is not counted again");
        assert_eq!(m.observed(), 130);
    }

    #[test]
    fn snapshots_give_frequencies_and_class_demand() {
        let mut m = Mix::default();
        let t4 = m.class_of(&["device.attributes[\"model\"] == \"T4\"".to_string()]).unwrap();
        assert_eq!(t4, 1);
        assert_eq!(m.class_of(&[]), Some(0));
        m.observe("a", shape(Demand::Share(500), 0));
        m.observe("b", shape(Demand::Share(500), 0));
        m.observe("c", shape(Demand::Whole(2), t4));
        m.observe("d", shape(Demand::None, 0));
        m.refresh(1000);
        let s = m.snapshot();
        assert_eq!(s.shapes, vec![(shape(Demand::Share(500), 0), 0.5), (shape(Demand::Whole(2), t4), 0.25)]);
        assert_eq!(s.class_demand, vec![250.0, 500.0]);
        assert_eq!(s.version, 1);
    }

    #[test]
    fn the_mix_forgets_pods_older_than_its_window() {
        let mut m = Mix::default();
        for i in 0..10 {
            m.observe_within(&format!("old-{i}"), shape(Demand::Whole(1), 0), 8);
        }
        m.refresh(1000);
        assert_eq!(m.snapshot().shapes, vec![(shape(Demand::Whole(1), 0), 1.0)]);
        // The workload drifts to shares: after a window of them the whole GPUs are forgotten.
        for i in 0..8 {
            m.observe_within(&format!("new-{i}"), shape(Demand::Share(300), 0), 8);
        }
        m.refresh(1000);
        assert_eq!(m.snapshot().shapes, vec![(shape(Demand::Share(300), 0), 1.0)]);
        assert_eq!(m.snapshot().class_demand, vec![300.0]);
        assert_eq!(m.observed(), 18);
        // A pod still in the window is not counted twice; one that left it counts again.
        m.observe_within("new-7", shape(Demand::Share(300), 0), 8);
        assert_eq!(m.observed(), 18);
        m.observe_within("old-0", shape(Demand::Whole(1), 0), 8);
        assert_eq!(m.observed(), 19);
    }

    #[test]
    fn classes_are_capped() {
        let mut m = Mix::default();
        for i in 1..MAX_CLASSES {
            assert_eq!(m.class_of(&[format!("x == {i}")]), Some(i as u8));
        }
        assert_eq!(m.class_of(&["one too many".to_string()]), None);
        assert_eq!(m.class_of(&["x == 3".to_string()]), Some(3));
    }
}
