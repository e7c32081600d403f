//! Semantic versions (semver 2.0.0) for version attributes and CEL's `semver()`: strict
//! parsing (no leading zeros, three numeric parts) and precedence comparison.

use std::cmp::Ordering;
use std::fmt;

/// A parsed semantic version; build metadata is kept but ignored by comparisons.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    /// Major version.
    pub major: u64,
    /// Minor version.
    pub minor: u64,
    /// Patch version.
    pub patch: u64,
    /// Pre-release identifiers (`1.0.0-rc.1` → `["rc", "1"]`).
    pub pre: Vec<String>,
    /// Build metadata identifiers.
    pub build: Vec<String>,
}

fn numeric(part: &str, what: &str) -> Result<u64, String> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("Invalid character(s) found in {what} number {part:?}"));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(format!("{} number must not contain leading zeroes {part:?}", capitalize(what)));
    }
    part.parse().map_err(|e| format!("{e}"))
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

fn identifiers(s: &str, what: &str, numeric_leading_zero_check: bool) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for id in s.split('.') {
        if id.is_empty() {
            return Err(format!("{what} is empty"));
        }
        if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(format!("Invalid character(s) found in {what} {id:?}"));
        }
        if numeric_leading_zero_check && id.bytes().all(|b| b.is_ascii_digit()) && id.len() > 1 && id.starts_with('0') {
            return Err(format!("{what} number must not contain leading zeroes {id:?}"));
        }
        out.push(id.to_string());
    }
    Ok(out)
}

impl Version {
    /// Parses `MAJOR.MINOR.PATCH[-PRE][+BUILD]`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("Version string empty".into());
        }
        let mut parts = s.splitn(3, '.');
        let (Some(major), Some(minor), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("No Major.Minor.Patch elements found".into());
        };
        let major = numeric(major, "major")?;
        let minor = numeric(minor, "minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((r, b)) => (r, identifiers(b, "Build meta data", false)?),
            None => (rest, Vec::new()),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((p, pre)) => (p, identifiers(pre, "Prerelease", true)?),
            None => (rest, Vec::new()),
        };
        let patch = numeric(patch, "patch")?;
        Ok(Version { major, minor, patch, pre, build })
    }

    /// Parses leniently as Kubernetes' `semver(s, true)`: a leading `v`, missing minor or
    /// patch parts and leading zeros are accepted.
    pub fn parse_normalized(s: &str) -> Result<Self, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let core_end = s.find(['-', '+']).unwrap_or(s.len());
        let (core, tail) = s.split_at(core_end);
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() < 3 && !tail.is_empty() {
            return Err("short version cannot contain PreRelease/Build meta data".into());
        }
        let mut nums = Vec::new();
        for p in &parts {
            let trimmed = p.trim_start_matches('0');
            nums.push(if trimmed.is_empty() { "0" } else { trimmed }.to_string());
        }
        while nums.len() < 3 {
            nums.push("0".into());
        }
        Version::parse(&format!("{}{}", nums.join("."), tail))
    }

    fn cmp_pre(a: &[String], b: &[String]) -> Ordering {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (x, y) in a.iter().zip(b) {
            let xn = x.bytes().all(|c| c.is_ascii_digit());
            let yn = y.bytes().all(|c| c.is_ascii_digit());
            let o = match (xn, yn) {
                (true, true) => x.parse::<u64>().unwrap_or(0).cmp(&y.parse::<u64>().unwrap_or(0)),
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (false, false) => x.cmp(y),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        a.len().cmp(&b.len())
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| Version::cmp_pre(&self.pre, &other.pre))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build.join("."))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn precedence_follows_semver_2() {
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.2.0",
            "1.10.0",
            "2.0.0",
        ];
        for w in ordered.windows(2) {
            assert!(v(w[0]) < v(w[1]), "{} < {}", w[0], w[1]);
        }
        assert_eq!(v("1.0.0+a").cmp(&v("1.0.0+b")), Ordering::Equal);
    }

    #[test]
    fn strict_parsing_rejects_what_semver_forbids() {
        for s in ["", "1.0", "01.0.0", "1.0.0-", "1.0.0-01", "v1.0.0", "1.a.0", "1.0.0+"] {
            assert!(Version::parse(s).is_err(), "{s}");
        }
        assert_eq!(v("1.2.3-rc.1+b5").to_string(), "1.2.3-rc.1+b5");
    }

    #[test]
    fn normalized_parsing_fills_in_missing_parts() {
        assert_eq!(Version::parse_normalized("v1.2").unwrap(), v("1.2.0"));
        assert_eq!(Version::parse_normalized("01.02.03").unwrap(), v("1.2.3"));
        assert!(Version::parse_normalized("1.2-rc").is_err());
    }
}
