//! MostAllocated: favours nodes with the most requested capacity (bin packing).

use ksched_framework::MAX_NODE_SCORE;

use super::resource_allocation::Entry;

/// Weighted mean (integer division) of each resource's requested share on the 0–100 scale.
pub(crate) fn score(entries: impl Iterator<Item = Entry>) -> i64 {
    let (mut sum, mut weights) = (0, 0);
    for e in entries {
        sum += most_requested_score(e.requested, e.allocatable) * e.weight;
        weights += e.weight;
    }
    if weights == 0 {
        0
    } else {
        sum / weights
    }
}

/// The requested share of `capacity` on the 0–100 scale, capped at 100: non-zero defaults can push
/// the request past the capacity.
fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(weight: i64, requested: i64, allocatable: i64) -> Entry {
        Entry { weight, allocatable, allocated: 0, requested }
    }

    #[test]
    fn cases() {
        let cases = [
            ("no resources", vec![], 0),
            ("idle node", vec![e(1, 0, 4000), e(1, 0, 10000)], 0),
            ("truncating mean", vec![e(1, 3000, 4000), e(1, 5000, 10000)], 62),
            ("weighted", vec![e(1, 3000, 4000), e(2, 5000, 10000)], 58),
            ("over capacity caps at 100", vec![e(1, 6000, 4000), e(1, 0, 10000)], 50),
        ];
        for (name, entries, want) in cases {
            assert_eq!(score(entries.into_iter()), want, "{name}");
        }
    }
}
