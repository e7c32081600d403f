//! `--version` (component-base's verflag): `--version` prints `Kubernetes v1.36.0`,
//! `--version=raw` prints the whole version record, `--version=v1.36.0-foo` changes the
//! reported version (same major/minor/patch only) and keeps running.

use super::values::{go_quote, parse_bool, ValueError};

/// Major version this build reproduces.
pub const MAJOR: u32 = 1;
/// Minor version this build reproduces.
pub const MINOR: u32 = 36;
/// Patch version this build reproduces.
pub const PATCH: u32 = 0;
/// The version reported by default.
pub const GIT_VERSION: &str = "v1.36.0";

/// What `--version` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRequest {
    /// Keep running (flag absent or false); the reported version.
    Run(String),
    /// Print `Kubernetes <version>` and exit 0.
    Print(String),
    /// Print the raw record and exit 0.
    Raw(String),
}

/// Validates a `--version` value at parse time, as verflag's `Set` does.
pub fn parse_version_flag(s: &str) -> Result<String, ValueError> {
    if s == "raw" {
        return Ok(s.to_string());
    }
    if s.starts_with('v') {
        validate_dynamic_version(s)?;
        return Ok(s.to_string());
    }
    parse_bool(s).map(|b| b.to_string())
}

fn validate_dynamic_version(v: &str) -> Result<(), ValueError> {
    if v == GIT_VERSION {
        return Ok(());
    }
    let core = v.trim_start_matches('v').split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    let nums: Option<Vec<u32>> = parts.iter().map(|p| p.parse::<u32>().ok()).collect();
    match nums {
        Some(n) if n.len() == 3 => {
            if (n[0], n[1], n[2]) != (MAJOR, MINOR, PATCH) {
                return Err(ValueError(format!(
                    "version {} must match major/minor/patch of default version {}",
                    go_quote(v),
                    go_quote(GIT_VERSION)
                )));
            }
            Ok(())
        }
        _ => Err(ValueError(format!("could not parse {} as version", go_quote(v)))),
    }
}

/// Interprets the (already validated) flag value.
pub fn request(flag: &str) -> VersionRequest {
    match flag {
        "raw" => VersionRequest::Raw(GIT_VERSION.to_string()),
        "true" => VersionRequest::Print(GIT_VERSION.to_string()),
        v if v.starts_with('v') => VersionRequest::Run(v.to_string()),
        _ => VersionRequest::Run(GIT_VERSION.to_string()),
    }
}

/// `Kubernetes v1.36.0`.
pub fn short(version: &str) -> String {
    format!("Kubernetes {version}")
}

/// Go's `%#v` of `version.Info`, with this build's values.
pub fn raw(version: &str) -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    format!(
        "version.Info{{Major:\"{MAJOR}\", Minor:\"{MINOR}\", EmulationMajor:\"\", EmulationMinor:\"\", \
         MinCompatibilityMajor:\"\", MinCompatibilityMinor:\"\", GitVersion:\"{version}\", GitCommit:\"\", \
         GitTreeState:\"\", BuildDate:\"1970-01-01T00:00:00Z\", GoVersion:\"\", Compiler:\"rustc\", \
         Platform:\"{}/{arch}\"}}",
        std::env::consts::OS
    )
}
