//! Runs the drill's open-loop load once, for `bench/proxy.sh`, and prints one line:
//! `target_rps achieved_rps completed_in_window_per_s p50_ms p99_ms failures`.
//!
//! `bench_load TARGET RPS SECONDS CONNECTIONS`

use podgrace_drill::load::{self, LoadConfig};
use podgrace_drill::report::{FailuresByKind, LatencyMs};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = (|| {
        let target: SocketAddr = args.first()?.parse().ok()?;
        let rps: f64 = args.get(1)?.parse().ok()?;
        let secs: f64 = args.get(2)?.parse().ok()?;
        let conns: usize = args.get(3)?.parse().ok()?;
        Some((target, rps, secs, conns))
    })();
    let Some((target, rps, secs, conns)) = parsed else {
        eprintln!("usage: bench_load TARGET RPS SECONDS CONNECTIONS");
        return ExitCode::from(2);
    };
    let rt = match std::env::var("BENCH_RT").as_deref() {
        Ok("current") => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    let Ok(rt) = rt else {
        return ExitCode::from(1);
    };
    rt.block_on(async move {
        let duration = Duration::from_secs_f64(secs);
        let mut cfg = LoadConfig::new(target, duration);
        cfg.rps = rps;
        cfg.connections = conns;
        cfg.timeout = Duration::from_secs(30);
        match load::run(cfg).await {
            Ok(r) => {
                // Throughput: requests completed within the scheduled window.
                let window = r.records.first().map(|f| f.intended).unwrap_or_default() + duration;
                let completed = r.records.iter().filter(|x| x.done <= window).count();
                let l = LatencyMs::from_histogram_us(&r.latency_us);
                let f = FailuresByKind::count(&r.records);
                println!(
                    "{rps:.0} {:.1} {:.1} {:.3} {:.3} {}",
                    r.achieved_rps,
                    completed as f64 / secs,
                    l.p50,
                    l.p99,
                    f.total()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench_load: {e}");
                ExitCode::from(1)
            }
        }
    })
}
