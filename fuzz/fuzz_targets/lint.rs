//! lint: a fuzzed lint configuration (`--config`, before the first NUL byte, may be empty) and a
//! fuzzed manifest (after it), for the Kubernetes version the first byte picks: the load's
//! rejections, every rule, and the JSON and SARIF documents. Never a panic, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podgrace_core::lint::document::{InputProblem, JsonDocument, SarifLog};
use podgrace_core::lint::{self, LintConfig, LintOptions};
use podgrace_core::manifest::{self, LoadOptions};
use podgrace_core::KubeVersion;

fuzz_target!(|data: &[u8]| {
    let Some((&v, rest)) = data.split_first() else {
        return;
    };
    let (config, text) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&[][..], rest),
    };
    let config = match LintConfig::parse(&String::from_utf8_lossy(config), "config.yaml") {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            LintConfig::default()
        }
    };
    let opts = LintOptions {
        version: KubeVersion::new(1, 18 + u32::from(v % 20)),
        config,
    };
    let text = String::from_utf8_lossy(text);
    let (m, errors) = manifest::load_partial(
        &text,
        "fuzz.yaml",
        &LoadOptions {
            kube_version: opts.version,
        },
    );
    let (mut findings, rest) = lint::rejections(errors, &opts);
    let messages: Vec<String> = rest.iter().map(ToString::to_string).collect();
    let problems: Vec<InputProblem> = rest
        .iter()
        .zip(&messages)
        .map(|(e, msg)| InputProblem {
            column: Some(e.span.column),
            file: Some(&e.span.file),
            line: Some(e.span.line),
            message: msg,
        })
        .collect();
    findings.extend(lint::lint(std::slice::from_ref(&m), &opts));
    let _ = serde_json::to_string(&JsonDocument::new(&findings, &problems));
    let _ = serde_json::to_string(&SarifLog::new(&findings, &problems, "fuzz"));
});
