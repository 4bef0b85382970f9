//! `podgrace node shutdown`: announces a graceful node shutdown to a running `podgrace serve`
//! (what systemd-logind's `PrepareForShutdown` signal is to a kubelet): its node shutdown
//! manager kills the pods by priority group, regular pods first and critical pods last, and
//! leaves them `Failed`, reason `Terminated`; the node turns NotReady. The command returns
//! when the last group is done and prints, per pod, its group, its grace-period override and
//! when its kill was sent and finished (seconds from the shutdown's start), or the JSON with
//! `-o json`. serve keeps serving the API.
//!
//! Upstream: `pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go`
//! (`processShutdownEvent`).

use std::io::Write;
use std::path::PathBuf;

use podgrace_cluster::{api_error, connect, ClusterOptions};

use crate::Outcome;

/// `podgrace node ...`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: NodeCommand,
}

#[derive(clap::Subcommand, Debug)]
enum NodeCommand {
    /// Shut the node of a running `podgrace serve` down gracefully (serve needs
    /// --shutdown-grace-period or --shutdown-grace-period-by-pod-priority).
    Shutdown(ShutdownArgs),
}

#[derive(clap::Args, Debug)]
struct ShutdownArgs {
    /// The node (serve's --node-name).
    #[arg(default_value = "podgrace")]
    node: String,
    /// The kubeconfig serve wrote (default: $KUBECONFIG, else ~/.kube/config), as kubectl.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// `text` (a line per pod) or `json` (serve's answer as it is).
    #[arg(long, short = 'o', value_name = "FORMAT", default_value = "text")]
    output: OutputFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum OutputFormat {
    Text,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let NodeCommand::Shutdown(a) = args.command;
    let opts = ClusterOptions {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        namespace: None,
        ..ClusterOptions::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let answer = rt.block_on(async {
        let cluster = connect(&opts).await?;
        let req = http::Request::post(crate::cmd::serve::shutdown_path(&a.node))
            .body(Vec::new())
            .map_err(|e| podgrace_cluster::ClusterError::Configuration(e.to_string()))?;
        cluster
            .client
            .request_text(req)
            .await
            .map_err(|e| api_error(&cluster.server, e))
    });
    let body = match answer {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            return Ok(Outcome::Exit(e.exit_code()));
        }
    };
    let mut out = std::io::stdout().lock();
    if a.output == OutputFormat::Json {
        writeln!(out, "{body}")?;
        return Ok(Outcome::Success);
    }
    let v: serde_json::Value = serde_json::from_str(&body)?;
    writeln!(out, "node/{} shut down", a.node)?;
    for p in v["pods"].as_array().into_iter().flatten() {
        let killed = match p["killedSeconds"].as_f64() {
            Some(k) => format!("killed at {k:.1} s"),
            None => "not killed within its group's period".into(),
        };
        writeln!(
            out,
            "  pod/{} (priority group {}): grace {} s, sent at {:.1} s, {killed}",
            p["pod"].as_str().unwrap_or_default(),
            p["groupPriority"],
            p["gracePeriodSeconds"],
            p["sentSeconds"].as_f64().unwrap_or_default(),
        )?;
    }
    Ok(Outcome::Success)
}
