//! `resource.Quantity` parsing with upstream's acceptance rules and errors.
//!
//! The real API server rejects a malformed quantity while decoding the
//! request body (400 BadRequest, before validation runs), with one of the two
//! messages below; [`parse_quantity`] reproduces which inputs fail and why.

/// The decoder's message for a string that is not a quantity at all.
pub const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// The decoder's message for a well-formed number with an unknown suffix.
pub const BAD_SUFFIX: &str = "unable to parse quantity's suffix";

/// A parsed quantity (its value as a float is exact enough for comparisons
/// and sign/integer checks on realistic resource amounts).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Quantity(pub f64);

impl Quantity {
    /// Whether the value is a whole number (upstream: `MilliValue() % 1000 == 0`).
    pub fn is_integer(self) -> bool {
        let milli = (self.0 * 1000.0).ceil();
        (milli % 1000.0).abs() < f64::EPSILON
    }
}

/// Parses a quantity string (`100m`, `1Gi`, `2e3`, `+1.5`).
pub fn parse_quantity(s: &str) -> Result<Quantity, &'static str> {
    let s = s.trim();
    let b = s.as_bytes();
    let mut pos = 0;
    let mut negative = false;
    if let Some(&c) = b.first() {
        if c == b'-' || c == b'+' {
            negative = c == b'-';
            pos = 1;
        }
    }
    let num_start = pos;
    while pos < b.len() && (b[pos].is_ascii_digit() || b[pos] == b'.') {
        pos += 1;
    }
    let number = &s[num_start..pos];
    if number.is_empty() || number.bytes().filter(|c| *c == b'.').count() > 1 || number == "." {
        return Err(FORMAT_WRONG);
    }
    let suffix = &s[pos..];
    // The suffix is letters from the SI/binary/exponent set, then optionally a signed exponent.
    let letters_end = suffix.bytes().position(|c| !b"eEinumkKMGTP".contains(&c)).map_or(suffix.len(), |i| i);
    let tail = &suffix[letters_end..];
    let tail_digits = tail.strip_prefix(['+', '-']).unwrap_or(tail);
    if !tail_digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(FORMAT_WRONG);
    }
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if (e.starts_with('e') || e.starts_with('E')) && e.len() > 1 => {
            let exp: i32 = e[1..].parse().map_err(|_| BAD_SUFFIX)?;
            10f64.powi(exp)
        }
        _ => return Err(BAD_SUFFIX),
    };
    let n: f64 = number.parse().map_err(|_| FORMAT_WRONG)?;
    Ok(Quantity(if negative { -n * mult } else { n * mult }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_upstream_forms() {
        for (s, v) in [("100m", 0.1), ("1Gi", 1073741824.0), ("2e3", 2000.0), ("+1.5", 1.5), ("-2", -2.0), (".5", 0.5)]
        {
            assert_eq!(parse_quantity(s), Ok(Quantity(v)), "{s}");
        }
    }

    #[test]
    fn rejects_with_the_decoder_messages() {
        assert_eq!(parse_quantity("abc"), Err(FORMAT_WRONG));
        assert_eq!(parse_quantity(""), Err(FORMAT_WRONG));
        assert_eq!(parse_quantity("1.2.3"), Err(FORMAT_WRONG));
        assert_eq!(parse_quantity("1 Gi"), Err(FORMAT_WRONG));
        assert_eq!(parse_quantity("1K"), Err(BAD_SUFFIX));
        assert_eq!(parse_quantity("1Mii"), Err(BAD_SUFFIX));
    }

    #[test]
    fn integer_check_rounds_milli_up() {
        assert!(parse_quantity("2").unwrap().is_integer());
        assert!(!parse_quantity("1500m").unwrap().is_integer());
    }
}
