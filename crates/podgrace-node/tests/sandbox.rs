//! Scenarios for pod networking: each pod has its own address, reachable from the host only.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use podgrace_node::runtime::{
    CallContext, ContainerConfig, PodSandboxConfig, ProcessRuntime, RuntimeService,
};
use podgrace_node::sandbox::{NetworkConfig, Sandbox};
use rustix::fd::AsFd;
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};

/// Runs `f` on a fresh thread that has joined the network namespace at `netns`.
fn in_netns<T: Send + 'static>(netns: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let file = std::fs::File::open(netns).expect("open netns");
    std::thread::spawn(move || {
        move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))
            .expect("setns net");
        f()
    })
    .join()
    .expect("netns thread")
}

fn serve_once(listener: TcpListener, reply: &'static str) {
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = listener.accept() {
            let _ = s.write_all(reply.as_bytes());
        }
    });
}

fn fetch(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    Ok(buf)
}

/// Two pods, each with a listener on its pod IP: reachable from the host, not from the other
/// pod (neither its address nor its loopback).
#[test]
fn two_pods_have_their_own_reachable_addresses() {
    let config = NetworkConfig::default();
    let a = Sandbox::create("pod-a", false, &config).expect("sandbox a");
    let b = Sandbox::create("pod-b", false, &config).expect("sandbox b");
    let (Some(ip_a), Some(ip_b)) = (a.ip(), b.ip()) else {
        eprintln!("SKIP two_pods_have_their_own_reachable_addresses: no network namespaces (fell back to host network)");
        return;
    };
    assert_ne!(ip_a, ip_b);
    let (ns_a, ns_b) = (
        a.netns_path().expect("a").to_path_buf(),
        b.netns_path().expect("b").to_path_buf(),
    );
    for (ns, ip, reply) in [(&ns_a, ip_a, "from-a"), (&ns_b, ip_b, "from-b")] {
        let listener = in_netns(ns, move || {
            TcpListener::bind((ip, 8080)).expect("bind pod ip")
        });
        serve_once(listener, reply);
        // And one on the pod's loopback.
        let lo = in_netns(ns, || {
            TcpListener::bind((Ipv4Addr::LOCALHOST, 8081)).expect("bind lo")
        });
        serve_once(lo, reply);
    }
    assert_eq!(
        fetch(SocketAddr::from((ip_a, 8080))).expect("host -> a"),
        "from-a"
    );
    assert_eq!(
        fetch(SocketAddr::from((ip_b, 8080))).expect("host -> b"),
        "from-b"
    );
    // Inside pod a: its own loopback answers, pod b's address does not.
    let own_lo = in_netns(&ns_a, || {
        fetch(SocketAddr::from((Ipv4Addr::LOCALHOST, 8081)))
    });
    assert_eq!(own_lo.expect("a -> own lo"), "from-a");
    let cross = in_netns(&ns_a, move || fetch(SocketAddr::from((ip_b, 8080))));
    assert!(cross.is_err(), "pod a reached pod b: {cross:?}");
    // The host's loopback is not the pod's.
    assert!(fetch(SocketAddr::from((Ipv4Addr::LOCALHOST, 8081)))
        .map(|s| s != "from-a")
        .unwrap_or(true));

    drop(a);
    drop(b);
    assert!(!ns_a.exists() && !ns_b.exists(), "namespaces left behind");
}

/// A container of a pod joins the pod's network namespace: it sees `eth0` with the pod IP and
/// `lo` up; stop_pod_sandbox removes the namespace.
#[tokio::test]
async fn containers_join_the_pod_network() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let ctx = CallContext::background();
    let pod = rt
        .run_pod_sandbox(
            &ctx,
            PodSandboxConfig {
                name: "web".into(),
                host_network: false,
                ..Default::default()
            },
        )
        .await
        .expect("sandbox");
    let Some(ip) = rt.pod_ip(&pod) else {
        eprintln!("SKIP containers_join_the_pod_network: no network namespaces (fell back to host network)");
        return;
    };
    let id = rt
        .create_container(
            &ctx,
            &pod,
            ContainerConfig {
                name: "app".into(),
                command: common::argv(&["sleep", "1000"]),
                ..Default::default()
            },
        )
        .await
        .expect("create");
    rt.start_container(&ctx, &id).await.expect("start");
    let r = rt
        .exec_sync(&ctx, &id, common::argv(&["ip", "-o", "addr"]), 5)
        .await
        .expect("exec ip addr");
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains(&format!("eth0    inet {ip}/32")), "{text}");
    assert!(text.contains("lo    inet 127.0.0.1/8"), "{text}");
    rt.stop_pod_sandbox(&ctx, &pod).await.expect("stop sandbox");
    let st = rt.container_status(&ctx, &id).await.expect("status");
    assert!(st.exit.is_some());
    rt.remove_pod_sandbox(&ctx, &pod).await.expect("remove");
}

/// hostNetwork: no namespace, no address of its own.
#[test]
fn host_network_pod_has_no_namespace() {
    let sb = Sandbox::create("hostnet", true, &NetworkConfig::default()).expect("sandbox");
    assert_eq!(sb.ip(), None);
    assert_eq!(sb.netns_path(), None);
}

/// A pod's address is not handed to the next pod as soon as it is released (host-local IPAM's
/// round robin): a proxy that still routes to the old pod for the endpoint lag must reach
/// nothing, not a new pod.
#[test]
fn a_released_address_is_not_reused_at_once() {
    let config = NetworkConfig::default();
    let mut a = Sandbox::create("pod-reuse-a", false, &config).expect("sandbox a");
    let Some(ip_a) = a.ip() else {
        eprintln!("SKIP a_released_address_is_not_reused_at_once: no network namespaces");
        return;
    };
    a.teardown();
    let b = Sandbox::create("pod-reuse-b", false, &config).expect("sandbox b");
    let ip_b = b.ip().expect("b has an address");
    assert_ne!(
        ip_a, ip_b,
        "the address of the pod just gone went to the next pod"
    );
}

/// The host interfaces' indexes by name (`/sys/class/net/<name>/ifindex`).
fn host_links() -> std::collections::HashMap<u32, String> {
    std::fs::read_dir("/sys/class/net")
        .expect("/sys/class/net")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let index = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).ok()?;
            Some((index.trim().parse().ok()?, name))
        })
        .collect()
}

/// Fifty pod networks made at once from fifty threads, then torn down at once: each gets its
/// own address, namespace and host veth, and afterwards none of them is left. Only what this
/// test made is looked at (other podgrace processes on the machine make pod networks too): its
/// namespaces are named after this process (`podgrace-<n>-<pid>`), and its host veths are
/// identified by their interface index, which the kernel does not hand out again soon.
#[test]
fn fifty_pod_networks_made_and_removed_in_parallel_leave_nothing_behind() {
    let config = NetworkConfig::default();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(50));
    let made: Vec<(Sandbox, Option<u32>)> = (0..50)
        .map(|i| {
            let (config, barrier) = (config.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let sb = Sandbox::create(&format!("par-{i}"), false, &config).expect("sandbox");
                // Read while this pod holds the index, so the name is surely its own veth's.
                let index = sb.ip().map(|ip| {
                    let n = ip.octets()[3];
                    std::fs::read_to_string(format!("/sys/class/net/pgh{n}/ifindex"))
                        .expect("the host veth exists")
                        .trim()
                        .parse::<u32>()
                        .expect("ifindex")
                });
                (sb, index)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("create thread"))
        .collect();
    if made[0].0.ip().is_none() {
        eprintln!("SKIP fifty_pod_networks_made_and_removed_in_parallel_leave_nothing_behind: no network namespaces");
        return;
    }
    let ips: std::collections::HashSet<Ipv4Addr> =
        made.iter().map(|(sb, _)| sb.ip().expect("ip")).collect();
    assert_eq!(ips.len(), 50, "every pod has an address of its own");
    let paths: Vec<std::path::PathBuf> = made
        .iter()
        .map(|(sb, _)| sb.netns_path().expect("netns").to_path_buf())
        .collect();
    let me = std::process::id();
    for p in &paths {
        assert!(p.exists(), "{} exists", p.display());
        let name = p.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(
            name.ends_with(&format!("-{me}")),
            "{name} is named after this process"
        );
    }
    // Each pod's side is set up: eth0 with its address and the route to the host.
    let (sb0, _) = &made[0];
    let ip0 = sb0.ip().expect("ip");
    let path0 = sb0.netns_path().expect("netns").to_path_buf();
    let addr = in_netns(&path0, || {
        std::process::Command::new("ip")
            .args(["-o", "addr", "show", "dev", "eth0"])
            .output()
            .expect("ip addr")
    });
    let addr = String::from_utf8_lossy(&addr.stdout);
    assert!(addr.contains(&format!("inet {ip0}/32")), "{addr}");
    let indexes: Vec<u32> = made.iter().filter_map(|(_, i)| *i).collect();
    assert_eq!(indexes.len(), 50);
    // Torn down at once from fifty threads.
    made.into_iter()
        .map(|(mut sb, _)| std::thread::spawn(move || sb.teardown()))
        .collect::<Vec<_>>()
        .into_iter()
        .for_each(|t| t.join().expect("teardown thread"));
    for p in &paths {
        assert!(!p.exists(), "{} left behind", p.display());
    }
    let links = host_links();
    let left: Vec<&String> = indexes.iter().filter_map(|i| links.get(i)).collect();
    assert!(left.is_empty(), "host veths left behind: {left:?}");
}
