//! Resource quantities (`500m`, `1Gi`, `1e3`, `0.5`) parsed exactly as the API server parses
//! them, and read back as the kubelet reads them (`Value()`, `MilliValue()`).
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go` (`ParseQuantity`,
//! `parseQuantityString`, `Quantity.Value`, `Quantity.MilliValue`) and `suffix.go`, unchanged
//! from Kubernetes 1.18 to 1.36. The value is held exactly in nano-units (`ParseQuantity`
//! rounds every non-zero value up to a multiple of 10⁻⁹), so `1000m` equals `1` and `0.1Gi`
//! is 107374182.4 exactly.

use std::fmt;

/// One resource quantity, exact to 10⁻⁹ of its unit (bytes, cores, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    /// The value × 10⁹.
    nanos: i128,
}

/// Why a quantity was refused, worded as `resource.ParseQuantity`'s errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    /// `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// Beyond 10²⁰ units (Go's `inf.Dec` holds any size; every kubelet reader of such a value
    /// overflows `int64` anyway).
    #[error("quantity out of range")]
    OutOfRange,
}

const NANO: i128 = 1_000_000_000;
/// `maxAllowed`: binary-SI values are capped at 2⁶³−1.
const MAX_ALLOWED_NANOS: i128 = (i64::MAX as i128) * NANO;

/// `suffixer.interpret`: the base and exponent of a suffix, and whether it is binary.
fn interpret(suffix: &str) -> Option<(u32, i32)> {
    let dec = |e| Some((10, e));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => Some((2, 10)),
        "Mi" => Some((2, 20)),
        "Gi" => Some((2, 30)),
        "Ti" => Some((2, 40)),
        "Pi" => Some((2, 50)),
        "Ei" => Some((2, 60)),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            // Go's strconv.ParseInt: an optional sign, then digits.
            let e: i64 = s[1..].parse().ok()?;
            Some((10, i32::try_from(e).ok()?))
        }
        _ => None,
    }
}

/// `⌈a / b⌉` for `a ≥ 0`, `b > 0`.
fn ceil_div(a: i128, b: i128) -> i128 {
    a / b + i128::from(a % b != 0)
}

impl Quantity {
    /// `resource.ParseQuantity`: an optional sign, digits with an optional `.`, then a suffix
    /// (`n u m k M G T P E`, `Ki Mi Gi Ti Pi Ei`, or a decimal exponent `e3`, `E-2`). A non-zero
    /// value is rounded up (away from zero) to a multiple of 10⁻⁹; a binary-SI one is capped
    /// at 2⁶³−1.
    ///
    /// # Errors
    /// [`QuantityError`], with the API server's wording; `OutOfRange` beyond 10²⁰.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        let b = s.as_bytes();
        let mut pos = 0;
        let negative = match b[0] {
            b'-' => {
                pos = 1;
                true
            }
            b'+' => {
                pos = 1;
                false
            }
            _ => false,
        };
        while pos < b.len() && b[pos] == b'0' {
            pos += 1;
        }
        if pos == b.len() {
            return Ok(Quantity::default());
        }
        let num_start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        let num = &s[num_start..pos];
        let mut denom = "";
        if pos < b.len() && b[pos] == b'.' {
            pos += 1;
            let start = pos;
            while pos < b.len() && b[pos].is_ascii_digit() {
                pos += 1;
            }
            denom = &s[start..pos];
        }
        let suffix_start = pos;
        while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
            pos += 1;
        }
        if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
            pos += 1;
        }
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos < b.len() {
            return Err(QuantityError::FormatWrong);
        }
        let (base, exponent) = interpret(&s[suffix_start..]).ok_or(QuantityError::Suffix)?;
        // The digits as one integer, scaled down by the fraction's length.
        let mut mantissa: i128 = 0;
        for d in num.bytes().chain(denom.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(d - b'0')))
                .ok_or(QuantityError::OutOfRange)?;
        }
        let frac = i32::try_from(denom.len()).map_err(|_| QuantityError::OutOfRange)?;
        let limit = 100_000_000_000_000_000_000i128 * NANO;
        let nanos = if base == 10 {
            let shift = exponent + 9 - frac;
            if shift >= 0 {
                10i128
                    .checked_pow(shift as u32)
                    .and_then(|p| mantissa.checked_mul(p))
                    .ok_or(QuantityError::OutOfRange)?
            } else {
                match 10i128.checked_pow(shift.unsigned_abs()) {
                    Some(p) => ceil_div(mantissa, p),
                    // Smaller than any representable quantity: rounded up to 1n.
                    None => i128::from(mantissa != 0),
                }
            }
        } else {
            let scaled = mantissa
                .checked_mul(1i128 << exponent)
                .and_then(|m| m.checked_mul(NANO))
                .ok_or(QuantityError::OutOfRange)?;
            let p = 10i128
                .checked_pow(frac as u32)
                .ok_or(QuantityError::OutOfRange)?;
            ceil_div(scaled, p).min(MAX_ALLOWED_NANOS)
        };
        if nanos > limit {
            return Err(QuantityError::OutOfRange);
        }
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// A whole number of units (`resource.NewQuantity`).
    pub fn from_units(units: i64) -> Quantity {
        Quantity {
            nanos: i128::from(units) * NANO,
        }
    }

    /// A number of thousandths (`resource.NewMilliQuantity`).
    pub fn from_milli(milli: i64) -> Quantity {
        Quantity {
            nanos: i128::from(milli) * 1_000_000,
        }
    }

    /// `Value()`: ⌈q⌉ (bytes for memory), saturated at the `i64` range.
    pub fn value(&self) -> i64 {
        Self::saturate(self.nanos.div_euclid(NANO) + i128::from(self.nanos.rem_euclid(NANO) != 0))
    }

    /// `MilliValue()`: ⌈q × 1000⌉ (millicores for cpu), saturated at the `i64` range.
    pub fn milli_value(&self) -> i64 {
        let m = 1_000_000;
        Self::saturate(self.nanos.div_euclid(m) + i128::from(self.nanos.rem_euclid(m) != 0))
    }

    fn saturate(v: i128) -> i64 {
        i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
    }

    /// `IsZero()`.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// `Sign() < 0`.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }
}

/// How `ParseQuantity` records the suffix a quantity was written with (`Quantity.Format`),
/// which `String()` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `Ki` … `Ei`.
    BinarySi,
    /// `e3`, `E-2`.
    DecimalExponent,
    /// No suffix, or `n u m k M G T P E`.
    DecimalSi,
}

/// `Quantity.String()` of `s`: the API server's canonical form, in which it prints a quantity
/// in messages and stores it (`2048Mi` is `2Gi`, `0.5` is `500m`, `1000` is `1k`, `1e3`
/// stays `1e3`, `1.5Gi` is `1536Mi`, `512Ki`… a binary value that is not a whole number of
/// bytes, or is below 1024, is written in decimal SI).
///
/// Upstream: `Quantity.CanonicalizeBytes`, `int64Amount.AsCanonicalBytes` and
/// `AsCanonicalBase1024Bytes` (`staging/src/k8s.io/apimachinery/pkg/api/resource`,
/// unchanged from 1.18 to 1.36). Values beyond the SI suffixes (above `E`) are written with
/// a decimal exponent.
///
/// # Errors
/// As [`Quantity::parse`].
pub fn canonical(s: &str) -> Result<String, QuantityError> {
    let q = Quantity::parse(s)?;
    if q.is_zero() {
        return Ok("0".into());
    }
    let suffix = s.trim_start_matches(|c: char| matches!(c, '+' | '-' | '.') || c.is_ascii_digit());
    let mut format = if suffix.ends_with('i') {
        Format::BinarySi
    } else if suffix.starts_with(['e', 'E']) {
        Format::DecimalExponent
    } else {
        Format::DecimalSi
    };
    let sign = if q.nanos < 0 { "-" } else { "" };
    let abs = q.nanos.unsigned_abs();
    if format == Format::BinarySi
        && (abs < 1024 * NANO as u128 || !abs.is_multiple_of(NANO as u128))
    {
        format = Format::DecimalSi;
    }
    if format == Format::BinarySi {
        let mut v = abs / NANO as u128;
        let mut exp = 0;
        while v.is_multiple_of(1024) && exp < 6 {
            v /= 1024;
            exp += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
        return Ok(format!("{sign}{v}{suffix}"));
    }
    let (mut amount, mut exp) = (abs, -9i32);
    while amount.is_multiple_of(10) {
        amount /= 10;
        exp += 1;
    }
    match exp.rem_euclid(3) {
        1 => {
            amount *= 10;
            exp -= 1;
        }
        2 => {
            amount *= 100;
            exp -= 2;
        }
        _ => {}
    }
    let si = match exp {
        -9 => Some("n"),
        -6 => Some("u"),
        -3 => Some("m"),
        0 => Some(""),
        3 => Some("k"),
        6 => Some("M"),
        9 => Some("G"),
        12 => Some("T"),
        15 => Some("P"),
        18 => Some("E"),
        _ => None,
    };
    let suffix = match (format, si) {
        (Format::DecimalSi, Some(si)) => si.to_string(),
        (_, _) if exp == 0 => String::new(),
        _ => format!("e{exp}"),
    };
    Ok(format!("{sign}{amount}{suffix}"))
}

impl std::ops::Add for Quantity {
    type Output = Quantity;

    /// `Quantity.Add` (saturating far beyond any real resource).
    fn add(self, rhs: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(rhs.nanos),
        }
    }
}

impl std::ops::AddAssign for Quantity {
    fn add_assign(&mut self, rhs: Quantity) {
        *self = *self + rhs;
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl fmt::Display for Quantity {
    /// The exact value in units (`0.5`, `134217728`), not the API's canonical form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let a = self.nanos.unsigned_abs();
        let (int, frac) = (a / NANO as u128, a % NANO as u128);
        if frac == 0 {
            write!(f, "{sign}{int}")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{sign}{int}.{}", digits.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    // Cases from upstream's quantity_test.go (TestQuantityParse, TestQuantityParseZero,
    // TestQuantityParseNonNumericPanic's error kinds, TestQuantityRoundUp).
    #[test]
    fn parses_as_parse_quantity() {
        assert_eq!(q("500m").milli_value(), 500);
        assert_eq!(q("1Gi").value(), 1 << 30);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E3").value(), 1000);
        assert_eq!(q("0.5").milli_value(), 500);
        assert_eq!(q(".5").milli_value(), 500);
        assert_eq!(q("1.").value(), 1);
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("64Mi"), q("67108864"));
        assert_eq!(q("1k").value(), 1000);
        assert_eq!(q("1E").value(), 1_000_000_000_000_000_000);
        assert_eq!(q("1Ei").value(), 1 << 60);
        assert_eq!(q("8Ei").value(), i64::MAX, "binary SI caps at 2^63-1");
        assert_eq!(q("100u").milli_value(), 1, "MilliValue rounds up");
        assert_eq!(q("1n").value(), 1, "Value rounds up");
        assert_eq!(q("1e-20").value(), 1, "rounded up to 1n");
        assert_eq!(q("1.5Gi").value(), 1_610_612_736);
        assert_eq!(q("0.1Gi").value(), 107_374_183);
        assert_eq!(q("12e-1").milli_value(), 1200);
        assert_eq!(q("-1").value(), -1);
        assert_eq!(q("+2").value(), 2);
        for zero in ["0", "00", "-0", "+0", "0Mi", "0m", "0.0", "-", "+", "."] {
            assert!(q(zero).is_zero(), "{zero}");
        }
        assert_eq!(q("0.5").to_string(), "0.5");
        assert_eq!(q("128Mi").to_string(), "134217728");
    }

    // Cases from upstream's quantity_test.go (TestQuantityCanonicalize, TestQuantityString).
    #[test]
    fn canonical_forms_are_quantity_string() {
        for (input, want) in [
            ("2048Mi", "2Gi"),
            ("1Gi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("512", "512"),
            ("0.5Ki", "512"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("0.1", "100m"),
            ("100m", "100m"),
            ("1m", "1m"),
            ("1e3", "1e3"),
            ("1E6", "1e6"),
            ("12e-1", "1200e-3"),
            ("1000000000", "1G"),
            ("-1Gi", "-1Gi"),
            ("0Mi", "0"),
            ("1n", "1n"),
            ("1.1Ki", "1126400m"),
        ] {
            assert_eq!(canonical(input).as_deref(), Ok(want), "{input}");
        }
        assert_eq!(canonical("1.2.3"), Err(QuantityError::FormatWrong));
    }

    #[test]
    fn refuses_as_parse_quantity() {
        use QuantityError::*;
        for (s, e) in [
            ("", FormatWrong),
            ("1.1.M", FormatWrong),
            ("1+1.0M", FormatWrong),
            ("0.0.0", FormatWrong),
            ("1 M", FormatWrong),
            ("x", FormatWrong),
            ("1Kb", FormatWrong),
            ("1K", Suffix),
            ("1ki", Suffix),
            ("1e", Suffix),
            ("1mi", Suffix),
            ("1MM", Suffix),
            ("1e1e1", FormatWrong),
        ] {
            assert_eq!(Quantity::parse(s), Err(e), "{s:?}");
        }
        assert_eq!(Quantity::parse("1e40"), Err(OutOfRange));
    }
}
