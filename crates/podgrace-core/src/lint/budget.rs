//! Grace budget rules: preStop length against the budget, negative TGPS, TGPS 0, very large
//! TGPS, Jobs with a short TGPS, and the kubelet's evictionMaxPodGracePeriod.

use super::{selects, PodCx, Sink};
use crate::plan::{ContainerRole, Handler, WorkloadKind};
use crate::timeline;
use crate::Seconds;

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    let pod = cx.pod;
    let tgps = cx.tgps();
    for c in pod.running_containers() {
        let Some(t) = cx.timeline_of(c) else {
            continue;
        };
        let span = || c.field_span("lifecycle.preStop");
        if let Some(f) = timeline::prestop_exceeds_grace(pod, c, t) {
            sink.shared(cx, f, Some(c), span());
            continue;
        }
        // prestop-near-grace: the hook ends in time but leaves little for the app (main
        // containers; a native sidecar's stop signal waits for the main containers).
        if !sink.enabled("prestop-near-grace") || c.role != ContainerRole::Main {
            continue;
        }
        let (Some(budget), Some(d)) = (
            t.pre_stop_budget_seconds,
            c.pre_stop.as_ref().and_then(Handler::known_duration),
        ) else {
            continue;
        };
        let left = t.kill_seconds.max.saturating_sub(t.stop_signal_seconds.max);
        let min = cx.config().min_drain_seconds;
        if d > Seconds::ZERO && budget == tgps && left < Seconds::from_secs(min) {
            let need = i128::from(d.ceil_secs()) + i128::from(min);
            // A grace above the largest the API accepts cannot be the fix.
            let fix = if need > i128::from(timeline::MAX_GRACE_PERIOD_SECONDS) {
                format!("shorten the preStop so that {min} s remain before SIGKILL (no terminationGracePeriodSeconds the API accepts leaves them after this hook)")
            } else {
                format!("raise terminationGracePeriodSeconds to at least {need}")
            };
            sink.push(
                cx,
                "prestop-near-grace",
                Some(c),
                span(),
                format!(
                    "container {}: preStop {} s leaves {} s of terminationGracePeriodSeconds {tgps} s: {} comes at t={} and SIGKILL at t={}, less than minDrainSeconds {} for the app to drain; {fix}",
                    c.name,
                    d,
                    left,
                    t.stop_signal,
                    t.stop_signal_seconds.max,
                    t.kill_seconds.max,
                    cx.config().min_drain_seconds,
                ),
            );
        }
    }
    let tgps_span = || pod.field_span("terminationGracePeriodSeconds");
    if let Some(f) = timeline::negative_grace_period(pod, &cx.timeline.containers) {
        sink.shared(cx, f, None, tgps_span());
    }
    if let Some(f) = timeline::zero_grace_force_deletes(pod) {
        sink.shared(cx, f, None, tgps_span());
    }
    let large = cx.config().large_termination_grace_period_seconds;
    if tgps > large {
        let pdbs: Vec<String> = cx
            .pdbs
            .iter()
            .filter(|(o, p)| {
                cx.related(o)
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.selector.as_ref())
                        .and_then(|s| s.match_labels.as_ref())
                        .is_some_and(|m| selects(m, &pod.labels))
            })
            .map(|(o, _)| o.name.clone())
            .collect();
        let pdb_note = if pdbs.is_empty() {
            String::new()
        } else {
            format!(
                "; PodDisruptionBudget {} limits how many of these pods a drain may evict at once, so a drain can wait that long per pod",
                pdbs.join(", ")
            )
        };
        sink.push(
            cx,
            "grace-period-too-long",
            None,
            tgps_span(),
            format!(
                "terminationGracePeriodSeconds {tgps} s (more than {large} s): a pod whose app does not exit on its stop signal holds each rollout step and node drain for up to {tgps} s before SIGKILL{pdb_note}; lower it to the drain time the app needs"
            ),
        );
    }
    let job_min = cx.config().job_min_termination_grace_period_seconds;
    if matches!(pod.kind, WorkloadKind::Job | WorkloadKind::CronJob) && tgps > 0 && tgps < job_min {
        sink.push(
            cx,
            "job-grace-too-short",
            None,
            tgps_span(),
            format!(
                "terminationGracePeriodSeconds {tgps} s for a {} pod: on node drain, preemption or eviction the running work gets {tgps} s to checkpoint or finish before SIGKILL, and the Job retries it from scratch; raise it to at least {job_min}",
                pod.kind.as_str()
            ),
        );
    }
    let kubelet = cx.kubelet();
    if let Some(max) = kubelet.eviction_max_pod_grace_period {
        // A kubelet without soft thresholds never evicts softly.
        if tgps > 1 && kubelet.soft_eviction_thresholds != Some(false) {
            if let Some(f) = timeline::soft_eviction_is_immediate(pod, max, cx.opts.version) {
                sink.shared(cx, f, None, tgps_span());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::testutil::*;
    use crate::lint::{LintOptions, Severity};

    fn c(extra: &str) -> String {
        deploy(&format!(
            "      containers:\n        - name: app\n          image: app\n{extra}"
        ))
    }

    #[test]
    fn prestop_exceeds_grace() {
        let f = run(&c("          lifecycle:\n            preStop:\n              exec:\n                command: [sleep, \"40\"]\n"));
        let f = of(&f, "prestop-exceeds-grace");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!((f[0].span.line, f[0].span.column), (19, 13));
        assert_eq!(
            f[0].span.path,
            "spec.template.spec.containers[0].lifecycle.preStop"
        );
        assert_eq!(f[0].container.as_deref(), Some("app"));
        assert!(
            f[0].message.contains("preStop exec sleep 40 s ≥ terminationGracePeriodSeconds 30 s: SIGTERM comes at t=30 and SIGKILL at t=32"),
            "{}",
            f[0].message
        );
        let ok = run(&c("          lifecycle:\n            preStop:\n              sleep:\n                seconds: 10\n"));
        assert!(of(&ok, "prestop-exceeds-grace").is_empty());
    }

    #[test]
    fn prestop_exceeds_grace_advises_a_value_above_the_current_one() {
        // sleep 60 with TGPS 60 is accepted by the API server; the hook takes the whole grace
        // and the app gets only the 2 s floor, so the advice must go above 60.
        let y = deploy("      terminationGracePeriodSeconds: 60\n      containers:\n        - name: app\n          image: app\n          lifecycle:\n            preStop:\n              sleep:\n                seconds: 60\n");
        let f = run(&y);
        let f = of(&f, "prestop-exceeds-grace");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].message,
            "container app: preStop sleep 60 s ≥ terminationGracePeriodSeconds 60 s: SIGTERM comes at t=60 and SIGKILL at t=62, leaving the app no time to drain; raise terminationGracePeriodSeconds above 60, to the preStop's 60 s plus your app's drain time"
        );
        // A hook longer than the grace: the advice is above the hook, so above the grace too.
        let f = run(&c("          lifecycle:\n            preStop:\n              exec:\n                command: [sleep, \"40\"]\n"));
        assert!(
            of(&f, "prestop-exceeds-grace")[0]
                .message
                .ends_with("raise terminationGracePeriodSeconds above 40, to the preStop's 40 s plus your app's drain time"),
            "{f:?}"
        );
    }

    #[test]
    fn prestop_near_grace() {
        let f = run(&c("          lifecycle:\n            preStop:\n              sleep:\n                seconds: 28\n"));
        let f = of(&f, "prestop-near-grace");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].message.contains("SIGKILL at t=30"), "{}", f[0].message);
        // The advice is above the current 30 s: the hook's 28 s plus minDrainSeconds 5.
        assert!(
            f[0].message
                .ends_with("raise terminationGracePeriodSeconds to at least 33"),
            "{}",
            f[0].message
        );
        let ok = run(&c("          lifecycle:\n            preStop:\n              sleep:\n                seconds: 20\n"));
        assert!(of(&ok, "prestop-near-grace").is_empty());
    }

    #[test]
    fn sleep_action_rejected_is_version_aware() {
        let y = c("          lifecycle:\n            preStop:\n              sleep:\n                seconds: 60\n");
        let f = run(&y);
        let f = of(&f, "sleep-action-rejected");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].object.name, "web");
        assert_eq!(f[0].container.as_deref(), Some("containers[0]"));
        assert!(
            f[0].message.contains("sleep.seconds 60"),
            "{}",
            f[0].message
        );
        // Grouped under the object's start, like every other finding; placed at the field.
        assert_eq!((f[0].object_span.line, f[0].object_span.column), (1, 1));
        assert_eq!(f[0].object_span.path, "");
        assert_eq!((f[0].span.line, f[0].span.column), (21, 17));
        // The advice names a value above the sleep, and does not lead into
        // prestop-exceeds-grace ("at most terminationGracePeriodSeconds" would).
        assert!(
            f[0].message.ends_with("so the Deployment cannot be applied; shorten the sleep so that the app has time to drain before terminationGracePeriodSeconds runs out, or raise terminationGracePeriodSeconds above 60, to the sleep's 60 s plus your app's drain time"),
            "{}",
            f[0].message
        );
        let zero = c("          lifecycle:\n            preStop:\n              sleep:\n                seconds: 0\n");
        assert!(of(&run(&zero), "sleep-action-rejected").is_empty());
        let old = LintOptions {
            version: crate::KubeVersion::new(1, 32),
            ..Default::default()
        };
        let f = run_with(&zero, &old);
        let f = of(&f, "sleep-action-rejected");
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.ends_with("so the Deployment cannot be applied; use a positive number of seconds, or remove the sleep (Kubernetes 1.33 and later accept 0)"),
            "{}",
            f[0].message
        );
    }

    #[test]
    fn negative_grace() {
        let y = deploy("      terminationGracePeriodSeconds: -5\n      containers:\n        - name: app\n          image: app\n");
        let f = run(&y);
        let f = of(&f, "negative-grace-period");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert_eq!((f[0].span.line, f[0].span.column), (15, 7));
        assert_eq!(
            f[0].span.path,
            "spec.template.spec.terminationGracePeriodSeconds"
        );
        assert_eq!(
            f[0].message,
            "terminationGracePeriodSeconds is -5: negative values are invalid; the API server accepts them with a warning and Kubernetes treats them as 1, so the pod gets a grace period of 1 s: the preStop hook has at most 1 s, and SIGKILL comes by t=2; set terminationGracePeriodSeconds to the time the app needs to drain (0 or more; the default is 30)"
        );
        assert!(of(&run(&c("")), "negative-grace-period").is_empty());
        let zero = deploy("      terminationGracePeriodSeconds: 0\n      containers:\n        - name: app\n          image: app\n");
        assert!(of(&run(&zero), "negative-grace-period").is_empty());
    }

    #[test]
    fn zero_grace() {
        let y = deploy("      terminationGracePeriodSeconds: 0\n      containers:\n        - name: app\n          image: app\n");
        let f = run(&y);
        let f = of(&f, "zero-grace-force-deletes");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].span.line, f[0].span.column), (15, 7));
        assert!(of(&run(&c("")), "zero-grace-force-deletes").is_empty());
    }

    #[test]
    fn grace_too_long_notes_pdb() {
        let y = deploy("      terminationGracePeriodSeconds: 3600\n      containers:\n        - name: app\n          image: app\n")
            + "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web-pdb\n  namespace: prod\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app: web\n";
        let f = run(&y);
        let f = of(&f, "grace-period-too-long");
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("PodDisruptionBudget web-pdb"),
            "{}",
            f[0].message
        );
        assert!(of(&run(&c("")), "grace-period-too-long").is_empty());
    }

    #[test]
    fn job_grace_too_short() {
        let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      terminationGracePeriodSeconds: 5\n      containers:\n        - name: w\n          image: w\n";
        assert_eq!(of(&run(job), "job-grace-too-short").len(), 1);
        let ok = job.replace(
            "terminationGracePeriodSeconds: 5",
            "terminationGracePeriodSeconds: 60",
        );
        assert!(of(&run(&ok), "job-grace-too-short").is_empty());
    }

    #[test]
    fn soft_eviction_from_kubelet_config() {
        let y = c("");
        let mut opts = LintOptions::default();
        assert!(of(&run_with(&y, &opts), "soft-eviction-is-immediate").is_empty());
        opts.config.kubelet.eviction_max_pod_grace_period = Some(-1);
        let f = run_with(&y, &opts);
        assert_eq!(of(&f, "soft-eviction-is-immediate").len(), 1);
        opts.config.kubelet.eviction_max_pod_grace_period = Some(60);
        assert!(of(&run_with(&y, &opts), "soft-eviction-is-immediate").is_empty());
    }

    /// A node's own settings replace the configuration's for the objects on it; a kubelet
    /// known to have no evictionSoft thresholds never evicts softly, whatever its
    /// evictionMaxPodGracePeriod.
    #[test]
    fn soft_eviction_from_the_nodes_settings() {
        use crate::lint::KubeletSettings;
        use crate::manifest::ObjectRef;
        let y = c("");
        let obj = ObjectRef {
            kind: "Deployment".into(),
            namespace: Some("prod".into()),
            name: "web".into(),
        };
        let mut opts = LintOptions::default();
        let mut node = KubeletSettings {
            eviction_max_pod_grace_period: Some(0),
            soft_eviction_thresholds: Some(true),
        };
        opts.kubelet_by_object.insert(obj.clone(), node);
        assert_eq!(
            of(&run_with(&y, &opts), "soft-eviction-is-immediate").len(),
            1
        );
        node.soft_eviction_thresholds = Some(false);
        opts.kubelet_by_object.insert(obj.clone(), node);
        assert!(of(&run_with(&y, &opts), "soft-eviction-is-immediate").is_empty());
        // Another object's settings do not apply.
        opts.config.kubelet.eviction_max_pod_grace_period = Some(-1);
        opts.kubelet_by_object.clear();
        opts.kubelet_by_object.insert(
            ObjectRef {
                name: "other".into(),
                ..obj
            },
            node,
        );
        assert_eq!(
            of(&run_with(&y, &opts), "soft-eviction-is-immediate").len(),
            1
        );
    }

    /// A hook known to last at least as long as the grace (`sh -c "sleep 60 && ..."`) is cut
    /// just as an exact one (issue 9 item 12).
    #[test]
    fn a_script_that_sleeps_first_is_known_to_last_at_least_that() {
        let y = deploy("      containers:\n        - name: app\n          image: app\n          lifecycle:\n            preStop:\n              exec:\n                command: [sh, -c, \"sleep 60 && nginx -s quit\"]\n");
        let f = run(&y);
        let e = of(&f, "prestop-exceeds-grace");
        assert_eq!(e.len(), 1, "{f:?}");
        assert!(
            e[0].message.starts_with("container app: preStop exec (it sleeps first) at least 60 s ≥ terminationGracePeriodSeconds 30 s"),
            "{}",
            e[0].message
        );
        assert!(
            e[0].message.contains("to the preStop's at least 60 s plus"),
            "{}",
            e[0].message
        );
        // Shorter than the grace: no finding.
        let short = deploy("      containers:\n        - name: app\n          image: app\n          lifecycle:\n            preStop:\n              exec:\n                command: [sh, -c, \"sleep 10 && nginx -s quit\"]\n");
        assert!(of(&run(&short), "prestop-exceeds-grace").is_empty());
    }

    /// No advice names a grace above the largest the API accepts (an int64): the fix is then
    /// a shorter hook (issue 9 item 12).
    #[test]
    fn no_advice_to_raise_the_grace_above_what_the_api_accepts() {
        let max = i64::MAX;
        // A sleep action as long as the largest grace (the API accepts it: not above the grace).
        let whole = deploy(&format!("      terminationGracePeriodSeconds: {max}\n      containers:\n        - name: app\n          image: app\n          lifecycle:\n            preStop:\n              sleep: {{seconds: {max}}}\n"));
        let f = run(&whole);
        let e = of(&f, "prestop-exceeds-grace");
        assert_eq!(e.len(), 1, "{f:?}");
        assert!(!e[0].message.contains("raise"), "{}", e[0].message);
        assert!(e[0].message.contains("shorten the preStop: no terminationGracePeriodSeconds the API accepts (at most 9223372036854775807) is above it"), "{}", e[0].message);
        let sleep = deploy(&format!("      containers:\n        - name: app\n          image: app\n          lifecycle:\n            preStop:\n              sleep: {{seconds: {max}}}\n"));
        let f = run(&sleep);
        let r = of(&f, "sleep-action-rejected");
        assert_eq!(r.len(), 1, "{f:?}");
        assert!(!r[0].message.contains("raise"), "{}", r[0].message);
        let near = deploy(&format!("      terminationGracePeriodSeconds: {max}\n      containers:\n        - name: app\n          image: app\n          lifecycle:\n            preStop:\n              sleep: {{seconds: {}}}\n", max - 1));
        let f = run(&near);
        let n = of(&f, "prestop-near-grace");
        assert_eq!(n.len(), 1, "{f:?}");
        assert!(!n[0].message.contains("raise"), "{}", n[0].message);
        assert!(n[0].message.ends_with("shorten the preStop so that 5 s remain before SIGKILL (no terminationGracePeriodSeconds the API accepts leaves them after this hook)"), "{}", n[0].message);
    }
}
