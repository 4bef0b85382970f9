//! What the kubelet hands CRI beyond a container's command: the pod sandbox's config
//! (`generatePodSandboxConfig`, `pkg/kubelet/kuberuntime/kuberuntime_sandbox.go`), the labels
//! and annotations (`pkg/kubelet/kuberuntime/labels.go`), the log paths
//! (`pkg/kubelet/kuberuntime/helpers.go`), the pod's DNS (`pkg/kubelet/network/dns/dns.go`) and
//! the image pull policy's default (`pkg/apis/core/v1/defaults.go`). Kubernetes 1.18 to 1.36.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use podgrace_core::plan::{ContainerPlan, PodPlan};
use podgrace_core::rules::qos::QosClass;
use podgrace_core::rules::resources;

use crate::runtime::{ContainerConfig, DnsConfig, PodSandboxConfig, PortMapping, PullPolicy};

/// `io.kubernetes.pod.name` (`pkg/kubelet/types/labels.go`).
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// `io.kubernetes.pod.namespace`.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// `io.kubernetes.pod.uid`.
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// `io.kubernetes.container.name`.
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";

/// Who the pod is, as the kubelet's CRI calls name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid` (a UUID the API server would have given).
    pub uid: String,
}

/// A fresh `metadata.uid`: a random (version 4) UUID, as the API server's `uuid.NewUUID`.
pub fn new_uid() -> String {
    let mut b = [0u8; 16];
    // /dev/urandom is always there on Linux; a failure leaves a time-derived value.
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
            ^ u128::from(std::process::id());
        b = t.to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `newPodLabels`: the pod's labels, then `io.kubernetes.pod.{name,namespace,uid}` over them.
pub fn pod_labels(plan: &PodPlan, pod: &PodIdentity) -> BTreeMap<String, String> {
    let mut l = plan.labels.clone();
    l.insert(POD_NAME_LABEL.into(), pod.name.clone());
    l.insert(POD_NAMESPACE_LABEL.into(), pod.namespace.clone());
    l.insert(POD_UID_LABEL.into(), pod.uid.clone());
    l
}

/// `newContainerLabels`.
pub fn container_labels(container: &str, pod: &PodIdentity) -> BTreeMap<String, String> {
    [
        (POD_NAME_LABEL, pod.name.as_str()),
        (POD_NAMESPACE_LABEL, pod.namespace.as_str()),
        (POD_UID_LABEL, pod.uid.as_str()),
        (CONTAINER_NAME_LABEL, container),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// `newContainerAnnotations`: the restart count, the termination message path and policy
/// (their defaults, `/dev/termination-log` and `File`), the pod's deletion grace (when set) and
/// terminationGracePeriodSeconds, the preStop handler and the ports as JSON. The container
/// hash (`io.kubernetes.container.hash`) is the FNV-32a of the container's fields podgrace
/// holds (the kubelet hashes the whole `v1.Container` JSON; only its changes matter).
pub fn container_annotations(
    c: &ContainerPlan,
    plan: &PodPlan,
    restart_count: u32,
    deletion_grace_period_seconds: Option<i64>,
) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    a.insert(
        "io.kubernetes.container.hash".into(),
        format!("{:x}", fnv32a(format!("{c:?}").as_bytes())),
    );
    a.insert(
        "io.kubernetes.container.restartCount".into(),
        restart_count.to_string(),
    );
    a.insert(
        "io.kubernetes.container.terminationMessagePath".into(),
        "/dev/termination-log".into(),
    );
    a.insert(
        "io.kubernetes.container.terminationMessagePolicy".into(),
        "File".into(),
    );
    if let Some(g) = deletion_grace_period_seconds {
        a.insert(
            "io.kubernetes.pod.deletionGracePeriod".into(),
            g.to_string(),
        );
    }
    // The API server defaults the field to 30, so the kubelet always has one.
    a.insert(
        "io.kubernetes.pod.terminationGracePeriod".into(),
        plan.termination_grace_period_seconds.to_string(),
    );
    if let Some(h) = &c.pre_stop {
        a.insert(
            "io.kubernetes.container.preStopHandler".into(),
            handler_json(h).to_string(),
        );
    }
    if !c.ports.is_empty() {
        let ports: Vec<serde_json::Value> = c
            .ports
            .iter()
            .map(|p| {
                let mut o = serde_json::Map::new();
                if let Some(n) = &p.name {
                    o.insert("name".into(), n.clone().into());
                }
                if p.host_port != 0 {
                    o.insert("hostPort".into(), p.host_port.into());
                }
                o.insert("containerPort".into(), p.container_port.into());
                o.insert("protocol".into(), p.protocol.clone().into());
                if !p.host_ip.is_empty() {
                    o.insert("hostIP".into(), p.host_ip.clone().into());
                }
                serde_json::Value::Object(o)
            })
            .collect();
        a.insert(
            "io.kubernetes.container.ports".into(),
            serde_json::Value::Array(ports).to_string(),
        );
    }
    a
}

/// The preStop handler as the API's JSON (`v1.LifecycleHandler`).
fn handler_json(h: &podgrace_core::plan::Handler) -> serde_json::Value {
    use podgrace_core::plan::{Handler, PortRef};
    let port = |p: &PortRef| match p {
        PortRef::Number(n) => serde_json::Value::from(*n),
        PortRef::Name(s) => serde_json::Value::from(s.clone()),
    };
    match h {
        Handler::Exec { command } => serde_json::json!({"exec": {"command": command}}),
        Handler::Sleep { seconds } => serde_json::json!({"sleep": {"seconds": seconds}}),
        Handler::HttpGet(g) => {
            let mut o = serde_json::Map::new();
            if let Some(host) = &g.host {
                o.insert("host".into(), host.clone().into());
            }
            o.insert("path".into(), g.path.clone().into());
            o.insert("port".into(), port(&g.port));
            o.insert("scheme".into(), g.scheme.clone().into());
            serde_json::json!({ "httpGet": o })
        }
        Handler::TcpSocket { port: p } => serde_json::json!({"tcpSocket": {"port": port(p)}}),
    }
}

fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// `BuildPodLogsDirectory`: `<root>/<namespace>_<name>_<uid>`.
pub fn pod_logs_directory(root: &Path, pod: &PodIdentity) -> PathBuf {
    root.join(format!("{}_{}_{}", pod.namespace, pod.name, pod.uid))
}

/// `buildContainerLogsPath`: `<container>/<restartCount>.log`, relative to the pod's log
/// directory.
pub fn container_log_path(container: &str, restart_count: u32) -> PathBuf {
    PathBuf::from(container).join(format!("{restart_count}.log"))
}

/// `SetDefaults_Container`'s `imagePullPolicy`: `Always` for the tag `latest` or none (a digest
/// is not a tag), `IfNotPresent` otherwise; the written value wins.
pub fn pull_policy(c: &ContainerPlan) -> PullPolicy {
    match c.image_pull_policy.as_deref() {
        Some("Always") => return PullPolicy::Always,
        Some("Never") => return PullPolicy::Never,
        Some("IfNotPresent") => return PullPolicy::IfNotPresent,
        _ => {}
    }
    let image = c.image.as_deref().unwrap_or_default();
    match image_tag(image) {
        None | Some("latest") if !image.contains('@') => PullPolicy::Always,
        _ => PullPolicy::IfNotPresent,
    }
}

/// The tag of an image reference (`nginx:1.27` → `1.27`; `host:5000/app` → none).
fn image_tag(image: &str) -> Option<&str> {
    let name = image.split('@').next().unwrap_or_default();
    let last = name.rsplit('/').next().unwrap_or_default();
    last.split_once(':').map(|(_, t)| t)
}

/// `parseResolvConf` on the host's resolv.conf: `nameserver`, `search` (the last line wins)
/// and `options` lines; the Default DNS policy's base (`podDNSHost`).
pub fn host_dns(resolv_conf: &str) -> DnsConfig {
    let mut d = DnsConfig::default();
    for line in resolv_conf.lines() {
        let line = line.split(['#', ';']).next().unwrap_or_default();
        let mut f = line.split_whitespace();
        match f.next() {
            Some("nameserver") => d.servers.extend(f.next().map(str::to_string)),
            Some("search") => d.searches = f.map(str::to_string).collect(),
            Some("options") => d.options.extend(f.map(str::to_string)),
            _ => {}
        }
    }
    // The resolver uses the first three nameservers (MaxDNSNameservers).
    d.servers.truncate(3);
    d
}

/// The kubelet's MissingClusterDNS warning for a ClusterFirst pod off the host network:
/// podgrace's kubelet has no cluster DNS, so the pod gets the host's (`Default`) DNS.
pub fn missing_cluster_dns_message(pod: &str) -> String {
    format!(
        "pod: {pod:?}. kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy."
    )
}

/// `GetPodContainerName` with the cgroupfs driver and `--cgroups-per-qos` (the default): the
/// pod's cgroup under its QoS class's, under `kubepods` at the cgroup root (`--cgroup-root /`):
/// `/kubepods/pod<UID>` (Guaranteed), `/kubepods/burstable/pod<UID>`,
/// `/kubepods/besteffort/pod<UID>` (`pkg/kubelet/cm/pod_container_manager_linux.go`,
/// `CgroupName.ToCgroupfs`). A runtime on the systemd driver would need the slice form
/// (`kubepods-burstable-pod<UID>.slice`), which podgrace does not produce.
pub fn pod_cgroup_parent(qos: QosClass, uid: &str) -> String {
    let level = match qos {
        QosClass::Guaranteed => "",
        QosClass::Burstable => "burstable/",
        QosClass::BestEffort => "besteffort/",
    };
    // The kubelet's pod cgroup name is `pod` + the UID as it is (dashes kept with cgroupfs).
    format!("/kubepods/{level}pod{uid}")
}

/// `generatePodSandboxConfig`: metadata, labels, annotations, hostname (the pod name, cut to
/// 63 characters, off the host network), the log directory, DNS, every declared port of the
/// regular containers, host network, the PID namespace, the pod's cgroup
/// ([`pod_cgroup_parent`]) with its limits (`ResourceConfigForPod`, as the pod container
/// manager writes them, `cpuCFSQuota` on, 100 ms period) and the pod's summed resources
/// (`calculateSandboxResources`).
pub fn pod_sandbox_config(
    plan: &PodPlan,
    pod: &PodIdentity,
    attempt: u32,
    log_root: Option<&Path>,
    dns: Option<DnsConfig>,
) -> PodSandboxConfig {
    let port_mappings = plan
        .containers
        .iter()
        .flat_map(|c| c.ports.iter())
        .map(|p| PortMapping {
            protocol: p.protocol.clone(),
            container_port: p.container_port,
            host_port: p.host_port,
            host_ip: p.host_ip.clone(),
        })
        .collect();
    PodSandboxConfig {
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        uid: pod.uid.clone(),
        attempt,
        host_network: plan.host_network,
        hostname: (!plan.host_network).then(|| pod.name.chars().take(63).collect()),
        labels: pod_labels(plan, pod),
        annotations: plan.annotations.clone(),
        dns,
        port_mappings,
        cgroup_parent: Some(pod_cgroup_parent(plan.qos_class, &pod.uid)),
        share_process_namespace: plan.share_process_namespace,
        log_directory: log_root.map(|r| pod_logs_directory(r, pod)),
        resources: Some(resources::sandbox_resources(
            &plan.resources(),
            crate::runtime::cgroup::node_resources(),
        )),
        pod_cgroup: Some(resources::resource_config_for_pod(
            &plan.resources(),
            true,
            resources::QUOTA_PERIOD_US as u64,
        )),
    }
}

/// `generateLinuxContainerResources` for container `c` of `plan` on this node
/// ([`crate::runtime::cgroup::node_resources`]).
pub fn container_resources(
    c: &ContainerPlan,
    plan: &PodPlan,
) -> resources::LinuxContainerResources {
    let pod = plan.resources();
    let me = pod
        .init_containers
        .iter()
        .chain(&pod.containers)
        .find(|r| r.name == c.name)
        .cloned()
        .unwrap_or_default();
    resources::generate_linux_container_resources(
        &pod,
        &me,
        crate::runtime::cgroup::node_resources(),
    )
}

/// Fills what CRI needs besides the command into `config` for one attempt of a container:
/// metadata, labels, annotations, the log path and the container's resources
/// ([`container_resources`]).
pub fn complete_container_config(
    config: &mut ContainerConfig,
    c: &ContainerPlan,
    plan: &PodPlan,
    pod: &PodIdentity,
    restart_count: u32,
    deletion_grace_period_seconds: Option<i64>,
) {
    config.attempt = restart_count;
    config.labels = container_labels(&c.name, pod);
    config.annotations =
        container_annotations(c, plan, restart_count, deletion_grace_period_seconds);
    config.log_path = Some(container_log_path(&c.name, restart_count));
    config.resources = Some(container_resources(c, plan));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(image: &str, policy: Option<&str>) -> ContainerPlan {
        let m = podgrace_core::manifest::load(
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n    image: {image}\n{}",
                policy.map(|p| format!("    imagePullPolicy: {p}\n")).unwrap_or_default()
            ),
            "p.yaml",
        )
        .expect("pod");
        let c = m.pods().next().expect("one").containers[0].clone();
        c
    }

    #[test]
    fn pull_policy_defaults_as_the_api_server() {
        assert_eq!(pull_policy(&container("nginx", None)), PullPolicy::Always);
        assert_eq!(
            pull_policy(&container("nginx:latest", None)),
            PullPolicy::Always
        );
        assert_eq!(
            pull_policy(&container("nginx:1.27", None)),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            pull_policy(&container("reg:5000/app", None)),
            PullPolicy::Always
        );
        assert_eq!(
            pull_policy(&container("reg:5000/app:v2", None)),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            pull_policy(&container("nginx:latest", Some("Never"))),
            PullPolicy::Never
        );
    }

    #[test]
    fn labels_and_log_paths() {
        let pod = PodIdentity {
            name: "web".into(),
            namespace: "default".into(),
            uid: "u-1".into(),
        };
        let l = container_labels("app", &pod);
        assert_eq!(l[CONTAINER_NAME_LABEL], "app");
        assert_eq!(l[POD_UID_LABEL], "u-1");
        assert_eq!(
            pod_logs_directory(Path::new("/var/log/pods"), &pod),
            PathBuf::from("/var/log/pods/default_web_u-1")
        );
        assert_eq!(container_log_path("app", 2), PathBuf::from("app/2.log"));
    }

    #[test]
    fn resolv_conf_as_the_kubelet_reads_it() {
        let d = host_dns("# x\nnameserver 10.0.0.1\nnameserver 10.0.0.2\nsearch a b\nsearch c d # last wins\noptions ndots:2 edns0\nnameserver 3.3.3.3\nnameserver 4.4.4.4\n");
        assert_eq!(d.servers, ["10.0.0.1", "10.0.0.2", "3.3.3.3"]);
        assert_eq!(d.searches, ["c", "d"]);
        assert_eq!(d.options, ["ndots:2", "edns0"]);
    }

    #[test]
    fn pod_cgroups_by_qos_class_with_the_cgroupfs_driver() {
        assert_eq!(
            pod_cgroup_parent(QosClass::Burstable, "u-1"),
            "/kubepods/burstable/podu-1"
        );
        assert_eq!(
            pod_cgroup_parent(QosClass::BestEffort, "u-1"),
            "/kubepods/besteffort/podu-1"
        );
        assert_eq!(
            pod_cgroup_parent(QosClass::Guaranteed, "u-1"),
            "/kubepods/podu-1"
        );
    }

    #[test]
    fn uids_are_version_4() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uid());
    }
}
