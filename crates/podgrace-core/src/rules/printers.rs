//! The API server's table printer for pods: the READY, STATUS and RESTARTS columns that
//! `kubectl get pods` shows (kubectl asks the server for a `Table`; the server's version
//! decides the wording).
//!
//! Recorded on 1.32 (`shared/cases/real-cluster-1.32.md`, case a): `1/1 Running`, then
//! `1/1 Terminating` from the delete, then `0/1 Error` once the kubelet reported phase Failed,
//! while the object still had its deletion timestamp; `0/1 Completed` after an exit 0.
//!
//! Source: `pkg/printers/internalversion/printers.go` `printPod` (read at the 1.36 tree).

use crate::rules::apiserver::PodPhase;
use crate::rules::podstatus::{ContainerState, ContainerStatus};
use crate::KubeVersion;

/// The first release whose printer shows `Terminating` only while the phase is not terminal
/// (a deleted pod that has Failed shows `Error`, one that has Succeeded `Completed`). Before
/// it, any pod with a deletion timestamp showed `Terminating`.
///
/// PR #122038 ("show pod Status as phase Failed or Succeeded if it has deletionTimestamp"),
/// reviewed in May 2024 and merged for 1.31; the release is inferred from those dates
/// (confidence: medium). The recorded 1.32 cluster shows the new behaviour.
pub const TERMINATING_ONLY_WHILE_NOT_TERMINAL_SINCE: KubeVersion = KubeVersion::new(1, 31);

/// `node.NodeUnreachablePodReason`: a pod whose node is lost shows `Unknown` once deleted.
pub const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

/// What `printPod` reads of a pod. Times are milliseconds on one axis with `now_ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodForPrint {
    /// `metadata.name`.
    pub name: String,
    /// `spec.containers` count.
    pub containers: usize,
    /// `spec.initContainers` in order: name and whether it is a native sidecar.
    pub init_containers: Vec<(String, bool)>,
    /// `status.phase` as the API spells it (any string; the printer shows it as is).
    pub phase: String,
    /// `status.reason`; empty when not set.
    pub reason: String,
    /// `metadata.deletionTimestamp` is set.
    pub deletion_timestamp: bool,
    /// The `PodScheduled` condition has reason `SchedulingGated`.
    pub scheduling_gated: bool,
    /// The `Initialized` condition is `True`.
    pub initialized: bool,
    /// The `Ready` condition is `True` (`hasPodReadyCondition`).
    pub ready_condition: bool,
    /// `status.initContainerStatuses`, in spec order.
    pub init_container_statuses: Vec<ContainerStatus>,
    /// `status.containerStatuses`, in spec order.
    pub container_statuses: Vec<ContainerStatus>,
    /// `metadata.creationTimestamp`, milliseconds; `None` prints `<unknown>`.
    pub created_ms: Option<i64>,
}

/// One row of `kubectl get pods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRow {
    /// `NAME`: the pod's `metadata.name`.
    pub name: String,
    /// `READY`: ready containers / containers (native sidecars counted).
    pub ready: String,
    /// `STATUS`.
    pub status: String,
    /// `RESTARTS`: the count, with `(AGE ago)` of the last restart when known.
    pub restarts: String,
    /// `AGE`.
    pub age: String,
}

/// `printPod`: the row of one pod at `now_ms`.
///
/// STATUS is the phase, else `status.reason`; `SchedulingGated`; an init container's
/// `Init:N/M`, `Init:REASON`, `Init:ExitCode:N` or `Init:Signal:N`; else, walking the regular
/// containers from the last to the first, a waiting reason or a terminated reason
/// (`ExitCode:N`, `Signal:N` when it has none), with `Completed` turned back into `Running`
/// (a container still runs and the pod is Ready), the reason of a non-zero exit, or
/// `NotReady`; finally `Unknown` for a deleted pod on a lost node and `Terminating` for a
/// deleted pod, from [`TERMINATING_ONLY_WHILE_NOT_TERMINAL_SINCE`] only while its phase is not
/// Succeeded or Failed.
///
/// Source: `pkg/printers/internalversion/printers.go` `printPod` (1.36 tree). Vectors:
/// `printers_test.go` `TestPrintPod`.
pub fn print_pod(pod: &PodForPrint, now_ms: i64, version: KubeVersion) -> PodRow {
    let mut restarts: i64 = 0;
    let mut restartable_restarts: i64 = 0;
    let mut total = pod.containers;
    let mut ready = 0;
    let mut last_restart: Option<i64> = None;
    let mut last_restartable_restart: Option<i64> = None;
    let mut reason = if pod.reason.is_empty() {
        pod.phase.clone()
    } else {
        pod.reason.clone()
    };
    if pod.scheduling_gated {
        reason = "SchedulingGated".into();
    }
    let later = |cur: Option<i64>, t: Option<i64>| match (cur, t) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (None, b) => b,
        (a, None) => a,
    };
    total += pod.init_containers.iter().filter(|(_, r)| *r).count();
    let restartable = |name: &str| {
        pod.init_containers
            .iter()
            .any(|(n, r)| *r && n.as_str() == name)
    };
    let mut initializing = false;
    for (i, c) in pod.init_container_statuses.iter().enumerate() {
        restarts += i64::from(c.restart_count);
        let finished = c.last_terminated.as_ref().and_then(|t| t.finished_at_ms);
        last_restart = later(last_restart, finished);
        let sidecar = restartable(&c.name);
        if sidecar {
            restartable_restarts += i64::from(c.restart_count);
            last_restartable_restart = later(last_restartable_restart, finished);
        }
        match &c.state {
            ContainerState::Terminated(t) if t.exit_code == 0 => continue,
            _ if sidecar && c.started == Some(true) => {
                if c.ready {
                    ready += 1;
                }
                continue;
            }
            ContainerState::Terminated(t) => {
                reason = if !t.reason.is_empty() {
                    format!("Init:{}", t.reason)
                } else if t.signal != 0 {
                    format!("Init:Signal:{}", t.signal)
                } else {
                    format!("Init:ExitCode:{}", t.exit_code)
                };
                initializing = true;
            }
            ContainerState::Waiting { reason: w } if !w.is_empty() && w != "PodInitializing" => {
                reason = format!("Init:{w}");
                initializing = true;
            }
            _ => {
                reason = format!("Init:{i}/{}", pod.init_containers.len());
                initializing = true;
            }
        }
        break;
    }
    if !initializing || pod.initialized {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        let mut error_reason = String::new();
        for c in pod.container_statuses.iter().rev() {
            restarts += i64::from(c.restart_count);
            let finished = c.last_terminated.as_ref().and_then(|t| t.finished_at_ms);
            last_restart = later(last_restart, finished);
            match &c.state {
                ContainerState::Waiting { reason: w } if !w.is_empty() => reason = w.clone(),
                ContainerState::Terminated(t) => {
                    reason = if !t.reason.is_empty() {
                        t.reason.clone()
                    } else if t.signal != 0 {
                        format!("Signal:{}", t.signal)
                    } else {
                        format!("ExitCode:{}", t.exit_code)
                    };
                    if t.exit_code != 0 {
                        error_reason = reason.clone();
                    }
                }
                ContainerState::Running if c.ready => {
                    has_running = true;
                    ready += 1;
                }
                _ => {}
            }
        }
        if reason == "Completed" {
            if has_running && pod.ready_condition {
                reason = "Running".into();
            } else if !error_reason.is_empty() {
                reason = error_reason;
            } else if has_running {
                reason = "NotReady".into();
            }
        }
    }
    let terminal = PodPhase::parse(&pod.phase).is_some_and(PodPhase::is_terminal);
    if pod.deletion_timestamp && pod.reason == NODE_UNREACHABLE_POD_REASON {
        reason = "Unknown".into();
    } else if pod.deletion_timestamp
        && (!terminal || version < TERMINATING_ONLY_WHILE_NOT_TERMINAL_SINCE)
    {
        reason = "Terminating".into();
    }
    let mut restarts_str = restarts.to_string();
    if let (true, Some(t)) = (restarts != 0, last_restart) {
        restarts_str = format!(
            "{restarts} ({} ago)",
            human_duration(now_ms.saturating_sub(t))
        );
    }
    PodRow {
        name: pod.name.clone(),
        ready: format!("{ready}/{total}"),
        status: reason,
        restarts: restarts_str,
        age: pod
            .created_ms
            .map(|c| human_duration(now_ms.saturating_sub(c)))
            .unwrap_or_else(|| "<unknown>".into()),
    }
}

/// `duration.HumanDuration`: how kubectl prints an age, from milliseconds. `<invalid>` below
/// -1 s, `0s` for a small negative; seconds below 2 minutes; `XmYs` below 10 minutes (`Xm`
/// when Y is 0); minutes below 3 hours; `XhYm` below 8 hours; hours below 48 hours; `XdYh`
/// below 8 days; days below 2 years; `XyYd` below 8 years; years beyond.
///
/// Source: `staging/src/k8s.io/apimachinery/pkg/util/duration/duration.go` `HumanDuration`
/// (Kubernetes 1.18 to 1.37).
pub fn human_duration(ms: i64) -> String {
    // int(d.Seconds()) truncates toward zero.
    let secs = ms / 1000;
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 60 * 2 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = (secs % 3600) / 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::podstatus::Terminated;

    fn pod(phase: &str, dt: bool, state: ContainerState, ready: bool) -> PodForPrint {
        PodForPrint {
            name: "term-a".into(),
            containers: 1,
            phase: phase.into(),
            deletion_timestamp: dt,
            container_statuses: vec![ContainerStatus {
                name: "app".into(),
                state,
                ready,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_recorded_table_of_case_a() {
        let v = KubeVersion::new(1, 32);
        let row = |p: &PodForPrint| {
            let r = print_pod(p, 0, v);
            format!("{} {}", r.ready, r.status)
        };
        let mut p = pod("Running", false, ContainerState::Running, true);
        p.ready_condition = true;
        assert_eq!(row(&p), "1/1 Running");
        p.deletion_timestamp = true;
        assert_eq!(row(&p), "1/1 Terminating");
        let error = ContainerState::Terminated(Terminated {
            exit_code: 137,
            reason: "Error".into(),
            ..Default::default()
        });
        let failed = pod("Failed", true, error.clone(), false);
        assert_eq!(row(&failed), "0/1 Error");
        // Before 1.31 the deleted pod shows Terminating until it is gone.
        assert_eq!(
            print_pod(&failed, 0, KubeVersion::new(1, 30)).status,
            "Terminating"
        );
    }

    #[test]
    fn human_durations() {
        // -1.5 s truncates to -1 s: "0s", as Go's int(d.Seconds()).
        assert_eq!(human_duration(-1500), "0s");
        for (s, want) in [
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (48 * 3600, "2d"),
            (49 * 3600, "2d1h"),
            (8 * 86400, "8d"),
            (2 * 365 * 86400, "2y"),
            (2 * 365 * 86400 + 86400, "2y1d"),
            (8 * 365 * 86400, "8y"),
        ] {
            assert_eq!(human_duration(s * 1000), want, "{s}");
        }
    }
}
