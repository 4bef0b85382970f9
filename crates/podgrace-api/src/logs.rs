//! The `pods/log` subresource, read from the kubelet's container log files in the CRI
//! format (`2016-10-06T00:17:09.669794202Z stdout F the line`), under
//! `LOG_DIR/NAMESPACE_POD_UID/CONTAINER/RESTARTCOUNT.log` as the kubelet lays them out.
//! Options: `container`, `follow`, `previous`, `timestamps`, `tailLines`, `limitBytes`.
//!
//! Upstream: `pkg/registry/core/pod/rest/log.go` and `pkg/registry/core/pod/strategy.go`
//! (`LogLocation`: the container choice and its errors), `pkg/kubelet/kuberuntime/logs/
//! logs.go` (`ReadLogs`: the CRI format, partial lines, `--timestamps`, `--tail`,
//! `--limit-bytes`, `--follow`), `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (paths).

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
use crate::status::ApiError;

/// The directory of a pod's logs (`NAMESPACE_POD_UID`).
pub fn pod_dir(namespace: &str, pod: &str, uid: &str) -> String {
    format!("{namespace}_{pod}_{uid}")
}

/// One CRI log line as `kubectl logs` prints it: the content (a partial line `P` is joined
/// with the next), with the timestamp first when asked.
pub fn render(line: &str, timestamps: bool, pending: &mut String) -> Option<String> {
    let mut parts = line.splitn(4, ' ');
    let ts = parts.next()?;
    let _stream = parts.next()?;
    let tag = parts.next()?;
    let content = parts.next().unwrap_or("");
    pending.push_str(content);
    if tag == "P" {
        return None;
    }
    let text = std::mem::take(pending);
    Some(if timestamps {
        format!("{ts} {text}\n")
    } else {
        format!("{text}\n")
    })
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
    let tail: Option<usize> = q.get("tailLines").and_then(|v| v.parse().ok());
    let limit: Option<usize> = q.get("limitBytes").and_then(|v| v.parse().ok());
    let st = status_of(&pod, &container);
    let waiting = || {
        let reason = st
            .and_then(|s| s.pointer("/state/waiting/reason"))
            .and_then(Value::as_str)
            .unwrap_or("ContainerCreating");
        ApiError::bad_request(format!(
            "container {container:?} in pod {name:?} is waiting to start: {reason}"
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
    let mut pending = String::new();
    let mut lines: Vec<String> = text
        .lines()
        .filter_map(|l| render(l, timestamps, &mut pending))
        .collect();
    if let Some(t) = tail {
        let skip = lines.len().saturating_sub(t);
        lines.drain(..skip);
    }
    let mut out: Vec<u8> = lines.concat().into_bytes();
    if let Some(l) = limit {
        out.truncate(l);
    }
    let resp = Response::builder()
        .status(200)
        .header("content-type", "text/plain");
    if !follow || limit.is_some_and(|l| out.len() >= l) {
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
                    .filter_map(|l| render(l, timestamps, &mut pending))
                    .collect();
                if !chunk.is_empty() && tx.send(Bytes::from(chunk)).await.is_err() {
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
        let mut p = String::new();
        assert_eq!(
            render("2026-12-01T10:00:00.1Z stdout F hello", false, &mut p).as_deref(),
            Some("hello\n")
        );
        assert_eq!(
            render("2026-12-01T10:00:00.2Z stdout P par", true, &mut p),
            None
        );
        assert_eq!(
            render("2026-12-01T10:00:00.3Z stdout F tial", true, &mut p).as_deref(),
            Some("2026-12-01T10:00:00.3Z partial\n")
        );
    }
}
