//! What starts the termination ([`Trigger`]), a later delete ([`LaterDelete`]), their parsing,
//! and whether a trigger applies to a pod ([`applies`]).

use crate::plan::{ContainerPlan, PodPlan};
use crate::rules::apiserver::KubectlDeleteFlags;
use crate::Seconds;
use std::fmt;
use std::str::FromStr;

/// What starts the termination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// `kubectl delete pod` (the pod's own TGPS).
    Delete,
    /// `kubectl delete pod --grace-period=N`, seconds.
    DeleteWithGrace(i64),
    /// `kubectl delete pod --grace-period=0 --force`.
    ForceDelete,
    /// Node-pressure eviction at a soft threshold.
    EvictSoft,
    /// Node-pressure eviction at a hard threshold.
    EvictHard,
    /// A failed liveness probe restarts the named container.
    Liveness(String),
    /// A failed startup probe restarts the named container.
    Startup(String),
    /// Graceful node shutdown.
    NodeShutdown,
}

/// A trigger string that is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid trigger {0:?}: expected delete, delete:N, force-delete, evict-soft, evict-hard, liveness:CONTAINER, startup:CONTAINER or node-shutdown")]
pub struct ParseTriggerError(pub String);

impl FromStr for Trigger {
    type Err = ParseTriggerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseTriggerError(s.to_string());
        Ok(match s {
            "delete" => Trigger::Delete,
            "force-delete" => Trigger::ForceDelete,
            "evict-soft" => Trigger::EvictSoft,
            "evict-hard" => Trigger::EvictHard,
            "node-shutdown" => Trigger::NodeShutdown,
            _ => match s.split_once(':') {
                Some(("delete", n)) => {
                    let n: i64 = n.parse().map_err(|_| bad())?;
                    if n < 0 {
                        return Err(bad());
                    }
                    Trigger::DeleteWithGrace(n)
                }
                Some(("liveness", c)) if !c.is_empty() => Trigger::Liveness(c.to_string()),
                Some(("startup", c)) if !c.is_empty() => Trigger::Startup(c.to_string()),
                _ => return Err(bad()),
            },
        })
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Delete => f.write_str("delete"),
            Trigger::DeleteWithGrace(n) => write!(f, "delete:{n}"),
            Trigger::ForceDelete => f.write_str("force-delete"),
            Trigger::EvictSoft => f.write_str("evict-soft"),
            Trigger::EvictHard => f.write_str("evict-hard"),
            Trigger::Liveness(c) => write!(f, "liveness:{c}"),
            Trigger::Startup(c) => write!(f, "startup:{c}"),
            Trigger::NodeShutdown => f.write_str("node-shutdown"),
        }
    }
}

/// A later `kubectl delete pod` while the termination runs: its flags and when it reaches the
/// API server, milliseconds after t = 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaterDelete {
    /// Milliseconds after t = 0 (the first delete, or the kubelet's own kill).
    pub at_ms: i64,
    /// The later delete's `kubectl delete` flags (`--grace-period`, `--now`, `--force`).
    pub flags: KubectlDeleteFlags,
}

/// A `--second-delete` value that is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid second delete {0:?}: expected GRACE@SECONDS, where GRACE is a --grace-period (0 or more), force (--grace-period=0 --force) or now (--now), and SECONDS the time after the termination started (3@2.3, force@5)")]
pub struct ParseLaterDeleteError(pub String);

impl FromStr for LaterDelete {
    type Err = ParseLaterDeleteError;

    /// `GRACE@SECONDS`: `3@2.3` is `kubectl delete --grace-period=3` 2.3 s after t = 0,
    /// `force@5` is `--grace-period=0 --force` at 5 s, `now@1` is `--now` at 1 s. Seconds are
    /// a decimal number with at most millisecond precision.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseLaterDeleteError(s.to_string());
        let (grace, at) = s.split_once('@').ok_or_else(bad)?;
        let flags = match grace {
            "force" => KubectlDeleteFlags {
                grace_period: 0,
                force: true,
                now: false,
            },
            "now" => KubectlDeleteFlags {
                now: true,
                ..Default::default()
            },
            n => {
                let n: i64 = n.parse().map_err(|_| bad())?;
                if n < 0 || !grace.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                KubectlDeleteFlags {
                    grace_period: n,
                    ..Default::default()
                }
            }
        };
        Ok(LaterDelete {
            at_ms: parse_ms(at).ok_or_else(bad)?,
            flags,
        })
    }
}

/// `2.3` → 2300: non-negative decimal seconds with at most three decimals.
pub(super) fn parse_ms(s: &str) -> Option<i64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) || s.ends_with('.') {
        return None;
    }
    let w: i64 = whole.parse().ok()?;
    let f: i64 = format!("{frac:0<3}").parse().ok()?;
    w.checked_mul(1000)?.checked_add(f)
}

impl fmt::Display for LaterDelete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = Seconds::from_ms(self.at_ms.into());
        if self.flags.force {
            write!(f, "force@{at}")
        } else if self.flags.now {
            write!(f, "now@{at}")
        } else {
            write!(f, "{}@{at}", self.flags.grace_period)
        }
    }
}

/// Why a trigger that names a container (`liveness:C`, `startup:C`) does not apply to a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotApplicable {
    /// The pod runs no container of that name; `known` lists the ones it runs, comma-separated.
    #[error("no container named {container:?} (containers: {known})")]
    NoSuchContainer {
        /// The container the trigger names.
        container: String,
        /// The containers the pod runs, comma-separated.
        known: String,
    },
    /// The named container has no probe of that kind (`liveness` or `startup`).
    #[error("container {container:?} has no {probe} probe")]
    NoProbe {
        /// The container the trigger names.
        container: String,
        /// The probe kind the trigger needs, `liveness` or `startup`.
        probe: &'static str,
    },
}

/// Whether `trigger` can happen to `pod`: a probe trigger needs a running container of that name
/// (a main container or a native sidecar) with a probe of that kind; every other trigger applies
/// to every pod.
///
/// # Errors
/// [`NotApplicable`] saying what is missing.
pub fn applies(pod: &PodPlan, trigger: &Trigger) -> Result<(), NotApplicable> {
    probed_container(pod, trigger).map(|_| ())
}

/// The container a probe trigger kills, with its probe and the probe's kind; `None` for a trigger
/// that is not a probe kill.
pub(super) fn probed_container<'p>(
    pod: &'p PodPlan,
    trigger: &Trigger,
) -> Result<Option<(&'p ContainerPlan, &'p crate::plan::Probe, &'static str)>, NotApplicable> {
    let (name, kind) = match trigger {
        Trigger::Liveness(name) => (name, "liveness"),
        Trigger::Startup(name) => (name, "startup"),
        _ => return Ok(None),
    };
    let c = pod
        .running_containers()
        .find(|c| &c.name == name)
        .ok_or_else(|| NotApplicable::NoSuchContainer {
            container: name.clone(),
            known: pod
                .running_containers()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let probe = match trigger {
        Trigger::Startup(_) => &c.startup_probe,
        _ => &c.liveness_probe,
    };
    let probe = probe.as_ref().ok_or_else(|| NotApplicable::NoProbe {
        container: name.clone(),
        probe: kind,
    })?;
    Ok(Some((c, probe, kind)))
}
