//! Kubelet-style events with monotonic timestamps.
//!
//! Every report podgrace prints is built from these. An [`EventRecorder`] keeps every event in
//! order and hands each one to its subscribers (a lossless, unbounded channel each, so a CLI can
//! print live lines); [`EventRecorder::events`] is a snapshot.
//!
//! The reasons are the kubelet's own strings (`pkg/kubelet/events/event.go`, Kubernetes 1.20 to
//! 1.37), and the [`message`] functions reproduce the wording of the places that emit them, so
//! a podgrace run reads like `kubectl describe pod`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;

/// `v1.EventTypeNormal` / `v1.EventTypeWarning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `Normal`: an expected step (`Killing`, `Started`, `Pulled` ...).
    Normal,
    /// `Warning`: something failed (`FailedPreStopHook`, `Unhealthy`, `BackOff` ...).
    Warning,
}

impl EventType {
    /// `"Normal"` or `"Warning"`, as the API spells them.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One event. `at` is monotonic (compare it with the run's start `Instant`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When it was recorded (monotonic clock).
    pub at: Instant,
    /// `Normal` or `Warning`.
    pub kind: EventType,
    /// One of the [`reason`] constants.
    pub reason: &'static str,
    /// The container the event is about (`involvedObject.fieldPath`), `None` for pod events.
    pub container: Option<String>,
    /// The kubelet's message, worded as upstream's.
    pub message: String,
}

/// The kubelet's event reasons, from `pkg/kubelet/events/event.go` (1.20 to 1.37) unless noted.
pub mod reason {
    /// `CreatedContainer` (Normal), see [`super::message::created`].
    pub const CREATED: &str = "Created";
    /// `StartedContainer` (Normal), see [`super::message::started`].
    pub const STARTED: &str = "Started";
    /// `KillingContainer` (Normal), see [`super::message::killing`].
    pub const KILLING: &str = "Killing";
    /// `BackOffStartContainer` (Warning), see [`super::message::back_off`].
    pub const BACK_OFF: &str = "BackOff";
    /// `ExceededGracePeriod` (Warning), see [`super::message::EXCEEDED_GRACE_PERIOD`].
    pub const EXCEEDED_GRACE_PERIOD: &str = "ExceededGracePeriod";
    /// `ContainerUnhealthy` (Warning): a probe attempt failed or errored.
    pub const UNHEALTHY: &str = "Unhealthy";
    /// `ContainerProbeWarning` (Warning): a probe succeeded with a warning (e.g. a redirect to
    /// another host was not followed).
    pub const PROBE_WARNING: &str = "ProbeWarning";
    /// `FailedToCreateContainer` and `FailedToStartContainer` (Warning), both `"Failed"`, see
    /// [`super::message::failed`].
    pub const FAILED: &str = "Failed";
    /// `FailedPostStartHook` (Warning), message [`super::message::FAILED_POST_START_HOOK`].
    pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
    /// `FailedPreStopHook` (Warning), message [`super::message::FAILED_PRE_STOP_HOOK`].
    pub const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
    /// Warning recorded by `pkg/kubelet/lifecycle/handlers.go` `runHTTPHandler` (a literal
    /// there, not a constant of `event.go`; Kubernetes 1.26+), see
    /// [`super::message::lifecycle_http_fallback`].
    pub const LIFECYCLE_HTTP_FALLBACK: &str = "LifecycleHTTPFallback";
    /// `PullingImage` (Normal), see [`super::message::pulling`].
    pub const PULLING: &str = "Pulling";
    /// `PulledImage` (Normal), see [`super::message::pulled`], [`super::message::image_present`].
    pub const PULLED: &str = "Pulled";
    /// `ErrImageNeverPullPolicy` (Warning), see [`super::message::image_never_pull`].
    pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
    /// `MissingClusterDNS` (Warning, `pkg/kubelet/network/dns/dns.go` `GetPodDNS`), see
    /// [`crate::kubelet::cri::missing_cluster_dns_message`].
    pub const MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";
    /// A volume could not be set up (`events.FailedMountVolume`, the volume manager's
    /// `MountVolume.SetUp failed for volume ...`).
    pub const FAILED_MOUNT: &str = "FailedMount";
    /// `FailedToInspectImage` (Warning), see [`super::message::failed_to_inspect`].
    pub const INSPECT_FAILED: &str = "InspectFailed";
    /// `BackOffPullImage` (Normal; the same reason as [`BACK_OFF`]), see
    /// [`super::message::back_off_pulling`].
    pub const BACK_OFF_PULL_IMAGE: &str = "BackOff";
}

/// Why a container the kubelet could not create waits: the `reason` of its waiting state, the
/// error `startContainer` returned (`reasonCache`; `pkg/kubelet/images/types.go`,
/// `pkg/kubelet/kuberuntime/kuberuntime_container.go`), also the `Error: REASON` of its
/// `Failed` event for the image errors. Kubernetes 1.20 to 1.37.
pub mod waiting {
    /// `ErrImagePull`: the pull failed.
    pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
    /// `ImagePullBackOff`: a pull failed less than the image back-off ago.
    pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
    /// `ErrImageNeverPull`: absent with `imagePullPolicy: Never`.
    pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
    /// `ImageInspectError`: `ImageStatus` failed.
    pub const IMAGE_INSPECT_ERROR: &str = "ImageInspectError";
    /// `CreateContainerConfigError`: the container's config could not be made (its mounts).
    pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";
    /// `CreateContainerError`: CRI `CreateContainer` failed.
    pub const CREATE_CONTAINER_ERROR: &str = "CreateContainerError";
}

/// The kubelet's event messages, each with the upstream place that emits it.
pub mod message {
    /// `Killing`: `"Stopping container NAME"`, the default of `killContainer`
    /// (`pkg/kubelet/kuberuntime/kuberuntime_container.go`) when no message is given.
    pub fn killing(container: &str) -> String {
        format!("Stopping container {container}")
    }

    /// `Killing` for a probe-initiated kill: `"Container NAME failed liveness probe, will be
    /// restarted"` (`kuberuntime_manager.go` `computePodActions`; `probe` is `"liveness"` or
    /// `"startup"`; the `, will be restarted` suffix only when the container restarts).
    pub fn killing_after_probe(container: &str, probe: &str, will_restart: bool) -> String {
        let mut m = format!("Container {container} failed {probe} probe");
        if will_restart {
            m.push_str(", will be restarted");
        }
        m
    }

    /// `Killing` for a container whose definition (image) changed: `"Container NAME definition
    /// changed, will be restarted"` (`kuberuntime_manager.go` `computePodActions`; it restarts
    /// whatever the restart policy).
    pub fn definition_changed(container: &str) -> String {
        format!("Container {container} definition changed, will be restarted")
    }

    /// `Killing` for a native sidecar whose definition changed: `"Init container NAME
    /// definition changed"` (`kuberuntime_container.go` `computeInitContainerActions`).
    pub fn init_definition_changed(container: &str) -> String {
        format!("Init container {container} definition changed")
    }

    /// `Created`: `"Created container: NAME"` (`kuberuntime_container.go` `startContainer`,
    /// Kubernetes 1.32+; earlier `"Created container NAME"`).
    pub fn created(container: &str) -> String {
        format!("Created container: {container}")
    }

    /// `Started`: `"Started container NAME"` (`kuberuntime_container.go` `startContainer`).
    pub fn started(container: &str) -> String {
        format!("Started container {container}")
    }

    /// `BackOff`: `"Back-off restarting failed container NAME in pod POD"`
    /// (`kuberuntime_manager.go` `doBackOff`; `pod` formatted as [`crate::hooks::format_pod`]).
    pub fn back_off(container: &str, pod: &str) -> String {
        format!("Back-off restarting failed container {container} in pod {pod}")
    }

    /// `Failed`: `"Error: ERR"`, the runtime's error when creating or starting a container
    /// failed (`kuberuntime_container.go` `startContainer`).
    pub fn failed(error: &impl std::fmt::Display) -> String {
        format!("Error: {error}")
    }

    /// `ExceededGracePeriod` on the pod (`pkg/kubelet/pod_workers.go` `killPodNow`).
    pub const EXCEEDED_GRACE_PERIOD: &str =
        "Container runtime did not kill the pod within specified grace period.";

    /// `FailedPreStopHook`: the output is deliberately left out "so that secrets won't leak"
    /// (`kuberuntime_container.go` `executePreStopHook`).
    pub const FAILED_PRE_STOP_HOOK: &str = "PreStopHook failed";

    /// `FailedPostStartHook`, same rule (`kuberuntime_container.go` `startContainer`).
    pub const FAILED_POST_START_HOOK: &str = "PostStartHook failed";

    /// `Unhealthy` for a failed attempt: `"Liveness probe failed: OUTPUT"`
    /// (`pkg/kubelet/prober/prober.go` `probe`; `probe` is `Liveness`, `Readiness`, `Startup`).
    pub fn probe_failed(probe: &str, output: &str) -> String {
        format!("{probe} probe failed: {output}")
    }

    /// `Unhealthy` for an attempt that errored 3 times: `"Liveness probe errored and resulted
    /// in unknown state: ERROR"` (`prober.go` `probe`, Kubernetes 1.28+).
    pub fn probe_errored(probe: &str, error: &str) -> String {
        format!("{probe} probe errored and resulted in unknown state: {error}")
    }

    /// `ProbeWarning`: `"Readiness probe warning: OUTPUT"` (`prober.go` `probe`).
    pub fn probe_warning(probe: &str, output: &str) -> String {
        format!("{probe} probe warning: {output}")
    }

    /// `Pulling`: `"Pulling image \"IMAGE\""` (`pkg/kubelet/images/image_manager.go`
    /// `pullImage`).
    pub fn pulling(image: &str) -> String {
        format!("Pulling image {image:?}")
    }

    /// `Pulled` after a pull: `"Successfully pulled image \"IMAGE\" in 1.2s (1.2s including
    /// waiting). Image size: N bytes."` (`image_manager.go` `pullImage`, Kubernetes 1.29+; Go's
    /// duration format). podgrace pulls one image at a time, so both durations are the pull's.
    pub fn pulled(image: &str, took: std::time::Duration, size_bytes: u64) -> String {
        let d = go_duration(took);
        format!("Successfully pulled image {image:?} in {d} ({d} including waiting). Image size: {size_bytes} bytes.")
    }

    /// `Pulled` without a pull: `"Container image \"IMAGE\" already present on machine"`
    /// (`image_manager.go` `EnsureImageExists`; from 1.35, with KubeletEnsureSecretPulledImages
    /// on by default, `... and can be accessed by the pod`).
    pub fn image_present(image: &str, version: podgrace_core::KubeVersion) -> String {
        if version.kubelet_ensure_secret_pulled_images() {
            format!("Container image {image:?} already present on machine and can be accessed by the pod")
        } else {
            format!("Container image {image:?} already present on machine")
        }
    }

    /// `ErrImageNeverPull`: `"Container image \"IMAGE\" is not present with pull policy of
    /// Never"` (`image_manager.go` `imageNotPresentOnNeverPolicyError`).
    pub fn image_never_pull(image: &str) -> String {
        format!("Container image {image:?} is not present with pull policy of Never")
    }

    /// `Failed` after a failed pull: `"Failed to pull image \"IMAGE\": ERR"`, ERR as grpc-go
    /// prints it (`rpc error: code = Unknown desc = ...`; `image_manager.go`
    /// `EnsureImageExists`).
    pub fn failed_to_pull(image: &str, error: &impl std::fmt::Display) -> String {
        format!("Failed to pull image {image:?}: {error}")
    }

    /// `BackOff` while a failed pull's back-off runs: `"Back-off pulling image \"IMAGE\""`
    /// (`image_manager.go` `EnsureImageExists`).
    pub fn back_off_pulling(image: &str) -> String {
        format!("Back-off pulling image {image:?}")
    }

    /// `InspectFailed`: `"Failed to inspect image \"REF\": ERR"` (`image_manager.go`
    /// `imagePullPrecheck`). Upstream formats the image reference `GetImageRef` returned, which
    /// is empty when it failed, so the event reads `Failed to inspect image "": ...`.
    pub fn failed_to_inspect(image_ref: &str, error: &impl std::fmt::Display) -> String {
        format!("Failed to inspect image {image_ref:?}: {error}")
    }

    /// Go's `time.Duration.String()` for durations under an hour: `1.234567s`, `523.1ms`,
    /// `2m3.5s`.
    pub fn go_duration(d: std::time::Duration) -> String {
        let ns = d.as_nanos();
        let trim = |int: u128, frac: u128, digits: usize| {
            let f = format!("{frac:0digits$}");
            let f = f.trim_end_matches('0');
            if f.is_empty() {
                int.to_string()
            } else {
                format!("{int}.{f}")
            }
        };
        if ns == 0 {
            "0s".into()
        } else if ns < 1_000 {
            format!("{ns}ns")
        } else if ns < 1_000_000 {
            format!("{}µs", trim(ns / 1_000, ns % 1_000, 3))
        } else if ns < 1_000_000_000 {
            format!("{}ms", trim(ns / 1_000_000, ns % 1_000_000, 6))
        } else if ns < 60_000_000_000 {
            format!("{}s", trim(ns / 1_000_000_000, ns % 1_000_000_000, 9))
        } else {
            let m = ns / 60_000_000_000;
            let r = ns % 60_000_000_000;
            format!("{m}m{}s", trim(r / 1_000_000_000, r % 1_000_000_000, 9))
        }
    }

    /// `LifecycleHTTPFallback`: `"request to HTTPS lifecycle hook HOST:PORT got HTTP response,
    /// retry with HTTP succeeded"` (`pkg/kubelet/lifecycle/handlers.go` `runHTTPHandler`).
    pub fn lifecycle_http_fallback(host_port: &str) -> String {
        format!("request to HTTPS lifecycle hook {host_port} got HTTP response, retry with HTTP succeeded")
    }
}

struct Inner {
    events: Vec<Event>,
    subscribers: Vec<mpsc::UnboundedSender<Event>>,
}

/// Stores every event and hands it to every subscriber. Cheap to clone (an `Arc`); all clones
/// share one log. `Send + Sync`.
#[derive(Clone)]
pub struct EventRecorder {
    inner: Arc<Mutex<Inner>>,
}

impl Default for EventRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("events", &self.lock().events.len())
            .finish()
    }
}

impl EventRecorder {
    /// An empty log.
    pub fn new() -> Self {
        EventRecorder {
            inner: Arc::new(Mutex::new(Inner {
                events: Vec::new(),
                subscribers: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an event stamped now and returns it. Subscribers that went away are dropped.
    pub fn record(
        &self,
        kind: EventType,
        reason: &'static str,
        container: Option<&str>,
        message: impl Into<String>,
    ) -> Event {
        let event = Event {
            at: Instant::now(),
            kind,
            reason,
            container: container.map(str::to_owned),
            message: message.into(),
        };
        let mut inner = self.lock();
        inner.events.push(event.clone());
        inner.subscribers.retain(|s| s.send(event.clone()).is_ok());
        event
    }

    /// [`EventRecorder::record`] with [`EventType::Normal`].
    pub fn normal(
        &self,
        reason: &'static str,
        container: Option<&str>,
        message: impl Into<String>,
    ) -> Event {
        self.record(EventType::Normal, reason, container, message)
    }

    /// [`EventRecorder::record`] with [`EventType::Warning`].
    pub fn warning(
        &self,
        reason: &'static str,
        container: Option<&str>,
        message: impl Into<String>,
    ) -> Event {
        self.record(EventType::Warning, reason, container, message)
    }

    /// A receiver that first yields every event recorded so far, then each later one, in order;
    /// none is lost (unbounded). Dropping it unsubscribes.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inner = self.lock();
        for e in &inner.events {
            let _ = tx.send(e.clone());
        }
        inner.subscribers.push(tx);
        rx
    }

    /// Every event so far, in the order recorded.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_is_send_sync_and_clone() {
        fn check<T: Send + Sync + Clone>() {}
        check::<EventRecorder>();
    }

    #[tokio::test]
    async fn subscribers_get_history_then_live_events_in_order() {
        let rec = EventRecorder::new();
        rec.normal(reason::KILLING, Some("app"), message::killing("app"));
        let mut rx = rec.subscribe();
        let clone = rec.clone();
        clone.warning(
            reason::FAILED_PRE_STOP_HOOK,
            Some("app"),
            message::FAILED_PRE_STOP_HOOK,
        );
        let a = rx.recv().await.expect("history");
        let b = rx.recv().await.expect("live");
        assert_eq!(a.message, "Stopping container app");
        assert_eq!(a.kind, EventType::Normal);
        assert_eq!(b.reason, "FailedPreStopHook");
        assert_eq!(b.kind, EventType::Warning);
        assert!(a.at <= b.at);
        assert_eq!(rec.events().len(), 2);
    }

    #[test]
    fn dropped_subscribers_are_forgotten() {
        let rec = EventRecorder::new();
        drop(rec.subscribe());
        rec.normal(reason::STARTED, Some("a"), message::started("a"));
        assert!(rec.lock().subscribers.is_empty());
    }

    #[test]
    fn kubelet_wordings() {
        assert_eq!(
            message::killing_after_probe("web", "liveness", true),
            "Container web failed liveness probe, will be restarted"
        );
        assert_eq!(
            message::probe_failed("Readiness", "HTTP probe failed with statuscode: 503"),
            "Readiness probe failed: HTTP probe failed with statuscode: 503"
        );
        assert_eq!(
            message::back_off("web", "p_default(uid)"),
            "Back-off restarting failed container web in pod p_default(uid)"
        );
        assert_eq!(message::created("c"), "Created container: c");
        assert_eq!(message::started("c"), "Started container c");
    }
}
