//! The FGD paper's arrival sequence: per seed, the pod list shuffled, then pods drawn at random
//! with replacement appended until the total GPU request reaches `inflate` times the cluster's
//! GPU capacity. The generator is written out here (SplitMix64) rather than taken from a crate,
//! so that a seed names the same sequence in every build and version of this tool.

use super::csv::TracePod;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for shuffling.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`), without modulo bias (Lemire's method).
    pub fn below(&mut self, n: usize) -> usize {
        let n64 = n as u64;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n64);
            let low = m as u64;
            if low >= n64 || low >= n64.wrapping_neg() % n64 {
                return (m >> 64) as usize;
            }
        }
    }
}

/// The arrival order for `seed`: indices into `pods`. The shuffled list, cut at the pod whose
/// request makes the total reach the target when the list alone exceeds it, or extended by
/// draws with replacement until the total reaches it: the total crosses
/// `inflate * capacity_milli` exactly at the last pod.
pub fn sequence(pods: &[TracePod], capacity_milli: i64, inflate: f64, seed: u64) -> anyhow::Result<Vec<usize>> {
    anyhow::ensure!(!pods.is_empty(), "the trace has no pods");
    anyhow::ensure!(inflate.is_finite() && inflate > 0.0, "--inflate must be a positive number, got {inflate}");
    anyhow::ensure!(
        pods.iter().any(|p| p.gpu_request_milli() > 0),
        "no pod of the trace requests a GPU: the arrival sequence is measured in GPU demand"
    );
    let target = (inflate * capacity_milli as f64).ceil() as i64;
    let mut rng = SplitMix64::new(seed);
    let mut order: Vec<usize> = (0..pods.len()).collect();
    // Fisher–Yates.
    for i in (1..order.len()).rev() {
        let j = rng.below(i + 1);
        order.swap(i, j);
    }
    let mut total = 0i64;
    for (k, &i) in order.iter().enumerate() {
        total += pods[i].gpu_request_milli();
        if total >= target {
            order.truncate(k + 1);
            return Ok(order);
        }
    }
    while total < target {
        let i = rng.below(pods.len());
        total += pods[i].gpu_request_milli();
        order.push(i);
    }
    Ok(order)
}

/// For each arrived point, the pods of `sequence` up to the one whose arrival first brings the
/// GPU demand to the point, as the replay takes its measure (`None` where the sequence never
/// gets there).
pub fn prefixes<'a>(
    pods: &'a [TracePod],
    sequence: &[usize],
    capacity_milli: i64,
    points: &[f64],
) -> Vec<Option<Vec<&'a TracePod>>> {
    let cap = capacity_milli as f64;
    points
        .iter()
        .map(|pt| {
            let mut arrived = 0;
            let end = sequence.iter().position(|&i| {
                arrived += pods[i].gpu_request_milli();
                arrived as f64 >= pt / 100.0 * cap
            })?;
            Some(sequence[..=end].iter().map(|&i| &pods[i]).collect())
        })
        .collect()
}

/// Parses a seed list: `42`, `42-51`, `1,5,9` or a mix (`1,3-4`).
pub fn parse_seeds(spec: &str) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let num = |s: &str| {
            s.trim().parse::<u64>().map_err(|_| anyhow::anyhow!("--seeds {spec:?}: {s:?} is not a seed (a number)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                anyhow::ensure!(a <= b, "--seeds {spec:?}: the range {part} is empty");
                anyhow::ensure!(b - a < 100_000, "--seeds {spec:?}: the range {part} is too long");
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    anyhow::ensure!(!out.is_empty(), "--seeds {spec:?}: no seed");
    let mut seen = std::collections::HashSet::new();
    if let Some(d) = out.iter().find(|s| !seen.insert(**s)) {
        anyhow::bail!("--seeds {spec:?}: seed {d} appears twice");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(i: usize, num_gpu: i64, milli: i64) -> TracePod {
        TracePod::with_requests(&format!("p{i}"), 1000, 1024, num_gpu, milli, &[])
    }

    fn pods() -> Vec<TracePod> {
        (0..40)
            .map(|i| match i % 4 {
                0 => pod(i, 1, 1000),
                1 => pod(i, 1, 250 + i as i64),
                2 => pod(i, 0, 0),
                _ => pod(i, 2, 1000),
            })
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_sequence_and_others_differ() {
        let p = pods();
        // The list requests 32.69 GPUs: 1.3 x 30 needs draws beyond it.
        let a = sequence(&p, 30_000, 1.3, 42).unwrap();
        assert!(a.len() > p.len());
        assert_eq!(a, sequence(&p, 30_000, 1.3, 42).unwrap());
        let b = sequence(&p, 30_000, 1.3, 43).unwrap();
        assert_ne!(a, b);
        // Every original pod comes first, once, in shuffled order.
        let mut head = a[..p.len()].to_vec();
        assert_ne!(head, (0..p.len()).collect::<Vec<_>>(), "not shuffled");
        head.sort_unstable();
        assert_eq!(head, (0..p.len()).collect::<Vec<_>>());
    }

    #[test]
    fn the_total_request_crosses_the_target_exactly_at_the_last_pod() {
        let p = pods();
        let total: i64 = p.iter().map(TracePod::gpu_request_milli).sum();
        for (cap, inflate) in [(20_000, 1.3), (20_000, 2.0), (60_000, 0.5), (7_777, 1.0), (30_000, 0.01)] {
            for seed in 0..20 {
                let s = sequence(&p, cap, inflate, seed).unwrap();
                let target = (inflate * cap as f64).ceil() as i64;
                let sum: i64 = s.iter().map(|&i| p[i].gpu_request_milli()).sum();
                let last = p[*s.last().unwrap()].gpu_request_milli();
                assert!(sum >= target, "cap {cap} x{inflate} seed {seed}: {sum} < {target}");
                assert!(sum - last < target, "cap {cap} x{inflate} seed {seed}: reached before the last pod");
                if target > total {
                    assert!(s.len() > p.len(), "inflated beyond the list");
                }
            }
        }
    }

    // The values below were computed by an implementation written apart from this one (the
    // SplitMix64 and Lemire definitions, in Python). A change here changes every published
    // arrival sequence: it must be deliberate.

    #[test]
    fn the_generator_is_pinned() {
        let mut r = SplitMix64::new(42);
        assert_eq!(r.next_u64(), 0xbdd7_3226_2feb_6e95);
    }

    fn draws(seed: u64, n: usize) -> (Vec<usize>, SplitMix64) {
        let mut r = SplitMix64::new(seed);
        let d = (0..6).map(|_| r.below(n)).collect();
        (d, r)
    }

    /// How many 64-bit words the generator gave since `seed` (the state moves by a constant per word).
    fn words_used(seed: u64, r: &SplitMix64) -> u64 {
        let mut probe = SplitMix64::new(seed);
        (1..=64)
            .find(|_| {
                probe.next_u64();
                probe.0 == r.0
            })
            .unwrap_or(u64::MAX)
    }

    #[test]
    fn below_is_pinned_for_small_ranges() {
        for seed in [0, 7, 42] {
            let (d, r) = draws(seed, 1);
            assert_eq!(d, [0; 6], "seed {seed}");
            assert_eq!(words_used(seed, &r), 6, "n = 1 still draws one word per call");
        }
        assert_eq!(draws(0, 2).0, [1, 0, 0, 1, 0, 0]);
        assert_eq!(draws(7, 2).0, [0, 0, 1, 1, 0, 0]);
        assert_eq!(draws(0, 10).0, [8, 4, 0, 9, 1, 3]);
        assert_eq!(draws(7, 10).0, [3, 0, 9, 5, 4, 2]);
        assert_eq!(draws(42, 10).0, [7, 1, 2, 3, 0, 8]);
        assert_eq!(draws(7, 1000).0, [389, 16, 900, 582, 452, 249]);
        assert_eq!(draws(42, 1000).0, [741, 159, 278, 344, 38, 868]);
    }

    /// With n = 2^63 + 1 the multiply-shift method rejects a quarter of the words (those whose
    /// low product half falls below 2^64 mod n = 2^63 - 1), so these draws go through the
    /// rejection loop: seed 0 rejects 3 words in 6 draws, seed 7 five.
    #[test]
    fn below_is_pinned_near_2_pow_63_through_the_rejection_path() {
        let n = (1usize << 63) + 1;
        let (d, r) = draws(0, n);
        assert_eq!(
            d,
            [
                243_808_509_735_772_839,
                8_954_805_688_390_271_222,
                980_875_101_213_047_373,
                1_603_648_013_000_153_456,
                7_116_260_932_800_173_470,
                2_266_080_580_496_311_649
            ]
        );
        assert_eq!(words_used(0, &r), 9);
        let (d, r) = draws(7, n);
        assert_eq!(
            d,
            [
                3_595_544_800_446_187_243,
                8_308_050_873_407_804_673,
                2_300_599_727_732_774_152,
                1_238_314_238_945_538_992,
                3_810_556_812_210_252_212,
                955_171_922_480_135_541
            ]
        );
        assert_eq!(words_used(7, &r), 11);
        // Seed 0's first draw alone: two words rejected, the third accepted.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.below(n), 243_808_509_735_772_839);
        assert_eq!(words_used(0, &r), 3);
    }

    /// Six pods requesting 1000, 500, 0, 2000, 250 and 1000 milli (4750 in all).
    fn fixed_pods() -> Vec<TracePod> {
        [(1, 1000), (1, 500), (0, 0), (2, 1000), (1, 250), (1, 1000)]
            .iter()
            .enumerate()
            .map(|(i, &(n, m))| pod(i, n, m))
            .collect()
    }

    #[test]
    fn a_short_arrival_sequence_is_pinned() {
        let p = fixed_pods();
        // Target 6000: the shuffle (4750), then pod 5 (5750) and pod 1 (6250) drawn.
        assert_eq!(sequence(&p, 4000, 1.5, 42).unwrap(), [2, 5, 3, 1, 0, 4, 5, 1]);
        assert_eq!(sequence(&p, 4000, 1.5, 7).unwrap(), [5, 4, 1, 3, 0, 2, 1, 2, 1, 0]);
        // Target 2000: the shuffled list cut at pod 3 (0 + 1000 + 2000).
        assert_eq!(sequence(&p, 4000, 0.5, 42).unwrap(), [2, 5, 3]);
    }

    #[test]
    fn seed_lists_parse() {
        assert_eq!(parse_seeds("42-51").unwrap(), (42..=51).collect::<Vec<_>>());
        assert_eq!(parse_seeds("1, 3-4,9").unwrap(), vec![1, 3, 4, 9]);
        assert!(parse_seeds("5-3").is_err());
        assert!(parse_seeds("x").is_err());
        assert!(parse_seeds("1,1").is_err());
    }

    #[test]
    fn a_trace_without_gpu_demand_is_refused() {
        let p = vec![pod(0, 0, 0)];
        assert!(sequence(&p, 1000, 1.3, 1).is_err());
    }
}
