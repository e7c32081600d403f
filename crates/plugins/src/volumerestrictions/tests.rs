use serde_json::json;

use super::*;
use crate::volumebinding::testutil::*;
use ksched_framework::Code;

fn plugin() -> VolumeRestrictions {
    VolumeRestrictions {
        lister: lister(Objects {
            pvcs: vec![
                pvc("claim-rwop", json!({"accessModes": ["ReadWriteOncePod"]})),
                pvc("claim-rwop-2", json!({"accessModes": ["ReadWriteOncePod"]})),
                pvc("claim-rwo", json!({"accessModes": ["ReadWriteOnce"]})),
            ],
            ..Default::default()
        }),
    }
}

/// Runs PreFilter then (unless skipped) Filter of `pod` on a node with `existing` pods; the
/// snapshot holds `elsewhere` pods too (for ReadWriteOncePod counting).
fn run(pod: Pod, existing: Vec<Pod>, elsewhere: Vec<Pod>) -> (Status, Option<Status>) {
    let pl = plugin();
    let pod = pi(pod);
    let ni = node_info(node("n", json!({})), existing);
    let other = node_info(node("m", json!({})), elsewhere);
    let snapshot = Snapshot::from_node_infos(vec![ni.clone(), other]);
    let mut state = CycleState::new();
    let (_, pre) = pl.pre_filter(&mut state, &pod, &snapshot);
    if !pre.is_success() {
        return (pre, None);
    }
    (pre, Some(pl.filter(&state, &pod, &ni)))
}

fn vol(v: serde_json::Value) -> Pod {
    pod_with_volumes("p", json!([v]))
}

#[test]
fn inline_disk_conflicts() {
    let gce = |name: &str, ro: bool| json!({"name": "v", "gcePersistentDisk": {"pdName": name, "readOnly": ro}});
    let ebs = |id: &str| json!({"name": "v", "awsElasticBlockStore": {"volumeID": id}});
    let iscsi = |iqn: &str, ro: bool| json!({"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": ro}});
    let rbd = |mons: &[&str], pool: &str, image: &str, ro: bool| json!({"name": "v", "rbd": {"monitors": mons, "pool": pool, "image": image, "readOnly": ro}});
    let conflict = Some(Status::unschedulable(ERR_REASON_DISK_CONFLICT));
    let ok = Some(Status::success());
    let cases = [
        ("gce nothing", vol(gce("foo", false)), vec![], ok.clone()),
        ("gce one state", vol(gce("foo", false)), vec![vol(gce("foo", false))], conflict.clone()),
        ("gce other disk", vol(gce("bar", false)), vec![vol(gce("foo", false))], ok.clone()),
        ("gce both read-only", vol(gce("foo", true)), vec![vol(gce("foo", true))], ok.clone()),
        ("gce one read-only", vol(gce("foo", true)), vec![vol(gce("foo", false))], conflict.clone()),
        ("ebs same id", vol(ebs("foo")), vec![vol(ebs("foo"))], conflict.clone()),
        ("ebs other id", vol(ebs("bar")), vec![vol(ebs("foo"))], ok.clone()),
        ("iscsi same iqn", vol(iscsi("iqn.a", false)), vec![vol(iscsi("iqn.a", false))], conflict.clone()),
        ("iscsi both read-only", vol(iscsi("iqn.a", true)), vec![vol(iscsi("iqn.a", true))], ok.clone()),
        ("iscsi other iqn", vol(iscsi("iqn.b", false)), vec![vol(iscsi("iqn.a", false))], ok.clone()),
        (
            "rbd overlapping monitors",
            vol(rbd(&["a", "b"], "p", "i", false)),
            vec![vol(rbd(&["b", "c"], "p", "i", false))],
            conflict.clone(),
        ),
        (
            "rbd disjoint monitors",
            vol(rbd(&["a"], "p", "i", false)),
            vec![vol(rbd(&["c"], "p", "i", false))],
            ok.clone(),
        ),
        ("rbd other image", vol(rbd(&["a"], "p", "i", false)), vec![vol(rbd(&["a"], "p", "j", false))], ok.clone()),
        ("rbd both read-only", vol(rbd(&["a"], "p", "i", true)), vec![vol(rbd(&["a"], "p", "i", true))], ok.clone()),
    ];
    for (name, pod, existing, want) in cases {
        let (pre, got) = run(pod, existing, vec![]);
        assert!(pre.is_success(), "{name}: {pre}");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn read_write_once_pod() {
    let rwop = pod_with_claims("p", &["claim-rwop"]);
    // no restricted volumes and no conflict: nothing to check
    assert_eq!(run(pod_with_claims("p", &["claim-rwo"]), vec![], vec![]).0.code(), Code::Skip);
    assert_eq!(run(rwop.clone(), vec![], vec![]).0.code(), Code::Skip);
    // used by a pod on another node: rejected everywhere
    let user = pod_with_claims("q", &["claim-rwop"]);
    let (pre, got) = run(rwop.clone(), vec![], vec![user.clone()]);
    assert!(pre.is_success());
    assert_eq!(got, Some(Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)));
    // a pod using another ReadWriteOncePod claim does not count
    let (pre, _) = run(rwop.clone(), vec![], vec![pod_with_claims("q", &["claim-rwop-2"])]);
    assert_eq!(pre.code(), Code::Skip);
    // missing claim
    assert_eq!(
        run(pod_with_claims("p", &["x"]), vec![], vec![]).0,
        Status::unresolvable("persistentvolumeclaim \"x\" not found")
    );
}

#[test]
fn add_and_remove_pod_update_the_count() {
    let pl = plugin();
    let pod = pi(pod_with_claims("p", &["claim-rwop"]));
    let user = Arc::new(pi(pod_with_claims("q", &["claim-rwop"])));
    let ni = node_info(node("n", json!({})), vec![(*user.pod).clone()]);
    let snapshot = Snapshot::from_node_infos(vec![ni.clone()]);
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &pod, &snapshot).1.is_success());
    assert!(pl.filter(&state, &pod, &ni).is_rejected());
    assert!(pl.remove_pod(&mut state, &pod, &user, &ni).is_success());
    assert!(pl.filter(&state, &pod, &ni).is_success());
    assert!(pl.add_pod(&mut state, &pod, &user, &ni).is_success());
    assert_eq!(pl.filter(&state, &pod, &ni), Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT));
}

#[test]
fn hints() {
    let pod = pod_with_volumes(
        "p",
        json!([{"name": "v", "gcePersistentDisk": {"pdName": "foo"}},
        {"name": "c", "persistentVolumeClaim": {"claimName": "claim"}}]),
    );
    let del = |p: Pod| ksched_framework::EventObject::Pod(Arc::new(p));
    let same_disk = del(vol(json!({"name": "v", "gcePersistentDisk": {"pdName": "foo"}})));
    let other_disk = del(vol(json!({"name": "v", "gcePersistentDisk": {"pdName": "bar"}})));
    let same_claim = del(pod_with_claims("q", &["claim"]));
    assert_eq!(is_schedulable_after_pod_deleted(&pod, Some(&same_disk), None), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_pod_deleted(&pod, Some(&other_disk), None), Ok(QueueingHint::QueueSkip));
    assert_eq!(is_schedulable_after_pod_deleted(&pod, Some(&same_claim), None), Ok(QueueingHint::Queue));
    let added = other(&pvc("claim", json!({})));
    let unrelated = other(&pvc("other", json!({})));
    assert_eq!(is_schedulable_after_pvc_added(&pod, None, Some(&added)), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_pvc_added(&pod, None, Some(&unrelated)), Ok(QueueingHint::QueueSkip));
}
