//! Runs a local API server for manual testing:
//! `cargo run -p ksched-apiserver --example serve -- KUBECONFIG_PATH [MANIFEST...]`.

use std::path::PathBuf;

use ksched_apiserver::{manifest, ApiServer, ServerConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let kubeconfig = PathBuf::from(args.next().unwrap_or_else(|| "kubeconfig.yaml".into()));
    let manifests: Vec<PathBuf> = args.map(PathBuf::from).collect();
    let cfg = ServerConfig { listen: "127.0.0.1:0".parse()?, ..ServerConfig::default() };
    let server = ApiServer::start(cfg).await?;
    server.write_kubeconfig(&kubeconfig)?;
    if !manifests.is_empty() {
        let loaded = manifest::load_paths(&manifests)?;
        let summary = manifest::apply(&server.store(), &loaded)?;
        println!("created {} objects: {:?}", summary.created, summary.by_kind);
    }
    println!("serving {} (kubeconfig: {})", server.url(), kubeconfig.display());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
