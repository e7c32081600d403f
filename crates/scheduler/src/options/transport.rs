//! The HTTP transport under the scheduler's API client: HTTP/2 to the API server, as client-go.
//!
//! kube's default stack speaks HTTP/1.1 only, so every request in flight holds a TLS connection
//! of its own: a binding burst kept about 160 open, each with its buffers and TLS state, a large
//! part of a small cluster's scheduler memory. client-go offers `h2` and multiplexes every
//! request, the watches included, over one connection per API server. This module builds kube's
//! stack (base URI, retries, credentials, extra headers, connect/read/write timeouts) over a
//! connector that offers `h2` and `http/1.1` by ALPN: HTTP/2 where the server agrees, HTTP/1.1
//! where it does not (plain `http://`, servers without HTTP/2, such as `ksched apiserver`).
//! client-go's environment switches apply: `DISABLE_HTTP2`, `HTTP2_READ_IDLE_TIMEOUT_SECONDS`,
//! `HTTP2_PING_TIMEOUT_SECONDS`.

use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::{Body, ClientBuilder, ConfigExt as _, DynBody};
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt as _};

/// The boxed service a [`ClientBuilder`] starts from (the type kube's own builder produces).
pub type Transport = BoxService<http::Request<Body>, http::Response<Box<DynBody>>, BoxError>;

/// With no frame from the server for this long, a ping checks the shared connection is alive
/// (client-go's HTTP/2 `ReadIdleTimeout`): one dead connection would stall every watch and bind.
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A ping unanswered this long closes the connection (client-go's `PingTimeout`).
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// HTTP/2 as the environment asks, with the variables apimachinery's transport defaults read
/// (`pkg/util/net/http.go`), so a deployment that sets them for client-go gets the same here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http2Settings {
    /// False when `DISABLE_HTTP2` is set to anything non-empty: HTTP/1.1 only.
    pub enabled: bool,
    /// `HTTP2_READ_IDLE_TIMEOUT_SECONDS` (30 s; 0 turns the health check off).
    pub ping_interval: Option<Duration>,
    /// `HTTP2_PING_TIMEOUT_SECONDS` (15 s).
    pub ping_timeout: Duration,
}

impl Http2Settings {
    /// The settings from `var` (the process environment in [`client_builder`]). A value that is
    /// not an integer is logged and the default used, as client-go does.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Self {
        let seconds = |name: &str, default: Duration| -> Option<Duration> {
            let Some(v) = var(name).filter(|v| !v.is_empty()) else { return Some(default) };
            match v.parse::<i64>() {
                Ok(n) if n > 0 => Some(Duration::from_secs(n.unsigned_abs())),
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!("Illegal {name}({v:?}): {e}. Default value {} is used", default.as_secs());
                    Some(default)
                }
            }
        };
        Http2Settings {
            enabled: var("DISABLE_HTTP2").is_none_or(|v| v.is_empty()),
            ping_interval: seconds("HTTP2_READ_IDLE_TIMEOUT_SECONDS", PING_INTERVAL),
            ping_timeout: seconds("HTTP2_PING_TIMEOUT_SECONDS", PING_TIMEOUT).unwrap_or(PING_TIMEOUT),
        }
    }
}

/// kube's client stack for `cfg`, negotiating HTTP/2 over TLS unless the environment turns it
/// off ([`Http2Settings`]). A configured proxy keeps kube's own HTTP/1.1 stack, which knows how
/// to tunnel.
pub fn client_builder(cfg: &kube::Config) -> anyhow::Result<ClientBuilder<Transport>> {
    with_http2(cfg, &Http2Settings::from_env(|name| std::env::var(name).ok()))
}

/// [`client_builder`] with the HTTP/2 settings given.
fn with_http2(cfg: &kube::Config, h2: &Http2Settings) -> anyhow::Result<ClientBuilder<Transport>> {
    if cfg.proxy_url.is_some() {
        return Ok(ClientBuilder::try_from(cfg.clone())?);
    }
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    let mut tls =
        hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(cfg.rustls_client_config()?).https_or_http();
    if let Some(name) = &cfg.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone())
            .map_err(|e| anyhow::anyhow!("invalid tls-server-name {name:?}: {e}"))?;
        tls = tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = if h2.enabled {
        tls.enable_all_versions().wrap_connector(tcp)
    } else {
        tracing::info!("HTTP2 has been explicitly disabled");
        tls.enable_http1().wrap_connector(tcp)
    };
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(cfg.connect_timeout);
    connector.set_read_timeout(cfg.read_timeout);
    connector.set_write_timeout(cfg.write_timeout);
    connector.set_reset_reader_on_write(cfg.reset_reader_on_write);
    let http: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .http2_keep_alive_interval(h2.ping_interval)
            .http2_keep_alive_timeout(h2.ping_timeout)
            .http2_keep_alive_while_idle(true)
            .build(connector);
    let retry =
        cfg.default_retry.then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(cfg.base_uri_layer())
        .option_layer(retry)
        .option_layer(cfg.auth_layer()?)
        .layer(cfg.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http)
        .map_response(|resp: http::Response<hyper::body::Incoming>| {
            resp.map(|body| Box::new(body.map_err(BoxError::from)) as Box<DynBody>)
        })
        .boxed();
    Ok(ClientBuilder::new(service, cfg.default_namespace.clone()))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use hyper_util::rt::TokioIo;
    use parking_lot::Mutex;

    use super::*;

    /// What a test server saw: TCP connections accepted, and each request's HTTP version and
    /// connection (the accept order).
    #[derive(Default)]
    struct Seen {
        connections: AtomicUsize,
        requests: Mutex<Vec<(http::Version, usize)>>,
    }

    impl Seen {
        fn versions(&self) -> Vec<http::Version> {
            self.requests.lock().iter().map(|r| r.0).collect()
        }
        /// Connections that carried at least one request (the client may open and drop others
        /// while it learns that the server speaks HTTP/2).
        fn serving(&self) -> usize {
            self.requests.lock().iter().map(|r| r.1).collect::<std::collections::HashSet<_>>().len()
        }
    }

    /// A TLS server on 127.0.0.1 offering `alpn` that answers every request after 50 ms (so the
    /// client's requests overlap). Returns its URL, its certificate (DER) and what it saw.
    async fn serve(alpn: &[&[u8]]) -> (String, Vec<u8>, Arc<Seen>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().self_signed(&key).unwrap();
        let der = cert.der().to_vec();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Seen::default());
        let seen2 = seen.clone();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let conn = seen2.connections.fetch_add(1, Ordering::SeqCst);
                let (acceptor, seen) = (acceptor.clone(), seen2.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else { return };
                    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        seen.requests.lock().push((req.version(), conn));
                        async {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            let body = http_body_util::Full::new(bytes::Bytes::from_static(b"{\"major\":\"1\"}"));
                            Ok::<_, std::convert::Infallible>(http::Response::new(body))
                        }
                    });
                    let io = TokioIo::new(stream);
                    let _ = if h2 {
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new()).serve_connection(io, svc).await
                    } else {
                        hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await
                    };
                });
            }
        });
        (url, der, seen)
    }

    /// A client through [`client_builder`]'s stack for the test server at `url`.
    fn client(url: &str, ca: Vec<u8>) -> kube::Client {
        client_with(url, ca, &Http2Settings::from_env(|_| None))
    }

    fn client_with(url: &str, ca: Vec<u8>, h2: &Http2Settings) -> kube::Client {
        let mut cfg = kube::Config::new(url.parse().unwrap());
        cfg.root_cert = Some(vec![ca]);
        with_http2(&cfg, h2).unwrap().build()
    }

    /// Sends `n` GETs at once; returns how many succeeded.
    async fn burst_on(client: &kube::Client, n: usize) -> usize {
        let calls = (0..n).map(|_| {
            let client = client.clone();
            async move { client.request_text(http::Request::get("/version").body(Vec::new()).unwrap()).await }
        });
        futures::future::join_all(calls).await.into_iter().filter(|r| r.is_ok()).count()
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_http2_connection_when_the_server_offers_h2() {
        let (url, ca, seen) = serve(&[b"h2", b"http/1.1"]).await;
        let client = client(&url, ca);
        assert_eq!(burst_on(&client, 32).await, 32);
        let versions = seen.versions();
        assert_eq!(versions.len(), 32);
        assert!(versions.iter().all(|v| *v == http::Version::HTTP_2), "{versions:?}");
        assert_eq!(seen.serving(), 1, "one multiplexed connection");
        // Once the connection is known to be HTTP/2, a second burst opens none.
        let opened = seen.connections.load(Ordering::SeqCst);
        assert_eq!(burst_on(&client, 32).await, 32);
        assert_eq!(seen.connections.load(Ordering::SeqCst), opened);
        assert_eq!(seen.serving(), 1);
    }

    #[test]
    fn the_environment_switches_http2_off_and_sets_its_health_check_as_for_client_go() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let default = Http2Settings { enabled: true, ping_interval: Some(PING_INTERVAL), ping_timeout: PING_TIMEOUT };
        assert_eq!(Http2Settings::from_env(env(&[])), default);
        assert_eq!(Http2Settings::from_env(env(&[("DISABLE_HTTP2", "")])), default, "empty is unset");
        assert!(!Http2Settings::from_env(env(&[("DISABLE_HTTP2", "1")])).enabled);
        let s = Http2Settings::from_env(env(&[
            ("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "10"),
            ("HTTP2_PING_TIMEOUT_SECONDS", "5"),
        ]));
        assert_eq!((s.ping_interval, s.ping_timeout), (Some(Duration::from_secs(10)), Duration::from_secs(5)));
        assert_eq!(Http2Settings::from_env(env(&[("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "0")])).ping_interval, None);
        assert_eq!(Http2Settings::from_env(env(&[("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "x")])), default);
        assert_eq!(Http2Settings::from_env(env(&[("HTTP2_PING_TIMEOUT_SECONDS", "x")])), default);
    }

    #[tokio::test]
    async fn disable_http2_keeps_http1_with_a_server_that_offers_h2() {
        let (url, ca, seen) = serve(&[b"h2", b"http/1.1"]).await;
        let off = Http2Settings::from_env(|name| (name == "DISABLE_HTTP2").then(|| "true".to_string()));
        assert_eq!(burst_on(&client_with(&url, ca, &off), 4).await, 4);
        let versions = seen.versions();
        assert!(versions.len() == 4 && versions.iter().all(|v| *v == http::Version::HTTP_11), "{versions:?}");
    }

    #[tokio::test]
    async fn a_server_without_h2_is_spoken_to_in_http1() {
        let (url, ca, seen) = serve(&[b"http/1.1"]).await;
        assert_eq!(burst_on(&client(&url, ca), 8).await, 8);
        let versions = seen.versions();
        assert_eq!(versions.len(), 8);
        assert!(versions.iter().all(|v| *v == http::Version::HTTP_11), "{versions:?}");
        assert!(seen.serving() > 1, "HTTP/1.1 needs a connection per request in flight");
    }
}
