//! Protobuf request bodies on their own (`application/vnd.kubernetes.protobuf`, kubectl's typed
//! commands): any bytes through the decoder into JSON. Never a panic, never unbounded work.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = podgrace_api::protobuf::decode(data) {
        let _ = serde_json::to_string(&v);
    }
});
