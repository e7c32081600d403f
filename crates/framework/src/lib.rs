//! The scheduling framework: the vocabulary every plugin and the scheduler speak.
//!
//! Start with [`interface`] (the plugin traits), [`status::Status`], [`cycle_state::CycleState`],
//! [`node_info::NodeInfo`] and [`pod_info::PodInfo`]; [`runtime::Framework`] runs a profile's
//! plugins. Nothing here does I/O: API calls go through [`client::ApiClient`].
#![deny(missing_docs)]

pub mod batch;
pub mod client;
pub mod cycle_state;
pub mod events;
pub mod extender;
pub mod features;
pub mod gofmt;
pub mod handle;
pub mod interface;
pub mod kobj;
pub mod labels;
pub mod listers;
pub mod memo;
pub mod meta;
pub mod node;
pub mod node_info;
pub mod parallelize;
pub mod plugin_config;
pub mod pod;
pub mod pod_info;
pub mod podgroup;
pub mod quantity;
pub mod registry;
pub mod resource;
pub mod runtime;
mod shared;
pub mod small_map;
pub mod snapshot;
pub mod status;
pub mod validation;
pub mod whole;

pub use cycle_state::{CycleState, PluginNames};
pub use events::{ActionType, ClusterEvent, ClusterEventWithHint, EventObject, EventResource, QueueingHint};
pub use features::Features;
pub use handle::{ExtensionPoint, Handle};
pub use interface::*;
pub use node_info::{node_refs, NodeInfo};
pub use pod_info::PodInfo;
pub use registry::Registry;
pub use runtime::{ActiveFilter, Framework};
pub use snapshot::Snapshot;
pub use status::{Code, Status};
