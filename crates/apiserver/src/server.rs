//! HTTP front end: routing, authentication, content negotiation and the
//! REST verbs, mapped onto [`Store`](crate::Store).
//!
//! Kubernetes URLs are regular enough that one fallback handler parses them
//! (`/api/v1/namespaces/{ns}/{resource}/{name}/{sub}` and the `/apis/{g}/{v}`
//! equivalent) instead of registering a route per resource.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::response::{IntoResponse, Response};
use axum::Router;
use bytes::{BufMut, Bytes, BytesMut};
use http::{header, HeaderMap, Method, StatusCode};
use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::admission;
use crate::apply;
use crate::discovery;
use crate::error::{success_status, ApiError, Cause};
use crate::kubeconfig;
use crate::openapi;
use crate::patch::{apply_patch, PatchKind};
use crate::protobuf;
use crate::resources::{self, def, ids, Backing, ResourceDef, ResourceId};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{view_in, view_out, ListQuery, Store, StoreConfig, Stored, WatchStart};
use crate::table::{self, IncludeObject, TableOpts};
use crate::tls;
use crate::validation::{self, FieldValidation};
use crate::watch::{partial, Format, Render};

/// Server settings.
#[derive(Clone)]
pub struct ServerConfig {
    /// Address to bind (default `127.0.0.1:6443`; port 0 picks a free port).
    pub listen: SocketAddr,
    /// Bearer token clients must present; `None` generates a random one.
    pub token: Option<String>,
    /// Events kept for resuming watches (older resourceVersions get 410 Gone).
    pub history_capacity: usize,
    /// Per-watcher queue length before a slow watcher is dropped.
    pub watch_buffer: usize,
    /// Interval between watch BOOKMARK events.
    pub bookmark_interval: Duration,
    /// Faults to inject and the binding audit (default: none).
    pub faults: crate::faults::Faults,
    /// Extra routes served next to the API (e.g. `ksched local`'s `/ui/`), built from the store
    /// and served without the API's bearer-token check.
    pub extra_routes: Option<ExtraRoutes>,
}

/// Builds extra routes from the server's store.
pub type ExtraRoutes = Arc<dyn Fn(Store) -> Router + Send + Sync>;

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("history_capacity", &self.history_capacity)
            .field("watch_buffer", &self.watch_buffer)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("faults", &self.faults)
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let store = StoreConfig::default();
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            token: None,
            history_capacity: store.history_capacity,
            watch_buffer: store.watch_buffer,
            bookmark_interval: store.bookmark_interval,
            faults: Default::default(),
            extra_routes: None,
        }
    }
}

/// Entry point: starts a server.
pub struct ApiServer;

impl ApiServer {
    /// Binds the listener and serves in the background until [`RunningServer::shutdown`].
    pub async fn start(cfg: ServerConfig) -> anyhow::Result<RunningServer> {
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let token = cfg.token.clone().unwrap_or_else(random_token);
        let store = Store::new(StoreConfig {
            history_capacity: cfg.history_capacity,
            watch_buffer: cfg.watch_buffer,
            bookmark_interval: cfg.bookmark_interval,
        });
        let identity = tls::generate(addr.ip())?;
        let app = Arc::new(App { store: store.clone(), token: token.clone(), addr });
        let mut router = app_router(app);
        if let Some(extra) = &cfg.extra_routes {
            router = extra(store.clone()).merge(router);
        }
        let listener = tls::DualListener::new(listener, identity.acceptor)?;
        let (router, listener) = cfg.faults.install(router, listener, &store);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "API server stopped with an error");
            }
        });
        tracing::info!(%addr, "API server listening");
        Ok(RunningServer { addr, token, store, ca_pem: identity.ca_pem, shutdown: Some(tx), task })
    }
}

/// The HTTP service over a fresh store, without a listener: requests go straight through
/// the router (in-process callers and the fuzzers).
pub fn router_for_tests(token: &str) -> (Router, Store) {
    let store = Store::new(StoreConfig::default());
    let app =
        Arc::new(App { store: store.clone(), token: token.to_string(), addr: SocketAddr::from(([127, 0, 0, 1], 0)) });
    (app_router(app), store)
}

/// Every request goes to [`handle`], which does content negotiation (JSON, YAML, protobuf),
/// validation and dispatch; the served and the test router are this one.
fn app_router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

fn random_token() -> String {
    let n: u128 = rand::rng().random();
    format!("{n:032x}")
}

/// A started server.
pub struct RunningServer {
    addr: SocketAddr,
    token: String,
    store: Store,
    ca_pem: String,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where clients should connect: the bound address, or loopback when
    /// bound to an unspecified address (0.0.0.0 / ::).
    fn client_addr(&self) -> SocketAddr {
        let mut a = self.addr;
        if a.ip().is_unspecified() {
            a.set_ip(if a.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        a
    }

    /// `http://IP:PORT` (plain HTTP; fine for in-process clients such as the `kube` crate).
    pub fn url(&self) -> String {
        format!("http://{}", self.client_addr())
    }

    /// `https://IP:PORT`: the same port speaking TLS, which client-go needs
    /// before it will send the bearer token.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.client_addr())
    }

    /// PEM of the per-process CA that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A kubeconfig (cluster/user/context `ksched-local`) for this server:
    /// the HTTPS URL with the CA embedded and the bearer token.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&self.https_url(), &self.ca_pem, &self.token)
    }

    /// Writes [`Self::kubeconfig_yaml`] to `path` with mode 0600.
    pub fn write_kubeconfig(&self, path: &Path) -> anyhow::Result<()> {
        kubeconfig::write(path, &self.kubeconfig_yaml())
    }

    /// A handle to the object store for in-process use.
    pub fn store(&self) -> Store {
        self.store.clone()
    }

    /// Stops accepting requests, ends open watches and waits (bounded) for
    /// in-flight requests to finish.
    pub async fn shutdown(mut self) {
        self.store.close();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if tokio::time::timeout(Duration::from_secs(5), &mut self.task).await.is_err() {
            self.task.abort();
        }
    }
}

struct App {
    store: Store,
    token: String,
    addr: SocketAddr,
}

async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let proto = prefers_protobuf(req.headers());
    let resp = match dispatch(&app, req).await {
        Ok(r) => r,
        Err(e) if proto => {
            let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            proto_response(code, protobuf::encode_status(&e.to_status()))
        }
        Err(e) => e.into_response(),
    };
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    resp
}

fn json_response(code: StatusCode, body: Bytes) -> Response {
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp
}

fn value_response(code: StatusCode, v: &Value) -> Response {
    json_response(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

fn proto_response(code: StatusCode, body: Vec<u8>) -> Response {
    let mut resp = (code, Bytes::from(body)).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static(protobuf::MEDIA_TYPE));
    resp
}

/// A JSON object (with apiVersion and kind) as the negotiated encoding.
fn object_response(code: StatusCode, v: &Value, proto: bool) -> Response {
    match proto.then(|| protobuf::encode_object(v)).flatten() {
        Some(b) => proto_response(code, b),
        None => value_response(code, v),
    }
}

/// Whether the client's preferred acceptable media type is protobuf
/// (client-go sends `application/vnd.kubernetes.protobuf, */*`).
fn prefers_protobuf(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        match parts.next().unwrap_or_default().to_ascii_lowercase().as_str() {
            protobuf::MEDIA_TYPE => return !parts.any(|p| p.starts_with("as=Table")),
            "application/json" | "*/*" | "application/*" => return false,
            _ => {}
        }
    }
    false
}

fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    // Compare without early exit so timing does not leak the token.
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A parsed resource URL.
struct Target {
    rid: ResourceId,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
    watch_path: bool,
    /// Answer in protobuf (set from the Accept header).
    proto: bool,
}

enum Route {
    Health,
    Version,
    Api,
    Apis,
    Group(String),
    ResourceList(String, String),
    OpenApiV2,
    OpenApiV3(Option<String>),
    LegacyBindings(String),
    Resource(Target),
}

fn parse_route(path: &str) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let missing = || ApiError::no_route(path);
    match segs.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Ok(Route::Health),
        ["version"] => Ok(Route::Version),
        ["openapi", "v2"] => Ok(Route::OpenApiV2),
        ["openapi", "v3"] => Ok(Route::OpenApiV3(None)),
        ["openapi", "v3", rest @ ..] => Ok(Route::OpenApiV3(Some(rest.join("/")))),
        ["api"] => Ok(Route::Api),
        ["apis"] => Ok(Route::Apis),
        ["api", v] => Ok(Route::ResourceList(String::new(), v.to_string())),
        ["apis", g] => Ok(Route::Group(g.to_string())),
        ["apis", g, v] => Ok(Route::ResourceList(g.to_string(), v.to_string())),
        ["api", v, rest @ ..] => parse_resource("", v, rest).ok_or_else(missing),
        ["apis", g, v, rest @ ..] => parse_resource(g, v, rest).ok_or_else(missing),
        _ => Err(missing()),
    }
}

fn parse_resource(group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    let (watch_path, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let target = |plural: &str, ns: Option<&str>, name: Option<&&str>, sub: Option<&&str>| -> Option<Route> {
        let rid = resources::by_path(group, version, plural)?;
        let d = def(rid);
        if ns.is_some() && !d.namespaced {
            return None;
        }
        Some(Route::Resource(Target {
            rid,
            namespace: ns.map(String::from),
            name: name.map(|s| s.to_string()),
            sub: sub.map(|s| s.to_string()),
            watch_path,
            proto: false,
        }))
    };
    match rest {
        ["namespaces", ns, "bindings"] if group.is_empty() && !watch_path => {
            Some(Route::LegacyBindings(ns.to_string()))
        }
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            target("namespaces", None, Some(name), Some(sub))
        }
        ["namespaces", ns, plural, rest @ ..] if rest.len() <= 2 => target(plural, Some(ns), rest.first(), rest.get(1)),
        [plural, rest @ ..] if rest.len() <= 2 => target(plural, None, rest.first(), rest.get(1)),
        _ => None,
    }
}

type Params = HashMap<String, String>;

fn param<'a>(q: &'a Params, k: &str) -> Option<&'a str> {
    q.get(k).map(String::as_str).filter(|s| !s.is_empty())
}

fn flag(q: &Params, k: &str) -> bool {
    matches!(param(q, k), Some("1" | "true" | "True"))
}

async fn dispatch(app: &App, req: Request) -> Result<Response, ApiError> {
    let route = parse_route(req.uri().path())?;
    match route {
        Route::Health => return Ok((StatusCode::OK, "ok").into_response()),
        Route::Version => return Ok(value_response(StatusCode::OK, &discovery::version())),
        _ => {}
    }
    if !authorized(req.headers(), &app.token) {
        return Err(ApiError::unauthorized());
    }
    let q: Params = Query::try_from_uri(req.uri())
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
    match route {
        Route::Health | Route::Version => Err(ApiError::internal("unreachable")),
        Route::Api => Ok(value_response(StatusCode::OK, &discovery::api_versions(&app.addr.to_string()))),
        Route::Apis => Ok(value_response(StatusCode::OK, &discovery::api_group_list())),
        Route::Group(g) => discovery::api_group(&g)
            .map(|v| value_response(StatusCode::OK, &v))
            .ok_or_else(|| ApiError::no_route(&format!("/apis/{g}"))),
        Route::ResourceList(g, v) => discovery::resource_list(&g, &v)
            .map(|doc| value_response(StatusCode::OK, &doc))
            .ok_or_else(|| ApiError::no_route(req.uri().path())),
        Route::OpenApiV2 => Ok(openapi::serve_v2(req.headers())),
        Route::OpenApiV3(gv) => openapi::serve_v3(gv.as_deref(), req.headers()),
        Route::LegacyBindings(ns) => {
            let headers = req.headers().clone();
            let (_, body) = read_body(req, false).await?;
            let proto = prefers_protobuf(&headers);
            bind(app, &ns, None, body, flag_dry_run(&q), proto)
        }
        Route::Resource(t) => resource(app, t, q, req).await,
    }
}

fn flag_dry_run(q: &Params) -> bool {
    param(q, "dryRun") == Some("All")
}

/// Reads and decodes a request body. `patch` allows patch content types.
async fn read_body(req: Request, patch: bool) -> Result<(Option<PatchKind>, Value), ApiError> {
    let ct =
        req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json").to_string();
    let essence = ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence == protobuf::MEDIA_TYPE && !patch {
        let body = axum::body::to_bytes(req.into_body(), 64 << 20)
            .await
            .map_err(|e| ApiError::bad_request(format!("failed to read the request body: {e}")))?;
        let v = protobuf::decode_object(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        return Ok((None, v));
    }
    let kind = if patch {
        Some(PatchKind::from_content_type(&essence).ok_or_else(|| {
            ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, \
                 application/strategic-merge-patch+json (got {ct})"
            ))
        })?)
    } else {
        None
    };
    let body = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .map_err(|e| ApiError::bad_request(format!("failed to read the request body: {e}")))?;
    let yaml = essence.contains("yaml") && kind != Some(PatchKind::Json);
    let parsed = match serde_json::from_slice::<Value>(&body) {
        Ok(v) => v,
        Err(_) if yaml => {
            let text = std::str::from_utf8(&body).map_err(|_| ApiError::bad_request("request body is not UTF-8"))?;
            serde_saphyr::from_str::<Value>(text).map_err(|e| {
                ApiError::bad_request(format!("the body of the request could not be decoded as YAML: {e}"))
            })?
        }
        Err(e) => {
            return Err(ApiError::bad_request(format!("the body of the request could not be decoded as JSON: {e}")))
        }
    };
    Ok((kind, parsed))
}

/// Picks the response representation from the Accept header.
fn negotiate(headers: &HeaderMap, q: &Params) -> Result<(Render, bool), ApiError> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("").trim();
    if accept.is_empty() {
        return Ok((Render::Object, false));
    }
    let include = match param(q, "includeObject") {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    };
    for media in accept.split(',') {
        let mut parts = media.split(';').map(str::trim);
        let essence = parts.next().unwrap_or_default().to_ascii_lowercase();
        let proto = essence == protobuf::MEDIA_TYPE;
        if !proto && !matches!(essence.as_str(), "application/json" | "*/*" | "application/*") {
            continue;
        }
        let params: HashMap<String, String> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let get = |k: &str| params.get(k).map(String::as_str);
        match (get("as"), get("g"), get("v")) {
            (None, _, _) => return Ok((Render::Object, proto)),
            // Tables have no protobuf form.
            (Some("Table"), Some("meta.k8s.io"), Some(v @ ("v1" | "v1beta1"))) if !proto => {
                return Ok((Render::Table(TableOpts { include, beta: v == "v1beta1" }), false))
            }
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io"), Some("v1")) => {
                return Ok((Render::Partial("meta.k8s.io/v1"), proto))
            }
            (Some("PartialObjectMetadata" | "PartialObjectMetadataList"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Ok((Render::Partial("meta.k8s.io/v1beta1"), proto))
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf, application/json;as=Table;g=meta.k8s.io;v=v1 (got {accept})"
    )))
}

fn selectors(q: &Params, name: Option<&str>) -> Result<(Option<LabelSelector>, Option<FieldSelector>), ApiError> {
    let labels = param(q, "labelSelector")
        .map(LabelSelector::parse)
        .transpose()
        .map_err(ApiError::bad_request)?
        .filter(|l| !l.is_empty());
    let mut fields = param(q, "fieldSelector")
        .map(FieldSelector::parse)
        .transpose()
        .map_err(ApiError::bad_request)?
        .unwrap_or_default();
    if let Some(n) = name {
        fields.require("metadata.name", n);
    }
    Ok((labels, (!fields.is_empty()).then_some(fields)))
}

/// One stored object as a response in the negotiated representation.
fn respond_one(code: StatusCode, rid: ResourceId, s: &Stored, render: &Render, proto: bool) -> Response {
    if !proto {
        return json_response(code, render_one(rid, s, render));
    }
    let obj = view_out(rid).map_or_else(|| (*s.value).clone(), |f| f(&s.value));
    object_response(code, &render.one(def(rid), &obj), true)
}

/// Renders one stored object as a JSON response body.
fn render_one(rid: ResourceId, s: &Stored, render: &Render) -> Bytes {
    let view = view_out(rid);
    match (render, view) {
        (Render::Object, None) => s.json.clone(),
        _ => {
            let obj = view.map_or_else(|| (*s.value).clone(), |f| f(&s.value));
            Bytes::from(serde_json::to_vec(&render.one(def(rid), &obj)).unwrap_or_default())
        }
    }
}

async fn resource(app: &App, mut t: Target, q: Params, req: Request) -> Result<Response, ApiError> {
    t.proto = prefers_protobuf(req.headers());
    let d = def(t.rid);
    let method = req.method().clone();
    let ns = t.namespace.as_deref();
    if d.namespaced && ns.is_none() && t.name.is_some() {
        return Err(ApiError::no_route(req.uri().path()));
    }
    if matches!(d.backing, Backing::Review) {
        if method != Method::POST || t.name.is_some() {
            return Err(ApiError::method_not_allowed(method.as_str(), d.plural));
        }
        let (_, body) = read_body(req, false).await?;
        return Ok(review(app, d, body, t.proto));
    }
    let dry_run = flag_dry_run(&q);
    let watch = t.watch_path || flag(&q, "watch");
    match (t.name.as_deref(), t.sub.as_deref(), &method) {
        (None, None, &Method::GET) if watch => start_watch(app, &t, &q, req.headers(), None),
        (None, None, &Method::GET) => list(app, &t, &q, req.headers()),
        (None, None, &Method::POST) => {
            let (_, body) = read_body(req, false).await?;
            create(app, &t, body, WriteOpts::from_query(&q))
        }
        (None, None, &Method::DELETE) => {
            let (labels, fields) = selectors(&q, None)?;
            let view = view_out(t.rid);
            let filter = make_filter(labels, fields, view);
            let query = ListQuery { namespace: ns, filter: &filter, limit: None, continue_token: None };
            let deleted = app.store.delete_collection_in(t.rid, &query, dry_run)?;
            let rv = app.store.resource_version();
            Ok(list_response(t.rid, &deleted, rv, None, &Render::Object, t.proto))
        }
        (Some(name), None, &Method::GET) if watch => start_watch(app, &t, &q, req.headers(), Some(name)),
        (Some(name), None | Some("status"), &Method::GET) => {
            let (render, proto) = negotiate(req.headers(), &q)?;
            let s = app.store.get_in(t.rid, ns, name)?;
            Ok(respond_one(StatusCode::OK, t.rid, &s, &render, proto))
        }
        (Some(name), sub @ (None | Some("status")), &Method::PUT) => {
            let (_, body) = read_body(req, false).await?;
            update(app, &t, name, sub.is_some(), body, WriteOpts::from_query(&q))
        }
        (Some(name), sub @ (None | Some("status")), &Method::PATCH) => {
            let (kind, body) = read_body(req, true).await?;
            let kind = kind.unwrap_or(PatchKind::Merge);
            patch(app, &t, name, sub.is_some(), kind, body, WriteOpts::from_query(&q))
        }
        (Some(name), None, &Method::DELETE) => {
            let body = axum::body::to_bytes(req.into_body(), 1 << 20)
                .await
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
                json!({})
            } else if body.starts_with(protobuf::MAGIC) {
                protobuf::decode_object(&body)
                    .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
            } else {
                serde_json::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
            };
            let pre = opts.get("preconditions").map(|p| {
                let s = |k: &str| p.get(k).and_then(Value::as_str).map(String::from);
                (s("uid"), s("resourceVersion"))
            });
            let dry = dry_run || opts.pointer("/dryRun/0").and_then(Value::as_str) == Some("All");
            let s = app.store.delete_in(t.rid, ns, name, pre, dry)?;
            Ok(respond_one(StatusCode::OK, t.rid, &s, &Render::Object, t.proto))
        }
        (Some(name), Some("binding"), &Method::POST) if t.rid == ids::pods() => {
            let (_, body) = read_body(req, false).await?;
            bind(app, ns.unwrap_or("default"), Some(name), body, dry_run, t.proto)
        }
        (Some(_), Some("status" | "binding"), _) | (_, None, _) => {
            Err(ApiError::method_not_allowed(method.as_str(), &d.group_resource()))
        }
        _ => Err(ApiError::no_route(req.uri().path())),
    }
}

fn make_filter(
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
    view: Option<fn(&Value) -> Value>,
) -> impl Fn(&Value) -> bool {
    move |obj: &Value| {
        if labels.is_none() && fields.is_none() {
            return true;
        }
        let projected;
        let o = match view {
            Some(f) => {
                projected = f(obj);
                &projected
            }
            None => obj,
        };
        labels.as_ref().is_none_or(|l| l.matches_object(o)) && fields.as_ref().is_none_or(|f| f.matches(o))
    }
}

fn list_response(
    rid: ResourceId,
    items: &[Stored],
    rv: u64,
    cont: Option<&str>,
    render: &Render,
    proto: bool,
) -> Response {
    if !proto {
        return json_response(StatusCode::OK, list_body(rid, items, rv, cont, render));
    }
    let d = def(rid);
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    let view = view_out(rid);
    let (list_kind, api_version, msg) = match render {
        Render::Partial(av) => (
            "PartialObjectMetadataList".to_string(),
            av.to_string(),
            protobuf::message_for(av, "PartialObjectMetadata"),
        ),
        _ => (d.list_kind(), d.api_version(), Some(protobuf::message_of(d))),
    };
    let msg = msg.unwrap_or_default();
    let encoded: Vec<Vec<u8>> = items
        .iter()
        .map(|s| {
            let obj = view.map_or_else(|| (*s.value).clone(), |f| f(&s.value));
            protobuf::codec::encode(&msg, &render.one(d, &obj))
        })
        .collect();
    proto_response(StatusCode::OK, protobuf::encode_list(&api_version, &list_kind, &meta, &encoded))
}

fn list_body(rid: ResourceId, items: &[Stored], rv: u64, cont: Option<&str>, render: &Render) -> Bytes {
    let d = def(rid);
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    let view = view_out(rid);
    if let Render::Table(opts) = render {
        let objs: Vec<Value> = items.iter().map(|s| view.map_or_else(|| (*s.value).clone(), |f| f(&s.value))).collect();
        let refs: Vec<&Value> = objs.iter().collect();
        let t = table::table_for(d, &refs, opts, meta);
        return Bytes::from(serde_json::to_vec(&t).unwrap_or_default());
    }
    let (kind, api_version) = match render {
        Render::Partial(av) => ("PartialObjectMetadataList".to_string(), av.to_string()),
        _ => (d.list_kind(), d.api_version()),
    };
    let total: usize = items.iter().map(|s| s.json.len() + 1).sum();
    let mut out = BytesMut::with_capacity(total + 256);
    out.put_slice(format!("{{\"kind\":\"{kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":").as_bytes());
    out.put_slice(&serde_json::to_vec(&meta).unwrap_or_default());
    out.put_slice(b",\"items\":[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        match (render, view) {
            (Render::Object, None) => out.put_slice(&s.json),
            (Render::Partial(av), _) => out.put_slice(&serde_json::to_vec(&partial(av, &s.value)).unwrap_or_default()),
            (_, Some(f)) => out.put_slice(&serde_json::to_vec(&f(&s.value)).unwrap_or_default()),
            (Render::Table(_), None) => {}
        }
    }
    out.put_slice(b"]}");
    out.freeze()
}

fn list(app: &App, t: &Target, q: &Params, headers: &HeaderMap) -> Result<Response, ApiError> {
    let (render, proto) = negotiate(headers, q)?;
    let (labels, fields) = selectors(q, None)?;
    let filter = make_filter(labels, fields, view_out(t.rid));
    let limit = param(q, "limit")
        .map(|l| l.parse::<usize>().map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}"))))
        .transpose()?;
    let query =
        ListQuery { namespace: t.namespace.as_deref(), filter: &filter, limit, continue_token: param(q, "continue") };
    let page = app.store.list_in(t.rid, &query)?;
    Ok(list_response(t.rid, &page.items, page.rv, page.continue_token.as_deref(), &render, proto))
}

fn start_watch(
    app: &App,
    t: &Target,
    q: &Params,
    headers: &HeaderMap,
    name: Option<&str>,
) -> Result<Response, ApiError> {
    let (render, proto) = negotiate(headers, q)?;
    let (labels, fields) = selectors(q, name)?;
    let rv = param(q, "resourceVersion");
    let send_initial = param(q, "sendInitialEvents").map(|v| v == "true");
    let start = match (send_initial, rv) {
        (Some(true), _) => WatchStart::State { end_bookmark: true },
        (_, None | Some("0")) if send_initial != Some(false) => WatchStart::State { end_bookmark: false },
        (_, None | Some("0")) => WatchStart::After(app.store.resource_version()),
        (_, Some(rv)) => WatchStart::After(rv.parse().map_err(|_| {
            ApiError::invalid("WatchOptions", "", vec![Cause::invalid("resourceVersion", rv, "must be a number")])
        })?),
    };
    let timeout = param(q, "timeoutSeconds")
        .map(|s| s.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {s:?}"))))
        .transpose()?
        .filter(|s| *s > 0)
        .map(Duration::from_secs);
    let fmt = Format { def: def(t.rid), labels, fields, view: view_out(t.rid), render, proto };
    let stream =
        app.store.watch_in(t.rid, t.namespace.as_deref(), start, fmt, flag(q, "allowWatchBookmarks"), timeout)?;
    let mut resp = Response::new(Body::from_stream(stream));
    let ct = if proto { protobuf::WATCH_MEDIA_TYPE } else { "application/json" };
    resp.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static(ct));
    Ok(resp)
}

/// Checks the body's apiVersion/kind/namespace against the URL and fills them in.
fn reconcile_body(d: &ResourceDef, t: &Target, body: &mut Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    if let Some(av) = body.get("apiVersion").and_then(Value::as_str) {
        if av != d.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                d.api_version()
            )));
        }
    }
    if let Some(k) = body.get("kind").and_then(Value::as_str) {
        if k != d.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                d.kind
            )));
        }
    }
    if let Some(ns) = &t.namespace {
        let given = body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
        if !given.is_empty() && given != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    Ok(())
}

/// Query options of create/update/patch.
#[derive(Clone, Copy)]
struct WriteOpts<'a> {
    dry_run: bool,
    mode: FieldValidation,
    field_manager: Option<&'a str>,
}

impl<'a> WriteOpts<'a> {
    fn from_query(q: &'a Params) -> Self {
        WriteOpts {
            dry_run: flag_dry_run(q),
            mode: FieldValidation::parse(param(q, "fieldValidation")),
            field_manager: param(q, "fieldManager"),
        }
    }
}

/// Adds `Warning: 299 - "..."` headers (how kubectl learns about dropped unknown fields).
fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {}", serde_json::to_string(w).unwrap_or_default());
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn create(app: &App, t: &Target, mut body: Value, opts: WriteOpts) -> Result<Response, ApiError> {
    let WriteOpts { dry_run, mode, .. } = opts;
    let d = def(t.rid);
    reconcile_body(d, t, &mut body)?;
    if d.namespaced && t.namespace.is_none() {
        return Err(ApiError::method_not_allowed("POST", &format!("{} without a namespace", d.plural)));
    }
    let warnings = validation::decode(d, &mut body, mode)?;
    let s = app.store.create_from_request(t.rid, t.namespace.as_deref(), body, dry_run)?;
    Ok(with_warnings(respond_one(StatusCode::CREATED, t.rid, &s, &Render::Object, t.proto), &warnings))
}

/// Keeps status out of main-resource writes and everything but status (and
/// labels/annotations) out of `/status` writes, as the real registry does.
fn split_status(d: &ResourceDef, old: &Value, mut new: Value, status_only: bool) -> Value {
    if status_only {
        let mut out = old.clone();
        match new.get_mut("status").map(Value::take) {
            Some(st) => out["status"] = st,
            None => {
                if let Some(m) = out.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        for f in ["labels", "annotations", "resourceVersion"] {
            match new.pointer(&format!("/metadata/{f}")) {
                Some(v) => out["metadata"][f] = v.clone(),
                None if f != "resourceVersion" => {
                    if let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove(f);
                    }
                }
                None => {}
            }
        }
        out
    } else {
        if d.has_status {
            match old.get("status") {
                Some(st) => new["status"] = st.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        new
    }
}

fn update(
    app: &App,
    t: &Target,
    name: &str,
    status_only: bool,
    mut body: Value,
    opts: WriteOpts,
) -> Result<Response, ApiError> {
    let WriteOpts { dry_run, mode, .. } = opts;
    let d = def(t.rid);
    reconcile_body(d, t, &mut body)?;
    let warnings = validation::decode(d, &mut body, mode)?;
    let given = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if !given.is_empty() && given != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    let ns = t.namespace.as_deref();
    let body = view_in(t.rid, body);
    let result =
        app.store.update_in(t.rid, ns, name, dry_run, |old| Ok(split_status(d, old, body.clone(), status_only)));
    match result {
        Err(e) if e.code == 404 && !status_only && matches!(d.plural, "leases" | "events") => {
            let mut body = body;
            set_name(&mut body, name);
            let s = app.store.create_in(resources::storage_id(t.rid), ns, body, dry_run)?;
            Ok(with_warnings(respond_one(StatusCode::CREATED, t.rid, &s, &Render::Object, t.proto), &warnings))
        }
        Err(e) => Err(e),
        Ok(s) => Ok(with_warnings(respond_one(StatusCode::OK, t.rid, &s, &Render::Object, t.proto), &warnings)),
    }
}

fn patch(
    app: &App,
    t: &Target,
    name: &str,
    status_only: bool,
    kind: PatchKind,
    body: Value,
    opts: WriteOpts,
) -> Result<Response, ApiError> {
    let WriteOpts { dry_run, mode, .. } = opts;
    let d = def(t.rid);
    let ns = t.namespace.as_deref();
    let view = view_out(t.rid);
    let rid = t.rid;
    let mut warnings = Vec::new();
    let manager = match (kind, opts.field_manager) {
        (PatchKind::Apply, None) => {
            return Err(ApiError::invalid_in(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![Cause::required_because("fieldManager", "is required for apply patch")],
            ))
        }
        (_, m) => m.unwrap_or_default().to_string(),
    };
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let result = app.store.update_in(t.rid, ns, name, dry_run, |old| {
        let base = view.map_or_else(|| old.clone(), |f| f(old));
        let patched = if kind == PatchKind::Apply {
            apply::apply(&base, &body, &manager, &d.api_version(), &now)
        } else {
            apply_patch(kind, &base, &body)
        }
        .map_err(|e| ApiError::invalid(d.kind, name, vec![Cause::invalid("patch", "", &e)]))?;
        if !patched.is_object() {
            return Err(ApiError::invalid(
                d.kind,
                name,
                vec![Cause::invalid("patch", "", "the patched document must be an object")],
            ));
        }
        let mut patched = patched;
        warnings = validation::decode(d, &mut patched, mode)?;
        let patched = view_in(rid, patched);
        Ok(split_status(d, old, patched, status_only))
    });
    match result {
        Ok(s) => Ok(with_warnings(respond_one(StatusCode::OK, t.rid, &s, &Render::Object, t.proto), &warnings)),
        Err(e) if e.code == 404 && kind == PatchKind::Apply && !status_only => {
            // Server-side apply creates missing objects.
            let mut obj = apply::apply(&json!({}), &body, &manager, &d.api_version(), &now)
                .map_err(|e| ApiError::invalid(d.kind, name, vec![Cause::invalid("patch", "", &e)]))?;
            set_name(&mut obj, name);
            let warnings = validation::decode(d, &mut obj, mode)?;
            let s = app.store.create_in(t.rid, ns, obj, dry_run)?;
            Ok(with_warnings(respond_one(StatusCode::CREATED, t.rid, &s, &Render::Object, t.proto), &warnings))
        }
        Err(e) => Err(e),
    }
}

/// Sets `metadata.name`, replacing a malformed `metadata` if need be.
fn set_name(obj: &mut Value, name: &str) {
    if !obj.is_object() {
        *obj = json!({});
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]["name"] = json!(name);
}

/// `pods/binding`: assigns an unbound pod to a node exactly once.
fn bind(app: &App, ns: &str, pod: Option<&str>, body: Value, dry_run: bool, proto: bool) -> Result<Response, ApiError> {
    let name = pod.or_else(|| body.pointer("/metadata/name").and_then(Value::as_str)).unwrap_or_default().to_string();
    let node = body.pointer("/target/name").and_then(Value::as_str).unwrap_or_default().to_string();
    if name.is_empty() || node.is_empty() {
        let mut causes = Vec::new();
        if name.is_empty() {
            causes.push(Cause::required("metadata.name"));
        }
        if node.is_empty() {
            causes.push(Cause::required("target.name"));
        }
        return Err(ApiError::invalid("Binding", &name, causes));
    }
    let uid = body.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let annotations = body.pointer("/metadata/annotations").and_then(Value::as_object).cloned();
    // Upstream's PodTopologyLabels admission (on by default) puts the node's
    // zone/region labels on the Binding, and the binding copies the Binding's
    // labels onto the pod, overwriting.
    let mut labels = body.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default();
    if body.pointer("/target/kind").and_then(Value::as_str).unwrap_or("Node") == "Node" {
        if let Ok(n) = app.store.get_in(ids::nodes(), None, &node) {
            labels.extend(admission::topology_labels(&n.value));
        }
    }
    app.store.update_in(ids::pods(), Some(ns), &name, dry_run, |old| {
        let gr = "pods/binding";
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict(
                gr,
                &name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        let have_uid = old.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        if !uid.is_empty() && uid != have_uid {
            return Err(ApiError::conflict(
                gr,
                &name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have_uid}"),
            ));
        }
        let current = old.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
        if !current.is_empty() {
            return Err(ApiError::conflict(
                gr,
                &name,
                &format!("pod {name} is already assigned to node \"{current}\""),
            ));
        }
        if old.pointer("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty()) {
            return Err(ApiError::conflict(gr, &name, &format!("pod {name} has non-empty .spec.schedulingGates")));
        }
        let mut new = old.clone();
        new["spec"]["nodeName"] = json!(node);
        // ClearingNominatedNodeNameAfterBinding (on by default): the nomination is spent.
        if let Some(st) = new.get_mut("status").and_then(Value::as_object_mut) {
            st.remove("nominatedNodeName");
        }
        if !labels.is_empty() {
            if !new["metadata"].get("labels").is_some_and(Value::is_object) {
                new["metadata"]["labels"] = json!({});
            }
            for (k, v) in &labels {
                new["metadata"]["labels"][k] = v.clone();
            }
        }
        if let Some(ann) = &annotations {
            let meta = &mut new["metadata"];
            if !meta.get("annotations").is_some_and(Value::is_object) {
                meta["annotations"] = json!({});
            }
            for (k, v) in ann {
                meta["annotations"][k] = v.clone();
            }
        }
        set_condition(&mut new, "PodScheduled", "True");
        Ok(new)
    })?;
    Ok(object_response(StatusCode::CREATED, &success_status(201), proto))
}

/// Upstream `UpdatePodCondition` with a bare `{type, status}`: the condition is
/// replaced (a previous reason and message go), keeping its transition time
/// when the status does not change.
fn set_condition(pod: &mut Value, ty: &str, status: &str) {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let conds = &mut pod["status"]["conditions"];
    if !conds.is_array() {
        *conds = json!([]);
    }
    if let Some(list) = conds.as_array_mut() {
        let fresh =
            |since: Value| json!({"type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
        match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(ty)) {
            Some(c) => {
                let same = c.get("status").and_then(Value::as_str) == Some(status);
                let since = if same { c.get("lastTransitionTime").cloned().unwrap_or(json!(now)) } else { json!(now) };
                *c = fresh(since);
            }
            None => list.push(fresh(json!(now))),
        }
    }
}

/// Token/access reviews: the local token is the cluster admin.
fn review(app: &App, d: &ResourceDef, mut body: Value, proto: bool) -> Response {
    let user = json!({"username": "ksched-admin", "groups": ["system:masters", "system:authenticated"]});
    let status = match d.kind {
        "TokenReview" => {
            let token = body.pointer("/spec/token").and_then(Value::as_str).unwrap_or_default();
            if token == app.token {
                json!({"authenticated": true, "user": user, "audiences": body.pointer("/spec/audiences").cloned().unwrap_or(json!([]))})
            } else {
                json!({"authenticated": false, "error": "invalid bearer token"})
            }
        }
        "SelfSubjectReview" => json!({"userInfo": user}),
        _ => json!({"allowed": true, "reason": "ksched-local grants everything to its token"}),
    };
    if !body.is_object() {
        body = json!({});
    }
    body["apiVersion"] = json!(d.api_version());
    body["kind"] = json!(d.kind);
    body["status"] = status;
    if !body.get("metadata").is_some_and(Value::is_object) {
        body["metadata"] = json!({});
    }
    object_response(StatusCode::CREATED, &body, proto)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let Ok(Route::Resource(t)) = parse_route("/api/v1/namespaces/default/pods/p/binding") else { panic!("route") };
        assert_eq!(
            (t.rid, t.namespace.as_deref(), t.name.as_deref(), t.sub.as_deref()),
            (ids::pods(), Some("default"), Some("p"), Some("binding"))
        );
        let Ok(Route::Resource(t)) = parse_route("/api/v1/namespaces/kube-system") else { panic!() };
        assert_eq!((t.rid, t.name.as_deref()), (ids::namespaces(), Some("kube-system")));
        let Ok(Route::Resource(t)) = parse_route("/apis/scheduling.k8s.io/v1/priorityclasses") else { panic!() };
        assert_eq!(t.rid, ids::priority_classes());
        let Ok(Route::Resource(t)) = parse_route("/api/v1/watch/namespaces/default/pods") else { panic!() };
        assert!(t.watch_path);
        assert!(parse_route("/api/v1/namespaces/default/nodes").is_err());
        assert!(parse_route("/api/v1/nope").is_err());
        assert!(matches!(parse_route("/apis/apps"), Ok(Route::Group(_))));
    }

    #[test]
    fn accept_negotiation() {
        let mut h = HeaderMap::new();
        let q = Params::new();
        h.insert(header::ACCEPT, "application/json;as=Table;v=v1;g=meta.k8s.io,application/json".parse().unwrap());
        assert!(matches!(negotiate(&h, &q), Ok((Render::Table(_), false))));
        h.insert(header::ACCEPT, "application/vnd.kubernetes.protobuf,application/json".parse().unwrap());
        assert!(matches!(negotiate(&h, &q), Ok((Render::Object, true))));
        assert!(prefers_protobuf(&h));
        h.insert(
            header::ACCEPT,
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json".parse().unwrap(),
        );
        assert!(matches!(negotiate(&h, &q), Ok((Render::Object, false))), "no protobuf tables");
        h.insert(header::ACCEPT, "application/yaml".parse().unwrap());
        assert_eq!(negotiate(&h, &q).unwrap_err().code, 406);
    }
}
