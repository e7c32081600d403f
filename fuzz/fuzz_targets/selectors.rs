//! Label and field selector parsing, and matching what parsed against an object.
#![no_main]
use ksched_apiserver::fuzzing::{FieldSelector, LabelSelector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let obj = serde_json::json!({"metadata": {"name": "a", "namespace": "b", "labels": {"app": "x", "tier": "1"}},
        "spec": {"nodeName": "n"}, "status": {"phase": "Running"}});
    if let Ok(l) = LabelSelector::parse(text) {
        let _ = l.matches_object(&obj);
    }
    if let Ok(f) = FieldSelector::parse(text) {
        let _ = f.matches(&obj);
    }
});
