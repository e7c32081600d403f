//! The cache in front of TokenReview (upstream's `authentication/token/cache`): results are kept
//! for the cache TTL under a SHA-256 of the token (tokens themselves are not kept), errors are
//! not cached, and concurrent lookups of one token share a single review. Every lookup feeds
//! the `authentication_token_cache_*` families.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt as _, Shared};
use parking_lot::Mutex;

use super::auth::UserInfo;
use crate::metrics::apiserver::families;

/// A review's outcome: the user (`None`: not authenticated) or the error that prevented it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenRecord {
    /// The authenticated user.
    pub user: Option<UserInfo>,
    /// Why the token could not be reviewed, or the reviewer's explanation of a rejection.
    pub err: Option<String>,
}

/// Reviews a token (a TokenReview call).
pub(crate) type Reviewer = Arc<dyn Fn(String) -> BoxFuture<'static, TokenRecord> + Send + Sync>;

/// Upstream's `sharedLookupTimeout`: one shared review may take this long.
const SHARED_LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Entries above which expired ones are swept.
const SWEEP_AT: usize = 4096;

type Key = [u8; 32];
type Fetch = Shared<BoxFuture<'static, Arc<TokenRecord>>>;

struct Inner {
    reviewer: Reviewer,
    ttl: Duration,
    cache: Mutex<HashMap<Key, (Instant, Arc<TokenRecord>)>>,
    inflight: Mutex<HashMap<Key, Fetch>>,
}

/// The caching token authenticator.
#[derive(Clone)]
pub(crate) struct CachedTokenAuthenticator {
    inner: Arc<Inner>,
}

/// The cache key: SHA-256 over the length-prefixed token and the (empty) audience list.
fn key(token: &str) -> Key {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&(token.len() as u32).to_be_bytes());
    ctx.update(token.as_bytes());
    ctx.update(&0u32.to_be_bytes());
    let mut k = [0u8; 32];
    k.copy_from_slice(ctx.finish().as_ref());
    k
}

/// Decrements `authentication_token_cache_active_fetch_count{status}` when dropped.
struct ActiveFetch(&'static str);

impl ActiveFetch {
    fn start(status: &'static str) -> Self {
        families().token_cache_active_fetch(status, 1);
        ActiveFetch(status)
    }
}

impl Drop for ActiveFetch {
    fn drop(&mut self) {
        families().token_cache_active_fetch(self.0, -1);
    }
}

impl Inner {
    fn cached(&self, k: &Key) -> Option<Arc<TokenRecord>> {
        let cache = self.cache.lock();
        cache.get(k).filter(|(expires, _)| *expires > Instant::now()).map(|(_, r)| r.clone())
    }

    fn store(&self, k: Key, record: Arc<TokenRecord>) {
        if self.ttl.is_zero() {
            return;
        }
        let mut cache = self.cache.lock();
        if cache.len() >= SWEEP_AT {
            let now = Instant::now();
            cache.retain(|_, (expires, _)| *expires > now);
        }
        cache.insert(k, (Instant::now() + self.ttl, record));
    }
}

impl CachedTokenAuthenticator {
    /// Caches `reviewer`'s answers for `ttl` (zero disables the cache).
    pub(crate) fn new(reviewer: Reviewer, ttl: Duration) -> Self {
        CachedTokenAuthenticator {
            inner: Arc::new(Inner {
                reviewer,
                ttl,
                cache: Mutex::new(HashMap::new()),
                inflight: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Looks `token` up, reviewing it on a miss.
    pub(crate) async fn authenticate(&self, token: &str) -> Arc<TokenRecord> {
        let start = Instant::now();
        let k = key(token);
        if let Some(record) = self.inner.cached(&k) {
            families().token_cache_request(true, start.elapsed());
            return record;
        }
        let blocked = ActiveFetch::start("blocked");
        let fetch = {
            let mut inflight = self.inner.inflight.lock();
            inflight.entry(k).or_insert_with(|| self.fetch(k, token.to_string())).clone()
        };
        let record = fetch.await;
        families().token_cache_request(false, start.elapsed());
        drop(blocked);
        record
    }

    /// One review shared by every lookup of the token until it ends; it runs on its own task,
    /// so a caller giving up does not cancel it for the others.
    fn fetch(&self, k: Key, token: String) -> Fetch {
        let inner = self.inner.clone();
        let task = tokio::spawn(async move {
            let in_flight = ActiveFetch::start("in_flight");
            let record = match inner.cached(&k) {
                // A fetch that just ended stored it.
                Some(r) => r,
                None => {
                    let reviewed = tokio::time::timeout(SHARED_LOOKUP_TIMEOUT, (inner.reviewer)(token)).await;
                    let record = reviewed
                        .unwrap_or_else(|_| TokenRecord { user: None, err: Some("context deadline exceeded".into()) });
                    let record = Arc::new(record);
                    // Errors are not cached: the next request tries again.
                    if record.err.is_none() {
                        inner.store(k, record.clone());
                    }
                    record
                }
            };
            families().token_cache_fetch(record.err.is_none());
            drop(in_flight);
            inner.inflight.lock().remove(&k);
            record
        });
        async move {
            task.await
                .unwrap_or_else(|_| Arc::new(TokenRecord { user: None, err: Some("token review aborted".into()) }))
        }
        .boxed()
        .shared()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn reviewer(calls: Arc<AtomicUsize>) -> Reviewer {
        Arc::new(move |token: String| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                // Slow enough for concurrent lookups to overlap.
                tokio::time::sleep(Duration::from_millis(50)).await;
                match token.as_str() {
                    "good" => {
                        TokenRecord { user: Some(UserInfo { name: "jane".into(), ..Default::default() }), err: None }
                    }
                    "rejected" => TokenRecord { user: None, err: None },
                    _ => TokenRecord { user: None, err: Some("invalid bearer token".into()) },
                }
            }
            .boxed()
        })
    }

    #[tokio::test]
    async fn concurrent_lookups_share_one_review_and_results_are_cached() {
        let calls = Arc::new(AtomicUsize::new(0));
        let cache = CachedTokenAuthenticator::new(reviewer(calls.clone()), Duration::from_secs(60));
        let (a, b) = tokio::join!(cache.authenticate("good"), cache.authenticate("good"));
        assert_eq!(a.user.as_ref().unwrap().name, "jane");
        assert_eq!(a, b);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        cache.authenticate("good").await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "served from the cache");
        // A rejection without error is cached; an error is not.
        cache.authenticate("rejected").await;
        cache.authenticate("rejected").await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(cache.authenticate("broken").await.err.is_some());
        cache.authenticate("broken").await;
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert!(cache.inner.inflight.lock().is_empty());
    }

    #[tokio::test]
    async fn a_zero_ttl_reviews_every_time() {
        let calls = Arc::new(AtomicUsize::new(0));
        let cache = CachedTokenAuthenticator::new(reviewer(calls.clone()), Duration::ZERO);
        cache.authenticate("good").await;
        cache.authenticate("good").await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn keys_are_digests_not_tokens() {
        assert_ne!(key("a"), key("b"));
        assert_eq!(key("a"), key("a"));
        assert!(!key("secret-token").windows(6).any(|w| w == b"secret"));
    }
}
