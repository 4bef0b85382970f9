//! Query parameters of list, watch, get and delete requests, parsed and checked as
//! kube-apiserver checks them.
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/
//! validation.go` (`ValidateListOptions`), `staging/src/k8s.io/apiserver/pkg/storage/
//! continue.go` (continue tokens), `pkg/storage/etcd3/store.go` (`GetList`).

use std::collections::HashMap;

use base64::Engine;
use serde_json::{json, Value};

use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Cause};
use crate::store::ReadAt;

/// Decoded query parameters (`+` as space, percent escapes decoded; the last value wins).
pub fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let dec = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        out.insert(dec(k), dec(v));
    }
    out
}

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// Not given: `resourceVersion` alone decides (unset: the latest, `0`: any).
    Unset,
    /// `NotOlderThan`: at least `resourceVersion`.
    NotOlderThan,
    /// `Exact`: the list as it was at `resourceVersion` (410 once compacted).
    Exact,
}

/// The options of a list or watch.
#[derive(Debug, Clone)]
pub struct ListOptions {
    /// `labelSelector` (empty: everything).
    pub labels: LabelSelector,
    /// `fieldSelector` (empty: everything).
    pub fields: FieldSelector,
    /// `limit`: at most this many items per page, a `continue` token for the rest; 0 (absent,
    /// or negative as upstream clamps it) for no limit.
    pub limit: usize,
    /// The decoded continue token: resourceVersion (-1: inconsistent) and start key.
    pub continue_from: Option<(i64, String)>,
    /// `resourceVersion` as given ("" when absent).
    pub resource_version: String,
    /// `resourceVersionMatch`.
    pub rv_match: RvMatch,
    /// `watch=true` (or the `/watch/` path prefix): a watch stream instead of a list.
    pub watch: bool,
    /// `allowWatchBookmarks`: the watch may send BOOKMARK events.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds`: the watch ends after this many seconds (none: the server's own
    /// timeout).
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents` (the watch-list feature): ADDED events for every object first,
    /// then a BOOKMARK annotated `k8s.io/initial-events-end`.
    pub send_initial_events: Option<bool>,
}

/// A boolean query parameter, read as Go's `strconv.ParseBool` reads it (`1`, `t`, `T`,
/// `true`, `True`, `TRUE` are true).
pub fn flag(q: &HashMap<String, String>, k: &str) -> bool {
    q.get(k)
        .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "True" | "TRUE"))
}

/// Encodes a continue token (`storage.EncodeContinue`): base64url of
/// `{"v":"meta.k8s.io/v1","rv":RV,"start":"KEY\u0000"}`.
pub fn encode_continue(rv: i64, last_key: &str) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last_key}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body.to_string())
}

fn decode_continue(s: &str) -> Result<(i64, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: invalid key");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let rv = v.get("rv").and_then(Value::as_i64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    if rv == 0 {
        return Err(bad());
    }
    if start.is_empty() || start.contains("..") {
        return Err(bad());
    }
    Ok((rv, start.to_string()))
}

impl ListOptions {
    /// Parses and validates the list/watch query.
    ///
    /// # Errors
    /// 400 with upstream's wording for bad selectors, limits, tokens and version options.
    pub fn parse(q: &HashMap<String, String>) -> Result<ListOptions, ApiError> {
        let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
            .map_err(|e| ApiError::bad_request(e.0))?;
        let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))
            .map_err(|e| ApiError::bad_request(e.0))?;
        let limit = match q.get("limit").filter(|v| !v.is_empty()) {
            None => 0,
            Some(v) => {
                let n: i64 = v.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "strconv.ParseInt: parsing {v:?}: invalid syntax"
                    ))
                })?;
                n.max(0) as usize
            }
        };
        let resource_version = q.get("resourceVersion").cloned().unwrap_or_default();
        let rv_match = match q.get("resourceVersionMatch").map(String::as_str) {
            None | Some("") => RvMatch::Unset,
            Some("NotOlderThan") => RvMatch::NotOlderThan,
            Some("Exact") => RvMatch::Exact,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                )))
            }
        };
        let watch = flag(q, "watch");
        let continue_from = match q.get("continue").filter(|v| !v.is_empty()) {
            Some(c) => Some(decode_continue(c)?),
            None => None,
        };
        // `ValidateListOptions` / `validateWatchOptions`: 422 on ListOptions.meta.k8s.io.
        let send_initial_events = q
            .get("sendInitialEvents")
            .map(|_| flag(q, "sendInitialEvents"));
        let mut causes: Vec<Cause> = Vec::new();
        let forbid = |causes: &mut Vec<Cause>, field: &str, msg: &str| {
            causes.push(Cause {
                reason: "FieldValueForbidden".into(),
                message: format!("Forbidden: {msg}"),
                field: field.into(),
            })
        };
        let match_str = q.get("resourceVersionMatch").cloned().unwrap_or_default();
        if watch {
            if send_initial_events.is_some() && rv_match != RvMatch::NotOlderThan {
                forbid(
                    &mut causes,
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                );
            }
            if rv_match != RvMatch::Unset {
                if send_initial_events.is_none() {
                    forbid(&mut causes, "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
                }
                if rv_match != RvMatch::NotOlderThan {
                    causes.push(Cause {
                        reason: "FieldValueNotSupported".into(),
                        message: format!(
                            "Unsupported value: {match_str:?}: supported values: \"NotOlderThan\""
                        ),
                        field: "resourceVersionMatch".into(),
                    });
                }
                if continue_from.is_some() {
                    forbid(
                        &mut causes,
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    );
                }
            }
        } else {
            if rv_match != RvMatch::Unset {
                if resource_version.is_empty() {
                    forbid(
                        &mut causes,
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    );
                }
                if continue_from.is_some() {
                    forbid(
                        &mut causes,
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    );
                }
                if rv_match == RvMatch::Exact && resource_version == "0" {
                    forbid(
                        &mut causes,
                        "resourceVersionMatch",
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    );
                }
            }
            if send_initial_events.is_some() {
                forbid(
                    &mut causes,
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                );
            }
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid_kind(
                "ListOptions.meta.k8s.io",
                "meta.k8s.io",
                "ListOptions",
                "",
                causes,
            ));
        }
        if continue_from.is_some() && !resource_version.is_empty() && resource_version != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let timeout_seconds = match q.get("timeoutSeconds").filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => Some(v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("strconv.ParseInt: parsing {v:?}: invalid syntax"))
            })?),
        };
        Ok(ListOptions {
            labels,
            fields,
            limit,
            continue_from,
            resource_version,
            rv_match,
            watch,
            allow_bookmarks: flag(q, "allowWatchBookmarks"),
            timeout_seconds,
            send_initial_events,
        })
    }

    /// The resourceVersion as a number (`None` when absent).
    ///
    /// # Errors
    /// 400 for a value that is not a number.
    pub fn rv(&self) -> Result<Option<u64>, ApiError> {
        if self.resource_version.is_empty() {
            return Ok(None);
        }
        self.resource_version.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "invalid resource version: strconv.ParseUint: parsing {:?}: invalid syntax",
                self.resource_version
            ))
        })
    }

    /// Which state a list reads, and where it starts.
    ///
    /// # Errors
    /// 400 for a bad resourceVersion.
    pub fn read_at(&self, current: u64) -> Result<(ReadAt, Option<String>), ApiError> {
        if let Some((rv, start)) = &self.continue_from {
            let at = if *rv < 0 {
                ReadAt::Latest
            } else {
                ReadAt::Exact(*rv as u64)
            };
            return Ok((at, Some(start.trim_end_matches('\0').to_string())));
        }
        let at = match (self.rv()?, self.rv_match) {
            (None, _) | (Some(0), _) => ReadAt::Latest,
            (Some(rv), RvMatch::Exact) => ReadAt::Exact(rv),
            (Some(rv), _) => {
                if rv > current {
                    return Err(ApiError::too_large_rv(rv, current));
                }
                ReadAt::Latest
            }
        };
        Ok((at, None))
    }
}

/// The `DeleteOptions` of a delete: from the body (kubectl sends one), else the query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Whether options were sent at all (a body or a query parameter).
    pub present: bool,
    /// `gracePeriodSeconds` in seconds (none: the object's own
    /// `terminationGracePeriodSeconds`; 0 with force is an immediate delete).
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground` (anything else is a 400).
    pub propagation_policy: Option<String>,
    /// The legacy `orphanDependents` (overrides `propagationPolicy`).
    pub orphan_dependents: Option<bool>,
    /// `preconditions.uid`: the delete is a 409 Conflict unless the object has this UID.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`: the delete is a 409 Conflict unless the object is at
    /// this resourceVersion.
    pub precondition_rv: Option<String>,
    /// `dryRun` (any value, `All`): validated and answered, nothing deleted.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Parses the body (may be empty) and the query.
    ///
    /// # Errors
    /// 400 for a body that is not DeleteOptions JSON or a bad propagationPolicy.
    pub fn parse(body: &[u8], q: &HashMap<String, String>) -> Result<DeleteOptions, ApiError> {
        let mut o = DeleteOptions::default();
        if !body.iter().all(u8::is_ascii_whitespace) {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
            })?;
            o.present = true;
            o.grace_period_seconds = v.get("gracePeriodSeconds").and_then(Value::as_i64);
            o.propagation_policy = v
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.orphan_dependents = v.get("orphanDependents").and_then(Value::as_bool);
            o.precondition_uid = v
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.precondition_rv = v
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            o.dry_run = v
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
        }
        if let Some(g) = q.get("gracePeriodSeconds").filter(|v| !v.is_empty()) {
            o.present = true;
            o.grace_period_seconds = Some(g.parse().map_err(|_| {
                ApiError::bad_request(format!("strconv.ParseInt: parsing {g:?}: invalid syntax"))
            })?);
        }
        if let Some(p) = q.get("propagationPolicy").filter(|v| !v.is_empty()) {
            o.present = true;
            o.propagation_policy = Some(p.clone());
        }
        if q.get("dryRun").is_some_and(|v| !v.is_empty()) {
            o.dry_run = true;
        }
        // A delete without any options is still a graceful delete for the handler, which
        // fills in empty DeleteOptions (`handlers/delete.go`).
        o.present = true;
        if let Some(p) = &o.propagation_policy {
            if !matches!(p.as_str(), "Orphan" | "Background" | "Foreground") {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy: Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                )));
            }
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_bad_options_are_400() {
        let t = encode_continue(42, "default/web");
        let (rv, start) = decode_continue(&t).unwrap();
        assert_eq!((rv, start.as_str()), (42, "default/web\0"));
        let q = parse_query(Some(
            "labelSelector=app%3Dweb&limit=2&resourceVersionMatch=Exact",
        ));
        let e = ListOptions::parse(&q).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.message, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
        let q = parse_query(Some("resourceVersion=9&resourceVersionMatch=NotOlderThan"));
        let o = ListOptions::parse(&q).unwrap();
        assert_eq!(o.read_at(5).unwrap_err().code, 504);
        assert_eq!(o.read_at(9).unwrap().0, ReadAt::Latest);
        let q = parse_query(Some("continue=garbage"));
        assert_eq!(ListOptions::parse(&q).unwrap_err().code, 400);
    }
}
