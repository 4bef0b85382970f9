//! The drill's limits and the checks of its settings, made before anything starts (no pod, no
//! proxy, no containerd): every value a user gives `podgrace drill` is checked here, with the
//! message the CLI prints (exit 2), so that unit tests reach the rules and the binary only
//! parses and renders.

use std::time::Duration;

use crate::demoapp::MAX_STREAM_SECONDS;
use crate::load::{scheduled_requests, Protocol, MAX_REQUESTS};
use crate::proxy::Balancing;
use crate::scenario::Scenario;

/// The most replicas of a drill: each is a pod with its own network namespace, and the /24 pod
/// range holds 253.
pub const MAX_REPLICAS: usize = 100;
/// The longest drill, and the longest endpoint lag or minSyncPeriod: 24 hours.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Streams of each kind per drill (`--streams`, `--idle-streams`): each holds a connection of
/// its own.
pub const MAX_STREAMS: usize = 1000;
/// Connections of the request load (`--connections`).
pub const MAX_CONNECTIONS: usize = 10_000;
/// The highest request rate, requests per second.
pub const MAX_RPS: f64 = 1_000_000.0;

/// The defaults of the request and stream flags, shared by the CLI's declarations and by
/// [`DrillFlags::unused`], which names the ones set away from them.
pub mod defaults {
    /// `--connections`.
    pub const CONNECTIONS: usize = 16;
    /// `--stream-seconds`, seconds.
    pub const STREAM_SECONDS: f64 = 60.0;
    /// `--path`.
    pub const PATH: &str = "/";
    /// `--method`.
    pub const METHOD: &str = "GET";
    /// `--timeout`, as the CLI parses it.
    pub const TIMEOUT: &str = "2s";
}

/// The drill's settings as given, before any of them is used: what [`DrillFlags::check`]
/// refuses and [`DrillFlags::unused`] warns about.
#[derive(Debug, Clone)]
pub struct DrillFlags {
    /// `--scenario`.
    pub scenario: Scenario,
    /// Whether `--grace-period`, `--force` or `--now` was given (away from its default).
    pub delete_flags_given: bool,
    /// `--replicas`, when given.
    pub replicas: Option<usize>,
    /// `--rps`, requests per second.
    pub rps: f64,
    /// `--protocol`.
    pub protocol: Protocol,
    /// `--proxy`: kube-proxy (per connection) or ingress (per request).
    pub balancing: Balancing,
    /// `--connections`.
    pub connections: usize,
    /// `--streams` (data streams).
    pub streams: usize,
    /// `--stream-seconds`, seconds.
    pub stream_seconds: f64,
    /// `--idle-streams`.
    pub idle_streams: usize,
    /// `--duration`.
    pub duration: Duration,
    /// The longest lag `--endpoint-lag` gives (a fixed lag, or a range's MAX); `None` for
    /// kube-proxy's sync or no flag.
    pub endpoint_lag_max: Option<Duration>,
    /// Whether the lag is a range of per-pod lags (given, or the built-in demo's default).
    pub lag_is_range: bool,
    /// Whether `--seed` was given.
    pub seed_given: bool,
    /// `--iptables-min-sync-period`.
    pub iptables_min_sync_period: Duration,
    /// `--path`.
    pub path: String,
    /// `--method`.
    pub method: String,
    /// `--timeout`.
    pub timeout: Duration,
    /// `--port`, when given.
    pub port: Option<u16>,
    /// `--disrupt-after`.
    pub disrupt_after: Duration,
}

/// A setting [`DrillFlags::check`] refuses: the message names the flag and its limits (the CLI
/// prints it and exits 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

/// Flags that were set but have no effect in this drill, and why ([`DrillFlags::unused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedFlags {
    /// The flags, as spelled on the command line (`--path`).
    pub flags: Vec<&'static str>,
    /// Why nothing reads them.
    pub why: &'static str,
}

impl std::fmt::Display for UnusedFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = if self.flags.len() == 1 { "has" } else { "have" };
        write!(
            f,
            "{} {verb} no effect: {}",
            self.flags.join(", "),
            self.why
        )
    }
}

impl DrillFlags {
    /// Checks every setting against the drill's limits and against each other, in the order
    /// the CLI has always reported them (the first problem wins).
    ///
    /// # Errors
    /// [`FlagError`] with the message for the first setting out of its limits.
    pub fn check(&self) -> Result<(), FlagError> {
        let bad = |m: String| Err(FlagError(m));
        if self.delete_flags_given && self.scenario != Scenario::Delete {
            return bad("--grace-period, --force and --now shape the delete of --scenario delete; a rollout's deletes come from the ReplicaSet controller with the pod's own grace, and an eviction's grace from the kubelet (--eviction-max-pod-grace-period)".into());
        }
        let with_streams = self.streams + self.idle_streams > 0;
        if self.streams > MAX_STREAMS || self.idle_streams > MAX_STREAMS {
            return bad(format!(
                "--streams and --idle-streams must be at most {MAX_STREAMS}"
            ));
        }
        if !(self.stream_seconds > 0.0 && self.stream_seconds <= MAX_STREAM_SECONDS) {
            return bad(format!(
                "--stream-seconds must be above 0 and at most {MAX_STREAM_SECONDS} (the demo app's longest stream)"
            ));
        }
        if !(0.0..=MAX_RPS).contains(&self.rps) || (self.rps == 0.0 && !with_streams) {
            return bad(
                "--rps must be above 0 and at most 1000000 (0 only with --streams or --idle-streams)"
                    .into(),
            );
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return bad(format!("--connections must be 1 to {MAX_CONNECTIONS}"));
        }
        if self.protocol == Protocol::H2c && self.balancing == Balancing::PerRequest {
            return bad("--proxy ingress balances HTTP/1.1 requests; with --protocol h2c the proxy pins each connection (use --proxy kube-proxy)".into());
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return bad("--duration must be above 0 and at most 24h".into());
        }
        let scheduled = scheduled_requests(self.rps, self.duration);
        if scheduled > MAX_REQUESTS {
            return bad(format!(
                "--rps × --duration schedules {scheduled} requests; a drill keeps records of at most {MAX_REQUESTS}"
            ));
        }
        if self.rps > 0.0 && scheduled == 0 {
            return bad(format!(
                "--rps {} for --duration {:.1} s schedules no request at all",
                self.rps,
                self.duration.as_secs_f64()
            ));
        }
        if self.endpoint_lag_max.is_some_and(|l| l > MAX_DURATION) {
            return bad("--endpoint-lag must be at most 24h".into());
        }
        if self.iptables_min_sync_period > MAX_DURATION {
            return bad("--iptables-min-sync-period must be at most 24h".into());
        }
        if self.path.parse::<hyper::Uri>().is_err() {
            return bad(format!(
                "--path {:?} is not a valid request target (no spaces; percent-encode them)",
                self.path
            ));
        }
        if self.disrupt_after >= self.duration {
            return bad(format!(
                "--disrupt-after ({:.1} s) must come before the load ends (--duration {:.1} s)",
                self.disrupt_after.as_secs_f64(),
                self.duration.as_secs_f64()
            ));
        }
        if let Some(r) = self.replicas {
            if !(1..=MAX_REPLICAS).contains(&r) {
                return bad(format!("--replicas must be 1 to {MAX_REPLICAS}"));
            }
        }
        if self.timeout.is_zero() {
            return bad("--timeout must be above 0".into());
        }
        if self.port == Some(0) {
            return bad("--port must be 1 to 65535".into());
        }
        Ok(())
    }

    /// The request method of `--method`, after [`DrillFlags::check`] and the unused-flag
    /// warnings (the order the CLI reports them in).
    ///
    /// # Errors
    /// [`FlagError`] when `--method` is no HTTP method, or `--path` does not start with `/`.
    pub fn method_and_path(&self) -> Result<hyper::Method, FlagError> {
        let method = hyper::Method::from_bytes(self.method.as_bytes())
            .map_err(|_| FlagError(format!("--method: not an HTTP method: {:?}", self.method)))?;
        if !self.path.starts_with('/') {
            return Err(FlagError(format!(
                "--path must start with '/': {:?}",
                self.path
            )));
        }
        Ok(method)
    }

    /// The request and stream flags set away from their defaults where nothing reads them: a
    /// drill that ignores a flag must not look as if it honoured it.
    pub fn unused(&self) -> Vec<UnusedFlags> {
        let mut out = Vec::new();
        if self.rps == 0.0 {
            let request_flags = [
                ("--protocol", self.protocol != Protocol::Http1),
                ("--connections", self.connections != defaults::CONNECTIONS),
                ("--path", self.path != defaults::PATH),
                ("--method", self.method != defaults::METHOD),
            ];
            let flags: Vec<&'static str> = request_flags
                .iter()
                .filter(|(_, set)| *set)
                .map(|(f, _)| *f)
                .collect();
            if !flags.is_empty() {
                out.push(UnusedFlags {
                    flags,
                    why: "--rps 0 sends no requests, only streams",
                });
            }
        }
        if self.seed_given && !self.lag_is_range {
            out.push(UnusedFlags {
                flags: vec!["--seed"],
                why: "it draws the per-pod lags of --endpoint-lag MIN..MAX, and the lag is not a range",
            });
        }
        if self.streams == 0 && self.stream_seconds != defaults::STREAM_SECONDS {
            out.push(UnusedFlags {
                flags: vec!["--stream-seconds"],
                why: "it is the length of the data streams of --streams, and there are none",
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> DrillFlags {
        DrillFlags {
            scenario: Scenario::Rollout,
            delete_flags_given: false,
            replicas: None,
            rps: 200.0,
            protocol: Protocol::Http1,
            balancing: Balancing::PerConnection,
            connections: defaults::CONNECTIONS,
            streams: 0,
            stream_seconds: defaults::STREAM_SECONDS,
            idle_streams: 0,
            duration: Duration::from_secs(8),
            endpoint_lag_max: None,
            lag_is_range: false,
            seed_given: false,
            iptables_min_sync_period: Duration::from_secs(1),
            path: "/".into(),
            method: "GET".into(),
            timeout: Duration::from_secs(2),
            port: None,
            disrupt_after: Duration::from_secs(1),
        }
    }

    fn refused(f: DrillFlags) -> String {
        f.check().expect_err("refused").0
    }

    #[test]
    fn the_defaults_pass() {
        assert_eq!(flags().check(), Ok(()));
        assert_eq!(flags().method_and_path(), Ok(hyper::Method::GET));
        assert!(flags().unused().is_empty());
    }

    #[test]
    fn each_limit_is_inclusive_and_named() {
        // At the limit: accepted.
        let mut f = flags();
        f.replicas = Some(MAX_REPLICAS);
        f.streams = MAX_STREAMS;
        f.idle_streams = MAX_STREAMS;
        f.connections = MAX_CONNECTIONS;
        f.endpoint_lag_max = Some(MAX_DURATION);
        f.iptables_min_sync_period = MAX_DURATION;
        assert_eq!(f.check(), Ok(()));
        // One past it: refused with the flag's name and limit.
        let mut f = flags();
        f.replicas = Some(MAX_REPLICAS + 1);
        assert_eq!(refused(f), "--replicas must be 1 to 100");
        let mut f = flags();
        f.replicas = Some(0);
        assert_eq!(refused(f), "--replicas must be 1 to 100");
        let mut f = flags();
        f.idle_streams = MAX_STREAMS + 1;
        assert_eq!(
            refused(f),
            "--streams and --idle-streams must be at most 1000"
        );
        let mut f = flags();
        f.connections = 0;
        assert_eq!(refused(f), "--connections must be 1 to 10000");
        let mut f = flags();
        f.endpoint_lag_max = Some(MAX_DURATION + Duration::from_millis(1));
        assert_eq!(refused(f), "--endpoint-lag must be at most 24h");
        let mut f = flags();
        f.port = Some(0);
        assert_eq!(refused(f), "--port must be 1 to 65535");
        let mut f = flags();
        f.timeout = Duration::ZERO;
        assert_eq!(refused(f), "--timeout must be above 0");
    }

    #[test]
    fn the_load_must_schedule_between_one_and_max_requests() {
        let mut f = flags();
        f.rps = 0.0;
        assert!(refused(f.clone()).starts_with("--rps must be above 0"));
        // Streams alone make --rps 0 a drill.
        f.idle_streams = 1;
        assert_eq!(f.check(), Ok(()));
        let mut f = flags();
        f.rps = 0.05;
        f.duration = Duration::from_secs(5);
        f.disrupt_after = Duration::from_secs(1);
        assert_eq!(
            refused(f),
            "--rps 0.05 for --duration 5.0 s schedules no request at all"
        );
        let mut f = flags();
        f.rps = MAX_RPS;
        f.duration = Duration::from_secs(11);
        assert_eq!(
            refused(f),
            "--rps × --duration schedules 11000000 requests; a drill keeps records of at most 10000000"
        );
    }

    #[test]
    fn settings_are_checked_against_each_other() {
        let mut f = flags();
        f.disrupt_after = f.duration;
        assert_eq!(
            refused(f),
            "--disrupt-after (8.0 s) must come before the load ends (--duration 8.0 s)"
        );
        let mut f = flags();
        f.protocol = Protocol::H2c;
        f.balancing = Balancing::PerRequest;
        assert!(refused(f).starts_with("--proxy ingress balances HTTP/1.1 requests"));
        let mut f = flags();
        f.delete_flags_given = true;
        assert!(refused(f.clone()).starts_with("--grace-period, --force and --now shape"));
        f.scenario = Scenario::Delete;
        assert_eq!(f.check(), Ok(()));
    }

    #[test]
    fn a_bad_method_or_path_is_named() {
        let mut f = flags();
        f.path = "/a b".into();
        assert!(refused(f).starts_with("--path \"/a b\" is not a valid request target"));
        let mut f = flags();
        f.path = "*".into();
        assert_eq!(f.check(), Ok(()));
        assert_eq!(
            f.method_and_path(),
            Err(FlagError("--path must start with '/': \"*\"".into()))
        );
        let mut f = flags();
        f.method = "G ET".into();
        assert_eq!(
            f.method_and_path(),
            Err(FlagError("--method: not an HTTP method: \"G ET\"".into()))
        );
    }

    #[test]
    fn flags_nothing_reads_are_named_with_the_reason() {
        let mut f = flags();
        f.rps = 0.0;
        f.idle_streams = 2;
        f.path = "/x".into();
        f.connections = 4;
        f.seed_given = true;
        f.stream_seconds = 5.0;
        let unused: Vec<String> = f.unused().iter().map(ToString::to_string).collect();
        assert_eq!(
            unused,
            [
                "--connections, --path have no effect: --rps 0 sends no requests, only streams",
                "--seed has no effect: it draws the per-pod lags of --endpoint-lag MIN..MAX, and the lag is not a range",
                "--stream-seconds has no effect: it is the length of the data streams of --streams, and there are none",
            ]
        );
        // A range reads the seed.
        f.lag_is_range = true;
        assert_eq!(f.unused().len(), 2);
    }
}
