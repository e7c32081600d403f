//! Decoding a configuration file (YAML or JSON) strictly, the way kube-scheduler's codec does:
//! type/kind checks first, then the object, then the nested plugin args by kind.

use std::fmt;

use super::defaults::set_defaults_with;
use super::node::{self, DeError, Node, NodeKind, Unknowns};
use super::types::*;
use super::SchedulerFeatures;

/// Where upstream's scheme was created; part of its "no kind is registered" message.
const SCHEME_NAME: &str = "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme/scheme.go:29";

/// Versions of the group that existed before v1 and were removed.
const REMOVED_VERSIONS: [&str; 5] = ["v1alpha1", "v1alpha2", "v1beta1", "v1beta2", "v1beta3"];

/// Why a configuration could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or other source) being decoded.
    pub source_name: String,
    /// What went wrong.
    pub kind: ConfigErrorKind,
}

/// The failure classes; `Display` follows upstream's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// Not valid YAML/JSON.
    Syntax {
        /// Parser message.
        message: String,
        /// 1-based line, when known.
        line: Option<usize>,
    },
    /// No `kind` (the original text is quoted like upstream does).
    MissingKind(String),
    /// No `apiVersion`.
    MissingApiVersion(String),
    /// `apiVersion`/`kind` not known (e.g. the removed `v1beta3`).
    NotRegistered {
        /// The kind asked for.
        kind: String,
        /// The apiVersion asked for.
        api_version: String,
    },
    /// A known kind of the group that is not a `KubeSchedulerConfiguration`.
    NotAConfiguration {
        /// The kind found.
        kind: String,
    },
    /// Unknown or duplicate fields; each entry is one upstream strict-decoding message.
    Strict(Vec<String>),
    /// A value of the wrong type or an invalid nested object.
    Decode(String),
}

impl fmt::Display for ConfigErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigErrorKind::Syntax { message, line } => match line {
                Some(l) => write!(f, "error converting YAML to JSON: yaml: line {l}: {message}"),
                None => write!(f, "error converting YAML to JSON: yaml: {message}"),
            },
            ConfigErrorKind::MissingKind(data) => write!(f, "Object 'Kind' is missing in '{data}'"),
            ConfigErrorKind::MissingApiVersion(data) => write!(f, "Object 'apiVersion' is missing in '{data}'"),
            ConfigErrorKind::NotRegistered { kind, api_version } => {
                write!(f, "{}", not_registered(kind, api_version))?;
                let removed = api_version
                    .strip_prefix(GROUP)
                    .and_then(|v| v.strip_prefix('/'))
                    .is_some_and(|v| REMOVED_VERSIONS.contains(&v));
                if removed && kind == KIND {
                    write!(f, " ({api_version} is no longer supported; migrate the configuration to {API_VERSION})")?;
                }
                Ok(())
            }
            ConfigErrorKind::NotAConfiguration { kind } => {
                write!(f, "couldn't decode as KubeSchedulerConfiguration, got {API_VERSION}, Kind={kind}: ")
            }
            ConfigErrorKind::Strict(errs) => write!(f, "strict decoding error: {}", errs.join(", ")),
            ConfigErrorKind::Decode(msg) => f.write_str(msg),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)
    }
}

impl std::error::Error for ConfigError {}

fn not_registered(kind: &str, api_version: &str) -> String {
    format!("no kind {kind:?} is registered for version {api_version:?} in scheme {SCHEME_NAME:?}")
}

/// Decodes and defaults a configuration (the upstream `--config` path), at 1.36 gate defaults.
pub fn load_config(bytes: &[u8], source_name: &str) -> Result<KubeSchedulerConfiguration, ConfigError> {
    load_config_with(bytes, source_name, &SchedulerFeatures::default())
}

/// [`load_config`] for the given feature gates.
pub fn load_config_with(
    bytes: &[u8],
    source_name: &str,
    features: &SchedulerFeatures,
) -> Result<KubeSchedulerConfiguration, ConfigError> {
    let mut cfg = decode_config(bytes, source_name)?;
    set_defaults_with(&mut cfg, features);
    Ok(cfg)
}

/// Strictly decodes a configuration without defaulting.
pub fn decode_config(bytes: &[u8], source_name: &str) -> Result<KubeSchedulerConfiguration, ConfigError> {
    let fail = |kind| ConfigError { source_name: source_name.to_string(), kind };
    let text = String::from_utf8_lossy(bytes);
    let is_json = text.trim_start().starts_with('{');
    let root = node::parse(bytes).map_err(|e| fail(ConfigErrorKind::Syntax { message: e.message, line: e.line }))?;

    check_type_meta(&root, &text).map_err(fail)?;

    let mut strict = duplicate_messages(&root, is_json);
    let unknowns = Unknowns::default();
    let mut cfg: KubeSchedulerConfiguration =
        node::decode(&root, &unknowns).map_err(|e| fail(ConfigErrorKind::Decode(e.0)))?;
    strict.extend(unknown_messages(unknowns.take(), is_json));

    // Nested args are decoded by kind once the outer object is known to be well-formed.
    for (i, profile) in cfg.profiles.iter_mut().enumerate() {
        for (j, pc) in profile.plugin_config.iter_mut().enumerate() {
            let args_node = root
                .get("profiles")
                .and_then(|p| seq_item(p, i))
                .and_then(|p| p.get("pluginConfig"))
                .and_then(|c| seq_item(c, j))
                .and_then(|c| c.get("args"));
            match decode_args(&pc.name, args_node, is_json) {
                Ok((args, errs)) => {
                    pc.args = args;
                    strict.extend(errs.into_iter().map(|e| format!("decoding .profiles[{i}].pluginConfig[{j}]: {e}")));
                }
                Err(e) => {
                    return Err(fail(ConfigErrorKind::Decode(format!(
                        "decoding .profiles[{i}].pluginConfig[{j}]: {e}"
                    ))))
                }
            }
        }
    }
    if !strict.is_empty() {
        return Err(fail(ConfigErrorKind::Strict(strict)));
    }
    Ok(cfg)
}

fn seq_item(node: &Node, i: usize) -> Option<&Node> {
    match &node.kind {
        NodeKind::Seq(items) => items.get(i),
        _ => None,
    }
}

/// Reads `apiVersion`/`kind` the way the codec does before decoding the object.
fn check_type_meta(root: &Node, text: &str) -> Result<(), ConfigErrorKind> {
    let (api_version, kind) = match &root.kind {
        NodeKind::Null => (String::new(), String::new()),
        NodeKind::Map(_) => {
            let field = |name: &str| -> Result<String, ConfigErrorKind> {
                match root.get(name).map(|n| &n.kind) {
                    None | Some(NodeKind::Null) => Ok(String::new()),
                    Some(NodeKind::Str(s)) => Ok(s.clone()),
                    Some(_) => Err(type_meta_error(name)),
                }
            };
            (field("apiVersion")?, field("kind")?)
        }
        NodeKind::Seq(_) => return Err(type_meta_error("array")),
        _ => return Err(type_meta_error("scalar")),
    };
    if kind.is_empty() {
        return Err(ConfigErrorKind::MissingKind(text.to_string()));
    }
    if api_version.is_empty() {
        return Err(ConfigErrorKind::MissingApiVersion(text.to_string()));
    }
    if api_version.matches('/').count() > 1 {
        return Err(ConfigErrorKind::Decode(format!("unexpected GroupVersion string: {api_version}")));
    }
    if api_version != API_VERSION {
        return Err(ConfigErrorKind::NotRegistered { kind, api_version });
    }
    if kind == KIND {
        return Ok(());
    }
    if ARGS_KINDS.contains(&kind.as_str()) {
        return Err(ConfigErrorKind::NotAConfiguration { kind });
    }
    Err(ConfigErrorKind::NotRegistered { kind, api_version })
}

fn type_meta_error(what: &str) -> ConfigErrorKind {
    let value = match what {
        "array" => "array",
        "scalar" => "string",
        _ => "number",
    };
    ConfigErrorKind::Decode(format!(
        "couldn't get version/kind; json parse error: json: cannot unmarshal {value} into Go value of type \
         struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
    ))
}

/// Duplicate keys: YAML input gets go-yaml's combined message, JSON input one message per field.
fn duplicate_messages(root: &Node, is_json: bool) -> Vec<String> {
    let dups = node::duplicate_keys(root);
    if dups.is_empty() {
        return vec![];
    }
    if is_json {
        return dups.into_iter().map(|(path, _)| format!("duplicate field {path:?}")).collect();
    }
    let lines: Vec<String> = dups
        .into_iter()
        .map(|(path, line)| {
            let key = path.rsplit('.').next().unwrap_or(&path).to_string();
            // The last path element may carry an index suffix only for sequences, never for keys.
            format!("\n  line {line}: key {key:?} already set in map")
        })
        .collect();
    vec![format!("error converting YAML to JSON: yaml: unmarshal errors:{}", lines.concat())]
}

fn unknown_messages(unknowns: Vec<(String, usize)>, is_json: bool) -> Vec<String> {
    unknowns
        .into_iter()
        .map(|(path, line)| {
            if is_json || line == 0 {
                format!("unknown field {path:?}")
            } else {
                format!("unknown field {path:?} (line {line})")
            }
        })
        .collect()
}

/// Decodes one plugin's args by the kind `<name>Args`: typed when registered, raw JSON otherwise.
/// Returns the args plus strict errors (already prefixed like upstream), or a fatal error.
fn decode_args(name: &str, node: Option<&Node>, is_json: bool) -> Result<(PluginArgs, Vec<String>), String> {
    let expected_kind = format!("{name}Args");
    if !ARGS_KINDS.contains(&expected_kind.as_str()) {
        let args = match node {
            None => PluginArgs::None,
            Some(n) if n.kind == NodeKind::Null => PluginArgs::None,
            Some(n) => PluginArgs::Unknown(n.to_json()),
        };
        return Ok((args, vec![]));
    }
    let empty = Node::new(NodeKind::Map(vec![]));
    let node = match node {
        Some(n) if n.kind != NodeKind::Null => n,
        _ => &empty,
    };
    let prefix = format!("decoding args for plugin {name}");
    let (api_version, kind) = match &node.kind {
        NodeKind::Map(_) => (
            node.get("apiVersion").and_then(Node::as_str).unwrap_or("").to_string(),
            node.get("kind").and_then(Node::as_str).unwrap_or("").to_string(),
        ),
        _ => (String::new(), String::new()),
    };
    let api_version = if api_version.is_empty() { API_VERSION.to_string() } else { api_version };
    let kind = if kind.is_empty() { expected_kind.clone() } else { kind };
    if api_version != API_VERSION || !(ARGS_KINDS.contains(&kind.as_str()) || kind == KIND) {
        return Err(format!("{prefix}: {}", not_registered(&kind, &api_version)));
    }
    if kind != expected_kind {
        return Err(format!("args for plugin {name} were not of type {expected_kind}.{GROUP}, got {kind}.{GROUP}"));
    }
    // apiVersion/kind belong to the envelope, not to the args type.
    let stripped = match &node.kind {
        NodeKind::Map(entries) => Node {
            kind: NodeKind::Map(entries.iter().filter(|(k, _, _)| k != "apiVersion" && k != "kind").cloned().collect()),
            line: node.line,
        },
        _ => node.clone(),
    };
    let unknowns = Unknowns::default();
    let de_err = |e: DeError| format!("{prefix}: {}", e.0);
    let args = match expected_kind.as_str() {
        "DefaultPreemptionArgs" => PluginArgs::DefaultPreemption(node::decode(&stripped, &unknowns).map_err(de_err)?),
        "InterPodAffinityArgs" => PluginArgs::InterPodAffinity(node::decode(&stripped, &unknowns).map_err(de_err)?),
        "NodeAffinityArgs" => PluginArgs::NodeAffinity(node::decode(&stripped, &unknowns).map_err(de_err)?),
        "NodeResourcesBalancedAllocationArgs" => {
            PluginArgs::NodeResourcesBalancedAllocation(node::decode(&stripped, &unknowns).map_err(de_err)?)
        }
        "NodeResourcesFitArgs" => PluginArgs::NodeResourcesFit(node::decode(&stripped, &unknowns).map_err(de_err)?),
        "PodTopologySpreadArgs" => PluginArgs::PodTopologySpread(node::decode(&stripped, &unknowns).map_err(de_err)?),
        "VolumeBindingArgs" => PluginArgs::VolumeBinding(node::decode(&stripped, &unknowns).map_err(de_err)?),
        "DynamicResourcesArgs" => PluginArgs::DynamicResources(node::decode(&stripped, &unknowns).map_err(de_err)?),
        _ => unreachable!("ARGS_KINDS checked above"),
    };
    let unknown = unknown_messages(unknowns.take(), is_json);
    let strict = if unknown.is_empty() {
        vec![]
    } else {
        vec![format!("strict decoding error: {prefix}: strict decoding error: {}", unknown.join(", "))]
    };
    Ok((args, strict))
}
