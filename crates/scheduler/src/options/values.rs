//! Flag value syntaxes of pflag / component-base, with Go's error texts (so a bad value reads
//! `invalid argument "x" for "--flag" flag: strconv.ParseBool: parsing "x": invalid syntax`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use crate::config::Duration;

/// A flag value that failed to parse; `Display` is the Go error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError(pub String);

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValueError {}

/// Go's `%q` for a string.
pub fn go_quote(s: &str) -> String {
    ksched_framework::gofmt::quote(s)
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Result<bool, ValueError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(ValueError(format!("strconv.ParseBool: parsing {}: invalid syntax", go_quote(s)))),
    }
}

fn int_error(func: &str, s: &str, range: bool) -> ValueError {
    let why = if range { "value out of range" } else { "invalid syntax" };
    ValueError(format!("strconv.{func}: parsing {}: {why}", go_quote(s)))
}

/// Go's `strconv.ParseInt(s, 0, 64)` as pflag's `int` uses it (decimal, `0x`, `0o`, `0b`, `_`).
pub fn parse_int(s: &str) -> Result<i64, ValueError> {
    parse_int_bits(s, 64)
}

/// pflag's `int32`.
pub fn parse_int32(s: &str) -> Result<i32, ValueError> {
    parse_int_bits(s, 32).map(|v| v as i32)
}

fn parse_int_bits(s: &str, bits: u32) -> Result<i64, ValueError> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string())
    } else {
        (10, lower.clone())
    };
    // Underscores are only allowed with a base prefix; Go rejects them in plain decimals.
    let digits = if radix != 10 { digits.replace('_', "") } else { digits };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(int_error("ParseInt", s, false));
    }
    let magnitude = i128::from_str_radix(&digits, radix).map_err(|_| int_error("ParseInt", s, true))?;
    let v = if neg { -magnitude } else { magnitude };
    let (min, max) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    if v < min || v > max {
        return Err(int_error("ParseInt", s, true));
    }
    Ok(v as i64)
}

/// Go's `strconv.ParseFloat(s, 32)` as pflag's `float32` uses it.
pub fn parse_float32(s: &str) -> Result<f32, ValueError> {
    let t = s.replace('_', "");
    let ok_syntax = !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        || matches!(t.to_ascii_lowercase().trim_start_matches(['+', '-']), "inf" | "infinity" | "nan");
    match t.parse::<f32>() {
        Ok(v) if ok_syntax => Ok(v),
        _ => Err(ValueError(format!("strconv.ParseFloat: parsing {}: invalid syntax", go_quote(s)))),
    }
}

/// Go's `time.ParseDuration`.
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    Duration::parse(s).map_err(|e| ValueError(e.to_string()))
}

/// pflag's `ip`: `net.ParseIP` after trimming spaces.
pub fn parse_ip(s: &str) -> Result<IpAddr, ValueError> {
    s.trim().parse::<IpAddr>().map_err(|_| ValueError(format!("failed to parse IP: {}", go_quote(s))))
}

/// One `--tls-sni-cert-key` value: `cert,key[:domain,...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedCertKey {
    /// Certificate file.
    pub cert_file: String,
    /// Private key file.
    pub key_file: String,
    /// Domain patterns; empty ⇒ names are taken from the certificate.
    pub names: Vec<String>,
}

impl fmt::Display for NamedCertKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.cert_file, self.key_file)?;
        if !self.names.is_empty() {
            write!(f, ":{}", self.names.join(","))?;
        }
        Ok(())
    }
}

/// Parses `cert,key[:domain,...]` like component-base's `NamedCertKey.Set`.
pub fn parse_named_cert_key(s: &str) -> Result<NamedCertKey, ValueError> {
    let (files, names) = match s.split_once(':') {
        Some((f, n)) => (f, n.split(',').map(|x| x.trim().to_string()).collect()),
        None => (s, Vec::new()),
    };
    let parts: Vec<&str> = files.split(',').collect();
    if parts.len() != 2 {
        return Err(ValueError("expected comma separated certificate and key file paths".into()));
    }
    Ok(NamedCertKey { cert_file: parts[0].trim().into(), key_file: parts[1].trim().into(), names })
}

/// One `--vmodule` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VModuleItem {
    /// File pattern.
    pub pattern: String,
    /// Verbosity for matching files.
    pub level: u32,
}

/// Parses `pattern=N,...` (empty items, e.g. from a trailing comma, are skipped).
pub fn parse_vmodule(s: &str) -> Result<Vec<VModuleItem>, ValueError> {
    let mut out = Vec::new();
    for pat in s.split(',').filter(|p| !p.is_empty()) {
        let parts: Vec<&str> = pat.split('=').collect();
        if parts.len() != 2 || parts[0].is_empty() || parts[1].is_empty() {
            return Err(ValueError(format!("{} does not have the pattern=N format", go_quote(pat))));
        }
        let level =
            parse_level(parts[1]).map_err(|e| ValueError(format!("parsing verbosity in {}: {e}", go_quote(pat))))?;
        out.push(VModuleItem { pattern: parts[0].to_string(), level });
    }
    Ok(out)
}

/// A klog verbosity: `strconv.ParseUint(s, 10, 31)`.
pub fn parse_level(s: &str) -> Result<u32, ValueError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(int_error("ParseUint", s, false));
    }
    match s.parse::<u64>() {
        Ok(v) if v < (1 << 31) => Ok(v as u32),
        _ => Err(int_error("ParseUint", s, true)),
    }
}

/// A resource quantity in bytes (`512`, `1K`, `2Ki`, `3M`, `5Mi`, ...).
pub fn parse_quantity(s: &str) -> Result<u64, ValueError> {
    let bad = || {
        ValueError("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into())
    };
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match suffix {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return Err(bad()),
    };
    Ok((n * mult).ceil() as u64)
}

/// pflag's `stringToString` as `--allow-metric-labels` uses it: one `=` ⇒ the whole value is a
/// single pair (so `metric,label=v1,v2` works); several ⇒ a CSV line of `key=value` fields.
pub fn parse_string_to_string(s: &str) -> Result<BTreeMap<String, String>, ValueError> {
    let pairs: Vec<String> = match s.matches('=').count() {
        0 => return Err(ValueError(format!("{s} must be formatted as key=value"))),
        1 => vec![s.trim_matches('"').to_string()],
        _ => csv_fields(s),
    };
    let mut out = BTreeMap::new();
    for p in pairs {
        let Some((k, v)) = p.split_once('=') else {
            return Err(ValueError(format!("{p} must be formatted as key=value")));
        };
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// One CSV record: commas separate fields, a field starting with `"` runs to its closing quote.
fn csv_fields(s: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if in_quotes && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' if in_quotes => in_quotes = false,
            '"' if cur.is_empty() => in_quotes = true,
            ',' if !in_quotes => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// One `--feature-gates` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGateSetting {
    /// Component (`kube` when omitted).
    pub component: String,
    /// Gate name.
    pub name: String,
    /// Requested value.
    pub enabled: bool,
}

/// Parses `[component:]Key=bool,...`.
pub fn parse_feature_gates(s: &str) -> Result<Vec<FeatureGateSetting>, ValueError> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(ValueError(format!("malformed pair, expect string=string: {item}")));
        };
        let (component, name) = match key.split_once(':') {
            Some((c, n)) => (c.trim().to_string(), n.trim().to_string()),
            None => ("kube".to_string(), key.trim().to_string()),
        };
        let enabled = parse_bool(value.trim())
            .map_err(|e| ValueError(format!("invalid value of {name}={}, err: {e}", value.trim())))?;
        out.push(FeatureGateSetting { component, name, enabled });
    }
    Ok(out)
}

/// Parses one `[component=]major.minor` version setting.
pub fn parse_component_version(s: &str) -> Result<(String, u32, u32), ValueError> {
    let (component, ver) = match s.split_once('=') {
        Some((c, v)) => (c.trim().to_string(), v.trim()),
        None => ("kube".to_string(), s.trim()),
    };
    let bad = || ValueError(format!("illegal version string {}", go_quote(ver)));
    let ver_num = ver.strip_prefix('v').unwrap_or(ver);
    let (maj, min) = ver_num.split_once('.').ok_or_else(bad)?;
    let major = maj.parse::<u32>().map_err(|_| bad())?;
    let minor = min.parse::<u32>().map_err(|_| bad())?;
    Ok((component, major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_number_syntaxes() {
        assert_eq!(parse_int("10259").unwrap(), 10259);
        assert_eq!(parse_int("0x10").unwrap(), 16);
        assert_eq!(parse_int("-1").unwrap(), -1);
        assert_eq!(parse_int("x").unwrap_err().0, r#"strconv.ParseInt: parsing "x": invalid syntax"#);
        assert_eq!(
            parse_int32("4294967296").unwrap_err().0,
            r#"strconv.ParseInt: parsing "4294967296": value out of range"#
        );
        assert_eq!(parse_float32("50").unwrap(), 50.0);
        assert_eq!(parse_float32("1.5e1").unwrap(), 15.0);
        assert!(parse_float32("abc").is_err());
        assert!(parse_bool("T").unwrap());
        assert_eq!(parse_bool("yes").unwrap_err().0, r#"strconv.ParseBool: parsing "yes": invalid syntax"#);
    }

    #[test]
    fn composite_values() {
        assert_eq!(
            parse_named_cert_key("a.crt,a.key:*.foo.com,foo.com").unwrap(),
            NamedCertKey {
                cert_file: "a.crt".into(),
                key_file: "a.key".into(),
                names: vec!["*.foo.com".into(), "foo.com".into()]
            }
        );
        assert!(parse_named_cert_key("a.crt").is_err());
        assert_eq!(parse_vmodule("a=1,b*=3,").unwrap().len(), 2);
        assert!(parse_vmodule("a").is_err());
        assert_eq!(parse_quantity("2Ki").unwrap(), 2048);
        assert_eq!(parse_quantity("1M").unwrap(), 1_000_000);
        let m = parse_string_to_string("m1,l1=v1,v2").unwrap();
        assert_eq!(m.get("m1,l1").map(String::as_str), Some("v1,v2"));
        let m = parse_string_to_string(r#"a=1,"b=2,3""#).unwrap();
        assert_eq!(m.get("b").map(String::as_str), Some("2,3"));
        let g = parse_feature_gates("A=true,wardle:B=false").unwrap();
        assert_eq!(g[1], FeatureGateSetting { component: "wardle".into(), name: "B".into(), enabled: false });
        assert_eq!(parse_component_version("kube=1.35").unwrap(), ("kube".into(), 1, 35));
    }
}
