//! Resource quantity parsing (`100m`, `1Gi`, `1e3`, ...), and resource lists built from it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = ksched_framework::quantity::value(text);
    let _ = ksched_framework::quantity::milli_value(text);
    let q = k8s_openapi::apimachinery::pkg::api::resource::Quantity(text.to_string());
    let list = [("cpu".to_string(), q.clone()), ("memory".to_string(), q.clone()), ("example.com/gpu".to_string(), q)];
    let list: std::collections::BTreeMap<_, _> = list.into_iter().collect();
    let _ = ksched_framework::resource::Resource::from_list(&list);
});
