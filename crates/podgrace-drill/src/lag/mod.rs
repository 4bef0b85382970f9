//! `podgrace lag deployment/web --target URL`: the real endpoint lag of a workload, measured
//! through the Kubernetes API against any cluster (`podgrace serve` is one; nothing here is
//! special to it).
//!
//! Each trial deletes one pod of the Deployment whose preStop keeps it serving, and measures
//! from the moment the API marks it terminating to the last request it answered ([`reading`]),
//! while a prober sends requests to the target on new connections ([`probe`]), each answer
//! naming its pod in a response header (the demo app's `x-podgrace-pod`, or `--pod-header`).
//!
//! The preStop: when the container's preStop is known to keep the pod serving at least
//! [`LagConfig::prestop_seconds`] (a sleep action, an exec `sleep N`), it is used as is;
//! otherwise one is patched into the Deployment's template (the sleep action from Kubernetes
//! 1.30, else an exec `sleep N`, which needs a `sleep` in the image), with
//! terminationGracePeriodSeconds raised to fit it, which rolls the Deployment out; the original
//! is patched back by [`restore`] (a second rollout). A lag at the end of the preStop is only a
//! lower bound (`censored`): the pod stopped serving, not the routes.

pub mod probe;
pub mod reading;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use podgrace_core::manifest;

use crate::endpoints::LagPreset;
use probe::{ProbeConfig, Prober};
use reading::Summary;

/// How often the state is looked at while waiting (rollouts, trials).
const POLL: Duration = Duration::from_millis(50);

/// How far back "answering now" looks.
const RECENT: Duration = Duration::from_secs(3);

/// `podgrace lag`'s settings.
#[derive(Debug, Clone)]
pub struct LagConfig {
    /// The Deployment's namespace.
    pub namespace: String,
    /// The Deployment's name.
    pub deployment: String,
    /// Trials (`--trials`, default 5).
    pub trials: u32,
    /// The prober.
    pub probe: ProbeConfig,
    /// The container whose preStop keeps the pod serving (`--container`; default the first).
    pub container: Option<String>,
    /// The least time, whole seconds, the preStop must keep the pod serving: an existing one at
    /// least this long is used, else a sleep of this long is patched in (`--prestop-seconds`).
    pub prestop_seconds: i64,
    /// Added to the p99 lag for the recommended preStop sleep (`--margin`).
    pub margin: Duration,
    /// A trial ends this long after the pod's last answer (`--quiet`); longer than a probe's
    /// timeout.
    pub quiet: Duration,
    /// The longest wait for a rollout or for the pods to answer (`--timeout`).
    pub timeout: Duration,
}

/// Which preStop keeps the pods serving.
#[derive(Debug, Clone, PartialEq)]
pub enum PreStopUse {
    /// The container's own, known to last at least `seconds`.
    Existing {
        /// The container.
        container: String,
        /// Its least length, seconds.
        seconds: f64,
        /// What it is (`sleep action`, `exec sleep`).
        what: String,
    },
    /// Patched in.
    Patched {
        /// The container.
        container: String,
        /// Its length, seconds.
        seconds: i64,
        /// `sleep` (the sleep action) or `exec` (`sleep N`).
        action: &'static str,
        /// terminationGracePeriodSeconds before and after the patch.
        grace: (i64, i64),
    },
}

impl PreStopUse {
    /// How long it keeps the pod serving, seconds.
    pub fn seconds(&self) -> f64 {
        match self {
            PreStopUse::Existing { seconds, .. } => *seconds,
            PreStopUse::Patched { seconds, .. } => *seconds as f64,
        }
    }
}

/// The Deployment made ready for the trials, and how to put it back.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The preStop used.
    pub pre_stop: PreStopUse,
    /// The strategic merge patch that restores the template (`None`: nothing was patched).
    restore: Option<Value>,
    /// The pods' label selector (`app=web`).
    selector: String,
}

impl Prepared {
    /// The strategic merge patch that puts the template back (`None`: nothing was patched),
    /// for the user to apply by hand when [`restore`] could not
    /// (`kubectl patch deployment/web -p PATCH`).
    pub fn restore_patch(&self) -> Option<&Value> {
        self.restore.as_ref()
    }
}

/// One trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    /// The pod deleted.
    pub pod: String,
    /// When the API marked it terminating, seconds since the prober started (the delete
    /// call's midpoint).
    pub marked_at: Duration,
    /// The delete call's round trip: the mark's uncertainty is half of it.
    pub delete_round_trip: Duration,
    /// The lag measured.
    pub lag: Duration,
    /// Probes it answered after the mark.
    pub answered_after_mark: usize,
    /// The lag reached the end of its preStop: the true lag is at least this.
    pub censored: bool,
}

/// What `podgrace lag` measured.
#[derive(Debug, Clone, PartialEq)]
pub struct LagReport {
    /// The preStop used.
    pub pre_stop: PreStopUse,
    /// Every trial.
    pub trials: Vec<Trial>,
    /// Over the trials.
    pub summary: Option<Summary>,
    /// The margin added to p99.
    pub margin: Duration,
    /// The README's presets beside the measurement: name, lag, the preStop sleep it calls for.
    pub presets: Vec<(&'static str, Duration, u64)>,
}

/// Why `podgrace lag` cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum LagError {
    /// An API call failed.
    #[error("{doing}: {source}")]
    Api {
        /// What podgrace was doing.
        doing: String,
        /// The client's error (print it as kubectl would with `podgrace_cluster::api_error`).
        #[source]
        source: kube::Error,
    },
    /// Something about the Deployment makes the measurement impossible.
    #[error("{0}")]
    Unsuitable(String),
    /// A wait ran out.
    #[error("{0}")]
    Timeout(String),
    /// No answer names its pod.
    #[error("no response of {url} names its pod in header {header} (seen {seen} answers in {waited:?}): the demo app sets it (demo-app --pod-name, or POD_NAME from the downward API); for another app, name a header that carries the pod's name with --pod-header")]
    NoAttribution {
        /// The target.
        url: String,
        /// The header looked for.
        header: String,
        /// Answers seen.
        seen: usize,
        /// How long podgrace waited.
        waited: Duration,
    },
    /// The target cannot be reached at all.
    #[error("--target {0}: {1}")]
    Target(String, std::io::Error),
}

fn api(doing: impl Into<String>) -> impl FnOnce(kube::Error) -> LagError {
    let doing = doing.into();
    move |source| LagError::Api { doing, source }
}

/// A label selector string from the Deployment's `spec.selector.matchLabels` and
/// `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`).
fn selector_string(d: &Deployment) -> String {
    let sel = &d.spec.selector;
    let mut parts: Vec<String> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in sel.match_expressions.iter().flatten() {
        let vals = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({vals})", e.key),
            "NotIn" => format!("{} notin ({vals})", e.key),
            "DoesNotExist" => format!("!{}", e.key),
            _ => e.key.clone(),
        });
    }
    parts.join(",")
}

/// Whether the Deployment has rolled out: observed, every replica updated and available, no
/// old replica left (kubectl rollout status's test).
fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let gen = d.metadata.generation.unwrap_or(0);
    let Some(st) = &d.status else {
        return false;
    };
    st.observed_generation.unwrap_or(0) >= gen
        && st.updated_replicas.unwrap_or(0) == want
        && st.replicas.unwrap_or(0) == want
        && st.available_replicas.unwrap_or(0) == want
}

fn ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The Deployment `cfg` names, made ready: checked (at least 2 replicas, the container), its
/// preStop chosen or patched in. It returns as soon as the patch is accepted, so that the
/// caller holds what [`restore`] needs before anything can go wrong; [`rolled_out_patch`] then
/// waits for the rollout the patch starts. `server_minor`: the server's minor version (the
/// sleep action needs 1.30).
///
/// # Errors
/// API failures; a Deployment with fewer than 2 replicas or without the container (then
/// nothing was patched).
pub async fn prepare(
    client: &kube::Client,
    cfg: &LagConfig,
    server_minor: u32,
    say: &mut dyn FnMut(String),
) -> Result<Prepared, LagError> {
    // As typed, escaped as kubectl sends it: a name or namespace no object has is a 404 here,
    // and nothing later runs.
    use podgrace_cluster::resources::path_segment;
    let deployments: kube::Api<Deployment> =
        kube::Api::namespaced(client.clone(), &path_segment(&cfg.namespace));
    let d = deployments
        .get(&path_segment(&cfg.deployment))
        .await
        .map_err(api(format!("reading deployment/{}", cfg.deployment)))?;
    let replicas = d.spec.replicas.unwrap_or(1);
    if replicas < 2 {
        return Err(LagError::Unsuitable(format!(
            "deployment/{} has {replicas} replica(s): with fewer than 2, the terminating pod is the only endpoint and keeps its traffic until its replacement is ready, which is not the endpoint lag; scale it to 2 or more (kubectl scale deployment/{} --replicas=2)",
            cfg.deployment, cfg.deployment
        )));
    }
    let containers = d
        .spec
        .template
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let index = match &cfg.container {
        Some(name) => containers
            .iter()
            .position(|c| &c.name == name)
            .ok_or_else(|| {
                LagError::Unsuitable(format!(
                    "deployment/{} has no container {name:?} (it has {})",
                    cfg.deployment,
                    containers
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?,
        None => 0,
    };
    let Some(container) = containers.get(index) else {
        return Err(LagError::Unsuitable(format!(
            "deployment/{} has no container",
            cfg.deployment
        )));
    };
    if cfg.container.is_none() && containers.len() > 1 {
        say(format!(
            "container {} (the first of {}; --container picks another)",
            container.name,
            containers.len()
        ));
    }
    let name = container.name.clone();
    // What the termination rules know of its preStop: the least time it runs.
    let text = serde_json::to_string(&d).unwrap_or_default();
    let existing = manifest::load(&text, "deployment")
        .ok()
        .and_then(|m| m.pods().next().cloned())
        .and_then(|plan| {
            plan.containers
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.pre_stop.clone())
        })
        .and_then(|h| {
            let what = match &h {
                podgrace_core::plan::Handler::Sleep { .. } => "sleep action",
                _ => "exec sleep",
            };
            h.min_duration().map(|s| (s.as_f64(), what.to_string()))
        });
    let selector = selector_string(&d);
    if let Some((seconds, what)) = existing.filter(|(s, _)| *s >= cfg.prestop_seconds as f64) {
        say(format!(
            "preStop: container {name}'s own ({what}, at least {seconds} s) keeps each pod serving; nothing is patched"
        ));
        return Ok(Prepared {
            pre_stop: PreStopUse::Existing {
                container: name,
                seconds,
                what,
            },
            restore: None,
            selector,
        });
    }
    let tgps = d
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    let secs = cfg.prestop_seconds;
    // The sleep must fit in the grace (the API refuses a longer one), with time to drain after.
    let new_tgps = tgps.max(secs + 5);
    let (action, pre_stop) = if server_minor >= 30 {
        ("sleep", json!({"sleep": {"seconds": secs}}))
    } else {
        (
            "exec",
            json!({"exec": {"command": ["sleep", secs.to_string()]}}),
        )
    };
    // Strategic merge patches: containers merge by name; a handler type set to null is
    // removed, so the preStop holds exactly one.
    let handlers = |keep: Option<&Value>| -> Value {
        let mut h = json!({"exec": null, "httpGet": null, "tcpSocket": null, "sleep": null});
        if let Some(Value::Object(m)) = keep {
            for (k, v) in m {
                h[k] = v.clone();
            }
        }
        h
    };
    let original_pre_stop = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .map(|p| serde_json::to_value(p).unwrap_or(Value::Null));
    let template = |c: Value, grace: i64| {
        json!({"spec": {"template": {"spec": {
            "terminationGracePeriodSeconds": grace,
            "containers": [c],
        }}}})
    };
    let patch = template(
        json!({"name": name, "lifecycle": {"preStop": handlers(Some(&pre_stop))}}),
        new_tgps,
    );
    let restore = template(
        match (&container.lifecycle, &original_pre_stop) {
            (None, _) => json!({"name": name, "lifecycle": null}),
            (Some(_), None) => json!({"name": name, "lifecycle": {"preStop": null}}),
            (Some(_), Some(p)) => {
                json!({"name": name, "lifecycle": {"preStop": handlers(Some(p))}})
            }
        },
        tgps,
    );
    let grace = if new_tgps == tgps {
        format!("terminationGracePeriodSeconds {tgps} fits it")
    } else {
        format!("terminationGracePeriodSeconds {tgps} → {new_tgps}")
    };
    say(format!(
        "preStop: container {name} has none that keeps it serving {secs} s: patching in {} ({grace}); a rollout now, and another to restore it afterwards",
        if action == "sleep" {
            format!("the sleep action of {secs} s")
        } else {
            format!("exec [sleep, {secs}] (Kubernetes before 1.30 has no sleep action; the image needs a sleep binary)")
        }
    ));
    strategic(
        &deployments,
        &cfg.deployment,
        patch,
        "patching in the preStop",
    )
    .await?;
    Ok(Prepared {
        pre_stop: PreStopUse::Patched {
            container: name,
            seconds: secs,
            action,
            grace: (tgps, new_tgps),
        },
        restore: Some(restore),
        selector,
    })
}

/// A strategic merge patch of the Deployment.
async fn strategic(
    deployments: &kube::Api<Deployment>,
    name: &str,
    patch: Value,
    doing: &str,
) -> Result<(), LagError> {
    deployments
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map(|_| ())
        .map_err(api(format!("{doing} (deployment/{name})")))
}

/// Waits until the Deployment has rolled out ([`rolled_out`]).
async fn wait_rollout(
    deployments: &kube::Api<Deployment>,
    name: &str,
    timeout: Duration,
) -> Result<(), LagError> {
    let until = tokio::time::Instant::now() + timeout;
    loop {
        let d = deployments
            .get(name)
            .await
            .map_err(api(format!("reading deployment/{name}")))?;
        if rolled_out(&d) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            return Err(LagError::Timeout(format!(
                "deployment/{name} did not finish rolling out within {timeout:?}"
            )));
        }
        tokio::time::sleep(POLL * 4).await;
    }
}

/// Waits until the rollout [`prepare`]'s patch started is over (at once when nothing was
/// patched).
///
/// # Errors
/// API failures; a rollout that does not finish within the timeout.
pub async fn rolled_out_patch(
    client: &kube::Client,
    cfg: &LagConfig,
    prepared: &Prepared,
) -> Result<(), LagError> {
    if prepared.restore.is_none() {
        return Ok(());
    }
    let deployments: kube::Api<Deployment> = kube::Api::namespaced(client.clone(), &cfg.namespace);
    wait_rollout(&deployments, &cfg.deployment, cfg.timeout).await
}

/// Restores what [`prepare`] patched (a rollout) and waits for it.
///
/// # Errors
/// API failures; a rollout that does not finish within the timeout.
pub async fn restore(
    client: &kube::Client,
    cfg: &LagConfig,
    prepared: &Prepared,
) -> Result<bool, LagError> {
    let Some(patch) = prepared.restore.clone() else {
        return Ok(false);
    };
    let deployments: kube::Api<Deployment> = kube::Api::namespaced(client.clone(), &cfg.namespace);
    strategic(
        &deployments,
        &cfg.deployment,
        patch,
        "restoring the preStop",
    )
    .await?;
    wait_rollout(&deployments, &cfg.deployment, cfg.timeout).await?;
    Ok(true)
}

/// The pods of the Deployment that are ready and answered within [`RECENT`], most answers
/// first.
async fn answering_pods(
    pods: &kube::Api<Pod>,
    selector: &str,
    prober: &Prober,
) -> Result<(Vec<String>, usize), LagError> {
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(api("listing the deployment's pods"))?;
    let ready: Vec<String> = list
        .items
        .iter()
        .filter(|p| ready(p))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let records = prober.records();
    let seen = records.iter().filter(|p| p.status.is_some()).count();
    let since = prober.now().saturating_sub(RECENT);
    let answering = reading::answering(&records, since)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| ready.contains(p))
        .collect();
    Ok((answering, seen))
}

/// Runs the trials: for each, waits until the Deployment is whole and at least two of its
/// ready pods answer, deletes the one that answered most, and reads its lag.
///
/// # Errors
/// API failures; no answer naming a pod within the timeout ([`LagError::NoAttribution`]);
/// the Deployment not whole again within the timeout.
pub async fn measure(
    client: &kube::Client,
    cfg: &LagConfig,
    prepared: &Prepared,
    prober: &Prober,
    on_trial: &mut dyn FnMut(&Trial),
) -> Result<LagReport, LagError> {
    let deployments: kube::Api<Deployment> = kube::Api::namespaced(client.clone(), &cfg.namespace);
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), &cfg.namespace);
    let prestop = prepared.pre_stop.seconds();
    let mut trials = Vec::new();
    for _ in 0..cfg.trials {
        // Whole again: rolled out, and two of its ready pods answering.
        let start = tokio::time::Instant::now();
        let victim = loop {
            let d = deployments
                .get(&cfg.deployment)
                .await
                .map_err(api(format!("reading deployment/{}", cfg.deployment)))?;
            let (answering, seen) = answering_pods(&pods, &prepared.selector, prober).await?;
            if rolled_out(&d) && answering.len() >= 2 {
                break answering[0].clone();
            }
            if start.elapsed() >= cfg.timeout {
                if answering.is_empty() && !prober.records().iter().any(|p| p.pod.is_some()) {
                    return Err(LagError::NoAttribution {
                        url: cfg.probe.target.url.clone(),
                        header: cfg.probe.pod_header.to_string(),
                        seen,
                        waited: cfg.timeout,
                    });
                }
                return Err(LagError::Timeout(format!(
                    "deployment/{} is not whole with two of its ready pods answering at {} within {:?} (answering: {})",
                    cfg.deployment,
                    cfg.probe.target.url,
                    cfg.timeout,
                    if answering.is_empty() { "none".to_string() } else { answering.join(", ") }
                )));
            }
            tokio::time::sleep(POLL * 4).await;
        };
        let before = prober.now();
        pods.delete(&victim, &DeleteParams::default())
            .await
            .map_err(api(format!("deleting pod/{victim}")))?;
        let after = prober.now();
        let mark = before + (after - before) / 2;
        let cap = mark + Duration::from_secs_f64(prestop) + cfg.quiet + Duration::from_secs(30);
        let r = loop {
            tokio::time::sleep(POLL).await;
            let r = reading::read(&prober.records(), &victim, mark);
            let now = prober.now();
            if reading::over(&r, mark, now, cfg.quiet) || now >= cap {
                break r;
            }
        };
        let trial = Trial {
            pod: victim,
            marked_at: mark,
            delete_round_trip: after - before,
            censored: r.lag.as_secs_f64() >= prestop - 0.5,
            lag: r.lag,
            answered_after_mark: r.answered_after_mark,
        };
        on_trial(&trial);
        trials.push(trial);
    }
    let lags: Vec<Duration> = trials.iter().map(|t| t.lag).collect();
    let presets = [LagPreset::InCluster, LagPreset::Ingress, LagPreset::CloudLb]
        .into_iter()
        .map(|p| {
            let name = match p {
                LagPreset::InCluster => "in-cluster",
                LagPreset::Ingress => "ingress",
                LagPreset::CloudLb => "cloud-lb",
            };
            (
                name,
                p.lag(),
                reading::recommended_prestop_seconds(p.lag(), cfg.margin),
            )
        })
        .collect();
    Ok(LagReport {
        pre_stop: prepared.pre_stop.clone(),
        summary: reading::summarize(&lags, cfg.margin),
        trials,
        margin: cfg.margin,
        presets,
    })
}

/// Starts the prober of `cfg`.
///
/// # Errors
/// [`LagError::Target`] when the target's host cannot be resolved.
pub async fn start_prober(cfg: &LagConfig) -> Result<Prober, LagError> {
    Prober::start(cfg.probe.clone())
        .await
        .map_err(|e| LagError::Target(cfg.probe.target.url.clone(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_of_deployments() {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"}
            ]}, "template": {}}
        }))
        .unwrap();
        assert_eq!(selector_string(&d), "app=web,tier in (a,b),!canary");
    }

    #[test]
    fn a_rollout_is_over_when_every_replica_is_new_and_available() {
        let d = |gen: i64,
                 observed: i64,
                 updated: i32,
                 replicas: i32,
                 available: i32|
         -> Deployment {
            serde_json::from_value(json!({
                "metadata": {"name": "web", "generation": gen},
                "spec": {"replicas": 2, "selector": {}, "template": {}},
                "status": {"observedGeneration": observed, "updatedReplicas": updated, "replicas": replicas, "availableReplicas": available}
            }))
            .unwrap()
        };
        assert!(rolled_out(&d(2, 2, 2, 2, 2)));
        assert!(!rolled_out(&d(3, 2, 2, 2, 2)));
        assert!(!rolled_out(&d(2, 2, 2, 3, 2)));
        assert!(!rolled_out(&d(2, 2, 1, 2, 2)));
        assert!(!rolled_out(&d(2, 2, 2, 2, 1)));
    }
}
