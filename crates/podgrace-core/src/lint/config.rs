//! The lint configuration file (`podgrace lint --config FILE`), read with the manifest loader's
//! strict checks so an unknown key, and a bad value, is an error at `file:line:column` with its
//! field path.
//!
//! ```yaml
//! disable: [prestop-httpget-pod-ip]
//! severity: {endpoint-race: error}
//! endpointLagSeconds: 5
//! largeTerminationGracePeriodSeconds: 300
//! jobMinTerminationGracePeriodSeconds: 30
//! minDrainSeconds: 5
//! longestRequestSeconds: 20
//! kubelet: {evictionMaxPodGracePeriod: 0}
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{catalogue, parse_severity, Severity};
use crate::manifest::{self, Fields, ManifestErrors, Seg};
use crate::plan::SourceSpan;

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
    /// The longest request the app serves or makes, seconds, if known
    /// (`sidecar-as-regular-container`: a proxy's drain shorter than it cuts requests).
    pub longest_request_seconds: Option<i64>,
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
            longest_request_seconds: None,
            kubelet: KubeletSettings::default(),
        }
    }
}

/// Kubelet settings lint checks (R19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KubeletSettings {
    /// `evictionMaxPodGracePeriod`, seconds, if given.
    pub eviction_max_pod_grace_period: Option<i64>,
    /// Whether the kubelet has `evictionSoft` thresholds, when known (read from a node's
    /// configuration): with none it never evicts softly, so its evictionMaxPodGracePeriod
    /// cannot cut a pod's grace. `None`: not known, the setting is checked on its own.
    pub soft_eviction_thresholds: Option<bool>,
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
    longest_request_seconds: Option<i64>,
    kubelet: Option<KubeletFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KubeletFile {
    eviction_max_pod_grace_period: Option<i64>,
}

/// A configuration file that cannot be used. Every error names `file:line:column` and the
/// field path, as the manifest loader's errors do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Syntax, type, unknown or duplicate keys.
    #[error("{0}")]
    Load(#[from] ManifestErrors),
    /// A rule id that is not in the catalogue (in `disable`, or a key of `severity`).
    #[error("{}:{}:{}: {}: Invalid value: {id:?}: unknown rule (`podgrace lint --explain all` lists the rules)", span.file, span.line, span.column, span.path)]
    UnknownRule {
        /// Where the id is written: file, line, column and field path.
        span: SourceSpan,
        /// The id as written.
        id: String,
    },
    /// A severity word that is not `error`, `warning` or `info`.
    #[error("{}:{}:{}: {}: Unsupported value: {value:?}: supported values: \"error\", \"warning\", \"info\"", span.file, span.line, span.column, span.path)]
    BadSeverity {
        /// Where the word is written: file, line, column and field path.
        span: SourceSpan,
        /// The word as written.
        value: String,
    },
    /// A number out of range.
    #[error("{}:{}:{}: {}: Invalid value: {value}: {detail}", span.file, span.line, span.column, span.path)]
    BadValue {
        /// Where the number is written: file, line, column and field path.
        span: SourceSpan,
        /// The number as written.
        value: String,
        /// What the value must be, in the API server's style (`must be greater than or equal
        /// to 0`).
        detail: &'static str,
    },
}

impl LintConfig {
    /// Reads a configuration file's text (`file` names it in messages); keys left out keep
    /// their defaults.
    ///
    /// # Errors
    /// [`ConfigError`] for unknown keys, unknown rule ids, bad severities and out-of-range
    /// numbers, each with its line, column and field path.
    pub fn parse(text: &str, file: &str) -> Result<LintConfig, ConfigError> {
        match manifest::load_typed_at(text, file, from_file)? {
            Some(cfg) => cfg,
            None => Ok(LintConfig::default()),
        }
    }
}

/// Checks the values of a file that loaded and applies them over the defaults.
fn from_file(f: File, at: &Fields<'_, '_>) -> Result<LintConfig, ConfigError> {
    let mut cfg = LintConfig::default();
    for (i, id) in f.disable.unwrap_or_default().into_iter().enumerate() {
        check_rule(&id, || at.span(&[Seg::Key("disable"), Seg::Index(i)]))?;
        cfg.disable.push(id);
    }
    for (rule, value) in f.severity.unwrap_or_default() {
        let segs = [Seg::Key("severity"), Seg::Key(&rule)];
        check_rule(&rule, || at.key_span(&segs))?;
        let Some(s) = parse_severity(&value) else {
            return Err(ConfigError::BadSeverity {
                span: at.span(&segs),
                value,
            });
        };
        cfg.severity.insert(rule, s);
    }
    let bad = |key: &'static str, value: String, detail: &'static str| ConfigError::BadValue {
        span: at.span(&[Seg::Key(key)]),
        value,
        detail,
    };
    if let Some(l) = f.endpoint_lag_seconds {
        if !l.is_finite() {
            return Err(bad(
                "endpointLagSeconds",
                l.to_string(),
                "must be a finite number",
            ));
        }
        if l < 0.0 {
            return Err(bad(
                "endpointLagSeconds",
                l.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        cfg.endpoint_lag_seconds = l;
    }
    if let Some(v) = f.large_termination_grace_period_seconds {
        if v < 1 {
            return Err(bad(
                "largeTerminationGracePeriodSeconds",
                v.to_string(),
                "must be greater than or equal to 1",
            ));
        }
        cfg.large_termination_grace_period_seconds = v;
    }
    if let Some(v) = f.job_min_termination_grace_period_seconds {
        if v < 0 {
            return Err(bad(
                "jobMinTerminationGracePeriodSeconds",
                v.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        cfg.job_min_termination_grace_period_seconds = v;
    }
    if let Some(v) = f.min_drain_seconds {
        if v < 0 {
            return Err(bad(
                "minDrainSeconds",
                v.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        cfg.min_drain_seconds = v;
    }
    if let Some(v) = f.longest_request_seconds {
        if v < 0 {
            return Err(bad(
                "longestRequestSeconds",
                v.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        cfg.longest_request_seconds = Some(v);
    }
    if let Some(k) = f.kubelet {
        cfg.kubelet.eviction_max_pod_grace_period = k.eviction_max_pod_grace_period;
    }
    Ok(cfg)
}

/// Checks a rule id given in a configuration file; `span` places it.
///
/// # Errors
/// [`ConfigError::UnknownRule`] when the id is not in the catalogue.
fn check_rule(id: &str, span: impl FnOnce() -> SourceSpan) -> Result<(), ConfigError> {
    if catalogue::rule(id).is_some() {
        Ok(())
    } else {
        Err(ConfigError::UnknownRule {
            span: span(),
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
            "disable: [endpoint-race]\nseverity:\n  shell-form-command: error\nendpointLagSeconds: 5\nlargeTerminationGracePeriodSeconds: 600\njobMinTerminationGracePeriodSeconds: 60\nminDrainSeconds: 3\nlongestRequestSeconds: 20\nkubelet:\n  evictionMaxPodGracePeriod: -1\n",
            "c.yaml",
        )
        .unwrap();
        assert_eq!(c.longest_request_seconds, Some(20));
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
    }

    #[test]
    fn bad_values_are_errors_with_position_and_path() {
        let err = |text: &str| LintConfig::parse(text, "c.yaml").unwrap_err().to_string();
        assert_eq!(
            err("severity:\n  endpoint-race: fatal\n"),
            "c.yaml:2:18: severity.endpoint-race: Unsupported value: \"fatal\": supported values: \"error\", \"warning\", \"info\""
        );
        assert_eq!(
            err("disable:\n  - endpoint-race\n  - no-such-rule\n"),
            "c.yaml:3:5: disable[1]: Invalid value: \"no-such-rule\": unknown rule (`podgrace lint --explain all` lists the rules)"
        );
        assert_eq!(
            err("disable: [no-such-rule]\n"),
            "c.yaml:1:11: disable[0]: Invalid value: \"no-such-rule\": unknown rule (`podgrace lint --explain all` lists the rules)"
        );
        // An unknown rule as a key of severity is placed at the key.
        assert_eq!(
            err("severity: {nope: error}\n"),
            "c.yaml:1:12: severity.nope: Invalid value: \"nope\": unknown rule (`podgrace lint --explain all` lists the rules)"
        );
        assert_eq!(
            err("disable: []\nendpointLagSeconds: -1\n"),
            "c.yaml:2:21: endpointLagSeconds: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            err("endpointLagSeconds: .inf\n"),
            "c.yaml:1:21: endpointLagSeconds: Invalid value: inf: must be a finite number"
        );
        assert_eq!(
            err("largeTerminationGracePeriodSeconds: 0\n"),
            "c.yaml:1:37: largeTerminationGracePeriodSeconds: Invalid value: 0: must be greater than or equal to 1"
        );
        assert_eq!(
            err("jobMinTerminationGracePeriodSeconds: -3\n"),
            "c.yaml:1:38: jobMinTerminationGracePeriodSeconds: Invalid value: -3: must be greater than or equal to 0"
        );
        assert_eq!(
            err("minDrainSeconds: -2\n"),
            "c.yaml:1:18: minDrainSeconds: Invalid value: -2: must be greater than or equal to 0"
        );
        assert_eq!(
            err("longestRequestSeconds: -1\n"),
            "c.yaml:1:24: longestRequestSeconds: Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(matches!(
            LintConfig::parse("disable: [nope]\n", "c.yaml"),
            Err(ConfigError::UnknownRule { .. })
        ));
    }
}
