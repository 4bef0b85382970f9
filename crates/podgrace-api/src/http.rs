//! The REST layer: kube-apiserver's URL scheme, verbs, content negotiation (JSON, `as=Table`),
//! warnings, the request body limit and the bearer-token check, as one tower `Service`
//! ([`router`], an axum `Router`). `kube::Client` can be built over it in-process; the
//! listener ([`crate::listener`]) serves it over TLS.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go` (paths:
//! `/api/v1/namespaces/NS/RESOURCE/NAME/SUBRESOURCE`, `/apis/GROUP/VERSION/...`, the legacy
//! `/api/v1/watch/` prefix, `status` and `finalize` of namespaces), `handlers/*.go` (verbs),
//! `handlers/responsewriters/warning.go` (`Warning: 299 - "..."`).

use std::collections::HashMap;
use std::convert::Infallible;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use crate::api::{Api, PatchType};
use crate::options::{parse_query, DeleteOptions, ListOptions};
use crate::registry::FieldValidation;
use crate::resource::{self, Resource};
use crate::status::ApiError;
use crate::table::{self, IncludeObject};
use crate::{discovery, logs, openapi, openapi_v2, watch};

/// The Content-Type of a Table response.
pub const TABLE_CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// A JSON response.
pub fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response {
    let mut b = Response::builder()
        .status(code)
        .header("content-type", "application/json");
    for w in warnings {
        b = b.header("warning", format!("299 - {}", crate::status_quote(w)));
    }
    b.body(Body::from(serde_json::to_vec(body).unwrap_or_default()))
        .unwrap_or_default()
}

/// An error response (its `Status` body, in kube-apiserver's field order).
pub fn error_response(e: &ApiError) -> Response {
    let mut b = Response::builder()
        .status(e.code)
        .header("content-type", "application/json");
    if let Some(n) = e.retry_after_seconds.filter(|n| *n > 0) {
        b = b.header("retry-after", n.to_string());
    }
    b.body(Body::from(e.to_json())).unwrap_or_default()
}

/// What a request path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`: the server's `version.Info`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`: `ok`.
    Healthz,
    /// `/api`: the core group's `APIVersions`.
    ApiVersions,
    /// `/apis`: the `APIGroupList`.
    GroupList,
    /// `/apis/GROUP`: one `APIGroup`.
    Group(String),
    /// `/api/v1` or `/apis/GROUP/VERSION`: the `APIResourceList` of (group, version); the core
    /// group is `""`.
    GroupVersion(String, String),
    /// `/openapi/v2`: the Swagger 2.0 document.
    OpenApiV2,
    /// `/openapi/v3`: the index of the OpenAPI v3 documents by group-version.
    OpenApiV3Index,
    /// `/openapi/v3/PATH`: one group-version's OpenAPI v3 document (`api/v1`, `apis/apps/v1`).
    OpenApiV3(String),
    /// A served resource: a collection, one object or one of its subresources.
    Resource {
        /// The resource the path names.
        resource: &'static Resource,
        /// `namespaces/NS` of the path, for namespaced resources only (`None` lists across
        /// namespaces).
        namespace: Option<String>,
        /// The object's name, `None` for the collection.
        name: Option<String>,
        /// `status`, `log`, `eviction`, `binding`, `scale`... after the name.
        subresource: Option<String>,
        /// The path had the deprecated `/watch/` prefix (`GET /api/v1/watch/pods`): a watch
        /// as `?watch=true` is.
        watch_prefix: bool,
    },
    /// `/api/v1/nodes/NODE/proxy/PATH`: the kubelet of NODE, through the API server.
    NodeProxy {
        /// The node.
        node: String,
        /// The path after `proxy/` (`configz`; empty for `proxy` itself).
        path: String,
    },
    /// Anything else: kube-apiserver's 404 `the server could not find the requested resource`.
    NotFound,
}

/// Parses a request path as `RequestInfoFactory.NewRequestInfo` does.
pub fn route(path: &str) -> Route {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        ["version"] => return Route::Version,
        ["healthz"] | ["livez"] | ["readyz"] => return Route::Healthz,
        ["api"] => return Route::ApiVersions,
        ["apis"] => return Route::GroupList,
        ["openapi", "v2"] => return Route::OpenApiV2,
        ["openapi", "v3"] => return Route::OpenApiV3Index,
        ["openapi", "v3", rest @ ..] => return Route::OpenApiV3(rest.join("/")),
        ["apis", g] => return Route::Group(g.to_string()),
        ["api", "v1"] => return Route::GroupVersion(String::new(), "v1".into()),
        ["apis", g, v] => return Route::GroupVersion(g.to_string(), v.to_string()),
        ["api", "v1", "nodes", node, "proxy", rest @ ..] => {
            return Route::NodeProxy {
                node: node.to_string(),
                path: rest.join("/"),
            }
        }
        _ => {}
    }
    let (group, version, mut rest): (&str, &str, &[&str]) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", v, rest),
        ["apis", g, v, rest @ ..] => (g, v, rest),
        _ => return Route::NotFound,
    };
    let mut watch_prefix = false;
    if rest.first() == Some(&"watch") {
        watch_prefix = true;
        rest = &rest[1..];
    }
    let mut namespace = None;
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = Some(rest[1].to_string());
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        } else {
            // The namespace itself (or its status/finalize subresource).
            let resource = match resource::find(group, version, "namespaces") {
                Some(r) => r,
                None => return Route::NotFound,
            };
            return Route::Resource {
                resource,
                namespace: None,
                name: namespace,
                subresource: rest.get(2).map(|s| s.to_string()),
                watch_prefix,
            };
        }
    }
    let Some(plural) = rest.first() else {
        return Route::NotFound;
    };
    let Some(resource) = resource::find(group, version, plural) else {
        return Route::NotFound;
    };
    if rest.len() > 3 {
        return Route::NotFound;
    }
    Route::Resource {
        resource,
        namespace: if resource.namespaced { namespace } else { None },
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
        watch_prefix,
    }
}

fn header<'a>(req: &'a Request, name: &str) -> &'a str {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Whether the Accept header asks for a `meta.k8s.io` Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        first.contains("as=Table") && (first.contains("g=meta.k8s.io") || !first.contains("g="))
    })
}

fn include_object(q: &HashMap<String, String>) -> Result<IncludeObject, ApiError> {
    match q.get("includeObject").map(String::as_str) {
        None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
        Some("None") => Ok(IncludeObject::None),
        Some("Object") => Ok(IncludeObject::Object),
        Some(other) => Err(ApiError::bad_request(format!(
            "unrecognized includeObject value: {other:?}"
        ))),
    }
}

/// The body of a create, update or subresource write: JSON (no Content-Type is taken as
/// JSON, as Go's decoder sniffs it) or protobuf (kubectl's typed commands), which is decoded
/// into the same JSON ([`crate::protobuf::decode`]); the answer is JSON, which every client
/// that sends protobuf lists in its Accept (`application/vnd.kubernetes.protobuf,application/json`).
///
/// # Errors
/// 415 for another media type, 400 for a malformed protobuf body, then as [`read_body`].
async fn read_object_body(api: &Api, req: Request) -> Result<Bytes, ApiError> {
    let ct = header(&req, "content-type");
    match ct.split(';').next().unwrap_or("").trim() {
        "" | "application/json" | "*/*" => read_body(api, req).await,
        crate::protobuf::CONTENT_TYPE => {
            let body = read_body(api, req).await?;
            let object = crate::protobuf::decode(&body)?;
            Ok(Bytes::from(
                serde_json::to_vec(&object).map_err(ApiError::internal)?,
            ))
        }
        other => Err(ApiError::unsupported_body_media_type(other)),
    }
}

/// The DeleteOptions body of a delete: protobuf (client-go's typed deletes, `kubectl drain
/// --disable-eviction`) decoded into JSON; anything else is read as JSON, as before.
///
/// # Errors
/// 400 for a malformed protobuf body, then as [`read_body`].
async fn read_options_body(api: &Api, req: Request) -> Result<Bytes, ApiError> {
    let ct = header(&req, "content-type");
    if ct.split(';').next().unwrap_or("").trim() == crate::protobuf::CONTENT_TYPE {
        return read_object_body(api, req).await;
    }
    read_body(api, req).await
}

/// Reads the request body up to the limit (3 MiB by default; 413 above it). An oversized body
/// is still read and discarded up to 8 times the limit (for at most 2 s) before the answer, so
/// that an HTTP/2 client gets the 413 instead of a reset stream; past that the stream is reset.
async fn read_body(api: &Api, req: Request) -> Result<Bytes, ApiError> {
    let limit = api.config().max_body_bytes;
    let mut body = req.into_body();
    let mut buf = bytes::BytesMut::new();
    let mut total = 0usize;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let frame = if total > limit {
            match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(f) => f,
                Err(_) => break,
            }
        } else {
            body.frame().await
        };
        match frame {
            None => break,
            Some(Err(e)) => {
                return Err(ApiError::bad_request(format!(
                    "unable to read the request body: {e}"
                )))
            }
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    total += d.len();
                    if total <= limit {
                        buf.extend_from_slice(&d);
                    } else if total > limit.saturating_mul(8) {
                        break;
                    }
                }
            }
        }
    }
    if total > limit {
        return Err(ApiError::too_large(limit));
    }
    Ok(buf.freeze())
}

/// Serves one request (no authentication: see [`authenticated`]).
pub async fn handle(api: Api, req: Request) -> Response {
    match dispatch(&api, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

async fn dispatch(api: &Api, req: Request) -> Result<Response, ApiError> {
    let path = req.uri().path().to_string();
    let q = parse_query(req.uri().query());
    let method = req.method().as_str().to_string();
    let accept = header(&req, "accept").to_string();
    let r = route(&path);
    match r {
        Route::Version => Ok(json_response(200, &discovery::version(api), &[])),
        Route::Healthz => Ok(Response::builder()
            .status(200)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Body::from("ok"))
            .unwrap_or_default()),
        Route::ApiVersions => Ok(json_response(200, &discovery::api_versions(), &[])),
        Route::GroupList => Ok(json_response(200, &discovery::group_list(), &[])),
        Route::Group(g) => discovery::group(&g)
            .map(|v| json_response(200, &v, &[]))
            .ok_or_else(not_found_page),
        Route::GroupVersion(g, v) => discovery::resource_list(&g, &v)
            .map(|v| json_response(200, &v, &[]))
            .ok_or_else(not_found_page),
        Route::OpenApiV2 => Ok(
            if accept.contains(openapi_v2::PROTOBUF) || accept.contains("protobuf") {
                Response::builder()
                    .status(200)
                    .header("content-type", openapi_v2::PROTOBUF_SERVED)
                    .body(Body::from(openapi_v2::protobuf()))
                    .unwrap_or_default()
            } else {
                json_response(200, openapi_v2::document(), &[])
            },
        ),
        Route::OpenApiV3Index => Ok(json_response(200, &openapi::index(), &[])),
        Route::OpenApiV3(gv) => openapi::document(&gv)
            .map(|v| json_response(200, &v, &[]))
            .ok_or_else(not_found_page),
        Route::NotFound => Err(not_found_page()),
        Route::NodeProxy { node, path } => node_proxy(api, &method, &node, &path),
        Route::Resource {
            resource,
            namespace,
            name,
            subresource,
            watch_prefix,
        } => {
            if let Some(sub) = &subresource {
                if !resource.subresources.contains(&sub.as_str()) {
                    return Err(ApiError::no_resource());
                }
            }
            let ns = namespace.clone().unwrap_or_default();
            let fv = FieldValidation::parse(q.get("fieldValidation").map(String::as_str))?;
            match (method.as_str(), name.as_deref(), subresource.as_deref()) {
                ("GET", None, None) => {
                    let opts = ListOptions::parse(&q)?;
                    if opts.watch || watch_prefix {
                        Api::check_fields(resource, &opts)?;
                        return watch::serve(
                            api.clone(),
                            resource,
                            namespace,
                            opts,
                            wants_table(&accept)
                                .then(|| include_object(&q))
                                .transpose()?,
                        );
                    }
                    if !wants_table(&accept) {
                        let body = api.list_body(resource, namespace.as_deref(), &opts)?;
                        return Ok(Response::builder()
                            .status(200)
                            .header("content-type", "application/json")
                            .body(Body::from(body))
                            .unwrap_or_default());
                    }
                    let list = api.list(resource, namespace.as_deref(), &opts)?;
                    {
                        let inc = include_object(&q)?;
                        let items: Vec<Value> =
                            list["items"].as_array().cloned().unwrap_or_default();
                        let refs: Vec<&Value> = items.iter().collect();
                        let t = table::table(
                            resource.kind,
                            &refs,
                            jiff::Timestamp::now(),
                            api.config().kube_version,
                            inc,
                            true,
                            list["metadata"].clone(),
                        );
                        Ok(table_response(&t))
                    }
                }
                ("GET", Some(n), None) | ("GET", Some(n), Some("status")) => {
                    if watch_prefix {
                        let mut opts = ListOptions::parse(&q)?;
                        opts.fields
                            .terms
                            .push(("metadata.name".into(), n.to_string(), true));
                        return watch::serve(
                            api.clone(),
                            resource,
                            namespace,
                            opts,
                            wants_table(&accept)
                                .then(|| include_object(&q))
                                .transpose()?,
                        );
                    }
                    let obj = api.get(resource, &ns, n)?;
                    if wants_table(&accept) {
                        let t = table::table(
                            resource.kind,
                            &[&obj],
                            jiff::Timestamp::now(),
                            api.config().kube_version,
                            include_object(&q)?,
                            true,
                            serde_json::json!({"resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or_default()}),
                        );
                        return Ok(table_response(&t));
                    }
                    Ok(json_response(200, &obj, &[]))
                }
                ("GET", Some(n), Some("log")) => logs::serve(api.clone(), &ns, n, &q).await,
                ("GET", Some(n), Some("scale")) => {
                    Ok(json_response(200, &api.get_scale(resource, &ns, n)?, &[]))
                }
                ("PUT", Some(n), Some("scale")) => {
                    let body = read_object_body(api, req).await?;
                    let w = api.write_scale(resource, &ns, n, &body, None)?;
                    Ok(json_response(w.code, &w.object, &w.warnings))
                }
                ("PATCH", Some(n), Some("scale")) => {
                    let pt = PatchType::from_content_type(header(&req, "content-type"))?;
                    let body = read_body(api, req).await?;
                    let w = api.write_scale(resource, &ns, n, &body, Some(pt))?;
                    Ok(json_response(w.code, &w.object, &w.warnings))
                }
                ("POST", Some(n), Some("eviction")) => {
                    let body = read_object_body(api, req).await?;
                    let w = api.evict(resource, &ns, n, &body)?;
                    Ok(Response::builder()
                        .status(w.code)
                        .header("content-type", "application/json")
                        .body(Body::from(crate::status::ordered_status_json(&w.object)))
                        .unwrap_or_default())
                }
                ("POST", Some(n), Some("binding")) => {
                    let body = read_object_body(api, req).await?;
                    let w = api.bind(resource, &ns, n, &body)?;
                    Ok(Response::builder()
                        .status(w.code)
                        .header("content-type", "application/json")
                        .body(Body::from(crate::status::ordered_status_json(&w.object)))
                        .unwrap_or_default())
                }
                ("POST", None, None) => {
                    let body = read_object_body(api, req).await?;
                    let w = api.create(resource, &ns, &body, fv)?;
                    Ok(json_response(w.code, &w.object, &w.warnings))
                }
                ("PUT", Some(n), sub) if sub.is_none() || sub == Some("status") => {
                    let body = read_object_body(api, req).await?;
                    let w = api.update(resource, &ns, n, &body, fv, sub == Some("status"))?;
                    Ok(json_response(w.code, &w.object, &w.warnings))
                }
                ("PATCH", Some(n), sub) if sub.is_none() || sub == Some("status") => {
                    let pt = PatchType::from_content_type(header(&req, "content-type"))?;
                    let body = read_body(api, req).await?;
                    let w = api.patch(resource, &ns, n, pt, &body, fv, sub == Some("status"))?;
                    Ok(json_response(w.code, &w.object, &w.warnings))
                }
                ("DELETE", Some(n), None) => {
                    let body = read_options_body(api, req).await?;
                    let opts = DeleteOptions::parse(&body, &q)?;
                    let w = api.delete(resource, &ns, n, &opts)?;
                    Ok(json_response(w.code, &w.object, &w.warnings))
                }
                ("DELETE", None, None) => {
                    let body = read_options_body(api, req).await?;
                    let opts = DeleteOptions::parse(&body, &q)?;
                    let list = ListOptions::parse(&q)?;
                    let out =
                        api.delete_collection(resource, namespace.as_deref(), &list, &opts)?;
                    Ok(json_response(200, &out, &[]))
                }
                (m, _, _) => {
                    let action = match m {
                        "POST" => "create",
                        "PUT" => "update",
                        "PATCH" => "patch",
                        "DELETE" => "delete",
                        _ => m,
                    };
                    Err(ApiError::method_not_supported(resource, action))
                }
            }
        }
    }
}

fn table_response(t: &Value) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", TABLE_CONTENT_TYPE)
        .body(Body::from(serde_json::to_vec(t).unwrap_or_default()))
        .unwrap_or_default()
}

/// `GET /api/v1/nodes/NODE/proxy/PATH`: the node must exist (404 `nodes "x" not found`), then
/// its kubelet answers through [`crate::api::NodeProxy`]: its JSON, Go's `404 page not found`
/// for a path it does not serve, or kube-apiserver's 503 when it cannot be reached. Only `GET`
/// is served (kube-apiserver proxies every verb; podgrace's kubelet serves reads only).
///
/// Upstream: `pkg/registry/core/node/rest/proxy.go` (`ProxyREST.Connect`),
/// `staging/src/k8s.io/apimachinery/pkg/util/proxy` (the 503 on a dial error).
fn node_proxy(api: &Api, method: &str, node: &str, path: &str) -> Result<Response, ApiError> {
    let nodes = resource::find("", "v1", "nodes").ok_or_else(not_found_page)?;
    if method != "GET" {
        return Err(ApiError::method_not_supported(
            nodes,
            &method.to_ascii_lowercase(),
        ));
    }
    let obj = api.get(nodes, "", node)?;
    let unreachable = || {
        let ip = obj
            .pointer("/status/addresses")
            .and_then(serde_json::Value::as_array)
            .and_then(|a| {
                a.iter().find(|x| {
                    x.get("type").and_then(serde_json::Value::as_str) == Some("InternalIP")
                })
            })
            .and_then(|x| x.get("address"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or(node)
            .to_string();
        ApiError::service_unavailable(format!(
            "error trying to reach service: dial tcp {ip}:10250: connect: connection refused"
        ))
    };
    let proxy = api.config().node_proxy.clone().ok_or_else(unreachable)?;
    match (proxy.0)(node, path) {
        Ok(Some(v)) => Ok(json_response(200, &v, &[])),
        Ok(None) => Ok(Response::builder()
            .status(404)
            .header("content-type", "text/plain; charset=utf-8")
            .header("x-content-type-options", "nosniff")
            .body(Body::from("404 page not found\n"))
            .unwrap_or_default()),
        Err(_) => Err(unreachable()),
    }
}

fn not_found_page() -> ApiError {
    ApiError::no_resource()
}

/// Compares two byte strings in time independent of where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `req` carries `Authorization: Bearer <token>`.
pub fn authenticated(req: &Request, token: &str) -> bool {
    let Some(h) = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(given) = h
        .strip_prefix("Bearer ")
        .or_else(|| h.strip_prefix("bearer "))
    else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), token.as_bytes())
}

/// The API as a tower service, without authentication (for in-process clients such as the
/// drill's embedded serve).
pub fn router(api: Api) -> axum::Router {
    axum::Router::new().fallback(move |req: Request| {
        let api = api.clone();
        async move { Ok::<_, Infallible>(handle(api, req).await) }
    })
}

/// The API as a tower service that requires `Authorization: Bearer TOKEN` on every request
/// (401 `Unauthorized` otherwise, as kube-apiserver answers with anonymous access off).
pub fn authenticated_router(api: Api, token: String) -> axum::Router {
    axum::Router::new().fallback(move |req: Request| {
        let api = api.clone();
        let token = token.clone();
        async move {
            if !authenticated(&req, &token) {
                return Ok::<_, Infallible>(error_response(&ApiError::unauthorized()));
            }
            Ok(handle(api, req).await)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_as_request_info_does() {
        let pods = resource::find("", "v1", "pods").unwrap();
        assert_eq!(
            route("/api/v1/namespaces/default/pods/web/log"),
            Route::Resource {
                resource: pods,
                namespace: Some("default".into()),
                name: Some("web".into()),
                subresource: Some("log".into()),
                watch_prefix: false
            }
        );
        let ns = resource::find("", "v1", "namespaces").unwrap();
        assert_eq!(
            route("/api/v1/namespaces/default/status"),
            Route::Resource {
                resource: ns,
                namespace: None,
                name: Some("default".into()),
                subresource: Some("status".into()),
                watch_prefix: false
            }
        );
        assert!(matches!(
            route("/api/v1/watch/pods"),
            Route::Resource {
                watch_prefix: true,
                namespace: None,
                ..
            }
        ));
        assert!(matches!(
            route("/apis/events.k8s.io/v1/namespaces/x/events"),
            Route::Resource { .. }
        ));
        assert_eq!(route("/api/v1/widgets"), Route::NotFound);
        assert_eq!(
            route("/apis/apps/v1"),
            Route::GroupVersion("apps".into(), "v1".into())
        );
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
