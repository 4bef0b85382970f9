//! explain: every pod of a fuzzed manifest through every trigger (delete, a delete with a grace
//! period, force delete, both evictions, node shutdown, and a liveness and a startup kill of
//! each container), under options the first three bytes pick (version, kubelet settings, a
//! second delete, the containerd latency profile); each timeline serialized as the JSON
//! contract. Never a panic, whatever the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podgrace_core::manifest::{self, LoadOptions};
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::rules::latency::RuntimeProfile;
use podgrace_core::timeline::{self, KubeletConfig, LaterDelete, Options, Trigger};
use podgrace_core::KubeVersion;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (head, rest) = data.split_at(3);
    let text = String::from_utf8_lossy(rest);
    let version = KubeVersion::new(1, 18 + u32::from(head[0] % 20));
    let (m, _) = manifest::load_partial(
        &text,
        "fuzz.yaml",
        &LoadOptions {
            kube_version: version,
        },
    );
    let flags = head[1];
    let second_delete = (flags & 1 == 1).then(|| LaterDelete {
        at_ms: i64::from(head[2]) * 37,
        flags: KubectlDeleteFlags {
            grace_period: i64::from(head[2] % 7) - 1,
            force: flags & 2 == 2,
            now: flags & 4 == 4,
        },
    });
    let opts = Options {
        version,
        kubelet: KubeletConfig {
            eviction_max_pod_grace_period: i64::from(head[2] % 5) * 10 - 10,
            shutdown_grace_period: if flags & 8 == 8 { 0 } else { 30 },
            shutdown_grace_period_critical_pods: i64::from(flags >> 5),
        },
        second_delete,
        runtime: (flags & 16 == 16).then_some(RuntimeProfile::Containerd),
    };
    let pods: Vec<_> = m.pods().cloned().collect();
    let mut triggers = vec![
        Trigger::Delete,
        Trigger::DeleteWithGrace(i64::from(head[2]) - 3),
        Trigger::ForceDelete,
        Trigger::EvictSoft,
        Trigger::EvictHard,
        Trigger::NodeShutdown,
    ];
    for p in &pods {
        for c in p.containers.iter().take(4) {
            triggers.push(Trigger::Liveness(c.name.clone()));
            triggers.push(Trigger::Startup(c.name.clone()));
        }
    }
    match timeline::explain_all(&pods, &triggers, &opts) {
        Ok(explained) => {
            for (_, t) in &explained.timelines {
                let _ = serde_json::to_string(t);
            }
            let _ = explained.not_applied();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
