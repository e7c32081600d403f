//! kube-scheduler: configuration, cache, queue, the scheduling loop and the thin API shell.
//!
//! Start at [`scheduler::Scheduler`] (the loop) and [`schedule_one`] (the algorithm of one cycle).
//! The pure core ([`config`], [`cache`], [`queue`], [`schedule_one`]) does no I/O; the shell
//! ([`eventhandlers`], [`client`]) watches the API server, binds pods and records events.

pub mod allocator;
pub mod app;
pub mod cache;
pub mod claimcontroller;
pub mod client;
pub mod cluster_events;
pub mod command;
pub mod config;
mod dra_client;
pub mod eventhandlers;
pub mod explain;
pub mod extender;
pub mod fit_error;
pub mod inprocess;
pub mod klog;
pub mod leaderelection;
pub mod listers;
pub mod memreport;
pub mod metrics;
pub mod options;
pub mod pod_writes;
pub mod projection;
pub mod queue;
pub mod schedule_one;
pub mod scheduler;
pub mod server;
