//! Manifest loading (multi-document YAML/JSON) and applying it to a fresh store.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(manifests) = ksched_apiserver::manifest::parse_str("fuzz.yaml", text) {
        let (_, store) = ksched_apiserver::fuzzing::router_for_tests("t");
        let _ = ksched_apiserver::manifest::apply(&store, &manifests);
    }
});
