//! Manifest loading: errors placed at file:line:column and path, defaults, multi-document
//! input, the shared corpus, and no panics on arbitrary input.

use podgrace_core::manifest::{self, LoadOptions, ManifestErrors, ObjectBody};
use podgrace_core::plan::{ContainerRole, Handler, RestartPolicy};
use podgrace_core::KubeVersion;

fn errors(text: &str) -> Vec<String> {
    match manifest::load(text, "t.yaml") {
        Ok(_) => Vec::new(),
        Err(ManifestErrors(e)) => e.iter().map(ToString::to_string).collect(),
    }
}

fn errors_v(text: &str, v: KubeVersion) -> Vec<String> {
    match manifest::load_with(text, "t.yaml", &LoadOptions { kube_version: v }) {
        Ok(_) => Vec::new(),
        Err(ManifestErrors(e)) => e.iter().map(ToString::to_string).collect(),
    }
}

const DEPLOY_HEAD: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
";

fn deploy(spec_body: &str) -> String {
    format!("{DEPLOY_HEAD}{spec_body}")
}

#[test]
fn misspelt_prestop_has_position_and_hint() {
    let text = deploy(
        "      containers:
      - name: app
        image: nginx
        lifecycle:
          preStopp:
            exec: {command: [sleep, '5']}
",
    );
    assert_eq!(
        errors(&text),
        vec![
            "t.yaml:16:11: spec.template.spec.containers[0].lifecycle.preStopp: unknown field \"preStopp\" (did you mean \"preStop\"?)"
        ]
    );
}

#[test]
fn misplaced_tgps_under_container_is_unknown() {
    let text = deploy(
        "      containers:
      - name: app
        image: nginx
        terminationGracePeriodSeconds: 60
",
    );
    assert_eq!(
        errors(&text),
        vec!["t.yaml:15:9: spec.template.spec.containers[0].terminationGracePeriodSeconds: unknown field \"terminationGracePeriodSeconds\""]
    );
}

#[test]
fn free_form_maps_are_not_checked() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {anything: goes}\n  annotations: {x-custom: \"y\"}\nspec:\n  containers: [{name: a, image: b}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {whatever: x}\n";
    assert!(errors(text).is_empty(), "{:?}", errors(text));
}

#[test]
fn syntax_error_has_position() {
    let e = errors("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n");
    assert_eq!(
        e,
        vec!["t.yaml:3:18: YAML syntax error: unclosed bracket '['"]
    );
}

#[test]
fn type_error_names_the_field() {
    let text = deploy(
        "      terminationGracePeriodSeconds: \"30\"
      containers:
      - name: app
        image: nginx
",
    );
    assert_eq!(
        errors(&text),
        vec!["t.yaml:12:38: spec.template.spec.terminationGracePeriodSeconds: invalid type: string \"30\", expected an integer"]
    );
    let text = deploy(
        "      containers:
      - name: app
        env:
        - name: PORT
          value: 8080
",
    );
    assert_eq!(
        errors(&text),
        vec!["t.yaml:16:18: spec.template.spec.containers[0].env[0].value: invalid type: integer `8080`, expected a string"]
    );
}

#[test]
fn r14_sleep_longer_than_default_tgps_is_rejected() {
    let hook = |n: i64| {
        deploy(&format!(
            "      containers:
      - name: app
        image: app
        lifecycle:
          preStop:
            sleep:
              seconds: {n}
"
        ))
    };
    assert_eq!(
        errors(&hook(60)),
        vec!["t.yaml:18:15: spec.template.spec.containers[0].lifecycle.preStop.sleep: Invalid value: 60: must be non-negative and less than terminationGracePeriodSeconds (30)"]
    );
    assert_eq!(
        errors_v(&hook(60), KubeVersion::new(1, 30)),
        vec!["t.yaml:18:15: spec.template.spec.containers[0].lifecycle.preStop.sleep: Invalid value: 60: must be greater than 0 and less than terminationGracePeriodSeconds (30)"]
    );
    assert!(errors(&hook(30)).is_empty());
    assert!(errors_v(&hook(0), KubeVersion::new(1, 33)).is_empty());
    assert_eq!(errors_v(&hook(0), KubeVersion::new(1, 32)).len(), 1);
    let m = manifest::load(&hook(30), "t.yaml").unwrap();
    let pod = m.pods().next().unwrap();
    assert_eq!(
        pod.containers[0].pre_stop,
        Some(Handler::Sleep { seconds: 30 })
    );
}

#[test]
fn probe_grace_period_rules() {
    let text = deploy(
        "      containers:
      - name: app
        image: app
        livenessProbe:
          tcpSocket: {port: 80}
          terminationGracePeriodSeconds: 0
        readinessProbe:
          tcpSocket: {port: 80}
          terminationGracePeriodSeconds: 5
",
    );
    assert_eq!(
        errors(&text),
        vec![
            "t.yaml:17:42: spec.template.spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
            "t.yaml:20:42: spec.template.spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
        ]
    );
}

#[test]
fn container_names_and_handlers() {
    let text = deploy(
        "      containers:
      - name: app
        image: app
        lifecycle:
          preStop: {}
      - name: app
        image: app
        lifecycle:
          postStart:
            exec: {command: [a]}
            sleep: {seconds: 1}
",
    );
    assert_eq!(
        errors(&text),
        vec![
            "t.yaml:16:20: spec.template.spec.containers[0].lifecycle.preStop: Required value: must specify a handler type",
            "t.yaml:17:15: spec.template.spec.containers[1].name: Duplicate value: \"app\"",
            "t.yaml:22:20: spec.template.spec.containers[1].lifecycle.postStart.sleep: Forbidden: may not specify more than 1 handler type",
        ]
    );
    let text = deploy("      containers:\n      - image: nginx\n");
    assert_eq!(
        errors(&text),
        vec!["t.yaml:13:9: spec.template.spec.containers[0].name: Required value"]
    );
}

#[test]
fn stop_signal_needs_os() {
    let text = deploy(
        "      containers:
      - name: app
        image: app
        lifecycle:
          stopSignal: SIGUSR1
",
    );
    assert_eq!(
        errors(&text),
        vec!["t.yaml:16:23: spec.template.spec.containers[0].lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`"]
    );
    let ok = deploy("      os: {name: linux}\n      containers:\n      - name: app\n        image: app\n        lifecycle:\n          stopSignal: SIGUSR1\n");
    assert!(errors(&ok).is_empty());
}

#[test]
fn job_templates_need_explicit_restart_policy() {
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: b}]\n";
    assert_eq!(
        errors(job),
        vec!["t.yaml:7:7: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""]
    );
    let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Always\n          containers: [{name: a, image: b}]\n";
    assert_eq!(
        errors(cron),
        vec!["t.yaml:10:26: spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""]
    );
}

#[test]
fn missing_type_meta_is_an_error() {
    assert_eq!(
        errors("metadata: {name: x}\n"),
        vec![
            "t.yaml:1:1: apiVersion: Required value: every object needs apiVersion and kind",
            "t.yaml:1:1: kind: Required value: every object needs apiVersion and kind",
        ]
    );
    let e = errors("apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: x}\n");
    assert_eq!(e, vec!["t.yaml:1:13: apiVersion: no matches for kind \"Deployment\" in version \"extensions/v1beta1\" (removed in Kubernetes 1.16; use apps/v1)"]);
}

#[test]
fn defaults_are_applied() {
    let text = deploy(
        "      initContainers:
      - name: proxy
        image: proxy
        restartPolicy: Always
      - name: migrate
        image: migrate
      containers:
      - name: app
        image: app
        ports: [{containerPort: 80}]
        readinessProbe:
          httpGet: {port: 80}
",
    );
    let m = manifest::load(&text, "t.yaml").unwrap();
    let pod = m.pods().next().unwrap();
    assert_eq!(pod.name, "web");
    assert_eq!(pod.termination_grace_period_seconds, 30);
    assert!(pod.termination_grace_period_defaulted);
    assert_eq!(pod.restart_policy, RestartPolicy::Always);
    assert_eq!(pod.replicas, Some(1));
    assert_eq!(pod.init_containers[0].role, ContainerRole::Sidecar);
    assert_eq!(pod.init_containers[1].role, ContainerRole::Init);
    let app = &pod.containers[0];
    assert_eq!((app.span.line, app.span.column), (19, 9));
    assert_eq!(app.span.path, "spec.template.spec.containers[0]");
    assert_eq!(app.ports[0].protocol, "TCP");
    let p = app.readiness_probe.as_ref().unwrap();
    assert_eq!(
        (
            p.period_seconds,
            p.timeout_seconds,
            p.success_threshold,
            p.failure_threshold
        ),
        (10, 1, 1, 3)
    );
    match &p.action {
        podgrace_core::plan::ProbeAction::HttpGet(g) => {
            assert_eq!((g.path.as_str(), g.scheme.as_str()), ("/", "HTTP"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn multi_document_list_and_json() {
    let text = "---\n# empty\n---\nnull\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n  spec: {containers: [{name: c, image: x}]}\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s}\n  spec: {selector: {app: a}, publishNotReadyAddresses: true}\n";
    let m = manifest::load(text, "t.yaml").unwrap();
    assert_eq!(m.objects.len(), 2);
    assert_eq!(m.pods().next().map(|p| p.name.as_str()), Some("a"));
    match &m.objects[1].body {
        ObjectBody::Service(s) => assert_eq!(
            s.spec.as_ref().and_then(|s| s.publish_not_ready_addresses),
            Some(true)
        ),
        other => panic!("{other:?}"),
    }
    let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},
      "spec": {"terminationGracePeriodSeconds": 45, "containers": [{"name": "c", "image": "x"}]}}"#;
    let m = manifest::load(json, "t.json").unwrap();
    let pod = m.pods().next().unwrap();
    assert_eq!(pod.termination_grace_period_seconds, 45);
    assert!(!pod.termination_grace_period_defaulted);
    let bad = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},
  "spec": {"containers": [{"name": "c", "image": "x", "lifecycle": {"preStop": {"sleep": {"seconds": 99}}}}]}}"#;
    assert_eq!(
        errors(bad),
        vec!["t.yaml:2:90: spec.containers[0].lifecycle.preStop.sleep: Invalid value: 99: must be non-negative and less than terminationGracePeriodSeconds (30)"]
    );
}

/// Corpus files that really are invalid, with the reason (`tests/data/invalid-corpus.tsv`).
fn invalid_corpus() -> Vec<(String, String)> {
    include_str!("data/invalid-corpus.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect()
}

fn shared_dir() -> Option<std::path::PathBuf> {
    let dir = match std::env::var_os("PODGRACE_SHARED") {
        Some(d) => std::path::PathBuf::from(d),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    dir.is_dir().then_some(dir)
}

#[test]
fn corpus_loads() {
    let Some(shared) = shared_dir() else {
        println!("skipped: shared dir not found (set PODGRACE_SHARED)");
        return;
    };
    let corpus = shared.join("corpus");
    let mut files = Vec::new();
    for repo in std::fs::read_dir(&corpus).unwrap() {
        let repo = repo.unwrap().path();
        if repo.is_dir() {
            for f in std::fs::read_dir(&repo).unwrap() {
                files.push(f.unwrap().path());
            }
        }
    }
    files.sort();
    assert!(!files.is_empty());
    let invalid = invalid_corpus();
    assert!(!invalid.is_empty());
    let mut failures = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&corpus)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(f).unwrap();
        let result = manifest::load(&text, &rel);
        let expected_invalid = invalid.iter().any(|(name, _)| *name == rel);
        match (result, expected_invalid) {
            (Ok(_), false) | (Err(_), true) => {}
            (Ok(_), true) => failures.push(format!("{rel}: expected to fail but loaded")),
            (Err(e), false) => failures.push(e.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    const SEED: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      terminationGracePeriodSeconds: 10\n      containers:\n      - name: app\n        lifecycle:\n          preStop: {sleep: {seconds: 5}}\n        readinessProbe: {httpGet: {port: 80}}\n";

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn arbitrary_text(s in "\\PC{0,400}") {
            let _ = manifest::load(&s, "p.yaml");
            let _ = manifest::parse_only(&s);
        }

        #[test]
        fn mutated_manifest(pos in 0usize..400, len in 0usize..8, insert in "[ :\\-\\[\\]{}\"'a-z0-9\n&*!|>#]{0,6}") {
            let mut bytes: Vec<char> = SEED.chars().collect();
            let start = pos.min(bytes.len());
            let end = (start + len).min(bytes.len());
            bytes.splice(start..end, insert.chars());
            let text: String = bytes.into_iter().collect();
            let _ = manifest::load(&text, "p.yaml");
        }
    }

    #[test]
    fn alias_bomb_is_bounded() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for c in 'b'..='j' {
            text.push_str(&format!("{c}: &{c} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
            prev = c;
        }
        assert!(manifest::parse_only(&text).is_err());
    }
}

/// An object above the API server's 3 MiB request limit is bad input, refused at its start
/// with its kind and name (issue 9 item 2), and nothing after it in the same document is read.
#[test]
fn an_object_above_3_mib_is_refused_with_its_name() {
    let big = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  annotations:\n    a: {}\nspec:\n  containers: [{{name: app}}]\n",
        "x".repeat(manifest::MAX_OBJECT_BYTES)
    );
    let e = errors(&format!(
        "{big}---\napiVersion: v1\nkind: Service\nmetadata: {{name: after}}\n"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("t.yaml:1:1: Pod big is larger than the API server accepts: more than 3145728 bytes (3 MiB)"),
        "{}",
        e[0]
    );
    assert!(
        e[0].contains("413 Request entity too large: limit is 3145728"),
        "{}",
        e[0]
    );
}

#[test]
fn resource_quantities_are_parsed_as_the_api_server_does() {
    let text = deploy(
        "      containers:
      - name: app
        image: app
        resources:
          requests: {cpu: 500m, memory: 1Kb}
          limits: {cpu: \"-1\", memory: 64Mi}
",
    );
    assert_eq!(
        errors(&text),
        // Upstream's order: the limits, then the requests (each checked against its limit,
        // reported at `resources.requests` with the canonical quantities).
        vec![
            "t.yaml:17:25: spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
            "t.yaml:16:27: spec.template.spec.containers[0].resources.requests: Invalid value: \"500m\": must be less than or equal to cpu limit of -1",
            "t.yaml:16:41: spec.template.spec.containers[0].resources.requests[memory]: Invalid value: \"1Kb\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ]
    );
    let ok = deploy(
        "      containers:
      - name: app
        image: app
        resources:
          requests: {cpu: \"0.5\"}
          limits: {cpu: \"1000m\", memory: 64Mi}
",
    );
    let m = manifest::load(&ok, "t.yaml").unwrap();
    let pod = m.pods().next().unwrap();
    let r = pod.resources();
    let c = &r.containers[0].resources;
    assert_eq!(c.cpu_request().milli_value(), 500);
    assert_eq!(c.cpu_limit().milli_value(), 1000);
    // The memory request defaulted from the limit, as the API server stores the pod.
    assert_eq!(c.memory_request().value(), 64 << 20);
}
