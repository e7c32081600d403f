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
];
