//! `/openapi/v3` and `/openapi/v2`: the API's schemas, generated from the
//! k8s-openapi types of every served kind (their `schemars` implementations
//! carry upstream's definition names and descriptions).
//!
//! kubectl reads these documents to validate (it checks that PATCH declares
//! `fieldValidation`, then lets the server validate), to compute client-side
//! `apply`/`edit` patches (`x-kubernetes-patch-strategy` and merge keys), and
//! for `explain` (`x-kubernetes-group-version-kind` on the kind's schema).
//! Documents are built once, on first request, and cached.

mod gnostic;
mod negotiate;

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use schemars::generate::SchemaSettings;
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};

use crate::discovery::GIT_VERSION;
use crate::error::ApiError;
use crate::patch;
use crate::resources::{Backing, ResourceDef, RESOURCES};

/// Adds the schema of a served kind to `gen` (by group and kind).
fn add_kind(gen: &mut SchemaGenerator, group: &str, kind: &str) -> bool {
    use k8s_openapi::api::{
        apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz, batch::v1 as batch,
        coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery, events::v1 as events,
        policy::v1 as policy, resource::v1 as resource, scheduling::v1 as scheduling, storage::v1 as storage,
    };
    macro_rules! kinds {
        ($($g:literal $k:literal => $t:ty),* $(,)?) => {
            match (group, kind) {
                $(($g, $k) => { gen.subschema_for::<$t>(); true })*
                _ => false,
            }
        };
    }
    kinds! {
        "" "Namespace" => core::Namespace,
        "" "Node" => core::Node,
        "" "Pod" => core::Pod,
        "" "Event" => core::Event,
        "" "Service" => core::Service,
        "" "Endpoints" => core::Endpoints,
        "" "ReplicationController" => core::ReplicationController,
        "" "PersistentVolume" => core::PersistentVolume,
        "" "PersistentVolumeClaim" => core::PersistentVolumeClaim,
        "" "ConfigMap" => core::ConfigMap,
        "" "Secret" => core::Secret,
        "" "ServiceAccount" => core::ServiceAccount,
        "" "LimitRange" => core::LimitRange,
        "" "ResourceQuota" => core::ResourceQuota,
        "" "PodTemplate" => core::PodTemplate,
        "events.k8s.io" "Event" => events::Event,
        "coordination.k8s.io" "Lease" => coordination::Lease,
        "policy" "PodDisruptionBudget" => policy::PodDisruptionBudget,
        "storage.k8s.io" "StorageClass" => storage::StorageClass,
        "storage.k8s.io" "CSINode" => storage::CSINode,
        "storage.k8s.io" "CSIDriver" => storage::CSIDriver,
        "storage.k8s.io" "CSIStorageCapacity" => storage::CSIStorageCapacity,
        "storage.k8s.io" "VolumeAttachment" => storage::VolumeAttachment,
        "storage.k8s.io" "VolumeAttributesClass" => storage::VolumeAttributesClass,
        "apps" "Deployment" => apps::Deployment,
        "apps" "ReplicaSet" => apps::ReplicaSet,
        "apps" "StatefulSet" => apps::StatefulSet,
        "apps" "DaemonSet" => apps::DaemonSet,
        "apps" "ControllerRevision" => apps::ControllerRevision,
        "batch" "Job" => batch::Job,
        "batch" "CronJob" => batch::CronJob,
        "scheduling.k8s.io" "PriorityClass" => scheduling::PriorityClass,
        "scheduling.k8s.io" "PodGroup" => k8s_openapi::api::scheduling::v1alpha2::PodGroup,
        "scheduling.k8s.io" "Workload" => k8s_openapi::api::scheduling::v1alpha2::Workload,
        "resource.k8s.io" "ResourceClaim" => resource::ResourceClaim,
        "resource.k8s.io" "ResourceClaimTemplate" => resource::ResourceClaimTemplate,
        "resource.k8s.io" "ResourceSlice" => resource::ResourceSlice,
        "resource.k8s.io" "DeviceClass" => resource::DeviceClass,
        "discovery.k8s.io" "EndpointSlice" => discovery::EndpointSlice,
        "authentication.k8s.io" "TokenReview" => authn::TokenReview,
        "authentication.k8s.io" "SelfSubjectReview" => authn::SelfSubjectReview,
        "authorization.k8s.io" "SubjectAccessReview" => authz::SubjectAccessReview,
        "authorization.k8s.io" "SelfSubjectAccessReview" => authz::SelfSubjectAccessReview,
    }
}

/// The upstream definition name of a kind (`io.k8s.api.core.v1.Pod`).
pub fn definition_name(d: &ResourceDef) -> String {
    let pkg = match d.group {
        "" => "core",
        g => g.strip_suffix(".k8s.io").unwrap_or(g),
    };
    format!("io.k8s.api.{pkg}.{}.{}", d.version, d.kind)
}

fn gvk(d: &ResourceDef) -> Value {
    json!({"group": d.group, "version": d.version, "kind": d.kind})
}

/// The definitions reachable from `defs`, with GVK and patch extensions.
fn definitions(defs: &[&ResourceDef], settings: SchemaSettings) -> Map<String, Value> {
    let mut gen = SchemaGenerator::new(settings);
    for d in defs {
        add_kind(&mut gen, d.group, d.kind);
    }
    let mut out = gen.take_definitions(true);
    for d in defs {
        if let Some(Value::Object(s)) = out.get_mut(&definition_name(d)) {
            s.insert("x-kubernetes-group-version-kind".into(), json!([gvk(d)]));
        }
    }
    for (name, schema) in out.iter_mut() {
        add_patch_extensions(name, schema);
    }
    out
}

/// Marks list properties with the strategic-merge semantics the server applies.
fn add_patch_extensions(def_name: &str, schema: &mut Value) {
    let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (field, prop) in props.iter_mut() {
        if prop.get("type").and_then(Value::as_str) != Some("array") {
            continue;
        }
        let container_ports = def_name.ends_with(".Container") || def_name.ends_with(".EphemeralContainer");
        if let Some(strategy) = patch::list_merge(field, container_ports) {
            let Some(p) = prop.as_object_mut() else { continue };
            match strategy {
                Some(key) => {
                    p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
                    let strategy = if field == "volumes" { "merge,retainKeys" } else { "merge" };
                    p.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
                }
                None => {
                    p.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
                }
            }
        }
    }
}

fn gv_path(d: &ResourceDef) -> String {
    if d.group.is_empty() {
        format!("api/{}", d.version)
    } else {
        format!("apis/{}/{}", d.group, d.version)
    }
}

fn camel(s: &str) -> String {
    s.split(['.', '-'])
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

/// `CoreV1`, `SchedulingV1`, `ResourceV1`, used in operation ids.
fn op_group(d: &ResourceDef) -> String {
    let g = if d.group.is_empty() { "core" } else { d.group.strip_suffix(".k8s.io").unwrap_or(d.group) };
    format!("{}{}", camel(g), camel(d.version))
}

fn query(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn path_param(name: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}})
}

const PATCH_TYPES: [&str; 4] = [
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// The operations of one resource, as v3 path items.
fn v3_paths(d: &ResourceDef, paths: &mut Map<String, Value>) {
    let base = format!("/{}", gv_path(d));
    let schema_ref = json!({"$ref": format!("#/components/schemas/{}", definition_name(d))});
    let ok = |code: &str| json!({code: {"description": "OK", "content": {"application/json": {"schema": schema_ref.clone()}}}});
    let ns = if d.namespaced { "Namespaced" } else { "" };
    let ext = |action: &str, op: Value| -> Value {
        let mut op = op;
        op["x-kubernetes-action"] = json!(action);
        op["x-kubernetes-group-version-kind"] = gvk(d);
        op
    };
    let opid = |verb: &str, suffix: &str| format!("{verb}{}{ns}{}{suffix}", op_group(d), d.kind);
    let collection = if d.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", d.plural)
    } else {
        format!("{base}/{}", d.plural)
    };
    let mut common = vec![];
    if d.namespaced {
        common.push(path_param("namespace"));
    }
    let write_params = || {
        vec![
            query("dryRun", "When present, indicates that modifications should not be persisted."),
            query("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
            query("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict."),
        ]
    };
    let body = json!({"content": {"*/*": {"schema": schema_ref.clone()}}, "required": true});
    if matches!(d.backing, Backing::Review) {
        let post = ext(
            "post",
            json!({"operationId": opid("create", ""), "parameters": write_params(), "requestBody": body, "responses": ok("201")}),
        );
        paths.insert(collection, json!({"post": post}));
        return;
    }
    let list_params =
        ["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch", "timeoutSeconds"]
            .map(|p| query(p, ""));
    paths.insert(
        collection.clone(),
        json!({
            "parameters": common,
            "get": ext("list", json!({"operationId": opid("list", ""), "parameters": list_params, "responses": {"200": {"description": "OK"}}})),
            "post": ext("post", json!({"operationId": opid("create", ""), "parameters": write_params(), "requestBody": body, "responses": ok("201")})),
        }),
    );
    let mut item_params = common.clone();
    item_params.insert(0, path_param("name"));
    let mut patch_params = write_params();
    patch_params.push(query("force", "Force is going to \"force\" Apply requests."));
    let patch_body: Map<String, Value> =
        PATCH_TYPES.iter().map(|t| (t.to_string(), json!({"schema": {"type": "object"}}))).collect();
    let item_ops = |suffix: &str| {
        json!({
            "parameters": item_params,
            "get": ext("get", json!({"operationId": opid("read", suffix), "responses": ok("200")})),
            "put": ext("put", json!({"operationId": opid("replace", suffix), "parameters": write_params(), "requestBody": body, "responses": ok("200")})),
            "patch": ext("patch", json!({"operationId": opid("patch", suffix), "parameters": patch_params,
                "requestBody": {"content": patch_body, "required": true}, "responses": ok("200")})),
        })
    };
    let mut item = item_ops("");
    item["delete"] =
        ext("delete", json!({"operationId": opid("delete", ""), "responses": {"200": {"description": "OK"}}}));
    paths.insert(format!("{collection}/{{name}}"), item);
    if d.has_status {
        paths.insert(format!("{collection}/{{name}}/status"), item_ops("Status"));
    }
}

fn defs_of_gv(gv: &str) -> Vec<&'static ResourceDef> {
    RESOURCES.iter().filter(|d| gv_path(d) == gv).collect()
}

fn v3_doc(gv: &str) -> Option<Value> {
    let defs = defs_of_gv(gv);
    if defs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for d in &defs {
        v3_paths(d, &mut paths);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": definitions(&defs, SchemaSettings::openapi3())},
    }))
}

fn v2_settings() -> SchemaSettings {
    let mut settings = SchemaSettings::draft07();
    settings.meta_schema = None;
    // Swagger 2.0 (and upstream's v2 document) keeps `$ref` next to `description`.
    settings.transforms.clear();
    settings
}

/// Every served kind's schema and what it references (`#/definitions/...`
/// refs), for checking request bodies the way the decoder would.
pub fn schemas() -> &'static Map<String, Value> {
    static DEFS: OnceLock<Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| definitions(&RESOURCES.iter().collect::<Vec<_>>(), v2_settings()))
}

fn v2_doc() -> Value {
    let defs: Vec<&ResourceDef> = RESOURCES.iter().collect();
    let settings = v2_settings();
    let mut paths = Map::new();
    for d in &defs {
        let mut v3 = Map::new();
        v3_paths(d, &mut v3);
        for (p, item) in v3 {
            paths.insert(p, v3_item_to_v2(item));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "definitions": definitions(&defs, settings),
    })
}

/// Converts a v3 path item to Swagger 2.0 (parameters carry `type`, bodies are parameters).
fn v3_item_to_v2(item: Value) -> Value {
    let conv_param = |p: &Value| {
        let mut p = p.clone();
        if let Some(s) = p.as_object_mut().and_then(|m| m.remove("schema")) {
            p["type"] = s.get("type").cloned().unwrap_or(json!("string"));
            p["uniqueItems"] = json!(true);
        }
        p
    };
    let mut out = Map::new();
    let Value::Object(item) = item else { return Value::Object(out) };
    for (k, v) in item {
        if k == "parameters" {
            out.insert(k, Value::Array(v.as_array().into_iter().flatten().map(conv_param).collect()));
            continue;
        }
        let Value::Object(mut op) = v else { continue };
        let mut params: Vec<Value> = op
            .remove("parameters")
            .and_then(|p| p.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(conv_param)
            .collect();
        if let Some(body) = op.remove("requestBody") {
            let content = body.get("content").and_then(Value::as_object);
            if let Some(c) = content {
                op.insert("consumes".into(), json!(c.keys().collect::<Vec<_>>()));
            }
            let schema = content.and_then(|c| c.values().next()).and_then(|m| m.get("schema")).cloned();
            params.insert(0, json!({"name": "body", "in": "body", "required": true, "schema": schema.unwrap_or(json!({"type": "object"}))}));
        }
        if !params.is_empty() {
            op.insert("parameters".into(), Value::Array(params));
        }
        if let Some(Value::Object(resps)) = op.remove("responses") {
            let mut r2 = Map::new();
            for (code, r) in resps {
                let mut nr = json!({"description": r.get("description").cloned().unwrap_or(json!("OK"))});
                if let Some(s) = r.pointer("/content/application~1json/schema") {
                    let s = s.to_string().replace("#/components/schemas/", "#/definitions/");
                    nr["schema"] = serde_json::from_str(&s).unwrap_or(Value::Null);
                }
                r2.insert(code, nr);
            }
            op.insert("responses".into(), Value::Object(r2));
        }
        op.insert(
            "produces".into(),
            json!(["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]),
        );
        op.insert("schemes".into(), json!(["https"]));
        out.insert(k, Value::Object(op));
    }
    Value::Object(out)
}

/// FNV-1a, for the `hash` that lets clients cache documents by URL.
fn hash(b: &[u8]) -> String {
    let h = b.iter().fold(0xcbf29ce484222325u64, |h, c| (h ^ u64::from(*c)).wrapping_mul(0x100000001b3));
    format!("{h:016X}")
}

struct V3Cache {
    docs: HashMap<String, Bytes>,
    index: Bytes,
}

fn v3_cache() -> &'static V3Cache {
    static CACHE: OnceLock<V3Cache> = OnceLock::new();
    CACHE.get_or_init(|| {
        let mut docs = HashMap::new();
        let mut paths = Map::new();
        for d in RESOURCES {
            let gv = gv_path(d);
            if docs.contains_key(&gv) {
                continue;
            }
            let Some(doc) = v3_doc(&gv) else { continue };
            let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
            paths.insert(gv.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash(&bytes))}));
            docs.insert(gv, bytes);
        }
        let index = Bytes::from(serde_json::to_vec(&json!({"paths": paths})).unwrap_or_default());
        V3Cache { docs, index }
    })
}

fn v2_cache() -> &'static (Bytes, Bytes) {
    static CACHE: OnceLock<(Bytes, Bytes)> = OnceLock::new();
    CACHE.get_or_init(|| {
        let doc = v2_doc();
        let json = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        let pb = Bytes::from(gnostic::document(&doc));
        (json, pb)
    })
}

fn respond(body: Bytes, content_type: &'static str) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

/// kube-openapi's answer when no offered form is acceptable: 406 with an empty body.
fn not_acceptable() -> Response {
    let mut resp = StatusCode::NOT_ACCEPTABLE.into_response();
    resp.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

fn accept(headers: &HeaderMap) -> &str {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// `/openapi/v3` (index, always JSON) and `/openapi/v3/{api/v1 | apis/g/v}`
/// (JSON; there is no protobuf form of these, so a request that accepts only
/// protobuf is 406).
pub fn serve_v3(gv: Option<&str>, headers: &HeaderMap) -> Result<Response, ApiError> {
    let cache = v3_cache();
    let Some(gv) = gv else {
        return Ok(respond(cache.index.clone(), "application/json"));
    };
    let body = cache
        .docs
        .get(gv.trim_matches('/'))
        .cloned()
        .ok_or_else(|| ApiError::no_route(&format!("/openapi/v3/{gv}")))?;
    Ok(match negotiate::negotiate(&negotiate::V3, accept(headers), &[negotiate::Form::Json]) {
        Some(form) => respond(body, negotiate::V3.content_type(form)),
        None => not_acceptable(),
    })
}

/// `/openapi/v2`: protobuf when the client asks for it (kubectl does), else JSON.
pub fn serve_v2(headers: &HeaderMap) -> Response {
    use negotiate::Form;
    let (json, pb) = v2_cache();
    match negotiate::negotiate(&negotiate::V2, accept(headers), &[Form::Json, Form::Protobuf]) {
        Some(Form::Json) => respond(json.clone(), negotiate::V2.content_type(Form::Json)),
        Some(Form::Protobuf) => respond(pb.clone(), negotiate::V2.content_type(Form::Protobuf)),
        None => not_acceptable(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{by_kind, def};

    #[test]
    fn v3_documents_describe_every_served_kind() {
        let cache = v3_cache();
        let index: Value = serde_json::from_slice(&cache.index).unwrap();
        for d in RESOURCES {
            let gv = gv_path(d);
            assert!(index["paths"][&gv]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with(&format!("/openapi/v3/{gv}?hash=")));
            let doc: Value = serde_json::from_slice(&cache.docs[&gv]).unwrap();
            let schema = &doc["components"]["schemas"][definition_name(d)];
            assert_eq!(schema["x-kubernetes-group-version-kind"], json!([gvk(d)]), "{}", d.kind);
            assert!(schema["properties"]["metadata"].is_object(), "{} has real properties", d.kind);
        }
    }

    #[test]
    fn pod_schema_has_patch_metadata_and_patch_operation() {
        let doc: Value = serde_json::from_slice(&v3_cache().docs["api/v1"]).unwrap();
        let spec = &doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"];
        assert_eq!(spec["containers"]["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(spec["containers"]["x-kubernetes-patch-strategy"], "merge");
        assert!(spec["tolerations"].get("x-kubernetes-patch-strategy").is_none(), "tolerations replace");
        let ctr = &doc["components"]["schemas"]["io.k8s.api.core.v1.Container"]["properties"];
        assert_eq!(ctr["ports"]["x-kubernetes-patch-merge-key"], "containerPort");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"], json!({"group": "", "version": "v1", "kind": "Pod"}));
        assert!(patch["requestBody"]["content"]["application/strategic-merge-patch+json"].is_object());
        assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
        let pc = def(by_kind("scheduling.k8s.io/v1", "PriorityClass").unwrap());
        assert_eq!(definition_name(pc), "io.k8s.api.scheduling.v1.PriorityClass");
    }

    fn get(accept: Option<&str>, serve: impl Fn(&HeaderMap) -> Response) -> (StatusCode, String) {
        let mut h = HeaderMap::new();
        if let Some(a) = accept {
            h.insert(header::ACCEPT, HeaderValue::from_str(a).unwrap());
        }
        let r = serve(&h);
        let ct = r.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        (r.status(), ct)
    }

    #[test]
    fn v2_answers_kube_openapis_content_types() {
        let pb = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        // client-go's spelling and kube-openapi's own are both answered with the dotted type.
        for accept in ["application/com.github.proto-openapi.spec.v2@v1.0+protobuf", pb] {
            assert_eq!(get(Some(accept), serve_v2), (StatusCode::OK, pb.to_string()), "{accept}");
        }
        let json = (StatusCode::OK, "application/json".to_string());
        assert_eq!(get(None, serve_v2), json);
        assert_eq!(get(Some("application/json"), serve_v2), json);
        assert_eq!(get(Some("*/*"), serve_v2), json);
        assert_eq!(get(Some("application/yaml"), serve_v2).0, StatusCode::NOT_ACCEPTABLE);
    }

    #[test]
    fn v3_answers_json_and_refuses_protobuf_only() {
        let doc = |h: &HeaderMap| serve_v3(Some("api/v1"), h).unwrap();
        let json = (StatusCode::OK, "application/json".to_string());
        assert_eq!(get(None, doc), json);
        assert_eq!(get(Some("application/json"), doc), json);
        let pb = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
        assert_eq!(get(Some(pb), doc).0, StatusCode::NOT_ACCEPTABLE, "no protobuf form to send");
        assert_eq!(get(Some(&format!("{pb}, application/json")), doc), json);
        assert_eq!(get(Some(pb), |h| serve_v3(None, h).unwrap()), json, "the index is always JSON");
    }

    #[test]
    fn v2_has_definitions_and_a_protobuf_form() {
        let (json, pb) = v2_cache();
        let doc: Value = serde_json::from_slice(json).unwrap();
        assert_eq!(doc["swagger"], "2.0");
        let pod = &doc["definitions"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        assert_eq!(pod["properties"]["spec"]["$ref"], "#/definitions/io.k8s.api.core.v1.PodSpec");
        assert!(pb.len() > 100_000, "protobuf document holds the definitions");
    }
}
