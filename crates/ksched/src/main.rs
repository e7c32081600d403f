//! `ksched`: the companion tool of kube-scheduler-rs.
//!
//! - `ksched local [PATH...]`: an embedded Kubernetes API server loaded from manifests, with our
//!   scheduler running against it over HTTP; prints where every pod went and why.
//! - `ksched apiserver [PATH...]`: only the API server, for any scheduler (ours or upstream's).
//! - `ksched bench`: upstream scheduler_perf's `performance` workloads (see [`mod@bench`]).
//! - `ksched explain POD...`: per node and plugin, why a pod goes where it does (see [`mod@explain`]).

mod bench;
mod explain;
mod generate;
mod local;
mod source;
mod ui;
mod whatif;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "ksched", version, about = "kube-scheduler-rs companion: local clusters and benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Options shared by `local` and `apiserver`.
#[derive(Args, Clone)]
pub struct ServeArgs {
    /// Manifests to load (files or directories; YAML or JSON, multi-document).
    pub paths: Vec<PathBuf>,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where to write the kubeconfig for kubectl and kube-scheduler.
    #[arg(long, default_value = "./ksched-local.kubeconfig")]
    pub kubeconfig_out: PathBuf,
    /// Faults to inject, e.g. `seed=1,restart:every=30s:pause=2s,error:p=0.05` or `all`
    /// (see docs/reliability.md).
    #[arg(long, value_name = "SPEC")]
    pub faults: Option<ksched_apiserver::FaultSpec>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the embedded API server with our scheduler against it (default: examples/cluster).
    Local {
        #[command(flatten)]
        serve: ServeArgs,
        /// Exit once no pod has changed for 2 s (for scripts and tests).
        #[arg(long)]
        exit_when_idle: bool,
        /// A KubeSchedulerConfiguration file (default: upstream defaults).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run only the embedded API server.
    Apiserver {
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// Write a synthetic cluster (scheduler_perf default node and pod shapes) as manifests.
    Generate {
        /// Number of nodes.
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        /// Number of pods.
        #[arg(long, default_value_t = 5000)]
        pods: usize,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Run scheduler_perf's performance workloads and report throughput, latency and resources.
    Bench(Box<bench::BenchArgs>),
    /// Explain, per node and plugin, where a pod would go or why it cannot (read-only).
    Explain(explain::ExplainArgs),
    /// Replay the cluster's pods under another configuration and report what would change.
    Whatif(whatif::WhatifArgs),
    /// Measure how long explaining one pod takes on a synthetic cluster.
    BenchExplain {
        /// Number of nodes.
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        /// Explanations per pod.
        #[arg(long, default_value_t = 10)]
        iterations: usize,
    },
}

fn init_logging(faults: bool) {
    // Injected faults make every client log each dropped connection and retried watch; the
    // run's own report says what happened (KSCHED_LOG=warn shows the details).
    let default = if faults { "error,kube_client=off" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KSCHED_LOG").unwrap_or_else(|_| default.into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

ksched_scheduler::install_allocator!();

fn main() -> ExitCode {
    let cli = Cli::parse();
    let faults = match &cli.command {
        Command::Local { serve, .. } | Command::Apiserver { serve } => serve.faults.is_some(),
        Command::Bench(b) => b.faults.is_some(),
        Command::Generate { .. } | Command::Explain(_) | Command::Whatif(_) | Command::BenchExplain { .. } => false,
    };
    init_logging(faults);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Local { serve, exit_when_idle, config } => local::run_local(serve, exit_when_idle, config).await,
            Command::Apiserver { serve } => local::run_apiserver(serve).await,
            Command::Generate { nodes, pods, out } => {
                generate::write_cluster(&out, nodes, pods)?;
                println!("wrote {nodes} nodes and {pods} pods to {}", out.display());
                Ok(())
            }
            Command::Bench(args) => bench::run(*args).await,
            Command::Explain(args) => explain::run(args).await,
            Command::Whatif(args) => whatif::run(args).await,
            Command::BenchExplain { nodes, iterations } => explain::benchmark(nodes, iterations),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
