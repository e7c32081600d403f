//! Exact resource quantities for counters, consumable capacity and CEL's `quantity()`: the
//! allocator compares and sums them, so the integer-rounding parser of the framework is not
//! enough ("1.5Gi" and "1536Mi" must compare equal, "500m" must not round to 1).

use std::cmp::Ordering;
use std::fmt;

use ksched_framework::quantity::QuantityError;

/// A quantity as an exact decimal: `mantissa × 10^exp`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quantity {
    mantissa: i128,
    exp: i32,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { mantissa: 0, exp: 0 };

    /// The quantity of an integer.
    pub fn from_i64(v: i64) -> Self {
        Quantity { mantissa: v as i128, exp: 0 }.normalized()
    }

    /// Parses `100m`, `1.5Gi`, `2e3`, `-1`: Kubernetes' quantity grammar.
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let err = || QuantityError(s.to_string());
        let t = s.trim();
        if t.is_empty() || t.len() != s.len() {
            return Err(err());
        }
        let (neg, body) = match t.as_bytes()[0] {
            b'-' => (true, &t[1..]),
            b'+' => (false, &t[1..]),
            _ => (false, t),
        };
        let num_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
        let (num, suffix) = body.split_at(num_end);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(err());
        }
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        // The digits of both parts as one integer, without building the string (the allocator
        // parses capacities per device and attempt).
        let mut significant = 0usize;
        let mut mantissa: i128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            if significant == 0 && b == b'0' {
                continue;
            }
            significant += 1;
            if significant > 36 {
                return Err(err());
            }
            mantissa = mantissa * 10 + i128::from(b - b'0');
        }
        let mut exp = -(frac_part.len() as i32);
        let base2 = match suffix {
            "" => 0,
            "n" => {
                exp -= 9;
                0
            }
            "u" => {
                exp -= 6;
                0
            }
            "m" => {
                exp -= 3;
                0
            }
            "k" => {
                exp += 3;
                0
            }
            "M" => {
                exp += 6;
                0
            }
            "G" => {
                exp += 9;
                0
            }
            "T" => {
                exp += 12;
                0
            }
            "P" => {
                exp += 15;
                0
            }
            "E" => {
                exp += 18;
                0
            }
            "Ki" => 10,
            "Mi" => 20,
            "Gi" => 30,
            "Ti" => 40,
            "Pi" => 50,
            "Ei" => 60,
            _ => {
                let rest = suffix.strip_prefix(['e', 'E']).ok_or_else(err)?;
                let e: i32 = rest.parse().map_err(|_| err())?;
                if e.abs() > 1000 {
                    return Err(err());
                }
                exp += e;
                0
            }
        };
        if base2 > 0 {
            mantissa = mantissa.checked_mul(1i128 << base2).ok_or_else(err)?;
        }
        if neg {
            mantissa = -mantissa;
        }
        Ok(Quantity { mantissa, exp }.normalized())
    }

    /// Parses a Kubernetes API quantity.
    pub fn of(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Result<Self, QuantityError> {
        Quantity::parse(&q.0)
    }

    fn normalized(mut self) -> Self {
        if self.mantissa == 0 {
            return Quantity::ZERO;
        }
        while self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.exp += 1;
        }
        self
    }

    /// Both mantissas at the smaller exponent, or `None` when that overflows.
    fn aligned(self, other: Quantity) -> Option<(i128, i128, i32)> {
        let exp = self.exp.min(other.exp);
        let scale = |q: Quantity| -> Option<i128> {
            let d = u32::try_from(q.exp - exp).ok()?;
            q.mantissa.checked_mul(10i128.checked_pow(d)?)
        };
        Some((scale(self)?, scale(other)?, exp))
    }

    /// -1, 0 or 1.
    pub fn sign(self) -> i64 {
        self.mantissa.signum() as i64
    }

    /// True for zero.
    pub fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    fn plus(self, other: Quantity) -> Quantity {
        match self.aligned(other) {
            Some((a, b, exp)) => match a.checked_add(b) {
                Some(m) => Quantity { mantissa: m, exp }.normalized(),
                None => Quantity::from_f64(self.as_f64() + other.as_f64()),
            },
            None => Quantity::from_f64(self.as_f64() + other.as_f64()),
        }
    }

    fn from_f64(v: f64) -> Quantity {
        // Only reached beyond i128 range, where Kubernetes would not go either.
        Quantity { mantissa: v as i128, exp: 0 }.normalized()
    }

    /// The value as a float (CEL's `asApproximateFloat`).
    pub fn as_f64(self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exp)
    }

    /// True when the value has no fractional part.
    pub fn is_integer(self) -> bool {
        self.exp >= 0
    }

    /// The exact integer value, if it is one and fits into an i64.
    pub fn as_i64(self) -> Option<i64> {
        if self.exp < 0 {
            return None;
        }
        let m = self.mantissa.checked_mul(10i128.checked_pow(self.exp as u32)?)?;
        i64::try_from(m).ok()
    }

    /// The integer value rounded up (away from zero), as Kubernetes' `Value()` does.
    pub fn value(self) -> i64 {
        if self.exp >= 0 {
            return self.as_i64().unwrap_or(if self.mantissa < 0 { i64::MIN } else { i64::MAX });
        }
        let Some(d) = 10i128.checked_pow((-self.exp) as u32) else {
            return self.mantissa.signum() as i64;
        };
        let q = self.mantissa / d;
        let r = self.mantissa % d;
        let v = if r == 0 { q } else { q + r.signum() };
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Formats like `resource.NewQuantity(v, BinarySI).String()` for integers: the largest
    /// binary suffix that divides the value exactly, else plain digits.
    pub fn binary_si_string(v: i64) -> String {
        const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        if v == 0 {
            return "0".into();
        }
        let mut n = v;
        let mut i = 0;
        while i < SUFFIXES.len() && n % 1024 == 0 {
            n /= 1024;
            i += 1;
        }
        if i == 0 {
            v.to_string()
        } else {
            format!("{n}{}", SUFFIXES[i - 1])
        }
    }
}

/// `self + other` (falling back to an approximation beyond i128).
impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, other: Quantity) -> Quantity {
        self.plus(other)
    }
}

/// `self - other`.
impl std::ops::Sub for Quantity {
    type Output = Quantity;
    fn sub(self, other: Quantity) -> Quantity {
        self.plus(Quantity { mantissa: -other.mantissa, exp: other.exp })
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.aligned(*other) {
            Some((a, b, _)) => a.cmp(&b),
            None => {
                let (a, b) = (self.as_f64(), other.as_f64());
                a.partial_cmp(&b).unwrap_or(Ordering::Equal)
            }
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exp >= 0 {
            if let Some(v) = self.as_i64() {
                return write!(f, "{v}");
            }
            return write!(f, "{}e{}", self.mantissa, self.exp);
        }
        // Fractions print in the smallest of m, u, n that holds them exactly.
        for (scale, suffix) in [(3, "m"), (6, "u"), (9, "n")] {
            if -self.exp <= scale {
                let m = self.mantissa * 10i128.pow((scale + self.exp) as u32);
                return write!(f, "{m}{suffix}");
            }
        }
        write!(f, "{}e{}", self.mantissa, self.exp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn equal_values_in_different_units_compare_equal() {
        assert_eq!(q("1.5Gi"), q("1536Mi"));
        assert_eq!(q("1k"), q("1000"));
        assert_eq!(q("1e3"), q("1000"));
        assert_eq!(q("500m"), q("0.5"));
        assert!(q("500m") < q("1"));
        assert!(q("40Gi") > q("40G"));
        assert!(q("-1") < q("0"));
    }

    #[test]
    fn arithmetic_is_exact() {
        assert_eq!(q("1Gi") + q("1Gi"), q("2Gi"));
        assert_eq!(q("1") - q("250m"), q("750m"));
        assert_eq!((q("10") - q("20")).sign(), -1);
        assert!((q("100m") + q("900m")).is_integer());
    }

    #[test]
    fn value_rounds_up_like_kubernetes() {
        assert_eq!(q("500m").value(), 1);
        assert_eq!(q("1.5Gi").value(), 1610612736);
        assert_eq!(q("2").value(), 2);
    }

    #[test]
    fn binary_si_strings_use_the_largest_exact_suffix() {
        assert_eq!(Quantity::binary_si_string(2048), "2Ki");
        assert_eq!(Quantity::binary_si_string(1536), "1536");
        assert_eq!(Quantity::binary_si_string(8 << 30), "8Gi");
        assert_eq!(Quantity::binary_si_string(0), "0");
    }

    #[test]
    fn digits_count_from_the_first_significant_one() {
        assert_eq!(q("007.50"), q("7.5"));
        assert_eq!(q("0.000"), Quantity::ZERO);
        assert_eq!(q("0.25Ki"), q("256"));
        // 36 significant digits are exact, leading zeros do not count, 37 are refused.
        let d36 = "9".repeat(36);
        assert_eq!(q(&format!("000{d36}")), q(&d36));
        assert_eq!(q(&d36) + q("1"), q("1e36"));
        assert!(Quantity::parse(&format!("1{d36}")).is_err());
        assert!(Quantity::parse(&format!("0.{d36}1")).is_err());
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "abc", "1.2.3", "1Qi", ".", "1e", " 1"] {
            assert!(Quantity::parse(s).is_err(), "{s}");
        }
    }
}
