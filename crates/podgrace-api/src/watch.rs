//! Watches: a stream of `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`
//! lines, served from the store's history ([`crate::store`]).
//!
//! A watch is a cursor (the last resourceVersion sent): on every write to its resource it
//! reads the history after the cursor, so it gets every event exactly once and in order, or,
//! when it fell behind the history, an `ERROR` event with a `410 Expired` Status and the end
//! of the stream (the client relists, as client-go's reflector does).
//!
//! Semantics, as kube-apiserver's cacher serves them: `resourceVersion` unset or `"0"` starts
//! with synthetic `ADDED` events for the current state; `resourceVersion=N` starts after N;
//! `sendInitialEvents=true` sends the state then, with `allowWatchBookmarks`, a `BOOKMARK`
//! annotated `k8s.io/initial-events-end: "true"`; bookmarks come every
//! [`crate::ApiConfig::bookmark_interval`] and 2 s before the timeout (`timeoutSeconds`, else
//! [min-request-timeout, 2×min-request-timeout) at random). A Table watch (`kubectl get -w`)
//! sends each object as a one-row Table, the column definitions only in the first.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go` (`Watch`),
//! `watch_cache.go` (`getAllEventsSinceLocked`), `cache_watcher.go` (`nextBookmarkTime`,
//! `convertToWatchEvent`), `handlers/watch.go` and `handlers/get.go` (`handleWatch`).

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::Api;
use crate::meta;
use crate::options::ListOptions;
use crate::resource::Resource;
use crate::status::ApiError;
use crate::store::{self, ReadAt, StoreError};
use crate::table::{self, IncludeObject};

struct Watcher {
    api: Api,
    r: &'static Resource,
    prefix: String,
    opts: ListOptions,
    table: Option<IncludeObject>,
    headers_sent: bool,
    tx: mpsc::Sender<Bytes>,
}

impl Watcher {
    fn encode(&mut self, ty: &str, obj: &Value) -> Bytes {
        let object = match (self.table, ty) {
            (Some(inc), "ADDED" | "MODIFIED" | "DELETED") => {
                let t = table::table(
                    self.r.kind,
                    &[obj],
                    jiff::Timestamp::now(),
                    self.api.config().kube_version,
                    inc,
                    !self.headers_sent,
                    json!({"resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or_default()}),
                );
                self.headers_sent = true;
                t
            }
            _ => obj.clone(),
        };
        let mut line =
            serde_json::to_vec(&json!({"type": ty, "object": object})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }
    /// Sends a stored object; its JSON is written as stored unless it must be converted (a
    /// Table, or an Event served as events.k8s.io/v1).
    async fn send_obj(&mut self, ty: &str, o: &store::Obj) -> bool {
        if self.table.is_none() && self.r.group != "events.k8s.io" {
            let line = format!("{{\"type\":\"{ty}\",\"object\":{}}}\n", o.object_json());
            return self.tx.send(Bytes::from(line)).await.is_ok();
        }
        let v = Api::present_obj(self.r, o);
        self.send(ty, &v).await
    }

    async fn send(&mut self, ty: &str, obj: &Value) -> bool {
        let b = self.encode(ty, obj);
        self.tx.send(b).await.is_ok()
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Value {
        let mut md = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"kind": self.r.kind, "apiVersion": self.r.api_version(), "metadata": md})
    }
    fn name_ok(&self, obj: &store::Stored) -> bool {
        Api::matches(self.r, &self.opts, obj)
    }

    async fn error(&mut self, e: ApiError) {
        let status = e.to_status();
        let _ = self.send("ERROR", &status).await;
    }

    async fn run(mut self, start: Start, deadline: Instant) {
        let storage = self.r.storage;
        let mut changes = self.api.subscribe(storage);
        let mut cursor = match start {
            Start::After(rv) => rv,
            Start::State { bookmark } => {
                let page = self.api.with_store(|s| {
                    s.list(storage, &self.prefix, None, 0, ReadAt::Latest, |o| {
                        Api::matches(self.r, &self.opts, o)
                    })
                });
                let page = match page {
                    Ok(p) => p,
                    Err(e) => {
                        self.error(ApiError::internal(e)).await;
                        return;
                    }
                };
                for (_, o) in &page.items {
                    if !self.send_obj("ADDED", o).await {
                        return;
                    }
                }
                if bookmark {
                    let b = self.bookmark(page.rv, true);
                    if !self.send("BOOKMARK", &b).await {
                        return;
                    }
                }
                page.rv
            }
        };
        let interval = self.api.config().bookmark_interval;
        let pre_timeout = deadline.checked_sub(Duration::from_secs(2));
        let mut next_bookmark = Instant::now() + interval;
        if let Some(p) = pre_timeout {
            next_bookmark = next_bookmark.min(p.max(Instant::now()));
        }
        loop {
            // Everything written after the cursor, in order.
            let events = self.api.with_store(|s| {
                s.events_since(storage, cursor)
                    .map(|evs| (evs, s.current_rv()))
            });
            match events {
                Ok((evs, _)) => {
                    for e in evs {
                        if !e.key.starts_with(&self.prefix) {
                            cursor = e.rv;
                            continue;
                        }
                        if let Some((ty, obj)) = store::watch_event(&e, |o| self.name_ok(o)) {
                            if !self.send_obj(ty.as_str(), &obj).await {
                                return;
                            }
                        }
                        cursor = e.rv;
                    }
                }
                Err(StoreError::Expired { requested, oldest }) => {
                    self.error(ApiError::expired(format!(
                        "too old resource version: {requested} ({oldest})"
                    )))
                    .await;
                    return;
                }
                Err(StoreError::TooLarge { requested, current }) => {
                    self.error(ApiError::too_large_rv(requested, current)).await;
                    return;
                }
                Err(e) => {
                    self.error(ApiError::internal(e)).await;
                    return;
                }
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tokio::time::sleep_until(next_bookmark), if self.opts.allow_bookmarks => {
                    // A bookmark says "you have everything up to here": send what is pending
                    // first, then the newest resourceVersion of the store.
                    let (evs, rv) = match self.api.with_store(|s| s.events_since(storage, cursor).map(|e| (e, s.current_rv()))) {
                        Ok(x) => x,
                        Err(_) => continue,
                    };
                    if evs.is_empty() {
                        let b = self.bookmark(rv, false);
                        if !self.send("BOOKMARK", &b).await {
                            return;
                        }
                        cursor = cursor.max(rv);
                    }
                    next_bookmark = Instant::now() + interval;
                    if let Some(p) = pre_timeout {
                        if p > Instant::now() {
                            next_bookmark = next_bookmark.min(p);
                        }
                    }
                }
                _ = self.tx.closed() => return,
            }
        }
    }
}

enum Start {
    /// Synthetic ADDED events for the current state first (then a bookmark if asked).
    State { bookmark: bool },
    /// Events after this resourceVersion.
    After(u64),
}

/// Starts a watch of `r` (in `namespace`, or all) with `opts`; `table` turns each object into
/// a one-row Table.
///
/// # Errors
/// 400 for a bad resourceVersion.
pub fn serve(
    api: Api,
    r: &'static Resource,
    namespace: Option<String>,
    opts: ListOptions,
    table: Option<IncludeObject>,
) -> Result<Response, ApiError> {
    let rv = opts.rv()?;
    let start = match (opts.send_initial_events, rv) {
        (Some(true), _) => Start::State {
            bookmark: opts.allow_bookmarks,
        },
        (Some(false), None) | (Some(false), Some(0)) => {
            Start::After(api.with_store(|s| s.current_rv()))
        }
        (_, None) | (_, Some(0)) => Start::State { bookmark: false },
        (_, Some(n)) => Start::After(n),
    };
    let timeout = match opts.timeout_seconds {
        Some(t) if t > 0 => Duration::from_secs(t),
        _ => {
            let min = api.config().min_request_timeout;
            let mut b = [0u8; 2];
            let _ = getrandom::fill(&mut b);
            let frac = f64::from(u16::from_le_bytes(b)) / 65536.0;
            min.mul_f64(1.0 + frac)
        }
    };
    let deadline = Instant::now() + timeout;
    let (tx, mut rx) = mpsc::channel::<Bytes>(256);
    let w = Watcher {
        prefix: Api::prefix(r, namespace.as_deref()),
        api,
        r,
        opts,
        table,
        headers_sent: false,
        tx,
    };
    tokio::spawn(w.run(start, deadline));
    let stream = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|o| o.map(Ok::<_, std::convert::Infallible>))
    });
    let ct = if table.is_some() {
        crate::http::TABLE_CONTENT_TYPE
    } else {
        "application/json"
    };
    Ok(Response::builder()
        .status(200)
        .header("content-type", ct)
        .body(Body::from_stream(stream))
        .unwrap_or_default())
}

/// The name of the object in a watch line (for tests).
pub fn event_name(line: &Value) -> &str {
    line.get("object").map(meta::name).unwrap_or("")
}
