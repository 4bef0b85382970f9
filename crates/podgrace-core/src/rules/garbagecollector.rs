//! Cascading deletion: the finalizers the API server puts on an object deleted with a
//! `propagationPolicy`, and what the garbage collector does with a dependent whose owners are
//! gone, being deleted in the foreground, or orphaning it.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`
//! (`deletionFinalizersForGarbageCollection`, `shouldOrphanDependents`,
//! `shouldDeleteDependents`), `pkg/controller/garbagecollector/garbagecollector.go`
//! (`attemptToDeleteItem`, `classifyReferences`, `processDeletingDependentsItem`,
//! `orphanDependents`). The same from Kubernetes 1.18 to 1.37 for the kinds podgrace serves,
//! whose default policy is to delete dependents in the background (apps/v1 included; only the
//! old extensions/v1beta1 and apps/v1beta* kinds orphan by default).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// `orphan`: dependents lose their owner reference before the owner goes.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// `foregroundDeletion`: the owner stays until its blocking dependents are gone.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// A delete's cascade choice (`DeleteOptions.propagationPolicy` and the legacy
/// `orphanDependents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cascade<'a> {
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground`; `None` when not set.
    pub propagation_policy: Option<&'a str>,
    /// The deprecated `orphanDependents`: `true` orphans, `false` is Background; `None` when not
    /// set.
    pub orphan_dependents: Option<bool>,
}

/// `deletionFinalizersForGarbageCollection`: the object's finalizers after the delete
/// (`orphan` or `foregroundDeletion` added or removed as the options, else the finalizers
/// already there, ask), and whether they changed.
pub fn deletion_finalizers(current: &[String], c: Cascade<'_>) -> (Vec<String>, bool) {
    let has = |f: &str| current.iter().any(|x| x == f);
    let orphan = match (c.orphan_dependents, c.propagation_policy) {
        (Some(o), _) => o,
        (None, Some("Orphan")) => true,
        (None, Some("Background" | "Foreground")) => false,
        _ => {
            // A finalizer already set overrides the default (delete dependents).
            current
                .iter()
                .find_map(|f| match f.as_str() {
                    FINALIZER_ORPHAN => Some(true),
                    FINALIZER_FOREGROUND => Some(false),
                    _ => None,
                })
                .unwrap_or(false)
        }
    };
    let foreground = match (c.orphan_dependents, c.propagation_policy) {
        (Some(_), _) => false,
        (None, Some("Foreground")) => true,
        (None, Some("Background" | "Orphan")) => false,
        _ => has(FINALIZER_FOREGROUND),
    };
    let mut out: Vec<String> = current
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        out.push(FINALIZER_ORPHAN.into());
    }
    if foreground {
        out.push(FINALIZER_FOREGROUND.into());
    }
    let mut a: Vec<&String> = current.iter().collect();
    let mut b: Vec<&String> = out.iter().collect();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    let changed = a != b;
    (if changed { out } else { current.to_vec() }, changed)
}

/// What an owner reference points at, as the collector finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// The owner does not exist (or another object of that name, with another uid).
    Absent,
    /// It exists and is not being deleted in the foreground.
    Present,
    /// It is being deleted with the `foregroundDeletion` finalizer.
    DeletingDependents,
}

/// What the collector does with one dependent (`attemptToDeleteItem`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing: it has a live owner (and no stale reference), or no owner at all, or it is
    /// being deleted already.
    Keep,
    /// Remove the owner references with these uids (dangling ones, or owners waiting for
    /// their dependents), keeping the live owners.
    RemoveOwnerRefs(Vec<String>),
    /// Delete it with this propagation policy (uid and resourceVersion preconditions).
    Delete(&'static str),
}

fn has_finalizer(meta: &ObjectMeta, f: &str) -> bool {
    meta.finalizers.iter().flatten().any(|x| x == f)
}

/// `attemptToDeleteItem` for an object that is not itself deleting its dependents:
/// `owner_state` classifies each of its owner references; `has_dependents` tells whether
/// anything names it as owner.
pub fn attempt_to_delete(
    meta: &ObjectMeta,
    owner_state: impl Fn(&OwnerReference) -> OwnerState,
    has_dependents: bool,
) -> Action {
    if meta.deletion_timestamp.is_some() {
        return Action::Keep;
    }
    let refs = meta.owner_references.clone().unwrap_or_default();
    if refs.is_empty() {
        return Action::Keep;
    }
    let (mut solid, mut stale, mut waiting) = (0, Vec::new(), 0);
    for r in &refs {
        match owner_state(r) {
            OwnerState::Absent => stale.push(r.uid.clone()),
            OwnerState::Present => solid += 1,
            OwnerState::DeletingDependents => {
                waiting += 1;
                stale.push(r.uid.clone());
            }
        }
    }
    if solid > 0 {
        if stale.is_empty() {
            return Action::Keep;
        }
        return Action::RemoveOwnerRefs(stale);
    }
    if waiting > 0 && has_dependents {
        return Action::Delete("Foreground");
    }
    if has_finalizer(meta, FINALIZER_ORPHAN) {
        Action::Delete("Orphan")
    } else if has_finalizer(meta, FINALIZER_FOREGROUND) {
        Action::Delete("Foreground")
    } else {
        Action::Delete("Background")
    }
}

/// `processDeletingDependentsItem`: an owner deleting in the foreground loses its
/// `foregroundDeletion` finalizer once no dependent blocks it (`blocking` counts the
/// dependents whose reference to it has `blockOwnerDeletion`).
pub fn foreground_done(blocking: usize) -> bool {
    blocking == 0
}

/// The finalizers without `f`.
pub fn without(meta: &ObjectMeta, f: &str) -> Vec<String> {
    meta.finalizers
        .iter()
        .flatten()
        .filter(|x| *x != f)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn delete_options_choose_the_finalizers() {
        let fg = Cascade {
            propagation_policy: Some("Foreground"),
            ..Default::default()
        };
        assert_eq!(
            deletion_finalizers(&[], fg),
            (s(&["foregroundDeletion"]), true)
        );
        let or = Cascade {
            propagation_policy: Some("Orphan"),
            ..Default::default()
        };
        assert_eq!(
            deletion_finalizers(&s(&["x"]), or),
            (s(&["x", "orphan"]), true)
        );
        assert_eq!(
            deletion_finalizers(&[], Cascade::default()),
            (vec![], false)
        );
        // A finalizer set earlier stays without options.
        assert_eq!(
            deletion_finalizers(&s(&["foregroundDeletion"]), Cascade::default()),
            (s(&["foregroundDeletion"]), false)
        );
        let legacy = Cascade {
            orphan_dependents: Some(true),
            propagation_policy: None,
        };
        assert_eq!(
            deletion_finalizers(&s(&["foregroundDeletion"]), legacy),
            (s(&["orphan"]), true)
        );
    }

    #[test]
    fn dependents_of_gone_or_deleting_owners() {
        let owner = OwnerReference {
            uid: "o".into(),
            block_owner_deletion: Some(true),
            controller: Some(true),
            ..Default::default()
        };
        let meta = ObjectMeta {
            owner_references: Some(vec![owner]),
            ..Default::default()
        };
        assert_eq!(
            attempt_to_delete(&meta, |_| OwnerState::Present, false),
            Action::Keep
        );
        assert_eq!(
            attempt_to_delete(&meta, |_| OwnerState::Absent, false),
            Action::Delete("Background")
        );
        assert_eq!(
            attempt_to_delete(&meta, |_| OwnerState::DeletingDependents, true),
            Action::Delete("Foreground")
        );
        assert_eq!(
            attempt_to_delete(&meta, |_| OwnerState::DeletingDependents, false),
            Action::Delete("Background")
        );
    }
}
