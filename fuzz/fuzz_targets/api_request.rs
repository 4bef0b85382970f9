//! serve's request decoding, end to end through the REST layer (`podgrace_api::http::handle`,
//! what the TLS listener serves after the token check): a fuzzed sequence of up to 8 requests
//! against a fresh API server, each `METHOD TARGET\nCONTENT-TYPE\nBODY`, separated by `\n%%\n`.
//! That covers paths, query parameters (selectors, resourceVersions, continue tokens, watch and
//! delete options), JSON and protobuf bodies, the three patch types and every verb.
//!
//! Checked: no panic, and no 5xx answer: bad input is the client's error (4xx), as
//! kube-apiserver answers it. The one 5xx kube-apiserver gives for a request alone is allowed:
//! a resourceVersion newer than the store's is `504 Timeout` (`Too large resource version`,
//! cause `ResourceVersionTooLarge`, after its 3 s wait for the watch cache). Watch responses
//! are read as far as they are ready.
#![no_main]

use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use podgrace_api::{Api, ApiConfig};

const SEP: &[u8] = b"\n%%\n";

fn requests(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while out.len() < 8 {
        match rest.windows(SEP.len()).position(|w| w == SEP) {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + SEP.len()..];
            }
            None => {
                out.push(rest);
                break;
            }
        }
    }
    out
}

fn line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let api = Api::new(ApiConfig {
            history: 16,
            min_request_timeout: Duration::from_secs(5),
            ..ApiConfig::default()
        });
        for req in requests(data) {
            let (first, rest) = line(req);
            let (ct, body) = line(rest);
            let first = String::from_utf8_lossy(first);
            let (method, target) = first.split_once(' ').unwrap_or(("GET", &first));
            let mut b = axum::http::Request::builder().method(method).uri(target);
            if !ct.is_empty() {
                b = b.header("content-type", ct);
            }
            let Ok(request) = b.body(Body::from(body.to_vec())) else {
                continue;
            };
            let response = podgrace_api::http::handle(api.clone(), request).await;
            let status = response.status();
            let mut body = response.into_body();
            let mut text = Vec::new();
            for _ in 0..64 {
                tokio::task::yield_now().await;
                match tokio::time::timeout(Duration::ZERO, body.frame()).await {
                    Ok(Some(Ok(f))) => {
                        if let Ok(d) = f.into_data() {
                            text.extend_from_slice(&d);
                        }
                    }
                    _ => break,
                }
            }
            let too_large_rv = status.as_u16() == 504
                && String::from_utf8_lossy(&text)
                    .contains("\"reason\":\"ResourceVersionTooLarge\"");
            assert!(
                status.as_u16() < 500 || too_large_rv,
                "{method} {target} ({}): {status} {}",
                String::from_utf8_lossy(ct),
                String::from_utf8_lossy(&text)
            );
        }
    });
});
