//! Loading Kubernetes manifests from files and creating them in a [`Store`].
//!
//! Errors always say where the problem is: `file.yaml#2` is the second
//! document of `file.yaml`, and `#2.items[0]` the first item of a `List`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::resources::{self, def};
use crate::store::{Store, StoreConfig};

/// One object read from a manifest file.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Where it came from, e.g. `examples/pods.yaml#3`.
    pub source: String,
    /// The object as JSON.
    pub object: Value,
}

/// One object that could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyFailure {
    /// Manifest location, e.g. `pods.yaml#2`.
    pub location: String,
    /// Object kind.
    pub kind: String,
    /// `namespace/name` or `name`.
    pub object: String,
    /// What was wrong (field-level when the server said so).
    pub message: String,
}

impl fmt::Display for ApplyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}: {}", self.location, self.kind, self.object, self.message)
    }
}

/// Errors from loading or applying manifests.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A path could not be read.
    #[error("{path}: {error}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A document is not valid YAML/JSON or not a Kubernetes object.
    #[error("{location}: {message}")]
    Parse {
        /// `file#doc`.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// Some objects were rejected, so none was created.
    #[error("{} of the manifests' objects {} refused; nothing was loaded:\n{}", failures.len(), if failures.len() == 1 { "was" } else { "were" }, failures.iter().map(|f| format!("  {f}")).collect::<Vec<_>>().join("\n"))]
    Apply {
        /// How many objects were created (always 0: loading is all or nothing).
        created: usize,
        /// Each rejected object.
        failures: Vec<ApplyFailure>,
    },
}

/// What [`apply`] created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplySummary {
    /// Total objects created.
    pub created: usize,
    /// Objects created per kind.
    pub by_kind: BTreeMap<String, usize>,
}

fn io_err(path: &Path, error: std::io::Error) -> ManifestError {
    ManifestError::Io { path: path.display().to_string(), error }
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), ManifestError> {
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    if !meta.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut found = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
            let p = entry.map_err(|e| io_err(&dir, e))?.path();
            if p.is_dir() {
                stack.push(p);
            } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
                found.push(p);
            }
        }
    }
    found.sort();
    out.extend(found);
    Ok(())
}

/// Reads files or directories (recursively, `*.yaml|*.yml|*.json`, sorted by
/// path), splitting multi-document YAML and expanding `kind: List` items.
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<Manifest>, ManifestError> {
    let mut files = Vec::new();
    for p in paths {
        collect_files(p, &mut files)?;
    }
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| io_err(&f, e))?;
        out.extend(parse_str(&f.display().to_string(), &text)?);
    }
    Ok(out)
}

/// Splits YAML text into documents, returning each with its starting line (1-based).
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        let is_marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if is_marker || line == "..." {
            docs.push((start, std::mem::take(&mut cur)));
            start = i + 2;
            if let Some(rest) = line.strip_prefix("---").filter(|r| !r.trim().is_empty()) {
                cur.push_str(rest.trim_start());
                cur.push('\n');
                start = i + 1;
            }
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    docs.push((start, cur));
    docs.retain(|(_, d)| d.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')));
    docs
}

/// Parses manifest text (`name` is used in locations). JSON is accepted as YAML.
pub fn parse_str(name: &str, text: &str) -> Result<Vec<Manifest>, ManifestError> {
    let mut out = Vec::new();
    let is_json = name.ends_with(".json");
    let docs = if is_json { vec![(1, text.to_string())] } else { split_documents(text) };
    for (idx, (line, doc)) in docs.into_iter().enumerate() {
        let location = format!("{name}#{}", idx + 1);
        let value: Value = if is_json {
            serde_json::from_str(&doc).map_err(|e| ManifestError::Parse {
                location: location.clone(),
                message: format!("invalid JSON: {e}"),
            })?
        } else {
            serde_saphyr::from_str(&doc).map_err(|e| ManifestError::Parse {
                location: location.clone(),
                message: format!("invalid YAML (document starts at line {line}): {e}"),
            })?
        };
        if value.is_null() {
            continue;
        }
        push_object(&location, value, &mut out)?;
    }
    Ok(out)
}

fn push_object(location: &str, value: Value, out: &mut Vec<Manifest>) -> Result<(), ManifestError> {
    let parse_err = |message: String| ManifestError::Parse { location: location.to_string(), message };
    if !value.is_object() {
        return Err(parse_err("a manifest document must be a mapping (a Kubernetes object)".into()));
    }
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api_version.is_empty() {
        return Err(parse_err("apiVersion: Required value".into()));
    }
    if kind.is_empty() {
        return Err(parse_err("kind: Required value".into()));
    }
    if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
        let Some(items) = value.get("items").and_then(Value::as_array) else {
            return Err(parse_err("items: Required value (a List must have an items array)".into()));
        };
        for (i, item) in items.iter().enumerate() {
            push_object(&format!("{location}.items[{i}]"), item.clone(), out)?;
        }
        return Ok(());
    }
    out.push(Manifest { source: location.to_string(), object: value });
    Ok(())
}

/// Creation order: things others refer to come first.
fn rank(kind: &str) -> u8 {
    match kind {
        "Namespace" => 0,
        "PriorityClass" => 1,
        "StorageClass" | "VolumeAttributesClass" => 2,
        "PersistentVolume" => 3,
        "CSIDriver" | "CSINode" | "CSIStorageCapacity" => 4,
        "Node" => 5,
        "PersistentVolumeClaim" => 6,
        "Service" | "ReplicationController" | "ReplicaSet" | "StatefulSet" => 7,
        "PodDisruptionBudget" => 8,
        "Pod" => 9,
        _ => 10,
    }
}

fn describe(obj: &Value) -> String {
    let s = |f: &str| obj.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).unwrap_or_default();
    let name = match (s("name"), s("generateName")) {
        ("", "") => "<unnamed>".to_string(),
        ("", g) => format!("{g}*"),
        (n, _) => n.to_string(),
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let namespaced = resources::by_kind(api_version, kind).is_some_and(|r| def(r).namespaced);
    if namespaced {
        let ns = if s("namespace").is_empty() { "default" } else { s("namespace") };
        format!("{ns}/{name}")
    } else {
        name
    }
}

/// Creates all manifests in dependency order (Namespaces, PriorityClasses,
/// StorageClasses, PVs, CSI objects, Nodes, PVCs, workload controllers,
/// PDBs, Pods, then the rest), or none of them: the whole set is first
/// created in a scratch store, and if any object is refused, every failure
/// is reported (each naming its source, kind, object and field) and `store`
/// is left untouched.
pub fn apply(store: &Store, manifests: &[Manifest]) -> Result<ApplySummary, ManifestError> {
    let scratch = Store::new(StoreConfig { history_capacity: 0, ..StoreConfig::default() });
    match create_all(&scratch, manifests) {
        Err(ManifestError::Apply { failures, .. }) => Err(ManifestError::Apply { created: 0, failures }),
        Err(e) => Err(e),
        Ok(_) => create_all(store, manifests),
    }
}

/// A server-less store holding `manifests` (defaulted and validated as the API server would),
/// for tools that read a cluster from files (`ksched explain`, `ksched whatif`).
pub fn load_in_memory(manifests: &[Manifest]) -> Result<Store, ManifestError> {
    let store = Store::new(StoreConfig { history_capacity: 0, ..StoreConfig::default() });
    apply(&store, manifests)?;
    Ok(store)
}

fn create_all(store: &Store, manifests: &[Manifest]) -> Result<ApplySummary, ManifestError> {
    let mut ordered: Vec<&Manifest> = manifests.iter().collect();
    ordered.sort_by_key(|m| rank(m.object.get("kind").and_then(Value::as_str).unwrap_or_default()));
    let mut summary = ApplySummary::default();
    let mut failures = Vec::new();
    for m in ordered {
        let kind = m.object.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        match store.create(m.object.clone()) {
            Ok(_) => {
                summary.created += 1;
                *summary.by_kind.entry(kind).or_default() += 1;
            }
            Err(e) => failures.push(ApplyFailure {
                location: m.source.clone(),
                object: describe(&m.object),
                kind,
                message: e.detail(),
            }),
        }
    }
    if failures.is_empty() {
        Ok(summary)
    } else {
        Err(ManifestError::Apply { created: summary.created, failures })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_and_lists() {
        let text = "---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n# only a comment\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: b}}\n";
        let ms = parse_str("x.yaml", text).unwrap();
        let sources: Vec<&str> = ms.iter().map(|m| m.source.as_str()).collect();
        assert_eq!(sources, ["x.yaml#1", "x.yaml#2.items[0]"]);
        assert_eq!(ms[1].object["metadata"]["name"], "b");
    }

    #[test]
    fn errors_name_document() {
        let err = parse_str("x.yaml", "apiVersion: v1\nkind: Node\n---\nkind: Pod\n").unwrap_err();
        assert_eq!(err.to_string(), "x.yaml#2: apiVersion: Required value");
        let err = parse_str("x.yaml", "a: [1,\n").unwrap_err();
        assert!(err.to_string().starts_with("x.yaml#1: invalid YAML"), "{err}");
        let err = parse_str("x.yaml", "- 1\n").unwrap_err();
        assert!(err.to_string().contains("must be a mapping"));
    }
}
