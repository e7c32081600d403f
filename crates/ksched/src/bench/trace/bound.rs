//! An upper bound on the GPU allocation (`ksched bench --mode trace --bound`): no placement of
//! a seed's arrived pods, online or offline, allocates more.
//!
//! The hindsight packing ([`super::hindsight`]) is an allocation some placement reaches, so it
//! says nothing about what is left above a profile. This is the other side: the
//! configuration linear program of bin packing (Gilmore and Gomory) over the cluster's GPUs.
//! A *configuration* is a multiset of share sizes that fit one GPU together (an 810 and a 160;
//! two 470s); a GPU holds one configuration or serves a pod asking whole GPUs. The program
//! chooses how many GPUs hold each configuration and how many whole-GPU pods of each size are
//! placed, at most as many of each as arrived, at most as many GPUs as the cluster has, and a
//! pod asking `n` whole GPUs only on the GPUs of nodes that have `n`, and maximises the
//! milli-GPUs placed. Every placement is a solution of it, so its optimum bounds them all.
//!
//! It leaves out, and so stays a bound but a loose one where they bind: cpu and memory (a
//! node's cores can run out before its GPUs: the main loss on the trace's 8-GPU nodes), GPU
//! models (`gpu_spec`), which GPUs of one node a multi-GPU pod takes, and that a pod with
//! several shares puts them on different GPUs. On the Alibaba traces it is tight on the
//! slivers that shares leave (an 810 share strands 190 that only the rare 110 and 160 shares
//! can use) and loose on everything else.

use std::collections::BTreeMap;

use microlp::{ComparisonOp, OptimizationDirection, Problem};

use super::csv::{TraceNode, TracePod, GPU_MILLI};

/// Configurations enumerated at most; above it (a trace with many distinct share sizes) the
/// bound is not computed.
pub const MAX_CONFIGURATIONS: usize = 50_000;

/// Milli-GPUs no placement of `pods` on `nodes` exceeds (see the module docs); `None` when
/// the pods' share sizes make more than [`MAX_CONFIGURATIONS`] configurations.
pub fn upper_bound(nodes: &[TraceNode], pods: &[&TracePod]) -> anyhow::Result<Option<f64>> {
    // Share items by size (a pod with shares of several GPUs gives one item per GPU) and
    // whole-GPU pods by their number of GPUs.
    let mut shares: BTreeMap<i64, i64> = BTreeMap::new();
    let mut whole: BTreeMap<i64, i64> = BTreeMap::new();
    for p in pods.iter().filter(|p| p.gpu_request_milli() > 0) {
        if p.gpu_milli >= GPU_MILLI {
            *whole.entry(p.num_gpu).or_default() += 1;
        } else {
            *shares.entry(p.gpu_milli).or_default() += p.num_gpu;
        }
    }
    let sizes: Vec<(i64, i64)> = shares.into_iter().rev().collect();
    let Some(configurations) = configurations(&sizes) else {
        return Ok(None);
    };
    let gpus: i64 = nodes.iter().map(|n| n.gpus).sum();
    let mut lp = Problem::new(OptimizationDirection::Maximize);
    let held: Vec<_> = configurations
        .iter()
        .map(|c| {
            let milli: i64 = c.iter().zip(&sizes).map(|(k, (size, _))| k * size).sum();
            lp.add_var(milli as f64, (0.0, f64::INFINITY))
        })
        .collect();
    let placed: Vec<(i64, _)> =
        whole.iter().map(|(&n, &count)| (n, lp.add_var((n * GPU_MILLI) as f64, (0.0, count as f64)))).collect();
    // At most every GPU used once: by a configuration or by a whole-GPU pod.
    let mut used: Vec<_> = held.iter().map(|&v| (v, 1.0)).collect();
    used.extend(placed.iter().map(|&(n, v)| (v, n as f64)));
    lp.add_constraint(&used, ComparisonOp::Le, gpus as f64);
    // At most the share items that arrived, size by size.
    for (s, (_, count)) in sizes.iter().enumerate() {
        let row: Vec<_> =
            configurations.iter().zip(&held).filter(|(c, _)| c[s] > 0).map(|(c, &v)| (v, c[s] as f64)).collect();
        lp.add_constraint(&row, ComparisonOp::Le, *count as f64);
    }
    // Pods asking `n` or more whole GPUs only on the GPUs of nodes that have `n`.
    for &(n, _) in placed.iter().filter(|(n, _)| *n > 1) {
        let row: Vec<_> = placed.iter().filter(|(m, _)| *m >= n).map(|&(m, v)| (v, m as f64)).collect();
        let room: i64 = nodes.iter().filter(|node| node.gpus >= n).map(|node| node.gpus).sum();
        lp.add_constraint(&row, ComparisonOp::Le, room as f64);
    }
    let solution = lp.solve().map_err(|e| anyhow::anyhow!("the bound's linear program: {e}"))?;
    Ok(Some(solution.objective()))
}

/// Every multiset of the share sizes (largest first, each with the items that arrived) that
/// fits one GPU, as counts per size; `None` past [`MAX_CONFIGURATIONS`].
fn configurations(sizes: &[(i64, i64)]) -> Option<Vec<Vec<i64>>> {
    fn extend(sizes: &[(i64, i64)], s: usize, room: i64, current: &mut Vec<i64>, out: &mut Vec<Vec<i64>>) -> bool {
        if s == sizes.len() {
            if current.iter().any(|&k| k > 0) {
                if out.len() == MAX_CONFIGURATIONS {
                    return false;
                }
                out.push(current.clone());
            }
            return true;
        }
        let (size, count) = sizes[s];
        let most = (room / size).min(count);
        for k in 0..=most {
            current.push(k);
            let ok = extend(sizes, s + 1, room - k * size, current, out);
            current.pop();
            if !ok {
                return false;
            }
        }
        true
    }
    let mut out = Vec::new();
    extend(sizes, 0, GPU_MILLI, &mut Vec::new(), &mut out).then_some(out)
}

/// The bound (% of `capacity_milli`) at each arrived point, over the pods of `sequence` up to
/// the one whose arrival first brings the GPU demand to the point (`None` where the sequence
/// never gets there or the bound is not computed).
pub fn at_points(
    nodes: &[TraceNode],
    pods: &[TracePod],
    sequence: &[usize],
    capacity_milli: i64,
    points: &[f64],
) -> anyhow::Result<Vec<Option<f64>>> {
    let cap = capacity_milli as f64;
    super::arrivals::prefixes(pods, sequence, capacity_milli, points)
        .into_iter()
        .map(|prefix| {
            let Some(prefix) = prefix else { return Ok(None) };
            Ok(upper_bound(nodes, &prefix)?.map(|milli| milli * 100.0 / cap))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::trace::arrivals::SplitMix64;

    fn node(gpus: i64) -> TraceNode {
        TraceNode { name: format!("n{gpus}"), cpu_milli: 64_000, memory_mib: 262_144, gpus, model: "V100".into() }
    }

    fn pod(num_gpu: i64, gpu_milli: i64) -> TracePod {
        TracePod::with_requests("p", 1000, 1024, num_gpu, gpu_milli, &[])
    }

    fn bound(nodes: &[TraceNode], pods: &[TracePod]) -> f64 {
        let refs: Vec<&TracePod> = pods.iter().collect();
        upper_bound(nodes, &refs).unwrap().unwrap()
    }

    #[test]
    fn slivers_only_the_small_shares_can_fill_are_lost() {
        // Three 810s and one 160 on two GPUs: one GPU takes an 810 and the 160, the other an
        // 810; the third 810 has no GPU. 1780 of 2000, whatever the order.
        let pods = [pod(1, 810), pod(1, 810), pod(1, 810), pod(1, 160)];
        assert!((bound(&[node(2)], &pods) - 1780.0).abs() < 1e-6);
        // Two 470s share a GPU; a whole-GPU pod takes the other.
        let pods = [pod(1, 470), pod(1, 470), pod(1, 1000)];
        assert!((bound(&[node(2)], &pods) - 1940.0).abs() < 1e-6);
    }

    #[test]
    fn multi_gpu_pods_need_nodes_that_have_their_gpus() {
        // Four 2-GPU nodes: an 8-GPU pod fits nowhere, 2-GPU pods everywhere.
        let nodes = [node(2), node(2), node(2), node(2)];
        assert_eq!(bound(&nodes, &[pod(8, 1000)]), 0.0);
        assert!((bound(&nodes, &[pod(8, 1000), pod(2, 1000), pod(2, 1000)]) - 4000.0).abs() < 1e-6);
    }

    #[test]
    fn no_packing_exceeds_it() {
        // Random pods of the trace's share sizes and whole-GPU counts on a small mixed cluster:
        // the offline packer's allocation (a placement) never exceeds the bound.
        let sizes = [810, 470, 320, 650, 230, 460, 160, 110, 1000, 1000, 1000];
        let nodes = [node(8), node(4), node(2), node(2), node(1)];
        let mut rng = SplitMix64::new(7);
        for _ in 0..50 {
            let n = 5 + rng.below(25);
            let pods: Vec<TracePod> = (0..n)
                .map(|_| {
                    let milli = sizes[rng.below(sizes.len())];
                    let gpus = if milli == 1000 { [1, 1, 2, 4, 8][rng.below(5)] } else { 1 };
                    pod(gpus, milli)
                })
                .collect();
            let refs: Vec<&TracePod> = pods.iter().collect();
            let packed = super::super::hindsight::pack(&nodes, &refs) as f64;
            let b = bound(&nodes, &pods);
            assert!(packed <= b + 1e-6, "packed {packed} above the bound {b}");
            assert!(b <= pods.iter().map(|p| p.gpu_request_milli()).sum::<i64>() as f64 + 1e-6);
        }
    }

    #[test]
    fn too_many_share_sizes_leave_it_uncomputed() {
        // 40 distinct small sizes: the multisets fitting one GPU are far more than the cap.
        let pods: Vec<TracePod> = (20..60).flat_map(|m| [pod(1, m), pod(1, m), pod(1, m)]).collect();
        let refs: Vec<&TracePod> = pods.iter().collect();
        assert_eq!(upper_bound(&[node(2)], &refs).unwrap(), None);
    }
}
