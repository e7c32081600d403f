use serde_json::{json, Value};

use super::*;
use crate::volumebinding::testutil::*;
use ksched_framework::Code;

const EBS: &str = "ebs.csi.aws.com";
const GCE: &str = "pd.csi.storage.gke.io";

fn csi_node(drivers: Value) -> CSINode {
    obj(json!({"metadata": {"name": "node-1"}, "spec": {"drivers": drivers}}))
}

fn limit(driver: &str, count: i32) -> Value {
    json!({"name": driver, "nodeID": "id", "allocatable": {"count": count}})
}

fn csi_pv(name: &str, driver: &str, handle: &str) -> k8s_openapi::api::core::v1::PersistentVolume {
    pv(name, json!({}), json!({"csi": {"driver": driver, "volumeHandle": handle}}), "Bound")
}

fn objects(csi_nodes: Vec<CSINode>) -> Objects {
    Objects {
        pvs: vec![
            csi_pv("csi-ebs-0", EBS, "vol-0"),
            csi_pv("csi-ebs-1", EBS, "vol-1"),
            csi_pv("csi-ebs-2", EBS, "vol-2"),
            csi_pv("csi-gce-0", GCE, "disk-0"),
            pv(
                "intree-ebs",
                json!({}),
                json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-9"}}),
                "Bound",
            ),
        ],
        pvcs: vec![
            pvc("ebs-0", json!({"volumeName": "csi-ebs-0"})),
            pvc("ebs-1", json!({"volumeName": "csi-ebs-1"})),
            pvc("ebs-2", json!({"volumeName": "csi-ebs-2"})),
            pvc("gce-0", json!({"volumeName": "csi-gce-0"})),
            pvc("intree-ebs", json!({"volumeName": "intree-ebs"})),
            pvc("unbound-ebs", json!({"storageClassName": "sc-ebs"})),
            pvc("unbound-intree", json!({"storageClassName": "sc-intree"})),
            pvc("unbound-noclass", json!({})),
        ],
        classes: vec![
            sc("sc-ebs", EBS, Some("WaitForFirstConsumer"), json!({})),
            sc("sc-intree", "kubernetes.io/aws-ebs", Some("WaitForFirstConsumer"), json!({})),
        ],
        csi_nodes,
        ..Default::default()
    }
}

fn run_with(o: Objects, pod: Pod, existing: Vec<Pod>) -> Status {
    let pl = NodeVolumeLimits::new(lister(o));
    let pod = pi(pod);
    let mut state = CycleState::new();
    let (_, pre) = pl.pre_filter(&mut state, &pod, &Snapshot::default());
    if !pre.is_success() {
        return pre;
    }
    pl.filter(&state, &pod, &node_info(node("node-1", json!({})), existing))
}

fn run(limits: Value, pod: Pod, existing: Vec<Pod>) -> Status {
    run_with(objects(vec![csi_node(limits)]), pod, existing)
}

#[test]
fn csi_limits() {
    let exceed = Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
    let ok = Status::success();
    let p = |claims: &[&str]| pod_with_claims("new", claims);
    let e = |name: &str, claims: &[&str]| pod_with_claims(name, claims);
    let cases = [
        ("fits under the limit", json!([limit(EBS, 2)]), p(&["ebs-0"]), vec![e("a", &["ebs-1"])], ok.clone()),
        ("exceeds the limit", json!([limit(EBS, 2)]), p(&["ebs-0"]), vec![e("a", &["ebs-1", "ebs-2"])], exceed.clone()),
        (
            "same volume already attached does not count twice",
            json!([limit(EBS, 2)]),
            p(&["ebs-1"]),
            vec![e("a", &["ebs-1", "ebs-2"])],
            ok.clone(),
        ),
        ("other driver's limit", json!([limit(GCE, 1)]), p(&["ebs-0"]), vec![e("a", &["ebs-1", "ebs-2"])], ok.clone()),
        ("per-driver counting", json!([limit(EBS, 3), limit(GCE, 1)]), p(&["gce-0", "ebs-0"]), vec![], ok.clone()),
        ("zero limit", json!([limit(EBS, 0)]), p(&["ebs-0"]), vec![], exceed.clone()),
        ("no limits on the node", json!([]), p(&["ebs-0"]), vec![e("a", &["ebs-1", "ebs-2"])], ok.clone()),
        (
            "unbound claim counts through its class provisioner",
            json!([limit(EBS, 2)]),
            p(&["unbound-ebs"]),
            vec![e("a", &["ebs-1", "ebs-2"])],
            exceed.clone(),
        ),
        (
            "unbound claim of a migrated in-tree class",
            json!([limit(EBS, 2)]),
            p(&["unbound-intree"]),
            vec![e("a", &["ebs-1", "ebs-2"])],
            exceed.clone(),
        ),
        (
            "in-tree PV translated to its CSI driver",
            json!([limit(EBS, 2)]),
            p(&["intree-ebs"]),
            vec![e("a", &["ebs-1", "ebs-2"])],
            exceed.clone(),
        ),
        (
            "inline in-tree volume translated",
            json!([limit(EBS, 1)]),
            pod_with_volumes("new", json!([{"name": "v", "awsElasticBlockStore": {"volumeID": "vol-7"}}])),
            vec![e("a", &["ebs-1"])],
            exceed.clone(),
        ),
        ("claim without class is not counted", json!([limit(EBS, 0)]), p(&["unbound-noclass"]), vec![], ok.clone()),
        (
            "existing pod's missing claim is skipped",
            json!([limit(EBS, 2)]),
            p(&["ebs-0"]),
            vec![e("a", &["missing", "ebs-1"])],
            ok.clone(),
        ),
        (
            "missing claim",
            json!([limit(EBS, 2)]),
            p(&["missing"]),
            vec![],
            Status::unresolvable("looking up PVC default/missing: persistentvolumeclaim \"missing\" not found"),
        ),
    ];
    for (name, limits, pod, existing, want) in cases {
        assert_eq!(run(limits, pod, existing), want, "{name}");
    }
}

#[test]
fn in_tree_volumes_need_a_csi_node() {
    // without a CSINode in-tree volumes are not migrated, and no limits apply anyway
    let pod = pod_with_volumes("new", json!([{"name": "v", "awsElasticBlockStore": {"volumeID": "vol-7"}}]));
    assert!(run_with(objects(vec![]), pod, vec![]).is_success());
}

#[test]
fn one_cycle_tells_nodes_with_and_without_a_csi_node_apart() {
    // With VolumeLimitScaling, a counted volume of a driver missing from the node's CSINode is
    // refused; an inline in-tree volume counts only where a CSINode makes it migrated.
    let mut o = objects(vec![csi_node(json!([limit(GCE, 5)]))]);
    o.csi_drivers = vec![obj(json!({"metadata": {"name": EBS}, "spec": {"preventPodSchedulingIfMissing": true}}))];
    let mut pl = NodeVolumeLimits::new(lister(o));
    pl.volume_limit_scaling = true;
    let pod = pi(pod_with_volumes("new", json!([{"name": "v", "awsElasticBlockStore": {"volumeID": "vol-7"}}])));
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &pod, &Snapshot::default()).1.is_success());
    let filter = |name: &str| pl.filter(&state, &pod, &node_info(node(name, json!({})), vec![]));
    let refused = Status::unschedulable(format!("{EBS} CSI driver is not installed on the node"));
    for _ in 0..2 {
        assert_eq!(filter("node-1"), refused);
        assert!(filter("node-2").is_success());
    }
    // the same verdicts without PreFilter's state
    let fresh = CycleState::new();
    assert_eq!(pl.filter(&fresh, &pod, &node_info(node("node-1", json!({})), vec![])), refused);
    assert!(pl.filter(&fresh, &pod, &node_info(node("node-2", json!({})), vec![])).is_success());
}

#[test]
fn volume_attachments_count() {
    let va = |name: &str, pv: &str, node: &str| -> VolumeAttachment {
        obj(json!({"metadata": {"name": name}, "spec": {"attacher": EBS, "nodeName": node,
            "source": {"persistentVolumeName": pv}}}))
    };
    let mut o = objects(vec![csi_node(json!([limit(EBS, 2)]))]);
    o.attachments =
        vec![va("a1", "csi-ebs-1", "node-1"), va("a2", "csi-ebs-2", "node-1"), va("a3", "csi-ebs-0", "node-2")];
    let pod = pod_with_claims("new", &["ebs-0"]);
    assert_eq!(run_with(o, pod.clone(), vec![]), Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED));
    // attachments of volumes the node's pods use count once
    let mut o = objects(vec![csi_node(json!([limit(EBS, 2)]))]);
    o.attachments = vec![va("a1", "csi-ebs-1", "node-1")];
    assert!(run_with(o, pod, vec![pod_with_claims("a", &["ebs-1"])]).is_success());
}

#[test]
fn pre_filter_skips_pods_without_countable_volumes() {
    let pl = NodeVolumeLimits::new(lister(Objects::default()));
    let skip = |v: Value| pl.pre_filter(&mut CycleState::new(), &pi(pod_with_volumes("p", v)), &Snapshot::default()).1;
    assert_eq!(skip(json!([])).code(), Code::Skip);
    assert_eq!(skip(json!([{"name": "e", "emptyDir": {}}])).code(), Code::Skip);
    assert!(skip(json!([{"name": "e", "gcePersistentDisk": {"pdName": "x"}}])).is_success());
    assert!(skip(json!([{"name": "e", "ephemeral": {}}])).is_success());
}

#[test]
fn hints() {
    let old = other(&csi_node(json!([limit(EBS, 2)])));
    let more = other(&csi_node(json!([limit(EBS, 3)])));
    let fewer = other(&csi_node(json!([limit(EBS, 1)])));
    let pod = pod_with_claims("p", &["ebs-0"]);
    assert_eq!(is_schedulable_after_csi_node_updated(&pod, Some(&old), Some(&more)), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_csi_node_updated(&pod, Some(&old), Some(&fewer)), Ok(QueueingHint::QueueSkip));
    let added = other(&pvc("ebs-0", json!({})));
    assert_eq!(is_schedulable_after_pvc_added(&pod, None, Some(&added)), Ok(QueueingHint::Queue));
    let pl = NodeVolumeLimits::new(lister(Objects::default()));
    let mut bound = pod_with_claims("d", &["x"]);
    let del = |p: &Pod| ksched_framework::EventObject::Pod(Arc::new(p.clone()));
    assert_eq!(pl.is_schedulable_after_pod_deleted(&pod, Some(&del(&bound)), None), Ok(QueueingHint::QueueSkip));
    bound.spec.as_mut().unwrap().node_name = Some("n".into());
    assert_eq!(pl.is_schedulable_after_pod_deleted(&pod, Some(&del(&bound)), None), Ok(QueueingHint::Queue));
}
