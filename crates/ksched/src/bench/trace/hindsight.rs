//! Hindsight packing: what an offline packer that knows every arrived pod in advance allocates,
//! as a reference for the online profiles (`ksched bench --mode trace --hindsight`).
//!
//! The trace replay measures how much of the cluster's GPU capacity a scheduler has allocated
//! when the arrived GPU demand reaches a point (100%, 130%). An online scheduler places each
//! pod as it comes and never moves it; the packer here takes the same arrived pods all at once,
//! largest first, and places each where it leaves the least room. It is not an optimum (bin
//! packing is NP-hard) and not an upper bound, but it is an allocation some placement of the
//! same pods reaches: a profile close to it has little left to win on that trace, and a wide gap
//! says the regime is not at its limit.
//!
//! The model is the trace's: a node has cpu, memory and GPUs of one model, each GPU 1000
//! milli-GPUs; a pod asks for cpu, memory and `num_gpu` GPUs with `gpu_milli` free each, on
//! a node of an accepted model. Cpu-only pods are left out: packed after the GPU pods they
//! could not displace one, and the measure counts only GPUs.

use std::cmp::Reverse;

use super::csv::{TraceNode, TracePod, GPU_MILLI};

/// A node's free resources while packing.
#[derive(Debug, Clone)]
struct Free<'a> {
    model: &'a str,
    cpu: i64,
    memory: i64,
    /// Free milli-GPUs of each GPU.
    gpus: Vec<i64>,
}

impl Free<'_> {
    /// The GPUs `pod` would take here (the fullest that still have room for its share), or
    /// `None` when it does not fit.
    fn fit(&self, pod: &TracePod) -> Option<Vec<usize>> {
        if pod.cpu_milli > self.cpu || pod.memory_mib > self.memory {
            return None;
        }
        if !pod.gpu_spec.is_empty() && !pod.gpu_spec.iter().any(|m| m == self.model) {
            return None;
        }
        let mut with_room: Vec<usize> = (0..self.gpus.len()).filter(|&g| self.gpus[g] >= pod.gpu_milli).collect();
        if (with_room.len() as i64) < pod.num_gpu {
            return None;
        }
        with_room.sort_by_key(|&g| (self.gpus[g], g));
        with_room.truncate(pod.num_gpu as usize);
        Some(with_room)
    }
}

/// Milli-GPUs allocated when `pods` (GPU pods and cpu-only ones alike; the latter are skipped)
/// are packed onto `nodes`: largest GPU request first (whole GPUs before shares of the same
/// total, model-restricted pods before free ones, then larger cpu), each on the node whose
/// chosen GPUs are left with the least room, then the node with the least free GPU capacity,
/// then the least free cpu.
pub fn pack(nodes: &[TraceNode], pods: &[&TracePod]) -> i64 {
    let mut free: Vec<Free> = nodes
        .iter()
        .map(|n| Free {
            model: &n.model,
            cpu: n.cpu_milli,
            memory: n.memory_mib,
            gpus: vec![GPU_MILLI; n.gpus as usize],
        })
        .collect();
    let mut order: Vec<&TracePod> = pods.iter().copied().filter(|p| p.gpu_request_milli() > 0).collect();
    order.sort_by_key(|p| {
        (Reverse(p.gpu_request_milli()), Reverse(p.gpu_milli), p.gpu_spec.is_empty(), Reverse(p.cpu_milli))
    });
    let mut allocated = 0;
    for pod in order {
        let best = free
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let gpus = n.fit(pod)?;
                let left_on_chosen: i64 = gpus.iter().map(|&g| n.gpus[g] - pod.gpu_milli).sum();
                let left_on_node = n.gpus.iter().sum::<i64>() - pod.gpu_request_milli();
                Some(((left_on_chosen, left_on_node, n.cpu - pod.cpu_milli, i), gpus))
            })
            .min_by_key(|(key, _)| *key);
        let Some(((.., i), gpus)) = best else { continue };
        let n = &mut free[i];
        n.cpu -= pod.cpu_milli;
        n.memory -= pod.memory_mib;
        for g in gpus {
            n.gpus[g] -= pod.gpu_milli;
        }
        allocated += pod.gpu_request_milli();
    }
    allocated
}

/// The packer's allocation (% of `capacity_milli`) at each arrived point, over the pods that
/// arrived by then ([`super::arrivals::prefixes`]; `None` where the sequence never gets there).
pub fn at_points(
    nodes: &[TraceNode],
    pods: &[TracePod],
    sequence: &[usize],
    capacity_milli: i64,
    points: &[f64],
) -> Vec<Option<f64>> {
    super::arrivals::prefixes(pods, sequence, capacity_milli, points)
        .into_iter()
        .map(|prefix| Some(pack(nodes, &prefix?) as f64 * 100.0 / capacity_milli as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, gpus: i64, model: &str) -> TraceNode {
        TraceNode { name: name.into(), cpu_milli: 32_000, memory_mib: 262_144, gpus, model: model.into() }
    }

    fn pod(name: &str, num_gpu: i64, gpu_milli: i64, spec: &[&str]) -> TracePod {
        TracePod::with_requests(name, 1000, 1024, num_gpu, gpu_milli, spec)
    }

    #[test]
    fn largest_first_fits_what_arrival_order_would_strand() {
        // Two one-GPU nodes. In arrival order, the two 0.3 shares go together on one GPU (the
        // least room left) and the second 0.7 finds no GPU with room: 1.3 GPUs placed. Packed
        // largest first, each 0.7 takes a GPU and the 0.3s fill both: everything fits.
        let nodes = [node("a", 1, "V100"), node("b", 1, "V100")];
        let pods = [pod("s1", 1, 300, &[]), pod("s2", 1, 300, &[]), pod("l1", 1, 700, &[]), pod("l2", 1, 700, &[])];
        let refs: Vec<&TracePod> = pods.iter().collect();
        assert_eq!(pack(&nodes, &refs), 2000);
        // Whole GPUs go to the node they fill, leaving the two-GPU node for the two-GPU pod.
        let nodes = [node("two", 2, "V100"), node("one", 1, "V100")];
        let pods = [pod("w", 1, 1000, &[]), pod("ww", 2, 1000, &[])];
        let refs: Vec<&TracePod> = pods.iter().collect();
        assert_eq!(pack(&nodes, &refs), 3000);
    }

    #[test]
    fn models_cpu_and_whole_gpus_are_respected() {
        let nodes = [node("a", 1, "T4"), node("b", 1, "V100")];
        // Two pods that only run on T4: one fits, the other does not, although b is free.
        let pods = [pod("t1", 1, 1000, &["T4"]), pod("t2", 1, 1000, &["T4"])];
        let refs: Vec<&TracePod> = pods.iter().collect();
        assert_eq!(pack(&nodes, &refs), 1000);
        // A pod asking for more cpu than any node has does not fit.
        let mut big = pod("big", 1, 100, &[]);
        big.cpu_milli = 64_000;
        assert_eq!(pack(&nodes, &[&big]), 0);
        // Cpu-only pods are not counted.
        assert_eq!(pack(&nodes, &[&pod("cpu", 0, 0, &[])]), 0);
    }

    #[test]
    fn points_take_the_prefix_that_reaches_them() {
        let nodes = [node("a", 2, "V100")];
        let pods = [pod("w1", 1, 1000, &[]), pod("w2", 1, 1000, &[]), pod("w3", 1, 1000, &[])];
        let got = at_points(&nodes, &pods, &[0, 1, 2], 2000, &[50.0, 100.0, 150.0, 200.0]);
        assert_eq!(got, [Some(50.0), Some(100.0), Some(100.0), None]);
    }
}
