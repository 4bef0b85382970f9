//! The kubelet's container kill: the base grace, the `killContainer` arithmetic and the
//! termination ordering of native sidecars.
//!
//! Source: `pkg/kubelet/kuberuntime/kuberuntime_container.go` (`setTerminationGracePeriod`,
//! `killContainer`, `executePreStopHook`) and `kuberuntime_termination_order.go`.
//! Grace periods are whole seconds (`i64`); elapsed times are milliseconds (`_ms`), taken as
//! `i128` so that a wait as long as an int64 grace period (9223372036854775807 s) fits.

use crate::KubeVersion;

/// `minimumGracePeriodInSeconds`: StopContainer never gets less from `killContainer` on 1.28+.
pub const MINIMUM_GRACE_PERIOD_SECONDS: i64 = 2;

/// The release from which the override is applied before the preStop hook (PR #115835).
pub const OVERRIDE_BEFORE_PRESTOP_SINCE: KubeVersion = KubeVersion::new(1, 28);

/// Why a container is being killed (`reasonLivenessProbe`, `reasonStartupProbe`, or anything
/// else).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KillReason {
    /// Pod termination, a spec change, or anything that is not a probe.
    #[default]
    Other,
    /// A failed liveness probe (`reasonLivenessProbe`): the probe's own
    /// `terminationGracePeriodSeconds` applies.
    LivenessProbe,
    /// A failed startup probe (`reasonStartupProbe`): the probe's own
    /// `terminationGracePeriodSeconds` applies.
    StartupProbe,
}

/// The grace-related fields of a pod and container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraceFields {
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `spec.terminationGracePeriodSeconds`.
    pub termination_grace_period_seconds: Option<i64>,
    /// `livenessProbe.terminationGracePeriodSeconds`.
    pub liveness_probe_seconds: Option<i64>,
    /// `startupProbe.terminationGracePeriodSeconds`.
    pub startup_probe_seconds: Option<i64>,
}

impl GraceFields {
    /// The fields of a pod kill (`killPod` from `SyncTerminatingPod`): the pod's
    /// `deletionGracePeriodSeconds` (`None` when the object has none) and TGPS, in seconds; no
    /// probe values, since the kill reason is not a probe.
    pub fn of_pod_kill(deletion_grace_period_seconds: Option<i64>, tgps: i64) -> Self {
        GraceFields {
            deletion_grace_period_seconds,
            termination_grace_period_seconds: Some(tgps),
            ..Default::default()
        }
    }

    /// The fields of a liveness or startup kill of `container` (the container-restart path of
    /// `SyncPod`): no DGPS and no pod-level override, the pod's TGPS and the probes' own
    /// `terminationGracePeriodSeconds` (KEP-2238), in seconds.
    pub fn of_probe_kill(
        pod: &crate::plan::PodPlan,
        container: &crate::plan::ContainerPlan,
    ) -> Self {
        let probe = |p: &Option<crate::plan::Probe>| {
            p.as_ref().and_then(|p| p.termination_grace_period_seconds)
        };
        GraceFields {
            deletion_grace_period_seconds: None,
            termination_grace_period_seconds: Some(pod.termination_grace_period_seconds),
            liveness_probe_seconds: probe(&container.liveness_probe),
            startup_probe_seconds: probe(&container.startup_probe),
        }
    }
}

/// Whether `killPodWithSyncResult` kills `pod`'s containers in termination order (sidecars after
/// the main containers, `newTerminationOrdering`): only when the pod has a native sidecar
/// (`types.HasRestartableInitContainer`) and the release has `SidecarContainers` on by default
/// (1.29+); otherwise every container gets its stop signal at once.
///
/// Source: `pkg/kubelet/kuberuntime/kuberuntime_container.go` `killContainersWithSyncResult`.
pub fn kills_in_termination_order(pod: &crate::plan::PodPlan, version: KubeVersion) -> bool {
    version.sidecar_containers() && pod.sidecars().next().is_some()
}

/// `setTerminationGracePeriod`: the base grace of a container kill, in seconds. DGPS wins (even
/// over probe values); else the failing probe's own `terminationGracePeriodSeconds` (KEP-2238,
/// which may exceed TGPS) for liveness/startup kills; else TGPS; else 2.
///
/// Source: `pkg/kubelet/kuberuntime/kuberuntime_container.go` `setTerminationGracePeriod`
/// (Kubernetes 1.21 to 1.37; probe-level values GA in 1.25).
pub fn set_termination_grace_period(fields: GraceFields, reason: KillReason) -> i64 {
    if let Some(dgps) = fields.deletion_grace_period_seconds {
        return dgps;
    }
    let Some(tgps) = fields.termination_grace_period_seconds else {
        return MINIMUM_GRACE_PERIOD_SECONDS;
    };
    let probe = match reason {
        KillReason::StartupProbe => fields.startup_probe_seconds,
        KillReason::LivenessProbe => fields.liveness_probe_seconds,
        KillReason::Other => None,
    };
    probe.unwrap_or(tgps)
}

/// Whole seconds of an elapsed time (negative counts as 0), truncated as Go's
/// `int64(d.Seconds())` does, saturating at `i64::MAX`.
pub fn truncated_seconds(elapsed_ms: impl Into<i128>) -> i64 {
    let s = elapsed_ms.into().max(0) / 1000;
    i64::try_from(s).unwrap_or(i64::MAX)
}

/// The `killContainer` arithmetic, step by step, so that a caller with real timers (the local
/// kubelet) and a caller with assumed durations (explain) share one implementation.
///
/// Order on 1.28+: override → preStop (budget `g`, deduct whole seconds) → sidecar wait
/// (deduct whole seconds) → floor 2 → StopContainer. On 1.22–1.27 the override replaced the
/// remainder after preStop (up to twice the grace, issues #115817/#117373); on ≤1.21 the same,
/// and the override could go below 2 (issue #92432).
///
/// Source: `pkg/kubelet/kuberuntime/kuberuntime_container.go` `killContainer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillContainer {
    version: KubeVersion,
    override_seconds: Option<i64>,
    /// The running budget `g`, seconds.
    grace: i64,
}

impl KillContainer {
    /// Starts a kill with the base grace from [`set_termination_grace_period`] and the
    /// `gracePeriodOverride` (seconds) the pod worker passed, if any.
    pub fn new(base_grace: i64, override_seconds: Option<i64>, version: KubeVersion) -> Self {
        let mut grace = base_grace;
        if version >= OVERRIDE_BEFORE_PRESTOP_SINCE {
            if let Some(o) = override_seconds {
                grace = o;
            }
        }
        KillContainer {
            version,
            override_seconds,
            grace,
        }
    }

    /// The current budget `g`, seconds.
    pub fn grace(&self) -> i64 {
        self.grace
    }

    /// The preStop budget in seconds, or `None` when the hook is skipped (no hook, or `g <= 0`).
    pub fn pre_stop_budget(&self, has_pre_stop: bool) -> Option<i64> {
        (has_pre_stop && self.grace > 0).then_some(self.grace)
    }

    /// Deducts a preStop hook that ran for `elapsed_ms` milliseconds. The kubelet stops waiting at
    /// the budget, so at most `g` whole seconds are deducted; the hook itself is not cancelled.
    /// Returns the whole seconds deducted.
    pub fn pre_stop_finished(&mut self, elapsed_ms: impl Into<i128>) -> i64 {
        if self.grace <= 0 {
            return 0;
        }
        let spent = truncated_seconds(elapsed_ms).min(self.grace);
        self.grace -= spent;
        spent
    }

    /// The bound, in seconds, of the wait for this container's turn (sidecars); 0 means none.
    pub fn turn_budget(&self) -> i64 {
        self.grace.max(0)
    }

    /// Deducts the wait for this container's turn (`waitForTurn`), `waited_ms` milliseconds
    /// (bounded by [`Self::turn_budget`]). Returns the whole seconds deducted.
    pub fn turn_finished(&mut self, waited_ms: impl Into<i128>) -> i64 {
        if self.grace <= 0 {
            return 0;
        }
        let spent = truncated_seconds(waited_ms).min(self.grace);
        self.grace -= spent;
        spent
    }

    /// The timeout, in seconds, handed to the runtime's StopContainer.
    pub fn stop_timeout(&self) -> i64 {
        let floored = self.grace.max(MINIMUM_GRACE_PERIOD_SECONDS);
        if self.version >= OVERRIDE_BEFORE_PRESTOP_SINCE {
            floored
        } else {
            self.override_seconds.unwrap_or(floored)
        }
    }
}

/// A container as the termination ordering sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderedContainer {
    /// The container's name from the pod spec.
    pub name: String,
    /// A native sidecar (init container with `restartPolicy: Always`).
    pub sidecar: bool,
}

/// `newTerminationOrdering`: for each container, the containers it must wait for before its
/// stop signal. Sidecars wait for every main container and for the next sidecar declared after
/// them, so they stop in reverse order after the mains; mains wait for nothing. Containers are
/// given in declaration order (init containers first). Returns `(name, prerequisites)` pairs.
///
/// Source: `pkg/kubelet/kuberuntime/kuberuntime_termination_order.go` `newTerminationOrdering`
/// (Kubernetes 1.29 to 1.37; sidecars GA in 1.33).
pub fn termination_ordering(containers: &[OrderedContainer]) -> Vec<(String, Vec<String>)> {
    let mains: Vec<String> = containers
        .iter()
        .filter(|c| !c.sidecar)
        .map(|c| c.name.clone())
        .collect();
    let sidecars: Vec<&OrderedContainer> = containers.iter().filter(|c| c.sidecar).collect();
    containers
        .iter()
        .map(|c| {
            if !c.sidecar {
                return (c.name.clone(), Vec::new());
            }
            let mut prereq = mains.clone();
            if let Some(pos) = sidecars.iter().position(|s| s.name == c.name) {
                if let Some(next) = sidecars.get(pos + 1) {
                    prereq.push(next.name.clone());
                }
            }
            (c.name.clone(), prereq)
        })
        .collect()
}

/// `waitForTurn`: how long, in milliseconds, a container whose wait starts at `start_ms` waits
/// for prerequisites that exit at `prerequisite_exits_ms` (`None`: never within the bound),
/// bounded by one timer of `grace_seconds`. A grace of 0 or less returns 0 at once.
///
/// Source: `kuberuntime_termination_order.go` `terminationOrdering.waitForTurn`.
pub fn wait_for_turn_ms(
    start_ms: i128,
    prerequisite_exits_ms: &[Option<i128>],
    grace_seconds: i64,
) -> i128 {
    if grace_seconds <= 0 {
        return 0;
    }
    let bound = i128::from(grace_seconds) * 1000;
    let mut latest = 0;
    for exit in prerequisite_exits_ms {
        match exit {
            None => return bound,
            Some(t) => latest = latest.max(t.saturating_sub(start_ms)),
        }
    }
    latest.clamp(0, bound)
}

/// Simulates the ordering of a pod whose containers all start their turn-wait at 0 (no preStop)
/// with budget `grace_seconds` each, and exit `exit_after_turn_ms` after their turn. Returns each
/// container's wait in milliseconds, in the order given.
pub fn simulate_ordering(
    containers: &[OrderedContainer],
    grace_seconds: impl Fn(&str) -> i64,
    exit_after_turn_ms: impl Fn(&str) -> i64,
) -> Vec<(String, i64)> {
    let ordering = termination_ordering(containers);
    let mut exits: Vec<(String, i128)> = Vec::new();
    let mut waits: Vec<(String, i64)> = Vec::new();
    // Mains first, then sidecars from the last declared to the first: each one's prerequisites
    // are then known.
    let order = ordering
        .iter()
        .filter(|(_, p)| p.is_empty())
        .chain(ordering.iter().filter(|(_, p)| !p.is_empty()).rev());
    for (name, prereq) in order {
        let prereq_exits: Vec<Option<i128>> = prereq
            .iter()
            .map(|p| exits.iter().find(|(n, _)| n == p).map(|(_, t)| *t))
            .collect();
        let wait = wait_for_turn_ms(0, &prereq_exits, grace_seconds(name));
        exits.push((
            name.clone(),
            wait.saturating_add(exit_after_turn_ms(name).into()),
        ));
        // Saturating: only a grace beyond 292 million years waits longer than an i64 of ms.
        waits.push((name.clone(), i64::try_from(wait).unwrap_or(i64::MAX)));
    }
    containers
        .iter()
        .map(|c| {
            let w = waits
                .iter()
                .find(|(n, _)| *n == c.name)
                .map(|(_, w)| *w)
                .unwrap_or(0);
            (c.name.clone(), w)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: KubeVersion = KubeVersion::LATEST;

    #[test]
    fn hook_within_budget() {
        let mut k = KillContainer::new(30, Some(30), NEW);
        assert_eq!(k.pre_stop_budget(true), Some(30));
        assert_eq!(k.pre_stop_finished(1_900), 1);
        assert_eq!(k.stop_timeout(), 29);
    }

    #[test]
    fn hook_cut_at_budget_leaves_the_floor() {
        let mut k = KillContainer::new(30, Some(30), NEW);
        k.pre_stop_finished(30_004);
        assert_eq!(k.stop_timeout(), 2);
    }

    #[test]
    fn zero_grace_skips_the_hook_and_still_stops_with_two() {
        let k = KillContainer::new(0, Some(0), NEW);
        assert_eq!(k.pre_stop_budget(true), None);
        assert_eq!(k.stop_timeout(), 2);
    }

    #[test]
    fn kubelets_1_22_to_1_27_reapply_the_override_after_pre_stop() {
        let v = KubeVersion::new(1, 25);
        let mut k = KillContainer::new(60, Some(60), v);
        assert_eq!(k.pre_stop_budget(true), Some(60));
        k.pre_stop_finished(60_000);
        assert_eq!(
            k.stop_timeout(),
            60,
            "R10: SIGKILL at 120 on affected kubelets"
        );
    }

    #[test]
    fn kubelets_up_to_1_21_let_an_eviction_override_skip_the_floor() {
        let v = KubeVersion::new(1, 21);
        let mut k = KillContainer::new(30, Some(0), v);
        assert_eq!(
            k.pre_stop_budget(true),
            Some(30),
            "preStop ignored the override (#92432)"
        );
        k.pre_stop_finished(5_000);
        assert_eq!(k.stop_timeout(), 0);
    }

    #[test]
    fn sidecars_wait_for_mains_and_later_sidecars() {
        let cs = vec![
            OrderedContainer {
                name: "a".into(),
                sidecar: true,
            },
            OrderedContainer {
                name: "b".into(),
                sidecar: true,
            },
            OrderedContainer {
                name: "main".into(),
                sidecar: false,
            },
        ];
        let o = termination_ordering(&cs);
        assert_eq!(o[0].1, vec!["main".to_string(), "b".to_string()]);
        assert_eq!(o[1].1, vec!["main".to_string()]);
        assert!(o[2].1.is_empty());
    }
}
