//! The memory report: with `KSCHED_MEMORY_REPORT=<milliseconds>` in its environment, the
//! scheduler logs, at that interval, its resident set beside the live heap and what holds
//! memory during a burst (binding cycles, runtime tasks, sockets), to see where the peak goes.
//! Nothing else changes: the scheduler schedules, binds and records events as without it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::scheduler::Scheduler;

/// The report interval asked for in the environment, if any.
pub fn interval() -> Option<Duration> {
    let v = std::env::var(crate::allocator::MEMORY_REPORT_ENV.to_str().ok()?).ok()?;
    v.parse::<u64>().ok().filter(|ms| *ms > 0).map(Duration::from_millis)
}

/// Starts the report thread when [`interval`] asks for one; it stops with the scheduler.
pub fn start(scheduler: &Arc<Scheduler>, runtime: tokio::runtime::Handle) {
    let Some(every) = interval() else { return };
    let weak: Weak<Scheduler> = Arc::downgrade(scheduler);
    let spawned = std::thread::Builder::new().name("memory-report".into()).spawn(move || loop {
        std::thread::sleep(every);
        let Some(s) = weak.upgrade() else { return };
        let (ahead, at_permit, binding) = s.binding_counts();
        drop(s);
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let mib = |key: &str| (crate::metrics::status_kb(&status, key).unwrap_or(0.0) / f64::from(1 << 20)) as u64;
        let sockets = std::fs::read_dir("/proc/self/fd")
            .map(|d| {
                d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                    .filter(|t| t.to_string_lossy().starts_with("socket:"))
                    .count()
            })
            .unwrap_or(0);
        let live = crate::allocator::live_bytes().unwrap_or(0);
        tracing::info!(
            rss_mib = mib("VmRSS"),
            hwm_mib = mib("VmHWM"),
            live_heap_mib = live / (1 << 20),
            binding_cycles = ahead,
            waiting_at_permit = at_permit,
            binding_api_calls = binding,
            runtime_tasks = runtime.metrics().num_alive_tasks(),
            sockets,
            "memory report"
        );
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "not starting the memory report");
    }
}
