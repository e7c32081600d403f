//! The secure endpoint over real HTTPS on an ephemeral loopback port: health endpoints,
//! delegated authentication/authorization against the embedded API server (tokens, client
//! certificates, front-proxy headers, CA bundles and serving certificates reloaded while
//! serving), `/metrics`, `/metrics/resources`, `/configz` and 404s.

use crate::common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{ClientCert, TestCa};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use ksched_apiserver::{ApiServer, RunningServer};
use ksched_framework::handle::{ExtensionPoint, FrameworkMetrics};
use ksched_framework::Code;
use ksched_scheduler::metrics::{PrometheusMetrics, SchedulerMetrics};
use ksched_scheduler::queue::QueueMetrics;
use ksched_scheduler::server::{serve, HealthCheck, ServerConfig, ServerHandle, ServerState};
use rustls::pki_types::ServerName;

struct Reply {
    status: u16,
    content_type: String,
    body: String,
}

/// One HTTPS GET on a fresh connection.
async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Reply {
    get_accepting(addr, path, token, None).await
}

/// One HTTPS GET with an `Accept` header.
async fn get_accepting(addr: SocketAddr, path: &str, token: Option<&str>, accept: Option<&str>) -> Reply {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = common::insecure_tls_connector().connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", "localhost");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = sender.send_request(req.body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Reply { status, content_type, body: String::from_utf8_lossy(&body).into_owned() }
}

fn base_config() -> ServerConfig {
    ServerConfig {
        bind_address: "127.0.0.1".parse().unwrap(),
        secure_port: 0,
        in_cluster_fallback: false,
        authentication_skip_lookup: true,
        ..ServerConfig::default()
    }
}

/// Binds an ephemeral port: asks the OS for a free one first (port 0 disables serving).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Fixture {
    handle: ServerHandle,
    addr: SocketAddr,
    synced: Arc<AtomicBool>,
    leader: Arc<AtomicBool>,
    metrics: Arc<PrometheusMetrics>,
}

async fn start(mut cfg: ServerConfig) -> Fixture {
    let metrics = Arc::new(PrometheusMetrics::new());
    let synced = Arc::new(AtomicBool::new(false));
    let shutting_down = Arc::new(AtomicBool::new(false));
    let mut state = ServerState::new(metrics.clone());
    state.readyz = vec![HealthCheck::shutdown(shutting_down), HealthCheck::handler_sync(synced.clone())];
    state.configz = Some(ksched_scheduler::config::to_json(&ksched_scheduler::config::default_config()));
    let pod: ksched_framework::pod::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": "n1", "schedulerName": "default-scheduler",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}
    }))
    .unwrap();
    let pods = vec![Arc::new(pod)];
    state.pods = Some(Arc::new(move || pods.clone()));
    state.flagz = vec![("secure-port".into(), "10259".into()), ("leader-elect".into(), "true".into())];
    let leader = state.is_leader.clone();
    cfg.secure_port = free_port();
    let handle = serve(cfg, state).await.unwrap();
    let addr = handle.local_addr().unwrap();
    Fixture { handle, addr, synced, leader, metrics }
}

fn feed(m: &PrometheusMetrics) {
    let pod = Arc::new(ksched_framework::PodInfo::new(Arc::new(ksched_framework::pod::Pod::default())));
    let now = std::time::Instant::now();
    let qpi = ksched_framework::QueuedPodInfo {
        attempts: 2,
        initial_attempt_timestamp: Some(now),
        ..ksched_framework::QueuedPodInfo::new(pod, now)
    };
    m.pod_scheduled("default-scheduler", 0.01, &qpi);
    m.binding_goroutines(1);
    m.plugin_duration("NodeAffinity", ExtensionPoint::Filter, Code::Success, 0.00002);
    m.queueing_hint("NodeAffinity", "NodeAdd", "Queue", 0.00001);
    m.in_flight_events("PodPopped", 1);
    m.record_cache_size(Default::default());
    m.set_leader("kube-scheduler", false);
    m.scheduling_algorithm_duration(0.003);
    m.pod_failed("default-scheduler", true, 0.02);
    m.pending_pods(2, 1, 0, 0);
    m.incoming_pod("active", "PodAdd");
    m.extension_point_duration("default-scheduler", ExtensionPoint::Filter, Code::Success, 0.0003);
    m.unschedulable_reason("NodeResourcesFit", "default-scheduler", 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_endpoints_and_anonymous_requests() {
    let f = start(base_config()).await;

    for path in ["/healthz", "/livez"] {
        let r = get(f.addr, path, None).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{path}");
        assert_eq!(r.content_type, "text/plain; charset=utf-8");
    }
    let r = get(f.addr, "/readyz", None).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.body, "[+]shutdown ok\n[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n");
    let r = get(f.addr, "/readyz?exclude=sched-handler-sync", None).await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));

    f.synced.store(true, Ordering::Release);
    let r = get(f.addr, "/readyz", None).await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = get(f.addr, "/readyz?verbose", None).await;
    assert_eq!(r.body, "[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n");
    let r = get(f.addr, "/healthz?verbose", None).await;
    assert_eq!(r.body, "[+]ping ok\nhealthz check passed\n");

    // Anonymous, not always-allowed, no authorization kubeconfig: forbidden.
    let r = get(f.addr, "/metrics", None).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let status: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["message"], "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"");
    // Only the exact always-allowed paths are open.
    assert_eq!(get(f.addr, "/healthz/ping", None).await.status, 403);
    assert_eq!(get(f.addr, "/configz", None).await.status, 403);
    // Without a token authenticator bearer tokens are ignored (anonymous).
    assert_eq!(get(f.addr, "/livez", Some("whatever")).await.status, 200);

    f.handle.shutdown(Duration::from_secs(5)).await;
    assert!(tokio::net::TcpStream::connect(f.addr).await.is_err(), "listener closed after shutdown");
}

fn write_kubeconfig(server: &RunningServer) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ksched-serving-{}-{}.kubeconfig", std::process::id(), free_port()));
    server.write_kubeconfig(&path).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegated_authn_authz_metrics_and_configz() {
    let api = ApiServer::start(ksched_apiserver::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let kubeconfig = write_kubeconfig(&api);
    let f = start(ServerConfig {
        authentication_kubeconfig: Some(kubeconfig.clone()),
        authorization_kubeconfig: Some(kubeconfig.clone()),
        authentication_skip_lookup: false, // the ConfigMap is absent: tolerated
        ..base_config()
    })
    .await;
    feed(&f.metrics);
    let token = api.token().to_string();

    // A token the API server rejects: 401.
    let r = get(f.addr, "/metrics", Some("not-the-token")).await;
    assert_eq!(r.status, 401, "{}", r.body);
    let status: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!((status["reason"].as_str(), status["code"].as_u64()), (Some("Unauthorized"), Some(401)));
    // Health endpoints still authenticate: a bad token is 401 there too.
    assert_eq!(get(f.addr, "/healthz", Some("not-the-token")).await.status, 401);

    // TokenReview + (system:masters) → 200 with every family, in the text format 0.0.4 by
    // default and in OpenMetrics when asked.
    let om = get_accepting(f.addr, "/metrics", Some(&token), Some("application/openmetrics-text;version=1.0.0")).await;
    assert_eq!(om.status, 200, "{}", om.body);
    assert_eq!(om.content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(om.body.ends_with("# EOF\n"));
    assert!(om.body.contains("\n# TYPE scheduler_schedule_attempts counter\n"));
    let r = get(f.addr, "/metrics", Some(&token)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores");
    assert!(!r.body.contains("# EOF"));
    for (family, ty) in [
        ("scheduler_schedule_attempts", "counter"),
        ("scheduler_scheduling_attempt_duration_seconds", "histogram"),
        ("scheduler_scheduling_algorithm_duration_seconds", "histogram"),
        ("scheduler_pending_pods", "gauge"),
        ("scheduler_pod_scheduling_sli_duration_seconds", "histogram"),
        ("scheduler_pod_scheduling_attempts", "histogram"),
        ("scheduler_framework_extension_point_duration_seconds", "histogram"),
        ("scheduler_plugin_execution_duration_seconds", "histogram"),
        ("scheduler_queue_incoming_pods", "counter"),
        ("scheduler_goroutines", "gauge"),
        ("scheduler_cache_size", "gauge"),
        ("scheduler_unschedulable_pods", "gauge"),
        ("scheduler_queueing_hint_execution_duration_seconds", "histogram"),
        ("scheduler_inflight_events", "gauge"),
        ("scheduler_preemption_attempts", "counter"),
        ("scheduler_preemption_victims", "histogram"),
        ("leader_election_master_status", "gauge"),
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("process_open_fds", "gauge"),
    ] {
        assert!(om.body.contains(&format!("\n# TYPE {family} {ty}\n")), "missing {family} {ty}");
        let family = if ty == "counter" { format!("{family}_total") } else { family.to_string() };
        assert!(r.body.contains(&format!("\n# TYPE {family} {ty}\n")), "missing {family} {ty}");
    }
    assert!(r
        .body
        .contains(r#"scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1"#));
    assert!(r.body.contains(r#"scheduler_pending_pods{queue="active"} 2"#));
    // Bucket boundaries of two histograms: exp(0.001, 2, 15) and exp(0.0001, 2, 12).
    let buckets = |sample: &str| -> Vec<String> {
        r.body
            .lines()
            .filter(|l| l.starts_with(sample))
            .filter_map(|l| l.rsplit("le=\"").next()?.split('"').next().map(str::to_string))
            .collect()
    };
    assert_eq!(
        buckets("scheduler_scheduling_algorithm_duration_seconds_bucket"),
        [
            "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "0.256", "0.512", "1.024", "2.048",
            "4.096", "8.192", "16.384", "+Inf"
        ]
    );
    assert_eq!(
        buckets("scheduler_framework_extension_point_duration_seconds_bucket"),
        [
            "0.0001", "0.0002", "0.0004", "0.0008", "0.0016", "0.0032", "0.0064", "0.0128", "0.0256", "0.0512",
            "0.1024", "0.2048", "+Inf"
        ]
    );

    // configz.
    let r = get(f.addr, "/configz", Some(&token)).await;
    assert_eq!((r.status, r.content_type.as_str()), (200, "application/json"));
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["componentconfig"]["apiVersion"], "kubescheduler.config.k8s.io/v1");
    assert_eq!(v["componentconfig"]["kind"], "KubeSchedulerConfiguration");

    // /metrics/resources: empty unless leading.
    let r = get(f.addr, "/metrics/resources", Some(&token)).await;
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    f.leader.store(true, Ordering::Release);
    let r = get(f.addr, "/metrics/resources", Some(&token)).await;
    assert!(
        r.body.contains(r#"kube_pod_resource_request{namespace="default",node="n1",pod="web",priority="",resource="cpu",scheduler="default-scheduler",unit="cores"} 0.25"#),
        "{}",
        r.body
    );
    // Its own registry in the text format by default: the two STABLE families only (the pod
    // has no limits, so kube_pod_resource_limit has no series and is left out).
    assert_eq!(r.content_type, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores");
    assert!(r.body.starts_with("# HELP kube_pod_resource_request [STABLE] Resources requested by workloads on the cluster, broken down by pod. This shows the resource usage the scheduler and kubelet expect per pod for resources along with the unit for the resource if any.\n# TYPE kube_pod_resource_request gauge\n"), "{}", r.body);
    assert_eq!(r.body.lines().filter(|l| l.starts_with("# TYPE")).count(), 1, "{}", r.body);

    // z-pages and SLIs.
    const WARNING: &str = "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.";
    // upstream's flagz text: header, then `name<sep>value` sorted, with one random separator.
    let r = get(f.addr, "/flagz", Some(&token)).await;
    assert_eq!(r.content_type, "text/plain; charset=utf-8");
    let lines: Vec<&str> = r.body.lines().collect();
    assert_eq!(lines[..3], ["", "kube-scheduler flagz", WARNING], "{}", r.body);
    let sep = [": ", ":", "=", " "].into_iter().find(|s| lines[3] == format!("leader-elect{s}true")).unwrap();
    assert_eq!(lines[3..], [format!("leader-elect{sep}true"), format!("secure-port{sep}10259")], "{}", r.body);
    // upstream's statusz text layout (statusz/textserializer.go).
    let r = get(f.addr, "/statusz", Some(&token)).await;
    let lines: Vec<&str> = r.body.lines().collect();
    assert_eq!(lines[..4], ["", "kube-scheduler statusz", WARNING, ""], "{}", r.body);
    let d = [": ", ":", "=", " "].into_iter().find(|d| lines[4].starts_with(&format!("Started{d} "))).unwrap();
    let field =
        |i: usize, name: &str| lines[i].strip_prefix(&format!("{name}{d} ")).unwrap_or_else(|| panic!("{}", r.body));
    // Go's time.UnixDate: `Mon Jan _2 15:04:05 MST 2006`.
    let started: Vec<&str> = field(4, "Started").split_whitespace().collect();
    assert_eq!((started.len(), started[4]), (6, "UTC"), "{}", r.body);
    assert!(field(5, "Up").starts_with("0 hr 00 min "), "{}", r.body);
    field(6, "Go version");
    assert_eq!(field(7, "Binary version"), "1.36.0");
    assert_eq!(field(8, "Emulation version"), "1.36");
    // upstream's aggregated listing: first path segments, sorted, without /statusz itself
    assert_eq!(field(9, "Paths"), "/configz /flagz /healthz /livez /metrics /readyz");
    assert_eq!(lines.len(), 10, "{}", r.body);
    // The structured kinds, negotiated as upstream's flagz/statusz packages do.
    let flagz_json = "application/json;g=config.k8s.io;v=v1beta1;as=Flagz";
    let r = get_accepting(f.addr, "/flagz", Some(&token), Some(flagz_json)).await;
    assert_eq!((r.status, r.content_type.as_str()), (200, "application/json"), "{}", r.body);
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!((v["kind"].as_str(), v["apiVersion"].as_str()), (Some("Flagz"), Some("config.k8s.io/v1beta1")));
    assert_eq!(v["flags"]["secure-port"], "10259", "{v}");
    let r =
        get_accepting(f.addr, "/statusz", Some(&token), Some("application/json;g=config.k8s.io;v=v1beta1;as=Statusz"))
            .await;
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["kind"], "Statusz", "{v}");
    assert_eq!(v["metadata"], serde_json::json!({"name": "kube-scheduler"}), "{v}");
    assert_eq!((v["binaryVersion"].as_str(), v["emulationVersion"].as_str()), (Some("1.36.0"), Some("1.36")), "{v}");
    assert_eq!(v["paths"], serde_json::json!(["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"]));
    assert!(v["uptimeSeconds"].is_u64() && v["startTime"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
    // A bare JSON request names no kind: 406, with the media types that are served.
    let r = get_accepting(f.addr, "/flagz", Some(&token), Some("application/json")).await;
    assert_eq!(r.status, 406, "{}", r.body);
    assert!(r.body.contains("only the following media types are accepted"), "{}", r.body);
    get(f.addr, "/livez", Some(&token)).await;
    let r = get(f.addr, "/metrics/slis", Some(&token)).await;
    assert!(r.body.contains(r#"kubernetes_healthcheck{name="ping",type="livez"} 1"#), "{}", r.body);
    assert!(r.body.contains("# HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.\n# TYPE kubernetes_healthchecks_total counter\n"), "{}", r.body);
    assert!(
        r.body.contains(r#"kubernetes_healthchecks_total{name="ping",status="success",type="livez"} "#),
        "{}",
        r.body
    );

    // Unknown paths.
    assert_eq!(get(f.addr, "/nope", Some(&token)).await.status, 404);
    assert_eq!(get(f.addr, "/readyz/nope", Some(&token)).await.status, 404);
    // Individual checks.
    let r = get(f.addr, "/readyz/sched-handler-sync", Some(&token)).await;
    assert_eq!((r.status, r.body.as_str()), (500, "internal server error: handlers are not fully synchronized\n"));

    f.handle.shutdown(Duration::from_secs(5)).await;
    api.shutdown().await;
    let _ = std::fs::remove_file(kubeconfig);
}

#[tokio::test]
async fn secure_port_zero_disables_serving() {
    let handle = serve(base_config(), ServerState::new(Arc::new(PrometheusMetrics::new()))).await.unwrap();
    assert!(handle.local_addr().is_none());
    handle.shutdown(Duration::from_secs(1)).await;
}

// ---- client certificates, front proxies and reloading ----

/// One HTTPS GET presenting `cert`, with extra request headers; returns status and body.
async fn get_as(addr: SocketAddr, path: &str, cert: &ClientCert, headers: &[(&str, &str)]) -> (u16, String) {
    let connector = common::insecure_tls_connector_with_client_cert(cert.chain.clone(), cert.key.clone_key());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", "localhost");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender.send_request(req.body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Polls `check` every 100 ms for up to 10 s.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let start = std::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < Duration::from_secs(10), "{what} did not happen within 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn authentication_configmap(client_ca: &TestCa, front_proxy_ca: &TestCa) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": {
            "client-ca-file": client_ca.pem,
            "requestheader-client-ca-file": front_proxy_ca.pem,
            "requestheader-username-headers": "[\"X-Remote-User\"]",
            "requestheader-group-headers": "[\"X-Remote-Group\"]",
            "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
            "requestheader-allowed-names": "[\"front-proxy-client\"]",
        }
    })
}

/// The value of the first sample line starting with `prefix`.
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_and_front_proxy_users_follow_the_authentication_configmap() {
    let api = ApiServer::start(ksched_apiserver::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let kubeconfig = write_kubeconfig(&api);
    let (ca1, ca2, front) = (TestCa::new("client-ca-1"), TestCa::new("client-ca-2"), TestCa::new("front-proxy-ca"));
    api.store().create(authentication_configmap(&ca1, &front)).unwrap();
    // No authorization kubeconfig: only system:masters and the always-allowed paths pass, and
    // a 403 names the user the request authenticated as.
    let f = start(ServerConfig {
        authentication_kubeconfig: Some(kubeconfig.clone()),
        authentication_skip_lookup: false,
        ..base_config()
    })
    .await;

    // Client certificates signed by the ConfigMap's client CA: CN is the user, O the groups.
    let admin = ca1.client("jane", &["system:masters"]);
    assert_eq!(get_as(f.addr, "/metrics", &admin, &[]).await.0, 200);
    let (code, body) = get_as(f.addr, "/metrics", &ca1.client("bob", &[]), &[]).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains(r#"forbidden: User \"bob\" cannot get path \"/metrics\""#), "{body}");
    // An untrusted certificate is an authentication error, not anonymity.
    let stranger = ca2.client("mallory", &["system:masters"]);
    assert_eq!(get_as(f.addr, "/healthz", &stranger, &[]).await.0, 401);

    // Front proxy: an allowed client of the request-header CA asserts the user in headers.
    let proxy = front.client("front-proxy-client", &[]);
    let alice = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters")];
    assert_eq!(get_as(f.addr, "/metrics", &proxy, &alice).await.0, 200);
    let (code, body) = get_as(f.addr, "/metrics", &proxy, &[("X-Remote-User", "carol")]).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains(r#"User \"carol\""#), "{body}");
    // A request-header client whose name is not allowed cannot assert anyone.
    let other_proxy = front.client("other-proxy", &[]);
    assert_eq!(get_as(f.addr, "/healthz", &other_proxy, &alice).await.0, 401);

    // The ConfigMap now trusts client-ca-2 only: the watch reloads the bundle and the TLS
    // configuration without a restart.
    api.store().delete("v1", "ConfigMap", Some("kube-system"), "extension-apiserver-authentication").unwrap();
    api.store().create(authentication_configmap(&ca2, &front)).unwrap();
    eventually("trusting client-ca-2", async || get_as(f.addr, "/healthz", &stranger, &[]).await.0 == 200).await;
    assert_eq!(get_as(f.addr, "/healthz", &admin, &[]).await.0, 401);

    let token = api.token().to_string();
    let r = get(f.addr, "/metrics", Some(&token)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let m = &r.body;
    // Every controller's queue, named as upstream's; the client-CA and request-header-CA
    // controllers share their name ("client-ca"), as upstream's do.
    for name in [
        "DynamicConfigMapCABundle-client-ca",
        "RequestHeaderAuthRequestController",
        "DynamicServingCertificateController",
    ] {
        let adds = sample(m, &format!("workqueue_adds_total{{name=\"{name}\"}}"));
        assert!(adds.is_some_and(|n| n >= 1.0), "{name}: {adds:?}\n{m}");
        assert!(m.contains(&format!("workqueue_depth{{name=\"{name}\"}}")), "{name}");
        assert!(m.contains(&format!("workqueue_work_duration_seconds_count{{name=\"{name}\"}}")), "{name}");
    }
    // Rebuilt at start and after the reload.
    let rebuilt = sample(m, r#"workqueue_work_duration_seconds_count{name="DynamicServingCertificateController"}"#);
    assert!(rebuilt.is_some_and(|n| n >= 1.0), "{m}");
    assert!(m.contains(r#"workqueue_queue_duration_seconds_bucket{name="DynamicServingCertificateController",le="9.999999999999999e-06"}"#));
    assert!(sample(m, "apiserver_client_certificate_expiration_seconds_count").is_some_and(|n| n >= 3.0), "{m}");
    assert!(sample(m, r#"authentication_attempts{result="error"}"#).is_some_and(|n| n >= 3.0), "{m}");
    assert!(sample(m, r#"authenticated_user_requests{username="other"}"#).is_some_and(|n| n >= 4.0), "{m}");
    assert!(sample(m, r#"authorization_attempts_total{result="no-opinion"}"#).is_some_and(|n| n >= 2.0), "{m}");
    // The token went through TokenReview: a cache miss and an ok fetch. (The families are
    // process-wide and other tests of this binary review tokens too: only lower bounds hold.)
    assert!(sample(m, r#"apiserver_delegated_authn_request_total{code="201"}"#).is_some_and(|n| n >= 1.0), "{m}");
    assert!(sample(m, r#"authentication_token_cache_fetch_total{status="ok"}"#).is_some_and(|n| n >= 1.0), "{m}");
    assert!(sample(m, r#"authentication_token_cache_request_total{status="miss"}"#).is_some());

    f.handle.shutdown(Duration::from_secs(5)).await;
    api.shutdown().await;
    let _ = std::fs::remove_file(kubeconfig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_and_serving_certificate_files_are_reloaded_while_serving() {
    let dir = std::env::temp_dir().join(format!("ksched-serving-files-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca1, ca2) = (TestCa::new("file-ca-1"), TestCa::new("file-ca-2"));
    let ca_file = dir.join("client-ca.crt");
    std::fs::write(&ca_file, &ca1.pem).unwrap();
    let serving = |name: &str| {
        let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    };
    let (cert_file, key_file) = (dir.join("tls.crt"), dir.join("tls.key"));
    let (pem1, key1, der1) = serving("serving-1");
    std::fs::write(&cert_file, pem1).unwrap();
    std::fs::write(&key_file, key1).unwrap();
    let f = start(ServerConfig {
        client_ca_file: Some(ca_file.clone()),
        tls_cert_file: Some(cert_file.clone()),
        tls_private_key_file: Some(key_file.clone()),
        ..base_config()
    })
    .await;
    let leaf = async || {
        let tcp = tokio::net::TcpStream::connect(f.addr).await.unwrap();
        let tls =
            common::insecure_tls_connector().connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
        tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
    };
    assert_eq!(leaf().await, der1);
    let admin1 = ca1.client("jane", &["system:masters"]);
    let admin2 = ca2.client("jane", &["system:masters"]);
    assert_eq!(get_as(f.addr, "/metrics", &admin1, &[]).await.0, 200);
    assert_eq!(get_as(f.addr, "/metrics", &admin2, &[]).await.0, 401);

    std::fs::write(&ca_file, &ca2.pem).unwrap();
    let (pem2, key2, der2) = serving("serving-2");
    std::fs::write(&key_file, key2).unwrap();
    std::fs::write(&cert_file, pem2).unwrap();
    eventually("trusting file-ca-2", async || get_as(f.addr, "/metrics", &admin2, &[]).await.0 == 200).await;
    eventually("serving serving-2", async || leaf().await == der2).await;
    let (_, body) = get_as(f.addr, "/metrics", &admin2, &[]).await;
    for name in
        ["DynamicCABundle-client-ca-bundle", "DynamicCABundle-serving-cert", "DynamicServingCertificateController"]
    {
        let adds = sample(&body, &format!("workqueue_adds_total{{name=\"{name}\"}}"));
        assert!(adds.is_some_and(|n| n >= 1.0), "{name}: {adds:?}");
    }

    f.handle.shutdown(Duration::from_secs(5)).await;
    let _ = std::fs::remove_dir_all(dir);
}
