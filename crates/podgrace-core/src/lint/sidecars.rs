//! Sidecar rules: proxies that run as regular containers and are stopped with the app.

use super::{image_name, PodCx, Sink};
use crate::plan::{ContainerPlan, PodPlan, WorkloadKind};
use crate::timeline::{ContainerTimeline, Span};
use crate::Seconds;

/// What kind of proxy a container is, judged from its name and image.
fn proxy_kind(c: &ContainerPlan) -> Option<&'static str> {
    let image = c.image.as_deref().map(image_name).unwrap_or_default();
    let name = c.name.to_ascii_lowercase();
    let has = |s: &str| image.contains(s) || name.contains(s);
    if has("istio-proxy") || image == "proxyv2" {
        Some("istio-proxy (envoy)")
    } else if has("envoy") {
        Some("envoy")
    } else if has("linkerd") && has("proxy") {
        Some("linkerd-proxy")
    } else if has("cloud-sql-proxy") || has("cloudsql-proxy") || has("cloud_sql_proxy") {
        Some("cloud-sql-proxy")
    } else {
        None
    }
}

/// At most this many names in a list of a message (then "and N more").
const MAX_NAMES: usize = 10;

/// `a`, `a and b`, `a, b and c`; beyond [`MAX_NAMES`], `a, b, ... and 20 more`.
fn and_list(names: &[&str]) -> String {
    if names.len() > MAX_NAMES {
        return format!(
            "{} and {} more",
            names[..MAX_NAMES].join(", "),
            names.len() - MAX_NAMES
        );
    }
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `at t=5`, or `between t=0 and t=30` for a hook of unknown length.
fn at(s: Span) -> String {
    if s.max == s.min {
        format!("at t={}", s.max)
    } else {
        format!("between t={} and t={}", s.min, s.max)
    }
}

/// The apps (the regular containers that are not proxies) grouped by when they get their stop
/// signals, in order of first appearance.
struct AppStops<'p> {
    groups: Vec<(Span, Vec<&'p str>)>,
}

impl<'p> AppStops<'p> {
    fn new(apps: &[(&'p ContainerPlan, &ContainerTimeline)]) -> Self {
        let mut groups: Vec<(Span, Vec<&'p str>)> = Vec::new();
        let mut index: std::collections::HashMap<Span, usize> = std::collections::HashMap::new();
        for (a, at) in apps {
            let s = at.stop_signal_seconds;
            match index.get(&s) {
                Some(&i) => groups[i].1.push(a.name.as_str()),
                None => {
                    index.insert(s, groups.len());
                    groups.push((s, vec![a.name.as_str()]));
                }
            }
        }
        AppStops { groups }
    }
}

/// When the other regular containers and the proxy get their stop signals, from the delete
/// timeline: `api and nginx get their stop signals at t=0; ` (empty when all come together with
/// the proxy's) and `it gets SIGTERM at t=300 (after its preStop)[ together with ...]`. Regular
/// containers are killed in parallel, each after its own preStop
/// (`killContainersWithSyncResult`), so the instants differ when their hooks do. At most
/// [`MAX_NAMES`] instants are listed.
fn stop_instants(t: &ContainerTimeline, apps: &AppStops<'_>) -> (String, String) {
    let mut others = String::new();
    let other_groups: Vec<&(Span, Vec<&str>)> = apps
        .groups
        .iter()
        .filter(|(s, _)| *s != t.stop_signal_seconds)
        .collect();
    for (listed, (s, names)) in other_groups.iter().enumerate() {
        if listed == MAX_NAMES {
            others.push_str(&format!(
                ", and the others at {} more instants",
                other_groups.len() - MAX_NAMES
            ));
            break;
        }
        if others.is_empty() {
            let verb = if names.len() == 1 {
                "gets its stop signal"
            } else {
                "get their stop signals"
            };
            others = format!("{} {verb} {}", and_list(names), at(*s));
        } else {
            others.push_str(&format!(", {} {}", and_list(names), at(*s)));
        }
    }
    if !others.is_empty() {
        others.push_str("; ");
    }
    let after_hook = if t.pre_stop.is_some() && t.stop_signal_seconds.max > Seconds::ZERO {
        " (after its preStop)"
    } else {
        ""
    };
    let mut own = format!(
        "it gets {} {}{after_hook}",
        t.stop_signal,
        at(t.stop_signal_seconds)
    );
    if let Some((_, names)) = apps
        .groups
        .iter()
        .find(|(s, _)| *s == t.stop_signal_seconds)
    {
        own.push_str(&format!(" together with {}", and_list(names)));
    }
    (others, own)
}

/// istio's default `terminationDrainDuration`.
const ISTIO_DEFAULT_DRAIN: Seconds = Seconds::from_secs(5);

/// A proxy's drain after its stop signal and where it is set: `terminationDrainDuration` in the
/// pod's `proxy.istio.io/config` annotation (a Go duration such as `20s`; istio's per-pod
/// ProxyConfig, which overrides the mesh's), else the container's
/// `TERMINATION_DRAIN_DURATION_SECONDS` (the older pilot-agent setting); `None` if neither is
/// given or readable.
fn drain_setting(pod: &PodPlan, c: &ContainerPlan) -> Option<(Seconds, &'static str)> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ProxyConfig {
        termination_drain_duration: Option<String>,
    }
    let annotated = pod
        .annotations
        .get("proxy.istio.io/config")
        .and_then(|text| serde_saphyr::from_str::<ProxyConfig>(text).ok())
        .and_then(|p| p.termination_drain_duration)
        .and_then(|d| go_duration(&d));
    if let Some(d) = annotated {
        return Some((d, "terminationDrainDuration in proxy.istio.io/config"));
    }
    c.env
        .iter()
        .find(|(k, _)| k == "TERMINATION_DRAIN_DURATION_SECONDS")
        .and_then(|(_, v)| v.as_deref()?.trim().parse::<i64>().ok())
        .map(|s| (Seconds::from_secs(s), "TERMINATION_DRAIN_DURATION_SECONDS"))
}

/// A Go `time.Duration` string (`5s`, `1m30s`, `500ms`, `1.5s`, `0`) as Go's
/// `time.ParseDuration` reads it (istio decodes ProxyConfig's durations so; implemented by
/// `kube_core::Duration`), to the millisecond (rounded down). `None` for what Go refuses (no
/// unit, `1d`, a space before the unit) and for a negative duration.
fn go_duration(s: &str) -> Option<Seconds> {
    let d: kube_core::Duration = s.trim().parse().ok()?;
    if d.is_negative() {
        return None;
    }
    let d: std::time::Duration = d.into();
    Some(Seconds::from_ms(i128::try_from(d.as_millis()).ok()?))
}

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    let pod = cx.pod;
    if pod.containers.len() < 2 {
        return;
    }
    // The apps are the same for every proxy of the pod: found once, so that a pod of many
    // containers costs linear time.
    let kinds: Vec<Option<&'static str>> = pod.containers.iter().map(proxy_kind).collect();
    let apps: Vec<(&ContainerPlan, &ContainerTimeline)> = pod
        .containers
        .iter()
        .zip(&kinds)
        .filter(|(_, k)| k.is_none())
        .filter_map(|(o, _)| cx.timeline_of(o).map(|ot| (o, ot)))
        .collect();
    if apps.is_empty() {
        return;
    }
    let names: Vec<&str> = apps.iter().map(|(a, _)| a.name.as_str()).collect();
    let stops = AppStops::new(&apps);
    // The apps may run (serving, or calling out through the proxy) until their SIGKILL.
    let until = apps
        .iter()
        .map(|(_, at)| at.kill_seconds.max)
        .max()
        .unwrap_or(Seconds::ZERO);
    for (c, kind) in pod.containers.iter().zip(&kinds) {
        let Some(kind) = *kind else {
            continue;
        };
        let Some(t) = cx.timeline_of(c) else {
            continue;
        };
        let (others, own) = stop_instants(t, &stops);
        let istio = kind.starts_with("istio");
        let drain = drain_setting(pod, c);
        let (stop, kill) = (t.stop_signal_seconds.max, t.kill_seconds.max);
        let mut drain_note = match (istio, drain) {
            (_, Some((d, src))) if stop.saturating_add(d) >= kill => format!(
                "; its drain of {d} s ({src}) would end at t={}, not before its SIGKILL at t={kill}, so it is SIGKILLed mid-drain",
                stop.saturating_add(d),
            ),
            (_, Some((d, src))) => format!(" and stops after its {d} s drain ({src})"),
            (true, None) => {
                " and stops after its drain (terminationDrainDuration, 5 s by default)".into()
            }
            (false, None) => " and stops".into(),
        };
        // A drain shorter than the longest request cuts what is still in flight when it ends
        // (case R22: 20 s requests behind istio's default 5 s drain).
        let effective = drain
            .map(|(d, _)| d)
            .or(istio.then_some(ISTIO_DEFAULT_DRAIN));
        if let (Some(d), Some(longest)) = (effective, cx.config().longest_request_seconds) {
            let longest = Seconds::from_secs(longest);
            if d < longest {
                let tgps = pod.termination_grace_period_seconds;
                drain_note.push_str(&format!(
                    "; that drain is shorter than the longest request ({longest} s, longestRequestSeconds): requests still in flight through the proxy at t={} fail, and so do the app's calls out through it from then on; set the drain to at least {longest} s and below terminationGracePeriodSeconds ({tgps} s)",
                    stop.saturating_add(d)
                ));
            }
        }
        let job = if matches!(pod.kind, WorkloadKind::Job | WorkloadKind::CronJob) {
            "; in a Job the pod does not complete while the proxy runs"
        } else {
            ""
        };
        let fix = if cx.opts.version.sidecar_containers() {
            "run it as a native sidecar (move it to initContainers with restartPolicy: Always), which is stopped only after the app has exited"
        } else {
            "give the proxy a preStop that waits for the app (native sidecars need Kubernetes 1.29)"
        };
        sink.push(
            cx,
            "sidecar-as-regular-container",
            Some(c),
            c.span.clone(),
            format!(
                "container {}: {kind} runs as a regular container, so it is stopped in parallel with {}, not after {}: {others}{own}{drain_note}, while the app may still be serving or calling out through it until t={}{job}; {fix}",
                c.name,
                and_list(&names),
                if names.len() == 1 { "it" } else { "them" },
                until,
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn go_durations_as_go_parses_them() {
        let ms = |s: &str| super::go_duration(s).map(|d| d.ms());
        assert_eq!(ms("20s"), Some(20_000));
        assert_eq!(ms("1m30s"), Some(90_000));
        assert_eq!(ms("1.5s"), Some(1_500));
        assert_eq!(ms("500ms"), Some(500));
        assert_eq!(ms("1h"), Some(3_600_000));
        assert_eq!(ms("0"), Some(0));
        // Go refuses these (humantime, used before, took them: a drain of a day).
        assert_eq!(ms("1d"), None);
        assert_eq!(ms("20 s"), None);
        assert_eq!(ms("20"), None);
        assert_eq!(ms("-5s"), None);
    }

    use crate::lint::testutil::*;

    #[test]
    fn proxy_as_regular_container() {
        let y = deploy("      containers:\n        - name: app\n          image: app\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.22\n");
        let f = run(&y);
        let s = of(&f, "sidecar-as-regular-container");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].container.as_deref(), Some("istio-proxy"));
        assert!(s[0].message.contains("5 s by default"), "{}", s[0].message);
        let native = deploy("      initContainers:\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.22\n          restartPolicy: Always\n      containers:\n        - name: app\n          image: app\n");
        assert!(of(&run(&native), "sidecar-as-regular-container").is_empty());
        let alone =
            deploy("      containers:\n        - name: envoy\n          image: envoyproxy/envoy\n");
        assert!(of(&run(&alone), "sidecar-as-regular-container").is_empty());
    }

    #[test]
    fn stop_signal_instants_come_from_the_timeline() {
        // The proxy's preStop holds its SIGTERM back to t=300; api and nginx get theirs at
        // t=0 (nginx's is the image's SIGQUIT), and run until SIGKILL at t=600.
        let y = deploy("      terminationGracePeriodSeconds: 600\n      containers:\n        - name: api\n          image: api\n        - name: nginx\n          image: nginx:1.25\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.22\n          lifecycle:\n            preStop:\n              sleep:\n                seconds: 300\n");
        let f = run(&y);
        let s = of(&f, "sidecar-as-regular-container");
        assert_eq!(s.len(), 1, "{f:?}");
        assert_eq!(
            s[0].message,
            "container istio-proxy: istio-proxy (envoy) runs as a regular container, so it is stopped in parallel with api and nginx, not after them: api and nginx get their stop signals at t=0; it gets SIGTERM at t=300 (after its preStop) and stops after its drain (terminationDrainDuration, 5 s by default), while the app may still be serving or calling out through it until t=600; run it as a native sidecar (move it to initContainers with restartPolicy: Always), which is stopped only after the app has exited"
        );
        // Each regular container after its own preStop: the app's 10 s hook, the proxy at t=0
        // together with the worker; a drain that does not fit before the proxy's SIGKILL.
        let y = deploy("      containers:\n        - name: app\n          image: app\n          lifecycle:\n            preStop:\n              sleep:\n                seconds: 10\n        - name: worker\n          image: worker\n        - name: envoy\n          image: envoyproxy/envoy\n          env:\n            - name: TERMINATION_DRAIN_DURATION_SECONDS\n              value: \"30\"\n");
        let f = run(&y);
        let m = &of(&f, "sidecar-as-regular-container")[0].message;
        assert!(
            m.contains("not after them: app gets its stop signal at t=10; it gets SIGTERM at t=0 together with worker; its drain of 30 s (TERMINATION_DRAIN_DURATION_SECONDS) would end at t=30, not before its SIGKILL at t=30, so it is SIGKILLed mid-drain, while the app may still be serving or calling out through it until t=30;"),
            "{m}"
        );
    }
}
