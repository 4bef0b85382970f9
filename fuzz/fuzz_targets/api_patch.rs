//! Patches on their own: a fuzzed original and patch (JSON, split at the first NUL byte), applied
//! as a JSON patch, a merge patch and a strategic merge patch under the schema of the kind the
//! first byte picks (with its patchMergeKeys and directives). Never a panic, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podgrace_api::patch;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let Some(i) = rest.iter().position(|&b| b == 0) else {
        return;
    };
    let Ok(original) = serde_json::from_slice::<Value>(&rest[..i]) else {
        return;
    };
    let Ok(p) = serde_json::from_slice::<Value>(&rest[i + 1..]) else {
        return;
    };
    let defs = patch::defs();
    let def = &defs[usize::from(k) % defs.len()];
    let _ = patch::json_patch(&original, &p);
    let _ = patch::merge_patch(&original, &p);
    if let Ok(v) = patch::strategic_merge_patch(&original, &p, def.name) {
        let _ = serde_json::to_string(&v);
    }
});
