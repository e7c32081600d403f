//! The alpha PodGroup API (`scheduling.k8s.io/v1alpha2`) through a real client: create (status
//! dropped, disruptionMode defaulted), get, list, watch, the status subresource, immutable spec,
//! and delete.

use crate::common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::scheduling::v1alpha2::PodGroup;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn gang(name: &str, min: i32) -> PodGroup {
    serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]}},
        "status": {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
    .unwrap()
}

#[tokio::test]
async fn pod_group_crud_watch_and_status() {
    let srv = common::start().await;
    let client = common::client(&srv).await;
    let api: Api<PodGroup> = Api::namespaced(client, "default");

    let mut watch = api.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    let created = api.create(&PostParams::default(), &gang("train", 8)).await.unwrap();
    assert!(created.status.as_ref().is_none_or(|s| s.conditions.is_none()), "status is the scheduler's to set");
    assert_eq!(created.spec.disruption_mode.as_deref(), Some("Pod"));
    let event = tokio::time::timeout(Duration::from_secs(5), watch.try_next()).await.unwrap().unwrap();
    assert!(matches!(event, Some(WatchEvent::Added(pg)) if pg.metadata.name.as_deref() == Some("train")));

    assert_eq!(api.get("train").await.unwrap().spec.scheduling_policy.gang.unwrap().min_count, 8);
    assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 1);

    // The scheduler reports through the status subresource.
    let status = json!({"status": {"conditions": [{"type": "PodGroupScheduled", "status": "False",
        "reason": "Unschedulable", "message": "pod group is unschedulable", "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let patched = api.patch_status("train", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let cond = &patched.status.unwrap().conditions.unwrap()[0];
    assert_eq!((cond.reason.as_str(), cond.message.as_str()), ("Unschedulable", "pod group is unschedulable"));
    let event = tokio::time::timeout(Duration::from_secs(5), watch.try_next()).await.unwrap().unwrap();
    assert!(matches!(event, Some(WatchEvent::Modified(_))));

    // The policy cannot change.
    let change = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}});
    let err = api.patch("train", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.schedulingPolicy: Invalid value: null: field is immutable"),
                "{}",
                s.message
            );
        }
        e => panic!("unexpected error {e}"),
    }
    // A bad minCount is refused on create, naming the field.
    let err = api.create(&PostParams::default(), &gang("bad", -1)).await.unwrap_err();
    assert!(err.to_string().contains("spec.schedulingPolicy.gang.minCount"), "{err}");

    api.delete("train", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("train").await.unwrap().is_none());
    srv.shutdown().await;
}

/// Priority admission resolves a PodGroup's class into `spec.priority` (the
/// scheduler orders and preempts gangs by it), as it does for pods.
#[tokio::test]
async fn pod_group_priority_class_is_resolved() {
    let srv = common::start().await;
    srv.store()
        .create(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "batch-high"}, "value": 5000}))
        .unwrap();
    let client = common::client(&srv).await;
    let api: Api<PodGroup> = Api::namespaced(client, "default");
    let mut pg = gang("train", 2);
    pg.spec.priority_class_name = Some("batch-high".into());
    let created = api.create(&PostParams::default(), &pg).await.unwrap();
    assert_eq!(created.spec.priority, Some(5000));
    assert_eq!(api.get("train").await.unwrap().spec.priority, Some(5000));

    let mut pg = gang("other", 2);
    pg.spec.priority_class_name = Some("missing".into());
    match api.create(&PostParams::default(), &pg).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{}", s.message),
        e => panic!("unexpected error {e}"),
    }
    srv.shutdown().await;
}
