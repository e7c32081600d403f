//! component-base's registry conventions on top of `prometheus-client` (upstream
//! `k8s.io/component-base/metrics`, `registry.go` and `options.go`): stability levels printed as a
//! `[LEVEL] ` help prefix, `--disabled-metrics`, and the self-metrics `registered_metrics_total`,
//! `disabled_metrics_total`, `hidden_metrics_total` and
//! `cardinality_enforcement_unexpected_categorizations_total`.
//!
//! Like upstream's, the self-metrics are process-wide: every registration into any
//! [`KubeRegistry`] of the process is counted, and each registry that calls
//! [`KubeRegistry::register_meta_metrics`] exposes the counts.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Metric, Registry};

use super::exposition::Format;

/// component-base's stability classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StabilityLevel {
    /// Not meant for users (`[INTERNAL]`).
    Internal,
    /// May change at any release (`[ALPHA]`).
    Alpha,
    /// Name and labels kept for a deprecation period (`[BETA]`).
    Beta,
    /// Covered by the metrics stability guarantees (`[STABLE]`).
    Stable,
}

impl StabilityLevel {
    /// The level as upstream prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            StabilityLevel::Internal => "INTERNAL",
            StabilityLevel::Alpha => "ALPHA",
            StabilityLevel::Beta => "BETA",
            StabilityLevel::Stable => "STABLE",
        }
    }
}

/// What the exposition needs to print a family as client_golang does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyMeta {
    /// The upstream name: the family name of the text format 0.0.4 (a counter's name keeps or
    /// lacks `_total` exactly as upstream spells it).
    pub name: String,
    /// The help text as upstream prints it (`[ALPHA] ...`, no trailing period added).
    pub help: String,
}

/// Families by the name `prometheus-client` registers them under (counters without `_total`).
pub type Metadata = HashMap<String, FamilyMeta>;

/// `{deprecated_version, stability_level}` of `registered_metrics_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RegisteredLabels {
    deprecated_version: String,
    stability_level: String,
}

/// The process-wide self-metrics.
struct MetaMetrics {
    registered: Family<RegisteredLabels, Counter>,
    disabled: Counter,
    hidden: Counter,
    cardinality_unexpected: Counter,
}

static META: LazyLock<MetaMetrics> = LazyLock::new(|| MetaMetrics {
    registered: Family::default(),
    disabled: Counter::default(),
    hidden: Counter::default(),
    cardinality_unexpected: Counter::default(),
});

/// Metric names turned off by `--disabled-metrics`.
static DISABLED: LazyLock<RwLock<BTreeSet<String>>> = LazyLock::new(Default::default);

/// Applies `--disabled-metrics` as component-base's `SetDisabledMetrics` does: each new,
/// non-empty name counts once in `disabled_metrics_total`, and families registered afterwards
/// under that name are hidden (not exposed, counted in `hidden_metrics_total`).
pub fn set_disabled_metrics<S: AsRef<str>>(names: &[S]) {
    let mut disabled = DISABLED.write();
    for name in names.iter().map(AsRef::as_ref) {
        if name.is_empty() {
            tracing::warn!("Attempted to disable an empty metric name, ignoring.");
            continue;
        }
        if disabled.insert(name.to_string()) {
            META.disabled.inc();
        }
    }
}

fn is_disabled(name: &str) -> bool {
    DISABLED.read().contains(name)
}

/// A `prometheus-client` registry that registers as component-base's `KubeRegistry` does and
/// remembers what the exposition needs (upstream names and help texts).
#[derive(Debug, Default)]
pub struct KubeRegistry {
    registry: Registry,
    meta: Metadata,
}

impl KubeRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `metric` under its upstream `name` with component-base's help prefix. A
    /// disabled name is not registered (it counts in `hidden_metrics_total`); everything else
    /// counts in `registered_metrics_total`. Returns whether the family is exposed.
    pub fn register<M: Metric + Clone>(
        &mut self,
        name: &str,
        stability: StabilityLevel,
        help: &str,
        metric: &M,
    ) -> bool {
        if is_disabled(name) {
            META.hidden.inc();
            return false;
        }
        META.registered
            .get_or_create(&RegisteredLabels {
                deprecated_version: String::new(),
                stability_level: stability.as_str().into(),
            })
            .inc();
        // prometheus-client names a counter family without `_total` and appends it to samples.
        let registered = match metric.metric_type() {
            MetricType::Counter => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        let help = format!("[{}] {help}", stability.as_str());
        self.meta.insert(registered.to_string(), FamilyMeta { name: name.to_string(), help: help.clone() });
        // prometheus-client appends a period to every help text; the exposition restores ours.
        self.registry.register(registered, help, metric.clone());
        true
    }

    /// Registers a collector as component-base's `RawMustRegister` does: not counted, never
    /// disabled (the process collector).
    pub fn register_raw_collector(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
    }

    /// Registers the self-metrics (upstream's `RegisterMetaMetrics`).
    pub fn register_meta_metrics(&mut self) {
        use StabilityLevel::*;
        let m = &*META;
        self.register(
            "registered_metrics_total",
            Beta,
            "The count of registered metrics broken by stability level and deprecation version.",
            &m.registered,
        );
        self.register("disabled_metrics_total", Beta, "The count of disabled metrics.", &m.disabled);
        self.register("hidden_metrics_total", Beta, "The count of hidden metrics.", &m.hidden);
        self.register(
            "cardinality_enforcement_unexpected_categorizations_total",
            Alpha,
            "The count of unexpected categorizations during cardinality enforcement.",
            &m.cardinality_unexpected,
        );
    }

    /// The underlying registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Upstream names and help texts by registered name.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// The OpenMetrics text `prometheus-client` produces (before [`Format::render`]).
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The exposition in `format`, as client_golang prints it.
    pub fn expose(&self, format: Format) -> String {
        format.render(&self.encode_openmetrics(), &self.meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::gauge::Gauge;

    fn sample(text: &str, prefix: &str) -> Option<f64> {
        text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[test]
    fn registrations_are_counted_by_stability_and_disabled_names_hidden() {
        let mut reg = KubeRegistry::new();
        reg.register_meta_metrics();
        let text = reg.expose(Format::Text);
        let before_alpha =
            sample(&text, r#"registered_metrics_total{deprecated_version="",stability_level="ALPHA"}"#).unwrap();
        let before_hidden = sample(&text, "hidden_metrics_total ").unwrap();
        let before_disabled = sample(&text, "disabled_metrics_total ").unwrap();

        set_disabled_metrics(&["ksched_test_registry_disabled", "ksched_test_registry_disabled", ""]);
        assert!(!reg.register(
            "ksched_test_registry_disabled",
            StabilityLevel::Alpha,
            "Off.",
            &Gauge::<i64>::default()
        ));
        assert!(reg.register("ksched_test_registry_on", StabilityLevel::Alpha, "On.", &Gauge::<i64>::default()));

        let text = reg.expose(Format::Text);
        // Other tests of this process may register concurrently: counts only grow.
        let alpha =
            sample(&text, r#"registered_metrics_total{deprecated_version="",stability_level="ALPHA"}"#).unwrap();
        assert!(alpha > before_alpha, "{text}");
        assert!(sample(&text, "hidden_metrics_total ").unwrap() > before_hidden, "{text}");
        assert!(sample(&text, "disabled_metrics_total ").unwrap() > before_disabled, "{text}");
        assert!(text.contains("# HELP ksched_test_registry_on [ALPHA] On.\n# TYPE ksched_test_registry_on gauge\n"));
        assert!(!text.contains("ksched_test_registry_disabled"), "{text}");
        assert!(text.contains(
            "# HELP registered_metrics_total [BETA] The count of registered metrics broken by stability level and deprecation version.\n"
        ));
    }
}
