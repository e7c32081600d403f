//! Objects shaped like what a real kube-apiserver returns for a production cluster, for
//! `ksched bench --mode memory`: nodes registered by a kubelet (managedFields of the kubelet and
//! the controller manager, five conditions, a few dozen images, node info) and pods of
//! Deployments (owner references, managedFields, env, probes, mounts, a projected service
//! account volume) with the status a kubelet writes once the pod runs.
//!
//! The scheduler_perf templates ([`super::templates`]) are the minimal objects upstream's
//! benchmark creates; they say little about what a scheduler holds per object on a real
//! cluster, where most bytes of a pod are fields no plugin reads.

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{json, Value};

/// Zones the nodes spread over.
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// Images every node runs (daemon sets and the sandbox image).
const SYSTEM_IMAGES: [(&str, &str, i64); 6] = [
    ("registry.k8s.io/pause", "3.10", 320_368),
    ("registry.k8s.io/kube-proxy", "v1.36.0", 30_213_120),
    ("docker.io/calico/node", "v3.29.1", 144_517_120),
    ("docker.io/calico/cni", "v3.29.1", 94_003_200),
    ("quay.io/prometheus/node-exporter", "v1.8.2", 11_796_480),
    ("public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver", "v1.37.0", 34_340_864),
];
/// Distinct application images in the cluster.
const APP_IMAGES: usize = 120;
/// Application images a node has pulled.
const IMAGES_PER_NODE: usize = 24;
/// Applications (Deployments), spread over [`NAMESPACES`] namespaces.
pub const APPS: usize = 300;
/// Namespaces of the applications.
pub const NAMESPACES: usize = 12;

/// A timestamp in the API's format, `seconds` after a fixed instant (objects look the same on
/// every run).
fn ts(seconds: u64) -> String {
    let base = chrono::DateTime::parse_from_rfc3339("2026-11-20T08:00:00Z").unwrap_or_default();
    (base + chrono::Duration::seconds(seconds as i64)).to_utc().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn hex(rng: &mut StdRng, len: usize) -> String {
    (0..len).map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0')).collect()
}

fn uuid_like(rng: &mut StdRng) -> String {
    format!("{}-{}-{}-{}-{}", hex(rng, 8), hex(rng, 4), hex(rng, 4), hex(rng, 4), hex(rng, 12))
}

fn app_image(i: usize) -> (String, String, i64) {
    (
        format!("123456789012.dkr.ecr.us-east-1.amazonaws.com/team-{}/service-{i}", i % 17),
        format!("v2.{}.{}", i % 9, i % 31),
        40_000_000 + (i as i64 * 7_919_113) % 400_000_000,
    )
}

/// Both names a kubelet reports for an image: by digest (the same on every node that pulled
/// it) and by tag.
fn image_entry(repo: &str, tag: &str, size: i64) -> Value {
    let seed = format!("{repo}:{tag}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let digest = hex(&mut StdRng::seed_from_u64(seed), 64);
    json!({"names": [format!("{repo}@sha256:{digest}"), format!("{repo}:{tag}")], "sizeBytes": size})
}

fn condition(ty: &str, status: &str, reason: &str, message: &str, t: u64) -> Value {
    json!({"type": ty, "status": status, "lastHeartbeatTime": ts(t + 3600), "lastTransitionTime": ts(t),
           "reason": reason, "message": message})
}

/// Node `index` of a cluster: as a kubelet registers it and keeps its status.
pub fn node(index: usize, seed: u64) -> Value {
    let mut rng = StdRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let name = format!("ip-10-{}-{}-{}.ec2.internal", index / 65536 % 256, index / 256 % 256, index % 256);
    let zone = ZONES[index % ZONES.len()];
    let instance = format!("i-0{}", hex(&mut rng, 16));
    let ip = format!("10.{}.{}.{}", index / 65536 % 256, index / 256 % 256, index % 256);
    let t = (index as u64) * 7;
    let mut images: Vec<Value> = SYSTEM_IMAGES.iter().map(|(repo, tag, size)| image_entry(repo, tag, *size)).collect();
    for _ in 0..IMAGES_PER_NODE {
        let (repo, tag, size) = app_image(rng.random_range(0..APP_IMAGES));
        images.push(image_entry(&repo, &tag, size));
    }
    let resources = json!({"cpu": "8", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                           "hugepages-2Mi": "0", "memory": "32386544Ki", "pods": "110"});
    let allocatable = json!({"cpu": "7910m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0",
                             "hugepages-2Mi": "0", "memory": "31369712Ki", "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "m6i.2xlarge",
                "beta.kubernetes.io/os": "linux", "failure-domain.beta.kubernetes.io/region": "us-east-1",
                "failure-domain.beta.kubernetes.io/zone": zone, "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.2xlarge", "topology.ebs.csi.aws.com/zone": zone,
                "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": zone,
                "eks.amazonaws.com/nodegroup": format!("general-{}", index % 4),
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
            },
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": ip,
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"{instance}\"}}"),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": ts(t), "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:alpha.kubernetes.io/provided-node-ip": {},
                    "f:volumes.kubernetes.io/controller-managed-attach-detach": {}},
                    "f:labels": {".": {}, "f:beta.kubernetes.io/arch": {}, "f:beta.kubernetes.io/instance-type": {},
                    "f:beta.kubernetes.io/os": {}, "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {},
                    "f:kubernetes.io/os": {}, "f:node.kubernetes.io/instance-type": {},
                    "f:topology.kubernetes.io/region": {}, "f:topology.kubernetes.io/zone": {}}},
                    "f:spec": {"f:providerID": {}}}},
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": ts(t + 5),
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}},
                    "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, "v:\"10.244.0.0/24\"": {}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": ts(t + 3600),
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}},
                    "f:capacity": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}},
                    "f:conditions": {"k:{\"type\":\"DiskPressure\"}": {"f:lastHeartbeatTime": {}},
                        "k:{\"type\":\"MemoryPressure\"}": {"f:lastHeartbeatTime": {}},
                        "k:{\"type\":\"PIDPressure\"}": {"f:lastHeartbeatTime": {}},
                        "k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}, "f:lastTransitionTime": {},
                            "f:message": {}, "f:reason": {}, "f:status": {}}},
                    "f:images": {}, "f:nodeInfo": {"f:bootID": {}, "f:containerRuntimeVersion": {},
                        "f:kernelVersion": {}, "f:kubeProxyVersion": {}, "f:kubeletVersion": {}}}}},
            ],
        },
        "spec": {
            "podCIDR": format!("10.244.{}.0/24", index % 256),
            "podCIDRs": [format!("10.244.{}.0/24", index % 256)],
            "providerID": format!("aws:///{zone}/{instance}"),
        },
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "InternalDNS", "address": name},
                          {"type": "Hostname", "address": name}],
            "allocatable": allocatable,
            "capacity": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", t),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", t),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", t),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", t + 20),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "features": {"supplementalGroupsPolicy": true},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64", "bootID": uuid_like(&mut rng),
                "containerRuntimeVersion": "containerd://1.7.27", "kernelVersion": "6.1.119-129.201.amzn2023.x86_64",
                "kubeProxyVersion": "", "kubeletVersion": "v1.36.0", "machineID": hex(&mut rng, 32),
                "operatingSystem": "linux", "osImage": "Amazon Linux 2023.6.20250115", "systemUUID": uuid_like(&mut rng),
            },
            "runtimeHandlers": [{"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                                {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}}],
        }
    })
}

/// An application: a Deployment's pod template and its ReplicaSet's identity.
#[derive(Debug, Clone)]
pub struct App {
    /// Deployment name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// The ReplicaSet's pod-template-hash.
    pub hash: String,
    /// The ReplicaSet's UID.
    pub rs_uid: String,
    /// Main image (repository, tag).
    pub image: (String, String),
    /// Index of the app (shapes vary with it).
    pub index: usize,
}

/// The applications of a cluster.
pub fn apps(seed: u64) -> Vec<App> {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(17));
    (0..APPS)
        .map(|i| {
            let (repo, tag, _) = app_image(i % APP_IMAGES);
            App {
                name: format!("service-{i}"),
                namespace: format!("team-{}", i % NAMESPACES),
                hash: hex(&mut rng, 10),
                rs_uid: uuid_like(&mut rng),
                image: (repo, tag),
                index: i,
            }
        })
        .collect()
}

fn probe(path: &str, initial_delay: i64) -> Value {
    json!({"httpGet": {"path": path, "port": "http", "scheme": "HTTP"}, "initialDelaySeconds": initial_delay,
           "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
}

fn app_container(app: &App) -> Value {
    json!({
        "name": app.name, "image": format!("{}:{}", app.image.0, app.image.1),
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "env": [
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "SERVICE_NAME", "value": app.name},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
            {"name": "DATABASE_PASSWORD", "valueFrom": {"secretKeyRef": {"name": format!("{}-db", app.name), "key": "password"}}},
            {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability.svc.cluster.local:4317"},
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "livenessProbe": probe("/healthz", 10),
        "readinessProbe": probe("/ready", 5),
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/service", "readOnly": true},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": true, "runAsNonRoot": true, "runAsUser": 10001},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    })
}

fn sidecar() -> Value {
    json!({
        "name": "log-shipper", "image": "docker.io/fluent/fluent-bit:3.2.4",
        "args": ["--config=/fluent-bit/etc/fluent-bit.yaml"],
        "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp", "readOnly": true}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    })
}

/// The five characters the ReplicaSet controller appends to a pod's name. Random there (the API
/// server retries a name taken); here a scramble of the pod's index, so that a run of up to 27^5
/// (14 million) pods never asks for a name twice: random draws collide from a few thousand pods
/// per app on.
fn name_suffix(index: usize) -> String {
    const ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
    const NAMES: u64 = 27u64.pow(5);
    // Multiplying by a number prime to 27^5 permutes the residues: distinct indexes, distinct names.
    let mut x = (index as u64 % NAMES) * 7_368_787 % NAMES;
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % 27) as usize] as char;
            x /= 27;
            c
        })
        .collect()
}

/// Pod `index` of `app`, as the ReplicaSet controller creates it (the API server adds its
/// defaults and admission fields). `managedFields` carry the controller manager's and, as
/// once the pod runs, the kubelet's entries.
pub fn pod(app: &App, index: usize, seed: u64) -> Value {
    let mut rng = StdRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let suffix = name_suffix(index);
    let name = format!("{}-{}-{suffix}", app.name, app.hash);
    let mut containers = vec![app_container(app)];
    if app.index.is_multiple_of(3) {
        containers.push(sidecar());
    }
    let mut spec = json!({
        "containers": containers,
        "volumes": [
            {"name": "config", "configMap": {"name": format!("{}-config", app.name), "defaultMode": 420}},
            {"name": "tmp", "emptyDir": {}},
            {"name": format!("kube-api-access-{}", &suffix), "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}},
        ],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": app.name,
        "serviceAccount": app.name,
        "securityContext": {"fsGroup": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "enableServiceLinks": false,
    });
    if app.index % 4 == 1 {
        spec["affinity"] = json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app.name}}}}]}});
    }
    if app.index % 5 == 2 {
        spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app.name}}}]);
    }
    let t = 3_600 + index as u64;
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "generateName": format!("{}-{}-", app.name, app.hash), "namespace": app.namespace,
            "labels": {"app.kubernetes.io/name": app.name, "app.kubernetes.io/instance": app.name,
                       "app.kubernetes.io/part-of": format!("product-{}", app.index % 23),
                       "pod-template-hash": app.hash},
            "annotations": {"checksum/config": hex(&mut rng, 64), "prometheus.io/scrape": "true",
                            "prometheus.io/port": "9090", "kubectl.kubernetes.io/restartedAt": ts(1_000)},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{}-{}", app.name, app.hash),
                                 "uid": app.rs_uid, "controller": true, "blockOwnerDeletion": true}],
            "managedFields": pod_managed_fields(app, t),
        },
        "spec": spec,
    })
}

/// The managedFields a real API server records for a Deployment's pod: the controller
/// manager's create and the kubelet's status updates.
fn pod_managed_fields(app: &App, t: u64) -> Value {
    let controller = json!({"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": ts(t), "fieldsType": "FieldsV1", "fieldsV1": pod_spec_fields(app)});
    let kubelet = json!({"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": ts(t + 9),
        "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": pod_status_fields()});
    json!([controller, kubelet])
}

fn pod_spec_fields(app: &App) -> Value {
    let container = json!({".": {},
        "f:env": {".": {}, "k:{\"name\":\"LOG_LEVEL\"}": {".": {}, "f:name": {}, "f:value": {}},
            "k:{\"name\":\"POD_NAME\"}": {".": {}, "f:name": {}, "f:valueFrom": {".": {}, "f:fieldRef": {}}}},
        "f:image": {}, "f:imagePullPolicy": {}, "f:livenessProbe": {".": {}, "f:failureThreshold": {},
            "f:httpGet": {".": {}, "f:path": {}, "f:port": {}, "f:scheme": {}}, "f:initialDelaySeconds": {},
            "f:periodSeconds": {}, "f:successThreshold": {}, "f:timeoutSeconds": {}},
        "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {},
            "f:containerPort": {}, "f:name": {}, "f:protocol": {}}},
        "f:resources": {".": {}, "f:limits": {".": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
        "f:securityContext": {".": {}, "f:allowPrivilegeEscalation": {}, "f:runAsNonRoot": {}},
        "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {},
        "f:volumeMounts": {".": {}, "k:{\"mountPath\":\"/etc/service\"}": {".": {}, "f:mountPath": {}, "f:name": {}, "f:readOnly": {}}}});
    let metadata = json!({"f:annotations": {".": {}, "f:checksum/config": {}, "f:kubectl.kubernetes.io/restartedAt": {},
            "f:prometheus.io/port": {}, "f:prometheus.io/scrape": {}}, "f:generateName": {},
        "f:labels": {".": {}, "f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/name": {},
            "f:app.kubernetes.io/part-of": {}, "f:pod-template-hash": {}},
        "f:ownerReferences": {".": {}, format!("k:{{\"uid\":\"{}\"}}", app.rs_uid): {}}});
    let spec = json!({"f:containers": {format!("k:{{\"name\":\"{}\"}}", app.name): container},
        "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:nodeSelector": {}, "f:restartPolicy": {},
        "f:schedulerName": {}, "f:securityContext": {".": {}, "f:fsGroup": {}}, "f:serviceAccount": {},
        "f:serviceAccountName": {}, "f:terminationGracePeriodSeconds": {},
        "f:volumes": {".": {}, "k:{\"name\":\"config\"}": {".": {}, "f:configMap": {".": {}, "f:defaultMode": {}, "f:name": {}}, "f:name": {}}}});
    json!({"f:metadata": metadata, "f:spec": spec})
}

fn pod_status_fields() -> Value {
    let cond = json!({".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}});
    json!({"f:status": {"f:conditions": {
            "k:{\"type\":\"ContainersReady\"}": cond, "k:{\"type\":\"Initialized\"}": cond,
            "k:{\"type\":\"PodReadyToStartContainers\"}": cond, "k:{\"type\":\"Ready\"}": cond},
        "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {},
        "f:podIPs": {".": {}, "k:{\"ip\":\"10.244.1.17\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}})
}

/// The status a kubelet writes once `pod` (as the API server returns it, bound to its node)
/// runs: conditions, host and pod IPs, and one status per container.
pub fn running_status(pod: &Value, seed: u64) -> Value {
    let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let mut rng =
        StdRng::seed_from_u64(seed ^ name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))));
    let t = 3_700 + rng.random_range(0..600);
    let host_ip = format!("10.0.{}.{}", rng.random_range(0..256), rng.random_range(1..255));
    let pod_ip = format!("10.244.{}.{}", rng.random_range(0..256), rng.random_range(1..255));
    let cond = |ty: &str| json!({"type": ty, "status": "True", "lastProbeTime": null, "lastTransitionTime": ts(t)});
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let repo = image.rsplit_once(':').map_or(image, |(r, _)| r);
            let mounts: Vec<Value> = c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|m| json!({"name": m["name"], "mountPath": m["mountPath"], "readOnly": m.get("readOnly").cloned().unwrap_or(json!(false)),
                                "recursiveReadOnly": "Disabled"}))
                .collect();
            json!({
                "name": c["name"], "image": image, "imageID": format!("{repo}@sha256:{}", hex(&mut rng, 64)),
                "containerID": format!("containerd://{}", hex(&mut rng, 64)),
                "ready": true, "started": true, "restartCount": 0, "lastState": {},
                "state": {"running": {"startedAt": ts(t + 2)}},
                "resources": c.get("resources").cloned().unwrap_or(json!({})),
                "volumeMounts": mounts,
                "user": {"linux": {"uid": 10001, "gid": 10001, "supplementalGroups": [10001]}},
            })
        })
        .collect();
    json!({
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"),
                       cond("PodScheduled")],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "startTime": ts(t),
        "containerStatuses": statuses,
        "qosClass": "Burstable",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};

    #[test]
    fn pod_names_stay_distinct_at_a_million_pods_scale() {
        // Random suffixes collide after a few thousand pods of one app (a 1M-pod run hit one
        // at its first step); the scramble never does below 27^5.
        let mut seen = std::collections::HashSet::new();
        for i in (0..300_000).chain([14_348_906]) {
            let s = name_suffix(i);
            assert_eq!(s.len(), 5);
            assert!(seen.insert(s), "suffix of pod {i} repeats");
        }
        let apps = apps(1);
        let name = |i: usize| pod(&apps[i % apps.len()], i, 1).pointer("/metadata/name").cloned().unwrap();
        assert_ne!(name(0), name(apps.len()), "two pods of one app");
        assert!(name(5).as_str().unwrap().ends_with(&format!("-{}", name_suffix(5))));
    }

    #[test]
    fn objects_decode_as_their_kinds_and_are_deterministic() {
        let n: Node = serde_json::from_value(node(7, 1)).unwrap();
        assert_eq!(n.status.as_ref().unwrap().images.as_ref().unwrap().len(), SYSTEM_IMAGES.len() + IMAGES_PER_NODE);
        assert_eq!(n.metadata.managed_fields.as_ref().unwrap().len(), 3);
        assert_eq!(node(7, 1), node(7, 1));
        assert_ne!(node(7, 1), node(8, 1));
        let pause = |n: &Value| n.pointer("/status/images/0/names/0").cloned();
        assert_eq!(pause(&node(7, 1)), pause(&node(8, 2)), "an image has one digest cluster-wide");
        let apps = apps(1);
        assert_eq!(apps.len(), APPS);
        let v = pod(&apps[3], 5, 1);
        let p: Pod = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(p.spec.as_ref().unwrap().containers.len(), 2, "every third app has a sidecar");
        assert_eq!(p.metadata.namespace.as_deref(), Some("team-3"));
        let status: k8s_openapi::api::core::v1::PodStatus = serde_json::from_value(running_status(&v, 1)).unwrap();
        assert_eq!(status.container_statuses.unwrap().len(), 2);
        // A realistic pod is several kilobytes of JSON, most of it unread by the scheduler.
        let mut full = v;
        full["status"] = running_status(&full, 1);
        assert!(serde_json::to_vec(&full).unwrap().len() > 6000);
    }
}
