//! Dynamic Resource Allocation, the parts without I/O: the structured-parameters
//! [`allocator`], the device-selector [`cel`] environment, exact [`quantity`] and [`semver`]
//! values, and ResourceClaim helpers ([`claim`]).
#![deny(missing_docs)]

pub mod allocator;
pub mod cel;
pub mod claim;
pub mod manager;
pub mod quantity;
pub mod semver;
