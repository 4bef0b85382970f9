//! What the API server accepts but warns about (`Warning` headers; kubectl prints them as
//! `Warning: …`): the ones that change what runs. A memory or ephemeral-storage quantity that
//! is not a whole number of bytes (`1m` is a thousandth of a byte: the kubelet rounds it up
//! to 1 byte, and no container starts in a 1-byte cgroup), an env var defined twice (the
//! later hides the earlier, and `kubectl apply` may drop one), a negative
//! terminationGracePeriodSeconds (treated as 1).
//!
//! Upstream: `pkg/api/pod/warnings.go` `warningsForPodSpecAndMeta` (1.36 tree; the fractional
//! byte warning since 1.22, the duplicate env warning since 1.22, the negative grace warning
//! since 1.27). Paths are upstream's, with `[memory]` for a map key.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::{Seg, SpecAt};
use crate::manifest::excerpt::quote;
use crate::manifest::tree::Pos;
use crate::rules::quantity::{canonical, Quantity};

/// One warning: the message as kube-apiserver sends it (`PATH: TEXT`), placed at the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldWarning {
    pub pos: Pos,
    /// The field path the message starts with.
    pub path: String,
    pub message: String,
}

/// The warnings of a pod spec at `at` (after validation passed), in upstream's order: init
/// containers then containers (`VisitContainersWithPath`), then the pod's grace period.
pub(crate) fn pod_warnings(spec: &PodSpec, at: &SpecAt<'_, '_>) -> Vec<FieldWarning> {
    let mut out = Vec::new();
    let init = spec.init_containers.iter().flatten();
    let lists = init
        .enumerate()
        .map(|(i, c)| ("initContainers", i, c))
        .chain(
            spec.containers
                .iter()
                .enumerate()
                .map(|(i, c)| ("containers", i, c)),
        );
    for (key, i, c) in lists {
        container(&mut out, c, &[Seg::Key(key), Seg::Index(i)], at);
    }
    if spec.termination_grace_period_seconds.is_some_and(|t| t < 0) {
        let (path, pos) = at.locate(&[Seg::Key("terminationGracePeriodSeconds")]);
        out.push(FieldWarning {
            pos,
            path: path.clone(),
            message: format!(
                "{path}: must be >= 0; negative values are invalid and will be treated as 1"
            ),
        });
    }
    out
}

fn container(out: &mut Vec<FieldWarning>, c: &Container, base: &[Seg<'_>], at: &SpecAt<'_, '_>) {
    let seg = |more: &[Seg<'static>]| {
        let mut v = base.to_vec();
        v.extend_from_slice(more);
        v
    };
    if let Some(r) = &c.resources {
        for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
            for name in ["memory", "ephemeral-storage"] {
                let Some(q) = map.as_ref().and_then(|m| m.get(name)) else {
                    continue;
                };
                let fractional = Quantity::parse(&q.0).is_ok_and(|v| v.milli_value() % 1000 != 0);
                if !fractional {
                    continue;
                }
                let (path, pos) = at.locate(&seg(&[
                    Seg::Key("resources"),
                    Seg::Key(which),
                    Seg::MapKey(name),
                ]));
                let shown = canonical(&q.0).unwrap_or_else(|_| q.0.clone());
                out.push(FieldWarning {
                    pos,
                    path: path.clone(),
                    message: format!(
                        "{path}: fractional byte value {} is invalid, must be an integer",
                        quote(&shown)
                    ),
                });
            }
        }
    }
    let mut seen = HashSet::new();
    for (i, e) in c.env.iter().flatten().enumerate() {
        if seen.insert(e.name.as_str()) {
            continue;
        }
        // A later definition that refers to the earlier one (`X=$(X):more`) is fine.
        let reference = format!("$({})", e.name);
        let value = e.value.as_deref().unwrap_or("");
        let bad = e.value_from.is_some() || value == reference || !value.contains(&reference);
        if bad {
            let (path, pos) = at.locate(&seg(&[Seg::Key("env"), Seg::Index(i)]));
            out.push(FieldWarning {
                pos,
                path: path.clone(),
                message: format!(
                    "{path}: hides previous definition of {}, which may be dropped when using apply",
                    quote(&e.name)
                ),
            });
        }
    }
}
