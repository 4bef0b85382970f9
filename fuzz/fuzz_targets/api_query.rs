//! Query parameters and selectors on their own: a fuzzed query string through `parse_query`,
//! list/watch options (label and field selectors, resourceVersion and its match, limit,
//! continue tokens, timeouts) with the read position they give, delete options with a fuzzed
//! body, and both selectors parsed from the whole text and matched. Never a panic.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use podgrace_api::options::{parse_query, DeleteOptions, ListOptions};
use podgrace_api::selector::{FieldSelector, LabelSelector};

fuzz_target!(|data: &[u8]| {
    let (query, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let query = String::from_utf8_lossy(query);
    let q = parse_query(Some(&query));
    if let Ok(o) = ListOptions::parse(&q) {
        let _ = o.rv();
        let _ = o.read_at(17);
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let _ = o.labels.matches(&labels);
        let _ = o
            .fields
            .matches(|f| (f == "metadata.name").then(|| "web".to_string()));
    }
    let _ = DeleteOptions::parse(body, &q);
    if let Ok(s) = LabelSelector::parse(&query) {
        let _ = s.matches(&BTreeMap::new());
    }
    if let Ok(s) = FieldSelector::parse(&query) {
        let _ = s.matches(|_| None);
    }
});
