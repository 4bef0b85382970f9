//! `podgrace why pod/NAME`: forensics of a termination that already happened, from the pod's
//! status and events, live from a cluster (kubectl's `--kubeconfig`, `--context`, `-n`) or
//! offline from `kubectl get pod NAME -o json` and `kubectl get events -o json` output
//! (`-f`, repeatable). The reading itself is `podgrace_core::forensics`; cluster access is
//! `podgrace_cluster`.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::ListParams;
use podgrace_cluster::{api_error, ClusterError, ClusterOptions};
use podgrace_core::forensics::{self, Forensics, Parsed};

use super::args::{Format, OutputArgs};
use crate::{out::Out, BadInput, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// The pod: `pod/NAME` (also `pods/NAME`, `po/NAME`) or `NAME`. With -f it may be left out
    /// when the files hold one pod.
    target: Option<String>,
    /// Read `kubectl get pod NAME -o json` (or -o yaml) and `kubectl get events -o json` output
    /// from FILE (`-` for stdin) instead of a cluster; repeatable.
    #[arg(long = "file", short = 'f', value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster
    /// config), as kubectl.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// The pod's namespace (default: the context's, else `default`).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    namespace: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

/// `pod/NAME`, `pods/NAME`, `po/NAME` or `NAME` → NAME.
fn pod_name(target: &str) -> Result<String, BadInput> {
    let name = match target.split_once('/') {
        Some(("pod" | "pods" | "po", n)) => n,
        Some((kind, _)) => {
            return Err(BadInput(format!(
                "{target}: podgrace why reads pods only (pod/NAME), not {kind}"
            )))
        }
        None => target,
    };
    if name.is_empty() {
        return Err(BadInput(format!("{target}: a pod name is missing")));
    }
    Ok(name.to_string())
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let name = args.target.as_deref().map(pod_name).transpose()?;
    let report = if args.files.is_empty() {
        let Some(name) = name else {
            return Err(BadInput(
                "which pod? podgrace why pod/NAME (or -f FILE with kubectl get pod NAME -o json output)"
                    .into(),
            )
            .into());
        };
        let opts = ClusterOptions {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
            namespace: args.namespace.clone(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        match rt.block_on(live(&opts, &name)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                return Ok(Outcome::Exit(e.exit_code()));
            }
        }
    } else {
        offline(&args.files, name, args.namespace.as_deref())?
    };
    match args.output.output {
        Format::Json => {
            let mut w = std::io::BufWriter::new(Out);
            serde_json::to_writer_pretty(&mut w, &report)?;
            writeln!(w)?;
            w.flush()?;
        }
        Format::Text => write!(Out, "{}", render(&report))?,
    }
    Ok(Outcome::Success)
}

/// The pod and its events from the cluster; a pod that is gone is read from its events alone.
async fn live(opts: &ClusterOptions, name: &str) -> Result<Forensics, ClusterError> {
    let c = podgrace_cluster::connect(opts).await?;
    let pods: kube::Api<Pod> = kube::Api::namespaced(c.client.clone(), &c.namespace);
    let pod = match pods.get(name).await {
        Ok(p) => Some(p),
        Err(e) => {
            let e = api_error(&c.server, e);
            if !e.is_not_found() {
                return Err(e);
            }
            None
        }
    };
    let events_api: kube::Api<Event> = kube::Api::namespaced(c.client.clone(), &c.namespace);
    let mut lp = ListParams::default()
        .fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={name}"
        ))
        .limit(500);
    let mut events = Vec::new();
    loop {
        let list = events_api
            .list(&lp)
            .await
            .map_err(|e| api_error(&c.server, e))?;
        events.extend(list.items);
        match list.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(t) => lp = lp.continue_token(&t),
            None => break,
        }
    }
    if pod.is_none() && events.is_empty() {
        return Err(ClusterError::Api {
            code: 404,
            reason: "NotFound".into(),
            message: format!("pods \"{name}\" not found"),
        });
    }
    Ok(forensics::explain(
        pod.as_ref(),
        &c.namespace,
        name,
        &events,
    ))
}

/// The pod and events of the files.
fn offline(
    files: &[PathBuf],
    name: Option<String>,
    namespace: Option<&str>,
) -> Result<Forensics, BadInput> {
    let mut parsed = Parsed::default();
    for f in files {
        let (text, label) = if f.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin()
                .take(forensics::MAX_INPUT_BYTES as u64 + 1)
                .read_to_string(&mut s)
                .map_err(|e| BadInput(format!("<stdin>: {e}")))?;
            (s, "<stdin>".to_string())
        } else {
            let label = f.display().to_string();
            let meta = std::fs::metadata(f).map_err(|e| BadInput(format!("{label}: {e}")))?;
            if meta.len() > forensics::MAX_INPUT_BYTES as u64 {
                return Err(BadInput(format!(
                    "{label}: {} bytes is more than podgrace why reads ({} bytes)",
                    meta.len(),
                    forensics::MAX_INPUT_BYTES
                )));
            }
            let s = std::fs::read_to_string(f).map_err(|e| BadInput(format!("{label}: {e}")))?;
            (s, label)
        };
        forensics::parse(&text, &label, &mut parsed).map_err(|e| BadInput(e.to_string()))?;
    }
    let name = match name {
        Some(n) => n,
        None => match parsed.pods.as_slice() {
            [one] => one.metadata.name.clone().unwrap_or_default(),
            [] => {
                return Err(BadInput(
                    "no pod in the files: name it (podgrace why pod/NAME -f events.json) or add kubectl get pod NAME -o json output"
                        .into(),
                ))
            }
            _ => {
                return Err(BadInput(format!(
                    "the files hold {} pods: name one (podgrace why pod/NAME -f ...)",
                    parsed.pods.len()
                )))
            }
        },
    };
    let pod = parsed
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name.as_str()));
    let ns = namespace
        .map(str::to_string)
        .or_else(|| pod.and_then(|p| p.metadata.namespace.clone()))
        .or_else(|| {
            parsed
                .events
                .iter()
                .find(|e| e.involved_object.name.as_deref() == Some(name.as_str()))
                .and_then(|e| e.involved_object.namespace.clone())
        })
        .unwrap_or_else(|| "default".into());
    let report = forensics::explain(pod, &ns, &name, &parsed.events);
    if pod.is_none() && report.events.is_empty() {
        return Err(BadInput(format!(
            "pod {ns}/{name}: neither the pod nor any event about it is in the files"
        )));
    }
    Ok(report)
}

/// The text report.
fn render(r: &Forensics) -> String {
    let mut s = String::new();
    let _ = write!(s, "pod {}/{}", r.namespace, r.pod);
    if r.object_present {
        let _ = write!(s, ": phase {}", r.phase);
        if !r.reason.is_empty() {
            let _ = write!(s, " ({})", r.reason);
        }
        if let Some(g) = r.termination_grace_period_seconds {
            let _ = write!(s, ", terminationGracePeriodSeconds {g}");
        }
    } else {
        s.push_str(": gone (read from its events)");
    }
    s.push('\n');
    if let Some(d) = &r.deletion {
        let _ = writeln!(
            s,
            "  deletionTimestamp {}, deletionGracePeriodSeconds {}{}",
            d.deletion_timestamp,
            d.deletion_grace_period_seconds
                .map_or("unset".to_string(), |g| g.to_string()),
            d.deleted_at
                .as_ref()
                .map(|a| format!(" (deleted at {a})"))
                .unwrap_or_default()
        );
    }
    for c in &r.containers {
        let _ = write!(s, "  {}: ", c.name);
        if c.last != Some("state") {
            let _ = write!(s, "{}, ", c.state);
        }
        let _ = write!(s, "restarts {}", c.restart_count);
        if let (Some(t), Some(last)) = (&c.terminated, c.last) {
            let _ = write!(
                s,
                "; {} exit {}{}{}{}",
                if last == "state" {
                    "terminated"
                } else {
                    "last terminated"
                },
                t.exit_code,
                if t.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", t.reason)
                },
                t.finished_at
                    .as_ref()
                    .map(|f| format!(" at {f}"))
                    .unwrap_or_default(),
                t.after_delete_seconds
                    .map(|a| format!(", {a} s after the delete"))
                    .unwrap_or_default()
            );
        }
        s.push('\n');
    }
    if !r.findings.is_empty() {
        s.push_str("why:\n");
        for f in &r.findings {
            let _ = writeln!(
                s,
                "  - {}{}{}",
                f.container
                    .as_ref()
                    .map(|c| format!("{c}: "))
                    .unwrap_or_default(),
                f.message,
                if f.inferred { " [inferred]" } else { "" }
            );
        }
    }
    if r.events.is_empty() {
        s.push_str("events: none left\n");
    } else {
        s.push_str("events:\n");
        for e in &r.events {
            let _ = writeln!(
                s,
                "  {}  {:<7}  {}{}{}  {}",
                if e.time.is_empty() {
                    "-"
                } else {
                    e.time.as_str()
                },
                e.type_,
                e.reason,
                e.container
                    .as_ref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default(),
                if e.count > 1 {
                    format!(" x{}", e.count)
                } else {
                    String::new()
                },
                e.message
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_as_kubectl_reads_them() {
        assert_eq!(pod_name("pod/web").unwrap(), "web");
        assert_eq!(pod_name("pods/web").unwrap(), "web");
        assert_eq!(pod_name("web").unwrap(), "web");
        assert!(pod_name("deployment/web")
            .unwrap_err()
            .0
            .contains("pods only"));
        assert!(pod_name("pod/").is_err());
    }
}
