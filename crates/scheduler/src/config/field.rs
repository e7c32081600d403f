//! Field-level validation errors rendered exactly like apimachinery's `field.Error` and the
//! aggregate that `ValidateKubeSchedulerConfiguration` returns.

use std::collections::HashSet;
use std::fmt;

/// The kind of a field error; `Display` is the canonical text (`Invalid value`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// `Not found`
    NotFound,
    /// `Required value`
    Required,
    /// `Duplicate value`
    Duplicate,
    /// `Invalid value`
    Invalid,
    /// `Unsupported value`
    NotSupported,
    /// `Forbidden`
    Forbidden,
    /// `Too long`
    TooLong,
    /// `Too many`
    TooMany,
    /// `Internal error`
    Internal,
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        })
    }
}

/// The offending value as Go would print it inside a field error.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// Not shown (Required, Forbidden, ...).
    Omitted,
    /// An integer, printed bare.
    Int(i64),
    /// A boolean, printed bare.
    Bool(bool),
    /// A plain Go `string`, printed with `%q`.
    Str(String),
    /// Any other value, already rendered as compact JSON (named string types, slices, structs).
    Json(String),
}

impl BadValue {
    /// A named Go string type (e.g. `v1.ResourceName`): Go renders it as JSON, not `%q`.
    pub fn json_str(s: &str) -> Self {
        BadValue::Json(json_quote(s))
    }
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::Omitted => Ok(()),
            BadValue::Int(i) => write!(f, "{i}"),
            BadValue::Bool(b) => write!(f, "{b}"),
            BadValue::Str(s) => f.write_str(&go_quote(s)),
            BadValue::Json(j) => f.write_str(j),
        }
    }
}

/// One field error: `<field>: <Type>[: <value>][: <detail>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The error kind.
    pub error_type: ErrorType,
    /// The field path, e.g. `profiles[0].pluginConfig[1].args.minCandidateNodesPercentage`.
    pub field: String,
    /// The offending value.
    pub bad_value: BadValue,
    /// Human-readable detail.
    pub detail: String,
}

impl FieldError {
    /// `Invalid value` with a value and detail.
    pub fn invalid(field: impl Into<String>, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError { error_type: ErrorType::Invalid, field: field.into(), bad_value: value, detail: detail.into() }
    }

    /// `Required value` with an optional detail.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            error_type: ErrorType::Required,
            field: field.into(),
            bad_value: BadValue::Omitted,
            detail: detail.into(),
        }
    }

    /// `Forbidden` with a detail.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            error_type: ErrorType::Forbidden,
            field: field.into(),
            bad_value: BadValue::Omitted,
            detail: detail.into(),
        }
    }

    /// `Duplicate value` with a value.
    pub fn duplicate(field: impl Into<String>, value: BadValue) -> Self {
        FieldError { error_type: ErrorType::Duplicate, field: field.into(), bad_value: value, detail: String::new() }
    }

    /// `Unsupported value` listing the supported values (quoted, in the given order).
    pub fn not_supported(field: impl Into<String>, value: BadValue, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        FieldError { error_type: ErrorType::NotSupported, field: field.into(), bad_value: value, detail }
    }

    /// The message without the field name (Go's `ErrorBody`).
    pub fn body(&self) -> String {
        let mut s = match self.error_type {
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal => {
                self.error_type.to_string()
            }
            _ if self.bad_value == BadValue::Omitted => self.error_type.to_string(),
            _ => format!("{}: {}", self.error_type, self.bad_value),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for FieldError {}

/// All validation errors of a configuration; `Display` is Go's flattened aggregate:
/// one message alone, several as `[e1, e2]` with repeated messages dropped.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ValidationErrors(pub Vec<FieldError>);

impl ValidationErrors {
    /// The individual errors, in validation order.
    pub fn errors(&self) -> &[FieldError] {
        &self.0
    }

    /// True when there is nothing to report.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut seen = HashSet::new();
        let mut msgs = Vec::new();
        for e in &self.0 {
            let m = e.to_string();
            if seen.insert(m.clone()) {
                msgs.push(m);
            }
        }
        match msgs.len() {
            0 => Ok(()),
            1 => f.write_str(&msgs[0]),
            _ => write!(f, "[{}]", msgs.join(", ")),
        }
    }
}

impl std::error::Error for ValidationErrors {}

/// Go's `strconv.Quote` (see [`ksched_framework::gofmt::quote`]).
pub fn go_quote(s: &str) -> String {
    ksched_framework::gofmt::quote(s)
}

/// Go's `encoding/json` string encoding (HTML-safe: `<`, `>`, `&` escaped).
pub fn json_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Compact JSON as Go's `json.Marshal` prints it (object keys kept in the given order).
pub fn go_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => json_quote(s),
        serde_json::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_json).collect();
            format!("[{}]", items.join(","))
        }
        serde_json::Value::Object(o) => {
            let items: Vec<String> = o.iter().map(|(k, v)| format!("{}:{}", json_quote(k), go_json(v))).collect();
            format!("{{{}}}", items.join(","))
        }
        other => other.to_string(),
    }
}

/// A JSON list of strings as Go prints a `[]string` value (`null` when empty).
pub fn json_string_list(items: &[String]) -> BadValue {
    if items.is_empty() {
        return BadValue::Json("null".into());
    }
    let quoted: Vec<String> = items.iter().map(|s| json_quote(s)).collect();
    BadValue::Json(format!("[{}]", quoted.join(",")))
}

/// metav1 `ValidateLabelName`: one `Invalid value` per problem.
pub fn validate_label_name(value: &str, path: &str) -> Vec<FieldError> {
    ksched_framework::validation::is_qualified_name(value)
        .into_iter()
        .map(|msg| FieldError::invalid(path, BadValue::Str(value.to_string()), msg))
        .collect()
}
