//! Faults on demand: a layer around the router and the listener that makes the server
//! misbehave the way real control planes do, reproducibly (seeded) and at bounded rates
//! (see [`FaultSpec`] for the syntax).
//!
//! - `restart`: every connection and watch is dropped and connections are refused for a pause;
//!   the store (objects, resourceVersions, history) survives.
//! - `error`: a fraction of requests (writes by default) is answered 500 or 429 + Retry-After
//!   without being served.
//! - `latency`: a fraction of requests is delayed before being served.
//! - `watch-end`: watch streams end early, cleanly, as at their timeout.
//! - `compact`: the watch history is dropped, so resuming a watch gets 410 Gone (relist).
//! - `bind-conflict`: a binding is applied and answered 409, as if another binder won.
//!
//! The same layer can keep an audit of bindings and Lease writes with the client's User-Agent,
//! which chaos tests use to prove that every pod was bound once, by the leader of the moment.

mod io;
pub mod spec;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::StreamExt;
use http::{header, Method, StatusCode};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::store::Store;

pub(crate) use io::FaultListener;
pub use spec::{FaultSpec, SpecError, Verb};

/// A write the audit keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audited {
    /// A binding the server applied.
    Binding {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The node it was bound to.
        node: String,
    },
    /// A Lease created or updated (leader election acquiring or renewing).
    Lease {
        /// The lease's namespace.
        namespace: String,
        /// The lease's name.
        name: String,
        /// `spec.holderIdentity` as written.
        holder: String,
    },
}

/// One audited write, in the order the server answered them.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// What was written.
    pub what: Audited,
    /// The client's `User-Agent` (`fault:bind-conflict` for a binding answered with a made-up
    /// 409, so its client believes it failed).
    pub author: String,
    /// When the server answered.
    pub at: Instant,
}

/// One injected disruption, for recovery-time figures.
#[derive(Debug, Clone)]
pub struct FaultEvent {
    /// The fault kind (`restart`, `compact`, ...).
    pub kind: &'static str,
    /// When it started.
    pub at: Instant,
    /// When the server was back (the end of a restart's pause; `at` for the others).
    pub until: Instant,
}

/// How many times each fault fired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Restarts.
    pub restart: u64,
    /// Requests answered with an injected error.
    pub error: u64,
    /// Requests delayed.
    pub latency: u64,
    /// Watches ended early.
    pub watch_end: u64,
    /// Compactions.
    pub compact: u64,
    /// Bindings answered with an injected conflict.
    pub bind_conflict: u64,
}

impl FaultCounts {
    /// `(kind, count)` in [`spec::KINDS`] order.
    pub fn entries(&self) -> [(&'static str, u64); 6] {
        [
            ("restart", self.restart),
            ("error", self.error),
            ("latency", self.latency),
            ("watch-end", self.watch_end),
            ("compact", self.compact),
            ("bind-conflict", self.bind_conflict),
        ]
    }
}

const EVENT_LOG_LIMIT: usize = 10_000;

/// A token bucket capping how often one fault fires.
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn take(&mut self, rate: f64) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * rate).min(rate.max(1.0));
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A seeded random source and rate limit per fault kind, so one fault's draws do not depend on
/// which others are enabled.
struct Dice {
    rng: StdRng,
    bucket: Bucket,
}

impl Dice {
    fn new(seed: u64, kind: &str) -> Self {
        // FNV-1a of the kind name, mixed into the seed.
        let salt =
            kind.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        Dice { rng: StdRng::seed_from_u64(seed ^ salt), bucket: Bucket { tokens: f64::INFINITY, last: Instant::now() } }
    }

    /// True with probability `p`, at most `rate` times per second.
    fn roll(&mut self, p: f64, rate: f64) -> bool {
        p > 0.0 && self.rng.random_bool(p.min(1.0)) && self.bucket.take(rate)
    }

    /// A duration drawn from [every/2, 3·every/2].
    fn jitter(&mut self, every: Duration) -> Duration {
        every.mul_f64(self.rng.random_range(0.5..1.5))
    }
}

#[derive(Default)]
struct Counters {
    restart: AtomicU64,
    error: AtomicU64,
    latency: AtomicU64,
    watch_end: AtomicU64,
    compact: AtomicU64,
    bind_conflict: AtomicU64,
}

/// State shared by the layer, the listener and the periodic driver.
pub(crate) struct Shared {
    /// The spec and a version that changes with it.
    spec: Mutex<(Arc<FaultSpec>, u64)>,
    /// False while no fault is configured and no audit kept: the layer steps aside.
    active: AtomicBool,
    seed: u64,
    dice: Mutex<[Dice; 6]>,
    /// Ends when the current connections must go (a restart).
    generation: Mutex<CancellationToken>,
    /// Ends every watch open now (on demand).
    watch_generation: Mutex<CancellationToken>,
    paused_until: Mutex<Option<Instant>>,
    store: OnceLock<Store>,
    counters: Counters,
    events: Mutex<Vec<FaultEvent>>,
    audit: Option<Mutex<Vec<AuditRecord>>>,
}

impl Shared {
    fn dice(&self, kind: usize, f: impl FnOnce(&mut Dice) -> bool) -> bool {
        f(&mut self.dice.lock()[kind])
    }

    pub(crate) fn is_paused(&self) -> bool {
        let mut p = self.paused_until.lock();
        match *p {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                *p = None;
                false
            }
            None => false,
        }
    }

    pub(crate) fn generation(&self) -> CancellationToken {
        self.generation.lock().clone()
    }

    fn record(&self, kind: &'static str, at: Instant, until: Instant) {
        let mut ev = self.events.lock();
        if ev.len() >= EVENT_LOG_LIMIT {
            ev.remove(0);
        }
        ev.push(FaultEvent { kind, at, until });
    }
}

const RESTART: usize = 0;
const ERROR: usize = 1;
const LATENCY: usize = 2;
const WATCH_END: usize = 3;
const COMPACT: usize = 4;
const BIND_CONFLICT: usize = 5;

/// A handle on the faults of one server: pass it in [`crate::ServerConfig::faults`], keep a
/// clone to change the spec, trigger faults on demand and read what happened.
#[derive(Clone)]
pub struct Faults {
    shared: Arc<Shared>,
}

impl Default for Faults {
    /// No faults, no binding audit.
    fn default() -> Self {
        Faults::new(FaultSpec::default())
    }
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spec().to_string())
    }
}

impl Faults {
    /// Faults per `spec` (a missing seed is drawn now; [`Faults::spec`] shows it).
    pub fn new(spec: FaultSpec) -> Self {
        Self::build(spec, false)
    }

    /// Like [`Faults::new`], also keeping an audit of bindings and Lease writes (see
    /// [`Faults::take_audit`]).
    pub fn with_binding_audit(spec: FaultSpec) -> Self {
        Self::build(spec, true)
    }

    fn build(mut spec: FaultSpec, audit: bool) -> Self {
        let seed = *spec.seed.get_or_insert_with(|| rand::rng().random());
        let dice = spec::KINDS.map(|k| Dice::new(seed, k));
        Faults {
            shared: Arc::new(Shared {
                active: AtomicBool::new(audit || !spec.is_empty()),
                spec: Mutex::new((Arc::new(spec), 0)),
                seed,
                dice: Mutex::new(dice),
                generation: Mutex::new(CancellationToken::new()),
                watch_generation: Mutex::new(CancellationToken::new()),
                paused_until: Mutex::new(None),
                store: OnceLock::new(),
                counters: Counters::default(),
                events: Mutex::new(Vec::new()),
                audit: audit.then(|| Mutex::new(Vec::new())),
            }),
        }
    }

    /// The active spec, seed included.
    pub fn spec(&self) -> FaultSpec {
        (*self.shared.spec.lock().0).clone()
    }

    /// Replaces the active faults (the seed stays the one chosen at creation).
    pub fn set_spec(&self, mut spec: FaultSpec) {
        spec.seed = Some(self.shared.seed);
        self.shared.active.store(self.shared.audit.is_some() || !spec.is_empty(), Ordering::Relaxed);
        let mut s = self.shared.spec.lock();
        *s = (Arc::new(spec), s.1 + 1);
    }

    /// Drops every connection and watch now and refuses connections for `pause`.
    pub fn restart(&self, pause: Duration) {
        let now = Instant::now();
        *self.shared.paused_until.lock() = Some(now + pause);
        let old = std::mem::replace(&mut *self.shared.generation.lock(), CancellationToken::new());
        old.cancel();
        self.shared.counters.restart.fetch_add(1, Ordering::Relaxed);
        self.shared.record("restart", now, now + pause);
        tracing::warn!(pause = ?pause, "injected fault: API server restart");
    }

    /// Ends every open watch stream now (cleanly, as at its timeout).
    pub fn end_watches(&self) {
        let old = std::mem::replace(&mut *self.shared.watch_generation.lock(), CancellationToken::new());
        old.cancel();
        let now = Instant::now();
        self.shared.record("watch-end", now, now);
    }

    /// Drops the watch history now: resuming from an earlier resourceVersion gets 410 Gone.
    pub fn compact(&self) {
        if let Some(store) = self.shared.store.get() {
            store.compact();
        }
        self.shared.counters.compact.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        self.shared.record("compact", now, now);
        tracing::warn!("injected fault: watch history compacted");
    }

    /// How many times each fault fired so far.
    pub fn counts(&self) -> FaultCounts {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        FaultCounts {
            restart: get(&c.restart),
            error: get(&c.error),
            latency: get(&c.latency),
            watch_end: get(&c.watch_end),
            compact: get(&c.compact),
            bind_conflict: get(&c.bind_conflict),
        }
    }

    /// Disruptions so far (restarts, compactions, on-demand watch ends), oldest first.
    pub fn events(&self) -> Vec<FaultEvent> {
        self.shared.events.lock().clone()
    }

    /// Audited writes since the last call, in order (empty without the audit).
    pub fn take_audit(&self) -> Vec<AuditRecord> {
        self.shared.audit.as_ref().map(|b| std::mem::take(&mut *b.lock())).unwrap_or_default()
    }

    /// Puts the layer around `router`, the restart hook around `listener`, and starts the
    /// periodic faults (they stop when the store closes).
    pub(crate) fn install<L: axum::serve::Listener>(
        &self,
        router: Router,
        listener: L,
        store: &Store,
    ) -> (Router, FaultListener<L>) {
        let _ = self.shared.store.set(store.clone());
        let router = router.layer(axum::middleware::from_fn_with_state(self.clone(), layer));
        tokio::spawn(drive(self.clone(), store.clone()));
        (router, FaultListener::new(listener, self.shared.clone()))
    }
}

/// Fires the periodic faults (restart, compact) on their jittered schedules.
async fn drive(faults: Faults, store: Store) {
    let mut version = u64::MAX;
    let (mut next_restart, mut next_compact): (Option<Instant>, Option<Instant>) = (None, None);
    while !store.is_closed() {
        let (spec, v) = faults.shared.spec.lock().clone();
        let now = Instant::now();
        if v != version {
            version = v;
            next_restart = spec.restart.as_ref().map(|r| now + faults.shared.jitter(RESTART, r.every));
            next_compact = spec.compact.as_ref().map(|c| now + faults.shared.jitter(COMPACT, c.every));
        }
        if let (Some(t), Some(r)) = (next_restart, spec.restart.as_ref()) {
            if now >= t {
                faults.restart(r.pause);
                next_restart = Some(now + r.pause + faults.shared.jitter(RESTART, r.every));
            }
        }
        if let (Some(t), Some(c)) = (next_compact, spec.compact.as_ref()) {
            if now >= t {
                faults.compact();
                next_compact = Some(now + faults.shared.jitter(COMPACT, c.every));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Shared {
    fn jitter(&self, kind: usize, every: Duration) -> Duration {
        self.dice.lock()[kind].jitter(every)
    }
}

/// What the layer needs to know about a request.
struct Classified {
    verb: Option<Verb>,
    /// `(namespace, pod name if in the path)` of a binding.
    binding: Option<(String, Option<String>)>,
    /// The namespace of a Lease create or update.
    lease: Option<String>,
}

fn classify(method: &Method, path: &str, query: &str) -> Classified {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // The part after /api/v1 or /apis/GROUP/VERSION.
    let rest: &[&str] = match segs.as_slice() {
        ["api", _, rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return Classified { verb: None, binding: None, lease: None },
    };
    let watch_query = query.split('&').any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"));
    let (watch_path, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    // Resource segments without the namespace prefix: [plural] or [plural, name, sub...].
    let res: &[&str] = match rest {
        ["namespaces", _, r @ ..] if !r.is_empty() => r,
        r => r,
    };
    let named = res.len() >= 2;
    let verb = match *method {
        Method::GET if watch_path || watch_query => Some(Verb::Watch),
        Method::GET if named => Some(Verb::Get),
        Method::GET => Some(Verb::List),
        Method::POST => Some(Verb::Create),
        Method::PUT => Some(Verb::Update),
        Method::PATCH => Some(Verb::Patch),
        Method::DELETE => Some(Verb::Delete),
        _ => None,
    };
    let binding = match (method, segs.as_slice()) {
        (&Method::POST, ["api", "v1", "namespaces", ns, "pods", name, "binding"]) => {
            Some((ns.to_string(), Some(name.to_string())))
        }
        (&Method::POST, ["api", "v1", "namespaces", ns, "bindings"]) => Some((ns.to_string(), None)),
        _ => None,
    };
    let lease = match (method, segs.as_slice()) {
        (&Method::POST | &Method::PUT, ["apis", "coordination.k8s.io", "v1", "namespaces", ns, "leases", ..]) => {
            Some(ns.to_string())
        }
        _ => None,
    };
    Classified { verb, binding, lease }
}

fn too_many_requests(retry_after: u64) -> Response {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": retry_after}, "code": 429,
    });
    let mut resp = (StatusCode::TOO_MANY_REQUESTS, serde_json::to_vec(&status).unwrap_or_default()).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    if let Ok(v) = http::HeaderValue::from_str(&retry_after.to_string()) {
        h.insert(header::RETRY_AFTER, v);
    }
    resp
}

const BODY_LIMIT: usize = 16 << 20;

/// Ends a watch response's stream after `lifetime` (counted as a `watch-end`) or at the next
/// [`Faults::end_watches`], whichever comes first; the client sees a clean end of stream.
fn end_watch_early(faults: &Faults, lifetime: Option<Duration>, resp: Response) -> Response {
    if !resp.status().is_success() {
        return resp;
    }
    let ended = faults.shared.watch_generation.lock().clone();
    let faults = faults.clone();
    let stop = async move {
        match lifetime {
            Some(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {
                        faults.shared.counters.watch_end.fetch_add(1, Ordering::Relaxed);
                    }
                    _ = ended.cancelled() => {}
                }
            }
            None => ended.cancelled().await,
        }
    };
    let (parts, body) = resp.into_parts();
    Response::from_parts(parts, Body::from_stream(body.into_data_stream().take_until(stop)))
}

async fn layer(State(faults): State<Faults>, req: Request, next: Next) -> Response {
    let shared = &faults.shared;
    let c = classify(req.method(), req.uri().path(), req.uri().query().unwrap_or_default());
    let Some(verb) = c.verb else { return next.run(req).await };
    if !shared.active.load(Ordering::Relaxed) {
        // Watches stay subject to [`Faults::end_watches`].
        return match verb {
            Verb::Watch => end_watch_early(&faults, None, next.run(req).await),
            _ => next.run(req).await,
        };
    }
    let spec = shared.spec.lock().0.clone();

    let agent = user_agent(&req);
    let from = |a: &Option<String>| a.as_deref().is_none_or(|a| agent.contains(a));
    if let Some(l) = spec.latency.as_ref().filter(|l| l.verbs.contains(&verb) && from(&l.agent)) {
        let delay = {
            let mut d = shared.dice.lock();
            let dice = &mut d[LATENCY];
            dice.roll(l.p, l.rate).then(|| if l.max > l.min { dice.rng.random_range(l.min..=l.max) } else { l.min })
        };
        if let Some(delay) = delay {
            shared.counters.latency.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(delay).await;
        }
    }

    if let Some(e) = spec.error.as_ref().filter(|e| e.verbs.contains(&verb) && !e.codes.is_empty() && from(&e.agent)) {
        let code = {
            let mut d = shared.dice.lock();
            let dice = &mut d[ERROR];
            dice.roll(e.p, e.rate).then(|| e.codes[dice.rng.random_range(0..e.codes.len())])
        };
        if let Some(code) = code {
            shared.counters.error.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(path = %req.uri().path(), code, "injected fault: error response");
            return match code {
                429 => too_many_requests(e.retry_after),
                _ => ApiError::internal("Internal error occurred: injected fault").into_response(),
            };
        }
    }

    if verb == Verb::Watch {
        let lifetime = spec.watch_end.as_ref().map(|w| shared.jitter(WATCH_END, w.every));
        return end_watch_early(&faults, lifetime, next.run(req).await);
    }

    if let Some(ns) = c.lease.filter(|_| shared.audit.is_some()) {
        return audit_lease(shared, ns, req, next).await;
    }
    let Some((ns, path_name)) = c.binding else { return next.run(req).await };
    let conflict = spec.bind_conflict.as_ref().is_some_and(|b| shared.dice(BIND_CONFLICT, |d| d.roll(b.p, b.rate)));
    if !conflict && shared.audit.is_none() {
        return next.run(req).await;
    }
    // Bindings are small: read the body to learn the pod and node, then pass it on.
    let author = agent;
    let (resp, parsed) = match run_buffered(req, next).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    if !resp.status().is_success() {
        return resp;
    }
    let name = path_name
        .or_else(|| parsed.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    let node = parsed.pointer("/target/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let author = if conflict { "fault:bind-conflict".to_string() } else { author };
    shared.audit(Audited::Binding { namespace: ns, name: name.clone(), node: node.clone() }, author);
    if conflict {
        shared.counters.bind_conflict.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(pod = %name, %node, "injected fault: binding answered 409 after binding");
        let why = format!("pod {name} is already assigned to node \"{node}\"");
        return ApiError::conflict("pods/binding", &name, &why).into_response();
    }
    resp
}

fn user_agent(req: &Request) -> String {
    req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

/// Serves `req` with its (small) body read first; returns the response and the parsed body.
async fn run_buffered(req: Request, next: Next) -> Result<(Response, Value), Response> {
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) => return Err(ApiError::bad_request(format!("reading the request body: {e}")).into_response()),
    };
    let parsed: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let resp = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    Ok((resp, parsed))
}

async fn audit_lease(shared: &Shared, namespace: String, req: Request, next: Next) -> Response {
    let author = user_agent(&req);
    let (resp, parsed) = match run_buffered(req, next).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    if resp.status().is_success() {
        let s = |ptr: &str| parsed.pointer(ptr).and_then(Value::as_str).unwrap_or_default().to_string();
        shared
            .audit(Audited::Lease { namespace, name: s("/metadata/name"), holder: s("/spec/holderIdentity") }, author);
    }
    resp
}

impl Shared {
    fn audit(&self, what: Audited, author: String) {
        if let Some(log) = &self.audit {
            log.lock().push(AuditRecord { what, author, at: Instant::now() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classified_by_verb_and_bindings_found() {
        let cases = [
            ("GET", "/api/v1/pods", "", Some(Verb::List), None),
            ("GET", "/api/v1/namespaces/default/pods", "watch=true&resourceVersion=5", Some(Verb::Watch), None),
            ("GET", "/api/v1/watch/namespaces/default/pods", "", Some(Verb::Watch), None),
            ("GET", "/api/v1/namespaces/default/pods/p", "", Some(Verb::Get), None),
            ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l", "", Some(Verb::Get), None),
            ("GET", "/api/v1/nodes/n1", "", Some(Verb::Get), None),
            ("GET", "/api/v1/namespaces", "", Some(Verb::List), None),
            ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l", "", Some(Verb::Update), None),
            ("PATCH", "/api/v1/namespaces/default/pods/p/status", "", Some(Verb::Patch), None),
            ("DELETE", "/api/v1/namespaces/default/pods/p", "", Some(Verb::Delete), None),
            ("POST", "/api/v1/namespaces/ns1/pods/p/binding", "", Some(Verb::Create), Some(("ns1", Some("p")))),
            ("POST", "/api/v1/namespaces/ns1/bindings", "", Some(Verb::Create), Some(("ns1", None))),
            ("GET", "/healthz", "", None, None),
            ("GET", "/version", "", None, None),
        ];
        for (m, path, q, verb, binding) in cases {
            let c = classify(&m.parse().unwrap(), path, q);
            assert_eq!(c.verb, verb, "{m} {path}?{q}");
            let got = c.binding.as_ref().map(|(ns, n)| (ns.as_str(), n.as_deref()));
            assert_eq!(got, binding, "{m} {path}");
            let lease = path.contains("/leases/") && matches!(m, "PUT" | "POST");
            assert_eq!(c.lease.is_some(), lease, "{m} {path}");
        }
    }

    #[test]
    fn dice_are_seeded_per_kind_and_rate_limited() {
        let draws = |seed| {
            let mut d = Dice::new(seed, "error");
            d.bucket.tokens = 1000.0;
            (0..200).map(|_| d.roll(0.5, 1e9)).collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1), "same seed, same choices");
        assert_ne!(draws(1), draws(2));
        assert_ne!(Dice::new(1, "error").rng.random::<u64>(), Dice::new(1, "latency").rng.random::<u64>());
        // With p=1 the bucket is the only limit: `rate` per second, no burst beyond it.
        let mut d = Dice::new(1, "error");
        d.bucket.tokens = 2.0;
        let fired = (0..100).filter(|_| d.roll(1.0, 2.0)).count();
        assert_eq!(fired, 2);
    }

    #[test]
    fn jitter_stays_within_half_to_three_halves() {
        let mut d = Dice::new(9, "restart");
        for _ in 0..1000 {
            let j = d.jitter(Duration::from_secs(10));
            assert!(j >= Duration::from_secs(5) && j < Duration::from_secs(15), "{j:?}");
        }
    }
}
