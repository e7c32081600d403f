//! Opportunistic batching (upstream `framework/runtime/batch.go`, KEP-5598, feature gate
//! OpportunisticBatching): consecutive pods with the same signature reuse the previous cycle's
//! filtering and scoring.
//!
//! After a cycle that scored several nodes, the remaining nodes stay cached in score order with
//! the pod's signature. The next cycle gets the best remaining node as a *hint* (evaluated like
//! a nominated node: if it passes the filters it is taken without scoring) when:
//! it is the very next scheduling cycle, its pod has the same signature, the cache is younger
//! than 500 ms, and the node chosen last time now *rejects* the pod. That last check is what
//! makes reuse sound: it only holds for pods placed one per node, where the previous winner
//! is out of the running and the runner-up keeps its rank. Otherwise the cache is flushed, with
//! the reason counted in `scheduler_batch_cache_flushed_total`.
//!
//! [`signature`] builds pod signatures from the plugins that implement
//! [`crate::interface::SignPlugin`]; [`OpportunisticBatch`] is the cache, pure and clocked by
//! its caller; the `Framework` methods at the end wire both to a profile.

pub mod signature;

use std::time::{Duration, Instant};

use crate::cycle_state::CycleState;
use crate::handle::ExtensionPoint;
use crate::pod_info::PodInfo;
use crate::runtime::Framework;
use crate::snapshot::Snapshot;
use crate::status::Code;

pub use signature::{FragmentWriter, PodSignature, SignatureBuilder};

/// Longest a cached node list is reused (upstream `maxBatchAge`).
pub const MAX_BATCH_AGE: Duration = Duration::from_millis(500);

/// The `result` of `scheduler_batch_attempts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchAttempt {
    /// The cycle got no hint.
    NoHint,
    /// The hinted node was chosen.
    HintUsed,
    /// A hint was given but another node was chosen.
    HintNotUsed,
}

impl BatchAttempt {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchAttempt::NoHint => "no_hint",
            BatchAttempt::HintUsed => "hint_used",
            BatchAttempt::HintNotUsed => "hint_not_used",
        }
    }
}

/// Why the cached nodes were dropped: the `reason` of `scheduler_batch_cache_flushed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushReason {
    /// The previous cycle did not succeed.
    PodFailed,
    /// Another cycle (another profile's pod, or a failed one) came in between.
    PodSkipped,
    /// The node chosen last time is gone.
    NodeMissing,
    /// The node chosen last time would still take the pod: pods are not one per node.
    NodeNotFull,
    /// The cycle left no other feasible node to cache.
    EmptyList,
    /// The cache is older than [`MAX_BATCH_AGE`].
    Expired,
    /// The pod's signature differs from the cached one (or it has none).
    PodIncompatible,
    /// The pod that produced the results has no signature.
    PodNotBatchable,
}

impl FlushReason {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushReason::PodFailed => "pod_failed",
            FlushReason::PodSkipped => "pod_skipped",
            FlushReason::NodeMissing => "node_missing",
            FlushReason::NodeNotFull => "node_not_full",
            FlushReason::EmptyList => "empty_list",
            FlushReason::Expired => "expired",
            FlushReason::PodIncompatible => "pod_incompatible",
            FlushReason::PodNotBatchable => "pod_not_batchable",
        }
    }
}

/// What the node chosen in the previous cycle says about the current pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastNode {
    /// The node is no longer in the snapshot.
    Missing,
    /// Its filters reject the pod (Unschedulable or UnschedulableAndUnresolvable).
    Rejects,
    /// Its filters accept the pod, or fail with an error.
    Accepts,
}

/// Where [`OpportunisticBatch`] reports attempts and flushes.
pub trait BatchRecorder {
    /// An attempt ended with `result`.
    fn attempt(&self, result: BatchAttempt);
    /// The cache was dropped for `reason`.
    fn flushed(&self, reason: FlushReason);
}

/// Nodes in descending score order, popped one at a time (upstream `SortedScoredNodes`).
///
/// A binary heap laid out and operated exactly as Go's `container/heap` with upstream's order
/// (higher total first, then higher random tie-breaker), so that the first pop is upstream's
/// `selectHost` choice and later pops are the hints upstream would give, ties included.
#[derive(Debug, Clone, Default)]
pub struct SortedScoredNodes<T = String> {
    heap: Vec<(i64, i64, T)>,
}

impl<T> SortedScoredNodes<T> {
    /// Heapifies `(total score, tie-breaker, node)` entries (Go's `heap.Init`).
    pub fn new(entries: Vec<(i64, i64, T)>) -> Self {
        let mut s = SortedScoredNodes { heap: entries };
        let n = s.heap.len();
        for i in (0..n / 2).rev() {
            s.down(i, n);
        }
        s
    }

    fn less(&self, i: usize, j: usize) -> bool {
        let (a, b) = (&self.heap[i], &self.heap[j]);
        a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
    }

    fn down(&mut self, i0: usize, n: usize) {
        let mut i = i0;
        loop {
            let j1 = 2 * i + 1;
            if j1 >= n {
                break;
            }
            let mut j = j1;
            if j1 + 1 < n && self.less(j1 + 1, j1) {
                j = j1 + 1;
            }
            if !self.less(j, i) {
                break;
            }
            self.heap.swap(i, j);
            i = j;
        }
    }

    /// The best remaining node (Go's `heap.Pop`).
    pub fn pop(&mut self) -> Option<T> {
        let n = self.heap.len().checked_sub(1)?;
        self.heap.swap(0, n);
        self.down(0, n);
        self.heap.pop().map(|(_, _, t)| t)
    }

    /// Nodes left.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when no node is left.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The same heap over other node handles (e.g. names for indices); the order is kept.
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> SortedScoredNodes<U> {
        SortedScoredNodes { heap: self.heap.into_iter().map(|(s, r, t)| (s, r, f(t))).collect() }
    }
}

/// The cached results of the last full cycle (upstream `batchState`).
#[derive(Debug)]
struct BatchState {
    signature: PodSignature,
    sorted_nodes: SortedScoredNodes,
    created: Instant,
}

/// The last cycle that stored results (upstream `schedulingCycle`).
#[derive(Debug, Default)]
struct LastCycle {
    cycle: u64,
    chosen_node: String,
    succeeded: bool,
}

/// One profile's batching cache (upstream `OpportunisticBatch`).
#[derive(Debug, Default)]
pub struct OpportunisticBatch {
    state: Option<BatchState>,
    last_cycle: LastCycle,
    batched_pods: u64,
}

impl OpportunisticBatch {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pods placed on their hint so far.
    pub fn batched_pods(&self) -> u64 {
        self.batched_pods
    }

    /// Nodes left in the cache.
    pub fn cached_nodes(&self) -> usize {
        self.state.as_ref().map_or(0, |s| s.sorted_nodes.len())
    }

    /// The hint for the pod of scheduling cycle `cycle` with `signature`, if the cache can be
    /// reused (see the module docs); `last_node` tells what the previous cycle's node says
    /// about this pod. Consumes the hint from the cache.
    pub fn get_node_hint(
        &mut self,
        signature: Option<&PodSignature>,
        cycle: u64,
        now: Instant,
        last_node: impl FnOnce(&str) -> LastNode,
        rec: &dyn BatchRecorder,
    ) -> Option<String> {
        if !self.compatible(signature, cycle, now, last_node, rec) {
            rec.attempt(BatchAttempt::NoHint);
            return None;
        }
        let state = self.state.as_mut()?;
        let hint = state.sorted_nodes.pop();
        tracing::debug!(
            v = 3,
            cycle,
            hint = hint.as_deref(),
            remaining = state.sorted_nodes.len(),
            "OpportunisticBatch provided node hint"
        );
        hint
    }

    fn compatible(
        &self,
        signature: Option<&PodSignature>,
        cycle: u64,
        now: Instant,
        last_node: impl FnOnce(&str) -> LastNode,
        rec: &dyn BatchRecorder,
    ) -> bool {
        let Some(state) = self.state.as_ref().filter(|s| !s.sorted_nodes.is_empty()) else { return false };
        let reason = if cycle != self.last_cycle.cycle + 1 {
            FlushReason::PodSkipped
        } else if !self.last_cycle.succeeded {
            FlushReason::PodFailed
        } else if signature != Some(&state.signature) {
            FlushReason::PodIncompatible
        } else if now > state.created + MAX_BATCH_AGE {
            FlushReason::Expired
        } else {
            match last_node(&self.last_cycle.chosen_node) {
                LastNode::Rejects => return true,
                LastNode::Missing => FlushReason::NodeMissing,
                // The pod could join the last one on its node, whose new score is unknown: the
                // old ranking says nothing about where the pod belongs now.
                LastNode::Accepts => FlushReason::NodeNotFull,
            }
        };
        // As upstream, the unusable state stays until the next store replaces it: it can never
        // pass these checks again, but each later attempt counts it again (as `pod_skipped`).
        Self::count_flush(cycle, reason, rec);
        false
    }

    fn count_flush(cycle: u64, reason: FlushReason, rec: &dyn BatchRecorder) {
        rec.flushed(reason);
        tracing::debug!(v = 4, cycle, reason = reason.as_str(), "OpportunisticBatch found unusable state");
    }

    /// Records the outcome of the successful cycle `cycle`: `chosen` was picked, `hinted` was
    /// the hint it got. When the hint was not used and the pod is signed, `remaining` nodes
    /// (built only then by `other_nodes`) become the new cache.
    #[allow(clippy::too_many_arguments)]
    pub fn store_schedule_results(
        &mut self,
        signature: Option<&PodSignature>,
        hinted: Option<&str>,
        chosen: &str,
        remaining: usize,
        other_nodes: impl FnOnce() -> SortedScoredNodes,
        cycle: u64,
        now: Instant,
        rec: &dyn BatchRecorder,
    ) {
        self.last_cycle.cycle = cycle;
        self.last_cycle.succeeded = true;
        self.last_cycle.chosen_node.clear();
        self.last_cycle.chosen_node.push_str(chosen);
        if hinted == Some(chosen) {
            rec.attempt(BatchAttempt::HintUsed);
            self.batched_pods += 1;
            return;
        }
        if hinted.is_some() {
            rec.attempt(BatchAttempt::HintNotUsed);
        }
        match signature {
            Some(sig) if remaining > 0 => {
                let sorted_nodes = other_nodes();
                tracing::debug!(v = 4, cycle, nodes = sorted_nodes.len(), "OpportunisticBatch set batch information");
                self.state = Some(BatchState { signature: sig.clone(), sorted_nodes, created: now });
            }
            _ => {
                let reason = if remaining == 0 { FlushReason::EmptyList } else { FlushReason::PodNotBatchable };
                Self::count_flush(cycle, reason, rec);
                self.state = None;
            }
        }
    }
}

/// Reports a profile's batching outcomes to the framework's metrics.
struct MetricsRecorder<'a>(&'a Framework);

impl BatchRecorder for MetricsRecorder<'_> {
    fn attempt(&self, result: BatchAttempt) {
        self.0.handle().metrics.batch_attempt(self.0.profile_name(), result);
    }
    fn flushed(&self, reason: FlushReason) {
        self.0.handle().metrics.batch_cache_flushed(self.0.profile_name(), reason);
    }
}

impl Framework {
    /// True when the profile batches (the OpportunisticBatching gate is on).
    pub fn batching(&self) -> bool {
        self.batch.is_some()
    }

    /// The pod's signature (upstream `frameworkImpl.SignPod`): `None` when batching is off, when
    /// the profile cannot sign (extenders, or a PreFilter/Filter/PreScore/Score plugin that does
    /// not implement Sign), or when a plugin refuses this pod.
    pub fn sign_pod(&self, pod: &PodInfo) -> Option<PodSignature> {
        self.batch.as_ref()?;
        let start = Instant::now();
        let sig = self.sign_with_plugins(pod);
        // Upstream reports Success whatever the plugins said.
        self.handle().metrics.extension_point_duration(
            self.profile_name(),
            ExtensionPoint::Sign,
            Code::Success,
            start.elapsed().as_secs_f64(),
        );
        sig
    }

    fn sign_with_plugins(&self, pod: &PodInfo) -> Option<PodSignature> {
        let signers = self.signers.as_ref()?;
        let mut b = SignatureBuilder::new();
        let scheduler_name = pod.pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
        b.fragment(signature::SCHEDULER_NAME, |w| w.go_str(scheduler_name));
        for p in signers {
            let signer = p.as_sign()?;
            let start = Instant::now();
            let s = signer.sign_pod(pod, &mut b);
            self.handle().metrics.plugin_duration(
                p.name(),
                ExtensionPoint::Sign,
                s.code(),
                start.elapsed().as_secs_f64(),
            );
            if !s.is_success() {
                if s.code() == Code::Error {
                    tracing::error!(plugin = p.name(), pod = %pod.key(), error = %s.message(), "SignPod failed for plugin");
                } else {
                    tracing::debug!(v = 5, plugin = p.name(), pod = %pod.key(), status = %s.message(), "SignPod can't sign pod due to plugin");
                }
                return None;
            }
        }
        Some(b.finish())
    }

    /// The node hint for the pod of scheduling cycle `cycle` (upstream `GetNodeHint`), after
    /// its PreFilter ran into `state`. `None` when batching is off or the cache cannot be used.
    pub fn get_node_hint(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        signature: Option<&PodSignature>,
        cycle: u64,
        snapshot: &Snapshot,
    ) -> Option<String> {
        let batch = self.batch.as_ref()?;
        let start = Instant::now();
        let last_node = |name: &str| match snapshot.get(name) {
            Err(_) => LastNode::Missing,
            Ok(node) => match self.run_filter_plugins(state, pod, node) {
                s if s.is_rejected() => LastNode::Rejects,
                _ => LastNode::Accepts,
            },
        };
        let hint = batch.lock().get_node_hint(signature, cycle, start, last_node, &MetricsRecorder(self));
        let m = &self.handle().metrics;
        m.get_node_hint_duration(self.profile_name(), hint.is_some(), start.elapsed().as_secs_f64());
        hint
    }

    /// Records a successful cycle's choice (upstream `StoreScheduleResults`); see
    /// [`OpportunisticBatch::store_schedule_results`]. No-op when batching is off.
    #[allow(clippy::too_many_arguments)]
    pub fn store_schedule_results(
        &self,
        signature: Option<&PodSignature>,
        hinted: Option<&str>,
        chosen: &str,
        remaining: usize,
        other_nodes: impl FnOnce() -> SortedScoredNodes,
        cycle: u64,
    ) {
        let Some(batch) = self.batch.as_ref() else { return };
        let start = Instant::now();
        let rec = MetricsRecorder(self);
        batch.lock().store_schedule_results(signature, hinted, chosen, remaining, other_nodes, cycle, start, &rec);
        self.handle().metrics.store_schedule_results_duration(self.profile_name(), start.elapsed().as_secs_f64());
    }

    /// Pods this profile placed on their hint (for tests and benchmarks).
    pub fn batched_pods(&self) -> u64 {
        self.batch.as_ref().map_or(0, |b| b.lock().batched_pods())
    }
}

#[cfg(test)]
mod tests;
