//! The controllers against podgrace's API server in-process, through kube-rs as they run in
//! `podgrace serve`. A test kubelet (a watcher here) writes what the kubelet would: a pod
//! bound to the node becomes Running and Ready with an IP; a pod marked for deletion is
//! deleted with grace 0 once the test lets it go (its containers having exited).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use podgrace_api::{Api as Server, ApiConfig};
use serde_json::json;

struct Cluster {
    client: kube::Client,
    _controllers: tokio::task::JoinSet<()>,
    /// Pods the test kubelet holds in Terminating (not deleted when marked).
    hold: Arc<Mutex<BTreeSet<String>>>,
}

fn start() -> Cluster {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = Server::new(ApiConfig::default());
    let client = podgrace_api::in_process_client(server);
    let controllers = podgrace_controllers::spawn(
        client.clone(),
        podgrace_controllers::Config {
            kube_version: podgrace_core::KubeVersion::default(),
        },
    );
    let hold = Arc::new(Mutex::new(BTreeSet::new()));
    tokio::spawn(kubelet(client.clone(), hold.clone()));
    Cluster {
        client,
        _controllers: controllers,
        hold,
    }
}

/// The test kubelet.
async fn kubelet(client: kube::Client, hold: Arc<Mutex<BTreeSet<String>>>) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut ips = 0u32;
    let mut seen = BTreeSet::new();
    // With the back-off a kubelet's watch has: a failed watch retried at once, without it,
    // spins and starves the runtime.
    let mut w =
        std::pin::pin!(watcher::watcher(pods, watcher::Config::default()).default_backoff());
    while let Some(ev) = w.next().await {
        let pod = match ev {
            Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => p,
            _ => continue,
        };
        let ns = pod.metadata.namespace.clone().unwrap();
        let name = pod.metadata.name.clone().unwrap();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        if pod.metadata.deletion_timestamp.is_some() {
            if !hold.lock().unwrap().contains(&name) {
                let _ = api
                    .delete(&name, &DeleteParams::default().grace_period(0))
                    .await;
            }
            continue;
        }
        if seen.insert(pod.metadata.uid.clone().unwrap()) {
            ips += 1;
            let now = jiff::Timestamp::now().to_string();
            let st = json!({"status": {"phase": "Running", "podIP": format!("10.0.0.{ips}"), "podIPs": [{"ip": format!("10.0.0.{ips}")}],
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
            let _ = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&st))
                .await;
        }
    }
}

/// Waits (events, not sleeps: re-checked on every change of the watched kind) until `check`
/// holds, at most 20 s.
async fn until<K, F>(client: &kube::Client, what: &str, mut check: F) -> Vec<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    F: FnMut(&[K]) -> bool,
{
    let api: Api<K> = Api::all(client.clone());
    let mut w =
        std::pin::pin!(watcher::watcher(api.clone(), watcher::Config::default()).default_backoff());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let items = api.list(&ListParams::default()).await.unwrap().items;
        if check(&items) {
            return items;
        }
        // The deadline holds even while changes keep coming (a stream that is always ready
        // would never let the timeout fire).
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}: {items:#?}");
        }
        match tokio::time::timeout_at(deadline, w.next()).await {
            Ok(_) => {}
            Err(_) => panic!("timed out waiting for {what}: {items:#?}"),
        }
    }
}

/// Deletes a released pod with grace 0, as its kubelet would once its containers exited. The test
/// kubelet may have removed it first (it acts on every change): gone is what is wanted either way.
async fn delete_now(pods: &Api<Pod>, name: &str) {
    match pods
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("delete {name}: {e}"),
    }
}

fn events_of(evs: &[Event], component: &str) -> Vec<String> {
    let mut v: Vec<&Event> = evs
        .iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(component))
        .collect();
    v.sort_by_key(|e| {
        e.metadata
            .creation_timestamp
            .clone()
            .map(|t| t.0)
            .unwrap_or_default()
    });
    v.iter()
        .map(|e| {
            format!(
                "{} {}",
                e.reason.clone().unwrap(),
                e.message.clone().unwrap()
            )
        })
        .collect()
}

fn deployment(replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": "app", "image": "busybox:1.36", "ports": [{"name": "http", "containerPort": 8080}]}]}}}
    }))
    .unwrap()
}

fn live(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicaset_creates_and_deletes_pods_with_the_controllers_events() {
    let c = start();
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}}
    }))
    .unwrap();
    let rss: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    rss.create(&PostParams::default(), &rs).await.unwrap();
    let pods = until::<Pod, _>(&c.client, "3 pods", |p| live(p).len() == 3).await;
    for p in &pods {
        assert!(p.metadata.name.as_ref().unwrap().starts_with("web-"));
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("ReplicaSet", Some(true))
        );
    }
    until::<ReplicaSet, _>(&c.client, "status 3 ready", |r| {
        r[0].status.as_ref().is_some_and(|s| {
            s.replicas == 3 && s.ready_replicas == Some(3) && s.available_replicas == Some(3)
        })
    })
    .await;
    // The scale subresource, as kubectl scale writes it.
    rss.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    until::<Pod, _>(&c.client, "1 pod", |p| p.len() == 1).await;
    let evs = until::<Event, _>(&c.client, "6 events", |e| {
        events_of(e, "replicaset-controller").len() == 5
    })
    .await;
    let words = events_of(&evs, "replicaset-controller");
    let created: Vec<&String> = words
        .iter()
        .filter(|w| w.starts_with("SuccessfulCreate Created pod: web-"))
        .collect();
    let deleted: Vec<&String> = words
        .iter()
        .filter(|w| w.starts_with("SuccessfulDelete Deleted pod: web-"))
        .collect();
    assert_eq!((created.len(), deleted.len()), (3, 2), "{words:?}");
    until::<ReplicaSet, _>(&c.client, "status 1", |r| {
        r[0].status
            .as_ref()
            .is_some_and(|s| s.replicas == 1 && s.observed_generation == Some(2))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_goes_in_upstreams_steps_and_completes() {
    let c = start();
    let ds: Api<Deployment> = Api::default_namespaced(c.client.clone());
    ds.create(&PostParams::default(), &deployment(2))
        .await
        .unwrap();
    let d = until::<Deployment, _>(&c.client, "rolled out", |d| {
        d[0].status
            .as_ref()
            .is_some_and(|s| s.available_replicas == Some(2) && s.updated_replicas == Some(2))
    })
    .await;
    assert_eq!(
        d[0].metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(
        d[0].metadata.generation,
        Some(1),
        "the revision annotation is written through status"
    );
    // kubectl rollout restart: a template annotation.
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-01T14:00:00Z"}}}}});
    ds.patch("web", &PatchParams::default(), &Patch::Merge(&restart))
        .await
        .unwrap();
    let d = until::<Deployment, _>(&c.client, "restart rolled out", |d| {
        let s = d[0].status.clone().unwrap_or_default();
        s.observed_generation == Some(2)
            && s.updated_replicas == Some(2)
            && s.available_replicas == Some(2)
            && s.replicas == Some(2)
            && s.conditions.iter().flatten().any(|c| {
                c.type_.as_deref() == Some("Progressing")
                    && c.reason.as_deref() == Some("NewReplicaSetAvailable")
            })
    })
    .await;
    let rsl = Api::<ReplicaSet>::default_namespaced(c.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        d[0].metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "2",
        "{:#?} {:#?}",
        d[0],
        rsl
    );
    let rss = until::<ReplicaSet, _>(&c.client, "old rs at 0", |r| {
        r.len() == 2 && r.iter().any(|x| x.spec.replicas == Some(0))
    })
    .await;
    let new = rss.iter().find(|r| r.spec.replicas == Some(2)).unwrap();
    let old = rss.iter().find(|r| r.spec.replicas == Some(0)).unwrap();
    let (new, old) = (
        new.metadata.name.clone().unwrap(),
        old.metadata.name.clone().unwrap(),
    );
    let evs: Api<Event> = Api::default_namespaced(c.client.clone());
    let words = events_of(
        &evs.list(&ListParams::default()).await.unwrap().items,
        "deployment-controller",
    );
    assert_eq!(
        words,
        vec![
            format!("ScalingReplicaSet Scaled up replica set {old} from 0 to 2"),
            format!("ScalingReplicaSet Scaled up replica set {new} from 0 to 1"),
            format!("ScalingReplicaSet Scaled down replica set {old} from 2 to 1"),
            format!("ScalingReplicaSet Scaled up replica set {new} from 1 to 2"),
            format!("ScalingReplicaSet Scaled down replica set {old} from 1 to 0"),
        ]
    );
    // The ReplicaSets' revisions, as kubectl rollout history and undo read them.
    let rev = |n: &str| {
        rss.iter()
            .find(|r| r.metadata.name.as_deref() == Some(n))
            .unwrap()
            .metadata
            .annotations
            .as_ref()
            .unwrap()["deployment.kubernetes.io/revision"]
            .clone()
    };
    assert_eq!((rev(&old), rev(&new)), ("1".to_string(), "2".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_scales_the_old_to_zero_and_waits_for_its_pods() {
    let c = start();
    let mut d = deployment(2);
    d.spec.strategy = Some(serde_json::from_value(json!({"type": "Recreate"})).unwrap());
    let ds: Api<Deployment> = Api::default_namespaced(c.client.clone());
    ds.create(&PostParams::default(), &d).await.unwrap();
    let pods = until::<Pod, _>(&c.client, "2 ready", |p| live(p).len() == 2).await;
    until::<Deployment, _>(&c.client, "available", |d| {
        d[0].status
            .as_ref()
            .is_some_and(|s| s.available_replicas == Some(2))
    })
    .await;
    // Hold the old pods in Terminating: the new ReplicaSet must not scale up meanwhile.
    for p in &pods {
        c.hold
            .lock()
            .unwrap()
            .insert(p.metadata.name.clone().unwrap());
    }
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}}}});
    ds.patch("web", &PatchParams::default(), &Patch::Strategic(&image))
        .await
        .unwrap();
    until::<Pod, _>(&c.client, "old terminating", |p| {
        p.len() == 2 && p.iter().all(|x| x.metadata.deletion_timestamp.is_some())
    })
    .await;
    let rss: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    let list = rss.list(&ListParams::default()).await.unwrap().items;
    assert!(
        list.iter().all(|r| r.spec.replicas == Some(0)),
        "nothing scales up while old pods run: {list:#?}"
    );
    c.hold.lock().unwrap().clear();
    let pods: Api<Pod> = Api::default_namespaced(c.client.clone());
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        delete_now(&pods, p.metadata.name.as_deref().unwrap()).await;
    }
    let now = until::<Pod, _>(&c.client, "2 new pods", |p| {
        live(p).len() == 2 && p.len() == 2
    })
    .await;
    for p in &now {
        assert_eq!(
            p.spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("busybox:1.37")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_garbage_collector_deletes_in_background_foreground_and_orphans() {
    let c = start();
    let ds: Api<Deployment> = Api::default_namespaced(c.client.clone());
    ds.create(&PostParams::default(), &deployment(2))
        .await
        .unwrap();
    until::<Pod, _>(&c.client, "2 pods", |p| live(p).len() == 2).await;

    // Orphan: the ReplicaSet stays, without its owner reference; the pods stay.
    ds.delete("web", &DeleteParams::orphan()).await.unwrap();
    until::<Deployment, _>(&c.client, "deployment gone", |d| d.is_empty()).await;
    let rss = until::<ReplicaSet, _>(&c.client, "rs orphaned", |r| {
        r.len() == 1
            && r[0]
                .metadata
                .owner_references
                .as_ref()
                .is_none_or(Vec::is_empty)
    })
    .await;
    let rs_name = rss[0].metadata.name.clone().unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.client.clone());
    assert_eq!(
        live(&pods.list(&ListParams::default()).await.unwrap().items).len(),
        2
    );

    // Foreground: the ReplicaSet waits (foregroundDeletion) until its pods are gone.
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        c.hold
            .lock()
            .unwrap()
            .insert(p.metadata.name.clone().unwrap());
    }
    let rsa: Api<ReplicaSet> = Api::default_namespaced(c.client.clone());
    rsa.delete(&rs_name, &DeleteParams::foreground())
        .await
        .unwrap();
    let r = until::<Pod, _>(&c.client, "pods terminating", |p| {
        p.len() == 2 && p.iter().all(|x| x.metadata.deletion_timestamp.is_some())
    })
    .await;
    let held = rsa.get(&rs_name).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(
        held.metadata.finalizers.as_deref(),
        Some(&["foregroundDeletion".to_string()][..])
    );
    c.hold.lock().unwrap().clear();
    for p in r {
        delete_now(&pods, p.metadata.name.as_deref().unwrap()).await;
    }
    until::<ReplicaSet, _>(&c.client, "rs gone", |r| r.is_empty()).await;

    // Background: the owner goes at once, the collector deletes the rest.
    ds.create(&PostParams::default(), &deployment(1))
        .await
        .unwrap();
    until::<Pod, _>(&c.client, "1 pod", |p| live(p).len() == 1).await;
    ds.delete("web", &DeleteParams::background()).await.unwrap();
    until::<ReplicaSet, _>(&c.client, "rs collected", |r| r.is_empty()).await;
    until::<Pod, _>(&c.client, "pods collected", |p| p.is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_and_slices_follow_the_pods() {
    let c = start();
    let node: Node = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "podgrace"}}),
    )
    .unwrap();
    Api::<Node>::all(c.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let svc: Service = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}}),
    )
    .unwrap();
    Api::<Service>::default_namespaced(c.client.clone())
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-pdb"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})).unwrap();
    Api::<PodDisruptionBudget>::default_namespaced(c.client.clone())
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();
    Api::<Deployment>::default_namespaced(c.client.clone())
        .create(&PostParams::default(), &deployment(2))
        .await
        .unwrap();

    let b = until::<PodDisruptionBudget, _>(&c.client, "budget counts 2", |b| {
        b[0].status
            .as_ref()
            .is_some_and(|s| s.current_healthy == Some(2) && s.disruptions_allowed == Some(1))
    })
    .await;
    let st = b[0].status.clone().unwrap();
    assert_eq!(
        (st.desired_healthy, st.expected_pods, st.observed_generation),
        (Some(1), Some(2), Some(1))
    );
    let cond = &st.conditions.unwrap()[0];
    assert_eq!(
        (
            cond.type_.as_str(),
            cond.status.as_str(),
            cond.reason.as_str()
        ),
        ("DisruptionAllowed", "True", "SufficientPods")
    );

    let slices = until::<EndpointSlice, _>(&c.client, "2 ready endpoints", |s| {
        s.len() == 1
            && s[0]
                .endpoints
                .iter()
                .flatten()
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .count()
                == 2
    })
    .await;
    let s = &slices[0];
    assert_eq!(s.address_type, "IPv4");
    assert_eq!(
        s.ports.as_ref().unwrap()[0].port,
        Some(8080),
        "the named target port resolved"
    );
    assert_eq!(
        s.metadata.labels.as_ref().unwrap()["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );

    // One pod terminating (held): ready false, serving true (still Ready), terminating true.
    let pods: Api<Pod> = Api::default_namespaced(c.client.clone());
    let victim = live(&pods.list(&ListParams::default()).await.unwrap().items)[0]
        .metadata
        .name
        .clone()
        .unwrap();
    c.hold.lock().unwrap().insert(victim.clone());
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    until::<EndpointSlice, _>(&c.client, "terminating endpoint", |s| {
        s[0].endpoints.iter().flatten().any(|e| {
            let k = e.conditions.clone().unwrap_or_default();
            e.target_ref.as_ref().and_then(|t| t.name.as_deref()) == Some(victim.as_str())
                && (k.ready, k.serving, k.terminating) == (Some(false), Some(true), Some(true))
        })
    })
    .await;
    // The budget no longer counts it; the replacement (Ready) brings it back to 2.
    until::<PodDisruptionBudget, _>(&c.client, "budget with the replacement", |b| {
        b[0].status
            .as_ref()
            .is_some_and(|s| s.current_healthy == Some(2) && s.expected_pods == Some(3))
    })
    .await;
}
