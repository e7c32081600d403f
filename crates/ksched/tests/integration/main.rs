//! One integration-test binary for this crate: every file here is a module, so the
//! workspace links one test executable per crate instead of one per file (disk and link time).

mod bench_smoke;
mod chaos;
mod explain_cli;
mod explain_manifests;
mod local_cli;
mod trace_cli;
mod trace_live;
mod ui_browser;
