//! Graceful node shutdown (spec `termination.md` §7): the priority groups, which pod goes into
//! which group, the grace period each pod gets and the status it ends with.
//!
//! Upstream: `pkg/kubelet/nodeshutdown/nodeshutdown_manager.go` (shared `podManager`, v1.32+ era;
//! the logic is the same since `GracefulNodeShutdownBasedOnPodPriority`, beta in 1.24). All
//! periods are whole seconds.

/// Priority of system-critical pods (`scheduling.SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Pod status reason set on pods killed by a node shutdown.
pub const SHUTDOWN_REASON: &str = "Terminated";
/// Pod status message set on pods killed by a node shutdown.
pub const SHUTDOWN_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

/// One entry of `shutdownGracePeriodByPodPriority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownGracePeriodByPodPriority {
    /// Lowest pod priority of the group.
    pub priority: i32,
    /// `shutdownGracePeriodSeconds`: how long the group is given, seconds.
    pub shutdown_grace_period_seconds: i64,
}

/// The priority groups derived from `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods`
/// (both in seconds) when `shutdownGracePeriodByPodPriority` is not configured:
/// `[{0: requested − critical}, {2000000000: critical}]`.
///
/// Upstream: `nodeshutdown_manager.go` `migrateConfig` (Kubernetes 1.24+).
///
/// Returns `None` (feature inactive) if `shutdown_grace_period_s` is 0, or if the critical
/// period exceeds the total (either remainder negative). Never an error.
pub fn migrate_config(
    shutdown_grace_period_s: i64,
    critical_s: i64,
) -> Option<Vec<ShutdownGracePeriodByPodPriority>> {
    if shutdown_grace_period_s == 0 {
        return None;
    }
    let default_group = shutdown_grace_period_s.checked_sub(critical_s)?;
    if default_group < 0 {
        return None;
    }
    let critical_group = shutdown_grace_period_s.checked_sub(default_group)?;
    if critical_group < 0 {
        return None;
    }
    Some(vec![
        ShutdownGracePeriodByPodPriority {
            priority: 0,
            shutdown_grace_period_seconds: default_group,
        },
        ShutdownGracePeriodByPodPriority {
            priority: SYSTEM_CRITICAL_PRIORITY,
            shutdown_grace_period_seconds: critical_group,
        },
    ])
}

/// Why a graceful node shutdown configuration was refused, in the kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShutdownConfigError {
    /// `ValidateKubeletConfiguration`'s refusal.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Go's `time.Duration.String()` of whole or fractional seconds (`30s`, `1m0s`, `1h2m3s`,
/// `500ms`), as `%v` of the configuration's `metav1.Duration` prints it (in braces).
fn go_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, m) = (ms / 3_600_000, (ms / 60_000) % 60);
    let s = (ms % 60_000) as f64 / 1000.0;
    let secs = if (s - s.trunc()).abs() < f64::EPSILON {
        format!("{}s", s as u64)
    } else {
        format!("{s}s")
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

/// The priority groups a kubelet configuration gives: `shutdownGracePeriodByPodPriority` when
/// set, else the two groups of `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods`
/// ([`migrate_config`]); `None` when graceful node shutdown is off (both 0, no groups).
///
/// Upstream: `pkg/kubelet/apis/config/validation/validation.go`
/// (`ValidateKubeletConfiguration`: the critical period at most the total, each zero or at
/// least one second, not both forms at once), `nodeshutdown_manager.go` `newPodManager`
/// (durations to whole seconds), Kubernetes 1.24 to 1.36.
///
/// # Errors
/// [`ShutdownConfigError`] with the kubelet's message.
pub fn shutdown_config(
    shutdown_grace_period: std::time::Duration,
    critical_pods: std::time::Duration,
    by_pod_priority: &[ShutdownGracePeriodByPodPriority],
) -> Result<Option<Vec<ShutdownGracePeriodByPodPriority>>, ShutdownConfigError> {
    let bad = |m: String| Err(ShutdownConfigError::Invalid(m));
    let (t, c) = (shutdown_grace_period, critical_pods);
    if c > t {
        return bad(format!(
            "shutdownGracePeriodCriticalPods {{{}}} must be <= shutdownGracePeriod {{{}}}",
            go_duration(c),
            go_duration(t)
        ));
    }
    let sub_second = |d: std::time::Duration| !d.is_zero() && d < std::time::Duration::from_secs(1);
    if sub_second(t) {
        return bad(format!(
            "shutdownGracePeriod {{{}}} must be either zero or otherwise >= 1 sec",
            go_duration(t)
        ));
    }
    if sub_second(c) {
        return bad(format!(
            "shutdownGracePeriodCriticalPods {{{}}} must be either zero or otherwise >= 1 sec",
            go_duration(c)
        ));
    }
    if !by_pod_priority.is_empty() && (!t.is_zero() || !c.is_zero()) {
        return bad(
            "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"
                .into(),
        );
    }
    if !by_pod_priority.is_empty() {
        let mut groups = by_pod_priority.to_vec();
        groups.sort_by_key(|g| g.priority);
        return Ok(Some(groups));
    }
    let secs = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    Ok(migrate_config(secs(t), secs(c)))
}

/// The total inhibit delay the kubelet asks logind for: the sum of the group periods, seconds.
///
/// Upstream: `nodeshutdown_manager_linux.go` (`shutdownGracePeriodByPodPriority` summed).
pub fn total_shutdown_grace_period_seconds(groups: &[ShutdownGracePeriodByPodPriority]) -> i64 {
    groups.iter().fold(0i64, |acc, g| {
        acc.saturating_add(g.shutdown_grace_period_seconds)
    })
}

/// A priority group with the pods assigned to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodShutdownGroup<P> {
    /// The group: its lowest priority and shutdown grace period, seconds.
    pub group: ShutdownGracePeriodByPodPriority,
    /// The pods whose `spec.priority` falls in the group.
    pub pods: Vec<P>,
}

/// Why pods could not be grouped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupByPriorityError {
    /// There are pods but no group to put them in.
    #[error("no shutdown priority groups configured for {pods} pods")]
    NoGroups {
        /// How many pods needed a group.
        pods: usize,
    },
}

/// Assigns each pod to the group with the largest priority ≤ the pod's priority (nil counts as 0).
/// Pods below the lowest group go to the lowest, pods above the highest to the highest. Groups
/// come out sorted by priority, ascending (the order they are killed in), pods in input order.
///
/// Upstream: `nodeshutdown_manager.go` `groupByPriority` (1.24+); the manager sorts the groups
/// first, done here as well (stable sort).
///
/// # Errors
/// [`GroupByPriorityError::NoGroups`] if `pods` is non-empty and `groups` is empty (upstream
/// never calls it that way).
pub fn group_by_priority<P: Clone>(
    groups: &[ShutdownGracePeriodByPodPriority],
    pods: &[(P, Option<i32>)],
) -> Result<Vec<PodShutdownGroup<P>>, GroupByPriorityError> {
    let mut sorted: Vec<ShutdownGracePeriodByPodPriority> = groups.to_vec();
    sorted.sort_by_key(|g| g.priority);
    let mut out: Vec<PodShutdownGroup<P>> = sorted
        .into_iter()
        .map(|group| PodShutdownGroup {
            group,
            pods: Vec::new(),
        })
        .collect();
    if out.is_empty() {
        return if pods.is_empty() {
            Ok(out)
        } else {
            Err(GroupByPriorityError::NoGroups { pods: pods.len() })
        };
    }
    for (pod, priority) in pods {
        let priority = priority.unwrap_or(0);
        // The last group whose priority is <= the pod's; the lowest group otherwise.
        let index = out
            .iter()
            .rposition(|g| g.group.priority <= priority)
            .unwrap_or(0);
        out[index].pods.push(pod.clone());
    }
    Ok(out)
}

/// The grace-period override a pod gets from its group: the group period, or the pod's TGPS if
/// that is not longer. Seconds.
///
/// Upstream: `nodeshutdown_manager.go` `podManager.killPods` (1.24+). The override then goes
/// through `killPodNow` and the pod worker (floored to 1 there).
pub fn pod_grace_period_override(group_period_s: i64, pod_tgps: Option<i64>) -> i64 {
    match pod_tgps {
        Some(t) if t <= group_period_s => t,
        _ => group_period_s,
    }
}

/// The phase of a pod relevant to the shutdown status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownPodPhase {
    /// `Succeeded`: the pod finished before the shutdown; it keeps that phase.
    Succeeded,
    /// `Failed`: the phase set on every other pod the shutdown kills.
    Failed,
    /// Any other phase (Pending, Running, Unknown).
    Other,
}

/// The status a pod killed by node shutdown ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownPodStatus {
    /// Failed, unless the pod had already Succeeded.
    pub phase: ShutdownPodPhase,
    /// [`SHUTDOWN_REASON`].
    pub reason: &'static str,
    /// [`SHUTDOWN_MESSAGE`].
    pub message: &'static str,
    /// Condition `DisruptionTarget=True` with reason `TerminationByKubelet`.
    pub condition_type: &'static str,
    /// The condition's reason, `TerminationByKubelet`.
    pub condition_reason: &'static str,
}

/// The status function node shutdown passes to `killPodNow`.
///
/// Upstream: `nodeshutdown_manager.go` `podManager.killPods` status function (1.26+ adds the
/// DisruptionTarget condition, GA with `PodDisruptionConditions` in 1.31).
pub fn shutdown_pod_status(current: ShutdownPodPhase) -> ShutdownPodStatus {
    ShutdownPodStatus {
        phase: if current == ShutdownPodPhase::Succeeded {
            ShutdownPodPhase::Succeeded
        } else {
            ShutdownPodPhase::Failed
        },
        reason: SHUTDOWN_REASON,
        message: SHUTDOWN_MESSAGE,
        condition_type: "DisruptionTarget",
        condition_reason: "TerminationByKubelet",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrate() {
        let g = migrate_config(300, 120).unwrap();
        assert_eq!(g[0].shutdown_grace_period_seconds, 180);
        assert_eq!(g[1].shutdown_grace_period_seconds, 120);
        assert_eq!(total_shutdown_grace_period_seconds(&g), 300);
        assert_eq!(migrate_config(0, 0), None);
        assert_eq!(migrate_config(30, 60), None);
        assert_eq!(migrate_config(i64::MIN, 1), None);
    }

    #[test]
    fn the_configuration_is_checked_as_the_kubelet_checks_it() {
        use std::time::Duration;
        let s = Duration::from_secs;
        assert_eq!(shutdown_config(s(0), s(0), &[]), Ok(None));
        let g = shutdown_config(s(30), s(10), &[]).unwrap().unwrap();
        assert_eq!(
            (
                g[0].shutdown_grace_period_seconds,
                g[1].shutdown_grace_period_seconds
            ),
            (20, 10)
        );
        assert_eq!(
            shutdown_config(s(10), s(30), &[]).unwrap_err().to_string(),
            "invalid configuration: shutdownGracePeriodCriticalPods {30s} must be <= shutdownGracePeriod {10s}"
        );
        assert_eq!(
            shutdown_config(Duration::from_millis(500), s(0), &[]).unwrap_err().to_string(),
            "invalid configuration: shutdownGracePeriod {500ms} must be either zero or otherwise >= 1 sec"
        );
        let by = [
            ShutdownGracePeriodByPodPriority {
                priority: 100_000,
                shutdown_grace_period_seconds: 10,
            },
            ShutdownGracePeriodByPodPriority {
                priority: 0,
                shutdown_grace_period_seconds: 20,
            },
        ];
        assert_eq!(
            shutdown_config(s(60), s(0), &by).unwrap_err().to_string(),
            "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"
        );
        let g = shutdown_config(s(0), s(0), &by).unwrap().unwrap();
        assert_eq!(g[0].priority, 0);
        assert_eq!(go_duration(s(90)), "1m30s");
        assert_eq!(go_duration(s(3600)), "1h0m0s");
    }

    #[test]
    fn groups_and_override() {
        let groups = migrate_config(30, 10).unwrap();
        let pods = [
            ("a", None),
            ("b", Some(1_000_000_000)),
            ("c", Some(SYSTEM_CRITICAL_PRIORITY)),
            ("d", Some(-5)),
        ];
        let out = group_by_priority(&groups, &pods).unwrap();
        assert_eq!(out[0].pods, vec!["a", "b", "d"]);
        assert_eq!(out[1].pods, vec!["c"]);
        assert!(group_by_priority::<&str>(&[], &[("x", None)]).is_err());
        assert_eq!(pod_grace_period_override(20, Some(5)), 5);
        assert_eq!(pod_grace_period_override(20, Some(20)), 20);
        assert_eq!(pod_grace_period_override(20, Some(60)), 20);
        assert_eq!(pod_grace_period_override(0, None), 0);
        assert_eq!(
            shutdown_pod_status(ShutdownPodPhase::Succeeded).phase,
            ShutdownPodPhase::Succeeded
        );
        assert_eq!(
            shutdown_pod_status(ShutdownPodPhase::Other).phase,
            ShutdownPodPhase::Failed
        );
    }
}
