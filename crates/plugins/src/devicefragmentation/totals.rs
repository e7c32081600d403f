//! The cluster's free device capacity, in all and per eligibility class, that PreScore weighs
//! the mix's shapes with, kept from cycle to cycle. A cycle reads again only the nodes that
//! may have changed since the last one: a new generation in the snapshot (pods placed or
//! removed), an allocation recorded or forgotten in one of their pools (the DRA state's record
//! of changes), or allocations in flight there now or at the last cycle. Everything is read
//! again when the device index or the classes change, when the snapshot's nodes are not the
//! same nodes, or when the DRA state cannot say what changed. Without this, every pod's cycle
//! visited every node of the cluster, whatever share of them was scored.

use std::sync::Arc;

use ksched_dra::allocator::{AllocatedView, ChangeCursor, Features};
use ksched_dra::manager::SharedDraManager;
use ksched_framework::Snapshot;

use super::devices::DeviceTracker;
use super::measure::NodeState;

/// One node of the snapshot as last counted.
#[derive(Debug)]
struct Slot {
    name: Box<str>,
    generation: u64,
    state: Arc<NodeState>,
}

/// The free capacity of the measured devices of every node, kept up to date incrementally.
#[derive(Debug, Default)]
pub struct Totals {
    index_version: u64,
    classes: usize,
    cursor: Option<ChangeCursor>,
    /// By position in the snapshot's node list.
    nodes: Vec<Slot>,
    /// Positions of the nodes whose pools had allocations in flight at the last refresh.
    in_flight: Vec<usize>,
    /// Free capacity of the devices each class accepts.
    pub class_free: Vec<i64>,
    /// Free capacity of all measured devices.
    pub free_total: i64,
    /// Nodes read again by the last refresh (all of them when it started over).
    pub last_read: usize,
}

impl Totals {
    /// Brings the totals up to date with `snapshot` and `allocated` for `classes` eligibility
    /// classes; `None` when the tracker has no index (the DeviceClass is missing).
    pub fn refresh(
        &mut self,
        devices: &mut DeviceTracker,
        dra: &dyn SharedDraManager,
        features: &Features,
        snapshot: &Snapshot,
        allocated: &dyn AllocatedView,
        classes: usize,
    ) -> Option<()> {
        let version = devices.index()?.version;
        let list = snapshot.list();
        let mut changed_pools = Vec::new();
        let mut cursor = None;
        let mut full = self.index_version != version || self.classes != classes || self.nodes.len() != list.len();
        if !full {
            cursor = self.cursor.and_then(|c| allocated.pools_changed_since(c, &mut changed_pools));
            full = cursor.is_none();
        }
        let mut dirty: Vec<usize> = Vec::new();
        if !full {
            for (i, (slot, ni)) in self.nodes.iter().zip(list).enumerate() {
                if slot.generation != ni.generation {
                    if *slot.name != *ni.name() {
                        full = true;
                        break;
                    }
                    dirty.push(i);
                }
            }
        }
        let mut in_flight_pools = Vec::new();
        allocated.pools_in_flight(&mut in_flight_pools);
        if full {
            // The cursor is taken before the nodes are read: a change landing meanwhile is
            // either seen by the reads or reported next time.
            cursor = allocated.change_cursor();
            self.nodes.clear();
            self.class_free = vec![0; classes];
            self.free_total = 0;
            for ni in list {
                let (state, _) = devices.node_state(dra, features, ni, allocated)?;
                self.add(&state, 1);
                self.nodes.push(Slot { name: ni.name().into(), generation: ni.generation, state });
            }
            self.last_read = list.len();
        } else {
            let index = devices.index()?;
            for (driver, pool) in changed_pools.iter().chain(&in_flight_pools) {
                dirty
                    .extend(index.nodes_of_pool(driver, pool).iter().filter_map(|n| snapshot.index.get(&**n).copied()));
            }
            dirty.append(&mut self.in_flight);
            dirty.sort_unstable();
            dirty.dedup();
            for &i in &dirty {
                let ni = &list[i];
                let (state, _) = devices.node_state(dra, features, ni, allocated)?;
                let old = std::mem::replace(&mut self.nodes[i].state, state.clone());
                self.add(&old, -1);
                self.add(&state, 1);
                self.nodes[i].generation = ni.generation;
            }
            self.last_read = dirty.len();
        }
        let index = devices.index()?;
        self.in_flight = in_flight_pools
            .iter()
            .flat_map(|(d, p)| index.nodes_of_pool(d, p))
            .filter_map(|n| snapshot.index.get(&**n).copied())
            .collect();
        self.cursor = cursor;
        self.index_version = version;
        self.classes = classes;
        Some(())
    }

    /// Adds (`sign` 1) or takes away (-1) a node's free capacity.
    fn add(&mut self, state: &NodeState, sign: i64) {
        for d in &state.devices {
            self.free_total += sign * d.free;
            for (c, f) in self.class_free.iter_mut().enumerate() {
                if d.classes & (1u64 << c) != 0 {
                    *f += sign * d.free;
                }
            }
        }
    }
}
