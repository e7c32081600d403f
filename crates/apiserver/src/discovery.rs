//! Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/{g}/{v}`) and `/version`.
//!
//! Only the legacy (unaggregated) formats are served; clients that ask for
//! aggregated discovery fall back to these when they get plain JSON.

use serde_json::{json, Value};

use crate::resources::{groups, versions, Backing, ResourceDef, RESOURCES};

const STORED_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// The Kubernetes version we claim to be.
pub const GIT_VERSION: &str = "v1.36.0";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "emulationMajor": "1",
        "emulationMinor": "36",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else if cfg!(target_arch = "aarch64") { "arm64" } else { std::env::consts::ARCH }),
    })
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(name: &str) -> Value {
    let gvs: Vec<Value> =
        versions(name).iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "preferredVersion": gvs[0].clone(), "versions": gvs})
}

/// `/apis`.
pub fn api_group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(group_doc).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if the group is served.
pub fn api_group(name: &str) -> Option<Value> {
    groups().contains(&name).then(|| {
        let mut g = group_doc(name);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        g
    })
}

fn categories(d: &ResourceDef) -> &'static [&'static str] {
    match d.plural {
        "pods"
        | "services"
        | "replicationcontrollers"
        | "deployments"
        | "replicasets"
        | "statefulsets"
        | "daemonsets"
        | "jobs"
        | "cronjobs" => &["all"],
        _ => &[],
    }
}

fn entry(d: &ResourceDef) -> Value {
    let verbs: &[&str] = match d.backing {
        Backing::Review => &["create"],
        _ => STORED_VERBS,
    };
    let mut e = json!({
        "name": d.plural,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": verbs,
    });
    if !d.short_names.is_empty() {
        e["shortNames"] = json!(d.short_names);
    }
    if !categories(d).is_empty() {
        e["categories"] = json!(categories(d));
    }
    e
}

fn sub(name: String, namespaced: bool, kind: &str, verbs: &[&str]) -> Value {
    json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs})
}

/// `/api/v1` or `/apis/{group}/v1`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let defs: Vec<&ResourceDef> = RESOURCES.iter().filter(|d| d.group == group && d.version == version).collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in &defs {
        resources.push(entry(d));
        if d.has_status {
            resources.push(sub(format!("{}/status", d.plural), d.namespaced, d.kind, &["get", "patch", "update"]));
        }
        if group.is_empty() && d.plural == "pods" {
            resources.push(sub("pods/binding".into(), true, "Binding", &["create"]));
        }
    }
    if group.is_empty() {
        resources.push(sub("bindings".into(), true, "Binding", &["create"]));
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_pods_with_short_names_and_subresources() {
        let l = resource_list("", "v1").unwrap();
        let res = l["resources"].as_array().unwrap();
        let pods = res.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["namespaced"], true);
        assert!(res.iter().any(|r| r["name"] == "pods/binding"));
        assert!(res.iter().any(|r| r["name"] == "nodes/status"));
        assert!(resource_list("nope", "v1").is_none());
        assert!(api_group_list()["groups"].as_array().unwrap().iter().any(|g| g["name"] == "scheduling.k8s.io"));
    }

    #[test]
    fn scheduling_group_serves_the_alpha_pod_group_api() {
        let g = api_group("scheduling.k8s.io").unwrap();
        assert_eq!(g["preferredVersion"]["version"], "v1");
        let versions: Vec<&str> =
            g["versions"].as_array().unwrap().iter().filter_map(|v| v["version"].as_str()).collect();
        assert_eq!(versions, ["v1", "v1alpha2"]);
        let l = resource_list("scheduling.k8s.io", "v1alpha2").unwrap();
        let names: Vec<&str> = l["resources"].as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(names, ["podgroups", "podgroups/status", "workloads"]);
        assert!(resource_list("scheduling.k8s.io", "v1").unwrap()["resources"].as_array().unwrap().len() == 1);
    }
}
