//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::resources::ResourceDef;

/// What each row carries in its `object` field (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A PartialObjectMetadata (the default).
    Metadata,
    /// The full object.
    Object,
}

/// Table rendering options from the request.
#[derive(Debug, Clone, Copy)]
pub struct TableOpts {
    /// Row object content.
    pub include: IncludeObject,
    /// Whether the client asked for `meta.k8s.io/v1beta1`.
    pub beta: bool,
}

struct Col {
    name: &'static str,
    ty: &'static str,
    priority: u8,
}

const fn col(name: &'static str, ty: &'static str, priority: u8) -> Col {
    Col { name, ty, priority }
}

const NAME: Col = col("Name", "string", 0);
const AGE: Col = col("Age", "string", 0);

fn columns(def: &ResourceDef) -> Vec<Col> {
    match (def.group, def.plural) {
        ("", "pods") => vec![
            NAME,
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            AGE,
            col("IP", "string", 1),
            col("Node", "string", 1),
            col("Nominated Node", "string", 1),
            col("Readiness Gates", "string", 1),
        ],
        ("", "nodes") => vec![
            NAME,
            col("Status", "string", 0),
            col("Roles", "string", 0),
            AGE,
            col("Version", "string", 0),
            col("Internal-IP", "string", 1),
            col("External-IP", "string", 1),
            col("OS-Image", "string", 1),
            col("Kernel-Version", "string", 1),
            col("Container-Runtime", "string", 1),
        ],
        (_, "events") => vec![
            col("Last Seen", "string", 0),
            col("Type", "string", 0),
            col("Reason", "string", 0),
            col("Object", "string", 0),
            col("Subobject", "string", 1),
            col("Source", "string", 1),
            col("Message", "string", 0),
            col("First Seen", "string", 1),
            col("Count", "integer", 1),
            col("Name", "string", 1),
        ],
        ("", "namespaces") => vec![NAME, col("Status", "string", 0), AGE],
        ("scheduling.k8s.io", "priorityclasses") => vec![
            NAME,
            col("Value", "integer", 0),
            col("Global-Default", "boolean", 0),
            AGE,
            col("PreemptionPolicy", "string", 0),
        ],
        ("scheduling.k8s.io", "podgroups") => {
            vec![NAME, col("Policy", "string", 0), col("Workload", "string", 0), col("Status", "string", 0), AGE]
        }
        ("resource.k8s.io", "resourceclaims") => vec![NAME, col("State", "string", 0), AGE],
        ("resource.k8s.io", "resourceslices") => {
            vec![NAME, col("Node", "string", 0), col("Driver", "string", 0), col("Pool", "string", 0), AGE]
        }
        _ => vec![NAME, AGE],
    }
}

/// A claim's state as kubectl shows it: `pending`, `allocated`, `allocated,reserved`, with
/// `deleted` first while it is being deleted.
fn claim_state(claim: &Value) -> String {
    let deleted = claim.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    let allocated = claim.pointer("/status/allocation").is_some_and(|a| !a.is_null());
    let reserved = claim.pointer("/status/reservedFor").and_then(Value::as_array).is_some_and(|r| !r.is_empty());
    let mut states = Vec::new();
    if deleted {
        states.push("deleted");
    }
    if !allocated {
        if !deleted {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if reserved {
            states.push("reserved");
        }
    }
    states.join(",")
}

/// Renders `items` (already in the requested API's shape) as a Table.
pub fn table_for(def: &ResourceDef, items: &[&Value], opts: &TableOpts, list_meta: Value) -> Value {
    let cols = columns(def);
    let now = Utc::now();
    let col_defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.ty,
                "format": if c.name == "Name" { "name" } else { "" },
                "description": "",
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let mut row = json!({"cells": cells(def, obj, now)});
            match opts.include {
                IncludeObject::None => {}
                IncludeObject::Object => row["object"] = (*obj).clone(),
                IncludeObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": if opts.beta { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
                        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                    })
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": if opts.beta { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": list_meta,
        "columnDefinitions": col_defs,
        "rows": rows,
    })
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn or_none(v: &str) -> String {
    if v.is_empty() {
        "<none>".into()
    } else {
        v.to_string()
    }
}

fn parse_time(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|t| t.with_timezone(&Utc))
}

fn age(obj: &Value, now: DateTime<Utc>) -> String {
    since(parse_time(s(obj, "/metadata/creationTimestamp")), now)
}

fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_duration((now - t).num_seconds()),
        None => "<unknown>".into(),
    }
}

/// Short human durations in the style kubectl prints (`45s`, `3m12s`, `5h`, `2d3h`).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let mins = secs / 60;
    let hours = mins / 60;
    let days = hours / 24;
    if secs < 120 {
        format!("{secs}s")
    } else if mins < 10 {
        if secs % 60 == 0 {
            format!("{mins}m")
        } else {
            format!("{mins}m{}s", secs % 60)
        }
    } else if mins < 180 {
        format!("{mins}m")
    } else if hours < 8 {
        if mins % 60 == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{}m", mins % 60)
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        if hours % 24 == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{}h", hours % 24)
        }
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if days < 365 * 8 {
        let years = days / 365;
        if days % 365 == 0 {
            format!("{years}y")
        } else {
            format!("{years}y{}d", days % 365)
        }
    } else {
        format!("{}y", days / 365)
    }
}

fn cells(def: &ResourceDef, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(obj, "/metadata/name"));
    match (def.group, def.plural) {
        ("", "pods") => pod_cells(obj, now),
        ("", "nodes") => node_cells(obj, now),
        (_, "events") => event_cells(obj, now),
        ("", "namespaces") => vec![name, json!(s(obj, "/status/phase")), json!(age(obj, now))],
        ("scheduling.k8s.io", "priorityclasses") => vec![
            name,
            obj.get("value").cloned().unwrap_or(json!(0)),
            json!(obj.get("globalDefault").and_then(Value::as_bool).unwrap_or(false)),
            json!(age(obj, now)),
            json!(s(obj, "/preemptionPolicy")),
        ],
        ("scheduling.k8s.io", "podgroups") => pod_group_cells(obj, name, now),
        ("resource.k8s.io", "resourceclaims") => vec![name, json!(claim_state(obj)), json!(age(obj, now))],
        ("resource.k8s.io", "resourceslices") => vec![
            name,
            json!(s(obj, "/spec/nodeName")),
            json!(s(obj, "/spec/driver")),
            json!(s(obj, "/spec/pool/name")),
            json!(age(obj, now)),
        ],
        _ => vec![name, json!(age(obj, now))],
    }
}

/// Policy (Gang/Basic), Workload, and Status: Pending until PodGroupScheduled is reported,
/// then Scheduled/Unschedulable, or a DisruptionTarget's reason.
fn pod_group_cells(pg: &Value, name: Value, now: DateTime<Utc>) -> Vec<Value> {
    let policy = if pg.pointer("/spec/schedulingPolicy/gang").is_some_and(|g| !g.is_null()) { "Gang" } else { "Basic" };
    let conditions = pg.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let find = |t: &str| conditions.iter().rev().find(|c| s(c, "/type") == t);
    let mut status = "Pending".to_string();
    if let Some(c) = find("PodGroupScheduled") {
        status = if s(c, "/status") == "True" { "Scheduled" } else { "Unschedulable" }.into();
    }
    if let Some(c) = find("DisruptionTarget") {
        status = s(c, "/reason").to_string();
    }
    let workload = or_none(s(pg, "/spec/podGroupTemplateRef/workload/workloadName"));
    vec![name, json!(policy), json!(workload), json!(status), json!(age(pg, now))]
}

fn pod_cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    let statuses = pod.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    let ready = statuses.iter().filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true)).count();
    let restarts: i64 = statuses.iter().filter_map(|c| c.get("restartCount").and_then(Value::as_i64)).sum();
    let mut status = s(pod, "/status/phase").to_string();
    if !s(pod, "/status/reason").is_empty() {
        status = s(pod, "/status/reason").to_string();
    }
    // Upstream's printer shows a gated pod's PodScheduled reason.
    let conditions = pod.pointer("/status/conditions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if conditions.iter().any(|c| s(c, "/type") == "PodScheduled" && s(c, "/reason") == "SchedulingGated") {
        status = "SchedulingGated".into();
    }
    for c in &statuses {
        let waiting = s(c, "/state/waiting/reason");
        let terminated = s(c, "/state/terminated/reason");
        if !waiting.is_empty() {
            status = waiting.to_string();
        } else if !terminated.is_empty() && status == "Running" {
            status = terminated.to_string();
        }
    }
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        status = "Terminating".into();
    }
    let gates = pod.pointer("/spec/readinessGates").and_then(Value::as_array);
    let gates = match gates {
        Some(g) if !g.is_empty() => {
            let conds = pod.pointer("/status/conditions").and_then(Value::as_array);
            let true_count = g
                .iter()
                .filter(|gate| {
                    let t = s(gate, "/conditionType");
                    conds.is_some_and(|cs| cs.iter().any(|c| s(c, "/type") == t && s(c, "/status") == "True"))
                })
                .count();
            format!("{true_count}/{}", g.len())
        }
        _ => "<none>".into(),
    };
    vec![
        json!(s(pod, "/metadata/name")),
        json!(format!("{ready}/{containers}")),
        json!(status),
        json!(restarts.to_string()),
        json!(age(pod, now)),
        json!(or_none(s(pod, "/status/podIP"))),
        json!(or_none(s(pod, "/spec/nodeName"))),
        json!(or_none(s(pod, "/status/nominatedNodeName"))),
        json!(gates),
    ]
}

fn node_cells(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let conds = node.pointer("/status/conditions").and_then(Value::as_array);
    let ready = conds.and_then(|cs| cs.iter().find(|c| s(c, "/type") == "Ready"));
    let mut status = match ready.map(|c| s(c, "/status")) {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        Some(role.to_string())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().map(String::from)
                    } else {
                        None
                    }
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let address = |ty: &str| -> String {
        let addrs = node.pointer("/status/addresses").and_then(Value::as_array);
        or_none(
            addrs.and_then(|a| a.iter().find(|x| s(x, "/type") == ty)).map(|x| s(x, "/address")).unwrap_or_default(),
        )
    };
    vec![
        json!(s(node, "/metadata/name")),
        json!(status),
        json!(if roles.is_empty() { "<none>".to_string() } else { roles.join(",") }),
        json!(age(node, now)),
        json!(s(node, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or_none(s(node, "/status/nodeInfo/osImage"))),
        json!(or_none(s(node, "/status/nodeInfo/kernelVersion"))),
        json!(or_none(s(node, "/status/nodeInfo/containerRuntimeVersion"))),
    ]
}

/// Handles both the core/v1 and events.k8s.io/v1 shapes.
fn event_cells(ev: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let pick = |a: &str, b: &str| -> String {
        let v = s(ev, a);
        if v.is_empty() { s(ev, b) } else { v }.to_string()
    };
    let regarding = ev.get("involvedObject").or_else(|| ev.get("regarding")).cloned().unwrap_or(Value::Null);
    let last = [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/deprecatedLastTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .find_map(|p| parse_time(s(ev, p)));
    let first = ["/firstTimestamp", "/deprecatedFirstTimestamp", "/eventTime", "/metadata/creationTimestamp"]
        .iter()
        .find_map(|p| parse_time(s(ev, p)));
    let count = ev.get("count").or_else(|| ev.pointer("/series/count")).and_then(Value::as_i64).unwrap_or(1);
    let source = {
        let c = pick("/source/component", "/reportingController");
        let c = if c.is_empty() { s(ev, "/reportingComponent").to_string() } else { c };
        let host = s(ev, "/source/host");
        if host.is_empty() {
            c
        } else {
            format!("{c}, {host}")
        }
    };
    vec![
        json!(since(last, now)),
        json!(s(ev, "/type")),
        json!(s(ev, "/reason")),
        json!(format!("{}/{}", s(&regarding, "/kind").to_lowercase(), s(&regarding, "/name"))),
        json!(s(&regarding, "/fieldPath")),
        json!(source),
        json!(pick("/message", "/note")),
        json!(since(first, now)),
        json!(count),
        json!(s(ev, "/metadata/name")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{def, ids};

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(185), "3m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3600 * 5 + 60), "5h1m");
        assert_eq!(human_duration(3600 * 30), "30h");
        assert_eq!(human_duration(3600 * 24 * 3 + 3600), "3d1h");
        assert_eq!(human_duration(3600 * 24 * 30), "30d");
    }

    #[test]
    fn pod_group_rows_show_policy_workload_and_status() {
        let pg = |spec: Value, conditions: Value| json!({"metadata": {"name": "train"}, "spec": spec, "status": {"conditions": conditions}});
        let gang = json!({"schedulingPolicy": {"gang": {"minCount": 8}},
            "podGroupTemplateRef": {"workload": {"workloadName": "job", "podGroupTemplateName": "workers"}}});
        let basic = json!({"schedulingPolicy": {"basic": {}}});
        let scheduled = json!([{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}]);
        let unschedulable = json!([{"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable"}]);
        let preempted = json!([{"type": "PodGroupScheduled", "status": "True"},
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]);
        let id = crate::resources::by_kind("scheduling.k8s.io/v1alpha2", "PodGroup").unwrap();
        let opts = TableOpts { include: IncludeObject::None, beta: false };
        let row = |obj: Value| table_for(def(id), &[&obj], &opts, json!({}))["rows"][0]["cells"].clone();
        assert_eq!(row(pg(gang.clone(), json!([]))), json!(["train", "Gang", "job", "Pending", "<unknown>"]));
        assert_eq!(row(pg(basic, scheduled)), json!(["train", "Basic", "<none>", "Scheduled", "<unknown>"]));
        assert_eq!(row(pg(gang.clone(), unschedulable))[3], "Unschedulable");
        assert_eq!(row(pg(gang, preempted))[3], "PreemptionByScheduler");
        let cols = table_for(def(id), &[], &opts, json!({}))["columnDefinitions"].clone();
        let names: Vec<&str> = cols.as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names, ["Name", "Policy", "Workload", "Status", "Age"]);
    }

    #[test]
    fn pod_and_node_rows() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
            "status": {"phase": "Pending"}});
        let opts = TableOpts { include: IncludeObject::Metadata, beta: false };
        let t = table_for(def(ids::pods()), &[&pod], &opts, json!({}));
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["p", "0/1", "Pending", "0", "<unknown>", "<none>", "n1", "<none>", "<none>"])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["columnDefinitions"][6]["priority"], 1);

        let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.36.0"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
        let t = table_for(def(ids::nodes()), &[&node], &opts, json!({}));
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "Ready,SchedulingDisabled");
        assert_eq!(cells[2], "control-plane");
        assert_eq!(cells[4], "v1.36.0");
        assert_eq!(cells[5], "10.0.0.1");
    }

    #[test]
    fn dra_rows_show_claim_state_and_slice_placement() {
        let find = |plural: &str| {
            crate::resources::RESOURCES.iter().find(|d| d.group == "resource.k8s.io" && d.plural == plural).unwrap()
        };
        let opts = TableOpts { include: IncludeObject::None, beta: false };
        let pending = json!({"metadata": {"name": "a"}});
        let reserved = json!({"metadata": {"name": "b"}, "status": {"allocation": {}, "reservedFor": [{"name": "p"}]}});
        let deleted = json!({"metadata": {"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"allocation": {}}});
        let t = table_for(find("resourceclaims"), &[&pending, &reserved, &deleted], &opts, json!({}));
        let states: Vec<&Value> = (0..3).map(|i| &t["rows"][i]["cells"][1]).collect();
        assert_eq!(states, [&json!("pending"), &json!("allocated,reserved"), &json!("deleted,allocated")]);
        assert_eq!(t["columnDefinitions"][1]["name"], "State");
        let slice = json!({"metadata": {"name": "s"}, "spec": {"nodeName": "n1", "driver": "gpu.example.com", "pool": {"name": "n1"}}});
        let t = table_for(find("resourceslices"), &[&slice], &opts, json!({}));
        assert_eq!(
            t["rows"][0]["cells"].as_array().unwrap()[..4],
            [json!("s"), json!("n1"), json!("gpu.example.com"), json!("n1")]
        );
    }
}
