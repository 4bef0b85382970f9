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

/// How a quantity is written back (`resource.Format`): chosen by the suffix it was parsed
/// with, kept when the API server serializes it, and used by `String()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum QuantityFormat {
    /// `e3`, `E-2`: a decimal exponent.
    DecimalExponent,
    /// `Ki`, `Mi`, ... `Ei`: powers of 1024.
    BinarySI,
    /// `m`, `k`, `M`, ... or no suffix: powers of 1000.
    #[default]
    DecimalSI,
}

/// The suffix and the number it scales, powers of 1024 (`Ki` .. `Ei`).
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The decimal suffix of an exponent of 10 (`n` for -9 .. `E` for 18).
fn decimal_suffix(exponent: i32) -> Option<&'static str> {
    Some(match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    })
}

impl Quantity {
    /// [`Quantity::parse`] with the format its suffix gives (`parseQuantityString` and
    /// `quantitySuffixer.interpret`): binary SI for `Ki` .. `Ei` (decimal SI for a binary value
    /// between 0 and 1), a decimal exponent for `e`/`E`, decimal SI otherwise.
    ///
    /// # Errors
    /// As [`Quantity::parse`].
    pub fn parse_with_format(s: &str) -> Result<(Quantity, QuantityFormat), QuantityError> {
        let q = Quantity::parse(s)?;
        let suffix =
            s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '+' || c == '-');
        let format = if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
            QuantityFormat::DecimalExponent
        } else if suffix.ends_with('i') && !(q.nanos > 0 && q.nanos < NANO) {
            QuantityFormat::BinarySI
        } else {
            QuantityFormat::DecimalSI
        };
        Ok((q, format))
    }

    /// The quantity as the API writes it (`Quantity.String()`, `CanonicalizeBytes`): `0`; in
    /// binary SI the whole value divided by 1024 while it divides (`1536Mi`, `92160Ki`,
    /// `94371841`), or decimal SI when it is below 1024 in size or not whole; in decimal SI
    /// or with an exponent, the digits with the exponent made a multiple of 3 (`1500`, `2k`,
    /// `500m`, `1e9` → `1e9` / `1G`).
    ///
    /// Upstream: `staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go`
    /// `CanonicalizeBytes`, `amount.go` `AsCanonicalBytes` / `AsCanonicalBase1024Bytes`
    /// (Kubernetes 1.18 to 1.36).
    pub fn canonical(&self, format: QuantityFormat) -> String {
        if self.nanos == 0 {
            return "0".into();
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let nano = NANO as u128;
        let mut format = format;
        if format == QuantityFormat::BinarySI && (abs < 1024 * nano || !abs.is_multiple_of(nano)) {
            format = QuantityFormat::DecimalSI;
        }
        if format == QuantityFormat::BinarySI {
            let mut v = abs / nano;
            let mut e = 0;
            while v.is_multiple_of(1024) && e + 1 < BINARY_SUFFIXES.len() {
                v /= 1024;
                e += 1;
            }
            return format!("{sign}{v}{}", BINARY_SUFFIXES[e]);
        }
        let mut m = abs;
        let mut e: i32 = -9;
        while m.is_multiple_of(10) {
            m /= 10;
            e += 1;
        }
        match e.rem_euclid(3) {
            1 => {
                m *= 10;
                e -= 1;
            }
            2 => {
                m *= 100;
                e -= 2;
            }
            _ => {}
        }
        let suffix = match format {
            QuantityFormat::DecimalExponent if e == 0 => String::new(),
            QuantityFormat::DecimalExponent => format!("e{e}"),
            _ => decimal_suffix(e).map_or_else(|| format!("e{e}"), str::to_string),
        };
        format!("{sign}{m}{suffix}")
    }

    /// `resource.NewQuantity(v, resource.BinarySI).String()`: how the kubelet writes a byte
    /// count it measured (`1500Mi`, `94371841`).
    pub fn binary_si(bytes: i64) -> String {
        Quantity::from_units(bytes).canonical(QuantityFormat::BinarySI)
    }
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

    /// `String()` of upstream's `TestQuantityString` / `TestQuantityParseEmit` cases that
    /// hold integers or millis, and the kubelet's eviction messages (`1500Mi`, `2Gi`).
    #[test]
    fn writes_back_as_string_does() {
        let w = |s: &str| {
            let (q, f) = Quantity::parse_with_format(s).unwrap();
            q.canonical(f)
        };
        for (input, want) in [
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("100Mi", "100Mi"),
            ("1Ki", "1Ki"),
            ("1023", "1023"),
            ("512Ki", "512Ki"),
            ("0.5Ki", "512"),
            ("1.5Gi", "1536Mi"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1k", "1k"),
            ("1M", "1M"),
            ("1E", "1E"),
            ("500m", "500m"),
            ("0.5", "500m"),
            ("1e3", "1e3"),
            ("1e9", "1e9"),
            ("100e-3", "100e-3"),
            ("12E1", "120"),
            ("0", "0"),
            ("0Mi", "0"),
            ("-1Gi", "-1Gi"),
            ("50Gi", "50Gi"),
            ("1200", "1200"),
        ] {
            assert_eq!(w(input), want, "{input}");
        }
        assert_eq!(Quantity::binary_si(1500 << 20), "1500Mi");
        assert_eq!(Quantity::binary_si(10 << 30), "10Gi");
        assert_eq!(Quantity::binary_si(94_371_841), "94371841");
        assert_eq!(Quantity::binary_si(500), "500");
        assert_eq!(Quantity::binary_si(0), "0");
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
