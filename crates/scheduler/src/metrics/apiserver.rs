//! The `k8s.io/apiserver` families the upstream kube-scheduler binary exposes: those of its
//! delegated authentication and authorization (the handler chain of the secure port, the
//! TokenReview / SubjectAccessReview clients and the token cache), and the package-level
//! counters it links in without using (audit, declarative validation, webhook x509, discovery
//! aggregation), which upstream exposes at zero.
//!
//! Upstream sources: `apiserver/pkg/endpoints/filters/metrics.go`,
//! `apiserver/pkg/authentication/token/cache/stats.go`,
//! `apiserver/pkg/authentication/authenticatorfactory/metrics.go`,
//! `apiserver/pkg/authorization/authorizerfactory/metrics.go`,
//! `apiserver/pkg/authentication/request/x509/x509.go`, `apiserver/pkg/audit/metrics.go`,
//! `apiserver/pkg/validation/metrics.go`, `apiserver/pkg/util/webhook/metrics.go`,
//! `apiserver/pkg/endpoints/discovery/aggregated/metrics.go`.
//!
//! Process-wide, like upstream's legacy registry: every [`super::PrometheusMetrics`] exposes them.

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use super::prometheus::{Exp, HistogramFamily};
use super::registry::{KubeRegistry, StabilityLevel};
use super::restclient::Fixed;

/// client_golang's `DefBuckets` (histograms declared without buckets).
const DEFAULT_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Delegated TokenReview / SubjectAccessReview latency buckets.
const DELEGATED_BUCKETS: [f64; 8] = [0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0];
/// `apiserver_client_certificate_expiration_seconds`: 0, 30 minutes .. 1 year.
const EXPIRATION_BUCKETS: [f64; 14] = [
    0.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0, 172800.0, 345600.0, 604800.0, 2592000.0, 7776000.0,
    15552000.0, 31104000.0,
];
/// `ExponentialBuckets(0.001, 2, 15)` of the authentication and authorization filters.
const FILTER_BUCKETS: Exp = Exp::new(0.001, 2.0, 15);

/// `{result}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// Outcome.
    pub result: String,
}
/// `{username}` (compressed: see [`compress_username`]).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UsernameLabel {
    /// `admin`, `email_id`, `other`, ...
    pub username: String,
}
/// `{status}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    /// `hit`/`miss`, `ok`/`error`, `in_flight`/`blocked`.
    pub status: String,
}
/// `{code}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// HTTP status code, or `<error>` when no response arrived.
    pub code: String,
}

/// Outcome of authenticating one request (`authentication_attempts{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthenticationResult {
    /// A user was found (anonymous included).
    Success,
    /// No authenticator recognised the request.
    Failure,
    /// An authenticator failed.
    Error,
}

impl AuthenticationResult {
    fn as_str(self) -> &'static str {
        match self {
            AuthenticationResult::Success => "success",
            AuthenticationResult::Failure => "failure",
            AuthenticationResult::Error => "error",
        }
    }
}

/// Outcome of authorizing one request (`authorization_attempts_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationResult {
    /// Allowed.
    Allowed,
    /// Explicitly denied.
    Denied,
    /// No authorizer had an opinion (the request is forbidden).
    NoOpinion,
    /// The authorizer failed.
    Error,
}

impl AuthorizationResult {
    fn as_str(self) -> &'static str {
        match self {
            AuthorizationResult::Allowed => "allowed",
            AuthorizationResult::Denied => "denied",
            AuthorizationResult::NoOpinion => "no-opinion",
            AuthorizationResult::Error => "error",
        }
    }
}

/// Upstream's `compressUsername`: a few well-known names are kept, e-mail addresses become
/// `email_id`, everything else `other` (the label must not grow with the number of users).
pub fn compress_username(username: &str) -> &str {
    match username {
        "admin" | "client" | "kube_proxy" | "kubelet" | "system:serviceaccount:kube-system:default" => username,
        u if u.contains('@') => "email_id",
        _ => "other",
    }
}

/// The families (see the module documentation).
#[derive(Debug)]
#[allow(missing_docs)]
pub struct ApiserverFamilies {
    pub authenticated_user_requests: Family<UsernameLabel, Counter>,
    pub authentication_attempts: Family<ResultLabel, Counter>,
    pub authentication_duration: HistogramFamily<ResultLabel>,
    pub authorization_attempts: Family<ResultLabel, Counter>,
    pub authorization_duration: HistogramFamily<ResultLabel>,
    pub token_cache_request_duration: Family<StatusLabel, Histogram, Fixed>,
    pub token_cache_requests: Family<StatusLabel, Counter>,
    pub token_cache_fetches: Family<StatusLabel, Counter>,
    pub token_cache_active_fetches: Family<StatusLabel, Gauge>,
    pub delegated_authn_requests: Family<CodeLabel, Counter>,
    pub delegated_authn_request_duration: Family<CodeLabel, Histogram, Fixed>,
    pub delegated_authz_requests: Family<CodeLabel, Counter>,
    pub delegated_authz_request_duration: Family<CodeLabel, Histogram, Fixed>,
    pub client_certificate_expiration: Histogram,
    pub audit_events: Counter,
    pub audit_requests_rejected: Counter,
    pub declarative_validation_mismatches: Counter,
    pub declarative_validation_panics: Counter,
    pub duplicate_validation_errors: Counter,
    pub webhook_x509_missing_san: Counter,
    pub webhook_x509_insecure_sha1: Counter,
    pub discovery_aggregations: Counter,
}

static FAMILIES: LazyLock<ApiserverFamilies> = LazyLock::new(|| ApiserverFamilies {
    authenticated_user_requests: Family::default(),
    authentication_attempts: Family::default(),
    authentication_duration: Family::new_with_constructor(FILTER_BUCKETS),
    authorization_attempts: Family::default(),
    authorization_duration: Family::new_with_constructor(FILTER_BUCKETS),
    token_cache_request_duration: Family::new_with_constructor(Fixed(&DEFAULT_BUCKETS)),
    token_cache_requests: Family::default(),
    token_cache_fetches: Family::default(),
    token_cache_active_fetches: Family::default(),
    delegated_authn_requests: Family::default(),
    delegated_authn_request_duration: Family::new_with_constructor(Fixed(&DELEGATED_BUCKETS)),
    delegated_authz_requests: Family::default(),
    delegated_authz_request_duration: Family::new_with_constructor(Fixed(&DELEGATED_BUCKETS)),
    client_certificate_expiration: Histogram::new(EXPIRATION_BUCKETS.iter().copied()),
    audit_events: Counter::default(),
    audit_requests_rejected: Counter::default(),
    declarative_validation_mismatches: Counter::default(),
    declarative_validation_panics: Counter::default(),
    duplicate_validation_errors: Counter::default(),
    webhook_x509_missing_san: Counter::default(),
    webhook_x509_insecure_sha1: Counter::default(),
    discovery_aggregations: Counter::default(),
});

/// The process-wide families.
pub fn families() -> &'static ApiserverFamilies {
    &FAMILIES
}

impl ApiserverFamilies {
    /// One request went through the authentication filter (upstream's
    /// `recordAuthenticationMetrics`); `user` is the authenticated user's name on success.
    pub fn authentication(&self, result: AuthenticationResult, user: Option<&str>, seconds: f64) {
        if let (AuthenticationResult::Success, Some(user)) = (result, user) {
            let username = compress_username(user).to_string();
            self.authenticated_user_requests.get_or_create(&UsernameLabel { username }).inc();
        }
        let labels = ResultLabel { result: result.as_str().into() };
        self.authentication_attempts.get_or_create(&labels).inc();
        self.authentication_duration.get_or_create(&labels).observe(seconds);
    }

    /// One request went through the authorization filter.
    pub fn authorization(&self, result: AuthorizationResult, seconds: f64) {
        let labels = ResultLabel { result: result.as_str().into() };
        self.authorization_attempts.get_or_create(&labels).inc();
        self.authorization_duration.get_or_create(&labels).observe(seconds);
    }

    /// A token lookup ended, from the cache (`hit`) or not. Upstream truncates the latency to
    /// whole milliseconds.
    pub fn token_cache_request(&self, hit: bool, elapsed: std::time::Duration) {
        let labels = StatusLabel { status: if hit { "hit" } else { "miss" }.into() };
        self.token_cache_requests.get_or_create(&labels).inc();
        self.token_cache_request_duration.get_or_create(&labels).observe(elapsed.as_millis() as f64 / 1000.0);
    }

    /// `authentication_token_cache_active_fetch_count{status}` moves by `delta`
    /// (`in_flight`: TokenReviews running; `blocked`: lookups waiting on one).
    pub fn token_cache_active_fetch(&self, status: &str, delta: i64) {
        self.token_cache_active_fetches.get_or_create(&StatusLabel { status: status.into() }).inc_by(delta);
    }

    /// A TokenReview fetch ended (`ok` unless it failed).
    pub fn token_cache_fetch(&self, ok: bool) {
        let status = if ok { "ok" } else { "error" };
        self.token_cache_fetches.get_or_create(&StatusLabel { status: status.into() }).inc();
    }

    /// One delegated TokenReview call; `code` is the status code or `<error>`.
    pub fn delegated_authn_request(&self, code: &str, seconds: f64) {
        let labels = CodeLabel { code: code.into() };
        self.delegated_authn_requests.get_or_create(&labels).inc();
        self.delegated_authn_request_duration.get_or_create(&labels).observe(seconds);
    }

    /// One delegated SubjectAccessReview call.
    pub fn delegated_authz_request(&self, code: &str, seconds: f64) {
        let labels = CodeLabel { code: code.into() };
        self.delegated_authz_requests.get_or_create(&labels).inc();
        self.delegated_authz_request_duration.get_or_create(&labels).observe(seconds);
    }

    /// A request authenticated with a client certificate that expires in `seconds`.
    pub fn client_certificate_expiration(&self, seconds: f64) {
        self.client_certificate_expiration.observe(seconds);
    }
}

/// Registers the families in `reg`, in upstream's order within each package.
pub(crate) fn register(reg: &mut KubeRegistry) {
    use StabilityLevel::*;
    let f = families();
    // endpoints/filters
    reg.register(
        "authenticated_user_requests",
        Alpha,
        "Counter of authenticated requests broken out by username.",
        &f.authenticated_user_requests,
    );
    reg.register("authentication_attempts", Alpha, "Counter of authenticated attempts.", &f.authentication_attempts);
    reg.register(
        "authentication_duration_seconds",
        Alpha,
        "Authentication duration in seconds broken out by result.",
        &f.authentication_duration,
    );
    reg.register(
        "authorization_attempts_total",
        Alpha,
        "Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', 'no-opinion' or 'error'.",
        &f.authorization_attempts,
    );
    reg.register(
        "authorization_duration_seconds",
        Alpha,
        "Authorization duration in seconds broken out by result.",
        &f.authorization_duration,
    );
    // authentication/token/cache: declared without help texts.
    reg.register("authentication_token_cache_request_duration_seconds", Alpha, "", &f.token_cache_request_duration);
    reg.register("authentication_token_cache_request_total", Alpha, "", &f.token_cache_requests);
    reg.register("authentication_token_cache_fetch_total", Alpha, "", &f.token_cache_fetches);
    reg.register("authentication_token_cache_active_fetch_count", Alpha, "", &f.token_cache_active_fetches);
    // authenticatorfactory / authorizerfactory
    reg.register(
        "apiserver_delegated_authn_request_total",
        Alpha,
        "Number of HTTP requests partitioned by status code.",
        &f.delegated_authn_requests,
    );
    reg.register(
        "apiserver_delegated_authn_request_duration_seconds",
        Alpha,
        "Request latency in seconds. Broken down by status code.",
        &f.delegated_authn_request_duration,
    );
    reg.register(
        "apiserver_delegated_authz_request_total",
        Alpha,
        "Number of HTTP requests partitioned by status code.",
        &f.delegated_authz_requests,
    );
    reg.register(
        "apiserver_delegated_authz_request_duration_seconds",
        Alpha,
        "Request latency in seconds. Broken down by status code.",
        &f.delegated_authz_request_duration,
    );
    // authentication/request/x509
    reg.register(
        "apiserver_client_certificate_expiration_seconds",
        Alpha,
        "Distribution of the remaining lifetime on the certificate used to authenticate a request.",
        &f.client_certificate_expiration,
    );
    // audit: nothing is audited here, as upstream's scheduler audits nothing.
    reg.register(
        "apiserver_audit_event_total",
        Alpha,
        "Counter of audit events generated and sent to the audit backend.",
        &f.audit_events,
    );
    reg.register(
        "apiserver_audit_requests_rejected_total",
        Alpha,
        "Counter of apiserver requests rejected due to an error in audit logging backend.",
        &f.audit_requests_rejected,
    );
    // validation: the scheduler validates no API objects declaratively.
    reg.register(
        "apiserver_validation_declarative_validation_mismatch_total",
        Beta,
        "Number of times declarative validation results differed from handwritten validation results for core types.",
        &f.declarative_validation_mismatches,
    );
    reg.register(
        "apiserver_validation_declarative_validation_panic_total",
        Beta,
        "Number of times declarative validation has panicked during validation.",
        &f.declarative_validation_panics,
    );
    reg.register(
        "apiserver_validation_duplicate_validation_error_total",
        Internal,
        "Number of duplicate validation errors during validation.",
        &f.duplicate_validation_errors,
    );
    // util/webhook: the scheduler calls no admission webhooks.
    reg.register(
        "apiserver_webhooks_x509_missing_san_total",
        Alpha,
        "Counts the number of requests to servers missing SAN extension in their serving certificate OR the number of connection failures due to the lack of x509 certificate SAN extension missing (either/or, based on the runtime environment)",
        &f.webhook_x509_missing_san,
    );
    reg.register(
        "apiserver_webhooks_x509_insecure_sha1_total",
        Alpha,
        "Counts the number of requests to servers with insecure SHA1 signatures in their serving certificate OR the number of connection failures due to the insecure SHA1 signatures (either/or, based on the runtime environment)",
        &f.webhook_x509_insecure_sha1,
    );
    // endpoints/discovery/aggregated: the scheduler serves no discovery.
    reg.register(
        "aggregator_discovery_aggregation_count_total",
        Alpha,
        "Counter of number of times discovery was aggregated",
        &f.discovery_aggregations,
    );
}

#[cfg(test)]
mod tests {
    use super::super::exponential_buckets;
    use super::*;

    #[test]
    fn usernames_are_compressed_as_upstream() {
        for (user, want) in [
            ("admin", "admin"),
            ("kubelet", "kubelet"),
            ("system:serviceaccount:kube-system:default", "system:serviceaccount:kube-system:default"),
            ("jane@example.com", "email_id"),
            ("system:anonymous", "other"),
            ("system:kube-scheduler", "other"),
        ] {
            assert_eq!(compress_username(user), want, "{user}");
        }
    }

    #[test]
    fn bucket_layouts_match_upstream() {
        assert_eq!(exponential_buckets(0.001, 2.0, 15).last().copied(), Some(16.384));
        assert_eq!(EXPIRATION_BUCKETS[13], 31104000.0);
    }
}
