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
    Ok(kube::client::ClientBuilder::try_from(cfg)?.with_layer(&layer).with_layer(&metrics).build())
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

    #[test]
    fn client_go_defaults_for_zero_and_negative() {
        assert!(RateLimitLayer::new(-1.0, 0).bucket.is_none());
        let l = RateLimitLayer::new(0.0, 0);
        let b = l.bucket.unwrap();
        assert_eq!((b.rate, b.burst), (5.0, 10.0));
    }
}
