//! The resource plugins: NodeResourcesFit and NodeResourcesBalancedAllocation (upstream `framework/plugins/noderesources`), their
//! args, and the scoring strategies they share.

mod args;
pub mod balanced_allocation;
pub mod fit;
mod least_allocated;
mod most_allocated;
mod requested_to_capacity_ratio;
mod resource_allocation;
#[cfg(test)]
mod testutil;

pub use args::{
    aggregate, default_resources, NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs,
    RequestedToCapacityRatioParam, ResourceSpec, ScoringStrategy, UtilizationShapePoint, LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO, SUPPORTED_SCORING_STRATEGIES,
};
pub use balanced_allocation::BalancedAllocation;
pub use fit::Fit;

#[cfg(test)]
mod tests {
    #[test]
    fn registered_in_tree() {
        let r = crate::in_tree_registry();
        let h = ksched_framework::Handle::for_tests();
        for name in [
            crate::names::NODE_RESOURCES_FIT,
            crate::names::NODE_RESOURCES_BALANCED_ALLOCATION,
            crate::names::IMAGE_LOCALITY,
        ] {
            let factory = r.get(name).unwrap_or_else(|| panic!("{name} is not registered"));
            assert_eq!(factory(None, &h).unwrap().name(), name);
        }
    }
}
