//! Events as kube-controller-manager's event recorders write them: core/v1 Events with
//! `source.component` (and `reportingComponent`) the controller's name, count 1, first and
//! last timestamps, and a name `OBJECT.HEX` unique per event.
//!
//! Upstream: `staging/src/k8s.io/client-go/tools/record/event.go` (`makeEvent`,
//! `generateEvent`), the controllers' `eventBroadcaster.NewRecorder(... {Component: ...})`.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;

/// `deployment-controller`.
pub const DEPLOYMENT_CONTROLLER: &str = "deployment-controller";
/// `replicaset-controller`.
pub const REPLICASET_CONTROLLER: &str = "replicaset-controller";
/// `endpointslice-controller`.
pub const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller";
/// The disruption controller's source: `controllermanager` (upstream's `NewRecorder` in
/// `pkg/controller/disruption/disruption.go`, not `disruption-controller`).
pub const DISRUPTION_CONTROLLER: &str = "controllermanager";
/// `garbage-collector-controller`.
pub const GC_CONTROLLER: &str = "garbage-collector-controller";

/// One controller's recorder.
#[derive(Clone)]
pub struct Recorder {
    client: kube::Client,
    component: &'static str,
}

impl Recorder {
    /// A recorder reporting as `component`.
    pub fn new(client: kube::Client, component: &'static str) -> Recorder {
        Recorder { client, component }
    }

    /// Writes one Event about the object `(api_version, kind, meta)`; `type_` is `Normal` or
    /// `Warning`. A failed write is logged and dropped, as the recorder does.
    pub async fn event(
        &self,
        api_version: &str,
        kind: &str,
        meta: &ObjectMeta,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        let ns = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let now_ns = jiff::Timestamp::now().as_nanosecond();
        let name = meta.name.clone().unwrap_or_default();
        let now = podgrace_core::rules::podutil::ms_time(crate::now_ms());
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now_ns)),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
                name: Some(name),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            source: Some(EventSource {
                component: Some(self.component.into()),
                host: None,
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            type_: Some(type_.into()),
            reporting_component: Some(self.component.into()),
            reporting_instance: Some(String::new()),
            ..Default::default()
        };
        let api: kube::Api<Event> = kube::Api::namespaced(self.client.clone(), &ns);
        if let Err(e) = api.create(&PostParams::default(), &ev).await {
            tracing::debug!("event {reason}: {e}");
        }
    }
}
