//! The kubelet's pod worker: the effective grace period of a terminating pod, the state machine
//! of `UpdatePod`, and the `killPodNow` wait.
//!
//! Source: `pkg/kubelet/pod_workers.go` (mainline architecture since v1.22, PR #102344).
//! Seconds throughout.

use crate::KubeVersion;

/// The first release whose pod worker keeps an explicit 0 (from a force delete or an eviction)
/// as "shortest possible" instead of falling back to the full TGPS.
///
/// Upstream's `calculateEffectiveGracePeriod` gained its `overridden` guard after issues #113717,
/// #115819 and #120449 (still reproduced on 1.28). The exact release is not pinned by the spec
/// (`spec/termination.md` §2.2 says "v1.22 to about 1.30"); podgrace uses 1.31, the release that
/// also changed the hard-eviction override from 0 to 1 (PR #124063).
pub const OVERRIDDEN_GUARD_SINCE: KubeVersion = KubeVersion::new(1, 31);

/// The first release with the mainline pod worker (PR #102344), which always hands the effective
/// grace to `killPod` as an override.
pub const MAINLINE_POD_WORKER_SINCE: KubeVersion = KubeVersion::new(1, 22);

/// What `calculateEffectiveGracePeriod` looks at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraceInputs {
    /// `status.gracePeriod` from earlier updates; 0 means not set yet.
    pub previous: i64,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `spec.terminationGracePeriodSeconds`.
    pub termination_grace_period_seconds: Option<i64>,
    /// `KillPodOptions.PodTerminationGracePeriodSecondsOverride` (eviction, node shutdown, ...).
    pub override_seconds: Option<i64>,
}

/// `calculateEffectiveGracePeriod`: the grace period, in seconds, the pod worker uses for a
/// terminating pod, and whether it shortened an earlier one.
///
/// DGPS, then a smaller kubelet override, only ever lower the value; with neither it is TGPS;
/// the result is never below 1. Before [`OVERRIDDEN_GUARD_SINCE`] a 0 from DGPS or an override
/// fell back to the full TGPS (issues #113717, #115819).
///
/// Source: `pkg/kubelet/pod_workers.go` `calculateEffectiveGracePeriod`, Kubernetes 1.22 to 1.37.
pub fn effective_grace_period(inputs: GraceInputs, version: KubeVersion) -> (i64, bool) {
    let mut g = inputs.previous;
    let mut overridden = false;
    if let Some(dgps) = inputs.deletion_grace_period_seconds {
        if g == 0 || dgps < g {
            g = dgps;
            overridden = true;
        }
    }
    if let Some(o) = inputs.override_seconds {
        if g == 0 || o < g {
            g = o;
            overridden = true;
        }
    }
    let guard = version >= OVERRIDDEN_GUARD_SINCE;
    if (!guard || !overridden) && g == 0 {
        if let Some(tgps) = inputs.termination_grace_period_seconds {
            g = tgps;
        }
    }
    if g < 1 {
        g = 1;
    }
    let shortened = inputs.previous != 0 && inputs.previous != g;
    (g, shortened)
}

/// The kind of update sent to `UpdatePod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateType {
    /// `SyncPodCreate`: the pod was added (from the API or a static manifest).
    SyncPodCreate,
    /// `SyncPodUpdate`: the pod's spec or metadata changed (a delete sets `deletionTimestamp`
    /// through this).
    SyncPodUpdate,
    /// `SyncPodSync`: a periodic resync, with nothing new from the API.
    SyncPodSync,
    /// `SyncPodKill`: the pod must have no running containers: `killPodNow` (eviction, node
    /// shutdown, preemption, with [`KillPodOptions`]), or the API object was removed.
    SyncPodKill,
}

/// Options of a kill request (`KillPodOptions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KillPodOptions {
    /// The kill is an eviction.
    pub evict: bool,
    /// Grace-period override, seconds.
    pub override_seconds: Option<i64>,
}

/// One `UpdatePod` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodUpdate {
    /// Why `UpdatePod` is called: create, update, resync or kill.
    pub update_type: UpdateType,
    /// `spec.terminationGracePeriodSeconds`; `None` for a runtime-only (orphaned) pod.
    pub termination_grace_period_seconds: Option<i64>,
    /// `metadata.deletionTimestamp` is set.
    pub deletion_timestamp: bool,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `status.phase` is Succeeded or Failed.
    pub terminal_phase: bool,
    /// A runtime-only pod: the kubelet found containers but has no spec for them.
    pub runtime_only: bool,
    /// The kill request of a `SyncPodKill` update (eviction flag and grace override); `None` for
    /// other updates.
    pub kill: Option<KillPodOptions>,
}

impl PodUpdate {
    /// A plain update of a pod with the given TGPS.
    pub fn new(update_type: UpdateType, termination_grace_period_seconds: Option<i64>) -> Self {
        PodUpdate {
            update_type,
            termination_grace_period_seconds,
            deletion_timestamp: false,
            deletion_grace_period_seconds: None,
            terminal_phase: false,
            runtime_only: false,
            kill: None,
        }
    }
}

/// The sync functions the worker calls, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncCall {
    /// `SyncPod` for a running pod.
    SyncPod,
    /// `SyncTerminatingPod`, with the effective grace, seconds, as its override.
    SyncTerminatingPod {
        /// The effective grace period, seconds, handed to `killPod` as the override.
        grace_period_seconds: i64,
    },
    /// `SyncTerminatingRuntimePod` for an orphan, always with override 1.
    SyncTerminatingRuntimePod,
    /// `SyncTerminatedPod`.
    SyncTerminatedPod,
}

/// The per-pod state of the pod worker (`podSyncStatus`), driven by [`PodWorker::update_pod`]
/// and [`PodWorker::run_to_completion`]. Pure: there is no goroutine; the caller decides when
/// the worker gets to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodWorker {
    /// `status.gracePeriod`, seconds; 0 until termination starts.
    pub grace_period: i64,
    /// The worker ran `SyncPod` at least once (upstream `startedAt` is set).
    pub started: bool,
    /// A kill was requested (upstream `terminatingAt` is set); the grace period can only shrink
    /// from here.
    pub terminating_requested: bool,
    /// The worker picked up the termination (`SyncTerminatingPod` began): no container may start
    /// any more.
    pub started_terminating: bool,
    /// `SyncTerminatingPod` succeeded (upstream `terminatedAt` is set): every container is stopped.
    pub terminated: bool,
    /// `SyncTerminatedPod` succeeded: the worker is done with this UID until `SyncKnownPods`
    /// forgets it.
    pub finished: bool,
    /// The pod was deleted on the API server (`deletionTimestamp` set) or only exists in the
    /// runtime.
    pub deleted: bool,
    /// The kill was an eviction, so the pod can be cleaned up more aggressively.
    pub evicted: bool,
    /// A create (or update, or sync) came for this UID after its kill: the history is cleared once
    /// the known pods are synced.
    pub restart_requested: bool,
    /// The pod was seen in the container runtime, so it must go through `SyncTerminatingPod` or
    /// `SyncTerminatingRuntimePod`.
    pub observed_runtime: bool,
    /// The kill options of the update waiting to be processed, with the override always set to
    /// the effective grace once terminating.
    pub pending_kill: Option<KillPodOptions>,
    /// The kill options of the update being (or last) processed.
    pub active_kill: Option<KillPodOptions>,
    /// `true` if the last update shortened the grace of a sync in flight: `UpdatePod` calls
    /// the sync's `cancelFn` and logs `Cancelling current pod sync`. The running
    /// `SyncTerminatingPod` does not read that context, so the kill goes on with its grace
    /// ([`later_update_in_flight`]).
    pub cancelled_in_flight: bool,
    /// The sync calls made, in order.
    pub calls: Vec<SyncCall>,
    version: Option<KubeVersion>,
}

impl PodWorker {
    /// A worker for a pod not seen before, following `version`'s rules.
    pub fn new(version: KubeVersion) -> Self {
        PodWorker {
            version: Some(version),
            ..Default::default()
        }
    }

    fn version(&self) -> KubeVersion {
        self.version.unwrap_or_default()
    }

    /// `UpdatePod`: records an update. Once terminating, every update is a kill and the grace
    /// period can only shrink.
    ///
    /// Source: `pkg/kubelet/pod_workers.go` `podWorkers.UpdatePod` (Kubernetes 1.22 to 1.37).
    pub fn update_pod(&mut self, u: PodUpdate) {
        if self.finished && !u.runtime_only {
            if u.update_type == UpdateType::SyncPodCreate {
                // A create for a UID that already finished terminating asks for a restart.
                self.restart_requested = true;
            }
            return;
        }
        if self.terminating_requested && u.update_type == UpdateType::SyncPodCreate {
            self.restart_requested = true;
        }
        let becomes_terminating = !self.terminating_requested
            && (u.runtime_only
                || u.deletion_timestamp
                || u.terminal_phase
                || u.update_type == UpdateType::SyncPodKill);
        if becomes_terminating {
            self.terminating_requested = true;
            if u.runtime_only {
                self.deleted = true;
                self.observed_runtime = true;
            } else if u.deletion_timestamp {
                self.deleted = true;
            } else if u.kill.is_some_and(|k| k.evict) {
                self.evicted = true;
            }
        }
        if !self.terminating_requested {
            self.started = true;
            self.calls.push(SyncCall::SyncPod);
            return;
        }
        let mut kill = u.kill.unwrap_or_default();
        if kill.evict {
            self.evicted = true;
        }
        let (g, shortened) = effective_grace_period(
            GraceInputs {
                previous: self.grace_period,
                deletion_grace_period_seconds: u.deletion_grace_period_seconds,
                termination_grace_period_seconds: u.termination_grace_period_seconds,
                override_seconds: kill.override_seconds,
            },
            self.version(),
        );
        self.grace_period = g;
        kill.override_seconds = Some(g);
        self.cancelled_in_flight = self.started_terminating && shortened;
        self.pending_kill = Some(kill);
        if u.runtime_only {
            self.observed_runtime = true;
        }
    }

    /// Lets the worker run until the pod is terminated and finished, as if every sync succeeds
    /// at once: `SyncTerminatingPod` (or `SyncTerminatingRuntimePod`) then `SyncTerminatedPod`.
    pub fn run_to_completion(&mut self) {
        if !self.terminating_requested || self.finished {
            return;
        }
        if let Some(kill) = self.pending_kill.take() {
            self.active_kill = Some(kill);
        }
        self.started_terminating = true;
        if self.observed_runtime && self.deleted && !self.started {
            self.calls.push(SyncCall::SyncTerminatingRuntimePod);
        } else {
            self.calls.push(SyncCall::SyncTerminatingPod {
                grace_period_seconds: self.grace_period,
            });
        }
        self.terminated = true;
        self.calls.push(SyncCall::SyncTerminatedPod);
        self.finished = true;
    }
}

/// A later update that reaches the pod worker while `SyncTerminatingPod` is killing the pod: a
/// second `kubectl delete`, an eviction, or the removal of the API object by a delete with
/// grace 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaterUpdate {
    /// The pod worker's effective grace after the update ([`effective_grace_period`] with the
    /// grace in flight as `previous`), seconds.
    pub effective_grace_seconds: i64,
    /// The update removed the API object (a delete with grace 0): the kubelet sees a `REMOVE`.
    pub object_removed: bool,
    /// `metadata.deletionGracePeriodSeconds` of the object as last seen, seconds.
    pub deletion_grace_period_seconds: Option<i64>,
}

/// What a later update does to a kill in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlightEffect {
    /// The update's grace is not shorter than the one in flight: nothing changes (the grace
    /// only shrinks).
    NotShorter,
    /// The kill goes on with the grace it started with (`kept_seconds`): its preStop wait, its
    /// StopContainer timeout and its SIGKILL stay as they were. The pod worker records the
    /// shorter grace (`recorded_seconds`, used only if a later sync runs, e.g. a retry after
    /// a failed kill) and cancels the sync's context, which nothing in the kill reads.
    Ignored {
        /// The grace of the kill in flight, seconds; its preStop wait and StopContainer timeout use
        /// it.
        kept_seconds: i64,
        /// The shorter grace the pod worker stores in `status.gracePeriod`, seconds.
        recorded_seconds: i64,
    },
    /// 1.18 to 1.21 only, when the update removed the API object: the kubelet's pod killer
    /// (`HandlePodRemoves` → `deletePod` → `podKiller`) kills every running container again at
    /// once, beside the pod worker's kill, with the pod's own grace fields and no override:
    /// base grace `base_grace_seconds` (the removed object's DGPS, 0 for a force delete), so
    /// the preStop is skipped and StopContainer gets the 2 s floor.
    KilledAgain {
        /// The grace the pod killer starts from, seconds: the removed object's
        /// `deletionGracePeriodSeconds`, 0 for a force delete.
        base_grace_seconds: i64,
    },
}

/// What a later, possibly shorter, grace does to a `SyncTerminatingPod` already running with
/// `kill_grace_seconds`.
///
/// From 1.22 (the mainline pod worker, PR #102344) to 1.37 nothing shortens a kill in flight:
/// `UpdatePod` computes the shorter grace, stores it and calls the running sync's `cancelFn`
/// (log `Cancelling current pod sync`), but `SyncTerminatingPod` kills on a context of its own
/// (`context.TODO()` / `context.Background()`, "TODO(#113606): connect this with the incoming
/// context parameter"; before 1.26 `killPod` took no context at all), so the preStop wait
/// (`executePreStopHook` selects only on the hook and its timer), the CRI StopContainer call
/// and containerd's wait for the exit all run to their first deadlines. The pod worker runs
/// one sync at a time (`podWorkerLoop`), so the shorter grace could only apply to a sync after
/// this one, and a kill that succeeded leaves none. containerd is never asked a second time,
/// so its once-only stop signal (`IsStopSignaledWithTimeout`) does not come into play.
/// Recorded on 1.32 (`real-cluster-1.32.md` case c, twice): `--grace-period=30` then
/// `--grace-period=3` 2.3 s (5.3 s) later: the preStop ran its full 3 s, StopContainer got
/// timeout 27, SIGKILL came at 30.1–30.2 s.
///
/// On 1.18 to 1.21 the pod worker also ran one sync at a time and no kill read a context,
/// so a shorter grace that keeps the object is ignored the same way; but an update that
/// removes the object (a second delete with `--grace-period=0 --force`) reached the pod killer,
/// which killed again beside the running sync: [`InFlightEffect::KilledAgain`]. This older
/// path is reasoned from the code's history as remembered (the 1.18–1.21 `deletePod` and
/// `podKiller`), not re-read; confidence: medium.
///
/// Source: `pkg/kubelet/pod_workers.go` `UpdatePod` and `podWorkerLoop`, `pkg/kubelet/kubelet.go`
/// `SyncTerminatingPod` (1.36 tree; the same TODO since 1.26), and for 1.18–1.21 `kubelet.go`
/// `HandlePodRemoves` / `deletePod` and `pod_workers.go` `podKiller`.
pub fn later_update_in_flight(
    version: KubeVersion,
    kill_grace_seconds: i64,
    update: LaterUpdate,
) -> InFlightEffect {
    if version < MAINLINE_POD_WORKER_SINCE && update.object_removed {
        return InFlightEffect::KilledAgain {
            base_grace_seconds: update.deletion_grace_period_seconds.unwrap_or(0),
        };
    }
    if update.effective_grace_seconds >= kill_grace_seconds {
        return InFlightEffect::NotShorter;
    }
    InFlightEffect::Ignored {
        kept_seconds: kill_grace_seconds,
        recorded_seconds: update.effective_grace_seconds,
    }
}

/// `killPodNow`'s wait bound, in seconds: `g + g/2` (integer division) with at least 10, where
/// `g` is the override, else TGPS, else 0. It bounds the caller's wait only; the termination goes
/// on after it (event `ExceededGracePeriod`).
///
/// Source: `pkg/kubelet/pod_workers.go` `killPodNow` (Kubernetes 1.22 to 1.37).
pub fn kill_pod_now_wait_seconds(
    override_seconds: Option<i64>,
    termination_grace_period_seconds: Option<i64>,
) -> i64 {
    let g = override_seconds
        .or(termination_grace_period_seconds)
        .unwrap_or(0);
    let timeout = g.saturating_add(g / 2);
    timeout.max(10)
}

/// What the kubelet passes to `killPod` as `gracePeriodOverride` for a pod whose effective grace
/// is `effective` seconds and whose kill carried `kill_override`.
///
/// From 1.22 the pod worker always passes the effective grace. Before, a plain deletion passed
/// nothing (the container's own base grace applied) and kubelet-initiated kills passed their raw
/// override. Source: `pkg/kubelet/pod_workers.go` `UpdatePod` (1.22+), `pkg/kubelet/kubelet.go`
/// `killPod` callers (≤1.21).
pub fn kill_pod_override(
    effective: i64,
    kill_override: Option<i64>,
    version: KubeVersion,
) -> Option<i64> {
    if version >= MAINLINE_POD_WORKER_SINCE {
        Some(effective)
    } else {
        kill_override
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: KubeVersion = KubeVersion::LATEST;
    const OLD: KubeVersion = KubeVersion::new(1, 27);

    fn grace(previous: i64, dgps: Option<i64>, o: Option<i64>, v: KubeVersion) -> i64 {
        effective_grace_period(
            GraceInputs {
                previous,
                deletion_grace_period_seconds: dgps,
                termination_grace_period_seconds: Some(30),
                override_seconds: o,
            },
            v,
        )
        .0
    }

    #[test]
    fn zero_is_one_on_new_kubelets_and_tgps_on_old_ones() {
        assert_eq!(grace(0, Some(0), None, NEW), 1);
        assert_eq!(grace(0, Some(0), None, OLD), 30);
        assert_eq!(grace(0, None, Some(0), NEW), 1);
        assert_eq!(grace(0, None, Some(0), OLD), 30);
    }

    #[test]
    fn grace_only_shrinks() {
        assert_eq!(grace(10, Some(20), None, NEW), 10);
        assert_eq!(grace(10, Some(5), None, NEW), 5);
        assert_eq!(grace(10, None, Some(60), NEW), 10);
        let (_, shortened) = effective_grace_period(
            GraceInputs {
                previous: 10,
                deletion_grace_period_seconds: Some(5),
                ..Default::default()
            },
            NEW,
        );
        assert!(shortened);
    }

    #[test]
    fn a_second_shorter_delete_cancels_the_sync_in_flight() {
        let mut w = PodWorker::new(NEW);
        w.update_pod(PodUpdate::new(UpdateType::SyncPodCreate, Some(30)));
        let mut del = PodUpdate::new(UpdateType::SyncPodUpdate, Some(30));
        del.deletion_timestamp = true;
        del.deletion_grace_period_seconds = Some(30);
        w.update_pod(del);
        w.started_terminating = true;
        del.deletion_grace_period_seconds = Some(10);
        w.update_pod(del);
        assert_eq!(w.grace_period, 10);
        assert!(w.cancelled_in_flight);
        del.deletion_grace_period_seconds = Some(20);
        w.update_pod(del);
        assert_eq!(w.grace_period, 10);
        assert!(!w.cancelled_in_flight);
    }

    #[test]
    fn zero_dgps_with_an_override_can_lengthen() {
        // calculateEffectiveGracePeriod treats a running value of 0 as "unset", so a DGPS of 0
        // followed by an override in the same update takes the override even when it is longer
        // than the value stored before. Faithful to upstream, surprising to users.
        let (g, _) = effective_grace_period(
            GraceInputs {
                previous: 1,
                deletion_grace_period_seconds: Some(0),
                termination_grace_period_seconds: Some(0),
                override_seconds: Some(2),
            },
            NEW,
        );
        assert_eq!(g, 2);
    }

    #[test]
    fn a_later_shorter_grace_never_shortens_the_kill_in_flight_from_1_22() {
        let later = |g, removed| LaterUpdate {
            effective_grace_seconds: g,
            object_removed: removed,
            deletion_grace_period_seconds: Some(if removed { 0 } else { g }),
        };
        for v in [KubeVersion::new(1, 22), KubeVersion::new(1, 32), NEW] {
            assert_eq!(
                later_update_in_flight(v, 30, later(3, false)),
                InFlightEffect::Ignored {
                    kept_seconds: 30,
                    recorded_seconds: 3
                }
            );
            assert_eq!(
                later_update_in_flight(v, 30, later(1, true)),
                InFlightEffect::Ignored {
                    kept_seconds: 30,
                    recorded_seconds: 1
                }
            );
            assert_eq!(
                later_update_in_flight(v, 3, later(30, false)),
                InFlightEffect::NotShorter
            );
        }
        let old = KubeVersion::new(1, 21);
        assert_eq!(
            later_update_in_flight(old, 30, later(1, true)),
            InFlightEffect::KilledAgain {
                base_grace_seconds: 0
            }
        );
        assert!(matches!(
            later_update_in_flight(old, 30, later(3, false)),
            InFlightEffect::Ignored { .. }
        ));
    }

    #[test]
    fn kill_pod_now_wait() {
        for (g, want) in [
            (0, 10),
            (1, 10),
            (6, 10),
            (7, 10),
            (30, 45),
            (31, 46),
            (-1, 10),
        ] {
            assert_eq!(kill_pod_now_wait_seconds(Some(g), Some(99)), want, "g={g}");
        }
        assert_eq!(kill_pod_now_wait_seconds(None, Some(30)), 45);
        assert_eq!(kill_pod_now_wait_seconds(None, None), 10);
    }
}
