//! `/debug/explain/{namespace}/{pod}` on the secure port: the explanation of a pod against the
//! running scheduler's cache, with its own frameworks. Read-only: a fresh snapshot and cycle
//! state, no Reserve, no PostFilter actuation, no API call.

use std::sync::{Arc, OnceLock};

use http::StatusCode;
use ksched_framework::{NodeInfo, PodInfo, Snapshot};

use super::render::{self, NodeFilter};
use super::Explainer;
use crate::config::KubeSchedulerConfiguration;
use crate::scheduler::Scheduler;

/// Answers an explain request: `(namespace, name, query)` to `(status, content type, body)`.
pub type ExplainHandler = Arc<dyn Fn(&str, &str, Option<&str>) -> (StatusCode, &'static str, String) + Send + Sync>;

/// The slot the server reads, filled once the scheduler is running.
pub type ExplainSlot = Arc<OnceLock<ExplainHandler>>;

/// A handler explaining pods of `scheduler`'s profiles.
pub fn handler(cfg: &KubeSchedulerConfiguration, scheduler: &Arc<Scheduler>) -> ExplainHandler {
    let explainer = Arc::new(Explainer::from_profiles(cfg, &scheduler.profiles));
    let scheduler = Arc::downgrade(scheduler);
    Arc::new(move |namespace, name, query| {
        let Some(s) = scheduler.upgrade() else {
            return (StatusCode::SERVICE_UNAVAILABLE, "text/plain", "the scheduler is not running\n".into());
        };
        let Some(pod) = s.pod_lister.get(namespace, name) else {
            return (StatusCode::NOT_FOUND, "text/plain", format!("pod {namespace}/{name} not found\n"));
        };
        if !explainer.responsible_for(&pod) {
            return (
                StatusCode::NOT_FOUND,
                "text/plain",
                format!("pod {namespace}/{name} is not scheduled by any profile of this scheduler\n"),
            );
        }
        // Never `update_snapshot`: it would take the scheduler's pending incremental updates.
        let mut snapshot = s.cache.full_snapshot();
        // A bound pod is explained as if it were new: unbound, on the cluster without it.
        let bound_to = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
        let pi = match &bound_to {
            None => PodInfo::new(pod),
            Some(node) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let infos = snapshot
                    .list()
                    .iter()
                    .map(|n| {
                        let mut n = NodeInfo::clone(n);
                        if n.name() == node {
                            n.remove_pod(&uid);
                        }
                        n
                    })
                    .collect();
                snapshot = Snapshot::from_node_infos(infos);
                let mut unbound = (*pod).clone();
                unbound.spec.get_or_insert_with(Default::default).node_name = None;
                PodInfo::new(Arc::new(unbound))
            }
        };
        let nominated = s.nominated_pods(&pi, &snapshot);
        let mut ex = match explainer.explain(&snapshot, &pi, &nominated) {
            Ok(ex) => ex,
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, "text/plain", format!("{e}\n")),
        };
        ex.bound_to = bound_to;
        let param = |k: &str| {
            query.unwrap_or_default().split('&').find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        let filter: NodeFilter = match param("nodes").map(str::parse::<NodeFilter>).transpose() {
            Ok(f) => f.unwrap_or_default(),
            Err(e) => return (StatusCode::BAD_REQUEST, "text/plain", format!("{e}\n")),
        };
        match param("o").unwrap_or("json") {
            "table" => (StatusCode::OK, "text/plain; charset=utf-8", render::table(&ex, filter)),
            "json" => {
                render::filter_nodes(&mut ex, if filter == NodeFilter::None { NodeFilter::All } else { filter });
                let body = serde_json::to_string_pretty(&ex).unwrap_or_default() + "\n";
                (StatusCode::OK, "application/json", body)
            }
            other => (StatusCode::BAD_REQUEST, "text/plain", format!("o must be json or table (got {other:?})\n")),
        }
    })
}

/// Where the endpoint lives.
pub const PATH_PREFIX: &str = "/debug/explain/";

/// Serves `GET /debug/explain/{namespace}/{pod}[?o=json|table&nodes=all|failed|feasible]`.
pub fn serve(slot: &ExplainSlot, path: &str, query: Option<&str>) -> axum::response::Response {
    let (status, content_type, body) = match path.strip_prefix(PATH_PREFIX).and_then(|r| r.split_once('/')) {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => match slot.get() {
            Some(h) => h(ns, name, query),
            None => (StatusCode::SERVICE_UNAVAILABLE, "text/plain", "the scheduler has not started yet\n".into()),
        },
        _ => (StatusCode::NOT_FOUND, "text/plain", "404 page not found\n".into()),
    };
    let mut resp = axum::response::Response::new(axum::body::Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    resp
}
