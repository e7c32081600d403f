//! kube-scheduler: configuration, cache, queue, the scheduling loop and the thin API shell.
//!
//! The pure core ([`config`], [`cache`], [`queue`]) does no I/O; the shell watches the API
//! server, binds pods and records events around it.

pub mod cache;
pub mod cluster_events;
pub mod config;
pub mod queue;
