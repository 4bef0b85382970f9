//! `podgrace why pod/NAME`: forensics of a termination that already happened, from the pod's
//! status and events, live from a cluster (kubectl's `--kubeconfig`, `--context`, `-n`) or
//! offline from `kubectl get pod NAME -o json` and `kubectl get events -o json` output
//! (`-f`, repeatable). The reading itself is `podgrace_core::forensics`; cluster access is
//! `podgrace_cluster`.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::ListParams;
use podgrace_cluster::resources::path_segment;
use podgrace_cluster::{api_error, ClusterError, ClusterOptions};
use podgrace_core::forensics::{self, Forensics, Parsed};

use super::args::{ClusterArgs, Format, OutputArgs};
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
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let name = args
        .target
        .as_deref()
        .map(pod_argument)
        .transpose()
        .map_err(BadInput)?;
    let report = if args.files.is_empty() {
        let Some(name) = name else {
            return Err(BadInput(
                "which pod? podgrace why pod/NAME (or -f FILE with kubectl get pod NAME -o json output)"
                    .into(),
            )
            .into());
        };
        let opts = args.cluster.options(false);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        match rt.block_on(live(&opts, name)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                return Ok(Outcome::Exit(e.exit_code()));
            }
        }
    } else {
        offline(&args.files, name, args.cluster.namespace.as_deref())?
    };
    match args.output.output {
        Format::Json => {
            let mut w = std::io::BufWriter::new(Out);
            serde_json::to_writer_pretty(&mut w, &report)?;
            writeln!(w)?;
            w.flush()?;
        }
        Format::Text => write!(Out, "{}", crate::render::why::render(&report))?,
    }
    Ok(Outcome::Success)
}

/// The pod a `why` argument names: `NAME`, or `TYPE/NAME` with a type kubectl reads as pods
/// (`pod`, `pods`, `po`, `Pod`, `pods.v1`), refused in kubectl's words when it is not of that
/// form (`pod/`, `pod/a/b`, an unknown type).
fn pod_argument(target: &str) -> Result<&str, String> {
    use podgrace_cluster::resources::{parse_target, TargetError, POD};
    if !target.contains('/') {
        let name = forensics::pod_name(target).map_err(|e| e.to_string())?;
        if let Some(why) = podgrace_cluster::resources::path_segment_problems(name) {
            return Err(TargetError::InvalidName(name.to_string(), why).to_string());
        }
        return Ok(name);
    }
    match parse_target(target) {
        Ok(t) if t.resource == POD => Ok(&target[target.len() - t.name.len()..]),
        // Another workload, or a type without pods: why's own word for it.
        Ok(_) | Err(TargetError::NotAWorkload(_)) => {
            forensics::pod_name(target).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The pod and its events from the cluster; a pod that is gone is read from its events alone.
async fn live(opts: &ClusterOptions, name: &str) -> Result<Forensics, ClusterError> {
    let c = podgrace_cluster::connect(opts).await?;
    // Typed names reach the server escaped, as kubectl sends them (`a b` is a 404, not a
    // malformed request).
    let ns = path_segment(&c.namespace);
    let pods: kube::Api<Pod> = kube::Api::namespaced(c.client.clone(), &ns);
    let pod = match pods.get(&path_segment(name)).await {
        Ok(p) => Some(p),
        Err(e) => {
            let e = api_error(&c.server, e);
            if !e.is_not_found() {
                return Err(e);
            }
            None
        }
    };
    let events_api: kube::Api<Event> = kube::Api::namespaced(c.client.clone(), &ns);
    // The name as a field selector's value, escaped as upstream's `fields.EscapeValue` does.
    let value = name
        .replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=");
    let mut lp = ListParams::default()
        .fields(&format!(
            "involvedObject.kind=Pod,involvedObject.name={value}"
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
    name: Option<&str>,
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
    parsed
        .select(name, namespace)
        .map_err(|e| BadInput(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::pod_argument;

    #[test]
    fn pod_arguments_as_kubectl_reads_them() {
        for arg in [
            "web",
            "pod/web",
            "po/web",
            "pods/web",
            "Pod/web",
            "pods.v1/web",
        ] {
            assert_eq!(pod_argument(arg), Ok("web"), "{arg}");
        }
        assert_eq!(
            pod_argument("pod/a/b"),
            Err("arguments in resource/name form may not have more than one slash".into())
        );
        assert_eq!(
            pod_argument("pod/"),
            Err("arguments in resource/name form must have a single resource and name".into())
        );
        assert_eq!(
            pod_argument("foo/x"),
            Err("the server doesn't have a resource type \"foo\"".into())
        );
        for arg in ["deploy/web", "svc/web"] {
            assert!(
                pod_argument(arg)
                    .unwrap_err()
                    .contains("podgrace why reads pods only"),
                "{arg}"
            );
        }
    }
}
