//! The web view of `ksched local` in a real browser (Debian's `chromium`, installed by
//! `.ci/install-chromium`; the test fails when it is missing): the page shows the pending pod's
//! message and the nodes' pods, picks up a pod created through the API and its placement over the
//! live watch stream without a reload, and a screenshot is saved under target/.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A plain-HTTP request; returns the body. Reads exactly Content-Length bytes (or chunks up to
/// the last one): some servers (Chromium's DevTools) keep the connection open regardless.
fn http(port: u16, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut s)
}

fn read_response(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let body = &buf[end + 4..];
            if let Some(len) = head.lines().find_map(|l| l.strip_prefix("content-length:")) {
                if body.len() >= len.trim().parse::<usize>().unwrap_or(0) {
                    return String::from_utf8_lossy(body).into_owned();
                }
            } else if head.contains("transfer-encoding: chunked") && body.ends_with(b"0\r\n\r\n") {
                return dechunk(&String::from_utf8_lossy(body));
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

struct Guard(Vec<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn chromium() -> Command {
    let mut c = Command::new("chromium");
    c.args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]);
    c
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn web_view_shows_pending_messages_node_pods_and_live_updates() {
    let version = Command::new("chromium").arg("--version").output();
    assert!(version.is_ok_and(|o| o.status.success()), "chromium is required for this test: run .ci/install-chromium");
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui-browser");
    std::fs::create_dir_all(&tmp).unwrap();
    let port = free_port();
    let kubeconfig = tmp.join("kubeconfig");
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster");
    let mut local = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["local", "--listen", &format!("127.0.0.1:{port}"), "--kubeconfig-out"])
        .arg(&kubeconfig)
        .arg(&example)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting ksched local");
    let stdout = local.stdout.take().unwrap();
    let mut guard = Guard(vec![local]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The URL is printed at start; the table once the cluster settles.
    let mut url = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("ksched local output");
        if let Some(u) = line.strip_prefix("web view: ") {
            url = Some(u.to_string());
        }
        if line.contains("serving until Ctrl-C") {
            break;
        }
    }
    let url = url.expect("the web view URL is printed at start");
    assert_eq!(url, format!("http://127.0.0.1:{port}/ui/"));

    // What the page must show, from the same data the page reads.
    let state: serde_json::Value = serde_json::from_str(&http(port, "GET", "/ui/api/state", None, None)).unwrap();
    let pending = state["pending"].as_array().unwrap();
    let message = pending
        .iter()
        .filter_map(|p| p["message"].as_str())
        .find(|m| m.contains("nodes are available"))
        .expect("the example has an unschedulable pod")
        .to_string();
    let (node, pods) = state["zones"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|z| z.as_array().unwrap())
        .find_map(|n| {
            let pods = n["pods"].as_array().unwrap();
            (!pods.is_empty()).then(|| (n["name"].as_str().unwrap().to_string(), pods.clone()))
        })
        .expect("some node runs pods");

    // `?snapshot`: the same page rendered once, without the live stream that would keep a
    // headless dump waiting for the network to go idle forever.
    let snapshot_url = format!("{url}?snapshot");
    let dom =
        chromium().args(["--virtual-time-budget=5000", "--dump-dom"]).arg(&snapshot_url).output().expect("chromium");
    let dom = String::from_utf8_lossy(&dom.stdout);
    let html_message = message.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    assert!(dom.contains(&html_message), "the pending pod's message is not in the DOM:\n{dom}");
    let node_block = dom.split(&format!("data-node=\"{node}\"")).nth(1).expect("the node is in the DOM");
    let node_block = node_block.split("data-node=").next().unwrap();
    for p in &pods {
        let p = p.as_str().unwrap();
        assert!(node_block.contains(p), "pod {p} missing under node {node}");
    }

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("..").join("ui-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let status = chromium()
        .args(["--window-size=1400,1000", "--virtual-time-budget=5000"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&snapshot_url)
        .stderr(Stdio::null())
        .status()
        .expect("chromium screenshot");
    assert!(status.success());
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false), "no screenshot at {}", shot.display());

    // Live: a page left open picks up a pod created through the API, without a reload. The page
    // mirrors its state in document.title, which the DevTools HTTP endpoint reports.
    let devtools = free_port();
    let browser =
        chromium().arg(format!("--remote-debugging-port={devtools}")).arg(&url).stderr(Stdio::null()).spawn().unwrap();
    guard.0.push(browser);
    let title = || -> String {
        if TcpStream::connect(("127.0.0.1", devtools)).is_err() {
            return String::new();
        }
        let body = http(devtools, "GET", "/json/list", None, None);
        let list: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        list.as_array()
            .and_then(|l| l.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["title"].as_str())
            .unwrap_or("")
            .to_string()
    };
    wait_until("the page to load", Duration::from_secs(30), || title().starts_with("ksched local:"));
    let token = std::fs::read_to_string(&kubeconfig)
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token:").map(|t| t.trim().trim_matches('"').to_string()))
        .expect("token in the kubeconfig");
    let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"ui-probe","namespace":"default"},
        "spec":{"containers":[{"name":"c","image":"pause","resources":{"requests":{"cpu":"10m"}}}]}}"#;
    let created = http(port, "POST", "/api/v1/namespaces/default/pods", Some(&token), Some(body));
    assert!(created.contains("ui-probe"), "{created}");
    // The page has no polling loop while its watch stream is up ("[live]"): the pod appearing
    // bound to a node proves the update came over the stream.
    let mut seen = String::new();
    wait_until("the new pod to appear placed, over the live stream", Duration::from_secs(30), || {
        seen = title();
        seen.contains("newest default/ui-probe on ") && seen.ends_with("[live]")
    });
    let pod: serde_json::Value =
        serde_json::from_str(&http(port, "GET", "/api/v1/namespaces/default/pods/ui-probe", Some(&token), None))
            .unwrap();
    let bound = pod["spec"]["nodeName"].as_str().expect("the pod is bound");
    assert!(seen.contains(&format!("newest default/ui-probe on {bound} [live]")), "{seen}");
}

/// Starts `ksched local` serving `args` (manifests and flags); returns the guard, the port and
/// the kubeconfig's path once the cluster has settled.
fn serve_local(name: &str, args: &[&str]) -> (Guard, u16, PathBuf) {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&tmp).unwrap();
    let port = free_port();
    let kubeconfig = tmp.join("kubeconfig");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut local = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .current_dir(&root)
        .args(["local", "--listen", &format!("127.0.0.1:{port}"), "--kubeconfig-out"])
        .arg(&kubeconfig)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting ksched local");
    let stdout = local.stdout.take().unwrap();
    let guard = Guard(vec![local]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("ksched local output");
        if line.contains("serving until Ctrl-C") {
            break;
        }
    }
    (guard, port, kubeconfig)
}

/// The GPU-sharing example under its policy (examples/gpu-sharing): every node lists its GPUs,
/// each with one segment per pod holding a share of it, and a partly used GPU's free remainder
/// is marked (amber) apart from a wholly free GPU.
#[test]
fn web_view_shows_each_gpu_and_who_holds_which_share() {
    let version = Command::new("chromium").arg("--version").output();
    assert!(version.is_ok_and(|o| o.status.success()), "chromium is required for this test: run .ci/install-chromium");
    let (_guard, port, kubeconfig) = serve_local(
        "ui-browser-gpu",
        &["--config", "examples/gpu-sharing/scheduler-config.yaml", "examples/gpu-sharing/cluster"],
    );
    let token = std::fs::read_to_string(&kubeconfig)
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token:").map(|t| t.trim().trim_matches('"').to_string()))
        .expect("token in the kubeconfig");
    // The example's pods use 7 of the 8 GPUs; one more 300m share leaves a partly used GPU
    // whatever the placement.
    let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe","namespace":"ml"},
        "spec":{"containers":[{"name":"c","image":"pause","resources":{"requests":{"cpu":"1"},"claims":[{"name":"gpu"}]}}],
        "resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"gpu-300m"}]}}"#;
    let created = http(port, "POST", "/api/v1/namespaces/ml/pods", Some(&token), Some(body));
    assert!(created.contains("probe"), "{created}");
    let mut state = serde_json::Value::Null;
    let devices = |state: &serde_json::Value| -> Vec<serde_json::Value> {
        state["zones"]
            .as_object()
            .into_iter()
            .flat_map(|z| z.values())
            .flat_map(|z| z.as_array().unwrap().iter())
            .flat_map(|n| n["devices"].as_array().unwrap().iter().cloned())
            .collect()
    };
    wait_until("the probe's share to be allocated", Duration::from_secs(30), || {
        state = serde_json::from_str(&http(port, "GET", "/ui/api/state", None, None)).unwrap_or_default();
        devices(&state).iter().any(|d| d["shares"].as_array().unwrap().iter().any(|s| s["holder"] == "ml/probe"))
    });
    let devices = devices(&state);
    assert_eq!(devices.len(), 8, "{state}");
    let held: i64 = devices.iter().map(|d| d["used"].as_i64().unwrap()).sum();
    assert_eq!(held, 7300, "7 GPUs' worth of claims and the probe's 300: {state}");

    let dom = chromium()
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("http://127.0.0.1:{port}/ui/?snapshot"))
        .output()
        .expect("chromium");
    let dom = String::from_utf8_lossy(&dom.stdout);
    let mut partial = 0;
    for d in &devices {
        let id = d["id"].as_str().unwrap();
        let block =
            dom.split(&format!("data-device=\"{id}\"")).nth(1).unwrap_or_else(|| panic!("{id} not in the DOM:\n{dom}"));
        let block = block.split("data-device=").next().unwrap();
        let (total, used) = (d["total"].as_i64().unwrap(), d["used"].as_i64().unwrap());
        assert!(block.starts_with(&format!(" data-free=\"{}\"", total - used)), "{id}: {block}");
        for s in d["shares"].as_array().unwrap() {
            let holder = s["holder"].as_str().unwrap();
            let amount = s["amount"].as_i64().unwrap();
            assert!(block.contains(&format!("data-holder=\"{holder}\"")), "{id}: {holder} missing in {block}");
            assert!(block.contains(&format!("{} {amount}<", holder.rsplit('/').next().unwrap())), "{id}: {block}");
        }
        if used > 0 && used < total {
            partial += 1;
            assert!(block.contains("class=\"free partial\""), "{id}: a partly used GPU's remainder is marked: {block}");
        } else {
            assert!(!block.contains("partial"), "{id}: {block}");
        }
    }
    assert!(partial >= 1, "{state}");
}
