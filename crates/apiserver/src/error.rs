//! Kubernetes `metav1.Status` errors.
//!
//! Every failure the server reports is an [`ApiError`]; clients (client-go, the
//! `kube` crate, kubectl) decide retry/relist behaviour from `code` and `reason`,
//! so those must match what the real API server sends for the same situation.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Value};

/// One field-level problem inside an `Invalid` (422) error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine reason, e.g. `FieldValueRequired`.
    pub reason: &'static str,
    /// Human message, e.g. `Required value`.
    pub message: String,
    /// JSON path of the offending field, e.g. `spec.containers[0].image`.
    pub field: String,
}

impl Cause {
    /// A `Required value` cause for `field`.
    pub fn required(field: impl Into<String>) -> Self {
        Cause { reason: "FieldValueRequired", message: "Required value".into(), field: field.into() }
    }

    /// An `Invalid value` cause carrying the rejected value and an explanation.
    pub fn invalid(field: impl Into<String>, value: &str, why: &str) -> Self {
        Cause { reason: "FieldValueInvalid", message: format!("Invalid value: {value:?}: {why}"), field: field.into() }
    }

    /// A `Required value: <detail>` cause.
    pub fn required_because(field: impl Into<String>, detail: &str) -> Self {
        Cause { reason: "FieldValueRequired", message: format!("Required value: {detail}"), field: field.into() }
    }

    /// An `Invalid value` cause for a JSON value, printed as upstream prints
    /// Go values (strings quoted, numbers and booleans bare, the rest as JSON).
    pub fn invalid_value(field: impl Into<String>, value: &serde_json::Value, why: &str) -> Self {
        let body = format!("Invalid value: {}", go_value(value));
        let message = if why.is_empty() { body } else { format!("{body}: {why}") };
        Cause { reason: "FieldValueInvalid", message, field: field.into() }
    }

    /// An `Unsupported value` cause listing the accepted values.
    pub fn not_supported(field: impl Into<String>, value: &serde_json::Value, valid: &[&str]) -> Self {
        let quoted: Vec<String> = valid.iter().map(|v| format!("{v:?}")).collect();
        let mut message = format!("Unsupported value: {}", go_value(value));
        if !quoted.is_empty() {
            message.push_str(&format!(": supported values: {}", quoted.join(", ")));
        }
        Cause { reason: "FieldValueNotSupported", message, field: field.into() }
    }

    /// A `Too long` cause (`may not be more than N bytes`).
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Cause {
            reason: "FieldValueTooLong",
            message: format!("Too long: may not be more than {max} bytes"),
            field: field.into(),
        }
    }

    /// A `Too many` cause (`must have at most N items`).
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Cause {
            reason: "FieldValueTooMany",
            message: format!("Too many: {actual}: must have at most {max} items"),
            field: field.into(),
        }
    }

    /// A `Duplicate value` cause.
    pub fn duplicate(field: impl Into<String>, value: &str) -> Self {
        Cause { reason: "FieldValueDuplicate", message: format!("Duplicate value: {value:?}"), field: field.into() }
    }

    /// A `Forbidden` cause.
    pub fn forbidden(field: impl Into<String>, why: &str) -> Self {
        Cause { reason: "FieldValueForbidden", message: format!("Forbidden: {why}"), field: field.into() }
    }

    /// `field: message`, the form used in Status messages.
    pub fn render(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// Formats a value the way field errors print Go values.
fn go_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => format!("{s:?}"),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// `metav1.StatusDetails`: which object an error is about, and field causes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusDetails {
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (resource or kind, as upstream does per reason).
    pub kind: Option<String>,
    /// `details.causes` (only for `Invalid`).
    pub causes: Vec<Cause>,
}

/// An API error rendered as a `metav1.Status` with the matching HTTP code.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// Full human-readable message.
    pub message: String,
    details: Option<Box<StatusDetails>>,
    /// Where in the object a decode error is (never sent: upstream's
    /// decoder messages do not name it, but our manifest loader does).
    field_hint: Option<Box<Cause>>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: None, field_hint: None }
    }

    fn details_mut(&mut self) -> &mut StatusDetails {
        self.details.get_or_insert_with(Default::default)
    }

    fn with_details(mut self, group_resource: &str, name: &str) -> Self {
        let (resource, group) = group_resource.split_once('.').unwrap_or((group_resource, ""));
        let d = self.details_mut();
        d.kind = Some(resource.to_string());
        if !group.is_empty() {
            d.group = Some(group.to_string());
        }
        d.name = Some(name.to_string());
        self
    }

    /// Attaches the field a decode error is about (kept out of the Status).
    pub fn with_field_hint(mut self, cause: Cause) -> Self {
        self.field_hint = Some(Box::new(cause));
        self
    }

    /// The Status details, if any.
    pub fn details(&self) -> Option<&StatusDetails> {
        self.details.as_deref()
    }

    /// Field-level causes (non-empty only for `Invalid`).
    pub fn causes(&self) -> &[Cause] {
        self.details.as_deref().map_or(&[], |d| d.causes.as_slice())
    }

    /// 404 `<resource> "<name>" not found`; `group_resource` is e.g. `pods` or `leases.coordination.k8s.io`.
    pub fn not_found(group_resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{group_resource} \"{name}\" not found")).with_details(group_resource, name)
    }

    /// 404 for a URL that matches no resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(404, "NotFound", format!("the server could not find the requested resource (path {path})"))
    }

    /// 409 `<resource> "<name>" already exists`.
    pub fn already_exists(group_resource: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{group_resource} \"{name}\" already exists"))
            .with_details(group_resource, name)
    }

    /// 409 Conflict with the standard optimistic-concurrency wording.
    pub fn stale(group_resource: &str, name: &str) -> Self {
        Self::conflict(
            group_resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 `Operation cannot be fulfilled on <resource> "<name>": <why>`.
    pub fn conflict(group_resource: &str, name: &str, why: &str) -> Self {
        Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {group_resource} \"{name}\": {why}"))
            .with_details(group_resource, name)
    }

    /// 422 `<Kind> "<name>" is invalid: <causes>`.
    pub fn invalid(kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        // Like upstream's aggregate: identical messages are reported once.
        let mut rendered: Vec<String> = Vec::with_capacity(causes.len());
        for r in causes.iter().map(Cause::render) {
            if !rendered.contains(&r) {
                rendered.push(r);
            }
        }
        let summary = if rendered.len() == 1 { rendered[0].clone() } else { format!("[{}]", rendered.join(", ")) };
        let mut e = Self::new(422, "Invalid", format!("{kind} \"{name}\" is invalid: {summary}"));
        let d = e.details_mut();
        d.kind = Some(kind.to_string());
        d.name = Some(name.to_string());
        d.causes = causes;
        e
    }

    /// 422 for a kind of an API group: `<Kind>.<group> "<name>" is invalid: <causes>`
    /// (upstream qualifies every non-core kind with its group).
    pub fn invalid_in(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        if group.is_empty() {
            return Self::invalid(kind, name, causes);
        }
        let mut e = Self::invalid(&format!("{kind}.{group}"), name, causes);
        let d = e.details_mut();
        d.kind = Some(kind.to_string());
        d.group = Some(group.to_string());
        e
    }

    /// 403 `<resource> "<name>" is forbidden: <why>`.
    pub fn forbidden(group_resource: &str, name: &str, why: &str) -> Self {
        Self::new(403, "Forbidden", format!("{group_resource} \"{name}\" is forbidden: {why}"))
            .with_details(group_resource, name)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 410 Expired: the requested resourceVersion left the event history.
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(410, "Expired", format!("too old resource version: {requested} ({oldest})"))
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method} {what})"),
        )
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 500 with no reason: how upstream reports an error its storage returns
    /// without a Status (e.g. `resourceVersion should not be set on objects to be created`).
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 503 ServiceUnavailable (used while shutting down).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The message without the `<Kind> "<name>" is invalid:` prefix, for
    /// callers (like the manifest loader) that name the object themselves.
    pub fn detail(&self) -> String {
        if let Some(hint) = &self.field_hint {
            hint.render()
        } else if self.causes().is_empty() {
            self.message.clone()
        } else {
            self.causes().iter().map(Cause::render).collect::<Vec<_>>().join("; ")
        }
    }

    /// The `metav1.Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(d) = self.details() {
            if let Some(n) = &d.name {
                details.insert("name".into(), json!(n));
            }
            if let Some(g) = &d.group {
                details.insert("group".into(), json!(g));
            }
            if let Some(k) = &d.kind {
                details.insert("kind".into(), json!(k));
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                details.insert("causes".into(), Value::Array(causes));
            }
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        // `reason` is omitted when empty (StatusReasonUnknown), as in upstream's JSON.
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// A `Status` with `status: Success` (returned by bindings and deletes).
pub fn success_status(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, Bytes::from(body)).into_response();
        resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        resp
    }
}
