//! The kubelet's eviction flags read into thresholds: `--eviction-hard`, `--eviction-soft`,
//! `--eviction-soft-grace-period` and `--eviction-minimum-reclaim`, each a map flag
//! (`memory.available<100Mi,nodefs.available<10%`; `memory.available=1m30s`).
//!
//! Upstream: `pkg/kubelet/eviction/helpers.go` (`ParseThresholdConfig`, `parseGracePeriods`,
//! `parseMinimumReclaims`), `staging/src/k8s.io/component-base/cli/flag`
//! (`LangleSeparatedMapStringString`, `MapStringString`: comma-separated pairs), and the
//! kubelet's defaults (`pkg/kubelet/apis/config/v1beta1/defaults_linux.go`), Kubernetes 1.18
//! to 1.36.

use std::collections::BTreeMap;
use std::time::Duration;

use super::thresholds::{parse_threshold, EvictionSignal, ParseThresholdError, Threshold};
use super::ThresholdValue;
use crate::rules::quantity::Quantity;

/// The kubelet's `evictionMonitoringPeriod`: how often the eviction manager runs a round
/// (`pkg/kubelet/kubelet.go`, a constant of 10 s; podgrace makes it a flag).
pub const DEFAULT_MONITORING_INTERVAL: Duration = Duration::from_secs(10);

/// The `--eviction-*` flags as written (`None`: not given, the kubelet's default applies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvictionFlags {
    /// `--eviction-hard` (`memory.available<100Mi,...`); `None`: the Linux defaults.
    pub hard: Option<String>,
    /// `--eviction-soft` (`memory.available<1Gi`); `None`: none.
    pub soft: Option<String>,
    /// `--eviction-soft-grace-period` (`memory.available=1m30s`).
    pub soft_grace_period: Option<String>,
    /// `--eviction-minimum-reclaim` (`memory.available=500Mi`).
    pub minimum_reclaim: Option<String>,
}

/// Why the eviction flags were refused, in the kubelet's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictionFlagError {
    /// A map entry without its separator (`cliflag`'s wording).
    #[error("{flag}: malformed pair, expect string{separator}string")]
    MalformedPair {
        /// The flag (`--eviction-hard`).
        flag: &'static str,
        /// `<` or `=`.
        separator: char,
    },
    /// A threshold statement that does not parse.
    #[error("{flag}: {source}")]
    Threshold {
        /// The flag.
        flag: &'static str,
        /// Why.
        source: ParseThresholdError,
    },
    /// A signal the kubelet does not know (`unsupported eviction signal %v`).
    #[error("{flag}: unsupported eviction signal {signal}")]
    UnsupportedSignal {
        /// The flag.
        flag: &'static str,
        /// The signal as written.
        signal: String,
    },
    /// A grace period Go's `time.ParseDuration` refuses.
    #[error("--eviction-soft-grace-period: time: invalid duration {0:?}")]
    Duration(String),
    /// A negative grace period.
    #[error("--eviction-soft-grace-period: invalid eviction grace period specified: {0}, must be a positive value")]
    NegativeGracePeriod(String),
    /// A soft threshold without a grace period.
    #[error("grace period must be specified for the soft eviction threshold {0}")]
    MissingGracePeriod(&'static str),
    /// A minimum reclaim that does not parse (`resource.ParseQuantity`'s words).
    #[error("--eviction-minimum-reclaim: {signal}={value}: {reason}")]
    MinimumReclaim {
        /// The signal.
        signal: &'static str,
        /// The value as written.
        value: String,
        /// Why.
        reason: String,
    },
}

/// A map flag's pairs in the order written: `k<v,k<v` (or `=`), later keys replacing earlier
/// ones as a Go map does.
fn pairs(
    flag: &'static str,
    s: &str,
    separator: char,
) -> Result<Vec<(String, String)>, EvictionFlagError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once(separator)
            .ok_or(EvictionFlagError::MalformedPair { flag, separator })?;
        let (k, v) = (k.trim().to_string(), v.trim().to_string());
        out.retain(|(o, _)| *o != k);
        out.push((k, v));
    }
    Ok(out)
}

fn signal(flag: &'static str, name: &str) -> Result<EvictionSignal, EvictionFlagError> {
    EvictionSignal::from_name(name).ok_or_else(|| EvictionFlagError::UnsupportedSignal {
        flag,
        signal: name.to_string(),
    })
}

fn statements(
    flag: &'static str,
    s: &str,
    grace: &BTreeMap<EvictionSignal, Duration>,
    soft: bool,
) -> Result<Vec<Threshold>, EvictionFlagError> {
    let mut out = Vec::new();
    for (k, v) in pairs(flag, s, '<')? {
        let sig = signal(flag, &k)?;
        let period = if soft {
            *grace
                .get(&sig)
                .ok_or(EvictionFlagError::MissingGracePeriod(sig.name()))?
        } else {
            Duration::ZERO
        };
        let stmt = format!("{k}<{v}");
        if let Some(t) = parse_threshold(&stmt, period)
            .map_err(|source| EvictionFlagError::Threshold { flag, source })?
        {
            out.push(t);
        }
    }
    Ok(out)
}

/// The thresholds the eviction manager works with: hard ones (the Linux defaults when
/// `--eviction-hard` is not given: `memory.available<100Mi`, `nodefs.available<10%`,
/// `nodefs.inodesFree<5%`, `imagefs.available<15%`), then soft ones with their grace periods,
/// each with its signal's minimum reclaim.
///
/// Upstream: `pkg/kubelet/eviction/helpers.go` `ParseThresholdConfig` (no allocatable
/// thresholds: podgrace enforces no node allocatable on pods).
///
/// # Errors
/// [`EvictionFlagError`]: a malformed pair, an unknown signal, a threshold, duration or
/// quantity that does not parse, a negative grace period, a soft threshold without one, a
/// minimum reclaim that is negative (or not positive, for a percentage).
pub fn parse_threshold_config(flags: &EvictionFlags) -> Result<Vec<Threshold>, EvictionFlagError> {
    let mut grace: BTreeMap<EvictionSignal, Duration> = BTreeMap::new();
    for (k, v) in pairs(
        "--eviction-soft-grace-period",
        flags.soft_grace_period.as_deref().unwrap_or(""),
        '=',
    )? {
        let sig = signal("--eviction-soft-grace-period", &k)?;
        let d: kube_core::Duration = v
            .parse()
            .map_err(|_| EvictionFlagError::Duration(v.clone()))?;
        if d.is_negative() {
            return Err(EvictionFlagError::NegativeGracePeriod(v));
        }
        grace.insert(sig, d.into());
    }
    let mut reclaim: BTreeMap<EvictionSignal, ThresholdValue> = BTreeMap::new();
    for (k, v) in pairs(
        "--eviction-minimum-reclaim",
        flags.minimum_reclaim.as_deref().unwrap_or(""),
        '=',
    )? {
        let sig = signal("--eviction-minimum-reclaim", &k)?;
        let bad = |reason: String| EvictionFlagError::MinimumReclaim {
            signal: sig.name(),
            value: v.clone(),
            reason,
        };
        let value = if let Some(p) = v.strip_suffix('%') {
            let p: f32 = p.trim().parse().map_err(|e| bad(format!("{e}")))?;
            if p.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !p.is_finite() {
                return Err(bad(format!(
                    "eviction percentage minimum reclaim {} must be positive: {v}",
                    sig.name()
                )));
            }
            ThresholdValue::Percentage(f64::from(p / 100.0))
        } else {
            let (q, format) = Quantity::parse_with_format(&v).map_err(|e| bad(e.to_string()))?;
            if q.is_negative() {
                return Err(bad(format!(
                    "negative eviction minimum reclaim specified for {}",
                    sig.name()
                )));
            }
            ThresholdValue::Quantity {
                value: q.value(),
                format,
            }
        };
        reclaim.insert(sig, value);
    }
    let mut out = match &flags.hard {
        Some(h) => statements("--eviction-hard", h, &grace, false)?,
        None => super::default_eviction_hard(crate::rules::runtime::NodeOs::Linux),
    };
    if let Some(s) = &flags.soft {
        out.extend(statements("--eviction-soft", s, &grace, true)?);
    }
    for t in &mut out {
        t.min_reclaim = reclaim.get(&t.signal).copied();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(hard: Option<&str>, soft: Option<&str>, grace: Option<&str>) -> EvictionFlags {
        EvictionFlags {
            hard: hard.map(Into::into),
            soft: soft.map(Into::into),
            soft_grace_period: grace.map(Into::into),
            minimum_reclaim: None,
        }
    }

    /// `TestParseThresholdConfig`'s cases that the flags can express.
    #[test]
    fn flags_are_read_as_parse_threshold_config_reads_them() {
        let t = parse_threshold_config(&EvictionFlags {
            hard: Some("memory.available<150Mi".into()),
            soft: Some("memory.available<300Mi".into()),
            soft_grace_period: Some("memory.available=30s".into()),
            minimum_reclaim: Some("memory.available=0,nodefs.available=10%".into()),
        })
        .unwrap();
        assert_eq!(t.len(), 2);
        assert!(t[0].is_hard());
        assert_eq!(t[0].quantity(None), Some(150 << 20));
        assert_eq!(
            t[0].min_reclaim,
            Some(ThresholdValue::Quantity {
                value: 0,
                format: crate::rules::quantity::QuantityFormat::DecimalSI
            })
        );
        assert_eq!(t[1].grace_period, Duration::from_secs(30));
        assert_eq!(t[1].value.quantity_string(None).as_deref(), Some("300Mi"));
        // Defaults when --eviction-hard is not given.
        let d = parse_threshold_config(&EvictionFlags::default()).unwrap();
        assert_eq!(d.len(), 4);
        assert_eq!(d[0].value.quantity_string(None).as_deref(), Some("100Mi"));
        // The errors.
        let err = |f: EvictionFlags| parse_threshold_config(&f).unwrap_err().to_string();
        assert_eq!(
            err(flags(None, Some("memory.available<300Mi"), None)),
            "grace period must be specified for the soft eviction threshold memory.available"
        );
        assert_eq!(
            err(flags(Some("memory.available=1Gi"), None, None)),
            "--eviction-hard: malformed pair, expect string<string"
        );
        assert_eq!(
            err(flags(Some("mem.available<1Gi"), None, None)),
            "--eviction-hard: unsupported eviction signal mem.available"
        );
        assert_eq!(
            err(flags(
                None,
                Some("memory.available<1Gi"),
                Some("memory.available=-30s")
            )),
            "--eviction-soft-grace-period: invalid eviction grace period specified: -30s, must be a positive value"
        );
        assert_eq!(
            err(flags(
                None,
                Some("memory.available<1Gi"),
                Some("memory.available=30")
            )),
            "--eviction-soft-grace-period: time: invalid duration \"30\""
        );
        assert_eq!(
            err(EvictionFlags {
                minimum_reclaim: Some("memory.available=-1Gi".into()),
                ..Default::default()
            }),
            "--eviction-minimum-reclaim: memory.available=-1Gi: negative eviction minimum reclaim specified for memory.available"
        );
        assert!(err(flags(Some("memory.available<0"), None, None)).contains("must be positive"));
        // A later key replaces an earlier one, as in a Go map.
        let t = parse_threshold_config(&flags(
            Some("memory.available<1Gi,memory.available<2Gi"),
            None,
            None,
        ))
        .unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].quantity(None), Some(2 << 30));
    }
}
