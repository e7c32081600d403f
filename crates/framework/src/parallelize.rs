//! Parallel evaluation of nodes, the counterpart of upstream's parallelizer.

use std::sync::Arc;

use rayon::prelude::*;

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

    /// Computes `f(i)` for i in 0..n, in parallel, returning results in index order.
    pub fn map<T, F>(&self, n: usize, f: F) -> Vec<T>
    where
        T: Send,
        F: Fn(usize) -> T + Sync + Send,
    {
        // Small inputs are cheaper to run inline than to hand to the pool.
        if n < 16 || self.pool.current_num_threads() == 1 {
            return (0..n).map(f).collect();
        }
        // A few chunks per thread balance uniform per-node work; more only add wake-ups.
        let threads = self.pool.current_num_threads();
        let min_len = self.chunk_size(n).max(n / (threads * 4) + 1);
        self.pool.install(|| (0..n).into_par_iter().with_min_len(min_len).map(f).collect())
    }

    /// Runs `f(k, chunk)` over `out.chunks_mut(chunk_len)` in parallel (the last chunk may be
    /// shorter); inline when there is a single chunk or a single thread.
    pub fn for_each_chunk<T, F>(&self, out: &mut [T], chunk_len: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync + Send,
    {
        let chunk_len = chunk_len.max(1);
        if out.len() <= chunk_len || self.pool.current_num_threads() == 1 {
            out.chunks_mut(chunk_len).enumerate().for_each(|(k, c)| f(k, c));
            return;
        }
        self.pool.install(|| out.par_chunks_mut(chunk_len).enumerate().for_each(|(k, c)| f(k, c)));
    }

    /// Fills `out` in parallel, `per_item` slots per item: `f(i, &mut out[i*per_item..][..per_item])`.
    /// Lets callers compute per-node rows without allocating one vector per node.
    pub fn fill<T, F>(&self, out: &mut [T], per_item: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync + Send,
    {
        let per_item = per_item.max(1);
        let n = out.len() / per_item;
        if n < 16 || self.pool.current_num_threads() == 1 {
            out.chunks_mut(per_item).enumerate().for_each(|(i, c)| f(i, c));
            return;
        }
        let threads = self.pool.current_num_threads();
        let min_len = self.chunk_size(n).max(n / (threads * 4) + 1);
        self.pool.install(|| out.par_chunks_mut(per_item).enumerate().with_min_len(min_len).for_each(|(i, c)| f(i, c)));
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
        let p = Parallelizer::new(16);
        let out = p.map(1000, |i| i * 2);
        assert_eq!(out.len(), 1000);
        assert!(out.iter().enumerate().all(|(i, v)| *v == i * 2));
        assert_eq!(p.chunk_size(12), 1);
        assert_eq!(p.chunk_size(5000), 70);
        assert_eq!(p.chunk_size(100), 7);
    }
}
