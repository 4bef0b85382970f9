//! The offline input of `podgrace why --file`: what `kubectl get pod X -o json` (or `-o yaml`)
//! and `kubectl get events -o json` print, pasted from any cluster.

use k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::Value;

use crate::manifest::{self, ManifestError, ManifestErrorKind, ManifestErrors};
use crate::plan::SourceSpan;

/// The largest input read, bytes (kube-apiserver's request limit, 3 MiB, times two for a list of
/// events): a bigger file is refused before it is parsed.
pub const MAX_INPUT_BYTES: usize = 6 * 1024 * 1024;

/// The pods and events of one or more files.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Every pod read, in input order (the items of a `List` or `PodList` included).
    pub pods: Vec<Pod>,
    /// Every event read, in input order (the items of a `List` or `EventList` included).
    pub events: Vec<Event>,
}

fn error(
    file: &str,
    line: usize,
    column: usize,
    path: String,
    kind: ManifestErrorKind,
) -> ManifestError {
    ManifestError {
        span: SourceSpan {
            file: file.to_string(),
            line,
            column,
            path,
        },
        kind,
        object: None,
        object_span: None,
    }
}

/// Reads `text` (JSON or YAML; `file` names it in messages): a Pod, an Event, or a `List` /
/// `PodList` / `EventList` of them, added to `into`. Other kinds are refused, as is a document
/// that is not an object.
///
/// # Errors
/// A syntax error at its line and column; a value of the wrong type at the object's field
/// path (`items[2]`, with the line and column when the file holds one Pod); an object of
/// another kind; more than [`MAX_INPUT_BYTES`].
pub fn parse(text: &str, file: &str, into: &mut Parsed) -> Result<(), ManifestErrors> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(ManifestErrors(vec![error(
            file,
            1,
            1,
            String::new(),
            ManifestErrorKind::TooLarge(format!(
                "{} bytes is more than podgrace why reads ({MAX_INPUT_BYTES} bytes)",
                text.len()
            )),
        )]));
    }
    let Some(doc) = manifest::load_typed::<Value>(text, file)? else {
        return Err(ManifestErrors(vec![error(
            file,
            1,
            1,
            String::new(),
            ManifestErrorKind::NotAnObject(
                "empty input: expected the output of kubectl get pod NAME -o json".into(),
            ),
        )]));
    };
    let kind = doc["kind"].as_str().unwrap_or_default().to_string();
    let (items, listed) = match kind.as_str() {
        "List" | "PodList" | "EventList" => {
            (doc["items"].as_array().cloned().unwrap_or_default(), true)
        }
        _ => (vec![doc], false),
    };
    let mut errors = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let path = if listed {
            format!("items[{i}]")
        } else {
            String::new()
        };
        match item["kind"].as_str() {
            Some("Pod") => match serde_json::from_value::<Pod>(item) {
                Ok(p) => into.pods.push(p),
                Err(e) => {
                    // One Pod: the loader places the error at its line and column.
                    if !listed {
                        if let Err(located) = manifest::load_typed::<Pod>(text, file) {
                            errors.extend(located.0);
                            continue;
                        }
                    }
                    errors.push(error(file, 1, 1, path, ManifestErrorKind::Type(e.to_string())));
                }
            },
            Some("Event") => match serde_json::from_value::<Event>(item) {
                Ok(ev) => into.events.push(ev),
                Err(e) => errors.push(error(file, 1, 1, path, ManifestErrorKind::Type(e.to_string()))),
            },
            other => errors.push(error(
                file,
                1,
                1,
                path,
                ManifestErrorKind::NotAnObject(match other {
                    Some(k) => format!(
                        "kind {k:?}: expected a Pod (kubectl get pod NAME -o json) or Events (kubectl get events -o json)"
                    ),
                    None => "not a Kubernetes object (no kind): expected the output of kubectl get pod NAME -o json".into(),
                }),
            )),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ManifestErrors(errors))
    }
}
