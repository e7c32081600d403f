use serde_json::json;

use super::*;
use crate::volumebinding::testutil::*;
use ksched_framework::Code;

const ZB: &str = ZONE_BETA;
const RB: &str = REGION_BETA;

fn objects() -> Objects {
    let pvs = vec![
        pv("Vol_1", json!({ZB: "us-west1-a"}), json!({}), "Bound"),
        pv("Vol_2", json!({RB: "us-west1", "uselessLabel": "none"}), json!({}), "Bound"),
        pv("Vol_3", json!({RB: "us-west1"}), json!({}), "Bound"),
        pv("Vol_Stable_1", json!({ZONE_GA: "us-west1-a"}), json!({}), "Bound"),
        pv("Vol_Stable_2", json!({REGION_GA: "us-west1", "uselessLabel": "none"}), json!({}), "Bound"),
        pv("Vol_Stable_3", json!({ZONE_GA: "us-west1-a", REGION_GA: "us-west1-a"}), json!({}), "Bound"),
        pv("Vol_Multi", json!({ZONE_GA: "us-west1-a__us-west1-b"}), json!({}), "Bound"),
        pv("Vol_Bad", json!({ZONE_GA: "us-west1-a__"}), json!({}), "Bound"),
    ];
    let bound = |c: &str, v: &str| pvc(c, json!({"volumeName": v}));
    Objects {
        pvs,
        pvcs: vec![
            bound("PVC_1", "Vol_1"),
            bound("PVC_2", "Vol_2"),
            bound("PVC_3", "Vol_3"),
            bound("PVC_4", "Vol_not_exist"),
            bound("PVC_Stable_1", "Vol_Stable_1"),
            bound("PVC_Stable_2", "Vol_Stable_2"),
            bound("PVC_Stable_3", "Vol_Stable_3"),
            bound("PVC_Multi", "Vol_Multi"),
            bound("PVC_Bad", "Vol_Bad"),
            pvc("PVC_NoSC", json!({"storageClassName": "Class_0"})),
            pvc("PVC_EmptySC", json!({})),
            pvc("PVC_WaitSC", json!({"storageClassName": "Class_Wait"})),
            pvc("PVC_ImmediateSC", json!({"storageClassName": "Class_Immediate"})),
            pvc("PVC_Immediate2", json!({"storageClassName": "Class_Immediate2"})),
        ],
        classes: vec![
            sc("Class_Immediate", "p", None, json!({})),
            sc("Class_Wait", "p", Some("WaitForFirstConsumer"), json!({})),
            sc("Class_Immediate2", "p", Some("Immediate"), json!({})),
        ],
        ..Default::default()
    }
}

/// (pre-filter status, filter status) for a pod using `claim` on a node with `labels`.
fn run(claim: &str, labels: serde_json::Value) -> (Status, Status) {
    let pl = VolumeZone { lister: lister(objects()) };
    let pod = pi(pod_with_claims("pod_1", &[claim]));
    let mut state = CycleState::new();
    let (_, pre) = pl.pre_filter(&mut state, &pod, &Snapshot::default());
    let ni = node_info(node("host1", labels), vec![]);
    let filter = if pre.is_success() { pl.filter(&state, &pod, &ni) } else { pl.filter(&CycleState::new(), &pod, &ni) };
    (pre, filter)
}

#[test]
fn filter_cases() {
    let ok = Status::success();
    let conflict = Status::unresolvable(ERR_REASON_CONFLICT);
    let cases = [
        ("node without labels", "PVC_1", json!({}), ok.clone()),
        ("beta zone label matched", "PVC_1", json!({ZB: "us-west1-a", "uselessLabel": "none"}), ok.clone()),
        ("beta region label matched", "PVC_2", json!({RB: "us-west1", "uselessLabel": "none"}), ok.clone()),
        (
            "beta region label doesn't match",
            "PVC_2",
            json!({RB: "no_us-west1", "uselessLabel": "none"}),
            conflict.clone(),
        ),
        (
            "beta zone label doesn't match",
            "PVC_1",
            json!({ZB: "no_us-west1-a", "uselessLabel": "none"}),
            conflict.clone(),
        ),
        ("zone label matched", "PVC_Stable_1", json!({ZONE_GA: "us-west1-a"}), ok.clone()),
        ("region label matched", "PVC_Stable_2", json!({REGION_GA: "us-west1"}), ok.clone()),
        ("region label doesn't match", "PVC_Stable_2", json!({REGION_GA: "no_us-west1"}), conflict.clone()),
        ("zone label doesn't match", "PVC_Stable_1", json!({ZONE_GA: "no_us-west1-a"}), conflict.clone()),
        (
            "pv with zone and region, node with only zone",
            "PVC_Stable_3",
            json!({ZONE_GA: "us-west1-a"}),
            conflict.clone(),
        ),
        ("pv with zone, node with beta zone", "PVC_Stable_1", json!({ZB: "us-west1-a"}), conflict.clone()),
        ("pv with beta label, node with ga label, matched", "PVC_1", json!({ZONE_GA: "us-west1-a"}), ok.clone()),
        (
            "pv with beta label, node with ga label, don't match",
            "PVC_1",
            json!({ZONE_GA: "us-west1-b"}),
            conflict.clone(),
        ),
        ("multi-zone value matched", "PVC_Multi", json!({ZONE_GA: "us-west1-b"}), ok.clone()),
        ("multi-zone value doesn't match", "PVC_Multi", json!({ZONE_GA: "us-west1-c"}), conflict.clone()),
        ("label with an empty zone ignored", "PVC_Bad", json!({ZONE_GA: "x"}), ok.clone()),
    ];
    for (name, claim, labels, want) in cases {
        let (pre, got) = run(claim, labels);
        if claim == "PVC_Bad" {
            assert_eq!(pre.code(), Code::Skip, "{name}");
            continue;
        }
        assert!(pre.is_success(), "{name}: {pre}");
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn pre_filter_cases() {
    let node = json!({ZB: "us-west1-a", "uselessLabel": "none"});
    let cases = [
        ("label zone failure domain matched", "PVC_1", Status::success()),
        (
            "unbound volume empty storage class",
            "PVC_EmptySC",
            Status::unresolvable("PersistentVolumeClaim had no pv name and storageClass name"),
        ),
        (
            "unbound volume no storage class",
            "PVC_NoSC",
            Status::unresolvable("storageclass.storage.k8s.io \"Class_0\" not found"),
        ),
        (
            "unbound volume immediate binding mode unset",
            "PVC_ImmediateSC",
            Status::unresolvable("VolumeBindingMode not set for StorageClass \"Class_Immediate\""),
        ),
        (
            "unbound volume immediate binding mode",
            "PVC_Immediate2",
            Status::unresolvable("PersistentVolume had no name"),
        ),
        ("unbound volume wait binding mode", "PVC_WaitSC", Status::skip()),
        ("missing claim", "PVC_missing", Status::unresolvable("persistentvolumeclaim \"PVC_missing\" not found")),
        ("missing pv", "PVC_4", Status::unresolvable("persistentvolume \"Vol_not_exist\" not found")),
    ];
    for (name, claim, want) in cases {
        let (pre, filter) = run(claim, node.clone());
        assert_eq!(pre, want, "{name}");
        if !want.is_success() && !want.is_skip() {
            // Filter without PreFilter state recomputes and fails the same way
            assert_eq!(filter, want, "{name}");
        }
    }
    let pl = VolumeZone { lister: lister(objects()) };
    let (_, s) = pl.pre_filter(&mut CycleState::new(), &pi(pod_with_volumes("p", json!([]))), &Snapshot::default());
    assert!(s.is_skip(), "pod without volume");
}

#[test]
fn hints() {
    let pod = pod_with_claims("pod_1", &["PVC_1"]);
    let claim = other(&pvc("PVC_1", json!({})));
    let unrelated = other(&pvc("PVC_2", json!({})));
    assert_eq!(is_schedulable_after_pvc_change(&pod, None, Some(&claim)), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_pvc_change(&pod, None, Some(&unrelated)), Ok(QueueingHint::QueueSkip));
    let wait = other(&sc("w", "p", Some("WaitForFirstConsumer"), json!({})));
    let imm = other(&sc("i", "p", Some("Immediate"), json!({})));
    assert_eq!(is_schedulable_after_storage_class_added(&pod, None, Some(&wait)), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_storage_class_added(&pod, None, Some(&imm)), Ok(QueueingHint::QueueSkip));
    let a = other(&pv("v", json!({ZONE_GA: "a"}), json!({}), "Bound"));
    let a2 = other(&pv("v", json!({ZONE_GA: "a", "x": "y"}), json!({}), "Bound"));
    let b = other(&pv("v", json!({ZONE_GA: "b"}), json!({}), "Bound"));
    assert_eq!(is_schedulable_after_pv_change(&pod, None, Some(&a)), Ok(QueueingHint::Queue));
    assert_eq!(is_schedulable_after_pv_change(&pod, Some(&a), Some(&a2)), Ok(QueueingHint::QueueSkip));
    assert_eq!(is_schedulable_after_pv_change(&pod, Some(&a), Some(&b)), Ok(QueueingHint::Queue));
}
