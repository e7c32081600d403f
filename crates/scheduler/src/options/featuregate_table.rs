// Generated from the feature gates v1.36's kube-scheduler registers (k8s.io/kubernetes
// pkg/features, k8s.io/apiserver, apiextensions-apiserver, client-go, component-base logs and
// zpages, as `utilfeature.DefaultMutableFeatureGate` holds them once cmd/kube-scheduler/app is
// loaded): names, versioned stages and dependencies. Regenerate rather than edit by hand.

use super::PreRelease::{Alpha, Beta, Deprecated, Ga};
use super::{Gate, Stage};

const fn s(version: (u32, u32), default: bool, lock_to_default: bool, pre_release: super::PreRelease) -> Stage {
    Stage { version, default, lock_to_default, pre_release, min_compatibility: None }
}

/// Every registered gate, sorted by name.
pub(super) static GATES: &[Gate] = &[
    Gate {
        name: "APIResponseCompression",
        stages: &[s((1, 8), false, false, Alpha), s((1, 16), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "APIServerIdentity",
        stages: &[s((1, 20), false, false, Alpha), s((1, 26), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "APIServerTracing",
        stages: &[s((1, 22), false, false, Alpha), s((1, 27), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "APIServingWithRoutine", stages: &[s((1, 30), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "AggregatedDiscoveryRemoveBetaType",
        stages: &[s((1, 0), false, false, Ga), s((1, 33), true, false, Deprecated), s((1, 35), true, true, Deprecated)],
        dependencies: &[],
    },
    Gate { name: "AllAlpha", stages: &[s((0, 0), false, false, Alpha)], dependencies: &[] },
    Gate { name: "AllBeta", stages: &[s((0, 0), false, false, Beta)], dependencies: &[] },
    Gate {
        name: "AllowDNSOnlyNodeCSR",
        stages: &[s((1, 0), true, false, Ga), s((1, 31), false, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "AllowInsecureKubeletCertificateSigningRequests",
        stages: &[s((1, 0), true, false, Ga), s((1, 31), false, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "AllowOverwriteTerminationGracePeriodSeconds",
        stages: &[
            s((1, 0), true, false, Ga),
            s((1, 32), false, false, Deprecated),
            s((1, 35), false, true, Deprecated),
        ],
        dependencies: &[],
    },
    Gate { name: "AllowParsingUserUIDFromCertAuth", stages: &[s((1, 33), true, false, Beta)], dependencies: &[] },
    Gate { name: "AllowServiceExternalIPs", stages: &[s((1, 0), true, false, Ga)], dependencies: &[] },
    Gate { name: "AllowUnsafeMalformedObjectDeletion", stages: &[s((1, 32), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "AnonymousAuthConfigurableEndpoints",
        stages: &[s((1, 31), false, false, Alpha), s((1, 32), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "AnyVolumeDataSource",
        stages: &[s((1, 18), false, false, Alpha), s((1, 24), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "AtomicFIFO", stages: &[s((1, 36), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "AuthorizeNodeWithSelectors",
        stages: &[s((1, 31), false, false, Alpha), s((1, 32), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &["AuthorizeWithSelectors"],
    },
    Gate {
        name: "AuthorizePodWebsocketUpgradeCreatePermission",
        stages: &[s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "AuthorizeWithSelectors",
        stages: &[s((1, 31), false, false, Alpha), s((1, 32), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "BtreeWatchCache",
        stages: &[s((1, 32), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "CBORServingAndStorage", stages: &[s((1, 32), false, false, Alpha)], dependencies: &[] },
    Gate { name: "CPUManagerPolicyAlphaOptions", stages: &[s((1, 23), false, false, Alpha)], dependencies: &[] },
    Gate { name: "CPUManagerPolicyBetaOptions", stages: &[s((1, 23), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "CPUManagerPolicyOptions",
        stages: &[s((1, 22), false, false, Alpha), s((1, 23), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "CRDObservedGenerationTracking",
        stages: &[s((1, 35), false, false, Beta), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "CRDValidationRatcheting",
        stages: &[s((1, 28), false, false, Alpha), s((1, 30), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "CRIListStreaming", stages: &[s((1, 36), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "CSIServiceAccountTokenSecrets",
        stages: &[s((1, 35), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "CSIVolumeHealth", stages: &[s((1, 21), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "ChangeContainerStatusOnKubeletRestart",
        stages: &[s((1, 0), true, false, Ga), s((1, 35), false, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "ClearingNominatedNodeNameAfterBinding",
        stages: &[s((1, 34), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "ClientsAllowCARotation", stages: &[s((1, 36), true, false, Beta)], dependencies: &[] },
    Gate { name: "ClientsAllowCBOR", stages: &[s((1, 32), false, false, Alpha)], dependencies: &[] },
    Gate { name: "ClientsAllowTLSCacheGC", stages: &[s((1, 36), true, false, Beta)], dependencies: &[] },
    Gate { name: "ClientsPreferCBOR", stages: &[s((1, 32), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "CloudControllerManagerWatchBasedRoutesReconciliation",
        stages: &[s((1, 35), false, false, Alpha)],
        dependencies: &[],
    },
    Gate { name: "CloudControllerManagerWebhook", stages: &[s((1, 27), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "ClusterTrustBundle",
        stages: &[s((1, 27), false, false, Alpha), s((1, 33), false, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "ClusterTrustBundleProjection",
        stages: &[s((1, 29), false, false, Alpha), s((1, 33), false, false, Beta)],
        dependencies: &["ClusterTrustBundle"],
    },
    Gate {
        name: "ComponentFlagz",
        stages: &[s((1, 32), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "ComponentStatusz",
        stages: &[s((1, 32), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "ConcurrentWatchObjectDecode", stages: &[s((1, 31), false, false, Beta)], dependencies: &[] },
    Gate {
        name: "ConsistentListFromCache",
        stages: &[s((1, 28), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ConstrainedImpersonation",
        stages: &[s((1, 35), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "ContainerCheckpoint",
        stages: &[s((1, 25), false, false, Alpha), s((1, 30), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "ContainerRestartRules",
        stages: &[s((1, 34), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "ContainerStopSignals", stages: &[s((1, 33), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "ContextualLogging",
        stages: &[s((1, 24), false, false, Alpha), s((1, 30), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "CoordinatedLeaderElection",
        stages: &[s((1, 31), false, false, Alpha), s((1, 33), false, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "CrossNamespaceVolumeDataSource", stages: &[s((1, 26), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "CustomCPUCFSQuotaPeriod",
        stages: &[s((1, 12), false, false, Alpha), s((1, 36), true, false, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "CustomResourceFieldSelectors",
        stages: &[s((1, 30), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 32), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "DRAAdminAccess",
        stages: &[s((1, 32), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAConsumableCapacity",
        stages: &[s((1, 34), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRADeviceBindingConditions",
        stages: &[s((1, 34), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["DRAResourceClaimDeviceStatus", "DynamicResourceAllocation"],
    },
    Gate {
        name: "DRADeviceTaintRules",
        stages: &[s((1, 35), false, false, Alpha), s((1, 36), false, false, Beta)],
        dependencies: &["DRADeviceTaints"],
    },
    Gate {
        name: "DRADeviceTaints",
        stages: &[s((1, 33), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAExtendedResource",
        stages: &[s((1, 34), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAListTypeAttributes",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRANodeAllocatableResources",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAPartitionableDevices",
        stages: &[s((1, 33), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAPrioritizedList",
        stages: &[s((1, 33), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 36), true, false, Ga)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAResourceClaimDeviceStatus",
        stages: &[s((1, 32), false, false, Alpha), s((1, 33), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "DRAResourceClaimGranularStatusAuthorization",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["DRAResourceClaimDeviceStatus", "DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAResourcePoolStatus",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRASchedulerFilterTimeout",
        stages: &[s((1, 34), true, false, Beta)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "DRAWorkloadResourceClaims",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &["DynamicResourceAllocation", "GenericWorkload"],
    },
    Gate {
        name: "DeclarativeValidation",
        stages: &[s((1, 33), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "DeclarativeValidationBeta",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["DeclarativeValidation"],
    },
    Gate {
        name: "DeclarativeValidationTakeover",
        stages: &[s((1, 33), false, false, Beta), s((1, 36), false, false, Deprecated)],
        dependencies: &["DeclarativeValidation"],
    },
    Gate {
        name: "DeploymentReplicaSetTerminatingReplicas",
        stages: &[s((1, 33), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "DetectCacheInconsistency", stages: &[s((1, 34), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "DisableAllocatorDualWrite",
        stages: &[
            s((1, 31), false, false, Alpha),
            s((1, 33), false, false, Beta),
            s((1, 34), true, false, Ga),
            s((1, 35), true, true, Ga),
        ],
        dependencies: &["MultiCIDRServiceAllocator"],
    },
    Gate {
        name: "DisableCPUQuotaWithExclusiveCPUs",
        stages: &[s((1, 33), true, false, Beta), s((1, 36), true, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "DisableNodeKubeProxyVersion",
        stages: &[
            s((1, 29), false, false, Alpha),
            s((1, 31), false, false, Deprecated),
            s((1, 33), true, false, Deprecated),
            s((1, 36), true, true, Deprecated),
        ],
        dependencies: &[],
    },
    Gate {
        name: "DynamicResourceAllocation",
        stages: &[
            s((1, 26), false, false, Alpha),
            s((1, 32), false, false, Beta),
            s((1, 34), true, false, Ga),
            s((1, 35), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate {
        name: "EnvFiles",
        stages: &[s((1, 34), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "EventedPLEG", stages: &[s((1, 26), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "ExecProbeTimeout",
        stages: &[s((1, 20), true, false, Ga), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ExtendWebSocketsToKubelet",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["NodeDeclaredFeatures"],
    },
    Gate {
        name: "ExternalServiceAccountTokenSigner",
        stages: &[s((1, 32), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "GangScheduling", stages: &[s((1, 35), false, false, Alpha)], dependencies: &["GenericWorkload"] },
    Gate { name: "GenericWorkload", stages: &[s((1, 35), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "GitRepoVolumeDriver",
        stages: &[
            s((1, 0), true, false, Ga),
            s((1, 33), false, false, Deprecated),
            s((1, 36), false, true, Deprecated),
        ],
        dependencies: &[],
    },
    Gate {
        name: "GracefulNodeShutdown",
        stages: &[s((1, 20), false, false, Alpha), s((1, 21), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "GracefulNodeShutdownBasedOnPodPriority",
        stages: &[s((1, 23), false, false, Alpha), s((1, 24), true, false, Beta)],
        dependencies: &["GracefulNodeShutdown"],
    },
    Gate {
        name: "HPAConfigurableTolerance",
        stages: &[s((1, 33), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "HPAScaleToZero", stages: &[s((1, 16), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "HostnameOverride",
        stages: &[s((1, 34), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "ImageMaximumGCAge",
        stages: &[s((1, 29), false, false, Alpha), s((1, 30), true, false, Beta), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ImageVolume",
        stages: &[
            s((1, 31), false, false, Alpha),
            s((1, 33), false, false, Beta),
            s((1, 35), true, false, Beta),
            s((1, 36), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate { name: "ImageVolumeWithDigest", stages: &[s((1, 35), false, false, Alpha)], dependencies: &["ImageVolume"] },
    Gate {
        name: "InOrderInformers",
        stages: &[s((1, 33), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "InOrderInformersBatchProcess", stages: &[s((1, 35), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "InPlacePodLevelResourcesVerticalScaling",
        stages: &[s((1, 35), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["InPlacePodVerticalScaling", "NodeDeclaredFeatures", "PodLevelResources"],
    },
    Gate {
        name: "InPlacePodVerticalScaling",
        stages: &[s((1, 27), false, false, Alpha), s((1, 33), true, false, Beta), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "InPlacePodVerticalScalingExclusiveCPUs",
        stages: &[s((1, 32), false, false, Alpha)],
        dependencies: &["InPlacePodVerticalScaling"],
    },
    Gate {
        name: "InPlacePodVerticalScalingExclusiveMemory",
        stages: &[s((1, 34), false, false, Alpha)],
        dependencies: &["InPlacePodVerticalScaling"],
    },
    Gate {
        name: "InPlacePodVerticalScalingInitContainers",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["InPlacePodVerticalScaling", "NodeDeclaredFeatures"],
    },
    Gate {
        name: "InformerResourceVersion",
        stages: &[s((1, 30), false, false, Alpha), s((1, 35), true, false, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "JobBackoffLimitPerIndex",
        stages: &[s((1, 28), false, false, Alpha), s((1, 29), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "JobManagedBy",
        stages: &[s((1, 30), false, false, Alpha), s((1, 32), true, false, Beta), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "JobPodReplacementPolicy",
        stages: &[s((1, 28), false, false, Alpha), s((1, 29), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "JobSuccessPolicy",
        stages: &[s((1, 30), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "KMSv1",
        stages: &[
            s((1, 0), true, false, Ga),
            s((1, 28), true, false, Deprecated),
            s((1, 29), false, false, Deprecated),
        ],
        dependencies: &[],
    },
    Gate {
        name: "KubeletCgroupDriverFromCRI",
        stages: &[s((1, 28), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletCrashLoopBackOffMax",
        stages: &[s((1, 32), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletEnsureSecretPulledImages",
        stages: &[s((1, 33), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletFineGrainedAuthz",
        stages: &[s((1, 32), false, false, Alpha), s((1, 33), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "KubeletInUserNamespace", stages: &[s((1, 22), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "KubeletPSI",
        stages: &[s((1, 33), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletPodResourcesDynamicResources",
        stages: &[s((1, 27), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletPodResourcesGet",
        stages: &[s((1, 27), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletPodResourcesListUseActivePods",
        stages: &[s((1, 0), false, false, Ga), s((1, 34), true, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletRegistrationGetOnExistsOnly",
        stages: &[s((1, 0), true, false, Ga), s((1, 32), false, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletSeparateDiskGC",
        stages: &[s((1, 29), false, false, Alpha), s((1, 31), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletServiceAccountTokenForCredentialProviders",
        stages: &[s((1, 33), false, false, Alpha), s((1, 34), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "KubeletTracing",
        stages: &[s((1, 25), false, false, Alpha), s((1, 27), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ListFromCacheSnapshot",
        stages: &[s((1, 33), false, false, Alpha), s((1, 34), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "LocalStorageCapacityIsolationFSQuotaMonitoring",
        stages: &[s((1, 15), false, false, Alpha), s((1, 31), false, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "LogarithmicScaleDown",
        stages: &[s((1, 21), false, false, Alpha), s((1, 22), true, false, Beta), s((1, 31), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "LoggingAlphaOptions", stages: &[s((1, 24), false, false, Alpha)], dependencies: &[] },
    Gate { name: "LoggingBetaOptions", stages: &[s((1, 24), true, false, Beta)], dependencies: &[] },
    Gate { name: "ManifestBasedAdmissionControlConfig", stages: &[s((1, 36), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "MatchLabelKeysInPodAffinity",
        stages: &[s((1, 29), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "MatchLabelKeysInPodTopologySpread",
        stages: &[s((1, 25), false, false, Alpha), s((1, 27), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "MatchLabelKeysInPodTopologySpreadSelectorMerge",
        stages: &[s((1, 34), true, false, Beta)],
        dependencies: &["MatchLabelKeysInPodTopologySpread"],
    },
    Gate {
        name: "MaxUnavailableStatefulSet",
        stages: &[s((1, 24), false, false, Alpha), s((1, 35), false, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "MemoryQoS", stages: &[s((1, 22), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "MultiCIDRServiceAllocator",
        stages: &[
            s((1, 27), false, false, Alpha),
            s((1, 31), false, false, Beta),
            s((1, 33), true, false, Ga),
            s((1, 34), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate {
        name: "MutableCSINodeAllocatableCount",
        stages: &[
            s((1, 33), false, false, Alpha),
            s((1, 34), false, false, Beta),
            s((1, 35), true, false, Beta),
            s((1, 36), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate { name: "MutablePVNodeAffinity", stages: &[s((1, 35), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "MutablePodResourcesForSuspendedJobs",
        stages: &[s((1, 35), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "MutableSchedulingDirectivesForSuspendedJobs",
        stages: &[s((1, 35), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "MutatingAdmissionPolicy",
        stages: &[s((1, 32), false, false, Alpha), s((1, 34), false, false, Beta), s((1, 36), true, false, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "NFTablesProxyMode",
        stages: &[s((1, 29), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "NativeHistograms", stages: &[s((1, 36), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "NodeDeclaredFeatures",
        stages: &[s((1, 35), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "NodeInclusionPolicyInPodTopologySpread",
        stages: &[s((1, 25), false, false, Alpha), s((1, 26), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "NodeLogQuery",
        stages: &[s((1, 27), true, false, Alpha), s((1, 30), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "NodeSwap",
        stages: &[
            s((1, 22), false, false, Alpha),
            s((1, 28), false, false, Beta),
            s((1, 30), true, false, Beta),
            s((1, 34), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate {
        name: "NominatedNodeNameForExpectation",
        stages: &[s((1, 34), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "OpenAPIEnums",
        stages: &[s((1, 23), false, false, Alpha), s((1, 24), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "OpportunisticBatching", stages: &[s((1, 35), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "OrderedNamespaceDeletion",
        stages: &[s((1, 30), false, false, Beta), s((1, 33), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "PLEGOnDemandRelist", stages: &[s((1, 36), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "PersistentVolumeClaimUnusedSinceTime",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &[],
    },
    Gate { name: "PodAndContainerStatsFromCRI", stages: &[s((1, 23), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "PodCertificateRequest",
        stages: &[s((1, 34), false, false, Alpha), s((1, 35), false, false, Beta)],
        dependencies: &["AuthorizeNodeWithSelectors"],
    },
    Gate {
        name: "PodDeletionCost",
        stages: &[s((1, 21), false, false, Alpha), s((1, 22), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "PodLevelResourceManagers",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &["PodLevelResources"],
    },
    Gate {
        name: "PodLevelResources",
        stages: &[s((1, 32), false, false, Alpha), s((1, 34), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "PodLifecycleSleepAction",
        stages: &[s((1, 29), false, false, Alpha), s((1, 30), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "PodLifecycleSleepActionAllowZero",
        stages: &[s((1, 32), false, false, Alpha), s((1, 33), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &["PodLifecycleSleepAction"],
    },
    Gate { name: "PodLogsQuerySplitStreams", stages: &[s((1, 32), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "PodObservedGenerationTracking",
        stages: &[s((1, 33), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "PodReadyToStartContainersCondition",
        stages: &[s((1, 28), false, false, Alpha), s((1, 29), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "PodSchedulingReadiness",
        stages: &[s((1, 26), false, false, Alpha), s((1, 27), true, false, Beta), s((1, 30), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "PodTopologyLabelsAdmission",
        stages: &[s((1, 33), false, false, Alpha), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "PodsAPI", stages: &[s((1, 36), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "PortForwardWebsockets",
        stages: &[s((1, 30), false, false, Alpha), s((1, 31), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "PreferSameTrafficDistribution",
        stages: &[s((1, 33), false, false, Alpha), s((1, 34), true, false, Beta), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "PreventStaticPodAPIReferences", stages: &[s((1, 34), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "ProcMountType",
        stages: &[
            s((1, 12), false, false, Alpha),
            s((1, 31), false, false, Beta),
            s((1, 33), true, false, Beta),
            s((1, 36), true, true, Ga),
        ],
        dependencies: &["UserNamespacesSupport"],
    },
    Gate { name: "QOSReserved", stages: &[s((1, 11), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "RecoverVolumeExpansionFailure",
        stages: &[s((1, 23), false, false, Alpha), s((1, 32), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "RecursiveReadOnlyMounts",
        stages: &[s((1, 30), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "ReduceDefaultCrashLoopBackOffDecay", stages: &[s((1, 33), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "RelaxedDNSSearchValidation",
        stages: &[s((1, 32), false, false, Alpha), s((1, 33), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "RelaxedEnvironmentVariableValidation",
        stages: &[s((1, 30), false, false, Alpha), s((1, 32), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "RelaxedServiceNameValidation",
        stages: &[s((1, 34), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "ReloadKubeletClientCAFile", stages: &[s((1, 36), true, false, Beta)], dependencies: &[] },
    Gate { name: "ReloadKubeletServerCertificateFile", stages: &[s((1, 31), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "RemoteRequestHeaderUID",
        stages: &[s((1, 32), false, false, Alpha), s((1, 33), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "ResilientWatchCacheInitialization",
        stages: &[s((1, 31), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ResourceHealthStatus",
        stages: &[s((1, 31), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["DynamicResourceAllocation"],
    },
    Gate {
        name: "ResourceHealthStatusMessage",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["ResourceHealthStatus"],
    },
    Gate {
        name: "RestartAllContainersOnContainerExits",
        stages: &[s((1, 35), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["ContainerRestartRules", "NodeDeclaredFeatures"],
    },
    Gate {
        name: "RetryGenerateName",
        stages: &[s((1, 30), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 32), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "RotateKubeletServerCertificate",
        stages: &[s((1, 7), false, false, Alpha), s((1, 12), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "RuntimeClassInImageCriApi", stages: &[s((1, 29), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "SELinuxChangePolicy",
        stages: &[s((1, 32), false, false, Alpha), s((1, 33), true, false, Beta), s((1, 36), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "SELinuxMount",
        stages: &[s((1, 30), false, false, Alpha), s((1, 33), false, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "SELinuxMountReadWriteOncePod",
        stages: &[
            s((1, 25), false, false, Alpha),
            s((1, 27), false, false, Beta),
            s((1, 28), true, false, Beta),
            s((1, 36), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate { name: "SchedulerAsyncAPICalls", stages: &[s((1, 34), false, false, Beta)], dependencies: &[] },
    Gate {
        name: "SchedulerAsyncPreemption",
        stages: &[s((1, 32), false, false, Alpha), s((1, 33), true, false, Beta)],
        dependencies: &[],
    },
    Gate { name: "SchedulerPopFromBackoffQ", stages: &[s((1, 33), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "SchedulerQueueingHints",
        stages: &[s((1, 28), false, false, Beta), s((1, 32), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "SeparateCacheWatchRPC",
        stages: &[
            s((1, 28), true, false, Beta),
            s((1, 33), false, false, Deprecated),
            s((1, 36), false, true, Deprecated),
        ],
        dependencies: &[],
    },
    Gate {
        name: "SeparateTaintEvictionController",
        stages: &[s((1, 29), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ServiceAccountNodeAudienceRestriction",
        stages: &[s((1, 32), false, false, Beta), s((1, 33), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "ServiceAccountTokenJTI",
        stages: &[s((1, 29), false, false, Alpha), s((1, 30), true, false, Beta), s((1, 32), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ServiceAccountTokenNodeBinding",
        stages: &[s((1, 29), false, false, Alpha), s((1, 31), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &["ServiceAccountTokenNodeBindingValidation"],
    },
    Gate {
        name: "ServiceAccountTokenNodeBindingValidation",
        stages: &[s((1, 29), false, false, Alpha), s((1, 30), true, false, Beta), s((1, 32), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ServiceAccountTokenPodNodeInfo",
        stages: &[s((1, 29), false, false, Alpha), s((1, 30), true, false, Beta), s((1, 32), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "ServiceCIDRStatusFieldWiping",
        stages: &[s((1, 0), false, false, Ga), s((1, 36), true, false, Deprecated)],
        dependencies: &[],
    },
    Gate { name: "ShardedListAndWatch", stages: &[s((1, 36), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "SidecarContainers",
        stages: &[s((1, 28), false, false, Alpha), s((1, 29), true, false, Beta), s((1, 33), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "SizeBasedListCostEstimate", stages: &[s((1, 34), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "StaleControllerConsistencyDaemonSet",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["AtomicFIFO"],
    },
    Gate {
        name: "StaleControllerConsistencyJob",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["AtomicFIFO"],
    },
    Gate {
        name: "StaleControllerConsistencyReplicaSet",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["AtomicFIFO"],
    },
    Gate {
        name: "StaleControllerConsistencyStatefulSet",
        stages: &[s((1, 36), true, false, Beta)],
        dependencies: &["AtomicFIFO"],
    },
    Gate { name: "StatefulSetSemanticRevisionComparison", stages: &[s((1, 0), true, false, Beta)], dependencies: &[] },
    Gate { name: "StorageCapacityScoring", stages: &[s((1, 33), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "StorageNamespaceIndex",
        stages: &[s((1, 30), true, false, Beta), s((1, 33), true, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "StorageVersionAPI",
        stages: &[s((1, 20), false, false, Alpha)],
        dependencies: &["APIServerIdentity"],
    },
    Gate {
        name: "StorageVersionHash",
        stages: &[s((1, 14), false, false, Alpha), s((1, 15), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "StorageVersionMigrator",
        stages: &[s((1, 30), false, false, Alpha), s((1, 35), false, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "StreamingCollectionEncodingToJSON",
        stages: &[s((1, 33), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "StreamingCollectionEncodingToProtobuf",
        stages: &[s((1, 33), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "StrictIPCIDRValidation",
        stages: &[s((1, 33), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "StructuredAuthenticationConfiguration",
        stages: &[s((1, 29), false, false, Alpha), s((1, 30), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "StructuredAuthenticationConfigurationEgressSelector",
        stages: &[s((1, 34), true, false, Beta)],
        dependencies: &["StructuredAuthenticationConfiguration"],
    },
    Gate {
        name: "StructuredAuthenticationConfigurationJWKSMetrics",
        stages: &[s((1, 35), true, false, Beta)],
        dependencies: &["StructuredAuthenticationConfiguration"],
    },
    Gate {
        name: "SupplementalGroupsPolicy",
        stages: &[s((1, 31), false, false, Alpha), s((1, 33), true, false, Beta), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "SystemdWatchdog",
        stages: &[s((1, 32), true, false, Beta), s((1, 35), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "TaintTolerationComparisonOperators", stages: &[s((1, 35), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "TokenRequestServiceAccountUIDValidation",
        stages: &[s((1, 34), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "TopologyAwareWorkloadScheduling",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &["GenericWorkload"],
    },
    Gate { name: "TopologyManagerPolicyAlphaOptions", stages: &[s((1, 26), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "TopologyManagerPolicyBetaOptions",
        stages: &[s((1, 26), false, false, Beta), s((1, 28), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "TopologyManagerPolicyOptions",
        stages: &[s((1, 26), false, false, Alpha), s((1, 28), true, false, Beta), s((1, 32), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "TranslateStreamCloseWebsocketRequests",
        stages: &[s((1, 29), false, false, Alpha), s((1, 30), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "UnauthenticatedHTTP2DOSMitigation",
        stages: &[s((1, 25), false, false, Beta), s((1, 29), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "UnknownVersionInteroperabilityProxy",
        stages: &[s((1, 28), false, false, Alpha), s((1, 36), true, false, Beta)],
        dependencies: &["APIServerIdentity"],
    },
    Gate { name: "UnlockWhileProcessingFIFO", stages: &[s((1, 36), true, false, Beta)], dependencies: &[] },
    Gate {
        name: "UserNamespacesHostNetworkSupport",
        stages: &[s((1, 35), false, false, Alpha)],
        dependencies: &["NodeDeclaredFeatures", "UserNamespacesSupport"],
    },
    Gate {
        name: "UserNamespacesSupport",
        stages: &[
            s((1, 25), false, false, Alpha),
            s((1, 30), false, false, Beta),
            s((1, 33), true, false, Beta),
            s((1, 36), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate {
        name: "VolumeAttributesClass",
        stages: &[
            s((1, 29), false, false, Alpha),
            s((1, 31), false, false, Beta),
            s((1, 34), true, false, Ga),
            s((1, 36), true, true, Ga),
        ],
        dependencies: &[],
    },
    Gate { name: "VolumeLimitScaling", stages: &[s((1, 35), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "WatchCacheInitializationPostStartHook",
        stages: &[s((1, 31), false, false, Beta), s((1, 36), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "WatchList",
        stages: &[
            s((1, 27), false, false, Alpha),
            s((1, 32), true, false, Beta),
            s((1, 33), false, false, Beta),
            s((1, 34), true, false, Beta),
        ],
        dependencies: &[],
    },
    Gate {
        name: "WatchListClient",
        stages: &[s((1, 30), false, false, Beta), s((1, 35), true, false, Beta)],
        dependencies: &[],
    },
    Gate {
        name: "WinDSR",
        stages: &[s((1, 14), false, false, Alpha), s((1, 33), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate {
        name: "WinOverlay",
        stages: &[s((1, 14), false, false, Alpha), s((1, 20), true, false, Beta), s((1, 34), true, true, Ga)],
        dependencies: &[],
    },
    Gate { name: "WindowsCPUAndMemoryAffinity", stages: &[s((1, 32), false, false, Alpha)], dependencies: &[] },
    Gate {
        name: "WindowsGracefulNodeShutdown",
        stages: &[s((1, 32), false, false, Alpha), s((1, 34), true, false, Beta)],
        dependencies: &["GracefulNodeShutdown"],
    },
    Gate {
        name: "WindowsHostNetwork",
        stages: &[s((1, 26), false, false, Alpha), s((1, 33), false, false, Deprecated)],
        dependencies: &[],
    },
    Gate {
        name: "WorkloadAwarePreemption",
        stages: &[s((1, 36), false, false, Alpha)],
        dependencies: &["GangScheduling"],
    },
    Gate { name: "WorkloadWithJob", stages: &[s((1, 36), false, false, Alpha)], dependencies: &["GenericWorkload"] },
];
