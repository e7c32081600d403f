//! One integration-test binary for this crate: every file here is a module, so the
//! workspace links one test executable per crate instead of one per file (disk and link time).

mod batching;
mod binary;
mod bindings_ahead;
mod chaos_bindings;
mod chaos_leader;
mod claim_controller;
mod cli;
mod common;
mod debug_explain;
mod default_profile;
mod dra_apiserver;
mod dra_inprocess;
mod end_to_end;
mod extenders;
mod gangs_apiserver;
mod gpu_sharing_config;
mod leader_election;
mod logging;
mod node_declared_features;
mod observability;
mod preemption;
mod projection;
mod served_apis;
mod serving;
mod volumes;
