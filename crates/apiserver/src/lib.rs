//! An in-memory, Kubernetes-compatible API server for local clusters and tests.
//!
//! Start with [`ApiServer::start`], which serves the real REST + watch wire
//! protocol (JSON) on loopback so unmodified clients — the `kube` crate,
//! `kubectl`, client-go programs such as kube-scheduler — can talk to it
//! using [`RunningServer::kubeconfig_yaml`]. In-process code can use the
//! [`Store`] handle directly, and [`manifest`] loads YAML/JSON files into it.
//!
//! Module map: `server` (routing, auth, content negotiation, verbs) →
//! `store` (objects, resourceVersions, event history, watch fan-out) →
//! `watch` (per-watcher stream encoding). `resources` is the table of served
//! resources; `defaults` is admission (pod defaulting, validation);
//! `patch`, `selectors`, `table`, `discovery`, `openapi` implement protocol
//! details; `tls` serves HTTPS and plain HTTP on one port (client-go only
//! sends bearer tokens over TLS); `kubeconfig` writes client configs;
//! [`faults`] wraps the router and listener to inject faults on demand and
//! audit bindings.

mod admission;
mod apply;
mod convert;
mod defaults;
mod discovery;
pub mod error;
pub mod faults;
mod kubeconfig;
pub mod manifest;
mod openapi;
mod patch;
mod protobuf;
pub mod resources;
mod selectors;
mod server;
mod store;
mod strategy;
mod table;
mod tls;
pub mod validation;
mod watch;

pub use error::ApiError;
pub use faults::{FaultSpec, Faults};
pub use manifest::{ApplySummary, Manifest, ManifestError};
pub use server::{ApiServer, ExtraRoutes, RunningServer, ServerConfig};
pub use store::Store;

/// Entry points for the fuzz targets (`fuzz/`): parsers that are otherwise internal.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::patch::{apply_patch, PatchKind};
    pub use crate::selectors::{FieldSelector, LabelSelector};
    pub use crate::server::router_for_tests;
}

/// Encodes a JSON object (with `apiVersion` and `kind`) as an enveloped
/// Kubernetes protobuf message, as the server sends it.
pub fn protobuf_encode(obj: &serde_json::Value) -> Option<Vec<u8>> {
    protobuf::encode_object(obj)
}
