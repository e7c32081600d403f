//! `kube-scheduler`: the drop-in scheduler binary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser};
use ksched_scheduler::config;

/// Flags of upstream's kube-scheduler that this build honours (the full set is being added).
#[derive(Parser, Debug)]
#[command(
    name = "kube-scheduler",
    version,
    about = "The Kubernetes scheduler is a control plane process which assigns Pods to Nodes."
)]
struct Options {
    /// The path to the configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// DEPRECATED: path to kubeconfig file with authorization and master location information (the
    /// config file's clientConnection.kubeconfig wins when --config is given).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The address of the Kubernetes API server (overrides any value in kubeconfig).
    #[arg(long)]
    master: Option<String>,
    /// Start a leader election client and gain leadership before executing the main loop.
    #[arg(long, action = ArgAction::Set, default_value = "true", default_missing_value = "true", num_args = 0..=1, require_equals = true)]
    leader_elect: bool,
    /// Number for the log level verbosity.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    verbosity: u8,
}

fn init_logging(v: u8) {
    let level = match v {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

async fn client(kubeconfig: Option<&PathBuf>, master: Option<&str>) -> anyhow::Result<kube::Client> {
    let mut cfg = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?
        }
        None => kube::Config::incluster().context("no --kubeconfig given and not running in a cluster")?,
    };
    if let Some(m) = master {
        cfg.cluster_url = m.parse().with_context(|| format!("invalid --master {m:?}"))?;
    }
    Ok(kube::Client::try_from(cfg)?)
}

async fn run(opts: Options) -> anyhow::Result<()> {
    let mut cfg = match &opts.config {
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            config::load_config(&bytes, &p.display().to_string())?
        }
        None => config::default_config(),
    };
    if opts.config.is_none() {
        if let Some(k) = &opts.kubeconfig {
            cfg.client_connection.kubeconfig = k.display().to_string();
        }
    }
    cfg.leader_election.leader_elect = Some(opts.leader_elect);
    config::validate(&cfg)?;
    if opts.leader_elect {
        tracing::warn!("leader election is not implemented in this build yet: running as the only active scheduler");
    }
    tracing::info!(
        "talking to the API server with JSON (the configured contentType is accepted but kube-rs speaks JSON)"
    );
    let kubeconfig =
        (!cfg.client_connection.kubeconfig.is_empty()).then(|| PathBuf::from(&cfg.client_connection.kubeconfig));
    let client = client(kubeconfig.as_ref(), opts.master.as_deref()).await?;
    let registry = ksched_plugins::in_tree_registry();
    let running = ksched_scheduler::app::start(client, &cfg, &registry).await?;
    wait_for_signal().await;
    tracing::info!("shutting down; a second signal exits immediately");
    tokio::spawn(async {
        wait_for_signal().await;
        std::process::exit(1);
    });
    running.shutdown(Duration::from_secs(10)).await;
    Ok(())
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

fn main() -> ExitCode {
    let opts = Options::parse();
    init_logging(opts.verbosity);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("E {e:#}");
            ExitCode::FAILURE
        }
    }
}
