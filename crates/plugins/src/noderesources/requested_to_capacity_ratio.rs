//! RequestedToCapacityRatio: scores each resource's utilisation through a piecewise-linear shape.

use ksched_framework::MAX_NODE_SCORE;

use super::args::{UtilizationShapePoint, MAX_CUSTOM_PRIORITY_SCORE};
use super::resource_allocation::Entry;

const MAX_UTILIZATION: i64 = 100;

/// A shape point on the node-score scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Point {
    utilization: i64,
    score: i64,
}

/// The scoring function built from a validated (non-empty, increasing) shape.
#[derive(Debug, Clone)]
pub(crate) struct Shape(Vec<Point>);

impl Shape {
    /// Scales the configured 0–10 scores onto 0–100.
    pub fn new(points: &[UtilizationShapePoint]) -> Self {
        let factor = MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE as i64;
        Shape(
            points
                .iter()
                .map(|p| Point { utilization: p.utilization as i64, score: p.score as i64 * factor })
                .collect(),
        )
    }

    /// The broken-linear function: flat before the first and after the last point, integer
    /// interpolation (truncating towards zero) in between.
    fn eval(&self, p: i64) -> i64 {
        let pts = &self.0;
        match pts.iter().position(|pt| p <= pt.utilization) {
            Some(0) => pts[0].score,
            Some(i) => {
                let (a, b) = (pts[i - 1], pts[i]);
                a.score + (b.score - a.score) * (p - a.utilization) / (b.utilization - a.utilization)
            }
            None => pts.last().map_or(0, |pt| pt.score),
        }
    }

    fn resource_score(&self, requested: i64, capacity: i64) -> i64 {
        if capacity == 0 || requested > capacity {
            return self.eval(MAX_UTILIZATION);
        }
        self.eval(requested * MAX_UTILIZATION / capacity)
    }

    /// Weighted mean over resources scoring above zero (zero-scored resources are left out of
    /// the mean entirely), rounded half away from zero.
    pub fn score(&self, entries: impl Iterator<Item = Entry>) -> i64 {
        let (mut sum, mut weights) = (0i64, 0i64);
        for e in entries {
            let s = self.resource_score(e.requested, e.allocatable);
            if s > 0 {
                sum += s * e.weight;
                weights += e.weight;
            }
        }
        if weights == 0 {
            0
        } else {
            (sum as f64 / weights as f64).round() as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(points: &[(i64, i64)]) -> Shape {
        Shape(points.iter().map(|&(utilization, score)| Point { utilization, score }).collect())
    }

    #[test]
    fn broken_linear_function() {
        type Case<'a> = (&'a str, Shape, &'a [(i64, i64)]);
        let cases: [Case; 3] = [
            (
                "rising",
                shape(&[(10, 1), (90, 9)]),
                &[
                    (-10, 1),
                    (0, 1),
                    (9, 1),
                    (10, 1),
                    (15, 1),
                    (19, 1),
                    (20, 2),
                    (89, 8),
                    (90, 9),
                    (99, 9),
                    (100, 9),
                    (110, 9),
                ],
            ),
            (
                "peak",
                shape(&[(0, 2), (40, 10), (100, 0)]),
                &[(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)],
            ),
            ("flat", shape(&[(0, 2), (40, 2), (100, 2)]), &[(-10, 2), (0, 2), (20, 2), (40, 2), (70, 2), (110, 2)]),
        ];
        for (name, f, asserts) in cases {
            for &(p, want) in asserts {
                assert_eq!(f.eval(p), want, "{name} at {p}");
            }
        }
    }

    #[test]
    fn decreasing_segment_truncates_towards_zero() {
        // 100 + (0 - 100) * 33 / 100 = 100 - 33 (Go and Rust both truncate -3300/100 to -33)
        assert_eq!(shape(&[(0, 100), (100, 0)]).eval(33), 67);
        assert_eq!(shape(&[(0, 100), (30, 0)]).eval(10), 67);
    }

    fn e(weight: i64, requested: i64, allocatable: i64) -> Entry {
        Entry { weight, allocatable, allocated: 0, requested }
    }

    #[test]
    fn weighted_score() {
        let least = Shape::new(&[
            UtilizationShapePoint { utilization: 0, score: 10 },
            UtilizationShapePoint { utilization: 100, score: 0 },
        ]);
        let cases = [
            ("nothing", vec![], 0),
            ("zero-scored resources leave the mean", vec![e(1, 300, 4_000_000), e(1, 600 << 20, 10000)], 100),
            ("rounded mean", vec![e(1, 3000, 4000), e(1, 5000, 10000)], 38),
            ("over capacity is full utilisation", vec![e(1, 5000, 4000)], 0),
        ];
        for (name, entries, want) in cases {
            assert_eq!(least.score(entries.into_iter()), want, "{name}");
        }
        let bin_packing = Shape::new(&[
            UtilizationShapePoint { utilization: 0, score: 0 },
            UtilizationShapePoint { utilization: 100, score: 1 },
        ]);
        assert_eq!(bin_packing.score([e(1, 2, 8)].into_iter()), 2);
        assert_eq!(bin_packing.score([e(1, 2, 4)].into_iter()), 5);
        assert_eq!(bin_packing.score([e(1, 4, 4)].into_iter()), 10);
    }
}
