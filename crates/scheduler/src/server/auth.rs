//! Delegated authentication and authorization (§1.3, §1.4, §10.1): client certificates, bearer
//! tokens checked with TokenReview, anonymous requests; privileged groups, always-allowed paths,
//! then SubjectAccessReview. Review results are cached.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::PostParams;
use parking_lot::Mutex;

/// Timeout of one review call (upstream's delegated clients use 10 s).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries above which expired cache entries are swept.
const CACHE_SWEEP_AT: usize = 4096;

/// The authenticated user of a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// User name (`system:anonymous` when unauthenticated).
    pub name: String,
    /// UID, when the authenticator knows one.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        }
    }

    /// Adds `system:authenticated`, as upstream's AuthenticatedGroupAdder does.
    fn authenticated(mut self) -> Self {
        if !self.groups.iter().any(|g| g == "system:authenticated" || g == "system:unauthenticated") {
            self.groups.push("system:authenticated".into());
        }
        self
    }
}

/// A TTL cache of review results.
struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()) }
    }
    fn get(&self, k: &K) -> Option<V> {
        let g = self.entries.lock();
        g.get(k).filter(|(exp, _)| *exp > Instant::now()).map(|(_, v)| v.clone())
    }
    fn put(&self, k: K, v: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut g = self.entries.lock();
        if g.len() >= CACHE_SWEEP_AT {
            let now = Instant::now();
            g.retain(|_, (exp, _)| *exp > now);
        }
        g.insert(k, (Instant::now() + ttl, v));
    }
}

/// A client for delegated reviews: from `kubeconfig`, or in-cluster when none is given and
/// `in_cluster_fallback` is set. `None` when neither is available (the feature is then off).
pub(crate) async fn review_client(
    kubeconfig: Option<&Path>,
    in_cluster_fallback: bool,
    what: &str,
) -> anyhow::Result<Option<kube::Client>> {
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
    Ok(Some(kube::Client::try_from(cfg).with_context(|| format!("building the {what} client"))?))
}

/// Why authentication failed (the request gets 401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unauthenticated(pub String);

/// Authenticates requests: verified client certificate, then bearer token (TokenReview), then
/// anonymous.
pub(crate) struct Authenticator {
    tokens: Option<kube::Client>,
    ttl: Duration,
    cache: TtlCache<String, Result<UserInfo, String>>,
}

impl Authenticator {
    pub(crate) fn new(tokens: Option<kube::Client>, ttl: Duration) -> Self {
        Authenticator { tokens, ttl, cache: TtlCache::new() }
    }

    pub(crate) async fn authenticate(
        &self,
        client_cert_user: Option<&UserInfo>,
        authorization: Option<&str>,
    ) -> Result<UserInfo, Unauthenticated> {
        if let Some(u) = client_cert_user {
            return Ok(u.clone().authenticated());
        }
        let token = authorization
            .and_then(|h| {
                let (scheme, rest) = h.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .filter(|t| !t.is_empty());
        match (token, &self.tokens) {
            (Some(token), Some(client)) => self.review_token(client, token).await.map(UserInfo::authenticated),
            // Without a token authenticator bearer tokens are ignored.
            _ => Ok(UserInfo::anonymous()),
        }
    }

    async fn review_token(&self, client: &kube::Client, token: &str) -> Result<UserInfo, Unauthenticated> {
        if let Some(cached) = self.cache.get(&token.to_string()) {
            return cached.map_err(Unauthenticated);
        }
        let review =
            TokenReview { spec: TokenReviewSpec { token: token.to_string(), audiences: None }, ..Default::default() };
        let api: kube::Api<TokenReview> = kube::Api::all(client.clone());
        let res = match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review)).await {
            Ok(Ok(r)) => r,
            // Transport errors are not cached.
            Ok(Err(e)) => return Err(Unauthenticated(format!("token review failed: {e}"))),
            Err(_) => return Err(Unauthenticated("token review timed out".into())),
        };
        let status = res.status.unwrap_or_default();
        let outcome = match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Ok(UserInfo {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default(),
            }),
            _ => Err(status.error.filter(|e| !e.is_empty()).unwrap_or_else(|| "invalid bearer token".into())),
        };
        self.cache.put(token.to_string(), outcome.clone(), self.ttl);
        outcome.map_err(Unauthenticated)
    }
}

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Forbidden, with the authorizer's reason (may be empty).
    Deny(String),
}

/// Authorizes non-resource requests: `system:masters`, always-allowed paths, then
/// SubjectAccessReview; with no SAR client everything else is forbidden.
pub(crate) struct Authorizer {
    sar: Option<kube::Client>,
    always_allow: Vec<String>,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: TtlCache<(String, Vec<String>, String, String), Decision>,
}

/// Upstream's path authorizer: exact paths, or prefixes written with a trailing `*`.
fn path_allowed(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p == path,
    })
}

impl Authorizer {
    pub(crate) fn new(
        sar: Option<kube::Client>,
        always_allow: Vec<String>,
        allowed_ttl: Duration,
        denied_ttl: Duration,
    ) -> Self {
        Authorizer { sar, always_allow, allowed_ttl, denied_ttl, cache: TtlCache::new() }
    }

    /// `verb` is the lowercase HTTP method.
    pub(crate) async fn authorize(&self, user: &UserInfo, verb: &str, path: &str) -> Result<Decision, String> {
        if user.groups.iter().any(|g| g == "system:masters") || path_allowed(&self.always_allow, path) {
            return Ok(Decision::Allow);
        }
        let Some(client) = &self.sar else { return Ok(Decision::Deny(String::new())) };
        let key = (user.name.clone(), user.groups.clone(), verb.to_string(), path.to_string());
        if let Some(d) = self.cache.get(&key) {
            return Ok(d);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(client.clone());
        let res = match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(format!("subject access review failed: {e}")),
            Err(_) => return Err("subject access review timed out".into()),
        };
        let status = res.status.unwrap_or_default();
        let (decision, ttl) = if status.allowed && status.denied != Some(true) {
            (Decision::Allow, self.allowed_ttl)
        } else {
            let reason = status.reason.unwrap_or_default();
            (Decision::Deny(reason), self.denied_ttl)
        };
        self.cache.put(key, decision.clone(), ttl);
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn anonymous_masters_and_paths() {
        let authn = Authenticator::new(None, Duration::from_secs(10));
        let anon = authn.authenticate(None, Some("Bearer abc")).await.unwrap();
        assert_eq!(anon, UserInfo::anonymous());
        let cert = UserInfo { name: "admin".into(), groups: vec!["system:masters".into()], ..Default::default() };
        let u = authn.authenticate(Some(&cert), None).await.unwrap();
        assert_eq!(u.groups, vec!["system:masters".to_string(), "system:authenticated".to_string()]);

        let authz = Authorizer::new(
            None,
            vec!["/healthz".into(), "/readyz".into(), "/livez".into(), "/debug/*".into()],
            Duration::from_secs(10),
            Duration::from_secs(10),
        );
        assert_eq!(authz.authorize(&anon, "get", "/healthz").await, Ok(Decision::Allow));
        assert_eq!(authz.authorize(&anon, "get", "/debug/x").await, Ok(Decision::Allow));
        assert_eq!(authz.authorize(&anon, "get", "/healthz/ping").await, Ok(Decision::Deny(String::new())));
        assert_eq!(authz.authorize(&anon, "get", "/metrics").await, Ok(Decision::Deny(String::new())));
        assert_eq!(authz.authorize(&u, "get", "/metrics").await, Ok(Decision::Allow));
    }

    #[test]
    fn cache_expires() {
        let c: TtlCache<String, u32> = TtlCache::new();
        c.put("a".into(), 1, Duration::from_secs(60));
        c.put("b".into(), 2, Duration::ZERO);
        assert_eq!(c.get(&"a".to_string()), Some(1));
        assert_eq!(c.get(&"b".to_string()), None);
    }
}
