//! The DRA state a scheduler's plugins share, as plugins reach it through the framework handle
//! (upstream's `SharedDRAManager`): the claims as the scheduler sees them, the DeviceClasses,
//! the ResourceSlices indexed per node, the devices allocated in the cluster and the compiled
//! CEL selectors. The scheduler installs one implementation in the handle's shared state
//! before it builds the profiles; a plugin that reads devices takes it from there instead of
//! knowing the type that keeps the state.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use ksched_framework::handle::SharedState;

use crate::allocator::{AllocatedView, SliceIndex};
use crate::cel::CelCache;

/// What plugins read of the shared DRA state.
pub trait SharedDraManager: Send + Sync {
    /// The claim as the scheduler sees it (its own newer writes over the informer's); the
    /// error is the not-found text allocation reports.
    fn claim(&self, namespace: &str, name: &str) -> Result<Arc<ResourceClaim>, String>;
    /// A DeviceClass by name.
    fn device_class(&self, name: &str) -> Option<Arc<DeviceClass>>;
    /// The ResourceSlices indexed per node (the same object until the slices change).
    fn slice_index(&self) -> Arc<SliceIndex>;
    /// The devices allocated now: in claims' status, assumed, or in flight.
    fn allocated(&self) -> Arc<dyn AllocatedView>;
    /// The compiled CEL selectors.
    fn cel(&self) -> Arc<CelCache>;
}

/// The handle's shared-state entry that holds the manager.
#[derive(Clone)]
pub struct DraManagerRef(pub Arc<dyn SharedDraManager>);

/// Installs `manager` as the scheduler's DRA manager (the first one installed stays).
pub fn install(shared: &SharedState, manager: Arc<dyn SharedDraManager>) -> Arc<dyn SharedDraManager> {
    shared.get_or_init(|| DraManagerRef(manager)).0.clone()
}

/// The DRA manager the scheduler installed, if any.
pub fn from_shared(shared: &SharedState) -> Option<Arc<dyn SharedDraManager>> {
    shared.get::<DraManagerRef>().map(|r| r.0.clone())
}
