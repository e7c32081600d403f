//! Content negotiation of `/flagz` and `/statusz`, as upstream's apiserver `flagz`/`statusz`
//! packages do it: text by default, and the structured `config.k8s.io` kinds (`Flagz`,
//! `Statusz`, versions `v1beta1` and the deprecated `v1alpha1`) in JSON or YAML when the
//! `Accept` header names them with `g=`, `v=` and `as=` parameters.

/// The API group of the structured z-page kinds.
pub const GROUP: &str = "config.k8s.io";
/// Versions served; the first is current, the others answer with a deprecation warning.
pub const VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];
/// Media types the pages can be rendered in (the 406 message lists them).
const ACCEPTED: [&str; 3] = ["application/json", "application/yaml", "text/plain"];

/// How a z-page answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZFormat {
    /// The human-readable page.
    Text,
    /// The structured kind, in `version`, as JSON (`yaml: false`) or YAML.
    Structured {
        /// `v1beta1` or `v1alpha1`.
        version: &'static str,
        /// YAML instead of JSON.
        yaml: bool,
    },
}

impl ZFormat {
    /// True for a version kept only for compatibility.
    pub fn deprecated(&self) -> bool {
        matches!(self, ZFormat::Structured { version, .. } if *version != VERSIONS[0])
    }
}

/// Picks the format for `accept` and the page's `kind` (`Flagz` or `Statusz`); `Err` carries
/// the 406 message when no acceptable entry can be served.
pub fn negotiate(accept: Option<&str>, kind: &str) -> Result<ZFormat, String> {
    let accept = accept.unwrap_or_default();
    if accept.trim().is_empty() {
        return Ok(ZFormat::Text);
    }
    let mut entries: Vec<(f32, usize, &str)> = accept
        .split(',')
        .enumerate()
        .map(|(i, e)| {
            let q = e
                .split(';')
                .skip(1)
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            (q, i, e)
        })
        .filter(|(q, _, _)| *q > 0.0)
        .collect();
    // Highest quality first, the header's order among equals.
    entries.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, _, entry) in entries {
        let mut parts = entry.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let (mut g, mut v, mut as_kind) = (None, None, None);
        for p in parts {
            match p.split_once('=') {
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                Some(("as", x)) => as_kind = Some(x),
                _ => {}
            }
        }
        let structured = g.is_some() || v.is_some() || as_kind.is_some();
        match media.as_str() {
            "text/plain" | "text/*" | "*/*" if !structured => return Ok(ZFormat::Text),
            "application/json" | "application/yaml" | "application/*" | "*/*" if structured => {
                let version = VERSIONS.iter().find(|known| Some(**known) == v);
                if g == Some(GROUP) && as_kind == Some(kind) {
                    if let Some(version) = version {
                        return Ok(ZFormat::Structured { version, yaml: media == "application/yaml" });
                    }
                }
            }
            _ => {}
        }
    }
    Err(format!("only the following media types are accepted: {}", ACCEPTED.join(", ")))
}

/// Serializes the structured kind `kind` in `version` with `fields` (a JSON object).
pub fn encode(kind: &str, version: &str, yaml: bool, fields: serde_json::Value) -> Result<String, String> {
    // Upstream names the object after the component.
    let mut obj = serde_json::json!({
        "kind": kind,
        "apiVersion": format!("{GROUP}/{version}"),
        "metadata": {"name": super::COMPONENT_NAME},
    });
    if let (Some(o), Some(f)) = (obj.as_object_mut(), fields.as_object()) {
        o.extend(f.clone());
    }
    if yaml {
        serde_saphyr::to_string(&obj).map_err(|e| e.to_string())
    } else {
        serde_json::to_string(&obj).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_pick_text_structured_or_nothing() {
        let beta_json = ZFormat::Structured { version: "v1beta1", yaml: false };
        let cases: &[(Option<&str>, Result<ZFormat, ()>)] = &[
            (None, Ok(ZFormat::Text)),
            (Some("  "), Ok(ZFormat::Text)),
            (Some("*/*"), Ok(ZFormat::Text)),
            (Some("text/plain"), Ok(ZFormat::Text)),
            (Some("application/json;g=config.k8s.io;v=v1beta1;as=Flagz"), Ok(beta_json.clone())),
            (
                Some("application/yaml;g=config.k8s.io;v=v1alpha1;as=Flagz"),
                Ok(ZFormat::Structured { version: "v1alpha1", yaml: true }),
            ),
            // A bare JSON request names no kind: nothing can be served.
            (Some("application/json"), Err(())),
            (Some("application/json;g=config.k8s.io;v=v1beta1;as=Statusz"), Err(())),
            (Some("application/json;g=config.k8s.io;v=v2;as=Flagz"), Err(())),
            (Some("application/vnd.kubernetes.protobuf"), Err(())),
            // Falls through to the next acceptable entry.
            (Some("application/json, text/plain;q=0.5"), Ok(ZFormat::Text)),
            (Some("text/plain;q=0.1, application/json;g=config.k8s.io;v=v1beta1;as=Flagz"), Ok(beta_json)),
        ];
        for (accept, want) in cases {
            let got = negotiate(*accept, "Flagz").map_err(|_| ());
            assert_eq!(&got, want, "Accept: {accept:?}");
        }
        let msg = negotiate(Some("application/json"), "Flagz").unwrap_err();
        assert_eq!(msg, "only the following media types are accepted: application/json, application/yaml, text/plain");
    }

    #[test]
    fn structured_objects_carry_the_kind_and_version() {
        let json = encode("Flagz", "v1beta1", false, serde_json::json!({"flags": {"v": "2"}})).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["kind"], "Flagz");
        assert_eq!(v["apiVersion"], "config.k8s.io/v1beta1");
        assert_eq!(v["flags"]["v"], "2");
        assert_eq!(v["metadata"]["name"], "kube-scheduler");
        let yaml = encode("Statusz", "v1alpha1", true, serde_json::json!({"paths": ["/metrics"]})).unwrap();
        assert!(yaml.contains("apiVersion: config.k8s.io/v1alpha1") && yaml.contains("- /metrics"), "{yaml}");
        assert!(ZFormat::Structured { version: "v1alpha1", yaml: false }.deprecated());
        assert!(!ZFormat::Structured { version: "v1beta1", yaml: false }.deprecated());
    }
}
