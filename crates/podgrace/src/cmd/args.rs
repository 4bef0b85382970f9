//! Flag groups shared by the verbs (`#[command(flatten)]`): each flag is spelled, documented and
//! checked once, and means the same in every verb that takes it.

use std::path::PathBuf;

use podgrace_core::rules::apiserver::{kubectl_delete, KubectlDeleteFlags};
use podgrace_core::KubeVersion;
use podgrace_node::sandbox::{NetworkConfig, DEFAULT_POD_NETWORK};

use crate::BadInput;

/// Which cluster, as kubectl's flags say it: `--kubeconfig`, `--context`, `-n/--namespace`
/// (loading rules: [`podgrace_cluster`]).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster
    /// config), as kubectl.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's, else `default`).
    #[arg(long, short = 'n', value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

impl ClusterArgs {
    /// The options for [`podgrace_cluster::connect`]; `all_namespaces` is `-A`.
    pub fn options(&self, all_namespaces: bool) -> podgrace_cluster::ClusterOptions {
        podgrace_cluster::ClusterOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            namespace: self.namespace.clone(),
            all_namespaces,
        }
    }

    /// Whether any of the flags was given.
    pub fn given(&self) -> bool {
        self.kubeconfig.is_some() || self.context.is_some() || self.namespace.is_some()
    }
}

/// `--output text|json`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// An output format.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// `--kubernetes-version X.Y`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct VersionArgs {
    /// The Kubernetes version whose API server and kubelet to reproduce.
    #[arg(long, value_name = "X.Y", default_value_t = KubeVersion::LATEST)]
    pub kubernetes_version: KubeVersion,
}

/// `--pod-network A.B.C.0/24`.
#[derive(clap::Args, Debug, Clone)]
pub struct PodNetworkArgs {
    /// The address range pods take their IPs from (host-only, A.B.C.0/24).
    #[arg(long, value_name = "CIDR", default_value = DEFAULT_POD_NETWORK, value_parser = super::parse_pod_network)]
    pub pod_network: NetworkConfig,
}

/// The kubelet settings every verb that terminates pods takes.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct KubeletArgs {
    /// kubelet evictionMaxPodGracePeriod, seconds (a soft eviction's longest grace; the
    /// kubelet's default 0).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub eviction_max_pod_grace_period: i64,
}

/// `kubectl delete`'s own flags, with kubectl's rules (`DeleteOptions.Complete` and
/// `Validate`): `--grace-period` -1 (the default) means the pod's terminationGracePeriodSeconds,
/// 0 without `--force` is sent as 1; `--force` with 0 or unset is a force delete; `--now` is a
/// grace of 1 and cannot be given with `--grace-period`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct DeleteArgs {
    /// The delete's --grace-period, seconds, as kubectl takes it: -1 is the pod's own
    /// terminationGracePeriodSeconds; 0 without --force is sent as 1.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = -1,
        allow_negative_numbers = true
    )]
    pub grace_period: i64,
    /// The delete is --force: with --grace-period 0 or unset, a force delete (the API object is
    /// removed at once).
    #[arg(long)]
    pub force: bool,
    /// The delete is --now: a grace period of 1 s (cannot be given with --grace-period).
    #[arg(long)]
    pub now: bool,
}

impl DeleteArgs {
    /// The flags, checked as kubectl checks them. Errors: kubectl's own wording
    /// ("--now and --grace-period cannot be specified together"), as bad usage.
    pub fn flags(&self) -> Result<KubectlDeleteFlags, BadInput> {
        let flags = KubectlDeleteFlags {
            grace_period: self.grace_period,
            force: self.force,
            now: self.now,
        };
        kubectl_delete(flags).map_err(|e| BadInput(format!("error: {e}")))?;
        Ok(flags)
    }

    /// Whether any of the flags was given (away from its default).
    pub fn given(&self) -> bool {
        self.grace_period != -1 || self.force || self.now
    }
}

/// Manifest files: positional, and with `-f/--filename` as kubectl takes them (repeatable;
/// `-` for standard input).
#[derive(clap::Args, Debug, Clone)]
pub struct FilesArgs {
    /// Manifest files or directories (`*.yaml`, `*.yml`, `*.json`, recursively); `-` for stdin.
    /// Or objects of a cluster as kubectl names them (`deployment/web`, `pod/NAME`), read with
    /// --kubeconfig, --context and -n.
    #[arg(value_name = "FILE|TYPE/NAME")]
    pub files: Vec<PathBuf>,
    /// A manifest file or directory, as kubectl's -f (repeatable; beside or instead of FILE).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filename: Vec<PathBuf>,
}

/// One manifest file: positional or `-f/--filename`.
#[derive(clap::Args, Debug, Clone)]
pub struct FileArgs {
    /// A manifest with the pod or pod template (`-` for stdin).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The manifest, as kubectl's -f (instead of FILE).
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        conflicts_with = "file"
    )]
    pub filename: Option<PathBuf>,
}

impl FileArgs {
    /// The file given, if any.
    pub fn get(&self) -> Option<&PathBuf> {
        self.file.as_ref().or(self.filename.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        delete: DeleteArgs,
        #[command(flatten)]
        files: FilesArgs,
    }

    fn parse(args: &[&str]) -> T {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied())).expect("parses")
    }

    #[test]
    fn kubectl_rules_for_the_delete_flags() {
        let f = parse(&["x"]).delete;
        assert!(!f.given());
        assert_eq!(f.flags().map(|f| f.grace_period).ok(), Some(-1));
        assert!(parse(&["--grace-period", "0", "x"]).delete.flags().is_ok());
        assert!(parse(&["--force", "x"]).delete.flags().is_ok());
        assert_eq!(
            parse(&["--now", "--grace-period", "5", "x"])
                .delete
                .flags()
                .err()
                .map(|e| e.0),
            Some("error: --now and --grace-period cannot be specified together".to_string())
        );
        assert_eq!(
            parse(&["--force", "--grace-period", "5", "x"])
                .delete
                .flags()
                .err()
                .map(|e| e.0),
            Some(
                "error: --force and --grace-period greater than 0 cannot be specified together"
                    .to_string()
            )
        );
    }

    #[test]
    fn filename_beside_the_positional_files() {
        let t = parse(&["a.yaml", "-f", "b.yaml", "--filename", "c.yaml"]);
        assert_eq!(t.files.files, vec![PathBuf::from("a.yaml")]);
        assert_eq!(
            t.files.filename,
            vec![PathBuf::from("b.yaml"), "c.yaml".into()]
        );
        assert!(parse(&[]).files.files.is_empty());
    }
}

/// `--node-memory`: a quantity of bytes (`512Mi`, `2Gi`), more than 0.
fn parse_node_memory(s: &str) -> Result<i64, String> {
    let q = podgrace_core::rules::quantity::Quantity::parse(s.trim()).map_err(|e| e.to_string())?;
    if q.is_negative() || q.is_zero() {
        return Err("must be more than 0".into());
    }
    Ok(q.value())
}

/// The eviction manager's flags, in the kubelet's syntax and with its defaults (`run`, `drill`,
/// `serve`; `--eviction-max-pod-grace-period` is in [`KubeletArgs`]).
#[derive(clap::Args, Debug, Clone)]
pub struct EvictionArgs {
    /// The node's memory capacity, against which memory.available (capacity − the pods'
    /// working set) is measured: a quantity (`512Mi`, `2Gi`). Default: this machine's MemTotal.
    #[arg(long, value_name = "QUANTITY", value_parser = parse_node_memory)]
    pub node_memory: Option<i64>,
    /// Hard eviction thresholds, as the kubelet's --eviction-hard
    /// (`memory.available<100Mi,nodefs.available<10%`). Default: memory.available<100Mi,
    /// nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15% (only memory.available
    /// is measured).
    #[arg(long, value_name = "SIGNAL<QUANTITY,...")]
    pub eviction_hard: Option<String>,
    /// Soft eviction thresholds (`memory.available<1Gi`); each needs a grace period.
    #[arg(long, value_name = "SIGNAL<QUANTITY,...")]
    pub eviction_soft: Option<String>,
    /// How long a soft threshold must be met before a pod is evicted
    /// (`memory.available=1m30s`, Go durations).
    #[arg(long, value_name = "SIGNAL=DURATION,...")]
    pub eviction_soft_grace_period: Option<String>,
    /// How much more than the threshold an eviction must free before the threshold counts as
    /// resolved (`memory.available=500Mi`).
    #[arg(long, value_name = "SIGNAL=QUANTITY,...")]
    pub eviction_minimum_reclaim: Option<String>,
    /// How long the node keeps a pressure condition after its threshold was last met.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = super::parse_duration)]
    pub eviction_pressure_transition_period: std::time::Duration,
    /// How often the eviction manager measures and decides (the kubelet's
    /// evictionMonitoringPeriod, a fixed 10 s there).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::parse_duration)]
    pub eviction_monitoring_interval: std::time::Duration,
}

impl EvictionArgs {
    /// The eviction manager's settings. Errors: the kubelet's words for a bad threshold,
    /// grace period or minimum reclaim, or a zero monitoring interval (bad usage).
    pub fn settings(
        &self,
        kubelet: &KubeletArgs,
        version: KubeVersion,
    ) -> Result<podgrace_node::eviction::EvictionSettings, BadInput> {
        use podgrace_core::rules::eviction::{
            parse_threshold_config, EvictionConfig, EvictionFlags,
        };
        if self.eviction_monitoring_interval.is_zero() {
            return Err(BadInput(
                "--eviction-monitoring-interval must be more than 0".into(),
            ));
        }
        let thresholds = parse_threshold_config(&EvictionFlags {
            hard: self.eviction_hard.clone(),
            soft: self.eviction_soft.clone(),
            soft_grace_period: self.eviction_soft_grace_period.clone(),
            minimum_reclaim: self.eviction_minimum_reclaim.clone(),
        })
        .map_err(|e| BadInput(format!("error: {e}")))?;
        let node_memory = match self.node_memory {
            Some(m) => m,
            None => podgrace_node::runtime::cgroup::node_resources().memory_capacity,
        };
        Ok(podgrace_node::eviction::EvictionSettings {
            config: EvictionConfig {
                thresholds,
                eviction_max_pod_grace_period_seconds: kubelet.eviction_max_pod_grace_period,
                pressure_transition_period: self.eviction_pressure_transition_period,
            },
            node_memory_bytes: node_memory,
            monitoring_interval: self.eviction_monitoring_interval,
            version,
        })
    }
}

/// `--shutdown-grace-period-by-pod-priority PRIORITY=SECONDS,...`.
fn parse_by_priority(
    s: &str,
) -> Result<Vec<podgrace_core::rules::nodeshutdown::ShutdownGracePeriodByPodPriority>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (prio, secs) = p
                .split_once('=')
                .ok_or_else(|| format!("{p:?}: expected PRIORITY=SECONDS"))?;
            let priority: i32 = prio
                .trim()
                .parse()
                .map_err(|e| format!("{p:?}: priority: {e}"))?;
            let seconds: i64 = secs
                .trim()
                .parse()
                .map_err(|e| format!("{p:?}: seconds: {e}"))?;
            if seconds < 0 {
                return Err(format!("{p:?}: shutdownGracePeriodSeconds must be >= 0"));
            }
            Ok(
                podgrace_core::rules::nodeshutdown::ShutdownGracePeriodByPodPriority {
                    priority,
                    shutdown_grace_period_seconds: seconds,
                },
            )
        })
        .collect()
}

/// Graceful node shutdown's flags (`serve`), in the kubelet's terms. Off unless a period is
/// given, as on the kubelet.
#[derive(clap::Args, Debug, Clone)]
pub struct ShutdownArgs {
    /// shutdownGracePeriod: how long a node shutdown (SIGTERM to serve, or `podgrace node
    /// shutdown`) takes in all; regular pods get what critical pods do not. 0 (the default):
    /// off, and SIGTERM deletes every pod as a drain does.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = super::parse_duration)]
    pub shutdown_grace_period: std::time::Duration,
    /// shutdownGracePeriodCriticalPods: the part of --shutdown-grace-period kept for critical
    /// pods (priority 2000000000 and above), killed after the others.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = super::parse_duration)]
    pub shutdown_grace_period_critical_pods: std::time::Duration,
    /// shutdownGracePeriodByPodPriority, instead of the two periods: `PRIORITY=SECONDS` pairs
    /// (`100000=10,0=30`); pods go to the group of the highest priority at or below theirs and
    /// groups are killed from the lowest.
    #[arg(long, value_name = "PRIORITY=SECONDS,...", value_parser = parse_by_priority)]
    pub shutdown_grace_period_by_pod_priority:
        Option<Vec<podgrace_core::rules::nodeshutdown::ShutdownGracePeriodByPodPriority>>,
}

impl ShutdownArgs {
    /// The priority groups, `None` when off. Errors: the kubelet's validation words.
    pub fn groups(
        &self,
    ) -> Result<
        Option<Vec<podgrace_core::rules::nodeshutdown::ShutdownGracePeriodByPodPriority>>,
        BadInput,
    > {
        podgrace_core::rules::nodeshutdown::shutdown_config(
            self.shutdown_grace_period,
            self.shutdown_grace_period_critical_pods,
            self.shutdown_grace_period_by_pod_priority
                .as_deref()
                .unwrap_or_default(),
        )
        .map_err(|e| BadInput(format!("error: {e}")))
    }
}
