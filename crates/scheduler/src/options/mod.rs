//! The `kube-scheduler` command line (upstream's `cmd/kube-scheduler/app/options`): every flag
//! with upstream's name, default and meaning, grouped in upstream's named flag sets, and the
//! overlay of those flags onto the configuration (`--config` file or defaults).
//!
//! Parsing follows pflag where it shows: `_` in flag names is read as `-`, scalar flags may be
//! repeated (last wins), bool flags take a value only as `--flag=false`, a value may start with
//! `-`, and slice flags split on commas and accumulate.
// Flag doc comments are upstream's help texts verbatim (clap prints them for --help); their
// brackets and URLs are not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::bare_urls, rustdoc::invalid_html_tags)]

pub mod client;
pub mod featuregate;
mod help;
pub mod logs;
pub mod transport;
pub mod values;
pub mod version;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::net::IpAddr;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser};

use crate::config::{self, Duration, KubeSchedulerConfiguration, SchedulerFeatures};
pub use help::{render_help, render_usage};
pub use values::{FeatureGateSetting, NamedCertKey, VModuleItem};

/// The command name, as cobra reports it in errors.
pub const COMMAND: &str = "kube-scheduler";

/// Upstream's long description, printed first by `--help`.
pub const LONG_ABOUT: &str = "The Kubernetes scheduler is a control plane process which assigns
Pods to Nodes. The scheduler determines which Nodes are valid placements for
each Pod in the scheduling queue according to constraints and available
resources. The scheduler then ranks each valid Node and binds the Pod to a
suitable Node. Multiple different schedulers may be used within a cluster;
kube-scheduler is the reference implementation.
See [scheduling](https://kubernetes.io/docs/concepts/scheduling-eviction/)
for more information about scheduling and the kube-scheduler component.";

/// Named flag sets in the order `--help` prints them.
pub const FLAG_SETS: [&str; 10] = [
    "misc",
    "secure serving",
    "authentication",
    "authorization",
    "deprecated",
    "leader election",
    "feature gate",
    "metrics",
    "logs",
    "global",
];

/// All flags of `kube-scheduler`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = COMMAND,
    disable_help_flag = true,
    disable_version_flag = true,
    disable_help_subcommand = true,
    args_override_self = true
)]
pub struct Options {
    /// Flags of the "misc" set.
    #[command(flatten)]
    pub misc: MiscOptions,
    /// Flags of the "secure serving" set.
    #[command(flatten)]
    pub secure_serving: ServingOptions,
    /// Flags of the "authentication" set.
    #[command(flatten)]
    pub authentication: AuthnOptions,
    /// Flags of the "authorization" set.
    #[command(flatten)]
    pub authorization: AuthzOptions,
    /// Flags of the "deprecated" set.
    #[command(flatten)]
    pub deprecated: DeprecatedOptions,
    /// Flags of the "leader election" set.
    #[command(flatten)]
    pub leader_election: LeaderElectionOptions,
    /// Flags of the "feature gate" set.
    #[command(flatten)]
    pub feature_gate: FeatureGateOptions,
    /// Flags of the "metrics" set.
    #[command(flatten)]
    pub metrics: MetricsOptions,
    /// Flags of the "logs" set.
    #[command(flatten)]
    pub logs: logs::LogsOptions,
    /// Flags of the "global" set.
    #[command(flatten)]
    pub global: GlobalOptions,
    /// Positional arguments: collected only to be rejected like upstream does.
    #[arg(hide = true, num_args = 0..)]
    pub args: Vec<String>,
    /// Long names of the flags given on the command line (pflag's `Changed`).
    #[arg(skip)]
    pub changed: BTreeSet<String>,
    /// Every flag with its value, given or default, as `/flagz` lists them.
    #[arg(skip)]
    pub flagz: Vec<(String, String)>,
    /// The `kube` feature gates resolved from `--feature-gates` and the versions, on first use.
    #[arg(skip)]
    gates: std::sync::OnceLock<featuregate::FeatureGate>,
}

/// misc.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "misc")]
pub struct MiscOptions {
    /// The path to the configuration file.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub config: String,
    /// If set, write the configuration values to this file and exit.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub write_config_to: String,
    /// The address of the Kubernetes API server (overrides any value in kubeconfig)
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub master: String,
}

/// secure serving: what the HTTPS endpoint (healthz, metrics, configz) is served with.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "secure serving")]
pub struct ServingOptions {
    /// The IP address on which to listen for the --secure-port port. The associated interface(s) must be reachable by the rest of the cluster, and by CLI/web clients. If blank or an unspecified address (0.0.0.0 or ::), all interfaces and IP address families will be used.
    #[arg(verbatim_doc_comment, long, value_name = "ip", default_value = "0.0.0.0", value_parser = values::parse_ip)]
    pub bind_address: IpAddr,
    /// The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "10259", value_parser = values::parse_int)]
    pub secure_port: i64,
    /// If true, HTTP2 serving will be disabled [default=false]
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub disable_http2_serving: bool,
    /// The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub cert_dir: String,
    /// File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert). If HTTPS serving is enabled, and --tls-cert-file and --tls-private-key-file are not provided, a self-signed certificate and key are generated for the public address and saved to the directory specified by --cert-dir.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub tls_cert_file: String,
    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub tls_private_key_file: String,
    /// Comma-separated list of cipher suites for the server. If omitted, the default Go cipher suites will be used. {n}Preferred values: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, TLS_RSA_WITH_AES_128_CBC_SHA, TLS_RSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_AES_256_CBC_SHA, TLS_RSA_WITH_AES_256_GCM_SHA384. {n}Insecure values: TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, TLS_ECDHE_ECDSA_WITH_RC4_128_SHA, TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, TLS_ECDHE_RSA_WITH_RC4_128_SHA, TLS_RSA_WITH_3DES_EDE_CBC_SHA, TLS_RSA_WITH_AES_128_CBC_SHA256, TLS_RSA_WITH_RC4_128_SHA.
    #[arg(verbatim_doc_comment, long, value_name = "strings", value_delimiter = ',', action = ArgAction::Append)]
    pub tls_cipher_suites: Vec<String>,
    /// Comma-separated list of numeric Go crypto/tls CurveID values, as the allowed key exchange mechanisms for the server. The supported values depend on the Go version used. See https://pkg.go.dev/crypto/tls#CurveID for values supported for each Go version. The order of the list is ignored, and key exchange mechanisms are chosen by Go from this list using an internal preference order. If omitted, the default Go curves will be used.
    #[arg(verbatim_doc_comment, long, value_name = "int32Slice", value_delimiter = ',', action = ArgAction::Append, value_parser = values::parse_int32)]
    pub tls_curve_preferences: Vec<i32>,
    /// Minimum TLS version supported. Possible values: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub tls_min_version: String,
    /// A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns which are fully qualified domain names, possibly with prefixed wildcard segments. The domain patterns also allow IP addresses, but IPs should only be used if the apiserver has visibility to the IP address requested by a client. If no domain patterns are provided, the names of the certificate are extracted. Non-wildcard matches trump over wildcard matches, explicit domain patterns trump over extracted names. For multiple key/certificate pairs, use the --tls-sni-cert-key multiple times. Examples: "example.crt,example.key" or "foo.crt,foo.key:*.foo.com,foo.com".
    #[arg(verbatim_doc_comment, long, value_name = "namedCertKey", action = ArgAction::Append, value_parser = values::parse_named_cert_key)]
    pub tls_sni_cert_key: Vec<NamedCertKey>,
    /// The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection. Zero means to use golang's default.
    #[arg(verbatim_doc_comment, long, value_name = "int", default_value = "0", value_parser = values::parse_int)]
    pub http2_max_streams_per_connection: i64,
    /// If true, SO_REUSEPORT will be used when binding the port, which allows more than one instance to bind on the same address and port. [default=false]
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub permit_port_sharing: bool,
    /// If true, SO_REUSEADDR will be used when binding the port. This allows binding to wildcard IPs like 0.0.0.0 and specific IPs in parallel, and it avoids waiting for the kernel to release sockets in TIME_WAIT state. [default=false]
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub permit_address_sharing: bool,
}

/// authentication: delegated authentication of requests to the HTTPS endpoint.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "authentication")]
pub struct AuthnOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io. This is optional. If empty, all token requests are considered to be anonymous and no client CA is looked up in the cluster.
    #[arg(
        verbatim_doc_comment,
        id = "authentication-kubeconfig",
        long = "authentication-kubeconfig",
        value_name = "string",
        default_value = ""
    )]
    pub kubeconfig: String,
    /// The duration to cache responses from the webhook token authenticator.
    #[arg(verbatim_doc_comment, long = "authentication-token-webhook-cache-ttl", value_name = "duration", default_value = "10s", value_parser = values::parse_duration)]
    pub token_webhook_cache_ttl: Duration,
    /// If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file is authenticated with an identity corresponding to the CommonName of the client certificate.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub client_ca_file: String,
    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(verbatim_doc_comment, long = "requestheader-username-headers", value_name = "strings", value_delimiter = ',', action = ArgAction::Append, default_values = ["x-remote-user"])]
    pub requestheader_username_headers: Vec<String>,
    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested. Requires the RemoteRequestHeaderUID feature to be enabled.
    #[arg(verbatim_doc_comment, long = "requestheader-uid-headers", value_name = "strings", value_delimiter = ',', action = ArgAction::Append)]
    pub requestheader_uid_headers: Vec<String>,
    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(verbatim_doc_comment, long = "requestheader-group-headers", value_name = "strings", value_delimiter = ',', action = ArgAction::Append, default_values = ["x-remote-group"])]
    pub requestheader_group_headers: Vec<String>,
    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(verbatim_doc_comment, long = "requestheader-extra-headers-prefix", value_name = "strings", value_delimiter = ',', action = ArgAction::Append, default_values = ["x-remote-extra-"])]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames in headers specified by --requestheader-username-headers. WARNING: generally do not depend on authorization being already done for incoming requests.
    #[arg(verbatim_doc_comment, long = "requestheader-client-ca-file", value_name = "string", default_value = "")]
    pub requestheader_client_ca_file: String,
    /// List of client certificate common names to allow to provide usernames in headers specified by --requestheader-username-headers. If empty, any client certificate validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(verbatim_doc_comment, long = "requestheader-allowed-names", value_name = "strings", value_delimiter = ',', action = ArgAction::Append)]
    pub requestheader_allowed_names: Vec<String>,
    /// If false, the authentication-kubeconfig will be used to lookup missing authentication configuration from the cluster.
    #[arg(verbatim_doc_comment, long = "authentication-skip-lookup", value_name = "", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub skip_lookup: bool,
    /// If true, failures to look up missing authentication configuration from the cluster are not considered fatal. Note that this can result in authentication that treats all requests as anonymous.
    #[arg(verbatim_doc_comment, long = "authentication-tolerate-lookup-failure", value_name = "", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub tolerate_lookup_failure: bool,
}

/// authorization: delegated authorization of requests to the HTTPS endpoint.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "authorization")]
pub struct AuthzOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io. This is optional. If empty, all requests not skipped by authorization are forbidden.
    #[arg(
        verbatim_doc_comment,
        id = "authorization-kubeconfig",
        long = "authorization-kubeconfig",
        value_name = "string",
        default_value = ""
    )]
    pub kubeconfig: String,
    /// The duration to cache 'authorized' responses from the webhook authorizer.
    #[arg(verbatim_doc_comment, long = "authorization-webhook-cache-authorized-ttl", value_name = "duration", default_value = "10s", value_parser = values::parse_duration)]
    pub webhook_cache_authorized_ttl: Duration,
    /// The duration to cache 'unauthorized' responses from the webhook authorizer.
    #[arg(verbatim_doc_comment, long = "authorization-webhook-cache-unauthorized-ttl", value_name = "duration", default_value = "10s", value_parser = values::parse_duration)]
    pub webhook_cache_unauthorized_ttl: Duration,
    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core' kubernetes server.
    #[arg(verbatim_doc_comment, long = "authorization-always-allow-paths", value_name = "strings", value_delimiter = ',', action = ArgAction::Append, default_values = ["/healthz", "/readyz", "/livez"])]
    pub always_allow_paths: Vec<String>,
    /// Groups authorized without a SubjectAccessReview (not a flag; upstream's default).
    #[arg(skip = vec!["system:masters".to_string()])]
    pub always_allow_groups: Vec<String>,
}

/// deprecated: still honoured, but ignored when `--config` is given (except
/// `--pod-max-in-unschedulable-pods-duration`, which has no config-file field).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "deprecated")]
pub struct DeprecatedOptions {
    /// DEPRECATED: enable profiling via web interface host:port/debug/pprof/. This parameter is ignored if a config file is specified in --config.
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub profiling: bool,
    /// DEPRECATED: enable block profiling, if profiling is enabled. This parameter is ignored if a config file is specified in --config.
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub contention_profiling: bool,
    /// DEPRECATED: path to kubeconfig file with authorization and master location information. This parameter is ignored if a config file is specified in --config.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub kubeconfig: String,
    /// DEPRECATED: content type of requests sent to apiserver. This parameter is ignored if a config file is specified in --config.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "application/vnd.kubernetes.protobuf")]
    pub kube_api_content_type: String,
    /// DEPRECATED: QPS to use while talking with kubernetes apiserver. This parameter is ignored if a config file is specified in --config.
    #[arg(verbatim_doc_comment, long, value_name = "float32", default_value = "50", value_parser = values::parse_float32)]
    pub kube_api_qps: f32,
    /// DEPRECATED: burst to use while talking with kubernetes apiserver. This parameter is ignored if a config file is specified in --config.
    #[arg(verbatim_doc_comment, long, value_name = "int32", default_value = "100", value_parser = values::parse_int32)]
    pub kube_api_burst: i32,
    /// DEPRECATED: the maximum time a pod can stay in unschedulablePods. If a pod stays in unschedulablePods for longer than this value, the pod will be moved from unschedulablePods to backoffQ or activeQ. This flag is deprecated and will be removed in a future version.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "5m0s", value_parser = values::parse_duration)]
    pub pod_max_in_unschedulable_pods_duration: Duration,
}

/// leader election: flags set explicitly override the config file.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "leader election")]
pub struct LeaderElectionOptions {
    /// Start a leader election client and gain leadership before executing the main loop. Enable this when running replicated components for high availability.
    #[arg(verbatim_doc_comment, long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub leader_elect: bool,
    /// The duration that non-leader candidates will wait after observing a leadership renewal until attempting to acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that a leader can be stopped before it is replaced by another candidate. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "15s", value_parser = values::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// The interval between attempts by the acting master to renew a leadership slot before it stops leading. This must be less than the lease duration. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "10s", value_parser = values::parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// The duration the clients should wait between attempting acquisition and renewal of a leadership. This is only applicable if leader election is enabled.
    #[arg(verbatim_doc_comment, long, value_name = "duration", default_value = "2s", value_parser = values::parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// The type of resource object that is used for locking during leader election. Supported options are 'leases'.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "leases")]
    pub leader_elect_resource_lock: String,
    /// The name of resource object that is used for locking during leader election.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "kube-scheduler")]
    pub leader_elect_resource_name: String,
    /// The namespace of resource object that is used for locking during leader election.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
}

/// feature gate: gates and compatibility versions.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "feature gate")]
pub struct FeatureGateOptions {
    /// Comma-separated list of component:key=value pairs that describe feature gates for alpha/experimental features of different components.{n}If the component is not specified, defaults to "kube". This flag can be repeatedly invoked. For example: --feature-gates 'wardle:featureA=true,wardle:featureB=false' --feature-gates 'kube:featureC=true'Options are:{n}(every gate of the table, added by `command()`)
    #[arg(verbatim_doc_comment, long, value_name = "colonSeparatedMultimapStringString", action = ArgAction::Append, value_parser = values::parse_feature_gates)]
    pub feature_gates: Vec<Vec<FeatureGateSetting>>,
    /// The versions different components emulate their capabilities (APIs, features, ...) of.{n}If set, the component will emulate the behavior of this version instead of the underlying binary version.{n}Version format could only be major.minor, for example: '--emulated-version=wardle=1.2,kube=1.31'.{n}Options are: kube=1.33..1.36(default:1.36){n}If the component is not specified, defaults to "kube"
    #[arg(verbatim_doc_comment, long, value_name = "strings", value_delimiter = ',', action = ArgAction::Append)]
    pub emulated_version: Vec<String>,
    /// The min version of control plane components the server should be compatible with.{n}Must be less or equal to the emulated-version. Version format could only be major.minor, for example: '--min-compatibility-version=wardle=1.2,kube=1.31'.{n}Options are: kube=1.33..1.36(default:1.35){n}If the component is not specified, defaults to "kube"
    #[arg(verbatim_doc_comment, long, value_name = "strings", value_delimiter = ',', action = ArgAction::Append)]
    pub min_compatibility_version: Vec<String>,
}

/// metrics: what `/metrics` exposes.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "metrics")]
pub struct MetricsOptions {
    /// The previous version for which you want to show hidden metrics. Only the previous minor version is meaningful, other values will not be allowed. The format is <major>.<minor>, e.g.: '1.16'. The purpose of this format is make sure you have the opportunity to notice if the next release hides additional metrics, rather than being surprised when they are permanently removed in the release after that.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub show_hidden_metrics_for_version: String,
    /// This flag provides an escape hatch for misbehaving metrics. You must provide the fully qualified metric name in order to disable it. Disclaimer: disabling metrics is higher in precedence than showing hidden metrics.
    #[arg(verbatim_doc_comment, long, value_name = "strings", value_delimiter = ',', action = ArgAction::Append)]
    pub disabled_metrics: Vec<String>,
    /// The map from metric-label to value allow-list of this label. The key's format is <MetricName>,<LabelName>. The value's format is <allowed_value>,<allowed_value>...e.g. metric1,label1='v1,v2,v3', metric1,label2='v1,v2,v3' metric2,label1='v1,v2,v3'.
    #[arg(verbatim_doc_comment, long = "allow-metric-labels", value_name = "stringToString", action = ArgAction::Append, value_parser = values::parse_string_to_string)]
    pub allow_metric_labels_raw: Vec<BTreeMap<String, String>>,
    /// The path to the manifest file that contains the allow-list mapping. The format of the file is the same as the flag --allow-metric-labels, i.e., {n}allowListMapping:{n}  "metric1,label1": "value11,value12"{n}  "metric2,label2": ""{n}Note that the flag --allow-metric-labels will override the manifest file.
    #[arg(verbatim_doc_comment, long, value_name = "string", default_value = "")]
    pub allow_metric_labels_manifest: String,
}

impl MetricsOptions {
    /// `--allow-metric-labels` merged over every occurrence (later keys win).
    pub fn allow_metric_labels(&self) -> BTreeMap<String, String> {
        self.allow_metric_labels_raw.iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// global: `--help` and `--version`.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "global")]
pub struct GlobalOptions {
    /// help for kube-scheduler
    #[arg(verbatim_doc_comment, short = 'h', long, value_name = "", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = values::parse_bool, action = ArgAction::Set)]
    pub help: bool,
    /// --version, --version=raw prints version information and quits; --version=vX.Y.Z... sets the reported version
    #[arg(verbatim_doc_comment, long, value_name = "version", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = version::parse_version_flag)]
    pub version: String,
}

/// Why the command line was not accepted, and what to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// `--help`: print to stdout, exit 0.
    Help(String),
    /// A flag error: usage then `Error: <message>` on stderr, exit 1.
    Flag(String),
    /// Any other error before logging starts (positional arguments): `Error: <message>`, exit 1.
    Other(String),
}

/// The clap command with pflag's leniencies applied (values may start with `-`).
pub fn command() -> clap::Command {
    Options::command().mut_arg("feature_gates", feature_gates_help).mut_args(|a| {
        let takes_value = a.get_num_args().map(|r| r.min_values() > 0).unwrap_or(true);
        if !a.is_positional() && takes_value {
            a.allow_hyphen_values(true)
        } else {
            a
        }
    })
}

/// `--feature-gates` help: the fixed text, then every alpha and beta gate with its default.
fn feature_gates_help(a: clap::Arg) -> clap::Arg {
    let head = a.get_help().map(|h| h.to_string()).unwrap_or_default();
    let head = head.split("Options are:").next().unwrap_or_default().to_string();
    a.help(format!("{head}Options are:\n{}", featuregate::known_features_help().join("\n")))
}

/// pflag's `WordSepNormalizeFunc`: `--leader_elect` is `--leader-elect`.
pub fn normalize_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut out = Vec::new();
    let mut rest_positional = false;
    for a in args {
        let a: OsString = a.into();
        if rest_positional {
            out.push(a);
            continue;
        }
        let Some(s) = a.to_str() else {
            out.push(a);
            continue;
        };
        if s == "--" {
            rest_positional = true;
            out.push(a);
        } else if let Some(body) = s.strip_prefix("--") {
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let name = name.replace('_', "-");
            out.push(match value {
                Some(v) => format!("--{name}={v}").into(),
                None => format!("--{name}").into(),
            });
        } else {
            out.push(a);
        }
    }
    out
}

/// Parses a full argv (program name first), after `_`→`-` normalisation.
pub fn parse<I, T>(args: I) -> Result<Options, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let cmd = command();
    let matches = cmd.clone().try_get_matches_from(normalize_args(args)).map_err(|e| CliError::Flag(flag_error(&e)))?;
    let mut opts = Options::from_arg_matches(&matches).map_err(|e| CliError::Flag(flag_error(&e)))?;
    for arg in cmd.get_arguments() {
        if let Some(long) = arg.get_long() {
            if matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
                opts.changed.insert(long.to_string());
            }
            opts.flagz.push((long.to_string(), flag_value(arg, &matches)));
        }
    }
    if opts.global.help {
        return Err(CliError::Help(render_help(&cmd)));
    }
    // cobra accepts empty positional arguments and rejects any other.
    if opts.args.iter().any(|a| !a.is_empty()) {
        let quoted: Vec<String> = opts.args.iter().map(|a| values::go_quote(a)).collect();
        return Err(CliError::Other(format!(
            "{} does not take any arguments, got [{}]",
            values::go_quote(COMMAND),
            quoted.join(" ")
        )));
    }
    Ok(opts)
}

/// A flag's value as pflag's `Value.String()` gives it to `/flagz`: the last value given on the
/// command line (lists in brackets), else the default; a switch never given reads `false`.
fn flag_value(arg: &clap::Arg, matches: &clap::ArgMatches) -> String {
    // pflag brackets string slices; the map-like types print their pairs comma-separated.
    let list_type = arg.get_value_names().and_then(|v| v.first()).map(|n| n.as_str().to_string());
    let list = matches!(arg.get_action(), ArgAction::Append) && list_type.as_deref() == Some("strings");
    if matches!(arg.get_action(), ArgAction::Append) && !list {
        return given_values(arg, matches).join(",");
    }
    let given = given_values(arg, matches);
    if list {
        return format!("[{}]", given.join(","));
    }
    match given.last() {
        Some(v) => v.clone(),
        None if matches!(arg.get_action(), ArgAction::SetTrue) => "false".to_string(),
        None if matches!(arg.get_action(), ArgAction::SetFalse) => "true".to_string(),
        None => String::new(),
    }
}

/// The values given for `arg` on the command line, else its defaults.
fn given_values(arg: &clap::Arg, matches: &clap::ArgMatches) -> Vec<String> {
    let id = arg.get_id().as_str();
    match matches.value_source(id) {
        Some(ValueSource::CommandLine) => {
            matches.get_raw(id).map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect()).unwrap_or_default()
        }
        _ => arg.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect(),
    }
}

/// Renders a clap error with pflag's wording.
fn flag_error(e: &clap::Error) -> String {
    let ctx = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => s.clone(),
        Some(ContextValue::Strings(v)) => v.join(" "),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    // The flag as typed, without clap's `<value>` decoration.
    let flag_name = || {
        let arg = ctx(ContextKind::InvalidArg);
        arg.split([' ', '=', '<', '[']).next().unwrap_or_default().to_string()
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let arg = ctx(ContextKind::InvalidArg);
            let name = arg.split('=').next().unwrap_or_default();
            if let Some(short) = name.strip_prefix('-').filter(|s| !s.starts_with('-')) {
                let c = short.chars().next().unwrap_or('-');
                format!("unknown shorthand flag: '{c}' in {arg}")
            } else {
                format!("unknown flag: {name}")
            }
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let value = ctx(ContextKind::InvalidValue);
            let Some(source) = std::error::Error::source(e).map(|s| s.to_string()) else {
                // clap's "a value is required": the flag was last with no value.
                return format!("flag needs an argument: {}", flag_name());
            };
            format!(
                "invalid argument {} for {} flag: {source}",
                values::go_quote(&value),
                values::go_quote(&flag_name())
            )
        }
        ErrorKind::NoEquals | ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => {
            format!("flag needs an argument: {}", flag_name())
        }
        _ => {
            let msg = e.kind().as_str().map(str::to_string).unwrap_or_else(|| e.to_string());
            msg.trim().trim_start_matches("error: ").to_string()
        }
    }
}

/// The configuration the scheduler runs with, plus what has no config-file field.
#[derive(Debug, Clone)]
pub struct Effective {
    /// Defaulted configuration with the flag overlay applied.
    pub config: KubeSchedulerConfiguration,
    /// Feature gates that change scheduler behaviour.
    pub features: SchedulerFeatures,
    /// `--pod-max-in-unschedulable-pods-duration`.
    pub pod_max_in_unschedulable_pods_duration: std::time::Duration,
}

impl Options {
    /// True when `--<name>` was given on the command line.
    pub fn changed(&self, name: &str) -> bool {
        self.changed.contains(name)
    }

    /// The requested value of the `kube` feature gate `name` (later settings win), if set.
    pub fn feature_gate(&self, name: &str) -> Option<bool> {
        self.feature_gate
            .feature_gates
            .iter()
            .flatten()
            .filter(|g| g.component == "kube" && g.name == name)
            .map(|g| g.enabled)
            .next_back()
    }

    /// The emulated and minimum compatibility `(major, minor)` versions of the `kube` component
    /// (`--emulated-version`, default this binary's; `--min-compatibility-version`, default one
    /// minor below the emulated version), as `version_info` reports them.
    pub fn compatibility_versions(&self) -> ((u32, u32), (u32, u32)) {
        let last = |list: &[String]| {
            list.iter()
                .rev()
                .filter_map(|s| values::parse_component_version(s).ok())
                .find(|(component, _, _)| component == "kube")
                .map(|(_, major, minor)| (major, minor))
        };
        let emulation = last(&self.feature_gate.emulated_version).unwrap_or((version::MAJOR, version::MINOR));
        // The default is one minor below the emulated version, but never below the floor
        // (component-base's `SetEmulationVersion`): 1.33 emulates with 1.33 compatibility.
        let floor = (version::MAJOR, version::MINOR - 3);
        let min = last(&self.feature_gate.min_compatibility_version)
            .unwrap_or_else(|| (emulation.0, emulation.1.saturating_sub(1)).max(floor));
        (emulation, min)
    }

    /// The `kube` feature gates: the `--feature-gates` settings at the emulated and minimum
    /// compatibility versions. Refused settings are reported by [`Options::validate`].
    pub fn gates(&self) -> &featuregate::FeatureGate {
        self.gates.get_or_init(|| {
            let settings: Vec<(String, bool)> = self
                .feature_gate
                .feature_gates
                .iter()
                .flatten()
                .filter(|g| g.component == "kube")
                .map(|g| (g.name.clone(), g.enabled))
                .collect();
            let (emulation, min) = self.compatibility_versions();
            featuregate::FeatureGate::resolve(&settings, emulation, min)
        })
    }

    /// Whether the `kube` feature gate `name` is enabled (its setting, else its default at the
    /// emulated version).
    pub fn feature_enabled(&self, name: &str) -> bool {
        self.gates().enabled(name)
    }

    /// Gate names set that no registered gate has (accepted with a warning, as upstream).
    pub fn unknown_feature_gates(&self) -> Vec<String> {
        self.gates().unknown().to_vec()
    }

    /// Components other than `kube` named in `--feature-gates` (upstream: not registered).
    fn unregistered_gate_components(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .feature_gate
            .feature_gates
            .iter()
            .flatten()
            .filter(|g| g.component != "kube")
            .map(|g| g.component.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The gates that change configuration defaults and validation.
    pub fn scheduler_features(&self) -> SchedulerFeatures {
        SchedulerFeatures {
            dynamic_resource_allocation: self.feature_enabled("DynamicResourceAllocation"),
            node_declared_features: self.feature_enabled("NodeDeclaredFeatures"),
            generic_workload: self.feature_enabled("GenericWorkload"),
            gang_scheduling: self.feature_enabled("GangScheduling"),
            topology_aware_workload_scheduling: self.feature_enabled("TopologyAwareWorkloadScheduling"),
            workload_aware_preemption: self.feature_enabled("WorkloadAwarePreemption"),
            storage_capacity_scoring: self.feature_enabled("StorageCapacityScoring"),
            dra_scheduler_filter_timeout: self.feature_enabled("DRASchedulerFilterTimeout"),
            dra_device_binding_conditions: self.feature_enabled("DRADeviceBindingConditions"),
            dra_resource_claim_device_status: self.feature_enabled("DRAResourceClaimDeviceStatus"),
            taint_toleration_comparison_operators: self.feature_enabled("TaintTolerationComparisonOperators"),
            match_label_keys_in_pod_topology_spread: self.feature_enabled("MatchLabelKeysInPodTopologySpread"),
            dra_admin_access: self.feature_enabled("DRAAdminAccess"),
            dra_prioritized_list: self.feature_enabled("DRAPrioritizedList"),
            dra_partitionable_devices: self.feature_enabled("DRAPartitionableDevices"),
            dra_device_taints: self.feature_enabled("DRADeviceTaints"),
            dra_consumable_capacity: self.feature_enabled("DRAConsumableCapacity"),
            opportunistic_batching: self.feature_enabled("OpportunisticBatching"),
        }
    }

    /// Deprecated flags given on the command line, each with whether `--config` makes it inert.
    pub fn deprecated_flags_set(&self) -> Vec<(String, bool)> {
        let with_config = !self.misc.config.is_empty();
        command()
            .get_arguments()
            .filter(|a| a.get_help_heading() == Some("deprecated"))
            .filter_map(|a| a.get_long())
            .filter(|l| self.changed(l))
            .map(|l| (l.to_string(), with_config && l != "pod-max-in-unschedulable-pods-duration"))
            .collect()
    }

    /// Upstream's `Options.Validate` minus the configuration: serving, authentication,
    /// authorization, metrics and compatibility-version errors, in that order.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        errs.extend(self.validate_versions());
        let s = &self.secure_serving;
        if !(0..=65535).contains(&s.secure_port) {
            errs.push(format!(
                "--secure-port {} must be between 0 and 65535, inclusive. 0 for turning off secure port",
                s.secure_port
            ));
        }
        let a = &self.authentication;
        for (flag, list) in [
            ("requestheader-username-headers", &a.requestheader_username_headers),
            ("requestheader-group-headers", &a.requestheader_group_headers),
            ("requestheader-extra-headers-prefix", &a.requestheader_extra_headers_prefix),
            ("requestheader-allowed-names", &a.requestheader_allowed_names),
        ] {
            if list.iter().any(|h| h.trim().is_empty()) {
                errs.push(format!("empty value in {}", values::go_quote(flag)));
            }
        }
        if !a.requestheader_uid_headers.is_empty() {
            if !self.feature_enabled("RemoteRequestHeaderUID") {
                errs.push(
                    r#"--requestheader-uid-headers requires the "RemoteRequestHeaderUID" feature to be enabled"#.into(),
                );
            } else if a.requestheader_uid_headers.iter().any(|h| h.trim().is_empty()) {
                errs.push(r#"empty value in "requestheader-uid-headers""#.into());
            } else if !a.requestheader_uid_headers.iter().any(|h| h.eq_ignore_ascii_case("X-Remote-Uid")) {
                errs.push("--requestheader-uid-headers is set without specifying the standard X-Remote-Uid header - API aggregation will not work".into());
            }
        }
        errs.extend(self.validate_metrics());
        errs.extend(self.validate_tls());
        errs
    }

    /// Cipher-suite and TLS-version names (upstream rejects these when building the server).
    fn validate_tls(&self) -> Vec<String> {
        let s = &self.secure_serving;
        let mut errs = Vec::new();
        if let Some(bad) = s.tls_cipher_suites.iter().find(|c| !help::TLS_CIPHERS.contains(&c.as_str())) {
            errs.push(format!("Cipher suite {bad} not supported or doesn't exist"));
        }
        if !s.tls_min_version.is_empty()
            && !["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"].contains(&s.tls_min_version.as_str())
        {
            errs.push(format!("unknown tls version {}", values::go_quote(&s.tls_min_version)));
        }
        errs
    }

    fn validate_metrics(&self) -> Vec<String> {
        let m = &self.metrics;
        let mut errs = Vec::new();
        let valid = format!("{}.{}", version::MAJOR, version::MINOR - 1);
        if !m.show_hidden_metrics_for_version.is_empty() && m.show_hidden_metrics_for_version != valid {
            errs.push(format!(
                "metrics.showHiddenMetricsForVersion: Invalid value: {}: must be omitted or have the value '{valid}'; only the previous minor version is allowed",
                values::go_quote(&m.show_hidden_metrics_for_version)
            ));
        }
        let metric_name_ok = |n: &str| {
            let mut cs = n.chars();
            cs.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        };
        if let Some(bad) = m.disabled_metrics.iter().find(|n| !metric_name_ok(n)) {
            let list: Vec<String> = m.disabled_metrics.iter().map(|n| values::go_quote(n)).collect();
            errs.push(format!(
                "metrics.disabledMetrics: Invalid value: []string{{{}}}: must be fully qualified metric names matching \"^[a-zA-Z_:][a-zA-Z0-9_:]*$\", got {}",
                list.join(", "),
                values::go_quote(bad)
            ));
        }
        let label_ok = |n: &str| {
            let mut cs = n.chars();
            cs.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let labels = m.allow_metric_labels();
        if labels.keys().any(|k| k.split_once(',').is_none_or(|(mn, l)| !metric_name_ok(mn) || !label_ok(l))) {
            errs.push(
                "metrics.allowListMapping: Invalid value: must have keys with format `metricName,labelName` where metricName matches \"[a-zA-Z_:][a-zA-Z0-9_:]*\" and labelName matches \"[a-zA-Z_][a-zA-Z0-9_]*\"".into(),
            );
        }
        if !m.allow_metric_labels_manifest.is_empty() {
            if let Err(e) = std::fs::read(&m.allow_metric_labels_manifest) {
                errs.push(format!(
                    "metrics.allowListMappingManifest: Invalid value: {}: failed to read allow list manifest: open {}: {}",
                    values::go_quote(&m.allow_metric_labels_manifest),
                    m.allow_metric_labels_manifest,
                    io_error_text(&e)
                ));
            }
            if !m.allow_metric_labels_raw.is_empty() {
                errs.push(
                    "metrics: Invalid value: cannot specify both allowListMapping and allowListMappingManifest".into(),
                );
            }
        }
        errs
    }

    fn validate_versions(&self) -> Vec<String> {
        let mut errs = Vec::new();
        let current = (version::MAJOR, version::MINOR);
        let check = |flag: &str, list: &[String], floor: u32, errs: &mut Vec<String>| {
            for item in list.iter().filter(|s| !s.is_empty()) {
                match values::parse_component_version(item) {
                    Err(e) => errs.push(e.to_string()),
                    Ok((component, _, _)) if component != "kube" => {
                        errs.push(format!("component not registered: {component}"))
                    }
                    Ok((_, major, minor)) if (major, minor) > current || major != current.0 || minor < floor => errs
                        .push(format!(
                            "--{flag}: version {major}.{minor} is outside of the allowed range {}.{floor}..{}.{}",
                            current.0, current.0, current.1
                        )),
                    Ok(_) => {}
                }
            }
        };
        check("emulated-version", &self.feature_gate.emulated_version, version::MINOR - 3, &mut errs);
        check("min-compatibility-version", &self.feature_gate.min_compatibility_version, version::MINOR - 3, &mut errs);
        errs.extend(self.feature_dependency_errors());
        errs
    }

    /// Refused gate settings (locked, not available at the emulated version, unknown
    /// component) and enabled gates whose prerequisites are off, as component-base reports them.
    fn feature_dependency_errors(&self) -> Vec<String> {
        let mut errs: Vec<String> =
            self.unregistered_gate_components().into_iter().map(|c| format!("component not registered: {c}")).collect();
        errs.extend(self.gates().errors().iter().cloned());
        errs
    }

    /// Upstream's `ApplyTo` for the configuration: load `--config` (or take the defaults and
    /// apply the deprecated flags), apply explicitly set leader-election flags, and validate a
    /// loaded file. Without `--config` the result is not validated, as upstream (the
    /// leader-election settings are still checked when the elector is built).
    pub fn effective_config(&self) -> Result<Effective, String> {
        let features = self.scheduler_features();
        let mut cfg = if self.misc.config.is_empty() {
            let mut cfg = config::default_config_with(&features);
            self.apply_deprecated(&mut cfg);
            cfg
        } else {
            let path = &self.misc.config;
            let bytes = std::fs::read(path).map_err(|e| format!("open {path}: {}", io_error_text(&e)))?;
            config::load_config_with(&bytes, path, &features).map_err(|e| e.to_string())?
        };
        self.apply_leader_election(&mut cfg);
        if !self.misc.config.is_empty() {
            config::validate_with(&cfg, &features).map_err(|e| e.to_string())?;
        }
        let pod_max = self.deprecated.pod_max_in_unschedulable_pods_duration.to_std().unwrap_or_default();
        Ok(Effective { config: cfg, features, pod_max_in_unschedulable_pods_duration: pod_max })
    }

    fn apply_deprecated(&self, cfg: &mut KubeSchedulerConfiguration) {
        let d = &self.deprecated;
        if self.changed("profiling") {
            cfg.enable_profiling = Some(d.profiling);
        }
        if self.changed("contention-profiling") {
            cfg.enable_contention_profiling = Some(d.contention_profiling);
        }
        if self.changed("kubeconfig") {
            cfg.client_connection.kubeconfig = d.kubeconfig.clone();
        }
        if self.changed("kube-api-content-type") {
            cfg.client_connection.content_type = d.kube_api_content_type.clone();
        }
        if self.changed("kube-api-qps") {
            cfg.client_connection.qps = d.kube_api_qps;
        }
        if self.changed("kube-api-burst") {
            cfg.client_connection.burst = d.kube_api_burst;
        }
    }

    fn apply_leader_election(&self, cfg: &mut KubeSchedulerConfiguration) {
        let o = &self.leader_election;
        let le = &mut cfg.leader_election;
        if self.changed("leader-elect") {
            le.leader_elect = Some(o.leader_elect);
        }
        if self.changed("leader-elect-lease-duration") {
            le.lease_duration = o.leader_elect_lease_duration;
        }
        if self.changed("leader-elect-renew-deadline") {
            le.renew_deadline = o.leader_elect_renew_deadline;
        }
        if self.changed("leader-elect-retry-period") {
            le.retry_period = o.leader_elect_retry_period;
        }
        if self.changed("leader-elect-resource-lock") {
            le.resource_lock = o.leader_elect_resource_lock.clone();
        }
        if self.changed("leader-elect-resource-name") {
            le.resource_name = o.leader_elect_resource_name.clone();
        }
        if self.changed("leader-elect-resource-namespace") {
            le.resource_namespace = o.leader_elect_resource_namespace.clone();
        }
    }

    /// `FLAG: --name="value"` for every flag, as upstream logs them at V(1).
    pub fn flag_lines(&self, argv: &[OsString]) -> Vec<String> {
        let cmd = command();
        let Ok(matches) = cmd.clone().try_get_matches_from(normalize_args(argv.iter().cloned())) else {
            return Vec::new();
        };
        let mut lines: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?;
                let raw: Vec<String> = matches
                    .get_raw(a.get_id().as_str())
                    .map(|vs| vs.map(|v| v.to_string_lossy().into_owned()).collect())
                    .unwrap_or_default();
                let slice = a.get_action().takes_values() && matches!(a.get_action(), ArgAction::Append);
                let value = if slice { format!("[{}]", raw.join(",")) } else { raw.join(",") };
                Some(format!("FLAG: --{long}={}", values::go_quote(&value)))
            })
            .collect();
        lines.sort();
        lines
    }
}

/// Go's wording of the common I/O errors (`no such file or directory`).
pub fn io_error_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::IsADirectory => "is a directory".into(),
        _ => {
            let s = e.to_string();
            // Drop Rust's " (os error N)" suffix and lower-case like Go's syscall errors.
            let s = s.split(" (os error").next().unwrap_or(&s).to_string();
            let mut cs = s.chars();
            cs.next().map(|c| c.to_lowercase().collect::<String>() + cs.as_str()).unwrap_or_default()
        }
    }
}
