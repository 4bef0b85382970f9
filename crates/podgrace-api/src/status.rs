//! API errors as `metav1.Status` bodies, worded as kube-apiserver words them.
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go` (`NewNotFound`,
//! `NewAlreadyExists`, `NewConflict`, `NewInvalid`, `NewBadRequest`, `NewResourceExpired`,
//! `NewRequestEntityTooLargeError`, `NewMethodNotSupported`, `NewUnauthorized`, ...).

use serde_json::{json, Value};

use crate::resource::Resource;

/// One cause of an error (`metav1.StatusCause`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `reason` (a `field.ErrorType` such as `FieldValueInvalid`), may be empty.
    pub reason: String,
    /// `message`: what is wrong with the field, in upstream's words.
    pub message: String,
    /// `field` path, may be empty.
    pub field: String,
}

/// An API error: HTTP code, `reason`, `message` and `details`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status code and `Status.code` (400, 401, 403, 404, 405, 406, 409, 410, 415,
    /// 422, 429, 500, 504).
    pub code: u16,
    /// `Status.reason`, a `metav1.StatusReason` (`NotFound`, `AlreadyExists`, `Conflict`,
    /// `Invalid`, `Expired`, `TooManyRequests`, `BadRequest`...).
    pub reason: &'static str,
    /// `Status.message`, worded as kube-apiserver words it.
    pub message: String,
    /// `details.group`, `details.kind`, `details.name`; `None` leaves `details` out.
    pub details: Option<Box<(String, String, String)>>,
    /// `details.causes` (a 422's field errors).
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds` and the `Retry-After` header, in seconds (a 429 from an
    /// eviction refused by a PodDisruptionBudget).
    pub retry_after_seconds: Option<u32>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    fn with(mut self, r: &Resource, name: &str) -> ApiError {
        self.details = Some(Box::new((
            r.group.to_string(),
            r.plural.to_string(),
            name.to_string(),
        )));
        self
    }

    /// 404 `pods "web" not found`.
    pub fn not_found(r: &Resource, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", r.group_resource()),
        )
        .with(r, name)
    }

    /// 409 `pods "web" already exists`.
    pub fn already_exists(r: &Resource, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", r.group_resource()),
        )
        .with(r, name)
    }

    /// 409 `Operation cannot be fulfilled on pods "web": DETAIL`.
    pub fn conflict(r: &Resource, name: &str, detail: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {detail}",
                r.group_resource()
            ),
        )
        .with(r, name)
    }

    /// The detail of a conflict on a stale resourceVersion (`registry.OptimisticLockErrorMsg`).
    pub const OPTIMISTIC_LOCK: &'static str =
        "the object has been modified; please apply your changes to the latest version and try again";

    /// 422 `The Pod "web" is invalid: CAUSES` (`NewInvalid`): one cause is printed alone,
    /// several as `[a, b]` (`utilerrors.NewAggregate`).
    pub fn invalid(r: &Resource, name: &str, causes: Vec<Cause>) -> ApiError {
        ApiError::invalid_kind(&r.group_kind(), r.group, r.kind, name, causes)
    }

    /// [`ApiError::invalid`] for any group kind (`ListOptions.meta.k8s.io`).
    pub fn invalid_kind(
        group_kind: &str,
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<Cause>,
    ) -> ApiError {
        let parts: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let message = match parts.len() {
            0 => format!("{group_kind} {name:?} is invalid"),
            1 => format!("{group_kind} {name:?} is invalid: {}", parts[0]),
            _ => format!("{group_kind} {name:?} is invalid: [{}]", parts.join(", ")),
        };
        let mut e = ApiError::new(422, "Invalid", message);
        e.details = Some(Box::new((
            group.to_string(),
            kind.to_string(),
            name.to_string(),
        )));
        e.causes = causes;
        e
    }

    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`, as the authentication filter answers a request without valid
    /// credentials (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`).
    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 `pods "web" is forbidden: DETAIL`, or `pods is forbidden: DETAIL` without a name.
    pub fn forbidden(r: &Resource, name: &str, detail: &str) -> ApiError {
        let message = if name.is_empty() {
            format!("{} is forbidden: {detail}", r.group_resource())
        } else {
            format!("{} {name:?} is forbidden: {detail}", r.group_resource())
        };
        ApiError::new(403, "Forbidden", message).with(r, name)
    }

    /// 405 `VERB is not supported on resources of kind "pods"`.
    pub fn method_not_supported(r: &Resource, action: &str) -> ApiError {
        let mut e = ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "{action} is not supported on resources of kind {:?}",
                r.group_resource()
            ),
        );
        e.details = Some(Box::new((
            r.group.to_string(),
            r.plural.to_string(),
            String::new(),
        )));
        e
    }

    /// 404 `the server could not find the requested resource` (an unknown path or resource).
    pub fn no_resource() -> ApiError {
        let mut e = ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        e.details = Some(Box::default());
        e
    }

    /// 410 `Expired` with `message` (`NewResourceExpired`).
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 413 `Request entity too large: limit is N`.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 for a patch content type the server does not decode (server-side apply is not
    /// served, so `application/apply-patch+yaml` is not among the accepted ones).
    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"),
        )
    }

    /// 415 for an object body in a content type the server does not decode, in
    /// kube-apiserver's words (`apimachinery/pkg/apis/meta/internalversion` negotiation,
    /// `NewUnsupportedMediaTypeError`): JSON and protobuf are decoded (YAML bodies, which
    /// kube-apiserver also takes, are not: no client sends them).
    pub fn unsupported_body_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf (got {content_type:?})"),
        )
    }

    /// 504 `Timeout: Too large resource version: N, current: M` with the
    /// `ResourceVersionTooLarge` cause and a retry after 1 s, as the watch cache answers.
    pub fn too_large_rv(requested: u64, current: u64) -> ApiError {
        let msg = format!("Too large resource version: {requested}, current: {current}");
        let mut e = ApiError::new(504, "Timeout", format!("Timeout: {msg}"));
        e.details = Some(Box::default());
        e.causes = vec![Cause {
            reason: "ResourceVersionTooLarge".into(),
            message: msg,
            field: String::new(),
        }];
        e.retry_after_seconds = Some(1);
        e
    }

    /// 429 `TooManyRequests` (`NewTooManyRequests`) with a `DisruptionBudget` cause, as the
    /// eviction subresource refuses; `retry_after_seconds` 0 sends no `Retry-After`.
    pub fn too_many_requests(
        message: &str,
        retry_after_seconds: u32,
        cause: Option<&str>,
    ) -> ApiError {
        let mut e = ApiError::new(429, "TooManyRequests", message);
        e.retry_after_seconds = (retry_after_seconds > 0).then_some(retry_after_seconds);
        if let Some(c) = cause {
            e.causes = vec![Cause {
                reason: "DisruptionBudget".into(),
                message: c.into(),
                field: String::new(),
            }];
        }
        e
    }

    /// 409 on a group resource named as given (`Operation cannot be fulfilled on Pod "x": ...`,
    /// as the eviction's preconditions word it).
    pub fn conflict_on(group_resource: &str, name: &str, detail: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {group_resource} {name:?}: {detail}"),
        )
    }

    /// 504 `Timeout: MESSAGE` with a retry after 10 s (`NewTimeoutError`).
    pub fn new_timeout(message: &str) -> ApiError {
        let mut e = ApiError::new(504, "Timeout", format!("Timeout: {message}"));
        e.retry_after_seconds = Some(10);
        e
    }

    /// 403 with a preformatted message (`X "name" is forbidden: why`).
    pub fn forbidden_message(message: impl Into<String>) -> ApiError {
        ApiError::new(403, "Forbidden", message)
    }

    /// 503 `ServiceUnavailable` with kube-apiserver's message for a backend it cannot reach
    /// (`error trying to reach service: dial tcp 127.0.0.1:10250: connect: connection
    /// refused`).
    pub fn service_unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// 500 `Internal error occurred: DETAIL`.
    pub fn internal(detail: impl std::fmt::Display) -> ApiError {
        let mut e = ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {detail}"),
        );
        e.details = Some(Box::default());
        e.causes = vec![Cause {
            reason: String::new(),
            message: detail.to_string(),
            field: String::new(),
        }];
        e
    }

    /// The `metav1.Status` body, fields in kube-apiserver's order.
    pub fn to_status(&self) -> Value {
        serde_json::to_value(self.body()).unwrap_or(Value::Null)
    }

    /// The `metav1.Status` body serialized as kube-apiserver writes it (field order kept).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.body()).unwrap_or_default()
    }

    fn body(&self) -> StatusBody<'_> {
        let has_details =
            self.details.is_some() || !self.causes.is_empty() || self.retry_after_seconds.is_some();
        let (group, kind, name) = self
            .details
            .as_ref()
            .map(|d| (d.0.as_str(), d.1.as_str(), d.2.as_str()))
            .unwrap_or(("", "", ""));
        StatusBody {
            kind: "Status",
            api_version: "v1",
            metadata: Empty {},
            status: "Failure",
            message: &self.message,
            reason: self.reason,
            details: has_details.then(|| Details {
                name,
                group,
                kind,
                causes: self
                    .causes
                    .iter()
                    .map(|c| CauseBody {
                        reason: &c.reason,
                        message: &c.message,
                        field: &c.field,
                    })
                    .collect(),
                retry_after_seconds: self.retry_after_seconds,
            }),
            code: self.code,
        }
    }
}

#[derive(serde::Serialize)]
struct Empty {}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: Empty,
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details<'a>>,
    code: u16,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Details<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<CauseBody<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<u32>,
}

#[derive(serde::Serialize)]
struct CauseBody<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    field: &'a str,
}

/// A `metav1.Status` value serialized in kube-apiserver's field order (kind, apiVersion,
/// metadata, status, message, reason, details, code), as clients that print the raw body
/// (`kubectl create --raw`) show it.
pub fn ordered_status_json(v: &Value) -> String {
    let mut out = String::from("{");
    let mut first = true;
    for k in [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ] {
        if let Some(x) = v.get(k) {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&format!("{}:{x}", crate::status_quote(k)));
        }
    }
    out.push('}');
    out
}

/// The `Success` status a delete returns for a resource deleted at once without a body to
/// return, or a deletecollection of nothing.
pub fn success(details: Option<(&Resource, &str, &str)>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some((r, name, uid)) = details {
        s["details"] = json!({"name": name, "group": r.group, "kind": r.plural, "uid": uid});
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::find;

    #[test]
    fn statuses_are_worded_as_kube_apiserver() {
        let pods = find("", "v1", "pods").unwrap();
        assert_eq!(
            ApiError::not_found(pods, "nosuchpod").to_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"nosuchpod\" not found","reason":"NotFound","details":{"name":"nosuchpod","kind":"pods"},"code":404}"#
        );
        assert_eq!(
            ApiError::unauthorized().to_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        let e = ApiError::invalid(
            pods,
            "web",
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: 20: must be greater than 0".into(),
                field: "spec.containers[0].lifecycle.preStop.sleep".into(),
            }],
        );
        assert_eq!(
            e.message,
            "Pod \"web\" is invalid: spec.containers[0].lifecycle.preStop.sleep: Invalid value: 20: must be greater than 0"
        );
    }
}
