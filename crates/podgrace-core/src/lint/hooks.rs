//! Hook rules: whether the preStop can run at all (binary in the image, httpGet port and host)
//! and what it cannot do (run on crash).

use super::{all_words, basename, show_cmd, PodCx, Sink};
use crate::plan::{ContainerPlan, Handler, HttpGet, PortRef};

/// Binaries a minimal image does not ship.
const UTILITIES: &[&str] = &[
    "sh", "bash", "ash", "dash", "sleep", "curl", "wget", "kill", "pkill", "killall", "nc", "test",
    "timeout", "pgrep",
];

fn minimal_image(image: &str) -> bool {
    let i = image.to_ascii_lowercase();
    let debug = i.rsplit(':').next().is_some_and(|t| t.contains("debug"));
    !debug
        && (i.contains("distroless")
            || i.contains("scratch")
            || i.contains("chainguard/static")
            || i.starts_with("cgr.dev/chainguard/static"))
}

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    for c in cx.pod.running_containers() {
        let Some(h) = &c.pre_stop else {
            continue;
        };
        match h {
            Handler::Exec { command } => {
                binary_missing(cx, c, command, h, sink);
                state_export(cx, c, command, sink);
            }
            Handler::HttpGet(g) => http_get(cx, c, g, sink),
            _ => {}
        }
    }
}

fn binary_missing(
    cx: &PodCx<'_>,
    c: &ContainerPlan,
    command: &[String],
    h: &Handler,
    sink: &mut Sink<'_>,
) {
    let Some(image) = c.image.as_deref() else {
        return;
    };
    let Some(prog) = command.first() else {
        return;
    };
    if !minimal_image(image) || !UTILITIES.contains(&basename(prog)) {
        return;
    }
    let fix = match h.known_duration() {
        // sleep.seconds is a whole number: a fractional sleep is rounded up.
        Some(d) if cx.opts.version.pod_lifecycle_sleep_action() => format!(
            "use the sleep action instead: `lifecycle.preStop.sleep.seconds: {}`",
            d.ceil_secs()
        ),
        Some(_) => "use the sleep action (Kubernetes 1.30+) or an httpGet hook".into(),
        None => "use an httpGet hook, the sleep action, or ship the binary in the image".into(),
    };
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    sink.push(
        cx,
        "prestop-binary-missing",
        Some(c),
        c.field_span("lifecycle.preStop"),
        format!(
            "container {}: the preStop hook runs `{}`, but image {image} is a minimal image without `{}`: the hook fails at once (FailedPreStopHook) and the stop signal follows at t≈0, so the delay never happens; {fix}",
            c.name,
            show_cmd(&words),
            basename(prog),
        ),
    );
}

fn state_export(cx: &PodCx<'_>, c: &ContainerPlan, command: &[String], sink: &mut Sink<'_>) {
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let words = all_words(&words);
    let exports = words.iter().any(|w| {
        let w = w.to_ascii_lowercase();
        [
            "upload",
            "backup",
            "export",
            "dump",
            "flush",
            "checkpoint",
            "persist",
            "snapshot",
            "save-state",
        ]
        .iter()
        .any(|k| w.contains(k))
    });
    if !exports {
        return;
    }
    sink.push(
        cx,
        "prestop-not-run-on-crash",
        Some(c),
        c.field_span("lifecycle.preStop"),
        format!(
            "container {}: the preStop hook `{}` looks like it saves state; preStop runs on deletion, eviction and probe kills, but not when the container crashes or is OOM-killed (the kernel SIGKILLs it), so that state is lost then; persist it continuously or on a volume",
            c.name,
            show_cmd(&words)
        ),
    );
}

fn http_get(cx: &PodCx<'_>, c: &ContainerPlan, g: &HttpGet, sink: &mut Sink<'_>) {
    if g.host.is_some() {
        return;
    }
    let declared: Vec<String> = c
        .ports
        .iter()
        .map(|p| p.container_port.to_string())
        .collect();
    let (port_text, known) = match &g.port {
        PortRef::Number(n) => (
            n.to_string(),
            c.ports.iter().any(|p| p.container_port == *n),
        ),
        PortRef::Name(name) => (
            format!("{name:?}"),
            c.ports.iter().any(|p| p.name.as_deref() == Some(name)),
        ),
    };
    if !known {
        let list = if declared.is_empty() {
            "none".to_string()
        } else {
            declared.join(", ")
        };
        sink.push(
            cx,
            "prestop-httpget-undeclared-port",
            Some(c),
            c.field_span("lifecycle.preStop.httpGet.port"),
            format!(
                "container {}: the preStop httpGet goes to port {port_text}, which the container does not declare (ports: {list}); if nothing listens there the hook fails at once (FailedPreStopHook) and the stop signal follows at t≈0; point the hook at the port the app serves and declare it",
                c.name
            ),
        );
    }
    let port_num = match &g.port {
        PortRef::Number(n) => Some(*n),
        PortRef::Name(name) => c
            .ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port),
    };
    let loopback = port_num.is_some_and(|n| {
        let needles = [format!("127.0.0.1:{n}"), format!("localhost:{n}")];
        c.args
            .iter()
            .chain(c.command.iter())
            .map(String::as_str)
            .chain(c.env.iter().filter_map(|(_, v)| v.as_deref()))
            .any(|s| needles.iter().any(|n| s.contains(n.as_str())))
    });
    let message = format!(
        "container {}: the preStop httpGet has no host, so the kubelet sends it to the pod IP (port {port_text}), not to localhost; an endpoint bound to 127.0.0.1 refuses it (FailedPreStopHook) and the stop signal follows at once; bind it to all interfaces or use an exec hook (`curl localhost:{port_text}{}`){}",
        c.name,
        g.path,
        if loopback {
            "; the container's arguments or env bind this port to a loopback address"
        } else {
            ""
        }
    );
    sink.push_at(
        "prestop-httpget-pod-ip",
        loopback.then_some(crate::lint::Severity::Warning),
        message,
        c.field_span("lifecycle.preStop"),
        super::object_ref(cx.object),
        cx.object.span.clone(),
        Some(c.name.clone()),
    );
}

#[cfg(test)]
mod tests {
    use crate::lint::testutil::*;
    use crate::lint::Severity;

    fn c(body: &str) -> String {
        deploy(&format!("      containers:\n        - name: app\n{body}"))
    }

    #[test]
    fn binary_missing() {
        let f = run(&c("          image: gcr.io/distroless/static:nonroot\n          lifecycle:\n            preStop:\n              exec:\n                command: [sleep, \"5\"]\n"));
        let f = of(&f, "prestop-binary-missing");
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("sleep.seconds: 5"),
            "{}",
            f[0].message
        );
        // sleep.seconds is an integer: a fractional sleep is suggested rounded up.
        let f = run(&c("          image: gcr.io/distroless/static:nonroot\n          lifecycle:\n            preStop:\n              exec:\n                command: [sleep, \"1.5\"]\n"));
        let f = of(&f, "prestop-binary-missing");
        assert!(
            f[0].message
                .contains("`lifecycle.preStop.sleep.seconds: 2`"),
            "{}",
            f[0].message
        );
        let ok = run(&c("          image: debian:12\n          lifecycle:\n            preStop:\n              exec:\n                command: [sleep, \"5\"]\n"));
        assert!(of(&ok, "prestop-binary-missing").is_empty());
        let ok = run(&c("          image: gcr.io/distroless/static\n          lifecycle:\n            preStop:\n              sleep:\n                seconds: 5\n"));
        assert!(of(&ok, "prestop-binary-missing").is_empty());
    }

    #[test]
    fn undeclared_port() {
        let f = run(&c("          image: app\n          ports:\n            - containerPort: 8080\n          lifecycle:\n            preStop:\n              httpGet:\n                path: /prestop\n                port: 8090\n"));
        let u = of(&f, "prestop-httpget-undeclared-port");
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].span.line, 24);
        let ok = run(&c("          image: app\n          ports:\n            - containerPort: 8090\n          lifecycle:\n            preStop:\n              httpGet:\n                path: /prestop\n                port: 8090\n"));
        assert!(of(&ok, "prestop-httpget-undeclared-port").is_empty());
    }

    #[test]
    fn pod_ip() {
        let hook = "          lifecycle:\n            preStop:\n              httpGet:\n                path: /prestop\n                port: 8090\n";
        let f = run(&c(&format!(
            "          image: app\n          ports:\n            - containerPort: 8090\n{hook}"
        )));
        let p = of(&f, "prestop-httpget-pod-ip");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].severity, Severity::Info);
        let f = run(&c(&format!("          image: app\n          args: [--listen, \"127.0.0.1:8090\"]\n          ports:\n            - containerPort: 8090\n{hook}")));
        assert_eq!(
            of(&f, "prestop-httpget-pod-ip")[0].severity,
            Severity::Warning
        );
        let ok = run(&c("          image: app\n          lifecycle:\n            preStop:\n              httpGet:\n                host: 10.0.0.1\n                port: 8090\n"));
        assert!(of(&ok, "prestop-httpget-pod-ip").is_empty());
    }

    #[test]
    fn not_run_on_crash() {
        let f = run(&c("          image: app\n          lifecycle:\n            preStop:\n              exec:\n                command: [/upload-state.sh]\n"));
        assert_eq!(of(&f, "prestop-not-run-on-crash").len(), 1);
        let ok = run(&c("          image: app\n          lifecycle:\n            preStop:\n              exec:\n                command: [/drain.sh]\n"));
        assert!(of(&ok, "prestop-not-run-on-crash").is_empty());
    }
}
