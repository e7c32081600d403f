use super::*;

const ALL: u64 = u64::MAX;
const CORE: i64 = 1000;

fn gpus(free: &[i64]) -> Vec<Device> {
    free.iter().map(|&f| Device { capacity: 1000, free: f, classes: ALL }).collect()
}

fn node(cpu_cores: i64, free: &[i64]) -> NodeState {
    NodeState { milli_cpu: Some(cpu_cores * CORE), memory: None, devices: gpus(free), counters: None }
}

fn share(milli: i64, cpu_cores: i64) -> Shape {
    Shape { milli_cpu: cpu_cores * CORE, memory: 0, demand: Demand::Share(milli), class: 0 }
}

fn whole(n: u32, cpu_cores: i64) -> Shape {
    Shape { milli_cpu: cpu_cores * CORE, memory: 0, demand: Demand::Whole(n), class: 0 }
}

fn cpu_only(cpu_cores: i64) -> Shape {
    Shape { milli_cpu: cpu_cores * CORE, memory: 0, demand: Demand::None, class: 0 }
}

/// The loss of placing `pod` on `n` the way the allocator would.
fn placement_loss(n: &NodeState, pod: &Shape, mix: &[(Shape, f64)]) -> f64 {
    let devices = chosen_devices(n, pod).expect("the pod fits");
    loss(n, &after(n, pod, &devices), mix)
}

#[test]
fn shares_count_whole_copies_per_device_bounded_by_cpu() {
    let n = node(100, &[1000, 600, 190]);
    // 2 copies on the fresh GPU, 1 on the 600, none on the 190 sliver.
    assert_eq!(usable(&n, &share(470, 1)), 3 * 470);
    // 10 cores hold 2 copies of a 4-core shape.
    assert_eq!(usable(&node(10, &[1000, 600, 190]), &share(470, 4)), 2 * 470);
    assert_eq!(usable(&node(3, &[1000]), &share(470, 4)), 0, "no cpu for one copy");
    assert_eq!(usable(&n, &share(1001, 1)), 0);
    assert_eq!(usable(&n, &cpu_only(1)), 0, "a pod without devices uses no device capacity");
    // Memory bounds copies too when it is counted.
    let mut m = n.clone();
    m.memory = Some(5);
    assert_eq!(usable(&m, &Shape { memory: 2, ..share(470, 1) }), 2 * 470);
}

#[test]
fn whole_devices_are_usable_when_one_copy_fits() {
    let n = node(100, &[1000, 1000, 1000, 500]);
    assert_eq!(usable(&n, &whole(1, 1)), 3000);
    // Three wholly free GPUs hold one 2-GPU copy; the third stays usable (other shapes take it).
    assert_eq!(usable(&n, &whole(2, 1)), 3000);
    assert_eq!(usable(&n, &whole(4, 1)), 0, "the half-used GPU is not whole");
    assert_eq!(usable(&node(1, &[1000, 1000]), &whole(1, 2)), 0, "one core cannot host a 2-core copy");
}

#[test]
fn eligibility_classes_limit_the_devices_a_shape_counts() {
    let n = NodeState {
        milli_cpu: None,
        memory: None,
        devices: vec![
            Device { capacity: 1000, free: 1000, classes: 0b01 },
            Device { capacity: 1000, free: 1000, classes: 0b11 },
        ],
        counters: None,
    };
    let s1 = Shape { class: 1, ..share(500, 0) };
    assert_eq!(usable(&n, &s1), 1000, "class 1 accepts the second GPU only");
    assert_eq!(chosen_devices(&n, &s1), Some(vec![1]));
    assert_eq!(usable(&n, &share(500, 0)), 2000);
}

#[test]
fn shares_go_to_the_tightest_device_and_whole_devices_in_listed_order() {
    let n = node(100, &[1000, 600, 190, 480]);
    assert_eq!(chosen_devices(&n, &share(470, 1)), Some(vec![3]), "480 leaves 10");
    assert_eq!(chosen_devices(&n, &share(200, 1)), Some(vec![3]), "480 leaves 280 < 400");
    assert_eq!(chosen_devices(&n, &share(1000, 1)), Some(vec![0]));
    assert_eq!(chosen_devices(&n, &share(1001, 1)), None);
    assert_eq!(chosen_devices(&node(1, &[1000, 0, 1000]), &whole(2, 1)), Some(vec![0, 2]));
    assert_eq!(chosen_devices(&n, &whole(2, 1)), None);
    let a = after(&n, &share(470, 1), &[3]);
    assert_eq!(a.devices[3].free, 10);
    assert_eq!(a.milli_cpu, Some(99 * CORE));
    assert_eq!(after(&n, &whole(1, 1), &[0]).devices[0].free, 0);
}

#[test]
fn a_share_that_fills_a_sliver_loses_nothing_and_one_breaking_a_fresh_gpu_does() {
    // The mix: 810 shares and whole GPUs. A 160 share in the 190 sliver an 810 left takes
    // nothing any of them could use and shrinks what is stranded for the 810s by 160; on the
    // fresh GPU it strands nothing (an 810 still fits in the 840 it leaves) but costs a whole
    // GPU.
    let mix = [(share(810, 1), 0.5), (whole(1, 1), 0.5)];
    let sliver = node(100, &[0, 190]);
    let fresh = node(100, &[0, 1000]);
    assert_eq!(placement_loss(&sliver, &share(160, 1), &mix), -0.5 * 160.0);
    assert_eq!(placement_loss(&fresh, &share(160, 1), &mix), 0.5 * 1000.0);
}

#[test]
fn pressure_is_demand_share_over_free_share() {
    // One class: exactly 1, whatever the numbers.
    assert_eq!(pressure(&[3.0], &[700], 700), vec![1.0]);
    // Class 1 wants 40% of the demand and its devices hold 20% of the free capacity: 2.
    // Class 0 (every device) wants 60% and holds all of it: 0.6.
    let p = pressure(&[0.6, 0.4], &[1000, 200], 1000);
    assert!((p[0] - 0.6).abs() < 1e-12 && (p[1] - 2.0).abs() < 1e-12, "{p:?}");
    // A class with nothing free no longer tells nodes apart.
    assert_eq!(pressure(&[0.5, 0.5], &[1000, 0], 1000)[1], 0.0);
}

/// The incremental sums the plugin keeps per node give what `usable` computes from scratch,
/// on random nodes, shapes and placements (a seeded generator: the cases are the same each run).
#[test]
fn incremental_sums_agree_with_usable() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let amounts = [50, 160, 230, 320, 470, 650, 810, 1000];
    for _ in 0..2000 {
        let devices: Vec<Device> = (0..1 + next(8))
            .map(|_| Device {
                capacity: 1000,
                free: [0, 190, 470, 530, 1000][next(5) as usize],
                classes: 1 | next(4) << 1,
            })
            .collect();
        let n = NodeState {
            milli_cpu: Some(next(40) as i64 * CORE),
            memory: Some(next(9) as i64),
            devices,
            counters: None,
        };
        let pick = |k: u64| -> Shape {
            let demand = match k % 3 {
                0 => Demand::Share(amounts[(k / 3 % 7) as usize]),
                1 => Demand::Whole(1 + (k / 3 % 4) as u32),
                _ => Demand::None,
            };
            Shape { milli_cpu: (k % 13) as i64 * CORE, memory: (k % 3) as i64, demand, class: (k % 3) as u8 }
        };
        let pod = pick(next(1000));
        let Some(devices) = chosen_devices(&n, &pod) else { continue };
        let a = after(&n, &pod, &devices);
        let changed: Vec<(usize, i64)> = devices.iter().map(|&i| (i, a.devices[i].free)).collect();
        for k in 0..60 {
            let s = pick(k);
            let incremental =
                usable_from(&s, sums_after(&s, sums(&n, &s), &n.devices, &changed), a.milli_cpu, a.memory);
            assert_eq!(incremental, usable(&a, &s), "node {n:?}, pod {pod:?}, shape {s:?}");
        }
    }
}

#[test]
fn a_block_of_whole_devices_counts_by_the_square_root_of_its_size() {
    assert_eq!(size_weight(&whole(4, 1)), 0.5);
    assert_eq!(size_weight(&whole(1, 1)), 1.0);
    assert_eq!(size_weight(&share(500, 1)), 1.0);
}

#[test]
fn only_the_devices_a_share_accepts_can_be_stranded_for_it() {
    // Device 1 takes only class-0 shapes; a class-2 share sees device 0 alone.
    let restricted = Shape { class: 2, ..share(500, 1) };
    let mut n = node(100, &[1000, 1000]);
    n.devices[1].classes = 1;
    assert_eq!(stranded(&n, &restricted), 0, "a copy fits: no sliver on device 0");
    n.devices[0].free = 400;
    assert_eq!(stranded(&n, &restricted), 400, "not one copy fits: device 0's 400, not device 1's 1000");
    assert_eq!(stranded(&n, &share(500, 1)), 400, "a class-0 share has device 1 and strands only the sliver");
}

#[test]
fn starved_capacity_is_what_free_cpu_and_memory_cannot_feed_at_the_mixs_rate() {
    // 11 cores per GPU asked; 2 free GPUs.
    let rate = PerUnit { milli_cpu: 11.0, memory: 0.0 };
    assert_eq!(starved(2000, Some(22 * CORE), None, rate), 0.0, "exactly enough cores");
    assert_eq!(starved(2000, Some(11 * CORE), None, rate), 1000.0, "cores for one GPU of two");
    assert_eq!(starved(2000, Some(100 * CORE), None, rate), 0.0, "spare cores do not count below zero");
    assert_eq!(starved(2000, Some(-5), None, rate), 2000.0, "overcommitted cpu feeds nothing");
    assert_eq!(starved(2000, None, None, rate), 0.0, "cpu not counted");
    // The scarcer of the two resources decides.
    let both = PerUnit { milli_cpu: 11.0, memory: 4.0 };
    assert_eq!(starved(2000, Some(22 * CORE), Some(2000), both), 1500.0);
    assert_eq!(starved(2000, Some(22 * CORE), Some(2000), PerUnit::default()), 0.0, "a mix asking neither");
}

/// Devices drawing `draws[i]` from one counter of `left` (a stand-in for the allocator's
/// model, which module `devices` plugs in).
#[derive(Debug)]
struct OneCounter {
    left: i64,
    draws: Vec<i64>,
}

impl Counters for OneCounter {
    fn fits_after(&self, taken: &[usize], device: usize) -> bool {
        taken.iter().map(|&t| self.draws[t]).sum::<i64>() + self.draws[device] <= self.left
    }

    fn lost_after(&self, taken: &[usize]) -> Vec<usize> {
        (0..self.draws.len()).filter(|i| !taken.contains(i) && !self.fits_after(taken, *i)).collect()
    }
}

fn partitioned(left: i64, draws: &[i64]) -> NodeState {
    NodeState {
        milli_cpu: Some(100 * CORE),
        memory: None,
        devices: draws.iter().map(|_| Device { capacity: 1, free: 1, classes: ALL }).collect(),
        counters: Some(std::sync::Arc::new(OneCounter { left, draws: draws.to_vec() })),
    }
}

#[test]
fn whole_devices_on_shared_counters_are_picked_and_lost_together() {
    // A whole GPU of 80 listed before partitions of 10 and 40.
    let n = partitioned(80, &[80, 10, 40]);
    assert_eq!(chosen_devices(&n, &whole(1, 1)), Some(vec![0]));
    assert_eq!(chosen_devices(&n, &whole(2, 1)), Some(vec![1, 2]), "the whole GPU leaves no second device");
    assert_eq!(chosen_devices(&n, &whole(3, 1)), None);
    assert_eq!(lost_with(&n, &[0]), [1, 2]);
    assert_eq!(lost_with(&n, &[1]), [0]);
    assert_eq!(after(&n, &whole(1, 1), &[0]).devices.iter().map(|d| d.free).collect::<Vec<_>>(), [0, 0, 0]);
    // Taking the whole GPU costs every device a 1-device shape could have had, a partition
    // only itself and the whole GPU.
    let mix = [(whole(1, 1), 1.0)];
    assert_eq!(placement_loss(&n, &whole(1, 1), &mix), 3.0);
    let one_partition = partitioned(80, &[10, 80, 40]);
    assert_eq!(placement_loss(&one_partition, &whole(1, 1), &mix), 2.0);
    // Any 7 of 40 fit, no 8 do: the search stops at its budget, not after every 7 of 40.
    let many = partitioned(42, &[6; 40]);
    assert_eq!(chosen_devices(&many, &whole(8, 1)), None);
}
