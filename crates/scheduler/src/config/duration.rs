//! Go `time.Duration` semantics for config fields: parsing like `time.ParseDuration`, printing like
//! `Duration.String()` (`15s`, `10m0s`, `1.5s`, `300ms`), serialised as that string.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOSECOND: u64 = 1;
const MICROSECOND: u64 = 1_000 * NANOSECOND;
const MILLISECOND: u64 = 1_000 * MICROSECOND;
const SECOND: u64 = 1_000 * MILLISECOND;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// A signed span of nanoseconds with Go's textual form (`metav1.Duration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(i64);

/// Why a duration string was rejected; `Display` matches Go's `time.ParseDuration` errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationParseError(String);

impl fmt::Display for DurationParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DurationParseError {}

impl Duration {
    /// The zero duration.
    pub const ZERO: Duration = Duration(0);

    /// A duration of `n` nanoseconds.
    pub const fn from_nanos(n: i64) -> Self {
        Duration(n)
    }

    /// A duration of `ms` milliseconds (saturating).
    pub const fn from_millis(ms: i64) -> Self {
        Duration(ms.saturating_mul(MILLISECOND as i64))
    }

    /// A duration of `s` seconds (saturating).
    pub const fn from_secs(s: i64) -> Self {
        Duration(s.saturating_mul(SECOND as i64))
    }

    /// The duration in nanoseconds.
    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// True for a negative duration.
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// The equivalent `std::time::Duration`, or `None` when negative.
    pub fn to_std(self) -> Option<std::time::Duration> {
        u64::try_from(self.0).ok().map(std::time::Duration::from_nanos)
    }

    /// Parses Go duration syntax: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or a bare `0`.
    pub fn parse(input: &str) -> Result<Self, DurationParseError> {
        let invalid = || DurationParseError(format!("time: invalid duration {}", go_quote(input)));
        let mut s = input;
        let mut neg = false;
        if let Some(c) = s.chars().next() {
            if c == '-' || c == '+' {
                neg = c == '-';
                s = &s[1..];
            }
        }
        if s == "0" {
            return Ok(Duration::ZERO);
        }
        if s.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        while !s.is_empty() {
            let b = s.as_bytes();
            if !(b[0] == b'.' || b[0].is_ascii_digit()) {
                return Err(invalid());
            }
            // Integer part; overflow makes the whole string invalid.
            let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
            let mut whole: u64 = 0;
            for &c in &b[..int_len] {
                whole = whole
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(c - b'0')))
                    .filter(|v| *v <= 1 << 63)
                    .ok_or_else(invalid)?;
            }
            s = &s[int_len..];
            let has_int = int_len > 0;
            // Fraction: digits beyond u64 precision are dropped, as Go does.
            let mut frac: u64 = 0;
            let mut scale: f64 = 1.0;
            let mut has_frac = false;
            if s.starts_with('.') {
                s = &s[1..];
                let fb = s.as_bytes();
                let frac_len = fb.iter().take_while(|c| c.is_ascii_digit()).count();
                let mut overflow = false;
                for &c in &fb[..frac_len] {
                    if overflow {
                        continue;
                    }
                    match frac.checked_mul(10).and_then(|v| v.checked_add(u64::from(c - b'0'))) {
                        Some(v) if v <= 1 << 63 => {
                            frac = v;
                            scale *= 10.0;
                        }
                        _ => overflow = true,
                    }
                }
                s = &s[frac_len..];
                has_frac = frac_len > 0;
            }
            if !has_int && !has_frac {
                return Err(invalid());
            }
            let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
            if unit_len == 0 {
                return Err(DurationParseError(format!("time: missing unit in duration {}", go_quote(input))));
            }
            let unit_str = &s[..unit_len];
            s = &s[unit_len..];
            let unit = match unit_str {
                "ns" => NANOSECOND,
                "us" | "\u{b5}s" | "\u{3bc}s" => MICROSECOND,
                "ms" => MILLISECOND,
                "s" => SECOND,
                "m" => MINUTE,
                "h" => HOUR,
                _ => {
                    return Err(DurationParseError(format!(
                        "time: unknown unit {} in duration {}",
                        go_quote(unit_str),
                        go_quote(input)
                    )))
                }
            };
            if whole > (1 << 63) / unit {
                return Err(invalid());
            }
            let mut v = whole * unit;
            if frac > 0 {
                v += (frac as f64 * (unit as f64 / scale)) as u64;
                if v > 1 << 63 {
                    return Err(invalid());
                }
            }
            total = total.checked_add(v).filter(|t| *t <= 1 << 63).ok_or_else(invalid)?;
        }
        if neg {
            return Ok(Duration((total as i64).wrapping_neg()));
        }
        if total > i64::MAX as u64 {
            return Err(invalid());
        }
        Ok(Duration(total as i64))
    }
}

/// Go's `strconv.Quote` for the ASCII-printable subset, escaping the rest.
fn go_quote(s: &str) -> String {
    super::field::go_quote(s)
}

/// Writes `v / 10^prec` fraction digits (without trailing zeros) and returns the integer part.
fn push_frac(out: &mut Vec<u8>, v: u64, prec: u32) -> u64 {
    let mut v = v;
    let mut printed = false;
    for _ in 0..prec {
        let digit = v % 10;
        printed = printed || digit != 0;
        if printed {
            out.push(b'0' + digit as u8);
        }
        v /= 10;
    }
    if printed {
        out.push(b'.');
    }
    v
}

fn push_int(out: &mut Vec<u8>, v: u64) {
    if v == 0 {
        out.push(b'0');
        return;
    }
    let mut v = v;
    while v > 0 {
        out.push(b'0' + (v % 10) as u8);
        v /= 10;
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Built back to front, like Go's implementation, then reversed.
        let neg = self.0 < 0;
        let mut u = self.0.unsigned_abs();
        if u == 0 {
            return f.write_str("0s");
        }
        let mut rev: Vec<u8> = Vec::with_capacity(32);
        if u < SECOND {
            rev.push(b's');
            let prec = if u < MICROSECOND {
                rev.push(b'n');
                0
            } else if u < MILLISECOND {
                // "µ" reversed byte-wise
                rev.extend_from_slice(&[0xB5, 0xC2]);
                3
            } else {
                rev.push(b'm');
                6
            };
            u = push_frac(&mut rev, u, prec);
            push_int(&mut rev, u);
        } else {
            rev.push(b's');
            u = push_frac(&mut rev, u, 9);
            push_int(&mut rev, u % 60);
            u /= 60;
            if u > 0 {
                rev.push(b'm');
                push_int(&mut rev, u % 60);
                u /= 60;
                if u > 0 {
                    rev.push(b'h');
                    push_int(&mut rev, u);
                }
            }
        }
        if neg {
            rev.push(b'-');
        }
        rev.reverse();
        f.write_str(std::str::from_utf8(&rev).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for Duration {
    type Err = DurationParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Duration::parse(s)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Duration::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_go() {
        let cases = [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (300_000_000, "300ms"),
            (1_500_000_000, "1.5s"),
            (15 * SECOND as i64, "15s"),
            (600 * SECOND as i64, "10m0s"),
            (90 * SECOND as i64, "1m30s"),
            (HOUR as i64, "1h0m0s"),
            (-(SECOND as i64), "-1s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (i64::MAX, "2562047h47m16.854775807s"),
        ];
        for (n, want) in cases {
            assert_eq!(Duration::from_nanos(n).to_string(), want, "{n}");
        }
    }

    #[test]
    fn parses_like_go() {
        let ok = [
            ("0", 0),
            ("-0", 0),
            ("15s", 15 * SECOND as i64),
            ("1m30s", 90 * SECOND as i64),
            ("1.5s", 1_500_000_000),
            (".5s", 500_000_000),
            ("1.s", SECOND as i64),
            ("300ms", 300_000_000),
            ("1us", 1_000),
            ("1µs", 1_000),
            ("1μs", 1_000),
            ("-1h", -(HOUR as i64)),
            ("+2h45m", (2 * HOUR + 45 * MINUTE) as i64),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
        ];
        for (s, want) in ok {
            assert_eq!(Duration::parse(s).map(Duration::as_nanos), Ok(want), "{s}");
        }
        let bad = [
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("1x", r#"time: unknown unit "x" in duration "1x""#),
            (".s", r#"time: invalid duration ".s""#),
            ("s", r#"time: invalid duration "s""#),
            ("9223372036854775808ns", r#"time: invalid duration "9223372036854775808ns""#),
        ];
        for (s, want) in bad {
            assert_eq!(Duration::parse(s).unwrap_err().to_string(), want, "{s}");
        }
    }
}
