//! The secure serving endpoint (upstream `cmd/kube-scheduler/app/server.go`): one HTTPS listener (default port 10259) with upstream's
//! handler chain — panic recovery → logging → cache-control → authentication (401) →
//! authorization (403) → mux — serving `/healthz`, `/livez`, `/readyz` (+ `/<endpoint>/<check>`),
//! `/metrics`, `/metrics/resources` (leader only), `/metrics/slis`, `/configz`, `/flagz` and
//! `/statusz`; anything else is 404.

mod auth;
mod dynamiccertificates;
mod healthz;
mod requestheader;
mod review;
mod tls;
mod token_cache;
mod workqueue;
pub mod zpages;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::Response;
use futures::FutureExt as _;
use http::{header, HeaderValue, Method, StatusCode};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use self::auth::UserInfo;
use self::dynamiccertificates::{
    CaContentProvider, ConfigMapCa, ConfigMapInformer, DynamicFileCa, DynamicServingCertificateController,
    DynamicServingFiles, ServingCert, UnionCa, AUTHENTICATION_CONFIGMAP_NAME, AUTHENTICATION_CONFIGMAP_NAMESPACE,
};
pub use self::healthz::{CheckFn, HealthCheck};
use self::requestheader::{
    HeaderSource, RequestHeaderAuthRequestController, RequestHeaderAuthenticator, RequestHeaderBundle,
};
use self::review::ReviewClient;
pub use self::tls::{PeerInfo, TlsMinVersion};
use crate::metrics::resources::{self, PodSource};
use crate::metrics::{exposition, PrometheusMetrics};

/// Upstream's component name, used by `/flagz` and `/statusz`.
pub const COMPONENT_NAME: &str = "kube-scheduler";

/// Serving, authentication and authorization settings (upstream's `--secure-port`, `--authentication-*` and `--authorization-*` flags).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `--bind-address` (default `0.0.0.0`).
    pub bind_address: IpAddr,
    /// `--secure-port` (default 10259; 0 disables serving).
    pub secure_port: u16,
    /// `--tls-cert-file`; with no cert/key an in-memory self-signed pair is used.
    pub tls_cert_file: Option<PathBuf>,
    /// `--tls-private-key-file`.
    pub tls_private_key_file: Option<PathBuf>,
    /// `--tls-min-version`.
    pub tls_min_version: TlsMinVersion,
    /// `--authentication-kubeconfig` (TokenReview client).
    pub authentication_kubeconfig: Option<PathBuf>,
    /// `--authentication-token-webhook-cache-ttl` (10 s).
    pub authentication_token_webhook_cache_ttl: Duration,
    /// `--authentication-skip-lookup`: do not read the client CA from
    /// `kube-system/extension-apiserver-authentication`.
    pub authentication_skip_lookup: bool,
    /// `--authentication-tolerate-lookup-failure` (true for the scheduler).
    pub authentication_tolerate_lookup_failure: bool,
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-client-ca-file`: front-proxy authentication with the header names of
    /// the `--requestheader-*` flags below (else they are read from the authentication
    /// ConfigMap, unless skipped).
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// `--requestheader-username-headers` (`x-remote-user`).
    pub requestheader_username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub requestheader_uid_headers: Vec<String>,
    /// `--requestheader-group-headers` (`x-remote-group`).
    pub requestheader_group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix` (`x-remote-extra-`).
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// `--requestheader-allowed-names`.
    pub requestheader_allowed_names: Vec<String>,
    /// `--authorization-kubeconfig` (SubjectAccessReview client).
    pub authorization_kubeconfig: Option<PathBuf>,
    /// `--authorization-always-allow-paths` (`/healthz`, `/readyz`, `/livez`).
    pub authorization_always_allow_paths: Vec<String>,
    /// `--authorization-webhook-cache-authorized-ttl` (10 s).
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (10 s).
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Use the in-cluster config for reviews when a kubeconfig is not given (upstream does;
    /// tests turn it off).
    pub in_cluster_fallback: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            secure_port: 10259,
            tls_cert_file: None,
            tls_private_key_file: None,
            tls_min_version: TlsMinVersion::default(),
            authentication_kubeconfig: None,
            authentication_token_webhook_cache_ttl: Duration::from_secs(10),
            authentication_skip_lookup: false,
            authentication_tolerate_lookup_failure: true,
            client_ca_file: None,
            requestheader_client_ca_file: None,
            requestheader_username_headers: vec!["x-remote-user".into()],
            requestheader_uid_headers: Vec::new(),
            requestheader_group_headers: vec!["x-remote-group".into()],
            requestheader_extra_headers_prefix: vec!["x-remote-extra-".into()],
            requestheader_allowed_names: Vec::new(),
            authorization_kubeconfig: None,
            authorization_always_allow_paths: vec!["/healthz".into(), "/readyz".into(), "/livez".into()],
            authorization_webhook_cache_authorized_ttl: Duration::from_secs(10),
            authorization_webhook_cache_unauthorized_ttl: Duration::from_secs(10),
            in_cluster_fallback: true,
        }
    }
}

/// What the endpoints serve.
#[derive(Clone)]
pub struct ServerState {
    /// `/metrics`.
    pub metrics: Arc<PrometheusMetrics>,
    /// `/healthz` checks (`ping` when empty; upstream: `leaderElection` when leader election is on).
    pub healthz: Vec<HealthCheck>,
    /// `/livez` checks (`ping` when empty).
    pub livez: Vec<HealthCheck>,
    /// `/readyz` checks (upstream: `leaderElection`, `shutdown`, `sched-handler-sync`).
    pub readyz: Vec<HealthCheck>,
    /// The effective configuration as v1 JSON (with apiVersion/kind), for `/configz`.
    pub configz: Option<serde_json::Value>,
    /// True while this instance leads; `/metrics/resources` is empty otherwise.
    pub is_leader: Arc<AtomicBool>,
    /// Pods for `/metrics/resources`.
    pub pods: Option<PodSource>,
    /// Flags and their values for `/flagz` (sorted on output).
    pub flagz: Vec<(String, String)>,
    /// Version reported by `/statusz`.
    pub binary_version: String,
    /// Emulated version (`major.minor`) reported by `/statusz`.
    pub emulation_version: String,
    /// `/debug/explain/{namespace}/{pod}`, once the scheduler runs.
    pub explain: crate::explain::live::ExplainSlot,
}

impl ServerState {
    /// A state with only metrics; everything else empty (health endpoints answer `ping`).
    pub fn new(metrics: Arc<PrometheusMetrics>) -> Self {
        ServerState {
            metrics,
            healthz: Vec::new(),
            livez: Vec::new(),
            readyz: Vec::new(),
            configz: None,
            is_leader: Arc::new(AtomicBool::new(false)),
            pods: None,
            flagz: Vec::new(),
            binary_version: crate::options::version::GIT_VERSION.to_string(),
            emulation_version: format!("{}.{}", crate::options::version::MAJOR, crate::options::version::MINOR),
            explain: Default::default(),
        }
    }
}

/// A running (or disabled) server.
pub struct ServerHandle {
    local_addr: Option<SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    accept_loop: Option<JoinHandle<()>>,
    /// The certificate controllers and the ConfigMap informer.
    controllers: Tasks,
}

/// Background tasks that end with their owner (aborted when dropped), so a server that fails to
/// start or is shut down leaves no controller running.
#[derive(Default)]
struct Tasks(Vec<JoinHandle<()>>);

impl Tasks {
    fn push(&mut self, task: JoinHandle<()>) {
        self.0.push(task);
    }
}

impl Extend<JoinHandle<()>> for Tasks {
    fn extend<I: IntoIterator<Item = JoinHandle<()>>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

impl ServerHandle {
    /// The bound address; `None` when serving is disabled (`--secure-port=0`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// Stops accepting connections and waits up to `timeout` for in-flight requests
    /// (upstream uses 5 s), then drops the rest.
    pub async fn shutdown(mut self, timeout: Duration) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(timeout, &mut task).await.is_err() {
                tracing::warn!("secure server did not shut down within {timeout:?}; closing connections");
                task.abort();
            }
        }
        // Close the listening socket before returning.
        if let Some(accept) = self.accept_loop.take() {
            accept.abort();
            let _ = accept.await;
        }
        self.controllers = Tasks::default();
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(accept) = self.accept_loop.take() {
            accept.abort();
        }
        self.controllers = Tasks::default();
    }
}

struct App {
    state: ServerState,
    authn: auth::Authenticator,
    authz: auth::Authorizer,
    sli: healthz::SliMetrics,
    started: SystemTime,
    started_instant: Instant,
}

/// The CA bundles and header names of client-certificate and front-proxy authentication, and
/// the controllers that keep them current (upstream's `DelegatingAuthenticationOptions.ApplyTo`).
struct ClientAuthentication {
    client_ca: Option<Arc<dyn CaContentProvider>>,
    request_header_ca: Option<Arc<dyn CaContentProvider>>,
    request_header: Option<RequestHeaderAuthenticator>,
    tasks: Tasks,
}

async fn client_authentication(
    cfg: &ServerConfig,
    client: Option<&ReviewClient>,
) -> anyhow::Result<ClientAuthentication> {
    let mut tasks = Tasks::default();
    let lookup = client.filter(|_| !cfg.authentication_skip_lookup);
    let informer = lookup.map(|c| {
        ConfigMapInformer::new(
            c.api_client().clone(),
            AUTHENTICATION_CONFIGMAP_NAMESPACE,
            AUTHENTICATION_CONFIGMAP_NAME,
        )
    });
    let mut informer_used = false;
    let no_kubeconfig = |what: &str| {
        if !cfg.authentication_skip_lookup {
            tracing::warn!(
                "No authentication-kubeconfig provided in order to lookup {what} in configmap/{AUTHENTICATION_CONFIGMAP_NAME} \
                 in {AUTHENTICATION_CONFIGMAP_NAMESPACE}, so {} authentication won't work.",
                if what == "client-ca-file" { "client certificate" } else { "request-header client certificate" }
            );
        }
    };

    let client_ca: Option<Arc<dyn CaContentProvider>> = match (&cfg.client_ca_file, &informer) {
        (Some(path), _) => {
            let ca = DynamicFileCa::new("client-ca-bundle", path).context("unable to load client CA provider")?;
            tasks.extend(ca.run());
            Some(ca)
        }
        (None, Some(informer)) => {
            let ca = ConfigMapCa::new("client-ca", "client-ca-file", informer.clone());
            ca.run_once().await;
            tasks.extend(ca.run());
            informer_used = true;
            Some(ca)
        }
        (None, None) => {
            no_kubeconfig("client-ca-file");
            None
        }
    };

    let (request_header_ca, request_header): (Option<Arc<dyn CaContentProvider>>, _) = match (
        &cfg.requestheader_client_ca_file,
        &informer,
    ) {
        (Some(path), _) => {
            let file = DynamicFileCa::new("request-header", path)
                .context("unable to create request header authentication config")?;
            tasks.extend(file.run());
            let ca: Arc<dyn CaContentProvider> = file;
            let names = RequestHeaderBundle {
                username_headers: cfg.requestheader_username_headers.clone(),
                uid_headers: cfg.requestheader_uid_headers.clone(),
                group_headers: cfg.requestheader_group_headers.clone(),
                extra_header_prefixes: cfg.requestheader_extra_headers_prefix.clone(),
                allowed_client_names: cfg.requestheader_allowed_names.clone(),
            };
            let authenticator = RequestHeaderAuthenticator::new(ca.clone(), HeaderSource::Static(names));
            (Some(ca), Some(authenticator))
        }
        (None, Some(informer)) => {
            let ca = ConfigMapCa::new("client-ca", "requestheader-client-ca-file", informer.clone());
            let names = RequestHeaderAuthRequestController::new(informer.clone());
            ca.run_once().await;
            match names.run_once().await {
                Ok(()) => {
                    tasks.extend(ca.run());
                    tasks.push(names.run());
                    informer_used = true;
                    let ca: Arc<dyn CaContentProvider> = ca;
                    let authenticator = RequestHeaderAuthenticator::new(ca.clone(), HeaderSource::Dynamic(names));
                    (Some(ca), Some(authenticator))
                }
                Err(e) if cfg.authentication_tolerate_lookup_failure => {
                    tracing::warn!("Error looking up in-cluster authentication configuration: {e}");
                    tracing::warn!(
                        "Continuing without authentication configuration. This may treat all requests as anonymous."
                    );
                    tracing::warn!("To require authentication configuration lookup to succeed, set --authentication-tolerate-lookup-failure=false");
                    (None, None)
                }
                Err(e) => anyhow::bail!("unable to load configmap based request-header-client-ca-file: {e}"),
            }
        }
        (None, None) => {
            no_kubeconfig("requestheader-client-ca-file");
            (None, None)
        }
    };
    if let (Some(informer), true) = (&informer, informer_used) {
        tasks.push(informer.run());
    }
    Ok(ClientAuthentication { client_ca, request_header_ca, request_header, tasks })
}

/// Starts the secure server in the background. With `secure_port == 0` nothing is served and the
/// handle is inert.
pub async fn serve(cfg: ServerConfig, state: ServerState) -> anyhow::Result<ServerHandle> {
    if cfg.secure_port == 0 {
        tracing::info!("--secure-port=0: not serving health, metrics or debug endpoints");
        return Ok(ServerHandle {
            local_addr: None,
            shutdown: None,
            task: None,
            accept_loop: None,
            controllers: Tasks::default(),
        });
    }
    let authn_client =
        ReviewClient::new(cfg.authentication_kubeconfig.as_deref(), cfg.in_cluster_fallback, "authentication").await?;
    let authz_client =
        ReviewClient::new(cfg.authorization_kubeconfig.as_deref(), cfg.in_cluster_fallback, "authorization").await?;
    let ClientAuthentication { client_ca, request_header_ca, request_header, mut tasks } =
        client_authentication(&cfg, authn_client.as_ref()).await?;
    let serving = match (&cfg.tls_cert_file, &cfg.tls_private_key_file) {
        (Some(c), Some(k)) => {
            let files = DynamicServingFiles::new("serving-cert", c, k)?;
            tasks.extend(files.run());
            ServingCert::Files(files)
        }
        (None, None) => {
            ServingCert::Static(Arc::new(tls::self_signed().context("generating a self-signed serving certificate")?))
        }
        _ => anyhow::bail!("--tls-cert-file and --tls-private-key-file must be given together"),
    };
    let trusted: Vec<Arc<dyn CaContentProvider>> = client_ca.iter().chain(request_header_ca.iter()).cloned().collect();
    let certificates = DynamicServingCertificateController::new(
        (!trusted.is_empty()).then_some(UnionCa(trusted)),
        serving,
        cfg.tls_min_version,
    )?;
    tasks.extend(certificates.run());
    let addr = SocketAddr::new(cfg.bind_address, cfg.secure_port);
    let tcp = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("failed to listen on {addr}"))?;
    let local_addr = tcp.local_addr()?;
    let (listener, accept_loop) = tls::TlsListener::new(tcp, certificates.current())?;

    let app = Arc::new(App {
        state,
        authn: auth::Authenticator::new(
            request_header,
            client_ca,
            authn_client,
            cfg.authentication_token_webhook_cache_ttl,
        ),
        authz: auth::Authorizer::new(
            authz_client,
            cfg.authorization_always_allow_paths.clone(),
            cfg.authorization_webhook_cache_authorized_ttl,
            cfg.authorization_webhook_cache_unauthorized_ttl,
        ),
        sli: healthz::SliMetrics::new(),
        started: SystemTime::now(),
        started_instant: Instant::now(),
    });
    let router = axum::Router::new().fallback(entry).with_state(app);
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, router.into_make_service_with_connect_info::<PeerInfo>())
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "secure server stopped with an error");
        }
    });
    tracing::info!(%local_addr, "serving securely");
    Ok(ServerHandle {
        local_addr: Some(local_addr),
        shutdown: Some(tx),
        task: Some(task),
        accept_loop: Some(accept_loop),
        controllers: tasks,
    })
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut r = Response::new(Body::from(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    r
}

fn typed(content_type: &'static str, body: String) -> Response {
    let mut r = text(StatusCode::OK, body);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A `metav1.Status` failure body, as the apiserver filters write.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code.as_u16(),
    });
    let mut body = body;
    if code == StatusCode::UNAUTHORIZED {
        // Unauthorized carries no details.
        if let Some(o) = body.as_object_mut() {
            o.remove("details");
        }
    }
    let mut r = typed("application/json", body.to_string());
    *r.status_mut() = code;
    r
}

/// The handler chain.
async fn entry(State(app): State<Arc<App>>, ConnectInfo(peer): ConnectInfo<PeerInfo>, req: Request) -> Response {
    let start = Instant::now();
    let method = req.method().clone();
    let uri = req.uri().clone();
    let chain = std::panic::AssertUnwindSafe(authenticated(app, peer.clone(), req)).catch_unwind();
    let (mut resp, user) = match chain.await {
        Ok(r) => r,
        Err(_) => {
            tracing::error!(%method, %uri, "panic while serving request");
            (status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "Internal error occurred: panic"), None)
        }
    };
    resp.headers_mut().entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-cache, private"));
    tracing::debug!(
        verb = %method,
        uri = %uri,
        latency = ?start.elapsed(),
        user = user.as_deref().unwrap_or(""),
        remote = %peer.remote,
        status = resp.status().as_u16(),
        "HTTP"
    );
    resp
}

async fn authenticated(app: Arc<App>, peer: PeerInfo, req: Request) -> (Response, Option<String>) {
    let creds = auth::Credentials { chain: peer.client_chain.as_deref(), headers: req.headers() };
    let user = match app.authn.authenticate(creds).await {
        Ok(u) => u,
        Err(e) => {
            tracing::error!(err = %e.0, "Unable to authenticate the request");
            return (status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized"), None);
        }
    };
    let path = req.uri().path().to_string();
    let verb = req.method().as_str().to_ascii_lowercase();
    let resp = match app.authz.authorize(&user, &verb, &path).await {
        Ok(auth::Decision::Allow) => mux(&app, &req),
        Ok(auth::Decision::Deny(reason) | auth::Decision::NoOpinion(reason)) => {
            let mut msg = format!("forbidden: User {:?} cannot {verb} path {path:?}", user.name);
            if !reason.is_empty() {
                msg = format!("{msg}: {reason}");
            }
            status(StatusCode::FORBIDDEN, "Forbidden", &msg)
        }
        Err(e) => {
            tracing::warn!("authorization error (user={:?}, verb={verb}, path={path:?}): {e}", user.name);
            status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &format!("Internal error occurred: {e}"))
        }
    };
    (resp, Some(user.name))
}

fn ping_if_empty(checks: &[HealthCheck]) -> std::borrow::Cow<'_, [HealthCheck]> {
    if checks.is_empty() {
        std::borrow::Cow::Owned(vec![HealthCheck::ping()])
    } else {
        std::borrow::Cow::Borrowed(checks)
    }
}

fn health(app: &App, endpoint: &str, rest: &str, query: Option<&str>) -> Response {
    let s = &app.state;
    let checks = ping_if_empty(match endpoint {
        "healthz" => &s.healthz,
        "livez" => &s.livez,
        _ => &s.readyz,
    });
    let r = if rest.is_empty() {
        healthz::root(endpoint, &checks, query, &app.sli)
    } else {
        match healthz::single(&checks, rest) {
            Some(r) => r,
            None => return not_found(),
        }
    };
    text(if r.ok { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR }, r.body)
}

fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "404 page not found\n")
}

const ZPAGE_WARNING: &str = "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.";

/// Paths listed by `/statusz`: upstream lists the first segment of each path registered before
/// it (so `/metrics/resources` and `/metrics/slis` show as `/metrics`, and `/statusz` itself,
/// installed last, is absent), sorted.
const LISTED_PATHS: &[&str] = &["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"];

fn delimiter() -> &'static str {
    const D: [&str; 4] = [":", ": ", "=", " "];
    D[rand::random_range(0..D.len())]
}

fn flagz(app: &App) -> String {
    let mut flags = app.state.flagz.clone();
    flags.sort();
    let sep = delimiter();
    let mut out = format!("\n{COMPONENT_NAME} flagz\n{ZPAGE_WARNING}\n");
    for (k, v) in flags {
        out.push_str(&format!("{k}{sep}{v}\n"));
    }
    out
}

fn statusz(app: &App) -> String {
    let d = delimiter();
    // Go's time.UnixDate.
    let started = chrono::DateTime::<chrono::Utc>::from(app.started).format("%a %b %e %H:%M:%S UTC %Y");
    let up = app.started_instant.elapsed().as_secs();
    let (h, m, s) = (up / 3600, (up / 60) % 60, up % 60);
    let version = binary_version(app);
    let emulation = &app.state.emulation_version;
    format!(
        "\n{COMPONENT_NAME} statusz\n{ZPAGE_WARNING}\n\nStarted{d} {started}\nUp{d} {h} hr {m:02} min {s:02} sec\n\
         Go version{d} {GO_VERSION}\nBinary version{d} {version}\nEmulation version{d} {emulation}\nPaths{d} {}\n",
        LISTED_PATHS.join(" ")
    )
}

/// What `/statusz` reports as the Go version: there is no Go runtime.
const GO_VERSION: &str = "n/a (rust)";

/// The binary version as upstream's statusz prints it (a parsed version: no leading `v`).
fn binary_version(app: &App) -> &str {
    app.state.binary_version.trim_start_matches('v')
}

/// Serves a z-page in the negotiated format: `page` renders the text, `fields` the structured
/// kind's fields.
fn zpage(
    req: &Request,
    kind: &str,
    page: impl FnOnce() -> Response,
    fields: impl FnOnce() -> serde_json::Value,
) -> Response {
    let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = match zpages::negotiate(accept, kind) {
        Ok(f) => f,
        Err(msg) => return status(StatusCode::NOT_ACCEPTABLE, "NotAcceptable", &msg),
    };
    let zpages::ZFormat::Structured { version, yaml } = format else { return page() };
    let body = match zpages::encode(kind, version, yaml, fields()) {
        Ok(b) => b,
        Err(e) => return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &e),
    };
    let mut r = typed(if yaml { "application/yaml" } else { "application/json" }, body);
    if format.deprecated() {
        let page = kind.to_ascii_lowercase();
        let warning =
            format!("299 - \"This version of the {page} endpoint is deprecated. Please use a newer version.\"");
        if let Ok(v) = HeaderValue::from_str(&warning) {
            r.headers_mut().insert(header::WARNING, v);
        }
    }
    r
}

/// The structured `Statusz` fields.
fn statusz_fields(app: &App) -> serde_json::Value {
    let started = chrono::DateTime::<chrono::Utc>::from(app.started).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    serde_json::json!({
        "startTime": started,
        "uptimeSeconds": app.started_instant.elapsed().as_secs(),
        "goVersion": GO_VERSION,
        "binaryVersion": binary_version(app),
        "emulationVersion": app.state.emulation_version,
        "paths": LISTED_PATHS,
    })
}

fn mux(app: &App, req: &Request) -> Response {
    let path = req.uri().path();
    let query = req.uri().query();
    let method = req.method();
    for endpoint in ["healthz", "livez", "readyz"] {
        if let Some(rest) = path.strip_prefix('/').and_then(|p| p.strip_prefix(endpoint)) {
            if rest.is_empty() {
                return health(app, endpoint, "", query);
            }
            if let Some(check) = rest.strip_prefix('/') {
                return health(app, endpoint, check, query);
            }
        }
    }
    let get = method == Method::GET || method == Method::HEAD;
    let format = || exposition::negotiate(req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let exposed = |openmetrics: String| {
        let f = format();
        typed(f.content_type(), f.render(&openmetrics, &Default::default()))
    };
    match path {
        "/metrics" if get => {
            let f = format();
            typed(f.content_type(), app.state.metrics.expose(f))
        }
        "/metrics/resources" if get => {
            if !app.state.is_leader.load(Ordering::Acquire) {
                return text(StatusCode::OK, "");
            }
            match &app.state.pods {
                Some(pods) => exposed(resources::encode(pods.clone())),
                None => text(StatusCode::OK, ""),
            }
        }
        "/metrics/slis" if get => {
            let f = format();
            typed(f.content_type(), app.sli.expose(f))
        }
        "/configz" if get => match &app.state.configz {
            Some(cfg) => typed("application/json", serde_json::json!({ "componentconfig": cfg }).to_string()),
            None => not_found(),
        },
        // Upstream's z-page handlers answer whatever the method.
        "/flagz" => zpage(
            req,
            "Flagz",
            || text(StatusCode::OK, flagz(app)),
            || {
                let flags: serde_json::Map<String, serde_json::Value> =
                    app.state.flagz.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect();
                serde_json::json!({ "flags": flags })
            },
        ),
        "/statusz" => zpage(req, "Statusz", || text(StatusCode::OK, statusz(app)), || statusz_fields(app)),
        p if get && p.starts_with(crate::explain::live::PATH_PREFIX) => {
            crate::explain::live::serve(&app.state.explain, p, query)
        }
        "/metrics" | "/metrics/resources" | "/metrics/slis" | "/configz" => {
            text(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not allowed on {path}\n"))
        }
        _ => not_found(),
    }
}
