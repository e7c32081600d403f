//! client-go's `rest_client_*` families (component-base `metrics/prometheus/restclient`), fed by
//! a tower layer on the kube client ([`RestClientMetricsLayer`]).
//!
//! Like client-go's, the families are process-wide: every API client of the process reports
//! into them and every [`super::PrometheusMetrics`] registry exposes them. Labels follow
//! client-go: `verb` is the HTTP method, `host` the `host[:port]` of the configured server URL,
//! `code` the status code or `<error>` when no response arrived.

use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::pin::Pin;

/// Latency buckets of `rest_client_request_duration_seconds` and the rate limiter histogram.
const LATENCY_BUCKETS: [f64; 12] = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];
/// `rest_client_dns_resolution_duration_seconds`: the latency buckets without 60.
const DNS_BUCKETS: [f64; 11] = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0];
/// Request/response size buckets.
const SIZE_BUCKETS: [f64; 11] =
    [64.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0];
/// `rest_client_exec_plugin_certificate_rotation_age` buckets (10 minutes .. 4 years).
const ROTATION_BUCKETS: [f64; 11] =
    [600.0, 1800.0, 3600.0, 14400.0, 86400.0, 604800.0, 2592000.0, 7776000.0, 15552000.0, 31104000.0, 124416000.0];

/// Builds histograms with fixed buckets (a [`Family`] constructor).
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub &'static [f64]);

impl MetricConstructor<Histogram> for Fixed {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

// Label fields are in alphabetical order, the order client_golang prints them in.

/// `{host, verb}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbHost {
    /// API server `host[:port]`.
    pub host: String,
    /// HTTP method.
    pub verb: String,
}
/// `{code, method, host}` of `rest_client_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeMethodHost {
    /// Status code or `<error>`.
    pub code: String,
    /// API server `host[:port]`.
    pub host: String,
    /// HTTP method.
    pub method: String,
}
/// `{code, verb, host}` of `rest_client_request_retries_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeVerbHost {
    /// Status code or `<error>`.
    pub code: String,
    /// API server `host[:port]`.
    pub host: String,
    /// HTTP method.
    pub verb: String,
}
/// `{host}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HostLabel {
    /// API server host.
    pub host: String,
}
/// `{code, call_status}` of exec plugin calls.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExecCall {
    /// `no_error`, `plugin_execution_error`, ...
    pub call_status: String,
    /// Exit code.
    pub code: String,
}
/// `{allowed, denied}` of exec plugin policy calls.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyCall {
    /// Allowed.
    pub allowed: String,
    /// Denied.
    pub denied: String,
}
/// `{result}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// Result.
    pub result: String,
}
/// `{result, reason}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultReason {
    /// Reason.
    pub reason: String,
    /// Result.
    pub result: String,
}

/// The `rest_client_*` families.
#[derive(Debug)]
#[allow(missing_docs)]
pub struct RestClientFamilies {
    pub request_duration: Family<VerbHost, Histogram, Fixed>,
    pub dns_resolution_duration: Family<HostLabel, Histogram, Fixed>,
    pub request_size: Family<VerbHost, Histogram, Fixed>,
    pub response_size: Family<VerbHost, Histogram, Fixed>,
    pub rate_limiter_duration: Family<VerbHost, Histogram, Fixed>,
    pub requests: Family<CodeMethodHost, Counter>,
    pub request_retries: Family<CodeVerbHost, Counter>,
    pub exec_plugin_ttl_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    pub exec_plugin_certificate_rotation_age: Histogram,
    pub exec_plugin_calls: Family<ExecCall, Counter>,
    pub exec_plugin_policy_calls: Family<PolicyCall, Counter>,
    pub transport_cache_entries: Gauge,
    pub transport_create_calls: Family<ResultLabel, Counter>,
    pub transport_ca_reload: Family<ResultReason, Counter>,
    pub transport_cert_rotation_gc_calls: Counter,
    pub transport_cache_gc_calls: Family<ResultLabel, Counter>,
}

static FAMILIES: LazyLock<Arc<RestClientFamilies>> = LazyLock::new(|| {
    let ttl = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    // No exec plugin manages certificates here: client-go reports +Inf then.
    ttl.set(f64::INFINITY);
    Arc::new(RestClientFamilies {
        request_duration: Family::new_with_constructor(Fixed(&LATENCY_BUCKETS)),
        dns_resolution_duration: Family::new_with_constructor(Fixed(&DNS_BUCKETS)),
        request_size: Family::new_with_constructor(Fixed(&SIZE_BUCKETS)),
        response_size: Family::new_with_constructor(Fixed(&SIZE_BUCKETS)),
        rate_limiter_duration: Family::new_with_constructor(Fixed(&LATENCY_BUCKETS)),
        requests: Family::default(),
        request_retries: Family::default(),
        exec_plugin_ttl_seconds: ttl,
        exec_plugin_certificate_rotation_age: Histogram::new(ROTATION_BUCKETS.iter().copied()),
        exec_plugin_calls: Family::default(),
        exec_plugin_policy_calls: Family::default(),
        transport_cache_entries: Gauge::default(),
        transport_create_calls: Family::default(),
        transport_ca_reload: Family::default(),
        transport_cert_rotation_gc_calls: Counter::default(),
        transport_cache_gc_calls: Family::default(),
    })
});

/// The process-wide `rest_client_*` families.
pub fn families() -> Arc<RestClientFamilies> {
    FAMILIES.clone()
}

/// Tower layer recording every request of a kube client into the `rest_client_*` families.
#[derive(Debug, Clone)]
pub struct RestClientMetricsLayer {
    host: Arc<str>,
    families: Arc<RestClientFamilies>,
}

impl RestClientMetricsLayer {
    /// A layer for a client of the server at `url` (its `host[:port]` becomes the `host` label).
    /// One client builds one HTTP transport, as client-go's transport cache reports a miss.
    pub fn new(url: &http::Uri) -> Self {
        let host: Arc<str> = url.authority().map_or("none", |a| a.as_str()).into();
        let families = families();
        families.transport_create_calls.get_or_create(&ResultLabel { result: "miss".into() }).inc();
        families.transport_cache_entries.inc();
        RestClientMetricsLayer { host, families }
    }
}

impl<S> tower::Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetrics<S>;
    fn layer(&self, inner: S) -> RestClientMetrics<S> {
        RestClientMetrics { inner, host: self.host.clone(), families: self.families.clone(), waiting_since: None }
    }
}

/// The service [`RestClientMetricsLayer`] produces.
#[derive(Debug, Clone)]
pub struct RestClientMetrics<S> {
    inner: S,
    host: Arc<str>,
    families: Arc<RestClientFamilies>,
    /// When `poll_ready` first found the inner stack (the client-side rate limiter) not ready;
    /// client-go's `rest_client_rate_limiter_duration_seconds` is that wait.
    waiting_since: Option<Instant>,
}

impl<S, B, RB> tower::Service<Request<B>> for RestClientMetrics<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    B: Body,
    RB: Body<Data = Bytes> + Unpin,
{
    type Response = Response<CountedBody<RB>>;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        let r = self.inner.poll_ready(cx);
        if r.is_ready() {
            // Kept until `call` (which knows the verb); a ready service keeps its first instant.
            self.waiting_since = Some(since);
        }
        r
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let start = Instant::now();
        let throttled = self.waiting_since.take().map_or(0.0, |s| start.duration_since(s).as_secs_f64());
        let verb = req.method().as_str().to_string();
        let watch = is_watch(req.uri());
        let f = self.families.clone();
        let host = self.host.clone();
        let vh = VerbHost { host: host.to_string(), verb: verb.clone() };
        f.rate_limiter_duration.get_or_create(&vh).observe(throttled);
        // client-go observes the request size only when the length is known up front.
        if let Some(len) = req.body().size_hint().exact() {
            f.request_size.get_or_create(&vh).observe(len as f64);
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            let code = match &res {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            f.requests.get_or_create(&CodeMethodHost { code, host: host.to_string(), method: verb }).inc();
            match res {
                Ok(resp) => Ok(resp.map(|inner| CountedBody {
                    inner,
                    // Watches are streams: client-go records neither their latency nor a size.
                    done: if watch { None } else { Some(Done { families: f, labels: vh, start, bytes: 0 }) },
                })),
                Err(e) => {
                    if !watch {
                        f.request_duration.get_or_create(&vh).observe(start.elapsed().as_secs_f64());
                    }
                    Err(e)
                }
            }
        })
    }
}

/// True for `?watch=true` / `?watch=1` requests.
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|kv| matches!(kv, "watch=true" | "watch=1")))
}

/// What is recorded once the response body has been read.
#[derive(Debug)]
struct Done {
    families: Arc<RestClientFamilies>,
    labels: VerbHost,
    start: Instant,
    bytes: u64,
}

impl Done {
    fn record(self) {
        let f = &self.families;
        f.request_duration.get_or_create(&self.labels).observe(self.start.elapsed().as_secs_f64());
        f.response_size.get_or_create(&self.labels).observe(self.bytes as f64);
    }
}

/// A response body that records the request's latency and response size when it ends (client-go
/// reads the whole body inside the timed section).
#[derive(Debug)]
pub struct CountedBody<B> {
    inner: B,
    done: Option<Done>,
}

impl<B> Drop for CountedBody<B> {
    fn drop(&mut self) {
        if let Some(d) = self.done.take() {
            d.record();
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for CountedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(d), Some(data)) = (this.done.as_mut(), frame.data_ref()) {
                    d.bytes += data.len() as u64;
                }
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => {
                if let Some(d) = this.done.take() {
                    d.record();
                }
            }
            Poll::Pending => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use tower::{Service, ServiceExt};

    fn fresh() -> Arc<RestClientFamilies> {
        // Tests use their own families so parallel tests do not see each other's requests.
        let families = Arc::new(RestClientFamilies {
            request_duration: Family::new_with_constructor(Fixed(&LATENCY_BUCKETS)),
            dns_resolution_duration: Family::new_with_constructor(Fixed(&DNS_BUCKETS)),
            request_size: Family::new_with_constructor(Fixed(&SIZE_BUCKETS)),
            response_size: Family::new_with_constructor(Fixed(&SIZE_BUCKETS)),
            rate_limiter_duration: Family::new_with_constructor(Fixed(&LATENCY_BUCKETS)),
            requests: Family::default(),
            request_retries: Family::default(),
            exec_plugin_ttl_seconds: Gauge::default(),
            exec_plugin_certificate_rotation_age: Histogram::new(ROTATION_BUCKETS.iter().copied()),
            exec_plugin_calls: Family::default(),
            exec_plugin_policy_calls: Family::default(),
            transport_cache_entries: Gauge::default(),
            transport_create_calls: Family::default(),
            transport_ca_reload: Family::default(),
            transport_cert_rotation_gc_calls: Counter::default(),
            transport_cache_gc_calls: Family::default(),
        });
        families
    }

    fn layer(families: &Arc<RestClientFamilies>) -> RestClientMetricsLayer {
        RestClientMetricsLayer { host: "127.0.0.1:6443".into(), families: families.clone() }
    }

    #[tokio::test]
    async fn records_code_method_host_sizes_and_latency_like_client_go() {
        let f = fresh();
        let svc = tower::service_fn(|req: Request<Full<Bytes>>| async move {
            let status = if req.uri().path() == "/missing" { 404 } else { 201 };
            Ok::<_, std::convert::Infallible>(
                Response::builder().status(status).body(Full::new(Bytes::from_static(b"0123456789"))).unwrap(),
            )
        });
        let mut svc = tower::Layer::layer(&layer(&f), svc);
        let req = Request::post("/api/v1/namespaces/default/pods/p/binding")
            .body(Full::new(Bytes::from_static(b"{\"a\":1}")))
            .unwrap();
        let resp = svc.ready().await.unwrap().call(req).await.unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.len(), 10);
        let req = Request::get("/missing").body(Full::new(Bytes::new())).unwrap();
        drop(svc.ready().await.unwrap().call(req).await.unwrap());

        let cmh = |code: &str, method: &str| CodeMethodHost {
            code: code.into(),
            method: method.into(),
            host: "127.0.0.1:6443".into(),
        };
        assert_eq!(f.requests.get_or_create(&cmh("201", "POST")).get(), 1);
        assert_eq!(f.requests.get_or_create(&cmh("404", "GET")).get(), 1);
        let mut text = String::new();
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register("rest_client_response_size_bytes", "h", f.response_size.clone());
        reg.register("rest_client_request_size_bytes", "h", f.request_size.clone());
        reg.register("rest_client_request_duration_seconds", "h", f.request_duration.clone());
        reg.register("rest_client_rate_limiter_duration_seconds", "h", f.rate_limiter_duration.clone());
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        for line in [
            r#"rest_client_response_size_bytes_sum{host="127.0.0.1:6443",verb="POST"} 10.0"#,
            r#"rest_client_request_size_bytes_sum{host="127.0.0.1:6443",verb="POST"} 7.0"#,
            r#"rest_client_request_size_bytes_count{host="127.0.0.1:6443",verb="GET"} 1"#,
            r#"rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="POST"} 1"#,
            r#"rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="GET"} 1"#,
            r#"rest_client_rate_limiter_duration_seconds_count{host="127.0.0.1:6443",verb="GET"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }

    #[tokio::test]
    async fn watches_count_requests_but_not_latency() {
        let f = fresh();
        let svc = tower::service_fn(|_req: Request<Full<Bytes>>| async move {
            Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(b"{}"))))
        });
        let mut svc = tower::Layer::layer(&layer(&f), svc);
        let req = Request::get("/api/v1/pods?watch=true&resourceVersion=1").body(Full::new(Bytes::new())).unwrap();
        let resp = svc.ready().await.unwrap().call(req).await.unwrap();
        resp.into_body().collect().await.unwrap();
        let host = "127.0.0.1:6443".to_string();
        assert_eq!(
            f.requests.get_or_create(&CodeMethodHost { code: "200".into(), method: "GET".into(), host }).get(),
            1
        );
        let mut text = String::new();
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register("d", "h", f.request_duration.clone());
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(!text.contains("d_count"), "{text}");
    }

    #[tokio::test]
    async fn transport_errors_are_counted_as_error_code() {
        let f = fresh();
        let svc = tower::service_fn(|_req: Request<Full<Bytes>>| async move {
            Err::<Response<Full<Bytes>>, _>(std::io::Error::other("connection refused"))
        });
        let mut svc = tower::Layer::layer(&layer(&f), svc);
        let req = Request::put("/x").body(Full::new(Bytes::new())).unwrap();
        assert!(svc.ready().await.unwrap().call(req).await.is_err());
        let host = "127.0.0.1:6443".to_string();
        assert_eq!(
            f.requests.get_or_create(&CodeMethodHost { code: "<error>".into(), method: "PUT".into(), host }).get(),
            1
        );
    }

    #[test]
    fn watch_detection() {
        for (uri, want) in [
            ("/api/v1/pods?watch=true", true),
            ("/api/v1/pods?labelSelector=a&watch=1", true),
            ("/api/v1/pods?watch=false", false),
            ("/api/v1/pods", false),
        ] {
            assert_eq!(is_watch(&uri.parse().unwrap()), want, "{uri}");
        }
    }
}
