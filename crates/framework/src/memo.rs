//! Reuse of Filter and Score results for nodes that have not changed since a pod with the same
//! signature was last evaluated on them.
//!
//! The scheduling cycle walks hundreds to thousands of nodes per pod (upstream's adaptive
//! `percentageOfNodesToScore` asks for 1,500 feasible nodes at 30,000), and between two visits of
//! a node by identical pods only the few nodes that received a pod in between have changed. For
//! node-local plugins ([`crate::interface::MemoPlugin`]: their Filter and raw Score are a function
//! of the pod inputs they write, the node's `NodeInfo`, the number of nodes and the shared image
//! summaries), an unchanged node would get exactly the same outcome, so the walk takes it from
//! here instead of running the plugins.
//!
//! The key is not upstream's batching signature ([`crate::batch`]), which is loose on purpose
//! (upstream re-runs the filters on the node it hints): each plugin writes exactly what it reads
//! of the pod and of its own cycle state, in the form it reads it, so two cycles under one key
//! run the plugins on the same inputs. A plugin that cannot write an input exactly keeps the
//! cycle off the memo. `schedule_one::memo_check` schedules random clusters with and without the
//! memo and compares every decision.
//!
//! A node is "unchanged" when the snapshot still holds the very `NodeInfo` allocation the result
//! was computed on: a changed node is always a new allocation (the cache and the snapshot copy on
//! write), and a slot keeps a `Weak` to the allocation so that its address cannot be reused while
//! the slot refers to it. The `Weak` does not keep the node's pods alive.
//!
//! Only feasible nodes are kept: a node a filter rejected is evaluated again, which keeps its
//! status (and the FailedScheduling message) exactly what the plugins say. Raw scores are kept
//! before normalization, which still runs over the cycle's whole feasible list.

use std::sync::{Arc, Weak};

use crate::batch::FragmentWriter;
use crate::node_info::NodeInfo;
use crate::pod::Pod;
use crate::resource::Resource;

/// Writes the pod's tolerations as listed, every field (TaintToleration and NodeUnschedulable
/// read them).
pub fn write_tolerations(pod: &Pod, w: &mut FragmentWriter<'_>) {
    let list = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    w.count(list.len());
    for t in list {
        w.go_str(t.key.as_deref());
        w.go_str(t.operator.as_deref());
        w.go_str(t.value.as_deref());
        w.go_str(t.effect.as_deref());
        w.opt_i64(t.toleration_seconds);
    }
}

/// Writes a resource vector, every field.
pub fn write_resource(r: &Resource, w: &mut FragmentWriter<'_>) {
    crate::batch::signature::resources(r, w);
}

/// Writes a list of per-resource amounts (as the resource-scoring plugins compute them).
pub fn write_amounts(amounts: &[i64], w: &mut FragmentWriter<'_>) {
    w.count(amounts.len());
    amounts.iter().for_each(|v| w.i64(*v));
}

/// What a cycle's reusable results depend on besides the node: the node-local plugins' inputs
/// from the pod and the cycle state, which Filter plugins ran, the number of nodes (ImageLocality
/// weighs by it), and the image summaries' epoch (their cluster-wide counts change in place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoKey {
    /// Each node-local plugin's name and [`crate::interface::MemoPlugin::memo_inputs`].
    pub inputs: Arc<[u8]>,
    /// Bit `i`: the profile's `i`th Filter plugin ran this cycle.
    pub filters: u64,
    /// Nodes in the cycle's snapshot.
    pub num_nodes: usize,
    /// [`crate::node_info::image_epoch`] when the cycle started.
    pub image_epoch: u64,
}

/// Most raw scores a slot keeps: the default profile has six node-local Score plugins.
pub const MAX_KEPT_SCORES: usize = 6;

/// One node's kept results, in one cache line: the filter walk checks the slot, and Score then
/// finds the node's scores already in cache (two arrays were two cold streams at 30,000 nodes).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot {
    /// The `NodeInfo` the results are for (dangling when the slot is empty).
    node: Weak<NodeInfo>,
    /// Whether `scores` holds this node's raw scores for the memo's score set.
    scored: bool,
    scores: [i64; MAX_KEPT_SCORES],
}

/// Per-node results under one key, by snapshot index (a profile keeps a few, see
/// [`EvaluationMemos`]; the module docs say when they hold). Pure: the caller decides when a
/// cycle may use it.
#[derive(Debug, Default)]
pub struct EvaluationMemo {
    key: Option<MemoKey>,
    slots: Vec<Slot>,
    /// Bit `i`: the profile's `i`th Score plugin is among the kept raw scores.
    score_set: u64,
    /// Raw scores kept per slot (the plugins of the score set, in profile order); 0 when the
    /// set has more than [`MAX_KEPT_SCORES`].
    stride: usize,
}

impl EvaluationMemo {
    /// Starts a cycle under `key` (one slot per node of its snapshot): the kept results stay only
    /// if they were made under the same key.
    pub fn begin(&mut self, key: MemoKey) {
        if self.key.as_ref() == Some(&key) {
            return;
        }
        self.slots.clear();
        self.slots.resize_with(key.num_nodes, Slot::default);
        self.score_set = 0;
        self.stride = 0;
        self.key = Some(key);
    }

    /// True when `node`, at snapshot index `i`, passed every filter under the current key.
    #[inline]
    pub fn feasible(&self, i: usize, node: &Arc<NodeInfo>) -> bool {
        self.slots.get(i).is_some_and(|s| std::ptr::eq(s.node.as_ptr(), Arc::as_ptr(node)))
    }

    /// Records that `node`, at index `i`, passed every filter under the current key.
    pub fn record_feasible(&mut self, i: usize, node: &Arc<NodeInfo>) {
        let Some(slot) = self.slots.get_mut(i) else { return };
        if !std::ptr::eq(slot.node.as_ptr(), Arc::as_ptr(node)) {
            slot.node = Arc::downgrade(node);
            slot.scored = false;
        }
    }

    /// Starts scoring with the Score plugins in `set` (`count` of them): kept scores of another
    /// set are dropped. Nothing is kept for more than [`MAX_KEPT_SCORES`] plugins.
    pub fn begin_scores(&mut self, set: u64, count: usize) {
        let stride = if count <= MAX_KEPT_SCORES { count } else { 0 };
        if self.score_set == set && self.stride == stride {
            return;
        }
        self.score_set = set;
        self.stride = stride;
        self.slots.iter_mut().for_each(|s| s.scored = false);
    }

    /// The kept raw scores of `node` at index `i` (one per plugin of the score set), if any.
    #[inline]
    pub fn scores(&self, i: usize, node: &NodeInfo) -> Option<&[i64]> {
        let slot = self.slots.get(i)?;
        (slot.scored && std::ptr::eq(slot.node.as_ptr(), node)).then(|| &slot.scores[..self.stride])
    }

    /// Keeps the raw scores of `node` at index `i`, if the slot is that node's (it passed the
    /// filters under the current key).
    pub fn record_scores(&mut self, i: usize, node: &NodeInfo, scores: impl IntoIterator<Item = i64>) {
        let Some(slot) = self.slots.get_mut(i) else { return };
        if self.stride == 0 || !std::ptr::eq(slot.node.as_ptr(), node) {
            return;
        }
        let mut n = 0;
        for (dst, v) in slot.scores[..self.stride].iter_mut().zip(scores) {
            *dst = v;
            n += 1;
        }
        slot.scored = n == self.stride;
    }
}

/// How many signatures a profile keeps results for: a queue usually interleaves the pods of a
/// few workloads, and one memo would start over at every change of signature.
pub const MEMOS_PER_PROFILE: usize = 4;

/// The memos of one profile, the most recently used first.
#[derive(Debug, Default)]
pub struct EvaluationMemos(Vec<EvaluationMemo>);

impl EvaluationMemos {
    /// The memo for `key`, started for a cycle (see [`EvaluationMemo::begin`]): the one kept for
    /// it, or else the least recently used one (or a new one), started over.
    pub fn for_key(&mut self, key: &MemoKey) -> &mut EvaluationMemo {
        let i = match self.0.iter().position(|m| m.key.as_ref() == Some(key)) {
            Some(i) => i,
            None if self.0.len() < MEMOS_PER_PROFILE => {
                self.0.push(EvaluationMemo::default());
                self.0.len() - 1
            }
            None => self.0.len() - 1,
        };
        self.0[..=i].rotate_right(1);
        let m = &mut self.0[0];
        m.begin(key.clone());
        m
    }

    /// The memo kept for `key`, if any (not started over).
    pub fn get(&mut self, key: &MemoKey) -> Option<&mut EvaluationMemo> {
        self.0.iter_mut().find(|m| m.key.as_ref() == Some(key))
    }

    /// Drops every memo.
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sig: &[u8], num_nodes: usize) -> MemoKey {
        MemoKey { inputs: sig.into(), filters: 0b11, num_nodes, image_epoch: 0 }
    }

    fn nodes(n: usize) -> Vec<Arc<NodeInfo>> {
        (0..n).map(|_| Arc::new(NodeInfo::default())).collect()
    }

    #[test]
    fn a_result_holds_for_the_same_allocation_under_the_same_key_only() {
        let list = nodes(3);
        let mut m = EvaluationMemo::default();
        m.begin(key(b"a", 3));
        m.record_feasible(1, &list[1]);
        assert!(m.feasible(1, &list[1]));
        assert!(!m.feasible(0, &list[0]), "never recorded");
        assert!(!m.feasible(1, &list[0]), "another node at the index");
        // The node changes: the snapshot holds a new allocation.
        let changed = Arc::new((*list[1]).clone());
        assert!(!m.feasible(1, &changed));
        m.begin(key(b"a", 3));
        assert!(m.feasible(1, &list[1]), "same key: kept");
        m.begin(key(b"b", 3));
        assert!(!m.feasible(1, &list[1]), "another signature: dropped");
        m.begin(key(b"a", 3));
        m.record_feasible(1, &list[1]);
        m.begin(key(b"a", 4));
        assert!(!m.feasible(1, &list[1]), "another node count: dropped");
    }

    #[test]
    fn a_dropped_node_is_not_mistaken_for_a_new_one() {
        let mut m = EvaluationMemo::default();
        m.begin(key(b"a", 1));
        let first = Arc::new(NodeInfo::default());
        m.record_feasible(0, &first);
        drop(first);
        // The slot's Weak keeps the allocation reserved: no new node can take its address.
        for _ in 0..64 {
            let other = Arc::new(NodeInfo::default());
            assert!(!m.feasible(0, &other));
        }
    }

    #[test]
    fn scores_are_kept_per_node_and_score_set() {
        let list = nodes(2);
        let mut m = EvaluationMemo::default();
        m.begin(key(b"a", 2));
        m.begin_scores(0b101, 2);
        m.record_scores(0, &list[0], [7, 8]);
        assert_eq!(m.scores(0, &list[0]), None, "not recorded feasible first");
        m.record_feasible(0, &list[0]);
        m.record_scores(0, &list[0], [7, 8]);
        assert_eq!(m.scores(0, &list[0]), Some(&[7, 8][..]));
        assert_eq!(m.scores(0, &list[1]), None);
        m.begin_scores(0b101, 2);
        assert_eq!(m.scores(0, &list[0]), Some(&[7, 8][..]), "same set: kept");
        m.begin_scores(0b111, 3);
        assert_eq!(m.scores(0, &list[0]), None, "another set: dropped");
        m.record_scores(0, &list[0], [1, 2, 3]);
        let changed = Arc::new((*list[0]).clone());
        m.record_feasible(0, &changed);
        assert_eq!(m.scores(0, &changed), None, "a changed node's scores are not carried over");
        m.record_scores(0, &changed, [4, 5, 6]);
        assert_eq!(m.scores(0, &changed), Some(&[4, 5, 6][..]));
        m.begin_scores(u64::MAX >> 1, MAX_KEPT_SCORES + 1);
        m.record_scores(0, &changed, 0..MAX_KEPT_SCORES as i64 + 1);
        assert_eq!(m.scores(0, &changed), None, "more plugins than a slot holds: nothing kept");
    }

    #[test]
    fn a_few_interleaved_signatures_keep_their_results() {
        let list = nodes(1);
        let mut memos = EvaluationMemos::default();
        let sigs: Vec<Vec<u8>> = (0..=MEMOS_PER_PROFILE as u8).map(|b| vec![b]).collect();
        for sig in &sigs[..MEMOS_PER_PROFILE] {
            memos.for_key(&key(sig, 1)).record_feasible(0, &list[0]);
        }
        for sig in &sigs[..MEMOS_PER_PROFILE] {
            assert!(memos.for_key(&key(sig, 1)).feasible(0, &list[0]), "{sig:?} kept");
        }
        // One signature more than kept: the least recently used (the first) goes.
        memos.for_key(&key(&sigs[MEMOS_PER_PROFILE], 1)).record_feasible(0, &list[0]);
        assert!(memos.get(&key(&sigs[0], 1)).is_none());
        assert!(memos.get(&key(&sigs[1], 1)).is_some_and(|m| m.feasible(0, &list[0])));
    }
}
