//! The guard of the verbs that disrupt a live workload (`podgrace lag`, and the drill against a
//! cluster): they run only against a context whose name contains a word the user allowed
//! (`--allow-context dev`), or with `--yes`. A production cluster is one wrong
//! `kubectl config use-context` away; the guard makes that mistake cost an error, not an
//! outage.

/// Why a disruptive verb refused to run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{verb} disrupts {what}, and {context} contains none of the words allowed with --allow-context{allowed}: name a word of a context meant for this with --allow-context WORD (a test cluster's `kind`, `dev`), or pass --yes to run it against this context anyway")]
pub struct Refused {
    /// The verb (`podgrace lag`).
    pub verb: String,
    /// What it disrupts (`deployment/web (it deletes its pods one at a time)`).
    pub what: String,
    /// `the context "prod-eu"`, or `the in-cluster configuration`.
    pub context: String,
    /// ` (given: a, b)` or ` (none given)`.
    pub allowed: String,
}

/// Whether `verb` may disrupt `what` in `context` (`None`: the in-cluster configuration or
/// the `localhost:8080` fallback, which have no name): with `yes`, always; else when the
/// context's name contains one of `allowed` (ASCII case ignored).
///
/// # Errors
/// [`Refused`], worded for the user.
pub fn check_context(
    verb: &str,
    what: &str,
    context: Option<&str>,
    allowed: &[String],
    yes: bool,
) -> Result<(), Refused> {
    if yes {
        return Ok(());
    }
    let name = context.unwrap_or_default().to_ascii_lowercase();
    if !name.is_empty()
        && allowed
            .iter()
            .any(|w| !w.is_empty() && name.contains(&w.to_ascii_lowercase()))
    {
        return Ok(());
    }
    Err(Refused {
        verb: verb.to_string(),
        what: what.to_string(),
        context: match context {
            Some(c) => format!("the context {c:?}"),
            None => "the in-cluster configuration".to_string(),
        },
        allowed: if allowed.is_empty() {
            " (none given)".to_string()
        } else {
            format!(" (given: {})", allowed.join(", "))
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_contexts_or_yes() {
        let words = vec!["kind".to_string(), "dev".to_string()];
        assert!(check_context(
            "podgrace lag",
            "deployment/web",
            Some("kind-podgrace"),
            &words,
            false
        )
        .is_ok());
        assert!(check_context(
            "podgrace lag",
            "deployment/web",
            Some("Team-DEV-1"),
            &words,
            false
        )
        .is_ok());
        let e = check_context(
            "podgrace lag",
            "deployment/web",
            Some("prod-eu"),
            &words,
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "podgrace lag disrupts deployment/web, and the context \"prod-eu\" contains none of the words allowed with --allow-context (given: kind, dev): name a word of a context meant for this with --allow-context WORD (a test cluster's `kind`, `dev`), or pass --yes to run it against this context anyway"
        );
        assert!(check_context(
            "podgrace lag",
            "deployment/web",
            Some("prod-eu"),
            &words,
            true
        )
        .is_ok());
        assert!(check_context("podgrace lag", "deployment/web", Some("prod"), &[], false).is_err());
        assert!(check_context("podgrace lag", "deployment/web", None, &words, false).is_err());
        // An empty word allows nothing.
        assert!(check_context(
            "podgrace lag",
            "deployment/web",
            Some("prod"),
            &[String::new()],
            false
        )
        .is_err());
    }
}
