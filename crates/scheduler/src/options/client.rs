//! The API client from `clientConnection` and `--master` (upstream's `createKubeConfig` +
//! client-go's `BuildConfigFromFlags`), with client-go's client-side QPS/burst token bucket.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use parking_lot::Mutex;

use super::io_error_text;
use crate::config::ClientConnectionConfiguration;

/// client-go's fallbacks when `qps`/`burst` are zero.
const DEFAULT_QPS: f32 = 5.0;
const DEFAULT_BURST: i32 = 10;

/// Builds the scheduler's API client. An empty kubeconfig with no `--master` means in-cluster.
pub async fn kube_client(cc: &ClientConnectionConfiguration, master: &str) -> anyhow::Result<kube::Client> {
    let mut cfg = if !cc.kubeconfig.is_empty() {
        let path = &cc.kubeconfig;
        if let Err(e) = std::fs::metadata(path) {
            anyhow::bail!("stat {path}: {}", io_error_text(&e));
        }
        let kc = kube::config::Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {path}"))?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("invalid configuration in {path}"))?
    } else if !master.is_empty() {
        kube::Config::new(master.parse().with_context(|| format!("invalid --master {master:?}"))?)
    } else {
        tracing::warn!(
            "Neither --kubeconfig nor --master was specified.  Using the inClusterConfig.  This might not work."
        );
        kube::Config::incluster().map_err(|e| {
            tracing::warn!(error = %e, "error creating inClusterConfig, falling back to default config");
            anyhow::anyhow!("invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable")
        })?
    };
    if !master.is_empty() {
        cfg.cluster_url = master.parse().with_context(|| format!("invalid --master {master:?}"))?;
    }
    if !cc.content_type.is_empty() && cc.content_type != "application/json" {
        tracing::info!(
            content_type = %cc.content_type,
            "the API client speaks JSON; the configured content type is accepted and not used"
        );
    }
    if let Ok(ua) = http::HeaderValue::from_str(&user_agent(std::env::args_os().next(), "scheduler")) {
        cfg.headers.push((http::header::USER_AGENT, ua));
    }
    let layer = RateLimitLayer::new(cc.qps, cc.burst);
    let metrics = crate::metrics::restclient::RestClientMetricsLayer::new(&cfg.cluster_url);
    Ok(super::transport::client_builder(&cfg)?
        .with_layer(&layer)
        .with_layer(&metrics)
        .with_layer(&ErrorStatusLayer)
        .build())
}

/// Tower layer giving every error answer a `Status` body, as client-go's `transformResponse`
/// does: an error whose body is not a `Status` (a plain-text `404 page not found` for an API
/// the server does not serve, a proxy's HTML page) becomes a `Status` with the HTTP code, the
/// reason that code stands for and client-go's message naming the verb and resource, e.g.
/// `the server could not find the requested resource (get resourceclaims.resource.k8s.io)`.
/// Without it such errors read `ApiError: : (Status { code: 0, message: "" })` when the body
/// happens to be some other JSON, and callers cannot tell a 404 from anything else.
#[derive(Debug, Clone, Copy, Default)]
pub struct ErrorStatusLayer;

impl<S> tower::Layer<S> for ErrorStatusLayer {
    type Service = ErrorStatus<S>;
    fn layer(&self, inner: S) -> ErrorStatus<S> {
        ErrorStatus { inner }
    }
}

/// The service [`ErrorStatusLayer`] produces.
#[derive(Debug, Clone)]
pub struct ErrorStatus<S> {
    inner: S,
}

impl<S, B, RB> tower::Service<http::Request<B>> for ErrorStatus<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
{
    type Response = http::Response<http_body_util::Either<RB, http_body_util::Full<bytes::Bytes>>>;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.method().as_str().to_ascii_lowercase();
        let path = req.uri().path().to_string();
        let fut = self.inner.call(req);
        Box::pin(async move {
            use http_body_util::BodyExt as _;
            let resp = fut.await?;
            let code = resp.status();
            if !(code.is_client_error() || code.is_server_error()) {
                return Ok(resp.map(http_body_util::Either::Left));
            }
            let (mut parts, body) = resp.into_parts();
            let bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            let fixed = status_body(code.as_u16(), &method, &path, &bytes);
            if fixed.as_ref() != bytes.as_ref() {
                parts.headers.remove(http::header::CONTENT_LENGTH);
                parts.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
            }
            Ok(http::Response::from_parts(parts, http_body_util::Either::Right(http_body_util::Full::new(fixed))))
        })
    }
}

/// The body of an error answer: itself when it is a `Status`, else the `Status` client-go's
/// `NewGenericServerResponse` makes of the code, verb and path.
pub fn status_body(code: u16, verb: &str, path: &str, body: &[u8]) -> bytes::Bytes {
    let is_status = serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"));
    if is_status {
        return bytes::Bytes::copy_from_slice(body);
    }
    let server_text = String::from_utf8_lossy(body).trim().to_string();
    let (reason, mut message) = match code {
        409 => ("Conflict", "the server reported a conflict".to_string()),
        404 => ("NotFound", "the server could not find the requested resource".to_string()),
        400 => ("BadRequest", "the server rejected our request for an unknown reason".to_string()),
        401 => ("Unauthorized", "the server has asked for the client to provide credentials".to_string()),
        403 => ("Forbidden", "the server does not allow access to the requested resource".to_string()),
        405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource".to_string()),
        406 => (
            "NotAcceptable",
            "the server was unable to respond with a content type that the client supports".to_string(),
        ),
        415 => ("UnsupportedMediaType", "the server was unable to decode the content type of the request".to_string()),
        422 => ("Invalid", "the server rejected our request due to an error in our request".to_string()),
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later".to_string(),
        ),
        503 => ("ServiceUnavailable", "the server is currently unable to handle the request".to_string()),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request"
                .to_string(),
        ),
        c if c >= 500 => (
            "InternalError",
            format!("an error on the server ({}) has prevented the request from succeeding", go_quote(&server_text)),
        ),
        c => ("Unknown", format!("the server responded with the status code {c} but did not return more information")),
    };
    let (resource, name) = resource_of(path);
    match (resource.is_empty(), name.is_empty()) {
        (false, false) => message = format!("{message} ({verb} {resource} {name})"),
        (false, true) => message = format!("{message} ({verb} {resource})"),
        _ => {}
    }
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    bytes::Bytes::from(status.to_string())
}

/// `(resource.group, name)` of an API path (`/api/v1/namespaces/ns/pods/p` gives `("pods", "p")`,
/// `/apis/resource.k8s.io/v1/resourceclaims` gives `("resourceclaims.resource.k8s.io", "")`).
fn resource_of(path: &str) -> (String, String) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return (String::new(), String::new()),
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    let Some(resource) = rest.first() else { return (String::new(), String::new()) };
    let qualified = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
    (qualified, rest.get(1).map(|n| n.to_string()).unwrap_or_default())
}

fn go_quote(s: &str) -> String {
    super::values::go_quote(s)
}

/// client-go's `AddUserAgent(config, component)`: `<argv0 base>/<version> (<os>/<arch>)
/// kubernetes/<commit>/<component>`. Audit logs (and chaos tests) tell replicas apart by it.
pub fn user_agent(argv0: Option<std::ffi::OsString>, component: &str) -> String {
    let command = argv0
        .as_deref()
        .map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let version = super::version::GIT_VERSION.split('-').next().unwrap_or("unknown");
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    // This build carries no git commit, which client-go spells "unknown".
    format!("{command}/{version} ({}/{arch}) kubernetes/unknown/{component}", std::env::consts::OS)
}

/// A token bucket: `rate` tokens per second, at most `burst` stored (golang.org/x/time/rate).
#[derive(Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: f64, burst: f64) -> Self {
        TokenBucket { rate, burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Takes a token, or says how long until one is available.
    pub fn try_take(&self) -> Result<(), Duration> {
        let mut st = self.state.lock();
        let now = Instant::now();
        let refill = now.duration_since(st.1).as_secs_f64() * self.rate;
        st.0 = (st.0 + refill).min(self.burst);
        st.1 = now;
        if st.0 >= 1.0 {
            st.0 -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - st.0) / self.rate))
        }
    }
}

/// Tower layer limiting request starts like client-go's `QPS`/`Burst`; negative QPS disables it.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Option<Arc<TokenBucket>>,
}

impl RateLimitLayer {
    /// client-go's rules: zero QPS/burst take its defaults (5/10), negative QPS means no limit.
    pub fn new(qps: f32, burst: i32) -> Self {
        let qps = if qps == 0.0 { DEFAULT_QPS } else { qps };
        let burst = if burst == 0 { DEFAULT_BURST } else { burst };
        let bucket = (qps > 0.0).then(|| Arc::new(TokenBucket::new(f64::from(qps), f64::from(burst.max(1)))));
        RateLimitLayer { bucket }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited { inner, bucket: self.bucket.clone(), sleep: None, has_token: false }
    }
}

/// The service [`RateLimitLayer`] produces: `poll_ready` waits for a token.
pub struct RateLimited<S> {
    inner: S,
    bucket: Option<Arc<TokenBucket>>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    has_token: bool,
}

impl<S, R> tower::Service<R> for RateLimited<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(bucket) = &self.bucket {
            while !self.has_token {
                if let Some(sleep) = self.sleep.as_mut() {
                    ready!(sleep.as_mut().poll(cx));
                    self.sleep = None;
                }
                match bucket.try_take() {
                    Ok(()) => self.has_token = true,
                    Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        self.has_token = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agent_is_client_gos() {
        let ua = user_agent(Some("/usr/local/bin/kube-scheduler".into()), "scheduler");
        let arch = if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH };
        assert_eq!(ua, format!("kube-scheduler/v1.36.0 (linux/{arch}) kubernetes/unknown/scheduler"));
        assert!(user_agent(None, "x").starts_with("unknown/v1.36.0 "));
    }

    #[test]
    fn bucket_allows_burst_then_paces() {
        let b = TokenBucket::new(10.0, 3.0);
        assert!(b.try_take().is_ok());
        assert!(b.try_take().is_ok());
        assert!(b.try_take().is_ok());
        let wait = b.try_take().unwrap_err();
        assert!(wait <= Duration::from_millis(100) && wait > Duration::from_millis(50), "{wait:?}");
    }

    /// Error answers that are not a `Status` get client-go's generic one, with the HTTP code kept
    /// (a 404 for an API the server does not serve reads as NotFound, not as code 0).
    #[test]
    fn error_bodies_become_statuses() {
        let v = |b: bytes::Bytes| serde_json::from_slice::<serde_json::Value>(&b).unwrap();
        let got = v(status_body(404, "get", "/apis/resource.k8s.io/v1/resourceclaims", b"404 page not found\n"));
        assert_eq!(got["code"], 404);
        assert_eq!(got["reason"], "NotFound");
        assert_eq!(
            got["message"],
            "the server could not find the requested resource (get resourceclaims.resource.k8s.io)"
        );
        let got = v(status_body(404, "get", "/api/v1/namespaces/ns/pods/p", b"{}"));
        assert_eq!(got["message"], "the server could not find the requested resource (get pods p)");
        let got = v(status_body(500, "post", "/api/v1/namespaces/ns/pods/p/binding", b"boom"));
        assert_eq!(got["reason"], "InternalError");
        assert_eq!(
            got["message"],
            r#"an error on the server ("boom") has prevented the request from succeeding (post pods p)"#
        );
        // A Status stays as the server sent it.
        let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"p\" not found","reason":"NotFound","code":404}"#;
        assert_eq!(status_body(404, "get", "/api/v1/namespaces/ns/pods/p", status).as_ref(), status);
        // kube decodes the rewritten body into an error with the code.
        let status: kube::core::Status =
            serde_json::from_slice(&status_body(404, "get", "/apis/resource.k8s.io/v1/deviceclasses", b"")).unwrap();
        assert_eq!(status.code, 404);
        assert!(status.message.contains("deviceclasses.resource.k8s.io"), "{}", status.message);
    }

    #[test]
    fn client_go_defaults_for_zero_and_negative() {
        assert!(RateLimitLayer::new(-1.0, 0).bucket.is_none());
        let l = RateLimitLayer::new(0.0, 0);
        let b = l.bucket.unwrap();
        assert_eq!((b.rate, b.burst), (5.0, 10.0));
    }
}
