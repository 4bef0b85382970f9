//! N pod networks made at once (one thread each), then torn down: the wall time of each
//! set-up, and with `RUST_LOG=podgrace::start=debug` every rtnetlink step's time.
//!
//! `cargo run --release -p podgrace-node --example bench_sandbox -- [--pods N]` (root)

use std::time::Instant;

use podgrace_node::sandbox::{NetworkConfig, Sandbox};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "--pods")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let config = NetworkConfig::default();
    // The process-wide first-use work (stale namespaces, the fence) out of the timing.
    drop(Sandbox::create("warm", false, &config).expect("sandbox"));
    let begin = Instant::now();
    let made: Vec<(Sandbox, f64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let config = &config;
                s.spawn(move || {
                    let t = Instant::now();
                    let sb = Sandbox::create(&format!("p{i}"), false, config).expect("sandbox");
                    (sb, t.elapsed().as_secs_f64() * 1e3)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let all = begin.elapsed();
    let mut ms: Vec<f64> = made.iter().map(|(_, m)| *m).collect();
    ms.sort_by(f64::total_cmp);
    println!(
        "{n} pod networks at once: p50 {:.1} ms, max {:.1} ms each; all made in {:.1} ms",
        ms[ms.len() / 2],
        ms[ms.len() - 1],
        all.as_secs_f64() * 1e3
    );
    let t = Instant::now();
    drop(made);
    println!("torn down in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
}
