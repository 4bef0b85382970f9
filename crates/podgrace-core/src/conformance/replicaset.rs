//! Adapters for the ReplicaSet controller's vectors: `slowStartBatch`
//! (`pkg/controller/replicaset/replica_set_test.go` `TestSlowStartBatch`) and
//! `ActivePodsWithRanks.Less`, the scale-down victim order
//! (`pkg/controller/controller_utils_test.go` `TestSortingActivePodsWithRanks`).

use super::{Check, VectorError};
use crate::rules::podutil::time_ms;
use crate::rules::replicaset as rs;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    match c.function() {
        "replicaset.slowStartBatch" => slow_start_batch(c),
        "controller.ActivePodsWithRanks.Less" => active_pods_with_ranks(c),
        _ => Err(c.bad("function", "unknown replicaset function")),
    }
}

fn count(c: &Check<'_>, key: &str) -> Result<usize, VectorError> {
    usize::try_from(c.input_i64(key)?)
        .ok()
        .filter(|n| *n <= 1_000_000)
        .ok_or_else(|| c.bad(key, "expected a count from 0 to 1000000"))
}

/// The batches of `slow_start_batches`, each call succeeding while fewer than `callLimit` calls
/// were made, the batches ending after the first batch with a failure (as upstream's test
/// function counts them).
fn slow_start_batch(c: &mut Check<'_>) -> Result<(), VectorError> {
    let n = count(c, "count")?;
    if count(c, "initialBatchSize")? != rs::SLOW_START_INITIAL_BATCH_SIZE {
        return Err(c.bad(
            "initialBatchSize",
            "the controller's initial batch size is 1",
        ));
    }
    let limit = count(c, "callLimit")?;
    let (mut calls, mut failed) = (0usize, false);
    for batch in rs::slow_start_batches(n) {
        calls += batch;
        if calls > limit {
            failed = true;
            break;
        }
    }
    c.expect_eq("callCount", calls);
    c.expect_eq("successes", calls.min(limit));
    c.expect_eq("error", failed);
    Ok(())
}

fn pods(c: &Check<'_>) -> Result<Vec<Pod>, VectorError> {
    c.input_array("pods")?
        .iter()
        .map(|v| serde_json::from_value::<Pod>(v.clone()).map_err(|e| c.bad("pods", e.to_string())))
        .collect()
}

fn flag(c: &Check<'_>, key: &str) -> Result<bool, VectorError> {
    c.input_opt_bool(key)?
        .ok_or_else(|| c.bad(key, "expected a boolean"))
}

fn active_pods_with_ranks(c: &mut Check<'_>) -> Result<(), VectorError> {
    let pods = pods(c)?;
    let ranks: Vec<usize> = c
        .input_array("ranks")?
        .iter()
        .map(|v| {
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| c.bad("ranks", "expected counts"))
        })
        .collect::<Result<_, _>>()?;
    if pods.len() != 2 || ranks.len() != 2 {
        return Err(c.bad("pods", "expected two pods and two ranks"));
    }
    let now: Time = serde_json::from_value(Value::String(c.input_str("now")?.to_string()))
        .map_err(|e| c.bad("now", e.to_string()))?;
    let f = rs::Features {
        pod_deletion_cost: flag(c, "PodDeletionCost")?,
        logarithmic_scale_down: flag(c, "LogarithmicScaleDown")?,
        terminating_replicas: false,
    };
    let now = time_ms(&now);
    c.expect_eq(
        "less01",
        rs::deletes_before(&pods[0], ranks[0], &pods[1], ranks[1], now, f),
    );
    c.expect_eq(
        "less10",
        rs::deletes_before(&pods[1], ranks[1], &pods[0], ranks[0], now, f),
    );
    Ok(())
}
