//! `DeviceFragmentationArgs`: which devices the policy measures, and what else strands them.
//!
//! ```yaml
//! - name: DeviceFragmentation
//!   args:
//!     deviceClassName: gpu.example.com   # required: the DeviceClass of the shared devices
//!     capacity: milligpu                 # the consumable capacity sharing claims request
//!     resources: [cpu, memory]           # node resources that bound how many pods fit (default)
//! ```

use ksched_framework::validation;
use serde::Deserialize;

/// Node resources that may bound copies of a shape (the default is both).
pub const SUPPORTED_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The args as written (strict: unknown fields are errors).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceFragmentationArgs {
    /// The DeviceClass whose devices are measured; claims of other classes are ignored.
    #[serde(default)]
    pub device_class_name: String,
    /// The consumable capacity (DRAConsumableCapacity) a sharing claim requests part of, e.g.
    /// `milligpu`. Without it every device counts whole.
    #[serde(default)]
    pub capacity: Option<String>,
    /// Node resources whose exhaustion strands devices; `None` means `[cpu, memory]`.
    #[serde(default)]
    pub resources: Option<Vec<String>>,
}

impl DeviceFragmentationArgs {
    /// Decodes and validates; the error names every bad field, `[e1, e2]` when several.
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, String> {
        let args: DeviceFragmentationArgs = ksched_framework::registry::decode_args(args)?;
        let errs = args.validate();
        match errs.len() {
            0 => Ok(args),
            1 => Err(errs.into_iter().next().unwrap_or_default()),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    /// The field errors, in field order, worded as Kubernetes' field validation words them.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if self.device_class_name.is_empty() {
            errs.push("deviceClassName: Required value: the DeviceClass of the measured devices".to_string());
        } else if !validation::is_dns1123_subdomain(&self.device_class_name).is_empty() {
            errs.push(format!(
                "deviceClassName: Invalid value: {:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                self.device_class_name
            ));
        }
        if let Some(c) = &self.capacity {
            if !is_qualified_capacity_name(c) {
                errs.push(format!(
                    "capacity: Invalid value: {c:?}: must be a C identifier of at most 32 characters, optionally prefixed by a DNS subdomain and '/'"
                ));
            }
        }
        let mut seen = Vec::new();
        for (i, r) in self.resources.iter().flatten().enumerate() {
            if !SUPPORTED_RESOURCES.contains(&r.as_str()) {
                let supported: Vec<String> = SUPPORTED_RESOURCES.iter().map(|s| format!("{s:?}")).collect();
                errs.push(format!(
                    "resources[{i}]: Unsupported value: {r:?}: supported values: {}",
                    supported.join(", ")
                ));
            } else if seen.contains(r) {
                errs.push(format!("resources[{i}]: Duplicate value: {r:?}"));
            }
            seen.push(r.clone());
        }
        errs
    }

    /// Whether cpu bounds copies.
    pub fn counts_cpu(&self) -> bool {
        self.resources.as_ref().is_none_or(|r| r.iter().any(|x| x == "cpu"))
    }

    /// Whether memory bounds copies.
    pub fn counts_memory(&self) -> bool {
        self.resources.as_ref().is_none_or(|r| r.iter().any(|x| x == "memory"))
    }
}

/// `[domain/]identifier`, as ResourceSlice capacity names are written.
fn is_qualified_capacity_name(s: &str) -> bool {
    let (domain, id) = match s.split_once('/') {
        Some((d, i)) => (Some(d), i),
        None => (None, s),
    };
    let c_ident = id.len() <= 32 && validation::is_c_identifier(id).is_empty();
    c_ident && domain.is_none_or(|d| validation::is_dns1123_subdomain(d).is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_strictly_with_defaults() {
        let a = DeviceFragmentationArgs::decode(Some(&json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DeviceFragmentationArgs",
            "deviceClassName": "gpu.example.com", "capacity": "milligpu"
        })))
        .unwrap();
        assert_eq!(a.device_class_name, "gpu.example.com");
        assert_eq!(a.capacity.as_deref(), Some("milligpu"));
        assert!(a.counts_cpu() && a.counts_memory());
        let cpu_only =
            DeviceFragmentationArgs::decode(Some(&json!({"deviceClassName": "gpu", "resources": ["cpu"]}))).unwrap();
        assert!(cpu_only.counts_cpu() && !cpu_only.counts_memory());
        let err =
            DeviceFragmentationArgs::decode(Some(&json!({"deviceClassName": "gpu", "capacityName": "x"}))).unwrap_err();
        assert!(err.contains("unknown field `capacityName`"), "{err}");
    }

    #[test]
    fn validation_names_every_bad_field() {
        assert_eq!(
            DeviceFragmentationArgs::decode(None).unwrap_err(),
            "deviceClassName: Required value: the DeviceClass of the measured devices"
        );
        let err = DeviceFragmentationArgs::decode(Some(&json!({
            "deviceClassName": "Bad_Class", "capacity": "9lives", "resources": ["cpu", "gpu", "cpu"]
        })))
        .unwrap_err();
        assert_eq!(
            err,
            "[deviceClassName: Invalid value: \"Bad_Class\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character, \
             capacity: Invalid value: \"9lives\": must be a C identifier of at most 32 characters, optionally prefixed by a DNS subdomain and '/', \
             resources[1]: Unsupported value: \"gpu\": supported values: \"cpu\", \"memory\", \
             resources[2]: Duplicate value: \"cpu\"]"
        );
        assert!(DeviceFragmentationArgs::decode(Some(
            &json!({"deviceClassName": "gpu", "capacity": "example.com/milli_gpu"})
        ))
        .is_ok());
        assert!(DeviceFragmentationArgs::decode(Some(&json!({"deviceClassName": "gpu", "capacity": "a/b/c"}))).is_err());
    }
}
