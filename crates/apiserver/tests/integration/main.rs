//! One integration-test binary for this crate: every file here is a module, so the
//! workspace links one test executable per crate instead of one per file (disk and link time).

mod common;
mod faults;
mod kube_api;
mod kubectl;
mod manifest;
mod pod_groups;
mod protobuf;
