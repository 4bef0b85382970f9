//! Two APIs on one machine (two `podgrace serve`) with the machine's claims: the ClusterIPs and
//! NodePorts they allocate automatically never collide, and an address one releases (its
//! Service deleted) is free for the other again.

use std::sync::Arc;

use podgrace_api::claims::Claims;
use podgrace_api::options::DeleteOptions;
use podgrace_api::registry::FieldValidation;
use podgrace_api::{Api, ApiConfig};
use serde_json::{json, Value};

fn api(dir: &std::path::Path) -> Api {
    let claims = Claims::new(dir, std::net::Ipv4Addr::LOCALHOST.into()).unwrap();
    Api::new(ApiConfig {
        claims: Some(Arc::new(claims)),
        ..ApiConfig::default()
    })
}

fn node_port_service(api: &Api, name: &str) -> (String, i64) {
    let services = podgrace_api::resource::find("", "v1", "services").unwrap();
    let body = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}
    });
    let w = api
        .create(
            services,
            "default",
            body.to_string().as_bytes(),
            FieldValidation::Strict,
        )
        .unwrap();
    let ip = w
        .object
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    let np = w
        .object
        .pointer("/spec/ports/0/nodePort")
        .and_then(Value::as_i64)
        .unwrap();
    (ip, np)
}

#[test]
fn two_serves_allocate_different_cluster_ips_and_node_ports() {
    let dir = std::env::temp_dir().join(format!("podgrace-claims-two-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (a, b) = (api(&dir), api(&dir));
    let mut seen_ips = Vec::new();
    let mut seen_ports = Vec::new();
    for i in 0..3 {
        for (api, who) in [(&a, "a"), (&b, "b")] {
            let (ip, np) = node_port_service(api, &format!("web-{who}-{i}"));
            assert!(!seen_ips.contains(&ip), "{ip} twice: {seen_ips:?}");
            assert!(!seen_ports.contains(&np), "{np} twice: {seen_ports:?}");
            seen_ips.push(ip);
            seen_ports.push(np);
        }
    }
    // Without the claims each API would have started at the same first address and port.
    let plain = Api::new(ApiConfig::default());
    let (ip0, np0) = node_port_service(&plain, "web");
    assert!(
        seen_ips.contains(&ip0) && seen_ports.contains(&np0),
        "{ip0} {np0}"
    );

    // a's first Service deleted: its NodePort goes back to the machine, and b's next Service
    // takes it (NodePorts are scanned from the range's start; ClusterIPs go on round the range,
    // so b's next one is a new address, but a's is claimable again).
    let services = podgrace_api::resource::find("", "v1", "services").unwrap();
    let opts = DeleteOptions {
        present: true,
        ..Default::default()
    };
    let probe = Claims::new(&dir, std::net::Ipv4Addr::LOCALHOST.into()).unwrap();
    let first_ip: std::net::Ipv4Addr = seen_ips[0].parse().unwrap();
    let claim = podgrace_api::claims::Claim::ClusterIp {
        ip: first_ip,
        ports: &[80],
    };
    assert!(!probe.try_claim(claim), "a holds {first_ip}");
    a.delete(services, "default", "web-a-0", &opts).unwrap();
    let (_, np) = node_port_service(&b, "web-b-3");
    assert_eq!(np, seen_ports[0]);
    assert!(probe.try_claim(claim), "{first_ip} is released");
    let _ = std::fs::remove_dir_all(&dir);
}
