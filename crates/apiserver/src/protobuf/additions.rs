//! Fields Kubernetes v1.36 added that the k8s-pb release we generate from
//! predates (same shape as the generated table; numbers from v1.36's
//! generated.proto). `protobuf::tests::every_served_field_has_a_number`
//! fails when a served field has no number.

use super::schema::{Kind::*, Label::*, ProtoField as F};

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// Extra `(message, fields)` entries, merged into the generated ones.
pub(super) static V1_36: &[(&str, &[F])] = &[
    ("io.k8s.api.core.v1.PodSpec", &[F("scheduling_group", 43, Msg, Opt, "io.k8s.api.core.v1.PodSchedulingGroup")]),
    ("io.k8s.api.core.v1.PodSchedulingGroup", &[F("pod_group_name", 1, Str, Opt, "")]),
    (
        "io.k8s.api.core.v1.PodStatus",
        &[F(
            "node_allocatable_resource_claim_statuses",
            21,
            Msg,
            Rep,
            "io.k8s.api.core.v1.NodeAllocatableResourceClaimStatus",
        )],
    ),
    (
        "io.k8s.api.core.v1.NodeAllocatableResourceClaimStatus",
        &[
            F("resource_claim_name", 1, Str, Opt, ""),
            F("containers", 2, Str, Rep, ""),
            F("resources", 3, Map(&Msg), Opt, QUANTITY),
        ],
    ),
    ("io.k8s.api.core.v1.VolumeMountStatus", &[F("volume_status", 5, Msg, Opt, "io.k8s.api.core.v1.VolumeStatus")]),
    ("io.k8s.api.core.v1.VolumeStatus", &[F("image", 1, Msg, Opt, "io.k8s.api.core.v1.ImageVolumeStatus")]),
    ("io.k8s.api.core.v1.ImageVolumeStatus", &[F("image_ref", 1, Str, Opt, "")]),
    ("io.k8s.api.core.v1.ResourceHealth", &[F("message", 6, Str, Opt, "")]),
    (
        "io.k8s.api.resource.v1.Device",
        &[F(
            "node_allocatable_resource_mappings",
            13,
            Map(&Msg),
            Opt,
            "io.k8s.api.resource.v1.NodeAllocatableResourceMapping",
        )],
    ),
    (
        "io.k8s.api.resource.v1.NodeAllocatableResourceMapping",
        &[F("capacity_key", 1, Str, Opt, ""), F("allocation_multiplier", 2, Msg, Opt, QUANTITY)],
    ),
    (
        "io.k8s.api.resource.v1.DeviceAttribute",
        &[
            F("ints", 6, I64, Rep, ""),
            F("bools", 7, Bool, Rep, ""),
            F("strings", 8, Str, Rep, ""),
            F("versions", 9, Str, Rep, ""),
        ],
    ),
    ("io.k8s.api.storage.v1.CSIDriverSpec", &[F("prevent_pod_scheduling_if_missing", 11, Bool, Opt, "")]),
    // scheduling.k8s.io/v1alpha2, which the k8s-pb release does not have at all.
    ("io.k8s.api.scheduling.v1alpha2.BasicSchedulingPolicy", &[]),
    ("io.k8s.api.scheduling.v1alpha2.GangSchedulingPolicy", &[F("min_count", 1, I32, Opt, "")]),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroup",
        &[
            F("metadata", 1, Msg, Opt, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
            F("spec", 2, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.PodGroupSpec"),
            F("status", 3, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.PodGroupStatus"),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupList",
        &[
            F("metadata", 1, Msg, Opt, "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"),
            F("items", 2, Msg, Rep, "io.k8s.api.scheduling.v1alpha2.PodGroup"),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupResourceClaim",
        &[
            F("name", 1, Str, Opt, ""),
            F("resource_claim_name", 2, Str, Opt, ""),
            F("resource_claim_template_name", 3, Str, Opt, ""),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupResourceClaimStatus",
        &[F("name", 1, Str, Opt, ""), F("resource_claim_name", 2, Str, Opt, "")],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupSchedulingConstraints",
        &[F("topology", 1, Msg, Rep, "io.k8s.api.scheduling.v1alpha2.TopologyConstraint")],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupSchedulingPolicy",
        &[
            F("basic", 1, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.BasicSchedulingPolicy"),
            F("gang", 2, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.GangSchedulingPolicy"),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupSpec",
        &[
            F("pod_group_template_ref", 1, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.PodGroupTemplateReference"),
            F("scheduling_policy", 2, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.PodGroupSchedulingPolicy"),
            F("scheduling_constraints", 3, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.PodGroupSchedulingConstraints"),
            F("resource_claims", 4, Msg, Rep, "io.k8s.api.scheduling.v1alpha2.PodGroupResourceClaim"),
            F("disruption_mode", 5, Str, Opt, ""),
            F("priority_class_name", 6, Str, Opt, ""),
            F("priority", 7, I32, Opt, ""),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupStatus",
        &[
            F("conditions", 1, Msg, Rep, "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"),
            F("resource_claim_statuses", 2, Msg, Rep, "io.k8s.api.scheduling.v1alpha2.PodGroupResourceClaimStatus"),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupTemplate",
        &[
            F("name", 1, Str, Opt, ""),
            F("scheduling_policy", 2, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.PodGroupSchedulingPolicy"),
            F("scheduling_constraints", 3, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.PodGroupSchedulingConstraints"),
            F("resource_claims", 4, Msg, Rep, "io.k8s.api.scheduling.v1alpha2.PodGroupResourceClaim"),
            F("disruption_mode", 5, Str, Opt, ""),
            F("priority_class_name", 6, Str, Opt, ""),
            F("priority", 7, I32, Opt, ""),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.PodGroupTemplateReference",
        &[F("workload", 1, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.WorkloadPodGroupTemplateReference")],
    ),
    ("io.k8s.api.scheduling.v1alpha2.TopologyConstraint", &[F("key", 1, Str, Opt, "")]),
    (
        "io.k8s.api.scheduling.v1alpha2.TypedLocalObjectReference",
        &[F("api_group", 1, Str, Opt, ""), F("kind", 2, Str, Opt, ""), F("name", 3, Str, Opt, "")],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.Workload",
        &[
            F("metadata", 1, Msg, Opt, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
            F("spec", 2, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.WorkloadSpec"),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.WorkloadList",
        &[
            F("metadata", 1, Msg, Opt, "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"),
            F("items", 2, Msg, Rep, "io.k8s.api.scheduling.v1alpha2.Workload"),
        ],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.WorkloadPodGroupTemplateReference",
        &[F("workload_name", 1, Str, Opt, ""), F("pod_group_template_name", 2, Str, Opt, "")],
    ),
    (
        "io.k8s.api.scheduling.v1alpha2.WorkloadSpec",
        &[
            F("controller_ref", 1, Msg, Opt, "io.k8s.api.scheduling.v1alpha2.TypedLocalObjectReference"),
            F("pod_group_templates", 2, Msg, Rep, "io.k8s.api.scheduling.v1alpha2.PodGroupTemplate"),
        ],
    ),
];
