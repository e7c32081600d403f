//! The clients of delegated authentication and authorization: TokenReview and
//! SubjectAccessReview calls as upstream's webhook clients make them (client QPS 200, burst
//! 400, 10 s per call, transient failures retried with `DefaultAuthWebhookRetryBackoff`: 500 ms
//! growing 1.5× with 20% jitter, 5 attempts), every attempt reported with its status code.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http_body_util::BodyExt as _;
use serde_json::Value;

use crate::metrics::restclient::RestClientMetricsLayer;
use crate::options::client::RateLimitLayer;

/// Timeout of one review call (upstream's delegated clients use 10 s).
pub(crate) const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts of one review.
const STEPS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const BACKOFF_FACTOR: f64 = 1.5;
const BACKOFF_JITTER: f64 = 0.2;
/// The delegated clients' client-side rate limit.
const CLIENT_QPS: f32 = 200.0;
const CLIENT_BURST: i32 = 400;

/// Reports one attempt: status code (or `<error>`) and latency in seconds.
pub(crate) type AttemptRecorder = fn(&str, f64);

/// A client for delegated reviews.
#[derive(Clone)]
pub(crate) struct ReviewClient {
    client: kube::Client,
}

impl std::fmt::Debug for ReviewClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewClient").finish_non_exhaustive()
    }
}

/// The outcome of one attempt.
enum Attempt {
    Ok(Value),
    /// An error worth retrying (upstream's `DefaultShouldRetry`), or not.
    Failed {
        message: String,
        retry: bool,
    },
}

impl ReviewClient {
    /// A client from `kubeconfig`, or in-cluster when none is given and `in_cluster_fallback`
    /// is set. `None` when neither is available (the feature is then off).
    pub(crate) async fn new(
        kubeconfig: Option<&Path>,
        in_cluster_fallback: bool,
        what: &str,
    ) -> anyhow::Result<Option<ReviewClient>> {
        let cfg = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading {what} kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                    .await
                    .with_context(|| format!("loading {what} kubeconfig {}", path.display()))?
            }
            None if in_cluster_fallback => match kube::Config::incluster() {
                Ok(c) => c,
                Err(_) => {
                    tracing::warn!("no {what} kubeconfig given and not running in a cluster: {what} is limited");
                    return Ok(None);
                }
            },
            None => return Ok(None),
        };
        let metrics = RestClientMetricsLayer::new(&cfg.cluster_url);
        let limit = RateLimitLayer::new(CLIENT_QPS, CLIENT_BURST);
        let client = crate::options::transport::client_builder(&cfg)
            .with_context(|| format!("building the {what} client"))?
            .with_layer(&limit)
            .with_layer(&metrics)
            .build();
        Ok(Some(ReviewClient { client }))
    }

    /// The underlying API client.
    pub(crate) fn api_client(&self) -> &kube::Client {
        &self.client
    }

    /// POSTs `body` to `path` (a review collection) and returns the created review; each
    /// attempt is reported to `record`. `deadline` bounds all attempts together.
    pub(crate) async fn create(
        &self,
        path: &str,
        body: &Value,
        record: AttemptRecorder,
        deadline: Option<Instant>,
    ) -> Result<Value, String> {
        let mut backoff = FIRST_BACKOFF;
        let mut last = String::new();
        for step in 1..=STEPS {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            match self.attempt(path, body, record).await {
                Attempt::Ok(v) => return Ok(v),
                Attempt::Failed { message, retry } => {
                    if !retry || step == STEPS {
                        return Err(message);
                    }
                    last = message;
                }
            }
            let jittered = backoff.mul_f64(1.0 + rand::random::<f64>() * BACKOFF_JITTER);
            match deadline {
                Some(d) if Instant::now() + jittered >= d => break,
                _ => tokio::time::sleep(jittered).await,
            }
            backoff = backoff.mul_f64(BACKOFF_FACTOR);
        }
        Err(if last.is_empty() { "context deadline exceeded".into() } else { last })
    }

    async fn attempt(&self, path: &str, body: &Value, record: AttemptRecorder) -> Attempt {
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(kube::client::Body::from(body.to_string().into_bytes()));
        let request = match request {
            Ok(r) => r,
            Err(e) => return Attempt::Failed { message: e.to_string(), retry: false },
        };
        let start = Instant::now();
        let sent = tokio::time::timeout(REVIEW_TIMEOUT, async {
            let resp = self.client.send(request).await?;
            let status = resp.status();
            let retry_after = resp.headers().contains_key(http::header::RETRY_AFTER);
            let bytes = resp.into_body().collect().await?.to_bytes();
            Ok::<_, kube::Error>((status, retry_after, bytes))
        })
        .await;
        let seconds = start.elapsed().as_secs_f64();
        match sent {
            Ok(Ok((status, retry_after, bytes))) => {
                record(status.as_str(), seconds);
                if status.is_success() {
                    return match serde_json::from_slice(&bytes) {
                        Ok(v) => Attempt::Ok(v),
                        Err(e) => Attempt::Failed { message: format!("decoding the review: {e}"), retry: false },
                    };
                }
                let status_obj: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let message = status_obj["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("the server responded with status {status}"));
                // InternalError, Timeout, TooManyRequests, or an explicit Retry-After.
                let retry = matches!(status.as_u16(), 429 | 500 | 504) || retry_after;
                Attempt::Failed { message, retry }
            }
            Ok(Err(e)) => {
                record("<error>", seconds);
                let reset = connection_reset(&e);
                Attempt::Failed { message: e.to_string(), retry: reset }
            }
            Err(_) => {
                record("<error>", seconds);
                Attempt::Failed { message: "context deadline exceeded".into(), retry: false }
            }
        }
    }
}

/// Whether an error was caused by the connection being reset (upstream retries those).
fn connection_reset(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionReset {
                return true;
            }
        }
        cur = err.source();
    }
    false
}
