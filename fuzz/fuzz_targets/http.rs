//! Any HTTP request to the embedded API server, through its router in process (no sockets).
//! Input: `METHOD PATH\n` header lines (`Name: value`), an empty line, then the body.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap())
}

fuzz_target!(|data: &[u8]| {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let Ok(head) = std::str::from_utf8(head) else { return };
    let mut lines = head.lines();
    let Some((method, path)) = lines.next().and_then(|l| l.split_once(' ')) else { return };
    let mut req = http::Request::builder().method(method).uri(path).header("authorization", "Bearer t");
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            req = req.header(k.trim(), v.trim());
        }
    }
    // Watches stream until their timeout: their bodies are read for a moment only.
    let watch = path.contains("watch");
    let Ok(req) = req.body(axum::body::Body::from(body.to_vec())) else { return };
    runtime().block_on(async move {
        let (router, _store) = ksched_apiserver::fuzzing::router_for_tests("t");
        // The router's error type is uninhabited: every request gets a response.
        let resp = match router.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        let limit = if watch { std::time::Duration::from_millis(5) } else { std::time::Duration::from_secs(10) };
        let _ = tokio::time::timeout(limit, axum::body::to_bytes(resp.into_body(), 1 << 24)).await;
    });
});
