//! The `scale` subresource of Deployments and ReplicaSets (`autoscaling/v1` Scale: what
//! `kubectl scale` reads and patches) and the `binding` subresource of pods (what the scheduler
//! posts).
//!
//! Upstream: `pkg/registry/apps/deployment/storage/storage.go` and
//! `pkg/registry/apps/replicaset/storage/storage.go` (`ScaleREST.Get`, `ScaleREST.Update`,
//! `scaleFromDeployment`, `scaleUpdatedObjectInfo`), `pkg/apis/autoscaling/validation`
//! (`ValidateScale`), `pkg/registry/core/pod/storage/storage.go` (`BindingREST.Create`,
//! `assignPod`, `setPodNodeAndMetadata`).

use serde_json::{json, Value};

use crate::api::{Api, PatchType, Written};
use crate::meta;
use crate::patch;
use crate::registry::{Decoded, FieldValidation};
use crate::resource::Resource;
use crate::status::{ApiError, Cause};

/// The Scale of a Deployment or ReplicaSet `obj` (`scaleFromDeployment`).
pub fn scale_of(obj: &Value) -> Value {
    let sel: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector> = obj
        .pointer("/spec/selector")
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    let selector = podgrace_core::rules::labels::as_selector(sel.as_ref())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let m = obj.get("metadata").cloned().unwrap_or(json!({}));
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m.get("name").cloned().unwrap_or_default(),
            "namespace": m.get("namespace").cloned().unwrap_or_default(),
            "uid": m.get("uid").cloned().unwrap_or_default(),
            "resourceVersion": m.get("resourceVersion").cloned().unwrap_or_default(),
            "creationTimestamp": m.get("creationTimestamp").cloned().unwrap_or_default(),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

impl Api {
    /// `GET .../NAME/scale`.
    ///
    /// # Errors
    /// 404 when the object does not exist.
    pub fn get_scale(&self, r: &'static Resource, ns: &str, name: &str) -> Result<Value, ApiError> {
        Ok(scale_of(&self.get(r, ns, name)?))
    }

    /// `PUT .../NAME/scale` with a Scale body, or `PATCH` with a patch of the Scale.
    ///
    /// # Errors
    /// 400 for a body that is no Scale or names another object, 404, 409 on a stale
    /// resourceVersion, 422 `Scale.autoscaling "web" is invalid: spec.replicas: ...`.
    pub fn write_scale(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        body: &[u8],
        patch_type: Option<PatchType>,
    ) -> Result<Written, ApiError> {
        let current = self.get(r, ns, name)?;
        let old_scale = scale_of(&current);
        let new_scale: Value = match patch_type {
            None => serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
            })?,
            Some(pt) => {
                let p: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                match pt {
                    PatchType::Json => {
                        patch::json_patch(&old_scale, &p).map_err(|e| ApiError::bad_request(e.0))?
                    }
                    PatchType::Merge => patch::merge_patch(&old_scale, &p),
                    PatchType::Strategic => patch::strategic_merge_patch(
                        &old_scale,
                        &p,
                        "io.k8s.api.autoscaling.v1.Scale",
                    )
                    .map_err(|e| ApiError::bad_request(e.0))?,
                }
            }
        };
        if let Some(k) = new_scale.get("kind").and_then(Value::as_str) {
            if k != "Scale" {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind (Scale)"
                )));
            }
        }
        if meta::name(&new_scale) != name && !meta::name(&new_scale).is_empty() {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta::name(&new_scale)
            )));
        }
        let replicas = new_scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::invalid_kind(
                "Scale.autoscaling",
                "autoscaling",
                "Scale",
                name,
                vec![Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {replicas}: must be greater than or equal to 0"
                    ),
                    field: "spec.replicas".into(),
                }],
            ));
        }
        let mut obj = current;
        obj["spec"]["replicas"] = json!(replicas);
        // A Scale carrying a resourceVersion is a precondition on the object.
        match new_scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        {
            Some(rv) if !rv.is_empty() => obj["metadata"]["resourceVersion"] = json!(rv),
            _ => {}
        }
        let decoded = Decoded {
            object: obj,
            warnings: Vec::new(),
            invalid: Vec::new(),
        };
        let _ = FieldValidation::Strict;
        let w = self.write_update(r, ns, name, decoded, false, Vec::new(), true)?;
        Ok(Written {
            object: scale_of(&w.object),
            code: 200,
            warnings: w.warnings,
        })
    }

    /// `POST .../pods/NAME/binding`: binds the pod to the node (`spec.nodeName`, the
    /// `PodScheduled=True` condition).
    ///
    /// # Errors
    /// 400 for a body that is no Binding, 404, 409 `pod X is already assigned to node "N"`,
    /// 409 for a pod being deleted.
    pub fn bind(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        body: &[u8],
    ) -> Result<Written, ApiError> {
        let b: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?;
        if meta::name(&b) != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        let kind = b
            .pointer("/target/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !kind.is_empty() && kind != "Node" {
            return Err(ApiError::bad_request(format!(
                "unsupported binding target kind {kind:?}"
            )));
        }
        let node = b
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut pod = self.get(r, ns, name)?;
        let have = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if pod
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            return Err(ApiError::conflict(
                r,
                name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        if !have.is_empty() {
            return Err(ApiError::conflict(
                r,
                name,
                &format!("pod {name} is already assigned to node {have:?}"),
            ));
        }
        pod["spec"]["nodeName"] = json!(node);
        let now = meta::time_string(jiff::Timestamp::now());
        let conds = pod["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut conds: Vec<Value> = conds
            .into_iter()
            .filter(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"))
            .collect();
        conds.insert(0, json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
        pod["status"]["conditions"] = json!(conds);
        self.replace_pod_binding(r, ns, name, pod)?;
        Ok(Written {
            object: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            code: 201,
            warnings: Vec::new(),
        })
    }
}
