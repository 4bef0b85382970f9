//! The termination ordering of native sidecars, with real waits: each container has a
//! "terminated" flag; a sidecar waits for every main container and the next-declared sidecar.
//!
//! Upstream: `pkg/kubelet/kuberuntime/kuberuntime_termination_order.go`
//! (`newTerminationOrdering`, `waitForTurn`, `containerTerminated`; Kubernetes 1.29+). The
//! prerequisites come from the pure rule [`termination_ordering`].

use std::collections::HashMap;
use std::time::Duration;

use podgrace_core::rules::kuberuntime::{termination_ordering, OrderedContainer};
use tokio::sync::watch;
use tokio::time::Instant;

/// One ordering for one `killPod`.
#[derive(Debug)]
pub struct TerminationOrdering {
    terminated: HashMap<String, (watch::Sender<bool>, watch::Receiver<bool>)>,
    prerequisites: HashMap<String, Vec<String>>,
}

impl TerminationOrdering {
    /// Builds the ordering of `containers` (declaration order, init containers first);
    /// `running(name)` tells which containers run now: the others count as terminated already.
    pub fn new(containers: &[OrderedContainer], running: impl Fn(&str) -> bool) -> Self {
        let terminated = containers
            .iter()
            .map(|c| {
                let (tx, rx) = watch::channel(!running(&c.name));
                (c.name.clone(), (tx, rx))
            })
            .collect();
        let prerequisites = termination_ordering(containers).into_iter().collect();
        TerminationOrdering {
            terminated,
            prerequisites,
        }
    }

    /// `waitForTurn`: waits until every prerequisite of `name` has terminated, bounded by one
    /// timer of `grace_seconds`; a grace of 0 or less returns at once. Returns the time waited.
    pub async fn wait_for_turn(&self, name: &str, grace_seconds: i64) -> Duration {
        let start = Instant::now();
        if grace_seconds <= 0 {
            return Duration::ZERO;
        }
        let prereqs = self.prerequisites.get(name).cloned().unwrap_or_default();
        let all = async {
            for p in prereqs {
                if let Some((_, rx)) = self.terminated.get(&p) {
                    let mut rx = rx.clone();
                    // A dropped sender cannot happen while `self` lives.
                    let _ = rx.wait_for(|t| *t).await;
                }
            }
        };
        let bound = Duration::from_secs(u64::try_from(grace_seconds).unwrap_or(u64::MAX));
        let _ = tokio::time::timeout(bound, all).await;
        start.elapsed()
    }

    /// `containerTerminated`: releases the containers waiting on `name`.
    pub fn container_terminated(&self, name: &str) {
        if let Some((tx, _)) = self.terminated.get(name) {
            tx.send_replace(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sidecar(name: &str) -> OrderedContainer {
        OrderedContainer {
            name: name.into(),
            sidecar: true,
        }
    }

    fn main(name: &str) -> OrderedContainer {
        OrderedContainer {
            name: name.into(),
            sidecar: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sidecars_stop_in_reverse_order_after_the_mains() {
        // Upstream TestTerminationOrderingSidecarsInReverseOrder: each container exits 1.25 s
        // after its turn; waits truncate to 3/2/1/0.
        let cs = [sidecar("sc1"), sidecar("sc2"), sidecar("sc3"), main("main")];
        let o = std::sync::Arc::new(TerminationOrdering::new(&cs, |_| true));
        let mut tasks = Vec::new();
        for c in ["sc1", "sc2", "sc3", "main"] {
            let o = o.clone();
            tasks.push(tokio::spawn(async move {
                let waited = o.wait_for_turn(c, 30).await;
                tokio::time::sleep(Duration::from_millis(1250)).await;
                o.container_terminated(c);
                (c, waited.as_secs())
            }));
        }
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.unwrap());
        }
        assert_eq!(got, [("sc1", 3), ("sc2", 2), ("sc3", 1), ("main", 0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_is_bounded_by_the_grace_period() {
        let cs = [sidecar("proxy"), main("app")];
        let o = TerminationOrdering::new(&cs, |_| true);
        let waited = o.wait_for_turn("proxy", 2).await;
        assert_eq!(waited, Duration::from_secs(2));
        assert_eq!(o.wait_for_turn("proxy", 0).await, Duration::ZERO);
        let done = TerminationOrdering::new(&cs, |n| n != "app");
        assert_eq!(done.wait_for_turn("proxy", 30).await, Duration::ZERO);
    }
}
