//! `podgrace conformance` run as CI would run it.

mod common;

use common::*;

fn write(name: &str, text: &str) -> TmpFile {
    tmp_file("conformance", name, text)
}

#[test]
fn every_builtin_vector_passes() {
    let out = podgrace(&["conformance"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("389 passed, 0 failed"));
}

#[test]
fn a_failing_vector_is_printed_with_its_source_and_exits_1() {
    let good = r#"{"function":"killPodNow","source":"pod_workers_test.go#ok","inputs":{"gracePeriodOverride":30},"expected":{"derived_wait_timeout_s":45}}"#;
    let bad = r#"{"function":"killPodNow","source":"pod_workers_test.go#wrong","inputs":{"gracePeriodOverride":30},"expected":{"derived_wait_timeout_s":30}}"#;
    let file = write("mixed.jsonl", &format!("{good}\n\n{bad}\n"));
    let out = podgrace(&["conformance", file.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL pod_workers_test.go#wrong [killPodNow] (line 3)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("derived_wait_timeout_s: expected 30, got 45"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some("1 passed, 1 failed"));
}

#[test]
fn an_unknown_function_or_key_exits_2_and_says_which() {
    let file = write(
        "unknown-fn.jsonl",
        r#"{"function":"kubelet.mystery","source":"s","inputs":{},"expected":{"x":1}}"#,
    );
    let out = podgrace(&["conformance", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown function \"kubelet.mystery\""));

    let file = write(
        "unknown-key.jsonl",
        r#"{"function":"killPodNow","source":"s","inputs":{"gracePeriodOverrid":3},"expected":{"x":1}}"#,
    );
    let out = podgrace(&["conformance", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown input key \"gracePeriodOverrid\"")
    );

    let file = write("not-json.jsonl", "{\"function\": ");
    let out = podgrace(&["conformance", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_shared_vector_file_passes_when_given_explicitly() {
    let shared =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec/vectors.jsonl");
    if !shared.exists() {
        eprintln!("skipped: no shared/ beside the checkout");
        return;
    }
    let out = podgrace(&["conformance", shared.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_vector_that_expects_nothing_or_an_empty_file_is_bad_input() {
    let file = write(
        "empty-expected.jsonl",
        r#"{"function":"killPodNow","source":"s","inputs":{},"expected":{}}"#,
    );
    let out = podgrace(&["conformance", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot fail"));
    let file = write("empty.jsonl", "\n\n");
    let out = podgrace(&["conformance", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no test vector"));
}
