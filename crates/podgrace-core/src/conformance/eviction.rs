//! Vectors of the eviction manager: ranking, threshold order and `synchronize`.

use super::{Check, VectorError};
use crate::rules::eviction::{
    self as ev, admit, AdmitPod, EvictionConfig, EvictionManager, EvictionSignal,
    NodePressureCondition, Observation, PodEvictionStats, QosClass, RankFn, SyncOutcome,
};
use crate::rules::runtime::NodeOs;
use crate::KubeVersion;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    let f = c.function();
    if f == "eviction.managerImpl.synchronize" {
        return synchronize(c);
    }
    if f.starts_with("eviction byEvictionPriority") {
        return threshold_order(c);
    }
    let keys: &[RankFn] = match f {
        "eviction ranking exceedMemoryRequests" => &[ev::exceed_memory_requests],
        "eviction ranking exceedDiskRequests" => &[ev::exceed_disk_requests],
        "eviction ranking priority" => &[ev::priority],
        "eviction ranking memory (usage minus request, desc)" => &[ev::memory],
        "eviction disk ranking (usage minus ephemeral request, desc)" => &[ev::disk],
        "eviction rankMemoryPressure = orderedBy(exceedMemoryRequests, priority, memory)" => {
            ev::RANK_MEMORY_PRESSURE
        }
        "eviction rankPIDPressure = orderedBy(priority, process)" => ev::RANK_PID_PRESSURE,
        "eviction rankDiskPressure = orderedBy(exceedDiskRequests, priority, disk)" => {
            ev::RANK_DISK_PRESSURE
        }
        _ => return Err(c.bad("function", "unknown eviction function")),
    };
    ranking(c, keys, f.contains("isk"))
}

/// `low` / `default` / `high` as in upstream's eviction tests (−1 / 0 / 1), or an integer.
fn parse_priority(c: &Check<'_>, v: &Value) -> Result<i32, VectorError> {
    match v {
        Value::String(s) => match s.as_str() {
            "low" => Ok(-1),
            "default" => Ok(0),
            "high" => Ok(1),
            _ => Err(c.bad("pods", format!("unknown priority {s:?}"))),
        },
        _ => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| c.bad("pods", format!("bad priority {v}"))),
    }
}

/// A quantity as the kubelet reads one (`resource.ParseQuantity`, then `Value()`).
fn parse_quantity(s: &str) -> Result<i64, crate::rules::quantity::QuantityError> {
    crate::rules::quantity::Quantity::parse(s).map(|q| q.value())
}

fn quantity(c: &Check<'_>, key: &str, v: &Value) -> Result<i64, VectorError> {
    match v {
        Value::String(s) => {
            let mut total: i64 = 0;
            for part in s.split('+') {
                let q = parse_quantity(part).map_err(|e| c.bad(key, e.to_string()))?;
                total = total.checked_add(q).ok_or_else(|| c.bad(key, "overflow"))?;
            }
            Ok(total)
        }
        _ => v
            .as_i64()
            .ok_or_else(|| c.bad(key, format!("bad quantity {v}"))),
    }
}

/// One pod object of a ranking or synchronize vector; every key must be known.
fn parse_pod(c: &Check<'_>, v: &Value, disk: bool) -> Result<PodEvictionStats, VectorError> {
    let obj = v
        .as_object()
        .ok_or_else(|| c.bad("pods", "a pod must be an object"))?;
    let mut p = PodEvictionStats::default();
    for (k, val) in obj {
        match k.as_str() {
            "name" => {
                p.name = val
                    .as_str()
                    .ok_or_else(|| c.bad("pods", "name must be a string"))?
                    .to_string()
            }
            "priority" => p.priority = Some(parse_priority(c, val)?),
            "mem_request" | "req" if !disk => p.memory_request_bytes = quantity(c, "pods", val)?,
            "usage" if !disk => p.memory_working_set_bytes = Some(quantity(c, "pods", val)?),
            "eph_request" | "eph_req" => {
                p.ephemeral_storage_request_bytes = quantity(c, "pods", val)?
            }
            "usage" | "usage_root+logs+local" if disk => {
                p.disk_usage = Some(quantity(c, "pods", val)?)
            }
            "pids" | "procs" => {
                p.process_count = Some(val.as_i64().ok_or_else(|| c.bad("pods", "process count"))?)
            }
            _ => return Err(c.bad("pods", format!("unknown pod key {k:?}"))),
        }
    }
    if p.name.is_empty() {
        return Err(c.bad("pods", "pod without a name"));
    }
    Ok(p)
}

/// The prose form "8 pods: ... (pod1 above,low,+500; pod2 above,low,+50; ...)": ephemeral
/// request 1Gi each, usage = request + the signed Mi delta; "above"/"below" must agree with it.
fn parse_prose_disk_pods(c: &Check<'_>, s: &str) -> Result<Vec<PodEvictionStats>, VectorError> {
    let bad = |m: &str| c.bad("pods", format!("{m} in {s:?}"));
    let inner = s
        .split_once('(')
        .and_then(|(_, r)| r.rsplit_once(')'))
        .map(|(i, _)| i)
        .ok_or_else(|| bad("no parenthesised pod list"))?;
    let request: i64 = 1 << 30;
    let mut pods = Vec::new();
    for entry in inner.split(';') {
        let (name, rest) = entry
            .trim()
            .split_once(' ')
            .ok_or_else(|| bad("entry without fields"))?;
        let fields: Vec<&str> = rest.split(',').map(str::trim).collect();
        let [side, prio, delta] = fields.as_slice() else {
            return Err(bad("expected side,priority,delta"));
        };
        let delta_mi: i64 = delta.parse().map_err(|_| bad("bad delta"))?;
        let above = match *side {
            "above" => true,
            "below" => false,
            _ => return Err(bad("side must be above or below")),
        };
        if above != (delta_mi > 0) {
            return Err(bad("above/below disagrees with the delta"));
        }
        pods.push(PodEvictionStats {
            name: name.to_string(),
            priority: Some(parse_priority(c, &Value::String(prio.to_string()))?),
            ephemeral_storage_request_bytes: request,
            disk_usage: Some(request + delta_mi * (1 << 20)),
            ..Default::default()
        });
    }
    Ok(pods)
}

/// Index of the pod `token` names: the exact name, or a name starting with `token` followed by
/// a space or a dash (`pod8` → `pod8 below-...`, `high` → `high-priority`).
fn find_pod(
    c: &Check<'_>,
    key: &str,
    pods: &[PodEvictionStats],
    token: &str,
) -> Result<usize, VectorError> {
    let matches: Vec<usize> = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            p.name == token
                || p.name
                    .strip_prefix(token)
                    .is_some_and(|r| r.starts_with(' ') || r.starts_with('-'))
        })
        .map(|(i, _)| i)
        .collect();
    let exact: Vec<usize> = matches
        .iter()
        .copied()
        .filter(|i| pods[*i].name == token)
        .collect();
    match (exact.as_slice(), matches.as_slice()) {
        ([i], _) | ([], [i]) => Ok(*i),
        _ => Err(c.bad(key, format!("{token:?} names no single pod"))),
    }
}

fn ranking(c: &mut Check<'_>, keys: &[RankFn], disk: bool) -> Result<(), VectorError> {
    let pods_v = c.input("pods")?;
    let pods = match pods_v {
        Value::Array(a) => a
            .iter()
            .map(|p| parse_pod(c, p, disk))
            .collect::<Result<Vec<_>, _>>()?,
        Value::String(s) => parse_prose_disk_pods(c, s)?,
        _ => return Err(c.bad("pods", "expected an array or a description")),
    };
    let mut input: Vec<PodEvictionStats> = match c.input_opt("input_order") {
        None => pods.clone(),
        Some(v) => {
            let arr = v
                .as_array()
                .ok_or_else(|| c.bad("input_order", "expected an array"))?;
            let mut out = Vec::new();
            for t in arr {
                let t = t
                    .as_str()
                    .ok_or_else(|| c.bad("input_order", "expected strings"))?;
                out.push(pods[find_pod(c, "input_order", &pods, t)?].clone());
            }
            if out.len() != pods.len() {
                return Err(c.bad("input_order", "must list every pod once"));
            }
            out
        }
    };
    ev::rank(&mut input, keys);
    let got: Vec<String> = input.iter().map(|p| p.name.clone()).collect();
    if let Some(exp) = c.expected("order") {
        let arr = exp
            .as_array()
            .ok_or_else(|| c.bad("order", "expected an array"))?;
        let mut want = Vec::new();
        for t in arr {
            let t = t
                .as_str()
                .ok_or_else(|| c.bad("order", "expected strings"))?;
            want.push(pods[find_pod(c, "order", &pods, t)?].name.clone());
        }
        if want != got {
            c.mismatch(format!("order: expected {want:?}, got {got:?}"));
        }
    }
    Ok(())
}

fn threshold_order(c: &mut Check<'_>) -> Result<(), VectorError> {
    let arr = c.input_array("thresholds")?;
    let mut signals = Vec::new();
    for v in arr {
        let name = v
            .as_str()
            .ok_or_else(|| c.bad("thresholds", "expected signal names"))?;
        signals.push(
            EvictionSignal::from_name(name)
                .ok_or_else(|| c.bad("thresholds", format!("unknown signal {name}")))?,
        );
    }
    ev::sort_signals_by_eviction_priority(&mut signals);
    let got: Vec<Value> = signals.iter().map(|s| Value::from(s.name())).collect();
    c.expect_eq("order", got);
    Ok(())
}

/// `5m`, `2m`, `1h30m`, `90s`, `200ms`.
pub(super) fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let n_end = rest.find(|ch: char| !ch.is_ascii_digit())?;
        if n_end == 0 {
            return None;
        }
        let n: u64 = rest[..n_end].parse().ok()?;
        rest = &rest[n_end..];
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else if rest.starts_with('s') {
            (Duration::from_secs(1), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(60), 1)
        } else if rest.starts_with('h') {
            (Duration::from_secs(3600), 1)
        } else {
            return None;
        };
        total = total.checked_add(unit.checked_mul(u32::try_from(n).ok()?)?)?;
        rest = &rest[len..];
    }
    Some(total)
}

/// A duration in the short form the vectors use (`1m`, `6m`, `1m30s`, `1h0m0s`, `0s`).
fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, (s / 60) % 60, s % 60);
    match (h, m, sec) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

struct SyncSetup {
    config: EvictionConfig,
    /// Soft thresholds only (for the soft half of the PID vector).
    soft_only: EvictionConfig,
    hard_only: EvictionConfig,
}

fn parse_config(c: &Check<'_>) -> Result<SyncSetup, VectorError> {
    let obj = c
        .input("config")?
        .as_object()
        .ok_or_else(|| c.bad("config", "expected an object"))?;
    let mut max = ev::DEFAULT_EVICTION_MAX_POD_GRACE_PERIOD_SECONDS;
    let mut transition = Duration::ZERO;
    let mut hard = None;
    let mut soft = Vec::new();
    for (k, v) in obj {
        let s = || {
            v.as_str()
                .ok_or_else(|| c.bad("config", format!("{k} must be a string")))
        };
        match k.as_str() {
            "MaxPodGracePeriodSeconds" => {
                max = v
                    .as_i64()
                    .ok_or_else(|| c.bad("config", "MaxPodGracePeriodSeconds must be an integer"))?
            }
            "PressureTransitionPeriod" => {
                transition = parse_duration(s()?)
                    .ok_or_else(|| c.bad("config", "bad PressureTransitionPeriod"))?
            }
            "hard" => {
                let t = ev::parse_threshold(s()?, Duration::ZERO)
                    .map_err(|e| c.bad("config", e.to_string()))?;
                hard = Some(t.into_iter().collect());
            }
            "soft" => {
                let (stmt, grace) = s()?
                    .split_once(" for ")
                    .ok_or_else(|| c.bad("config", "soft: expected 'THRESHOLD for DURATION'"))?;
                let grace = parse_duration(grace)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| c.bad("config", "soft thresholds need a grace period"))?;
                soft.extend(
                    ev::parse_threshold(stmt, grace).map_err(|e| c.bad("config", e.to_string()))?,
                );
            }
            _ => return Err(c.bad("config", format!("unknown config key {k:?}"))),
        }
    }
    // No evictionHard configured: the kubelet defaults apply (§5.5).
    let hard = hard.unwrap_or_else(|| ev::default_eviction_hard(NodeOs::Linux));
    let mk = |thresholds: Vec<ev::Threshold>| EvictionConfig {
        thresholds,
        eviction_max_pod_grace_period_seconds: max,
        pressure_transition_period: transition,
    };
    Ok(SyncSetup {
        config: mk(hard.iter().chain(soft.iter()).copied().collect()),
        soft_only: mk(soft),
        hard_only: mk(hard),
    })
}

fn memory_obs(available: i64) -> BTreeMap<EvictionSignal, Observation> {
    BTreeMap::from([(
        EvictionSignal::MemoryAvailable,
        Observation::new(available, None),
    )])
}

/// Checks one expected outcome object (or the top-level expected keys when `obj` is `None`).
fn check_outcome(
    c: &mut Check<'_>,
    label: &str,
    key: &str,
    want: &Value,
    out: &SyncOutcome,
    first_ranked: Option<&str>,
) -> Result<(), VectorError> {
    let evicted = out.eviction.as_ref().map(|e| e.pod.as_str());
    let be = AdmitPod {
        qos: QosClass::BestEffort,
        critical: false,
        tolerates_memory_pressure: false,
    };
    match key {
        "MemoryPressure" => {
            let got = out
                .node_conditions
                .contains(&NodePressureCondition::MemoryPressure);
            if Some(got) != want.as_bool() {
                c.mismatch(format!("{label}: expected {want}, got {got}"));
            }
        }
        "pod_killed" => {
            match want {
                Value::Bool(b) => {
                    if *b != evicted.is_some() {
                        c.mismatch(format!("{label}: expected {b}, got {evicted:?}"));
                    }
                }
                Value::String(s) if s == "ranked first" => {
                    if evicted.is_none() || evicted != first_ranked {
                        c.mismatch(format!("{label}: expected the first ranked pod {first_ranked:?}, got {evicted:?}"));
                    }
                }
                _ => return Err(c.bad(label, "expected a boolean or \"ranked first\"")),
            }
        }
        "gracePeriodOverride" => {
            let got = out.eviction.as_ref().map(|e| e.grace_period_override);
            if got != want.as_i64() {
                c.mismatch(format!("{label}: expected {want}, got {got:?}"));
            }
        }
        "admit_BestEffort" => {
            let got = admit(&out.node_conditions, be);
            if Some(got) != want.as_bool() {
                c.mismatch(format!("{label}: expected {want}, got {got}"));
            }
        }
        "admit_all" => {
            let got = [
                QosClass::BestEffort,
                QosClass::Burstable,
                QosClass::Guaranteed,
            ]
            .iter()
            .all(|q| admit(&out.node_conditions, AdmitPod { qos: *q, ..be }));
            if Some(got) != want.as_bool() {
                c.mismatch(format!("{label}: expected {want}, got {got}"));
            }
        }
        "admit" => {
            let obj = want
                .as_object()
                .ok_or_else(|| c.bad(label, "expected an object"))?;
            for (q, w) in obj {
                let qos = match q.as_str() {
                    "BestEffort" => QosClass::BestEffort,
                    "Burstable" => QosClass::Burstable,
                    "Guaranteed" => QosClass::Guaranteed,
                    _ => return Err(c.bad(label, format!("unknown QoS class {q}"))),
                };
                let got = admit(&out.node_conditions, AdmitPod { qos, ..be });
                if Some(got) != w.as_bool() {
                    c.mismatch(format!("{label}.{q}: expected {w}, got {got}"));
                }
            }
        }
        _ => return Err(c.bad(label, format!("unknown outcome key {key:?}"))),
    }
    Ok(())
}

/// The pods of upstream `TestMemoryPressure_VerifyPodStatus` (vectors without pods): one pod
/// below its 1Gi request (900Mi), one above its 100Mi request (700Mi), default priority.
fn memory_test_pods(tgps: Option<i64>) -> Vec<PodEvictionStats> {
    let pod = |name: &str, req: i64, ws: i64| PodEvictionStats {
        name: name.into(),
        priority: Some(0),
        termination_grace_period_seconds: tgps,
        memory_request_bytes: req << 20,
        memory_working_set_bytes: Some(ws << 20),
        ..Default::default()
    };
    vec![
        pod("below-requests", 1024, 900),
        pod("above-requests", 100, 700),
    ]
}

fn first_ranked(pods: &[PodEvictionStats], signal: EvictionSignal) -> Option<String> {
    let mut r = pods.to_vec();
    ev::rank(&mut r, ev::rank_keys_for(signal));
    r.into_iter().find(|p| !p.is_critical()).map(|p| p.name)
}

fn synchronize(c: &mut Check<'_>) -> Result<(), VectorError> {
    let v = KubeVersion::LATEST;
    let setup = parse_config(c)?;
    let sync_err = |c: &Check<'_>, e: ev::SynchronizeError| c.bad("config", e.to_string());
    if c.has_input("pods") {
        return pid_pressure(c, &setup);
    }
    let tgps = match c.input_opt("test_pods_tgps") {
        None => None,
        Some(Value::String(s)) if s.starts_with("unset") => None,
        Some(x) => Some(
            x.as_i64()
                .ok_or_else(|| c.bad("test_pods_tgps", "expected \"unset ...\" or seconds"))?,
        ),
    };
    let pods = memory_test_pods(tgps);
    let mut mgr = EvictionManager::new();
    if c.has_input("sequence") {
        // Steps: "hard threshold met", "<dur> later available=<Q> [(no threshold met)]",
        // "<dur> later still <Q>". Outcomes are checked at the `after_<dur>` keys.
        let steps = c.input_array("sequence")?;
        let hard_q = setup
            .config
            .thresholds
            .iter()
            .find(|t| t.is_hard() && t.signal == EvictionSignal::MemoryAvailable)
            .and_then(|t| t.quantity(None))
            .ok_or_else(|| c.bad("sequence", "no hard memory threshold to meet"))?;
        let mut now = Duration::ZERO;
        let mut last_available: Option<i64> = None;
        let mut outcomes: Vec<(Duration, SyncOutcome)> = Vec::new();
        for step in steps {
            let s = step
                .as_str()
                .ok_or_else(|| c.bad("sequence", "expected strings"))?;
            let (available, expect_none_met) = if s == "hard threshold met" {
                (hard_q / 2, false)
            } else {
                let (d, rest) = s
                    .split_once(" later ")
                    .ok_or_else(|| c.bad("sequence", format!("cannot read {s:?}")))?;
                now += parse_duration(d)
                    .ok_or_else(|| c.bad("sequence", format!("bad duration in {s:?}")))?;
                let (rest, note) = match rest.split_once(" (") {
                    Some((r, n)) => (r, Some(n.trim_end_matches(')'))),
                    None => (rest, None),
                };
                let q = if let Some(q) = rest.strip_prefix("available=") {
                    parse_quantity(q).map_err(|e| c.bad("sequence", e.to_string()))?
                } else if let Some(q) = rest.strip_prefix("still ") {
                    let q = parse_quantity(q).map_err(|e| c.bad("sequence", e.to_string()))?;
                    if Some(q) != last_available {
                        return Err(c.bad("sequence", format!("{s:?}: not the previous value")));
                    }
                    q
                } else {
                    return Err(c.bad("sequence", format!("cannot read {s:?}")));
                };
                match note {
                    None => (q, false),
                    Some("no threshold met") => (q, true),
                    Some(n) => return Err(c.bad("sequence", format!("unknown note {n:?}"))),
                }
            };
            last_available = Some(available);
            let out = mgr
                .synchronize(&setup.config, now, &memory_obs(available), &pods, v)
                .map_err(|e| sync_err(c, e))?;
            if expect_none_met && !out.thresholds_met.is_empty() {
                c.mismatch(format!(
                    "sequence {s:?}: thresholds met: {:?}",
                    out.thresholds_met
                ));
            }
            outcomes.push((now, out));
        }
        for (at, out) in &outcomes {
            let key = format!("after_{}", go_duration(*at));
            let Some(want) = c.expected(&key) else {
                continue;
            };
            let obj: &Map<String, Value> = want
                .as_object()
                .ok_or_else(|| c.bad(&key, "expected an object"))?;
            for (k, w) in obj {
                check_outcome(c, &format!("{key}.{k}"), k, w, out, None)?;
            }
        }
        return Ok(());
    }
    let available = quantity(c, "observed_available", c.input("observed_available")?)?;
    let obs = memory_obs(available);
    let mut out = mgr
        .synchronize(&setup.config, Duration::ZERO, &obs, &pods, v)
        .map_err(|e| sync_err(c, e))?;
    if let Some(d) = c.input_opt_str("time_since_first_observed")? {
        let d =
            parse_duration(d).ok_or_else(|| c.bad("time_since_first_observed", "bad duration"))?;
        out = mgr
            .synchronize(&setup.config, d, &obs, &pods, v)
            .map_err(|e| sync_err(c, e))?;
    }
    let first = out
        .eviction
        .as_ref()
        .map(|e| e.signal)
        .and_then(|s| first_ranked(&pods, s));
    for key in [
        "MemoryPressure",
        "pod_killed",
        "gracePeriodOverride",
        "admit",
    ] {
        if let Some(want) = c.expected(key) {
            check_outcome(c, key, key, want, &out, first.as_deref())?;
        }
    }
    Ok(())
}

/// `TestPIDPressure`: the pods' process counts against `totalPID`. The node's available PIDs are
/// taken as `totalPID − Σ pod processes` (the vector gives no separate node usage); the hard and
/// the soft threshold are run separately, the soft one for its grace period.
fn pid_pressure(c: &mut Check<'_>, setup: &SyncSetup) -> Result<(), VectorError> {
    let v = KubeVersion::LATEST;
    let arr = c.input_array("pods")?;
    let pods = arr
        .iter()
        .map(|p| parse_pod(c, p, false))
        .collect::<Result<Vec<_>, _>>()?;
    let total = c.input_i64("totalPID")?;
    let used: i64 = pods.iter().map(|p| p.process_count.unwrap_or(0)).sum();
    let obs = BTreeMap::from([(
        EvictionSignal::PidAvailable,
        Observation::new(total - used, Some(total)),
    )]);
    let run = |c: &Check<'_>, cfg: &EvictionConfig| -> Result<SyncOutcome, VectorError> {
        let mut m = EvictionManager::new();
        let grace = cfg
            .thresholds
            .iter()
            .map(|t| t.grace_period)
            .max()
            .unwrap_or_default();
        m.synchronize(cfg, Duration::ZERO, &obs, &pods, v)
            .map_err(|e| c.bad("config", e.to_string()))?;
        m.synchronize(cfg, grace, &obs, &pods, v)
            .map_err(|e| c.bad("config", e.to_string()))
    };
    let hard = run(c, &setup.hard_only)?;
    let soft = run(c, &setup.soft_only)?;
    let name = |o: &SyncOutcome| o.eviction.as_ref().map(|e| e.pod.clone());
    if let Some(want) = c.expected("evicted") {
        for (label, o) in [("hard", &hard), ("soft", &soft)] {
            if name(o).as_deref() != want.as_str() {
                c.mismatch(format!(
                    "evicted ({label}): expected {want}, got {:?}",
                    name(o)
                ));
            }
        }
    }
    let ov = |o: &SyncOutcome| {
        o.eviction
            .as_ref()
            .map(|e| e.grace_period_override)
            .map_or(Value::Null, Value::from)
    };
    c.expect_eq("soft_gracePeriodOverride", ov(&soft));
    c.expect_eq("hard_gracePeriodOverride", ov(&hard));
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(super::parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(
            super::parse_duration("1h30m"),
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            super::parse_duration("200ms"),
            Some(Duration::from_millis(200))
        );
        assert_eq!(super::parse_duration("5"), None);
        assert_eq!(super::parse_duration("m"), None);
    }
}
