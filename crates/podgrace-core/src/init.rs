//! `podgrace init`, a PID 1 for containers: which signals it forwards, how it maps them, how it
//! holds SIGTERM for a drain delay, and the exit code it reports, as a state machine without I/O.
//!
//! The behaviour follows tini (`krallin/tini` `src/tini.c`, v0.19) where tini has the feature,
//! and dumb-init (`Yelp/dumb-init` `dumb-init.c`, v1.2.5) for signal rewriting:
//!
//! * every catchable signal is forwarded to the child, or to its process group with `-g`
//!   (tini `-g`; dumb-init's default setsid mode), except SIGCHLD (init reaps instead), and
//!   SIGTTIN/SIGTTOU, which init absorbs, as tini does (its child is the terminal's foreground
//!   process group). SIGKILL and SIGSTOP cannot be caught; the synchronous fault signals
//!   (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT) are init's own;
//! * `--map FROM=TO` sends TO instead of FROM (dumb-init `--rewrite FROM:TO`): SIGTERM=SIGQUIT
//!   gives nginx its graceful quit behind a runtime that sends SIGTERM;
//! * the exit code is the child's, or 128 + n when a signal n killed it (tini, dumb-init and
//!   the shell convention; containerd reports the same 137 for SIGKILL);
//! * `--drain-delay D` (podgrace's own): the first SIGTERM is held for D before it is forwarded
//!   (a preStop sleep without a shell), readiness fails at once (`--ready-file` is removed), and
//!   a second SIGTERM during the delay is forwarded at once. Other signals are never held.
//!
//! Times are milliseconds since init started (`now_ms`).

use crate::rules::runtime::{parse_signal, Signal};

/// Signals init never forwards (see the module docs): SIGCHLD, SIGKILL, SIGSTOP, SIGTTIN,
/// SIGTTOU and the synchronous fault signals.
pub const NOT_FORWARDED: [i32; 12] = [
    17, // SIGCHLD
    9,  // SIGKILL
    19, // SIGSTOP
    21, // SIGTTIN
    22, // SIGTTOU
    11, // SIGSEGV
    7,  // SIGBUS
    8,  // SIGFPE
    4,  // SIGILL
    5,  // SIGTRAP
    31, // SIGSYS
    6,  // SIGABRT
];

/// Whether init forwards `sig` (see [`NOT_FORWARDED`]).
pub fn forwards(sig: Signal) -> bool {
    !NOT_FORWARDED.contains(&sig.number())
}

/// An `init` flag that cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InitConfigError {
    /// `--map` without `=`.
    #[error("--map {0:?}: expected FROM=TO, such as SIGTERM=SIGQUIT")]
    MapSyntax(String),
    /// A signal name or number that Linux does not have.
    #[error("--map {arg:?}: {reason}")]
    MapSignal {
        /// The `--map` argument as given.
        arg: String,
        /// What is wrong with the signal name or number.
        reason: String,
    },
    /// A FROM signal init never receives to forward (SIGKILL, SIGCHLD ...).
    #[error(
        "--map {arg:?}: init does not forward {signal} (it cannot be caught, or init keeps it)"
    )]
    MapNotForwarded {
        /// The `--map` argument as given.
        arg: String,
        /// The FROM signal's canonical name.
        signal: String,
    },
    /// The same FROM twice.
    #[error("--map {arg:?}: {signal} is already mapped")]
    MapTwice {
        /// The `--map` argument as given.
        arg: String,
        /// The FROM signal's canonical name.
        signal: String,
    },
}

/// One `--map FROM=TO` (`SIGTERM=SIGQUIT`, `TERM=QUIT`, `15=3`). Errors: [`InitConfigError`].
pub fn parse_mapping(arg: &str) -> Result<(Signal, Signal), InitConfigError> {
    let (from, to) = arg
        .split_once('=')
        .ok_or_else(|| InitConfigError::MapSyntax(arg.to_string()))?;
    let sig = |s: &str| {
        parse_signal(s).map_err(|e| InitConfigError::MapSignal {
            arg: arg.to_string(),
            reason: e.to_string(),
        })
    };
    let (from, to) = (sig(from)?, sig(to)?);
    if !forwards(from) {
        return Err(InitConfigError::MapNotForwarded {
            arg: arg.to_string(),
            signal: from.name(),
        });
    }
    Ok((from, to))
}

/// What `init` was told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitConfig {
    /// `--map FROM=TO` pairs.
    pub map: Vec<(Signal, Signal)>,
    /// `--drain-delay`, in milliseconds.
    pub drain_delay_ms: Option<u64>,
}

impl InitConfig {
    /// A config from `--map` arguments and a drain delay. Errors: [`InitConfigError`] (a bad
    /// mapping, or one FROM mapped twice).
    pub fn new(maps: &[String], drain_delay_ms: Option<u64>) -> Result<Self, InitConfigError> {
        let mut map: Vec<(Signal, Signal)> = Vec::new();
        for arg in maps {
            let (from, to) = parse_mapping(arg)?;
            if map.iter().any(|(f, _)| *f == from) {
                return Err(InitConfigError::MapTwice {
                    arg: arg.clone(),
                    signal: from.name(),
                });
            }
            map.push((from, to));
        }
        Ok(InitConfig {
            map,
            drain_delay_ms,
        })
    }

    /// The signal sent for a received `sig`.
    pub fn mapped(&self, sig: Signal) -> Signal {
        self.map
            .iter()
            .find(|(f, _)| *f == sig)
            .map_or(sig, |(_, t)| *t)
    }
}

/// What init must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send this signal to the child (or its process group with `-g`).
    Send(Signal),
    /// Fail readiness: remove the `--ready-file`.
    FailReadiness,
    /// Tell the log: the first SIGTERM is held until `until_ms`.
    Holding {
        /// When the held SIGTERM is forwarded, milliseconds since init started.
        until_ms: u64,
    },
    /// Tell the log: a second SIGTERM ended the hold early.
    HoldCut,
}

/// The forwarding state of one init (see the module docs).
#[derive(Debug, Clone)]
pub struct Forwarder {
    config: InitConfig,
    /// The held SIGTERM's release instant.
    held_until: Option<u64>,
    /// Whether a SIGTERM has come (the drain delay applies to the first only).
    got_sigterm: bool,
}

impl Forwarder {
    /// A forwarder that has seen no signal yet, following `config` (mappings and the drain delay,
    /// milliseconds).
    pub fn new(config: InitConfig) -> Self {
        Forwarder {
            config,
            held_until: None,
            got_sigterm: false,
        }
    }

    /// `sig` arrived at `now_ms`. Returns what to do, in order.
    pub fn on_signal(&mut self, sig: Signal, now_ms: u64) -> Vec<Action> {
        if !forwards(sig) {
            return Vec::new();
        }
        if sig != Signal::SIGTERM {
            return vec![Action::Send(self.config.mapped(sig))];
        }
        let first = !self.got_sigterm;
        self.got_sigterm = true;
        if self.held_until.take().is_some() {
            return vec![Action::HoldCut, Action::Send(self.config.mapped(sig))];
        }
        match (first, self.config.drain_delay_ms) {
            (true, Some(d)) if d > 0 => {
                let until_ms = now_ms.saturating_add(d);
                self.held_until = Some(until_ms);
                vec![Action::FailReadiness, Action::Holding { until_ms }]
            }
            (true, _) => vec![Action::FailReadiness, Action::Send(self.config.mapped(sig))],
            (false, _) => vec![Action::Send(self.config.mapped(sig))],
        }
    }

    /// When [`Forwarder::on_time`] must be called next (the held SIGTERM's release).
    pub fn deadline_ms(&self) -> Option<u64> {
        self.held_until
    }

    /// The clock reached `now_ms`: releases a held SIGTERM that is due.
    pub fn on_time(&mut self, now_ms: u64) -> Vec<Action> {
        match self.held_until {
            Some(until) if now_ms >= until => {
                self.held_until = None;
                vec![Action::Send(self.config.mapped(Signal::SIGTERM))]
            }
            _ => Vec::new(),
        }
    }
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildExit {
    /// `exit(code)` (0..=255).
    Code(u8),
    /// Killed by this signal number.
    Signal(i32),
}

/// init's own exit code: the child's code, or 128 + the signal that killed it (at most 255).
pub fn exit_code(exit: ChildExit) -> u8 {
    match exit {
        ChildExit::Code(c) => c,
        ChildExit::Signal(n) => u8::try_from(128 + n.clamp(0, 127)).unwrap_or(255),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(s: &str) -> Signal {
        parse_signal(s).unwrap()
    }

    #[test]
    fn mappings_take_names_and_numbers_and_refuse_what_init_never_forwards() {
        assert_eq!(
            parse_mapping("SIGTERM=SIGQUIT"),
            Ok((Signal::SIGTERM, Signal::SIGQUIT))
        );
        assert_eq!(
            parse_mapping("term=3"),
            Ok((Signal::SIGTERM, Signal::SIGQUIT))
        );
        assert_eq!(
            parse_mapping("SIGTERM"),
            Err(InitConfigError::MapSyntax("SIGTERM".into()))
        );
        assert!(matches!(
            parse_mapping("SIGTERM=SIGNOPE"),
            Err(InitConfigError::MapSignal { .. })
        ));
        for from in ["SIGKILL", "SIGCHLD", "SIGSTOP", "SIGTTOU", "SIGSEGV"] {
            assert!(
                matches!(
                    parse_mapping(&format!("{from}=SIGTERM")),
                    Err(InitConfigError::MapNotForwarded { .. })
                ),
                "{from}"
            );
        }
        // Mapping to SIGKILL is allowed (a runtime's stop signal turned into a hard stop).
        assert_eq!(
            parse_mapping("SIGINT=SIGKILL"),
            Ok((Signal::SIGINT, Signal::SIGKILL))
        );
        let twice = InitConfig::new(&["TERM=QUIT".into(), "15=2".into()], None);
        assert!(matches!(twice, Err(InitConfigError::MapTwice { .. })));
    }

    #[test]
    fn without_a_delay_every_signal_is_forwarded_at_once_mapped() {
        let c =
            InitConfig::new(&["SIGTERM=SIGQUIT".into(), "SIGUSR1=SIGHUP".into()], None).unwrap();
        let mut f = Forwarder::new(c);
        assert_eq!(
            f.on_signal(Signal::SIGTERM, 0),
            [Action::FailReadiness, Action::Send(Signal::SIGQUIT)]
        );
        assert_eq!(
            f.on_signal(Signal::SIGTERM, 5),
            [Action::Send(Signal::SIGQUIT)]
        );
        assert_eq!(
            f.on_signal(Signal::SIGUSR1, 6),
            [Action::Send(Signal::SIGHUP)]
        );
        assert_eq!(
            f.on_signal(Signal::SIGWINCH, 7),
            [Action::Send(Signal::SIGWINCH)]
        );
        assert_eq!(
            f.on_signal(sig("SIGRTMIN+3"), 8),
            [Action::Send(sig("SIGRTMIN+3"))]
        );
        assert!(f.on_signal(sig("SIGCHLD"), 9).is_empty());
        assert!(f.on_signal(sig("SIGTTIN"), 9).is_empty());
        assert_eq!(f.deadline_ms(), None);
    }

    #[test]
    fn the_first_sigterm_is_held_for_the_drain_delay() {
        let c = InitConfig::new(&["SIGTERM=SIGQUIT".into()], Some(5_000)).unwrap();
        let mut f = Forwarder::new(c);
        assert_eq!(
            f.on_signal(Signal::SIGTERM, 1_000),
            [Action::FailReadiness, Action::Holding { until_ms: 6_000 }]
        );
        assert_eq!(f.deadline_ms(), Some(6_000));
        // Other signals are not held.
        assert_eq!(
            f.on_signal(Signal::SIGHUP, 2_000),
            [Action::Send(Signal::SIGHUP)]
        );
        assert!(f.on_time(5_999).is_empty());
        assert_eq!(f.on_time(6_000), [Action::Send(Signal::SIGQUIT)]);
        assert_eq!(f.deadline_ms(), None);
        assert!(f.on_time(7_000).is_empty());
        // A later SIGTERM is forwarded at once: the delay was for the first.
        assert_eq!(
            f.on_signal(Signal::SIGTERM, 8_000),
            [Action::Send(Signal::SIGQUIT)]
        );
    }

    #[test]
    fn a_second_sigterm_during_the_delay_is_forwarded_at_once() {
        let mut f = Forwarder::new(InitConfig::new(&[], Some(30_000)).unwrap());
        f.on_signal(Signal::SIGTERM, 0);
        assert_eq!(
            f.on_signal(Signal::SIGTERM, 400),
            [Action::HoldCut, Action::Send(Signal::SIGTERM)]
        );
        assert_eq!(f.deadline_ms(), None);
        assert!(f.on_time(30_000).is_empty());
    }

    #[test]
    fn a_zero_delay_holds_nothing() {
        let mut f = Forwarder::new(InitConfig::new(&[], Some(0)).unwrap());
        assert_eq!(
            f.on_signal(Signal::SIGTERM, 0),
            [Action::FailReadiness, Action::Send(Signal::SIGTERM)]
        );
    }

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(exit_code(ChildExit::Code(0)), 0);
        assert_eq!(exit_code(ChildExit::Code(7)), 7);
        assert_eq!(exit_code(ChildExit::Signal(9)), 137);
        assert_eq!(exit_code(ChildExit::Signal(15)), 143);
        assert_eq!(exit_code(ChildExit::Signal(64)), 192);
        assert_eq!(exit_code(ChildExit::Signal(500)), 255);
    }

    #[test]
    fn huge_delays_saturate() {
        let mut f = Forwarder::new(InitConfig::new(&[], Some(u64::MAX)).unwrap());
        assert_eq!(
            f.on_signal(Signal::SIGTERM, 10),
            [
                Action::FailReadiness,
                Action::Holding { until_ms: u64::MAX }
            ]
        );
    }
}
