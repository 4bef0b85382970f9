//! The `pods/log` subresource, read from the kubelet's container log files in the CRI
//! format (`2016-10-06T00:17:09.669794202Z stdout F the line`), under
//! `LOG_DIR/NAMESPACE_POD_UID/CONTAINER/RESTARTCOUNT.log` as the kubelet lays them out.
//! Options: `container`, `follow`, `previous`, `timestamps`, `tailLines`, `limitBytes`,
//! `sinceSeconds`, `sinceTime` (validated as `ValidatePodLogOptions` does: a 422 for the
//! `PodLogOptions`).
//!
//! Upstream: `pkg/registry/core/pod/rest/log.go` and `pkg/registry/core/pod/strategy.go`
//! (`LogLocation`: the container choice and its errors), `pkg/kubelet/kuberuntime/logs/
//! logs.go` (`ReadLogs`: the CRI format, partial lines, `--timestamps`, `--tail`,
//! `--limit-bytes`, `--follow`; now `staging/src/k8s.io/cri-client/pkg/logs/logs.go`: the tail
//! taken from the file's lines first, then lines older than the since time skipped, the byte
//! limit over the whole stream, followed lines included), `NewLogOptions` (since is the later of
//! now − `sinceSeconds` and `sinceTime`), `pkg/apis/core/validation/validation.go`
//! (`ValidatePodLogOptions`), `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (paths).
//! Kubernetes 1.27 to 1.37.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

use crate::api::Api;
use crate::meta;
use crate::resource;
use crate::status::{ApiError, Cause};

/// The directory of a pod's logs (`NAMESPACE_POD_UID`).
pub fn pod_dir(namespace: &str, pod: &str, uid: &str) -> String {
    format!("{namespace}_{pod}_{uid}")
}

/// One CRI log line as `kubectl logs` prints it: the content (a partial line `P` is joined
/// with the next), with the timestamp of its first part first when asked. A part written
/// before `since` is skipped, as the kubelet's log writer skips it.
pub fn render(
    line: &str,
    timestamps: bool,
    since: Option<jiff::Timestamp>,
    pending: &mut Pending,
) -> Option<String> {
    let mut parts = line.splitn(4, ' ');
    let ts = parts.next()?;
    let _stream = parts.next()?;
    let tag = parts.next()?;
    let content = parts.next().unwrap_or("");
    let old = since.is_some_and(|s| ts.parse::<jiff::Timestamp>().is_ok_and(|t| t < s));
    if !old {
        if pending.text.is_empty() && pending.ts.is_empty() {
            pending.ts = ts.to_string();
        }
        pending.text.push_str(content);
    }
    if tag == "P" || (old && pending.ts.is_empty()) {
        return None;
    }
    let p = std::mem::take(pending);
    Some(if timestamps {
        format!("{} {}\n", p.ts, p.text)
    } else {
        format!("{}\n", p.text)
    })
}

/// A line whose parts (`P`) are still being joined: the first part's timestamp and the text.
#[derive(Debug, Default)]
pub struct Pending {
    ts: String,
    text: String,
}

/// The reading options of `pods/log` (`PodLogOptions`), parsed and validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogOptions {
    /// `tailLines`: the last lines of the file.
    pub tail_lines: Option<usize>,
    /// `limitBytes`: at most this many bytes in all, followed output included.
    pub limit_bytes: Option<usize>,
    /// `sinceSeconds`: lines of the last seconds.
    pub since_seconds: Option<i64>,
    /// `sinceTime`: lines from this time (RFC 3339).
    pub since_time: Option<jiff::Timestamp>,
}

impl LogOptions {
    /// Parses the query of `pods/NAME/log` for pod `name`.
    ///
    /// # Errors
    /// 400 for a number or time that does not parse (Go's `strconv.ParseInt` / `time.Parse`
    /// words); 422 `PodLogOptions "NAME" is invalid` for a negative `tailLines`, a `limitBytes` or
    /// `sinceSeconds` under 1, or both `sinceSeconds` and `sinceTime`.
    pub fn parse(q: &HashMap<String, String>, name: &str) -> Result<LogOptions, ApiError> {
        let int = |k: &str| -> Result<Option<i64>, ApiError> {
            q.get(k)
                .map(|v| {
                    v.parse::<i64>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "strconv.ParseInt: parsing {v:?}: invalid syntax"
                        ))
                    })
                })
                .transpose()
        };
        let tail = int("tailLines")?;
        let limit = int("limitBytes")?;
        let since_seconds = int("sinceSeconds")?;
        let since_time = q
            .get("sinceTime")
            .map(|v| {
                v.parse::<jiff::Timestamp>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "parsing time {v:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {v:?} as \"2006\""
                    ))
                })
            })
            .transpose()?;
        let invalid = |field: &str, reason: &str, message: String| Cause {
            reason: reason.into(),
            message,
            field: field.into(),
        };
        let mut causes = Vec::new();
        if let Some(n) = tail.filter(|n| *n < 0) {
            causes.push(invalid(
                "tailLines",
                "FieldValueInvalid",
                format!("Invalid value: {n}: must be greater than or equal to 0"),
            ));
        }
        if let Some(n) = limit.filter(|n| *n < 1) {
            causes.push(invalid(
                "limitBytes",
                "FieldValueInvalid",
                format!("Invalid value: {n}: must be greater than 0"),
            ));
        }
        match (since_seconds, since_time) {
            (Some(_), Some(_)) => causes.push(invalid(
                "[]",
                "FieldValueForbidden",
                "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".into(),
            )),
            (Some(n), None) if n < 1 => causes.push(invalid(
                "sinceSeconds",
                "FieldValueInvalid",
                format!("Invalid value: {n}: must be greater than 0"),
            )),
            _ => {}
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid_kind(
                "PodLogOptions",
                "",
                "PodLogOptions",
                name,
                causes,
            ));
        }
        Ok(LogOptions {
            tail_lines: tail.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            limit_bytes: limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            since_seconds,
            since_time,
        })
    }

    /// The time before which lines are skipped, as `NewLogOptions` derives it at `now`: the
    /// later of now − `sinceSeconds` and `sinceTime`.
    pub fn since(&self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let from_seconds = self
            .since_seconds
            .and_then(|n| now.checked_sub(jiff::SignedDuration::from_secs(n)).ok());
        match (from_seconds, self.since_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

fn container_choice(
    pod: &Value,
    name: &str,
    q: &HashMap<String, String>,
) -> Result<String, ApiError> {
    let names: Vec<String> = ["/spec/initContainers", "/spec/containers"]
        .iter()
        .flat_map(|p| {
            pod.pointer(p)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect();
    let mains: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) if names.contains(c) => Ok(c.clone()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if mains.len() == 1 => Ok(mains[0].clone()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            names.join(" ")
        ))),
    }
}

fn status_of<'a>(pod: &'a Value, container: &str) -> Option<&'a Value> {
    ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(container))
}

/// Serves `GET .../pods/NAME/log`.
///
/// # Errors
/// 404 for a missing pod; 400 with upstream's wording for a container that cannot be chosen,
/// has not started, or has no previous instance.
pub async fn serve(
    api: Api,
    ns: &str,
    name: &str,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let pods = resource::find("", "v1", "pods").expect("pods");
    let pod = api.get(pods, ns, name)?;
    let container = container_choice(&pod, name, q)?;
    let flag = |k: &str| crate::options::flag(q, k);
    let previous = flag("previous");
    let timestamps = flag("timestamps");
    let follow = flag("follow") && !previous;
    let opts = LogOptions::parse(q, name)?;
    let since = opts.since(jiff::Timestamp::now());
    let st = status_of(&pod, &container);
    let waiting = || {
        let reason = st
            .and_then(|s| s.pointer("/state/waiting/reason"))
            .and_then(Value::as_str)
            .unwrap_or("ContainerCreating");
        // validateContainerLogStatus (pkg/kubelet/kubelet_pods.go) words the two image
        // errors; any other reason is given as it is.
        let why = match reason {
            "ErrImagePull" => "image can't be pulled",
            "ImagePullBackOff" => "trying and failing to pull image",
            other => other,
        };
        ApiError::bad_request(format!(
            "container {container:?} in pod {name:?} is waiting to start: {why}"
        ))
    };
    let Some(st) = st else { return Err(waiting()) };
    if st.pointer("/state/waiting").is_some()
        && st.pointer("/lastState/terminated").is_none()
        && !previous
    {
        return Err(waiting());
    }
    let restarts = st.get("restartCount").and_then(Value::as_u64).unwrap_or(0);
    let n = if previous {
        if restarts == 0 {
            return Err(ApiError::bad_request(format!(
                "previous terminated container {container:?} in pod {name:?} not found"
            )));
        }
        restarts - 1
    } else {
        restarts
    };
    let Some(dir) = api.config().log_dir.clone() else {
        return Err(waiting());
    };
    let path: PathBuf = dir
        .join(pod_dir(ns, name, meta::uid(&pod)))
        .join(&container)
        .join(format!("{n}.log"));
    let mut file = tokio::fs::File::open(&path).await.map_err(|_| waiting())?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .await
        .map_err(ApiError::internal)?;
    let mut pending = Pending::default();
    // The tail is taken from the file's lines, then the old ones skipped (`ReadLogs`).
    let raw: Vec<&str> = text.lines().collect();
    let skip = opts.tail_lines.map_or(0, |t| raw.len().saturating_sub(t));
    let lines: Vec<String> = raw[skip..]
        .iter()
        .filter_map(|l| render(l, timestamps, since, &mut pending))
        .collect();
    let mut out: Vec<u8> = lines.concat().into_bytes();
    let mut remaining = opts.limit_bytes.unwrap_or(usize::MAX);
    out.truncate(remaining);
    remaining -= out.len();
    let resp = Response::builder()
        .status(200)
        .header("content-type", "text/plain");
    if !follow || remaining == 0 {
        return Ok(resp.body(Body::from(out)).unwrap_or_default());
    }
    let (tx, mut rx) = mpsc::channel::<Bytes>(64);
    let uid = meta::uid(&pod).to_string();
    let ns = ns.to_string();
    let name = name.to_string();
    let mut offset = text.len() as u64;
    let _ = tx.send(Bytes::from(out)).await;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if tx.is_closed() {
                return;
            }
            let mut buf = String::new();
            if file.seek(std::io::SeekFrom::Start(offset)).await.is_ok()
                && file.read_to_string(&mut buf).await.is_ok()
                && !buf.is_empty()
            {
                // Only whole lines; a line still being written waits.
                let whole = buf.rfind('\n').map_or(0, |i| i + 1);
                offset += whole as u64;
                let chunk: String = buf[..whole]
                    .lines()
                    .filter_map(|l| render(l, timestamps, since, &mut pending))
                    .collect();
                let mut chunk = chunk.into_bytes();
                chunk.truncate(remaining);
                remaining -= chunk.len();
                if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
                    return;
                }
                if remaining == 0 {
                    return;
                }
            }
            // The stream ends when the pod is gone or the container was started again.
            let alive = api
                .get(pods, &ns, &name)
                .ok()
                .filter(|p| meta::uid(p) == uid);
            let restarted = alive
                .as_ref()
                .and_then(|p| status_of(p, &container))
                .and_then(|s| s.get("restartCount"))
                .and_then(Value::as_u64)
                != Some(n);
            if alive.is_none() || restarted {
                return;
            }
        }
    });
    let stream = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|o| o.map(Ok::<_, std::convert::Infallible>))
    });
    Ok(resp.body(Body::from_stream(stream)).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_lines_render_as_kubectl_logs_prints_them() {
        let mut p = Pending::default();
        assert_eq!(
            render("2026-12-01T10:00:00.1Z stdout F hello", false, None, &mut p).as_deref(),
            Some("hello\n")
        );
        assert_eq!(
            render("2026-12-01T10:00:00.2Z stdout P par", true, None, &mut p),
            None
        );
        assert_eq!(
            render("2026-12-01T10:00:00.3Z stdout F tial", true, None, &mut p).as_deref(),
            Some("2026-12-01T10:00:00.2Z partial\n")
        );
    }

    #[test]
    fn lines_before_since_are_skipped() {
        let since: jiff::Timestamp = "2026-12-01T10:00:01Z".parse().unwrap();
        let mut p = Pending::default();
        let r = |l: &str, p: &mut Pending| render(l, false, Some(since), p);
        assert_eq!(r("2026-12-01T10:00:00.9Z stdout F old", &mut p), None);
        assert_eq!(r("2026-12-01T10:00:00.95Z stdout P ol", &mut p), None);
        assert_eq!(
            r("2026-12-01T10:00:01Z stdout F new", &mut p).as_deref(),
            Some("new\n")
        );
    }

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn log_options_are_validated_in_kube_apiservers_words() {
        let e = LogOptions::parse(&q(&[("sinceSeconds", "0")]), "web").unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "PodLogOptions \"web\" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0"
        );
        let e = LogOptions::parse(
            &q(&[("sinceSeconds", "5"), ("sinceTime", "2026-12-01T10:00:00Z")]),
            "web",
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "PodLogOptions \"web\" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
        );
        let e =
            LogOptions::parse(&q(&[("tailLines", "-2"), ("limitBytes", "0")]), "web").unwrap_err();
        assert_eq!(
            e.message,
            "PodLogOptions \"web\" is invalid: [tailLines: Invalid value: -2: must be greater than or equal to 0, limitBytes: Invalid value: 0: must be greater than 0]"
        );
        let e = LogOptions::parse(&q(&[("tailLines", "x")]), "web").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "strconv.ParseInt: parsing \"x\": invalid syntax")
        );
        let o = LogOptions::parse(
            &q(&[
                ("sinceSeconds", "10"),
                ("tailLines", "3"),
                ("limitBytes", "7"),
            ]),
            "web",
        )
        .unwrap();
        let now: jiff::Timestamp = "2026-12-01T10:00:10Z".parse().unwrap();
        assert_eq!(o.since(now), Some("2026-12-01T10:00:00Z".parse().unwrap()));
        assert_eq!((o.tail_lines, o.limit_bytes), (Some(3), Some(7)));
        let o = LogOptions::parse(&q(&[("sinceTime", "2026-12-01T09:00:00Z")]), "web").unwrap();
        assert_eq!(o.since(now), Some("2026-12-01T09:00:00Z".parse().unwrap()));
    }
}
