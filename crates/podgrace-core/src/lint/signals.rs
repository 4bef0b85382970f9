//! Stop-signal rules: what PID 1 is (shell, package manager, init wrapper), nginx's graceful
//! signal, and hooks that signal the app themselves.

use super::{
    all_words, argv, basename, image_name, is_shell, script_commands, secs, shell_script, show_cmd,
    traffic, PodCx, Sink,
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

/// The stop signal of `c` and when it and SIGKILL come (the latest case), from the delete
/// timeline. A preStop that only signals the app and returns ([`signals_without_wait`]) gets no
/// benefit of the doubt: the earliest case, as if it returned at once.
fn stop_and_kill(cx: &PodCx<'_>, c: &ContainerPlan) -> (String, String, String) {
    let quick = c.pre_stop.as_ref().and_then(signals_without_wait).is_some();
    match cx.timeline_of(c) {
        Some(t) if quick => (
            t.stop_signal.clone(),
            t.stop_signal_seconds.min.to_string(),
            t.kill_seconds.min.to_string(),
        ),
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

/// A preStop hook that signals the app (`nginx -s quit|stop`, `kill`, `pkill`, `killall`) and
/// has nothing that waits (`sleep`, `while`/`until` loops, `wait`, `pgrep`, `tail`), so it returns
/// at once.
pub(super) struct SignalHook {
    /// The hook's command, shortened for messages.
    pub cmd: String,
    /// The signal the first signalling command sends, when it can be read: `nginx -s quit` is
    /// SIGQUIT and `-s stop` SIGTERM (nginx's `ngx_signal_process`); `kill`, `pkill` and
    /// `killall` send SIGTERM unless told otherwise.
    pub signal: Option<Signal>,
    /// The hook talks to nginx (`nginx -s ...`).
    pub nginx: bool,
}

/// The signal a `kill`/`pkill`/`killall` command line sends (`words[0]` is the program):
/// `-QUIT`, `-SIGQUIT`, `-3`, `-s QUIT` (kill, killall), `-n 3` (kill), `--signal QUIT`;
/// SIGTERM without one. `None` for `kill -l` (lists signals) or a signal that is not readable
/// (`-$SIG`).
fn kill_signal(words: &[&str]) -> Option<Signal> {
    let prog = basename(words.first()?);
    let mut it = words[1..]
        .iter()
        .map(|w| w.trim_end_matches([';', '&', '|']));
    while let Some(w) = it.next() {
        match w {
            "-l" | "-L" | "--list" | "--table" => return None,
            "--" => break,
            "--signal" => return runtime::parse_signal(it.next()?).ok(),
            "-s" if prog != "pkill" => return runtime::parse_signal(it.next()?).ok(),
            "-n" if prog == "kill" => return runtime::parse_signal(it.next()?).ok(),
            _ => {}
        }
        if let Some(v) = w.strip_prefix("--signal=") {
            return runtime::parse_signal(v).ok();
        }
        match w.strip_prefix('-') {
            Some(flag) if !flag.is_empty() && !flag.starts_with('-') => {
                if let Ok(sig) = runtime::parse_signal(flag) {
                    return Some(sig);
                }
                if flag.starts_with('$') {
                    return None;
                }
                // Another option (`pkill -f`, `killall -q`): keep looking.
            }
            _ => break,
        }
    }
    Some(Signal::SIGTERM)
}

/// See [`SignalHook`].
pub(super) fn signals_without_wait(h: &Handler) -> Option<SignalHook> {
    let Handler::Exec { command } = h else {
        return None;
    };
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let words = all_words(&words);
    let waits = words.iter().any(|w| {
        matches!(
            basename(w.trim_end_matches(';')),
            "sleep" | "while" | "until" | "wait" | "pgrep" | "tail"
        )
    });
    if waits {
        return None;
    }
    for (i, w) in words.iter().enumerate() {
        let rest = &words[i..];
        match basename(w) {
            "nginx" | "openresty" if rest.len() >= 3 && rest[1] == "-s" => {
                let signal = match rest[2].trim_end_matches([';', '&', '|']) {
                    "quit" => Signal::SIGQUIT,
                    "stop" => Signal::SIGTERM,
                    _ => continue,
                };
                return Some(SignalHook {
                    cmd: show_cmd(&words),
                    signal: Some(signal),
                    nginx: true,
                });
            }
            "kill" | "pkill" | "killall" => {
                return Some(SignalHook {
                    cmd: show_cmd(&words),
                    signal: kill_signal(rest),
                    nginx: false,
                });
            }
            _ => {}
        }
    }
    None
}

fn nginx(cx: &PodCx<'_>, c: &ContainerPlan, sink: &mut Sink<'_>) {
    let Some(image) = c.image.as_deref() else {
        return;
    };
    if !nginx_like(image) {
        return;
    }
    let image_sig = runtime::container_image_stop_signal(c);
    let sig = runtime::effective_stop_signal(c.stop_signal.as_deref(), image_sig.as_deref());
    if sig == Ok(Signal::SIGQUIT) {
        return;
    }
    // A hook that drains (anything but a quit-and-return) handles the shutdown. When the hook
    // quits and returns into nginx's fast shutdown, prestop-signals-without-wait reports it,
    // naming the hook and the stop signal that follows (the same root cause, the same fixes).
    if let Some(h) = &c.pre_stop {
        let fast = matches!(
            hook_finding(cx, c),
            Some((HookCase::FastByHook | HookCase::FastFollows, _))
        );
        if signals_without_wait(h).is_none()
            || (fast && sink.enabled("prestop-signals-without-wait"))
        {
            return;
        }
    }
    let (stop, at, _) = stop_and_kill(cx, c);
    let span = if c.stop_signal.is_some() {
        c.field_span("lifecycle.stopSignal")
    } else {
        c.field_span("image")
    };
    let fix = if cx.opts.version.container_stop_signals() {
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

/// nginx's fast shutdown signals (SIGTERM, SIGINT); SIGQUIT is its graceful shutdown
/// (nginx `ngx_signal_process`, "Controlling nginx").
fn nginx_fast(sig: Signal) -> bool {
    sig == Signal::SIGTERM || sig == Signal::SIGINT
}

fn hook_signals(cx: &PodCx<'_>, c: &ContainerPlan, sink: &mut Sink<'_>) {
    if let Some((_, message)) = hook_finding(cx, c) {
        sink.push(
            cx,
            "prestop-signals-without-wait",
            Some(c),
            c.field_span("lifecycle.preStop"),
            message,
        );
    }
}

/// What a preStop that signals the app and returns at once gets wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HookCase {
    /// It asks nginx for its fast shutdown itself (`nginx -s stop`).
    FastByHook,
    /// The stop signal repeats the hook's signal: only the missing delay is wrong.
    SameSignal,
    /// nginx's graceful quit, then its fast shutdown as the stop signal.
    FastFollows,
    /// Another signal follows and can cut the shutdown short.
    Other,
}

/// The `prestop-signals-without-wait` finding for container `c`, if its preStop signals the app
/// and returns at once, worded after what the stop signal that follows does to the app.
fn hook_finding(cx: &PodCx<'_>, c: &ContainerPlan) -> Option<(HookCase, String)> {
    let hook = signals_without_wait(c.pre_stop.as_ref()?)?;
    let (stop, _, _) = stop_and_kill(cx, c);
    let stop_sig = runtime::parse_signal(&stop).ok();
    let nginx = hook.nginx || c.image.as_deref().is_some_and(nginx_like);
    let tgps = cx.tgps();
    let cmd = &hook.cmd;
    let sent = hook
        .signal
        .map_or_else(|| "a signal".to_string(), Signal::name);
    let (delay, delay_fix) = traffic::delay_fix(cx);
    // The example first waits out the endpoint lag, then quits and waits for the exit.
    let wait_example = if nginx {
        format!("`sleep {delay}; nginx -s quit; while pgrep -x nginx; do sleep 1; done`")
    } else {
        format!("`sleep {delay}`, then signal, then poll with `kill -0` or `pgrep` and `sleep 1`")
    };
    let case = match hook.signal {
        Some(sig) if nginx && nginx_fast(sig) => HookCase::FastByHook,
        Some(sig) if stop_sig == Some(sig) => HookCase::SameSignal,
        Some(sig) if nginx && sig == Signal::SIGQUIT && stop_sig.is_some_and(nginx_fast) => {
            HookCase::FastFollows
        }
        _ => HookCase::Other,
    };
    // With the same signal, the hook's only effect is that it gives no delay: the endpoint
    // race. endpoint-race reports it for a container that serves traffic as far as lint can
    // tell (it is the rule `endpointLagSeconds` and its severity configure); this finding
    // covers the rest, so the cause is reported once.
    if case == HookCase::SameSignal
        && (!traffic::race_applies(cx) || traffic::serves(cx, c).is_some())
    {
        return None;
    }
    let lag = secs(cx.config().endpoint_lag_seconds);
    let message = match case {
        HookCase::FastByHook => format!(
            "container {}: the preStop hook `{cmd}` sends {sent}, nginx's fast shutdown, which drops the requests in flight, and returns at once, so {stop} follows right after (t≈0); quit gracefully and wait in the hook instead (e.g. {wait_example}) within terminationGracePeriodSeconds {tgps} s",
            c.name
        ),
        HookCase::SameSignal => format!(
            "container {}: the preStop hook `{cmd}` sends {sent}, the same signal the kubelet sends as the stop signal right after the hook returns (t≈0), so the hook delays nothing: the app starts shutting down at t≈0 while the EndpointSlice update still takes about {lag} s (endpointLagSeconds) to reach kube-proxy, ingress controllers and load balancers, and if a Service sends this container traffic, requests sent to it meanwhile fail; replace the hook with a delay of at least {lag} s, e.g. {delay_fix} ({stop} then follows the delay), within terminationGracePeriodSeconds {tgps} s",
            c.name
        ),
        HookCase::FastFollows => format!(
            "container {}: the preStop hook `{cmd}` asks nginx to quit gracefully ({sent}) and returns at once, so the kubelet sends {stop} right after (t≈0), nginx's fast shutdown, which drops the requests in flight; make {sent} the stop signal, or wait in the hook until nginx has exited (e.g. {wait_example}) within terminationGracePeriodSeconds {tgps} s",
            c.name
        ),
        HookCase::Other => format!(
            "container {}: the preStop hook `{cmd}` sends {sent} to the app and returns at once, so the kubelet's stop signal {stop} follows right after (t≈0) and can cut short the shutdown the hook started; wait in the hook until the app has exited (e.g. {wait_example}) within terminationGracePeriodSeconds {tgps} s",
            c.name
        ),
    };
    Some((case, message))
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

    fn hook(image: &str, command: &str) -> String {
        c(&format!("          image: {image}\n          lifecycle:\n            preStop:\n              exec:\n                command: {command}\n"))
    }

    #[test]
    fn same_graceful_signal_is_the_endpoint_race_not_a_fast_shutdown() {
        // nginx:1.25 stops with SIGQUIT (its STOPSIGNAL): the kubelet's SIGQUIT after
        // `nginx -s quit` is the same graceful quit; what goes wrong is the missing delay.
        let f = run(&hook("nginx:1.25", "[nginx, -s, quit]"));
        let h = of(&f, "prestop-signals-without-wait");
        assert_eq!(h.len(), 1, "{f:?}");
        assert_eq!(
            h[0].message,
            "container app: the preStop hook `nginx -s quit` sends SIGQUIT, the same signal the kubelet sends as the stop signal right after the hook returns (t≈0), so the hook delays nothing: the app starts shutting down at t≈0 while the EndpointSlice update still takes about 1 s (endpointLagSeconds) to reach kube-proxy, ingress controllers and load balancers, and if a Service sends this container traffic, requests sent to it meanwhile fail; replace the hook with a delay of at least 1 s, e.g. `lifecycle.preStop.sleep.seconds: 5` (SIGQUIT then follows the delay), within terminationGracePeriodSeconds 30 s"
        );
        assert!(!h[0].message.contains("fast shutdown"), "{}", h[0].message);
        // The same with lifecycle.stopSignal: SIGQUIT on an image podgrace does not know.
        let y = deploy("      os:\n        name: linux\n      containers:\n        - name: app\n          image: bitnami/nginx\n          lifecycle:\n            stopSignal: SIGQUIT\n            preStop:\n              exec:\n                command: [nginx, -s, quit]\n");
        let f = run(&y);
        assert!(of(&f, "prestop-signals-without-wait")[0]
            .message
            .contains("sends SIGQUIT, the same signal the kubelet sends as the stop signal"));
        // Without an endpoint lag there is no race, and nothing else is wrong.
        let mut opts = crate::lint::LintOptions::default();
        opts.config.endpoint_lag_seconds = 0.0;
        let f = run_with(&hook("nginx:1.25", "[nginx, -s, quit]"), &opts);
        assert!(of(&f, "prestop-signals-without-wait").is_empty(), "{f:?}");
    }

    #[test]
    fn a_fast_stop_signal_after_a_graceful_quit() {
        // bitnami/nginx keeps SIGTERM: nginx's fast shutdown follows the graceful quit. One
        // finding (the hook's), not also nginx-stop-signal for the same cause.
        let f = run(&hook("bitnami/nginx:1.25", "[nginx, -s, quit]"));
        assert!(of(&f, "nginx-stop-signal").is_empty(), "{f:?}");
        assert_eq!(
            of(&f, "prestop-signals-without-wait")[0].message,
            "container app: the preStop hook `nginx -s quit` asks nginx to quit gracefully (SIGQUIT) and returns at once, so the kubelet sends SIGTERM right after (t≈0), nginx's fast shutdown, which drops the requests in flight; make SIGQUIT the stop signal, or wait in the hook until nginx has exited (e.g. `sleep 5; nginx -s quit; while pgrep -x nginx; do sleep 1; done`) within terminationGracePeriodSeconds 30 s"
        );
        // With prestop-signals-without-wait off, nginx-stop-signal still reports the signal.
        let mut opts = crate::lint::LintOptions::default();
        opts.config
            .disable
            .push("prestop-signals-without-wait".into());
        let f = run_with(&hook("bitnami/nginx:1.25", "[nginx, -s, quit]"), &opts);
        assert_eq!(of(&f, "nginx-stop-signal").len(), 1, "{f:?}");
        // `nginx -s stop` is a fast shutdown by itself, whatever follows.
        let f = run(&hook("nginx:1.25", "[nginx, -s, stop]"));
        assert!(
            of(&f, "prestop-signals-without-wait")[0]
                .message
                .contains("sends SIGTERM, nginx's fast shutdown, which drops the requests in flight, and returns at once, so SIGQUIT follows right after (t≈0)"),
            "{f:?}"
        );
        // A reload is no graceful quit: the generic wording, and nginx-stop-signal still
        // reports nginx's fast shutdown on SIGTERM.
        let f = run(&hook("bitnami/nginx:1.25", "[sh, -c, \"kill -HUP 1\"]"));
        assert_eq!(of(&f, "nginx-stop-signal").len(), 1, "{f:?}");
        assert!(
            of(&f, "prestop-signals-without-wait")[0]
                .message
                .contains("`kill -HUP 1` sends SIGHUP to the app and returns at once, so the kubelet's stop signal SIGTERM follows right after (t≈0)"),
            "{f:?}"
        );
        // Another app: a different signal follows and can cut the shutdown short.
        let f = run(&hook("app", "[sh, -c, \"kill -QUIT 1\"]"));
        assert!(
            of(&f, "prestop-signals-without-wait")[0]
                .message
                .contains("`kill -QUIT 1` sends SIGQUIT to the app and returns at once, so the kubelet's stop signal SIGTERM follows right after (t≈0)"),
            "{f:?}"
        );
    }

    #[test]
    fn kill_signals() {
        use super::kill_signal;
        use crate::rules::runtime::Signal;
        let k = |s: &str| kill_signal(&s.split_whitespace().collect::<Vec<_>>());
        assert_eq!(k("kill 1"), Some(Signal::SIGTERM));
        assert_eq!(k("kill -QUIT 1"), Some(Signal::SIGQUIT));
        assert_eq!(k("kill -SIGQUIT 1;"), Some(Signal::SIGQUIT));
        assert_eq!(k("kill -3 1"), Some(Signal::SIGQUIT));
        assert_eq!(k("kill -s INT 1"), Some(Signal::SIGINT));
        assert_eq!(k("kill -n 1 1"), Some(Signal::SIGHUP));
        assert_eq!(k("/bin/kill --signal=USR1 1"), Some(Signal::SIGUSR1));
        assert_eq!(k("pkill -f gunicorn"), Some(Signal::SIGTERM));
        assert_eq!(k("pkill -f -QUIT gunicorn"), Some(Signal::SIGQUIT));
        assert_eq!(k("killall -s QUIT nginx"), Some(Signal::SIGQUIT));
        assert_eq!(k("kill -$SIG 1"), None);
        assert_eq!(k("kill -l"), None);
    }
}
