//! Delegated authentication and authorization of the secure port, as upstream's
//! `DelegatingAuthenticatorConfig` and `DelegatingAuthorizationOptions` assemble them.
//!
//! Authentication tries, in order, front-proxy headers (request-header CA), the client
//! certificate (client CA), then a bearer token (TokenReview behind a cache); the first that
//! recognises the request wins, any failure without a success is a 401, and a request none of
//! them recognises is anonymous. Authorization allows `system:masters` and the always-allowed
//! paths, then asks SubjectAccessReview (answers cached); no opinion is a 403.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use http::HeaderMap;
use parking_lot::Mutex;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};

use super::dynamiccertificates::CaContentProvider;
use super::requestheader::RequestHeaderAuthenticator;
use super::review::{ReviewClient, REVIEW_TIMEOUT};
use super::token_cache::{CachedTokenAuthenticator, TokenRecord};
use crate::metrics::apiserver::{families, AuthenticationResult, AuthorizationResult};

/// Entries above which expired authorization cache entries are swept.
const CACHE_SWEEP_AT: usize = 4096;
/// The extra key of a credential's identifier.
const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

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

/// The subject common name of a certificate.
pub(crate) fn common_name(der: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some(cn)
}

/// Upstream's `CommonNameUserConversion`: CN is the user, Os the groups, and the certificate's
/// SHA-256 its credential id; a certificate without CN names no user.
fn certificate_user(der: &CertificateDer<'_>) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    if name.is_empty() {
        return None;
    }
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
    let digest = ring::digest::digest(&ring::digest::SHA256, der.as_ref());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let extra = BTreeMap::from([(CREDENTIAL_ID_KEY.to_string(), vec![format!("X509SHA256={hex}")])]);
    Some(UserInfo { name, uid: String::new(), groups, extra })
}

/// Seconds until the certificate expires (negative once expired).
fn remaining_lifetime(der: &CertificateDer<'_>) -> Option<f64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let not_after = cert.validity().not_after.timestamp() as f64;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
    Some(not_after - now)
}

/// Why authentication failed (the request gets 401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unauthenticated(pub String);

/// What a request offers to authenticate with.
pub(crate) struct Credentials<'a> {
    /// The client certificate chain of the connection (unverified).
    pub chain: Option<&'a [CertificateDer<'static>]>,
    /// The request headers (bearer token, front-proxy headers).
    pub headers: &'a HeaderMap,
}

/// The delegated authenticator.
pub(crate) struct Authenticator {
    request_header: Option<RequestHeaderAuthenticator>,
    client_ca: Option<Arc<dyn CaContentProvider>>,
    tokens: Option<CachedTokenAuthenticator>,
}

/// The bearer token of an `Authorization` header, if any.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let h = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = h.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim()).filter(|t| !t.is_empty())
}

/// A TokenReview of `token`.
async fn review_token(client: ReviewClient, token: String) -> TokenRecord {
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    });
    let record: fn(&str, f64) = |code, seconds| families().delegated_authn_request(code, seconds);
    let deadline = Some(Instant::now() + REVIEW_TIMEOUT);
    let review = match client.create("/apis/authentication.k8s.io/v1/tokenreviews", &body, record, deadline).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("Failed to make webhook authenticator request: {e}");
            return TokenRecord { user: None, err: Some(e) };
        }
    };
    let status = &review["status"];
    if status["authenticated"].as_bool() != Some(true) {
        let err = status["error"].as_str().filter(|e| !e.is_empty()).map(str::to_string);
        return TokenRecord { user: None, err };
    }
    let u = &status["user"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
    };
    let extra =
        u["extra"].as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect()).unwrap_or_default();
    let user = UserInfo {
        name: u["username"].as_str().unwrap_or_default().into(),
        uid: u["uid"].as_str().unwrap_or_default().into(),
        groups: strings(&u["groups"]),
        extra,
    };
    TokenRecord { user: Some(user), err: None }
}

impl Authenticator {
    /// The authenticators that are configured: front proxy, client certificates, tokens
    /// (cached for `token_ttl`).
    pub(crate) fn new(
        request_header: Option<RequestHeaderAuthenticator>,
        client_ca: Option<Arc<dyn CaContentProvider>>,
        tokens: Option<ReviewClient>,
        token_ttl: Duration,
    ) -> Self {
        let tokens = tokens.map(|client| {
            let reviewer: super::token_cache::Reviewer =
                Arc::new(move |token| review_token(client.clone(), token).boxed());
            CachedTokenAuthenticator::new(reviewer, token_ttl)
        });
        Authenticator { request_header, client_ca, tokens }
    }

    fn client_certificate(&self, chain: Option<&[CertificateDer<'static>]>) -> Result<Option<UserInfo>, String> {
        let (Some(ca), Some(chain)) = (&self.client_ca, chain.filter(|c| !c.is_empty())) else { return Ok(None) };
        if let Some(remaining) = remaining_lifetime(&chain[0]) {
            families().client_certificate_expiration(remaining);
        }
        // No bundle loaded (yet): nothing can be verified, the request is not recognised.
        let Some(bundle) = ca.current() else { return Ok(None) };
        bundle.verify(chain)?;
        Ok(certificate_user(&chain[0]))
    }

    async fn token(&self, headers: &HeaderMap) -> Result<Option<UserInfo>, String> {
        let (Some(tokens), Some(token)) = (&self.tokens, bearer_token(headers)) else { return Ok(None) };
        let record = tokens.authenticate(token).await;
        match (&record.user, &record.err) {
            (Some(u), _) => Ok(Some(u.clone())),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Err("invalid bearer token".into()),
        }
    }

    /// Authenticates a request and reports the attempt (`authentication_attempts`,
    /// `authentication_duration_seconds`, `authenticated_user_requests`).
    pub(crate) async fn authenticate(&self, creds: Credentials<'_>) -> Result<UserInfo, Unauthenticated> {
        let start = Instant::now();
        let result = self.authenticate_union(creds).await;
        let (outcome, user) = match &result {
            Ok(u) => (AuthenticationResult::Success, Some(u.name.as_str())),
            Err(_) => (AuthenticationResult::Error, None),
        };
        families().authentication(outcome, user, start.elapsed().as_secs_f64());
        result
    }

    async fn authenticate_union(&self, creds: Credentials<'_>) -> Result<UserInfo, Unauthenticated> {
        let configured = self.request_header.is_some() || self.client_ca.is_some() || self.tokens.is_some();
        if !configured {
            return Ok(UserInfo::anonymous());
        }
        let mut errors = Vec::new();
        if let Some(rh) = &self.request_header {
            match rh.authenticate(creds.chain, creds.headers) {
                Ok(Some(u)) => return Ok(u.authenticated()),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        match self.client_certificate(creds.chain) {
            Ok(Some(u)) => return Ok(u.authenticated()),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
        match self.token(creds.headers).await {
            Ok(Some(u)) => return Ok(u.authenticated()),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
        if errors.is_empty() {
            return Ok(UserInfo::anonymous());
        }
        Err(Unauthenticated(if errors.len() == 1 { errors.remove(0) } else { format!("[{}]", errors.join(", ")) }))
    }
}

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Explicitly denied, with the authorizer's reason (may be empty).
    Deny(String),
    /// Nobody allowed it, with the reasons given (may be empty); the request is forbidden.
    NoOpinion(String),
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

/// Authorizes non-resource requests: `system:masters`, always-allowed paths, then
/// SubjectAccessReview; with no SAR client nothing else is allowed.
pub(crate) struct Authorizer {
    sar: Option<ReviewClient>,
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
        sar: Option<ReviewClient>,
        always_allow: Vec<String>,
        allowed_ttl: Duration,
        denied_ttl: Duration,
    ) -> Self {
        Authorizer { sar, always_allow, allowed_ttl, denied_ttl, cache: TtlCache::new() }
    }

    /// Authorizes `verb` (the lowercase HTTP method) on `path` and reports the attempt
    /// (`authorization_attempts_total`, `authorization_duration_seconds`).
    pub(crate) async fn authorize(&self, user: &UserInfo, verb: &str, path: &str) -> Result<Decision, String> {
        let start = Instant::now();
        let result = self.authorize_union(user, verb, path).await;
        let outcome = match &result {
            Ok(Decision::Allow) => AuthorizationResult::Allowed,
            Err(_) => AuthorizationResult::Error,
            Ok(Decision::Deny(_)) => AuthorizationResult::Denied,
            Ok(Decision::NoOpinion(_)) => AuthorizationResult::NoOpinion,
        };
        families().authorization(outcome, start.elapsed().as_secs_f64());
        result
    }

    async fn authorize_union(&self, user: &UserInfo, verb: &str, path: &str) -> Result<Decision, String> {
        if user.groups.iter().any(|g| g == "system:masters") || path_allowed(&self.always_allow, path) {
            return Ok(Decision::Allow);
        }
        let Some(client) = &self.sar else { return Ok(Decision::NoOpinion(String::new())) };
        let key = (user.name.clone(), user.groups.clone(), verb.to_string(), path.to_string());
        if let Some(d) = self.cache.get(&key) {
            return Ok(d);
        }
        let mut spec = json!({
            "user": user.name,
            "groups": user.groups,
            "nonResourceAttributes": {"path": path, "verb": verb},
        });
        if !user.uid.is_empty() {
            spec["uid"] = json!(user.uid);
        }
        if !user.extra.is_empty() {
            spec["extra"] = json!(user.extra);
        }
        let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec});
        let record: fn(&str, f64) = |code, seconds| families().delegated_authz_request(code, seconds);
        let review = client
            .create("/apis/authorization.k8s.io/v1/subjectaccessreviews", &body, record, None)
            .await
            .map_err(|e| {
                tracing::error!("Failed to make webhook authorizer request: {e}");
                e
            })?;
        let status = &review["status"];
        let allowed = status["allowed"].as_bool() == Some(true);
        let denied = status["denied"].as_bool() == Some(true);
        let reason = status["reason"].as_str().unwrap_or_default().to_string();
        let (decision, ttl) = match (allowed, denied) {
            (true, true) => return Err("webhook subject access review returned both allow and deny response".into()),
            (_, true) => (Decision::Deny(reason), self.denied_ttl),
            (true, false) => (Decision::Allow, self.allowed_ttl),
            (false, false) => (Decision::NoOpinion(reason), self.denied_ttl),
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
        let authn = Authenticator::new(None, None, None, Duration::from_secs(10));
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        let anon = authn.authenticate(Credentials { chain: None, headers: &headers }).await.unwrap();
        assert_eq!(anon, UserInfo::anonymous());

        let authz = Authorizer::new(
            None,
            vec!["/healthz".into(), "/readyz".into(), "/livez".into(), "/debug/*".into()],
            Duration::from_secs(10),
            Duration::from_secs(10),
        );
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Default::default()
        };
        let none = Ok(Decision::NoOpinion(String::new()));
        assert_eq!(authz.authorize(&anon, "get", "/healthz").await, Ok(Decision::Allow));
        assert_eq!(authz.authorize(&anon, "get", "/debug/x").await, Ok(Decision::Allow));
        assert_eq!(authz.authorize(&anon, "get", "/healthz/ping").await, none);
        assert_eq!(authz.authorize(&anon, "get", "/metrics").await, none);
        assert_eq!(authz.authorize(&admin, "get", "/metrics").await, Ok(Decision::Allow));
    }

    #[test]
    fn client_certificate_subject_maps_to_user_groups_and_credential_id() {
        use rcgen::{CertificateParams, DnType, KeyPair};
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, "system:kube-scheduler");
        p.distinguished_name.push(DnType::OrganizationName, "system:masters");
        let cert = p.self_signed(&KeyPair::generate().unwrap()).unwrap();
        let u = certificate_user(cert.der()).unwrap();
        assert_eq!(u.name, "system:kube-scheduler");
        assert_eq!(u.groups, vec!["system:masters".to_string()]);
        assert!(u.extra[CREDENTIAL_ID_KEY][0].starts_with("X509SHA256="));
        assert!(remaining_lifetime(cert.der()).unwrap() > 0.0);
    }

    #[test]
    fn bearer_tokens_are_parsed_case_insensitively() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(http::header::AUTHORIZATION, "bearer  tok ".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("tok"));
        h.insert(http::header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
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
