//! Stop-signal rules: what PID 1 is (shell, package manager, init wrapper), nginx's graceful
//! signal, and hooks that signal the app themselves.

use super::{
    all_words, argv, basename, image_name, is_shell, script_commands, shell_script, show_cmd,
    PodCx, Sink,
};
use crate::plan::{ContainerPlan, Handler};
use crate::rules::runtime::{self, Signal};

/// Leading init wrappers (`tini --`, `dumb-init --`) and their flags, skipped.
fn strip_init<'a, 'b>(argv: &'b [&'a str]) -> (Option<&'a str>, &'b [&'a str]) {
    let Some(first) = argv.first() else {
        return (None, argv);
    };
    let name = basename(first);
    if !matches!(name, "tini" | "dumb-init" | "tini-static") {
        return (None, argv);
    }
    let mut i = 1;
    while i < argv.len() && argv[i].starts_with('-') {
        i += 1;
        if argv[i - 1] == "--" {
            break;
        }
    }
    (Some(*first), &argv[i..])
}

fn is_package_manager(word: &str) -> bool {
    matches!(basename(word), "npm" | "yarn" | "pnpm")
}

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    for c in cx.pod.running_containers() {
        pid1(cx, c, sink);
        nginx(cx, c, sink);
        hook_signals(cx, c, sink);
    }
}

fn stop_and_kill(cx: &PodCx<'_>, c: &ContainerPlan) -> (String, String, String) {
    match cx.timeline_of(c) {
        Some(t) => (
            t.stop_signal.clone(),
            t.stop_signal_seconds.max.to_string(),
            t.kill_seconds.max.to_string(),
        ),
        None => ("SIGTERM".into(), "0".into(), cx.tgps().max(2).to_string()),
    }
}

fn pid1(cx: &PodCx<'_>, c: &ContainerPlan, sink: &mut Sink<'_>) {
    let full = argv(c);
    let (init, rest) = strip_init(&full);
    let span = || {
        if c.command.is_empty() {
            c.field_span("args")
        } else {
            c.field_span("command")
        }
    };
    let (sig, _, kill) = stop_and_kill(cx, c);
    // The program that ends up as PID 1 (or as the init's child).
    let script = shell_script(rest);
    let last_cmd: Vec<&str> = match script {
        Some((_, s)) => script_commands(s)
            .last()
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default(),
        None => rest.to_vec(),
    };
    let prog_words: &[&str] = match last_cmd.first() {
        Some(&"exec") => &last_cmd[1..],
        _ => &last_cmd,
    };
    let wrapper = prog_words
        .first()
        .copied()
        .filter(|w| is_package_manager(w));
    if let Some(pm) = wrapper {
        sink.push(
            cx,
            "package-manager-wrapper",
            Some(c),
            span(),
            format!(
                "container {}: `{}` runs the app: {sig} goes to {} (PID 1), which exits without waiting for the app (npm/run-script#237); the runtime then kills the app at once and its drain is lost; run the program directly (e.g. `command: [node, server.js]`) so it is PID 1 and receives {sig}",
                c.name,
                show_cmd(prog_words),
                basename(pm),
            ),
        );
    } else if let Some((shell, s)) = script {
        if init.is_none() || is_shell(rest.first().copied().unwrap_or_default()) {
            let cmds = script_commands(s);
            let execs = cmds.last().is_some_and(|l| l.starts_with("exec "));
            if !execs {
                sink.push(
                    cx,
                    "shell-form-command",
                    Some(c),
                    span(),
                    format!(
                        "container {}: command `{} -c \"{}\"` leaves the shell as the process that gets {sig}; a shell does not pass it on, so the app gets no signal and is SIGKILLed at t={kill} without draining; write `exec` before the program (`{} -c \"… exec PROGRAM\"`) or use the exec form",
                        c.name,
                        basename(shell),
                        show_cmd(&[s]),
                        basename(shell),
                    ),
                );
            }
        }
    }
    if let Some(init) = init {
        let name = basename(init);
        let group = match name {
            "dumb-init" => {
                let setsid_off = c
                    .env
                    .iter()
                    .any(|(k, v)| k == "DUMB_INIT_SETSID" && v.as_deref() == Some("0"));
                let single = full
                    .iter()
                    .take_while(|a| **a != "--")
                    .any(|a| *a == "--single-child" || *a == "-c");
                !setsid_off && !single
            }
            _ => full.iter().take_while(|a| **a != "--").any(|a| *a == "-g"),
        };
        if group {
            let fix = if name == "dumb-init" {
                "set env DUMB_INIT_SETSID=0 (or --single-child)"
            } else {
                "drop -g"
            };
            sink.push(
                cx,
                "init-signals-process-group",
                Some(c),
                span(),
                format!(
                    "container {}: {name} forwards {sig} to the whole process group, so forked workers get it at t=0 and abort their tasks although terminationGracePeriodSeconds is {} s; {fix} so only the main process is signalled",
                    c.name,
                    cx.tgps(),
                ),
            );
        }
    }
}

fn nginx_like(image: &str) -> bool {
    let n = image_name(image);
    (n.contains("nginx") || n.contains("openresty")) && !n.contains("exporter")
}

/// `nginx -s quit|stop`, `kill`, `pkill`, `killall` in a hook, without a wait.
fn signals_without_wait(h: &Handler) -> Option<String> {
    let Handler::Exec { command } = h else {
        return None;
    };
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let words = all_words(&words);
    let signals = words
        .windows(3)
        .any(|w| basename(w[0]) == "nginx" && w[1] == "-s" && matches!(w[2], "quit" | "stop"))
        || words
            .iter()
            .any(|w| matches!(basename(w), "kill" | "pkill" | "killall"));
    let waits = words.iter().any(|w| {
        matches!(
            basename(w.trim_end_matches(';')),
            "sleep" | "while" | "until" | "wait" | "pgrep" | "tail"
        )
    });
    (signals && !waits).then(|| show_cmd(&words))
}

fn nginx(cx: &PodCx<'_>, c: &ContainerPlan, sink: &mut Sink<'_>) {
    let Some(image) = c.image.as_deref() else {
        return;
    };
    if !nginx_like(image) {
        return;
    }
    let image_sig = runtime::image_stop_signal(image).map(Signal::name);
    let sig = runtime::effective_stop_signal(c.stop_signal.as_deref(), image_sig.as_deref());
    if sig == Ok(Signal::SIGQUIT) {
        return;
    }
    // A hook that drains (anything but a quit-and-return) handles the shutdown.
    if let Some(h) = &c.pre_stop {
        if signals_without_wait(h).is_none() {
            return;
        }
    }
    let (stop, at, _) = stop_and_kill(cx, c);
    let span = if c.stop_signal.is_some() {
        c.field_span("lifecycle.stopSignal")
    } else {
        c.field_span("image")
    };
    let fix = if cx.opts.version.at_least(1, 33) {
        "set lifecycle.stopSignal: SIGQUIT (ContainerStopSignals, needs spec.os.name: linux), build the image with STOPSIGNAL SIGQUIT"
    } else {
        "build the image with STOPSIGNAL SIGQUIT (lifecycle.stopSignal needs Kubernetes 1.33)"
    };
    sink.push(
        cx,
        "nginx-stop-signal",
        Some(c),
        span,
        format!(
            "container {}: image {image} looks like nginx but its stop signal is {stop} (at t={at}), which makes nginx shut down fast and drop requests in flight; SIGQUIT is its graceful shutdown: {fix}, or add a preStop that runs `nginx -s quit` and waits until nginx has exited",
            c.name
        ),
    );
}

fn hook_signals(cx: &PodCx<'_>, c: &ContainerPlan, sink: &mut Sink<'_>) {
    let Some(h) = &c.pre_stop else {
        return;
    };
    let Some(cmd) = signals_without_wait(h) else {
        return;
    };
    let (stop, _, _) = stop_and_kill(cx, c);
    sink.push(
        cx,
        "prestop-signals-without-wait",
        Some(c),
        c.field_span("lifecycle.preStop"),
        format!(
            "container {}: the preStop hook `{cmd}` signals the app and returns at once, so the kubelet sends {stop} right after (t≈0) and a graceful quit turns into a fast shutdown; wait in the hook until the process has exited (e.g. `nginx -s quit; while pgrep -x nginx; do sleep 1; done`) within terminationGracePeriodSeconds {} s",
            c.name,
            cx.tgps()
        ),
    );
}

#[cfg(test)]
mod tests {
    use crate::lint::testutil::*;

    fn c(body: &str) -> String {
        deploy(&format!("      containers:\n        - name: app\n{body}"))
    }

    #[test]
    fn shell_form() {
        let f = run(&c(
            "          image: app\n          command: [sh, -c, \"./migrate; node server.js\"]\n",
        ));
        let f = of(&f, "shell-form-command");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].span.line, 18);
        assert!(
            f[0].message.contains("SIGKILLed at t=30"),
            "{}",
            f[0].message
        );
        let ok = run(&c("          image: app\n          command: [sh, -c, \"./migrate; exec node server.js\"]\n"));
        assert!(of(&ok, "shell-form-command").is_empty());
        let ok = run(&c(
            "          image: app\n          command: [node, server.js]\n",
        ));
        assert!(of(&ok, "shell-form-command").is_empty());
    }

    #[test]
    fn package_manager() {
        let f = run(&c(
            "          image: node:20\n          command: [npm, start]\n",
        ));
        assert_eq!(of(&f, "package-manager-wrapper").len(), 1);
        let f = run(&c(
            "          image: node:20\n          command: [sh, -c, \"exec yarn start\"]\n",
        ));
        assert_eq!(of(&f, "package-manager-wrapper").len(), 1);
        assert!(of(&f, "shell-form-command").is_empty());
        let ok = run(&c(
            "          image: node:20\n          command: [node, server.js]\n",
        ));
        assert!(of(&ok, "package-manager-wrapper").is_empty());
    }

    #[test]
    fn init_group() {
        let f = run(&c("          image: airflow\n          command: [dumb-init, --, bash, -c, exec airflow celery worker]\n"));
        let g = of(&f, "init-signals-process-group");
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].severity, crate::lint::Severity::Info);
        assert!(of(&f, "shell-form-command").is_empty());
        let ok = run(&c("          image: airflow\n          command: [dumb-init, --, bash, -c, exec airflow celery worker]\n          env:\n            - name: DUMB_INIT_SETSID\n              value: \"0\"\n"));
        assert!(of(&ok, "init-signals-process-group").is_empty());
        let f = run(&c(
            "          image: x\n          command: [tini, -g, --, app]\n",
        ));
        assert_eq!(of(&f, "init-signals-process-group").len(), 1);
        let ok = run(&c(
            "          image: x\n          command: [tini, --, app]\n",
        ));
        assert!(of(&ok, "init-signals-process-group").is_empty());
    }

    #[test]
    fn nginx_stop_signal() {
        let f = run(&c("          image: bitnami/nginx:1.25\n"));
        let f = of(&f, "nginx-stop-signal");
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("SIGTERM"), "{}", f[0].message);
        // The official image declares STOPSIGNAL SIGQUIT.
        assert!(of(
            &run(&c("          image: nginx:1.27\n")),
            "nginx-stop-signal"
        )
        .is_empty());
        let quit = deploy("      os:\n        name: linux\n      containers:\n        - name: app\n          image: bitnami/nginx\n          lifecycle:\n            stopSignal: SIGQUIT\n");
        assert!(of(&run(&quit), "nginx-stop-signal").is_empty());
    }

    #[test]
    fn hook_signals_without_wait() {
        let f = run(&c("          image: nginx\n          lifecycle:\n            preStop:\n              exec:\n                command: [nginx, -s, quit]\n"));
        assert_eq!(of(&f, "prestop-signals-without-wait").len(), 1);
        let ok = run(&c("          image: nginx\n          lifecycle:\n            preStop:\n              exec:\n                command: [sh, -c, \"nginx -s quit; while pgrep -x nginx; do sleep 1; done\"]\n"));
        assert!(of(&ok, "prestop-signals-without-wait").is_empty());
    }
}
