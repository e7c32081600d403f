//! `ksched local` and `ksched apiserver`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use ksched_apiserver::{manifest, ApiServer, Faults, RunningServer, ServerConfig, Store};
use ksched_scheduler::config::{self, KubeSchedulerConfiguration};
use serde_json::Value;

use crate::ServeArgs;

/// How long nothing may change before the cluster counts as settled.
const IDLE_AFTER: Duration = Duration::from_secs(2);

fn default_example_dir() -> PathBuf {
    let local = PathBuf::from("examples/cluster");
    if local.is_dir() {
        return local;
    }
    // Running the binary from elsewhere: fall back to the checkout it was built from.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster")
}

async fn start_server(
    serve: &ServeArgs,
    default_paths: bool,
    extra_routes: Option<ksched_apiserver::ExtraRoutes>,
) -> anyhow::Result<(RunningServer, usize)> {
    let paths = if serve.paths.is_empty() && default_paths { vec![default_example_dir()] } else { serve.paths.clone() };
    // Parse before listening: a broken manifest should fail fast with nothing left running.
    let manifests = manifest::load_paths(&paths)?;
    let faults = Faults::new(serve.faults.clone().unwrap_or_default());
    let server = ApiServer::start(ServerConfig {
        listen: serve.listen,
        faults: faults.clone(),
        extra_routes,
        ..ServerConfig::default()
    })
    .await
    .with_context(|| format!("starting the API server on {}", serve.listen))?;
    server
        .write_kubeconfig(&serve.kubeconfig_out)
        .with_context(|| format!("writing the kubeconfig to {}", serve.kubeconfig_out.display()))?;
    println!("API server listening on {} (HTTPS; plain HTTP is accepted too)", server.https_url());
    println!(
        "kubeconfig written to {} (kubectl --kubeconfig {} get pods -o wide)",
        serve.kubeconfig_out.display(),
        serve.kubeconfig_out.display()
    );
    if serve.faults.is_some() {
        println!("injecting faults: {}", faults.spec());
    }
    let summary = manifest::apply(&server.store(), &manifests)?;
    Ok((server, summary.created))
}

/// `ksched apiserver`: serve until Ctrl-C.
pub async fn run_apiserver(serve: ServeArgs) -> anyhow::Result<()> {
    let (server, n) = start_server(&serve, false, None).await?;
    let claims = ksched_scheduler::claimcontroller::spawn(kube_client(&serve.kubeconfig_out).await?);
    println!("loaded {n} objects; serving until Ctrl-C");
    tokio::signal::ctrl_c().await.ok();
    claims.abort();
    server.shutdown().await;
    Ok(())
}

async fn kube_client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// One row of the placement table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    namespace: String,
    name: String,
    node: Option<String>,
    message: Option<String>,
}

fn placements(store: &Store, scheduler_names: &[String]) -> Vec<Placement> {
    let mut out: Vec<Placement> = store
        .list("v1", "Pod", None)
        .into_iter()
        .filter(|p| {
            let sn = p.pointer("/spec/schedulerName").and_then(Value::as_str).unwrap_or("default-scheduler");
            scheduler_names.iter().any(|n| n == sn)
        })
        .map(|p| {
            let s = |ptr: &str| p.pointer(ptr).and_then(Value::as_str).map(str::to_string);
            let message = why_unbound(&p);
            Placement {
                namespace: s("/metadata/namespace").unwrap_or_default(),
                name: s("/metadata/name").unwrap_or_default(),
                node: s("/spec/nodeName").filter(|n| !n.is_empty()),
                message,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// Why an unbound pod waits: its scheduling gates when it has any (the SchedulingGated
/// condition kube-apiserver adds does not name them), else the scheduler's PodScheduled=False message.
pub(crate) fn why_unbound(pod: &Value) -> Option<String> {
    let gates: Vec<&str> = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .map(|g| g.iter().filter_map(|g| g["name"].as_str()).collect())
        .unwrap_or_default();
    if !gates.is_empty() {
        return Some(format!("waiting for scheduling gates: [{}]", gates.join(" ")));
    }
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled" && c["status"] == "False"))
        .and_then(|c| c["message"].as_str().map(str::to_string))
}

fn print_table(rows: &[Placement]) {
    let w_ns = rows.iter().map(|r| r.namespace.len()).max().unwrap_or(0).max("NAMESPACE".len());
    let w_pod = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max("POD".len());
    let w_node = rows.iter().map(|r| r.node.as_deref().unwrap_or("<none>").len()).max().unwrap_or(0).max("NODE".len());
    println!("{:w_ns$}  {:w_pod$}  {:w_node$}  WHY", "NAMESPACE", "POD", "NODE");
    for r in rows {
        let why = match (&r.node, &r.message) {
            (Some(_), _) => "scheduled".to_string(),
            (None, Some(m)) => m.clone(),
            (None, None) => "pending".to_string(),
        };
        println!("{:w_ns$}  {:w_pod$}  {:w_node$}  {why}", r.namespace, r.name, r.node.as_deref().unwrap_or("<none>"));
    }
}

/// The feature gates of `ksched local`: upstream's defaults plus the workload-aware scheduling
/// alphas (pod groups, gangs, topology-aware placement), so that the example's gangs show.
/// They change nothing for pods outside a pod group.
pub fn local_features() -> config::SchedulerFeatures {
    config::SchedulerFeatures {
        generic_workload: true,
        gang_scheduling: true,
        topology_aware_workload_scheduling: true,
        ..config::SchedulerFeatures::default()
    }
}

/// The devices each ResourceClaim got, as `driver/pool/device`, for the summary.
fn print_claims(store: &Store) {
    let claims = store.list("resource.k8s.io/v1", "ResourceClaim", None);
    if claims.is_empty() {
        return;
    }
    let rows: Vec<[String; 5]> = claims
        .iter()
        .map(|c| {
            let s = |ptr: &str| c.pointer(ptr).and_then(Value::as_str).unwrap_or_default().to_string();
            let results = c.pointer("/status/allocation/devices/results").and_then(Value::as_array);
            let devices: Vec<String> = results
                .into_iter()
                .flatten()
                .map(|r| format!("{}/{}/{}", s_of(r, "driver"), s_of(r, "pool"), s_of(r, "device")))
                .collect();
            let reserved: Vec<String> = c
                .pointer("/status/reservedFor")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| s_of(r, "name").to_string())
                .collect();
            let state = if results.is_some() { "allocated" } else { "pending" };
            [
                s("/metadata/namespace"),
                s("/metadata/name"),
                state.to_string(),
                if reserved.is_empty() { "<none>".into() } else { reserved.join(",") },
                if devices.is_empty() { "<none>".into() } else { devices.join(", ") },
            ]
        })
        .collect();
    let header = ["NAMESPACE", "CLAIM", "STATE", "RESERVED FOR", "DEVICES"];
    let width = |i: usize| rows.iter().map(|r| r[i].len()).max().unwrap_or(0).max(header[i].len());
    let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
    println!("\nResourceClaims:");
    println!("{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}", header[0], header[1], header[2], header[3], header[4]);
    for r in rows {
        println!("{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}", r[0], r[1], r[2], r[3], r[4]);
    }
}

fn s_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or_default()
}

fn load_config(path: Option<&Path>) -> anyhow::Result<KubeSchedulerConfiguration> {
    let features = local_features();
    let cfg = match path {
        None => config::default_config_with(&features),
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            config::load_config_with(&bytes, &p.display().to_string(), &features)?
        }
    };
    config::validate(&cfg)?;
    Ok(cfg)
}

/// `ksched local`.
pub async fn run_local(serve: ServeArgs, exit_when_idle: bool, config_path: Option<PathBuf>) -> anyhow::Result<()> {
    let cfg = load_config(config_path.as_deref())?;
    let names: Vec<String> = cfg.profiles.iter().filter_map(|p| p.scheduler_name.clone()).collect();
    let ui_cfg = cfg.clone();
    let ui: ksched_apiserver::ExtraRoutes =
        std::sync::Arc::new(move |store: ksched_apiserver::Store| crate::ui::routes(store, ui_cfg.clone()));
    let (server, n) = start_server(&serve, true, Some(ui)).await?;
    println!("web view: http://{}/ui/", server.addr());
    let store = server.store();
    let started = Instant::now();
    let client = kube_client(&serve.kubeconfig_out).await?;
    let claims = ksched_scheduler::claimcontroller::spawn(client.clone());
    let registry = ksched_plugins::in_tree_registry();
    let scheduler = ksched_scheduler::app::start(client, &cfg, &registry).await?;

    let total = placements(&store, &names).len();
    println!("loaded {n} objects; scheduling {total} pods");
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} bound {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut last = placements(&store, &names);
    let mut last_change = Instant::now();
    let settled_at = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = placements(&store, &names);
        let bound = now.iter().filter(|p| p.node.is_some()).count();
        let failed = now.iter().filter(|p| p.node.is_none() && p.message.is_some()).count();
        bar.set_length(now.len() as u64);
        bar.set_position(bound as u64);
        bar.set_message(format!("({failed} unschedulable)"));
        if now != last {
            last = now;
            last_change = Instant::now();
        } else if last_change.elapsed() >= IDLE_AFTER {
            break last_change;
        }
    };
    bar.finish_and_clear();
    let rows = placements(&store, &names);
    print_table(&rows);
    print_claims(&store);
    let bound = rows.iter().filter(|p| p.node.is_some()).count();
    let secs = settled_at.saturating_duration_since(started).as_secs_f64();
    println!(
        "\n{bound} of {} pods scheduled, {} unschedulable, settled in {secs:.2}s ({:.0} pods/s)",
        rows.len(),
        rows.len() - bound,
        if secs > 0.0 { bound as f64 / secs } else { 0.0 }
    );
    if !exit_when_idle {
        println!("serving until Ctrl-C");
        tokio::signal::ctrl_c().await.ok();
    }
    scheduler.shutdown(Duration::from_secs(5)).await;
    claims.abort();
    server.shutdown().await;
    Ok(())
}
