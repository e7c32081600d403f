//! The three patch types and apply: the first byte picks the kind, the rest is split into a
//! target object and a patch at the first NUL.
#![no_main]
use ksched_apiserver::fuzzing::{apply_patch, PatchKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let kind = match first % 4 {
        0 => PatchKind::Merge,
        1 => PatchKind::Strategic,
        2 => PatchKind::Json,
        _ => PatchKind::Apply,
    };
    let (target, patch) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (
            &b"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}"[..],
            rest,
        ),
    };
    let (Ok(target), Ok(patch)) = (serde_json::from_slice(target), serde_json::from_slice(patch)) else { return };
    let _ = apply_patch(kind, &target, &patch);
});
