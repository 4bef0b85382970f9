//! What the probes of one trial say, and the summary over the trials: pure functions over the
//! records, times in seconds since the prober's epoch.
//!
//! The endpoint lag of one trial is the time from the moment the API marked the pod terminating
//! (its delete's answer; the midpoint of the call, so the error is at most half its round trip)
//! to the opening of the last connection the pod answered: the last route to it that some load
//! balancer, ingress or kube-proxy still chose. A pod whose preStop keeps it serving answers
//! whatever reaches it, so that instant is where the routes stopped, not where the pod stopped.

use std::time::Duration;

use super::probe::Probe;

/// One trial read from the probes.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// When the connection of the pod's last answered probe was opened (`None`: it answered none
    /// after the mark).
    pub last_answer: Option<Duration>,
    /// The lag: `last_answer − mark`, 0 when it answered nothing after the mark.
    pub lag: Duration,
    /// Probes the pod answered whose connections were opened after the mark.
    pub answered_after_mark: usize,
}

/// Reads `victim`'s last answer after `mark` from `probes`.
pub fn read(probes: &[Probe], victim: &str, mark: Duration) -> Reading {
    let mine = probes
        .iter()
        .filter(|p| p.status.is_some() && p.pod.as_deref() == Some(victim) && p.sent >= mark);
    let (n, last) = mine.fold((0, None::<Duration>), |(n, last), p| {
        (n + 1, Some(last.map_or(p.sent, |l| l.max(p.sent))))
    });
    Reading {
        last_answer: last,
        lag: last.map_or(Duration::ZERO, |l| l.saturating_sub(mark)),
        answered_after_mark: n,
    }
}

/// Whether a trial is over at `now`: `quiet` has passed since the mark and since the victim's
/// last answer (every probe sent before that has ended, as `quiet` is longer than a probe's
/// timeout).
pub fn over(reading: &Reading, mark: Duration, now: Duration, quiet: Duration) -> bool {
    let since = reading.last_answer.unwrap_or(mark).max(mark);
    now.saturating_sub(since) >= quiet
}

/// The pods that answered probes opened at or after `since`, most answers first.
pub fn answering(probes: &[Probe], since: Duration) -> Vec<(String, usize)> {
    let mut by: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for p in probes
        .iter()
        .filter(|p| p.sent >= since && p.status.is_some())
    {
        if let Some(pod) = p.pod.as_deref() {
            *by.entry(pod).or_default() += 1;
        }
    }
    let mut v: Vec<(String, usize)> = by.into_iter().map(|(k, n)| (k.to_string(), n)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// The nearest-rank percentile `q` (0 < q ≤ 1) of `sorted` (ascending); `None` when empty.
pub fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The lags over the trials and the preStop sleep they call for.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Median lag.
    pub p50: Duration,
    /// 99th percentile (nearest rank: the largest of fewer than 100 trials).
    pub p99: Duration,
    /// The largest.
    pub max: Duration,
    /// The recommended preStop sleep, whole seconds: `p99 + margin`, rounded up (the sleep
    /// action takes whole seconds).
    pub recommended_prestop_seconds: u64,
}

/// The preStop sleep for a lag: `lag + margin` in whole seconds, rounded up.
pub fn recommended_prestop_seconds(lag: Duration, margin: Duration) -> u64 {
    let s = (lag + margin).as_secs_f64();
    // A hair over a whole second from float noise is not the next second.
    (s - 1e-9).ceil().max(0.0) as u64
}

/// The summary of `lags` (any order); `None` without any.
pub fn summarize(lags: &[Duration], margin: Duration) -> Option<Summary> {
    let mut sorted = lags.to_vec();
    sorted.sort();
    let p99 = percentile(&sorted, 0.99)?;
    Some(Summary {
        p50: percentile(&sorted, 0.5)?,
        p99,
        max: *sorted.last()?,
        recommended_prestop_seconds: recommended_prestop_seconds(p99, margin),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sent_ms: u64, pod: &str, ok: bool) -> Probe {
        Probe {
            sent: Duration::from_millis(sent_ms),
            done: Duration::from_millis(sent_ms + 3),
            status: ok.then_some(200),
            pod: ok.then(|| pod.to_string()),
        }
    }

    #[test]
    fn the_lag_is_the_last_route_to_the_pod_after_the_mark() {
        let probes = vec![
            p(900, "a", true),
            p(1000, "a", true),
            p(1010, "b", true),
            p(2480, "a", true),
            p(2500, "b", true),
            p(2510, "a", false),
            p(2520, "b", true),
        ];
        let mark = Duration::from_millis(1000);
        let r = read(&probes, "a", mark);
        assert_eq!(r.last_answer, Some(Duration::from_millis(2480)));
        assert_eq!(r.lag, Duration::from_millis(1480));
        assert_eq!(r.answered_after_mark, 2);
        assert!(!over(
            &r,
            mark,
            Duration::from_millis(4000),
            Duration::from_secs(2)
        ));
        assert!(over(
            &r,
            mark,
            Duration::from_millis(4480),
            Duration::from_secs(2)
        ));
        // No answer after the mark: a lag of 0, over `quiet` after the mark.
        let r = read(&probes, "c", mark);
        assert_eq!((r.lag, r.answered_after_mark), (Duration::ZERO, 0));
        assert!(over(
            &r,
            mark,
            Duration::from_millis(3000),
            Duration::from_secs(2)
        ));
        assert_eq!(
            answering(&probes, Duration::from_millis(2000)),
            vec![("b".to_string(), 2), ("a".to_string(), 1)]
        );
    }

    #[test]
    fn percentiles_and_the_recommendation() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        let s = summarize(&ms(&[1530, 1490, 1510, 1620, 1500]), Duration::from_secs(1)).unwrap();
        assert_eq!(s.p50, Duration::from_millis(1510));
        assert_eq!(s.p99, Duration::from_millis(1620));
        assert_eq!(s.max, Duration::from_millis(1620));
        assert_eq!(s.recommended_prestop_seconds, 3);
        assert_eq!(
            recommended_prestop_seconds(Duration::from_secs(2), Duration::from_secs(1)),
            3
        );
        assert_eq!(
            recommended_prestop_seconds(Duration::from_millis(2001), Duration::from_secs(1)),
            4
        );
        assert!(summarize(&[], Duration::from_secs(1)).is_none());
        let sorted = ms(&(1..=200).collect::<Vec<_>>());
        assert_eq!(percentile(&sorted, 0.99), Some(Duration::from_millis(198)));
        assert_eq!(percentile(&sorted, 0.5), Some(Duration::from_millis(100)));
    }
}
