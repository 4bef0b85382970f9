//! The offline input of `podgrace why --file`: what `kubectl get pod X -o json` (or `-o yaml`)
//! and `kubectl get events -o json` print, pasted from any cluster.

use k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::Value;

use crate::manifest::{self, ManifestError, ManifestErrorKind, ManifestErrors};
use crate::plan::SourceSpan;

use super::Forensics;

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

/// Why `podgrace why`'s target or files do not name one pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// The target names another kind than pods (`deployment/web`).
    #[error("{target}: podgrace why reads pods only (pod/NAME), not {kind}")]
    NotAPod {
        /// The target as given.
        target: String,
        /// The kind before the slash.
        kind: String,
    },
    /// The target has no name (`pod/`).
    #[error("{0}: a pod name is missing")]
    NoName(String),
    /// No target, and the files hold no pod.
    #[error("no pod in the files: name it (podgrace why pod/NAME -f events.json) or add kubectl get pod NAME -o json output")]
    NoPod,
    /// No target, and the files hold this many pods.
    #[error("the files hold {0} pods: name one (podgrace why pod/NAME -f ...)")]
    ManyPods(usize),
    /// Neither the named pod nor an event about it is in the files.
    #[error("pod {namespace}/{name}: neither the pod nor any event about it is in the files")]
    NotFound {
        /// The namespace looked in.
        namespace: String,
        /// The pod's name.
        name: String,
    },
}

/// `pod/NAME`, `pods/NAME`, `po/NAME` or `NAME` → NAME, as kubectl reads a pod argument.
///
/// # Errors
/// [`SelectError::NotAPod`] for another kind, [`SelectError::NoName`] for an empty name.
pub fn pod_name(target: &str) -> Result<&str, SelectError> {
    let name = match target.split_once('/') {
        Some(("pod" | "pods" | "po", n)) => n,
        Some((kind, _)) => {
            return Err(SelectError::NotAPod {
                target: target.into(),
                kind: kind.into(),
            })
        }
        None => target,
    };
    if name.is_empty() {
        return Err(SelectError::NoName(target.into()));
    }
    Ok(name)
}

impl Parsed {
    /// The forensics of pod `name` (default: the files' only pod) in `namespace` (default: the
    /// pod's, else that of an event about it, else `default`).
    ///
    /// # Errors
    /// [`SelectError::NoPod`] / [`SelectError::ManyPods`] when no name is given and the files
    /// hold not exactly one pod; [`SelectError::NotFound`] when neither the pod nor an event
    /// about it is in the files.
    pub fn select(
        &self,
        name: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<Forensics, SelectError> {
        let name = match name {
            Some(n) => n.to_string(),
            None => match self.pods.as_slice() {
                [one] => one.metadata.name.clone().unwrap_or_default(),
                [] => return Err(SelectError::NoPod),
                _ => return Err(SelectError::ManyPods(self.pods.len())),
            },
        };
        let pod = self
            .pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
        let ns = namespace
            .map(str::to_string)
            .or_else(|| pod.and_then(|p| p.metadata.namespace.clone()))
            .or_else(|| {
                self.events
                    .iter()
                    .find(|e| e.involved_object.name.as_deref() == Some(name.as_str()))
                    .and_then(|e| e.involved_object.namespace.clone())
            })
            .unwrap_or_else(|| "default".into());
        let report = super::explain(pod, &ns, &name, &self.events);
        if pod.is_none() && report.events.is_empty() {
            return Err(SelectError::NotFound {
                namespace: ns,
                name,
            });
        }
        Ok(report)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_as_kubectl_reads_them() {
        assert_eq!(pod_name("pod/web"), Ok("web"));
        assert_eq!(pod_name("pods/web"), Ok("web"));
        assert_eq!(pod_name("po/web"), Ok("web"));
        assert_eq!(pod_name("web"), Ok("web"));
        let e = pod_name("deployment/web").unwrap_err();
        assert_eq!(
            e.to_string(),
            "deployment/web: podgrace why reads pods only (pod/NAME), not deployment"
        );
        assert_eq!(pod_name("pod/"), Err(SelectError::NoName("pod/".into())));
    }

    fn parsed(text: &str) -> Parsed {
        let mut p = Parsed::default();
        parse(text, "t.json", &mut p).unwrap();
        p
    }

    const POD: &str =
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"shop"}}"#;
    const EVENT: &str = r#"{"kind":"Event","apiVersion":"v1","metadata":{"name":"e1","namespace":"prod"},
        "involvedObject":{"kind":"Pod","name":"api","namespace":"prod"},"reason":"Killing","type":"Normal",
        "message":"Stopping container app","firstTimestamp":"2024-01-01T00:00:00Z","lastTimestamp":"2024-01-01T00:00:00Z","count":1}"#;

    #[test]
    fn the_only_pod_is_chosen_and_its_namespace_is_used() {
        let r = parsed(POD).select(None, None).unwrap();
        assert_eq!((r.namespace.as_str(), r.pod.as_str()), ("shop", "web"));
        assert!(r.object_present);
        // -n wins over the object's namespace.
        let r = parsed(POD).select(Some("web"), Some("other")).unwrap();
        assert_eq!(r.namespace, "other");
    }

    #[test]
    fn a_gone_pod_takes_its_namespace_from_its_events() {
        let r = parsed(EVENT).select(Some("api"), None).unwrap();
        assert_eq!((r.namespace.as_str(), r.object_present), ("prod", false));
        assert_eq!(r.events.len(), 1);
    }

    #[test]
    fn no_pod_many_pods_and_an_unknown_pod_are_refused() {
        assert_eq!(parsed(EVENT).select(None, None), Err(SelectError::NoPod));
        let two = format!(
            r#"{{"kind":"List","items":[{POD},{}]}}"#,
            POD.replace("web", "db")
        );
        assert_eq!(
            parsed(&two).select(None, None),
            Err(SelectError::ManyPods(2))
        );
        assert_eq!(
            parsed(POD)
                .select(Some("nope"), None)
                .unwrap_err()
                .to_string(),
            "pod default/nope: neither the pod nor any event about it is in the files"
        );
    }
}
