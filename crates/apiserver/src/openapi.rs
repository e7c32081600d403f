//! A minimal OpenAPI v3 surface.
//!
//! We publish no schemas, only one PATCH operation per kind that declares
//! the `fieldValidation` query parameter: that is what kubectl checks to
//! decide it may rely on server-side validation instead of downloading the
//! full schema (which it would otherwise insist on before `apply`/`create`).

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use crate::discovery::GIT_VERSION;
use crate::error::ApiError;
use crate::resources::{Backing, RESOURCES};

fn gv_path(group: &str) -> String {
    if group.is_empty() {
        "api/v1".into()
    } else {
        format!("apis/{group}/v1")
    }
}

fn index() -> Value {
    let mut paths = Map::new();
    for d in RESOURCES {
        let p = gv_path(d.group);
        paths
            .entry(p.clone())
            .or_insert_with(|| json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={GIT_VERSION}")}));
    }
    json!({"paths": paths})
}

fn gv_doc(gv: &str) -> Option<Value> {
    let mut paths = Map::new();
    for d in RESOURCES.iter().filter(|d| gv_path(d.group) == gv && !matches!(d.backing, Backing::Review)) {
        let item = if d.namespaced {
            format!("/{gv}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("/{gv}/{}/{{name}}", d.plural)
        };
        let param =
            |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        paths.insert(
            item,
            json!({
                "patch": {
                    "operationId": format!("patch{}", d.kind),
                    "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation"), param("force")],
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {"group": d.group, "version": d.version, "kind": d.kind},
                }
            }),
        );
    }
    (!paths.is_empty()).then(|| {
        json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": GIT_VERSION},
            "paths": paths,
            "components": {"schemas": {}},
        })
    })
}

/// `/openapi/v3` (index) and `/openapi/v3/{api/v1 | apis/g/v}`.
pub fn serve(gv: Option<&str>, _query: Option<&str>) -> Result<Response, ApiError> {
    let doc = match gv {
        None => index(),
        Some(gv) => gv_doc(gv.trim_matches('/')).ok_or_else(|| ApiError::no_route(&format!("/openapi/v3/{gv}")))?,
    };
    let body = serde_json::to_vec(&doc).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_docs() {
        let idx = index();
        assert!(idx["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap().starts_with("/openapi/v3/api/v1"));
        let doc = gv_doc("api/v1").unwrap();
        let pod = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(pod["x-kubernetes-group-version-kind"]["kind"], "Pod");
        assert!(gv_doc("apis/nope/v1").is_none());
    }
}
