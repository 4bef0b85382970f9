//! Two `podgrace serve` at once on one machine: the ClusterIPs and NodePorts each allocates for
//! Services that ask for none never collide (each serve's kube-proxy binds them on this
//! machine's loopback), and both serves' kube-proxies listen on their own. Real kubectl.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::serve::Serve;

/// What these tests ask of a serve.
trait ServeExt {
    /// `kubectl create service nodeport NAME --tcp=80:8080`, then its ClusterIP and NodePort.
    fn node_port_service(&self, name: &str) -> (String, u16);
}

impl ServeExt for Serve {
    fn node_port_service(&self, name: &str) -> (String, u16) {
        let o = self.kubectl(&["create", "service", "nodeport", name, "--tcp=80:8080"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = self.kubectl(&[
            "get",
            "service",
            name,
            "-o",
            "jsonpath={.spec.clusterIP} {.spec.ports[0].nodePort}",
        ]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let (ip, port) = text.split_once(' ').unwrap_or_else(|| panic!("{text:?}"));
        (ip.to_string(), port.trim().parse().unwrap())
    }
}

/// Waits until something accepts connections on `addr` (kube-proxy's listener), at most 10 s.
fn listening(addr: SocketAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn two_serves_at_once_allocate_different_cluster_ips_and_node_ports() {
    let a = Serve::start("two-a", &[]);
    let b = Serve::start("two-b", &[]);
    let mut seen: Vec<(String, u16)> = Vec::new();
    for i in 0..2 {
        for (s, who) in [(&a, "a"), (&b, "b")] {
            let (ip, port) = s.node_port_service(&format!("web-{who}-{i}"));
            assert!(ip.starts_with("127."), "{ip}");
            assert!((30000..=32767).contains(&port), "{port}");
            assert!(
                seen.iter().all(|(i, p)| *i != ip && *p != port),
                "{who}'s {ip}:{port} was allocated before: {seen:?}"
            );
            // This serve's own kube-proxy listens there (another serve's could not have bound
            // it first).
            assert!(
                listening(SocketAddr::new(ip.parse().unwrap(), 80)),
                "{ip}:80"
            );
            assert!(
                listening(SocketAddr::from(([127, 0, 0, 1], port))),
                "127.0.0.1:{port}"
            );
            seen.push((ip, port));
        }
    }
}
