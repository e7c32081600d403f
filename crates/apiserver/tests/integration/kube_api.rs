//! The server driven by the `kube` crate over real HTTP(S).

use crate::common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;

fn names(pods: &[Pod]) -> Vec<String> {
    let mut v: Vec<String> = pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn crud_pods_and_nodes() {
    let srv = start().await;
    let client = client(&srv).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    let n = nodes.create(&PostParams::default(), &node("n1")).await.unwrap();
    assert_eq!(n.metadata.generation, None);
    let alloc = n.status.unwrap().allocatable.unwrap();
    assert_eq!(alloc["cpu"].0, "8", "allocatable defaults to capacity");

    let p = pods.create(&PostParams::default(), &pod("web-1", json!({"app": "web"}))).await.unwrap();
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.priority, Some(0));
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(p.status.as_ref().unwrap().qos_class.as_deref(), Some("Burstable"));
    assert!(p.metadata.uid.is_some());
    let rv1: u64 = p.metadata.resource_version.clone().unwrap().parse().unwrap();

    let got = pods.get("web-1").await.unwrap();
    assert_eq!(got.metadata.uid, p.metadata.uid);

    // merge patch on labels
    let patched = pods
        .patch("web-1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})))
        .await
        .unwrap();
    let labels = patched.metadata.labels.unwrap();
    assert_eq!((labels["app"].as_str(), labels["tier"].as_str()), ("web", "front"));
    let rv2: u64 = patched.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv2 > rv1);

    // strategic merge on status conditions keeps other conditions (merge by type)
    let cond = |ty: &str, st: &str| json!({"type": ty, "status": st});
    pods.patch_status(
        "web-1",
        &PatchParams::default(),
        &Patch::Strategic(json!({"status": {"conditions": [cond("Ready", "False")]}})),
    )
    .await
    .unwrap();
    let p = pods
        .patch_status(
            "web-1",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"nominatedNodeName": "n1", "conditions": [cond("PodScheduled", "False")]}}),
            ),
        )
        .await
        .unwrap();
    let st = p.status.unwrap();
    let types: Vec<String> = st.conditions.unwrap().into_iter().map(|c| c.type_).collect();
    assert_eq!(types, ["Ready", "PodScheduled"]);
    assert_eq!(st.nominated_node_name.as_deref(), Some("n1"));
    assert_eq!(p.spec.unwrap().node_name, None, "status patch must not touch spec");

    // main-resource patch ignores status
    let p = pods
        .patch("web-1", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running"}})))
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));

    // json patch
    let p = pods
        .patch(
            "web-1",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]))
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.annotations.unwrap()["a"], "b");

    // already exists
    let err = pods.create(&PostParams::default(), &pod("web-1", json!({}))).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"), "{err:?}");

    pods.delete("web-1", &DeleteParams::default()).await.unwrap();
    let err = pods.get("web-1").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.message == "pods \"web-1\" not found"),
        "{err:?}"
    );
    nodes.delete("n1", &DeleteParams::default()).await.unwrap();
    assert!(nodes.list(&ListParams::default()).await.unwrap().items.is_empty());
    srv.shutdown().await;
}

#[tokio::test]
async fn plain_http_with_token_works_and_validation_errors_name_fields() {
    let srv = start().await;
    let client = http_client(&srv, Some(srv.token()));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut bad = pod("x", json!({}));
    bad.spec.as_mut().unwrap().containers[0].image = None;
    let err = pods.create(&PostParams::default(), &bad).await.unwrap_err();
    let kube::Error::Api(s) = err else { panic!("expected API error") };
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(s.message, "Pod \"x\" is invalid: spec.containers[0].image: Required value");

    let mut p = pod("prio", json!({}));
    p.spec.as_mut().unwrap().priority_class_name = Some("gold".into());
    let err = pods.create(&PostParams::default(), &p).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403 && s.message.contains("no PriorityClass with name gold was found")),
        "{err:?}"
    );
    p.spec.as_mut().unwrap().priority_class_name = Some("system-cluster-critical".into());
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(created.spec.unwrap().priority, Some(2_000_000_000));

    let missing: Api<Pod> = Api::namespaced(http_client(&srv, Some(srv.token())), "nope");
    let err = missing.create(&PostParams::default(), &pod("a", json!({}))).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.message == "namespaces \"nope\" not found"),
        "{err:?}"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn label_and_field_selectors() {
    let srv = start().await;
    let client = client(&srv).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sys: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    for (name, labels) in
        [("a", json!({"app": "web", "tier": "fe"})), ("b", json!({"app": "db"})), ("c", json!({"app": "web"}))]
    {
        pods.create(&PostParams::default(), &pod(name, labels)).await.unwrap();
    }
    sys.create(&PostParams::default(), &pod("s", json!({"app": "web"}))).await.unwrap();
    assert_eq!(bind(&srv, "default", "a", "n1", None).await.0, 201);

    let list = |ns: Api<Pod>, lp: ListParams| async move { names(&ns.list(&lp).await.unwrap().items) };
    assert_eq!(list(pods.clone(), ListParams::default().labels("app=web")).await, ["a", "c"]);
    assert_eq!(list(pods.clone(), ListParams::default().labels("app in (web,db),!tier")).await, ["b", "c"]);
    assert_eq!(list(pods.clone(), ListParams::default().labels("app notin (web)")).await, ["b"]);
    assert_eq!(list(pods.clone(), ListParams::default().labels("tier")).await, ["a"]);
    assert_eq!(list(pods.clone(), ListParams::default().fields("spec.nodeName=n1")).await, ["a"]);
    assert_eq!(list(pods.clone(), ListParams::default().fields("spec.nodeName=")).await, ["b", "c"]);
    assert_eq!(
        list(
            pods.clone(),
            ListParams::default().fields("metadata.name!=b,status.phase!=Succeeded,status.phase!=Failed")
        )
        .await,
        ["a", "c"]
    );
    assert_eq!(
        list(pods.clone(), ListParams::default().fields("spec.schedulerName=default-scheduler").labels("app=db")).await,
        ["b"]
    );
    let all: Api<Pod> = Api::all(client.clone());
    assert_eq!(list(all.clone(), ListParams::default().labels("app=web")).await, ["a", "c", "s"]);
    assert_eq!(list(all, ListParams::default().fields("metadata.namespace=kube-system")).await, ["s"]);
    let err = pods.list(&ListParams::default().labels("app in web")).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 400), "{err:?}");
    srv.shutdown().await;
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let srv = start().await;
    let store = srv.store();
    for i in 0..25 {
        store
            .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i:02}"), "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}))
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let mut lp = ListParams::default().limit(10);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = pods.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 10);
        seen.extend(names(&page.items));
        // Every page reports the first page's resourceVersion (a consistent snapshot point).
        let rv = page.metadata.resource_version.clone();
        first_rv.get_or_insert(rv.clone());
        assert_eq!(Some(rv), first_rv);
        // Writes between pages must not disturb the cursor.
        store.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{pages}")}})).unwrap();
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("p{i:02}")).collect();
    assert_eq!(seen, expected);
    srv.shutdown().await;
}

#[tokio::test]
async fn update_with_stale_resource_version_conflicts() {
    let srv = start().await;
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    let p = pods.create(&PostParams::default(), &pod("u", json!({}))).await.unwrap();
    let mut fresh = p.clone();
    fresh.metadata.labels = Some([("v".to_string(), "1".to_string())].into());
    let updated = pods.replace("u", &PostParams::default(), &fresh).await.unwrap();
    assert_eq!(updated.metadata.labels.unwrap()["v"], "1");
    // `p` still carries the old resourceVersion.
    let mut stale = p;
    stale.metadata.labels = Some([("v".to_string(), "2".to_string())].into());
    let err = pods.replace("u", &PostParams::default(), &stale).await.unwrap_err();
    let kube::Error::Api(s) = err else { panic!() };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(s.message.contains("the object has been modified"), "{}", s.message);
    assert_eq!(pods.get("u").await.unwrap().metadata.labels.unwrap()["v"], "1");
    srv.shutdown().await;
}

#[tokio::test]
async fn binding_sets_node_once() {
    let srv = start().await;
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    let p = pods.create(&PostParams::default(), &pod("b", json!({}))).await.unwrap();
    let uid = p.metadata.uid.clone().unwrap();

    let (code, body) = bind(&srv, "default", "b", "n1", Some("wrong-uid")).await;
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("Precondition failed"), "{body}");

    let (code, body) = bind(&srv, "default", "b", "n1", Some(&uid)).await;
    assert_eq!(code, 201, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status["kind"].as_str(), status["status"].as_str()), (Some("Status"), Some("Success")));

    let bound = pods.get("b").await.unwrap();
    assert_eq!(bound.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
    let conds = bound.status.unwrap().conditions.unwrap();
    assert!(conds.iter().any(|c| c.type_ == "PodScheduled" && c.status == "True"));

    let (code, body) = bind(&srv, "default", "b", "n2", None).await;
    assert_eq!(code, 409);
    assert!(body.contains("pod b is already assigned to node \\\"n1\\\""), "{body}");
    assert_eq!(pods.get("b").await.unwrap().spec.unwrap().node_name.as_deref(), Some("n1"));

    let (code, _) = bind(&srv, "default", "missing", "n1", None).await;
    assert_eq!(code, 404);
    srv.shutdown().await;
}

#[tokio::test]
async fn watch_from_resource_version_replays_subsequent_events() {
    let srv = start().await;
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    pods.create(&PostParams::default(), &pod("before", json!({}))).await.unwrap();
    let rv = pods.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    // These happen before the watch starts: they must be replayed from history.
    pods.create(&PostParams::default(), &pod("w", json!({}))).await.unwrap();
    pods.patch("w", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}}))).await.unwrap();
    let mut stream = pods.watch(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    // And this one after.
    pods.delete("w", &DeleteParams::default()).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await.unwrap().unwrap().unwrap();
        match ev {
            WatchEvent::Added(p) => got.push(("ADDED", p.metadata.name.unwrap())),
            WatchEvent::Modified(p) => got.push(("MODIFIED", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => got.push(("DELETED", p.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    let w = "w".to_string();
    assert_eq!(got, [("ADDED", w.clone()), ("MODIFIED", w.clone()), ("DELETED", w)]);
    srv.shutdown().await;
}

#[tokio::test]
async fn watch_with_label_selector_sees_transitions() {
    let srv = start().await;
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    pods.create(&PostParams::default(), &pod("t", json!({"sel": "no"}))).await.unwrap();
    let rv = pods.get("t").await.unwrap().metadata.resource_version.unwrap();
    let mut stream = pods.watch(&WatchParams::default().labels("sel=yes").timeout(10), &rv).await.unwrap().boxed();
    let set = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"sel": v}}}));
    pods.patch("t", &PatchParams::default(), &set("yes")).await.unwrap();
    pods.patch("t", &PatchParams::default(), &set("no")).await.unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await.unwrap().unwrap().unwrap() {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(_) => kinds.push("DELETED"),
            _ => {}
        }
    }
    assert_eq!(kinds, ["ADDED", "DELETED"]);
    srv.shutdown().await;
}

#[tokio::test]
async fn too_old_resource_version_is_gone_and_watcher_relists() {
    let mut cfg = ephemeral();
    cfg.history_capacity = 5;
    let srv = ksched_apiserver::ApiServer::start(cfg).await.unwrap();
    let client = client(&srv).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let store = srv.store();
    let flood = |from: usize| {
        for i in from..from + 20 {
            store.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}")}})).unwrap();
        }
    };

    // A direct watch from an evicted resourceVersion gets a 410 Expired ERROR event.
    flood(0);
    let mut stream = pods.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await.unwrap().unwrap() {
        Some(WatchEvent::Error(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(e.message.contains("too old resource version"), "{}", e.message);
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }

    // kube_runtime::watcher: its watch ends every second (timeout 1) and resumes
    // from the last pod rv, which the node flood has pushed out of history.
    pods.create(&PostParams::default(), &pod("first", json!({}))).await.unwrap();
    let wc = watcher::Config::default().timeout(1).disable_bookmarks();
    let mut events = watcher(pods.clone(), wc).boxed();
    let mut inits = 0;
    let mut saw_gone = false;
    let mut saw_second = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut flooded = false;
    while !(saw_second && saw_gone) {
        let ev = tokio::time::timeout_at(deadline, events.next()).await.expect("watcher progresses").unwrap();
        match ev {
            Ok(watcher::Event::Init) => inits += 1,
            Ok(watcher::Event::InitDone) if !flooded => {
                flooded = true;
                flood(100);
            }
            Ok(watcher::Event::InitDone) if saw_gone => {
                // Relisted after the 410; anything created now must be seen.
                pods.create(&PostParams::default(), &pod("second", json!({}))).await.unwrap();
            }
            Ok(watcher::Event::InitApply(p) | watcher::Event::Apply(p))
                if p.metadata.name.as_deref() == Some("second") =>
            {
                saw_second = true;
            }
            Err(watcher::Error::WatchError(e)) if e.code == 410 => saw_gone = true,
            _ => {}
        }
    }
    assert!(inits >= 2, "watcher relisted (inits={inits})");
    srv.shutdown().await;
}

#[tokio::test]
async fn bookmarks_arrive_when_allowed() {
    let mut cfg = ephemeral();
    cfg.bookmark_interval = Duration::from_millis(200);
    let srv = ksched_apiserver::ApiServer::start(cfg).await.unwrap();
    let nodes: Api<Node> = Api::all(client(&srv).await);
    let rv = nodes.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    // Writes to other resources advance the global resourceVersion.
    srv.store().create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})).unwrap();
    let want = srv.store().resource_version().to_string();
    let mut stream = nodes.watch(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    match tokio::time::timeout(Duration::from_secs(3), stream.try_next()).await.unwrap().unwrap() {
        Some(WatchEvent::Bookmark(b)) => {
            assert_eq!(b.types.kind, "Node");
            assert_eq!(b.metadata.resource_version, want);
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
    // Without allowWatchBookmarks, none are sent.
    let mut quiet = nodes.watch(&WatchParams::default().disable_bookmarks().timeout(1), &rv).await.unwrap().boxed();
    let ev = tokio::time::timeout(Duration::from_secs(3), quiet.try_next()).await.unwrap().unwrap();
    assert!(ev.is_none(), "stream ends at timeoutSeconds without events: {ev:?}");
    srv.shutdown().await;
}

#[tokio::test]
async fn streaming_list_sends_initial_events_then_marker() {
    let srv = start().await;
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    for n in ["s1", "s2"] {
        pods.create(&PostParams::default(), &pod(n, json!({}))).await.unwrap();
    }
    let mut events = watcher(pods.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.next()).await.unwrap().unwrap().unwrap() {
            watcher::Event::InitApply(p) => initial.push(p.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    initial.sort();
    assert_eq!(initial, ["s1", "s2"]);
    pods.create(&PostParams::default(), &pod("s3", json!({}))).await.unwrap();
    loop {
        if let watcher::Event::Apply(p) =
            tokio::time::timeout(Duration::from_secs(5), events.next()).await.unwrap().unwrap().unwrap()
        {
            assert_eq!(p.metadata.name.as_deref(), Some("s3"));
            break;
        }
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn events_api_v1_is_visible_as_core_events() {
    let srv = start().await;
    let client = client(&srv).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p = pods.create(&PostParams::default(), &pod("ev", json!({}))).await.unwrap();
    let uid = p.metadata.uid.unwrap();
    let v1: Api<EventV1> = Api::namespaced(client.clone(), "default");
    let ev: EventV1 = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "ev.1", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "ev", "namespace": "default", "uid": uid},
        "reason": "FailedScheduling", "note": "0/3 nodes are available", "type": "Warning",
        "action": "Scheduling", "reportingController": "default-scheduler", "reportingInstance": "sched-1"
    }))
    .unwrap();
    v1.create(&PostParams::default(), &ev).await.unwrap();
    // The scheduler's event recorder patches series updates through events.k8s.io.
    v1.patch(
        "ev.1",
        &PatchParams::default(),
        &Patch::Strategic(json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}})),
    )
    .await
    .unwrap();

    let core: Api<CoreEvent> = Api::namespaced(client, "default");
    let fs = format!("involvedObject.name=ev,involvedObject.namespace=default,involvedObject.uid={uid}");
    let list = core.list(&ListParams::default().fields(&fs)).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let e = &list.items[0];
    assert_eq!(e.message.as_deref(), Some("0/3 nodes are available"));
    assert_eq!(e.reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(e.source.as_ref().and_then(|s| s.component.as_deref()), Some("default-scheduler"));
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));
    let none = core.list(&ListParams::default().fields("involvedObject.name=other")).await.unwrap();
    assert!(none.items.is_empty());
    let by_regarding = v1.list(&ListParams::default().fields("regarding.name=ev")).await.unwrap();
    assert_eq!(by_regarding.items[0].note.as_deref(), Some("0/3 nodes are available"));
    srv.shutdown().await;
}

#[tokio::test]
async fn auth_bad_bodies_and_media_types() {
    let srv = start().await;
    // No token: 401 Status through a real client.
    let anon: Api<Pod> = Api::namespaced(http_client(&srv, None), "default");
    let err = anon.list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 401 && s.reason == "Unauthorized"), "{err:?}");
    let wrong: Api<Pod> = Api::namespaced(http_client(&srv, Some("nope")), "default");
    assert!(wrong.list(&ListParams::default()).await.is_err());

    // Health and version are public.
    let (code, body) = raw(&srv, "GET", "/version", &[], b"").await;
    assert_eq!(code, 200);
    assert!(body.contains("\"gitVersion\":\"v1.36.0\""), "{body}");
    assert_eq!(raw(&srv, "GET", "/healthz", &[], b"").await, (200, "ok".to_string()));

    let auth = bearer(&srv);
    let json_ct = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let (code, body) =
        raw(&srv, "POST", "/api/v1/namespaces/default/pods", &json_ct, b"{\"apiVersion\": \"v1\", ").await;
    assert_eq!(code, 400, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "BadRequest");

    let (code, _) = raw(&srv, "PATCH", "/api/v1/nodes/x", &json_ct, b"{}").await;
    assert_eq!(code, 415, "plain JSON is not a patch type");

    let proto = [("Authorization", auth.as_str()), ("Content-Type", "application/vnd.kubernetes.protobuf")];
    let (code, body) = raw(&srv, "POST", "/api/v1/namespaces/default/pods", &proto, b"k8s\0").await;
    assert_eq!(code, 400, "an empty protobuf envelope names no kind: {body}");

    // Protobuf-first Accept headers get protobuf; JSON-first get JSON.
    let accept =
        [("Authorization", auth.as_str()), ("Accept", "application/vnd.kubernetes.protobuf, application/json")];
    let (code, body) = raw(&srv, "GET", "/api/v1/namespaces", &accept, b"").await;
    assert_eq!(code, 200);
    assert!(body.starts_with("k8s\0"), "{body}");
    let accept =
        [("Authorization", auth.as_str()), ("Accept", "application/json, application/vnd.kubernetes.protobuf")];
    let (_, body) = raw(&srv, "GET", "/api/v1/namespaces", &accept, b"").await;
    assert!(body.starts_with("{\"kind\":\"NamespaceList\""), "{body}");

    let (code, _) = raw(&srv, "PUT", "/api/v1/namespaces/default/pods", &json_ct, b"{}").await;
    assert_eq!(code, 405);
    let (code, _) = raw(&srv, "GET", "/api/v1/nonsense", &json_ct, b"").await;
    assert_eq!(code, 404);
    srv.shutdown().await;
}

#[tokio::test]
async fn discovery_and_tables() {
    let srv = start().await;
    let auth = bearer(&srv);
    let h = [("Authorization", auth.as_str())];
    let (_, body) = raw(&srv, "GET", "/apis", &h, b"").await;
    let groups: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = groups["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
    for g in [
        "apps",
        "policy",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "resource.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
    ] {
        assert!(names.contains(&g), "{g} missing from {names:?}");
    }
    // Every served list answers, even when empty (informers start on all of them).
    for path in [
        "/api/v1/configmaps",
        "/api/v1/services",
        "/api/v1/replicationcontrollers",
        "/api/v1/persistentvolumes",
        "/api/v1/persistentvolumeclaims",
        "/apis/apps/v1/replicasets",
        "/apis/apps/v1/statefulsets",
        "/apis/policy/v1/poddisruptionbudgets",
        "/apis/storage.k8s.io/v1/csinodes",
        "/apis/storage.k8s.io/v1/csidrivers",
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        "/apis/storage.k8s.io/v1/volumeattachments",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/apis/resource.k8s.io/v1/resourceclaims",
        "/apis/resource.k8s.io/v1/resourceslices",
        "/apis/resource.k8s.io/v1/deviceclasses",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
    ] {
        let (code, body) = raw(&srv, "GET", path, &h, b"").await;
        assert_eq!(code, 200, "{path}: {body}");
        assert!(body.contains("\"items\":[]"), "{path}: {body}");
    }

    srv.store()
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tp"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
    assert_eq!(bind(&srv, "default", "tp", "node-a", None).await.0, 201);
    let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let th = [("Authorization", auth.as_str()), ("Accept", table_accept)];
    let (code, body) = raw(&srv, "GET", "/api/v1/namespaces/default/pods?includeObject=Object", &th, b"").await;
    assert_eq!(code, 200);
    let t: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(t["kind"], "Table");
    let cols: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(cols, ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]);
    let cells = &t["rows"][0]["cells"];
    assert_eq!(
        (cells[0].as_str(), cells[2].as_str(), cells[6].as_str()),
        (Some("tp"), Some("Pending"), Some("node-a"))
    );
    assert_eq!(t["rows"][0]["object"]["kind"], "Pod");
    srv.shutdown().await;
}

#[tokio::test]
async fn slow_watchers_are_dropped_not_blocking_writers() {
    let mut cfg = ephemeral();
    cfg.watch_buffer = 4;
    let srv = ksched_apiserver::ApiServer::start(cfg).await.unwrap();
    let nodes: Api<Node> = Api::all(client(&srv).await);
    let rv = srv.store().resource_version().to_string();
    // Open a watch but never read it while writes pile up.
    let stream = nodes.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap();
    let store = srv.store();
    tokio::time::timeout(Duration::from_secs(5), async {
        for i in 0..500 {
            store.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}")}})).unwrap();
        }
    })
    .await
    .expect("writers never wait for watchers");
    assert_eq!(store.watcher_count("v1", "Node"), 0, "the lagging watcher was dropped");
    // The dropped stream ends after delivering what was queued; the client would relist.
    let delivered = tokio::time::timeout(Duration::from_secs(10), stream.boxed().collect::<Vec<_>>()).await.unwrap();
    assert!(!delivered.is_empty() && delivered.len() < 500, "got {}", delivered.len());
    srv.shutdown().await;
}

#[tokio::test]
async fn collections_namespaces_apply_dry_run_and_reviews() {
    let srv = start().await;
    let client = client(&srv).await;
    let store = srv.store();
    store.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})).unwrap();
    let team: Api<Pod> = Api::namespaced(client.clone(), "team");
    for (n, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        team.create(&PostParams::default(), &pod(n, json!({"app": app}))).await.unwrap();
    }

    // deletecollection honours selectors
    team.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=x")).await.unwrap();
    assert_eq!(names(&team.list(&ListParams::default()).await.unwrap().items), ["c"]);

    // dry run validates but stores nothing
    let dry = PostParams { dry_run: true, ..Default::default() };
    let would = team.create(&dry, &pod("d", json!({}))).await.unwrap();
    assert_eq!(would.metadata.name.as_deref(), Some("d"));
    assert!(team.get_opt("d").await.unwrap().is_none());

    // server-side apply creates, then merges another manager's intent
    let pp = PatchParams::apply("test").force();
    let applied = team.patch("e", &pp, &Patch::Apply(pod("e", json!({"v": "1"})))).await.unwrap();
    assert_eq!(applied.spec.unwrap().scheduler_name.as_deref(), Some("default-scheduler"));
    let managed = applied.metadata.managed_fields.unwrap();
    assert_eq!((managed[0].manager.as_deref(), managed[0].operation.as_deref()), (Some("test"), Some("Apply")));
    let again = team
        .patch(
            "e",
            &PatchParams::apply("other").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e", "labels": {"v": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(again.metadata.labels.unwrap()["v"], "2");

    // generateName
    let mut gen = pod("", json!({}));
    gen.metadata.name = None;
    gen.metadata.generate_name = Some("gen-".into());
    let g = team.create(&PostParams::default(), &gen).await.unwrap();
    let gname = g.metadata.name.unwrap();
    assert!(gname.starts_with("gen-") && gname.len() == 9, "{gname}");

    // deleting a namespace removes its contents (and watchers see it)
    let rv = store.resource_version().to_string();
    let mut stream = team.watch(&WatchParams::default().timeout(5), &rv).await.unwrap().boxed();
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let mut deleted = Vec::new();
    while deleted.len() < 3 {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await.unwrap().unwrap() {
            Some(WatchEvent::Deleted(p)) => deleted.push(p.metadata.name.unwrap()),
            Some(_) => {}
            None => break,
        }
    }
    deleted.sort();
    let mut want = vec!["c".to_string(), "e".to_string(), gname];
    want.sort();
    assert_eq!(deleted, want);
    assert!(store.list("v1", "Pod", Some("team")).is_empty());
    assert!(store.get("v1", "Namespace", None, "team").is_none());

    // token and access reviews
    let auth = bearer(&srv);
    let h = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": srv.token()}});
    let (code, resp) =
        raw(&srv, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", &h, body.to_string().as_bytes()).await;
    assert_eq!(code, 201);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&resp).unwrap()["status"]["authenticated"], true);
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "bogus"}});
    let (_, resp) =
        raw(&srv, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", &h, body.to_string().as_bytes()).await;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&resp).unwrap()["status"]["authenticated"], false);
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": "x"}});
    let (_, resp) =
        raw(&srv, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", &h, body.to_string().as_bytes()).await;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&resp).unwrap()["status"]["allowed"], true);
    srv.shutdown().await;
}

#[tokio::test]
async fn malformed_inputs_get_client_errors_never_crash() {
    let srv = start().await;
    srv.store()
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
    let auth = bearer(&srv);
    let cases: &[(&str, &str, &str, &str)] = &[
        ("POST", "/api/v1/namespaces/default/pods", "application/json", ""),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", "[]"),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", "{\"metadata\": \"x\"}"),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", "{\"metadata\": {\"name\": \"q\", \"labels\": [1]}, \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"i\"}]}}"),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", "{\"metadata\": {\"name\": \"q\"}, \"spec\": {\"containers\": {\"name\": \"c\"}}}"),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", "{\"apiVersion\": \"apps/v1\", \"metadata\": {\"name\": \"q\"}}"),
        ("POST", "/api/v1/nodes", "application/json", "{\"metadata\": {\"name\": \"n\"}, \"status\": {\"capacity\": \"lots\"}}"),
        ("POST", "/api/v1/nodes", "application/yaml", "metadata: {name: [\n"),
        ("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", "application/json", "{\"metadata\": {\"name\": \"pc\"}}"),
        ("PUT", "/api/v1/namespaces/default/pods/p", "application/json", "{\"metadata\": {\"name\": \"other\"}}"),
        ("PUT", "/api/v1/namespaces/default/pods/p", "application/json", "{\"metadata\": {\"name\": \"p\"}, \"spec\": 7}"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/json-patch+json", "[{\"op\": \"replace\", \"path\": \"\", \"value\": 5}]"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/json-patch+json", "{\"op\": 1}"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json", "{\"spec\": {\"containers\": null}}"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/strategic-merge-patch+json", "{\"spec\": {\"containers\": [{\"name\": \"c\", \"$patch\": \"bogus\"}]}}"),
        ("PATCH", "/api/v1/namespaces/default/pods/p", "application/strategic-merge-patch+json", "\"str\""),
        ("PATCH", "/api/v1/namespaces/default/pods/p/status", "application/merge-patch+json", "{\"status\": 3}"),
        ("POST", "/api/v1/namespaces/default/pods/p/binding", "application/json", "{\"target\": 5}"),
        ("DELETE", "/api/v1/namespaces/default/pods/p", "application/json", "{not json"),
        ("GET", "/api/v1/pods?labelSelector=a+in+(", "application/json", ""),
        ("GET", "/api/v1/pods?fieldSelector=nonsense", "application/json", ""),
        ("GET", "/api/v1/pods?limit=-1", "application/json", ""),
        ("GET", "/api/v1/pods?continue=zz", "application/json", ""),
        ("GET", "/api/v1/pods?watch=1&resourceVersion=abc", "application/json", ""),
        ("GET", "/api/v1/pods?watch=1&timeoutSeconds=x", "application/json", ""),
        ("GET", "/api/v1/namespaces/default/pods/p/nope", "application/json", ""),
        ("GET", "/apis/nope.io/v1/things", "application/json", ""),
    ];
    for (method, path, ct, body) in cases {
        let h = [("Authorization", auth.as_str()), ("Content-Type", *ct)];
        let (code, resp) = raw(&srv, method, path, &h, body.as_bytes()).await;
        assert!((400..500).contains(&code), "{method} {path} {body} -> {code} {resp}");
        let status: serde_json::Value =
            serde_json::from_str(&resp).unwrap_or_else(|e| panic!("{method} {path}: {e}: {resp}"));
        assert_eq!(status["kind"], "Status", "{resp}");
        assert_eq!(status["code"], code, "{resp}");
    }
    // The pod is intact and the server still serves.
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    let p = pods.get("p").await.unwrap();
    assert_eq!(p.spec.unwrap().containers[0].image.as_deref(), Some("i"));
    srv.shutdown().await;
}
