//! Helpers shared by the scenario tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use podgrace_node::runtime::RuntimeService;

/// Whether namespaced mode is available; prints why a test skips when it is not.
pub fn need_namespaces(test: &str) -> bool {
    if podgrace_node::process::namespaces_permitted() {
        true
    } else {
        eprintln!(
            "SKIP {test}: PID/mount namespaces not permitted here (needs root or CAP_SYS_ADMIN)"
        );
        false
    }
}

pub fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Polls `cond` every 20 ms until it holds or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pids on the host whose environment contains `marker` (the way the tests find every process
/// of one container, including grandchildren, without relying on parentage).
pub fn pids_with_env(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
            // Zombies still have /proc entries but no environ content.
            out.push(pid);
        }
    }
    out
}

/// Starts a sandbox `name` (its own network namespace when permitted) with one running
/// container `app` of `argv` and `env`; returns (sandbox id, container id).
pub async fn pod_with(
    rt: &podgrace_node::runtime::ProcessRuntime,
    name: &str,
    argv: Vec<String>,
    env: Vec<(String, String)>,
) -> (String, String) {
    let ctx = podgrace_node::runtime::CallContext::background();
    let sb = rt
        .run_pod_sandbox(
            &ctx,
            podgrace_node::runtime::PodSandboxConfig {
                name: name.into(),
                host_network: false,
                ..Default::default()
            },
        )
        .await
        .expect("sandbox");
    let id = rt
        .create_container(
            &ctx,
            &sb,
            podgrace_node::runtime::ContainerConfig {
                name: "app".into(),
                command: argv,
                env,
                ..Default::default()
            },
        )
        .await
        .expect("create");
    rt.start_container(&ctx, &id).await.expect("start");
    (sb, id)
}
