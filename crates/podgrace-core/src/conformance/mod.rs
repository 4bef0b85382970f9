//! Conformance: upstream-derived test vectors evaluated against the rules.
//!
//! A vector file is JSON Lines; each line is
//! `{function, source, inputs, expected, version, note?}` (see `spec/termination.md` §10).
//! `function` names the upstream function; an adapter per upstream owner (one submodule each)
//! reads the inputs, calls the podgrace rule and compares every expected field, including the
//! `derived_*` ones. An adapter must consume every input key and check every expected key: a
//! key it does not know is an error ([`VectorError`]), never silently passed.
//!
//! The shared vector file is compiled in as [`BUILTIN_VECTORS`].

mod apiserver;
mod controllers;
mod disruption;
mod endpoints;
mod eviction;
mod kuberuntime;
mod nodeshutdown;
mod podworker;
mod replicaset;
mod resources;
mod restart;
mod runtime;
mod status;
mod validation;

use serde::Deserialize;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The vectors of `spec/vectors.jsonl`, compiled in (a copy kept identical to the shared file).
pub const SHARED_VECTORS: &str = include_str!("../../vectors/vectors.jsonl");

/// podgrace's own vectors: upstream tables the shared file lacks (`getPhase`, `printPod`,
/// `ValidateEndpointIP`, the controllers' `deployment/util`, `ActivePodsWithRanks`,
/// `slowStartBatch`, the disruption controller's sync, `FindPort`, `podToEndpoint`, the kubelet's
/// cgroup resources: `MilliCPUToQuota`, `calculateLinuxResources`, `GetContainerOOMScoreAdjust`,
/// `ResourceConfigForPod`) and rules taken from the code or from the recorded 1.32 cluster
/// (`shared/cases/real-cluster-1.32.md`), each marked in its `source`, `version` and `note`.
pub const PODGRACE_VECTORS: &str = include_str!("../../vectors/podgrace.jsonl");

/// Every built-in vector: [`SHARED_VECTORS`] (lines 1 to 96) then [`PODGRACE_VECTORS`] (from
/// line 97 on).
pub const BUILTIN_VECTORS: &str = concat!(
    include_str!("../../vectors/vectors.jsonl"),
    include_str!("../../vectors/podgrace.jsonl")
);

/// One test vector.
#[derive(Debug, Clone, Deserialize)]
pub struct Vector {
    /// Upstream function checked, e.g. `rest.BeforeDelete`.
    pub function: String,
    /// `path#TestName/case` in the upstream repository.
    pub source: String,
    /// The inputs of the upstream function, by the adapter's key names (seconds where a key says
    /// so).
    pub inputs: Map<String, Value>,
    /// The values the upstream test expects, by the adapter's key names; a key left out is not
    /// checked.
    pub expected: Map<String, Value>,
    /// Upstream version the vector was taken from.
    #[serde(default)]
    pub version: String,
    /// Why the vector is there or what it pins down, for the reader.
    #[serde(default)]
    pub note: Option<String>,
    /// 1-based line in the vector file (filled in by [`parse_vectors`]).
    #[serde(skip)]
    pub line: usize,
}

/// A vector that cannot be evaluated: the file or the vector is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VectorError {
    /// The line is not a JSON object of the vector shape.
    #[error("line {line}: not a test vector: {message}")]
    Syntax {
        /// 1-based line in the vector file.
        line: usize,
        /// What the JSON parser said.
        message: String,
    },
    /// The file holds no vector at all.
    #[error("no test vector in the file")]
    Empty,
    /// No adapter exists for this upstream function.
    #[error("line {line}: unknown function {function:?}")]
    UnknownFunction {
        /// 1-based line in the vector file.
        line: usize,
        /// The `function` as written.
        function: String,
    },
    /// The adapter does not know this input key.
    #[error("line {line}: function {function:?}: unknown input key {key:?}")]
    UnknownInput {
        /// 1-based line in the vector file.
        line: usize,
        /// The vector's `function`.
        function: String,
        /// The input key as written.
        key: String,
    },
    /// The adapter does not know this expected key.
    #[error("line {line}: function {function:?}: unknown expected key {key:?}")]
    UnknownExpected {
        /// 1-based line in the vector file.
        line: usize,
        /// The vector's `function`.
        function: String,
        /// The expected key as written.
        key: String,
    },
    /// A key is known but its value is not understood.
    #[error("line {line}: function {function:?}: {key:?}: {message}")]
    BadValue {
        /// 1-based line in the vector file.
        line: usize,
        /// The vector's `function`.
        function: String,
        /// The input or expected key whose value is not understood.
        key: String,
        /// What is wrong with the value.
        message: String,
    },
}

/// The outcome of one vector.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every expected field matched.
    Pass,
    /// Each string describes one expected field that did not match.
    Fail(Vec<String>),
}

/// Parses a JSON Lines vector file; blank lines and a leading byte-order mark are skipped.
///
/// # Errors
/// [`VectorError::Syntax`] naming the first line that is not a vector (or whose `expected` is
/// empty, since such a vector cannot fail); [`VectorError::Empty`] for a file without vectors.
pub fn parse_vectors(text: &str) -> Result<Vec<Vector>, VectorError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let raw = if line == 1 {
            raw.trim_start_matches('\u{feff}')
        } else {
            raw
        };
        let mut v: Vector = serde_json::from_str(raw).map_err(|e| VectorError::Syntax {
            line,
            message: e.to_string(),
        })?;
        v.line = line;
        if v.expected.is_empty() {
            return Err(VectorError::Syntax {
                line,
                message: "\"expected\" is empty: a vector that expects nothing cannot fail".into(),
            });
        }
        out.push(v);
    }
    if out.is_empty() {
        return Err(VectorError::Empty);
    }
    Ok(out)
}

/// Evaluates one vector against the rules.
///
/// # Errors
/// A [`VectorError`] if the function, an input key, an expected key or a value is not understood.
pub fn evaluate(v: &Vector) -> Result<Verdict, VectorError> {
    let mut c = Check::new(v);
    match v.function.as_str() {
        "rest.BeforeDelete" => apiserver::before_delete(&mut c)?,
        "Store.Delete" => apiserver::store_delete(&mut c)?,
        "podStrategy.CheckGracefulDelete" => apiserver::check_graceful_delete(&mut c)?,
        "kubectl delete (flag -> DeleteOptions.gracePeriodSeconds)" => {
            apiserver::kubectl_delete(&mut c)?
        }
        "kuberuntime.setTerminationGracePeriod" => {
            kuberuntime::set_termination_grace_period(&mut c)?
        }
        "kuberuntime.killContainer (preStop gating)" => {
            kuberuntime::kill_container_prestop(&mut c)?
        }
        "kuberuntime.killContainer (error path)" => kuberuntime::kill_container_error(&mut c)?,
        "kuberuntime.terminationOrdering.waitForTurn" => kuberuntime::wait_for_turn(&mut c)?,
        "podWorkers.calculateEffectiveGracePeriod" => podworker::effective_grace(&mut c)?,
        "podWorkers.UpdatePod (effective grace)" => podworker::update_pod(&mut c)?,
        "killPodNow" => podworker::kill_pod_now(&mut c)?,
        f if f.starts_with("eviction") => eviction::evaluate(&mut c)?,
        f if f.starts_with("nodeshutdown.") => nodeshutdown::evaluate(&mut c)?,
        "endpointslice.podToEndpoint"
        | "kube-proxy CategorizeEndpoints"
        | "endpointslice.FindPort"
        | "endpointslice.podToEndpoint (endpoint)" => endpoints::evaluate(&mut c)?,
        "Store.Delete (milliseconds)" => apiserver::store_delete_clock(&mut c)?,
        "podWorkers (later update in flight)" => podworker::later_update(&mut c)?,
        "kubelet.getPhase" => status::get_phase_vector(&mut c)?,
        "kubelet.statusManager.canBeDeleted" => status::can_be_deleted_vector(&mut c)?,
        "printers.printPod" => status::print_pod_vector(&mut c)?,
        "containerd toCRIContainerStatus (reason)" => status::exit_reason_vector(&mut c)?,
        "validation.ValidateEndpointIP" => validation::validate_endpoint_ip_vector(&mut c)?,
        f if f.starts_with("containerd ") || f.starts_with("moby ") => runtime::evaluate(&mut c)?,
        f if f.starts_with("deployment.") => controllers::evaluate(&mut c)?,
        "replicaset.slowStartBatch" | "controller.ActivePodsWithRanks.Less" => {
            replicaset::evaluate(&mut c)?
        }
        f if f.starts_with("disruption.") => disruption::evaluate(&mut c)?,
        "flowcontrol.Backoff" => restart::backoff(&mut c)?,
        "kubecontainer.ShouldContainerBeRestarted" => restart::should_restart(&mut c)?,
        "cm.MilliCPUToQuota" => resources::milli_cpu_to_quota_vector(&mut c)?,
        "kuberuntime.calculateLinuxResources" => {
            resources::calculate_linux_resources_vector(&mut c)?
        }
        "qos.GetContainerOOMScoreAdjust" => resources::oom_score_adjust_vector(&mut c)?,
        "cm.ResourceConfigForPod" => resources::resource_config_for_pod_vector(&mut c)?,
        _ => return Err(c.unknown_function()),
    }
    c.finish()
}

/// The result of running a vector file.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every vector with its verdict, in file order.
    pub results: Vec<(Vector, Verdict)>,
}

impl Report {
    /// Number of vectors that passed.
    pub fn passed(&self) -> usize {
        self.results
            .iter()
            .filter(|(_, v)| *v == Verdict::Pass)
            .count()
    }
    /// Number of vectors that failed.
    pub fn failed(&self) -> usize {
        self.results.len() - self.passed()
    }
}

/// Parses and evaluates a whole vector file.
///
/// # Errors
/// The first [`VectorError`]: nothing is reported half-way for a file that is not understood.
pub fn run(text: &str) -> Result<Report, VectorError> {
    let vectors = parse_vectors(text)?;
    let mut results = Vec::with_capacity(vectors.len());
    for v in vectors {
        let verdict = evaluate(&v)?;
        results.push((v, verdict));
    }
    Ok(Report { results })
}

/// Reads one vector's inputs and checks its expected fields, tracking which keys were used.
pub(crate) struct Check<'a> {
    v: &'a Vector,
    used_inputs: RefCell<BTreeSet<&'a str>>,
    used_expected: RefCell<BTreeSet<&'a str>>,
    mismatches: Vec<String>,
}

impl<'a> Check<'a> {
    fn new(v: &'a Vector) -> Self {
        Check {
            v,
            used_inputs: RefCell::default(),
            used_expected: RefCell::default(),
            mismatches: Vec::new(),
        }
    }

    /// The upstream function name of the vector.
    pub fn function(&self) -> &'a str {
        &self.v.function
    }

    fn unknown_function(&self) -> VectorError {
        VectorError::UnknownFunction {
            line: self.v.line,
            function: self.v.function.clone(),
        }
    }

    /// A `BadValue` error for `key`.
    pub fn bad(&self, key: &str, message: impl Into<String>) -> VectorError {
        VectorError::BadValue {
            line: self.v.line,
            function: self.v.function.clone(),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// `true` if the input key is present (does not mark it used).
    pub fn has_input(&self, key: &str) -> bool {
        self.v.inputs.contains_key(key)
    }

    /// An optional input; marks it used.
    pub fn input_opt(&self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.v.inputs.get_key_value(key)?;
        self.used_inputs.borrow_mut().insert(k.as_str());
        Some(v)
    }

    /// A required input.
    pub fn input(&self, key: &str) -> Result<&'a Value, VectorError> {
        self.input_opt(key)
            .ok_or_else(|| self.bad(key, "required input missing"))
    }

    /// An optional integer input; JSON `null` and absence are `None`.
    pub fn input_opt_i64(&self, key: &str) -> Result<Option<i64>, VectorError> {
        match self.input_opt(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.bad(key, "expected an integer")),
        }
    }

    /// A required integer input.
    pub fn input_i64(&self, key: &str) -> Result<i64, VectorError> {
        self.input_opt_i64(key)?
            .ok_or_else(|| self.bad(key, "expected an integer"))
    }

    /// An optional number input (integer or float); `null` and absence are `None`.
    pub fn input_opt_f64(&self, key: &str) -> Result<Option<f64>, VectorError> {
        match self.input_opt(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.bad(key, "expected a number")),
        }
    }

    /// An optional boolean input.
    pub fn input_opt_bool(&self, key: &str) -> Result<Option<bool>, VectorError> {
        match self.input_opt(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.bad(key, "expected a boolean")),
        }
    }

    /// An optional string input.
    pub fn input_opt_str(&self, key: &str) -> Result<Option<&'a str>, VectorError> {
        match self.input_opt(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.bad(key, "expected a string")),
        }
    }

    /// A required string input.
    pub fn input_str(&self, key: &str) -> Result<&'a str, VectorError> {
        self.input_opt_str(key)?
            .ok_or_else(|| self.bad(key, "expected a string"))
    }

    /// A required list input.
    pub fn input_array(&self, key: &str) -> Result<&'a Vec<Value>, VectorError> {
        self.input(key)?
            .as_array()
            .ok_or_else(|| self.bad(key, "expected a list"))
    }

    /// The expected value for `key`, if present; marks it checked. The caller must compare it.
    pub fn expected(&self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.v.expected.get_key_value(key)?;
        self.used_expected.borrow_mut().insert(k.as_str());
        Some(v)
    }

    /// Compares the expected value of `key`, if present, with `actual`. Numbers compare by value
    /// (so `1` equals `1.0`).
    pub fn expect_eq(&mut self, key: &str, actual: impl Into<Value>) {
        let actual = actual.into();
        if let Some(exp) = self.expected(key) {
            if !json_eq(exp, &actual) {
                self.mismatches
                    .push(format!("{key}: expected {exp}, got {actual}"));
            }
        }
    }

    /// Records a mismatch found by an adapter's own comparison.
    pub fn mismatch(&mut self, message: impl Into<String>) {
        self.mismatches.push(message.into());
    }

    fn finish(self) -> Result<Verdict, VectorError> {
        let used = self.used_inputs.borrow();
        if let Some(k) = self.v.inputs.keys().find(|k| !used.contains(k.as_str())) {
            return Err(VectorError::UnknownInput {
                line: self.v.line,
                function: self.v.function.clone(),
                key: k.clone(),
            });
        }
        let checked = self.used_expected.borrow();
        if let Some(k) = self
            .v
            .expected
            .keys()
            .find(|k| !checked.contains(k.as_str()))
        {
            return Err(VectorError::UnknownExpected {
                line: self.v.line,
                function: self.v.function.clone(),
                key: k.clone(),
            });
        }
        drop(used);
        drop(checked);
        Ok(if self.mismatches.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail(self.mismatches)
        })
    }
}

/// JSON equality where numbers compare by value.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() < 1e-9,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_vector_passes() {
        let report = run(BUILTIN_VECTORS).expect("every builtin vector is understood");
        let failures: Vec<String> = report
            .results
            .iter()
            .filter_map(|(v, verdict)| match verdict {
                Verdict::Pass => None,
                Verdict::Fail(m) => Some(format!("{}: {}", v.source, m.join("; "))),
            })
            .collect();
        assert!(
            failures.is_empty(),
            "failed vectors:\n{}",
            failures.join("\n")
        );
        assert_eq!(report.passed(), 96 + 293);
    }

    #[test]
    fn builtin_vectors_match_the_shared_file_when_present() {
        let shared = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/spec/vectors.jsonl"
        );
        if let Ok(text) = std::fs::read_to_string(shared) {
            assert_eq!(
                text, SHARED_VECTORS,
                "crates/podgrace-core/vectors is out of date"
            );
        }
    }

    #[test]
    fn unknown_function_and_keys_are_errors() {
        let unknown_fn = r#"{"function":"nope","source":"s","inputs":{},"expected":{"x":1}}"#;
        assert!(matches!(
            run(unknown_fn),
            Err(VectorError::UnknownFunction { line: 1, .. })
        ));
        let unknown_key =
            r#"{"function":"killPodNow","source":"s","inputs":{"bogus":1},"expected":{"x":1}}"#;
        match run(unknown_key) {
            Err(VectorError::UnknownInput { key, .. }) => assert_eq!(key, "bogus"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run("{not json"),
            Err(VectorError::Syntax { line: 1, .. })
        ));
    }

    #[test]
    fn a_wrong_expectation_fails() {
        let wrong = r#"{"function":"podWorkers.calculateEffectiveGracePeriod","source":"s","inputs":{"status.gracePeriod(previous)":0,"pod.spec.terminationGracePeriodSeconds":30,"pod.deletionGracePeriodSeconds":null,"KillPodOptions.PodTerminationGracePeriodSecondsOverride":null},"expected":{"gracePeriod":31}}"#;
        let report = run(wrong).unwrap();
        assert_eq!(report.failed(), 1);
    }
}

#[cfg(test)]
mod owner_tests {
    use super::*;

    /// Runs the builtin vectors whose function starts with one of `prefixes`, asserting that each
    /// passes; returns how many ran.
    pub(crate) fn assert_vectors_pass(prefixes: &[&str]) -> usize {
        let vectors = parse_vectors(BUILTIN_VECTORS).unwrap();
        let mut ran = 0;
        for v in vectors
            .iter()
            .filter(|v| prefixes.iter().any(|p| v.function.starts_with(p)))
        {
            ran += 1;
            match evaluate(v) {
                Ok(Verdict::Pass) => {}
                other => panic!("{} ({}): {other:?}", v.source, v.function),
            }
        }
        assert!(ran > 0, "no vector for {prefixes:?}");
        ran
    }

    /// Every upstream owner's vectors pass, and each owner has the number of vectors the shared
    /// file gives it (so a vector dropped from an adapter's reach is noticed).
    #[test]
    fn each_owners_vectors_pass() {
        let owners: &[(&[&str], usize)] = &[
            (&["rest.", "Store.", "podStrategy.", "kubectl"], 28 + 10),
            // The termination vectors, then calculateLinuxResources (9).
            (&["kuberuntime."], 16 + 9),
            (&["podWorkers.", "killPodNow"], 10),
            (&["podWorkers "], 7),
            (&["eviction"], 16),
            (&["nodeshutdown."], 5),
            (&["endpointslice.", "kube-proxy "], 8 + 14 + 10),
            (&["containerd ", "moby "], 13 + 4),
            (&["kubelet.getPhase"], 50),
            (&["kubelet.statusManager."], 6),
            (&["printers."], 30),
            (&["validation."], 17),
            (&["deployment."], 18),
            (&["replicaset.", "controller."], 3 + 28),
            (&["disruption."], 19),
            (&["flowcontrol."], 3),
            (&["kubecontainer."], 30),
            (&["cm."], 8 + 13),
            (&["qos."], 14),
        ];
        for (prefixes, count) in owners {
            assert_eq!(assert_vectors_pass(prefixes), *count, "{prefixes:?}");
        }
        assert_eq!(owners.iter().map(|o| o.1).sum::<usize>(), 96 + 293);
    }
}
