//! Parsing Kubernetes resource quantities ("100m", "1.5Gi", "2e3") into integers.

/// Error for a quantity string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}")]
pub struct QuantityError(pub String);

/// Parses a quantity into `value × 10^scale_pow10` rounded up (away from zero for positives),
/// which is how upstream's `Value()` (scale 0) and `MilliValue()` (scale 3) behave.
fn parse_scaled(s: &str, scale_pow10: i32) -> Result<i64, QuantityError> {
    let v = scaled_i128(s, scale_pow10, 30).ok_or_else(|| QuantityError(s.to_string()))?;
    let magnitude = v.unsigned_abs().min(i64::MAX as u128) as i64;
    Ok(if v < 0 { -magnitude } else { magnitude })
}

/// A quantity as `value × 10^scale_pow10`, rounded up as the API machinery rounds, in an i128
/// that saturates instead of overflowing (nano units at scale 9). `None` when `s` is not a
/// quantity or has more than `max_digits` significant digits.
pub fn scaled_i128(s: &str, scale_pow10: i32, max_digits: usize) -> Option<i128> {
    let s = s.trim();
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
        return None;
    }
    // The mantissa as an integer plus the count of fractional digits.
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > max_digits {
        return None;
    }
    let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    // i64: a long fraction, a suffix and any i32 exponent add up without overflow.
    let mut exp10: i64 = i64::from(scale_pow10) - frac_part.len() as i64;
    let mut base2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => base2 = 10,
        "Mi" => base2 = 20,
        "Gi" => base2 = 30,
        "Ti" => base2 = 40,
        "Pi" => base2 = 50,
        "Ei" => base2 = 60,
        _ => exp10 += i64::from(suffix.strip_prefix(['e', 'E'])?.parse::<i32>().ok()?),
    }
    let mut value = mantissa.checked_mul(1i128 << base2)?;
    if exp10 >= 0 {
        // Past 10^38 an i128 overflows: any non-zero value saturates.
        value = match u32::try_from(exp10).ok().and_then(|e| 10i128.checked_pow(e)) {
            Some(p) => value.saturating_mul(p),
            None if value == 0 => 0,
            None => i128::MAX,
        };
    } else {
        value = match u32::try_from(-exp10).ok().and_then(|e| 10i128.checked_pow(e)) {
            // Round up, as upstream does for Value/MilliValue (the value is not negative here).
            Some(d) => value / d + i128::from(value % d != 0),
            None => i128::from(value > 0),
        };
    }
    Some(if neg { -value } else { value })
}

/// The integer value of a quantity, rounded up ("1.5Gi" bytes, "2" pods).
pub fn value(q: &str) -> Result<i64, QuantityError> {
    parse_scaled(q, 0)
}

/// The value in thousandths, rounded up ("100m" -> 100, "1" -> 1000): used for cpu.
pub fn milli_value(q: &str) -> Result<i64, QuantityError> {
    parse_scaled(q, 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_forms() {
        let cases = [
            ("100m", 1, 100),
            ("1", 1, 1000),
            ("1.5", 2, 1500),
            ("0.1", 1, 100),
            ("2Gi", 2147483648, 2147483648000),
            ("500Mi", 524288000, 524288000000),
            ("1k", 1000, 1_000_000),
            ("1e3", 1000, 1_000_000),
            ("1E3", 1000, 1_000_000),
            ("110", 110, 110_000),
            ("1n", 1, 1),
            ("250m", 1, 250),
            ("-1", -1, -1000),
            ("32Gi", 34359738368, 34359738368000),
        ];
        for (q, v, m) in cases {
            assert_eq!(value(q), Ok(v), "value({q})");
            assert_eq!(milli_value(q), Ok(m), "milli_value({q})");
        }
    }

    #[test]
    fn huge_exponents_saturate_at_once() {
        // Found by the quantity fuzz target: a loop over the exponent took seconds.
        assert_eq!(value("6e2100210202"), Ok(i64::MAX));
        assert_eq!(milli_value("1e2147483647"), Ok(i64::MAX));
        assert_eq!(value("0e2147483647"), Ok(0));
        assert_eq!(value("1e-2147483648"), Ok(1));
        assert_eq!(value("1e38"), Ok(i64::MAX));
    }

    #[test]
    fn rejects_garbage() {
        for q in ["", "abc", "1.2.3", "1Qi", ".", "1e"] {
            assert!(value(q).is_err(), "{q} should fail");
        }
    }
}
