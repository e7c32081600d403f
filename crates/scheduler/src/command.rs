//! The `kube-scheduler` command (upstream's `cmd/kube-scheduler/app`), as a library so that
//! companies can build their own binary with extra plugins:
//!
//! ```no_run
//! # fn my_factory(_: Option<&serde_json::Value>, _: &ksched_framework::Handle)
//! #     -> Result<std::sync::Arc<dyn ksched_framework::Plugin>, String> { unimplemented!() }
//! fn main() -> std::process::ExitCode {
//!     ksched_scheduler::command::SchedulerCommand::new().with_plugin("MyPlugin", my_factory).run()
//! }
//! ```
//!
//! Startup order follows upstream: flags → `--version` → logging → option and configuration
//! validation (exit 1 before any API traffic) → `--write-config-to` → client → HTTPS serving →
//! informers (hot standby, unless `delayCacheUntilActive`) → leader election → on leading, the
//! scheduling loop.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use ksched_framework::{Handle, Plugin, Registry};
use tokio::sync::watch;

use crate::app::{self, MetricSinks};
use crate::config;
use crate::leaderelection::{self, ElectionConfig, LeaderElector, TermEnd};
use crate::metrics::PrometheusMetrics;
use crate::options::{self, version, CliError, Options};
use crate::server::{self, HealthCheck, ServerConfig, ServerState};

/// How long a stopping scheduler without leader election waits for in-flight bindings.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The kube-scheduler command: flags, config, serving, leader election and the scheduler, with
/// the in-tree plugins plus any registered with [`SchedulerCommand::with_plugin`].
pub struct SchedulerCommand {
    registry: Registry,
    errors: Vec<String>,
}

impl Default for SchedulerCommand {
    fn default() -> Self {
        Self::new()
    }
}

impl SchedulerCommand {
    /// The stock command with the in-tree plugins.
    pub fn new() -> Self {
        SchedulerCommand { registry: ksched_plugins::in_tree_registry(), errors: Vec::new() }
    }

    /// Adds an out-of-tree plugin (upstream's `app.WithPlugin`). A name already taken by an
    /// in-tree or earlier plugin makes [`SchedulerCommand::run`] fail at startup.
    pub fn with_plugin(
        mut self,
        name: &str,
        factory: impl Fn(Option<&serde_json::Value>, &Handle) -> Result<Arc<dyn Plugin>, String> + Send + Sync + 'static,
    ) -> Self {
        if let Err(e) = self.registry.register(name, factory) {
            self.errors.push(e);
        }
        self
    }

    /// Parses the process arguments and runs until stopped; returns the exit code.
    pub fn run(self) -> ExitCode {
        let argv: Vec<OsString> = std::env::args_os().collect();
        self.run_with_args(argv)
    }

    /// Like [`SchedulerCommand::run`] with explicit arguments (the first is the program name).
    pub fn run_with_args(self, argv: Vec<OsString>) -> ExitCode {
        if !self.errors.is_empty() {
            eprintln!("Error: {}", aggregate(&self.errors));
            return ExitCode::FAILURE;
        }
        main_with(argv, self.registry)
    }
}

fn main_with(argv: Vec<OsString>, registry: Registry) -> ExitCode {
    let opts = match options::parse(argv.iter().cloned()) {
        Ok(o) => o,
        Err(CliError::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(CliError::Flag(msg)) => {
            // cobra prints the usage, then component-base prints the error.
            eprintln!("{}", options::render_usage(&options::command()));
            eprintln!("Error: {msg}");
            return ExitCode::FAILURE;
        }
        Err(CliError::Other(msg)) => {
            eprintln!("Error: {msg}");
            return ExitCode::FAILURE;
        }
    };
    let reported_version = match version::request(&opts.global.version) {
        version::VersionRequest::Print(v) => {
            println!("{}", version::short(&v));
            return ExitCode::SUCCESS;
        }
        version::VersionRequest::Raw(v) => {
            println!("{}", version::raw(&v));
            return ExitCode::SUCCESS;
        }
        version::VersionRequest::Run(v) => v,
    };
    let alpha = opts.feature_enabled("LoggingAlphaOptions");
    let beta = opts.feature_enabled("LoggingBetaOptions");
    if let Err(e) = opts.logs.validate(alpha, beta) {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    opts.logs.init();
    if opts.logs.verbosity >= 1 {
        for line in opts.flag_lines(&argv) {
            tracing::info!("{line}");
        }
    }
    for (flag, inert) in opts.deprecated_flags_set() {
        if inert {
            tracing::warn!("Flag --{flag} has been deprecated and is ignored because --config is specified");
        } else {
            tracing::warn!(
                "Flag --{flag} has been deprecated and will be removed in a future release; use the configuration file"
            );
        }
    }
    for gate in opts.unknown_feature_gates() {
        tracing::warn!("unrecognized feature gate: {gate}");
    }
    for notice in opts.gates().notices() {
        tracing::info!("{notice}");
    }
    let (emulation, _) = opts.compatibility_versions();
    let alpha_on = opts.gates().enabled_alpha();
    if emulation < (version::MAJOR, version::MINOR) && !alpha_on.is_empty() {
        tracing::warn!(
            "component has alpha features enabled in emulated version, this is unsupported: features=[{}]",
            alpha_on.join(" ")
        );
    }

    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(err = %e, "command failed");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(opts, reported_version, registry)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(err = %format!("{e:#}"), "command failed");
            ExitCode::FAILURE
        }
    }
}

use ksched_framework::gofmt::aggregate;

fn server_config(opts: &Options) -> anyhow::Result<ServerConfig> {
    let path = |s: &str| (!s.is_empty()).then(|| std::path::PathBuf::from(s));
    let s = &opts.secure_serving;
    let a = &opts.authentication;
    // A negative TTL disables caching, as a zero one does.
    let ttl = |d: crate::config::Duration| d.to_std().unwrap_or_default();
    let mut cfg = ServerConfig {
        bind_address: s.bind_address,
        secure_port: u16::try_from(s.secure_port)
            .map_err(|_| anyhow::anyhow!("invalid --secure-port {}", s.secure_port))?,
        tls_cert_file: path(&s.tls_cert_file),
        tls_private_key_file: path(&s.tls_private_key_file),
        authentication_kubeconfig: path(&opts.authentication.kubeconfig),
        authentication_token_webhook_cache_ttl: ttl(a.token_webhook_cache_ttl),
        authentication_skip_lookup: a.skip_lookup,
        authentication_tolerate_lookup_failure: a.tolerate_lookup_failure,
        client_ca_file: path(&a.client_ca_file),
        requestheader_client_ca_file: path(&a.requestheader_client_ca_file),
        requestheader_username_headers: a.requestheader_username_headers.clone(),
        requestheader_uid_headers: a.requestheader_uid_headers.clone(),
        requestheader_group_headers: a.requestheader_group_headers.clone(),
        requestheader_extra_headers_prefix: a.requestheader_extra_headers_prefix.clone(),
        requestheader_allowed_names: a.requestheader_allowed_names.clone(),
        authorization_kubeconfig: path(&opts.authorization.kubeconfig),
        authorization_always_allow_paths: opts.authorization.always_allow_paths.clone(),
        authorization_webhook_cache_authorized_ttl: ttl(opts.authorization.webhook_cache_authorized_ttl),
        authorization_webhook_cache_unauthorized_ttl: ttl(opts.authorization.webhook_cache_unauthorized_ttl),
        ..ServerConfig::default()
    };
    if !s.tls_min_version.is_empty() {
        cfg.tls_min_version = s.tls_min_version.parse().map_err(anyhow::Error::msg)?;
    }
    Ok(cfg)
}

async fn run(opts: Options, reported_version: String, registry: Registry) -> anyhow::Result<()> {
    let errs = opts.validate();
    if !errs.is_empty() {
        anyhow::bail!("{}", aggregate(&errs));
    }
    let effective = opts.effective_config().map_err(anyhow::Error::msg)?;
    let cfg = effective.config;
    let le_on = cfg.leader_election.leader_elect.unwrap_or(true);
    let first_profile =
        cfg.profiles.first().and_then(|p| p.scheduler_name.clone()).unwrap_or_else(|| "default-scheduler".into());
    let election = if le_on {
        Some(
            ElectionConfig::from_config(&cfg.leader_election, leaderelection::default_identity(), first_profile)
                .map_err(anyhow::Error::msg)?,
        )
    } else {
        None
    };

    if !opts.misc.write_config_to.is_empty() || opts.logs.verbosity >= 2 {
        let yaml = config::to_yaml(&cfg);
        tracing::debug!(config = %yaml, "Using component config");
        let path = &opts.misc.write_config_to;
        if !path.is_empty() {
            std::fs::write(path, yaml).map_err(|e| anyhow::anyhow!("open {path}: {}", options::io_error_text(&e)))?;
            tracing::info!(file = %path, "Wrote configuration");
            return Ok(());
        }
    }

    tracing::info!(version = %reported_version, "Starting Kubernetes Scheduler");
    let client = options::client::kube_client(&cfg.client_connection, &opts.misc.master).await?;
    let mut queue_opts = app::queue_options(&cfg);
    queue_opts.pod_max_in_unschedulable_pods_duration = effective.pod_max_in_unschedulable_pods_duration;

    // Serving starts before the informers, as upstream: health checks answer while syncing.
    crate::metrics::registry::set_disabled_metrics(&opts.metrics.disabled_metrics);
    let mut metrics = PrometheusMetrics::new();
    if cfg.features.generic_workload {
        metrics = metrics.with_pod_group_metrics();
    }
    let metrics = Arc::new(metrics);
    metrics.set_feature_gates(opts.gates().all());
    let (emulation, min_compatibility) = opts.compatibility_versions();
    metrics.set_compatibility_version(emulation, min_compatibility);
    let synced = Arc::new(AtomicBool::new(false));
    let shutting_down = Arc::new(AtomicBool::new(false));
    let leading = Arc::new(AtomicBool::new(!le_on));
    let mut state = ServerState::new(metrics.clone());
    state.readyz = vec![
        HealthCheck::ping(),
        HealthCheck::shutdown(shutting_down.clone()),
        HealthCheck::handler_sync(synced.clone()),
    ];
    state.configz = Some(config::to_json(&cfg));
    state.flagz = opts.flagz.clone();
    state.is_leader = leading.clone();
    state.binary_version = reported_version.clone();
    state.emulation_version = format!("{}.{}", emulation.0, emulation.1);
    let explain_slot = state.explain.clone();
    let server = server::serve(server_config(&opts)?, state).await?;
    let sinks = || MetricSinks::prometheus(&metrics);
    let on_started = |r: &app::RunningScheduler| {
        synced.store(true, Ordering::Relaxed);
        metrics.spawn_cache_size_refresher(r.scheduler.cache.clone());
        let _ = explain_slot.set(crate::explain::live::handler(&cfg, &r.scheduler));
    };

    // First signal: stop (leader: stop scheduling, release the lease); second: exit 1 now.
    let (stop_tx, mut stop) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down; a second signal exits immediately");
        let _ = stop_tx.send(true);
        wait_for_signal().await;
        std::process::exit(1);
    });

    let Some(election) = election else {
        let running = tokio::select! {
            r = app::start_with_metrics(client, &cfg, &registry, queue_opts, true, sinks()) => r?,
            _ = stop.wait_for(|v| *v) => return Ok(()),
        };
        on_started(&running);
        let _ = stop.wait_for(|v| *v).await;
        shutting_down.store(true, Ordering::Relaxed);
        running.shutdown(SHUTDOWN_GRACE).await;
        server.shutdown(Duration::from_secs(5)).await;
        return Ok(());
    };

    // Hot standby: informers run and sync before the lease is won, unless delayed.
    let delay = cfg.delay_cache_until_active;
    let mut standby = None;
    if !delay {
        tokio::select! {
            r = app::start_with_metrics(client.clone(), &cfg, &registry, queue_opts, false, sinks()) => {
                let r = r?;
                on_started(&r);
                standby = Some(r);
            }
            _ = stop.wait_for(|v| *v) => return Ok(()),
        }
    }

    let renew_deadline = election.renew_deadline;
    let elector = Arc::new(LeaderElector::new(client.clone(), election));
    if !elector.acquire(&mut stop).await {
        tracing::info!("Requested to terminate, exiting");
        if let Some(r) = standby {
            r.shutdown(Duration::ZERO).await;
        }
        return Ok(());
    }

    leading.store(true, Ordering::Relaxed);
    metrics.set_leader(&cfg.leader_election.resource_name, true);
    let mut renew = {
        let elector = elector.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move { elector.renew(&mut stop).await })
    };
    let running = match standby {
        Some(mut r) => {
            r.run_loop();
            r
        }
        None => {
            tracing::info!("Starting informers and waiting for sync...");
            tokio::select! {
                r = app::start_with_metrics(client, &cfg, &registry, queue_opts, true, sinks()) => {
                    match r {
                        Ok(r) => { tracing::info!("Sync completed"); on_started(&r); r }
                        Err(e) => { elector.release().await; return Err(e); }
                    }
                }
                end = &mut renew => return finish_term(&elector, end.unwrap_or(TermEnd::Lost), None, renew_deadline).await,
            }
        }
    };
    let end = (&mut renew).await.unwrap_or(TermEnd::Lost);
    shutting_down.store(true, Ordering::Relaxed);
    let result = finish_term(&elector, end, Some(running), renew_deadline).await;
    server.shutdown(Duration::from_secs(5)).await;
    result
}

/// Ends a leadership term: exit 1 at once when the lease was lost (another scheduler may already
/// be leading); on a requested stop, let in-flight bindings finish within the renew deadline
/// (no one else can lead before it), then release the lease.
async fn finish_term(
    elector: &LeaderElector,
    end: TermEnd,
    running: Option<app::RunningScheduler>,
    grace: Duration,
) -> anyhow::Result<()> {
    match end {
        TermEnd::Lost => {
            tracing::error!("Leaderelection lost");
            std::process::exit(1);
        }
        TermEnd::Stopped => {
            if let Some(r) = running {
                r.shutdown(grace).await;
            }
            if elector.release().await {
                elector.record_event("stopped leading").await;
            }
            tracing::info!("Requested to terminate, exiting");
            Ok(())
        }
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
