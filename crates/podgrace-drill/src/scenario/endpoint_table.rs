//! The Service's endpoints as the EndpointSlice controller writes them from the drill's pod
//! statuses, and the feed that publishes their changes to the proxy with the lag.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use podgrace_node::kubelet::{PodStatus, PodWorkerState};
use tokio::sync::mpsc;

use crate::endpoints::{Endpoint, EndpointsHandle};

/// The endpoints of the Service as the EndpointSlice controller writes them: one per pod with
/// an IP that is not terminal (`ShouldPodBeInEndpoints` with terminating pods included), so a
/// new pod is listed `ready: false` as soon as its sandbox has an address, before its containers
/// run; `ready` / `serving` / `terminating` from the pod's Ready condition and its deletion
/// (`podToEndpoint`). A terminating pod keeps its Ready condition while its readiness probe
/// passes (the kubelet keeps probing until the containers have stopped), so its endpoint is
/// `ready: false, serving: true, terminating: true`; it is removed once the pod is terminal
/// (every container stopped), before the API object is gone. Recorded on a real 1.32 cluster
/// (`cases/real-cluster-1.32.md` d): the slice gained a new pod 77 ms after it was created
/// (ready=false), turned an old one r=F s=T t=T 17 ms after its deletionTimestamp, and dropped it
/// 6 ms after its phase went Succeeded.
pub(super) struct EndpointTable {
    port: u16,
    pods: BTreeMap<String, Endpoint>,
}

impl EndpointTable {
    /// An empty table of endpoints on `port`.
    pub(super) fn new(port: u16) -> Self {
        EndpointTable {
            port,
            pods: BTreeMap::new(),
        }
    }

    /// Applies pod `pod`'s status `st`.
    pub(super) fn update(&mut self, pod: &str, st: &PodStatus) {
        let Some(ip) = st.pod_ip else {
            return;
        };
        let phase = match st.phase {
            PodWorkerState::Starting => podgrace_core::rules::endpoints::PodPhase::Pending,
            PodWorkerState::Running | PodWorkerState::Terminating => {
                podgrace_core::rules::endpoints::PodPhase::Running
            }
            // The kubelet reports Succeeded or Failed once every container has stopped.
            PodWorkerState::Terminated => podgrace_core::rules::endpoints::PodPhase::Succeeded,
        };
        if !podgrace_core::rules::endpoints::should_pod_be_in_endpoints(
            phase,
            true,
            st.terminating_since.is_some(),
            true,
        ) {
            self.pods.remove(pod);
            return;
        }
        let address = SocketAddr::new(ip, self.port);
        let conditions = podgrace_core::rules::endpoints::pod_to_endpoint_conditions(
            st.ready,
            st.terminating_since.is_some(),
            false,
        );
        self.pods.insert(
            pod.to_string(),
            Endpoint {
                pod: pod.to_string(),
                address,
                ready: conditions.ready,
                serving: conditions.serving,
                terminating: conditions.terminating,
            },
        );
    }

    /// Applies every status change queued in `changes` now, without publishing any of them.
    pub(super) fn settle(&mut self, changes: &mut mpsc::UnboundedReceiver<(String, PodStatus)>) {
        while let Ok((pod, st)) = changes.try_recv() {
            self.update(&pod, &st);
        }
    }

    /// The endpoints now, by pod name.
    pub(super) fn set(&self) -> Vec<Endpoint> {
        self.pods.values().cloned().collect()
    }
}

/// Publishes every change of the table that `changes` makes (one per pod status that changes
/// an endpoint), each reaching the proxy after the lag.
pub(super) async fn feed_endpoints(
    mut changes: mpsc::UnboundedReceiver<(String, PodStatus)>,
    mut table: EndpointTable,
    endpoints: EndpointsHandle,
) {
    while let Some((pod, st)) = changes.recv().await {
        let before = table.set();
        table.update(&pod, &st);
        let after = table.set();
        if before != after {
            tracing::debug!(
                pod = %pod,
                phase = ?st.phase,
                ready = st.ready,
                terminating = st.terminating_since.is_some(),
                "endpoint change published"
            );
            endpoints.publish(after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;
    use std::time::Duration;

    fn status(phase: PodWorkerState, ip: u8, ready: bool) -> PodStatus {
        PodStatus {
            phase,
            pod_ip: Some(IpAddr::V4(Ipv4Addr::new(198, 18, 77, ip))),
            ready,
            terminating_since: None,
            grace_period_seconds: None,
            last_delete: None,
            killed: None,
            container_ids: Vec::new(),
        }
    }

    /// The statuses of two pods' start (not ready, then ready) are settled into the initial
    /// endpoints; the feeder then has nothing stale to publish, so the proxy never sees a set
    /// without a ready endpoint (a 503 that was counted before the stop signal in the drill).
    #[tokio::test(start_paused = true)]
    async fn the_start_of_the_pods_is_not_replayed_after_the_lag() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for (pod, ip) in [("web-1", 2), ("web-2", 3)] {
            for (phase, ready) in [
                (PodWorkerState::Starting, false),
                (PodWorkerState::Running, false),
                (PodWorkerState::Running, true),
            ] {
                tx.send((pod.to_string(), status(phase, ip, ready)))
                    .unwrap();
            }
        }
        let mut table = EndpointTable::new(8080);
        table.settle(&mut rx);
        let set = table.set();
        assert_eq!(set.len(), 2);
        assert!(set.iter().all(|e| e.ready), "{set:?}");

        let endpoints = EndpointsHandle::new(Duration::from_secs(1));
        endpoints.publish_now(set);
        let view = endpoints.view();
        let initial = view.routes();
        let feeder = tokio::spawn(feed_endpoints(rx, table, endpoints.clone()));
        // Through the lag and past it, the proxy keeps the initial routes: nothing of the
        // pods' start is published again.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            Arc::ptr_eq(&initial, &view.routes()),
            "routes were replaced"
        );
        // A real change still goes through, a lag after it happens.
        tx.send((
            "web-1".to_string(),
            status(PodWorkerState::Terminated, 2, false),
        ))
        .unwrap();
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(view.routes().targets.len(), 2);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(view.routes().targets.len(), 1);
        feeder.abort();
    }
}
