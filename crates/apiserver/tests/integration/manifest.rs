//! Manifest loading and dependency-ordered creation.

use crate::common;

use std::path::PathBuf;

use ksched_apiserver::manifest::{self, ManifestError};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ksched-manifest-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const POD_IN_TEAM: &str = "apiVersion: v1
kind: Pod
metadata:
  name: api
  namespace: team
spec:
  priorityClassName: high
  containers:
  - name: c
    image: app:1
";

#[tokio::test]
async fn loads_directories_recursively_and_applies_in_dependency_order() {
    let dir = scratch("order");
    // Pods sort before namespaces/classes by path; apply must still order them.
    std::fs::create_dir_all(dir.join("a/nested")).unwrap();
    std::fs::write(dir.join("a/nested/pods.yaml"), format!("---\n{POD_IN_TEAM}---\n# comment only\n")).unwrap();
    std::fs::write(
        dir.join("b.yml"),
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n1}\n  status: {capacity: {cpu: '2'}}\n- apiVersion: scheduling.k8s.io/v1\n  kind: PriorityClass\n  metadata: {name: high}\n  value: 1000\n",
    )
    .unwrap();
    std::fs::write(dir.join("c.json"), r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}"#)
        .unwrap();
    std::fs::write(dir.join("notes.txt"), "ignored").unwrap();

    let ms = manifest::load_paths(std::slice::from_ref(&dir)).unwrap();
    let sources: Vec<String> =
        ms.iter().map(|m| m.source.strip_prefix(&format!("{}/", dir.display())).unwrap().to_string()).collect();
    assert_eq!(sources, ["a/nested/pods.yaml#1", "b.yml#1.items[0]", "b.yml#1.items[1]", "c.json#1"]);

    let srv = common::start().await;
    let store = srv.store();
    let summary = manifest::apply(&store, &ms).unwrap();
    assert_eq!(summary.created, 4);
    assert_eq!(summary.by_kind["Pod"], 1);
    let pod = store.get("v1", "Pod", Some("team"), "api").unwrap();
    assert_eq!(pod["spec"]["priority"], 1000, "priority class existed before the pod");
    let node = store.get("v1", "Node", None, "n1").unwrap();
    assert_eq!(node["status"]["allocatable"]["cpu"], "2");
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn errors_name_file_document_object_and_field() {
    let dir = scratch("errors");
    let file = dir.join("x.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: ok\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\nspec: {}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web-2\n  namespace: nowhere\nspec:\n  containers: [{name: c, image: i}]\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
    )
    .unwrap();
    let ms = manifest::load_paths(std::slice::from_ref(&file)).unwrap();
    assert_eq!(ms.len(), 4);
    let srv = common::start().await;
    let err = manifest::apply(&srv.store(), &ms).unwrap_err();
    let ManifestError::Apply { created, failures } = &err else { panic!("{err}") };
    assert_eq!(*created, 0);
    assert!(srv.store().get("v1", "Node", None, "ok").is_none(), "all or nothing: the valid node was not loaded");
    let f = file.display();
    let lines: Vec<String> = failures.iter().map(|x| x.to_string()).collect();
    assert_eq!(
        lines,
        [
            format!("{f}#2: Pod default/web-1: spec.containers: Required value"),
            format!("{f}#3: Pod nowhere/web-2: namespaces \"nowhere\" not found"),
            format!("{f}#4: Widget w: no matches for kind \"Widget\" in version \"example.com/v1\""),
        ]
    );
    assert!(err.to_string().starts_with("3 of the manifests' objects were refused; nothing was loaded:"), "{err}");

    // Syntax errors name the document and where it starts.
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: [\n",
    )
    .unwrap();
    let err = manifest::load_paths(std::slice::from_ref(&file)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("{f}#2: invalid YAML (document starts at line 5)")), "{msg}");

    let missing = dir.join("missing.yaml");
    let err = manifest::load_paths(std::slice::from_ref(&missing)).unwrap_err();
    assert!(matches!(err, ManifestError::Io { .. }));
    assert!(err.to_string().starts_with(&missing.display().to_string()));
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
