//! The pod template a drill runs: the port a Service in front of it would target, and how many
//! replicas it asks for.

use podgrace_core::plan::{PodPlan, PortRef, ProbeAction};

/// Replicas of a template that gives none (a bare pod, or a Deployment without `replicas`): 2,
/// the fewest that keep the Service up while one is disrupted.
pub const DEFAULT_REPLICAS: usize = 2;

/// The port a Service would target: the first declared TCP containerPort, else the numeric port
/// of the first readiness probe (httpGet, tcpSocket or grpc), which is where the app serves.
/// `None` when neither exists (a named probe port counts as none: the CLI then asks for
/// `--port`).
pub fn service_port(plan: &PodPlan) -> Option<u16> {
    let declared = plan
        .containers
        .iter()
        .flat_map(|c| c.ports.iter())
        .filter(|p| p.protocol == "TCP")
        .find_map(|p| u16::try_from(p.container_port).ok());
    declared.or_else(|| {
        plan.containers.iter().find_map(|c| {
            let port = match &c.readiness_probe.as_ref()?.action {
                ProbeAction::HttpGet(h) => match &h.port {
                    PortRef::Number(n) => *n,
                    PortRef::Name(_) => return None,
                },
                ProbeAction::TcpSocket {
                    port: PortRef::Number(n),
                    ..
                } => *n,
                ProbeAction::Grpc { port, .. } => *port,
                _ => return None,
            };
            u16::try_from(port).ok().filter(|p| *p > 0)
        })
    })
}

/// Why a template cannot be drilled as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A Deployment with `replicas: 0` and no `--replicas`.
    #[error("the Deployment has replicas: 0, nothing to drill; give --replicas")]
    NoReplicas,
}

/// The replicas a drill of `plan` runs when `--replicas` is not `given`: the Deployment's
/// `replicas`, else [`DEFAULT_REPLICAS`]; `given` wins when set.
///
/// # Errors
/// [`TemplateError::NoReplicas`] for `replicas: 0` without `given`.
pub fn replicas(plan: &PodPlan, given: Option<usize>) -> Result<usize, TemplateError> {
    if let Some(n) = given {
        return Ok(n);
    }
    match plan.replicas {
        Some(0) => Err(TemplateError::NoReplicas),
        r => Ok(r
            .and_then(|r| usize::try_from(r).ok())
            .unwrap_or(DEFAULT_REPLICAS)
            .max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(yaml: &str) -> PodPlan {
        let m = podgrace_core::manifest::load(yaml, "t.yaml").unwrap();
        let p = m.pods().next().unwrap().clone();
        p
    }

    const HEAD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    image: x\n";

    #[test]
    fn the_first_tcp_container_port_is_the_target() {
        let p = plan(&format!(
            "{HEAD}    ports: [{{containerPort: 53, protocol: UDP}}, {{containerPort: 8443}}, {{containerPort: 9000}}]\n    readinessProbe: {{tcpSocket: {{port: 7000}}}}\n"
        ));
        assert_eq!(service_port(&p), Some(8443));
    }

    #[test]
    fn without_ports_the_readiness_probe_port_is_the_target() {
        let p = plan(&format!(
            "{HEAD}    readinessProbe: {{httpGet: {{path: /ready, port: 8081}}}}\n"
        ));
        assert_eq!(service_port(&p), Some(8081));
        let p = plan(&format!(
            "{HEAD}    readinessProbe: {{grpc: {{port: 9090}}}}\n"
        ));
        assert_eq!(service_port(&p), Some(9090));
        // A named port resolves to nothing without a declared port.
        let p = plan(&format!(
            "{HEAD}    readinessProbe: {{httpGet: {{path: /, port: http}}}}\n"
        ));
        assert_eq!(service_port(&p), None);
        let p = plan(&format!(
            "{HEAD}    readinessProbe: {{exec: {{command: [\"true\"]}}}}\n"
        ));
        assert_eq!(service_port(&p), None);
    }

    #[test]
    fn replicas_come_from_the_flag_the_deployment_or_two() {
        let bare = plan(HEAD);
        assert_eq!(replicas(&bare, None), Ok(2));
        assert_eq!(replicas(&bare, Some(5)), Ok(5));
        let dep = |n: i32| {
            plan(&format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {n}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - {{name: app, image: x}}\n"
            ))
        };
        assert_eq!(replicas(&dep(4), None), Ok(4));
        assert_eq!(replicas(&dep(0), None), Err(TemplateError::NoReplicas));
        assert_eq!(replicas(&dep(0), Some(1)), Ok(1));
    }
}
