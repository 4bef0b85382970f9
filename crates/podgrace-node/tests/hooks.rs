//! Lifecycle handlers against real containers and sockets.

mod common;
mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{argv, eventually, need_namespaces, pids_with_env, pod_with};
use podgrace_core::plan::{ContainerPort, Handler, HttpGet, PortRef};
use podgrace_node::events::EventRecorder;
use podgrace_node::hooks::{format_pod, run_handler, HookError, HookTarget};
use podgrace_node::runtime::{CallContext, ProcessRuntime, RuntimeService};
use podgrace_node::sandbox::NetworkConfig;
use support::{header, local_listener, response, serve};

const POD: &str = "web_default(uid-1)";

fn target<'a>(id: &'a str, ip: Option<IpAddr>, ports: &'a [ContainerPort]) -> HookTarget<'a> {
    HookTarget {
        pod: POD,
        container: "app",
        container_id: id,
        pod_ip: ip,
        ports,
        events: None,
    }
}

fn exec(a: &[&str]) -> Handler {
    Handler::Exec { command: argv(a) }
}

#[tokio::test]
async fn exec_hook_with_a_missing_binary_fails_like_the_kubelet() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let (sb, id) = pod_with(&rt, "hook-missing", argv(&["sleep", "30"]), vec![]).await;
    let err = run_handler(
        &rt,
        &CallContext::background(),
        &target(&id, None, &[]),
        &exec(&["/nonexistent/podgrace-hook", "--drain"]),
    )
    .await
    .expect_err("a missing binary fails the hook");
    assert!(matches!(err, HookError::Exec { .. }));
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "Exec lifecycle hook ([/nonexistent/podgrace-hook --drain]) for Container \"app\" in Pod \"{POD}\" failed - error: "
        )),
        "{msg}"
    );
    assert!(msg.contains("/nonexistent/podgrace-hook"), "{msg}");
    assert!(msg.ends_with(", message: \"\""), "{msg}");
    let _ = rt.remove_pod_sandbox(&CallContext::background(), &sb).await;
}

#[tokio::test]
async fn exec_hook_non_zero_exit_carries_its_output() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let (sb, id) = pod_with(&rt, "hook-exit", argv(&["sleep", "30"]), vec![]).await;
    let err = run_handler(
        &rt,
        &CallContext::background(),
        &target(&id, None, &[]),
        &exec(&["sh", "-c", "echo out; echo err >&2; exit 3"]),
    )
    .await
    .expect_err("exit 3 fails the hook");
    let msg = err.to_string();
    assert!(
        msg.contains("error: command 'sh -c echo out; echo err >&2; exit 3' exited with 3: err\n"),
        "{msg}"
    );
    assert!(msg.ends_with("message: \"out\\nerr\\n\""), "{msg}");
    run_handler(
        &rt,
        &CallContext::background(),
        &target(&id, None, &[]),
        &exec(&["sh", "-c", "exit 0"]),
    )
    .await
    .expect("exit 0 is success");
    let _ = rt.remove_pod_sandbox(&CallContext::background(), &sb).await;
}

#[tokio::test]
async fn sleep_hook_cut_by_the_context_returns_the_sleep_error() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let start = Instant::now();
    let ctx = CallContext::background().with_deadline(start + Duration::from_millis(300));
    let err = run_handler(
        &rt,
        &ctx,
        &target("none", None, &[]),
        &Handler::Sleep { seconds: 30 },
    )
    .await
    .expect_err("cut");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(290) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("Sleep lifecycle hook (30) for Container \"app\" in Pod \"{POD}\" failed - error: container terminated before sleep hook finished")
    );
}

#[tokio::test]
async fn a_cancelled_exec_hook_leaves_no_process_behind() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let marker = format!("PODGRACE_HOOK_CANCEL={}", std::process::id());
    let (k, v) = marker.split_once('=').unwrap();
    let (sb, id) = pod_with(
        &rt,
        "hook-cancel",
        argv(&["sleep", "30"]),
        vec![(k.into(), v.into())],
    )
    .await;
    assert!(eventually(Duration::from_secs(2), || pids_with_env(
        &marker
    )
    .len()
        == 1));
    let (ctx, cancel) = CallContext::background().with_cancel();
    let hook_target = target(&id, None, &[]);
    let handler = exec(&["sleep", "30"]);
    let hook = run_handler(&rt, &ctx, &hook_target, &handler);
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            pids_with_env(&marker).len(),
            2,
            "the hook's exec is running"
        );
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(hook, canceller);
    assert!(matches!(result, Err(HookError::Exec { .. })), "{result:?}");
    assert!(
        eventually(Duration::from_secs(2), || pids_with_env(&marker).len() == 1),
        "the exec process was killed, PID 1 remains: {:?}",
        pids_with_env(&marker)
    );
    let _ = rt.remove_pod_sandbox(&CallContext::background(), &sb).await;
}

/// R08 style: a preStop exec that signals PID 1 reaches the container's own PID 1.
#[tokio::test]
async fn exec_hook_kill_term_1_reaches_the_containers_pid_1() {
    if !need_namespaces("exec_hook_kill_term_1_reaches_the_containers_pid_1") {
        return;
    }
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let (sb, id) = pod_with(
        &rt,
        "hook-term",
        argv(&[
            "sh",
            "-c",
            "trap 'sleep 0.3; exit 7' TERM; while :; do sleep 0.05; done",
        ]),
        vec![],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    run_handler(
        &rt,
        &CallContext::background(),
        &target(&id, None, &[]),
        &exec(&["sh", "-c", "sleep 0.3; kill -TERM 1"]),
    )
    .await
    .expect("the hook returns after signalling");
    let hook_took = start.elapsed();
    assert!(
        hook_took >= Duration::from_millis(290) && hook_took < Duration::from_secs(2),
        "{hook_took:?}"
    );
    let ctx = CallContext::background();
    let mut exited = None;
    for _ in 0..100 {
        let st = rt.container_status(&ctx, &id).await.expect("status");
        if let Some(exit) = st.exit {
            exited = Some(exit);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        exited.map(|e| e.code()),
        Some(7),
        "PID 1 ran its TERM trap and exited 7"
    );
    let _ = rt.remove_pod_sandbox(&ctx, &sb).await;
}

/// R15: an httpGet preStop goes to the pod IP, so a server bound only to 127.0.0.1 inside the
/// pod is unreachable; bound to the pod address it is reached.
#[tokio::test]
async fn http_hook_goes_to_the_pod_ip_not_loopback() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let (sb, id) = pod_with(&rt, "hook-r15", argv(&["sleep", "30"]), vec![]).await;
    let Some(ip) = rt.pod_ip(&sb) else {
        eprintln!("SKIP http_hook_goes_to_the_pod_ip_not_loopback: no pod network (needs root and iproute2)");
        let _ = rt.remove_pod_sandbox(&CallContext::background(), &sb).await;
        return;
    };
    let ctx = CallContext::background();
    let pid = rt
        .container_status(&ctx, &id)
        .await
        .expect("status")
        .pid
        .expect("pid");
    let ok: support::Responder = Arc::new(|_| response("200 OK", "", "drained"));
    let loopback_only = serve(
        support::listener_in_netns(pid, "127.0.0.1:8090"),
        ok.clone(),
    );
    let pod_address = serve(support::listener_in_netns(pid, &format!("{ip}:8091")), ok);
    let ports = [ContainerPort {
        name: Some("drain".into()),
        container_port: 8091,
        protocol: "TCP".into(),
        host_port: 0,
        host_ip: String::new(),
    }];
    let get = |port: PortRef| {
        Handler::HttpGet(HttpGet {
            host: None,
            port,
            path: "/prestop".into(),
            scheme: "HTTP".into(),
            headers: vec![],
        })
    };
    let t = target(&id, Some(IpAddr::V4(ip)), &ports);
    let err = run_handler(&rt, &ctx, &t, &get(PortRef::Number(8090)))
        .await
        .expect_err("nothing listens on the pod IP");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("HTTP lifecycle hook (/prestop) for Container \"app\" in Pod \"{POD}\" failed - error: Get \"http://{ip}:8090/prestop\": dial tcp {ip}:8090: connect: connection refused")),
        "{msg}"
    );
    assert!(loopback_only.lock().unwrap().is_empty());
    run_handler(&rt, &ctx, &t, &get(PortRef::Name("drain".into())))
        .await
        .expect("reached on the pod address through the named port");
    let seen = pod_address.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].starts_with("GET /prestop HTTP/1.1\r\n"),
        "{}",
        seen[0]
    );
    assert_eq!(header(&seen[0], "user-agent"), Some("kube-lifecycle/1.37"));
    assert_eq!(
        header(&seen[0], "host"),
        Some(format!("{ip}:8091").as_str())
    );
    let _ = rt.remove_pod_sandbox(&ctx, &sb).await;
}

#[tokio::test]
async fn http_hook_any_status_is_success_and_https_falls_back_to_http() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let (listener, port) = local_listener().await;
    let seen = serve(
        listener,
        Arc::new(|_| response("500 Internal Server Error", "", "nope")),
    );
    let events = EventRecorder::new();
    let t = HookTarget {
        events: Some(&events),
        ..target("none", Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))), &[])
    };
    let handler = Handler::HttpGet(HttpGet {
        host: Some("127.0.0.1".into()),
        port: PortRef::Number(i32::from(port)),
        path: "/drain".into(),
        scheme: "HTTPS".into(),
        headers: vec![
            ("Authorization".into(), "Bearer secret".into()),
            ("X-Custom".into(), "1".into()),
        ],
    });
    run_handler(&rt, &CallContext::background(), &t, &handler)
        .await
        .expect("HTTPS to a plain server falls back; a 500 is still success");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "only the plain HTTP retry is a request");
    assert!(seen[0].starts_with("GET /drain HTTP/1.1"));
    assert_eq!(
        header(&seen[0], "authorization"),
        None,
        "dropped on fallback"
    );
    assert_eq!(header(&seen[0], "x-custom"), Some("1"));
    assert_eq!(header(&seen[0], "accept"), Some("*/*"));
    let ev = events.events();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].reason, "LifecycleHTTPFallback");
    assert_eq!(
        ev[0].message,
        format!("request to HTTPS lifecycle hook 127.0.0.1:{port} got HTTP response, retry with HTTP succeeded")
    );
}

#[tokio::test]
async fn http_hook_without_a_pod_ip_or_with_an_unknown_port_name_fails() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let ctx = CallContext::background();
    let h = |port: PortRef| {
        Handler::HttpGet(HttpGet {
            host: None,
            port,
            path: "/x".into(),
            scheme: "HTTP".into(),
            headers: vec![],
        })
    };
    let no_ip = run_handler(
        &rt,
        &ctx,
        &target("none", None, &[]),
        &h(PortRef::Number(80)),
    )
    .await
    .expect_err("no pod IP");
    assert!(no_ip
        .to_string()
        .contains("failed to find networking container"));
    let ip = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let bad = run_handler(
        &rt,
        &ctx,
        &target("none", ip, &[]),
        &h(PortRef::Name("web".into())),
    )
    .await
    .expect_err("unknown port name");
    assert!(
        bad.to_string()
            .ends_with("error: strconv.Atoi: parsing \"web\": invalid syntax"),
        "{bad}"
    );
    let _ = format_pod("a", "b", "c");
}
