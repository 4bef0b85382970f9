//! The lint configuration file (`podgrace lint --config FILE`), read with the manifest loader's
//! strict checks so an unknown key is an error at `file:line:column`.
//!
//! ```yaml
//! disable: [prestop-httpget-pod-ip]
//! severity: {endpoint-race: error}
//! endpointLagSeconds: 5
//! largeTerminationGracePeriodSeconds: 300
//! jobMinTerminationGracePeriodSeconds: 30
//! minDrainSeconds: 5
//! kubelet: {evictionMaxPodGracePeriod: 0}
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{catalogue, parse_severity, Severity};
use crate::manifest::{self, ManifestErrors};

/// Settings of the lint rules.
#[derive(Debug, Clone, PartialEq)]
pub struct LintConfig {
    /// Rule ids switched off.
    pub disable: Vec<String>,
    /// Severity per rule id, replacing the catalogue's.
    pub severity: BTreeMap<String, Severity>,
    /// How long proxies keep routing to a terminating pod (L), seconds (`endpoint-race`).
    pub endpoint_lag_seconds: f64,
    /// Above this terminationGracePeriodSeconds, `grace-period-too-long` fires.
    pub large_termination_grace_period_seconds: i64,
    /// Below this, a Job or CronJob pod's terminationGracePeriodSeconds is too short.
    pub job_min_termination_grace_period_seconds: i64,
    /// The least time an app needs between its stop signal and SIGKILL (`prestop-near-grace`).
    pub min_drain_seconds: i64,
    /// The kubelet's settings, when known.
    pub kubelet: KubeletSettings,
}

impl Default for LintConfig {
    fn default() -> Self {
        LintConfig {
            disable: Vec::new(),
            severity: BTreeMap::new(),
            endpoint_lag_seconds: 1.0,
            large_termination_grace_period_seconds: 300,
            job_min_termination_grace_period_seconds: 30,
            min_drain_seconds: 5,
            kubelet: KubeletSettings::default(),
        }
    }
}

/// Kubelet settings lint checks (R19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KubeletSettings {
    /// `evictionMaxPodGracePeriod`, seconds, if given.
    pub eviction_max_pod_grace_period: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    disable: Option<Vec<String>>,
    severity: Option<BTreeMap<String, String>>,
    endpoint_lag_seconds: Option<f64>,
    large_termination_grace_period_seconds: Option<i64>,
    job_min_termination_grace_period_seconds: Option<i64>,
    min_drain_seconds: Option<i64>,
    kubelet: Option<KubeletFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KubeletFile {
    eviction_max_pod_grace_period: Option<i64>,
}

/// A configuration file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Syntax, type, unknown or duplicate keys, each at `file:line:column`.
    #[error("{0}")]
    Load(#[from] ManifestErrors),
    /// A rule id that is not in the catalogue.
    #[error("{file}: {what}: unknown rule {id:?} (see `podgrace lint --explain`)")]
    UnknownRule {
        file: String,
        what: &'static str,
        id: String,
    },
    /// A severity word that is not `error`, `warning` or `info`.
    #[error("{file}: severity.{rule}: {value:?} is not one of error, warning, info")]
    BadSeverity {
        file: String,
        rule: String,
        value: String,
    },
    /// A number out of range.
    #[error("{file}: {key}: {detail}")]
    BadValue {
        file: String,
        key: &'static str,
        detail: String,
    },
}

impl LintConfig {
    /// Reads a configuration file's text (`file` names it in messages); keys left out keep
    /// their defaults.
    ///
    /// # Errors
    /// [`ConfigError`] for unknown keys (with line and column), unknown rule ids, bad
    /// severities and out-of-range numbers.
    pub fn parse(text: &str, file: &str) -> Result<LintConfig, ConfigError> {
        let mut cfg = LintConfig::default();
        let Some(f) = manifest::load_typed::<File>(text, file)? else {
            return Ok(cfg);
        };
        for id in f.disable.unwrap_or_default() {
            check_rule(&id, file, "disable")?;
            cfg.disable.push(id);
        }
        for (rule, value) in f.severity.unwrap_or_default() {
            check_rule(&rule, file, "severity")?;
            let Some(s) = parse_severity(&value) else {
                return Err(ConfigError::BadSeverity {
                    file: file.to_string(),
                    rule,
                    value,
                });
            };
            cfg.severity.insert(rule, s);
        }
        let bad = |key: &'static str, detail: &str| ConfigError::BadValue {
            file: file.to_string(),
            key,
            detail: detail.to_string(),
        };
        if let Some(l) = f.endpoint_lag_seconds {
            if !l.is_finite() || l < 0.0 {
                return Err(bad("endpointLagSeconds", "must be a number ≥ 0"));
            }
            cfg.endpoint_lag_seconds = l;
        }
        if let Some(v) = f.large_termination_grace_period_seconds {
            if v < 1 {
                return Err(bad("largeTerminationGracePeriodSeconds", "must be ≥ 1"));
            }
            cfg.large_termination_grace_period_seconds = v;
        }
        if let Some(v) = f.job_min_termination_grace_period_seconds {
            if v < 0 {
                return Err(bad("jobMinTerminationGracePeriodSeconds", "must be ≥ 0"));
            }
            cfg.job_min_termination_grace_period_seconds = v;
        }
        if let Some(v) = f.min_drain_seconds {
            if v < 0 {
                return Err(bad("minDrainSeconds", "must be ≥ 0"));
            }
            cfg.min_drain_seconds = v;
        }
        if let Some(k) = f.kubelet {
            cfg.kubelet.eviction_max_pod_grace_period = k.eviction_max_pod_grace_period;
        }
        Ok(cfg)
    }
}

/// Checks a rule id given on the command line or in a configuration file.
///
/// # Errors
/// [`ConfigError::UnknownRule`] when the id is not in the catalogue.
pub(crate) fn check_rule(id: &str, file: &str, what: &'static str) -> Result<(), ConfigError> {
    if catalogue::rule(id).is_some() {
        Ok(())
    } else {
        Err(ConfigError::UnknownRule {
            file: file.to_string(),
            what,
            id: id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key() {
        let c = LintConfig::parse(
            "disable: [endpoint-race]\nseverity:\n  shell-form-command: error\nendpointLagSeconds: 5\nlargeTerminationGracePeriodSeconds: 600\njobMinTerminationGracePeriodSeconds: 60\nminDrainSeconds: 3\nkubelet:\n  evictionMaxPodGracePeriod: -1\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(c.disable, vec!["endpoint-race"]);
        assert_eq!(c.severity["shell-form-command"], Severity::Error);
        assert_eq!(c.endpoint_lag_seconds, 5.0);
        assert_eq!(c.large_termination_grace_period_seconds, 600);
        assert_eq!(c.job_min_termination_grace_period_seconds, 60);
        assert_eq!(c.min_drain_seconds, 3);
        assert_eq!(c.kubelet.eviction_max_pod_grace_period, Some(-1));
        assert_eq!(
            LintConfig::parse("", "c.yaml").unwrap(),
            LintConfig::default()
        );
    }

    #[test]
    fn unknown_keys_are_errors_with_position() {
        let e = LintConfig::parse("disable: []\nendpointLag: 5\n", "c.yaml").unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with("c.yaml:2:1: endpointLag: unknown field"),
            "{s}"
        );
        assert_eq!(s.lines().count(), 1, "one error for one unknown key: {s}");
        let e = LintConfig::parse("kubelet:\n  evictionMaxPodGrace: 1\n", "c.yaml").unwrap_err();
        assert!(e.to_string().starts_with("c.yaml:2:3: "), "{e}");
        let e = LintConfig::parse("disable: [no-such-rule]\n", "c.yaml").unwrap_err();
        assert!(matches!(e, ConfigError::UnknownRule { .. }));
        let e = LintConfig::parse("severity: {endpoint-race: fatal}\n", "c.yaml").unwrap_err();
        assert!(matches!(e, ConfigError::BadSeverity { .. }));
        let e = LintConfig::parse("endpointLagSeconds: -1\n", "c.yaml").unwrap_err();
        assert!(matches!(e, ConfigError::BadValue { .. }));
    }
}
