//! `/healthz`, `/livez`, `/readyz` with named checks, `?verbose`, `?exclude=` and
//! `/<endpoint>/<check>`, answering as upstream's `apiserver/pkg/server/healthz` does; results
//! also feed `kubernetes_healthcheck{,s_total}` of `/metrics/slis`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::metrics::exposition::Format;
use crate::metrics::{KubeRegistry, StabilityLevel};

/// A check function: `Err(reason)` when unhealthy.
pub type CheckFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A named health check.
#[derive(Clone)]
pub struct HealthCheck {
    name: String,
    check: CheckFn,
}

impl std::fmt::Debug for HealthCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthCheck").field("name", &self.name).finish_non_exhaustive()
    }
}

impl HealthCheck {
    /// A check named `name`.
    pub fn new(name: impl Into<String>, check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        HealthCheck { name: name.into(), check: Arc::new(check) }
    }

    /// `ping`: always healthy (installed when an endpoint has no checks).
    pub fn ping() -> Self {
        Self::new("ping", || Ok(()))
    }

    /// `shutdown`: fails once `shutting_down` is set ("process is shutting down").
    pub fn shutdown(shutting_down: Arc<AtomicBool>) -> Self {
        Self::new("shutdown", move || {
            if shutting_down.load(Ordering::Acquire) {
                Err("process is shutting down".into())
            } else {
                Ok(())
            }
        })
    }

    /// `sched-handler-sync`: healthy once `synced` is set.
    pub fn handler_sync(synced: Arc<AtomicBool>) -> Self {
        Self::new("sched-handler-sync", move || {
            if synced.load(Ordering::Acquire) {
                Ok(())
            } else {
                Err("handlers are not fully synchronized".into())
            }
        })
    }

    /// The check's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the check.
    pub fn run(&self) -> Result<(), String> {
        (self.check)()
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabels {
    name: String,
    r#type: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckStatusLabels {
    name: String,
    status: String,
    r#type: String,
}

/// The SLI registry of health checks (`/metrics/slis`).
#[derive(Debug)]
pub(crate) struct SliMetrics {
    registry: KubeRegistry,
    healthcheck: Family<CheckLabels, Gauge>,
    total: Family<CheckStatusLabels, Counter>,
}

impl SliMetrics {
    pub(crate) fn new() -> Self {
        let healthcheck = Family::<CheckLabels, Gauge>::default();
        let total = Family::<CheckStatusLabels, Counter>::default();
        // component-base `metrics/prometheus/slis`: its own registry.
        let mut registry = KubeRegistry::new();
        registry.register(
            "kubernetes_healthcheck",
            StabilityLevel::Stable,
            "This metric records the result of a single healthcheck.",
            &healthcheck,
        );
        registry.register(
            "kubernetes_healthchecks_total",
            StabilityLevel::Stable,
            "This metric records the results of all healthcheck.",
            &total,
        );
        SliMetrics { registry, healthcheck, total }
    }

    fn observe(&self, name: &str, ty: &str, ok: bool) {
        let labels = CheckLabels { name: name.into(), r#type: ty.into() };
        self.healthcheck.get_or_create(&labels).set(ok as i64);
        let status = if ok { "success" } else { "error" };
        self.total
            .get_or_create(&CheckStatusLabels { name: name.into(), status: status.into(), r#type: ty.into() })
            .inc();
    }

    pub(crate) fn expose(&self, format: Format) -> String {
        self.registry.expose(format)
    }
}

/// A health response: status code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthResponse {
    pub ok: bool,
    pub body: String,
}

/// The root endpoint (`/healthz`, `/livez`, `/readyz`): `endpoint` is `healthz`, `livez` or
/// `readyz`; `query` is the raw query string.
pub(crate) fn root(endpoint: &str, checks: &[HealthCheck], query: Option<&str>, sli: &SliMetrics) -> HealthResponse {
    let mut excluded: BTreeSet<String> = BTreeSet::new();
    let mut verbose = false;
    for (k, v) in query.map(parse_query).unwrap_or_default() {
        match k.as_str() {
            "exclude" => {
                excluded.insert(v);
            }
            "verbose" => verbose = true,
            _ => {}
        }
    }
    let mut unknown = excluded.clone();
    let mut out = String::new();
    let mut failed = false;
    for c in checks {
        if excluded.contains(c.name()) {
            unknown.remove(c.name());
            let _ = writeln!(out, "[+]{} excluded: ok", c.name());
            continue;
        }
        match c.run() {
            Ok(()) => {
                sli.observe(c.name(), endpoint, true);
                let _ = writeln!(out, "[+]{} ok", c.name());
            }
            Err(e) => {
                sli.observe(c.name(), endpoint, false);
                tracing::debug!(endpoint, check = c.name(), "health check failed: {e}");
                let _ = writeln!(out, "[-]{} failed: reason withheld", c.name());
                failed = true;
            }
        }
    }
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|n| format!("{n:?}")).collect();
        let _ = writeln!(out, "warn: some health checks cannot be excluded: no matches for {}", names.join(","));
    }
    if failed {
        // http.Error appends a newline.
        let _ = writeln!(out, "{endpoint} check failed");
        return HealthResponse { ok: false, body: out };
    }
    if !verbose {
        return HealthResponse { ok: true, body: "ok".into() };
    }
    let _ = writeln!(out, "{endpoint} check passed");
    HealthResponse { ok: true, body: out }
}

/// `/<endpoint>/<check>`: `None` for an unknown check (404).
pub(crate) fn single(checks: &[HealthCheck], name: &str) -> Option<HealthResponse> {
    let c = checks.iter().find(|c| c.name() == name)?;
    Some(match c.run() {
        Ok(()) => HealthResponse { ok: true, body: "ok".into() },
        Err(e) => HealthResponse { ok: false, body: format!("internal server error: {e}\n") },
    })
}

/// `a=1&b&c=x%20y` into pairs (percent- and plus-decoded).
pub(crate) fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |i: usize| {
        b.get(i..i + 2).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok())
    };
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], hex(i + 1)) {
            (b'+', _) => out.push(b' '),
            (b'%', Some(v)) => {
                out.push(v);
                i += 2;
            }
            (c, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks(ready: bool) -> Vec<HealthCheck> {
        let flag = Arc::new(AtomicBool::new(ready));
        vec![HealthCheck::ping(), HealthCheck::handler_sync(flag)]
    }

    #[test]
    fn root_formats_like_upstream() {
        let sli = SliMetrics::new();
        assert_eq!(root("readyz", &checks(true), None, &sli), HealthResponse { ok: true, body: "ok".into() });
        assert_eq!(
            root("readyz", &checks(true), Some("verbose"), &sli).body,
            "[+]ping ok\n[+]sched-handler-sync ok\nreadyz check passed\n"
        );
        assert_eq!(
            root("readyz", &checks(false), None, &sli),
            HealthResponse {
                ok: false,
                body: "[+]ping ok\n[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n".into()
            }
        );
        assert_eq!(
            root("readyz", &checks(false), Some("exclude=sched-handler-sync&exclude=nope&verbose=1"), &sli).body,
            "[+]ping ok\n[+]sched-handler-sync excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
        );
        let text = sli.expose(Format::Text);
        assert!(text.contains(r#"kubernetes_healthcheck{name="sched-handler-sync",type="readyz"} 0"#), "{text}");
        assert!(
            text.contains(r#"kubernetes_healthchecks_total{name="ping",status="success",type="readyz"} 4"#),
            "{text}"
        );
    }

    #[test]
    fn single_check() {
        assert_eq!(single(&checks(true), "ping"), Some(HealthResponse { ok: true, body: "ok".into() }));
        assert_eq!(
            single(&checks(false), "sched-handler-sync"),
            Some(HealthResponse {
                ok: false,
                body: "internal server error: handlers are not fully synchronized\n".into()
            })
        );
        assert_eq!(single(&checks(true), "nope"), None);
    }

    #[test]
    fn query_decoding() {
        assert_eq!(
            parse_query("exclude=a%2Db&verbose&x=1+2"),
            vec![("exclude".into(), "a-b".into()), ("verbose".into(), "".into()), ("x".into(), "1 2".into())]
        );
        assert_eq!(parse_query("a=%zz%4"), vec![("a".into(), "%zz%4".into())]);
    }
}
