//! Observability parity after a small run of the `kube-scheduler` binary on the embedded API
//! server: every upstream metric family with its label set in both exposition formats, and the
//! kubernetes-mixin scheduler dashboard, alerts and recording rules evaluated by a real
//! Prometheus (Debian's `prometheus` package, installed by `.ci/run`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use ksched_apiserver::{ApiServer, RunningServer, ServerConfig};
use rustls::pki_types::ServerName;
use serde_json::{json, Value};

/// Pods of the workload; each cycle samples plugin timings with probability 1/10, so 100 cycles
/// leave a chance of 0.9^100 (3e-5) that no cycle is sampled.
const PODS: usize = 100;
/// Pods that fit nowhere (they exercise the unschedulable paths).
const HUGE_PODS: usize = 2;

// ---- the families upstream v1.36 exposes (upstream `pkg/scheduler/metrics` and client-go's metrics) ----

/// (family as in the text format 0.0.4, type, label names, fed by a small run).
type FamilySpec = (&'static str, &'static str, &'static [&'static str], bool);

const FAMILIES: &[FamilySpec] = &[
    ("scheduler_schedule_attempts_total", "counter", &["profile", "result"], true),
    ("scheduler_scheduling_attempt_duration_seconds", "histogram", &["profile", "result"], true),
    ("scheduler_scheduling_algorithm_duration_seconds", "histogram", &[], true),
    ("scheduler_event_handling_duration_seconds", "histogram", &["event"], true),
    ("scheduler_preemption_victims", "histogram", &[], true),
    ("scheduler_preemption_attempts_total", "counter", &[], true),
    ("scheduler_pending_pods", "gauge", &["queue"], true),
    ("scheduler_pod_scheduling_sli_duration_seconds", "histogram", &["attempts"], true),
    ("scheduler_pod_scheduling_attempts", "histogram", &[], true),
    ("scheduler_pod_scheduled_after_flush_total", "counter", &[], true),
    (
        "scheduler_framework_extension_point_duration_seconds",
        "histogram",
        &["extension_point", "profile", "status"],
        true,
    ),
    ("scheduler_plugin_execution_duration_seconds", "histogram", &["extension_point", "plugin", "status"], true),
    ("scheduler_queue_incoming_pods_total", "counter", &["event", "queue"], true),
    ("scheduler_goroutines", "gauge", &["operation"], true),
    ("scheduler_permit_wait_duration_seconds", "histogram", &["result"], false),
    ("scheduler_cache_size", "gauge", &["type"], true),
    ("scheduler_unschedulable_pods", "gauge", &["plugin", "profile"], true),
    ("scheduler_plugin_evaluation_total", "counter", &["extension_point", "plugin", "profile"], true),
    ("scheduler_batch_attempts_total", "counter", &["profile", "result"], true),
    ("scheduler_batch_cache_flushed_total", "counter", &["profile", "reason"], true),
    ("scheduler_get_node_hint_duration_seconds", "histogram", &["hinted", "profile"], true),
    ("scheduler_store_schedule_results_duration_seconds", "histogram", &["profile"], true),
    ("scheduler_queueing_hint_execution_duration_seconds", "histogram", &["event", "hint", "plugin"], false),
    ("scheduler_inflight_events", "gauge", &["event"], true),
    ("scheduler_preemption_goroutines_duration_seconds", "histogram", &["result"], false),
    ("scheduler_preemption_goroutines_execution_total", "counter", &["result"], false),
    ("scheduler_resourceclaim_creates_total", "counter", &["status"], false),
    ("scheduler_dra_bindingconditions_allocations_total", "counter", &["driver", "profile", "status"], false),
    ("scheduler_dra_bindingconditions_wait_duration_seconds", "histogram", &["driver", "profile", "status"], false),
    ("scheduler_volume_binder_cache_requests_total", "counter", &["operation"], false),
    ("scheduler_volume_scheduling_stage_error_total", "counter", &["operation"], false),
    // client-go: leader election and the REST client.
    ("leader_election_master_status", "gauge", &["name"], true),
    ("leader_election_slowpath_total", "counter", &["name"], false),
    ("rest_client_requests_total", "counter", &["code", "host", "method"], true),
    ("rest_client_request_duration_seconds", "histogram", &["host", "verb"], true),
    ("rest_client_request_size_bytes", "histogram", &["host", "verb"], true),
    ("rest_client_response_size_bytes", "histogram", &["host", "verb"], true),
    ("rest_client_rate_limiter_duration_seconds", "histogram", &["host", "verb"], true),
    ("rest_client_request_retries_total", "counter", &["code", "host", "verb"], false),
    ("rest_client_exec_plugin_ttl_seconds", "gauge", &[], true),
    ("rest_client_exec_plugin_certificate_rotation_age", "histogram", &[], true),
    ("rest_client_exec_plugin_call_total", "counter", &["call_status", "code"], false),
    ("rest_client_transport_cache_entries", "gauge", &[], true),
    ("rest_client_transport_create_calls_total", "counter", &["result"], true),
    ("rest_client_transport_ca_reload_total", "counter", &["reason", "result"], false),
    ("rest_client_transport_cert_rotation_gc_calls_total", "counter", &[], true),
    ("rest_client_transport_cache_gc_calls_total", "counter", &["result"], false),
    // component-base.
    (
        "kubernetes_build_info",
        "gauge",
        &[
            "build_date",
            "compiler",
            "git_commit",
            "git_tree_state",
            "git_version",
            "go_version",
            "major",
            "minor",
            "platform",
        ],
        true,
    ),
    ("kubernetes_feature_enabled", "gauge", &["name", "stage"], true),
    // client_golang's process collector.
    ("process_cpu_seconds_total", "counter", &[], true),
    ("process_max_fds", "gauge", &[], true),
    ("process_open_fds", "gauge", &[], true),
    ("process_resident_memory_bytes", "gauge", &[], true),
    ("process_start_time_seconds", "gauge", &[], true),
    ("process_virtual_memory_bytes", "gauge", &[], true),
    ("process_virtual_memory_max_bytes", "gauge", &[], true),
    ("process_network_receive_bytes_total", "counter", &[], true),
    ("process_network_transmit_bytes_total", "counter", &[], true),
];

/// The OpenMetrics name of a 0.0.4 family (counters lose `_total`).
fn openmetrics_family(name: &str, ty: &str) -> String {
    if ty == "counter" {
        name.strip_suffix("_total").unwrap_or(name).to_string()
    } else {
        name.to_string()
    }
}

/// A parsed exposition: family → (type, label-name sets seen on its samples).
#[derive(Debug, Default)]
struct Exposition {
    types: BTreeMap<String, String>,
    label_sets: BTreeMap<String, BTreeSet<Vec<String>>>,
}

/// Parses an exposition (either format) into families, assigning each sample to the family whose
/// `# TYPE` precedes it. Histogram samples drop their `le`.
fn parse(text: &str) -> Exposition {
    let mut e = Exposition::default();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            e.types.insert(name.to_string(), ty.to_string());
            current = name.to_string();
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap();
        let sample = &line[..name_end];
        assert!(sample.starts_with(&current), "sample {sample} outside its family {current}");
        let mut labels: Vec<String> = Vec::new();
        if line[name_end..].starts_with('{') {
            let body = &line[name_end + 1..line.rfind('}').unwrap()];
            let mut rest = body;
            while let Some(eq) = rest.find("=\"") {
                labels.push(rest[..eq].trim_start_matches(',').to_string());
                // Skip the quoted value.
                let mut i = eq + 2;
                let b = rest.as_bytes();
                while b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                rest = &rest[i + 1..];
            }
        }
        labels.retain(|l| l != "le");
        e.label_sets.entry(current.clone()).or_default().insert(labels);
    }
    e
}

// ---- the run ----

/// GET over HTTPS; returns (content type, body).
pub(crate) async fn scrape(port: u16, path: &str, accept: Option<&str>) -> (String, String) {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = common::insecure_tls_connector().connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", "localhost");
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = sender.send_request(req.body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
    assert_eq!(resp.status(), 200, "GET {path}");
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (ct, String::from_utf8(body.to_vec()).unwrap())
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The embedded API server with 3 nodes and the scheduler binary serving `/metrics` to anyone.
struct Run {
    server: RunningServer,
    scheduler: Child,
    port: u16,
    dir: PathBuf,
}

impl Run {
    async fn start(name: &str) -> Run {
        let dir = std::env::temp_dir().join(format!("ksched-observability-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
        let kubeconfig = dir.join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).unwrap();
        for i in 0..3 {
            server
                .store()
                .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}"),
                    "labels": {"kubernetes.io/hostname": format!("n{i}")}},
                    "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}}))
                .unwrap();
        }
        let port = free_port();
        let scheduler = Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            // Leader election as in production: its lease GET/PUT every 2 s are API traffic the
            // dashboard's request panels read.
            .arg("--leader-elect=true")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg("--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(start.elapsed() < Duration::from_secs(30), "kube-scheduler never listened on {port}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Run { server, scheduler, port, dir }
    }

    /// Creates the workload in a few waves (so scrapes see it progress) and waits until every
    /// pod that fits is bound.
    async fn schedule_workload(&self) {
        let store = self.server.store();
        let mk = |name: String, cpu: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}})
        };
        for wave in 0..4 {
            for i in 0..PODS / 4 {
                store.create(mk(format!("p-{wave}-{i}"), "100m")).unwrap();
            }
            // One huge pod in the first wave and one in the last: the unschedulable series then
            // increases between scrapes (a series born at its final value has no rate).
            if wave == 0 || wave == 3 {
                store.create(mk(format!("huge-{wave}"), "1000")).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
        let start = Instant::now();
        loop {
            let bound = store
                .list("v1", "Pod", Some("default"))
                .iter()
                .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty()))
                .count();
            if bound == PODS {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "only {bound} of {PODS} pods bound");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A node too small for the huge pods: NodeResourcesFit's hint skips them (QueueSkip).
        store
            .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "small"},
                "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "110"}}}))
            .unwrap();
    }

    async fn stop(mut self) {
        let _ = self.scheduler.kill();
        let _ = self.scheduler.wait();
        self.server.shutdown().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_family_and_label_set_in_both_formats() {
    let run = Run::start("families").await;
    run.schedule_workload().await;
    // The cache size refresher ticks every second.
    tokio::time::sleep(Duration::from_millis(1200)).await;

    let (text_ct, text) = scrape(run.port, "/metrics", None).await;
    let (om_ct, om) = scrape(run.port, "/metrics", Some("application/openmetrics-text; version=1.0.0")).await;
    run.stop().await;
    assert_eq!(text_ct, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores");
    assert_eq!(om_ct, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(om.ends_with("# EOF\n") && !text.contains("# EOF"));

    let text_families = parse(&text);
    let om_families = parse(&om);
    let mut problems = Vec::new();
    for &(family, ty, labels, fed) in FAMILIES {
        let want: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        for (format, exposition, name) in [
            ("text", &text_families, family.to_string()),
            ("openmetrics", &om_families, openmetrics_family(family, ty)),
        ] {
            // Like client_golang, prometheus-client omits a labelled family until it has a child.
            match exposition.types.get(&name) {
                None if fed => problems.push(format!("{format}: family {name} missing")),
                None => {}
                Some(t) if t != ty => problems.push(format!("{format}: {name} is a {t}, upstream a {ty}")),
                Some(_) => {}
            }
            let sets = exposition.label_sets.get(&name).cloned().unwrap_or_default();
            if fed && sets.is_empty() {
                problems.push(format!("{format}: {name} has no samples after the run"));
            }
            for set in sets {
                if set != want {
                    problems.push(format!("{format}: {name} has labels {set:?}, upstream {want:?}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // A few label values operators filter on.
    for needle in [
        r#"scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 100"#,
        r#"scheduler_plugin_evaluation_total{extension_point="Filter",plugin="NodeResourcesFit",profile="default-scheduler"}"#,
        r#"scheduler_event_handling_duration_seconds_count{event="UnscheduledPodAdd"}"#,
        r#"scheduler_event_handling_duration_seconds_count{event="NodeAdd"}"#,
        r#"leader_election_master_status{name="kube-scheduler"} 1"#,
        r#"scheduler_unschedulable_pods{plugin="NodeResourcesFit",profile="default-scheduler"} 2"#,
        r#"kubernetes_feature_enabled{name="DynamicResourceAllocation",stage=""} 1"#,
        // OpportunisticBatching (beta, on): the default profile signs no pod (PodTopologySpread's
        // system default constraints), so every cycle finds no hint and leaves nothing to reuse.
        r#"kubernetes_feature_enabled{name="OpportunisticBatching",stage="BETA"} 1"#,
        r#"scheduler_batch_attempts_total{profile="default-scheduler",result="no_hint"}"#,
        r#"scheduler_batch_cache_flushed_total{profile="default-scheduler",reason="pod_not_batchable"}"#,
        r#"scheduler_get_node_hint_duration_seconds_count{hinted="no_hint",profile="default-scheduler"}"#,
        r#"scheduler_store_schedule_results_duration_seconds_count{profile="default-scheduler"} 100"#,
        r#"scheduler_framework_extension_point_duration_seconds_count{extension_point="Sign",profile="default-scheduler",status="Success"}"#,
        r#"rest_client_transport_create_calls_total{result="miss"}"#,
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    // Bindings are POSTs answered 201; every request carries the API server's host:port.
    let binds = text
        .lines()
        .find(|l| l.starts_with("rest_client_requests_total{code=\"201\"") && l.contains("method=\"POST\""))
        .unwrap_or_else(|| panic!("no 201 POST in rest_client_requests_total:\n{text}"));
    let count: f64 = binds.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= PODS as f64, "{binds}");
    assert!(binds.contains("host=\"127.0.0.1:"), "{binds}");
    // Upstream's number format in 0.0.4: integral bucket bounds without ".0", exponents Go-style.
    let response_buckets: Vec<&str> =
        text.lines().filter(|l| l.starts_with("rest_client_response_size_bytes_bucket{")).collect();
    assert!(response_buckets.iter().any(|l| l.contains(r#"le="1.048576e+06""#)), "{response_buckets:#?}");
    assert!(text.contains(r#"scheduler_pod_scheduling_attempts_bucket{le="16"}"#));
    assert!(text.contains(r#"scheduler_plugin_execution_duration_seconds_bucket{extension_point="#));
    assert!(text.contains(r#"le="1e-05""#));
}

// ---- Prometheus ----

/// The Prometheus server binary; the test fails (not skips) without it, as CI installs it.
fn prometheus_binary(name: &str) -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/bin", "/usr/sbin"]) {
        let p = PathBuf::from(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` not found: install Debian's `prometheus` package (.ci/run does: apt-get install prometheus)");
}

/// GET against Prometheus' HTTP API (plain HTTP).
/// Whether Prometheus answers 200 on its readiness endpoint (false while starting or not listening).
async fn prom_ready(port: u16) -> bool {
    let Ok(tcp) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return false };
    let Ok((mut sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await else { return false };
    tokio::spawn(conn);
    let req = hyper::Request::get("/-/ready").header("host", "localhost").body(Empty::<Bytes>::new()).unwrap();
    sender.send_request(req).await.is_ok_and(|r| r.status() == hyper::StatusCode::OK)
}

async fn prom_get(port: u16, path_and_query: &str) -> Value {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get(path_and_query).header("host", "localhost").body(Empty::<Bytes>::new()).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{path_and_query}: {e}: {}", String::from_utf8_lossy(&body)))
}

/// Percent-encodes a query parameter value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Instant query; returns the result vector (panics on a PromQL error).
async fn query(port: u16, expr: &str) -> Vec<Value> {
    let v = prom_get(port, &format!("/api/v1/query?query={}", encode(expr))).await;
    assert_eq!(v["status"], "success", "{expr}: {v}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

#[derive(Debug, serde::Deserialize)]
struct Expression {
    #[serde(alias = "panel", alias = "alert", alias = "record")]
    name: String,
    expr: String,
    expect: String,
    #[serde(default)]
    inputs: Option<String>,
    /// Why a NaN value is what this workload yields (else NaN is a failure).
    #[serde(default)]
    nan_ok: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct Mixin {
    dashboard: Vec<Expression>,
    alerts: Vec<Expression>,
    rules: Vec<Expression>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_mixin_dashboard_alerts_and_rules_return_series_from_a_real_prometheus() {
    let prometheus = prometheus_binary("prometheus");
    let promtool = prometheus_binary("promtool");
    let mixin: Mixin = serde_saphyr::from_str(include_str!("../data/kubernetes-mixin/scheduler.yaml")).unwrap();

    let run = Run::start("prometheus").await;
    let prom_port = free_port();
    let config = run.dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: kube-scheduler\n    \
             scheme: https\n    tls_config:\n      insecure_skip_verify: true\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            run.port
        ),
    )
    .unwrap();
    let mut prom = Command::new(&prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", run.dir.join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(run.dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();

    // The text format 0.0.4 passes Prometheus' own parser and linter.
    let (_, text) = scrape(run.port, "/metrics", None).await;
    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let out = check.wait_with_output().unwrap();
    let lint = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!lint.contains("error while linting"), "promtool could not parse the text format:\n{lint}");

    // Wait for Prometheus to scrape the target, then schedule while it scrapes.
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = prom.try_wait() {
            let err = std::fs::read_to_string(run.dir.join("prometheus.log")).unwrap_or_default();
            panic!("prometheus exited ({status}):\n{err}");
        }
        // Prometheus answers queries with 503 until its storage is up: `/-/ready` says when.
        let ready =
            prom_ready(prom_port).await && !query(prom_port, r#"up{job="kube-scheduler"} == 1"#).await.is_empty();
        if ready {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "prometheus never scraped kube-scheduler successfully");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    run.schedule_workload().await;
    // Every bound pod and both huge pods' attempts counted in a scrape, plus a few more
    // scrapes for rate() windows.
    for (result, want) in [("scheduled", PODS), ("unschedulable", HUGE_PODS)] {
        let start = Instant::now();
        loop {
            let expr = format!(r#"sum(scheduler_schedule_attempts_total{{job="kube-scheduler",result="{result}"}})"#);
            let r = query(prom_port, &expr).await;
            let n: f64 = r.first().and_then(|s| s["value"][1].as_str()).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            if n >= want as f64 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "prometheus saw {n} {result} attempts");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut problems = Vec::new();
    for (kind, list) in [("dashboard", &mixin.dashboard), ("alert", &mixin.alerts), ("rule", &mixin.rules)] {
        for e in list {
            let result = query(prom_port, &e.expr).await;
            let nan = result.iter().any(|s| s["value"][1].as_str().is_some_and(|v| v == "NaN"));
            match e.expect.as_str() {
                "series" if result.is_empty() => problems.push(format!("{kind} {}: no series from {}", e.name, e.expr)),
                "series" if nan && e.nan_ok.is_none() => {
                    problems.push(format!("{kind} {}: NaN from {}", e.name, e.expr))
                }
                "empty" if !result.is_empty() => {
                    problems.push(format!("{kind} {}: expected no series from {}, got {result:?}", e.name, e.expr))
                }
                "series" | "empty" | "any" => {}
                other => panic!("unknown expectation {other}"),
            }
            if let Some(inputs) = &e.inputs {
                if query(prom_port, inputs).await.is_empty() {
                    problems.push(format!("{kind} {}: its input {inputs} has no series", e.name));
                }
            }
        }
    }
    let _ = prom.kill();
    let _ = prom.wait();
    run.stop().await;
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
