//! `podgrace lint` run as a user runs it: the real binary, real files, real exit codes.

mod common;

use common::*;
use std::path::Path;

fn tmp(name: &str, text: &str) -> TmpFile {
    tmp_file("lint", name, text)
}

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: app
          image: example/web:1
          ports:
            - containerPort: 8080
          readinessProbe:
            httpGet:
              path: /ready
              port: 8080
";

#[test]
fn exit_codes_follow_fail_on() {
    // hook-too-long has an error.
    let o = podgrace(&["lint", "examples/hook-too-long.yaml"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("Pod slow-shutdown (examples/hook-too-long.yaml:5:1)"));
    assert!(stdout(&o).contains("  examples/hook-too-long.yaml:15:9  error    prestop-exceeds-grace  container worker: preStop exec sleep 300 s"));
    // A warning only: exit 0 by default, 1 with --fail-on warning.
    let web = tmp("web.yaml", WEB);
    let web = web.to_str().expect("utf-8");
    let o = podgrace(&["lint", web]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("warning  endpoint-race  container app serves traffic"));
    assert!(stdout(&o).contains("0 errors, 1 warning, 0 info"));
    let o = podgrace(&["lint", web, "--fail-on", "warning"]);
    assert_eq!(o.status.code(), Some(1));
    // Bad input: exit 2 with the position.
    let bad = tmp("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: a\n      imagee: x\n");
    let o = podgrace(&["lint", bad.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bad.yaml:8:7: spec.containers[0].imagee: unknown field"),
        "{}",
        stderr(&o)
    );
    let o = podgrace(&["lint", "no/such/file.yaml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn json_output() {
    let o = podgrace(&["lint", "examples/", "-o", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "prestop-exceeds-grace");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["file"], "examples/hook-too-long.yaml");
    assert_eq!(f["line"], 15);
    assert_eq!(f["column"], 9);
    assert_eq!(f["path"], "spec.containers[0].lifecycle.preStop");
    assert_eq!(f["object"]["kind"], "Pod");
    assert_eq!(f["object"]["name"], "slow-shutdown");
    assert_eq!(f["container"], "worker");
    assert_eq!(v["summary"]["error"], 1);
    assert!(v["summary"]["warning"].as_u64().is_some());
}

#[test]
fn sarif_output_is_valid_sarif_2_1_0() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sarif-schema-2.1.0.json"),
        )
        .expect("schema file"),
    )
    .expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let o = podgrace(&["lint", "examples/", "--output", "sarif"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "SARIF invalid: {errors:#?}");
    let run = &v["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), podgrace_core::lint::CATALOGUE.len());
    let r = &run["results"][0];
    assert_eq!(r["ruleId"], "prestop-exceeds-grace");
    assert_eq!(r["level"], "error");
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        "examples/hook-too-long.yaml"
    );
    assert_eq!(loc["region"]["startLine"], 15);
    assert_eq!(loc["region"]["startColumn"], 9);
    // Info findings are notes.
    assert!(run["results"]
        .as_array()
        .expect("results")
        .iter()
        .any(|r| r["level"] == "note"));
    // A broken document does not validate (the validator is not vacuous).
    let mut broken = v.clone();
    broken["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(!validator.is_valid(&broken));
}

#[test]
fn explain_prints_the_catalogue() {
    let o = podgrace(&["lint", "--explain", "endpoint-race"]);
    assert_eq!(o.status.code(), Some(0));
    let s = stdout(&o);
    assert!(s.starts_with("endpoint-race (warning): "), "{s}");
    assert!(s.contains("Fix:"));
    let o = podgrace(&["lint", "--explain", "all"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        stdout(&o).lines().count(),
        podgrace_core::lint::CATALOGUE.len()
    );
    let o = podgrace(&["lint", "--explain", "no-such-rule"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn disable_and_config() {
    let o = podgrace(&[
        "lint",
        "examples/hook-too-long.yaml",
        "--disable",
        "prestop-exceeds-grace",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = podgrace(&["lint", "examples/hook-too-long.yaml", "--disable", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let cfg = tmp(
        "lint.yaml",
        "severity:\n  endpoint-race: error\nendpointLagSeconds: 3\n",
    );
    let web = tmp("web2.yaml", WEB);
    let o = podgrace(&[
        "lint",
        web.to_str().expect("utf-8"),
        "--config",
        cfg.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("error    endpoint-race"));
    assert!(stdout(&o).contains("after about 3 s"));
    // An unknown key and bad values: file, line, column and field path.
    for (name, text, want) in [
        (
            "bad-lint.yaml",
            "disable: []\nendpointLag: 3\n",
            "bad-lint.yaml:2:1: endpointLag: unknown field",
        ),
        (
            "bad-severity.yaml",
            "severity:\n  endpoint-race: fatal\n",
            "bad-severity.yaml:2:18: severity.endpoint-race: Unsupported value: \"fatal\": supported values: \"error\", \"warning\", \"info\"",
        ),
        (
            "bad-rule.yaml",
            "disable: [no-such-rule]\n",
            "bad-rule.yaml:1:11: disable[0]: Invalid value: \"no-such-rule\": unknown rule",
        ),
        (
            "bad-lag.yaml",
            "endpointLagSeconds: -1\n",
            "bad-lag.yaml:1:21: endpointLagSeconds: Invalid value: -1: must be greater than or equal to 0",
        ),
    ] {
        let bad = tmp(name, text);
        let o = podgrace(&[
            "lint",
            web.to_str().expect("utf-8"),
            "--config",
            bad.to_str().expect("utf-8"),
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
    }
    let kubelet = tmp("kubelet.yaml", "kubelet:\n  evictionMaxPodGracePeriod: 0\n");
    let o = podgrace(&[
        "lint",
        web.to_str().expect("utf-8"),
        "--config",
        kubelet.to_str().expect("utf-8"),
    ]);
    assert!(stdout(&o).contains("soft-eviction-is-immediate"));
}

#[test]
fn stdin_and_sleep_rejection() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n    - name: c\n      image: x\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 60\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n    - name: c\n      image: x\n";
    let o = podgrace_in(&["lint", "-", "-o", "json"], Some(text));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    let rules: Vec<(&str, u64, &str)> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or_default(),
                f["line"].as_u64().unwrap_or_default(),
                f["file"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        vec![
            ("sleep-action-rejected", 12, "<stdin>"),
            ("zero-grace-force-deletes", 19, "<stdin>")
        ]
    );
    // The rejected object's header is its start, as for every other finding; the line below
    // places the field.
    let o = podgrace_in(&["lint", "-"], Some(text));
    assert!(
        stdout(&o).contains(
            "Pod a (<stdin>:1:1)\n  <stdin>:12:13  error    sleep-action-rejected  containers[0]: preStop sleep.seconds 60 is rejected"
        ),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o)
            .contains("Pod b (<stdin>:14:1)\n  <stdin>:19:3  error    zero-grace-force-deletes"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn negative_grace_period_is_a_finding_and_explain_uses_1_s() {
    let p = tmp(
        "negative.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: neg\nspec:\n  terminationGracePeriodSeconds: -5\n  containers:\n    - name: app\n      image: app\n",
    );
    let p = p.to_str().expect("utf-8");
    let o = podgrace(&["lint", p]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(&format!("Pod neg ({p}:1:1)\n  {p}:6:3  error    negative-grace-period  terminationGracePeriodSeconds is -5: negative values are invalid; the API server accepts them with a warning and Kubernetes treats them as 1, so the pod gets a grace period of 1 s")),
        "{}",
        stdout(&o)
    );
    let o = podgrace(&["lint", p, "-o", "sarif"]);
    let v = json(&o);
    let rules = v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules");
    let rule = rules
        .iter()
        .find(|r| r["id"] == "negative-grace-period")
        .expect("negative-grace-period in the SARIF rules");
    assert_eq!(rule["defaultConfiguration"]["level"], "error");
    assert_eq!(
        v["runs"][0]["results"][0]["ruleId"],
        "negative-grace-period"
    );
    let o = podgrace(&["lint", "--explain", "negative-grace-period"]);
    assert!(stdout(&o).starts_with("negative-grace-period (error): "));
    // explain works with the 1 s and says why.
    let o = podgrace(&["explain", p, "-o", "json"]);
    let v = json(&o);
    assert_eq!(v[0]["gracePeriodSeconds"], 1);
    assert_eq!(v[0]["containers"][0]["killSeconds"]["max"], 2.0);
    assert_eq!(v[0]["findings"][0]["rule"], "negative-grace-period");
}

#[test]
fn readme_rule_table_matches_the_catalogue() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let table = podgrace_core::lint::catalogue::markdown_table();
    assert!(
        readme.contains(&table),
        "README.md's lint rule table is out of date; replace it with:\n{table}"
    );
}

/// Every corpus file lints without error (except those the API server rejects), and a chosen
/// handful gives exactly these findings.
#[test]
fn corpus() {
    let Some(shared) = shared() else {
        eprintln!("skipped: no shared/ directory (set PODGRACE_SHARED)");
        return;
    };
    let files = corpus_files(&shared);
    assert!(files.len() > 50, "corpus too small: {}", files.len());
    let invalid = invalid_corpus();
    for (f, rel) in &files {
        let o = podgrace(&["lint", f.to_str().expect("utf-8"), "-o", "json"]);
        let code = o.status.code();
        if let Some((_, why)) = invalid.iter().find(|(name, _)| name == rel) {
            assert_eq!(code, Some(2), "{rel} should be rejected: {why}");
        } else {
            assert!(
                code == Some(0) || code == Some(1),
                "{}: {}",
                f.display(),
                stderr(&o)
            );
            json(&o);
        }
    }
    let expect: &[(&str, &[(&str, u64)])] = &[
        (
            "kubernetes__ingress-nginx/deploy__static__provider__kind__deploy.yaml",
            // endpoint-race: its stop signal comes before the lag plus the 1 s margin.
            &[("endpoint-race", 449), ("zero-grace-force-deletes", 511)],
        ),
        (
            "GoogleCloudPlatform__cloud-sql-proxy/examples__k8s-sidecar__job_with_shutdown_hook.yaml",
            &[
                ("shell-form-command", 54),
                ("sidecar-as-regular-container", 65),
            ],
        ),
        (
            "kubernetes__examples/_archived__volumes__vsphere__simple-statefulset.yaml",
            &[
                ("service-selects-unready-pods", 2),
                ("nginx-stop-signal", 35),
                ("endpoint-race", 36),
            ],
        ),
        (
            "kubernetes__ingress-nginx/docs__examples__multi-tls__multi-tls.yaml",
            &[
                ("service-selects-unready-pods", 1),
                ("nginx-stop-signal", 35),
                ("endpoint-race", 36),
                ("service-selects-unready-pods", 39),
                ("endpoint-race", 74),
            ],
        ),
        (
            "stefanprodan__podinfo/kustomize__deployment.yaml",
            &[("endpoint-race", 59)],
        ),
        (
            "GoogleCloudPlatform__microservices-demo/kubernetes-manifests__frontend.yaml",
            &[("endpoint-race", 50)],
        ),
    ];
    for (file, want) in expect {
        let o = podgrace(&[
            "lint",
            shared.join("corpus").join(file).to_str().expect("utf-8"),
            "-o",
            "json",
        ]);
        let v = json(&o);
        let got: Vec<(String, u64)> = v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| {
                (
                    f["rule"].as_str().unwrap_or_default().to_string(),
                    f["line"].as_u64().unwrap_or_default(),
                )
            })
            .collect();
        let want: Vec<(String, u64)> = want.iter().map(|(r, l)| (r.to_string(), *l)).collect();
        assert_eq!(got, want, "{file}");
    }
}

#[test]
fn nothing_to_lint_passes_with_a_note() {
    let empty = tmp("empty.yaml", "");
    let empty = empty.to_str().expect("utf-8");
    let o = podgrace(&["lint", empty]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "0 errors, 0 warnings, 0 info\n");
    assert_eq!(
        stderr(&o),
        format!("note: no pod or pod template found in {empty} (it is empty): nothing to lint\n")
    );
    let o = podgrace_in(&["lint", "-", "-o", "json"], Some(""));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["summary"]["error"], 0);
    assert_eq!(
        stderr(&o),
        "note: no pod or pod template found in <stdin> (it is empty): nothing to lint\n"
    );
    // Something linted: no note.
    let web = tmp("web-noted.yaml", WEB);
    let o = podgrace(&["lint", web.to_str().expect("utf-8"), empty]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

#[test]
fn huge_grace_periods_are_linted_exactly_without_overflow() {
    // A preStop of 9223372036854775 s leaves 2 s: the advice adds minDrainSeconds to the hook's
    // length, next to the int64 limit.
    let big = tmp(
        "big.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  terminationGracePeriodSeconds: 9223372036854776\n  containers:\n    - name: app\n      image: x\n      lifecycle:\n        preStop:\n          sleep: {seconds: 9223372036854775}\n",
    );
    let path = big.to_str().expect("utf-8");
    let o = podgrace(&["lint", path, "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let near = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["rule"] == "prestop-near-grace")
        .expect("prestop-near-grace");
    assert_eq!(
        near["message"],
        "container app: preStop 9223372036854775 s leaves 2 s of terminationGracePeriodSeconds 9223372036854776 s: SIGTERM comes at t=9223372036854775 and SIGKILL at t=9223372036854777, less than minDrainSeconds 5 for the app to drain; raise terminationGracePeriodSeconds to at least 9223372036854780"
    );
}

/// Input errors are not dropped from machine output (issue 9 item 8): SARIF reports them as
/// `invocations[].toolExecutionNotifications` with `executionSuccessful: false`, the JSON lists
/// and counts them, and the findings of what could be read are still there (exit 2).
#[test]
fn input_errors_are_sarif_notifications_and_counted_in_the_json() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sarif-schema-2.1.0.json"),
        )
        .expect("schema file"),
    )
    .expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let tmpdir = tempdir("lint-input-errors");
    let dir = tmpdir.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a-good.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers: [{name: app, image: app}]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b-typo.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: typo}\nspec:\n  containers: [{name: app, image: app, bogus: 1}]\n",
    )
    .unwrap();
    std::fs::write(dir.join("c-latin1.yaml"), b"kind: Pod\nname: caf\xe9\n").unwrap();
    let d = dir.to_str().unwrap();

    let o = podgrace(&["lint", d, "-o", "sarif"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v = json(&o);
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "SARIF invalid: {errors:#?}");
    let run = &v["runs"][0];
    let inv = &run["invocations"][0];
    assert_eq!(inv["executionSuccessful"], false, "{inv}");
    let notes = inv["toolExecutionNotifications"]
        .as_array()
        .expect("notifications");
    assert_eq!(notes.len(), 2, "{notes:#?}");
    assert!(notes.iter().all(|n| n["level"] == "error"));
    let typo = notes
        .iter()
        .find(|n| {
            n["message"]["text"]
                .as_str()
                .unwrap()
                .contains("unknown field \"bogus\"")
        })
        .expect("the typo");
    let loc = &typo["locations"][0]["physicalLocation"];
    assert!(loc["artifactLocation"]["uri"]
        .as_str()
        .unwrap()
        .ends_with("b-typo.yaml"));
    assert_eq!(
        (
            loc["region"]["startLine"].as_u64(),
            loc["region"]["startColumn"].as_u64()
        ),
        (Some(5), Some(40))
    );
    assert!(notes.iter().any(|n| n["message"]["text"]
        .as_str()
        .unwrap()
        .contains("c-latin1.yaml:2:10: not UTF-8 text")));
    // The readable file's finding is still reported.
    assert_eq!(run["results"][0]["ruleId"], "zero-grace-force-deletes");

    let o = podgrace(&["lint", d, "-o", "json"]);
    assert_eq!(o.status.code(), Some(2));
    let v = json(&o);
    assert_eq!(v["summary"]["inputErrors"], 2, "{}", v["summary"]);
    assert_eq!(v["summary"]["error"], 1);
    let ie = v["inputErrors"].as_array().expect("inputErrors");
    assert!(
        ie.iter().any(|e| e["line"] == 5 && e["column"] == 40),
        "{ie:#?}"
    );

    let o = podgrace(&["lint", d]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stdout(&o).ends_with("1 error, 0 warnings, 0 info; 2 input errors (on stderr): what they name was not linted\n"),
        "{}",
        stdout(&o)
    );

    // A clean run says it ran successfully.
    let o = podgrace(&[
        "lint",
        dir.join("a-good.yaml").to_str().unwrap(),
        "-o",
        "sarif",
    ]);
    let v = json(&o);
    assert_eq!(v["runs"][0]["invocations"][0]["executionSuccessful"], true);
    assert!(v["runs"][0]["invocations"][0]["toolExecutionNotifications"].is_null());
}

/// `-f/--filename` is taken beside the positional paths, as kubectl takes it.
#[test]
fn filename_flag_beside_the_paths() {
    let a = podgrace(&["lint", "examples/hook-too-long.yaml", "-o", "json"]);
    let b = podgrace(&["lint", "-f", "examples/hook-too-long.yaml", "-o", "json"]);
    assert_eq!(json(&a), json(&b));
    let both = podgrace(&[
        "lint",
        "examples/web.yaml",
        "--filename",
        "examples/hook-too-long.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(json(&both)["findings"], json(&a)["findings"]);
    let none = podgrace(&["lint"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        stderr(&none).contains("no manifest given"),
        "{}",
        stderr(&none)
    );
}
