//! The latencies a real container runtime adds around the kubelet's calls, as measured, and a
//! seeded sampler that draws from them.
//!
//! podgrace's own process runtime adds none (its stop signal leaves microseconds after the
//! StopContainer call, its SIGKILL 1–4 ms after the deadline; README "run: stop-signal and
//! SIGKILL lateness"). A real containerd adds tens of milliseconds to every step and, most
//! visibly, returns from StopContainer well after the container has died: the kubelet stops a
//! native sidecar only then, so the sidecar outlives the app. `explain --runtime containerd`
//! shows these as ranges on the timeline; `run --runtime-latency containerd` makes the process
//! runtime wait them out, each drawn from its recorded range by a [`Sampler`] (seeded, so a
//! test or a rerun with the same seed sees the same delays).

use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

use crate::Seconds;

/// A recorded latency: its range in milliseconds and, when recorded, its median.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The shortest recorded value, milliseconds.
    pub min_ms: i64,
    /// The recorded median, if the source gives one (the distribution is skewed then).
    pub median_ms: Option<i64>,
    /// The longest recorded value, milliseconds.
    pub max_ms: i64,
}

/// One measured latency of a runtime, with where the figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    /// Stable id (camelCase), as in JSON.
    pub id: &'static str,
    /// What is late, in a few words.
    pub what: &'static str,
    /// The recorded range, milliseconds.
    pub range: Range,
    /// Where the figure comes from.
    pub source: &'static str,
}

/// The latencies of one runtime around the kubelet's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeLatencies {
    /// The runtime and version measured, as shown to users.
    pub runtime: &'static str,
    /// From the StopContainer call to the stop signal reaching the container's PID 1.
    pub stop_signal_after_call: Latency,
    /// From the StopContainer deadline (call + timeout) to the container's death by SIGKILL.
    pub kill_after_deadline: Latency,
    /// From the container's death to StopContainer returning to the kubelet (a native sidecar
    /// waiting for this container gets its stop signal only then).
    pub stop_returns_after_exit: Latency,
    /// From a container's death to its restart starting (a liveness-probe restart).
    pub restart_after_exit: Latency,
}

impl RuntimeLatencies {
    /// The four latencies, in the order the timeline meets them.
    pub fn all(&self) -> [&Latency; 4] {
        [
            &self.stop_signal_after_call,
            &self.kill_after_deadline,
            &self.stop_returns_after_exit,
            &self.restart_after_exit,
        ]
    }
}

/// containerd 1.6.20 with runc 1.1.5 under a kubelet v1.32.13 on this project's kind of
/// machine (cgroup v1), measured with real kubectl (`shared/cases/real-cluster-1.32.md` and
/// issue 19 "Fidelity against a real cluster", item 3).
pub const CONTAINERD_1_6: RuntimeLatencies = RuntimeLatencies {
    runtime: "containerd 1.6.20 (runc 1.1.5)",
    stop_signal_after_call: Latency {
        id: "stopSignalAfterStopContainer",
        what: "stop signal after the StopContainer call",
        range: Range {
            min_ms: 8,
            median_ms: None,
            max_ms: 10,
        },
        source: "real-cluster-1.32.md case a (preStop end +3126 ms, SIGTERM received +3134 ms) and case d (SIGTERM about 10 ms after the preStop); issue 19: about 10 ms",
    },
    kill_after_deadline: Latency {
        id: "exitAfterDeadline",
        what: "death by SIGKILL after the StopContainer deadline",
        range: Range {
            min_ms: 20,
            median_ms: None,
            max_ms: 30,
        },
        source: "issue 19: the exit was reported 20-30 ms after the deadline; real-cluster-1.32.md case a (StopContainer about +3126 ms with timeout 2, exit 137 at +5145 ms)",
    },
    stop_returns_after_exit: Latency {
        id: "stopContainerReturnsAfterExit",
        what: "StopContainer returns after the container died",
        range: Range {
            min_ms: 38,
            median_ms: Some(72),
            max_ms: 2900,
        },
        source: "issue 19: the main container's StopContainer returned 38 ms to 2.9 s (median 72 ms) after it died, and only then did the kubelet stop the native sidecar",
    },
    restart_after_exit: Latency {
        id: "restartAfterExit",
        what: "a restart starts after the container died",
        range: Range {
            min_ms: 114,
            median_ms: None,
            max_ms: 822,
        },
        source: "issue 19: a liveness-probe restart started 114-822 ms after the death (mostly the kubelet's 1 s PLEG relist)",
    },
};

/// The runtimes whose latencies podgrace has measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuntimeProfile {
    /// [`CONTAINERD_1_6`].
    Containerd,
}

impl RuntimeProfile {
    /// The measured latencies of this runtime.
    pub fn latencies(self) -> &'static RuntimeLatencies {
        match self {
            RuntimeProfile::Containerd => &CONTAINERD_1_6,
        }
    }
}

impl fmt::Display for RuntimeProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuntimeProfile::Containerd => "containerd",
        })
    }
}

/// A runtime name podgrace has no measurements for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown runtime {0:?}: podgrace has measured latencies for containerd only")]
pub struct ParseRuntimeProfileError(pub String);

impl FromStr for RuntimeProfile {
    type Err = ParseRuntimeProfileError;

    /// `containerd`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "containerd" => Ok(RuntimeProfile::Containerd),
            _ => Err(ParseRuntimeProfileError(s.to_string())),
        }
    }
}

/// A latency in the `explain` JSON: seconds (exact milliseconds) and its source.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyJson {
    /// Stable id (camelCase), as in [`Latency::id`].
    pub id: &'static str,
    /// What is late, in a few words.
    pub what: &'static str,
    /// The shortest recorded value, seconds (exact milliseconds in JSON).
    pub min_seconds: Seconds,
    /// The recorded median, seconds, when the source gives one.
    pub median_seconds: Option<Seconds>,
    /// The longest recorded value, seconds (exact milliseconds in JSON).
    pub max_seconds: Seconds,
    /// Where the figure comes from (a case file, a benchmark, an upstream issue).
    pub source: &'static str,
}

impl From<&Latency> for LatencyJson {
    fn from(l: &Latency) -> Self {
        LatencyJson {
            id: l.id,
            what: l.what,
            min_seconds: Seconds::from_ms(l.range.min_ms.into()),
            median_seconds: l.range.median_ms.map(|m| Seconds::from_ms(m.into())),
            max_seconds: Seconds::from_ms(l.range.max_ms.into()),
            source: l.source,
        }
    }
}

/// Draws latencies from recorded ranges, deterministically for a seed.
///
/// A range without a median is drawn uniformly. A range with one is drawn below the median
/// half of the time and above it otherwise, log-uniformly within each part, so that the draws
/// keep the recorded minimum, median and maximum (38 ms, 72 ms, 2.9 s is mostly short, with
/// a long tail).
#[derive(Debug, Clone)]
pub struct Sampler {
    rng: SmallRng,
}

impl Sampler {
    /// A sampler whose draws are fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Sampler {
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// One draw from `range`, in milliseconds, within `[min_ms, max_ms]`.
    pub fn sample(&mut self, range: &Range) -> i64 {
        let (lo, hi) = (
            range.min_ms.min(range.max_ms),
            range.max_ms.max(range.min_ms),
        );
        let (a, b) = match range.median_ms {
            Some(m) if (lo..=hi).contains(&m) => {
                if self.rng.random_bool(0.5) {
                    (lo, m)
                } else {
                    (m, hi)
                }
            }
            _ => return self.rng.random_range(lo..=hi),
        };
        if a <= 0 || a == b {
            return self.rng.random_range(a..=b);
        }
        let (la, lb) = ((a as f64).ln(), (b as f64).ln());
        let x = (la + (lb - la) * self.rng.random::<f64>()).exp().round() as i64;
        x.clamp(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_range_keep_the_median_and_repeat_for_a_seed() {
        let r = CONTAINERD_1_6.stop_returns_after_exit.range;
        let mut s = Sampler::new(7);
        let mut draws: Vec<i64> = (0..2001).map(|_| s.sample(&r)).collect();
        assert!(draws.iter().all(|d| (38..=2900).contains(d)));
        let again: Vec<i64> = {
            let mut s = Sampler::new(7);
            (0..2001).map(|_| s.sample(&r)).collect()
        };
        assert_eq!(draws, again);
        draws.sort_unstable();
        let median = draws[1000];
        assert!((60..=85).contains(&median), "median {median}");
        let u = CONTAINERD_1_6.restart_after_exit.range;
        let mut s = Sampler::new(1);
        assert!((0..500)
            .map(|_| s.sample(&u))
            .all(|d| (114..=822).contains(&d)));
    }

    #[test]
    fn only_containerd_is_known() {
        assert_eq!(
            "containerd".parse::<RuntimeProfile>(),
            Ok(RuntimeProfile::Containerd)
        );
        assert!("cri-o".parse::<RuntimeProfile>().is_err());
    }
}
