//! The web view of `ksched local` at `/ui/`: nodes grouped by zone with their pods and
//! used/allocatable bars, pending pods with their messages, and any pod's explanation. The page
//! is hand-written (no build step, no network) and served from the binary; it refreshes whenever
//! the store's resourceVersion moves, i.e. on every write a watch would report.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use ksched_apiserver::Store;
use ksched_scheduler::config::KubeSchedulerConfiguration;
use serde::Serialize;
use serde_json::Value;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

struct Ui {
    store: Store,
    cfg: KubeSchedulerConfiguration,
}

/// The `/ui/` routes over `store`, explaining with `cfg`.
pub fn routes(store: Store, cfg: KubeSchedulerConfiguration) -> Router {
    let ui = Arc::new(Ui { store, cfg });
    Router::new()
        .route("/ui", get(|| async { axum::response::Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/ui/app.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
        .route("/ui/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/ui/api/version", get(version))
        .route("/ui/api/state", get(state))
        .route("/ui/api/explain/{namespace}/{name}", get(explain))
        .with_state(ui)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-store")], body).into_response()
}

async fn version(State(ui): State<Arc<Ui>>) -> String {
    ui.store.resource_version().to_string()
}

/// Requested and allocatable amounts of one resource.
#[derive(Debug, Serialize, Default, Clone, Copy)]
struct Usage {
    used: i64,
    allocatable: i64,
}

#[derive(Debug, Serialize)]
struct NodeView {
    name: String,
    zone: String,
    cpu: Usage,
    memory: Usage,
    unschedulable: bool,
    pods: Vec<String>,
}

#[derive(Debug, Serialize)]
struct PendingView {
    pod: String,
    message: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StateView {
    resource_version: u64,
    zones: BTreeMap<String, Vec<NodeView>>,
    pending: Vec<PendingView>,
    pods: usize,
    newest: Option<String>,
}

fn quantity(v: &Value, milli: bool) -> i64 {
    let s = v.as_str().unwrap_or("0");
    let r = if milli { ksched_framework::quantity::milli_value(s) } else { ksched_framework::quantity::value(s) };
    r.unwrap_or(0)
}

fn requests(pod: &Value, key: &str, milli: bool) -> i64 {
    let sum = |path: &str| -> Vec<i64> {
        pod.pointer(path)
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| c.pointer(&format!("/resources/requests/{key}")).map_or(0, |q| quantity(q, milli)))
                    .collect()
            })
            .unwrap_or_default()
    };
    // Effective request: the larger of the containers' sum and the largest init container.
    let main: i64 = sum("/spec/containers").iter().sum();
    let init = sum("/spec/initContainers").into_iter().max().unwrap_or(0);
    main.max(init)
}

fn key(p: &Value) -> String {
    let s = |ptr: &str| p.pointer(ptr).and_then(Value::as_str).unwrap_or("").to_string();
    format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
}

async fn state(State(ui): State<Arc<Ui>>) -> Response {
    let rv = ui.store.resource_version();
    let nodes = ui.store.list("v1", "Node", None);
    let mut pods = ui.store.list("v1", "Pod", None);
    pods.sort_by_key(key);
    let mut views: BTreeMap<String, NodeView> = nodes
        .iter()
        .map(|n| {
            let name = n.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
            let zone = n
                .pointer("/metadata/labels/topology.kubernetes.io~1zone")
                .and_then(Value::as_str)
                .unwrap_or("(no zone)")
                .to_string();
            let alloc =
                |k: &str, milli| n.pointer(&format!("/status/allocatable/{k}")).map_or(0, |q| quantity(q, milli));
            let view = NodeView {
                name: name.clone(),
                zone,
                cpu: Usage { used: 0, allocatable: alloc("cpu", true) },
                memory: Usage { used: 0, allocatable: alloc("memory", false) },
                unschedulable: n.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false),
                pods: Vec::new(),
            };
            (name, view)
        })
        .collect();
    let mut pending = Vec::new();
    let mut newest: Option<(String, String)> = None;
    for p in &pods {
        let k = key(p);
        let created = p.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or("").to_string();
        if newest.as_ref().is_none_or(|(c, n)| (&created, &k) > (c, n)) {
            newest = Some((created, k.clone()));
        }
        let phase = p.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        if matches!(phase, "Succeeded" | "Failed") {
            continue;
        }
        match p.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            Some(node) => {
                if let Some(v) = views.get_mut(node) {
                    v.cpu.used += requests(p, "cpu", true);
                    v.memory.used += requests(p, "memory", false);
                    v.pods.push(k);
                }
            }
            None => {
                let message = p
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled" && c["status"] == "False"))
                    .and_then(|c| c["message"].as_str())
                    .map(str::to_string)
                    .or_else(|| {
                        // Gated pods are never attempted: say what holds them, as `ksched local` does.
                        let gates: Vec<&str> = p
                            .pointer("/spec/schedulingGates")
                            .and_then(Value::as_array)
                            .map(|g| g.iter().filter_map(|g| g["name"].as_str()).collect())
                            .unwrap_or_default();
                        (!gates.is_empty()).then(|| format!("waiting for scheduling gates: [{}]", gates.join(" ")))
                    })
                    .unwrap_or_else(|| "pending".to_string());
                pending.push(PendingView { pod: k, message });
            }
        }
    }
    let mut zones: BTreeMap<String, Vec<NodeView>> = BTreeMap::new();
    for (_, v) in views {
        zones.entry(v.zone.clone()).or_default().push(v);
    }
    let view = StateView { resource_version: rv, zones, pending, pods: pods.len(), newest: newest.map(|(_, k)| k) };
    axum::Json(view).into_response()
}

async fn explain(State(ui): State<Arc<Ui>>, Path((namespace, name)): Path<(String, String)>) -> Response {
    let ui2 = ui.clone();
    // The framework run is CPU-bound: keep it off the serving threads.
    let text = tokio::task::spawn_blocking(move || -> anyhow::Result<String> {
        let cluster = crate::source::ClusterCopy::from_store(&ui2.store)?;
        let exs = crate::explain::explain_pods(&cluster, &ui2.cfg, &[format!("{namespace}/{name}")])?;
        crate::explain::render_all(exs, crate::explain::Output::Table, None)
    })
    .await;
    match text {
        Ok(Ok(t)) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], t).into_response(),
        Ok(Err(e)) => (StatusCode::NOT_FOUND, format!("{e:#}\n")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}
