//! Many pods, many triggers: the timeline of each pod for each trigger that applies to it, and
//! which pods each trigger skipped (`podgrace explain` over a whole input).

use super::{explain, NotApplicable, Options, Timeline, TimelineError, Trigger};
use crate::plan::PodPlan;

/// At most this many skipped pods are listed when a trigger applies to none of them.
pub const MAX_LISTED: usize = 10;

/// A pod a trigger does not apply to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Where the pod is: `FILE:LINE:COL`.
    pub at: String,
    /// The pod, `namespace/name` (or the name alone), as [`TimelineError::NotApplicable`] names
    /// it.
    pub pod: String,
    /// Why the trigger does not apply.
    pub reason: NotApplicable,
}

/// One trigger over every pod: whether it applied to at least one, and the pods it skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerOutcome {
    /// The trigger, as given.
    pub trigger: Trigger,
    /// It applied to at least one pod.
    pub applied: bool,
    /// The pods it does not apply to, in input order.
    pub skipped: Vec<Skipped>,
}

/// The timelines of many pods for many triggers ([`explain_all`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Explained<'p> {
    /// Pods in input order, the triggers of each pod in the order given.
    pub timelines: Vec<(&'p PodPlan, Timeline)>,
    /// One entry per trigger, in the order given.
    pub triggers: Vec<TriggerOutcome>,
}

/// A pod whose timeline cannot be built for a reason other than a trigger that does not apply
/// to it (bad input): its position `FILE:LINE:COL` and the error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {source}")]
pub struct ExplainAllError {
    /// Where the pod is: `FILE:LINE:COL`.
    pub at: String,
    /// What [`explain`] returned.
    #[source]
    pub source: TimelineError,
}

/// Builds the timeline of every pod of `pods` for every trigger of `triggers` that applies to
/// it ([`super::applies`]); a trigger that does not apply to a pod skips it.
///
/// # Errors
/// [`ExplainAllError`] for the first pod whose timeline cannot be built (other than a trigger
/// that does not apply).
pub fn explain_all<'p>(
    pods: &'p [PodPlan],
    triggers: &[Trigger],
    opts: &Options,
) -> Result<Explained<'p>, ExplainAllError> {
    explain_each(pods, triggers, |_| *opts)
}

/// [`explain_all`] with each pod's own options (`options_of(i)` for `pods[i]`): pods of a
/// cluster run on nodes whose kubelets are set differently.
///
/// # Errors
/// As [`explain_all`].
pub fn explain_each<'p>(
    pods: &'p [PodPlan],
    triggers: &[Trigger],
    options_of: impl Fn(usize) -> Options,
) -> Result<Explained<'p>, ExplainAllError> {
    let at = |pod: &PodPlan| {
        let s = &pod.span;
        format!("{}:{}:{}", s.file, s.line, s.column)
    };
    let mut timelines = Vec::new();
    let mut outcomes: Vec<TriggerOutcome> = triggers
        .iter()
        .map(|t| TriggerOutcome {
            trigger: t.clone(),
            applied: false,
            skipped: Vec::new(),
        })
        .collect();
    for (p, pod) in pods.iter().enumerate() {
        let opts = options_of(p);
        for (i, t) in triggers.iter().enumerate() {
            match explain(pod, t, &opts) {
                Ok(tl) => {
                    outcomes[i].applied = true;
                    timelines.push((pod, tl));
                }
                Err(TimelineError::NotApplicable { pod: name, reason }) => {
                    outcomes[i].skipped.push(Skipped {
                        at: at(pod),
                        pod: name,
                        reason,
                    });
                }
                Err(source) => {
                    return Err(ExplainAllError {
                        at: at(pod),
                        source,
                    })
                }
            }
        }
    }
    Ok(Explained {
        timelines,
        triggers: outcomes,
    })
}

impl Explained<'_> {
    /// What to say of the triggers that applied to no pod, one line each (a single skipped pod:
    /// `FILE:LINE:COL: pod P: why`; more: a header, then at most [`MAX_LISTED`] of them, then
    /// how many more); `None` when every trigger applied to some pod.
    pub fn not_applied(&self) -> Option<String> {
        let mut errors = Vec::new();
        for o in self.triggers.iter().filter(|o| !o.applied) {
            let t = &o.trigger;
            if let [s] = o.skipped.as_slice() {
                errors.push(format!("{}: pod {}: {}", s.at, s.pod, s.reason));
                continue;
            }
            errors.push(format!(
                "--trigger {t} applies to none of the {} pods of the input:",
                o.skipped.len()
            ));
            for s in o.skipped.iter().take(MAX_LISTED) {
                errors.push(format!("  {}: pod {}: {}", s.at, s.pod, s.reason));
            }
            if o.skipped.len() > MAX_LISTED {
                errors.push(format!("  ... and {} more", o.skipped.len() - MAX_LISTED));
            }
        }
        (!errors.is_empty()).then(|| errors.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest;

    /// `n` pods `p0`, `p1`, ... with one container `app`; the first `probed` of them have a
    /// liveness probe.
    fn pods(n: usize, probed: usize) -> Vec<PodPlan> {
        let docs: Vec<String> = (0..n)
            .map(|i| {
                let probe = if i < probed {
                    "\n    livenessProbe: {tcpSocket: {port: 80}}"
                } else {
                    ""
                };
                format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  containers:\n  - name: app\n    image: nginx{probe}\n")
            })
            .collect();
        manifest::load(&docs.join("---\n"), "in.yaml")
            .expect("loads")
            .pods()
            .cloned()
            .collect()
    }

    #[test]
    fn every_pod_for_every_trigger_that_applies() {
        let pods = pods(3, 1);
        let triggers = [Trigger::Delete, Trigger::Liveness("app".into())];
        let e = explain_all(&pods, &triggers, &Options::default()).expect("explains");
        // delete for p0..p2, liveness for p0 only: pods in input order, triggers as given.
        let got: Vec<(&str, String)> = e
            .timelines
            .iter()
            .map(|(p, t)| (p.name.as_str(), t.trigger.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("p0", "delete".to_string()),
                ("p0", "liveness:app".to_string()),
                ("p1", "delete".to_string()),
                ("p2", "delete".to_string()),
            ]
        );
        assert!(e.triggers.iter().all(|o| o.applied));
        assert!(e.triggers[0].skipped.is_empty());
        let skipped: Vec<&str> = e.triggers[1]
            .skipped
            .iter()
            .map(|s| s.pod.as_str())
            .collect();
        assert_eq!(skipped, vec!["p1", "p2"]);
        assert_eq!(e.triggers[1].skipped[0].at, "in.yaml:10:1");
        assert_eq!(e.not_applied(), None);
    }

    #[test]
    fn a_trigger_that_applies_to_no_pod() {
        let one = pods(1, 0);
        let e = explain_all(
            &one,
            &[Trigger::Liveness("app".into())],
            &Options::default(),
        )
        .expect("explains");
        assert!(e.timelines.is_empty());
        assert_eq!(
            e.not_applied().as_deref(),
            Some("in.yaml:1:1: pod p0: container \"app\" has no liveness probe")
        );
        let many = pods(12, 0);
        let e = explain_all(
            &many,
            &[Trigger::Startup("web".into())],
            &Options::default(),
        )
        .expect("explains");
        let msg = e.not_applied().expect("not applied");
        let lines: Vec<&str> = msg.lines().collect();
        assert_eq!(
            lines[0],
            "--trigger startup:web applies to none of the 12 pods of the input:"
        );
        assert_eq!(
            lines[1],
            "  in.yaml:1:1: pod p0: no container named \"web\" (containers: app)"
        );
        assert_eq!(lines.len(), 1 + MAX_LISTED + 1);
        assert_eq!(lines[MAX_LISTED + 1], "  ... and 2 more");
    }
}
