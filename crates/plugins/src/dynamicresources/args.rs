//! `DynamicResourcesArgs` (kubescheduler.config.k8s.io/v1): strict decoding of the two Go
//! duration strings, defaulting and validation at the 1.36 gate defaults, plus one opt-in field
//! upstream does not have, `deviceSelection` (see [`DeviceSelection`]).

use std::time::Duration;

use ksched_dra::allocator::DeviceSelection;
use serde::Deserialize;

/// Default `filterTimeout` (DRASchedulerFilterTimeout is on by default).
pub const DEFAULT_FILTER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `bindingTimeout` (DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are on).
pub const DEFAULT_BINDING_TIMEOUT: Duration = Duration::from_secs(600);

/// The args as written, before defaulting.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawArgs {
    #[serde(default)]
    filter_timeout: Option<String>,
    #[serde(default)]
    binding_timeout: Option<String>,
    #[serde(default)]
    device_selection: Option<String>,
}

/// Defaulted args. Durations are signed nanoseconds so invalid negative values survive until
/// validation reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicResourcesArgs {
    /// Per-node time limit of the allocator in Filter (0 disables the limit).
    pub filter_timeout_nanos: i128,
    /// How long PreBind waits for device binding conditions.
    pub binding_timeout_nanos: i128,
    /// Which candidate device a request gets (not upstream: `FirstFit`, upstream's order, unless
    /// set). `None` holds an unknown value until validation reports it.
    pub device_selection: Option<DeviceSelection>,
    filter_timeout_text: String,
    binding_timeout_text: String,
    device_selection_text: String,
}

impl Default for DynamicResourcesArgs {
    fn default() -> Self {
        DynamicResourcesArgs {
            filter_timeout_nanos: DEFAULT_FILTER_TIMEOUT.as_nanos() as i128,
            binding_timeout_nanos: DEFAULT_BINDING_TIMEOUT.as_nanos() as i128,
            device_selection: Some(DeviceSelection::FirstFit),
            filter_timeout_text: "10s".into(),
            binding_timeout_text: "10m0s".into(),
            device_selection_text: DeviceSelection::FirstFit.as_str().into(),
        }
    }
}

impl DynamicResourcesArgs {
    /// Decodes strictly (unknown fields are errors); `apiVersion`/`kind` are accepted. Absent or
    /// null durations take their defaults.
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, String> {
        let raw: RawArgs = ksched_framework::registry::decode_args(args)?;
        let mut out = DynamicResourcesArgs::default();
        if let Some(t) = raw.filter_timeout {
            out.filter_timeout_nanos = parse_go_duration(&t)?;
            out.filter_timeout_text = t;
        }
        if let Some(t) = raw.binding_timeout {
            out.binding_timeout_nanos = parse_go_duration(&t)?;
            out.binding_timeout_text = t;
        }
        if let Some(t) = raw.device_selection.filter(|t| !t.is_empty()) {
            out.device_selection = DeviceSelection::parse(&t);
            out.device_selection_text = t;
        }
        Ok(out)
    }

    /// The filter timeout (zero when negative, which validation rejects anyway).
    pub fn filter_timeout(&self) -> Duration {
        Duration::from_nanos(self.filter_timeout_nanos.max(0) as u64)
    }

    /// The binding timeout.
    pub fn binding_timeout(&self) -> Duration {
        Duration::from_nanos(self.binding_timeout_nanos.max(0) as u64)
    }

    /// The device selection (upstream's first fit when unknown, which validation rejects).
    pub fn device_selection(&self) -> DeviceSelection {
        self.device_selection.unwrap_or_default()
    }
}

/// Validates like upstream's `ValidateDynamicResourcesArgs` at the default gates; `path` prefixes
/// the field names ("" for none). Several problems are reported as `[e1, e2]`.
pub fn validate_dynamic_resources_args(path: &str, args: &DynamicResourcesArgs) -> Result<(), String> {
    let field = |f: &str| if path.is_empty() { f.to_string() } else { format!("{path}.{f}") };
    let mut errs = Vec::new();
    if args.filter_timeout_nanos < 0 {
        errs.push(format!(
            "{}: Invalid value: {:?}: must be zero or positive",
            field("filterTimeout"),
            args.filter_timeout_text
        ));
    }
    if args.binding_timeout_nanos < 1_000_000_000 {
        errs.push(format!(
            "{}: Invalid value: {:?}: must be at least 1 second",
            field("bindingTimeout"),
            args.binding_timeout_text
        ));
    }
    if args.device_selection.is_none() {
        let supported: Vec<String> = DeviceSelection::NAMES.iter().map(|n| format!("{n:?}")).collect();
        errs.push(format!(
            "{}: Unsupported value: {:?}: supported values: {}",
            field("deviceSelection"),
            args.device_selection_text,
            supported.join(", ")
        ));
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// Parses a Go `time.Duration` string (`1h2m3.5s`, `-10ms`, `0`) into nanoseconds.
pub fn parse_go_duration(s: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return Err(invalid());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| invalid())?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale: f64 = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            u => return Err(format!("time: unknown unit {u:?} in duration {s:?}")),
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    let nanos = total.round() as i128;
    Ok(if neg { -nanos } else { nanos })
}
