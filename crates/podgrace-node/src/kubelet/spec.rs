//! From a container of the pod plan to the runtime's `ContainerConfig`, as the kubelet's
//! `generateContainerConfig` does (`pkg/kubelet/kuberuntime/kuberuntime_container.go`).

use std::path::PathBuf;

use podgrace_core::plan::{ContainerPlan, SourceSpan};
use podgrace_core::rules::runtime::{container_stop_signal, Signal};

use crate::runtime::ContainerConfig;

/// A container podgrace cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// No `command`: the image's ENTRYPOINT would apply, and podgrace cannot read images.
    /// Placed like a manifest error (`FILE:LINE:COL: PATH: ...`) at the `command` field, or
    /// at the container when it has none.
    #[error("{}:{}:{}: {}: container {container:?} has no command: podgrace runs local processes and cannot read the image's ENTRYPOINT; set command (and args)", span.file, span.line, span.column, span.path)]
    NoCommand {
        /// The container's name.
        container: String,
        /// Where in the manifest (file, line, column, field path).
        span: SourceSpan,
    },
    /// The stop signal is not a signal name.
    #[error("container {container:?}: {reason}")]
    StopSignal {
        /// The container's name.
        container: String,
        /// What is wrong with the signal.
        reason: String,
    },
}

/// What the local kubelet needs of one container besides its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// The CRI `ContainerConfig` the kubelet would send to `CreateContainer`.
    pub config: ContainerConfig,
    /// The stop signal the runtime sends (see [`container_stop_signal`]).
    pub stop_signal: Signal,
    /// Environment variables whose value comes from a reference podgrace cannot resolve.
    pub unresolved_env: Vec<String>,
}

/// Builds the runtime config of `container`: `command` and `args`, literal `env` values,
/// `workingDir`, the image and its pull policy, and the stop signal from
/// `lifecycle.stopSignal`, `stop_signal_override` (a user's `--stop-signal`), the known image
/// STOPSIGNAL, or SIGTERM. `POD_IP`-style downward-API values are not known here; they are left
/// out and listed in `unresolved_env`.
///
/// With `images` (a runtime that runs images, containerd), a container without `command` runs
/// the image's ENTRYPOINT, and without `lifecycle.stopSignal` or an override the config holds no
/// stop signal: the runtime decides (containerd: the image's STOPSIGNAL, else SIGTERM), and
/// [`ContainerSpec::stop_signal`] is a first guess that the runtime's answer replaces.
///
/// # Errors
/// [`SpecError::NoCommand`] for a container without `command` when not `images`;
/// [`SpecError::StopSignal`] for a stop signal that is not a signal name.
pub fn container_spec(
    container: &ContainerPlan,
    stop_signal_override: Option<&str>,
    force_host: bool,
    images: bool,
) -> Result<ContainerSpec, SpecError> {
    if container.command.is_empty() && !images {
        return Err(SpecError::NoCommand {
            container: container.name.clone(),
            span: container.field_span("command"),
        });
    }
    let requested = stop_signal_override.or(container.stop_signal.as_deref());
    let stop_signal =
        container_stop_signal(requested, container.image.as_deref()).map_err(|e| {
            SpecError::StopSignal {
                container: container.name.clone(),
                reason: e.to_string(),
            }
        })?;
    let mut env = Vec::new();
    let mut unresolved_env = Vec::new();
    for (name, value) in &container.env {
        match value {
            Some(v) => env.push((name.clone(), v.clone())),
            None => unresolved_env.push(name.clone()),
        }
    }
    let config_signal = if images && requested.is_none() {
        None
    } else {
        Some(stop_signal.number())
    };
    Ok(ContainerSpec {
        config: ContainerConfig {
            name: container.name.clone(),
            image: container.image.clone().unwrap_or_default(),
            pull_policy: crate::kubelet::cri::pull_policy(container),
            command: container.command.clone(),
            args: container.args.clone(),
            env,
            working_dir: container.working_dir.as_ref().map(PathBuf::from),
            stop_signal: config_signal,
            force_host,
            ..ContainerConfig::default()
        },
        stop_signal,
        unresolved_env,
    })
}
