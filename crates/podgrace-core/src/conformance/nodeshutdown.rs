//! Vectors of graceful node shutdown: `migrateConfig` and `groupByPriority`.

use super::{Check, VectorError};
use crate::rules::nodeshutdown::{
    group_by_priority, migrate_config, ShutdownGracePeriodByPodPriority,
};
use serde_json::{json, Value};

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    match c.function() {
        "nodeshutdown.migrateConfig" => migrate(c),
        "nodeshutdown.groupByPriority" => group(c),
        _ => Err(c.bad("function", "unknown node shutdown function")),
    }
}

fn groups_json(groups: &Option<Vec<ShutdownGracePeriodByPodPriority>>) -> Value {
    match groups {
        None => Value::Null,
        Some(gs) => gs
            .iter()
            .map(|g| json!({"priority": g.priority, "shutdownGracePeriodSeconds": g.shutdown_grace_period_seconds}))
            .collect(),
    }
}

fn migrate(c: &mut Check<'_>) -> Result<(), VectorError> {
    let total = c.input_i64("shutdownGracePeriod_s")?;
    let critical = c.input_i64("shutdownGracePeriodCriticalPods_s")?;
    c.expect_eq(
        "shutdownGracePeriodByPodPriority",
        groups_json(&migrate_config(total, critical)),
    );
    Ok(())
}

/// Seconds from `300s`, `5m` or `300`.
fn seconds(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    super::eviction::parse_duration(s).and_then(|d| i64::try_from(d.as_secs()).ok())
}

fn parse_groups(c: &Check<'_>) -> Result<Vec<ShutdownGracePeriodByPodPriority>, VectorError> {
    match c.input("groups")? {
        Value::String(s) => {
            let args = s
                .trim()
                .strip_prefix("migrateConfig(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| c.bad("groups", "expected migrateConfig(TOTAL,CRITICAL)"))?;
            let (a, b) = args
                .split_once(',')
                .ok_or_else(|| c.bad("groups", "expected two arguments"))?;
            let (a, b) = (
                seconds(a).ok_or_else(|| c.bad("groups", "bad duration"))?,
                seconds(b).ok_or_else(|| c.bad("groups", "bad duration"))?,
            );
            Ok(migrate_config(a, b).unwrap_or_default())
        }
        Value::Array(arr) => arr
            .iter()
            .map(|g| {
                let o = g
                    .as_object()
                    .ok_or_else(|| c.bad("groups", "a group must be an object"))?;
                if let Some(k) = o.keys().find(|k| *k != "priority" && *k != "period") {
                    return Err(c.bad("groups", format!("unknown group key {k:?}")));
                }
                let priority = o
                    .get("priority")
                    .and_then(Value::as_i64)
                    .and_then(|p| i32::try_from(p).ok())
                    .ok_or_else(|| c.bad("groups", "priority"))?;
                let period = o
                    .get("period")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| c.bad("groups", "period"))?;
                Ok(ShutdownGracePeriodByPodPriority {
                    priority,
                    shutdown_grace_period_seconds: period,
                })
            })
            .collect(),
        _ => Err(c.bad("groups", "expected an array or migrateConfig(...)")),
    }
}

fn group(c: &mut Check<'_>) -> Result<(), VectorError> {
    let groups = parse_groups(c)?;
    let arr = c.input_array("pods")?;
    let mut pods = Vec::new();
    for p in arr {
        let o = p
            .as_object()
            .ok_or_else(|| c.bad("pods", "a pod must be an object"))?;
        if let Some(k) = o.keys().find(|k| *k != "name" && *k != "priority") {
            return Err(c.bad("pods", format!("unknown pod key {k:?}")));
        }
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| c.bad("pods", "name"))?;
        let priority = match o.get("priority") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .and_then(|p| i32::try_from(p).ok())
                    .ok_or_else(|| c.bad("pods", "priority"))?,
            ),
        };
        pods.push((name.to_string(), priority));
    }
    let out = group_by_priority(&groups, &pods).map_err(|e| c.bad("groups", e.to_string()))?;
    let Some(want) = c.expected("groups") else {
        return Ok(());
    };
    let want = want
        .as_array()
        .ok_or_else(|| c.bad("groups", "expected an array"))?;
    if want.len() != out.len() {
        c.mismatch(format!(
            "groups: expected {} groups, got {}",
            want.len(),
            out.len()
        ));
        return Ok(());
    }
    for (i, (w, g)) in want.iter().zip(&out).enumerate() {
        let w = w
            .as_object()
            .ok_or_else(|| c.bad("groups", "expected objects"))?;
        for (k, wv) in w {
            let got: Value = match k.as_str() {
                "priority" => g.group.priority.into(),
                "period" => g.group.shutdown_grace_period_seconds.into(),
                "pods" => g.pods.clone().into(),
                _ => return Err(c.bad("groups", format!("unknown expected group key {k:?}"))),
            };
            if !super::json_eq(wv, &got) {
                c.mismatch(format!("groups[{i}].{k}: expected {wv}, got {got}"));
            }
        }
    }
    Ok(())
}
