//! The rule catalogue: one entry per rule, with a stable kebab-case id, a default severity, a
//! short title and the documentation `podgrace lint --explain RULE` prints (what upstream does,
//! where, and the fix). The README's rule table is generated from it (a test keeps them equal).

use super::Severity;

/// One lint rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Stable id (`endpoint-race`).
    pub id: &'static str,
    /// Severity unless configured otherwise.
    pub severity: Severity,
    /// One line.
    pub title: &'static str,
    /// Long documentation: the mechanism, the upstream source, the fix.
    pub doc: &'static str,
}

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static Rule> {
    CATALOGUE.iter().find(|r| r.id == id)
}

/// The README's rule table (Markdown), generated from the catalogue.
pub fn markdown_table() -> String {
    let mut s = String::from("| rule | severity | what it finds |\n|---|---|---|\n");
    for r in CATALOGUE {
        s.push_str(&format!(
            "| `{}` | {} | {} |\n",
            r.id,
            super::severity_str(r.severity),
            r.title.replace('|', "\\|")
        ));
    }
    s
}

/// Every rule, grouped by concern (budget, signals, hooks, probes, traffic, sidecars).
pub const CATALOGUE: &[Rule] = &[
    // ---- budget ----
    Rule {
        id: "prestop-exceeds-grace",
        severity: Severity::Error,
        title: "a preStop hook of known length is as long as the grace budget or longer",
        doc: "The kubelet runs the preStop hook with the grace period as its budget and abandons it when the budget runs out (FailedPreStopHook). The stop signal then comes at t=budget and SIGKILL 2 s later (the minimumGracePeriodInSeconds floor), so the app gets no time to drain. Lengths are known for the sleep action and for exec `sleep N` / `sh -c \"sleep N\"`.\n\nUpstream: pkg/kubelet/kuberuntime/kuberuntime_container.go killContainer / executePreStopHook.\nCases: kubernetes/kubernetes#65496, #23515 (R09).\nFix: raise terminationGracePeriodSeconds above the hook's length, to the hook's length plus the app's drain time (a value equal to the hook leaves the app only the 2 s floor), or shorten the hook.\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "prestop-near-grace",
        severity: Severity::Warning,
        title: "a preStop hook leaves less than minDrainSeconds between the stop signal and SIGKILL",
        doc: "The hook ends before the grace budget, but what is left (floored at 2 s) is shorter than the least drain time configured (`minDrainSeconds`, default 5): the app receives its stop signal and is SIGKILLed shortly after.\n\nUpstream: kuberuntime_container.go killContainer (gracePeriod -= hook's elapsed whole seconds; minimum 2 s).\nFix: raise terminationGracePeriodSeconds to preStop + drain time, or shorten the preStop delay.",
    },
    Rule {
        id: "sleep-action-rejected",
        severity: Severity::Error,
        title: "a sleep action the API server rejects (seconds < 0, or 0 before 1.33, or > terminationGracePeriodSeconds)",
        doc: "The API server validates `lifecycle.preStop.sleep.seconds` (and postStart): it must be > 0 and not above terminationGracePeriodSeconds (the message says \"less than\", the code accepts equality). From Kubernetes 1.33 (PodLifecycleSleepActionAllowZero, on by default) 0 is accepted. The object cannot be applied at all. `--kubernetes-version` selects the rule. The same delay written as exec `sleep N` is accepted and silently cut at the budget (see prestop-exceeds-grace).\n\nUpstream: pkg/apis/core/validation/validation.go validateSleepAction.\nCases: zalando-incubator/kubernetes-on-aws#9426 (R14).\nFix: keep sleep.seconds ≤ terminationGracePeriodSeconds, or raise terminationGracePeriodSeconds.",
    },
    Rule {
        id: "api-server-warning",
        severity: Severity::Warning,
        title: "the API server accepts the object with a warning",
        doc: "kube-apiserver accepts some fields it knows to be wrong and says so in a `Warning` header (kubectl prints `Warning: ...`): a memory or ephemeral-storage quantity that is not a whole number of bytes (`memory: 1m` is a thousandth of a byte; the kubelet rounds it up to 1 byte, and no container can start in a cgroup of one page), an environment variable defined twice (the later one hides the earlier; `kubectl apply` may drop one of them). The finding carries the API server's own words. (The warning for a negative terminationGracePeriodSeconds is `negative-grace-period`.)\n\nUpstream: pkg/api/pod/warnings.go warningsForPodSpecAndMeta.\nFix: write memory in whole bytes (`64Mi`, `128M`), and define each variable once.",
    },
    Rule {
        id: "negative-grace-period",
        severity: Severity::Error,
        title: "a negative terminationGracePeriodSeconds, which Kubernetes treats as 1 s",
        doc: "A negative terminationGracePeriodSeconds is invalid, yet the API server accepts it with only a warning (must be >= 0) and Kubernetes treats it as 1 s: on the delete path since 1.22, for every Pod since 1.27. With a grace period of 1 s the preStop hook has at most 1 s and SIGKILL follows about 2 s after the stop signal (the minimumGracePeriodInSeconds floor). `-1` does not mean \"no limit\". `podgrace explain` and lint work with the 1 s.\n\nUpstream: pkg/api/pod/warnings.go warningsForPodSpecAndMeta (the warning); pkg/registry/core/pod/strategy.go CheckGracefulDelete and staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go BeforeDelete (negative becomes 1); kubernetes/kubernetes#98866, #115606, #103476.\nFix: set terminationGracePeriodSeconds to the time the app needs to drain (0 or more; the default is 30).\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "zero-grace-force-deletes",
        severity: Severity::Error,
        title: "terminationGracePeriodSeconds 0: a plain delete is a force delete",
        doc: "With terminationGracePeriodSeconds 0 the API server removes the Pod object at once on a plain `kubectl delete` (no graceful deletion), so controllers start a replacement while the old containers still run; the kubelet then kills with a budget of 1 s (preStop ≤ 1 s, SIGKILL about 2 s after the stop signal).\n\nUpstream: pkg/registry/core/pod/strategy.go CheckGracefulDelete; pkg/apiserver rest.BeforeDelete; kubernetes/kubernetes#120671.\nFix: set terminationGracePeriodSeconds to the time the app needs to drain (the default is 30).\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "grace-period-too-long",
        severity: Severity::Warning,
        title: "a very large terminationGracePeriodSeconds blocks rollouts and node drains",
        doc: "An app that ignores SIGTERM (or hangs while draining) keeps its pod Terminating for the whole grace period. Every rollout step and every node drain (which evicts pods one PodDisruptionBudget allowance at a time) can wait that long. The threshold is `largeTerminationGracePeriodSeconds` (default 300).\n\nUpstream: pod_workers.go calculateEffectiveGracePeriod; the eviction API honours the pod's grace.\nCases: kubernetes/kubernetes#24695 (R12).\nFix: lower terminationGracePeriodSeconds to the drain time the app really needs, and make sure the app exits as soon as it has drained.",
    },
    Rule {
        id: "job-grace-too-short",
        severity: Severity::Warning,
        title: "a Job or CronJob pod with a short terminationGracePeriodSeconds",
        doc: "Job pods are deleted on node drain, preemption and eviction like any pod. A short grace period leaves the running unit of work no time to checkpoint or finish before SIGKILL, and the Job retries it from scratch. The threshold is `jobMinTerminationGracePeriodSeconds` (default 30).\n\nUpstream: kuberuntime_container.go killContainer (same budget for every pod).\nFix: raise terminationGracePeriodSeconds to the time one unit of work needs to checkpoint or finish.",
    },
    Rule {
        id: "soft-eviction-is-immediate",
        severity: Severity::Warning,
        title: "kubelet evictionMaxPodGracePeriod ≤ 0 turns every soft eviction into a near-immediate kill",
        doc: "A soft eviction gives the pod min(evictionMaxPodGracePeriod, TGPS) as its override. The kubelet help text says a negative value defers to the pod's own grace, but min(-1, TGPS) is -1, which the pod worker raises to 1 s: preStop ≤ 1 s, SIGKILL about 2 s after the stop signal. 0 (a common provider default) behaves the same. Checked when the lint configuration gives `kubelet.evictionMaxPodGracePeriod`.\n\nUpstream: pkg/kubelet/eviction/eviction_manager.go synchronize; kubernetes/kubernetes#118172, digitalocean/DOKS#19 (R19).\nFix: set evictionMaxPodGracePeriod to at least the largest terminationGracePeriodSeconds of the node's pods.\nAlso reported by `podgrace explain --trigger evict-soft` under the same id.",
    },
    // ---- signals ----
    Rule {
        id: "shell-form-command",
        severity: Severity::Warning,
        title: "the container command is `sh -c`/`bash -c` without `exec`, so the shell is PID 1",
        doc: "The runtime sends the stop signal to the container's PID 1 only. A shell running a script is PID 1 and does not pass SIGTERM on; as PID 1 without a handler it even ignores it, so the app is SIGKILLed at the deadline without draining. (bash and dash exec a lone command themselves; other shells, and any script with more than one command, do not.)\n\nUpstream: containerd container_stop.go (signal to the init process); kernel PID-namespace rule for PID 1.\nFix: start the program with `exec` (`sh -c \"...; exec node server.js\"`) or use the exec form (`command: [node, server.js]`).",
    },
    Rule {
        id: "package-manager-wrapper",
        severity: Severity::Warning,
        title: "`npm`, `yarn` or `pnpm` start wrapper as the container's process",
        doc: "With `npm start` (or yarn/pnpm) as PID 1 the stop signal goes to npm. npm and the intermediate `sh -c` exit without waiting for the app; once PID 1 exits, the runtime kills everything left in the container, so the app's graceful-shutdown code never completes.\n\nCases: npm/run-script#237, paketo-buildpacks/nodejs#37 (R02).\nFix: run the program directly (`command: [node, server.js]`) so it is PID 1 and receives SIGTERM.",
    },
    Rule {
        id: "init-signals-process-group",
        severity: Severity::Info,
        title: "dumb-init (setsid mode) or `tini -g` signals the whole process group",
        doc: "dumb-init forwards the stop signal to the whole process group by default (DUMB_INIT_SETSID=1), and `tini -g` does the same. Forked workers (Celery pools, gunicorn workers) then get SIGTERM at t=0 and abort their tasks, even though the main process would have waited for them and the grace period is long.\n\nCases: apache/airflow#18066 (fix #18068) (R04).\nFix: set env DUMB_INIT_SETSID=0 (or `--single-child`), or drop `-g` from tini, so only the main process is signalled.",
    },
    Rule {
        id: "nginx-stop-signal",
        severity: Severity::Warning,
        title: "an nginx-like image whose stop signal is not SIGQUIT",
        doc: "nginx treats SIGTERM as \"fast shutdown\" and drops requests in flight; SIGQUIT is its graceful shutdown. The official nginx images declare STOPSIGNAL SIGQUIT; other nginx-based images (bitnami, openresty, custom builds) often do not. The stop signal is computed like the runtime does: lifecycle.stopSignal, else the image's STOPSIGNAL (for the images podgrace knows), else SIGTERM. Not reported when a preStop hook handles the shutdown, nor when the hook quits nginx and returns at once into the fast shutdown: prestop-signals-without-wait reports that, with the stop signal that follows the hook.\n\nUpstream: containerd container_stop.go (stop signal precedence); KEP-4960 lifecycle.stopSignal.\nCases: kubernetes/kubernetes#39170 (R16).\nFix: set `lifecycle.stopSignal: SIGQUIT` (Kubernetes 1.33+, ContainerStopSignals, needs spec.os.name), build the image with STOPSIGNAL SIGQUIT, or add a preStop that runs `nginx -s quit` and waits until nginx has exited.",
    },
    Rule {
        id: "prestop-signals-without-wait",
        severity: Severity::Warning,
        title: "a preStop hook signals the app (nginx -s quit, kill) and returns at once",
        doc: "The kubelet sends the stop signal as soon as the hook returns. What a hook that only signals the app and returns does depends on the stop signal that follows it within milliseconds (lifecycle.stopSignal, else the image's STOPSIGNAL for the images podgrace knows, else SIGTERM):\n- a different signal can cut short the shutdown the hook started; for nginx, SIGTERM or SIGINT after `nginx -s quit` (SIGQUIT, its graceful shutdown) turns the graceful quit into a fast shutdown that drops requests in flight, and `nginx -s stop` (SIGTERM) is a fast shutdown by itself;\n- the same signal (the official nginx images stop with SIGQUIT, so after `nginx -s quit` the kubelet sends SIGQUIT again) changes nothing: the hook's only effect is that it gives no delay, so the app stops accepting while the endpoint removal is still on its way (see endpoint-race). endpoint-race does not give such a hook the benefit of the doubt it gives hooks of unknown length, and reports the race for a container that serves traffic as far as the input shows; this rule reports it for the other containers (not in a Job or CronJob, and not with endpointLagSeconds 0), so the same cause is reported once.\nIf the app exits during the hook, the hook is reported as failed (FailedPreStopHook).\n\nUpstream: kuberuntime_container.go killContainer (stop signal right after the hook); nginx src/os/unix/ngx_process.c signals (`-s stop` SIGTERM, `-s quit` SIGQUIT; SIGTERM and SIGINT terminate at once, SIGQUIT shuts down gracefully).\nCases: kubernetes/kubernetes#39170 (R16).\nFix: wait out the endpoint lag, quit, and wait until the process has exited (`sleep 5; nginx -s quit; while pgrep -x nginx; do sleep 1; done`) within terminationGracePeriodSeconds; or make the graceful signal the stop signal and replace the hook with a plain delay (`lifecycle.preStop.sleep.seconds: 5`).",
    },
    // ---- hooks ----
    Rule {
        id: "prestop-binary-missing",
        severity: Severity::Warning,
        title: "an exec preStop runs a binary (sleep, sh, curl ...) unlikely to exist in a distroless or scratch image",
        doc: "Exec hooks run inside the container. Minimal images (distroless, scratch, chainguard static) have no shell and no coreutils, so `sleep 5` or `sh -c ...` fails at once with FailedPreStopHook and the stop signal follows at t≈0: the delay the hook was meant to give never happens. Judged from the image name.\n\nUpstream: kuberuntime_container.go executePreStopHook (a failed hook does not stop termination).\nFix: use the sleep action (`lifecycle.preStop.sleep.seconds: N`, Kubernetes 1.30+) instead of exec sleep, or an httpGet hook.",
    },
    Rule {
        id: "prestop-httpget-undeclared-port",
        severity: Severity::Warning,
        title: "an httpGet preStop to a port the container does not declare",
        doc: "The hook's port does not match any containerPort of the container (a named port that is not declared cannot even be resolved). If nothing listens there, the hook fails at once (FailedPreStopHook) and the stop signal follows at t≈0.\n\nUpstream: pkg/kubelet/lifecycle/handlers.go runHTTPHandler / resolvePort.\nFix: point the hook at the port the app serves and declare it under ports.",
    },
    Rule {
        id: "prestop-httpget-pod-ip",
        severity: Severity::Info,
        title: "an httpGet preStop without host goes to the pod IP, not to localhost",
        doc: "The kubelet sends the hook's request to the pod IP. An endpoint bound to 127.0.0.1 refuses it (FailedPreStopHook) and the stop signal follows at once, so no orchestrated drain happens. Reported as a warning when the container's args or env mention a loopback address.\n\nUpstream: pkg/kubelet/lifecycle/handlers.go runHTTPHandler (host defaults to the pod IP).\nCases: kserve/modelmesh#52 (R15).\nFix: bind the endpoint to all interfaces, or use an exec hook (`curl localhost:PORT/prestop`).",
    },
    Rule {
        id: "prestop-not-run-on-crash",
        severity: Severity::Info,
        title: "a preStop hook that exports state does not run on crash or OOM kill",
        doc: "preStop runs when the kubelet stops a container (deletion, eviction, probe kills), not when the container exits by itself or is OOM-killed by the kernel. A hook that uploads, backs up or flushes state loses it on every crash.\n\nUpstream: kuberuntime_container.go (hooks run only from killContainer); kubernetes/kubernetes#93818, kubernetes/website#35594 (R17).\nFix: persist state continuously or to a volume; treat the hook as best effort.",
    },
    // ---- probes ----
    Rule {
        id: "probe-kill-uses-pod-grace",
        severity: Severity::Warning,
        title: "a liveness or startup probe without its own terminationGracePeriodSeconds while the pod's is large",
        doc: "When a liveness or startup probe fails, the kubelet kills the container with the pod's terminationGracePeriodSeconds unless the probe sets its own (KEP-2238, GA 1.25). A hung app then stays unavailable for the whole (large) grace period before SIGKILL and restart. Reported when the pod's value is above 60 s.\n\nUpstream: kuberuntime_container.go setTerminationGracePeriod.\nFix: set `livenessProbe.terminationGracePeriodSeconds` (and startupProbe's) to a few seconds.\nAlso reported by `podgrace explain --trigger liveness:C` under the same id.",
    },
    Rule {
        id: "probe-port-not-found",
        severity: Severity::Error,
        title: "a probe's named port that the container does not declare",
        doc: "An httpGet or tcpSocket probe may name its port (`port: http`). The API server does not check that the container declares a port of that name; the kubelet resolves it at every probe (ResolveContainerPort: the name among the container's ports, else the name as a number) and, finding none, the probe errors and counts as a failure. A liveness or startup probe then kills the container after failureThreshold × periodSeconds, with its grace, again and again (CrashLoopBackOff); a readiness probe keeps the pod out of its Services for ever.\n\nUpstream: pkg/probe/util.go ResolveContainerPort, findPortByName; pkg/kubelet/prober/prober.go (\"probe errored and resulted in failure state\").\nFix: declare the port with that name in the container's ports, or give the probe the port number.",
    },
    Rule {
        id: "probe-grace-exceeds-pod-grace",
        severity: Severity::Warning,
        title: "a probe's terminationGracePeriodSeconds is larger than the pod's",
        doc: "A probe-level terminationGracePeriodSeconds replaces the pod's for probe kills. Larger than the pod's, it makes a hung container wait longer after a failed probe than a deletion would, the opposite of its purpose.\n\nUpstream: kuberuntime_container.go setTerminationGracePeriod (KEP-2238).\nFix: make the probe's value shorter than the pod's terminationGracePeriodSeconds.",
    },
    // ---- traffic ----
    Rule {
        id: "endpoint-race",
        severity: Severity::Warning,
        title: "a container that serves traffic gets its stop signal before endpoints are removed",
        doc: "Endpoint removal and the stop signal start together at t=0: the EndpointSlice controller, kube-proxy, ingress controllers and cloud load balancers keep routing new requests for L seconds (`endpointLagSeconds`, default 1). An app that stops accepting on SIGTERM fails them: through kube-proxy (L4, it answers no HTTP) as refused connections while the pod's network namespace exists, then as connect timeouts once its address is gone, and as EOF on keep-alive connections the app closed; through an ingress as 502/503. A container serves traffic if it has a readiness probe or a containerPort that a Service in the input selects. The stop-signal time comes from the delete timeline; hooks of unknown length are given the benefit of the doubt (they may wait up to their budget), except a hook that only signals the app and returns at once (`nginx -s quit`, `kill -QUIT 1`; see prestop-signals-without-wait), which gives no delay.\n\nA stop signal at L + 1 s or later passes: a delay of exactly L still races the removal (the drill lost 2 and 1 of 1,600 requests with a 1 s preStop against a 1 s lag), and a real kube-proxy applies a removal up to its minSyncPeriod (1 s) late when its sync slots are used up (recorded on kube-proxy 1.32: 906–1077 ms for 10 of 12 pods). While the pod terminates its endpoint is `ready: false, serving: true, terminating: true` (its Ready condition holds until the container exits), and it leaves the EndpointSlice once the pod's phase is terminal.\n\nUpstream: pkg/controller/endpointslice (terminating endpoints), kube-proxy; kuberuntime_container.go.\nCases: kubernetes-sigs/aws-load-balancer-controller#2366, alphagov/govuk-helm-charts#2202 (R25); real-kube-proxy-1.32.md.\nFix: a preStop delay of at least L + 1 s (`lifecycle.preStop.sleep.seconds`, or exec sleep before 1.30), with terminationGracePeriodSeconds ≥ preStop + drain.",
    },
    Rule {
        id: "service-selects-unready-pods",
        severity: Severity::Warning,
        title: "a Service selects pods that have no readiness probe",
        doc: "Without a readiness probe a pod is Ready, and added to the Service's EndpointSlice, as soon as its containers start, before the app listens; during a rollout new pods take requests they refuse. Terminating pods are removed either way, but there is no way to take a pod out of rotation before its stop signal. Skipped when the Service sets publishNotReadyAddresses.\n\nUpstream: pkg/controller/endpointslice utils podToEndpoint (ready = pod Ready condition).\nFix: add a readinessProbe to the containers that serve the Service's ports.",
    },
    // ---- sidecars ----
    Rule {
        id: "sidecar-as-regular-container",
        severity: Severity::Warning,
        title: "a proxy (istio-proxy, envoy, linkerd, cloud-sql-proxy) runs as a regular container",
        doc: "Regular containers are stopped in parallel, each when its own preStop returns (at t=0 without one): the proxy gets its stop signal together with the app, or when its own preStop ends (a sleep added to hold it back only delays it by a fixed time), and exits after its own drain (istio's terminationDrainDuration, 5 s by default, read from the pod's `proxy.istio.io/config` annotation or the container's TERMINATION_DRAIN_DURATION_SECONDS), while the app may still be finishing requests or calling out through it until its SIGKILL. The message gives each container's stop-signal instant from the delete timeline, as `podgrace explain` shows it. With `longestRequestSeconds` in the lint configuration, a drain shorter than the longest request is named: the requests still in flight through the proxy when its drain ends fail, and so do the app's calls out through it. In a Job the pod does not complete while the proxy runs. Native sidecars (init containers with restartPolicy: Always, on by default since 1.29) are stopped only after the main containers have exited.\n\nUpstream: kuberuntime_container.go killContainersWithSyncResult, kuberuntime_termination_order.go.\nCases: Alibaba Cloud ASM sidecar drain write-up (R22).\nFix: run the proxy as a native sidecar, or make its drain at least the longest request and below terminationGracePeriodSeconds.",
    },
    // ---- the kill (the delete timeline) ----
    Rule {
        id: "tcpsocket-hook-not-run",
        severity: Severity::Warning,
        title: "a tcpSocket preStop, which the API accepts but the kubelet never runs",
        doc: "The API server still accepts `tcpSocket` in a lifecycle handler (kept for backward compatibility), but the kubelet's handler runner has no case for it: the hook fails at once with \"invalid handler\" (a FailedPreStopHook event) and the stop signal follows at t=0, so the delay the hook was meant to give never happens.\n\nUpstream: pkg/kubelet/lifecycle/handlers.go handlerRunner.Run (the default case).\nFix: use the sleep action (1.30+), an exec `sleep N`, or an httpGet handler.\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "prestop-skipped",
        severity: Severity::Warning,
        title: "the grace budget is 0, so the preStop hook is not run at all",
        doc: "The kubelet runs the preStop hook only while the grace period it kills with is above 0. A budget of 0 (a kubelet of 1.21 or earlier after a force delete, or a grace already spent) skips the hook silently: no event, the stop signal at once.\n\nUpstream: pkg/kubelet/kuberuntime/kuberuntime_container.go killContainer (`gracePeriod > 0` guards executePreStopHook).\nFix: give the pod a terminationGracePeriodSeconds above 0, and avoid force deletes of pods whose hooks matter.\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "stop-signal-sigkill",
        severity: Severity::Warning,
        title: "the container's stop signal is SIGKILL: it cannot shut down at all",
        doc: "SIGKILL cannot be caught or handled, so a container whose stop signal is SIGKILL dies the moment the runtime stops it (after its preStop): no drain, no flush, no graceful close, whatever the grace period.\n\nUpstream: containerd internal/cri/server/container_stop.go (the stop signal is sent as given); pkg/apis/core/validation validateContainerStopSignal accepts SIGKILL.\nFix: use SIGTERM (or the app's graceful signal, SIGQUIT for nginx), and let the grace period's SIGKILL be the backstop.\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "stop-signal-feature-gate",
        severity: Severity::Info,
        title: "lifecycle.stopSignal needs the ContainerStopSignals feature gate and a runtime that honours it",
        doc: "`lifecycle.stopSignal` (KEP-4960) is alpha since Kubernetes 1.33 and off by default: without the ContainerStopSignals gate on the API server and the kubelet the field is dropped, and the image's STOPSIGNAL (or SIGTERM) applies; the runtime must pass it on too (containerd 2.3+, CRI-O).\n\nUpstream: pkg/features/kube_features.go ContainerStopSignals; pkg/kubelet/kuberuntime/kuberuntime_container.go getContainerConfigStopSignal.\nFix: enable the gate where you rely on it, or set the signal in the image (STOPSIGNAL).\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "stop-signal-from-image",
        severity: Severity::Info,
        title: "the stop signal comes from the official image's STOPSIGNAL, not SIGTERM",
        doc: "Without `lifecycle.stopSignal` the runtime sends the image's STOPSIGNAL: nginx 1.19.5+ and php-fpm SIGQUIT, httpd and php-apache SIGWINCH, haproxy SIGUSR1. podgrace infers it from the image name of the official images it knows; an image built FROM one of them inherits it.\n\nUpstream: containerd internal/cri/server/container_stop.go (the image config's StopSignal); the images' Dockerfiles.\nFix: nothing when intended; set lifecycle.stopSignal (with its feature gate) to make it explicit, and make sure the app handles that signal.\nAlso reported by `podgrace explain` under the same id.",
    },
    Rule {
        id: "hostpath-relative",
        severity: Severity::Error,
        title: "a hostPath volume with a relative path",
        doc: "The API server accepts a relative `hostPath.path` (it only refuses `..`), and the kubelet hands it to the runtime unchanged. containerd creates a missing host path relative to its own working directory, and runc then resolves it against the container's bundle directory, where it does not exist: every container that mounts the volume fails to start (`error mounting \".../<bundle>/PATH\" to rootfs ...: no such file or directory`, StartError). Recorded with containerd 1.6.20 and runc 1.1.5.\n\nUpstream: pkg/apis/core/validation/validation.go validateHostPathVolumeSource; pkg/kubelet/kubelet_pods.go makeMounts (the host path as given).\nFix: give the absolute path on the node.",
    },
    Rule {
        id: "kill-beyond-grace",
        severity: Severity::Warning,
        title: "SIGKILL can come later than terminationGracePeriodSeconds plus 2 s",
        doc: "A native sidecar deducts its preStop and its wait for its turn (the main containers' exits) in whole seconds, and each truncation can leave up to a second before the 2 s floor, so the last SIGKILL can come after grace + 2 s. Before 1.28 the kubelet also granted the full grace again after a preStop hook.\n\nUpstream: pkg/kubelet/kuberuntime/kuberuntime_container.go killContainer and killContainersWithSyncResult (the sidecar termination order, KEP-753); kubernetes/kubernetes#115817.\nFix: count the sidecars' preStops in terminationGracePeriodSeconds, and keep node drains' and rollouts' timeouts above the latest SIGKILL.\nAlso reported by `podgrace explain` under the same id.",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case_and_documented() {
        let mut seen = std::collections::BTreeSet::new();
        for r in CATALOGUE {
            assert!(seen.insert(r.id), "duplicate {}", r.id);
            assert!(
                r.id.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{}",
                r.id
            );
            assert!(r.doc.contains("Fix:"), "{} has no fix", r.id);
            assert!(!r.title.is_empty());
        }
    }
}
