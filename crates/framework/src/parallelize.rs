//! Parallel evaluation of nodes, the counterpart of upstream's parallelizer.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

/// One call in this many runs the mode a site does not currently prefer, so that a change in
/// conditions (load, pod shapes) is noticed.
const EXPLORE_EVERY: u64 = 32;
/// Inputs smaller than this always run inline: too little work to hand over.
const INLINE_BELOW: usize = 16;

/// A call site of parallel work, which learns from the wall time of its own calls whether handing
/// work to the pool pays off there. On a small machine whose other cores are busy binding and
/// handling events, waking a thread for tens of microseconds of filtering costs more than it
/// saves; on a large idle one it does not; and the answer differs between cheap and expensive
/// per-node work. Results never depend on the choice: both modes keep input order.
///
/// Declare one per call site: `static SITE: ParallelSite = ParallelSite::new();`.
#[derive(Debug, Default)]
pub struct ParallelSite {
    /// Moving averages of picoseconds per item, for inline and pooled runs (0: not measured).
    inline_ps: AtomicU64,
    pooled_ps: AtomicU64,
    calls: AtomicU64,
}

impl ParallelSite {
    /// A site with nothing measured yet.
    pub const fn new() -> Self {
        ParallelSite { inline_ps: AtomicU64::new(0), pooled_ps: AtomicU64::new(0), calls: AtomicU64::new(0) }
    }

    /// Whether the next call should use the pool: each mode is measured once, then the faster
    /// one is used, except that every [`EXPLORE_EVERY`]th call re-measures the other.
    fn use_pool(&self) -> bool {
        let call = self.calls.fetch_add(1, Relaxed);
        let (inline, pooled) = (self.inline_ps.load(Relaxed), self.pooled_ps.load(Relaxed));
        if inline == 0 {
            return false;
        }
        if pooled == 0 {
            return true;
        }
        let prefer_pool = pooled < inline;
        if call.is_multiple_of(EXPLORE_EVERY) {
            !prefer_pool
        } else {
            prefer_pool
        }
    }

    /// Folds one call's wall time into its mode's average (weight 1/8). A sample is capped at
    /// four times the average so that one preempted call does not flip the choice for long.
    fn record(&self, pooled: bool, elapsed: Duration, items: usize) {
        let sample = (elapsed.as_nanos().saturating_mul(1000) / items.max(1) as u128).clamp(1, u64::MAX as u128) as u64;
        let slot = if pooled { &self.pooled_ps } else { &self.inline_ps };
        let old = slot.load(Relaxed);
        let new = if old == 0 { sample } else { old - old / 8 + sample.min(old.saturating_mul(4)) / 8 };
        slot.store(new.max(1), Relaxed);
    }

    /// Runs `work(use_pool)` in the mode the site prefers and measures it.
    fn run<R>(&self, items: usize, work: impl FnOnce(bool) -> R) -> R {
        let use_pool = self.use_pool();
        let start = Instant::now();
        let r = work(use_pool);
        self.record(use_pool, start.elapsed(), items);
        r
    }
}

/// Runs per-node work on a fixed pool. Results keep input order, so outcomes do not depend on
/// thread timing (upstream's are nondeterministic; ours are reproducible).
#[derive(Clone)]
pub struct Parallelizer {
    pool: Arc<rayon::ThreadPool>,
    parallelism: usize,
}

impl std::fmt::Debug for Parallelizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Parallelizer({})", self.parallelism)
    }
}

impl Parallelizer {
    /// A pool for the configured parallelism. Threads beyond the machine's cores only add
    /// context switches for CPU-bound filtering, so the pool is capped at the core count.
    pub fn new(parallelism: usize) -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let threads = parallelism.clamp(1, cores.max(1));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("sched-worker-{i}"))
            .build()
            .unwrap_or_else(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a single-thread pool"));
        Parallelizer { pool: Arc::new(pool), parallelism: parallelism.max(1) }
    }

    /// The configured parallelism.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// Upstream's chunk size: max(1, min(sqrt(n), n/parallelism + 1)).
    pub fn chunk_size(&self, n: usize) -> usize {
        let sqrt = (n as f64).sqrt() as usize;
        sqrt.min(n / self.parallelism + 1).max(1)
    }

    /// Computes `f(i)` for i in 0..n, in parallel when `site` finds it pays, returning results
    /// in index order.
    pub fn map<T, F>(&self, site: &ParallelSite, n: usize, f: F) -> Vec<T>
    where
        T: Send,
        F: Fn(usize) -> T + Sync + Send,
    {
        if n < INLINE_BELOW || self.pool.current_num_threads() == 1 {
            return (0..n).map(f).collect();
        }
        // A few chunks per thread balance uniform per-node work; more only add wake-ups.
        let threads = self.pool.current_num_threads();
        let min_len = self.chunk_size(n).max(n / (threads * 4) + 1);
        site.run(n, |use_pool| {
            if use_pool {
                self.pool.install(|| (0..n).into_par_iter().with_min_len(min_len).map(&f).collect())
            } else {
                (0..n).map(&f).collect()
            }
        })
    }

    /// Runs `f(k, chunk)` over `out.chunks_mut(chunk_len)` (the last chunk may be shorter), in
    /// parallel when `site` finds it pays; inline when there is a single chunk or thread.
    pub fn for_each_chunk<T, F>(&self, site: &ParallelSite, out: &mut [T], chunk_len: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync + Send,
    {
        let chunk_len = chunk_len.max(1);
        if out.len() <= chunk_len || self.pool.current_num_threads() == 1 {
            out.chunks_mut(chunk_len).enumerate().for_each(|(k, c)| f(k, c));
            return;
        }
        site.run(out.len(), |use_pool| {
            if use_pool {
                self.pool.install(|| out.par_chunks_mut(chunk_len).enumerate().for_each(|(k, c)| f(k, c)));
            } else {
                out.chunks_mut(chunk_len).enumerate().for_each(|(k, c)| f(k, c));
            }
        });
    }

    /// Runs `f` on one of the pool's threads, so that parallel work it starts is shared with the
    /// calling loop instead of waking other threads while it waits.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }
}

impl Default for Parallelizer {
    fn default() -> Self {
        Parallelizer::new(16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_order_and_chunking_matches_upstream() {
        static SITE: ParallelSite = ParallelSite::new();
        let p = Parallelizer::new(16);
        // Enough calls for the site to run both modes.
        for _ in 0..4 {
            let out = p.map(&SITE, 1000, |i| i * 2);
            assert_eq!(out.len(), 1000);
            assert!(out.iter().enumerate().all(|(i, v)| *v == i * 2));
        }
        assert_eq!(p.chunk_size(12), 1);
        assert_eq!(p.chunk_size(5000), 70);
        assert_eq!(p.chunk_size(100), 7);
    }

    #[test]
    fn site_measures_both_modes_then_prefers_the_faster_and_keeps_exploring() {
        let site = ParallelSite::new();
        assert!(!site.use_pool(), "inline is measured first");
        site.record(false, Duration::from_micros(100), 100);
        assert!(site.use_pool(), "then the pool");
        site.record(true, Duration::from_micros(40), 100);
        let picks: Vec<bool> = (0..EXPLORE_EVERY * 2).map(|_| site.use_pool()).collect();
        assert_eq!(picks.iter().filter(|&&p| !p).count(), 2, "one inline run per {EXPLORE_EVERY} calls");
        // Inline becomes the faster: the preference follows after a few samples.
        for _ in 0..40 {
            site.record(true, Duration::from_micros(400), 100);
        }
        let picks: Vec<bool> = (0..EXPLORE_EVERY).map(|_| site.use_pool()).collect();
        assert_eq!(picks.iter().filter(|&&p| p).count(), 1);
    }

    #[test]
    fn one_outlier_does_not_flip_the_choice() {
        let site = ParallelSite::new();
        site.record(false, Duration::from_micros(100), 100);
        site.record(true, Duration::from_micros(50), 100);
        site.record(true, Duration::from_millis(50), 100);
        assert!(site.pooled_ps.load(Relaxed) < site.inline_ps.load(Relaxed));
    }

    #[test]
    fn for_each_chunk_covers_every_chunk_in_either_mode() {
        static SITE: ParallelSite = ParallelSite::new();
        let p = Parallelizer::new(2);
        for _ in 0..4 {
            let mut out = vec![0usize; 103];
            p.for_each_chunk(&SITE, &mut out, 10, |k, c| c.iter_mut().for_each(|v| *v = k + 1));
            assert!(out.iter().enumerate().all(|(i, v)| *v == i / 10 + 1), "{out:?}");
        }
    }
}
