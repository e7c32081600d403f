//! The evaluation memo never changes a decision: a cluster, configuration and pod sequence made
//! from the fuzzer's bytes, scheduled with the memo on and off, must decide every pod the same.
#![no_main]
use ksched_scheduler::schedule_one::memo_check::{run, Bytes, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(m) = run(&mut Bytes::new(data), Limits::default()) {
        panic!("the memo changed a decision: {m}");
    }
});
