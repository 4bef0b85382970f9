//! Manifest loading: any bytes as a manifest file (multi-document YAML or JSON), for the
//! Kubernetes version the first byte picks. Loading must never panic nor take unbounded time or
//! memory; every error must render (file, line, column, field path).
#![no_main]

use libfuzzer_sys::fuzz_target;
use podgrace_core::manifest::{self, LoadOptions};
use podgrace_core::KubeVersion;

fuzz_target!(|data: &[u8]| {
    let Some((&v, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let opts = LoadOptions {
        kube_version: KubeVersion::new(1, 18 + u32::from(v % 20)),
    };
    let (m, errors) = manifest::load_partial(&text, "fuzz.yaml", &opts);
    for e in &errors {
        let _ = e.to_string();
    }
    for pod in m.pods() {
        let _ = m.resolve_env_from(pod);
    }
    let _ = manifest::parse_only(&text);
});
