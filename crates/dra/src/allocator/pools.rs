//! Resource pools reachable from one node: the slices of each pool at its newest generation,
//! whether the pool is complete and valid, and its shared counter sets.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1::{CounterSet, ResourceSlice};
use ksched_framework::labels::NodeSelectorMatcher;
use ksched_framework::node::Node;

use super::Features;

/// A pool as the allocator sees it from one node.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    pub driver: String,
    pub pool: String,
    pub incomplete: bool,
    pub invalid: bool,
    /// Why the pool is invalid (shows in `Debug` output; upstream only logs it).
    #[allow(dead_code)]
    pub invalid_reason: String,
    /// Slices with devices for this node, sorted by name.
    pub slices: Vec<Arc<ResourceSlice>>,
    /// Slices of the pool whose devices are not for this node (only their counter use counts).
    pub slices_elsewhere: Vec<Arc<ResourceSlice>>,
    pub counter_sets: BTreeMap<String, CounterSet>,
}

impl Pool {
    fn bare(driver: &str, pool: &str) -> Pool {
        Pool {
            driver: driver.to_string(),
            pool: pool.to_string(),
            incomplete: false,
            invalid: false,
            invalid_reason: String::new(),
            slices: Vec::new(),
            slices_elsewhere: Vec::new(),
            counter_sets: BTreeMap::new(),
        }
    }

    fn invalid(driver: &str, pool: &str, reason: String) -> Pool {
        Pool { invalid: true, invalid_reason: reason, ..Pool::bare(driver, pool) }
    }

    /// `driver/pool`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.pool)
    }
}

/// Whether a node matches a node name, "all nodes" or a node selector (upstream's `NodeMatches`).
pub(crate) fn node_matches(
    node: &Node,
    node_name: Option<&str>,
    all_nodes: bool,
    selector: Option<&NodeSelector>,
) -> Result<bool, String> {
    if let Some(n) = node_name.filter(|n| !n.is_empty()) {
        return Ok(node.metadata.name.as_deref() == Some(n));
    }
    if all_nodes {
        return Ok(true);
    }
    if let Some(sel) = selector {
        let m = NodeSelectorMatcher::new(sel);
        if !m.errors.is_empty() {
            return Err(format!("failed to parse node selector {sel:?}: {}", m.errors.join(", ")));
        }
        return Ok(m.matches(node));
    }
    Ok(false)
}

fn shared_counters(s: &ResourceSlice) -> &[CounterSet] {
    s.spec.shared_counters.as_deref().unwrap_or_default()
}

fn generation(s: &ResourceSlice) -> i64 {
    s.spec.pool.generation
}

fn name(s: &ResourceSlice) -> &str {
    s.metadata.name.as_deref().unwrap_or_default()
}

/// Collects the pools with devices for `node` from the node's slices and the shared ones.
/// Pools are ordered by driver and pool name, pools with binding conditions last.
pub(crate) fn gather_pools(
    slices_for_node: &[Arc<ResourceSlice>],
    node: &Node,
    features: &Features,
    all_slices: &[Arc<ResourceSlice>],
) -> Result<Vec<Pool>, String> {
    let mut pools: BTreeMap<(String, String), Vec<Arc<ResourceSlice>>> = BTreeMap::new();
    for slice in slices_for_node {
        let spec = &slice.spec;
        if !features.partitionable_devices
            && (spec.per_device_node_selection.is_some() || !shared_counters(slice).is_empty())
        {
            continue;
        }
        let relevant = if !shared_counters(slice).is_empty() {
            true
        } else if spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
            || spec.all_nodes == Some(true)
            || spec.node_selector.is_some()
        {
            node_matches(node, spec.node_name.as_deref(), spec.all_nodes == Some(true), spec.node_selector.as_ref())
                .map_err(|e| format!("failed to perform node selection for slice {}: {e}", name(slice)))?
        } else if spec.per_device_node_selection == Some(true) {
            let mut any = false;
            for d in spec.devices.iter().flatten() {
                let m = node_matches(node, d.node_name.as_deref(), d.all_nodes == Some(true), d.node_selector.as_ref())
                    .map_err(|e| {
                        format!("failed to perform node selection for device {} in slice {}: {e}", d.name, name(slice))
                    })?;
                if m {
                    any = true;
                    break;
                }
            }
            any
        } else {
            // Some future way of selecting nodes: not understood, so not used.
            continue;
        };
        if relevant {
            add_slice(&mut pools, slice);
        }
    }

    let mut result = Vec::new();
    let mut with_binding_conditions = Vec::new();
    for ((driver, pool_name), mut slices) in pools {
        let count = slices[0].spec.pool.resource_slice_count;
        let mut all_for_pool = None;
        if slices.len() as i64 != count {
            // Slices of the pool that looked irrelevant for the node still count for
            // completeness (and their counters for partitionable devices).
            match check_slices_in_pool(all_slices, &driver, &pool_name, generation(&slices[0])) {
                None => continue, // a newer generation is being published
                Some(all) => {
                    if all.len() as i64 != count {
                        let mut p = Pool::bare(&driver, &pool_name);
                        p.incomplete = true;
                        result.push(p);
                        continue;
                    }
                    all_for_pool = Some(all);
                }
            }
        }
        slices.sort_by(|a, b| name(a).cmp(name(b)));
        let pool = build_pool(&driver, &pool_name, slices, features, all_for_pool);
        if pool_has_binding_conditions(&pool) {
            with_binding_conditions.push(pool);
        } else {
            result.push(pool);
        }
    }
    // BTreeMap iteration already sorted both lists by driver, then pool.
    result.extend(with_binding_conditions);
    Ok(result)
}

fn add_slice(pools: &mut BTreeMap<(String, String), Vec<Arc<ResourceSlice>>>, slice: &Arc<ResourceSlice>) {
    let key = (slice.spec.driver.clone(), slice.spec.pool.name.clone());
    let entry = pools.entry(key).or_default();
    if let Some(first) = entry.first() {
        let (have, new) = (generation(first), generation(slice));
        if new < have {
            return;
        }
        if new > have {
            entry.clear();
        }
    }
    entry.push(slice.clone());
}

/// All slices of the pool at `generation`, or `None` when a newer generation exists.
fn check_slices_in_pool(
    all: &[Arc<ResourceSlice>],
    driver: &str,
    pool: &str,
    generation_: i64,
) -> Option<Vec<Arc<ResourceSlice>>> {
    let mut out = Vec::new();
    for s in all {
        if s.spec.driver != driver || s.spec.pool.name != pool {
            continue;
        }
        match generation(s).cmp(&generation_) {
            std::cmp::Ordering::Equal => out.push(s.clone()),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
    }
    Some(out)
}

fn build_pool(
    driver: &str,
    pool_name: &str,
    slices: Vec<Arc<ResourceSlice>>,
    features: &Features,
    all_for_pool: Option<Vec<Arc<ResourceSlice>>>,
) -> Pool {
    let (counter_slices, device_slices): (Vec<_>, Vec<_>) = if features.partitionable_devices {
        slices.iter().cloned().partition(|s| !shared_counters(s).is_empty())
    } else {
        (Vec::new(), slices.clone())
    };
    if let Err(e) = validate_device_names(&device_slices) {
        return Pool::invalid(driver, pool_name, e);
    }
    let mut pool = Pool::bare(driver, pool_name);
    pool.slices = device_slices;
    if !features.partitionable_devices {
        return pool;
    }
    let counter_sets = match counter_sets(&counter_slices) {
        Ok(c) => c,
        Err(e) => return Pool::invalid(driver, pool_name, e),
    };
    if let Err(e) = validate_counter_consumption(&counter_sets, &slices) {
        return Pool::invalid(driver, pool_name, e);
    }
    pool.counter_sets = counter_sets;
    let Some(all) = all_for_pool.filter(|all| all.len() != slices.len()) else { return pool };
    let seen: HashSet<&str> = slices.iter().map(|s| name(s)).collect();
    let elsewhere: Vec<_> = all.iter().filter(|s| !seen.contains(name(s))).cloned().collect();
    if let Err(e) = validate_counter_consumption(&pool.counter_sets, &elsewhere) {
        return Pool::invalid(driver, pool_name, e);
    }
    pool.slices_elsewhere = elsewhere;
    pool
}

fn counter_sets(slices: &[Arc<ResourceSlice>]) -> Result<BTreeMap<String, CounterSet>, String> {
    let mut out = BTreeMap::new();
    for s in slices {
        for cs in shared_counters(s) {
            if out.contains_key(&cs.name) {
                return Err(format!("duplicate counter set name {}", cs.name));
            }
            out.insert(cs.name.clone(), cs.clone());
        }
    }
    Ok(out)
}

fn validate_device_names(slices: &[Arc<ResourceSlice>]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for s in slices {
        for d in s.spec.devices.iter().flatten() {
            if !seen.insert(d.name.as_str()) {
                return Err(format!("duplicate device name {}", d.name));
            }
        }
    }
    Ok(())
}

fn validate_counter_consumption(
    sets: &BTreeMap<String, CounterSet>,
    slices: &[Arc<ResourceSlice>],
) -> Result<(), String> {
    for s in slices {
        for d in s.spec.devices.iter().flatten() {
            for c in d.consumes_counters.iter().flatten() {
                let Some(set) = sets.get(&c.counter_set) else {
                    return Err(format!("counter set {} not found", c.counter_set));
                };
                for counter in c.counters.keys() {
                    if !set.counters.contains_key(counter) {
                        return Err(format!("counter {counter} not found in counter set {}", set.name));
                    }
                }
            }
        }
    }
    Ok(())
}

fn pool_has_binding_conditions(pool: &Pool) -> bool {
    pool.slices.iter().flat_map(|s| s.spec.devices.iter().flatten()).any(|d| d.binding_conditions.is_some())
}
