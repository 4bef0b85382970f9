//! The `pods/eviction` subresource: a POST of a `policy/v1` Eviction evicts a pod unless the
//! PodDisruptionBudget that covers it allows no disruption (429, with the budget's words), as
//! `kubectl drain` and the drill's evict scenario use it. An admitted eviction records the pod
//! in the budget's `disruptedPods`, adds the `DisruptionTarget` condition to the pod (one
//! MODIFIED), then deletes it as a delete with the Eviction's options would (the pod's grace
//! period unless they set one).
//!
//! The decisions are podgrace-core's (`rules::disruption`: `can_ignore_pdb`, `pod_budget`,
//! `check_and_decrement`); this module reads and writes the store.
//!
//! Upstream: `pkg/registry/core/pod/storage/eviction.go` (`EvictionREST.Create`,
//! `addConditionAndDeletePod`, `getPodDisruptionBudgets`; conflicts on the budget retried, as
//! `retry.RetryOnConflict(EvictionsRetry)`). Wording recorded on a real 1.32 cluster
//! (`shared/cases/real-cluster-1.32.md` f).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use podgrace_core::rules::disruption::{self, PodBudget, Refusal};
use serde_json::{json, Value};

use crate::api::{Api, Written};
use crate::meta;
use crate::options::DeleteOptions;
use crate::resource::{self, Resource};
use crate::status::ApiError;
use crate::store::ReadAt;

fn refusal(r: Refusal) -> ApiError {
    if r.code == 403 {
        return ApiError::forbidden_message(r.message);
    }
    ApiError::too_many_requests(
        &r.message,
        r.retry_after_seconds.max(0) as u32,
        r.cause.as_deref(),
    )
}

fn success() -> Written {
    Written {
        object: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        code: 201,
        warnings: Vec::new(),
    }
}

/// The Eviction's `deleteOptions` as [`DeleteOptions`] (an Eviction without them deletes with
/// the pod's grace period).
fn delete_options(ev: &Value) -> DeleteOptions {
    let d = ev.get("deleteOptions").cloned().unwrap_or(Value::Null);
    DeleteOptions {
        present: true,
        grace_period_seconds: d.get("gracePeriodSeconds").and_then(Value::as_i64),
        propagation_policy: d
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string),
        orphan_dependents: d.get("orphanDependents").and_then(Value::as_bool),
        precondition_uid: d
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_rv: d
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        dry_run: d
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
    }
}

impl Api {
    /// `POST .../pods/NAME/eviction`.
    ///
    /// # Errors
    /// 400 for a body that is no Eviction of this pod, 404 for a missing pod, 429 when the
    /// budget allows no disruption (`Cannot evict pod as it would violate the pod's disruption
    /// budget.`), 403 for a budget in a bad state, 409 on failed preconditions.
    pub fn evict(
        &self,
        pods: &'static Resource,
        ns: &str,
        name: &str,
        body: &[u8],
    ) -> Result<Written, ApiError> {
        let unrecognized = |why: String| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type Eviction): {why}"
            ))
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(unrecognized(
                "couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)".into(),
            ));
        }
        let ev: Value = serde_json::from_slice(body).map_err(|e| {
            unrecognized(format!("couldn't get version/kind; json parse error: {e}"))
        })?;
        if let Some(k) = ev.get("kind").and_then(Value::as_str) {
            if k != "Eviction" {
                return Err(unrecognized(format!(
                    "no kind {k:?} is registered for the eviction"
                )));
            }
        }
        if let Some(av) = ev.get("apiVersion").and_then(Value::as_str) {
            if !matches!(av, "policy/v1" | "policy/v1beta1") {
                return Err(unrecognized(format!(
                    "no kind \"Eviction\" is registered for version {av:?}"
                )));
            }
        }
        if meta::name(&ev) != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let opts = delete_options(&ev);
        let pdbr = resource::find("policy", "v1", "poddisruptionbudgets").expect("pdbs are served");
        // EvictionsRetry: conflicts on the budget are retried (20 steps upstream).
        for _ in 0..20 {
            let pod_v = self.get(pods, ns, name)?;
            let pod: Pod = serde_json::from_value(pod_v.clone()).map_err(ApiError::internal)?;
            if disruption::can_ignore_pdb(&pod) {
                let mut o = opts.clone();
                if disruption::should_enforce_resource_version(&pod) && o.precondition_rv.is_none()
                {
                    o.precondition_rv = pod.metadata.resource_version.clone();
                }
                self.add_condition_and_delete(pods, ns, name, &o)?;
                return Ok(success());
            }
            let budgets = self.budgets_of(pdbr, ns, &pod);
            let refs: Vec<&PodDisruptionBudget> = budgets.iter().map(|(b, _)| b).collect();
            match disruption::pod_budget(&pod, &refs) {
                PodBudget::TooMany => {
                    return Ok(Written {
                        object: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.", "code": 500}),
                        code: 500,
                        warnings: Vec::new(),
                    });
                }
                PodBudget::Delete { precondition } => {
                    let mut o = opts.clone();
                    let user_rv = o.precondition_rv.is_some();
                    if precondition && !user_rv {
                        o.precondition_rv = pod.metadata.resource_version.clone();
                    }
                    return match self.add_condition_and_delete(pods, ns, name, &o) {
                        Err(e) if e.code == 409 && precondition && !user_rv => {
                            let pdb_name = refs
                                .first()
                                .and_then(|b| b.metadata.name.clone())
                                .unwrap_or_default();
                            Err(refusal(disruption::still_processing(&pdb_name)))
                        }
                        Err(e) => Err(e),
                        Ok(()) => Ok(success()),
                    };
                }
                PodBudget::Check => {
                    let (pdb, pdb_v) = &budgets[0];
                    let now_ms = jiff::Timestamp::now().as_millisecond();
                    let st = disruption::check_and_decrement(pdb, name, now_ms, opts.dry_run)
                        .map_err(refusal)?;
                    if !opts.dry_run {
                        let mut nv = pdb_v.clone();
                        nv["status"] = serde_json::to_value(&st).map_err(ApiError::internal)?;
                        let pname = pdb.metadata.name.clone().unwrap_or_default();
                        match self.store_replace(pdbr, ns, &pname, nv) {
                            Err(e) if e.code == 409 => continue,
                            Err(e) => return Err(e),
                            Ok(_) => {}
                        }
                    }
                    self.add_condition_and_delete(pods, ns, name, &opts)?;
                    return Ok(success());
                }
            }
        }
        Err(ApiError::new_timeout(
            "couldn't update PodDisruptionBudget due to conflicts",
        ))
    }

    /// The budgets of namespace `ns` whose selector selects `pod`.
    fn budgets_of(
        &self,
        pdbr: &'static Resource,
        ns: &str,
        pod: &Pod,
    ) -> Vec<(PodDisruptionBudget, Value)> {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let items: Vec<Value> = self.with_store(|s| {
            s.list(
                pdbr.storage,
                &format!("{ns}/"),
                None,
                0,
                ReadAt::Latest,
                |_| true,
            )
            .map(|p| p.items.iter().map(|(_, o)| o.value()).collect())
            .unwrap_or_default()
        });
        items
            .into_iter()
            .filter_map(|v| {
                let b: PodDisruptionBudget = serde_json::from_value(v.clone()).ok()?;
                let sel = b.spec.as_ref().and_then(|s| s.selector.as_ref());
                podgrace_core::rules::labels::selects(sel, &labels).then_some((b, v))
            })
            .collect()
    }

    /// `addConditionAndDeletePod`: the `DisruptionTarget` condition (unless a dry run), then
    /// the delete, with the options' preconditions checked against the latest pod.
    fn add_condition_and_delete(
        &self,
        pods: &'static Resource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(), ApiError> {
        let mut opts = opts.clone();
        if !opts.dry_run {
            let mut pod = self.get(pods, ns, name)?;
            let uid = meta::uid(&pod).to_string();
            let rv = pod
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(u) = opts.precondition_uid.as_deref().filter(|u| !u.is_empty()) {
                if u != uid {
                    return Err(ApiError::conflict_on("Pod", name, &format!("the UID in the precondition ({u}) does not match the UID in record ({uid}). The object might have been deleted and then recreated")));
                }
            }
            if let Some(want) = opts.precondition_rv.as_deref().filter(|r| !r.is_empty()) {
                if want != rv {
                    return Err(ApiError::conflict_on("Pod", name, &format!("the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({rv}). The object might have been modified")));
                }
            }
            let mut typed: Pod = serde_json::from_value(pod.clone()).map_err(ApiError::internal)?;
            let st = typed.status.get_or_insert_with(Default::default);
            let conds = st.conditions.get_or_insert_with(Vec::new);
            disruption::add_disruption_target(conds, jiff::Timestamp::now().as_millisecond());
            pod["status"]["conditions"] =
                serde_json::to_value(&*conds).map_err(ApiError::internal)?;
            let written = self.store_replace(pods, ns, name, pod)?;
            if opts.precondition_rv.is_some() {
                opts.precondition_rv = written
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
        }
        self.delete(pods, ns, name, &opts).map(|_| ())
    }
}
