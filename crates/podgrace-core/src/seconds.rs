//! Exact times for timelines: a count of whole milliseconds in an `i128`.
//!
//! Grace periods are int64 seconds in the Kubernetes API, so a timeline instant can be as late
//! as 9223372036854775807 s plus a preStop hook and the 2 s floor. That is beyond an `i64` of
//! milliseconds and beyond the 53 bits an `f64` holds exactly; an `i128` of milliseconds holds
//! it with room to spare, and its arithmetic saturates rather than overflow.

use serde::{Serialize, Serializer};
use std::fmt;

/// A time in seconds, exact to the millisecond: an instant counted from the start of the
/// termination, or a duration. Printed as seconds without trailing zeros (`1.5`, `30`,
/// `9223372036854775807`); serialized as a JSON number: an integer when whole, else a
/// fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seconds(i128);

impl Seconds {
    /// Zero: t = 0, or no time at all.
    pub const ZERO: Seconds = Seconds(0);

    /// `ms` milliseconds.
    pub const fn from_ms(ms: i128) -> Seconds {
        Seconds(ms)
    }

    /// `s` whole seconds.
    pub const fn from_secs(s: i64) -> Seconds {
        // |i64| * 1000 is far inside the i128 range.
        Seconds(s as i128 * 1000)
    }

    /// The time in milliseconds.
    pub const fn ms(self) -> i128 {
        self.0
    }

    /// The nearest `f64` number of seconds (exact up to 2^53 ms); for charts and comparisons
    /// with configured fractions, never for printing.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// The whole seconds, rounded up, as an `i64` (saturating).
    pub fn ceil_secs(self) -> i64 {
        let s = self.0.div_euclid(1000) + i128::from(self.0.rem_euclid(1000) != 0);
        i64::try_from(s).unwrap_or(if s < 0 { i64::MIN } else { i64::MAX })
    }

    /// The sum, saturating at the `i128` bounds instead of overflowing.
    pub const fn saturating_add(self, other: Seconds) -> Seconds {
        Seconds(self.0.saturating_add(other.0))
    }

    /// The difference, saturating at the `i128` bounds instead of overflowing.
    pub const fn saturating_sub(self, other: Seconds) -> Seconds {
        Seconds(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let (whole, frac) = (abs / 1000, abs % 1000);
        if frac == 0 {
            return write!(f, "{sign}{whole}");
        }
        let digits = format!("{frac:03}");
        write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl Serialize for Seconds {
    /// Whole seconds as a JSON integer, exact at any size an int64 grace period gives (up to
    /// u64); anything else as the nearest `f64`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0 % 1000 == 0 {
            let whole = self.0 / 1000;
            if let Ok(v) = i64::try_from(whole) {
                return s.serialize_i64(v);
            }
            if let Ok(v) = u64::try_from(whole) {
                return s.serialize_u64(v);
            }
        }
        s.serialize_f64(self.as_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_exactly() {
        assert_eq!(Seconds::from_ms(1500).to_string(), "1.5");
        assert_eq!(Seconds::from_ms(30_000).to_string(), "30");
        assert_eq!(Seconds::from_ms(1).to_string(), "0.001");
        assert_eq!(Seconds::from_ms(-250).to_string(), "-0.25");
        assert_eq!(Seconds::ZERO.to_string(), "0");
        assert_eq!(
            Seconds::from_secs(i64::MAX).to_string(),
            "9223372036854775807"
        );
        assert_eq!(
            Seconds::from_secs(i64::MAX)
                .saturating_add(Seconds::from_ms(2_500))
                .to_string(),
            "9223372036854775809.5"
        );
        assert_eq!(
            Seconds::from_ms(i128::MAX)
                .saturating_add(Seconds::from_secs(1))
                .ms(),
            i128::MAX
        );
    }

    #[test]
    fn serialized_as_integers_when_whole() {
        let json = |s: Seconds| serde_json::to_string(&s).unwrap();
        assert_eq!(json(Seconds::from_secs(47)), "47");
        assert_eq!(json(Seconds::from_ms(1500)), "1.5");
        assert_eq!(json(Seconds::from_secs(i64::MAX)), "9223372036854775807");
        assert_eq!(
            json(Seconds::from_secs(i64::MAX).saturating_add(Seconds::from_secs(2))),
            "9223372036854775809"
        );
    }

    #[test]
    fn whole_seconds_rounded_up() {
        assert_eq!(Seconds::from_ms(1).ceil_secs(), 1);
        assert_eq!(Seconds::from_ms(2000).ceil_secs(), 2);
        assert_eq!(Seconds::from_ms(-1500).ceil_secs(), -1);
        assert_eq!(Seconds::from_ms(i128::MAX).ceil_secs(), i64::MAX);
    }
}
