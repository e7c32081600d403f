//! The web view of `ksched local` at `/ui/`: nodes grouped by zone with their pods and
//! used/allocatable bars, each node's DRA devices with the share of each that every pod holds
//! (so a half-used GPU nobody else can use shows at a glance), pending pods with their
//! messages, and any pod's explanation. The page
//! is hand-written (no build step, no network) and served from the binary. It updates live from
//! `/ui/api/watch`, a server-sent-events stream fed by the store's watch on pods and nodes: each
//! message is a full snapshot whose `id` is the resourceVersion it reflects, so the browser's
//! automatic reconnect (which sends `Last-Event-ID`) resumes the watch where it left, and a
//! resourceVersion the history no longer holds (410 Expired) is answered with a fresh snapshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::StreamExt;
use ksched_apiserver::Store;
use ksched_scheduler::config::KubeSchedulerConfiguration;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

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
        .route("/ui/api/watch", get(watch))
        .route("/ui/api/state", get(state))
        .route("/ui/api/explain/{namespace}/{name}", get(explain))
        .with_state(ui)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-store")], body).into_response()
}

/// The kinds whose changes move the page.
const WATCHED: [(&str, &str); 4] =
    [("v1", "Pod"), ("v1", "Node"), ("resource.k8s.io/v1", "ResourceClaim"), ("resource.k8s.io/v1", "ResourceSlice")];

/// How long a burst of watch events is gathered into one snapshot: bounds the page's lag and the
/// snapshots per second when the scheduler binds thousands of pods.
const COALESCE: Duration = Duration::from_millis(50);

/// Where a watch resumes: `Last-Event-ID` (sent by the browser's automatic reconnect), else
/// `?resourceVersion=`; neither means "send the current state first".
fn resume_from(headers: &HeaderMap, query: &HashMap<String, String>) -> Option<u64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(query.get("resourceVersion").map(String::as_str))
        .and_then(|v| v.trim().parse().ok())
}

async fn watch(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    let mut rx = snapshots(ui.store.clone(), resume_from(&headers, &query));
    let events = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .map(|(rv, view)| Event::default().event("state").id(rv.to_string()).json_data(view).map_err(axum::Error::new));
    // The first frame sets a short reconnect delay: `ksched local` restarts are quick.
    let hello = futures::stream::once(async {
        Ok::<_, axum::Error>(Event::default().retry(Duration::from_secs(1)).comment("ksched"))
    });
    ([(header::CACHE_CONTROL, "no-store")], Sse::new(hello.chain(events)).keep_alive(KeepAlive::default()))
}

/// Snapshots of the page's state, one per burst of pod/node watch events after `resume` (or the
/// current state first when `resume` is `None`), each with the resourceVersion it reflects. A
/// watch that ends (its watcher fell behind) is resumed from the last snapshot sent; one that
/// reports an error (410 Expired: the history moved past us) is restarted at the current
/// resourceVersion with a full snapshot. Ends when the receiver is dropped.
fn snapshots(store: Store, resume: Option<u64>) -> mpsc::Receiver<(u64, StateView)> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut from = resume;
        loop {
            let start = from.unwrap_or_else(|| store.resource_version());
            let opened: Result<Vec<_>, _> = WATCHED.iter().map(|(v, k)| store.watch_kind(v, k, Some(start))).collect();
            let Ok(mut streams) = opened else {
                return; // shutting down
            };
            let mut flush_at = from.is_none().then(tokio::time::Instant::now);
            let mut next = futures::stream::select_all(
                streams.drain(..).map(|s| s.map(Some).chain(futures::stream::iter([None]))),
            );
            loop {
                let flush = async {
                    match flush_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = tx.closed() => return,
                    () = flush => {
                        let view = snapshot(&store);
                        let rv = view.resource_version;
                        if tx.send((rv, view)).await.is_err() {
                            return;
                        }
                        from = Some(rv);
                        flush_at = None;
                    }
                    frame = next.next() => match frame {
                        Some(Some(frame)) if is_error(&frame) => {
                            from = None;
                            break;
                        }
                        Some(Some(_)) => {
                            flush_at.get_or_insert_with(|| tokio::time::Instant::now() + COALESCE);
                        }
                        // One watch ended: resume both from what the page last saw.
                        Some(None) | None => break,
                    },
                }
            }
        }
    });
    rx
}

/// True when a watch frame carries an `ERROR` event (410 Expired, or the server stopping).
fn is_error(frame: &[u8]) -> bool {
    frame
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .any(|l| serde_json::from_slice::<Value>(l).is_ok_and(|v| v["type"] == "ERROR"))
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
    devices: Vec<DeviceView>,
}

/// One device of a node's ResourceSlices and who holds what of it.
#[derive(Debug, Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct DeviceView {
    /// `driver/pool/device`.
    id: String,
    /// The device name.
    name: String,
    /// Its `model` attribute, if any (what users recognise a GPU by).
    model: Option<String>,
    /// The capacity shared claims consume, with its value (`None`: the device goes whole).
    capacity: Option<String>,
    total: i64,
    /// What the allocations take, in the capacity's units (or `total` for a whole device).
    used: i64,
    /// Who holds it: pods (`namespace/name`), or the claim while no pod has reserved it.
    shares: Vec<ShareView>,
}

#[derive(Debug, Serialize)]
struct ShareView {
    /// The pods the claim is reserved for (comma-separated), or `claim namespace/name`.
    holder: String,
    amount: i64,
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
    /// The most recently created pod, and the node it is bound to (none while pending).
    newest: Option<String>,
    newest_node: Option<String>,
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
    axum::Json(snapshot(&ui.store)).into_response()
}

/// The page's state as the store holds it now. The resourceVersion is read first, so the view
/// reflects at least every write up to it.
fn snapshot(store: &Store) -> StateView {
    let rv = store.resource_version();
    let nodes = store.list("v1", "Node", None);
    let mut pods = store.list("v1", "Pod", None);
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
                devices: Vec::new(),
            };
            (name, view)
        })
        .collect();
    let mut pending = Vec::new();
    let mut newest: Option<(String, String, Option<String>)> = None;
    for p in &pods {
        let k = key(p);
        let created = p.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or("").to_string();
        if newest.as_ref().is_none_or(|(c, n, _)| (&created, &k) > (c, n)) {
            let node = p.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty());
            newest = Some((created, k.clone(), node.map(str::to_string)));
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
                let message = crate::local::why_unbound(p).unwrap_or_else(|| "pending".to_string());
                pending.push(PendingView { pod: k, message });
            }
        }
    }
    add_devices(store, &mut views);
    let mut zones: BTreeMap<String, Vec<NodeView>> = BTreeMap::new();
    for (_, v) in views {
        zones.entry(v.zone.clone()).or_default().push(v);
    }
    let (newest, newest_node) = newest.map_or((None, None), |(_, k, n)| (Some(k), n));
    StateView { resource_version: rv, zones, pending, pods: pods.len(), newest, newest_node }
}

/// The numeric value of a quantity in its own units (`1000` → 1000, `40Gi` → bytes; `500m`
/// rounds up to 1, as the API's integer value does).
fn amount(q: &Value) -> i64 {
    quantity(q, false)
}

/// Fills each node's devices from the node-local ResourceSlices (the newest generation of each
/// pool) and the allocations in ResourceClaims' status: a result with `consumedCapacity` takes
/// that much of the device's capacity (a share), any other takes the whole device. A claim's
/// holders are the pods it is reserved for, else the claim itself (allocated, not yet
/// reserved).
fn add_devices(store: &Store, views: &mut BTreeMap<String, NodeView>) {
    let slices = store.list("resource.k8s.io/v1", "ResourceSlice", None);
    let text = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    let mut newest: HashMap<(String, String), i64> = HashMap::new();
    for s in &slices {
        let g = s.pointer("/spec/pool/generation").and_then(Value::as_i64).unwrap_or(0);
        let e = newest.entry((text(s, "/spec/driver"), text(s, "/spec/pool/name"))).or_insert(g);
        *e = (*e).max(g);
    }
    let mut index: HashMap<String, (String, usize)> = HashMap::new();
    for s in &slices {
        let (driver, pool, node) = (text(s, "/spec/driver"), text(s, "/spec/pool/name"), text(s, "/spec/nodeName"));
        let g = s.pointer("/spec/pool/generation").and_then(Value::as_i64).unwrap_or(0);
        let Some(view) = views.get_mut(&node) else { continue };
        if newest.get(&(driver.clone(), pool.clone())) != Some(&g) {
            continue;
        }
        for d in s.pointer("/spec/devices").and_then(Value::as_array).into_iter().flatten() {
            let name = text(d, "/name");
            let model = d
                .pointer("/attributes")
                .and_then(Value::as_object)
                .and_then(|a| a.iter().find(|(k, _)| *k == "model" || k.ends_with("/model")))
                .and_then(|(_, v)| {
                    v.as_object()?.values().next().map(|x| x.as_str().map_or(x.to_string(), str::to_string))
                });
            // The capacity shared allocations consume: the first one, for a shareable device.
            let shareable = d.pointer("/allowMultipleAllocations").and_then(Value::as_bool).unwrap_or(false);
            let cap = shareable
                .then(|| {
                    d.pointer("/capacity")
                        .and_then(Value::as_object)?
                        .iter()
                        .next()
                        .map(|(k, v)| (k.clone(), amount(&v["value"])))
                })
                .flatten();
            let id = format!("{driver}/{pool}/{name}");
            index.insert(id.clone(), (node.clone(), view.devices.len()));
            view.devices.push(DeviceView {
                id,
                name,
                model,
                total: cap.as_ref().map_or(1, |c| c.1),
                capacity: cap.map(|c| c.0),
                ..Default::default()
            });
        }
    }
    if index.is_empty() {
        return;
    }
    for c in store.list("resource.k8s.io/v1", "ResourceClaim", None) {
        let ns = text(&c, "/metadata/namespace");
        let pods: Vec<String> = c
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter().filter(|x| x["resource"] == "pods").map(|x| format!("{ns}/{}", text(x, "/name"))).collect()
            })
            .unwrap_or_default();
        let holder =
            if pods.is_empty() { format!("claim {ns}/{}", text(&c, "/metadata/name")) } else { pods.join(", ") };
        for r in c.pointer("/status/allocation/devices/results").and_then(Value::as_array).into_iter().flatten() {
            if r.pointer("/adminAccess").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let id = format!("{}/{}/{}", text(r, "/driver"), text(r, "/pool"), text(r, "/device"));
            let Some((node, i)) = index.get(&id) else { continue };
            let Some(d) = views.get_mut(node).and_then(|v| v.devices.get_mut(*i)) else { continue };
            let taken = match (d.capacity.as_deref(), r.pointer("/consumedCapacity")) {
                (Some(name), Some(cc)) => cc.get(name).map_or(0, amount),
                _ => d.total,
            };
            d.used += taken;
            d.shares.push(ShareView { holder: holder.clone(), amount: taken });
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_apiserver::{ApiServer, ServerConfig};
    use serde_json::json;

    const WAIT: Duration = Duration::from_secs(20);

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    }

    async fn next(rx: &mut mpsc::Receiver<(u64, StateView)>) -> (u64, StateView) {
        tokio::time::timeout(WAIT, rx.recv()).await.expect("a snapshot in time").expect("stream open")
    }

    fn has(view: &StateView, key: &str) -> bool {
        view.pending.iter().any(|p| p.pod == key)
    }

    #[tokio::test]
    async fn watch_sends_current_state_then_a_snapshot_per_change_resumes_and_relists_after_410() {
        let srv = ApiServer::start(ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() })
            .await
            .unwrap();
        let store = srv.store();
        store.create(pod("a")).unwrap();

        // A fresh page gets the current state at once, labelled with its resourceVersion.
        let mut fresh = snapshots(store.clone(), None);
        let (rv, view) = next(&mut fresh).await;
        assert_eq!(rv, store.resource_version());
        assert!(has(&view, "default/a"));

        // A change is pushed without asking.
        store.create(pod("b")).unwrap();
        let (rv_b, view) = next(&mut fresh).await;
        assert!(rv_b > rv && has(&view, "default/b"), "{rv_b} {rv}");

        // Resuming from a resourceVersion still in the history replays what the page missed.
        let mut resumed = snapshots(store.clone(), Some(rv));
        let (_, view) = next(&mut resumed).await;
        assert!(has(&view, "default/b"));

        // Once the history moved past it (410 Expired), the page gets a full snapshot instead.
        store.compact();
        let mut expired = snapshots(store.clone(), Some(rv));
        let (rv_now, view) = next(&mut expired).await;
        assert_eq!(rv_now, store.resource_version());
        assert!(has(&view, "default/a") && has(&view, "default/b"));
        // ... and then follows the watch again.
        store.create(pod("c")).unwrap();
        let (_, view) = next(&mut expired).await;
        assert!(has(&view, "default/c"));
    }

    #[test]
    fn resume_point_prefers_last_event_id_over_the_query() {
        let mut h = HeaderMap::new();
        let q: HashMap<String, String> = [("resourceVersion".to_string(), "7".to_string())].into();
        assert_eq!(resume_from(&h, &HashMap::new()), None);
        assert_eq!(resume_from(&h, &q), Some(7));
        h.insert("last-event-id", "42".parse().unwrap());
        assert_eq!(resume_from(&h, &q), Some(42));
    }
}
