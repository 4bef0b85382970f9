//! The drill's embedded serve: a Deployment and a NodePort Service applied through its
//! in-process client run as on `podgrace serve` (the ReplicaSet's pods on the local kubelet, the
//! EndpointSlice controller's slice, kube-proxy's listeners), real curl reaches the pods through
//! the allocated NodePort, a pod deleted through the API is replaced by the ReplicaSet
//! controller, and the shutdown leaves no pod. Needs root (pod network namespaces).

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use podgrace_drill::embedded::{EmbeddedConfig, EmbeddedServe};
use podgrace_drill::endpoints::LagModel;

const APP: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        image: python:3
        command: [/usr/bin/python3, -c, "import http.server,os,signal\nsignal.signal(signal.SIGTERM, lambda *a: os._exit(0))\nclass H(http.server.BaseHTTPRequestHandler):\n  def do_GET(self):\n    b=self.connection.getsockname()[0].encode()\n    self.send_response(200); self.send_header('Content-Length',str(len(b))); self.end_headers(); self.wfile.write(b)\n  def log_message(self,*a): pass\nhttp.server.ThreadingHTTPServer(('',8080),H).serve_forever()"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
"#;

const SERVICE: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
"#;

fn ready_endpoints(slices: &[EndpointSlice]) -> usize {
    slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .count()
}

fn curl(url: &str) -> Option<String> {
    let o = Command::new("curl")
        .args(["-sS", "-m", "2", "--noproxy", "*", url])
        .output()
        .expect("run curl");
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_and_service_run_and_route_through_the_embedded_serve() {
    if !podgrace_node::process::namespaces_permitted() {
        eprintln!("skipped: needs root for pod network namespaces");
        return;
    }
    let claims_dir = std::env::temp_dir().join(format!("podgrace-embedded-{}", std::process::id()));
    let serve = EmbeddedServe::start(&EmbeddedConfig {
        node_name: "podgrace".into(),
        version: podgrace_core::KubeVersion::default(),
        network: podgrace_node::sandbox::NetworkConfig::default(),
        lag: LagModel::Fixed(Duration::from_millis(200)),
        claims_dir: claims_dir.clone(),
        latencies: None,
        kube_proxy: true,
    })
    .unwrap();
    let client = serve.client();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let services: Api<Service> = Api::default_namespaced(client.clone());
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let d: Deployment = serde_saphyr::from_str(APP).unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let s: Service = serde_saphyr::from_str(SERVICE).unwrap();
    let svc = services.create(&PostParams::default(), &s).await.unwrap();
    let spec = svc.spec.unwrap();
    let node_port = spec.ports.unwrap()[0].node_port.unwrap();
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    assert!(spec.cluster_ip.unwrap().starts_with("127."));

    let lp = ListParams::default().labels("kubernetes.io/service-name=web");
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready_endpoints(&slices.list(&lp).await.unwrap().items) < 2 {
        assert!(
            Instant::now() < deadline,
            "no two ready endpoints within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pod_ips: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    assert_eq!(pod_ips.len(), 2, "{pod_ips:?}");
    // kube-proxy has the endpoints a lag later; then every answer comes from one of the pods.
    let url = format!("http://127.0.0.1:{node_port}/");
    let mut answers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while answers.len() < 6 {
        assert!(Instant::now() < deadline, "curl {url}: {answers:?}");
        let u = url.clone();
        match tokio::task::spawn_blocking(move || curl(&u)).await.unwrap() {
            Some(body) => answers.push(body),
            None => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    assert!(
        answers.iter().all(|a| pod_ips.contains(a)),
        "{answers:?} vs {pod_ips:?}"
    );

    // A pod deleted through the API is replaced by the ReplicaSet controller.
    let victim = pods.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let items = pods.list(&ListParams::default()).await.unwrap().items;
        let fresh = items
            .iter()
            .filter(|p| p.metadata.name.as_deref() != Some(victim.as_str()))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        if fresh == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no replacement for {victim} within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    serve.shutdown(Duration::from_secs(30)).await;
    let _ = std::fs::remove_dir_all(&claims_dir);
}
